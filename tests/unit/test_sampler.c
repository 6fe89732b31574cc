/* test_sampler.c - the sampler chain against llama.cpp's samplers (fixture made by
 * tests/fixtures/sampler/gen_sampler_fixtures.py from libllama, llama-cpp-python 0.3.36): for
 * every case our final candidate set has the same ids with the same probabilities (1e-5); DRY's
 * string breakers through real GGUF vocabularies penalise the same ids by the same amounts; plus
 * the NaN/Inf report, seeding, the draw's frequencies, commits and parameter validation. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/sampler.h"
#include "engine/sampler_tok.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

static json_t *load_fixture(void) { return mxl_test_load_json("tests/fixtures/sampler/sampler_cases.json"); }

static float num_or_neginf(const json_t *v) { return json_is_null(v) ? -INFINITY : (float)json_number_value(v); }

/* Parameters of a case: defaults, then the fixture's overrides. Arrays the params point to are
 * allocated into *bias / *breakers (caller frees). */
static void case_params(const json_t *jp, mxl_sampler_params *p, mxl_logit_bias **bias, mxl_dry_breakers **breakers) {
    mxl_sampler_params_default(p);
    p->n_dry_breakers = 0; /* token-level cases: breakers only when listed */
    *bias = NULL;
    *breakers = NULL;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)jp, key, v) {
        double x = json_number_value(v);
        if (!strcmp(key, "temp")) p->temp = (float)x;
        else if (!strcmp(key, "top_k")) p->top_k = (int32_t)x;
        else if (!strcmp(key, "top_p")) p->top_p = (float)x;
        else if (!strcmp(key, "min_p")) p->min_p = (float)x;
        else if (!strcmp(key, "repeat_penalty")) p->repeat_penalty = (float)x;
        else if (!strcmp(key, "repeat_last_n")) p->repeat_last_n = (int32_t)x;
        else if (!strcmp(key, "presence_penalty")) p->presence_penalty = (float)x;
        else if (!strcmp(key, "frequency_penalty")) p->frequency_penalty = (float)x;
        else if (!strcmp(key, "typical_p")) p->typical_p = (float)x;
        else if (!strcmp(key, "top_n_sigma")) p->top_n_sigma = (float)x;
        else if (!strcmp(key, "p_less")) p->p_less = json_is_true(v);
        else if (!strcmp(key, "xtc_probability")) p->xtc_probability = (float)x;
        else if (!strcmp(key, "xtc_threshold")) p->xtc_threshold = (float)x;
        else if (!strcmp(key, "dynatemp_range")) p->dynatemp_range = (float)x;
        else if (!strcmp(key, "dynatemp_exponent")) p->dynatemp_exponent = (float)x;
        else if (!strcmp(key, "mirostat")) p->mirostat = (int32_t)x;
        else if (!strcmp(key, "mirostat_tau")) p->mirostat_tau = (float)x;
        else if (!strcmp(key, "mirostat_eta")) p->mirostat_eta = (float)x;
        else if (!strcmp(key, "dry_multiplier")) p->dry_multiplier = (float)x;
        else if (!strcmp(key, "dry_base")) p->dry_base = (float)x;
        else if (!strcmp(key, "dry_allowed_length")) p->dry_allowed_length = (int32_t)x;
        else if (!strcmp(key, "dry_penalty_last_n")) p->dry_penalty_last_n = (int32_t)x;
        else if (!strcmp(key, "seed")) p->seed = (uint64_t)x;
        else if (!strcmp(key, "logit_bias")) {
            size_t n = json_array_size(v);
            *bias = mxl_calloc(n, sizeof **bias);
            for (size_t i = 0; i < n; i++) {
                json_t *e = json_array_get(v, i);
                (*bias)[i].token = (int32_t)json_integer_value(json_array_get(e, 0));
                (*bias)[i].bias = num_or_neginf(json_array_get(e, 1));
            }
            p->logit_bias = *bias;
            p->n_logit_bias = n;
        } else if (!strcmp(key, "dry_breaker_seqs")) {
            size_t n = json_array_size(v);
            mxl_token_seq *seqs = mxl_calloc(n ? n : 1, sizeof *seqs);
            int32_t *ids = mxl_calloc(256, sizeof *ids);
            size_t used = 0;
            for (size_t i = 0; i < n; i++) {
                json_t *s = json_array_get(v, i);
                seqs[i].ids = ids + used;
                seqs[i].n = json_array_size(s);
                for (size_t k = 0; k < seqs[i].n && used < 256; k++) ids[used++] = (int32_t)json_integer_value(json_array_get(s, k));
            }
            mxl_dry_breakers_from_seqs(seqs, n, breakers, NULL);
            p->dry_breakers_built = *breakers;
            mxl_free(seqs);
            mxl_free(ids);
        } else {
            fprintf(stderr, "  unknown fixture parameter %s\n", key);
        }
    }
}

static float *json_floats(const json_t *a, size_t *n) {
    *n = json_array_size(a);
    float *x = mxl_malloc((*n ? *n : 1) * sizeof *x);
    for (size_t i = 0; i < *n; i++) x[i] = num_or_neginf(json_array_get(a, i));
    return x;
}

static int32_t *json_ids(const json_t *a, size_t *n) {
    *n = json_array_size(a);
    int32_t *x = mxl_malloc((*n ? *n : 1) * sizeof *x);
    for (size_t i = 0; i < *n; i++) x[i] = (int32_t)json_integer_value(json_array_get(a, i));
    return x;
}

/* Our candidate set == the reference's kept ids, probabilities within 1e-5. */
static int same_set(const char *name, size_t step, const mxl_sampler_cand *c, size_t n, const json_t *kept) {
    size_t nk = json_array_size(kept);
    int ok = 1;
    if (n != nk) {
        fprintf(stderr, "  %s step %zu: %zu candidates, llama.cpp keeps %zu\n", name, step, n, nk);
        ok = 0;
    }
    for (size_t i = 0; i < nk; i++) {
        json_t *e = json_array_get(kept, i);
        int32_t id = (int32_t)json_integer_value(json_array_get(e, 0));
        double pr = json_number_value(json_array_get(e, 1));
        size_t j = 0;
        while (j < n && c[j].id != id) j++;
        if (j == n) {
            if (ok) fprintf(stderr, "  %s step %zu: token %d (p %.6g) kept by llama.cpp is missing\n", name, step, id, pr);
            ok = 0;
        } else if (fabs((double)c[j].p - pr) > 1e-5) {
            fprintf(stderr, "  %s step %zu: token %d p %.8g, llama.cpp %.8g\n", name, step, id, c[j].p, pr);
            ok = 0;
        }
    }
    return ok;
}

TEST(sampler_chain_matches_llama_cpp) {
    json_t *j = load_fixture();
    REQUIRE(j);
    json_t *cases = json_object_get(j, "cases");
    REQUIRE(json_array_size(cases) >= 60);
    size_t n_ok = 0, n_steps = 0;
    for (size_t ci = 0; ci < json_array_size(cases); ci++) {
        json_t *cs = json_array_get(cases, ci);
        const char *name = json_string_value(json_object_get(cs, "name"));
        int32_t nv = (int32_t)json_integer_value(json_object_get(cs, "n_vocab"));
        mxl_sampler_params p;
        mxl_logit_bias *bias;
        mxl_dry_breakers *brk;
        case_params(json_object_get(cs, "params"), &p, &bias, &brk);
        mxl_sampler *s = NULL;
        mxl_error err = {0};
        mxl_status st = mxl_sampler_create(&p, nv, &s, &err);
        if (st) fprintf(stderr, "  %s: %s\n", name, err.msg);
        CHECK(st == MXL_OK);
        json_t *steps = json_object_get(cs, "steps");
        int case_ok = st == MXL_OK;
        for (size_t si = 0; s && si < json_array_size(steps); si++) {
            json_t *step = json_array_get(steps, si);
            size_t nl, nh;
            float *logits = json_floats(json_object_get(step, "logits"), &nl);
            int32_t *hist = json_ids(json_object_get(step, "history"), &nh);
            CHECK_EQ_INT(nl, nv);
            const mxl_sampler_cand *c = NULL;
            size_t n = 0;
            st = mxl_sampler_candidates(s, logits, hist, nh, &c, &n, &err);
            if (st) fprintf(stderr, "  %s: %s\n", name, err.msg);
            int32_t sel = (int32_t)json_integer_value(json_object_get(step, "selected"));
            json_t *kept = json_object_get(step, "kept");
            if (st || !same_set(name, si, c, n, kept)) case_ok = 0;
            n_steps++;
            if (!st && p.mirostat) {
                /* mu follows llama.cpp's pick, so later steps see the same state */
                if (mxl_sampler_commit(s, sel, &err) != MXL_OK) {
                    fprintf(stderr, "  %s step %zu: %s\n", name, si, err.msg);
                    case_ok = 0;
                }
            } else if (!st) {
                int32_t id = mxl_sampler_draw(s);
                bool in = false;
                for (size_t k = 0; k < n; k++) in |= c[k].id == id && c[k].p > 0;
                if (!in) case_ok = 0;
                if (json_array_size(kept) == 1 && id != sel) {
                    fprintf(stderr, "  %s: picked %d, llama.cpp %d\n", name, id, sel);
                    case_ok = 0;
                }
            }
            mxl_free(logits);
            mxl_free(hist);
        }
        if (case_ok) n_ok++;
        else *mxl_test_failed_ = 1;
        mxl_sampler_destroy(s);
        mxl_free(bias);
        mxl_dry_breakers_destroy(brk);
    }
    if (n_ok != json_array_size(cases))
        fprintf(stderr, "  %zu of %zu cases match (%zu steps)\n", n_ok, json_array_size(cases), n_steps);
    json_decref(j);
}

TEST(sampler_dry_string_breakers_match_llama_cpp) {
    json_t *j = load_fixture();
    REQUIRE(j);
    json_t *cases = json_object_get(j, "string_cases");
    REQUIRE(json_array_size(cases) >= 8);
    mxl_tokenizer *tok = NULL;
    char loaded[256] = "";
    for (size_t ci = 0; ci < json_array_size(cases); ci++) {
        json_t *cs = json_array_get(cases, ci);
        const char *name = json_string_value(json_object_get(cs, "name"));
        const char *vname = json_string_value(json_object_get(cs, "vocab"));
        if (strcmp(loaded, vname)) {
            mxl_tokenizer_destroy(tok);
            tok = NULL;
            char path[2048];
            snprintf(path, sizeof path, "%s/../shared/testdata/llama-cpp-vocab/%s.gguf", mxl_test_repo_root(), vname);
            mxl_error err = {0};
            if (mxl_tokenizer_load_gguf_file(path, &tok, &err)) fprintf(stderr, "  %s\n", err.msg);
            snprintf(loaded, sizeof loaded, "%s", vname);
        }
        REQUIRE(tok);
        int32_t nv = (int32_t)json_integer_value(json_object_get(cs, "n_vocab"));
        CHECK_EQ_INT(mxl_tokenizer_n_vocab(tok), nv);
        mxl_sampler_params p;
        mxl_logit_bias *bias;
        mxl_dry_breakers *brk;
        case_params(json_object_get(cs, "params"), &p, &bias, &brk);
        json_t *jb = json_object_get(cs, "breakers");
        const char *strs[16];
        size_t nb = json_array_size(jb);
        for (size_t i = 0; i < nb && i < 16; i++) strs[i] = json_string_value(json_array_get(jb, i));
        p.dry_breakers = strs;
        p.n_dry_breakers = nb;
        mxl_sampler_tok_vocab tv;
        mxl_sampler_vocab vocab;
        mxl_sampler_tok_vocab_init(&tv, tok, &vocab);
        mxl_sampler *s = NULL;
        mxl_error err = {0};
        mxl_status st = mxl_sampler_create_with_vocab(&p, nv, &vocab, &s, &err);
        mxl_sampler_tok_vocab_free(&tv);
        if (st) fprintf(stderr, "  %s: %s\n", name, err.msg);
        CHECK(st == MXL_OK);
        size_t nh;
        int32_t *hist = json_ids(json_object_get(cs, "history"), &nh);
        float *logits = mxl_calloc((size_t)nv, sizeof *logits);
        const mxl_sampler_cand *c;
        size_t n;
        if (s && mxl_sampler_candidates(s, logits, hist, nh, &c, &n, &err) != MXL_OK) {
            fprintf(stderr, "  %s: %s\n", name, err.msg);
            *mxl_test_failed_ = 1;
        }
        /* DRY works on the logits in place: the changed ones are the penalised ids */
        json_t *pen = json_object_get(cs, "penalized");
        size_t n_changed = 0;
        for (int32_t i = 0; i < nv; i++) n_changed += logits[i] != 0.0f;
        if (n_changed != json_array_size(pen)) {
            fprintf(stderr, "  %s: %zu ids penalised, llama.cpp %zu\n", name, n_changed, json_array_size(pen));
            *mxl_test_failed_ = 1;
        }
        for (size_t i = 0; i < json_array_size(pen); i++) {
            json_t *e = json_array_get(pen, i);
            int32_t id = (int32_t)json_integer_value(json_array_get(e, 0));
            double want = json_number_value(json_array_get(e, 1));
            if (id < 0 || id >= nv || fabs(logits[id] - want) > 1e-5 * fabs(want) + 1e-6) {
                fprintf(stderr, "  %s: token %d logit %.8g, llama.cpp %.8g\n", name, id, id >= 0 && id < nv ? logits[id] : 0.0f, want);
                *mxl_test_failed_ = 1;
            }
        }
        mxl_free(hist);
        mxl_free(logits);
        mxl_free(bias);
        mxl_dry_breakers_destroy(brk);
        mxl_sampler_destroy(s);
    }
    mxl_tokenizer_destroy(tok);
    json_decref(j);
}

TEST(sampler_reports_nan_and_inf_logits) {
    mxl_sampler_params p;
    mxl_sampler_params_default(&p);
    p.temp = 0.8f;
    mxl_sampler *s = NULL;
    mxl_error err = {0};
    REQUIRE(mxl_sampler_create(&p, 8, &s, &err) == MXL_OK);
    float l[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
    int32_t id = -7;
    l[5] = NAN;
    CHECK(mxl_sampler_pick(s, l, NULL, 0, &id, &err) == MXL_ERR_INTERNAL);
    CHECK(strstr(err.msg, "NaN") && strstr(err.msg, "token 5"));
    CHECK_EQ_INT(id, -7);
    l[5] = INFINITY;
    CHECK(mxl_sampler_pick(s, l, NULL, 0, &id, &err) == MXL_ERR_INTERNAL);
    CHECK(strstr(err.msg, "+inf") && strstr(err.msg, "token 5"));
    CHECK_EQ_INT(mxl_sampler_draw(s), -1); /* nothing pending after a refused step */
    for (int i = 0; i < 8; i++) l[i] = -INFINITY;
    CHECK(mxl_sampler_check_logits(l, 8, &err) == MXL_ERR_INTERNAL);
    CHECK(strstr(err.msg, "-inf") != NULL);
    /* -inf entries are fine (banned tokens) and are never picked */
    l[2] = 1.0f;
    l[6] = 1.5f;
    CHECK(mxl_sampler_check_logits(l, 8, &err) == MXL_OK);
    for (int k = 0; k < 50; k++) {
        float c[8];
        memcpy(c, l, sizeof c);
        REQUIRE(mxl_sampler_pick(s, c, NULL, 0, &id, &err) == MXL_OK);
        CHECK(id == 2 || id == 6);
    }
    mxl_sampler_destroy(s);
    /* a logit bias that bans every finite token leaves nothing to sample: reported */
    mxl_logit_bias lb[2] = {{2, -INFINITY}, {6, -INFINITY}};
    p.logit_bias = lb;
    p.n_logit_bias = 2;
    REQUIRE(mxl_sampler_create(&p, 8, &s, &err) == MXL_OK);
    float c[8];
    memcpy(c, l, sizeof c);
    CHECK(mxl_sampler_pick(s, c, NULL, 0, &id, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "banned") != NULL);
    mxl_sampler_destroy(s);
    /* penalties that overflow a logit to +inf are reported, not sampled */
    mxl_sampler_params_default(&p);
    p.temp = 1.0f;
    p.presence_penalty = -3e38f;
    REQUIRE(mxl_sampler_create(&p, 8, &s, &err) == MXL_OK);
    float big[8] = {3e38f, 0, 0, 0, 0, 0, 0, 0};
    int32_t h0 = 0;
    CHECK(mxl_sampler_pick(s, big, &h0, 1, &id, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "token 0") != NULL);
    mxl_sampler_destroy(s);
}

static void fill_logits(float *l, int n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        l[i] = (float)((x >> 8) & 0xffff) / 8192.0f;
    }
}

TEST(sampler_seed_reproducible) {
    enum { V = 300, N = 200 };
    int32_t a[N], b[N], c[N];
    int32_t *runs[3] = {a, b, c};
    uint64_t seeds[3] = {42, 42, 43};
    for (int r = 0; r < 3; r++) {
        mxl_sampler_params p;
        mxl_sampler_params_default(&p);
        p.temp = 1.0f;
        p.top_k = 50;
        p.top_p = 0.95f;
        p.xtc_probability = 0.5f;
        p.seed = seeds[r];
        mxl_sampler *s = NULL;
        REQUIRE(mxl_sampler_create(&p, V, &s, NULL) == MXL_OK);
        float l[V];
        for (int i = 0; i < N; i++) {
            fill_logits(l, V, (uint32_t)i);
            REQUIRE(mxl_sampler_pick(s, l, runs[r], (size_t)i, &runs[r][i], NULL) == MXL_OK);
        }
        mxl_sampler_destroy(s);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
}

/* The draw follows the candidate probabilities (40000 draws, seeded). */
TEST(sampler_draw_frequencies_follow_probabilities) {
    enum { V = 64, N = 40000 };
    mxl_sampler_params p;
    mxl_sampler_params_default(&p);
    p.temp = 0.7f;
    p.top_k = 6;
    p.seed = 1234;
    mxl_sampler *s = NULL;
    REQUIRE(mxl_sampler_create(&p, V, &s, NULL) == MXL_OK);
    float base[V], l[V];
    fill_logits(base, V, 99);
    double freq[V] = {0}, prob[V] = {0};
    for (int k = 0; k < N; k++) {
        memcpy(l, base, sizeof l);
        const mxl_sampler_cand *c;
        size_t n;
        REQUIRE(mxl_sampler_candidates(s, l, NULL, 0, &c, &n, NULL) == MXL_OK);
        REQUIRE(n == 6);
        if (k == 0)
            for (size_t i = 0; i < n; i++) prob[c[i].id] = c[i].p;
        int32_t id = mxl_sampler_draw(s);
        REQUIRE(id >= 0 && id < V);
        freq[id] += 1.0 / N;
    }
    /* the reference probabilities from first principles: softmax of the top 6 at temperature 0.7 */
    int idx[V];
    for (int i = 0; i < V; i++) idx[i] = i;
    for (int i = 0; i < 6; i++)
        for (int k = i + 1; k < V; k++)
            if (base[idx[k]] > base[idx[i]]) {
                int t = idx[i];
                idx[i] = idx[k];
                idx[k] = t;
            }
    double z = 0;
    for (int i = 0; i < 6; i++) z += exp((base[idx[i]] - base[idx[0]]) / 0.7);
    for (int i = 0; i < 6; i++) {
        double want = exp((base[idx[i]] - base[idx[0]]) / 0.7) / z;
        CHECK(fabs(prob[idx[i]] - want) < 1e-5);
        CHECK(fabs(freq[idx[i]] - want) < 0.01);
    }
    mxl_sampler_destroy(s);
}

TEST(sampler_commit_and_draw_bookkeeping) {
    mxl_sampler_params p;
    mxl_sampler_params_default(&p);
    p.temp = 1.0f;
    p.top_k = 3;
    mxl_sampler *s = NULL;
    mxl_error err = {0};
    REQUIRE(mxl_sampler_create(&p, 10, &s, &err) == MXL_OK);
    CHECK(mxl_sampler_commit(s, 1, &err) == MXL_ERR_ARG);
    CHECK_EQ_INT(mxl_sampler_draw(s), -1);
    float l[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    const mxl_sampler_cand *c;
    size_t n;
    REQUIRE(mxl_sampler_candidates(s, l, NULL, 0, &c, &n, &err) == MXL_OK);
    CHECK_EQ_INT(n, 3);
    CHECK(mxl_sampler_commit(s, 2, &err) == MXL_ERR_ARG); /* not among 7, 8, 9 */
    CHECK(strstr(err.msg, "token 2") != NULL);
    CHECK(mxl_sampler_commit(s, 8, &err) == MXL_OK);
    CHECK(mxl_sampler_commit(s, 8, &err) == MXL_ERR_ARG); /* consumed */
    mxl_sampler_destroy(s);
}

TEST(sampler_parameter_validation) {
    mxl_sampler_params p;
    mxl_sampler *s = NULL;
    mxl_error err = {0};
#define EXPECT_BAD(stmt, flag)                                                                      \
    do {                                                                                            \
        mxl_sampler_params_default(&p);                                                             \
        stmt;                                                                                       \
        s = NULL;                                                                                   \
        CHECK(mxl_sampler_create(&p, 100, &s, &err) == MXL_ERR_ARG);                                \
        CHECK(s == NULL);                                                                           \
        if (!strstr(err.msg, flag)) fprintf(stderr, "  message '%s' lacks '%s'\n", err.msg, flag); \
        CHECK(strstr(err.msg, flag) != NULL);                                                       \
    } while (0)
    EXPECT_BAD(p.temp = -1, "--temp");
    EXPECT_BAD(p.top_p = 1.5f, "--top-p");
    EXPECT_BAD(p.top_k = -2, "--top-k");
    EXPECT_BAD(p.typical_p = 0, "--typical-p");
    EXPECT_BAD(p.xtc_probability = 2, "--xtc-probability");
    EXPECT_BAD(p.mirostat = 3, "--mirostat");
    EXPECT_BAD(p.mirostat_tau = NAN, "--mirostat-ent");
    EXPECT_BAD(p.dynatemp_range = -0.5f, "--dynatemp-range");
    EXPECT_BAD(p.dry_penalty_last_n = -2, "--dry-penalty-last-n");
    EXPECT_BAD(p.repeat_penalty = 0, "--repetition-penalty");
    EXPECT_BAD(p.dry_multiplier = -1, "--dry-multiplier");
    mxl_logit_bias lb = {100, 1.0f};
    EXPECT_BAD((p.logit_bias = &lb, p.n_logit_bias = 1), "--logit-bias");
    mxl_logit_bias lb2 = {5, INFINITY};
    EXPECT_BAD((p.logit_bias = &lb2, p.n_logit_bias = 1), "--logit-bias");
    /* DRY with the default (string) breakers needs the tokenizer */
    EXPECT_BAD(p.dry_multiplier = 0.8f, "tokenizer");
    /* ... and works without one when there are no breakers */
    mxl_sampler_params_default(&p);
    p.dry_multiplier = 0.8f;
    p.n_dry_breakers = 0;
    CHECK(mxl_sampler_create(&p, 100, &s, &err) == MXL_OK);
    mxl_sampler_destroy(s);
#undef EXPECT_BAD
}

/* The defaults are the spec's `generate` defaults (cli-reference: sampling options and the
 * server's default-sampling table for the run-only flags). */
TEST(sampler_defaults_are_the_spec_defaults) {
    mxl_sampler_params p;
    mxl_sampler_params_default(&p);
    CHECK(p.temp == 0.0f && p.top_p == 1.0f && p.top_k == 0 && p.min_p == 0.0f);
    CHECK(p.repeat_penalty == 1.0f && p.repeat_last_n == -1 && p.presence_penalty == 0 && p.frequency_penalty == 0);
    CHECK(p.dry_multiplier == 0.0f && p.dry_base == 1.75f && p.dry_allowed_length == 2 && p.dry_penalty_last_n == -1);
    CHECK(p.top_n_sigma == 0.0f && p.typical_p == 1.0f && !p.p_less);
    CHECK(p.xtc_probability == 0.0f && p.xtc_threshold == 0.1f && p.mirostat == 0 && p.mirostat_eta == 0.1f &&
          p.mirostat_tau == 5.0f && p.dynatemp_range == 0.0f && p.dynatemp_exponent == 1.0f);
    REQUIRE(p.n_dry_breakers == 4);
    CHECK_EQ_STR(p.dry_breakers[0], "\n");
    CHECK_EQ_STR(p.dry_breakers[1], ":");
    CHECK_EQ_STR(p.dry_breakers[2], "\"");
    CHECK_EQ_STR(p.dry_breakers[3], "*");
    CHECK(p.n_logit_bias == 0);
}

TEST(sampler_logit_bias_parse) {
    mxl_logit_bias b;
    mxl_error err = {0};
    REQUIRE(mxl_logit_bias_parse("15043+1", &b, &err) == MXL_OK);
    CHECK(b.token == 15043 && b.bias == 1.0f);
    REQUIRE(mxl_logit_bias_parse("7-2.5", &b, &err) == MXL_OK);
    CHECK(b.token == 7 && b.bias == -2.5f);
    REQUIRE(mxl_logit_bias_parse("3-inf", &b, &err) == MXL_OK);
    CHECK(b.token == 3 && b.bias == -INFINITY);
    const char *bad[] = {"", "15043", "+1", "abc+1", "12+", "12*3", "12+1x", "12+inf", "12+nan", "-3+1", "12+-1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(mxl_logit_bias_parse(bad[i], &b, &err) == MXL_ERR_ARG);
        CHECK(strstr(err.msg, "--logit-bias") != NULL);
    }
}

/* The older entry point still picks the penalised argmax greedily and samples otherwise. */
TEST(sampler_legacy_sample_entry_point) {
    mxl_sampler_params p;
    mxl_sampler_params_default(&p);
    p.repeat_penalty = 4.0f;
    mxl_sampler *s = NULL;
    REQUIRE(mxl_sampler_create(&p, 5, &s, NULL) == MXL_OK);
    float l[5] = {1.0f, 3.0f, 2.0f, 0.5f, -1.0f};
    int32_t hist[2] = {1, 1};
    CHECK_EQ_INT(mxl_sampler_sample(s, l, hist, 2), 2); /* 3 / 4 = 0.75 < 2 */
    CHECK(l[1] == 0.75f);
    float bad[5] = {NAN, 1, 2, 3, 9};
    CHECK_EQ_INT(mxl_sampler_sample(s, bad, NULL, 0), 4); /* falls back to the argmax */
    mxl_sampler_destroy(s);
}
