/* kv_quant.h - KV-cache storage kernels: f16, int8, ggml block-format (Q8_0, Q4_0, Q4_1,
 * Q5_0, Q5_1) and TurboQuant (kv_turbo.h) K/V vectors read by attention (backends/cpu/attention.h) and written by the
 * decoder's KV append (models/decoder.c).
 *
 * int8 layout ("q8 groups"): a vector of n elements is cut into groups of `group` consecutive
 * elements (the decoder uses 32, as llama.cpp's q8_0 blocks, or the whole head vector when
 * head_dim is not a multiple of 32); group g stores `group` int8 values q[i] = round(x[i] / d_g)
 * with the symmetric scale d_g = max_i |x[i]| / 127 kept as one f32 (scales[g]), so
 * x[i] ~= d_g * q[i] within d_g / 2. The int8 values and the scales live in separate arrays
 * (scales [n / group]): 1 + 4/32 bytes per element with groups of 32.
 *
 * ggml block formats (llama.cpp's --cache-type-k/-v q8_0, q4_0, q4_1, q5_0, q5_1): a head vector
 * of n elements (n a multiple of 32) is n / 32 consecutive blocks of ggml-common.h's layouts
 * (quant_gguf.h mxl_block_*: 34, 18, 20, 22, 24 bytes per 32 values), quantized exactly as
 * ggml-quants.c's quantize_row_<fmt>_ref (the bytes the PyPI gguf package's
 * gguf.quants.quantize writes) and read back as its dequantize_row_<fmt> (mxl_dequant_row_ref):
 *   q8_0: d = amax / 127, q = roundf(x / d) (x * (1/d)), x ~ d q;
 *   q4_0: d = max / -8 (max: the element of largest magnitude, with its sign), code
 *         min(15, (int8)(x * (1/d) + 8.5)), x ~ d (code - 8);
 *   q4_1: d = (max - min) / 15, m = min, code min(15, (int8)((x - min) * (1/d) + 0.5)),
 *         x ~ d code + m;
 *   q5_0: as q4_0 on 5 bits (d = max / -16, codes 0..31, offset 16), bit 4 of code j in bit j of
 *         the 32-bit little-endian qh;
 *   q5_1: as q4_1 on 5 bits (d = (max - min) / 31), bit 4 in qh.
 * The low 4 bits of codes j and j + 16 share byte j of qs (low and high nibble). d and m are
 * stored as f16; the quantization uses their f32 values, as ggml does.
 *
 * Each kernel has a plain C reference (*_ref, sums in index order) and an AVX2+FMA+F16C variant
 * (different summation order; equal within float rounding), picked by mxl_kv_kernels_get; the
 * block formats' AVX2 variants decode a block with kv_quant_avx2.h, which the grouped attention
 * passes (attention_avx2.c) share. */
#ifndef MXL_BACKENDS_CPU_KV_QUANT_H
#define MXL_BACKENDS_CPU_KV_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/cpu/cpu_features.h"
#include "core/dtype.h"

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

/* ---- ggml block formats ---- */
/* The 32-element block formats: ggml's five, then the TurboQuant blocks (backends/cpu/kv_turbo.h:
 * rotated values, quantized and read back like the others). */
typedef enum mxl_kv_qfmt {
    MXL_KV_Q8_0 = 0, MXL_KV_Q4_0, MXL_KV_Q4_1, MXL_KV_Q5_0, MXL_KV_Q5_1, MXL_KV_TURBO4, MXL_KV_TURBO3, MXL_KV_QFMT_COUNT
} mxl_kv_qfmt;
#define MXL_KV_GGML_QFMTS 5 /* formats [0, 5) are ggml's */
/* The block format of dtype t (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, TURBO4, TURBO3), or -1 for any other type. */
int mxl_kv_qfmt_of(mxl_dtype t);
mxl_dtype mxl_kv_qfmt_dtype(mxl_kv_qfmt f);
/* x[n] (n a multiple of 32) into n / 32 blocks of format t at y: ggml's quantize_row_<t>_ref
 * (TurboQuant: mxl_kv_turbo_quantize32 of values already rotated). */
void mxl_kv_quantize_blocks(mxl_dtype t, const float *x, int64_t n, void *y);
/* n / 32 blocks of format t back to x[n]: ggml's dequantize_row_<t> (mxl_dequant_row_ref;
 * TurboQuant: mxl_kv_turbo_dequantize32, still rotated). */
void mxl_kv_dequantize_blocks(mxl_dtype t, const void *y, int64_t n, float *x);

/* sum_i k[i] * x[i] for a vector k of n / 32 blocks of one format; o[i] += w * v[i] likewise. */
typedef float (*mxl_kv_dot_q_fn)(int64_t n, const void *k, const float *x);
typedef void (*mxl_kv_axpy_q_fn)(int64_t n, float w, const void *v, float *o);
/* References: each element dequantized as mxl_kv_dequantize_blocks does, then in index order
 * acc += k[i] * x[i] (dot, from 0) / o[i] += w * v[i] (axpy). */
float mxl_kv_dot_q8_0_ref(int64_t n, const void *k, const float *x);
float mxl_kv_dot_q4_0_ref(int64_t n, const void *k, const float *x);
float mxl_kv_dot_q4_1_ref(int64_t n, const void *k, const float *x);
float mxl_kv_dot_q5_0_ref(int64_t n, const void *k, const float *x);
float mxl_kv_dot_q5_1_ref(int64_t n, const void *k, const float *x);
void mxl_kv_axpy_q8_0_ref(int64_t n, float w, const void *v, float *o);
void mxl_kv_axpy_q4_0_ref(int64_t n, float w, const void *v, float *o);
void mxl_kv_axpy_q4_1_ref(int64_t n, float w, const void *v, float *o);
void mxl_kv_axpy_q5_0_ref(int64_t n, float w, const void *v, float *o);
void mxl_kv_axpy_q5_1_ref(int64_t n, float w, const void *v, float *o);
float mxl_kv_dot_turbo4_ref(int64_t n, const void *k, const float *x);
float mxl_kv_dot_turbo3_ref(int64_t n, const void *k, const float *x);
void mxl_kv_axpy_turbo4_ref(int64_t n, float w, const void *v, float *o);
void mxl_kv_axpy_turbo3_ref(int64_t n, float w, const void *v, float *o);
/* AVX2+FMA+F16C: each block's 32 values made in four 8-lane vectors (x86-64 builds only) */
float mxl_kv_dot_q8_0_avx2(int64_t n, const void *k, const float *x);
float mxl_kv_dot_q4_0_avx2(int64_t n, const void *k, const float *x);
float mxl_kv_dot_q4_1_avx2(int64_t n, const void *k, const float *x);
float mxl_kv_dot_q5_0_avx2(int64_t n, const void *k, const float *x);
float mxl_kv_dot_q5_1_avx2(int64_t n, const void *k, const float *x);
void mxl_kv_axpy_q8_0_avx2(int64_t n, float w, const void *v, float *o);
void mxl_kv_axpy_q4_0_avx2(int64_t n, float w, const void *v, float *o);
void mxl_kv_axpy_q4_1_avx2(int64_t n, float w, const void *v, float *o);
void mxl_kv_axpy_q5_0_avx2(int64_t n, float w, const void *v, float *o);
void mxl_kv_axpy_q5_1_avx2(int64_t n, float w, const void *v, float *o);
float mxl_kv_dot_turbo4_avx2(int64_t n, const void *k, const float *x);
float mxl_kv_dot_turbo3_avx2(int64_t n, const void *k, const float *x);
void mxl_kv_axpy_turbo4_avx2(int64_t n, float w, const void *v, float *o);
void mxl_kv_axpy_turbo3_avx2(int64_t n, float w, const void *v, float *o);

typedef struct mxl_kv_kernels {
    mxl_kv_dot_f16_fn dot_f16;
    mxl_kv_dot_i8_fn dot_i8;
    mxl_kv_axpy_f16_fn axpy_f16;
    mxl_kv_axpy_i8_fn axpy_i8;
    mxl_kv_store_f16_fn store_f16; /* bit-exact in every variant */
    mxl_kv_dot_q_fn dot_q[MXL_KV_QFMT_COUNT];   /* by mxl_kv_qfmt */
    mxl_kv_axpy_q_fn axpy_q[MXL_KV_QFMT_COUNT];
    /* TurboQuant's rotation (kv_turbo.h mxl_kv_rotate_ref's bits in every variant) */
    void (*rotate)(float *x, int64_t n, int64_t chunk, bool inverse);
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
