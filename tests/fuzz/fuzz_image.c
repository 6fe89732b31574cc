/* fuzz_image.c - libFuzzer harness for image decoding (mxl_image_decode: JPEG, PNG, WebP, GIF, EXIF)
 * under small limits, in both transparency readings, followed by a small resize of what decoded.
 * Seeds: tests/fuzz/corpus/image (copies of tests/fixtures/images). */
#include <stddef.h>
#include <stdint.h>

#include "image/image.h"
#include "image/resize.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mxl_image_limits lim;
    mxl_image_limits_default(&lim);
    /* keep each run cheap: a hostile header cannot make the harness allocate much */
    lim.max_width = lim.max_height = 2048;
    lim.max_decode_bytes = 4u << 20;
    lim.composite_alpha = size > 0 && (data[size - 1] & 1);
    mxl_image im;
    mxl_error err;
    if (mxl_image_decode(data, size, "fuzz/image", &lim, &im, &err) == MXL_OK) {
        mxl_image out;
        const mxl_resample f = (mxl_resample)(im.w % 4);
        if (mxl_image_resize(&im, 1 + im.h % 17, 1 + im.w % 13, f, &out, &err) == MXL_OK) mxl_image_free(&out);
        mxl_image_free(&im);
    }
    return 0;
}
