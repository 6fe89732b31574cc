/* test_vlm_llava.c - LLaVA with images against transformers (tests/fixtures/vlm/llava and
 * llava_siglip, gen_vlm_llava.py): llava-1.5's CLIP tower (hidden_states[-2], the CLS row
 * dropped) and the llava-interleave style SigLIP tower (a list of layers concatenated, every row
 * kept), each through the projector, for two seeded pixel arrays; the decoder (Llama, Qwen 2) with
 * those features in place of the image tokens, attending causally - logits at every position
 * outside the image blocks of prompts with one image, two images and none, and the greedy
 * continuation - on the reference and the fast path; and the processor: the committed images of
 * three aspect ratios through mxl_vlm_prepare (CLIP's shortest-edge resize + center crop, SigLIP's
 * square resize) against the pixel values LlavaProcessor gave them, with the placeholder runs of
 * its prompts mapped to the images; unsupported configs (towers, strategies, layers, activations,
 * text decoders) refused by name. */
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

static const char *model_dir(const char *name) { return mxl_test_vlm_model_dir(name); }

/* The media blocks of ids: each run of the image token, image i taking features[i], causal. */
static int media_of(const int32_t *ids, int64_t n, int32_t img, float *const *features, mxl_decoder_media *m) {
    int k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] != img || (i && ids[i - 1] == img)) continue;
        int64_t e = i;
        while (e < n && ids[e] == img) e++;
        m[k] = (mxl_decoder_media){.row = i, .n = e - i, .emb = features[k], .causal = true};
        k++;
    }
    return k;
}

static void check_case(const char *name, int64_t tokens, int64_t size, int *mxl_test_failed_) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/vlm/%s/reference.json", name);
    json_t *ref = mxl_test_load_json(rel);
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    REQUIRE(mxl_checkpoint_open(model_dir(name), &ck, &err) == MXL_OK);
    if (mxl_vlm_load(ck, &v, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(v);
    CHECK_EQ_STR(v->family, "llava");
    CHECK_EQ_INT(v->tokens_per_image, tokens);
    CHECK_EQ_INT(v->tokens_per_image, json_integer_value(json_object_get(ref, "tokens_per_image")));
    CHECK_EQ_INT(v->pre.width, size);
    CHECK_EQ_INT(v->pre.resample, 3);
    CHECK(v->causal_images);
    CHECK_EQ_STR(v->marker, "<image>");
    const int32_t img = (int32_t)json_integer_value(json_object_get(ref, "image_token"));
    CHECK_EQ_INT(v->image_token, img);

    /* the image features */
    const int64_t T = v->tokens_per_image, Ht = v->text_hidden;
    float *feat[2];
    for (int i = 0; i < 2; i++) {
        int64_t np;
        float *px = mxl_test_json_floats(json_array_get(json_object_get(ref, "pixel_values"), (size_t)i), &np);
        CHECK_EQ_INT(np, 3 * size * size);
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
    REQUIRE(d.hp.vocab == 160);
    json_t *p;
    size_t pi;
    for (int path = 0; path < 2; path++) {
        const bool reference = path == 0;
        const double tol = reference ? MXL_TEST_DEC_REF_TOL : MXL_TEST_DEC_FAST_DENSE_TOL;
        json_array_foreach(json_object_get(ref, "prompts"), pi, p) {
            json_t *jids = json_object_get(p, "ids"), *logits = json_object_get(p, "logits");
            const int64_t n = (int64_t)json_array_size(jids);
            int32_t ids[96];
            REQUIRE(n <= 96);
            for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
            mxl_decoder_media media[4];
            const int n_media = media_of(ids, n, img, feat, media);
            CHECK_EQ_INT(n_media, json_integer_value(json_object_get(p, "n_images")));
            char label[128];
            snprintf(label, sizeof label, "%s %-10s", name, json_string_value(json_object_get(p, "name")));
            mxl_test_vlm_check_prompt(&d, ids, n, media, n_media, img, logits, json_object_get(p, "greedy"), reference, tol, 96, pool,
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

TEST(vlm_llava_clip_matches_transformers) { check_case("llava", 16, 32, mxl_test_failed_); }
/* mlx-vlm's 4-bit conversion (gen_vlm_mlx_fixtures.py: the CLIP tower dense with its patch
 * convolution channels-last) against transformers on the conversion's dequantized weights */
TEST(vlm_llava_clip_mlx_vlm_matches_dequantized) { check_case("llava_mlx", 16, 32, mxl_test_failed_); }
TEST(vlm_llava_siglip_layer_list_matches_transformers) { check_case("llava_siglip", 9, 24, mxl_test_failed_); }

/* The committed images (45x30, 40x56, 70x24) through mlxcel's decoder and the family's processor
 * against the pixel values transformers' LlavaProcessor (PIL image processor) gave them, and the
 * processor's prompts' placeholder runs mapped to the images, one causal block each. */
static void check_processor(const char *name, int *mxl_test_failed_) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/vlm/%s/reference.json", name);
    json_t *ref = mxl_test_load_json(rel);
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    REQUIRE(mxl_checkpoint_open(model_dir(name), &ck, &err) == MXL_OK);
    REQUIRE(mxl_vlm_load(ck, &v, &err) == MXL_OK && v);
    json_t *c;
    size_t ci;
    int compared = 0, mapped = 0;
    json_array_foreach(json_object_get(ref, "e2e"), ci, c) {
        json_t *files = json_object_get(c, "images"), *pv = json_object_get(c, "pixel_values");
        const int n_img = (int)json_array_size(files);
        mxl_vlm_input in[3];
        memset(in, 0, sizeof in);
        REQUIRE(n_img <= 3);
        bool ok = true;
        for (int i = 0; i < n_img; i++) {
            if (!mxl_test_vlm_prepare_file(v, json_string_value(json_array_get(files, (size_t)i)), &in[i])) {
                CHECK(0);
                ok = false;
            } else {
                CHECK_EQ_INT(in[i].n_tokens, v->tokens_per_image);
                CHECK_EQ_INT((int64_t)in[i].n_pixels, 3 * v->pre.width * v->pre.height);
                if (pv) {
                    double md;
                    mxl_test_vec_vs_json(in[i].pixels, json_array_get(pv, (size_t)i), (int64_t)in[i].n_pixels, &md, NULL);
                    fprintf(stderr, "  %s processor %s: max |diff| %.2e\n", name, json_string_value(json_array_get(files, (size_t)i)), md);
                    CHECK(md <= 1e-6); /* (the fixture's 6 decimals) */
                    compared++;
                }
            }
        }
        if (ok) {
            /* the processor's prompt ids: one causal block of tokens_per_image per image, in order */
            json_t *jids = json_object_get(c, "ids");
            const size_t n = json_array_size(jids);
            int32_t *ids = mxl_malloc(n * sizeof *ids);
            for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
            mxl_decoder_media blocks[8];
            int bimg[8], nb = 0;
            int64_t off[8];
            CHECK(mxl_vlm_media_blocks(v, ids, n, in, n_img, blocks, bimg, off, 8, &nb, &err) == MXL_OK);
            CHECK_EQ_INT(nb, n_img);
            for (int b = 0; b < nb; b++) {
                CHECK(blocks[b].causal);
                CHECK_EQ_INT(blocks[b].n, v->tokens_per_image);
                CHECK_EQ_INT(bimg[b], b);
            }
            mapped++;
            mxl_free(ids);
        }
        for (int i = 0; i < n_img; i++) mxl_vlm_input_free(&in[i]);
    }
    CHECK_EQ_INT(compared, 3);
    CHECK_EQ_INT(mapped, 3);
    mxl_vlm_free(v);
    mxl_checkpoint_close(ck);
    json_decref(ref);
}

TEST(vlm_llava_clip_pixels_match_processor) { check_processor("llava", mxl_test_failed_); }
TEST(vlm_llava_siglip_pixels_match_processor) { check_processor("llava_siglip", mxl_test_failed_); }


/* The llava fixture with `patch` applied to config.json refuses to load (the vision side, or
 * with decoder the text decoder) with want and a message naming needle. */
static void expect_refused(const char *patch, bool decoder, mxl_status want, const char *needle, int *mxl_test_failed_) {
    static const char *const k_links[] = {"model.safetensors", NULL};
    mxl_test_vlm_expect_refused("llava", model_dir("llava"), k_links, patch, decoder, want, needle, mxl_test_failed_);
}

TEST(vlm_llava_refuses_unsupported_config_by_name) {
    expect_refused("{\"vision_feature_select_strategy\": \"cls\"}", false, MXL_ERR_UNSUPPORTED, "'cls'", mxl_test_failed_);
    expect_refused("{\"vision_feature_layer\": 9}", false, MXL_ERR_FORMAT, "vision_feature_layer", mxl_test_failed_);
    expect_refused("{\"vision_feature_layer\": []}", false, MXL_ERR_FORMAT, "vision_feature_layer", mxl_test_failed_);
    expect_refused("{\"vision_config\": {\"model_type\": \"nonesuch_vision\"}}", false, MXL_ERR_UNSUPPORTED, "'nonesuch_vision'", mxl_test_failed_);
    expect_refused("{\"vision_config\": {\"hidden_act\": \"xielu\"}}", false, MXL_ERR_UNSUPPORTED, "vision_config.hidden_act", mxl_test_failed_);
    expect_refused("{\"projector_hidden_act\": \"xielu\"}", false, MXL_ERR_UNSUPPORTED, "projector_hidden_act", mxl_test_failed_);
    expect_refused("{\"vision_config\": {\"patch_size\": 4}}", false, MXL_ERR_FORMAT, "patch_embedding", mxl_test_failed_);
    expect_refused("{\"text_config\": {\"model_type\": \"nonesuch\"}}", true, MXL_ERR_UNSUPPORTED, "'nonesuch'", mxl_test_failed_);
    expect_refused("{\"text_config\": {\"model_type\": \"gemma3\"}}", true, MXL_ERR_UNSUPPORTED, "'gemma3'", mxl_test_failed_);
}
