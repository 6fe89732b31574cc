/* tok_regex.c - regular expressions for pre-tokenizers and Replace, on PCRE2 (UTF + UCP, JIT).
 *
 * Hugging Face runs these patterns with Oniguruma; the patterns released tokenizers use (\p{L},
 * \p{N}, \s with Unicode White_Space, (?i:...), lookahead \s+(?!\S)) mean the same in PCRE2 with
 * PCRE2_UCP. Matching walks the subject left to right like onig's find_iter: after an empty
 * match the next search starts one character later. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tokenizer/tok_internal.h"

/* Oniguruma's Unicode \w is Alphabetic + Mark + Decimal_Number + Connector_Punctuation +
 * Join_Control; PCRE2's (UCP) is [\p{L}\p{N}_]. Rewrite \w / \W so both engines agree
 * (e.g. U+200D ZWJ and combining marks are word characters, superscript digits are not). */
#define ONIG_WORD "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}"

static char *onig_to_pcre(const char *pat, size_t n, size_t *out_n) {
    size_t cap = n * 4 + 64;
    char *o = mxl_malloc(cap);
    if (!o) return NULL;
    size_t k = 0;
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        if (k + 64 > cap) {
            cap *= 2;
            char *q = mxl_realloc(o, cap);
            if (!q) {
                mxl_free(o);
                return NULL;
            }
            o = q;
        }
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char d = pat[i + 1];
            if (d == 'w' || (d == 'W' && !in_class)) {
                const char *rep = d == 'w' ? (in_class ? ONIG_WORD : "[" ONIG_WORD "]") : "[^" ONIG_WORD "]";
                size_t rl = strlen(rep);
                memcpy(o + k, rep, rl);
                k += rl;
            } else {
                o[k++] = c;
                o[k++] = d;
            }
            i++;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            o[k++] = c;
            /* a leading ']' or '^]' is literal */
            if (i + 1 < n && pat[i + 1] == '^') o[k++] = pat[++i];
            if (i + 1 < n && pat[i + 1] == ']') o[k++] = pat[++i];
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && pat[i + 1] == ':') {
            /* POSIX class [:name:] inside a class */
            const char *e = strstr(pat + i + 2, ":]");
            if (e && (size_t)(e - pat) < n) {
                size_t l = (size_t)(e - (pat + i)) + 2;
                memcpy(o + k, pat + i, l);
                k += l;
                i += l - 1;
                continue;
            }
        }
        if (in_class && c == ']') in_class = false;
        o[k++] = c;
    }
    *out_n = k;
    return o;
}

struct tok_regex {
    pcre2_code *code;
    bool jit;
};

mxl_status tok_regex_compile(const char *pat, size_t n, bool literal, tok_regex **out,
                             char *errbuf, size_t errcap) {
    int ec = 0;
    PCRE2_SIZE eo = 0;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP;
    if (literal) opts = PCRE2_UTF | PCRE2_LITERAL;
    if (!tok_utf8_valid(pat, n)) {
        snprintf(errbuf, errcap, "pattern is not valid UTF-8");
        return MXL_ERR_FORMAT;
    }
    char *conv = NULL;
    if (!literal) {
        size_t cn = 0;
        conv = onig_to_pcre(pat, n, &cn);
        if (!conv) {
            snprintf(errbuf, errcap, "out of memory");
            return MXL_ERR_NOMEM;
        }
        pat = conv;
        n = cn;
    }
    /* PCRE2 allocates through the seam: the compile context hands the pattern our memory
     * functions, which its JIT compilation and match data then use too */
    pcre2_compile_context *cc = pcre2_compile_context_create(mxl_pcre2_gcontext());
    if (!cc) {
        mxl_free(conv);
        snprintf(errbuf, errcap, "out of memory");
        return MXL_ERR_NOMEM;
    }
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pat, n, opts, &ec, &eo, cc);
    pcre2_compile_context_free(cc);
    mxl_free(conv);
    if (!code && ec == PCRE2_ERROR_HEAP_FAILED) {
        snprintf(errbuf, errcap, "out of memory");
        return MXL_ERR_NOMEM;
    }
    if (!code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof(msg));
        snprintf(errbuf, errcap, "bad regex at offset %zu: %s", (size_t)eo, (const char *)msg);
        return MXL_ERR_FORMAT;
    }
    tok_regex *r = mxl_calloc(1, sizeof(*r));
    if (!r) {
        pcre2_code_free(code);
        snprintf(errbuf, errcap, "out of memory");
        return MXL_ERR_NOMEM;
    }
    r->code = code;
    r->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    *out = r;
    return MXL_OK;
}

void tok_regex_free(tok_regex *r) {
    if (!r) return;
    pcre2_code_free(r->code);
    mxl_free(r);
}

static bool spans_push(tok_spans *s, size_t off, size_t len, bool match) {
    if (len == 0) return true;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        tok_span *v = mxl_realloc(s->v, cap * sizeof(*v));
        if (!v) return false;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (tok_span){off, len, match};
    return true;
}

mxl_status tok_regex_find(const tok_regex *r, const char *s, size_t n, tok_spans *out) {
    out->n = 0;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(r->code, mxl_pcre2_gcontext());
    if (!md) return MXL_ERR_NOMEM;
    size_t pos = 0, prev = 0;
    mxl_status st = MXL_OK;
    while (pos <= n) {
        int rc = r->jit ? pcre2_jit_match(r->code, (PCRE2_SPTR)s, n, pos, 0, md, NULL)
                        : pcre2_match(r->code, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc == PCRE2_ERROR_NOMEMORY) {
            st = MXL_ERR_NOMEM;
            break;
        }
        if (rc < 0) {
            st = MXL_ERR_INTERNAL; /* a PCRE2 limit (match / JIT stack): refuse, never guess */
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (ms < prev || me < ms) break;
        if (ms > prev && !spans_push(out, prev, ms - prev, false)) goto oom;
        if (!spans_push(out, ms, me - ms, true)) goto oom;
        prev = me;
        if (me == ms) {
            if (me >= n) break;
            pos = me + tok_utf8_len((uint8_t)s[me]);
        } else {
            pos = me;
        }
    }
    if (prev < n && !spans_push(out, prev, n - prev, false)) goto oom;
    pcre2_match_data_free(md);
    return st;
oom:
    pcre2_match_data_free(md);
    return MXL_ERR_NOMEM;
}

void tok_spans_apply_behavior(tok_spans *sp, tok_split_behavior b) {
    /* Mirrors NormalizedString::split: spans are (offsets, is_match); the result keeps spans
     * with match=false meaning "keep", and Removed drops matches. */
    size_t w = 0;
    bool prev_match = false;
    switch (b) {
    case TOK_SPLIT_ISOLATED:
        for (size_t i = 0; i < sp->n; i++) sp->v[i].match = false;
        return;
    case TOK_SPLIT_REMOVED:
        for (size_t i = 0; i < sp->n; i++)
            if (!sp->v[i].match) sp->v[w++] = sp->v[i];
        sp->n = w;
        return;
    case TOK_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < sp->n; i++) {
            bool m = sp->v[i].match;
            if (w > 0 && m == prev_match) {
                sp->v[w - 1].len = sp->v[i].off + sp->v[i].len - sp->v[w - 1].off;
            } else {
                sp->v[w] = sp->v[i];
                sp->v[w++].match = false;
            }
            prev_match = m;
        }
        sp->n = w;
        return;
    case TOK_SPLIT_MERGED_WITH_PREVIOUS:
        for (size_t i = 0; i < sp->n; i++) {
            bool m = sp->v[i].match;
            if (m && !prev_match && w > 0) {
                sp->v[w - 1].len = sp->v[i].off + sp->v[i].len - sp->v[w - 1].off;
            } else {
                sp->v[w] = sp->v[i];
                sp->v[w++].match = false;
            }
            prev_match = m;
        }
        sp->n = w;
        return;
    case TOK_SPLIT_MERGED_WITH_NEXT: {
        /* walk backwards: a match not preceded (in reverse order) by a match joins the span after
         * it */
        size_t n = sp->n;
        tok_span *v = sp->v;
        size_t out = n; /* fill from the end */
        for (size_t k = n; k-- > 0;) {
            bool m = v[k].match;
            if (m && !prev_match && out < n) {
                size_t end = v[out].off + v[out].len;
                v[out].off = v[k].off;
                v[out].len = end - v[k].off;
            } else {
                v[--out] = v[k];
                v[out].match = false;
            }
            prev_match = m;
        }
        memmove(v, v + out, (n - out) * sizeof(*v));
        sp->n = n - out;
        return;
    }
    }
}
