/* merges_load.c - builds the BPE merge table (model.merges of tokenizer.json) fast.
 *
 * A merge "a b" (or ["a", "b"]) of rank r maps the pair (id(a), id(b)) to (r, id(a + b')), b'
 * being b without the continuing-subword prefix, as HF builds it; all three strings must be
 * vocabulary tokens, and for a repeated pair the lowest rank wins. Large vocabularies have half a
 * million merges (Gemma 3: 514k, in a 33 MB pretty-printed file), so load time is this table:
 *  - strings are resolved TOK_MAP_BATCH merges at a time with tok_map_get_many, whose prefetches
 *    overlap the cache misses of a batch's lookups;
 *  - a big pretty-printed list is cut in two at a line break and the halves are parsed and
 *    resolved on two threads (reading the finished vocabulary only); the pairs are then put in
 *    rank order on the calling thread, so the table is the same as a one-pass build. A raw
 *    newline is never inside a JSON string, which is what makes a line break a safe place to
 *    start scanning.
 * The first faulty merge in list order is reported, with its index, whichever half it is in. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/json_fast.h"
#include "tokenizer/tok_internal.h"

#define SPLIT_MIN_BYTES (4u << 20) /* below this one thread does it all */

/* One range of the list, resolved to ids. */
typedef struct merge_run {
    const mxl_tokenizer *t;
    /* the batch being filled: a, b and a + b' of each held merge */
    mxl_strbuf text;
    size_t held, off[TOK_MAP_BATCH * 3], len[TOK_MAP_BATCH * 3];
    int32_t (*ids)[3]; /* [n][a, b, a + b'] in list order */
    size_t n, cap;
    /* first fault: its index within the range, status and message (without the path) */
    mxl_status st;
    size_t bad;
    char msg[200];
    /* the source range of a fast run */
    const char *s;
    size_t from, to;
    uint64_t alloc_failed0; /* mxl_alloc_thread_failures() when the run started */
} merge_run;

static void run_free(merge_run *r) {
    mxl_strbuf_free(&r->text);
    mxl_free(r->ids);
}

static mxl_status run_fault(merge_run *r, mxl_status st, size_t idx, const char *fmt, const char *a) {
    /* the scanner reports a string it could not allocate as malformed: say what it was */
    if (mxl_alloc_thread_failures() != r->alloc_failed0) st = MXL_ERR_NOMEM, fmt = "out of memory%s";
    if (r->st == MXL_OK) {
        r->st = st;
        r->bad = idx;
        snprintf(r->msg, sizeof r->msg, fmt, a ? a : "");
    }
    return st;
}

/* Resolves the held merges (they are the last `held` of the range so far). */
static mxl_status run_flush(merge_run *r) {
    const char *keys[TOK_MAP_BATCH * 3];
    int32_t ids[TOK_MAP_BATCH * 3];
    size_t k = r->held * 3;
    if (!r->held) return MXL_OK;
    if (r->n + r->held > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 4096;
        while (cap < r->n + r->held) cap *= 2;
        int32_t(*p)[3] = mxl_realloc(r->ids, cap * sizeof *p);
        if (!p) return run_fault(r, MXL_ERR_NOMEM, r->n, "out of memory%s", NULL);
        r->ids = p;
        r->cap = cap;
    }
    for (size_t i = 0; i < k; i++) keys[i] = r->text.p + r->off[i];
    tok_map_get_many(&r->t->vocab, keys, r->len, k, ids);
    for (size_t i = 0; i < r->held; i++) {
        if (ids[3 * i] < 0 || ids[3 * i + 1] < 0 || ids[3 * i + 2] < 0) {
            char q[96];
            snprintf(q, sizeof q, "%.*s", (int)(r->len[3 * i + 2] < 80 ? r->len[3 * i + 2] : 80), keys[3 * i + 2]);
            return run_fault(r, MXL_ERR_FORMAT, r->n + i, "merge of tokens not in the vocabulary (\"%s\")", q);
        }
        memcpy(r->ids[r->n + i], ids + 3 * i, sizeof r->ids[0]);
    }
    r->n += r->held;
    r->held = 0;
    r->text.n = 0;
    return MXL_OK;
}

static mxl_status run_add(merge_run *r, const char *a, size_t al, const char *b, size_t bl) {
    const mxl_tokenizer *t = r->t;
    size_t pl = t->model.cont_prefix ? t->model.cont_prefix_len : 0, skip = pl <= bl ? pl : bl;
    size_t *off = r->off + 3 * r->held, *len = r->len + 3 * r->held, o = r->text.n;
    if (!mxl_strbuf_append(&r->text, a, al) || !mxl_strbuf_append(&r->text, b, bl) || !mxl_strbuf_append(&r->text, a, al) ||
        !mxl_strbuf_append(&r->text, b + skip, bl - skip))
        return run_fault(r, MXL_ERR_NOMEM, r->n + r->held, "out of memory%s", NULL);
    off[0] = o, len[0] = al;
    off[1] = o + al, len[1] = bl;
    off[2] = o + al + bl, len[2] = al + bl - skip;
    return ++r->held == TOK_MAP_BATCH ? run_flush(r) : MXL_OK;
}

/* A malformed merge is reported after the merges before it were resolved, so the first bad one
 * is named whatever its fault. */
static mxl_status run_bad(merge_run *r, const char *fmt, const char *a) {
    size_t idx = r->n + r->held;
    mxl_status st = run_flush(r);
    return st != MXL_OK ? st : run_fault(r, MXL_ERR_FORMAT, idx, fmt, a);
}

static mxl_status run_string(merge_run *r, const char *a, size_t n) {
    const char *sp = memchr(a, ' ', n);
    if (!sp) {
        char q[96];
        snprintf(q, sizeof q, "%.80s", a);
        return run_bad(r, "merge \"%s\" is not \"a b\"", q);
    }
    size_t al = (size_t)(sp - a);
    return run_add(r, a, al, sp + 1, n - al - 1);
}

/* Parses merges from s[from] (an item's first byte) up to `to`: the closing ']' of the list
 * when `to` is its index, else the item boundary at `to` (the ',' before the other half). */
static void *run_fast(void *arg) {
    merge_run *r = arg;
    r->alloc_failed0 = mxl_alloc_thread_failures();
    const char *s = r->s;
    size_t n = r->to + 1, i = r->from;
    mxl_strbuf a = {0}, b = {0};
    mxl_status st = MXL_OK;
    while (st == MXL_OK) {
        if (i < n && s[i] == '"') {
            i = tok_json_string(s, n, i, &a);
            if (i == TOK_JSON_BAD) {
                st = run_bad(r, "malformed string%s", NULL);
                break;
            }
            st = run_string(r, a.p ? a.p : "", a.n);
        } else if (i < n && s[i] == '[') {
            i = tok_json_ws(s, n, i + 1);
            i = tok_json_string(s, n, i, &a);
            if (i != TOK_JSON_BAD) i = tok_json_ws(s, n, i);
            if (i != TOK_JSON_BAD && i < n && s[i] == ',') i = tok_json_string(s, n, tok_json_ws(s, n, i + 1), &b);
            else i = TOK_JSON_BAD;
            if (i != TOK_JSON_BAD) i = tok_json_ws(s, n, i);
            if (i == TOK_JSON_BAD || i >= n || s[i] != ']') {
                st = run_bad(r, "a merge is \"a b\" or [a, b]%s", NULL);
                break;
            }
            i++;
            st = run_add(r, a.p ? a.p : "", a.n, b.p ? b.p : "", b.n);
        } else {
            st = run_bad(r, "a merge is \"a b\" or [a, b]%s", NULL);
            break;
        }
        if (st != MXL_OK) break;
        i = tok_json_ws(s, n, i);
        if (i == r->to) break; /* the list's ']' or the boundary ',' */
        if (i < n && s[i] == ',') {
            i = tok_json_ws(s, n, i + 1);
            continue;
        }
        st = run_bad(r, "expected ',' or ']'%s", NULL);
    }
    if (st == MXL_OK) run_flush(r);
    mxl_strbuf_free(&a);
    mxl_strbuf_free(&b);
    return NULL;
}

/* An item boundary near the middle of s[start..end] (the list's '[' .. ']'): the ',' that ends
 * an item, found by scanning from the first line break after the middle. 0 when none is found
 * (a list on one line, or a shape this scan does not follow: then one thread does it all). */
static size_t split_point(const char *s, size_t start, size_t end) {
    size_t first = tok_json_ws(s, end, start + 1);
    if (first >= end) return 0;
    bool pairs = s[first] == '[';
    const char *nl = memchr(s + start + (end - start) / 2, '\n', end - start - (end - start) / 2);
    if (!nl) return 0;
    size_t i = (size_t)(nl - s);
    /* outside any string now; for "a b" items the next value starts an item, for [a, b] items
     * skip to the end of the current one */
    while (i < end) {
        i = tok_json_ws(s, end, i);
        if (i >= end) return 0;
        char c = s[i];
        if (c == '"') {
            i = tok_json_string(s, end, i, NULL);
            if (i == TOK_JSON_BAD) return 0;
            if (!pairs) {
                /* this string may be the one after the break: the boundary is the next ',' */
                i = tok_json_ws(s, end, i);
                return i < end && s[i] == ',' ? i : 0;
            }
        } else if (c == ']' && pairs) {
            i = tok_json_ws(s, end, i + 1);
            return i < end && s[i] == ',' ? i : 0;
        } else if (c == ',' && !pairs) {
            return i;
        } else if (c == ',' || c == '[') {
            i++;
        } else {
            return 0;
        }
    }
    return 0;
}

/* Puts the resolved pairs of the runs in list order. */
static mxl_status put_runs(mxl_tokenizer *t, merge_run *runs, int n_runs, mxl_error *err) {
    size_t rank = 0;
    for (int k = 0; k < n_runs; k++) {
        const merge_run *r = &runs[k];
        for (size_t base = 0; base < r->n; base += TOK_MAP_BATCH) {
            size_t m = r->n - base < TOK_MAP_BATCH ? r->n - base : TOK_MAP_BATCH;
            for (size_t i = 0; i < m; i++) tok_pairmap_prefetch(&t->model.merges, r->ids[base + i][0], r->ids[base + i][1]);
            for (size_t i = 0; i < m; i++) {
                const int32_t *p = r->ids[base + i];
                if (rank > UINT32_MAX - 1)
                    return mxl_error_set(err, MXL_ERR_FORMAT, "%s: model.merges: too many merges", t->name);
                if (!tok_pairmap_put(&t->model.merges, p[0], p[1], (uint32_t)rank++, p[2]))
                    return mxl_error_set(err, MXL_ERR_NOMEM, "%s: model.merges: out of memory", t->name);
            }
        }
    }
    return MXL_OK;
}

/* The first fault in list order, or MXL_OK. */
static mxl_status runs_fault(const mxl_tokenizer *t, const merge_run *runs, int n_runs, mxl_error *err) {
    size_t before = 0;
    for (int k = 0; k < n_runs; k++) {
        if (runs[k].st != MXL_OK)
            return mxl_error_set(err, runs[k].st, "%s: model.merges[%zu]: %s", t->name, before + runs[k].bad, runs[k].msg);
        before += runs[k].n;
    }
    return MXL_OK;
}

mxl_status tok_merges_load_fast(mxl_tokenizer *t, const char *s, size_t start, size_t end, mxl_error *err) {
    /* s[start] is '[' and s[end - 1] its ']' */
    size_t close = end - 1, first = tok_json_ws(s, close, start + 1);
    if (first >= close) return MXL_OK; /* [] */
    merge_run runs[2] = {{.t = t, .s = s, .from = first, .to = close}, {.t = t, .s = s}};
    int n_runs = 1;
    size_t cut = end - start >= SPLIT_MIN_BYTES ? split_point(s, start, close) : 0;
    pthread_t th;
    bool threaded = false;
    if (cut) {
        runs[0].to = cut;
        runs[1].from = tok_json_ws(s, close, cut + 1);
        runs[1].to = close;
        n_runs = 2;
        threaded = runs[1].from < close && pthread_create(&th, NULL, run_fast, &runs[1]) == 0;
    }
    run_fast(&runs[0]);
    if (n_runs == 2) {
        if (threaded) pthread_join(th, NULL);
        else run_fast(&runs[1]);
    }
    mxl_status st = runs_fault(t, runs, n_runs, err);
    if (st == MXL_OK) st = put_runs(t, runs, n_runs, err);
    for (int k = 0; k < n_runs; k++) run_free(&runs[k]);
    return st;
}

mxl_status tok_merges_load_json(mxl_tokenizer *t, const json_t *merges, mxl_error *err) {
    merge_run r = {.t = t, .alloc_failed0 = mxl_alloc_thread_failures()};
    for (size_t i = 0; r.st == MXL_OK && i < json_array_size(merges); i++) {
        const json_t *m = json_array_get(merges, i);
        if (json_is_string(m)) {
            run_string(&r, json_string_value(m), json_string_length(m));
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            run_add(&r, json_string_value(json_array_get(m, 0)), json_string_length(json_array_get(m, 0)),
                    json_string_value(json_array_get(m, 1)), json_string_length(json_array_get(m, 1)));
        } else {
            run_bad(&r, "a merge is \"a b\" or [a, b]%s", NULL);
        }
    }
    if (r.st == MXL_OK) run_flush(&r);
    mxl_status st = runs_fault(t, &r, 1, err);
    if (st == MXL_OK) st = put_runs(t, &r, 1, err);
    run_free(&r);
    return st;
}
