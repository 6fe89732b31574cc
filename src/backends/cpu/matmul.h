/* matmul.h - y = W x for one or a few hundred tokens on the CPU, any weight format we load.
 *
 * W is [rows, cols] (out x in), row-major, in one of: dense F32/F16/BF16, a GGUF block format
 * (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K) or MLX affine (quant_mlx.h). x is f32
 * [n_tok, cols], y is f32 [n_tok, rows]. Quantized weights are multiplied against activations
 * quantized on the fly to int8 (q8a blocks of 32 for the 32-element formats and MLX, Q8_K blocks
 * of 256 for the K-quants), as ggml-cpu does; dense weights use f32 activations.
 * The caller supplies scratch memory (mxl_cpu_matmul_scratch_bytes) so the decode path does not
 * allocate. Rows are split over the thread pool's threads (NULL pool: the caller's thread).
 * Kernel choice per format and instruction-set level: on AVX-512 VNNI CPUs a 4 rows x 1..4
 * tokens micro-kernel (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q4_K, Q6_K, MLX 2/4/8-bit, dense
 * F32/F16/BF16) for every token count, decode included; else the AVX2 4-token kernels (every
 * format but Q2_K/Q3_K) for groups of 4 tokens and the AVX2 1-token dots for the rest; a CPU
 * without AVX2 runs the scalar references. MXL_CPU_ISA=scalar|avx2|avx512 caps the level.
 * A GGUF Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / Q2_K..Q6_K or MLX 4- / 8-bit weight given the
 * panel layout at load (W->prepared, quant_amx.h; on every AVX-512 VNNI CPU) runs the panel kernels
 * instead, for every token count: AMX-INT8 tiles where the CPU has them (their VNNI form for up
 * to 4 tokens), else the VNNI form throughout.
 *
 * Batch invariance: at a given level, row t of y is bitwise the same as multiplying token t
 * alone (n_tok = 1), whatever n_tok, t's position and the thread count. Each token's activations
 * are quantized on their own, the kernel used for a weight row does not depend on the tokens,
 * and every kernel computes a (row, token) pair with the same operations in the same order
 * whether it handles 1 or 4 tokens (and 1 or 4 rows); each output is computed by one thread. So
 * a request gives the same logits alone, batched, chunked or after a cached prefix
 * (tests/unit/test_kernels_invariance.c). */
#ifndef MXL_BACKENDS_CPU_MATMUL_H
#define MXL_BACKENDS_CPU_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/quant_mlx.h"
#include "backends/backend.h"
#include "backends/weight.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threadpool.h"

/* Scratch bytes mxl_cpu_matmul needs for n_tok tokens (0 for dense weights). */
size_t mxl_cpu_matmul_scratch_bytes(const mxl_weight *W, int64_t n_tok);

/* y[t][r] = sum_c W[r][c] * x[t][c], t < n_tok, r < rows, with the best kernels for this CPU. */
void mxl_cpu_matmul(const mxl_weight *W, const float *x, int64_t n_tok, float *y,
                    void *scratch, mxl_threadpool *pool);
/* prep: backend.h mxl_row_prep. */
/* mxl_cpu_matmul after prep (NULL: none) has made x's rows. */
void mxl_cpu_matmul_prep(const mxl_weight *W, const mxl_row_prep *prep, const float *x, int64_t n_tok, float *y,
                         void *scratch, mxl_threadpool *pool);
/* Same with an explicit instruction-set level (capped at what the CPU has): tests compare the
 * variants, the benchmark reports them. */
void mxl_cpu_matmul_isa(const mxl_weight *W, const float *x, int64_t n_tok, float *y,
                        void *scratch, mxl_threadpool *pool, mxl_cpu_isa isa);
/* y[i] = W[i] x for n_w (1..8) weights of the same cols and the same x (the Q, K and V or the
 * gate and up projections): each y[i] bitwise what mxl_cpu_matmul gives. When every weight takes
 * the panel path, x is quantized once and the weights' panels run in one dispatch of the pool
 * (one barrier instead of two per weight); otherwise the weights run one after another. prep
 * (NULL: none) makes x's rows first, as in mxl_cpu_matmul_prep. scratch: the largest
 * mxl_cpu_matmul_scratch_bytes of the weights. */
void mxl_cpu_matmul_multi(const mxl_weight *const *W, int n_w, const mxl_row_prep *prep, const float *x,
                          int64_t n_tok, float *const *y, void *scratch, mxl_threadpool *pool);
/* mxl_cpu_matmul_multi with a side task (backend.h; NULL: none): on the panel path it is one more
 * task of the panels' dispatch, the first claimed, so one thread runs it while the others start on
 * the panels (n_w may then be 1); otherwise it runs after the products. */
void mxl_cpu_matmul_multi_side(const mxl_weight *const *W, int n_w, const mxl_row_prep *prep, const mxl_side_task *side,
                               const float *x, int64_t n_tok, float *const *y, void *scratch, mxl_threadpool *pool);
/* Plain f32 reference: dequantize each row (reference dequantization) and dot in f32, no
 * activation quantization. The accuracy yardstick for the quantized-activation paths. */
void mxl_cpu_matmul_f32_ref(const mxl_weight *W, const float *x, int64_t n_tok, float *y);
/* The same for rows [r0, r1) of W only (y's other columns untouched): each y element is computed
 * exactly as above, so splitting the rows over threads gives the same bits. */
void mxl_cpu_matmul_f32_ref_rows(const mxl_weight *W, const float *x, int64_t n_tok, float *y, int64_t r0, int64_t r1);


#endif
