/* convert.h - `mlxcel convert` (like mlx_lm.convert): a checkpoint written as a Hugging Face /
 * MLX directory: config.json, model.safetensors, tokenizer files, generation_config.json.
 *
 * Inputs: a Hugging Face safetensors directory (dense F32/F16/BF16 or MLX affine-quantized; mlx-lm's
 * GPT-2, which renames the modules and stores nn.Linear matrices, is written back in transformers'
 * GPT2LMHeadModel layout: "transformer." names, Conv1D [in, out]), or a
 * GGUF file of an architecture we run from GGUF (llama, mistral, qwen2, qwen3, gemma, gemma2,
 * gemma3, phi3, starcoder2, olmo2, granite, smollm3, gpt2). GGUF tensors are dequantized (the
 * reference dequantization, bit-exact with the `gguf` package), renamed to transformers' names
 * (Phi-3's attn_qkv / ffn_up -> qkv_proj / gate_up_proj, GPT-2's position_embd -> wpe), Q/K rows
 * un-permuted for the families llama.cpp permutes (llama, mistral, granite, smollm3), Gemma /
 * Gemma 2 / Gemma 3 norm weights shifted back by -1 (llama.cpp stores 1 + w), and GPT-2's layer
 * matrices transposed back to Conv1D [in, out]; config.json is built from the GGUF metadata and
 * says what llama.cpp runs (Gemma 2's 1/sqrt(head_dim) scale as query_pre_attn_scalar, Granite's
 * four scales as its multipliers, SmolLM3's NoPE every 4th layer as no_rope_layers, no sliding
 * window for qwen2 / qwen3 / phi3 / starcoder2, bos / eos null when the GGUF has none). Refused
 * by name: RoPE scaling (rope.scaling.type other than none, a factor other than 1,
 * rope_freqs / rope_factors tensors), OLMo 3 (olmo2 with a sliding window), Granite without RoPE
 * or logit_scale, Phi-3 with separate Q/K/V. The vocabulary is written as tokenizer.json
 * (tokenizer/tok_export.c); tokenizer.ggml.model "none" (no vocabulary) writes no tokenizer.
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
