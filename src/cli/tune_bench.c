/* tune_bench.c - the measurements behind `mlxcel tune` (tune_bench.h): a paged decode attention
 * step and a quantized matmul on synthetic data of the tuned shape, timed per knob candidate,
 * round-robin (every round runs each candidate once, starting at a rotating one, so drift in the
 * machine's speed reaches every candidate alike), medians and quartile spreads. */
#include "cli/tune_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/attention.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/quant_amx.h"
#include "backends/cpu/synth.h"
#include "core/alloc.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + 1e-3 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef void (*run_fn)(void *ctx);

/* knob k at value v (shape's attention entry from context 0 on), everything else default */
static void set_knob(mxl_cpu_knob k, const int shape[3], int v) {
    mxl_cpu_tune_reset();
    MXL_ASSERT(mxl_cpu_tune_set(k, shape[0], shape[1], shape[2], 0, v));
}

static void measure(run_fn run, void *ctx, mxl_cpu_knob k, const int shape[3], const int *cand, int n, const mxl_tune_budget *b,
                    mxl_tune_stat *st) {
    const int max_reps = b->max_reps > 0 ? b->max_reps : 1;
    double *t = mxl_malloc(sizeof(double) * (size_t)n * (size_t)max_reps);
    MXL_ASSERT(t != NULL);
    /* warm-up: caches, page faults, the pool's threads, the CPU's clock */
    double w0 = now_us();
    for (int r = 0; r < 100000 && (r < b->warmup || now_us() - w0 < b->warmup_ms * 1e3); r++)
        for (int i = 0; i < n; i++) {
            set_knob(k, shape, cand[i]);
            run(ctx);
        }
    double spent = 0;
    int rounds = 0;
    while (rounds < max_reps && (rounds < b->reps || spent < b->sample_ms * 1e3 * n)) {
        for (int j = 0; j < n; j++) {
            const int i = (j + rounds) % n;
            set_knob(k, shape, cand[i]);
            const double t0 = now_us();
            run(ctx);
            const double dt = now_us() - t0;
            t[(size_t)i * max_reps + rounds] = dt;
            spent += dt;
        }
        rounds++;
    }
    for (int i = 0; i < n; i++) {
        double *ti = t + (size_t)i * max_reps;
        qsort(ti, (size_t)rounds, sizeof *ti, cmp_double);
        const double med = rounds % 2 ? ti[rounds / 2] : 0.5 * (ti[rounds / 2 - 1] + ti[rounds / 2]);
        st[i].median_us = med;
        st[i].spread = med > 0 ? (ti[(rounds * 3) / 4] - ti[rounds / 4]) / med : 0;
        st[i].reps = rounds;
    }
    mxl_free(t);
    mxl_cpu_tune_reset();
}

/* ---- attention ---- */

struct mxl_tune_attn {
    int hd, qh, kvh, bs, max_batch;
    int64_t max_ctx, bps; /* blocks per sequence */
    uint16_t *k, *v;      /* [max_batch * bps blocks][bs][kvh * hd] */
    int32_t *tables;      /* [max_batch][bps] */
    float *q, *out, *scratch;
    size_t scratch_per; /* floats per sequence */
    int64_t q_pos[64];
    mxl_kv_paged_view view[64];
    mxl_attn_params p;
    mxl_threadpool *pool;
    int batch;
};

mxl_status mxl_tune_attn_create(int head_dim, int q_heads, int kv_heads, int block_size, int max_batch, int64_t max_ctx,
                                mxl_threadpool *pool, mxl_tune_attn **out, mxl_error *err) {
    *out = NULL;
    MXL_ASSERT(max_batch >= 1 && max_batch <= 64 && max_ctx >= 1 && q_heads % kv_heads == 0);
    mxl_tune_attn *a = mxl_calloc(1, sizeof *a);
    if (!a) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    a->hd = head_dim, a->qh = q_heads, a->kvh = kv_heads, a->bs = block_size, a->max_batch = max_batch, a->max_ctx = max_ctx;
    a->bps = (max_ctx + block_size - 1) / block_size;
    a->pool = pool;
    const int nth = mxl_threadpool_size(pool);
    const size_t kvd = (size_t)kv_heads * (size_t)head_dim, elems = (size_t)max_batch * (size_t)a->bps * (size_t)block_size * kvd;
    a->k = mxl_malloc(elems * 2);
    a->v = mxl_malloc(elems * 2);
    a->tables = mxl_malloc(sizeof(int32_t) * (size_t)max_batch * (size_t)a->bps);
    a->q = mxl_malloc(sizeof(float) * (size_t)max_batch * (size_t)q_heads * (size_t)head_dim);
    a->out = mxl_malloc(sizeof(float) * (size_t)max_batch * (size_t)q_heads * (size_t)head_dim);
    a->scratch_per = mxl_cpu_attention_scratch_floats(max_ctx, nth);
    a->scratch = mxl_malloc(sizeof(float) * a->scratch_per * (size_t)max_batch);
    if (!a->k || !a->v || !a->tables || !a->q || !a->out || !a->scratch) {
        mxl_tune_attn_destroy(a);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory for a %d x %lld-position f16 KV cache (%.1f MiB)", max_batch,
                             (long long)max_ctx, (double)elems * 4 / (1 << 20));
    }
    uint64_t seed = 0x243F6A8885A308D3ULL;
    mxl_synth_fill(MXL_DTYPE_F16, (uint8_t *)a->k, elems, &seed);
    mxl_synth_fill(MXL_DTYPE_F16, (uint8_t *)a->v, elems, &seed);
    const int64_t nb = (int64_t)max_batch * a->bps;
    for (int64_t i = 0; i < nb; i++) a->tables[i] = (int32_t)i;
    for (int64_t i = nb - 1; i > 0; i--) { /* blocks scattered over the pool, as a long-running server's are */
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        int64_t j = (int64_t)(seed % (uint64_t)(i + 1));
        int32_t tmp = a->tables[i];
        a->tables[i] = a->tables[j], a->tables[j] = tmp;
    }
    for (size_t i = 0; i < (size_t)max_batch * (size_t)q_heads * (size_t)head_dim; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        a->q[i] = (float)((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    a->p = (mxl_attn_params){.n_heads = q_heads, .n_kv_heads = kv_heads, .head_dim = head_dim,
                             .scale = 1.0f / sqrtf((float)head_dim), .causal = 1};
    for (int s = 0; s < max_batch; s++)
        a->view[s] = (mxl_kv_paged_view){MXL_DTYPE_F16, MXL_DTYPE_F16, a->k, a->v, NULL, NULL, 0, 0, (int64_t)kvd, block_size,
                                         (int64_t)block_size * (int64_t)kvd, a->tables + (int64_t)s * a->bps, 0};
    *out = a;
    return MXL_OK;
}

void mxl_tune_attn_destroy(mxl_tune_attn *a) {
    if (!a) return;
    mxl_free(a->k), mxl_free(a->v), mxl_free(a->tables), mxl_free(a->q), mxl_free(a->out), mxl_free(a->scratch);
    mxl_free(a);
}

static void attn_seq(mxl_tune_attn *a, int s, mxl_threadpool *pool) {
    const size_t qd = (size_t)a->qh * (size_t)a->hd;
    mxl_cpu_attention_paged(&a->p, a->q + s * qd, 1, &a->q_pos[s], &a->view[s], a->out + s * qd,
                            a->scratch + (size_t)s * a->scratch_per, pool, mxl_cpu_isa_detect());
}

static void attn_spans_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)thread_index;
    mxl_tune_attn *a = vctx;
    for (int s = a->batch * task / n_tasks; s < a->batch * (task + 1) / n_tasks; s++) attn_seq(a, s, NULL);
}

static void attn_run(void *ctx) {
    mxl_tune_attn *a = ctx;
    const int nth = mxl_threadpool_size(a->pool);
    if (a->batch > 1 && a->batch >= nth && nth > 1) mxl_threadpool_run(a->pool, nth, attn_spans_task, a);
    else
        for (int s = 0; s < a->batch; s++) attn_seq(a, s, a->pool);
}

void mxl_tune_attn_measure(mxl_tune_attn *a, mxl_cpu_knob k, const int *cand, int n, int batch, int64_t ctx,
                           const mxl_tune_budget *b, mxl_tune_stat *st) {
    MXL_ASSERT(batch >= 1 && batch <= a->max_batch && ctx >= 1 && ctx <= a->max_ctx);
    a->batch = batch;
    for (int s = 0; s < batch; s++) a->q_pos[s] = ctx - 1, a->view[s].n_kv = ctx;
    const int shape[3] = {a->hd, a->qh, a->kvh};
    measure(attn_run, a, k, shape, cand, n, b, st);
}

/* ---- matmul ---- */

struct mxl_tune_mm {
    mxl_weight w;
    uint8_t *data, *panels;
    float *x, *y;
    void *scratch;
    int max_tok, n_tok;
    mxl_threadpool *pool;
    char format[48];
};

mxl_status mxl_tune_mm_create(int64_t rows, int64_t cols, int max_tok, mxl_threadpool *pool, mxl_tune_mm **out, mxl_error *err) {
    *out = NULL;
    mxl_tune_mm *m = mxl_calloc(1, sizeof *m);
    if (!m) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    m->pool = pool, m->max_tok = max_tok;
    /* the most common quantized decode weight the CPU has a panel layout for, else Q4_0 */
    static const mxl_dtype prefer[] = {MXL_DTYPE_Q4_K, MXL_DTYPE_Q4_0, MXL_DTYPE_Q8_0};
    mxl_dtype t = MXL_DTYPE_Q4_0;
    for (size_t i = 0; i < sizeof prefer / sizeof prefer[0]; i++) {
        mxl_weight probe = {.kind = MXL_W_GGUF, .dtype = prefer[i], .rows = rows, .cols = cols};
        if (cols % mxl_dtype_get_info(prefer[i])->block_elems == 0 && mxl_qamx_format(&probe) && mxl_qamx_available()) {
            t = prefer[i];
            break;
        }
    }
    const mxl_dtype_info *inf = mxl_dtype_get_info(t);
    if (cols % inf->block_elems != 0) {
        mxl_free(m);
        return mxl_error_set(err, MXL_ERR_ARG, "matmul-split: %lld columns are not whole %s blocks", (long long)cols, inf->name);
    }
    const uint64_t nb = (uint64_t)(rows * cols) / inf->block_elems;
    m->data = mxl_malloc(nb * inf->block_bytes);
    m->x = mxl_malloc(sizeof(float) * (size_t)(max_tok * cols));
    m->y = mxl_malloc(sizeof(float) * (size_t)(max_tok * rows));
    m->w = (mxl_weight){.kind = MXL_W_GGUF, .dtype = t, .rows = rows, .cols = cols, .data = m->data};
    if (m->data && mxl_qamx_format(&m->w) && mxl_qamx_available()) {
        m->panels = mxl_aligned_alloc(64, (mxl_qamx_packed_bytes(&m->w) + 63) / 64 * 64);
        if (m->panels) {
            uint64_t seed = 0x13198A2E03707344ULL;
            mxl_synth_fill(t, m->data, nb, &seed);
            mxl_qamx_pack(&m->w, m->panels);
            m->w.prepared = m->panels;
        }
    } else if (m->data) {
        uint64_t seed = 0x13198A2E03707344ULL;
        mxl_synth_fill(t, m->data, nb, &seed);
    }
    m->scratch = mxl_aligned_alloc(64, (mxl_cpu_matmul_scratch_bytes(&m->w, max_tok) + 63) / 64 * 64 + 64);
    if (!m->data || !m->x || !m->y || !m->scratch || (mxl_qamx_format(&m->w) && mxl_qamx_available() && !m->panels)) {
        mxl_tune_mm_destroy(m);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory for a %lld x %lld weight", (long long)rows, (long long)cols);
    }
    for (int64_t i = 0; i < max_tok * cols; i++) m->x[i] = (float)((i * 7919) % 2001 - 1000) * 1e-3f;
    snprintf(m->format, sizeof m->format, "%s%s", inf->name, m->w.prepared ? " (panels)" : "");
    *out = m;
    return MXL_OK;
}

void mxl_tune_mm_destroy(mxl_tune_mm *m) {
    if (!m) return;
    mxl_free(m->data), mxl_free(m->x), mxl_free(m->y);
    mxl_aligned_free(m->panels), mxl_aligned_free(m->scratch);
    mxl_free(m);
}

const char *mxl_tune_mm_format(const mxl_tune_mm *m) { return m->format; }

static void mm_run(void *ctx) {
    mxl_tune_mm *m = ctx;
    mxl_cpu_matmul(&m->w, m->x, m->n_tok, m->y, m->scratch, m->pool);
}

void mxl_tune_mm_measure(mxl_tune_mm *m, mxl_cpu_knob k, const int *cand, int n, int n_tok, const mxl_tune_budget *b,
                         mxl_tune_stat *st) {
    MXL_ASSERT(n_tok >= 1 && n_tok <= m->max_tok);
    m->n_tok = n_tok;
    const int shape[3] = {1, 1, 1}; /* (matmul-split has no shape) */
    measure(mm_run, m, k, shape, cand, n, b, st);
}
