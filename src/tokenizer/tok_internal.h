/* tok_internal.h - types shared by the tokenizer's files (not part of the public API).
 *
 * The pipeline mirrors Hugging Face `tokenizers` (tokenizers/src/tokenizer/mod.rs):
 *   text -> added-token extraction (non-normalized tokens) -> normalizer per remaining piece ->
 *   added-token extraction (normalized tokens) -> pre-tokenizer (splits pieces) -> model (ids per
 *   piece) -> post-processor (special tokens) ;  decode: ids -> token strings -> decoder chain.
 * Offsets are not tracked (we only need ids); a piece remembers whether it starts at byte 0 of
 * the original text because Metaspace(prepend_scheme=first) depends on it.
 * GGUF vocabularies reuse the same pipeline with llama.cpp's model kinds (SPM, WPM). */
#ifndef MXL_TOKENIZER_TOK_INTERNAL_H
#define MXL_TOKENIZER_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/strbuf.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

/* text buffers are core/strbuf.h's mxl_strbuf, whose append is inline for the encode loop */

/* ---- growable id vector ---- */
bool tok_ids_push(mxl_token_ids *v, int32_t id);
bool tok_ids_append(mxl_token_ids *v, const int32_t *ids, size_t n);

/* ---- UTF-8 ---- */
/* Length of the (valid) UTF-8 sequence starting with byte c; 1 for stray bytes. */
static inline size_t tok_utf8_len(uint8_t c) {
    return c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
}
/* Decodes one code point of valid UTF-8 (caller guarantees validity and n > 0); returns bytes. */
size_t tok_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* Appends s to out replacing each maximal invalid subsequence by U+FFFD (Rust's
 * String::from_utf8_lossy / the Unicode "maximal subpart" practice). Returns false on OOM. */
bool tok_utf8_lossy(const char *s, size_t n, mxl_strbuf *out);
bool tok_utf8_valid(const char *s, size_t n);
/* utf8proc_map (decompose/compose per `opts`) into a buffer of the allocation seam (utf8proc_map
 * itself mallocs): returns the byte length of *out (mxl_free it), or a negative utf8proc error
 * code (UTF8PROC_ERROR_NOMEM when the buffer could not be had). */
ptrdiff_t tok_utf8proc_map(const char *s, size_t n, int opts, char **out);
/* Unicode predicates matching Rust's char methods as HF uses them. */
bool tok_cp_is_whitespace(uint32_t cp);   /* char::is_whitespace (White_Space) */
bool tok_cp_is_alnum(uint32_t cp);        /* char::is_alphanumeric */
bool tok_cp_is_punct(uint32_t cp);        /* Unicode P* */
bool tok_cp_is_bert_punct(uint32_t cp);   /* ASCII punctuation or P* */
bool tok_cp_is_other(uint32_t cp);        /* C* (control, format, ...) */
bool tok_cp_is_mn(uint32_t cp);           /* Mn (combining mark) */
bool tok_cp_is_chinese(uint32_t cp);      /* BERT's CJK ranges */
bool tok_cp_is_digit(uint32_t cp);        /* char::is_numeric (N*) */

/* GPT-2 byte<->unicode table. */
extern const uint16_t tok_byte_to_cp[256];
/* -1 when cp is not in the table. */
int tok_cp_to_byte(uint32_t cp);

/* ---- string -> id map (owns a copy of its keys) ---- */
typedef struct tok_map_entry {
    uint32_t off, len; /* key in pool */
    int32_t id;
    uint32_t hash;
} tok_map_entry;
typedef struct tok_map {
    mxl_strbuf pool;
    tok_map_entry *ents;
    size_t n_ents, cap_ents;
    uint32_t *slots; /* entry index + 1, 0 = empty */
    size_t n_slots;
} tok_map;
uint32_t tok_hash(const char *s, size_t n);
/* Inserts key->id; when the key already exists its id is left alone and *dup set (may be NULL).
 * Returns false on OOM or a key over 4 GiB. */
bool tok_map_put(tok_map *m, const char *s, size_t n, int32_t id, bool *dup);
/* -1 when absent. */
int32_t tok_map_get(const tok_map *m, const char *s, size_t n);
/* ids[i] = tok_map_get(m, keys[i], lens[i]) for i < n, with the memory accesses of up to
 * TOK_MAP_BATCH keys overlapped (prefetched): the merge table of a large BPE vocabulary does
 * millions of lookups at load. */
#define TOK_MAP_BATCH 32
/* Hints that key s is about to be looked up or put. */
void tok_map_prefetch(const tok_map *m, const char *s, size_t n);
void tok_map_get_many(const tok_map *m, const char *const *keys, const size_t *lens, size_t n, int32_t *ids);
/* Entry index + 1 of key, 0 when absent. */
uint32_t tok_map_index(const tok_map *m, const char *s, size_t n);
/* Re-points an existing key at id (false when absent). */
bool tok_map_update(tok_map *m, const char *s, size_t n, int32_t id);
/* Pre-sizes for n entries. */
bool tok_map_reserve(tok_map *m, size_t n);
void tok_map_free(tok_map *m);

/* ---- (id, id) -> (rank, new id) map for BPE merges ---- */
typedef struct tok_pair_slot {
    uint64_t key;
    uint32_t rank; /* UINT32_MAX = empty */
    int32_t new_id;
} tok_pair_slot;
typedef struct tok_pairmap {
    tok_pair_slot *slots;
    size_t n_slots, n;
} tok_pairmap;
bool tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t new_id);
bool tok_pairmap_reserve(tok_pairmap *m, size_t n);
/* The BPE merge table from model.merges (merges_load.c): from the list's bytes s[start..end)
 * ('[' .. ']', read in place, two threads for big files) or from a jansson array. Errors name
 * the first faulty merge by index. The vocabulary and continuing prefix must be loaded. */
struct json_t;
mxl_status tok_merges_load_fast(struct mxl_tokenizer *t, const char *s, size_t start, size_t end, mxl_error *err);
mxl_status tok_merges_load_json(struct mxl_tokenizer *t, const struct json_t *merges, mxl_error *err);
/* The Split regexes (in order) and ignore_merges of a tokenizer.ggml.pre name (NULL / "": the
 * default); false when unknown. */
bool tok_gguf_pre_lookup(const char *pre, const char *const **re, int *n_re, bool *ignore_merges);
/* Hints that (a, b) is about to be put or looked up. */
void tok_pairmap_prefetch(const tok_pairmap *m, int32_t a, int32_t b);
/* false when absent. */
bool tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *new_id);
void tok_pairmap_free(tok_pairmap *m);

/* ---- regex (PCRE2, UTF + UCP, JIT) ---- */
typedef struct tok_regex tok_regex;
/* Compiles pattern (UTF-8, n bytes). Literal strings are escaped by the caller via literal=true. */
mxl_status tok_regex_compile(const char *pat, size_t n, bool literal, tok_regex **out,
                             char *errbuf, size_t errcap);
void tok_regex_free(tok_regex *r);
/* Splits s into alternating (offset, len, is_match) spans covering all of s, like HF's
 * Pattern::find_matches (empty matches produce no span). */
typedef struct tok_span {
    size_t off, len;
    bool match;
} tok_span;
typedef struct tok_spans {
    tok_span *v;
    size_t n, cap;
} tok_spans;
mxl_status tok_regex_find(const tok_regex *r, const char *s, size_t n, tok_spans *out);
void tok_spans_free(tok_spans *s);

/* ---- pieces flowing through the pipeline ---- */
typedef struct tok_piece {
    size_t off, len; /* into tok_pieces.text */
    int32_t token;   /* >= 0 when the piece is an already-decided token (added token) */
    bool at_start;   /* starts at byte 0 of the original text */
} tok_piece;
typedef struct tok_pieces {
    mxl_strbuf text;
    tok_piece *v;
    size_t n, cap;
} tok_pieces;
bool tok_pieces_add(tok_pieces *p, const char *s, size_t n, int32_t token, bool at_start);
void tok_pieces_reset(tok_pieces *p);
void tok_pieces_free(tok_pieces *p);

/* ---- split behaviours (HF SplitDelimiterBehavior) ---- */
typedef enum tok_split_behavior {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_WITH_PREVIOUS,
    TOK_SPLIT_MERGED_WITH_NEXT,
    TOK_SPLIT_CONTIGUOUS,
} tok_split_behavior;
/* Applies the behaviour to spans (in place) producing the kept spans (match flag cleared). */
void tok_spans_apply_behavior(tok_spans *sp, tok_split_behavior b);

/* ---- normalizers ---- */
typedef enum tok_norm_kind {
    TOK_NORM_SEQUENCE,
    TOK_NORM_NFC,
    TOK_NORM_NFD,
    TOK_NORM_NFKC,
    TOK_NORM_NFKD,
    TOK_NORM_LOWERCASE,
    TOK_NORM_STRIP,
    TOK_NORM_STRIP_ACCENTS,
    TOK_NORM_REPLACE,
    TOK_NORM_PREPEND,
    TOK_NORM_BERT,
    TOK_NORM_BYTE_LEVEL,
    TOK_NORM_PRECOMPILED,
} tok_norm_kind;
/* The SentencePiece charsmap of a Precompiled normalizer (norm_precompiled.c). */
typedef struct tok_precompiled tok_precompiled;
/* Decodes and checks a base64 precompiled_charsmap; on failure *why says what is wrong. */
mxl_status tok_precompiled_parse(const char *b64, size_t len, tok_precompiled **out, const char **why);
void tok_precompiled_free(tok_precompiled *p);
/* Appends the normalized s to out. */
mxl_status tok_precompiled_normalize(const tok_precompiled *p, const char *s, size_t len, mxl_strbuf *out);

typedef struct tok_normalizer {
    tok_norm_kind kind;
    struct tok_normalizer **children;
    size_t n_children;
    bool left, right;                /* Strip */
    bool clean_text, handle_chinese, lowercase; /* Bert */
    int strip_accents;               /* Bert: -1 = follow lowercase, 0, 1 */
    tok_regex *re;                   /* Replace */
    char *content;                   /* Replace content / Prepend text */
    size_t content_len;
    tok_precompiled *charsmap;       /* Precompiled */
} tok_normalizer;
void tok_normalizer_free(tok_normalizer *n);
/* Normalizes s into out (out is cleared first). */
mxl_status tok_normalize(const tok_normalizer *n, const char *s, size_t len, mxl_strbuf *out);

/* ---- pre-tokenizers ---- */
typedef enum tok_pre_kind {
    TOK_PRE_SEQUENCE,
    TOK_PRE_BYTE_LEVEL,
    TOK_PRE_SPLIT,
    TOK_PRE_METASPACE,
    TOK_PRE_WHITESPACE,
    TOK_PRE_WHITESPACE_SPLIT,
    TOK_PRE_PUNCTUATION,
    TOK_PRE_DIGITS,
    TOK_PRE_BERT,
    TOK_PRE_CHAR_DELIMITER,
} tok_pre_kind;
typedef enum tok_prepend_scheme {
    TOK_PREPEND_ALWAYS,
    TOK_PREPEND_FIRST,
    TOK_PREPEND_NEVER,
} tok_prepend_scheme;
typedef struct tok_pretok {
    tok_pre_kind kind;
    struct tok_pretok **children;
    size_t n_children;
    tok_regex *re;             /* Split, ByteLevel (use_regex), Whitespace */
    tok_split_behavior behavior;
    bool invert;
    bool add_prefix_space;     /* ByteLevel */
    bool use_regex;            /* ByteLevel */
    bool individual_digits;    /* Digits */
    bool split;                /* Metaspace */
    tok_prepend_scheme prepend;/* Metaspace */
    uint32_t replacement;      /* Metaspace replacement / CharDelimiterSplit delimiter */
} tok_pretok;
void tok_pretok_free(tok_pretok *p);
/* Splits every text piece of in into out (out reset first); token pieces pass through. */
mxl_status tok_pretokenize(const tok_pretok *p, tok_pieces *in, tok_pieces *out);
/* The GPT-2 pattern of ByteLevel(use_regex=true). */
extern const char tok_gpt2_pattern[];

/* ---- models ---- */
typedef enum tok_model_kind {
    TOK_MODEL_BPE,
    TOK_MODEL_WORDPIECE,
    TOK_MODEL_WORDLEVEL,
    TOK_MODEL_SPM,  /* llama.cpp's SentencePiece-by-score merges (GGUF "llama") */
    TOK_MODEL_WPM,  /* llama.cpp's WordPiece (GGUF "bert", tokens carry a U+2581 word prefix) */
    TOK_MODEL_UNIGRAM, /* HF Unigram (SentencePiece unigram LM, Viterbi best path) */
} tok_model_kind;
typedef struct tok_model {
    tok_model_kind kind;
    tok_pairmap merges;
    int32_t unk_id;            /* -1 none */
    bool fuse_unk, byte_fallback, ignore_merges;
    bool newline_words_whole;  /* GGUF gemma4: an all-newline word in the vocab is one token */
    bool gguf_byte_tokens;     /* GGUF BPE: an unknown final symbol becomes byte tokens */
    bool gguf_byte_encode;     /* ...looked up as GPT-2 byte characters (else <0xXX>) */
    char *cont_prefix;         /* continuing_subword_prefix (BPE, WordPiece) */
    size_t cont_prefix_len;
    char *eow_suffix;          /* end_of_word_suffix */
    size_t eow_suffix_len;
    size_t max_input_chars;    /* WordPiece */
    float *scores;             /* SPM: score per id */
    double *uscores;           /* Unigram: log-probability per id */
    double unk_score;          /* Unigram: min score - 10 (kUnkPenalty) */
    size_t max_piece_len;      /* Unigram: longest piece in bytes */
    size_t max_token_len;      /* WPM */
    int32_t byte_ids[256];     /* <0xXX> ids, -1 when absent */
    int32_t *bmp_ids;          /* [0x10000] id of each one-character BMP token (-1 none); BPE
                                * without prefix/suffix only, to skip hashing per character */
} tok_model;
/* Appends the ids of one pre-tokenized piece. */
mxl_status tok_model_tokenize(const mxl_tokenizer *t, const char *s, size_t n, mxl_token_ids *out);

/* ---- added tokens ---- */
typedef struct tok_added {
    char *content;
    size_t len;
    int32_t id;
    bool special, single_word, lstrip, rstrip, normalized;
    char *norm_content; /* content after the normalizer (normalized tokens) */
    size_t norm_len;
} tok_added;
/* Splits each text piece of in around added tokens (normalized == want_normalized) into out.
 * parse_special=false leaves special tokens as text (HF's encode_special_tokens=true). */
mxl_status tok_added_split(const mxl_tokenizer *t, bool want_normalized, bool parse_special,
                           tok_pieces *in, tok_pieces *out);
/* Builds the matching tables after t->added is filled and the normalizer is known. */
mxl_status tok_added_build(mxl_tokenizer *t, mxl_error *err);

/* ---- post-processors ---- */
typedef enum tok_post_kind {
    TOK_POST_TEMPLATE,
    TOK_POST_BERT,
    TOK_POST_ROBERTA,
    TOK_POST_BYTE_LEVEL,
    TOK_POST_SEQUENCE,
} tok_post_kind;
typedef struct tok_post {
    tok_post_kind kind;
    struct tok_post **children;
    size_t n_children;
    /* Template single: items; id >= 0 special ids run, -1 = the sequence. */
    int32_t *single;
    size_t n_single;
    int32_t cls_id, sep_id;
} tok_post;
void tok_post_free(tok_post *p);
mxl_status tok_post_apply(const tok_post *p, mxl_token_ids *ids);

/* ---- decoders ---- */
typedef enum tok_dec_kind {
    TOK_DEC_SEQUENCE,
    TOK_DEC_BYTE_LEVEL,
    TOK_DEC_METASPACE,
    TOK_DEC_BYTE_FALLBACK,
    TOK_DEC_FUSE,
    TOK_DEC_STRIP,
    TOK_DEC_REPLACE,
    TOK_DEC_WORDPIECE,
    TOK_DEC_BPE,
    TOK_DEC_CTC,
} tok_dec_kind;
typedef struct tok_decoder {
    tok_dec_kind kind;
    struct tok_decoder **children;
    size_t n_children;
    tok_regex *re;          /* Replace */
    char *content;          /* Replace content, WordPiece prefix, BPE suffix, CTC pad */
    size_t content_len;
    char *content2;         /* CTC word delimiter */
    size_t content2_len;
    uint32_t ch;            /* Strip content, Metaspace replacement */
    size_t start, stop;     /* Strip */
    bool cleanup;           /* WordPiece, CTC */
    tok_prepend_scheme prepend; /* Metaspace */
} tok_decoder;
void tok_decoder_free(tok_decoder *d);
/* A list of strings (the tokens being decoded). */
typedef struct tok_strs {
    mxl_strbuf *v;
    size_t n, cap;
} tok_strs;
bool tok_strs_push(tok_strs *s, const char *p, size_t n);
void tok_strs_free(tok_strs *s);
/* Runs the decoder chain on toks in place. cont: the tokens continue a sequence rather than start
 * the text (see tok_decode), so start-of-text rules are not applied to the first of them. */
mxl_status tok_decode_chain(const tok_decoder *d, bool cont, tok_strs *toks);

/* ---- the tokenizer ---- */
typedef enum tok_flavor {
    TOK_FLAVOR_HF,   /* tokenizer.json */
    TOK_FLAVOR_GGUF, /* tokenizer.ggml.*: llama.cpp's special-token partition and decoding */
} tok_flavor;

struct mxl_tokenizer {
    tok_flavor flavor;
    char name[256];
    tok_map vocab;           /* model vocabulary: string -> id (GGUF: every token) */
    uint32_t n_ids;          /* max id + 1 */
    uint32_t *id_ent;        /* [n_ids] entry index + 1 (bit 31 set: in added_map), 0 = none */
    uint8_t *id_attr;        /* [n_ids] MXL_TOKEN_ATTR_* */
    tok_model model;
    tok_normalizer *norm;
    tok_pretok *pre;
    tok_post *post;
    tok_decoder *dec;
    tok_map added_map;       /* added-token content -> id */
    tok_added *added;
    size_t n_added;
    /* matching tables for [0] non-normalized and [1] normalized added tokens: indexes into added
     * grouped by first byte (bucket[b]..bucket[b+1]) and sorted longest first */
    uint32_t *added_order[2];
    uint32_t added_bucket[2][257];
    /* pattern -> added index, and the distinct pattern lengths (longest first) per kind, so a
     * position is tested with one hash lookup per length instead of one memcmp per token */
    tok_map added_lookup[2];
    size_t *added_lens[2];      /* per first byte b: lens at added_lens_at[k][b]..[b+1] */
    uint32_t added_lens_at[2][257];
    /* GGUF specifics */
    bool gguf_add_space_prefix;
    bool gguf_escape_whitespace;
    int32_t *gguf_special;   /* ids to partition on, longest text first */
    size_t n_gguf_special;
    /* configuration (tokenizer_config.json / generation_config.json / GGUF keys) */
    int32_t bos_id, eos_id, pad_id, unk_id, sep_id, cls_id, mask_id;
    int32_t fim_meta[6];     /* GGUF tokenizer.ggml.fim_*_token_id (MXL_TOK_FIM_*), -1 when absent */
    bool add_bos, add_eos;
    int32_t *eos_ids;
    size_t n_eos_ids;
    char *chat_template;
};

/* Token string of id (NULL when id has none). */
const char *tok_id_str(const mxl_tokenizer *t, int32_t id, size_t *len);
/* mxl_tokenizer_decode of ids that start the text (cont false) or continue it (cont true: the
 * result is what those ids add in the middle of a longer decode, which the streaming
 * detokenizer's window needs; without it a window starting with e.g. spaces under a left Strip of
 * the fused text would lose them). */
mxl_status tok_decode(const mxl_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                      bool cont, char **out, size_t *out_len, mxl_error *err);
/* Adds a model-vocabulary entry (added=false) or an added token's content (added=true; it then
 * names the id for decoding). Grows the id tables. False on OOM / bad id. */
bool tok_vocab_set(mxl_tokenizer *t, const char *s, size_t n, int32_t id, bool added);
/* GGUF flavour: llama.cpp's tokenizer_st_partition over the special-token cache. */
mxl_status tok_gguf_partition(const mxl_tokenizer *t, bool parse_special, tok_pieces *in,
                              tok_pieces *out);
mxl_tokenizer *tok_alloc(const char *name);

/* loader_spm.c: the SentencePiece model model_path of directory dir (no tokenizer.json there),
 * for the tokenizer classes known there (tokenizer_config.json tokenizer_class: SiglipTokenizer);
 * others refused by name. The caller reads the directory's configs after. */
mxl_status mxl_tokenizer_load_spiece(const char *dir, const char *model_path, mxl_tokenizer **out, mxl_error *err);
/* The same from the model file's bytes, as SiglipTokenizer runs it (lower: do_lower_case;
 * eos_piece: the piece appended); name labels errors. */
mxl_status mxl_tokenizer_load_siglip_spm(const uint8_t *data, size_t n, const char *name, bool lower, const char *eos_piece,
                                         mxl_tokenizer **out, mxl_error *err);

#endif
