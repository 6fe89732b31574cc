/* family_gguf.c - llama.cpp conventions shared by the GGUF branches of the decoder families
 * (family_gguf.h). */
#include "models/family_gguf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/config_gguf.h"
#include "models/weights.h"

mxl_status mxl_family_gguf_rope_neox(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_rope_cfg *r = &hp->rope;
    memset(r, 0, sizeof *r);
    r->head_dim = r->rotary_dim = (int)hp->head_dim;
    r->theta = !isnan(c->cfg->rope_theta) ? c->cfg->rope_theta : 10000.0;
    r->style = MXL_ROPE_NEOX;
    r->scaling = MXL_ROPE_SCALING_NONE;
    r->factor = 1.0;
    double prf = c->cfg->partial_rotary_factor;
    /* rope.dimension_count / head_dim, back to the integer count */
    if (!isnan(prf) && prf < 1) r->rotary_dim = (int)((double)hp->head_dim * prf + 0.5);
    if (!(r->theta > 0) || r->rotary_dim < 2 || r->rotary_dim % 2)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: rope.freq_base %g / rotary dimension %d (head_dim %lld) are not usable", c->ck->path,
                             r->theta, r->rotary_dim, (long long)hp->head_dim);
    hp->rope_local = *r;
    return MXL_OK;
}

mxl_status mxl_family_gguf_rope_norm(mxl_family_ctx *c) {
    mxl_status st = mxl_family_gguf_rope_neox(c);
    if (st) return st;
    c->hp->rope.style = c->hp->rope_local.style = MXL_ROPE_GPTJ;
    return MXL_OK;
}

mxl_status mxl_family_gguf_number(mxl_family_ctx *c, const char *suffix, double dflt, double *out) {
    *out = dflt;
    return mxl_gguf_arch_number(c->ck->gguf, c->ck->path, suffix, out, c->err);
}

mxl_status mxl_family_gguf_drop_nextn(mxl_family_ctx *c) {
    double nextn;
    char key[192];
    mxl_status st = mxl_family_gguf_number(c, "nextn_predict_layers", 0, &nextn);
    if (st) return st;
    if (!(nextn >= 0 && nextn < (double)c->hp->n_layers))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' leaves no layers", c->ck->path,
                             mxl_family_gguf_key(c, "nextn_predict_layers", key, sizeof key));
    c->hp->n_layers -= (int64_t)nextn;
    return MXL_OK;
}

mxl_status mxl_family_gguf_sliding_dense_first(mxl_family_ctx *c, int64_t pattern, int64_t window) {
    char key[192];
    const mxl_gguf_kv *kv = mxl_gguf_find(c->ck->gguf, mxl_family_gguf_key(c, "attention.sliding_window_pattern", key, sizeof key));
    if (kv && kv->value.type == MXL_GGUF_TYPE_ARRAY) return mxl_family_sliding_pattern(c, pattern, window); /* (config_gguf.c's flags) */
    double p;
    mxl_status st = mxl_family_gguf_number(c, "attention.sliding_window_pattern", (double)pattern, &p);
    if (st) return st;
    if (!(p >= 0 && p <= 65536) || p != floor(p))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' = %g is not a layer count", c->ck->path, key, p);
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < c->hp->n_layers; i++) f[i] = p == 0 || i % (int64_t)p != 0;
    c->hp->layer_is_sliding = f;
    c->hp->sliding_window = window > 0 ? window : 0;
    return MXL_OK;
}

mxl_status mxl_family_gguf_not_converted(const mxl_checkpoint *ck, mxl_error *err) {
    char arch[64] = "this";
    const mxl_gguf_kv *a = ck->gguf ? mxl_gguf_find(ck->gguf, "general.architecture") : NULL;
    if (a) mxl_gguf_value_copy_str(&a->value, arch, sizeof arch);
    const char *mt = ck->config.model_type;
    bool other = mt[0] && strcmp(mt, arch) != 0; /* a llama file with experts runs as mixtral */
    return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: %s GGUF files%s%s%s are not converted yet (they run as they are)", ck->path, arch,
                         other ? " (" : "", other ? mt : "", other ? ")" : "");
}

void mxl_family_gguf_attn_biases(mxl_family_ctx *c) {
    c->hp->qkv_bias = mxl_family_gguf_has_layer0(c, "attn_q", ".bias") || mxl_family_gguf_has_layer0(c, "attn_qkv", ".bias");
    c->hp->o_bias = mxl_family_gguf_has_layer0(c, "attn_output", ".bias");
}

mxl_status mxl_family_gguf_kv_kinds(mxl_family_ctx *c, uint8_t *kind, uint8_t rec) {
    const mxl_decoder_hparams *hp = c->hp;
    const mxl_gguf_array *a = NULL;
    char key[192];
    mxl_family_gguf_key(c, "attention.head_count_kv", key, sizeof key);
    const mxl_gguf_kv *kv = mxl_gguf_find(c->ck->gguf, key);
    if (!kv || kv->value.type != MXL_GGUF_TYPE_ARRAY || (a = &kv->value.v.arr)->n != (uint64_t)hp->n_layers)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: '%s' must list each of the %lld layers (0: a recurrent layer)", c->ck->path, key,
                             (long long)hp->n_layers);
    for (int64_t i = 0; i < hp->n_layers; i++) {
        mxl_gguf_value e;
        int64_t x;
        if (!mxl_gguf_array_get(a, (uint64_t)i, &e) || !mxl_gguf_value_as_i64(&e, &x) || x < 0 || (x > 0 && x != hp->n_kv_heads))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: '%s'[%lld] is neither 0 nor the KV head count %lld", c->ck->path, key,
                                 (long long)i, (long long)hp->n_kv_heads);
        kind[i] = x == 0 ? rec : MXL_LAYER_ATTN;
    }
    return MXL_OK;
}

mxl_status mxl_family_gguf_recurrent_layers(mxl_family_ctx *c, uint8_t *kind, uint8_t rec, double every_default) {
    const mxl_decoder_hparams *hp = c->hp;
    char key[192];
    mxl_family_gguf_key(c, "attention.recurrent_layers", key, sizeof key);
    const mxl_gguf_kv *kv = mxl_gguf_find(c->ck->gguf, key);
    if (kv) {
        const mxl_gguf_array *a = kv->value.type == MXL_GGUF_TYPE_ARRAY ? &kv->value.v.arr : NULL;
        if (!a || a->n < (uint64_t)hp->n_layers)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: '%s' must list each of the %lld layers", c->ck->path, key, (long long)hp->n_layers);
        for (int64_t i = 0; i < hp->n_layers; i++) {
            mxl_gguf_value e;
            if (!mxl_gguf_array_get(a, (uint64_t)i, &e) || e.type != MXL_GGUF_TYPE_BOOL)
                return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: '%s' must be an array of booleans", c->ck->path, key);
            kind[i] = e.v.b ? rec : MXL_LAYER_ATTN;
        }
        return MXL_OK;
    }
    double every;
    mxl_status st = mxl_family_gguf_number(c, "full_attention_interval", every_default, &every);
    if (st) return st;
    if (!(every >= 1 && every <= 65536)) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: full_attention_interval must be positive", c->ck->path);
    for (int64_t i = 0; i < hp->n_layers; i++) kind[i] = (i + 1) % (int64_t)every == 0 ? MXL_LAYER_ATTN : rec;
    return MXL_OK;
}

bool mxl_family_gguf_has_layer0(mxl_family_ctx *c, const char *module, const char *suffix) {
    char name[256];
    int w = snprintf(name, sizeof name, "%s0.%s%s", c->names->layers, module, suffix);
    if (w < 0 || (size_t)w >= sizeof name) return false;
    return mxl_gguf_find_tensor(c->ck->gguf, name) != NULL;
}

/* ---- RoPE scaling (family_gguf.h mxl_family_gguf_rope_scaling) ---- */

/* "ARCH.<suffix>" for messages and look-ups (ARCH = general.architecture, "ARCH" when absent). */
static const char *arch_key(mxl_family_ctx *c, const char *suffix, char *buf, size_t cap) {
    char arch[64] = "ARCH";
    const mxl_gguf_kv *a = mxl_gguf_find(c->ck->gguf, "general.architecture");
    if (a) mxl_gguf_value_copy_str(&a->value, arch, sizeof arch);
    snprintf(buf, cap, "%s.%s", arch, suffix);
    return buf;
}

const char *mxl_family_gguf_key(mxl_family_ctx *c, const char *suffix, char *buf, size_t cap) {
    return arch_key(c, suffix, buf, cap);
}

mxl_status mxl_family_gguf_bool(mxl_family_ctx *c, const char *suffix, bool dflt, bool *out) {
    char key[192];
    *out = dflt;
    const mxl_gguf_kv *kv = mxl_gguf_find(c->ck->gguf, arch_key(c, suffix, key, sizeof key));
    if (!kv) return MXL_OK;
    if (kv->value.type != MXL_GGUF_TYPE_BOOL)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' has type %s, expected BOOL", c->ck->path, key,
                             mxl_gguf_type_name(kv->value.type));
    *out = kv->value.v.b;
    return MXL_OK;
}

/* The string "ARCH.<suffix>" into buf ("" when absent); a format error naming the key when it is
 * not a string (or does not fit). */
static mxl_status arch_string(mxl_family_ctx *c, const char *suffix, char *buf, size_t cap) {
    char key[192];
    buf[0] = '\0';
    const mxl_gguf_kv *kv = mxl_gguf_find(c->ck->gguf, arch_key(c, suffix, key, sizeof key));
    if (kv && !mxl_gguf_value_copy_str(&kv->value, buf, cap))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' is not a short string", c->ck->path, key);
    return MXL_OK;
}

/* A number "ARCH.<suffix>" that must lie within [lo, hi] when present (dflt when absent). */
static mxl_status ranged(mxl_family_ctx *c, const char *suffix, double dflt, double lo, double hi, double *out) {
    char key[192];
    mxl_status st = mxl_family_gguf_number(c, suffix, dflt, out);
    if (st) return st;
    if (!(*out >= lo && *out <= hi))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' = %g is out of range [%g, %g]", c->ck->path,
                             arch_key(c, suffix, key, sizeof key), *out, lo, hi);
    return MXL_OK;
}

/* A frequency-factor tensor (rope_freqs.weight, rope_factors_long/short.weight): f32
 * [rotary_dim/2] of positive finite divisors, bound to *out (left alone when absent). */
static mxl_status bind_freq_factors(mxl_family_ctx *c, const mxl_rope_cfg *r, const char *name, const float **out) {
    const mxl_gguf_tensor_info *ti = mxl_gguf_find_tensor(c->ck->gguf, name);
    if (!ti) return MXL_OK;
    const mxl_tensor *t = &ti->tensor;
    int64_t half = r->rotary_dim / 2;
    if (t->ndim != 1 || t->shape[0] != half || t->dtype != MXL_DTYPE_F32) {
        char shape[96];
        mxl_tensor_shape_str(t, shape, sizeof shape);
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: tensor '%s' is %s %s; expected f32 [%lld] (rotary dimension %d / 2)", c->ck->path,
                             name, mxl_dtype_name(t->dtype), shape, (long long)half, r->rotary_dim);
    }
    const float *f = NULL;
    mxl_status st = mxl_weights_vector_f32(c->arena, t, name, half, &f, c->err);
    if (st) {
        mxl_error_prefix(c->err, "%s: ", c->ck->path);
        return st;
    }
    for (int64_t i = 0; i < half; i++)
        if (!(f[i] > 0) || !isfinite(f[i]))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: tensor '%s' element %lld is %g; frequency factors must be positive and finite",
                                 c->ck->path, name, (long long)i, (double)f[i]);
    *out = f;
    return MXL_OK;
}

mxl_status mxl_family_gguf_rope_scaling(mxl_family_ctx *c) {
    mxl_rope_cfg *r = &c->hp->rope;
    char type[64], key[192];
    mxl_status st;
#define KEY(suffix) arch_key(c, suffix, key, sizeof key)
    /* longrope keeps its factors in tensors (Phi-3 128k writes no type key): the long ones when
     * the context exceeds rope.scaling.original_context_length, as llama.cpp; the converter's
     * rope.scaling.attn_factor (read below into attn_mul) is its whole attention factor */
    if ((st = bind_freq_factors(c, r, "rope_factors_long.weight", &r->long_factors)) ||
        (st = bind_freq_factors(c, r, "rope_factors_short.weight", &r->short_factors)) ||
        (st = bind_freq_factors(c, r, "rope_freqs.weight", &r->freq_factors)))
        return st;
    if (r->long_factors || r->short_factors) {
        if (!r->long_factors || !r->short_factors)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: longrope needs both tensors rope_factors_long.weight and rope_factors_short.weight", c->ck->path);
        double orig = (double)c->cfg->max_position_embeddings;
        if ((st = ranged(c, "rope.scaling.original_context_length", orig, 1, 1e12, &orig))) return st;
        r->scaling = MXL_ROPE_SCALING_LONGROPE;
        r->original_max_pos = orig;
        r->attention_factor = 1.0;
    }
    if ((st = arch_string(c, "rope.scaling.type", type, sizeof type))) return st;
    double factor = 0, attn = 1;
    /* the factor's old key, then the current one (llama.cpp reads rope.scale_linear when
     * rope.scaling.factor is absent); 0 means unset */
    if ((st = ranged(c, "rope.scale_linear", 0.0, 0, 1e6, &factor)) ||
        (st = ranged(c, "rope.scaling.factor", factor, 0, 1e6, &factor)) ||
        (st = ranged(c, "rope.scaling.attn_factor", 1.0, 1e-6, 1e6, &attn)))
        return st;
    if (factor == 0) factor = 1;
    if (attn != 1) r->attn_mul = attn;
    if (!type[0] || strcmp(type, "linear") == 0) {
        if (factor != 1) {
            r->scaling = MXL_ROPE_SCALING_LINEAR;
            r->factor = factor;
        }
        return MXL_OK;
    }
    if (strcmp(type, "none") == 0) return MXL_OK;
    if (strcmp(type, "yarn") != 0)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: RoPE scaling '%s' (metadata key '%s') is not supported for GGUF checkpoints (none, linear, yarn, rope_freqs and longrope's factor tensors are)",
                             c->ck->path, type, KEY("rope.scaling.type"));
    double orig = (double)c->cfg->max_position_embeddings, ext = 1, log_mul = 0, bf = 32, bs = 1, yattn = 0;
    if ((st = ranged(c, "rope.scaling.original_context_length", orig, 1, 1e12, &orig)) ||
        (st = ranged(c, "rope.scaling.yarn_ext_factor", 1.0, -1e6, 1e6, &ext)) ||
        (st = ranged(c, "rope.scaling.yarn_log_multiplier", 0.0, -1e6, 1e6, &log_mul)) ||
        (st = ranged(c, "rope.scaling.yarn_beta_fast", 32.0, 1e-6, 1e6, &bf)) ||
        (st = ranged(c, "rope.scaling.yarn_beta_slow", 1.0, 1e-6, 1e6, &bs)) ||
        (st = ranged(c, "rope.scaling.yarn_attn_factor", 0.0, 0, 1e6, &yattn)))
        return st;
    if (ext != 1 && ext >= 0) /* llama.cpp: negative = unset (1 for yarn) */
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: YaRN extrapolation factor %g (metadata key '%s') is not supported (1 is)", c->ck->path, ext,
                             KEY("rope.scaling.yarn_ext_factor"));
    if (log_mul != 0 && c->hp->mla_kv_rank <= 0) {
        /* llama.cpp (llama_context): cos / sin times mscale(factor, 1) / mscale(factor, log_mul),
         * the multiplier being mscale_all_dim (Mistral 3's converter) */
        r->mscale = 1.0;
        r->mscale_all_dim = log_mul;
    } else if (log_mul != 0) {
        /* llama.cpp deepseek2 (its TAG_DEEPSEEK2_YARN_LOG_MUL_FIX): the converter writes
         * 0.1 * mscale_all_dim; cos / sin stay unscaled (mscale = mscale_all_dim: transformers'
         * attention_factor 1) and the softmax scale takes mscale(factor, mscale_all_dim)^2, as
         * transformers' DeepSeek attention does */
        const double msad = log_mul / 0.1, m = factor > 1 ? 0.1 * msad * log(factor) + 1.0 : 1.0;
        r->mscale = r->mscale_all_dim = msad;
        c->hp->attn_scale = (float)(c->hp->attn_scale * m * m);
    }
    r->scaling = MXL_ROPE_SCALING_YARN;
    r->factor = factor;
    r->original_max_pos = orig;
    r->beta_fast = bf;
    r->beta_slow = bs;
    r->attention_factor = yattn; /* 0: 0.1*ln(factor)+1 */
    return MXL_OK;
#undef KEY
}

mxl_status mxl_family_gguf_layer_ints(mxl_family_ctx *c, const char *suffix, int64_t dflt, int64_t lo, int64_t hi, int32_t **out) {
    const int64_t n = c->hp->n_layers;
    char key[192];
    *out = mxl_arena_alloc(c->arena, (size_t)n * sizeof **out, 64);
    if (!*out) return mxl_error_set(c->err, MXL_ERR_NOMEM, "out of memory");
    const mxl_gguf_kv *kv = mxl_gguf_find(c->ck->gguf, arch_key(c, suffix, key, sizeof key));
    const mxl_gguf_array *a = kv && kv->value.type == MXL_GGUF_TYPE_ARRAY ? &kv->value.v.arr : NULL;
    if (a && a->n != (uint64_t)n)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' must list each of the %lld layers", c->ck->path, key, (long long)n);
    int64_t one = dflt;
    if (kv && !a && !mxl_gguf_value_as_i64(&kv->value, &one))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' must be an integer or one per layer", c->ck->path, key);
    for (int64_t i = 0; i < n; i++) {
        mxl_gguf_value e;
        int64_t x = one;
        if (a && (!mxl_gguf_array_get(a, (uint64_t)i, &e) || !mxl_gguf_value_as_i64(&e, &x)))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' must be an array of integers", c->ck->path, key);
        if (x < lo || x > hi)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' has %lld for layer %lld, outside [%lld, %lld]", c->ck->path, key,
                                 (long long)x, (long long)i, (long long)lo, (long long)hi);
        (*out)[i] = (int32_t)x;
    }
    return MXL_OK;
}

mxl_status mxl_family_gguf_mrope(mxl_family_ctx *c, const int32_t k_default[3]) {
    mxl_status st = mxl_family_gguf_rope_neox(c);
    if (st) return st;
    c->hp->rope_local = c->hp->rope;
    memcpy(c->hp->mrope_section, k_default, 3 * sizeof(int32_t));
    char key[128];
    const mxl_gguf_array *a = NULL;
    if (!mxl_gguf_find(c->ck->gguf, mxl_family_gguf_key(c, "rope.dimension_sections", key, sizeof key))) return MXL_OK;
    if (mxl_gguf_get_array(c->ck->gguf, key, &a, NULL) || a->n < 3)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: %s must list the rotary sections", c->ck->path, key);
    for (uint64_t i = 0; i < a->n; i++) {
        mxl_gguf_value v;
        int64_t x;
        if (!mxl_gguf_array_get(a, i, &v) || !mxl_gguf_value_as_i64(&v, &x) || x < 0 || x > 4096 || (i >= 3 && x != 0))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: %s must list 3 rotary sections (then zeros)", c->ck->path, key);
        if (i < 3) c->hp->mrope_section[i] = (int32_t)x;
    }
    return MXL_OK;
}
