/* sampler_internal.h - pieces shared by sampler.c (the chain), sampler_stages.c (the stages on a
 * candidate array) and sampler_dry.c (DRY). Each stage follows the same-named llama.cpp sampler in
 * src/llama-sampler.cpp, including its float arithmetic, so the candidate sets match. */
#ifndef MXL_ENGINE_SAMPLER_INTERNAL_H
#define MXL_ENGINE_SAMPLER_INTERNAL_H

#include "engine/sampler.h"

/* The candidate array a stage works on (llama_token_data_array): d[0..n), `sorted` when d is in
 * descending logit order. Stages may drop entries (n shrinks), move d forward (XTC) or set
 * logits to -inf without dropping them (top-n-sigma, greedy temperature), as llama.cpp does. */
typedef struct smp_cur {
    mxl_sampler_cand *d;
    size_t n;
    bool sorted;
} smp_cur;

/* Scratch for typical-p: [n_vocab] each. */
typedef struct smp_score {
    float score;
    uint32_t idx;
} smp_score;

/* xoshiro256** */
uint64_t smp_rng_next(uint64_t *s);
void smp_rng_seed(uint64_t *s, uint64_t seed);
double smp_rng_unit(uint64_t *s); /* [0, 1) */

/* Makes d[0..k) the k best entries in descending order (ties: lower id first); d stays a
 * permutation of its entries. k >= n sorts everything. */
void smp_sort_prefix(mxl_sampler_cand *d, size_t n, size_t k);

void smp_softmax(smp_cur *c, bool do_sort);
void smp_top_k(smp_cur *c, int32_t k);
void smp_top_n_sigma(smp_cur *c, float n);
void smp_typical(smp_cur *c, float p, mxl_sampler_cand *scratch, smp_score *scores);
void smp_top_p(smp_cur *c, float p);
void smp_min_p(smp_cur *c, float p);
/* XTC's coin is drawn from rng only when XTC can act on this step (as llama.cpp does). */
void smp_xtc(smp_cur *c, float probability, float threshold, uint64_t *rng);
void smp_temp(smp_cur *c, float temp);
void smp_temp_ext(smp_cur *c, float temp, float delta, float exponent);
void smp_p_less(smp_cur *c);
/* The final distribution: drops -inf entries, p = softmax of the logits (llama's dist). */
void smp_dist(smp_cur *c);
void smp_mirostat(smp_cur *c, float mu, int32_t m, int32_t n_vocab);
void smp_mirostat_v2(smp_cur *c, float mu);
/* Drops -inf entries, keeping the order and the p values. */
void smp_drop_banned(smp_cur *c);

/* Processed DRY breakers: entries sorted by head; tail of entry i is tails[off[i] .. off[i]+len[i]). */
struct mxl_dry_breakers {
    size_t n;
    int32_t *head;
    uint32_t *off;
    uint32_t *len;
    int32_t *tails;
    size_t n_tails;
};
mxl_status smp_dry_breakers_clone(const mxl_dry_breakers *b, mxl_dry_breakers **out, mxl_error *err);

/* DRY state: buffers sized at creation, grown only for longer windows. */
typedef struct smp_dry {
    float multiplier, base;
    int32_t allowed_length, last_n;
    mxl_dry_breakers *breakers; /* owned; may be NULL (no breakers) */
    int32_t *max_repeat;        /* [n_vocab], -1 = none */
    int32_t n_vocab;
    int32_t *repeat_count;      /* [cap] */
    int32_t *touched;           /* [cap] ids whose max_repeat is set */
    size_t cap;
} smp_dry;

mxl_status smp_dry_init(smp_dry *d, const mxl_sampler_params *p, int32_t n_vocab,
                        mxl_dry_breakers *breakers, mxl_error *err);
void smp_dry_free(smp_dry *d);
mxl_status smp_dry_reserve(smp_dry *d, size_t n, mxl_error *err);
bool smp_dry_enabled(const smp_dry *d);
/* Subtracts DRY's penalty from logits [n_vocab] for the ids that would extend a repeat. */
mxl_status smp_dry_apply(smp_dry *d, float *logits, const int32_t *hist, size_t n, mxl_error *err);

#endif
