/* weights.c - tensor -> matrix / f32 vector binding (see weights.h). */
#include "models/weights.h"

#include <stdint.h>
#include <string.h>

mxl_status mxl_weights_matrix(const mxl_tensor *t, const char *name, int64_t rows, int64_t cols,
                              mxl_cpu_weight *out, mxl_error *err) {
    if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols)
        return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", name,
                             t->ndim > 0 ? (long long)t->shape[0] : -1LL, t->ndim > 1 ? (long long)t->shape[1] : -1LL,
                             (long long)rows, (long long)cols);
    return mxl_cpu_weight_from_tensor(t, name, out, err);
}

mxl_status mxl_weights_vector_f32(mxl_arena *arena, const mxl_tensor *t, const char *name, int64_t n,
                                  const float **out, mxl_error *err) {
    *out = NULL;
    if (mxl_tensor_numel(t) != (uint64_t)n)
        return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s' should hold %lld elements", name, (long long)n);
    if (t->dtype == MXL_DTYPE_F32 && ((uintptr_t)t->data % _Alignof(float)) == 0) {
        *out = t->data;
        return MXL_OK;
    }
    if (t->dtype != MXL_DTYPE_F32 && t->dtype != MXL_DTYPE_F16 && t->dtype != MXL_DTYPE_BF16)
        return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s' has type %s; expected a float vector", name, mxl_dtype_name(t->dtype));
    float *v = mxl_arena_alloc(arena, (size_t)n * sizeof(float), 64);
    if (!v) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    const uint8_t *p = t->data;
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == MXL_DTYPE_F32) {
            memcpy(&v[i], p + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            v[i] = t->dtype == MXL_DTYPE_F16 ? mxl_f16_to_f32(h) : mxl_bf16_to_f32(h);
        }
    }
    *out = v;
    return MXL_OK;
}
