/* convert.h - `mlxcel convert` (like mlx_lm.convert): a checkpoint written as a Hugging Face /
 * MLX directory: config.json, model.safetensors, tokenizer files, generation_config.json.
 *
 * Inputs: a Hugging Face safetensors directory (dense F32/F16/BF16 or MLX affine-quantized), or a
 * GGUF file of an architecture we run from GGUF (llama, mistral, gemma3). GGUF tensors are
 * dequantized (the reference dequantization, bit-exact with the `gguf` package), renamed to
 * transformers' names, Llama Q/K rows un-permuted (llama.cpp permutes them for its RoPE), and
 * Gemma norm weights shifted back by -1 (llama.cpp stores 1 + w); config.json is built from the
 * GGUF metadata; the vocabulary is written as tokenizer.json (tokenizer/tok_export.c).
 * Outputs: float tensors in `dtype`; with q_bits, every 2-D ".weight" matrix whose columns are a
 * multiple of the group size (linear layers and embeddings, not norms) MLX-affine quantized
 * (w U32 packed codes, scales and biases in `dtype`), and config.json's "quantization" /
 * "quantization_config" set, as mlx-lm writes them. Groups whose values already lie on a grid of
 * at most 2^bits levels keep it (mxl_mlx_quantize_row_grid): GGUF Q8_0 / Q4_x blocks converted at
 * 8 bits with group 32 come through exactly (f32 scales) - the SmolLM2 GGUF so converted gives
 * transformers' greedy tokens on 5 of 5 prompts. The unquantized output loads in transformers. */
#ifndef MXL_MODELS_CONVERT_H
#define MXL_MODELS_CONVERT_H

#include "core/dtype.h"
#include "core/status.h"

typedef struct mxl_convert_opts {
    mxl_dtype dtype;  /* F32, F16 or BF16; MXL_DTYPE_INVALID: the source's torch_dtype, F16 for GGUF */
    int q_bits;       /* 0: no quantization; else 2..8 */
    int q_group_size; /* 32, 64 or 128 (0: 64) */
} mxl_convert_opts;

/* Writes the converted checkpoint into out_dir (created; must not hold a config.json already). */
mxl_status mxl_convert(const char *in_path, const char *out_dir, const mxl_convert_opts *opts, mxl_error *err);

#endif
