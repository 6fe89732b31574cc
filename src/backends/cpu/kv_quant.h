/* kv_quant.h - KV-cache storage kernels: f16 and int8 K/V vectors read by attention
 * (backends/cpu/attention.h) and written by the decoder's KV append (models/decoder.c).
 *
 * int8 layout ("q8 groups"): a vector of n elements is cut into groups of `group` consecutive
 * elements (the decoder uses 32, as llama.cpp's q8_0 blocks, or the whole head vector when
 * head_dim is not a multiple of 32); group g stores `group` int8 values q[i] = round(x[i] / d_g)
 * with the symmetric scale d_g = max_i |x[i]| / 127 kept as one f32 (scales[g]), so
 * x[i] ~= d_g * q[i] within d_g / 2. The int8 values and the scales live in separate arrays
 * (scales [n / group]): 1 + 4/32 bytes per element with groups of 32.
 *
 * Each kernel has a plain C reference (*_ref, sums in index order) and an AVX2+FMA+F16C variant
 * (different summation order; equal within float rounding), picked by mxl_kv_kernels_get. */
#ifndef MXL_BACKENDS_CPU_KV_QUANT_H
#define MXL_BACKENDS_CPU_KV_QUANT_H

#include <stdint.h>

#include "backends/cpu/cpu_features.h"

/* Quantizes x[n] (n a multiple of group) into q[n] and scales[n / group]. All-zero groups get
 * scale 0; non-finite inputs are not expected (K/V of a finite forward pass). */
void mxl_kv_quantize_i8(const float *x, int64_t n, int64_t group, int8_t *q, float *scales);
/* x[i] = scales[i / group] * q[i]. */
void mxl_kv_dequantize_i8(const int8_t *q, const float *scales, int64_t n, int64_t group, float *x);

/* sum_i k[i] * x[i] for an f16 / int8 (grouped) vector k and an f32 vector x. */
typedef float (*mxl_kv_dot_f16_fn)(int64_t n, const uint16_t *k, const float *x);
typedef float (*mxl_kv_dot_i8_fn)(int64_t n, int64_t group, const int8_t *k, const float *scales,
                                  const float *x);
/* o[i] += w * v[i] for an f16 / int8 (grouped) vector v. */
typedef void (*mxl_kv_axpy_f16_fn)(int64_t n, float w, const uint16_t *v, float *o);
typedef void (*mxl_kv_axpy_i8_fn)(int64_t n, int64_t group, float w, const int8_t *v,
                                  const float *scales, float *o);
/* h[i] = x[i] in f16, round to nearest even (mxl_f32_to_f16's bits, NaN included). */
typedef void (*mxl_kv_store_f16_fn)(int64_t n, const float *x, uint16_t *h);

float mxl_kv_dot_f16_ref(int64_t n, const uint16_t *k, const float *x);
float mxl_kv_dot_i8_ref(int64_t n, int64_t group, const int8_t *k, const float *scales, const float *x);
void mxl_kv_axpy_f16_ref(int64_t n, float w, const uint16_t *v, float *o);
void mxl_kv_axpy_i8_ref(int64_t n, int64_t group, float w, const int8_t *v, const float *scales, float *o);
void mxl_kv_store_f16_ref(int64_t n, const float *x, uint16_t *h);

typedef struct mxl_kv_kernels {
    mxl_kv_dot_f16_fn dot_f16;
    mxl_kv_dot_i8_fn dot_i8;
    mxl_kv_axpy_f16_fn axpy_f16;
    mxl_kv_axpy_i8_fn axpy_i8;
    mxl_kv_store_f16_fn store_f16; /* bit-exact in every variant */
} mxl_kv_kernels;

/* The AVX2+FMA+F16C variants (x86-64 builds only; call on AVX2 CPUs). */
float mxl_kv_dot_f16_avx2(int64_t n, const uint16_t *k, const float *x);
float mxl_kv_dot_i8_avx2(int64_t n, int64_t group, const int8_t *k, const float *scales, const float *x);
void mxl_kv_axpy_f16_avx2(int64_t n, float w, const uint16_t *v, float *o);
void mxl_kv_axpy_i8_avx2(int64_t n, int64_t group, float w, const int8_t *v, const float *scales, float *o);
void mxl_kv_store_f16_avx2(int64_t n, const float *x, uint16_t *h);

/* The kernels of level isa (capped at what this CPU and build support; the kernel table's kv
 * entry, kernels.h): references below AVX2. */
mxl_kv_kernels mxl_kv_kernels_get(mxl_cpu_isa isa);

#endif
