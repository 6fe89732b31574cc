/* dense_avx2.c - AVX2+FMA(+F16C) dense dot products (dense.h): four independent 8-lane FMA
 * chains (32 elements per step) to hide FMA latency, scalar tail; the multi-token entry runs the
 * same per-token operations (bit-identical results, see dotn_t). */
#include "backends/cpu/dense.h"

#include "backends/cpu/quant_gguf.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backends/cpu/reduce_avx2.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline __m256 load8(mxl_dtype t, const void *w, int64_t i) {
    if (t == MXL_DTYPE_F32) return _mm256_loadu_ps((const float *)w + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (t == MXL_DTYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
/* nt tokens (1 or 2, a constant after inlining) against one row. Per token: four 8-lane FMA
 * chains over 32-element steps, an 8-element remainder into chain 0, hsum((a0+a1)+(a2+a3)), then
 * the scalar tail in index order - the same operations whatever nt, so the 4-token entry (two
 * 2-token passes; four tokens x four chains would not fit the 16 ymm registers) gives each
 * token the 1-token dot's bits. */
AVX2 __attribute__((always_inline)) static inline void dotn_t(mxl_dtype t, int nt, int64_t n,
                                                              const void *w, const float *x,
                                                              int64_t xs, float *out) {
    __m256 a[2][4];
#pragma GCC unroll 2
    for (int k = 0; k < nt; k++) a[k][0] = a[k][1] = a[k][2] = a[k][3] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 w0 = load8(t, w, i), w1 = load8(t, w, i + 8);
        __m256 w2 = load8(t, w, i + 16), w3 = load8(t, w, i + 24);
#pragma GCC unroll 2
        for (int k = 0; k < nt; k++) {
            const float *xk = x + k * xs + i;
            a[k][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xk), a[k][0]);
            a[k][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xk + 8), a[k][1]);
            a[k][2] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xk + 16), a[k][2]);
            a[k][3] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xk + 24), a[k][3]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        __m256 w0 = load8(t, w, i);
#pragma GCC unroll 2
        for (int k = 0; k < nt; k++) a[k][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + k * xs + i), a[k][0]);
    }
    for (int k = 0; k < nt; k++) {
        float acc = mxl_hsum8_avx2(_mm256_add_ps(_mm256_add_ps(a[k][0], a[k][1]), _mm256_add_ps(a[k][2], a[k][3])));
        for (int64_t j = i; j < n; j++) acc += mxl_dense_elem(t, w, j) * x[k * xs + j];
        out[k] = acc;
    }
}
AVX2 static float dot_f32(int64_t n, const void *w, const float *x) {
    float o;
    dotn_t(MXL_DTYPE_F32, 1, n, w, x, 0, &o);
    return o;
}
AVX2 static float dot_f16(int64_t n, const void *w, const float *x) {
    float o;
    dotn_t(MXL_DTYPE_F16, 1, n, w, x, 0, &o);
    return o;
}
AVX2 static float dot_bf16(int64_t n, const void *w, const float *x) {
    float o;
    dotn_t(MXL_DTYPE_BF16, 1, n, w, x, 0, &o);
    return o;
}

AVX2 static void dot4_f32(int64_t n, const void *w, const float *x, int64_t xs, float *o) {
    dotn_t(MXL_DTYPE_F32, 2, n, w, x, xs, o);
    dotn_t(MXL_DTYPE_F32, 2, n, w, x + 2 * xs, xs, o + 2);
}
AVX2 static void dot4_f16(int64_t n, const void *w, const float *x, int64_t xs, float *o) {
    dotn_t(MXL_DTYPE_F16, 2, n, w, x, xs, o);
    dotn_t(MXL_DTYPE_F16, 2, n, w, x + 2 * xs, xs, o + 2);
}
AVX2 static void dot4_bf16(int64_t n, const void *w, const float *x, int64_t xs, float *o) {
    dotn_t(MXL_DTYPE_BF16, 2, n, w, x, xs, o);
    dotn_t(MXL_DTYPE_BF16, 2, n, w, x + 2 * xs, xs, o + 2);
}

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
