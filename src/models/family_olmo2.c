/* family_olmo2.c - OLMo 2 (transformers modeling_olmo2.py): no norm before attention or MLP;
 * instead RMSNorms on their outputs (post_attention_layernorm, post_feedforward_layernorm)
 * before the residual add, and QK-norm over the whole q and k projections (q_norm
 * [heads*head_dim], k_norm [kv_heads*head_dim]) before RoPE. */
#include "models/decoder_family.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj", .o = "self_attn.o_proj",
    .q_norm = "self_attn.q_norm", .k_norm = "self_attn.k_norm", .post_attn_norm = "post_attention_layernorm",
    .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj",
    .post_ffn_norm = "post_feedforward_layernorm",
};

static mxl_status olmo2_setup(mxl_family_ctx *c) {
    c->hp->pre_norms = false;
    c->hp->post_norms = true;
    c->hp->qk_norm_kind = MXL_QK_NORM_FULL;
    return mxl_family_rope(c);
}

const mxl_decoder_family mxl_family_olmo2 = {"olmo2", false, &k_names, olmo2_setup};
