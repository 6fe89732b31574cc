/* family_apertus.c - Apertus (transformers modeling_apertus.py, Swiss AI): Llama's attention
 * with an RMSNorm over each query and key head before RoPE (llama3 RoPE in the released
 * configs), norms named attention_layernorm / feedforward_layernorm, and a plain MLP up_proj ->
 * xIELU -> down_proj whose activation has learned scalars per layer (mlp.act_fn.alpha_p, alpha_n,
 * beta, eps: decoder.h). hidden_act other than xielu runs as that activation. No GGUF path yet
 * (llama.cpp's apertus). */
#include "models/decoder_family.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "attention_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .q_norm = "self_attn.q_norm", .k_norm = "self_attn.k_norm",
    .ffn_norm = "feedforward_layernorm", .up = "mlp.up_proj", .down = "mlp.down_proj", .act_params = "mlp.act_fn",
};

static mxl_status apertus_setup(mxl_family_ctx *c) {
    c->hp->mlp = MXL_MLP_PLAIN;
    c->hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    return mxl_family_rope(c);
}

const mxl_decoder_family mxl_family_apertus = {
    .model_type = "apertus", .registry_id = "apertus", .hf_class = "ApertusForCausalLM", .names = &k_names,
    .setup = apertus_setup,
};
