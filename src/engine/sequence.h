/* sequence.h - one generating sequence on a loaded model: its KV cache, sampler, streaming
 * detokenizer and stop strings. The unit both `mlxcel run`/`generate` (one sequence) and the
 * server's scheduler (one per slot) drive, so the same request gives the same tokens everywhere.
 *
 * Life of a request on a sequence:
 *   mxl_seq_start(prompt ids, params)        resets (keeping nothing of the last request yet)
 *   mxl_seq_prefill(chunk) ... until mxl_seq_prefill_left() == 0   (chunked, interleavable)
 *   loop: mxl_seq_sample(&ev)                picks the next token from the current logits,
 *                                            releases the text that is now final
 *         if ev.finished: done
 *         mxl_seq_feed()                     runs the picked token through the model
 * Text released never contains any part of a stop string: a suffix that could still grow into
 * one is held back until it cannot. Nothing here allocates after mxl_seq_start. */
#ifndef MXL_ENGINE_SEQUENCE_H
#define MXL_ENGINE_SEQUENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "engine/generate.h"
#include "engine/sampler.h"
#include "models/decoder.h"

#define MXL_SEQ_MAX_STOP 16

typedef struct mxl_seq_params {
    mxl_sampler_params sampling; /* sampling.grammar (GBNF) constrains the output; mxl_seq_start
                                    supplies grammar_vocab from the model's tokenizer */
    int64_t max_tokens; /* -1: until EOS or the context is full */
    bool ignore_eos;    /* EOS ids are masked out instead of stopping */
    const char *stop[MXL_SEQ_MAX_STOP]; /* stop strings (copied by mxl_seq_start), non-empty */
    size_t n_stop;
    const char *breakers[32]; /* storage for sampling.dry_breakers when the caller builds its own list */
    size_t n_breakers;
    bool cache_prompt; /* reuse the KV of the prefix shared with the sequence's previous request */
    const char *cache_key; /* prompt_cache_key: partitions the server's shared prompt cache (NULL: shared) */
    bool keep_special; /* decode special tokens into the text (for output parsers that read markers) */
    int n_probs; /* report the chosen token's log-probability and this many top alternatives
                    (0..MXL_SEQ_MAX_PROBS) from the model's distribution before sampling */
    bool post_sampling_probs; /* report probabilities after the sampler chain instead (llama-server's
                                 post_sampling_probs): only candidates with p > 0 */
    /* Prompt rows given as embeddings (an image's features; models/decoder.h): rows are prompt
     * positions, in order; the embeddings are the caller's and must stay valid until the prompt
     * has run. The prompt cache keeps nothing from the first media row on, unless media_keys
     * (one per block: an identity of its rows' content, such as the image's hash and where in it
     * the block starts; 0 for a block of text rows) say the cached rows are the same: then the
     * cache compares the rows as mxl_seq_media_token's stand-ins (never across an M-RoPE image,
     * whose positions the cache does not carry: the caller gives no keys for those). */
    const mxl_decoder_media *media;
    int n_media;
    const uint64_t *media_keys;
    const mxl_decoder_lora *lora; /* LoRA adapters of the model (engine/model.h) the request runs
                                     with and their scales, n_lora of them (copied by mxl_seq_start) */
    int n_lora;
    mxl_decoder_lora lora_buf[MXL_DECODER_MAX_LORA]; /* storage for lora when the caller builds its own list */
    int draft_max; /* speculative decoding (mxl_seq_verify): draft tokens one verification takes at
                      most (0: no cap of the request's own; < 0: none, every step plain; llama-server's
                      per-request speculative.n_max) */
} mxl_seq_params;

#define MXL_SEQ_MAX_PROBS 20

typedef struct mxl_seq_event {
    int32_t token;     /* the token picked (-1: none, e.g. EOS that stopped) */
    const char *text;  /* text final after this step; valid until the next call */
    size_t text_len;
    bool finished;
    const char *finish_reason; /* "stop" (EOS or stop string) or "length" */
    const char *stop_word;     /* the stop string that matched, or NULL */
    float logprob;             /* of `token` (when n_probs > 0) */
    int n_top;                 /* top alternatives, most likely first */
    int32_t top_ids[MXL_SEQ_MAX_PROBS];
    float top_logprobs[MXL_SEQ_MAX_PROBS];
    bool post_sampling;        /* logprob and top_logprobs hold probabilities after the sampler
                                  chain (post_sampling_probs), not log-probabilities */
} mxl_seq_event;

typedef struct mxl_seq mxl_seq;

/* ctx_len: KV capacity in tokens; max_chunk: the most prompt tokens one prefill call runs. */
mxl_status mxl_seq_create(mxl_gen_model *m, int64_t ctx_len, int64_t max_chunk, mxl_seq **out,
                          mxl_error *err);
/* The same on a shared KV block pool (models/kv_pool.h) made with mxl_seq_kv_pool_cfg: the
 * sequence's cache takes blocks as it grows, and prefixes can be shared (mxl_seq_adopt_prefix). */
mxl_status mxl_seq_create_pooled(mxl_gen_model *m, mxl_kv_pool *kvp, int64_t ctx_len, int64_t max_chunk, mxl_seq **out,
                                 mxl_error *err);
/* The pool configuration for the model's sequences (its KV types, n_blocks blocks). */
mxl_status mxl_seq_kv_pool_cfg(const mxl_gen_model *m, int64_t n_blocks, mxl_kv_pool_cfg *cfg, mxl_error *err);
void mxl_seq_destroy(mxl_seq *s);
int64_t mxl_seq_ctx_len(const mxl_seq *s);

/* Starts a request. The prompt must be non-empty and leave room for one token. */
mxl_status mxl_seq_start(mxl_seq *s, const int32_t *prompt, size_t n_prompt,
                         const mxl_seq_params *p, mxl_error *err);
/* Prompt tokens (or, after mxl_seq_preempt, positions) not yet run through the model. */
int64_t mxl_seq_prefill_left(const mxl_seq *s);
/* Runs up to max_tokens (<= 0: all) of the remaining prompt tokens. */
mxl_status mxl_seq_prefill(mxl_seq *s, int64_t max_tokens, mxl_error *err);
/* Runs counts[i] (1 .. mxl_seq_prefill_left) prompt tokens of each of n sequences of one model in
 * one pass (short prompts arriving together: one read of the weights instead of n). Each
 * sequence ends as after mxl_seq_prefill(seqs[i], counts[i]), bit for bit. tokens_scratch holds
 * the sum of counts, logits_scratch [n, vocab] floats; one of the sequences' decode states must
 * have room for all the rows (mxl_seq_create's max_chunk). On failure no sequence has moved. */
mxl_status mxl_seq_prefill_batch(mxl_seq *const *seqs, const int64_t *counts, int64_t n, int32_t *tokens_scratch,
                                 float *logits_scratch, mxl_error *err);
/* Picks the next token (prefill must be complete). A non-finite logit is an error, not sampled. */
mxl_status mxl_seq_sample(mxl_seq *s, mxl_seq_event *ev, mxl_error *err);
/* Runs the token picked by the last mxl_seq_sample through the model. */
mxl_status mxl_seq_feed(mxl_seq *s, mxl_error *err);
/* The same for several sequences of one model in one batched step (the weights are read once):
 * logits_scratch holds [n, vocab] floats; the sequences' decode states must have been made with
 * room for n rows (mxl_seq_create's max_chunk >= n). */
#define MXL_SEQ_MAX_BATCH 256
mxl_status mxl_seq_feed_batch(mxl_seq *const *seqs, int64_t n, float *logits_scratch, mxl_error *err);

/* Speculative decoding (engine/speculate.h makes the drafts). With a picked token waiting for
 * mxl_seq_feed, runs it and draft[0..n_draft) through the model in one pass (logits after every
 * row), then picks position by position as mxl_seq_sample would from those logits, calling
 * on_event after each pick (a nonzero return stops there, as a client's stop): while a pick
 * equals the draft token at its position the next row decides the next pick; the first pick
 * that differs, or the pick after the last draft token, waits for the next feed or verify. The
 * KV of the rejected draft positions is forgotten. Every pick is the sampler's own on the logits
 * plain decoding would have given at that position, with the same random draws, so the output
 * is plain decoding's token for token, at any temperature. *n_accepted: draft tokens kept.
 * n_draft is clamped to what the request (draft_max), the budget, the context and one pass allow (0: a plain feed then
 * sample). Models with recurrent layers cannot forget positions: mxl_seq_can_verify says. */
typedef int (*mxl_seq_event_fn)(void *ctx, const mxl_seq_event *ev);
mxl_status mxl_seq_verify(mxl_seq *s, const int32_t *draft, int n_draft, mxl_seq_event_fn on_event, void *ctx, int *n_accepted,
                          mxl_error *err);
/* NULL when the sequence's model can verify drafts, else why not (a model with recurrent layers). */
const char *mxl_seq_cannot_verify(const mxl_seq *s);
/* The most draft tokens mxl_seq_verify would run now (after the clamp). */
int mxl_seq_draft_room(const mxl_seq *s, int n_draft);
#define MXL_SEQ_MAX_DRAFT 64

int64_t mxl_seq_n_prompt(const mxl_seq *s);
int64_t mxl_seq_n_generated(const mxl_seq *s);
/* Tokens the current request may still generate. */
int64_t mxl_seq_n_remaining(const mxl_seq *s);
/* Prompt tokens of the current request whose KV came from the cache (not run again). */
int64_t mxl_seq_n_cached(const mxl_seq *s);
/* The decoder state holding the sequence's KV (block table, position) for the prompt cache. */
const mxl_decoder_state *mxl_seq_kv_state(const mxl_seq *s);
/* Adopts cached KV blocks (mxl_decoder_state_adopt) for positions 0..n-1. ids non-NULL (before
 * mxl_seq_start): they become the sequence's tokens, so the next mxl_seq_start with a prompt
 * starting with them keeps that prefix; ids NULL (after mxl_seq_preempt): the blocks hold the
 * sequence's own first n tokens, which need not run again. rec: for a model with recurrent
 * layers, their state after those n tokens (mxl_decoder_state_adopt_rec; NULL otherwise). */
mxl_status mxl_seq_adopt_prefix(mxl_seq *s, const int32_t *blocks, const int32_t *ids, size_t n, const void *rec, mxl_error *err);
/* Preemption: gives every KV block back (the sampler, text and token state stay). The positions
 * run so far become prefill work again (mxl_seq_prefill_left), after which the sequence is where
 * it was: with the last sampled token waiting for mxl_seq_feed (mxl_seq_pending_feed) if it was
 * decoding. Running them again gives the same KV bits, so the output does not change. */
void mxl_seq_preempt(mxl_seq *s);
/* A sampled token waits for mxl_seq_feed. */
bool mxl_seq_pending_feed(const mxl_seq *s);
/* The sequence's token ids so far (prompt then generated). */
const int32_t *mxl_seq_tokens(const mxl_seq *s, size_t *n);
/* The stand-in id the prompt cache compares for row i of a media block keyed `key` (negative:
 * never a vocabulary id). */
int32_t mxl_seq_media_token(uint64_t key, int64_t i);
/* out[0..n) = ids[0..n) with the rows of each keyed media block replaced by their stand-ins
 * (keys NULL: ids as they are). */
void mxl_seq_key_ids(const int32_t *ids, size_t n, const mxl_decoder_media *media, const uint64_t *keys, int n_media, int32_t *out);
/* The sequence's tokens [0, n) as the prompt cache compares them (mxl_seq_key_ids over the media
 * of the request that ran; n at most mxl_seq_tokens' count). */
void mxl_seq_cache_ids(const mxl_seq *s, size_t n, int32_t *out);
/* After mxl_seq_adopt_prefix of a keyed request's prompt: the adopted rows are that request's
 * media rows (so mxl_seq_start keeps them). */
void mxl_seq_set_cached_media(mxl_seq *s, const mxl_decoder_media *media, const uint64_t *keys, int n_media);
/* The logits the next mxl_seq_sample reads (before penalties), [vocab]; after a sample and
 * before the next feed they may hold the sampler's changes (bias, penalties, banned EOS). */
const float *mxl_seq_logits(const mxl_seq *s);

#endif
