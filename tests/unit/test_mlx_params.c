/* test_mlx_params.c - see test_mlx_params.h. */
#include "test_mlx_params.h"

#include <string.h>

void mxl_test_mlx_params(mxl_dtype dt, int bits, int64_t ng, uint8_t *sc, uint8_t *bs, float (*frand)(void)) {
    for (int64_t g = 0; g < ng; g++) {
        float s = (0.01f + 0.02f * (frand() + 1.0f)) * 8.0f / (float)((1 << bits) - 1);
        float b = -s * (float)((1 << bits) - 1) / 2.0f + 0.01f * frand();
        if (dt == MXL_DTYPE_F32) {
            memcpy(sc + 4 * g, &s, 4);
            memcpy(bs + 4 * g, &b, 4);
        } else {
            uint16_t hs = dt == MXL_DTYPE_F16 ? mxl_f32_to_f16(s) : mxl_f32_to_bf16(s);
            uint16_t hb = dt == MXL_DTYPE_F16 ? mxl_f32_to_f16(b) : mxl_f32_to_bf16(b);
            memcpy(sc + 2 * g, &hs, 2);
            memcpy(bs + 2 * g, &hb, 2);
        }
    }
}
