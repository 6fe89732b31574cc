/* family_mixtral.c - Mixtral (transformers modeling_mixtral.py): Mistral's attention (sliding
 * window on every layer when sliding_window is set) with a sparse MoE block on every layer:
 * router block_sparse_moe.gate [num_local_experts, hidden], softmax then the top
 * num_experts_per_tok renormalised (always), experts of intermediate_size as
 * block_sparse_moe.experts.N.w1 (gate), w3 (up), w2 (down), or stacked as mlx-lm writes them
 * (block_sparse_moe.switch_mlp.*).
 * GGUF: llama.cpp converts Mixtral as "llama" with experts (llama.expert_count > 0; config_gguf.c
 * gives such files model_type mixtral): Q/K rows permuted as llama's (RoPE on adjacent pairs),
 * ffn_gate_inp and stacked ffn_*_exps, the top-k renormalised as llama.cpp's llama graph does. */
#include "models/decoder_family.h"
#include "models/family_gguf.h"

const mxl_decoder_names mxl_names_mixtral = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .ffn_norm = "post_attention_layernorm", .moe_router = "block_sparse_moe.gate",
    .experts = "block_sparse_moe.experts.", .expert_gate = "w1", .expert_up = "w3", .expert_down = "w2",
    .exps_gate = "block_sparse_moe.switch_mlp.gate_proj", .exps_up = "block_sparse_moe.switch_mlp.up_proj",
    .exps_down = "block_sparse_moe.switch_mlp.down_proj",
};

static mxl_status mixtral_setup(mxl_family_ctx *c) {
    mxl_status st;
    if (c->gguf) return (st = mxl_family_gguf_rope_norm(c)) ? st : mxl_family_gguf_moe(c, true);
    if ((st = mxl_family_rope(c)) || (st = mxl_family_sliding_all(c))) return st;
    return mxl_family_moe(c, NULL, NULL, true, false);
}

const mxl_decoder_family mxl_family_mixtral = {
    .model_type = "mixtral", .registry_id = "mixtral", .hf_class = "MixtralForCausalLM", .names = &mxl_names_mixtral,
    .setup = mixtral_setup, .gguf_arch = "llama", .gguf_permuted_qk = true, .convert_check = mxl_family_gguf_not_converted,
};
