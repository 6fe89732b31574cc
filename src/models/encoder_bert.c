/* encoder_bert.c - BERT / XLM-RoBERTa encoder forward pass (see encoder_bert.h). */
#include "models/encoder_bert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

mxl_status mxl_bert_load(const mxl_checkpoint *ck, mxl_bert *m, mxl_error *err) {
    memset(m, 0, sizeof *m);
    mxl_arena_init(&m->arena, 64 * 1024);
    m->be = mxl_backend_host();
    const mxl_model_config *c = &ck->config;
    if (ck->format != MXL_CHECKPOINT_SAFETENSORS)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: BERT-family encoders load from safetensors checkpoints", ck->path);
    if (strcmp(c->model_type, "bert") == 0) m->kind = MXL_BERT_KIND_BERT;
    else if (strcmp(c->model_type, "xlm-roberta") == 0) m->kind = MXL_BERT_KIND_XLM_ROBERTA;
    else return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: model_type '%s' is not a BERT / XLM-RoBERTa checkpoint", ck->path, c->model_type);
    bool xlmr = m->kind == MXL_BERT_KIND_XLM_ROBERTA;
    m->n_layers = c->num_hidden_layers;
    m->hidden = c->hidden_size;
    m->n_heads = c->num_attention_heads;
    m->ffn = c->intermediate_size;
    m->vocab = c->vocab_size;
    m->max_pos = c->max_position_embeddings;
    m->n_types = c->type_vocab_size > 0 ? c->type_vocab_size : (xlmr ? 1 : 2);
    m->ln_eps = (float)(!isnan(c->layer_norm_eps) ? c->layer_norm_eps : (xlmr ? 1e-5 : 1e-12));
    if (m->n_layers <= 0 || m->hidden <= 0 || m->n_heads <= 0 || m->hidden % m->n_heads || m->ffn <= 0 ||
        m->vocab <= 0 || m->max_pos <= 0 || m->n_layers > 1024 || m->n_types > 1024)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: incomplete or implausible %s hyper-parameters", ck->path, c->model_type);
    m->head_dim = m->hidden / m->n_heads;
    int64_t pad = 1;
    if (mxl_enc_cfg_int(ck, "pad_token_id", xlmr ? 1 : 0, &pad, err)) return err ? err->status : MXL_ERR_FORMAT;
    m->pad_id = (int32_t)pad;
    if (xlmr) {
        if (pad < 0 || pad + 2 > m->max_pos)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: pad_token_id %lld leaves no positions of %lld", ck->path, (long long)pad, (long long)m->max_pos);
        m->max_tokens = m->max_pos - pad - 1;
    } else {
        m->max_tokens = m->max_pos;
    }
    if (mxl_enc_activation(c->hidden_act[0] ? c->hidden_act : "gelu", ck->path, &m->act, err)) return err ? err->status : MXL_ERR_UNSUPPORTED;
    /* relative position variants add attention terms this encoder does not compute */
    const char *pet;
    if (mxl_enc_cfg_string(ck, "position_embedding_type", "absolute", &pet, err)) return err ? err->status : MXL_ERR_FORMAT;
    if (strcmp(pet, "absolute") != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/config.json: position_embedding_type '%s' is not supported (absolute only)", ck->dir, pet);

    static const char *const k_prefixes[] = {"", "bert.", "roberta.", NULL};
    m->prefix = mxl_enc_find_prefix(ck, k_prefixes, "embeddings.word_embeddings.weight");
    if (!m->prefix)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'embeddings.word_embeddings.weight' is missing (also under bert. / roberta.)", ck->path);
    mxl_enc_binder b = {ck, &m->arena, m->prefix, err};
    int64_t H = m->hidden;
    if (mxl_enc_matrix(&b, m->vocab, H, &m->word_emb, "embeddings.word_embeddings.weight") ||
        mxl_enc_vector(&b, m->max_pos * H, &m->pos_emb, "embeddings.position_embeddings.weight") ||
        mxl_enc_vector(&b, m->n_types * H, &m->type_emb, "embeddings.token_type_embeddings.weight") ||
        mxl_enc_vector(&b, H, &m->emb_ln_w, "embeddings.LayerNorm.weight") ||
        mxl_enc_vector(&b, H, &m->emb_ln_b, "embeddings.LayerNorm.bias"))
        return err ? err->status : MXL_ERR_FORMAT;
    m->layers = mxl_arena_alloc(&m->arena, (size_t)m->n_layers * sizeof *m->layers, 64);
    if (!m->layers) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < m->n_layers; i++) {
        mxl_bert_layer *L = &m->layers[i];
        long long l = (long long)i;
        if (mxl_enc_matrix(&b, H, H, &L->wq, "encoder.layer.%lld.attention.self.query.weight", l) ||
            mxl_enc_vector(&b, H, &L->bq, "encoder.layer.%lld.attention.self.query.bias", l) ||
            mxl_enc_matrix(&b, H, H, &L->wk, "encoder.layer.%lld.attention.self.key.weight", l) ||
            mxl_enc_vector(&b, H, &L->bk, "encoder.layer.%lld.attention.self.key.bias", l) ||
            mxl_enc_matrix(&b, H, H, &L->wv, "encoder.layer.%lld.attention.self.value.weight", l) ||
            mxl_enc_vector(&b, H, &L->bv, "encoder.layer.%lld.attention.self.value.bias", l) ||
            mxl_enc_matrix(&b, H, H, &L->wo, "encoder.layer.%lld.attention.output.dense.weight", l) ||
            mxl_enc_vector(&b, H, &L->bo, "encoder.layer.%lld.attention.output.dense.bias", l) ||
            mxl_enc_vector(&b, H, &L->ln1_w, "encoder.layer.%lld.attention.output.LayerNorm.weight", l) ||
            mxl_enc_vector(&b, H, &L->ln1_b, "encoder.layer.%lld.attention.output.LayerNorm.bias", l) ||
            mxl_enc_matrix(&b, m->ffn, H, &L->wi, "encoder.layer.%lld.intermediate.dense.weight", l) ||
            mxl_enc_vector(&b, m->ffn, &L->bi, "encoder.layer.%lld.intermediate.dense.bias", l) ||
            mxl_enc_matrix(&b, H, m->ffn, &L->wo2, "encoder.layer.%lld.output.dense.weight", l) ||
            mxl_enc_vector(&b, H, &L->bo2, "encoder.layer.%lld.output.dense.bias", l) ||
            mxl_enc_vector(&b, H, &L->ln2_w, "encoder.layer.%lld.output.LayerNorm.weight", l) ||
            mxl_enc_vector(&b, H, &L->ln2_b, "encoder.layer.%lld.output.LayerNorm.bias", l))
            return err ? err->status : MXL_ERR_FORMAT;
        /* the backend's GEMM layout (the CPU's AMX tiles where it has them) */
        mxl_weight *mats[6] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wi, &L->wo2};
        for (int j = 0; j < 6; j++)
            if (m->be->ops->weight_prepare(m->be, mats[j], MXL_WEIGHT_USE_GEMM, &m->arena, err))
                return err ? err->status : MXL_ERR_NOMEM;
    }
    return MXL_OK;
}

void mxl_bert_free(mxl_bert *m) {
    mxl_arena_free(&m->arena);
    memset(m, 0, sizeof *m);
}

mxl_status mxl_bert_forward(const mxl_bert *m, const int32_t *ids, int64_t n, mxl_threadpool *pool,
                            float *x, mxl_error *err) {
    int64_t starts[2] = {0, n};
    mxl_encoder_batch b = {ids, NULL, starts, 1};
    return mxl_bert_forward_batch(m, &b, pool, x, err);
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

mxl_status mxl_bert_forward_batch(const mxl_bert *m, const mxl_encoder_batch *bt, mxl_threadpool *pool,
                                  float *x, mxl_error *err) {
    int64_t n, longest;
    mxl_status st = mxl_encoder_batch_check(bt, m->max_tokens, &n, &longest, err);
    if (st) return st;
    if (bt->type_ids)
        for (int64_t t = 0; t < n; t++)
            if (bt->type_ids[t] < 0 || bt->type_ids[t] >= m->n_types)
                return mxl_error_set(err, MXL_ERR_ARG, "token type %d is outside the encoder's %lld types", bt->type_ids[t], (long long)m->n_types);
    int64_t H = m->hidden;
    int n_threads = pool ? mxl_threadpool_size(pool) : 1;
    const mxl_bert_layer *L0 = &m->layers[0];
    size_t mm_bytes = max_sz(mxl_enc_linear_scratch_bytes(m->be, &L0->wq, n, n_threads),
                             max_sz(mxl_enc_linear_scratch_bytes(m->be, &L0->wi, n, n_threads), mxl_enc_linear_scratch_bytes(m->be, &L0->wo2, n, n_threads)));
    size_t att_floats = mxl_enc_self_attention_scratch_floats(m->be, longest, (int)m->head_dim, n_threads);
    size_t fl = (size_t)(n * H) * 5 + (size_t)(n * m->ffn) + att_floats + mm_bytes / sizeof(float) + 64;
    float *buf = mxl_aligned_alloc(64, (fl * sizeof(float) + 63) / 64 * 64);
    int64_t *pos = mxl_calloc((size_t)n, sizeof *pos);
    st = buf && pos ? m->be->ops->embed(m->be, &m->word_emb, bt->ids, n, 1.0f, x, err) : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    if (st) {
        mxl_aligned_free(buf);
        mxl_free(pos);
        return st;
    }
    if (buf) memset(buf, 0, fl * sizeof(float));
    float *q = buf, *k = q + n * H, *v = k + n * H, *a = v + n * H, *o = a + n * H, *h = o + n * H;
    float *att_scratch = h + n * m->ffn;
    void *mm_scratch = (void *)(((uintptr_t)(att_scratch + att_floats) + 63) & ~(uintptr_t)63);
    /* embeddings; pos[] then holds each token's index within its sequence for attention */
    for (int64_t s = 0; s < bt->n_seqs; s++) {
        int64_t nonpad = 0;
        for (int64_t t = bt->seq_start[s]; t < bt->seq_start[s + 1]; t++) {
            int64_t p = t - bt->seq_start[s];
            if (m->kind == MXL_BERT_KIND_XLM_ROBERTA) {
                bool is_pad = bt->ids[t] == m->pad_id;
                nonpad += !is_pad;
                p = is_pad ? m->pad_id : m->pad_id + nonpad;
            }
            const float *pe = m->pos_emb + p * H;
            const float *te = m->type_emb + (bt->type_ids ? bt->type_ids[t] : 0) * H;
            for (int64_t i = 0; i < H; i++) x[t * H + i] += pe[i] + te[i];
            m->be->ops->layernorm(m->be, x + t * H, m->emb_ln_w, m->emb_ln_b, H, m->ln_eps, x + t * H);
            pos[t] = t - bt->seq_start[s];
        }
    }
    for (int64_t l = 0; l < m->n_layers; l++) {
        const mxl_bert_layer *L = &m->layers[l];
        mxl_enc_linear_act(m->be, &L->wq, L->bq, MXL_GEMM_ACT_NONE, x, n, q, mm_scratch, pool);
        mxl_enc_linear_act(m->be, &L->wk, L->bk, MXL_GEMM_ACT_NONE, x, n, k, mm_scratch, pool);
        mxl_enc_linear_act(m->be, &L->wv, L->bv, MXL_GEMM_ACT_NONE, x, n, v, mm_scratch, pool);
        mxl_enc_self_attention(m->be, bt, q, k, v, a, H, (int)m->n_heads, (int)m->head_dim, 1.0f / sqrtf((float)m->head_dim), pos,
                          att_scratch, pool);
        mxl_enc_linear_act(m->be, &L->wo, L->bo, MXL_GEMM_ACT_NONE, a, n, o, mm_scratch, pool);
        mxl_enc_add_layernorm(m->be, pool, x, o, L->ln1_w, L->ln1_b, n, H, m->ln_eps, x);
        mxl_enc_linear_act(m->be, &L->wi, L->bi, (int)m->act, x, n, h, mm_scratch, pool);
        mxl_enc_linear_act(m->be, &L->wo2, L->bo2, MXL_GEMM_ACT_NONE, h, n, o, mm_scratch, pool);
        mxl_enc_add_layernorm(m->be, pool, x, o, L->ln2_w, L->ln2_b, n, H, m->ln_eps, x);
    }
    mxl_aligned_free(buf);
    mxl_free(pos);
    return MXL_OK;
}
