/* decoder.c - shared decoder-only transformer forward pass and GGUF weight binding (decoder.h).
 *
 * Reference for the math: Hugging Face transformers' modeling_llama.py / modeling_gemma3.py.
 * GGUF facts (llama.cpp's convert_hf_to_gguf.py / llama-arch.cpp):
 *  - tensor names blk.N.attn_q.weight, ... as bound below;
 *  - Llama-family Q/K rows are permuted at conversion so that ggml's "normal" RoPE, which rotates
 *    adjacent pairs (2i, 2i+1), reproduces HF's rotate_half: so GGUF llama uses GPT-J style here,
 *    while Gemma (converted unpermuted, ggml NEOX mode) keeps the NEOX style;
 *  - Gemma norm weights are stored as 1 + w, so the (1 + w) form is not applied again. */
#include "models/decoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/attention.h"
#include "backends/cpu/embed_topk.h"
#include "backends/cpu/norm.h"
#include "backends/cpu/softmax.h"
#include "models/weights.h"

/* ---- weight binding ---- */

static mxl_status bind_matrix(const mxl_checkpoint *ck, const char *name, int64_t rows, int64_t cols,
                              bool optional, mxl_cpu_weight *w, mxl_error *err) {
    memset(w, 0, sizeof *w);
    const mxl_gguf_tensor_info *ti = mxl_gguf_find_tensor(ck->gguf, name);
    if (!ti) {
        if (optional) return MXL_OK;
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor '%s' is missing", ck->path, name);
    }
    mxl_status st = mxl_weights_matrix(&ti->tensor, name, rows, cols, w, err);
    if (st) mxl_error_prefix(err, "%s: ", ck->path);
    return st;
}

/* A norm vector as f32 (GGUF stores norms in F32; other float types are converted once). */
static mxl_status bind_vector(mxl_decoder *d, const mxl_checkpoint *ck, const char *name, int64_t n,
                              bool optional, const float **out, mxl_error *err) {
    *out = NULL;
    const mxl_gguf_tensor_info *ti = mxl_gguf_find_tensor(ck->gguf, name);
    if (!ti) {
        if (optional) return MXL_OK;
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor '%s' is missing", ck->path, name);
    }
    mxl_status st = mxl_weights_vector_f32(&d->arena, &ti->tensor, name, n, out, err);
    if (st) mxl_error_prefix(err, "%s: ", ck->path);
    return st;
}

/* ---- family hyper-parameters ---- */

static void rope_defaults(mxl_rope_cfg *r, int64_t head_dim, double theta, mxl_rope_style style) {
    memset(r, 0, sizeof *r);
    r->head_dim = (int)head_dim;
    r->rotary_dim = (int)head_dim;
    r->theta = theta;
    r->style = style;
    r->scaling = MXL_ROPE_SCALING_NONE;
    r->factor = 1.0;
}

static mxl_status family_hparams(const mxl_checkpoint *ck, mxl_decoder_hparams *hp, mxl_error *err) {
    const mxl_model_config *c = &ck->config;
    memset(hp, 0, sizeof *hp);
    hp->n_layers = c->num_hidden_layers;
    hp->hidden = c->hidden_size;
    hp->n_heads = c->num_attention_heads;
    hp->n_kv_heads = c->num_key_value_heads;
    hp->head_dim = c->head_dim;
    hp->ffn = c->intermediate_size;
    hp->vocab = c->vocab_size;
    hp->max_ctx = c->max_position_embeddings;
    hp->embed_scale = 1.0f;
    if (hp->n_layers <= 0 || hp->hidden <= 0 || hp->n_heads <= 0 || hp->n_kv_heads <= 0 ||
        hp->head_dim <= 0 || hp->ffn <= 0 || hp->vocab <= 0 || hp->n_heads % hp->n_kv_heads != 0)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: incomplete or inconsistent hyper-parameters", ck->path);
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    double eps = !isnan(c->rms_norm_eps) ? c->rms_norm_eps : 1e-6;
    hp->norm_eps = (float)eps;
    double theta = !isnan(c->rope_theta) ? c->rope_theta : 10000.0;

    char scaling[64] = "";
    char key[128];
    const mxl_gguf_kv *arch = mxl_gguf_find(ck->gguf, "general.architecture");
    if (arch) {
        char a[64];
        if (mxl_gguf_value_copy_str(&arch->value, a, sizeof a)) {
            snprintf(key, sizeof key, "%s.rope.scaling.type", a);
            const mxl_gguf_kv *kv = mxl_gguf_find(ck->gguf, key);
            if (kv) mxl_gguf_value_copy_str(&kv->value, scaling, sizeof scaling);
        }
    }
    if (scaling[0] && strcmp(scaling, "none") != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: RoPE scaling '%s' is not supported for GGUF checkpoints yet", ck->path, scaling);

    if (strcmp(c->model_type, "llama") == 0 || strcmp(c->model_type, "mistral") == 0) {
        hp->act = MXL_ACT_SILU;
        rope_defaults(&hp->rope, hp->head_dim, theta, MXL_ROPE_GPTJ); /* GGUF Q/K permutation */
        if (!isnan(c->partial_rotary_factor) && c->partial_rotary_factor > 0 && c->partial_rotary_factor < 1)
            hp->rope.rotary_dim = (int)(hp->head_dim * c->partial_rotary_factor) & ~1;
        hp->rope_local = hp->rope;
        return MXL_OK;
    }
    if (strcmp(c->model_type, "gemma3_text") == 0) {
        hp->act = MXL_ACT_GELU_TANH;
        hp->qk_norm = true;
        hp->post_norms = true;
        hp->norm_plus_one = false; /* GGUF stores 1 + w */
        hp->embed_scale = sqrtf((float)hp->hidden);
        rope_defaults(&hp->rope, hp->head_dim, theta, MXL_ROPE_NEOX);
        double local = !isnan(c->rope_local_base_freq) ? c->rope_local_base_freq : 10000.0;
        rope_defaults(&hp->rope_local, hp->head_dim, local, MXL_ROPE_NEOX);
        hp->sliding_window = c->sliding_window > 0 ? c->sliding_window : 0;
        hp->layer_is_sliding = c->n_layer_types == hp->n_layers ? c->layer_is_sliding : NULL;
        return MXL_OK;
    }
    return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: model_type '%s' cannot run yet (this build runs GGUF llama and gemma3 text models); see 'mlxcel arch'", ck->path, c->model_type);
}

mxl_status mxl_decoder_load(const mxl_checkpoint *ck, mxl_decoder *d, mxl_error *err) {
    memset(d, 0, sizeof *d);
    mxl_arena_init(&d->arena, 64 * 1024);
    const char *mt = ck->config.model_type;
    if (strcmp(mt, "llama") != 0 && strcmp(mt, "mistral") != 0 && strcmp(mt, "gemma3_text") != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: model_type '%s' cannot run yet (this build runs GGUF llama and gemma3 text models); see 'mlxcel arch'", ck->path, mt);
    if (ck->format != MXL_CHECKPOINT_GGUF)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: model_type '%s' runs only from GGUF checkpoints in this build", ck->path, mt);
    mxl_status st = family_hparams(ck, &d->hp, err);
    if (st) return st;
    const mxl_decoder_hparams *hp = &d->hp;
    int64_t qd = hp->n_heads * hp->head_dim, kvd = hp->n_kv_heads * hp->head_dim;
    if ((st = bind_matrix(ck, "token_embd.weight", hp->vocab, hp->hidden, false, &d->tok_embd, err))) return st;
    if ((st = bind_matrix(ck, "output.weight", hp->vocab, hp->hidden, true, &d->output, err))) return st;
    if (!d->output.data) d->output = d->tok_embd; /* tied LM head */
    if ((st = bind_vector(d, ck, "output_norm.weight", hp->hidden, false, &d->output_norm, err))) return st;
    d->layers = mxl_arena_alloc(&d->arena, (size_t)hp->n_layers * sizeof *d->layers, 64);
    if (!d->layers) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < hp->n_layers; i++) {
        mxl_decoder_layer *L = &d->layers[i];
        char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%lld." s, (long long)i), n)
        if ((st = bind_matrix(ck, NAME("attn_q.weight"), qd, hp->hidden, false, &L->wq, err)) ||
            (st = bind_matrix(ck, NAME("attn_k.weight"), kvd, hp->hidden, false, &L->wk, err)) ||
            (st = bind_matrix(ck, NAME("attn_v.weight"), kvd, hp->hidden, false, &L->wv, err)) ||
            (st = bind_matrix(ck, NAME("attn_output.weight"), hp->hidden, qd, false, &L->wo, err)) ||
            (st = bind_matrix(ck, NAME("ffn_gate.weight"), hp->ffn, hp->hidden, false, &L->w_gate, err)) ||
            (st = bind_matrix(ck, NAME("ffn_up.weight"), hp->ffn, hp->hidden, false, &L->w_up, err)) ||
            (st = bind_matrix(ck, NAME("ffn_down.weight"), hp->hidden, hp->ffn, false, &L->w_down, err)) ||
            (st = bind_vector(d, ck, NAME("attn_norm.weight"), hp->hidden, false, &L->attn_norm, err)) ||
            (st = bind_vector(d, ck, NAME("ffn_norm.weight"), hp->hidden, false, &L->ffn_norm, err)) ||
            (st = bind_vector(d, ck, NAME("post_attention_norm.weight"), hp->hidden, !hp->post_norms, &L->post_attn_norm, err)) ||
            (st = bind_vector(d, ck, NAME("post_ffw_norm.weight"), hp->hidden, !hp->post_norms, &L->post_ffn_norm, err)) ||
            (st = bind_vector(d, ck, NAME("attn_q_norm.weight"), hp->head_dim, !hp->qk_norm, &L->q_norm, err)) ||
            (st = bind_vector(d, ck, NAME("attn_k_norm.weight"), hp->head_dim, !hp->qk_norm, &L->k_norm, err)))
            return st;
#undef NAME
        L->sliding = hp->sliding_window > 0 && hp->layer_is_sliding && hp->layer_is_sliding[i];
    }
    return MXL_OK;
}

void mxl_decoder_free(mxl_decoder *d) {
    mxl_arena_free(&d->arena);
    memset(d, 0, sizeof *d);
}

/* ---- state ---- */

struct mxl_decoder_state {
    int64_t max_ctx, max_batch, pos;
    mxl_threadpool *pool;
    int n_threads;
    float *k_cache, *v_cache; /* [n_layers, max_ctx, n_kv_heads * head_dim] */
    float *x, *xn, *q, *k, *v, *att, *o, *gate, *up; /* [max_batch, ...] */
    float *inv_freq, *inv_freq_local;
    int64_t *q_pos;
    float *attn_scratch;
    void *mm_scratch;
    void *block; /* one allocation holding the buffers above */
    bool reference; /* MXL_DECODER_REFERENCE=1 */
};

static size_t max_scratch(const mxl_decoder *d, int64_t n_tok) {
    size_t m = mxl_cpu_matmul_scratch_bytes(&d->output, 1);
    for (int64_t i = 0; i < d->hp.n_layers; i++) {
        const mxl_decoder_layer *L = &d->layers[i];
        const mxl_cpu_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++) {
            size_t b = mxl_cpu_matmul_scratch_bytes(ws[j], n_tok);
            if (b > m) m = b;
        }
    }
    return m;
}

mxl_status mxl_decoder_state_create(const mxl_decoder *d, int64_t max_ctx, int64_t max_batch,
                                    mxl_threadpool *pool, mxl_decoder_state **out, mxl_error *err) {
    const mxl_decoder_hparams *hp = &d->hp;
    if (max_ctx <= 0 || max_batch <= 0) return mxl_error_set(err, MXL_ERR_ARG, "context and batch sizes must be positive");
    if (hp->max_ctx > 0 && max_ctx > hp->max_ctx) max_ctx = hp->max_ctx;
    if (max_batch > max_ctx) max_batch = max_ctx;
    mxl_decoder_state *s = calloc(1, sizeof *s);
    if (!s) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    s->max_ctx = max_ctx;
    s->max_batch = max_batch;
    s->pool = pool;
    s->n_threads = pool ? mxl_threadpool_size(pool) : 1;
    int64_t qd = hp->n_heads * hp->head_dim, kvd = hp->n_kv_heads * hp->head_dim;
    int64_t wide = hp->ffn > hp->vocab ? hp->ffn : hp->vocab;
    /* float counts of each buffer, carved from one block (64-byte aligned pieces) */
    uint64_t sizes[] = {
        (uint64_t)(hp->n_layers * max_ctx * kvd), (uint64_t)(hp->n_layers * max_ctx * kvd),
        (uint64_t)(max_batch * hp->hidden), (uint64_t)(max_batch * hp->hidden), (uint64_t)(max_batch * qd),
        (uint64_t)(max_batch * kvd), (uint64_t)(max_batch * kvd), (uint64_t)(max_batch * qd),
        (uint64_t)(max_batch * hp->hidden), (uint64_t)(max_batch * wide), (uint64_t)(max_batch * hp->ffn),
        (uint64_t)hp->head_dim, (uint64_t)hp->head_dim, (uint64_t)max_batch * 2,
        (uint64_t)mxl_cpu_attention_scratch_floats(max_ctx, s->n_threads),
        (uint64_t)(max_scratch(d, max_batch) + 3) / 4,
    };
    float **ptrs[] = {&s->k_cache, &s->v_cache, &s->x, &s->xn, &s->q, &s->k, &s->v, &s->att, &s->o,
                      &s->gate, &s->up, &s->inv_freq, &s->inv_freq_local, (float **)&s->q_pos,
                      &s->attn_scratch, (float **)&s->mm_scratch};
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) total += (sizes[i] + 16) & ~(uint64_t)15;
    s->block = aligned_alloc(64, (size_t)total * sizeof(float));
    if (!s->block) {
        free(s);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory allocating the KV cache (%llu MB)", (unsigned long long)(total * 4 >> 20));
    }
    float *p = s->block;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *ptrs[i] = p;
        p += (sizes[i] + 16) & ~(uint64_t)15;
    }
    float af;
    mxl_rope_freqs(&hp->rope, max_ctx, s->inv_freq, &af);
    mxl_rope_freqs(&hp->rope_local, max_ctx, s->inv_freq_local, &af);
    const char *ref = getenv("MXL_DECODER_REFERENCE");
    s->reference = ref && strcmp(ref, "1") == 0;
    *out = s;
    return MXL_OK;
}

void mxl_decoder_state_destroy(mxl_decoder_state *s) {
    if (!s) return;
    free(s->block);
    free(s);
}

int64_t mxl_decoder_state_pos(const mxl_decoder_state *s) { return s->pos; }

void mxl_decoder_state_set_reference(mxl_decoder_state *s, bool on) { s->reference = on; }

static void matmul(const mxl_cpu_weight *W, const float *x, int64_t n, float *y, mxl_decoder_state *s) {
    if (s->reference) mxl_cpu_matmul_f32_ref(W, x, n, y);
    else mxl_cpu_matmul(W, x, n, y, s->mm_scratch, s->pool);
}

/* ---- forward ---- */


static void norm_rows(const mxl_decoder_hparams *hp, const float *x, const float *w, int64_t n, int64_t dim, float *y) {
    for (int64_t t = 0; t < n; t++) mxl_cpu_rmsnorm(x + t * dim, w, dim, hp->norm_eps, hp->norm_plus_one, y + t * dim);
}

static void forward_chunk(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens, int64_t n) {
    const mxl_decoder_hparams *hp = &d->hp;
    int64_t H = hp->hidden, hd = hp->head_dim, qd = hp->n_heads * hd, kvd = hp->n_kv_heads * hd;
    mxl_cpu_isa isa = mxl_cpu_isa_detect();
    /* ids were range-checked by the caller */
    mxl_cpu_embed(&d->tok_embd, tokens, n, hp->embed_scale, s->x, NULL);
    for (int64_t t = 0; t < n; t++) s->q_pos[t] = s->pos + t;
    for (int64_t l = 0; l < hp->n_layers; l++) {
        const mxl_decoder_layer *L = &d->layers[l];
        float *kc = s->k_cache + l * s->max_ctx * kvd, *vc = s->v_cache + l * s->max_ctx * kvd;
        norm_rows(hp, s->x, L->attn_norm, n, H, s->xn);
        matmul(&L->wq, s->xn, n, s->q, s);
        matmul(&L->wk, s->xn, n, s->k, s);
        matmul(&L->wv, s->xn, n, s->v, s);
        const mxl_rope_cfg *rc = L->sliding ? &hp->rope_local : &hp->rope;
        const float *inv = L->sliding ? s->inv_freq_local : s->inv_freq;
        for (int64_t t = 0; t < n; t++) {
            float *qt = s->q + t * qd, *kt = s->k + t * kvd;
            if (hp->qk_norm) {
                norm_rows(hp, qt, L->q_norm, hp->n_heads, hd, qt);
                norm_rows(hp, kt, L->k_norm, hp->n_kv_heads, hd, kt);
            }
            mxl_rope_apply(rc, inv, 1.0f, qt, (int)hp->n_heads, s->pos + t);
            mxl_rope_apply(rc, inv, 1.0f, kt, (int)hp->n_kv_heads, s->pos + t);
        }
        memcpy(kc + s->pos * kvd, s->k, (size_t)(n * kvd) * sizeof(float));
        memcpy(vc + s->pos * kvd, s->v, (size_t)(n * kvd) * sizeof(float));
        mxl_attn_params ap = {(int)hp->n_heads, (int)hp->n_kv_heads, (int)hd, hp->attn_scale, 0.0f, NULL,
                              L->sliding ? hp->sliding_window : 0, 1};
        mxl_kv_view kv = {MXL_DTYPE_F32, kc, vc, s->pos + n, kvd};
        mxl_cpu_attention(&ap, s->q, n, s->q_pos, &kv, s->att, s->attn_scratch, s->pool, isa);
        matmul(&L->wo, s->att, n, s->o, s);
        if (L->post_attn_norm) norm_rows(hp, s->o, L->post_attn_norm, n, H, s->o);
        for (int64_t i = 0; i < n * H; i++) s->x[i] += s->o[i];
        norm_rows(hp, s->x, L->ffn_norm, n, H, s->xn);
        matmul(&L->w_gate, s->xn, n, s->gate, s);
        matmul(&L->w_up, s->xn, n, s->up, s);
        mxl_cpu_glu(hp->act, s->gate, s->up, n * hp->ffn, s->gate);
        matmul(&L->w_down, s->gate, n, s->o, s);
        if (L->post_ffn_norm) norm_rows(hp, s->o, L->post_ffn_norm, n, H, s->o);
        for (int64_t i = 0; i < n * H; i++) s->x[i] += s->o[i];
    }
    s->pos += n;
}

mxl_status mxl_decoder_forward(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens,
                               int64_t n, float *logits, mxl_error *err) {
    const mxl_decoder_hparams *hp = &d->hp;
    if (n <= 0) return mxl_error_set(err, MXL_ERR_ARG, "no tokens to run");
    if (n > s->max_ctx - s->pos)
        return mxl_error_set(err, MXL_ERR_ARG, "context full: %lld tokens at position %lld exceed the context of %lld",
                             (long long)n, (long long)s->pos, (long long)s->max_ctx);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->vocab)
            return mxl_error_set(err, MXL_ERR_ARG, "token id %d is outside the vocabulary of %lld", tokens[i], (long long)hp->vocab);
    for (int64_t off = 0; off < n; off += s->max_batch) {
        int64_t m = n - off < s->max_batch ? n - off : s->max_batch;
        forward_chunk(d, s, tokens + off, m);
        if (off + m == n) {
            const float *last = s->x + (m - 1) * hp->hidden;
            mxl_cpu_rmsnorm(last, d->output_norm, hp->hidden, hp->norm_eps, hp->norm_plus_one, s->xn);
            matmul(&d->output, s->xn, 1, logits, s);
            if (hp->final_softcap > 0) mxl_cpu_softcap(logits, hp->vocab, hp->final_softcap);
        }
    }
    return MXL_OK;
}
