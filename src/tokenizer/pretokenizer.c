/* pretokenizer.c - tokenizer.json pre-tokenizers (HF tokenizers/src/pre_tokenizers/): each text
 * piece is split into smaller pieces; pieces that are already tokens (added tokens) pass through.
 * Character-class splits follow HF's Pattern for Fn(char) -> bool: every matching character is
 * its own match, and the split behaviour then merges or drops them. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

/* GPT-2's pattern (pre_tokenizers/byte_level.rs). */
const char tok_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

void tok_pretok_free(tok_pretok *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_children; i++) tok_pretok_free(p->children[i]);
    mxl_free(p->children);
    tok_regex_free(p->re);
    mxl_free(p);
}

typedef bool (*char_pred)(uint32_t cp, const tok_pretok *p);

static bool pred_ws(uint32_t cp, const tok_pretok *p) {
    (void)p;
    return tok_cp_is_whitespace(cp);
}
static bool pred_punct(uint32_t cp, const tok_pretok *p) {
    (void)p;
    return tok_cp_is_bert_punct(cp);
}
static bool pred_digit(uint32_t cp, const tok_pretok *p) {
    (void)p;
    return tok_cp_is_digit(cp);
}
static bool pred_char(uint32_t cp, const tok_pretok *p) { return cp == p->replacement; }

static mxl_status char_spans(const char *s, size_t n, char_pred pred, const tok_pretok *p,
                             tok_spans *out) {
    out->n = 0;
    size_t last = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = tok_utf8_decode(s + i, n - i, &cp);
        if (pred(cp, p)) {
            if (out->n + 2 > out->cap) {
                size_t cap = out->cap ? out->cap * 2 : 16;
                tok_span *v = mxl_realloc(out->v, cap * sizeof(*v));
                if (!v) return MXL_ERR_NOMEM;
                out->v = v;
                out->cap = cap;
            }
            if (last < i) out->v[out->n++] = (tok_span){last, i - last, false};
            out->v[out->n++] = (tok_span){i, k, true};
            last = i + k;
        }
        i += k;
    }
    if (last < n) {
        if (out->n + 1 > out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 16;
            tok_span *v = mxl_realloc(out->v, cap * sizeof(*v));
            if (!v) return MXL_ERR_NOMEM;
            out->v = v;
            out->cap = cap;
        }
        out->v[out->n++] = (tok_span){last, n - last, false};
    }
    return MXL_OK;
}

static mxl_status emit_spans(const char *s, const tok_spans *sp, bool at_start, tok_pieces *out) {
    for (size_t i = 0; i < sp->n; i++) {
        if (sp->v[i].len == 0) continue;
        if (!tok_pieces_add(out, s + sp->v[i].off, sp->v[i].len, -1, at_start && sp->v[i].off == 0))
            return MXL_ERR_NOMEM;
    }
    return MXL_OK;
}

static mxl_status byte_map_add(const char *s, size_t n, bool at_start, tok_pieces *out,
                               mxl_strbuf *scratch) {
    scratch->n = 0;
    for (size_t i = 0; i < n; i++)
        if (!mxl_strbuf_put_cp(scratch, tok_byte_to_cp[(uint8_t)s[i]])) return MXL_ERR_NOMEM;
    if (!scratch->n) return MXL_OK;
    return tok_pieces_add(out, scratch->p, scratch->n, -1, at_start) ? MXL_OK : MXL_ERR_NOMEM;
}

static mxl_status split_one(const tok_pretok *p, const char *s, size_t n, bool at_start,
                            tok_pieces *out, tok_spans *sp, mxl_strbuf *scratch) {
    mxl_status st;
    switch (p->kind) {
    case TOK_PRE_BYTE_LEVEL: {
        mxl_strbuf pre = {0};
        if (p->add_prefix_space && (n == 0 || s[0] != ' ')) {
            if (!mxl_strbuf_putc(&pre, ' ') || !mxl_strbuf_append(&pre, s, n)) {
                mxl_strbuf_free(&pre);
                return MXL_ERR_NOMEM;
            }
            s = pre.p;
            n = pre.n;
        }
        if (p->use_regex) {
            st = tok_regex_find(p->re, s, n, sp);
            for (size_t i = 0; st == MXL_OK && i < sp->n; i++)
                st = byte_map_add(s + sp->v[i].off, sp->v[i].len, at_start && sp->v[i].off == 0,
                                  out, scratch);
        } else {
            st = byte_map_add(s, n, at_start, out, scratch);
        }
        mxl_strbuf_free(&pre);
        return st;
    }
    case TOK_PRE_SPLIT:
        st = tok_regex_find(p->re, s, n, sp);
        if (st != MXL_OK) return st;
        if (p->invert)
            for (size_t i = 0; i < sp->n; i++) sp->v[i].match = !sp->v[i].match;
        tok_spans_apply_behavior(sp, p->behavior);
        return emit_spans(s, sp, at_start, out);
    case TOK_PRE_WHITESPACE:
        /* split(Invert(\w+|[^\w\s]+), Removed): keep the matches */
        st = tok_regex_find(p->re, s, n, sp);
        if (st != MXL_OK) return st;
        for (size_t i = 0; i < sp->n; i++) sp->v[i].match = !sp->v[i].match;
        tok_spans_apply_behavior(sp, TOK_SPLIT_REMOVED);
        return emit_spans(s, sp, at_start, out);
    case TOK_PRE_WHITESPACE_SPLIT:
        st = char_spans(s, n, pred_ws, p, sp);
        if (st != MXL_OK) return st;
        tok_spans_apply_behavior(sp, TOK_SPLIT_REMOVED);
        return emit_spans(s, sp, at_start, out);
    case TOK_PRE_CHAR_DELIMITER:
        st = char_spans(s, n, pred_char, p, sp);
        if (st != MXL_OK) return st;
        tok_spans_apply_behavior(sp, TOK_SPLIT_REMOVED);
        return emit_spans(s, sp, at_start, out);
    case TOK_PRE_PUNCTUATION:
        st = char_spans(s, n, pred_punct, p, sp);
        if (st != MXL_OK) return st;
        tok_spans_apply_behavior(sp, p->behavior);
        return emit_spans(s, sp, at_start, out);
    case TOK_PRE_DIGITS:
        st = char_spans(s, n, pred_digit, p, sp);
        if (st != MXL_OK) return st;
        tok_spans_apply_behavior(sp, p->individual_digits ? TOK_SPLIT_ISOLATED
                                                          : TOK_SPLIT_CONTIGUOUS);
        return emit_spans(s, sp, at_start, out);
    case TOK_PRE_BERT: {
        st = char_spans(s, n, pred_ws, p, sp);
        if (st != MXL_OK) return st;
        tok_spans_apply_behavior(sp, TOK_SPLIT_REMOVED);
        tok_spans words = {0};
        for (size_t i = 0; st == MXL_OK && i < sp->n; i++) {
            const char *w = s + sp->v[i].off;
            st = char_spans(w, sp->v[i].len, pred_punct, p, &words);
            if (st != MXL_OK) break;
            tok_spans_apply_behavior(&words, TOK_SPLIT_ISOLATED);
            st = emit_spans(w, &words, at_start && sp->v[i].off == 0, out);
        }
        tok_spans_free(&words);
        return st;
    }
    case TOK_PRE_METASPACE: {
        char rep[4];
        size_t rl = mxl_utf8_encode(p->replacement, rep);
        mxl_strbuf t = {0};
        if (!mxl_strbuf_reserve(&t, n)) return MXL_ERR_NOMEM;
        for (size_t i = 0; i < n; i++) {
            bool ok = s[i] == ' ' ? mxl_strbuf_append(&t, rep, rl) : mxl_strbuf_putc(&t, s[i]);
            if (!ok) {
                mxl_strbuf_free(&t);
                return MXL_ERR_NOMEM;
            }
        }
        bool starts = t.n >= rl && memcmp(t.p, rep, rl) == 0;
        bool prepend = !starts && (p->prepend == TOK_PREPEND_ALWAYS ||
                                   (p->prepend == TOK_PREPEND_FIRST && at_start));
        if (prepend) {
            mxl_strbuf u = {0};
            if (!mxl_strbuf_append(&u, rep, rl) || !mxl_strbuf_append(&u, t.p, t.n)) {
                mxl_strbuf_free(&u);
                mxl_strbuf_free(&t);
                return MXL_ERR_NOMEM;
            }
            mxl_strbuf_free(&t);
            t = u;
        }
        if (p->split) {
            st = char_spans(t.p, t.n, pred_char, p, sp);
            if (st == MXL_OK) {
                tok_spans_apply_behavior(sp, TOK_SPLIT_MERGED_WITH_NEXT);
                st = emit_spans(t.p, sp, at_start, out);
            }
        } else {
            st = t.n ? (tok_pieces_add(out, t.p, t.n, -1, at_start) ? MXL_OK : MXL_ERR_NOMEM)
                     : MXL_OK;
        }
        mxl_strbuf_free(&t);
        return st;
    }
    case TOK_PRE_SEQUENCE: break;
    }
    return MXL_ERR_INTERNAL;
}

mxl_status tok_pretokenize(const tok_pretok *p, tok_pieces *in, tok_pieces *out) {
    tok_pieces_reset(out);
    if (p->kind == TOK_PRE_SEQUENCE) {
        /* in -> a -> b -> ... -> out, swapping scratch lists */
        tok_pieces cur = {0}, nxt = {0};
        mxl_status st = MXL_OK;
        for (size_t i = 0; i < in->n && st == MXL_OK; i++)
            if (!tok_pieces_add(&cur, in->text.p + in->v[i].off, in->v[i].len, in->v[i].token,
                                in->v[i].at_start))
                st = MXL_ERR_NOMEM;
        for (size_t c = 0; st == MXL_OK && c < p->n_children; c++) {
            st = tok_pretokenize(p->children[c], &cur, &nxt);
            tok_pieces sw = cur;
            cur = nxt;
            nxt = sw;
        }
        if (st == MXL_OK) {
            tok_pieces sw = *out;
            *out = cur;
            cur = sw;
        }
        tok_pieces_free(&cur);
        tok_pieces_free(&nxt);
        return st;
    }
    tok_spans sp = {0};
    mxl_strbuf scratch = {0};
    mxl_status st = MXL_OK;
    for (size_t i = 0; i < in->n && st == MXL_OK; i++) {
        const tok_piece *pc = &in->v[i];
        const char *s = in->text.p + pc->off;
        if (pc->token >= 0) {
            if (!tok_pieces_add(out, s, pc->len, pc->token, pc->at_start)) st = MXL_ERR_NOMEM;
            continue;
        }
        st = split_one(p, s, pc->len, pc->at_start, out, &sp, &scratch);
    }
    tok_spans_free(&sp);
    mxl_strbuf_free(&scratch);
    return st;
}
