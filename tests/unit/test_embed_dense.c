/* test_embed_dense.c - sentence-transformers Dense modules after Pooling (engine/embed_dense.h),
 * on the tiny bert-dense fixture (tests/fixtures/encoders/gen_encoder_fixtures.py: mean Pooling,
 * Dense 32->24 Tanh with bias, Dense 24->16 Identity without bias, Normalize): every vector
 * within 1e-4 of SentenceTransformer.encode, --dimensions cuts the projected vector, and broken
 * module configs are refused by name. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "engine/embed.h"
#include "test.h"

static const char *dense_dir(void) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/encoders/bert-dense", mxl_test_repo_root());
    return path;
}

static json_t *dense_ref(json_t *ref) {
    json_t *m;
    size_t i;
    json_array_foreach(json_object_get(ref, "models"), i, m) {
        if (strcmp(json_string_value(json_object_get(m, "dir")), "bert-dense") == 0) return m;
    }
    return NULL;
}

TEST(embed_dense_modules_match_sentence_transformers) {
    json_t *ref = mxl_test_load_json("tests/fixtures/encoders/reference.json");
    REQUIRE(ref);
    json_t *mr = dense_ref(ref);
    REQUIRE(mr);
    mxl_error err;
    mxl_embed_model *m = NULL;
    mxl_status st = mxl_embed_model_load(dense_dir(), 2, &m, &err);
    if (st) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == MXL_OK);
    int64_t D = json_integer_value(json_object_get(mr, "dim"));
    CHECK_EQ_INT(D, 16);
    CHECK_EQ_INT(mxl_embed_model_dim(m), D);
    json_t *cases = json_object_get(mr, "cases");
    size_t n = json_array_size(cases);
    const char **texts = mxl_malloc(n * sizeof *texts);
    float *v = mxl_malloc(n * (size_t)D * sizeof *v);
    REQUIRE(texts && v);
    for (size_t i = 0; i < n; i++) texts[i] = json_string_value(json_object_get(json_array_get(cases, i), "text"));
    mxl_embed_opts def = {0};
    def.batch_size = 3;
    def.normalize = MXL_EMBED_NORMALIZE_DEFAULT;
    CHECK_EQ_INT(mxl_embed_resolved_normalize(m, &def), 2);
    REQUIRE(mxl_embed_batch(m, texts, n, &def, v, NULL, &err) == MXL_OK);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_object_get(json_array_get(cases, i), "sentence_transformers");
        REQUIRE(json_array_size(e) == (size_t)D);
        for (int64_t k = 0; k < D; k++) worst = fmax(worst, fabs(v[i * D + k] - json_number_value(json_array_get(e, (size_t)k))));
    }
    fprintf(stderr, "  bert-dense: %zu texts, max |diff| %.2e vs sentence-transformers\n", n, worst);
    CHECK(worst < 1e-4);
    /* --dimensions 8: the first 8 of the projected vector, re-normalized */
    mxl_embed_opts cut = def;
    cut.dimensions = 8;
    float w8[8];
    REQUIRE(mxl_embed_text(m, texts[1], &cut, w8, NULL, &err) == MXL_OK);
    json_t *e1 = json_object_get(json_array_get(cases, 1), "sentence_transformers");
    double nn = 0;
    for (int k = 0; k < 8; k++) nn += pow(json_number_value(json_array_get(e1, (size_t)k)), 2);
    for (int k = 0; k < 8; k++) CHECK(fabs(w8[k] - json_number_value(json_array_get(e1, (size_t)k)) / sqrt(nn)) < 1e-4);
    cut.dimensions = 17; /* wider than the projection */
    CHECK(mxl_embed_text(m, texts[1], &cut, v, NULL, &err) == MXL_ERR_ARG);
    mxl_embed_model_destroy(m);
    mxl_free(texts);
    mxl_free(v);
    json_decref(ref);
}

/* A copy of the fixture (symlinks) whose 2_Dense/config.json gets key = value (JSON text), or
 * whose 2_Dense weights are only a pytorch_model.bin when key is NULL; loads it and returns the
 * status, checking that the message names `want`. */
static mxl_status load_with_dense(const char *key, const char *value, const char *want) {
    char dir[64] = "/tmp/mxl-dense-XXXXXX", src[1200], dst[1200];
    if (!mkdtemp(dir)) return MXL_ERR_IO;
    static const char *const links[] = {"1_Pooling", "3_Dense", "4_Normalize", "config.json", "model.safetensors",
                                        "modules.json", "sentence_bert_config.json", "tokenizer.json",
                                        "tokenizer_config.json"};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        snprintf(src, sizeof src, "%s/%s", dense_dir(), links[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, links[i]);
        if (symlink(src, dst)) return MXL_ERR_IO;
    }
    snprintf(dst, sizeof dst, "%s/2_Dense", dir);
    if (mkdir(dst, 0700)) return MXL_ERR_IO;
    snprintf(src, sizeof src, "%s/2_Dense/model.safetensors", dense_dir());
    snprintf(dst, sizeof dst, "%s/2_Dense/%s", dir, key ? "model.safetensors" : "pytorch_model.bin");
    if (symlink(src, dst)) return MXL_ERR_IO;
    snprintf(src, sizeof src, "%s/2_Dense/config.json", dense_dir());
    json_t *cfg = json_load_file(src, 0, NULL);
    if (!cfg) return MXL_ERR_IO;
    if (key) json_object_set_new(cfg, key, json_loads(value, JSON_DECODE_ANY, NULL));
    snprintf(dst, sizeof dst, "%s/2_Dense/config.json", dir);
    int rc = json_dump_file(cfg, dst, 0);
    json_decref(cfg);
    if (rc) return MXL_ERR_IO;
    mxl_error err = {0};
    mxl_embed_model *m = NULL;
    mxl_status st = mxl_embed_model_load(dir, 1, &m, &err);
    mxl_embed_model_destroy(m);
    if (st && want && !strstr(err.msg, want)) {
        fprintf(stderr, "  message '%s' lacks '%s'\n", err.msg, want);
        st = MXL_ERR_INTERNAL;
    }
    snprintf(dst, sizeof dst, "rm -rf '%s'", dir);
    if (system(dst) != 0) return MXL_ERR_IO;
    return st;
}

TEST(embed_dense_refuses_bad_modules) {
    CHECK(load_with_dense("activation_function", "\"torch.nn.modules.activation.Softplus\"", "Softplus") == MXL_ERR_UNSUPPORTED);
    CHECK(load_with_dense("in_features", "48", "in_features 48") == MXL_ERR_FORMAT);
    CHECK(load_with_dense("out_features", "20", "linear.weight") == MXL_ERR_FORMAT);
    CHECK(load_with_dense("out_features", "-3", "in_features and out_features") == MXL_ERR_FORMAT);
    CHECK(load_with_dense("bias", "\"yes\"", "bias") == MXL_ERR_FORMAT);
    CHECK(load_with_dense("use_residual", "true", "use_residual") == MXL_ERR_FORMAT);
    CHECK(load_with_dense(NULL, NULL, "pytorch_model.bin") == MXL_ERR_UNSUPPORTED);
    /* the unchanged copy loads */
    CHECK(load_with_dense("bias", "true", NULL) == MXL_OK);
}
