/* test_embed_minilm.c - all-MiniLM-L6-v2 sentence embeddings against sentence-transformers and
 * transformers' BertModel (tests/fixtures/embeddings/minilm.json, made by
 * gen_minilm_embeddings.py, 50+ texts: English, code, CJK and other scripts, inputs past the
 * limit): token counts (incl. truncation to max_seq_length 256), the normalized mean-pooled
 * embedding (batched; cosine >= 0.99999 and within 1e-4), and the unnormalized mean and CLS
 * vectors, within 1e-4. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "engine/embed.h"
#include "test.h"

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
    mxl_embed_opts def = {.pooling = MXL_POOLING_NONE, .normalize = MXL_EMBED_NORMALIZE_DEFAULT};
    mxl_embed_opts mean_raw = {.pooling = MXL_POOLING_MEAN, .normalize = -1};
    mxl_embed_opts cls_raw = {.pooling = MXL_POOLING_CLS, .normalize = -1};
    CHECK(mxl_embed_resolved_pooling(m, &def) == MXL_POOLING_MEAN);
    CHECK_EQ_INT(mxl_embed_resolved_normalize(m, &def), 2);
    float v[384];
    json_t *cases = json_object_get(fx, "cases"), *c;
    size_t i, n = json_array_size(cases);
    CHECK(n >= 50);
    /* all texts in batches of 16 (the CLI default): cosine >= 0.99999 with sentence-transformers */
    const char **texts = mxl_calloc(n, sizeof *texts);
    float *all = mxl_malloc(n * 384 * sizeof(float));
    int64_t *ntok = mxl_calloc(n, sizeof *ntok);
    REQUIRE(texts && all && ntok);
    json_array_foreach(cases, i, c) texts[i] = json_string_value(json_object_get(c, "text"));
    REQUIRE(mxl_embed_batch(m, texts, n, &def, all, ntok, &err) == MXL_OK);
    double worst = 0, worst_cos = 1;
    int n_long = 0;
    json_array_foreach(cases, i, c) {
        json_t *ref = json_object_get(c, "sentence_transformers");
        CHECK_EQ_INT(ntok[i], json_array_size(json_object_get(c, "input_ids")));
        n_long += ntok[i] == mxl_embed_model_max_length(m);
        double cosv, d1;
        mxl_test_vec_vs_json(all + i * 384, ref, 384, &d1, &cosv);
        if (cosv < 0.99999) fprintf(stderr, "  case %zu: cosine %.7f\n", i, cosv);
        CHECK(cosv >= 0.99999 && d1 < 1e-4);
        worst_cos = fmin(worst_cos, cosv);
        worst = fmax(worst, d1);
    }
    CHECK(n_long >= 3); /* the set reaches the maximum sequence length */
    /* one at a time, the unnormalized mean and CLS vectors */
    json_array_foreach(cases, i, c) {
        int64_t n_tok = 0;
        REQUIRE(mxl_embed_text(m, texts[i], &mean_raw, v, &n_tok, &err) == MXL_OK);
        double d2, d3;
        mxl_test_vec_vs_json(v, json_object_get(c, "mean_unnormalized"), 384, &d2, NULL);
        REQUIRE(mxl_embed_text(m, texts[i], &cls_raw, v, &n_tok, &err) == MXL_OK);
        mxl_test_vec_vs_json(v, json_object_get(c, "cls_unnormalized"), 384, &d3, NULL);
        worst = fmax(worst, fmax(d2, d3));
        CHECK(d2 < 1e-4 && d3 < 1e-4);
    }
    fprintf(stderr, "  minilm: %zu texts (%d at the length limit), max |diff| %.2e, min cosine %.8f\n", n, n_long, worst, worst_cos);
    mxl_free(texts);
    mxl_free(all);
    mxl_free(ntok);
    /* Matryoshka truncation renormalizes */
    mxl_embed_opts dims = {.pooling = MXL_POOLING_NONE, .normalize = MXL_EMBED_NORMALIZE_DEFAULT, .dimensions = 128};
    int64_t n_tok;
    REQUIRE(mxl_embed_text(m, "Hello world", &dims, v, &n_tok, &err) == MXL_OK);
    double norm = 0;
    for (int k = 0; k < 128; k++) norm += (double)v[k] * v[k];
    CHECK(fabs(norm - 1.0) < 1e-5);
    mxl_embed_opts too_wide = {.pooling = MXL_POOLING_NONE, .normalize = MXL_EMBED_NORMALIZE_DEFAULT, .dimensions = 1000};
    CHECK(mxl_embed_text(m, "x", &too_wide, v, &n_tok, &err) == MXL_ERR_ARG);
    mxl_embed_model_destroy(m);
    json_decref(fx);
}
