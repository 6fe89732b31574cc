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
#include "backends/cpu/quant_iq_grids.h"

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

/* The 16 signed 6-bit scales of a Q3_K super-block, minus 32. */
static inline void q3k_scales(const uint8_t *s, int *sc) {
    for (int i = 0; i < 16; i++) sc[i] = mxl_q3k_scale(s, i);
}

/* One 32-element block's contribution, the reference's statements: a = d*xd*sumi, b = m*xs. */
static inline float block_f32(float d, float m, const mxl_block_q8a *x, int sumi) {
    float a = d * x->d * (float)sumi, b = m * x->s;
    return a + b;
}

/* ---- IQ grid formats (layouts: quant_gguf.h) ---- */
/* two 8-byte grid rows as one vector */
static inline int8x16_t rows2(const void *r0, const void *r1) {
    return vcombine_s8(vld1_s8((const int8_t *)r0), vld1_s8((const int8_t *)r1));
}
/* two 4-byte grid rows (of rows r[0..3]) -> 16 bytes */
static inline int8x16_t rows4x4(const uint8_t *const *r) {
    uint32_t v[4] = {mxl_rd_u32(r[0]), mxl_rd_u32(r[1]), mxl_rd_u32(r[2]), mxl_rd_u32(r[3])};
    return vreinterpretq_s8_u32(vld1q_u32(v));
}
/* magnitudes with 16 sign bits (bit j: element j negative) applied */
static inline int8x16_t apply_signs(int8x16_t mag, uint32_t bits16) {
    uint8x16_t neg = bits16_to_bytes((uint8_t)bits16, (uint8_t)(bits16 >> 8));
    return vbslq_s8(neg, vnegq_s8(mag), mag);
}

/* Sub-block ib (32 elements) of an IQ grid super-block as signed codes (the reference's q:
 * grid x sign, or 8 g +- 1 for IQ1) in lo (elements 0..15) and hi (16..31), and the two halves'
 * multipliers. */
static inline void iq_codes32(mxl_dtype t, const void *blk, int ib, int8x16_t *lo, int8x16_t *hi, int *m0, int *m1) {
    uint32_t sg = 0;
    switch (t) {
    case MXL_DTYPE_IQ2_XXS: {
        const mxl_block_iq2_xxs *b = blk;
        const uint32_t idx = mxl_rd_u32(b->qs + 4 * ib), aux = mxl_rd_u32(b->qs + 4 * ib + 2);
        *lo = rows2(mxl_iq2xxs_grid[idx & 255], mxl_iq2xxs_grid[(idx >> 8) & 255]);
        *hi = rows2(mxl_iq2xxs_grid[(idx >> 16) & 255], mxl_iq2xxs_grid[idx >> 24]);
        sg = mxl_iq_ksigns4(aux);
        *m0 = *m1 = 2 * (int)(aux >> 28) + 1;
        break;
    }
    case MXL_DTYPE_IQ2_XS: {
        const mxl_block_iq2_xs *b = blk;
        const uint16_t *q = b->qs + 4 * ib;
        *lo = rows2(mxl_iq2xs_grid[q[0] & 511], mxl_iq2xs_grid[q[1] & 511]);
        *hi = rows2(mxl_iq2xs_grid[q[2] & 511], mxl_iq2xs_grid[q[3] & 511]);
        sg = (uint32_t)mxl_ksigns_iq2xs[q[0] >> 9] | (uint32_t)mxl_ksigns_iq2xs[q[1] >> 9] << 8 |
             (uint32_t)mxl_ksigns_iq2xs[q[2] >> 9] << 16 | (uint32_t)mxl_ksigns_iq2xs[q[3] >> 9] << 24;
        *m0 = 2 * mxl_iq_nib(b->scales, 2 * ib) + 1, *m1 = 2 * mxl_iq_nib(b->scales, 2 * ib + 1) + 1;
        break;
    }
    case MXL_DTYPE_IQ2_S: {
        const mxl_block_iq2_s *b = blk;
        const uint8_t *q = b->qs + 4 * ib;
        const unsigned h = b->qh[ib];
        *lo = rows2(mxl_iq2s_grid[q[0] | ((h & 3) << 8)], mxl_iq2s_grid[q[1] | (((h >> 2) & 3) << 8)]);
        *hi = rows2(mxl_iq2s_grid[q[2] | (((h >> 4) & 3) << 8)], mxl_iq2s_grid[q[3] | (((h >> 6) & 3) << 8)]);
        sg = mxl_rd_u32(b->qs + 32 + 4 * ib);
        *m0 = 2 * mxl_iq_nib(b->scales, 2 * ib) + 1, *m1 = 2 * mxl_iq_nib(b->scales, 2 * ib + 1) + 1;
        break;
    }
    case MXL_DTYPE_IQ3_XXS: {
        const mxl_block_iq3_xxs *b = blk;
        const uint8_t *q = b->qs + 8 * ib;
        const uint8_t *r0[4] = {mxl_iq3xxs_grid[q[0]], mxl_iq3xxs_grid[q[1]], mxl_iq3xxs_grid[q[2]], mxl_iq3xxs_grid[q[3]]};
        const uint8_t *r1[4] = {mxl_iq3xxs_grid[q[4]], mxl_iq3xxs_grid[q[5]], mxl_iq3xxs_grid[q[6]], mxl_iq3xxs_grid[q[7]]};
        const uint32_t aux = mxl_rd_u32(b->qs + 64 + 4 * ib);
        *lo = rows4x4(r0), *hi = rows4x4(r1);
        sg = mxl_iq_ksigns4(aux);
        *m0 = *m1 = 2 * (int)(aux >> 28) + 1;
        break;
    }
    case MXL_DTYPE_IQ3_S: {
        const mxl_block_iq3_s *b = blk;
        const uint8_t *q = b->qs + 8 * ib;
        const unsigned h = b->qh[ib];
        const uint8_t *r[8];
        for (int k = 0; k < 8; k++) r[k] = mxl_iq3s_grid[q[k] | (((h >> k) & 1) << 8)];
        *lo = rows4x4(r), *hi = rows4x4(r + 4);
        sg = mxl_rd_u32(b->signs + 4 * ib);
        *m0 = *m1 = 1 + 2 * mxl_iq_nib(b->scales, ib);
        break;
    }
    default: { /* IQ1_S / IQ1_M: 8 g + delta, no signs */
        unsigned hs[4];
        const uint8_t *q;
        int8x16_t d0, d1;
        if (t == MXL_DTYPE_IQ1_S) {
            const mxl_block_iq1_s *b = blk;
            const unsigned qh = b->qh[ib];
            for (int l = 0; l < 4; l++) hs[l] = (qh >> (3 * l)) & 7;
            q = b->qs + 4 * ib;
            d0 = d1 = vdupq_n_s8(qh & 0x8000 ? -1 : 1);
            *m0 = *m1 = 2 * (int)((qh >> 12) & 7) + 1;
        } else {
            const mxl_block_iq1_m *b = blk;
            const unsigned h0 = b->qh[2 * ib], h1 = b->qh[2 * ib + 1];
            hs[0] = h0 & 0xF, hs[1] = h0 >> 4, hs[2] = h1 & 0xF, hs[3] = h1 >> 4;
            q = b->qs + 4 * ib;
            d0 = vcombine_s8(vdup_n_s8(hs[0] & 8 ? -1 : 1), vdup_n_s8(hs[1] & 8 ? -1 : 1));
            d1 = vcombine_s8(vdup_n_s8(hs[2] & 8 ? -1 : 1), vdup_n_s8(hs[3] & 8 ? -1 : 1));
            for (int l = 0; l < 4; l++) hs[l] &= 7;
            *m0 = 2 * ((b->scales[ib / 2] >> (6 * (ib % 2))) & 7) + 1;
            *m1 = 2 * ((b->scales[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1;
        }
        int8x16_t g0 = rows2(mxl_iq1s_grid[q[0] | (hs[0] << 8)], mxl_iq1s_grid[q[1] | (hs[1] << 8)]);
        int8x16_t g1 = rows2(mxl_iq1s_grid[q[2] | (hs[2] << 8)], mxl_iq1s_grid[q[3] | (hs[3] << 8)]);
        *lo = vaddq_s8(vshlq_n_s8(g0, 3), d0);
        *hi = vaddq_s8(vshlq_n_s8(g1, 3), d1);
        return;
    }
    }
    *lo = apply_signs(*lo, sg & 0xFFFF);
    *hi = apply_signs(*hi, sg >> 16);
}
/* d of an IQ grid super-block (IQ1_M: assembled from its scales' top nibbles); the power of two */
static inline float iq_d(mxl_dtype t, const void *blk, float *p) {
    *p = t == MXL_DTYPE_IQ3_S ? 1.0f : t == MXL_DTYPE_IQ3_XXS ? 0.25f : 0.125f;
    uint16_t d;
    if (t == MXL_DTYPE_IQ1_M) {
        const mxl_block_iq1_m *b = blk;
        d = (uint16_t)((b->scales[0] >> 12) | ((b->scales[1] >> 8) & 0xF0) | ((b->scales[2] >> 4) & 0xF00) |
                       (b->scales[3] & 0xF000));
    } else {
        memcpy(&d, blk, 2);
    }
    return mxl_h2f(d);
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
