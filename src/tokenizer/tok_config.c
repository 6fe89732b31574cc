/* tok_config.c - loading by path (model directory, tokenizer.json, .gguf) and the side files of a
 * Hugging Face checkpoint: tokenizer_config.json (add_bos_token, add_eos_token, bos/eos/pad/unk
 * tokens as strings or {"content": ...} objects, chat_template as a string or a list of
 * {"name", "template"} where "default" wins) and generation_config.json (eos_token_id, an int or
 * a list). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "io/json_read.h"
#include "tokenizer/tok_internal.h"

static int32_t token_field(const mxl_tokenizer *t, json_t *v) {
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) return -1;
    return mxl_tokenizer_token_id(t, json_string_value(v), json_string_length(v));
}

static bool push_eos(mxl_tokenizer *t, int32_t id) {
    if (id < 0) return true;
    for (size_t i = 0; i < t->n_eos_ids; i++)
        if (t->eos_ids[i] == id) return true;
    int32_t *v = mxl_realloc(t->eos_ids, (t->n_eos_ids + 1) * sizeof(int32_t));
    if (!v) return false;
    t->eos_ids = v;
    t->eos_ids[t->n_eos_ids++] = id;
    return true;
}

/* An id is a non-negative integral number below 2^30. */
static bool id_value(json_t *v, int32_t *out) {
    int64_t x;
    if (mxl_json_int(v, 0, (1 << 30) - 1, &x)) return false;
    *out = (int32_t)x;
    return true;
}

static bool file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

mxl_status mxl_tokenizer_load_configs(mxl_tokenizer *t, const char *dir, mxl_error *err) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    if (file_exists(path)) {
        json_t *root;
        mxl_status st = mxl_json_load_file_py(path, MXL_JSON_SIDE_FILE_MAX, &root, err);
        if (st != MXL_OK) return st;
        if (!json_is_object(root)) {
            json_decref(root);
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the top level must be a JSON object", path);
        }
        json_t *v;
        if (json_is_boolean(v = json_object_get(root, "add_bos_token"))) t->add_bos = json_is_true(v);
        if (json_is_boolean(v = json_object_get(root, "add_eos_token"))) t->add_eos = json_is_true(v);
        int32_t id;
        if ((id = token_field(t, json_object_get(root, "bos_token"))) >= 0) t->bos_id = id;
        if ((id = token_field(t, json_object_get(root, "eos_token"))) >= 0) t->eos_id = id;
        if ((id = token_field(t, json_object_get(root, "pad_token"))) >= 0) t->pad_id = id;
        if ((id = token_field(t, json_object_get(root, "unk_token"))) >= 0) t->unk_id = id;
        v = json_object_get(root, "chat_template");
        const char *tpl = NULL;
        if (json_is_string(v)) {
            tpl = json_string_value(v);
        } else if (json_is_array(v)) {
            for (size_t i = 0; i < json_array_size(v); i++) {
                json_t *it = json_array_get(v, i);
                json_t *nm = json_object_get(it, "name"), *tp = json_object_get(it, "template");
                if (!json_is_string(tp)) continue;
                if (!tpl || (json_is_string(nm) && strcmp(json_string_value(nm), "default") == 0))
                    tpl = json_string_value(tp);
            }
        }
        if (tpl) {
            mxl_free(t->chat_template);
            t->chat_template = mxl_strdup(tpl);
        }
        json_decref(root);
        if (tpl && !t->chat_template) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
    }
    if (!push_eos(t, t->eos_id)) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", dir);
    snprintf(path, sizeof(path), "%s/generation_config.json", dir);
    if (file_exists(path)) {
        json_t *root;
        mxl_status st = mxl_json_load_file_py(path, MXL_JSON_SIDE_FILE_MAX, &root, err);
        if (st != MXL_OK) return st;
        if (!json_is_object(root)) {
            json_decref(root);
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the top level must be a JSON object", path);
        }
        json_t *v = json_object_get(root, "eos_token_id");
        bool ok = true;
        int32_t id;
        if (id_value(v, &id)) {
            ok = push_eos(t, id);
        } else if (json_is_array(v)) {
            for (size_t i = 0; i < json_array_size(v) && ok; i++)
                if (id_value(json_array_get(v, i), &id)) ok = push_eos(t, id);
        }
        json_decref(root);
        if (!ok) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
    }
    return MXL_OK;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

mxl_status mxl_tokenizer_load(const char *path, mxl_tokenizer **out, mxl_error *err) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: no such file or directory", path);
    if (S_ISDIR(st.st_mode)) {
        char p[4096];
        snprintf(p, sizeof(p), "%s/tokenizer.json", path);
        char spm[4096];
        snprintf(spm, sizeof spm, "%s/spiece.model", path);
        const bool sp = !file_exists(p) && file_exists(spm); /* (SigLIP's: a SentencePiece model alone) */
        if (!file_exists(p) && !sp) {
            snprintf(spm, sizeof spm, "%s/tokenizer.model", path);
            return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: no tokenizer.json in this directory%s", path,
                                 file_exists(spm) ? " (its tokenizer.model alone is not read: a tokenizer.json is needed)" : "");
        }
        mxl_status s = sp ? mxl_tokenizer_load_spiece(path, spm, out, err) : mxl_tokenizer_load_json_file(p, out, err);
        if (s != MXL_OK) return s;
        s = mxl_tokenizer_load_configs(*out, path, err);
        if (s != MXL_OK) {
            mxl_tokenizer_destroy(*out);
            *out = NULL;
        }
        return s;
    }
    if (ends_with(path, ".gguf")) return mxl_tokenizer_load_gguf_file(path, out, err);
    mxl_status s = mxl_tokenizer_load_json_file(path, out, err);
    if (s != MXL_OK) return s;
    /* a tokenizer.json next to its configs */
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof(dir), ".");
    s = mxl_tokenizer_load_configs(*out, dir, err);
    if (s != MXL_OK) {
        mxl_tokenizer_destroy(*out);
        *out = NULL;
    }
    return s;
}
