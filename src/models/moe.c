/* moe.c - the shared sparse mixture-of-experts block (moe.h): routing, tokens grouped by expert,
 * each expert's gated MLP through the backend's matmuls, the weighted sum and the shared expert.
 * Reference for the math: transformers' Qwen2MoeSparseMoeBlock / MixtralSparseMoeBlock. */
#include "models/moe.h"

#include <math.h>
#include <string.h>

static int64_t width(const mxl_decoder_hparams *hp) { return hp->moe_ffn > hp->shared_ffn ? hp->moe_ffn : hp->shared_ffn; }

static uint64_t pad16(uint64_t n) { return (n + 15) & ~(uint64_t)15; }

#define N_BUF 13
#define N_LANE_BUF 5

/* float counts of the buffers, in mxl_moe_scratch's order, then one lane's */
static void sizes(const mxl_decoder_hparams *hp, int64_t m, size_t lane_mm_bytes, uint64_t out[N_BUF], uint64_t lane[N_LANE_BUF]) {
    const uint64_t M = (uint64_t)m, E = (uint64_t)hp->n_experts, K = (uint64_t)hp->n_experts_used,
                   H = (uint64_t)hp->hidden, F = (uint64_t)width(hp), MF = (M > K ? M : K) * F, /* one row's K experts too */
                   R = MXL_MOE_LANE_ROWS;
    const uint64_t s[N_BUF] = {M * E, M * K, M * K, M * K, E + 1, M * H, MF, MF, M * K * H, M * H + M, E, E, E};
    const uint64_t l[N_LANE_BUF] = {R * H, R * F, R * F, R * H, (lane_mm_bytes + 3) / 4};
    memcpy(out, s, sizeof s);
    memcpy(lane, l, sizeof l);
}

static int lanes_of(int n_lanes) { return n_lanes < 2 ? 0 : n_lanes > MXL_MOE_MAX_LANES ? MXL_MOE_MAX_LANES : n_lanes; }

uint64_t mxl_moe_scratch_floats(const mxl_decoder_hparams *hp, int64_t max_rows, int n_lanes, size_t lane_mm_bytes) {
    uint64_t s[N_BUF], l[N_LANE_BUF], t = 0;
    sizes(hp, max_rows, lane_mm_bytes, s, l);
    for (int i = 0; i < N_BUF; i++) t += pad16(s[i]);
    for (int k = 0; k < lanes_of(n_lanes); k++)
        for (int i = 0; i < N_LANE_BUF; i++) t += pad16(l[i]);
    return t;
}

void mxl_moe_scratch_carve(const mxl_decoder_hparams *hp, int64_t max_rows, int n_lanes, size_t lane_mm_bytes, float *mem,
                           mxl_moe_scratch *s) {
    uint64_t sz[N_BUF], lz[N_LANE_BUF];
    sizes(hp, max_rows, lane_mm_bytes, sz, lz);
    void *p[N_BUF];
    for (int i = 0; i < N_BUF; i++) {
        p[i] = mem;
        mem += pad16(sz[i]);
    }
    s->n_lanes = lanes_of(n_lanes);
    for (int k = 0; k < s->n_lanes; k++) {
        float *lp[N_LANE_BUF];
        for (int i = 0; i < N_LANE_BUF; i++) {
            lp[i] = mem;
            mem += pad16(lz[i]);
        }
        s->lanes[k] = (mxl_moe_lane){lp[0], lp[1], lp[2], lp[3], lp[4]};
    }
    s->logits = p[0];
    s->weights = p[1];
    s->idx = p[2];
    s->order = p[3];
    s->count = p[4];
    s->xg = p[5];
    s->g = p[6];
    s->u = p[7];
    s->yk = p[8];
    s->ys = p[9];
    s->sg = s->ys + max_rows * hp->hidden;
    s->choice = p[10];
    s->active = p[11];
    s->owner = p[12];
}

void mxl_moe_topk(const float *p, int64_t n, int64_t k, int32_t *idx) {
    /* insertion into a sorted list of k: strictly greater moves up, so ties keep the lower index */
    int64_t m = 0;
    for (int64_t e = 0; e < n; e++) {
        if (m == k && !(p[e] > p[idx[k - 1]])) continue;
        int64_t j = m < k ? m++ : k - 1;
        while (j > 0 && p[e] > p[idx[j - 1]]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = (int32_t)e;
    }
}

/* The group-limited choice (moe_n_group > 1): c [E] the selection scores, in place; groups other
 * than the moe_topk_group best (a group's score: the sum of its moe_group_top best, two in
 * DeepSeek V3's noaux_tc, one in V2's group_limited_greedy) masked out. */
static void mask_groups(const mxl_decoder_hparams *hp, float *c) {
    const int64_t G = hp->moe_n_group, per = hp->n_experts / G;
    if (G <= 1 || hp->moe_topk_group >= G) return;
    const int64_t top = hp->moe_group_top;
    float gs[256];
    int32_t best[2], keep[256];
    uint8_t kept[256] = {0};
    for (int64_t g = 0; g < G; g++) {
        mxl_moe_topk(c + g * per, per, top, best);
        gs[g] = top == 1 ? c[g * per + best[0]] : c[g * per + best[0]] + c[g * per + best[1]];
    }
    mxl_moe_topk(gs, G, hp->moe_topk_group, keep);
    for (int64_t j = 0; j < hp->moe_topk_group; j++) kept[keep[j]] = 1;
    for (int64_t g = 0; g < G; g++)
        if (!kept[g])
            for (int64_t e = 0; e < per; e++) c[g * per + e] = -INFINITY;
}

/* PhiMoE's sparsemixer at inference: of the logits s [E] not excluded (ex, or -1), the best (ties:
 * the lower index) and its softmax weight among those within 2 eps of it, relative to
 * max(|s_j|, best) as transformers' mask computes it (a 0 / 0 masks nothing, as there). */
static void sparsemixer_pick(const float *s, int64_t E, float eps, int32_t ex, int32_t *idx, float *w) {
    int32_t a = -1;
    for (int64_t e = 0; e < E; e++)
        if (e != ex && (a < 0 || s[e] > s[a])) a = (int32_t)e;
    const float mx = s[a];
    float sum = 0;
    for (int64_t j = 0; j < E; j++) {
        if (j == ex) continue;
        const float f = fabsf(s[j]) > mx ? fabsf(s[j]) : mx;
        if ((mx - s[j]) / f > 2.0f * eps) continue;
        sum += expf(s[j] - mx);
    }
    *idx = a;
    *w = 1.0f / sum;
}

/* Each row's experts and weights from the router logits (in place: logits become the scores p;
 * experts are chosen by p, or by p + the correction bias within the kept groups). */
static void route(const mxl_decoder_hparams *hp, const mxl_moe_layer *L, const mxl_moe_scratch *s, int64_t n) {
    const int64_t E = hp->n_experts, K = hp->n_experts_used;
    const bool sigmoid = hp->moe_router == MXL_MOE_SIGMOID;
    for (int64_t t = 0; t < n; t++) {
        float *p = s->logits + t * E;
        int32_t *idx = s->idx + t * K;
        float *w = s->weights + t * K;
        if (hp->moe_router_softcap > 0)
            for (int64_t e = 0; e < E; e++) p[e] = hp->moe_router_softcap * tanhf(p[e] / hp->moe_router_softcap);
        if (hp->moe_router == MXL_MOE_SPARSEMIXER) { /* (K == 2, checked at load) */
            sparsemixer_pick(p, E, hp->moe_jitter_eps, -1, &idx[0], &w[0]);
            sparsemixer_pick(p, E, hp->moe_jitter_eps, idx[0], &idx[1], &w[1]);
            continue;
        }
        if (sigmoid) {
            for (int64_t e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-p[e]));
        } else {
            float mx = -INFINITY, sum = 0;
            for (int64_t e = 0; e < E; e++) mx = p[e] > mx ? p[e] : mx;
            for (int64_t e = 0; e < E; e++) sum += (p[e] = expf(p[e] - mx));
            for (int64_t e = 0; e < E; e++) p[e] /= sum;
        }
        if (L->router_bias || sigmoid || hp->moe_n_group > 1) {
            for (int64_t e = 0; e < E; e++) s->choice[e] = p[e] + (L->router_bias ? L->router_bias[e] : 0.0f);
            mask_groups(hp, s->choice);
            mxl_moe_topk(s->choice, E, K, idx);
        } else {
            mxl_moe_topk(p, E, K, idx);
        }
        float tot = 0;
        for (int64_t j = 0; j < K; j++) tot += (w[j] = p[idx[j]]);
        /* (transformers adds 1e-20 to the sigmoid router's denominator) */
        if (hp->moe_norm_min > 0 && tot < hp->moe_norm_min) tot = hp->moe_norm_min;
        if (hp->moe_norm_topk && tot > 0)
            for (int64_t j = 0; j < K; j++) w[j] /= sigmoid ? tot + 1e-20f : tot;
        if (hp->moe_routed_scale != 1.0f)
            for (int64_t j = 0; j < K; j++) w[j] *= hp->moe_routed_scale;
        if (L->expert_scale)
            for (int64_t j = 0; j < K; j++) w[j] *= L->expert_scale[idx[j]];
    }
}

/* gate/up of rows x [m, hidden] through one gated MLP into y [m, hidden] */
/* y[m, n] += b[n] for each of m rows (b NULL: nothing) */
static void add_rows(float *y, const float *b, int64_t m, int64_t n) {
    if (!b) return;
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < n; c++) y[r * n + c] += b[c];
}

/* the experts' GLU of n values in place in g: act(g) * u, or GPT-OSS's clamped SwiGLU */
static void expert_glu(const mxl_backend *be, const mxl_decoder_hparams *hp, float *g, const float *u, int64_t n, bool expert) {
    if (expert && hp->moe_oai_limit > 0) be->ops->swiglu_oai(be, g, u, n, hp->moe_oai_alpha, hp->moe_oai_limit, g);
    else be->ops->glu(be, hp->act, g, u, n, g);
}

/* gate/up of rows x [m, hidden] through one gated MLP into y [m, hidden]; b: its biases (gate, up,
 * down; an expert's, or NULLs). An unbound gate (rows 0) is a plain MLP: down(act(up(x)))
 * (Nemotron-H's relu2 experts). */
static void gated_mlp(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_weight *gate, const mxl_weight *up,
                      const mxl_weight *down, const float *const b[3], bool expert, const float *x, int64_t m, float *y, float *g,
                      float *u, void *mm, mxl_threadpool *pool) {
    if (gate->rows == 0) {
        be->ops->matmul(be, up, NULL, x, m, g, mm, pool);
        add_rows(g, b[1], m, up->rows);
        be->ops->act(be, hp->act, g, m * up->rows, g);
    } else {
        const mxl_weight *W[2] = {gate, up};
        float *out[2] = {g, u};
        be->ops->matmul_multi(be, W, 2, NULL, NULL, x, m, out, mm, pool);
        add_rows(g, b[0], m, gate->rows);
        add_rows(u, b[1], m, up->rows);
        expert_glu(be, hp, g, u, m * gate->rows, expert);
    }
    be->ops->matmul(be, down, NULL, g, m, y, mm, pool);
    add_rows(y, b[2], m, down->rows);
}

/* expert e's biases (NULLs without) */
static void expert_biases(const mxl_decoder_hparams *hp, const mxl_moe_layer *L, int32_t e, const float *b[3]) {
    const int64_t F = hp->moe_ffn, H = hp->hidden;
    b[0] = L->gate_b ? L->gate_b + e * F : NULL;
    b[1] = L->up_b ? L->up_b + e * F : NULL;
    b[2] = L->down_b ? L->down_b + e * H : NULL;
}

/* Expert e on its rows order[a .. a + m) (gathered from h into xg), outputs scattered to their
 * (row, slot) places in yk. */
static void run_expert(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_moe_layer *L, const float *h,
                       const mxl_moe_scratch *s, int32_t e, int64_t a, int64_t m, float *xg, float *g, float *u, float *ys,
                       void *mm, mxl_threadpool *pool) {
    const int64_t K = hp->n_experts_used, H = hp->hidden;
    for (int64_t r = 0; r < m; r++) memcpy(xg + r * H, h + (s->order[a + r] / K) * H, (size_t)H * sizeof(float));
    if (hp->moe_scale_input) /* Llama 4: the row times its router weight goes in */
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < H; c++) xg[r * H + c] *= s->weights[s->order[a + r]];
    const float *b[3];
    expert_biases(hp, L, e, b);
    gated_mlp(be, hp, &L->gate[e], &L->up[e], &L->down[e], b, true, xg, m, ys, g, u, mm, pool);
    for (int64_t r = 0; r < m; r++) memcpy(s->yk + (int64_t)s->order[a + r] * H, ys + r * H, (size_t)H * sizeof(float));
}

/* The expert-parallel path (moe.h): lane `task` runs the active experts assigned to it. */
typedef struct par_ctx {
    const mxl_backend *be;
    const mxl_decoder_hparams *hp;
    const mxl_moe_layer *L;
    const float *h;
    const mxl_moe_scratch *s;
    int64_t n_active;
} par_ctx;

static void par_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)n_tasks, (void)thread_index;
    const par_ctx *p = vctx;
    const mxl_moe_scratch *s = p->s;
    const mxl_moe_lane *ln = &s->lanes[task];
    for (int64_t i = 0; i < p->n_active; i++) {
        if (s->owner[i] != task) continue;
        const int32_t e = s->active[i];
        const int64_t a = e == 0 ? 0 : s->count[e - 1];
        run_expert(p->be, p->hp, p->L, p->h, s, e, a, s->count[e] - a, ln->xg, ln->g, ln->u, ln->ys, ln->mm, NULL);
    }
}

/* One row (a decode step): every chosen expert reads the same input, so their gate and up
 * projections run together (matmul_multi: one quantization of the row, one dispatch per 4
 * experts; each output bitwise what the grouped path computes), then one GLU over all of them
 * and a down projection each; expert outputs in yk [k, hidden]. */
static void one_row(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_moe_layer *L, const float *h,
                    const mxl_moe_scratch *s, void *mm, mxl_threadpool *pool) {
    const int64_t K = hp->n_experts_used, F = hp->moe_ffn, H = hp->hidden;
    const bool plain = hp->moe_plain; /* (up only: the activation of up's output goes down) */
    for (int64_t j0 = 0; j0 < K; j0 += 4) {
        const int m = (int)(K - j0 < 4 ? K - j0 : 4);
        const mxl_weight *W[8];
        float *y[8];
        int nw = 0;
        for (int j = 0; j < m; j++) {
            const int32_t e = s->idx[j0 + j];
            if (!plain) W[nw] = &L->gate[e], y[nw++] = s->g + (j0 + j) * F;
            W[nw] = &L->up[e], y[nw++] = (plain ? s->g : s->u) + (j0 + j) * F;
        }
        be->ops->matmul_multi(be, W, nw, NULL, NULL, h, 1, y, mm, pool);
    }
    for (int64_t j = 0; j < K; j++) {
        const float *b[3];
        expert_biases(hp, L, s->idx[j], b);
        if (!plain) add_rows(s->g + j * F, b[0], 1, F);
        add_rows((plain ? s->g : s->u) + j * F, b[1], 1, F);
    }
    if (plain) be->ops->act(be, hp->act, s->g, K * F, s->g);
    else expert_glu(be, hp, s->g, s->u, K * F, true);
    for (int64_t j = 0; j < K; j++) {
        const float *b[3];
        expert_biases(hp, L, s->idx[j], b);
        be->ops->matmul(be, &L->down[s->idx[j]], NULL, s->g + j * F, 1, s->yk + j * H, mm, pool);
        add_rows(s->yk + j * H, b[2], 1, H);
    }
}

/* Several rows: the (row, slot) pairs grouped by expert, each chosen expert run once on the rows
 * that chose it; outputs in yk [n, k, hidden]. */
static void grouped_rows(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_moe_layer *L, const float *h,
                         int64_t n, const mxl_moe_scratch *s, void *mm_scratch, mxl_threadpool *pool) {
    const int64_t E = hp->n_experts, K = hp->n_experts_used;
    /* (row, slot) pairs grouped by expert, rows ascending within each expert */
    memset(s->count, 0, (size_t)(E + 1) * sizeof *s->count);
    for (int64_t i = 0; i < n * K; i++) s->count[s->idx[i] + 1]++;
    for (int64_t e = 0; e < E; e++) s->count[e + 1] += s->count[e];
    for (int64_t i = 0; i < n * K; i++) s->order[s->count[s->idx[i]]++] = (int32_t)i;
    /* count[e] is now the end of expert e's run (the start of e + 1's) */
    int64_t n_active = 0, most = 0;
    for (int64_t e = 0, a = 0; e < E; a = s->count[e], e++)
        if (s->count[e] > a) {
            s->active[n_active++] = (int32_t)e;
            most = s->count[e] - a > most ? s->count[e] - a : most;
        }
    const int nth = pool ? mxl_threadpool_size(pool) : 1;
    if (s->n_lanes >= nth && nth > 1 && n_active >= nth && most <= MXL_MOE_LANE_ROWS) {
        /* whole experts to lanes, least loaded first (an expert's cost: reading its matrices,
         * plus a little per row) */
        int64_t load[MXL_MOE_MAX_LANES] = {0};
        for (int64_t i = 0; i < n_active; i++) {
            int best = 0;
            for (int k = 1; k < nth; k++) best = load[k] < load[best] ? k : best;
            const int32_t e = s->active[i];
            load[best] += 8 + s->count[e] - (e == 0 ? 0 : s->count[e - 1]);
            s->owner[i] = best;
        }
        par_ctx p = {be, hp, L, h, s, n_active};
        mxl_threadpool_run(pool, nth, par_task, &p);
        return;
    }
    for (int64_t i = 0; i < n_active; i++) {
        const int32_t e = s->active[i];
        const int64_t a = e == 0 ? 0 : s->count[e - 1];
        run_expert(be, hp, L, h, s, e, a, s->count[e] - a, s->xg, s->g, s->u, s->ys, mm_scratch, pool);
    }
}

void mxl_moe_forward(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_moe_layer *L, const float *h,
                     const float *hr, int64_t n, float *y, const mxl_moe_scratch *s, void *mm_scratch, mxl_threadpool *pool) {
    const mxl_backend *ref = mxl_backend_reference();
    const int64_t K = hp->n_experts_used, H = hp->hidden;
    ref->ops->matmul(ref, &L->router, NULL, hr ? hr : h, n, s->logits, mm_scratch, pool);
    add_rows(s->logits, L->router_logit_bias, n, hp->n_experts);
    route(hp, L, s, n);
    if (n == 1 && !hp->moe_scale_input) one_row(be, hp, L, h, s, mm_scratch, pool); /* (scaled inputs differ per expert) */
    else grouped_rows(be, hp, L, h, n, s, mm_scratch, pool);
    for (int64_t t = 0; t < n; t++) {
        float *yt = y + t * H;
        const float *w = s->weights + t * K;
        if (hp->moe_scale_input) { /* the weights went in with the rows */
            memcpy(yt, s->yk + (t * K) * H, (size_t)H * sizeof(float));
            for (int64_t j = 1; j < K; j++)
                for (int64_t c = 0; c < H; c++) yt[c] += s->yk[(t * K + j) * H + c];
            continue;
        }
        for (int64_t c = 0; c < H; c++) yt[c] = w[0] * s->yk[(t * K) * H + c];
        for (int64_t j = 1; j < K; j++) {
            const float *src = s->yk + (t * K + j) * H;
            for (int64_t c = 0; c < H; c++) yt[c] += w[j] * src[c];
        }
    }
    if (L->sh_down.rows <= 0) return;
    const float *none[3] = {NULL, NULL, NULL};
    gated_mlp(be, hp, &L->sh_gate, &L->sh_up, &L->sh_down, none, false, h, n, s->ys, s->g, s->u, mm_scratch, pool);
    if (L->sh_router.rows > 0) ref->ops->matmul(ref, &L->sh_router, NULL, h, n, s->sg, mm_scratch, pool);
    for (int64_t t = 0; t < n; t++) {
        const float g = (L->sh_router.rows > 0 ? 1.0f / (1.0f + expf(-s->sg[t])) : 1.0f) * hp->moe_shared_scale;
        for (int64_t c = 0; c < H; c++) y[t * H + c] += g * s->ys[t * H + c];
    }
}
