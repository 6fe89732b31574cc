/* tpl_globals.c - the global functions a chat template can call: range (capped like Jinja2's
 * sandbox at 100000 items), namespace, dict, raise_exception (fails the render with the
 * template's message) and strftime_now (formats the pinned clock when the caller set one, else
 * the local time, as transformers does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/tpl_internal.h"

#define MAX_RANGE 100000

static tfunc G_RANGE = {.kind = TF_BUILTIN, .name = "range"};
static tfunc G_NAMESPACE = {.kind = TF_BUILTIN, .name = "namespace"};
static tfunc G_DICT = {.kind = TF_BUILTIN, .name = "dict"};
static tfunc G_RAISE = {.kind = TF_BUILTIN, .name = "raise_exception"};
static tfunc G_STRFTIME = {.kind = TF_BUILTIN, .name = "strftime_now"};

bool mxl_tpl_tglobal_lookup(const char *name, size_t n, tv *out) {
    static tfunc *const all[] = {&G_RANGE, &G_NAMESPACE, &G_DICT, &G_RAISE, &G_STRFTIME};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strlen(all[i]->name) == n && memcmp(all[i]->name, name, n) == 0) {
            tv v = {0};
            v.t = TV_FUNC;
            v.u.fn = all[i];
            *out = v;
            return true;
        }
    }
    return false;
}

tv *mxl_tpl_targ(tv *args, size_t nargs, const char **kwn, tv *kwv, size_t nkw, size_t pos,
         const char *name) {
    if (pos < nargs) return &args[pos];
    if (name)
        for (size_t i = 0; i < nkw; i++)
            if (!strcmp(kwn[i], name)) return &kwv[i];
    return NULL;
}

static bool int_arg(tctx *c, tv v, int64_t *out) {
    if (v.t == TV_INT) *out = v.u.i;
    else if (v.t == TV_BOOL) *out = v.u.b;
    else return mxl_tpl_terr(c, TE_TYPE, "'%s' object cannot be interpreted as an integer", mxl_tpl_tv_type_name(v)) == 0;
    return true;
}

static bool g_range(tctx *c, tv *args, size_t nargs, tv *out) {
    int64_t start = 0, stop = 0, step = 1;
    if (nargs == 1) {
        if (!int_arg(c, args[0], &stop)) return false;
    } else if (nargs == 2 || nargs == 3) {
        if (!int_arg(c, args[0], &start) || !int_arg(c, args[1], &stop)) return false;
        if (nargs == 3 && !int_arg(c, args[2], &step)) return false;
    } else {
        return mxl_tpl_terr(c, TE_TYPE, "range expected 1 to 3 arguments, got %zu", nargs) == 0;
    }
    if (step == 0) return mxl_tpl_terr(c, TE_VALUE, "range() arg 3 must not be zero") == 0;
    /* count without overflow */
    int64_t span;
    if (step > 0 ? __builtin_sub_overflow(stop, start, &span) : __builtin_sub_overflow(start, stop, &span))
        return mxl_tpl_terr(c, TE_VALUE, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", MAX_RANGE) == 0;
    uint64_t st = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;
    uint64_t count = span <= 0 ? 0 : ((uint64_t)span + st - 1) / st;
    if (count > MAX_RANGE)
        return mxl_tpl_terr(c, TE_VALUE, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", MAX_RANGE) == 0;
    if (!mxl_tpl_tfuel(c, (uint64_t)count)) return false;
    tlist *l = mxl_tpl_tlist_new(c, (size_t)count);
    if (!l) return false;
    for (int64_t k = 0; k < (int64_t)count; k++) l->items[l->n++] = tv_int(start + k * step);
    *out = mxl_tpl_tv_list(l);
    return true;
}

static bool g_kwdict(tctx *c, tv *args, size_t nargs, const char **kwn, tv *kwv, size_t nkw, bool ns,
                     tv *out) {
    tdict *d = mxl_tpl_tdict_new(c, nkw);
    if (!d) return false;
    d->ns = ns;
    if (nargs > 1) return mxl_tpl_terr(c, TE_TYPE, "expected at most 1 positional argument, got %zu", nargs) == 0;
    if (nargs == 1) {
        tv a = args[0];
        if (a.t == TV_DICT) {
            for (size_t i = 0; i < a.u.d->n; i++)
                if (!mxl_tpl_tdict_set(c, d, a.u.d->keys[i], a.u.d->vals[i])) return false;
        } else if (a.t == TV_LIST) {
            for (size_t i = 0; i < a.u.l->n; i++) {
                tv it = a.u.l->items[i];
                if (it.t != TV_LIST || it.u.l->n != 2)
                    return mxl_tpl_terr(c, TE_VALUE, "dictionary update sequence element #%zu has wrong length", i) == 0;
                if (!mxl_tpl_tdict_set(c, d, it.u.l->items[0], it.u.l->items[1])) return false;
            }
        } else if (a.t != TV_UNDEF) {
            return mxl_tpl_terr(c, TE_TYPE, "'%s' object is not iterable", mxl_tpl_tv_type_name(a)) == 0;
        }
    }
    for (size_t i = 0; i < nkw; i++)
        if (!mxl_tpl_tdict_set(c, d, mxl_tpl_tv_cstr(kwn[i]), kwv[i])) return false;
    *out = mxl_tpl_tv_dict(d);
    return true;
}

static bool g_strftime(tctx *c, tv *args, size_t nargs, tv *out) {
    if (nargs != 1 || args[0].t != TV_STR) return mxl_tpl_terr(c, TE_TYPE, "strftime_now() expects one format string") == 0;
    struct tm tmv;
    time_t t;
    if (c->now_unix != INT64_MIN) {
        t = (time_t)c->now_unix;
        gmtime_r(&t, &tmv);
    } else {
        t = time(NULL);
        localtime_r(&t, &tmv);
    }
    char fmt[256];
    if (args[0].n >= sizeof fmt) return mxl_tpl_terr(c, TE_VALUE, "strftime_now() format too long") == 0;
    memcpy(fmt, args[0].u.s, args[0].n);
    fmt[args[0].n] = 0;
    char buf[1024];
    size_t n = fmt[0] ? strftime(buf, sizeof buf, fmt, &tmv) : 0;
    bool ok;
    *out = mxl_tpl_tv_str_copy(c, buf, n, &ok);
    return ok;
}

bool mxl_tpl_tglobal_call(tctx *c, const char *name, tv *args, size_t nargs, const char **kwn, tv *kwv,
                  size_t nkw, tv *out) {
    if (!strcmp(name, "range")) return g_range(c, args, nargs, out);
    if (!strcmp(name, "namespace")) return g_kwdict(c, args, nargs, kwn, kwv, nkw, true, out);
    if (!strcmp(name, "dict")) return g_kwdict(c, args, nargs, kwn, kwv, nkw, false, out);
    if (!strcmp(name, "raise_exception")) {
        tv *m = mxl_tpl_targ(args, nargs, kwn, kwv, nkw, 0, "message");
        tv s = tv_strn("", 0);
        if (m && !mxl_tpl_tv_to_str(c, *m, &s)) return false;
        mxl_tpl_terr(c, TE_TEMPLATE, "%.*s", (int)(s.n > 380 ? 380 : s.n), s.u.s);
        return false;
    }
    if (!strcmp(name, "strftime_now")) return g_strftime(c, args, nargs, out);
    return mxl_tpl_terr(c, TE_OTHER, "unknown function '%s'", name) == 0;
}
