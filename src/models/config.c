/* config.c - config.json -> typed mxl_model_config (see config.h).
 *
 * Field names and defaults follow transformers' PretrainedConfig subclasses: several spellings of
 * the same hyper-parameter exist across families (n_embd / d_model / hidden_size, ...), and
 * vision-language configs nest the decoder under text_config. Every value read is type- and
 * range-checked: a hostile config gives one line naming the file and the key. */
#include "models/config.h"

#include "core/alloc.h"
#include "io/json_read.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Upper bound for any size-like hyper-parameter; larger values are treated as hostile. */
#define MXL_CONFIG_MAX_DIM (INT64_C(1) << 40)
/* config.json files larger than this are refused (real ones are a few KB; id2label maps can make
 * them a few MB). */
#define MXL_CONFIG_MAX_BYTES (64u << 20)

void mxl_model_config_init(mxl_model_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    mxl_arena_init(&cfg->arena, 16 * 1024);
    cfg->language_model_only = -1;
    int64_t *ints[] = {&cfg->vocab_size, &cfg->hidden_size, &cfg->intermediate_size,
                       &cfg->num_hidden_layers, &cfg->num_attention_heads,
                       &cfg->num_key_value_heads, &cfg->head_dim, &cfg->max_position_embeddings,
                       &cfg->sliding_window, &cfg->sliding_window_pattern, &cfg->num_experts,
                       &cfg->num_experts_per_tok, &cfg->num_labels, &cfg->type_vocab_size,
                       &cfg->bos_token_id, &cfg->kv_lora_rank, &cfg->qk_rope_head_dim};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) *ints[i] = -1;
    double *dbls[] = {&cfg->rms_norm_eps, &cfg->layer_norm_eps, &cfg->rope_theta,
                      &cfg->rope_local_base_freq, &cfg->partial_rotary_factor};
    for (size_t i = 0; i < sizeof dbls / sizeof dbls[0]; i++) *dbls[i] = NAN;
    cfg->quant.bits = -1;
    cfg->quant.group_size = -1;
}

void mxl_model_config_free(mxl_model_config *cfg) {
    if (cfg->raw) json_decref(cfg->raw);
    mxl_arena_free(&cfg->arena);
    memset(cfg, 0, sizeof *cfg);
}

const char *mxl_quant_mode_name(mxl_quant_mode mode) {
    switch (mode) {
    case MXL_QUANT_NONE: return "none";
    case MXL_QUANT_AFFINE: return "affine";
    case MXL_QUANT_MXFP4: return "mxfp4";
    case MXL_QUANT_MXFP8: return "mxfp8";
    case MXL_QUANT_NVFP4: return "nvfp4";
    case MXL_QUANT_FP8_BLOCK: return "fp8";
    case MXL_QUANT_COMPRESSED: return "compressed-tensors";
    case MXL_QUANT_GGUF: return "gguf";
    case MXL_QUANT_OTHER: return "other";
    }
    return "unknown";
}

bool mxl_model_config_has_arch(const mxl_model_config *cfg, const char *name) {
    for (int i = 0; i < cfg->n_architectures; i++)
        if (strcmp(cfg->architectures[i], name) == 0) return true;
    return false;
}

/* ---- typed readers over a primary object with an optional fallback object ---- */

typedef struct reader {
    const char *origin;
    json_t *primary;  /* text_config when present, else the top level */
    json_t *fallback; /* top level when primary is text_config, else NULL */
    mxl_error *err;
} reader;

static json_t *lookup(const reader *r, const char *key) {
    json_t *v = json_object_get(r->primary, key);
    if (!v && r->fallback) v = json_object_get(r->fallback, key);
    return v;
}

/* Reads the first present key among `keys` (NULL-terminated) as an integer in
 * [min, MXL_CONFIG_MAX_DIM] (integral reals count). Absent or null leaves *out untouched. Returns
 * nonzero after setting err on a bad value. */
static int read_int(const reader *r, const char *const *keys, int64_t min, int64_t *out) {
    for (int i = 0; keys[i]; i++) {
        json_t *v = lookup(r, keys[i]);
        if (!v || json_is_null(v)) continue;
        int64_t x = 0;
        int bad = mxl_json_int(v, min, MXL_CONFIG_MAX_DIM, &x);
        if (bad == 1) {
            mxl_error_set(r->err, MXL_ERR_FORMAT, "%s: '%s' must be an integer", r->origin, keys[i]);
            return 1;
        }
        if (bad == 2) {
            char shown[64] = "?";
            double d;
            if (json_is_integer(v)) snprintf(shown, sizeof shown, "%lld", (long long)json_integer_value(v));
            else if (mxl_json_number(v, &d)) snprintf(shown, sizeof shown, "%g", d);
            mxl_error_set(r->err, MXL_ERR_FORMAT, "%s: '%s' = %s is out of range", r->origin, keys[i], shown);
            return 1;
        }
        *out = x;
        return 0;
    }
    return 0;
}

/* A finite number (Python's json also gives NaN and +-Infinity, which no hyper-parameter read
 * here can use: refused by name). */
static int read_double(const reader *r, const char *const *keys, double *out) {
    for (int i = 0; keys[i]; i++) {
        json_t *v = lookup(r, keys[i]);
        if (!v || json_is_null(v)) continue;
        double x;
        if (!mxl_json_number(v, &x)) {
            mxl_error_set(r->err, MXL_ERR_FORMAT, "%s: '%s' must be a number", r->origin, keys[i]);
            return 1;
        }
        if (!isfinite(x)) {
            mxl_error_set(r->err, MXL_ERR_FORMAT, "%s: '%s' is not finite", r->origin, keys[i]);
            return 1;
        }
        *out = x;
        return 0;
    }
    return 0;
}

static int read_bool(const reader *r, const char *key, bool *out) {
    json_t *v = lookup(r, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) {
        mxl_error_set(r->err, MXL_ERR_FORMAT, "%s: '%s' must be true or false", r->origin, key);
        return 1;
    }
    *out = json_is_true(v);
    return 0;
}

static int read_string(const reader *r, const char *const *keys, char *out, size_t cap) {
    for (int i = 0; keys[i]; i++) {
        json_t *v = lookup(r, keys[i]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_string(v)) {
            mxl_error_set(r->err, MXL_ERR_FORMAT, "%s: '%s' must be a string", r->origin, keys[i]);
            return 1;
        }
        snprintf(out, cap, "%s", json_string_value(v));
        return 0;
    }
    return 0;
}

static void lower_copy(char *dst, size_t cap, const char *src) {
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++) dst[i] = (char)tolower((unsigned char)src[i]);
    dst[i] = '\0';
}

static bool nonempty_object(json_t *v) { return v && json_is_object(v) && json_object_size(v) > 0; }

/* ---- quantization ---- */

static mxl_quant_mode mode_from_name(const char *s) {
    if (strcmp(s, "affine") == 0) return MXL_QUANT_AFFINE;
    if (strcmp(s, "mxfp4") == 0) return MXL_QUANT_MXFP4;
    if (strcmp(s, "mxfp8") == 0) return MXL_QUANT_MXFP8;
    if (strcmp(s, "nvfp4") == 0) return MXL_QUANT_NVFP4;
    return MXL_QUANT_OTHER;
}

static int check_affine(const char *origin, const char *where, int bits, int group_size, mxl_error *err) {
    static const int ok_bits[] = {1, 2, 3, 4, 5, 6, 8};
    bool bits_ok = false;
    for (size_t i = 0; i < sizeof ok_bits / sizeof ok_bits[0]; i++) bits_ok |= bits == ok_bits[i];
    if (!bits_ok) {
        mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: %s declares bits=%d; MLX affine quantization supports 1, 2, 3, 4, 5, 6 or 8", origin, where, bits);
        return 1;
    }
    if (group_size != 32 && group_size != 64 && group_size != 128) {
        mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: %s declares group_size=%d; supported group sizes are 32, 64 and 128", origin, where, group_size);
        return 1;
    }
    return 0;
}

static int int_field(json_t *obj, const char *key, int dflt, const char *origin, const char *where, int *out, mxl_error *err) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    int64_t x;
    if (mxl_json_int(v, 0, 4096, &x)) {
        mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s.%s must be a small non-negative integer", origin, where, key);
        return 1;
    }
    *out = (int)x;
    return 0;
}

/* MLX style: {"group_size": 64, "bits": 4, "mode": "affine", "<module path>": {...} | false}. */
static int parse_mlx_quant(mxl_model_config *cfg, json_t *q, const char *origin, const char *key, mxl_error *err) {
    mxl_quant_config *qc = &cfg->quant;
    json_t *mode = json_object_get(q, "mode");
    if (mode && !json_is_string(mode)) {
        mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s.mode must be a string", origin, key);
        return 1;
    }
    const char *mode_s = mode ? json_string_value(mode) : "affine";
    qc->mode = mode_from_name(mode_s);
    snprintf(qc->method, sizeof qc->method, "%s", mode_s);
    if (qc->mode == MXL_QUANT_OTHER) {
        mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: %s.mode '%s' is not a quantization mode mlxcel loads (affine, mxfp4, mxfp8, nvfp4)", origin, key, mode_s);
        return 1;
    }
    int dflt_gs = qc->mode == MXL_QUANT_AFFINE ? 64 : qc->mode == MXL_QUANT_NVFP4 ? 16 : 32;
    int dflt_bits = qc->mode == MXL_QUANT_AFFINE ? 4 : (qc->mode == MXL_QUANT_MXFP8 ? 8 : 4);
    if (int_field(q, "bits", dflt_bits, origin, key, &qc->bits, err)) return 1;
    if (int_field(q, "group_size", dflt_gs, origin, key, &qc->group_size, err)) return 1;
    if (qc->mode == MXL_QUANT_AFFINE && check_affine(origin, key, qc->bits, qc->group_size, err)) return 1;

    /* per-layer overrides: every object- or false-valued key other than the known scalars */
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(q, k, v) {
        if (json_is_object(v) || json_is_false(v)) n++;
    }
    if (n == 0) return 0;
    qc->overrides = mxl_arena_alloc(&cfg->arena, n * sizeof *qc->overrides, _Alignof(mxl_quant_override));
    if (!qc->overrides) {
        mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        return 1;
    }
    json_object_foreach(q, k, v) {
        if (!json_is_object(v) && !json_is_false(v)) continue;
        mxl_quant_override *o = &qc->overrides[qc->n_overrides++];
        o->prefix = mxl_arena_strdup(&cfg->arena, k);
        if (!o->prefix) {
            mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
            return 1;
        }
        if (json_is_false(v)) {
            o->bits = 0;
            o->mode = MXL_QUANT_NONE;
            continue;
        }
        char where[160];
        snprintf(where, sizeof where, "%s.\"%.120s\"", key, k);
        json_t *om = json_object_get(v, "mode");
        /* (mlx's nn.quantize takes a module's entry as its whole parameters: no "mode" is affine,
         * as mlx-lm's 8-bit routers under an mxfp4 model) */
        o->mode = om && json_is_string(om) ? mode_from_name(json_string_value(om)) : MXL_QUANT_AFFINE;
        if (int_field(v, "bits", qc->bits, origin, where, &o->bits, err)) return 1;
        if (int_field(v, "group_size", qc->group_size, origin, where, &o->group_size, err)) return 1;
        if (o->mode == MXL_QUANT_AFFINE && check_affine(origin, where, o->bits, o->group_size, err)) return 1;
    }
    return 0;
}

/* Hugging Face quantization_config with a quant_method. */
static int parse_hf_quant(mxl_model_config *cfg, json_t *q, const char *origin, mxl_error *err) {
    mxl_quant_config *qc = &cfg->quant;
    const char *method = json_string_value(json_object_get(q, "quant_method"));
    snprintf(qc->method, sizeof qc->method, "%s", method);
    if (strcmp(method, "fp8") == 0) {
        qc->mode = MXL_QUANT_FP8_BLOCK;
        qc->bits = 8;
        json_t *bs = json_object_get(q, "weight_block_size");
        if (bs && json_is_array(bs) && json_array_size(bs) == 2 && json_is_integer(json_array_get(bs, 1)))
            qc->group_size = (int)json_integer_value(json_array_get(bs, 1));
        return 0;
    }
    if (strcmp(method, "compressed-tensors") == 0) {
        qc->mode = MXL_QUANT_COMPRESSED;
        return 0;
    }
    if (strcmp(method, "mxfp4") == 0) {
        qc->mode = MXL_QUANT_MXFP4;
        qc->bits = 4;
        qc->group_size = 32;
        return 0;
    }
    /* gptq, awq, bitsandbytes, ... : recorded by name; loaders refuse them by that name. */
    qc->mode = MXL_QUANT_OTHER;
    json_t *b = json_object_get(q, "bits");
    if (b && json_is_integer(b)) qc->bits = (int)json_integer_value(b);
    json_t *g = json_object_get(q, "group_size");
    if (g && json_is_integer(g)) qc->group_size = (int)json_integer_value(g);
    (void)origin;
    (void)err;
    return 0;
}

static int parse_quant(mxl_model_config *cfg, json_t *root, const char *origin, mxl_error *err) {
    json_t *q = json_object_get(root, "quantization");
    const char *key = "quantization";
    if (!q || json_is_null(q)) {
        q = json_object_get(root, "quantization_config");
        key = "quantization_config";
    }
    if (!q || json_is_null(q)) return 0;
    if (!json_is_object(q)) {
        mxl_error_set(err, MXL_ERR_FORMAT, "%s: '%s' must be an object", origin, key);
        return 1;
    }
    json_t *method = json_object_get(q, "quant_method");
    if (method) {
        if (!json_is_string(method)) {
            mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s.quant_method must be a string", origin, key);
            return 1;
        }
        return parse_hf_quant(cfg, q, origin, err);
    }
    return parse_mlx_quant(cfg, q, origin, key, err);
}

/* ---- main parse ---- */

static int parse_layer_types(mxl_model_config *cfg, const reader *r) {
    json_t *lt = lookup(r, "layer_types");
    if (!lt || json_is_null(lt)) return 0;
    if (!json_is_array(lt)) {
        mxl_error_set(r->err, MXL_ERR_FORMAT, "%s: 'layer_types' must be an array", r->origin);
        return 1;
    }
    size_t n = json_array_size(lt);
    if (n > (size_t)MXL_CONFIG_MAX_DIM) return 1;
    cfg->layer_is_sliding = mxl_arena_alloc(&cfg->arena, n ? n : 1, 1);
    if (!cfg->layer_is_sliding) {
        mxl_error_set(r->err, MXL_ERR_NOMEM, "out of memory");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(lt, i));
        if (!s) {
            mxl_error_set(r->err, MXL_ERR_FORMAT, "%s: layer_types[%zu] must be a string", r->origin, i);
            return 1;
        }
        cfg->layer_is_sliding[i] = strstr(s, "sliding") != NULL || strcmp(s, "local") == 0;
    }
    cfg->n_layer_types = (int)n;
    return 0;
}

static int parse_eos(mxl_model_config *cfg, const reader *r) {
    json_t *e = lookup(r, "eos_token_id");
    if (!e || json_is_null(e)) return 0;
    if (json_is_integer(e)) {
        cfg->eos_token_ids[cfg->n_eos++] = (int64_t)json_integer_value(e);
        return 0;
    }
    if (!json_is_array(e)) {
        mxl_error_set(r->err, MXL_ERR_FORMAT, "%s: 'eos_token_id' must be an integer or a list of integers", r->origin);
        return 1;
    }
    size_t i;
    json_t *x;
    json_array_foreach(e, i, x) {
        if (!json_is_integer(x)) {
            mxl_error_set(r->err, MXL_ERR_FORMAT, "%s: eos_token_id[%zu] must be an integer", r->origin, i);
            return 1;
        }
        if (cfg->n_eos < MXL_CONFIG_MAX_EOS) cfg->eos_token_ids[cfg->n_eos++] = (int64_t)json_integer_value(x);
    }
    return 0;
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

static int fill_from_json(mxl_model_config *cfg, json_t *root, const char *origin, mxl_error *err) {
    reader top = {origin, root, NULL, err};
    char mt[64] = "";
    if (read_string(&top, KEYS("model_type"), mt, sizeof mt)) return 1;
    lower_copy(cfg->model_type, sizeof cfg->model_type, mt);

    json_t *archs = json_object_get(root, "architectures");
    if (archs && !json_is_null(archs)) {
        if (!json_is_array(archs)) {
            mxl_error_set(err, MXL_ERR_FORMAT, "%s: 'architectures' must be a list of strings", origin);
            return 1;
        }
        size_t i;
        json_t *a;
        json_array_foreach(archs, i, a) {
            if (!json_is_string(a)) {
                mxl_error_set(err, MXL_ERR_FORMAT, "%s: architectures[%zu] must be a string", origin, i);
                return 1;
            }
            if (cfg->n_architectures < MXL_CONFIG_MAX_ARCHS) {
                const char *s = mxl_arena_strdup(&cfg->arena, json_string_value(a));
                if (!s) {
                    mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
                    return 1;
                }
                cfg->architectures[cfg->n_architectures++] = s;
            }
        }
    }

    cfg->has_vision_config = nonempty_object(json_object_get(root, "vision_config"));
    cfg->has_audio_config = nonempty_object(json_object_get(root, "audio_config"));
    json_t *lmo = json_object_get(root, "language_model_only");
    if (lmo && !json_is_null(lmo)) {
        if (!json_is_boolean(lmo)) {
            mxl_error_set(err, MXL_ERR_FORMAT, "%s: 'language_model_only' must be true or false", origin);
            return 1;
        }
        cfg->language_model_only = json_is_true(lmo);
    }

    /* Decoder fields live in text_config for VLM-packaged checkpoints. */
    json_t *tc = json_object_get(root, "text_config");
    reader r = top;
    if (tc && json_is_object(tc)) {
        r.primary = tc;
        r.fallback = root;
        char tmt[64] = "";
        if (read_string(&r, KEYS("model_type"), tmt, sizeof tmt)) return 1;
        lower_copy(cfg->text_model_type, sizeof cfg->text_model_type, tmt);
    } else if (tc && !json_is_null(tc)) {
        mxl_error_set(err, MXL_ERR_FORMAT, "%s: 'text_config' must be an object", origin);
        return 1;
    }

    if (read_string(&r, KEYS("torch_dtype", "dtype"), cfg->torch_dtype, sizeof cfg->torch_dtype)) return 1;
    if (read_int(&r, KEYS("vocab_size", "padded_vocab_size"), 1, &cfg->vocab_size)) return 1;
    if (read_int(&r, KEYS("hidden_size", "n_embd", "d_model", "model_dim"), 1, &cfg->hidden_size)) return 1;
    /* Gemma 3n lists one MLP width per layer: the widest here (its family reads the list) */
    json_t *widths = lookup(&r, "intermediate_size");
    if (json_is_array(widths) && json_array_size(widths) > 0) {
        size_t i;
        json_t *w;
        json_array_foreach(widths, i, w) {
            int64_t x = 0;
            if (mxl_json_int(w, 1, MXL_CONFIG_MAX_DIM, &x)) {
                mxl_error_set(err, MXL_ERR_FORMAT, "%s: 'intermediate_size' must be an integer or a list of positive integers", origin);
                return 1;
            }
            if (x > cfg->intermediate_size) cfg->intermediate_size = x;
        }
    } else if (read_int(&r, KEYS("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"), 0, &cfg->intermediate_size)) {
        return 1;
    }
    if (read_int(&r, KEYS("num_hidden_layers", "n_layer", "num_layers", "n_layers"), 1, &cfg->num_hidden_layers)) return 1;
    if (read_int(&r, KEYS("num_attention_heads", "n_head", "num_heads", "n_heads"), 1, &cfg->num_attention_heads)) return 1;
    if (read_int(&r, KEYS("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num"), 1, &cfg->num_key_value_heads)) return 1;
    if (read_int(&r, KEYS("head_dim", "attention_head_dim"), 1, &cfg->head_dim)) return 1;
    if (read_int(&r, KEYS("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"), 1, &cfg->max_position_embeddings)) return 1;
    if (read_int(&r, KEYS("sliding_window"), 0, &cfg->sliding_window)) return 1;
    /* EXAONE 4 may spell the pattern as letters ("LLLG"): its family reads that form */
    if (!json_is_string(lookup(&r, "sliding_window_pattern")) &&
        read_int(&r, KEYS("sliding_window_pattern"), 1, &cfg->sliding_window_pattern))
        return 1;
    if (read_int(&r, KEYS("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), 0, &cfg->num_experts)) return 1;
    if (read_int(&r, KEYS("num_experts_per_tok", "moe_top_k", "num_experts_per_token", "moe_k"), 0, &cfg->num_experts_per_tok)) return 1;
    if (read_int(&r, KEYS("kv_lora_rank"), 0, &cfg->kv_lora_rank)) return 1;
    if (read_int(&r, KEYS("qk_rope_head_dim"), 0, &cfg->qk_rope_head_dim)) return 1;
    if (read_int(&r, KEYS("type_vocab_size"), 0, &cfg->type_vocab_size)) return 1;
    if (read_double(&r, KEYS("rms_norm_eps"), &cfg->rms_norm_eps)) return 1;
    if (read_double(&r, KEYS("layer_norm_eps", "layer_norm_epsilon", "norm_eps"), &cfg->layer_norm_eps)) return 1;
    if (read_double(&r, KEYS("rope_theta"), &cfg->rope_theta)) return 1;
    if (read_double(&r, KEYS("rope_local_base_freq"), &cfg->rope_local_base_freq)) return 1;
    if (read_double(&r, KEYS("partial_rotary_factor"), &cfg->partial_rotary_factor)) return 1;
    if (read_string(&r, KEYS("hidden_act", "hidden_activation", "activation_function"), cfg->hidden_act, sizeof cfg->hidden_act)) return 1;

    /* rope_theta moved into rope_parameters in newer transformers configs */
    if (isnan(cfg->rope_theta)) {
        json_t *rp = lookup(&r, "rope_parameters");
        if (rp && json_is_object(rp)) {
            reader rr = {r.origin, rp, NULL, err};
            if (read_double(&rr, KEYS("rope_theta"), &cfg->rope_theta)) return 1;
        }
    }

    /* transformers' PretrainedConfig default for tie_word_embeddings is True */
    cfg->tie_word_embeddings = true;
    if (read_bool(&r, "tie_word_embeddings", &cfg->tie_word_embeddings)) return 1;

    /* GPT-BigCode-style multi_query means one KV head */
    bool mq = false;
    if (read_bool(&r, "multi_query", &mq)) return 1;
    if (mq) cfg->num_key_value_heads = 1;

    /* sequence classifiers: num_labels or the size of id2label */
    json_t *id2label = lookup(&r, "id2label");
    if (id2label && json_is_object(id2label)) cfg->num_labels = (int64_t)json_object_size(id2label);
    if (read_int(&r, KEYS("num_labels"), 0, &cfg->num_labels)) return 1;

    if (cfg->num_attention_heads > 0) {
        if (cfg->num_key_value_heads < 0) cfg->num_key_value_heads = cfg->num_attention_heads;
        /* an attention geometry that cannot be built is refused by name: query heads share KV heads
         * in whole groups, and a head size taken from hidden_size must divide it (transformers'
         * attention fails on either at its first forward) */
        if (cfg->num_key_value_heads > 0 && cfg->num_attention_heads % cfg->num_key_value_heads != 0) {
            mxl_error_set(err, MXL_ERR_FORMAT, "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                          origin, (long long)cfg->num_attention_heads, (long long)cfg->num_key_value_heads);
            return 1;
        }
        if (cfg->head_dim < 0 && cfg->hidden_size > 0) {
            if (cfg->hidden_size % cfg->num_attention_heads != 0) {
                mxl_error_set(err, MXL_ERR_FORMAT,
                              "%s: hidden_size %lld is not divisible by num_attention_heads %lld and there is no head_dim",
                              origin, (long long)cfg->hidden_size, (long long)cfg->num_attention_heads);
                return 1;
            }
            cfg->head_dim = cfg->hidden_size / cfg->num_attention_heads;
        }
    }
    /* Nemotron-H: the layer count is its block list's length (num_hidden_layers is deprecated) */
    if (cfg->num_hidden_layers <= 0) {
        json_t *bt = lookup(&r, "layers_block_type"), *pat = lookup(&r, "hybrid_override_pattern");
        if (bt && json_is_array(bt) && json_array_size(bt) > 0 && json_array_size(bt) <= (size_t)MXL_CONFIG_MAX_DIM)
            cfg->num_hidden_layers = (int64_t)json_array_size(bt);
        else if (pat && json_is_string(pat) && json_string_length(pat) > 0 && json_string_length(pat) <= (size_t)MXL_CONFIG_MAX_DIM)
            cfg->num_hidden_layers = (int64_t)json_string_length(pat);
    }
    if (parse_layer_types(cfg, &r)) return 1;
    if (cfg->n_layer_types > 0 && cfg->num_hidden_layers > 0 && cfg->n_layer_types != cfg->num_hidden_layers) {
        mxl_error_set(err, MXL_ERR_FORMAT, "%s: layer_types has %d entries but num_hidden_layers is %lld", origin, cfg->n_layer_types, (long long)cfg->num_hidden_layers);
        return 1;
    }
    if (read_int(&r, KEYS("bos_token_id"), 0, &cfg->bos_token_id)) return 1;
    if (parse_eos(cfg, &r)) return 1;
    if (parse_quant(cfg, root, origin, err)) return 1;
    return 0;
}

mxl_status mxl_model_config_parse_json(const char *text, size_t len, const char *origin,
                                       mxl_model_config *out, mxl_error *err) {
    mxl_model_config_init(out);
    out->source = MXL_CONFIG_SOURCE_HF_JSON;
    if (len > MXL_CONFIG_MAX_BYTES)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %zu bytes is larger than any real config.json", origin, len);
    json_error_t jerr;
    json_t *root = mxl_json_loads_py(text, len, &jerr);
    if (!root && mxl_json_error_is_oom(&jerr)) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", origin);
    if (!root)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: invalid JSON at line %d column %d: %s", origin, jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: top level must be a JSON object", origin);
    }
    out->raw = root;
    mxl_error local;
    mxl_error *e = err ? err : &local;
    mxl_error_clear(e);
    if (fill_from_json(out, root, origin, e)) {
        mxl_status st = e->status ? e->status : MXL_ERR_FORMAT;
        mxl_model_config_free(out);
        mxl_model_config_init(out);
        return st;
    }
    return MXL_OK;
}

mxl_status mxl_model_config_load_dir(const char *dir, mxl_model_config *out, mxl_error *err) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir) >= sizeof path)
        return mxl_error_set(err, MXL_ERR_ARG, "%s: path too long", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        mxl_model_config_init(out);
        return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: cannot open (is this a model directory?)", path);
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= MXL_CONFIG_MAX_BYTES + 1) break;
            cap = cap ? cap * 2 : 16384;
            char *nb = mxl_realloc(buf, cap);
            if (!nb) {
                mxl_free(buf);
                fclose(f);
                mxl_model_config_init(out);
                return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory reading %s", path);
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) break;
    }
    int ioerr = ferror(f);
    fclose(f);
    if (ioerr) {
        mxl_free(buf);
        mxl_model_config_init(out);
        return mxl_error_set(err, MXL_ERR_IO, "%s: read error", path);
    }
    mxl_status st = mxl_model_config_parse_json(buf ? buf : "", len, path, out, err);
    mxl_free(buf);
    return st;
}
