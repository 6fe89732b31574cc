/* attention_enc.c - reference and dispatch (through the kernel table, kernels.h) for
 * attention_enc.h: tasks are (sequence, head)
 * pairs handed out by the pool's atomic counter (sequence lengths differ, so dynamic
 * scheduling balances them). */
#include "backends/cpu/attention_enc.h"

#include <math.h>
#include <stdlib.h>

#include "backends/cpu/kernels.h"
#include "core/alloc.h"
#include "core/status.h"

/* The width the AVX-512 kernel runs a head at: head_dim rounded up to 16 (a head of another width
 * is copied into zero-padded rows: the padding adds nothing to q.k and its outputs are dropped). */
static int padded_dim(int head_dim) { return (head_dim + 15) / 16 * 16; }

/* The kernel's own scratch for a head of L tokens at width dp: the short path's (kt, score rows)
 * or the long path's blocked GEMMs. */
static int64_t kernel_floats(int64_t L, int64_t dp) {
    const int64_t lp = (L + 15) / 16 * 16, s = (lp * dp + 4 * lp + 64 + 15) / 16 * 16;
    const int64_t g = L >= MXL_ENC_ATTN_GEMM_MIN_L ? ((int64_t)mxl_enc_attention_gemm_floats(L, (int)dp) + 15) / 16 * 16 : 0;
    return s > g ? s : g;
}

size_t mxl_enc_attention_scratch_floats(int64_t longest, int head_dim) {
    int64_t lp = (longest + 15) / 16 * 16, dp = padded_dim(head_dim);
    int64_t pad = dp != head_dim ? 4 * lp * dp : 0; /* q, k, v, out of one head at the padded width */
    const int64_t gemm = longest >= MXL_ENC_ATTN_GEMM_MIN_L ? (int64_t)mxl_enc_attention_gemm_floats(longest, head_dim) : 0;
    const int64_t padded = kernel_floats(longest, dp) + pad;
    return (size_t)(padded > gemm ? padded : gemm);
}

static void head_ref(const mxl_enc_attn *a, int64_t s, int h, float *sc) {
    int64_t t0 = a->seq_start[s], L = a->seq_start[s + 1] - t0;
    int d = a->head_dim;
    for (int64_t i = 0; i < L; i++) {
        const float *qi = a->q + (t0 + i) * a->stride + h * d;
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t j = 0; j < L; j++) {
            const float *kj = a->k + (t0 + j) * a->stride + h * d;
            float dot = 0.0f;
            for (int c = 0; c < d; c++) dot += qi[c] * kj[c];
            sc[j] = dot * a->scale;
            if (sc[j] > mx) mx = sc[j];
        }
        for (int64_t j = 0; j < L; j++) {
            sc[j] = expf(sc[j] - mx);
            sum += sc[j];
        }
        float *o = a->out + (t0 + i) * a->stride + h * d;
        for (int c = 0; c < d; c++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < L; j++) acc += sc[j] * a->v[(t0 + j) * a->stride + h * d + c];
            o[c] = acc / sum;
        }
    }
}

void mxl_enc_attention_ref(const mxl_enc_attn *a) {
    int64_t longest = 0;
    for (int64_t s = 0; s < a->n_seqs; s++)
        if (a->seq_start[s + 1] - a->seq_start[s] > longest) longest = a->seq_start[s + 1] - a->seq_start[s];
    float *sc = mxl_malloc((size_t)(longest > 0 ? longest : 1) * sizeof(float));
    MXL_ASSERT(sc != NULL);
    for (int64_t s = 0; s < a->n_seqs; s++)
        for (int h = 0; h < a->n_heads; h++) head_ref(a, s, h, sc);
    mxl_free(sc);
}

typedef struct enc_ctx {
    const mxl_enc_attn *a;
    float *scratch;
    size_t per;
    /* the level's one-(sequence, head) kernel (the table's enc_attn_head) */
    void (*head)(const float *q, const float *k, const float *v, float *out, int64_t stride, int64_t L, int d,
                 float scale, float *scratch);
} enc_ctx;

static void enc_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)n_tasks;
    enc_ctx *c = vctx;
    const mxl_enc_attn *a = c->a;
    int64_t s = task / a->n_heads;
    int h = task % a->n_heads;
    int64_t t0 = a->seq_start[s], L = a->seq_start[s + 1] - t0;
    int64_t off = t0 * a->stride + (int64_t)h * a->head_dim;
    float *scratch = c->scratch + (size_t)thread_index * c->per;
    const int d = a->head_dim, dp = padded_dim(d);
    if (dp == d || L >= MXL_ENC_ATTN_GEMM_MIN_L) { /* (the blocked-GEMM path takes any width) */
        c->head(a->q + off, a->k + off, a->v + off, a->out + off, a->stride, L, d, a->scale, scratch);
        return;
    }
    /* a head width the kernel does not take (SigLIP-so400m's 72): zero-padded copies [L, dp] */
    const int64_t lp = (L + 15) / 16 * 16;
    float *q = scratch + (size_t)kernel_floats(L, dp), *k = q + lp * dp, *v = k + lp * dp, *o = v + lp * dp;
    for (int64_t i = 0; i < L; i++) {
        const int64_t src = off + i * a->stride;
        for (int j = 0; j < dp; j++) {
            q[i * dp + j] = j < d ? a->q[src + j] : 0.0f;
            k[i * dp + j] = j < d ? a->k[src + j] : 0.0f;
            v[i * dp + j] = j < d ? a->v[src + j] : 0.0f;
        }
    }
    c->head(q, k, v, o, dp, L, dp, a->scale, scratch);
    for (int64_t i = 0; i < L; i++)
        for (int j = 0; j < d; j++) a->out[off + i * a->stride + j] = o[i * dp + j];
}

int mxl_enc_attention_fast(int head_dim, mxl_cpu_isa isa) { return mxl_cpu_kern_at(isa)->enc_attn_head && head_dim > 0; }

void mxl_enc_attention(const mxl_enc_attn *a, float *scratch, mxl_threadpool *pool, mxl_cpu_isa isa) {
    if (!mxl_enc_attention_fast(a->head_dim, isa)) {
        mxl_enc_attention_ref(a);
        return;
    }
    int64_t longest = 0;
    for (int64_t s = 0; s < a->n_seqs; s++)
        if (a->seq_start[s + 1] - a->seq_start[s] > longest) longest = a->seq_start[s + 1] - a->seq_start[s];
    enc_ctx c = {a, scratch, mxl_enc_attention_scratch_floats(longest, a->head_dim), mxl_cpu_kern_at(isa)->enc_attn_head};
    int n_tasks = (int)(a->n_seqs * a->n_heads);
    if (pool && mxl_threadpool_size(pool) > 1 && n_tasks > 1) mxl_threadpool_run(pool, n_tasks, enc_task, &c);
    else
        for (int t = 0; t < n_tasks; t++) enc_task(&c, t, n_tasks, 0);
}
