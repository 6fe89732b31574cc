/* family_qwen_moe.c - Qwen2 MoE and Qwen3 MoE (transformers modeling_qwen2_moe.py,
 * modeling_qwen3_moe.py): the attention of Qwen2 (q/k/v biases, qkv_bias) and of Qwen3 (per-head
 * QK-norm, attention_bias) with a sparse MoE block (models/moe.h) on the layers
 * decoder_sparse_step and mlp_only_layers choose, dense MLPs of intermediate_size elsewhere.
 * Router mlp.gate [num_experts, hidden], softmax then top num_experts_per_tok, renormalised with
 * norm_topk_prob (default false); experts of moe_intermediate_size, one module per expert
 * (mlp.experts.N.gate_proj / up_proj / down_proj, the Hub layout transformers saves) or stacked
 * (mlx-lm's mlp.switch_mlp.*). Qwen2 MoE adds a shared expert (mlp.shared_expert.*, width
 * shared_expert_intermediate_size) scaled by sigmoid(mlp.shared_expert_gate h).
 * GGUF (llama.cpp qwen2moe / qwen3moe): ffn_gate_inp, ffn_{gate,up,down}_exps stacked
 * [experts, rows, cols], qwen2moe's ffn_*_shexp and ffn_gate_inp_shexp [hidden]; NEOX RoPE.
 * llama.cpp renormalises the top-k weights for qwen3moe and not for qwen2moe (its
 * build_moe_ffn arguments), unless the file says otherwise (expert_weights_norm). */
#include "models/convert_family.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* Llama's attention names with the Qwen MoE block; OLMoE uses the same. */
const mxl_decoder_names mxl_names_qwen_moe = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .q_norm = "self_attn.q_norm", .k_norm = "self_attn.k_norm",
    .ffn_norm = "post_attention_layernorm", .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj",
    .moe_router = "mlp.gate", .experts = "mlp.experts.", .expert_gate = "gate_proj", .expert_up = "up_proj",
    .expert_down = "down_proj", .exps_gate = "mlp.switch_mlp.gate_proj", .exps_up = "mlp.switch_mlp.up_proj",
    .exps_down = "mlp.switch_mlp.down_proj", .sh_gate = "mlp.shared_expert.gate_proj", .sh_up = "mlp.shared_expert.up_proj",
    .sh_down = "mlp.shared_expert.down_proj", .sh_router = "mlp.shared_expert_gate",
};

static mxl_status qwen2_moe_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    hp->o_bias = false;
    if (c->gguf) {
        hp->qkv_bias = mxl_family_gguf_has_layer0(c, "attn_q", ".bias");
        if ((st = mxl_family_gguf_rope_neox(c))) return st;
        return mxl_family_gguf_moe(c, false);
    }
    if ((st = mxl_family_bool(c, "qkv_bias", true, &hp->qkv_bias))) return st;
    if ((st = mxl_family_rope(c)) || (st = mxl_family_qwen_sliding(c))) return st;
    if ((st = mxl_family_moe(c, "moe_intermediate_size", "shared_expert_intermediate_size", false, true))) return st;
    hp->shared_expert_gate = hp->shared_ffn > 0;
    return MXL_OK;
}

static mxl_status qwen3_moe_setup(mxl_family_ctx *c) {
    mxl_status st;
    c->hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    if (c->gguf) {
        if ((st = mxl_family_gguf_rope_neox(c))) return st;
        return mxl_family_gguf_moe(c, true);
    }
    if ((st = mxl_family_rope(c)) || (st = mxl_family_qwen_sliding(c))) return st;
    return mxl_family_moe(c, "moe_intermediate_size", NULL, false, true);
}

const mxl_decoder_family mxl_family_qwen2_moe = {
    .model_type = "qwen2_moe", .registry_id = "qwen2_moe", .hf_class = "Qwen2MoeForCausalLM", .names = &mxl_names_qwen_moe,
    .setup = qwen2_moe_setup, .gguf_arch = "qwen2moe", .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_qwen3_moe = {
    .model_type = "qwen3_moe", .registry_id = "qwen3_moe", .hf_class = "Qwen3MoeForCausalLM", .names = &mxl_names_qwen_moe,
    .setup = qwen3_moe_setup, .gguf_arch = "qwen3moe", .convert_check = mxl_family_gguf_not_converted,
};
