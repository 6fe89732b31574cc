/* family_dots1.c - dots.llm1 (transformers modeling_dots1.py): Qwen3's attention (per-head
 * QK-norm before RoPE, biases on q/k/v/o with attention_bias), sliding-window layers where
 * layer_types marks them (older configs: from max_window_layers on, when sliding_window is set),
 * and GLM-4 MoE's mixture of experts: the first first_k_dense_replace layers dense, the rest
 * DeepSeek V3's sigmoid router (correction bias, n_group / topk_group, norm_topk_prob default
 * false, routed_scaling_factor) over n_routed_experts of moe_intermediate_size plus
 * n_shared_experts shared ones (mlp.shared_experts.*). mlx-lm stacks the experts as
 * mlp.experts.{gate,up,down}_proj (its switch layer is named experts here).
 * GGUF (llama.cpp dots1): NEOX RoPE, attn_q_norm / attn_k_norm, biases as the file has them,
 * exp_probs_b.bias, leading_dense_block_count, expert_weights_scale / _norm and expert_group_count
 * / _used_count; the sigmoid router whatever expert_gating_func says (the converter writes none). */
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names_dots1 = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .q_norm = "self_attn.q_norm", .k_norm = "self_attn.k_norm",
    .ffn_norm = "post_attention_layernorm", .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj",
    .moe_router = "mlp.gate", .moe_router_bias = "mlp.gate.e_score_correction_bias", .experts = "mlp.experts.",
    .expert_gate = "gate_proj", .expert_up = "up_proj", .expert_down = "down_proj", .exps_gate = "mlp.experts.gate_proj",
    .exps_up = "mlp.experts.up_proj", .exps_down = "mlp.experts.down_proj", .sh_gate = "mlp.shared_experts.gate_proj",
    .sh_up = "mlp.shared_experts.up_proj", .sh_down = "mlp.shared_experts.down_proj",
};

static mxl_status dots1_sliding(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    const int64_t window = c->cfg->sliding_window;
    if (window <= 0 || mxl_family_sliding_from_layer_types(c, window)) return MXL_OK;
    int64_t from;
    mxl_status st = mxl_family_int(c, "max_window_layers", hp->n_layers, &from);
    if (st) return st;
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    for (int64_t i = from; i < hp->n_layers; i++) f[i] = 1;
    hp->layer_is_sliding = f;
    hp->sliding_window = window;
    return MXL_OK;
}

static mxl_status dots1_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    int64_t n_shared;
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    if (c->gguf) {
        mxl_family_gguf_attn_biases(c);
        if ((st = mxl_family_gguf_rope_neox(c)) || (st = mxl_family_gguf_moe(c, false))) return st;
        return mxl_family_gguf_moe_sigmoid(c);
    }
    if ((st = mxl_family_rope(c)) || (st = dots1_sliding(c))) return st;
    if ((st = mxl_family_moe(c, "moe_intermediate_size", NULL, false, false)) || (st = mxl_family_moe_sigmoid(c)) ||
        (st = mxl_family_moe_first_dense(c, "first_k_dense_replace")) || (st = mxl_family_int(c, "n_shared_experts", 0, &n_shared)))
        return st;
    if (n_shared > 64) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'n_shared_experts' is out of range", c->ck->path);
    hp->shared_ffn = hp->moe_ffn * n_shared;
    return MXL_OK;
}

const mxl_decoder_family mxl_family_dots1 = {
    .model_type = "dots1", .registry_id = "dots1", .hf_class = "Dots1ForCausalLM", .names = &k_names_dots1, .setup = dots1_setup,
    .gguf_arch = "dots1", .convert_check = mxl_family_gguf_not_converted,
};
