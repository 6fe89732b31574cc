/* mlx_fp.c - MLX's mxfp4 / mxfp8 / nvfp4 matrices as weights the engine runs (mlx_fp.h). */
#include "models/mlx_fp.h"

#include <math.h>
#include <string.h>

float mxl_fp_e2m1(uint8_t code) {
    static const float v[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float x = v[code & 7];
    return code & 8 ? -x : x;
}

float mxl_fp_e4m3(uint8_t code) {
    const int e = (code >> 3) & 15, m = code & 7;
    if (e == 15 && m == 7) return NAN;
    const float x = e == 0 ? ldexpf((float)m / 8.0f, -6) : ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return code & 0x80 ? -x : x;
}

float mxl_fp_e8m0(uint8_t scale) { return scale == 255 ? NAN : ldexpf(1.0f, (int)scale - 127); }

/* Element k of a row of packed codes (bits per code 4 or 8, lowest bits first). */
static inline uint8_t code_at(const uint8_t *row, int bits, int64_t k) {
    return bits == 8 ? row[k] : (uint8_t)(row[k / 2] >> (4 * (k % 2)) & 15);
}

mxl_status mxl_mlx_fp_weight(const mxl_tensor *w, const mxl_tensor *scales, mxl_quant_mode mode, const char *name, mxl_arena *arena,
                             mxl_weight *out, mxl_error *err) {
    if (!mxl_mlx_fp_mode(mode))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: quantization mode '%s' is not an MLX floating-point mode", name,
                             mxl_quant_mode_name(mode));
    const int bits = mxl_mlx_fp_bits(mode), gs = mxl_mlx_fp_group(mode);
    const char *mn = mxl_quant_mode_name(mode);
    if (w->ndim != 2 || scales->ndim != 2 || w->dtype != MXL_DTYPE_U32 || scales->dtype != MXL_DTYPE_U8 || w->shape[0] <= 0 ||
        w->shape[1] <= 0 || scales->shape[0] != w->shape[0] || scales->shape[1] * gs != w->shape[1] * (32 / bits))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: an MLX %s matrix is a uint32 weight [rows, cols * %d / 32] and uint8 scales [rows, cols / %d]",
                             name, mn, bits, gs);
    const int64_t rows = w->shape[0], cols = w->shape[1] * (32 / bits), G = cols / gs;
    const uint8_t *wb = w->data, *sb = scales->data;
    const int64_t rb = cols * bits / 8;
    if (mode == MXL_QUANT_MXFP4) {
        /* ggml's blocks: the scale byte, then element j in the low nibble of byte j, j + 16 in the high */
        uint8_t *o = mxl_arena_alloc(arena, (size_t)(rows * G) * 17, 64);
        if (!o) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory repacking %s", name);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t g = 0; g < G; g++) {
                uint8_t *blk = o + (r * G + g) * 17;
                blk[0] = sb[r * G + g];
                for (int j = 0; j < 16; j++)
                    blk[1 + j] = (uint8_t)(code_at(wb + r * rb, 4, g * 32 + j) | code_at(wb + r * rb, 4, g * 32 + j + 16) << 4);
            }
        *out = (mxl_weight){MXL_W_GGUF, MXL_DTYPE_MXFP4, rows, cols, o, {0}, NULL};
    } else {
        uint16_t *o = mxl_arena_alloc(arena, (size_t)(rows * cols) * sizeof(uint16_t), 64);
        if (!o) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory repacking %s", name);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t k = 0; k < cols; k++) {
                const uint8_t c = code_at(wb + r * rb, bits, k), s = sb[r * G + k / gs];
                const float v = mode == MXL_QUANT_MXFP8 ? mxl_fp_e4m3(c) * mxl_fp_e8m0(s) : mxl_fp_e2m1(c) * mxl_fp_e4m3(s);
                o[r * cols + k] = mxl_f32_to_bf16(v);
            }
        *out = (mxl_weight){MXL_W_DENSE, MXL_DTYPE_BF16, rows, cols, o, {0}, NULL};
    }
    return mxl_weight_check(out, name, err);
}
