/* family_nemotron_h.c - Nemotron-H (transformers modeling_nemotron_h.py: Nemotron-H, Nemotron
 * Nano 2 / 3): every layer is one block, RMSNorm ("norm"), one mixer ("mixer.*"), residual; the
 * mixer per layers_block_type (or the older hybrid_override_pattern letters): Mamba-2
 * ("linear_attention" / "mamba" / M: recurrent.h MXL_LAYER_MAMBA2, mamba_num_heads heads of
 * mamba_head_dim, n_groups groups, ssm_state_size), attention without positions
 * ("full_attention" / "attention" / *), a plain MLP down(act(up(h))) of intermediate_size with
 * mlp_hidden_act (relu2) ("mlp" / -), or plain experts of moe_intermediate_size chosen by
 * DeepSeek V3's sigmoid router (e_score_correction_bias, n_group / topk_group, norm_topk_prob,
 * routed_scaling_factor) with a shared expert of moe_shared_expert_intermediate_size ("moe" / E).
 * Its Mamba-2 clamps the time step at time_step_min from below.
 * GGUF (llama.cpp's nemotron_h / nemotron_h_moe): attention layers by head_count_kv, MLP (or
 * expert) layers by feed_forward_length, Mamba-2 the others; one norm per block (attn_norm),
 * ffn_up / ffn_down, ffn_{up,down}_exps with ffn_{up,down}_shexp; relu2 and the clamp at
 * transformers' default time_step_min (0.001), which the files do not record.
 * The latent expert projections (moe_latent_size) are refused by name. Names: backbone.* as the
 * released checkpoints (and transformers' save) have them, or model.*. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "backbone.embeddings", .final_norm = "backbone.norm_f", .lm_head = "lm_head", .layers = "backbone.layers.",
    .attn_norm = "norm", .q = "mixer.q_proj", .k = "mixer.k_proj", .v = "mixer.v_proj", .o = "mixer.o_proj",
    .ffn_norm = "norm", .up = "mixer.up_proj", .down = "mixer.down_proj",
    .moe_router = "mixer.gate", .moe_router_bias = "mixer.gate.e_score_correction_bias", .experts = "mixer.experts.",
    .expert_up = "up_proj", .expert_down = "down_proj", .exps_up = "mixer.switch_mlp.fc1", .exps_down = "mixer.switch_mlp.fc2",
    .sh_up = "mixer.shared_experts.up_proj", .sh_down = "mixer.shared_experts.down_proj",
    .ssm_in = "mixer.in_proj", .ssm_conv = "mixer.conv1d", .ssm_dt_bias = "mixer.dt_bias", .ssm_a = "mixer.A_log",
    .ssm_d = "mixer.D", .ssm_norm = "mixer.norm", .ssm_out = "mixer.out_proj",
};

enum { BLOCK_MAMBA, BLOCK_ATTN, BLOCK_MLP, BLOCK_MOE };

static int block_of(const char *s) {
    if (!s) return -1;
    if (!strcmp(s, "linear_attention") || !strcmp(s, "mamba") || !strcmp(s, "M")) return BLOCK_MAMBA;
    if (!strcmp(s, "full_attention") || !strcmp(s, "attention") || !strcmp(s, "*")) return BLOCK_ATTN;
    if (!strcmp(s, "mlp") || !strcmp(s, "-")) return BLOCK_MLP;
    if (!strcmp(s, "moe") || !strcmp(s, "E")) return BLOCK_MOE;
    return -1;
}

/* Each layer's block from layers_block_type (or layer_types), else hybrid_override_pattern. */
static mxl_status blocks(mxl_family_ctx *c, int *blk) {
    const int64_t n = c->hp->n_layers;
    json_t *lt = json_object_get(c->raw, "layers_block_type");
    if (!lt || json_is_null(lt)) lt = json_object_get(c->raw, "layer_types");
    json_t *pat = json_object_get(c->raw, "hybrid_override_pattern");
    if (lt && json_is_array(lt)) {
        if (json_array_size(lt) != (size_t)n)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: layers_block_type has %zu entries for %lld layers", c->ck->path,
                                 json_array_size(lt), (long long)n);
        for (int64_t i = 0; i < n; i++)
            if ((blk[i] = block_of(json_string_value(json_array_get(lt, (size_t)i)))) < 0)
                return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: layers_block_type[%lld] is not one of mamba, attention, mlp, moe", c->ck->path,
                                     (long long)i);
        return MXL_OK;
    }
    const char *p = pat ? json_string_value(pat) : NULL;
    if (!p || strlen(p) != (size_t)n)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: neither layers_block_type nor a hybrid_override_pattern of %lld letters", c->ck->path,
                             (long long)n);
    for (int64_t i = 0; i < n; i++) {
        const char ch[2] = {p[i], 0};
        if ((blk[i] = block_of(ch)) < 0)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: hybrid_override_pattern letter '%c' is not one of M * - E", c->ck->path, p[i]);
    }
    return MXL_OK;
}

/* A per-layer integer array "ARCH.<suffix>" (a scalar counts for every layer) into v. */
static mxl_status gguf_layer_ints(mxl_family_ctx *c, const char *suffix, int64_t *v) {
    char key[192];
    mxl_family_gguf_key(c, suffix, key, sizeof key);
    const mxl_gguf_kv *kv = mxl_gguf_find(c->ck->gguf, key);
    for (int64_t i = 0; i < c->hp->n_layers; i++) {
        mxl_gguf_value e;
        bool ok = kv && (kv->value.type == MXL_GGUF_TYPE_ARRAY ? kv->value.v.arr.n == (uint64_t)c->hp->n_layers &&
                                                                     mxl_gguf_array_get(&kv->value.v.arr, (uint64_t)i, &e) &&
                                                                     mxl_gguf_value_as_i64(&e, &v[i])
                                                               : mxl_gguf_value_as_i64(&kv->value, &v[i]));
        if (!ok) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: '%s' must give each of the %lld layers", c->ck->path, key, (long long)c->hp->n_layers);
    }
    return MXL_OK;
}

static mxl_status nemotron_h_gguf(mxl_family_ctx *c, int *blk) {
    mxl_decoder_hparams *hp = c->hp;
    int64_t kvh[4096], ff[4096];
    mxl_status st;
    if ((st = gguf_layer_ints(c, "attention.head_count_kv", kvh)) || (st = gguf_layer_ints(c, "feed_forward_length", ff))) return st;
    bool moe = false;
    for (int64_t i = 0; i < hp->n_layers; i++) { /* (an expert layer holds a router) */
        char name[64];
        snprintf(name, sizeof name, "blk.%lld.ffn_gate_inp.weight", (long long)i);
        const bool router = mxl_gguf_find_tensor(c->ck->gguf, name) != NULL;
        blk[i] = kvh[i] > 0 ? BLOCK_ATTN : ff[i] > 0 ? (router ? BLOCK_MOE : BLOCK_MLP) : BLOCK_MAMBA;
        moe |= router;
    }
    if (!moe) hp->n_experts = hp->n_experts_used = 0; /* (the converter writes an expert count for dense files too) */
    for (int64_t i = 0; i < hp->n_layers; i++)
        if (blk[i] == BLOCK_MLP) hp->ffn = ff[i];
    c->names->ffn_norm = "attn_norm";
    return MXL_OK;
}

static mxl_status nemotron_h_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    json_t *latent = json_object_get(c->raw, "moe_latent_size");
    if (latent && !json_is_null(latent))
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'moe_latent_size' (latent expert projections) is not supported yet",
                             c->ck->path);
    int blk[4096];
    if (hp->n_layers > 4096) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: too many layers", c->ck->path);
    uint8_t *kind = mxl_family_layer_flags(c), *no_mlp = mxl_family_layer_flags(c), *nope = mxl_family_layer_flags(c);
    if (!kind || !no_mlp || !nope) return MXL_ERR_NOMEM;
    if ((st = c->gguf ? nemotron_h_gguf(c, blk) : blocks(c, blk))) return st;
    if (!c->gguf && mxl_st_model_find(c->ck->st, "model.embeddings.weight"))
        c->names->embed = "model.embeddings", c->names->final_norm = "model.norm_f", c->names->layers = "model.layers.";
    bool any_moe = false;
    for (int64_t i = 0; i < hp->n_layers; i++) {
        kind[i] = blk[i] == BLOCK_MAMBA ? MXL_LAYER_MAMBA2 : blk[i] == BLOCK_ATTN ? MXL_LAYER_ATTN : MXL_LAYER_MLP_ONLY;
        no_mlp[i] = blk[i] == BLOCK_MAMBA || blk[i] == BLOCK_ATTN;
        any_moe |= blk[i] == BLOCK_MOE;
        nope[i] = 1;
    }
    hp->layer_kind = kind, hp->layer_no_mlp = no_mlp, hp->layer_no_rope = nope;
    if (!isnan(c->cfg->layer_norm_eps)) hp->norm_eps = (float)c->cfg->layer_norm_eps; /* layer_norm_epsilon */
    hp->mlp = MXL_MLP_PLAIN;
    if (c->gguf) { /* relu2 (llama.cpp's), the Mamba-2 sizes, the experts */
        hp->act = MXL_ACT_RELU2;
        hp->ssm_dt_min = 0.001f;
        if ((st = mxl_family_gguf_ssm(c, MXL_LAYER_MAMBA2))) return st;
        hp->ssm_dt_min = 0.001f, hp->ssm_dt_max = INFINITY;
        if (!any_moe) return MXL_OK;
        if ((st = mxl_family_gguf_moe(c, true)) || (st = mxl_family_gguf_moe_sigmoid(c))) return st;
        hp->moe_router = MXL_MOE_SIGMOID;
        hp->moe_plain = true;
        return MXL_OK;
    }
    char act[64] = "relu2";
    json_t *a = json_object_get(c->raw, "mlp_hidden_act");
    if (a && json_is_string(a)) snprintf(act, sizeof act, "%s", json_string_value(a));
    if ((st = mxl_family_act(c, "mlp_hidden_act", act, &hp->act))) return st;
    int64_t head_dim;
    if ((st = mxl_family_int(c, "mamba_num_heads", 128, &hp->ssm_heads)) || (st = mxl_family_int(c, "mamba_head_dim", 64, &head_dim)) ||
        (st = mxl_family_int(c, "n_groups", 8, &hp->ssm_groups)) || (st = mxl_family_int(c, "ssm_state_size", 128, &hp->ssm_state)) ||
        (st = mxl_family_int(c, "conv_kernel", 4, &hp->ssm_conv)) || (st = mxl_family_bool(c, "use_conv_bias", true, &hp->ssm_conv_bias)) ||
        (st = mxl_family_bool(c, "use_bias", false, &hp->ssm_proj_bias)))
        return st;
    hp->ssm_inner = hp->ssm_heads * head_dim;
    hp->ssm_norm_eps = hp->norm_eps;
    /* the mixer clamps the time step to [time_step_min, inf) (its own limit, whatever
     * time_step_limit says) */
    double dt_min;
    if ((st = mxl_family_double(c, "time_step_min", 0.001, &dt_min))) return st;
    hp->ssm_dt_min = (float)dt_min, hp->ssm_dt_max = INFINITY;
    if (!any_moe) return MXL_OK;
    if ((st = mxl_family_moe(c, "moe_intermediate_size", "moe_shared_expert_intermediate_size", true, false)) ||
        (st = mxl_family_moe_sigmoid(c)))
        return st;
    uint8_t *moe = mxl_family_layer_flags(c);
    if (!moe) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < hp->n_layers; i++) moe[i] = blk[i] == BLOCK_MOE;
    hp->layer_is_moe = moe;
    hp->moe_plain = true;
    return MXL_OK;
}

const mxl_decoder_family mxl_family_nemotron_h = {
    .model_type = "nemotron_h", .registry_id = "nemotron_h", .hf_class = "NemotronHForCausalLM", .names = &k_names,
    .setup = nemotron_h_setup, .gguf_arch = "nemotron_h", .convert_check = mxl_family_gguf_not_converted,
};
