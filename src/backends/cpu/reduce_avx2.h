/* reduce_avx2.h - the horizontal sum of an AVX2 float vector, in the one order every AVX2 kernel
 * uses (the 128-bit halves, then lanes 0..1 + 2..3, then lane 0 + 1), so that a dot computed by
 * one kernel (kv_quant.c's f16 dot) and by another (attention_avx2.c's grouped K pass) has the
 * same bits. Shared by the AVX2 dense, GGUF, MLX, KV and attention kernels. */
#ifndef MXL_BACKENDS_CPU_REDUCE_AVX2_H
#define MXL_BACKENDS_CPU_REDUCE_AVX2_H

#if defined(__x86_64__)
#include <immintrin.h>

/* v's 8 lanes: ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)) */
__attribute__((target("avx2"), always_inline)) static inline float mxl_hsum8_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

#endif
