/* family_hunyuan_moe.c - Hunyuan MoE v1 (transformers modeling_hunyuan_v1_moe.py, Hunyuan-A13B):
 * Hunyuan dense's attention (per-head QK-norm self_attn.query_layernorm / key_layernorm after
 * RoPE, family_hunyuan.c) with a sparse MoE block on every layer: router mlp.gate.wg [num_experts,
 * hidden] in f32, softmax then the top moe_topk renormalised; experts and the always-on shared
 * MLP (mlp.shared_mlp.*) all of intermediate_size. num_experts and moe_topk may be per-layer lists
 * in the config class; only lists with one value throughout run (refused by name otherwise). */
#include <jansson.h>

#include "io/json_read.h"
#include "models/decoder_family.h"

/* config.json `key`: an integer, or a list of one integer repeated (per-layer form) */
static mxl_status uniform_int(mxl_family_ctx *c, const char *key, int64_t *out) {
    json_t *v = c->raw ? json_object_get(c->raw, key) : NULL;
    *out = -1;
    if (!v || json_is_null(v)) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' is missing", c->ck->path, key);
    if (!json_is_array(v)) {
        if (mxl_json_int(v, 1, INT64_C(1) << 20, out))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' must be a positive integer", c->ck->path, key);
        return MXL_OK;
    }
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        int64_t x;
        if (mxl_json_int(e, 1, INT64_C(1) << 20, &x))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' must hold positive integers", c->ck->path, key);
        if (*out >= 0 && x != *out)
            return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json '%s' differs between layers, which is not supported", c->ck->path, key);
        *out = x;
    }
    if (*out < 0) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' is an empty list", c->ck->path, key);
    return MXL_OK;
}

static mxl_status hunyuan_moe_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    mxl_decoder_names *nm = c->names; /* Qwen MoE's, with Hunyuan's own modules */
    nm->q_norm = "self_attn.query_layernorm";
    nm->k_norm = "self_attn.key_layernorm";
    nm->moe_router = "mlp.gate.wg";
    nm->sh_gate = "mlp.shared_mlp.gate_proj";
    nm->sh_up = "mlp.shared_mlp.up_proj";
    nm->sh_down = "mlp.shared_mlp.down_proj";
    c->hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    c->hp->qk_norm_after_rope = true;
    if ((st = mxl_family_rope(c))) return st;
    if ((st = uniform_int(c, "num_experts", &hp->n_experts)) || (st = uniform_int(c, "moe_topk", &hp->n_experts_used))) return st;
    hp->moe_ffn = hp->shared_ffn = hp->ffn;
    hp->moe_norm_topk = true; /* the softmax router (the default) */
    return MXL_OK;
}

const mxl_decoder_family mxl_family_hunyuan_v1_moe = {
    .model_type = "hunyuan_v1_moe", .registry_id = "hunyuan_moe", .hf_class = "HunYuanMoEV1ForCausalLM",
    .names = &mxl_names_qwen_moe, .setup = hunyuan_moe_setup,
};
