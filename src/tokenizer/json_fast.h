/* json_fast.h - the fast JSON scanner for tokenizer.json's big members (see json_fast.c). Indexes
 * are byte offsets into s[0..n); TOK_JSON_BAD marks malformed input. */
#ifndef MXL_TOKENIZER_JSON_FAST_H
#define MXL_TOKENIZER_JSON_FAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tok_internal.h"

#define TOK_JSON_BAD SIZE_MAX

/* Index of the first non-whitespace byte at or after i (n when none). Inline for the common case
 * of no whitespace at all (after a value, before ':' or ','); runs go to tok_json_ws_run. */
size_t tok_json_ws_run(const char *s, size_t n, size_t i);
static inline size_t tok_json_ws(const char *s, size_t n, size_t i) {
    if (i < n && s[i] != ' ' && s[i] != '\n' && s[i] != '\r' && s[i] != '\t') return i;
    return tok_json_ws_run(s, n, i);
}
/* Parses the string at s[i] (which must be '"') into out (unescaped UTF-8; out may be NULL to
 * only validate); returns the index after the closing quote. */
size_t tok_json_string(const char *s, size_t n, size_t i, mxl_strbuf *out);
/* Returns the index just after the value starting at or after i. */
size_t tok_json_skip(const char *s, size_t n, size_t i);
/* Same, and *count (may be NULL) gets the number of top-level elements of an array / object
 * (commas at depth 1 plus one; an estimate used to size tables). */
size_t tok_json_skip_count(const char *s, size_t n, size_t i, size_t *count);
/* One pass over the top-level object: out = {vocab start, vocab end, merges start, merges end,
 * vocab element count, merges element count}; an end of 0 means absent (or a malformed document
 * at this level). */
void tok_json_find_model_spans(const char *s, size_t n, size_t out[6]);

#endif
