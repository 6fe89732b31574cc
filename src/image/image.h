/* image.h - image input for vision-language models: an encoded image (JPEG, PNG, WebP, GIF) held in
 * memory or in a file, decoded to 8-bit RGB by the Debian libraries (libjpeg-turbo, libpng, libwebp,
 * giflib) and brought to what the Python reference hands the image processors.
 *
 * The reference is transformers' `load_image(path)` (PIL.Image.open, PIL.ImageOps.exif_transpose,
 * convert("RGB")) followed by `convert_to_rgb` (transformers/image_transforms.py). Note what that
 * pair does with transparency, which decode.c reproduces:
 *   - an alpha band (RGBA, LA, WebP with alpha) is dropped by convert("RGB"): the colour under a
 *     transparent pixel shows, nothing is composited;
 *   - a single transparent colour (a palette PNG / GIF whose tRNS makes exactly one index fully
 *     transparent, a grayscale or RGB PNG with tRNS) survives convert("RGB") as info["transparency"],
 *     and convert_to_rgb then turns every pixel of that colour white (alpha_composite over white);
 *   - a palette PNG whose tRNS holds partial alphas loses them (PIL drops a bytes transparency).
 * `composite_alpha` selects the other reading, convert_to_rgb applied to the image as PIL opened it
 * (no load_image), which composites every alpha over opaque white with PIL's integer arithmetic.
 *
 * The EXIF orientation (JPEG APP1 Exif, PNG eXIf, WebP EXIF chunk; else an XMP tiff:Orientation, as
 * PIL's getexif falls back to) is applied as PIL.ImageOps.exif_transpose does.
 *
 * Every size a header declares is checked against mxl_image_limits before anything is allocated
 * (decompression bombs); corrupt, truncated or unknown data is a one-line error naming the input. */
#ifndef MXL_IMAGE_IMAGE_H
#define MXL_IMAGE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct mxl_image {
    int32_t w, h;
    uint8_t *rgb; /* [h, w, 3] row-major, mxl_malloc'd; NULL when empty */
} mxl_image;

typedef struct mxl_image_limits {
    int64_t max_width, max_height; /* declared size of the encoded image (before EXIF rotation) */
    uint64_t max_decode_bytes;     /* w * h * channels the decoder would hold at once */
    bool composite_alpha;          /* see above; false = the load_image + convert_to_rgb reference */
} mxl_image_limits;

/* 16384, 16384, 536870912 (512 MiB), composite_alpha false. */
void mxl_image_limits_default(mxl_image_limits *l);

/* Decodes data[n] into out (fresh; free with mxl_image_free). `name` names the input in errors
 * (a path, "request image 2"); lim NULL means the defaults. On failure out is left empty. */
mxl_status mxl_image_decode(const uint8_t *data, size_t n, const char *name, const mxl_image_limits *lim,
                            mxl_image *out, mxl_error *err);

/* Reads the file at path and decodes it (errors name the path). */
mxl_status mxl_image_load(const char *path, const mxl_image_limits *lim, mxl_image *out, mxl_error *err);

void mxl_image_free(mxl_image *im);

#endif
