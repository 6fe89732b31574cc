/* resize.h - PIL-exact resampling of 8-bit RGB images (Image.resize((w, h), resample) with the
 * default box and no reducing_gap, as the transformers PIL image processors call it) and the
 * rescale + normalize step that turns the result into the float pixels a vision tower reads. */
#ifndef MXL_IMAGE_RESIZE_H
#define MXL_IMAGE_RESIZE_H

#include <stdint.h>

#include "core/status.h"
#include "image/image.h"

/* PIL.Image.Resampling values. */
typedef enum mxl_resample {
    MXL_RESAMPLE_NEAREST = 0,
    MXL_RESAMPLE_LANCZOS = 1,
    MXL_RESAMPLE_BILINEAR = 2,
    MXL_RESAMPLE_BICUBIC = 3,
} mxl_resample;

/* out = in resized to w x h with PIL's arithmetic (libImaging/Resample.c: a horizontal then a
 * vertical convolution pass, support scaled by the downscale factor, coefficients normalised in
 * double and rounded to 22-bit fixed point, each pass rounded and clipped to uint8, a pass skipped
 * when its dimension is unchanged; NEAREST is Geometry.c's affine scale). out is fresh (free with
 * mxl_image_free). */
mxl_status mxl_image_resize(const mxl_image *in, int32_t w, int32_t h, mxl_resample filter, mxl_image *out, mxl_error *err);

/* The same through the plain per-pixel loop that follows Resample.c line by line (the tests check
 * the two agree); slower. */
mxl_status mxl_image_resize_reference(const mxl_image *in, int32_t w, int32_t h, mxl_resample filter, mxl_image *out,
                                      mxl_error *err);

/* out[3, h, w] (channels first) = (float32(float64(px) * rescale) - mean[c]) / std[c], in float32 as
 * transformers' PIL backend computes it (image_transforms.rescale: float64 product cast to float32;
 * normalize: float32 subtraction and division by float32 mean / std). rescale is a double because
 * the processors' rescale_factor is a Python float (1/255 rounded to float32 would change results). */
void mxl_image_to_pixels(const mxl_image *im, double rescale, const float mean[3], const float std[3], float *out);
/* The same for the w x h crop of im at column x0, row y0 (inside im): out[3, h, w] (the tiles an
 * image processor cuts from its resized image). */
void mxl_image_crop_to_pixels(const mxl_image *im, int32_t x0, int32_t y0, int32_t w, int32_t h, double rescale, const float mean[3],
                              const float std[3], float *out);

#endif
