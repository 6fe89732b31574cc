/* grammar.h - constrained output with llama.cpp's GBNF grammars (grammars/README.md): a parser
 * that compiles grammar text into rules, and a matcher that follows llama.cpp's src/llama-grammar
 * design: the parse state is a set of stacks of grammar positions, advanced one Unicode code
 * point at a time, plus the partial UTF-8 sequence a token may leave open (tokens are byte
 * strings; a character can be split over several tokens).
 *
 * GBNF accepted: rules `name ::= alternatives` (names of [a-zA-Z0-9-]), alternation `|`,
 * sequences, grouping `( )`, repetition `* + ?` and `{m}`, `{m,}`, `{m,n}` (at most 2000),
 * string literals "..." and character classes [...] / [^...] with the escapes \x.. \u....
 * \U........ \t \r \n \\ \" \[ \] \-, `.` (any character), comments from `#` to the end of the
 * line; generation starts at `root`. Newlines end a rule except inside parentheses or after `|`.
 * Left recursion is refused (the stack matcher cannot run it), as llama.cpp does.
 *
 * Matched text must be valid UTF-8 in the strict sense (no overlong forms, surrogates or code
 * points past U+10FFFF), judged the same whether it comes whole or split anywhere into pieces. A
 * state whose stacks outgrow their limits (a very ambiguous grammar) refuses further input rather
 * than use unbounded memory or time; mxl_grammar_state_accept_token says so in its error.
 *
 * The compiled grammar is immutable and may be shared; a state belongs to one generation. */
#ifndef MXL_ENGINE_GRAMMAR_H
#define MXL_ENGINE_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct mxl_grammar mxl_grammar;
typedef struct mxl_grammar_state mxl_grammar_state;
typedef struct mxl_grammar_vocab mxl_grammar_vocab;

/* Compiles GBNF text (len bytes; need not be NUL-terminated). Errors are one line: "grammar:
 * <problem> at line L column C" or "grammar: undefined rule 'x'" / "no 'root' rule". */
mxl_status mxl_grammar_parse(const char *text, size_t len, mxl_grammar **out, mxl_error *err);
void mxl_grammar_destroy(mxl_grammar *g);
/* Number of rules after expansion (repetitions and groups become rules of their own). */
size_t mxl_grammar_n_rules(const mxl_grammar *g);

/* A parse state at the start of `root`. g must outlive the state. */
mxl_status mxl_grammar_state_create(const mxl_grammar *g, mxl_grammar_state **out, mxl_error *err);
void mxl_grammar_state_destroy(mxl_grammar_state *st);
/* Back to the start of `root`. */
void mxl_grammar_state_reset(mxl_grammar_state *st);
/* The text accepted so far is a complete sentence of the grammar (EOS may follow). */
bool mxl_grammar_state_can_end(const mxl_grammar_state *st);
/* Advances over bytes (any UTF-8 split). Returns false, leaving the state as it was, when the
 * grammar cannot continue with them. */
bool mxl_grammar_state_accept_bytes(mxl_grammar_state *st, const char *bytes, size_t len);
/* Whole-string check: from a fresh state, text is accepted and ends a sentence. */
bool mxl_grammar_accepts(const mxl_grammar *g, const char *text, size_t len);

/* ---- token level -------------------------------------------------------------------------- */

/* The token texts the matcher reads: bytes per id (llama.cpp's token_to_piece with special
 * tokens rendered), and which ids end generation (allowed only where the grammar can end). A
 * token with empty text or text starting with a NUL byte is never allowed, as in llama.cpp.
 * Immutable once built; shareable between states. */
typedef mxl_status (*mxl_grammar_piece_fn)(void *ctx, int32_t id, const char **text, size_t *len, bool *is_eog,
                                           mxl_error *err);
mxl_status mxl_grammar_vocab_create(int32_t n_vocab, mxl_grammar_piece_fn piece, void *ctx, mxl_grammar_vocab **out,
                                    mxl_error *err);
void mxl_grammar_vocab_destroy(mxl_grammar_vocab *v);
int32_t mxl_grammar_vocab_size(const mxl_grammar_vocab *v);

/* Whether token id may come next. */
bool mxl_grammar_state_allows(mxl_grammar_state *st, const mxl_grammar_vocab *v, int32_t id);
/* Sets logits[ids[i]] = -INFINITY for every listed token the grammar rejects (ids NULL: the ids
 * 0..n-1, n cut to the vocabulary's size). Tokens already at -INFINITY are skipped. Reports in
 * *n_allowed how many listed tokens remain. Allocates scratch; MXL_ERR_NOMEM on failure. */
mxl_status mxl_grammar_state_mask(mxl_grammar_state *st, const mxl_grammar_vocab *v, float *logits, const int32_t *ids,
                                  size_t n, size_t *n_allowed, mxl_error *err);
/* Advances over the chosen token: an end-of-generation id is accepted where the grammar can end;
 * anything else must be allowed (MXL_ERR_ARG naming the token otherwise). */
mxl_status mxl_grammar_state_accept_token(mxl_grammar_state *st, const mxl_grammar_vocab *v, int32_t id, mxl_error *err);

#endif
