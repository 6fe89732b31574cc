/* family_moe.c - the mixture-of-experts conventions shared by the MoE families (decoder_family.h:
 * mxl_family_moe, mxl_family_gguf_moe): how many experts, how many each token uses, their width,
 * the shared expert, which layers are sparse, and whether the top-k weights are renormalised,
 * from config.json (transformers' names) or from the GGUF metadata (llama.cpp's). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "io/json_read.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* qwen2_moe / qwen3_moe: layer i is sparse unless listed in mlp_only_layers, and only when
 * (i + 1) % decoder_sparse_step == 0 (transformers' Qwen2MoeDecoderLayer). */
static mxl_status qwen_sparse_layers(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    int64_t step;
    mxl_status st;
    if ((st = mxl_family_int(c, "decoder_sparse_step", 1, &step))) return st;
    if (step < 1) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'decoder_sparse_step' must be at least 1", c->ck->path);
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < hp->n_layers; i++) f[i] = (i + 1) % step == 0;
    json_t *only = c->raw ? json_object_get(c->raw, "mlp_only_layers") : NULL;
    if (only && !json_is_null(only)) {
        if (!json_is_array(only))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'mlp_only_layers' must be a list of layer indices", c->ck->path);
        size_t k;
        json_t *v;
        json_array_foreach(only, k, v) {
            int64_t l;
            if (mxl_json_int(v, 0, hp->n_layers - 1, &l))
                return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'mlp_only_layers' holds an entry that is not a layer index below %lld",
                                     c->ck->path, (long long)hp->n_layers);
            f[l] = 0;
        }
    }
    hp->layer_is_moe = f;
    return MXL_OK;
}

mxl_status mxl_family_moe(mxl_family_ctx *c, const char *ffn_key, const char *shared_key, bool norm_default, bool qwen_layers) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    hp->n_experts = c->cfg->num_experts;
    hp->n_experts_used = c->cfg->num_experts_per_tok;
    if (hp->n_experts <= 0)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'num_experts' is missing or 0", c->ck->path);
    if (hp->n_experts_used <= 0)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'num_experts_per_tok' is missing or 0", c->ck->path);
    if (ffn_key) {
        if ((st = mxl_family_int(c, ffn_key, -1, &hp->moe_ffn))) return st;
        if (hp->moe_ffn < 0) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' is missing", c->ck->path, ffn_key);
    } else {
        hp->moe_ffn = hp->ffn;
    }
    if (shared_key && (st = mxl_family_int(c, shared_key, 0, &hp->shared_ffn))) return st;
    hp->moe_norm_topk = norm_default;
    if ((st = mxl_family_bool(c, "norm_topk_prob", norm_default, &hp->moe_norm_topk))) return st;
    return qwen_layers ? qwen_sparse_layers(c) : MXL_OK;
}

/* blk.<i>.<module>.weight of the GGUF, or NULL */
static const mxl_gguf_tensor_info *layer_tensor(mxl_family_ctx *c, int64_t i, const char *module) {
    char name[96];
    snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)i, module);
    return mxl_gguf_find_tensor(c->ck->gguf, name);
}

mxl_status mxl_family_gguf_moe(mxl_family_ctx *c, bool norm) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double ffn, sh, lead;
    char key[192];
    hp->n_experts = c->cfg->num_experts > 0 ? c->cfg->num_experts : 0;
    hp->n_experts_used = c->cfg->num_experts_per_tok;
    if (hp->n_experts == 0) return MXL_OK; /* a dense file of an architecture that may have experts */
    if ((st = mxl_family_gguf_number(c, "expert_feed_forward_length", (double)hp->ffn, &ffn)) ||
        (st = mxl_family_gguf_number(c, "expert_shared_feed_forward_length", 0, &sh)) ||
        (st = mxl_family_gguf_number(c, "leading_dense_block_count", 0, &lead)))
        return st;
    if (!(ffn > 0 && ffn < (double)(INT64_C(1) << 26)) || !(sh >= 0 && sh < (double)(INT64_C(1) << 26)) || !(lead >= 0))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' (or the shared expert's, or the dense block count) is out of range",
                             c->ck->path, mxl_family_gguf_key(c, "expert_feed_forward_length", key, sizeof key));
    hp->moe_ffn = (int64_t)ffn;
    hp->moe_norm_topk = norm;
    /* sparse layers: those holding a router (llama.cpp creates ffn_gate_inp on exactly those);
     * the shared experts' width as their tensors have it (the converters write its key
     * differently: qwen2moe the whole width, ernie4_5-moe one expert's, dots1 none), and their
     * sigmoid gate where ffn_gate_inp_shexp is there */
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    hp->shared_ffn = 0;
    for (int64_t i = 0; i < hp->n_layers; i++) {
        f[i] = i >= (int64_t)lead && layer_tensor(c, i, "ffn_gate_inp");
        const mxl_gguf_tensor_info *sh_gate = layer_tensor(c, i, "ffn_gate_shexp");
        if (!sh_gate) sh_gate = layer_tensor(c, i, "ffn_up_shexp"); /* (a plain shared expert: Nemotron-H) */
        if (sh_gate && sh_gate->tensor.ndim == 2 && hp->shared_ffn == 0) hp->shared_ffn = sh_gate->tensor.shape[0];
        hp->shared_expert_gate |= layer_tensor(c, i, "ffn_gate_inp_shexp") != NULL;
    }
    hp->layer_is_moe = f;
    if (hp->shared_ffn == 0 && sh > 0)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: the metadata declares shared experts but no layer has ffn_gate_shexp", c->ck->path);
    return MXL_OK;
}

mxl_status mxl_family_moe_sigmoid(mxl_family_ctx *c) {
    c->hp->moe_router = MXL_MOE_SIGMOID;
    return mxl_family_moe_scale_groups(c);
}

mxl_status mxl_family_moe_scale_groups(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double scale;
    if ((st = mxl_family_double(c, "routed_scaling_factor", 1.0, &scale)) || (st = mxl_family_int(c, "n_group", 1, &hp->moe_n_group)) ||
        (st = mxl_family_int(c, "topk_group", 1, &hp->moe_topk_group)))
        return st;
    hp->moe_routed_scale = (float)scale;
    return MXL_OK;
}

mxl_status mxl_family_moe_first_dense(mxl_family_ctx *c, const char *key) {
    mxl_decoder_hparams *hp = c->hp;
    int64_t k;
    mxl_status st = mxl_family_int(c, key, 0, &k);
    if (st) return st;
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < hp->n_layers; i++) f[i] = i >= k;
    hp->layer_is_moe = f;
    return MXL_OK;
}

mxl_status mxl_family_gguf_moe_sigmoid(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double scale, groups, used;
    char key[192];
    if ((st = mxl_family_gguf_number(c, "expert_weights_scale", 1.0, &scale)) ||
        (st = mxl_family_gguf_bool(c, "expert_weights_norm", false, &hp->moe_norm_topk)) ||
        (st = mxl_family_gguf_number(c, "expert_group_count", 1.0, &groups)) ||
        (st = mxl_family_gguf_number(c, "expert_group_used_count", 1.0, &used)))
        return st;
    if (!(groups >= 1 && groups <= 256 && used >= 1 && used <= groups))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' or its used count is out of range", c->ck->path,
                             mxl_family_gguf_key(c, "expert_group_count", key, sizeof key));
    hp->moe_router = MXL_MOE_SIGMOID;
    hp->moe_routed_scale = (float)(scale != 0 ? scale : 1.0);
    hp->moe_n_group = (int64_t)groups;
    hp->moe_topk_group = (int64_t)used;
    return MXL_OK;
}

mxl_status mxl_family_moe_layer_types(mxl_family_ctx *c, int64_t first_dense_default) {
    mxl_decoder_hparams *hp = c->hp;
    json_t *types = c->raw ? json_object_get(c->raw, "mlp_layer_types") : NULL;
    if (!types || json_is_null(types)) {
        mxl_status st;
        int64_t k;
        if ((st = mxl_family_int(c, "first_k_dense_replace", first_dense_default, &k))) return st;
        uint8_t *f = mxl_family_layer_flags(c);
        if (!f) return MXL_ERR_NOMEM;
        for (int64_t i = 0; i < hp->n_layers; i++) f[i] = i >= k;
        hp->layer_is_moe = f;
        return MXL_OK;
    }
    if (!json_is_array(types) || (int64_t)json_array_size(types) != hp->n_layers)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'mlp_layer_types' must list one of \"dense\" / \"sparse\" per layer (%lld)",
                             c->ck->path, (long long)hp->n_layers);
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < hp->n_layers; i++) {
        const char *t = json_string_value(json_array_get(types, (size_t)i));
        if (!t || (strcmp(t, "dense") != 0 && strcmp(t, "sparse") != 0))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'mlp_layer_types' entry %lld is not \"dense\" or \"sparse\"",
                                 c->ck->path, (long long)i);
        f[i] = strcmp(t, "sparse") == 0;
    }
    hp->layer_is_moe = f;
    return MXL_OK;
}

mxl_status mxl_family_moe_shared_count(mxl_family_ctx *c, const char *key) {
    int64_t n;
    mxl_status st = mxl_family_int(c, key, 0, &n);
    if (st) return st;
    if (n > 64) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' is out of range", c->ck->path, key);
    c->hp->shared_ffn = c->hp->moe_ffn * n;
    return MXL_OK;
}
