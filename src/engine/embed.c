/* embed.c - text -> pooled, normalized vector (see embed.h). Pooling and normalization follow
 * sentence-transformers' Pooling / Normalize modules and llama.cpp's common_embd_normalize. */
#include "engine/embed.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "models/checkpoint.h"
#include "models/encoder_bert.h"
#include "tokenizer/tokenizer.h"

struct mxl_embed_model {
    mxl_checkpoint *ck;
    mxl_detection det;
    mxl_bert bert;
    bool bert_loaded;
    mxl_tokenizer *tok;
    mxl_threadpool *pool;
    int64_t max_len;
};

/* sentence_bert_config.json max_seq_length, or -1 */
static int64_t st_max_seq_length(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/sentence_bert_config.json", dir);
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
    int64_t v = -1;
    if (j) {
        json_t *x = json_object_get(j, "max_seq_length");
        if (json_is_integer(x) && json_integer_value(x) > 0) v = (int64_t)json_integer_value(x);
        json_decref(j);
    }
    return v;
}

mxl_status mxl_embed_model_load(const char *path, int n_threads, mxl_embed_model **out, mxl_error *err) {
    *out = NULL;
    mxl_embed_model *m = calloc(1, sizeof *m);
    if (!m) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_status st = mxl_checkpoint_open(path, &m->ck, err);
    if (!st) st = mxl_model_detect(&m->ck->config, m->ck->format == MXL_CHECKPOINT_SAFETENSORS ? m->ck->dir : NULL, &m->det, err);
    if (!st && m->det.task != MXL_TASK_EMBED)
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s is a %s model (%s), not an embedding model", path, mxl_task_name(m->det.task), m->det.family->display_name);
    if (!st && strcmp(m->ck->config.model_type, "bert") != 0)
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: embedding with %s (model_type '%s') is not built yet; BERT / MiniLM encoders are", path, m->det.family->display_name, m->ck->config.model_type);
    if (!st) {
        st = mxl_bert_load(m->ck, &m->bert, err);
        m->bert_loaded = st == MXL_OK;
    }
    if (!st) st = mxl_tokenizer_load(m->ck->dir, &m->tok, err);
    if (!st) st = mxl_threadpool_create(n_threads, &m->pool, err);
    if (st) {
        mxl_embed_model_destroy(m);
        return st;
    }
    int64_t msl = st_max_seq_length(m->ck->dir);
    m->max_len = msl > 0 && msl < m->bert.max_pos ? msl : m->bert.max_pos;
    *out = m;
    return MXL_OK;
}

void mxl_embed_model_destroy(mxl_embed_model *m) {
    if (!m) return;
    mxl_threadpool_destroy(m->pool);
    mxl_tokenizer_destroy(m->tok);
    if (m->bert_loaded) mxl_bert_free(&m->bert);
    mxl_checkpoint_close(m->ck);
    free(m);
}

int64_t mxl_embed_model_dim(const mxl_embed_model *m) { return m->bert.hidden; }
int64_t mxl_embed_model_max_length(const mxl_embed_model *m) { return m->max_len; }

mxl_pooling mxl_embed_resolved_pooling(const mxl_embed_model *m, const mxl_embed_opts *o) {
    if (o->pooling != MXL_POOLING_NONE) return o->pooling;
    return m->det.st.pooling != MXL_POOLING_NONE ? m->det.st.pooling : MXL_POOLING_MEAN;
}

int mxl_embed_resolved_normalize(const mxl_embed_model *m, const mxl_embed_opts *o) {
    if (o->normalize != MXL_EMBED_NORMALIZE_DEFAULT) return o->normalize;
    return m->det.st.normalize ? 2 : -1;
}

static void normalize(float *v, int64_t n, int mode) {
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

mxl_status mxl_embed_text(mxl_embed_model *m, const char *text, const mxl_embed_opts *o, float *out,
                          int64_t *n_tokens, mxl_error *err) {
    int64_t H = m->bert.hidden, dim = o->dimensions > 0 ? o->dimensions : H;
    if (dim > H) return mxl_error_set(err, MXL_ERR_ARG, "--dimensions %lld is larger than the model's %lld", (long long)dim, (long long)H);
    mxl_pooling pool = mxl_embed_resolved_pooling(m, o);
    if (pool != MXL_POOLING_MEAN && pool != MXL_POOLING_CLS && pool != MXL_POOLING_LAST_TOKEN)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "pooling '%s' is not supported yet (mean, cls, last)", mxl_pooling_name(pool));
    mxl_token_ids ids = {0};
    /* user text: special tokens written in it stay text; the post-processor adds [CLS]/[SEP] */
    mxl_status st = mxl_tokenizer_encode(m->tok, text, strlen(text), MXL_TOK_ADD_SPECIAL, &ids, err);
    if (st) return st;
    int64_t limit = o->max_length > 0 && o->max_length < m->max_len ? o->max_length : m->max_len;
    if ((int64_t)ids.n > limit && limit >= 2) {
        /* keep the closing special token, as HF truncation (longest_first) does */
        ids.ids[limit - 1] = ids.ids[ids.n - 1];
        ids.n = (size_t)limit;
    }
    float *hidden = malloc((size_t)ids.n * (size_t)H * sizeof(float));
    if (!hidden) {
        mxl_token_ids_free(&ids);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    int64_t n = (int64_t)ids.n;
    st = mxl_bert_forward(&m->bert, ids.ids, n, m->pool, hidden, err);
    if (!st) {
        for (int64_t i = 0; i < dim; i++) {
            double acc = 0;
            if (pool == MXL_POOLING_MEAN) {
                for (int64_t t = 0; t < n; t++) acc += hidden[t * H + i];
                acc /= (double)n;
            } else {
                acc = hidden[(pool == MXL_POOLING_CLS ? 0 : n - 1) * H + i];
            }
            out[i] = (float)acc;
        }
        normalize(out, dim, mxl_embed_resolved_normalize(m, o));
        *n_tokens = n;
    }
    free(hidden);
    mxl_token_ids_free(&ids);
    return st;
}
