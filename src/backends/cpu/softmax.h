/* softmax.h - numerically stable softmax over one row, with the variants attention needs:
 *   soft-cap (Gemma 2: x -> cap * tanh(x / cap) before the softmax; cap <= 0 disables it),
 *   an attention sink (gpt-oss: an extra logit `sink` that joins the denominator but has no
 *   output; pass -INFINITY for none). Masked entries are -INFINITY and get probability 0; a row
 *   with every entry masked and no sink yields all zeros. */
#ifndef MXL_BACKENDS_CPU_SOFTMAX_H
#define MXL_BACKENDS_CPU_SOFTMAX_H

#include <stdint.h>

void mxl_cpu_softmax(float *x, int64_t n, float softcap, float sink);
/* Applies only the soft-cap: x = cap * tanh(x / cap). */
void mxl_cpu_softcap(float *x, int64_t n, float cap);

#endif
