/* test_vlm_aya_vision.c - Aya Vision with images against transformers (tests/fixtures/vlm/aya_vision,
 * gen_vlm_aya_vision.py): the committed images of three aspect ratios (45x30, 40x56, 70x24)
 * through mxl_vlm_prepare's tiles (GotOcr2's crop_to_patches: the nearest-aspect tile grid, tiles
 * row by row, the thumbnail last) against the pixel values the processor gave them, with the
 * image's placeholder count; the features (each tile through the SigLIP tower, pixel shuffle and
 * the LayerNorm + SwiGLU projector) against get_image_features; the Cohere2 decoder with those
 * features in place of the patch tokens (an image's rows spread over its tiles' runs), attending
 * causally - logits at every text position of prompts with one image, two images of different
 * aspect ratios and none, and the greedy continuation - on the reference and the fast path; the
 * processor's end-to-end prompts' placeholder runs mapped to the images; and configs it cannot
 * run refused by name. */
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

static const char *model_dir(void) { return mxl_test_vlm_model_dir("aya_vision"); }

/* The family's image text. */
static void aya_input(const mxl_vlm_input *in, json_t *im_ref, int *mxl_test_failed_) {
    (void)im_ref;
    CHECK(in->text && strncmp(in->text, "<|START_OF_IMG|>", 16) == 0 && strstr(in->text, "TILE_GLOBAL<|IMG_PATCH|>") != NULL);
}

TEST(vlm_aya_vision_matches_transformers) { mxl_test_vlm_check_runs("aya_vision", NULL, "aya_vision", "<image>", 160, aya_input, mxl_test_failed_); }

/* The processor's end-to-end prompts (its processor over the chat template's rendering): their
 * placeholder runs map to the prepared images in order. */
TEST(vlm_aya_vision_processor_prompts_map_to_images) { mxl_test_vlm_check_e2e_runs("aya_vision", false, mxl_test_failed_); }

/* The fixture (its weights and processor_config.json) with `patch` applied to config.json
 * refuses to load its vision side with want and a message naming needle. */
static void expect_refused(const char *patch, mxl_status want, const char *needle, int *mxl_test_failed_) {
    static const char *const k_links[] = {"model.safetensors", "processor_config.json", NULL};
    mxl_test_vlm_expect_refused("aya_vision", model_dir(), k_links, patch, false, want, needle, mxl_test_failed_);
}

TEST(vlm_aya_vision_refuses_unsupported_config_by_name) {
    expect_refused("{\"vision_feature_select_strategy\": \"default\"}", MXL_ERR_UNSUPPORTED, "'default'", mxl_test_failed_);
    expect_refused("{\"vision_feature_layer\": [-1, -2]}", MXL_ERR_UNSUPPORTED, "vision_feature_layer", mxl_test_failed_);
    expect_refused("{\"downsample_factor\": 4}", MXL_ERR_FORMAT, "downsample_factor", mxl_test_failed_);
    expect_refused("{\"vision_config\": {\"model_type\": \"clip_vision_model\"}}", MXL_ERR_UNSUPPORTED, "'clip_vision_model'", mxl_test_failed_);
}
