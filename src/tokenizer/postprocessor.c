/* postprocessor.c - post-processors (HF tokenizers/src/processors/) for a single sequence with
 * add_special_tokens=true: TemplateProcessing's "single" template, BertProcessing ([CLS] A [SEP]),
 * RobertaProcessing (<s> A </s>), ByteLevel (ids unchanged) and Sequence. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

void tok_post_free(tok_post *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_children; i++) tok_post_free(p->children[i]);
    mxl_free(p->children);
    mxl_free(p->single);
    mxl_free(p);
}

static mxl_status wrap(mxl_token_ids *ids, const int32_t *pre, size_t npre, const int32_t *post,
                       size_t npost) {
    mxl_token_ids out = {0};
    if (!tok_ids_append(&out, pre, npre) || !tok_ids_append(&out, ids->ids, ids->n) ||
        !tok_ids_append(&out, post, npost)) {
        mxl_token_ids_free(&out);
        return MXL_ERR_NOMEM;
    }
    mxl_token_ids_free(ids);
    *ids = out;
    return MXL_OK;
}

mxl_status tok_post_apply(const tok_post *p, mxl_token_ids *ids) {
    switch (p->kind) {
    case TOK_POST_BYTE_LEVEL: return MXL_OK;
    case TOK_POST_BERT:
    case TOK_POST_ROBERTA: return wrap(ids, &p->cls_id, 1, &p->sep_id, 1);
    case TOK_POST_SEQUENCE:
        for (size_t i = 0; i < p->n_children; i++) {
            mxl_status st = tok_post_apply(p->children[i], ids);
            if (st != MXL_OK) return st;
        }
        return MXL_OK;
    case TOK_POST_TEMPLATE: {
        mxl_token_ids out = {0};
        bool ok = true;
        for (size_t i = 0; i < p->n_single && ok; i++) {
            if (p->single[i] == -1) ok = tok_ids_append(&out, ids->ids, ids->n);
            else ok = tok_ids_push(&out, p->single[i]);
        }
        if (!ok) {
            mxl_token_ids_free(&out);
            return MXL_ERR_NOMEM;
        }
        mxl_token_ids_free(ids);
        *ids = out;
        return MXL_OK;
    }
    }
    return MXL_ERR_INTERNAL;
}
