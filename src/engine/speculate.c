/* speculate.c - drafts for speculative decoding (speculate.h): the n-gram lookup, the draft
 * model's greedy run on its own KV cache, and the block policies. */
#include "engine/speculate.h"

#include <string.h>

#include "core/alloc.h"
#include "engine/model_internal.h"

#define GATED_NARROW 2 /* the gated policy's narrow block */
#define GRADED_MAX_PAUSE 32

struct mxl_drafter {
    mxl_draft_opts o;
    int cur;            /* the block this round (1 .. o.max_draft) */
    int misses;         /* rounds in a row with nothing accepted */
    int pause, backoff; /* graded: rounds left without proposing; the next pause's length */
    bool gated_off;     /* gated: proposing stopped until an unverified lookup is right */
    size_t guess_at;    /* gated_off: the lookup made with guess_at tokens ... */
    int32_t guess;      /* ... proposed this token next (-1: none) */
    mxl_draft_stats st;
    /* the draft model */
    const mxl_gen_model *dm;
    mxl_decoder_state *ds;
    int32_t *dids;      /* [ctx_len] the tokens whose KV the draft state holds */
    size_t n_dids;
    float *logits;      /* [draft vocab] */
};

void mxl_draft_opts_default(mxl_draft_opts *o, mxl_draft_kind kind) {
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->ngram_min = 2;
    o->ngram_max = 3;
    o->max_draft = kind == MXL_DRAFT_FULL_MODEL ? 4 : 7;
    o->policy = MXL_DRAFT_POLICY_AUTO;
}

mxl_status mxl_draft_kind_parse(const char *s, mxl_draft_kind *out, mxl_error *err) {
    if (strcmp(s, "prompt-lookup") == 0) *out = MXL_DRAFT_PROMPT_LOOKUP;
    else if (strcmp(s, "full-model") == 0) *out = MXL_DRAFT_FULL_MODEL;
    else if (strcmp(s, "dflash") == 0 || strcmp(s, "mtp") == 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "draft kind '%s' needs a family with such heads, and none in this build ships them (use full-model or prompt-lookup)", s);
    else return mxl_error_set(err, MXL_ERR_ARG, "unknown draft kind '%s' (dflash, mtp, full-model, prompt-lookup)", s);
    return MXL_OK;
}

mxl_status mxl_draft_policy_parse(const char *s, mxl_draft_policy *out, mxl_error *err) {
    if (strcmp(s, "auto") == 0) *out = MXL_DRAFT_POLICY_AUTO;
    else if (strcmp(s, "graded") == 0) *out = MXL_DRAFT_POLICY_GRADED;
    else if (strcmp(s, "gated") == 0) *out = MXL_DRAFT_POLICY_GATED;
    else return mxl_error_set(err, MXL_ERR_ARG, "unknown prompt-lookup policy '%s' (auto, graded, gated)", s);
    return MXL_OK;
}

mxl_status mxl_drafter_check_model(const mxl_gen_model *target, const mxl_gen_model *draft, mxl_error *err) {
    const int64_t tv = target->dec.hp.vocab, dv = draft->dec.hp.vocab;
    if (dv > tv)
        return mxl_error_set(err, MXL_ERR_ARG, "the draft model's vocabulary (%lld) is larger than the target's (%lld)", (long long)dv, (long long)tv);
    if (draft->dec.rec_state_floats)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "the draft model has recurrent layers, whose state cannot take back rejected tokens");
    const uint32_t tn = mxl_tokenizer_n_vocab(target->tok), dn = mxl_tokenizer_n_vocab(draft->tok);
    const uint32_t n = tn < dn ? tn : dn;
    if (dn > tn) return mxl_error_set(err, MXL_ERR_ARG, "the draft model's tokenizer has %u tokens, the target's %u", dn, tn);
    for (uint32_t i = 0; i < n; i++) {
        size_t la = 0, lb = 0;
        const char *a = mxl_tokenizer_token(target->tok, (int32_t)i, &la), *b = mxl_tokenizer_token(draft->tok, (int32_t)i, &lb);
        if (!a != !b || la != lb || (a && memcmp(a, b, la) != 0))
            return mxl_error_set(err, MXL_ERR_ARG, "the draft model's vocabulary differs from the target's at token id %u ('%.*s' vs '%.*s')", i,
                                 (int)(lb > 40 ? 40 : lb), b ? b : "", (int)(la > 40 ? 40 : la), a ? a : "");
    }
    if (mxl_tokenizer_bos_id(target->tok) != mxl_tokenizer_bos_id(draft->tok))
        return mxl_error_set(err, MXL_ERR_ARG, "the draft model's BOS token (%d) is not the target's (%d)", mxl_tokenizer_bos_id(draft->tok),
                             mxl_tokenizer_bos_id(target->tok));
    return MXL_OK;
}

mxl_status mxl_drafter_create(const mxl_draft_opts *o, int64_t ctx_len, struct mxl_threadpool *pool, mxl_drafter **out,
                              mxl_error *err) {
    *out = NULL;
    if (o->kind != MXL_DRAFT_PROMPT_LOOKUP && o->kind != MXL_DRAFT_FULL_MODEL) return mxl_error_set(err, MXL_ERR_ARG, "no draft kind given");
    if (o->max_draft < 1 || o->max_draft > 64) return mxl_error_set(err, MXL_ERR_ARG, "the draft block must be 1..64 tokens, got %d", o->max_draft);
    if (o->kind == MXL_DRAFT_PROMPT_LOOKUP && (o->ngram_min < 1 || o->ngram_max > 16 || o->ngram_min > o->ngram_max))
        return mxl_error_set(err, MXL_ERR_ARG, "prompt-lookup n-grams must satisfy 1 <= min <= max <= 16, got %d..%d", o->ngram_min, o->ngram_max);
    if (o->kind == MXL_DRAFT_FULL_MODEL && !o->model) return mxl_error_set(err, MXL_ERR_ARG, "no draft model given");
    mxl_drafter *d = mxl_calloc(1, sizeof *d);
    if (!d) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    d->o = *o;
    mxl_drafter_reset(d);
    if (o->kind == MXL_DRAFT_FULL_MODEL) {
        const mxl_gen_model *m = o->model;
        d->dm = m;
        mxl_status st = mxl_decoder_state_create_ex(&m->dec, ctx_len, 256, pool ? pool : m->pool, &m->kv, &d->ds, err);
        if (!st) {
            d->dids = mxl_malloc((size_t)ctx_len * sizeof(int32_t));
            d->logits = mxl_malloc((size_t)m->dec.hp.vocab * sizeof(float));
            if (!d->dids || !d->logits) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        }
        if (st) {
            mxl_drafter_destroy(d);
            return st;
        }
    }
    *out = d;
    return MXL_OK;
}

void mxl_drafter_destroy(mxl_drafter *d) {
    if (!d) return;
    mxl_decoder_state_destroy(d->ds);
    mxl_free(d->dids);
    mxl_free(d->logits);
    mxl_free(d);
}

void mxl_drafter_reset(mxl_drafter *d) {
    d->cur = d->o.max_draft;
    d->misses = d->pause = 0;
    d->backoff = 1;
    d->gated_off = false;
    d->guess = -1;
}

void mxl_drafter_stats(const mxl_drafter *d, mxl_draft_stats *out) { *out = d->st; }

/* How many tokens before ids[a] and ids[b] (a < b) agree, at most cap. */
static int agree_before(const int32_t *ids, size_t a, size_t b, int cap) {
    int k = 0;
    while (k < cap && (size_t)k < a && ids[a - 1 - (size_t)k] == ids[b - 1 - (size_t)k]) k++;
    return k;
}

#define LOOKUP_CONTEXT 32 /* tokens before a match compared to rank equal n-gram matches */

int mxl_prompt_lookup(const int32_t *ids, size_t n, int ngram_min, int ngram_max, int max, int32_t *out) {
    if (max <= 0) return 0;
    for (int g = ngram_max; g >= ngram_min; g--) {
        if ((size_t)g >= n) continue;
        const size_t at = n - (size_t)g; /* the suffix ids[at .. n) */
        /* of the earlier starts s with ids[s .. s + g) == suffix, the one whose preceding tokens
         * agree longest with the suffix's (the same place in a text being copied, not a phrase
         * that recurs), the latest among equals */
        size_t best = SIZE_MAX;
        int best_ctx = -1;
        for (size_t s = at; s-- > 0;) {
            if (ids[s] != ids[at] || memcmp(ids + s, ids + at, (size_t)g * sizeof(int32_t)) != 0) continue;
            const int c = agree_before(ids, s, at, LOOKUP_CONTEXT);
            if (c > best_ctx) best = s, best_ctx = c;
            if (c == LOOKUP_CONTEXT) break;
        }
        if (best == SIZE_MAX) continue;
        const size_t from = best + (size_t)g;
        int k = 0;
        while (k < max && from + (size_t)k < n) {
            out[k] = ids[from + (size_t)k];
            k++;
        }
        return k;
    }
    return 0;
}

static int argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int)best;
}

/* The draft model's greedy continuation of ids[0..n), at most k tokens (*n_draft: fewer near the
 * end of its context): its state first catches up with the tokens it has not run (after the
 * longest prefix it shares with ids). */
static mxl_status model_draft(mxl_drafter *d, const int32_t *ids, size_t n, int k, int32_t *draft, int *n_draft, mxl_error *err) {
    size_t c = 0;
    while (c < d->n_dids && c < n && d->dids[c] == ids[c]) c++;
    if (c == n) c--; /* at least one token runs: its logits start the draft */
    mxl_decoder_state_truncate(d->ds, (int64_t)c);
    d->n_dids = c;
    const mxl_decoder *dec = &d->dm->dec;
    const int64_t cap = mxl_decoder_state_capacity(d->ds);
    if ((int64_t)n + k > cap) k = (int)(cap - (int64_t)n);
    *n_draft = 0;
    if (k <= 0) return MXL_OK;
    mxl_status st = mxl_decoder_forward(dec, d->ds, ids + c, (int64_t)(n - c), d->logits, err);
    if (st) return st;
    memcpy(d->dids + c, ids + c, (n - c) * sizeof(int32_t));
    d->n_dids = n;
    for (int j = 0; j < k; j++) {
        draft[j] = argmax(d->logits, dec->hp.vocab);
        if (j + 1 == k) break;
        if ((st = mxl_decoder_forward(dec, d->ds, &draft[j], 1, d->logits, err))) return st;
        d->dids[d->n_dids++] = draft[j];
    }
    *n_draft = k;
    return MXL_OK;
}

mxl_status mxl_drafter_propose(mxl_drafter *d, const int32_t *ids, size_t n, int max, int32_t *draft, int *n_draft,
                               mxl_error *err) {
    *n_draft = 0;
    int k = d->o.no_adaptive ? d->o.max_draft : d->cur;
    if (k > max) k = max;
    if (k <= 0) return MXL_OK;
    const bool gated = d->o.policy == MXL_DRAFT_POLICY_GATED;
    if (!d->o.no_adaptive && gated && d->gated_off) {
        /* resume once the lookup made a round ago, unverified, named the token that came */
        if (d->guess >= 0 && n > d->guess_at && ids[d->guess_at] == d->guess) {
            d->gated_off = false;
            d->cur = GATED_NARROW < d->o.max_draft ? GATED_NARROW : d->o.max_draft;
            k = d->cur < max ? d->cur : max;
        } else {
            int32_t g;
            d->guess = d->o.kind == MXL_DRAFT_PROMPT_LOOKUP && mxl_prompt_lookup(ids, n, d->o.ngram_min, d->o.ngram_max, 1, &g) ? g : -1;
            d->guess_at = n;
            return MXL_OK;
        }
    } else if (!d->o.no_adaptive && d->pause > 0) {
        d->pause--;
        return MXL_OK;
    }
    if (d->o.kind == MXL_DRAFT_PROMPT_LOOKUP) {
        *n_draft = mxl_prompt_lookup(ids, n, d->o.ngram_min, d->o.ngram_max, k, draft);
        return MXL_OK;
    }
    return model_draft(d, ids, n, k, draft, n_draft, err);
}

void mxl_drafter_observe(mxl_drafter *d, int proposed, int accepted) {
    if (proposed <= 0) return;
    d->st.rounds++;
    d->st.drafted += proposed;
    d->st.accepted += accepted;
    if (d->o.no_adaptive) return;
    const int max = d->o.max_draft;
    if (d->o.policy == MXL_DRAFT_POLICY_GATED) {
        if (accepted == proposed) d->cur = max, d->misses = 0;
        else if (accepted == 0 && ++d->misses >= 2) d->gated_off = true, d->guess = -1, d->misses = 0;
        else if (accepted > 0) d->cur = GATED_NARROW < max ? GATED_NARROW : max, d->misses = 0;
        return;
    }
    /* graded: grow on a full acceptance, fit the block to a partial one, pause after misses */
    if (accepted == proposed) {
        d->cur = d->cur * 2 < max ? d->cur * 2 : max;
        d->misses = 0;
        d->backoff = 1;
    } else if (accepted == 0) {
        d->cur = d->cur / 2 > 1 ? d->cur / 2 : 1;
        if (++d->misses >= 2) {
            d->pause = d->backoff;
            d->backoff = d->backoff * 2 < GRADED_MAX_PAUSE ? d->backoff * 2 : GRADED_MAX_PAUSE;
            d->misses = 0;
        }
    } else {
        d->cur = accepted + 1 < max ? accepted + 1 : max;
        d->misses = 0;
    }
}
