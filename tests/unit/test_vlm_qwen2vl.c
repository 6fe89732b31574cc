/* test_vlm_qwen2vl.c - Qwen2-VL, Qwen2.5-VL and Qwen3-VL with images against transformers
 * (tests/fixtures/vlm/qwen2_vl, qwen2_5_vl, qwen3_vl; gen_vlm_qwen2vl.py): the committed images through the
 * processor (smart_resize, PIL's bicubic resize, normalisation, patchify in merge-block order)
 * against Qwen2VLProcessor's patches, the vision tower + merger's features for them (2.5: window
 * attention with partial windows; 3: learned positions resampled to the grid), and the decoder
 * with those features (3: and its DeepStack features, added after the first layers) in place of the image
 * tokens at their M-RoPE positions - logits at every text position of prompts with one image,
 * two images of transposed grids and none, on the reference and the fast path, the prompt run
 * whole and split after the first image (the position delta carried by the state), and the
 * greedy continuation. */
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
#include "test_decoder_compare.h"

static const char *path_of(const char *fam, const char *rest) {
    static char p[4096];
    snprintf(p, sizeof p, "%s/tests/fixtures/vlm/%s%s", mxl_test_repo_root(), fam, rest);
    return p;
}

/* The greedy tokens after ids (the prompt in one call, or two: [0, split) then the rest). */
static int greedy_run(const mxl_decoder *d, mxl_threadpool *pool, bool reference, const int32_t *ids, int64_t n, const mxl_decoder_media *media,
                      int n_media, int64_t split, json_t *greedy, float *lg) {
    mxl_error err;
    mxl_decoder_state *s = NULL;
    if (mxl_decoder_state_create(d, 128, 96, pool, &s, &err)) return -1;
    mxl_decoder_state_set_reference(s, reference);
    mxl_status st;
    if (split > 0 && split < n) {
        int k = 0;
        while (k < n_media && media[k].row + media[k].n <= split) k++;
        mxl_decoder_media rest[8];
        for (int i = k; i < n_media; i++) rest[i - k] = media[i], rest[i - k].row -= split;
        st = mxl_decoder_forward_media(d, s, ids, split, media, k, lg, &err);
        if (!st) st = mxl_decoder_forward_media(d, s, ids + split, n - split, rest, n_media - k, lg, &err);
    } else {
        st = mxl_decoder_forward_media(d, s, ids, n, media, n_media, lg, &err);
    }
    if (st) fprintf(stderr, "  %s\n", err.msg);
    int same = 0;
    for (size_t g = 0; !st && g < json_array_size(greedy); g++) {
        int32_t best = 0;
        for (int64_t t = 1; t < d->hp.vocab; t++)
            if (lg[t] > lg[best]) best = (int32_t)t;
        same += best == json_integer_value(json_array_get(greedy, g));
        if (mxl_decoder_forward(d, s, &best, 1, lg, &err)) return -1;
    }
    mxl_decoder_state_destroy(s);
    return st ? -1 : same;
}

/* fam's transformers references against its checkpoint (gguf: llama.cpp's text GGUF with its
 * mmproj beside it, gen_vlm_gguf_fixtures.py, which gives the mmproj the processor's pixel limits) */
static void check_family(const char *fam, bool gguf, int *mxl_test_failed_) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/vlm/%s/reference.json", fam);
    json_t *ref = mxl_test_load_json(rel);
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    REQUIRE(mxl_checkpoint_open(path_of(fam, gguf ? "_gguf/model.gguf" : "/model"), &ck, &err) == MXL_OK);
    if (mxl_vlm_load(ck, &v, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(v);
    const char *form = gguf ? "gguf+mmproj" : "safetensors";
    const int32_t img = (int32_t)json_integer_value(json_object_get(ref, "image_token"));
    CHECK_EQ_INT(v->image_token, img);
    CHECK(v->mrope_grid);

    /* the processor and the tower, image by image */
    json_t *images = json_object_get(ref, "images");
    const int n_img = (int)json_array_size(images);
    REQUIRE(n_img == 2);
    mxl_vlm_input in[2] = {0};
    float *feat[2] = {NULL, NULL};
    for (int i = 0; i < n_img; i++) {
        json_t *im_ref = json_array_get(images, (size_t)i);
        mxl_image im = {0, 0, NULL};
        REQUIRE(mxl_image_load(path_of("", json_string_value(json_object_get(im_ref, "file"))), NULL, &im, &err) == MXL_OK);
        REQUIRE(mxl_vlm_prepare(v, &im, &in[i], &err) == MXL_OK);
        mxl_image_free(&im);
        json_t *thw = json_object_get(im_ref, "grid_thw"), *pv = json_object_get(im_ref, "pixel_values");
        const int64_t gh = json_integer_value(json_array_get(thw, 1)), gw = json_integer_value(json_array_get(thw, 2));
        CHECK_EQ_INT(in[i].grid[1] * 2, gh);
        CHECK_EQ_INT(in[i].grid[2] * 2, gw);
        CHECK_EQ_INT(in[i].n_tokens, gh * gw / 4);
        REQUIRE(in[i].n_pixels == json_array_size(pv));
        double md;
        mxl_test_vec_vs_json(in[i].pixels, pv, (int64_t)in[i].n_pixels, &md, NULL);
        fprintf(stderr, "  %s %s processor %s -> %lldx%lld patches: max |diff| %.2e\n", fam, form, json_string_value(json_object_get(im_ref, "file")),
                (long long)gh, (long long)gw, md);
        CHECK(md <= 1e-6);
        feat[i] = mxl_malloc(mxl_vlm_rows_floats(v, &in[i]) * sizeof(float));
        REQUIRE(v->encode(v, &in[i], pool, feat[i], &err) == MXL_OK);
        double cs;
        mxl_test_vec_vs_json(feat[i], json_object_get(im_ref, "features"), in[i].n_tokens * v->text_hidden, &md, &cs);
        fprintf(stderr, "  %s %s image %d features: max |diff| %.2e, cosine %.7f\n", fam, form, i, md, cs);
        CHECK(md < 1e-4);
    }

    mxl_decoder d;
    if (mxl_decoder_load(ck, &d, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(d.hp.vocab == 192);
    const bool glm = strncmp(fam, "glm4v", 5) == 0;
    CHECK(glm ? d.hp.mrope_section[0] == 2 && d.hp.mrope_section[1] == 1 && d.hp.mrope_section[2] == 1
              : d.hp.mrope_section[0] == 2 && d.hp.mrope_section[1] == 3 && d.hp.mrope_section[2] == 3);
    const bool v3 = strncmp(fam, "qwen3_vl", 8) == 0;
    CHECK_EQ_INT(d.hp.mrope_interleaved, v3);
    CHECK_EQ_INT(v->n_deep, v3 ? 2 : 0);
    json_t *p;
    size_t pi;
    float *lg = mxl_malloc((size_t)d.hp.vocab * sizeof(float));
    for (int path = 0; path < 2; path++) {
        const bool reference = path == 0;
        const double tol = reference ? MXL_TEST_DEC_REF_TOL : MXL_TEST_DEC_FAST_DENSE_TOL;
        json_array_foreach(json_object_get(ref, "prompts"), pi, p) {
            json_t *jids = json_object_get(p, "ids"), *logits = json_object_get(p, "logits"), *rows = json_object_get(p, "rows");
            json_t *jimg = json_object_get(p, "images");
            const int64_t n = (int64_t)json_array_size(jids);
            int32_t ids[128];
            REQUIRE(n <= 128);
            for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
            mxl_vlm_input sel[2];
            const int ni = (int)json_array_size(jimg);
            for (int i = 0; i < ni; i++) sel[i] = in[json_integer_value(json_array_get(jimg, (size_t)i))];
            mxl_decoder_media media[8];
            int bimg[8], n_media = 0;
            int64_t boff[8];
            REQUIRE(mxl_vlm_media_blocks(v, ids, (size_t)n, sel, ni, media, bimg, boff, 8, &n_media, &err) == MXL_OK);
            CHECK_EQ_INT(n_media, ni);
            for (int b = 0; b < n_media; b++) {
                const int64_t k = json_integer_value(json_array_get(jimg, (size_t)bimg[b]));
                mxl_vlm_point_block(v, &in[k], feat[k], boff[b], &media[b]);
            }
            double worst = 0;
            int compared = 0;
            /* each prefix ending at a text position: its last position's logits */
            for (size_t j = 0; j < json_array_size(rows); j++) {
                const int64_t c = json_integer_value(json_array_get(rows, j)) + 1;
                int k = 0;
                while (k < n_media && media[k].row + media[k].n <= c) k++;
                mxl_decoder_state *s = NULL;
                REQUIRE(mxl_decoder_state_create(&d, 128, 96, pool, &s, &err) == MXL_OK);
                mxl_decoder_state_set_reference(s, reference);
                if (mxl_decoder_forward_media(&d, s, ids, c, media, k, lg, &err)) {
                    fprintf(stderr, "  %s\n", err.msg);
                    CHECK(0);
                }
                double md;
                mxl_test_vec_vs_json(lg, json_array_get(logits, j), d.hp.vocab, &md, NULL);
                if (md > worst || isnan(md)) worst = md;
                compared++;
                mxl_decoder_state_destroy(s);
            }
            json_t *greedy = json_object_get(p, "greedy");
            const int same = greedy_run(&d, pool, reference, ids, n, media, n_media, 0, greedy, lg);
            /* split after the first image: the rows after it in a second call (the state's delta) */
            const int same_split = n_media ? greedy_run(&d, pool, reference, ids, n, media, n_media, media[0].row + media[0].n + 1, greedy, lg) : same;
            fprintf(stderr, "  %s %s %-10s %s: %d positions, max |diff| %.2e; greedy %d/%zu (split %d)\n", fam, form,
                    json_string_value(json_object_get(p, "name")), reference ? "[reference]" : "[fast]", compared, worst, same,
                    json_array_size(greedy), same_split);
            CHECK(compared >= 5);
            CHECK(worst <= tol);
            CHECK_EQ_INT(same, (int64_t)json_array_size(greedy));
            CHECK_EQ_INT(same_split, (int64_t)json_array_size(greedy));
        }
    }
    mxl_free(lg);
    mxl_decoder_free(&d);
    for (int i = 0; i < n_img; i++) mxl_free(feat[i]), mxl_vlm_input_free(&in[i]);
    mxl_vlm_free(v);
    mxl_checkpoint_close(ck);
    mxl_threadpool_destroy(pool);
    json_decref(ref);
}

TEST(vlm_qwen2vl_2_5_matches_transformers) { check_family("qwen2_5_vl", false, mxl_test_failed_); }
TEST(vlm_qwen2vl_2_matches_transformers) { check_family("qwen2_vl", false, mxl_test_failed_); }
TEST(vlm_qwen2vl_3_matches_transformers) { check_family("qwen3_vl", false, mxl_test_failed_); }
TEST(vlm_qwen2vl_3_moe_matches_transformers) { check_family("qwen3_vl_moe", false, mxl_test_failed_); }
TEST(vlm_qwen2vl_glm4v_matches_transformers) { check_family("glm4v", false, mxl_test_failed_); }
TEST(vlm_qwen2vl_glm4v_moe_matches_transformers) { check_family("glm4v_moe", false, mxl_test_failed_); }
/* mlx-vlm's 4-bit conversion (gen_vlm_mlx_fixtures.py: the language model quantized, the tower
 * dense with its Conv3d channels-last) against mlx-vlm's own outputs */
TEST(vlm_qwen2vl_2_mlx_vlm_matches_mlx_vlm) { check_family("qwen2_vl_mlx", false, mxl_test_failed_); }
/* llama.cpp's GGUF conversion (text model + qwen2vl / qwen2.5vl / qwen3vl / glm4v mmproj) against the same references */
TEST(vlm_qwen2vl_2_gguf_mmproj_matches_transformers) { check_family("qwen2_vl", true, mxl_test_failed_); }
TEST(vlm_qwen2vl_2_5_gguf_mmproj_matches_transformers) { check_family("qwen2_5_vl", true, mxl_test_failed_); }
TEST(vlm_qwen2vl_3_gguf_mmproj_matches_transformers) { check_family("qwen3_vl", true, mxl_test_failed_); }
/* GLM-4.1V: llama.cpp's glm4 text GGUF (M-RoPE sections, rotary rows in NEOX halves) with its glm4v mmproj */
TEST(vlm_qwen2vl_glm4v_gguf_mmproj_matches_transformers) { check_family("glm4v", true, mxl_test_failed_); }

/* llama.cpp's conversion of the text model alone (gen_vlm_gguf_fixtures.py: its qwen2vl / qwen3vl
 * architecture, the M-RoPE sections as rope.dimension_sections): the text-only prompt's logits at
 * every position and its greedy continuation against transformers, on both paths. */
static void check_text_gguf(const char *fam, int *mxl_test_failed_) {
    char rel[256], path[4096];
    snprintf(rel, sizeof rel, "tests/fixtures/vlm/%s/reference.json", fam);
    snprintf(path, sizeof path, "%s/tests/fixtures/vlm/%s_gguf/model.gguf", mxl_test_repo_root(), fam);
    json_t *ref = mxl_test_load_json(rel);
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    REQUIRE(mxl_checkpoint_open(path, &ck, &err) == MXL_OK);
    mxl_decoder d;
    if (mxl_decoder_load(ck, &d, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(d.hp.vocab == 192);
    CHECK(d.hp.mrope_section[0] == 2 && d.hp.mrope_section[1] == 3 && d.hp.mrope_section[2] == 3);
    CHECK_EQ_INT(d.hp.mrope_interleaved, strcmp(fam, "qwen3_vl") == 0);
    float *lg = mxl_malloc((size_t)d.hp.vocab * sizeof(float));
    json_t *p;
    size_t pi;
    int checked = 0;
    json_array_foreach(json_object_get(ref, "prompts"), pi, p) {
        if (strcmp(json_string_value(json_object_get(p, "name")), "text_only") != 0) continue;
        json_t *jids = json_object_get(p, "ids"), *logits = json_object_get(p, "logits"), *rows = json_object_get(p, "rows");
        const int64_t n = (int64_t)json_array_size(jids);
        int32_t ids[128];
        REQUIRE(n <= 128);
        for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
        for (int path_i = 0; path_i < 2; path_i++) {
            const bool reference = path_i == 0;
            double worst = 0;
            for (size_t j = 0; j < json_array_size(rows); j++) {
                const int64_t c = json_integer_value(json_array_get(rows, j)) + 1;
                mxl_decoder_state *s = NULL;
                REQUIRE(mxl_decoder_state_create(&d, 128, 96, pool, &s, &err) == MXL_OK);
                mxl_decoder_state_set_reference(s, reference);
                CHECK(mxl_decoder_forward(&d, s, ids, c, lg, &err) == MXL_OK);
                double md;
                mxl_test_vec_vs_json(lg, json_array_get(logits, j), d.hp.vocab, &md, NULL);
                if (md > worst || isnan(md)) worst = md;
                mxl_decoder_state_destroy(s);
            }
            json_t *greedy = json_object_get(p, "greedy");
            const int same = greedy_run(&d, pool, reference, ids, n, NULL, 0, 0, greedy, lg);
            fprintf(stderr, "  %s GGUF text_only %s: max |diff| %.2e; greedy %d/%zu\n", fam, reference ? "[reference]" : "[fast]", worst, same,
                    json_array_size(greedy));
            CHECK(worst <= (reference ? MXL_TEST_DEC_REF_TOL : MXL_TEST_DEC_FAST_DENSE_TOL));
            CHECK_EQ_INT(same, (int64_t)json_array_size(greedy));
            checked++;
        }
    }
    CHECK_EQ_INT(checked, 2);
    mxl_free(lg);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
    mxl_threadpool_destroy(pool);
    json_decref(ref);
}

TEST(vlm_qwen2vl_text_gguf_matches_transformers) {
    check_text_gguf("qwen2_vl", mxl_test_failed_);
    check_text_gguf("qwen3_vl", mxl_test_failed_);
}

/* A text GGUF with another family's mmproj (or a cut one) beside it: the vision side refuses to
 * load with a one-line error naming a file, never a crash (image tokens the vocabulary lacks,
 * widths that differ, truncated files). */
TEST(vlm_gguf_mismatched_mmproj_refused) {
    static const struct {
        const char *text, *mmproj;
        size_t cut; /* bytes of the mmproj kept (0: all) */
    } cases[] = {
        {"qwen2_vl", "mistral3", 0}, /* a Pixtral projector onto a 64-wide text model built for 32 */
        {"mistral3", "qwen3_vl", 0}, /* a Qwen3-VL merger 64 wide onto a 32-wide text model */
        {"qwen2_vl", "glm4v", 0},    /* GLM's tower onto Qwen2-VL's text: the widths agree, its image tokens are not there */
        {"llava_pixtral", "glm4v", 100000},
        {"qwen3_vl", "qwen2_5_vl", 4096},
    };
    int refused = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char tmp[] = "/tmp/mxl_vlm_mmproj_XXXXXX", src[4200], dst[4200];
        REQUIRE(mkdtemp(tmp));
        snprintf(src, sizeof src, "%s/tests/fixtures/vlm/%s_gguf/model.gguf", mxl_test_repo_root(), cases[i].text);
        snprintf(dst, sizeof dst, "%s/model.gguf", tmp);
        REQUIRE(symlink(src, dst) == 0);
        snprintf(src, sizeof src, "%s/tests/fixtures/vlm/%s_gguf/mmproj-model.gguf", mxl_test_repo_root(), cases[i].mmproj);
        char mm[4200];
        snprintf(mm, sizeof mm, "%s/mmproj-model.gguf", tmp);
        FILE *in = fopen(src, "rb"), *out = fopen(mm, "wb");
        REQUIRE(in && out);
        char buf[4096];
        size_t n, total = 0;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0 && (!cases[i].cut || total < cases[i].cut)) {
            if (cases[i].cut && total + n > cases[i].cut) n = cases[i].cut - total;
            fwrite(buf, 1, n, out);
            total += n;
        }
        fclose(in);
        fclose(out);
        mxl_error err;
        mxl_error_clear(&err);
        mxl_checkpoint *ck = NULL;
        mxl_vlm *v = NULL;
        REQUIRE(mxl_checkpoint_open(dst, &ck, &err) == MXL_OK);
        const mxl_status st = mxl_vlm_load(ck, &v, &err);
        fprintf(stderr, "  %s text + %s mmproj%s -> %s\n", cases[i].text, cases[i].mmproj, cases[i].cut ? " (cut)" : "", st ? err.msg : "(loaded)");
        CHECK(st != MXL_OK && v == NULL);
        CHECK(strchr(err.msg, '\n') == NULL && strstr(err.msg, "/tmp/mxl_vlm_mmproj_") != NULL);
        refused += st != MXL_OK;
        mxl_vlm_free(v);
        mxl_checkpoint_close(ck);
        unlink(mm);
        unlink(dst);
        rmdir(tmp);
    }
    CHECK_EQ_INT(refused, 5);
}
