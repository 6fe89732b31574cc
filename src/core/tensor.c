/* tensor.c - shape arithmetic for tensor views (see tensor.h). */
#include "core/tensor.h"

#include <stdio.h>

int mxl_tensor_shape_numel(int ndim, const int64_t *shape, uint64_t *out) {
    uint64_t n = 1;
    if (ndim < 0 || ndim > MXL_MAX_DIMS) return 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return 1;
        if (mxl_mul_u64(n, (uint64_t)shape[i], &n)) return 1;
    }
    *out = n;
    return 0;
}

mxl_status mxl_tensor_expected_bytes(mxl_dtype dtype, int ndim, const int64_t *shape,
                                     uint64_t *out, mxl_error *err) {
    uint64_t numel;
    if (mxl_tensor_shape_numel(ndim, shape, &numel))
        return mxl_error_set(err, MXL_ERR_OVERFLOW, "tensor shape overflows or is negative");
    const mxl_dtype_info *info = mxl_dtype_get_info(dtype);
    if (info->block_elems > 1 && ndim > 0 && shape[ndim - 1] % info->block_elems != 0)
        return mxl_error_set(err, MXL_ERR_FORMAT,
                             "row of %lld elements is not a whole number of %s blocks of %u",
                             (long long)shape[ndim - 1], info->name, info->block_elems);
    if (mxl_dtype_row_bytes(dtype, numel, out))
        return mxl_error_set(err, MXL_ERR_OVERFLOW, "tensor byte size overflows");
    return MXL_OK;
}

uint64_t mxl_tensor_numel(const mxl_tensor *t) {
    uint64_t n = 0;
    if (mxl_tensor_shape_numel(t->ndim, t->shape, &n)) return 0;
    return n;
}

void mxl_tensor_shape_str(const mxl_tensor *t, char *buf, size_t cap) {
    size_t off = 0;
    if (cap == 0) return;
    buf[0] = '\0';
    off += (size_t)snprintf(buf + off, cap - off, "[");
    for (int i = 0; i < t->ndim && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (off < cap) snprintf(buf + off, cap - off, "]");
}
