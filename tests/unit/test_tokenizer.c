/* test_tokenizer.c - tokenizer behaviour outside the goldens: one-line errors naming the component
 * for malformed tokenizer.json, invalid UTF-8 input (replaced by U+FFFD like Python's
 * decode('utf-8', 'replace')), out-of-range ids on decode (refused; the stream skips them), the streaming detokenizer holding back
 * incomplete UTF-8, tokenizer_config.json / generation_config.json, and path loading. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

/* A minimal valid WordLevel tokenizer.json around the given component JSON. */
static mxl_status load_with(const char *extra, mxl_tokenizer **t, mxl_error *err) {
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"version\":\"1.0\",\"added_tokens\":[],%s%s"
             "\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"<unk>\":0,\"a\":1,\"b\":2},\"unk_token\":\"<unk>\"}}",
             extra, extra[0] ? "," : "");
    return mxl_tokenizer_load_json_bytes(buf, strlen(buf), "t.json", t, err);
}

static void expect_error(int *mxl_test_failed_, const char *extra, mxl_status want, const char *s1,
                         const char *s2) {
    mxl_tokenizer *t = NULL;
    mxl_error err = {0};
    mxl_status st = load_with(extra, &t, &err);
    CHECK_EQ_INT(st, want);
    CHECK(t == NULL);
    CHECK(strchr(err.msg, '\n') == NULL);
    CHECK(strstr(err.msg, "t.json") != NULL);
    if (!strstr(err.msg, s1) || (s2 && !strstr(err.msg, s2))) {
        fprintf(stderr, "  unexpected message: %s\n", err.msg);
        CHECK(!"message names the component");
    }
    mxl_tokenizer_destroy(t);
}

TEST(tokenizer_errors_name_component) {
    expect_error(mxl_test_failed_, "\"normalizer\":{\"type\":\"Bogus\"}", MXL_ERR_UNSUPPORTED, "normalizer (Bogus)", NULL);
    expect_error(mxl_test_failed_,
                 "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\"},"
                 "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(ab\"},\"behavior\":\"Isolated\",\"invert\":false}]}",
                 MXL_ERR_FORMAT, "pre_tokenizer.pretokenizers[1] (Split)", "bad regex");
    expect_error(mxl_test_failed_, "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Sideways\"}",
                 MXL_ERR_FORMAT, "pre_tokenizer (Split)", "behavior");
    expect_error(mxl_test_failed_, "\"decoder\":{\"type\":\"Strip\",\"content\":\" \"}", MXL_ERR_FORMAT, "decoder (Strip)", NULL);
    expect_error(mxl_test_failed_, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}}],\"special_tokens\":{}}",
                 MXL_ERR_FORMAT, "post_processor (TemplateProcessing)", "<s>");
    expect_error(mxl_test_failed_, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"}}]}",
                 MXL_ERR_FORMAT, "normalizer.normalizers[0] (Replace)", "content");
    expect_error(mxl_test_failed_, "\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"\"}",
                 MXL_ERR_FORMAT, "normalizer (Precompiled)", "header");
    expect_error(mxl_test_failed_, "\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"!!!!\"}",
                 MXL_ERR_FORMAT, "normalizer (Precompiled)", "base64");
    /* trie size 0x100 bytes announced, 4 bytes present */
    expect_error(mxl_test_failed_, "\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AAEAAAAAAAA=\"}",
                 MXL_ERR_FORMAT, "normalizer (Precompiled)", "trie size");
    expect_error(mxl_test_failed_, "\"normalizer\":{\"type\":\"Precompiled\"}", MXL_ERR_FORMAT, "normalizer (Precompiled)",
                 "precompiled_charsmap");
    expect_error(mxl_test_failed_, "\"added_tokens\":[{\"content\":\"x\"}]", MXL_ERR_FORMAT, "added_tokens[0]", NULL);

    mxl_tokenizer *t = NULL;
    mxl_error err = {0};
    const char *bad_merge = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}";
    CHECK_EQ_INT(mxl_tokenizer_load_json_bytes(bad_merge, strlen(bad_merge), "m.json", &t, &err), MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "model.merges[0]") != NULL);
    const char *unigram = "{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",-1.0],[\"b\"]]}}";
    CHECK_EQ_INT(mxl_tokenizer_load_json_bytes(unigram, strlen(unigram), "u.json", &t, &err), MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "model.vocab[1]") != NULL);
    CHECK_EQ_INT(mxl_tokenizer_load_json_bytes("{\"model\":", 9, "j.json", &t, &err), MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "j.json: invalid JSON") != NULL);
    CHECK_EQ_INT(mxl_tokenizer_load_json_bytes("{}", 2, "e.json", &t, &err), MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "model") != NULL);
    CHECK(t == NULL);
}

static mxl_tokenizer *load_file(int *mxl_test_failed_, const char *rel) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", mxl_test_repo_root(), rel);
    mxl_tokenizer *t = NULL;
    mxl_error err = {0};
    if (mxl_tokenizer_load(p, &t, &err) != MXL_OK) fprintf(stderr, "  %s\n", err.msg);
    CHECK(t != NULL);
    return t;
}

static bool same_ids(const mxl_tokenizer *t, const char *a, size_t al, const char *b, size_t bl) {
    mxl_token_ids x = {0}, y = {0};
    mxl_error err = {0};
    bool ok = mxl_tokenizer_encode(t, a, al, 0, &x, &err) == MXL_OK &&
              mxl_tokenizer_encode(t, b, bl, 0, &y, &err) == MXL_OK && x.n == y.n && x.n > 0 &&
              memcmp(x.ids, y.ids, x.n * sizeof(int32_t)) == 0;
    mxl_token_ids_free(&x);
    mxl_token_ids_free(&y);
    return ok;
}

TEST(tokenizer_invalid_utf8_is_replacement) {
    mxl_tokenizer *t = load_file(mxl_test_failed_, "tests/fixtures/tokenizers/synth_bytelevel.tokenizer.json");
    REQUIRE(t != NULL);
    /* lone byte, truncated 3-byte sequence (one U+FFFD for the maximal subpart), surrogate */
    CHECK(same_ids(t, "a\xFF" "b", 3, "a\xEF\xBF\xBD" "b", 5));
    CHECK(same_ids(t, "x\xE2\x82y", 4, "x\xEF\xBF\xBDy", 5));
    CHECK(same_ids(t, "\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 9));
    CHECK(same_ids(t, "\xC0\xAF", 2, "\xEF\xBF\xBD\xEF\xBF\xBD", 6));
    /* (embedded NUL is covered by the goldens: "a\\x00b NUL ...") */
    mxl_tokenizer_destroy(t);
}

TEST(tokenizer_decode_rejects_bad_ids) {
    mxl_tokenizer *t = load_file(mxl_test_failed_, "tests/fixtures/tokenizers/synth_wordlevel.tokenizer.json");
    REQUIRE(t != NULL);
    int32_t ids[] = {1, -5, 2};
    char *dec = NULL;
    mxl_error err = {0};
    CHECK_EQ_INT(mxl_tokenizer_decode(t, ids, 3, false, &dec, NULL, &err), MXL_ERR_ARG);
    CHECK(dec == NULL && strstr(err.msg, "-5") != NULL);
    int32_t big[] = {1000000};
    CHECK_EQ_INT(mxl_tokenizer_decode(t, big, 1, false, &dec, NULL, &err), MXL_ERR_ARG);
    CHECK(strstr(err.msg, "1000000") != NULL);
    /* the streaming detokenizer (what generation prints through) skips an id the tokenizer does
     * not have, as HF's DecodeStream does (its decode drops ids id_to_token does not know): a model
     * whose embedding is padded past the vocabulary may pick one */
    mxl_detok_stream *s = NULL, *ref = NULL;
    CHECK(mxl_detok_stream_create(t, false, &s, &err) == MXL_OK);
    CHECK(mxl_detok_stream_create(t, false, &ref, &err) == MXL_OK);
    char *out = NULL, *want = NULL;
    size_t ol = 0, wl = 0;
    CHECK_EQ_INT(mxl_detok_stream_step(s, 1, &out, &ol, &err), MXL_OK);
    CHECK_EQ_INT(mxl_detok_stream_step(s, 1000000, &out, &ol, &err), MXL_OK);
    CHECK_EQ_INT(mxl_detok_stream_step(s, -5, &out, &ol, &err), MXL_OK);
    CHECK_EQ_INT(mxl_detok_stream_step(s, 2, &out, &ol, &err), MXL_OK);
    CHECK_EQ_INT(mxl_detok_stream_flush(s, &out, &ol, &err), MXL_OK);
    CHECK_EQ_INT(mxl_detok_stream_step(ref, 1, &want, &wl, &err), MXL_OK);
    CHECK_EQ_INT(mxl_detok_stream_step(ref, 2, &want, &wl, &err), MXL_OK);
    CHECK_EQ_INT(mxl_detok_stream_flush(ref, &want, &wl, &err), MXL_OK);
    CHECK(ol == wl && wl > 0 && memcmp(out, want, wl) == 0);
    mxl_free(out);
    mxl_free(want);
    mxl_detok_stream_destroy(s);
    mxl_detok_stream_destroy(ref);
    mxl_tokenizer_destroy(t);
}

/* The streamed pieces concatenate to the full decode for every id sequence up to length 5, with
 * decoders whose rules depend on the start of the text: a left Strip of up to 2 spaces after Fuse
 * (the fuzzer's case: a window starting with two space tokens lost the second), Metaspace's and
 * WordPiece's first-token rules, and no decoder (tokens joined by spaces). */
TEST(tokenizer_stream_equals_decode_at_window_start) {
    static const char *decoders[] = {
        "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\u2581\"},"
        "\"content\":\" \"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":2,\"stop\":1}]}",
        "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\u2581\"},"
        "\"content\":\" \"},{\"type\":\"Strip\",\"content\":\" \",\"start\":2,\"stop\":0}]}",
        "{\"type\":\"Metaspace\",\"replacement\":\"\u2581\",\"prepend_scheme\":\"first\",\"split\":true}",
        "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Fuse\"},{\"type\":\"Metaspace\",\"replacement\":\"\u2581\","
        "\"prepend_scheme\":\"always\",\"split\":true}]}",
        "{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true}",
        "null",
    };
    for (size_t d = 0; d < sizeof decoders / sizeof decoders[0]; d++) {
        char json[2048];
        snprintf(json, sizeof json,
                 "{\"decoder\":%s,\"model\":{\"type\":\"WordLevel\",\"unk_token\":\"<unk>\",\"vocab\":"
                 "{\"a\":0,\"\u2581\":1,\"\u2581\u2581\":2,\"##b\":3,\".\":4,\"<unk>\":5}}}",
                 decoders[d]);
        mxl_tokenizer *t = NULL;
        mxl_error err = {0};
        REQUIRE(mxl_tokenizer_load_json_bytes(json, strlen(json), "window.json", &t, &err) == MXL_OK);
        int mismatches = 0;
        for (int n = 1; n <= 5; n++) {
            int total = 1;
            for (int k = 0; k < n; k++) total *= 5;
            for (int code = 0; code < total; code++) {
                int32_t ids[5];
                for (int k = 0, c = code; k < n; k++, c /= 5) ids[k] = c % 5;
                char *full = NULL, *out = NULL;
                size_t fl = 0, ol = 0;
                CHECK(mxl_tokenizer_decode(t, ids, (size_t)n, false, &full, &fl, &err) == MXL_OK);
                mxl_detok_stream *s = NULL;
                REQUIRE(mxl_detok_stream_create(t, false, &s, &err) == MXL_OK);
                bool ok = true;
                for (int k = 0; k < n && ok; k++) ok = mxl_detok_stream_step(s, ids[k], &out, &ol, &err) == MXL_OK;
                ok = ok && mxl_detok_stream_flush(s, &out, &ol, &err) == MXL_OK;
                if (!ok || ol != fl || (fl && memcmp(out, full, fl) != 0)) {
                    if (mismatches++ < 3)
                        fprintf(stderr, "    decoder %zu, %d ids (code %d): stream \"%s\" != decode \"%s\"\n", d, n,
                                code, ok && out ? out : err.msg, full ? full : "");
                }
                mxl_free(full);
                mxl_free(out);
                mxl_detok_stream_destroy(s);
            }
        }
        CHECK_EQ_INT(mismatches, 0);
        mxl_tokenizer_destroy(t);
    }
}

/* Llama 2 encodes U+1F603 as four <0xXX> byte tokens (HF: 243 162 155 134): nothing is emitted
 * until the fourth. */
TEST(tokenizer_stream_holds_partial_utf8) {
    char p[4096];
    snprintf(p, sizeof p, "%s/../shared/testdata/tokenizers/llama2/tokenizer.json", mxl_test_repo_root());
    mxl_tokenizer *t = NULL;
    mxl_error err = {0};
    REQUIRE(mxl_tokenizer_load_json_file(p, &t, &err) == MXL_OK);
    const char *text = "ok \xF0\x9F\x98\x83!";
    mxl_token_ids ids = {0};
    CHECK(mxl_tokenizer_encode(t, text, strlen(text), 0, &ids, &err) == MXL_OK);
    mxl_detok_stream *s = NULL;
    REQUIRE(mxl_detok_stream_create(t, true, &s, &err) == MXL_OK);
    char *out = NULL;
    size_t ol = 0;
    int byte_steps_silent = 0, n_byte = 0;
    for (size_t i = 0; i < ids.n; i++) {
        size_t before = ol;
        CHECK(mxl_detok_stream_step(s, ids.ids[i], &out, &ol, &err) == MXL_OK);
        if (mxl_tokenizer_token_attr(t, ids.ids[i]) & MXL_TOKEN_ATTR_BYTE) {
            n_byte++;
            if (n_byte < 4 && ol == before) byte_steps_silent++;
            if (n_byte == 4) CHECK(ol >= before + 4 && memcmp(out + ol - 4, "\xF0\x9F\x98\x83", 4) == 0);
        }
    }
    CHECK_EQ_INT(n_byte, 4);
    CHECK_EQ_INT(byte_steps_silent, 3);
    CHECK(mxl_detok_stream_flush(s, &out, &ol, &err) == MXL_OK);
    CHECK(out && strcmp(out, text) == 0);
    mxl_free(out);
    mxl_detok_stream_destroy(s);
    /* a dangling lead byte flushes as U+FFFD (ByteFallback's per-byte replacement) */
    int32_t f0 = mxl_tokenizer_token_id(t, "<0xF0>", 6);
    CHECK(f0 >= 0);
    REQUIRE(mxl_detok_stream_create(t, false, &s, &err) == MXL_OK);
    out = NULL;
    ol = 0;
    CHECK(mxl_detok_stream_step(s, f0, &out, &ol, &err) == MXL_OK);
    CHECK_EQ_INT(ol, 0);
    CHECK(mxl_detok_stream_flush(s, &out, &ol, &err) == MXL_OK);
    CHECK(out && strcmp(out, "\xEF\xBF\xBD") == 0);
    mxl_free(out);
    mxl_detok_stream_destroy(s);
    mxl_token_ids_free(&ids);
    mxl_tokenizer_destroy(t);
}

/* ByteFallback rewrites a byte run once it proves invalid (HF: one U+FFFD per byte of the run),
 * so a run that already streamed "é" decodes whole as "���" when <0xE4> follows. The stream
 * neither fails (HF's DecodeStream does: InvalidPrefix; a generation cut by its length in the
 * middle of a character then failed at the flush) nor retracts: the emitted text stands and
 * the ids since the last emission follow as a continuation. Found by tests/fuzz/fuzz_detok.c. */
TEST(tokenizer_stream_survives_byte_fallback_rewrite) {
    char p[4096];
    snprintf(p, sizeof p, "%s/../shared/testdata/tokenizers/llama2/tokenizer.json", mxl_test_repo_root());
    mxl_tokenizer *t = NULL;
    mxl_error err = {0};
    REQUIRE(mxl_tokenizer_load_json_file(p, &t, &err) == MXL_OK);
    const int32_t c3 = mxl_tokenizer_token_id(t, "<0xC3>", 6), a9 = mxl_tokenizer_token_id(t, "<0xA9>", 6),
                  e4 = mxl_tokenizer_token_id(t, "<0xE4>", 6), x = mxl_tokenizer_token_id(t, "x", 1);
    REQUIRE(c3 >= 0 && a9 >= 0 && e4 >= 0 && x >= 0);
    const int32_t ids[] = {c3, a9, e4, x};
    char *full = NULL;
    REQUIRE(mxl_tokenizer_decode(t, ids, 3, false, &full, NULL, &err) == MXL_OK);
    CHECK(strcmp(full, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD") == 0); /* HF's decode */
    mxl_free(full);
    for (int with_x = 0; with_x < 2; with_x++) {
        mxl_detok_stream *s = NULL;
        REQUIRE(mxl_detok_stream_create(t, false, &s, &err) == MXL_OK);
        char *out = NULL;
        size_t ol = 0;
        for (int i = 0; i < 3 + with_x; i++) CHECK(mxl_detok_stream_step(s, ids[i], &out, &ol, &err) == MXL_OK);
        CHECK(mxl_detok_stream_flush(s, &out, &ol, &err) == MXL_OK);
        CHECK(out && strcmp(out, with_x ? "\xC3\xA9\xEF\xBF\xBDx" : "\xC3\xA9\xEF\xBF\xBD") == 0);
        mxl_free(out);
        mxl_detok_stream_destroy(s);
    }
    mxl_tokenizer_destroy(t);
}

TEST(tokenizer_configs_from_model_dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s/../shared/testdata/tokenizers/llama3", mxl_test_repo_root());
    mxl_tokenizer *t = NULL;
    mxl_error err = {0};
    mxl_status st = mxl_tokenizer_load(p, &t, &err);
    if (st != MXL_OK) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == MXL_OK);
    /* tokenizer_config.json: bos "<|begin_of_text|>", eos "<|end_of_text|>" (Llama 3 base) */
    CHECK_EQ_INT(mxl_tokenizer_bos_id(t), mxl_tokenizer_token_id(t, "<|begin_of_text|>", 17));
    CHECK_EQ_INT(mxl_tokenizer_bos_id(t), 128000);
    CHECK(mxl_tokenizer_eos_id(t) >= 128000);
    size_t n = 0;
    const int32_t *eos = mxl_tokenizer_eos_ids(t, &n);
    CHECK(n >= 1 && eos[0] == mxl_tokenizer_eos_id(t));
    CHECK(mxl_tokenizer_chat_template(t) != NULL);
    mxl_tokenizer_destroy(t);
    CHECK_EQ_INT(mxl_tokenizer_load("/nonexistent/tokenizer", &t, &err), MXL_ERR_NOT_FOUND);
}

/* A BPE tokenizer.json over the letters a-z: every 2- and 3-letter string is a token, merged as
 * "xy" = x + y and "xyz" = xy + z (18252 merges). Pretty (`indent` spaces before each item, one
 * item per line: past 4 MB the loader cuts the list in two and resolves the halves on two
 * threads) or on one line (no cut). pairs: ["a", "b"] items instead of "a b". bad_at: that merge
 * names a token missing from the vocabulary (-1: none). */
static char *letters_bpe(int indent, bool pairs, long bad_at, size_t *len) {
    size_t cap = 64u << 20, n = 0;
    char *j = mxl_malloc(cap);
    if (!j) return NULL;
    n += (size_t)sprintf(j + n, "{\"model\":{\"type\":\"BPE\",\"vocab\":{");
    int id = 0;
    for (int a = 0; a < 26; a++) n += (size_t)sprintf(j + n, "%s\"%c\":%d", id ? "," : "", 'a' + a, id), id++;
    for (int a = 0; a < 26; a++)
        for (int b = 0; b < 26; b++) n += (size_t)sprintf(j + n, ",\"%c%c\":%d", 'a' + a, 'a' + b, id++);
    for (int a = 0; a < 26; a++)
        for (int b = 0; b < 26; b++)
            for (int c = 0; c < 26; c++) n += (size_t)sprintf(j + n, ",\"%c%c%c\":%d", 'a' + a, 'a' + b, 'a' + c, id++);
    n += (size_t)sprintf(j + n, "},\"merges\":[");
    long k = 0;
    for (int len3 = 0; len3 < 2; len3++)
        for (int a = 0; a < 26; a++)
            for (int b = 0; b < 26; b++)
                for (int c = 0; c < (len3 ? 26 : 1); c++, k++) {
                    char x[4] = {(char)('a' + a), 0, 0, 0}, y[2] = {(char)('a' + b), 0};
                    if (len3) x[1] = (char)('a' + b), y[0] = (char)('a' + c);
                    if (k == bad_at) y[0] = '#';
                    if (k) j[n++] = ',';
                    if (indent) {
                        j[n++] = '\n';
                        memset(j + n, ' ', (size_t)indent);
                        n += (size_t)indent;
                    }
                    n += pairs ? (size_t)sprintf(j + n, "[\"%s\", \"%s\"]", x, y) : (size_t)sprintf(j + n, "\"%s %s\"", x, y);
                }
    n += (size_t)sprintf(j + n, "%s]}}", indent ? "\n" : "");
    *len = n;
    return j;
}

/* The two-thread merge load builds the same table as the one-pass load, for both item shapes,
 * and names the first faulty merge by its index when it lies in the second half. */
TEST(tokenizer_merges_split_load) {
    for (int pairs = 0; pairs < 2; pairs++) {
        size_t la, lb;
        char *ja = letters_bpe(260, pairs, -1, &la), *jb = letters_bpe(0, pairs, -1, &lb);
        REQUIRE(ja && jb);
        CHECK(la > (4u << 20));
        mxl_tokenizer *ta = NULL, *tb = NULL;
        mxl_error err = {0};
        CHECK(mxl_tokenizer_load_json_bytes(ja, la, "a.json", &ta, &err) == MXL_OK);
        CHECK(mxl_tokenizer_load_json_bytes(jb, lb, "b.json", &tb, &err) == MXL_OK);
        if (ta && tb) {
            uint32_t seed = 12345;
            for (int s = 0; s < 200; s++) {
                char text[64];
                int len = 1 + s % 40;
                for (int i = 0; i < len; i++) {
                    seed = seed * 1103515245u + 12345u;
                    text[i] = (char)('a' + (seed >> 16) % 26);
                }
                mxl_token_ids x = {0}, y = {0};
                CHECK(mxl_tokenizer_encode(ta, text, (size_t)len, 0, &x, &err) == MXL_OK);
                CHECK(mxl_tokenizer_encode(tb, text, (size_t)len, 0, &y, &err) == MXL_OK);
                CHECK(x.n == y.n && x.n > 0 && memcmp(x.ids, y.ids, x.n * sizeof *x.ids) == 0);
                mxl_token_ids_free(&x);
                mxl_token_ids_free(&y);
            }
        }
        mxl_tokenizer_destroy(ta);
        mxl_tokenizer_destroy(tb);
        mxl_free(ja);
        mxl_free(jb);
        /* a fault in each half */
        for (long bad = 100; bad <= 15000; bad += 14900) {
            char *jc = letters_bpe(260, pairs, bad, &la), want[64];
            REQUIRE(jc);
            mxl_tokenizer *tc = NULL;
            CHECK(mxl_tokenizer_load_json_bytes(jc, la, "c.json", &tc, &err) == MXL_ERR_FORMAT);
            snprintf(want, sizeof want, "model.merges[%ld]", bad);
            if (!strstr(err.msg, want)) fprintf(stderr, "  unexpected message: %s\n", err.msg);
            CHECK(strstr(err.msg, want) != NULL);
            CHECK(tc == NULL);
            mxl_free(jc);
        }
    }
}
