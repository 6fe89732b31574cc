/* dense_avx2.c - AVX2+FMA(+F16C) dense dot products (dense.h): four independent 8-lane FMA
 * chains (32 elements per step) to hide FMA latency, scalar tail. */
#include "backends/cpu/dense.h"

#include "backends/cpu/quant_gguf.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
AVX2 static inline __m256 load8(mxl_dtype t, const void *w, int64_t i) {
    if (t == MXL_DTYPE_F32) return _mm256_loadu_ps((const float *)w + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (t == MXL_DTYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
AVX2 static inline float dot_t(mxl_dtype t, int64_t n, const void *w, const float *x) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load8(t, w, i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(load8(t, w, i + 8), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(load8(t, w, i + 16), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(load8(t, w, i + 24), _mm256_loadu_ps(x + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load8(t, w, i), _mm256_loadu_ps(x + i), a0);
    float acc = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) acc += mxl_dense_elem(t, w, i) * x[i];
    return acc;
}
AVX2 static float dot_f32(int64_t n, const void *w, const float *x) { return dot_t(MXL_DTYPE_F32, n, w, x); }
AVX2 static float dot_f16(int64_t n, const void *w, const float *x) { return dot_t(MXL_DTYPE_F16, n, w, x); }
AVX2 static float dot_bf16(int64_t n, const void *w, const float *x) { return dot_t(MXL_DTYPE_BF16, n, w, x); }

AVX2 static inline void dot4_t(mxl_dtype t, int64_t n, const void *w, const float *x, int64_t xs,
                               float *out) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 wv = load8(t, w, i);
        a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + xs + i), a1);
        a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + 2 * xs + i), a2);
        a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + 3 * xs + i), a3);
    }
    out[0] = hsum_ps(a0), out[1] = hsum_ps(a1), out[2] = hsum_ps(a2), out[3] = hsum_ps(a3);
    for (; i < n; i++) {
        float wi = mxl_dense_elem(t, w, i);
        for (int k = 0; k < 4; k++) out[k] += wi * x[k * xs + i];
    }
}
AVX2 static void dot4_f32(int64_t n, const void *w, const float *x, int64_t xs, float *o) { dot4_t(MXL_DTYPE_F32, n, w, x, xs, o); }
AVX2 static void dot4_f16(int64_t n, const void *w, const float *x, int64_t xs, float *o) { dot4_t(MXL_DTYPE_F16, n, w, x, xs, o); }
AVX2 static void dot4_bf16(int64_t n, const void *w, const float *x, int64_t xs, float *o) { dot4_t(MXL_DTYPE_BF16, n, w, x, xs, o); }

mxl_dense_dot4_fn mxl_dense_dot4_avx2_get(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_F32: return dot4_f32;
    case MXL_DTYPE_F16: return dot4_f16;
    case MXL_DTYPE_BF16: return dot4_bf16;
    default: return 0;
    }
}

mxl_dense_dot_fn mxl_dense_dot_avx2_get(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_F32: return dot_f32;
    case MXL_DTYPE_F16: return dot_f16;
    case MXL_DTYPE_BF16: return dot_bf16;
    default: return 0;
    }
}
#else
/* not x86-64: no AVX2 variants, callers use the references */
mxl_dense_dot4_fn mxl_dense_dot4_avx2_get(mxl_dtype t) { (void)t; return 0; }
mxl_dense_dot_fn mxl_dense_dot_avx2_get(mxl_dtype t) { (void)t; return 0; }
#endif
