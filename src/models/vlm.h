/* vlm.h - the vision side of a vision-language checkpoint: how its image processor prepares an
 * image (preprocessor_config.json, with the family's defaults), how many placeholder tokens one
 * image takes and how the processor writes them into the prompt, and the encoder (vision tower +
 * projector) from pixel values to rows of the text decoder's input (models/decoder.h's media
 * blocks). One implementation per family (vlm_<family>.c); mxl_vlm_load picks it by model_type. */
#ifndef MXL_MODELS_VLM_H
#define MXL_MODELS_VLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "models/checkpoint.h"

/* The processor's steps for one image (transformers' PIL image processors). */
typedef struct mxl_vlm_preproc {
    int64_t width, height; /* the resize target */
    int resample;          /* PIL's filter numbering, as preprocessor_config.json writes it:
                            * 0 nearest, 1 lanczos, 2 bilinear, 3 bicubic */
    bool do_resize, do_rescale, do_normalize;
    double rescale;        /* usually 1 / 255 */
    float mean[3], std[3];
} mxl_vlm_preproc;

typedef struct mxl_vlm mxl_vlm;
struct mxl_vlm {
    const char *family;        /* "gemma3" */
    mxl_vlm_preproc pre;
    int64_t tokens_per_image;  /* rows one image adds to the decoder's input */
    int64_t text_hidden;       /* width of those rows */
    int32_t image_token;       /* the placeholder token's id */
    const char *marker;        /* what the chat template writes for an image ("<start_of_image>") */
    const char *image_text;    /* the placeholder token's text ("<image_soft_token>") */
    const char *before, *after; /* written around the placeholders in place of the marker */
    /* out [tokens_per_image, text_hidden] for pixels [3, pre.height, pre.width] */
    mxl_status (*encode)(const mxl_vlm *v, const float *pixels, mxl_threadpool *pool, float *out, mxl_error *err);
    void (*destroy)(mxl_vlm *v);
};

/* The vision side of ck: *out NULL (and MXL_OK) when ck is a text-only checkpoint (no vision tower
 * in its weights, no vision_config, or language_model_only); MXL_ERR_UNSUPPORTED naming the family
 * when it has a tower mlxcel does not run yet. */
mxl_status mxl_vlm_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err);
void mxl_vlm_free(mxl_vlm *v);

/* The rendered prompt with each image marker replaced as the processor replaces it (marker ->
 * before + tokens_per_image x image_text + after); *out (mxl_free) NUL-terminated. Fails when the
 * prompt's marker count is not n_images. */
mxl_status mxl_vlm_expand_prompt(const mxl_vlm *v, const char *text, size_t len, int n_images, char **out, size_t *out_len,
                                 mxl_error *err);

/* Family loaders (vlm_<family>.c). */
mxl_status mxl_vlm_gemma3_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err);

#endif
