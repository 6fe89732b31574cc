/* decode.c - mxl_image_decode / mxl_image_load: detects the format by its magic bytes, runs the
 * format's decoder (decode_jpeg.c, decode_png.c, decode_webp.c, decode_gif.c) and finishes the image
 * the way transformers' load_image + convert_to_rgb do (image.h): the transparent colour that
 * survives convert("RGB") turns white, or with composite_alpha every alpha is composited over
 * opaque white with PIL's integer arithmetic (libImaging/AlphaComposite.c), then the EXIF
 * orientation is applied as PIL.ImageOps.exif_transpose does (libImaging/Geometry.c transposes). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "image/decode_internal.h"

void mxl_image_limits_default(mxl_image_limits *l) {
    l->max_width = 16384;
    l->max_height = 16384;
    l->max_decode_bytes = 536870912u;
    l->composite_alpha = false;
}

void mxl_image_free(mxl_image *im) {
    if (!im) return;
    mxl_free(im->rgb);
    im->rgb = NULL;
    im->w = im->h = 0;
}

mxl_status mxl_image_check_size(const mxl_image_ctx *c, int64_t w, int64_t h, int channels) {
    if (w <= 0 || h <= 0) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: image declares an empty size %lldx%lld", c->name, (long long)w, (long long)h);
    if (w > c->lim->max_width || h > c->lim->max_height)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: image is %lldx%lld, larger than the limit %lldx%lld", c->name, (long long)w,
                             (long long)h, (long long)c->lim->max_width, (long long)c->lim->max_height);
    uint64_t bytes;
    if (mxl_mul_u64((uint64_t)w, (uint64_t)h, &bytes) || mxl_mul_u64(bytes, (uint64_t)channels, &bytes) || bytes > c->lim->max_decode_bytes)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: image %lldx%lld with %d channels needs more than the %llu bytes allowed to decode",
                             c->name, (long long)w, (long long)h, channels, (unsigned long long)c->lim->max_decode_bytes);
    return MXL_OK;
}

mxl_status mxl_image_raw_alloc(const mxl_image_ctx *c, mxl_image_raw *raw, int32_t w, int32_t h, bool want_alpha) {
    raw->w = w, raw->h = h;
    raw->rgb = mxl_malloc((size_t)w * (size_t)h * 3);
    raw->alpha = want_alpha ? mxl_malloc((size_t)w * (size_t)h) : NULL;
    if (!raw->rgb || (want_alpha && !raw->alpha)) {
        mxl_free(raw->rgb), mxl_free(raw->alpha);
        raw->rgb = raw->alpha = NULL;
        return mxl_error_set(c->err, MXL_ERR_NOMEM, "%s: out of memory for a %dx%d image", c->name, w, h);
    }
    return MXL_OK;
}

void mxl_image_raw_free(mxl_image_raw *raw) {
    mxl_free(raw->rgb), mxl_free(raw->alpha);
    raw->rgb = raw->alpha = NULL;
}

/* PIL.Image.alpha_composite(white, src) for one pixel: libImaging/AlphaComposite.c with
 * dst = (255, 255, 255, 255), PRECISION_BITS 7, divisions by 255 rounded by SHIFTFORDIV255. */
#define SHIFTFORDIV255(a) ((((a) >> 8) + (a)) >> 8)
static void composite_over_white(uint8_t *px, uint32_t a) {
    if (a == 0) {
        px[0] = px[1] = px[2] = 255;
        return;
    }
    const uint32_t da = 255, dc = 255, prec = 7;
    uint32_t blend = da * (255 - a);
    uint32_t outa255 = a * 255 + blend;
    uint32_t coef1 = a * 255 * 255 * (1u << prec) / outa255;
    uint32_t coef2 = 255 * (1u << prec) - coef1;
    for (int ch = 0; ch < 3; ch++) {
        uint32_t t = px[ch] * coef1 + dc * coef2 + (0x80u << prec);
        px[ch] = (uint8_t)(SHIFTFORDIV255(t) >> prec);
    }
}

/* PIL's Image.transpose for the EXIF orientations (exif_transpose's table):
 * 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270, 7 TRANSVERSE,
 * 8 ROTATE_90. For each output pixel (x, y) of the [oh, ow] result, the source pixel of [h, w]. */
static void transpose_src(int o, int32_t w, int32_t h, int32_t x, int32_t y, int32_t *sx, int32_t *sy) {
    switch (o) {
    case 2: *sx = w - 1 - x, *sy = y; break;
    case 3: *sx = w - 1 - x, *sy = h - 1 - y; break;
    case 4: *sx = x, *sy = h - 1 - y; break;
    case 5: *sx = y, *sy = x; break;
    case 6: *sx = y, *sy = h - 1 - x; break;
    case 7: *sx = w - 1 - y, *sy = h - 1 - x; break;
    case 8: *sx = w - 1 - y, *sy = x; break;
    default: *sx = x, *sy = y; break;
    }
}

static mxl_status finish(const mxl_image_ctx *c, mxl_image_raw *raw, mxl_image *out) {
    const size_t npx = (size_t)raw->w * (size_t)raw->h;
    if (c->lim->composite_alpha) {
        if (raw->alpha)
            for (size_t i = 0; i < npx; i++) composite_over_white(raw->rgb + 3 * i, raw->alpha[i]);
    } else if (raw->has_key) {
        /* convert_to_rgb: convert("RGBA") keys the colour out (alpha 0), alpha_composite over white
         * turns those pixels white */
        for (size_t i = 0; i < npx; i++) {
            uint8_t *px = raw->rgb + 3 * i;
            if (px[0] == raw->key[0] && px[1] == raw->key[1] && px[2] == raw->key[2]) px[0] = px[1] = px[2] = 255;
        }
    }
    mxl_free(raw->alpha);
    raw->alpha = NULL;
    const int o = raw->orientation;
    if (o < 2 || o > 8) {
        out->w = raw->w, out->h = raw->h, out->rgb = raw->rgb;
        raw->rgb = NULL;
        return MXL_OK;
    }
    const bool swap = o >= 5;
    const int32_t ow = swap ? raw->h : raw->w, oh = swap ? raw->w : raw->h;
    uint8_t *t = mxl_malloc(npx * 3);
    if (!t) {
        mxl_image_raw_free(raw);
        return mxl_error_set(c->err, MXL_ERR_NOMEM, "%s: out of memory rotating a %dx%d image", c->name, raw->w, raw->h);
    }
    for (int32_t y = 0; y < oh; y++)
        for (int32_t x = 0; x < ow; x++) {
            int32_t sx, sy;
            transpose_src(o, raw->w, raw->h, x, y, &sx, &sy);
            memcpy(t + ((size_t)y * ow + x) * 3, raw->rgb + ((size_t)sy * raw->w + sx) * 3, 3);
        }
    mxl_image_raw_free(raw);
    out->w = ow, out->h = oh, out->rgb = t;
    return MXL_OK;
}

mxl_status mxl_image_decode(const uint8_t *data, size_t n, const char *name, const mxl_image_limits *lim, mxl_image *out,
                            mxl_error *err) {
    mxl_image_limits def;
    if (!lim) mxl_image_limits_default(&def), lim = &def;
    if (!name) name = "image";
    out->w = out->h = 0, out->rgb = NULL;
    mxl_image_ctx c = {.name = name, .lim = lim, .err = err};
    if (!data || n == 0) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: empty image data", name);
    mxl_image_raw raw = {0};
    raw.orientation = 1;
    mxl_status st;
    if (n >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) st = mxl_image_decode_jpeg(data, n, &c, &raw);
    else if (n >= 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0) st = mxl_image_decode_png(data, n, &c, &raw);
    else if (n >= 12 && memcmp(data, "RIFF", 4) == 0 && memcmp(data + 8, "WEBP", 4) == 0) st = mxl_image_decode_webp(data, n, &c, &raw);
    else if (n >= 6 && (memcmp(data, "GIF87a", 6) == 0 || memcmp(data, "GIF89a", 6) == 0)) st = mxl_image_decode_gif(data, n, &c, &raw);
    else return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: unknown image format (not JPEG, PNG, WebP or GIF)", name);
    if (st != MXL_OK) {
        mxl_image_raw_free(&raw);
        return st;
    }
    return finish(&c, &raw, out);
}

mxl_status mxl_image_load(const char *path, const mxl_image_limits *lim, mxl_image *out, mxl_error *err) {
    mxl_image_limits def;
    if (!lim) mxl_image_limits_default(&def), lim = &def;
    out->w = out->h = 0, out->rgb = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return mxl_error_set(err, MXL_ERR_IO, "%s: cannot open image: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return mxl_error_set(err, MXL_ERR_IO, "%s: not a regular file", path);
    }
    /* an encoded image is never much larger than its decoded pixels (stored deflate, raw BMP-like
     * payloads); a bigger file is refused before it is read */
    const uint64_t cap = lim->max_decode_bytes + (64u << 20);
    if ((uint64_t)sb.st_size > cap) {
        fclose(f);
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: image file of %lld bytes is larger than the %llu allowed", path,
                             (long long)sb.st_size, (unsigned long long)cap);
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = mxl_malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, n);
    }
    size_t got = fread(buf, 1, n, f);
    int rerr = ferror(f);
    fclose(f);
    if (got != n || rerr) {
        mxl_free(buf);
        return mxl_error_set(err, MXL_ERR_IO, "%s: read failed", path);
    }
    mxl_status st = mxl_image_decode(buf, n, path, lim, out, err);
    mxl_free(buf);
    return st;
}
