/* matmul.c - dispatch and threading of y = W x (matmul.h).
 *
 * Work split: activations are quantized first (tokens split over the pool), then weight rows are
 * split into contiguous ranges, one range per task (a few tasks per thread for balance; on the
 * panel path, shrinking ranges: split_panels). Within a range, rows are taken in tiles of
 * TILE_ROWS (panels of 16); each tile is multiplied with every token before moving on, so a
 * tile's weight bytes are read from memory once and reused from cache for all tokens.
 *
 * Every kernel comes from the kernel table of the call's level (kernels.h), looked up once per
 * call; the per-format dots and micro-kernels are fetched from it into mm_ctx before the work
 * starts. */
#include "backends/cpu/matmul.h"

#include <stdint.h>
#include <stdlib.h>

#include "backends/cpu/dense.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/quant_amx.h"
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/tune.h"
#include "core/alloc.h"

#define TILE_ROWS 8
/* above this many tokens a quad's weights are unpacked once for all token groups (below, storing
 * and reloading the unpacked vectors costs more than unpacking again per group of 4) */
#define PRE_MIN_TOKENS 12

/* W has the panel layout (quant_amx.h) */
static bool has_panels(const mxl_weight *W) { return W->kind != MXL_W_DENSE && W->prepared; }
/* the panel path (AMX tiles, AVX-512 VNNI, AVX2 or NEON on the same layout) runs W at the level
 * of table K: W has the layout and the level a panel kernel */
static bool panel_path(const mxl_weight *W, const mxl_cpu_kernels *K) { return has_panels(W) && K->qamx_panels; }

/* activations of W's kernels, on the panel path or not: the panel path always takes two-term q8a
 * blocks */
static mxl_act_kind act_kind(const mxl_weight *W, bool panels) {
    if (panels) return MXL_ACT_Q8A2;
    if (W->kind == MXL_W_MLX) return MXL_ACT_Q8A;
    if (W->kind == MXL_W_GGUF) return mxl_gguf_act_kind(W->dtype);
    return MXL_ACT_F32;
}

static size_t act_row_bytes(const mxl_weight *W, bool panels) {
    switch (act_kind(W, panels)) {
    case MXL_ACT_Q8A: return (size_t)(W->cols / 32) * sizeof(mxl_block_q8a);
    case MXL_ACT_Q8K: return (size_t)(W->cols / 256) * sizeof(mxl_block_q8k);
    case MXL_ACT_Q8A2: return (size_t)(W->cols / 32) * sizeof(mxl_block_q8a2);
    default: return 0;
    }
}

size_t mxl_cpu_matmul_scratch_bytes(const mxl_weight *W, int64_t n_tok) {
    /* enough for either kind when W also has the panel layout (the level is chosen per call) */
    size_t a = act_row_bytes(W, false), b = act_row_bytes(W, has_panels(W));
    /* + the AMX pair form's operands for any token count up to n_tok (the largest count first) */
    size_t pair = 0;
    for (int64_t k = n_tok < MXL_QAMX_PAIR_MAX_TOKENS ? n_tok : MXL_QAMX_PAIR_MAX_TOKENS; W->prepared && k > 0 && !pair; k--)
        pair = mxl_qamx_pair_bytes(W, k);
    return (a > b ? a : b) * (size_t)n_tok + (pair ? 64 + pair : 0);
}

void mxl_weight_dequant_row(const mxl_weight *W, int64_t r, float *out) {
    if (W->kind == MXL_W_MLX) {
        mxl_mlx_dequant_row_ref(&W->mlx, r, out);
        return;
    }
    int64_t rb = mxl_weight_row_bytes(W);
    mxl_dequant_row_ref(W->dtype, (const uint8_t *)W->data + r * rb, out, W->cols);
}

typedef struct mm_ctx {
    const mxl_weight *W;
    const float *x;
    int64_t n_tok;
    float *y;
    uint8_t *act;
    size_t act_stride;
    uint8_t *abuf; /* the AMX pair form's operands (after act in scratch), or NULL */
    int64_t row_bytes;
    const mxl_cpu_kernels *K;   /* the call's level (kernels.h) */
    bool panels;                /* the panel path (panel_path) */
    mxl_vec_dot_fn qdot;        /* GGUF SIMD dot or NULL (reference) */
    mxl_vec_dot4_fn qdot4;      /* GGUF 4-token SIMD dot or NULL */
    mxl_mlx_dot_fn mlxdot;      /* MLX dot (the reference at the scalar level) */
    mxl_mlx_dot4_fn mlx4;       /* MLX 4-token SIMD dot or NULL */
    mxl_dense_dot_fn ddot;      /* dense SIMD dot or NULL (reference) */
    mxl_dense_dot4_fn ddot4;    /* dense 4-token SIMD dot or NULL */
    mxl_gemm4x4_fn g44;         /* 4 rows x 1..4 tokens micro-kernel or NULL */
    mxl_gemm4x4_unpack_fn g44_unpack; /* its two-step form for many tokens, or NULL */
    mxl_gemm4x4_pre_fn g44_pre;
    mxl_mlx_gemm4x4_fn mlx44;   /* MLX 4 x 1..4 micro-kernel or NULL */
    mxl_dense_gemm4x4_fn d44;   /* dense 4 x 1..4 micro-kernel or NULL */
    const mxl_row_prep *prep; /* makes x's rows before they are quantized, or NULL */
} mm_ctx;

static void quant_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)thread_index;
    mm_ctx *c = vctx;
    int64_t t0 = c->n_tok * task / n_tasks, t1 = c->n_tok * (task + 1) / n_tasks;
    if (c->prep && t0 < t1) c->prep->fn(c->prep->ctx, t0, t1);
    mxl_act_kind k = act_kind(c->W, c->panels);
    for (int64_t t = t0; t < t1; t++) {
        const float *xt = c->x + t * c->W->cols;
        void *dst = c->act + (size_t)t * c->act_stride;
        if (k == MXL_ACT_Q8A2) {
            c->K->quant_q8a2(xt, dst, c->W->cols);
            if (c->abuf) mxl_qamx_pair_token(c->W, c->n_tok, t, dst, c->abuf);
        } else if (k == MXL_ACT_Q8A) {
            c->K->quant_q8a(xt, dst, c->W->cols);
        } else {
            c->K->quant_q8k(xt, dst, c->W->cols);
        }
    }
}

/* Tasks for quant_task: one per thread, but on AMX CPUs a decode batch's two-term quantization
 * runs on the calling thread, which wrote the activations (in its cache; split, the other
 * thread's half crossed cores and the dispatch cost more than the work). On a 2-core Zen 4 the
 * split was the faster (8-sequence step 3-5% shorter). */
#define QUANT_INLINE_TOKENS 16
static int quant_tasks(const mm_ctx *c, int nth) {
    if (c->panels && c->n_tok <= QUANT_INLINE_TOKENS && mxl_qamx_tiles_available()) return 1;
    return c->n_tok < nth ? (int)c->n_tok : nth;
}

static inline float dot_row(const mm_ctx *c, int64_t r, int64_t t) {
    const mxl_weight *W = c->W;
    switch (W->kind) {
    case MXL_W_DENSE: {
        const void *w = (const uint8_t *)W->data + r * c->row_bytes;
        const float *xt = c->x + t * W->cols;
        return c->ddot ? c->ddot(W->cols, w, xt) : mxl_dense_dot_ref(W->dtype, W->cols, w, xt);
    }
    case MXL_W_GGUF: {
        const void *w = (const uint8_t *)W->data + r * c->row_bytes;
        const void *a = c->act + (size_t)t * c->act_stride;
        return c->qdot ? c->qdot(W->cols, w, a) : mxl_vec_dot_ref(W->dtype, W->cols, w, a);
    }
    default: {
        const mxl_block_q8a *a = (const mxl_block_q8a *)(c->act + (size_t)t * c->act_stride);
        return c->mlxdot(&W->mlx, r, a);
    }
    }
}

/* Rows [rt, re) (one tile) for every token. The kernel chosen for a row never depends on the
 * token count or on a token's position, and each kernel gives a (row, token) pair the same bits
 * whatever else it computes alongside (matmul.h: batch invariance):
 *   - AVX-512 VNNI micro-kernels: 4-row quads (the last quad of the matrix padded) x up to 4
 *     tokens, the token remainder through the same kernel with 1..3 tokens;
 *   - AVX2 4-token dots: bit-identical per token to the 1-token dots used for the remainder;
 *   - otherwise 1-token dots. */
static void tile_rows(const mm_ctx *c, int64_t rt, int64_t re) {
    const mxl_weight *W = c->W;
    const int64_t rows = W->rows;
    int64_t t = 0;
    /* many tokens (> PRE_MIN_TOKENS): unpack each quad's weights once and run every token group from that (the
     * same bits as the one-step kernel; the buffer lives on the stack, up to 256 KB) */
    size_t pre_floats = c->g44_pre && c->n_tok > PRE_MIN_TOKENS ? mxl_gemm4x4_pre_floats(W->cols) : 0;
    if (pre_floats && pre_floats * sizeof(float) <= 256 * 1024) {
        float pre_mem[pre_floats + 16];
        float *pre = (float *)(((uintptr_t)pre_mem + 63) & ~(uintptr_t)63);
        for (int64_t r = rt; r < re; r += 4) {
            int nr = re - r < 4 ? (int)(re - r) : 4;
            c->g44_unpack(W->cols, (const uint8_t *)W->data + r * c->row_bytes, (size_t)c->row_bytes, nr, pre);
            for (t = 0; t < c->n_tok; t += 4) {
                int nt = c->n_tok - t < 4 ? (int)(c->n_tok - t) : 4;
                c->g44_pre(W->cols, pre, nr, c->act + (size_t)t * c->act_stride, c->act_stride, nt, c->y + t * rows + r, rows);
            }
        }
        return;
    }
    if (c->g44 || c->mlx44 || c->d44) {
        for (; t < c->n_tok; t += 4) {
            int nt = c->n_tok - t < 4 ? (int)(c->n_tok - t) : 4;
            const void *a = c->act ? c->act + (size_t)t * c->act_stride : NULL;
            for (int64_t r = rt; r < re; r += 4) {
                int nr = re - r < 4 ? (int)(re - r) : 4;
                float *y = c->y + t * rows + r;
                if (c->d44)
                    c->d44(W->cols, (const uint8_t *)W->data + r * c->row_bytes, (size_t)c->row_bytes,
                           nr, c->x + t * W->cols, W->cols, nt, y, rows);
                else if (c->g44)
                    c->g44(W->cols, (const uint8_t *)W->data + r * c->row_bytes, (size_t)c->row_bytes,
                           nr, a, c->act_stride, nt, y, rows);
                else
                    c->mlx44(&W->mlx, r, nr, a, c->act_stride, nt, y, rows);
            }
        }
        return;
    }
    if (c->qdot4 || c->mlx4 || c->ddot4) { /* four tokens per pass over the tile's weights */
        for (; t + 4 <= c->n_tok; t += 4) {
            const void *a = c->act ? c->act + (size_t)t * c->act_stride : NULL;
            for (int64_t r = rt; r < re; r++) {
                float o[4];
                if (c->ddot4)
                    c->ddot4(W->cols, (const uint8_t *)W->data + r * c->row_bytes, c->x + t * W->cols,
                             W->cols, o);
                else if (c->qdot4)
                    c->qdot4(W->cols, (const uint8_t *)W->data + r * c->row_bytes, a, c->act_stride, o);
                else
                    c->mlx4(&W->mlx, r, a, c->act_stride, o);
                for (int k = 0; k < 4; k++) c->y[(t + k) * rows + r] = o[k];
            }
        }
    }
    for (; t < c->n_tok; t++) {
        float *yt = c->y + t * rows;
        for (int64_t r = rt; r < re; r++) yt[r] = dot_row(c, r, t);
    }
}

/* panels [p0, p1) of c's weight by the level's panel kernel: the tile / VNNI kernels at the
 * AVX-512 level, else the AVX2 form, on AArch64 the NEON form (the same bits) */
static void run_panels(const mm_ctx *c, int64_t p0, int64_t p1) {
    c->K->qamx_panels(c->W, p0, p1, c->act, c->act_stride, c->n_tok, c->abuf, c->y, c->W->rows);
}

/* The panel path's work split: shrinking chunks claimed in order (each half of what is left over
 * the thread count - tune.h's matmul-split sets that divisor -, down to a floor), so the threads start on long contiguous runs of weights
 * and end within a small chunk of each other. With equal chunks (4 per thread), the thread that
 * drew the last one left the others waiting for up to a whole chunk at every matmul of a step. A
 * panel's result does not depend on the chunk that computes it. */
#define SPLIT_MAX 64
typedef struct panel_split {
    int n;
    int64_t at[SPLIT_MAX + 1]; /* chunk i: panels [at[i], at[i + 1]) */
} panel_split;

static void split_panels(int64_t total, int nth, int64_t n_tok, panel_split *s) {
    /* the floor: about two microseconds of work (a panel of 8 tokens is compute-bound; 16 panels
     * of one token read their bytes in about that time) */
    int64_t floor_pan = n_tok >= 16 ? 1 : 16 / n_tok, left = total;
    const int64_t d = mxl_cpu_tune_matmul_split(); /* (tune.h: matmul-split, default 2: halves) */
    s->n = 0;
    s->at[0] = 0;
    while (left > 0) {
        int64_t k = nth == 1 || s->n == SPLIT_MAX - 1 ? left : (left + d * nth - 1) / (d * nth);
        if (k < floor_pan) k = floor_pan;
        if (k > left) k = left;
        left -= k;
        s->at[s->n + 1] = s->at[s->n] + k;
        s->n++;
    }
}

/* the panel path: one weight's panels of 16 rows, split as panel_split */
typedef struct panels_ctx {
    mm_ctx c;
    panel_split s;
} panels_ctx;

static void panels_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)thread_index, (void)n_tasks;
    panels_ctx *p = vctx;
    const mm_ctx *c = &p->c;
    run_panels(c, p->s.at[task], p->s.at[task + 1]);
}

static void rows_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)thread_index;
    mm_ctx *c = vctx;
    int64_t rows = c->W->rows;
    /* whole tiles per task, so only the matrix's last tile can be partial */
    int64_t n_tiles = (rows + TILE_ROWS - 1) / TILE_ROWS;
    int64_t r0 = n_tiles * task / n_tasks * TILE_ROWS;
    int64_t r1 = n_tiles * (task + 1) / n_tasks * TILE_ROWS;
    if (r1 > rows) r1 = rows;
    for (int64_t rt = r0; rt < r1; rt += TILE_ROWS)
        tile_rows(c, rt, rt + TILE_ROWS < r1 ? rt + TILE_ROWS : r1);
}

static void matmul_at(const mxl_weight *W, const mxl_row_prep *prep, const float *x, int64_t n_tok, float *y,
                      void *scratch, mxl_threadpool *pool, const mxl_cpu_kernels *K) {
    const bool panels = panel_path(W, K);
    mm_ctx c = {.W = W, .x = x, .n_tok = n_tok, .y = y, .act = scratch, .act_stride = act_row_bytes(W, panels), .K = K,
                .panels = panels, .prep = prep};
    if (panels && K->qamx_pair_bytes && K->qamx_pair_bytes(W, n_tok) > 0)
        c.abuf = (uint8_t *)(((uintptr_t)((uint8_t *)scratch + c.act_stride * (size_t)n_tok) + 63) & ~(uintptr_t)63);
    if (W->kind != MXL_W_MLX) c.row_bytes = mxl_weight_row_bytes(W);
    /* the level's kernels for W's format (SIMD dots bit-identical to the references except the
     * dense ones and the 4 x 4 micro-kernels, float paths; NULL: none at this level) */
    if (W->kind == MXL_W_GGUF) {
        c.qdot = K->gguf_dot ? K->gguf_dot(W->dtype) : NULL;
        c.qdot4 = K->gguf_dot4 ? K->gguf_dot4(W->dtype) : NULL;
        c.g44 = K->gguf_gemm4x4 ? K->gguf_gemm4x4(W->dtype) : NULL;
        if (!K->gguf_gemm4x4_pre || !K->gguf_gemm4x4_pre(W->dtype, &c.g44_unpack, &c.g44_pre))
            c.g44_unpack = NULL, c.g44_pre = NULL;
    }
    if (W->kind == MXL_W_MLX) {
        c.mlxdot = K->mlx_dot;
        c.mlx4 = K->mlx_dot4;
        c.mlx44 = K->mlx_gemm4x4 ? K->mlx_gemm4x4(W->mlx.bits) : NULL;
    }
    if (W->kind == MXL_W_DENSE) {
        c.ddot = K->dense_dot ? K->dense_dot(W->dtype) : NULL;
        c.ddot4 = K->dense_dot4 ? K->dense_dot4(W->dtype) : NULL;
        c.d44 = K->dense_gemm4x4 ? K->dense_gemm4x4(W->dtype) : NULL;
    }
    int nth = pool ? mxl_threadpool_size(pool) : 1;
    if (act_kind(W, panels) != MXL_ACT_F32) {
        MXL_ASSERT(scratch != NULL);
        int qt = quant_tasks(&c, nth);
        if (pool && qt > 1) mxl_threadpool_run(pool, qt, quant_task, &c);
        else quant_task(&c, 0, 1, 0);
    } else if (prep) {
        prep->fn(prep->ctx, 0, n_tok);
    }
    if (panels) {
        panels_ctx p = {.c = c};
        split_panels((W->rows + 15) / 16, pool ? nth : 1, n_tok, &p.s);
        if (pool && p.s.n > 1) mxl_threadpool_run(pool, p.s.n, panels_task, &p);
        else run_panels(&c, 0, p.s.at[p.s.n]);
        return;
    }
    /* a few tasks per thread for balance, but keep tiles whole where rows allow */
    int64_t n_tasks = nth == 1 ? 1 : (int64_t)nth * 2 * mxl_cpu_tune_matmul_split(); /* (tune.h, default 4) */
    if (n_tasks > (W->rows + TILE_ROWS - 1) / TILE_ROWS) n_tasks = (W->rows + TILE_ROWS - 1) / TILE_ROWS;
    if (n_tasks < 1) n_tasks = 1;
    if (pool && n_tasks > 1) mxl_threadpool_run(pool, (int)n_tasks, rows_task, &c);
    else rows_task(&c, 0, 1, 0);
}

void mxl_cpu_matmul_isa(const mxl_weight *W, const float *x, int64_t n_tok, float *y,
                        void *scratch, mxl_threadpool *pool, mxl_cpu_isa isa) {
    matmul_at(W, NULL, x, n_tok, y, scratch, pool, mxl_cpu_kern_at(isa));
}

void mxl_cpu_matmul(const mxl_weight *W, const float *x, int64_t n_tok, float *y,
                    void *scratch, mxl_threadpool *pool) {
    matmul_at(W, NULL, x, n_tok, y, scratch, pool, mxl_cpu_kern());
}

void mxl_cpu_matmul_prep(const mxl_weight *W, const mxl_row_prep *prep, const float *x, int64_t n_tok, float *y,
                         void *scratch, mxl_threadpool *pool) {
    matmul_at(W, prep, x, n_tok, y, scratch, pool, mxl_cpu_kern());
}

void mxl_cpu_matmul_f32_ref(const mxl_weight *W, const float *x, int64_t n_tok, float *y) {
    mxl_cpu_matmul_f32_ref_rows(W, x, n_tok, y, 0, W->rows);
}

void mxl_cpu_matmul_f32_ref_rows(const mxl_weight *W, const float *x, int64_t n_tok, float *y, int64_t r0, int64_t r1) {
    float *row = mxl_malloc((size_t)W->cols * sizeof(float));
    MXL_ASSERT(row != NULL);
    for (int64_t r = r0; r < r1; r++) {
        mxl_weight_dequant_row(W, r, row);
        for (int64_t t = 0; t < n_tok; t++) {
            const float *xt = x + t * W->cols;
            float acc = 0.0f;
            for (int64_t i = 0; i < W->cols; i++) acc += row[i] * xt[i];
            y[t * W->rows + r] = acc;
        }
    }
    mxl_free(row);
}

/* mxl_cpu_matmul_multi on the panel path: the weights' panels as one sequence, split over the
 * tasks; each task runs the part of each weight its range covers */
typedef struct multi_ctx {
    mm_ctx c[8];
    int n_w;
    int64_t n_pan[8], total;
    panel_split s;
    const mxl_side_task *side; /* tasks [0, side->n_parts) when set; the panel ranges follow */
} multi_ctx;

static void multi_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)thread_index, (void)n_tasks;
    multi_ctx *m = vctx;
    if (m->side) {
        if (task < m->side->n_parts) {
            m->side->fn(m->side->ctx, task);
            return;
        }
        task -= m->side->n_parts;
    }
    int64_t g0 = m->s.at[task], g1 = m->s.at[task + 1], base = 0;
    for (int i = 0; i < m->n_w && base < g1; base += m->n_pan[i], i++) {
        int64_t p0 = g0 > base ? g0 - base : 0, p1 = g1 - base < m->n_pan[i] ? g1 - base : m->n_pan[i];
        const mm_ctx *c = &m->c[i];
        if (p0 < p1) run_panels(c, p0, p1);
    }
}

void mxl_cpu_matmul_multi(const mxl_weight *const *W, int n_w, const mxl_row_prep *prep, const float *x,
                          int64_t n_tok, float *const *y, void *scratch, mxl_threadpool *pool) {
    mxl_cpu_matmul_multi_side(W, n_w, prep, NULL, x, n_tok, y, scratch, pool);
}

void mxl_cpu_matmul_multi_side(const mxl_weight *const *W, int n_w, const mxl_row_prep *prep, const mxl_side_task *side,
                               const float *x, int64_t n_tok, float *const *y, void *scratch, mxl_threadpool *pool) {
    MXL_ASSERT(n_w >= 1 && n_w <= 8);
    const mxl_cpu_kernels *K = mxl_cpu_kern();
    bool panels = true;
    for (int i = 0; i < n_w; i++) panels = panels && panel_path(W[i], K) && W[i]->cols == W[0]->cols;
    if (!panels || (n_w == 1 && !side)) {
        for (int i = 0; i < n_w; i++) matmul_at(W[i], i == 0 ? prep : NULL, x, n_tok, y[i], scratch, pool, K);
        for (int i = 0; side && i < side->n_parts; i++) side->fn(side->ctx, i);
        return;
    }
    /* one quantization (and pair-form operands, when any weight takes that form) for all */
    multi_ctx m;
    memset(&m, 0, sizeof m);
    m.n_w = n_w;
    mm_ctx *q = &m.c[0];
    *q = (mm_ctx){.W = W[0], .x = x, .n_tok = n_tok, .act = scratch, .act_stride = act_row_bytes(W[0], true), .K = K,
                  .panels = true, .prep = prep};
    for (int i = 0; i < n_w && !q->abuf && K->qamx_pair_bytes; i++)
        if (K->qamx_pair_bytes(W[i], n_tok) > 0)
            q->abuf = (uint8_t *)(((uintptr_t)((uint8_t *)scratch + q->act_stride * (size_t)n_tok) + 63) & ~(uintptr_t)63);
    int nth = pool ? mxl_threadpool_size(pool) : 1, qt = quant_tasks(q, nth);
    if (pool && qt > 1) mxl_threadpool_run(pool, qt, quant_task, q);
    else quant_task(q, 0, 1, 0);
    for (int i = 0; i < n_w; i++) {
        m.c[i] = *q;
        m.c[i].W = W[i], m.c[i].y = y[i], m.c[i].prep = NULL;
        if (!K->qamx_pair_bytes || K->qamx_pair_bytes(W[i], n_tok) == 0) m.c[i].abuf = NULL;
        m.n_pan[i] = (W[i]->rows + 15) / 16;
        m.total += m.n_pan[i];
    }
    split_panels(m.total, pool ? nth : 1, n_tok, &m.s);
    m.side = side;
    const int n_tasks = m.s.n + (side ? side->n_parts : 0);
    if (pool && nth > 1 && n_tasks > 1) {
        mxl_threadpool_run(pool, n_tasks, multi_task, &m);
    } else {
        for (int i = 0; side && i < side->n_parts; i++) side->fn(side->ctx, i);
        m.side = NULL;
        for (int t = 0; t < m.s.n; t++) multi_task(&m, t, m.s.n, 0);
    }
}
