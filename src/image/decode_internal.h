/* decode_internal.h - what the per-format decoders (decode_jpeg.c, decode_png.c, decode_webp.c,
 * decode_gif.c) hand back to decode.c, which applies transparency and the EXIF orientation the way
 * the reference (transformers' load_image + convert_to_rgb, see image.h) does. Not a public API. */
#ifndef MXL_IMAGE_DECODE_INTERNAL_H
#define MXL_IMAGE_DECODE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "image/image.h"

/* One decoded image before the reference's finishing steps. */
typedef struct mxl_image_raw {
    int32_t w, h;
    uint8_t *rgb;   /* [h, w, 3]: what PIL's convert("RGB") of the opened image gives */
    uint8_t *alpha; /* [h, w] or NULL: the alpha PIL's convert("RGBA") of the opened image gives
                     * (filled only when the caller asked for composite_alpha) */
    bool has_key;   /* a transparent colour survives convert("RGB") as info["transparency"] */
    int32_t key[3]; /* that colour (PIL compares it with the pixels; it may exceed 255) */
    int orientation; /* EXIF orientation 1..8 (1: none) */
} mxl_image_raw;

typedef struct mxl_image_ctx {
    const char *name;
    const mxl_image_limits *lim;
    mxl_error *err;
} mxl_image_ctx;

/* Checks a declared size against the limits before anything is allocated: w, h > 0, within
 * max_width / max_height, and w * h * channels within max_decode_bytes. */
mxl_status mxl_image_check_size(const mxl_image_ctx *c, int64_t w, int64_t h, int channels);
/* Allocates raw->rgb (and raw->alpha when want_alpha) for w x h; the size was checked. */
mxl_status mxl_image_raw_alloc(const mxl_image_ctx *c, mxl_image_raw *raw, int32_t w, int32_t h, bool want_alpha);
void mxl_image_raw_free(mxl_image_raw *raw);

/* EXIF orientation from a TIFF/Exif block (optionally "Exif\0\0"-prefixed): 0 when the tag is absent
 * or the block is not parseable (then PIL looks at the XMP), 1 when present with a value that
 * exif_transpose ignores (not 1..8, a count other than one, a non-integer type), else the value.
 * Bounds-checked: an entry outside the block ends the search. */
int mxl_image_exif_orientation(const uint8_t *p, size_t n);
/* PIL's XMP fallback: the first `tiff:Orientation="N"` or `tiff:Orientation>N`; 0 when none. */
int mxl_image_xmp_orientation(const uint8_t *p, size_t n);

mxl_status mxl_image_decode_jpeg(const uint8_t *data, size_t n, const mxl_image_ctx *c, mxl_image_raw *raw);
mxl_status mxl_image_decode_png(const uint8_t *data, size_t n, const mxl_image_ctx *c, mxl_image_raw *raw);
mxl_status mxl_image_decode_webp(const uint8_t *data, size_t n, const mxl_image_ctx *c, mxl_image_raw *raw);
mxl_status mxl_image_decode_gif(const uint8_t *data, size_t n, const mxl_image_ctx *c, mxl_image_raw *raw);

#endif
