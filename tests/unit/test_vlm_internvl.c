/* test_vlm_internvl.c - InternVL with images against transformers (tests/fixtures/vlm/internvl,
 * gen_vlm_internvl.py): the committed images of three aspect ratios (45x30, 40x56, 70x24) through
 * mxl_vlm_prepare's tiles (GotOcr2's crop_to_patches, vlm_gotocr2.c) against the pixel values the
 * processor gave them, with the image's placeholder count; the features (each tile through
 * InternViT - CLS token, learned positions, q / k / v biases, layer scales - the CLS row dropped,
 * pixel shuffle and the LayerNorm + GELU projector) against get_image_features; the Qwen2 decoder
 * with those features in place of the <IMG_CONTEXT> tokens (one run per image), attending
 * causally - logits at every text position of prompts with one image, two images and none, and
 * the greedy continuation - on the reference and the fast path; the processor's end-to-end
 * prompts' placeholder runs mapped to the images; and configs it cannot run refused by name. */
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

static const char *model_dir(void) { return mxl_test_vlm_model_dir("internvl"); }

/* The family's image text. */
static void internvl_input(const mxl_vlm_input *in, json_t *im_ref, int *mxl_test_failed_) {
    (void)im_ref;
    CHECK(in->text && strncmp(in->text, "<img><IMG_CONTEXT>", 18) == 0 && in->text_len > 6 && strcmp(in->text + in->text_len - 6, "</img>") == 0);
}

TEST(vlm_internvl_matches_transformers) { mxl_test_vlm_check_runs("internvl", NULL, "internvl", "<IMG_CONTEXT>", 160, internvl_input, mxl_test_failed_); }

/* The processor's end-to-end prompts (its processor over the chat template's rendering): their
 * placeholder runs map to the prepared images in order. */
TEST(vlm_internvl_processor_prompts_map_to_images) { mxl_test_vlm_check_e2e_runs("internvl", true, mxl_test_failed_); }

/* The fixture (its weights and processor_config.json) with `patch` applied to config.json
 * refuses to load its vision side with want and a message naming needle. */
static void expect_refused(const char *patch, mxl_status want, const char *needle, int *mxl_test_failed_) {
    static const char *const k_links[] = {"model.safetensors", "processor_config.json", NULL};
    mxl_test_vlm_expect_refused("internvl", model_dir(), k_links, patch, false, want, needle, mxl_test_failed_);
}

TEST(vlm_internvl_refuses_unsupported_config_by_name) {
    expect_refused("{\"vision_feature_select_strategy\": \"full\"}", MXL_ERR_UNSUPPORTED, "'full'", mxl_test_failed_);
    expect_refused("{\"vision_feature_layer\": [-1, -2]}", MXL_ERR_UNSUPPORTED, "vision_feature_layer", mxl_test_failed_);
    expect_refused("{\"downsample_ratio\": 0.3}", MXL_ERR_FORMAT, "downsample_ratio", mxl_test_failed_);
    /* image_seq_length 9 (processor_config.json) against 36 tokens per tile */
    expect_refused("{\"downsample_ratio\": 1.0}", MXL_ERR_FORMAT, "image_seq_length", mxl_test_failed_);
    expect_refused("{\"vision_config\": {\"use_qk_norm\": true}}", MXL_ERR_UNSUPPORTED, "use_qk_norm", mxl_test_failed_);
    expect_refused("{\"vision_config\": {\"norm_type\": \"rms_norm\"}}", MXL_ERR_UNSUPPORTED, "'rms_norm'", mxl_test_failed_);
    expect_refused("{\"vision_config\": {\"image_size\": [24, 32]}}", MXL_ERR_UNSUPPORTED, "image_size", mxl_test_failed_);
}
