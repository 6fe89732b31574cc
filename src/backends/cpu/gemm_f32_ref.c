/* gemm_f32_ref.c - plain C reference for gemm_f32.h: the triple loop with libm activations. */
#include <stdlib.h>

#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/quant_gguf.h"
#include "core/alloc.h"

void mxl_gemm_f32_ref(const mxl_weight *W, const float *x, int64_t M, const float *bias, int act,
                      float *y) {
    const int64_t N = W->rows, K = W->cols;
    float *row = mxl_malloc((size_t)K * sizeof(float));
    MXL_ASSERT(row != NULL);
    for (int64_t n = 0; n < N; n++) {
        mxl_weight_dequant_row(W, n, row);
        for (int64_t m = 0; m < M; m++) {
            const float *xm = x + m * K;
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++) acc += row[k] * xm[k];
            if (bias) acc += bias[n];
            y[m * N + n] = act == MXL_GEMM_ACT_NONE ? acc : mxl_cpu_act1((mxl_act)act, acc);
        }
    }
    mxl_free(row);
}
