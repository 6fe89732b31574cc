/* weight.c - the stored-form weight description (weight.h): shape and format checks and the
 * views of checkpoint tensors as weights. Backend-neutral: no kernel runs here. */
#include "backends/weight.h"

#include <stdint.h>

int64_t mxl_weight_row_bytes(const mxl_weight *W) {
    if (W->kind == MXL_W_MLX) return mxl_mlx_row_bytes(W->mlx.bits, W->cols);
    uint64_t b = 0;
    if (mxl_dtype_row_bytes(W->dtype, (uint64_t)W->cols, &b)) return -1;
    return (int64_t)b;
}

mxl_status mxl_weight_check(const mxl_weight *W, const char *name, mxl_error *err) {
    if (W->rows <= 0 || W->cols <= 0)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: empty weight [%lld, %lld]", name,
                             (long long)W->rows, (long long)W->cols);
    switch (W->kind) {
    case MXL_W_DENSE:
        if (W->dtype != MXL_DTYPE_F32 && W->dtype != MXL_DTYPE_F16 && W->dtype != MXL_DTYPE_BF16)
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: dense dtype %s has no CPU matmul",
                                 name, mxl_dtype_name(W->dtype));
        return MXL_OK;
    case MXL_W_GGUF: {
        if (!mxl_gguf_quant_supported(W->dtype))
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: %s has no CPU matmul", name,
                                 mxl_dtype_name(W->dtype));
        uint64_t b;
        if (mxl_dtype_row_bytes(W->dtype, (uint64_t)W->cols, &b))
            return mxl_error_set(err, MXL_ERR_FORMAT,
                                 "%s: row length %lld is not a whole number of %s blocks", name,
                                 (long long)W->cols, mxl_dtype_name(W->dtype));
        return MXL_OK;
    }
    case MXL_W_MLX:
        if (!mxl_mlx_params_valid(W->mlx.bits, W->mlx.group_size, W->mlx.scale_dtype))
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED,
                                 "%s: MLX quantization bits=%d group_size=%d scales %s unsupported",
                                 name, W->mlx.bits, W->mlx.group_size,
                                 mxl_dtype_name(W->mlx.scale_dtype));
        if (W->mlx.rows != W->rows || W->mlx.cols != W->cols || W->cols % W->mlx.group_size)
            return mxl_error_set(err, MXL_ERR_FORMAT,
                                 "%s: MLX shape [%lld, %lld] does not fit group size %d", name,
                                 (long long)W->rows, (long long)W->cols, W->mlx.group_size);
        return MXL_OK;
    }
    return mxl_error_set(err, MXL_ERR_ARG, "%s: bad weight kind", name);
}

mxl_status mxl_weight_from_tensor(const mxl_tensor *t, const char *name, mxl_weight *out,
                                      mxl_error *err) {
    if (t->ndim != 2)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: expected a 2-D weight, got %d dimensions",
                             name, t->ndim);
    mxl_weight w = {MXL_W_DENSE, t->dtype, t->shape[0], t->shape[1], t->data, {0}, NULL};
    if (mxl_gguf_quant_supported(t->dtype)) w.kind = MXL_W_GGUF;
    mxl_status st = mxl_weight_check(&w, name, err);
    if (st != MXL_OK) return st;
    uint64_t rb, total;
    if (mxl_dtype_row_bytes(t->dtype, (uint64_t)w.cols, &rb) || mxl_mul_u64(rb, (uint64_t)w.rows, &total) ||
        total != t->nbytes)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %llu bytes do not hold [%lld, %lld] %s", name,
                             (unsigned long long)t->nbytes, (long long)w.rows, (long long)w.cols,
                             mxl_dtype_name(t->dtype));
    *out = w;
    return MXL_OK;
}

mxl_status mxl_weight_from_mlx(const mxl_tensor *w, const mxl_tensor *scales,
                                   const mxl_tensor *biases, int bits, int group_size,
                                   const char *name, mxl_weight *out, mxl_error *err) {
    if (w->ndim != 2 || scales->ndim != 2 || biases->ndim != 2)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: MLX weight, scales and biases must be 2-D", name);
    if (w->dtype != MXL_DTYPE_U32)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: MLX packed weight must be U32, got %s", name,
                             mxl_dtype_name(w->dtype));
    if (scales->dtype != biases->dtype)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: scales are %s but biases %s", name,
                             mxl_dtype_name(scales->dtype), mxl_dtype_name(biases->dtype));
    if (!mxl_mlx_params_valid(bits, group_size, scales->dtype))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED,
                             "%s: MLX quantization bits=%d group_size=%d scales %s unsupported", name,
                             bits, group_size, mxl_dtype_name(scales->dtype));
    int64_t rows = w->shape[0], words = w->shape[1], groups = scales->shape[1];
    /* every product below is bounded first: shapes come from untrusted headers */
    int ok = rows > 0 && words > 0 && groups > 0 && groups <= INT64_MAX / 128 &&
             words <= INT64_MAX / 32 && scales->shape[0] == rows && biases->shape[0] == rows &&
             biases->shape[1] == groups;
    int64_t cols = ok ? groups * group_size : 0;
    ok = ok && cols <= INT64_MAX / 8 && words * 32 == cols * bits;
    if (!ok)
        return mxl_error_set(err, MXL_ERR_FORMAT,
                             "%s: shapes weight [%lld, %lld], scales [%lld, %lld] do not fit bits=%d "
                             "group_size=%d",
                             name, (long long)rows, (long long)words, (long long)scales->shape[0],
                             (long long)groups, bits, group_size);
    uint64_t wbytes, sbytes;
    size_t esz = scales->dtype == MXL_DTYPE_F32 ? 4 : 2;
    if (mxl_mul_u64((uint64_t)rows, (uint64_t)words * 4, &wbytes) ||
        mxl_mul_u64((uint64_t)rows, (uint64_t)groups * esz, &sbytes) || w->nbytes != wbytes ||
        scales->nbytes != sbytes || biases->nbytes != sbytes)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor byte sizes do not match their shapes", name);
    mxl_weight cw = {MXL_W_MLX, MXL_DTYPE_U32, rows, cols, NULL,
                         {bits, group_size, scales->dtype, rows, cols, w->data, scales->data, biases->data}, NULL};
    *out = cw;
    return MXL_OK;
}
