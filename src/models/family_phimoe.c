/* family_phimoe.c - Phi-3.5-MoE (transformers modeling_phimoe.py): Mistral-style grouped-query
 * attention (q/k/v/o biases with attention_bias, every layer sliding when sliding_window is set,
 * RoPE over the whole head) with LayerNorms (weight and bias, eps rms_norm_eps) before attention,
 * before the MLP and at the end, a sparse MoE block on every layer routed by sparsemixer
 * (decoder.h MXL_MOE_SPARSEMIXER: exactly two experts, router_jitter_noise the relative margin;
 * the weights are not renormalised) over Mixtral's experts (block_sparse_moe.gate,
 * block_sparse_moe.experts.N.w1 / w3 / w2, or mlx-lm's block_sparse_moe.switch_mlp.*), and an LM
 * head with a bias when lm_head_bias. The released longrope scales cos / sin by short_mscale /
 * long_mscale (not longrope's derived factor); other RoPE scaling is refused by name (transformers
 * keeps the short factors even past original_max_position_embeddings, where this takes the long
 * ones, as for Phi-3). llama.cpp's phimoe routes by plain
 * softmax top 2, not sparsemixer: no GGUF path here. */
#include <jansson.h>
#include <math.h>

#include "models/decoder_family.h"

static mxl_status phimoe_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double eps;
    hp->norm = MXL_NORM_LAYER;
    if ((st = mxl_family_bool(c, "lm_head_bias", false, &hp->lm_head_bias)) || (st = mxl_family_double(c, "router_jitter_noise", 0.01, &eps)) ||
        (st = mxl_family_rope(c)) || (st = mxl_family_sliding_all(c)) || (st = mxl_family_moe(c, NULL, NULL, false, false)))
        return st;
    if (hp->rope.scaling == MXL_ROPE_SCALING_LONGROPE) { /* cos / sin scaled by short_mscale / long_mscale, not the derived factor */
        json_t *rp = json_object_get(c->raw, "rope_parameters");
        if (!json_is_object(rp)) rp = json_object_get(c->raw, "rope_scaling");
        json_t *sm = json_object_get(rp, "short_mscale"), *lm = json_object_get(rp, "long_mscale");
        if (!json_is_number(sm) || !json_is_number(lm) || !(json_number_value(sm) > 0) || !(json_number_value(lm) > 0))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json longrope for phimoe needs positive 'short_mscale' and 'long_mscale'", c->ck->path);
        hp->rope.attention_factor = json_number_value(sm);
        hp->rope.attention_factor_long = json_number_value(lm);
        hp->rope_local = hp->rope;
    } else if (hp->rope.scaling != MXL_ROPE_SCALING_NONE) {
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json rope_scaling is not supported for phimoe (none and longrope are)", c->ck->path);
    }
    if (!(eps >= 0 && eps < 1e6))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'router_jitter_noise' must be a number from 0", c->ck->path);
    if (hp->n_experts < 2 || hp->n_experts_used != 2)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED,
                             "%s: config.json 'num_experts_per_tok' = %lld with %lld experts is not supported (sparsemixer routes exactly 2)",
                             c->ck->path, (long long)hp->n_experts_used, (long long)hp->n_experts);
    hp->moe_router = MXL_MOE_SPARSEMIXER;
    hp->moe_jitter_eps = (float)eps;
    hp->moe_norm_topk = false;
    return MXL_OK;
}

const mxl_decoder_family mxl_family_phimoe = {
    .model_type = "phimoe", .registry_id = "phimoe", .hf_class = "PhimoeForCausalLM", .names = &mxl_names_mixtral, .setup = phimoe_setup,
};
