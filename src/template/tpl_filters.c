/* tpl_filters.c - Jinja2's builtin filters as Jinja2 3.1 implements them (plus transformers'
 * tojson and a Python-style `split`). Filters take the value, positional and keyword arguments;
 * argument names follow Jinja2's signatures so keyword calls work. Sorting is stable and uses
 * Python's ordering (case-insensitive by default where Jinja2 does that). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "template/tpl_internal.h"
#include "template/tpl_strings.h"

static const char *const FILTERS[] = {
    "tojson", "trim", "upper", "lower", "capitalize", "title", "length", "count", "join", "default",
    "d", "first", "last", "list", "string", "int", "float", "abs", "round", "replace", "split", "map",
    "select", "reject", "selectattr", "rejectattr", "items", "dictsort", "unique", "sort", "reverse",
    "sum", "min", "max", "batch", "indent", "center", "wordcount", "safe", "e", "escape",
    "forceescape", "striptags", "attr", "format", "bool", NULL};

bool mxl_tpl_tfilter_exists(const char *name) {
    for (int i = 0; FILTERS[i]; i++)
        if (!strcmp(FILTERS[i], name)) return true;
    return false;
}

/* ---------------------------------------------------------------- helpers */

static bool soft_str(tctx *c, tv v, tv *out) { return mxl_tpl_tv_to_str(c, v, out); }

/* Jinja2's make_attrgetter: "a.b.0" walks items/attributes; missing parts give undefined. */
static bool attr_get(tctx *c, tv item, tv attr, tv *out) {
    if (attr.t == TV_INT) return mxl_tpl_tgetitem(c, item, attr, out);
    if (attr.t != TV_STR) return mxl_tpl_terr(c, TE_TYPE, "attribute must be a string or an integer") == 0;
    size_t i = 0;
    tv cur = item;
    while (i <= attr.n) {
        size_t e = i;
        while (e < attr.n && attr.u.s[e] != '.') e++;
        tv key = tv_strn(attr.u.s + i, e - i);
        bool digits = e > i;
        int64_t iv = 0;
        for (size_t k = i; k < e; k++) {
            if (attr.u.s[k] < '0' || attr.u.s[k] > '9') digits = false;
            else if (iv < 100000000) iv = iv * 10 + (attr.u.s[k] - '0');
        }
        if (digits) key = tv_int(iv);
        if (!mxl_tpl_tgetitem(c, cur, key, &cur)) return false;
        i = e + 1;
        if (e >= attr.n) break;
    }
    *out = cur;
    return true;
}

/* key used for comparisons: lower-cased strings unless case sensitive */
static bool sort_key(tctx *c, tv v, bool case_sensitive, tv *out) {
    if (!case_sensitive && v.t == TV_STR) return mxl_tpl_tstr_case(c, v, 'l', out);
    *out = v;
    return true;
}

/* stable merge sort of idx[] by keys[]; false on comparison error */
static bool merge_sort(tctx *c, size_t *idx, size_t *tmp, size_t n, const tv *keys, bool reverse) {
    if (n < 2) return true;
    size_t h = n / 2;
    if (!merge_sort(c, idx, tmp, h, keys, reverse) || !merge_sort(c, idx + h, tmp, n - h, keys, reverse))
        return false;
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int r = mxl_tpl_tv_compare(c, keys[idx[j]], keys[idx[i]]);
        if (r == -2) return false;
        bool take_right = reverse ? r > 0 : r < 0;
        tmp[k++] = take_right ? idx[j++] : idx[i++];
    }
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
    return mxl_tpl_tfuel(c, n);
}

static bool sorted_list(tctx *c, tlist *l, const tv *keys, bool reverse, tlist **out) {
    size_t *idx = mxl_tpl_talloc(c, (l->n + 1) * sizeof(size_t)), *tmp = mxl_tpl_talloc(c, (l->n + 1) * sizeof(size_t));
    tlist *r = mxl_tpl_tlist_new(c, l->n);
    if (!idx || !tmp || !r) return false;
    for (size_t i = 0; i < l->n; i++) idx[i] = i;
    if (!merge_sort(c, idx, tmp, l->n, keys, reverse)) return false;
    for (size_t i = 0; i < l->n; i++) r->items[i] = l->items[idx[i]];
    r->n = l->n;
    *out = r;
    return true;
}

bool mxl_tpl_thtml_escape(tctx *c, tv s, tv *out) {
    tbuf b = {0};
    size_t run = 0;
    for (size_t i = 0; i < s.n; i++) {
        const char *e = NULL;
        switch (s.u.s[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '"': e = "&#34;"; break;
        case '\'': e = "&#39;"; break;
        default: break;
        }
        if (e) {
            if (!mxl_tpl_tbuf_put(c, &b, s.u.s + run, i - run) || !mxl_tpl_tbuf_put(c, &b, e, strlen(e))) return false;
            run = i + 1;
        }
    }
    if (run == 0) {
        *out = s;
        out->safe = 1;
        return true;
    }
    if (!mxl_tpl_tbuf_put(c, &b, s.u.s + run, s.n - run)) return false;
    *out = mxl_tpl_tbuf_value(&b);
    out->safe = 1;
    return true;
}

static bool length_of(tctx *c, tv v, int64_t *out) {
    switch (v.t) {
    case TV_UNDEF: *out = 0; return true;
    case TV_STR: *out = (int64_t)mxl_tpl_tutf8_len(v.u.s, v.n); return true;
    case TV_LIST: *out = (int64_t)v.u.l->n; return true;
    case TV_DICT:
        if (v.u.d->ns) break;
        *out = (int64_t)v.u.d->n;
        return true;
    case TV_LOOP: *out = v.u.loop->length; return true;
    default: break;
    }
    return mxl_tpl_terr(c, TE_TYPE, "object of type '%s' has no len()", mxl_tpl_tv_type_name(v)) == 0;
}

/* Python int(str, base) / float(str) parsing; false if not a number */
static bool parse_py_int(tv s, int64_t base, int64_t *out) {
    char buf[80];
    tv t = mxl_tpl_tstr_strip(s, NULL, true, true);
    size_t o = 0;
    for (size_t i = 0; i < t.n; i++) {
        char ch = t.u.s[i];
        if (ch == '_') {
            if (i == 0 || i + 1 >= t.n || t.u.s[i - 1] == '_') return false;
            continue;
        }
        if (o + 1 >= sizeof buf) return false;
        buf[o++] = ch;
    }
    buf[o] = 0;
    if (o == 0) return false;
    const char *p = buf;
    if (*p == '+' || *p == '-') p++;
    if (!*p) return false;
    if (base == 16 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {}
    else if (base == 10) {
        for (const char *q = p; *q; q++)
            if (*q < '0' || *q > '9') return false;
    }
    char *ep;
    errno = 0;
    long long v = strtoll(buf, &ep, (int)base);
    if (*ep || errno) return false;
    *out = v;
    return true;
}

static bool parse_py_float(tv s, double *out) {
    char buf[128];
    tv t = mxl_tpl_tstr_strip(s, NULL, true, true);
    size_t o = 0;
    for (size_t i = 0; i < t.n; i++) {
        if (t.u.s[i] == '_') continue;
        if (o + 1 >= sizeof buf) return false;
        buf[o++] = t.u.s[i];
    }
    buf[o] = 0;
    if (o == 0) return false;
    for (size_t i = 0; i < o; i++)
        if (buf[i] == 'x' || buf[i] == 'X' || buf[i] == 'p' || buf[i] == 'P') return false;
    char *ep;
    double v = strtod(buf, &ep);
    if (*ep) return false;
    *out = v;
    return true;
}

static double py_round(double x, int64_t nd) {
    if (!isfinite(x)) return x;
    if (nd > 300) return x;
    if (nd < -300) return 0.0 * x;
    char buf[512];
    if (nd >= 0) {
        snprintf(buf, sizeof buf, "%.*f", (int)nd, x);
        return strtod(buf, NULL);
    }
    double p = pow(10.0, (double)-nd);
    double y = x / p;
    double r = nearbyint(y); /* half to even, like Python */
    return r * p;
}

/* select/reject family: applies a test (or truthiness) to each item or its attribute */
static bool select_common(tctx *c, tv v, tv *args, size_t nargs, bool by_attr, bool keep_if, tv *out) {
    tlist *l;
    if (!mxl_tpl_tv_truthy(v)) v = tv_undef(NULL); /* Jinja2: `if value:` before iterating */
    if (!mxl_tpl_titer_list(c, v, &l)) return false;
    tlist *r = mxl_tpl_tlist_new(c, 0);
    if (!r) return false;
    size_t ai = 0;
    tv attr = tv_none();
    if (by_attr) {
        if (nargs < 1) return mxl_tpl_terr(c, TE_TYPE, "selectattr/rejectattr need an attribute name") == 0;
        attr = args[ai++];
    }
    char test[64] = {0};
    if (ai < nargs) {
        if (args[ai].t != TV_STR) return mxl_tpl_terr(c, TE_TYPE, "test name must be a string") == 0;
        snprintf(test, sizeof test, "%.*s", (int)(args[ai].n > 60 ? 60 : args[ai].n), args[ai].u.s);
        if (!mxl_tpl_ttest_exists(test)) return mxl_tpl_terr(c, TE_RUNTIME, "No test named '%s' found.", test) == 0;
        ai++;
    }
    for (size_t i = 0; i < l->n; i++) {
        tv item = l->items[i], x = item;
        if (by_attr && !attr_get(c, item, attr, &x)) return false;
        bool ok;
        if (test[0]) {
            if (!mxl_tpl_ttest_apply(c, test, x, args + ai, nargs - ai, &ok)) return false;
        } else {
            ok = mxl_tpl_tv_truthy(x);
        }
        if (ok == keep_if && !mxl_tpl_tlist_push(c, r, item)) return false;
    }
    *out = mxl_tpl_tv_list(r);
    return mxl_tpl_tfuel(c, l->n);
}

static bool agg_minmax(tctx *c, tv v, bool want_max, bool cs, tv *attr, tv *out) {
    tlist *l;
    if (!mxl_tpl_titer_list(c, v, &l)) return false;
    if (l->n == 0) {
        *out = tv_undef("\x01No aggregated item, sequence was empty.");
        return true;
    }
    size_t best = 0;
    tv bestk;
    for (size_t i = 0; i < l->n; i++) {
        tv x = l->items[i], k;
        if (attr && !attr_get(c, x, *attr, &x)) return false;
        if (!sort_key(c, x, cs, &k)) return false;
        if (i == 0) {
            bestk = k;
            continue;
        }
        int r = mxl_tpl_tv_compare(c, k, bestk);
        if (r == -2) return false;
        if (want_max ? r > 0 : r < 0) {
            best = i;
            bestk = k;
        }
    }
    *out = l->items[best];
    return true;
}

static bool do_indent(tctx *c, tv s, tv *widthv, bool first, bool blank, tv *out) {
    tv ind;
    if (!widthv) ind = mxl_tpl_tv_cstr("    ");
    else if (widthv->t == TV_STR) ind = *widthv;
    else {
        int64_t w = widthv->t == TV_INT ? widthv->u.i : widthv->t == TV_BOOL ? widthv->u.b : -1;
        if (w < 0) w = 0;
        if (w > 4096) return mxl_tpl_terr(c, TE_BUDGET, "indent width too large") == 0;
        char *p = mxl_tpl_talloc(c, (size_t)w + 1);
        if (!p) return false;
        memset(p, ' ', (size_t)w);
        ind = tv_strn(p, (size_t)w);
    }
    /* s += "\n"; then splitlines */
    tbuf tmp = {0};
    if (!mxl_tpl_tbuf_put(c, &tmp, s.u.s, s.n) || !mxl_tpl_tbuf_putc(c, &tmp, '\n')) return false;
    tlist *lines;
    if (!mxl_tpl_tstr_splitlines(c, mxl_tpl_tbuf_value(&tmp), false, &lines)) return false;
    tbuf b = {0};
    if (first && !mxl_tpl_tbuf_put(c, &b, ind.u.s, ind.n)) return false;
    for (size_t i = 0; i < lines->n; i++) {
        tv ln = lines->items[i];
        if (i) {
            if (!mxl_tpl_tbuf_putc(c, &b, '\n')) return false;
            if ((blank || ln.n) && !mxl_tpl_tbuf_put(c, &b, ind.u.s, ind.n)) return false;
        }
        if (!mxl_tpl_tbuf_put(c, &b, ln.u.s, ln.n)) return false;
    }
    *out = mxl_tpl_tbuf_value(&b);
    return true;
}

/* Jinja2's title: capitalise each word, words split at [-\s({[<]+ */
static bool jinja_title(tctx *c, tv s, tv *out) {
    tbuf b = {0};
    size_t pos = 0;
    bool word_start = true;
    while (pos < s.n) {
        size_t p = pos;
        int32_t cp = mxl_tpl_tutf8_next(s.u.s, s.n, &p);
        bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || mxl_tpl_tstr_is_space(cp);
        /* item[0].upper() + item[1:].lower(), with Python's full mappings ('ß' -> 'SS') */
        tv one = tv_strn(s.u.s + pos, p - pos), mapped = one;
        if (!sep && !mxl_tpl_tstr_case(c, one, word_start ? 'u' : 'l', &mapped)) return false;
        word_start = sep;
        if (!mxl_tpl_tbuf_put(c, &b, mapped.u.s, mapped.n)) return false;
        pos = p;
    }
    *out = mxl_tpl_tbuf_value(&b);
    return true;
}

static bool is_word_cp(int32_t cp) {
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
    utf8proc_category_t cat = utf8proc_category(cp);
    return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) || cat == UTF8PROC_CATEGORY_ND ||
           cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO || cat == UTF8PROC_CATEGORY_MN ||
           cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_PC;
}

static bool striptags(tctx *c, tv s, tv *out) {
    /* drop <!-- --> comments and <...> tags, then collapse whitespace */
    tbuf t = {0};
    size_t i = 0;
    while (i < s.n) {
        if (s.u.s[i] == '<') {
            if (i + 3 < s.n && memcmp(s.u.s + i, "<!--", 4) == 0) {
                const char *e = memmem(s.u.s + i + 4, s.n - i - 4, "-->", 3);
                if (e) {
                    i = (size_t)(e - s.u.s) + 3;
                    continue;
                }
            }
            const char *e = memchr(s.u.s + i + 1, '>', s.n - i - 1);
            if (e) {
                i = (size_t)(e - s.u.s) + 1;
                continue;
            }
        }
        if (!mxl_tpl_tbuf_putc(c, &t, s.u.s[i])) return false;
        i++;
    }
    tv words;
    if (!mxl_tpl_tstr_split(c, mxl_tpl_tbuf_value(&t), NULL, -1, false, &words)) return false;
    tbuf b = {0};
    for (size_t k = 0; k < words.u.l->n; k++) {
        tv w = words.u.l->items[k];
        if ((k && !mxl_tpl_tbuf_putc(c, &b, ' ')) || !mxl_tpl_tbuf_put(c, &b, w.u.s, w.n)) return false;
    }
    *out = mxl_tpl_tbuf_value(&b);
    return true;
}

/* ---------------------------------------------------------------- dispatch */

bool mxl_tpl_tfilter_apply(tctx *c, const char *name, tv v, tv *args, size_t nargs, const char **kwn,
                   tv *kwv, size_t nkw, tv *out) {
#define A(i, nm) mxl_tpl_targ(args, nargs, kwn, kwv, nkw, i, nm)
#define IS(x) (!strcmp(name, x))
#define TRUTHY(p) ((p) && mxl_tpl_tv_truthy(*(p)))
    if (!mxl_tpl_tfuel(c, 1)) return false;
    if (IS("tojson")) {
        tv *ea = A(0, "ensure_ascii"), *ind = A(1, "indent"), *seps = A(2, "separators"), *sk = A(3, "sort_keys");
        const char *indent = NULL;
        size_t indent_len = 0;
        if (ind && ind->t != TV_NONE) {
            if (ind->t == TV_STR) {
                indent = ind->u.s;
                indent_len = ind->n;
            } else if (ind->t == TV_INT || ind->t == TV_BOOL) {
                int64_t w = ind->t == TV_INT ? ind->u.i : ind->u.b;
                if (w < 0) w = 0;
                if (w > 256) return mxl_tpl_terr(c, TE_BUDGET, "tojson indent too large") == 0;
                char *p = mxl_tpl_talloc(c, (size_t)w + 1);
                if (!p) return false;
                memset(p, ' ', (size_t)w);
                indent = p;
                indent_len = (size_t)w;
            } else {
                return mxl_tpl_terr(c, TE_TYPE, "indent must be an int or a str") == 0;
            }
        }
        const char *isep = NULL, *ksep = NULL;
        if (seps && seps->t != TV_NONE) {
            if (seps->t != TV_LIST || seps->u.l->n != 2 || seps->u.l->items[0].t != TV_STR ||
                seps->u.l->items[1].t != TV_STR)
                return mxl_tpl_terr(c, TE_TYPE, "separators must be a pair of strings") == 0;
            bool ok1, ok2;
            tv a = seps->u.l->items[0], b = seps->u.l->items[1];
            tv a0 = mxl_tpl_tv_str_copy(c, a.u.s, a.n, &ok1), b0 = mxl_tpl_tv_str_copy(c, b.u.s, b.n, &ok2);
            if (!ok1 || !ok2) return false;
            isep = a0.u.s; /* mxl_tpl_tv_str_copy NUL-terminates (zeroed arena) */
            ksep = b0.u.s;
        }
        tbuf b = {0};
        if (!mxl_tpl_tjson_dump(c, &b, v, indent, indent_len, isep, ksep, TRUTHY(sk), TRUTHY(ea))) return false;
        *out = mxl_tpl_tbuf_value(&b);
        return true;
    }
    if (IS("safe")) {
        if (!soft_str(c, v, out)) return false;
        out->safe = 1;
        return true;
    }
    if (IS("default") || IS("d")) {
        tv *dv = A(0, "default_value"), *bo = A(1, "boolean");
        bool use = v.t == TV_UNDEF || (TRUTHY(bo) && !mxl_tpl_tv_truthy(v));
        *out = use ? (dv ? *dv : tv_strn("", 0)) : v;
        return true;
    }
    if (IS("length") || IS("count")) {
        int64_t n = 0;
        if (!length_of(c, v, &n)) return false;
        *out = tv_int(n);
        return true;
    }
    if (IS("string")) return soft_str(c, v, out);
    if (IS("trim") || IS("upper") || IS("lower") || IS("capitalize") || IS("title") || IS("e") ||
        IS("escape") || IS("forceescape") || IS("striptags") || IS("wordcount") || IS("center") ||
        IS("indent") || IS("replace") || IS("split") || IS("format")) {
        tv s;
        if (!soft_str(c, v, &s)) return false;
        if (IS("trim")) {
            tv *ch = A(0, "chars");
            if (ch && ch->t == TV_NONE) ch = NULL;
            if (ch && ch->t != TV_STR) return mxl_tpl_terr(c, TE_TYPE, "strip arg must be None or str") == 0;
            *out = mxl_tpl_tstr_strip(s, ch, true, true);
            out->safe = s.safe;
            return true;
        }
        /* Markup in, Markup out for the str-method-like filters */
        bool ok = true, keep_safe = true;
        if (IS("upper")) ok = mxl_tpl_tstr_case(c, s, 'u', out);
        else if (IS("lower")) ok = mxl_tpl_tstr_case(c, s, 'l', out);
        else if (IS("capitalize")) ok = mxl_tpl_tstr_case(c, s, 'c', out);
        else if (IS("title")) ok = jinja_title(c, s, out);
        else if (IS("center")) {
            tv *w = A(0, "width");
            ok = mxl_tpl_tstr_center(c, s, w ? (w->t == TV_INT ? w->u.i : 0) : 80, out);
        } else if (IS("indent"))
            ok = do_indent(c, s, A(0, "width"), TRUTHY(A(1, "first")), TRUTHY(A(2, "blank")), out);
        else keep_safe = false;
        if (keep_safe) {
            if (ok && out->t == TV_STR) out->safe = s.safe;
            return ok;
        }
        if (IS("e") || IS("escape")) {
            if (s.safe) {
                *out = s;
                return true;
            }
            return mxl_tpl_thtml_escape(c, s, out);
        }
        if (IS("forceescape")) return mxl_tpl_thtml_escape(c, s, out);
        if (IS("striptags")) return striptags(c, s, out);
        if (IS("wordcount")) {
            int64_t n = 0;
            size_t pos = 0;
            bool in = false;
            while (pos < s.n) {
                bool w = is_word_cp(mxl_tpl_tutf8_next(s.u.s, s.n, &pos));
                if (w && !in) n++;
                in = w;
            }
            *out = tv_int(n);
            return true;
        }
        if (IS("replace")) {
            tv *o = A(0, "old"), *nw = A(1, "new"), *cnt = A(2, "count");
            if (!o || !nw) return mxl_tpl_terr(c, TE_TYPE, "replace() needs old and new") == 0;
            tv os, ns;
            if (!soft_str(c, *o, &os) || !soft_str(c, *nw, &ns)) return false;
            int64_t count = -1;
            if (cnt && cnt->t == TV_INT) count = cnt->u.i;
            return mxl_tpl_tstr_replace(c, s, os, ns, count, out);
        }
        if (IS("split")) {
            tv *sep = A(0, "sep"), *mx = A(1, "maxsplit");
            int64_t m = mx && mx->t == TV_INT ? mx->u.i : -1;
            return mxl_tpl_tstr_split(c, s, sep, m, false, out);
        }
        /* format: value % args (kwargs -> mapping) */
        if (nkw) {
            tdict *d = mxl_tpl_tdict_new(c, nkw);
            if (!d) return false;
            for (size_t i = 0; i < nkw; i++)
                if (!mxl_tpl_tdict_set(c, d, mxl_tpl_tv_cstr(kwn[i]), kwv[i])) return false;
            return mxl_tpl_tfmt_percent(c, s, mxl_tpl_tv_dict(d), out);
        }
        tlist *t = mxl_tpl_tlist_new(c, nargs);
        if (!t) return false;
        t->tuple = true;
        for (size_t i = 0; i < nargs; i++) t->items[t->n++] = args[i];
        return mxl_tpl_tfmt_percent(c, s, mxl_tpl_tv_list(t), out);
    }
    if (IS("join")) {
        tv *d = A(0, "d"), *attr = A(1, "attribute");
        tv sep = tv_strn("", 0);
        if (d && !soft_str(c, *d, &sep)) return false;
        tlist *l;
        if (!mxl_tpl_titer_list(c, v, &l)) return false;
        tbuf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            tv x = l->items[i];
            if (attr && attr->t != TV_NONE && !attr_get(c, x, *attr, &x)) return false;
            if ((i && !mxl_tpl_tbuf_put(c, &b, sep.u.s, sep.n)) || !mxl_tpl_tv_str_append(c, &b, x)) return false;
        }
        *out = mxl_tpl_tbuf_value(&b);
        return true;
    }
    if (IS("first") || IS("last")) {
        tlist *l;
        if (v.t == TV_UNDEF) return mxl_tpl_terr(c, TE_UNDEFINED, "'%s' of an undefined value", name) == 0;
        if (!mxl_tpl_titer_list(c, v, &l)) return false;
        if (l->n == 0) *out = tv_undef(IS("first") ? "\x01No first item, sequence was empty." : "\x01No last item, sequence was empty.");
        else *out = l->items[IS("first") ? 0 : l->n - 1];
        return true;
    }
    if (IS("list")) {
        tlist *l;
        if (!mxl_tpl_titer_list(c, v, &l)) return false;
        tlist *r = mxl_tpl_tlist_new(c, l->n);
        if (!r) return false;
        if (l->n) memcpy(r->items, l->items, l->n * sizeof(tv));
        r->n = l->n;
        *out = mxl_tpl_tv_list(r);
        return true;
    }
    if (IS("reverse")) {
        if (v.t == TV_STR) {
            tbuf b = {0};
            size_t pos = v.n;
            while (pos > 0) {
                size_t e = pos;
                pos--;
                while (pos > 0 && ((unsigned char)v.u.s[pos] & 0xC0) == 0x80) pos--;
                if (!mxl_tpl_tbuf_put(c, &b, v.u.s + pos, e - pos)) return false;
            }
            *out = mxl_tpl_tbuf_value(&b);
            return true;
        }
        tlist *l;
        if (!mxl_tpl_titer_list(c, v, &l)) return false;
        tlist *r = mxl_tpl_tlist_new(c, l->n);
        if (!r) return false;
        for (size_t i = 0; i < l->n; i++) r->items[i] = l->items[l->n - 1 - i];
        r->n = l->n;
        *out = mxl_tpl_tv_list(r);
        return true;
    }
    if (IS("int")) {
        tv *dflt = A(0, "default"), *basev = A(1, "base");
        int64_t base = basev && basev->t == TV_INT ? basev->u.i : 10;
        if (base != 10 && base != 16 && base != 8 && base != 2) base = 10;
        int64_t iv;
        double fv;
        if (v.t == TV_INT) *out = v;
        else if (v.t == TV_BOOL) *out = tv_int(v.u.b);
        else if (v.t == TV_FLOAT && isfinite(v.u.f) && fabs(v.u.f) < 9.2e18) *out = tv_int((int64_t)v.u.f);
        else if (v.t == TV_STR && parse_py_int(v, base, &iv)) *out = tv_int(iv);
        else if (v.t == TV_STR && parse_py_float(v, &fv) && isfinite(fv) && fabs(fv) < 9.2e18) *out = tv_int((int64_t)fv);
        else *out = dflt ? *dflt : tv_int(0);
        return true;
    }
    if (IS("float")) {
        tv *dflt = A(0, "default");
        double fv;
        if (v.t == TV_FLOAT) *out = v;
        else if (v.t == TV_INT || v.t == TV_BOOL) *out = tv_float(mxl_tpl_tv_as_double(v));
        else if (v.t == TV_STR && parse_py_float(v, &fv)) *out = tv_float(fv);
        else *out = dflt ? *dflt : tv_float(0.0);
        return true;
    }
    if (IS("bool")) {
        *out = tv_bool(mxl_tpl_tv_truthy(v));
        return true;
    }
    if (IS("abs")) {
        if (v.t == TV_INT) {
            if (v.u.i == INT64_MIN) return mxl_tpl_terr(c, TE_VALUE, "integer overflow") == 0;
            *out = tv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        } else if (v.t == TV_BOOL) *out = tv_int(v.u.b);
        else if (v.t == TV_FLOAT) *out = tv_float(fabs(v.u.f));
        else return mxl_tpl_terr(c, TE_TYPE, "bad operand type for abs(): '%s'", mxl_tpl_tv_type_name(v)) == 0;
        return true;
    }
    if (IS("round")) {
        tv *pv = A(0, "precision"), *mv = A(1, "method");
        int64_t prec = pv && pv->t == TV_INT ? pv->u.i : 0;
        char method = 'c';
        if (mv && mv->t == TV_STR) {
            if (mv->n == 4 && !memcmp(mv->u.s, "ceil", 4)) method = 'u';
            else if (mv->n == 5 && !memcmp(mv->u.s, "floor", 5)) method = 'f';
            else if (!(mv->n == 6 && !memcmp(mv->u.s, "common", 6)))
                return mxl_tpl_terr(c, TE_TYPE, "method must be common, ceil or floor") == 0;
        }
        if (!mxl_tpl_tv_is_number(v)) return mxl_tpl_terr(c, TE_TYPE, "type %s doesn't define __round__ method", mxl_tpl_tv_type_name(v)) == 0;
        if (method == 'c') {
            if (v.t != TV_FLOAT) *out = tv_int(v.t == TV_INT ? v.u.i : v.u.b);
            else *out = tv_float(py_round(v.u.f, prec));
        } else {
            double x = mxl_tpl_tv_as_double(v), p = pow(10.0, (double)(prec > 300 ? 300 : prec < -300 ? -300 : prec));
            *out = tv_float((method == 'u' ? ceil(x * p) : floor(x * p)) / p);
        }
        return true;
    }
    if (IS("map")) {
        tlist *l;
        if (!mxl_tpl_tv_truthy(v)) v = tv_undef(NULL); /* Jinja2: `if value:` before iterating */
        if (!mxl_tpl_titer_list(c, v, &l)) return false;
        tlist *r = mxl_tpl_tlist_new(c, l->n);
        if (!r) return false;
        tv *attr = NULL;
        for (size_t i = 0; i < nkw; i++)
            if (!strcmp(kwn[i], "attribute")) attr = &kwv[i];
        tv *dflt = NULL;
        for (size_t i = 0; i < nkw; i++)
            if (!strcmp(kwn[i], "default")) dflt = &kwv[i];
        if (attr) {
            for (size_t i = 0; i < l->n; i++) {
                tv x;
                if (!attr_get(c, l->items[i], *attr, &x)) return false;
                if (x.t == TV_UNDEF && dflt) x = *dflt;
                r->items[r->n++] = x;
            }
        } else {
            if (nargs < 1 || args[0].t != TV_STR) return mxl_tpl_terr(c, TE_TYPE, "map() needs a filter name or attribute=") == 0;
            char fname[64];
            snprintf(fname, sizeof fname, "%.*s", (int)(args[0].n > 60 ? 60 : args[0].n), args[0].u.s);
            if (!mxl_tpl_tfilter_exists(fname)) return mxl_tpl_terr(c, TE_RUNTIME, "No filter named '%s' found.", fname) == 0;
            for (size_t i = 0; i < l->n; i++)
                if (!mxl_tpl_tfilter_apply(c, fname, l->items[i], args + 1, nargs - 1, kwn, kwv, nkw, &r->items[r->n++]))
                    return false;
        }
        *out = mxl_tpl_tv_list(r);
        return true;
    }
    if (IS("select")) return select_common(c, v, args, nargs, false, true, out);
    if (IS("reject")) return select_common(c, v, args, nargs, false, false, out);
    if (IS("selectattr")) return select_common(c, v, args, nargs, true, true, out);
    if (IS("rejectattr")) return select_common(c, v, args, nargs, true, false, out);
    if (IS("items")) {
        if (v.t == TV_UNDEF) {
            tlist *l = mxl_tpl_tlist_new(c, 0);
            if (!l) return false;
            *out = mxl_tpl_tv_list(l);
            return true;
        }
        if (v.t != TV_DICT || v.u.d->ns) return mxl_tpl_terr(c, TE_TYPE, "Can only get item pairs from a mapping.") == 0;
        return mxl_tpl_tmethod_call(c, v, "items", NULL, 0, NULL, NULL, 0, out);
    }
    if (IS("dictsort")) {
        if (v.t != TV_DICT || v.u.d->ns) return mxl_tpl_terr(c, TE_TYPE, "dictsort needs a mapping") == 0;
        tv *csv = A(0, "case_sensitive"), *by = A(1, "by"), *rev = A(2, "reverse");
        bool by_value = by && by->t == TV_STR && by->n == 5 && !memcmp(by->u.s, "value", 5);
        if (by && !(by->t == TV_STR && ((by->n == 3 && !memcmp(by->u.s, "key", 3)) || by_value)))
            return mxl_tpl_terr(c, TE_VALUE, "You can only sort by either 'key' or 'value'") == 0;
        tv items;
        if (!mxl_tpl_tmethod_call(c, v, "items", NULL, 0, NULL, NULL, 0, &items)) return false;
        tlist *l = items.u.l;
        tv *keys = mxl_tpl_talloc(c, (l->n + 1) * sizeof(tv));
        if (!keys) return false;
        for (size_t i = 0; i < l->n; i++)
            if (!sort_key(c, l->items[i].u.l->items[by_value ? 1 : 0], TRUTHY(csv), &keys[i])) return false;
        tlist *r;
        if (!sorted_list(c, l, keys, TRUTHY(rev), &r)) return false;
        *out = mxl_tpl_tv_list(r);
        return true;
    }
    if (IS("sort")) {
        tv *rev = A(0, "reverse"), *csv = A(1, "case_sensitive"), *attr = A(2, "attribute");
        tlist *l;
        if (!mxl_tpl_titer_list(c, v, &l)) return false;
        tv *keys = mxl_tpl_talloc(c, (l->n + 1) * sizeof(tv));
        if (!keys) return false;
        for (size_t i = 0; i < l->n; i++) {
            tv x = l->items[i];
            if (attr && attr->t != TV_NONE && !attr_get(c, x, *attr, &x)) return false;
            if (!sort_key(c, x, TRUTHY(csv), &keys[i])) return false;
        }
        tlist *r;
        if (!sorted_list(c, l, keys, TRUTHY(rev), &r)) return false;
        *out = mxl_tpl_tv_list(r);
        return true;
    }
    if (IS("unique")) {
        tv *csv = A(0, "case_sensitive"), *attr = A(1, "attribute");
        tlist *l;
        if (!mxl_tpl_titer_list(c, v, &l)) return false;
        tlist *r = mxl_tpl_tlist_new(c, 0), *seen = mxl_tpl_tlist_new(c, 0);
        if (!r || !seen) return false;
        for (size_t i = 0; i < l->n; i++) {
            tv x = l->items[i], k;
            if (attr && attr->t != TV_NONE && !attr_get(c, x, *attr, &x)) return false;
            if (!sort_key(c, x, TRUTHY(csv), &k)) return false;
            bool dup = false;
            for (size_t j = 0; j < seen->n && !dup; j++) dup = mxl_tpl_tv_equal(seen->items[j], k);
            if (!mxl_tpl_tfuel(c, seen->n / 8)) return false;
            if (!dup && (!mxl_tpl_tlist_push(c, seen, k) || !mxl_tpl_tlist_push(c, r, l->items[i]))) return false;
        }
        *out = mxl_tpl_tv_list(r);
        return true;
    }
    if (IS("sum")) {
        tv *attr = A(0, "attribute"), *start = A(1, "start");
        tlist *l;
        if (!mxl_tpl_titer_list(c, v, &l)) return false;
        tv acc = start ? *start : tv_int(0);
        for (size_t i = 0; i < l->n; i++) {
            tv x = l->items[i];
            if (attr && attr->t != TV_NONE && !attr_get(c, x, *attr, &x)) return false;
            if (!mxl_tpl_tv_is_number(acc) || !mxl_tpl_tv_is_number(x))
                return mxl_tpl_terr(c, TE_TYPE, "unsupported operand type(s) for +: '%s' and '%s'", mxl_tpl_tv_type_name(acc), mxl_tpl_tv_type_name(x)) == 0;
            if (acc.t == TV_FLOAT || x.t == TV_FLOAT) acc = tv_float(mxl_tpl_tv_as_double(acc) + mxl_tpl_tv_as_double(x));
            else {
                int64_t a = acc.t == TV_INT ? acc.u.i : acc.u.b, b2 = x.t == TV_INT ? x.u.i : x.u.b, r;
                if (__builtin_add_overflow(a, b2, &r)) return mxl_tpl_terr(c, TE_VALUE, "integer overflow") == 0;
                acc = tv_int(r);
            }
        }
        *out = acc;
        return true;
    }
    if (IS("min") || IS("max")) {
        tv *csv = A(0, "case_sensitive"), *attr = A(1, "attribute");
        if (attr && attr->t == TV_NONE) attr = NULL;
        return agg_minmax(c, v, IS("max"), TRUTHY(csv), attr, out);
    }
    if (IS("batch")) {
        tv *cnt = A(0, "linecount"), *fill = A(1, "fill_with");
        if (!cnt || cnt->t != TV_INT || cnt->u.i <= 0) return mxl_tpl_terr(c, TE_VALUE, "batch() needs a positive count") == 0;
        tlist *l;
        if (!mxl_tpl_titer_list(c, v, &l)) return false;
        tlist *r = mxl_tpl_tlist_new(c, 0), *cur = NULL;
        if (!r) return false;
        for (size_t i = 0; i < l->n; i++) {
            if (!cur || (int64_t)cur->n == cnt->u.i) {
                cur = mxl_tpl_tlist_new(c, 0);
                if (!cur || !mxl_tpl_tlist_push(c, r, mxl_tpl_tv_list(cur))) return false;
            }
            if (!mxl_tpl_tlist_push(c, cur, l->items[i])) return false;
        }
        if (cur && fill && fill->t != TV_NONE)
            while ((int64_t)cur->n < cnt->u.i)
                if (!mxl_tpl_tlist_push(c, cur, *fill)) return false;
        *out = mxl_tpl_tv_list(r);
        return true;
    }
    if (IS("attr")) {
        tv *nm = A(0, "name");
        if (!nm || nm->t != TV_STR) return mxl_tpl_terr(c, TE_TYPE, "attr() needs a name") == 0;
        return mxl_tpl_tgetattr(c, v, nm->u.s, nm->n, out);
    }
#undef A
#undef IS
#undef TRUTHY
    return mxl_tpl_terr(c, TE_RUNTIME, "No filter named '%s' found.", name) == 0;
}
