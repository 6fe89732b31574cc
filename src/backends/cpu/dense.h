/* dense.h - dot products of f32 activations with dense weight rows (F32, F16, BF16).
 * Activations stay f32 (no quantization): these are float paths, tested by NMSE against the
 * reference, which accumulates in one f32 in index order. */
#ifndef MXL_BACKENDS_CPU_DENSE_H
#define MXL_BACKENDS_CPU_DENSE_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"

typedef float (*mxl_dense_dot_fn)(int64_t n, const void *w, const float *x);

/* Reference: sum_i float(w[i]) * x[i] for t in {F32, F16, BF16}. */
float mxl_dense_dot_ref(mxl_dtype t, int64_t n, const void *w, const float *x);
/* AVX2+FMA+F16C variant for t (any n, tail handled); NULL when unsupported on this build. */
mxl_dense_dot_fn mxl_dense_dot_avx2_get(mxl_dtype t);
/* One weight row against four token rows (x + t*x_stride floats): each weight vector is loaded
 * and converted once per pair of tokens. Per token the operations are those of the 1-token AVX2
 * dot in the same order, so out[t] is bit-identical to it. NULL when unsupported on this
 * build. */
typedef void (*mxl_dense_dot4_fn)(int64_t n, const void *w, const float *x, int64_t x_stride,
                                  float *out);
mxl_dense_dot4_fn mxl_dense_dot4_avx2_get(mxl_dtype t);
/* AArch64 NEON variant (dense_neon.c, baseline AdvSIMD, any n); NULL on other architectures. */
mxl_dense_dot_fn mxl_dense_dot_neon_get(mxl_dtype t);
/* AVX-512 micro-kernel (dense_avx512.c): nrows (1..4) rows (row r at (const char *)w +
 * r*w_row_bytes) x ntok (1..4) tokens (x + t*x_stride floats), writing y[t*y_stride + r]. Each
 * (row, token) result is the same bits for every nrows and ntok. NULL when unsupported. Call only
 * on AVX-512 F/BW/VL CPUs. */
typedef void (*mxl_dense_gemm4x4_fn)(int64_t n, const void *w, size_t w_row_bytes, int nrows,
                                     const float *x, int64_t x_stride, int ntok, float *y,
                                     int64_t y_stride);
mxl_dense_gemm4x4_fn mxl_dense_gemm4x4_avx512_get(mxl_dtype t);

#endif
