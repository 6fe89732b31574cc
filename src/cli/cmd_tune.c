/* cmd_tune.c - `mlxcel tune`: measures the CPU backend's run-time knobs (backends/cpu/tune.h) on
 * this machine for one attention shape and writes the values that win to the autotune cache
 * (engine/autotune.h), which MLXCEL_AUTOTUNE=cache|1 applies at model load.
 *
 * Ops: paged-decode-splits, attn-head-group (per context length, measured over every batch
 * size), matmul-split (one value, measured over the batch sizes as token counts on a
 * [q_heads * head_dim (the model's hidden size with -m)]^2 quantized weight). qmm-tile and
 * qmv-multirow are the CUDA backend's and are refused by name.
 * Per op and context, every candidate runs round-robin with the default (tune_bench.h); the
 * candidate whose summed median over the batch sizes beats the default's by more than
 * max(--min-improvement, the largest measured quartile spread) is chosen, else the default. One
 * entry per (op, context) is written, the default's too (so the file says it was measured). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cpu/tune.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/tune_bench.h"
#include "core/alloc.h"
#include "core/threadpool.h"
#include "engine/autotune.h"
#include "io/store.h"
#include "models/checkpoint.h"
#include "models/decoder.h"
#include "models/kv_pool.h"

static const mxl_cli_opt k_opts[] = {
    {"op", 0, "OP", "all CPU ops", "Operation to tune (repeatable): paged-decode-splits, attn-head-group, matmul-split; qmm-tile and qmv-multirow are CUDA-only"},
    {"dry-run", 0, NULL, NULL, "Print the candidate matrix; measure and write nothing"},
    {"model", 'm', "PATH", NULL, "Read head_dim, query heads and KV heads (and hidden size) from the model's config.json or GGUF metadata; no weights are loaded"},
    {"head-dim", 0, "N", "128", "Per-head dimension of paged decode"},
    {"q-heads", 0, "N", "32", "Query-head count"},
    {"kv-heads", 0, "N", "8", "KV-head count"},
    {"block-size", 0, "N", "32", "Paged KV block size (the engine's is 32: entries of other sizes are kept but not used)"},
    {"batch-sizes", 0, "LIST", "1,2,4,8", "Comma-separated batch sizes"},
    {"context-lengths", 0, "LIST", "1024,4096,16384", "Comma-separated visible context lengths"},
    {"warmup", 0, "N", "3", "Minimum warm-up repetitions per candidate"},
    {"warmup-ms", 0, "MS", "40", "Minimum warm-up wall-clock budget per cell"},
    {"reps", 0, "N", "5", "Minimum timed repetitions"},
    {"max-reps", 0, "N", "1000", "Maximum timed repetitions"},
    {"sample-ms", 0, "MS", "250", "Sampling budget per candidate"},
    {"min-improvement", 0, "FLOAT", "0.02", "Minimum relative win; a larger measured median spread raises the threshold"},
    {"qmm-tile-cap", 0, "N", "128", "CUDA qmm CTA tile_m cap (CUDA builds only)"},
    {"threads", 0, "N", "all cores", "CPU threads (part of the cache key: use the count you run models with)"},
    {"models-dir", 0, "PATH", NULL, "Model store root for -m"},
    {NULL, 0, NULL, NULL, NULL},
};

static const mxl_cli_cmd k_cmd = {
    .name = "tune",
    .usage = "mlxcel tune [OPTIONS]",
    .summary = "Profile the CPU backend's run-time knobs (split-K decode attention, attention head groups, the matmul work "
               "split) for one attention shape on this machine and write the fastest stable choices to "
               "${MLXCEL_CACHE_DIR:-$HOME/.cache/mlxcel}/autotune/cpu.json. Inference reads them only with "
               "MLXCEL_AUTOTUNE=cache (or 1).",
    .opts = k_opts,
    .min_pos = 0,
    .max_pos = 0,
    .pos_help = "",
};

#define MAX_LIST 16

/* "1,2,4" into v (ascending, distinct, in [lo, hi]); 2 after printing on a bad list */
static int parse_list(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *v, int *n) {
    *n = 0;
    const char *p = s;
    if (!*p) return mxl_cli_usage_error(&k_cmd, "--%s is empty", flag);
    while (*p) {
        char *end;
        if (*p < '0' || *p > '9') return mxl_cli_usage_error(&k_cmd, "--%s: '%s' is not a comma-separated list of integers", flag, s);
        long long x = strtoll(p, &end, 10);
        if (end == p || (*end && *end != ',')) return mxl_cli_usage_error(&k_cmd, "--%s: '%s' is not a comma-separated list of integers", flag, s);
        if (x < lo || x > hi) return mxl_cli_usage_error(&k_cmd, "--%s: %lld is out of range [%lld, %lld]", flag, x, (long long)lo, (long long)hi);
        if (*n == MAX_LIST) return mxl_cli_usage_error(&k_cmd, "--%s: at most %d values", flag, MAX_LIST);
        for (int i = 0; i < *n; i++)
            if (v[i] == x) return mxl_cli_usage_error(&k_cmd, "--%s: %lld is given twice", flag, x);
        v[(*n)++] = x;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p) return mxl_cli_usage_error(&k_cmd, "--%s: '%s' ends with a comma", flag, s);
    }
    for (int i = 1; i < *n; i++) /* ascending */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            int64_t t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return 0;
}

static int parse_double(const char *flag, const char *s, double lo, double hi, double *out) {
    char *end;
    double x = strtod(s, &end);
    if (end == s || *end || !isfinite(x)) return mxl_cli_usage_error(&k_cmd, "--%s: '%s' is not a number", flag, s);
    if (x < lo || x > hi) return mxl_cli_usage_error(&k_cmd, "--%s: %g is out of range [%g, %g]", flag, x, lo, hi);
    *out = x;
    return 0;
}

typedef struct tune_cfg {
    bool ops[MXL_CPU_KNOB_COUNT];
    mxl_autotune_shape shape;
    int64_t hidden; /* the matmul's weight is [hidden, hidden] */
    int64_t batch[MAX_LIST], ctx[MAX_LIST];
    int n_batch, n_ctx, threads;
    mxl_tune_budget budget;
    double min_improvement;
    const char *model;
} tune_cfg;

/* the shape from -m: the decoder's own reading of config.json / GGUF metadata, no weights */
static int shape_from_model(const mxl_cli_args *a, tune_cfg *c) {
    mxl_error err;
    mxl_resolved res;
    if (mxl_store_resolve(c->model, mxl_cli_get(a, "models-dir"), NULL, &res, &err)) return mxl_cli_fail("%s", err.msg);
    mxl_checkpoint *ck = NULL;
    if (mxl_checkpoint_open(res.path, &ck, &err)) return mxl_cli_fail("%s", err.msg);
    mxl_decoder dec;
    mxl_status st = mxl_decoder_read_hparams(ck, &dec, &err);
    mxl_checkpoint_close(ck);
    if (st) return mxl_cli_fail("%s: %s", res.path, err.msg);
    const mxl_decoder_hparams *hp = &dec.hp;
    c->shape.head_dim = (int)hp->head_dim, c->shape.q_heads = (int)hp->n_heads, c->shape.kv_heads = (int)hp->n_kv_heads;
    c->hidden = hp->hidden;
    mxl_decoder_free(&dec);
    if (c->shape.head_dim <= 0 || c->shape.q_heads <= 0 || c->shape.kv_heads <= 0 || c->shape.q_heads % c->shape.kv_heads)
        return mxl_cli_fail("%s: no attention shape to tune (head_dim %d, %d query heads, %d KV heads)", res.path, c->shape.head_dim,
                            c->shape.q_heads, c->shape.kv_heads);
    return 0;
}

static int parse_cfg(const mxl_cli_args *a, tune_cfg *c) {
    memset(c, 0, sizeof *c);
    int64_t v;
    for (int i = 0; i < mxl_cli_count(a, "op"); i++) {
        const char *op = mxl_cli_get_nth(a, "op", i);
        if (strcmp(op, "qmm-tile") == 0 || strcmp(op, "qmv-multirow") == 0)
            return mxl_cli_usage_error(&k_cmd, "--op %s is CUDA-only; this build has the CPU backend (ops: paged-decode-splits, attn-head-group, matmul-split)", op);
        int k = mxl_cpu_knob_find(op);
        if (k < 0) return mxl_cli_usage_error(&k_cmd, "--op: unknown operation '%s' (paged-decode-splits, attn-head-group, matmul-split)", op);
        c->ops[k] = true;
    }
    if (mxl_cli_count(a, "op") == 0)
        for (int k = 0; k < MXL_CPU_KNOB_COUNT; k++) c->ops[k] = true;
    if (mxl_cli_has(a, "qmm-tile-cap")) {
        if (mxl_cli_get_int(a, "qmm-tile-cap", 128, 1, 4096, &v)) return 2;
        return mxl_cli_usage_error(&k_cmd, "--qmm-tile-cap is for the CUDA-only qmm-tile op; this build has the CPU backend");
    }
    c->model = mxl_cli_get(a, "model");
    if (c->model) {
        for (const char *f = "head-dim\0q-heads\0kv-heads\0"; *f; f += strlen(f) + 1)
            if (mxl_cli_has(a, f)) return mxl_cli_usage_error(&k_cmd, "--%s and -m/--model both give the shape; use one", f);
    }
    if (mxl_cli_get_int(a, "head-dim", 128, 1, 4096, &v)) return 2;
    c->shape.head_dim = (int)v;
    if (mxl_cli_get_int(a, "q-heads", 32, 1, 1024, &v)) return 2;
    c->shape.q_heads = (int)v;
    if (mxl_cli_get_int(a, "kv-heads", 8, 1, 1024, &v)) return 2;
    c->shape.kv_heads = (int)v;
    if (mxl_cli_get_int(a, "block-size", 32, 1, 4096, &v)) return 2;
    c->shape.block_size = (int)v;
    if (!c->model && c->shape.q_heads % c->shape.kv_heads)
        return mxl_cli_usage_error(&k_cmd, "--q-heads %d is not a multiple of --kv-heads %d", c->shape.q_heads, c->shape.kv_heads);
    if (!c->model && c->shape.head_dim % 16)
        return mxl_cli_usage_error(&k_cmd, "--head-dim %d is not a multiple of 16 (the f16 attention passes' width)", c->shape.head_dim);
    c->hidden = (int64_t)c->shape.q_heads * c->shape.head_dim;
    const char *bl = mxl_cli_get(a, "batch-sizes"), *cl = mxl_cli_get(a, "context-lengths");
    if (parse_list("batch-sizes", bl ? bl : "1,2,4,8", 1, 64, c->batch, &c->n_batch)) return 2;
    if (parse_list("context-lengths", cl ? cl : "1024,4096,16384", 1, 1 << 20, c->ctx, &c->n_ctx)) return 2;
    if (mxl_cli_get_int(a, "warmup", 3, 0, 100000, &v)) return 2;
    c->budget.warmup = (int)v;
    if (mxl_cli_get_int(a, "reps", 5, 1, 1000000, &v)) return 2;
    c->budget.reps = (int)v;
    if (mxl_cli_get_int(a, "max-reps", 1000, 1, 1000000, &v)) return 2;
    c->budget.max_reps = (int)v;
    if (c->budget.max_reps < c->budget.reps)
        return mxl_cli_usage_error(&k_cmd, "--max-reps %d is below --reps %d", c->budget.max_reps, c->budget.reps);
    const char *s;
    c->budget.warmup_ms = 40, c->budget.sample_ms = 250, c->min_improvement = 0.02;
    if ((s = mxl_cli_get(a, "warmup-ms")) && parse_double("warmup-ms", s, 0, 3.6e6, &c->budget.warmup_ms)) return 2;
    if ((s = mxl_cli_get(a, "sample-ms")) && parse_double("sample-ms", s, 0, 3.6e6, &c->budget.sample_ms)) return 2;
    if ((s = mxl_cli_get(a, "min-improvement")) && parse_double("min-improvement", s, 0, 0.99, &c->min_improvement)) return 2;
    if (mxl_cli_get_int(a, "threads", mxl_cpu_count(), 1, 1024, &v)) return 2;
    c->threads = (int)v;
    return 0;
}

static void print_candidates(const mxl_cpu_knob_info *ki) {
    for (int i = 0; i < ki->n_cand; i++) printf("%s%d%s", i ? ", " : "", ki->cand[i], ki->cand[i] == ki->def ? " (default)" : "");
}

static int dry_run(const tune_cfg *c, const mxl_autotune_machine *m, const char *dir) {
    printf("mlxcel tune --dry-run: nothing is measured or written\n");
    printf("machine: %s, kernels %s, %d threads\n", m->cpu, m->isa, m->threads);
    printf("shape: head_dim %d, %d query heads, %d KV heads, block size %d%s\n", c->shape.head_dim, c->shape.q_heads, c->shape.kv_heads,
           c->shape.block_size, c->shape.block_size != MXL_KV_BLOCK ? " (the engine's KV block is 32: not used at load)" : "");
    printf("cache: %s/%s\n", dir, MXL_AUTOTUNE_FILE);
    int cells = 0;
    for (int k = 0; k < MXL_CPU_KNOB_COUNT; k++) {
        if (!c->ops[k]) continue;
        const mxl_cpu_knob_info *ki = mxl_cpu_knob_get(k);
        printf("\nop %s: %s\n  candidates: ", ki->name, ki->what);
        print_candidates(ki);
        printf("\n");
        if (ki->per_context) {
            printf("  %-10s %s\n", "context", "batch sizes");
            for (int j = 0; j < c->n_ctx; j++) {
                printf("  %-10lld", (long long)c->ctx[j]);
                for (int i = 0; i < c->n_batch; i++) printf(" %lld", (long long)c->batch[i]);
                printf("\n");
            }
            cells += c->n_ctx * c->n_batch * ki->n_cand;
        } else {
            printf("  weight %lld x %lld, tokens:", (long long)c->hidden, (long long)c->hidden);
            for (int i = 0; i < c->n_batch; i++) printf(" %lld", (long long)c->batch[i]);
            printf("\n");
            cells += c->n_batch * ki->n_cand;
        }
    }
    printf("\n%d (cell, candidate) measurements, about %.1f s at --sample-ms %g\n", cells,
           cells * (c->budget.sample_ms) / 1e3, c->budget.sample_ms);
    return 0;
}

/* The choice for one (op, context) from stats st[cell][cand] over the cells (batch sizes):
 * index of the winning candidate (0: the default, which cand lists first). */
static int choose(const mxl_cpu_knob_info *ki, const mxl_tune_stat st[][6], int n_cells, double min_imp, double *sum_def,
                  double *sum_best, double *thr) {
    double sum[6] = {0}, spread = 0;
    for (int b = 0; b < n_cells; b++)
        for (int i = 0; i < ki->n_cand; i++) {
            sum[i] += st[b][i].median_us;
            if (st[b][i].spread > spread) spread = st[b][i].spread;
        }
    *thr = spread > min_imp ? spread : min_imp;
    int best = 0;
    for (int i = 1; i < ki->n_cand; i++)
        if (sum[i] < sum[best]) best = i;
    *sum_def = sum[0];
    if (best && (sum[0] - sum[best]) / sum[0] <= *thr) best = 0;
    *sum_best = sum[best];
    return best;
}

int mxl_cmd_tune(int argc, char **argv) {
    mxl_cli_args a;
    int rc = mxl_cli_parse(&k_cmd, argc, argv, &a);
    if (rc == 1) return 0;
    if (rc) return rc;
    tune_cfg c;
    if ((rc = parse_cfg(&a, &c))) return rc;
    if (c.model && (rc = shape_from_model(&a, &c))) return rc;
    for (int k = 0; k < MXL_CPU_KNOB_COUNT; k++) /* put the default first: it is what the others must beat */
        MXL_ASSERT(mxl_cpu_knob_get(k)->cand[0] == mxl_cpu_knob_get(k)->def);
    const mxl_backend *be = mxl_backend_get("cpu");
    if (!be) return mxl_cli_fail("the cpu backend is not in this build");
    mxl_autotune_machine m;
    mxl_autotune_machine_of(be, c.threads, &m);
    char dir[4096];
    mxl_error err;
    if (mxl_autotune_dir(dir, sizeof dir, &err)) return mxl_cli_fail("%s", err.msg);
    if (mxl_cli_has(&a, "dry-run")) return dry_run(&c, &m, dir);
    if (c.shape.head_dim % 16) /* (from -m: the f16 grouped passes need it; the per-head path is not what runs) */
        return mxl_cli_fail("head_dim %d is not a multiple of 16: nothing to tune for this shape", c.shape.head_dim);

    mxl_threadpool *pool = NULL;
    if (mxl_threadpool_create(c.threads, &pool, &err)) return mxl_cli_fail("%s", err.msg);
    printf("tuning on %s, kernels %s, %d threads; shape head_dim %d, %d query heads, %d KV heads, block size %d\n", m.cpu, m.isa,
           m.threads, c.shape.head_dim, c.shape.q_heads, c.shape.kv_heads, c.shape.block_size);
    mxl_autotune_entry ent[MXL_CPU_KNOB_COUNT * MAX_LIST];
    int n_ent = 0;
    mxl_cpu_tune_reset();
    rc = 0;
    if (c.ops[MXL_CPU_KNOB_DECODE_SPLITS] || c.ops[MXL_CPU_KNOB_HEAD_GROUP]) {
        mxl_tune_attn *at = NULL;
        if (mxl_tune_attn_create(c.shape.head_dim, c.shape.q_heads, c.shape.kv_heads, c.shape.block_size, (int)c.batch[c.n_batch - 1],
                                 c.ctx[c.n_ctx - 1], pool, &at, &err)) {
            mxl_threadpool_destroy(pool);
            return mxl_cli_fail("%s", err.msg);
        }
        for (int k = 0; k < MXL_CPU_KNOB_COUNT; k++) {
            const mxl_cpu_knob_info *ki = mxl_cpu_knob_get(k);
            if (!c.ops[k] || !ki->per_context) continue;
            printf("\n%s (%s): median us of one decode step's attention, per batch size\n", ki->name, ki->what);
            for (int j = 0; j < c.n_ctx; j++) {
                mxl_tune_stat st[MAX_LIST][6];
                for (int b = 0; b < c.n_batch; b++) {
                    mxl_tune_attn_measure(at, (mxl_cpu_knob)k, ki->cand, ki->n_cand, (int)c.batch[b], c.ctx[j], &c.budget, st[b]);
                    printf("  context %-6lld batch %-3lld", (long long)c.ctx[j], (long long)c.batch[b]);
                    for (int i = 0; i < ki->n_cand; i++) printf("  %d: %9.1f (+-%2.0f%%)", ki->cand[i], st[b][i].median_us, 100 * st[b][i].spread);
                    printf("  [%d reps]\n", st[b][0].reps);
                    fflush(stdout);
                }
                double sd, sb, thr;
                int best = choose(ki, (const mxl_tune_stat(*)[6])st, c.n_batch, c.min_improvement, &sd, &sb, &thr);
                printf("  -> context %lld: %s = %d (%s; %.2f%% vs default, threshold %.2f%%)\n", (long long)c.ctx[j], ki->name, ki->cand[best],
                       best ? "faster" : "default kept", 100 * (sd - sb) / sd, 100 * thr);
                ent[n_ent++] = (mxl_autotune_entry){.machine = m, .shape = c.shape, .context = c.ctx[j], .value = ki->cand[best],
                                                    .def = ki->def, .default_us = sd, .tuned_us = sb, .spread = thr};
                snprintf(ent[n_ent - 1].op, sizeof ent[n_ent - 1].op, "%s", ki->name);
            }
        }
        mxl_tune_attn_destroy(at);
    }
    if (c.ops[MXL_CPU_KNOB_MATMUL_SPLIT]) {
        const mxl_cpu_knob_info *ki = mxl_cpu_knob_get(MXL_CPU_KNOB_MATMUL_SPLIT);
        mxl_tune_mm *mm = NULL;
        if (mxl_tune_mm_create(c.hidden, c.hidden, (int)c.batch[c.n_batch - 1], pool, &mm, &err)) {
            mxl_threadpool_destroy(pool);
            return mxl_cli_fail("%s", err.msg);
        }
        printf("\n%s (%s): median us of a %lld x %lld %s matmul, per token count\n", ki->name, ki->what, (long long)c.hidden,
               (long long)c.hidden, mxl_tune_mm_format(mm));
        mxl_tune_stat st[MAX_LIST][6];
        for (int b = 0; b < c.n_batch; b++) {
            mxl_tune_mm_measure(mm, MXL_CPU_KNOB_MATMUL_SPLIT, ki->cand, ki->n_cand, (int)c.batch[b], &c.budget, st[b]);
            printf("  tokens %-3lld", (long long)c.batch[b]);
            for (int i = 0; i < ki->n_cand; i++) printf("  %d: %9.1f (+-%2.0f%%)", ki->cand[i], st[b][i].median_us, 100 * st[b][i].spread);
            printf("  [%d reps]\n", st[b][0].reps);
            fflush(stdout);
        }
        double sd, sb, thr;
        int best = choose(ki, (const mxl_tune_stat(*)[6])st, c.n_batch, c.min_improvement, &sd, &sb, &thr);
        printf("  -> %s = %d (%s; %.2f%% vs default, threshold %.2f%%)\n", ki->name, ki->cand[best], best ? "faster" : "default kept",
               100 * (sd - sb) / sd, 100 * thr);
        ent[n_ent++] = (mxl_autotune_entry){.machine = m, .shape = c.shape, .context = -1, .value = ki->cand[best], .def = ki->def,
                                            .default_us = sd, .tuned_us = sb, .spread = thr};
        snprintf(ent[n_ent - 1].op, sizeof ent[n_ent - 1].op, "%s", ki->name);
        mxl_tune_mm_destroy(mm);
    }
    mxl_threadpool_destroy(pool);
    char warn[4600];
    if (mxl_autotune_write(dir, ent, n_ent, be, warn, sizeof warn, &err)) return mxl_cli_fail("%s", err.msg);
    if (warn[0]) fprintf(stderr, "warning: %s\n", warn);
    printf("\nwrote %d entr%s to %s/%s (used with MLXCEL_AUTOTUNE=cache)\n", n_ent, n_ent == 1 ? "y" : "ies", dir, MXL_AUTOTUNE_FILE);
    return 0;
}
