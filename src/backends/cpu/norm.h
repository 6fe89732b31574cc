/* norm.h - RMSNorm and LayerNorm over one row (plain C; these are bandwidth-trivial next to the
 * matmuls). Statistics are accumulated in double so long rows stay accurate.
 *   RMSNorm:  y = x / sqrt(mean(x^2) + eps) * w           (Llama, Mistral, Qwen, ...)
 *   Gemma:    y = x / sqrt(mean(x^2) + eps) * (1 + w)     (plus_one = 1; HF GemmaRMSNorm)
 *   LayerNorm: y = (x - mean) / sqrt(var + eps) * w + b   (biased variance, as torch)
 * w and b may be NULL (no affine part). x and y may alias.
 * The plain references are the _ref functions; the unsuffixed ones dispatch through the kernel
 * table (kernels.h) to an AVX-512 variant (norm_avx512.c: the same double sums in eight lanes,
 * the same float arithmetic per element, so it differs from the reference only by the order of
 * the double sums) or its AVX2 form. */
#ifndef MXL_BACKENDS_CPU_NORM_H
#define MXL_BACKENDS_CPU_NORM_H

#include <stdint.h>

void mxl_cpu_rmsnorm(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y);
void mxl_cpu_layernorm(const float *x, const float *w, const float *b, int64_t n, float eps, float *y);
void mxl_cpu_rmsnorm_ref(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y);
void mxl_cpu_layernorm_ref(const float *x, const float *w, const float *b, int64_t n, float eps, float *y);
void mxl_cpu_rmsnorm_avx512(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y);
void mxl_cpu_layernorm_avx512(const float *x, const float *w, const float *b, int64_t n, float eps, float *y);
/* AVX2 forms (norm_avx2.c): the AVX-512 forms' sums and order on 4 / 8 lanes, the same bits; the
 * dispatch uses them on AVX2 CPUs without AVX-512. */
void mxl_cpu_rmsnorm_avx2(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y);
void mxl_cpu_layernorm_avx2(const float *x, const float *w, const float *b, int64_t n, float eps, float *y);
/* AArch64 NEON RMSNorm (norm_neon.c; the reference elsewhere): double sums in another order, the
 * same float arithmetic per element. The NEON level of the kernel table registers it. */
void mxl_cpu_rmsnorm_neon(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y);

#endif
