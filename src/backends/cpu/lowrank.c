/* lowrank.c - the low-rank up-projection (lowrank.h): the plain reference and the dispatch. */
#include "backends/cpu/lowrank.h"

#include "backends/cpu/kernels.h"

void mxl_cpu_lowrank_acc(const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N, float scale, float *y) {
    mxl_cpu_kern()->lowrank_acc(x, n, K, wt, wt_type, N, scale, y);
}

static float elem(const void *wt, mxl_dtype t, int64_t i) {
    return t == MXL_DTYPE_F32   ? ((const float *)wt)[i]
           : t == MXL_DTYPE_F16 ? mxl_f16_to_f32(((const uint16_t *)wt)[i])
                                : mxl_bf16_to_f32(((const uint16_t *)wt)[i]);
}

void mxl_cpu_lowrank_acc_ref(const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N, float scale, float *y) {
    for (int64_t t = 0; t < n; t++) {
        float *yt = y + t * N;
        for (int64_t o = 0; o < N; o++) {
            float acc = yt[o];
            for (int64_t k = 0; k < K; k++) {
                const float w = scale * x[t * K + k], p = w * elem(wt, wt_type, k * N + o);
                acc += p;
            }
            yt[o] = acc;
        }
    }
}
