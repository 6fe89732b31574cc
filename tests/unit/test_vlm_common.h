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

#endif
