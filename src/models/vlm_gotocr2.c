/* vlm_gotocr2.c - GotOcr2ImageProcessor's steps (its PIL backend), the image processor of Aya
 * Vision and InternVL (vlm.h's mxl_vlm_gotocr2): with crop_to_patches, the grid of cols x rows
 * tiles (min_patches <= cols*rows <= max_patches) whose aspect ratio is nearest the image's (on a
 * tie the larger grid while the image's area exceeds half the grid's), the image resized
 * (resample, BICUBIC by default) to cols*S x rows*S and cut into S x S tiles row by row, then when
 * there is more than one tile a thumbnail (the image resized to S x S); without it the image
 * resized to S x S alone; rescale, normalise. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "image/resize.h"
#include "io/json_read.h"
#include "models/vlm.h"

/* get_optimal_tiled_canvas: (cols, rows) for an oh x ow image. */
static void tile_grid(const mxl_vlm_gotocr2 *g, int64_t oh, int64_t ow, int64_t *cols, int64_t *rows) {
    const int64_t S = g->S;
    const double aspect = (double)ow / (double)oh, area = (double)ow * (double)oh;
    double best = INFINITY;
    *cols = *rows = 1;
    /* the arrangements ordered by tile count, then by width (a stable sort of width-major order) */
    for (int64_t p = 1; p <= g->max_tiles; p++) {
        if (p < g->min_tiles) continue;
        for (int64_t w = 1; w <= p; w++) {
            if (p % w) continue;
            const int64_t h = p / w;
            const double diff = fabs(aspect - (double)w / (double)h);
            if (diff < best) best = diff, *cols = w, *rows = h;
            else if (diff == best && area > 0.5 * (double)S * (double)S * (double)w * (double)h) *cols = w, *rows = h;
        }
    }
}

mxl_status mxl_vlm_gotocr2_tiles(const mxl_vlm_preproc *p, const mxl_vlm_gotocr2 *g, const mxl_image *im, float **pixels, int64_t *n_tiles,
                                 int64_t *rows, int64_t *cols, mxl_error *err) {
    const int64_t S = g->S;
    *rows = *cols = 1;
    if (g->crop) tile_grid(g, im->h, im->w, cols, rows);
    const int64_t nt = *cols * *rows > 1 ? *cols * *rows + 1 : 1;
    *n_tiles = nt;
    *pixels = mxl_malloc((size_t)(nt * 3 * S * S) * sizeof(float));
    if (!*pixels) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_image sized = {0, 0, NULL}, thumb = {0, 0, NULL};
    double rs;
    const float *mean, *std;
    mxl_vlm_norm_params(p, &rs, &mean, &std);
    mxl_status st = mxl_image_resize(im, (int32_t)(*cols * S), (int32_t)(*rows * S), (mxl_resample)p->resample, &sized, err);
    for (int64_t i = 0; !st && i < *cols * *rows; i++)
        mxl_image_crop_to_pixels(&sized, (int32_t)(i % *cols * S), (int32_t)(i / *cols * S), (int32_t)S, (int32_t)S, rs, mean, std,
                                 *pixels + i * 3 * S * S);
    if (!st && nt > 1 && !(st = mxl_image_resize(im, (int32_t)S, (int32_t)S, (mxl_resample)p->resample, &thumb, err)))
        mxl_image_to_pixels(&thumb, rs, mean, std, *pixels + (nt - 1) * 3 * S * S);
    mxl_image_free(&sized);
    mxl_image_free(&thumb);
    if (st) mxl_free(*pixels), *pixels = NULL;
    return st;
}

mxl_status mxl_vlm_gotocr2_read(const mxl_checkpoint *ck, const json_t *j, mxl_vlm_preproc *p, mxl_vlm_gotocr2 *g, mxl_error *err) {
    const int64_t S = g->S;
    const json_t *b, *size = json_object_get(j, "size");
    int64_t h = S, w = S, rsm = p->resample;
    if (json_is_object(size) && (mxl_json_int(json_object_get(size, "height"), 1, 1 << 14, &h) || mxl_json_int(json_object_get(size, "width"), 1, 1 << 14, &w)))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's size needs a height and width", ck->dir);
    if (h != S || w != S)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's tiles (%lldx%lld) are not the vision tower's %lldx%lld", ck->dir, (long long)w,
                             (long long)h, (long long)S, (long long)S);
    if (json_object_get(j, "resample") && (mxl_json_int(json_object_get(j, "resample"), 0, 3, &rsm)))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's resample must be NEAREST / LANCZOS / BILINEAR / BICUBIC (0-3)", ck->dir);
    p->resample = (int)rsm;
    mxl_vlm_preproc_json(j, p, NULL);
    if ((b = json_object_get(j, "do_resize")) && json_is_boolean(b) && !json_is_true(b))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: the image processor's do_resize false is not supported", ck->dir);
    if ((b = json_object_get(j, "crop_to_patches")) && json_is_boolean(b)) g->crop = json_is_true(b);
    if ((json_object_get(j, "min_patches") && mxl_json_int(json_object_get(j, "min_patches"), 1, 64, &g->min_tiles)) ||
        (json_object_get(j, "max_patches") && mxl_json_int(json_object_get(j, "max_patches"), 1, 64, &g->max_tiles)) || g->min_tiles > g->max_tiles)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's min_patches / max_patches must be 1 <= min <= max <= 64", ck->dir);
    if (g->max_tiles <= 1) g->crop = false;
    if (p->std[0] == 0 || p->std[1] == 0 || p->std[2] == 0 || !(p->rescale > 0))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: non-zero image_std and a positive rescale_factor are expected", ck->dir);
    return MXL_OK;
}
