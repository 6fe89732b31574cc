/* test_vlm_pixtral.c - the Pixtral-tower VLMs against transformers (tests/fixtures/vlm/mistral3
 * and llava_pixtral, gen_vlm_pixtral.py): Mistral 3 (Pixtral tower, RMSNorm + 2 x 2 patch merger
 * projector) and LLaVA with a Pixtral tower (Pixtral-12B's layout), for two seeded pixel arrays of
 * different sizes (a wide and a tall image, each at its own size): the tower's selected hidden
 * states and the image features; the Mistral decoder with those features at the [IMG] positions
 * (the [IMG_BREAK] / [IMG_END] tokens between the rows keeping their embeddings), attending
 * causally - logits at every position outside the image rows of prompts with one image, the two
 * images and none, and the greedy continuation - on the reference and the fast path; and the
 * processor: the committed images of three aspect ratios through mxl_vlm_prepare (longest-edge
 * resize rounded up to patch multiples, BICUBIC, CLIP mean / std) against the pixel values
 * PixtralProcessor gave them, its prompt text against the processor's expansion, its prompts'
 * [IMG] runs mapped to the images; unsupported configs refused by name. */
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

#define MAXN 128

static const char *model_dir(const char *name) { return mxl_test_vlm_model_dir(name); }

/* the fixture's safetensors directory, or (gguf) llama.cpp's text GGUF with its pixtral mmproj
 * beside it (gen_vlm_gguf_fixtures.py: the processor's longest edge as preproc_image_size) */
static const char *model_path(const char *name, bool gguf) {
    static char p[4096];
    if (!gguf) return model_dir(name);
    snprintf(p, sizeof p, "%s/tests/fixtures/vlm/%s_gguf/model.gguf", mxl_test_repo_root(), name);
    return p;
}

static void check_case(const char *name, const char *family, bool gguf, int *mxl_test_failed_) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/vlm/%s/reference.json", name);
    json_t *ref = mxl_test_load_json(rel);
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    REQUIRE(mxl_checkpoint_open(model_path(name, gguf), &ck, &err) == MXL_OK);
    if (mxl_vlm_load(ck, &v, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(v);
    const char *form = gguf ? "gguf+mmproj" : "safetensors";
    CHECK_EQ_STR(v->family, family);
    CHECK_EQ_INT(v->pre.resample, 3);
    CHECK(v->causal_images);
    CHECK_EQ_STR(v->marker, "[IMG]");
    const int32_t img = (int32_t)json_integer_value(json_object_get(ref, "image_token"));
    CHECK_EQ_INT(v->image_token, img);

    /* the image features: each image at its own size */
    const int64_t Ht = v->text_hidden;
    float *feat[2];
    mxl_vlm_input in[2];
    memset(in, 0, sizeof in);
    for (int i = 0; i < 2; i++) {
        json_t *sz = json_array_get(json_object_get(ref, "image_sizes"), (size_t)i);
        const int64_t h = json_integer_value(json_array_get(sz, 0)), w = json_integer_value(json_array_get(sz, 1));
        const int64_t T = json_integer_value(json_array_get(json_object_get(ref, "tokens"), (size_t)i));
        int64_t np;
        float *px = mxl_test_json_floats(json_array_get(json_object_get(ref, "pixel_values"), (size_t)i), &np);
        CHECK_EQ_INT(np, 3 * h * w);
        feat[i] = mxl_malloc((size_t)(T * Ht) * sizeof(float));
        in[i] = (mxl_vlm_input){px, (size_t)np, T, {h, w, 0, 0}, NULL, 0};
        CHECK(v->encode(v, &in[i], pool, feat[i], &err) == MXL_OK);
        double md, cs;
        mxl_test_vec_vs_json(feat[i], json_array_get(json_object_get(ref, "image_features"), (size_t)i), T * Ht, &md, &cs);
        fprintf(stderr, "  %s %s image %d (%lldx%lld, %lld tokens) features: max |diff| %.2e, cosine %.7f\n", name, form, i, (long long)w, (long long)h,
                (long long)T, md, cs);
        CHECK(md < 1e-4);
    }
    /* a wrong token count or size is refused */
    {
        mxl_vlm_input bad = in[0];
        bad.n_tokens += 1;
        CHECK(v->encode(v, &bad, pool, feat[0], &err) == MXL_ERR_ARG);
        bad = in[0];
        bad.grid[0] += 1;
        CHECK(v->encode(v, &bad, pool, feat[0], &err) == MXL_ERR_ARG);
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
            const int n_img = (int)json_integer_value(json_object_get(p, "n_images"));
            int32_t ids[MAXN];
            REQUIRE(n <= MAXN);
            for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
            /* the [IMG] runs (one per row of an image) through the seam's mapping */
            mxl_decoder_media media[32];
            int bimg[32], n_media = 0;
            int64_t off[32];
            CHECK(mxl_vlm_media_blocks(v, ids, (size_t)n, in, n_img, media, bimg, off, 32, &n_media, &err) == MXL_OK);
            for (int b = 0; b < n_media; b++) media[b].emb = feat[bimg[b]] + off[b] * Ht;
            char label[128];
            snprintf(label, sizeof label, "%s %s %-10s", name, form, json_string_value(json_object_get(p, "name")));
            mxl_test_vlm_check_prompt(&d, ids, n, media, n_media, img, logits, json_object_get(p, "greedy"), reference, tol, MAXN, pool,
                                      label, mxl_test_failed_);
        }
    }
    mxl_decoder_free(&d);
    for (int i = 0; i < 2; i++) {
        mxl_free(feat[i]);
        mxl_free(in[i].pixels);
    }
    mxl_vlm_free(v);
    mxl_checkpoint_close(ck);
    mxl_threadpool_destroy(pool);
    json_decref(ref);
}

TEST(vlm_mistral3_matches_transformers) { check_case("mistral3", "mistral3", false, mxl_test_failed_); }
TEST(vlm_llava_pixtral_matches_transformers) { check_case("llava_pixtral", "llava", false, mxl_test_failed_); }
TEST(vlm_mistral3_gguf_mmproj_matches_transformers) { check_case("mistral3", "mistral3", true, mxl_test_failed_); }
TEST(vlm_llava_pixtral_gguf_mmproj_matches_transformers) { check_case("llava_pixtral", "llava", true, mxl_test_failed_); }

/* The committed images (45x30, 40x56, 70x24) through the family's processor against the pixel
 * values and image sizes PixtralProcessor (PIL image processor) gave them; the expanded prompt's
 * [IMG] rows, [IMG_BREAK]s and [IMG_END] against the processor's ids; its [IMG] runs mapped to the
 * images, one causal block per row. */
static void check_processor(const char *name, bool gguf, int *mxl_test_failed_) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/vlm/%s/reference.json", name);
    json_t *ref = mxl_test_load_json(rel);
    REQUIRE(ref);
    const int64_t unit = json_integer_value(json_object_get(ref, "patch_size")) * json_integer_value(json_object_get(ref, "merge"));
    const int32_t brk = (int32_t)json_integer_value(json_object_get(ref, "image_break_token"));
    const int32_t end = (int32_t)json_integer_value(json_object_get(ref, "image_end_token"));
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    REQUIRE(mxl_checkpoint_open(model_path(name, gguf), &ck, &err) == MXL_OK);
    REQUIRE(mxl_vlm_load(ck, &v, &err) == MXL_OK && v);
    json_t *c;
    size_t ci;
    int compared = 0, mapped = 0;
    json_array_foreach(json_object_get(ref, "e2e"), ci, c) {
        json_t *files = json_object_get(c, "images"), *pv = json_object_get(c, "pixel_values"), *sizes = json_object_get(c, "image_sizes");
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
                json_t *sz = json_array_get(sizes, (size_t)i);
                const int64_t h = json_integer_value(json_array_get(sz, 0)), w = json_integer_value(json_array_get(sz, 1));
                CHECK_EQ_INT(in[i].grid[0], h);
                CHECK_EQ_INT(in[i].grid[1], w);
                CHECK_EQ_INT(in[i].n_tokens, (h / unit) * (w / unit));
                CHECK_EQ_INT((int64_t)in[i].n_pixels, 3 * h * w);
                if (pv && (int64_t)in[i].n_pixels == 3 * h * w) {
                    double md;
                    mxl_test_vec_vs_json(in[i].pixels, json_array_get(pv, (size_t)i), (int64_t)in[i].n_pixels, &md, NULL);
                    fprintf(stderr, "  %s %s processor %s (-> %lldx%lld): max |diff| %.2e\n", name, gguf ? "gguf+mmproj" : "safetensors",
                            json_string_value(json_array_get(files, (size_t)i)), (long long)w, (long long)h, md);
                    CHECK(md <= 1e-6); /* (the fixture's 6 decimals) */
                    compared++;
                }
            }
        }
        if (ok) {
            json_t *jids = json_object_get(c, "ids");
            const size_t n = json_array_size(jids);
            int32_t *ids = mxl_malloc(n * sizeof *ids);
            for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
            /* the processor's image text: per image, rows of [IMG] x cols each closed by [IMG_BREAK], the last by [IMG_END] */
            size_t at = 0;
            for (int i = 0; i < n_img; i++) {
                while (at < n && ids[at] != v->image_token) at++;
                const int64_t rows = in[i].grid[2], cols = in[i].grid[3];
                for (int64_t r = 0; r < rows; r++) {
                    for (int64_t k = 0; k < cols; k++, at++) CHECK(at < n && ids[at] == v->image_token);
                    CHECK(at < n && ids[at] == (r + 1 < rows ? brk : end));
                    at++;
                }
                /* the text mlxcel writes for it */
                int64_t n_img_tok = 0, n_brk = 0, n_end = 0;
                for (const char *s = in[i].text; (s = strstr(s, "[IMG")); s++) {
                    if (strncmp(s, "[IMG]", 5) == 0) n_img_tok++;
                    else if (strncmp(s, "[IMG_BREAK]", 11) == 0) n_brk++;
                    else if (strncmp(s, "[IMG_END]", 9) == 0) n_end++;
                }
                CHECK_EQ_INT(n_img_tok, rows * cols);
                CHECK_EQ_INT(n_brk, rows - 1);
                CHECK_EQ_INT(n_end, 1);
            }
            mxl_decoder_media blocks[64];
            int bimg[64], nb = 0;
            int64_t off[64];
            CHECK(mxl_vlm_media_blocks(v, ids, n, in, n_img, blocks, bimg, off, 64, &nb, &err) == MXL_OK);
            int64_t want = 0;
            for (int i = 0; i < n_img; i++) want += in[i].grid[2];
            CHECK_EQ_INT(nb, want);
            for (int b = 0; b < nb; b++) {
                CHECK(blocks[b].causal);
                CHECK_EQ_INT(blocks[b].n, in[bimg[b]].grid[3]);
                CHECK_EQ_INT(off[b] % in[bimg[b]].grid[3], 0);
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

TEST(vlm_mistral3_pixels_match_processor) { check_processor("mistral3", false, mxl_test_failed_); }
TEST(vlm_llava_pixtral_pixels_match_processor) { check_processor("llava_pixtral", false, mxl_test_failed_); }
TEST(vlm_mistral3_gguf_pixels_match_processor) { check_processor("mistral3", true, mxl_test_failed_); }
TEST(vlm_llava_pixtral_gguf_pixels_match_processor) { check_processor("llava_pixtral", true, mxl_test_failed_); }


/* The named fixture with `patch` applied to config.json refuses to load its vision side with want
 * and a message naming needle. */
static void expect_refused(const char *name, const char *patch, mxl_status want, const char *needle, int *mxl_test_failed_) {
    static const char *const k_links[] = {"model.safetensors", NULL};
    mxl_test_vlm_expect_refused(name, model_dir(name), k_links, patch, false, want, needle, mxl_test_failed_);
}

TEST(vlm_pixtral_refuses_unsupported_config_by_name) {
    expect_refused("mistral3", "{\"vision_feature_layer\": [-1, -2]}", MXL_ERR_FORMAT, "vision_feature_layer", mxl_test_failed_);
    expect_refused("mistral3", "{\"vision_feature_layer\": 7}", MXL_ERR_FORMAT, "vision_feature_layer", mxl_test_failed_);
    expect_refused("mistral3", "{\"spatial_merge_size\": 3}", MXL_ERR_FORMAT, "merging_layer", mxl_test_failed_);
    expect_refused("mistral3", "{\"vision_config\": {\"patch_size\": 8}}", MXL_ERR_FORMAT, "patch_conv", mxl_test_failed_);
    expect_refused("mistral3", "{\"vision_config\": {\"hidden_act\": \"xielu\"}}", MXL_ERR_UNSUPPORTED, "vision_config.hidden_act", mxl_test_failed_);
    expect_refused("mistral3", "{\"vision_config\": {\"rope_parameters\": {\"rope_type\": \"yarn\"}}}", MXL_ERR_UNSUPPORTED, "'yarn'", mxl_test_failed_);
    expect_refused("mistral3", "{\"projector_hidden_act\": \"xielu\"}", MXL_ERR_UNSUPPORTED, "projector_hidden_act", mxl_test_failed_);
    expect_refused("llava_pixtral", "{\"vision_feature_select_strategy\": \"default\"}", MXL_ERR_UNSUPPORTED, "'default'", mxl_test_failed_);
}
