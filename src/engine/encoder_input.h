/* encoder_input.h - token ids for the encoder engines (embedding, cross-encoder reranking), as
 * transformers' tokenizer call with truncation=True produces them:
 *   single text:  pre + content + post, the content cut to fit max_length (HF truncates the
 *                 sequence before the post-processor adds its special tokens);
 *   pair (a, b):  [CLS] a [SEP] b [SEP] (BERT / ModernBERT TemplateProcessing, token types 0 for
 *                 the first part and 1 for b and its [SEP]) or <s> a </s></s> b </s> (RoBERTa
 *                 processing, types all 0), a and b cut by the `longest_first` strategy of HF
 *                 tokenizers (utils/truncation.rs): when both must shrink each keeps half of the
 *                 budget, the longer one the odd token.
 * Texts are tokenized as user text (special tokens written in them stay text). The special
 * tokens around a sequence are learnt once per tokenizer by probing its post-processor. */
#ifndef MXL_ENGINE_ENCODER_INPUT_H
#define MXL_ENGINE_ENCODER_INPUT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

#define MXL_ENC_MAX_SPECIALS 4

typedef struct mxl_enc_specials {
    int32_t pre[MXL_ENC_MAX_SPECIALS], post[MXL_ENC_MAX_SPECIALS];
    int n_pre, n_post;
} mxl_enc_specials;

/* What the post-processor puts before and after a single sequence ([CLS] / [SEP], <s> / </s>). */
mxl_status mxl_enc_specials_probe(const mxl_tokenizer *tok, mxl_enc_specials *out, mxl_error *err);

/* out = pre + content + post with at most `limit` ids in all; *truncated (may be NULL) says
 * whether content was cut. MXL_ERR_ARG when limit leaves no room beside the special tokens. */
mxl_status mxl_enc_tokenize_single(const mxl_tokenizer *tok, const mxl_enc_specials *sp, const char *text,
                                   int64_t limit, mxl_token_ids *out, bool *truncated, mxl_error *err);

/* Pair layout; requires exactly one special before and one after a sequence (MXL_ERR_UNSUPPORTED
 * otherwise). types (may be NULL) gets the token type ids. */
mxl_status mxl_enc_tokenize_pair(const mxl_tokenizer *tok, const mxl_enc_specials *sp, bool double_sep,
                                 const char *a, const char *b, int64_t limit, mxl_token_ids *ids,
                                 mxl_token_ids *types, mxl_error *err);

/* The longest_first split of a budget between sequences of n_a and n_b tokens. */
void mxl_enc_truncate_longest_first(int64_t n_a, int64_t n_b, int64_t budget, int64_t *keep_a, int64_t *keep_b);

/* tokenizer_config.json model_max_length in dir when a plausible positive integer (transformers
 * writes 1e30 for "none"), else -1. */
int64_t mxl_enc_tokenizer_max_length(const char *dir);
/* sentence_bert_config.json max_seq_length in dir, else -1. */
int64_t mxl_enc_st_max_seq_length(const char *dir);

/* True when s has only ASCII whitespace (or is empty). */
bool mxl_enc_blank(const char *s);

#endif
