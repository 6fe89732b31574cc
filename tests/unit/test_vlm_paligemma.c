/* test_vlm_paligemma.c - PaliGemma 1 and 2 with images against transformers
 * (tests/fixtures/vlm/paligemma{,2}, gen_vlm_paligemma.py): the SigLIP tower + linear projector's
 * image features for two seeded pixel arrays, and the decoder (Gemma's, Gemma 2's) with those
 * features in place of the image tokens and the prefix-LM mask - the image rows and the text
 * prefix one bidirectional block (mxl_vlm_media_blocks' joined blocks), the suffix causal - on
 * the reference and the fast path: the logits of the prefix's last position and of every suffix
 * position, and the greedy continuation. Also the processor's prompt format and its pixels
 * (PIL-exact bicubic resize and normalisation) against PaliGemmaProcessor's. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/threadpool.h"
#include "image/image.h"
#include "models/checkpoint.h"
#include "models/decoder.h"
#include "models/vlm.h"
#include "test.h"
#include "test_vlm_common.h"
#include "test_decoder_compare.h"

static const char *model_dir(const char *name) { return mxl_test_vlm_model_dir(name); }

static int32_t argmax(const float *v, int64_t n) {
    int32_t best = 0;
    for (int64_t t = 1; t < n; t++)
        if (v[t] > v[best]) best = (int32_t)t;
    return best;
}

static void check_case(const char *name, int *mxl_test_failed_) {
    char fx[256];
    snprintf(fx, sizeof fx, "tests/fixtures/vlm/%s/reference.json", name);
    json_t *ref = mxl_test_load_json(fx);
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    REQUIRE(mxl_checkpoint_open(model_dir(name), &ck, &err) == MXL_OK);
    if (mxl_vlm_load(ck, &v, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(v);
    const int64_t T = json_integer_value(json_object_get(ref, "tokens_per_image")), S = json_integer_value(json_object_get(ref, "image_size"));
    CHECK_EQ_INT(v->tokens_per_image, T);
    CHECK_EQ_INT(v->pre.width, S);
    CHECK_EQ_INT(v->pre.resample, 3); /* bicubic */
    CHECK(v->prefix_lm && !v->causal_images);
    const int32_t img = (int32_t)json_integer_value(json_object_get(ref, "image_token"));
    CHECK_EQ_INT(v->image_token, img);

    /* the image features */
    const int64_t Ht = v->text_hidden;
    float *feat[2];
    for (int i = 0; i < 2; i++) {
        int64_t np;
        float *px = mxl_test_json_floats(json_array_get(json_object_get(ref, "pixel_values"), (size_t)i), &np);
        CHECK_EQ_INT(np, 3 * S * S);
        feat[i] = mxl_malloc((size_t)(T * Ht) * sizeof(float));
        const mxl_vlm_input in = {px, (size_t)np, T, {0}, NULL, 0};
        CHECK(v->encode(v, &in, pool, feat[i], &err) == MXL_OK);
        double md, cs;
        mxl_test_vec_vs_json(feat[i], json_array_get(json_object_get(ref, "image_features"), (size_t)i), T * Ht, &md, &cs);
        fprintf(stderr, "  %s image %d features: max |diff| %.2e, cosine %.7f\n", name, i, md, cs);
        CHECK(md < 1e-4);
        mxl_free(px);
    }

    mxl_decoder d;
    if (mxl_decoder_load(ck, &d, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(d.hp.vocab == 320);
    const mxl_vlm_input inputs[2] = {{NULL, 0, T, {0}, NULL, 0}, {NULL, 0, T, {0}, NULL, 0}};
    float *lg = mxl_malloc((size_t)d.hp.vocab * sizeof(float));
    json_t *p;
    size_t pi;
    for (int path = 0; path < 2; path++) {
        const bool reference = path == 0;
        const double tol = reference ? MXL_TEST_DEC_REF_TOL : MXL_TEST_DEC_FAST_DENSE_TOL;
        json_array_foreach(json_object_get(ref, "prompts"), pi, p) {
            json_t *jids = json_object_get(p, "ids"), *logits = json_object_get(p, "logits");
            const int64_t n = (int64_t)json_array_size(jids), np = json_integer_value(json_object_get(p, "n_prefix"));
            const int n_img = (int)json_integer_value(json_object_get(p, "n_images"));
            int32_t ids[128];
            REQUIRE(n <= 128);
            for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
            /* the prefix's blocks as the front ends get them: the images, then the text, joined */
            mxl_decoder_media media[8];
            int bimg[8], n_media = 0;
            int64_t boff[8];
            REQUIRE(mxl_vlm_media_blocks(v, ids, (size_t)np, inputs, n_img, media, bimg, boff, 8, &n_media, &err) == MXL_OK);
            CHECK_EQ_INT(n_media, n_img + 1);
            CHECK_EQ_INT(mxl_decoder_media_max_unit(media, n_media), np);
            for (int b = 0; b < n_media; b++) {
                CHECK(!media[b].causal && media[b].joined == (b + 1 < n_media));
                if (bimg[b] >= 0) media[b].emb = feat[bimg[b]] + boff[b] * Ht;
            }
            CHECK(bimg[n_media - 1] == -1 && media[n_media - 1].emb == NULL && media[n_media - 1].row == n_img * T);
            double worst = 0;
            int compared = 0;
            /* the prefix in one call, then the suffix up to c in another (causal) */
            for (int64_t c = np; c <= n; c++) {
                mxl_decoder_state *s = NULL;
                REQUIRE(mxl_decoder_state_create(&d, 128, 64, pool, &s, &err) == MXL_OK);
                mxl_decoder_state_set_reference(s, reference);
                if (mxl_decoder_forward_media(&d, s, ids, np, media, n_media, lg, &err) ||
                    (c > np && mxl_decoder_forward(&d, s, ids + np, c - np, lg, &err))) {
                    fprintf(stderr, "  %s\n", err.msg);
                    CHECK(0);
                }
                double md;
                mxl_test_vec_vs_json(lg, json_array_get(logits, (size_t)(c - np)), d.hp.vocab, &md, NULL);
                if (md > worst || isnan(md)) worst = md;
                compared++;
                mxl_decoder_state_destroy(s);
            }
            /* greedy from the prefix, one token at a time */
            mxl_decoder_state *s = NULL;
            REQUIRE(mxl_decoder_state_create(&d, 128, 64, pool, &s, &err) == MXL_OK);
            mxl_decoder_state_set_reference(s, reference);
            CHECK(mxl_decoder_forward_media(&d, s, ids, np, media, n_media, lg, &err) == MXL_OK);
            json_t *greedy = json_object_get(p, "greedy");
            int same = 0;
            for (size_t g = 0; g < json_array_size(greedy); g++) {
                int32_t best = argmax(lg, d.hp.vocab);
                same += best == json_integer_value(json_array_get(greedy, g));
                CHECK(mxl_decoder_forward(&d, s, &best, 1, lg, &err) == MXL_OK);
            }
            mxl_decoder_state_destroy(s);
            /* a pass too short for the prefix's block is refused, not split */
            REQUIRE(mxl_decoder_state_create(&d, 128, np - 1, pool, &s, &err) == MXL_OK);
            CHECK(mxl_decoder_forward_media(&d, s, ids, np, media, n_media, lg, &err) == MXL_ERR_ARG);
            mxl_decoder_state_destroy(s);
            fprintf(stderr, "  %s %-10s %s: %d positions, max |diff| %.2e; greedy %d/%zu\n", name, json_string_value(json_object_get(p, "name")),
                    reference ? "[reference]" : "[fast]", compared, worst, same, json_array_size(greedy));
            CHECK(compared >= 4);
            CHECK(worst <= tol);
            CHECK_EQ_INT(same, (int64_t)json_array_size(greedy));
        }
    }
    mxl_free(lg);
    mxl_decoder_free(&d);
    mxl_free(feat[0]);
    mxl_free(feat[1]);
    mxl_vlm_free(v);
    mxl_checkpoint_close(ck);
    mxl_threadpool_destroy(pool);
    json_decref(ref);
}

TEST(vlm_paligemma_matches_transformers) { check_case("paligemma", mxl_test_failed_); }
TEST(vlm_paligemma2_matches_transformers) { check_case("paligemma2", mxl_test_failed_); }

/* PaliGemmaProcessor's prompt: image markers, then BOS, the text and a newline; markers the text
 * writes stay, BOS after the last. */
TEST(vlm_paligemma_prompt_format) {
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    REQUIRE(mxl_checkpoint_open(model_dir("paligemma"), &ck, &err) == MXL_OK);
    REQUIRE(mxl_vlm_load(ck, &v, &err) == MXL_OK && v && v->prompt);
    static const struct {
        const char *text;
        int n;
        const char *want;
    } k_cases[] = {
        {"caption en", 1, "<image><bos>caption en\n"},
        {"w20 w21", 2, "<image><image><bos>w20 w21\n"},
        {"<image>caption en", 1, "<image><bos>caption en\n"},
        {"a <image> b <image>c", 2, "a <image> b <image><bos>c\n"},
        {"", 1, "<image><bos>\n"},
    };
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        char *out = NULL;
        size_t len = 0;
        REQUIRE(v->prompt(v, k_cases[i].text, strlen(k_cases[i].text), k_cases[i].n, "<bos>", 5, &out, &len, &err) == MXL_OK);
        CHECK_EQ_STR(out, k_cases[i].want);
        CHECK_EQ_INT((int64_t)len, (int64_t)strlen(k_cases[i].want));
        mxl_free(out);
    }
    mxl_vlm_free(v);
    mxl_checkpoint_close(ck);
}

/* The committed images through mlxcel's decoder, PIL-exact bicubic resize and normalisation
 * against the pixel values transformers' PaliGemmaProcessor (SiglipImageProcessor, PIL) gave. */
TEST(vlm_paligemma_pixels_match_processor) {
    json_t *ref = mxl_test_load_json("tests/fixtures/vlm/paligemma/reference.json");
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    REQUIRE(mxl_checkpoint_open(model_dir("paligemma"), &ck, &err) == MXL_OK);
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
            mxl_vlm_input in;
            memset(&in, 0, sizeof in);
            if (mxl_image_load(path, NULL, &im, &err) || mxl_vlm_prepare(v, &im, &in, &err)) {
                fprintf(stderr, "  %s\n", err.msg);
                CHECK(0);
            } else {
                double md;
                mxl_test_vec_vs_json(in.pixels, json_array_get(json_object_get(c, "pixel_values"), i), 3 * v->pre.width * v->pre.height, &md, NULL);
                fprintf(stderr, "  paligemma processor %s (%dx%d): max |diff| %.2e\n", json_string_value(json_array_get(files, i)), im.w, im.h, md);
                CHECK(md <= 1e-6); /* (the fixture's 6 decimals) */
                CHECK_EQ_INT(in.n_tokens, v->tokens_per_image);
                CHECK_EQ_INT((int64_t)in.text_len, v->tokens_per_image * 7); /* n x "<image>" */
                compared++;
            }
            mxl_vlm_input_free(&in);
            mxl_image_free(&im);
        }
    }
    CHECK_EQ_INT(compared, 3);
    mxl_vlm_free(v);
    mxl_checkpoint_close(ck);
    json_decref(ref);
}
