/* dense_avx512.c - AVX-512 prefill micro-kernel for dense weights (F32, F16, BF16): 4 weight rows
 * x 4 tokens, 16 zmm accumulators, 16 columns per step; each weight vector is loaded (and
 * converted) once for four tokens and each activation vector once for four rows. Float path:
 * differs from the reference only by f32 summation order. Call only on AVX-512 F/BW/VL CPUs
 * (the dispatcher uses it at the AVX-512 VNNI level, which implies them). */
#include "backends/cpu/dense.h"

#include "backends/cpu/quant_gguf.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

AVX512 static inline __m512 load16(mxl_dtype t, const void *w, int64_t i) {
    if (t == MXL_DTYPE_F32) return _mm512_loadu_ps((const float *)w + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i));
    if (t == MXL_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AVX512 __attribute__((always_inline)) static inline void gemm4x4_t(mxl_dtype t, int64_t n,
                                                                  const void *w, size_t wrb,
                                                                  const float *x, int64_t xs,
                                                                  float *y, int64_t ys) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) acc[r][k] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 xv[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) xv[k] = _mm512_loadu_ps(x + k * xs + i);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            __m512 wv = load16(t, (const char *)w + r * wrb, i);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) acc[r][k] = _mm512_fmadd_ps(wv, xv[k], acc[r][k]);
        }
    }
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < 4; k++) {
            float s = _mm512_reduce_add_ps(acc[r][k]);
            for (int64_t j = i; j < n; j++)
                s += mxl_dense_elem(t, (const char *)w + r * wrb, j) * x[k * xs + j];
            y[k * ys + r] = s;
        }
}

AVX512 static void g_f32(int64_t n, const void *w, size_t wrb, const float *x, int64_t xs, float *y, int64_t ys) {
    gemm4x4_t(MXL_DTYPE_F32, n, w, wrb, x, xs, y, ys);
}
AVX512 static void g_f16(int64_t n, const void *w, size_t wrb, const float *x, int64_t xs, float *y, int64_t ys) {
    gemm4x4_t(MXL_DTYPE_F16, n, w, wrb, x, xs, y, ys);
}
AVX512 static void g_bf16(int64_t n, const void *w, size_t wrb, const float *x, int64_t xs, float *y, int64_t ys) {
    gemm4x4_t(MXL_DTYPE_BF16, n, w, wrb, x, xs, y, ys);
}

mxl_dense_gemm4x4_fn mxl_dense_gemm4x4_avx512_get(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_F32: return g_f32;
    case MXL_DTYPE_F16: return g_f16;
    case MXL_DTYPE_BF16: return g_bf16;
    default: return 0;
    }
}
#else
mxl_dense_gemm4x4_fn mxl_dense_gemm4x4_avx512_get(mxl_dtype t) { (void)t; return 0; }
#endif
