/* rerank.c - cross-encoder scoring of (query, document) pairs (see rerank.h). */
#include "engine/rerank.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "engine/encoder_input.h"
#include "models/checkpoint.h"
#include "models/detect.h"
#include "models/encoder.h"
#include "models/encoder_classifier.h"
#include "tokenizer/tokenizer.h"

struct mxl_reranker {
    mxl_checkpoint *ck;
    mxl_detection det;
    mxl_encoder enc;
    bool enc_loaded;
    mxl_seq_classifier head;
    bool head_loaded;
    mxl_tokenizer *tok;
    mxl_enc_specials sp;
    mxl_threadpool *pool;
    int64_t max_len;
};

mxl_status mxl_reranker_load(const char *path, int n_threads, mxl_reranker **out, mxl_error *err) {
    *out = NULL;
    mxl_reranker *r = calloc(1, sizeof *r);
    if (!r) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_status st = mxl_checkpoint_open(path, &r->ck, err);
    if (!st) st = mxl_checkpoint_detect(r->ck, &r->det, err);
    if (!st && r->det.task != MXL_TASK_RERANK)
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED,
                           "%s is a %s model (%s), not a reranker; cross-encoders are one-label Bert / XLMRoberta / ModernBert ForSequenceClassification checkpoints",
                           path, mxl_task_name(r->det.task), r->det.family->display_name);
    if (!st && !mxl_encoder_supports(r->ck->config.model_type))
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: %s with model_type '%s' is not supported; its encoder must be bert, xlm-roberta or modernbert",
                           path, r->det.family->display_name, r->ck->config.model_type);
    if (!st && r->ck->config.num_labels != 1)
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: a classifier with %lld labels is not a reranker", path, (long long)r->ck->config.num_labels);
    if (!st) {
        st = mxl_encoder_load(r->ck, &r->enc, err);
        r->enc_loaded = st == MXL_OK;
    }
    if (!st) {
        st = mxl_seq_classifier_load(r->ck, &r->enc, &r->head, err);
        r->head_loaded = st == MXL_OK;
        if (st) mxl_seq_classifier_free(&r->head);
    }
    if (!st) st = mxl_tokenizer_load(r->ck->dir, &r->tok, err);
    if (!st) {
        st = mxl_enc_specials_probe(r->tok, &r->sp, err);
        if (!st && (r->sp.n_pre != 1 || r->sp.n_post != 1))
            st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "the tokenizer wraps a sequence in %d + %d special tokens; a cross-encoder needs [CLS] ... [SEP]", r->sp.n_pre, r->sp.n_post);
        if (st) mxl_error_prefix(err, "%s: ", r->ck->dir);
    }
    if (!st) st = mxl_threadpool_create(n_threads, &r->pool, err);
    if (st) {
        mxl_reranker_destroy(r);
        return st;
    }
    r->max_len = r->enc.max_tokens;
    int64_t tml = mxl_enc_tokenizer_max_length(r->ck->dir);
    if (tml > 0 && tml < r->max_len) r->max_len = tml;
    *out = r;
    return MXL_OK;
}

void mxl_reranker_destroy(mxl_reranker *r) {
    if (!r) return;
    mxl_threadpool_destroy(r->pool);
    mxl_tokenizer_destroy(r->tok);
    if (r->head_loaded) mxl_seq_classifier_free(&r->head);
    if (r->enc_loaded) mxl_encoder_free(&r->enc);
    mxl_checkpoint_close(r->ck);
    free(r);
}

const char *mxl_reranker_kind(const mxl_reranker *r) { return (void)r, "cross-encoder"; }
const char *mxl_reranker_family(const mxl_reranker *r) { return r->det.family->display_name; }
int64_t mxl_reranker_max_length(const mxl_reranker *r) { return r->max_len; }
bool mxl_reranker_takes_instruction(const mxl_reranker *r) { return (void)r, false; }

static mxl_status append(mxl_token_ids *dst, const mxl_token_ids *src, mxl_error *err) {
    if (dst->n + src->n > dst->cap) {
        size_t cap = dst->cap ? dst->cap : 256;
        while (cap < dst->n + src->n) cap *= 2;
        int32_t *p = realloc(dst->ids, cap * sizeof *p);
        if (!p) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        dst->ids = p;
        dst->cap = cap;
    }
    memcpy(dst->ids + dst->n, src->ids, src->n * sizeof *src->ids);
    dst->n += src->n;
    return MXL_OK;
}

mxl_status mxl_reranker_score(mxl_reranker *r, const char *query, const char *const *docs, size_t n_docs,
                              const mxl_rerank_opts *o, double *scores, float *logits, int64_t *n_tokens,
                              mxl_error *err) {
    if (!query || mxl_enc_blank(query)) return mxl_error_set(err, MXL_ERR_ARG, "the query is empty or whitespace only");
    if (n_docs == 0) return mxl_error_set(err, MXL_ERR_ARG, "no documents to rank");
    for (size_t i = 0; i < n_docs; i++)
        if (!docs[i] || mxl_enc_blank(docs[i])) return mxl_error_set(err, MXL_ERR_ARG, "document %zu is empty or whitespace only", i);
    int64_t limit = o && o->max_length > 0 && o->max_length < r->max_len ? o->max_length : r->max_len;
    size_t bs = o && o->batch_size > 0 ? (size_t)o->batch_size : MXL_RERANK_BATCH_DEFAULT;
    int64_t H = r->enc.hidden, L = r->head.n_labels;
    mxl_token_ids ids = {0}, types = {0}, all = {0}, all_types = {0};
    int64_t *starts = malloc((bs + 1) * sizeof *starts);
    float *hidden = NULL, *lg = malloc((size_t)L * sizeof(float));
    mxl_status st = starts && lg ? MXL_OK : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (size_t b0 = 0; b0 < n_docs && !st; b0 += bs) {
        size_t nb = n_docs - b0 < bs ? n_docs - b0 : bs;
        all.n = all_types.n = 0;
        starts[0] = 0;
        for (size_t i = 0; i < nb && !st; i++) {
            st = mxl_enc_tokenize_pair(r->tok, &r->sp, r->enc.pair_double_sep, query, docs[b0 + i], limit, &ids, &types, err);
            if (!st) st = append(&all, &ids, err);
            if (!st) st = append(&all_types, &types, err);
            starts[i + 1] = (int64_t)all.n;
            if (n_tokens) n_tokens[b0 + i] = (int64_t)ids.n;
        }
        if (st) break;
        free(hidden);
        hidden = malloc(all.n * (size_t)H * sizeof(float));
        if (!hidden) {
            st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
            break;
        }
        mxl_encoder_batch batch = {all.ids, r->enc.uses_type_ids ? all_types.ids : NULL, starts, (int64_t)nb};
        st = mxl_encoder_forward(&r->enc, &batch, r->pool, hidden, err);
        for (size_t i = 0; i < nb && !st; i++) {
            mxl_seq_classifier_logits(&r->head, hidden + starts[i] * H, starts[i + 1] - starts[i], lg);
            if (logits) logits[b0 + i] = lg[0];
            scores[b0 + i] = 1.0 / (1.0 + exp(-(double)lg[0]));
        }
    }
    free(hidden);
    free(lg);
    free(starts);
    mxl_token_ids_free(&ids);
    mxl_token_ids_free(&types);
    mxl_token_ids_free(&all);
    mxl_token_ids_free(&all_types);
    return st;
}

void mxl_rerank_order(const double *scores, size_t n, size_t *order) {
    for (size_t i = 0; i < n; i++) order[i] = i;
    /* insertion sort: stable, and lists are short (documents of one request) */
    for (size_t i = 1; i < n; i++) {
        size_t x = order[i], j = i;
        while (j > 0) {
            double a = scores[order[j - 1]], b = scores[x];
            bool b_first = !isnan(b) && (isnan(a) || b > a);
            if (!b_first) break;
            order[j] = order[j - 1];
            j--;
        }
        order[j] = x;
    }
}
