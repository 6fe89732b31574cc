/* encoder_bert.h - the BERT encoder and its XLM-RoBERTa variant over safetensors weights, as
 * transformers' modeling_bert.py / modeling_xlm_roberta.py compute them (post-norm blocks):
 *   x = LayerNorm(word_emb[ids] + pos_emb[pos] + type_emb[type_ids])
 *   per layer: a = softmax(q k^T / sqrt(head_dim)) v over the sequence's tokens (bidirectional)
 *              x = LayerNorm(x + a Wo + bo)
 *              x = LayerNorm(x + act(x Wi + bi) Wo2 + bo2)
 * The two differ only in positions (and so in the usable length):
 *   BERT:        pos = 0, 1, 2, ...                                 (max_pos tokens)
 *   XLM-RoBERTa: pos = pad_id + 1 + (index among non-pad tokens), pad tokens at pad_id
 *                (fairseq's make_positions)                         (max_pos - pad_id - 1 tokens)
 * and XLM-RoBERTa checkpoints have one token type. Output: the last hidden states
 * [n_tokens, hidden]. Weights are views (dense F32/F16/BF16); matmuls use f32 activations.
 * Tensor names with or without the base-model prefix ("bert." / "roberta.") of the
 * *ForSequenceClassification checkpoints. */
#ifndef MXL_MODELS_ENCODER_BERT_H
#define MXL_MODELS_ENCODER_BERT_H

#include <stdint.h>

#include "backends/backend.h"
#include "core/arena.h"
#include "core/threadpool.h"
#include "models/checkpoint.h"
#include "models/encoder_common.h"

typedef enum mxl_bert_kind {
    MXL_BERT_KIND_BERT = 0,  /* model_type bert */
    MXL_BERT_KIND_XLM_ROBERTA, /* model_type xlm-roberta */
} mxl_bert_kind;

typedef struct mxl_bert_layer {
    mxl_weight wq, wk, wv, wo, wi, wo2;
    const float *bq, *bk, *bv, *bo, *bi, *bo2;
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
} mxl_bert_layer;

typedef struct mxl_bert {
    mxl_bert_kind kind;
    int64_t n_layers, hidden, n_heads, head_dim, ffn, vocab, max_pos, n_types;
    int64_t max_tokens; /* longest sequence the position table covers */
    int32_t pad_id;     /* XLM-RoBERTa position offset (config pad_token_id, default 1) */
    float ln_eps;
    mxl_act act;
    mxl_arena arena;
    const mxl_backend *be; /* the backend the weights are prepared for and run on (the host's) */
    const char *prefix; /* "", "bert." or "roberta." */
    mxl_weight word_emb;
    const float *pos_emb, *type_emb, *emb_ln_w, *emb_ln_b; /* [max_pos, hidden], [n_types, hidden] */
    mxl_bert_layer *layers;
} mxl_bert;

mxl_status mxl_bert_load(const mxl_checkpoint *ck, mxl_bert *out, mxl_error *err);
void mxl_bert_free(mxl_bert *b);
/* hidden [n, hidden] for ids [n] (n <= max_tokens), token types 0. Allocates its scratch per call
 * (not a decode hot path). */
mxl_status mxl_bert_forward(const mxl_bert *b, const int32_t *ids, int64_t n, mxl_threadpool *pool,
                            float *hidden, mxl_error *err);
/* hidden [n_tokens, hidden] for a batch of sequences (type ids < n_types). */
mxl_status mxl_bert_forward_batch(const mxl_bert *b, const mxl_encoder_batch *batch, mxl_threadpool *pool,
                                  float *hidden, mxl_error *err);

#endif
