/* family_mistral4.c - Mistral 4 (transformers modeling_mistral4.py): DeepSeek-style multi-head
 * latent attention (models/mla.h) and a sparse MoE block from first_k_dense_replace on, with a
 * softmax router: only the topk_group best of n_group groups (a group's score: its two best
 * probabilities) are eligible, the top k renormalised with norm_topk_prob, times
 * routed_scaling_factor; n_shared_experts shared experts; Llama 4's attention temperature
 * (rope_parameters llama_4_scaling_beta) on the queries. */
#include "models/decoder_family.h"

static mxl_status mistral4_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    hp->o_bias = hp->qkv_bias;
    if ((st = mxl_family_mla(c, true)) || (st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, false)) ||
        (st = mxl_family_moe_first_dense(c, "first_k_dense_replace")) || (st = mxl_family_moe_shared_count(c, "n_shared_experts")) ||
        (st = mxl_family_moe_scale_groups(c)))
        return st;
    return mxl_family_llama4_temperature(c); /* on the latent queries: the same scale, absorbed */
}

const mxl_decoder_family mxl_family_mistral4 = {
    .model_type = "mistral4", .registry_id = "mistral4", .hf_class = "Mistral4ForCausalLM", .names = &mxl_names_deepseek_moe,
    .setup = mistral4_setup,
};
