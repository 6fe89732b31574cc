/* scheduler.h - the engine thread behind the server: a fixed set of slots (one generating
 * sequence each, per-slot context window), a bounded FIFO queue of waiting jobs, and a loop that
 * interleaves chunked prefill with decode steps so a long prompt never stalls running streams.
 *
 * A job is one completion choice; the HTTP side submits jobs and reads their output from a
 * channel (several jobs, e.g. OpenAI `n` > 1, may share one channel, tagged by index). The
 * channel is reference counted: the HTTP side and every job hold a reference, so either side
 * may go first. Cancelling a channel (client gone) frees its slots at the next engine step.
 *
 * Per tick: admit queued jobs into free slots; run one prefill chunk (2048 tokens while nothing
 * decodes, 512 while streams are decoding, or the fixed --prefill-chunk-size) for the oldest
 * prefilling slot; then one decode step for every decoding slot. A prefill that has yielded
 * --prefill-grant-interval ticks gets a tick of its own before decodes.
 *
 * KV memory: every slot's cache lives in one paged block pool (models/kv_pool.h, blocks of 32
 * positions) sized by --kv-cache-budget. Prompt cache: a finished or prefilled slot publishes its
 * full blocks under a hash chain (32 token ids + the previous block's hash, seeded by the request's
 * prompt_cache_key), so a request on ANY slot adopts the longest cached chain of its prompt by
 * reference and prefills only the rest; an idle slot also keeps its own tokens (partial last block
 * included) for a follow-up on the same slot. Unreferenced cached blocks are evicted least
 * recently used first when blocks run out (and beyond the prompt-cache capacity / TTL); idle
 * slots give their blocks back (oldest first) when the pool runs dry.
 * Models with recurrent layers keep a state per slot that exists at the slot's position only:
 * their prefill stops at the prompt's last block boundary to save a snapshot of it
 * (state_snaps.h, two per slot, paid from the budget like the slots' state), and a chain is
 * adopted only up to a boundary with a snapshot (the state comes with the blocks); an idle slot
 * keeps its own state for a prompt that extends all of its tokens.
 * Admission waits (the job stays queued) until the free blocks cover the prompt plus, while rows
 * are decoding, the --kv-admission-watermark fraction of the pool; a prompt larger than the whole
 * pool is refused (503). With --enable-preemption, a step that finds the pool dry preempts a
 * running sequence (longest-first: most generated tokens; lowest-priority: the most recently
 * admitted) - its blocks go back to the pool and it recomputes its positions (reusing what the
 * prompt cache still holds) once blocks are free again, with the same output as an unpreempted
 * run. Without it the sequence that cannot grow ends with an error. */
#ifndef MXL_SERVER_SCHEDULER_H
#define MXL_SERVER_SCHEDULER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "engine/generate.h"
#include "engine/sequence.h"
#include "engine/speculate.h"
#include "models/vlm.h"

/* One event: text released by a step of choice `index` (offset/len into the channel's text). */
typedef struct mxl_srv_event {
    int index;
    int32_t token;
    size_t text_off, text_len;
    bool final;
    const char *finish_reason; /* on final: "stop" | "length" | "error" | "cancelled" */
    const char *stop_word;
    bool progress;        /* a prefill progress report (no token, no text) */
    int64_t p_total, p_cache, p_processed; /* prompt tokens: all, from the cache, done so far */
    double p_ms;          /* since the slot took the job */
    float logprob;
    int n_top;
    int32_t top_ids[MXL_SEQ_MAX_PROBS];
    float top_logprobs[MXL_SEQ_MAX_PROBS];
    bool post_sampling; /* logprob / top_logprobs are probabilities after sampling */
} mxl_srv_event;

typedef struct mxl_srv_channel {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    atomic_bool cancel;
    mxl_srv_event *ev;
    size_t n_ev, cap_ev;
    char *text;
    size_t text_len, text_cap;
    int n_jobs, n_final;
    char error[512];      /* first engine error, if any */
    bool lost;            /* an event could not be stored (out of memory): the answer has a hole */
    int64_t prompt_tokens; /* of choice 0 */
    int64_t completion_tokens; /* all choices */
    int slot_id;           /* slot of choice 0 (-1 until admitted) */
    int want_slot;         /* id_slot: the slot choice 0 must run in, modulo the slot count (-1: any) */
    bool want_progress;    /* report prefill progress events (llama-server return_progress) */
    int64_t cached_tokens; /* prompt tokens of choice 0 reused from the slot's cache */
    int64_t draft_n, draft_accepted; /* speculative decoding: drafted and kept tokens, all choices */
    double t_submit, t_admit, t_prefill_done, t_end; /* ms, monotonic */
} mxl_srv_channel;

mxl_srv_channel *mxl_srv_channel_create(int n_jobs);
void mxl_srv_channel_unref(mxl_srv_channel *c);
/* With c->mu held: waits until more than `seen` events exist, every job is final, or
 * timeout_ms passes. */
void mxl_srv_channel_wait_locked(mxl_srv_channel *c, size_t seen, int timeout_ms);
bool mxl_srv_channel_done(mxl_srv_channel *c); /* every job final (call with mu held) */

typedef struct mxl_sched_config {
    int n_slots;
    int64_t slot_ctx;          /* tokens of context per slot */
    int max_queue;             /* waiting jobs before 503 */
    int64_t prefill_chunk;     /* 0: adaptive 2048/512 */
    int grant_interval;        /* 0: off */
    double decode_timeout_s;   /* 0: off */
    /* paged KV pool and prompt cache (zero values: the defaults noted) */
    int64_t kv_budget;         /* bytes; 0: auto; MXL_SCHED_KV_NONE: sized for every slot's context plus the cache */
    double kv_watermark;       /* 0..0.5 of the pool kept free for decodes when admitting */
    bool preemption;
    int preempt_policy;        /* MXL_SCHED_PREEMPT_* */
    bool prompt_cache;         /* cross-slot block cache on */
    int64_t cache_capacity_bytes; /* most unreferenced cached bytes (0: 2 GiB) */
    int64_t cache_max_entries; /* most unreferenced cached blocks (0: no limit beyond the bytes) */
    double cache_ttl_s;        /* evict cached blocks unused this long (0: never) */
    int64_t cache_min_prefix;  /* adopt / publish only prefixes of at least this many tokens */
    bool vlm_prefix_cache;     /* requests with images adopt / donate cached rows past their images too:
                                * image rows keyed by the image's hash (--enable-vlm-prefix-cache; not
                                * for M-RoPE models, whose image positions the cache does not carry) */
    /* speculative decoding (engine/speculate.h): each slot drafts and verifies its own tokens in
     * ticks with at most spec_max_batch decoding rows (more rows: the plain batched step, which
     * reads the weights once for all of them); the output is the same either way */
    const mxl_draft_opts *draft; /* NULL: off */
    int spec_max_batch;          /* 0: 2 */
    int vision_cache_size;       /* encoded images kept for later requests (vision_cache.h); 0: none */
} mxl_sched_config;

#define MXL_SCHED_KV_NONE (-1)
#define MXL_SCHED_PREEMPT_LONGEST_FIRST 0
#define MXL_SCHED_PREEMPT_LOWEST_PRIORITY 1

typedef struct mxl_sched mxl_sched;

mxl_status mxl_sched_create(mxl_gen_model *m, const mxl_sched_config *cfg, mxl_sched **out, mxl_error *err);
/* Stops the engine thread: waiting and running jobs end with finish_reason "cancelled". */
void mxl_sched_destroy(mxl_sched *s);

/* Queues one job (copies the prompt, the params and the stop strings). MXL_ERR_UNSUPPORTED when
 * the queue is full (the server answers 503). */
mxl_status mxl_sched_submit(mxl_sched *s, mxl_srv_channel *c, int index, const int32_t *prompt, size_t n,
                            const mxl_seq_params *p, mxl_error *err);
/* A job's images (a vision-language model): n images through the model's processor (their
 * pixels copied) and the n_blocks media blocks of the prompt they fill (block b: rows of image
 * img[b] from row off[b]). The scheduler runs the vision tower when it admits the job (or copies
 * an image's rows from the vision cache); the prompt cache reuses nothing from the first image on. */
typedef struct mxl_sched_images {
    int n;
    const mxl_vlm_input *in;
    int n_blocks;
    const mxl_decoder_media *blocks;
    const int *img;
    const int64_t *off;
} mxl_sched_images;
/* mxl_sched_submit with images (im NULL or im->n 0: none). */
mxl_status mxl_sched_submit_images(mxl_sched *s, mxl_srv_channel *c, int index, const int32_t *prompt, size_t n,
                                   const mxl_seq_params *p, const mxl_sched_images *im, mxl_error *err);

typedef struct mxl_sched_slot_info {
    int id;
    bool busy;
    int64_t n_ctx, n_prompt, n_decoded, n_remain;
    uint64_t state_bytes; /* the slot's recurrent state (recurrent families; 0 otherwise) */
} mxl_sched_slot_info;

typedef struct mxl_sched_stats {
    int n_slots, busy, queued;
    uint64_t prompt_tokens_total, prompt_tokens_cached_total, tokens_predicted_total, requests_done;
    uint64_t requests_started, cache_hits; /* admitted jobs, and those that reused a cached prefix */
    uint64_t n_decode_total, busy_slots_total; /* decode steps, and busy slots summed over them */
    int64_t n_tokens_max;                      /* most tokens a slot has held */
    double prompt_ms_total, decode_ms_total;
    /* the KV block pool (blocks of 32 positions) */
    int64_t kv_blocks_total, kv_blocks_used, kv_blocks_cached, kv_blocks_free;
    uint64_t kv_block_bytes;
    uint64_t state_bytes; /* every slot's recurrent state together (recurrent families; 0 otherwise) */
    uint64_t state_snap_bytes; /* the prompt cache's recurrent-state snapshots (state_snaps.h), allocated */
    int64_t state_snaps_used;  /* ... of which hold a snapshot now */
    uint64_t cache_block_hit_tokens; /* prompt tokens adopted from the shared block cache */
    uint64_t kv_evictions, preemptions;
    uint64_t spec_drafts, spec_draft_tokens, spec_accepted; /* verification passes with a draft, drafted and kept tokens */
    uint64_t vision_encodes, vision_cache_hits; /* images through the vision tower, and taken from the vision cache */
} mxl_sched_stats;

/* POST /slots/{id}?action=save|restore|erase (llama-server's slot persistence). The action waits
 * until the slot is idle and runs on the engine thread between ticks; the caller blocks until it
 * is done.
 * save: the slot's tokens and their KV (and, recurrent models, the state) go to `path` in a small
 *   versioned format ("MXLSLOT", version 1: the model's identity - `model_id` and the shape of
 *   its KV storage - the token ids, every KV block, a checksum).
 * restore: a file saved by the same model (checked: identity, shapes, sizes, checksum; anything
 *   else is MXL_ERR_ARG naming what differs) becomes the slot's cache, so a request whose prompt
 *   starts with those tokens reuses them (the blocks are published to the prompt cache too).
 * erase: the slot's cache is dropped.
 * n_tokens: tokens saved / restored / erased; n_bytes: file bytes written / read. */
typedef enum mxl_sched_slot_op { MXL_SCHED_SLOT_SAVE, MXL_SCHED_SLOT_RESTORE, MXL_SCHED_SLOT_ERASE } mxl_sched_slot_op;
typedef struct mxl_sched_slot_result {
    int64_t n_tokens;
    uint64_t n_bytes;
    double ms;
} mxl_sched_slot_result;
mxl_status mxl_sched_slot_action(mxl_sched *s, int slot_id, mxl_sched_slot_op op, const char *path, const char *model_id,
                                 mxl_sched_slot_result *res, mxl_error *err);
/* True while no job is queued or running and no slot action waits (the server may sleep). */
bool mxl_sched_idle(mxl_sched *s);

void mxl_sched_get_stats(mxl_sched *s, mxl_sched_stats *st, mxl_sched_slot_info *slots, int max_slots);
/* Adds the counters of `from` (totals, and the largest n_tokens_max) to `to`: what a scheduler
 * that is released leaves for the next one's counters to go on from. Gauges are not added. */
void mxl_sched_stats_carry(mxl_sched_stats *to, const mxl_sched_stats *from);
int64_t mxl_sched_slot_ctx(const mxl_sched *s);

#endif
