/* detect.c - routes a checkpoint to a registry family and a task (see detect.h for the rules and
 * their order, taken from ../shared/spec/supported-models.md "Model Detection"). Everything read
 * from the checkpoint directory (modules.json, pooling configs) is untrusted: sizes are capped,
 * JSON types checked, and module paths confined to plain sub-directory names. */
#include "models/detect.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "io/json_read.h"

/* modules.json and pooling configs are a few hundred bytes; anything past this is not one. */
#define ST_FILE_MAX (1u << 20)
#define MAX_CANDIDATES 16

const char *mxl_pooling_name(mxl_pooling p) {
    switch (p) {
    case MXL_POOLING_NONE: return "none";
    case MXL_POOLING_CLS: return "cls";
    case MXL_POOLING_MEAN: return "mean";
    case MXL_POOLING_MAX: return "max";
    case MXL_POOLING_MEAN_SQRT_LEN: return "mean_sqrt_len";
    case MXL_POOLING_WEIGHTED_MEAN: return "weighted_mean";
    case MXL_POOLING_LAST_TOKEN: return "last_token";
    }
    return "none";
}

/* ---- small file helpers ---- */

static mxl_status join_path(char *out, size_t cap, const char *dir, const char *a, const char *b,
                            mxl_error *err) {
    int n = b ? snprintf(out, cap, "%s/%s/%s", dir, a, b) : snprintf(out, cap, "%s/%s", dir, a);
    if (n < 0 || (size_t)n >= cap) return mxl_error_set(err, MXL_ERR_ARG, "%s: path too long", dir);
    return MXL_OK;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Parses a small JSON file. Returns MXL_ERR_NOT_FOUND (err untouched) when it does not exist. */
static mxl_status load_small_json(const char *path, json_t **out, mxl_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT || errno == ENOTDIR) return MXL_ERR_NOT_FOUND;
        return mxl_error_set(err, MXL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    char *buf = mxl_malloc(ST_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory reading %s", path);
    }
    size_t len = fread(buf, 1, ST_FILE_MAX + 1, f);
    bool read_err = ferror(f) != 0;
    fclose(f);
    if (read_err) {
        mxl_free(buf);
        return mxl_error_set(err, MXL_ERR_IO, "%s: read failed", path);
    }
    if (len > ST_FILE_MAX) {
        mxl_free(buf);
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: larger than %u bytes, not a sentence-transformers config", path, ST_FILE_MAX);
    }
    json_error_t jerr;
    json_t *root = mxl_json_loads_py(buf, len, &jerr);
    mxl_free(buf);
    if (!root && mxl_json_error_is_oom(&jerr)) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
    if (!root)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: invalid JSON at line %d column %d: %s", path, jerr.line, jerr.column, jerr.text);
    *out = root;
    return MXL_OK;
}

/* A module path must be one plain sub-directory name ("1_Pooling"): no separators, no dot-dot,
 * nothing that could leave the checkpoint directory. */
static bool safe_module_path(const char *p) {
    size_t n = strlen(p);
    if (n == 0 || n >= MXL_ST_PATH_MAX) return false;
    if (strcmp(p, ".") == 0 || strcmp(p, "..") == 0) return false;
    for (const char *c = p; *c; c++)
        if (*c == '/' || *c == '\\' || (unsigned char)*c < 0x20) return false;
    return true;
}

/* "sentence_transformers.models.Pooling" -> "Pooling" */
static const char *last_component(const char *type) {
    const char *dot = strrchr(type, '.');
    return dot ? dot + 1 : type;
}

static mxl_status read_pooling_config(const char *dir, const char *sub, mxl_st_layout *st, mxl_error *err) {
    char path[4096];
    mxl_status s = join_path(path, sizeof path, dir, sub, "config.json", err);
    if (s) return s;
    json_t *root;
    s = load_small_json(path, &root, err);
    if (s == MXL_ERR_NOT_FOUND) return MXL_OK; /* a Pooling module without config: mode unknown */
    if (s) return s;
    static const struct {
        const char *key;
        mxl_pooling mode;
    } k_modes[] = {
        {"pooling_mode_cls_token", MXL_POOLING_CLS},
        {"pooling_mode_mean_tokens", MXL_POOLING_MEAN},
        {"pooling_mode_max_tokens", MXL_POOLING_MAX},
        {"pooling_mode_mean_sqrt_len_tokens", MXL_POOLING_MEAN_SQRT_LEN},
        {"pooling_mode_weightedmean_tokens", MXL_POOLING_WEIGHTED_MEAN},
        {"pooling_mode_lasttoken", MXL_POOLING_LAST_TOKEN},
    };
    if (!json_is_object(root)) {
        json_decref(root);
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: top level must be a JSON object", path);
    }
    int n_on = 0;
    const char *first_on = NULL;
    /* sentence-transformers >= 6 writes one key, "pooling_mode": "lasttoken" (or a list of
     * modes, concatenated), instead of the pooling_mode_*_tokens booleans */
    static const struct {
        const char *name;
        mxl_pooling mode;
    } k_names[] = {
        {"cls", MXL_POOLING_CLS}, {"mean", MXL_POOLING_MEAN}, {"max", MXL_POOLING_MAX},
        {"mean_sqrt_len_tokens", MXL_POOLING_MEAN_SQRT_LEN}, {"weightedmean", MXL_POOLING_WEIGHTED_MEAN},
        {"lasttoken", MXL_POOLING_LAST_TOKEN},
    };
    static const char k_names_key[] = "pooling_mode";
    json_t *pm = json_object_get(root, k_names_key);
    if (pm && !json_is_null(pm)) {
        json_t *one = json_is_array(pm) && json_array_size(pm) == 1 ? json_array_get(pm, 0) : pm;
        if (json_is_array(one)) {
            mxl_status r = json_array_size(one) == 0
                               ? mxl_error_set(err, MXL_ERR_FORMAT, "%s: 'pooling_mode' is an empty list", path)
                               : mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: %zu pooling modes are enabled together; only one is supported", path, json_array_size(one));
            json_decref(root);
            return r;
        }
        if (!json_is_string(one)) {
            json_decref(root);
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: 'pooling_mode' must be a string (or a list of strings)", path);
        }
        const char *name = json_string_value(one);
        size_t k = 0;
        while (k < sizeof k_names / sizeof k_names[0] && strcmp(k_names[k].name, name) != 0) k++;
        if (k == sizeof k_names / sizeof k_names[0]) {
            mxl_status r = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: unknown pooling_mode '%.40s'", path, name);
            json_decref(root);
            return r;
        }
        st->pooling = k_names[k].mode;
        n_on = 1;
        first_on = k_names_key;
    }
    for (size_t i = 0; i < sizeof k_modes / sizeof k_modes[0]; i++) {
        json_t *v = json_object_get(root, k_modes[i].key);
        if (!v || json_is_null(v)) continue;
        if (!json_is_boolean(v)) {
            json_decref(root);
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: '%s' must be true or false", path, k_modes[i].key);
        }
        if (json_is_true(v)) {
            if (n_on == 1 && first_on == k_names_key && st->pooling == k_modes[i].mode) continue; /* both forms, same mode */
            if (n_on++ == 0) {
                st->pooling = k_modes[i].mode;
                first_on = k_modes[i].key;
            }
        }
    }
    if (n_on > 1) {
        mxl_status r = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: %d pooling modes are enabled together (first '%s'); only one is supported", path, n_on, first_on);
        json_decref(root);
        return r;
    }
    json_decref(root);
    return MXL_OK;
}

mxl_status mxl_st_layout_read(const char *dir, mxl_st_layout *out, mxl_error *err) {
    memset(out, 0, sizeof *out);
    if (!dir) return MXL_OK;
    char path[4096];
    mxl_status s = join_path(path, sizeof path, dir, "modules.json", NULL, err);
    if (s) return s;
    json_t *root;
    s = load_small_json(path, &root, err);
    if (s == MXL_OK) {
        out->has_modules_json = true;
        if (!json_is_array(root)) {
            json_decref(root);
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: top level must be a list of modules", path);
        }
        size_t i;
        json_t *m;
        json_array_foreach(root, i, m) {
            json_t *type = json_is_object(m) ? json_object_get(m, "type") : NULL;
            json_t *mpath = json_is_object(m) ? json_object_get(m, "path") : NULL;
            if (!type || !json_is_string(type) || (mpath && !json_is_string(mpath))) {
                json_decref(root);
                return mxl_error_set(err, MXL_ERR_FORMAT, "%s: module %zu needs a string 'type' and 'path'", path, i);
            }
            const char *kind = last_component(json_string_value(type));
            const char *sub = mpath ? json_string_value(mpath) : "";
            bool pooling = strcmp(kind, "Pooling") == 0;
            bool dense = strcmp(kind, "Dense") == 0;
            bool normalize = strcmp(kind, "Normalize") == 0;
            if ((pooling || dense) && !safe_module_path(sub)) {
                /* the message quotes `sub`, which lives in `root`: free after formatting */
                mxl_status r = mxl_error_set(err, MXL_ERR_FORMAT, "%s: module %zu path '%.64s' is not a plain sub-directory name", path, i, sub);
                json_decref(root);
                return r;
            }
            if (pooling && !out->has_pooling) {
                out->has_pooling = true;
                snprintf(out->pooling_path, sizeof out->pooling_path, "%s", sub);
            } else if (dense) {
                if (out->n_dense >= MXL_ST_MAX_DENSE) {
                    json_decref(root);
                    return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: more than %d Dense modules", path, MXL_ST_MAX_DENSE);
                }
                snprintf(out->dense_paths[out->n_dense++], MXL_ST_PATH_MAX, "%s", sub);
            } else if (normalize) {
                out->normalize = true;
            }
        }
        json_decref(root);
    } else if (s != MXL_ERR_NOT_FOUND) {
        return s;
    }

    /* Without a Pooling module in modules.json, the conventional directory still marks one. */
    if (!out->has_pooling) {
        s = join_path(path, sizeof path, dir, "1_Pooling", "config.json", err);
        if (s) return s;
        if (is_file(path)) {
            out->has_pooling = true;
            snprintf(out->pooling_path, sizeof out->pooling_path, "1_Pooling");
        }
    }
    if (!out->has_modules_json) {
        s = join_path(path, sizeof path, dir, "2_Normalize", NULL, err);
        if (s) return s;
        if (is_dir(path)) out->normalize = true;
    }
    if (out->has_pooling) return read_pooling_config(dir, out->pooling_path, out, err);
    return MXL_OK;
}

/* ---- detection ---- */

static bool vision_active(const mxl_model_config *cfg) {
    return cfg->has_vision_config && cfg->language_model_only != 1;
}

/* Families whose task is served by a model's own forward pass as the main product (generation,
 * seq2seq, audio, detection, ...), as opposed to the embedding-side surfaces that reuse a
 * generation key with a different head or layout. */
static bool generation_side(const mxl_family *f) {
    return f->task != MXL_TASK_EMBED && f->task != MXL_TASK_RERANK && f->task != MXL_TASK_TAG &&
           f->task != MXL_TASK_EXTRACT;
}

static bool select_holds(const mxl_family *f, const mxl_model_config *cfg) {
    switch (f->select) {
    case MXL_SELECT_ANY: return true;
    case MXL_SELECT_VISION: return vision_active(cfg);
    case MXL_SELECT_MOE: return cfg->num_experts > 1;
    case MXL_SELECT_DENSE: return cfg->num_experts <= 1; /* -1 when absent */
    case MXL_SELECT_GRANITE_TEXT: return strcmp(cfg->text_model_type, "granite") == 0;
    }
    return false;
}

/* A boolean at the top level of config.json or in its text_config; false when absent. */
static bool raw_flag(const mxl_model_config *cfg, const char *key, bool want) {
    if (!cfg->raw) return false;
    json_t *v = json_object_get(cfg->raw, key);
    if (!v) {
        json_t *tc = json_object_get(cfg->raw, "text_config");
        if (tc && json_is_object(tc)) v = json_object_get(tc, key);
    }
    return v && json_is_boolean(v) && json_is_true(v) == want;
}

static mxl_status finish(mxl_detection *out, const mxl_family *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static mxl_status finish(mxl_detection *out, const mxl_family *f, const char *fmt, ...) {
    out->family = f;
    out->task = f->task;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof out->reason, fmt, ap);
    va_end(ap);
    return MXL_OK;
}

static void set_vision(mxl_detection *out, const mxl_family *f, const mxl_model_config *cfg) {
    out->vision = f->form == MXL_FORM_MULTIMODAL || (f->form == MXL_FORM_VLM && vision_active(cfg));
}

/* The embedding family claiming `key`, or NULL. */
static const mxl_family *embed_family_for(const char *key) {
    const mxl_family *c[MAX_CANDIDATES];
    size_t n = mxl_registry_find_all_model_type(key, c, MAX_CANDIDATES);
    for (size_t i = 0; i < n && i < MAX_CANDIDATES; i++)
        if (c[i]->task == MXL_TASK_EMBED) return c[i];
    return NULL;
}

static const char *vision_words(const mxl_family *f, const mxl_model_config *cfg) {
    if (f->form == MXL_FORM_MULTIMODAL) return " (image input intrinsic)";
    if (f->form != MXL_FORM_VLM) return "";
    if (vision_active(cfg)) return " (vision_config present: VLM form)";
    if (cfg->has_vision_config) return " (language_model_only: text-only)";
    return " (no vision_config: text-only)";
}

static const char *select_words(const mxl_family *f, const mxl_model_config *cfg) {
    switch (f->select) {
    case MXL_SELECT_VISION: return "vision_config present";
    case MXL_SELECT_MOE: return "num_experts > 1";
    case MXL_SELECT_DENSE: return cfg->num_experts < 0 ? "num_experts absent" : "num_experts <= 1";
    case MXL_SELECT_GRANITE_TEXT: return "Granite text config";
    case MXL_SELECT_ANY: break;
    }
    return NULL;
}

static mxl_status detect_by_model_type(const mxl_model_config *cfg, const char *where,
                                       mxl_detection *out, mxl_error *err) {
    const char *key = cfg->model_type;
    const mxl_family *all[MAX_CANDIDATES], *c[MAX_CANDIDATES];
    size_t n_all = mxl_registry_find_all_model_type(key, all, MAX_CANDIDATES);
    if (n_all > MAX_CANDIDATES) n_all = MAX_CANDIDATES;
    size_t n = 0;
    for (size_t i = 0; i < n_all; i++)
        if (generation_side(all[i])) c[n++] = all[i];
    if (n == 0) return MXL_ERR_NOT_FOUND;
    if (n == 1) {
        set_vision(out, c[0], cfg);
        return finish(out, c[0], "model_type '%s' -> %s%s", key, c[0]->id, vision_words(c[0], cfg));
    }
    /* Shared key: keep the families whose tie-breaker holds, preferring a specific rule over ANY. */
    const mxl_family *pick = NULL;
    int n_specific = 0, n_any = 0;
    const mxl_family *specific = NULL, *any = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!select_holds(c[i], cfg)) continue;
        if (c[i]->select == MXL_SELECT_ANY) {
            n_any++;
            any = c[i];
        } else {
            n_specific++;
            specific = c[i];
        }
    }
    if (n_specific == 1) pick = specific;
    else if (n_specific == 0 && n_any == 1) pick = any;
    if (!pick)
        return mxl_error_set(err, MXL_ERR_INTERNAL, "%smodel_type '%s' matches %zu families and no rule tells them apart", where, key, n);
    set_vision(out, pick, cfg);
    const char *rule = select_words(pick, cfg);
    if (!rule) { /* the unconditional family: the others' rules did not hold */
        bool lost_to_text = false;
        for (size_t i = 0; i < n; i++) lost_to_text |= c[i]->select == MXL_SELECT_VISION;
        const char *why = !lost_to_text ? vision_words(pick, cfg)
                          : cfg->has_vision_config ? " (language_model_only: text form)"
                                                   : " (no vision_config: text form)";
        return finish(out, pick, "model_type '%s' -> %s%s", key, pick->id, why);
    }
    return finish(out, pick, "model_type '%s' with %s -> %s%s", key, rule, pick->id,
                  pick->select == MXL_SELECT_VISION ? " (VLM form)" : vision_words(pick, cfg));
}

mxl_status mxl_model_detect(const mxl_model_config *cfg, const char *dir, mxl_detection *out,
                            mxl_error *err) {
    memset(out, 0, sizeof *out);
    /* Messages name the config file when there is one. */
    char where[4200] = "";
    if (dir) snprintf(where, sizeof where, "%s/config.json: ", dir);

    mxl_status s = mxl_st_layout_read(dir, &out->st, err);
    if (s) return s;
    const char *key = cfg->model_type;

    /* 1. Classifier heads: reranking before any embedding rule. */
    for (int i = 0; i < cfg->n_architectures; i++) {
        const mxl_family *f = mxl_registry_find_architecture(cfg->architectures[i]);
        if (!f) continue;
        if (f->task == MXL_TASK_RERANK) {
            if (cfg->num_labels != 1)
                return mxl_error_set(err, MXL_ERR_UNSUPPORTED,
                                     "%s%s with num_labels=%lld is not a reranker; only one-label sequence classifiers are supported",
                                     where, cfg->architectures[i], (long long)cfg->num_labels);
            return finish(out, f, "one-label %s head -> reranker %s", cfg->architectures[i], f->id);
        }
        if (f->task == MXL_TASK_TAG)
            return finish(out, f, "%s head -> token classifier %s", cfg->architectures[i], f->id);
    }

    /* 2a. Known embedding architecture names. */
    for (int i = 0; i < cfg->n_architectures; i++) {
        const mxl_family *f = mxl_registry_find_architecture(cfg->architectures[i]);
        if (f && f->task == MXL_TASK_EMBED) {
            set_vision(out, f, cfg);
            return finish(out, f, "embedding architecture %s -> %s", cfg->architectures[i], f->id);
        }
    }
    const mxl_family *emb = *key ? embed_family_for(key) : NULL;
    if (emb) {
        /* 2b. Keys only the embedding side claims (encoder-only bert, xlm-roberta, ...). */
        const mxl_family *all[MAX_CANDIDATES];
        size_t n = mxl_registry_find_all_model_type(key, all, MAX_CANDIDATES);
        bool generation_claims = false;
        for (size_t i = 0; i < n && i < MAX_CANDIDATES; i++)
            if (generation_side(all[i])) generation_claims = true;
        if (!generation_claims) {
            set_vision(out, emb, cfg);
            return finish(out, emb, "model_type '%s' is an embedding-only key -> %s", key, emb->id);
        }
        /* 2c. A non-causal config of a generation key (EmbeddingGemma, Nemotron-3-Embed). */
        if (raw_flag(cfg, "use_bidirectional_attention", true) || raw_flag(cfg, "is_causal", false)) {
            set_vision(out, emb, cfg);
            return finish(out, emb, "non-causal '%s' config (bidirectional attention) -> %s", key, emb->id);
        }
    }
    /* 2d. sentence-transformers layout. */
    if (out->st.has_pooling) {
        if (!emb)
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED,
                                 "%ssentence-transformers embedding checkpoint (%s) with model_type '%s', which no supported embedding family uses; run 'mlxcel arch' to list them",
                                 where, out->st.pooling_path, key);
        set_vision(out, emb, cfg);
        return finish(out, emb, "sentence-transformers Pooling module (%s, %s pooling) -> %s", out->st.pooling_path,
                      mxl_pooling_name(out->st.pooling), emb->id);
    }

    /* 3. Architecture classes that decide a non-embedding family by themselves. */
    for (int i = 0; i < cfg->n_architectures; i++) {
        const mxl_family *f = mxl_registry_find_architecture(cfg->architectures[i]);
        if (f && generation_side(f)) {
            set_vision(out, f, cfg);
            return finish(out, f, "architecture %s -> %s%s", cfg->architectures[i], f->id, vision_words(f, cfg));
        }
    }

    /* 4. Generation families by model_type. */
    if (*key) {
        s = detect_by_model_type(cfg, where, out, err);
        if (s != MXL_ERR_NOT_FOUND) return s;
    }

    /* 5. Kokoro declares no model_type. */
    if (!*key) {
        json_t *ist = cfg->raw ? json_object_get(cfg->raw, "istftnet") : NULL;
        char path[4096];
        bool weights = false;
        if (dir && join_path(path, sizeof path, dir, "kokoro-v1_0.safetensors", NULL, NULL) == MXL_OK)
            weights = is_file(path);
        if ((ist && json_is_object(ist)) || weights) {
            const mxl_family *f = mxl_registry_find_id("kokoro");
            MXL_ASSERT(f);
            return finish(out, f, "%s -> kokoro", weights ? "kokoro-v1_0.safetensors" : "istftnet config");
        }
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED,
                             "%sno model_type and no known layout; run 'mlxcel arch' to list supported architectures", where);
    }
    return mxl_error_set(err, MXL_ERR_UNSUPPORTED,
                         "%smodel_type '%s' is not a supported architecture; run 'mlxcel arch' to list supported ones",
                         where, key);
}
