/* encoder_siglip.c - the SigLIP text tower's forward pass (see encoder_siglip.h). */
#include "models/encoder_siglip.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "io/json_read.h"

/* text_config.projection_size (SiglipTextConfig: the hidden size when absent). */
static mxl_status projection_size(const mxl_checkpoint *ck, int64_t hidden, int64_t *out, mxl_error *err) {
    json_t *tc = ck->config.raw ? json_object_get(ck->config.raw, "text_config") : NULL;
    json_t *p = tc && json_is_object(tc) ? json_object_get(tc, "projection_size") : NULL;
    *out = hidden;
    if (!p || json_is_null(p)) return MXL_OK;
    if (!json_is_integer(p) || json_integer_value(p) <= 0 || json_integer_value(p) > (INT64_C(1) << 20))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: text_config.projection_size must be a positive integer", ck->dir);
    *out = json_integer_value(p);
    return MXL_OK;
}

const mxl_siglip_names mxl_siglip_names_hf = {{
    "encoder.layers.%lld.layer_norm1.weight", "encoder.layers.%lld.layer_norm1.bias",
    "encoder.layers.%lld.self_attn.q_proj.weight", "encoder.layers.%lld.self_attn.q_proj.bias",
    "encoder.layers.%lld.self_attn.k_proj.weight", "encoder.layers.%lld.self_attn.k_proj.bias",
    "encoder.layers.%lld.self_attn.v_proj.weight", "encoder.layers.%lld.self_attn.v_proj.bias",
    "encoder.layers.%lld.self_attn.out_proj.weight", "encoder.layers.%lld.self_attn.out_proj.bias",
    "encoder.layers.%lld.layer_norm2.weight", "encoder.layers.%lld.layer_norm2.bias",
    "encoder.layers.%lld.mlp.fc1.weight", "encoder.layers.%lld.mlp.fc1.bias",
    "encoder.layers.%lld.mlp.fc2.weight", "encoder.layers.%lld.mlp.fc2.bias",
}};

const mxl_siglip_names mxl_siglip_names_gguf = {{
    "v.blk.%lld.ln1.weight", "v.blk.%lld.ln1.bias", "v.blk.%lld.attn_q.weight", "v.blk.%lld.attn_q.bias",
    "v.blk.%lld.attn_k.weight", "v.blk.%lld.attn_k.bias", "v.blk.%lld.attn_v.weight", "v.blk.%lld.attn_v.bias",
    "v.blk.%lld.attn_out.weight", "v.blk.%lld.attn_out.bias", "v.blk.%lld.ln2.weight", "v.blk.%lld.ln2.bias",
    "v.blk.%lld.ffn_up.weight", "v.blk.%lld.ffn_up.bias", "v.blk.%lld.ffn_down.weight", "v.blk.%lld.ffn_down.bias",
}};

mxl_status mxl_siglip_stack_bind(const mxl_enc_binder *b, const mxl_siglip_names *nm, mxl_siglip_stack *s) {
    int64_t H = s->hidden, I = s->ffn;
    s->layers = mxl_arena_alloc(b->arena, (size_t)s->n_layers * sizeof *s->layers, 64);
    if (!s->layers) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
    memset(s->layers, 0, (size_t)s->n_layers * sizeof *s->layers);
    const char *const *t = nm->t;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    for (int64_t i = 0; i < s->n_layers; i++) {
        mxl_siglip_layer *L = &s->layers[i];
        long long l = (long long)i;
        if (mxl_enc_vector(b, H, &L->ln1_w, t[0], l) || mxl_enc_vector(b, H, &L->ln1_b, t[1], l) ||
            mxl_enc_matrix(b, H, H, &L->wq, t[2], l) || (t[3] && mxl_enc_vector(b, H, &L->bq, t[3], l)) ||
            mxl_enc_matrix(b, H, H, &L->wk, t[4], l) || (t[5] && mxl_enc_vector(b, H, &L->bk, t[5], l)) ||
            mxl_enc_matrix(b, H, H, &L->wv, t[6], l) || (t[7] && mxl_enc_vector(b, H, &L->bv, t[7], l)) ||
            mxl_enc_matrix(b, H, H, &L->wo, t[8], l) || mxl_enc_vector(b, H, &L->bo, t[9], l) ||
            mxl_enc_vector(b, H, &L->ln2_w, t[10], l) || mxl_enc_vector(b, H, &L->ln2_b, t[11], l) ||
            mxl_enc_matrix(b, I, H, &L->w1, t[12], l) || mxl_enc_vector(b, I, &L->b1, t[13], l) ||
            mxl_enc_matrix(b, H, I, &L->w2, t[14], l) || mxl_enc_vector(b, H, &L->b2, t[15], l) ||
            (t[16] && mxl_enc_vector(b, H, &L->ls1, t[16], l)) || (t[17] && mxl_enc_vector(b, H, &L->ls2, t[17], l)))
            return b->err ? b->err->status : MXL_ERR_FORMAT;
        mxl_weight *mats[6] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w1, &L->w2};
        for (int j = 0; j < 6; j++)
            if (s->be->ops->weight_prepare(s->be, mats[j], MXL_WEIGHT_USE_GEMM, b->arena, b->err)) return b->err ? b->err->status : MXL_ERR_NOMEM;
    }
#pragma GCC diagnostic pop
    return MXL_OK;
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* o[t, i] *= s[i] for t < n, i < H (a layer scale) */
static void scale_rows(float *o, int64_t n, int64_t H, const float *s) {
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < H; i++) o[t * H + i] *= s[i];
}

mxl_status mxl_siglip_stack_run(const mxl_siglip_stack *m, const mxl_encoder_batch *bt, int64_t max_len, mxl_threadpool *pool,
                                float *x, mxl_error *err) {
    int64_t n, longest;
    mxl_status st = mxl_encoder_batch_check(bt, max_len, &n, &longest, err);
    if (st) return st;
    int64_t H = m->hidden, I = m->ffn;
    int n_threads = pool ? mxl_threadpool_size(pool) : 1;
    const mxl_siglip_layer *L0 = &m->layers[0];
    size_t mm_bytes = max_sz(mxl_enc_linear_scratch_bytes(m->be, &L0->wq, n, n_threads),
                             max_sz(mxl_enc_linear_scratch_bytes(m->be, &L0->w1, n, n_threads), mxl_enc_linear_scratch_bytes(m->be, &L0->w2, n, n_threads)));
    size_t att_floats = mxl_enc_self_attention_scratch_floats(m->be, longest, (int)m->head_dim, n_threads);
    /* h [n, H] normed input; q, k, v, a, o [n, H]; f [n, I] */
    size_t fl = (size_t)(n * H) * 6 + (size_t)(n * I) + att_floats + mm_bytes / sizeof(float) + 64;
    float *buf = mxl_aligned_alloc(64, (fl * sizeof(float) + 63) / 64 * 64);
    int64_t *pos = mxl_calloc((size_t)n, sizeof *pos);
    if (!buf || !pos) {
        mxl_aligned_free(buf);
        mxl_free(pos);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    memset(buf, 0, fl * sizeof(float));
    float *h = buf, *q = h + n * H, *k = q + n * H, *v = k + n * H, *a = v + n * H, *o = a + n * H, *f = o + n * H;
    float *att_scratch = f + n * I;
    void *mm_scratch = (void *)(((uintptr_t)(att_scratch + att_floats) + 63) & ~(uintptr_t)63);
    for (int64_t s = 0; s < bt->n_seqs; s++)
        for (int64_t t = bt->seq_start[s]; t < bt->seq_start[s + 1]; t++) pos[t] = t - bt->seq_start[s];
    for (int64_t l = 0; l < m->n_layers; l++) {
        const mxl_siglip_layer *L = &m->layers[l];
        /* x += the previous layer's MLP output; h = LayerNorm1(x) */
        mxl_enc_add_layernorm(m->be, pool, x, l ? o : NULL, L->ln1_w, L->ln1_b, n, H, m->eps, h);
        mxl_enc_linear_act(m->be, &L->wq, L->bq, MXL_GEMM_ACT_NONE, h, n, q, mm_scratch, pool);
        mxl_enc_linear_act(m->be, &L->wk, L->bk, MXL_GEMM_ACT_NONE, h, n, k, mm_scratch, pool);
        mxl_enc_linear_act(m->be, &L->wv, L->bv, MXL_GEMM_ACT_NONE, h, n, v, mm_scratch, pool);
        mxl_enc_self_attention(m->be, bt, q, k, v, a, H, (int)m->n_heads, (int)m->head_dim, 1.0f / sqrtf((float)m->head_dim), pos,
                               att_scratch, pool);
        mxl_enc_linear_act(m->be, &L->wo, L->bo, MXL_GEMM_ACT_NONE, a, n, o, mm_scratch, pool);
        if (L->ls1) scale_rows(o, n, H, L->ls1);
        /* x += attention; h = LayerNorm2(x) */
        mxl_enc_add_layernorm(m->be, pool, x, o, L->ln2_w, L->ln2_b, n, H, m->eps, h);
        if (m->quick_gelu) {
            /* x * sigmoid(1.702 x) = silu(1.702 x) / 1.702 */
            mxl_enc_linear_act(m->be, &L->w1, L->b1, MXL_GEMM_ACT_NONE, h, n, f, mm_scratch, pool);
            for (int64_t i = 0; i < n * I; i++) f[i] *= 1.702f;
            mxl_enc_act(m->be, pool, MXL_ACT_SILU, f, n * I);
            for (int64_t i = 0; i < n * I; i++) f[i] *= 1.0f / 1.702f;
        } else {
            mxl_enc_linear_act(m->be, &L->w1, L->b1, (int)m->act, h, n, f, mm_scratch, pool);
        }
        mxl_enc_linear_act(m->be, &L->w2, L->b2, MXL_GEMM_ACT_NONE, f, n, o, mm_scratch, pool);
        if (L->ls2) scale_rows(o, n, H, L->ls2);
    }
    if (m->n_layers > 0)
        for (int64_t i = 0; i < n * H; i++) x[i] += o[i];
    mxl_aligned_free(buf);
    mxl_free(pos);
    return MXL_OK;
}

mxl_status mxl_siglip_text_load(const mxl_checkpoint *ck, mxl_siglip_text *m, mxl_error *err) {
    memset(m, 0, sizeof *m);
    mxl_arena_init(&m->arena, 64 * 1024);
    m->be = mxl_backend_host();
    const mxl_model_config *c = &ck->config;
    if (ck->format != MXL_CHECKPOINT_SAFETENSORS || strcmp(c->model_type, "siglip") != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: model_type '%s' is not a SigLIP safetensors checkpoint", ck->path, c->model_type);
    m->n_layers = c->num_hidden_layers;
    m->hidden = c->hidden_size;
    m->n_heads = c->num_attention_heads;
    m->ffn = c->intermediate_size;
    m->vocab = c->vocab_size;
    m->max_pos = c->max_position_embeddings > 0 ? c->max_position_embeddings : 64;
    m->eps = (float)(!isnan(c->layer_norm_eps) ? c->layer_norm_eps : 1e-6);
    if (m->n_layers <= 0 || m->hidden <= 0 || m->n_heads <= 0 || m->hidden % m->n_heads || m->ffn <= 0 ||
        m->vocab <= 0 || m->n_layers > 1024 || m->max_pos > (INT64_C(1) << 20))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: incomplete or implausible SigLIP text_config hyper-parameters", ck->path);
    m->head_dim = m->hidden / m->n_heads;
    mxl_status st = projection_size(ck, m->hidden, &m->proj, err);
    if (st) return st;
    if (mxl_enc_activation(c->hidden_act[0] ? c->hidden_act : "gelu_pytorch_tanh", ck->path, &m->act, err))
        return err ? err->status : MXL_ERR_UNSUPPORTED;

    static const char *const k_prefixes[] = {"text_model.", "", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "embeddings.token_embedding.weight");
    if (!prefix)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'text_model.embeddings.token_embedding.weight' is missing (the SigLIP text tower)", ck->path);
    mxl_enc_binder b = {ck, &m->arena, prefix, err};
    int64_t H = m->hidden, I = m->ffn;
    if (mxl_enc_matrix(&b, m->vocab, H, &m->tok_emb, "embeddings.token_embedding.weight") ||
        mxl_enc_vector(&b, m->max_pos * H, &m->pos_emb, "embeddings.position_embedding.weight") ||
        mxl_enc_vector(&b, H, &m->final_w, "final_layer_norm.weight") || mxl_enc_vector(&b, H, &m->final_b, "final_layer_norm.bias") ||
        mxl_enc_vector(&b, m->proj * H, &m->head_w, "head.weight") || mxl_enc_vector(&b, m->proj, &m->head_b, "head.bias"))
        return err ? err->status : MXL_ERR_FORMAT;
    mxl_siglip_stack stk = {m->n_layers, H, m->n_heads, m->head_dim, I, m->eps, m->act, m->be, NULL, false};
    if ((st = mxl_siglip_stack_bind(&b, &mxl_siglip_names_hf, &stk))) return st;
    m->layers = stk.layers;
    return MXL_OK;
}

void mxl_siglip_text_free(mxl_siglip_text *m) {
    mxl_arena_free(&m->arena);
    memset(m, 0, sizeof *m);
}

mxl_status mxl_siglip_text_forward_batch(const mxl_siglip_text *m, const mxl_encoder_batch *bt, mxl_threadpool *pool,
                                         float *x, mxl_error *err) {
    int64_t n, longest;
    mxl_status st = mxl_encoder_batch_check(bt, m->max_pos, &n, &longest, err);
    if (st) return st;
    int64_t H = m->hidden;
    if ((st = m->be->ops->embed(m->be, &m->tok_emb, bt->ids, n, 1.0f, x, err))) return st;
    for (int64_t s = 0; s < bt->n_seqs; s++)
        for (int64_t t = bt->seq_start[s]; t < bt->seq_start[s + 1]; t++) {
            const float *pe = m->pos_emb + (t - bt->seq_start[s]) * H;
            for (int64_t i = 0; i < H; i++) x[t * H + i] += pe[i];
        }
    const mxl_siglip_stack stk = {m->n_layers, H, m->n_heads, m->head_dim, m->ffn, m->eps, m->act, m->be, m->layers, false};
    if ((st = mxl_siglip_stack_run(&stk, bt, m->max_pos, pool, x, err))) return st;
    mxl_enc_add_layernorm(m->be, pool, x, NULL, m->final_w, m->final_b, n, H, m->eps, x);
    return MXL_OK;
}

void mxl_siglip_text_head(const mxl_siglip_text *m, const float *x, float *y) {
    for (int64_t o = 0; o < m->proj; o++) {
        const float *w = m->head_w + o * m->hidden;
        double acc = m->head_b[o];
        for (int64_t i = 0; i < m->hidden; i++) acc += (double)w[i] * x[i];
        y[o] = (float)acc;
    }
}
