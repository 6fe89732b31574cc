/* sampler_tok.c - mxl_sampler_vocab over an mxl_tokenizer (sampler_tok.h). */
#include "engine/sampler_tok.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

static mxl_status token_text(void *ctx, int32_t id, const char **text, size_t *len, mxl_error *err) {
    mxl_sampler_tok_vocab *st = ctx;
    mxl_free(st->text);
    st->text = NULL;
    char *out = NULL;
    size_t n = 0;
    /* llama.cpp's vocab.detokenize({id}, true): special tokens rendered, nothing skipped */
    if (mxl_tokenizer_decode(st->tok, &id, 1, false, &out, &n, NULL) != MXL_OK) {
        *text = "";
        *len = 0;
        return MXL_OK;
    }
    (void)err;
    st->text = out;
    *text = out;
    *len = n;
    return MXL_OK;
}

static mxl_status tokenize(void *ctx, const char *text, size_t len, int32_t *out, size_t cap, size_t *n,
                           mxl_error *err) {
    mxl_sampler_tok_vocab *st = ctx;
    mxl_token_ids ids = {0};
    mxl_status s = mxl_tokenizer_encode(st->tok, text, len, 0, &ids, err);
    if (s) {
        mxl_token_ids_free(&ids);
        return s;
    }
    size_t k = ids.n < cap ? ids.n : cap;
    if (k) memcpy(out, ids.ids, k * sizeof *out);
    *n = ids.n;
    mxl_token_ids_free(&ids);
    return MXL_OK;
}

void mxl_sampler_tok_vocab_init(mxl_sampler_tok_vocab *state, const mxl_tokenizer *t, mxl_sampler_vocab *vocab) {
    state->tok = t;
    state->text = NULL;
    vocab->ctx = state;
    vocab->token_text = token_text;
    vocab->tokenize = tokenize;
}

void mxl_sampler_tok_vocab_free(mxl_sampler_tok_vocab *state) {
    mxl_free(state->text);
    state->text = NULL;
}
