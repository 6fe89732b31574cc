/* dense_ref.c - reference dense dot products (dense.h). */
#include "backends/cpu/dense.h"

#include "backends/cpu/quant_gguf.h"
#include "core/status.h"

float mxl_dense_dot_ref(mxl_dtype t, int64_t n, const void *w, const float *x) {
    MXL_ASSERT(t == MXL_DTYPE_F32 || t == MXL_DTYPE_F16 || t == MXL_DTYPE_BF16);
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++) acc += mxl_dense_elem(t, w, i) * x[i];
    return acc;
}
