/* family_dbrx.c - DBRX (transformers modeling_dbrx.py): a LayerNorm (weight only) before attention
 * (norm_1) and before the MoE block (norm_2); attention through one fused Wqkv with its outputs
 * clamped to +-clip_qkv, NEOX RoPE; every layer a MoE block: softmax router (ffn.router.layer), top
 * moe_top_k renormalised by their sum (moe_normalize_expert_weights 1; none without it), experts
 * stored flat: w1 (gate) and v1 (up) [E * F, hidden], w2 [E * F, hidden] holding each expert's
 * down projection transposed (mlx-lm's conversions: ffn.experts.N.w1 / v1 / w2, w2 as [hidden, F]).
 * The sizes live in attn_config / ffn_config. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "io/json_read.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "transformer.wte", .final_norm = "transformer.norm_f", .lm_head = "lm_head", .layers = "transformer.blocks.",
    .attn_norm = "norm_attn_norm.norm_1", .qkv = "norm_attn_norm.attn.Wqkv", .o = "norm_attn_norm.attn.out_proj",
    .ffn_norm = "norm_attn_norm.norm_2", .moe_router = "ffn.router.layer", .exps_gate = "ffn.experts.mlp.w1",
    .exps_up = "ffn.experts.mlp.v1", .exps_down = "ffn.experts.mlp.w2", .exps_down_transposed = true,
    /* mlx-lm's conversions: one module per expert, w2 in the usual [hidden, F] */
    .experts = "ffn.experts.", .expert_gate = "w1", .expert_up = "v1", .expert_down = "w2",
};

/* an integer of a nested config object (absent: dflt) */
static mxl_status nested_int(mxl_family_ctx *c, json_t *obj, const char *where, const char *key, int64_t dflt, int64_t *out) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    *out = dflt;
    if (!v || json_is_null(v)) return MXL_OK;
    if (mxl_json_int(v, 0, INT64_C(1) << 40, out))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s.%s' must be a non-negative integer", c->ck->path, where, key);
    return MXL_OK;
}

/* llama.cpp dbrx: the same block with its names (attn_qkv, attn_output_norm before the MoE block),
 * LayerNorm epsilon and attention.clamp_kqv from the metadata, NEOX RoPE, the top k renormalised. */
static mxl_status dbrx_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double clip;
    c->names->qkv = "attn_qkv";
    c->names->ffn_norm = "attn_output_norm";
    hp->norm = MXL_NORM_LAYER;
    hp->norm_no_bias = true;
    hp->norm_eps = (float)(!isnan(c->cfg->layer_norm_eps) ? c->cfg->layer_norm_eps : 1e-5);
    if ((st = mxl_family_gguf_number(c, "attention.clamp_kqv", 0, &clip)) || (st = mxl_family_gguf_rope_neox(c)) ||
        (st = mxl_family_gguf_moe(c, true)))
        return st;
    hp->clip_qkv = clip > 0 ? (float)clip : 0.0f;
    return MXL_OK;
}

static mxl_status dbrx_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    if (c->gguf) return dbrx_gguf(c);
    json_t *attn = json_object_get(c->raw, "attn_config"), *ffn = json_object_get(c->raw, "ffn_config");
    if (!json_is_object(attn) || !json_is_object(ffn))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'attn_config' and 'ffn_config' must be objects", c->ck->path);
    int64_t kv, width, experts, top_k;
    if ((st = nested_int(c, attn, "attn_config", "kv_n_heads", hp->n_kv_heads, &kv)) ||
        (st = nested_int(c, ffn, "ffn_config", "ffn_hidden_size", 0, &width)) ||
        (st = nested_int(c, ffn, "ffn_config", "moe_num_experts", 0, &experts)) ||
        (st = nested_int(c, ffn, "ffn_config", "moe_top_k", 0, &top_k)))
        return st;
    json_t *act = json_object_get(ffn, "ffn_act_fn"), *name = json_is_object(act) ? json_object_get(act, "name") : NULL;
    if (name && (!json_is_string(name) || strcmp(json_string_value(name), "silu") != 0))
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'ffn_config.ffn_act_fn' other than silu is not supported", c->ck->path);
    json_t *p = json_object_get(ffn, "moe_normalize_expert_weights"), *clip = json_object_get(attn, "clip_qkv");
    if (p && !json_is_null(p) && (!json_is_number(p) || json_number_value(p) != 1.0))
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'ffn_config.moe_normalize_expert_weights' other than 1 (a sum) is not supported", c->ck->path);
    if (clip && !json_is_null(clip) && (!json_is_number(clip) || !(json_number_value(clip) > 0)))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'attn_config.clip_qkv' must be a positive number", c->ck->path);
    if (kv <= 0 || hp->n_heads % kv || width <= 0 || experts <= 0 || top_k <= 0)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'attn_config.kv_n_heads' or the ffn_config sizes are missing or out of range", c->ck->path);
    hp->n_kv_heads = kv;
    hp->norm = MXL_NORM_LAYER;
    hp->norm_no_bias = true;
    hp->norm_eps = 1e-5f; /* nn.LayerNorm's default */
    hp->clip_qkv = clip && json_is_number(clip) ? (float)json_number_value(clip) : 0.0f;
    hp->ffn = hp->moe_ffn = width;
    hp->n_experts = experts;
    hp->n_experts_used = top_k;
    hp->moe_norm_topk = p && json_is_number(p);
    hp->qkv_bias = hp->o_bias = false;
    return mxl_family_rope(c);
}

const mxl_decoder_family mxl_family_dbrx = {
    .model_type = "dbrx", .registry_id = "dbrx", .hf_class = "DbrxForCausalLM", .names = &k_names, .setup = dbrx_setup,
    .gguf_arch = "dbrx", .convert_check = mxl_family_gguf_not_converted,
};
