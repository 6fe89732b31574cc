/* encoder_modernbert.c - ModernBERT encoder forward pass (see encoder_modernbert.h). */
#include "models/encoder_modernbert.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "io/json_read.h"

/* rope_parameters.<kind>.rope_theta (transformers 5 configs), else the legacy key, else dflt.
 * Only the default (unscaled) RoPE is known for ModernBERT checkpoints. */
static mxl_status rope_theta(const mxl_checkpoint *ck, const char *kind, const char *legacy, double dflt,
                             double *out, mxl_error *err) {
    json_t *rp = ck->config.raw ? json_object_get(ck->config.raw, "rope_parameters") : NULL;
    json_t *sub = rp && json_is_object(rp) ? json_object_get(rp, kind) : NULL;
    if (sub && json_is_object(sub)) {
        json_t *type = json_object_get(sub, "rope_type");
        if (type && !(json_is_string(type) && strcmp(json_string_value(type), "default") == 0))
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/config.json: rope_parameters.%s.rope_type must be 'default' for ModernBERT", ck->dir, kind);
        json_t *th = json_object_get(sub, "rope_theta");
        if (th) {
            if (!mxl_json_number(th, out) || !(*out > 0) || !isfinite(*out))
                return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: rope_parameters.%s.rope_theta must be a positive number", ck->dir, kind);
            return MXL_OK;
        }
    }
    if (mxl_enc_cfg_double(ck, legacy, dflt, out, err)) return err ? err->status : MXL_ERR_FORMAT;
    if (!(*out > 0)) return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: '%s' must be positive", ck->dir, legacy);
    return MXL_OK;
}

/* Per-layer attention kind: layer_types when listed, else every Nth layer global. */
static mxl_status layer_kinds(const mxl_checkpoint *ck, mxl_modernbert *m, mxl_error *err) {
    json_t *lt = ck->config.raw ? json_object_get(ck->config.raw, "layer_types") : NULL;
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || (int64_t)json_array_size(lt) != m->n_layers)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: 'layer_types' must list %lld layer types", ck->dir, (long long)m->n_layers);
        for (int64_t i = 0; i < m->n_layers; i++) {
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (s && strcmp(s, "full_attention") == 0) m->layers[i].local = false;
            else if (s && strcmp(s, "sliding_attention") == 0) m->layers[i].local = true;
            else return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: layer_types[%lld] must be full_attention or sliding_attention", ck->dir, (long long)i);
        }
        return MXL_OK;
    }
    int64_t every;
    if (mxl_enc_cfg_int(ck, "global_attn_every_n_layers", 3, &every, err)) return err ? err->status : MXL_ERR_FORMAT;
    if (every <= 0) return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: 'global_attn_every_n_layers' must be positive", ck->dir);
    for (int64_t i = 0; i < m->n_layers; i++) m->layers[i].local = i % every != 0;
    return MXL_OK;
}

static void rope_init(mxl_rope_cfg *c, int64_t head_dim, double theta) {
    memset(c, 0, sizeof *c);
    c->head_dim = (int)head_dim;
    c->rotary_dim = (int)head_dim;
    c->theta = theta;
    c->style = MXL_ROPE_NEOX;
    c->scaling = MXL_ROPE_SCALING_NONE;
}

mxl_status mxl_modernbert_load(const mxl_checkpoint *ck, mxl_modernbert *m, mxl_error *err) {
    memset(m, 0, sizeof *m);
    mxl_arena_init(&m->arena, 64 * 1024);
    m->be = mxl_backend_host();
    const mxl_model_config *c = &ck->config;
    if (ck->format != MXL_CHECKPOINT_SAFETENSORS || strcmp(c->model_type, "modernbert") != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: model_type '%s' is not a ModernBERT safetensors checkpoint", ck->path, c->model_type);
    m->n_layers = c->num_hidden_layers;
    m->hidden = c->hidden_size;
    m->n_heads = c->num_attention_heads;
    m->ffn = c->intermediate_size;
    m->vocab = c->vocab_size;
    m->max_pos = c->max_position_embeddings > 0 ? c->max_position_embeddings : 8192;
    m->eps = (float)(!isnan(c->layer_norm_eps) ? c->layer_norm_eps : 1e-5);
    if (m->n_layers <= 0 || m->hidden <= 0 || m->n_heads <= 0 || m->hidden % m->n_heads || m->ffn <= 0 ||
        m->vocab <= 0 || m->n_layers > 1024 || (m->hidden / m->n_heads) % 2)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: incomplete or implausible ModernBERT hyper-parameters", ck->path);
    m->head_dim = m->hidden / m->n_heads;
    bool attn_bias, mlp_bias;
    int64_t local_attention = 0, sliding = 0;
    double theta_g, theta_l;
    if (mxl_enc_cfg_bool(ck, "norm_bias", false, &m->norm_bias, err) ||
        mxl_enc_cfg_bool(ck, "attention_bias", false, &attn_bias, err) ||
        mxl_enc_cfg_bool(ck, "mlp_bias", false, &mlp_bias, err) ||
        mxl_enc_cfg_int(ck, "local_attention", 0, &local_attention, err) ||
        mxl_enc_cfg_int(ck, "sliding_window", 0, &sliding, err) ||
        rope_theta(ck, "full_attention", "global_rope_theta", 160000.0, &theta_g, err) ||
        rope_theta(ck, "sliding_attention", "local_rope_theta", 10000.0, &theta_l, err))
        return err ? err->status : MXL_ERR_FORMAT;
    /* local_attention is the whole window; transformers' sliding_window is its half */
    m->half_window = local_attention > 0 ? local_attention / 2 : sliding > 0 ? sliding : 64;
    if (mxl_enc_activation(c->hidden_act[0] ? c->hidden_act : "gelu", ck->path, &m->act, err)) return err ? err->status : MXL_ERR_UNSUPPORTED;
    rope_init(&m->rope_global, m->head_dim, theta_g);
    rope_init(&m->rope_local, m->head_dim, theta_l);
    m->inv_freq_global = mxl_arena_alloc(&m->arena, (size_t)m->head_dim / 2 * sizeof(float), 64);
    m->inv_freq_local = mxl_arena_alloc(&m->arena, (size_t)m->head_dim / 2 * sizeof(float), 64);
    m->layers = mxl_arena_alloc(&m->arena, (size_t)m->n_layers * sizeof *m->layers, 64);
    if (!m->inv_freq_global || !m->inv_freq_local || !m->layers) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    memset(m->layers, 0, (size_t)m->n_layers * sizeof *m->layers);
    float af;
    mxl_rope_freqs(&m->rope_global, m->max_pos, m->inv_freq_global, &af);
    mxl_rope_freqs(&m->rope_local, m->max_pos, m->inv_freq_local, &af);
    mxl_status st = layer_kinds(ck, m, err);
    if (st) return st;

    static const char *const k_prefixes[] = {"", "model.", NULL};
    m->prefix = mxl_enc_find_prefix(ck, k_prefixes, "embeddings.tok_embeddings.weight");
    if (!m->prefix)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'embeddings.tok_embeddings.weight' is missing (also under model.)", ck->path);
    mxl_enc_binder b = {ck, &m->arena, m->prefix, err};
    int64_t H = m->hidden, I = m->ffn;
    bool nb = m->norm_bias;
    if (mxl_enc_matrix(&b, m->vocab, H, &m->tok_emb, "embeddings.tok_embeddings.weight") ||
        mxl_enc_vector(&b, H, &m->emb_norm_w, "embeddings.norm.weight") ||
        (nb && mxl_enc_vector(&b, H, &m->emb_norm_b, "embeddings.norm.bias")) ||
        mxl_enc_vector(&b, H, &m->final_norm_w, "final_norm.weight") ||
        (nb && mxl_enc_vector(&b, H, &m->final_norm_b, "final_norm.bias")))
        return err ? err->status : MXL_ERR_FORMAT;
    for (int64_t i = 0; i < m->n_layers; i++) {
        mxl_modernbert_layer *L = &m->layers[i];
        long long l = (long long)i;
        if ((i > 0 && mxl_enc_vector(&b, H, &L->attn_norm_w, "layers.%lld.attn_norm.weight", l)) ||
            (i > 0 && nb && mxl_enc_vector(&b, H, &L->attn_norm_b, "layers.%lld.attn_norm.bias", l)) ||
            mxl_enc_matrix(&b, 3 * H, H, &L->wqkv, "layers.%lld.attn.Wqkv.weight", l) ||
            (attn_bias && mxl_enc_vector(&b, 3 * H, &L->bqkv, "layers.%lld.attn.Wqkv.bias", l)) ||
            mxl_enc_matrix(&b, H, H, &L->wo, "layers.%lld.attn.Wo.weight", l) ||
            (attn_bias && mxl_enc_vector(&b, H, &L->bo, "layers.%lld.attn.Wo.bias", l)) ||
            mxl_enc_vector(&b, H, &L->mlp_norm_w, "layers.%lld.mlp_norm.weight", l) ||
            (nb && mxl_enc_vector(&b, H, &L->mlp_norm_b, "layers.%lld.mlp_norm.bias", l)) ||
            mxl_enc_matrix(&b, 2 * I, H, &L->wi, "layers.%lld.mlp.Wi.weight", l) ||
            (mlp_bias && mxl_enc_vector(&b, 2 * I, &L->bi, "layers.%lld.mlp.Wi.bias", l)) ||
            mxl_enc_matrix(&b, H, I, &L->wo2, "layers.%lld.mlp.Wo.weight", l) ||
            (mlp_bias && mxl_enc_vector(&b, H, &L->bo2, "layers.%lld.mlp.Wo.bias", l)))
            return err ? err->status : MXL_ERR_FORMAT;
    }
    return MXL_OK;
}

void mxl_modernbert_free(mxl_modernbert *m) {
    mxl_arena_free(&m->arena);
    memset(m, 0, sizeof *m);
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

mxl_status mxl_modernbert_forward_batch(const mxl_modernbert *m, const mxl_encoder_batch *bt,
                                        mxl_threadpool *pool, float *x, mxl_error *err) {
    int64_t n, longest;
    mxl_status st = mxl_encoder_batch_check(bt, m->max_pos, &n, &longest, err);
    if (st) return st;
    int64_t H = m->hidden, I = m->ffn, hd = m->head_dim, nh = m->n_heads;
    int n_threads = pool ? mxl_threadpool_size(pool) : 1;
    const mxl_modernbert_layer *L0 = &m->layers[0];
    size_t mm_bytes = max_sz(m->be->ops->matmul_scratch_bytes(m->be, &L0->wqkv, n),
                             m->be->ops->matmul_scratch_bytes(m->be, &L0->wo2, n));
    size_t att_floats = m->be->ops->attention_scratch_floats(m->be, longest, n_threads);
    /* h [n, H] normed input; qkv [n, 3H]; q, k, v [n, H] each; a [n, H]; o [n, H]; g [n, 2I];
     * gl [n, I] */
    size_t fl = (size_t)(n * H) * 9 + (size_t)(n * 3 * I) + att_floats + mm_bytes / sizeof(float) + 64;
    float *buf = mxl_calloc(fl, sizeof(float));
    int64_t *pos = mxl_calloc((size_t)n * 2, sizeof *pos);
    st = buf && pos ? m->be->ops->embed(m->be, &m->tok_emb, bt->ids, n, 1.0f, x, err) : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    if (st) {
        mxl_free(buf);
        mxl_free(pos);
        return st;
    }
    float *h = buf, *qkv = h + n * H, *q = qkv + n * 3 * H, *k = q + n * H, *v = k + n * H, *a = v + n * H;
    float *o = a + n * H, *g = o + n * H, *gl = g + n * 2 * I, *att_scratch = gl + n * I;
    void *mm_scratch = att_scratch + att_floats;
    /* pos: index within the sequence (RoPE, global mask); lpos = pos + half_window: with a causal
     * mask and a window of 2*half_window+1 the kernel then shows keys [i - w, i + w], the
     * bidirectional band ModernBERT's local layers attend to. */
    int64_t *lpos = pos + n;
    for (int64_t s = 0; s < bt->n_seqs; s++)
        for (int64_t t = bt->seq_start[s]; t < bt->seq_start[s + 1]; t++) {
            pos[t] = t - bt->seq_start[s];
            lpos[t] = pos[t] + m->half_window;
        }
    mxl_enc_add_layernorm(m->be, pool, x, NULL, m->emb_norm_w, m->emb_norm_b, n, H, m->eps, x);
    for (int64_t l = 0; l < m->n_layers; l++) {
        const mxl_modernbert_layer *L = &m->layers[l];
        if (L->attn_norm_w) mxl_enc_add_layernorm(m->be, pool, x, NULL, L->attn_norm_w, L->attn_norm_b, n, H, m->eps, h);
        else memcpy(h, x, (size_t)(n * H) * sizeof(float));
        mxl_enc_linear(m->be, &L->wqkv, L->bqkv, h, n, qkv, mm_scratch, pool);
        const mxl_rope_cfg *rc = L->local ? &m->rope_local : &m->rope_global;
        const float *inv = L->local ? m->inv_freq_local : m->inv_freq_global;
        float cs[rc->rotary_dim > 0 ? rc->rotary_dim : 1]; /* a position's cosines and sines */
        for (int64_t t = 0; t < n; t++) {
            memcpy(q + t * H, qkv + t * 3 * H, (size_t)H * sizeof(float));
            memcpy(k + t * H, qkv + t * 3 * H + H, (size_t)H * sizeof(float));
            memcpy(v + t * H, qkv + t * 3 * H + 2 * H, (size_t)H * sizeof(float));
            m->be->ops->rope_table(m->be, rc, inv, 1.0f, pos[t], cs);
            m->be->ops->rope_apply_table(m->be, rc, cs, q + t * H, (int)nh);
            m->be->ops->rope_apply_table(m->be, rc, cs, k + t * H, (int)nh);
        }
        mxl_attn_params ap = {(int)nh, (int)nh, (int)hd, 1.0f / sqrtf((float)hd), 0.0f, NULL, 0, 0, 0, 0, NULL};
        if (L->local) {
            ap.causal = 1;
            ap.window = 2 * m->half_window + 1;
        }
        for (int64_t s = 0; s < bt->n_seqs; s++) {
            int64_t t0 = bt->seq_start[s], len = bt->seq_start[s + 1] - t0;
            mxl_kv_view kv = {MXL_DTYPE_F32, k + t0 * H, v + t0 * H, len, H};
            m->be->ops->attention(m->be, &ap, q + t0 * H, len, (L->local ? lpos : pos) + t0, &kv, a + t0 * H, att_scratch, pool);
        }
        mxl_enc_linear(m->be, &L->wo, L->bo, a, n, o, mm_scratch, pool);
        /* x += attention; h = mlp_norm(x) */
        mxl_enc_add_layernorm(m->be, pool, x, o, L->mlp_norm_w, L->mlp_norm_b, n, H, m->eps, h);
        mxl_enc_linear(m->be, &L->wi, L->bi, h, n, g, mm_scratch, pool);
        /* GeGLU: the first I outputs go through the activation, the second I gate them */
        mxl_enc_glu(m->be, pool, m->act, g, n, I, gl);
        mxl_enc_linear(m->be, &L->wo2, L->bo2, gl, n, o, mm_scratch, pool);
        for (int64_t i = 0; i < n * H; i++) x[i] += o[i];
    }
    mxl_enc_add_layernorm(m->be, pool, x, NULL, m->final_norm_w, m->final_norm_b, n, H, m->eps, x);
    mxl_free(buf);
    mxl_free(pos);
    return MXL_OK;
}
