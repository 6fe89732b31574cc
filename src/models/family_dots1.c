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

static mxl_status dots1_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    if (c->gguf) {
        mxl_family_gguf_attn_biases(c);
        if ((st = mxl_family_gguf_rope_neox(c)) || (st = mxl_family_gguf_moe(c, false))) return st;
        return mxl_family_gguf_moe_sigmoid(c);
    }
    /* mlx-lm's stacked experts: mlp.experts.*_proj */
    c->names->exps_gate = "mlp.experts.gate_proj";
    c->names->exps_up = "mlp.experts.up_proj";
    c->names->exps_down = "mlp.experts.down_proj";
    if ((st = mxl_family_rope(c)) || (st = mxl_family_sliding_max_window(c))) return st;
    if ((st = mxl_family_moe(c, "moe_intermediate_size", NULL, false, false)) || (st = mxl_family_moe_sigmoid(c)) ||
        (st = mxl_family_moe_first_dense(c, "first_k_dense_replace")))
        return st;
    return mxl_family_moe_shared_count(c, "n_shared_experts");
}

const mxl_decoder_family mxl_family_dots1 = {
    .model_type = "dots1", .registry_id = "dots1", .hf_class = "Dots1ForCausalLM", .names = &mxl_names_deepseek_moe, .setup = dots1_setup,
    .gguf_arch = "dots1", .convert_check = mxl_family_gguf_not_converted,
};
