/* weights.h - binding checkpoint tensors to what the forward passes consume: matrices as
 * mxl_cpu_weight views (any format the kernels run) with their shape checked, and bias / norm
 * vectors as f32 arrays (a view when the tensor is already f32, else converted once into an
 * arena). Errors name the tensor. */
#ifndef MXL_MODELS_WEIGHTS_H
#define MXL_MODELS_WEIGHTS_H

#include "backends/cpu/matmul.h"
#include "core/arena.h"
#include "core/tensor.h"

/* t must be [rows, cols]. */
mxl_status mxl_weights_matrix(const mxl_tensor *t, const char *name, int64_t rows, int64_t cols,
                              mxl_cpu_weight *out, mxl_error *err);
/* t must hold exactly n float elements (any shape). */
mxl_status mxl_weights_vector_f32(mxl_arena *arena, const mxl_tensor *t, const char *name, int64_t n,
                                  const float **out, mxl_error *err);

#endif
