/* decode_gif.c - the first frame of a GIF through giflib, placed the way PIL's GifImagePlugin
 * places frame 0 (default LOADING_STRATEGY RGB_AFTER_FIRST):
 *   - the canvas is the logical screen, grown to hold the frame if it reaches past it;
 *   - it starts filled with the frame's transparent index (graphic control extension), else 0;
 *   - the frame's palette is its local colour table, else the global one; a palette that is the
 *     identity gray ramp (entry i = (i, i, i)), or none at all, makes PIL's mode "L": the index is
 *     the gray value; palette entries past the table are black;
 *   - a transparent index survives convert("RGB") as the colour of that entry (the key); with
 *     composite_alpha that index has alpha 0.
 * Only the first frame is read: no later frame is decoded (an animation bomb costs nothing). */
#include <string.h>

#include <gif_lib.h>

#include "core/alloc.h"
#include "image/decode_internal.h"

typedef struct gif_src {
    const uint8_t *data;
    size_t n, pos;
} gif_src;

static int on_read(GifFileType *g, GifByteType *out, int len) {
    gif_src *s = g->UserData;
    if (len <= 0) return 0;
    size_t k = (size_t)len;
    if (k > s->n - s->pos) k = s->n - s->pos;
    memcpy(out, s->data + s->pos, k);
    s->pos += k;
    return (int)k;
}

/* PIL's GifImageFile._is_palette_needed: false when entry i is (i, i, i) for every entry. */
static bool palette_needed(const ColorMapObject *m) {
    for (int i = 0; i < m->ColorCount; i++)
        if (!(m->Colors[i].Red == i && m->Colors[i].Green == i && m->Colors[i].Blue == i)) return true;
    return false;
}

/* The image row of the i-th row stored in an interlaced GIF: four passes, rows 0, 8, 16.. then
 * 4, 12.. then 2, 6.. then 1, 3.. */
static int64_t interlaced_row(int64_t i, int64_t h) {
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    for (int p = 0; p < 4; p++) {
        int64_t count = h > start[p] ? (h - start[p] + step[p] - 1) / step[p] : 0;
        if (i < count) return start[p] + i * step[p];
        i -= count;
    }
    return 0;
}

static const char *gif_err(int code) {
    const char *s = GifErrorString(code);
    return s ? s : "unknown error";
}

mxl_status mxl_image_decode_gif(const uint8_t *data, size_t n, const mxl_image_ctx *c, mxl_image_raw *raw) {
    gif_src src = {data, n, 0};
    int ecode = 0;
    GifFileType *g = DGifOpen(&src, on_read, &ecode);
    if (!g) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: corrupt GIF: %s", c->name, gif_err(ecode));
    mxl_status st = MXL_OK;
    uint8_t *line = NULL;
    int transparent = -1;
    bool have_image = false;
    while (!have_image) {
        GifRecordType rt;
        if (DGifGetRecordType(g, &rt) == GIF_ERROR) {
            st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: corrupt or truncated GIF: %s", c->name, gif_err(g->Error));
            goto done;
        }
        if (rt == EXTENSION_RECORD_TYPE) {
            int code = 0;
            GifByteType *ext = NULL;
            if (DGifGetExtension(g, &code, &ext) == GIF_ERROR) {
                st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: corrupt or truncated GIF: %s", c->name, gif_err(g->Error));
                goto done;
            }
            /* graphic control: ext[0] is the block length, [1] the flags, [4] the index */
            if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4 && (ext[1] & 1)) transparent = ext[4];
            while (ext) {
                if (DGifGetExtensionNext(g, &ext) == GIF_ERROR) {
                    st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: corrupt or truncated GIF: %s", c->name, gif_err(g->Error));
                    goto done;
                }
            }
        } else if (rt == IMAGE_DESC_RECORD_TYPE) {
            if (DGifGetImageDesc(g) == GIF_ERROR) {
                st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: corrupt or truncated GIF: %s", c->name, gif_err(g->Error));
                goto done;
            }
            have_image = true;
        } else if (rt == TERMINATE_RECORD_TYPE) {
            st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: GIF without an image", c->name);
            goto done;
        } else {
            st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: corrupt GIF record", c->name);
            goto done;
        }
    }
    const GifImageDesc *d = &g->Image;
    const int64_t fx0 = d->Left, fy0 = d->Top, fw = d->Width, fh = d->Height;
    if (fw <= 0 || fh <= 0) {
        st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: GIF frame of size %lldx%lld", c->name, (long long)fw, (long long)fh);
        goto done;
    }
    const int64_t cw = fx0 + fw > g->SWidth ? fx0 + fw : g->SWidth, ch = fy0 + fh > g->SHeight ? fy0 + fh : g->SHeight;
    st = mxl_image_check_size(c, cw, ch, 4);
    if (st != MXL_OK) goto done;
    const ColorMapObject *map = d->ColorMap ? d->ColorMap : g->SColorMap;
    const bool is_p = map && palette_needed(map);
    uint8_t lut[256][3];
    memset(lut, 0, sizeof lut);
    for (int i = 0; i < 256; i++) {
        if (!is_p) lut[i][0] = lut[i][1] = lut[i][2] = (uint8_t)i;
        else if (i < map->ColorCount) lut[i][0] = map->Colors[i].Red, lut[i][1] = map->Colors[i].Green, lut[i][2] = map->Colors[i].Blue;
    }
    const bool want_alpha = c->lim->composite_alpha && transparent >= 0;
    st = mxl_image_raw_alloc(c, raw, (int32_t)cw, (int32_t)ch, want_alpha);
    if (st != MXL_OK) goto done;
    line = mxl_malloc((size_t)fw);
    if (!line) {
        st = mxl_error_set(c->err, MXL_ERR_NOMEM, "%s: out of memory", c->name);
        goto done;
    }
    /* the canvas as indices would be; written as colours directly */
    const int fill = transparent >= 0 ? transparent : 0;
    const size_t npx = (size_t)cw * (size_t)ch;
    for (size_t i = 0; i < npx; i++) memcpy(raw->rgb + 3 * i, lut[fill], 3);
    if (want_alpha) memset(raw->alpha, fill == transparent ? 0 : 255, npx);
    for (int64_t i = 0; i < fh; i++) {
        if (DGifGetLine(g, line, (int)fw) == GIF_ERROR) {
            st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: corrupt or truncated GIF image data: %s", c->name, gif_err(g->Error));
            goto done;
        }
        const int64_t row = d->Interlace ? interlaced_row(i, fh) : i;
        uint8_t *o = raw->rgb + ((size_t)(fy0 + row) * (size_t)cw + (size_t)fx0) * 3;
        for (int64_t x = 0; x < fw; x++) memcpy(o + 3 * x, lut[line[x]], 3);
        if (want_alpha) {
            uint8_t *a = raw->alpha + (size_t)(fy0 + row) * (size_t)cw + (size_t)fx0;
            for (int64_t x = 0; x < fw; x++) a[x] = line[x] == transparent ? 0 : 255;
        }
    }
    if (transparent >= 0) {
        raw->has_key = true;
        raw->key[0] = lut[transparent][0], raw->key[1] = lut[transparent][1], raw->key[2] = lut[transparent][2];
    }
    raw->orientation = 1; /* GIF carries no EXIF */
done:
    mxl_free(line);
    int cerr = 0;
    DGifCloseFile(g, &cerr);
    if (st != MXL_OK) mxl_image_raw_free(raw);
    return st;
}
