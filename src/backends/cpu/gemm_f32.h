/* gemm_f32.h - prefill-sized f32 GEMM with a fused epilogue, for encoders: y = act(x W^T + b).
 *
 * x f32 [M, K] (row stride K), W dense [N, K] (out x in, row-major, F32 / F16 / BF16 - any
 * mxl_weight of kind DENSE), bias f32 [N] or NULL, y f32 [M, N]. The activation (or none)
 * is applied to every output after the bias. Unlike mxl_cpu_matmul's dot-product kernels (one
 * weight row against 1..4 tokens), the AVX-512 path is a register-blocked outer-product GEMM:
 * each task packs a panel of 32 weight rows into [K][32] (converted to f32) and runs a 12-token
 * x 32-output micro-kernel over all M tokens, so every weight load feeds 12 FMAs and every
 * broadcast activation 2. Each output is accumulated over k = 0..K-1 in order in one FMA lane,
 * so a token's row of y is bitwise independent of M, of its position and of the thread count
 * (batch invariance, as matmul.h). Panels are split over the pool's threads.
 * On CPUs with AMX-BF16 (the AMX level of cpu_features.h) a weight re-laid out once by mxl_gemm_f32_prepare runs
 * on the tile unit instead (gemm_f32_amx.c: f32 values split into bf16 hi + lo, three tile
 * products, accurate to about 2^-16 relative per product - an f32-accurate result several times
 * faster than the FMA kernel); it is batch invariant too. A weight without that layout, or a CPU
 * without AMX, takes the AVX-512 kernel.
 * The reference (gemm_f32_ref.c) is the plain triple loop; tests compare the two. */
#ifndef MXL_BACKENDS_CPU_GEMM_F32_H
#define MXL_BACKENDS_CPU_GEMM_F32_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/activation.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/matmul.h"
#include "core/arena.h"
#include "core/status.h"
#include "core/threadpool.h"


/* Plain reference: y[m][n] = act(sum_k float(W[n][k]) * x[m][k] (+ bias[n])), k in order. */
void mxl_gemm_f32_ref(const mxl_weight *W, const float *x, int64_t M, const float *bias, int act,
                      float *y);

/* True when mxl_gemm_f32 has a fast kernel for W at this ISA level (dense W on AVX-512: the kernel
 * table's gemm_f32_panel, kernels.h). */
bool mxl_gemm_f32_supported(const mxl_weight *W, mxl_cpu_isa isa);
/* True when mxl_gemm_f32 runs W on the tile unit at this level (W has the AMX layout and the
 * level has the tile GEMM). */
bool mxl_gemm_f32_amx(const mxl_weight *W, mxl_cpu_isa isa);

/* Scratch floats per pool thread that the AVX-512 kernel needs (packed panel). */
size_t mxl_gemm_f32_scratch_floats(int64_t K);
/* Scratch bytes mxl_gemm_f32 needs for M tokens on n_threads pool threads, whichever kernel runs
 * (pass the scratch 64-byte aligned). */
size_t mxl_gemm_f32_scratch_bytes(const mxl_weight *W, int64_t M, int n_threads);

/* Gives W the AMX tile layout (W->prepared, allocated from `arena`, which owns it) when this CPU has
 * AMX, W is a dense weight mxl_gemm_f32 supports and at least MXL_GEMM_AMX_MIN_N x
 * MXL_GEMM_AMX_MIN_K; otherwise leaves W as it is. */
#define MXL_GEMM_AMX_MIN_K 256
#define MXL_GEMM_AMX_MIN_N 64
mxl_status mxl_gemm_f32_prepare(mxl_weight *W, mxl_arena *arena, mxl_error *err);

/* The fast path (requires mxl_gemm_f32_supported(W, isa)). scratch holds
 * mxl_gemm_f32_scratch_bytes(W, M, n_threads) bytes, 64-byte aligned. */
void mxl_gemm_f32(const mxl_weight *W, const float *x, int64_t M, const float *bias, int act,
                  float *y, float *scratch, mxl_threadpool *pool, mxl_cpu_isa isa);



/* Internal to gemm_f32*.c: one packed panel of MXL_GEMM_NR outputs. bp [K][MXL_GEMM_NR] f32,
 * bias_p [MXL_GEMM_NR] (zeros past ncols when there is no bias), ncols <= MXL_GEMM_NR outputs
 * written to y[m * ldy + j], m < M. */
#define MXL_GEMM_NR 32
#define MXL_GEMM_MR 12
void mxl_gemm_f32_panel_avx512(const float *x, int64_t M, int64_t K, const float *bp, const float *bias_p,
                               int act, float *y, int64_t ldy, int ncols);
/* The same with x's rows ldx floats apart (a K-wide slice of wider rows). */
void mxl_gemm_f32_panel_ld_avx512(const float *x, int64_t ldx, int64_t M, int64_t K, const float *bp, const float *bias_p,
                                  int act, float *y, int64_t ldy, int ncols);

/* Internal: bias, activation and masked store of `rows` accumulated rows acc [rows][ldacc] (32
 * outputs each) into y[r * ldy + j], j < ncols (gemm_f32_avx512.c). */
void mxl_gemm_f32_store_avx512(const float *acc, int64_t ldacc, int rows, const float *bias_p, int act,
                               float *y, int64_t ldy, int ncols);

/* Internal to gemm_f32_amx.c and its tests. Packed weight bytes; W into that layout (dst of
 * mxl_gemm_amx_packed_bytes, any dense dtype); the hi / lo split of x [M, K] into xh, xl
 * [M16][K32] bf16 (zero padded), vector and reference (equal bit for bit); scratch bytes and the
 * GEMM itself (W->prepared set; the same contract as mxl_gemm_f32). */
size_t mxl_gemm_amx_packed_bytes(int64_t N, int64_t K);
void mxl_gemm_amx_pack(const mxl_weight *W, uint16_t *dst);
void mxl_gemm_amx_split(const float *x, int64_t M, int64_t K, uint16_t *xh, uint16_t *xl);
void mxl_gemm_amx_split_ref(const float *x, int64_t M, int64_t K, uint16_t *xh, uint16_t *xl);
size_t mxl_gemm_amx_scratch_bytes(int64_t M, int64_t K, int n_threads);
void mxl_gemm_amx(const mxl_weight *W, const float *x, int64_t M, const float *bias, int act, float *y,
                  void *scratch, mxl_threadpool *pool);

#endif
