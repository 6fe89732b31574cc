/* quant_mlx.h - MLX affine-quantized weights: layout, reference kernels, SIMD entry points.
 *
 * A quantized linear [rows, cols] stores `w` as uint32 [rows, cols*bits/32] and `scales`,
 * `biases` as [rows, cols/group_size] in the model's float dtype (F16, BF16 or F32); element
 * value = scale * q + bias. Each row is one little-endian bit stream, lowest bits first: element
 * j occupies bits [j*bits, (j+1)*bits) of the row (for bits 3, 5, 6 an element may straddle two
 * words; for 2, 4, 8 this is word j/(32/bits), offset (j%(32/bits))*bits). Verified against
 * mlx.core.quantize's output (tests/fixtures/kernels/dequant_mlx.json).
 *
 * Note on mlx.core.dequantize: it computes in the scales' dtype (f16: round(round(s*q) + b)); our
 * dequantization returns the f32 value s*q + b, which is what mlx gives for f32 scales and what
 * the fused dots use. No pointer here needs alignment: every read is a memcpy or an unaligned
 * vector load (tensors inside a safetensors file need not be aligned). */
#ifndef MXL_BACKENDS_CPU_QUANT_MLX_H
#define MXL_BACKENDS_CPU_QUANT_MLX_H

#include <stdint.h>

#include "backends/cpu/quant_gguf.h"
#include "backends/weight.h"
#include "core/dtype.h"

/* Integer codes of elements [0, n) of a packed row (n a multiple of 32). */
void mxl_mlx_unpack_row_ref(int bits, const uint32_t *row, uint8_t *q, int64_t n);
/* Our quantizer (MLX's affine scheme: per group, the range [min, max] spread over 2^bits - 1
 * steps, q = round((x - min)/scale), bias = min), writing f32 scales/biases. Round-trip error of
 * every element is at most scale/2 (plus f32 rounding). n a multiple of group_size. */
void mxl_mlx_quantize_row_ref(int bits, int group_size, const float *x, int64_t n, uint32_t *w,
                              float *scales, float *biases);
/* Reference fused dot of row r with activations quantized to q8a blocks (cols/32 of them). */
float mxl_mlx_vec_dot_ref(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq);
/* AVX2+FMA variant (bits 4 and 8 specialised, the others through a generic unpack). */
float mxl_mlx_vec_dot_avx2(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq);
/* Four tokens (activation row t at (const char *)xq + t*xstride), codes decoded once; each
 * result bit-identical to mxl_mlx_vec_dot_avx2 for that token. */
void mxl_mlx_vec_dot4_avx2(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq,
                           size_t xstride, float *out);
/* AArch64 NEON variant (quant_mlx_neon.c): dotprod true uses SDOT (call only when the CPU has the
 * dot-product extension: the kernel table's NEON dot-product level). Bits 4 and 8 decoded in
 * registers, the others through the reference unpacker. Bit-identical to mxl_mlx_vec_dot_ref
 * (which it is on other architectures). */
float mxl_mlx_vec_dot_neon(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq, bool dotprod);

/* AVX-512 VNNI micro-kernel for bits 2, 4, 8 (quant_mlx_avx512.c): rows r0..r0+nrows-1
 * (nrows 1..4) x ntok (1..4) tokens, y[t*y_stride + r - r0]. Float path; each (row, token)
 * result is the same bits for every nrows and ntok. Prefetches the next four rows (may touch
 * addresses past the matrix; prefetches never fault). Call only when the CPU has AVX-512
 * F/BW/VL + VNNI. */
int mxl_mlx_gemm4x4_avx512_supported(int bits);
void mxl_mlx_gemm4x4_avx512(const mxl_mlx_qweight *W, int64_t r0, int nrows, const void *xq,
                            size_t xstride, int ntok, float *y, int64_t y_stride);

/* Scale/bias j of row r as f32. */
static inline float mxl_mlx_param(const void *p, mxl_dtype dt, int64_t idx) {
    /* memcpy: tensors inside a safetensors file need not be aligned */
    if (dt == MXL_DTYPE_F32) {
        float f;
        memcpy(&f, (const char *)p + 4 * idx, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)p + 2 * idx, 2);
    return dt == MXL_DTYPE_F16 ? mxl_h2f(h) : mxl_bf2f(h);
}

#endif
