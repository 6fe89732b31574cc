/* lowrank_avx512.c - the low-rank up-projection (lowrank.h) on AVX-512: 64 outputs held in four
 * zmm accumulators while the K rows of Wt go by (F16 / BF16 rows widened exactly to f32), then 16
 * at a time with a masked tail; each product rounded before it is added (no FMA), in k order: the
 * reference's bits. */
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
    for (int64_t t = 0; t < n; t++) {
        float *yt = y + t * N;
        const float *xt = x + t * K;
        int64_t o = 0;
        for (; o + 64 <= N; o += 64) {
            __m512 a0 = _mm512_loadu_ps(yt + o), a1 = _mm512_loadu_ps(yt + o + 16), a2 = _mm512_loadu_ps(yt + o + 32),
                   a3 = _mm512_loadu_ps(yt + o + 48);
            for (int64_t k = 0; k < K; k++) {
                const __m512 w = _mm512_set1_ps(scale * xt[k]);
                const int64_t r = k * N + o;
                a0 = _mm512_add_ps(a0, _mm512_mul_ps(w, load16(wt, wt_type, r, all)));
                a1 = _mm512_add_ps(a1, _mm512_mul_ps(w, load16(wt, wt_type, r + 16, all)));
                a2 = _mm512_add_ps(a2, _mm512_mul_ps(w, load16(wt, wt_type, r + 32, all)));
                a3 = _mm512_add_ps(a3, _mm512_mul_ps(w, load16(wt, wt_type, r + 48, all)));
            }
            _mm512_storeu_ps(yt + o, a0), _mm512_storeu_ps(yt + o + 16, a1);
            _mm512_storeu_ps(yt + o + 32, a2), _mm512_storeu_ps(yt + o + 48, a3);
        }
        for (; o < N; o += 16) {
            const __mmask16 m = N - o >= 16 ? all : (__mmask16)((1u << (N - o)) - 1);
            __m512 a = _mm512_maskz_loadu_ps(m, yt + o);
            for (int64_t k = 0; k < K; k++)
                a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_set1_ps(scale * xt[k]), load16(wt, wt_type, k * N + o, m)));
            _mm512_mask_storeu_ps(yt + o, m, a);
        }
    }
}
#else
void mxl_cpu_lowrank_acc_avx512(const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N, float scale,
                                float *y) {
    mxl_cpu_lowrank_acc_ref(x, n, K, wt, wt_type, N, scale, y);
}
#endif
