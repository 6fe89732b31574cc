/* embed.h - sentence embeddings: tokenization with the checkpoint's special tokens, truncation to
 * the checkpoint's limit (sentence_bert_config.json max_seq_length, else the smaller of the
 * encoder's positions and tokenizer_config.json model_max_length, as sentence-transformers'
 * Transformer module), the encoder forward pass in small batches, pooling (the checkpoint's
 * Pooling module unless overridden; mean when it has none), optional Matryoshka truncation to N
 * dimensions, and normalization (llama.cpp's --embd-normalize codes: -1 none, 0 max-abs scaled
 * to int16 range, 1 L1, 2 L2, p > 2 p-norm; default L2 when the checkpoint has a Normalize
 * module, else none). An instruction is prepended to every text as written (sentence-transformers'
 * `prompt`). Encoders: BERT / MiniLM, XLM-RoBERTa, ModernBERT (models/encoder.h).
 * Qwen3-Embedding (a qwen3 checkpoint with a sentence-transformers Pooling module, or the
 * Qwen3Model architecture) runs each text through the text decoder (engine/embed_decoder.h):
 * the tokenizer's own special tokens (its post-processor appends <|endoftext|>), last-token
 * pooling (the only pooling it takes), L2 normalization when the checkpoint has a Normalize
 * module (or no sentence-transformers files at all); its instruction goes into the model's
 * query template "Instruct: {instruction}\nQuery:{text}" (as given when it already starts with
 * "Instruct:"); the limit is max_seq_length, else the smaller of max_position_embeddings and
 * model_max_length; --batch-size does not apply (one text per pass).
 * `mlxcel embed` and the server's embedding worker share it. A model is used by one thread at a
 * time (it owns a thread pool). */
#ifndef MXL_ENGINE_EMBED_H
#define MXL_ENGINE_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "models/detect.h"

#define MXL_EMBED_NORMALIZE_DEFAULT (-1000) /* "as the checkpoint says" */
#define MXL_EMBED_BATCH_DEFAULT 16

typedef struct mxl_embed_model mxl_embed_model;

typedef struct mxl_embed_opts {
    mxl_pooling pooling;     /* MXL_POOLING_NONE: the checkpoint's */
    int normalize;           /* MXL_EMBED_NORMALIZE_DEFAULT or -1, 0, 1, 2, p > 2 */
    int64_t max_length;      /* 0: the checkpoint's limit; may only lower it */
    int64_t dimensions;      /* 0: full width */
    const char *instruction; /* NULL or "": none; else prepended to every text */
    int64_t batch_size;      /* texts per forward pass; 0: MXL_EMBED_BATCH_DEFAULT */
} mxl_embed_opts;

mxl_status mxl_embed_model_load(const char *path, int n_threads, mxl_embed_model **out, mxl_error *err);
void mxl_embed_model_destroy(mxl_embed_model *m);
int64_t mxl_embed_model_dim(const mxl_embed_model *m);
int64_t mxl_embed_model_max_length(const mxl_embed_model *m);
/* The detected family ("BERT / MiniLM encoder", ...). */
const char *mxl_embed_model_family(const mxl_embed_model *m);
/* The pooling and normalization `opts` resolve to for this model. */
mxl_pooling mxl_embed_resolved_pooling(const mxl_embed_model *m, const mxl_embed_opts *opts);
int mxl_embed_resolved_normalize(const mxl_embed_model *m, const mxl_embed_opts *opts);
/* out[n, dim] (dim = opts->dimensions or the model width) for texts[n]; n_tokens[n] (may be NULL)
 * gets the tokens each text embedded with (after truncation). Empty or whitespace-only texts,
 * dimensions wider than the model and unsupported poolings are MXL_ERR_ARG / UNSUPPORTED. */
mxl_status mxl_embed_batch(mxl_embed_model *m, const char *const *texts, size_t n, const mxl_embed_opts *opts,
                           float *out, int64_t *n_tokens, mxl_error *err);
/* One text: mxl_embed_batch with n = 1. */
mxl_status mxl_embed_text(mxl_embed_model *m, const char *text, const mxl_embed_opts *opts, float *out,
                          int64_t *n_tokens, mxl_error *err);
/* Normalizes v[n] in place by mode (-1 none, 0 max-abs int16, 1 L1, 2 L2, p > 2 p-norm). */
void mxl_embed_normalize(float *v, int64_t n, int mode);

#endif
