/* test_vlm_idefics3.c - Idefics3, SmolVLM and Idefics2 with images against transformers
 * (tests/fixtures/vlm/idefics3, smolvlm and idefics2, gen_vlm_idefics3.py; Idefics2: the four
 * quarters and the whole image as tiles of their own sizes, bucketed positions, the perceiver
 * resampler's 8 latents per tile): the committed images of three
 * aspect ratios (45x30, 40x56, 70x24) through mxl_vlm_prepare (the longest edge resized, both sides
 * up to tile multiples, the tiles row by row and the global tile last; 2x2, 2x2 and 1x2 tiles for
 * idefics3, 2x3, 3x3 and 1x3 for smolvlm) against the processor's pixel values, rows, columns and
 * placeholder count; the features (each tile through the vision transformer with its
 * post_layernorm, pixel shuffle by scale_factor 2 / 3 and the projection) against
 * get_image_features; the Llama decoder with those features in place of the <image> tokens (an
 * image's rows spread over its tiles' runs), attending causally - logits at every text position
 * of prompts with one image, two images and none, and the greedy continuation - on the reference
 * and the fast path; the processor's end-to-end prompts' placeholder runs mapped to the images;
 * and configs it cannot run refused by name. */
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

/* name's fixture through the checkpoint at model (NULL: its HF directory). */
static void check_matches_at(const char *name, const char *model, int *mxl_test_failed_) {
    const bool v2 = strcmp(name, "idefics2") == 0;
    char rpath[256];
    snprintf(rpath, sizeof rpath, "tests/fixtures/vlm/%s/reference.json", name);
    json_t *ref = mxl_test_load_json(rpath);
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    REQUIRE(mxl_checkpoint_open(model ? model : mxl_test_vlm_model_dir(name), &ck, &err) == MXL_OK);
    if (mxl_vlm_load(ck, &v, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(v);
    CHECK_EQ_STR(v->family, name);
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
        json_t *tids = json_object_get(im_ref, "ids");
        n_tok[i] = 0;
        for (size_t k = 0; k < json_array_size(tids); k++) n_tok[i] += json_integer_value(json_array_get(tids, k)) == img;
        mxl_image im = {0, 0, NULL};
        mxl_vlm_input in = {0};
        REQUIRE(mxl_image_load(path, NULL, &im, &err) == MXL_OK);
        if (mxl_vlm_prepare(v, &im, &in, &err)) fprintf(stderr, "  %s\n", err.msg);
        REQUIRE(in.pixels);
        CHECK_EQ_INT(in.n_tokens, n_tok[i]);
        CHECK_EQ_INT((int64_t)in.n_pixels, np);
        CHECK_EQ_INT(in.grid[0], json_integer_value(json_object_get(im_ref, "n_tiles")));
        CHECK_EQ_INT(in.n_tokens, in.grid[0] * v->tokens_per_image);
        if (v2) {
            CHECK(in.text && strncmp(in.text, "<fake_token_around_image><image>", 32) == 0);
        } else {
            CHECK_EQ_INT(in.grid[1], json_integer_value(json_object_get(im_ref, "rows")));
            CHECK_EQ_INT(in.grid[2], json_integer_value(json_object_get(im_ref, "cols")));
            CHECK(in.text && strncmp(in.text, "<fake_token_around_image>", 25) == 0 && strstr(in.text, "<global-img><image>") != NULL);
        }
        if ((int64_t)in.n_pixels == np) {
            double md;
            mxl_test_vec_vs_json(in.pixels, json_object_get(im_ref, "pixel_values"), np, &md, NULL);
            fprintf(stderr, "  processor %s (%dx%d): %lld tiles, %lld tokens, pixels max |diff| %.2e\n", json_string_value(json_object_get(im_ref, "file")),
                    im.w, im.h, (long long)in.grid[0], (long long)in.n_tokens, md);
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
    REQUIRE(d.hp.vocab == 200);
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
            /* the media blocks: each run of the patch token (one per tile), the prompt's images'
             * rows in order */
            mxl_decoder_media media[32];
            int n_media = 0;
            size_t cur = 0;
            int64_t used = 0;
            for (int64_t i = 0; i < n; i++) {
                if (ids[i] != img || (i && ids[i - 1] == img)) continue;
                int64_t e = i;
                while (e < n && ids[e] == img) e++;
                REQUIRE(n_media < 32 && cur < json_array_size(which));
                const int64_t k = json_integer_value(json_array_get(which, cur));
                REQUIRE(used + (e - i) <= n_tok[k]);
                media[n_media++] = (mxl_decoder_media){.row = i, .n = e - i, .emb = feat[k] + used * Ht, .causal = true};
                used += e - i;
                if (used == n_tok[k]) cur++, used = 0;
            }
            CHECK_EQ_INT((int64_t)cur, (int64_t)json_array_size(which));
            char label[128];
            snprintf(label, sizeof label, "%-8s %-10s", name, json_string_value(json_object_get(p, "name")));
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

static void check_prompts(const char *name, int *mxl_test_failed_) {
    char rpath[256];
    snprintf(rpath, sizeof rpath, "tests/fixtures/vlm/%s/reference.json", name);
    json_t *ref = mxl_test_load_json(rpath);
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    REQUIRE(mxl_checkpoint_open(mxl_test_vlm_model_dir(name), &ck, &err) == MXL_OK);
    REQUIRE(mxl_vlm_load(ck, &v, &err) == MXL_OK && v);
    json_t *c;
    size_t ci;
    int mapped = 0;
    json_array_foreach(json_object_get(ref, "e2e"), ci, c) {
        json_t *files = json_object_get(c, "images");
        const int n_img = (int)json_array_size(files);
        mxl_vlm_input in[3];
        memset(in, 0, sizeof in);
        REQUIRE(n_img <= 3);
        bool ok = true;
        for (int i = 0; i < n_img; i++) {
            if (!mxl_test_vlm_prepare_file(v, json_string_value(json_array_get(files, (size_t)i)), &in[i])) {
                ok = false;
            }
        }
        CHECK(ok);
        if (ok) {
            json_t *jids = json_object_get(c, "ids");
            const size_t n = json_array_size(jids);
            int32_t *ids = mxl_malloc(n * sizeof *ids);
            for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
            mxl_decoder_media blocks[64];
            int bimg[64], nb = 0;
            int64_t off[64];
            CHECK(mxl_vlm_media_blocks(v, ids, n, in, n_img, blocks, bimg, off, 64, &nb, &err) == MXL_OK);
            /* one block per tile, each image's tiles in order */
            int64_t tiles = 0;
            for (int i = 0; i < n_img; i++) tiles += in[i].grid[0];
            CHECK_EQ_INT(nb, tiles);
            for (int b = 0, i = 0; b < nb && i < n_img; b++) {
                CHECK(blocks[b].causal);
                CHECK_EQ_INT(blocks[b].n, v->tokens_per_image);
                CHECK_EQ_INT(bimg[b], i);
                if (off[b] + blocks[b].n == in[i].n_tokens) i++;
            }
            mapped++;
            mxl_free(ids);
        }
        for (int i = 0; i < n_img; i++) mxl_vlm_input_free(&in[i]);
    }
    CHECK_EQ_INT(mapped, (int)json_array_size(json_object_get(ref, "e2e")));
    mxl_vlm_free(v);
    mxl_checkpoint_close(ck);
    json_decref(ref);
}


static void check_matches(const char *name, int *mxl_test_failed_) { check_matches_at(name, NULL, mxl_test_failed_); }

TEST(vlm_idefics3_matches_transformers) { check_matches("idefics3", mxl_test_failed_); }

/* llama.cpp's conversion (gen_vlm_gguf_fixtures.py): the text GGUF with its idefics3 mmproj beside
 * it (f32 throughout), against the same transformers references. */
TEST(vlm_idefics3_gguf_mmproj_matches_transformers) {
    char p[4096];
    snprintf(p, sizeof p, "%s/tests/fixtures/vlm/idefics3_gguf/model.gguf", mxl_test_repo_root());
    check_matches_at("idefics3", p, mxl_test_failed_);
}
TEST(vlm_smolvlm_matches_transformers) { check_matches("smolvlm", mxl_test_failed_); }
TEST(vlm_idefics2_matches_transformers) { check_matches("idefics2", mxl_test_failed_); }

/* The processor's end-to-end prompts (the processor over the chat template's rendering): their
 * placeholder runs map to the prepared images in order, one run per tile. */
TEST(vlm_idefics3_processor_prompts_map_to_images) {
    check_prompts("idefics3", mxl_test_failed_);
    check_prompts("smolvlm", mxl_test_failed_);
    check_prompts("idefics2", mxl_test_failed_);
}

/* The fixture (its weights and processor_config.json) with `patch` applied to config.json
 * refuses to load its vision side with want and a message naming needle. */
static void expect_refused(const char *patch, mxl_status want, const char *needle, int *mxl_test_failed_) {
    static const char *const k_links[] = {"model.safetensors", "processor_config.json", NULL};
    mxl_test_vlm_expect_refused("idefics3", mxl_test_vlm_model_dir("idefics3"), k_links, patch, false, want, needle, mxl_test_failed_);
}

TEST(vlm_idefics3_refuses_unsupported_config_by_name) {
    expect_refused("{\"scale_factor\": 4}", MXL_ERR_FORMAT, "scale_factor", mxl_test_failed_);
    /* image_seq_len 9 (processor_config.json) against 36 tokens per tile */
    expect_refused("{\"scale_factor\": 1}", MXL_ERR_FORMAT, "image_seq_len", mxl_test_failed_);
}
