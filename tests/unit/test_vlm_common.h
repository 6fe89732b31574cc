/* test_vlm_common.h - the decoder check the vision-language tests share: a prompt with its media
 * blocks (image rows in place of the image tokens) against transformers' logits and greedy
 * continuation (each family's tests/fixtures/vlm/<family>/reference.json). */
#ifndef MXL_TESTS_UNIT_TEST_VLM_COMMON_H
#define MXL_TESTS_UNIT_TEST_VLM_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "models/decoder.h"
#include "models/vlm.h"

typedef struct json_t json_t;

/* ids[0..n) with the media blocks through d on one path (reference or fast; states of max_ctx
 * positions): the last logits of every prefix that cuts no block and does not end on an image
 * token against logits[c - 1] (at least 4 of them, within tol), then the greedy continuation of
 * the whole prompt against greedy (equal). Prints one line under label; failures are the test's. */
void mxl_test_vlm_check_prompt(const mxl_decoder *d, const int32_t *ids, int64_t n, const mxl_decoder_media *media, int n_media,
                               int32_t image_token, json_t *logits, json_t *greedy, bool reference, double tol, int64_t max_ctx,
                               mxl_threadpool *pool, const char *label, int *mxl_test_failed_);

/* The checkpoint at dir, its config.json with `patch` (JSON, objects merged recursively) and its
 * files `links` (NULL-terminated) symlinked into a temporary directory, is refused: opening it and
 * loading its vision side (decoder: its decoder) fails with want, the message containing needle.
 * label names the case in the printed line. */
void mxl_test_vlm_expect_refused(const char *label, const char *dir, const char *const *links, const char *patch, bool decoder,
                                 mxl_status want, const char *needle, int *mxl_test_failed_);

/* tests/fixtures/vlm/<name>/model under the repository root (a static buffer, overwritten by the
 * next call). */
const char *mxl_test_vlm_model_dir(const char *name);
/* A JSON array of numbers as floats (*n of them; mxl_free). */
float *mxl_test_json_floats(json_t *a, int64_t *n);

/* tests/fixtures/vlm/<name> decoded and through v's processor into *out; false (after printing
 * why) when either fails. */
bool mxl_test_vlm_prepare_file(const mxl_vlm *v, const char *name, mxl_vlm_input *out);

/* The processor, tower and decoder of a fixture whose images fill runs of the image token
 * (tests/fixtures/vlm/<name>/reference.json: "images" with file, pixel_values, features, ids and
 * n_tiles; "prompts" with ids, images, logits and greedy; the checkpoint at model, NULL: the
 * fixture's model directory; its vision side's family name and marker): each committed image
 * through mxl_vlm_prepare (pixels within 1e-6, its placeholder count, grid[0] its tiles of
 * tokens_per_image rows; check_input (or NULL) the family's own facts), its features from the
 * processor's own pixels within 1e-4, then every prompt's logits and greedy continuation on the
 * reference and fast paths (vocab rows), the images' rows filling the runs of the image token in
 * order. Failures are the test's. */
void mxl_test_vlm_check_runs(const char *name, const char *model, const char *family, const char *marker, int64_t vocab,
                             void (*check_input)(const mxl_vlm_input *in, json_t *im_ref, int *mxl_test_failed_), int *mxl_test_failed_);
/* The processor's end-to-end prompts ("e2e": images, ids) map to the prepared images in order:
 * one causal block per image (per_image) or per tile of tokens_per_image rows. */
void mxl_test_vlm_check_e2e_runs(const char *name, bool per_image, int *mxl_test_failed_);

#endif
