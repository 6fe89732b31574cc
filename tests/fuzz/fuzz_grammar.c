/* fuzz_grammar.c - libFuzzer harness for the GBNF grammar parser and matcher (engine/grammar.h):
 * the input is GBNF text, optionally followed by a NUL byte and text for the matcher. When the
 * grammar parses, the text is fed
 *   - whole (mxl_grammar_state_accept_bytes, mxl_grammar_accepts) and byte by byte,
 *   - as tokens of a small vocabulary (fixed pieces: ASCII, JSON-ish words, UTF-8 characters and
 *     their split bytes, invalid UTF-8, NUL, an empty token, an end-of-generation token; plus the
 *     text cut into chunks) through what the sampler calls: mxl_grammar_state_mask over the whole
 *     vocabulary, mxl_grammar_state_allows, mxl_grammar_state_accept_token,
 *   - and a short walk that, like the sampler, masks, picks an allowed token (chosen by the text's
 *     bytes) and accepts it.
 * Work is bounded (text, mask calls and walk steps are capped) so every input runs quickly.
 *
 * Asserts (abort()), besides no crash / leak / UB:
 *   - the whole text is accepted in one call iff it is accepted byte by byte (the same code
 *     points; a partial UTF-8 sequence that some stack can complete must not be refused), and the
 *     two end in states that agree on can_end;
 *   - mxl_grammar_accepts(text) implies the state accepted the text and can end;
 *   - the mask (both forms) and mxl_grammar_state_allows agree on every token (checked at a few
 *     positions, and for every token the walk picks), EOG tokens are allowed iff the state can
 *     end, never-allowed tokens (empty, NUL first) are masked;
 *   - a token the state allows is accepted by mxl_grammar_state_accept_token (the sampler commits
 *     what the mask left) unless the parse state hit its size limit (an error that says so), and
 *     a token that is accepted was allowed;
 *   - a refused token leaves the state as it was. */
#include <math.h>
#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TEXT 2048      /* bytes of text fed */
#define MAX_CHUNKS 48      /* text chunks added to the vocabulary */
#define MAX_MASKS 6        /* positions whose mask is checked against allows() for every token */
#define WALK_STEPS 24

/* token 0 is the EOG token; its text is never matched */
#define T(s) {s, sizeof(s) - 1}
static const struct {
    const char *s;
    size_t n;
} FIXED[] = {
    T("</s>"), T(""), T("\0"), T("a\0b"), T("{"), T("}"), T("["), T("]"), T("\""), T(":"), T(","), T(" "), T("\n"),
    T("\t"), T("\\"), T("a"), T("b"), T("x"), T("z"), T("0"), T("1"), T("9"), T("-"), T("."), T("e"), T("true"),
    T("false"), T("null"), T("{\""), T("\":"), T("\", \""), T("\"}"), T(", "), T("  "), T("12"), T("ab"), T("abc"),
    T("\\n"), T("\\u00"), T("\xC3\xA9"), T("\xC3"), T("\xA9"), T("\xE2\x82\xAC"), T("\xE2\x82"), T("\x82\xAC"),
    T("\xE2"), T("\xAC"), T("\xF0\x9F\x98\x80"), T("\xF0\x9F"), T("\x98\x80"), T("\xF0"), T("\xE4\xB8\xAD"),
    T("\xFF"), T("\xC0\x80"), T("\x80"), T("\xE0\x80"), T("\xED\xA0\x80"), T("\xF4\x90\x80\x80"),
    T("<tool_call>"), T("```"),
};
#undef T
#define N_FIXED (sizeof FIXED / sizeof FIXED[0])

typedef struct vocab_src {
    const char *text[N_FIXED + MAX_CHUNKS];
    size_t len[N_FIXED + MAX_CHUNKS];
    int32_t n;
} vocab_src;

static mxl_status piece(void *ctx, int32_t id, const char **text, size_t *len, bool *is_eog, mxl_error *err) {
    (void)err;
    const vocab_src *v = ctx;
    *text = v->text[id];
    *len = v->len[id];
    *is_eog = id == 0;
    return MXL_OK;
}

static bool is_limit_error(const mxl_error *err) { return strstr(err->msg, "too large") || strstr(err->msg, "memory"); }

/* What the sampler does over the vocabulary at one position: one mask (every 3rd token already
 * at -inf, as the chain leaves them) fills allowed[]. With cross_check, allows() is also asked for
 * every token and must agree, EOG must be allowed iff the state can end, never-allowed tokens
 * (empty, NUL first) must be masked, and the listed-ids form of the mask must agree. false when
 * the mask refused (only for the state size limit). */
static bool position(mxl_grammar_state *st, const mxl_grammar_vocab *v, const vocab_src *src, bool cross_check,
                     bool *allowed, float *logits) {
    for (int32_t i = 0; i < src->n; i++) logits[i] = (i % 3 == 2) ? -INFINITY : 0.0f;
    size_t n_allowed = 0, want = 0;
    mxl_error err = {0};
    if (mxl_grammar_state_mask(st, v, logits, NULL, (size_t)src->n, &n_allowed, &err) != MXL_OK) {
        if (!is_limit_error(&err)) abort();
        return false;
    }
    for (int32_t i = 0; i < src->n; i++) {
        if (i % 3 == 2 && logits[i] != -INFINITY) abort(); /* skipped, stays masked */
        bool kept = logits[i] == 0.0f;
        if (!kept && logits[i] != -INFINITY) abort();
        want += kept;
    }
    if (want != n_allowed) abort();
    /* the listed-ids form, every token once in reverse order, gives every token's answer */
    int32_t ids[N_FIXED + MAX_CHUNKS];
    for (int32_t i = 0; i < src->n; i++) ids[i] = src->n - 1 - i, logits[i] = 0.0f;
    if (mxl_grammar_state_mask(st, v, logits, ids, (size_t)src->n, &n_allowed, &err) != MXL_OK) {
        if (!is_limit_error(&err)) abort();
        return false;
    }
    for (int32_t i = 0; i < src->n; i++) allowed[i] = logits[i] == 0.0f;
    if (allowed[0] != mxl_grammar_state_can_end(st)) abort();
    for (int32_t i = 1; i < src->n; i++)
        if (allowed[i] && (src->len[i] == 0 || src->text[i][0] == 0)) abort(); /* empty or NUL-first: never */
    if (cross_check)
        for (int32_t i = 0; i < src->n; i++)
            if (mxl_grammar_state_allows(st, v, i) != allowed[i]) abort();
    return true;
}

/* Accepts token id (as the sampler's commit does) and checks it against allows(). */
static bool take(mxl_grammar_state *st, const mxl_grammar_vocab *v, int32_t id, bool allowed) {
    bool could_end = mxl_grammar_state_can_end(st);
    mxl_error err = {0};
    mxl_status s = mxl_grammar_state_accept_token(st, v, id, &err);
    if (s == MXL_OK && !allowed) {
        fprintf(stderr, "fuzz_grammar: token %d accepted but not allowed\n", id);
        abort();
    }
    if (s != MXL_OK) {
        if (allowed && !is_limit_error(&err)) {
            fprintf(stderr, "fuzz_grammar: token %d allowed but refused: %s\n", id, err.msg);
            abort();
        }
        if (mxl_grammar_state_can_end(st) != could_end) abort(); /* a refusal changes nothing */
    }
    return s == MXL_OK && id != 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 16384) return 0;
    const char *in = (const char *)data;
    const char *nul = memchr(in, 0, size);
    size_t glen = nul ? (size_t)(nul - in) : size;
    const char *text = nul ? nul + 1 : "";
    size_t tlen = nul ? size - glen - 1 : 0;
    if (tlen > MAX_TEXT) tlen = MAX_TEXT;

    mxl_grammar *g = NULL;
    mxl_error err = {0};
    if (mxl_grammar_parse(in, glen, &g, &err) != MXL_OK) {
        if (!err.msg[0]) abort(); /* errors say what went wrong */
        return 0;
    }
    if (mxl_grammar_n_rules(g) == 0) abort();
    mxl_grammar_state *st = NULL, *st2 = NULL;
    if (mxl_grammar_state_create(g, &st, &err) != MXL_OK || mxl_grammar_state_create(g, &st2, &err) != MXL_OK) {
        mxl_grammar_state_destroy(st);
        mxl_grammar_destroy(g);
        return 0;
    }

    /* 1. whole text vs byte by byte */
    bool whole = mxl_grammar_state_accept_bytes(st, text, tlen);
    bool bytewise = true;
    for (size_t i = 0; i < tlen && bytewise; i++) bytewise = mxl_grammar_state_accept_bytes(st2, text + i, 1);
    if (whole != bytewise) abort();
    if (whole && mxl_grammar_state_can_end(st) != mxl_grammar_state_can_end(st2)) abort();
    if (mxl_grammar_accepts(g, text, tlen) && !(whole && mxl_grammar_state_can_end(st))) abort();

    /* 2. the text as tokens: chunks of 1..4 bytes (lengths from the text's own bytes) */
    vocab_src src = {.n = 0};
    for (size_t i = 0; i < N_FIXED; i++) src.text[src.n] = FIXED[i].s, src.len[src.n++] = FIXED[i].n;
    int32_t first_chunk = src.n;
    for (size_t at = 0; at < tlen && src.n < (int32_t)(N_FIXED + MAX_CHUNKS);) {
        size_t n = 1 + ((unsigned char)text[at] % 4);
        if (n > tlen - at) n = tlen - at;
        src.text[src.n] = text + at;
        src.len[src.n++] = n;
        at += n;
    }
    mxl_grammar_vocab *v = NULL;
    if (mxl_grammar_vocab_create(src.n, piece, &src, &v, &err) != MXL_OK) abort();
    if (mxl_grammar_vocab_size(v) != src.n) abort();
    bool allowed[N_FIXED + MAX_CHUNKS];
    float logits[N_FIXED + MAX_CHUNKS];
    int masks = 0;
    mxl_grammar_state_reset(st);
    for (int32_t id = first_chunk; id < src.n; id++) {
        bool ok;
        if ((id - first_chunk) % 4 == 0 && masks < MAX_MASKS) {
            masks++;
            if (!position(st, v, &src, true, allowed, logits)) break;
            ok = allowed[id];
        } else {
            ok = mxl_grammar_state_allows(st, v, id);
        }
        if (!take(st, v, id, ok)) break;
    }
    if (position(st, v, &src, masks++ < MAX_MASKS, allowed, logits)) take(st, v, 0, allowed[0]);

    /* 3. a sampler-like walk: mask, pick the k-th allowed token, accept it */
    mxl_grammar_state_reset(st);
    for (int step = 0; step < WALK_STEPS; step++) {
        if (!position(st, v, &src, masks++ < MAX_MASKS, allowed, logits)) break;
        int32_t n_ok = 0;
        for (int32_t i = 0; i < src.n; i++) n_ok += allowed[i];
        if (n_ok == 0) break;
        int32_t k = (int32_t)((tlen ? (unsigned char)text[step % tlen] : step) % (unsigned)n_ok), pick = -1;
        for (int32_t i = 0; i < src.n && pick < 0; i++)
            if (allowed[i] && k-- == 0) pick = i;
        if (!mxl_grammar_state_allows(st, v, pick)) abort(); /* the mask's answer */
        if (!take(st, v, pick, true)) break;
    }

    mxl_grammar_vocab_destroy(v);
    mxl_grammar_state_destroy(st);
    mxl_grammar_state_destroy(st2);
    mxl_grammar_destroy(g);
    return 0;
}
