/* family_glm4_moe.c - GLM-4.5 / GLM-4.6 MoE (transformers modeling_glm4_moe.py): Llama-style
 * attention with q/k/v biases (attention_bias; o_proj never), an optional per-head QK-norm
 * (use_qk_norm), RoPE on the first partial_rotary_factor (default 0.5) of each head in NEOX
 * pairs; the first first_k_dense_replace layers have a dense MLP, the rest a sparse MoE block
 * (models/moe.h) with DeepSeek V3's router: sigmoid scores, a selection-only correction bias
 * (mlp.gate.e_score_correction_bias), n_group / topk_group group-limited choice, the chosen
 * scores renormalised (norm_topk_prob) and times routed_scaling_factor; experts of
 * moe_intermediate_size (mlp.experts.N.*, mlx-lm's mlp.switch_mlp.*) and n_shared_experts
 * shared experts as one MLP of moe_intermediate_size * n_shared_experts (mlp.shared_experts.*).
 * The multi-token-prediction layer of the released checkpoints (num_mtp_layers, stored after the
 * last layer) is not run.
 * GGUF (llama.cpp glm4moe): the same with llama.cpp's names; the sigmoid router's keys
 * (expert_weights_scale / _norm, expert_group_count / _used_count), NEOX RoPE on the first
 * rope.dimension_count dims; the nextn blocks counted in block_count are left out.
 * GLM-4.5V (modeling_glm4v_moe.py, Glm4vMoeForConditionalGeneration) runs this decoder under
 * text_config at model.language_model.* with M-RoPE (mrope_section over the rotary pairs, default
 * [8, 12, 12]); its vision tower is GLM-4.1V's (models/vlm_qwen2vl.c). */
#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* DeepSeek V3-style MoE names (GLM-4 MoE's; dots1 and ERNIE 4.5 MoE adjust a few in setup) */
const mxl_decoder_names mxl_names_deepseek_moe = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .q_norm = "self_attn.q_norm", .k_norm = "self_attn.k_norm",
    .ffn_norm = "post_attention_layernorm", .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj",
    .moe_router = "mlp.gate", .moe_router_bias = "mlp.gate.e_score_correction_bias", .experts = "mlp.experts.",
    .expert_gate = "gate_proj", .expert_up = "up_proj", .expert_down = "down_proj", .exps_gate = "mlp.switch_mlp.gate_proj",
    .exps_up = "mlp.switch_mlp.up_proj", .exps_down = "mlp.switch_mlp.down_proj", .sh_gate = "mlp.shared_experts.gate_proj",
    .sh_up = "mlp.shared_experts.up_proj", .sh_down = "mlp.shared_experts.down_proj",
};

/* llama.cpp glm4moe: block_count includes the nextn (MTP) blocks the converter appends after the
 * model's layers (nextn_predict_layers): those are not run. The MLP's pre-norm is named
 * post_attention_norm there. */
static mxl_status glm4_moe_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    if ((st = mxl_family_gguf_drop_nextn(c))) return st;
    c->names->ffn_norm = "post_attention_norm";
    mxl_family_gguf_attn_biases(c);
    hp->o_bias = false;
    hp->qk_norm_kind = mxl_family_gguf_has_layer0(c, "attn_q_norm", ".weight") ? MXL_QK_NORM_HEAD : MXL_QK_NORM_NONE;
    if ((st = mxl_family_gguf_rope_neox(c)) || (st = mxl_family_gguf_moe(c, true))) return st;
    return mxl_family_gguf_moe_sigmoid(c);
}

/* GLM-4.5's decoder; with mrope (GLM-4.5V's text model) under M-RoPE. */
static mxl_status glm4_moe_common(mxl_family_ctx *c, bool mrope) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool qk_norm;
    if (c->gguf) return glm4_moe_gguf(c);
    hp->o_bias = false;
    if ((st = mxl_family_bool(c, "use_qk_norm", false, &qk_norm))) return st;
    hp->qk_norm_kind = qk_norm ? MXL_QK_NORM_HEAD : MXL_QK_NORM_NONE;
    static const int32_t k_mrope[3] = {8, 12, 12}; /* (Glm4vMoeTextRotaryEmbedding's default) */
    if ((st = mrope ? mxl_family_mrope(c, k_mrope, 10000.0) : mxl_family_rope(c)) ||
        (st = mxl_family_rope_partial_default(c, 0.5)))
        return st;
    if ((st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, false)) || (st = mxl_family_moe_sigmoid(c)) ||
        (st = mxl_family_moe_first_dense(c, "first_k_dense_replace")))
        return st;
    return mxl_family_moe_shared_count(c, "n_shared_experts");
}

static mxl_status glm4_moe_setup(mxl_family_ctx *c) { return glm4_moe_common(c, false); }
static mxl_status glm4v_moe_setup(mxl_family_ctx *c) { return glm4_moe_common(c, true); }

const mxl_decoder_family mxl_family_glm4_moe = {
    .model_type = "glm4_moe", .registry_id = "glm4_moe", .hf_class = "Glm4MoeForCausalLM", .names = &mxl_names_deepseek_moe,
    .setup = glm4_moe_setup, .gguf_arch = "glm4moe", .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_glm4v_moe = {
    .model_type = "glm4v_moe", .registry_id = "glm4v_moe", .hf_class = "Glm4vMoeForConditionalGeneration", .names = &mxl_names_deepseek_moe,
    .setup = glm4v_moe_setup, .text_config = true, .gaps = "video input",
};
