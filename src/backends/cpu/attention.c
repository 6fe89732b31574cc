/* attention.c - GQA attention over a KV cache (attention.h): two passes per (token, head) over
 * a score row in scratch (scores, then the weighted sum of V). The q.k dots use the dense dot
 * kernels (AVX2 when isa allows), everything else is plain C. */
#include "backends/cpu/attention.h"

#include <math.h>
#include <string.h>

#include "backends/cpu/dense.h"
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/softmax.h"

size_t mxl_cpu_attention_scratch_floats(int64_t n_kv, int n_threads) {
    return (size_t)(n_kv > 0 ? n_kv : 1) * (size_t)(n_threads > 0 ? n_threads : 1);
}

typedef struct attn_ctx {
    const mxl_attn_params *p;
    const float *q;
    int64_t n_q;
    const int64_t *q_pos;
    const mxl_kv_view *kv;
    float *out;
    float *scratch;
    mxl_dense_dot_fn dot;
} attn_ctx;

static void attn_one(const attn_ctx *c, int64_t t, int h, float *s) {
    const mxl_attn_params *p = c->p;
    const mxl_kv_view *kv = c->kv;
    const int hd = p->head_dim;
    const int kvh = h / (p->n_heads / p->n_kv_heads);
    const float *qh = c->q + (t * p->n_heads + h) * hd;
    const size_t esz = kv->dtype == MXL_DTYPE_F16 ? 2 : 4;
    const int64_t qp = c->q_pos[t];
    int64_t lo = 0, hi = kv->n_kv; /* visible keys [lo, hi) */
    if (p->causal && qp + 1 < hi) hi = qp + 1;
    if (p->window > 0 && qp - p->window + 1 > lo) lo = qp - p->window + 1;
    for (int64_t j = 0; j < kv->n_kv; j++) s[j] = -INFINITY;
    for (int64_t j = lo; j < hi; j++) {
        const void *kj = (const uint8_t *)kv->k + (size_t)(j * kv->row_stride + (int64_t)kvh * hd) * esz;
        float d = c->dot ? c->dot(hd, kj, qh) : mxl_dense_dot_ref(kv->dtype, hd, kj, qh);
        s[j] = d * p->scale;
    }
    float sink = p->sinks ? p->sinks[h] : -INFINITY;
    if (hi > lo) mxl_cpu_softmax(s + lo, hi - lo, p->softcap, sink);
    float *o = c->out + (t * p->n_heads + h) * hd;
    for (int i = 0; i < hd; i++) o[i] = 0.0f;
    for (int64_t j = lo; j < hi; j++) {
        float w = s[j];
        if (w == 0.0f) continue;
        const uint8_t *vj = (const uint8_t *)kv->v + (size_t)(j * kv->row_stride + (int64_t)kvh * hd) * esz;
        if (kv->dtype == MXL_DTYPE_F16) {
            const uint16_t *v16 = (const uint16_t *)vj;
            for (int i = 0; i < hd; i++) o[i] += w * mxl_h2f(v16[i]);
        } else {
            const float *v32 = (const float *)vj;
            for (int i = 0; i < hd; i++) o[i] += w * v32[i];
        }
    }
}

static void attn_task(void *vctx, int task, int n_tasks, int thread_index) {
    attn_ctx *c = vctx;
    int64_t total = c->n_q * c->p->n_heads;
    int64_t a = total * task / n_tasks, b = total * (task + 1) / n_tasks;
    float *s = c->scratch + (size_t)thread_index * (size_t)(c->kv->n_kv > 0 ? c->kv->n_kv : 1);
    for (int64_t i = a; i < b; i++) attn_one(c, i / c->p->n_heads, (int)(i % c->p->n_heads), s);
}

void mxl_cpu_attention(const mxl_attn_params *p, const float *q, int64_t n_q,
                       const int64_t *q_pos, const mxl_kv_view *kv, float *out, float *scratch,
                       mxl_threadpool *pool, mxl_cpu_isa isa) {
    MXL_ASSERT(p->n_kv_heads > 0 && p->n_heads % p->n_kv_heads == 0);
    MXL_ASSERT(kv->dtype == MXL_DTYPE_F32 || kv->dtype == MXL_DTYPE_F16);
    attn_ctx c = {p, q, n_q, q_pos, kv, out, scratch, NULL};
    if (isa > mxl_cpu_isa_detect()) isa = mxl_cpu_isa_detect();
    if (isa >= MXL_CPU_ISA_AVX2) c.dot = mxl_dense_dot_avx2_get(kv->dtype);
    int nth = pool ? mxl_threadpool_size(pool) : 1;
    int64_t total = n_q * p->n_heads;
    int n_tasks = total < nth * 4 ? (int)total : nth * 4;
    if (pool && n_tasks > 1) mxl_threadpool_run(pool, n_tasks, attn_task, &c);
    else if (total > 0) attn_task(&c, 0, 1, 0);
}
