/* sequence.c - one generating sequence (sequence.h). */
#include "engine/sequence.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/grammar_tok.h"
#include "engine/model_internal.h"
#include "engine/sampler_tok.h"

struct mxl_seq {
    mxl_gen_model *m;
    int64_t ctx_len, max_chunk, vocab;
    mxl_decoder_state *dec;
    mxl_sampler *smp;
    mxl_sampler_tok_vocab vocab_state; /* the tokenizer behind the sampler's DRY breakers */
    mxl_sampler_vocab smp_vocab;
    mxl_grammar_vocab *gvocab; /* token texts for grammars, built on the first constrained request */
    mxl_detok_stream *ds;
    float *logits; /* [vocab] current next-token logits */
    float *work;   /* [vocab] sampler's copy when fill_probs needs the raw logits after the pick */
    int32_t *ids;  /* [ctx_len] prompt then generated */
    size_t n_ids, n_prompt, n_fed, n_cached;
    size_t n_refill; /* after mxl_seq_preempt: positions to run again before decoding goes on */
    int64_t budget, n_gen;
    bool ignore_eos, finished, pending_feed;
    int n_probs;
    bool post_probs;
    int draft_max; /* the request's cap of a verification's draft (mxl_seq_params.draft_max) */
    mxl_decoder_lora kv_lora[MXL_DECODER_MAX_LORA]; /* the adapters the cached KV was computed with */
    int kv_n_lora;
    char *stop[MXL_SEQ_MAX_STOP];
    size_t stop_len[MXL_SEQ_MAX_STOP], n_stop, max_stop_len;
    char *held;   /* text decoded but not released (could be the start of a stop string) */
    size_t held_len, held_cap;
    char *out;    /* text released by the last call */
    size_t out_cap;
    char *piece;  /* detokenizer output buffer */
    float *vlogits; /* [MXL_SEQ_MAX_DRAFT + 1, vocab] a verification pass's logits (made on first use) */
    int32_t vtok[MXL_SEQ_MAX_DRAFT + 1];
    mxl_decoder_media media[MXL_DECODER_MAX_MEDIA]; /* this request's media rows (prompt positions) */
    uint64_t media_key[MXL_DECODER_MAX_MEDIA];       /* their keys (mxl_seq_params.media_keys), when keyed */
    int n_media;
    bool keyed;
    size_t media_from; /* the cache holds no reusable position from here on (the first media row
                          of what it ran; SIZE_MAX: none) */
};

static mxl_status seq_create(mxl_gen_model *m, mxl_kv_pool *kvp, int64_t ctx_len, int64_t max_chunk, mxl_seq **out,
                             mxl_error *err);

mxl_status mxl_seq_create(mxl_gen_model *m, int64_t ctx_len, int64_t max_chunk, mxl_seq **out,
                          mxl_error *err) {
    return seq_create(m, NULL, ctx_len, max_chunk, out, err);
}

mxl_status mxl_seq_create_pooled(mxl_gen_model *m, mxl_kv_pool *kvp, int64_t ctx_len, int64_t max_chunk, mxl_seq **out,
                                 mxl_error *err) {
    *out = NULL;
    if (!kvp) return mxl_error_set(err, MXL_ERR_ARG, "no KV pool given");
    return seq_create(m, kvp, ctx_len, max_chunk, out, err);
}

mxl_status mxl_seq_kv_pool_cfg(const mxl_gen_model *m, int64_t n_blocks, mxl_kv_pool_cfg *cfg, mxl_error *err) {
    return mxl_decoder_kv_pool_cfg(&m->dec, &m->kv, mxl_decoder_reference_default(), n_blocks, cfg, err);
}

static mxl_status seq_create(mxl_gen_model *m, mxl_kv_pool *kvp, int64_t ctx_len, int64_t max_chunk, mxl_seq **out,
                             mxl_error *err) {
    *out = NULL;
    if (ctx_len < 2) return mxl_error_set(err, MXL_ERR_ARG, "context length %lld is too small", (long long)ctx_len);
    mxl_seq *s = mxl_calloc(1, sizeof *s);
    if (!s) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    s->m = m;
    s->media_from = SIZE_MAX;
    s->ctx_len = ctx_len;
    s->max_chunk = max_chunk > 0 ? max_chunk : 256;
    s->vocab = m->dec.hp.vocab;
    mxl_sampler_tok_vocab_init(&s->vocab_state, m->tok, &s->smp_vocab);
    mxl_status st = kvp ? mxl_decoder_state_create_pooled(&m->dec, kvp, ctx_len, s->max_chunk, m->pool, &s->dec, err)
                        : mxl_decoder_state_create_ex(&m->dec, ctx_len, s->max_chunk, m->pool, &m->kv, &s->dec, err);
    if (!st) st = mxl_detok_stream_create(m->tok, true, &s->ds, err);
    if (!st) {
        s->logits = mxl_malloc((size_t)s->vocab * sizeof(float));
        s->work = mxl_malloc((size_t)s->vocab * sizeof(float));
        s->ids = mxl_malloc((size_t)ctx_len * sizeof(int32_t));
        if (!s->logits || !s->work || !s->ids) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    if (st) {
        mxl_seq_destroy(s);
        return st;
    }
    *out = s;
    return MXL_OK;
}

static void clear_request(mxl_seq *s) {
    for (size_t i = 0; i < s->n_stop; i++) mxl_free(s->stop[i]);
    s->n_stop = 0;
    s->max_stop_len = 0;
    mxl_sampler_destroy(s->smp);
    s->smp = NULL;
}

void mxl_seq_destroy(mxl_seq *s) {
    if (!s) return;
    clear_request(s);
    mxl_sampler_tok_vocab_free(&s->vocab_state);
    mxl_grammar_vocab_destroy(s->gvocab);
    mxl_decoder_state_destroy(s->dec);
    mxl_detok_stream_destroy(s->ds);
    mxl_free(s->logits);
    mxl_free(s->work);
    mxl_free(s->ids);
    mxl_free(s->held);
    mxl_free(s->out);
    mxl_free(s->piece);
    mxl_free(s->vlogits);
    mxl_free(s);
}

int64_t mxl_seq_ctx_len(const mxl_seq *s) { return s->ctx_len; }
int64_t mxl_seq_n_prompt(const mxl_seq *s) { return (int64_t)s->n_prompt; }
int64_t mxl_seq_n_generated(const mxl_seq *s) { return s->n_gen; }
int64_t mxl_seq_n_remaining(const mxl_seq *s) { return s->budget - s->n_gen; }
int64_t mxl_seq_n_cached(const mxl_seq *s) { return (int64_t)s->n_cached; }

const mxl_decoder_state *mxl_seq_kv_state(const mxl_seq *s) { return s->dec; }

bool mxl_seq_pending_feed(const mxl_seq *s) { return s->pending_feed; }

mxl_status mxl_seq_adopt_prefix(mxl_seq *s, const int32_t *blocks, const int32_t *ids, size_t n, const void *rec, mxl_error *err) {
    if (ids && (int64_t)n > s->ctx_len) return mxl_error_set(err, MXL_ERR_ARG, "a cached prefix of %zu tokens exceeds the context", n);
    if (!ids && n > s->n_ids) return mxl_error_set(err, MXL_ERR_ARG, "a cached prefix of %zu tokens exceeds the sequence", n);
    mxl_status st = mxl_decoder_state_adopt_rec(s->dec, blocks, (int64_t)n, rec, err);
    if (st) return st;
    if (ids) {
        memmove(s->ids, ids, n * sizeof(int32_t));
        s->n_ids = n;
    }
    s->n_fed = n;
    return MXL_OK;
}

int32_t mxl_seq_media_token(uint64_t key, int64_t i) {
    uint64_t h = key + (uint64_t)i * 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
    return (int32_t)(-1 - (int64_t)(h & 0x7fffffff));
}

void mxl_seq_key_ids(const int32_t *ids, size_t n, const mxl_decoder_media *media, const uint64_t *keys, int n_media, int32_t *out) {
    memmove(out, ids, n * sizeof(int32_t));
    for (int i = 0; keys && i < n_media; i++)
        for (int64_t r = media[i].row; keys[i] && r < media[i].row + media[i].n && r < (int64_t)n; r++)
            out[r] = mxl_seq_media_token(keys[i], r - media[i].row);
}

void mxl_seq_cache_ids(const mxl_seq *s, size_t n, int32_t *out) {
    if (n > s->n_ids) n = s->n_ids;
    mxl_seq_key_ids(s->ids, n, s->media, s->keyed ? s->media_key : NULL, s->n_media, out);
}

void mxl_seq_set_cached_media(mxl_seq *s, const mxl_decoder_media *media, const uint64_t *keys, int n_media) {
    if (n_media < 0 || n_media > MXL_DECODER_MAX_MEDIA || !keys) return;
    memcpy(s->media, media, (size_t)n_media * sizeof *media);
    memcpy(s->media_key, keys, (size_t)n_media * sizeof *keys);
    s->n_media = n_media;
    s->keyed = true;
    s->media_from = n_media ? (size_t)media[0].row : SIZE_MAX;
}

/* The longest prefix of the tokens the cache holds (positions it ran) that the prompt shares, as
 * the prompt cache compares them (media rows by their keys when keyed). */
static size_t shared_prefix(const mxl_seq *s, const int32_t *prompt, size_t n_prompt, const mxl_seq_params *p) {
    size_t keep = 0, n = s->n_fed < n_prompt ? s->n_fed : n_prompt;
    if (!s->keyed && !p->media_keys) {
        while (keep < n && s->ids[keep] == prompt[keep]) keep++;
        return keep;
    }
    int32_t *a = mxl_malloc((n ? n : 1) * sizeof(int32_t)), *b = mxl_malloc((n ? n : 1) * sizeof(int32_t));
    if (a && b) {
        mxl_seq_cache_ids(s, n, a);
        mxl_seq_key_ids(prompt, n, p->media, p->media_keys, p->n_media, b);
        while (keep < n && a[keep] == b[keep]) keep++;
    }
    mxl_free(a), mxl_free(b);
    return keep;
}

void mxl_seq_preempt(mxl_seq *s) {
    if (s->n_fed > s->n_refill) s->n_refill = s->n_fed;
    s->n_fed = 0;
    mxl_decoder_state_truncate(s->dec, 0);
}
const float *mxl_seq_logits(const mxl_seq *s) { return s->logits; }
const int32_t *mxl_seq_tokens(const mxl_seq *s, size_t *n) {
    *n = s->n_ids;
    return s->ids;
}

static bool reserve(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *p = mxl_realloc(*buf, c);
    if (!p) return false;
    *buf = p;
    *cap = c;
    return true;
}

mxl_status mxl_seq_start(mxl_seq *s, const int32_t *prompt, size_t n_prompt,
                         const mxl_seq_params *p, mxl_error *err) {
    clear_request(s);
    if (n_prompt == 0) return mxl_error_set(err, MXL_ERR_ARG, "the prompt is empty after tokenization");
    if ((int64_t)n_prompt >= s->ctx_len)
        return mxl_error_set(err, MXL_ERR_ARG, "the prompt has %zu tokens, which does not fit the context of %lld",
                             n_prompt, (long long)s->ctx_len);
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= s->vocab)
            return mxl_error_set(err, MXL_ERR_ARG, "token id %d is outside the vocabulary (%lld)", prompt[i], (long long)s->vocab);
    if (p->n_stop > MXL_SEQ_MAX_STOP) return mxl_error_set(err, MXL_ERR_ARG, "at most %d stop strings", MXL_SEQ_MAX_STOP);
    if (p->n_media < 0 || p->n_media > MXL_DECODER_MAX_MEDIA)
        return mxl_error_set(err, MXL_ERR_ARG, "at most %d images per request", MXL_DECODER_MAX_MEDIA);
    for (int i = 0; i < p->n_media; i++)
        if (p->media[i].row < (i ? p->media[i - 1].row + p->media[i - 1].n : 0) || p->media[i].row + p->media[i].n > (int64_t)n_prompt)
            return mxl_error_set(err, MXL_ERR_ARG, "image rows %lld..%lld are outside the prompt or out of order", (long long)p->media[i].row,
                                 (long long)(p->media[i].row + p->media[i].n));
    mxl_sampler_params sp = p->sampling;
    mxl_status st = MXL_OK;
    if (sp.grammar && *sp.grammar) { /* constrained output: the matcher reads every token's text */
        if (!s->gvocab)
            st = mxl_grammar_vocab_from_tokenizer(s->m->tok, (int32_t)s->vocab, s->m->eos, (size_t)s->m->n_eos, &s->gvocab, err);
        sp.grammar_vocab = s->gvocab;
    }
    if (!st) st = mxl_sampler_create_with_vocab(&sp, (int32_t)s->vocab, &s->smp_vocab, &s->smp, err);
    if (!st) st = mxl_sampler_reserve(s->smp, (size_t)s->ctx_len, err);
    if (st) {
        clear_request(s);
        return st;
    }
    for (size_t i = 0; i < p->n_stop; i++) {
        size_t len = strlen(p->stop[i]);
        if (len == 0) continue;
        if (!(s->stop[s->n_stop] = mxl_strdup(p->stop[i]))) {
            clear_request(s);
            return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        }
        s->stop_len[s->n_stop++] = len;
        if (len > s->max_stop_len) s->max_stop_len = len;
    }
    /* a fresh detokenizer state: recreate (cheap) rather than reaching into its internals */
    mxl_detok_stream_destroy(s->ds);
    s->ds = NULL;
    if ((st = mxl_detok_stream_create(s->m->tok, !p->keep_special, &s->ds, err))) {
        clear_request(s);
        return st;
    }
    /* prompt cache: keep the KV of the longest prefix this prompt shares with what the cache holds
     * (the last request's prompt and answer), but always run at least one token for the logits */
    size_t keep = 0;
    if (p->cache_prompt) {
        keep = shared_prefix(s, prompt, n_prompt, p);
        if (keep == n_prompt) keep--;
    }
    /* KV computed under another adapter (or scale) is another model's */
    if ((st = mxl_decoder_state_set_lora(s->dec, p->lora, p->n_lora, err))) {
        clear_request(s);
        return st;
    }
    if (p->n_lora != s->kv_n_lora || (p->n_lora && memcmp(p->lora, s->kv_lora, (size_t)p->n_lora * sizeof *p->lora) != 0)) keep = 0;
    if (p->n_lora) memcpy(s->kv_lora, p->lora, (size_t)p->n_lora * sizeof *p->lora);
    s->kv_n_lora = p->n_lora;
    /* positions at or after an image's are the image's, whatever their token ids say: kept only
     * where both requests keyed them alike, and never from inside a block that runs whole */
    if (!(s->keyed && p->media_keys) && keep > s->media_from) keep = s->media_from;
    if (!p->media_keys && p->n_media && keep > (size_t)p->media[0].row) keep = (size_t)p->media[0].row;
    for (int i = 0; p->media_keys && i < p->n_media; i++)
        if ((int64_t)keep > p->media[i].row && (int64_t)keep < p->media[i].row + p->media[i].n && !mxl_decoder_media_splittable(&p->media[i]))
            keep = (size_t)p->media[i].row;
    if (p->n_media) memcpy(s->media, p->media, (size_t)p->n_media * sizeof *p->media);
    if (p->media_keys) memcpy(s->media_key, p->media_keys, (size_t)p->n_media * sizeof *p->media_keys);
    s->n_media = p->n_media;
    s->keyed = p->media_keys != NULL;
    s->media_from = p->n_media ? (size_t)p->media[0].row : SIZE_MAX; /* (a text prompt re-runs everything from keep <= the old mark) */
    mxl_decoder_state_truncate(s->dec, (int64_t)keep);
    keep = (size_t)mxl_decoder_state_pos(s->dec); /* (recurrent layers start over rather than go back) */
    /* M-RoPE: the kept rows' images set the positions of the rows after them (whichever request
     * or slot ran them: keyed rows hold this prompt's images) */
    if (p->media_keys) mxl_decoder_state_set_media_prefix(s->dec, p->media, p->n_media, (int64_t)keep);
    memcpy(s->ids, prompt, n_prompt * sizeof(int32_t));
    s->n_ids = s->n_prompt = n_prompt;
    s->n_fed = keep;
    s->n_refill = 0;
    s->n_cached = keep;
    s->n_gen = 0;
    int64_t room = s->ctx_len - (int64_t)n_prompt;
    s->budget = p->max_tokens >= 0 && p->max_tokens < room ? p->max_tokens : room;
    s->ignore_eos = p->ignore_eos;
    s->n_probs = p->n_probs < 0 ? 0 : p->n_probs > MXL_SEQ_MAX_PROBS ? MXL_SEQ_MAX_PROBS : p->n_probs;
    s->post_probs = p->post_sampling_probs;
    s->draft_max = p->draft_max;
    s->finished = false;
    s->pending_feed = false;
    s->held_len = 0;
    return MXL_OK;
}

int64_t mxl_seq_prefill_left(const mxl_seq *s) {
    size_t target = s->n_refill > s->n_prompt ? s->n_refill : s->n_prompt;
    return (int64_t)(target - (s->n_fed < target ? s->n_fed : target));
}

mxl_status mxl_seq_prefill(mxl_seq *s, int64_t max_tokens, mxl_error *err) {
    int64_t left = mxl_seq_prefill_left(s);
    if (left <= 0) return MXL_OK;
    int64_t n = max_tokens > 0 && max_tokens < left ? max_tokens : left;
    /* this chunk's media rows, relative to it; a bidirectional block is never cut: the chunk ends
     * before it, or takes it whole when it starts the chunk; a causal one (attending like text)
     * may be, the chunk taking the rows it reaches */
    mxl_decoder_media md[MXL_DECODER_MAX_MEDIA];
    int k = 0;
    const int64_t at = (int64_t)s->n_fed, H = s->m->dec.hp.hidden;
    for (int i = 0; i < s->n_media; i++) {
        const mxl_decoder_media *m = &s->media[i];
        /* (blocks joined to the ones before them come with those) */
        const int64_t end = i == 0 || !s->media[i - 1].joined ? mxl_decoder_media_unit_end(s->media, s->n_media, i) : m->row + m->n;
        if (m->row + m->n <= at || m->row >= at + n) continue;
        if (mxl_decoder_media_splittable(m)) {
            const int64_t a = m->row > at ? m->row : at, e = m->row + m->n < at + n ? m->row + m->n : at + n;
            md[k++] = mxl_decoder_media_slice(m, a, e, at, H);
            continue;
        }
        if (m->row < at) return mxl_error_set(err, MXL_ERR_INTERNAL, "a prompt chunk starts inside an image");
        if (end > at + n) {
            if (m->row > at) {
                n = m->row - at;
                break;
            }
            n = end - at < left ? end - at : left;
        }
        md[k] = *m, md[k++].row -= at; /* (its M-RoPE grid too) */
    }
    /* (a chunk cut short before a bidirectional unit: the causal rows taken before it, trimmed) */
    int kk = 0;
    for (int i = 0; i < k; i++)
        if (md[i].row < n) {
            md[kk] = md[i];
            if (md[kk].row + md[kk].n > n) md[kk].n = n - md[kk].row;
            kk++;
        }
    k = kk;
    mxl_status st = k ? mxl_decoder_forward_media(&s->m->dec, s->dec, s->ids + s->n_fed, n, md, k, s->logits, err)
                      : mxl_decoder_forward(&s->m->dec, s->dec, s->ids + s->n_fed, n, s->logits, err);
    if (st) return st;
    s->n_fed += (size_t)n;
    if (s->n_fed >= s->n_refill) s->n_refill = 0; /* back where the preemption left it */
    return MXL_OK;
}

mxl_status mxl_seq_prefill_batch(mxl_seq *const *seqs, const int64_t *counts, int64_t n, int32_t *tokens_scratch,
                                 float *logits_scratch, mxl_error *err) {
    if (n <= 0) return MXL_OK;
    const mxl_gen_model *m = seqs[0]->m;
    mxl_decoder_state *states[MXL_SEQ_MAX_BATCH];
    if (n > MXL_SEQ_MAX_BATCH) return mxl_error_set(err, MXL_ERR_ARG, "at most %d sequences per batch", MXL_SEQ_MAX_BATCH);
    int64_t rows = 0;
    for (int64_t i = 0; i < n; i++) {
        if (seqs[i]->n_media && seqs[i]->n_fed < (size_t)(seqs[i]->media[seqs[i]->n_media - 1].row + seqs[i]->media[seqs[i]->n_media - 1].n))
            return mxl_error_set(err, MXL_ERR_INTERNAL, "sequence %lld of the batch has images to run (mxl_seq_prefill runs them)", (long long)i);
        if (seqs[i]->m != m || counts[i] < 1 || counts[i] > mxl_seq_prefill_left(seqs[i]))
            return mxl_error_set(err, MXL_ERR_INTERNAL, "sequence %lld of the batch has no %lld prompt tokens to run",
                                 (long long)i, (long long)counts[i]);
        states[i] = seqs[i]->dec;
        memcpy(tokens_scratch + rows, seqs[i]->ids + seqs[i]->n_fed, (size_t)counts[i] * sizeof(int32_t));
        rows += counts[i];
    }
    mxl_status st = mxl_decoder_forward_spans(&m->dec, states, tokens_scratch, counts, n, logits_scratch, err);
    if (st) return st;
    size_t vocab = (size_t)m->dec.hp.vocab;
    for (int64_t i = 0; i < n; i++) {
        mxl_seq *s = seqs[i];
        memcpy(s->logits, logits_scratch + (size_t)i * vocab, vocab * sizeof(float));
        s->n_fed += (size_t)counts[i];
        if (s->n_fed >= s->n_refill) s->n_refill = 0; /* back where the preemption left it */
    }
    return MXL_OK;
}

static bool is_eos(const mxl_gen_model *m, int32_t id) {
    for (int i = 0; i < m->n_eos; i++)
        if (m->eos[i] == id) return true;
    return false;
}

/* Log-probabilities of the chosen token and the top alternatives from the raw logits. */
static void fill_probs(const mxl_seq *s, int32_t chosen, mxl_seq_event *ev) {
    float mx = -INFINITY;
    for (int64_t v = 0; v < s->vocab; v++)
        if (s->logits[v] > mx) mx = s->logits[v];
    double sum = 0;
    for (int64_t v = 0; v < s->vocab; v++) sum += exp((double)(s->logits[v] - mx));
    float lse = mx + (float)log(sum);
    ev->logprob = chosen >= 0 ? s->logits[chosen] - lse : 0.0f;
    ev->n_top = 0;
    for (int64_t v = 0; v < s->vocab; v++) { /* insertion into a short sorted list */
        float l = s->logits[v];
        int k = ev->n_top;
        if (k == s->n_probs && l <= s->logits[ev->top_ids[k - 1]]) continue;
        if (k < s->n_probs) ev->n_top++;
        else k--;
        while (k > 0 && s->logits[ev->top_ids[k - 1]] < l) {
            ev->top_ids[k] = ev->top_ids[k - 1];
            k--;
        }
        ev->top_ids[k] = (int32_t)v;
    }
    for (int i = 0; i < ev->n_top; i++) ev->top_logprobs[i] = s->logits[ev->top_ids[i]] - lse;
}

/* Probabilities after the sampler chain (llama-server's post_sampling_probs): the chosen token's
 * and the n_probs most likely candidates of the set it was drawn from, zero-probability ones left
 * out. */
static void fill_post_probs(const mxl_seq *s, int32_t chosen, mxl_seq_event *ev) {
    size_t n;
    const mxl_sampler_cand *c = mxl_sampler_last(s->smp, &n);
    ev->post_sampling = true;
    ev->logprob = 0.0f;
    ev->n_top = 0;
    for (size_t i = 0; i < n; i++) {
        float p = c[i].p;
        if (c[i].id == chosen) ev->logprob = p;
        if (!(p > 0.0f)) continue;
        int k = ev->n_top;
        if (k == s->n_probs && p <= ev->top_logprobs[k - 1]) continue;
        if (k < s->n_probs) ev->n_top++;
        else k--;
        while (k > 0 && ev->top_logprobs[k - 1] < p) {
            ev->top_ids[k] = ev->top_ids[k - 1];
            ev->top_logprobs[k] = ev->top_logprobs[k - 1];
            k--;
        }
        ev->top_ids[k] = c[i].id;
        ev->top_logprobs[k] = p;
    }
}

/* Moves n bytes from the front of `held` to the released output. */
static void release(mxl_seq *s, size_t n, mxl_seq_event *ev) {
    if (n == 0) return; /* held may still be unallocated (NULL): memcpy needs valid pointers */
    memcpy(s->out + ev->text_len, s->held, n);
    ev->text_len += n;
    memmove(s->held, s->held + n, s->held_len - n);
    s->held_len -= n;
}

/* Releases what can no longer become a stop string; on a full match ends the request. */
static void scan_stops(mxl_seq *s, mxl_seq_event *ev, bool final) {
    size_t best = SIZE_MAX, best_i = 0;
    for (size_t i = 0; i < s->n_stop; i++) {
        const char *hit = s->stop_len[i] <= s->held_len ? memmem(s->held, s->held_len, s->stop[i], s->stop_len[i]) : NULL;
        if (hit && (size_t)(hit - s->held) < best) best = (size_t)(hit - s->held), best_i = i;
    }
    if (best != SIZE_MAX) {
        release(s, best, ev);
        s->held_len = 0;
        ev->finished = true;
        ev->finish_reason = "stop";
        ev->stop_word = s->stop[best_i];
        s->finished = true;
        return;
    }
    if (final || s->n_stop == 0) {
        release(s, s->held_len, ev);
        return;
    }
    /* keep the longest suffix that is a proper prefix of some stop string */
    size_t keep = 0;
    for (size_t i = 0; i < s->n_stop; i++) {
        size_t maxk = s->stop_len[i] - 1 < s->held_len ? s->stop_len[i] - 1 : s->held_len;
        for (size_t k = maxk; k > keep; k--)
            if (memcmp(s->held + s->held_len - k, s->stop[i], k) == 0) {
                keep = k;
                break;
            }
    }
    release(s, s->held_len - keep, ev);
}

static mxl_status hold(mxl_seq *s, const char *text, size_t len, mxl_error *err) {
    if (len == 0) return MXL_OK;
    if (!reserve(&s->held, &s->held_cap, s->held_len + len) || !reserve(&s->out, &s->out_cap, s->held_len + len + 1))
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    memcpy(s->held + s->held_len, text, len);
    s->held_len += len;
    return MXL_OK;
}

static mxl_status finish(mxl_seq *s, const char *reason, mxl_seq_event *ev, mxl_error *err) {
    size_t len = 0;
    mxl_status st = mxl_detok_stream_flush(s->ds, &s->piece, &len, err);
    if (st) return st;
    if (len && (st = hold(s, s->piece, len, err))) return st;
    scan_stops(s, ev, false);
    if (!ev->finished) {
        scan_stops(s, ev, true);
        ev->finished = true;
        ev->finish_reason = reason;
    }
    s->finished = true;
    return MXL_OK;
}

mxl_status mxl_seq_sample(mxl_seq *s, mxl_seq_event *ev, mxl_error *err) {
    memset(ev, 0, sizeof *ev);
    ev->token = -1;
    if (!reserve(&s->out, &s->out_cap, 1)) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    ev->text = s->out;
    if (s->finished) return mxl_error_set(err, MXL_ERR_INTERNAL, "sample after the sequence finished");
    if (mxl_seq_prefill_left(s) > 0 || s->pending_feed)
        return mxl_error_set(err, MXL_ERR_INTERNAL, "sample before the prompt or the last token was run");
    if (s->n_gen >= s->budget) return finish(s, "length", ev, err);
    /* the sampler's stages change the row it picks from; only fill_probs reads the raw logits
     * afterwards, so only then does the sampler get a copy (a vocabulary row per token) */
    float *l = s->logits;
    if (s->n_probs > 0 && !s->post_probs) {
        memcpy(s->work, s->logits, (size_t)s->vocab * sizeof(float));
        l = s->work;
    }
    if (s->ignore_eos) /* as llama.cpp: EOS ids can never be sampled */
        for (int k = 0; k < s->m->n_eos; k++) l[s->m->eos[k]] = -INFINITY;
    int32_t id;
    /* the sampler checks the logits first: NaN / +inf is reported, never sampled */
    mxl_status st = mxl_sampler_pick(s->smp, l, s->ids, s->n_ids, &id, err);
    if (st) return st;
    if (s->n_probs > 0 && s->post_probs) fill_post_probs(s, id, ev);
    else if (s->n_probs > 0) fill_probs(s, id, ev);
    if (!s->ignore_eos && is_eos(s->m, id)) return finish(s, "stop", ev, err);
    ev->token = id;
    s->ids[s->n_ids++] = id;
    s->n_gen++;
    size_t len = 0;
    st = mxl_detok_stream_step(s->ds, id, &s->piece, &len, err);
    if (st) return st;
    if (len && (st = hold(s, s->piece, len, err))) return st;
    scan_stops(s, ev, false);
    if (ev->finished) return MXL_OK;
    /* out of budget or context: this was the last token */
    if (s->n_gen >= s->budget) return finish(s, "length", ev, err);
    s->pending_feed = true;
    return MXL_OK;
}

mxl_status mxl_seq_feed(mxl_seq *s, mxl_error *err) {
    if (!s->pending_feed) return mxl_error_set(err, MXL_ERR_INTERNAL, "nothing to feed");
    int32_t id = s->ids[s->n_ids - 1];
    mxl_status st = mxl_decoder_forward(&s->m->dec, s->dec, &id, 1, s->logits, err);
    if (st) return st;
    s->pending_feed = false;
    s->n_fed = s->n_ids;
    return MXL_OK;
}

mxl_status mxl_seq_feed_batch(mxl_seq *const *seqs, int64_t n, float *logits_scratch, mxl_error *err) {
    if (n <= 0) return MXL_OK;
    if (n == 1) return mxl_seq_feed(seqs[0], err);
    const mxl_gen_model *m = seqs[0]->m;
    mxl_decoder_state *states[MXL_SEQ_MAX_BATCH];
    int32_t ids[MXL_SEQ_MAX_BATCH];
    if (n > MXL_SEQ_MAX_BATCH) return mxl_error_set(err, MXL_ERR_ARG, "at most %d sequences per batch", MXL_SEQ_MAX_BATCH);
    for (int64_t i = 0; i < n; i++) {
        if (!seqs[i]->pending_feed || seqs[i]->m != m) return mxl_error_set(err, MXL_ERR_INTERNAL, "nothing to feed");
        states[i] = seqs[i]->dec;
        ids[i] = seqs[i]->ids[seqs[i]->n_ids - 1];
    }
    mxl_status st = mxl_decoder_forward_batch(&m->dec, states, ids, n, logits_scratch, err);
    if (st) return st;
    size_t vocab = (size_t)m->dec.hp.vocab;
    for (int64_t i = 0; i < n; i++) {
        memcpy(seqs[i]->logits, logits_scratch + (size_t)i * vocab, vocab * sizeof(float));
        seqs[i]->pending_feed = false;
        seqs[i]->n_fed = seqs[i]->n_ids;
    }
    return MXL_OK;
}

const char *mxl_seq_cannot_verify(const mxl_seq *s) {
    if (mxl_decoder_state_rec_bytes(s->dec) > 0)
        return "a model with recurrent layers cannot take back the state of rejected draft tokens";
    return NULL;
}

int mxl_seq_draft_room(const mxl_seq *s, int n_draft) {
    int64_t k = n_draft < 0 ? 0 : n_draft > MXL_SEQ_MAX_DRAFT ? MXL_SEQ_MAX_DRAFT : n_draft;
    if (s->draft_max < 0) return 0;
    if (s->draft_max > 0 && k > s->draft_max) k = s->draft_max;
    /* the draft's last position still needs a pick within the budget and the context; the pass
     * takes the pending token too */
    const int64_t budget = s->budget - s->n_gen - 1, ctx = s->ctx_len - (int64_t)s->n_ids - 1,
                  pass = mxl_decoder_state_max_batch(s->dec) - 1;
    if (k > budget) k = budget;
    if (k > ctx) k = ctx;
    if (k > pass) k = pass;
    return k < 0 ? 0 : (int)k;
}

mxl_status mxl_seq_verify(mxl_seq *s, const int32_t *draft, int n_draft, mxl_seq_event_fn on_event, void *ctx, int *n_accepted,
                          mxl_error *err) {
    *n_accepted = 0;
    if (!s->pending_feed) return mxl_error_set(err, MXL_ERR_INTERNAL, "nothing to feed");
    const int k = mxl_seq_draft_room(s, n_draft);
    if (k > 0 && mxl_seq_cannot_verify(s)) return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s", mxl_seq_cannot_verify(s));
    for (int i = 0; i < k; i++)
        if (draft[i] < 0 || draft[i] >= s->vocab)
            return mxl_error_set(err, MXL_ERR_ARG, "draft token id %d is outside the vocabulary (%lld)", draft[i], (long long)s->vocab);
    const size_t V = (size_t)s->vocab, base = s->n_ids - 1; /* the pending token's position */
    if (k > 0 && !s->vlogits && !(s->vlogits = mxl_malloc((MXL_SEQ_MAX_DRAFT + 1) * V * sizeof(float))))
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    s->vtok[0] = s->ids[base];
    memcpy(s->vtok + 1, draft, (size_t)k * sizeof(int32_t));
    mxl_status st = k > 0 ? mxl_decoder_forward_all(&s->m->dec, s->dec, s->vtok, k + 1, s->vlogits, err)
                          : mxl_decoder_forward(&s->m->dec, s->dec, s->vtok, 1, s->logits, err);
    if (st) return st;
    int acc = 0;
    for (int i = 0; i <= k; i++) {
        /* row i: the logits after the pending token and i kept draft tokens */
        if (k > 0) memcpy(s->logits, s->vlogits + (size_t)i * V, V * sizeof(float));
        s->pending_feed = false;
        s->n_fed = base + 1 + (size_t)i;
        mxl_seq_event ev;
        if ((st = mxl_seq_sample(s, &ev, err))) break;
        const int stop = on_event ? on_event(ctx, &ev) : 0;
        if (ev.finished || stop || i == k || ev.token != draft[i]) break;
        acc++;
    }
    /* the cache keeps the pending token and the kept draft tokens */
    mxl_decoder_state_truncate(s->dec, (int64_t)(base + 1 + (size_t)acc));
    *n_accepted = acc;
    return st;
}
