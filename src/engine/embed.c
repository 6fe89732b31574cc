/* embed.c - texts -> pooled, normalized vectors (see embed.h). Pooling and normalization follow
 * sentence-transformers' Pooling / Normalize modules and llama.cpp's common_embd_normalize.
 * Encoder families run in batches through models/encoder.h; the decoder embedders run each text
 * through the text decoder (engine/embed_decoder.h): Qwen3-Embedding pools its last token,
 * EmbeddingGemma and Nemotron-3-Embed (bidirectional, one pass) every token as their Pooling
 * module says. The SigLIP text tower takes every text padded to its 64 positions and pools the
 * last one through its head (encoder.h pad_to_max), L2-normalized by default as SiglipModel
 * normalizes its text embeddings. */
#include "engine/embed.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/threadpool.h"
#include "engine/embed_decoder.h"
#include "engine/embed_dense.h"
#include "engine/encoder_input.h"
#include "io/safetensors.h"
#include "models/checkpoint.h"
#include "models/encoder.h"
#include "tokenizer/tokenizer.h"

struct mxl_embed_model {
    mxl_checkpoint *ck;
    mxl_detection det;
    mxl_encoder enc;
    bool enc_loaded;
    mxl_tokenizer *tok;
    mxl_enc_specials sp;
    mxl_threadpool *pool;
    int64_t max_len;
    mxl_dec_runner *dec; /* decoder-based embedder (Qwen3-Embedding), else NULL */
    int64_t width;       /* the encoder's / decoder's hidden size (what Pooling sees) */
    int64_t pooled;      /* the pooled vector's width after the encoder's own head (SigLIP), else width */
    int32_t pad_id;      /* enc.pad_to_max: the id texts are padded with */
    mxl_embed_dense_chain dense; /* sentence-transformers Dense modules after Pooling (may be empty) */
    int64_t hidden;      /* output width (after the Dense modules) */
};

/* Qwen3-Embedding: the registry's qwen3_embedding family (a qwen3 checkpoint with a
 * sentence-transformers Pooling module, or the Qwen3Model architecture). */
static bool is_qwen3_embedding(const mxl_embed_model *m) {
    return strcmp(m->det.family->id, "qwen3_embedding") == 0 && strcmp(m->ck->config.model_type, "qwen3") == 0;
}

/* The bidirectional decoder embedders, whose every token's state the sentence-transformers
 * Pooling (mean) and Dense modules take: EmbeddingGemma (gemma3_text with
 * use_bidirectional_attention), Nemotron-3-Embed (ministral3 with is_causal false) and the
 * bidirectional Llama of llama-nemotron-embed / LLM2Vec (llama_bidirec). */
static bool is_bidirectional_embedder(const mxl_embed_model *m) {
    const char *id = m->det.family->id, *mt = m->ck->config.model_type;
    return (strcmp(id, "embeddinggemma") == 0 && strcmp(mt, "gemma3_text") == 0) || (strcmp(id, "nemotron3_embed") == 0 && strcmp(mt, "ministral3") == 0) ||
           (strcmp(id, "llama_bidirectional") == 0 && strcmp(mt, "llama_bidirec") == 0);
}

/* The padding id of an encoder that takes its texts padded to max_tokens: the tokenizer's pad
 * token, else config.json pad_token_id (text_config first). */
static mxl_status pad_id_of(mxl_embed_model *m, mxl_error *err) {
    m->pad_id = mxl_tokenizer_pad_id(m->tok);
    json_t *raw = m->ck->config.raw, *tc = raw ? json_object_get(raw, "text_config") : NULL;
    json_t *p = tc ? json_object_get(tc, "pad_token_id") : NULL;
    if (!p && raw) p = json_object_get(raw, "pad_token_id");
    if (m->pad_id < 0 && json_is_integer(p) && json_integer_value(p) >= 0 && json_integer_value(p) < INT32_MAX) m->pad_id = (int32_t)json_integer_value(p);
    if (m->pad_id < 0)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s pads every text to %lld tokens, but neither the tokenizer nor config.json names a pad token", m->ck->dir,
                             m->det.family->display_name, (long long)m->enc.max_tokens);
    return MXL_OK;
}

mxl_status mxl_embed_model_load(const char *path, int n_threads, mxl_embed_model **out, mxl_error *err) {
    *out = NULL;
    mxl_embed_model *m = mxl_calloc(1, sizeof *m);
    if (!m) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_status st = mxl_checkpoint_open(path, &m->ck, err);
    if (!st) st = mxl_checkpoint_detect(m->ck, &m->det, err);
    if (!st && m->det.task != MXL_TASK_EMBED)
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s is a %s model (%s), not an embedding model", path, mxl_task_name(m->det.task), m->det.family->display_name);
    bool decoder = !st && (is_qwen3_embedding(m) || is_bidirectional_embedder(m)), last_only = !st && is_qwen3_embedding(m);
    if (!st && !decoder && !mxl_encoder_supports(m->ck->config.model_type))
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: embedding with %s (model_type '%s') is not built yet; BERT / MiniLM, XLM-RoBERTa, ModernBERT encoders, Qwen3-Embedding, EmbeddingGemma, Nemotron-3-Embed, bidirectional Llama and the SigLIP text tower are", path, m->det.family->display_name, m->ck->config.model_type);
    if (!st && m->det.st.has_pooling && m->det.st.pooling == MXL_POOLING_NONE)
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/%s/config.json: no pooling mode is enabled", m->ck->dir, m->det.st.pooling_path);
    /* Qwen3-Embedding's runs give the last token's state only */
    if (!st && last_only && m->det.st.has_pooling && m->det.st.pooling != MXL_POOLING_LAST_TOKEN)
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/%s/config.json: %s pooling with %s; only last-token pooling is supported for decoder embedders", m->ck->dir, m->det.st.pooling_path,
                           mxl_pooling_name(m->det.st.pooling), m->det.family->display_name);
    if (!st) st = mxl_threadpool_create(n_threads, &m->pool, err);
    if (!st && decoder) {
        st = mxl_dec_runner_create(m->ck, m->pool, &m->dec, err);
    } else if (!st) {
        st = mxl_encoder_load(m->ck, &m->enc, err);
        m->enc_loaded = st == MXL_OK;
    }
    if (!st) st = mxl_tokenizer_load(m->ck->dir, &m->tok, err);
    if (!st) {
        st = mxl_enc_specials_probe(m->tok, &m->sp, err);
        if (st) mxl_error_prefix(err, "%s: ", m->ck->dir);
    }
    if (!st && m->enc_loaded && m->enc.pad_to_max) st = pad_id_of(m, err);
    if (!st) {
        m->width = m->dec ? mxl_dec_runner_hidden_size(m->dec) : m->enc.hidden;
        m->pooled = m->dec ? m->width : m->enc.pooled_dim;
        st = mxl_embed_dense_load(m->ck->dir, (const char (*)[MXL_ST_PATH_MAX])m->det.st.dense_paths, m->det.st.n_dense, m->pooled, &m->dense, err);
        m->hidden = mxl_embed_dense_width(&m->dense, m->pooled);
    }
    if (st) {
        mxl_embed_model_destroy(m);
        return st;
    }
    if (m->dec) {
        m->max_len = mxl_dec_runner_max_positions(m->dec);
        if (m->max_len <= 0) m->max_len = INT64_C(1) << 20;
    } else {
        m->max_len = m->enc.max_tokens;
    }
    int64_t msl = mxl_enc_st_max_seq_length(m->ck->dir), tml = mxl_enc_tokenizer_max_length(m->ck->dir);
    if (msl > 0) {
        if (msl < m->max_len) m->max_len = msl;
    } else if (tml > 0 && tml < m->max_len) {
        m->max_len = tml;
    }
    *out = m;
    return MXL_OK;
}

void mxl_embed_model_destroy(mxl_embed_model *m) {
    if (!m) return;
    mxl_tokenizer_destroy(m->tok);
    if (m->enc_loaded) mxl_encoder_free(&m->enc);
    mxl_dec_runner_destroy(m->dec);
    mxl_embed_dense_free(&m->dense);
    mxl_threadpool_destroy(m->pool);
    mxl_checkpoint_close(m->ck);
    mxl_free(m);
}

int64_t mxl_embed_model_dim(const mxl_embed_model *m) { return m->hidden; }
int64_t mxl_embed_model_max_length(const mxl_embed_model *m) { return m->max_len; }
const char *mxl_embed_model_family(const mxl_embed_model *m) { return m->det.family->display_name; }

mxl_pooling mxl_embed_resolved_pooling(const mxl_embed_model *m, const mxl_embed_opts *o) {
    if (o->pooling != MXL_POOLING_NONE) return o->pooling;
    if (m->det.st.pooling != MXL_POOLING_NONE) return m->det.st.pooling;
    /* the family's pooling */
    return (m->dec && is_qwen3_embedding(m)) || (!m->dec && m->enc.pad_to_max) ? MXL_POOLING_LAST_TOKEN : MXL_POOLING_MEAN;
}

int mxl_embed_resolved_normalize(const mxl_embed_model *m, const mxl_embed_opts *o) {
    if (o->normalize != MXL_EMBED_NORMALIZE_DEFAULT) return o->normalize;
    /* Qwen3-Embedding without any sentence-transformers files (a bare Qwen3Model export): its
     * model card L2-normalizes */
    if (m->dec && is_qwen3_embedding(m) && !m->det.st.has_modules_json && !m->det.st.has_pooling) return 2;
    /* SigLIP: SiglipModel's text_embeds are L2-normalized (get_text_features' are not) */
    if (!m->dec && m->enc.pad_to_max && !m->det.st.has_modules_json) return 2;
    return m->det.st.normalize ? 2 : -1;
}

void mxl_embed_normalize(float *v, int64_t n, int mode) {
    double norm = 0;
    if (mode < 0) return;
    if (mode == 0) {
        for (int64_t i = 0; i < n; i++) norm = fmax(norm, fabs(v[i]));
        norm /= 32760.0; /* int16 range, as llama.cpp */
    } else if (mode == 2) {
        for (int64_t i = 0; i < n; i++) norm += (double)v[i] * v[i];
        norm = sqrt(norm);
    } else {
        for (int64_t i = 0; i < n; i++) norm += pow(fabs(v[i]), mode);
        norm = pow(norm, 1.0 / mode);
    }
    if (norm > 0)
        for (int64_t i = 0; i < n; i++) v[i] = (float)(v[i] / norm);
}

/* out[dim] from one sequence's hidden states h [n, H] (sentence-transformers Pooling modes). */
static void pool_one(mxl_pooling p, const float *h, int64_t n, int64_t H, int64_t dim, float *out) {
    for (int64_t i = 0; i < dim; i++) {
        double acc = 0;
        switch (p) {
        case MXL_POOLING_CLS: acc = h[i]; break;
        case MXL_POOLING_LAST_TOKEN: acc = h[(n - 1) * H + i]; break;
        case MXL_POOLING_MAX:
            acc = h[i];
            for (int64_t t = 1; t < n; t++) acc = fmax(acc, h[t * H + i]);
            break;
        case MXL_POOLING_WEIGHTED_MEAN: /* weights 1..n by position */
            for (int64_t t = 0; t < n; t++) acc += (double)(t + 1) * h[t * H + i];
            acc /= (double)n * (double)(n + 1) / 2.0;
            break;
        case MXL_POOLING_MEAN_SQRT_LEN:
            for (int64_t t = 0; t < n; t++) acc += h[t * H + i];
            acc /= sqrt((double)n);
            break;
        case MXL_POOLING_MEAN:
        case MXL_POOLING_NONE:
            for (int64_t t = 0; t < n; t++) acc += h[t * H + i];
            acc /= (double)n;
            break;
        }
        out[i] = (float)acc;
    }
}

/* One pooled vector (the pooler's width) through the Dense modules, cut to dim and normalized
 * into v. tmp holds m->hidden + mxl_embed_dense_scratch_floats floats. */
static void finish(const mxl_embed_model *m, const float *pooled, int64_t dim, int normalize, float *v, float *tmp) {
    if (m->dense.n) {
        mxl_embed_dense_apply(&m->dense, pooled, tmp, tmp + m->hidden);
        pooled = tmp;
    }
    if (v != pooled) memmove(v, pooled, (size_t)dim * sizeof *v);
    mxl_embed_normalize(v, dim, normalize);
}

static size_t finish_scratch_floats(const mxl_embed_model *m) {
    return (size_t)(m->hidden + mxl_embed_dense_scratch_floats(&m->dense) + m->width + m->pooled);
}

/* The text embedded for `text` under the instruction `instr` (NULL: none), in *joined (owned,
 * replaced): encoder families prepend the instruction as written (sentence-transformers'
 * `prompt`); Qwen3-Embedding wraps it in its query template "Instruct: {task}\nQuery:" (the model
 * card's get_detailed_instruct, also its config_sentence_transformers.json "query" prompt),
 * unless the instruction already starts with "Instruct:" (then it is the whole prompt). */
static mxl_status compose(const mxl_embed_model *m, const char *instr, const char *text, char **joined, const char **use,
                          mxl_error *err) {
    *use = text;
    if (!instr) return MXL_OK;
    bool templ = m->dec && is_qwen3_embedding(m) && strncmp(instr, "Instruct:", 9) != 0;
    const char *head = templ ? "Instruct: " : "", *tail = templ ? "\nQuery:" : "";
    size_t lh = strlen(head), la = strlen(instr), lt = strlen(tail), lb = strlen(text);
    mxl_free(*joined);
    *joined = mxl_malloc(lh + la + lt + lb + 1);
    if (!*joined) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    char *p = *joined;
    memcpy(p, head, lh);
    memcpy(p + lh, instr, la);
    memcpy(p + lh + la, tail, lt);
    memcpy(p + lh + la + lt, text, lb + 1);
    *use = *joined;
    return MXL_OK;
}

/* Decoder embedders: one text at a time through the decoder; last-token pooling takes the last
 * token's final-normed hidden state (sentence-transformers lasttoken over an unpadded sequence),
 * the others pool every token's (one pass: EmbeddingGemma's attention is bidirectional). */
static mxl_status embed_decoder(mxl_embed_model *m, const char *const *texts, size_t n, const char *instr, mxl_pooling pool,
                                int64_t limit, int64_t dim, int normalize, float *out, int64_t *n_tokens,
                                mxl_error *err) {
    mxl_token_ids ids = {0};
    char *joined = NULL;
    float *h = mxl_malloc((size_t)m->width * sizeof *h), *tmp = mxl_malloc(finish_scratch_floats(m) * sizeof *tmp), *all = NULL;
    mxl_status st = h && tmp ? MXL_OK : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && !st; i++) {
        const char *text;
        st = compose(m, instr, texts[i], &joined, &text, err);
        if (!st) st = mxl_enc_tokenize_single(m->tok, &m->sp, text, limit, &ids, NULL, err);
        if (!st && ids.n == 0) st = mxl_error_set(err, MXL_ERR_ARG, "input %zu has no tokens", i);
        if (!st && pool == MXL_POOLING_LAST_TOKEN) {
            st = mxl_dec_runner_hidden(m->dec, ids.ids, (int64_t)ids.n, h, err);
        } else if (!st) {
            mxl_free(all);
            all = mxl_malloc(ids.n * (size_t)m->width * sizeof *all);
            st = all ? mxl_dec_runner_hidden_all(m->dec, ids.ids, (int64_t)ids.n, all, err) : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
            if (!st) pool_one(pool, all, (int64_t)ids.n, m->width, m->width, h);
        }
        if (st) break;
        if (n_tokens) n_tokens[i] = (int64_t)ids.n;
        finish(m, h, dim, normalize, out + i * (size_t)dim, tmp);
    }
    mxl_free(all);
    mxl_free(h);
    mxl_free(tmp);
    mxl_free(joined);
    mxl_token_ids_free(&ids);
    return st;
}

mxl_status mxl_embed_batch(mxl_embed_model *m, const char *const *texts, size_t n, const mxl_embed_opts *o,
                           float *out, int64_t *n_tokens, mxl_error *err) {
    int64_t H = m->hidden, dim = o->dimensions > 0 ? o->dimensions : H;
    if (n == 0) return mxl_error_set(err, MXL_ERR_ARG, "no input to embed");
    if (dim > H) return mxl_error_set(err, MXL_ERR_ARG, "--dimensions %lld is larger than the model's %lld", (long long)dim, (long long)H);
    int normalize = mxl_embed_resolved_normalize(m, o);
    if (normalize < -1) return mxl_error_set(err, MXL_ERR_ARG, "normalization %d is not one of -1, 0, 1, 2 or p > 2", normalize);
    mxl_pooling pool = mxl_embed_resolved_pooling(m, o);
    for (size_t i = 0; i < n; i++)
        if (!texts[i] || mxl_enc_blank(texts[i])) return mxl_error_set(err, MXL_ERR_ARG, "input %zu is empty or whitespace only", i);
    int64_t limit = o->max_length > 0 && o->max_length < m->max_len ? o->max_length : m->max_len;
    size_t bs = o->batch_size > 0 ? (size_t)o->batch_size : MXL_EMBED_BATCH_DEFAULT;
    const char *instr = o->instruction && *o->instruction ? o->instruction : NULL;
    if (m->dec) {
        if (pool != MXL_POOLING_LAST_TOKEN && is_qwen3_embedding(m))
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s pooling is not supported for %s, a decoder embedder: only last-token pooling is", mxl_pooling_name(pool),
                                 m->det.family->display_name);
        return embed_decoder(m, texts, n, instr, pool, limit, dim, normalize, out, n_tokens, err);
    }
    mxl_token_ids all = {0}, one = {0};
    int64_t *starts = mxl_malloc((bs + 1) * sizeof *starts);
    float *hidden = NULL, *pooled = mxl_malloc(finish_scratch_floats(m) * sizeof *pooled);
    char *joined = NULL;
    mxl_status st = starts && pooled ? MXL_OK : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    const int64_t W = m->width; /* what the pooler sees */
    for (size_t b0 = 0; b0 < n && !st; b0 += bs) {
        size_t nb = n - b0 < bs ? n - b0 : bs;
        all.n = 0;
        starts[0] = 0;
        for (size_t i = 0; i < nb && !st; i++) {
            const char *text;
            st = compose(m, instr, texts[b0 + i], &joined, &text, err);
            if (st) break;
            st = mxl_enc_tokenize_single(m->tok, &m->sp, text, limit, &one, NULL, err);
            if (!st && n_tokens) n_tokens[b0 + i] = (int64_t)one.n;
            size_t padded = !st && m->enc.pad_to_max ? (size_t)m->enc.max_tokens : one.n;
            for (size_t k = 0; !st && k < padded; k++) {
                if (all.n == all.cap) {
                    size_t cap = all.cap ? all.cap * 2 : 256;
                    int32_t *p = mxl_realloc(all.ids, cap * sizeof *p);
                    if (!p) {
                        st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
                        break;
                    }
                    all.ids = p;
                    all.cap = cap;
                }
                all.ids[all.n++] = k < one.n ? one.ids[k] : m->pad_id;
            }
            starts[i + 1] = (int64_t)all.n;
        }
        if (st) break;
        mxl_free(hidden);
        hidden = mxl_malloc(all.n * (size_t)W * sizeof(float));
        if (!hidden) {
            st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
            break;
        }
        mxl_encoder_batch batch = {all.ids, NULL, starts, (int64_t)nb};
        st = mxl_encoder_forward(&m->enc, &batch, m->pool, hidden, err);
        for (size_t i = 0; i < nb && !st; i++) {
            float *p = pooled + m->hidden + mxl_embed_dense_scratch_floats(&m->dense), *ph = p + W;
            pool_one(pool, hidden + starts[i] * W, starts[i + 1] - starts[i], W, W, p);
            mxl_encoder_pooled_head(&m->enc, p, ph);
            finish(m, ph, dim, normalize, out + (b0 + i) * (size_t)dim, pooled);
        }
    }
    mxl_free(joined);
    mxl_free(hidden);
    mxl_free(pooled);
    mxl_free(starts);
    mxl_token_ids_free(&all);
    mxl_token_ids_free(&one);
    return st;
}

mxl_status mxl_embed_text(mxl_embed_model *m, const char *text, const mxl_embed_opts *o, float *out,
                          int64_t *n_tokens, mxl_error *err) {
    return mxl_embed_batch(m, &text, 1, o, out, n_tokens, err);
}
