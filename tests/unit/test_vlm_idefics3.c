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

/* Idefics3 / SmolVLM's image text and rows x columns of tiles; Idefics2's image text. */
static void idefics3_input(const mxl_vlm_input *in, json_t *im_ref, int *mxl_test_failed_) {
    CHECK_EQ_INT(in->grid[1], json_integer_value(json_object_get(im_ref, "rows")));
    CHECK_EQ_INT(in->grid[2], json_integer_value(json_object_get(im_ref, "cols")));
    CHECK(in->text && strncmp(in->text, "<fake_token_around_image>", 25) == 0 && strstr(in->text, "<global-img><image>") != NULL);
}

static void idefics2_input(const mxl_vlm_input *in, json_t *im_ref, int *mxl_test_failed_) {
    (void)im_ref;
    CHECK(in->text && strncmp(in->text, "<fake_token_around_image><image>", 32) == 0);
}

static void check_matches(const char *name, const char *model, int *mxl_test_failed_) {
    mxl_test_vlm_check_runs(name, model, name, "<image>", 200, strcmp(name, "idefics2") == 0 ? idefics2_input : idefics3_input, mxl_test_failed_);
}

static void check_prompts(const char *name, int *mxl_test_failed_) { mxl_test_vlm_check_e2e_runs(name, false, mxl_test_failed_); }

TEST(vlm_idefics3_matches_transformers) { check_matches("idefics3", NULL, mxl_test_failed_); }

/* llama.cpp's conversion (gen_vlm_gguf_fixtures.py): the text GGUF with its idefics3 mmproj beside
 * it (f32 throughout), against the same transformers references. */
TEST(vlm_idefics3_gguf_mmproj_matches_transformers) {
    char p[4096];
    snprintf(p, sizeof p, "%s/tests/fixtures/vlm/idefics3_gguf/model.gguf", mxl_test_repo_root());
    check_matches("idefics3", p, mxl_test_failed_);
}
TEST(vlm_smolvlm_matches_transformers) { check_matches("smolvlm", NULL, mxl_test_failed_); }
TEST(vlm_idefics2_matches_transformers) { check_matches("idefics2", NULL, mxl_test_failed_); }

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
