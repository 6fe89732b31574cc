/* norm_avx512.c - AVX-512 RMSNorm / LayerNorm (norm.h): the references' double sums kept in two
 * vectors of eight lanes (16 floats per step, a masked tail), then the same float operations per
 * element as the reference (multiply, multiply, add; no fused multiply-add). */
#include "backends/cpu/norm.h"

#include <math.h>

#include "core/status.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))

AVX512 static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

/* sum of x (what = 0) or of (x - mean)^2 (what = 1) or of x^2 (what = 2), in double */
AVX512 static double dsum(const float *x, int64_t n, int what, double mean) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(), m = _mm512_set1_pd(mean);
    for (int64_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        if (what == 1) { /* masked-off lanes are zero; (0 - mean)^2 must not count */
            __mmask8 k0 = (__mmask8)(tail_mask(n - i) & 0xff), k1 = (__mmask8)(tail_mask(n - i) >> 8);
            lo = _mm512_maskz_sub_pd(k0, lo, m);
            hi = _mm512_maskz_sub_pd(k1, hi, m);
        }
        if (what >= 1) {
            lo = _mm512_mul_pd(lo, lo);
            hi = _mm512_mul_pd(hi, hi);
        }
        a0 = _mm512_add_pd(a0, lo);
        a1 = _mm512_add_pd(a1, hi);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
}

AVX512 void mxl_cpu_rmsnorm_avx512(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y) {
    float scale = (float)(1.0 / sqrt(dsum(x, n, 2, 0.0) / (double)n + (double)eps));
    __m512 vs = _mm512_set1_ps(scale), one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 mk = tail_mask(n - i);
        __m512 g = w ? _mm512_maskz_loadu_ps(mk, w + i) : one;
        if (w && plus_one) g = _mm512_add_ps(one, g);
        __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + i), vs), g);
        _mm512_mask_storeu_ps(y + i, mk, v);
    }
}

AVX512 void mxl_cpu_layernorm_avx512(const float *x, const float *w, const float *b, int64_t n, float eps, float *y) {
    double mean = dsum(x, n, 0, 0.0) / (double)n;
    float inv = (float)(1.0 / sqrt(dsum(x, n, 1, mean) / (double)n + (double)eps));
    __m512 vm = _mm512_set1_ps((float)mean), vi = _mm512_set1_ps(inv);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 mk = tail_mask(n - i);
        __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, x + i), vm), vi);
        if (w) t = _mm512_mul_ps(t, _mm512_maskz_loadu_ps(mk, w + i));
        if (b) t = _mm512_add_ps(t, _mm512_maskz_loadu_ps(mk, b + i));
        _mm512_mask_storeu_ps(y + i, mk, t);
    }
}
#else
void mxl_cpu_rmsnorm_avx512(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y) {
    mxl_cpu_rmsnorm_ref(x, w, n, eps, plus_one, y);
}
void mxl_cpu_layernorm_avx512(const float *x, const float *w, const float *b, int64_t n, float eps, float *y) {
    mxl_cpu_layernorm_ref(x, w, b, n, eps, y);
}
#endif
