/* kv_turbo.c - the TurboQuant KV blocks and the randomized Hadamard rotation (kv_turbo.h): plain C,
 * the reference every faster reader (kv_quant_avx2.h, attention_avx512.c) decodes the same as. */
#include "backends/cpu/kv_turbo.h"

#include <math.h>
#include <string.h>

#include "core/status.h"

/* scripts/gen_turbo_codebook.py: Lloyd-Max for (1 - x^2 / 32)^(29/2), 16 and 8 levels */
const float mxl_kv_turbo4_codebook[16] = {
    -0x1.484f96p+1f, -0x1.fabadcp+0f, -0x1.907e18p+0f, -0x1.390ffap+0f, -0x1.d7d77cp-1f, -0x1.49dc16p-1f,
    -0x1.868992p-2f, -0x1.02abf0p-3f, 0x1.02abf0p-3f,  0x1.868992p-2f,  0x1.49dc16p-1f,  0x1.d7d77cp-1f,
    0x1.390ffap+0f,  0x1.907e18p+0f,  0x1.fabadcp+0f,  0x1.484f96p+1f};
const float mxl_kv_turbo3_codebook[8] = {-0x1.09346cp+1f, -0x1.50a288p+0f, -0x1.7d99d0p-1f, -0x1.f07016p-3f,
                                         0x1.f07016p-3f,  0x1.7d99d0p-1f,  0x1.50a288p+0f,  0x1.09346cp+1f};
const uint8_t mxl_kv_turbo_signs[MXL_KV_TURBO_MAX_CHUNK / 8] = {
    0x5a, 0xc4, 0x63, 0xbb, 0x12, 0x49, 0xb8, 0x41, 0x9b, 0x9f, 0x3d, 0x8e, 0x58, 0xdb, 0x93, 0xb2,
    0x2c, 0x17, 0x3e, 0x6e, 0x17, 0x9d, 0x0f, 0x76, 0xe2, 0x78, 0xbd, 0xfc, 0x5d, 0x15, 0x4e, 0x02};

static void fwht(float *y, int64_t r) {
    for (int64_t h = 1; h < r; h <<= 1)
        for (int64_t i = 0; i < r; i += 2 * h)
            for (int64_t j = i; j < i + h; j++) {
                const float a = y[j], b = y[j + h];
                y[j] = a + b;
                y[j + h] = a - b;
            }
}

void mxl_kv_rotate_ref(float *x, int64_t n, int64_t chunk, bool inverse) {
    MXL_ASSERT(chunk > 1 && chunk <= MXL_KV_TURBO_MAX_CHUNK && (chunk & (chunk - 1)) == 0 && n % chunk == 0);
    const float scale = 1.0f / sqrtf((float)chunk);
    for (int64_t c0 = 0; c0 < n; c0 += chunk) {
        float *y = x + c0;
        if (!inverse)
            for (int64_t i = 0; i < chunk; i++)
                if (mxl_kv_turbo_signs[i >> 3] >> (i & 7) & 1) y[i] = -y[i];
        fwht(y, chunk);
        for (int64_t i = 0; i < chunk; i++) y[i] *= scale;
        if (inverse)
            for (int64_t i = 0; i < chunk; i++)
                if (mxl_kv_turbo_signs[i >> 3] >> (i & 7) & 1) y[i] = -y[i];
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

/* The same butterflies on 8-lane vectors (chunk >= 8): stages h = 1, 2, 4 inside each vector by
 * lane permutes, h >= 8 between vectors; every output is the reference's a + b or a - b of the
 * same operands, the sign flips and the scale the same single operations, so the bits are the
 * reference's. */
__attribute__((target("avx2,fma"))) void mxl_kv_rotate_avx2(float *x, int64_t n, int64_t chunk, bool inverse) {
    if (chunk < 8) {
        mxl_kv_rotate_ref(x, n, chunk, inverse);
        return;
    }
    MXL_ASSERT(chunk <= MXL_KV_TURBO_MAX_CHUNK && (chunk & (chunk - 1)) == 0 && n % chunk == 0);
    const __m256 scale = _mm256_set1_ps(1.0f / sqrtf((float)chunk));
    __m256 sg[MXL_KV_TURBO_MAX_CHUNK / 8]; /* -0.0 where the sign flips: an XOR */
    for (int64_t v = 0; v < chunk / 8; v++) {
        const uint8_t b = mxl_kv_turbo_signs[v];
        sg[v] = _mm256_castsi256_ps(_mm256_setr_epi32(b & 1 ? INT32_MIN : 0, b & 2 ? INT32_MIN : 0, b & 4 ? INT32_MIN : 0,
                                                      b & 8 ? INT32_MIN : 0, b & 16 ? INT32_MIN : 0, b & 32 ? INT32_MIN : 0,
                                                      b & 64 ? INT32_MIN : 0, b & 128 ? INT32_MIN : 0));
    }
    const __m256 neg1 = _mm256_castsi256_ps(_mm256_setr_epi32(0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN));
    const __m256 neg2 = _mm256_castsi256_ps(_mm256_setr_epi32(0, 0, INT32_MIN, INT32_MIN, 0, 0, INT32_MIN, INT32_MIN));
    const __m256 neg4 = _mm256_castsi256_ps(_mm256_setr_epi32(0, 0, 0, 0, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN));
    for (int64_t c0 = 0; c0 < n; c0 += chunk) {
        float *y = x + c0;
        __m256 r[MXL_KV_TURBO_MAX_CHUNK / 8];
        const int64_t nv = chunk / 8;
        for (int64_t v = 0; v < nv; v++) {
            r[v] = _mm256_loadu_ps(y + 8 * v);
            if (!inverse) r[v] = _mm256_xor_ps(r[v], sg[v]);
            /* h = 1: (a, b) -> (a + b, a - b) on lane pairs: partner + (self or -self) */
            __m256 p = _mm256_permute_ps(r[v], 0xB1);
            r[v] = _mm256_add_ps(_mm256_xor_ps(r[v], neg1), p);
            /* (lane 2i: a + b = b + a exactly; lane 2i + 1: p - self = a - b with p = a) */
            p = _mm256_permute_ps(r[v], 0x4E); /* h = 2 */
            r[v] = _mm256_add_ps(_mm256_xor_ps(r[v], neg2), p);
            p = _mm256_permute2f128_ps(r[v], r[v], 0x01); /* h = 4 */
            r[v] = _mm256_add_ps(_mm256_xor_ps(r[v], neg4), p);
        }
        for (int64_t h = 1; h < nv; h <<= 1)
            for (int64_t i = 0; i < nv; i += 2 * h)
                for (int64_t j = i; j < i + h; j++) {
                    const __m256 a = r[j], b = r[j + h];
                    r[j] = _mm256_add_ps(a, b);
                    r[j + h] = _mm256_sub_ps(a, b);
                }
        for (int64_t v = 0; v < nv; v++) {
            __m256 o = _mm256_mul_ps(r[v], scale);
            if (inverse) o = _mm256_xor_ps(o, sg[v]);
            _mm256_storeu_ps(y + 8 * v, o);
        }
    }
}
#endif

void mxl_kv_turbo_quantize32(mxl_dtype t, const float *x, uint8_t *block) {
    MXL_ASSERT(t == MXL_DTYPE_TURBO4 || t == MXL_DTYPE_TURBO3);
    const bool t4 = t == MXL_DTYPE_TURBO4;
    const float *cb = t4 ? mxl_kv_turbo4_codebook : mxl_kv_turbo3_codebook;
    const int levels = t4 ? 16 : 8;
    float mid[15];
    for (int k = 0; k + 1 < levels; k++) mid[k] = (cb[k] + cb[k + 1]) * 0.5f;
    float ss = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float p = x[j] * x[j];
        ss += p;
    }
    float d = sqrtf(ss / 32.0f);
    if (d > 65504.0f) d = 65504.0f; /* the largest finite f16 */
    const uint16_t dh = mxl_f32_to_f16(d);
    const float d16 = mxl_f16_to_f32(dh), id = d16 > 0.0f ? 1.0f / d16 : 0.0f;
    uint8_t codes[32];
    for (int j = 0; j < 32; j++) {
        /* the number of midpoints below v: a binary search over the ascending midpoints (the same
         * count as comparing with each one) */
        const float v = x[j] * id;
        int lo = 0, hi = levels - 1; /* answer in [lo, hi] */
        while (lo < hi) {
            const int m = (lo + hi) / 2;
            if (v > mid[m]) lo = m + 1;
            else hi = m;
        }
        codes[j] = (uint8_t)lo;
    }
    memcpy(block, &dh, 2);
    if (t4) {
        for (int j = 0; j < 16; j++) block[2 + j] = (uint8_t)(codes[j] | codes[j + 16] << 4);
        return;
    }
    uint32_t qh = 0;
    for (int j = 0; j < 8; j++)
        block[2 + j] = (uint8_t)((codes[j] & 3) | (codes[j + 8] & 3) << 2 | (codes[j + 16] & 3) << 4 | (codes[j + 24] & 3) << 6);
    for (int j = 0; j < 32; j++) qh |= (uint32_t)(codes[j] >> 2 & 1) << j;
    for (int b = 0; b < 4; b++) block[10 + b] = (uint8_t)(qh >> (8 * b));
}

void mxl_kv_turbo_dequantize32(mxl_dtype t, const uint8_t *block, float *x) {
    MXL_ASSERT(t == MXL_DTYPE_TURBO4 || t == MXL_DTYPE_TURBO3);
    uint16_t dh;
    memcpy(&dh, block, 2);
    const float d = mxl_f16_to_f32(dh);
    if (t == MXL_DTYPE_TURBO4) {
        for (int j = 0; j < 16; j++) {
            x[j] = d * mxl_kv_turbo4_codebook[block[2 + j] & 15];
            x[j + 16] = d * mxl_kv_turbo4_codebook[block[2 + j] >> 4];
        }
        return;
    }
    const uint32_t qh = (uint32_t)block[10] | (uint32_t)block[11] << 8 | (uint32_t)block[12] << 16 | (uint32_t)block[13] << 24;
    for (int j = 0; j < 32; j++) {
        const int c = (block[2 + (j & 7)] >> (2 * (j >> 3)) & 3) | (int)(qh >> j & 1) << 2;
        x[j] = d * mxl_kv_turbo3_codebook[c];
    }
}
