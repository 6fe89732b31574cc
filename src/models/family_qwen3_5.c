/* family_qwen3_5.c - the text decoders of Qwen 3.5 and Qwen 3.5 MoE (transformers
 * modeling_qwen3_5.py / modeling_qwen3_5_moe.py, Qwen3_5ForCausalLM: model_type qwen3_5_text /
 * qwen3_5_moe_text): Qwen3-Next's hybrid of Gated DeltaNet and gated full attention
 * (mxl_family_gdn_common), with the Gated DeltaNet's projections as separate matrices
 * (linear_attn.in_proj_qkv [q; k; v], in_proj_z, in_proj_b, in_proj_a) and a dense SwiGLU MLP
 * (Qwen 3.5) or on every layer Qwen3-Next's experts with a sigmoid-gated shared expert, the top-k
 * weights always renormalised (Qwen 3.5 MoE). The multimodal rotary sections (mrope_section) of
 * the released configs reduce to plain RoPE on text, where every position component is equal.
 * The released checkpoints wrap this decoder in a vision-language model (model_type qwen3_5 /
 * qwen3_5_moe, the decoder's keys in text_config): its text path runs here from
 * model.language_model.* (the vision tower's tensors are left alone), and from mlx-lm's
 * conversions of it (language_model.model.*, language_model.lm_head, the vision tower dropped,
 * norms stored as 1 + w).
 * GGUF (llama.cpp's qwen35 / qwen35moe, from either layout): Qwen3-Next's GGUF layout
 * (mxl_family_gguf_gdn) with b and a as ssm_beta / ssm_alpha and the value heads tiled
 * (gdn_v_tiled). */
#include "models/decoder_family.h"
#include "models/family_gguf.h"


static mxl_status qwen3_5_setup(mxl_family_ctx *c) {
    mxl_status st;
    if (c->gguf) {
        if ((st = mxl_family_gguf_gdn(c))) return st;
        c->names->ssm_ba = "ssm_beta", c->names->ssm_in_a = "ssm_alpha";
        c->hp->gdn_v_tiled = true;
        return MXL_OK;
    }
    mxl_family_text_prefix(c);
    if ((st = mxl_family_gdn_common(c))) return st;
    c->hp->gdn_split = true; /* (separate projections) */
    c->names->ssm_in = "linear_attn.in_proj_qkv", c->names->ssm_in_z = "linear_attn.in_proj_z";
    c->names->ssm_ba = "linear_attn.in_proj_b", c->names->ssm_in_a = "linear_attn.in_proj_a";
    mxl_family_gdn_mlx_norms(c, "linear_attn.conv1d");
    return MXL_OK;
}

static mxl_status qwen3_5_moe_setup(mxl_family_ctx *c) {
    mxl_status st;
    if ((st = qwen3_5_setup(c))) return st;
    if (c->gguf) return mxl_family_gguf_moe(c, true);
    if ((st = mxl_family_moe(c, "moe_intermediate_size", "shared_expert_intermediate_size", true, false))) return st;
    c->hp->moe_norm_topk = true; /* (no norm_topk_prob key: the router always renormalises) */
    c->hp->shared_expert_gate = c->hp->shared_ffn > 0;
    return MXL_OK;
}

const mxl_decoder_family mxl_family_qwen3_5_text = {
    .model_type = "qwen3_5_text", .registry_id = "qwen3_5", .hf_class = "Qwen3_5ForCausalLM", .names = &mxl_names_qwen_moe,
    .setup = qwen3_5_setup, .gaps = "the vision tower (text decoder only)",
};

const mxl_decoder_family mxl_family_qwen3_5_moe_text = {
    .model_type = "qwen3_5_moe_text", .registry_id = "qwen3_5_moe", .hf_class = "Qwen3_5MoeForCausalLM", .names = &mxl_names_qwen_moe,
    .setup = qwen3_5_moe_setup, .gaps = "the vision tower (text decoder only)",
};

const mxl_decoder_family mxl_family_qwen3_5 = {
    .model_type = "qwen3_5", .registry_id = "qwen3_5", .hf_class = "Qwen3_5ForConditionalGeneration", .names = &mxl_names_qwen_moe,
    .setup = qwen3_5_setup, .gaps = "the vision tower (text decoder only)", .text_config = true,
    .gguf_arch = "qwen35", .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_qwen3_5_moe = {
    .model_type = "qwen3_5_moe", .registry_id = "qwen3_5_moe", .hf_class = "Qwen3_5MoeForConditionalGeneration", .names = &mxl_names_qwen_moe,
    .setup = qwen3_5_moe_setup, .gaps = "the vision tower (text decoder only)", .text_config = true,
    .gguf_arch = "qwen35moe", .convert_check = mxl_family_gguf_not_converted,
};
