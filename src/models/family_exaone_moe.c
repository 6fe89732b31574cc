/* family_exaone_moe.c - EXAONE MoE (transformers modeling_exaone_moe.py): Llama's pre-norm block
 * with an RMSNorm over each query and key head before RoPE, EXAONE 4's hybrid attention (with a
 * sliding window the sliding layers rotate and the full layers use no positions: NoPE; layer_types
 * as transformers saves them), and a sparse MoE block with DeepSeek V3's router (sigmoid,
 * correction bias, groups scored by their two best, norm_topk_prob, routed_scaling_factor) and
 * num_shared_experts shared experts on the layers is_moe_layer (the released checkpoints') or
 * mlp_layer_types (transformers') marks sparse, else those from first_k_dense_replace (default 1) on. */
#include "models/decoder_family.h"
#include "models/family_gguf.h"

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
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    if (c->gguf) return exaone_moe_gguf(c);
    c->names->moe_router_bias = "mlp.e_score_correction_bias"; /* EXAONE's checkpoints keep it beside the gate */
    if ((st = mxl_family_rope(c)) || (st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, false)) ||
        (st = mxl_family_moe_sigmoid(c)) || (st = mxl_family_moe_shared_count(c, "num_shared_experts")) ||
        (st = mxl_family_moe_layer_types(c, 1)))
        return st;
    uint8_t *moe; /* the released checkpoints' is_moe_layer, where present */
    if ((st = mxl_family_layer_list(c, "is_moe_layer", &moe))) return st;
    if (moe) hp->layer_is_moe = moe;
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
