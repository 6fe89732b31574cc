/* encoder_classifier.h - the sequence-classification heads of the encoder families, as
 * transformers computes them from the last hidden states h [n, H] of one sequence:
 *   BertForSequenceClassification:        logits = W_c tanh(W_p h[0] + b_p) + b_c
 *                                          (bert.pooler.dense, classifier)
 *   XLMRobertaForSequenceClassification:  logits = W_o tanh(W_d h[0] + b_d) + b_o
 *                                          (classifier.dense, classifier.out_proj)
 *   ModernBertForSequenceClassification:  p = h[0] (classifier_pooling "cls") or mean_t h[t]
 *                                          ("mean"); logits = W_c LayerNorm(act(W_h p (+ b_h))) + b_c
 *                                          (head.dense with classifier_bias, classifier_activation,
 *                                          head.norm with norm_bias, classifier)
 * Dropout is inactive at inference. A reranker is the one-label case (score = sigmoid(logit)). */
#ifndef MXL_MODELS_ENCODER_CLASSIFIER_H
#define MXL_MODELS_ENCODER_CLASSIFIER_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "core/arena.h"
#include "models/checkpoint.h"
#include "models/encoder.h"

typedef struct mxl_seq_classifier {
    mxl_encoder_arch arch;
    int64_t hidden, n_labels;
    bool mean_pool;                  /* ModernBERT classifier_pooling "mean" */
    mxl_act act;                     /* ModernBERT head activation (BERT / XLM-R: tanh) */
    float eps;                       /* ModernBERT head LayerNorm */
    mxl_weight dense, out;       /* [H, H], [n_labels, H] */
    const float *dense_b, *out_b;    /* dense_b NULL without a bias */
    const float *norm_w, *norm_b;    /* ModernBERT head.norm (norm_b NULL without bias) */
    mxl_arena arena;
    const mxl_backend *be; /* the backend the weights are prepared for and run on (the host's) */
} mxl_seq_classifier;

/* Binds the head of a *ForSequenceClassification checkpoint whose encoder `enc` was loaded. */
mxl_status mxl_seq_classifier_load(const mxl_checkpoint *ck, const mxl_encoder *enc, mxl_seq_classifier *out,
                                   mxl_error *err);
void mxl_seq_classifier_free(mxl_seq_classifier *c);
/* logits[n_labels] from one sequence's hidden states [n, H] (n >= 1). */
void mxl_seq_classifier_logits(const mxl_seq_classifier *c, const float *hidden, int64_t n, float *logits);

#endif
