/* quant_mlx_avx2.c - AVX2+FMA fused dot for MLX affine-quantized rows (quant_mlx.h).
 *
 * Per group g: dot = s_g * sum_k d_k * isum_k + b_g * sum_k s_k over its 32-element activation
 * blocks k (q8a). isum_k (codes x int8 activations) is exact in int32; the f32 accumulation runs
 * in vector lanes, so results differ from the reference only by f32 summation order.
 * 4-bit: element j is nibble j of the stream (byte j/2, low nibble first), so nibbles are
 * interleaved back into element order. 8-bit: codes 0..255 do not fit maddubs' signed*unsigned
 * pair sums, so q - 128 is used and the bias becomes b + 128*s. 2-bit: byte shuffles; 3/5/6-bit:
 * see codes_odd. */
#include "backends/cpu/quant_mlx.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backends/cpu/reduce_avx2.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* Scale/bias idx as f32 (F16C for halves). */
AVX2 static inline float param(const void *p, mxl_dtype dt, int64_t idx) {
    if (dt == MXL_DTYPE_F32) {
        float f;
        memcpy(&f, (const char *)p + 4 * idx, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)p + 2 * idx, 2);
    if (dt == MXL_DTYPE_F16) return _cvtsh_ss(h);
    return mxl_bf2f(h);
}

AVX2 static inline __m256i codes4(const uint8_t *p) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i m = _mm_set1_epi8(0x0F);
    __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
    return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}

AVX2 static inline __m256i codes2(const uint8_t *p) {
    /* 8 bytes -> 32 codes: byte k holds elements 4k..4k+3 at bit offsets 0,2,4,6 */
    uint64_t v;
    memcpy(&v, p, 8);
    __m128i b = _mm_cvtsi64_si128((long long)v);
    __m128i m = _mm_set1_epi8(3);
    __m128i c0 = _mm_and_si128(b, m), c1 = _mm_and_si128(_mm_srli_epi16(b, 2), m);
    __m128i c2 = _mm_and_si128(_mm_srli_epi16(b, 4), m), c3 = _mm_and_si128(_mm_srli_epi16(b, 6), m);
    __m128i c01 = _mm_unpacklo_epi8(c0, c1), c23 = _mm_unpacklo_epi8(c2, c3); /* 16 pairs */
    __m128i lo = _mm_unpacklo_epi16(c01, c23), hi = _mm_unpackhi_epi16(c01, c23);
    return _mm256_set_m128i(hi, lo);
}

/* 32 codes of width b = 3, 5 or 6 (4*b bytes, copied to a zero-padded buffer so nothing past the
 * row is read). Each 16-bit lane gathers (pshufb) the two bytes holding its code, a multiply by
 * 2^(16 - b - shift) moves the code to the top, a shift by 16 - b brings it down. The pattern
 * repeats every 16 codes (2*b bytes). Tables: byte pairs and multipliers per code j = 0..15. */
static const uint8_t k_ctrl[3][32] = {
    {0, 1, 0, 1, 0, 1, 1, 2, 1, 2, 1, 2, 2, 3, 2, 3, 3, 4, 3, 4, 3, 4, 4, 5, 4, 5, 4, 5, 5, 6, 5, 6},
    {0, 1, 0, 1, 1, 2, 1, 2, 2, 3, 3, 4, 3, 4, 4, 5, 5, 6, 5, 6, 6, 7, 6, 7, 7, 8, 8, 9, 8, 9, 9, 10},
    {0, 1, 0, 1, 1, 2, 2, 3, 3, 4, 3, 4, 4, 5, 5, 6, 6, 7, 6, 7, 7, 8, 8, 9, 9, 10, 9, 10, 10, 11, 11, 12}};
static const uint16_t k_mult[3][16] = {
    {8192, 1024, 128, 4096, 512, 64, 2048, 256, 8192, 1024, 128, 4096, 512, 64, 2048, 256},
    {2048, 64, 512, 16, 128, 1024, 32, 256, 2048, 64, 512, 16, 128, 1024, 32, 256},
    {1024, 16, 64, 256, 1024, 16, 64, 256, 1024, 16, 64, 256, 1024, 16, 64, 256}};

AVX2 static inline __m256i codes_odd(const uint8_t *p, int b, const uint8_t *end) {
    int t = b == 3 ? 0 : b == 5 ? 1 : 2;
    __m256i a, c;
    if (p + 2 * b + 16 <= end) { /* direct loads stay inside the row */
        a = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
        c = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p + 2 * b)));
    } else { /* the row's last chunks: copy (store forwarding is slow, so only here) */
        uint8_t buf[32] = {0};
        memcpy(buf, p, (size_t)(4 * b));
        a = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)buf));
        c = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(buf + 2 * b)));
    }
    __m256i ctrl = _mm256_loadu_si256((const __m256i *)k_ctrl[t]);
    __m256i mult = _mm256_loadu_si256((const __m256i *)k_mult[t]);
    __m256i v0 = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(a, ctrl), mult), 16 - b);
    __m256i v1 = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(c, ctrl), mult), 16 - b);
    /* packus interleaves 128-bit lanes: [0-7, 16-23 | 8-15, 24-31] -> reorder 64-bit quarters */
    return _mm256_permute4x64_epi64(_mm256_packus_epi16(v0, v1), 0xD8);
}

/* nt tokens (1 or 4, a constant after inlining) against row r; codes decoded once per 32. */
AVX2 __attribute__((always_inline)) static inline void mlx_dotn(const mxl_mlx_qweight *W, int64_t r,
                                                                const uint8_t *xq, size_t xs,
                                                                int nt, float *out) {
    const int bits = W->bits, gs = W->group_size, sub = gs / 32;
    const int64_t ng = W->cols / gs;
    const uint8_t *row = (const uint8_t *)(W->w + r * (W->cols * bits / 32));
    const uint8_t *row_end = row + W->cols * bits / 8;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float accb[4] = {0, 0, 0, 0};
    for (int64_t g = 0; g < ng; g++) {
        float s = param(W->scales, W->scale_dtype, r * ng + g);
        float b = param(W->biases, W->scale_dtype, r * ng + g);
        float sx[4] = {0, 0, 0, 0};
        for (int k = 0; k < sub; k++) {
            const uint8_t *p = row + (g * sub + k) * 4 * bits; /* 32 codes = 4*bits bytes */
            /* the row four rows on, same offset: rows of a few KB are too short for the
             * hardware prefetchers (a prefetch never faults, so past the matrix is harmless) */
            _mm_prefetch((const char *)p + 4 * (row_end - row), _MM_HINT_T0);
            __m256i q;
            if (bits == 4) q = codes4(p);
            else if (bits == 8) q = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)p),
                                                     _mm256_set1_epi8((char)0x80)); /* q - 128 */
            else if (bits == 2) q = codes2(p);
            else q = codes_odd(p, bits, row_end);
            __m256i aq = bits == 8 ? _mm256_sign_epi8(q, q) : q;
            for (int t = 0; t < nt; t++) {
                const mxl_block_q8a *xb = (const mxl_block_q8a *)(xq + t * xs) + g * sub + k;
                __m256i y = _mm256_loadu_si256((const __m256i *)xb->qs);
                if (bits == 8) y = _mm256_sign_epi8(y, q);
                __m256i isum = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, y), ones);
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(s * xb->d), _mm256_cvtepi32_ps(isum), acc[t]);
                sx[t] += xb->s;
            }
        }
        for (int t = 0; t < nt; t++) accb[t] += (bits == 8 ? b + 128.0f * s : b) * sx[t];
    }
    for (int t = 0; t < nt; t++) out[t] = mxl_hsum8_avx2(acc[t]) + accb[t];
}

AVX2 float mxl_mlx_vec_dot_avx2(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq) {
    float out;
    mlx_dotn(W, r, (const uint8_t *)xq, 0, 1, &out);
    return out;
}

AVX2 void mxl_mlx_vec_dot4_avx2(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq,
                                size_t xstride, float *out) {
    mlx_dotn(W, r, (const uint8_t *)xq, xstride, 4, out);
}
#else
float mxl_mlx_vec_dot_avx2(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq) {
    return mxl_mlx_vec_dot_ref(W, r, xq);
}
void mxl_mlx_vec_dot4_avx2(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq,
                           size_t xstride, float *out) {
    for (int t = 0; t < 4; t++)
        out[t] = mxl_mlx_vec_dot_ref(W, r, (const mxl_block_q8a *)((const char *)xq + t * xstride));
}
#endif
