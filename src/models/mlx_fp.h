/* mlx_fp.h - MLX's floating-point quantization modes (mlx.core.quantize / mlx-lm's q_mode "mxfp4",
 * "mxfp8", "nvfp4") as weights the engine runs. Each matrix is a uint32 weight of packed codes
 * (every row one little-endian stream, lowest bits first) and uint8 scales, no biases:
 *  - mxfp4: E2M1 codes, 8 per word [rows, cols / 8]; scales E8M0 per 32 [rows, cols / 32]:
 *    value = e2m1(code) * 2^(s - 127). Repacked into ggml's MXFP4 blocks: the same codes and scale
 *    byte (ggml's doubled E2M1 values under a halved scale are the same numbers), so exact, at
 *    4.25 bits per weight, on the MXFP4 kernels.
 *  - mxfp8: E4M3 codes, 4 per word [rows, cols / 4]; scales E8M0 per 32: value = e4m3(code) *
 *    2^(s - 127). Stored as BF16 (4 significant bits and an exponent in BF16's range: exact for
 *    scales down to 2^-117), 16 bits per weight.
 *  - nvfp4: E2M1 codes, 8 per word; scales E4M3 per 16 [rows, cols / 16]: value = e2m1(code) *
 *    e4m3(s). Stored as BF16 (at most 6 significant bits: exact), 16 bits per weight.
 * The E4M3 code is OCP's "fn" variant (bias 7, no infinities, S.1111.111 NaN). */
#ifndef MXL_MODELS_MLX_FP_H
#define MXL_MODELS_MLX_FP_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/weight.h"
#include "core/arena.h"
#include "models/config.h"

/* True for the three modes; their fixed code width and group size (4 / 32, 8 / 32, 4 / 16). */
static inline bool mxl_mlx_fp_mode(mxl_quant_mode m) { return m == MXL_QUANT_MXFP4 || m == MXL_QUANT_MXFP8 || m == MXL_QUANT_NVFP4; }
static inline int mxl_mlx_fp_bits(mxl_quant_mode m) { return m == MXL_QUANT_MXFP8 ? 8 : 4; }
static inline int mxl_mlx_fp_group(mxl_quant_mode m) { return m == MXL_QUANT_NVFP4 ? 16 : 32; }

/* The weight [rows, cols] of an MLX fp-mode matrix (w, scales as above; mode MXFP4 / MXFP8 /
 * NVFP4), its repacked bytes allocated in arena. Shapes or dtypes that do not fit the mode are
 * refused naming `name`. */
mxl_status mxl_mlx_fp_weight(const mxl_tensor *w, const mxl_tensor *scales, mxl_quant_mode mode, const char *name, mxl_arena *arena,
                             mxl_weight *out, mxl_error *err);

/* The element decoders (reference). */
float mxl_fp_e2m1(uint8_t code);  /* 4-bit: sign, 2 exponent bits, 1 mantissa bit */
float mxl_fp_e4m3(uint8_t code);  /* 8-bit fn: sign, 4 exponent bits (bias 7), 3 mantissa bits */
float mxl_fp_e8m0(uint8_t scale); /* 2^(s - 127); 255 is NaN */

#endif
