/* tpl_json.c - JSON in and out of template values.
 *
 * mxl_tpl_tjson_dump writes exactly what Python's json.dumps(x, ensure_ascii=False, indent=...,
 * separators=..., sort_keys=...) writes (the `tojson` filter transformers installs): non-ASCII
 * passes through, control characters become \uXXXX, floats use Python's repr, NaN/Infinity as
 * Python spells them, non-string keys are converted as Python converts them.
 * mxl_tpl_tjson_to_value converts jansson values (request messages, tools, kwargs) into template values. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tpl_internal.h"

#define MAX_JSON_DEPTH 200

typedef struct dump_opts {
    const char *indent; /* NULL: no newlines */
    size_t indent_len;
    const char *item_sep, *key_sep;
    bool sort_keys;
    bool ensure_ascii;
} dump_opts;

static bool dump_string(tctx *c, tbuf *b, const char *s, size_t n, bool ascii) {
    if (!mxl_tpl_tbuf_putc(c, b, '"')) return false;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char ubuf[8];
        switch (ch) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (ch < 0x20) {
                snprintf(ubuf, sizeof ubuf, "\\u%04x", ch);
                esc = ubuf;
            }
        }
        if (!esc && ascii && ch >= 0x80) {
            /* \\uXXXX, with a surrogate pair above the BMP */
            if (!mxl_tpl_tbuf_put(c, b, s + run, i - run)) return false;
            size_t p = i;
            int32_t cp = mxl_tpl_tutf8_next(s, n, &p);
            char u2[16];
            if (cp >= 0x10000) {
                int32_t v = cp - 0x10000;
                snprintf(u2, sizeof u2, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                snprintf(u2, sizeof u2, "\\u%04x", cp);
            }
            if (!mxl_tpl_tbuf_put(c, b, u2, strlen(u2))) return false;
            i = p - 1;
            run = p;
            continue;
        }
        if (esc) {
            if (!mxl_tpl_tbuf_put(c, b, s + run, i - run) || !mxl_tpl_tbuf_put(c, b, esc, strlen(esc))) return false;
            run = i + 1;
        }
    }
    if (!mxl_tpl_tbuf_put(c, b, s + run, n - run)) return false;
    return mxl_tpl_tbuf_putc(c, b, '"');
}


static bool newline_indent(tctx *c, tbuf *b, const dump_opts *o, int level) {
    if (!mxl_tpl_tbuf_putc(c, b, '\n')) return false;
    for (int i = 0; i < level; i++)
        if (!mxl_tpl_tbuf_put(c, b, o->indent, o->indent_len)) return false;
    return true;
}

static bool dump_scalar_key(tctx *c, tv k, tv *out) {
    char num[64];
    switch (k.t) {
    case TV_STR: *out = k; return true;
    case TV_BOOL: *out = mxl_tpl_tv_cstr(k.u.b ? "true" : "false"); return true;
    case TV_NONE: *out = mxl_tpl_tv_cstr("null"); return true;
    case TV_INT: {
        snprintf(num, sizeof num, "%lld", (long long)k.u.i);
        bool ok;
        *out = mxl_tpl_tv_str_copy(c, num, strlen(num), &ok);
        return ok;
    }
    case TV_FLOAT: {
        if (isnan(k.u.f)) snprintf(num, sizeof num, "NaN");
        else if (isinf(k.u.f)) snprintf(num, sizeof num, k.u.f < 0 ? "-Infinity" : "Infinity");
        else mxl_tpl_tfmt_float_repr(k.u.f, num, sizeof num);
        bool ok;
        *out = mxl_tpl_tv_str_copy(c, num, strlen(num), &ok);
        return ok;
    }
    default:
        return mxl_tpl_terr(c, TE_TYPE, "keys must be str, int, float, bool or None, not %s", mxl_tpl_tv_type_name(k)) == 0;
    }
}

static int cmp_keys(const void *a, const void *b) {
    const tv *x = *(const tv *const *)a, *y = *(const tv *const *)b;
    size_t m = x->n < y->n ? x->n : y->n;
    int r = m ? memcmp(x->u.s, y->u.s, m) : 0;
    if (r) return r;
    return x->n < y->n ? -1 : x->n > y->n ? 1 : 0;
}

static bool dump(tctx *c, tbuf *b, tv v, const dump_opts *o, int level) {
    if (level > MAX_JSON_DEPTH) return mxl_tpl_terr(c, TE_VALUE, "Circular reference detected (or value nested too deeply)") == 0;
    if (!mxl_tpl_tfuel(c, 1)) return false;
    char num[64];
    switch (v.t) {
    case TV_NONE: return mxl_tpl_tbuf_put(c, b, "null", 4);
    case TV_BOOL: return v.u.b ? mxl_tpl_tbuf_put(c, b, "true", 4) : mxl_tpl_tbuf_put(c, b, "false", 5);
    case TV_INT:
        snprintf(num, sizeof num, "%lld", (long long)v.u.i);
        return mxl_tpl_tbuf_put(c, b, num, strlen(num));
    case TV_FLOAT:
        if (isnan(v.u.f)) snprintf(num, sizeof num, "NaN");
        else if (isinf(v.u.f)) snprintf(num, sizeof num, v.u.f < 0 ? "-Infinity" : "Infinity");
        else mxl_tpl_tfmt_float_repr(v.u.f, num, sizeof num);
        return mxl_tpl_tbuf_put(c, b, num, strlen(num));
    case TV_STR: return dump_string(c, b, v.u.s, v.n, o->ensure_ascii);
    case TV_LIST: {
        tlist *l = v.u.l;
        if (l->n == 0) return mxl_tpl_tbuf_put(c, b, "[]", 2);
        if (!mxl_tpl_tbuf_putc(c, b, '[')) return false;
        if (o->indent && !newline_indent(c, b, o, level + 1)) return false;
        for (size_t i = 0; i < l->n; i++) {
            if (i) {
                if (!mxl_tpl_tbuf_put(c, b, o->item_sep, strlen(o->item_sep))) return false;
                if (o->indent && !newline_indent(c, b, o, level + 1)) return false;
            }
            if (!dump(c, b, l->items[i], o, level + 1)) return false;
        }
        if (o->indent && !newline_indent(c, b, o, level)) return false;
        return mxl_tpl_tbuf_putc(c, b, ']');
    }
    case TV_DICT: {
        tdict *d = v.u.d;
        if (d->ns) break;
        if (d->n == 0) return mxl_tpl_tbuf_put(c, b, "{}", 2);
        /* keys as strings, in insertion or sorted order */
        tv *ks = mxl_tpl_talloc(c, d->n * sizeof(tv));
        const tv **order = mxl_tpl_talloc(c, d->n * sizeof(tv *));
        if (!ks || !order) return false;
        for (size_t i = 0; i < d->n; i++) {
            if (!dump_scalar_key(c, d->keys[i], &ks[i])) return false;
            order[i] = &ks[i];
        }
        if (o->sort_keys) {
            for (size_t i = 0; i < d->n; i++)
                if (d->keys[i].t != TV_STR && d->n > 1)
                    return mxl_tpl_terr(c, TE_TYPE, "'<' not supported between instances of '%s' and 'str'",
                                mxl_tpl_tv_type_name(d->keys[i])) == 0;
            qsort(order, d->n, sizeof *order, cmp_keys);
        }
        if (!mxl_tpl_tbuf_putc(c, b, '{')) return false;
        if (o->indent && !newline_indent(c, b, o, level + 1)) return false;
        for (size_t j = 0; j < d->n; j++) {
            size_t i = (size_t)(order[j] - ks);
            if (j) {
                if (!mxl_tpl_tbuf_put(c, b, o->item_sep, strlen(o->item_sep))) return false;
                if (o->indent && !newline_indent(c, b, o, level + 1)) return false;
            }
            if (!dump_string(c, b, ks[i].u.s, ks[i].n, o->ensure_ascii) || !mxl_tpl_tbuf_put(c, b, o->key_sep, strlen(o->key_sep)) ||
                !dump(c, b, d->vals[i], o, level + 1))
                return false;
        }
        if (o->indent && !newline_indent(c, b, o, level)) return false;
        return mxl_tpl_tbuf_putc(c, b, '}');
    }
    default: break;
    }
    return mxl_tpl_terr(c, TE_TYPE, "Object of type %s is not JSON serializable", mxl_tpl_tv_type_name(v)) == 0;
}

bool mxl_tpl_tjson_dump(tctx *c, tbuf *b, tv v, const char *indent, size_t indent_len, const char *item_sep,
                const char *key_sep, bool sort_keys, bool ensure_ascii) {
    dump_opts o = {0};
    o.indent = indent;
    o.indent_len = indent_len;
    o.item_sep = item_sep ? item_sep : (indent ? "," : ", ");
    o.key_sep = key_sep ? key_sep : ": ";
    o.sort_keys = sort_keys;
    o.ensure_ascii = ensure_ascii;
    return dump(c, b, v, &o, 0);
}

bool mxl_tpl_tjson_to_value(tctx *c, const json_t *j, tv *out, int depth) {
    if (depth > MAX_JSON_DEPTH) return mxl_tpl_terr(c, TE_VALUE, "JSON input nested too deeply") == 0;
    if (!j) {
        *out = tv_none();
        return true;
    }
    switch (json_typeof(j)) {
    case JSON_NULL: *out = tv_none(); return true;
    case JSON_TRUE: *out = tv_bool(true); return true;
    case JSON_FALSE: *out = tv_bool(false); return true;
    case JSON_INTEGER: *out = tv_int((int64_t)json_integer_value(j)); return true;
    case JSON_REAL: *out = tv_float(json_real_value(j)); return true;
    case JSON_STRING: {
        bool ok;
        *out = mxl_tpl_tv_str_copy(c, json_string_value(j), json_string_length(j), &ok);
        return ok;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        tlist *l = mxl_tpl_tlist_new(c, n);
        if (!l) return false;
        for (size_t i = 0; i < n; i++)
            if (!mxl_tpl_tjson_to_value(c, json_array_get(j, i), &l->items[l->n++], depth + 1)) return false;
        *out = mxl_tpl_tv_list(l);
        return true;
    }
    case JSON_OBJECT: {
        tdict *d = mxl_tpl_tdict_new(c, json_object_size(j));
        if (!d) return false;
        const char *k;
        json_t *v;
        /* jansson keeps insertion order (JSON_PRESERVE_ORDER is the default since 2.8) */
        json_object_foreach((json_t *)j, k, v) {
            tv key, val;
            bool ok;
            key = mxl_tpl_tv_str_copy(c, k, strlen(k), &ok);
            if (!ok || !mxl_tpl_tjson_to_value(c, v, &val, depth + 1)) return false;
            d->keys[d->n] = key;
            d->vals[d->n] = val;
            d->n++;
        }
        *out = mxl_tpl_tv_dict(d);
        return true;
    }
    }
    *out = tv_none();
    return true;
}
