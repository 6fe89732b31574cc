/* family_gguf.h - llama.cpp conventions shared by the decoder families that also load from GGUF
 * (decoder_family.h: a family's setup sees c->gguf, c->raw == NULL, hyper-parameters in c->cfg
 * from config_gguf.c and llama.cpp's tensor names in c->names). */
#ifndef MXL_MODELS_FAMILY_GGUF_H
#define MXL_MODELS_FAMILY_GGUF_H

#include <stdbool.h>
#include <stddef.h>

#include "models/decoder_family.h"

/* RoPE for an architecture llama.cpp converts WITHOUT permuting Q/K rows and runs in NEOX mode
 * (qwen2, qwen3, gemma*, phi3, starcoder2, ...): base rope.freq_base (default 10000), rotating the
 * first rope.dimension_count dims (config_gguf.c turns it into partial_rotary_factor), no scaling
 * (the decoder applies mxl_family_gguf_rope_scaling after setup). Sets hp->rope and
 * hp->rope_local. */
mxl_status mxl_family_gguf_rope_neox(mxl_family_ctx *c);

/* RoPE for an architecture whose Q/K rows llama.cpp's LlamaModel converter PERMUTES and runs in
 * ggml's "normal" mode (llama, mistral, granite, smollm3): the permuted rows pair (2i, 2i+1), so
 * GPT-J style; otherwise as mxl_family_gguf_rope_neox. Sets hp->rope and hp->rope_local. */
mxl_status mxl_family_gguf_rope_norm(mxl_family_ctx *c);

/* mxl_family_gguf_rope_neox with M-RoPE: the sections (time, height, width) from
 * rope.dimension_sections ([t, h, w, 0]; k_default when absent), as llama.cpp's qwen2vl / qwen3vl
 * and GLM-4.1V's glm4 write them. */
mxl_status mxl_family_gguf_mrope(mxl_family_ctx *c, const int32_t k_default[3]);

/* RoPE scaling as llama.cpp reads it from GGUF (llama-model.cpp load_hparams, llama-context.cpp,
 * ggml_rope_ext), applied to hp->rope (the global layers) after the family's setup. Sliding-window
 * layers (hp->rope_local) stay unscaled: llama.cpp's rope_freq_scale_train_swa is 1 for every
 * family we load from GGUF. Read:
 *  - tensor rope_freqs.weight (f32 [rotary_dim/2], positive): inv_freq[i] /= rope_freqs[i]
 *    (ggml's freq_factors; Llama 3.1/3.2 "llama3" rescaling is stored this way, with no
 *    rope.scaling.type key);
 *  - ARCH.rope.scaling.type (absent = "linear", as llama.cpp) with ARCH.rope.scaling.factor (old
 *    key ARCH.rope.scale_linear; absent or 0 = 1):
 *      none:   no scaling (the factor is ignored);
 *      linear: inv_freq / factor (ggml freq_scale = 1/factor);
 *      yarn:   ggml's YaRN with ext_factor 1, n_ctx_orig = ARCH.rope.scaling.original_context_length
 *              (else context_length), beta_fast/slow 32/1 unless ARCH.rope.scaling.yarn_beta_fast /
 *              yarn_beta_slow are present, cos/sin scaled by 0.1*ln(factor)+1 (what llama.cpp's
 *              attn_factor and ggml's mscale multiply to), or by ARCH.rope.scaling.yarn_attn_factor
 *              when present (transformers' attention_factor, which the converter writes there) -
 *              the same as transformers' "yarn" (rope.c MXL_ROPE_SCALING_YARN);
 *    anything else (longrope, unknown strings) is refused naming the key and value; so are
 *    yarn_ext_factor other than 1 and yarn_log_multiplier other than 0 (not implemented), and
 *    longrope's factor tensors rope_factors_long/short.weight (Phi-3 128k: no type key);
 *  - ARCH.rope.scaling.attn_factor (default 1) multiplies cos/sin for every type, as llama.cpp. */
mxl_status mxl_family_gguf_rope_scaling(mxl_family_ctx *c);

/* block_count less the multi-token-prediction (nextn) blocks some converters append after the
 * model's layers (ARCH.nextn_predict_layers: GLM-4 MoE, GLM-4.7-Flash, EXAONE MoE): not run. */
mxl_status mxl_family_gguf_drop_nextn(mxl_family_ctx *c);

/* Sliding layers as llama.cpp's load_swa_pattern(ml, pattern, dense_first = true) reads them
 * (Laguna, Command MoE): the flags of attention.sliding_window_pattern when it is an array (one
 * per layer, true = sliding), else every N-th layer from layer 0 on full (N: its integer value, else
 * `pattern`; 0: every layer sliding), the others sliding with `window`. */
mxl_status mxl_family_gguf_sliding_dense_first(mxl_family_ctx *c, int64_t pattern, int64_t window);

/* A convert_check for GGUF architectures that run but are not converted back to a transformers
 * directory yet: refuses by the architecture's name. */
mxl_status mxl_family_gguf_not_converted(const mxl_checkpoint *ck, mxl_error *err);

/* Attention biases as the GGUF has them (llama.cpp creates q/k/v and output biases as optional
 * tensors): hp->qkv_bias when blk.0.attn_q.bias or attn_qkv.bias is there, hp->o_bias when
 * blk.0.attn_output.bias is. */
void mxl_family_gguf_attn_biases(mxl_family_ctx *c);

/* Recurrent hybrids (LFM2, Granite 4): layers whose attention.head_count_kv entry is 0 get kind
 * `rec` (recurrent.h), the others attention; a per-layer array is required. */
mxl_status mxl_family_gguf_kv_kinds(mxl_family_ctx *c, uint8_t *kind, uint8_t rec);

/* Hybrids whose recurrent layers llama.cpp reads from attention.recurrent_layers (one boolean
 * per layer; extra entries for appended MTP blocks are ignored), else every
 * full_attention_interval-th layer (default `every_default`) attends and the others get kind
 * `rec` (Qwen3-Next / Qwen 3.5, MiniMax-Text-01). */
mxl_status mxl_family_gguf_recurrent_layers(mxl_family_ctx *c, uint8_t *kind, uint8_t rec, double every_default);

/* llama.cpp's ssm.* sizes (conv_kernel, inner_size, state_size, time_step_rank: Mamba's dt rank
 * or Mamba-2's head count, group_count, dt_b_c_rms) and its ssm_* tensor names for layers of kind
 * k (MXL_LAYER_MAMBA / MAMBA2); family_mamba.c. */
mxl_status mxl_family_gguf_ssm(mxl_family_ctx *c, uint8_t k);

/* A number "ARCH.<suffix>" of the GGUF metadata, `dflt` when absent. */
mxl_status mxl_family_gguf_number(mxl_family_ctx *c, const char *suffix, double dflt, double *out);
/* ARCH.<suffix> per layer: one integer for every layer or an array of one per layer (dflt when
 * absent), each in [lo, hi], into an arena array [n_layers]. */
mxl_status mxl_family_gguf_layer_ints(mxl_family_ctx *c, const char *suffix, int64_t dflt, int64_t lo, int64_t hi, int32_t **out);

/* A boolean "ARCH.<suffix>" of the GGUF metadata, `dflt` when absent; a format error naming the key
 * when it is not a BOOL. */
mxl_status mxl_family_gguf_bool(mxl_family_ctx *c, const char *suffix, bool dflt, bool *out);

/* "ARCH.<suffix>" (ARCH = general.architecture) into buf, for messages. */
const char *mxl_family_gguf_key(mxl_family_ctx *c, const char *suffix, char *buf, size_t cap);

/* True when the GGUF holds tensor "<layers>0.<module><suffix>" (optional tensors llama.cpp loads
 * when present: biases, fused projections). */
bool mxl_family_gguf_has_layer0(mxl_family_ctx *c, const char *module, const char *suffix);

#endif
