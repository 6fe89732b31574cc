/* tune_bench.h - the measurements behind `mlxcel tune` (cmd_tune.c): one decode step's attention
 * over a paged f16 KV cache and one quantized matmul, each run with every candidate value of a
 * CPU knob (backends/cpu/tune.h) in turn, round-robin, with adaptive repetitions.
 *
 * Attention cell (batch B, context C): B sequences of C cached positions each (K and V
 * [C, kv_heads * head_dim] f16 per sequence, in blocks of block_size positions found through a
 * shuffled block table), one query token per sequence [B, q_heads, head_dim] at position C - 1;
 * dispatched as the decoder does (models/decoder.c attention_block): with B >= threads > 1 the
 * sequences split over the pool, each attended on one thread; otherwise one after another, each
 * split over the pool's threads.
 * Matmul cell (tokens T): y [T, rows] = x [T, cols] W^T for a synthetic quantized W [rows, cols]
 * (backends/cpu/synth.h; the panel layout where the CPU has one), as a decode batch of T. */
#ifndef MXL_CLI_TUNE_BENCH_H
#define MXL_CLI_TUNE_BENCH_H

#include <stdint.h>

#include "backends/cpu/tune.h"
#include "core/status.h"
#include "core/threadpool.h"

typedef struct mxl_tune_budget {
    int warmup;        /* at least this many warm-up runs per candidate ... */
    double warmup_ms;  /* ... and at least this long (all candidates together) */
    int reps;          /* at least this many timed rounds ... */
    int max_reps;      /* ... at most this many ... */
    double sample_ms;  /* ... going on while the rounds took less than this per candidate */
} mxl_tune_budget;

typedef struct mxl_tune_stat {
    double median_us;
    double spread; /* (p75 - p25) / median of the timed runs */
    int reps;
} mxl_tune_stat;

typedef struct mxl_tune_attn mxl_tune_attn;
mxl_status mxl_tune_attn_create(int head_dim, int q_heads, int kv_heads, int block_size, int max_batch, int64_t max_ctx,
                                mxl_threadpool *pool, mxl_tune_attn **out, mxl_error *err);
void mxl_tune_attn_destroy(mxl_tune_attn *a);
/* knob k (an attention knob) at each of cand[n] for cell (batch, ctx) into st[n]; the knobs are
 * back at their defaults afterwards */
void mxl_tune_attn_measure(mxl_tune_attn *a, mxl_cpu_knob k, const int *cand, int n, int batch, int64_t ctx,
                           const mxl_tune_budget *b, mxl_tune_stat *st);

typedef struct mxl_tune_mm mxl_tune_mm;
mxl_status mxl_tune_mm_create(int64_t rows, int64_t cols, int max_tok, mxl_threadpool *pool, mxl_tune_mm **out, mxl_error *err);
void mxl_tune_mm_destroy(mxl_tune_mm *m);
/* the weight's format ("q4_0 (panels)") */
const char *mxl_tune_mm_format(const mxl_tune_mm *m);
void mxl_tune_mm_measure(mxl_tune_mm *m, mxl_cpu_knob k, const int *cand, int n, int n_tok, const mxl_tune_budget *b,
                         mxl_tune_stat *st);

#endif
