/* rerank.h - cross-encoder reranking: a one-label Bert / XLMRoberta / ModernBert
 * ForSequenceClassification checkpoint (detected from config.json `architectures`) scores each
 * (query, document) pair as sigmoid(logit), the score sentence-transformers' CrossEncoder gives.
 * Pairs are tokenized as the checkpoint's tokenizer would ([CLS] q [SEP] d [SEP], or
 * <s> q </s></s> d </s> for XLM-RoBERTa) and cut with HF's longest_first truncation to the limit
 * (the encoder's positions, lowered by tokenizer_config.json model_max_length, lowered by the
 * caller's max_length); pairs run through the encoder in batches. `mlxcel rerank` and the
 * server's reranking worker share it. A reranker is used by one thread at a time (it owns a
 * thread pool). Generative (Qwen3) rerankers are a different runtime, not loaded here. */
#ifndef MXL_ENGINE_RERANK_H
#define MXL_ENGINE_RERANK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define MXL_RERANK_BATCH_DEFAULT 8 /* text pairs per forward pass (spec: --rerank-batch-size 0) */

typedef struct mxl_reranker mxl_reranker;

typedef struct mxl_rerank_opts {
    int64_t max_length; /* 0: the model's limit; may only lower it */
    int64_t batch_size; /* pairs per forward pass; 0: MXL_RERANK_BATCH_DEFAULT */
} mxl_rerank_opts;

/* Loads a cross-encoder checkpoint; anything else (an embedding or generation model, a
 * classifier with several labels) is MXL_ERR_UNSUPPORTED naming what it is. */
mxl_status mxl_reranker_load(const char *path, int n_threads, mxl_reranker **out, mxl_error *err);
void mxl_reranker_destroy(mxl_reranker *r);
/* "cross-encoder" */
const char *mxl_reranker_kind(const mxl_reranker *r);
/* The detected family ("BERT cross-encoder", ...). */
const char *mxl_reranker_family(const mxl_reranker *r);
int64_t mxl_reranker_max_length(const mxl_reranker *r);
/* Whether the reranker takes a task instruction (generative rerankers do; classifiers do not). */
bool mxl_reranker_takes_instruction(const mxl_reranker *r);

/* scores[n_docs] in request order (sigmoid of the logit, in [0, 1]); logits[n_docs] and
 * n_tokens[n_docs] (tokens of each pair after truncation) may be NULL. An empty document list or
 * an empty / whitespace-only query or document is MXL_ERR_ARG naming it. */
mxl_status mxl_reranker_score(mxl_reranker *r, const char *query, const char *const *docs, size_t n_docs,
                              const mxl_rerank_opts *opts, double *scores, float *logits, int64_t *n_tokens,
                              mxl_error *err);

/* order[n] = document indices by descending score (ties and NaNs: lower index first, NaN last). */
void mxl_rerank_order(const double *scores, size_t n, size_t *order);

#endif
