/* vexp_avx512.h - vector exp and GELU-erf for the AVX-512 kernels (gemm_f32_avx512.c epilogue,
 * activation_avx512.c, attention_enc_avx512.c softmax). Include only from x86-64 files. */
#ifndef MXL_BACKENDS_CPU_VEXP_AVX512_H
#define MXL_BACKENDS_CPU_VEXP_AVX512_H

#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

/* exp(y) for y in [-87, 88]: Cephes expf's range reduction and polynomial (about 1 ulp), with
 * the 2^n scaling by vscalefps. */
AVX512 static inline __m512 mxl_exp512_ps(__m512 y) {
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(y, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), y);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* GELU(x) = 0.5 x (1 + erf(x / sqrt 2)), erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7),
 * odd-symmetric; |u| clamped at 5 where erf is 1 to f32 precision. */
AVX512 static inline __m512 mxl_gelu_erf512_ps(__m512 x) {
    __m512 u = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));
    __m512 a = _mm512_min_ps(_mm512_abs_ps(u), _mm512_set1_ps(5.0f));
    __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(a, _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1.0f)));
    __m512 p = _mm512_set1_ps(1.061405429f);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
    p = _mm512_mul_ps(p, t);
    __m512 e = _mm512_fnmadd_ps(p, mxl_exp512_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a)), _mm512_set1_ps(1.0f));
    /* erf(u) = sign(u) * e: 1 + erf = 1 + e or 1 - e */
    __mmask16 neg = _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_LT_OQ);
    __m512 onep = _mm512_mask_sub_ps(_mm512_add_ps(_mm512_set1_ps(1.0f), e), neg, _mm512_set1_ps(1.0f), e);
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), onep);
}

#endif
