/* embed.h - sentence embeddings: tokenization with the checkpoint's special tokens, truncation to
 * the checkpoint's max_seq_length (sentence_bert_config.json, else max_position_embeddings),
 * the encoder forward pass, pooling (checkpoint's Pooling module unless overridden), optional
 * Matryoshka truncation to N dimensions, and normalization (llama.cpp's --embd-normalize codes:
 * -1 none, 0 max-abs scaled to int16 range, 1 L1, 2 L2, p > 2 p-norm; default L2 when the
 * checkpoint has a Normalize module, else none). `mlxcel embed` and the server's embedding
 * worker share it. BERT-family encoders only so far. */
#ifndef MXL_ENGINE_EMBED_H
#define MXL_ENGINE_EMBED_H

#include <stdint.h>

#include "core/status.h"
#include "models/detect.h"

#define MXL_EMBED_NORMALIZE_DEFAULT (-1000) /* "as the checkpoint says" */

typedef struct mxl_embed_model mxl_embed_model;

typedef struct mxl_embed_opts {
    mxl_pooling pooling;  /* MXL_POOLING_NONE: the checkpoint's */
    int normalize;        /* MXL_EMBED_NORMALIZE_DEFAULT or -1, 0, 1, 2, p > 2 */
    int64_t max_length;   /* 0: the checkpoint's limit; may only lower it */
    int64_t dimensions;   /* 0: full width */
} mxl_embed_opts;

mxl_status mxl_embed_model_load(const char *path, int n_threads, mxl_embed_model **out, mxl_error *err);
void mxl_embed_model_destroy(mxl_embed_model *m);
int64_t mxl_embed_model_dim(const mxl_embed_model *m);
int64_t mxl_embed_model_max_length(const mxl_embed_model *m);
/* The pooling and normalization `opts` resolve to for this model. */
mxl_pooling mxl_embed_resolved_pooling(const mxl_embed_model *m, const mxl_embed_opts *opts);
int mxl_embed_resolved_normalize(const mxl_embed_model *m, const mxl_embed_opts *opts);
/* out[dim] (dim = opts->dimensions or the model width); *n_tokens gets the tokens embedded. */
mxl_status mxl_embed_text(mxl_embed_model *m, const char *text, const mxl_embed_opts *opts, float *out,
                          int64_t *n_tokens, mxl_error *err);

#endif
