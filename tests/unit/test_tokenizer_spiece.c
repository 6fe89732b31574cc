/* test_tokenizer_spiece.c - a directory with a SentencePiece model and no tokenizer.json
 * (tokenizer/loader_spm.c) against transformers' SiglipTokenizer, on the tiny model and texts of
 * tests/fixtures/siglip/gen_siglip_spiece_fixtures.py (punctuation, case, whitespace runs, NFKC
 * folds, uncovered characters, an empty text, and 300 seeded random strings): the ids with </s>
 * appended, and the encoder input's truncation to 8 (the text cut, </s> kept). Other tokenizer
 * classes and malformed model files are refused with one line. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine/encoder_input.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

static const char *fixture(void) {
    static char path[2048];
    snprintf(path, sizeof path, "%s/tests/fixtures/siglip/spiece", mxl_test_repo_root());
    return path;
}

static bool ids_equal(const mxl_token_ids *a, json_t *want) {
    if (a->n != json_array_size(want)) return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->ids[i] != json_integer_value(json_array_get(want, i))) return false;
    return true;
}

TEST(tokenizer_spiece_siglip_matches_transformers) {
    json_t *ref = mxl_test_load_json("tests/fixtures/siglip/reference_spiece.json");
    REQUIRE(ref);
    mxl_tokenizer *t = NULL;
    mxl_error err;
    REQUIRE(mxl_tokenizer_load(fixture(), &t, &err) == MXL_OK);
    mxl_enc_specials sp;
    REQUIRE(mxl_enc_specials_probe(t, &sp, &err) == MXL_OK);
    json_t *texts = json_object_get(ref, "texts");
    size_t good = 0, n = json_array_size(texts);
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(texts, i));
        mxl_token_ids ids = {0}, cut = {0};
        REQUIRE(mxl_tokenizer_encode(t, s, strlen(s), MXL_TOK_ADD_SPECIAL, &ids, &err) == MXL_OK);
        REQUIRE(mxl_enc_tokenize_single(t, &sp, s, 8, &cut, NULL, &err) == MXL_OK);
        const bool a = ids_equal(&ids, json_array_get(json_object_get(ref, "ids"), i));
        const bool b = ids_equal(&cut, json_array_get(json_object_get(ref, "ids_truncated_8"), i));
        if (!a || !b) fprintf(stderr, "  text %zu differs%s%s\n", i, a ? "" : " (ids)", b ? "" : " (truncated)");
        good += a && b;
        mxl_token_ids_free(&ids);
        mxl_token_ids_free(&cut);
    }
    fprintf(stderr, "  siglip spiece.model: %zu / %zu texts as transformers' SiglipTokenizer\n", good, n);
    CHECK_EQ_INT((int64_t)good, (int64_t)n);
    mxl_tokenizer_destroy(t);
    json_decref(ref);
}

/* A copy of the fixture with tokenizer_config.json / spiece.model replaced by `cfg` / `model`
 * (NULL: kept) must be refused with one line naming what. */
static void refused(const char *cfg, const char *model, size_t model_len, const char *needle, int *mxl_test_failed_) {
    char dir[] = "/tmp/mxl-spiece-XXXXXX", p[4096];
    REQUIRE(mkdtemp(dir) != NULL);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "cp %s/* %s/", fixture(), dir);
    REQUIRE(system(cmd) == 0);
    if (cfg) {
        snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
        FILE *f = fopen(p, "w");
        REQUIRE(f);
        fputs(cfg, f);
        fclose(f);
    }
    if (model) {
        snprintf(p, sizeof p, "%s/spiece.model", dir);
        FILE *f = fopen(p, "wb");
        REQUIRE(f);
        fwrite(model, 1, model_len, f);
        fclose(f);
    }
    mxl_tokenizer *t = NULL;
    mxl_error err;
    mxl_status st = mxl_tokenizer_load(dir, &t, &err);
    CHECK(st != MXL_OK);
    if (st == MXL_OK) mxl_tokenizer_destroy(t);
    else {
        fprintf(stderr, "  refused: %s\n", err.msg);
        CHECK(strstr(err.msg, needle) != NULL);
        CHECK(strchr(err.msg, '\n') == NULL);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST(tokenizer_spiece_refusals) {
    refused("{\"tokenizer_class\": \"T5Tokenizer\"}", NULL, 0, "SiglipTokenizer", mxl_test_failed_);
    refused(NULL, "\x0a\xff\xff\xff\xff\x0f", 6, "not a SentencePiece model", mxl_test_failed_);
    refused(NULL, "", 0, "cannot read", mxl_test_failed_);
    refused(NULL, "\x12\x02\x18\x02", 4, "not a SentencePiece model", mxl_test_failed_); /* (trainer_spec only: no pieces) */
}
