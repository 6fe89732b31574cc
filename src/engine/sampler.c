/* sampler.c - penalties, top-k / top-p / min-p, temperature and the seeded draw (sampler.h).
 * Semantics follow llama.cpp's llama-sampling.cpp: penalties as in llama_sampler_penalties
 * (divide positive logits / multiply negative ones by the repeat penalty, subtract
 * count * frequency + presence), top-p keeps the smallest prefix whose mass reaches p (at least
 * one), min-p keeps tokens with p >= min_p * p_max, and the draw is over softmax(logit / temp). */
#include "engine/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/embed_topk.h"

typedef struct cand {
    int32_t id;
    float logit;
} cand;

struct mxl_sampler {
    mxl_sampler_params p;
    int32_t n_vocab;
    cand *cands;      /* [n_vocab] */
    uint32_t *counts; /* [n_vocab] occurrences in the penalty window */
    uint64_t rng[4];  /* xoshiro256** state */
};

void mxl_sampler_params_default(mxl_sampler_params *p) {
    memset(p, 0, sizeof *p);
    p->temp = 0.0f;
    p->top_p = 1.0f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = -1;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* uniform in [0, 1) with 53 random bits */
static double next_unit(uint64_t *s) { return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0); }

mxl_status mxl_sampler_create(const mxl_sampler_params *p, int32_t n_vocab, mxl_sampler **out, mxl_error *err) {
    if (n_vocab <= 0) return mxl_error_set(err, MXL_ERR_ARG, "empty vocabulary");
    if (!(p->temp >= 0) || !(p->top_p > 0 && p->top_p <= 1) || !(p->min_p >= 0 && p->min_p <= 1) ||
        p->top_k < 0 || !(p->repeat_penalty > 0) || p->repeat_last_n < -1)
        return mxl_error_set(err, MXL_ERR_ARG, "sampling parameters out of range (temp >= 0, 0 < top-p <= 1, 0 <= min-p <= 1, top-k >= 0, repetition penalty > 0)");
    mxl_sampler *s = calloc(1, sizeof *s);
    if (!s) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    if (!s->cands || !s->counts) {
        mxl_sampler_destroy(s);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    *out = s;
    return MXL_OK;
}

void mxl_sampler_destroy(mxl_sampler *s) {
    if (!s) return;
    free(s->cands);
    free(s->counts);
    free(s);
}

static void apply_penalties(mxl_sampler *s, float *logits, const int32_t *hist, size_t n) {
    const mxl_sampler_params *p = &s->p;
    if (p->repeat_last_n == 0 || (p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f))
        return;
    size_t start = p->repeat_last_n < 0 || (size_t)p->repeat_last_n >= n ? 0 : n - (size_t)p->repeat_last_n;
    for (size_t i = start; i < n; i++)
        if (hist[i] >= 0 && hist[i] < s->n_vocab) s->counts[hist[i]]++;
    for (size_t i = start; i < n; i++) {
        int32_t id = hist[i];
        if (id < 0 || id >= s->n_vocab || s->counts[id] == 0) continue;
        float l = logits[id];
        l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
        l -= (float)s->counts[id] * p->frequency_penalty + p->presence_penalty;
        logits[id] = l;
        s->counts[id] = 0; /* each id once; also resets the table for the next call */
    }
}

static int cmp_desc(const void *a, const void *b) {
    float x = ((const cand *)a)->logit, y = ((const cand *)b)->logit;
    if (x != y) return x > y ? -1 : 1;
    return ((const cand *)a)->id - ((const cand *)b)->id;
}

int32_t mxl_sampler_sample(mxl_sampler *s, float *logits, const int32_t *history, size_t n_history) {
    const mxl_sampler_params *p = &s->p;
    apply_penalties(s, logits, history, n_history);
    if (p->temp <= 0.0f) return (int32_t)mxl_cpu_argmax(logits, s->n_vocab);
    size_t n = 0;
    for (int32_t i = 0; i < s->n_vocab; i++)
        if (!isnan(logits[i]) && logits[i] != -INFINITY) s->cands[n++] = (cand){i, logits[i]};
    if (n == 0) return (int32_t)mxl_cpu_argmax(logits, s->n_vocab);
    qsort(s->cands, n, sizeof *s->cands, cmp_desc);
    if (p->top_k > 0 && (size_t)p->top_k < n) n = (size_t)p->top_k;
    /* probabilities of the untempered distribution over the kept candidates */
    double max = s->cands[0].logit, sum = 0;
    for (size_t i = 0; i < n; i++) sum += exp((double)s->cands[i].logit - max);
    if (p->top_p < 1.0f) {
        double cum = 0;
        size_t keep = n;
        for (size_t i = 0; i < n; i++) {
            cum += exp((double)s->cands[i].logit - max) / sum;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (p->min_p > 0.0f) {
        /* p_i >= min_p * p_max  <=>  logit_i >= logit_max + ln(min_p) */
        double thr = max + log((double)p->min_p);
        size_t keep = 1;
        while (keep < n && s->cands[keep].logit >= thr) keep++;
        n = keep;
    }
    double z = 0;
    for (size_t i = 0; i < n; i++) z += exp(((double)s->cands[i].logit - max) / p->temp);
    double u = next_unit(s->rng) * z, acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc += exp(((double)s->cands[i].logit - max) / p->temp);
        if (u < acc) return s->cands[i].id;
    }
    return s->cands[n - 1].id;
}
