/* constraint.c - request and server-wide output constraints (constraint.h). */
#include "server/constraint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "server/limits.h"
#include "server/server_state.h"

/* Compiles GBNF to check it; false with msg set. */
static bool grammar_ok(const char *text, const char *what, char *msg, size_t ml) {
    mxl_grammar *g = NULL;
    mxl_error err = {0};
    if (mxl_grammar_parse(text, strlen(text), &g, &err)) {
        snprintf(msg, ml, "%s: %s", what, err.msg);
        return false;
    }
    mxl_grammar_destroy(g);
    return true;
}

/* schema (object or boolean `true`) -> GBNF, checked; the schema's text and the grammar made
 * from it at most max bytes. */
static bool schema_grammar(const json_t *schema, const char *what, size_t max, char **out, char *msg, size_t ml) {
    *out = NULL;
    if (!json_is_object(schema) && !json_is_true(schema)) {
        snprintf(msg, ml, "%s must be a JSON Schema object", what);
        return false;
    }
    size_t n = json_dumpb(schema, NULL, 0, JSON_COMPACT);
    if (n > max) {
        snprintf(msg, ml, "%s is %zu bytes of JSON; at most %zu are accepted (--max-grammar-bytes raises the limit)", what, n, max);
        return false;
    }
    mxl_error err = {0};
    if (mxl_json_schema_to_grammar(schema, out, &err)) {
        snprintf(msg, ml, "%s: %s", what, err.msg);
        return false;
    }
    if ((n = strlen(*out)) > max) {
        snprintf(msg, ml, "the grammar made from %s is %zu bytes; at most %zu are accepted (--max-grammar-bytes raises the limit)", what, n,
                 max);
        mxl_free(*out);
        *out = NULL;
        return false;
    }
    if (!grammar_ok(*out, what, msg, ml)) {
        mxl_free(*out);
        *out = NULL;
        return false;
    }
    return true;
}

static bool present(const json_t *v) { return v && !json_is_null(v); }

bool mxl_srv_parse_constraint(const mxl_server *s, const json_t *body, bool openai, mxl_seq_params *p, char *msg, size_t ml) {
    const size_t max = s && s->cfg ? (size_t)s->cfg->max_grammar_bytes : MXL_LIMIT_GRAMMAR_BYTES;
    const json_t *grammar = json_object_get(body, "grammar"), *schema = json_object_get(body, "json_schema");
    const json_t *rf = openai ? json_object_get(body, "response_format") : NULL;
    const json_t *rf_schema = NULL;
    bool rf_json = false;
    if (present(rf)) {
        const json_t *type = json_object_get(rf, "type");
        if (!json_is_object(rf) || !json_is_string(type)) return snprintf(msg, ml, "'response_format' must be an object with a 'type'"), false;
        const char *t = json_string_value(type);
        if (!strcmp(t, "json_object")) {
            rf_json = true;
            rf_schema = json_object_get(rf, "schema");
        } else if (!strcmp(t, "json_schema")) {
            rf_json = true;
            const json_t *wrap = json_object_get(rf, "json_schema");
            if (present(wrap) && !json_is_object(wrap)) return snprintf(msg, ml, "'response_format.json_schema' must be an object"), false;
            rf_schema = json_object_get(wrap, "schema");
        } else if (strcmp(t, "text") != 0) {
            return snprintf(msg, ml, "response_format type must be one of \"text\", \"json_object\" or \"json_schema\", but got: %s", t), false;
        }
    }
    if (present(grammar) && !json_is_string(grammar)) return snprintf(msg, ml, "'grammar' must be a string"), false;
    if (present(grammar) && (present(schema) || rf_json))
        return snprintf(msg, ml, "Either \"json_schema\" or \"grammar\" can be specified, but not both"), false;
    char *text = NULL;
    if (present(schema) || rf_json) {
        /* llama-server: an explicit json_schema wins over response_format; no schema = any object */
        const json_t *sc = present(schema) ? schema : present(rf_schema) ? rf_schema : NULL;
        json_t *any = sc ? NULL : json_object();
        const char *what = present(schema) ? "'json_schema'" : "'response_format' schema";
        bool ok = schema_grammar(sc ? sc : any, what, max, &text, msg, ml);
        json_decref(any);
        if (!ok) return false;
    } else if (present(grammar)) {
        if (json_string_length(grammar) == 0) { /* an empty grammar is no constraint */
            p->sampling.grammar = NULL;
            return true;
        }
        if (json_string_length(grammar) > max)
            return snprintf(msg, ml, "'grammar' is %zu bytes; at most %zu are accepted (--max-grammar-bytes raises the limit)",
                            json_string_length(grammar), max), false;
        if (!grammar_ok(json_string_value(grammar), "'grammar'", msg, ml)) return false;
        if (!(text = mxl_strdup(json_string_value(grammar)))) return snprintf(msg, ml, "out of memory"), false;
    } else {
        return true; /* none: the server default stays */
    }
    p->sampling.grammar = text;
    return true;
}

char *mxl_srv_constraint_owned(const mxl_seq_params *p, const char *server_default) {
    return p->sampling.grammar && p->sampling.grammar != server_default ? (char *)p->sampling.grammar : NULL;
}


static char *read_file(const char *path, const char *flag, mxl_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        mxl_error_set(err, MXL_ERR_IO, "%s: cannot open '%s': %s", flag, path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = mxl_malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            if (cap > (64u << 20)) {
                mxl_free(buf);
                fclose(f);
                mxl_error_set(err, MXL_ERR_ARG, "%s: '%s' is larger than 64 MiB", flag, path);
                return NULL;
            }
            char *nb = mxl_realloc(buf, cap * 2);
            if (!nb) {
                mxl_free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - 1 - n, f);
        n += r;
        if (r == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf) {
        mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (bad) {
        mxl_free(buf);
        mxl_error_set(err, MXL_ERR_IO, "%s: cannot read '%s'", flag, path);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

mxl_status mxl_srv_constraint_from_flags(const char *grammar, const char *grammar_file, const char *json_schema,
                                         const char *json_schema_file, char **out, mxl_error *err) {
    *out = NULL;
    int given = !!grammar + !!grammar_file + !!json_schema + !!json_schema_file;
    if (given == 0) return MXL_OK;
    if (given > 1)
        return mxl_error_set(err, MXL_ERR_ARG, "--grammar, --grammar-file, --json-schema and --json-schema-file are mutually exclusive");
    const char *flag = grammar ? "--grammar" : grammar_file ? "--grammar-file" : json_schema ? "--json-schema" : "--json-schema-file";
    char *text = NULL;
    if (grammar && !(text = mxl_strdup(grammar))) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    if (grammar_file && !(text = read_file(grammar_file, flag, err))) return err ? err->status : MXL_ERR_IO;
    if (json_schema || json_schema_file) {
        char *src = json_schema ? mxl_strdup(json_schema) : read_file(json_schema_file, flag, err);
        if (!src) return json_schema ? mxl_error_set(err, MXL_ERR_NOMEM, "out of memory") : (err ? err->status : MXL_ERR_IO);
        mxl_status st = mxl_json_schema_text_to_grammar(src, strlen(src), &text, err);
        mxl_free(src);
        if (st) {
            mxl_error_prefix(err, "%s: ", flag);
            return st;
        }
    }
    if (!*text) { /* empty: no constraint */
        mxl_free(text);
        return MXL_OK;
    }
    mxl_grammar *g = NULL;
    mxl_status st = mxl_grammar_parse(text, strlen(text), &g, err);
    mxl_grammar_destroy(g);
    if (st) {
        mxl_error_prefix(err, "%s: ", flag);
        mxl_free(text);
        return st;
    }
    *out = text;
    return MXL_OK;
}
