/* activation_avx2.c - AVX2 forms of the activations (activation.h), 8 lanes, the tail through a
 * zero-padded copy: the operations of activation_avx512.c in the same order (vexp_avx2.h), so the
 * two give the same bits. SiLU x / (1 + e^-x); GELU-tanh with tanh(u) = 1 - 2 / (e^(2u) + 1);
 * GELU-erf by A&S 7.1.26; ReLU and ReLU^2 exactly. Exponent arguments clamped to [-87, 88]. */
#include "backends/cpu/activation.h"

#include <string.h>

#include "core/status.h"

#if defined(__x86_64__)
#include "backends/cpu/vexp_avx2.h"

AVX2 static inline __m256 vexp(__m256 y) {
    return mxl_exp256_ps(_mm256_min_ps(_mm256_max_ps(y, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f)));
}

AVX2 static inline __m256 act8(mxl_act a, __m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    switch (a) {
    case MXL_ACT_SILU: return _mm256_div_ps(x, _mm256_add_ps(one, vexp(_mm256_sub_ps(zero, x))));
    case MXL_ACT_GELU_TANH: {
        __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.79788456080286536f), _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
        __m256 t = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(vexp(_mm256_add_ps(u, u)), one)));
        return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(one, t));
    }
    case MXL_ACT_GELU_ERF: return mxl_gelu_erf256_ps(x);
    case MXL_ACT_RELU2: {
        __m256 r = _mm256_max_ps(x, zero);
        return _mm256_mul_ps(r, r);
    }
    case MXL_ACT_RELU: return _mm256_max_ps(x, zero);
    }
    return x;
}

/* out[i] = act(gate[i]) (* up[i] when up) */
AVX2 static void run(mxl_act a, const float *gate, const float *up, int64_t n, float *out) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = act8(a, _mm256_loadu_ps(gate + i));
        _mm256_storeu_ps(out + i, up ? _mm256_mul_ps(g, _mm256_loadu_ps(up + i)) : g);
    }
    if (i < n) {
        float tg[8] = {0}, tu[8] = {0}, to[8];
        memcpy(tg, gate + i, (size_t)(n - i) * sizeof(float));
        if (up) memcpy(tu, up + i, (size_t)(n - i) * sizeof(float));
        __m256 g = act8(a, _mm256_loadu_ps(tg));
        _mm256_storeu_ps(to, up ? _mm256_mul_ps(g, _mm256_loadu_ps(tu)) : g);
        memcpy(out + i, to, (size_t)(n - i) * sizeof(float));
    }
}

void mxl_cpu_act_avx2(mxl_act a, const float *x, int64_t n, float *y) { run(a, x, NULL, n, y); }
void mxl_cpu_glu_avx2(mxl_act a, const float *gate, const float *up, int64_t n, float *out) { run(a, gate, up, n, out); }
#else
void mxl_cpu_act_avx2(mxl_act a, const float *x, int64_t n, float *y) { mxl_cpu_act_ref(a, x, n, y); }
void mxl_cpu_glu_avx2(mxl_act a, const float *gate, const float *up, int64_t n, float *out) {
    mxl_cpu_glu_ref(a, gate, up, n, out);
}
#endif
