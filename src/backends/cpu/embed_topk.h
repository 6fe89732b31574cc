/* embed_topk.h - the two ends of the network: token embedding lookup from a (possibly quantized)
 * table, and argmax / top-k over a vocabulary of logits. */
#ifndef MXL_BACKENDS_CPU_EMBED_TOPK_H
#define MXL_BACKENDS_CPU_EMBED_TOPK_H

#include <stdint.h>

#include "backends/cpu/matmul.h"
#include "core/status.h"

/* out[i, :] = scale * dequant(table row ids[i]) for i < n; table [vocab, dim] in any matmul
 * format (a tied LM head's table works unchanged). An id outside [0, vocab) is refused with
 * MXL_ERR_ARG naming it; out is then unspecified. */
mxl_status mxl_cpu_embed(const mxl_cpu_weight *table, const int32_t *ids, int64_t n, float scale,
                         float *out, mxl_error *err);

/* Index of the largest value (the first on ties; NaN never wins; 0 for n <= 0 or all NaN). */
int64_t mxl_cpu_argmax(const float *x, int64_t n);
/* The k largest values in descending order (ties: lower index first), k <= n; returns the
 * number written (min(k, n) minus NaNs skipped). */
int64_t mxl_cpu_topk(const float *x, int64_t n, int64_t k, int32_t *idx, float *val);

#endif
