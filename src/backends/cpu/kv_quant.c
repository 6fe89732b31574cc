/* kv_quant.c - f16 / int8 / block-format (ggml's and TurboQuant's) KV-cache kernels (kv_quant.h): the block
 * quantizers (ggml-quants.c's quantize_row_*_ref, rewritten), plain C references and AVX2
 * variants (registered in the kernel table by kernels_avx2.c). */
#include "backends/cpu/kv_quant.h"

#include <math.h>
#include <string.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kv_turbo.h"
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

/* ---- ggml block formats ---- */

int mxl_kv_qfmt_of(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_Q8_0: return MXL_KV_Q8_0;
    case MXL_DTYPE_Q4_0: return MXL_KV_Q4_0;
    case MXL_DTYPE_Q4_1: return MXL_KV_Q4_1;
    case MXL_DTYPE_Q5_0: return MXL_KV_Q5_0;
    case MXL_DTYPE_Q5_1: return MXL_KV_Q5_1;
    case MXL_DTYPE_TURBO4: return MXL_KV_TURBO4;
    case MXL_DTYPE_TURBO3: return MXL_KV_TURBO3;
    default: return -1;
    }
}

mxl_dtype mxl_kv_qfmt_dtype(mxl_kv_qfmt f) {
    static const mxl_dtype t[MXL_KV_QFMT_COUNT] = {MXL_DTYPE_Q8_0, MXL_DTYPE_Q4_0, MXL_DTYPE_Q4_1, MXL_DTYPE_Q5_0,
                                                  MXL_DTYPE_Q5_1, MXL_DTYPE_TURBO4, MXL_DTYPE_TURBO3};
    return t[f];
}

/* The largest magnitude of x[0..32) and that element with its sign (the first of equal
 * magnitudes), as q4_0 / q5_0 / q8_0 look for it. */
static float amax32(const float *x, float *signed_max) {
    float amax = 0.0f, mx = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), mx = x[j];
    *signed_max = mx;
    return amax;
}

static void minmax32(const float *x, float *mn, float *mx) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < 32; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo, *mx = hi;
}

/* One block each. The products and sums are separate statements (no fused multiply-add: the
 * bits must be those of ggml's two roundings); the float -> integer conversions truncate, as
 * ggml's (int8_t) / (uint8_t) casts. */
static void quant_q8_0(const float *x, mxl_block_q8_0 *y) {
    float smax;
    const float d = amax32(x, &smax) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = mxl_f32_to_f16(d);
    for (int j = 0; j < 32; j++) {
        const float v = x[j] * id;
        y->qs[j] = (int8_t)roundf(v); /* |v| <= 127 up to rounding */
    }
}

/* q4_0 / q5_0: codes (x / d + half) truncated, capped at top, d = max / -half */
static void quant_sym(const float *x, int bits, float *dout, uint8_t *codes) {
    const float half = (float)(1 << (bits - 1));
    const int top = (1 << bits) - 1;
    float mx;
    amax32(x, &mx);
    const float d = mx / -half, id = d != 0.0f ? 1.0f / d : 0.0f;
    *dout = d;
    for (int j = 0; j < 32; j++) {
        const float v = x[j] * id, c = v + (half + 0.5f);
        const int8_t ci = (int8_t)c; /* c in [0.5, 2 half + 0.5]: truncation toward zero */
        codes[j] = (uint8_t)(ci > top ? top : ci);
    }
}

/* q4_1 / q5_1: codes ((x - min) / d + 0.5) truncated, d = (max - min) / (2^bits - 1); q4_1 caps
 * at 15 as ggml does (q5_1's cap is never reached: the largest code is 31.5 truncated) */
static void quant_asym(const float *x, int bits, float *dout, float *mout, uint8_t *codes) {
    float mn, mx;
    minmax32(x, &mn, &mx);
    const float d = (mx - mn) / (float)((1 << bits) - 1), id = d != 0.0f ? 1.0f / d : 0.0f;
    *dout = d, *mout = mn;
    for (int j = 0; j < 32; j++) {
        const float v = (x[j] - mn) * id, c = v + 0.5f;
        if (bits == 4) {
            const int8_t ci = (int8_t)c;
            codes[j] = (uint8_t)(ci > 15 ? 15 : ci);
        } else {
            codes[j] = (uint8_t)c;
        }
    }
}

/* codes j and j + 16 share byte j (low, high nibble); bit 4 of code j goes to bit j of qh */
static void pack_nibbles(const uint8_t *codes, uint8_t *qs) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((codes[j] & 0x0F) | ((codes[j + 16] & 0x0F) << 4));
}
static void pack_qh(const uint8_t *codes, uint8_t *qh4) {
    uint32_t qh = 0;
    for (int j = 0; j < 32; j++) qh |= (uint32_t)((codes[j] >> 4) & 1) << j;
    for (int b = 0; b < 4; b++) qh4[b] = (uint8_t)(qh >> (8 * b)); /* little-endian, as ggml's memcpy on x86 / ARM */
}

void mxl_kv_quantize_blocks(mxl_dtype t, const float *x, int64_t n, void *y) {
    MXL_ASSERT(n % 32 == 0);
    uint8_t codes[32];
    float d, m;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        switch (t) {
        case MXL_DTYPE_Q8_0: quant_q8_0(x, (mxl_block_q8_0 *)y + b); break;
        case MXL_DTYPE_Q4_0: {
            mxl_block_q4_0 *o = (mxl_block_q4_0 *)y + b;
            quant_sym(x, 4, &d, codes);
            o->d = mxl_f32_to_f16(d);
            pack_nibbles(codes, o->qs);
            break;
        }
        case MXL_DTYPE_Q5_0: {
            mxl_block_q5_0 *o = (mxl_block_q5_0 *)y + b;
            quant_sym(x, 5, &d, codes);
            o->d = mxl_f32_to_f16(d);
            pack_qh(codes, o->qh);
            pack_nibbles(codes, o->qs);
            break;
        }
        case MXL_DTYPE_Q4_1: {
            mxl_block_q4_1 *o = (mxl_block_q4_1 *)y + b;
            quant_asym(x, 4, &d, &m, codes);
            o->d = mxl_f32_to_f16(d), o->m = mxl_f32_to_f16(m);
            pack_nibbles(codes, o->qs);
            break;
        }
        case MXL_DTYPE_Q5_1: {
            mxl_block_q5_1 *o = (mxl_block_q5_1 *)y + b;
            quant_asym(x, 5, &d, &m, codes);
            o->d = mxl_f32_to_f16(d), o->m = mxl_f32_to_f16(m);
            pack_qh(codes, o->qh);
            pack_nibbles(codes, o->qs);
            break;
        }
        case MXL_DTYPE_TURBO4: mxl_kv_turbo_quantize32(t, x, (uint8_t *)y + b * 18); break;
        case MXL_DTYPE_TURBO3: mxl_kv_turbo_quantize32(t, x, (uint8_t *)y + b * 14); break;
        default: MXL_ASSERT(0 && "not a KV block format");
        }
    }
}

/* One block of 32 of any KV block format back to floats. */
static void deq32(mxl_dtype t, const uint8_t *p, float *v) {
    if (t == MXL_DTYPE_TURBO4 || t == MXL_DTYPE_TURBO3) mxl_kv_turbo_dequantize32(t, p, v);
    else mxl_dequant_row_ref(t, p, v, 32);
}

void mxl_kv_dequantize_blocks(mxl_dtype t, const void *y, int64_t n, float *x) {
    MXL_ASSERT(mxl_kv_qfmt_of(t) >= 0 && n % 32 == 0);
    const size_t bb = mxl_kv_offset_bytes(t, 32);
    for (int64_t b = 0; b < n / 32; b++) deq32(t, (const uint8_t *)y + b * bb, x + b * 32);
}

#define KV_Q_REF(name, T, BB)                                                                      \
    float mxl_kv_dot_##name##_ref(int64_t n, const void *k, const float *x) {                      \
        float acc = 0.0f, v[32];                                                                    \
        for (int64_t b = 0; b < n / 32; b++) {                                                      \
            deq32(T, (const uint8_t *)k + b * (BB), v);                                             \
            for (int j = 0; j < 32; j++) acc += v[j] * x[b * 32 + j];                              \
        }                                                                                           \
        return acc;                                                                                 \
    }                                                                                               \
    void mxl_kv_axpy_##name##_ref(int64_t n, float w, const void *vq, float *o) {                  \
        float v[32];                                                                                \
        for (int64_t b = 0; b < n / 32; b++) {                                                      \
            deq32(T, (const uint8_t *)vq + b * (BB), v);                                            \
            for (int j = 0; j < 32; j++) o[b * 32 + j] += w * v[j];                                \
        }                                                                                           \
    }
KV_Q_REF(q8_0, MXL_DTYPE_Q8_0, 34)
KV_Q_REF(q4_0, MXL_DTYPE_Q4_0, 18)
KV_Q_REF(q4_1, MXL_DTYPE_Q4_1, 20)
KV_Q_REF(q5_0, MXL_DTYPE_Q5_0, 22)
KV_Q_REF(q5_1, MXL_DTYPE_Q5_1, 24)
KV_Q_REF(turbo4, MXL_DTYPE_TURBO4, 18)
KV_Q_REF(turbo3, MXL_DTYPE_TURBO3, 14)
#undef KV_Q_REF

#if defined(__x86_64__)
#include <immintrin.h>

#include "backends/cpu/kv_quant_avx2.h"
#include "backends/cpu/reduce_avx2.h"

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
 * f32 total (group sums stay separate because each has its own scale). Groups of a multiple of 8
 * (the cache's 32): each group's 8-lane partial sums scaled into an 8-lane total by one FMA, a
 * single horizontal sum at the end. */
AVX2 float mxl_kv_dot_i8_avx2(int64_t n, int64_t group, const int8_t *k, const float *scales, const float *x) {
    if (group % 8 == 0) {
        __m256 tot = _mm256_setzero_ps();
        for (int64_t g0 = 0; g0 < n; g0 += group) {
            __m256 a = _mm256_setzero_ps();
            for (int64_t i = g0; i < g0 + group; i += 8) a = _mm256_fmadd_ps(i8x8(k + i), _mm256_loadu_ps(x + i), a);
            tot = _mm256_fmadd_ps(_mm256_set1_ps(scales[g0 / group]), a, tot);
        }
        return mxl_hsum8_avx2(tot);
    }
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

/* ---- ggml block formats on AVX2 ---- */

#define INLINE2 __attribute__((always_inline)) static inline

/* Two 8-lane FMA chains (elements 8i, i even / odd), summed at the end. */
AVX2 INLINE2 float dot_q_avx2(mxl_kv_qfmt f, int64_t n, const void *k, const float *x) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), v[4];
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        mxl_kv_deq32_avx2(f, (const uint8_t *)k + b * mxl_kv_qbytes[f], v);
        a0 = _mm256_fmadd_ps(v[0], _mm256_loadu_ps(x), a0);
        a1 = _mm256_fmadd_ps(v[1], _mm256_loadu_ps(x + 8), a1);
        a0 = _mm256_fmadd_ps(v[2], _mm256_loadu_ps(x + 16), a0);
        a1 = _mm256_fmadd_ps(v[3], _mm256_loadu_ps(x + 24), a1);
    }
    return mxl_hsum8_avx2(_mm256_add_ps(a0, a1));
}

AVX2 INLINE2 void axpy_q_avx2(mxl_kv_qfmt f, int64_t n, float w, const void *vq, float *o) {
    const __m256 wv = _mm256_set1_ps(w);
    __m256 v[4];
    for (int64_t b = 0; b < n / 32; b++, o += 32) {
        mxl_kv_deq32_avx2(f, (const uint8_t *)vq + b * mxl_kv_qbytes[f], v);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) _mm256_storeu_ps(o + 8 * i, _mm256_fmadd_ps(wv, v[i], _mm256_loadu_ps(o + 8 * i)));
    }
}

#define KV_Q_AVX2(name, F)                                                                                        \
    AVX2 float mxl_kv_dot_##name##_avx2(int64_t n, const void *k, const float *x) { return dot_q_avx2(F, n, k, x); } \
    AVX2 void mxl_kv_axpy_##name##_avx2(int64_t n, float w, const void *v, float *o) { axpy_q_avx2(F, n, w, v, o); }
KV_Q_AVX2(q8_0, MXL_KV_Q8_0)
KV_Q_AVX2(q4_0, MXL_KV_Q4_0)
KV_Q_AVX2(q4_1, MXL_KV_Q4_1)
KV_Q_AVX2(q5_0, MXL_KV_Q5_0)
KV_Q_AVX2(q5_1, MXL_KV_Q5_1)
KV_Q_AVX2(turbo4, MXL_KV_TURBO4)
KV_Q_AVX2(turbo3, MXL_KV_TURBO3)
#undef KV_Q_AVX2
#endif

mxl_kv_kernels mxl_kv_kernels_get(mxl_cpu_isa isa) { return mxl_cpu_kern_at(isa)->kv; }
