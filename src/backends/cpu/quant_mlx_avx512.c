/* quant_mlx_avx512.c - AVX-512 VNNI micro-kernel for MLX affine-quantized weights (bits 2, 4, 8):
 * 4 weight rows x 1..4 tokens against q8a activations (quant_mlx.h).
 *
 * Per group g of a row, dot(w, x) = s_g * sum_k d_k * isum_k + b_g * SX_g, where k runs over the
 * group's 32-element activation blocks, isum_k = sum(q * qx) is exact in int32 and
 * SX_g = sum_k s_k (q8a's s = d * sum(qx)). SX_g does not depend on the row: it is computed once
 * per token and 16-group chunk and shared by the four rows, and the bias term becomes one 16-lane
 * FMA per (row, token, chunk) against 16 biases converted at once.
 *
 * Codes are unsigned (0 .. 2^bits - 1), so vpdpbusd (unsigned x signed bytes) takes them as they
 * are, with no offset to remove. Blocks are taken in pairs (64 elements, one 512-bit vpdpbusd):
 *   - 8-bit: the 64 code bytes as they lie; activations [x_b | x_b+1].
 *   - 4-bit: the 32 packed bytes (byte k: element 2k in the low nibble, 2k + 1 in the high one)
 *     broadcast to both 256-bit halves and masked with 0x0F (low half) / 0xF0 (high half): one
 *     AND, the high nibbles left in place, i.e. multiplied by 16. The activations are reordered
 *     once per token to match (low half: even elements, high half: odd ones) and the high
 *     half's activation scale is d / 16, which undoes the factor exactly (a power of two).
 *   - 2-bit: the 16 packed bytes broadcast to the four 128-bit lanes, lane j masked with
 *     3 << 2j (element 4k + j of byte k, times 4^j); activations reordered so that lane j holds
 *     elements 4k + j, scale d / 4^j.
 * The weight side is then a broadcast load and one AND per row and pair, and the f32 work one
 * convert, one multiply (group scale x activation scales) and one FMA per (row, token, pair).
 * The reordering of the activations is shared by the four rows.
 *
 * Float path: the f32 summation order differs from the reference (tested by tolerance). Batch
 * invariance (matmul.h): each (row, token) result is one accumulator fed by the same operation
 * sequence whatever the token count (1..4, a compile-time constant after inlining) and the number
 * of valid rows; rows past the valid count repeat the last valid row (in bounds) and are not
 * stored. Only called when the CPU has AVX-512 F/BW/VL + VNNI. */
#include "backends/cpu/quant_mlx.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

/* Lanes (32-bit) of a pair's vpdpbusd result that belong to its second block, per bit width
 * (see the layouts above): 8-bit lanes 8-15; 4-bit lanes 4-7 and 12-15; 2-bit lanes 2-3 of
 * every 128-bit lane. */
AVX512 static inline __m512i second_block_lanes(int bits) {
    if (bits == 8) return _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    if (bits == 4) return _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
    return _mm512_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1);
}
/* Per-lane factor undoing the in-place code shift: 1, 1/16 (4-bit high half), 4^-j (2-bit). */
AVX512 static inline __m512 lane_scale(int bits) {
    if (bits == 8) return _mm512_set1_ps(1.0f);
    if (bits == 4)
        return _mm512_setr_ps(1, 1, 1, 1, 1, 1, 1, 1, 0.0625f, 0.0625f, 0.0625f, 0.0625f, 0.0625f,
                              0.0625f, 0.0625f, 0.0625f);
    return _mm512_setr_ps(1, 1, 1, 1, 0.25f, 0.25f, 0.25f, 0.25f, 0.0625f, 0.0625f, 0.0625f, 0.0625f,
                          0.015625f, 0.015625f, 0.015625f, 0.015625f);
}
/* AND mask that isolates the codes of the broadcast packed bytes. */
AVX512 static inline __m512i code_mask(int bits) {
    if (bits == 4)
        return _mm512_inserti64x4(_mm512_set1_epi8(0x0F), _mm256_set1_epi8((char)0xF0), 1);
    return _mm512_setr_epi32(0x03030303, 0x03030303, 0x03030303, 0x03030303, 0x0C0C0C0C, 0x0C0C0C0C,
                             0x0C0C0C0C, 0x0C0C0C0C, 0x30303030, 0x30303030, 0x30303030, 0x30303030,
                             (int)0xC0C0C0C0u, (int)0xC0C0C0C0u, (int)0xC0C0C0C0u, (int)0xC0C0C0C0u);
}

/* The 64 activation codes of blocks b, b + 1 ([x_b | x_b+1], x_b+1 zero when `two` is 0) in the
 * order the weight codes of `bits` come in. */
AVX512 __attribute__((always_inline)) static inline __m512i act_pair(int bits, const mxl_block_q8a *x,
                                                                   int two) {
    __m256i y0 = _mm256_loadu_si256((const __m256i *)x[0].qs);
    __m256i y1 = two ? _mm256_loadu_si256((const __m256i *)x[1].qs) : _mm256_setzero_si256();
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(y0), y1, 1);
    if (bits == 8) return v;
    if (bits == 4) {
        /* per 128-bit lane: even bytes to the low quadword, odd bytes to the high one; then all
         * low quadwords (even elements 0..62) to the low half, high quadwords to the high half */
        const __m512i evod = _mm512_broadcast_i32x4(
            _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
        v = _mm512_shuffle_epi8(v, evod);
        return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), v);
    }
    /* 2-bit: per 128-bit lane L (elements 16L..16L+15) dword j = elements 16L + 4m + j (m < 4);
     * then dword j of lane L goes to lane j, position L: lane j = elements 4k + j, k = 0..15 */
    const __m512i tr = _mm512_broadcast_i32x4(
        _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    v = _mm512_shuffle_epi8(v, tr);
    return _mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), v);
}

/* The codes of the pair starting at byte p of a row (masked to the first block when `two` is 0,
 * so nothing past the row is read). */
AVX512 __attribute__((always_inline)) static inline __m512i codes_pair(int bits, const uint8_t *p,
                                                                     int two, __m512i mask) {
    if (bits == 8)
        return two ? _mm512_loadu_si512((const void *)p) : _mm512_maskz_loadu_epi8(0xFFFFFFFFull, p);
    if (bits == 4) {
        __m256i v = two ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi8(0xFFFFu, p);
        return _mm512_and_si512(_mm512_broadcast_i64x4(v), mask);
    }
    __m128i v = two ? _mm_loadu_si128((const __m128i *)p) : _mm_maskz_loadu_epi8(0xFFu, p);
    return _mm512_and_si512(_mm512_broadcast_i32x4(v), mask);
}

/* n (<= 16) consecutive scales or biases from p as f32, zero past n. */
AVX512 static inline __m512 params16(const void *p, mxl_dtype dt, int n) {
    __mmask16 m = (__mmask16)((1u << n) - 1u);
    if (dt == MXL_DTYPE_F32) return _mm512_maskz_loadu_ps(m, p);
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if (dt == MXL_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); /* BF16 */
}

#define CHUNK 16 /* groups per chunk: one 16-lane vector of scales, biases and SX */

/* Blocks b, b + 1 (`two`; else b alone) of the four rows for nt tokens: acc[r][t] +=
 * cvt(isum lanes) * (group scale x activation scales). gi: the group of block b within the chunk
 * whose f32 scales are sf[r][0..15]; `grouped`: group size >= 64 (both blocks in group gi). */
AVX512 __attribute__((always_inline)) static inline void mlx_pair(int bits, int nt, int grouped, int two,
                                                                int64_t b, int gi,
                                                                const uint8_t *const wr[4],
                                                                float sf[4][CHUNK], const uint8_t *xq,
                                                                size_t xs, __m512i mask, __m512i blk2,
                                                                __m512 lsc, int64_t pf, __m512 acc[4][4]) {
    __m512i xv[4];
    __m512 dx[4];
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
        const mxl_block_q8a *x = (const mxl_block_q8a *)(xq + t * xs) + b;
        xv[t] = act_pair(bits, x, two);
        __m128 d01 = _mm_setr_ps(x[0].d, two ? x[1].d : 0.0f, 0.0f, 0.0f);
        dx[t] = _mm512_mul_ps(_mm512_permutexvar_ps(blk2, _mm512_castps128_ps512(d01)), lsc);
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        __m512i u = codes_pair(bits, wr[r] + b * 4 * bits, two, mask);
        _mm_prefetch((const char *)wr[r] + b * 4 * bits + pf, _MM_HINT_T0);
        __m512 sv;
        if (grouped) {
            sv = _mm512_set1_ps(sf[r][gi]);
        } else { /* gs 32: groups gi and gi + 1 (zero past the chunk's groups) */
            __m128 s01 = _mm_castpd_ps(_mm_load_sd((const double *)&sf[r][gi]));
            sv = _mm512_permutexvar_ps(blk2, _mm512_castps128_ps512(s01));
        }
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, xv[t]);
            acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), _mm512_mul_ps(sv, dx[t]), acc[r][t]);
        }
    }
}

AVX512 __attribute__((always_inline)) static inline void mlx_gemm(int bits, int nt, int grouped,
                                                                const mxl_mlx_qweight *W, int64_t r0,
                                                                int nr, const uint8_t *xq, size_t xs,
                                                                float *y, int64_t ys) {
    const int gs = W->group_size, sub = gs / 32; /* sub > 1 exactly when `grouped` */
    const int lsub = sub == 1 ? 0 : sub == 2 ? 1 : 2;
    const int64_t ng = W->cols / gs;
    const size_t esz = W->scale_dtype == MXL_DTYPE_F32 ? 4 : 2;
    const int64_t row_bytes = W->cols * bits / 8;
    /* software prefetch of the next quad's rows (the rows after these four, at the same offset):
     * the hardware prefetchers alone leave the kernel waiting on memory for rows this short */
    const int64_t pf = 4 * row_bytes, pfs = 4 * ng * (int64_t)esz;
    const __m512i mask = code_mask(bits), blk2 = second_block_lanes(bits);
    const __m512 lsc = lane_scale(bits);
    const uint8_t *wr[4];
    const char *sr[4], *br[4];
    for (int r = 0; r < 4; r++) {
        int64_t row = r0 + (r < nr ? r : nr - 1); /* rows past nr repeat the last valid one */
        wr[r] = (const uint8_t *)W->w + row * row_bytes;
        sr[r] = (const char *)W->scales + (size_t)(row * ng) * esz;
        br[r] = (const char *)W->biases + (size_t)(row * ng) * esz;
    }
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) acc[r][t] = _mm512_setzero_ps();
    float sf[4][CHUNK] __attribute__((aligned(64)));
    for (int64_t g0 = 0; g0 < ng; g0 += CHUNK) {
        const int gn = ng - g0 < CHUNK ? (int)(ng - g0) : CHUNK;
        const int64_t b0 = g0 * sub, b1 = (g0 + gn) * sub; /* the chunk's blocks */
        /* bias terms: SX per group and token (zero past gn), times the 16 biases of each row */
        __m512 sx[4];
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            /* SX_g = s_(g*sub) + s_(g*sub+1) + ...: one 16-lane gather per block of the group
             * (not scalar stores and a vector load, which would stall store forwarding) */
            const float *s0 = &((const mxl_block_q8a *)(xq + t * xs) + b0)->s;
            const __mmask16 gm = (__mmask16)((1u << gn) - 1u);
            const __m512i gidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                    _mm512_set1_epi32(sub * (int)sizeof(mxl_block_q8a)));
            __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), gm, gidx, s0, 1);
            for (int k = 1; k < sub; k++)
                v = _mm512_add_ps(v, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), gm, gidx,
                                                              s0 + k * (int)(sizeof(mxl_block_q8a) / 4), 1));
            sx[t] = v;
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            _mm_prefetch(sr[r] + (size_t)g0 * esz + pfs, _MM_HINT_T0);
            _mm_prefetch(br[r] + (size_t)g0 * esz + pfs, _MM_HINT_T0);
            _mm512_store_ps(sf[r], params16(sr[r] + (size_t)g0 * esz, W->scale_dtype, gn));
            __m512 bv = params16(br[r] + (size_t)g0 * esz, W->scale_dtype, gn);
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) acc[r][t] = _mm512_fmadd_ps(bv, sx[t], acc[r][t]);
        }
        int64_t b = b0;
        for (; b + 1 < b1; b += 2)
            mlx_pair(bits, nt, grouped, 1, b, (int)((b - b0) >> lsub), wr, sf, xq, xs, mask, blk2, lsc, pf, acc);
        if (b < b1) /* the row's last, lone block (gs 32, odd block count) */
            mlx_pair(bits, nt, grouped, 0, b, (int)((b - b0) >> lsub), wr, sf, xq, xs, mask, blk2, lsc, pf, acc);
    }
    /* constant indices only (a runtime one would keep acc in memory) */
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++)
            if (r < nr) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}

int mxl_mlx_gemm4x4_avx512_supported(int bits) { return bits == 2 || bits == 4 || bits == 8; }

/* bits and the token count become compile-time constants in each branch */
#define MLX_NT(BITS, G)                                                                           \
    switch (ntok) {                                                                               \
    case 1: mlx_gemm(BITS, 1, G, W, r0, nrows, x8, xstride, y, y_stride); break;                  \
    case 2: mlx_gemm(BITS, 2, G, W, r0, nrows, x8, xstride, y, y_stride); break;                  \
    case 3: mlx_gemm(BITS, 3, G, W, r0, nrows, x8, xstride, y, y_stride); break;                  \
    default: mlx_gemm(BITS, 4, G, W, r0, nrows, x8, xstride, y, y_stride); break;                 \
    }
#define MLX_G(BITS)                                                                               \
    if (W->group_size > 32) {                                                                     \
        MLX_NT(BITS, 1)                                                                           \
    } else {                                                                                      \
        MLX_NT(BITS, 0)                                                                           \
    }

AVX512 void mxl_mlx_gemm4x4_avx512(const mxl_mlx_qweight *W, int64_t r0, int nrows, const void *xq,
                                   size_t xstride, int ntok, float *y, int64_t y_stride) {
    const uint8_t *x8 = xq;
    if (W->bits == 4) {
        MLX_G(4)
    } else if (W->bits == 8) {
        MLX_G(8)
    } else {
        MLX_G(2)
    }
}
#else
int mxl_mlx_gemm4x4_avx512_supported(int bits) { (void)bits; return 0; }
void mxl_mlx_gemm4x4_avx512(const mxl_mlx_qweight *W, int64_t r0, int nrows, const void *xq,
                            size_t xstride, int ntok, float *y, int64_t y_stride) {
    (void)W, (void)r0, (void)nrows, (void)xq, (void)xstride, (void)ntok, (void)y, (void)y_stride;
}
#endif
