/* vision_siglip.h - the SigLIP vision tower (transformers' modeling_siglip.py
 * SiglipVisionTransformer without its pooling head), the image encoder of Gemma 3, PaliGemma and
 * the SigLIP-tower VLMs. For one image of pixel values [3, S, S] (already resized and normalised,
 * image/resize.h) with patch size p and side = S / p:
 *   patches [side*side, 3*p*p]  (patch (py, px) flattened in (channel, ky, kx) order: the Conv2d's
 *                                weight [hidden, 3, p, p] read as a [hidden, 3*p*p] matrix)
 *   x = patches Wp^T + bp + pos_emb[0..side*side)              [n_patches, hidden]
 *   the SigLIP layer stack (encoder_siglip.h), then post_layernorm(x).
 * Dimensions from config.json's vision_config; tensors under vision_tower.vision_model.,
 * vision_tower., model.vision_tower.(vision_model.), model.vision_model. or vision_model. Dense F32/F16/BF16. Or from
 * llama.cpp's mmproj GGUF: clip.vision.* keys, tensors v.patch_embd, v.position_embd,
 * v.blk.N.*, v.post_ln. */
#ifndef MXL_MODELS_VISION_SIGLIP_H
#define MXL_MODELS_VISION_SIGLIP_H

#include <stdint.h>

#include "core/arena.h"
#include "core/threadpool.h"
#include "models/checkpoint.h"
#include "models/encoder_siglip.h"

typedef struct mxl_siglip_vision {
    int64_t image_size, patch, side, n_patches; /* side = image_size / patch; n_patches = side^2 */
    mxl_siglip_stack stack;                     /* hidden, heads, layers */
    mxl_arena arena;
    mxl_weight patch_w;      /* [hidden, 3 * patch * patch] (f32) */
    const float *patch_b;    /* [hidden] */
    const float *pos_emb;    /* [n_patches, hidden] */
    const float *post_w, *post_b; /* [hidden] */
} mxl_siglip_vision;

/* The ViT sizes of vision_config (SigLIP's and CLIP's keys and defaults; patch_size's default
 * dflt_patch): s's width, MLP width, layers, heads and head width, the image and patch size. */
mxl_status mxl_vit_sizes(const mxl_checkpoint *ck, const json_t *vc, int64_t dflt_patch, mxl_siglip_stack *s, int64_t *image_size,
                         int64_t *patch, mxl_error *err);
/* vision_config: the config.json object describing the tower. */
mxl_status mxl_siglip_vision_load(const mxl_checkpoint *ck, const json_t *vision_config, mxl_siglip_vision *out, mxl_error *err);
/* The same tower from llama.cpp's mmproj GGUF (mm: the mmproj file opened as a checkpoint; its
 * clip.vision.* keys and v.* tensors). */
mxl_status mxl_siglip_vision_load_gguf(const mxl_checkpoint *mm, mxl_siglip_vision *out, mxl_error *err);
void mxl_siglip_vision_free(mxl_siglip_vision *m);
/* patches [side * side, 3 * P * P] of pixels [3, S, S] (side = S / P): patch (py, px) at row
 * py * side + px, flattened in (channel, ky, kx) order (a patch Conv2d's weight read as a matrix).
 * Shared with the CLIP tower (vision_clip.h). */
void mxl_vision_patchify(const float *pixels, int64_t S, int64_t P, float *patches);
/* out [(side/d)^2, d*d*H] = the pixel shuffle (space-to-depth) of x [side*side, H] (rows of a
 * side x side grid; d divides side): row a*(side/d) + b is the concatenation over j, k < d (j
 * outer) of x's patch (a*d + j, b*d + k). Aya Vision's and Idefics3 / SmolVLM's connectors. */
void mxl_vision_pixel_shuffle(const float *x, int64_t side, int64_t d, int64_t H, float *out);
/* x [n_patches, hidden] = the embeddings (patches Wp^T + bp + pos_emb), before the layer stack. */
mxl_status mxl_siglip_vision_embed(const mxl_siglip_vision *m, const float *pixels, mxl_threadpool *pool, float *x, mxl_error *err);
/* out [n_patches, hidden] for pixels [3, image_size, image_size]. */
mxl_status mxl_siglip_vision_forward(const mxl_siglip_vision *m, const float *pixels, mxl_threadpool *pool, float *out,
                                     mxl_error *err);

#endif
