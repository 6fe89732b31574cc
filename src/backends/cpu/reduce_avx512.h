/* reduce_avx512.h - 16 AVX-512 vectors reduced at once: lane j of the result = the sum (or max)
 * of vector v[j]'s 16 lanes, by a transpose tree (the 256-, 128-, 64- and 32-bit halves of
 * pairs combined, then one permute back into order): 15 combining steps for 16 reductions
 * instead of 4 each. Every vector goes through the same tree whatever its slot and the other
 * vectors (the pairing is the same for both members of a pair, and IEEE addition commutes), so
 * a value's bits do not depend on what it was reduced with. Shared by the q8a2 quantizer
 * (quant_gguf_avx512.c: block maxima and code sums) and the attention K pass
 * (attention_avx512.c: a group's scores). */
#ifndef MXL_BACKENDS_CPU_REDUCE_AVX512_H
#define MXL_BACKENDS_CPU_REDUCE_AVX512_H

#if defined(__x86_64__)
#include <immintrin.h>

enum { MXL_REDUCE_ADD_I32, MXL_REDUCE_MAX_F32, MXL_REDUCE_ADD_F32 };

/* v[16] (overwritten) -> lane j: the reduction of v[j] (floats as their bits) */
__attribute__((target("avx512f"), always_inline)) static inline __m512i mxl_reduce16_avx512(__m512i *v, int op) {
#define MXL_R16_OP(a, b)                                                                                              \
    (op == MXL_REDUCE_ADD_I32   ? _mm512_add_epi32(a, b)                                                             \
     : op == MXL_REDUCE_MAX_F32 ? _mm512_castps_si512(_mm512_max_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b))) \
                                : _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b))))
#define MXL_R16_SH4(a, b, i) _mm512_castps_si512(_mm512_shuffle_f32x4(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), i))
#define MXL_R16_SH1(a, b, i) _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), i))
    for (int i = 0; i < 8; i++) /* v[i]: vectors 2i | 2i+1 (256-bit halves) */
        v[i] = MXL_R16_OP(MXL_R16_SH4(v[2 * i], v[2 * i + 1], 0x44), MXL_R16_SH4(v[2 * i], v[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++) /* 128-bit lane k: vector 4i + k */
        v[i] = MXL_R16_OP(MXL_R16_SH4(v[2 * i], v[2 * i + 1], 0x88), MXL_R16_SH4(v[2 * i], v[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++) /* lane k: elements 0-1 vector 8i + k, 2-3 vector 8i + 4 + k */
        v[i] = MXL_R16_OP(MXL_R16_SH1(v[2 * i], v[2 * i + 1], 0x44), MXL_R16_SH1(v[2 * i], v[2 * i + 1], 0xEE));
    __m512i r = MXL_R16_OP(MXL_R16_SH1(v[0], v[1], 0x88), MXL_R16_SH1(v[0], v[1], 0xDD)); /* element 4k + j: vector 4j + k */
#undef MXL_R16_OP
#undef MXL_R16_SH4
#undef MXL_R16_SH1
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
}
#endif

#endif
