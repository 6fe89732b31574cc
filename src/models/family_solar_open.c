/* family_solar_open.c - Solar Open (transformers modeling_solar_open.py, Upstage): Llama-style
 * grouped-query attention (q/k/v biases with attention_bias, o_proj never; no QK-norm; RoPE in
 * NEOX pairs over partial_rotary_factor of each head, default the whole head) with GLM-4 MoE's
 * sparse block on every layer (DeepSeek V3's sigmoid router with the selection-only correction
 * bias, n_group / topk_group, norm_topk_prob, routed_scaling_factor; n_shared_experts shared
 * experts of moe_intermediate_size; the names of family_glm4_moe.c). llama.cpp converts it as
 * glm4moe, which family_glm4_moe.c loads (its tensors and keys are that architecture's). */
#include "models/decoder_family.h"

static mxl_status solar_open_setup(mxl_family_ctx *c) {
    mxl_status st;
    c->hp->o_bias = false;
    c->hp->qk_norm_kind = MXL_QK_NORM_NONE;
    if ((st = mxl_family_rope(c)) || (st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, false)) || (st = mxl_family_moe_sigmoid(c)) ||
        (st = mxl_family_moe_first_dense(c, "first_k_dense_replace")))
        return st;
    return mxl_family_moe_shared_count(c, "n_shared_experts");
}

const mxl_decoder_family mxl_family_solar_open = {
    .model_type = "solar_open", .registry_id = "solar_open", .hf_class = "SolarOpenForCausalLM", .names = &mxl_names_deepseek_moe,
    .setup = solar_open_setup,
};
