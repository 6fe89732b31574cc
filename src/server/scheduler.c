/* scheduler.c - slots, queue and the engine loop (scheduler.h), and the paged KV pool's policy:
 * admission against the block budget, the cross-slot prompt cache (publish / adopt block chains;
 * for models with recurrent layers with the state snapshot of the chain's end, state_snaps.h),
 * reclaiming idle slots, and preemption. The pool is touched by the engine thread only; its
 * counts are copied into the stats (under mu) once per tick. */
#include "server/scheduler.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "models/vlm.h"
#include "server/limits.h"
#include "server/state_snaps.h"
#include "server/vision_cache.h"

/* the most rows of one prefill pass: each slot's sequence is made for batches of this many (its
 * decode state's max_batch), and a pass of several prompts stays within it */
#define PREFILL_BATCH_ROWS 512

/* --- channels -------------------------------------------------------------------------------- */

mxl_srv_channel *mxl_srv_channel_create(int n_jobs) {
    mxl_srv_channel *c = mxl_calloc(1, sizeof *c);
    if (!c) return NULL;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    c->refs = 1;
    c->n_jobs = n_jobs;
    c->slot_id = -1;
    c->want_slot = -1;
    c->t_submit = mxl_now_ms();
    return c;
}

void mxl_srv_channel_unref(mxl_srv_channel *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    int left = --c->refs;
    pthread_mutex_unlock(&c->mu);
    if (left > 0) return;
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    mxl_free(c->ev);
    mxl_free(c->text);
    mxl_free(c);
}

bool mxl_srv_channel_done(mxl_srv_channel *c) { return c->n_final >= c->n_jobs; }

void mxl_srv_channel_wait_locked(mxl_srv_channel *c, size_t seen, int timeout_ms) {
    if (c->n_ev > seen || mxl_srv_channel_done(c)) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    while (c->n_ev <= seen && !mxl_srv_channel_done(c))
        if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT) break;
}

/* Appends an event (engine side). Returns false when out of memory. */
static bool channel_push(mxl_srv_channel *c, const mxl_srv_event *e, const char *text, size_t len) {
    pthread_mutex_lock(&c->mu);
    bool ok = true;
    if (c->n_ev == c->cap_ev) {
        size_t cap = c->cap_ev ? c->cap_ev * 2 : 64;
        mxl_srv_event *p = mxl_realloc(c->ev, cap * sizeof *p);
        if (p) c->ev = p, c->cap_ev = cap;
        else ok = false;
    }
    if (ok && c->text_len + len + 1 > c->text_cap) {
        size_t cap = c->text_cap ? c->text_cap : 1024;
        while (cap < c->text_len + len + 1) cap *= 2;
        char *p = mxl_realloc(c->text, cap);
        if (p) c->text = p, c->text_cap = cap;
        else ok = false;
    }
    if (ok) {
        mxl_srv_event *d = &c->ev[c->n_ev++];
        *d = *e;
        d->text_off = c->text_len;
        d->text_len = len;
        memcpy(c->text + c->text_len, text, len);
        c->text_len += len;
        c->text[c->text_len] = 0;
        if (e->token >= 0) c->completion_tokens++;
        if (e->final) {
            c->n_final++;
            if (mxl_srv_channel_done(c)) c->t_end = mxl_now_ms();
        }
    } else {
        c->lost = true; /* a token's text missing from the answer: the request fails (gen_call.c) */
        if (!c->error[0]) snprintf(c->error, sizeof c->error, "out of memory");
        if (e->final) c->n_final++;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return ok;
}

/* --- jobs and slots ---------------------------------------------------------------------------- */

typedef struct job {
    struct job *next;
    mxl_srv_channel *ch;
    int index;
    int32_t *prompt;
    size_t n_prompt;
    mxl_seq_params params;
    char *stops[MXL_SEQ_MAX_STOP];
    char *breakers[32];
    mxl_logit_bias *bias;
    char *cache_key;
    char *grammar; /* the request's GBNF (read when the sequence starts) */ /* prompt_cache_key or NULL */
    double t_last; /* last progress, for the decode watchdog */
    /* images: the processor's output until admission runs the tower, then their rows */
    int n_img, n_media;
    mxl_vlm_input in[MXL_GEN_MAX_IMAGES];
    float *rows[MXL_GEN_MAX_IMAGES];
    mxl_decoder_media media[MXL_DECODER_MAX_MEDIA];
    int media_img[MXL_DECODER_MAX_MEDIA];
    int64_t media_off[MXL_DECODER_MAX_MEDIA];
    /* the VLM prefix cache (mxl_sched_config.vlm_prefix_cache): each block's key (the image's
     * hash and the block's offset in it; 0: text rows) and the prompt as the cache compares it */
    uint64_t media_key[MXL_DECODER_MAX_MEDIA];
    int32_t *key; /* [n_prompt], NULL: the prompt itself (no keyed media) */
} job;

typedef struct slot {
    int id;
    mxl_seq *seq;
    job *j;          /* NULL: free */
    bool running;    /* under mu: between admission and release_begin (what /slots reports) */
    bool prefilling;
    int waited;      /* ticks this prefill yielded to decodes */
    double t_start;
    bool preempted;  /* its KV was given back: prefilling again to where it was */
    uint64_t admit_no; /* admission order (a larger number is a lower priority) */
    uint64_t seed;   /* prompt-cache chain seed of the job that filled its KV */
    mxl_drafter *drafter; /* speculative decoding's drafts for the slot's jobs (NULL: off) */
} slot;

struct mxl_sched {
    mxl_gen_model *m;
    mxl_sched_config cfg;
    slot *slots;
    float *logits; /* [n_slots, vocab] scratch of the batched decode step */
    int32_t *tok_scratch; /* [PREFILL_BATCH_ROWS] prompt tokens of a prefill pass of several slots */
    pthread_t thread;
    bool thread_started;
    bool shared_cache; /* the prompt cache shares blocks across slots */
    bool recurrent;    /* the model has recurrent layers: a slot's state exists at its position only,
                        * so cached blocks are adopted only up to a boundary with a state snapshot */
    mxl_state_snaps *snaps; /* (recurrent, with the prompt cache) the snapshots; NULL: none */
    mxl_vision_cache *vcache; /* encoded images (a vision-language model); NULL: none */
    const void *hit_state;  /* the snapshot of the last cache_lookup's end (recurrent) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    job *q_head, *q_tail;
    int q_len;
    mxl_sched_stats stats; /* counters under mu */
    /* the paged KV pool (engine thread only) */
    mxl_kv_pool *kvp;
    int64_t n_blocks, watermark_blocks, cache_keep;
    int n_snaps;           /* recurrent-state snapshots the prompt cache keeps (recurrent models) */
    int32_t *hits;         /* [blocks of one slot's context] cache lookup scratch */
    uint64_t *hit_chain;   /* [the same] the chain hash after each of them */
    uint64_t admit_counter;
    struct slot_op *ops;   /* POST /slots actions waiting for their slot (under mu) */
    pthread_cond_t op_cv;  /* an action done */
};

static int64_t blocks_for(int64_t n) { return (n + MXL_KV_BLOCK - 1) / MXL_KV_BLOCK; }

/* The job's media keys (each image's hash as the vision cache takes it, with the block's offset
 * in the image) and its keyed prompt; false: out of memory. */
static bool key_media(job *j) {
    uint64_t img[MXL_GEN_MAX_IMAGES];
    for (int i = 0; i < j->n_img; i++) {
        uint8_t h[32];
        mxl_vision_cache_key(&j->in[i], h);
        memcpy(&img[i], h, sizeof img[i]);
    }
    for (int b = 0; b < j->n_media; b++)
        j->media_key[b] = j->media_img[b] < 0 ? 0 : (img[j->media_img[b]] ^ ((uint64_t)j->media_off[b] * 0x9E3779B97F4A7C15ull)) | 1;
    if (!(j->key = mxl_malloc(j->n_prompt * sizeof(int32_t)))) return false;
    mxl_seq_key_ids(j->prompt, j->n_prompt, j->media, j->media_key, j->n_media, j->key);
    j->params.media_keys = j->media_key;
    return true;
}

/* The most blocks of a prefix of k blocks that ends at no row inside a media block that runs whole
 * (a keyed job's prefix may cover its images; it must not cut one of those). */
static int64_t whole_media_blocks(const job *j, int64_t k) {
    for (int i = 0; i < j->n_media; i++) {
        const mxl_decoder_media *m = &j->media[i];
        if (!mxl_decoder_media_splittable(m) && k * MXL_KV_BLOCK > m->row && k * MXL_KV_BLOCK < m->row + m->n) k = m->row / MXL_KV_BLOCK;
    }
    return k;
}

static void job_free(job *j) {
    if (!j) return;
    for (size_t i = 0; i < MXL_SEQ_MAX_STOP; i++) mxl_free(j->stops[i]);
    for (size_t i = 0; i < 32; i++) mxl_free(j->breakers[i]);
    mxl_free(j->bias);
    mxl_free(j->cache_key);
    mxl_free(j->grammar);
    mxl_free(j->prompt);
    mxl_free(j->key);
    for (int i = 0; i < j->n_img; i++) mxl_vlm_input_free(&j->in[i]), mxl_free(j->rows[i]);
    mxl_srv_channel_unref(j->ch);
    mxl_free(j);
}

/* Ends a job with a final event carrying no token. */
static void job_end(job *j, const char *reason, const char *error) {
    mxl_srv_event e = {.index = j->index, .token = -1, .final = true, .finish_reason = reason};
    if (error) {
        pthread_mutex_lock(&j->ch->mu);
        if (!j->ch->error[0]) snprintf(j->ch->error, sizeof j->ch->error, "%s", error);
        pthread_mutex_unlock(&j->ch->mu);
    }
    channel_push(j->ch, &e, "", 0);
    job_free(j);
}

mxl_status mxl_sched_submit(mxl_sched *s, mxl_srv_channel *c, int index, const int32_t *prompt, size_t n,
                            const mxl_seq_params *p, mxl_error *err) {
    return mxl_sched_submit_images(s, c, index, prompt, n, p, NULL, err);
}

mxl_status mxl_sched_submit_images(mxl_sched *s, mxl_srv_channel *c, int index, const int32_t *prompt, size_t n,
                                   const mxl_seq_params *p, const mxl_sched_images *im, mxl_error *err) {
    if (n == 0) return mxl_error_set(err, MXL_ERR_ARG, "the prompt is empty");
    if ((int64_t)n >= s->cfg.slot_ctx)
        return mxl_error_set(err, MXL_ERR_ARG, "the prompt has %zu tokens, which does not fit the context of %lld tokens per slot",
                             n, (long long)s->cfg.slot_ctx);
    if (blocks_for((int64_t)n + 1) > s->n_blocks) /* never fits: refused (503) rather than queued forever */
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "the prompt needs %lld KV blocks but the --kv-cache-budget pool holds %lld",
                             (long long)blocks_for((int64_t)n + 1), (long long)s->n_blocks);
    job *j = mxl_calloc(1, sizeof *j);
    if (!j) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    j->prompt = mxl_malloc(n * sizeof(int32_t));
    j->params = *p;
    bool ok = j->prompt != NULL;
    for (size_t i = 0; i < p->n_stop && i < MXL_SEQ_MAX_STOP && ok; i++) {
        j->stops[i] = mxl_strdup(p->stop[i]);
        j->params.stop[i] = j->stops[i];
        ok = j->stops[i] != NULL;
    }
    /* the DRY breakers and the logit biases point into the request too */
    if (ok && p->sampling.dry_breakers && p->sampling.n_dry_breakers <= 32) {
        for (size_t i = 0; i < p->sampling.n_dry_breakers && ok; i++) {
            j->breakers[i] = mxl_strdup(p->sampling.dry_breakers[i]);
            j->params.breakers[i] = j->breakers[i];
            ok = j->breakers[i] != NULL;
        }
        j->params.n_breakers = p->sampling.n_dry_breakers;
        j->params.sampling.dry_breakers = j->params.breakers;
    }
    if (p->n_lora > 0) { /* the adapters' list lives in the job's own params */
        memcpy(j->params.lora_buf, p->lora, (size_t)p->n_lora * sizeof *p->lora);
        j->params.lora = j->params.lora_buf;
    }
    if (ok && p->sampling.grammar) {
        j->grammar = mxl_strdup(p->sampling.grammar);
        j->params.sampling.grammar = j->grammar;
        ok = j->grammar != NULL;
    }
    if (ok && p->cache_key) {
        j->cache_key = mxl_strdup(p->cache_key);
        j->params.cache_key = j->cache_key;
        ok = j->cache_key != NULL;
    }
    if (ok && im && im->n > 0) {
        if (!mxl_gen_model_vlm(s->m) || im->n > MXL_GEN_MAX_IMAGES || im->n_blocks > MXL_DECODER_MAX_MEDIA || im->n_blocks < 1) {
            j->ch = NULL;
            job_free(j);
            return mxl_error_set(err, MXL_ERR_ARG, "images for a model that takes none, or too many");
        }
        for (int i = 0; i < im->n && ok; i++) {
            j->in[i] = im->in[i];
            j->in[i].text = NULL, j->in[i].text_len = 0;
            j->in[i].pixels = mxl_malloc(im->in[i].n_pixels * sizeof(float));
            if ((ok = j->in[i].pixels != NULL)) memcpy(j->in[i].pixels, im->in[i].pixels, im->in[i].n_pixels * sizeof(float));
            j->n_img = i + 1;
        }
        memcpy(j->media, im->blocks, (size_t)im->n_blocks * sizeof *j->media);
        memcpy(j->media_img, im->img, (size_t)im->n_blocks * sizeof *j->media_img);
        memcpy(j->media_off, im->off, (size_t)im->n_blocks * sizeof *j->media_off);
        j->n_media = im->n_blocks;
        j->params.media = j->media;
        j->params.n_media = j->n_media;
    }
    if (ok && p->sampling.n_logit_bias) {
        j->bias = mxl_malloc(p->sampling.n_logit_bias * sizeof *j->bias);
        if ((ok = j->bias != NULL)) memcpy(j->bias, p->sampling.logit_bias, p->sampling.n_logit_bias * sizeof *j->bias);
        j->params.sampling.logit_bias = j->bias;
    }
    if (!ok) {
        j->ch = NULL;
        job_free(j);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    memcpy(j->prompt, prompt, n * sizeof(int32_t));
    j->n_prompt = n;
    j->index = index;
    if (j->n_media && s->cfg.vlm_prefix_cache && !key_media(j)) {
        j->ch = NULL;
        job_free(j);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_lock(&s->mu);
    if (s->stopping || s->q_len >= s->cfg.max_queue) {
        bool stopping = s->stopping;
        pthread_mutex_unlock(&s->mu);
        j->ch = NULL;
        job_free(j);
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, stopping ? "the server is shutting down" : "the request queue is full (%d waiting); try again later",
                             s->cfg.max_queue);
    }
    pthread_mutex_lock(&c->mu);
    c->refs++;
    pthread_mutex_unlock(&c->mu);
    j->ch = c;
    if (s->q_tail) s->q_tail->next = j;
    else s->q_head = j;
    s->q_tail = j;
    s->q_len++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return MXL_OK;
}

/* --- the prompt cache and the block budget ---------------------------------------------------- */

/* The chain seed of a job's prompt blocks: its prompt_cache_key's, and the LoRA adapters with
 * their scales it runs (KV computed under other adapters is another model's). */
static uint64_t job_seed(const job *j) {
    uint64_t h = mxl_kv_pool_chain_seed(j->params.cache_key);
    for (int i = 0; i < j->params.n_lora; i++) {
        uint32_t bits;
        memcpy(&bits, &j->params.lora[i].scale, sizeof bits);
        h = (h ^ (uint64_t)(uintptr_t)j->params.lora[i].lora) * 0x100000001b3ull;
        h = (h ^ bits) * 0x100000001b3ull;
    }
    return h;
}

static const mxl_decoder_state *slot_kv(const slot *sl) { return mxl_seq_kv_state(sl->seq); }
static int64_t slot_blocks(const slot *sl) { return mxl_decoder_state_blocks(slot_kv(sl), NULL); }

/* Publishes the slot's full blocks under its chain (no-op for blocks already cached). */
static void publish_slot(mxl_sched *s, const slot *sl) {
    if (!s->shared_cache) return;
    const int32_t *table = NULL;
    mxl_decoder_state_blocks(slot_kv(sl), &table);
    int64_t pos = mxl_decoder_state_pos(slot_kv(sl));
    size_t n = 0;
    mxl_seq_tokens(sl->seq, &n);
    if (pos > (int64_t)n) pos = (int64_t)n;
    if (pos < s->cfg.cache_min_prefix) return;
    int32_t *ids = mxl_malloc((size_t)pos * sizeof(int32_t)); /* (image rows by their keys) */
    if (!ids) return;
    mxl_seq_cache_ids(sl->seq, (size_t)pos, ids);
    uint64_t h = sl->seed;
    for (int64_t b = 0; (b + 1) * MXL_KV_BLOCK <= pos; b++) {
        uint64_t nh = mxl_kv_pool_chain_hash(h, ids + b * MXL_KV_BLOCK);
        mxl_kv_pool_publish(s->kvp, table[b], nh, h, ids + b * MXL_KV_BLOCK);
        h = nh;
    }
    mxl_free(ids);
}

/* The cached chain of ids[0..max_tokens) under seed: block ids into s->hits; returns the block
 * count (0 when shorter than --prompt-cache-min-prefix). */
static int64_t cache_lookup(mxl_sched *s, uint64_t seed, const int32_t *ids, int64_t max_tokens) {
    s->hit_state = NULL;
    if (!s->shared_cache) return 0;
    int64_t limit = max_tokens / MXL_KV_BLOCK, k = 0;
    uint64_t h = seed;
    for (; k < limit; k++) {
        uint64_t nh = mxl_kv_pool_chain_hash(h, ids + k * MXL_KV_BLOCK);
        int32_t id = mxl_kv_pool_lookup(s->kvp, nh, h, ids + k * MXL_KV_BLOCK);
        if (id < 0) break;
        s->hits[k] = id;
        s->hit_chain[k] = h = nh;
    }
    /* recurrent layers: back to the longest cached prefix whose end has a state snapshot */
    while (s->recurrent && k > 0 && !(s->hit_state = mxl_state_snaps_find(s->snaps, s->hit_chain[k - 1], k * MXL_KV_BLOCK))) k--;
    return k * MXL_KV_BLOCK >= s->cfg.cache_min_prefix ? k : 0;
}

/* The position at which the slot's prefill stops to snapshot its recurrent state: the prompt's
 * last block boundary (one prompt token always runs after it), when it is still ahead and long
 * enough to be cached; -1: none. */
static int64_t snap_target(const mxl_sched *s, const slot *sl) {
    if (!s->snaps || sl->preempted || !sl->j || !sl->j->params.cache_prompt) return -1;
    int64_t b = (mxl_seq_n_prompt(sl->seq) - 1) / MXL_KV_BLOCK * MXL_KV_BLOCK;
    return b > 0 && b >= s->cfg.cache_min_prefix && b > mxl_decoder_state_pos(slot_kv(sl)) ? b : -1;
}

/* At the prompt's last block boundary: the slot's recurrent state saved under the chain of the
 * tokens before it, and its blocks published. */
static void snapshot_slot(mxl_sched *s, const slot *sl) {
    int64_t pos = mxl_decoder_state_pos(slot_kv(sl));
    if (!s->snaps || sl->preempted || !sl->j || !sl->j->params.cache_prompt || pos <= 0 || pos % MXL_KV_BLOCK != 0 ||
        pos != (mxl_seq_n_prompt(sl->seq) - 1) / MXL_KV_BLOCK * MXL_KV_BLOCK || pos < s->cfg.cache_min_prefix)
        return;
    size_t n = 0;
    const int32_t *ids = mxl_seq_tokens(sl->seq, &n);
    uint64_t h = sl->seed;
    for (int64_t b = 0; b < pos / MXL_KV_BLOCK; b++) h = mxl_kv_pool_chain_hash(h, ids + b * MXL_KV_BLOCK);
    if (mxl_state_snaps_find(s->snaps, h, pos)) return; /* (the same prefix: the same state) */
    mxl_decoder_state_rec_save(slot_kv(sl), mxl_state_snaps_put(s->snaps, h, pos));
    publish_slot(s, sl);
}

/* Cached blocks among the first k hits that nobody references (adopting them takes them out of
 * the evictable count). */
static int64_t unreferenced_hits(const mxl_sched *s, int64_t k) {
    int64_t n = 0;
    for (int64_t i = 0; i < k; i++) n += mxl_kv_pool_refcount(s->kvp, s->hits[i]) == 0;
    return n;
}

/* Blocks idle slots (other than keep) hold and could give back. */
static int64_t reclaimable(const mxl_sched *s, const slot *keep) {
    int64_t n = 0;
    for (int i = 0; i < s->cfg.n_slots; i++)
        if (!s->slots[i].j && &s->slots[i] != keep) n += slot_blocks(&s->slots[i]);
    return n;
}

/* Evicts cached blocks beyond the capacity or the TTL. */
static void trim_cache(mxl_sched *s) {
    double older = s->cfg.cache_ttl_s > 0 ? mxl_now_ms() / 1e3 - s->cfg.cache_ttl_s : -INFINITY;
    mxl_kv_pool_evict_lru(s->kvp, s->cache_keep, older);
}

/* The least recently used idle slot (other than keep) holding blocks gives them back (its full
 * blocks stay in the prompt cache). False when there is none. */
static bool reclaim_idle(mxl_sched *s, const slot *keep) {
    slot *lru = NULL;
    for (int i = 0; i < s->cfg.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->j && sl != keep && slot_blocks(sl) > 0 && (!lru || sl->t_start < lru->t_start)) lru = sl;
    }
    if (!lru) return false;
    publish_slot(s, lru);
    mxl_seq_preempt(lru->seq); /* an idle sequence: the next mxl_seq_start begins from nothing */
    return true;
}

/* The running sequence to preempt under the policy, among those admitted after min_admit that
 * hold blocks (not `exclude`); NULL if none. */
static slot *pick_victim(mxl_sched *s, const slot *exclude, uint64_t min_admit) {
    slot *v = NULL;
    for (int i = 0; i < s->cfg.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->j || sl == exclude || sl->admit_no <= min_admit || slot_blocks(sl) == 0) continue;
        if (!v) {
            v = sl;
            continue;
        }
        if (s->cfg.preempt_policy == MXL_SCHED_PREEMPT_LONGEST_FIRST) {
            int64_t g = mxl_seq_n_generated(sl->seq), gv = mxl_seq_n_generated(v->seq);
            if (g > gv || (g == gv && sl->admit_no > v->admit_no)) v = sl;
        } else if (sl->admit_no > v->admit_no) {
            v = sl;
        }
    }
    return v;
}

/* Gives a running sequence's blocks back; it prefills its positions again later. */
static void preempt(mxl_sched *s, slot *sl) {
    publish_slot(s, sl); /* its prompt (and answer so far) stays cached for the recompute */
    mxl_seq_preempt(sl->seq);
    sl->prefilling = true;
    sl->preempted = true;
    sl->waited = 0;
    pthread_mutex_lock(&s->mu);
    s->stats.preemptions++;
    pthread_mutex_unlock(&s->mu);
}

/* Ending a slot's job, in two halves: release_begin publishes its KV to the prompt cache and
 * counts the request done; release_end frees the slot and ends the job. A job that finishes with
 * its last token runs the first half before that token's event goes out, so a client that reads
 * /metrics, /slots or sends its next turn right after the answer finds the request gone and its
 * prefix cached. */
static void release_begin(mxl_sched *s, slot *sl) {
    publish_slot(s, sl);
    pthread_mutex_lock(&s->mu);
    s->stats.busy--;
    s->stats.requests_done++;
    sl->running = false;
    pthread_mutex_unlock(&s->mu);
}

static void release_end(mxl_sched *s, slot *sl, const char *reason, const char *error) {
    job *j = sl->j;
    sl->j = NULL;
    sl->prefilling = false;
    sl->preempted = false;
    if (reason) job_end(j, reason, error);
    else job_free(j);
    trim_cache(s);
}

static void slot_release(mxl_sched *s, slot *sl, const char *reason, const char *error) {
    release_begin(s, sl);
    release_end(s, sl, reason, error);
}

/* A prefill progress event for the slot's job, when its channel asked for them. */
static void push_progress(slot *sl, bool first) {
    job *j = sl->j;
    if (!j->ch->want_progress) return;
    mxl_srv_event e = {.index = j->index, .token = -1, .progress = true};
    e.p_total = mxl_seq_n_prompt(sl->seq);
    e.p_cache = mxl_seq_n_cached(sl->seq);
    e.p_processed = e.p_total - mxl_seq_prefill_left(sl->seq);
    e.p_ms = first ? 0.0 : mxl_now_ms() - sl->t_start; /* the first report comes before any work */
    channel_push(j->ch, &e, "", 0);
}

/* Tokens the idle slot's cache shares with the prompt (within the positions it holds); 0 when
 * the slot's KV was made under another prompt_cache_key. */
static size_t own_prefix(const mxl_sched *s, const slot *sl, const job *j) {
    size_t n, k = 0;
    if (sl->seed != job_seed(j)) return 0;
    mxl_seq_tokens(sl->seq, &n);
    int64_t pos = mxl_decoder_state_pos(slot_kv(sl));
    if ((int64_t)n > pos) n = (size_t)pos;
    if (n > j->n_prompt) n = j->n_prompt;
    int32_t *ids = mxl_malloc((n ? n : 1) * sizeof(int32_t)); /* (image rows by their keys) */
    if (!ids) return 0;
    mxl_seq_cache_ids(sl->seq, n, ids);
    const int32_t *want = j->key ? j->key : j->prompt;
    while (k < n && ids[k] == want[k]) k++;
    mxl_free(ids);
    /* a recurrent state goes on only from its own position: all of it, or nothing */
    return s->recurrent && (k < n || k >= j->n_prompt) ? 0 : k;
}

/* The slot a job is pinned to by id_slot (choice 0 only), NULL when it is not pinned. */
static slot *pinned_slot(const mxl_sched *s, const job *j) {
    return j->index == 0 && j->ch->want_slot >= 0 ? &s->slots[j->ch->want_slot % s->cfg.n_slots] : NULL;
}

/* The free slot whose cached tokens share the longest prefix with the prompt (the prompt cache
 * then skips that prefix); when none shares anything, the free slot used least recently, so
 * other conversations' caches survive longest. NULL: none free. A job pinned by id_slot gets its
 * slot or, while that one is busy, none. */
static slot *pick_slot(mxl_sched *s, const job *j) {
    slot *pin = pinned_slot(s, j);
    if (pin) return pin->j ? NULL : pin;
    slot *best = NULL, *lru = NULL;
    size_t best_len = 0;
    for (int i = 0; i < s->cfg.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->j) continue;
        size_t k = own_prefix(s, sl, j);
        if (k > best_len) best = sl, best_len = k;
        if (!lru || sl->t_start < lru->t_start) lru = sl;
    }
    return best ? best : lru;
}

static bool any_decoding(const mxl_sched *s) {
    for (int i = 0; i < s->cfg.n_slots; i++)
        if (s->slots[i].j && !s->slots[i].prefilling) return true;
    return false;
}

/* The job's images through the vision tower (on this thread's pool), into its media rows; an
 * image the vision cache holds is copied from it. */
static bool encode_images(mxl_sched *s, job *j, mxl_error *err) {
    const mxl_vlm *v = mxl_gen_model_vlm(s->m);
    for (int i = 0; i < j->n_img; i++) {
        if (j->rows[i]) continue;
        const size_t nf = mxl_vlm_rows_floats(v, &j->in[i]);
        j->rows[i] = mxl_malloc(nf * sizeof(float));
        if (!j->rows[i]) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory"), false;
        uint8_t key[32];
        if (s->vcache) mxl_vision_cache_key(&j->in[i], key);
        const bool hit = s->vcache && mxl_vision_cache_get(s->vcache, key, j->rows[i], nf);
        if (!hit) {
            if (v->encode(v, &j->in[i], mxl_gen_model_pool(s->m), j->rows[i], err)) return false;
            if (s->vcache) mxl_vision_cache_put(s->vcache, key, j->rows[i], nf);
        }
        pthread_mutex_lock(&s->mu);
        if (hit) s->stats.vision_cache_hits++;
        else s->stats.vision_encodes++;
        pthread_mutex_unlock(&s->mu);
        mxl_free(j->in[i].pixels);
        j->in[i].pixels = NULL;
    }
    for (int b = 0; b < j->n_media; b++)
        if (j->media_img[b] >= 0) mxl_vlm_point_block(v, &j->in[j->media_img[b]], j->rows[j->media_img[b]], j->media_off[b], &j->media[b]); /* (else text rows) */
    return true;
}

/* A job pinned by id_slot whose slot is busy. */
static bool pinned_busy(const mxl_sched *s, const job *j) {
    const slot *pin = pinned_slot(s, j);
    return pin && pin->j != NULL;
}

/* Starts queued jobs in free slots (FIFO, but for jobs pinned to a busy slot, which wait while
 * the ones behind them go on, as llama-server defers them) while the block budget allows. */
static void admit(mxl_sched *s) {
    for (;;) {
        /* only this thread pops the queue, so the head stays put once seen */
        pthread_mutex_lock(&s->mu);
        job *j = s->q_head, *prev = NULL;
        while (j && pinned_busy(s, j)) prev = j, j = j->next; /* (those wait for their slot; the rest go on) */
        int busy = s->stats.busy;
        pthread_mutex_unlock(&s->mu);
        slot *sl = j ? pick_slot(s, j) : NULL;
        if (!sl) return;
        bool use_cache = s->cfg.prompt_cache && j->params.cache_prompt && !atomic_load(&j->ch->cancel);
        uint64_t seed = job_seed(j);
        /* one prompt token always runs (its logits start the answer) */
        /* (nothing from the first image on comes from the cache unless the job keyed its image
         * rows: their positions hold the image's rows, whatever their token ids say) */
        int64_t k = use_cache ? cache_lookup(s, seed, j->key ? j->key : j->prompt,
                                             j->n_img && !j->key ? j->media[0].row : (int64_t)j->n_prompt - 1)
                              : 0;
        if (j->key && k) k = whole_media_blocks(j, k);
        int64_t own = use_cache ? (int64_t)own_prefix(s, sl, j) : 0;
        int64_t reuse = k * MXL_KV_BLOCK > own ? k * MXL_KV_BLOCK : own;
        int64_t need = blocks_for((int64_t)j->n_prompt + 1) - reuse / MXL_KV_BLOCK;
        int64_t avail = mxl_kv_pool_available(s->kvp) + reclaimable(s, sl) - unreferenced_hits(s, k) +
                        (reuse > own ? slot_blocks(sl) : slot_blocks(sl) - own / MXL_KV_BLOCK);
        /* with nothing running the job goes in whatever the count says (it fits the pool: submit
         * checked), so a lone request never waits on itself */
        if (busy > 0 && avail < need + (any_decoding(s) ? s->watermark_blocks : 0)) return;
        pthread_mutex_lock(&s->mu);
        if (prev) prev->next = j->next;
        else s->q_head = j->next;
        if (s->q_tail == j) s->q_tail = prev;
        s->q_len--;
        s->stats.busy++;
        sl->running = true;
        pthread_mutex_unlock(&s->mu);
        j->next = NULL;
        sl->j = j;
        if (sl->drafter) mxl_drafter_reset(sl->drafter);
        sl->preempted = false;
        if (atomic_load(&j->ch->cancel)) {
            slot_release(s, sl, "cancelled", NULL);
            continue;
        }
        mxl_error err = {0};
        bool adopted = false;
        if (sl->seed != seed) mxl_seq_preempt(sl->seq); /* another prompt_cache_key's KV is not reused */
        if (k * MXL_KV_BLOCK > own) { /* another slot's (or an evicted slot's) blocks hold more */
            adopted = mxl_seq_adopt_prefix(sl->seq, s->hits, j->prompt, (size_t)(k * MXL_KV_BLOCK), s->hit_state, &err) == MXL_OK;
            if (adopted && j->key) mxl_seq_set_cached_media(sl->seq, j->media, j->media_key, j->n_media); /* (its image rows, keyed) */
        }
        sl->seed = seed; /* the slot's KV is now this job's chain */
        if (j->n_img && !encode_images(s, j, &err)) {
            slot_release(s, sl, "error", err.msg);
            continue;
        }
        if (mxl_seq_start(sl->seq, j->prompt, j->n_prompt, &j->params, &err)) {
            slot_release(s, sl, "error", err.msg);
            continue;
        }
        sl->admit_no = ++s->admit_counter;
        pthread_mutex_lock(&j->ch->mu);
        if (j->index == 0) {
            j->ch->slot_id = sl->id;
            j->ch->prompt_tokens = (int64_t)j->n_prompt;
            j->ch->cached_tokens = mxl_seq_n_cached(sl->seq);
            j->ch->t_admit = mxl_now_ms();
        }
        pthread_mutex_unlock(&j->ch->mu);
        pthread_mutex_lock(&s->mu);
        s->stats.prompt_tokens_cached_total += (uint64_t)mxl_seq_n_cached(sl->seq);
        if (adopted) s->stats.cache_block_hit_tokens += (uint64_t)mxl_seq_n_cached(sl->seq);
        s->stats.requests_started++;
        if (mxl_seq_n_cached(sl->seq) > 0) s->stats.cache_hits++;
        pthread_mutex_unlock(&s->mu);
        sl->prefilling = true;
        sl->waited = 0;
        sl->t_start = mxl_now_ms();
        j->t_last = sl->t_start;
        push_progress(sl, true);
    }
}

/* Blocks a preempted slot needs to get back to where it was and take one more token. */
static int64_t refill_need(const slot *sl) {
    int64_t pos = mxl_decoder_state_pos(slot_kv(sl));
    return blocks_for(pos + mxl_seq_prefill_left(sl->seq) + 1) - slot_blocks(sl);
}

/* A preempted slot starts its recompute only once its blocks are there (else it would take
 * blocks from the rows that made it yield, and be preempted again); it first adopts what the
 * prompt cache still holds of its tokens. False: keep waiting. */
static bool refill_ready(mxl_sched *s, slot *sl) {
    if (!sl->preempted || mxl_decoder_state_pos(slot_kv(sl)) > 0) return true;
    int64_t need = refill_need(sl);
    if (blocks_for(mxl_seq_prefill_left(sl->seq) + 1) > s->n_blocks) {
        slot_release(s, sl, "error", "the sequence has outgrown the --kv-cache-budget pool");
        return false;
    }
    if (mxl_kv_pool_available(s->kvp) + reclaimable(s, NULL) < need + (any_decoding(s) ? s->watermark_blocks : 0)) return false;
    size_t n = 0;
    const int32_t *ids = mxl_seq_tokens(sl->seq, &n);
    int64_t target = mxl_seq_prefill_left(sl->seq);
    /* with a sampled token pending, every position may come from the cache; mid-prompt, the last
     * one runs for its logits */
    int64_t k = cache_lookup(s, sl->seed, ids, mxl_seq_pending_feed(sl->seq) ? target : target - 1);
    mxl_error err = {0};
    if (k > 0) mxl_seq_adopt_prefix(sl->seq, s->hits, NULL, (size_t)(k * MXL_KV_BLOCK), s->hit_state, &err); /* a failure just recomputes */
    return true;
}

/* After a prefill pass ending at t1 ran some of sl's prompt: its progress event, and when the
 * prompt is done its publication and the prompt statistics. */
static void prefill_advanced(mxl_sched *s, slot *sl, double t1) {
    sl->j->t_last = t1;
    sl->waited = 0;
    snapshot_slot(s, sl);
    if (!sl->preempted) push_progress(sl, false);
    if (mxl_seq_prefill_left(sl->seq) == 0) {
        sl->prefilling = false;
        bool was_preempted = sl->preempted;
        sl->preempted = false;
        publish_slot(s, sl);
        if (was_preempted) return;
        pthread_mutex_lock(&s->mu);
        s->stats.prompt_tokens_total += (uint64_t)(mxl_seq_n_prompt(sl->seq) - mxl_seq_n_cached(sl->seq));
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_lock(&sl->j->ch->mu);
        if (sl->j->index == 0) sl->j->ch->t_prefill_done = t1;
        pthread_mutex_unlock(&sl->j->ch->mu);
    }
}

/* Prompts that arrived together: when first's whole remaining prompt fits the chunk, the other
 * prefilling slots whose whole remainder fits what is left of it run in the same pass (one read
 * of the weights instead of one per prompt; each sequence's results are those of its own pass).
 * False when there is nothing to join or the pass fails (then the one-slot path runs, with its
 * handling of a dry block pool). */
static bool prefill_together(mxl_sched *s, slot *first, int64_t chunk, double t0) {
    int64_t budget = chunk < PREFILL_BATCH_ROWS ? chunk : PREFILL_BATCH_ROWS;
    mxl_seq *seqs[MXL_SEQ_MAX_BATCH];
    slot *who[MXL_SEQ_MAX_BATCH];
    int64_t counts[MXL_SEQ_MAX_BATCH], n = 0;
    if (first->preempted || mxl_seq_prefill_left(first->seq) > budget || snap_target(s, first) > 0) return false;
    for (int i = -1; i < s->cfg.n_slots && n < MXL_SEQ_MAX_BATCH; i++) {
        slot *sl = i < 0 ? first : &s->slots[i];
        if (i >= 0 && (sl == first || !sl->j || !sl->prefilling || sl->preempted || snap_target(s, sl) > 0)) continue;
        int64_t left = mxl_seq_prefill_left(sl->seq);
        if (left < 1 || left > budget) continue;
        budget -= left;
        seqs[n] = sl->seq, who[n] = sl, counts[n] = left, n++;
    }
    if (n < 2) return false;
    mxl_error err = {0};
    if (mxl_seq_prefill_batch(seqs, counts, n, s->tok_scratch, s->logits, &err) != MXL_OK) return false;
    double t1 = mxl_now_ms();
    pthread_mutex_lock(&s->mu);
    s->stats.prompt_ms_total += t1 - t0;
    pthread_mutex_unlock(&s->mu);
    for (int64_t i = 0; i < n; i++) prefill_advanced(s, who[i], t1);
    return true;
}

/* One prefill chunk for the prefilling slot that started first (with the prompts that can join
 * it). */
static void prefill_tick(mxl_sched *s, bool decoding) {
    slot *best = NULL;
    for (int i = 0; i < s->cfg.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->j && sl->prefilling && (!best || sl->t_start < best->t_start) && refill_ready(s, sl) && sl->j) best = sl;
    }
    if (!best) return;
    int64_t chunk = s->cfg.prefill_chunk > 0 ? s->cfg.prefill_chunk : decoding ? 512 : 2048;
    const int64_t snap = snap_target(s, best), pos = mxl_decoder_state_pos(slot_kv(best));
    if (snap > 0 && pos + chunk > snap) chunk = snap - pos; /* the pass stops there to snapshot the state */
    double t0 = mxl_now_ms();
    if (prefill_together(s, best, chunk, t0)) return;
    mxl_error err = {0};
    mxl_status st;
    /* the pool dry: idle slots give their blocks back first, then (with preemption) a sequence
     * admitted after this one yields */
    while ((st = mxl_seq_prefill(best->seq, chunk, &err)) == MXL_ERR_NOMEM) {
        slot *v = NULL;
        if (reclaim_idle(s, NULL)) continue;
        if (s->cfg.preemption && (v = pick_victim(s, best, best->admit_no))) {
            preempt(s, v);
            continue;
        }
        break;
    }
    if (st == MXL_ERR_NOMEM && any_decoding(s)) return; /* the decoding rows will finish and free blocks */
    if (st) {
        slot_release(s, best, "error", err.msg);
        return;
    }
    double t1 = mxl_now_ms();
    pthread_mutex_lock(&s->mu);
    s->stats.prompt_ms_total += t1 - t0;
    pthread_mutex_unlock(&s->mu);
    prefill_advanced(s, best, t1);
}

/* Runs the batch's sampled tokens; when the pool is dry, idle slots give blocks back and (with
 * preemption) running sequences yield until the step fits. Sequences that still cannot run end
 * with an error. */
static void feed_all(mxl_sched *s, mxl_seq **feed, slot **feed_slot, int64_t n_feed) {
    mxl_error err = {0};
    mxl_status st = MXL_OK;
    while (n_feed && (st = mxl_seq_feed_batch(feed, n_feed, s->logits, &err)) == MXL_ERR_NOMEM) {
        if (reclaim_idle(s, NULL)) continue;
        slot *v = s->cfg.preemption ? pick_victim(s, NULL, 0) : NULL;
        if (!v) break;
        preempt(s, v);
        for (int64_t i = 0; i < n_feed; i++) /* a preempted row runs its token after the recompute */
            if (feed_slot[i] == v) {
                memmove(feed + i, feed + i + 1, (size_t)(n_feed - i - 1) * sizeof *feed);
                memmove(feed_slot + i, feed_slot + i + 1, (size_t)(n_feed - i - 1) * sizeof *feed_slot);
                n_feed--;
                break;
            }
    }
    if (n_feed && st) {
        /* the batch left every sequence unchanged: run them one by one to pin the failure down.
         * A sequence the dry pool stops keeps its token pending and retries next step, while
         * others progress (and will free blocks); if none can, the lowest-priority one ends. */
        bool progressed = false;
        slot *youngest = NULL;
        mxl_error last = {0};
        for (int64_t i = 0; i < n_feed; i++) {
            mxl_error e1 = {0};
            mxl_status st1 = mxl_seq_feed(feed[i], &e1);
            if (st1 == MXL_OK) progressed = true;
            else if (st1 != MXL_ERR_NOMEM) slot_release(s, feed_slot[i], "error", e1.msg);
            else if (!youngest || feed_slot[i]->admit_no > youngest->admit_no) youngest = feed_slot[i], last = e1;
        }
        /* a prefilling row holding blocks counts too (it would wait for the decoders' blocks) */
        for (int i = 0; youngest && i < s->cfg.n_slots; i++) {
            slot *sl = &s->slots[i];
            if (sl->j && sl->prefilling && slot_blocks(sl) > 0 && sl->admit_no > youngest->admit_no) youngest = sl;
        }
        if (youngest && !progressed)
            slot_release(s, youngest, "error", last.msg[0] ? last.msg : "the KV cache budget is exhausted");
    }
}

/* The counts of one decode tick. */
typedef struct tick_counts {
    uint64_t produced, busy;
    int64_t longest;
} tick_counts;

/* A step's event to the slot's job; true when it ended the job (the slot is being released:
 * release_begin done, release_end left to the caller). */
static bool emit_event(mxl_sched *s, slot *sl, const mxl_seq_event *ev, tick_counts *tc) {
    mxl_srv_event e = {.index = sl->j->index, .token = ev->token, .final = ev->finished,
                       .finish_reason = ev->finish_reason, .stop_word = NULL, .logprob = ev->logprob, .n_top = ev->n_top,
                       .post_sampling = ev->post_sampling};
    if (ev->stop_word) /* point at the job's own copy, which lives as long as the job */
        for (size_t k = 0; k < MXL_SEQ_MAX_STOP; k++)
            if (sl->j->stops[k] && strcmp(sl->j->stops[k], ev->stop_word) == 0) e.stop_word = sl->j->stops[k];
    memcpy(e.top_ids, ev->top_ids, sizeof e.top_ids);
    memcpy(e.top_logprobs, ev->top_logprobs, sizeof e.top_logprobs);
    if (ev->token >= 0) { /* counted before the event goes out: a client that reads /metrics right after its
                           * last token must find it there */
        tc->produced++;
        pthread_mutex_lock(&s->mu);
        s->stats.tokens_predicted_total++;
        pthread_mutex_unlock(&s->mu);
    }
    int64_t held = mxl_seq_n_prompt(sl->seq) + mxl_seq_n_generated(sl->seq);
    if (held > tc->longest) tc->longest = held;
    if (ev->finished) release_begin(s, sl);
    channel_push(sl->j->ch, &e, ev->text, ev->text_len);
    sl->j->t_last = mxl_now_ms();
    return ev->finished;
}

typedef struct verify_ctx {
    mxl_sched *s;
    slot *sl;
    tick_counts *tc;
    bool ended;
} verify_ctx;

static int verify_event(void *vctx, const mxl_seq_event *ev) {
    verify_ctx *v = vctx;
    v->ended = emit_event(v->s, v->sl, ev, v->tc);
    return v->ended;
}

/* The slot's own speculative round: its pending token and a draft through the model in one pass,
 * the picks streamed as they are made. False when the KV pool had no blocks for the pass (the
 * slot then takes the plain batched step, which can reclaim and preempt). */
static bool spec_round(mxl_sched *s, slot *sl, tick_counts *tc) {
    int32_t draft[MXL_SEQ_MAX_DRAFT];
    int n_draft = 0, acc = 0;
    size_t n_ids;
    const int32_t *ids = mxl_seq_tokens(sl->seq, &n_ids);
    mxl_error err = {0};
    const int room = mxl_seq_draft_room(sl->seq, MXL_SEQ_MAX_DRAFT);
    if (room > 0 && mxl_drafter_propose(sl->drafter, ids, n_ids, room, draft, &n_draft, &err)) {
        slot_release(s, sl, "error", err.msg);
        return true;
    }
    if (n_draft == 0) return false; /* nothing to verify: the plain batched step */
    verify_ctx v = {s, sl, tc, false};
    mxl_status st = mxl_seq_verify(sl->seq, draft, n_draft, verify_event, &v, &acc, &err);
    if (st == MXL_ERR_NOMEM && !v.ended) return false;
    mxl_drafter_observe(sl->drafter, n_draft, acc);
    pthread_mutex_lock(&s->mu);
    s->stats.spec_drafts++;
    s->stats.spec_draft_tokens += (uint64_t)n_draft;
    s->stats.spec_accepted += (uint64_t)acc;
    pthread_mutex_unlock(&s->mu);
    mxl_srv_channel *c = sl->j->ch;
    pthread_mutex_lock(&c->mu);
    c->draft_n += n_draft;
    c->draft_accepted += acc;
    pthread_mutex_unlock(&c->mu);
    if (v.ended) release_end(s, sl, NULL, NULL);
    else if (st) slot_release(s, sl, "error", err.msg);
    return true;
}

/* One decode step for every decoding slot: each samples its next token from its logits, then
 * the slots that go on run their tokens through the model together (one batched forward, so the
 * weights are read once for all of them). A slot back from preemption runs its pending token
 * first. With speculative decoding and few decoding rows, each slot instead runs its own
 * verification pass of a draft after its pick. */
static void decode_tick(mxl_sched *s) {
    double t0 = mxl_now_ms();
    tick_counts tc = {0, 0, 0};
    mxl_seq *feed[MXL_SEQ_MAX_BATCH];
    slot *feed_slot[MXL_SEQ_MAX_BATCH];
    int64_t n_feed = 0;
    int n_dec = 0;
    for (int i = 0; i < s->cfg.n_slots; i++) n_dec += s->slots[i].j && !s->slots[i].prefilling;
    const bool spec = s->cfg.draft && n_dec <= (s->cfg.spec_max_batch > 0 ? s->cfg.spec_max_batch : 2);
    for (int i = 0; i < s->cfg.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->j || sl->prefilling) continue;
        if (!mxl_seq_pending_feed(sl->seq)) {
            mxl_seq_event ev;
            mxl_error err = {0};
            if (mxl_seq_sample(sl->seq, &ev, &err)) {
                slot_release(s, sl, "error", err.msg);
                continue;
            }
            tc.busy++;
            if (emit_event(s, sl, &ev, &tc)) {
                release_end(s, sl, NULL, NULL);
                continue;
            }
        }
        if (spec && sl->drafter && spec_round(s, sl, &tc)) continue;
        feed[n_feed] = sl->seq;
        feed_slot[n_feed++] = sl;
    }
    feed_all(s, feed, feed_slot, n_feed);
    pthread_mutex_lock(&s->mu);
    if (tc.produced) s->stats.decode_ms_total += mxl_now_ms() - t0;
    if (tc.busy) {
        s->stats.n_decode_total++;
        s->stats.busy_slots_total += tc.busy;
    }
    if (tc.longest > s->stats.n_tokens_max) s->stats.n_tokens_max = tc.longest;
    pthread_mutex_unlock(&s->mu);
}

/* Copies the pool's counts into the stats. */
static void pool_stats(mxl_sched *s) {
    mxl_kv_pool_stats ps;
    mxl_kv_pool_get_stats(s->kvp, &ps);
    pthread_mutex_lock(&s->mu);
    s->stats.kv_blocks_total = ps.total;
    s->stats.kv_blocks_used = ps.used;
    s->stats.kv_blocks_cached = ps.cached;
    s->stats.kv_blocks_free = ps.free + ps.evictable;
    s->stats.kv_evictions = ps.evictions;
    s->stats.state_snaps_used = mxl_state_snaps_used(s->snaps);
    pthread_mutex_unlock(&s->mu);
}

/* Cancelled channels and the decode watchdog free their slots. */
static void reap(mxl_sched *s) {
    double now = mxl_now_ms();
    for (int i = 0; i < s->cfg.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->j) continue;
        if (atomic_load(&sl->j->ch->cancel)) slot_release(s, sl, "cancelled", NULL);
        else if (s->cfg.decode_timeout_s > 0 && now - sl->j->t_last > s->cfg.decode_timeout_s * 1e3)
            slot_release(s, sl, "error", "the request made no progress within --decode-timeout");
    }
}


/* --- slot persistence (POST /slots/{id}?action=...) --------------------------------------------- */

typedef struct slot_op {
    struct slot_op *next;
    int slot;
    mxl_sched_slot_op op;
    const char *path, *model_id;
    mxl_sched_slot_result res;
    mxl_status st;
    mxl_error err;
    bool done;
} slot_op;

/* The file: a header, the token ids, the blocks, the recurrent state, an FNV-1a checksum of all
 * that came before. Little-endian, fields as below. */
#define SLOT_MAGIC "MXLSLOT"
#define SLOT_VERSION 1u
typedef struct slot_header {
    char magic[8];          /* "MXLSLOT\0" */
    uint32_t version, model_len; /* model_len: bytes of the model id after the header */
    uint64_t n_vocab, n_layers, kv_dim, group, k_type, v_type, v_in_k, block_bytes, rec_bytes;
    uint64_t n_tokens;
} slot_header;

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static void fill_header(const mxl_sched *s, const char *model_id, int64_t n, slot_header *h) {
    const mxl_kv_pool_cfg *c = mxl_kv_pool_config(s->kvp);
    memset(h, 0, sizeof *h);
    memcpy(h->magic, SLOT_MAGIC, sizeof SLOT_MAGIC);
    h->version = SLOT_VERSION;
    h->model_len = (uint32_t)strlen(model_id);
    h->n_vocab = (uint64_t)mxl_gen_model_vocab(s->m);
    h->n_layers = (uint64_t)c->n_layers, h->kv_dim = (uint64_t)c->kv_dim, h->group = (uint64_t)c->group;
    h->k_type = (uint64_t)c->k_type, h->v_type = (uint64_t)c->v_type, h->v_in_k = c->v_in_k;
    h->block_bytes = mxl_kv_pool_block_bytes(c);
    h->rec_bytes = mxl_decoder_state_rec_bytes(slot_kv(&s->slots[0]));
    h->n_tokens = (uint64_t)n;
}

static bool put(FILE *f, uint64_t *sum, const void *p, size_t n) {
    *sum = fnv1a(*sum, p, n);
    return fwrite(p, 1, n, f) == n;
}

static mxl_status slot_save(mxl_sched *s, slot *sl, slot_op *o) {
    size_t n_ids = 0;
    const int32_t *ids = mxl_seq_tokens(sl->seq, &n_ids);
    int64_t n = mxl_decoder_state_pos(slot_kv(sl));
    if (n > (int64_t)n_ids) n = (int64_t)n_ids;
    slot_header h;
    fill_header(s, o->model_id, n, &h);
    const int32_t *table = NULL;
    mxl_decoder_state_blocks(slot_kv(sl), &table);
    void *buf = mxl_malloc(h.block_bytes > h.rec_bytes ? h.block_bytes : h.rec_bytes ? h.rec_bytes : 1);
    if (!buf) return mxl_error_set(&o->err, MXL_ERR_NOMEM, "out of memory");
    /* written beside it and renamed over it when whole: a symlink or hard link of that name is
     * replaced, never written through (limits.h) */
    char tmp[4200];
    int fd = mxl_srv_create_beside(o->path, tmp, sizeof tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd), remove(tmp);
        mxl_free(buf);
        return mxl_error_set(&o->err, MXL_ERR_IO, "cannot write the slot file: %s", strerror(e));
    }
    uint64_t sum = 0xcbf29ce484222325ull;
    bool ok = put(f, &sum, &h, sizeof h) && put(f, &sum, o->model_id, h.model_len) && put(f, &sum, ids, (size_t)n * sizeof *ids);
    for (int64_t b = 0; ok && b < blocks_for(n); b++) {
        mxl_kv_pool_block_save(s->kvp, table[b], buf);
        ok = put(f, &sum, buf, h.block_bytes);
    }
    if (ok && h.rec_bytes) {
        mxl_decoder_state_rec_save(slot_kv(sl), buf);
        ok = put(f, &sum, buf, h.rec_bytes);
    }
    ok = ok && fwrite(&sum, sizeof sum, 1, f) == 1;
    long size = ok ? ftell(f) : -1;
    ok = (fclose(f) == 0) && ok;
    ok = ok && rename(tmp, o->path) == 0;
    mxl_free(buf);
    if (!ok) {
        remove(tmp);
        return mxl_error_set(&o->err, MXL_ERR_IO, "cannot write the slot file (disk full?)");
    }
    o->res.n_tokens = n;
    o->res.n_bytes = (uint64_t)size;
    return MXL_OK;
}

/* Reads the whole file and checks it against this model; *data owns it. */
static mxl_status slot_read(mxl_sched *s, slot_op *o, uint8_t **data, slot_header *h) {
    *data = NULL;
    /* a regular file, not read through a symlink (limits.h) */
    int fd = mxl_srv_open_regular(o->path);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        return mxl_error_set(&o->err, MXL_ERR_ARG, "cannot open the slot file: %s",
                             e == ELOOP ? "it is a symlink (not followed)" : e == EINVAL ? "not a regular file" : strerror(e));
    }
    slot_header want;
    fill_header(s, o->model_id, 0, &want);
    mxl_status st = MXL_OK;
    if (fread(h, sizeof *h, 1, f) != 1 || memcmp(h->magic, SLOT_MAGIC, sizeof SLOT_MAGIC) != 0) {
        st = mxl_error_set(&o->err, MXL_ERR_ARG, "not a slot file (no MXLSLOT header)");
        goto out;
    }
    if (h->version != SLOT_VERSION) {
        st = mxl_error_set(&o->err, MXL_ERR_ARG, "slot file version %u; this build reads version %u", h->version, SLOT_VERSION);
        goto out;
    }
    char model[512] = "";
    if (h->model_len >= sizeof model || fread(model, 1, h->model_len, f) != h->model_len) {
        st = mxl_error_set(&o->err, MXL_ERR_ARG, "the slot file is truncated or corrupt");
        goto out;
    }
    model[h->model_len] = 0;
    if (strcmp(model, o->model_id) != 0 || h->n_vocab != want.n_vocab || h->n_layers != want.n_layers || h->kv_dim != want.kv_dim ||
        h->block_bytes != want.block_bytes || h->rec_bytes != want.rec_bytes || h->v_in_k != want.v_in_k) {
        st = mxl_error_set(&o->err, MXL_ERR_ARG, "the slot file was saved by another model (%s) than this server's (%s)", model, o->model_id);
        goto out;
    }
    if (h->k_type != want.k_type || h->v_type != want.v_type || h->group != want.group) {
        st = mxl_error_set(&o->err, MXL_ERR_ARG, "the slot file holds another KV cache type than this server's (--cache-type-k / --cache-type-v)");
        goto out;
    }
    if (h->n_tokens >= (uint64_t)s->cfg.slot_ctx) {
        st = mxl_error_set(&o->err, MXL_ERR_ARG, "the slot file holds %llu tokens, more than the slot's context of %lld",
                           (unsigned long long)h->n_tokens, (long long)s->cfg.slot_ctx);
        goto out;
    }
    /* sizes: bounded by the context check above, so no product overflows */
    uint64_t rest = h->n_tokens * 4 + (uint64_t)blocks_for((int64_t)h->n_tokens) * h->block_bytes + h->rec_bytes + 8;
    if (fseek(f, 0, SEEK_END) != 0 || ftell(f) < 0 || (uint64_t)ftell(f) != sizeof *h + h->model_len + rest) {
        st = mxl_error_set(&o->err, MXL_ERR_ARG, "the slot file is truncated or corrupt (its size is not what its header says)");
        goto out;
    }
    fseek(f, (long)(sizeof *h + h->model_len), SEEK_SET);
    *data = mxl_malloc(rest);
    if (!*data) {
        st = mxl_error_set(&o->err, MXL_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (fread(*data, 1, rest, f) != rest) {
        st = mxl_error_set(&o->err, MXL_ERR_ARG, "the slot file is truncated or corrupt");
        goto out;
    }
    uint64_t sum = fnv1a(fnv1a(0xcbf29ce484222325ull, h, sizeof *h), model, h->model_len), stored;
    sum = fnv1a(sum, *data, rest - 8);
    memcpy(&stored, *data + rest - 8, 8);
    if (sum != stored) {
        st = mxl_error_set(&o->err, MXL_ERR_ARG, "the slot file is corrupt (checksum mismatch)");
        goto out;
    }
    const int32_t *ids = (const int32_t *)*data;
    for (uint64_t i = 0; i < h->n_tokens; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= h->n_vocab) {
            st = mxl_error_set(&o->err, MXL_ERR_ARG, "the slot file holds a token id outside the vocabulary");
            goto out;
        }
    o->res.n_bytes = sizeof *h + h->model_len + rest;
out:
    fclose(f);
    if (st) mxl_free(*data), *data = NULL;
    return st;
}

static mxl_status slot_restore(mxl_sched *s, slot *sl, slot_op *o) {
    uint8_t *data = NULL;
    slot_header h;
    mxl_status st = slot_read(s, o, &data, &h);
    if (st) return st;
    const int64_t n = (int64_t)h.n_tokens, nb = blocks_for(n);
    const int32_t *ids = (const int32_t *)data;
    const uint8_t *blocks = data + n * 4, *rec = h.rec_bytes ? blocks + nb * h.block_bytes : NULL;
    int32_t *table = mxl_malloc((size_t)(nb ? nb : 1) * sizeof *table);
    if (!table) {
        mxl_free(data);
        return mxl_error_set(&o->err, MXL_ERR_NOMEM, "out of memory");
    }
    mxl_seq_preempt(sl->seq); /* the slot's own cache goes */
    int64_t got = 0;
    while (got < nb) {
        mxl_error e = {0};
        if (mxl_kv_pool_alloc(s->kvp, &table[got], &e) == MXL_OK) {
            mxl_kv_pool_block_load(s->kvp, table[got], blocks + got * h.block_bytes);
            got++;
        } else if (!reclaim_idle(s, sl)) {
            break;
        }
    }
    if (got < nb) st = mxl_error_set(&o->err, MXL_ERR_UNSUPPORTED, "no room in the KV cache for the %lld tokens of the slot file", (long long)n);
    else if (n > 0) st = mxl_seq_adopt_prefix(sl->seq, table, ids, (size_t)n, rec, &o->err);
    for (int64_t i = 0; i < got; i++) mxl_kv_pool_release(s->kvp, table[i]); /* the slot holds its own references */
    mxl_free(table);
    mxl_free(data);
    if (st) return st;
    sl->seed = mxl_kv_pool_chain_seed(NULL); /* a request without prompt_cache_key or adapters reuses it */
    sl->t_start = mxl_now_ms();
    publish_slot(s, sl);
    o->res.n_tokens = n;
    return MXL_OK;
}

/* Runs the actions whose slot is idle (the others wait for their slot's job to end). */
static void run_slot_ops(mxl_sched *s) {
    for (;;) {
        pthread_mutex_lock(&s->mu);
        slot_op **pp = &s->ops, *o = NULL;
        for (; *pp; pp = &(*pp)->next)
            if (!s->slots[(*pp)->slot].j) {
                o = *pp;
                *pp = o->next;
                break;
            }
        pthread_mutex_unlock(&s->mu);
        if (!o) return;
        slot *sl = &s->slots[o->slot];
        double t0 = mxl_now_ms();
        mxl_status st = MXL_OK;
        if (o->op == MXL_SCHED_SLOT_SAVE) st = slot_save(s, sl, o);
        else if (o->op == MXL_SCHED_SLOT_RESTORE) st = slot_restore(s, sl, o);
        else {
            size_t n = 0;
            mxl_seq_tokens(sl->seq, &n);
            int64_t pos = mxl_decoder_state_pos(slot_kv(sl));
            o->res.n_tokens = pos < (int64_t)n ? pos : (int64_t)n;
            mxl_seq_preempt(sl->seq);
        }
        o->res.ms = mxl_now_ms() - t0;
        pool_stats(s);
        pthread_mutex_lock(&s->mu);
        o->st = st;
        o->done = true;
        pthread_cond_broadcast(&s->op_cv);
        pthread_mutex_unlock(&s->mu);
    }
}

mxl_status mxl_sched_slot_action(mxl_sched *s, int slot_id, mxl_sched_slot_op op, const char *path, const char *model_id,
                                 mxl_sched_slot_result *res, mxl_error *err) {
    if (slot_id < 0 || slot_id >= s->cfg.n_slots) return mxl_error_set(err, MXL_ERR_ARG, "Invalid slot ID");
    slot_op o = {.slot = slot_id, .op = op, .path = path, .model_id = model_id};
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "the server is shutting down");
    }
    slot_op **pp = &s->ops;
    while (*pp) pp = &(*pp)->next;
    *pp = &o;
    pthread_cond_signal(&s->cv);
    while (!o.done) pthread_cond_wait(&s->op_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    *res = o.res;
    if (o.st) *err = o.err;
    return o.st;
}

bool mxl_sched_idle(mxl_sched *s) {
    pthread_mutex_lock(&s->mu);
    bool idle = !s->q_head && s->stats.busy == 0 && !s->ops;
    pthread_mutex_unlock(&s->mu);
    return idle;
}

static void *engine_main(void *arg) {
    mxl_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && !s->q_head && s->stats.busy == 0 && !s->ops) pthread_cond_wait(&s->cv, &s->mu);
        bool stop = s->stopping, ops = s->ops != NULL;
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
        if (ops) run_slot_ops(s);
        mxl_kv_pool_set_clock(s->kvp, mxl_now_ms() / 1e3);
        trim_cache(s);
        reap(s);
        admit(s);
        bool decoding = any_decoding(s);
        /* prefill first unless decodes are running and the prefill has not waited long enough */
        bool prefill_now = true;
        if (decoding) {
            prefill_now = false;
            for (int i = 0; i < s->cfg.n_slots; i++) {
                slot *sl = &s->slots[i];
                if (sl->j && sl->prefilling && (s->cfg.grant_interval <= 0 || ++sl->waited >= s->cfg.grant_interval ||
                                                 mxl_seq_prefill_left(sl->seq) <= 512))
                    prefill_now = true;
            }
        }
        if (prefill_now) prefill_tick(s, decoding);
        decode_tick(s);
        pool_stats(s);
    }
    /* shutting down: slot actions fail, everything still waiting or running ends as cancelled */
    pthread_mutex_lock(&s->mu);
    for (struct slot_op *o = s->ops; o; o = o->next) {
        o->st = mxl_error_set(&o->err, MXL_ERR_UNSUPPORTED, "the server is shutting down");
        o->done = true;
    }
    s->ops = NULL;
    pthread_cond_broadcast(&s->op_cv);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->cfg.n_slots; i++)
        if (s->slots[i].j) slot_release(s, &s->slots[i], "cancelled", "the server is shutting down");
    pthread_mutex_lock(&s->mu);
    job *j = s->q_head;
    s->q_head = s->q_tail = NULL;
    s->q_len = 0;
    pthread_mutex_unlock(&s->mu);
    while (j) {
        job *n = j->next;
        job_end(j, "cancelled", "the server is shutting down");
        j = n;
    }
    return NULL;
}

/* The pool: --kv-cache-budget bytes (less every slot's recurrent state and the prompt cache's
 * state snapshots - two per slot, fewer when the budget or the cache capacity holds fewer - for
 * recurrent families);
 * auto: every slot's full context plus the prompt-cache capacity, capped at half the physical
 * memory (but never below one slot's context); none: the same without the cap. */
static mxl_status kv_pool_create(mxl_sched *s, mxl_gen_model *m, mxl_error *err) {
    mxl_kv_pool_cfg pc;
    mxl_status st = mxl_seq_kv_pool_cfg(m, 1, &pc, err);
    if (st) return st;
    uint64_t bb = mxl_kv_pool_block_bytes(&pc);
    if (bb == 0) return mxl_error_set(err, MXL_ERR_INTERNAL, "KV block size overflows");
    int64_t slot_blocks = blocks_for(s->cfg.slot_ctx);
    uint64_t cap_bytes = s->cfg.cache_capacity_bytes > 0 ? (uint64_t)s->cfg.cache_capacity_bytes : (uint64_t)2 << 30;
    int64_t cache_blocks = s->cfg.prompt_cache ? (int64_t)(cap_bytes / bb) : 0;
    if (s->cfg.cache_max_entries > 0 && cache_blocks > s->cfg.cache_max_entries) cache_blocks = s->cfg.cache_max_entries;
    s->cache_keep = cache_blocks;
    int64_t n;
    const uint64_t one = mxl_gen_model_state_bytes(m);
    s->n_snaps = one > 0 && s->cfg.prompt_cache ? 2 * s->cfg.n_slots : 0;
    while (s->n_snaps > 0 && one * (uint64_t)s->n_snaps > cap_bytes) s->n_snaps--;
    if (s->cfg.kv_budget > 0) {
        /* the slots' recurrent state (recurrent families) comes out of the budget first, then
         * the snapshots, as many as leave one block */
        const uint64_t state = one * (uint64_t)s->cfg.n_slots;
        if (state >= (uint64_t)s->cfg.kv_budget)
            return mxl_error_set(err, MXL_ERR_ARG, "--kv-cache-budget %lld does not hold the recurrent state of %d slots (%llu bytes)",
                                 (long long)s->cfg.kv_budget, s->cfg.n_slots, (unsigned long long)state);
        while (s->n_snaps > 0 && state + one * (uint64_t)s->n_snaps + bb > (uint64_t)s->cfg.kv_budget) s->n_snaps--;
        n = (int64_t)(((uint64_t)s->cfg.kv_budget - state - one * (uint64_t)s->n_snaps) / bb);
        if (n < 1)
            return mxl_error_set(err, MXL_ERR_ARG, "--kv-cache-budget %lld is smaller than one KV block (%llu bytes for %d positions)",
                                 (long long)s->cfg.kv_budget, (unsigned long long)bb, MXL_KV_BLOCK);
    } else {
        n = slot_blocks * s->cfg.n_slots + cache_blocks;
        if (s->cfg.kv_budget == 0) {
            long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
            int64_t cap = pages > 0 && psz > 0 ? (int64_t)((uint64_t)pages * (uint64_t)psz / 2 / bb) : n;
            if (cap < slot_blocks) cap = slot_blocks;
            if (n > cap) n = cap;
        }
    }
    if (n > (INT64_C(1) << 30)) n = INT64_C(1) << 30;
    s->n_blocks = n;
    /* the watermark guards a budget; with none it is ignored (the spec) */
    s->watermark_blocks = s->cfg.kv_budget == MXL_SCHED_KV_NONE ? 0 : (int64_t)ceil(s->cfg.kv_watermark * (double)n);
    pc.n_blocks = n;
    s->hits = mxl_malloc((size_t)slot_blocks * sizeof *s->hits);
    s->hit_chain = mxl_malloc((size_t)slot_blocks * sizeof *s->hit_chain);
    if (!s->hits || !s->hit_chain) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    if ((st = mxl_kv_pool_create(&pc, &s->kvp, err))) return st;
    pthread_mutex_lock(&s->mu);
    s->stats.kv_block_bytes = bb;
    pthread_mutex_unlock(&s->mu);
    return MXL_OK;
}

mxl_status mxl_sched_create(mxl_gen_model *m, const mxl_sched_config *cfg, mxl_sched **out, mxl_error *err) {
    *out = NULL;
    mxl_sched *s = mxl_calloc(1, sizeof *s);
    if (!s) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    s->m = m;
    s->cfg = *cfg;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->op_cv, NULL);
    s->slots = mxl_calloc((size_t)cfg->n_slots, sizeof *s->slots);
    if (!s->slots) {
        mxl_sched_destroy(s);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    s->stats.n_slots = cfg->n_slots;
    if (cfg->n_slots > MXL_SEQ_MAX_BATCH) {
        mxl_sched_destroy(s);
        return mxl_error_set(err, MXL_ERR_ARG, "at most %d slots", MXL_SEQ_MAX_BATCH);
    }
    /* 64-byte aligned: a batch's logits are written with non-temporal stores (quant_amx.c) */
    s->logits = mxl_aligned_alloc(64, ((size_t)cfg->n_slots * (size_t)mxl_gen_model_vocab(m) * sizeof(float) + 63) & ~(size_t)63);
    s->tok_scratch = mxl_malloc(PREFILL_BATCH_ROWS * sizeof(int32_t));
    if (mxl_gen_model_vlm(m) && cfg->vision_cache_size > 0 && !(s->vcache = mxl_vision_cache_create(cfg->vision_cache_size))) {
        mxl_sched_destroy(s);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    if (!s->logits || !s->tok_scratch) {
        mxl_sched_destroy(s);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    mxl_status st = kv_pool_create(s, m, err);
    if (st) {
        mxl_sched_destroy(s);
        return st;
    }
    for (int i = 0; i < cfg->n_slots; i++) {
        s->slots[i].id = i;
        st = mxl_seq_create_pooled(m, s->kvp, cfg->slot_ctx, PREFILL_BATCH_ROWS, &s->slots[i].seq, err);
        if (st) {
            mxl_sched_destroy(s);
            return st;
        }
    }
    for (int i = 0; cfg->draft && i < cfg->n_slots; i++)
        if ((st = mxl_drafter_create(cfg->draft, cfg->slot_ctx, mxl_gen_model_pool(m), &s->slots[i].drafter, err))) {
            mxl_sched_destroy(s);
            return st;
        }
    const uint64_t state = mxl_decoder_state_rec_bytes(mxl_seq_kv_state(s->slots[0].seq));
    s->shared_cache = cfg->prompt_cache;
    s->recurrent = state > 0;
    if (s->recurrent && s->n_snaps > 0 && (st = mxl_state_snaps_create(s->n_snaps, (size_t)state, &s->snaps, err))) {
        mxl_sched_destroy(s);
        return st;
    }
    s->stats.state_bytes = state * (uint64_t)cfg->n_slots;
    s->stats.state_snap_bytes = mxl_state_snaps_bytes(s->snaps);
    pool_stats(s);
    if (pthread_create(&s->thread, NULL, engine_main, s) != 0) {
        mxl_sched_destroy(s);
        return mxl_error_set(err, MXL_ERR_INTERNAL, "cannot start the engine thread");
    }
    s->thread_started = true;
    *out = s;
    return MXL_OK;
}

void mxl_sched_destroy(mxl_sched *s) {
    if (!s) return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stopping = true;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    if (s->slots)
        for (int i = 0; i < s->cfg.n_slots; i++) mxl_seq_destroy(s->slots[i].seq), mxl_drafter_destroy(s->slots[i].drafter);
    mxl_kv_pool_destroy(s->kvp);
    mxl_free(s->hits);
    mxl_free(s->hit_chain);
    mxl_state_snaps_destroy(s->snaps);
    mxl_vision_cache_destroy(s->vcache);
    mxl_free(s->slots);
    mxl_aligned_free(s->logits);
    mxl_free(s->tok_scratch);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->op_cv);
    mxl_free(s);
}

void mxl_sched_stats_carry(mxl_sched_stats *to, const mxl_sched_stats *from) {
    to->prompt_tokens_total += from->prompt_tokens_total;
    to->prompt_tokens_cached_total += from->prompt_tokens_cached_total;
    to->tokens_predicted_total += from->tokens_predicted_total;
    to->requests_done += from->requests_done;
    to->requests_started += from->requests_started;
    to->cache_hits += from->cache_hits;
    to->n_decode_total += from->n_decode_total;
    to->busy_slots_total += from->busy_slots_total;
    if (from->n_tokens_max > to->n_tokens_max) to->n_tokens_max = from->n_tokens_max;
    to->prompt_ms_total += from->prompt_ms_total;
    to->decode_ms_total += from->decode_ms_total;
    to->cache_block_hit_tokens += from->cache_block_hit_tokens;
    to->kv_evictions += from->kv_evictions;
    to->preemptions += from->preemptions;
    to->spec_drafts += from->spec_drafts;
    to->vision_encodes += from->vision_encodes;
    to->vision_cache_hits += from->vision_cache_hits;
    to->spec_draft_tokens += from->spec_draft_tokens;
    to->spec_accepted += from->spec_accepted;
}

void mxl_sched_get_stats(mxl_sched *s, mxl_sched_stats *st, mxl_sched_slot_info *slots, int max_slots) {
    pthread_mutex_lock(&s->mu);
    *st = s->stats;
    st->queued = s->q_len;
    /* busy as release_begin left it (a request answered is not processing when its client asks
     * next); the sequences' counts are read racily (monotonic, informational) */
    for (int i = 0; i < s->cfg.n_slots && i < max_slots; i++) {
        slots[i].busy = s->slots[i].running;
        slots[i].id = i;
        slots[i].n_ctx = s->cfg.slot_ctx;
        slots[i].n_prompt = slots[i].busy ? mxl_seq_n_prompt(s->slots[i].seq) : 0;
        slots[i].n_decoded = slots[i].busy ? mxl_seq_n_generated(s->slots[i].seq) : 0;
        slots[i].n_remain = slots[i].busy ? mxl_seq_n_remaining(s->slots[i].seq) : -1;
        slots[i].state_bytes = s->stats.state_bytes / (uint64_t)s->cfg.n_slots;
    }
    pthread_mutex_unlock(&s->mu);
}

int64_t mxl_sched_slot_ctx(const mxl_sched *s) { return s->cfg.slot_ctx; }
