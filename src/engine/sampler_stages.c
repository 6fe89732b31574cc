/* sampler_stages.c - the sampler chain's stages on a candidate array (sampler_internal.h), each
 * written after the same-named sampler of llama.cpp's src/llama-sampler.cpp (commit 0c1e570, as
 * vendored by llama-cpp-python 0.3.36) with min_keep = 0 (llama-server's default). Arithmetic
 * stays in float where llama.cpp's does, so cut-offs land on the same tokens. Sorting ties (equal
 * logits), which llama.cpp leaves to std::partial_sort, go to the lower id here. The one
 * deliberate difference: typical-p skips p = 0 entries in the entropy (llama.cpp gets NaN). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampler_internal.h"

/* ---- random numbers: xoshiro256**, seeded through splitmix64 ---------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t smp_rng_next(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

void smp_rng_seed(uint64_t *s, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
}

/* 53 random bits */
double smp_rng_unit(uint64_t *s) { return (double)(smp_rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

/* ---- sorting ------------------------------------------------------------------------------------ */

/* a ranks before b: larger logit, or equal logit and lower id */
static bool before(const mxl_sampler_cand *a, const mxl_sampler_cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cmp_desc(const void *pa, const void *pb) {
    const mxl_sampler_cand *a = pa, *b = pb;
    if (before(a, b)) return -1;
    if (before(b, a)) return 1;
    return 0;
}

static void swap_cand(mxl_sampler_cand *a, mxl_sampler_cand *b) {
    mxl_sampler_cand t = *a;
    *a = *b;
    *b = t;
}

/* min-heap on "ranks before": the root is the worst of the kept k */
static void heap_down(mxl_sampler_cand *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(&h[m], &h[l])) m = l;
        if (r < n && before(&h[m], &h[r])) m = r;
        if (m == i) return;
        swap_cand(&h[i], &h[m]);
        i = m;
    }
}

void smp_sort_prefix(mxl_sampler_cand *d, size_t n, size_t k) {
    if (k >= n || k * 8 >= n) { /* close to a full sort: qsort the lot */
        qsort(d, n, sizeof *d, cmp_desc);
        return;
    }
    if (k == 0) return;
    /* O(n log k) selection: keep the k best in a heap at d[0..k), swapping better ones in */
    for (size_t i = k / 2; i-- > 0;) heap_down(d, k, i);
    for (size_t i = k; i < n; i++)
        if (before(&d[i], &d[0])) {
            swap_cand(&d[i], &d[0]);
            heap_down(d, k, 0);
        }
    qsort(d, k, sizeof *d, cmp_desc);
}

/* llama_token_data_array_partial_sort_inplace: the k best, sorted, and nothing else */
static void partial_sort_inplace(smp_cur *c, size_t k) {
    smp_sort_prefix(c->d, c->n, k);
    c->n = k;
    c->sorted = true;
}

/* ---- stages ------------------------------------------------------------------------------------- */

/* llama_sampler_softmax_impl */
void smp_softmax(smp_cur *c, bool do_sort) {
    if (c->n == 0) return;
    if (do_sort && !c->sorted) partial_sort_inplace(c, c->n);
    float max_l = c->d[0].logit;
    if (!c->sorted)
        for (size_t i = 1; i < c->n; i++) max_l = c->d[i].logit > max_l ? c->d[i].logit : max_l;
    float cum = 0.0f;
    for (size_t i = 0; i < c->n; i++) {
        float p = expf(c->d[i].logit - max_l);
        c->d[i].p = p;
        cum += p;
    }
    for (size_t i = 0; i < c->n; i++) c->d[i].p /= cum;
}

/* llama_sampler_top_k_impl */
void smp_top_k(smp_cur *c, int32_t k) {
    if (k <= 0) return;
    size_t kk = (size_t)k < c->n ? (size_t)k : c->n;
    if (!c->sorted) partial_sort_inplace(c, kk);
    c->n = kk;
}

/* llama_sampler_top_n_sigma_apply: -inf for logits below max - n * std (over the finite ones) */
void smp_top_n_sigma(smp_cur *c, float n) {
    if (n <= 0.0f || c->n <= 1) return;
    float max = c->d[0].logit, sum = 0.0f;
    size_t valid = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->d[i].logit != -INFINITY) {
            max = c->d[i].logit > max ? c->d[i].logit : max;
            sum += c->d[i].logit;
            valid++;
        }
    float mean = valid > 0 ? sum / (float)valid : 0.0f;
    float acc = 0.0f;
    for (size_t i = 0; i < c->n; i++)
        if (c->d[i].logit != -INFINITY) {
            double dv = (double)(c->d[i].logit - mean);
            acc = (float)((double)acc + dv * dv); /* llama.cpp: float += std::pow(float, 2) (double) */
        }
    float sd = valid > 0 ? sqrtf(acc / (float)valid) : 0.0f;
    for (size_t i = 0; i < c->n; i++)
        if (c->d[i].logit < max - n * sd) c->d[i].logit = -INFINITY;
}

static int cmp_score(const void *pa, const void *pb) {
    const smp_score *a = pa, *b = pb;
    if (a->score != b->score) return a->score < b->score ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* llama_sampler_typical_apply: keep the tokens whose surprisal is closest to the entropy until
 * their mass exceeds p; the result is in that order (not sorted) */
void smp_typical(smp_cur *c, float p, mxl_sampler_cand *scratch, smp_score *scores) {
    if (p >= 1.0f || c->n == 0) return;
    smp_softmax(c, true);
    float entropy = 0.0f;
    for (size_t i = 0; i < c->n; i++)
        if (c->d[i].p > 0.0f) entropy += -c->d[i].p * logf(c->d[i].p);
    for (size_t i = 0; i < c->n; i++) {
        scores[i].score = c->d[i].p > 0.0f ? fabsf(-logf(c->d[i].p) - entropy) : INFINITY;
        scores[i].idx = (uint32_t)i;
    }
    qsort(scores, c->n, sizeof *scores, cmp_score);
    float cum = 0.0f;
    size_t last = c->n;
    for (size_t i = 0; i < c->n; i++) {
        cum += c->d[scores[i].idx].p;
        if (cum > p) {
            last = i + 1;
            break;
        }
    }
    for (size_t i = 0; i < last; i++) scratch[i] = c->d[scores[i].idx];
    memcpy(c->d, scratch, last * sizeof *scratch);
    c->n = last;
    c->sorted = false;
}

/* llama_sampler_top_p_apply: the smallest prefix (by logit) whose mass reaches p. Unsorted large
 * arrays sort the best 256 first and the rest only if the mass is not reached there. */
void smp_top_p(smp_cur *c, float p) {
    if (p >= 1.0f || c->n == 0) return;
    smp_softmax(c, false);
    size_t k = c->n;
    bool partial = false;
    if (!c->sorted && c->n > 1024) {
        k = 256;
        smp_sort_prefix(c->d, c->n, k);
        partial = true;
    } else if (!c->sorted) {
        smp_sort_prefix(c->d, c->n, c->n);
    }
    float cum = 0.0f;
    size_t last = c->n;
    for (size_t i = 0; i < c->n; i++) {
        cum += c->d[i].p;
        if (cum >= p) {
            last = i + 1;
            break;
        }
        if (partial && i == k - 1) { /* the rest all rank below the first k: sort them too */
            smp_sort_prefix(c->d + k, c->n - k, c->n - k);
            partial = false;
        }
    }
    c->sorted = true;
    c->n = last;
}

/* llama_sampler_min_p_apply: keep logit >= max + log(p) */
void smp_min_p(smp_cur *c, float p) {
    if (p <= 0.0f || c->n == 0) return;
    if (!c->sorted) {
        float max_logit = -FLT_MAX;
        for (size_t i = 0; i < c->n; i++) max_logit = c->d[i].logit > max_logit ? c->d[i].logit : max_logit;
        const float min_logit = max_logit + logf(p);
        size_t kept = 0;
        for (size_t i = 0; i < c->n; i++)
            if (c->d[i].logit >= min_logit) kept++;
        if (kept > 0) {
            size_t w = 0;
            for (size_t i = 0; i < c->n; i++)
                if (c->d[i].logit >= min_logit) c->d[w++] = c->d[i];
            c->n = w;
            return;
        }
        partial_sort_inplace(c, c->n);
    }
    const float min_logit = c->d[0].logit + logf(p);
    size_t i = 1; /* the first always stays */
    for (; i < c->n; i++)
        if (c->d[i].logit < min_logit) break;
    c->n = i;
}

/* llama_sample_xtc_apply: with chance `probability`, drop every token above the threshold except
 * the least likely of them */
void smp_xtc(smp_cur *c, float probability, float threshold, uint64_t *rng) {
    if (probability <= 0.0f || threshold > 0.5f || c->n < 2) return;
    float chance = (float)smp_rng_unit(rng);
    if (chance > probability) return;
    smp_softmax(c, true);
    size_t pos_last = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (c->d[i].p >= threshold) pos_last = i;
        else break;
    }
    if (pos_last > 0) {
        c->d += pos_last;
        c->n -= pos_last;
    }
}

/* llama_sampler_temp_impl: temp <= 0 keeps the first maximum and sets the rest to -inf */
void smp_temp(smp_cur *c, float temp) {
    if (c->n == 0) return;
    if (temp <= 0.0f) {
        size_t max_i = 0;
        float max_l = c->d[0].logit;
        for (size_t i = 1; i < c->n; i++) {
            if (c->d[i].logit > max_l) {
                c->d[max_i].logit = -INFINITY;
                max_i = i;
                max_l = c->d[i].logit;
            } else {
                c->d[i].logit = -INFINITY;
            }
        }
        return;
    }
    for (size_t i = 0; i < c->n; i++) c->d[i].logit /= temp;
}

/* llama_sampler_temp_ext_apply: dynamic temperature from the normalised entropy */
void smp_temp_ext(smp_cur *c, float temp, float delta, float exponent) {
    if (!(delta > 0.0f)) {
        smp_temp(c, temp);
        return;
    }
    const float min_temp = temp - delta > 0.0f ? temp - delta : 0.0f;
    const float max_temp = temp + delta;
    if (c->n <= 1) return;
    float max_entropy = -logf(1.0f / (float)c->n);
    smp_softmax(c, true);
    float entropy = 0.0f;
    for (size_t i = 0; i < c->n; i++)
        if (c->d[i].p > 0.0f) entropy -= c->d[i].p * logf(c->d[i].p);
    float normalized = entropy / max_entropy;
    float dyn_temp = min_temp + (max_temp - min_temp) * powf(normalized, exponent);
    smp_temp(c, dyn_temp);
}

/* p-less (mlxcel): keep p >= sum(p^2) of the current (tempered) distribution; the most likely
 * token always stays. Order is kept. */
void smp_p_less(smp_cur *c) {
    if (c->n <= 1) return;
    float max_l = -INFINITY;
    size_t top = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->d[i].logit > max_l) {
            max_l = c->d[i].logit;
            top = i;
        }
    if (max_l == -INFINITY) return;
    double sum = 0, sq = 0;
    for (size_t i = 0; i < c->n; i++) sum += exp((double)c->d[i].logit - (double)max_l);
    for (size_t i = 0; i < c->n; i++) {
        double q = exp((double)c->d[i].logit - (double)max_l) / sum;
        sq += q * q;
    }
    size_t w = 0;
    for (size_t i = 0; i < c->n; i++) {
        double q = exp((double)c->d[i].logit - (double)max_l) / sum;
        if (i == top || (c->d[i].logit != -INFINITY && q >= sq)) c->d[w++] = c->d[i];
    }
    c->n = w;
}

void smp_drop_banned(smp_cur *c) {
    size_t w = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->d[i].logit != -INFINITY) c->d[w++] = c->d[i];
    c->n = w;
}

/* llama_sampler_dist_apply's probabilities: float exp, double sum */
void smp_dist(smp_cur *c) {
    smp_drop_banned(c);
    if (c->n == 0) return;
    float max_l = c->d[0].logit;
    for (size_t i = 1; i < c->n; i++) max_l = c->d[i].logit > max_l ? c->d[i].logit : max_l;
    double sum = 0.0;
    for (size_t i = 0; i < c->n; i++) {
        float p = expf(c->d[i].logit - max_l);
        c->d[i].p = p;
        sum += p;
    }
    for (size_t i = 0; i < c->n; i++) c->d[i].p = (float)((double)c->d[i].p / sum);
}

/* llama_sampler_mirostat_apply up to the draw: estimate the Zipf exponent from the top m, derive
 * k from mu, keep the top k */
void smp_mirostat(smp_cur *c, float mu, int32_t m, int32_t n_vocab) {
    if (c->n == 0) return;
    smp_softmax(c, true);
    float sum_ti_bi = 0.0f, sum_ti_sq = 0.0f;
    for (size_t i = 0; i + 1 < (size_t)m && i + 1 < c->n; i++) {
        float t_i = logf((float)(i + 2) / (float)(i + 1));
        float b_i = logf(c->d[i].p / c->d[i + 1].p);
        sum_ti_bi += t_i * b_i;
        sum_ti_sq += t_i * t_i;
    }
    float s_hat = sum_ti_bi / sum_ti_sq;
    float epsilon_hat = s_hat - 1;
    float k = powf((epsilon_hat * powf(2, mu)) / (1 - powf((float)n_vocab, -epsilon_hat)), 1 / s_hat);
    /* llama.cpp: top_k(max(int(k), 1)); int(k) of NaN or of huge k is left to the hardware there */
    int32_t ki;
    if (!(k >= 1.0f)) ki = 1;
    else if (k >= (float)c->n || k >= (float)INT32_MAX) ki = c->n > INT32_MAX ? INT32_MAX : (int32_t)c->n;
    else ki = (int32_t)k;
    smp_top_k(c, ki);
    smp_softmax(c, true);
}

/* llama_sampler_mirostat_v2_apply up to the draw: drop tokens whose surprisal exceeds mu */
void smp_mirostat_v2(smp_cur *c, float mu) {
    if (c->n == 0) return;
    smp_softmax(c, true);
    size_t n = 0;
    while (n < c->n && !(-log2f(c->d[n].p) > mu)) n++;
    c->n = n == 0 ? 1 : n;
    smp_softmax(c, true);
}
