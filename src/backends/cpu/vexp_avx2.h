/* vexp_avx2.h - vector exp and GELU-erf for the AVX2 kernels (activation_avx2.c): the AVX-512
 * forms of vexp_avx512.h on 8 lanes, the same operations in the same order (the 2^n scaling by an
 * exponent-field add, exact where vscalefps is: n in [-126, 127], p in [0.5, 2)), so both give
 * the same bits. Include only from x86-64 files. */
#ifndef MXL_BACKENDS_CPU_VEXP_AVX2_H
#define MXL_BACKENDS_CPU_VEXP_AVX2_H

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* exp(y) for y in [-87, 88]: Cephes expf's range reduction and polynomial (about 1 ulp) */
AVX2 static inline __m256 mxl_exp256_ps(__m256 y) {
    __m256 n = _mm256_round_ps(_mm256_mul_ps(y, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), y);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n as a float (n + 127 in the exponent field), then one rounding of p * 2^n */
    const __m256 two_n = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(p, two_n);
}

/* GELU(x) = 0.5 x (1 + erf(x / sqrt 2)), erf by Abramowitz & Stegun 7.1.26, as mxl_gelu_erf512_ps */
AVX2 static inline __m256 mxl_gelu_erf256_ps(__m256 x) {
    __m256 u = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
    __m256 a = _mm256_min_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), u), _mm256_set1_ps(5.0f));
    __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(a, _mm256_set1_ps(0.3275911f), _mm256_set1_ps(1.0f)));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    p = _mm256_mul_ps(p, t);
    __m256 e = _mm256_fnmadd_ps(p, mxl_exp256_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), a), a)), _mm256_set1_ps(1.0f));
    /* erf(u) = sign(u) * e: 1 + erf = 1 + e or 1 - e */
    __m256 neg = _mm256_cmp_ps(u, _mm256_setzero_ps(), _CMP_LT_OQ);
    __m256 onep = _mm256_blendv_ps(_mm256_add_ps(_mm256_set1_ps(1.0f), e), _mm256_sub_ps(_mm256_set1_ps(1.0f), e), neg);
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), onep);
}

#endif
