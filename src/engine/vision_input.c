/* vision_input.c - image file -> pixel values -> image rows (see vision_input.h). */
#include "engine/vision_input.h"

#include "core/alloc.h"
#include "image/resize.h"

mxl_status mxl_vision_pixels(const mxl_vlm *v, const mxl_image *im, float **pixels, mxl_error *err) {
    *pixels = NULL;
    const mxl_vlm_preproc *p = &v->pre;
    mxl_image sized = {0, 0, NULL};
    const mxl_image *src = im;
    if (p->do_resize && (im->w != p->width || im->h != p->height)) {
        mxl_status st = mxl_image_resize(im, (int32_t)p->width, (int32_t)p->height, (mxl_resample)p->resample, &sized, err);
        if (st) return st;
        src = &sized;
    }
    if (src->w != p->width || src->h != p->height) {
        mxl_image_free(&sized);
        return mxl_error_set(err, MXL_ERR_ARG, "the image is %dx%d; this model's processor takes %lldx%lld without resizing", src->w, src->h,
                             (long long)p->width, (long long)p->height);
    }
    static const float zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    float *px = mxl_malloc((size_t)(3 * p->width * p->height) * sizeof(float));
    if (!px) {
        mxl_image_free(&sized);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    mxl_image_to_pixels(src, p->do_rescale ? p->rescale : 1.0, p->do_normalize ? p->mean : zero, p->do_normalize ? p->std : one, px);
    mxl_image_free(&sized);
    *pixels = px;
    return MXL_OK;
}

mxl_status mxl_vision_encode_file(const mxl_vlm *v, const char *path, const mxl_image_limits *lim, mxl_threadpool *pool,
                                  float **rows, mxl_error *err) {
    *rows = NULL;
    mxl_image im = {0, 0, NULL};
    float *px = NULL;
    mxl_status st = mxl_image_load(path, lim, &im, err);
    if (!st) st = mxl_vision_pixels(v, &im, &px, err);
    mxl_image_free(&im);
    float *out = NULL;
    if (!st) {
        out = mxl_malloc((size_t)(v->tokens_per_image * v->text_hidden) * sizeof(float));
        st = out ? v->encode(v, px, pool, out, err) : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        if (st) mxl_error_prefix(err, "%s: ", path);
    }
    mxl_free(px);
    if (st) {
        mxl_free(out);
        return st;
    }
    *rows = out;
    return MXL_OK;
}
