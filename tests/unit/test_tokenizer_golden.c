/* test_tokenizer_golden.c - tokenizers against Hugging Face `tokenizers` goldens
 * (tests/fixtures/tokenizers/<name>.json, made by gen_tokenizer_goldens.py).
 *
 * Per case: ids with special tokens parsed, ids with special tokens as text (HF
 * encode_special_tokens=True), ids with the post-processor, decode with and without
 * skip_special_tokens, and the streaming detokenizer's output (which must equal the full decode).
 * Each tokenizer is loaded once per test. Real tokenizers come from ../shared/testdata and the
 * model store; a missing file fails the test. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "io/store.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

static bool ids_equal(const mxl_token_ids *got, json_t *want) {
    if (!json_is_array(want) || json_array_size(want) != got->n) return false;
    for (size_t i = 0; i < got->n; i++)
        if (json_integer_value(json_array_get(want, i)) != got->ids[i]) return false;
    return true;
}

static void print_ids_diff(const char *what, const char *text, const mxl_token_ids *got, json_t *want) {
    fprintf(stderr, "    %s mismatch for \"%.60s\"\n      want:", what, text);
    for (size_t i = 0; i < json_array_size(want) && i < 24; i++)
        fprintf(stderr, " %lld", (long long)json_integer_value(json_array_get(want, i)));
    fprintf(stderr, "\n      got: ");
    for (size_t i = 0; i < got->n && i < 24; i++) fprintf(stderr, " %d", got->ids[i]);
    fprintf(stderr, "\n");
}

/* Runs every case of fixture `name` against the tokenizer at tok_path. */
static void run_golden(int *mxl_test_failed_, const char *name, const char *tok_path) {
    char fx[4096];
    snprintf(fx, sizeof fx, "%s/tests/fixtures/tokenizers/%s.json", mxl_test_repo_root(), name);
    json_error_t je;
    json_t *doc = json_load_file(fx, JSON_ALLOW_NUL, &je);
    REQUIRE(doc != NULL);
    json_t *cases = json_object_get(doc, "cases");
    REQUIRE(json_is_array(cases) && json_array_size(cases) > 0);
    mxl_tokenizer *t = NULL;
    mxl_error err = {0};
    mxl_status st = mxl_tokenizer_load_json_file(tok_path, &t, &err);
    if (st != MXL_OK) fprintf(stderr, "  %s\n", err.msg);
    if (st != MXL_OK) json_decref(doc);
    REQUIRE(st == MXL_OK);
    size_t n = json_array_size(cases), ok_ids = 0, ok_plain = 0, ok_post = 0, ok_dec = 0, ok_skip = 0,
           ok_stream = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(cases, i);
        const char *text = json_string_value(json_object_get(c, "text"));
        size_t tl = json_string_length(json_object_get(c, "text"));
        mxl_token_ids a = {0}, b = {0}, p = {0};
        CHECK(mxl_tokenizer_encode(t, text, tl, MXL_TOK_PARSE_SPECIAL, &a, &err) == MXL_OK);
        CHECK(mxl_tokenizer_encode(t, text, tl, 0, &b, &err) == MXL_OK);
        CHECK(mxl_tokenizer_encode(t, text, tl, MXL_TOK_PARSE_SPECIAL | MXL_TOK_ADD_SPECIAL, &p, &err) == MXL_OK);
        if (ids_equal(&a, json_object_get(c, "ids"))) ok_ids++;
        else print_ids_diff("ids", text, &a, json_object_get(c, "ids"));
        if (ids_equal(&b, json_object_get(c, "ids_plain"))) ok_plain++;
        else print_ids_diff("ids_plain", text, &b, json_object_get(c, "ids_plain"));
        if (ids_equal(&p, json_object_get(c, "ids_post"))) ok_post++;
        else print_ids_diff("ids_post", text, &p, json_object_get(c, "ids_post"));
        /* decode the reference ids */
        json_t *want_ids = json_object_get(c, "ids");
        size_t m = json_array_size(want_ids);
        int32_t *ids = mxl_malloc((m + 1) * sizeof(int32_t));
        for (size_t k = 0; k < m; k++) ids[k] = (int32_t)json_integer_value(json_array_get(want_ids, k));
        char *dec = NULL;
        size_t dl = 0;
        const char *want_dec = json_string_value(json_object_get(c, "text_dec"));
        size_t wdl = json_string_length(json_object_get(c, "text_dec"));
        if (mxl_tokenizer_decode(t, ids, m, false, &dec, &dl, &err) == MXL_OK && dl == wdl && memcmp(dec, want_dec, dl) == 0)
            ok_dec++;
        else
            fprintf(stderr, "    decode mismatch for \"%.60s\": got \"%.60s\"\n", text, dec ? dec : err.msg);
        mxl_free(dec);
        dec = NULL;
        const char *want_skip = json_string_value(json_object_get(c, "text_skip"));
        size_t wsl = json_string_length(json_object_get(c, "text_skip"));
        if (mxl_tokenizer_decode(t, ids, m, true, &dec, &dl, &err) == MXL_OK && dl == wsl && memcmp(dec, want_skip, dl) == 0)
            ok_skip++;
        else
            fprintf(stderr, "    skip-special decode mismatch for \"%.60s\": got \"%.60s\"\n", text, dec ? dec : err.msg);
        mxl_free(dec);
        /* streaming: the pieces concatenate to the full decode; each piece is valid UTF-8 */
        mxl_detok_stream *s = NULL;
        char *acc = NULL;
        size_t al = 0;
        bool sok = mxl_detok_stream_create(t, false, &s, &err) == MXL_OK;
        for (size_t k = 0; sok && k < m; k++) {
            size_t before = al;
            sok = mxl_detok_stream_step(s, ids[k], &acc, &al, &err) == MXL_OK;
            /* never a partial UTF-8 character at the end of what was emitted so far */
            if (sok && al > before) {
                unsigned char last = (unsigned char)acc[al - 1];
                size_t back = 0;
                while (back < al && back < 4 && ((unsigned char)acc[al - 1 - back] & 0xC0) == 0x80) back++;
                unsigned char lead = (unsigned char)acc[al - 1 - (back < al ? back : 0)];
                size_t need = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 1;
                (void)last;
                sok = back + 1 == need;
            }
        }
        if (sok) sok = mxl_detok_stream_flush(s, &acc, &al, &err) == MXL_OK;
        if (sok && al == wdl && memcmp(acc ? acc : "", want_dec, al) == 0) ok_stream++;
        else fprintf(stderr, "    stream mismatch for \"%.60s\": got \"%.60s\"\n", text, acc ? acc : "");
        mxl_free(acc);
        mxl_detok_stream_destroy(s);
        mxl_free(ids);
        mxl_token_ids_free(&a);
        mxl_token_ids_free(&b);
        mxl_token_ids_free(&p);
    }
    fprintf(stderr, "  %s: ids %zu/%zu, ids_plain %zu/%zu, ids_post %zu/%zu, decode %zu/%zu, skip %zu/%zu, stream %zu/%zu\n",
            name, ok_ids, n, ok_plain, n, ok_post, n, ok_dec, n, ok_skip, n, ok_stream, n);
    CHECK_EQ_INT(ok_ids, n);
    CHECK_EQ_INT(ok_plain, n);
    CHECK_EQ_INT(ok_post, n);
    CHECK_EQ_INT(ok_dec, n);
    CHECK_EQ_INT(ok_skip, n);
    CHECK_EQ_INT(ok_stream, n);
    mxl_tokenizer_destroy(t);
    json_decref(doc);
}

static void run_testdata(int *mxl_test_failed_, const char *name) {
    char p[4096];
    snprintf(p, sizeof p, "%s/../shared/testdata/tokenizers/%s/tokenizer.json", mxl_test_repo_root(), name);
    run_golden(mxl_test_failed_, name, p);
}

static void run_synth(int *mxl_test_failed_, const char *name) {
    char p[4096];
    snprintf(p, sizeof p, "%s/tests/fixtures/tokenizers/%s.tokenizer.json", mxl_test_repo_root(), name);
    run_golden(mxl_test_failed_, name, p);
}

TEST(tokenizer_golden_qwen3) { run_testdata(mxl_test_failed_, "qwen3"); }
TEST(tokenizer_golden_llama3) { run_testdata(mxl_test_failed_, "llama3"); }
TEST(tokenizer_golden_gemma3) { run_testdata(mxl_test_failed_, "gemma3"); }
TEST(tokenizer_golden_llama2) { run_testdata(mxl_test_failed_, "llama2"); }
TEST(tokenizer_golden_deepseek_v3) { run_testdata(mxl_test_failed_, "deepseek_v3"); }
TEST(tokenizer_golden_gptoss) { run_testdata(mxl_test_failed_, "gptoss"); }
TEST(tokenizer_golden_synth_metaspace) { run_synth(mxl_test_failed_, "synth_metaspace"); }
TEST(tokenizer_golden_synth_wordpiece) { run_synth(mxl_test_failed_, "synth_wordpiece"); }
TEST(tokenizer_golden_synth_wordlevel) { run_synth(mxl_test_failed_, "synth_wordlevel"); }
TEST(tokenizer_golden_synth_bytelevel) { run_synth(mxl_test_failed_, "synth_bytelevel"); }
TEST(tokenizer_golden_synth_unigram) { run_synth(mxl_test_failed_, "synth_unigram"); }
TEST(tokenizer_golden_synth_unigram_unk) { run_synth(mxl_test_failed_, "synth_unigram_unk"); }
TEST(tokenizer_golden_synth_precompiled) { run_synth(mxl_test_failed_, "synth_precompiled"); }

TEST(tokenizer_golden_minilm) {
    char root[MXL_STORE_PATH_MAX], p[MXL_STORE_PATH_MAX + 128];
    REQUIRE(mxl_store_root(NULL, root, sizeof root, NULL) == MXL_OK);
    snprintf(p, sizeof p, "%s/sentence-transformers/all-MiniLM-L6-v2/tokenizer.json", root);
    run_golden(mxl_test_failed_, "minilm", p);
}
