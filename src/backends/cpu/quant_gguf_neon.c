/* quant_gguf_neon.c - AArch64 NEON kernels for the ggml block formats (quant_gguf.h): fused dots
 * of a weight row with quantized activations (Q4_0..Q8_0 against q8a, Q2_K..Q6_K against q8k) in
 * two variants, and the activation quantizers q8a / q8k.
 *
 *   - baseline AdvSIMD: int8 x int8 products widened with vmull_s8 and summed pairwise into
 *     int32 lanes with vpadalq_s16 (exact: |product| <= 2^14 fits int16);
 *   - dot-product extension: SDOT (vdotq_s32), under a function target attribute so this file
 *     builds without -march and the variant is only called after run-time detection
 *     (the kernel table's NEON dot-product level, kernels_neon.c).
 * Both variants reproduce the reference's f32 statements block by block (see
 * quant_gguf_neon_body.h), so every dot is bit-identical to mxl_vec_dot_ref. The quantizers do
 * the reference's divisions and multiplies in f32 and round ties to even (vcvtnq_s32_f32, what
 * nearbyintf does in the default rounding mode), so their blocks are bit-identical too.
 * On other architectures the getter returns NULL and the quantizers run the references. */
#include "backends/cpu/quant_gguf.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>

/* 16 bytes of nibbles -> elements 0..15 (low nibbles) and 16..31 (high nibbles), as int8. */
static inline void nib_lo_hi(const uint8_t *p, int8x16_t *lo, int8x16_t *hi) {
    uint8x16_t v = vld1q_u8(p);
    *lo = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0xF)));
    *hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
}

/* Byte j of the result = 0xFF when bit j of the 16 bits (b0 | b1 << 8) is set. */
static inline uint8x16_t bits16_to_bytes(uint8_t b0, uint8_t b1) {
    static const uint8_t sel[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t v = vcombine_u8(vdup_n_u8(b0), vdup_n_u8(b1));
    return vtstq_u8(v, vld1q_u8(sel));
}

/* Q5_0 (offset 16) / Q5_1 (offset 0): nibble | fifth bit (bit j of the 32-bit qh) << 4, minus
 * the offset; elements 0..15 and 16..31. */
static inline void q5_codes(const uint8_t *qs, const uint8_t *qh, int offset, int8x16_t *lo, int8x16_t *hi) {
    uint8x16_t v = vld1q_u8(qs), sixteen = vdupq_n_u8(16);
    uint8x16_t l = vorrq_u8(vandq_u8(v, vdupq_n_u8(0xF)), vandq_u8(bits16_to_bytes(qh[0], qh[1]), sixteen));
    uint8x16_t h = vorrq_u8(vshrq_n_u8(v, 4), vandq_u8(bits16_to_bytes(qh[2], qh[3]), sixteen));
    *lo = vsubq_s8(vreinterpretq_s8_u8(l), vdupq_n_s8((int8_t)offset));
    *hi = vsubq_s8(vreinterpretq_s8_u8(h), vdupq_n_s8((int8_t)offset));
}

/* The 16 signed 6-bit scales of a Q3_K super-block, minus 32 (as the reference's q3k_scale). */
static inline void q3k_scales(const uint8_t *s, int *sc) {
    for (int i = 0; i < 16; i++) {
        int lo = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
        int hi = (s[8 + (i % 4)] >> (2 * (i / 4))) & 3;
        sc[i] = (lo | (hi << 4)) - 32;
    }
}

/* One 32-element block's contribution, the reference's statements: a = d*xd*sumi, b = m*xs. */
static inline float block_f32(float d, float m, const mxl_block_q8a *x, int sumi) {
    float a = d * x->d * (float)sumi, b = m * x->s;
    return a + b;
}

/* Baseline: 16 int8 products, widened to int16 and added pairwise into the 4 int32 lanes. */
static inline int32x4_t dot16_mull(int32x4_t acc, int8x16_t a, int8x16_t b) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

#define NEON_FN(name) name##_neon
#define NEON_TARGET
#define DOT16(acc, a, b) dot16_mull((acc), (a), (b))
#include "backends/cpu/quant_gguf_neon_body.h"
#undef NEON_FN
#undef NEON_TARGET
#undef DOT16

#define NEON_FN(name) name##_dotprod
#define NEON_TARGET __attribute__((target("arch=armv8.2-a+dotprod")))
#define DOT16(acc, a, b) vdotq_s32((acc), (a), (b))
#include "backends/cpu/quant_gguf_neon_body.h"
#undef NEON_FN
#undef NEON_TARGET
#undef DOT16

mxl_vec_dot_fn mxl_vec_dot_neon_get(mxl_dtype t, bool dotprod) {
    return dotprod ? get_dotprod(t) : get_neon(t);
}

/* max |x[0..n)| (n a multiple of 4); the maximum is exact in any order. */
static inline float amax_f32(const float *x, int n) {
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int j = 0; j < n; j += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + j))); /* fmaxf semantics: NaN ignored */
    return vmaxnmvq_f32(m);
}

void mxl_quant_q8a_neon(const float *x, mxl_block_q8a *y, int64_t n) {
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = amax_f32(x, 32);
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        int32x4_t sum = vdupq_n_s32(0);
        for (int j = 0; j < 32; j += 8) {
            int32x4_t v0 = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j), id));
            int32x4_t v1 = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4), id));
            sum = vaddq_s32(sum, vaddq_s32(v0, v1));
            int16x8_t h = vcombine_s16(vmovn_s32(v0), vmovn_s32(v1));
            vst1_s8(y[i].qs + j, vmovn_s16(h));
        }
        y[i].d = d;
        y[i].s = d * (float)vaddvq_s32(sum);
    }
}

void mxl_quant_q8k_neon(const float *x, mxl_block_q8k *y, int64_t n) {
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float amax = amax_f32(x, 256);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* the reference keeps the first element of largest magnitude (its sign sets d's) */
        float max = 0.0f;
        for (int j = 0; j < 256; j++)
            if (fabsf(x[j]) == amax) {
                max = x[j];
                break;
            }
        float iscale = -127.0f / max;
        for (int j = 0; j < 256; j += 16) {
            int32x4_t v[4];
            for (int k = 0; k < 4; k++)
                v[k] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4 * k), iscale)), vdupq_n_s32(127));
            int16x8_t h0 = vcombine_s16(vmovn_s32(v[0]), vmovn_s32(v[1]));
            int16x8_t h1 = vcombine_s16(vmovn_s32(v[2]), vmovn_s32(v[3]));
            vst1q_s8(y[i].qs + j, vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
            y[i].bsums[j / 16] = (int16_t)vaddvq_s32(vaddq_s32(vaddq_s32(v[0], v[1]), vaddq_s32(v[2], v[3])));
        }
        y[i].d = 1.0f / iscale;
    }
}
#else
/* not AArch64: no NEON variants; the quantizers are the references (same bits by contract) */
mxl_vec_dot_fn mxl_vec_dot_neon_get(mxl_dtype t, bool dotprod) {
    (void)t;
    (void)dotprod;
    return 0;
}
void mxl_quant_q8a_neon(const float *x, mxl_block_q8a *y, int64_t n) { mxl_quant_q8a_ref(x, y, n); }
void mxl_quant_q8k_neon(const float *x, mxl_block_q8k *y, int64_t n) { mxl_quant_q8k_ref(x, y, n); }
#endif
