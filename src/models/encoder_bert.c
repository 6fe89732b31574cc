/* encoder_bert.c - BERT encoder forward pass (see encoder_bert.h). */
#include "models/encoder_bert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/attention.h"
#include "backends/cpu/embed_topk.h"
#include "backends/cpu/norm.h"
#include "models/weights.h"

typedef struct binder {
    const mxl_checkpoint *ck;
    mxl_arena *arena;
    const char *prefix; /* "" or "bert." */
    mxl_error *err;
} binder;

static const mxl_tensor *find(const binder *b, const char *name, char *full, size_t cap) {
    snprintf(full, cap, "%s%s", b->prefix, name);
    const mxl_st_entry *e = mxl_st_model_find(b->ck->st, full);
    if (!e) {
        mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: tensor '%s' is missing", b->ck->path, full);
        return NULL;
    }
    return &e->tensor;
}

static int mat(const binder *b, const char *name, int64_t rows, int64_t cols, mxl_cpu_weight *w) {
    char full[256];
    const mxl_tensor *t = find(b, name, full, sizeof full);
    if (!t) return 1;
    if (mxl_weights_matrix(t, full, rows, cols, w, b->err)) {
        mxl_error_prefix(b->err, "%s: ", b->ck->path);
        return 1;
    }
    return 0;
}

static int vec(const binder *b, const char *name, int64_t n, const float **out) {
    char full[256];
    const mxl_tensor *t = find(b, name, full, sizeof full);
    if (!t) return 1;
    if (mxl_weights_vector_f32(b->arena, t, full, n, out, b->err)) {
        mxl_error_prefix(b->err, "%s: ", b->ck->path);
        return 1;
    }
    return 0;
}

mxl_status mxl_bert_load(const mxl_checkpoint *ck, mxl_bert *m, mxl_error *err) {
    memset(m, 0, sizeof *m);
    mxl_arena_init(&m->arena, 64 * 1024);
    const mxl_model_config *c = &ck->config;
    if (ck->format != MXL_CHECKPOINT_SAFETENSORS || strcmp(c->model_type, "bert") != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: model_type '%s' is not a BERT safetensors checkpoint", ck->path, c->model_type);
    m->n_layers = c->num_hidden_layers;
    m->hidden = c->hidden_size;
    m->n_heads = c->num_attention_heads;
    m->ffn = c->intermediate_size;
    m->vocab = c->vocab_size;
    m->max_pos = c->max_position_embeddings;
    m->ln_eps = (float)(!isnan(c->layer_norm_eps) ? c->layer_norm_eps : 1e-12);
    if (m->n_layers <= 0 || m->hidden <= 0 || m->n_heads <= 0 || m->hidden % m->n_heads || m->ffn <= 0 ||
        m->vocab <= 0 || m->max_pos <= 0)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: incomplete BERT hyper-parameters", ck->path);
    m->head_dim = m->hidden / m->n_heads;
    if (strcmp(c->hidden_act, "gelu") == 0 || c->hidden_act[0] == 0) m->act = MXL_ACT_GELU_ERF;
    else if (strcmp(c->hidden_act, "gelu_new") == 0 || strcmp(c->hidden_act, "gelu_pytorch_tanh") == 0) m->act = MXL_ACT_GELU_TANH;
    else if (strcmp(c->hidden_act, "relu") == 0) m->act = MXL_ACT_RELU;
    else return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported for BERT", ck->path, c->hidden_act);
    binder b = {ck, &m->arena, mxl_st_model_find(ck->st, "bert.embeddings.word_embeddings.weight") ? "bert." : "", err};
    int64_t H = m->hidden, types = c->type_vocab_size > 0 ? c->type_vocab_size : 2;
    if (mat(&b, "embeddings.word_embeddings.weight", m->vocab, H, &m->word_emb) ||
        vec(&b, "embeddings.position_embeddings.weight", m->max_pos * H, &m->pos_emb) ||
        vec(&b, "embeddings.token_type_embeddings.weight", types * H, &m->type_emb) ||
        vec(&b, "embeddings.LayerNorm.weight", H, &m->emb_ln_w) || vec(&b, "embeddings.LayerNorm.bias", H, &m->emb_ln_b))
        return err ? err->status : MXL_ERR_FORMAT;
    m->layers = mxl_arena_alloc(&m->arena, (size_t)m->n_layers * sizeof *m->layers, 64);
    if (!m->layers) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < m->n_layers; i++) {
        mxl_bert_layer *L = &m->layers[i];
        char n[16][128];
        static const char *const parts[16] = {
            "attention.self.query.weight", "attention.self.query.bias", "attention.self.key.weight",
            "attention.self.key.bias", "attention.self.value.weight", "attention.self.value.bias",
            "attention.output.dense.weight", "attention.output.dense.bias", "attention.output.LayerNorm.weight",
            "attention.output.LayerNorm.bias", "intermediate.dense.weight", "intermediate.dense.bias",
            "output.dense.weight", "output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias"};
        for (int k = 0; k < 16; k++) snprintf(n[k], sizeof n[k], "encoder.layer.%lld.%s", (long long)i, parts[k]);
        if (mat(&b, n[0], H, H, &L->wq) || vec(&b, n[1], H, &L->bq) || mat(&b, n[2], H, H, &L->wk) ||
            vec(&b, n[3], H, &L->bk) || mat(&b, n[4], H, H, &L->wv) || vec(&b, n[5], H, &L->bv) ||
            mat(&b, n[6], H, H, &L->wo) || vec(&b, n[7], H, &L->bo) || vec(&b, n[8], H, &L->ln1_w) ||
            vec(&b, n[9], H, &L->ln1_b) || mat(&b, n[10], m->ffn, H, &L->wi) || vec(&b, n[11], m->ffn, &L->bi) ||
            mat(&b, n[12], H, m->ffn, &L->wo2) || vec(&b, n[13], H, &L->bo2) || vec(&b, n[14], H, &L->ln2_w) ||
            vec(&b, n[15], H, &L->ln2_b))
            return err ? err->status : MXL_ERR_FORMAT;
    }
    return MXL_OK;
}

void mxl_bert_free(mxl_bert *m) {
    mxl_arena_free(&m->arena);
    memset(m, 0, sizeof *m);
}

static void linear(const mxl_cpu_weight *w, const float *bias, const float *x, int64_t n, float *y,
                   void *scratch, mxl_threadpool *pool) {
    mxl_cpu_matmul(w, x, n, y, scratch, pool);
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < w->rows; r++) y[t * w->rows + r] += bias[r];
}

mxl_status mxl_bert_forward(const mxl_bert *m, const int32_t *ids, int64_t n, mxl_threadpool *pool,
                            float *x, mxl_error *err) {
    if (n <= 0 || n > m->max_pos)
        return mxl_error_set(err, MXL_ERR_ARG, "%lld tokens do not fit the encoder's %lld positions", (long long)n, (long long)m->max_pos);
    int64_t H = m->hidden;
    int n_threads = pool ? mxl_threadpool_size(pool) : 1;
    size_t scratch_bytes = mxl_cpu_matmul_scratch_bytes(&m->layers[0].wi, n);
    size_t fl = (size_t)(n * H) * 5 + (size_t)(n * m->ffn) + mxl_cpu_attention_scratch_floats(n, n_threads) +
                scratch_bytes / 4 + 64;
    float *buf = calloc(fl, sizeof(float));
    int64_t *pos = calloc((size_t)n, sizeof *pos);
    mxl_status st = buf && pos ? mxl_cpu_embed(&m->word_emb, ids, n, 1.0f, x, err) : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    if (st) {
        free(buf);
        free(pos);
        return st;
    }
    float *q = buf, *k = q + n * H, *v = k + n * H, *a = v + n * H, *o = a + n * H, *h = o + n * H;
    float *att_scratch = h + n * m->ffn;
    void *mm_scratch = att_scratch + mxl_cpu_attention_scratch_floats(n, n_threads);
    for (int64_t t = 0; t < n; t++) {
        pos[t] = t;
        for (int64_t i = 0; i < H; i++) x[t * H + i] += m->pos_emb[t * H + i] + m->type_emb[i];
        mxl_cpu_layernorm(x + t * H, m->emb_ln_w, m->emb_ln_b, H, m->ln_eps, x + t * H);
    }
    mxl_cpu_isa isa = mxl_cpu_isa_detect();
    for (int64_t l = 0; l < m->n_layers; l++) {
        const mxl_bert_layer *L = &m->layers[l];
        linear(&L->wq, L->bq, x, n, q, mm_scratch, pool);
        linear(&L->wk, L->bk, x, n, k, mm_scratch, pool);
        linear(&L->wv, L->bv, x, n, v, mm_scratch, pool);
        mxl_attn_params ap = {(int)m->n_heads, (int)m->n_heads, (int)m->head_dim, 1.0f / sqrtf((float)m->head_dim), 0.0f, NULL, 0, 0};
        mxl_kv_view kv = {MXL_DTYPE_F32, k, v, n, H};
        mxl_cpu_attention(&ap, q, n, pos, &kv, a, att_scratch, pool, isa);
        linear(&L->wo, L->bo, a, n, o, mm_scratch, pool);
        for (int64_t t = 0; t < n; t++) {
            for (int64_t i = 0; i < H; i++) x[t * H + i] += o[t * H + i];
            mxl_cpu_layernorm(x + t * H, L->ln1_w, L->ln1_b, H, m->ln_eps, x + t * H);
        }
        linear(&L->wi, L->bi, x, n, h, mm_scratch, pool);
        mxl_cpu_act(m->act, h, n * m->ffn, h);
        linear(&L->wo2, L->bo2, h, n, o, mm_scratch, pool);
        for (int64_t t = 0; t < n; t++) {
            for (int64_t i = 0; i < H; i++) x[t * H + i] += o[t * H + i];
            mxl_cpu_layernorm(x + t * H, L->ln2_w, L->ln2_b, H, m->ln_eps, x + t * H);
        }
    }
    free(buf);
    free(pos);
    return MXL_OK;
}
