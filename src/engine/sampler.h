/* sampler.h - next-token selection from logits, in llama-server's order: repetition / presence /
 * frequency penalties over the recent history, then top-k, top-p and min-p on the untempered
 * distribution, then temperature at the final draw (temperature <= 0: greedy argmax).
 * Reproducible for a given seed. All buffers are allocated at creation: sampling does not
 * allocate. Further samplers of the spec (typical-p, top-n-sigma, XTC, DRY, mirostat, dynamic
 * temperature, logit bias) are not built yet and are refused by the CLI. */
#ifndef MXL_ENGINE_SAMPLER_H
#define MXL_ENGINE_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct mxl_sampler_params {
    float temp;              /* 0: greedy */
    int32_t top_k;           /* 0: off */
    float top_p;             /* 1: off */
    float min_p;             /* 0: off */
    float repeat_penalty;    /* 1: off */
    int32_t repeat_last_n;   /* -1: whole history, 0: off */
    float presence_penalty;  /* 0: off */
    float frequency_penalty; /* 0: off */
    uint64_t seed;
} mxl_sampler_params;

void mxl_sampler_params_default(mxl_sampler_params *p);

typedef struct mxl_sampler mxl_sampler;
mxl_status mxl_sampler_create(const mxl_sampler_params *p, int32_t n_vocab, mxl_sampler **out,
                              mxl_error *err);
void mxl_sampler_destroy(mxl_sampler *s);
/* Picks the next id. `logits` [n_vocab] is modified (penalties); history holds the ids so far
 * (prompt and generated) for the penalties. */
int32_t mxl_sampler_sample(mxl_sampler *s, float *logits, const int32_t *history, size_t n_history);

#endif
