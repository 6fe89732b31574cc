/* grammar_tok.h - the grammar matcher's token texts (mxl_grammar_vocab) from an mxl_tokenizer:
 * each id's bytes as llama.cpp's token_to_piece gives them (special tokens rendered; byte tokens
 * and byte-level pieces as their raw bytes, even when they are only part of a UTF-8 character;
 * SentencePiece's U+2581 as a space), and the ids that end generation. Kept apart from grammar.c
 * so the matcher does not depend on the tokenizer module. */
#ifndef MXL_ENGINE_GRAMMAR_TOK_H
#define MXL_ENGINE_GRAMMAR_TOK_H

#include "engine/grammar.h"
#include "tokenizer/tokenizer.h"

/* n_vocab: ids 0..n_vocab-1 (the model's logits); eog: the ids that end generation. */
mxl_status mxl_grammar_vocab_from_tokenizer(const mxl_tokenizer *t, int32_t n_vocab, const int32_t *eog, size_t n_eog,
                                            mxl_grammar_vocab **out, mxl_error *err);

#endif
