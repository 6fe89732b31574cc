/* encoder_input.c - single and pair token ids with HF truncation (see encoder_input.h). */
#include "engine/encoder_input.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "io/json_read.h"

static mxl_status push(mxl_token_ids *v, int32_t id, mxl_error *err) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *p = mxl_realloc(v->ids, cap * sizeof *p);
        if (!p) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        v->ids = p;
        v->cap = cap;
    }
    v->ids[v->n++] = id;
    return MXL_OK;
}

static mxl_status push_n(mxl_token_ids *v, const int32_t *ids, int64_t n, mxl_error *err) {
    for (int64_t i = 0; i < n; i++)
        if (push(v, ids[i], err)) return MXL_ERR_NOMEM;
    return MXL_OK;
}

/* memcmp of n ids; n == 0 is equal even with NULL arrays (an empty encoding has no buffer). */
static bool same_ids(const int32_t *a, const int32_t *b, size_t n) {
    return n == 0 || memcmp(a, b, n * sizeof *a) == 0;
}

mxl_status mxl_enc_specials_probe(const mxl_tokenizer *tok, mxl_enc_specials *sp, mxl_error *err) {
    memset(sp, 0, sizeof *sp);
    mxl_token_ids all = {0}, full = {0}, content = {0};
    /* "" shows every special the post-processor adds; "a" with and without them shows which
     * side of the sequence each one goes */
    mxl_status st = mxl_tokenizer_encode(tok, "", 0, MXL_TOK_ADD_SPECIAL, &all, err);
    if (!st) st = mxl_tokenizer_encode(tok, "a", 1, MXL_TOK_ADD_SPECIAL, &full, err);
    if (!st) st = mxl_tokenizer_encode(tok, "a", 1, 0, &content, err);
    if (!st) {
        size_t n_pre = 0;
        static const int32_t k_none[1] = {0};
        const int32_t *allp = all.n ? all.ids : k_none; /* no arithmetic on the NULL of an empty encoding */
        bool found = false;
        if (full.n == all.n + content.n && all.n <= 2 * MXL_ENC_MAX_SPECIALS) {
            for (n_pre = 0; n_pre <= all.n && !found; n_pre++) {
                if (n_pre > MXL_ENC_MAX_SPECIALS || all.n - n_pre > MXL_ENC_MAX_SPECIALS) continue;
                found = same_ids(full.ids + n_pre, content.ids, content.n) && same_ids(full.ids, allp, n_pre) &&
                        same_ids(full.ids + n_pre + content.n, allp + n_pre, all.n - n_pre);
                if (found) break;
            }
        }
        if (!found) {
            st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "the tokenizer's post-processor does not wrap a sequence in fixed special tokens");
        } else {
            sp->n_pre = (int)n_pre;
            sp->n_post = (int)(all.n - n_pre);
            if (n_pre) memcpy(sp->pre, all.ids, n_pre * sizeof(int32_t));
            if (sp->n_post) memcpy(sp->post, all.ids + n_pre, (size_t)sp->n_post * sizeof(int32_t));
        }
    }
    mxl_token_ids_free(&all);
    mxl_token_ids_free(&full);
    mxl_token_ids_free(&content);
    return st;
}

mxl_status mxl_enc_tokenize_single(const mxl_tokenizer *tok, const mxl_enc_specials *sp, const char *text,
                                   int64_t limit, mxl_token_ids *out, bool *truncated, mxl_error *err) {
    int64_t budget = limit - sp->n_pre - sp->n_post;
    if (budget < 0)
        return mxl_error_set(err, MXL_ERR_ARG, "a limit of %lld tokens leaves no room beside the %d special tokens", (long long)limit, sp->n_pre + sp->n_post);
    mxl_token_ids c = {0};
    mxl_status st = mxl_tokenizer_encode(tok, text, strlen(text), 0, &c, err);
    if (st) return st;
    int64_t keep = (int64_t)c.n < budget ? (int64_t)c.n : budget;
    if (truncated) *truncated = keep < (int64_t)c.n;
    out->n = 0;
    st = push_n(out, sp->pre, sp->n_pre, err);
    if (!st) st = push_n(out, c.ids, keep, err);
    if (!st) st = push_n(out, sp->post, sp->n_post, err);
    mxl_token_ids_free(&c);
    return st;
}

void mxl_enc_truncate_longest_first(int64_t n_a, int64_t n_b, int64_t budget, int64_t *keep_a, int64_t *keep_b) {
    *keep_a = n_a;
    *keep_b = n_b;
    if (n_a + n_b <= budget) return;
    /* HF tokenizers: with n1 the shorter length, n2 = max(n1, budget - n1) (n1 when n1 > budget);
     * when n1 + n2 still exceeds the budget both get half, the second listed the odd token */
    bool swap = n_a > n_b;
    int64_t n1 = swap ? n_b : n_a, n2;
    n2 = n1 > budget ? n1 : (n1 > budget - n1 ? n1 : budget - n1);
    if (n1 + n2 > budget) {
        n1 = budget / 2;
        n2 = n1 + budget % 2;
    }
    *keep_a = swap ? n2 : n1;
    *keep_b = swap ? n1 : n2;
    if (*keep_a > n_a) *keep_a = n_a;
    if (*keep_b > n_b) *keep_b = n_b;
}

mxl_status mxl_enc_tokenize_pair(const mxl_tokenizer *tok, const mxl_enc_specials *sp, bool double_sep,
                                 const char *a, const char *b, int64_t limit, mxl_token_ids *ids,
                                 mxl_token_ids *types, mxl_error *err) {
    if (sp->n_pre != 1 || sp->n_post != 1)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "the tokenizer wraps a sequence in %d + %d special tokens; a cross-encoder pair needs [CLS] ... [SEP]", sp->n_pre, sp->n_post);
    int64_t added = double_sep ? 4 : 3, budget = limit - added;
    if (budget < 2)
        return mxl_error_set(err, MXL_ERR_ARG, "a limit of %lld tokens leaves no room for a query and a document", (long long)limit);
    mxl_token_ids ta = {0}, tb = {0};
    mxl_status st = mxl_tokenizer_encode(tok, a, strlen(a), 0, &ta, err);
    if (!st) st = mxl_tokenizer_encode(tok, b, strlen(b), 0, &tb, err);
    int64_t ka = 0, kb = 0;
    if (!st) mxl_enc_truncate_longest_first((int64_t)ta.n, (int64_t)tb.n, budget, &ka, &kb);
    ids->n = 0;
    if (types) types->n = 0;
    int32_t cls = sp->pre[0], sep = sp->post[0];
    if (!st) st = push(ids, cls, err);
    if (!st) st = push_n(ids, ta.ids, ka, err);
    if (!st) st = push(ids, sep, err);
    if (!st && double_sep) st = push(ids, sep, err);
    size_t first = ids->n;
    if (!st) st = push_n(ids, tb.ids, kb, err);
    if (!st) st = push(ids, sep, err);
    for (size_t i = 0; types && !st && i < ids->n; i++) st = push(types, i < first || double_sep ? 0 : 1, err);
    mxl_token_ids_free(&ta);
    mxl_token_ids_free(&tb);
    return st;
}

static json_t *load_small(const char *dir, const char *name) {
    char path[4200];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    /* these configs are a few KB; a huge one is not a config (chat templates can be ~100 KB) */
    char *buf = mxl_malloc(1u << 22);
    size_t n = buf ? fread(buf, 1, 1u << 22, f) : 0;
    fclose(f);
    json_t *j = buf && n < (1u << 22) ? mxl_json_loads_py(buf, n, NULL) : NULL;
    mxl_free(buf);
    return j;
}

static int64_t int_key(const char *dir, const char *file, const char *key) {
    json_t *j = load_small(dir, file);
    int64_t v = -1;
    json_t *x = j && json_is_object(j) ? json_object_get(j, key) : NULL;
    /* transformers' int(1e30) "no limit" (and anything else past 10^9) reads as no limit */
    int64_t i;
    if (x && !mxl_json_int(x, 1, 999999999, &i)) v = i;
    json_decref(j);
    return v;
}

int64_t mxl_enc_tokenizer_max_length(const char *dir) { return int_key(dir, "tokenizer_config.json", "model_max_length"); }
int64_t mxl_enc_st_max_seq_length(const char *dir) { return int_key(dir, "sentence_bert_config.json", "max_seq_length"); }

bool mxl_enc_blank(const char *s) {
    for (; *s; s++)
        if (!strchr(" \t\r\n\v\f", *s)) return false;
    return true;
}
