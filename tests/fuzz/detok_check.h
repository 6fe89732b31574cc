/* detok_check.h - the streaming detokenizer's contract (tokenizer.h mxl_detok_stream,
 * src/tokenizer/detok_stream.c) as one oracle for the fuzz harnesses that stream ids
 * (fuzz_detok.c, fuzz_tokenizer.c, fuzz_gguf_tokenizer.c), with the checks they share:
 * FUZZ_ASSERT(cond) and check_msg(const mxl_error *).
 *
 * With E the concatenation of everything the stream emitted and D the decode of the ids it
 * accepted (same skip_special):
 *   - a step never fails; an id without a token emits nothing and is not kept (the stream goes
 *     on as if it never came, as HF's DecodeStream drops ids id_to_token does not know);
 *   - every emitted piece is valid UTF-8, and so is every decode;
 *   - after every step E is a prefix of D, and E == D whenever D does not end in U+FFFD (text is
 *     held back only while a character may still be incomplete);
 *   - after the flush E == D (nothing is held back forever);
 *   - except where a decoder rewrites text already emitted (ByteFallback turns a byte run into
 *     U+FFFD per byte once it proves invalid; a right Strip): when D, final (no U+FFFD at its
 *     end, or at the flush), no longer begins with E, that step emits exactly the decode of the
 *     ids since the last emission as a continuation (tok_decode cont), and the rules above then
 *     hold for the segment that starts there: its ids decoded as a continuation against the text
 *     emitted from it on. A rewrite never fails a step.
 * Returns whether a rewrite happened (then E may differ from the full decode). It decodes once
 * per step (quadratic in the ids): for long sequences where no decoder can rewrite, callers use
 * detok_check_exact, which streams and flushes and wants the full decode exactly. */
#ifndef MXL_FUZZ_DETOK_CHECK_H
#define MXL_FUZZ_DETOK_CHECK_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h" /* tok_decode: the decode of a continuation */
#include "tokenizer/tokenizer.h"

#define FUZZ_ASSERT(c) ((c) ? (void)0 : fuzz_fail(#c, __FILE__, __LINE__))

static void fuzz_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "%s:%d: invariant failed: %s\n", file, line, expr);
    abort();
}

/* A refusal's message: one line, not empty, not cut. */
static void check_msg(const mxl_error *err) {
    size_t n = strnlen(err->msg, sizeof err->msg);
    FUZZ_ASSERT(n > 0 && n < sizeof err->msg);
    FUZZ_ASSERT(memchr(err->msg, '\n', n) == NULL);
}

static int detok_debug; /* set: each step's E and D to stderr */

/* Expected lossy text: each maximal invalid subsequence replaced by U+FFFD (an independent
 * re-implementation of the Unicode "maximal subpart" rule, kept simple on purpose); out needs 3n bytes. */
static inline size_t detok_lossy(const unsigned char *s, size_t n, char *out) {
    size_t o = 0, i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t need = 0;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            out[o++] = (char)c;
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) need = 2, lo = 0xA0;
        else if (c >= 0xE1 && c <= 0xEC) need = 2;
        else if (c == 0xED) need = 2, hi = 0x9F;
        else if (c == 0xEE || c == 0xEF) need = 2;
        else if (c == 0xF0) need = 3, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        else if (c == 0xF4) need = 3, hi = 0x8F;
        size_t k = 1;
        if (need) {
            for (; k <= need && i + k < n; k++) {
                unsigned b = s[i + k];
                if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) break;
            }
        }
        if (need && k == need + 1) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += k;
        }
    }
    return o;
}

/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
static inline int detok_utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) need = 2, lo = 0xA0;
        else if (c >= 0xE1 && c <= 0xEC) need = 2;
        else if (c == 0xED) need = 2, hi = 0x9F;
        else if (c == 0xEE || c == 0xEF) need = 2;
        else if (c == 0xF0) need = 3, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        else if (c == 0xF4) need = 3, hi = 0x8F;
        else return 0;
        if (n - i <= need) return 0;
        for (size_t k = 1; k <= need; k++) {
            unsigned b = s[i + k];
            if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return 0;
        }
        i += need + 1;
    }
    return 1;
}

static inline int detok_ends_fffd(const char *s, size_t n) { return n >= 3 && memcmp(s + n - 3, "\xEF\xBF\xBD", 3) == 0; }

static inline bool detok_check(const mxl_tokenizer *t, const int32_t *ids, size_t n_ids, bool skip) {
    mxl_error err = {0};
    mxl_detok_stream *s = NULL;
    FUZZ_ASSERT(mxl_detok_stream_create(t, skip, &s, &err) == MXL_OK);
    int32_t *acc = mxl_malloc((n_ids ? n_ids : 1) * sizeof(int32_t)); /* the ids the stream accepted */
    FUZZ_ASSERT(acc != NULL);
    size_t n_acc = 0;
    char *out = NULL; /* E */
    size_t ol = 0;
    /* the current segment: acc[seg_start..] decoded with cont seg_cont must extend E[seg_base..];
     * last_emit: n_acc after the last step that emitted */
    size_t seg_start = 0, seg_base = 0, last_emit = 0;
    bool seg_cont = false, rewritten = false;
    for (size_t i = 0; i < n_ids; i++) {
        const size_t before = ol;
        size_t tl;
        const bool unknown = ids[i] < 0 || mxl_tokenizer_token(t, ids[i], &tl) == NULL;
        mxl_status st = mxl_detok_stream_step(s, ids[i], &out, &ol, &err);
        if (st != MXL_OK) check_msg(&err);
        FUZZ_ASSERT(st == MXL_OK);
        if (unknown) { /* skipped: no text, as HF's DecodeStream drops ids id_to_token does not know */
            FUZZ_ASSERT(ol == before);
            continue;
        }
        acc[n_acc++] = ids[i];
        FUZZ_ASSERT(ol == before || detok_utf8_valid((const unsigned char *)out + before, ol - before));
        char *full = NULL;
        size_t fl = 0;
        FUZZ_ASSERT(tok_decode(t, acc + seg_start, n_acc - seg_start, skip, seg_cont, &full, &fl, &err) == MXL_OK);
        if (detok_debug)
            fprintf(stderr, "step id %d: E=[%.*s] (%zu) segment from id %zu, base %zu, D=[%.*s] (%zu)\n", ids[i], (int)ol,
                    out ? out : "", ol, seg_start, seg_base, (int)fl, full, fl);
        FUZZ_ASSERT(detok_utf8_valid((const unsigned char *)full, fl));
        const size_t el = before - seg_base; /* emitted in this segment before this step */
        if (el <= fl && memcmp(out ? out + seg_base : "", full, el) == 0) {
            /* no rewrite: E extends as far as D is final */
            FUZZ_ASSERT(ol - seg_base <= fl && memcmp(out ? out + seg_base : "", full, ol - seg_base) == 0);
            if (!detok_ends_fffd(full, fl)) FUZZ_ASSERT(ol - seg_base == fl);
            if (ol > before) last_emit = n_acc;
        } else if (detok_ends_fffd(full, fl)) {
            /* D rewrote emitted text but may still become its extension (an incomplete character) */
            FUZZ_ASSERT(ol == before);
        } else {
            /* a final rewrite: the ids since the last emission start a new segment, a continuation */
            mxl_free(full);
            seg_start = last_emit;
            seg_cont = true;
            seg_base = before;
            last_emit = n_acc;
            rewritten = true;
            FUZZ_ASSERT(tok_decode(t, acc + seg_start, n_acc - seg_start, skip, true, &full, &fl, &err) == MXL_OK);
            FUZZ_ASSERT(ol - before == fl && (fl == 0 || memcmp(out + before, full, fl) == 0));
        }
        mxl_free(full);
    }
    const size_t before = ol;
    FUZZ_ASSERT(mxl_detok_stream_flush(s, &out, &ol, &err) == MXL_OK);
    FUZZ_ASSERT(ol == before || detok_utf8_valid((const unsigned char *)out + before, ol - before));
    char *full = NULL;
    size_t fl = 0;
    FUZZ_ASSERT(tok_decode(t, acc + seg_start, n_acc - seg_start, skip, seg_cont, &full, &fl, &err) == MXL_OK);
    if (before - seg_base <= fl && memcmp(out ? out + seg_base : "", full, before - seg_base) == 0) {
        /* nothing is held back after the flush */
        FUZZ_ASSERT(ol - seg_base == fl && (fl == 0 || memcmp(out + seg_base, full, fl) == 0));
    } else {
        mxl_free(full);
        FUZZ_ASSERT(tok_decode(t, acc + last_emit, n_acc - last_emit, skip, true, &full, &fl, &err) == MXL_OK);
        FUZZ_ASSERT(ol - before == fl && (fl == 0 || memcmp(out + before, full, fl) == 0));
        rewritten = true;
    }
    mxl_free(full);
    /* without a rewrite, the whole stream is the public full decode */
    if (!rewritten) {
        FUZZ_ASSERT(mxl_tokenizer_decode(t, acc, n_acc, skip, &full, &fl, &err) == MXL_OK);
        FUZZ_ASSERT(ol == fl && (fl == 0 || memcmp(out, full, fl) == 0));
        mxl_free(full);
    }
    mxl_free(out);
    mxl_free(acc);
    mxl_detok_stream_destroy(s);
    return rewritten;
}

/* Linear check for id sequences whose decoder cannot rewrite emitted text: pieces valid UTF-8,
 * ids without a token skipped, and after the flush E equals the full decode. */
static inline void detok_check_exact(const mxl_tokenizer *t, const int32_t *ids, size_t n_ids, bool skip) {
    mxl_error err = {0};
    mxl_detok_stream *s = NULL;
    FUZZ_ASSERT(mxl_detok_stream_create(t, skip, &s, &err) == MXL_OK);
    int32_t *acc = mxl_malloc((n_ids ? n_ids : 1) * sizeof(int32_t));
    FUZZ_ASSERT(acc != NULL);
    size_t n_acc = 0;
    char *out = NULL;
    size_t ol = 0;
    for (size_t i = 0; i <= n_ids; i++) {
        const size_t before = ol;
        size_t tl;
        const bool unknown = i < n_ids && (ids[i] < 0 || mxl_tokenizer_token(t, ids[i], &tl) == NULL);
        mxl_status st = i < n_ids ? mxl_detok_stream_step(s, ids[i], &out, &ol, &err) : mxl_detok_stream_flush(s, &out, &ol, &err);
        if (st != MXL_OK) check_msg(&err);
        FUZZ_ASSERT(st == MXL_OK);
        if (unknown) { /* skipped, no text */
            FUZZ_ASSERT(ol == before);
            continue;
        }
        if (i < n_ids) acc[n_acc++] = ids[i];
        FUZZ_ASSERT(ol == before || detok_utf8_valid((const unsigned char *)out + before, ol - before));
    }
    char *full = NULL;
    size_t fl = 0;
    FUZZ_ASSERT(mxl_tokenizer_decode(t, acc, n_acc, skip, &full, &fl, &err) == MXL_OK);
    FUZZ_ASSERT(ol == fl && (fl == 0 || memcmp(out, full, fl) == 0));
    mxl_free(full);
    mxl_free(out);
    mxl_free(acc);
    mxl_detok_stream_destroy(s);
}

#endif
