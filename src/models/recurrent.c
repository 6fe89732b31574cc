/* recurrent.c - the recurrent mixers of recurrent.h: projections through the backend, the
 * convolution and the scans here, token by token. */
#include "models/recurrent.h"

#include <math.h>
#include <string.h>

#include "models/decoder.h"

const char *mxl_layer_kind_name(mxl_layer_kind k) {
    switch (k) {
    case MXL_LAYER_ATTN: return "attention";
    case MXL_LAYER_SHORTCONV: return "short convolution";
    case MXL_LAYER_MAMBA: return "mamba";
    case MXL_LAYER_MAMBA2: return "mamba2";
    case MXL_LAYER_GDN: return "gated delta net";
    case MXL_LAYER_MLP_ONLY: return "MLP only";
    case MXL_LAYER_RGLRU: return "RG-LRU";
    case MXL_LAYER_LIGHTNING: return "lightning attention";
    default: return "?";
    }
}

int64_t mxl_rec_conv_dim(const mxl_decoder_hparams *hp, mxl_layer_kind k) {
    switch (k) {
    case MXL_LAYER_SHORTCONV: return hp->hidden;
    case MXL_LAYER_MAMBA: return hp->ssm_inner;
    case MXL_LAYER_MAMBA2: return hp->ssm_inner + 2 * hp->ssm_groups * hp->ssm_state;
    case MXL_LAYER_GDN: return 2 * hp->gdn_k_heads * hp->gdn_k_dim + hp->gdn_v_heads * hp->gdn_v_dim;
    case MXL_LAYER_RGLRU: return hp->ssm_inner;
    default: return 0;
    }
}

int64_t mxl_rec_in_dim(const mxl_decoder_hparams *hp, mxl_layer_kind k) {
    switch (k) {
    case MXL_LAYER_SHORTCONV: return 3 * hp->hidden;
    case MXL_LAYER_MAMBA: return 2 * hp->ssm_inner;
    case MXL_LAYER_MAMBA2: return hp->ssm_inner + mxl_rec_conv_dim(hp, k) + hp->ssm_heads;
    case MXL_LAYER_RGLRU: return hp->ssm_inner; /* (linear_x) */
    case MXL_LAYER_LIGHTNING: return 3 * hp->ssm_inner; /* (qkv_proj) */
    case MXL_LAYER_GDN: /* in_proj's rows: qkvz, or with gdn_split qkv */
        return mxl_rec_conv_dim(hp, k) + (hp->gdn_split || hp->gdn_kda ? 0 : hp->gdn_v_heads * hp->gdn_v_dim);
    default: return 0;
    }
}

size_t mxl_rec_state_floats(const mxl_decoder_hparams *hp, mxl_layer_kind k) {
    if (k == MXL_LAYER_ATTN || k == MXL_LAYER_MLP_ONLY || k >= MXL_LAYER_KIND_COUNT) return 0;
    size_t conv = (size_t)(hp->ssm_conv - 1) * (size_t)mxl_rec_conv_dim(hp, k);
    if (k == MXL_LAYER_SHORTCONV) return conv;
    if (k == MXL_LAYER_GDN) return conv + (size_t)hp->gdn_v_heads * (size_t)hp->gdn_k_dim * (size_t)hp->gdn_v_dim; /* [NV, dk, dv] */
    if (k == MXL_LAYER_RGLRU) return conv + (size_t)hp->ssm_inner; /* [W] */
    if (k == MXL_LAYER_LIGHTNING) return (size_t)hp->ssm_inner * (size_t)(hp->ssm_inner / hp->ssm_heads); /* [NH, hd, hd] */
    return conv + (size_t)hp->ssm_inner * (size_t)hp->ssm_state; /* MAMBA [DI, N]; MAMBA2 [NH, P, N] */
}

static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

int64_t mxl_rec_gdn_gates(const mxl_decoder_hparams *hp, int64_t *z_off) {
    const int64_t NV = hp->gdn_v_heads, a = hp->gdn_kda ? NV * hp->gdn_k_dim : NV;
    if (z_off) *z_off = NV + a;
    return NV + a + NV * hp->gdn_v_dim;
}

/* per-row widths of the scratch buffers: the largest over the kinds the model uses */
static void scratch_widths(const mxl_decoder_hparams *hp, int64_t w[5]) {
    memset(w, 0, 5 * sizeof *w);
    bool seen[MXL_LAYER_KIND_COUNT] = {false};
    for (int64_t l = 0; hp->layer_kind && l < hp->n_layers; l++)
        if (hp->layer_kind[l] < MXL_LAYER_KIND_COUNT) seen[hp->layer_kind[l]] = true;
    if (hp->parallel_ssm) seen[MXL_LAYER_MAMBA2] = true; /* (beside attention in every layer) */
    for (int k = MXL_LAYER_SHORTCONV; k < MXL_LAYER_KIND_COUNT; k++) {
        if (!seen[k] || k == MXL_LAYER_MLP_ONLY) continue;
        w[0] = max2(w[0], mxl_rec_in_dim(hp, (mxl_layer_kind)k));
        w[1] = max2(w[1], mxl_rec_conv_dim(hp, (mxl_layer_kind)k));
        if (k == MXL_LAYER_MAMBA) {
            w[2] = max2(w[2], hp->ssm_dt_rank + 2 * hp->ssm_state);
            w[3] = max2(w[3], hp->ssm_inner);
        }
        if (k == MXL_LAYER_GDN) w[3] = max2(w[3], mxl_rec_gdn_gates(hp, NULL));
        if (k == MXL_LAYER_GDN && hp->gdn_kda) /* (gdn_project's b, f_a, g_a, f_b, g_b outputs) */
            w[0] = max2(w[0], hp->gdn_v_heads + hp->gdn_k_dim + hp->gdn_v_dim + hp->gdn_v_heads * (hp->gdn_k_dim + hp->gdn_v_dim));
        if (k == MXL_LAYER_RGLRU || k == MXL_LAYER_LIGHTNING) w[3] = max2(w[3], hp->ssm_inner); /* (linear_y's / the gate's rows) */
        w[4] = max2(w[4], k == MXL_LAYER_SHORTCONV ? hp->hidden : k == MXL_LAYER_GDN ? hp->gdn_v_heads * hp->gdn_v_dim : hp->ssm_inner);
    }
}

size_t mxl_rec_scratch_floats(const mxl_decoder_hparams *hp, int64_t max_rows) {
    int64_t w[5];
    scratch_widths(hp, w);
    size_t total = 0;
    for (int i = 0; i < 5; i++) total += ((size_t)(w[i] * max_rows) + 15) & ~(size_t)15;
    return total;
}

void mxl_rec_scratch_carve(const mxl_decoder_hparams *hp, int64_t max_rows, float *mem, mxl_rec_scratch *s) {
    int64_t w[5];
    scratch_widths(hp, w);
    float **ptr[5] = {&s->in, &s->xc, &s->dbc, &s->dt, &s->y};
    for (int i = 0; i < 5; i++) {
        *ptr[i] = mem;
        mem += ((size_t)(w[i] * max_rows) + 15) & ~(size_t)15;
    }
}

/* as torch's F.softplus (threshold 20: the input itself above it) */
static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* x[n] / sqrt(mean(x^2) + eps), in place */
static void rms_weightless(float *x, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    const float r = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) x[i] *= r;
}

static void add_bias(float *y, const float *b, int64_t n, int64_t m) {
    if (!b) return;
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < m; r++) y[t * m + r] += b[r];
}

/* One token of the causal convolution over channels [c0, c1): u [C] the new inputs, hist [K - 1, C]
 * the previous ones (oldest first, shifted by one afterwards), y [C] the outputs; y may be u. */
static void conv_step(const float *w, const float *b, int64_t K, int64_t C, int64_t c0, int64_t c1, const float *u,
                      float *hist, float *y) {
    for (int64_t c = c0; c < c1; c++) {
        const float *wc = w + c * K;
        float acc = b ? b[c] : 0.0f;
        for (int64_t k = 0; k < K - 1; k++) acc += wc[k] * hist[k * C + c];
        acc += wc[K - 1] * u[c];
        for (int64_t k = 0; k + 1 < K - 1; k++) hist[k * C + c] = hist[(k + 1) * C + c];
        if (K > 1) hist[(K - 2) * C + c] = u[c];
        y[c] = acc;
    }
}

/* One pass's work for the pool: a phase over every span, channels / heads split by task. */
typedef struct rec_pass {
    const mxl_decoder_hparams *hp;
    const mxl_rec_layer *R;
    const mxl_rec_span *spans;
    int64_t n_spans;
    const mxl_rec_scratch *s;
    int phase; /* 0: convolution, 1: scan */
    const mxl_backend *be; /* the activations' (the reference backend's are the plain ones) */
    bool plain; /* the plain loops (the reference backend's path), else the 4-lane forms below */
} rec_pass;

/* ---- the scans' inner loops: plain, and in 4-lane vectors of the baseline SIMD (the same
 * operations per element; sums in 4 x 4 partial sums, so the last bits differ from the plain
 * order). Both are per row, so a row's bits never depend on the other rows of a batch. ---- */
typedef float v4f __attribute__((vector_size(16)));

static v4f v4_load(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void v4_store(float *p, v4f v) { memcpy(p, &v, sizeof v); }

/* S[s] = S[s] a + (d B[s]) x over s < n, returning sum S[s] C[s] (Mamba-2's state row) */
static float ssd_row_plain(float *S, const float *B, const float *C, float a, float d, float x, int64_t n) {
    float acc = 0.0f;
    for (int64_t s = 0; s < n; s++) {
        S[s] = S[s] * a + (d * B[s]) * x;
        acc += S[s] * C[s];
    }
    return acc;
}

static float ssd_row_vec(float *S, const float *B, const float *C, float a, float d, float x, int64_t n) {
    v4f acc[4] = {{0}, {0}, {0}, {0}};
    const v4f va = {a, a, a, a}, vd = {d, d, d, d}, vx = {x, x, x, x};
    int64_t s = 0;
    for (; s + 16 <= n; s += 16)
        for (int j = 0; j < 4; j++) {
            v4f v = v4_load(S + s + 4 * j) * va + (vd * v4_load(B + s + 4 * j)) * vx;
            v4_store(S + s + 4 * j, v);
            acc[j] += v * v4_load(C + s + 4 * j);
        }
    v4f t = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    float r = (t[0] + t[1]) + (t[2] + t[3]);
    return r + ssd_row_plain(S + s, B + s, C + s, a, d, x, n - s);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The same on 8 lanes with fused multiply-adds where the CPU has AVX2 + FMA (the x86 hosts this
 * runs on): 2 x 8 partial sums. */
typedef float v8f __attribute__((vector_size(32)));

__attribute__((target("avx2,fma"))) static float ssd_row_avx2(float *S, const float *B, const float *C, float a, float d, float x,
                                                               int64_t n) {
    v8f acc[2] = {{0}, {0}};
    const v8f va = {a, a, a, a, a, a, a, a}, vd = {d, d, d, d, d, d, d, d}, vx = {x, x, x, x, x, x, x, x};
    int64_t s = 0;
    for (; s + 16 <= n; s += 16)
        for (int j = 0; j < 2; j++) {
            v8f sv, bv, cv;
            memcpy(&sv, S + s + 8 * j, sizeof sv);
            memcpy(&bv, B + s + 8 * j, sizeof bv);
            memcpy(&cv, C + s + 8 * j, sizeof cv);
            sv = sv * va + (vd * bv) * vx;
            memcpy(S + s + 8 * j, &sv, sizeof sv);
            acc[j] += sv * cv;
        }
    v8f t = acc[0] + acc[1];
    float r = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
    return r + ssd_row_plain(S + s, B + s, C + s, a, d, x, n - s);
}

static bool have_avx2(void) {
    static int v = -1;
    if (v < 0) v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return v;
}
#endif

/* Mamba-2's state row on the fastest form this CPU has (the plain one on the reference path). */
static float ssd_row(float *S, const float *B, const float *C, float a, float d, float x, int64_t n, bool plain) {
    if (plain) return ssd_row_plain(S, B, C, a, d, x, n);
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_avx2()) return ssd_row_avx2(S, B, C, a, d, x, n);
#endif
    return ssd_row_vec(S, B, C, a, d, x, n);
}

/* y[j] += S[j] c (and S[j] *= a first when scale) over j < n: a row of GDN's state, vectorised
 * over the value dims */
static void axpy_row(float *y, float *S, float c, float a, bool scale, int64_t n, bool plain) {
    int64_t j = 0;
    if (!plain) {
        const v4f vc = {c, c, c, c}, va = {a, a, a, a};
        for (; j + 4 <= n; j += 4) {
            v4f v = v4_load(S + j);
            if (scale) v4_store(S + j, v = v * va);
            v4_store(y + j, v4_load(y + j) + v * vc);
        }
    }
    for (; j < n; j++) {
        if (scale) S[j] *= a;
        y[j] += S[j] * c;
    }
}

/* S[j] = a S[j] + k o[j], then y[j] += S[j] q, over j < n (GDN: a = 1, its decay applied before;
 * LIGHTNING: its per-head decay) */
static void update_row(float *S, const float *o, float k, float a, float *y, float q, int64_t n, bool plain) {
    int64_t j = 0;
    if (!plain) {
        const v4f vk = {k, k, k, k}, vq = {q, q, q, q}, va = {a, a, a, a};
        for (; j + 4 <= n; j += 4) {
            const v4f v = va * v4_load(S + j) + vk * v4_load(o + j);
            v4_store(S + j, v);
            v4_store(y + j, v4_load(y + j) + v * vq);
        }
    }
    for (; j < n; j++) {
        S[j] = a * S[j] + k * o[j];
        y[j] += S[j] * q;
    }
}

/* conv_step with the transposed weights wt [K, C], 4 channels at a time: the same sums in the
 * same order, so the same bits */
static void conv_step_vec(const float *wt, const float *b, int64_t K, int64_t C, int64_t c0, int64_t c1, const float *u,
                          float *hist, float *y) {
    int64_t c = c0;
    for (; c + 4 <= c1; c += 4) {
        v4f acc = b ? v4_load(b + c) : (v4f){0, 0, 0, 0};
        for (int64_t k = 0; k < K - 1; k++) acc += v4_load(wt + k * C + c) * v4_load(hist + k * C + c);
        const v4f uv = v4_load(u + c);
        acc += v4_load(wt + (K - 1) * C + c) * uv;
        for (int64_t k = 0; k + 1 < K - 1; k++) v4_store(hist + k * C + c, v4_load(hist + (k + 1) * C + c));
        if (K > 1) v4_store(hist + (K - 2) * C + c, uv);
        v4_store(y + c, acc);
    }
    for (; c < c1; c++) { /* (the last channels as conv_step does them) */
        float acc = b ? b[c] : 0.0f;
        for (int64_t k = 0; k < K - 1; k++) acc += wt[k * C + c] * hist[k * C + c];
        acc += wt[(K - 1) * C + c] * u[c];
        for (int64_t k = 0; k + 1 < K - 1; k++) hist[k * C + c] = hist[(k + 1) * C + c];
        if (K > 1) hist[(K - 2) * C + c] = u[c];
        y[c] = acc;
    }
}

/* the convolution's channels [c0, c1) for every row of every span, then its activation */
static void conv_part(const rec_pass *p, int64_t c0, int64_t c1) {
    const mxl_decoder_hparams *hp = p->hp;
    const mxl_rec_layer *R = p->R;
    const int64_t K = hp->ssm_conv, C = mxl_rec_conv_dim(hp, R->kind), IN = mxl_rec_in_dim(hp, R->kind);
    /* where the convolution's input sits in in_proj's row */
    const int64_t u0 = R->kind == MXL_LAYER_MAMBA2 ? hp->ssm_inner : 0;
    float u[256];
    for (int64_t si = 0; si < p->n_spans; si++) {
        const mxl_rec_span *sp = &p->spans[si];
        for (int64_t t = sp->row0; t < sp->row0 + sp->n; t++) {
            const float *row = p->s->in + t * IN;
            float *y = p->s->xc + t * C;
            if (R->kind == MXL_LAYER_SHORTCONV) {
                /* B * x is the input; in the chunks of 256 channels of the local buffer */
                for (int64_t a = c0; a < c1; a += 256) {
                    int64_t e = a + 256 < c1 ? a + 256 : c1;
                    for (int64_t c = a; c < e; c++) u[c - a] = row[c] * row[2 * C + c];
                    if (p->plain) conv_step(R->conv_w + a * K, R->conv_b ? R->conv_b + a : NULL, K, C, 0, e - a, u, sp->state + a, y + a);
                    else conv_step_vec(R->conv_wt + a, R->conv_b ? R->conv_b + a : NULL, K, C, 0, e - a, u, sp->state + a, y + a);
                }
                continue;
            }
            /* (GDN's input was gathered into xc: in place) */
            const float *in = R->kind == MXL_LAYER_GDN ? y : row + u0;
            if (p->plain) conv_step(R->conv_w, R->conv_b, K, C, c0, c1, in, sp->state, y);
            else conv_step_vec(R->conv_wt, R->conv_b, K, C, c0, c1, in, sp->state, y);
            if (R->kind != MXL_LAYER_RGLRU) p->be->ops->act(p->be, MXL_ACT_SILU, y + c0, c1 - c0, y + c0);
        }
    }
}

/* MAMBA's scan of channels [i0, i1) */
static void mamba_part(const rec_pass *p, int64_t i0, int64_t i1) {
    const mxl_decoder_hparams *hp = p->hp;
    const mxl_rec_layer *R = p->R;
    const int64_t DI = hp->ssm_inner, N = hp->ssm_state, RK = hp->ssm_dt_rank, C = DI;
    for (int64_t si = 0; si < p->n_spans; si++) {
        const mxl_rec_span *sp = &p->spans[si];
        float *S = sp->state + (hp->ssm_conv - 1) * C; /* [DI, N] */
        for (int64_t t = sp->row0; t < sp->row0 + sp->n; t++) {
            const float *x = p->s->xc + t * DI, *z = p->s->in + t * 2 * DI + DI, *dt = p->s->dt + t * DI;
            const float *B = p->s->dbc + t * (RK + 2 * N) + RK, *Cm = B + N;
            float *y = p->s->y + t * DI;
            for (int64_t i = i0; i < i1; i++) {
                const float d = softplus(dt[i]), xi = x[i];
                const float *A = R->A + i * N;
                float *Si = S + i * N, acc = 0.0f;
                for (int64_t s = 0; s < N; s++) {
                    Si[s] = expf(d * A[s]) * Si[s] + (d * B[s]) * xi;
                    acc += Si[s] * Cm[s];
                }
                y[i] = (acc + R->D[i] * xi) * z[i]; /* (z silu'd before the scan) */
            }
        }
    }
}

/* MAMBA2's scan of heads [h0, h1), times the gate silu(z) of their channels */
static void mamba2_part(const rec_pass *p, int64_t h0, int64_t h1) {
    const mxl_decoder_hparams *hp = p->hp;
    const mxl_rec_layer *R = p->R;
    const int64_t DI = hp->ssm_inner, N = hp->ssm_state, NH = hp->ssm_heads, G = hp->ssm_groups, P = DI / NH;
    const int64_t C = mxl_rec_conv_dim(hp, R->kind), IN = mxl_rec_in_dim(hp, R->kind);
    /* heads outer, tokens inner: a head's state stays in cache over the span's tokens */
    for (int64_t si = 0; si < p->n_spans; si++) {
        const mxl_rec_span *sp = &p->spans[si];
        float *S = sp->state + (hp->ssm_conv - 1) * C; /* [NH, P, N] */
        for (int64_t h = h0; h < h1; h++)
            for (int64_t t = sp->row0; t < sp->row0 + sp->n; t++) {
                const float *xbc = p->s->xc + t * C, *z = p->s->in + t * IN, *dtr = z + DI + C;
                float *y = p->s->y + t * DI;
                float d = softplus(dtr[h] + R->dt_b[h]);
                d = fminf(fmaxf(d, hp->ssm_dt_min), hp->ssm_dt_max);
                const float dA = expf(d * R->A[h]);
                const int64_t g = h / (NH / G);
                const float *B = xbc + DI + g * N, *Cm = xbc + DI + G * N + g * N;
                for (int64_t q = 0; q < P; q++) {
                    const float xq = xbc[h * P + q];
                    float *Sq = S + (h * P + q) * N;
                    const float acc = ssd_row(Sq, B, Cm, dA, d, xq, N, p->plain);
                    y[h * P + q] = (acc + R->D[h] * xq) * z[h * P + q];
                }
            }
    }
}

/* x[n] * rsqrt(sum(x^2) + eps), in place (the FLA library's l2norm, as transformers') */
static void l2norm(float *x, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    const float r = 1.0f / sqrtf((float)ss + eps);
    for (int64_t i = 0; i < n; i++) x[i] *= r;
}

/* GDN's delta rule for value heads [h0, h1), then each head's gated norm */
static void gdn_part(const rec_pass *p, int64_t h0, int64_t h1) {
    const mxl_decoder_hparams *hp = p->hp;
    const mxl_rec_layer *R = p->R;
    const int64_t NK = hp->gdn_k_heads, NV = hp->gdn_v_heads, dk = hp->gdn_k_dim, dv = hp->gdn_v_dim, r = NV / NK;
    int64_t zo;
    const int64_t C = mxl_rec_conv_dim(hp, R->kind), BA = mxl_rec_gdn_gates(hp, &zo);
    const float qscale = 1.0f / sqrtf((float)dk);
    float q[MXL_GDN_MAX_DIM], k[MXL_GDN_MAX_DIM], o[MXL_GDN_MAX_DIM], dec[MXL_GDN_MAX_DIM];
    for (int64_t si = 0; si < p->n_spans; si++) {
        const mxl_rec_span *sp = &p->spans[si];
        float *S = sp->state + (hp->ssm_conv - 1) * C; /* [NV, dk, dv] */
        for (int64_t h = h0; h < h1; h++) /* (heads outer: a head's state stays in cache) */
            for (int64_t t = sp->row0; t < sp->row0 + sp->n; t++) {
                const float *x = p->s->xc + t * C, *ba = p->s->dt + t * BA, *z = ba + zo;
                float *y = p->s->y + t * NV * dv;
                const int64_t kh = hp->gdn_v_tiled ? h % NK : h / r;
                memcpy(q, x + kh * dk, (size_t)dk * sizeof(float));
                memcpy(k, x + NK * dk + kh * dk, (size_t)dk * sizeof(float));
                l2norm(q, dk, 1e-6f);
                l2norm(k, dk, 1e-6f);
                for (int64_t i = 0; i < dk; i++) q[i] *= qscale;
                const float *v = x + 2 * NK * dk + h * dv;
                const float beta = 1.0f / (1.0f + expf(-ba[h]));
                if (hp->gdn_kda) /* a decay per key channel (row of S) */
                    for (int64_t i = 0; i < dk; i++) dec[i] = expf(R->A[h] * softplus(ba[NV + h * dk + i] + R->dt_b[h * dk + i]));
                else /* one per head */
                    for (int64_t i = 0; i < dk; i++) dec[i] = i ? dec[0] : expf(R->A[h] * softplus(ba[NV + h] + R->dt_b[h]));
                float *Sh = S + h * dk * dv;
                for (int64_t j = 0; j < dv; j++) o[j] = 0.0f; /* o: first S^T k, then the delta */
                for (int64_t i = 0; i < dk; i++) axpy_row(o, Sh + i * dv, k[i], dec[i], true, dv, p->plain);
                for (int64_t j = 0; j < dv; j++) o[j] = (v[j] - o[j]) * beta;
                float *yh = y + h * dv;
                for (int64_t j = 0; j < dv; j++) yh[j] = 0.0f;
                for (int64_t i = 0; i < dk; i++) update_row(Sh + i * dv, o, k[i], 1.0f, yh, q[i], dv, p->plain);
                rms_weightless(yh, dv, hp->ssm_norm_eps);
                for (int64_t j = 0; j < dv; j++) yh[j] *= R->norm_w[j] * z[h * dv + j];
            }
    }
}

/* RGLRU's recurrence for heads [h0, h1): the gates from each head's block of the convolved x,
 * the scaled input, the state update, times the gelu'd y branch (s->dt) into s->y */
static void rglru_part(const rec_pass *p, int64_t h0, int64_t h1) {
    const mxl_decoder_hparams *hp = p->hp;
    const mxl_rec_layer *R = p->R;
    const int64_t W = hp->ssm_inner, bw = W / hp->ssm_heads, K = hp->ssm_conv;
    float gx[MXL_GDN_MAX_DIM], ga[MXL_GDN_MAX_DIM];
    for (int64_t si = 0; si < p->n_spans; si++) {
        const mxl_rec_span *sp = &p->spans[si];
        float *S = sp->state + (K - 1) * W; /* [W] */
        for (int64_t h = h0; h < h1; h++)
            for (int64_t t = sp->row0; t < sp->row0 + sp->n; t++) {
                const float *x = p->s->xc + t * W + h * bw, *yb = p->s->dt + t * W + h * bw;
                const float *wx = R->gx_w + h * bw * bw, *wa = R->ga_w + h * bw * bw;
                for (int64_t j = 0; j < bw; j++) gx[j] = R->gx_b[h * bw + j], ga[j] = R->ga_b[h * bw + j];
                for (int64_t i = 0; i < bw; i++) /* (x on the left: row i of each gate matrix) */
                    for (int64_t j = 0; j < bw; j++) {
                        gx[j] += x[i] * wx[i * bw + j];
                        ga[j] += x[i] * wa[i * bw + j];
                    }
                const bool reset = sp->pos + (t - sp->row0) == 0;
                float *Sh = S + h * bw, *y = p->s->y + t * W + h * bw;
                for (int64_t j = 0; j < bw; j++) {
                    const float g_x = 1.0f / (1.0f + expf(-gx[j])), g_a = 1.0f / (1.0f + expf(-ga[j]));
                    const float log_a = R->lru_c[h * bw + j] * g_a;
                    const float a = reset ? 0.0f : expf(log_a);
                    const float norm = reset ? 1.0f : sqrtf(1.0f - expf(2.0f * log_a));
                    Sh[j] = a * Sh[j] + x[j] * g_x * norm;
                    y[j] = Sh[j] * yb[j];
                }
            }
    }
}

/* LIGHTNING's recurrence for heads [h0, h1) into s->y (normed and gated after) */
static void lightning_part(const rec_pass *p, int64_t h0, int64_t h1) {
    const mxl_decoder_hparams *hp = p->hp;
    const mxl_rec_layer *R = p->R;
    const int64_t DI = hp->ssm_inner, hd = DI / hp->ssm_heads;
    for (int64_t si = 0; si < p->n_spans; si++) {
        const mxl_rec_span *sp = &p->spans[si];
        for (int64_t h = h0; h < h1; h++)
            for (int64_t t = sp->row0; t < sp->row0 + sp->n; t++) {
                const float *q = p->s->in + t * 3 * DI + h * 3 * hd, *k = q + hd, *v = q + 2 * hd;
                float *Sh = sp->state + h * hd * hd, *y = p->s->y + t * DI + h * hd;
                for (int64_t j = 0; j < hd; j++) y[j] = 0.0f;
                for (int64_t i = 0; i < hd; i++) /* row i of S: r S + k_i v, then y += q_i S_i */
                    update_row(Sh + i * hd, v, k[i], R->A[h], y, q[i], hd, p->plain);
            }
    }
}

static void rec_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)thread_index;
    const rec_pass *p = vctx;
    const mxl_decoder_hparams *hp = p->hp;
    int64_t total, unit = 1;
    if (p->phase == 0) {
        total = mxl_rec_conv_dim(hp, p->R->kind);
        unit = 16;
    } else {
        total = p->R->kind == MXL_LAYER_MAMBA2 || p->R->kind == MXL_LAYER_RGLRU || p->R->kind == MXL_LAYER_LIGHTNING ? hp->ssm_heads
                : p->R->kind == MXL_LAYER_GDN                                 ? hp->gdn_v_heads
                                                                              : hp->ssm_inner;
    }
    int64_t units = (total + unit - 1) / unit;
    int64_t a = units * task / n_tasks * unit, b = units * (task + 1) / n_tasks * unit;
    if (b > total) b = total;
    if (a >= b) return;
    if (p->phase == 0) conv_part(p, a, b);
    else if (p->R->kind == MXL_LAYER_MAMBA) mamba_part(p, a, b);
    else if (p->R->kind == MXL_LAYER_GDN) gdn_part(p, a, b);
    else if (p->R->kind == MXL_LAYER_RGLRU) rglru_part(p, a, b);
    else if (p->R->kind == MXL_LAYER_LIGHTNING) lightning_part(p, a, b);
    else mamba2_part(p, a, b);
}

static void run_phase(rec_pass *p, int phase, mxl_threadpool *pool) {
    p->phase = phase;
    int nth = pool ? mxl_threadpool_size(pool) : 1;
    if (nth > 1) mxl_threadpool_run(pool, nth, rec_task, p);
    else rec_task(p, 0, 1, 0);
}

/* GDN's projections of rows h: the convolution's input [q; k; v] into s->xc, and per row b, a
 * (NV each) then z (NV dv) into s->dt, from Qwen3-Next's per-key-head groups (in_proj_qkvz,
 * in_proj_ba) or Qwen 3.5's separate matrices (gdn_split). */
static void gdn_project(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_rec_layer *R, const mxl_row_prep *prep,
                        const float *h, int64_t n, const mxl_rec_scratch *s, void *mm_scratch, mxl_threadpool *pool) {
    const int64_t NK = hp->gdn_k_heads, NV = hp->gdn_v_heads, dk = hp->gdn_k_dim, dv = hp->gdn_v_dim, r = NV / NK;
    int64_t zo;
    const int64_t C = mxl_rec_conv_dim(hp, R->kind), IN = mxl_rec_in_dim(hp, R->kind), BA = mxl_rec_gdn_gates(hp, &zo);
    if (hp->gdn_kda) {
        /* q, k, v (one pass over h) into the convolution's rows [q; k; v] */
        const int64_t QK = NK * dk, V = NV * dv;
        const mxl_weight *W3[3] = {&R->in_proj, &R->in_k, &R->in_v};
        float *o3[3] = {s->in, s->in + n * QK, s->in + 2 * n * QK};
        be->ops->matmul_multi(be, W3, 3, prep, NULL, h, n, o3, mm_scratch, pool);
        for (int64_t t = 0; t < n; t++) {
            memcpy(s->xc + t * C, o3[0] + t * QK, (size_t)QK * sizeof(float));
            memcpy(s->xc + t * C + QK, o3[1] + t * QK, (size_t)QK * sizeof(float));
            memcpy(s->xc + t * C + 2 * QK, o3[2] + t * V, (size_t)V * sizeof(float));
        }
        /* b [NV], the forget gate f_b(f_a(h)) [NV dk], the output gate sigmoid(g_b(g_a(h))) [NV dv] */
        float *b = s->in, *fa = b + n * NV, *ga = fa + n * dk, *fb = ga + n * dv, *gb = fb + n * NV * dk;
        const mxl_weight *Wg[3] = {&R->in_ba, &R->f_a, &R->g_a};
        float *og[3] = {b, fa, ga};
        be->ops->matmul_multi(be, Wg, 3, NULL, NULL, h, n, og, mm_scratch, pool);
        be->ops->matmul(be, &R->f_b, NULL, fa, n, fb, mm_scratch, pool);
        be->ops->matmul(be, &R->g_b, NULL, ga, n, gb, mm_scratch, pool);
        for (int64_t t = 0; t < n; t++) {
            float *row = s->dt + t * BA, *z = row + zo;
            memcpy(row, b + t * NV, (size_t)NV * sizeof(float));
            memcpy(row + NV, fb + t * NV * dk, (size_t)(NV * dk) * sizeof(float));
            for (int64_t j = 0; j < V; j++) z[j] = 1.0f / (1.0f + expf(-gb[t * V + j]));
        }
        return;
    }
    /* b and a: in_proj_b and in_proj_a, or per key head g [b (r), a (r)] of in_proj_ba */
    be->ops->matmul(be, &R->in_ba, prep, h, n, s->in, mm_scratch, pool);
    if (R->in_a.rows > 0) {
        for (int64_t t = 0; t < n; t++) memcpy(s->dt + t * BA, s->in + t * NV, (size_t)NV * sizeof(float));
        be->ops->matmul(be, &R->in_a, NULL, h, n, s->in, mm_scratch, pool);
        for (int64_t t = 0; t < n; t++) memcpy(s->dt + t * BA + NV, s->in + t * NV, (size_t)NV * sizeof(float));
    } else {
        for (int64_t t = 0; t < n; t++)
            for (int64_t g = 0; g < NK; g++) {
                memcpy(s->dt + t * BA + g * r, s->in + t * 2 * NV + g * 2 * r, (size_t)r * sizeof(float));
                memcpy(s->dt + t * BA + NV + g * r, s->in + t * 2 * NV + g * 2 * r + r, (size_t)r * sizeof(float));
            }
    }
    if (hp->gdn_split) {
        /* [q; k; v] is in_proj_qkv's row as it is; z its own matrix */
        be->ops->matmul(be, &R->in_proj, NULL, h, n, s->xc, mm_scratch, pool);
        be->ops->matmul(be, &R->in_z, NULL, h, n, s->in, mm_scratch, pool);
        for (int64_t t = 0; t < n; t++) memcpy(s->dt + t * BA + zo, s->in + t * NV * dv, (size_t)(NV * dv) * sizeof(float));
        return;
    }
    /* per key head g: [q_g (dk), k_g (dk), v (r dv), z (r dv)] */
    be->ops->matmul(be, &R->in_proj, NULL, h, n, s->in, mm_scratch, pool);
    const int64_t grp = 2 * dk + 2 * r * dv;
    for (int64_t t = 0; t < n; t++) {
        const float *row = s->in + t * IN;
        float *u = s->xc + t * C, *z = s->dt + t * BA + zo;
        for (int64_t g = 0; g < NK; g++) {
            const float *src = row + g * grp;
            memcpy(u + g * dk, src, (size_t)dk * sizeof(float));
            memcpy(u + NK * dk + g * dk, src + dk, (size_t)dk * sizeof(float));
            memcpy(u + 2 * NK * dk + g * r * dv, src + 2 * dk, (size_t)(r * dv) * sizeof(float));
            memcpy(z + g * r * dv, src + 2 * dk + r * dv, (size_t)(r * dv) * sizeof(float));
        }
    }
}

void mxl_rec_forward(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_rec_layer *R, const mxl_row_prep *prep,
                     const float *h, int64_t n_rows, const mxl_rec_span *spans, int64_t n_spans, float *out,
                     const mxl_rec_scratch *s, void *mm_scratch, mxl_threadpool *pool) {
    const int64_t IN = mxl_rec_in_dim(hp, R->kind), DI = hp->ssm_inner;
    if (R->kind == MXL_LAYER_GDN) {
        gdn_project(be, hp, R, prep, h, n_rows, s, mm_scratch, pool);
    } else if (R->kind == MXL_LAYER_RGLRU) { /* x = linear_x(h), y = gelu_tanh(linear_y(h)) */
        const mxl_weight *Wm[2] = {&R->in_proj, &R->in_z};
        float *out2[2] = {s->in, s->dt};
        be->ops->matmul_multi(be, Wm, 2, prep, NULL, h, n_rows, out2, mm_scratch, pool);
        add_bias(s->in, R->in_b, n_rows, IN);
        add_bias(s->dt, R->z_b, n_rows, DI);
        be->ops->act(be, MXL_ACT_GELU_TANH, s->dt, n_rows * DI, s->dt);
    } else {
        be->ops->matmul(be, &R->in_proj, prep, h, n_rows, s->in, mm_scratch, pool);
        if (hp->ssm_in_mult != 1.0f)
            for (int64_t i = 0; i < n_rows * IN; i++) s->in[i] *= hp->ssm_in_mult;
        add_bias(s->in, R->in_b, n_rows, IN);
        for (int64_t t = 0; hp->ssm_in_scale && t < n_rows; t++)
            for (int64_t c = 0; c < IN; c++) s->in[t * IN + c] *= hp->ssm_in_scale[c];
    }
    rec_pass p = {hp, R, spans, n_spans, s, 0, be, be == mxl_backend_reference()};
    if (R->kind == MXL_LAYER_LIGHTNING) { /* silu(qkv), the gate's rows, no convolution */
        const mxl_weight *Wm[2] = {&R->in_proj, &R->in_z};
        float *out2[2] = {s->in, s->dt};
        be->ops->matmul_multi(be, Wm, 2, prep, NULL, h, n_rows, out2, mm_scratch, pool);
        be->ops->act(be, MXL_ACT_SILU, s->in, n_rows * IN, s->in);
        run_phase(&p, 1, pool);
        for (int64_t t = 0; t < n_rows; t++) {
            float *y = s->y + t * DI;
            const float *g = s->dt + t * DI;
            rms_weightless(y, DI, hp->ssm_norm_eps);
            for (int64_t i = 0; i < DI; i++) y[i] *= R->norm_w[i] * (1.0f / (1.0f + expf(-g[i])));
        }
        be->ops->matmul(be, &R->out_proj, NULL, s->y, n_rows, out, mm_scratch, pool);
        return;
    }
    run_phase(&p, 0, pool);
    /* the gates z -> silu(z), in place (the backend's vector form; the reference's plain one);
     * KDA's gate is a sigmoid, made with it */
    int64_t zo = 0;
    const int64_t GW = R->kind == MXL_LAYER_GDN ? mxl_rec_gdn_gates(hp, &zo) : 0;
    for (int64_t t = 0; t < n_rows && R->kind != MXL_LAYER_SHORTCONV && R->kind != MXL_LAYER_RGLRU && !(R->kind == MXL_LAYER_GDN && hp->gdn_kda); t++) {
        float *z = R->kind == MXL_LAYER_MAMBA ? s->in + t * IN + DI : R->kind == MXL_LAYER_MAMBA2 ? s->in + t * IN : s->dt + t * GW + zo;
        be->ops->act(be, MXL_ACT_SILU, z, DI, z);
    }
    const float *y = s->y;
    if (R->kind == MXL_LAYER_SHORTCONV) {
        const int64_t H = hp->hidden;
        for (int64_t t = 0; t < n_rows; t++)
            for (int64_t c = 0; c < H; c++) s->y[t * H + c] = s->in[t * IN + H + c] * s->xc[t * H + c];
    } else if (R->kind == MXL_LAYER_MAMBA) {
        const int64_t W = hp->ssm_dt_rank + 2 * hp->ssm_state;
        be->ops->matmul(be, &R->x_proj, NULL, s->xc, n_rows, s->dbc, mm_scratch, pool);
        if (hp->ssm_bcdt_eps > 0) /* each of dt_r, B, C RMS-normed: no weight (Falcon Mamba), or Jamba's */
            for (int64_t t = 0; t < n_rows; t++) {
                const int64_t seg[3][2] = {{0, hp->ssm_dt_rank}, {hp->ssm_dt_rank, hp->ssm_state}, {hp->ssm_dt_rank + hp->ssm_state, hp->ssm_state}};
                const float *w[3] = {R->dt_norm, R->b_norm, R->c_norm};
                for (int j = 0; j < 3; j++) {
                    float *v = s->dbc + t * W + seg[j][0];
                    rms_weightless(v, seg[j][1], hp->ssm_bcdt_eps);
                    for (int64_t e = 0; w[j] && e < seg[j][1]; e++) v[e] *= w[j][e];
                }
            }
        /* dt_proj reads the first R of each x_proj row: packed into the dt buffer's rows first */
        float *dr = s->y; /* (free until the scan) */
        for (int64_t t = 0; t < n_rows; t++) memmove(dr + t * hp->ssm_dt_rank, s->dbc + t * W, (size_t)hp->ssm_dt_rank * sizeof(float));
        be->ops->matmul(be, &R->dt_proj, NULL, dr, n_rows, s->dt, mm_scratch, pool);
        add_bias(s->dt, R->dt_b, n_rows, DI);
        run_phase(&p, 1, pool);
    } else if (R->kind == MXL_LAYER_GDN || R->kind == MXL_LAYER_RGLRU) {
        run_phase(&p, 1, pool); /* (GDN's gated norm per head in the scan; RGLRU's y branch too) */
    } else {
        run_phase(&p, 1, pool);
        /* the gated norm: RMSNorm over each of the G groups, times the weight (none: Falcon-H1) */
        const int64_t G = hp->ssm_groups, gs = DI / G;
        for (int64_t t = 0; !hp->ssm_no_norm && t < n_rows; t++)
            for (int64_t g = 0; g < G; g++) {
                float *v = s->y + t * DI + g * gs;
                rms_weightless(v, gs, hp->ssm_norm_eps);
                for (int64_t i = 0; i < gs; i++) v[i] *= R->norm_w[g * gs + i];
            }
    }
    be->ops->matmul(be, &R->out_proj, NULL, y, n_rows, out, mm_scratch, pool);
    add_bias(out, R->out_b, n_rows, hp->hidden);
}
