/* vision_clip.h - the CLIP vision tower (transformers' modeling_clip.py CLIPVisionModel), the
 * image encoder of LLaVA (vlm_llava.c), and the hidden-state selection the LLaVA family of VLMs
 * makes over a ViT tower's layers. For one image of pixel values [3, S, S] (already resized,
 * cropped and normalised) with patch size p and side = S / p:
 *   patches [side*side, 3*p*p]   (vision_siglip.h's mxl_vision_patchify; the Conv2d has no bias)
 *   x = [class_embedding; patches Wp^T] + pos_emb[0..side*side]   [1 + side*side, hidden]
 *   x = pre_layrnorm(x)                                           hidden_states[0]
 *   the SigLIP layer stack (encoder_siglip.h: LayerNorm1, attention over every position,
 *   LayerNorm2, fc1, quick_gelu (the default hidden_act) or the named activation, fc2)
 *                                                                 hidden_states[1..layers]
 * post_layernorm acts on the pooled CLS state only, which LLaVA does not use: not read.
 * Dimensions from config.json's vision_config (CLIPVisionConfig's defaults); tensors under
 * vision_tower.vision_model., model.vision_tower.vision_model., vision_tower. or
 * model.vision_tower. Dense F32/F16/BF16. */
#ifndef MXL_MODELS_VISION_CLIP_H
#define MXL_MODELS_VISION_CLIP_H

#include <stdint.h>

#include "core/arena.h"
#include "core/threadpool.h"
#include "models/checkpoint.h"
#include "models/encoder_siglip.h"

typedef struct mxl_clip_vision {
    int64_t image_size, patch, side, n_patches, n_pos; /* n_pos = 1 + n_patches (the class token first) */
    mxl_siglip_stack stack;                            /* hidden, heads, layers, quick_gelu */
    mxl_arena arena;
    mxl_weight patch_w;      /* [hidden, 3 * patch * patch] */
    const float *class_emb;  /* [hidden] */
    const float *pos_emb;    /* [n_pos, hidden] */
    const float *pre_w, *pre_b; /* [hidden] */
} mxl_clip_vision;

/* vision_config: the config.json object describing the tower. */
mxl_status mxl_clip_vision_load(const mxl_checkpoint *ck, const json_t *vision_config, mxl_clip_vision *out, mxl_error *err);
void mxl_clip_vision_free(mxl_clip_vision *m);
/* x [n_pos, hidden] = hidden_states[0] (the embeddings through pre_layrnorm) for pixels
 * [3, image_size, image_size]. */
mxl_status mxl_clip_vision_embed(const mxl_clip_vision *m, const float *pixels, mxl_threadpool *pool, float *x, mxl_error *err);

/* LLaVA's vision_feature_layer selection over a tower's layer stack s: x [n, hidden] is
 * hidden_states[0] (destroyed); hidden_states[i] is the residual stream after i layers (no final
 * norm). out [n - skip, n_sel * hidden] = concat over k of hidden_states[layers[k]] (each in
 * 0..s->n_layers), rows skip.. (skip 1 drops the CLS row: the "default" select strategy). Runs
 * only the layers up to the deepest one selected. */
mxl_status mxl_vision_select_layers(const mxl_siglip_stack *s, float *x, int64_t n, const int64_t *layers, int n_sel, int64_t skip,
                                    mxl_threadpool *pool, float *out, mxl_error *err);

#endif
