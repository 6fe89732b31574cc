/* lowrank.h - the up-projection of a low-rank update (LoRA's B): y[n, N] += scale * x[n, K] Wt,
 * Wt [K, N] row-major in F32, F16 or BF16, with K small (a rank: 1..1024). A row-major dot
 * product per output would be only K long; instead each output is accumulated over k = 0..K-1 in
 * order onto y, many outputs at a time. The reference and the AVX-512 variant (lowrank_avx512.c:
 * 64 outputs in four zmm accumulators per pass over Wt's rows) compute every output with the same
 * operations in the same order (w = scale * x, then w * Wt rounded, then added; no FMA), so they
 * agree bit for bit. */
#ifndef MXL_BACKENDS_CPU_LOWRANK_H
#define MXL_BACKENDS_CPU_LOWRANK_H

#include <stdint.h>

#include "core/dtype.h"

/* Dispatches on the kernel table (kernels.h lowrank_acc). */
void mxl_cpu_lowrank_acc(const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N, float scale, float *y);
void mxl_cpu_lowrank_acc_ref(const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N, float scale, float *y);
void mxl_cpu_lowrank_acc_avx512(const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N, float scale,
                                float *y);

#endif
