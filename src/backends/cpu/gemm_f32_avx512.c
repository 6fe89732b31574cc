/* gemm_f32_avx512.c - AVX-512 micro-kernel for gemm_f32.h: MR = 12 tokens x NR = 32 outputs
 * held in 24 zmm accumulators; per k one packed weight pair (2 x 16 floats) and 12 broadcast
 * activations (12 x 2 FMAs). Each accumulator lane sums k = 0..K-1 in order, so results do not
 * depend on how many tokens share the tile. The epilogue adds the bias and applies the
 * activation (GELU-erf in registers; the others through the vector forms of activation_avx512.c). */
#include "backends/cpu/gemm_f32.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backends/cpu/vexp_avx512.h"

/* mr (1..12, a constant after inlining) tokens x 32 outputs. */
AVX512 __attribute__((always_inline)) static inline void kern(int mr, int64_t K, const float *x, int64_t ldx,
                                                              const float *bp, __m512 bias0, __m512 bias1,
                                                              int act, float *y, int64_t ldy, __mmask16 m0,
                                                              __mmask16 m1) {
    __m512 c0[MXL_GEMM_MR], c1[MXL_GEMM_MR];
#pragma GCC unroll 12
    for (int i = 0; i < mr; i++) c0[i] = c1[i] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        __m512 b0 = _mm512_loadu_ps(bp + k * MXL_GEMM_NR), b1 = _mm512_loadu_ps(bp + k * MXL_GEMM_NR + 16);
#pragma GCC unroll 12
        for (int i = 0; i < mr; i++) {
            __m512 a = _mm512_set1_ps(x[i * ldx + k]);
            c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < mr; i++) {
        __m512 v0 = _mm512_add_ps(c0[i], bias0), v1 = _mm512_add_ps(c1[i], bias1);
        if (act == MXL_ACT_GELU_ERF) {
            v0 = mxl_gelu_erf512_ps(v0);
            v1 = mxl_gelu_erf512_ps(v1);
        }
        _mm512_mask_storeu_ps(y + i * ldy, m0, v0);
        _mm512_mask_storeu_ps(y + i * ldy + 16, m1, v1);
    }
}

AVX512 void mxl_gemm_f32_panel_avx512(const float *x, int64_t M, int64_t K, const float *bp, const float *bias_p,
                                      int act, float *y, int64_t ldy, int ncols) {
    mxl_gemm_f32_panel_ld_avx512(x, K, M, K, bp, bias_p, act, y, ldy, ncols);
}

AVX512 void mxl_gemm_f32_panel_ld_avx512(const float *x, int64_t ldx, int64_t M, int64_t K, const float *bp, const float *bias_p,
                                         int act, float *y, int64_t ldy, int ncols) {
    __m512 bias0 = _mm512_loadu_ps(bias_p), bias1 = _mm512_loadu_ps(bias_p + 16);
    __mmask16 m0 = (__mmask16)(ncols >= 16 ? 0xffff : (1u << ncols) - 1);
    __mmask16 m1 = (__mmask16)(ncols >= 32 ? 0xffff : ncols <= 16 ? 0 : (1u << (ncols - 16)) - 1);
    int64_t m = 0;
    for (; m + MXL_GEMM_MR <= M; m += MXL_GEMM_MR)
        kern(MXL_GEMM_MR, K, x + m * ldx, ldx, bp, bias0, bias1, act, y + m * ldy, ldy, m0, m1);
    const float *xr = x + m * ldx;
    float *yr = y + m * ldy;
    switch (M - m) {
    case 0: break;
    case 1: kern(1, K, xr, ldx, bp, bias0, bias1, act, yr, ldy, m0, m1); break;
    case 2: kern(2, K, xr, ldx, bp, bias0, bias1, act, yr, ldy, m0, m1); break;
    case 3: kern(3, K, xr, ldx, bp, bias0, bias1, act, yr, ldy, m0, m1); break;
    case 4: kern(4, K, xr, ldx, bp, bias0, bias1, act, yr, ldy, m0, m1); break;
    case 5: kern(5, K, xr, ldx, bp, bias0, bias1, act, yr, ldy, m0, m1); break;
    case 6: kern(6, K, xr, ldx, bp, bias0, bias1, act, yr, ldy, m0, m1); break;
    case 7: kern(7, K, xr, ldx, bp, bias0, bias1, act, yr, ldy, m0, m1); break;
    case 8: kern(8, K, xr, ldx, bp, bias0, bias1, act, yr, ldy, m0, m1); break;
    case 9: kern(9, K, xr, ldx, bp, bias0, bias1, act, yr, ldy, m0, m1); break;
    case 10: kern(10, K, xr, ldx, bp, bias0, bias1, act, yr, ldy, m0, m1); break;
    default: kern(11, K, xr, ldx, bp, bias0, bias1, act, yr, ldy, m0, m1); break;
    }
    /* other activations: the shared vector forms, per stored row (GELU-erf was applied in registers) */
    if (act != MXL_GEMM_ACT_NONE && act != MXL_ACT_GELU_ERF)
        for (int64_t r = 0; r < M; r++) mxl_cpu_act_avx512((mxl_act)act, y + r * ldy, ncols, y + r * ldy);
}

AVX512 void mxl_gemm_f32_store_avx512(const float *acc, int64_t ldacc, int rows, const float *bias_p, int act,
                                      float *y, int64_t ldy, int ncols) {
    __m512 bias0 = _mm512_loadu_ps(bias_p), bias1 = _mm512_loadu_ps(bias_p + 16);
    __mmask16 m0 = (__mmask16)(ncols >= 16 ? 0xffff : (1u << ncols) - 1);
    __mmask16 m1 = (__mmask16)(ncols >= 32 ? 0xffff : ncols <= 16 ? 0 : (1u << (ncols - 16)) - 1);
    for (int r = 0; r < rows; r++) {
        __m512 v0 = _mm512_add_ps(_mm512_loadu_ps(acc + r * ldacc), bias0);
        __m512 v1 = _mm512_add_ps(_mm512_loadu_ps(acc + r * ldacc + 16), bias1);
        if (act == MXL_ACT_GELU_ERF) {
            v0 = mxl_gelu_erf512_ps(v0);
            v1 = mxl_gelu_erf512_ps(v1);
        }
        _mm512_mask_storeu_ps(y + r * ldy, m0, v0);
        _mm512_mask_storeu_ps(y + r * ldy + 16, m1, v1);
    }
    if (act != MXL_GEMM_ACT_NONE && act != MXL_ACT_GELU_ERF)
        for (int r = 0; r < rows; r++) mxl_cpu_act_avx512((mxl_act)act, y + r * ldy, ncols, y + r * ldy);
}
#else
void mxl_gemm_f32_store_avx512(const float *acc, int64_t ldacc, int rows, const float *bias_p, int act,
                               float *y, int64_t ldy, int ncols) {
    (void)acc; (void)ldacc; (void)rows; (void)bias_p; (void)act; (void)y; (void)ldy; (void)ncols;
    MXL_ASSERT(0 && "no AVX-512 on this build");
}
void mxl_gemm_f32_panel_avx512(const float *x, int64_t M, int64_t K, const float *bp, const float *bias_p,
                               int act, float *y, int64_t ldy, int ncols) {
    (void)x; (void)M; (void)K; (void)bp; (void)bias_p; (void)act; (void)y; (void)ldy; (void)ncols;
    MXL_ASSERT(0 && "no AVX-512 on this build");
}

void mxl_gemm_f32_panel_ld_avx512(const float *x, int64_t ldx, int64_t M, int64_t K, const float *bp, const float *bias_p,
                                  int act, float *y, int64_t ldy, int ncols) {
    (void)x; (void)ldx; (void)M; (void)K; (void)bp; (void)bias_p; (void)act; (void)y; (void)ldy; (void)ncols;
    MXL_ASSERT(0 && "no AVX-512 on this build");
}
#endif
