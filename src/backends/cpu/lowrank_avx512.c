/* lowrank_avx512.c - the low-rank up-projection (lowrank.h) on AVX-512: the K rows of Wt in order,
 * each over all N outputs 16 at a time with a masked tail (F16 / BF16 rows widened exactly to f32);
 * each product rounded before it is added (no FMA), in k order: the reference's bits. */
#include "backends/cpu/lowrank.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

/* 16 elements of row data from element i, as f32 (masked: the lanes of m). */
AVX512 static inline __m512 load16(const void *wt, mxl_dtype t, int64_t i, __mmask16 m) {
    if (t == MXL_DTYPE_F32) return _mm512_maskz_loadu_ps(m, (const float *)wt + i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)wt + i);
    if (t == MXL_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AVX512 void mxl_cpu_lowrank_acc_avx512(const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N, float scale,
                                       float *y) {
    const __mmask16 all = 0xffff;
    const __mmask16 tail = N % 16 ? (__mmask16)((1u << (N % 16)) - 1) : 0;
    for (int64_t t = 0; t < n; t++) {
        float *yt = y + t * N;
        const float *xt = x + t * K;
        /* row k of Wt over all N outputs before row k + 1: Wt streams once, in order, and y (at
         * most a few KB) stays in L1; each output still gets its products in k order */
        for (int64_t k = 0; k < K; k++) {
            const __m512 w = _mm512_set1_ps(scale * xt[k]);
            const int64_t r = k * N;
            int64_t o = 0;
            for (; o + 16 <= N; o += 16)
                _mm512_storeu_ps(yt + o, _mm512_add_ps(_mm512_loadu_ps(yt + o), _mm512_mul_ps(w, load16(wt, wt_type, r + o, all))));
            if (tail)
                _mm512_mask_storeu_ps(yt + o, tail, _mm512_add_ps(_mm512_maskz_loadu_ps(tail, yt + o), _mm512_mul_ps(w, load16(wt, wt_type, r + o, tail))));
        }
    }
}
#else
void mxl_cpu_lowrank_acc_avx512(const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N, float scale,
                                float *y) {
    mxl_cpu_lowrank_acc_ref(x, n, K, wt, wt_type, N, scale, y);
}
#endif
