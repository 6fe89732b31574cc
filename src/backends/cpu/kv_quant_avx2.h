/* kv_quant_avx2.h - the AVX2 block decoder shared by the per-head KV kernels (kv_quant.c) and the
 * grouped attention passes (attention_avx2.c), so that both make the very same values from a
 * ggml block (q8_0, q4_0, q4_1, q5_0, q5_1; layouts in kv_quant.h) or a TurboQuant block (turbo4,
 * turbo3: kv_turbo.h) and their dots agree bit for bit. x86-64 only; call on AVX2+FMA+F16C CPUs. */
#ifndef MXL_BACKENDS_CPU_KV_QUANT_AVX2_H
#define MXL_BACKENDS_CPU_KV_QUANT_AVX2_H

#if defined(__x86_64__)
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/kv_quant.h"
#include "backends/cpu/kv_turbo.h"

#define MXL_KV_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

/* Bytes per block of 32 by mxl_kv_qfmt. */
static const int mxl_kv_qbytes[MXL_KV_QFMT_COUNT] = {34, 18, 20, 22, 24, 18, 14};

/* 8 int32 codes of block elements e0 .. e0 + 7 with bit 4 from qh (q5 formats). */
MXL_KV_AVX2_INLINE __m256i mxl_kv_q5_high(__m256i codes, uint32_t qh, int e0) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i bits = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)(qh >> e0)), idx), _mm256_set1_epi32(1));
    return _mm256_or_si256(codes, _mm256_slli_epi32(bits, 4));
}

/* The 32 values of block p of format f (a constant where inlined) in v[0..4) (elements 8i .. 8i + 7
 * in v[i]). Q8_0 and the symmetric formats give the reference's d * q (fma(code, d, -offset d)
 * rounds the exact d (code - offset) once, as the product does; only a zero comes out +0 where
 * d * 0 may be -0); Q4_1 / Q5_1 give fma(code, d, m), within one rounding of the reference's
 * d * code + m. */
MXL_KV_AVX2_INLINE void mxl_kv_deq32_avx2(mxl_kv_qfmt f, const uint8_t *p, __m256 *v) {
    uint16_t dh, mh = 0;
    memcpy(&dh, p, 2);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(dh));
    if (f == MXL_KV_TURBO4) { /* d * codebook[code]: the low 8 entries, or the high 8 where bit 3 is set */
        const __m256 t0 = _mm256_loadu_ps(mxl_kv_turbo4_codebook), t1 = _mm256_loadu_ps(mxl_kv_turbo4_codebook + 8);
        const __m128i raw = _mm_loadu_si128((const __m128i *)(p + 2)), m4 = _mm_set1_epi8(0x0F);
        const __m128i lo = _mm_and_si128(raw, m4), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
        const __m256i c[4] = {_mm256_cvtepu8_epi32(lo), _mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)), _mm256_cvtepu8_epi32(hi),
                              _mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))};
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            const __m256 e = _mm256_blendv_ps(_mm256_permutevar8x32_ps(t0, c[i]), _mm256_permutevar8x32_ps(t1, c[i]),
                                              _mm256_castsi256_ps(_mm256_slli_epi32(c[i], 28)));
            v[i] = _mm256_mul_ps(d, e);
        }
        return;
    }
    if (f == MXL_KV_TURBO3) { /* 2 low bits from qs (byte j % 8, pair j / 8), bit 2 from qh */
        const __m256 t = _mm256_loadu_ps(mxl_kv_turbo3_codebook);
        int64_t q8;
        uint32_t qh;
        memcpy(&q8, p + 2, 8);
        memcpy(&qh, p + 10, 4);
        const __m256i b = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(q8)), three = _mm256_set1_epi32(3), one = _mm256_set1_epi32(1);
        const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            const __m256i low = _mm256_and_si256(_mm256_srli_epi32(b, 2 * i), three);
            const __m256i high = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)(qh >> (8 * i))), idx), one);
            v[i] = _mm256_mul_ps(d, _mm256_permutevar8x32_ps(t, _mm256_or_si256(low, _mm256_slli_epi32(high, 2))));
        }
        return;
    }
    if (f == MXL_KV_Q8_0) {
        const __m256i q01 = _mm256_loadu_si256((const __m256i *)(p + 2));
        const __m128i q0 = _mm256_castsi256_si128(q01), q1 = _mm256_extracti128_si256(q01, 1);
        v[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0)), d);
        v[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q0, 8))), d);
        v[2] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1)), d);
        v[3] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q1, 8))), d);
        return;
    }
    const bool asym = f == MXL_KV_Q4_1 || f == MXL_KV_Q5_1, q5 = f == MXL_KV_Q5_0 || f == MXL_KV_Q5_1;
    if (asym) memcpy(&mh, p + 2, 2);
    uint32_t qh = 0;
    if (q5) memcpy(&qh, p + (asym ? 4 : 2), 4);
    const uint8_t *qs = p + (asym ? 4 : 2) + (q5 ? 4 : 0);
    const __m128i raw = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(raw, m4), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
    __m256i c[4] = {_mm256_cvtepu8_epi32(lo), _mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)), _mm256_cvtepu8_epi32(hi),
                    _mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))};
    const __m256 off = asym ? _mm256_set1_ps(_cvtsh_ss(mh)) : _mm256_mul_ps(d, _mm256_set1_ps(q5 ? -16.0f : -8.0f));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        if (q5) c[i] = mxl_kv_q5_high(c[i], qh, 8 * i);
        v[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c[i]), d, off);
    }
}
#endif

#endif
