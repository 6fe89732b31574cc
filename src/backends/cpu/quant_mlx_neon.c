/* quant_mlx_neon.c - AArch64 NEON fused dot for MLX affine-quantized rows (quant_mlx.h).
 *
 * Per 32-element activation block the integer sum isum = sum_j q_j * x_j is formed exactly in
 * int32 lanes (baseline: vmull_s8 + vpadalq_s16; dotprod variant: SDOT, under a target
 * attribute), and the f32 statements around it are the reference's, in its order
 * (sq += xd * isum; sx += xs; acc += s*sq + b*sx per group), so the result is bit-identical to
 * mxl_mlx_vec_dot_ref.
 * Codes: 4-bit (16 bytes -> 32 nibbles, low nibble first, re-interleaved with vzip) and 8-bit
 * (codes 0..255 do not fit int8: q - 128 is used and 128 * sum(x) added back in integers) are
 * decoded in registers; 2, 3, 5 and 6 bits go through the reference unpacker into a buffer. */
#include "backends/cpu/quant_mlx.h"

#if defined(__aarch64__)
#include <arm_neon.h>

static inline int32x4_t dot16_mull(int32x4_t acc, int8x16_t a, int8x16_t b) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}
__attribute__((target("arch=armv8.2-a+dotprod"))) static inline int32x4_t dot16_sdot(int32x4_t acc, int8x16_t a,
                                                                                    int8x16_t b) {
    return vdotq_s32(acc, a, b);
}

/* 32 codes of a block starting at byte p, as int8 (8-bit: q - 128). */
static inline void codes32(int bits, const uint8_t *p, int8x16_t *c0, int8x16_t *c1) {
    if (bits == 4) {
        uint8x16_t v = vld1q_u8(p);
        uint8x16_t lo = vandq_u8(v, vdupq_n_u8(0xF)), hi = vshrq_n_u8(v, 4);
        *c0 = vreinterpretq_s8_u8(vzip1q_u8(lo, hi));
        *c1 = vreinterpretq_s8_u8(vzip2q_u8(lo, hi));
    } else if (bits == 8) {
        *c0 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p), vdupq_n_u8(0x80)));
        *c1 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p + 16), vdupq_n_u8(0x80)));
    } else {
        uint8_t q[32]; /* codes < 64 */
        uint32_t words[8];
        memcpy(words, p, (size_t)(4 * bits)); /* 32 codes = bits words; may be unaligned */
        mxl_mlx_unpack_row_ref(bits, words, q, 32);
        *c0 = vreinterpretq_s8_u8(vld1q_u8(q));
        *c1 = vreinterpretq_s8_u8(vld1q_u8(q + 16));
    }
}

/* The body, shared by both variants (sdot: SDOT instead of the widening multiply). */
#define MLX_DOT_BODY(DOT16)                                                                            \
    const int bits = W->bits, gs = W->group_size, sub = gs / 32;                                       \
    const int64_t ng = W->cols / gs;                                                                   \
    const uint8_t *row = (const uint8_t *)(W->w + r * (W->cols * bits / 32));                          \
    float acc = 0.0f;                                                                                  \
    for (int64_t g = 0; g < ng; g++) {                                                                 \
        float s = mxl_mlx_param(W->scales, W->scale_dtype, r * ng + g);                                \
        float b = mxl_mlx_param(W->biases, W->scale_dtype, r * ng + g);                                \
        float sq = 0.0f, sx = 0.0f;                                                                    \
        for (int k = 0; k < sub; k++) {                                                                \
            const mxl_block_q8a *xb = &xq[g * sub + k];                                                \
            int8x16_t c0, c1;                                                                          \
            codes32(bits, row + (g * sub + k) * 4 * bits, &c0, &c1);                                   \
            int8x16_t x0 = vld1q_s8(xb->qs), x1 = vld1q_s8(xb->qs + 16);                               \
            int isum = vaddvq_s32(DOT16(DOT16(vdupq_n_s32(0), c0, x0), c1, x1));                       \
            if (bits == 8) isum += 128 * (vaddlvq_s8(x0) + vaddlvq_s8(x1));                            \
            sq += xb->d * (float)isum;                                                                 \
            sx += xb->s;                                                                               \
        }                                                                                              \
        acc += s * sq + b * sx;                                                                        \
    }                                                                                                  \
    return acc;

static float mlx_dot_neon(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq) {
    MLX_DOT_BODY(dot16_mull)
}
__attribute__((target("arch=armv8.2-a+dotprod"))) static float mlx_dot_sdot(const mxl_mlx_qweight *W, int64_t r,
                                                                            const mxl_block_q8a *xq) {
    MLX_DOT_BODY(dot16_sdot)
}

float mxl_mlx_vec_dot_neon(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq, bool dotprod) {
    return dotprod ? mlx_dot_sdot(W, r, xq) : mlx_dot_neon(W, r, xq);
}
#else
/* not AArch64: the reference (same bits by contract) */
float mxl_mlx_vec_dot_neon(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq, bool dotprod) {
    (void)dotprod;
    return mxl_mlx_vec_dot_ref(W, r, xq);
}
#endif
