/* test_embed_siglip.c - the SigLIP text tower against transformers on the tiny random checkpoint of
 * tests/fixtures/siglip (gen_siglip_fixtures.py: a SiglipModel with both towers, 16 positions,
 * projection 48):
 *   - detection: model_type siglip is the siglip_text embedding family;
 *   - every text padded to the 16 positions and pooled at the last one through the head:
 *     SiglipModel.get_text_features (raw, --normalize -1) and its L2-normalized form (the default,
 *     SiglipModel's text_embeds) within 1e-4, cosine >= 0.99999, over texts shorter than the
 *     positions and one cut to them (the real token counts reported). A run without the padding
 *     or pooled elsewhere misses by far more: the pad tokens are attended to. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>

#include "core/alloc.h"
#include "engine/embed.h"
#include "models/checkpoint.h"
#include "models/detect.h"
#include "test.h"

static const char *model_dir(void) {
    static char path[2048];
    snprintf(path, sizeof path, "%s/tests/fixtures/siglip/model", mxl_test_repo_root());
    return path;
}

TEST(embed_siglip_detect) {
    mxl_checkpoint *ck = NULL;
    mxl_error err;
    mxl_detection det;
    REQUIRE(mxl_checkpoint_open(model_dir(), &ck, &err) == MXL_OK);
    REQUIRE(mxl_checkpoint_detect(ck, &det, &err) == MXL_OK);
    CHECK(det.task == MXL_TASK_EMBED);
    CHECK_EQ_STR(det.family->id, "siglip_text");
    mxl_checkpoint_close(ck);
}

static void compare(mxl_embed_model *m, json_t *ref, const char *key, int normalize, int *mxl_test_failed_) {
    json_t *texts = json_object_get(ref, "texts"), *want = json_object_get(ref, key), *counts = json_object_get(ref, "n_tokens");
    size_t n = json_array_size(texts);
    const int64_t dim = mxl_embed_model_dim(m);
    REQUIRE(n > 0 && n <= 8 && json_array_size(want) == n && (int64_t)json_array_size(json_array_get(want, 0)) == dim);
    const char *tx[8];
    for (size_t i = 0; i < n; i++) tx[i] = json_string_value(json_array_get(texts, i));
    float *out = mxl_malloc(n * (size_t)dim * sizeof *out);
    int64_t ntok[8];
    mxl_error err;
    mxl_embed_opts o = {.normalize = normalize, .batch_size = 2}; /* (batches of two: a short batch last) */
    REQUIRE(out && mxl_embed_batch(m, tx, n, &o, out, ntok, &err) == MXL_OK);
    double worst = 0, cmin = 1;
    for (size_t i = 0; i < n; i++) {
        double d, cosv;
        mxl_test_vec_vs_json(out + i * dim, json_array_get(want, i), dim, &d, &cosv);
        worst = fmax(worst, d), cmin = fmin(cmin, cosv);
        CHECK_EQ_INT(ntok[i], json_integer_value(json_array_get(counts, i)));
    }
    fprintf(stderr, "  siglip %-10s max |diff| %.2e, min cosine %.7f\n", key, worst, cmin);
    CHECK(worst <= 1e-4);
    CHECK(cmin >= 0.99999);
    mxl_free(out);
}

TEST(embed_siglip_text_tower_matches_transformers) {
    json_t *ref = mxl_test_load_json("tests/fixtures/siglip/reference.json");
    REQUIRE(ref);
    mxl_embed_model *m = NULL;
    mxl_error err;
    REQUIRE(mxl_embed_model_load(model_dir(), 2, &m, &err) == MXL_OK);
    CHECK_EQ_INT(mxl_embed_model_dim(m), 48);
    CHECK_EQ_INT(mxl_embed_model_max_length(m), 16);
    compare(m, ref, "raw", -1, mxl_test_failed_);
    compare(m, ref, "normalized", MXL_EMBED_NORMALIZE_DEFAULT, mxl_test_failed_);
    mxl_embed_model_destroy(m);
    json_decref(ref);
}
