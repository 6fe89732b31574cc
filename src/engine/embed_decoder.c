/* embed_decoder.c - whole-sequence decoder runs with KV reuse of the common prefix (see
 * embed_decoder.h). */
#include "engine/embed_decoder.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "models/decoder.h"

#define RUNNER_MIN_CTX 256   /* first state capacity; grows by doubling */
#define RUNNER_MAX_BATCH 512 /* prefill chunk (scratch rows) */

struct mxl_dec_runner {
    mxl_decoder dec;
    bool dec_loaded;
    mxl_threadpool *pool;     /* borrowed */
    mxl_decoder_state *state; /* NULL until the first call */
    int64_t cap;              /* the state's capacity */
    int32_t *prev;            /* the tokens in the cache, [n_prev] */
    int64_t n_prev, prev_cap;
};

mxl_status mxl_dec_runner_create(const mxl_checkpoint *ck, mxl_threadpool *pool, mxl_dec_runner **out,
                                 mxl_error *err) {
    *out = NULL;
    mxl_dec_runner *r = mxl_calloc(1, sizeof *r);
    if (!r) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_status st = mxl_decoder_load(ck, &r->dec, err);
    if (st) {
        mxl_free(r);
        return st;
    }
    r->dec_loaded = true;
    r->pool = pool;
    *out = r;
    return MXL_OK;
}

void mxl_dec_runner_destroy(mxl_dec_runner *r) {
    if (!r) return;
    mxl_decoder_state_destroy(r->state);
    if (r->dec_loaded) mxl_decoder_free(&r->dec);
    mxl_free(r->prev);
    mxl_free(r);
}

int64_t mxl_dec_runner_hidden_size(const mxl_dec_runner *r) { return r->dec.hp.hidden; }
int64_t mxl_dec_runner_vocab(const mxl_dec_runner *r) { return r->dec.hp.vocab; }
int64_t mxl_dec_runner_max_positions(const mxl_dec_runner *r) { return r->dec.hp.max_ctx; }

/* A state holding n positions (whole: in one pass); a new (larger) one forgets the cached
 * prefix. */
static mxl_status ensure_state(mxl_dec_runner *r, int64_t n, bool whole, mxl_error *err) {
    int64_t maxp = r->dec.hp.max_ctx;
    if (maxp > 0 && n > maxp)
        return mxl_error_set(err, MXL_ERR_ARG, "a sequence of %lld tokens is longer than the model's %lld positions", (long long)n, (long long)maxp);
    if (r->state && n <= r->cap && (!whole || n <= mxl_decoder_state_max_batch(r->state))) return MXL_OK;
    int64_t cap = r->cap > 0 ? r->cap : RUNNER_MIN_CTX;
    while (cap < n) cap *= 2;
    if (maxp > 0 && cap > maxp) cap = maxp;
    mxl_decoder_state_destroy(r->state);
    r->state = NULL;
    r->cap = 0;
    r->n_prev = 0;
    mxl_status st = mxl_decoder_state_create(&r->dec, cap, whole || cap < RUNNER_MAX_BATCH ? cap : RUNNER_MAX_BATCH, r->pool, &r->state, err);
    if (st) return st;
    r->cap = mxl_decoder_state_capacity(r->state);
    return MXL_OK;
}

static mxl_status run(mxl_dec_runner *r, const int32_t *ids, int64_t n, float *out, bool hidden, mxl_error *err) {
    if (n <= 0) return mxl_error_set(err, MXL_ERR_ARG, "nothing to run: the token sequence is empty");
    mxl_status st = ensure_state(r, n, false, err);
    if (st) return st;
    /* keep the cached common prefix, but always run at least the last token (its output is the
     * point of the call) */
    int64_t keep = 0;
    while (keep < r->n_prev && keep < n - 1 && r->prev[keep] == ids[keep]) keep++;
    mxl_decoder_state_truncate(r->state, keep);
    keep = mxl_decoder_state_pos(r->state); /* (recurrent layers start over rather than go back) */
    r->n_prev = keep;
    st = hidden ? mxl_decoder_forward_hidden(&r->dec, r->state, ids + keep, n - keep, out, err)
                : mxl_decoder_forward(&r->dec, r->state, ids + keep, n - keep, out, err);
    if (st) { /* nothing appended on failure; the cache still holds `keep` tokens */
        return st;
    }
    if (n > r->prev_cap) {
        int32_t *p = mxl_realloc(r->prev, (size_t)n * sizeof *p);
        if (!p) { /* cannot remember the tokens: forget the cache instead */
            mxl_decoder_state_truncate(r->state, 0);
            r->n_prev = 0;
            return MXL_OK;
        }
        r->prev = p;
        r->prev_cap = n;
    }
    memcpy(r->prev, ids, (size_t)n * sizeof *ids);
    r->n_prev = n;
    return MXL_OK;
}

mxl_status mxl_dec_runner_hidden(mxl_dec_runner *r, const int32_t *ids, int64_t n, float *hidden, mxl_error *err) {
    return run(r, ids, n, hidden, true, err);
}

mxl_status mxl_dec_runner_hidden_all(mxl_dec_runner *r, const int32_t *ids, int64_t n, float *hidden, mxl_error *err) {
    if (n <= 0) return mxl_error_set(err, MXL_ERR_ARG, "nothing to run: the token sequence is empty");
    mxl_status st = ensure_state(r, n, true, err);
    if (st) return st;
    mxl_decoder_state_truncate(r->state, 0); /* (no prefix kept: a bidirectional model's earlier states depend on later tokens) */
    r->n_prev = 0;
    return mxl_decoder_forward_hidden_all(&r->dec, r->state, ids, n, hidden, err);
}

mxl_status mxl_dec_runner_logits(mxl_dec_runner *r, const int32_t *ids, int64_t n, float *logits, mxl_error *err) {
    return run(r, ids, n, logits, false, err);
}
