/* test_decoder_compare.c - the shared logit comparison of the decoder tests
 * (test_decoder_compare.h). */
#include "core/alloc.h"
#include "test_decoder_compare.h"

#include <dirent.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/cpu/embed_topk.h"
#include "test.h"

/* Largest |want - got| over a full logit row; INFINITY on a length mismatch, NaN propagates. */
static double row_diff(json_t *want, const float *got, int64_t vocab) {
    if ((int64_t)json_array_size(want) != vocab) return INFINITY;
    double m = 0;
    for (int64_t i = 0; i < vocab; i++) {
        double d = fabs(json_number_value(json_array_get(want, (size_t)i)) - got[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

static void take(mxl_test_logit_result *r, double d) {
    if (!(d <= r->max_diff)) r->max_diff = d;
}

bool mxl_test_decoder_compare(const mxl_decoder *d, json_t *c, json_t *tokens, bool reference, double tie_margin,
                              mxl_threadpool *pool, mxl_test_logit_result *r) {
    mxl_error err;
    int64_t V = d->hp.vocab, n = (int64_t)json_array_size(tokens);
    memset(r, 0, sizeof *r);
    json_t *fpos = json_object_get(c, "full_positions"), *full = json_object_get(c, "full_logits");
    json_t *am = json_object_get(c, "argmax"), *aml = json_object_get(c, "argmax_logit"), *mg = json_object_get(c, "margin");
    size_t n_full = json_array_size(fpos);
    if (n <= 0 || n > 4096 || n_full == 0 || json_array_size(full) != n_full || (int64_t)json_array_size(am) != n ||
        (int64_t)json_array_size(aml) != n || (int64_t)json_array_size(mg) != n ||
        json_integer_value(json_array_get(fpos, n_full - 1)) != n - 1)
        return false;
    int64_t ctx = n > 64 ? n : 64;
    int32_t *ids = mxl_malloc((size_t)n * sizeof *ids);
    float *logits = mxl_malloc((size_t)V * sizeof(float));
    bool ok = ids && logits;
    for (int64_t i = 0; ok && i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(tokens, (size_t)i));

    /* one token per call */
    mxl_decoder_state *s = NULL;
    if (ok && mxl_decoder_state_create(d, ctx, 16, pool, &s, &err) != MXL_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        ok = false;
    }
    if (s) mxl_decoder_state_set_reference(s, reference);
    for (int64_t p = 0; ok && p < n; p++) {
        if (mxl_decoder_forward(d, s, &ids[p], 1, logits, &err) != MXL_OK) {
            fprintf(stderr, "  %s\n", err.msg);
            ok = false;
            break;
        }
        int64_t want = json_integer_value(json_array_get(am, (size_t)p));
        if (want < 0 || want >= V) {
            ok = false;
            break;
        }
        take(r, fabs(json_number_value(json_array_get(aml, (size_t)p)) - logits[want]));
        if (json_number_value(json_array_get(mg, (size_t)p)) > tie_margin) {
            r->argmax_checked++;
            if (mxl_cpu_argmax(logits, V) != want) r->argmax_bad++;
        }
        for (size_t k = 0; k < n_full; k++)
            if (json_integer_value(json_array_get(fpos, k)) == p) take(r, row_diff(json_array_get(full, k), logits, V));
    }
    if (ok && mxl_decoder_state_pos(s) != n) ok = false;
    mxl_decoder_state_destroy(s);

    /* the whole sequence in one call, in chunks of 4 */
    s = NULL;
    if (ok && mxl_decoder_state_create(d, ctx, 4, pool, &s, &err) != MXL_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        ok = false;
    }
    if (ok) {
        mxl_decoder_state_set_reference(s, reference);
        if (mxl_decoder_forward(d, s, ids, n, logits, &err) == MXL_OK) {
            take(r, row_diff(json_array_get(full, n_full - 1), logits, V));
        } else {
            fprintf(stderr, "  %s\n", err.msg);
            ok = false;
        }
    }
    mxl_decoder_state_destroy(s);
    mxl_free(ids);
    mxl_free(logits);
    return ok;
}

static int argmax_of(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return (int)b;
}

bool mxl_test_decoder_decode_steps(const mxl_decoder *d, json_t *rec, bool reference, double tol, const mxl_decoder_kv_opts *kv,
                                   mxl_threadpool *pool, mxl_test_logit_result *r) {
    enum { PROMPT = 40, STEPS = 16 };
    const int64_t V = d->hp.vocab;
    json_t *prompt = json_object_get(rec, "prompt"), *gen = json_object_get(rec, "generated");
    json_t *logits = json_object_get(rec, "logits"), *margin = json_object_get(rec, "margin");
    *r = (mxl_test_logit_result){0};
    if (json_array_size(prompt) != PROMPT || json_array_size(gen) != STEPS || json_array_size(logits) != STEPS ||
        json_array_size(margin) != STEPS) {
        fprintf(stderr, "  malformed decode record\n");
        return false;
    }
    int32_t ids[PROMPT + STEPS];
    for (size_t i = 0; i < PROMPT; i++) ids[i] = (int32_t)json_integer_value(json_array_get(prompt, i));
    for (size_t i = 0; i < STEPS; i++) ids[PROMPT + i] = (int32_t)json_integer_value(json_array_get(gen, i));
    mxl_decoder_state *s = NULL;
    mxl_error err;
    float *lg = mxl_malloc((size_t)V * sizeof(float));
    bool ok = lg && mxl_decoder_state_create_ex(d, 64, 7, pool, kv, &s, &err) == MXL_OK;
    if (ok) {
        mxl_decoder_state_set_reference(s, reference);
        ok = mxl_decoder_forward(d, s, ids, PROMPT, lg, &err) == MXL_OK; /* in chunks of 7 */
    }
    for (int step = 0; ok && step < STEPS; step++) {
        take(r, row_diff(json_array_get(logits, (size_t)step), lg, V));
        if (json_number_value(json_array_get(margin, (size_t)step)) > 2 * tol) {
            r->argmax_checked++;
            r->argmax_bad += argmax_of(lg, V) != ids[PROMPT + step];
        }
        if (step + 1 < STEPS) ok = mxl_decoder_forward(d, s, ids + PROMPT + step, 1, lg, &err) == MXL_OK;
    }
    if (!ok) fprintf(stderr, "  %s\n", lg ? err.msg : "out of memory");
    mxl_decoder_state_destroy(s);
    mxl_free(lg);
    return ok;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

json_t *mxl_test_decoder_cases(void) {
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/decoders", mxl_test_repo_root());
    DIR *dp = opendir(dir);
    if (!dp) return NULL;
    char *names[256];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) && n < 256) {
        char p[4096];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s/case.json", dir, e->d_name);
        if (e->d_name[0] != '.' && stat(p, &sb) == 0) names[n++] = mxl_strdup(e->d_name);
    }
    closedir(dp);
    qsort(names, n, sizeof *names, by_name);
    json_t *doc = json_object(), *cases = json_array();
    json_object_set_new(doc, "cases", cases);
    for (size_t i = 0; i < n; i++) {
        char rel[512];
        snprintf(rel, sizeof rel, "tests/fixtures/decoders/%s/case.json", names[i]);
        json_t *one = mxl_test_load_json(rel);
        json_t *c = one ? json_array_get(json_object_get(one, "cases"), 0) : NULL;
        json_t *tokens = one ? json_object_get(one, "tokens") : NULL;
        if (c && !json_object_get(doc, "tokens")) json_object_set(doc, "tokens", tokens);
        if (!c || !json_equal(tokens, json_object_get(doc, "tokens"))) {
            fprintf(stderr, "  %s: no case, or other tokens than the first case's\n", rel);
            json_decref(doc);
            doc = NULL;
        } else {
            json_array_append(cases, c);
        }
        json_decref(one);
        mxl_free(names[i]);
        if (!doc) {
            for (size_t k = i + 1; k < n; k++) mxl_free(names[k]);
            return NULL;
        }
    }
    return doc;
}

json_t *mxl_test_find_case(json_t *fx, const char *name) {
    json_t *c;
    size_t i;
    json_array_foreach(json_object_get(fx, "cases"), i, c) {
        const char *n = json_string_value(json_object_get(c, "name"));
        if (n && strcmp(n, name) == 0) return c;
    }
    return NULL;
}
