/* attention.c - GQA attention over a KV cache (attention.h): two passes per (token, head) over
 * a score row in scratch (scores, then the weighted sum of V), walking the cache block by block
 * (a contiguous cache is one block). f32 q.k dots use the dense dot
 * kernels, f16 / int8 / ggml block-format (q8_0, q4_0, q4_1, q5_0, q5_1) K and V the KV kernels
 * (kv_quant.h); each from the kernel table of level isa (kernels.h: AVX2 where the level has it,
 * the plain C references otherwise). An f16 or block-format cache goes through the table's
 * grouped passes where it has them for both K's type and V's (attention_avx512.c's (AVX-512) or
 * attention_avx2.c's (AVX2)), which take up to MXL_ATTN_HEAD_GROUP query heads of one KV head at
 * a time (each K / V vector converted once per group), score several keys at a time and keep the
 * output in registers (the AVX2 passes are bitwise the per-head AVX2 kernels, the AVX-512 f16 V
 * pass too). Softmax and the f32 V accumulation are plain C. The heads per group and the split-K
 * decode path below (a decode query's keys cut into ranges merged by their softmax sums) are the
 * run-time knobs of tune.h; their defaults are the unsplit pass with groups of
 * MXL_ATTN_HEAD_GROUP. */
#include "backends/cpu/attention.h"

#include <math.h>
#include <string.h>

#include "backends/cpu/dense.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/kv_quant.h"
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/softmax.h"
#include "backends/cpu/tune.h"

/* per thread: a score row for each head of a group; with more than one thread, room for the
 * split-K decode's per-part results too (split_fits) */
size_t mxl_cpu_attention_scratch_floats(int64_t n_kv, int n_threads) {
    return (size_t)(n_kv > 0 ? n_kv : 1) * MXL_ATTN_HEAD_GROUP * (size_t)(n_threads > 0 ? n_threads : 1) +
           (n_threads > 1 ? MXL_ATTN_SPLIT_RESERVE : 0);
}

typedef struct attn_ctx {
    const mxl_attn_params *p;
    const float *q;
    int64_t n_q;
    const int64_t *q_pos;
    const mxl_kv_paged_view *kv;
    const mxl_kv_paged_view *kvv; /* the view V is read through: kv, or a copy with v_block_stride */
    float *out;
    float *scratch;
    mxl_dense_dot_fn dot; /* f32 K dots, NULL: reference */
    mxl_kv_kernels kk;
    int k_qf, v_qf;       /* K / V block format (mxl_kv_qfmt), -1: F32, F16 or I8 */
    size_t k_es, v_es;    /* bytes per element, or per block of 32 for a block format */
    /* the level's grouped passes for K and for V (attention_avx512.c's or attention_avx2.c's) and
     * their softmax without soft-cap (NULL: mxl_cpu_softmax); group == 1: one head at a time */
    mxl_attn_k_f16_fn gk; /* f16 */
    mxl_attn_v_f16_fn gv;
    mxl_attn_k_q_fn gkq;  /* block formats */
    mxl_attn_v_q_fn gvq;
    void (*gsoftmax)(float *x, int64_t n, float sink);
    int group;            /* heads per work unit: with grouped passes, heads per KV head, at most
                           * MXL_ATTN_HEAD_GROUP; else 1 */
} attn_ctx;

static size_t elem_size(mxl_dtype t) { return t == MXL_DTYPE_F32 ? 4 : t == MXL_DTYPE_F16 ? 2 : 1; }
static size_t step_bytes(mxl_dtype t) { return mxl_kv_qfmt_of(t) >= 0 ? mxl_kv_offset_bytes(t, 32) : elem_size(t); }
static size_t off_bytes(int qf, size_t es, int64_t off) { return qf >= 0 ? (size_t)(off / 32) * es : (size_t)off * es; }

/* q.k for the K head vector at element offset off (its scales at off / group). */
static float k_dot(const attn_ctx *c, int64_t off, const float *qh) {
    const mxl_kv_paged_view *kv = c->kv;
    const int hd = c->p->head_dim;
    const uint8_t *kj = (const uint8_t *)kv->k + off_bytes(c->k_qf, c->k_es, off);
    if (c->k_qf >= 0) return c->kk.dot_q[c->k_qf](hd, kj, qh);
    switch (kv->k_type) {
    case MXL_DTYPE_F16: return c->kk.dot_f16(hd, (const uint16_t *)kj, qh);
    case MXL_DTYPE_I8: return c->kk.dot_i8(hd, kv->group, (const int8_t *)kj, kv->k_scale + off / kv->group, qh);
    default: return c->dot ? c->dot(hd, kj, qh) : mxl_dense_dot_ref(MXL_DTYPE_F32, hd, kj, qh);
    }
}

static int v_dim(const mxl_attn_params *p) { return p->head_dim_v > 0 ? p->head_dim_v : p->head_dim; }

/* o += w * v for the V head vector at element offset off. */
static void v_axpy(const attn_ctx *c, int64_t off, float w, float *o) {
    const mxl_kv_paged_view *kv = c->kvv;
    const int hd = v_dim(c->p);
    const uint8_t *vj = (const uint8_t *)kv->v + off_bytes(c->v_qf, c->v_es, off);
    if (c->v_qf >= 0) {
        c->kk.axpy_q[c->v_qf](hd, w, vj, o);
        return;
    }
    switch (kv->v_type) {
    case MXL_DTYPE_F16: c->kk.axpy_f16(hd, w, (const uint16_t *)vj, o); break;
    case MXL_DTYPE_I8: c->kk.axpy_i8(hd, kv->group, w, (const int8_t *)vj, kv->v_scale + off / kv->group, o); break;
    default: {
        const float *v32 = (const float *)vj;
        for (int i = 0; i < hd; i++) o[i] += w * v32[i];
    }
    }
}

/* visible keys [lo, hi) of query token t */
static void visible(const attn_ctx *c, int64_t t, int64_t *lo, int64_t *hi) {
    const mxl_attn_params *p = c->p;
    const int64_t qp = c->q_pos[t];
    *lo = 0, *hi = c->kv->n_kv;
    if (p->causal && qp + 1 < *hi) {
        const int64_t e = p->q_end && p->q_end[t] > qp + 1 ? p->q_end[t] : qp + 1; /* (a block may end where the keys do) */
        if (e < *hi) *hi = e;
    }
    if (p->window > 0 && qp - p->window + 1 > *lo) *lo = qp - p->window + 1;
    if (!p->causal && p->window > 0 && qp + p->window < *hi) *hi = qp + p->window; /* (bidirectional: |q - k| < window) */
    if (p->chunk > 0 && qp - qp % p->chunk > *lo) *lo = qp - qp % p->chunk;
}

/* s[j] = scale * q.k_j for the visible keys j in [lo, hi) of KV head offset hoff, in position
 * order, one block at a time. */
static void k_scores(const attn_ctx *c, const float *qh, int64_t hoff, int64_t lo, int64_t hi, float *s) {
    const mxl_kv_paged_view *kv = c->kv;
    const int64_t bs = kv->block_size, rs = kv->row_stride;
    for (int64_t b0 = lo - lo % bs; b0 < hi; b0 += bs) {
        int64_t base = mxl_attn_block_base(kv, b0) + hoff, j1 = b0 + bs < hi ? b0 + bs : hi;
        for (int64_t j = b0 > lo ? b0 : lo; j < j1; j++) s[j] = k_dot(c, base + j * rs, qh) * c->p->scale;
    }
}

/* o[vd] = sum over the visible keys of s[j] * v_j (V head offset voff), keys with s[j] == 0 skipped. */
static void v_sum(const attn_ctx *c, int64_t voff, int64_t lo, int64_t hi, const float *s, float *o) {
    const mxl_kv_paged_view *kv = c->kvv;
    const int64_t bs = kv->block_size, rs = kv->row_stride;
    for (int i = 0; i < v_dim(c->p); i++) o[i] = 0.0f;
    for (int64_t b0 = lo - lo % bs; b0 < hi; b0 += bs) {
        int64_t base = mxl_attn_block_base(kv, b0) + voff, j1 = b0 + bs < hi ? b0 + bs : hi;
        for (int64_t j = b0 > lo ? b0 : lo; j < j1; j++) {
            float w = s[j];
            if (w == 0.0f) continue;
            v_axpy(c, base + j * rs, w, o);
        }
    }
}

static void attn_one(const attn_ctx *c, int64_t t, int h, float *s) {
    const mxl_attn_params *p = c->p;
    const mxl_kv_paged_view *kv = c->kv;
    const int hd = p->head_dim, vd = v_dim(p);
    const int kvh = h / (p->n_heads / p->n_kv_heads);
    const float *qh = c->q + (t * p->n_heads + h) * hd;
    int64_t lo, hi;
    visible(c, t, &lo, &hi);
    for (int64_t j = 0; j < kv->n_kv; j++) s[j] = -INFINITY;
    k_scores(c, qh, (int64_t)kvh * hd, lo, hi, s);
    float sink = p->sinks ? p->sinks[h] : -INFINITY;
    if (hi > lo) mxl_cpu_softmax(s + lo, hi - lo, p->softcap, sink);
    v_sum(c, (int64_t)kvh * vd, lo, hi, s, c->out + (t * p->n_heads + h) * vd);
}

/* Heads h .. h + G - 1 of token t (one KV head) through the grouped passes; s holds G score rows
 * of n_kv. On AVX2 per head the bits of attn_one. */
static void attn_group(const attn_ctx *c, int64_t t, int h, int G, float *s) {
    const mxl_attn_params *p = c->p;
    const mxl_kv_paged_view *kv = c->kv;
    const int hd = p->head_dim, vd = v_dim(p);
    const int64_t kvh = h / (p->n_heads / p->n_kv_heads), hoff = kvh * hd, ss = kv->n_kv > 0 ? kv->n_kv : 1;
    int64_t lo, hi;
    visible(c, t, &lo, &hi);
    float *o = c->out + (t * p->n_heads + h) * vd;
    if (hi <= lo) { /* nothing visible: zeros, as the reference */
        for (int i = 0; i < G * vd; i++) o[i] = 0.0f;
        return;
    }
    const float *qh = c->q + (t * p->n_heads + h) * hd;
    if (c->gk) c->gk((const uint16_t *)kv->k, kv, hoff, lo, hi, G, qh, hd, p->scale, s, ss);
    else c->gkq(kv, hoff, lo, hi, G, qh, hd, p->scale, s, ss);
    for (int g = 0; g < G; g++) {
        float sink = p->sinks ? p->sinks[h + g] : -INFINITY;
        if (c->gsoftmax && p->softcap <= 0.0f) c->gsoftmax(s + g * ss + lo, hi - lo, sink);
        else mxl_cpu_softmax(s + g * ss + lo, hi - lo, p->softcap, sink);
    }
    if (c->gv) c->gv((const uint16_t *)kv->v, c->kvv, kvh * vd, lo, hi, G, s, ss, vd, o);
    else c->gvq(c->kvv, kvh * vd, lo, hi, G, s, ss, vd, o);
}

/* Work units: (token, group of c->group heads of one KV head). */
static void attn_task(void *vctx, int task, int n_tasks, int thread_index) {
    attn_ctx *c = vctx;
    const int per_kv = c->p->n_heads / c->p->n_kv_heads, G = c->group, chunks = (per_kv + G - 1) / G;
    int64_t units = (int64_t)c->p->n_kv_heads * chunks, total = c->n_q * units;
    int64_t a = total * task / n_tasks, b = total * (task + 1) / n_tasks;
    float *s = c->scratch + (size_t)thread_index * MXL_ATTN_HEAD_GROUP * (size_t)(c->kv->n_kv > 0 ? c->kv->n_kv : 1);
    for (int64_t i = a; i < b; i++) {
        int64_t t = i / units, u = i % units;
        int h0 = (int)(u / chunks) * per_kv + (int)(u % chunks) * G;
        int gn = per_kv - (int)(u % chunks) * G < G ? per_kv - (int)(u % chunks) * G : G;
        if (c->gk || c->gkq) attn_group(c, t, h0, gn, s);
        else
            for (int g = 0; g < gn; g++) attn_one(c, t, h0 + g, s);
    }
}

/* ---- split-K decode (tune.h: paged-decode-splits) ------------------------------------------
 * With S splits, work item (t, unit, part) takes the part-th of S position ranges of token t's
 * visible keys [lo, hi) for the unit's heads: scores of its range, a softmax of that range alone
 * (p_j = exp(s_j - m) / l, m its largest score, l its sum), the weighted V sum o. The merge then
 * gives each head exp(m_i - M) l_i / (sum_k exp(m_k - M) l_k + exp(sink - M)) of each part's o_i
 * (M the largest m_i and the sink): the unsplit result up to float rounding, as flash-decoding
 * (Dao et al., 2023) merges its splits. l is read back from the normalized range as
 * 1 / p at the range's largest score (exp(0) / l).
 *
 * Scratch (the caller's mxl_cpu_attention_scratch_floats(n_kv, threads) floats, which holds
 * MXL_ATTN_SPLIT_RESERVE more than the unsplit pass needs): the parts' results
 * [n_q * units * S][G * vd + 2G] (o, then m, then l) first, then from float max(n_kv, that)
 * each thread's G score rows of L = ceil(n_kv / S) + 1 floats, addressed by absolute position
 * (row - lo_part, which stays within the scratch). split_fits says whether that fits; where it
 * does not, S is halved until it does (at 1: unsplit). E.g. 32 query heads of 128 over 8 KV
 * heads, one token: 8 units x S x 520 floats, 33280 at S = 8. */
_Atomic long mxl_cpu_attention_split_calls;

typedef struct split_ctx {
    const attn_ctx *c;
    int S;
    int64_t L, part_floats, rows_at;
} split_ctx;

static int64_t split_part_floats(const attn_ctx *c) { return (int64_t)c->group * (v_dim(c->p) + 2); }

static bool split_fits(const attn_ctx *c, int S, int nth, int64_t *L, int64_t *rows_at) {
    const int64_t n_kv = c->kv->n_kv > 0 ? c->kv->n_kv : 1;
    const int per_kv = c->p->n_heads / c->p->n_kv_heads, chunks = (per_kv + c->group - 1) / c->group;
    const int64_t parts = c->n_q * c->p->n_kv_heads * chunks * S * split_part_floats(c);
    *L = (n_kv + S - 1) / S + 1;
    *rows_at = ((parts > n_kv ? parts : n_kv) + 15) / 16 * 16;
    return *rows_at + (int64_t)nth * c->group * *L <= (int64_t)mxl_cpu_attention_scratch_floats(n_kv, nth);
}

static void split_task(void *vctx, int task, int n_tasks, int thread_index) {
    const split_ctx *sc = vctx;
    const attn_ctx *c = sc->c;
    const mxl_attn_params *p = c->p;
    const mxl_kv_paged_view *kv = c->kv;
    const int per_kv = p->n_heads / p->n_kv_heads, G = c->group, chunks = (per_kv + G - 1) / G, hd = p->head_dim, vd = v_dim(p);
    const int64_t units = (int64_t)p->n_kv_heads * chunks, total = c->n_q * units * sc->S;
    const int64_t a = total * task / n_tasks, b = total * (task + 1) / n_tasks;
    float *rows = c->scratch + sc->rows_at + (int64_t)thread_index * G * sc->L;
    for (int64_t i = a; i < b; i++) {
        const int64_t t = i / (units * sc->S), u = i / sc->S % units, part = i % sc->S;
        const int h0 = (int)(u / chunks) * per_kv + (int)(u % chunks) * G;
        const int gn = per_kv - (int)(u % chunks) * G < G ? per_kv - (int)(u % chunks) * G : G;
        const int64_t kvh = h0 / per_kv;
        float *o = c->scratch + i * sc->part_floats, *m = o + (int64_t)G * vd, *l = m + G;
        int64_t lo, hi;
        visible(c, t, &lo, &hi);
        const int64_t r0 = hi > lo ? lo + (hi - lo) * part / sc->S : 0, r1 = hi > lo ? lo + (hi - lo) * (part + 1) / sc->S : 0;
        for (int g = 0; g < gn; g++) m[g] = -INFINITY, l[g] = 0.0f;
        if (r1 <= r0) continue; /* (an empty part: no weight in the merge) */
        float *s = rows - r0;   /* row g's position j at s[g * L + j], j in [r0, r1) */
        const float *qh = c->q + (t * p->n_heads + h0) * hd;
        if (c->gk) c->gk((const uint16_t *)kv->k, kv, kvh * hd, r0, r1, gn, qh, hd, p->scale, s, sc->L);
        else if (c->gkq) c->gkq(kv, kvh * hd, r0, r1, gn, qh, hd, p->scale, s, sc->L);
        else
            for (int g = 0; g < gn; g++) k_scores(c, qh + (int64_t)g * hd, kvh * hd, r0, r1, s + (int64_t)g * sc->L);
        for (int g = 0; g < gn; g++) {
            float *x = s + (int64_t)g * sc->L + r0;
            const int64_t n = r1 - r0;
            mxl_cpu_softcap(x, n, p->softcap);
            int64_t jm = 0;
            for (int64_t j = 1; j < n; j++)
                if (x[j] > x[jm]) jm = j;
            m[g] = x[jm];
            if (c->gsoftmax && (c->gk || c->gkq)) c->gsoftmax(x, n, -INFINITY);
            else mxl_cpu_softmax(x, n, 0.0f, -INFINITY);
            l[g] = 1.0f / x[jm];
        }
        if (c->gv) c->gv((const uint16_t *)kv->v, c->kvv, kvh * vd, r0, r1, gn, s, sc->L, vd, o);
        else if (c->gvq) c->gvq(c->kvv, kvh * vd, r0, r1, gn, s, sc->L, vd, o);
        else
            for (int g = 0; g < gn; g++) v_sum(c, kvh * vd, r0, r1, s + (int64_t)g * sc->L, o + (int64_t)g * vd);
    }
}

/* The parts' merge for every (token, head) into c->out (on the calling thread: n_q * n_heads *
 * S * vd multiply-adds). */
static void split_merge(const split_ctx *sc) {
    const attn_ctx *c = sc->c;
    const mxl_attn_params *p = c->p;
    const int per_kv = p->n_heads / p->n_kv_heads, G = c->group, chunks = (per_kv + G - 1) / G, vd = v_dim(p);
    const int64_t units = (int64_t)p->n_kv_heads * chunks;
    for (int64_t t = 0; t < c->n_q; t++)
        for (int h = 0; h < p->n_heads; h++) {
            const int64_t u = (int64_t)(h / per_kv) * chunks + (h % per_kv) / G, g = (h % per_kv) % G;
            const float *part0 = c->scratch + (t * units + u) * sc->S * sc->part_floats;
            const float sink = p->sinks ? p->sinks[h] : -INFINITY;
            float M = sink;
            for (int k = 0; k < sc->S; k++) {
                const float mk = part0[k * sc->part_floats + (int64_t)G * vd + g];
                if (mk > M) M = mk;
            }
            float *out = c->out + (t * p->n_heads + h) * vd;
            for (int i = 0; i < vd; i++) out[i] = 0.0f;
            if (M == -INFINITY) continue; /* nothing visible and no sink: zeros, as unsplit */
            double den = sink == -INFINITY ? 0.0 : exp((double)(sink - M));
            float w[64];
            MXL_ASSERT(sc->S <= 64);
            for (int k = 0; k < sc->S; k++) {
                const float *pk = part0 + k * sc->part_floats;
                const float mk = pk[(int64_t)G * vd + g];
                w[k] = mk == -INFINITY ? 0.0f : expf(mk - M) * pk[(int64_t)G * vd + G + g];
                den += w[k];
            }
            const float inv = (float)(1.0 / den);
            for (int k = 0; k < sc->S; k++) {
                if (w[k] == 0.0f) continue;
                const float wk = w[k] * inv, *ok = part0 + k * sc->part_floats + g * vd;
                for (int i = 0; i < vd; i++) out[i] += wk * ok[i];
            }
        }
}

static bool valid_type(mxl_dtype t) {
    return t == MXL_DTYPE_F32 || t == MXL_DTYPE_F16 || t == MXL_DTYPE_I8 || mxl_kv_qfmt_of(t) >= 0;
}

void mxl_cpu_attention_paged(const mxl_attn_params *p, const float *q, int64_t n_q,
                             const int64_t *q_pos, const mxl_kv_paged_view *kv, float *out,
                             float *scratch, mxl_threadpool *pool, mxl_cpu_isa isa) {
    MXL_ASSERT(p->n_kv_heads > 0 && p->n_heads % p->n_kv_heads == 0);
    MXL_ASSERT(valid_type(kv->k_type) && valid_type(kv->v_type));
    MXL_ASSERT(kv->block_size > 0 && kv->blocks);
    if (kv->k_type == MXL_DTYPE_I8 || kv->v_type == MXL_DTYPE_I8)
        MXL_ASSERT(kv->group > 0 && p->head_dim % kv->group == 0 && v_dim(p) % kv->group == 0 && kv->row_stride % kv->group == 0 &&
                   kv->block_stride % kv->group == 0);
    MXL_ASSERT(kv->k_type != MXL_DTYPE_I8 || kv->k_scale);
    MXL_ASSERT(kv->v_type != MXL_DTYPE_I8 || kv->v_scale);
    const int k_qf = mxl_kv_qfmt_of(kv->k_type), v_qf = mxl_kv_qfmt_of(kv->v_type);
    /* block formats: every head, row and block starts on a block of 32 */
    if (k_qf >= 0) MXL_ASSERT(p->head_dim % 32 == 0 && kv->row_stride % 32 == 0 && kv->block_stride % 32 == 0);
    if (v_qf >= 0) MXL_ASSERT(v_dim(p) % 32 == 0 && kv->row_stride % 32 == 0 && kv->block_stride % 32 == 0 && kv->v_block_stride % 32 == 0);
    mxl_kv_paged_view kvv = *kv; /* V's block distance where it differs from K's */
    if (kv->v_block_stride) kvv.block_stride = kv->v_block_stride;
    MXL_ASSERT(kv->v_type != MXL_DTYPE_I8 || kvv.block_stride % kv->group == 0);
    const mxl_cpu_kernels *K = mxl_cpu_kern_at(isa);
    /* grouped passes where the level has one for K's type and one for V's */
    const bool gk16 = kv->k_type == MXL_DTYPE_F16 && p->head_dim % 16 == 0 && K->attn_k_f16 && K->attn_v_f16;
    const bool gv16 = kv->v_type == MXL_DTYPE_F16 && v_dim(p) % 16 == 0 && K->attn_k_f16 && K->attn_v_f16;
    /* (an int8 cache in groups of 32 where the level's block passes read it) */
    const bool i8k = kv->k_type == MXL_DTYPE_I8 && kv->group == 32 && K->attn_q_i8, i8v = kv->v_type == MXL_DTYPE_I8 && kv->group == 32 && K->attn_q_i8;
    const bool gkq = (k_qf >= 0 || i8k) && K->attn_k_q && K->attn_v_q, gvq = (v_qf >= 0 || i8v) && K->attn_k_q && K->attn_v_q;
    const bool grouped = (gk16 || gkq) && (gv16 || gvq);
    const int per_kv = p->n_heads / p->n_kv_heads;
    attn_ctx c = {.p = p, .q = q, .n_q = n_q, .q_pos = q_pos, .kv = kv, .kvv = &kvv, .out = out, .scratch = scratch,
                  .dot = K->attn_dot_f32, .kk = K->kv, .k_qf = k_qf, .v_qf = v_qf, .k_es = step_bytes(kv->k_type),
                  .v_es = step_bytes(kv->v_type), .gk = grouped && gk16 ? K->attn_k_f16 : NULL,
                  .gv = grouped && gv16 ? K->attn_v_f16 : NULL, .gkq = grouped && gkq ? K->attn_k_q : NULL,
                  .gvq = grouped && gvq ? K->attn_v_q : NULL, .gsoftmax = K->attn_softmax,
                  .group = 1};
    if (grouped) { /* (tune.h: attn-head-group, bitwise neutral) */
        const int hg = mxl_cpu_tune_head_group(p, kv->n_kv);
        c.group = per_kv < hg ? per_kv : hg;
    }
    int nth = pool ? mxl_threadpool_size(pool) : 1;
    /* split-K decode (tune.h: paged-decode-splits): pooled calls of a few query tokens */
    int S = pool && nth > 1 && n_q <= MXL_ATTN_SPLIT_MAX_Q && n_q > 0 ? mxl_cpu_tune_decode_splits(p, kv->n_kv) : 1;
    split_ctx sc = {.c = &c, .part_floats = split_part_floats(&c)};
    while (S > 1 && (kv->n_kv < 2 * S || !split_fits(&c, S, nth, &sc.L, &sc.rows_at))) S /= 2;
    sc.S = S;
    if (S > 1) {
        int64_t items = n_q * p->n_kv_heads * ((per_kv + c.group - 1) / c.group) * S;
        mxl_threadpool_run(pool, items < nth * 4 ? (int)items : nth * 4, split_task, &sc);
        split_merge(&sc);
        atomic_fetch_add_explicit(&mxl_cpu_attention_split_calls, 1, memory_order_relaxed);
        return;
    }
    int64_t total = n_q * p->n_kv_heads * ((per_kv + c.group - 1) / c.group);
    int n_tasks = total < nth * 4 ? (int)total : nth * 4;
    if (pool && n_tasks > 1) mxl_threadpool_run(pool, n_tasks, attn_task, &c);
    else if (total > 0) attn_task(&c, 0, 1, 0);
}

void mxl_cpu_attention_kv(const mxl_attn_params *p, const float *q, int64_t n_q,
                          const int64_t *q_pos, const mxl_kv_split_view *kv, float *out,
                          float *scratch, mxl_threadpool *pool, mxl_cpu_isa isa) {
    /* one block holding every position */
    static const int32_t one_block[1] = {0};
    mxl_kv_paged_view pv = {kv->k_type, kv->v_type, kv->k, kv->v, kv->k_scale, kv->v_scale, kv->group, kv->n_kv,
                            kv->row_stride, kv->n_kv > 0 ? kv->n_kv : 1, 0, one_block, 0};
    mxl_cpu_attention_paged(p, q, n_q, q_pos, &pv, out, scratch, pool, isa);
}

void mxl_cpu_attention(const mxl_attn_params *p, const float *q, int64_t n_q,
                       const int64_t *q_pos, const mxl_kv_view *kv, float *out, float *scratch,
                       mxl_threadpool *pool, mxl_cpu_isa isa) {
    MXL_ASSERT(kv->dtype == MXL_DTYPE_F32 || kv->dtype == MXL_DTYPE_F16);
    mxl_kv_split_view sv = {kv->dtype, kv->dtype, kv->k, kv->v, NULL, NULL, 0, kv->n_kv, kv->row_stride};
    mxl_cpu_attention_kv(p, q, n_q, q_pos, &sv, out, scratch, pool, isa);
}
