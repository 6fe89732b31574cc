/* family_common.c - config.json conventions shared by the decoder families (decoder_family.h):
 * typed optional keys, activations, RoPE parameters, sliding layers.
 *
 * RoPE keys follow transformers' modeling_rope_utils.py: `rope_parameters` (transformers 5) or
 * the older `rope_scaling` with a top-level `rope_theta`; the type is `rope_type` (or `type`);
 * llama3 / yarn / longrope read original_max_position_embeddings from the parameters, else the top
 * level (Phi-3 keeps it there and it wins), else max_position_embeddings; longrope's factor
 * defaults to max_position_embeddings / original_max_position_embeddings. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/json_read.h"
#include "io/safetensors.h"
#include "models/decoder_family.h"

static json_t *get(const mxl_family_ctx *c, json_t *obj, const char *key) {
    (void)c;
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    return v && !json_is_null(v) ? v : NULL;
}

mxl_status mxl_family_bool(mxl_family_ctx *c, const char *key, bool dflt, bool *out) {
    *out = dflt;
    json_t *v = get(c, c->raw, key);
    if (!v) return MXL_OK;
    if (!json_is_boolean(v))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' must be true or false", c->ck->path, key);
    *out = json_is_true(v);
    return MXL_OK;
}

static mxl_status number_in(mxl_family_ctx *c, json_t *obj, const char *where, const char *key, double dflt, double *out) {
    *out = dflt;
    json_t *v = get(c, obj, key);
    if (!v) return MXL_OK;
    double x;
    if (!mxl_json_number(v, &x) || !isfinite(x))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s%s' must be a finite number", c->ck->path, where, key);
    *out = x;
    return MXL_OK;
}

mxl_status mxl_family_double(mxl_family_ctx *c, const char *key, double dflt, double *out) {
    return number_in(c, c->raw, "", key, dflt, out);
}

mxl_status mxl_family_int(mxl_family_ctx *c, const char *key, int64_t dflt, int64_t *out) {
    *out = dflt;
    json_t *v = get(c, c->raw, key);
    if (!v) return MXL_OK;
    if (mxl_json_int(v, 0, INT64_C(1) << 40, out))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' must be a non-negative integer", c->ck->path, key);
    return MXL_OK;
}

mxl_status mxl_family_act(mxl_family_ctx *c, const char *key, const char *name, mxl_act *out) {
    static const struct { const char *name; mxl_act act; } k_acts[] = {
        {"silu", MXL_ACT_SILU},
        {"swish", MXL_ACT_SILU},
        {"gelu", MXL_ACT_GELU_ERF},
        {"gelu_pytorch_tanh", MXL_ACT_GELU_TANH},
        {"gelu_new", MXL_ACT_GELU_TANH},
        {"gelu_fast", MXL_ACT_GELU_TANH},
        {"gelu_python_tanh", MXL_ACT_GELU_TANH},
        {"relu", MXL_ACT_RELU},
        {"relu2", MXL_ACT_RELU2},
    };
    for (size_t i = 0; i < sizeof k_acts / sizeof k_acts[0]; i++)
        if (strcmp(name, k_acts[i].name) == 0) {
            *out = k_acts[i].act;
            return MXL_OK;
        }
    return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: %s '%s' is not supported (silu, gelu, gelu_pytorch_tanh, gelu_new, relu, relu2)", c->ck->path, key, name);
}

/* longrope's long_factor / short_factor: n positive finite numbers, copied into the arena. */
static mxl_status longrope_factors(mxl_family_ctx *c, json_t *p, const char *w, const char *key, int n, const float **out) {
    json_t *a = get(c, p, key);
    if (!json_is_array(a) || json_array_size(a) != (size_t)n)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s%s' must list %d numbers (rotary dimension / 2)", c->ck->path, w, key, n);
    float *f = mxl_arena_alloc(c->arena, (size_t)n * sizeof *f, 16);
    if (!f) return mxl_error_set(c->err, MXL_ERR_NOMEM, "out of memory reading config.json '%s%s'", w, key);
    for (int i = 0; i < n; i++) {
        double x;
        if (!mxl_json_number(json_array_get(a, (size_t)i), &x) || !(x > 0) || !isfinite(x))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s%s' element %d must be a positive finite number", c->ck->path, w, key, i);
        f[i] = (float)x;
    }
    *out = f;
    return MXL_OK;
}

mxl_status mxl_family_rope_from(mxl_family_ctx *c, json_t *p, const char *where, double default_theta,
                                mxl_rope_cfg *r) {
    const mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    memset(r, 0, sizeof *r);
    r->head_dim = (int)hp->head_dim;
    r->style = MXL_ROPE_NEOX;
    r->scaling = MXL_ROPE_SCALING_NONE;
    r->factor = 1.0;
    if (p && !json_is_object(p))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' must be an object", c->ck->path, where);
    char w[96];
    snprintf(w, sizeof w, "%s.", where);

    const char *type = "default";
    json_t *t = get(c, p, "rope_type");
    if (!t) t = get(c, p, "type");
    if (t) {
        if (!json_is_string(t))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%srope_type' must be a string", c->ck->path, w);
        type = json_string_value(t);
    }
    double top_theta;
    if ((st = number_in(c, c->raw, "", "rope_theta", default_theta, &top_theta))) return st;
    if ((st = number_in(c, p, w, "rope_theta", top_theta, &r->theta))) return st;
    if (!(r->theta > 0))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%srope_theta' must be positive", c->ck->path, w);
    double prf;
    if ((st = number_in(c, c->raw, "", "partial_rotary_factor", 1.0, &prf))) return st;
    if ((st = number_in(c, p, w, "partial_rotary_factor", prf, &prf))) return st;
    if (!(prf > 0 && prf <= 1))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: partial_rotary_factor %g is outside (0, 1]", c->ck->path, prf);
    r->rotary_dim = (int)((double)hp->head_dim * prf); /* transformers: int(head_dim * factor) */
    if (r->rotary_dim < 2 || r->rotary_dim % 2)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: rotary dimension %d (head_dim %lld x partial_rotary_factor %g) must be even and at least 2",
                             c->ck->path, r->rotary_dim, (long long)hp->head_dim, prf);

    if (strcmp(type, "default") == 0) return MXL_OK;
    double orig_top;
    if ((st = number_in(c, c->raw, "", "max_position_embeddings", (double)hp->max_ctx, &orig_top))) return st;
    json_t *orig_outer = get(c, c->raw, "original_max_position_embeddings");
    if ((st = number_in(c, c->raw, "", "original_max_position_embeddings", orig_top, &orig_top))) return st;
    double orig;
    if ((st = number_in(c, p, w, "original_max_position_embeddings", orig_top, &orig))) return st;
    if (orig_outer) orig = orig_top; /* Phi-3: the top-level value takes priority */
    if (strcmp(type, "linear") == 0) {
        r->scaling = MXL_ROPE_SCALING_LINEAR;
        if ((st = number_in(c, p, w, "factor", NAN, &r->factor))) return st;
    } else if (strcmp(type, "llama3") == 0) {
        r->scaling = MXL_ROPE_SCALING_LLAMA3;
        r->original_max_pos = orig;
        if ((st = number_in(c, p, w, "factor", NAN, &r->factor)) ||
            (st = number_in(c, p, w, "low_freq_factor", NAN, &r->low_freq_factor)) ||
            (st = number_in(c, p, w, "high_freq_factor", NAN, &r->high_freq_factor)))
            return st;
        if (!(r->low_freq_factor > 0) || !(r->high_freq_factor > r->low_freq_factor))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' needs low_freq_factor > 0 and high_freq_factor > low_freq_factor", c->ck->path, where);
    } else if (strcmp(type, "yarn") == 0) {
        r->scaling = MXL_ROPE_SCALING_YARN;
        r->original_max_pos = orig;
        if ((st = number_in(c, p, w, "factor", NAN, &r->factor))) return st;
        if (isnan(r->factor) && orig > 0) r->factor = orig_top / orig;
        if ((st = number_in(c, p, w, "attention_factor", 0, &r->attention_factor)) ||
            (st = number_in(c, p, w, "beta_fast", 0, &r->beta_fast)) ||
            (st = number_in(c, p, w, "beta_slow", 0, &r->beta_slow)) ||
            (st = number_in(c, p, w, "mscale", 0, &r->mscale)) ||
            (st = number_in(c, p, w, "mscale_all_dim", 0, &r->mscale_all_dim)))
            return st;
        json_t *tr = get(c, p, "truncate");
        if (tr && !json_is_boolean(tr))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%struncate' must be true or false", c->ck->path, w);
        r->yarn_no_truncate = tr && json_is_false(tr);
    } else if (strcmp(type, "longrope") == 0) {
        r->scaling = MXL_ROPE_SCALING_LONGROPE;
        r->original_max_pos = orig;
        double max_pos;
        if ((st = number_in(c, c->raw, "", "max_position_embeddings", (double)hp->max_ctx, &max_pos)) ||
            (st = number_in(c, p, w, "factor", orig > 0 ? max_pos / orig : NAN, &r->factor)) ||
            (st = number_in(c, p, w, "attention_factor", 0, &r->attention_factor)) ||
            (st = longrope_factors(c, p, w, "long_factor", r->rotary_dim / 2, &r->long_factors)) ||
            (st = longrope_factors(c, p, w, "short_factor", r->rotary_dim / 2, &r->short_factors)))
            return st;
        if (r->factor < 1.0) r->factor = 1.0; /* (a factor <= 1 only sets the attention factor to 1) */
    } else {
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: RoPE type '%s' (config.json '%s') is not supported (default, linear, llama3, yarn, longrope)", c->ck->path, type, where);
    }
    if (!(r->factor >= 1.0) || !(r->factor < 1e6))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%sfactor' must be a number >= 1", c->ck->path, w);
    if (r->scaling != MXL_ROPE_SCALING_LINEAR && !(r->original_max_pos >= 1))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' needs original_max_position_embeddings", c->ck->path, where);
    return MXL_OK;
}

mxl_status mxl_family_rope(mxl_family_ctx *c) {
    json_t *p = get(c, c->raw, "rope_parameters");
    const char *where = "rope_parameters";
    if (!p) {
        p = get(c, c->raw, "rope_scaling");
        where = "rope_scaling";
    }
    mxl_status st = mxl_family_rope_from(c, p, where, 10000.0, &c->hp->rope);
    c->hp->rope_local = c->hp->rope;
    return st;
}

mxl_status mxl_family_llama4_temperature(mxl_family_ctx *c) {
    json_t *rp = get(c, c->raw, "rope_parameters");
    if (!json_is_object(rp)) rp = get(c, c->raw, "rope_scaling");
    json_t *beta = json_is_object(rp) ? get(c, rp, "llama_4_scaling_beta") : NULL, *orig = beta ? get(c, rp, "original_max_position_embeddings") : NULL;
    if (!beta) return MXL_OK;
    if (!json_is_number(beta) || !json_is_number(orig) || json_number_value(beta) < 0 || json_number_value(orig) < 1)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json rope_parameters 'llama_4_scaling_beta' needs a non-negative number and 'original_max_position_embeddings' a positive one", c->ck->path);
    c->hp->q_temp_beta = (float)json_number_value(beta);
    c->hp->q_temp_orig = (int64_t)json_number_value(orig);
    return MXL_OK;
}

mxl_status mxl_family_rope_interleaved(mxl_family_ctx *c) {
    mxl_status st = mxl_family_rope(c);
    c->hp->rope.style = c->hp->rope_local.style = MXL_ROPE_GPTJ;
    return st;
}

mxl_status mxl_family_rope_partial_default(mxl_family_ctx *c, double factor) {
    mxl_decoder_hparams *hp = c->hp;
    json_t *rp = get(c, c->raw, "rope_parameters");
    if (!get(c, c->raw, "partial_rotary_factor") && !(json_is_object(rp) && get(c, rp, "partial_rotary_factor")))
        hp->rope.rotary_dim = hp->rope_local.rotary_dim = (int)((double)hp->head_dim * factor);
    if (hp->rope.rotary_dim < 2 || hp->rope.rotary_dim % 2)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: rotary dimension %d (head_dim %lld) must be even and at least 2", c->ck->path,
                             hp->rope.rotary_dim, (long long)hp->head_dim);
    return MXL_OK;
}

mxl_status mxl_family_rope_layer_types(mxl_family_ctx *c, double full_theta, double sliding_theta, bool *found) {
    json_t *rp = get(c, c->raw, "rope_parameters");
    json_t *full = json_is_object(rp) ? get(c, rp, "full_attention") : NULL;
    json_t *slide = json_is_object(rp) ? get(c, rp, "sliding_attention") : NULL;
    *found = full || slide;
    if (!*found) return MXL_OK;
    mxl_status st = mxl_family_rope_from(c, full, "rope_parameters.full_attention", full_theta, &c->hp->rope);
    return st ? st : mxl_family_rope_from(c, slide, "rope_parameters.sliding_attention", sliding_theta, &c->hp->rope_local);
}

uint8_t *mxl_family_layer_flags(mxl_family_ctx *c) {
    size_t n = (size_t)c->hp->n_layers;
    uint8_t *f = mxl_arena_alloc(c->arena, n ? n : 1, 1);
    if (!f) {
        mxl_error_set(c->err, MXL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    memset(f, 0, n ? n : 1);
    return f;
}

bool mxl_family_sliding_from_layer_types(mxl_family_ctx *c, int64_t window) {
    const mxl_model_config *cfg = c->cfg;
    if (cfg->n_layer_types != c->hp->n_layers || !cfg->layer_is_sliding) return false;
    c->hp->layer_is_sliding = cfg->layer_is_sliding;
    c->hp->sliding_window = window > 0 ? window : 0;
    return true;
}

mxl_status mxl_family_layer_list(mxl_family_ctx *c, const char *key, uint8_t **out) {
    json_t *v = get(c, c->raw, key);
    *out = NULL;
    if (!v) return MXL_OK;
    if (!json_is_array(v) || (int64_t)json_array_size(v) != c->hp->n_layers)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' must list one 0/1 per layer (%lld)", c->ck->path, key,
                             (long long)c->hp->n_layers);
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < c->hp->n_layers; i++) {
        json_t *e = json_array_get(v, (size_t)i);
        const bool bit = json_is_integer(e) && (json_integer_value(e) == 0 || json_integer_value(e) == 1);
        if (!bit && !json_is_boolean(e))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json %s[%lld] must be 0 or 1", c->ck->path, key, (long long)i);
        f[i] = bit ? json_integer_value(e) == 1 : json_is_true(e);
    }
    *out = f;
    return MXL_OK;
}

mxl_status mxl_family_nope_layers(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    uint8_t *rope, *nope = mxl_family_layer_flags(c);
    int64_t interval;
    mxl_status st;
    if (!nope) return MXL_ERR_NOMEM;
    if ((st = mxl_family_layer_list(c, "no_rope_layers", &rope)) || (st = mxl_family_int(c, "no_rope_layer_interval", 4, &interval))) return st;
    if (!rope && interval <= 0)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'no_rope_layer_interval' must be positive", c->ck->path);
    for (int64_t i = 0; i < hp->n_layers; i++) nope[i] = rope ? !rope[i] : (i + 1) % interval == 0;
    hp->layer_no_rope = nope;
    return MXL_OK;
}

mxl_status mxl_family_nope_full_layers(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    if (!hp->layer_is_sliding) return MXL_OK;
    uint8_t *nope = mxl_family_layer_flags(c);
    if (!nope) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < hp->n_layers; i++) nope[i] = !hp->layer_is_sliding[i];
    hp->layer_no_rope = nope;
    return MXL_OK;
}

mxl_status mxl_family_sliding_pattern(mxl_family_ctx *c, int64_t pattern, int64_t window) {
    if (mxl_family_sliding_from_layer_types(c, window)) return MXL_OK;
    if (pattern <= 0) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: the sliding-window pattern must be positive", c->ck->path);
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < c->hp->n_layers; i++) f[i] = (i + 1) % pattern != 0;
    c->hp->layer_is_sliding = f;
    c->hp->sliding_window = window > 0 ? window : 0;
    return MXL_OK;
}

mxl_status mxl_family_sliding_all(mxl_family_ctx *c) {
    if (c->cfg->sliding_window <= 0) return MXL_OK;
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    memset(f, 1, (size_t)c->hp->n_layers);
    c->hp->layer_is_sliding = f;
    c->hp->sliding_window = c->cfg->sliding_window;
    return MXL_OK;
}

const mxl_decoder_names mxl_names_gguf = {
    .embed = "token_embd", .final_norm = "output_norm", .lm_head = "output", .layers = "blk.",
    .attn_norm = "attn_norm", .q = "attn_q", .k = "attn_k", .v = "attn_v", .o = "attn_output",
    .q_norm = "attn_q_norm", .k_norm = "attn_k_norm", .post_attn_norm = "post_attention_norm",
    .ffn_norm = "ffn_norm", .gate = "ffn_gate", .up = "ffn_up", .down = "ffn_down",
    .post_ffn_norm = "post_ffw_norm", .moe_router = "ffn_gate_inp", .moe_router_bias = "exp_probs_b.bias", .exps_gate = "ffn_gate_exps",
    .exps_up = "ffn_up_exps", .exps_down = "ffn_down_exps", .sh_gate = "ffn_gate_shexp", .sh_up = "ffn_up_shexp",
    .sh_down = "ffn_down_shexp", .sh_router = "ffn_gate_inp_shexp", .q_a = "attn_q_a", .q_a_norm = "attn_q_a_norm",
    .q_b = "attn_q_b", .kv_a = "attn_kv_a_mqa", .kv_a_norm = "attn_kv_a_norm", .kv_b = "attn_kv_b", .k_b = "attn_k_b",
    .v_b = "attn_v_b",
};

void mxl_family_text_prefix(mxl_family_ctx *c) {
    mxl_decoder_names *nm = c->names;
    if (!c->ck->st) return;
    if (mxl_st_model_find(c->ck->st, "model.language_model.embed_tokens.weight")) {
        nm->embed = "model.language_model.embed_tokens", nm->final_norm = "model.language_model.norm";
        nm->layers = "model.language_model.layers.";
    } else if (mxl_st_model_find(c->ck->st, "model.text_model.embed_tokens.weight")) { /* (Idefics3, SmolVLM) */
        nm->embed = "model.text_model.embed_tokens", nm->final_norm = "model.text_model.norm";
        nm->layers = "model.text_model.layers.";
    } else if (mxl_st_model_find(c->ck->st, "language_model.model.embed_tokens.weight")) {
        nm->embed = "language_model.model.embed_tokens", nm->final_norm = "language_model.model.norm";
        nm->layers = "language_model.model.layers.", nm->lm_head = "language_model.lm_head";
    }
}
