/* tpl_discover.c - finds a checkpoint's chat template: chat_template.jinja, chat_template.json,
 * tokenizer_config.json ("chat_template" as a string or a named list such as default/tool_use),
 * GGUF metadata (tokenizer.chat_template, tokenizer.chat_template.<name>), or an explicit file.
 * Without any, returns the generic ChatML-style template and says so (generic = true). */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "io/gguf.h"
#include "io/json_read.h"
#include "template/template.h"

#define MAX_TEMPLATE_FILE (16u << 20)

static const char GENERIC[] =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- elif message['content'] is iterable -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part is mapping and part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

const char *mxl_chat_template_generic(void) { return GENERIC; }

void mxl_chat_template_source_free(mxl_chat_template_source *s) {
    if (!s) return;
    mxl_free(s->text);
    mxl_free(s->origin);
    s->text = s->origin = NULL;
}

static mxl_status read_text(const char *path, char **out, mxl_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return mxl_error_set(err, MXL_ERR_IO, "%s: cannot open", path);
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return mxl_error_set(err, MXL_ERR_IO, "%s: cannot seek", path);
    }
    long n = ftell(f);
    if (n < 0 || (unsigned long)n > MAX_TEMPLATE_FILE) {
        fclose(f);
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: template file too large (limit %u bytes)", path,
                             MAX_TEMPLATE_FILE);
    }
    rewind(f);
    char *buf = mxl_malloc((size_t)n + 1);
    if (!buf) {
        fclose(f);
        return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        mxl_free(buf);
        fclose(f);
        return mxl_error_set(err, MXL_ERR_IO, "%s: read failed", path);
    }
    fclose(f);
    buf[n] = 0;
    *out = buf;
    return MXL_OK;
}

static mxl_status set_out(mxl_chat_template_source *out, const char *text, size_t n, const char *origin,
                          mxl_error *err) {
    out->text = mxl_malloc(n + 1);
    out->origin = mxl_strdup(origin);
    if (!out->text || !out->origin) {
        mxl_chat_template_source_free(out);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    memcpy(out->text, text, n);
    out->text[n] = 0;
    out->generic = false;
    return MXL_OK;
}

/* "chat_template" of a tokenizer_config.json / chat_template.json object: a string, or a list of
 * {"name", "template"} picked by variant. */
static mxl_status from_json_value(const json_t *ct, const char *variant, const char *path,
                                  mxl_chat_template_source *out, mxl_error *err) {
    char origin[1200];
    if (json_is_string(ct)) {
        snprintf(origin, sizeof origin, "%s", path);
        return set_out(out, json_string_value(ct), json_string_length(ct), origin, err);
    }
    if (!json_is_array(ct))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: \"chat_template\" is neither a string nor a list", path);
    const char *want = variant ? variant : "default";
    const json_t *pick = NULL;
    char names[256] = "";
    size_t i;
    json_t *e;
    json_array_foreach(ct, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        const json_t *tpl = json_object_get(e, "template");
        if (!name || !json_is_string(tpl))
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: chat_template[%zu] needs \"name\" and \"template\" strings", path, i);
        size_t L = strlen(names);
        snprintf(names + L, sizeof names - L, "%s%s", L ? ", " : "", name);
        if (!strcmp(name, want)) pick = tpl;
    }
    if (!pick && !variant && json_array_size(ct) == 1) pick = json_object_get(json_array_get(ct, 0), "template");
    if (!pick)
        return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: no chat template named '%s' (have: %s)", path, want, names);
    snprintf(origin, sizeof origin, "%s (template '%s')", path, want);
    return set_out(out, json_string_value(pick), json_string_length(pick), origin, err);
}

static mxl_status from_json_file(const char *path, const char *variant, bool *found,
                                 mxl_chat_template_source *out, mxl_error *err) {
    json_t *root;
    mxl_status rs = mxl_json_load_file_py(path, MXL_JSON_SIDE_FILE_MAX, &root, err);
    if (rs != MXL_OK) return rs;
    const json_t *ct = json_object_get(root, "chat_template");
    mxl_status st = MXL_OK;
    *found = ct && !json_is_null(ct);
    if (*found) st = from_json_value(ct, variant, path, out, err);
    json_decref(root);
    return st;
}

static mxl_status from_gguf(const char *path, const char *variant, bool *found, mxl_chat_template_source *out,
                            mxl_error *err) {
    mxl_gguf *g = NULL;
    mxl_status st = mxl_gguf_open(path, &g, err);
    if (st != MXL_OK) return st;
    char key[256];
    if (variant && strcmp(variant, "default") != 0)
        snprintf(key, sizeof key, "tokenizer.chat_template.%s", variant);
    else
        snprintf(key, sizeof key, "tokenizer.chat_template");
    const mxl_gguf_kv *kv = mxl_gguf_find(g, key);
    *found = false;
    if (kv) {
        if (kv->value.type != MXL_GGUF_TYPE_STRING) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s is not a string", path, key);
        } else {
            char origin[1400];
            snprintf(origin, sizeof origin, "%s (GGUF %s)", path, key);
            const mxl_gguf_str *s = &kv->value.v.str;
            if (s->len > MAX_TEMPLATE_FILE) st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s too large", path, key);
            else if (memchr(s->data, 0, s->len)) st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s contains a NUL byte", path, key);
            else {
                st = set_out(out, s->data, s->len, origin, err);
                *found = st == MXL_OK;
            }
        }
    } else if (variant && strcmp(variant, "default") != 0) {
        st = mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: no %s in the GGUF metadata", path, key);
    }
    mxl_gguf_close(g);
    return st;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static bool is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

mxl_status mxl_chat_template_find(const char *path, const char *variant, mxl_chat_template_source *out,
                                  mxl_error *err) {
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (!path || stat(path, &sb) != 0) return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: no such file or directory", path ? path : "(null)");
    bool found = false;
    mxl_status st;
    if (S_ISREG(sb.st_mode)) {
        if (ends_with(path, ".gguf")) {
            st = from_gguf(path, variant, &found, out, err);
            if (st != MXL_OK || found) return st;
        } else if (ends_with(path, ".json")) {
            st = from_json_file(path, variant, &found, out, err);
            if (st != MXL_OK) return st;
            if (!found) return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: no \"chat_template\" key", path);
            return MXL_OK;
        } else {
            char *text = NULL;
            st = read_text(path, &text, err);
            if (st != MXL_OK) return st;
            st = set_out(out, text, strlen(text), path, err);
            mxl_free(text);
            return st;
        }
    } else if (S_ISDIR(sb.st_mode)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/chat_template.jinja", path);
        if (is_file(p) && (!variant || !strcmp(variant, "default"))) {
            char *text = NULL;
            st = read_text(p, &text, err);
            if (st != MXL_OK) return st;
            st = set_out(out, text, strlen(text), p, err);
            mxl_free(text);
            return st;
        }
        snprintf(p, sizeof p, "%s/chat_template.json", path);
        if (is_file(p)) {
            st = from_json_file(p, variant, &found, out, err);
            if (st != MXL_OK || found) return st;
        }
        snprintf(p, sizeof p, "%s/tokenizer_config.json", path);
        if (is_file(p)) {
            st = from_json_file(p, variant, &found, out, err);
            if (st != MXL_OK || found) return st;
        }
        DIR *d = opendir(path);
        if (d) {
            struct dirent *de;
            char best[4096] = "";
            while ((de = readdir(d))) {
                if (!ends_with(de->d_name, ".gguf")) continue;
                char cand[4096];
                snprintf(cand, sizeof cand, "%s/%s", path, de->d_name);
                if (!best[0] || strcmp(cand, best) < 0) snprintf(best, sizeof best, "%s", cand);
            }
            closedir(d);
            if (best[0]) {
                st = from_gguf(best, variant, &found, out, err);
                if (st != MXL_OK || found) return st;
            }
        }
    } else {
        return mxl_error_set(err, MXL_ERR_ARG, "%s: not a file or directory", path);
    }
    if (variant && strcmp(variant, "default") != 0)
        return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: no chat template named '%s'", path, variant);
    st = set_out(out, GENERIC, strlen(GENERIC), "generic chat format (the checkpoint has no chat template)", err);
    out->generic = st == MXL_OK;
    return st;
}
