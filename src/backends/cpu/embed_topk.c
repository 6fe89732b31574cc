/* embed_topk.c - embedding lookup, argmax/top-k and the logit scan (embed_topk.h): the references
 * and their dispatch (kernels.h). Top-k keeps a size-k min-heap (O(n log k)), then sorts it. */
#include "backends/cpu/embed_topk.h"

#include <math.h>

#include "backends/cpu/kernels.h"

mxl_status mxl_cpu_embed(const mxl_weight *table, const int32_t *ids, int64_t n, float scale,
                         float *out, mxl_error *err) {
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= table->rows)
            return mxl_error_set(err, MXL_ERR_ARG, "token id %d outside the vocabulary [0, %lld)",
                                 ids[i], (long long)table->rows);
        float *o = out + i * table->cols;
        mxl_weight_dequant_row(table, ids[i], o);
        if (scale != 1.0f)
            for (int64_t j = 0; j < table->cols; j++) o[j] *= scale;
    }
    return MXL_OK;
}

int64_t mxl_cpu_argmax(const float *x, int64_t n) { return mxl_cpu_kern()->argmax(x, n); }

void mxl_cpu_logits_scan(const float *x, int64_t n, bool *bad, bool *any) { mxl_cpu_kern()->logits_scan(x, n, bad, any); }

void mxl_cpu_logits_scan_ref(const float *x, int64_t n, bool *bad, bool *any) {
    int b = 0, a = 0; /* branch-free: NaN and +inf fail `x < inf` */
    for (int64_t i = 0; i < n; i++) {
        b |= !(x[i] < INFINITY);
        a |= x[i] > -INFINITY;
    }
    *bad = b, *any = a;
}

/* The first non-NaN value, then every later value larger than the best so far (a NaN compares
 * false, so it never wins): one comparison per element. Written so because the table calls this
 * out of line, where GCC laid out the one-loop form (a `best < 0` test per element) with a
 * quarter more instructions than its copy inlined in the old dispatch (callgrind, AVX2 level);
 * this form runs a quarter fewer than that copy. The same index either way. */
int64_t mxl_cpu_argmax_ref(const float *x, int64_t n) {
    int64_t i = 0;
    while (i < n && isnan(x[i])) i++;
    if (i >= n) return 0;
    int64_t best = i;
    for (i++; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* "a ranks below b": smaller value, or equal value and larger index. */
static int below(float va, int32_t ia, float vb, int32_t ib) { return va < vb || (va == vb && ia > ib); }

static void sift_down(int32_t *idx, float *val, int64_t n, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && below(val[l], idx[l], val[m], idx[m])) m = l;
        if (r < n && below(val[r], idx[r], val[m], idx[m])) m = r;
        if (m == i) return;
        float tv = val[i]; val[i] = val[m]; val[m] = tv;
        int32_t ti = idx[i]; idx[i] = idx[m]; idx[m] = ti;
        i = m;
    }
}

int64_t mxl_cpu_topk(const float *x, int64_t n, int64_t k, int32_t *idx, float *val) {
    if (k > n) k = n;
    int64_t h = 0; /* heap size; root = the lowest-ranked kept entry */
    for (int64_t i = 0; i < n && k > 0; i++) {
        if (isnan(x[i])) continue;
        if (h < k) {
            int64_t c = h++;
            idx[c] = (int32_t)i, val[c] = x[i];
            while (c > 0) { /* sift up */
                int64_t pa = (c - 1) / 2;
                if (!below(val[c], idx[c], val[pa], idx[pa])) break;
                float tv = val[c]; val[c] = val[pa]; val[pa] = tv;
                int32_t ti = idx[c]; idx[c] = idx[pa]; idx[pa] = ti;
                c = pa;
            }
        } else if (below(val[0], idx[0], x[i], (int32_t)i)) {
            idx[0] = (int32_t)i, val[0] = x[i];
            sift_down(idx, val, h, 0);
        }
    }
    /* heap sort: repeatedly move the lowest to the end -> descending order */
    for (int64_t e = h - 1; e > 0; e--) {
        float tv = val[0]; val[0] = val[e]; val[e] = tv;
        int32_t ti = idx[0]; idx[0] = idx[e]; idx[e] = ti;
        sift_down(idx, val, e, 0);
    }
    return h;
}
