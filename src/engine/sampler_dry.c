/* sampler_dry.c - DRY ("Don't Repeat Yourself") repetition penalty and its sequence breakers,
 * after llama.cpp's llama_sampler_dry (src/llama-sampler.cpp, itself ported from koboldcpp):
 *
 * 1. The most recent sequence breaker in the window limits how far back a repeat may reach.
 * 2. A reverse Z-algorithm over the window finds, for each position, how long the suffix ending
 *    there matches the suffix of the whole history.
 * 3. The token after each such match would extend the repeat; its longest repeat length counts.
 * 4. logit -= multiplier * base^(length - allowed_length) for those tokens, except tokens that are
 *    single-token breakers.
 *
 * Breakers are (head token, tail tokens) pairs, sorted by head for binary search. From strings
 * they come from the vocabulary the way llama.cpp's get_overlapping_token_sequences makes them:
 * every token whose text contains the string is a head with no tail, and every token whose text
 * ends with a proper prefix of the string is a head whose tail is the tokenization of the rest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/sampler_internal.h"

#define DRY_MAX_CHAR_LEN 40
#define DRY_MAX_SEQ_LEN 20

/* ---- breakers ----------------------------------------------------------------------------------- */

/* growable list used while building */
typedef struct brk_build {
    int32_t *head;
    uint32_t *off, *len;
    size_t n, cap;
    int32_t *tails;
    size_t n_tails, cap_tails;
} brk_build;

static mxl_status bb_add(brk_build *b, int32_t head, const int32_t *tail, size_t n, mxl_error *err) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        int32_t *h = mxl_realloc(b->head, cap * sizeof *h);
        if (h) b->head = h;
        uint32_t *o = mxl_realloc(b->off, cap * sizeof *o);
        if (o) b->off = o;
        uint32_t *l = mxl_realloc(b->len, cap * sizeof *l);
        if (l) b->len = l;
        if (!h || !o || !l) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory building the DRY sequence breakers");
        b->cap = cap;
    }
    if (b->n_tails + n > b->cap_tails) {
        size_t cap = b->cap_tails ? b->cap_tails * 2 : 256;
        while (cap < b->n_tails + n) cap *= 2;
        int32_t *t = mxl_realloc(b->tails, cap * sizeof *t);
        if (!t) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory building the DRY sequence breakers");
        b->tails = t;
        b->cap_tails = cap;
    }
    if (b->n_tails + n > UINT32_MAX) return mxl_error_set(err, MXL_ERR_OVERFLOW, "too many DRY sequence breaker tokens");
    b->head[b->n] = head;
    b->off[b->n] = (uint32_t)b->n_tails;
    b->len[b->n] = (uint32_t)n;
    if (n) memcpy(b->tails + b->n_tails, tail, n * sizeof *tail);
    b->n_tails += n;
    b->n++;
    return MXL_OK;
}

static void bb_free(brk_build *b) {
    mxl_free(b->head);
    mxl_free(b->off);
    mxl_free(b->len);
    mxl_free(b->tails);
}

typedef struct brk_key {
    int32_t head;
    uint32_t idx;
} brk_key;

static int cmp_key(const void *pa, const void *pb) {
    const brk_key *a = pa, *b = pb;
    if (a->head != b->head) return a->head < b->head ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Sorted, compact copy of the built list. */
static mxl_status bb_finish(brk_build *b, mxl_dry_breakers **out, mxl_error *err) {
    mxl_dry_breakers *r = mxl_calloc(1, sizeof *r);
    brk_key *order = mxl_malloc((b->n ? b->n : 1) * sizeof *order);
    if (r) {
        r->head = mxl_malloc((b->n ? b->n : 1) * sizeof *r->head);
        r->off = mxl_malloc((b->n ? b->n : 1) * sizeof *r->off);
        r->len = mxl_malloc((b->n ? b->n : 1) * sizeof *r->len);
        r->tails = mxl_malloc((b->n_tails ? b->n_tails : 1) * sizeof *r->tails);
    }
    if (!r || !order || !r->head || !r->off || !r->len || !r->tails) {
        mxl_free(order);
        mxl_dry_breakers_destroy(r);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory building the DRY sequence breakers");
    }
    for (size_t i = 0; i < b->n; i++) order[i] = (brk_key){b->head[i], (uint32_t)i};
    qsort(order, b->n, sizeof *order, cmp_key);
    size_t t = 0;
    for (size_t i = 0; i < b->n; i++) {
        uint32_t e = order[i].idx;
        r->head[i] = b->head[e];
        r->off[i] = (uint32_t)t;
        r->len[i] = b->len[e];
        if (b->len[e]) memcpy(r->tails + t, b->tails + b->off[e], b->len[e] * sizeof *r->tails);
        t += b->len[e];
    }
    r->n = b->n;
    r->n_tails = t;
    mxl_free(order);
    *out = r;
    return MXL_OK;
}

void mxl_dry_breakers_destroy(mxl_dry_breakers *b) {
    if (!b) return;
    mxl_free(b->head);
    mxl_free(b->off);
    mxl_free(b->len);
    mxl_free(b->tails);
    mxl_free(b);
}

mxl_status smp_dry_breakers_clone(const mxl_dry_breakers *b, mxl_dry_breakers **out, mxl_error *err) {
    brk_build bb = {0};
    mxl_status st = MXL_OK;
    for (size_t i = 0; i < b->n && !st; i++) st = bb_add(&bb, b->head[i], b->tails + b->off[i], b->len[i], err);
    if (!st) st = bb_finish(&bb, out, err);
    bb_free(&bb);
    return st;
}

mxl_status mxl_dry_breakers_from_seqs(const mxl_token_seq *seqs, size_t n, mxl_dry_breakers **out, mxl_error *err) {
    brk_build bb = {0};
    mxl_status st = MXL_OK;
    for (size_t i = 0; i < n && !st; i++)
        if (seqs[i].n > 0) st = bb_add(&bb, seqs[i].ids[0], seqs[i].ids + 1, seqs[i].n - 1, err);
    if (!st) st = bb_finish(&bb, out, err);
    bb_free(&bb);
    return st;
}

/* Does this token already have the entry (head, tail)? Entries of one head are contiguous while
 * building (one token at a time), from `first`. */
static bool bb_has(const brk_build *b, size_t first, const int32_t *tail, size_t n) {
    for (size_t i = first; i < b->n; i++)
        if (b->len[i] == n && (n == 0 || memcmp(b->tails + b->off[i], tail, n * sizeof *tail) == 0)) return true;
    return false;
}

mxl_status mxl_dry_breakers_from_strings(const char *const *strs, size_t n, int32_t n_vocab,
                                         const mxl_sampler_vocab *vocab, mxl_dry_breakers **out,
                                         mxl_error *err) {
    if (!vocab || !vocab->token_text || !vocab->tokenize)
        return mxl_error_set(err, MXL_ERR_ARG, "DRY sequence breakers given as strings need the tokenizer");
    brk_build bb = {0};
    mxl_status st = MXL_OK;
    int32_t toks[64];
    for (int32_t id = 0; id < n_vocab && !st; id++) {
        const char *word = NULL;
        size_t wlen = 0;
        if ((st = vocab->token_text(vocab->ctx, id, &word, &wlen, err))) break;
        size_t first = bb.n;
        for (size_t k = 0; k < n && !st; k++) {
            const char *str = strs[k];
            if (!str || !*str) continue;
            size_t slen = strlen(str);
            if (slen > DRY_MAX_CHAR_LEN) slen = DRY_MAX_CHAR_LEN;
            if (wlen >= slen && memmem(word, wlen, str, slen)) {
                st = bb_add(&bb, id, NULL, 0, err);
                continue;
            }
            /* each occurrence of str[0] from which the rest of the word is a prefix of str */
            for (size_t pos = 0; pos < wlen && !st; pos++) {
                if (word[pos] != str[0]) continue;
                size_t i = 1;
                bool match = true;
                for (; i < slen && i + pos < wlen; i++)
                    if (word[pos + i] != str[i]) {
                        match = false;
                        break;
                    }
                if (!match) continue;
                size_t nt = 0;
                if ((st = vocab->tokenize(vocab->ctx, str + i, slen - i, toks, 64, &nt, err))) break;
                if (nt > DRY_MAX_SEQ_LEN) nt = DRY_MAX_SEQ_LEN;
                if (!bb_has(&bb, first, toks, nt)) st = bb_add(&bb, id, toks, nt, err);
            }
        }
    }
    if (!st) st = bb_finish(&bb, out, err);
    bb_free(&bb);
    return st;
}

/* [*lo, *hi) = entries with this head */
static void brk_range(const mxl_dry_breakers *b, int32_t head, size_t *lo, size_t *hi) {
    size_t l = 0, h = b ? b->n : 0;
    while (l < h) {
        size_t m = l + (h - l) / 2;
        if (b->head[m] < head) l = m + 1;
        else h = m;
    }
    size_t e = l;
    while (b && e < b->n && b->head[e] == head) e++;
    *lo = l;
    *hi = e;
}

/* ---- the DRY stage ------------------------------------------------------------------------------ */

bool smp_dry_enabled(const smp_dry *d) { return d->multiplier != 0.0f && d->base >= 1.0f && d->last_n != 0; }

mxl_status smp_dry_reserve(smp_dry *d, size_t n, mxl_error *err) {
    if (!smp_dry_enabled(d)) return MXL_OK;
    if (d->last_n > 0 && n > (size_t)d->last_n) n = (size_t)d->last_n;
    if (n <= d->cap) return MXL_OK;
    if (n > INT32_MAX) return mxl_error_set(err, MXL_ERR_OVERFLOW, "DRY window of %zu tokens is too long", n);
    int32_t *rc = mxl_realloc(d->repeat_count, n * sizeof *rc);
    if (rc) d->repeat_count = rc;
    int32_t *t = mxl_realloc(d->touched, n * sizeof *t);
    if (t) d->touched = t;
    if (!rc || !t) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory for the DRY window (%zu tokens)", n);
    d->cap = n;
    return MXL_OK;
}

mxl_status smp_dry_init(smp_dry *d, const mxl_sampler_params *p, int32_t n_vocab, mxl_dry_breakers *breakers,
                        mxl_error *err) {
    memset(d, 0, sizeof *d);
    d->multiplier = p->dry_multiplier;
    d->base = p->dry_base;
    d->allowed_length = p->dry_allowed_length;
    d->last_n = p->dry_penalty_last_n;
    d->breakers = breakers;
    d->n_vocab = n_vocab;
    if (!smp_dry_enabled(d)) return MXL_OK;
    d->max_repeat = mxl_malloc((size_t)n_vocab * sizeof *d->max_repeat);
    if (!d->max_repeat) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < n_vocab; i++) d->max_repeat[i] = -1;
    /* a bounded window is allocated whole (capped; longer ones grow on use); -1 starts at 4096 */
    size_t cap = d->last_n > 0 ? (size_t)d->last_n : 4096;
    if (cap > 65536) cap = 65536;
    return smp_dry_reserve(d, cap, err);
}

void smp_dry_free(smp_dry *d) {
    mxl_free(d->max_repeat);
    mxl_free(d->repeat_count);
    mxl_free(d->touched);
    mxl_dry_breakers_destroy(d->breakers);
    memset(d, 0, sizeof *d);
}

mxl_status smp_dry_apply(smp_dry *d, float *logits, const int32_t *hist, size_t n, mxl_error *err) {
    if (!smp_dry_enabled(d)) return MXL_OK;
    size_t w = d->last_n < 0 || n < (size_t)d->last_n ? n : (size_t)d->last_n;
    if (w > INT32_MAX) w = INT32_MAX;
    const int last_n_repeat = (int)w;
    if (last_n_repeat <= d->allowed_length) return MXL_OK;
    mxl_status st = smp_dry_reserve(d, w, err);
    if (st) return st;
    /* rat(i): the i-th token from the end (ring_buffer::rat) */
    const int32_t *end = hist + n - 1;
#define RAT(i) (end[-(ptrdiff_t)(i)])
    int32_t *rc = d->repeat_count;
    memset(rc, 0, w * sizeof *rc);

    /* Step 1: the most recent breaker (longest matching tail) limits the repeat length */
    int rep_limit = last_n_repeat;
    for (int i = 0; i < last_n_repeat; i++) {
        size_t lo, hi;
        brk_range(d->breakers, RAT(i), &lo, &hi);
        if (lo == hi) continue;
        int longest = -1;
        for (size_t e = lo; e < hi; e++) {
            int seq_len = (int)d->breakers->len[e];
            if (seq_len > longest && seq_len <= i) {
                const int32_t *tail = d->breakers->tails + d->breakers->off[e];
                bool match = true;
                for (int o = 0; o < seq_len; o++)
                    if (tail[o] != RAT(i - o - 1)) {
                        match = false;
                        break;
                    }
                if (match) longest = seq_len;
            }
        }
        if (longest >= 0) {
            rep_limit = i - longest;
            break;
        }
    }
    if (rep_limit < d->allowed_length) return MXL_OK;

    /* Step 2: reverse Z-algorithm; rc[last - k] = length of the match between the suffix and the
     * sequence ending k tokens earlier, capped at rep_limit */
    {
        const int last = last_n_repeat - 1;
        int rt = 0, lt = 0;
        for (int k = 1; k < last_n_repeat; k++) {
            if (k > rt) {
                int m = 0;
                while (m + k < last_n_repeat && RAT(m) == RAT(m + k)) m++;
                rc[last - k] = m < rep_limit ? m : rep_limit;
                if (m > 0) {
                    lt = k;
                    rt = k + m - 1;
                }
            } else {
                int pp = k - lt;
                int right_part_len = rt - k + 1;
                if (rc[last - pp] < right_part_len) {
                    int m = rc[last - pp] < rep_limit ? rc[last - pp] : rep_limit;
                    rc[last - k] = m;
                } else {
                    int i = rt + 1;
                    while (i < last_n_repeat && RAT(i) == RAT(i - k)) i++;
                    int m = i - k < rep_limit ? i - k : rep_limit;
                    rc[last - k] = m;
                    lt = k;
                    rt = i - 1;
                }
            }
        }
    }

    /* Step 3: the token after each repeat would extend it; keep the longest per token */
    size_t n_touched = 0;
    for (int i = 0; i < last_n_repeat - 1; i++) {
        int repeat_len = rc[i];
        if (repeat_len < d->allowed_length) continue;
        int32_t tok = RAT(last_n_repeat - 2 - i);
        if (tok < 0 || tok >= d->n_vocab) continue;
        if (d->max_repeat[tok] < 0) d->touched[n_touched++] = tok;
        if (d->max_repeat[tok] < repeat_len) d->max_repeat[tok] = repeat_len;
    }
#undef RAT

    /* Step 4: the penalty, exponent clamped so base^exp stays a float */
    const float FLOAT_MAX_LOG = 88.7228391f;
    int max_exponent = 0;
    if (d->base > 1.000001f) max_exponent = (int)(FLOAT_MAX_LOG / logf(d->base));
    for (size_t t = 0; t < n_touched; t++) {
        int32_t tok = d->touched[t];
        int len = d->max_repeat[tok];
        d->max_repeat[tok] = -1;
        size_t lo, hi;
        brk_range(d->breakers, tok, &lo, &hi);
        bool single = false;
        for (size_t e = lo; e < hi; e++)
            if (d->breakers->len[e] == 0) single = true;
        if (single) continue;
        int repeat_exp = len - d->allowed_length;
        if (max_exponent > 0 && repeat_exp > max_exponent) repeat_exp = max_exponent;
        /* llama.cpp: float * std::pow(float, int), which is computed in double */
        float penalty = (float)((double)d->multiplier * pow((double)d->base, (double)repeat_exp));
        logits[tok] -= penalty;
    }
    return MXL_OK;
}
