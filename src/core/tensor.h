/* tensor.h - non-owning tensor views (usually over memory-mapped checkpoint bytes).
 *
 * Shapes are written outermost first as in safetensors and PyTorch: a linear weight is
 * [out_features, in_features] with in_features contiguous. GGUF lists dimensions innermost first;
 * the GGUF reader reverses them so every tensor here uses the same convention. */
#ifndef MXL_CORE_TENSOR_H
#define MXL_CORE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

#define MXL_MAX_DIMS 8

typedef struct mxl_tensor {
    mxl_dtype dtype;
    int ndim;
    int64_t shape[MXL_MAX_DIMS]; /* outermost first */
    const void *data;            /* view; owned by the file mapping or arena it came from */
    uint64_t nbytes;
} mxl_tensor;

/* Product of dims; returns nonzero on overflow or a negative dim. */
int mxl_tensor_shape_numel(int ndim, const int64_t *shape, uint64_t *out);
/* Bytes the given dtype and shape occupy (innermost dim must be whole blocks for block formats). */
mxl_status mxl_tensor_expected_bytes(mxl_dtype dtype, int ndim, const int64_t *shape,
                                     uint64_t *out, mxl_error *err);
uint64_t mxl_tensor_numel(const mxl_tensor *t);
/* Formats "[a, b, c]" into buf. */
void mxl_tensor_shape_str(const mxl_tensor *t, char *buf, size_t cap);

#endif
