/* tpl_api.c - public entry points of the template engine: parse (normalise newlines, lex,
 * parse), render (arena per render, budget, error message with the Python exception name) and
 * the chat-level render that assembles transformers' variables. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "template/tpl_internal.h"

mxl_status mxl_template_parse(const char *src, size_t n, const char *name, mxl_template **out,
                              mxl_error *err) {
    *out = NULL;
    if (!name) name = "<template>";
    if (n > MXL_TEMPLATE_MAX_SOURCE)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: template too large (%zu bytes, limit %u)", name, n,
                             MXL_TEMPLATE_MAX_SOURCE);
    mxl_template *t = mxl_calloc(1, sizeof *t);
    if (!t) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", name);
    mxl_arena_init(&t->arena, 64 * 1024);
    t->name = mxl_strdup(name);
    /* Jinja2 normalises \r\n and \r to \n and drops one trailing newline (keep_trailing_newline
     * is off in transformers). */
    t->source = mxl_malloc(n + 1);
    if (!t->name || !t->source) {
        mxl_template_destroy(t);
        return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", name);
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            t->source[o++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            t->source[o++] = src[i];
        }
    }
    if (o && t->source[o - 1] == '\n') o--;
    t->source[o] = 0;
    char msg[300];
    ttoken *toks;
    size_t nt;
    if (!mxl_tpl_tlex(&t->arena, t->source, o, &toks, &nt, msg, sizeof msg) ||
        !mxl_tpl_tparse(&t->arena, toks, nt, &t->root, msg, sizeof msg)) {
        mxl_status st = mxl_error_set(err, MXL_ERR_FORMAT, "%s:%s", name, msg);
        mxl_template_destroy(t);
        return st;
    }
    *out = t;
    return MXL_OK;
}

void mxl_template_destroy(mxl_template *t) {
    if (!t) return;
    mxl_arena_free(&t->arena);
    mxl_free(t->name);
    mxl_free(t->source);
    mxl_free(t);
}

const char *mxl_template_name(const mxl_template *t) { return t ? t->name : NULL; }

static mxl_template_error_kind kind_of(terr_kind k) {
    switch (k) {
    case TE_NONE: return MXL_TEMPLATE_OK;
    case TE_TEMPLATE: return MXL_TEMPLATE_RAISED;
    case TE_UNDEFINED: return MXL_TEMPLATE_UNDEFINED;
    case TE_TYPE: return MXL_TEMPLATE_TYPE;
    case TE_VALUE: return MXL_TEMPLATE_VALUE;
    case TE_SECURITY: return MXL_TEMPLATE_SECURITY;
    case TE_BUDGET: return MXL_TEMPLATE_BUDGET;
    case TE_SYNTAX: return MXL_TEMPLATE_SYNTAX;
    default: return MXL_TEMPLATE_OTHER;
    }
}

/* Converts the JSON variables into the globals frame and renders the template body. */
/* Without a clock pinned by the caller, SOURCE_DATE_EPOCH (the reproducible-builds convention:
 * whole seconds since the epoch) pins strftime_now's, so prompts of templates that print today's
 * date (gpt-oss, Llama 3.1) render the same every day for tests and benchmarks; unset or not a
 * plain integer, the real clock. */
static int64_t env_clock(void) {
    const char *e = getenv("SOURCE_DATE_EPOCH");
    if (!e || !*e) return INT64_MIN;
    char *end;
    errno = 0;
    long long v = strtoll(e, &end, 10);
    return *end || errno || v == INT64_MIN ? INT64_MIN : (int64_t)v;
}

static mxl_status render_with(const mxl_template *t, const json_t *vars,
                              const mxl_template_render_opts *opts, char **out, size_t *out_len,
                              mxl_template_error_kind *kind, mxl_error *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (kind) *kind = MXL_TEMPLATE_OK;
    mxl_arena arena;
    mxl_arena_init(&arena, 64 * 1024);
    tctx c = {0};
    c.arena = &arena;
    c.tpl = t;
    mxl_template_limits lim = opts ? opts->limits : (mxl_template_limits){0};
    c.fuel = lim.max_steps ? lim.max_steps : MXL_TEMPLATE_DEFAULT_MAX_STEPS;
    c.max_depth = lim.max_depth > 0 ? lim.max_depth : MXL_TEMPLATE_DEFAULT_MAX_DEPTH;
    if (c.max_depth > 1000) c.max_depth = 1000;
    c.max_output = lim.max_output ? lim.max_output : MXL_TEMPLATE_DEFAULT_MAX_OUTPUT;
    if (c.max_output > UINT32_MAX - 1) c.max_output = UINT32_MAX - 1;
    c.max_memory = lim.max_memory ? lim.max_memory : MXL_TEMPLATE_DEFAULT_MAX_MEMORY;
    c.now_unix = opts && opts->now_set ? opts->now_unix : env_clock();
    c.line = 1;
    tframe globals = {0}, root = {0};
    root.parent = &globals;
    c.globals = &globals;
    c.root = &root;
    bool ok = true;
    if (vars) {
        if (!json_is_object(vars)) {
            mxl_arena_free(&arena);
            return mxl_error_set(err, MXL_ERR_ARG, "%s: render variables must be a JSON object", t->name);
        }
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)vars, k, v) {
            tv key, val;
            bool kok;
            key = mxl_tpl_tv_str_copy(&c, k, strlen(k), &kok);
            if (!kok || !mxl_tpl_tjson_to_value(&c, v, &val, 0) || !mxl_tpl_tdict_set(&c, &globals.vars, key, val)) {
                ok = false;
                break;
            }
        }
    }
    tbuf outbuf = {0};
    c.out = &outbuf;
    if (ok) ok = mxl_tpl_trender_body(&c, &t->root->body, &root) == 0 && c.ekind == TE_NONE;
    mxl_status st = MXL_OK;
    if (!ok) {
        if (kind) *kind = kind_of(c.ekind);
        st = mxl_error_set(err, c.ekind == TE_NOMEM ? MXL_ERR_NOMEM : MXL_ERR_ARG, "%s:%d: %s: %s", t->name,
                           c.eline, mxl_tpl_terr_kind_name(c.ekind), c.emsg);
    } else {
        char *s = mxl_malloc(outbuf.n + 1);
        if (!s) {
            st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", t->name);
        } else {
            if (outbuf.n) memcpy(s, outbuf.p, outbuf.n);
            s[outbuf.n] = 0;
            *out = s;
            if (out_len) *out_len = outbuf.n;
        }
    }
    mxl_arena_free(&arena);
    return st;
}

mxl_status mxl_template_render(const mxl_template *t, const json_t *vars,
                               const mxl_template_render_opts *opts, char **out, size_t *out_len,
                               mxl_template_error_kind *kind, mxl_error *err) {
    return render_with(t, vars, opts, out, out_len, kind, err);
}

mxl_status mxl_chat_template_render(const mxl_template *t, const mxl_chat_render_params *p,
                                    char **out, size_t *out_len, mxl_template_error_kind *kind,
                                    mxl_error *err) {
    json_t *vars = json_object();
    if (!vars) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    /* transformers: render(messages=..., tools=..., documents=..., add_generation_prompt=...,
     * **special_tokens, **kwargs). Absent tools/documents stay undefined, as in the goldens
     * (`tools is defined` and iterating them must behave as when they were never passed). */
    bool ok = !json_object_set_new(vars, "messages", p->messages ? json_incref((json_t *)p->messages) : json_array());
    if (p->tools) ok &= !json_object_set_new(vars, "tools", json_incref((json_t *)p->tools));
    if (p->documents) ok &= !json_object_set_new(vars, "documents", json_incref((json_t *)p->documents));
    ok &= !json_object_set_new(vars, "add_generation_prompt", json_boolean(p->add_generation_prompt));
    if (p->bos_token) ok &= !json_object_set_new(vars, "bos_token", json_string(p->bos_token));
    if (p->eos_token) ok &= !json_object_set_new(vars, "eos_token", json_string(p->eos_token));
    if (p->pad_token) ok &= !json_object_set_new(vars, "pad_token", json_string(p->pad_token));
    if (p->unk_token) ok &= !json_object_set_new(vars, "unk_token", json_string(p->unk_token));
    if (p->extra && json_is_object(p->extra)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)p->extra, k, v) ok &= !json_object_set(vars, k, v);
    }
    if (!ok) { /* a variable missing for want of memory would render as undefined */
        json_decref(vars);
        if (kind) *kind = MXL_TEMPLATE_OTHER;
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    mxl_status st = render_with(t, vars, p->opts, out, out_len, kind, err);
    json_decref(vars);
    return st;
}

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

bool mxl_template_parse_time(const char *s, int64_t *out) {
    int y, mo, d, h = 0, mi = 0, se = 0, n = 0;
    if (!s) return false;
    if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3) return false;
    const char *p = s + n;
    if (*p == 'T' || *p == ' ') {
        int n2 = 0;
        if (sscanf(p + 1, "%2d:%2d:%2d%n", &h, &mi, &se, &n2) != 3) {
            n2 = 0;
            if (sscanf(p + 1, "%2d:%2d%n", &h, &mi, &n2) != 2) return false;
        }
        p += 1 + n2;
    }
    if (*p == 'Z') p++;
    if (*p) return false;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 || se > 60)
        return false;
    *out = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + se;
    return true;
}
