/* vision_qwen2vl.h - the vision towers of Qwen2-VL and Qwen2.5-VL (transformers
 * modeling_qwen2_vl.py Qwen2VisionTransformerPretrainedModel, modeling_qwen2_5_vl.py
 * Qwen2_5_VisionTransformerPretrainedModel). For one image the processor gives
 *   patches [n, 3 * T * P * P]   n = grid_h * grid_w patches of P x P pixels, each repeated over T
 *                                (temporal_patch_size) frames, in (channel, frame, ky, kx) order; the
 *                                patches ordered in merge blocks: (bh, bw, my, mx) with
 *                                py = bh * m + my, px = bw * m + mx (m = spatial_merge_size)
 *   x = patches Wp^T                                   (the Conv3d as a matmul, no bias) [n, D]
 *   per block: x += proj(attn(norm1(x))); x += mlp(norm2(x))
 *     norm: LayerNorm (2-VL) or RMSNorm (2.5), eps 1e-6
 *     attn: fused qkv (biased), 2-D rotary on each head: frequency pair j < hd/4 turns by the
 *           patch row py, the next hd/4 by its column px (NEOX halves, theta 10000), every patch
 *           seeing every patch of the image (2-VL; 2.5's fullatt_block_indexes) or of its window
 *           (2.5: windows of window_size / m / P merge blocks a side, the rows run in window
 *           order and put back after the merger)
 *     mlp:  fc2(quick_gelu(fc1 x)) (2-VL, hidden_act) or down(silu(gate x) * up x) (2.5, biased)
 *   merger: ln_q per patch (LayerNorm 2-VL / RMSNorm 2.5), each m^2 consecutive patches
 *           concatenated [n / m^2, D m^2], Linear, GELU (erf), Linear -> [n / m^2, out_hidden]
 * Qwen3-VL's tower (modeling_qwen3_vl.py Qwen3VLVisionModel) is 2-VL's with: a biased patch
 * Conv3d; learned positions pos_embed [side^2, D] resampled bilinearly (align_corners) to the
 * image's grid_h x grid_w and added after it; an MLP linear_fc2(act(linear_fc1 x)) with biases
 * (gelu_pytorch_tanh); the merger's norm / linear_fc1 / linear_fc2; and DeepStack: after each
 * block of deepstack_visual_indexes a merger of its own (LayerNorm over the concatenated m^2
 * patches, then the same MLP) gives the features the text decoder's first layers add.
 * GLM-4.1V's tower (modeling_glm4v.py Glm4vVisionModel) is 2.5-VL's without windows, with: a
 * biased patch Conv3d and an RMSNorm after it (post_conv_layernorm); learned positions
 * (embeddings.position_embedding, a side x side grid) resampled bicubically to the image's grid
 * (F.grid_sample, align_corners false, border); RMSNorms of rms_norm_eps; q/k/v biases as
 * attention_bias says, none on proj or the SwiGLU MLP (width out_hidden_size); after the blocks an
 * RMSNorm (post_layernorm), the m x m Conv2d downsample of each merge unit to out_hidden_size, and
 * the merger: proj, LayerNorm, GELU, then a SwiGLU of width intermediate_size.
 * Dimensions from config.json's vision_config; tensors under visual. (released) or model.visual.
 * (transformers 5). Dense F32/F16/BF16. Or llama.cpp's mmproj GGUF of a 2, 2.5 or 3 tower
 * (mxl_qwen2vl_vision_load_gguf). */
#ifndef MXL_MODELS_VISION_QWEN2VL_H
#define MXL_MODELS_VISION_QWEN2VL_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "core/arena.h"
#include "core/threadpool.h"
#include "models/checkpoint.h"

typedef struct mxl_qwen2vl_vision_layer {
    const float *n1_w, *n1_b, *n2_w, *n2_b; /* b NULL with RMSNorm */
    mxl_weight qkv, proj, fc1, fc2, gate, up, down;  /* fc1/fc2 (2-VL) or gate/up/down (2.5) */
    const float *qkv_b, *proj_b, *fc1_b, *fc2_b, *gate_b, *up_b, *down_b;
    bool full;  /* 2.5: attends over the whole image (fullatt_block_indexes) */
} mxl_qwen2vl_vision_layer;

/* A patch merger (Qwen3-VL's: norm, linear_fc1, GELU, linear_fc2). */
typedef struct mxl_qwen2vl_merger {
    const float *ln_w, *ln_b; /* [dim] (the merger) or [dim m^2] (DeepStack's, after the shuffle) */
    mxl_weight fc1, fc2;      /* [dim m^2, dim m^2], [out_hidden, dim m^2] */
    const float *fc1_b, *fc2_b;
} mxl_qwen2vl_merger;

#define MXL_QWEN3VL_MAX_DEEP 8

typedef struct mxl_qwen2vl_vision {
    bool v25;                 /* Qwen2.5-VL's tower (RMSNorm, SwiGLU, windows) */
    bool v3;                  /* Qwen3-VL's (patch bias, learned positions, gelu MLP, DeepStack) */
    bool glm;                 /* GLM-4.1V's (see above) */
    bool rms, swiglu;         /* RMSNorm of eps / SwiGLU MLPs (2.5, GLM) */
    float eps;
    int64_t dim, n_heads, head_dim, ffn, n_layers, patch, temporal, merge, out_hidden, window;
    int64_t patch_dim;        /* 3 * temporal * patch^2 */
    mxl_act act;              /* the MLP's (2.5: of the gate) */
    bool quick_gelu;          /* 2-VL's hidden_act quick_gelu: x * sigmoid(1.702 x) */
    const mxl_backend *be;
    mxl_arena arena;
    mxl_weight patch_w;       /* [dim, patch_dim] */
    mxl_qwen2vl_vision_layer *layers;
    const float *lnq_w, *lnq_b; /* [dim] (b NULL with RMSNorm) */
    mxl_weight m0, m2;        /* [dim m^2, dim m^2], [out_hidden, dim m^2] */
    const float *m0_b, *m2_b;
    float inv_freq[256];      /* [head_dim / 4] */
    /* Qwen3-VL */
    const float *patch_b;     /* [dim] */
    const float *pos_table;   /* [pos_side^2, dim] */
    int64_t pos_side;
    int n_deep;               /* DeepStack mergers, after blocks deep_at[0..n_deep) */
    int64_t deep_at[MXL_QWEN3VL_MAX_DEEP];
    mxl_qwen2vl_merger deep_m[MXL_QWEN3VL_MAX_DEEP];
    /* GLM-4.1V (pos_table / pos_side: its position grid) */
    const float *post_conv_w, *post_w; /* [dim] RMSNorm weights */
    mxl_weight ds;            /* [out_hidden, m*m*dim]: the downsample Conv2d, columns in (ky, kx, c) order */
    const float *ds_b;        /* [out_hidden] */
    mxl_weight mp, mg, mu, md; /* merger proj [out, out]; gate, up [ctx, out]; down [out, ctx] */
    const float *mp_ln_w, *mp_ln_b;
    int64_t ctx;              /* the merger's SwiGLU width (intermediate_size) */
} mxl_qwen2vl_vision;

/* version 2 (Qwen2-VL), 25 (Qwen2.5-VL), 3 (Qwen3-VL) or 4 (GLM-4.1V); vision_config the
 * config.json object. */
mxl_status mxl_qwen2vl_vision_load(const mxl_checkpoint *ck, const json_t *vision_config, int version, mxl_qwen2vl_vision *out,
                                   mxl_error *err);
/* The same towers (2, 2.5, 3 by clip.projector_type) from llama.cpp's mmproj GGUF mm (names and
 * keys: vision_qwen2vl.c). */
mxl_status mxl_qwen2vl_vision_load_gguf(const mxl_checkpoint *mm, mxl_qwen2vl_vision *out, mxl_error *err);
void mxl_qwen2vl_vision_free(mxl_qwen2vl_vision *m);
/* out [grid_h * grid_w / m^2, out_hidden] for one image's patches [grid_h * grid_w, patch_dim]
 * (grid_h, grid_w multiples of m), rows in the processor's merge-block order; deep (Qwen3-VL,
 * NULL: not wanted) [n_deep, grid_h * grid_w / m^2, out_hidden] the DeepStack features. */
mxl_status mxl_qwen2vl_vision_forward(const mxl_qwen2vl_vision *m, const float *patches, int64_t grid_h, int64_t grid_w,
                                      mxl_threadpool *pool, float *out, float *deep, mxl_error *err);

#endif
