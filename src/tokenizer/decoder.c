/* decoder.c - decoders (HF tokenizers/src/decoders/ and pre_tokenizers/{byte_level,metaspace}.rs):
 * each transforms the list of token strings (decode_chain); the final text is their
 * concatenation. ByteLevel maps characters back to bytes (a token with a character outside the
 * table keeps its UTF-8) and decodes the bytes lossily; ByteFallback turns runs of <0xXX> tokens
 * into their UTF-8 string, or one U+FFFD per byte when the run is not valid UTF-8. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

void tok_decoder_free(tok_decoder *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n_children; i++) tok_decoder_free(d->children[i]);
    mxl_free(d->children);
    tok_regex_free(d->re);
    mxl_free(d->content);
    mxl_free(d->content2);
    mxl_free(d);
}

static void strs_take(tok_strs *dst, tok_strs *src) {
    tok_strs_free(dst);
    *dst = *src;
    memset(src, 0, sizeof(*src));
}

static mxl_status byte_level(tok_strs *toks) {
    mxl_strbuf bytes = {0}, text = {0};
    mxl_status st = MXL_ERR_NOMEM;
    for (size_t i = 0; i < toks->n; i++) {
        const mxl_strbuf *b = &toks->v[i];
        size_t mark = bytes.n;
        bool all = true;
        for (size_t j = 0; j < b->n;) {
            uint32_t cp;
            j += tok_utf8_decode(b->p + j, b->n - j, &cp);
            int v = tok_cp_to_byte(cp);
            if (v < 0) {
                all = false;
                break;
            }
            if (!mxl_strbuf_putc(&bytes, (char)v)) goto done;
        }
        if (!all) {
            bytes.n = mark;
            if (!mxl_strbuf_append(&bytes, b->p, b->n)) goto done;
        }
    }
    if (!tok_utf8_lossy(bytes.p ? bytes.p : "", bytes.n, &text)) goto done;
    {
        tok_strs out = {0};
        if (!tok_strs_push(&out, text.p ? text.p : "", text.n)) {
            tok_strs_free(&out); /* its list may have been allocated */
            goto done;
        }
        strs_take(toks, &out);
    }
    st = MXL_OK;
done:
    mxl_strbuf_free(&bytes);
    mxl_strbuf_free(&text);
    return st;
}

static int hexv(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool flush_bytes(tok_strs *out, mxl_strbuf *bytes) {
    if (!bytes->n) return true;
    bool ok;
    if (tok_utf8_valid(bytes->p, bytes->n)) {
        ok = tok_strs_push(out, bytes->p, bytes->n);
    } else {
        ok = true;
        for (size_t i = 0; i < bytes->n && ok; i++) ok = tok_strs_push(out, "\xEF\xBF\xBD", 3);
    }
    bytes->n = 0;
    return ok;
}

static mxl_status byte_fallback(tok_strs *toks) {
    tok_strs out = {0};
    mxl_strbuf bytes = {0};
    bool ok = true;
    for (size_t i = 0; i < toks->n && ok; i++) {
        const mxl_strbuf *b = &toks->v[i];
        int hi, lo;
        if (b->n == 6 && memcmp(b->p, "<0x", 3) == 0 && b->p[5] == '>' &&
            (hi = hexv(b->p[3])) >= 0 && (lo = hexv(b->p[4])) >= 0) {
            ok = mxl_strbuf_putc(&bytes, (char)(hi * 16 + lo));
            continue;
        }
        ok = flush_bytes(&out, &bytes) && tok_strs_push(&out, b->p ? b->p : "", b->n);
    }
    if (ok) ok = flush_bytes(&out, &bytes);
    mxl_strbuf_free(&bytes);
    if (!ok) {
        tok_strs_free(&out);
        return MXL_ERR_NOMEM;
    }
    strs_take(toks, &out);
    return MXL_OK;
}

static mxl_status fuse(tok_strs *toks) {
    mxl_strbuf all = {0};
    for (size_t i = 0; i < toks->n; i++)
        if (!mxl_strbuf_append(&all, toks->v[i].p ? toks->v[i].p : "", toks->v[i].n)) {
            mxl_strbuf_free(&all);
            return MXL_ERR_NOMEM;
        }
    tok_strs out = {0};
    bool ok = tok_strs_push(&out, all.p ? all.p : "", all.n);
    mxl_strbuf_free(&all);
    if (!ok) {
        tok_strs_free(&out); /* its list may have been allocated */
        return MXL_ERR_NOMEM;
    }
    strs_take(toks, &out);
    return MXL_OK;
}

/* Where the decoded ids sit. cont: they continue a sequence (the streaming detokenizer's window
 * after its first tokens), so the start-of-text rules do not apply to the window's first token:
 * a left Strip of fused text, Metaspace's and WordPiece's first-token rules. joined: an earlier
 * decoder (ByteLevel, Fuse) made the list one string, which in a full decode is the whole text;
 * a rule on "token 0" that applies to all of its content then holds in the window too, while a
 * rule on its leading characters does not. */
typedef struct dec_pos {
    bool cont, joined;
} dec_pos;

/* Replaces token i's text by s (n bytes). */
static bool set_tok(mxl_strbuf *b, const char *s, size_t n) {
    mxl_strbuf nb = {0};
    if (!mxl_strbuf_append(&nb, s, n)) return false;
    mxl_strbuf_free(b);
    *b = nb;
    return true;
}

static mxl_status strip(const tok_decoder *d, const dec_pos *pos, tok_strs *toks) {
    char c[4];
    size_t cl = mxl_utf8_encode(d->ch, c);
    for (size_t i = 0; i < toks->n; i++) {
        mxl_strbuf *b = &toks->v[i];
        size_t s = 0, e = b->n;
        size_t start = i == 0 && pos->cont && pos->joined ? 0 : d->start; /* not the text's start */
        for (size_t k = 0; k < start && e - s >= cl && memcmp(b->p + s, c, cl) == 0; k++) s += cl;
        for (size_t k = 0; k < d->stop && e - s >= cl && memcmp(b->p + e - cl, c, cl) == 0; k++)
            e -= cl;
        if (s || e != b->n) {
            memmove(b->p, b->p + s, e - s);
            b->n = e - s;
            b->p[b->n] = 0;
        }
    }
    return MXL_OK;
}

static mxl_status replace(const tok_decoder *d, tok_strs *toks) {
    tok_spans sp = {0};
    mxl_strbuf nb = {0};
    mxl_status st = MXL_OK;
    for (size_t i = 0; i < toks->n && st == MXL_OK; i++) {
        mxl_strbuf *b = &toks->v[i];
        st = tok_regex_find(d->re, b->p ? b->p : "", b->n, &sp);
        nb.n = 0;
        for (size_t k = 0; st == MXL_OK && k < sp.n; k++) {
            bool ok = sp.v[k].match ? mxl_strbuf_append(&nb, d->content, d->content_len)
                                    : mxl_strbuf_append(&nb, b->p + sp.v[k].off, sp.v[k].len);
            if (!ok) st = MXL_ERR_NOMEM;
        }
        if (st == MXL_OK && !set_tok(b, nb.p ? nb.p : "", nb.n)) st = MXL_ERR_NOMEM;
    }
    tok_spans_free(&sp);
    mxl_strbuf_free(&nb);
    return st;
}

static mxl_status metaspace(const tok_decoder *d, const dec_pos *pos, tok_strs *toks) {
    char c[4];
    size_t cl = mxl_utf8_encode(d->ch, c);
    bool first = !pos->cont || pos->joined; /* token 0 is the text's first token */
    mxl_strbuf nb = {0};
    for (size_t i = 0; i < toks->n; i++) {
        mxl_strbuf *b = &toks->v[i];
        nb.n = 0;
        for (size_t j = 0; j < b->n;) {
            if (b->n - j >= cl && memcmp(b->p + j, c, cl) == 0) {
                j += cl;
                if (i == 0 && first && d->prepend != TOK_PREPEND_NEVER) continue;
                if (!mxl_strbuf_putc(&nb, ' ')) goto oom;
                continue;
            }
            if (!mxl_strbuf_putc(&nb, b->p[j])) goto oom;
            j++;
        }
        if (!set_tok(b, nb.p ? nb.p : "", nb.n)) goto oom;
    }
    mxl_strbuf_free(&nb);
    return MXL_OK;
oom:
    mxl_strbuf_free(&nb);
    return MXL_ERR_NOMEM;
}

/* decoders/wordpiece.rs cleanup(): English tokenization-space cleanup. */
static bool cleanup_text(mxl_strbuf *b) {
    static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " do not",
                                       " 's", " 've", " 're"};
    static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", " don't",
                                     "'s", "'ve", "'re"};
    for (size_t r = 0; r < sizeof(from) / sizeof(from[0]); r++) {
        size_t fl = strlen(from[r]), tl = strlen(to[r]);
        mxl_strbuf nb = {0};
        for (size_t j = 0; j < b->n;) {
            if (b->n - j >= fl && memcmp(b->p + j, from[r], fl) == 0) {
                if (!mxl_strbuf_append(&nb, to[r], tl)) goto oom;
                j += fl;
            } else {
                if (!mxl_strbuf_putc(&nb, b->p[j])) goto oom;
                j++;
            }
        }
        if (!set_tok(b, nb.p ? nb.p : "", nb.n)) goto oom;
        mxl_strbuf_free(&nb);
        continue;
    oom:
        mxl_strbuf_free(&nb);
        return false;
    }
    return true;
}

static mxl_status wordpiece(const tok_decoder *d, const dec_pos *pos, tok_strs *toks) {
    bool first = !pos->cont || pos->joined; /* token 0 is the text's first token */
    for (size_t i = 0; i < toks->n; i++) {
        mxl_strbuf *b = &toks->v[i];
        if (i != 0 || !first) {
            if (b->n >= d->content_len && memcmp(b->p, d->content, d->content_len) == 0) {
                memmove(b->p, b->p + d->content_len, b->n - d->content_len);
                b->n -= d->content_len;
                b->p[b->n] = 0;
            } else {
                mxl_strbuf nb = {0};
                if (!mxl_strbuf_putc(&nb, ' ') || !mxl_strbuf_append(&nb, b->p ? b->p : "", b->n) ||
                    !set_tok(b, nb.p, nb.n)) {
                    mxl_strbuf_free(&nb);
                    return MXL_ERR_NOMEM;
                }
                mxl_strbuf_free(&nb);
            }
        }
        if (d->cleanup && !cleanup_text(b)) return MXL_ERR_NOMEM;
    }
    return MXL_OK;
}

static mxl_status bpe_suffix(const tok_decoder *d, tok_strs *toks) {
    /* decoders/bpe.rs: the suffix becomes a space, except on the last token where it is removed */
    mxl_strbuf nb = {0};
    for (size_t i = 0; i < toks->n; i++) {
        mxl_strbuf *b = &toks->v[i];
        nb.n = 0;
        bool last = i + 1 == toks->n;
        for (size_t j = 0; j < b->n;) {
            if (d->content_len && b->n - j >= d->content_len &&
                memcmp(b->p + j, d->content, d->content_len) == 0) {
                if (!last && !mxl_strbuf_putc(&nb, ' ')) goto oom;
                j += d->content_len;
            } else {
                if (!mxl_strbuf_putc(&nb, b->p[j])) goto oom;
                j++;
            }
        }
        if (!set_tok(b, nb.p ? nb.p : "", nb.n)) goto oom;
    }
    mxl_strbuf_free(&nb);
    return MXL_OK;
oom:
    mxl_strbuf_free(&nb);
    return MXL_ERR_NOMEM;
}

static mxl_status ctc(const tok_decoder *d, tok_strs *toks) {
    /* decoders/ctc.rs: dedup consecutive tokens, drop the pad token, word delimiter -> space */
    tok_strs out = {0};
    for (size_t i = 0; i < toks->n; i++) {
        mxl_strbuf *b = &toks->v[i];
        if (i > 0 && b->n == toks->v[i - 1].n && memcmp(b->p, toks->v[i - 1].p, b->n) == 0) continue;
        if (b->n == d->content_len && memcmp(b->p, d->content, b->n) == 0) continue;
        const char *s = b->p ? b->p : "";
        size_t n = b->n;
        mxl_strbuf nb = {0};
        bool ok = true;
        for (size_t j = 0; j < n && ok;) {
            if (d->content2_len && n - j >= d->content2_len &&
                memcmp(s + j, d->content2, d->content2_len) == 0) {
                ok = mxl_strbuf_putc(&nb, ' ');
                j += d->content2_len;
            } else {
                ok = mxl_strbuf_putc(&nb, s[j]);
                j++;
            }
        }
        if (ok && d->cleanup) ok = cleanup_text(&nb);
        if (ok) ok = tok_strs_push(&out, nb.p ? nb.p : "", nb.n);
        mxl_strbuf_free(&nb);
        if (!ok) {
            tok_strs_free(&out);
            return MXL_ERR_NOMEM;
        }
    }
    strs_take(toks, &out);
    return MXL_OK;
}

static mxl_status chain(const tok_decoder *d, dec_pos *pos, tok_strs *toks) {
    switch (d->kind) {
    case TOK_DEC_SEQUENCE:
        for (size_t i = 0; i < d->n_children; i++) {
            mxl_status st = chain(d->children[i], pos, toks);
            if (st != MXL_OK) return st;
        }
        return MXL_OK;
    case TOK_DEC_BYTE_LEVEL: pos->joined = true; return byte_level(toks);
    case TOK_DEC_METASPACE: return metaspace(d, pos, toks);
    case TOK_DEC_BYTE_FALLBACK: return byte_fallback(toks);
    case TOK_DEC_FUSE: pos->joined = true; return fuse(toks);
    case TOK_DEC_STRIP: return strip(d, pos, toks);
    case TOK_DEC_REPLACE: return replace(d, toks);
    case TOK_DEC_WORDPIECE: return wordpiece(d, pos, toks);
    case TOK_DEC_BPE: return bpe_suffix(d, toks);
    case TOK_DEC_CTC: return ctc(d, toks);
    }
    return MXL_ERR_INTERNAL;
}

mxl_status tok_decode_chain(const tok_decoder *d, bool cont, tok_strs *toks) {
    dec_pos pos = {.cont = cont, .joined = false};
    return chain(d, &pos, toks);
}
