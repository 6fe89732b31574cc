/* test_alloc_faults.c - the allocation seam (core/alloc.h) and every out-of-memory path of a model
 * load (safetensors dense and MLX-quantized, GGUF), a tokenizer load (with an encode and a decode
 * of a sample text), and a chat template's parse and render. (The server's chat request is swept
 * over HTTP by tests/cli/test_alloc_faults_server.py.)
 *
 * Each sweep runs the operation once to warm up (first-use statics), counts the allocation calls
 * of a second, good run, then for n = 1..count makes the n-th call fail (mxl_alloc_fail_at) and
 * reruns it. A run whose allocation failed must return an error with a one-line, non-empty
 * message saying "out of memory" (or succeed with the good run's very result, where the failed
 * allocation had a fallback: PCRE2's JIT compilation), must not crash, and must leave the live
 * bytes as they were (the leak check of release builds; ASan's leak checker covers the sanitizer
 * run). A sweep over more than SWEEP_ALL calls runs every call up to SWEEP_ALL / 2 and an even
 * stride beyond (the last call included); each sweep prints how many calls it exercised. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "models/checkpoint.h"
#include "models/decoder.h"
#include "template/template.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

#define SWEEP_ALL 3000

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

/* One operation, run whole (its cleanup included): returns its status and, on success, a digest
 * of its result. */
typedef mxl_status (*op_fn)(const void *ctx, uint64_t *digest, mxl_error *err);

/* A failed run's message: non-empty, one line, and saying why. */
static bool oom_message_ok(const mxl_error *e) {
    if (!e->msg[0]) return false;
    for (const char *p = e->msg; *p; p++)
        if ((unsigned char)*p < 0x20) return false;
    return strstr(e->msg, "out of memory") != NULL;
}

static void sweep(const char *name, op_fn fn, const void *ctx, int *mxl_test_failed_) {
    mxl_error err = {0};
    uint64_t want = 0, got = 0;
    if (fn(ctx, &want, &err) != MXL_OK) fprintf(stderr, "  %s: %s\n", name, err.msg);
    REQUIRE(err.status == MXL_OK);
    int64_t live0 = mxl_alloc_live_bytes();
    uint64_t c0 = mxl_alloc_calls();
    REQUIRE(fn(ctx, &got, &err) == MXL_OK);
    uint64_t count = mxl_alloc_calls() - c0;
    CHECK(got == want);
    CHECK_EQ_INT(mxl_alloc_live_bytes(), live0);
    REQUIRE(count > 0);
    uint64_t head = count <= SWEEP_ALL ? count : SWEEP_ALL / 2;
    uint64_t stride = count <= SWEEP_ALL ? 1 : (count - head + SWEEP_ALL / 2 - 1) / (SWEEP_ALL / 2);
    uint64_t exercised = 0, errors = 0, fallbacks = 0, bad = 0;
    /* MXL_ALLOC_FAULT_ONLY=<n>: only the n-th call of each sweep (with a breakpoint on
     * alloc.c's alloc_fault_injected, a debugger shows where it is) */
    const char *only = getenv("MXL_ALLOC_FAULT_ONLY");
    for (uint64_t n = 1; n <= count; n = n < head ? n + 1 : (n + stride <= count || n == count ? n + stride : count)) {
        if (only && strtoull(only, NULL, 10) != n) continue;
        exercised++;
        mxl_error_clear(&err);
        uint64_t f0 = mxl_alloc_failures_injected();
        mxl_alloc_fail_at(n);
        mxl_status st = fn(ctx, &got, &err);
        mxl_alloc_fail_at(0);
        bool fired = mxl_alloc_failures_injected() != f0;
        int64_t leaked = mxl_alloc_live_bytes() - live0;
        const char *why = NULL;
        if (!fired && st != MXL_OK) why = "failed with no failed allocation";
        else if (st == MXL_OK && got != want) why = "succeeded with a different result";
        else if (st != MXL_OK && !oom_message_ok(&err)) why = "error message is not a one-line \"out of memory\"";
        else if (leaked) why = "leaked";
        if (st == MXL_OK && fired) {
            fallbacks++;
            if (getenv("MXL_ALLOC_FAULT_VERBOSE"))
                fprintf(stderr, "  %s: allocation %llu failed, same result (a fallback)\n", name, (unsigned long long)n);
        }
        if (st != MXL_OK) errors++;
        if (why) {
            if (bad++ < 20)
                fprintf(stderr, "  %s: allocation %llu of %llu failed: %s (status %s, %lld bytes leaked): %s\n", name,
                        (unsigned long long)n, (unsigned long long)count, why, mxl_status_name(st), (long long)leaked,
                        err.msg);
            live0 = mxl_alloc_live_bytes(); /* one leak reported once */
        }
    }
    fprintf(stderr, "  %-34s %6llu allocation calls, %6llu failed in turn: %llu errors, %llu fallbacks, %llu bad\n", name,
            (unsigned long long)count, (unsigned long long)exercised, (unsigned long long)errors,
            (unsigned long long)fallbacks, (unsigned long long)bad);
    CHECK(bad == 0);
}

/* ---------------------------------------------------------------- the seam itself */

TEST(alloc_seam_counts_and_fails_the_nth_call) {
    int64_t live = mxl_alloc_live_bytes();
    uint64_t calls = mxl_alloc_calls();
    char *a = mxl_malloc(100);
    int *b = mxl_calloc(10, sizeof(int));
    REQUIRE(a && b);
    CHECK_EQ_INT(mxl_alloc_live_bytes() - live, 100 + 10 * (int64_t)sizeof(int));
    CHECK(b[9] == 0);
    a = mxl_realloc(a, 1000);
    REQUIRE(a);
    CHECK_EQ_INT(mxl_alloc_live_bytes() - live, 1000 + 10 * (int64_t)sizeof(int));
    char *s = mxl_strndup("hello world", 5);
    CHECK_EQ_STR(s, "hello");
    void *al = mxl_aligned_alloc(64, 200);
    REQUIRE(al);
    CHECK(((uintptr_t)al & 63) == 0);
    CHECK_EQ_INT(mxl_alloc_calls() - calls, 5);
    mxl_free(s);
    mxl_aligned_free(al);
    mxl_free(a);
    mxl_free(b);
    CHECK_EQ_INT(mxl_alloc_live_bytes(), live);

    /* the 2nd call from now fails once; a failed realloc keeps the block */
    uint64_t f0 = mxl_alloc_failures_injected();
    mxl_alloc_fail_at(2);
    char *x = mxl_malloc(8);
    char *y = mxl_realloc(x, 64);
    char *z = mxl_malloc(8);
    mxl_alloc_fail_at(0);
    CHECK(x && !y && z);
    CHECK_EQ_INT(mxl_alloc_failures_injected() - f0, 1);
    mxl_free(x);
    mxl_free(z);
    CHECK(mxl_calloc(SIZE_MAX / 2, 4) == NULL); /* overflow refused */
    CHECK(mxl_malloc(SIZE_MAX - 8) == NULL);

    /* jansson allocates through the seam */
    calls = mxl_alloc_calls();
    json_t *j = json_pack("{s:[i,i]}", "k", 1, 2);
    char *d = json_dumps(j, JSON_COMPACT);
    CHECK(mxl_alloc_calls() > calls);
    CHECK_EQ_STR(d, "{\"k\":[1,2]}");
    mxl_free(d);
    json_decref(j);
    CHECK_EQ_INT(mxl_alloc_live_bytes(), live);
}

/* ---------------------------------------------------------------- model load */

static const char *fixture(const char *rel) {
    static char path[4][2048];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, 2048, "%s/tests/fixtures/%s", mxl_test_repo_root(), rel);
    return p;
}

static mxl_status op_model_load(const void *ctx, uint64_t *digest, mxl_error *err) {
    mxl_checkpoint *ck = NULL;
    mxl_status st = mxl_checkpoint_open(ctx, &ck, err);
    if (st) return st;
    mxl_decoder d;
    st = mxl_decoder_load(ck, &d, err);
    if (!st) {
        int64_t f[] = {d.hp.n_layers, d.hp.hidden, d.hp.n_heads, d.hp.n_kv_heads, d.hp.head_dim, d.hp.ffn, d.hp.vocab, d.hp.max_ctx};
        *digest = fnv(FNV0, f, sizeof f);
        mxl_decoder_free(&d);
    }
    mxl_checkpoint_close(ck);
    return st;
}

TEST(alloc_faults_model_load_safetensors) {
    sweep("model load llama (safetensors f32)", op_model_load, fixture("decoders/llama"), mxl_test_failed_);
    sweep("model load gemma3_text", op_model_load, fixture("decoders/gemma3_text"), mxl_test_failed_);
    sweep("model load qwen3 (MLX 4-bit)", op_model_load, fixture("decoders/qwen3_mlx_q4"), mxl_test_failed_);
}

TEST(alloc_faults_model_load_gguf) {
    sweep("model load qwen3 (GGUF f32)", op_model_load, fixture("decoders/gguf/qwen3_f32.gguf"), mxl_test_failed_);
    sweep("model load gpt2 (GGUF f16)", op_model_load, fixture("decoders/gguf/gpt2_f16.gguf"), mxl_test_failed_);
}

/* ---------------------------------------------------------------- tokenizer load */

static const char SAMPLE[] = "Hello, world! It's 2026: naïve café — 東京 🙂\n\tdon't  stop<s></s>";

static mxl_status op_tokenizer(const void *ctx, uint64_t *digest, mxl_error *err) {
    mxl_tokenizer *t = NULL;
    mxl_status st = mxl_tokenizer_load(ctx, &t, err);
    if (st) return st;
    mxl_token_ids ids = {0};
    char *text = NULL;
    size_t len = 0;
    st = mxl_tokenizer_encode(t, SAMPLE, sizeof SAMPLE - 1, MXL_TOK_ADD_SPECIAL | MXL_TOK_PARSE_SPECIAL, &ids, err);
    if (!st) st = mxl_tokenizer_decode(t, ids.ids, ids.n, false, &text, &len, err);
    if (!st) *digest = fnv(fnv(FNV0, ids.ids, ids.n * sizeof *ids.ids), text, len);
    mxl_free(text);
    mxl_token_ids_free(&ids);
    mxl_tokenizer_destroy(t);
    return st;
}

TEST(alloc_faults_tokenizer_load) {
    static const char *const names[] = {"bytelevel", "metaspace", "unigram", "unigram_unk", "wordlevel", "wordpiece",
                                        "precompiled"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char rel[128], label[64];
        snprintf(rel, sizeof rel, "tokenizers/synth_%s.tokenizer.json", names[i]);
        snprintf(label, sizeof label, "tokenizer synth_%s", names[i]);
        sweep(label, op_tokenizer, fixture(rel), mxl_test_failed_);
    }
}

/* A real tokenizer (Llama 2's: 32k pieces with byte fallback), strided. */
TEST(alloc_faults_tokenizer_load_real) {
    char path[2048];
    snprintf(path, sizeof path, "%s/../shared/testdata/tokenizers/llama2", mxl_test_repo_root());
    sweep("tokenizer llama2 (testdata)", op_tokenizer, path, mxl_test_failed_);
}

/* ---------------------------------------------------------------- template render */

typedef struct tpl_ctx {
    const char *src;
    size_t len;
    const json_t *conv;
} tpl_ctx;

static mxl_status op_template(const void *ctx, uint64_t *digest, mxl_error *err) {
    const tpl_ctx *c = ctx;
    mxl_template *t = NULL;
    mxl_status st = mxl_template_parse(c->src, c->len, "tpl", &t, err);
    if (st) return st;
    mxl_template_render_opts opts = {0};
    opts.now_set = true;
    opts.now_unix = 1768480496;
    json_t *vars = json_object_get(c->conv, "vars");
    mxl_chat_render_params p = {0};
    p.messages = json_object_get(c->conv, "messages");
    p.tools = json_object_get(c->conv, "tools");
    p.add_generation_prompt = json_is_true(json_object_get(vars, "add_generation_prompt"));
    p.extra = vars;
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    p.opts = &opts;
    char *out = NULL;
    size_t n = 0;
    mxl_template_error_kind kind;
    st = mxl_chat_template_render(t, &p, &out, &n, &kind, err);
    if (!st) *digest = fnv(FNV0, out, n);
    mxl_free(out);
    mxl_template_destroy(t);
    return st;
}

TEST(alloc_faults_template_render) {
    char path[2048];
    snprintf(path, sizeof path, "%s/../shared/testdata/templates/conversations.json", mxl_test_repo_root());
    json_error_t je;
    json_t *convs = json_load_file(path, 0, &je);
    REQUIRE(convs);
    json_t *conv = NULL;
    for (size_t i = 0; i < json_array_size(convs); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(convs, i), "id")), "tools_call_roundtrip"))
            conv = json_array_get(convs, i);
    static const char *const names[] = {"Qwen-Qwen3-0.6B", "meta-llama-Llama-3.1-8B-Instruct", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"};
    for (size_t i = 0; conv && i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/../shared/testdata/templates/templates/%s.jinja", mxl_test_repo_root(), names[i]);
        tpl_ctx c = {NULL, 0, conv};
        c.src = mxl_test_read_file(path, &c.len);
        CHECK(c.src);
        if (!c.src) continue;
        char label[96];
        snprintf(label, sizeof label, "template %s", names[i]);
        sweep(label, op_template, &c, mxl_test_failed_);
        mxl_free((char *)c.src);
    }
    CHECK(conv);
    json_decref(convs);
}
