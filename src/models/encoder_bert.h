/* encoder_bert.h - the BERT encoder (BERT, MiniLM and other BertModel checkpoints) over
 * safetensors weights, as transformers' modeling_bert.py computes it (post-norm blocks):
 *   x = LayerNorm(word_emb[ids] + pos_emb[0..n) + type_emb[0])
 *   per layer: a = softmax(q k^T / sqrt(head_dim)) v over all tokens (bidirectional)
 *              x = LayerNorm(x + a Wo + bo)
 *              x = LayerNorm(x + GELU(x Wi + bi) Wo2 + bo2)
 * Output: the last hidden states [n_tokens, hidden]. Weights are views (dense F32/F16/BF16);
 * matmuls use f32 activations. Tensor names with or without the "bert." prefix of the
 * *ForSequenceClassification checkpoints. */
#ifndef MXL_MODELS_ENCODER_BERT_H
#define MXL_MODELS_ENCODER_BERT_H

#include <stdint.h>

#include "backends/cpu/activation.h"
#include "backends/cpu/matmul.h"
#include "core/arena.h"
#include "core/threadpool.h"
#include "models/checkpoint.h"

typedef struct mxl_bert_layer {
    mxl_cpu_weight wq, wk, wv, wo, wi, wo2;
    const float *bq, *bk, *bv, *bo, *bi, *bo2;
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
} mxl_bert_layer;

typedef struct mxl_bert {
    int64_t n_layers, hidden, n_heads, head_dim, ffn, vocab, max_pos;
    float ln_eps;
    mxl_act act;
    mxl_arena arena;
    mxl_cpu_weight word_emb;
    const float *pos_emb, *type_emb, *emb_ln_w, *emb_ln_b; /* [max_pos, hidden], [types, hidden] */
    mxl_bert_layer *layers;
} mxl_bert;

mxl_status mxl_bert_load(const mxl_checkpoint *ck, mxl_bert *out, mxl_error *err);
void mxl_bert_free(mxl_bert *b);
/* hidden [n, hidden] for ids [n] (n <= max_pos). Allocates its scratch per call (not a decode
 * hot path). */
mxl_status mxl_bert_forward(const mxl_bert *b, const int32_t *ids, int64_t n, mxl_threadpool *pool,
                            float *hidden, mxl_error *err);

#endif
