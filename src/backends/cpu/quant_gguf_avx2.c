/* quant_gguf_avx2.c - AVX2+FMA kernels for the ggml block formats (quant_gguf.h).
 *
 * Compiled with function target attributes, so the binary runs anywhere and these are only called
 * after run-time detection (cpu_features.h). The techniques follow ggml-cpu's x86 quants.c:
 * nibbles spread to bytes, signed x signed int8 products through _mm256_maddubs_epi16 with the
 * sign moved onto the activation (|w| * sign(w)*x), pairs widened with _mm256_madd_epi16.
 *   - 32-element formats: per-block int32 lanes converted to f32 and accumulated with FMA into a
 *     vector (so the f32 sum order differs from the reference; the integer part is exact).
 *   - K-quants (Q2_K..Q6_K): the whole super-block's scaled integer sum is formed exactly in
 *     int32 and combined with the scales by mxl_kq_combine, as the reference does, so the result
 *     is bit-identical to mxl_vec_dot_ref.
 *   - 4-token variants (prefill): a weight block is decoded once and used for four activation
 *     rows; per token the operations equal the 1-token kernel's (bit-identical results).
 * MXFP4 looks its nibbles up in the E2M1 table with one byte shuffle and runs as Q4_0; IQ4_NL the
 * same in kvalues_iq4nl. IQ4_XS shuffles the same table per 32-element sub-block and forms its
 * super-block sum exactly in int32 against q8k, as the K-quants (bit-identical). The IQ grid
 * formats gather their grid rows per 32-element sub-block (scalar 8- or 4-byte loads), move the
 * signs onto the activations and weight the two 16-element halves by madd: exact int32 sums,
 * the reference's f32 expression, so bit-identical too (1 and 4 tokens).
 * (Swapping maddubs+madd for VNNI dpbusd inside these 4-token kernels gained only 5-10% here; the
 * AVX-512 VNNI gain comes from the 4x4 register-tiled kernel in quant_gguf_avx512.c.) */
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/quant_iq_grids.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backends/cpu/reduce_avx2.h"
#include <math.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define ALWAYS __attribute__((always_inline))

/* Exact half -> float with F16C (same values as mxl_h2f). */
AVX2 static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

AVX2 static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
/* 16 bytes of nibbles -> 32 bytes: low nibbles first (elements 0..15), then high (16..31). */
AVX2 static inline __m256i nibbles_lo_hi(const uint8_t *p) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i m = _mm_set1_epi8(0x0F);
    __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
    return _mm256_set_m128i(hi, lo);
}
/* Spread 32 bits to 32 bytes: byte j = 0xFF when bit j is set. */
AVX2 static inline __m256i bits_to_bytes(uint32_t x) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                           0x0101010101010101LL, 0x0000000000000000LL);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    const __m256i sel = _mm256_set1_epi64x((long long)0x7fbfdfeff7fbfdfeULL);
    b = _mm256_or_si256(b, sel);
    return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}
/* signed int8 x signed int8, 32 products summed in pairs to 16 int16 then to 8 int32. */
AVX2 static inline __m256i dot_i8(__m256i x, __m256i y) {
    __m256i ax = _mm256_sign_epi8(x, x), sy = _mm256_sign_epi8(y, x);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
}
/* unsigned (<= 127 pairwise safe) x signed int8 -> 8 int32. */
AVX2 static inline __m256i dot_u8(__m256i u, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1));
}
AVX2 static inline uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

AVX2 static float dot_q4_0(int64_t n, const void *w, const void *xq) {
    const mxl_block_q4_0 *b = w;
    const mxl_block_q8a *x = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = _mm256_sub_epi8(nibbles_lo_hi(b[i].qs), _mm256_set1_epi8(8));
        __m256i y = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256 s = _mm256_cvtepi32_ps(dot_i8(q, y));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d) * x[i].d), s, acc);
    }
    return mxl_hsum8_avx2(acc);
}

/* 16 nibble bytes (32 codes, low nibbles first) looked up in a 16-entry int8 table: MXFP4's
 * doubled E2M1 values (-12..12), IQ4_NL / IQ4_XS's kvalues_iq4nl (-127..113) */
AVX2 static inline __m256i table_codes(const int8_t *table, const uint8_t *qs) {
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)table));
    return _mm256_shuffle_epi8(lut, nibbles_lo_hi(qs));
}
AVX2 static inline __m256i mxfp4_codes(const uint8_t *qs) { return table_codes(mxl_kvalues_mxfp4, qs); }

AVX2 static float dot_mxfp4(int64_t n, const void *w, const void *xq) {
    const mxl_block_mxfp4 *b = w;
    const mxl_block_q8a *x = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = mxfp4_codes(b[i].qs);
        __m256i y = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256 s = _mm256_cvtepi32_ps(dot_i8(q, y));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(mxl_e8m0_half(b[i].e) * x[i].d), s, acc);
    }
    return mxl_hsum8_avx2(acc);
}

AVX2 static inline __m256i iq4nl_codes(const uint8_t *qs) { return table_codes(mxl_kvalues_iq4nl, qs); }

AVX2 static float dot_iq4_nl(int64_t n, const void *w, const void *xq) {
    const mxl_block_iq4_nl *b = w;
    const mxl_block_q8a *x = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = iq4nl_codes(b[i].qs);
        __m256i y = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256 s = _mm256_cvtepi32_ps(dot_i8(q, y));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d) * x[i].d), s, acc);
    }
    return mxl_hsum8_avx2(acc);
}

/* IQ4_XS against q8k: per sub-block the int16 pair sums (|.| <= 2 * 127 * 127) times ls - 32 by
 * madd, accumulated in int32 lanes; one mxl_kq_combine per super-block as the reference. */
AVX2 static float dot_iq4_xs(int64_t n, const void *w, const void *xq) {
    const mxl_block_iq4_xs *b = w;
    const mxl_block_q8k *x = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        __m256i sumv = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            __m256i q = iq4nl_codes(b[i].qs + 16 * ib);
            __m256i y = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * ib));
            __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
            sumv = _mm256_add_epi32(sumv, _mm256_madd_epi16(p16, _mm256_set1_epi16((short)mxl_iq4xs_scale(&b[i], ib))));
        }
        acc += mxl_kq_combine(h2f(b[i].d), 0.0f, x[i].d, hsum_epi32(sumv), 0);
    }
    return acc;
}

/* ---- IQ grid formats against q8k (layouts: quant_gguf.h) ---- */
static inline uint64_t rd_u64(const void *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
/* 4 rows of 8 grid bytes (element order) as one vector */
AVX2 static inline __m256i rows8(const void *r0, const void *r1, const void *r2, const void *r3) {
    return _mm256_set_epi64x((long long)rd_u64(r3), (long long)rd_u64(r2), (long long)rd_u64(r1), (long long)rd_u64(r0));
}

/* Sub-block ib (32 elements) of an IQ2 / IQ3 super-block: the grid magnitudes, 32 sign bits
 * (bit j: element j negative), the multipliers of its two 16-element halves. */
AVX2 ALWAYS static inline __m256i iq_mag32(mxl_dtype t, const void *blk, int ib, uint32_t *signs, int *m0, int *m1) {
    switch (t) {
    case MXL_DTYPE_IQ2_XXS: {
        const mxl_block_iq2_xxs *b = blk;
        const uint32_t idx = mxl_rd_u32(b->qs + 4 * ib), aux = mxl_rd_u32(b->qs + 4 * ib + 2);
        *signs = mxl_iq_ksigns4(aux);
        *m0 = *m1 = 2 * (int)(aux >> 28) + 1;
        return rows8(mxl_iq2xxs_grid[idx & 255], mxl_iq2xxs_grid[(idx >> 8) & 255], mxl_iq2xxs_grid[(idx >> 16) & 255],
                     mxl_iq2xxs_grid[idx >> 24]);
    }
    case MXL_DTYPE_IQ2_XS: {
        const mxl_block_iq2_xs *b = blk;
        const uint16_t *q = b->qs + 4 * ib;
        *signs = (uint32_t)mxl_ksigns_iq2xs[q[0] >> 9] | (uint32_t)mxl_ksigns_iq2xs[q[1] >> 9] << 8 |
                 (uint32_t)mxl_ksigns_iq2xs[q[2] >> 9] << 16 | (uint32_t)mxl_ksigns_iq2xs[q[3] >> 9] << 24;
        *m0 = 2 * mxl_iq_nib(b->scales, 2 * ib) + 1, *m1 = 2 * mxl_iq_nib(b->scales, 2 * ib + 1) + 1;
        return rows8(mxl_iq2xs_grid[q[0] & 511], mxl_iq2xs_grid[q[1] & 511], mxl_iq2xs_grid[q[2] & 511],
                     mxl_iq2xs_grid[q[3] & 511]);
    }
    case MXL_DTYPE_IQ2_S: {
        const mxl_block_iq2_s *b = blk;
        const uint8_t *q = b->qs + 4 * ib;
        const unsigned h = b->qh[ib];
        *signs = mxl_rd_u32(b->qs + 32 + 4 * ib);
        *m0 = 2 * mxl_iq_nib(b->scales, 2 * ib) + 1, *m1 = 2 * mxl_iq_nib(b->scales, 2 * ib + 1) + 1;
        return rows8(mxl_iq2s_grid[q[0] | ((h & 3) << 8)], mxl_iq2s_grid[q[1] | (((h >> 2) & 3) << 8)],
                     mxl_iq2s_grid[q[2] | (((h >> 4) & 3) << 8)], mxl_iq2s_grid[q[3] | (((h >> 6) & 3) << 8)]);
    }
    case MXL_DTYPE_IQ3_XXS: {
        const mxl_block_iq3_xxs *b = blk;
        const uint8_t *q = b->qs + 8 * ib;
        const uint32_t aux = mxl_rd_u32(b->qs + 64 + 4 * ib);
        *signs = mxl_iq_ksigns4(aux);
        *m0 = *m1 = 2 * (int)(aux >> 28) + 1;
        return _mm256_set_epi32((int)mxl_rd_u32(mxl_iq3xxs_grid[q[7]]), (int)mxl_rd_u32(mxl_iq3xxs_grid[q[6]]),
                                (int)mxl_rd_u32(mxl_iq3xxs_grid[q[5]]), (int)mxl_rd_u32(mxl_iq3xxs_grid[q[4]]),
                                (int)mxl_rd_u32(mxl_iq3xxs_grid[q[3]]), (int)mxl_rd_u32(mxl_iq3xxs_grid[q[2]]),
                                (int)mxl_rd_u32(mxl_iq3xxs_grid[q[1]]), (int)mxl_rd_u32(mxl_iq3xxs_grid[q[0]]));
    }
    default: { /* IQ3_S */
        const mxl_block_iq3_s *b = blk;
        const uint8_t *q = b->qs + 8 * ib;
        const unsigned h = b->qh[ib];
        int r[8];
        for (int k = 0; k < 8; k++) r[k] = (int)mxl_rd_u32(mxl_iq3s_grid[q[k] | (((h >> k) & 1) << 8)]);
        *signs = mxl_rd_u32(b->signs + 4 * ib);
        *m0 = *m1 = 1 + 2 * mxl_iq_nib(b->scales, ib);
        return _mm256_set_epi32(r[7], r[6], r[5], r[4], r[3], r[2], r[1], r[0]);
    }
    }
}

/* IQ1_S / IQ1_M sub-block ib: signed codes 8 g +- 1 (-9..9) and the halves' multipliers. */
AVX2 ALWAYS static inline __m256i iq1_codes32(mxl_dtype t, const void *blk, int ib, int *m0, int *m1) {
    __m256i g, delta;
    if (t == MXL_DTYPE_IQ1_S) {
        const mxl_block_iq1_s *b = blk;
        const unsigned qh = b->qh[ib];
        const uint8_t *q = b->qs + 4 * ib;
        g = rows8(mxl_iq1s_grid[q[0] | ((qh & 7) << 8)], mxl_iq1s_grid[q[1] | (((qh >> 3) & 7) << 8)],
                  mxl_iq1s_grid[q[2] | (((qh >> 6) & 7) << 8)], mxl_iq1s_grid[q[3] | (((qh >> 9) & 7) << 8)]);
        delta = _mm256_set1_epi8(qh & 0x8000 ? -1 : 1);
        *m0 = *m1 = 2 * (int)((qh >> 12) & 7) + 1;
    } else {
        const mxl_block_iq1_m *b = blk;
        const uint8_t *q = b->qs + 4 * ib;
        const unsigned h0 = b->qh[2 * ib], h1 = b->qh[2 * ib + 1];
        const unsigned hs[4] = {h0 & 0xF, h0 >> 4, h1 & 0xF, h1 >> 4};
        g = rows8(mxl_iq1s_grid[q[0] | ((hs[0] & 7) << 8)], mxl_iq1s_grid[q[1] | ((hs[1] & 7) << 8)],
                  mxl_iq1s_grid[q[2] | ((hs[2] & 7) << 8)], mxl_iq1s_grid[q[3] | ((hs[3] & 7) << 8)]);
        const long long one = 0x0101010101010101LL;
        delta = _mm256_set_epi64x(hs[3] & 8 ? -1LL : one, hs[2] & 8 ? -1LL : one, hs[1] & 8 ? -1LL : one, hs[0] & 8 ? -1LL : one);
        *m0 = 2 * ((b->scales[ib / 2] >> (6 * (ib % 2))) & 7) + 1;
        *m1 = 2 * ((b->scales[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1;
    }
    g = _mm256_add_epi8(g, g);
    g = _mm256_add_epi8(g, g);
    g = _mm256_add_epi8(g, g);
    return _mm256_add_epi8(g, delta);
}

/* d of an IQ grid super-block (IQ1_M: assembled from its scales' top nibbles) */
static inline uint16_t iq_d_bits(mxl_dtype t, const void *blk) {
    if (t == MXL_DTYPE_IQ1_M) {
        const mxl_block_iq1_m *b = blk;
        return (uint16_t)((b->scales[0] >> 12) | ((b->scales[1] >> 8) & 0xF0) | ((b->scales[2] >> 4) & 0xF00) |
                          (b->scales[3] & 0xF000));
    }
    uint16_t d;
    memcpy(&d, blk, 2); /* every other IQ grid block starts with d */
    return d;
}

AVX2 ALWAYS static inline float dot_iq_grid(mxl_dtype t, int64_t n, const void *w, const void *xq, size_t bb, float p) {
    const mxl_block_q8k *x = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        const void *blk = (const uint8_t *)w + (size_t)i * bb;
        __m256i sumv = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            __m256i y = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * ib));
            int m0, m1;
            __m256i p16;
            if (t == MXL_DTYPE_IQ1_S || t == MXL_DTYPE_IQ1_M) {
                __m256i c = iq1_codes32(t, blk, ib, &m0, &m1);
                p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(c, c), _mm256_sign_epi8(y, c));
            } else {
                uint32_t sg;
                __m256i mag = iq_mag32(t, blk, ib, &sg, &m0, &m1);
                __m256i s = bits_to_bytes(sg); /* 0xFF where negative: y -> -y */
                p16 = _mm256_maddubs_epi16(mag, _mm256_sub_epi8(_mm256_xor_si256(y, s), s));
            }
            __m256i m16 = _mm256_set_m128i(_mm_set1_epi16((short)m1), _mm_set1_epi16((short)m0));
            sumv = _mm256_add_epi32(sumv, _mm256_madd_epi16(p16, m16));
        }
        acc += p * mxl_kq_combine(h2f(iq_d_bits(t, blk)), 0.0f, x[i].d, hsum_epi32(sumv), 0);
    }
    return acc;
}
/* Four tokens: each sub-block decoded once (IQ1: codes and their magnitudes; IQ2 / IQ3:
 * magnitudes and the sign mask), then per token the 1-token kernel's integer work and f32
 * expression (bit-identical to it). */
AVX2 ALWAYS static inline void dot4_iq_grid(mxl_dtype t, int64_t n, const void *w, const void *xq, size_t xs,
                                            float *out, size_t bb, float p) {
    const int iq1 = t == MXL_DTYPE_IQ1_S || t == MXL_DTYPE_IQ1_M;
    const uint8_t *xb = xq;
    float acc[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / 256; i++) {
        const void *blk = (const uint8_t *)w + (size_t)i * bb;
        __m256i u[8], s[8], m16[8]; /* unsigned factor, sign source / mask, multipliers */
        for (int ib = 0; ib < 8; ib++) {
            int m0, m1;
            if (iq1) {
                s[ib] = iq1_codes32(t, blk, ib, &m0, &m1);
                u[ib] = _mm256_sign_epi8(s[ib], s[ib]);
            } else {
                uint32_t sg;
                u[ib] = iq_mag32(t, blk, ib, &sg, &m0, &m1);
                s[ib] = bits_to_bytes(sg);
            }
            m16[ib] = _mm256_set_m128i(_mm_set1_epi16((short)m1), _mm_set1_epi16((short)m0));
        }
        const float d = h2f(iq_d_bits(t, blk));
        for (int k = 0; k < 4; k++) {
            const mxl_block_q8k *x = (const mxl_block_q8k *)(xb + k * xs) + i;
            __m256i sumv = _mm256_setzero_si256();
            for (int ib = 0; ib < 8; ib++) {
                __m256i y = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * ib));
                __m256i sy = iq1 ? _mm256_sign_epi8(y, s[ib]) : _mm256_sub_epi8(_mm256_xor_si256(y, s[ib]), s[ib]);
                sumv = _mm256_add_epi32(sumv, _mm256_madd_epi16(_mm256_maddubs_epi16(u[ib], sy), m16[ib]));
            }
            acc[k] += p * mxl_kq_combine(d, 0.0f, x->d, hsum_epi32(sumv), 0);
        }
    }
    for (int k = 0; k < 4; k++) out[k] = acc[k];
}
#define IQ_DOT4(name, T, blk, P)                                                                       \
    AVX2 static void dot4_##name(int64_t n, const void *w, const void *x, size_t s, float *o) {      \
        dot4_iq_grid(T, n, w, x, s, o, sizeof(blk), P);                                              \
    }
IQ_DOT4(iq2_xxs, MXL_DTYPE_IQ2_XXS, mxl_block_iq2_xxs, 0.125f)
IQ_DOT4(iq2_xs, MXL_DTYPE_IQ2_XS, mxl_block_iq2_xs, 0.125f)
IQ_DOT4(iq2_s, MXL_DTYPE_IQ2_S, mxl_block_iq2_s, 0.125f)
IQ_DOT4(iq3_xxs, MXL_DTYPE_IQ3_XXS, mxl_block_iq3_xxs, 0.25f)
IQ_DOT4(iq3_s, MXL_DTYPE_IQ3_S, mxl_block_iq3_s, 1.0f)
IQ_DOT4(iq1_s, MXL_DTYPE_IQ1_S, mxl_block_iq1_s, 0.125f)
IQ_DOT4(iq1_m, MXL_DTYPE_IQ1_M, mxl_block_iq1_m, 0.125f)

AVX2 static float dot_iq2_xxs(int64_t n, const void *w, const void *x) { return dot_iq_grid(MXL_DTYPE_IQ2_XXS, n, w, x, sizeof(mxl_block_iq2_xxs), 0.125f); }
AVX2 static float dot_iq2_xs(int64_t n, const void *w, const void *x) { return dot_iq_grid(MXL_DTYPE_IQ2_XS, n, w, x, sizeof(mxl_block_iq2_xs), 0.125f); }
AVX2 static float dot_iq2_s(int64_t n, const void *w, const void *x) { return dot_iq_grid(MXL_DTYPE_IQ2_S, n, w, x, sizeof(mxl_block_iq2_s), 0.125f); }
AVX2 static float dot_iq3_xxs(int64_t n, const void *w, const void *x) { return dot_iq_grid(MXL_DTYPE_IQ3_XXS, n, w, x, sizeof(mxl_block_iq3_xxs), 0.25f); }
AVX2 static float dot_iq3_s(int64_t n, const void *w, const void *x) { return dot_iq_grid(MXL_DTYPE_IQ3_S, n, w, x, sizeof(mxl_block_iq3_s), 1.0f); }
AVX2 static float dot_iq1_s(int64_t n, const void *w, const void *x) { return dot_iq_grid(MXL_DTYPE_IQ1_S, n, w, x, sizeof(mxl_block_iq1_s), 0.125f); }
AVX2 static float dot_iq1_m(int64_t n, const void *w, const void *x) { return dot_iq_grid(MXL_DTYPE_IQ1_M, n, w, x, sizeof(mxl_block_iq1_m), 0.125f); }

AVX2 static float dot_q4_1(int64_t n, const void *w, const void *xq) {
    const mxl_block_q4_1 *b = w;
    const mxl_block_q8a *x = xq;
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = nibbles_lo_hi(b[i].qs);
        __m256i y = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256 s = _mm256_cvtepi32_ps(dot_u8(q, y));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d) * x[i].d), s, acc);
        accm += h2f(b[i].m) * x[i].s;
    }
    return mxl_hsum8_avx2(acc) + accm;
}

AVX2 static float dot_q5_0(int64_t n, const void *w, const void *xq) {
    const mxl_block_q5_0 *b = w;
    const mxl_block_q8a *x = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = nibbles_lo_hi(b[i].qs);
        /* q - 16 + 16*bit == q | (bit ? 0 : 0xF0) as signed bytes */
        __m256i hb = _mm256_andnot_si256(bits_to_bytes(load_u32(b[i].qh)), _mm256_set1_epi8((char)0xF0));
        q = _mm256_or_si256(q, hb);
        __m256i y = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256 s = _mm256_cvtepi32_ps(dot_i8(q, y));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d) * x[i].d), s, acc);
    }
    return mxl_hsum8_avx2(acc);
}

AVX2 static float dot_q5_1(int64_t n, const void *w, const void *xq) {
    const mxl_block_q5_1 *b = w;
    const mxl_block_q8a *x = xq;
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = nibbles_lo_hi(b[i].qs);
        __m256i hb = _mm256_and_si256(bits_to_bytes(load_u32(b[i].qh)), _mm256_set1_epi8(0x10));
        q = _mm256_or_si256(q, hb);
        __m256i y = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256 s = _mm256_cvtepi32_ps(dot_u8(q, y));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d) * x[i].d), s, acc);
        accm += h2f(b[i].m) * x[i].s;
    }
    return mxl_hsum8_avx2(acc) + accm;
}

AVX2 static float dot_q8_0(int64_t n, const void *w, const void *xq) {
    const mxl_block_q8_0 *b = w;
    const mxl_block_q8a *x = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)b[i].qs);
        __m256i y = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256 s = _mm256_cvtepi32_ps(dot_i8(q, y));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d) * x[i].d), s, acc);
    }
    return mxl_hsum8_avx2(acc);
}

/* 6-bit scales and mins of a Q4_K/Q5_K super-block (ggml's get_scale_min_k4 for j = 0..7). */
static inline void k4_scales(const uint8_t *q, uint8_t *sc, uint8_t *m) {
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        m[j] = q[j + 4] & 63;
        sc[j + 4] = (uint8_t)((q[j + 8] & 0xF) | ((q[j] >> 6) << 4));
        m[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
}

/* Shared by Q4_K and Q5_K: qh == NULL for Q4_K. */
AVX2 static inline float dot_q45_k(int64_t n, const void *w, const void *xq, int five) {
    const mxl_block_q8k *x = xq;
    float acc = 0.0f;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *scales, *qs, *qhp = NULL;
        float d, dmin;
        if (five) {
            const mxl_block_q5_k *b = (const mxl_block_q5_k *)w + i;
            scales = b->scales; qs = b->qs; qhp = b->qh;
            d = h2f(b->d); dmin = h2f(b->dmin);
        } else {
            const mxl_block_q4_k *b = (const mxl_block_q4_k *)w + i;
            scales = b->scales; qs = b->qs;
            d = h2f(b->d); dmin = h2f(b->dmin);
        }
        uint8_t sc[8], m[8];
        k4_scales(scales, sc, m);
        __m256i qh = five ? _mm256_loadu_si256((const __m256i *)qhp) : _mm256_setzero_si256();
        __m256i sumv = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(v, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if (five) {
                /* bit (2c) of qh[l] is the 5th bit of sub-block 2c, bit 2c+1 of 2c+1 */
                __m256i one = _mm256_set1_epi8(1);
                __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
                __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(b0, 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(b1, 4));
            }
            __m256i y0 = _mm256_loadu_si256((const __m256i *)(x[i].qs + 64 * c));
            __m256i y1 = _mm256_loadu_si256((const __m256i *)(x[i].qs + 64 * c + 32));
            __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16(sc[2 * c]));
            __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), _mm256_set1_epi16(sc[2 * c + 1]));
            sumv = _mm256_add_epi32(sumv, _mm256_add_epi32(p0, p1));
        }
        int sumi = hsum_epi32(sumv);
        int summ = 0;
        for (int j = 0; j < 8; j++) summ += m[j] * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
        acc += mxl_kq_combine(d, dmin, x[i].d, sumi, summ);
    }
    return acc;
}
AVX2 static float dot_q4_k(int64_t n, const void *w, const void *xq) { return dot_q45_k(n, w, xq, 0); }
AVX2 static float dot_q5_k(int64_t n, const void *w, const void *xq) { return dot_q45_k(n, w, xq, 1); }

AVX2 static float dot_q6_k(int64_t n, const void *w, const void *xq) {
    const mxl_block_q6_k *bb = w;
    const mxl_block_q8k *x = xq;
    float acc = 0.0f;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / 256; i++) {
        const mxl_block_q6_k *b = &bb[i];
        __m256i sumv = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
            for (int k = 0; k < 4; k++) {
                /* 32 elements = sub-blocks 8h+2k and 8h+2k+1 (16 each); q unsigned 0..63 */
                __m256i y = _mm256_loadu_si256((const __m256i *)(x[i].qs + 128 * h + 32 * k));
                __m256i p16 = _mm256_maddubs_epi16(q[k], y);
                __m256i s16 = _mm256_set_m128i(_mm_set1_epi16(b->scales[8 * h + 2 * k + 1]),
                                               _mm_set1_epi16(b->scales[8 * h + 2 * k]));
                sumv = _mm256_add_epi32(sumv, _mm256_madd_epi16(p16, s16));
            }
        }
        /* subtract 32 * sum(scale_j * bsum_j): q - 32 */
        int corr = 0;
        for (int j = 0; j < 16; j++) corr += b->scales[j] * x[i].bsums[j];
        int sumi = hsum_epi32(sumv) - 32 * corr;
        acc += mxl_kq_combine(h2f(b->d), 0.0f, x[i].d, sumi, 0);
    }
    return acc;
}

/* Q2_K and Q3_K: codes as unsigned bytes, 32 elements per (half h, shift s) = sub-blocks
 * 8h+2s and 8h+2s+1; per-16 scales applied with madd on int16 lanes (low 128-bit lane = first
 * sub-block). Exact super-block integer sums, reference f32 expression. */
AVX2 static float dot_q2_k(int64_t n, const void *w, const void *xq) {
    const mxl_block_q2_k *bb = w;
    const mxl_block_q8k *x = xq;
    const __m256i m3 = _mm256_set1_epi8(3);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        const mxl_block_q2_k *b = &bb[i];
        __m256i sumv = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 2 * s), m3);
                __m256i y = _mm256_loadu_si256((const __m256i *)(x[i].qs + 128 * h + 32 * s));
                int j = 8 * h + 2 * s;
                __m256i sc = _mm256_set_m128i(_mm_set1_epi16(b->scales[j + 1] & 0xF),
                                              _mm_set1_epi16(b->scales[j] & 0xF));
                sumv = _mm256_add_epi32(sumv, _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), sc));
            }
        }
        int summ = 0;
        for (int j = 0; j < 16; j++) summ += (b->scales[j] >> 4) * x[i].bsums[j];
        int sumi = hsum_epi32(sumv);
        acc += mxl_kq_combine(h2f(b->d), h2f(b->dmin), x[i].d, sumi, summ);
    }
    return acc;
}

AVX2 static float dot_q3_k(int64_t n, const void *w, const void *xq) {
    const mxl_block_q3_k *bb = w;
    const mxl_block_q8k *x = xq;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        const mxl_block_q3_k *b = &bb[i];
        int sc[16];
        for (int j = 0; j < 16; j++) {
            int lo = j < 8 ? (b->scales[j] & 0xF) : (b->scales[j - 8] >> 4);
            int hi = (b->scales[8 + (j % 4)] >> (2 * (j / 4))) & 3;
            sc[j] = (lo | (hi << 4)) - 32;
        }
        __m256i hm = _mm256_loadu_si256((const __m256i *)b->hmask);
        __m256i sumv = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                /* q' = low 2 bits + 4 * high bit, in 0..7; q = q' - 4 */
                __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + s), one);
                __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2 * s), m3),
                                            _mm256_slli_epi16(hb, 2));
                __m256i y = _mm256_loadu_si256((const __m256i *)(x[i].qs + 128 * h + 32 * s));
                int j = 8 * h + 2 * s;
                __m256i scv = _mm256_set_m128i(_mm_set1_epi16((short)sc[j + 1]), _mm_set1_epi16((short)sc[j]));
                sumv = _mm256_add_epi32(sumv, _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), scv));
            }
        }
        int corr = 0;
        for (int j = 0; j < 16; j++) corr += sc[j] * x[i].bsums[j];
        int sumi = hsum_epi32(sumv) - 4 * corr;
        acc += mxl_kq_combine(h2f(b->d), 0.0f, x[i].d, sumi, 0);
    }
    return acc;
}

/* ---- 4-token kernels ---------------------------------------------------------------------- */

/* Block i of a 32-element format as 32 int8 codes (signed for Q4_0/Q5_0/Q8_0, unsigned 0..31
 * for Q4_1/Q5_1), its scale d and offset m (0 for the symmetric formats). */
AVX2 ALWAYS static inline __m256i decode32(mxl_dtype t, const void *w, int64_t i, float *d, float *m) {
    switch (t) {
    case MXL_DTYPE_Q4_0: {
        const mxl_block_q4_0 *b = (const mxl_block_q4_0 *)w + i;
        *d = h2f(b->d), *m = 0.0f;
        return _mm256_sub_epi8(nibbles_lo_hi(b->qs), _mm256_set1_epi8(8));
    }
    case MXL_DTYPE_Q4_1: {
        const mxl_block_q4_1 *b = (const mxl_block_q4_1 *)w + i;
        *d = h2f(b->d), *m = h2f(b->m);
        return nibbles_lo_hi(b->qs);
    }
    case MXL_DTYPE_Q5_0: {
        const mxl_block_q5_0 *b = (const mxl_block_q5_0 *)w + i;
        *d = h2f(b->d), *m = 0.0f;
        __m256i hb = _mm256_andnot_si256(bits_to_bytes(load_u32(b->qh)), _mm256_set1_epi8((char)0xF0));
        return _mm256_or_si256(nibbles_lo_hi(b->qs), hb);
    }
    case MXL_DTYPE_Q5_1: {
        const mxl_block_q5_1 *b = (const mxl_block_q5_1 *)w + i;
        *d = h2f(b->d), *m = h2f(b->m);
        __m256i hb = _mm256_and_si256(bits_to_bytes(load_u32(b->qh)), _mm256_set1_epi8(0x10));
        return _mm256_or_si256(nibbles_lo_hi(b->qs), hb);
    }
    case MXL_DTYPE_MXFP4: {
        const mxl_block_mxfp4 *b = (const mxl_block_mxfp4 *)w + i;
        *d = mxl_e8m0_half(b->e), *m = 0.0f;
        return mxfp4_codes(b->qs);
    }
    case MXL_DTYPE_IQ4_NL: {
        const mxl_block_iq4_nl *b = (const mxl_block_iq4_nl *)w + i;
        *d = h2f(b->d), *m = 0.0f;
        return iq4nl_codes(b->qs);
    }
    default: {
        const mxl_block_q8_0 *b = (const mxl_block_q8_0 *)w + i;
        *d = h2f(b->d), *m = 0.0f;
        return _mm256_loadu_si256((const __m256i *)b->qs);
    }
    }
}

AVX2 ALWAYS static inline void dot4_32(mxl_dtype t, int64_t n, const void *w, const void *xq,
                                       size_t xs, float *out) {
    const int is_unsigned = t == MXL_DTYPE_Q4_1 || t == MXL_DTYPE_Q5_1;
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t *xb = xq;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float accm[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / 32; i++) {
        float d, m;
        __m256i q = decode32(t, w, i, &d, &m);
        __m256i aq = is_unsigned ? q : _mm256_sign_epi8(q, q);
        for (int k = 0; k < 4; k++) {
            const mxl_block_q8a *x = (const mxl_block_q8a *)(xb + k * xs) + i;
            __m256i y = _mm256_loadu_si256((const __m256i *)x->qs);
            __m256i sy = is_unsigned ? y : _mm256_sign_epi8(y, q);
            __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(aq, sy), ones));
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d * x->d), s, acc[k]);
            if (is_unsigned) accm[k] += m * x->s;
        }
    }
    for (int k = 0; k < 4; k++) out[k] = is_unsigned ? mxl_hsum8_avx2(acc[k]) + accm[k] : mxl_hsum8_avx2(acc[k]);
}
AVX2 static void dot4_q4_0(int64_t n, const void *w, const void *x, size_t s, float *o) { dot4_32(MXL_DTYPE_Q4_0, n, w, x, s, o); }
AVX2 static void dot4_q4_1(int64_t n, const void *w, const void *x, size_t s, float *o) { dot4_32(MXL_DTYPE_Q4_1, n, w, x, s, o); }
AVX2 static void dot4_q5_0(int64_t n, const void *w, const void *x, size_t s, float *o) { dot4_32(MXL_DTYPE_Q5_0, n, w, x, s, o); }
AVX2 static void dot4_q5_1(int64_t n, const void *w, const void *x, size_t s, float *o) { dot4_32(MXL_DTYPE_Q5_1, n, w, x, s, o); }
AVX2 static void dot4_q8_0(int64_t n, const void *w, const void *x, size_t s, float *o) { dot4_32(MXL_DTYPE_Q8_0, n, w, x, s, o); }
AVX2 static void dot4_mxfp4(int64_t n, const void *w, const void *x, size_t s, float *o) { dot4_32(MXL_DTYPE_MXFP4, n, w, x, s, o); }
AVX2 static void dot4_iq4_nl(int64_t n, const void *w, const void *x, size_t s, float *o) { dot4_32(MXL_DTYPE_IQ4_NL, n, w, x, s, o); }

/* IQ4_XS: the super-block's 8 code vectors (and their magnitudes) decoded once; per token the
 * 1-token kernel's integer work and f32 expression. */
AVX2 static void dot4_iq4_xs(int64_t n, const void *w, const void *xq, size_t xs, float *out) {
    const mxl_block_iq4_xs *bb = w;
    const uint8_t *xb = xq;
    float acc[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / 256; i++) {
        __m256i q[8], aq[8], s16[8];
        for (int ib = 0; ib < 8; ib++) {
            q[ib] = iq4nl_codes(bb[i].qs + 16 * ib);
            aq[ib] = _mm256_sign_epi8(q[ib], q[ib]);
            s16[ib] = _mm256_set1_epi16((short)mxl_iq4xs_scale(&bb[i], ib));
        }
        for (int t = 0; t < 4; t++) {
            const mxl_block_q8k *x = (const mxl_block_q8k *)(xb + t * xs) + i;
            __m256i sumv = _mm256_setzero_si256();
            for (int ib = 0; ib < 8; ib++) {
                __m256i y = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * ib));
                __m256i p16 = _mm256_maddubs_epi16(aq[ib], _mm256_sign_epi8(y, q[ib]));
                sumv = _mm256_add_epi32(sumv, _mm256_madd_epi16(p16, s16[ib]));
            }
            acc[t] += mxl_kq_combine(h2f(bb[i].d), 0.0f, x->d, hsum_epi32(sumv), 0);
        }
    }
    for (int t = 0; t < 4; t++) out[t] = acc[t];
}

/* Q4_K / Q5_K: the super-block's 256 codes are unpacked once (8 vectors), then each token does
 * the 1-token kernel's integer work and the same f32 expression. */
AVX2 ALWAYS static inline void dot4_q45_k(int64_t n, const void *w, const void *xq, size_t xs,
                                          float *out, int five) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const uint8_t *xb = xq;
    float acc[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *scales, *qs, *qhp = NULL;
        float d, dmin;
        if (five) {
            const mxl_block_q5_k *b = (const mxl_block_q5_k *)w + i;
            scales = b->scales; qs = b->qs; qhp = b->qh;
            d = h2f(b->d); dmin = h2f(b->dmin);
        } else {
            const mxl_block_q4_k *b = (const mxl_block_q4_k *)w + i;
            scales = b->scales; qs = b->qs;
            d = h2f(b->d); dmin = h2f(b->dmin);
        }
        uint8_t sc[8], m[8];
        k4_scales(scales, sc, m);
        __m256i codes[8];
        __m256i qh = five ? _mm256_loadu_si256((const __m256i *)qhp) : _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            codes[2 * c] = _mm256_and_si256(v, m4);
            codes[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if (five) {
                __m256i one = _mm256_set1_epi8(1);
                __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
                __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
                codes[2 * c] = _mm256_or_si256(codes[2 * c], _mm256_slli_epi16(b0, 4));
                codes[2 * c + 1] = _mm256_or_si256(codes[2 * c + 1], _mm256_slli_epi16(b1, 4));
            }
        }
        for (int k = 0; k < 4; k++) {
            const mxl_block_q8k *x = (const mxl_block_q8k *)(xb + k * xs) + i;
            __m256i sumv = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++) {
                __m256i y0 = _mm256_loadu_si256((const __m256i *)(x->qs + 64 * c));
                __m256i y1 = _mm256_loadu_si256((const __m256i *)(x->qs + 64 * c + 32));
                __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(codes[2 * c], y0), _mm256_set1_epi16(sc[2 * c]));
                __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(codes[2 * c + 1], y1), _mm256_set1_epi16(sc[2 * c + 1]));
                sumv = _mm256_add_epi32(sumv, _mm256_add_epi32(p0, p1));
            }
            int sumi = hsum_epi32(sumv);
            int summ = 0;
            for (int j = 0; j < 8; j++) summ += m[j] * (x->bsums[2 * j] + x->bsums[2 * j + 1]);
            acc[k] += mxl_kq_combine(d, dmin, x->d, sumi, summ);
        }
    }
    for (int k = 0; k < 4; k++) out[k] = acc[k];
}
AVX2 static void dot4_q4_k(int64_t n, const void *w, const void *x, size_t s, float *o) { dot4_q45_k(n, w, x, s, o, 0); }
AVX2 static void dot4_q5_k(int64_t n, const void *w, const void *x, size_t s, float *o) { dot4_q45_k(n, w, x, s, o, 1); }

AVX2 static void dot4_q6_k(int64_t n, const void *w, const void *xq, size_t xs, float *out) {
    const mxl_block_q6_k *bb = w;
    const uint8_t *xb = xq;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    float acc[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / 256; i++) {
        const mxl_block_q6_k *b = &bb[i];
        __m256i q[8], s16[8];
        for (int h = 0; h < 2; h++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
            q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
            q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
            q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
            q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
            for (int k = 0; k < 4; k++)
                s16[4 * h + k] = _mm256_set_m128i(_mm_set1_epi16(b->scales[8 * h + 2 * k + 1]),
                                                  _mm_set1_epi16(b->scales[8 * h + 2 * k]));
        }
        for (int t = 0; t < 4; t++) {
            const mxl_block_q8k *x = (const mxl_block_q8k *)(xb + t * xs) + i;
            __m256i sumv = _mm256_setzero_si256();
            for (int h = 0; h < 2; h++)
                for (int k = 0; k < 4; k++) {
                    __m256i y = _mm256_loadu_si256((const __m256i *)(x->qs + 128 * h + 32 * k));
                    sumv = _mm256_add_epi32(sumv, _mm256_madd_epi16(_mm256_maddubs_epi16(q[4 * h + k], y), s16[4 * h + k]));
                }
            int corr = 0;
            for (int j = 0; j < 16; j++) corr += b->scales[j] * x->bsums[j];
            int sumi = hsum_epi32(sumv) - 32 * corr;
            acc[t] += mxl_kq_combine(h2f(b->d), 0.0f, x->d, sumi, 0);
        }
    }
    for (int t = 0; t < 4; t++) out[t] = acc[t];
}

mxl_vec_dot4_fn mxl_vec_dot4_avx2_get(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_Q4_0: return dot4_q4_0;
    case MXL_DTYPE_Q4_1: return dot4_q4_1;
    case MXL_DTYPE_Q5_0: return dot4_q5_0;
    case MXL_DTYPE_Q5_1: return dot4_q5_1;
    case MXL_DTYPE_Q8_0: return dot4_q8_0;
    case MXL_DTYPE_MXFP4: return dot4_mxfp4;
    case MXL_DTYPE_IQ4_NL: return dot4_iq4_nl;
    case MXL_DTYPE_IQ4_XS: return dot4_iq4_xs;
    case MXL_DTYPE_IQ2_XXS: return dot4_iq2_xxs;
    case MXL_DTYPE_IQ2_XS: return dot4_iq2_xs;
    case MXL_DTYPE_IQ2_S: return dot4_iq2_s;
    case MXL_DTYPE_IQ3_XXS: return dot4_iq3_xxs;
    case MXL_DTYPE_IQ3_S: return dot4_iq3_s;
    case MXL_DTYPE_IQ1_S: return dot4_iq1_s;
    case MXL_DTYPE_IQ1_M: return dot4_iq1_m;
    case MXL_DTYPE_Q4_K: return dot4_q4_k;
    case MXL_DTYPE_Q5_K: return dot4_q5_k;
    case MXL_DTYPE_Q6_K: return dot4_q6_k;
    default: return 0;
    }
}

mxl_vec_dot_fn mxl_vec_dot_avx2_get(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_Q4_0: return dot_q4_0;
    case MXL_DTYPE_Q4_1: return dot_q4_1;
    case MXL_DTYPE_Q5_0: return dot_q5_0;
    case MXL_DTYPE_Q5_1: return dot_q5_1;
    case MXL_DTYPE_Q8_0: return dot_q8_0;
    case MXL_DTYPE_MXFP4: return dot_mxfp4;
    case MXL_DTYPE_IQ4_NL: return dot_iq4_nl;
    case MXL_DTYPE_IQ4_XS: return dot_iq4_xs;
    case MXL_DTYPE_IQ2_XXS: return dot_iq2_xxs;
    case MXL_DTYPE_IQ2_XS: return dot_iq2_xs;
    case MXL_DTYPE_IQ2_S: return dot_iq2_s;
    case MXL_DTYPE_IQ3_XXS: return dot_iq3_xxs;
    case MXL_DTYPE_IQ3_S: return dot_iq3_s;
    case MXL_DTYPE_IQ1_S: return dot_iq1_s;
    case MXL_DTYPE_IQ1_M: return dot_iq1_m;
    case MXL_DTYPE_Q2_K: return dot_q2_k;
    case MXL_DTYPE_Q3_K: return dot_q3_k;
    case MXL_DTYPE_Q4_K: return dot_q4_k;
    case MXL_DTYPE_Q5_K: return dot_q5_k;
    case MXL_DTYPE_Q6_K: return dot_q6_k;
    default: return 0;
    }
}

/* a 32-element block's values into v[4] and its largest magnitude */
AVX2 static inline float load_amax32(const float *x, __m256 *v) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 mx = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[k]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* Same arithmetic as mxl_quant_q8a_ref (max|x|/127, x * (1/d), round half to even), so the
 * int8 codes and the scales are identical. */
AVX2 void mxl_quant_q8a_avx2(const float *x, mxl_block_q8a *y, int64_t n) {
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        __m256 v[4];
        float d = load_amax32(x, v) / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        __m256 idv = _mm256_set1_ps(id);
        __m256i r[4];
        for (int k = 0; k < 4; k++)
            r[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], idv),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(r[0], r[1]), _mm256_add_epi32(r[2], r[3]));
        /* pack 32 int32 -> 32 int8 in order (packs work per 128-bit lane; fix with a permute) */
        __m256i p01 = _mm256_packs_epi32(r[0], r[1]);
        __m256i p23 = _mm256_packs_epi32(r[2], r[3]);
        __m256i p = _mm256_packs_epi16(p01, p23);
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[i].qs, p);
        y[i].d = d;
        y[i].s = d * (float)hsum_epi32(sum);
    }
}

/* mxl_quant_q8a2_ref's bits: v = round-to-even(x / d2) (the default rounding of cvtps), split
 * into hi = floor((v + 128) / 256) and lo = v - 256 hi */
AVX2 void mxl_quant_q8a2_avx2(const float *x, mxl_block_q8a2 *y, int64_t n) {
    const __m256i half = _mm256_set1_epi32(128);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        __m256 v[4];
        const float d = load_amax32(x, v) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const float d2 = d * MXL_Q8A2_STEP2, id2 = id * (1.0f / MXL_Q8A2_STEP2);
        const __m256 idv = _mm256_set1_ps(id2);
        __m256i hi[4], lo[4], sum = _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) {
            const __m256i r = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], idv));
            hi[k] = _mm256_srai_epi32(_mm256_add_epi32(r, half), 8);
            lo[k] = _mm256_sub_epi32(r, _mm256_slli_epi32(hi[k], 8));
            sum = _mm256_add_epi32(sum, r);
        }
        /* 32 int32 -> 32 int8 in order (the packs work per 128-bit lane; a permute fixes it) */
        __m256i ph = _mm256_packs_epi16(_mm256_packs_epi32(hi[0], hi[1]), _mm256_packs_epi32(hi[2], hi[3]));
        __m256i pl = _mm256_packs_epi16(_mm256_packs_epi32(lo[0], lo[1]), _mm256_packs_epi32(lo[2], lo[3]));
        _mm256_storeu_si256((__m256i *)y[i].qs, _mm256_permutevar8x32_epi32(ph, order));
        _mm256_storeu_si256((__m256i *)y[i].qs2, _mm256_permutevar8x32_epi32(pl, order));
        const int s = hsum_epi32(sum);
        y[i].d = d;
        y[i].d2 = d2;
        y[i].s = d2 * (float)s;
        y[i].sum = s;
    }
}

#else
mxl_vec_dot_fn mxl_vec_dot_avx2_get(mxl_dtype t) { (void)t; return 0; }
mxl_vec_dot4_fn mxl_vec_dot4_avx2_get(mxl_dtype t) { (void)t; return 0; }
void mxl_quant_q8a_avx2(const float *x, mxl_block_q8a *y, int64_t n) { mxl_quant_q8a_ref(x, y, n); }
void mxl_quant_q8a2_avx2(const float *x, mxl_block_q8a2 *y, int64_t n) { mxl_quant_q8a2_ref(x, y, n); }
#endif
