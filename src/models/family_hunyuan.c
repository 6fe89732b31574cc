/* family_hunyuan.c - Hunyuan dense v1 (transformers modeling_hunyuan_v1_dense.py): Llama's block
 * with an RMSNorm over each query and key head (self_attn.query_layernorm / key_layernorm,
 * [head_dim]) applied after RoPE, not before as in Qwen3. RoPE types as the shared parser reads
 * them (Hunyuan's "dynamic" with alpha is refused by name there). No GGUF path yet. */
#include "models/decoder_family.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .q_norm = "self_attn.query_layernorm", .k_norm = "self_attn.key_layernorm",
    .ffn_norm = "post_attention_layernorm", .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj",
};

static mxl_status hunyuan_setup(mxl_family_ctx *c) {
    c->hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    c->hp->qk_norm_after_rope = true;
    return mxl_family_rope(c);
}

const mxl_decoder_family mxl_family_hunyuan_v1_dense = {
    .model_type = "hunyuan_v1_dense", .registry_id = "hunyuan_dense", .hf_class = "HunYuanDenseV1ForCausalLM",
    .names = &k_names, .setup = hunyuan_setup,
};
