/* family_exaone_moe.c - EXAONE MoE (transformers modeling_exaone_moe.py): Llama's pre-norm block
 * with an RMSNorm over each query and key head before RoPE, EXAONE 4's hybrid attention (with a
 * sliding window the sliding layers rotate and the full layers use no positions: NoPE; layer_types
 * as transformers saves them), and a sparse MoE block with DeepSeek V3's router (sigmoid,
 * correction bias, groups scored by their two best, norm_topk_prob, routed_scaling_factor) and
 * num_shared_experts shared experts on the layers is_moe_layer (the released checkpoints') or
 * mlp_layer_types (transformers') marks sparse, else those from first_k_dense_replace (default 1) on. */
#include <jansson.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* The released checkpoints' is_moe_layer (one true / false per layer), where present. */
static mxl_status is_moe_layer(mxl_family_ctx *c) {
    json_t *v = json_object_get(c->raw, "is_moe_layer");
    if (!v || json_is_null(v)) return MXL_OK;
    if (!json_is_array(v) || (int64_t)json_array_size(v) != c->hp->n_layers)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'is_moe_layer' must hold one true / false per layer (%lld)", c->ck->path,
                             (long long)c->hp->n_layers);
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < c->hp->n_layers; i++) {
        json_t *b = json_array_get(v, (size_t)i);
        if (!json_is_boolean(b))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'is_moe_layer' entry %lld is not true or false", c->ck->path, (long long)i);
        f[i] = json_is_true(b);
    }
    c->hp->layer_is_moe = f;
    return MXL_OK;
}

/* llama.cpp exaone-moe: the same block with its names; the sigmoid router's keys
 * (expert_weights_scale / _norm, expert_group_count / _used_count, exp_probs_b), the sparse layers
 * those with a router, sliding layers from attention.sliding_window_pattern (default every 4th
 * full) rotating and the full ones NoPE; the MTP blocks counted in block_count left out. */
static mxl_status exaone_moe_gguf(mxl_family_ctx *c) {
    mxl_status st;
    if ((st = mxl_family_gguf_drop_nextn(c)) || (st = mxl_family_gguf_rope_neox(c)) || (st = mxl_family_gguf_moe(c, false)) || (st = mxl_family_gguf_moe_sigmoid(c)) ||
        (st = mxl_family_sliding_pattern(c, 4, c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 128)))
        return st;
    return mxl_family_nope_full_layers(c);
}

static mxl_status exaone_moe_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    if (c->gguf) {
        hp->qk_norm_kind = MXL_QK_NORM_HEAD;
        return exaone_moe_gguf(c);
    }
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    c->names->moe_router_bias = "mlp.e_score_correction_bias"; /* EXAONE's checkpoints keep it beside the gate */
    if ((st = mxl_family_rope(c)) || (st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, false)) ||
        (st = mxl_family_moe_sigmoid(c)) || (st = mxl_family_moe_shared_count(c, "num_shared_experts")) ||
        (st = mxl_family_moe_layer_types(c, 1)) || (st = is_moe_layer(c)))
        return st;
    int64_t window = c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 0;
    if (window == 0) return MXL_OK;
    if (!mxl_family_sliding_from_layer_types(c, window))
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json sets sliding_window without layer_types", c->ck->path);
    return mxl_family_nope_full_layers(c);
}

const mxl_decoder_family mxl_family_exaone_moe = {
    .model_type = "exaone_moe", .registry_id = "exaone_moe", .hf_class = "ExaoneMoeForCausalLM", .names = &mxl_names_deepseek_moe,
    .setup = exaone_moe_setup, .gguf_arch = "exaone-moe", .convert_check = mxl_family_gguf_not_converted,
};
