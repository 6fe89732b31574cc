/* vision_pixtral.h - the Pixtral vision tower (transformers' modeling_pixtral.py PixtralVisionModel),
 * the image encoder of Mistral 3 (Mistral Small 3.1 / 3.2, Magistral Small, Ministral 3 with vision:
 * vlm_pixtral.c) and of Pixtral-12B as LLaVA. One image at its own size: pixel values
 * [3, rows * p, cols * p] (resized by the Pixtral processor to patch multiples), p = patch_size:
 *   patches [rows*cols, 3*p*p]   patch (r, c) at row r * cols + c, (channel, ky, kx) order (the
 *                                bias-free Conv2d's weight [hidden, 3, p, p] read as a matrix)
 *   x = ln_pre(patches Wp^T)     RMSNorm (eps 1e-5)              hidden_states[0]
 *   per layer: x += o(attn(rope(q(h)), rope(k(h)), v(h))) with h = attention_norm(x), every patch
 *              of the image seeing every other (transformers' block-diagonal mask over a batch:
 *              one image per call here); x += down(act(gate(h)) * up(h)) with h = ffn_norm(x)
 *              (RMSNorms eps 1e-5; no biases; act = hidden_act, silu as released)
 *                                                                hidden_states[1..layers]
 * RoPE: 2-D axial (PixtralVisionRotaryEmbedding, rope_type "axial"): with d = head_dim and
 * f_i = theta^(-2i/d) (i < d/2), the angle of rotation pair j < d/2 (dims j and j + d/2, rotate_half
 * style) is r * f_2j for j < d/4 and c * f_(2(j - d/4) + 1) after. No final norm.
 * Dimensions from config.json's vision_config (PixtralVisionConfig's defaults); rope_theta from
 * vision_config.rope_parameters (transformers 5) or vision_config.rope_theta (older configs);
 * tensors under vision_tower. or model.vision_tower. Dense F32/F16/BF16. */
#ifndef MXL_MODELS_VISION_PIXTRAL_H
#define MXL_MODELS_VISION_PIXTRAL_H

#include <jansson.h>
#include <stdint.h>

#include "backends/backend.h"
#include "core/arena.h"
#include "core/threadpool.h"
#include "models/checkpoint.h"

typedef struct mxl_pixtral_layer {
    const float *attn_norm, *ffn_norm; /* [hidden] */
    mxl_weight wq, wk, wv, wo;         /* [hidden, hidden] */
    mxl_weight wg, wu, wd;             /* [ffn, hidden], [ffn, hidden], [hidden, ffn] */
} mxl_pixtral_layer;

typedef struct mxl_pixtral_vision {
    int64_t hidden, ffn, n_layers, n_heads, head_dim, patch;
    mxl_act act;
    float inv_freq[512];     /* [head_dim / 2]: f_i above */
    mxl_arena arena;
    const mxl_backend *be;
    mxl_weight patch_w;      /* [hidden, 3 * patch * patch] */
    const float *ln_pre;     /* [hidden] */
    mxl_pixtral_layer *layers;
} mxl_pixtral_vision;

/* vision_config: the config.json object describing the tower. */
mxl_status mxl_pixtral_vision_load(const mxl_checkpoint *ck, const json_t *vision_config, mxl_pixtral_vision *out, mxl_error *err);
/* The same tower from llama.cpp's mmproj GGUF mm (projector type pixtral; names: vision_pixtral.c). */
mxl_status mxl_pixtral_vision_load_gguf(const mxl_checkpoint *mm, mxl_pixtral_vision *out, mxl_error *err);
void mxl_pixtral_vision_free(mxl_pixtral_vision *m);
/* out [rows * cols, n_sel * hidden] = concat over k of hidden_states[layers[k]] (each in
 * 0..n_layers) for pixels [3, rows * patch, cols * patch]; runs the layers up to the deepest one
 * selected. */
mxl_status mxl_pixtral_vision_forward(const mxl_pixtral_vision *m, const float *pixels, int64_t rows, int64_t cols, const int64_t *layers,
                                      int n_sel, mxl_threadpool *pool, float *out, mxl_error *err);

#endif
