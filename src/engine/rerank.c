/* rerank.c - cross-encoder and Qwen3 generative scoring of (query, document) pairs (see
 * rerank.h). */
#include "engine/rerank.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/threadpool.h"
#include "engine/embed_decoder.h"
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
    /* generative (Qwen3-Reranker) */
    mxl_dec_runner *dec;
    int32_t yes_id, no_id;
    mxl_token_ids prefix, suffix;
};

/* The Qwen3-Reranker prompt, from its model card (huggingface.co/Qwen/Qwen3-Reranker-0.6B,
 * "Transformers Usage": prefix, suffix, format_instruction and the default instruction); the
 * same strings are quoted in llama.cpp PR 20009 (Qwen3-Reranker instruction support) and the
 * vLLM Ascend Qwen3-Reranker tutorial. tests/fixtures/qwen3_embed/gen_qwen3_embed_fixtures.py
 * computes the reference scores with them. */
static const char k_qwen3_prefix[] =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. "
    "Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n";
static const char k_qwen3_suffix[] = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
#define QWEN3_RERANK_MAX_LENGTH 8192 /* the model card's max_length */

/* A qwen3 generation checkpoint taken as a Qwen3-Reranker (see rerank.h). */
static mxl_status load_generative(mxl_reranker *r, int n_threads, mxl_error *err) {
    mxl_status st = mxl_threadpool_create(n_threads, &r->pool, err);
    if (!st) st = mxl_dec_runner_create(r->ck, r->pool, &r->dec, err);
    if (!st) st = mxl_tokenizer_load(r->ck->dir, &r->tok, err);
    if (!st) {
        st = mxl_enc_specials_probe(r->tok, &r->sp, err);
        if (st) mxl_error_prefix(err, "%s: ", r->ck->dir);
    }
    if (st) return st;
    r->yes_id = mxl_tokenizer_token_id(r->tok, "yes", 3);
    r->no_id = mxl_tokenizer_token_id(r->tok, "no", 2);
    int64_t vocab = mxl_dec_runner_vocab(r->dec);
    if (r->yes_id < 0 || r->no_id < 0 || r->yes_id >= vocab || r->no_id >= vocab)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: the vocabulary has no single 'yes' and 'no' tokens inside the model's %lld logits; not a Qwen3 reranker",
                             r->ck->dir, (long long)vocab);
    st = mxl_tokenizer_encode(r->tok, k_qwen3_prefix, sizeof k_qwen3_prefix - 1, MXL_TOK_PARSE_SPECIAL, &r->prefix, err);
    if (!st) st = mxl_tokenizer_encode(r->tok, k_qwen3_suffix, sizeof k_qwen3_suffix - 1, MXL_TOK_PARSE_SPECIAL, &r->suffix, err);
    if (st) return st;
    r->max_len = QWEN3_RERANK_MAX_LENGTH;
    int64_t maxp = mxl_dec_runner_max_positions(r->dec), tml = mxl_enc_tokenizer_max_length(r->ck->dir);
    if (maxp > 0 && maxp < r->max_len) r->max_len = maxp;
    if (tml > 0 && tml < r->max_len) r->max_len = tml;
    return MXL_OK;
}

mxl_status mxl_reranker_load(const char *path, int n_threads, mxl_reranker **out, mxl_error *err) {
    *out = NULL;
    mxl_reranker *r = mxl_calloc(1, sizeof *r);
    if (!r) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_status st = mxl_checkpoint_open(path, &r->ck, err);
    if (!st) st = mxl_checkpoint_detect(r->ck, &r->det, err);
    if (!st && r->det.task == MXL_TASK_GENERATE && strcmp(r->ck->config.model_type, "qwen3") == 0) {
        /* explicit selection of a generation checkpoint: the Qwen3 generative reranker */
        st = load_generative(r, n_threads, err);
        if (st) {
            mxl_reranker_destroy(r);
            return st;
        }
        *out = r;
        return MXL_OK;
    }
    if (!st && r->det.task != MXL_TASK_RERANK)
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED,
                           "%s is a %s model (%s), not a reranker; rerankers are one-label Bert / XLMRoberta / ModernBert ForSequenceClassification checkpoints and Qwen3 (Qwen3-Reranker) generation checkpoints",
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
    mxl_tokenizer_destroy(r->tok);
    if (r->head_loaded) mxl_seq_classifier_free(&r->head);
    if (r->enc_loaded) mxl_encoder_free(&r->enc);
    mxl_dec_runner_destroy(r->dec);
    mxl_threadpool_destroy(r->pool);
    mxl_token_ids_free(&r->prefix);
    mxl_token_ids_free(&r->suffix);
    mxl_checkpoint_close(r->ck);
    mxl_free(r);
}

const char *mxl_reranker_kind(const mxl_reranker *r) { return r->dec ? "generative" : "cross-encoder"; }
const char *mxl_reranker_family(const mxl_reranker *r) { return r->dec ? "Qwen3 generative reranker" : r->det.family->display_name; }
int64_t mxl_reranker_max_length(const mxl_reranker *r) { return r->max_len; }
bool mxl_reranker_takes_instruction(const mxl_reranker *r) { return r->dec != NULL; }

static mxl_status append(mxl_token_ids *dst, const mxl_token_ids *src, mxl_error *err) {
    if (dst->n + src->n > dst->cap) {
        size_t cap = dst->cap ? dst->cap : 256;
        while (cap < dst->n + src->n) cap *= 2;
        int32_t *p = mxl_realloc(dst->ids, cap * sizeof *p);
        if (!p) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        dst->ids = p;
        dst->cap = cap;
    }
    memcpy(dst->ids + dst->n, src->ids, src->n * sizeof *src->ids);
    dst->n += src->n;
    return MXL_OK;
}

/* Generative scoring, one pair at a time (see rerank.h). */
static mxl_status score_generative(mxl_reranker *r, const char *query, const char *const *docs, size_t n_docs, int64_t limit,
                                   const char *instr, double *scores, float *logits, int64_t *n_tokens, mxl_error *err) {
    int64_t fixed = (int64_t)(r->prefix.n + r->suffix.n), budget = limit - fixed;
    if (budget < r->sp.n_pre + r->sp.n_post + 1)
        return mxl_error_set(err, MXL_ERR_ARG, "a limit of %lld tokens leaves no room beside the reranker prompt's %lld tokens", (long long)limit, (long long)fixed);
    const char *k_i = "<Instruct>: ", *k_q = "\n<Query>: ", *k_d = "\n<Document>: ";
    size_t head_len = strlen(k_i) + strlen(instr) + strlen(k_q) + strlen(query) + strlen(k_d);
    char *text = NULL;
    mxl_token_ids content = {0}, full = {0};
    float *lg = mxl_malloc((size_t)mxl_dec_runner_vocab(r->dec) * sizeof *lg);
    mxl_status st = lg ? MXL_OK : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n_docs && !st; i++) {
        size_t dl = strlen(docs[i]);
        char *t = mxl_realloc(text, head_len + dl + 1);
        if (!t) {
            st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
            break;
        }
        text = t;
        snprintf(text, head_len + dl + 1, "%s%s%s%s%s%s", k_i, instr, k_q, query, k_d, docs[i]);
        st = mxl_enc_tokenize_single(r->tok, &r->sp, text, budget, &content, NULL, err);
        full.n = 0;
        if (!st) st = append(&full, &r->prefix, err);
        if (!st) st = append(&full, &content, err);
        if (!st) st = append(&full, &r->suffix, err);
        if (!st) st = mxl_dec_runner_logits(r->dec, full.ids, (int64_t)full.n, lg, err);
        if (st) break;
        double d = (double)lg[r->yes_id] - (double)lg[r->no_id];
        if (logits) logits[i] = (float)d;
        scores[i] = 1.0 / (1.0 + exp(-d));
        if (n_tokens) n_tokens[i] = (int64_t)full.n;
    }
    mxl_free(lg);
    mxl_free(text);
    mxl_token_ids_free(&content);
    mxl_token_ids_free(&full);
    return st;
}

mxl_status mxl_reranker_score(mxl_reranker *r, const char *query, const char *const *docs, size_t n_docs,
                              const mxl_rerank_opts *o, double *scores, float *logits, int64_t *n_tokens,
                              mxl_error *err) {
    return mxl_reranker_score_instructed(r, NULL, query, docs, n_docs, o, scores, logits, n_tokens, err);
}

mxl_status mxl_reranker_score_instructed(mxl_reranker *r, const char *instruction, const char *query,
                                         const char *const *docs, size_t n_docs, const mxl_rerank_opts *o,
                                         double *scores, float *logits, int64_t *n_tokens, mxl_error *err) {
    if (!query || mxl_enc_blank(query)) return mxl_error_set(err, MXL_ERR_ARG, "the query is empty or whitespace only");
    if (n_docs == 0) return mxl_error_set(err, MXL_ERR_ARG, "no documents to rank");
    for (size_t i = 0; i < n_docs; i++)
        if (!docs[i] || mxl_enc_blank(docs[i])) return mxl_error_set(err, MXL_ERR_ARG, "document %zu is empty or whitespace only", i);
    int64_t limit = o && o->max_length > 0 && o->max_length < r->max_len ? o->max_length : r->max_len;
    const char *instr = instruction && *instruction ? instruction : NULL;
    if (r->dec) return score_generative(r, query, docs, n_docs, limit, instr ? instr : MXL_RERANK_DEFAULT_INSTRUCTION, scores, logits, n_tokens, err);
    if (instr) return mxl_error_set(err, MXL_ERR_ARG, "an instruction is for generative rerankers; %s takes none", r->det.family->display_name);
    size_t bs = o && o->batch_size > 0 ? (size_t)o->batch_size : MXL_RERANK_BATCH_DEFAULT;
    int64_t H = r->enc.hidden, L = r->head.n_labels;
    mxl_token_ids ids = {0}, types = {0}, all = {0}, all_types = {0};
    int64_t *starts = mxl_malloc((bs + 1) * sizeof *starts);
    float *hidden = NULL, *lg = mxl_malloc((size_t)L * sizeof(float));
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
        mxl_free(hidden);
        hidden = mxl_malloc(all.n * (size_t)H * sizeof(float));
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
    mxl_free(hidden);
    mxl_free(lg);
    mxl_free(starts);
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
