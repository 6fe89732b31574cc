/* mla.c - multi-head latent attention's projections (mla.h): the latent rows for the cache, the
 * absorbed queries, and the heads' values from the latent outputs. Every matrix runs through the
 * backend's matmul in its stored format; a head's rows are gathered into contiguous scratch
 * first (the backend multiplies contiguous rows). */
#include "models/mla.h"

#include <string.h>

static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

size_t mxl_mla_scratch_floats(const mxl_decoder_hparams *hp, int64_t max_rows) {
    const int64_t NH = hp->n_heads, R = hp->mla_kv_rank, dn = hp->mla_nope_dim, dr = hp->mla_rope_dim, dv = hp->mla_v_dim;
    const int64_t per_row[6] = {NH * (dn + dr), hp->mla_q_rank, R + dr, max2(dn, R), max2(R, dv), NH * dv};
    size_t total = 0;
    for (int i = 0; i < 6; i++) total += ((size_t)(per_row[i] * max_rows) + 15) & ~(size_t)15;
    return total;
}

void mxl_mla_scratch_carve(const mxl_decoder_hparams *hp, int64_t max_rows, float *mem, mxl_mla_scratch *s) {
    const int64_t NH = hp->n_heads, R = hp->mla_kv_rank, dn = hp->mla_nope_dim, dr = hp->mla_rope_dim, dv = hp->mla_v_dim;
    const int64_t per_row[6] = {NH * (dn + dr), hp->mla_q_rank, R + dr, max2(dn, R), max2(R, dv), NH * dv};
    float **ptr[6] = {&s->qr, &s->qa, &s->ckv, &s->xin, &s->yout, &s->vo};
    for (int i = 0; i < 6; i++) {
        *ptr[i] = mem;
        mem += ((size_t)(per_row[i] * max_rows) + 15) & ~(size_t)15;
    }
}

static void add_bias(float *y, const float *b, int64_t n, int64_t m) {
    if (!b) return;
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < m; r++) y[t * m + r] += b[r];
}

/* y [n, W.rows] (rows ystride apart from column y0) = W x, x the cols-wide slices of rows xstride
 * apart from column x0 of src: through the scratch rows when the slices are not contiguous */
static void head_matmul(const mxl_backend *be, const mxl_weight *W, const float *src, int64_t xstride, int64_t n, float *dst,
                        int64_t ystride, const mxl_mla_scratch *s, void *mm_scratch, mxl_threadpool *pool) {
    const int64_t c = W->cols, r = W->rows;
    for (int64_t t = 0; t < n; t++) memcpy(s->xin + t * c, src + t * xstride, (size_t)c * sizeof(float));
    be->ops->matmul(be, W, NULL, s->xin, n, s->yout, mm_scratch, pool);
    for (int64_t t = 0; t < n; t++) memcpy(dst + t * ystride, s->yout + t * r, (size_t)r * sizeof(float));
}

void mxl_mla_project(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_decoder_layer *L, const mxl_row_prep *prep,
                     const float *h, int64_t n, float *q, float *k, const mxl_mla_scratch *s, void *mm_scratch,
                     mxl_threadpool *pool) {
    const mxl_mla_layer *M = L->mla;
    const int64_t NH = hp->n_heads, R = hp->mla_kv_rank, dn = hp->mla_nope_dim, dr = hp->mla_rope_dim, Q = hp->mla_q_rank;
    const int64_t qw = dn + dr, hw = dr + R; /* a projected query head, an absorbed one (= a cache row) */
    /* the first matrices read h: q_a (or q_proj) and kv_a, in one pass over h */
    {
        const mxl_weight *W[2] = {Q > 0 ? &M->q_a : &L->wq, &M->kv_a};
        float *y[2] = {Q > 0 ? s->qa : s->qr, s->ckv};
        be->ops->matmul_multi(be, W, 2, prep, NULL, h, n, y, mm_scratch, pool);
        add_bias(s->ckv, M->b_kv_a, n, R + dr);
    }
    if (Q > 0) {
        add_bias(s->qa, M->b_q_a, n, Q);
        for (int64_t t = 0; t < n; t++) be->ops->rmsnorm(be, s->qa + t * Q, M->q_a_norm, Q, hp->mla_norm_eps, false, s->qa + t * Q);
        be->ops->matmul(be, &L->wq, NULL, s->qa, n, s->qr, mm_scratch, pool);
    }
    /* cache rows: [kr; rmsnorm(c)] */
    for (int64_t t = 0; t < n; t++) {
        const float *ct = s->ckv + t * (R + dr);
        float *kt = k + t * hw;
        memcpy(kt, ct + R, (size_t)dr * sizeof(float));
        be->ops->rmsnorm(be, ct, M->kv_a_norm, R, hp->mla_norm_eps, false, kt + dr);
    }
    /* queries: [q_pe; uk[h] q_nope] per head */
    for (int64_t hd = 0; hd < NH; hd++) {
        head_matmul(be, &M->uk[hd], s->qr + hd * qw, NH * qw, n, q + hd * hw + dr, NH * hw, s, mm_scratch, pool);
        for (int64_t t = 0; t < n; t++) memcpy(q + (t * NH + hd) * hw, s->qr + (t * NH + hd) * qw + dn, (size_t)dr * sizeof(float));
    }
}

void mxl_mla_values(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_decoder_layer *L, const float *att, int64_t n,
                    const mxl_mla_scratch *s, void *mm_scratch, mxl_threadpool *pool) {
    const int64_t NH = hp->n_heads, R = hp->mla_kv_rank, dv = hp->mla_v_dim;
    for (int64_t hd = 0; hd < NH; hd++)
        head_matmul(be, &L->mla->uv[hd], att + hd * R, NH * R, n, s->vo + hd * dv, NH * dv, s, mm_scratch, pool);
}
