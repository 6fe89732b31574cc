/* kv_quant.c - f16 / int8 KV-cache kernels (kv_quant.h): plain C references and AVX2 variants
 * (registered in the kernel table by kernels_avx2.c). */
#include "backends/cpu/kv_quant.h"

#include <math.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/quant_gguf.h"

void mxl_kv_quantize_i8(const float *x, int64_t n, int64_t group, int8_t *q, float *scales) {
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        float amax = 0.0f;
        for (int64_t i = g0; i < g0 + group; i++) {
            float a = fabsf(x[i]);
            if (a > amax) amax = a;
        }
        float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
        scales[g0 / group] = d;
        for (int64_t i = g0; i < g0 + group; i++) {
            float r = roundf(x[i] * id); /* |x * id| <= 127 up to rounding: clamp anyway */
            q[i] = (int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
        }
    }
}

void mxl_kv_dequantize_i8(const int8_t *q, const float *scales, int64_t n, int64_t group, float *x) {
    for (int64_t i = 0; i < n; i++) x[i] = scales[i / group] * (float)q[i];
}

float mxl_kv_dot_f16_ref(int64_t n, const uint16_t *k, const float *x) {
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++) acc += mxl_h2f(k[i]) * x[i];
    return acc;
}

/* Per group: the int8 dot with x in index order, then scaled into the total. */
float mxl_kv_dot_i8_ref(int64_t n, int64_t group, const int8_t *k, const float *scales, const float *x) {
    float acc = 0.0f;
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        float s = 0.0f;
        for (int64_t i = g0; i < g0 + group; i++) s += (float)k[i] * x[i];
        acc += scales[g0 / group] * s;
    }
    return acc;
}

void mxl_kv_axpy_f16_ref(int64_t n, float w, const uint16_t *v, float *o) {
    for (int64_t i = 0; i < n; i++) o[i] += w * mxl_h2f(v[i]);
}

void mxl_kv_axpy_i8_ref(int64_t n, int64_t group, float w, const int8_t *v, const float *scales, float *o) {
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        float ws = w * scales[g0 / group];
        for (int64_t i = g0; i < g0 + group; i++) o[i] += ws * (float)v[i];
    }
}

void mxl_kv_store_f16_ref(int64_t n, const float *x, uint16_t *h) {
    for (int64_t i = 0; i < n; i++) h[i] = mxl_f32_to_f16(x[i]);
}

#if defined(__x86_64__)
#include <immintrin.h>

#include "backends/cpu/reduce_avx2.h"
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* 8 int8 values -> 8 floats. */
AVX2 static inline __m256 i8x8(const int8_t *p) {
    int64_t raw;
    memcpy(&raw, p, 8);
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(raw)));
}

/* Two 8-lane FMA chains over 16-element steps, then an 8-element step and a scalar tail. */
AVX2 float mxl_kv_dot_f16_avx2(int64_t n, const uint16_t *k, const float *x) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + i))), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + i + 8))), _mm256_loadu_ps(x + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + i))), _mm256_loadu_ps(x + i), a0);
    float acc = mxl_hsum8_avx2(_mm256_add_ps(a0, a1));
    for (; i < n; i++) acc += mxl_h2f(k[i]) * x[i];
    return acc;
}

/* Per group: 8-lane FMA over the int8 values, horizontal sum plus scalar tail, scaled into an
 * f32 total (group sums stay separate because each has its own scale). */
AVX2 float mxl_kv_dot_i8_avx2(int64_t n, int64_t group, const int8_t *k, const float *scales, const float *x) {
    float acc = 0.0f;
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        __m256 a = _mm256_setzero_ps();
        int64_t i = g0, end = g0 + group;
        for (; i + 8 <= end; i += 8) a = _mm256_fmadd_ps(i8x8(k + i), _mm256_loadu_ps(x + i), a);
        float s = mxl_hsum8_avx2(a);
        for (; i < end; i++) s += (float)k[i] * x[i];
        acc += scales[g0 / group] * s;
    }
    return acc;
}

AVX2 void mxl_kv_axpy_f16_avx2(int64_t n, float w, const uint16_t *v, float *o) {
    __m256 wv = _mm256_set1_ps(w);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(wv, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i))), _mm256_loadu_ps(o + i)));
    for (; i < n; i++) o[i] += w * mxl_h2f(v[i]);
}

AVX2 void mxl_kv_axpy_i8_avx2(int64_t n, int64_t group, float w, const int8_t *v, const float *scales, float *o) {
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        float ws = w * scales[g0 / group];
        __m256 wv = _mm256_set1_ps(ws);
        int64_t i = g0, end = g0 + group;
        for (; i + 8 <= end; i += 8) _mm256_storeu_ps(o + i, _mm256_fmadd_ps(wv, i8x8(v + i), _mm256_loadu_ps(o + i)));
        for (; i < end; i++) o[i] += ws * (float)v[i];
    }
}
/* F16C conversion rounds to nearest even like mxl_f32_to_f16; a group of 8 holding a NaN (whose
 * payload the instruction would keep) goes through the scalar conversion instead */
AVX2 void mxl_kv_store_f16_avx2(int64_t n, const float *x, uint16_t *h) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            mxl_kv_store_f16_ref(8, x + i, h + i);
            continue;
        }
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    mxl_kv_store_f16_ref(n - i, x + i, h + i);
}
#endif

mxl_kv_kernels mxl_kv_kernels_get(mxl_cpu_isa isa) { return mxl_cpu_kern_at(isa)->kv; }
