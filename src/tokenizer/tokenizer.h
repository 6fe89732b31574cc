/* tokenizer.h - text <-> token ids, exact to Hugging Face `tokenizers` (tokenizer.json) and to
 * llama.cpp (GGUF `tokenizer.ggml.*` vocabularies).
 *
 * Supported tokenizer.json components: models BPE (byte-level, byte_fallback, ignore_merges,
 * continuing_subword_prefix, end_of_word_suffix), WordPiece, WordLevel, Unigram; normalizers NFC/NFD/NFKC/
 * NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, BertNormalizer, ByteLevel, Sequence;
 * pre-tokenizers ByteLevel, Split, Metaspace, Whitespace, WhitespaceSplit, Punctuation, Digits,
 * BertPreTokenizer, CharDelimiterSplit, Sequence; post-processors TemplateProcessing,
 * BertProcessing, RobertaProcessing, ByteLevel, Sequence; decoders ByteLevel, Metaspace,
 * ByteFallback, Fuse, Strip, Replace, WordPiece, BPEDecoder, CTC, Sequence. Anything else is a
 * one-line MXL_ERR_UNSUPPORTED error naming the component.
 *
 * Special tokens in text: with MXL_TOK_PARSE_SPECIAL, added tokens marked special are recognised
 * in the text (what transformers does by default and what llama-server does for prompts built
 * from chat templates); without it they are tokenized as ordinary text (HF's
 * `encode_special_tokens=True`, llama.cpp's parse_special=false) — the safe default for user
 * text. Non-special added tokens are always recognised (both references do so).
 *
 * Invalid UTF-8 in input text: each maximal invalid subsequence is replaced by U+FFFD before
 * tokenizing (Python's `bytes.decode('utf-8', 'replace')`, which is how text reaches HF). */
#ifndef MXL_TOKENIZER_TOKENIZER_H
#define MXL_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct mxl_tokenizer mxl_tokenizer;
struct mxl_gguf;

/* A growable id list owned by the caller (zero-initialise; free with mxl_token_ids_free). */
typedef struct mxl_token_ids {
    int32_t *ids;
    size_t n, cap;
} mxl_token_ids;
void mxl_token_ids_free(mxl_token_ids *v);

/* Token attributes (bit set). */
enum {
    MXL_TOKEN_ATTR_NORMAL = 1u << 0,
    MXL_TOKEN_ATTR_ADDED = 1u << 1,   /* an added token (tokenizer.json) */
    MXL_TOKEN_ATTR_SPECIAL = 1u << 2, /* special: skipped by skip_special, parsed on request */
    MXL_TOKEN_ATTR_BYTE = 1u << 3,    /* <0xXX> byte token */
    MXL_TOKEN_ATTR_USER = 1u << 4,    /* GGUF user-defined */
    MXL_TOKEN_ATTR_UNKNOWN = 1u << 5,
    MXL_TOKEN_ATTR_UNUSED = 1u << 6,
};

/* Encode flags. */
/* ADD_SPECIAL: tokenizer.json runs its post-processor (TemplateProcessing BOS, [CLS]/[SEP], ...;
 * transformers' add_special_tokens=True); GGUF adds BOS / EOS per tokenizer.ggml.add_bos_token /
 * add_eos_token, and [CLS] ... [SEP] for bert (llama.cpp's add_special). */
#define MXL_TOK_ADD_SPECIAL 1u
#define MXL_TOK_PARSE_SPECIAL 2u /* recognise special tokens written in the text */

/* Loads tokenizer.json from a file or from bytes (name labels errors). */
mxl_status mxl_tokenizer_load_json_file(const char *path, mxl_tokenizer **out, mxl_error *err);
mxl_status mxl_tokenizer_load_json_bytes(const char *data, size_t len, const char *name,
                                         mxl_tokenizer **out, mxl_error *err);
/* Loads a GGUF vocabulary (tokenizer.ggml.model = llama | gpt2 | bert | gemma4). */
mxl_status mxl_tokenizer_load_gguf(const struct mxl_gguf *g, mxl_tokenizer **out, mxl_error *err);
mxl_status mxl_tokenizer_load_gguf_file(const char *path, mxl_tokenizer **out, mxl_error *err);
/* A model directory (tokenizer.json + optional tokenizer_config.json and
 * generation_config.json), a tokenizer.json file, or a .gguf file. */
mxl_status mxl_tokenizer_load(const char *path, mxl_tokenizer **out, mxl_error *err);
/* Reads tokenizer_config.json (add_bos_token, add_eos_token, bos/eos/pad/unk tokens,
 * chat_template) and generation_config.json (eos_token_id int or list); a missing file is fine. */
mxl_status mxl_tokenizer_load_configs(mxl_tokenizer *t, const char *dir, mxl_error *err);
void mxl_tokenizer_destroy(mxl_tokenizer *t);

/* Writes the GGUF vocabulary of g as Hugging Face files in dir: tokenizer.json and
 * tokenizer_config.json (bos / eos / unk / pad tokens, add_bos / add_eos, tokenizer.chat_template).
 * gpt2 vocabularies become byte-level BPE with the pre-tokenizer regexes tokenizer.ggml.pre names;
 * llama (SentencePiece) ones BPE with byte fallback and merges ranked by score; control and
 * user-defined tokens are added tokens. Other tokenizer.ggml.model values are
 * MXL_ERR_UNSUPPORTED, named (tok_export.c). */
mxl_status mxl_tokenizer_export_gguf(const struct mxl_gguf *g, const char *dir, mxl_error *err);

/* Appends the ids of text (len bytes) to out. */
mxl_status mxl_tokenizer_encode(const mxl_tokenizer *t, const char *text, size_t len,
                                unsigned flags, mxl_token_ids *out, mxl_error *err);
/* Decodes ids into a malloc'd NUL-terminated string (*out, *out_len). An id without a token is
 * an error naming it. */
mxl_status mxl_tokenizer_decode(const mxl_tokenizer *t, const int32_t *ids, size_t n,
                                bool skip_special, char **out, size_t *out_len, mxl_error *err);

/* Number of ids (max id + 1). */
uint32_t mxl_tokenizer_n_vocab(const mxl_tokenizer *t);
/* The raw vocabulary string of id (not decoded), NULL when id has none. */
const char *mxl_tokenizer_token(const mxl_tokenizer *t, int32_t id, size_t *len);
/* Id of an exact vocabulary string, -1 when absent. */
int32_t mxl_tokenizer_token_id(const mxl_tokenizer *t, const char *s, size_t len);
unsigned mxl_tokenizer_token_attr(const mxl_tokenizer *t, int32_t id);
/* Special ids (-1 when unknown). */
/* Fill-in-the-middle tokens (llama.cpp's llama_vocab_fim_*): the GGUF tokenizer.ggml.fim_*_token_id
 * keys, else the vocabulary's token of a name llama.cpp recognises (<|fim_prefix|>, <fim_prefix>,
 * <PRE>, ...); -1 when the vocabulary has none. */
enum { MXL_TOK_FIM_PRE, MXL_TOK_FIM_SUF, MXL_TOK_FIM_MID, MXL_TOK_FIM_PAD, MXL_TOK_FIM_REP, MXL_TOK_FIM_SEP };
int32_t mxl_tokenizer_fim_id(const mxl_tokenizer *t, int which);
int32_t mxl_tokenizer_bos_id(const mxl_tokenizer *t);
int32_t mxl_tokenizer_eos_id(const mxl_tokenizer *t);
int32_t mxl_tokenizer_pad_id(const mxl_tokenizer *t);
int32_t mxl_tokenizer_unk_id(const mxl_tokenizer *t);
bool mxl_tokenizer_add_bos(const mxl_tokenizer *t);
bool mxl_tokenizer_add_eos(const mxl_tokenizer *t);
/* Every id that ends generation (generation_config eos_token_id, the tokenizer's EOS). */
const int32_t *mxl_tokenizer_eos_ids(const mxl_tokenizer *t, size_t *n);
/* The chat template from tokenizer_config.json / tokenizer.chat_template, or NULL. */
const char *mxl_tokenizer_chat_template(const mxl_tokenizer *t);

/* Streaming detokenizer: feed ids one at a time, get text as soon as it is final. Follows HF's
 * DecodeStream: text is only emitted when the decoded string grew and does not end in U+FFFD, so
 * a UTF-8 character split over byte tokens is held back until complete. The pieces concatenate
 * to the full decode, except where a decoder rewrites text already emitted (ByteFallback turns a
 * streamed byte run into U+FFFD per byte once it proves invalid): HF's stream fails there; this
 * one keeps what it emitted and goes on with the ids since, decoded as a continuation. */
typedef struct mxl_detok_stream mxl_detok_stream;
mxl_status mxl_detok_stream_create(const mxl_tokenizer *t, bool skip_special,
                                   mxl_detok_stream **out, mxl_error *err);
/* Appends the newly final text (possibly nothing) to *out and *out_len (a malloc'd buffer the caller
 * frees; pass NULL/0 initially). */
mxl_status mxl_detok_stream_step(mxl_detok_stream *s, int32_t id, char **out, size_t *out_len,
                                 mxl_error *err);
/* Emits whatever is still held back (replacement characters for incomplete bytes). */
mxl_status mxl_detok_stream_flush(mxl_detok_stream *s, char **out, size_t *out_len,
                                  mxl_error *err);
void mxl_detok_stream_destroy(mxl_detok_stream *s);

#endif
