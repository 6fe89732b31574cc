/* tpl_render.c - the Jinja2 evaluator: walks the AST, evaluates expressions with Python
 * semantics (arithmetic, comparisons, attribute/subscript lookup as Jinja2's sandbox does it),
 * runs statements (if/for/set/macro/call/filter/generation, break/continue) and writes output.
 *
 * Scoping follows Jinja2: for loops and macro bodies get their own frame, `set` writes into the
 * innermost frame (so a set inside a loop does not leak out; namespace() is the escape hatch),
 * and lookups walk outwards to the template frame, the render variables and the globals.
 * Every node costs one step of fuel; nesting is bounded by max_depth. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tpl_internal.h"

/* Expression/block nesting allowed: enough for real templates and MAX macro calls deep, small enough
 * for a worker thread's stack (each unit is a few C frames). */
#define MAX_EVAL_DEPTH(c) (500 + 4 * (c)->max_depth)

enum { R_OK = 0, R_ERR = -1, R_BREAK = 1, R_CONTINUE = 2 };

/* ---------------------------------------------------------------- frames */

static tframe *frame_new(tctx *c, tframe *parent) {
    tframe *f = mxl_tpl_talloc(c, sizeof *f);
    if (f) f->parent = parent;
    return f;
}

static bool frame_set(tctx *c, tframe *f, const char *name, size_t n, tv v) {
    tv *slot = mxl_tpl_tdict_get_str(&f->vars, name, n);
    if (slot) {
        *slot = v;
        return true;
    }
    return mxl_tpl_tdict_set(c, &f->vars, tv_strn(name, n), v);
}

static bool lookup(tctx *c, tframe *f, const char *name, size_t n, tv *out) {
    (void)c;
    for (; f; f = f->parent) {
        tv *v = mxl_tpl_tdict_get_str(&f->vars, name, n);
        if (v) {
            *out = *v;
            return true;
        }
    }
    if (mxl_tpl_tglobal_lookup(name, n, out)) return true;
    *out = tv_undef(name);
    return true;
}

/* ---------------------------------------------------------------- undefined messages */

/* An undefined value's hint is either a variable name or, prefixed with \x01, the whole message
 * Jinja2 would raise when the value is used ("'dict object' has no attribute 'x'"). */
static int undef_error(tctx *c, tv u) {
    if (u.u.s && u.n && u.u.s[0] == '\x01') return mxl_tpl_terr(c, TE_UNDEFINED, "%.*s", (int)u.n - 1, u.u.s + 1);
    if (u.u.s && u.n) return mxl_tpl_terr(c, TE_UNDEFINED, "'%.*s' is undefined", (int)u.n, u.u.s);
    return mxl_tpl_terr(c, TE_UNDEFINED, "undefined value");
}

static const char *object_repr(tv v) {
    switch (v.t) {
    case TV_DICT: return v.u.d->ns ? "Namespace object" : "dict object";
    case TV_LIST: return v.u.l->tuple ? "tuple object" : "list object";
    case TV_STR: return "str object";
    case TV_INT: return "int object";
    case TV_FLOAT: return "float object";
    case TV_BOOL: return "bool object";
    case TV_NONE: return "None";
    default: return "object";
    }
}

static tv missing_attr(tctx *c, tv obj, const char *name, size_t n) {
    char buf[200];
    int len = snprintf(buf, sizeof buf, "\x01'%s' has no attribute '%.*s'", object_repr(obj),
                       (int)(n > 100 ? 100 : n), name);
    bool ok;
    tv s = mxl_tpl_tv_str_copy(c, buf, (size_t)len, &ok);
    if (!ok) return tv_undef(NULL);
    return tv_undef_n(s.u.s, s.n);
}

/* Jinja2's wording: "'dict object' has no attribute 'k'" for string keys, "None has no element 0"
 * for others. */
static tv missing_item(tctx *c, tv obj, tv key) {
    tbuf b = {0};
    const char *r = object_repr(obj);
    bool ok = key.t == TV_STR
                  ? mxl_tpl_tbuf_put(c, &b, "\x01'", 2) && mxl_tpl_tbuf_put(c, &b, r, strlen(r)) &&
                        mxl_tpl_tbuf_put(c, &b, "' has no attribute ", 19)
                  : mxl_tpl_tbuf_put(c, &b, "\x01", 1) && mxl_tpl_tbuf_put(c, &b, r, strlen(r)) &&
                        mxl_tpl_tbuf_put(c, &b, " has no element ", 16);
    if (!ok || !mxl_tpl_tv_repr_append(c, &b, key)) return tv_undef(NULL);
    return tv_undef_n(b.p, b.n);
}

/* ---------------------------------------------------------------- attribute / item access */

bool mxl_tpl_titer_list(tctx *c, tv v, tlist **out) {
    switch (v.t) {
    case TV_UNDEF: {
        *out = mxl_tpl_tlist_new(c, 0);
        return *out != NULL;
    }
    case TV_LIST:
        *out = v.u.l;
        return true;
    case TV_DICT: {
        if (v.u.d->ns) return mxl_tpl_terr(c, TE_TYPE, "'Namespace' object is not iterable") == 0;
        tlist *l = mxl_tpl_tlist_new(c, v.u.d->n);
        if (!l) return false;
        for (size_t i = 0; i < v.u.d->n; i++) l->items[i] = v.u.d->keys[i];
        l->n = v.u.d->n;
        *out = l;
        return true;
    }
    case TV_STR: {
        tlist *l = mxl_tpl_tlist_new(c, v.n);
        if (!l) return false;
        size_t pos = 0;
        while (pos < v.n) {
            size_t s = pos;
            mxl_tpl_tutf8_next(v.u.s, v.n, &pos);
            l->items[l->n++] = tv_strn(v.u.s + s, pos - s);
        }
        if (!mxl_tpl_tfuel(c, l->n / 16)) return false;
        *out = l;
        return true;
    }
    default:
        return mxl_tpl_terr(c, TE_TYPE, "'%s' object is not iterable", mxl_tpl_tv_type_name(v)) == 0;
    }
}

static tv bound_method(tctx *c, tv self, const char *name, size_t n) {
    tfunc *fn = mxl_tpl_talloc(c, sizeof *fn);
    if (!fn) return tv_undef(NULL);
    fn->kind = TF_METHOD;
    char *nm = mxl_tpl_talloc(c, n + 1);
    if (!nm) return tv_undef(NULL);
    memcpy(nm, name, n);
    fn->name = nm;
    fn->self = self;
    tv v = {0};
    v.t = TV_FUNC;
    v.u.fn = fn;
    return v;
}

static bool loop_attr(tctx *c, tloop *L, const char *name, size_t n, tv *out) {
#define IS(s) (n == sizeof(s) - 1 && memcmp(name, s, n) == 0)
    if (IS("index")) *out = tv_int(L->index0 + 1);
    else if (IS("index0")) *out = tv_int(L->index0);
    else if (IS("revindex")) *out = tv_int(L->length - L->index0);
    else if (IS("revindex0")) *out = tv_int(L->length - L->index0 - 1);
    else if (IS("first")) *out = tv_bool(L->index0 == 0);
    else if (IS("last")) *out = tv_bool(L->index0 == L->length - 1);
    else if (IS("length")) *out = tv_int(L->length);
    else if (IS("depth")) *out = tv_int(L->depth);
    else if (IS("depth0")) *out = tv_int(L->depth - 1);
    else if (IS("previtem"))
        *out = L->index0 > 0 ? L->items->items[L->index0 - 1] : tv_undef("previtem");
    else if (IS("nextitem"))
        *out = L->index0 + 1 < L->length ? L->items->items[L->index0 + 1] : tv_undef("nextitem");
    else if (IS("cycle")) {
        tfunc *fn = mxl_tpl_talloc(c, sizeof *fn);
        if (!fn) return false;
        fn->kind = TF_LOOP_CYCLE;
        fn->name = "cycle";
        fn->self.t = TV_LOOP;
        fn->self.u.loop = L;
        out->t = TV_FUNC;
        out->u.fn = fn;
    } else {
        tv lv = {0};
        lv.t = TV_LOOP;
        *out = missing_attr(c, lv, name, n);
    }
    return true;
#undef IS
}

bool mxl_tpl_tgetattr(tctx *c, tv obj, const char *name, size_t n, tv *out) {
    switch (obj.t) {
    case TV_UNDEF: return undef_error(c, obj) == 0;
    case TV_LOOP: return loop_attr(c, obj.u.loop, name, n, out);
    default: break;
    }
    if (n && name[0] == '_') {
        *out = missing_attr(c, obj, name, n);
        return true;
    }
    if (obj.t == TV_DICT && obj.u.d->ns) {
        tv *v = mxl_tpl_tdict_get_str(obj.u.d, name, n);
        *out = v ? *v : missing_attr(c, obj, name, n);
        return true;
    }
    bool unsafe = false;
    if (mxl_tpl_tmethod_exists(obj, name, n, &unsafe)) {
        if (unsafe)
            return mxl_tpl_terr(c, TE_SECURITY, "access to attribute '%.*s' of '%s' object is unsafe.", (int)n,
                        name, mxl_tpl_tv_type_name(obj)) == 0;
        *out = bound_method(c, obj, name, n);
        return c->ekind == TE_NONE;
    }
    if (obj.t == TV_DICT) {
        tv *v = mxl_tpl_tdict_get_str(obj.u.d, name, n);
        *out = v ? *v : missing_attr(c, obj, name, n);
        return true;
    }
    *out = missing_attr(c, obj, name, n);
    return true;
}

static bool index_of(tctx *c, tv key, int64_t len, int64_t *idx, bool *ok_index) {
    (void)c;
    int64_t i;
    if (key.t == TV_INT) i = key.u.i;
    else if (key.t == TV_BOOL) i = key.u.b;
    else {
        *ok_index = false;
        return true;
    }
    if (i < 0) i += len;
    *ok_index = i >= 0 && i < len;
    *idx = i;
    return true;
}

bool mxl_tpl_tgetitem(tctx *c, tv obj, tv key, tv *out) {
    if (obj.t == TV_UNDEF) return undef_error(c, obj) == 0;
    if (obj.t == TV_DICT && !obj.u.d->ns) {
        tv *v = mxl_tpl_tdict_get(obj.u.d, key);
        if (v) {
            *out = *v;
            return true;
        }
    } else if (obj.t == TV_LIST) {
        int64_t i = 0;
        bool ok = false;
        index_of(c, key, (int64_t)obj.u.l->n, &i, &ok);
        if (ok) {
            *out = obj.u.l->items[i];
            return true;
        }
    } else if (obj.t == TV_STR && (key.t == TV_INT || key.t == TV_BOOL)) {
        int64_t len = (int64_t)mxl_tpl_tutf8_len(obj.u.s, obj.n);
        int64_t i = 0;
        bool ok = false;
        index_of(c, key, len, &i, &ok);
        if (ok) {
            size_t b = mxl_tpl_tutf8_offset(obj.u.s, obj.n, (size_t)i);
            size_t e = b;
            mxl_tpl_tutf8_next(obj.u.s, obj.n, &e);
            *out = tv_strn(obj.u.s + b, e - b);
            return true;
        }
    }
    if (key.t == TV_STR) {
        if (obj.t == TV_DICT && !obj.u.d->ns) {
            bool unsafe = false;
            if (key.n && key.u.s[0] != '_' && mxl_tpl_tmethod_exists(obj, key.u.s, key.n, &unsafe)) {
                if (unsafe)
                    return mxl_tpl_terr(c, TE_SECURITY, "access to attribute '%.*s' of 'dict' object is unsafe.",
                                (int)key.n, key.u.s) == 0;
                *out = bound_method(c, obj, key.u.s, key.n);
                return c->ekind == TE_NONE;
            }
            *out = missing_item(c, obj, key);
            return c->ekind == TE_NONE;
        }
        return mxl_tpl_tgetattr(c, obj, key.u.s, key.n, out);
    }
    *out = missing_item(c, obj, key);
    return c->ekind == TE_NONE;
}

/* Python slice index normalisation for a sequence of length len. */
static void slice_indices(int64_t len, bool has_start, int64_t start, bool has_stop, int64_t stop,
                          int64_t step, int64_t *ostart, int64_t *ostop) {
    if (step > 0) {
        if (!has_start) start = 0;
        else if (start < 0) start = start + len < 0 ? 0 : start + len;
        else if (start > len) start = len;
        if (!has_stop) stop = len;
        else if (stop < 0) stop = stop + len < 0 ? 0 : stop + len;
        else if (stop > len) stop = len;
    } else {
        if (!has_start) start = len - 1;
        else if (start < 0) start = start + len < 0 ? -1 : start + len;
        else if (start >= len) start = len - 1;
        if (!has_stop) stop = -1;
        else if (stop < 0) stop = stop + len < 0 ? -1 : stop + len;
        else if (stop >= len) stop = len - 1;
    }
    *ostart = start;
    *ostop = stop;
}

static bool slice_arg(tctx *c, const tnode *n, tframe *f, bool *has, int64_t *v) {
    *has = false;
    if (!n) return true;
    tv x;
    if (!mxl_tpl_teval(c, n, f, &x)) return false;
    if (x.t == TV_NONE) return true;
    if (x.t == TV_INT) *v = x.u.i;
    else if (x.t == TV_BOOL) *v = x.u.b;
    else return mxl_tpl_terr(c, TE_TYPE, "slice indices must be integers or None") == 0;
    *has = true;
    return true;
}

static bool eval_slice(tctx *c, const tnode *n, tframe *f, tv *out) {
    tv obj;
    if (!mxl_tpl_teval(c, n->a, f, &obj)) return false;
    bool hs, he, hst;
    int64_t s = 0, e = 0, st = 1;
    if (!slice_arg(c, n->b, f, &hs, &s) || !slice_arg(c, n->c, f, &he, &e) ||
        !slice_arg(c, n->d, f, &hst, &st))
        return false;
    if (!hst) st = 1;
    if (st == 0) return mxl_tpl_terr(c, TE_VALUE, "slice step cannot be zero") == 0;
    if (obj.t == TV_UNDEF) return undef_error(c, obj) == 0;
    if (obj.t == TV_LIST) {
        int64_t len = (int64_t)obj.u.l->n, a, b;
        slice_indices(len, hs, s, he, e, st, &a, &b);
        tlist *l = mxl_tpl_tlist_new(c, 0);
        if (!l) return false;
        l->tuple = obj.u.l->tuple;
        for (int64_t i = a; st > 0 ? i < b : i > b;) {
            if (!mxl_tpl_tlist_push(c, l, obj.u.l->items[i])) return false;
            if (__builtin_add_overflow(i, st, &i)) break; /* huge steps end the slice */
        }
        *out = mxl_tpl_tv_list(l);
        return true;
    }
    if (obj.t == TV_STR) {
        /* code point offsets */
        size_t ncp = mxl_tpl_tutf8_len(obj.u.s, obj.n);
        bool ascii = ncp == obj.n;
        int64_t a, b;
        slice_indices((int64_t)ncp, hs, s, he, e, st, &a, &b);
        if (st == 1) {
            if (b <= a) {
                *out = tv_strn("", 0);
                return true;
            }
            size_t ob = ascii ? (size_t)a : mxl_tpl_tutf8_offset(obj.u.s, obj.n, (size_t)a);
            size_t oe = ascii ? (size_t)b : mxl_tpl_tutf8_offset(obj.u.s, obj.n, (size_t)b);
            *out = tv_strn(obj.u.s + ob, oe - ob);
            return true;
        }
        size_t *offs = mxl_tpl_talloc(c, (ncp + 1) * sizeof(size_t));
        if (!offs) return false;
        size_t pos = 0;
        for (size_t i = 0; i < ncp; i++) {
            offs[i] = pos;
            mxl_tpl_tutf8_next(obj.u.s, obj.n, &pos);
        }
        offs[ncp] = obj.n;
        tbuf buf = {0};
        for (int64_t i = a; st > 0 ? i < b : i > b;) {
            if (!mxl_tpl_tbuf_put(c, &buf, obj.u.s + offs[i], offs[i + 1] - offs[i])) return false;
            if (__builtin_add_overflow(i, st, &i)) break;
        }
        *out = mxl_tpl_tbuf_value(&buf);
        return true;
    }
    if (obj.t == TV_NONE) {
        *out = tv_undef(NULL);
        return true;
    }
    return mxl_tpl_terr(c, TE_TYPE, "'%s' object is not subscriptable", mxl_tpl_tv_type_name(obj)) == 0;
}

/* ---------------------------------------------------------------- arithmetic */

static int binop_undef_check(tctx *c, tv a, tv b) {
    if (a.t == TV_UNDEF) return undef_error(c, a);
    if (b.t == TV_UNDEF) return undef_error(c, b);
    return 0;
}

static bool num_result(tctx *c, const char *op, tv a, tv b, tv *out) {
    bool fl = a.t == TV_FLOAT || b.t == TV_FLOAT;
    int64_t x = a.t == TV_BOOL ? a.u.b : a.u.i, y = b.t == TV_BOOL ? b.u.b : b.u.i;
    double fx = mxl_tpl_tv_as_double(a), fy = mxl_tpl_tv_as_double(b);
    int64_t r;
    switch (op[0]) {
    case '+':
        if (fl) *out = tv_float(fx + fy);
        else if (__builtin_add_overflow(x, y, &r)) return mxl_tpl_terr(c, TE_VALUE, "integer overflow") == 0;
        else *out = tv_int(r);
        return true;
    case '-':
        if (fl) *out = tv_float(fx - fy);
        else if (__builtin_sub_overflow(x, y, &r)) return mxl_tpl_terr(c, TE_VALUE, "integer overflow") == 0;
        else *out = tv_int(r);
        return true;
    case '*':
        if (op[1] == '*') {
            if (!fl && y >= 0) {
                int64_t acc = 1, base = x;
                int64_t e = y;
                while (e > 0) {
                    if (e & 1) {
                        if (__builtin_mul_overflow(acc, base, &acc))
                            return mxl_tpl_terr(c, TE_VALUE, "integer overflow") == 0;
                    }
                    e >>= 1;
                    if (e && __builtin_mul_overflow(base, base, &base))
                        return mxl_tpl_terr(c, TE_VALUE, "integer overflow") == 0;
                }
                *out = tv_int(acc);
            } else {
                if (fx == 0.0 && fy < 0)
                    return mxl_tpl_terr(c, TE_VALUE, "0.0 cannot be raised to a negative power") == 0;
                *out = tv_float(pow(fx, fy));
            }
            return true;
        }
        if (fl) *out = tv_float(fx * fy);
        else if (__builtin_mul_overflow(x, y, &r)) return mxl_tpl_terr(c, TE_VALUE, "integer overflow") == 0;
        else *out = tv_int(r);
        return true;
    case '/':
        if (op[1] == '/') {
            if (fl) {
                if (fy == 0.0) return mxl_tpl_terr(c, TE_VALUE, "float floor division by zero") == 0;
                *out = tv_float(floor(fx / fy));
            } else {
                if (y == 0) return mxl_tpl_terr(c, TE_VALUE, "integer division or modulo by zero") == 0;
                if (x == INT64_MIN && y == -1) return mxl_tpl_terr(c, TE_VALUE, "integer overflow") == 0;
                int64_t q = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
                *out = tv_int(q);
            }
            return true;
        }
        if (fy == 0.0) return mxl_tpl_terr(c, TE_VALUE, "division by zero") == 0;
        *out = tv_float(fx / fy);
        return true;
    case '%':
        if (fl) {
            if (fy == 0.0) return mxl_tpl_terr(c, TE_VALUE, "float modulo") == 0;
            double m = fmod(fx, fy);
            if (m != 0.0 && ((m < 0) != (fy < 0))) m += fy;
            *out = tv_float(m);
        } else {
            if (y == 0) return mxl_tpl_terr(c, TE_VALUE, "integer division or modulo by zero") == 0;
            if (y == -1) {
                *out = tv_int(0);
                return true;
            }
            int64_t m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            *out = tv_int(m);
        }
        return true;
    }
    return mxl_tpl_terr(c, TE_TYPE, "unsupported operator %s", op) == 0;
}

static bool repeat_seq(tctx *c, tv seq, int64_t times, tv *out) {
    if (times < 0) times = 0;
    if (seq.t == TV_STR) {
        uint64_t total;
        if (mxl_mul_u64(seq.n, (uint64_t)times, &total) || total > c->max_output)
            return mxl_tpl_terr(c, TE_BUDGET, "string repetition exceeds the output budget") == 0;
        tbuf b = {0};
        for (int64_t i = 0; i < times; i++)
            if (!mxl_tpl_tbuf_put(c, &b, seq.u.s, seq.n)) return false;
        *out = mxl_tpl_tbuf_value(&b);
        return true;
    }
    uint64_t total;
    if (mxl_mul_u64(seq.u.l->n, (uint64_t)times, &total) || total > c->max_output / 16)
        return mxl_tpl_terr(c, TE_BUDGET, "list repetition exceeds the budget") == 0;
    if (!mxl_tpl_tfuel(c, total)) return false;
    tlist *l = mxl_tpl_tlist_new(c, (size_t)total);
    if (!l) return false;
    l->tuple = seq.u.l->tuple;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++) l->items[l->n++] = seq.u.l->items[k];
    *out = mxl_tpl_tv_list(l);
    return true;
}

static bool binop(tctx *c, const char *op, tv a, tv b, tv *out) {
    if (op[0] == '~') {
        tbuf buf = {0};
        if (!mxl_tpl_tv_str_append(c, &buf, a) || !mxl_tpl_tv_str_append(c, &buf, b)) return false;
        *out = mxl_tpl_tbuf_value(&buf);
        return true;
    }
    if (op[0] == '%' && a.t == TV_STR) {
        if (b.t == TV_UNDEF) return undef_error(c, b) == 0;
        return mxl_tpl_tfmt_percent(c, a, b, out);
    }
    if (binop_undef_check(c, a, b)) return false;
    if (mxl_tpl_tv_is_number(a) && mxl_tpl_tv_is_number(b)) return num_result(c, op, a, b, out);
    if (op[0] == '+' && a.t == TV_STR && b.t == TV_STR) {
        if (a.safe != b.safe) {
            /* Markup + str escapes the plain side (markupsafe's __add__ / __radd__) */
            if (!a.safe && !mxl_tpl_thtml_escape(c, a, &a)) return false;
            if (!b.safe && !mxl_tpl_thtml_escape(c, b, &b)) return false;
        }
        bool safe = a.safe;
        tbuf buf = {0};
        if (!mxl_tpl_tbuf_put(c, &buf, a.u.s, a.n) || !mxl_tpl_tbuf_put(c, &buf, b.u.s, b.n)) return false;
        *out = mxl_tpl_tbuf_value(&buf);
        out->safe = safe;
        return true;
    }
    if (op[0] == '+' && a.t == TV_LIST && b.t == TV_LIST && a.u.l->tuple == b.u.l->tuple) {
        tlist *l = mxl_tpl_tlist_new(c, a.u.l->n + b.u.l->n);
        if (!l) return false;
        l->tuple = a.u.l->tuple;
        if (!mxl_tpl_tfuel(c, l->cap)) return false;
        for (size_t i = 0; i < a.u.l->n; i++) l->items[l->n++] = a.u.l->items[i];
        for (size_t i = 0; i < b.u.l->n; i++) l->items[l->n++] = b.u.l->items[i];
        *out = mxl_tpl_tv_list(l);
        return true;
    }
    if (op[0] == '*' && op[1] == 0) {
        if ((a.t == TV_STR || a.t == TV_LIST) && (b.t == TV_INT || b.t == TV_BOOL))
            return repeat_seq(c, a, b.t == TV_INT ? b.u.i : b.u.b, out);
        if ((b.t == TV_STR || b.t == TV_LIST) && (a.t == TV_INT || a.t == TV_BOOL))
            return repeat_seq(c, b, a.t == TV_INT ? a.u.i : a.u.b, out);
        if (a.t == TV_STR || b.t == TV_STR)
            return mxl_tpl_terr(c, TE_TYPE, "can't multiply sequence by non-int of type '%s'",
                        mxl_tpl_tv_type_name(a.t == TV_STR ? b : a)) == 0;
    }
    if (op[0] == '+' && (a.t == TV_STR || a.t == TV_LIST))
        return mxl_tpl_terr(c, TE_TYPE, "can only concatenate %s (not \"%s\") to %s", mxl_tpl_tv_type_name(a),
                    mxl_tpl_tv_type_name(b), mxl_tpl_tv_type_name(a)) == 0;
    return mxl_tpl_terr(c, TE_TYPE, "unsupported operand type(s) for %s: '%s' and '%s'", op, mxl_tpl_tv_type_name(a),
                mxl_tpl_tv_type_name(b)) == 0;
}

static bool contains(tctx *c, tv item, tv container, bool *out) {
    switch (container.t) {
    case TV_UNDEF:
        *out = false;
        return true;
    case TV_STR:
        if (item.t == TV_UNDEF) return undef_error(c, item) == 0;
        if (item.t != TV_STR)
            return mxl_tpl_terr(c, TE_TYPE, "'in <string>' requires string as left operand, not %s",
                        mxl_tpl_tv_type_name(item)) == 0;
        *out = item.n == 0 || memmem(container.u.s, container.n, item.u.s, item.n) != NULL;
        return true;
    case TV_LIST:
        *out = false;
        for (size_t i = 0; i < container.u.l->n; i++)
            if (mxl_tpl_tv_equal(container.u.l->items[i], item)) {
                *out = true;
                break;
            }
        return mxl_tpl_tfuel(c, container.u.l->n / 8);
    case TV_DICT:
        if (container.u.d->ns) break;
        *out = mxl_tpl_tdict_get(container.u.d, item) != NULL;
        return true;
    default: break;
    }
    return mxl_tpl_terr(c, TE_TYPE, "argument of type '%s' is not iterable", mxl_tpl_tv_type_name(container)) == 0;
}

static bool compare_op(tctx *c, const char *op, tv a, tv b, bool *out) {
    if (!strcmp(op, "==")) *out = mxl_tpl_tv_equal(a, b);
    else if (!strcmp(op, "!=")) *out = !mxl_tpl_tv_equal(a, b);
    else if (!strcmp(op, "in")) return contains(c, a, b, out);
    else if (!strcmp(op, "ni")) {
        if (!contains(c, a, b, out)) return false;
        *out = !*out;
    } else {
        int r = mxl_tpl_tv_compare(c, a, b);
        if (r == -2) return false;
        if (!strcmp(op, "<")) *out = r < 0;
        else if (!strcmp(op, ">")) *out = r > 0;
        else if (!strcmp(op, "<=")) *out = r <= 0;
        else *out = r >= 0;
    }
    return true;
}

/* ---------------------------------------------------------------- calls */

static bool eval_args(tctx *c, const tnode *n, tframe *f, tv **args, const char ***kwn, tv **kwv) {
    *args = NULL;
    *kwv = NULL;
    *kwn = n->kwnames;
    if (n->items.n) {
        *args = mxl_tpl_talloc(c, n->items.n * sizeof(tv));
        if (!*args) return false;
        for (size_t i = 0; i < n->items.n; i++)
            if (!mxl_tpl_teval(c, n->items.v[i], f, &(*args)[i])) return false;
    }
    if (n->kwvals.n) {
        *kwv = mxl_tpl_talloc(c, n->kwvals.n * sizeof(tv));
        if (!*kwv) return false;
        for (size_t i = 0; i < n->kwvals.n; i++)
            if (!mxl_tpl_teval(c, n->kwvals.v[i], f, &(*kwv)[i])) return false;
    }
    return true;
}

static int render_capture(tctx *c, const tnode_list *body, tframe *f, tv *out) {
    tbuf buf = {0};
    tbuf *saved = c->out;
    c->out = &buf;
    int r = mxl_tpl_trender_body(c, body, f);
    c->out = saved;
    *out = mxl_tpl_tbuf_value(&buf);
    return r;
}

static bool call_macro(tctx *c, tfunc *fn, tv *args, size_t nargs, const char **kwn, tv *kwv,
                       size_t nkw, tv caller, tv *out) {
    const tnode *m = fn->node;
    if (c->calls >= c->max_depth)
        return mxl_tpl_terr(c, TE_BUDGET, "maximum call depth (%d) exceeded in macro '%s'", c->max_depth,
                    fn->name ? fn->name : "caller") == 0;
    if (nargs > m->n_params)
        return mxl_tpl_terr(c, TE_TYPE, "macro '%s' takes not more than %zu argument(s)",
                    fn->name ? fn->name : "caller", m->n_params) == 0;
    tframe *mf = frame_new(c, fn->closure);
    if (!mf) return false;
    for (size_t k = 0; k < nkw; k++) {
        size_t p;
        for (p = 0; p < m->n_params; p++)
            if (!strcmp(m->params[p], kwn[k])) break;
        if (p == m->n_params) {
            if (!strcmp(kwn[k], "caller") && fn->kind == TF_MACRO) {
                caller = kwv[k];
                continue;
            }
            return mxl_tpl_terr(c, TE_TYPE, "macro '%s' takes no keyword argument '%s'",
                        fn->name ? fn->name : "caller", kwn[k]) == 0;
        }
        if (p < nargs)
            return mxl_tpl_terr(c, TE_TYPE, "macro '%s' got multiple values for argument '%s'",
                        fn->name ? fn->name : "caller", kwn[k]) == 0;
    }
    for (size_t p = 0; p < m->n_params; p++) {
        tv v;
        bool have = false;
        if (p < nargs) {
            v = args[p];
            have = true;
        } else {
            for (size_t k = 0; k < nkw; k++)
                if (!strcmp(m->params[p], kwn[k])) {
                    v = kwv[k];
                    have = true;
                }
        }
        if (!have) {
            const tnode *def = m->keys.v[p];
            if (def->kind == N_CONST && def->neg) {
                v = tv_undef(m->params[p]);
            } else if (!mxl_tpl_teval(c, def, mf, &v)) {
                return false;
            }
        }
        if (!frame_set(c, mf, m->params[p], strlen(m->params[p]), v)) return false;
    }
    if (caller.t == TV_FUNC && !frame_set(c, mf, "caller", 6, caller)) return false;
    c->calls++;
    int r = render_capture(c, &m->body, mf, out);
    c->calls--;
    return r == R_OK;
}

bool mxl_tpl_tcall_value(tctx *c, tv fnv, tv *args, size_t nargs, const char **kwn, tv *kwv, size_t nkw,
                 tv *out) {
    if (fnv.t == TV_UNDEF) return undef_error(c, fnv) == 0;
    if (fnv.t != TV_FUNC) return mxl_tpl_terr(c, TE_TYPE, "'%s' object is not callable", mxl_tpl_tv_type_name(fnv)) == 0;
    tfunc *fn = fnv.u.fn;
    switch (fn->kind) {
    case TF_MACRO: return call_macro(c, fn, args, nargs, kwn, kwv, nkw, tv_undef(NULL), out);
    case TF_CALLER: return call_macro(c, fn, args, nargs, kwn, kwv, nkw, tv_undef(NULL), out);
    case TF_BUILTIN: return mxl_tpl_tglobal_call(c, fn->name, args, nargs, kwn, kwv, nkw, out);
    case TF_METHOD: return mxl_tpl_tmethod_call(c, fn->self, fn->name, args, nargs, kwn, kwv, nkw, out);
    case TF_LOOP_CYCLE:
        if (nargs == 0) return mxl_tpl_terr(c, TE_TYPE, "no items for cycling given") == 0;
        *out = args[fn->self.u.loop->index0 % (int64_t)nargs];
        return true;
    }
    return false;
}

static bool eval_call(tctx *c, const tnode *n, tframe *f, tv *out) {
    tv fnv;
    tv *args;
    const char **kwn;
    tv *kwv;
    if (n->a->kind == N_GETATTR) {
        tv obj;
        if (!mxl_tpl_teval(c, n->a->a, f, &obj)) return false;
        bool unsafe = false;
        if ((obj.t == TV_STR || obj.t == TV_LIST || (obj.t == TV_DICT && !obj.u.d->ns)) &&
            n->a->s[0] != '_' && mxl_tpl_tmethod_exists(obj, n->a->s, n->a->n, &unsafe)) {
            if (unsafe)
                return mxl_tpl_terr(c, TE_SECURITY, "access to attribute '%s' of '%s' object is unsafe.",
                            n->a->s, mxl_tpl_tv_type_name(obj)) == 0;
            if (!eval_args(c, n, f, &args, &kwn, &kwv)) return false;
            return mxl_tpl_tmethod_call(c, obj, n->a->s, args, n->items.n, kwn, kwv, n->kwvals.n, out);
        }
        if (!mxl_tpl_tgetattr(c, obj, n->a->s, n->a->n, &fnv)) return false;
    } else if (!mxl_tpl_teval(c, n->a, f, &fnv)) {
        return false;
    }
    if (!eval_args(c, n, f, &args, &kwn, &kwv)) return false;
    return mxl_tpl_tcall_value(c, fnv, args, n->items.n, kwn, kwv, n->kwvals.n, out);
}

/* ---------------------------------------------------------------- expressions */

static bool eval_filter(tctx *c, const tnode *n, tframe *f, tv in, tv *out) {
    tv *args;
    const char **kwn;
    tv *kwv;
    if (!eval_args(c, n, f, &args, &kwn, &kwv)) return false;
    return mxl_tpl_tfilter_apply(c, n->s, in, args, n->items.n, kwn, kwv, n->kwvals.n, out);
}

bool mxl_tpl_teval(tctx *c, const tnode *n, tframe *f, tv *out) {
    if (c->ekind != TE_NONE) return false;
    if (!mxl_tpl_tfuel(c, 1)) return false;
    if (++c->depth > MAX_EVAL_DEPTH(c)) {
        c->depth--;
        return mxl_tpl_terr(c, TE_BUDGET, "expression nested too deeply") == 0;
    }
    int saved_line = c->line;
    c->line = n->line;
    bool ok = true;
    switch (n->kind) {
    case N_CONST: *out = n->val; break;
    case N_NAME: ok = lookup(c, f, n->s, n->n, out); break;
    case N_GETATTR: {
        tv obj;
        ok = mxl_tpl_teval(c, n->a, f, &obj) && mxl_tpl_tgetattr(c, obj, n->s, n->n, out);
        break;
    }
    case N_GETITEM: {
        tv obj, key;
        ok = mxl_tpl_teval(c, n->a, f, &obj) && mxl_tpl_teval(c, n->b, f, &key) && mxl_tpl_tgetitem(c, obj, key, out);
        break;
    }
    case N_SLICE: ok = eval_slice(c, n, f, out); break;
    case N_CALL: ok = eval_call(c, n, f, out); break;
    case N_FILTER: {
        tv in;
        ok = mxl_tpl_teval(c, n->a, f, &in) && eval_filter(c, n, f, in, out);
        break;
    }
    case N_TEST: {
        tv in;
        if (!mxl_tpl_teval(c, n->a, f, &in)) {
            ok = false;
            break;
        }
        tv *args;
        const char **kwn;
        tv *kwv;
        bool r = false;
        ok = eval_args(c, n, f, &args, &kwn, &kwv) && mxl_tpl_ttest_apply(c, n->s, in, args, n->items.n, &r);
        if (ok) *out = tv_bool(n->neg ? !r : r);
        break;
    }
    case N_UNARY: {
        tv v;
        if (!mxl_tpl_teval(c, n->a, f, &v)) {
            ok = false;
            break;
        }
        if (v.t == TV_UNDEF) ok = undef_error(c, v) == 0;
        else if (v.t == TV_INT) {
            if (n->op[0] == '-' && v.u.i == INT64_MIN) ok = mxl_tpl_terr(c, TE_VALUE, "integer overflow") == 0;
            else *out = tv_int(n->op[0] == '-' ? -v.u.i : v.u.i);
        } else if (v.t == TV_BOOL) *out = tv_int(n->op[0] == '-' ? -(int64_t)v.u.b : v.u.b);
        else if (v.t == TV_FLOAT) *out = tv_float(n->op[0] == '-' ? -v.u.f : v.u.f);
        else ok = mxl_tpl_terr(c, TE_TYPE, "bad operand type for unary %c: '%s'", n->op[0], mxl_tpl_tv_type_name(v)) == 0;
        break;
    }
    case N_BINARY: {
        tv a, b;
        ok = mxl_tpl_teval(c, n->a, f, &a) && mxl_tpl_teval(c, n->b, f, &b) && binop(c, n->op, a, b, out);
        break;
    }
    case N_AND: {
        tv a;
        if (!mxl_tpl_teval(c, n->a, f, &a)) ok = false;
        else if (!mxl_tpl_tv_truthy(a)) *out = a;
        else ok = mxl_tpl_teval(c, n->b, f, out);
        break;
    }
    case N_OR: {
        tv a;
        if (!mxl_tpl_teval(c, n->a, f, &a)) ok = false;
        else if (mxl_tpl_tv_truthy(a)) *out = a;
        else ok = mxl_tpl_teval(c, n->b, f, out);
        break;
    }
    case N_NOT: {
        tv a;
        ok = mxl_tpl_teval(c, n->a, f, &a);
        if (ok) *out = tv_bool(!mxl_tpl_tv_truthy(a));
        break;
    }
    case N_COMPARE: {
        tv left;
        if (!mxl_tpl_teval(c, n->a, f, &left)) {
            ok = false;
            break;
        }
        bool r = true;
        for (size_t i = 0; i < n->items.n && r; i++) {
            tv right;
            if (!mxl_tpl_teval(c, n->items.v[i], f, &right) || !compare_op(c, n->cmp_ops[i], left, right, &r)) {
                ok = false;
                break;
            }
            left = right;
        }
        if (ok) *out = tv_bool(r);
        break;
    }
    case N_CONDEXPR: {
        tv cond;
        if (!mxl_tpl_teval(c, n->a, f, &cond)) ok = false;
        else if (mxl_tpl_tv_truthy(cond)) ok = mxl_tpl_teval(c, n->b, f, out);
        else if (n->c) ok = mxl_tpl_teval(c, n->c, f, out);
        else *out = tv_undef(NULL);
        break;
    }
    case N_LIST:
    case N_TUPLE: {
        tlist *l = mxl_tpl_tlist_new(c, n->items.n);
        if (!l) {
            ok = false;
            break;
        }
        l->tuple = n->kind == N_TUPLE;
        for (size_t i = 0; i < n->items.n && ok; i++) ok = mxl_tpl_teval(c, n->items.v[i], f, &l->items[l->n++]);
        *out = mxl_tpl_tv_list(l);
        break;
    }
    case N_DICT: {
        tdict *d = mxl_tpl_tdict_new(c, n->items.n);
        if (!d) {
            ok = false;
            break;
        }
        for (size_t i = 0; i < n->items.n && ok; i++) {
            tv k, v;
            ok = mxl_tpl_teval(c, n->keys.v[i], f, &k) && mxl_tpl_teval(c, n->items.v[i], f, &v);
            if (ok && (k.t == TV_LIST && !k.u.l->tuple)) ok = mxl_tpl_terr(c, TE_TYPE, "unhashable type: 'list'") == 0;
            else if (ok && k.t == TV_DICT) ok = mxl_tpl_terr(c, TE_TYPE, "unhashable type: 'dict'") == 0;
            if (ok) ok = mxl_tpl_tdict_set(c, d, k, v);
        }
        *out = mxl_tpl_tv_dict(d);
        break;
    }
    default: ok = mxl_tpl_terr(c, TE_OTHER, "internal: statement node in expression") == 0;
    }
    c->depth--;
    if (ok && c->ekind == TE_NONE) c->line = saved_line;
    return ok && c->ekind == TE_NONE;
}

/* ---------------------------------------------------------------- statements */

static bool assign(tctx *c, const tnode *target, tframe *f, tv v) {
    if (target->kind == N_NAME) return frame_set(c, f, target->s, target->n, v);
    if (target->kind == N_GETATTR) {
        tv ns;
        if (!lookup(c, f, target->a->s, target->a->n, &ns)) return false;
        if (ns.t != TV_DICT || !ns.u.d->ns)
            return mxl_tpl_terr(c, TE_RUNTIME, "cannot assign attribute on non-namespace object") == 0;
        bool ok;
        tv key = mxl_tpl_tv_str_copy(c, target->s, target->n, &ok);
        return ok && mxl_tpl_tdict_set(c, ns.u.d, key, v);
    }
    /* tuple unpacking */
    tlist *l;
    if (v.t == TV_UNDEF) return undef_error(c, v) == 0;
    if (!mxl_tpl_titer_list(c, v, &l)) return false;
    if (l->n != target->items.n)
        return mxl_tpl_terr(c, TE_VALUE, "%s values to unpack (expected %zu, got %zu)",
                    l->n < target->items.n ? "not enough" : "too many", target->items.n, l->n) == 0;
    for (size_t i = 0; i < l->n; i++)
        if (!assign(c, target->items.v[i], f, l->items[i])) return false;
    return true;
}

static int exec_for(tctx *c, const tnode *n, tframe *f) {
    tv it;
    if (!mxl_tpl_teval(c, n->a, f, &it)) return R_ERR;
    tlist *items;
    if (!mxl_tpl_titer_list(c, it, &items)) return R_ERR;
    tframe *lf = frame_new(c, f);
    if (!lf) return R_ERR;
    if (n->b) {
        tlist *kept = mxl_tpl_tlist_new(c, 0);
        if (!kept) return R_ERR;
        for (size_t i = 0; i < items->n; i++) {
            tv cond;
            if (!mxl_tpl_tfuel(c, 1) || !assign(c, n->target, lf, items->items[i]) || !mxl_tpl_teval(c, n->b, lf, &cond))
                return R_ERR;
            if (mxl_tpl_tv_truthy(cond) && !mxl_tpl_tlist_push(c, kept, items->items[i])) return R_ERR;
        }
        items = kept;
    }
    if (items->n == 0) return mxl_tpl_trender_body(c, &n->else_body, f);
    tloop *L = mxl_tpl_talloc(c, sizeof *L);
    if (!L) return R_ERR;
    L->items = items;
    L->length = (int64_t)items->n;
    L->depth = 1; /* only recursive loops (unsupported) go deeper */
    tv lv = {0};
    lv.t = TV_LOOP;
    lv.u.loop = L;
    for (size_t i = 0; i < items->n; i++) {
        if (!mxl_tpl_tfuel(c, 1)) return R_ERR;
        L->index0 = (int64_t)i;
        /* Jinja2: assignments in the body do not carry over to the next iteration */
        tframe *itf = frame_new(c, f);
        if (!itf || !assign(c, n->target, itf, items->items[i]) || !frame_set(c, itf, "loop", 4, lv)) return R_ERR;
        int r = mxl_tpl_trender_body(c, &n->body, itf);
        if (r == R_ERR) return R_ERR;
        if (r == R_BREAK) break;
    }
    return R_OK;
}

static int exec_stmt(tctx *c, const tnode *n, tframe *f) {
    if (!mxl_tpl_tfuel(c, 1)) return R_ERR;
    c->line = n->line;
    switch (n->kind) {
    case N_TEXT: return mxl_tpl_tbuf_put(c, c->out, n->s, n->n) ? R_OK : R_ERR;
    case N_OUTPUT: {
        tv v;
        if (!mxl_tpl_teval(c, n->a, f, &v)) return R_ERR;
        return mxl_tpl_tv_str_append(c, c->out, v) ? R_OK : R_ERR;
    }
    case N_IF: {
        tv cond;
        if (!mxl_tpl_teval(c, n->a, f, &cond)) return R_ERR;
        return mxl_tpl_trender_body(c, mxl_tpl_tv_truthy(cond) ? &n->body : &n->else_body, f);
    }
    case N_FOR: return exec_for(c, n, f);
    case N_SET: {
        tv v;
        if (n->a) {
            if (!mxl_tpl_teval(c, n->a, f, &v)) return R_ERR;
        } else {
            int r = render_capture(c, &n->body, f, &v);
            if (r != R_OK) return r == R_ERR ? R_ERR : r;
            if (n->c) {
                /* apply the filter chain innermost first */
                const tnode *chain[64];
                size_t k = 0;
                for (const tnode *x = n->c; x && k < 64; x = x->a) chain[k++] = x;
                while (k-- > 0)
                    if (!eval_filter(c, chain[k], f, v, &v)) return R_ERR;
            }
        }
        return assign(c, n->target, f, v) ? R_OK : R_ERR;
    }
    case N_MACRO: {
        tfunc *fn = mxl_tpl_talloc(c, sizeof *fn);
        if (!fn) return R_ERR;
        fn->kind = TF_MACRO;
        fn->name = n->s;
        fn->node = n;
        fn->closure = f;
        tv v = {0};
        v.t = TV_FUNC;
        v.u.fn = fn;
        return frame_set(c, f, n->s, n->n, v) ? R_OK : R_ERR;
    }
    case N_CALLBLOCK: {
        tfunc *cf = mxl_tpl_talloc(c, sizeof *cf);
        if (!cf) return R_ERR;
        cf->kind = TF_CALLER;
        cf->name = "caller";
        cf->node = n;
        cf->closure = f;
        tv callerv = {0};
        callerv.t = TV_FUNC;
        callerv.u.fn = cf;
        const tnode *call = n->a;
        tv fnv, *args, *kwv, res;
        const char **kwn;
        if (!mxl_tpl_teval(c, call->a, f, &fnv) || !eval_args(c, call, f, &args, &kwn, &kwv)) return R_ERR;
        if (fnv.t == TV_FUNC && fnv.u.fn->kind == TF_MACRO) {
            if (!call_macro(c, fnv.u.fn, args, call->items.n, kwn, kwv, call->kwvals.n, callerv, &res))
                return R_ERR;
        } else if (!mxl_tpl_tcall_value(c, fnv, args, call->items.n, kwn, kwv, call->kwvals.n, &res)) {
            return R_ERR;
        }
        return mxl_tpl_tv_str_append(c, c->out, res) ? R_OK : R_ERR;
    }
    case N_FILTERBLOCK: {
        tv v;
        int r = render_capture(c, &n->body, f, &v);
        if (r != R_OK) return r;
        const tnode *chain[64];
        size_t k = 0;
        for (const tnode *x = n->c; x && k < 64; x = x->a) chain[k++] = x;
        while (k-- > 0)
            if (!eval_filter(c, chain[k], f, v, &v)) return R_ERR;
        return mxl_tpl_tv_str_append(c, c->out, v) ? R_OK : R_ERR;
    }
    case N_GENERATION: return mxl_tpl_trender_body(c, &n->body, f);
    case N_WITH: {
        tframe *wf = frame_new(c, f);
        if (!wf) return R_ERR;
        for (size_t i = 0; i < n->items.n; i++) {
            tv v;
            const tnode *as = n->items.v[i];
            if (!mxl_tpl_teval(c, as->a, f, &v) || !assign(c, as->target, wf, v)) return R_ERR;
        }
        return mxl_tpl_trender_body(c, &n->body, wf);
    }
    case N_BREAK: return R_BREAK;
    case N_CONTINUE: return R_CONTINUE;
    default: return mxl_tpl_terr(c, TE_OTHER, "internal: expression node as statement");
    }
}

int mxl_tpl_trender_body(tctx *c, const tnode_list *body, tframe *f) {
    if (++c->depth > MAX_EVAL_DEPTH(c)) {
        c->depth--;
        return mxl_tpl_terr(c, TE_BUDGET, "blocks nested too deeply");
    }
    int r = R_OK;
    for (size_t i = 0; i < body->n; i++) {
        r = exec_stmt(c, body->v[i], f);
        if (r != R_OK) break;
    }
    c->depth--;
    if (c->ekind != TE_NONE) return R_ERR;
    return r;
}
