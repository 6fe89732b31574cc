/* weights.c - tensor -> matrix / f32 vector binding (see weights.h). */
#include "models/weights.h"

#include <stdint.h>
#include <string.h>

mxl_status mxl_weights_matrix(const mxl_tensor *t, const char *name, int64_t rows, int64_t cols,
                              mxl_weight *out, mxl_error *err) {
    if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols)
        return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", name,
                             t->ndim > 0 ? (long long)t->shape[0] : -1LL, t->ndim > 1 ? (long long)t->shape[1] : -1LL,
                             (long long)rows, (long long)cols);
    return mxl_weight_from_tensor(t, name, out, err);
}

mxl_status mxl_weights_matrix_transposed(mxl_arena *arena, const mxl_tensor *t, const char *name,
                                         int64_t rows, int64_t cols, mxl_weight *out,
                                         mxl_error *err) {
    if (t->ndim != 2 || t->shape[0] != cols || t->shape[1] != rows)
        return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld], expected [%lld, %lld] (Conv1D [in, out])", name,
                             t->ndim > 0 ? (long long)t->shape[0] : -1LL, t->ndim > 1 ? (long long)t->shape[1] : -1LL,
                             (long long)cols, (long long)rows);
    return mxl_weights_stacked_transposed(arena, t, name, 1, rows, cols, false, out, err);
}

mxl_status mxl_weights_stacked_transposed(mxl_arena *arena, const mxl_tensor *t, const char *name, int64_t stack,
                                          int64_t rows, int64_t cols, bool interleaved, mxl_weight *out, mxl_error *err) {
    const bool flat = t->ndim == 2 && t->shape[0] == stack * cols && t->shape[1] == rows; /* [stack * in, out] */
    if (stack <= 0 || (stack > 1 && !flat && (t->ndim != 3 || t->shape[0] != stack || t->shape[1] != cols || t->shape[2] != rows)))
        return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s' is not %lld stacked [in %lld, out %lld] matrices", name, (long long)stack,
                             (long long)cols, (long long)rows);
    if (t->dtype != MXL_DTYPE_F32 && t->dtype != MXL_DTYPE_F16 && t->dtype != MXL_DTYPE_BF16)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "tensor '%s' has type %s; a transposed (Conv1D) weight must be F32, F16 or BF16", name, mxl_dtype_name(t->dtype));
    size_t esz = t->dtype == MXL_DTYPE_F32 ? 4 : 2;
    uint64_t n, bytes;
    if (rows <= 0 || cols <= 0 || mxl_mul_u64((uint64_t)rows, (uint64_t)cols, &n) || mxl_mul_u64(n, (uint64_t)stack, &n) ||
        mxl_mul_u64(n, esz, &bytes) || bytes != t->nbytes || bytes > SIZE_MAX)
        return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s': %llu bytes do not hold %lld x [%lld, %lld] %s", name,
                             (unsigned long long)t->nbytes, (long long)stack, (long long)cols, (long long)rows, mxl_dtype_name(t->dtype));
    uint8_t *dst = mxl_arena_alloc(arena, (size_t)bytes, 64);
    if (!dst) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory transposing '%s'", name);
    const uint8_t *src = t->data;
    const size_t slab = (size_t)rows * (size_t)cols * esz;
    /* each slab src[c][r] -> dst[r][c]; memcpy per element: safetensors data need not be aligned */
    if (interleaved && rows % 2) return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s': %lld interleaved outputs are not pairs", name, (long long)rows);
    for (int64_t e = 0; e < stack; e++)
        for (int64_t c = 0; c < cols; c++)
            for (int64_t r = 0; r < rows; r++) {
                /* interleaved: source outputs 0, 2, 4, ... first, then 1, 3, 5, ... */
                const int64_t to = interleaved ? (r % 2) * (rows / 2) + r / 2 : r;
                memcpy(dst + e * slab + ((size_t)to * (size_t)cols + (size_t)c) * esz, src + e * slab + ((size_t)c * (size_t)rows + (size_t)r) * esz, esz);
            }
    mxl_tensor view = *t;
    view.ndim = 2;
    view.shape[0] = rows * stack;
    view.shape[1] = cols;
    view.data = dst;
    return mxl_weight_from_tensor(&view, name, out, err);
}

mxl_status mxl_weights_rows(const mxl_weight *w, int64_t r0, int64_t n, const char *name,
                            mxl_weight *out, mxl_error *err) {
    if (r0 < 0 || n <= 0 || r0 > w->rows || n > w->rows - r0)
        return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s' has %lld rows; rows [%lld, %lld) are outside it", name,
                             (long long)w->rows, (long long)r0, (long long)(r0 + n));
    *out = *w;
    out->rows = n;
    if (w->kind == MXL_W_MLX) {
        int64_t words = w->cols * w->mlx.bits / 32, groups = w->cols / w->mlx.group_size;
        size_t esz = w->mlx.scale_dtype == MXL_DTYPE_F32 ? 4 : 2;
        out->mlx.rows = n;
        out->mlx.w = w->mlx.w + r0 * words;
        out->mlx.scales = (const uint8_t *)w->mlx.scales + (size_t)(r0 * groups) * esz;
        out->mlx.biases = (const uint8_t *)w->mlx.biases + (size_t)(r0 * groups) * esz;
        return MXL_OK;
    }
    int64_t rb = mxl_weight_row_bytes(w);
    if (rb < 0) return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s': bad row size", name);
    out->data = (const uint8_t *)w->data + r0 * rb;
    return MXL_OK;
}

mxl_status mxl_weights_gather_rows(mxl_arena *arena, const mxl_weight *w, const int64_t *idx, int64_t n, const char *name,
                                   mxl_weight *out, mxl_error *err) {
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= w->rows)
            return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s' has %lld rows; row %lld is outside it", name,
                                 (long long)w->rows, (long long)idx[i]);
    *out = *w;
    out->rows = n;
    out->prepared = NULL;
    if (w->kind == MXL_W_MLX) {
        size_t wb = (size_t)(w->cols * w->mlx.bits / 32) * 4;
        size_t gb = (size_t)(w->cols / w->mlx.group_size) * (w->mlx.scale_dtype == MXL_DTYPE_F32 ? 4 : 2);
        uint8_t *cw = mxl_arena_alloc(arena, (size_t)n * wb, 64), *cs = mxl_arena_alloc(arena, (size_t)n * gb, 64),
                *cb = mxl_arena_alloc(arena, (size_t)n * gb, 64);
        if (!cw || !cs || !cb) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < n; i++) {
            memcpy(cw + (size_t)i * wb, (const uint8_t *)w->mlx.w + (size_t)idx[i] * wb, wb);
            memcpy(cs + (size_t)i * gb, (const uint8_t *)w->mlx.scales + (size_t)idx[i] * gb, gb);
            memcpy(cb + (size_t)i * gb, (const uint8_t *)w->mlx.biases + (size_t)idx[i] * gb, gb);
        }
        out->mlx.rows = n;
        out->mlx.w = (const uint32_t *)cw;
        out->mlx.scales = cs;
        out->mlx.biases = cb;
        return MXL_OK;
    }
    int64_t rb = mxl_weight_row_bytes(w);
    if (rb < 0) return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s': bad row size", name);
    uint8_t *c = mxl_arena_alloc(arena, (size_t)(n * rb), 64);
    if (!c) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) memcpy(c + i * rb, (const uint8_t *)w->data + idx[i] * rb, (size_t)rb);
    out->data = c;
    return MXL_OK;
}

mxl_status mxl_weights_concat_rows(mxl_arena *arena, const mxl_weight *parts, int n, const char *name, mxl_weight *out, mxl_error *err) {
    int64_t rows = 0;
    for (int i = 0; i < n; i++) {
        if (parts[i].kind == MXL_W_MLX || parts[i].kind != parts[0].kind || parts[i].dtype != parts[0].dtype || parts[i].cols != parts[0].cols)
            return mxl_error_set(err, MXL_ERR_FORMAT, "the parts of '%s' differ in type or width", name);
        rows += parts[i].rows;
    }
    const int64_t rb = n > 0 ? mxl_weight_row_bytes(&parts[0]) : -1;
    if (rb <= 0) return mxl_error_set(err, MXL_ERR_FORMAT, "tensor '%s': bad row size", name);
    uint8_t *c = mxl_arena_alloc(arena, (size_t)(rows * rb), 64);
    if (!c) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    *out = parts[0];
    out->rows = rows, out->data = c, out->prepared = NULL;
    for (int i = 0; i < n; c += parts[i].rows * rb, i++) memcpy(c, parts[i].data, (size_t)(parts[i].rows * rb));
    return MXL_OK;
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
