/* encoder_siglip.h - the SigLIP text tower (transformers' modeling_siglip.py SiglipTextModel, the
 * text half of a model_type "siglip" checkpoint; the vision tower is not read), pre-norm:
 *   x = tok_emb[ids] + pos_emb[0..n-1]                      (learned positions, max_pos of them)
 *   per layer: h = LayerNorm1(x); a = softmax(q k^T / sqrt(head_dim)) v over the whole sequence
 *                (no mask: SigLIP's text model attends bidirectionally, padding included)
 *              x = x + a Wo + bo
 *              x = x + act(LayerNorm2(x) W1 + b1) W2 + b2     (gelu_pytorch_tanh as released)
 *   out = final_layer_norm(x)                                [n, hidden]
 * The pooled text vector is the LAST position's state through the head, pooled = out[n-1] Wh + bh
 * [projection_size]; SigLIP was trained on texts padded to max_pos (64) tokens, which is why the
 * embedding engine pads every text to that length ("padding='max_length'", as the model card
 * says) and takes position max_pos - 1. Dimensions from text_config; tensors under
 * "text_model." (SiglipModel) or none (a bare SiglipTextModel). Dense F32/F16/BF16 weights. */
#ifndef MXL_MODELS_ENCODER_SIGLIP_H
#define MXL_MODELS_ENCODER_SIGLIP_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "core/arena.h"
#include "core/threadpool.h"
#include "models/checkpoint.h"
#include "models/encoder_common.h"

typedef struct mxl_siglip_layer {
    mxl_weight wq, wk, wv, wo, w1, w2;
    const float *bq, *bk, *bv, *bo, *b1, *b2;
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    const float *ls1, *ls2; /* layer scale [hidden] of the attention and MLP outputs (InternViT's
                             * lambda_1 / lambda_2), NULL when the tower has none */
} mxl_siglip_layer;

/* The pre-norm layer stack both SigLIP towers (text here, vision in vision_siglip.h) and CLIP's
 * vision tower (vision_clip.h, with quick_gelu) share:
 * tensors "encoder.layers.N.{layer_norm1,self_attn.{q,k,v,out}_proj,layer_norm2,mlp.fc1,mlp.fc2}". */
typedef struct mxl_siglip_stack {
    int64_t n_layers, hidden, n_heads, head_dim, ffn;
    float eps;
    mxl_act act;
    const mxl_backend *be;
    mxl_siglip_layer *layers; /* [n_layers], in the binder's arena */
    bool quick_gelu;          /* the MLP's activation is quick_gelu, x * sigmoid(1.702 x) (CLIP's
                               * towers), in place of act */
} mxl_siglip_stack;

/* Tensor names of a layer (printf formats of the layer index, %lld) in the order LayerNorm1
 * w, b; Q w, b; K w, b; V w, b; O w, b; LayerNorm2 w, b; fc1 w, b; fc2 w, b; then the layer
 * scales of the attention and MLP outputs: transformers' (hf) and llama.cpp's mmproj GGUFs'
 * (v.blk.N.*). A NULL name for the Q / K / V biases or the layer scales: the tower has none. */
typedef struct mxl_siglip_names {
    const char *t[18];
} mxl_siglip_names;
extern const mxl_siglip_names mxl_siglip_names_hf, mxl_siglip_names_gguf;

/* Binds s->n_layers layers of width s->hidden / s->ffn under b's prefix, their matrices prepared
 * for the backend's GEMM (s->be). */
mxl_status mxl_siglip_stack_bind(const mxl_enc_binder *b, const mxl_siglip_names *nm, mxl_siglip_stack *s);
/* x [n, hidden] (the batch's tokens) through every layer, in place: the residual stream after the
 * last layer (no final norm). A layer with layer scales adds ls1 * attention and ls2 * MLP. */
mxl_status mxl_siglip_stack_run(const mxl_siglip_stack *s, const mxl_encoder_batch *bt, int64_t max_len, mxl_threadpool *pool,
                                float *x, mxl_error *err);

typedef struct mxl_siglip_text {
    int64_t n_layers, hidden, n_heads, head_dim, ffn, vocab, max_pos, proj;
    float eps;
    mxl_act act;
    mxl_arena arena;
    const mxl_backend *be;
    mxl_weight tok_emb;        /* [vocab, hidden] */
    const float *pos_emb;      /* [max_pos, hidden] */
    const float *final_w, *final_b;
    const float *head_w;       /* [proj, hidden] (f32: one row per text, not a hot path) */
    const float *head_b;       /* [proj] */
    mxl_siglip_layer *layers;
} mxl_siglip_text;

mxl_status mxl_siglip_text_load(const mxl_checkpoint *ck, mxl_siglip_text *out, mxl_error *err);
void mxl_siglip_text_free(mxl_siglip_text *m);
/* out [n_tokens, hidden]: the final-normed states of every sequence of the batch (each at most
 * max_pos tokens, attending over itself only). */
mxl_status mxl_siglip_text_forward_batch(const mxl_siglip_text *m, const mxl_encoder_batch *batch, mxl_threadpool *pool,
                                         float *out, mxl_error *err);
/* y[proj] = x[hidden] Wh + bh (the head over a pooled state). */
void mxl_siglip_text_head(const mxl_siglip_text *m, const float *x, float *y);

#endif
