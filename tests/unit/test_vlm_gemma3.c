/* test_vlm_gemma3.c - Gemma 3 with images against transformers (tests/fixtures/vlm/gemma3,
 * gen_vlm_fixtures.py): the SigLIP tower + projector's image features for two seeded pixel
 * arrays, and the decoder with those features in place of the image tokens (bidirectional within
 * each image, sliding windows bounding from below) - logits at every position outside the image
 * blocks of prompts with one image, two images and none, and the greedy continuation - on the
 * reference and the fast path. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "core/threadpool.h"
#include "image/image.h"
#include "models/checkpoint.h"
#include "models/decoder.h"
#include "models/vlm.h"
#include "test.h"
#include "test_vlm_common.h"
#include "test_decoder_compare.h"

#define FX "tests/fixtures/vlm/gemma3"

static const char *model_dir(void) { return mxl_test_vlm_model_dir("gemma3"); }

/* The media blocks of ids: each run of the image token, image i taking features[i]. */
static int media_of(const int32_t *ids, int64_t n, int32_t img, float *const *features, mxl_decoder_media *m) {
    int k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] != img || (i && ids[i - 1] == img)) continue;
        int64_t e = i;
        while (e < n && ids[e] == img) e++;
        m[k] = (mxl_decoder_media){.row = i, .n = e - i, .emb = features[k]};
        k++;
    }
    return k;
}

/* The checkpoint at dir (its vision side found by mxl_vlm_load: the weights' tower, or the mmproj
 * beside a GGUF) against the references: image features within feat_tol, then the decoder with
 * them in place of the image tokens on both paths. */
static void check_checkpoint(const char *dir, const char *ref_path, double feat_tol, int *mxl_test_failed_) {
    json_t *ref = mxl_test_load_json(ref_path);
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    REQUIRE(mxl_checkpoint_open(dir, &ck, &err) == MXL_OK);
    if (mxl_vlm_load(ck, &v, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(v);
    CHECK_EQ_INT(v->tokens_per_image, 4);
    CHECK_EQ_INT(v->pre.width, 32);
    CHECK_EQ_INT(v->pre.resample, 2);
    const int32_t img = (int32_t)json_integer_value(json_object_get(ref, "image_token"));
    CHECK_EQ_INT(v->image_token, img);
    const char *form = ck->format == MXL_CHECKPOINT_GGUF ? "gguf+mmproj" : "safetensors";

    /* the image features */
    const int64_t T = v->tokens_per_image, Ht = v->text_hidden;
    float *feat[2];
    for (int i = 0; i < 2; i++) {
        int64_t np;
        float *px = mxl_test_json_floats(json_array_get(json_object_get(ref, "pixel_values"), (size_t)i), &np);
        CHECK_EQ_INT(np, 3 * 32 * 32);
        feat[i] = mxl_malloc((size_t)(T * Ht) * sizeof(float));
        const mxl_vlm_input in = {px, (size_t)np, T, {0}, NULL, 0};
        CHECK(v->encode(v, &in, pool, feat[i], &err) == MXL_OK);
        double md, cs;
        mxl_test_vec_vs_json(feat[i], json_array_get(json_object_get(ref, "image_features"), (size_t)i), T * Ht, &md, &cs);
        fprintf(stderr, "  gemma3 %s image %d features: max |diff| %.2e, cosine %.7f\n", form, i, md, cs);
        CHECK(md < feat_tol);
        mxl_free(px);
    }

    mxl_decoder d;
    if (mxl_decoder_load(ck, &d, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(d.hp.vocab == 320);
    json_t *p;
    size_t pi;
    for (int path = 0; path < 2; path++) {
        const bool reference = path == 0;
        /* (the mmproj's f16 input projection moves the image rows by its rounding) */
        const double tol = (reference ? MXL_TEST_DEC_REF_TOL : MXL_TEST_DEC_FAST_DENSE_TOL) + (feat_tol > 1e-4 ? 4e-3 : 0.0);
        json_array_foreach(json_object_get(ref, "prompts"), pi, p) {
            json_t *jids = json_object_get(p, "ids"), *logits = json_object_get(p, "logits");
            const int64_t n = (int64_t)json_array_size(jids);
            int32_t ids[64];
            for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
            mxl_decoder_media media[4];
            const int n_media = media_of(ids, n, img, feat, media);
            CHECK_EQ_INT(n_media, json_integer_value(json_object_get(p, "n_images")));
            char label[128];
            snprintf(label, sizeof label, "gemma3 %s %-10s", form, json_string_value(json_object_get(p, "name")));
            mxl_test_vlm_check_prompt(&d, ids, n, media, n_media, img, logits, json_object_get(p, "greedy"), reference, tol, 64, pool,
                                      label, mxl_test_failed_);
        }
    }
    mxl_decoder_free(&d);
    mxl_free(feat[0]);
    mxl_free(feat[1]);
    mxl_vlm_free(v);
    mxl_checkpoint_close(ck);
    mxl_threadpool_destroy(pool);
    json_decref(ref);
}

TEST(vlm_gemma3_matches_transformers) { check_checkpoint(model_dir(), FX "/reference.json", 1e-4, mxl_test_failed_); }

/* mlx-vlm's 4-bit conversion (gen_vlm_mlx_fixtures.py: the language model quantized, the tower
 * dense with its patch convolution channels-last) against mlx-vlm's own outputs */
TEST(vlm_gemma3_mlx_vlm_matches_mlx_vlm) {
    char p[4096];
    snprintf(p, sizeof p, "%s/tests/fixtures/vlm/gemma3_mlx/model", mxl_test_repo_root());
    check_checkpoint(p, "tests/fixtures/vlm/gemma3_mlx/reference.json", 1e-4, mxl_test_failed_);
}

/* llama.cpp's conversion (gen_vlm_gguf_fixtures.py): the text GGUF with its mmproj beside it (the
 * input projection forced to f16 by the converter: its rounding bounds the features). */
TEST(vlm_gemma3_gguf_mmproj_matches_transformers) {
    char p[4096];
    snprintf(p, sizeof p, "%s/tests/fixtures/vlm/gemma3_gguf/model.gguf", mxl_test_repo_root());
    check_checkpoint(p, FX "/reference.json", 2e-3, mxl_test_failed_);
}

/* The committed images through mlxcel's decoder, PIL-exact resize and normalisation against the
 * pixel values transformers' Gemma3Processor (PIL image processor) gave them. */
TEST(vlm_gemma3_pixels_match_processor) {
    json_t *ref = mxl_test_load_json(FX "/reference.json");
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    REQUIRE(mxl_checkpoint_open(model_dir(), &ck, &err) == MXL_OK);
    REQUIRE(mxl_vlm_load(ck, &v, &err) == MXL_OK && v);
    json_t *c;
    size_t ci;
    int compared = 0;
    json_array_foreach(json_object_get(ref, "e2e"), ci, c) {
        json_t *files = json_object_get(c, "images");
        for (size_t i = 0; i < json_array_size(files); i++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/tests/fixtures/vlm/%s", mxl_test_repo_root(), json_string_value(json_array_get(files, i)));
            mxl_image im = {0, 0, NULL};
            float *px = NULL;
            if (mxl_image_load(path, NULL, &im, &err) || mxl_vlm_pixels(v, &im, &px, &err)) {
                fprintf(stderr, "  %s\n", err.msg);
                CHECK(0);
            } else {
                double md;
                mxl_test_vec_vs_json(px, json_array_get(json_object_get(c, "pixel_values"), i), 3 * v->pre.width * v->pre.height, &md, NULL);
                fprintf(stderr, "  gemma3 processor %s (%dx%d): max |diff| %.2e\n", json_string_value(json_array_get(files, i)), im.w, im.h, md);
                CHECK(md <= 1e-6); /* (the fixture's 6 decimals) */
                compared++;
            }
            mxl_free(px);
            mxl_image_free(&im);
        }
    }
    CHECK_EQ_INT(compared, 3);
    mxl_vlm_free(v);
    mxl_checkpoint_close(ck);
    json_decref(ref);
}
