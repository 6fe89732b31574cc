/* embed_decoder.h - a text decoder (models/decoder.h) run one sequence at a time for the
 * decoder-based embedding and scoring surfaces: Qwen3-Embedding (the last token's final-normed
 * hidden state, engine/embed.c), EmbeddingGemma (every token's, pooled there) and the Qwen3
 * generative reranker (the last position's logits, engine/rerank.c).
 *
 * Each call runs a whole sequence from position 0, as a fresh state would. The runner keeps the
 * previous sequence's KV cache and only runs the part after the longest common prefix (the
 * cache of a causal decoder at positions < p depends on tokens < p only), so the shared
 * instruction / query head of consecutive reranker pairs or instructed embedding texts is run
 * once. The state grows on demand up to the model's positions; its path (fast, or the f32
 * reference with MXL_DECODER_REFERENCE=1) is the decoder's default for new states. One thread
 * at a time. */
#ifndef MXL_ENGINE_EMBED_DECODER_H
#define MXL_ENGINE_EMBED_DECODER_H

#include <stdint.h>

#include "core/status.h"
#include "core/threadpool.h"
#include "models/checkpoint.h"

typedef struct mxl_dec_runner mxl_dec_runner;

/* Loads the decoder of `ck` (which must outlive the runner); `pool` is borrowed. */
mxl_status mxl_dec_runner_create(const mxl_checkpoint *ck, mxl_threadpool *pool, mxl_dec_runner **out,
                                 mxl_error *err);
void mxl_dec_runner_destroy(mxl_dec_runner *r);
int64_t mxl_dec_runner_hidden_size(const mxl_dec_runner *r);
int64_t mxl_dec_runner_vocab(const mxl_dec_runner *r);
/* max_position_embeddings: the longest sequence a call takes. */
int64_t mxl_dec_runner_max_positions(const mxl_dec_runner *r);

/* ids[n] (n >= 1) from position 0: hidden[hidden_size] = the last token's final-normed hidden
 * state. */
mxl_status mxl_dec_runner_hidden(mxl_dec_runner *r, const int32_t *ids, int64_t n, float *hidden, mxl_error *err);
/* ids[n] from position 0 in one pass: hidden[n, hidden_size] = every token's final-normed hidden
 * state (no prefix reuse: EmbeddingGemma's bidirectional attention). */
mxl_status mxl_dec_runner_hidden_all(mxl_dec_runner *r, const int32_t *ids, int64_t n, float *hidden, mxl_error *err);
/* As mxl_dec_runner_hidden, logits[vocab] of the last position. */
mxl_status mxl_dec_runner_logits(mxl_dec_runner *r, const int32_t *ids, int64_t n, float *logits, mxl_error *err);

#endif
