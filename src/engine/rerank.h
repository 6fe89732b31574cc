/* rerank.h - cross-encoder reranking: a one-label Bert / XLMRoberta / ModernBert
 * ForSequenceClassification checkpoint (detected from config.json `architectures`) scores each
 * (query, document) pair as sigmoid(logit), the score sentence-transformers' CrossEncoder gives.
 * Pairs are tokenized as the checkpoint's tokenizer would ([CLS] q [SEP] d [SEP], or
 * <s> q </s></s> d </s> for XLM-RoBERTa) and cut with HF's longest_first truncation to the limit
 * (the encoder's positions, lowered by tokenizer_config.json model_max_length, lowered by the
 * caller's max_length); pairs run through the encoder in batches. `mlxcel rerank` and the
 * server's reranking worker share it. A reranker is used by one thread at a time (it owns a
 * thread pool).
 *
 * Generative reranker (kind "generative"): a qwen3 generation checkpoint (Qwen3-Reranker; its
 * config is an ordinary Qwen3ForCausalLM one, so only an explicit reranker flag - mlxcel rerank
 * -m, serve --reranker-model - selects this) scores a pair as sigmoid(logit("yes") - logit("no"))
 * at the last position of the Qwen3-Reranker prompt (engine/rerank.c has the strings and their
 * source): prefix (system message, user turn open) + "<Instruct>: {instruction}\n<Query>:
 * {query}\n<Document>: {doc}" + suffix (assistant turn with an empty think block). The middle
 * part is tokenized as user text (special-token strings in it stay text) with the tokenizer's
 * own special tokens, and cut at its end to the limit minus the prefix and suffix, as the model
 * card's process_inputs does. The limit: 8192 (the model card's max_length), lowered by
 * max_position_embeddings, tokenizer_config.json model_max_length and the caller. Pairs run one
 * at a time; the decoder cache of the shared instruction and query is reused between them. */
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

/* The Qwen3-Reranker model card's default instruction. */
#define MXL_RERANK_DEFAULT_INSTRUCTION "Given a web search query, retrieve relevant passages that answer the query"

/* Loads a cross-encoder checkpoint, or a qwen3 generation checkpoint as a generative reranker;
 * anything else (an embedding model, another generation family, a classifier with several
 * labels, a vocabulary without "yes" / "no" tokens) is MXL_ERR_UNSUPPORTED naming what it is. */
mxl_status mxl_reranker_load(const char *path, int n_threads, mxl_reranker **out, mxl_error *err);
void mxl_reranker_destroy(mxl_reranker *r);
/* "cross-encoder" or "generative" */
const char *mxl_reranker_kind(const mxl_reranker *r);
/* The detected family ("BERT cross-encoder", ...). */
const char *mxl_reranker_family(const mxl_reranker *r);
int64_t mxl_reranker_max_length(const mxl_reranker *r);
/* Whether the reranker takes a task instruction (generative rerankers do; classifiers do not). */
bool mxl_reranker_takes_instruction(const mxl_reranker *r);

/* scores[n_docs] in request order (sigmoid of the logit, in [0, 1]; for generative rerankers the
 * logit is logit("yes") - logit("no")); logits[n_docs] and
 * n_tokens[n_docs] (tokens of each pair after truncation) may be NULL. An empty document list or
 * an empty / whitespace-only query or document is MXL_ERR_ARG naming it. Generative rerankers
 * use the default instruction (MXL_RERANK_DEFAULT_INSTRUCTION). */
mxl_status mxl_reranker_score(mxl_reranker *r, const char *query, const char *const *docs, size_t n_docs,
                              const mxl_rerank_opts *opts, double *scores, float *logits, int64_t *n_tokens,
                              mxl_error *err);
/* mxl_reranker_score with a task instruction for generative rerankers (NULL or "": the
 * default); a non-empty instruction given to a classifier is MXL_ERR_ARG. */
mxl_status mxl_reranker_score_instructed(mxl_reranker *r, const char *instruction, const char *query,
                                         const char *const *docs, size_t n_docs, const mxl_rerank_opts *opts,
                                         double *scores, float *logits, int64_t *n_tokens, mxl_error *err);

/* order[n] = document indices by descending score (ties and NaNs: lower index first, NaN last). */
void mxl_rerank_order(const double *scores, size_t n, size_t *order);

#endif
