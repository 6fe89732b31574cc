/* tpl_tests.c - Jinja2 tests (`x is defined`, `x is string`, `x is divisibleby 3`, ...) with the
 * results Jinja2 gives for Python values (bool counts as a number, Undefined is iterable, dicts
 * are sequences and mappings, namespaces are neither). */
#include <stdio.h>
#include <string.h>
#include <utf8proc.h>

#include "template/tpl_internal.h"

static const char *const TESTS[] = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number",
    "string", "mapping", "iterable", "sequence", "callable", "equalto", "eq", "==", "ne", "!=",
    "lt", "<", "lessthan", "le", "<=", "gt", ">", "greaterthan", "ge", ">=", "in", "odd", "even",
    "divisibleby", "lower", "upper", "sameas", "escaped", "filter", "test", NULL};

bool mxl_tpl_ttest_exists(const char *name) {
    for (int i = 0; TESTS[i]; i++)
        if (!strcmp(TESTS[i], name)) return true;
    return false;
}

static bool need_arg(tctx *c, const char *name, size_t nargs) {
    if (nargs < 1) return mxl_tpl_terr(c, TE_TYPE, "test '%s' needs an argument", name) == 0;
    return true;
}

static bool int_of(tctx *c, const char *name, tv v, int64_t *out) {
    if (v.t == TV_INT) *out = v.u.i;
    else if (v.t == TV_BOOL) *out = v.u.b;
    else if (v.t == TV_UNDEF) return mxl_tpl_terr(c, TE_UNDEFINED, "undefined value in test '%s'", name) == 0;
    else return mxl_tpl_terr(c, TE_TYPE, "test '%s' needs an integer, got %s", name, mxl_tpl_tv_type_name(v)) == 0;
    return true;
}

static bool all_case(tv v, bool upper) {
    /* Python str.islower/isupper: at least one cased char and none of the other case */
    size_t pos = 0;
    bool any = false;
    while (pos < v.n) {
        int32_t cp = mxl_tpl_tutf8_next(v.u.s, v.n, &pos);
        utf8proc_category_t cat = utf8proc_category(cp);
        bool lo = cat == UTF8PROC_CATEGORY_LL, up = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT;
        if (upper ? lo : up) return false;
        if (upper ? up : lo) any = true;
    }
    return any;
}

bool mxl_tpl_ttest_apply(tctx *c, const char *name, tv v, tv *args, size_t nargs, bool *out) {
#define IS(x) (!strcmp(name, x))
    if (IS("defined")) *out = v.t != TV_UNDEF;
    else if (IS("undefined")) *out = v.t == TV_UNDEF;
    else if (IS("none")) *out = v.t == TV_NONE;
    else if (IS("boolean")) *out = v.t == TV_BOOL;
    else if (IS("false")) *out = v.t == TV_BOOL && !v.u.b;
    else if (IS("true")) *out = v.t == TV_BOOL && v.u.b;
    else if (IS("integer")) *out = v.t == TV_INT;
    else if (IS("float")) *out = v.t == TV_FLOAT;
    else if (IS("number")) *out = v.t == TV_INT || v.t == TV_FLOAT || v.t == TV_BOOL;
    else if (IS("string")) *out = v.t == TV_STR;
    else if (IS("mapping")) *out = v.t == TV_DICT && !v.u.d->ns;
    else if (IS("iterable"))
        *out = v.t == TV_STR || v.t == TV_LIST || (v.t == TV_DICT && !v.u.d->ns) || v.t == TV_UNDEF;
    else if (IS("sequence"))
        *out = v.t == TV_STR || v.t == TV_LIST || (v.t == TV_DICT && !v.u.d->ns) || v.t == TV_UNDEF;
    else if (IS("callable")) *out = v.t == TV_FUNC;
    else if (IS("equalto") || IS("eq") || IS("==")) {
        if (!need_arg(c, name, nargs)) return false;
        *out = mxl_tpl_tv_equal(v, args[0]);
    } else if (IS("ne") || IS("!=")) {
        if (!need_arg(c, name, nargs)) return false;
        *out = !mxl_tpl_tv_equal(v, args[0]);
    } else if (IS("lt") || IS("<") || IS("lessthan") || IS("le") || IS("<=") || IS("gt") || IS(">") ||
               IS("greaterthan") || IS("ge") || IS(">=")) {
        if (!need_arg(c, name, nargs)) return false;
        int r = mxl_tpl_tv_compare(c, v, args[0]);
        if (r == -2) return false;
        if (IS("lt") || IS("<") || IS("lessthan")) *out = r < 0;
        else if (IS("le") || IS("<=")) *out = r <= 0;
        else if (IS("gt") || IS(">") || IS("greaterthan")) *out = r > 0;
        else *out = r >= 0;
    } else if (IS("in")) {
        if (!need_arg(c, name, nargs)) return false;
        tv seq = args[0];
        if (seq.t == TV_STR) {
            if (v.t != TV_STR)
                return mxl_tpl_terr(c, TE_TYPE, "'in <string>' requires string as left operand, not %s", mxl_tpl_tv_type_name(v)) == 0;
            *out = v.n == 0 || memmem(seq.u.s, seq.n, v.u.s, v.n) != NULL;
        } else if (seq.t == TV_LIST) {
            *out = false;
            for (size_t i = 0; i < seq.u.l->n && !*out; i++) *out = mxl_tpl_tv_equal(seq.u.l->items[i], v);
        } else if (seq.t == TV_DICT && !seq.u.d->ns) {
            *out = mxl_tpl_tdict_get(seq.u.d, v) != NULL;
        } else if (seq.t == TV_UNDEF) {
            *out = false;
        } else {
            return mxl_tpl_terr(c, TE_TYPE, "argument of type '%s' is not iterable", mxl_tpl_tv_type_name(seq)) == 0;
        }
    } else if (IS("odd") || IS("even")) {
        int64_t x;
        if (!int_of(c, name, v, &x)) return false;
        *out = (x % 2 != 0) == (name[0] == 'o');
    } else if (IS("divisibleby")) {
        int64_t x, d;
        if (!need_arg(c, name, nargs) || !int_of(c, name, v, &x) || !int_of(c, name, args[0], &d)) return false;
        if (d == 0) return mxl_tpl_terr(c, TE_VALUE, "integer division or modulo by zero") == 0;
        *out = d == -1 || x % d == 0;
    } else if (IS("lower") || IS("upper")) {
        if (v.t == TV_UNDEF) *out = false;
        else {
            tv s;
            if (!mxl_tpl_tv_to_str(c, v, &s)) return false;
            *out = all_case(s, name[0] == 'u');
        }
    } else if (IS("sameas")) {
        if (!need_arg(c, name, nargs)) return false;
        tv o = args[0];
        if (v.t != o.t) *out = false;
        else if (v.t == TV_NONE || v.t == TV_UNDEF) *out = true;
        else if (v.t == TV_BOOL) *out = v.u.b == o.u.b;
        else if (v.t == TV_INT) *out = v.u.i == o.u.i;
        else if (v.t == TV_LIST) *out = v.u.l == o.u.l;
        else if (v.t == TV_DICT) *out = v.u.d == o.u.d;
        else if (v.t == TV_STR) *out = v.u.s == o.u.s && v.n == o.n;
        else *out = false;
    } else if (IS("escaped")) {
        *out = false;
    } else if (IS("filter") || IS("test")) {
        if (!need_arg(c, name, nargs)) return false;
        if (args[0].t != TV_STR) *out = false;
        else {
            char nm[64];
            snprintf(nm, sizeof nm, "%.*s", (int)(args[0].n > 60 ? 60 : args[0].n), args[0].u.s);
            *out = IS("test") ? mxl_tpl_ttest_exists(nm) : mxl_tpl_tfilter_exists(nm);
        }
    } else {
        return mxl_tpl_terr(c, TE_RUNTIME, "No test named '%s' found.", name) == 0;
    }
    return true;
#undef IS
}
