/* quant_gguf_avx512.c - AVX-512 VNNI micro-kernels: 4 weight rows x 1..4 tokens against
 * quantized activations. 32-element formats (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1) and MLX 2/4/8-bit
 * against q8a, two 32-element blocks per 512-bit step; Q4_K and Q6_K against Q8_K.
 *
 * vpdpbusd multiplies unsigned bytes by signed bytes, so weight codes are made unsigned
 * (Q8_0: q + 128, Q4_0: the raw nibble = q + 8) and the offset is removed exactly in int32 by
 * starting each accumulation from -C * (lane partial sums of the activation codes), computed once
 * per token and shared by the four rows. Per (row, token) and block pair the work is one
 * vpdpbusd, one convert, one scale multiply and one FMA; the f32 order differs from the reference
 * (a float path, tested by tolerance).
 *
 * Batch invariance (matmul.h): every (row, token) result is one accumulator fed by the same
 * sequence of operations whatever the token count (a compile-time 1..4 after inlining) and the
 * number of valid rows, so a token gives the same bits alone (decode), in a group of four
 * (prefill) or in a remainder. Rows past the valid count repeat the last valid row (its bytes
 * are in bounds) and are not stored. Only called when the CPU has AVX-512 F/BW/VL + VNNI. */
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/quant_mlx.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

AVX512 static inline __m512i pair256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
AVX512 static inline __m512 pair_ps(float lo, float hi) {
    __m512i v = _mm512_inserti64x4(_mm512_castps_si512(_mm512_set1_ps(lo)),
                                   _mm256_castps_si256(_mm256_set1_ps(hi)), 1);
    return _mm512_castsi512_ps(v);
}
AVX512 static inline __m256i nib32(const uint8_t *p) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* Kinds of 32-element blocks this kernel handles. Codes are made unsigned u = q + C; C (a power
 * of two) is removed exactly in int32 by starting from -C * (activation lane sums). Formats with
 * an offset (Q4_1, Q5_1: + m; MLX: + bias per group) add m * s_x per block, s_x = d_x*sum(q_x). */
enum { K_Q8_0, K_Q4_0, K_Q5_0, K_Q4_1, K_Q5_1, K_MLX4, K_MLX8, K_MLX2 };

AVX512 static inline __m256i bits32(uint32_t x) { /* byte j = 0x10 when bit j of x is set */
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                           0x0101010101010101LL, 0x0000000000000000LL);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x((long long)0x7fbfdfeff7fbfdfeULL));
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}
AVX512 static inline __m256i mlx_codes4(const uint8_t *p) { /* nibbles in element order */
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i m = _mm_set1_epi8(0x0F);
    __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
    return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}
AVX512 static inline __m256i mlx_codes2(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    __m128i b = _mm_cvtsi64_si128((long long)v);
    __m128i m = _mm_set1_epi8(3);
    __m128i c0 = _mm_and_si128(b, m), c1 = _mm_and_si128(_mm_srli_epi16(b, 2), m);
    __m128i c2 = _mm_and_si128(_mm_srli_epi16(b, 4), m), c3 = _mm_and_si128(_mm_srli_epi16(b, 6), m);
    __m128i c01 = _mm_unpacklo_epi8(c0, c1), c23 = _mm_unpacklo_epi8(c2, c3);
    return _mm256_set_m128i(_mm_unpackhi_epi16(c01, c23), _mm_unpacklo_epi16(c01, c23));
}
AVX512 static inline float mlx_param(const void *p, mxl_dtype dt, int64_t idx) {
    if (dt == MXL_DTYPE_F32) {
        float f;
        memcpy(&f, (const char *)p + 4 * idx, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)p + 2 * idx, 2);
    return dt == MXL_DTYPE_F16 ? _cvtsh_ss(h) : mxl_bf2f(h);
}

/* Block b of row r: unsigned codes, scale d and offset m (zeros past the end of the row). */
AVX512 __attribute__((always_inline)) static inline __m256i ucodes(int kind, const uint8_t *w,
                                                                 const mxl_mlx_qweight *M, int64_t r,
                                                                 int64_t b, int64_t nb, float *d,
                                                                 float *m) {
    *d = 0.0f, *m = 0.0f;
    if (b >= nb) return _mm256_setzero_si256();
    switch (kind) {
    case K_Q8_0: {
        const mxl_block_q8_0 *blk = (const mxl_block_q8_0 *)w + b;
        *d = _cvtsh_ss(blk->d);
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)blk->qs), _mm256_set1_epi8((char)0x80));
    }
    case K_Q4_0: {
        const mxl_block_q4_0 *blk = (const mxl_block_q4_0 *)w + b;
        *d = _cvtsh_ss(blk->d);
        return nib32(blk->qs);
    }
    case K_Q5_0: {
        const mxl_block_q5_0 *blk = (const mxl_block_q5_0 *)w + b;
        uint32_t qh;
        memcpy(&qh, blk->qh, 4);
        *d = _cvtsh_ss(blk->d);
        return _mm256_or_si256(nib32(blk->qs), bits32(qh));
    }
    case K_Q4_1: {
        const mxl_block_q4_1 *blk = (const mxl_block_q4_1 *)w + b;
        *d = _cvtsh_ss(blk->d), *m = _cvtsh_ss(blk->m);
        return nib32(blk->qs);
    }
    case K_Q5_1: {
        const mxl_block_q5_1 *blk = (const mxl_block_q5_1 *)w + b;
        uint32_t qh;
        memcpy(&qh, blk->qh, 4);
        *d = _cvtsh_ss(blk->d), *m = _cvtsh_ss(blk->m);
        return _mm256_or_si256(nib32(blk->qs), bits32(qh));
    }
    default: { /* MLX: w is the row's first byte; group of block b */
        int bits = kind == K_MLX4 ? 4 : kind == K_MLX8 ? 8 : 2;
        int64_t ng = M->cols / M->group_size, g = b * 32 / M->group_size;
        *d = mlx_param(M->scales, M->scale_dtype, r * ng + g);
        *m = mlx_param(M->biases, M->scale_dtype, r * ng + g);
        const uint8_t *p = w + b * 4 * bits;
        if (kind == K_MLX4) return mlx_codes4(p);
        if (kind == K_MLX2) return mlx_codes2(p);
        return _mm256_loadu_si256((const __m256i *)p);
    }
    }
}

/* Lanes 0-7 take element i, lanes 8-15 element j of a 4-float vector. */
#define LANES(i, j) _mm512_setr_epi32(i, i, i, i, i, i, i, i, j, j, j, j, j, j, j, j)
#define LANES_F(a, b) _mm512_setr_ps(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b)

/* 16 nibbles-bytes of block b (ymm low half) and b + 1 (high half) -> the 64 codes in ucodes'
 * order: [low nibbles of b, high nibbles of b, low of b+1, high of b+1]. */
AVX512 static inline __m512i nib_pair(const uint8_t *q0, const uint8_t *q1) {
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q0)),
                                        _mm_loadu_si128((const __m128i *)q1), 1);
    __m256i m = _mm256_set1_epi8(0x0F);
    __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    return _mm512_permutex2var_epi64(_mm512_castsi256_si512(lo), _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11),
                                     _mm512_castsi256_si512(hi));
}
/* Two halves -> two floats broadcast to lanes 0-7 and 8-15 (exact conversions). */
AVX512 static inline __m512 h2_pair(uint16_t h0, uint16_t h1) {
    __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)h0 | (uint32_t)h1 << 16)));
    return _mm512_permutexvar_ps(LANES(0, 1), _mm512_castps128_ps512(f));
}
/* (d, m) halves of two blocks -> dw (lanes: d0 | d1) and mw (m0 | m1). */
AVX512 static inline void dm_pair(const void *dm0, const void *dm1, __m512 *dw, __m512 *mw) {
    uint32_t a, c;
    memcpy(&a, dm0, 4);
    memcpy(&c, dm1, 4);
    __m128 f = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)((uint64_t)a | (uint64_t)c << 32)));
    *dw = _mm512_permutexvar_ps(LANES(0, 2), _mm512_castps128_ps512(f));
    *mw = _mm512_permutexvar_ps(LANES(1, 3), _mm512_castps128_ps512(f));
}

/* Blocks b and b + 1 (both inside the row) at once: the same codes, scales and offsets as
 * pair256(ucodes(b), ucodes(b + 1)) with pair_ps of their d and m, in fewer instructions. */
AVX512 __attribute__((always_inline)) static inline __m512i upair(int kind, const uint8_t *w,
                                                                const mxl_mlx_qweight *M, int64_t r,
                                                                int64_t b, __m512 *dw, __m512 *mw) {
    switch (kind) {
    case K_Q8_0: {
        const mxl_block_q8_0 *blk = (const mxl_block_q8_0 *)w + b;
        *dw = h2_pair(blk[0].d, blk[1].d);
        *mw = _mm512_setzero_ps();
        __m512i v = pair256(_mm256_loadu_si256((const __m256i *)blk[0].qs),
                            _mm256_loadu_si256((const __m256i *)blk[1].qs));
        return _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80));
    }
    case K_Q4_0: {
        const mxl_block_q4_0 *blk = (const mxl_block_q4_0 *)w + b;
        *dw = h2_pair(blk[0].d, blk[1].d);
        *mw = _mm512_setzero_ps();
        return nib_pair(blk[0].qs, blk[1].qs);
    }
    case K_Q5_0: {
        const mxl_block_q5_0 *blk = (const mxl_block_q5_0 *)w + b;
        uint32_t h0, h1;
        memcpy(&h0, blk[0].qh, 4);
        memcpy(&h1, blk[1].qh, 4);
        *dw = h2_pair(blk[0].d, blk[1].d);
        *mw = _mm512_setzero_ps();
        __m512i hb = _mm512_maskz_mov_epi8(_cvtu64_mask64((uint64_t)h0 | (uint64_t)h1 << 32), _mm512_set1_epi8(0x10));
        return _mm512_or_si512(nib_pair(blk[0].qs, blk[1].qs), hb);
    }
    case K_Q4_1: {
        const mxl_block_q4_1 *blk = (const mxl_block_q4_1 *)w + b;
        dm_pair(&blk[0].d, &blk[1].d, dw, mw);
        return nib_pair(blk[0].qs, blk[1].qs);
    }
    case K_Q5_1: {
        const mxl_block_q5_1 *blk = (const mxl_block_q5_1 *)w + b;
        uint32_t h0, h1;
        memcpy(&h0, blk[0].qh, 4);
        memcpy(&h1, blk[1].qh, 4);
        dm_pair(&blk[0].d, &blk[1].d, dw, mw);
        __m512i hb = _mm512_maskz_mov_epi8(_cvtu64_mask64((uint64_t)h0 | (uint64_t)h1 << 32), _mm512_set1_epi8(0x10));
        return _mm512_or_si512(nib_pair(blk[0].qs, blk[1].qs), hb);
    }
    default: { /* MLX: w is the row's first byte; the pair's 64 codes are contiguous */
        int bits = kind == K_MLX4 ? 4 : kind == K_MLX8 ? 8 : 2;
        int64_t ng = M->cols / M->group_size, g0 = b * 32 / M->group_size, g1 = (b + 1) * 32 / M->group_size;
        if (g0 == g1) { /* group size >= 64: one scale and bias for both blocks */
            *dw = _mm512_set1_ps(mlx_param(M->scales, M->scale_dtype, r * ng + g0));
            *mw = _mm512_set1_ps(mlx_param(M->biases, M->scale_dtype, r * ng + g0));
        } else {
            *dw = pair_ps(mlx_param(M->scales, M->scale_dtype, r * ng + g0),
                          mlx_param(M->scales, M->scale_dtype, r * ng + g1));
            *mw = pair_ps(mlx_param(M->biases, M->scale_dtype, r * ng + g0),
                          mlx_param(M->biases, M->scale_dtype, r * ng + g1));
        }
        const uint8_t *p = w + b * 4 * bits;
        if (kind == K_MLX8) return _mm512_loadu_si512((const void *)p);
        if (kind == K_MLX4) {
            /* byte k -> 16-bit lane k, low byte = low nibble (element 2k), high byte = high
             * nibble (element 2k + 1) */
            __m512i v = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p));
            return _mm512_and_si512(_mm512_or_si512(v, _mm512_slli_epi16(v, 4)), _mm512_set1_epi16(0x0F0F));
        }
        /* 2-bit: byte k -> 32-bit lane k, byte j of the lane = bits 2j..2j+1 (element 4k + j) */
        __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
        __m512i t = _mm512_or_si512(_mm512_or_si512(v, _mm512_slli_epi32(v, 6)),
                                    _mm512_or_si512(_mm512_slli_epi32(v, 12), _mm512_slli_epi32(v, 18)));
        return _mm512_and_si512(t, _mm512_set1_epi32(0x03030303));
    }
    }
}

/* Row pointers of a 4-row quad with nr valid rows: rows past nr repeat row nr - 1. */
#define QUAD_ROW(r, nr) ((r) < (nr) ? (r) : (nr) - 1)

AVX512 __attribute__((always_inline)) static inline void gemm4xn(int kind, int nt, int64_t n,
                                                               const uint8_t *w, size_t wrb,
                                                               const mxl_mlx_qweight *M, int64_t r0,
                                                               int nr, const uint8_t *xq, size_t xs,
                                                               float *y, int64_t ys) {
    const int64_t nb = n / 32;
    const int shift = kind == K_Q8_0 ? 7 : kind == K_Q4_0 ? 3 : kind == K_Q5_0 ? 4 : 0;
    const int has_m = kind != K_Q8_0 && kind != K_Q4_0 && kind != K_Q5_0;
    const __m512i ones = _mm512_set1_epi8(1);
    const uint8_t *wr[4];
    int64_t rr[4];
    for (int r = 0; r < 4; r++) {
        rr[r] = r0 + QUAD_ROW(r, nr);
        wr[r] = M ? (const uint8_t *)(M->w + rr[r] * (M->cols * M->bits / 32)) : w + QUAD_ROW(r, nr) * wrb;
    }
    __m512 acc[4][4];
    /* fully unrolled so the accumulators live in zmm registers */
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
        __m512i yv[4], init[4];
        __m512 dx[4], sx[4];
        const int two = b + 1 < nb; /* else the row's last, lone block (upper lanes zero) */
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            const mxl_block_q8a *x = (const mxl_block_q8a *)(xq + t * xs);
            __m256i y0 = _mm256_loadu_si256((const __m256i *)x[b].qs);
            __m256i y1 = two ? _mm256_loadu_si256((const __m256i *)x[b + 1].qs) : _mm256_setzero_si256();
            yv[t] = pair256(y0, y1);
            if (shift) {
                __m512i ysum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, yv[t]);
                init[t] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(ysum, shift));
            } else {
                init[t] = _mm512_setzero_si512();
            }
            if (two) { /* (d, s) of both blocks in one vector: [d0, s0, d1, s1] */
                uint64_t ds0, ds1; /* d and s are adjacent floats */
                memcpy(&ds0, &x[b].d, 8);
                memcpy(&ds1, &x[b + 1].d, 8);
                __m512 v = _mm512_castps128_ps512(_mm_castsi128_ps(_mm_set_epi64x((long long)ds1, (long long)ds0)));
                dx[t] = _mm512_permutexvar_ps(LANES(0, 2), v);
                /* s/8 on all 8 lanes of a block: the 8 lanes sum back to s (exact power-of-2
                 * scale) */
                if (has_m) sx[t] = _mm512_mul_ps(_mm512_permutexvar_ps(LANES(1, 3), v), _mm512_set1_ps(0.125f));
            } else {
                dx[t] = pair_ps(x[b].d, 0.0f);
                if (has_m) sx[t] = pair_ps(x[b].s * 0.125f, 0.0f);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            __m512i u;
            __m512 dw, mw;
            if (two) {
                u = upair(kind, wr[r], M, rr[r], b, &dw, &mw);
            } else {
                float d0, d1, m0, m1;
                __m256i c0 = ucodes(kind, wr[r], M, rr[r], b, nb, &d0, &m0);
                __m256i c1 = ucodes(kind, wr[r], M, rr[r], b + 1, nb, &d1, &m1);
                u = pair256(c0, c1);
                dw = pair_ps(d0, d1);
                mw = pair_ps(m0, m1);
            }
            if (!has_m) mw = _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                __m512i v = _mm512_dpbusd_epi32(init[t], u, yv[t]);
                __m512 a = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx[t]), _mm512_cvtepi32_ps(v), acc[r][t]);
                acc[r][t] = has_m ? _mm512_fmadd_ps(mw, sx[t], a) : a;
            }
        }
    }
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nt; t++) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}

/* The token count (1..4) becomes a compile-time constant in each branch. */
#define SWITCH_NT(nt, CALL)                                                                       \
    switch (nt) {                                                                                 \
    case 1: CALL(1); break;                                                                       \
    case 2: CALL(2); break;                                                                       \
    case 3: CALL(3); break;                                                                       \
    default: CALL(4); break;                                                                      \
    }

#define GEMM32(name, KIND)                                                                        \
    AVX512 static void name(int64_t n, const void *w, size_t wrb, int nr, const void *xq,         \
                            size_t xs, int nt, float *y, int64_t ys) {                            \
        const int kind = KIND;                                                                    \
        const uint8_t *w8 = w, *x8 = xq;                                                          \
        SWITCH_NT(nt, GEMM32_CALL)                                                                \
    }
#define GEMM32_CALL(NT) gemm4xn(kind, NT, n, w8, wrb, NULL, 0, nr, x8, xs, y, ys)
GEMM32(gemm4x4_q8_0, K_Q8_0)
GEMM32(gemm4x4_q4_0, K_Q4_0)
GEMM32(gemm4x4_q5_0, K_Q5_0)
GEMM32(gemm4x4_q4_1, K_Q4_1)
GEMM32(gemm4x4_q5_1, K_Q5_1)

int mxl_mlx_gemm4x4_avx512_supported(int bits) { return bits == 2 || bits == 4 || bits == 8; }

#define MLX_CALL(NT) gemm4xn(kind, NT, W->cols, NULL, 0, W, r0, nrows, xq, xstride, y, y_stride)
AVX512 void mxl_mlx_gemm4x4_avx512(const mxl_mlx_qweight *W, int64_t r0, int nrows, const void *xq,
                                   size_t xstride, int ntok, float *y, int64_t y_stride) {
    if (W->bits == 4) {
        const int kind = K_MLX4;
        SWITCH_NT(ntok, MLX_CALL)
    } else if (W->bits == 8) {
        const int kind = K_MLX8;
        SWITCH_NT(ntok, MLX_CALL)
    } else {
        const int kind = K_MLX2;
        SWITCH_NT(ntok, MLX_CALL)
    }
}

/* ---- K-quants: per-chunk f32 scales (d * sub-block scale) folded into the FMA; the offset
 * terms (Q4_K mins, Q6_K's -32) become one 16-lane FMA per (row, token, super-block) against the
 * activation's 16 partial sums. ------------------------------------------------------------ */

/* 16 lanes: v[j] for lanes 4j..4j+3 (j < 4) - a per-16-element (4-lane) pattern. */
AVX512 static inline __m512 spread4(const float *v) {
    __m512 a = _mm512_castps128_ps512(_mm_loadu_ps(v));
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return _mm512_permutexvar_ps(idx, a);
}

AVX512 __attribute__((always_inline)) static inline void gemm4xn_k(int q6, int nt, int64_t n,
                                                                   const uint8_t *w, size_t wrb,
                                                                   int nr, const uint8_t *xq,
                                                                   size_t xs, float *y, int64_t ys) {
    const int64_t nb = n / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    const uint8_t *wr[4];
    for (int r = 0; r < 4; r++) wr[r] = w + QUAD_ROW(r, nr) * wrb;
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        /* per token: d, and the 16 bsums as floats scaled by d (offset terms) */
        float dx[4];
        __m512 bs[4];
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            const mxl_block_q8k *x = (const mxl_block_q8k *)(xq + t * xs) + b;
            dx[t] = x->d;
            __m512 s16 = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)x->bsums)));
            bs[t] = _mm512_mul_ps(s16, _mm512_set1_ps(x->d));
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            __m512i u[4];
            __m512 scf[4], off;
            if (!q6) {
                const mxl_block_q4_k *blk = (const mxl_block_q4_k *)wr[r] + b;
                /* the 6-bit scales sc[0..7] and mins m[0..7] (ggml's get_scale_min_k4), four
                 * bytes at a time: q0 = bytes 0-3, q1 = 4-7, q2 = 8-11 of blk->scales */
                uint32_t q0, q1, q2;
                memcpy(&q0, blk->scales, 4);
                memcpy(&q1, blk->scales + 4, 4);
                memcpy(&q2, blk->scales + 8, 4);
                uint32_t sc_lo = q0 & 0x3f3f3f3fu, m_lo = q1 & 0x3f3f3f3fu;
                uint32_t sc_hi = (q2 & 0x0f0f0f0fu) | ((q0 >> 6) & 0x03030303u) << 4;
                uint32_t m_hi = ((q2 >> 4) & 0x0f0f0f0fu) | ((q1 >> 6) & 0x03030303u) << 4;
                __m128i scm = _mm_set_epi64x((long long)((uint64_t)m_lo | (uint64_t)m_hi << 32),
                                             (long long)((uint64_t)sc_lo | (uint64_t)sc_hi << 32));
                /* lanes 0-7: d * sc[j], lanes 8-15: -dmin * m[j] */
                __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)blk->d | (uint32_t)blk->dmin << 16)));
                __m512 dm = _mm512_permutexvar_ps(LANES(0, 1), _mm512_castps128_ps512(dd));
                dm = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(dm),
                                                          _mm512_castps_si512(LANES_F(0.0f, -0.0f))));
                __m512 all = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(scm)), dm);
                /* offset lanes 2j, 2j+1 (the two 16-sums of sub-block j) = -dmin * m_j;
                 * chunk c lanes 0-7 = d * sc[2c], lanes 8-15 = d * sc[2c+1] */
                off = _mm512_permutexvar_ps(_mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15), all);
                for (int c = 0; c < 4; c += 2) {
                    __m512i v = _mm512_loadu_si512((const void *)(blk->qs + 32 * c));
                    __m512i lo = _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
                    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
                    u[c] = _mm512_shuffle_i64x2(lo, hi, 0x44);     /* lo 0-255, hi 0-255 */
                    u[c + 1] = _mm512_shuffle_i64x2(lo, hi, 0xEE); /* lo 256-511, hi 256-511 */
                    scf[c] = _mm512_permutexvar_ps(LANES(2 * c, 2 * c + 1), all);
                    scf[c + 1] = _mm512_permutexvar_ps(LANES(2 * c + 2, 2 * c + 3), all);
                }
            } else {
                const mxl_block_q6_k *blk = (const mxl_block_q6_k *)wr[r] + b;
                float d = _cvtsh_ss(blk->d);
                float so[16], sf[16];
                for (int j = 0; j < 16; j++) {
                    sf[j] = d * (float)blk->scales[j];
                    so[j] = -32.0f * sf[j];
                }
                off = _mm512_loadu_ps(so);
                for (int h = 0; h < 2; h++) {
                    __m256i l0 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h));
                    __m256i l1 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h + 32));
                    __m256i qh = _mm256_loadu_si256((const __m256i *)(blk->qh + 32 * h));
                    __m256i q0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
                    __m256i q1 = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                                 _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
                    __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                                 _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
                    __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                                 _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
                    u[2 * h] = pair256(q0, q1);
                    u[2 * h + 1] = pair256(q2, q3);
                    scf[2 * h] = spread4(sf + 8 * h);
                    scf[2 * h + 1] = spread4(sf + 8 * h + 4);
                }
            }
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                const mxl_block_q8k *x = (const mxl_block_q8k *)(xq + t * xs) + b;
                __m512 a = acc[r][t];
                __m512 dxv = _mm512_set1_ps(dx[t]);
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    __m512i yv = _mm512_loadu_si512((const void *)(x->qs + 64 * c));
                    __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], yv);
                    a = _mm512_fmadd_ps(_mm512_mul_ps(scf[c], dxv), _mm512_cvtepi32_ps(dp), a);
                }
                acc[r][t] = _mm512_fmadd_ps(off, bs[t], a);
            }
        }
    }
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nt; t++) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}

#define GEMMK_CALL(NT) gemm4xn_k(q6, NT, n, w, wrb, nr, xq, xs, y, ys)
AVX512 static void gemm4x4_q4_k(int64_t n, const void *w, size_t wrb, int nr, const void *xq,
                                size_t xs, int nt, float *y, int64_t ys) {
    const int q6 = 0;
    SWITCH_NT(nt, GEMMK_CALL)
}
AVX512 static void gemm4x4_q6_k(int64_t n, const void *w, size_t wrb, int nr, const void *xq,
                                size_t xs, int nt, float *y, int64_t ys) {
    const int q6 = 1;
    SWITCH_NT(nt, GEMMK_CALL)
}

mxl_gemm4x4_fn mxl_gemm4x4_avx512_get(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_Q8_0: return gemm4x4_q8_0;
    case MXL_DTYPE_Q4_0: return gemm4x4_q4_0;
    case MXL_DTYPE_Q5_0: return gemm4x4_q5_0;
    case MXL_DTYPE_Q4_1: return gemm4x4_q4_1;
    case MXL_DTYPE_Q5_1: return gemm4x4_q5_1;
    case MXL_DTYPE_Q4_K: return gemm4x4_q4_k;
    case MXL_DTYPE_Q6_K: return gemm4x4_q6_k;
    default: return 0;
    }
}
#else
mxl_gemm4x4_fn mxl_gemm4x4_avx512_get(mxl_dtype t) { (void)t; return 0; }
int mxl_mlx_gemm4x4_avx512_supported(int bits) { (void)bits; return 0; }
void mxl_mlx_gemm4x4_avx512(const mxl_mlx_qweight *W, int64_t r0, int nrows, const void *xq,
                            size_t xstride, int ntok, float *y, int64_t y_stride) {
    (void)W, (void)r0, (void)nrows, (void)xq, (void)xstride, (void)ntok, (void)y, (void)y_stride;
}
#endif
