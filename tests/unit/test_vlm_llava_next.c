/* test_vlm_llava_next.c - LLaVA-NeXT with images against transformers (tests/fixtures/vlm/llava_next,
 * gen_vlm_llava_next.py): the committed images of three aspect ratios (45x30, 40x56, 70x24)
 * through mxl_vlm_prepare's anyres crops (best pinpoint resolution, aspect-kept resize, centred
 * pad, base crop first) against the pixel values LlavaNextImageProcessor (PIL backend) gave them,
 * with the image's placeholder count (LlavaNextProcessor's, which varies with the image's size);
 * the packed features (each crop through the CLIP tower and projector, the crops' grid un-padded
 * to the image's aspect ratio with image_newline after each row, the base crop's rows first)
 * against get_image_features; the Mistral decoder with those features in place of the image
 * tokens, attending causally - logits at every text position of prompts with one image, two
 * images of different aspect ratios and none, and the greedy continuation - on the reference and
 * the fast path; the processor's end-to-end prompts' placeholder runs mapped to the images; and
 * configs it cannot run refused by name. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/threadpool.h"
#include "image/image.h"
#include "models/checkpoint.h"
#include "models/decoder.h"
#include "models/vlm.h"
#include "test.h"
#include "test_vlm_common.h"
#include "test_decoder_compare.h"

#define MAX_IDS 256

static const char *model_dir(void) { return mxl_test_vlm_model_dir("llava_next"); }

TEST(vlm_llava_next_matches_transformers) {
    json_t *ref = mxl_test_load_json("tests/fixtures/vlm/llava_next/reference.json");
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    REQUIRE(mxl_checkpoint_open(model_dir(), &ck, &err) == MXL_OK);
    if (mxl_vlm_load(ck, &v, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(v);
    CHECK_EQ_STR(v->family, "llava_next");
    CHECK(v->prepare != NULL);
    CHECK(v->causal_images);
    CHECK_EQ_STR(v->marker, "<image>");
    const int32_t img = (int32_t)json_integer_value(json_object_get(ref, "image_token"));
    CHECK_EQ_INT(v->image_token, img);
    const int64_t Ht = v->text_hidden;

    /* the processor (each committed image) and the features (from the processor's pixels) */
    json_t *images = json_object_get(ref, "images");
    const size_t n_images = json_array_size(images);
    REQUIRE(n_images == 3);
    float *feat[3];
    int64_t n_tok[3];
    for (size_t i = 0; i < n_images; i++) {
        json_t *im_ref = json_array_get(images, i);
        char path[4200];
        snprintf(path, sizeof path, "%s/tests/fixtures/vlm/%s", mxl_test_repo_root(), json_string_value(json_object_get(im_ref, "file")));
        int64_t np;
        float *px = mxl_test_json_floats(json_object_get(im_ref, "pixel_values"), &np);
        n_tok[i] = json_integer_value(json_object_get(im_ref, "n_tokens"));
        mxl_image im = {0, 0, NULL};
        mxl_vlm_input in = {0};
        REQUIRE(mxl_image_load(path, NULL, &im, &err) == MXL_OK);
        if (mxl_vlm_prepare(v, &im, &in, &err)) fprintf(stderr, "  %s\n", err.msg);
        REQUIRE(in.pixels);
        CHECK_EQ_INT(in.n_tokens, n_tok[i]);
        CHECK_EQ_INT((int64_t)in.n_pixels, np);
        json_t *isz = json_object_get(im_ref, "image_size");
        CHECK_EQ_INT(in.grid[0], json_integer_value(json_array_get(isz, 0)));
        CHECK_EQ_INT(in.grid[1], json_integer_value(json_array_get(isz, 1)));
        CHECK_EQ_INT(1 + in.grid[2] * in.grid[3], json_integer_value(json_object_get(im_ref, "n_crops")));
        CHECK_EQ_INT((int64_t)in.text_len, n_tok[i] * 7);
        if ((int64_t)in.n_pixels == np) {
            double md;
            mxl_test_vec_vs_json(in.pixels, json_object_get(im_ref, "pixel_values"), np, &md, NULL);
            fprintf(stderr, "  processor %s (%dx%d): %lld crops, %lld tokens, pixels max |diff| %.2e\n", json_string_value(json_object_get(im_ref, "file")),
                    im.w, im.h, (long long)(np / (3 * v->pre.width * v->pre.height)), (long long)in.n_tokens, md);
            CHECK(md <= 1e-6); /* (the fixture's 6 decimals) */
        }
        /* the features from the processor's own pixels */
        mxl_free(in.pixels);
        in.pixels = px;
        in.n_pixels = (size_t)np;
        in.n_tokens = n_tok[i];
        feat[i] = mxl_malloc((size_t)(n_tok[i] * Ht) * sizeof(float));
        if (v->encode(v, &in, pool, feat[i], &err)) {
            fprintf(stderr, "  %s\n", err.msg);
            CHECK(0);
        }
        double md, cs;
        mxl_test_vec_vs_json(feat[i], json_object_get(im_ref, "features"), n_tok[i] * Ht, &md, &cs);
        fprintf(stderr, "  image %zu features [%lld, %lld]: max |diff| %.2e, cosine %.7f\n", i, (long long)n_tok[i], (long long)Ht, md, cs);
        CHECK(md < 1e-4);
        mxl_vlm_input_free(&in);
        mxl_image_free(&im);
    }

    mxl_decoder d;
    if (mxl_decoder_load(ck, &d, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(d.hp.vocab == 160);
    json_t *p;
    size_t pi;
    for (int path = 0; path < 2; path++) {
        const bool reference = path == 0;
        const double tol = reference ? MXL_TEST_DEC_REF_TOL : MXL_TEST_DEC_FAST_DENSE_TOL;
        json_array_foreach(json_object_get(ref, "prompts"), pi, p) {
            json_t *jids = json_object_get(p, "ids"), *logits = json_object_get(p, "logits"), *which = json_object_get(p, "images");
            const int64_t n = (int64_t)json_array_size(jids);
            int32_t ids[MAX_IDS];
            REQUIRE(n <= MAX_IDS);
            for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
            /* the media blocks: each run of the image token, the prompt's images in order */
            mxl_decoder_media media[4];
            int n_media = 0;
            for (int64_t i = 0; i < n; i++) {
                if (ids[i] != img || (i && ids[i - 1] == img)) continue;
                int64_t e = i;
                while (e < n && ids[e] == img) e++;
                REQUIRE(n_media < (int)json_array_size(which));
                const int64_t k = json_integer_value(json_array_get(which, (size_t)n_media));
                CHECK_EQ_INT(e - i, n_tok[k]);
                media[n_media++] = (mxl_decoder_media){.row = i, .n = e - i, .emb = feat[k], .causal = true};
            }
            CHECK_EQ_INT(n_media, (int64_t)json_array_size(which));
            char label[128];
            snprintf(label, sizeof label, "%-10s", json_string_value(json_object_get(p, "name")));
            mxl_test_vlm_check_prompt(&d, ids, n, media, n_media, img, logits, json_object_get(p, "greedy"), reference, tol, MAX_IDS, pool,
                                      label, mxl_test_failed_);
        }
    }
    mxl_decoder_free(&d);
    for (size_t i = 0; i < n_images; i++) mxl_free(feat[i]);
    mxl_vlm_free(v);
    mxl_checkpoint_close(ck);
    mxl_threadpool_destroy(pool);
    json_decref(ref);
}

/* The processor's end-to-end prompts (LlavaNextProcessor over the chat template's rendering):
 * their placeholder runs map to the prepared images in order, each run the image's own count. */
TEST(vlm_llava_next_processor_prompts_map_to_images) { mxl_test_vlm_check_e2e_runs("llava_next", true, mxl_test_failed_); }

/* The fixture (its weights and processor_config.json) with `patch` applied to config.json
 * refuses to load its vision side with want and a message naming needle. */
static void expect_refused(const char *patch, mxl_status want, const char *needle, int *mxl_test_failed_) {
    static const char *const k_links[] = {"model.safetensors", "processor_config.json", NULL};
    mxl_test_vlm_expect_refused("llava_next", model_dir(), k_links, patch, false, want, needle, mxl_test_failed_);
}

TEST(vlm_llava_next_refuses_unsupported_config_by_name) {
    expect_refused("{\"image_grid_pinpoints\": [[20, 32]]}", MXL_ERR_FORMAT, "multiples", mxl_test_failed_);
    expect_refused("{\"image_grid_pinpoints\": []}", MXL_ERR_FORMAT, "image_grid_pinpoints", mxl_test_failed_);
    expect_refused("{\"image_grid_pinpoints\": [[16, 32], [32, 16]]}", MXL_ERR_FORMAT, "differ", mxl_test_failed_);
    expect_refused("{\"vision_feature_select_strategy\": \"full\"}", MXL_ERR_UNSUPPORTED, "'full'", mxl_test_failed_);
}
