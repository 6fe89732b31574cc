/* family_glm4_moe_lite.c - GLM-4.7-Flash (transformers modeling_glm4_moe_lite.py): DeepSeek V3's
 * multi-head latent attention (models/mla.h) and router (sigmoid, correction bias, groups scored
 * by their two best, norm_topk_prob, routed_scaling_factor) with n_shared_experts shared experts;
 * which layers are sparse comes from mlp_layer_types ("dense" / "sparse"; transformers' default:
 * the first dense, the rest sparse). GGUF files of it are llama.cpp deepseek2 files (they run as
 * deepseek_v3). */
#include "models/decoder_family.h"

static mxl_status glm4_moe_lite_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    hp->o_bias = hp->qkv_bias;
    if ((st = mxl_family_mla(c, true)) || (st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, false)) ||
        (st = mxl_family_moe_sigmoid(c)) || (st = mxl_family_moe_shared_count(c, "n_shared_experts")))
        return st;
    return mxl_family_moe_layer_types(c, 1); /* (transformers' default: the first layer dense) */
}

const mxl_decoder_family mxl_family_glm4_moe_lite = {
    .model_type = "glm4_moe_lite", .registry_id = "glm4_moe_lite", .hf_class = "Glm4MoeLiteForCausalLM",
    .names = &mxl_names_deepseek_moe, .setup = glm4_moe_lite_setup,
};
