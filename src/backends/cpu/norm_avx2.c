/* norm_avx2.c - AVX2 RMSNorm / LayerNorm (norm.h): the AVX-512 forms (norm_avx512.c) on 8 float
 * or 4 double lanes - the double sums kept as the AVX-512 form's two 8-lane vectors (here four of
 * 4 lanes), reduced in its order, the tail of a 16-element step zero - and the same float
 * operations per element (multiply, multiply, add; no fused multiply-add), so the two give the
 * same bits. */
#include "backends/cpu/norm.h"

#include <math.h>
#include <string.h>

#include "core/status.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))

/* sum of x (what = 0) or of (x - mean)^2 (what = 1) or of x^2 (what = 2), in double: 16 elements
 * per step, b[q] holding lanes 4 q .. 4 q + 3 of a step (AVX-512: a0 = b0:b1, a1 = b2:b3), the
 * lanes past n contributing +0; then ((a0 + a1)'s upper half + lower half), its halves, its two
 * lanes, as _mm512_reduce_add_pd */
AVX2 static double dsum(const float *x, int64_t n, int what, double mean) {
    __m256d b[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    const __m256d m = _mm256_set1_pd(mean);
    float t[16]; /* a last partial step's elements, zero-padded */
    for (int64_t i = 0; i < n; i += 16) {
        const int64_t left = n - i < 16 ? n - i : 16;
        const float *xs = x + i;
        if (left < 16) {
            memset(t, 0, sizeof t);
            memcpy(t, xs, (size_t)left * sizeof(float));
            xs = t;
        }
        for (int q = 0; q < 4; q++) {
            __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(xs + 4 * q));
            if (what == 1) {
                v = _mm256_sub_pd(v, m);
                if (4 * q + 4 > left) { /* (0 - mean)^2 must not count */
                    const __m256d idx = _mm256_setr_pd(4 * q, 4 * q + 1, 4 * q + 2, 4 * q + 3);
                    v = _mm256_and_pd(v, _mm256_cmp_pd(idx, _mm256_set1_pd((double)left), _CMP_LT_OQ));
                }
            }
            if (what >= 1) v = _mm256_mul_pd(v, v);
            b[q] = _mm256_add_pd(b[q], v);
        }
    }
    const __m256d lo = _mm256_add_pd(b[0], b[2]), hi = _mm256_add_pd(b[1], b[3]); /* a0 + a1 */
    const __m256d t3 = _mm256_add_pd(hi, lo);
    const __m128d t6 = _mm_add_pd(_mm256_extractf128_pd(t3, 1), _mm256_castpd256_pd128(t3));
    return _mm_cvtsd_f64(t6) + _mm_cvtsd_f64(_mm_unpackhi_pd(t6, t6));
}

AVX2 void mxl_cpu_rmsnorm_avx2(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y) {
    float scale = (float)(1.0 / sqrt(dsum(x, n, 2, 0.0) / (double)n + (double)eps));
    __m256 vs = _mm256_set1_ps(scale), one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = w ? _mm256_loadu_ps(w + i) : one;
        if (w && plus_one) g = _mm256_add_ps(one, g);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), g));
    }
    for (; i < n; i++) {
        float g = w ? (plus_one ? 1.0f + w[i] : w[i]) : 1.0f;
        y[i] = x[i] * scale * g;
    }
}

AVX2 void mxl_cpu_layernorm_avx2(const float *x, const float *w, const float *b, int64_t n, float eps, float *y) {
    double mean = dsum(x, n, 0, 0.0) / (double)n;
    float inv = (float)(1.0 / sqrt(dsum(x, n, 1, mean) / (double)n + (double)eps));
    const float mf = (float)mean;
    __m256 vm = _mm256_set1_ps(mf), vi = _mm256_set1_ps(inv);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vi);
        if (w) t = _mm256_mul_ps(t, _mm256_loadu_ps(w + i));
        if (b) t = _mm256_add_ps(t, _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(y + i, t);
    }
    for (; i < n; i++) {
        float t = (x[i] - mf) * inv;
        if (w) t *= w[i];
        if (b) t += b[i];
        y[i] = t;
    }
}
#else
void mxl_cpu_rmsnorm_avx2(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y) {
    mxl_cpu_rmsnorm_ref(x, w, n, eps, plus_one, y);
}
void mxl_cpu_layernorm_avx2(const float *x, const float *w, const float *b, int64_t n, float eps, float *y) {
    mxl_cpu_layernorm_ref(x, w, b, n, eps, y);
}
#endif
