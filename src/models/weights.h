/* weights.h - binding checkpoint tensors to what the forward passes consume: matrices as
 * mxl_weight views (any format the kernels run) with their shape checked, and bias / norm
 * vectors as f32 arrays (a view when the tensor is already f32, else converted once into an
 * arena). Errors name the tensor. */
#ifndef MXL_MODELS_WEIGHTS_H
#define MXL_MODELS_WEIGHTS_H

#include "backends/weight.h"
#include "core/arena.h"
#include "core/tensor.h"

/* t must be [rows, cols]. */
mxl_status mxl_weights_matrix(const mxl_tensor *t, const char *name, int64_t rows, int64_t cols,
                              mxl_weight *out, mxl_error *err);
/* t is a dense F32/F16/BF16 matrix stored transposed, [cols, rows] (GPT-2's Conv1D keeps
 * [in, out]); binds an owned [rows, cols] copy in the same dtype, allocated from `arena`. */
mxl_status mxl_weights_matrix_transposed(mxl_arena *arena, const mxl_tensor *t, const char *name,
                                         int64_t rows, int64_t cols, mxl_weight *out,
                                         mxl_error *err);
/* An owned copy (from `arena`) of rows idx[0 .. n) of w, in that order and w's format (dense,
 * GGUF blocks, MLX codes with their scales and biases): a fused projection whose parts interleave
 * (GPT-NeoX query_key_value: q, k, v per head). Refuses an index outside w, naming `name`. */
mxl_status mxl_weights_gather_rows(mxl_arena *arena, const mxl_weight *w, const int64_t *idx, int64_t n, const char *name,
                                   mxl_weight *out, mxl_error *err);
/* An owned copy (from `arena`) of the n parts' rows one after another (a projection a file stores
 * split that runs fused: llama.cpp's mmproj q / k / v). The parts share kind (dense or GGUF
 * blocks), dtype and cols, else the call is refused naming `name`. */
mxl_status mxl_weights_concat_rows(mxl_arena *arena, const mxl_weight *parts, int n, const char *name, mxl_weight *out, mxl_error *err);
/* A view of rows [r0, r0 + n) of w (any kind: dense, GGUF blocks, MLX), for fused projections
 * (Phi-3 qkv_proj / gate_up_proj, GPT-2 c_attn). Refuses a range outside w, naming `name`. */
/* stack matrices stored [stack, cols (in), rows (out)] (transformers' own Llama 4 / GPT-OSS
 * experts) as one owned [stack * rows, cols] weight (F32 / F16 / BF16); stack 1 also takes a 2-D
 * [cols, rows]. interleaved: each matrix's outputs alternate two halves (GPT-OSS's gate, up, gate,
 * ...): the copy puts the even ones first. */
mxl_status mxl_weights_stacked_transposed(mxl_arena *arena, const mxl_tensor *t, const char *name, int64_t stack,
                                          int64_t rows, int64_t cols, bool interleaved, mxl_weight *out, mxl_error *err);
mxl_status mxl_weights_rows(const mxl_weight *w, int64_t r0, int64_t n, const char *name,
                            mxl_weight *out, mxl_error *err);
/* t must hold exactly n float elements (any shape). */
mxl_status mxl_weights_vector_f32(mxl_arena *arena, const mxl_tensor *t, const char *name, int64_t n,
                                  const float **out, mxl_error *err);

#endif
