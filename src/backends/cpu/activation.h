/* activation.h - element-wise activations and gated MLP combinations (plain C references).
 *   SiLU(x) = x * sigmoid(x); GELU erf: 0.5 x (1 + erf(x/sqrt2)); GELU tanh (HF gelu_pytorch_tanh):
 *   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); ReLU^2: max(x,0)^2.
 *   SwiGLU: out = SiLU(gate) * up; GeGLU: out = GELU(gate) * up (tanh or erf form). */
#ifndef MXL_BACKENDS_CPU_ACTIVATION_H
#define MXL_BACKENDS_CPU_ACTIVATION_H

#include <stdint.h>

#include "backends/op_types.h"

float mxl_cpu_act1(mxl_act a, float x);
/* y[i] = act(x[i]) (in place allowed). */
void mxl_cpu_act(mxl_act a, const float *x, int64_t n, float *y);
/* out[i] = act(gate[i]) * up[i]: SwiGLU with MXL_ACT_SILU, GeGLU with a GELU. out may alias. */
void mxl_cpu_glu(mxl_act a, const float *gate, const float *up, int64_t n, float *out);

/* The unsuffixed functions dispatch through the kernel table (kernels.h): the plain references
 * below (mxl_cpu_act1 per element), or on AVX-512 (and AVX2, the same bits) the vector forms of
 * activation_avx512.c (exp-based SiLU and tanh, the A&S erf), within about 2e-7 of the reference
 * relative to max(|x|, 1) - close enough for a forward pass, not bit-identical. */
void mxl_cpu_act_ref(mxl_act a, const float *x, int64_t n, float *y);
void mxl_cpu_glu_ref(mxl_act a, const float *gate, const float *up, int64_t n, float *out);
/* GPT-OSS's clamped SwiGLU (backend.h swiglu_oai), plain C on every level: it runs on the expert
 * widths only. */
void mxl_cpu_swiglu_oai_ref(const float *gate, const float *up, int64_t n, float alpha, float limit, float *out);
void mxl_cpu_act_avx512(mxl_act a, const float *x, int64_t n, float *y);
void mxl_cpu_glu_avx512(mxl_act a, const float *gate, const float *up, int64_t n, float *out);
/* AVX2 forms (activation_avx2.c): the AVX-512 forms' operations on 8 lanes, the same bits; the
 * dispatch uses them on AVX2 CPUs without AVX-512. */
void mxl_cpu_act_avx2(mxl_act a, const float *x, int64_t n, float *y);
void mxl_cpu_glu_avx2(mxl_act a, const float *gate, const float *up, int64_t n, float *out);
/* AArch64 NEON forms (activation_neon.c; the references elsewhere): SiLU / SwiGLU with a vector
 * exp, within 1e-6 of the reference relative to max(|x|, 1); ReLU / ReLU^2 exact; the GELUs
 * through the references. The NEON level of the kernel table registers them. */
void mxl_cpu_act_neon(mxl_act a, const float *x, int64_t n, float *y);
void mxl_cpu_glu_neon(mxl_act a, const float *gate, const float *up, int64_t n, float *out);

#endif
