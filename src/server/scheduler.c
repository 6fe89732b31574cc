/* scheduler.c - slots, queue and the engine loop (scheduler.h). */
#include "server/scheduler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* --- channels -------------------------------------------------------------------------------- */

mxl_srv_channel *mxl_srv_channel_create(int n_jobs) {
    mxl_srv_channel *c = calloc(1, sizeof *c);
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
    c->t_submit = now_ms();
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
    free(c->ev);
    free(c->text);
    free(c);
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
        mxl_srv_event *p = realloc(c->ev, cap * sizeof *p);
        if (p) c->ev = p, c->cap_ev = cap;
        else ok = false;
    }
    if (ok && c->text_len + len + 1 > c->text_cap) {
        size_t cap = c->text_cap ? c->text_cap : 1024;
        while (cap < c->text_len + len + 1) cap *= 2;
        char *p = realloc(c->text, cap);
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
            if (mxl_srv_channel_done(c)) c->t_end = now_ms();
        }
    } else if (e->final) {
        c->n_final++;
        snprintf(c->error, sizeof c->error, "out of memory");
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
    double t_last; /* last progress, for the decode watchdog */
} job;

typedef struct slot {
    int id;
    mxl_seq *seq;
    job *j;          /* NULL: free */
    bool prefilling;
    int waited;      /* ticks this prefill yielded to decodes */
    double t_start;
} slot;

struct mxl_sched {
    mxl_gen_model *m;
    mxl_sched_config cfg;
    slot *slots;
    float *logits; /* [n_slots, vocab] scratch of the batched decode step */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    job *q_head, *q_tail;
    int q_len;
    mxl_sched_stats stats; /* counters under mu */
};

static void job_free(job *j) {
    if (!j) return;
    for (size_t i = 0; i < MXL_SEQ_MAX_STOP; i++) free(j->stops[i]);
    for (size_t i = 0; i < 32; i++) free(j->breakers[i]);
    free(j->bias);
    free(j->prompt);
    mxl_srv_channel_unref(j->ch);
    free(j);
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
    if (n == 0) return mxl_error_set(err, MXL_ERR_ARG, "the prompt is empty");
    if ((int64_t)n >= s->cfg.slot_ctx)
        return mxl_error_set(err, MXL_ERR_ARG, "the prompt has %zu tokens, which does not fit the context of %lld tokens per slot",
                             n, (long long)s->cfg.slot_ctx);
    job *j = calloc(1, sizeof *j);
    if (!j) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    j->prompt = malloc(n * sizeof(int32_t));
    j->params = *p;
    bool ok = j->prompt != NULL;
    for (size_t i = 0; i < p->n_stop && i < MXL_SEQ_MAX_STOP && ok; i++) {
        j->stops[i] = strdup(p->stop[i]);
        j->params.stop[i] = j->stops[i];
        ok = j->stops[i] != NULL;
    }
    /* the DRY breakers and the logit biases point into the request too */
    if (ok && p->sampling.dry_breakers && p->sampling.n_dry_breakers <= 32) {
        for (size_t i = 0; i < p->sampling.n_dry_breakers && ok; i++) {
            j->breakers[i] = strdup(p->sampling.dry_breakers[i]);
            j->params.breakers[i] = j->breakers[i];
            ok = j->breakers[i] != NULL;
        }
        j->params.n_breakers = p->sampling.n_dry_breakers;
        j->params.sampling.dry_breakers = j->params.breakers;
    }
    if (ok && p->sampling.n_logit_bias) {
        j->bias = malloc(p->sampling.n_logit_bias * sizeof *j->bias);
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

static void slot_release(mxl_sched *s, slot *sl, const char *reason, const char *error) {
    job *j = sl->j;
    sl->j = NULL;
    sl->prefilling = false;
    pthread_mutex_lock(&s->mu);
    s->stats.busy--;
    s->stats.requests_done++;
    pthread_mutex_unlock(&s->mu);
    if (reason) job_end(j, reason, error);
    else job_free(j);
}

/* Starts queued jobs in free slots (FIFO). */
/* A prefill progress event for the slot's job, when its channel asked for them. */
static void push_progress(slot *sl, bool first) {
    job *j = sl->j;
    if (!j->ch->want_progress) return;
    mxl_srv_event e = {.index = j->index, .token = -1, .progress = true};
    e.p_total = mxl_seq_n_prompt(sl->seq);
    e.p_cache = mxl_seq_n_cached(sl->seq);
    e.p_processed = e.p_total - mxl_seq_prefill_left(sl->seq);
    e.p_ms = first ? 0.0 : now_ms() - sl->t_start; /* the first report comes before any work */
    channel_push(j->ch, &e, "", 0);
}

/* The free slot whose cached tokens share the longest prefix with the prompt (the prompt cache
 * then skips that prefix); when none shares anything, the free slot used least recently, so
 * other conversations' caches survive longest. NULL: none free. */
static slot *pick_slot(mxl_sched *s, const job *j) {
    slot *best = NULL, *lru = NULL;
    size_t best_len = 0;
    for (int i = 0; i < s->cfg.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->j) continue;
        size_t n, k = 0;
        const int32_t *ids = mxl_seq_tokens(sl->seq, &n);
        while (k < n && k < j->n_prompt && ids[k] == j->prompt[k]) k++;
        if (k > best_len) best = sl, best_len = k;
        if (!lru || sl->t_start < lru->t_start) lru = sl;
    }
    return best ? best : lru;
}

static void admit(mxl_sched *s) {
    for (;;) {
        pthread_mutex_lock(&s->mu);
        slot *sl = s->q_head ? pick_slot(s, s->q_head) : NULL;
        if (!sl) {
            pthread_mutex_unlock(&s->mu);
            return;
        }
        job *j = s->q_head;
        if (j) {
            s->q_head = j->next;
            if (!s->q_head) s->q_tail = NULL;
            s->q_len--;
            s->stats.busy++;
        }
        pthread_mutex_unlock(&s->mu);
        j->next = NULL;
        sl->j = j;
        if (atomic_load(&j->ch->cancel)) {
            slot_release(s, sl, "cancelled", NULL);
            continue;
        }
        mxl_error err = {0};
        if (mxl_seq_start(sl->seq, j->prompt, j->n_prompt, &j->params, &err)) {
            slot_release(s, sl, "error", err.msg);
            continue;
        }
        pthread_mutex_lock(&j->ch->mu);
        if (j->index == 0) {
            j->ch->slot_id = sl->id;
            j->ch->prompt_tokens = (int64_t)j->n_prompt;
            j->ch->cached_tokens = mxl_seq_n_cached(sl->seq);
            j->ch->t_admit = now_ms();
        }
        pthread_mutex_unlock(&j->ch->mu);
        pthread_mutex_lock(&s->mu);
        s->stats.prompt_tokens_cached_total += (uint64_t)mxl_seq_n_cached(sl->seq);
        s->stats.requests_started++;
        if (mxl_seq_n_cached(sl->seq) > 0) s->stats.cache_hits++;
        pthread_mutex_unlock(&s->mu);
        sl->prefilling = true;
        sl->waited = 0;
        sl->t_start = now_ms();
        j->t_last = sl->t_start;
        push_progress(sl, true);
    }
}

static bool any_decoding(const mxl_sched *s) {
    for (int i = 0; i < s->cfg.n_slots; i++)
        if (s->slots[i].j && !s->slots[i].prefilling) return true;
    return false;
}

/* One prefill chunk for the prefilling slot that started first. */
static void prefill_tick(mxl_sched *s, bool decoding) {
    slot *best = NULL;
    for (int i = 0; i < s->cfg.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->j && sl->prefilling && (!best || sl->t_start < best->t_start)) best = sl;
    }
    if (!best) return;
    int64_t chunk = s->cfg.prefill_chunk > 0 ? s->cfg.prefill_chunk : decoding ? 512 : 2048;
    double t0 = now_ms();
    mxl_error err = {0};
    if (mxl_seq_prefill(best->seq, chunk, &err)) {
        slot_release(s, best, "error", err.msg);
        return;
    }
    double t1 = now_ms();
    best->j->t_last = t1;
    best->waited = 0;
    push_progress(best, false);
    pthread_mutex_lock(&s->mu);
    s->stats.prompt_ms_total += t1 - t0;
    pthread_mutex_unlock(&s->mu);
    if (mxl_seq_prefill_left(best->seq) == 0) {
        best->prefilling = false;
        pthread_mutex_lock(&s->mu);
        s->stats.prompt_tokens_total += (uint64_t)(mxl_seq_n_prompt(best->seq) - mxl_seq_n_cached(best->seq));
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_lock(&best->j->ch->mu);
        if (best->j->index == 0) best->j->ch->t_prefill_done = t1;
        pthread_mutex_unlock(&best->j->ch->mu);
    }
}

/* One decode step for every decoding slot: each samples its next token from its logits, then
 * the slots that go on run their tokens through the model together (one batched forward, so the
 * weights are read once for all of them). */
static void decode_tick(mxl_sched *s) {
    double t0 = now_ms();
    uint64_t produced = 0, busy = 0;
    int64_t longest = 0;
    mxl_seq *feed[MXL_SEQ_MAX_BATCH];
    slot *feed_slot[MXL_SEQ_MAX_BATCH];
    int64_t n_feed = 0;
    for (int i = 0; i < s->cfg.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->j || sl->prefilling) continue;
        mxl_seq_event ev;
        mxl_error err = {0};
        if (mxl_seq_sample(sl->seq, &ev, &err)) {
            slot_release(s, sl, "error", err.msg);
            continue;
        }
        mxl_srv_event e = {.index = sl->j->index, .token = ev.token, .final = ev.finished,
                           .finish_reason = ev.finish_reason, .stop_word = NULL, .logprob = ev.logprob, .n_top = ev.n_top};
        if (ev.stop_word) /* point at the job's own copy, which lives as long as the job */
            for (size_t k = 0; k < MXL_SEQ_MAX_STOP; k++)
                if (sl->j->stops[k] && strcmp(sl->j->stops[k], ev.stop_word) == 0) e.stop_word = sl->j->stops[k];
        memcpy(e.top_ids, ev.top_ids, sizeof e.top_ids);
        memcpy(e.top_logprobs, ev.top_logprobs, sizeof e.top_logprobs);
        if (ev.token >= 0) produced++;
        busy++;
        int64_t held = mxl_seq_n_prompt(sl->seq) + mxl_seq_n_generated(sl->seq);
        if (held > longest) longest = held;
        channel_push(sl->j->ch, &e, ev.text, ev.text_len);
        sl->j->t_last = now_ms();
        if (ev.finished) {
            slot_release(s, sl, NULL, NULL);
            continue;
        }
        feed[n_feed] = sl->seq;
        feed_slot[n_feed++] = sl;
    }
    mxl_error err = {0};
    if (n_feed && mxl_seq_feed_batch(feed, n_feed, s->logits, &err)) {
        /* the batch left every sequence unchanged: run them one by one to pin the failure down */
        for (int64_t i = 0; i < n_feed; i++) {
            mxl_error e1 = {0};
            if (mxl_seq_feed(feed[i], &e1)) slot_release(s, feed_slot[i], "error", e1.msg);
        }
    }
    pthread_mutex_lock(&s->mu);
    s->stats.tokens_predicted_total += produced;
    if (produced) s->stats.decode_ms_total += now_ms() - t0;
    if (busy) {
        s->stats.n_decode_total++;
        s->stats.busy_slots_total += busy;
    }
    if (longest > s->stats.n_tokens_max) s->stats.n_tokens_max = longest;
    pthread_mutex_unlock(&s->mu);
}

/* Cancelled channels and the decode watchdog free their slots. */
static void reap(mxl_sched *s) {
    double now = now_ms();
    for (int i = 0; i < s->cfg.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->j) continue;
        if (atomic_load(&sl->j->ch->cancel)) slot_release(s, sl, "cancelled", NULL);
        else if (s->cfg.decode_timeout_s > 0 && now - sl->j->t_last > s->cfg.decode_timeout_s * 1e3)
            slot_release(s, sl, "error", "the request made no progress within --decode-timeout");
    }
}

static void *engine_main(void *arg) {
    mxl_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && !s->q_head && s->stats.busy == 0) pthread_cond_wait(&s->cv, &s->mu);
        bool stop = s->stopping;
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
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
    }
    /* shutting down: everything still waiting or running ends as cancelled */
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

mxl_status mxl_sched_create(mxl_gen_model *m, const mxl_sched_config *cfg, mxl_sched **out, mxl_error *err) {
    *out = NULL;
    mxl_sched *s = calloc(1, sizeof *s);
    if (!s) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    s->m = m;
    s->cfg = *cfg;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->slots = calloc((size_t)cfg->n_slots, sizeof *s->slots);
    if (!s->slots) {
        mxl_sched_destroy(s);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    s->stats.n_slots = cfg->n_slots;
    if (cfg->n_slots > MXL_SEQ_MAX_BATCH) {
        mxl_sched_destroy(s);
        return mxl_error_set(err, MXL_ERR_ARG, "at most %d slots", MXL_SEQ_MAX_BATCH);
    }
    s->logits = malloc((size_t)cfg->n_slots * (size_t)mxl_gen_model_vocab(m) * sizeof(float));
    if (!s->logits) {
        mxl_sched_destroy(s);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < cfg->n_slots; i++) {
        s->slots[i].id = i;
        mxl_status st = mxl_seq_create(m, cfg->slot_ctx, 512, &s->slots[i].seq, err);
        if (st) {
            mxl_sched_destroy(s);
            return st;
        }
    }
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
        for (int i = 0; i < s->cfg.n_slots; i++) mxl_seq_destroy(s->slots[i].seq);
    free(s->slots);
    free(s->logits);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

void mxl_sched_get_stats(mxl_sched *s, mxl_sched_stats *st, mxl_sched_slot_info *slots, int max_slots) {
    pthread_mutex_lock(&s->mu);
    *st = s->stats;
    st->queued = s->q_len;
    pthread_mutex_unlock(&s->mu);
    /* slot fields are read racily (monotonic counters, informational) */
    for (int i = 0; i < s->cfg.n_slots && i < max_slots; i++) {
        slots[i].id = i;
        slots[i].busy = s->slots[i].j != NULL;
        slots[i].n_ctx = s->cfg.slot_ctx;
        slots[i].n_prompt = slots[i].busy ? mxl_seq_n_prompt(s->slots[i].seq) : 0;
        slots[i].n_decoded = slots[i].busy ? mxl_seq_n_generated(s->slots[i].seq) : 0;
        slots[i].n_remain = slots[i].busy ? mxl_seq_n_remaining(s->slots[i].seq) : -1;
    }
}

int64_t mxl_sched_slot_ctx(const mxl_sched *s) { return s->cfg.slot_ctx; }
