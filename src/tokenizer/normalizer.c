/* normalizer.c - tokenizer.json normalizers (HF tokenizers/src/normalizers/): string -> string.
 *
 * Unicode normalization forms use utf8proc; Lowercase maps per character like Rust's
 * char::to_lowercase (U+0130 becomes "i\u0307", no final-sigma rule, as HF does it);
 * BertNormalizer runs clean_text, handle_chinese_chars, strip_accents (NFD + drop Mn),
 * lowercase in that order (normalizers/bert.rs). Precompiled (SentencePiece charsmaps) is in
 * norm_precompiled.c. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

void tok_normalizer_free(tok_normalizer *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n_children; i++) tok_normalizer_free(n->children[i]);
    mxl_free(n->children);
    tok_regex_free(n->re);
    mxl_free(n->content);
    tok_precompiled_free(n->charsmap);
    mxl_free(n);
}

static mxl_status unicode_form(const char *s, size_t len, int opts, mxl_strbuf *out) {
    if (len == 0) return MXL_OK;
    char *res = NULL;
    ptrdiff_t r = tok_utf8proc_map(s, len, opts | UTF8PROC_STABLE, &res);
    if (r == UTF8PROC_ERROR_NOMEM) return MXL_ERR_NOMEM;
    if (r < 0) /* invalid input cannot happen (text is sanitized); keep it unchanged */
        return mxl_strbuf_append(out, s, len) ? MXL_OK : MXL_ERR_NOMEM;
    bool ok = mxl_strbuf_append(out, res, (size_t)r);
    mxl_free(res);
    return ok ? MXL_OK : MXL_ERR_NOMEM;
}

static bool put_lower(mxl_strbuf *out, uint32_t cp) {
    if (cp == 0x130) return mxl_strbuf_append(out, "i\xCC\x87", 3);
    return mxl_strbuf_put_cp(out, (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp));
}

static mxl_status lowercase(const char *s, size_t len, mxl_strbuf *out) {
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += tok_utf8_decode(s + i, len - i, &cp);
        if (!put_lower(out, cp)) return MXL_ERR_NOMEM;
    }
    return MXL_OK;
}

/* all_marks: StripAccents drops every mark (is_combining_mark, General_Category=M);
 * BertNormalizer only nonspacing marks (Mn). */
static mxl_status strip_accents(const char *s, size_t len, mxl_strbuf *out, bool all_marks) {
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = tok_utf8_decode(s + i, len - i, &cp);
        utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
        bool drop = all_marks ? (c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME)
                              : c == UTF8PROC_CATEGORY_MN;
        if (!drop && !mxl_strbuf_append(out, s + i, k)) return MXL_ERR_NOMEM;
        i += k;
    }
    return MXL_OK;
}

static mxl_status bert(const tok_normalizer *n, const char *s, size_t len, mxl_strbuf *out) {
    mxl_strbuf a = {0}, b = {0};
    mxl_status st = MXL_ERR_NOMEM;
    /* clean_text + handle_chinese_chars in one pass */
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = tok_utf8_decode(s + i, len - i, &cp);
        i += k;
        if (n->clean_text) {
            bool ws = cp == '\t' || cp == '\n' || cp == '\r' || tok_cp_is_whitespace(cp);
            bool ctrl = !(cp == '\t' || cp == '\n' || cp == '\r') && tok_cp_is_other(cp);
            if (cp == 0 || cp == 0xFFFD || ctrl) continue;
            if (ws) {
                if (!mxl_strbuf_putc(&a, ' ')) goto done;
                continue;
            }
        }
        if (n->handle_chinese && tok_cp_is_chinese(cp)) {
            if (!mxl_strbuf_putc(&a, ' ') || !mxl_strbuf_put_cp(&a, cp) || !mxl_strbuf_putc(&a, ' '))
                goto done;
            continue;
        }
        if (!mxl_strbuf_put_cp(&a, cp)) goto done;
    }
    bool strip = n->strip_accents < 0 ? n->lowercase : n->strip_accents > 0;
    if (strip) {
        if (unicode_form(a.p ? a.p : "", a.n, UTF8PROC_DECOMPOSE, &b) != MXL_OK) goto done;
        a.n = 0;
        if (strip_accents(b.p ? b.p : "", b.n, &a, false) != MXL_OK) goto done;
    }
    if (n->lowercase) {
        st = lowercase(a.p ? a.p : "", a.n, out);
    } else {
        st = mxl_strbuf_append(out, a.p ? a.p : "", a.n) ? MXL_OK : MXL_ERR_NOMEM;
    }
done:
    mxl_strbuf_free(&a);
    mxl_strbuf_free(&b);
    return st;
}

static mxl_status replace(const tok_normalizer *n, const char *s, size_t len, mxl_strbuf *out) {
    tok_spans sp = {0};
    mxl_status st = tok_regex_find(n->re, s, len, &sp);
    for (size_t i = 0; st == MXL_OK && i < sp.n; i++) {
        bool ok = sp.v[i].match ? mxl_strbuf_append(out, n->content, n->content_len)
                                : mxl_strbuf_append(out, s + sp.v[i].off, sp.v[i].len);
        if (!ok) st = MXL_ERR_NOMEM;
    }
    tok_spans_free(&sp);
    return st;
}

static mxl_status strip_ws(const tok_normalizer *n, const char *s, size_t len, mxl_strbuf *out) {
    size_t b = 0, e = len;
    if (n->left) {
        while (b < e) {
            uint32_t cp;
            size_t k = tok_utf8_decode(s + b, e - b, &cp);
            if (!tok_cp_is_whitespace(cp)) break;
            b += k;
        }
    }
    if (n->right) {
        while (e > b) {
            size_t p = e - 1;
            while (p > b && ((uint8_t)s[p] & 0xC0) == 0x80) p--;
            uint32_t cp;
            tok_utf8_decode(s + p, e - p, &cp);
            if (!tok_cp_is_whitespace(cp)) break;
            e = p;
        }
    }
    return mxl_strbuf_append(out, s + b, e - b) ? MXL_OK : MXL_ERR_NOMEM;
}

static mxl_status byte_level(const char *s, size_t len, mxl_strbuf *out) {
    for (size_t i = 0; i < len; i++)
        if (!mxl_strbuf_put_cp(out, tok_byte_to_cp[(uint8_t)s[i]])) return MXL_ERR_NOMEM;
    return MXL_OK;
}

mxl_status tok_normalize(const tok_normalizer *n, const char *s, size_t len, mxl_strbuf *out) {
    out->n = 0;
    if (!mxl_strbuf_reserve(out, len)) return MXL_ERR_NOMEM;
    out->p[0] = 0;
    switch (n->kind) {
    case TOK_NORM_SEQUENCE: {
        if (!mxl_strbuf_append(out, s, len)) return MXL_ERR_NOMEM;
        mxl_strbuf tmp = {0};
        for (size_t i = 0; i < n->n_children; i++) {
            mxl_status st = tok_normalize(n->children[i], out->p, out->n, &tmp);
            if (st != MXL_OK) {
                mxl_strbuf_free(&tmp);
                return st;
            }
            mxl_strbuf sw = *out;
            *out = tmp;
            tmp = sw;
        }
        mxl_strbuf_free(&tmp);
        return MXL_OK;
    }
    case TOK_NORM_NFC: return unicode_form(s, len, UTF8PROC_COMPOSE, out);
    case TOK_NORM_NFD: return unicode_form(s, len, UTF8PROC_DECOMPOSE, out);
    case TOK_NORM_NFKC: return unicode_form(s, len, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, out);
    case TOK_NORM_NFKD: return unicode_form(s, len, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, out);
    case TOK_NORM_LOWERCASE: return lowercase(s, len, out);
    case TOK_NORM_STRIP: return strip_ws(n, s, len, out);
    case TOK_NORM_STRIP_ACCENTS: return strip_accents(s, len, out, true);
    case TOK_NORM_REPLACE: return replace(n, s, len, out);
    case TOK_NORM_PREPEND:
        /* normalizers/prepend.rs: only a non-empty string gets the prefix */
        if (len && !mxl_strbuf_append(out, n->content, n->content_len)) return MXL_ERR_NOMEM;
        return mxl_strbuf_append(out, s, len) ? MXL_OK : MXL_ERR_NOMEM;
    case TOK_NORM_BERT: return bert(n, s, len, out);
    case TOK_NORM_BYTE_LEVEL: return byte_level(s, len, out);
    case TOK_NORM_PRECOMPILED: return tok_precompiled_normalize(n->charsmap, s, len, out);
    }
    return MXL_ERR_INTERNAL;
}
