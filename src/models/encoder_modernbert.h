/* encoder_modernbert.h - the ModernBERT encoder (transformers' modeling_modernbert.py), pre-norm:
 *   x = LayerNorm(tok_emb[ids])                                          (embeddings.norm)
 *   per layer l: h = l == 0 ? x : LayerNorm(x)                           (attn_norm; identity on 0)
 *                q, k, v = split(h Wqkv) per head; RoPE (NeoX halves) on q, k at positions 0..n-1
 *                  with the layer type's theta (global / local)
 *                a = softmax(q k^T / sqrt(head_dim)) v, global layers over the whole sequence,
 *                  local layers over keys with |i - j| <= local_attention / 2
 *                x = x + a Wo
 *                [in, gate] = split(LayerNorm(x) Wi)                     (mlp_norm; fused Wi [2I, H])
 *                x = x + (act(in) * gate) Wo2                            (GeGLU)
 *   out = LayerNorm(x)                                                   (final_norm)
 * Layer types: `layer_types` ("full_attention" / "sliding_attention") when config.json lists
 * them (transformers 5), else layer l is global when l % global_attn_every_n_layers == 0.
 * Thetas: rope_parameters.{full,sliding}_attention.rope_theta, else global_rope_theta /
 * local_rope_theta (defaults 160000 / 10000). LayerNorms have no bias when norm_bias is false;
 * Wqkv / Wo and Wi / Wo2 have biases only with attention_bias / mlp_bias.
 * Tensor names with or without the "model." prefix of ModernBertFor* checkpoints. */
#ifndef MXL_MODELS_ENCODER_MODERNBERT_H
#define MXL_MODELS_ENCODER_MODERNBERT_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "core/arena.h"
#include "core/threadpool.h"
#include "models/checkpoint.h"
#include "models/encoder_common.h"

typedef struct mxl_modernbert_layer {
    bool local;                      /* sliding-window attention layer */
    const float *attn_norm_w, *attn_norm_b; /* NULL w on layer 0 (identity) */
    mxl_weight wqkv, wo, wi, wo2;       /* [3H, H], [H, H], [2I, H], [H, I] */
    const float *bqkv, *bo, *bi, *bo2;      /* NULL without biases */
    const float *mlp_norm_w, *mlp_norm_b;   /* b NULL when norm_bias is false */
} mxl_modernbert_layer;

typedef struct mxl_modernbert {
    int64_t n_layers, hidden, n_heads, head_dim, ffn, vocab, max_pos;
    int64_t half_window; /* local layers see |i - j| <= half_window */
    float eps;
    mxl_act act;
    bool norm_bias;
    mxl_rope_cfg rope_global, rope_local;
    float *inv_freq_global, *inv_freq_local; /* [head_dim / 2] */
    mxl_arena arena;
    const mxl_backend *be; /* the backend the weights are prepared for and run on (the host's) */
    const char *prefix; /* "" or "model." */
    mxl_weight tok_emb;
    const float *emb_norm_w, *emb_norm_b, *final_norm_w, *final_norm_b;
    mxl_modernbert_layer *layers;
} mxl_modernbert;

mxl_status mxl_modernbert_load(const mxl_checkpoint *ck, mxl_modernbert *out, mxl_error *err);
void mxl_modernbert_free(mxl_modernbert *m);
/* hidden [n_tokens, hidden] for a batch of sequences (each <= max_pos tokens; type ids unused). */
mxl_status mxl_modernbert_forward_batch(const mxl_modernbert *m, const mxl_encoder_batch *batch,
                                        mxl_threadpool *pool, float *hidden, mxl_error *err);

#endif
