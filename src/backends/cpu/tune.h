/* tune.h - the CPU backend's run-time tuning knobs (what `mlxcel tune` measures and the autotune
 * cache, engine/autotune.h, sets under MLXCEL_AUTOTUNE=cache|1). Every knob's default is the
 * constant the kernels used before the knobs existed, so nothing changes until a value is set.
 *
 * The knobs (one `--op` name each):
 *   paged-decode-splits  KV splits of one decode query's visible range (attention.c): with S > 1
 *                        each (token, head group) of a pooled attention call with few query tokens
 *                        is cut into S position ranges run as separate tasks, each a softmax of its
 *                        own range, then merged by their maxima and sums (flash-decoding's
 *                        split-K). Changes the float summation order (results within rounding of
 *                        the unsplit pass, as tests/unit/test_tune.c checks). Default 1 (no split).
 *   attn-head-group      query heads of one KV head per grouped attention pass (attention.h,
 *                        MXL_ATTN_HEAD_GROUP): fewer heads per pass convert each K / V vector more
 *                        often but give more, smaller work units. Bitwise neutral (every head's
 *                        result is the same bits for every group size). Default 4.
 *   matmul-split         the quantized matmul's work split (matmul.c): on the panel path each
 *                        chunk takes 1 / (d x threads) of the panels left (shrinking chunks), on
 *                        the row path 2d tasks per thread. Bitwise neutral (a row's result does
 *                        not depend on the chunk that computes it). Default d = 2.
 * Attention values are kept per attention shape (head_dim, query heads, KV heads) and by visible
 * context: a call with n_kv keys takes the entry with the largest context <= n_kv (below the
 * smallest, the default). matmul-split is one value for the process.
 *
 * The knobs are process-wide and read without locks: set them before the model runs (at load),
 * not while another thread runs attention or matmuls. */
#ifndef MXL_BACKENDS_CPU_TUNE_H
#define MXL_BACKENDS_CPU_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/op_types.h"

typedef enum mxl_cpu_knob {
    MXL_CPU_KNOB_DECODE_SPLITS = 0,
    MXL_CPU_KNOB_HEAD_GROUP,
    MXL_CPU_KNOB_MATMUL_SPLIT,
    MXL_CPU_KNOB_COUNT,
} mxl_cpu_knob;

/* A knob's name, default and the candidates `mlxcel tune` measures (default first). */
typedef struct mxl_cpu_knob_info {
    const char *name;    /* the --op name and the cache's "op" */
    int def;             /* today's constant */
    int lo, hi;          /* accepted values */
    int n_cand;
    int cand[6];
    bool per_context;    /* attention knobs: per shape and context; else one value */
    const char *what;    /* one line for --help / --dry-run */
} mxl_cpu_knob_info;

const mxl_cpu_knob_info *mxl_cpu_knob_get(int k);
/* by name; -1 when unknown */
int mxl_cpu_knob_find(const char *name);

/* Back to the defaults. */
void mxl_cpu_tune_reset(void);
/* Sets knob k for attention shape (head_dim, q_heads, kv_heads) from context ctx on (ignored for
 * matmul-split). False (nothing set) for a value outside the knob's range, a bad shape or a full
 * table. */
bool mxl_cpu_tune_set(mxl_cpu_knob k, int head_dim, int q_heads, int kv_heads, int64_t ctx, int value);

/* The values in force for an attention call of shape p over n_kv keys, and for the matmuls. */
int mxl_cpu_tune_decode_splits(const mxl_attn_params *p, int64_t n_kv);
int mxl_cpu_tune_head_group(const mxl_attn_params *p, int64_t n_kv);
int mxl_cpu_tune_matmul_split(void);

/* The machine a cache entry belongs to: the CPU's model name (/proc/cpuinfo "model name", else the
 * x86 brand string, else "unknown") and the kernel level's name (cpu_features.h). */
void mxl_cpu_tune_machine(char *cpu, size_t cap, const char **isa);

#endif
