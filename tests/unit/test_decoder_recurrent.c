/* test_decoder_recurrent.c - the recurrent families (models/recurrent.h) over a longer run, and
 * what a recurrent state may and may not do.
 *
 * Truth: the fixtures' "decode" record (gen_decoder_fixtures.py record_decode): a 40-token prompt
 * (past several of transformers' scan chunks: the Mamba-2 fixture's chunk_size is 4), the 16
 * tokens transformers' cached greedy generate() picks after it, and the logits before each of them.
 * Here the prompt is prefilled in chunks of 7, then 16 decode steps feed transformers' tokens:
 * every step's logits within the decoder tests' bounds (test_decoder_compare.h: 1e-3 on the
 * reference path, 5e-3 fast, 0.15 MLX), and our greedy pick equal to transformers' wherever its
 * top-2 margin is past twice the bound.
 *
 * Chunking: the prompt in one call, in chunks of 7 and one token per call end in bit-identical
 * logits (the scans run token by token whatever the chunk). The state: truncating below the
 * current position starts over from 0 (and then equals a fresh state), cached blocks are refused,
 * a fork at the source's position continues exactly as the source. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "models/decoder.h"
#include "test.h"
#include "test_decoder_compare.h"

static const char *const k_cases[] = {"lfm2", "lfm2_moe", "granitemoehybrid", "nemotron_h", "jamba", "falcon_h1", "recurrent_gemma", "mamba", "falcon_mamba", "mamba2", "qwen3_next", "qwen3_5_text", "minimax", "kimi_linear"};

static const char *fixture_dir(const char *name) {
    static char path[2048];
    snprintf(path, sizeof path, "%s/tests/fixtures/decoders/%s", mxl_test_repo_root(), name);
    return path;
}

static bool same_bits(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof(float)) == 0; }

/* The decode record against one path (test_decoder_compare.h). */
static void check_decode(const char *name, const mxl_decoder *d, json_t *rec, bool reference, mxl_threadpool *pool,
                         int *mxl_test_failed_) {
    const double tol = reference ? MXL_TEST_DEC_REF_TOL : MXL_TEST_DEC_FAST_DENSE_TOL;
    mxl_test_logit_result r;
    CHECK(mxl_test_decoder_decode_steps(d, rec, reference, tol, NULL, pool, &r));
    fprintf(stderr, "  %-14s %s 40 + 16 steps: max |diff| %.2e, greedy %d/%d\n", name, reference ? "[reference]" : "[fast]     ",
            r.max_diff, r.argmax_checked - r.argmax_bad, r.argmax_checked);
    CHECK(r.max_diff <= tol);
    CHECK_EQ_INT(r.argmax_bad, 0);
    CHECK(r.argmax_checked >= 8);
}

TEST(decoder_recurrent_decode_steps_match_transformers) {
    json_t *fx = mxl_test_decoder_cases();
    REQUIRE(fx);
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        json_t *c = mxl_test_find_case(fx, k_cases[i]), *rec = c ? json_object_get(c, "decode") : NULL;
        CHECK(rec != NULL);
        mxl_checkpoint *ck = NULL;
        mxl_decoder d;
        if (!rec || mxl_checkpoint_open(fixture_dir(k_cases[i]), &ck, &err) || mxl_decoder_load(ck, &d, &err)) {
            fprintf(stderr, "  %s: %s\n", k_cases[i], rec ? err.msg : "no decode record");
            CHECK(0);
            mxl_checkpoint_close(ck);
            continue;
        }
        check_decode(k_cases[i], &d, rec, true, pool, mxl_test_failed_);
        check_decode(k_cases[i], &d, rec, false, i % 2 ? pool : NULL, mxl_test_failed_);
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
    }
    mxl_threadpool_destroy(pool);
    json_decref(fx);
}

/* Runs ids[0..n) on a fresh state of batch `batch` (one call, chunked by the state), or one token
 * per call (per_token), into lg. */
static void run_fresh(const mxl_decoder *d, const int32_t *ids, int64_t n, int64_t batch, bool per_token, float *lg,
                      int *mxl_test_failed_) {
    mxl_decoder_state *s = NULL;
    mxl_error err;
    REQUIRE(mxl_decoder_state_create(d, 64, batch, NULL, &s, &err) == MXL_OK);
    for (int64_t i = 0; per_token && i < n; i++) CHECK_EQ_INT(mxl_decoder_forward(d, s, ids + i, 1, lg, &err), MXL_OK);
    if (!per_token) CHECK_EQ_INT(mxl_decoder_forward(d, s, ids, n, lg, &err), MXL_OK);
    mxl_decoder_state_destroy(s);
}

TEST(decoder_recurrent_chunks_truncate_adopt_fork) {
    mxl_error err;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        mxl_checkpoint *ck = NULL;
        mxl_decoder d;
        REQUIRE(mxl_checkpoint_open(fixture_dir(k_cases[i]), &ck, &err) == MXL_OK && mxl_decoder_load(ck, &d, &err) == MXL_OK);
        CHECK(d.rec_state_floats > 0);
        const int64_t V = d.hp.vocab;
        int32_t ids[30];
        for (int k = 0; k < 30; k++) ids[k] = (int32_t)((k * 53 + 7) % V);
        float *a = mxl_malloc((size_t)V * sizeof(float)), *b = mxl_malloc((size_t)V * sizeof(float));
        float *c = mxl_malloc((size_t)V * sizeof(float));
        REQUIRE(a && b && c);
        /* chunk sizes do not change a bit */
        run_fresh(&d, ids, 30, 30, false, a, mxl_test_failed_);
        run_fresh(&d, ids, 30, 7, false, b, mxl_test_failed_);
        run_fresh(&d, ids, 30, 1, true, c, mxl_test_failed_);
        CHECK(same_bits(a, b, V));
        CHECK(same_bits(a, c, V));
        /* truncating below the position starts over; running everything again gives a's bits */
        mxl_decoder_state *s = NULL, *f = NULL;
        REQUIRE(mxl_decoder_state_create(&d, 64, 8, NULL, &s, &err) == MXL_OK);
        REQUIRE(mxl_decoder_state_create(&d, 64, 8, NULL, &f, &err) == MXL_OK);
        CHECK_EQ_INT(mxl_decoder_forward(&d, s, ids, 20, b, &err), MXL_OK);
        mxl_decoder_state_truncate(s, 20); /* (at the position: nothing changes) */
        CHECK_EQ_INT(mxl_decoder_state_pos(s), 20);
        mxl_decoder_state_truncate(s, 12);
        CHECK_EQ_INT(mxl_decoder_state_pos(s), 0);
        CHECK_EQ_INT(mxl_decoder_forward(&d, s, ids, 30, b, &err), MXL_OK);
        CHECK(same_bits(a, b, V));
        /* cached blocks without their state are refused, nothing changed */
        const int32_t *tab = NULL;
        int64_t nb = mxl_decoder_state_blocks(s, &tab);
        CHECK(nb >= 1);
        CHECK_EQ_INT(mxl_decoder_state_adopt(f, tab, 20, &err), MXL_ERR_UNSUPPORTED);
        CHECK_EQ_INT(mxl_decoder_state_pos(f), 0);
        /* a fork (on the source's pool) at the source's position only; it continues as the source does */
        mxl_decoder_state_destroy(f);
        f = NULL;
        REQUIRE(mxl_decoder_state_create_pooled(&d, mxl_decoder_state_kv_pool(s), 64, 8, NULL, &f, &err) == MXL_OK);
        CHECK_EQ_INT(mxl_decoder_state_fork(f, s, 10, &err), MXL_ERR_UNSUPPORTED);
        CHECK_EQ_INT(mxl_decoder_state_fork(f, s, 30, &err), MXL_OK);
        CHECK_EQ_INT(mxl_decoder_state_pos(f), 30);
        const int32_t next[2] = {5, 77};
        CHECK_EQ_INT(mxl_decoder_forward(&d, s, next, 2, b, &err), MXL_OK);
        CHECK_EQ_INT(mxl_decoder_forward(&d, f, next, 2, c, &err), MXL_OK);
        CHECK(same_bits(b, c, V));
        mxl_decoder_state_destroy(f);
        mxl_decoder_state_destroy(s);
        mxl_free(a), mxl_free(b), mxl_free(c);
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
    }
}
