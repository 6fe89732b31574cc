/* weight.h - a weight in its stored form, as every backend receives it, and the host codecs of
 * the stored formats.
 *
 * A weight W is [rows, cols] (out x in), row-major, in one of the formats the engine loads:
 * dense F32 / F16 / BF16, a GGUF block format (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K) or MLX
 * affine (below). The description points into the checkpoint's mapped bytes and owns nothing.
 * `prepared` belongs to the backend that runs W (backend.h: weight_prepare): a layout made once
 * at load (the CPU's panel or tile layouts); the model code never reads it.
 *
 * MLX affine: w is uint32 [rows, cols*bits/32], scales and biases [rows, cols/group_size] in
 * the model's float dtype (F16, BF16 or F32); element value = scale * q + bias. Each row is one
 * little-endian bit stream, lowest bits first (backends/cpu/quant_mlx.h has the details).
 *
 * The host codecs at the end (reference dequantization and the MLX quantizer) are the format
 * definitions every backend is tested against and what `mlxcel convert` uses; the CPU backend's
 * reference kernels implement them. */
#ifndef MXL_BACKENDS_WEIGHT_H
#define MXL_BACKENDS_WEIGHT_H

#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

typedef struct mxl_mlx_qweight {
    int bits;              /* 2, 3, 4, 5, 6, 8 */
    int group_size;        /* 32, 64, 128 */
    mxl_dtype scale_dtype; /* F16, BF16, F32: dtype of scales and biases */
    int64_t rows, cols;    /* cols is a multiple of group_size (and so of 32) */
    const uint32_t *w;     /* [rows, cols*bits/32] */
    const void *scales;    /* [rows, cols/group_size] */
    const void *biases;    /* [rows, cols/group_size] */
} mxl_mlx_qweight;

typedef enum mxl_weight_kind {
    MXL_W_DENSE = 0, /* dtype F32 / F16 / BF16 */
    MXL_W_GGUF,      /* dtype a ggml block format */
    MXL_W_MLX        /* mlx describes it; dtype ignored */
} mxl_weight_kind;

typedef struct mxl_weight {
    mxl_weight_kind kind;
    mxl_dtype dtype;
    int64_t rows, cols;
    const void *data;     /* DENSE / GGUF: rows consecutive rows */
    mxl_mlx_qweight mlx;  /* MLX (rows/cols must equal the fields above) */
    const void *prepared; /* the backend's layout of W (weight_prepare), or NULL */
} mxl_weight;

/* True when bits/group_size/scale dtype are an MLX combination we run. */
int mxl_mlx_params_valid(int bits, int group_size, mxl_dtype scale_dtype);
/* Bytes of one packed MLX row (cols*bits/8). */
static inline int64_t mxl_mlx_row_bytes(int bits, int64_t cols) { return cols * bits / 8; }
/* True for the GGUF block formats the engine runs (Q4_0..Q8_0, Q2_K..Q6_K). */
int mxl_gguf_quant_supported(mxl_dtype t);

/* Checks that the format is one we run and the shape fits it (cols whole blocks / groups).
 * The message names `name`. */
mxl_status mxl_weight_check(const mxl_weight *W, const char *name, mxl_error *err);
/* Views a 2-D tensor [rows, cols] (dense F32/F16/BF16 or a GGUF block format) as a weight;
 * refuses other dtypes, other ranks and byte sizes that do not match, naming `name`. */
mxl_status mxl_weight_from_tensor(const mxl_tensor *t, const char *name, mxl_weight *out, mxl_error *err);
/* MLX affine weight from its three tensors: w U32 [rows, cols*bits/32], scales and biases
 * [rows, cols/group_size] in one float dtype. A declared bits/group_size that does not fit the
 * shapes is refused by name (DESIGN.md: check declared bits against tensor shapes). */
mxl_status mxl_weight_from_mlx(const mxl_tensor *w, const mxl_tensor *scales, const mxl_tensor *biases, int bits,
                               int group_size, const char *name, mxl_weight *out, mxl_error *err);
/* Bytes of one row of W's storage (DENSE/GGUF; for MLX the packed codes). */
int64_t mxl_weight_row_bytes(const mxl_weight *W);

/* ---- host codecs (reference; implemented by the CPU backend's reference kernels) ---- */
/* Row r of W as f32 (any format). */
void mxl_weight_dequant_row(const mxl_weight *W, int64_t r, float *out);
/* Reference dequantization of n elements (n a multiple of the block size) starting at src. Also
 * accepts F32/F16/BF16. */
void mxl_dequant_row_ref(mxl_dtype t, const void *src, float *dst, int64_t n);
/* Reference dequantization of MLX row `r` to f32 (s*q + b in f32). */
void mxl_mlx_dequant_row_ref(const mxl_mlx_qweight *W, int64_t r, float *out);
/* MLX's affine quantizer, except that a group whose values already lie on an evenly spaced grid
 * of at most 2^bits levels keeps that grid (scale = its step, bias = its minimum), so
 * requantizing GGUF blocks of the group's size (Q8_0 at 8 bits, Q4_0 / Q4_1 at 4 or more,
 * K-quant sub-blocks) is lossless up to the f32 arithmetic; other groups get the plain min/max
 * scheme. `mlxcel convert` uses it. n a multiple of gs, gs <= 128. */
void mxl_mlx_quantize_row_grid(int bits, int gs, const float *x, int64_t n, uint32_t *w, float *scales,
                               float *biases);

#endif
