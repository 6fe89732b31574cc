/* convert_experts.h - `mlxcel convert -q` of stacked experts: the expert tensors transformers saves
 * stacked (Granite MoE's fused input_linear [E, 2F, H] and output_linear; transformers 5's own
 * "<experts>gate_up_proj" / "down_proj", [E, out, in], or [E, in, out] for Llama 4 and GPT-OSS,
 * whose gate and up also alternate; DBRX's flat w1 / v1 / w2 [E F, H], w2 holding [in, out] per
 * expert) restated in mlx-lm's layout: one [E, out, in] stack per projection under the family's
 * stacked names (switch_mlp.gate_proj, experts.gate_proj, ...), or one module per expert where the
 * family's stacked names are the source's own (DBRX: experts.N.w1). MLX quantization groups the
 * last axis of [.., out, in], so only this layout quantizes; the loader reads it as it reads
 * mlx-lm's conversions. Implemented in convert_experts.c, used by convert.c. */
#ifndef MXL_MODELS_CONVERT_EXPERTS_H
#define MXL_MODELS_CONVERT_EXPERTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "models/checkpoint.h"

/* One output tensor cut from a stacked source. Output row o of expert e (e = expert when that is
 * >= 0, else the row's stack index) is row off + o * stride of expert e's source matrix, which is
 * [src_rows, cols], or with transposed the transpose of a stored [cols, src_rows]. */
typedef struct mxl_expert_view {
    char src[256];       /* the source tensor */
    char dst[256];       /* the output tensor */
    int64_t n_exp;       /* experts in the source (and in the output unless expert >= 0) */
    int64_t expert;      /* >= 0: the output is this expert's [rows, cols] alone */
    int64_t rows, cols;  /* one expert's output matrix; a bias: [rows] (cols 1) */
    int64_t src_rows;    /* rows of one expert's source matrix */
    int64_t off, stride; /* the source rows taken */
    bool transposed;     /* the source stores each expert's matrix as [cols, src_rows] */
    bool bias;           /* a vector per expert: the output is [n_exp, rows] */
} mxl_expert_view;

/* The views of every sparse layer of safetensors checkpoint ck whose experts are stored stacked
 * (none for one module per expert, GGUF files, MLX-quantized experts). *out is freed with mxl_free.
 * Refuses what mxl_decoder_load refuses, and a source tensor whose size disagrees with the
 * config's expert count and widths (naming the tensor). */
mxl_status mxl_convert_expert_views(const mxl_checkpoint *ck, mxl_expert_view **out, size_t *n, mxl_error *err);

#endif
