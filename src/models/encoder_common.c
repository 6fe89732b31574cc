/* encoder_common.c - prefix-aware tensor binding, raw config keys, activations and the biased
 * linear layer shared by the encoder families (see encoder_common.h). */
#include "models/encoder_common.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "io/json_read.h"
#include "models/weights.h"

mxl_status mxl_encoder_batch_check(const mxl_encoder_batch *b, int64_t max_len, int64_t *n_tokens,
                                   int64_t *longest, mxl_error *err) {
    *n_tokens = 0;
    *longest = 0;
    if (b->n_seqs <= 0 || !b->seq_start || b->seq_start[0] != 0)
        return mxl_error_set(err, MXL_ERR_ARG, "encoder batch: no sequences");
    for (int64_t s = 0; s < b->n_seqs; s++) {
        int64_t len = b->seq_start[s + 1] - b->seq_start[s];
        if (len <= 0 || len > max_len)
            return mxl_error_set(err, MXL_ERR_ARG, "sequence %lld has %lld tokens; the encoder takes 1 to %lld",
                                 (long long)s, (long long)len, (long long)max_len);
        if (len > *longest) *longest = len;
    }
    *n_tokens = b->seq_start[b->n_seqs];
    return MXL_OK;
}

const char *mxl_enc_find_prefix(const mxl_checkpoint *ck, const char *const *prefixes, const char *probe) {
    char name[512];
    for (size_t i = 0; prefixes[i]; i++) {
        snprintf(name, sizeof name, "%s%s", prefixes[i], probe);
        if ((ck->st && mxl_st_model_find(ck->st, name)) || (ck->gguf && mxl_gguf_find_tensor(ck->gguf, name))) return prefixes[i];
    }
    return NULL;
}

/* prefix + formatted name into full; false when it does not fit */
static bool full_name(const mxl_enc_binder *b, char *full, size_t cap, const char *fmt, va_list ap) {
    int n = snprintf(full, cap, "%s", b->prefix);
    if (n < 0 || (size_t)n >= cap) return false;
    int m = vsnprintf(full + n, cap - (size_t)n, fmt, ap);
    return m >= 0 && (size_t)m < cap - (size_t)n;
}

/* The tensor named full in the checkpoint's safetensors or GGUF file (a GGUF mmproj's vision
 * tower binds through here too), or NULL (reported when report). */
static const mxl_tensor *lookup(const mxl_enc_binder *b, const char *full, bool report) {
    const mxl_tensor *t = NULL;
    if (b->ck->st) {
        const mxl_st_entry *e = mxl_st_model_find(b->ck->st, full);
        t = e ? &e->tensor : NULL;
    } else if (b->ck->gguf) {
        const mxl_gguf_tensor_info *ti = mxl_gguf_find_tensor(b->ck->gguf, full);
        t = ti ? &ti->tensor : NULL;
    }
    if (!t && report) mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: tensor '%s' is missing", b->ck->path, full);
    return t;
}

bool mxl_enc_has(const mxl_enc_binder *b, const char *fmt, ...) {
    char full[512];
    va_list ap;
    va_start(ap, fmt);
    bool ok = full_name(b, full, sizeof full, fmt, ap);
    va_end(ap);
    return ok && lookup(b, full, false) != NULL;
}

mxl_status mxl_enc_matrix(const mxl_enc_binder *b, int64_t rows, int64_t cols, mxl_weight *out,
                          const char *fmt, ...) {
    char full[512];
    va_list ap;
    va_start(ap, fmt);
    bool ok = full_name(b, full, sizeof full, fmt, ap);
    va_end(ap);
    if (!ok) return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: tensor name too long", b->ck->path);
    const mxl_tensor *t = lookup(b, full, true);
    if (!t) return MXL_ERR_FORMAT;
    mxl_status st = mxl_weights_matrix(t, full, rows, cols, out, b->err);
    if (st) mxl_error_prefix(b->err, "%s: ", b->ck->path);
    return st;
}

mxl_status mxl_enc_vector(const mxl_enc_binder *b, int64_t n, const float **out, const char *fmt, ...) {
    char full[512];
    va_list ap;
    va_start(ap, fmt);
    bool ok = full_name(b, full, sizeof full, fmt, ap);
    va_end(ap);
    if (!ok) return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: tensor name too long", b->ck->path);
    const mxl_tensor *t = lookup(b, full, true);
    if (!t) return MXL_ERR_FORMAT;
    mxl_status st = mxl_weights_vector_f32(b->arena, t, full, n, out, b->err);
    if (st) mxl_error_prefix(b->err, "%s: ", b->ck->path);
    return st;
}

mxl_status mxl_enc_conv_weight(const mxl_enc_binder *b, int64_t out, int64_t in_c, int64_t k, const float **w, const char *name) {
    if (mxl_enc_vector(b, out * in_c * k, w, "%s", name)) return b->err ? b->err->status : MXL_ERR_FORMAT;
    char full[512];
    snprintf(full, sizeof full, "%s%s", b->prefix, name);
    const mxl_tensor *t = lookup(b, full, false);
    if (!t || t->ndim < 3 || t->shape[0] != out || t->shape[1] == in_c) return MXL_OK;
    if (t->shape[t->ndim - 1] != in_c)
        return mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: tensor '%s' is neither [%lld, %lld, ...] nor channels-last [%lld, ..., %lld]", b->ck->path, full,
                             (long long)out, (long long)in_c, (long long)out, (long long)in_c);
    float *c = mxl_arena_alloc(b->arena, (size_t)(out * in_c * k) * sizeof(float), 64);
    if (!c) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t o = 0; o < out; o++)
        for (int64_t j = 0; j < k; j++)
            for (int64_t ch = 0; ch < in_c; ch++) c[(o * in_c + ch) * k + j] = (*w)[(o * k + j) * in_c + ch];
    *w = c;
    return MXL_OK;
}

static json_t *raw_get(const mxl_checkpoint *ck, const char *key) {
    return ck->config.raw ? json_object_get(ck->config.raw, key) : NULL;
}

mxl_status mxl_enc_cfg_bool(const mxl_checkpoint *ck, const char *key, bool dflt, bool *out, mxl_error *err) {
    json_t *v = raw_get(ck, key);
    *out = dflt;
    if (!v || json_is_null(v)) return MXL_OK;
    if (!json_is_boolean(v)) return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: '%s' must be true or false", ck->dir, key);
    *out = json_is_true(v);
    return MXL_OK;
}

mxl_status mxl_enc_cfg_int(const mxl_checkpoint *ck, const char *key, int64_t dflt, int64_t *out, mxl_error *err) {
    json_t *v = raw_get(ck, key);
    *out = dflt;
    if (!v || json_is_null(v)) return MXL_OK;
    if (mxl_json_int(v, INT64_MIN, INT64_MAX, out))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: '%s' must be an integer", ck->dir, key);
    return MXL_OK;
}

mxl_status mxl_enc_subcfg_int(const mxl_checkpoint *ck, const json_t *obj, const char *what, const char *key, int64_t dflt, int64_t lo,
                              int64_t hi, int64_t *out, mxl_error *err) {
    const json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (!v || json_is_null(v)) return MXL_OK;
    if (mxl_json_int(v, lo, hi, out))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: %s.%s must be an integer in [%lld, %lld]", ck->dir, what, key, (long long)lo,
                             (long long)hi);
    return MXL_OK;
}

mxl_status mxl_enc_cfg_double(const mxl_checkpoint *ck, const char *key, double dflt, double *out, mxl_error *err) {
    json_t *v = raw_get(ck, key);
    *out = dflt;
    if (!v || json_is_null(v)) return MXL_OK;
    if (!mxl_json_number(v, out) || !isfinite(*out))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: '%s' must be a finite number", ck->dir, key);
    return MXL_OK;
}

mxl_status mxl_enc_cfg_string(const mxl_checkpoint *ck, const char *key, const char *dflt, const char **out,
                              mxl_error *err) {
    json_t *v = raw_get(ck, key);
    *out = dflt;
    if (!v || json_is_null(v)) return MXL_OK;
    if (!json_is_string(v)) return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: '%s' must be a string", ck->dir, key);
    *out = json_string_value(v);
    return MXL_OK;
}

mxl_status mxl_enc_activation(const char *name, const char *what, mxl_act *out, mxl_error *err) {
    if (strcmp(name, "gelu") == 0) *out = MXL_ACT_GELU_ERF;
    else if (strcmp(name, "gelu_new") == 0 || strcmp(name, "gelu_pytorch_tanh") == 0 || strcmp(name, "gelu_fast") == 0)
        *out = MXL_ACT_GELU_TANH;
    else if (strcmp(name, "relu") == 0) *out = MXL_ACT_RELU;
    else if (strcmp(name, "silu") == 0 || strcmp(name, "swish") == 0) *out = MXL_ACT_SILU;
    else return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: activation '%s' is not supported", what, name);
    return MXL_OK;
}

void mxl_enc_linear(const mxl_backend *be, const mxl_weight *w, const float *bias, const float *x, int64_t n, float *y,
                    void *scratch, mxl_threadpool *pool) {
    be->ops->matmul(be, w, NULL, x, n, y, scratch, pool);
    if (!bias) return;
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < w->rows; r++) y[t * w->rows + r] += bias[r];
}

size_t mxl_enc_linear_scratch_bytes(const mxl_backend *be, const mxl_weight *w, int64_t n, int n_threads) {
    size_t mm = be->ops->matmul_scratch_bytes(be, w, n), g = be->ops->gemm_scratch_bytes(be, w, n, n_threads);
    return mm > g ? mm : g;
}

void mxl_enc_linear_act(const mxl_backend *be, const mxl_weight *w, const float *bias, int act, const float *x, int64_t n,
                        float *y, void *scratch, mxl_threadpool *pool) {
    if (be->ops->gemm_bias_act(be, w, x, n, bias, act, y, scratch, pool)) return;
    mxl_enc_linear(be, w, bias, x, n, y, scratch, pool);
    if (act != MXL_GEMM_ACT_NONE) mxl_enc_act(be, pool, (mxl_act)act, y, n * w->rows);
}

/* ---- element-wise passes over the pool (these are a tenth of an encoder's time; serial, they
 * would cap the speed-up of the threaded matmuls) ---- */

typedef struct rows_ctx {
    const mxl_backend *be;
    int kind; /* 0 act, 1 glu, 2 add + layernorm */
    mxl_act act;
    float *x;
    const float *add, *w, *b, *g;
    float *y;
    int64_t rows, width; /* act: rows = n elements, width = 1 */
    float eps;
} rows_ctx;

static void rows_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)thread_index;
    rows_ctx *c = vctx;
    int64_t a = c->rows * task / n_tasks, z = c->rows * (task + 1) / n_tasks;
    if (c->kind == 0) {
        c->be->ops->act(c->be, c->act, c->x + a, z - a, c->x + a);
        return;
    }
    int64_t H = c->width;
    for (int64_t t = a; t < z; t++) {
        if (c->kind == 1) {
            c->be->ops->glu(c->be, c->act, c->g + t * 2 * H, c->g + t * 2 * H + H, H, c->y + t * H);
            continue;
        }
        float *xt = c->x + t * H;
        if (c->add)
            for (int64_t i = 0; i < H; i++) xt[i] += c->add[t * H + i];
        c->be->ops->layernorm(c->be, xt, c->w, c->b, H, c->eps, c->y + t * H);
    }
}

static void run_rows(mxl_threadpool *pool, rows_ctx *c) {
    int nth = pool ? mxl_threadpool_size(pool) : 1;
    int64_t work = c->rows * c->width;
    int n_tasks = nth > 1 && work >= 4096 ? (c->rows < nth ? (int)c->rows : nth) : 1;
    if (n_tasks > 1) mxl_threadpool_run(pool, n_tasks, rows_task, c);
    else if (c->rows > 0) rows_task(c, 0, 1, 0);
}

void mxl_enc_act(const mxl_backend *be, mxl_threadpool *pool, mxl_act a, float *x, int64_t n) {
    rows_ctx c = {.be = be, .kind = 0, .act = a, .x = x, .rows = n, .width = 1};
    run_rows(pool, &c);
}

void mxl_enc_glu(const mxl_backend *be, mxl_threadpool *pool, mxl_act a, const float *g, int64_t rows, int64_t I,
                 float *out) {
    rows_ctx c = {.be = be, .kind = 1, .act = a, .g = g, .y = out, .rows = rows, .width = I};
    run_rows(pool, &c);
}

void mxl_enc_add_layernorm(const mxl_backend *be, mxl_threadpool *pool, float *x, const float *add, const float *w, const float *b,
                           int64_t rows, int64_t H, float eps, float *y) {
    rows_ctx c = {.be = be, .kind = 2, .x = x, .add = add, .w = w, .b = b, .y = y, .rows = rows, .width = H, .eps = eps};
    run_rows(pool, &c);
}

size_t mxl_enc_self_attention_scratch_floats(const mxl_backend *be, int64_t longest, int head_dim, int n_threads) {
    size_t a = be->ops->varlen_scratch_floats(be, longest, head_dim) * (size_t)n_threads;
    size_t b = be->ops->attention_scratch_floats(be, longest, n_threads);
    return a > b ? a : b;
}

void mxl_enc_self_attention(const mxl_backend *be, const mxl_encoder_batch *bt, const float *q, const float *k, const float *v,
                       float *a, int64_t H, int n_heads, int head_dim, float scale, const int64_t *pos, float *scratch,
                       mxl_threadpool *pool) {
    mxl_enc_attn ea = {q, k, v, a, H, bt->seq_start, bt->n_seqs, n_heads, head_dim, scale};
    if (be->ops->attention_varlen(be, &ea, scratch, pool)) return;
    /* the decoder attention without a causal mask, one sequence at a time */
    mxl_attn_params ap = {n_heads, n_heads, head_dim, scale, 0.0f, NULL, 0, 0, 0, 0, NULL};
    for (int64_t s = 0; s < bt->n_seqs; s++) {
        int64_t t0 = bt->seq_start[s], len = bt->seq_start[s + 1] - t0;
        mxl_kv_view kv = {MXL_DTYPE_F32, k + t0 * H, v + t0 * H, len, H};
        be->ops->attention(be, &ap, q + t0 * H, len, pos + t0, &kv, a + t0 * H, scratch, pool);
    }
}
