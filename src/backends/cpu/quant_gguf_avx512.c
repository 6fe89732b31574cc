/* quant_gguf_avx512.c - AVX-512 VNNI micro-kernels: 4 weight rows x 1..4 tokens against
 * quantized activations. 32-element formats (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL) against q8a,
 * two 32-element blocks per 512-bit step; Q4_K, Q6_K and IQ4_XS against Q8_K. (MLX:
 * quant_mlx_avx512.c.) IQ4_NL runs as Q4_0 with its nibbles looked up in kvalues_iq4nl + 128 by
 * one byte shuffle (u = q + 128, as Q8_0). IQ4_XS keeps the reference's exact int32 sum per
 * super-block (vpmaddubsw of |q| against the activations negated where q < 0, vpdpwssd with the
 * sub-block scales) and its f32 combine, so its results are bit-identical to mxl_vec_dot_ref.
 *
 * vpdpbusd multiplies unsigned bytes by signed bytes, so weight codes are made unsigned
 * (Q8_0: q + 128, Q4_0: the raw nibble = q + 8) and the offset is removed exactly in int32 by
 * starting each accumulation from -C * (lane partial sums of the activation codes), computed once
 * per token and shared by the four rows. Per (row, token) and block pair the work is one
 * vpdpbusd, one convert, one scale multiply and one FMA; the f32 order differs from the reference
 * (a float path, tested by tolerance). Q4_0 / Q4_1 use the "in place" nibble layout (see
 * nib_inplace) and convert the four rows' block scales at once (the scale multiply becomes a
 * permute; Q4_1's offset terms are accumulated for the four rows in one shared vector). Q4_K sums
 * its 6-bit sub-block scales in int32 (vpmaddubsw + vpdpwssd), leaving one convert and two FMAs
 * per (row, token, super-block).
 *
 * Memory: each kernel prefetches the next quad's rows (the four rows after its own, at the
 * offset it is reading): rows of a few KB are too short for the hardware prefetchers, and without
 * this the kernels waited on memory instead of overlapping it with compute (about half the read
 * bandwidth for the 4-bit formats).
 *
 * Batch invariance (matmul.h): every (row, token) result is one accumulator fed by the same
 * sequence of operations whatever the token count (a compile-time 1..4 after inlining) and the
 * number of valid rows, so a token gives the same bits alone (decode), in a group of four
 * (prefill) or in a remainder. Rows past the valid count repeat the last valid row (its bytes
 * are in bounds) and are not stored. Only called when the CPU has AVX-512 F/BW/VL + VNNI. */
#include "backends/cpu/quant_gguf.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backends/cpu/reduce_avx512.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,bmi2")))

AVX512 static inline __m512i pair256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
AVX512 static inline __m512 pair_ps(float lo, float hi) {
    __m512i v = _mm512_inserti64x4(_mm512_castps_si512(_mm512_set1_ps(lo)),
                                   _mm256_castps_si256(_mm256_set1_ps(hi)), 1);
    return _mm512_castsi512_ps(v);
}
/* The halves at p + o0 and p + o1 (0 when o1 < 0) as one 32-bit word, low half first. */
static inline uint32_t half2(const uint8_t *p, int64_t o0, int64_t o1) {
    uint16_t h0, h1 = 0;
    memcpy(&h0, p + o0, 2);
    if (o1 >= 0) memcpy(&h1, p + o1, 2);
    return (uint32_t)h0 | (uint32_t)h1 << 16;
}
AVX512 static inline __m256i nib32(const uint8_t *p) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* Kinds of 32-element blocks this kernel handles. Codes are made unsigned u = q + C; C (a power
 * of two) is removed exactly in int32 by starting from -C * (activation lane sums). Formats with
 * an offset (Q4_1, Q5_1: + m) add m * s_x per block, s_x = d_x*sum(q_x). */
enum { K_Q8_0, K_Q4_0, K_Q5_0, K_Q4_1, K_Q5_1, K_IQ4_NL };

AVX512 static inline __m256i bits32(uint32_t x) { /* byte j = 0x10 when bit j of x is set */
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                           0x0101010101010101LL, 0x0000000000000000LL);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x((long long)0x7fbfdfeff7fbfdfeULL));
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}
/* Block b of a row: unsigned codes, scale d and offset m (zeros past the end of the row). */
AVX512 __attribute__((always_inline)) static inline __m256i ucodes(int kind, const uint8_t *w, int64_t b,
                                                                 int64_t nb, float *d, float *m) {
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
    default: { /* K_Q5_1 */
        const mxl_block_q5_1 *blk = (const mxl_block_q5_1 *)w + b;
        uint32_t qh;
        memcpy(&qh, blk->qh, 4);
        *d = _cvtsh_ss(blk->d), *m = _cvtsh_ss(blk->m);
        return _mm256_or_si256(nib32(blk->qs), bits32(qh));
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
/* Q4_0 / Q4_1 pairs use a second lane layout ("in place" nibbles): the 16 code bytes of block b
 * go to 128-bit lanes 0 and 2, those of b + 1 to lanes 1 and 3, and one AND keeps the low nibbles
 * (elements 0-15) in lanes 0-1 and the high nibbles, left in place (x 16: elements 16-31), in
 * lanes 2-3. The activations are permuted to match once per token (shared by the four rows),
 * the high lanes' activation scale is d / 16 (exact) and the offset correction -C * 16 there. The
 * weight side is then a broadcast load, a masked broadcast load and one AND per row and pair,
 * instead of an insert, two ANDs, a shift and a cross-lane permute.
 * Lanes (32-bit) of block b: 0-3 and 8-11; of block b + 1: 4-7 and 12-15. */
#define LANES_IP(i, j) _mm512_setr_epi32(i, i, i, i, j, j, j, j, i, i, i, i, j, j, j, j)
AVX512 static inline __m512i nib_inplace(const uint8_t *q0, const uint8_t *q1) {
    __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)q0));
    v = _mm512_mask_broadcast_i32x4(v, 0xF0F0, _mm_loadu_si128((const __m128i *)q1));
    return _mm512_and_si512(v, _mm512_inserti64x4(_mm512_set1_epi8(0x0F), _mm256_set1_epi8((char)0xF0), 1));
}
/* IQ4_NL in the same lane layout, but its codes looked up: the high nibbles shifted down (lanes
 * 2-3), then one byte shuffle through kvalues_iq4nl + 128 (unsigned u = q + 128, 1..241; the
 * table sits in every 128-bit lane, as vpshufb looks up within lanes). No / 16 on the high lanes. */
AVX512 static inline __m512i iq4nl_inplace(const uint8_t *q0, const uint8_t *q1) {
    __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)q0));
    v = _mm512_mask_broadcast_i32x4(v, 0xF0F0, _mm_loadu_si128((const __m128i *)q1));
    v = _mm512_srlv_epi16(v, _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1));
    const __m512i lut = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)mxl_kvalues_iq4nl)),
                                         _mm512_set1_epi8((char)0x80)); /* q ^ 0x80 = q + 128 */
    return _mm512_shuffle_epi8(lut, _mm512_and_si512(v, _mm512_set1_epi8(0x0F)));
}
/* the in-place layout's codes of blocks at q0, q1 (their 16 nibble bytes) */
AVX512 __attribute__((always_inline)) static inline __m512i inpl_codes(int kind, const uint8_t *q0, const uint8_t *q1) {
    return kind == K_IQ4_NL ? iq4nl_inplace(q0, q1) : nib_inplace(q0, q1);
}

/* Two halves -> two floats broadcast to the lanes of block b (element i of idx's pattern 0)
 * and block b + 1 (1); exact conversions. */
AVX512 static inline __m512 h2_pair(uint16_t h0, uint16_t h1, __m512i idx01) {
    __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)h0 | (uint32_t)h1 << 16)));
    return _mm512_permutexvar_ps(idx01, _mm512_castps128_ps512(f));
}
/* (d, m) halves of two blocks -> dw (d0 | d1 lanes) and mw (m0 | m1), lane patterns 0/2, 1/3. */
AVX512 static inline void dm_pair(const void *dm0, const void *dm1, __m512 *dw, __m512 *mw, __m512i idx02,
                                  __m512i idx13) {
    uint32_t a, c;
    memcpy(&a, dm0, 4);
    memcpy(&c, dm1, 4);
    __m128 f = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)((uint64_t)a | (uint64_t)c << 32)));
    *dw = _mm512_permutexvar_ps(idx02, _mm512_castps128_ps512(f));
    *mw = _mm512_permutexvar_ps(idx13, _mm512_castps128_ps512(f));
}

/* Blocks b and b + 1 (both inside the row) at once: the same codes, scales and offsets as
 * pair256(ucodes(b), ucodes(b + 1)) with pair_ps of their d and m, in fewer instructions.
 * (gemm4xn takes Q4_0 / Q4_1 through the in-place layout instead.) */
AVX512 __attribute__((always_inline)) static inline __m512i upair(int kind, const uint8_t *w, int64_t b,
                                                                __m512 *dw, __m512 *mw) {
    switch (kind) {
    case K_Q8_0: {
        const mxl_block_q8_0 *blk = (const mxl_block_q8_0 *)w + b;
        *dw = h2_pair(blk[0].d, blk[1].d, LANES(0, 1));
        *mw = _mm512_setzero_ps();
        __m512i v = pair256(_mm256_loadu_si256((const __m256i *)blk[0].qs),
                            _mm256_loadu_si256((const __m256i *)blk[1].qs));
        return _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80));
    }
    case K_Q4_0: {
        const mxl_block_q4_0 *blk = (const mxl_block_q4_0 *)w + b;
        *dw = h2_pair(blk[0].d, blk[1].d, LANES(0, 1));
        *mw = _mm512_setzero_ps();
        return nib_pair(blk[0].qs, blk[1].qs);
    }
    case K_Q5_0: {
        const mxl_block_q5_0 *blk = (const mxl_block_q5_0 *)w + b;
        uint32_t h0, h1;
        memcpy(&h0, blk[0].qh, 4);
        memcpy(&h1, blk[1].qh, 4);
        *dw = h2_pair(blk[0].d, blk[1].d, LANES(0, 1));
        *mw = _mm512_setzero_ps();
        __m512i hb = _mm512_maskz_mov_epi8(_cvtu64_mask64((uint64_t)h0 | (uint64_t)h1 << 32), _mm512_set1_epi8(0x10));
        return _mm512_or_si512(nib_pair(blk[0].qs, blk[1].qs), hb);
    }
    case K_Q4_1: {
        const mxl_block_q4_1 *blk = (const mxl_block_q4_1 *)w + b;
        dm_pair(&blk[0].d, &blk[1].d, dw, mw, LANES(0, 2), LANES(1, 3));
        return nib_pair(blk[0].qs, blk[1].qs);
    }
    default: { /* K_Q5_1 */
        const mxl_block_q5_1 *blk = (const mxl_block_q5_1 *)w + b;
        uint32_t h0, h1;
        memcpy(&h0, blk[0].qh, 4);
        memcpy(&h1, blk[1].qh, 4);
        dm_pair(&blk[0].d, &blk[1].d, dw, mw, LANES(0, 2), LANES(1, 3));
        __m512i hb = _mm512_maskz_mov_epi8(_cvtu64_mask64((uint64_t)h0 | (uint64_t)h1 << 32), _mm512_set1_epi8(0x10));
        return _mm512_or_si512(nib_pair(blk[0].qs, blk[1].qs), hb);
    }
    }
}

/* Row pointers of a 4-row quad with nr valid rows: rows past nr repeat row nr - 1. */
#define QUAD_ROW(r, nr) ((r) < (nr) ? (r) : (nr) - 1)

/* Weight side of gemm4xn for the block pair at b, shared by the on-the-fly path and the
 * pre-unpacked one (gemm4x4_pre below), so both feed the arithmetic the same values. */
/* in-place layout: d (and m) of blocks b, b + 1 of the four rows -> fd2 (and fm) */
AVX512 __attribute__((always_inline)) static inline void inpl_scales(const uint8_t *const *wr, int64_t b, int64_t bb,
                                                                    int two, int has_m, __m512 *fd2, __m512 *fm) {
    const int64_t o0 = b * bb, o1 = two ? (b + 1) * bb : -1;
    uint64_t dq0 = half2(wr[0], o0, o1) | (uint64_t)half2(wr[1], o0, o1) << 32;
    uint64_t dq1 = half2(wr[2], o0, o1) | (uint64_t)half2(wr[3], o0, o1) << 32;
    uint64_t mq0 = 0, mq1 = 0;
    if (has_m) {
        mq0 = half2(wr[0] + 2, o0, o1) | (uint64_t)half2(wr[1] + 2, o0, o1) << 32;
        mq1 = half2(wr[2] + 2, o0, o1) | (uint64_t)half2(wr[3] + 2, o0, o1) << 32;
    }
    __m256 fd = _mm256_cvtph_ps(_mm_set_epi64x((long long)dq1, (long long)dq0));
    *fd2 = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(fd)), _mm256_castps_pd(fd), 1));
    *fm = has_m ? _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_set_epi64x((long long)mq1, (long long)mq0)))
                : _mm512_setzero_ps();
}
/* other layouts: the codes, d and m of blocks b (and b + 1 when two) of one row */
AVX512 __attribute__((always_inline)) static inline __m512i pair_codes(int kind, const uint8_t *wrow, int64_t b, int64_t nb,
                                                                      int two, int has_m, __m512 *dw, __m512 *mw) {
    __m512i u;
    if (two) {
        u = upair(kind, wrow, b, dw, mw);
    } else {
        float d0, d1, m0, m1;
        __m256i c0 = ucodes(kind, wrow, b, nb, &d0, &m0);
        __m256i c1 = ucodes(kind, wrow, b + 1, nb, &d1, &m1);
        u = pair256(c0, c1);
        *dw = pair_ps(d0, d1);
        *mw = pair_ps(m0, m1);
    }
    if (!has_m) *mw = _mm512_setzero_ps();
    return u;
}

/* Pre-unpacked weights of a quad: per block pair 14 vectors, [fd2, fm, u0..u3, dw0..dw3,
 * mw0..mw3] (unused slots left as they are). */
#define PRE_VECS 14

AVX512 __attribute__((always_inline)) static inline void gemm4xn(int kind, int nt, int64_t n,
                                                               const uint8_t *w, size_t wrb,
                                                               int nr, const uint8_t *xq, size_t xs,
                                                               float *y, int64_t ys, const __m512 *pre) {
    const int64_t nb = n / 32;
    const int shift = kind == K_Q8_0 || kind == K_IQ4_NL ? 7 : kind == K_Q4_0 ? 3 : kind == K_Q5_0 ? 4 : 0;
    const int has_m = kind != K_Q8_0 && kind != K_Q4_0 && kind != K_Q5_0 && kind != K_IQ4_NL;
    /* the in-place lane layout; IQ4_NL's codes are looked up, so not scaled by 16 on the high lanes */
    const int inpl = kind == K_Q4_0 || kind == K_Q4_1 || kind == K_IQ4_NL;
    const int x16 = inpl && kind != K_IQ4_NL;
    const __m512i ones = _mm512_set1_epi8(1);
    /* activation scale per lane: d, and d / 16 on the in-place layout's high-nibble lanes */
    const __m512 hi16 = x16 ? LANES_F(1.0f, 0.0625f) : _mm512_set1_ps(1.0f);
    const uint8_t *wr[4];
    for (int r = 0; r < 4; r++) wr[r] = w + QUAD_ROW(r, nr) * wrb;
    /* bytes per block; software prefetch distance: the next quad's rows at the same offset (the
     * hardware prefetchers alone leave the kernel waiting on memory for rows this short) */
    const int64_t bb = kind == K_Q8_0 ? 34 : kind == K_Q4_0 || kind == K_IQ4_NL ? 18 : kind == K_Q5_0 ? 22 : kind == K_Q4_1 ? 20 : 24;
    const int64_t pf = 4 * (int64_t)wrb;
    __m512 acc[4][4], macc[4];
    /* fully unrolled so the accumulators live in zmm registers */
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) acc[r][t] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) macc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
        __m512i yv[4], init[4];
        __m512 dx[4], sx[4];
        const int two = b + 1 < nb; /* else the row's last, lone block (upper lanes zero) */
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            const mxl_block_q8a *x = (const mxl_block_q8a *)(xq + t * xs);
            __m256i y0 = _mm256_loadu_si256((const __m256i *)x[b].qs);
            __m256i y1 = two ? _mm256_loadu_si256((const __m256i *)x[b + 1].qs) : _mm256_setzero_si256();
            if (inpl) /* in place: [x_b 0-15, x_b+1 0-15, x_b 16-31, x_b+1 16-31] */
                yv[t] = _mm512_permutex2var_epi64(_mm512_castsi256_si512(y0), _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11),
                                                  _mm512_castsi256_si512(y1));
            else
                yv[t] = pair256(y0, y1);
            if (shift) {
                __m512i ysum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, yv[t]);
                __m512i sh = x16 ? _mm512_setr_epi32(shift, shift, shift, shift, shift, shift, shift, shift,
                                                      shift + 4, shift + 4, shift + 4, shift + 4, shift + 4,
                                                      shift + 4, shift + 4, shift + 4)
                                  : _mm512_set1_epi32(shift);
                init[t] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_sllv_epi32(ysum, sh));
            } else {
                init[t] = _mm512_setzero_si512();
            }
            if (inpl) { /* dx: [d0, d1] x 4 | the same / 16; sx: [s0, s1] x 8 */
                uint64_t ds0, ds1 = 0; /* d and s are adjacent floats */
                memcpy(&ds0, &x[b].d, 8);
                if (two) memcpy(&ds1, &x[b + 1].d, 8);
                __m128 ds = _mm_castsi128_ps(_mm_set_epi64x((long long)ds1, (long long)ds0));
                const __m512i alt02 = _mm512_setr_epi32(0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2);
                dx[t] = _mm512_mul_ps(_mm512_permutexvar_ps(alt02, _mm512_castps128_ps512(ds)), hi16);
                if (has_m)
                    sx[t] = _mm512_permutexvar_ps(_mm512_add_epi32(alt02, _mm512_set1_epi32(1)),
                                                  _mm512_castps128_ps512(ds));
            } else if (two) { /* (d, s) of both blocks in one vector: [d0, s0, d1, s1] */
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
        const __m512 *pb = pre ? pre + (b / 2) * PRE_VECS : NULL;
        if (inpl) {
            /* the d (and m) halves of blocks b, b + 1 of the four rows, converted at once:
             * lanes 2r, 2r + 1 (and 8 + 2r, 9 + 2r) = row r's blocks b, b + 1 */
            __m512 fd2, fm;
            if (pb) {
                fd2 = pb[0];
                fm = pb[1];
            } else {
                inpl_scales(wr, b, bb, two, has_m, &fd2, &fm);
            }
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                dx[t] = _mm512_mul_ps(fd2, dx[t]); /* d_w * d_x for every (row, block) */
                /* m * s for every (row, block), accumulated for all four rows at once (lanes
                 * 0-7; each lane only ever sees its own row's terms) */
                if (has_m) macc[t] = _mm512_add_ps(macc[t], _mm512_mul_ps(fm, sx[t]));
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            if (inpl) {
                const uint8_t *q0 = wr[r] + b * bb + bb - 16; /* qs: the last 16 bytes of a block */
                /* a lone block: its bytes in all four lanes; b + 1's lanes meet zero activations */
                __m512i u = pb ? _mm512_castps_si512(pb[2 + r]) : inpl_codes(kind, q0, two ? q0 + bb : q0);
                if (two && !pb) {
                    _mm_prefetch((const char *)wr[r] + b * bb + pf, _MM_HINT_T0);
                    _mm_prefetch((const char *)wr[r] + b * bb + 2 * bb - 1 + pf, _MM_HINT_T0);
                }
                const __m512i ir = _mm512_add_epi32(LANES_IP(0, 1),
                                                    _mm512_setr_epi32(2 * r, 2 * r, 2 * r, 2 * r, 2 * r, 2 * r, 2 * r, 2 * r,
                                                                      8 + 2 * r, 8 + 2 * r, 8 + 2 * r, 8 + 2 * r,
                                                                      8 + 2 * r, 8 + 2 * r, 8 + 2 * r, 8 + 2 * r));
#pragma GCC unroll 4
                for (int t = 0; t < nt; t++) {
                    __m512i v = _mm512_dpbusd_epi32(init[t], u, yv[t]);
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_permutexvar_ps(ir, dx[t]), acc[r][t]);
                }
                continue;
            }
            __m512i u;
            __m512 dw, mw;
            if (pb) {
                u = _mm512_castps_si512(pb[2 + r]);
                dw = pb[6 + r];
                mw = pb[10 + r];
            } else {
                u = pair_codes(kind, wr[r], b, nb, two, has_m, &dw, &mw);
                if (two) { /* the next quad's rows, both ends of the pair's bytes */
                    _mm_prefetch((const char *)wr[r] + b * bb + pf, _MM_HINT_T0);
                    _mm_prefetch((const char *)wr[r] + b * bb + 2 * bb - 1 + pf, _MM_HINT_T0);
                }
            }
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                __m512i v = _mm512_dpbusd_epi32(init[t], u, yv[t]);
                __m512 a = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx[t]), _mm512_cvtepi32_ps(v), acc[r][t]);
                acc[r][t] = has_m ? _mm512_fmadd_ps(mw, sx[t], a) : a;
            }
        }
    }
    /* constant indices only (a runtime one would keep acc in memory) */
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            if (r >= nr) continue;
            float v = _mm512_reduce_add_ps(acc[r][t]);
            if (inpl && has_m) { /* row r's offset terms: lanes 2r, 2r + 1 of macc */
                float mt[16];
                _mm512_storeu_ps(mt, macc[t]);
                v += mt[2 * r] + mt[2 * r + 1];
            }
            y[t * ys + r] = v;
        }
    }
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
#define GEMM32_CALL(NT) gemm4xn(kind, NT, n, w8, wrb, nr, x8, xs, y, ys, NULL)

/* The weight side of every block pair of a quad, as gemm4xn computes it, into pre
 * (mxl_gemm4x4_pre_floats(n) floats, 64-byte aligned). */
AVX512 __attribute__((always_inline)) static inline void unpack4(int kind, int64_t n, const uint8_t *w, size_t wrb, int nr,
                                                                __m512 *pre) {
    const int64_t nb = n / 32;
    const int has_m = kind != K_Q8_0 && kind != K_Q4_0 && kind != K_Q5_0 && kind != K_IQ4_NL;
    const int inpl = kind == K_Q4_0 || kind == K_Q4_1 || kind == K_IQ4_NL;
    const int64_t bb = kind == K_Q8_0 ? 34 : kind == K_Q4_0 || kind == K_IQ4_NL ? 18 : kind == K_Q5_0 ? 22 : kind == K_Q4_1 ? 20 : 24;
    const uint8_t *wr[4];
    for (int r = 0; r < 4; r++) wr[r] = w + QUAD_ROW(r, nr) * wrb;
    for (int64_t b = 0; b < nb; b += 2) {
        __m512 *pb = pre + (b / 2) * PRE_VECS;
        const int two = b + 1 < nb;
        if (inpl) {
            inpl_scales(wr, b, bb, two, has_m, &pb[0], &pb[1]);
            for (int r = 0; r < 4; r++) {
                const uint8_t *q0 = wr[r] + b * bb + bb - 16;
                pb[2 + r] = _mm512_castsi512_ps(inpl_codes(kind, q0, two ? q0 + bb : q0));
            }
        } else {
            for (int r = 0; r < 4; r++)
                pb[2 + r] = _mm512_castsi512_ps(pair_codes(kind, wr[r], b, nb, two, has_m, &pb[6 + r], &pb[10 + r]));
        }
    }
}

#define GEMM32_PRE(name, KIND)                                                                    \
    AVX512 static void name##_unpack(int64_t n, const void *w, size_t wrb, int nr, float *pre) {  \
        unpack4(KIND, n, w, wrb, nr, (__m512 *)pre);                                              \
    }                                                                                             \
    AVX512 static void name##_pre(int64_t n, const float *pre, int nr, const void *xq, size_t xs, \
                                  int nt, float *y, int64_t ys) {                                 \
        const int kind = KIND;                                                                    \
        const uint8_t *x8 = xq;                                                                   \
        const __m512 *p = (const __m512 *)pre;                                                    \
        if (!p) __builtin_unreachable(); /* lets the on-the-fly branches fold away */             \
        SWITCH_NT(nt, GEMM32_PRE_CALL)                                                            \
    }
#define GEMM32_PRE_CALL(NT) gemm4xn(kind, NT, n, (const uint8_t *)p, 0, nr, x8, xs, y, ys, p)
GEMM32_PRE(gemm4x4_q8_0, K_Q8_0)
GEMM32_PRE(gemm4x4_q4_0, K_Q4_0)
GEMM32_PRE(gemm4x4_q5_0, K_Q5_0)
GEMM32_PRE(gemm4x4_q4_1, K_Q4_1)
GEMM32_PRE(gemm4x4_q5_1, K_Q5_1)
GEMM32_PRE(gemm4x4_iq4_nl, K_IQ4_NL)

GEMM32(gemm4x4_q8_0, K_Q8_0)
GEMM32(gemm4x4_q4_0, K_Q4_0)
GEMM32(gemm4x4_q5_0, K_Q5_0)
GEMM32(gemm4x4_q4_1, K_Q4_1)
GEMM32(gemm4x4_q5_1, K_Q5_1)
GEMM32(gemm4x4_iq4_nl, K_IQ4_NL)

/* ---- K-quants: per-chunk f32 scales (d * sub-block scale) folded into the FMA; the offset
 * terms (Q4_K mins, Q6_K's -32) become one 16-lane FMA per (row, token, super-block) against the
 * activation's 16 partial sums. ------------------------------------------------------------ */

/* 16 lanes: v[j] for lanes 4j..4j+3 (j < 4) - a per-16-element (4-lane) pattern. */
AVX512 static inline __m512 spread4(const float *v) {
    __m512 a = _mm512_castps128_ps512(_mm_loadu_ps(v));
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return _mm512_permutexvar_ps(idx, a);
}

/* Weight side of one K-quant super-block of one row, shared by gemm4xn_k's on-the-fly path
 * and the pre-unpacked one. Q4_K: codes u[4], sub-block scales as words sw[4], the offset terms
 * and d; Q6_K: codes u[4], scales scf[4] (d * scale per 16 elements) and the offset terms. */
AVX512 __attribute__((always_inline)) static inline void k4_prep(const mxl_block_q4_k *blk, __m512i *u, __m512i *sw,
                                                                __m512 *off, float *dw) {
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
    /* Integer sub-block scales: per 64-element chunk c, vpmaddubsw (codes x activations,
     * no saturation: |2 * 15 * 128| < 2^15) then vpdpwssd with the 6-bit scales as
     * words sums sc[j] * isum_j exactly in int32 over the whole super-block (|lane| <
     * 2^21, so its conversion is exact too); the f32 work is then one convert and two
     * FMAs per (row, token, super-block). Chunk c's words 0-15 are sub-block 2c, 16-31
     * sub-block 2c + 1; the codes: the 32 bytes qs[32c..] broadcast to both halves,
     * shifted by 0 / 4 (16-bit lanes) and masked. */
    __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)blk->d | (uint32_t)blk->dmin << 16)));
    *dw = _mm_cvtss_f32(dd);
    /* offset lanes 2j, 2j+1 (the two 16-sums of sub-block j) = -dmin * m_j */
    __m512 mf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(scm));
    *off = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15), mf),
                        _mm512_set1_ps(-_mm_cvtss_f32(_mm_movehdup_ps(dd))));
    __m512i scw = _mm512_cvtepu8_epi16(_mm256_zextsi128_si256(scm)); /* words 0-7: sc */
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk->qs + 32 * c)));
        v = _mm512_srlv_epi16(v, _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1));
        u[c] = _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
        sw[c] = _mm512_permutexvar_epi16(_mm512_inserti64x4(_mm512_set1_epi16((short)(2 * c)),
                                                            _mm256_set1_epi16((short)(2 * c + 1)), 1),
                                         scw);
    }
}
AVX512 __attribute__((always_inline)) static inline void k6_prep(const mxl_block_q6_k *blk, __m512i *u, __m512 *scf,
                                                                __m512 *off) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    float d = _cvtsh_ss(blk->d);
    float so[16], sf[16];
    for (int j = 0; j < 16; j++) {
        sf[j] = d * (float)blk->scales[j];
        so[j] = -32.0f * sf[j];
    }
    *off = _mm512_loadu_ps(so);
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

/* pre-unpacked K-quant quads: per (super-block, row) 10 vectors [u0..u3, sw0..3 | scf0..3, off, d] */
#define KPRE_VECS 10

AVX512 __attribute__((always_inline)) static inline void gemm4xn_k(int q6, int nt, int64_t n,
                                                                   const uint8_t *w, size_t wrb,
                                                                   int nr, const uint8_t *xq,
                                                                   size_t xs, float *y, int64_t ys, const __m512 *pre) {
    const int64_t nb = n / 256;
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
            const __m512 *pr = pre ? pre + (b * 4 + r) * KPRE_VECS : NULL;
            if (!q6) {
                const mxl_block_q4_k *blk = (const mxl_block_q4_k *)wr[r] + b;
                if (!pr) { /* the next quad's rows */
                    for (int o = 0; o < (int)sizeof *blk; o += 64) _mm_prefetch((const char *)blk + o + 4 * (int64_t)wrb, _MM_HINT_T0);
                    _mm_prefetch((const char *)blk + sizeof *blk - 1 + 4 * (int64_t)wrb, _MM_HINT_T0);
                }
                __m512i sw[4];
                float dw;
                if (pr) {
                    for (int c = 0; c < 4; c++) u[c] = _mm512_castps_si512(pr[c]), sw[c] = _mm512_castps_si512(pr[4 + c]);
                    off = pr[8];
                    dw = _mm512_cvtss_f32(pr[9]);
                } else {
                    k4_prep(blk, u, sw, &off, &dw);
                }
#pragma GCC unroll 4
                for (int t = 0; t < nt; t++) {
                    const mxl_block_q8k *x = (const mxl_block_q8k *)(xq + t * xs) + b;
                    __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 4
                    for (int c = 0; c < 4; c++) {
                        __m512i yv = _mm512_loadu_si512((const void *)(x->qs + 64 * c));
                        isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(u[c], yv), sw[c]);
                    }
                    __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(dw * dx[t]), acc[r][t]);
                    acc[r][t] = _mm512_fmadd_ps(off, bs[t], a);
                }
                continue;
            } else {
                const mxl_block_q6_k *blk = (const mxl_block_q6_k *)wr[r] + b;
                if (!pr) { /* the next quad's rows */
                    for (int o = 0; o < (int)sizeof *blk; o += 64) _mm_prefetch((const char *)blk + o + 4 * (int64_t)wrb, _MM_HINT_T0);
                    _mm_prefetch((const char *)blk + sizeof *blk - 1 + 4 * (int64_t)wrb, _MM_HINT_T0);
                }
                if (pr) {
                    for (int c = 0; c < 4; c++) u[c] = _mm512_castps_si512(pr[c]), scf[c] = pr[4 + c];
                    off = pr[8];
                } else {
                    k6_prep(blk, u, scf, &off);
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

#define GEMMK_CALL(NT) gemm4xn_k(q6, NT, n, w, wrb, nr, xq, xs, y, ys, NULL)
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

/* ---- IQ4_XS against Q8_K: the reference's exact int32 super-block sum per (row, token), then
 * its f32 expression (d * x_d) * sum, lane-wise for the 16 (row, token) pairs at once: the
 * results equal mxl_vec_dot_ref bit for bit (not only within a tolerance). ------------------ */

/* Weight side of one IQ4_XS super-block of one row. Per 64-element chunk c (sub-blocks 2c and
 * 2c + 1, qs[32c .. 32c + 31]), in k4_prep's 128-bit lane order [2c: 0-15, 2c+1: 0-15, 2c: 16-31,
 * 2c+1: 16-31]: aq[c] the code magnitudes |kvalues[nibble]| (a byte shuffle), neg[c] the mask of
 * negative codes (nibble < 8), sw[c] the signed scales ls - 32 as words, one per lane's sub-block. */
AVX512 __attribute__((always_inline)) static inline void iq4xs_prep(const mxl_block_iq4_xs *blk, __m512i *aq,
                                                                   __mmask64 *neg, __m512i *sw) {
    const __m512i atbl = _mm512_abs_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)mxl_kvalues_iq4nl)));
    /* byte ib of ls: the low nibble ib of scales_l, bits 2ib..2ib+1 of scales_h above it */
    uint32_t sl;
    memcpy(&sl, blk->scales_l, 4);
    uint64_t ls = _pdep_u64(sl, 0x0F0F0F0F0F0F0F0FULL) | _pdep_u64(blk->scales_h, 0x0303030303030303ULL) << 4;
    __m512i s16 = _mm512_castsi128_si512(
        _mm_sub_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)ls)), _mm_set1_epi16(32)));
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk->qs + 32 * c)));
        v = _mm512_srlv_epi16(v, _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1));
        v = _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
        aq[c] = _mm512_shuffle_epi8(atbl, v);
        neg[c] = _mm512_testn_epi8_mask(v, _mm512_set1_epi8(8));
        const __m256i i2 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)(2 * c))),
                                                   _mm_set1_epi16((short)(2 * c + 1)), 1);
        sw[c] = _mm512_permutexvar_epi16(_mm512_broadcast_i64x4(i2), s16);
    }
}

/* Four rows' int32 lane vectors of one token -> 128-bit lane r: row r's four partial sums. */
AVX512 static inline __m512i iq4xs_rows4(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
    __m512i a01 = _mm512_add_epi32(_mm512_shuffle_i32x4(v0, v1, 0x44), _mm512_shuffle_i32x4(v0, v1, 0xEE));
    __m512i a23 = _mm512_add_epi32(_mm512_shuffle_i32x4(v2, v3, 0x44), _mm512_shuffle_i32x4(v2, v3, 0xEE));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(a01, a23, 0x88), _mm512_shuffle_i32x4(a01, a23, 0xDD));
}

/* acc lane 4r + t: row r, token t. Per super-block and (row, token): 4 x (masked negate of the
 * activations where the code is negative, vpmaddubsw |q| x +-x: |pair| <= 2 * 127 * 127 < 2^15,
 * vpdpwssd with the scales), all exact; then the 4 x nt lane vectors are summed across lanes
 * together (integer, so in any order) and combined as the reference. */
AVX512 __attribute__((always_inline)) static inline void gemm4xn_iq4xs(int nt, int64_t n, const uint8_t *w, size_t wrb,
                                                                      int nr, const uint8_t *xq, size_t xs, float *y,
                                                                      int64_t ys, const __m512 *pre) {
    const int64_t nb = n / 256;
    const uint8_t *wr[4];
    for (int r = 0; r < 4; r++) wr[r] = w + QUAD_ROW(r, nr) * wrb;
    const __m512i row_of_lane = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        /* per token: the activation chunks in the weight's lane order ([0-15, 32-47, 16-31,
         * 48-63] of each 64), and d */
        __m512i yv[4][4];
        float dx[4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            const mxl_block_q8k *x = (const mxl_block_q8k *)(xq + (t < nt ? t : 0) * xs) + b;
            dx[t] = x->d;
            if (t >= nt) continue;
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                __m512i v = _mm512_loadu_si512((const void *)(x->qs + 64 * c));
                yv[t][c] = _mm512_shuffle_i64x2(v, v, 0xD8);
            }
        }
        __m512i isum[4][4];
        uint64_t dh = 0;
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            __m512i aq[4], sw[4];
            __mmask64 neg[4];
            uint16_t d;
            const __m512 *pr = pre ? pre + (b * 4 + r) * KPRE_VECS : NULL;
            if (pr) {
                for (int c = 0; c < 4; c++) aq[c] = _mm512_castps_si512(pr[c]), sw[c] = _mm512_castps_si512(pr[4 + c]);
                memcpy(neg, &pr[8], sizeof neg);
                memcpy(&d, &pr[9], 2);
            } else {
                const mxl_block_iq4_xs *blk = (const mxl_block_iq4_xs *)wr[r] + b;
                for (int o = 0; o < (int)sizeof *blk; o += 64) _mm_prefetch((const char *)blk + o + 4 * (int64_t)wrb, _MM_HINT_T0);
                _mm_prefetch((const char *)blk + sizeof *blk - 1 + 4 * (int64_t)wrb, _MM_HINT_T0);
                d = blk->d;
                iq4xs_prep(blk, aq, neg, sw);
            }
            dh |= (uint64_t)d << (16 * r);
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    __m512i ym = _mm512_mask_sub_epi8(yv[t][c], neg[c], _mm512_setzero_si512(), yv[t][c]);
                    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(aq[c], ym), sw[c]);
                }
                isum[r][t] = s;
            }
        }
        /* lane 4r + t: the exact sum of row r, token t (tokens past nt repeat token 0) */
        __m512i u[4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            const int tt = t < nt ? t : 0;
            u[t] = iq4xs_rows4(isum[0][tt], isum[1][tt], isum[2][tt], isum[3][tt]);
        }
        __m512i w01 = _mm512_add_epi32(_mm512_unpacklo_epi32(u[0], u[1]), _mm512_unpackhi_epi32(u[0], u[1]));
        __m512i w23 = _mm512_add_epi32(_mm512_unpacklo_epi32(u[2], u[3]), _mm512_unpackhi_epi32(u[2], u[3]));
        __m512i sumi = _mm512_add_epi32(_mm512_unpacklo_epi64(w01, w23), _mm512_unpackhi_epi64(w01, w23));
        /* mxl_kq_combine(d, 0, x_d, sumi, 0) = (d * x_d) * sumi, added as the reference adds */
        __m512 dw = _mm512_permutexvar_ps(row_of_lane, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)dh))));
        __m512 dxv = _mm512_broadcast_f32x4(_mm_setr_ps(dx[0], dx[1], dx[2], dx[3]));
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_mul_ps(dw, dxv), _mm512_cvtepi32_ps(sumi)));
    }
    float out[16];
    _mm512_storeu_ps(out, acc);
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nt; t++) y[t * ys + r] = out[4 * r + t];
}

#define GEMMXS_CALL(NT) gemm4xn_iq4xs(NT, n, w, wrb, nr, xq, xs, y, ys, NULL)
AVX512 static void gemm4x4_iq4_xs(int64_t n, const void *w, size_t wrb, int nr, const void *xq, size_t xs, int nt,
                                  float *y, int64_t ys) {
    SWITCH_NT(nt, GEMMXS_CALL)
}
/* pre-unpacked IQ4_XS quads: per (super-block, row) the KPRE_VECS vectors [aq0..aq3, sw0..sw3,
 * the four 64-bit negative-code masks, d (the half in the first two bytes)] */
AVX512 static void gemm4x4_iq4_xs_unpack(int64_t n, const void *w, size_t wrb, int nr, float *pref) {
    __m512 *pre = (__m512 *)pref;
    for (int64_t b = 0; b < n / 256; b++)
        for (int r = 0; r < 4; r++) {
            const mxl_block_iq4_xs *blk = (const mxl_block_iq4_xs *)((const uint8_t *)w + QUAD_ROW(r, nr) * wrb) + b;
            __m512 *pr = pre + (b * 4 + r) * KPRE_VECS;
            __m512i aq[4], sw[4];
            __mmask64 neg[4];
            iq4xs_prep(blk, aq, neg, sw);
            for (int c = 0; c < 4; c++) pr[c] = _mm512_castsi512_ps(aq[c]), pr[4 + c] = _mm512_castsi512_ps(sw[c]);
            pr[8] = pr[9] = _mm512_setzero_ps();
            memcpy(&pr[8], neg, sizeof neg);
            memcpy(&pr[9], &blk->d, 2);
        }
}
#define GEMMXS_PRE_CALL(NT) gemm4xn_iq4xs(NT, n, (const uint8_t *)p, 0, nr, xq, xs, y, ys, p)
AVX512 static void gemm4x4_iq4_xs_pre(int64_t n, const float *pre, int nr, const void *xq, size_t xs, int nt, float *y,
                                      int64_t ys) {
    const __m512 *p = (const __m512 *)pre;
    if (!p) __builtin_unreachable();
    SWITCH_NT(nt, GEMMXS_PRE_CALL)
}

AVX512 __attribute__((always_inline)) static inline void unpack4_k(int q6, int64_t n, const uint8_t *w, size_t wrb, int nr,
                                                                  __m512 *pre) {
    for (int64_t b = 0; b < n / 256; b++)
        for (int r = 0; r < 4; r++) {
            const uint8_t *wrow = w + QUAD_ROW(r, nr) * wrb;
            __m512 *pr = pre + (b * 4 + r) * KPRE_VECS;
            __m512i u[4];
            if (q6) {
                __m512 scf[4];
                k6_prep((const mxl_block_q6_k *)wrow + b, u, scf, &pr[8]);
                for (int c = 0; c < 4; c++) pr[4 + c] = scf[c];
            } else {
                __m512i sw[4];
                float dw;
                k4_prep((const mxl_block_q4_k *)wrow + b, u, sw, &pr[8], &dw);
                for (int c = 0; c < 4; c++) pr[4 + c] = _mm512_castsi512_ps(sw[c]);
                pr[9] = _mm512_set1_ps(dw);
            }
            for (int c = 0; c < 4; c++) pr[c] = _mm512_castsi512_ps(u[c]);
        }
}
#define GEMMK_PRE_CALL(NT) gemm4xn_k(q6, NT, n, (const uint8_t *)p, 0, nr, xq, xs, y, ys, p)
#define GEMMK_PRE(name, Q6)                                                                       \
    AVX512 static void name##_unpack(int64_t n, const void *w, size_t wrb, int nr, float *pre) {  \
        unpack4_k(Q6, n, w, wrb, nr, (__m512 *)pre);                                              \
    }                                                                                             \
    AVX512 static void name##_pre(int64_t n, const float *pre, int nr, const void *xq, size_t xs, \
                                  int nt, float *y, int64_t ys) {                                 \
        const int q6 = Q6;                                                                        \
        const __m512 *p = (const __m512 *)pre;                                                    \
        if (!p) __builtin_unreachable();                                                          \
        SWITCH_NT(nt, GEMMK_PRE_CALL)                                                             \
    }
GEMMK_PRE(gemm4x4_q4_k, 0)
GEMMK_PRE(gemm4x4_q6_k, 1)

/* the larger of the two layouts: 32-element blocks (14 vectors per pair) and K-quants (4 x 10
 * vectors per super-block) */
size_t mxl_gemm4x4_pre_floats(int64_t n) {
    size_t a = (size_t)((n / 32 + 1) / 2) * PRE_VECS * 16, k = (size_t)(n / 256) * 4 * KPRE_VECS * 16;
    return a > k ? a : k;
}

bool mxl_gemm4x4_pre_avx512_get(mxl_dtype t, mxl_gemm4x4_unpack_fn *unpack, mxl_gemm4x4_pre_fn *kern) {
    switch (t) {
    case MXL_DTYPE_Q8_0: *unpack = gemm4x4_q8_0_unpack, *kern = gemm4x4_q8_0_pre; return true;
    case MXL_DTYPE_Q4_0: *unpack = gemm4x4_q4_0_unpack, *kern = gemm4x4_q4_0_pre; return true;
    case MXL_DTYPE_Q5_0: *unpack = gemm4x4_q5_0_unpack, *kern = gemm4x4_q5_0_pre; return true;
    case MXL_DTYPE_Q4_1: *unpack = gemm4x4_q4_1_unpack, *kern = gemm4x4_q4_1_pre; return true;
    case MXL_DTYPE_Q5_1: *unpack = gemm4x4_q5_1_unpack, *kern = gemm4x4_q5_1_pre; return true;
    case MXL_DTYPE_IQ4_NL: *unpack = gemm4x4_iq4_nl_unpack, *kern = gemm4x4_iq4_nl_pre; return true;
    case MXL_DTYPE_Q4_K: *unpack = gemm4x4_q4_k_unpack, *kern = gemm4x4_q4_k_pre; return true;
    case MXL_DTYPE_Q6_K: *unpack = gemm4x4_q6_k_unpack, *kern = gemm4x4_q6_k_pre; return true;
    case MXL_DTYPE_IQ4_XS: *unpack = gemm4x4_iq4_xs_unpack, *kern = gemm4x4_iq4_xs_pre; return true;
    default: return false;
    }
}

mxl_gemm4x4_fn mxl_gemm4x4_avx512_get(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_Q8_0: return gemm4x4_q8_0;
    case MXL_DTYPE_Q4_0: return gemm4x4_q4_0;
    case MXL_DTYPE_Q5_0: return gemm4x4_q5_0;
    case MXL_DTYPE_Q4_1: return gemm4x4_q4_1;
    case MXL_DTYPE_Q5_1: return gemm4x4_q5_1;
    case MXL_DTYPE_IQ4_NL: return gemm4x4_iq4_nl;
    case MXL_DTYPE_Q4_K: return gemm4x4_q4_k;
    case MXL_DTYPE_Q6_K: return gemm4x4_q6_k;
    case MXL_DTYPE_IQ4_XS: return gemm4x4_iq4_xs;
    default: return 0;
    }
}
/* Q8_K activations, bit for bit mxl_quant_q8k_ref: the signed value of the first largest
 * magnitude sets the scale -127 / max, products rounded to nearest even (the default MXCSR mode,
 * as nearbyintf), clamped at 127, and the 16-element sums. */
AVX512 void mxl_quant_q8k_avx512(const float *x, mxl_block_q8k *y, int64_t n) {
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        __m512 mx = _mm512_setzero_ps();
        for (int k = 0; k < 16; k++) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)));
        float amax = _mm512_reduce_max_ps(mx);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0.0f;
        for (int k = 0; k < 16; k++) {
            __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (hit) {
                max = x[16 * k + __builtin_ctz(hit)];
                break;
            }
        }
        float iscale = -127.0f / max;
        __m512 is = _mm512_set1_ps(iscale);
        for (int k = 0; k < 16; k++) {
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(is, _mm512_loadu_ps(x + 16 * k)));
            v = _mm512_min_epi32(v, _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(y[i].qs + 16 * k), _mm512_cvtsepi32_epi8(v));
            y[i].bsums[k] = (int16_t)_mm512_reduce_add_epi32(v);
        }
        y[i].d = 1.0f / iscale;
    }
}
/* Two-term q8a, bit for bit mxl_quant_q8a2_ref: the same scales (IEEE divisions, 16 blocks per
 * vector), x / d2 rounded to nearest even by the conversion (the default MXCSR mode, as
 * round_even), the split into high and low codes in integers. */
/* nblk <= 16 blocks at once: the per-block maxima, scales and code sums as vectors of 16 blocks
 * (one division each instead of one per block; lanes past nblk are zeros) */
AVX512 __attribute__((always_inline)) static inline void q8a2_group(const float *x, mxl_block_q8a2 *y, int nblk) {
    __m512i m[16], t[16];
    for (int j = 0; j < 16; j++) m[j] = t[j] = _mm512_setzero_si512();
    for (int j = 0; j < nblk; j++) {
        __m512 v0 = _mm512_loadu_ps(x + 32 * j), v1 = _mm512_loadu_ps(x + 32 * j + 16);
        m[j] = _mm512_castps_si512(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    }
    const __m512 d = _mm512_div_ps(_mm512_castsi512_ps(mxl_reduce16_avx512(m, MXL_REDUCE_MAX_F32)), _mm512_set1_ps(127.0f));
    const __m512 id = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ), _mm512_set1_ps(1.0f), d);
    _Alignas(64) float dv[16], id2v[16], d2v[16], sv[16]; /* per block */
    _Alignas(64) int32_t sumv[16];
    const __m512 d2 = _mm512_mul_ps(d, _mm512_set1_ps(MXL_Q8A2_STEP2));
    _mm512_store_ps(dv, d);
    _mm512_store_ps(id2v, _mm512_mul_ps(id, _mm512_set1_ps(1.0f / MXL_Q8A2_STEP2)));
    _mm512_store_ps(d2v, d2);
    const __m512i half = _mm512_set1_epi32(128);
    for (int j = 0; j < nblk; j++) {
        const __m512 id2j = _mm512_set1_ps(id2v[j]); /* v = round(x / d2), split into qs, qs2 */
        __m512i v0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * j), id2j));
        __m512i v1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * j + 16), id2j));
        __m512i h0 = _mm512_srai_epi32(_mm512_add_epi32(v0, half), 8), h1 = _mm512_srai_epi32(_mm512_add_epi32(v1, half), 8);
        _mm_storeu_si128((__m128i *)y[j].qs, _mm512_cvtepi32_epi8(h0));
        _mm_storeu_si128((__m128i *)(y[j].qs + 16), _mm512_cvtepi32_epi8(h1));
        _mm_storeu_si128((__m128i *)y[j].qs2, _mm512_cvtepi32_epi8(_mm512_sub_epi32(v0, _mm512_slli_epi32(h0, 8))));
        _mm_storeu_si128((__m128i *)(y[j].qs2 + 16), _mm512_cvtepi32_epi8(_mm512_sub_epi32(v1, _mm512_slli_epi32(h1, 8))));
        t[j] = _mm512_add_epi32(v0, v1);
    }
    const __m512i sums = mxl_reduce16_avx512(t, MXL_REDUCE_ADD_I32);
    _mm512_store_si512((void *)sumv, sums);
    _mm512_store_ps(sv, _mm512_mul_ps(d2, _mm512_cvtepi32_ps(sums)));
    for (int j = 0; j < nblk; j++) y[j].d = dv[j], y[j].d2 = d2v[j], y[j].s = sv[j], y[j].sum = sumv[j];
}

AVX512 void mxl_quant_q8a2_avx512(const float *x, mxl_block_q8a2 *y, int64_t n) {
    int64_t nb = n / 32, b = 0;
    for (; b + 16 <= nb; b += 16) q8a2_group(x + b * 32, y + b, 16);
    if (b < nb) q8a2_group(x + b * 32, y + b, (int)(nb - b));
}
#else
size_t mxl_gemm4x4_pre_floats(int64_t n) { (void)n; return 0; }
bool mxl_gemm4x4_pre_avx512_get(mxl_dtype t, mxl_gemm4x4_unpack_fn *unpack, mxl_gemm4x4_pre_fn *kern) {
    (void)t; (void)unpack; (void)kern;
    return false;
}
mxl_gemm4x4_fn mxl_gemm4x4_avx512_get(mxl_dtype t) { (void)t; return 0; }
void mxl_quant_q8k_avx512(const float *x, mxl_block_q8k *y, int64_t n) { mxl_quant_q8k_ref(x, y, n); }
void mxl_quant_q8a2_avx512(const float *x, mxl_block_q8a2 *y, int64_t n) { mxl_quant_q8a2_ref(x, y, n); }
#endif
