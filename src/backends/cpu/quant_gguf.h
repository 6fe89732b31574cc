/* quant_gguf.h - ggml block formats (layouts of ggml-common.h) and their CPU kernels.
 *
 * Weights stay in their GGUF bytes; a row of n elements is n / block_elems consecutive blocks.
 * Two families of kernels:
 *   - dequantization of a row to f32 (the plain reference, bit-exact with the PyPI `gguf`
 *     package's gguf.quants.dequantize, which does the same f32 operations in the same order);
 *   - fused dot products of a weight row with activations quantized on the fly, as ggml-cpu does:
 *     32-element formats (Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/MXFP4/IQ4_NL) dot against mxl_block_q8a (int8 + f32 scale +
 *     f32 scaled sum), the K-quants against mxl_block_q8k (ggml's Q8_K: 256 int8, f32 scale,
 *     16 partial sums). The integer part of each block product is exact in every variant; only
 *     the order of the f32 accumulation across blocks differs between variants.
 *
 * The struct layouts are the on-disk layouts (packed by construction: every member is a byte
 * array or a 2-byte half at an even offset), so a row pointer into a mapped GGUF file can be cast
 * to a block array. Block sizes are static-asserted against ggml's. */
#ifndef MXL_BACKENDS_CPU_QUANT_GGUF_H
#define MXL_BACKENDS_CPU_QUANT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/quant_iq_grids.h"
#include "backends/weight.h"
#include "core/dtype.h"

#define MXL_QK 32   /* elements per block of the 32-element formats */
#define MXL_QK_K 256 /* elements per super-block of the K-quants */

typedef struct { uint16_t d; uint8_t qs[16]; } mxl_block_q4_0;                   /* 18 B */
typedef struct { uint16_t d, m; uint8_t qs[16]; } mxl_block_q4_1;                /* 20 B */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } mxl_block_q5_0;    /* 22 B */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } mxl_block_q5_1; /* 24 B */
typedef struct { uint16_t d; int8_t qs[32]; } mxl_block_q8_0;                    /* 34 B */
/* MXFP4 (ggml block_mxfp4): value j = kvalues[code j] * 2^(e - 128) (E2M1 doubled, the scale
 * halved: ggml's e8m0_to_fp32_half); codes 0..15 in the low nibbles of qs, 16..31 in the high */
typedef struct { uint8_t e; uint8_t qs[16]; } mxl_block_mxfp4;                    /* 17 B */
/* The ternary formats (ggml block_tq1_0 / block_tq2_0): value = (t - 1) * d, t in 0..2. TQ1_0
 * packs 5 (qs) or 4 (qh) base-3 digits a byte as ceil(digits * 256 / 243), read back digit n by
 * ((uint8_t)(byte * 3^n) * 3) >> 8; TQ2_0 packs 4 two-bit codes a byte, byte m of a 32-byte
 * group holding elements m, m + 32, m + 64, m + 96 of its 128. */
typedef struct { uint8_t qs[48]; uint8_t qh[4]; uint16_t d; } mxl_block_tq1_0;     /* 54 B */
typedef struct { uint8_t qs[64]; uint16_t d; } mxl_block_tq2_0;                   /* 66 B */
/* Ternary codes t - 1 (-1, 0, 1) of one TQ1_0 / TQ2_0 block, in element order (ggml's
 * dequantize_row_tq1_0 / tq2_0). */
static inline int mxl_tq1_digit(uint8_t byte, int n) {
    static const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
    const uint8_t q = (uint8_t)(byte * pow3[n]);
    return (((uint16_t)q * 3) >> 8) - 1;
}
static inline void mxl_tq1_0_codes(const mxl_block_tq1_0 *b, int *q) {
    int k = 0;
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 32; m++) q[k++] = mxl_tq1_digit(b->qs[m], n);
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 16; m++) q[k++] = mxl_tq1_digit(b->qs[32 + m], n);
    for (int n = 0; n < 4; n++)
        for (int j = 0; j < 4; j++) q[k++] = mxl_tq1_digit(b->qh[j], n);
}
static inline void mxl_tq2_0_codes(const mxl_block_tq2_0 *b, int *q) {
    int k = 0;
    for (int j = 0; j < 64; j += 32)
        for (int l = 0; l < 4; l++)
            for (int m = 0; m < 32; m++) q[k++] = ((b->qs[j + m] >> (2 * l)) & 3) - 1;
}
/* MXFP4's E2M1 values doubled (ggml kvalues_mxfp4) and its E8M0 scale halved (ggml's
 * e8m0_to_fp32_half: 2^(e - 128), the two lowest exponents as f32 denormals). */
static const int8_t mxl_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
static inline float mxl_e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? UINT32_C(0x00200000) << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
/* IQ4_NL (ggml block_iq4_nl): value j = d * kvalues_iq4nl[code j], codes 0..15 in the low nibbles
 * of qs, 16..31 in the high (as Q4_0); dotted against q8a as Q4_0 is. */
typedef struct { uint16_t d; uint8_t qs[16]; } mxl_block_iq4_nl;                  /* 18 B */
/* IQ4_XS (ggml block_iq4_xs): 8 sub-blocks of 32 with the IQ4_NL table; sub-block ib has the 6-bit
 * scale ls = (low nibble ib of scales_l) | (bits 2ib..2ib+1 of scales_h) << 4, value =
 * (d * (ls - 32)) * kvalues[code], its codes in qs[16 ib .. 16 ib + 15] (low nibbles first).
 * Dotted against q8k (as ggml): the super-block's sum of (ls - 32) * (codes . x) is an exact
 * int32 (|sum| <= 8 * 32 * 32 * 127 * 127 < 2^27), combined once by mxl_kq_combine, so every
 * variant is bit-identical; the 32-element sub-blocks line up with q8k's 32-element halves. */
typedef struct { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; } mxl_block_iq4_xs; /* 136 B */
/* ggml's kvalues_iq4nl: the non-linear 4-bit grid of IQ4_NL and IQ4_XS */
static const int8_t mxl_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                             1,    13,   25,  38,  53,  69,  89,  113};
/* Signed 6-bit scale ls - 32 of IQ4_XS sub-block ib (0..7). */
static inline int mxl_iq4xs_scale(const mxl_block_iq4_xs *b, int ib) {
    return (((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b->scales_h >> (2 * ib)) & 3) << 4)) - 32;
}
/* The IQ grid formats (ggml block_iq2_xxs .. block_iq1_m; gguf.quants' dequantize_blocks is the
 * truth). Every 256-element super-block is read as signed integer codes q (grid value x sign;
 * for IQ1 8 x grid value +- 1, the +-1/8 delta made integral), an odd integer multiplier m per
 * 16 elements (2 ls + 1, or 1 + 2 ls for IQ3_S) and a power of two p, so that
 * value = ((d * m) * p) * q exactly as the package computes it:
 *   IQ2_XXS: d, then per 32: 4 grid bytes + a u32 of four 7-bit sign indices and ls (bits 28..31);
 *            value = d (0.5 + ls) / 4 x grid x sign, p = 1/8
 *   IQ2_XS:  d, 32 u16 (9-bit grid index | 7-bit sign index << 9), 4-bit ls per 16; p = 1/8
 *   IQ2_S:   d, 32 low index bytes, 32 sign bytes, 2 high index bits a group (qh), ls per 16
 *   IQ3_XXS: d, 64 index bytes (grid rows of 4), then per 32 a u32 of signs and ls; p = 1/4
 *   IQ3_S:   d, 64 low index bytes + 1 high bit each (qh), sign bits, ls per 32; m = 1 + 2 ls, p = 1
 *   IQ1_S:   d, 32 low index bytes, per 32 a u16: 3 high index bits per group of 8, ls (12..14),
 *            the delta's sign (15); value = d (2 ls + 1) (grid -+ 1/8), p = 1/8
 *   IQ1_M:   32 low index bytes, 16 bytes of 3 high index bits + delta sign per group of 8, four
 *            u16 of 3-bit scales per 16 whose top nibbles make up the f16 d.
 * All dot against q8k (as ggml): per super-block sum_g m_g (q . x)_g is exact in int32, then
 * p * mxl_kq_combine(d, 0, xd, sum, 0) (p a power of two: an exact scaling). */
typedef struct { uint16_t d; uint16_t qs[32]; } mxl_block_iq2_xxs;                /* 66 B */
typedef struct { uint16_t d; uint16_t qs[32]; uint8_t scales[8]; } mxl_block_iq2_xs; /* 74 B */
typedef struct { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t scales[8]; } mxl_block_iq2_s; /* 82 B */
typedef struct { uint16_t d; uint8_t qs[96]; } mxl_block_iq3_xxs;                 /* 98 B */
typedef struct { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t signs[32]; uint8_t scales[4]; } mxl_block_iq3_s; /* 110 B */
typedef struct { uint16_t d; uint8_t qs[32]; uint16_t qh[8]; } mxl_block_iq1_s;   /* 50 B */
typedef struct { uint8_t qs[32]; uint8_t qh[16]; uint16_t scales[4]; } mxl_block_iq1_m; /* 56 B */
/* Helpers of every IQ kernel: a little-endian u32 of a block (any alignment), nibble i of a packed
 * array (low nibble first), and the 32 sign bits of four 7-bit ksigns_iq2xs indices (bits 0..27
 * of aux, 8 bits each, in order). */
static inline uint32_t mxl_rd_u32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline int mxl_iq_nib(const uint8_t *s, int i) { return (s[i / 2] >> (4 * (i % 2))) & 0xF; }
static inline uint32_t mxl_iq_ksigns4(uint32_t aux) {
    return (uint32_t)mxl_ksigns_iq2xs[aux & 127] | (uint32_t)mxl_ksigns_iq2xs[(aux >> 7) & 127] << 8 |
           (uint32_t)mxl_ksigns_iq2xs[(aux >> 14) & 127] << 16 | (uint32_t)mxl_ksigns_iq2xs[(aux >> 21) & 127] << 24;
}
/* Codes q[256], multipliers m[16] and the power of two of one IQ grid super-block (quant_gguf_ref.c);
 * returns d. */
float mxl_iq_grid_decode(mxl_dtype t, const void *blk, int *q, int *m, float *p);
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } mxl_block_q2_k; /* 84 */
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } mxl_block_q3_k; /* 110 */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } mxl_block_q4_k; /* 144 */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } mxl_block_q5_k; /* 176 */
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } mxl_block_q6_k; /* 210 */

/* Activation blocks (ours, in memory only). q8a: x[i] ~= d * qs[i]; s = d * sum(qs) (used by the
 * formats with an offset term: Q4_1, Q5_1 and MLX affine). q8k: ggml's Q8_K, x[i] ~= d * qs[i],
 * bsums[j] = sum of qs[16j .. 16j+15]. */
typedef struct { float d; float s; int8_t qs[32]; } mxl_block_q8a;                /* 40 B */
/* Two-term q8a (the panel path, quant_amx.h): x ~ d * qs + d2 * qs2 with d2 = d / 256: x is
 * quantized once on the scale d2 (v = round(x / d2), |v| <= 127 * 256, about 2^-15 of the
 * block's largest value) and v split into its high part qs = floor((v + 128) / 256) and the rest
 * qs2 = v - 256 qs (-128..127); s = d2 * sum(v) and sum = sum(v) (exact: |sum| < 2^20; the
 * VNNI kernels remove Q8_0's unsigned-code offset with it). The fixed power-of-two ratio lets a
 * kernel fold the two terms' integer dots into one, 256 dot1 + dot2, before a single conversion
 * to float. */
#define MXL_Q8A2_STEP2 (1.0f / 256.0f)
typedef struct { float d; float s; float d2; int32_t sum; int8_t qs[32]; int8_t qs2[32]; } mxl_block_q8a2; /* 80 B */
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } mxl_block_q8k;     /* 292 B */

_Static_assert(sizeof(mxl_block_q4_0) == 18, "q4_0");
_Static_assert(sizeof(mxl_block_q4_1) == 20, "q4_1");
_Static_assert(sizeof(mxl_block_q5_0) == 22, "q5_0");
_Static_assert(sizeof(mxl_block_q5_1) == 24, "q5_1");
_Static_assert(sizeof(mxl_block_q8_0) == 34, "q8_0");
_Static_assert(sizeof(mxl_block_q2_k) == 84, "q2_k");
_Static_assert(sizeof(mxl_block_q3_k) == 110, "q3_k");
_Static_assert(sizeof(mxl_block_q4_k) == 144, "q4_k");
_Static_assert(sizeof(mxl_block_q5_k) == 176, "q5_k");
_Static_assert(sizeof(mxl_block_q6_k) == 210, "q6_k");
_Static_assert(sizeof(mxl_block_q8k) == 292, "q8_k");
_Static_assert(sizeof(mxl_block_iq4_nl) == 18, "iq4_nl");
_Static_assert(sizeof(mxl_block_iq4_xs) == 136, "iq4_xs");
_Static_assert(sizeof(mxl_block_iq2_xxs) == 66, "iq2_xxs");
_Static_assert(sizeof(mxl_block_iq2_xs) == 74, "iq2_xs");
_Static_assert(sizeof(mxl_block_iq2_s) == 82, "iq2_s");
_Static_assert(sizeof(mxl_block_iq3_xxs) == 98, "iq3_xxs");
_Static_assert(sizeof(mxl_block_iq3_s) == 110, "iq3_s");
_Static_assert(sizeof(mxl_block_iq1_s) == 50, "iq1_s");
_Static_assert(sizeof(mxl_block_iq1_m) == 56, "iq1_m");

/* Exact IEEE half -> float without libm (subnormals via an exact float multiply). */
static inline float mxl_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    uint32_t bits;
    float f;
    if (exp == 0) {
        f = (float)mant * 5.9604644775390625e-08f; /* 2^-24, exact */
        memcpy(&bits, &f, 4);
        bits |= sign;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    memcpy(&f, &bits, 4);
    return f;
}
static inline float mxl_bf2f(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Element i of an F32 / F16 / BF16 row that need not be aligned. */
static inline float mxl_dense_elem(mxl_dtype t, const void *w, int64_t i) {
    if (t == MXL_DTYPE_F32) {
        float f;
        memcpy(&f, (const char *)w + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)w + 2 * i, 2);
    return t == MXL_DTYPE_F16 ? mxl_h2f(h) : mxl_bf2f(h);
}

/* Which activation block a weight format's fused dot consumes. */
typedef enum mxl_act_kind { MXL_ACT_F32 = 0, MXL_ACT_Q8A, MXL_ACT_Q8K, MXL_ACT_Q8A2 } mxl_act_kind;

mxl_act_kind mxl_gguf_act_kind(mxl_dtype t);


/* Activation quantization (reference; n a multiple of 32 resp. 256). Round to nearest, ties away
 * from zero, d = max|x| / 127 as ggml's quantize_row_q8_0/q8_K do (q8k: d = max / -127 with the
 * sign of the largest-magnitude value, as ggml). */
/* Q2_K / Q3_K low 2 bits of element e (0..255). */
static inline int mxl_k2bits(const uint8_t *qs, int e) {
    return (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}
/* The 256 signed codes (-4..3) of a Q3_K super-block (ggml's dequantize_row_q3_K order). */
static inline void mxl_q3k_codes(const mxl_block_q3_k *b, int *q) {
    for (int e = 0; e < 256; e++) q[e] = mxl_k2bits(b->qs, e) - (((b->hmask[e % 32] >> (e / 32)) & 1) ? 0 : 4);
}
/* Signed 6-bit scale i (0..15) of a Q3_K super-block, minus 32. */
static inline int mxl_q3k_scale(const uint8_t *s, int i) {
    int lo = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
    int hi = (s[8 + (i % 4)] >> (2 * (i / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}
/* The 256 signed codes (-32..31) of a Q6_K super-block (ggml's dequantize_row_q6_K order). */
static inline void mxl_q6k_codes(const mxl_block_q6_k *b, int *q) {
    for (int e = 0; e < 256; e++) {
        int h = e / 128, r = e % 128;
        int lo = (b->ql[h * 64 + r % 64] >> (4 * (r / 64))) & 0xF;
        int hi = (b->qh[h * 32 + r % 32] >> (2 * (r / 32))) & 3;
        q[e] = (lo | (hi << 4)) - 32;
    }
}
/* 6-bit scale and min j (0..7) of a Q4_K/Q5_K super-block (ggml's get_scale_min_k4). */
static inline void mxl_q4k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}
void mxl_quant_q8a_ref(const float *x, mxl_block_q8a *y, int64_t n);
void mxl_quant_q8k_ref(const float *x, mxl_block_q8k *y, int64_t n);
void mxl_quant_q8a2_ref(const float *x, mxl_block_q8a2 *y, int64_t n);
/* The same bits on AVX-512 (quant_gguf_avx512.c). */
void mxl_quant_q8a2_avx512(const float *x, mxl_block_q8a2 *y, int64_t n);
/* The same bits on AVX-512 (quant_gguf_avx512.c). */
void mxl_quant_q8k_avx512(const float *x, mxl_block_q8k *y, int64_t n);

/* (d*xd)*sumi - (dmin*xd)*summ: the per-super-block combination every K-quant dot variant uses.
 * Out of line (quant_gguf_ref.c, compiled without FMA) and written as separate statements, so
 * every variant gets the same bits whatever contraction the caller's compiler mode allows. */
float mxl_kq_combine(float d, float dmin, float xd, int sumi, int summ);

/* Reference fused dots: weight row (n elements) . activation blocks. */
float mxl_vec_dot_ref(mxl_dtype t, int64_t n, const void *w, const void *xq);

/* AVX2+FMA variants (compiled with target attributes; call only when the CPU has them). Return 0
 * when the format has no AVX2 dot (the caller then uses the reference). */
typedef float (*mxl_vec_dot_fn)(int64_t n, const void *w, const void *xq);
mxl_vec_dot_fn mxl_vec_dot_avx2_get(mxl_dtype t);
/* Four tokens at once (prefill): out[t] = dot(w, activation row t) for t < 4, activation row t
 * at (const char *)xq + t * xstride. Each weight block is decoded once for the four tokens; per
 * token the operations are those of the 1-token AVX2 dot, in the same order, so the results are
 * bit-identical to it. NULL when the format has no 4-token kernel. */
typedef void (*mxl_vec_dot4_fn)(int64_t n, const void *w, const void *xq, size_t xstride,
                                float *out);
mxl_vec_dot4_fn mxl_vec_dot4_avx2_get(mxl_dtype t);
void mxl_quant_q8a_avx2(const float *x, mxl_block_q8a *y, int64_t n);
/* mxl_quant_q8a2_ref's bits on AVX2 (the panel path's activations below the AVX-512 level). */
void mxl_quant_q8a2_avx2(const float *x, mxl_block_q8a2 *y, int64_t n);

/* AArch64 NEON variants (quant_gguf_neon.c), every format: dotprod false gives the baseline
 * AdvSIMD kernels, true the SDOT ones (call only on CPUs with the dot-product extension: the
 * kernel table's NEON dot-product level, kernels_neon.c). Bit-identical to mxl_vec_dot_ref. NULL on other architectures. */
mxl_vec_dot_fn mxl_vec_dot_neon_get(mxl_dtype t, bool dotprod);
/* The same bits as mxl_quant_q8a_ref / mxl_quant_q8k_ref in NEON (the references elsewhere). */
void mxl_quant_q8a_neon(const float *x, mxl_block_q8a *y, int64_t n);
void mxl_quant_q8k_neon(const float *x, mxl_block_q8k *y, int64_t n);

/* AVX-512 VNNI micro-kernel (quant_gguf_avx512.c): nrows (1..4) weight rows (row r at
 * (const char *)w + r*w_row_bytes) x ntok (1..4) tokens (activation row t at xq + t*xstride),
 * writing y[t*y_stride + r] for r < nrows, t < ntok. Float path (f32 order differs from the
 * reference), but each (row, token) result is the same bits for every nrows and ntok: the one
 * kernel serves decode (1 token) and prefill (groups of 4) alike (IQ4_XS's: bit-identical to the
 * reference as well). NULL for formats without one (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, Q4_K,
 * Q6_K, IQ4_XS have one). Prefetches the four rows after the quad
 * (from w + 4*w_row_bytes; prefetches never fault, so past the matrix is harmless). Call only when the
 * CPU has AVX-512 F/BW/VL + VNNI. */
typedef void (*mxl_gemm4x4_fn)(int64_t n, const void *w, size_t w_row_bytes, int nrows,
                               const void *xq, size_t xstride, int ntok, float *y, int64_t y_stride);
mxl_gemm4x4_fn mxl_gemm4x4_avx512_get(mxl_dtype t);
/* The same kernels in two steps, for many tokens against one quad (prefill, batches of > 4):
 * unpack the quad's weight side once into pre (mxl_gemm4x4_pre_floats(n) floats, 64-byte
 * aligned), then run token groups from it. Bitwise the results of the one-step kernel. For
 * Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, Q4_K, Q6_K, IQ4_XS (false for other types). */
typedef void (*mxl_gemm4x4_unpack_fn)(int64_t n, const void *w, size_t w_row_bytes, int nrows, float *pre);
typedef void (*mxl_gemm4x4_pre_fn)(int64_t n, const float *pre, int nrows, const void *xq, size_t xstride, int ntok,
                                   float *y, int64_t y_stride);
size_t mxl_gemm4x4_pre_floats(int64_t n);
bool mxl_gemm4x4_pre_avx512_get(mxl_dtype t, mxl_gemm4x4_unpack_fn *unpack, mxl_gemm4x4_pre_fn *kern);

#endif
