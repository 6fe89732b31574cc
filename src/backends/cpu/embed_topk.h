/* embed_topk.h - the two ends of the network: token embedding lookup from a (possibly quantized)
 * table, and argmax / top-k over a vocabulary of logits. */
#ifndef MXL_BACKENDS_CPU_EMBED_TOPK_H
#define MXL_BACKENDS_CPU_EMBED_TOPK_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/cpu/matmul.h"
#include "core/status.h"

/* out[i, :] = scale * dequant(table row ids[i]) for i < n; table [vocab, dim] in any matmul
 * format (a tied LM head's table works unchanged). An id outside [0, vocab) is refused with
 * MXL_ERR_ARG naming it; out is then unspecified. */
mxl_status mxl_cpu_embed(const mxl_weight *table, const int32_t *ids, int64_t n, float scale,
                         float *out, mxl_error *err);

/* Index of the largest value (the first on ties; NaN never wins; 0 for n <= 0 or all NaN).
 * Dispatches to mxl_cpu_argmax_avx512 (embed_topk_avx512.c: the NaN-skipping maximum in 16
 * lanes, then the first index holding it; the same index as the reference). */
int64_t mxl_cpu_argmax(const float *x, int64_t n);
int64_t mxl_cpu_argmax_ref(const float *x, int64_t n);
int64_t mxl_cpu_argmax_avx512(const float *x, int64_t n);
/* What a sampler must know of a row of logits before it picks from them: *bad when some value is
 * NaN or +inf, *any when some value is above -inf. Dispatches like mxl_cpu_argmax. */
void mxl_cpu_logits_scan(const float *x, int64_t n, bool *bad, bool *any);
void mxl_cpu_logits_scan_ref(const float *x, int64_t n, bool *bad, bool *any);
void mxl_cpu_logits_scan_avx512(const float *x, int64_t n, bool *bad, bool *any);
/* The k largest values in descending order (ties: lower index first), k <= n; returns the
 * number written (min(k, n) minus NaNs skipped). */
int64_t mxl_cpu_topk(const float *x, int64_t n, int64_t k, int32_t *idx, float *val);

#endif
