/* family_granitemoe.c - Granite MoE (transformers modeling_granitemoe.py): Granite's block and
 * multipliers (family_granite.c) with a sparse MoE block on every layer: router
 * block_sparse_moe.router.layer [num_local_experts, hidden], the top num_experts_per_tok logits
 * softmaxed (the same weights as a softmax over all renormalised over the top k); the experts
 * stacked, gate and up fused as block_sparse_moe.input_linear [experts, 2 intermediate_size,
 * hidden] (gate rows first) and block_sparse_moe.output_linear [experts, hidden,
 * intermediate_size]; mlx-lm splits them into block_sparse_moe.switch_mlp.{gate,up,down}_proj.
 * The registry's granite row runs it.
 * GGUF (llama.cpp granitemoe): Granite's keys (family_granite.c), the fused experts split by the
 * converter into ffn_gate_exps / ffn_up_exps, ffn_down_exps; Q/K rows permuted as llama's. */
#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* mlx-lm's split form, or transformers' fused input_linear / output_linear where the checkpoint has them */
static const mxl_decoder_names k_names_granitemoe = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .ffn_norm = "post_attention_layernorm", .moe_router = "block_sparse_moe.router.layer",
    .exps_gate = "block_sparse_moe.switch_mlp.gate_proj", .exps_up = "block_sparse_moe.switch_mlp.up_proj",
    .exps_down = "block_sparse_moe.switch_mlp.down_proj", .exps_gate_up = "block_sparse_moe.input_linear",
    .exps_fused_down = "block_sparse_moe.output_linear",
};

static mxl_status granitemoe_setup(mxl_family_ctx *c) {
    mxl_status st;
    if ((st = mxl_family_granite_setup(c))) return st;
    if (c->gguf) return mxl_family_gguf_moe(c, true); /* llama.cpp renormalises (softmax over the top k) */
    return mxl_family_moe(c, NULL, NULL, true, false);
}

const mxl_decoder_family mxl_family_granitemoe = {
    .model_type = "granitemoe", .registry_id = "granite", .hf_class = "GraniteMoeForCausalLM", .names = &k_names_granitemoe,
    .setup = granitemoe_setup, .gguf_arch = "granitemoe", .gguf_permuted_qk = true,
    .convert_check = mxl_family_gguf_not_converted,
};
