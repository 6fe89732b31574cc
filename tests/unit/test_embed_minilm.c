/* test_embed_minilm.c - all-MiniLM-L6-v2 sentence embeddings against sentence-transformers and
 * transformers' BertModel (tests/fixtures/embeddings/minilm.json, made by
 * gen_minilm_embeddings.py): token ids (incl. truncation to max_seq_length 256), the normalized
 * mean-pooled embedding, and the unnormalized mean and CLS vectors, within 1e-4. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "engine/embed.h"
#include "test.h"

static double max_diff(const float *a, json_t *ref, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - json_number_value(json_array_get(ref, (size_t)i))));
    return m;
}

TEST(embed_minilm_matches_sentence_transformers) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/embeddings/minilm.json", mxl_test_repo_root());
    json_t *fx = json_load_file(path, 0, NULL);
    REQUIRE(fx);
    snprintf(path, sizeof path, "%s", mxl_test_model_path("sentence-transformers/all-MiniLM-L6-v2"));
    mxl_embed_model *m = NULL;
    mxl_error err;
    if (mxl_embed_model_load(path, 2, &m, &err)) fprintf(stderr, "  %s (run scripts/fetch-models.sh)\n", err.msg);
    REQUIRE(m);
    CHECK_EQ_INT(mxl_embed_model_dim(m), 384);
    CHECK_EQ_INT(mxl_embed_model_max_length(m), json_integer_value(json_object_get(fx, "max_seq_length")));
    mxl_embed_opts def = {MXL_POOLING_NONE, MXL_EMBED_NORMALIZE_DEFAULT, 0, 0};
    mxl_embed_opts mean_raw = {MXL_POOLING_MEAN, -1, 0, 0};
    mxl_embed_opts cls_raw = {MXL_POOLING_CLS, -1, 0, 0};
    CHECK(mxl_embed_resolved_pooling(m, &def) == MXL_POOLING_MEAN);
    CHECK_EQ_INT(mxl_embed_resolved_normalize(m, &def), 2);
    float v[384];
    json_t *c;
    size_t i;
    double worst = 0;
    json_array_foreach(json_object_get(fx, "cases"), i, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        int64_t n_tok = 0;
        REQUIRE(mxl_embed_text(m, text, &def, v, &n_tok, &err) == MXL_OK);
        CHECK_EQ_INT(n_tok, json_array_size(json_object_get(c, "input_ids")));
        double d1 = max_diff(v, json_object_get(c, "sentence_transformers"), 384);
        REQUIRE(mxl_embed_text(m, text, &mean_raw, v, &n_tok, &err) == MXL_OK);
        double d2 = max_diff(v, json_object_get(c, "mean_unnormalized"), 384);
        REQUIRE(mxl_embed_text(m, text, &cls_raw, v, &n_tok, &err) == MXL_OK);
        double d3 = max_diff(v, json_object_get(c, "cls_unnormalized"), 384);
        worst = fmax(worst, fmax(d1, fmax(d2, d3)));
        CHECK(d1 < 1e-4 && d2 < 1e-4 && d3 < 1e-4);
    }
    fprintf(stderr, "  minilm: %zu texts, max |diff| %.2e\n", json_array_size(json_object_get(fx, "cases")), worst);
    /* Matryoshka truncation renormalizes */
    mxl_embed_opts dims = {MXL_POOLING_NONE, MXL_EMBED_NORMALIZE_DEFAULT, 0, 128};
    int64_t n_tok;
    REQUIRE(mxl_embed_text(m, "Hello world", &dims, v, &n_tok, &err) == MXL_OK);
    double norm = 0;
    for (int k = 0; k < 128; k++) norm += (double)v[k] * v[k];
    CHECK(fabs(norm - 1.0) < 1e-5);
    mxl_embed_opts too_wide = {MXL_POOLING_NONE, MXL_EMBED_NORMALIZE_DEFAULT, 0, 1000};
    CHECK(mxl_embed_text(m, "x", &too_wide, v, &n_tok, &err) == MXL_ERR_ARG);
    mxl_embed_model_destroy(m);
    json_decref(fx);
}
