/* lowrank_avx512.c - the low-rank up-projection (lowrank.h) on AVX-512: blocks of 64 outputs (16 with
 * a masked tail) held in registers over the K rows of Wt (F16 / BF16 rows widened exactly to f32);
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

/* outputs [o, o + 16 * NV) of token t (lanes m of the last vector): the sums stay in NV registers
 * over the K rows, so y is read and written once per output instead of once per row; the rows of
 * the next block are prefetched as this one runs (Wt streams from memory in a decode step) */
#define BLOCK_FN(NV)                                                                                             \
    AVX512 __attribute__((always_inline)) static inline void block##NV(const float *ws, int64_t K, const void *wt,  \
                                                                       mxl_dtype t, int64_t N, int64_t o,       \
                                                                       __mmask16 m, float *y) {                 \
        const size_t eb = t == MXL_DTYPE_F32 ? 4 : 2;                                                         \
        __m512 acc[NV];                                                                                       \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                                                  \
            acc[v] = _mm512_maskz_loadu_ps(v == NV - 1 ? m : 0xffff, y + o + 16 * v);                         \
        for (int64_t k = 0; k < K; k++) {                                                                     \
            const __m512 w = _mm512_set1_ps(ws[k]);                                                           \
            _mm_prefetch((const char *)wt + (size_t)(k * N + o + 16 * NV * 4) * eb, _MM_HINT_T0);             \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                                              \
                acc[v] = _mm512_add_ps(acc[v], _mm512_mul_ps(w, load16(wt, t, k * N + o + 16 * v, v == NV - 1 ? m : 0xffff))); \
        }                                                                                                     \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                                                  \
            _mm512_mask_storeu_ps(y + o + 16 * v, v == NV - 1 ? m : 0xffff, acc[v]);                          \
    }
BLOCK_FN(4)
BLOCK_FN(1)

AVX512 void mxl_cpu_lowrank_acc_avx512(const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N, float scale,
                                       float *y) {
    float ws[256];
    for (int64_t t = 0; t < n; t++) {
        float *yt = y + t * N;
        const float *xt = x + t * K;
        for (int64_t k0 = 0; k0 < K; k0 += 256) { /* (ranks past 256 in slices: the same k order) */
            const int64_t kn = K - k0 < 256 ? K - k0 : 256;
            for (int64_t k = 0; k < kn; k++) ws[k] = scale * xt[k0 + k];
            const void *w0 = (const char *)wt + (size_t)(k0 * N) * (wt_type == MXL_DTYPE_F32 ? 4 : 2);
            int64_t o = 0;
            for (; o + 64 <= N; o += 64) block4(ws, kn, w0, wt_type, N, o, 0xffff, yt);
            for (; o < N; o += 16) block1(ws, kn, w0, wt_type, N, o, N - o >= 16 ? 0xffff : (__mmask16)((1u << (N - o)) - 1), yt);
        }
    }
}
#else
void mxl_cpu_lowrank_acc_avx512(const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N, float scale,
                                float *y) {
    mxl_cpu_lowrank_acc_ref(x, n, K, wt, wt_type, N, scale, y);
}
#endif
