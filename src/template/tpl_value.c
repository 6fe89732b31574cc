/* tpl_value.c - template values with Python semantics: construction (arena), truthiness,
 * equality and ordering, str()/repr() (Python's float repr, quote choice for strings), output
 * buffers, UTF-8 helpers, and the render context's error / budget bookkeeping. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "template/tpl_internal.h"

/* ---------------------------------------------------------------- context bookkeeping */

int mxl_tpl_terr(tctx *c, terr_kind k, const char *fmt, ...) {
    if (c->ekind != TE_NONE) return -1;
    c->ekind = k;
    c->eline = c->line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->emsg, sizeof c->emsg, fmt, ap);
    va_end(ap);
    return -1;
}

const char *mxl_tpl_terr_kind_name(terr_kind k) {
    switch (k) {
    case TE_TEMPLATE: return "TemplateError";
    case TE_UNDEFINED: return "UndefinedError";
    case TE_TYPE: return "TypeError";
    case TE_VALUE: return "ValueError";
    case TE_SECURITY: return "SecurityError";
    case TE_BUDGET: return "BudgetExceeded";
    case TE_SYNTAX: return "TemplateSyntaxError";
    case TE_NOMEM: return "MemoryError";
    case TE_RUNTIME: return "TemplateRuntimeError";
    default: return "Error";
    }
}

void *mxl_tpl_talloc(tctx *c, size_t n) {
    if (c->arena->total > c->max_memory || n > c->max_memory) {
        mxl_tpl_terr(c, TE_BUDGET, "render memory budget exceeded (%zu bytes)", c->max_memory);
        return NULL;
    }
    void *p = mxl_arena_alloc(c->arena, n ? n : 1, 8);
    if (!p) mxl_tpl_terr(c, TE_NOMEM, "out of memory");
    return p;
}

bool mxl_tpl_tfuel(tctx *c, uint64_t cost) {
    if (c->fuel < cost) {
        c->fuel = 0;
        mxl_tpl_terr(c, TE_BUDGET, "render step budget exhausted (template runs too long)");
        return false;
    }
    c->fuel -= cost;
    return true;
}

/* ---------------------------------------------------------------- buffers */

bool mxl_tpl_tbuf_put(tctx *c, tbuf *b, const char *s, size_t n) {
    if (n == 0) return true;
    if (b->n + n > c->max_output) {
        mxl_tpl_terr(c, TE_BUDGET, "render output budget exceeded (%zu bytes)", c->max_output);
        return false;
    }
    if (!mxl_tpl_tfuel(c, 1 + n / 64)) return false;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = mxl_tpl_talloc(c, nc);
        if (!np) return false;
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

bool mxl_tpl_tbuf_putc(tctx *c, tbuf *b, char ch) { return mxl_tpl_tbuf_put(c, b, &ch, 1); }

tv mxl_tpl_tbuf_value(tbuf *b) { return tv_strn(b->p ? b->p : "", b->n); }

/* ---------------------------------------------------------------- constructors */

tv mxl_tpl_tv_str_copy(tctx *c, const char *s, size_t n, bool *ok) {
    if (n > c->max_output) {
        mxl_tpl_terr(c, TE_BUDGET, "string exceeds the output budget (%zu bytes)", c->max_output);
        *ok = false;
        return tv_none();
    }
    char *p = mxl_tpl_talloc(c, n + 1);
    if (!p) {
        *ok = false;
        return tv_none();
    }
    if (n) memcpy(p, s, n);
    *ok = true;
    return tv_strn(p, n);
}

tv mxl_tpl_tv_cstr(const char *s) { return tv_strn(s, strlen(s)); }

tlist *mxl_tpl_tlist_new(tctx *c, size_t cap) {
    tlist *l = mxl_tpl_talloc(c, sizeof *l);
    if (!l) return NULL;
    if (cap) {
        l->items = mxl_tpl_talloc(c, cap * sizeof(tv));
        if (!l->items) return NULL;
        l->cap = cap;
    }
    return l;
}

bool mxl_tpl_tlist_push(tctx *c, tlist *l, tv v) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4;
        tv *ni = mxl_tpl_talloc(c, nc * sizeof(tv));
        if (!ni) return false;
        if (l->n) memcpy(ni, l->items, l->n * sizeof(tv));
        l->items = ni;
        l->cap = nc;
    }
    l->items[l->n++] = v;
    return true;
}

tdict *mxl_tpl_tdict_new(tctx *c, size_t cap) {
    tdict *d = mxl_tpl_talloc(c, sizeof *d);
    if (!d) return NULL;
    if (cap) {
        d->keys = mxl_tpl_talloc(c, cap * sizeof(tv));
        d->vals = mxl_tpl_talloc(c, cap * sizeof(tv));
        if (!d->keys || !d->vals) return NULL;
        d->cap = cap;
    }
    return d;
}

tv *mxl_tpl_tdict_get(const tdict *d, tv key) {
    if (key.t == TV_STR) return mxl_tpl_tdict_get_str(d, key.u.s, key.n);
    for (size_t i = 0; i < d->n; i++)
        if (mxl_tpl_tv_equal(d->keys[i], key)) return &d->vals[i];
    return NULL;
}

tv *mxl_tpl_tdict_get_str(const tdict *d, const char *s, size_t n) {
    for (size_t i = 0; i < d->n; i++) {
        const tv *k = &d->keys[i];
        if (k->t == TV_STR && k->n == n && (n == 0 || memcmp(k->u.s, s, n) == 0)) return &d->vals[i];
    }
    return NULL;
}

bool mxl_tpl_tdict_set(tctx *c, tdict *d, tv key, tv val) {
    tv *slot = mxl_tpl_tdict_get(d, key);
    if (slot) {
        *slot = val;
        return true;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 4;
        tv *nk = mxl_tpl_talloc(c, nc * sizeof(tv));
        tv *nv = mxl_tpl_talloc(c, nc * sizeof(tv));
        if (!nk || !nv) return false;
        if (d->n) {
            memcpy(nk, d->keys, d->n * sizeof(tv));
            memcpy(nv, d->vals, d->n * sizeof(tv));
        }
        d->keys = nk;
        d->vals = nv;
        d->cap = nc;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = val;
    d->n++;
    return true;
}

tv mxl_tpl_tv_list(tlist *l) {
    tv v = {0};
    v.t = TV_LIST;
    v.u.l = l;
    return v;
}

tv mxl_tpl_tv_dict(tdict *d) {
    tv v = {0};
    v.t = TV_DICT;
    v.u.d = d;
    return v;
}

/* ---------------------------------------------------------------- semantics */

bool mxl_tpl_tv_truthy(tv v) {
    switch (v.t) {
    case TV_UNDEF:
    case TV_NONE: return false;
    case TV_BOOL: return v.u.b;
    case TV_INT: return v.u.i != 0;
    case TV_FLOAT: return v.u.f != 0.0;
    case TV_STR: return v.n != 0;
    case TV_LIST: return v.u.l->n != 0;
    case TV_DICT: return v.u.d->ns || v.u.d->n != 0;
    default: return true;
    }
}

bool mxl_tpl_tv_is_number(tv v) { return v.t == TV_INT || v.t == TV_FLOAT || v.t == TV_BOOL; }

double mxl_tpl_tv_as_double(tv v) {
    if (v.t == TV_INT) return (double)v.u.i;
    if (v.t == TV_BOOL) return v.u.b ? 1.0 : 0.0;
    if (v.t == TV_FLOAT) return v.u.f;
    return 0.0;
}

static bool equal_depth(tv a, tv b, int depth);

bool mxl_tpl_tv_equal(tv a, tv b) { return equal_depth(a, b, 0); }

/* Values built by a template can nest arbitrarily deep; past 256 levels they compare unequal
 * instead of overflowing the stack. */
static bool equal_depth(tv a, tv b, int depth) {
    if (depth > 256) return false;
    if (mxl_tpl_tv_is_number(a) && mxl_tpl_tv_is_number(b)) {
        if (a.t != TV_FLOAT && b.t != TV_FLOAT) {
            int64_t x = a.t == TV_BOOL ? a.u.b : a.u.i, y = b.t == TV_BOOL ? b.u.b : b.u.i;
            return x == y;
        }
        return mxl_tpl_tv_as_double(a) == mxl_tpl_tv_as_double(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case TV_UNDEF:
    case TV_NONE: return true;
    case TV_STR: return a.n == b.n && (a.n == 0 || memcmp(a.u.s, b.u.s, a.n) == 0);
    case TV_LIST:
        if (a.u.l->tuple != b.u.l->tuple || a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_depth(a.u.l->items[i], b.u.l->items[i], depth + 1)) return false;
        return true;
    case TV_DICT:
        if (a.u.d == b.u.d) return true;
        if (a.u.d->ns || b.u.d->ns || a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            tv *o = mxl_tpl_tdict_get(b.u.d, a.u.d->keys[i]);
            if (!o || !equal_depth(a.u.d->vals[i], *o, depth + 1)) return false;
        }
        return true;
    case TV_FUNC: return a.u.fn == b.u.fn;
    case TV_LOOP: return a.u.loop == b.u.loop;
    default: return false;
    }
}

const char *mxl_tpl_tv_type_name(tv v) {
    switch (v.t) {
    case TV_UNDEF: return "Undefined";
    case TV_NONE: return "NoneType";
    case TV_BOOL: return "bool";
    case TV_INT: return "int";
    case TV_FLOAT: return "float";
    case TV_STR: return "str";
    case TV_LIST: return v.u.l->tuple ? "tuple" : "list";
    case TV_DICT: return v.u.d->ns ? "Namespace" : "dict";
    case TV_FUNC: return v.u.fn->kind == TF_MACRO ? "Macro" : "builtin_function_or_method";
    case TV_LOOP: return "LoopContext";
    default: return "object";
    }
}

static int compare_depth(tctx *c, tv a, tv b, int depth);

int mxl_tpl_tv_compare(tctx *c, tv a, tv b) { return compare_depth(c, a, b, 0); }

static int compare_depth(tctx *c, tv a, tv b, int depth) {
    if (depth > 256) {
        mxl_tpl_terr(c, TE_BUDGET, "values nested too deeply to compare");
        return -2;
    }
    if (mxl_tpl_tv_is_number(a) && mxl_tpl_tv_is_number(b)) {
        if (a.t != TV_FLOAT && b.t != TV_FLOAT) {
            int64_t x = a.t == TV_BOOL ? a.u.b : a.u.i, y = b.t == TV_BOOL ? b.u.b : b.u.i;
            return x < y ? -1 : x > y ? 1 : 0;
        }
        double x = mxl_tpl_tv_as_double(a), y = mxl_tpl_tv_as_double(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.t == TV_STR && b.t == TV_STR) {
        size_t m = a.n < b.n ? a.n : b.n;
        int r = m ? memcmp(a.u.s, b.u.s, m) : 0;
        if (r) return r < 0 ? -1 : 1;
        return a.n < b.n ? -1 : a.n > b.n ? 1 : 0;
    }
    if (a.t == TV_LIST && b.t == TV_LIST && a.u.l->tuple == b.u.l->tuple) {
        size_t m = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < m; i++) {
            if (mxl_tpl_tv_equal(a.u.l->items[i], b.u.l->items[i])) continue;
            return compare_depth(c, a.u.l->items[i], b.u.l->items[i], depth + 1);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n ? 1 : 0;
    }
    if (a.t == TV_UNDEF || b.t == TV_UNDEF) {
        const tv *u = a.t == TV_UNDEF ? &a : &b;
        if (u->u.s) mxl_tpl_terr(c, TE_UNDEFINED, "'%.*s' is undefined", (int)u->n, u->u.s);
        else mxl_tpl_terr(c, TE_UNDEFINED, "undefined value used in a comparison");
        return -2;
    }
    mxl_tpl_terr(c, TE_TYPE, "'<' not supported between instances of '%s' and '%s'", mxl_tpl_tv_type_name(a),
         mxl_tpl_tv_type_name(b));
    return -2;
}

/* ---------------------------------------------------------------- UTF-8 */

int32_t mxl_tpl_tutf8_next(const char *s, size_t n, size_t *pos) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = *pos;
    unsigned char b0 = u[i];
    int32_t cp;
    size_t len;
    if (b0 < 0x80) {
        *pos = i + 1;
        return b0;
    } else if ((b0 & 0xE0) == 0xC0) {
        cp = b0 & 0x1F;
        len = 2;
    } else if ((b0 & 0xF0) == 0xE0) {
        cp = b0 & 0x0F;
        len = 3;
    } else if ((b0 & 0xF8) == 0xF0) {
        cp = b0 & 0x07;
        len = 4;
    } else {
        *pos = i + 1;
        return b0;
    }
    if (i + len > n) {
        *pos = i + 1;
        return b0;
    }
    for (size_t k = 1; k < len; k++) {
        if ((u[i + k] & 0xC0) != 0x80) {
            *pos = i + 1;
            return b0;
        }
        cp = (cp << 6) | (u[i + k] & 0x3F);
    }
    *pos = i + len;
    return cp;
}

size_t mxl_tpl_tutf8_len(const char *s, size_t n) {
    size_t pos = 0, count = 0;
    while (pos < n) {
        if ((unsigned char)s[pos] < 0x80) pos++;
        else mxl_tpl_tutf8_next(s, n, &pos);
        count++;
    }
    return count;
}

size_t mxl_tpl_tutf8_offset(const char *s, size_t n, size_t i) {
    size_t pos = 0;
    while (i > 0 && pos < n) {
        if ((unsigned char)s[pos] < 0x80) pos++;
        else mxl_tpl_tutf8_next(s, n, &pos);
        i--;
    }
    return pos;
}

/* ---------------------------------------------------------------- str / repr */

void mxl_tpl_tfmt_float_repr(double f, char *buf, size_t cap) {
    if (isnan(f)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0.0) {
        snprintf(buf, cap, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    char tmp[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp: [-]d[.ddd]e[+-]XX */
    bool neg = tmp[0] == '-';
    const char *p = tmp + (neg ? 1 : 0);
    char digits[24];
    int nd = 0;
    while (*p && *p != 'e') {
        if (*p != '.' && nd < 20) digits[nd++] = *p;
        p++;
    }
    int exp10 = (*p == 'e') ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int decpt = exp10 + 1;
    char out[64];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int k = 0; k < -decpt; k++) out[o++] = '0';
            for (int k = 0; k < nd; k++) out[o++] = digits[k];
        } else if (decpt >= nd) {
            for (int k = 0; k < nd; k++) out[o++] = digits[k];
            for (int k = nd; k < decpt; k++) out[o++] = '0';
            out[o++] = '.';
            out[o++] = '0';
        } else {
            for (int k = 0; k < decpt; k++) out[o++] = digits[k];
            out[o++] = '.';
            for (int k = decpt; k < nd; k++) out[o++] = digits[k];
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int k = 1; k < nd; k++) out[o++] = digits[k];
        }
        out[o] = 0;
        int e = decpt - 1;
        snprintf(out + o, sizeof out - o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    snprintf(buf, cap, "%s", out);
}

static bool repr_str(tctx *c, tbuf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    if (!mxl_tpl_tbuf_putc(c, b, q)) return false;
    size_t pos = 0;
    while (pos < n) {
        size_t start = pos;
        int32_t cp = mxl_tpl_tutf8_next(s, n, &pos);
        char esc[16];
        const char *e = NULL;
        if (cp == q || cp == '\\') {
            esc[0] = '\\';
            esc[1] = (char)cp;
            esc[2] = 0;
            e = esc;
        } else if (cp == '\n') e = "\\n";
        else if (cp == '\r') e = "\\r";
        else if (cp == '\t') e = "\\t";
        else if (cp < 0x20 || cp == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", (unsigned)cp);
            e = esc;
        } else if (cp >= 0x80) {
            utf8proc_category_t cat = utf8proc_category(cp);
            bool printable = !(cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
                               cat == UTF8PROC_CATEGORY_CS || cat == UTF8PROC_CATEGORY_CO ||
                               cat == UTF8PROC_CATEGORY_CN || cat == UTF8PROC_CATEGORY_ZL ||
                               cat == UTF8PROC_CATEGORY_ZP || cat == UTF8PROC_CATEGORY_ZS);
            if (!printable) {
                if (cp < 0x100) snprintf(esc, sizeof esc, "\\x%02x", (unsigned)cp);
                else if (cp < 0x10000) snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
                else snprintf(esc, sizeof esc, "\\U%08x", (unsigned)cp);
                e = esc;
            }
        }
        if (e) {
            if (!mxl_tpl_tbuf_put(c, b, e, strlen(e))) return false;
        } else if (!mxl_tpl_tbuf_put(c, b, s + start, pos - start)) {
            return false;
        }
    }
    return mxl_tpl_tbuf_putc(c, b, q);
}

static bool append_seq(tctx *c, tbuf *b, tv v, int depth);

static bool repr_inner(tctx *c, tbuf *b, tv v, int depth) {
    if (depth > 64) return mxl_tpl_terr(c, TE_BUDGET, "value nested too deeply to print") == 0;
    switch (v.t) {
    case TV_STR: return repr_str(c, b, v.u.s, v.n);
    case TV_UNDEF: return mxl_tpl_tbuf_put(c, b, "Undefined", 9);
    case TV_LIST:
    case TV_DICT: return append_seq(c, b, v, depth);
    default: return mxl_tpl_tv_str_append(c, b, v);
    }
}

static bool append_seq(tctx *c, tbuf *b, tv v, int depth) {
    if (!mxl_tpl_tfuel(c, 1)) return false;
    if (v.t == TV_LIST) {
        tlist *l = v.u.l;
        if (!mxl_tpl_tbuf_putc(c, b, l->tuple ? '(' : '[')) return false;
        for (size_t i = 0; i < l->n; i++) {
            if (i && !mxl_tpl_tbuf_put(c, b, ", ", 2)) return false;
            if (!repr_inner(c, b, l->items[i], depth + 1)) return false;
        }
        if (l->tuple && l->n == 1 && !mxl_tpl_tbuf_putc(c, b, ',')) return false;
        return mxl_tpl_tbuf_putc(c, b, l->tuple ? ')' : ']');
    }
    tdict *d = v.u.d;
    if (d->ns && !mxl_tpl_tbuf_put(c, b, "<Namespace ", 11)) return false;
    if (!mxl_tpl_tbuf_putc(c, b, '{')) return false;
    for (size_t i = 0; i < d->n; i++) {
        if (i && !mxl_tpl_tbuf_put(c, b, ", ", 2)) return false;
        if (!repr_inner(c, b, d->keys[i], depth + 1) || !mxl_tpl_tbuf_put(c, b, ": ", 2) ||
            !repr_inner(c, b, d->vals[i], depth + 1))
            return false;
    }
    if (!mxl_tpl_tbuf_putc(c, b, '}')) return false;
    return !d->ns || mxl_tpl_tbuf_putc(c, b, '>');
}

bool mxl_tpl_tv_str_append(tctx *c, tbuf *b, tv v) {
    char num[64];
    switch (v.t) {
    case TV_UNDEF: return true;
    case TV_NONE: return mxl_tpl_tbuf_put(c, b, "None", 4);
    case TV_BOOL: return v.u.b ? mxl_tpl_tbuf_put(c, b, "True", 4) : mxl_tpl_tbuf_put(c, b, "False", 5);
    case TV_INT:
        snprintf(num, sizeof num, "%lld", (long long)v.u.i);
        return mxl_tpl_tbuf_put(c, b, num, strlen(num));
    case TV_FLOAT:
        mxl_tpl_tfmt_float_repr(v.u.f, num, sizeof num);
        return mxl_tpl_tbuf_put(c, b, num, strlen(num));
    case TV_STR: return mxl_tpl_tbuf_put(c, b, v.u.s, v.n);
    case TV_LIST:
    case TV_DICT: return append_seq(c, b, v, 0);
    case TV_FUNC:
        snprintf(num, sizeof num, "<%s %.40s>", v.u.fn->kind == TF_MACRO ? "Macro" : "function",
                 v.u.fn->name ? v.u.fn->name : "?");
        return mxl_tpl_tbuf_put(c, b, num, strlen(num));
    case TV_LOOP:
        snprintf(num, sizeof num, "<LoopContext %lld/%lld>", (long long)v.u.loop->index0 + 1,
                 (long long)v.u.loop->length);
        return mxl_tpl_tbuf_put(c, b, num, strlen(num));
    default: return true;
    }
}

bool mxl_tpl_tv_repr_append(tctx *c, tbuf *b, tv v) { return repr_inner(c, b, v, 0); }

bool mxl_tpl_tv_to_str(tctx *c, tv v, tv *out) {
    if (v.t == TV_STR) {
        *out = v;
        return true;
    }
    if (v.t == TV_UNDEF) {
        *out = tv_strn("", 0);
        return true;
    }
    tbuf b = {0};
    if (!mxl_tpl_tv_str_append(c, &b, v)) return false;
    *out = mxl_tpl_tbuf_value(&b);
    return true;
}
