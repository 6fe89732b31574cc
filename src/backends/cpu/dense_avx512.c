/* dense_avx512.c - AVX-512 micro-kernel for dense weights (F32, F16, BF16): 4 weight rows
 * x 1..4 tokens, up to 16 zmm accumulators, 16 columns per step; each weight vector is loaded
 * (and converted) once for the tokens and each activation vector once for four rows. Float path:
 * differs from the reference only by f32 summation order. Serves decode (1 token) and prefill
 * with the same per-(row, token) arithmetic, so results do not depend on the batch. Call only on AVX-512 F/BW/VL CPUs
 * (the dispatcher uses it at the AVX-512 VNNI level, which implies them). */
#include "backends/cpu/dense.h"

#include "backends/cpu/quant_gguf.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

AVX512 static inline __m512 load16(mxl_dtype t, const void *w, int64_t i) {
    if (t == MXL_DTYPE_F32) return _mm512_loadu_ps((const float *)w + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i));
    if (t == MXL_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* nr valid rows (rows past nr repeat row nr - 1, not stored) x nt tokens (a compile-time 1..4
 * after inlining). One accumulator per (row, token), fed in the same order for every nr and nt:
 * a token's result does not depend on how many tokens share the call. */
AVX512 __attribute__((always_inline)) static inline void gemm4xn_t(mxl_dtype t, int nt, int64_t n,
                                                                  const void *w, size_t wrb, int nr,
                                                                  const float *x, int64_t xs,
                                                                  float *y, int64_t ys) {
    const char *wr[4];
    for (int r = 0; r < 4; r++) wr[r] = (const char *)w + (r < nr ? r : nr - 1) * wrb;
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (int k = 0; k < nt; k++) acc[r][k] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 xv[4];
#pragma GCC unroll 4
        for (int k = 0; k < nt; k++) xv[k] = _mm512_loadu_ps(x + k * xs + i);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            __m512 wv = load16(t, wr[r], i);
#pragma GCC unroll 4
            for (int k = 0; k < nt; k++) acc[r][k] = _mm512_fmadd_ps(wv, xv[k], acc[r][k]);
        }
    }
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < nt; k++) {
            float s = _mm512_reduce_add_ps(acc[r][k]);
            for (int64_t j = i; j < n; j++) s += mxl_dense_elem(t, wr[r], j) * x[k * xs + j];
            y[k * ys + r] = s;
        }
}

#define SWITCH_NT(nt, CALL)                                                                       \
    switch (nt) {                                                                                 \
    case 1: CALL(1); break;                                                                       \
    case 2: CALL(2); break;                                                                       \
    case 3: CALL(3); break;                                                                       \
    default: CALL(4); break;                                                                      \
    }
#define DENSE_CALL(NT) gemm4xn_t(dt, NT, n, w, wrb, nr, x, xs, y, ys)
#define DENSE_GEMM(name, DT)                                                                      \
    AVX512 static void name(int64_t n, const void *w, size_t wrb, int nr, const float *x,         \
                            int64_t xs, int nt, float *y, int64_t ys) {                           \
        const mxl_dtype dt = DT;                                                                  \
        SWITCH_NT(nt, DENSE_CALL)                                                                 \
    }
DENSE_GEMM(g_f32, MXL_DTYPE_F32)
DENSE_GEMM(g_f16, MXL_DTYPE_F16)
DENSE_GEMM(g_bf16, MXL_DTYPE_BF16)

mxl_dense_gemm4x4_fn mxl_dense_gemm4x4_avx512_get(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_F32: return g_f32;
    case MXL_DTYPE_F16: return g_f16;
    case MXL_DTYPE_BF16: return g_bf16;
    default: return 0;
    }
}
#else
mxl_dense_gemm4x4_fn mxl_dense_gemm4x4_avx512_get(mxl_dtype t) { (void)t; return 0; }
#endif
