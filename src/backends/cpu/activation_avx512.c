/* activation_avx512.c - AVX-512 forms of the activations (activation.h), 16 lanes with a masked
 * tail: SiLU x / (1 + e^-x); GELU-tanh with tanh(u) = 1 - 2 / (e^(2u) + 1); GELU-erf with the
 * Abramowitz & Stegun 7.1.26 erf (as gemm_f32_avx512.c); ReLU and ReLU^2 exactly. Exponent
 * arguments are clamped to [-87, 88], where the float results are already saturated. */
#include "backends/cpu/activation.h"

#include "core/status.h"

#if defined(__x86_64__)
#include "backends/cpu/vexp_avx512.h"

AVX512 static inline __m512 vexp(__m512 y) {
    return mxl_exp512_ps(_mm512_min_ps(_mm512_max_ps(y, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f)));
}

AVX512 static inline __m512 act16(mxl_act a, __m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    switch (a) {
    case MXL_ACT_SILU: return _mm512_div_ps(x, _mm512_add_ps(one, vexp(_mm512_sub_ps(zero, x))));
    case MXL_ACT_GELU_TANH: {
        __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
        __m512 u = _mm512_mul_ps(_mm512_set1_ps(0.79788456080286536f), _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, x));
        __m512 t = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(vexp(_mm512_add_ps(u, u)), one)));
        return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(one, t));
    }
    case MXL_ACT_GELU_ERF: return mxl_gelu_erf512_ps(x);
    case MXL_ACT_RELU2: {
        __m512 r = _mm512_max_ps(x, zero);
        return _mm512_mul_ps(r, r);
    }
    case MXL_ACT_RELU: return _mm512_max_ps(x, zero);
    }
    return x;
}

AVX512 void mxl_cpu_act_avx512(mxl_act a, const float *x, int64_t n, float *y) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 mk = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, mk, act16(a, _mm512_maskz_loadu_ps(mk, x + i)));
    }
}

AVX512 void mxl_cpu_glu_avx512(mxl_act a, const float *gate, const float *up, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 mk = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 g = act16(a, _mm512_maskz_loadu_ps(mk, gate + i));
        _mm512_mask_storeu_ps(out + i, mk, _mm512_mul_ps(g, _mm512_maskz_loadu_ps(mk, up + i)));
    }
}
#else
void mxl_cpu_act_avx512(mxl_act a, const float *x, int64_t n, float *y) { mxl_cpu_act_ref(a, x, n, y); }
void mxl_cpu_glu_avx512(mxl_act a, const float *gate, const float *up, int64_t n, float *out) {
    mxl_cpu_glu_ref(a, gate, up, n, out);
}
#endif
