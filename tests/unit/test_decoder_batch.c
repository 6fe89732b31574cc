/* test_decoder_batch.c - mxl_decoder_forward_batch (one decode step of several sequences, each
 * at its own position, with one matmul per weight) and mxl_decoder_state_truncate, against the
 * single-sequence path mxl_decoder_forward (checked against transformers by
 * test_decoder_families.c and test_decoder_real.c) as the reference.
 *
 * Batch: 5 sequences with different prompt lengths (1..14 tokens, past the sliding windows of
 * 4), context capacities and scratch sizes are first run one by one (prefill, then one token per
 * call); then the same sequences are prefilled again and advanced together with forward_batch,
 * in a different order at each step, with one sequence sitting out a step (so the batch rows
 * are at unrelated positions and the batch size changes), refusals tried mid-run. Every batch
 * logit row must equal the one-by-one row of the same sequence and position bit for bit, on
 * every family fixture (sliding windows, Gemma 2 soft-caps, NoPE layers, learned positions, MLX
 * 4- and 8-bit weights) and on SmolLM2 GGUF, on both paths:
 *  - reference path (f32 activations, dequantized weights): each row's dot is computed alone in
 *    one fixed order;
 *  - fast path: activations are quantized to int8 per row (q8a / Q8_K blocks never span rows)
 *    and the matmul kernels are batch-invariant (backends/cpu/matmul.h: a (row, token) pair is
 *    computed with the same operations in the same order whether the kernel takes 1 or 4 tokens;
 *    tests/unit/test_kernels_invariance.c). Before those kernels, the AVX-512 4x4 micro-kernels
 *    summed in another order than the lone-row dot: the batch rows then differed by ~3e-6 on
 *    the fixtures and, through SmolLM2's 30 layers of int8 activations (a last-bit change flips
 *    an int8 rounding), by up to ~1.2 logits, as large as the fast path's own distance from the
 *    reference path. Bitwise equality is what makes greedy output independent of the batch.
 * Attention is the same per-(token, head) computation over the sequence's own cache whichever
 * thread runs it. Errors (repeated state, NULL state, a full context, a bad id, mixed paths, no
 * state with scratch for the batch) must leave every state's position unchanged.
 *
 * Truncate: prefill A+B, truncate to len(A), prefill C must give the logits of a fresh prefill
 * of A+C bit for bit (both paths), then decode on identically. */
#include <math.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "models/decoder.h"
#include "test.h"

#define N_SEQ 5
#define MAX_STEPS 8

typedef struct batch_case {
    int n_seqs;
    int prompt_len[N_SEQ];
    int64_t ctx[N_SEQ];       /* context capacity per sequence */
    int64_t max_batch[N_SEQ]; /* scratch rows per state (the batch borrows a state's scratch) */
    int steps;
    bool reference;
} batch_case;

/* Deterministic token ids of sequence i: its prompt, then its decode inputs. */
static int32_t tok(int64_t vocab, int i, int k) { return (int32_t)(((int64_t)i * 7919 + (int64_t)k * 104729 + 13) % vocab); }

static bool same_bits(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof(float)) == 0; }

/* Logit rows of a run: [seq][step] with step 0 the prompt's last position, steps 1..steps the
 * decode inputs. */
static float *row_at(float *rows, int64_t V, int i, int step) { return rows + (size_t)(i * (MAX_STEPS + 1) + step) * (size_t)V; }

static void destroy_all(mxl_decoder_state **s, int n) {
    for (int i = 0; i < n; i++) {
        mxl_decoder_state_destroy(s[i]);
        s[i] = NULL;
    }
}

/* Prefills every sequence of c on fresh states (the same chunking in every run). */
static bool prefill(const mxl_decoder *d, const batch_case *c, bool reference, mxl_threadpool *pool, mxl_decoder_state **s,
                    float *rows) {
    mxl_error err;
    int32_t prompt[64];
    for (int i = 0; i < c->n_seqs; i++) {
        if (mxl_decoder_state_create(d, c->ctx[i], c->max_batch[i], pool, &s[i], &err) != MXL_OK) return false;
        mxl_decoder_state_set_reference(s[i], reference);
        for (int k = 0; k < c->prompt_len[i]; k++) prompt[k] = tok(d->hp.vocab, i, k);
        if (mxl_decoder_forward(d, s[i], prompt, c->prompt_len[i], row_at(rows, d->hp.vocab, i, 0), &err) != MXL_OK) return false;
    }
    return true;
}

/* The yardstick: each sequence alone, one token per mxl_decoder_forward. */
static void run_one_by_one(const mxl_decoder *d, const batch_case *c, bool reference, mxl_threadpool *pool, float *rows,
                           int *mxl_test_failed_) {
    const int64_t V = d->hp.vocab;
    mxl_error err;
    mxl_decoder_state *s[N_SEQ] = {0};
    bool ok = prefill(d, c, reference, pool, s, rows);
    CHECK(ok);
    for (int i = 0; i < c->n_seqs && ok; i++)
        for (int k = 0; k < c->steps && ok; k++) {
            int32_t t = tok(V, i, c->prompt_len[i] + k);
            ok = mxl_decoder_forward(d, s[i], &t, 1, row_at(rows, V, i, k + 1), &err) == MXL_OK;
            CHECK(ok);
        }
    destroy_all(s, c->n_seqs);
}

/* The refusals, tried in the middle of a run: every one must leave every position as it was. */
static void check_refusals(const mxl_decoder *d, const batch_case *c, mxl_decoder_state **all, mxl_decoder_state **bs,
                           int32_t *bt, int m, mxl_threadpool *pool, float *out, int *mxl_test_failed_) {
    const int64_t V = d->hp.vocab;
    mxl_error err;
    int64_t before[N_SEQ];
    for (int i = 0; i < c->n_seqs; i++) before[i] = mxl_decoder_state_pos(all[i]);
    if (m >= 2) { /* a state twice */
        mxl_decoder_state *dup[N_SEQ + 1];
        int32_t dt[N_SEQ + 1];
        memcpy(dup, bs, (size_t)m * sizeof *bs);
        memcpy(dt, bt, (size_t)m * sizeof *bt);
        dup[m] = bs[0];
        dt[m] = bt[0];
        CHECK_EQ_INT(mxl_decoder_forward_batch(d, dup, dt, m + 1, out, &err), MXL_ERR_ARG);
        CHECK(strstr(err.msg, "repeats") != NULL);
    }
    int32_t bad[N_SEQ + 1];
    memcpy(bad, bt, (size_t)m * sizeof *bt);
    bad[m - 1] = (int32_t)V;
    CHECK_EQ_INT(mxl_decoder_forward_batch(d, bs, bad, m, out, &err), MXL_ERR_ARG);
    CHECK(strstr(err.msg, "vocabulary") != NULL);
    bad[m - 1] = -1;
    CHECK_EQ_INT(mxl_decoder_forward_batch(d, bs, bad, m, out, &err), MXL_ERR_ARG);
    bs[m] = NULL;
    bt[m] = 0;
    CHECK_EQ_INT(mxl_decoder_forward_batch(d, bs, bt, m + 1, out, &err), MXL_ERR_ARG);
    CHECK_EQ_INT(mxl_decoder_forward_batch(d, bs, bt, 0, out, &err), MXL_ERR_ARG);
    /* a full context at the end of the batch */
    mxl_decoder_state *full = NULL;
    const int32_t three[3] = {1, 2, 3};
    REQUIRE(mxl_decoder_state_create(d, 3, 8, pool, &full, &err) == MXL_OK);
    mxl_decoder_state_set_reference(full, c->reference);
    REQUIRE(mxl_decoder_forward(d, full, three, 3, out, &err) == MXL_OK);
    bs[m] = full;
    CHECK_EQ_INT(mxl_decoder_forward_batch(d, bs, bt, m + 1, out, &err), MXL_ERR_ARG);
    CHECK(strstr(err.msg, "context full") != NULL);
    CHECK_EQ_INT(mxl_decoder_state_pos(full), 3);
    /* a state on the other matmul path */
    mxl_decoder_state_truncate(full, 0);
    mxl_decoder_state_set_reference(full, !c->reference);
    CHECK_EQ_INT(mxl_decoder_forward_batch(d, bs, bt, m + 1, out, &err), MXL_ERR_ARG);
    CHECK(strstr(err.msg, "reference") != NULL);
    mxl_decoder_state_destroy(full);
    for (int i = 0; i < c->n_seqs; i++) CHECK_EQ_INT(mxl_decoder_state_pos(all[i]), before[i]);
}

/* The same sequences advanced together with forward_batch: a different order at each step,
 * sequence 1 sitting out step 1 (so it finishes alone), the refusals tried at step 2. */
static void run_batched(const mxl_decoder *d, const batch_case *c, mxl_threadpool *pool, float *rows, int *mxl_test_failed_) {
    const int64_t V = d->hp.vocab;
    const int n = c->n_seqs;
    mxl_error err;
    mxl_decoder_state *s[N_SEQ] = {0};
    float *out = mxl_malloc((size_t)(N_SEQ + 1) * (size_t)V * sizeof(float));
    bool ok = out && prefill(d, c, c->reference, pool, s, rows);
    CHECK(ok);
    int done[N_SEQ] = {0};
    for (int step = 0; ok; step++) {
        mxl_decoder_state *bs[N_SEQ + 1];
        int32_t bt[N_SEQ + 1];
        int who[N_SEQ], m = 0;
        for (int j = 0; j < n; j++) {
            int i = (j + step) % n;
            if (step == 1 && i == 1 && n > 2) continue;
            if (done[i] >= c->steps) continue;
            bs[m] = s[i];
            bt[m] = tok(V, i, c->prompt_len[i] + done[i]);
            who[m++] = i;
        }
        if (m == 0) break;
        if (step == 2) check_refusals(d, c, s, bs, bt, m, pool, out, mxl_test_failed_);
        if (mxl_decoder_forward_batch(d, bs, bt, m, out, &err) != MXL_OK) {
            fprintf(stderr, "  %s\n", err.msg);
            CHECK(0);
            break;
        }
        for (int j = 0; j < m; j++) {
            int i = who[j];
            memcpy(row_at(rows, V, i, ++done[i]), out + (size_t)j * (size_t)V, (size_t)V * sizeof(float));
        }
    }
    for (int i = 0; i < n && ok; i++) CHECK_EQ_INT(mxl_decoder_state_pos(s[i]), c->prompt_len[i] + c->steps);
    destroy_all(s, n);
    mxl_free(out);
}

typedef struct row_diff {
    int64_t rows, exact; /* decode rows compared, bit-identical ones */
    double max, mean;    /* of |a - b| over every logit */
    double range;        /* largest |b| */
} row_diff;

static row_diff compare_rows(const batch_case *c, int64_t V, float *a, float *b) {
    row_diff r = {0, 0, 0, 0, 0};
    double sum = 0;
    for (int i = 0; i < c->n_seqs; i++)
        for (int k = 1; k <= c->steps; k++) {
            const float *x = row_at(a, V, i, k), *y = row_at(b, V, i, k);
            r.rows++;
            r.exact += memcmp(x, y, (size_t)V * sizeof(float)) == 0;
            for (int64_t v = 0; v < V; v++) {
                double dv = fabs((double)x[v] - y[v]);
                if (!(dv <= r.max)) r.max = dv; /* NaN propagates */
                sum += dv;
                if (fabs(y[v]) > r.range) r.range = fabs(y[v]);
            }
        }
    r.mean = r.rows ? sum / (double)(r.rows * V) : 0;
    return r;
}

/* Runs case c one by one and batched; every batch row must be bit-identical. */
static void check_case(const char *name, const mxl_decoder *d, const batch_case *c, mxl_threadpool *pool, int *mxl_test_failed_) {
    const int64_t V = d->hp.vocab;
    size_t bytes = (size_t)(c->n_seqs * (MAX_STEPS + 1)) * (size_t)V * sizeof(float);
    float *single = mxl_malloc(bytes), *batch = mxl_malloc(bytes);
    REQUIRE(single && batch && c->n_seqs <= N_SEQ && c->steps <= MAX_STEPS);
    run_one_by_one(d, c, c->reference, pool, single, mxl_test_failed_);
    run_batched(d, c, pool, batch, mxl_test_failed_);
    /* the prefills ran the same calls on the same path */
    for (int i = 0; i < c->n_seqs; i++) CHECK(same_bits(row_at(single, V, i, 0), row_at(batch, V, i, 0), V));
    row_diff bd = compare_rows(c, V, batch, single);
    fprintf(stderr, "  %-22s %s batch vs one by one: %lld/%lld rows bit-identical, max |diff| %.2e, mean %.2e (logits up to %.2f)\n",
            name, c->reference ? "[reference]" : "[fast]     ", (long long)bd.exact, (long long)bd.rows, bd.max, bd.mean, bd.range);
    CHECK_EQ_INT(bd.rows, (int64_t)c->n_seqs * c->steps);
    CHECK_EQ_INT(bd.exact, bd.rows);
    CHECK(bd.range > 0.1 && isfinite(bd.range)); /* real logits, not an all-zero pass */
    mxl_free(single);
    mxl_free(batch);
}

static const char *fixture_dir(const char *name) {
    static char path[2048];
    snprintf(path, sizeof path, "%s/tests/fixtures/decoders/%s", mxl_test_repo_root(), name);
    return path;
}

static const char *const k_fixtures[] = {
    "llama", "llama_bias_llama3rope", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text",
    "phi3", "olmo2", "granite", "smollm3", "starcoder2", "gpt2", "qwen3_mlx_q4", "phi3_mlx_q8",
    /* mixtures of experts: rows grouped by expert (models/moe.h), a shared expert, MLX experts */
    "mixtral", "qwen2_moe", "qwen2_moe_mlx_q4", "glm4_moe",
    /* latent attention (models/mla.h): absorbed per-head maps, the latent cache */
    "deepseek_v2", "deepseek_v3",
    /* chunked attention, NoPE layers with the temperature, experts weighted on their inputs */
    "llama4_text",
    /* attention sinks, expert biases, the clamped SwiGLU */
    "gpt_oss",
    /* query heads per layer, softplus output gates */
    "laguna",
    /* sparsemixer routing, LayerNorms with biases, an LM head bias */
    "phimoe",
    /* per-layer head sizes, KV-shared layers, per-layer inputs; V from K's projection; experts beside the MLP; AltUp streams */
    "gemma4_text", "gemma4_text_keqv", "gemma4_text_moe", "gemma3n_text",
    /* recurrent layers (models/recurrent.h): each row's own state, beside attention (LFM2) */
    "lfm2", "mamba", "mamba2", "qwen3_next", "granitemoehybrid", "nemotron_h", "falcon_h1", "recurrent_gemma", "minimax", "kimi_linear",
};

static const batch_case k_fixture_case = {
    N_SEQ, {3, 9, 1, 14, 6}, {24, 32, 64, 40, 17}, {2, 8, 4, 16, 5}, 6, true,
};

/* Opens and loads fixture `name` (a failed CHECK, naming it, when it cannot). */
static bool load_fixture(const char *name, mxl_checkpoint **ck, mxl_decoder *d, int *mxl_test_failed_) {
    mxl_error err;
    if (mxl_checkpoint_open(fixture_dir(name), ck, &err) == MXL_OK && mxl_decoder_load(*ck, d, &err) == MXL_OK) return true;
    fprintf(stderr, "  %s: %s\n", name, err.msg);
    CHECK(0);
    mxl_checkpoint_close(*ck);
    *ck = NULL;
    return false;
}

static void run_fixtures(bool reference, int *mxl_test_failed_) {
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    for (size_t f = 0; f < sizeof k_fixtures / sizeof k_fixtures[0]; f++) {
        mxl_checkpoint *ck = NULL;
        mxl_decoder d;
        if (!load_fixture(k_fixtures[f], &ck, &d, mxl_test_failed_)) continue;
        batch_case c = k_fixture_case;
        c.reference = reference;
        /* the pool and no pool: the split over threads must not matter */
        check_case(k_fixtures[f], &d, &c, f % 2 ? pool : NULL, mxl_test_failed_);
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
    }
    mxl_threadpool_destroy(pool);
}

TEST(decoder_batch_reference_equals_one_by_one_bitwise) { run_fixtures(true, mxl_test_failed_); }

TEST(decoder_batch_fast_path_equals_one_by_one_bitwise) { run_fixtures(false, mxl_test_failed_); }

/* mxl_decoder_forward_spans: the 5 prompts prefilled in one pass, then a pass mixing one decode
 * token for four sequences with two tokens for the fifth, give each sequence the logits of its
 * one-by-one run bit for bit; a pass with too many rows for any state is refused. */
static void check_spans(const char *name, const mxl_decoder *d, batch_case c, mxl_threadpool *pool, int *mxl_test_failed_) {
    const int64_t V = d->hp.vocab;
    mxl_error err;
    float *rows = mxl_malloc((size_t)(N_SEQ * (MAX_STEPS + 1)) * (size_t)V * sizeof(float));
    float *out = mxl_malloc((size_t)N_SEQ * (size_t)V * sizeof(float));
    REQUIRE(rows && out);
    run_one_by_one(d, &c, c.reference, pool, rows, mxl_test_failed_);
    mxl_decoder_state *s[N_SEQ] = {0};
    int32_t toks[64];
    int64_t counts[N_SEQ], total = 0;
    for (int i = 0; i < c.n_seqs; i++) {
        REQUIRE(mxl_decoder_state_create(d, c.ctx[i], i == 3 ? 40 : c.max_batch[i], pool, &s[i], &err) == MXL_OK);
        mxl_decoder_state_set_reference(s[i], c.reference);
        for (int k = 0; k < c.prompt_len[i]; k++) toks[total + k] = tok(V, i, k);
        counts[i] = c.prompt_len[i];
        total += counts[i];
    }
    CHECK_EQ_INT(mxl_decoder_forward_spans(d, s, toks, counts, c.n_seqs, out, &err), MXL_OK);
    int exact = 0;
    for (int i = 0; i < c.n_seqs; i++) exact += same_bits(out + (size_t)i * (size_t)V, row_at(rows, V, i, 0), V);
    /* mixed: sequence 2 runs its first two decode inputs, the others one */
    total = 0;
    for (int i = 0; i < c.n_seqs; i++) {
        counts[i] = i == 2 ? 2 : 1;
        for (int k = 0; k < counts[i]; k++) toks[total + k] = tok(V, i, c.prompt_len[i] + k);
        total += counts[i];
    }
    CHECK_EQ_INT(mxl_decoder_forward_spans(d, s, toks, counts, c.n_seqs, out, &err), MXL_OK);
    for (int i = 0; i < c.n_seqs; i++) exact += same_bits(out + (size_t)i * (size_t)V, row_at(rows, V, i, i == 2 ? 2 : 1), V);
    if (exact != 2 * c.n_seqs) fprintf(stderr, "  %s (%s): %d of %d span rows bit-identical\n", name, c.reference ? "reference" : "fast", exact, 2 * c.n_seqs);
    CHECK_EQ_INT(exact, 2 * c.n_seqs);
    /* more rows than any state's batch: refused, nothing moved */
    for (int i = 0; i < c.n_seqs; i++) counts[i] = 9;
    for (int k = 0; k < 45; k++) toks[k] = tok(V, 0, k);
    CHECK_EQ_INT(mxl_decoder_forward_spans(d, s, toks, counts, c.n_seqs, out, &err), MXL_ERR_ARG);
    for (int i = 0; i < c.n_seqs; i++) CHECK_EQ_INT(mxl_decoder_state_pos(s[i]), c.prompt_len[i] + (i == 2 ? 2 : 1));
    destroy_all(s, c.n_seqs);
    mxl_free(rows), mxl_free(out);
}

/* fn on every fixture, on both paths (with and without a pool: the split over threads must not
 * matter). */
typedef void (*fixture_check)(const char *name, const mxl_decoder *d, batch_case c, mxl_threadpool *pool, int *mxl_test_failed_);
static void each_fixture_both_paths(fixture_check fn, int *mxl_test_failed_) {
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    for (size_t f = 0; f < sizeof k_fixtures / sizeof k_fixtures[0]; f++) {
        mxl_checkpoint *ck = NULL;
        mxl_decoder d;
        if (!load_fixture(k_fixtures[f], &ck, &d, mxl_test_failed_)) continue;
        for (int ref = 0; ref < 2; ref++) {
            batch_case c = k_fixture_case;
            c.reference = ref;
            fn(k_fixtures[f], &d, c, f % 2 ? pool : NULL, mxl_test_failed_);
        }
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
    }
    mxl_threadpool_destroy(pool);
}

TEST(decoder_spans_prefill_and_mixed_equal_one_by_one_bitwise) { each_fixture_both_paths(check_spans, mxl_test_failed_); }

/* mxl_decoder_forward_all (speculative decoding's verification pass): each sequence's prompt
 * run as in the one-by-one run, then its decode inputs in one pass with the logits of every row:
 * row k must be the one-by-one row after decode input k bit for bit, so a verified draft gives
 * plain decoding's tokens. A pass longer than the state's batch is refused, nothing moved. */
static void check_all_rows(const char *name, const mxl_decoder *d, batch_case c, mxl_threadpool *pool, int *mxl_test_failed_) {
    const int64_t V = d->hp.vocab;
    mxl_error err;
    float *rows = mxl_malloc((size_t)(N_SEQ * (MAX_STEPS + 1)) * (size_t)V * sizeof(float));
    float *out = mxl_malloc((size_t)(MAX_STEPS + 1) * (size_t)V * sizeof(float));
    REQUIRE(rows && out);
    run_one_by_one(d, &c, c.reference, pool, rows, mxl_test_failed_);
    int exact = 0, total = 0;
    for (int i = 0; i < c.n_seqs; i++) {
        mxl_decoder_state *s = NULL;
        int32_t toks[64];
        REQUIRE(mxl_decoder_state_create(d, c.ctx[i], 16, pool, &s, &err) == MXL_OK);
        mxl_decoder_state_set_reference(s, c.reference);
        for (int k = 0; k < c.prompt_len[i] + c.steps; k++) toks[k] = tok(V, i, k);
        CHECK_EQ_INT(mxl_decoder_forward(d, s, toks, c.prompt_len[i], out, &err), MXL_OK);
        const int steps = c.prompt_len[i] + c.steps <= c.ctx[i] ? c.steps : (int)(c.ctx[i] - c.prompt_len[i]);
        CHECK_EQ_INT(mxl_decoder_forward_all(d, s, toks + c.prompt_len[i], 17, out, &err), MXL_ERR_ARG);
        CHECK_EQ_INT(mxl_decoder_state_pos(s), c.prompt_len[i]);
        CHECK_EQ_INT(mxl_decoder_forward_all(d, s, toks + c.prompt_len[i], steps, out, &err), MXL_OK);
        for (int k = 0; k < steps; k++) exact += same_bits(out + (size_t)k * (size_t)V, row_at(rows, V, i, k + 1), V);
        total += steps;
        mxl_decoder_state_destroy(s);
    }
    if (exact != total) fprintf(stderr, "  %s (%s): %d of %d verification rows bit-identical\n", name, c.reference ? "reference" : "fast", exact, total);
    CHECK_EQ_INT(exact, total);
    mxl_free(rows), mxl_free(out);
}

TEST(decoder_forward_all_rows_equal_one_by_one_bitwise) { each_fixture_both_paths(check_all_rows, mxl_test_failed_); }

/* A batch whose only free scratch is too small is refused; n_seqs == 1 is the single path. */
TEST(decoder_batch_scratch_and_single) {
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    REQUIRE(mxl_checkpoint_open(fixture_dir("gemma2"), &ck, &err) == MXL_OK);
    REQUIRE(mxl_decoder_load(ck, &d, &err) == MXL_OK);
    int64_t V = d.hp.vocab;
    mxl_decoder_state *a = NULL, *b = NULL, *c = NULL;
    REQUIRE(mxl_decoder_state_create(&d, 32, 1, NULL, &a, &err) == MXL_OK);
    REQUIRE(mxl_decoder_state_create(&d, 32, 1, NULL, &b, &err) == MXL_OK);
    REQUIRE(mxl_decoder_state_create(&d, 32, 8, NULL, &c, &err) == MXL_OK);
    float *l1 = mxl_malloc((size_t)(3 * V) * sizeof(float)), *l2 = mxl_malloc((size_t)V * sizeof(float));
    REQUIRE(l1 && l2);
    int32_t ids[8] = {5, 77, 3, 200, 9, 41, 1, 18};
    mxl_decoder_state *ab[2] = {a, b};
    CHECK_EQ_INT(mxl_decoder_forward_batch(&d, ab, ids, 2, l1, &err), MXL_ERR_ARG);
    CHECK(strstr(err.msg, "batches of at least 2") != NULL);
    CHECK_EQ_INT(mxl_decoder_state_pos(a), 0);
    CHECK_EQ_INT(mxl_decoder_state_pos(b), 0);
    /* fast path, one sequence: the same bits as a one-token forward on an identical state */
    REQUIRE(mxl_decoder_forward(&d, a, ids, 7, l1, &err) == MXL_OK);
    REQUIRE(mxl_decoder_forward(&d, b, ids, 7, l2, &err) == MXL_OK);
    REQUIRE(mxl_decoder_forward(&d, a, ids + 7, 1, l1, &err) == MXL_OK);
    REQUIRE(mxl_decoder_forward_batch(&d, &b, ids + 7, 1, l2, &err) == MXL_OK);
    CHECK(same_bits(l1, l2, V));
    /* states with scratch for one row each plus one whose scratch holds the batch; on the
     * reference path, a and b (the same sequence) must give the same row */
    mxl_decoder_state *abc[3] = {a, b, c};
    REQUIRE(mxl_decoder_forward(&d, c, ids, 3, l1, &err) == MXL_OK);
    for (int i = 0; i < 3; i++) mxl_decoder_state_set_reference(abc[i], true);
    int32_t nxt[3] = {11, 11, 12};
    CHECK(mxl_decoder_forward_batch(&d, abc, nxt, 3, l1, &err) == MXL_OK);
    CHECK_EQ_INT(mxl_decoder_state_pos(a), 9);
    CHECK_EQ_INT(mxl_decoder_state_pos(b), 9);
    CHECK_EQ_INT(mxl_decoder_state_pos(c), 4);
    CHECK(same_bits(l1, l1 + V, V)); /* a and b hold the same sequence */
    mxl_free(l1);
    mxl_free(l2);
    mxl_decoder_state_destroy(a);
    mxl_decoder_state_destroy(b);
    mxl_decoder_state_destroy(c);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
}

/* ---- truncate ---- */

/* prefill A+B, truncate to len(A), prefill C == fresh A+C. */
static void check_truncate(const mxl_decoder *d, bool reference, mxl_threadpool *pool, int *mxl_test_failed_) {
    enum { LA = 6, LB = 5, LC = 4 };
    int64_t V = d->hp.vocab;
    int32_t ab[LA + LB], ac[LA + LC];
    for (int k = 0; k < LA + LB; k++) ab[k] = tok(V, 3, k);
    memcpy(ac, ab, LA * sizeof *ab);
    for (int k = 0; k < LC; k++) ac[LA + k] = tok(V, 4, k);
    float *l1 = mxl_malloc((size_t)V * sizeof(float)), *l2 = mxl_malloc((size_t)V * sizeof(float)), *l3 = mxl_malloc((size_t)V * sizeof(float));
    REQUIRE(l1 && l2 && l3);
    mxl_error err;
    mxl_decoder_state *s = NULL, *f = NULL;
    /* different chunk sizes on purpose: the result may not depend on how the rows were grouped */
    REQUIRE(mxl_decoder_state_create(d, 32, 4, pool, &s, &err) == MXL_OK);
    REQUIRE(mxl_decoder_state_create(d, 32, 16, pool, &f, &err) == MXL_OK);
    mxl_decoder_state_set_reference(s, reference);
    mxl_decoder_state_set_reference(f, reference);
    REQUIRE(mxl_decoder_forward(d, s, ab, LA + LB, l1, &err) == MXL_OK);
    mxl_decoder_state_truncate(s, LA + LB + 3); /* no-op past the end */
    CHECK_EQ_INT(mxl_decoder_state_pos(s), LA + LB);
    mxl_decoder_state_truncate(s, LA);
    CHECK_EQ_INT(mxl_decoder_state_pos(s), LA);
    REQUIRE(mxl_decoder_forward(d, s, ac + LA, LC, l1, &err) == MXL_OK);
    REQUIRE(mxl_decoder_forward(d, f, ac, LA + LC, l2, &err) == MXL_OK);
    CHECK(same_bits(l1, l2, V));
    memcpy(l3, l2, (size_t)V * sizeof(float));
    /* and the decode steps after it */
    int32_t t = 17;
    REQUIRE(mxl_decoder_forward(d, s, &t, 1, l1, &err) == MXL_OK);
    REQUIRE(mxl_decoder_forward(d, f, &t, 1, l2, &err) == MXL_OK);
    CHECK(same_bits(l1, l2, V));
    /* truncate to 0 (or below) is a fresh start */
    mxl_decoder_state_truncate(s, -1);
    CHECK_EQ_INT(mxl_decoder_state_pos(s), 0);
    REQUIRE(mxl_decoder_forward(d, s, ac, LA + LC, l1, &err) == MXL_OK);
    CHECK(same_bits(l1, l3, V));
    mxl_free(l1);
    mxl_free(l2);
    mxl_free(l3);
    mxl_decoder_state_destroy(s);
    mxl_decoder_state_destroy(f);
}

TEST(decoder_batch_truncate_then_prefill_equals_fresh) {
    static const char *const names[] = {"llama", "mistral", "gemma2", "gemma3_text", "smollm3", "gpt2", "qwen3_mlx_q4"};
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        mxl_checkpoint *ck = NULL;
        mxl_decoder d;
        REQUIRE(mxl_checkpoint_open(fixture_dir(names[i]), &ck, &err) == MXL_OK);
        REQUIRE(mxl_decoder_load(ck, &d, &err) == MXL_OK);
        int before = *mxl_test_failed_;
        check_truncate(&d, true, pool, mxl_test_failed_);
        check_truncate(&d, false, pool, mxl_test_failed_);
        if (*mxl_test_failed_ != before) fprintf(stderr, "  (in %s)\n", names[i]);
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
    }
    mxl_threadpool_destroy(pool);
}

/* ---- the real model ---- */

TEST(slow_decoder_batch_smollm2) {
    const char *path = mxl_test_model_path("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf");
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    if (mxl_checkpoint_open(path, &ck, &err) != MXL_OK) {
        fprintf(stderr, "  %s (run scripts/fetch-models.sh)\n", err.msg);
        REQUIRE(0);
    }
    REQUIRE(mxl_decoder_load(ck, &d, &err) == MXL_OK);
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    batch_case c = {4, {7, 2, 12, 5}, {64, 32, 128, 48}, {4, 1, 8, 2}, 6, false};
    check_case("smollm2", &d, &c, pool, mxl_test_failed_);
    c.reference = true;
    c.steps = 3;
    check_case("smollm2", &d, &c, pool, mxl_test_failed_);
    check_truncate(&d, false, pool, mxl_test_failed_);
    mxl_threadpool_destroy(pool);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
}
