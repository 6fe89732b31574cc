/* sampler.c - the sampler chain (sampler.h): parameters and their validation, the chain in
 * llama-server's order over the stages of sampler_stages.c and sampler_dry.c, the seeded draw,
 * mirostat's mu, and the NaN/Inf check on logits.
 *
 * Logit bias, the penalties and DRY only touch the ids they name, so they are applied to the
 * caller's logits in place (the same values llama.cpp computes on its full-vocabulary candidate
 * array); the rest works on a candidate array built from the logits. Greedy requests whose
 * truncation stages cannot move the argmax (no typical-p, no XTC, no mirostat) skip the array and
 * take the argmax directly. */
#include "engine/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "core/alloc.h"
#include "engine/sampler_internal.h"

const char *const mxl_sampler_default_dry_breakers[4] = {"\n", ":", "\"", "*"};

struct mxl_sampler {
    mxl_sampler_params p; /* pointers cleared; copies below */
    int32_t n_vocab;
    mxl_sampler_cand *cands;   /* [n_vocab] */
    mxl_sampler_cand *scratch; /* [n_vocab] typical-p */
    smp_score *scores;         /* [n_vocab] typical-p */
    uint32_t *counts;          /* [n_vocab] occurrences in the penalty window */
    mxl_logit_bias *bias;
    size_t n_bias;
    smp_dry dry;
    uint64_t rng[4];
    float mu;                  /* mirostat */
    mxl_sampler_cand one;      /* greedy result */
    smp_cur last;              /* the last candidate set */
    bool pending;
    /* constrained output */
    mxl_grammar *gram;
    mxl_grammar_state *gstate;
    const mxl_grammar_vocab *gvocab;
    float *saved;              /* [n_vocab] the logits before the chain, for the masked rerun */
};

void mxl_sampler_params_default(mxl_sampler_params *p) {
    memset(p, 0, sizeof *p);
    p->temp = 0.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = -1;
    p->typical_p = 1.0f;
    p->top_n_sigma = 0.0f;
    p->xtc_probability = 0.0f;
    p->xtc_threshold = 0.1f;
    p->dynatemp_range = 0.0f;
    p->dynatemp_exponent = 1.0f;
    p->mirostat = 0;
    p->mirostat_tau = 5.0f;
    p->mirostat_eta = 0.1f;
    p->dry_multiplier = 0.0f;
    p->dry_base = 1.75f;
    p->dry_allowed_length = 2;
    p->dry_penalty_last_n = -1;
    p->dry_breakers = mxl_sampler_default_dry_breakers;
    p->n_dry_breakers = 4;
}

static mxl_status validate(const mxl_sampler_params *p, int32_t n_vocab, mxl_error *err) {
#define BAD(...) return mxl_error_set(err, MXL_ERR_ARG, __VA_ARGS__)
    if (n_vocab <= 0) BAD("sampler: empty vocabulary");
    if (!(isfinite(p->temp) && p->temp >= 0)) BAD("--temp %g is out of range (finite, >= 0)", p->temp);
    if (p->top_k < 0) BAD("--top-k %d is out of range (>= 0)", p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1)) BAD("--top-p %g is out of range (0 < top-p <= 1)", p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1)) BAD("--min-p %g is out of range (0 <= min-p <= 1)", p->min_p);
    if (!(isfinite(p->repeat_penalty) && p->repeat_penalty > 0 && isfinite(1.0f / p->repeat_penalty)))
        BAD("--repetition-penalty %g is out of range (finite, > 0)", p->repeat_penalty);
    if (p->repeat_last_n < -1) BAD("--repeat-last-n %d is out of range (-1 whole history, 0 off, or > 0)", p->repeat_last_n);
    if (!isfinite(p->presence_penalty)) BAD("--presence-penalty must be finite");
    if (!isfinite(p->frequency_penalty)) BAD("--frequency-penalty must be finite");
    if (!(p->typical_p > 0 && p->typical_p <= 1)) BAD("--typical-p %g is out of range (0 < typical-p <= 1)", p->typical_p);
    if (!isfinite(p->top_n_sigma)) BAD("--top-n-sigma must be finite");
    if (!(p->xtc_probability >= 0 && p->xtc_probability <= 1))
        BAD("--xtc-probability %g is out of range (0 <= p <= 1)", p->xtc_probability);
    if (!(p->xtc_threshold >= 0 && p->xtc_threshold <= 1)) BAD("--xtc-threshold %g is out of range (0 <= t <= 1)", p->xtc_threshold);
    if (!(isfinite(p->dynatemp_range) && p->dynatemp_range >= 0)) BAD("--dynatemp-range %g is out of range (finite, >= 0)", p->dynatemp_range);
    if (!(isfinite(p->dynatemp_exponent) && p->dynatemp_exponent >= 0))
        BAD("--dynatemp-exp %g is out of range (finite, >= 0)", p->dynatemp_exponent);
    if (p->mirostat < 0 || p->mirostat > 2) BAD("--mirostat %d is out of range (0 off, 1, 2)", p->mirostat);
    if (!(isfinite(p->mirostat_tau) && p->mirostat_tau >= 0)) BAD("--mirostat-ent %g is out of range (finite, >= 0)", p->mirostat_tau);
    if (!(isfinite(p->mirostat_eta) && p->mirostat_eta >= 0)) BAD("--mirostat-lr %g is out of range (finite, >= 0)", p->mirostat_eta);
    if (!(isfinite(p->dry_multiplier) && p->dry_multiplier >= 0)) BAD("--dry-multiplier %g is out of range (finite, >= 0)", p->dry_multiplier);
    if (!(isfinite(p->dry_base) && p->dry_base > 0)) BAD("--dry-base %g is out of range (finite, > 0)", p->dry_base);
    if (p->dry_allowed_length < 0) BAD("--dry-allowed-length %d is out of range (>= 0)", p->dry_allowed_length);
    if (p->dry_penalty_last_n < -1) BAD("--dry-penalty-last-n %d is out of range (-1 whole history, 0 off, or > 0)", p->dry_penalty_last_n);
    if (p->n_logit_bias && !p->logit_bias) BAD("logit bias: %zu entries but no array", p->n_logit_bias);
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        const mxl_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab) BAD("--logit-bias: token %d is outside the vocabulary [0, %d)", b->token, n_vocab);
        if (isnan(b->bias) || b->bias == INFINITY) BAD("--logit-bias: token %d has bias %g (must be finite or -inf)", b->token, b->bias);
    }
    if (p->n_dry_breakers && !p->dry_breakers) BAD("DRY: %zu sequence breakers but no array", p->n_dry_breakers);
    return MXL_OK;
#undef BAD
}

mxl_status mxl_sampler_create_with_vocab(const mxl_sampler_params *p, int32_t n_vocab, const mxl_sampler_vocab *vocab,
                                         mxl_sampler **out, mxl_error *err) {
    *out = NULL;
    mxl_status st = validate(p, n_vocab, err);
    if (st) return st;
    mxl_sampler *s = mxl_calloc(1, sizeof *s);
    if (!s) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    s->p = *p;
    s->p.dry_breakers = NULL;
    s->p.n_dry_breakers = 0;
    s->p.dry_breakers_built = NULL;
    s->p.logit_bias = NULL;
    s->p.n_logit_bias = 0;
    s->p.grammar = NULL;
    s->p.grammar_vocab = NULL;
    s->n_vocab = n_vocab;
    size_t nv = (size_t)n_vocab;
    s->cands = mxl_malloc(nv * sizeof *s->cands);
    s->counts = mxl_calloc(nv, sizeof *s->counts);
    if (p->typical_p < 1.0f && p->mirostat == 0) {
        s->scratch = mxl_malloc(nv * sizeof *s->scratch);
        s->scores = mxl_malloc(nv * sizeof *s->scores);
    }
    if (p->n_logit_bias) {
        s->bias = mxl_malloc(p->n_logit_bias * sizeof *s->bias);
        if (s->bias) memcpy(s->bias, p->logit_bias, p->n_logit_bias * sizeof *s->bias);
        s->n_bias = p->n_logit_bias;
    }
    if (!s->cands || !s->counts || (p->typical_p < 1.0f && p->mirostat == 0 && (!s->scratch || !s->scores)) ||
        (p->n_logit_bias && !s->bias)) {
        mxl_sampler_destroy(s);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    /* DRY (never used by mirostat chains, as in llama.cpp) */
    smp_dry probe = {.multiplier = p->dry_multiplier, .base = p->dry_base, .last_n = p->dry_penalty_last_n};
    mxl_dry_breakers *brk = NULL;
    if (p->mirostat == 0 && smp_dry_enabled(&probe)) {
        if (p->dry_breakers_built) st = smp_dry_breakers_clone(p->dry_breakers_built, &brk, err);
        else if (p->n_dry_breakers && !vocab)
            st = mxl_error_set(err, MXL_ERR_ARG, "DRY sequence breakers given as strings need the tokenizer "
                                                 "(mxl_sampler_create_with_vocab), or pass none");
        else if (p->n_dry_breakers)
            st = mxl_dry_breakers_from_strings(p->dry_breakers, p->n_dry_breakers, n_vocab, vocab, &brk, err);
        if (!st) st = smp_dry_init(&s->dry, p, n_vocab, brk, err);
        else mxl_dry_breakers_destroy(brk);
        if (st) {
            mxl_sampler_destroy(s);
            return st;
        }
    }
    if (p->grammar && *p->grammar) {
        if (!p->grammar_vocab) st = mxl_error_set(err, MXL_ERR_ARG, "a grammar needs the vocabulary's token texts (grammar_vocab)");
        if (!st) st = mxl_grammar_parse(p->grammar, strlen(p->grammar), &s->gram, err);
        if (!st) st = mxl_grammar_state_create(s->gram, &s->gstate, err);
        if (!st && !(s->saved = mxl_malloc(nv * sizeof *s->saved))) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        if (st) {
            mxl_sampler_destroy(s);
            return st;
        }
        s->gvocab = p->grammar_vocab;
    }
    mxl_sampler_reset(s);
    *out = s;
    return MXL_OK;
}

mxl_status mxl_sampler_create(const mxl_sampler_params *p, int32_t n_vocab, mxl_sampler **out, mxl_error *err) {
    return mxl_sampler_create_with_vocab(p, n_vocab, NULL, out, err);
}

void mxl_sampler_destroy(mxl_sampler *s) {
    if (!s) return;
    mxl_free(s->cands);
    mxl_free(s->scratch);
    mxl_free(s->scores);
    mxl_free(s->counts);
    mxl_free(s->bias);
    smp_dry_free(&s->dry);
    mxl_grammar_state_destroy(s->gstate);
    mxl_grammar_destroy(s->gram);
    mxl_free(s->saved);
    mxl_free(s);
}

void mxl_sampler_reset(mxl_sampler *s) {
    smp_rng_seed(s->rng, s->p.seed);
    s->mu = 2.0f * s->p.mirostat_tau;
    s->pending = false;
    if (s->gstate) mxl_grammar_state_reset(s->gstate);
}

mxl_status mxl_sampler_reserve(mxl_sampler *s, size_t n_history, mxl_error *err) {
    return smp_dry_reserve(&s->dry, n_history, err);
}

mxl_status mxl_sampler_check_logits(const float *logits, int32_t n_vocab, mxl_error *err) {
    /* one vectorized pass (the host backend's logits_scan), then find the culprit if needed */
    bool bad, any;
    const mxl_backend *be = mxl_backend_host();
    be->ops->logits_scan(be, logits, n_vocab, &bad, &any);
    if (bad)
        for (int32_t i = 0; i < n_vocab; i++) {
            if (isnan(logits[i])) return mxl_error_set(err, MXL_ERR_INTERNAL, "the model produced a NaN logit (token %d); refusing to sample", i);
            if (logits[i] == INFINITY) return mxl_error_set(err, MXL_ERR_INTERNAL, "the model produced a +inf logit (token %d); refusing to sample", i);
        }
    if (!any) return mxl_error_set(err, MXL_ERR_INTERNAL, "every logit is -inf: no token can be sampled");
    return MXL_OK;
}

/* a bias or penalty that overflows a logit is reported instead of sampled as NaN */
static mxl_status overflowed(int32_t id, float l, mxl_error *err) {
    return mxl_error_set(err, MXL_ERR_ARG, "the logit bias / penalties pushed token %d to %g; refusing to sample", id, l);
}

/* llama_sampler_penalties: per token in the window, divide a positive logit by the repeat penalty
 * (multiply a non-positive one), then subtract count * frequency + presence */
static mxl_status apply_penalties(mxl_sampler *s, float *logits, const int32_t *hist, size_t n, mxl_error *err) {
    const mxl_sampler_params *p = &s->p;
    if (p->repeat_last_n == 0 || (p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f))
        return MXL_OK;
    mxl_status st = MXL_OK;
    size_t start = p->repeat_last_n < 0 || (size_t)p->repeat_last_n >= n ? 0 : n - (size_t)p->repeat_last_n;
    for (size_t i = start; i < n; i++)
        if (hist[i] >= 0 && hist[i] < s->n_vocab) s->counts[hist[i]]++;
    for (size_t i = start; i < n; i++) {
        int32_t id = hist[i];
        if (id < 0 || id >= s->n_vocab || s->counts[id] == 0) continue;
        float l = logits[id];
        l = l <= 0 ? l * p->repeat_penalty : l / p->repeat_penalty;
        l -= (float)s->counts[id] * p->frequency_penalty + p->presence_penalty;
        logits[id] = l;
        s->counts[id] = 0; /* each id once; also resets the table for the next call */
        if (!(l < INFINITY) && !st) st = overflowed(id, l, err); /* keep going: counts must be reset */
    }
    return st;
}

static bool greedy_shortcut(const mxl_sampler_params *p) {
    return p->mirostat == 0 && p->temp <= 0.0f && !(p->dynatemp_range > 0.0f) && p->typical_p >= 1.0f &&
           !(p->xtc_probability > 0.0f && p->xtc_threshold <= 0.5f);
}

/* The chain without the grammar. */
static mxl_status run_chain(mxl_sampler *s, float *logits, const int32_t *history, size_t n_history,
                            const mxl_sampler_cand **cands, size_t *n_cands, mxl_error *err) {
    const mxl_sampler_params *p = &s->p;
    s->pending = false;
    *cands = NULL;
    *n_cands = 0;
    mxl_status st = mxl_sampler_check_logits(logits, s->n_vocab, err);
    if (st) return st;
    if (n_history && !history) return mxl_error_set(err, MXL_ERR_ARG, "sampler: history of %zu ids but no array", n_history);
    for (size_t i = 0; i < s->n_bias; i++) {
        float *l = &logits[s->bias[i].token];
        *l += s->bias[i].bias;
        if (!(*l < INFINITY)) return overflowed(s->bias[i].token, *l, err);
    }
    if (p->mirostat == 0) {
        if ((st = apply_penalties(s, logits, history, n_history, err))) return st;
        /* DRY only subtracts (multiplier >= 0) */
        if ((st = smp_dry_apply(&s->dry, logits, history, n_history, err))) return st;
    }
    smp_cur c = {s->cands, 0, false};
    if (greedy_shortcut(p)) {
        /* no NaN here (checked above; bias and penalties refuse to make one): the first of the
         * largest values, which is -inf only when every token is banned */
        const mxl_backend *be = mxl_backend_host();
        const int32_t best = (int32_t)be->ops->argmax(be, logits, s->n_vocab);
        if (!(logits[best] > -INFINITY)) return mxl_error_set(err, MXL_ERR_ARG, "every token is banned (logit -inf after the logit bias and penalties)");
        s->one = (mxl_sampler_cand){best, logits[best], 1.0f};
        c = (smp_cur){&s->one, 1, true};
    } else {
        for (int32_t i = 0; i < s->n_vocab; i++) s->cands[i] = (mxl_sampler_cand){i, logits[i], 0.0f};
        c.n = (size_t)s->n_vocab;
        if (p->mirostat == 0) {
            smp_top_n_sigma(&c, p->top_n_sigma);
            smp_top_k(&c, p->top_k);
            smp_typical(&c, p->typical_p, s->scratch, s->scores);
            smp_top_p(&c, p->top_p);
            smp_min_p(&c, p->min_p);
            smp_xtc(&c, p->xtc_probability, p->xtc_threshold, s->rng);
            smp_temp_ext(&c, p->temp, p->dynatemp_range, p->dynatemp_exponent);
            if (p->p_less && (p->temp > 0.0f || p->dynatemp_range > 0.0f)) smp_p_less(&c);
            smp_dist(&c);
        } else {
            smp_temp(&c, p->temp);
            if (p->mirostat == 1) smp_mirostat(&c, s->mu, 100, s->n_vocab);
            else smp_mirostat_v2(&c, s->mu);
            smp_drop_banned(&c);
        }
        if (c.n == 0) return mxl_error_set(err, MXL_ERR_ARG, "every token is banned (logit -inf after the logit bias and penalties)");
    }
    s->last = c;
    s->pending = true;
    *cands = c.d;
    *n_cands = c.n;
    return MXL_OK;
}

/* Masks every token the grammar rejects here (ids past the grammar's vocabulary too). */
static mxl_status grammar_mask_all(mxl_sampler *s, float *logits, mxl_error *err) {
    size_t allowed = 0;
    mxl_status st = mxl_grammar_state_mask(s->gstate, s->gvocab, logits, NULL, (size_t)s->n_vocab, &allowed, err);
    for (int32_t i = mxl_grammar_vocab_size(s->gvocab); i < s->n_vocab; i++) logits[i] = -INFINITY;
    if (!st && allowed == 0)
        st = mxl_error_set(err, MXL_ERR_ARG, "the grammar allows no token here (the output so far cannot be continued)");
    return st;
}

mxl_status mxl_sampler_candidates(mxl_sampler *s, float *logits, const int32_t *history, size_t n_history,
                                  const mxl_sampler_cand **cands, size_t *n_cands, mxl_error *err) {
    s->pending = false;
    if (s->gstate) {
        mxl_status st = mxl_sampler_check_logits(logits, s->n_vocab, err);
        if (!st) st = grammar_mask_all(s, logits, err);
        if (st) {
            *cands = NULL;
            *n_cands = 0;
            return st;
        }
    }
    return run_chain(s, logits, history, n_history, cands, n_cands, err);
}

static mxl_status commit_index(mxl_sampler *s, size_t i, mxl_error *err) {
    if (s->p.mirostat != 0) {
        float observed = -log2f(s->last.d[i].p);
        s->mu = s->mu - s->p.mirostat_eta * (observed - s->p.mirostat_tau);
    }
    s->pending = false;
    if (s->gstate) return mxl_grammar_state_accept_token(s->gstate, s->gvocab, s->last.d[i].id, err);
    return MXL_OK;
}

/* The drawn index of the pending set (not committed); SIZE_MAX when none is pending. */
static size_t draw_index(mxl_sampler *s) {
    if (!s->pending) return SIZE_MAX;
    const smp_cur *c = &s->last;
    double sum = 0;
    for (size_t i = 0; i < c->n; i++) sum += c->d[i].p;
    double target = smp_rng_unit(s->rng) * sum, acc = 0;
    size_t pick = c->n, last_pos = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (c->d[i].p <= 0.0f) continue;
        last_pos = i;
        acc += c->d[i].p;
        if (acc > target) {
            pick = i;
            break;
        }
    }
    if (pick == c->n) pick = last_pos; /* rounding at the very end */
    return pick;
}

int32_t mxl_sampler_draw(mxl_sampler *s) {
    size_t i = draw_index(s);
    if (i == SIZE_MAX) return -1;
    int32_t id = s->last.d[i].id;
    commit_index(s, i, NULL); /* the set was masked by the grammar: the token fits */
    return id;
}

const mxl_sampler_cand *mxl_sampler_last(const mxl_sampler *s, size_t *n) {
    *n = s->last.d ? s->last.n : 0;
    return *n ? s->last.d : NULL;
}

mxl_status mxl_sampler_commit(mxl_sampler *s, int32_t id, mxl_error *err) {
    if (!s->pending) return mxl_error_set(err, MXL_ERR_ARG, "sampler: no candidate set to commit a token from");
    for (size_t i = 0; i < s->last.n; i++)
        if (s->last.d[i].id == id) return commit_index(s, i, err);
    return mxl_error_set(err, MXL_ERR_ARG, "sampler: token %d is not in the last candidate set", id);
}

mxl_status mxl_sampler_pick(mxl_sampler *s, float *logits, const int32_t *history, size_t n_history, int32_t *id,
                            mxl_error *err) {
    const mxl_sampler_cand *c;
    size_t n;
    if (!s->gstate) {
        mxl_status st = mxl_sampler_candidates(s, logits, history, n_history, &c, &n, err);
        if (st) return st;
        *id = mxl_sampler_draw(s);
        return MXL_OK;
    }
    /* llama-server (common_sampler_sample, grammar_first = false): the chain alone, then the
     * grammar checks only the drawn token; if it does not fit, start again from the logits with
     * the grammar masking the whole vocabulary first */
    memcpy(s->saved, logits, (size_t)s->n_vocab * sizeof *logits);
    mxl_status st = run_chain(s, logits, history, n_history, &c, &n, err);
    if (st) return st;
    size_t i = draw_index(s);
    if (i != SIZE_MAX && mxl_grammar_state_allows(s->gstate, s->gvocab, s->last.d[i].id)) {
        *id = s->last.d[i].id;
        return commit_index(s, i, err);
    }
    memcpy(logits, s->saved, (size_t)s->n_vocab * sizeof *logits);
    if ((st = mxl_sampler_candidates(s, logits, history, n_history, &c, &n, err))) return st;
    if ((i = draw_index(s)) == SIZE_MAX) return mxl_error_set(err, MXL_ERR_INTERNAL, "sampler: nothing to draw");
    *id = s->last.d[i].id;
    return commit_index(s, i, err);
}

mxl_status mxl_logit_bias_parse(const char *text, mxl_logit_bias *out, mxl_error *err) {
    const char *s = text;
    char *end = NULL;
    while (*s == ' ') s++;
    long id = strtol(s, &end, 10);
    if (end == s || id < 0 || id > INT32_MAX || (*end != '+' && *end != '-'))
        return mxl_error_set(err, MXL_ERR_ARG, "--logit-bias '%s': expected TOKEN_ID(+/-)BIAS, e.g. 15043+1", text);
    float sign = *end == '-' ? -1.0f : 1.0f;
    const char *v = end + 1;
    float b = strtof(v, &end);
    if (end == v || *v == '+' || *v == '-' || *end || isnan(b))
        return mxl_error_set(err, MXL_ERR_ARG, "--logit-bias '%s': expected TOKEN_ID(+/-)BIAS, e.g. 15043+1", text);
    b *= sign;
    if (b == INFINITY) return mxl_error_set(err, MXL_ERR_ARG, "--logit-bias '%s': the bias must be finite or -inf", text);
    out->token = (int32_t)id;
    out->bias = b;
    return MXL_OK;
}

int32_t mxl_sampler_sample(mxl_sampler *s, float *logits, const int32_t *history, size_t n_history) {
    int32_t id = -1;
    if (mxl_sampler_pick(s, logits, history, n_history, &id, NULL) == MXL_OK && id >= 0) return id;
    int32_t best = 0;
    for (int32_t i = 1; i < s->n_vocab; i++)
        if (!isnan(logits[i]) && (isnan(logits[best]) || logits[i] > logits[best])) best = i;
    return best;
}
