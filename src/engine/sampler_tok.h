/* sampler_tok.h - the tokenizer hooks DRY's string sequence breakers need (mxl_sampler_vocab),
 * backed by an mxl_tokenizer. Kept out of sampler.c so the sampler does not depend on the
 * tokenizer module. */
#ifndef MXL_ENGINE_SAMPLER_TOK_H
#define MXL_ENGINE_SAMPLER_TOK_H

#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

/* Holds the last token text handed out; lives as long as the mxl_sampler_vocab is used. */
typedef struct mxl_sampler_tok_vocab {
    const mxl_tokenizer *tok;
    char *text;
} mxl_sampler_tok_vocab;

/* Fills *vocab with hooks over t: token_text = the token decoded alone with special tokens kept
 * (ids without a token give ""), tokenize = encode without special tokens added or parsed. */
void mxl_sampler_tok_vocab_init(mxl_sampler_tok_vocab *state, const mxl_tokenizer *t, mxl_sampler_vocab *vocab);
void mxl_sampler_tok_vocab_free(mxl_sampler_tok_vocab *state);

#endif
