/* quant_amx.h - the panel path of matmul.h (AMX-INT8 tiles, or their AVX-512 VNNI form on CPUs
 * without them) for the GGUF formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K, and for MLX
 * affine 4- and 8-bit weights (any group size).
 *
 * At load, a weight is given a second copy in "panel layout" (mxl_qamx_prepare): rows in panels
 * of 16, and per panel and 32-element block the codes already in the byte order a TDPBSSD /
 * TDPBSUD tile operand reads (the weight is the B operand: tile row kk holds, for each of the 16
 * rows n, elements 4kk..4kk+3), then the 16 rows' f16 scales d (and Q4_1's offsets m):
 *   Q8_0: codes[512] int8                                    + d[16]         = 544 bytes
 *   Q4_0: nibbles[256] (byte i: low = code byte i, high =    + d[16]         = 288 bytes
 *         code byte 256 + i; codes unsigned, q + 8)
 *   Q4_1: nibbles[256] as Q4_0 (codes unsigned, q)           + d[16] + m[16] = 320 bytes
 *   Q5_0 / Q5_1: Q4_0 / Q4_1's nibbles, the fifth bits as a 512-bit mask over the code bytes
 *         (64 bytes), then d (and m)                           = 352 / 384 bytes
 *   Q4_K: per 256 elements the 6-bit scales and mins as bytes, d and dmin, then 8 nibble
 *         blocks as Q4_1's (the kernel forms d * sc and -dmin * m) = 2368 bytes (GGUF 2304)
 *   Q5_K: Q4_K's with each block's nibbles followed by its fifth-bit mask (as Q5_1's)
 *                                                              = 2880 bytes (GGUF 2816)
 *   Q6_K / Q3_K / Q2_K: per 256 elements d (Q2_K also dmin), then per block the two 16-element
 *         halves' scales and the codes as bit planes (quant_panel.h) = 3360 / 1824 / 1344 bytes
 *         (GGUF 3360 / 1760 / 1344)
 *   MLX 4-bit: as Q4_1 with d, m = the scale and bias of the block's group; MLX 8-bit: codes[512]
 *   unsigned + d[16] + m[16] = 576 bytes. MLX scales in bf16 or f32 are kept as f32 (+64 bytes).
 * so a GGUF copy is the size of the original (padding rows of a last partial panel are zero); an
 * MLX one repeats each group's scale and bias per 32 elements.
 * The activations are two-term q8a blocks (mxl_block_q8a2, made by matmul.c: x ~ d q + d2 q2,
 * d2 = d / 256: x quantized on the finer scale d2 and split into high and low int8 codes, so
 * about 2^-16 of a block's largest value is lost instead of 2^-8 - enough for the default path
 * to give transformers' greedy tokens on the real models); a tile row is one token's codes, read
 * in place with the token stride.
 *
 * Per panel, block and group of up to 16 tokens: two tile products (one per activation term)
 * give the exact int32 dots of every (token, row) pair, then AVX-512 adds
 * (d_w d2_x) cvt(256 dot1 + dot2) (+ m_w s_x) into a per-token vector of the 16 rows' f32 sums
 * (the two dots folded in int32 first). Each (row, token) value is the same sequence of operations whatever the
 * token count, the token's place in the batch and the thread count (matmul.h: batch invariance),
 * and once a weight has the panel layout every token count, decode included, takes this path.
 * The plain references are mxl_vec_dot_ref / mxl_cpu_matmul_f32_ref (tested by tolerance, like
 * the other float paths) and, for the repacking, mxl_qamx_dequant_row_ref (bit for bit the GGUF
 * dequantization). */
#ifndef MXL_BACKENDS_CPU_QUANT_AMX_H
#define MXL_BACKENDS_CPU_QUANT_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/matmul.h"
#include "core/arena.h"

/* This CPU runs the path: the kernel table has a panel kernel (kernels.h: the AVX2 level or above,
 * or NEON on AArch64). The tile kernels run where it has AMX-INT8 (the AMX level and
 * CPUID.7.0:EDX bit 25); elsewhere the AVX-512 VNNI form takes every token count, below the VNNI
 * level the AVX2 form (quant_panel_avx2.c), on AArch64 the NEON form (quant_panel_neon.c) - all
 * with the same bits. */
bool mxl_qamx_available(void);
/* The tile kernels run here (AMX-INT8 at the AMX level; the kernel table's qamx_tiles). */
bool mxl_qamx_tiles_available(void);
/* The CPU has AMX-INT8 (asked by the AMX level's registration, kernels_avx512.c; false where the
 * tile kernels are not built). */
bool mxl_qamx_tiles_cpu(void);
/* W's format has a panel layout (GGUF Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / Q2_K..Q6_K, MLX 4 / 8 bits). */
bool mxl_qamx_format(const mxl_weight *W);
/* Bytes of W's panel layout (0 when the format has none). */
size_t mxl_qamx_packed_bytes(const mxl_weight *W);
/* W's rows into the panel layout at dst (mxl_qamx_packed_bytes bytes, 64-byte aligned). */
void mxl_qamx_pack(const mxl_weight *W, uint8_t *dst);
/* Row r of W dequantized from the panel layout W->prepared (scalar; equals the GGUF / MLX reference
 * dequantization bit for bit). */
void mxl_qamx_dequant_row_ref(const mxl_weight *W, int64_t r, float *out);
/* Gives W the panel layout (W->prepared, from `arena`, which owns it) when this CPU runs the path and
 * the format has one; otherwise leaves W as it is. */
mxl_status mxl_qamx_prepare(mxl_weight *W, mxl_arena *arena, mxl_error *err);
/* The pair form (5 to 8 tokens: both activation terms of every token in one A tile): bytes of
 * its A operands for n_tok tokens of W, 0 when W's panel path does not take it for n_tok; and
 * token t's share of them, from its q8a2 activations act_t (every token's, before the panels). */
#define MXL_QAMX_PAIR_MAX_TOKENS 8
size_t mxl_qamx_pair_bytes(const mxl_weight *W, int64_t n_tok);
void mxl_qamx_pair_token(const mxl_weight *W, int64_t n_tok, int64_t t, const void *act_t, uint8_t *abuf);
/* Panels [p0, p1) of W (W->prepared set) for n_tok tokens of q8a2 activations act (token t at
 * act + t * act_stride): y[t * ys + r] for the rows r of those panels. abuf: the pair form's
 * operands (64-byte aligned) when mxl_qamx_pair_bytes(W, n_tok) > 0, else NULL. */
void mxl_qamx_panels(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                     int64_t n_tok, const uint8_t *abuf, float *y, int64_t ys);
/* The same products by the AVX-512 VNNI forms alone, whatever the CPU's tiles (the AVX-512 VNNI
 * level's table; abuf unused). */
void mxl_qamx_panels_vnni(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                          int64_t n_tok, const uint8_t *abuf, float *y, int64_t ys);
/* The same products by the AVX2 form (call on CPUs at the AVX2 level or above; no pair form). */
void mxl_qamx_panels_avx2(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                          int64_t n_tok, float *y, int64_t ys);
/* The same products by the AArch64 NEON form (AArch64 builds only; sdot: with the dot-product
 * extension's SDOT, which the CPU must have). */
void mxl_qamx_panels_neon(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                          int64_t n_tok, float *y, int64_t ys, int sdot);
/* The plain reference of every form: per row and token, the exact int32 dot of each block
 * (sum of code x (256 q + q2); Q6_K per term and half) and the kernels' float steps in scalar
 * code, the same bits as the tile, VNNI and AVX2 kernels. */
void mxl_qamx_panels_ref(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                         int64_t n_tok, float *y, int64_t ys);

#endif
