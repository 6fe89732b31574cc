/* tpl_lexer.c - Jinja2 lexer: splits a template into text and tag tokens.
 *
 * Applies Jinja2's whitespace rules the way transformers configures them: `{%-`/`-%}` strip all
 * whitespace on that side, trim_blocks drops the first newline after a block or comment tag,
 * lstrip_blocks drops spaces/tabs before a block or comment tag that starts its line (unless
 * `{%+`), and `{% raw %}` bodies pass through as text. Inside tags it produces names, numbers,
 * decoded string literals and operators; end delimiters are only recognised while brackets are
 * balanced, as in Jinja2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tpl_internal.h"

typedef struct lexer {
    mxl_arena *a;
    const char *src;
    size_t n;
    ttoken *toks;
    size_t nt, cap;
    char *err;
    size_t err_cap;
    /* incremental line/col tracking */
    size_t lc_pos;
    int lc_line, lc_col;
} lexer;

static void pos_to_lc(lexer *L, size_t pos, int *line, int *col) {
    if (pos < L->lc_pos) {
        L->lc_pos = 0;
        L->lc_line = 1;
        L->lc_col = 1;
    }
    while (L->lc_pos < pos && L->lc_pos < L->n) {
        if (L->src[L->lc_pos] == '\n') {
            L->lc_line++;
            L->lc_col = 1;
        } else {
            L->lc_col++;
        }
        L->lc_pos++;
    }
    *line = L->lc_line;
    *col = L->lc_col;
}

static bool lex_fail(lexer *L, size_t pos, const char *msg) {
    int line, col;
    pos_to_lc(L, pos, &line, &col);
    snprintf(L->err, L->err_cap, "%d:%d: %s", line, col, msg);
    return false;
}

static ttoken *push(lexer *L, ttok type, size_t pos) {
    if (L->nt == L->cap) {
        size_t nc = L->cap ? L->cap * 2 : 64;
        ttoken *nt = mxl_arena_alloc(L->a, nc * sizeof(ttoken), 8);
        if (!nt) return NULL;
        if (L->nt) memcpy(nt, L->toks, L->nt * sizeof(ttoken));
        L->toks = nt;
        L->cap = nc;
    }
    ttoken *t = &L->toks[L->nt++];
    memset(t, 0, sizeof *t);
    t->type = type;
    pos_to_lc(L, pos, &t->line, &t->col);
    return t;
}

static bool is_ws(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Emits src[b, e) as text after the whitespace rules for the tag at `e`. */
static bool emit_text(lexer *L, size_t b, size_t e, char sign, bool lstrip_ok) {
    if (sign == '-') {
        while (e > b && is_ws(L->src[e - 1])) e--;
    } else if (sign != '+' && lstrip_ok) {
        size_t lp = e;
        while (lp > b && L->src[lp - 1] != '\n') lp--;
        bool line_start = lp > b || b == 0 || L->src[b - 1] == '\n';
        if (line_start && lp < e) {
            bool all_ws = true;
            for (size_t i = lp; i < e; i++)
                if (!is_ws(L->src[i])) {
                    all_ws = false;
                    break;
                }
            if (all_ws) e = lp;
        }
    }
    if (e > b) {
        ttoken *t = push(L, TK_TEXT, b);
        if (!t) return lex_fail(L, b, "out of memory");
        t->s = L->src + b;
        t->n = e - b;
    }
    return true;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Decodes a Python string literal body (unicode-escape semantics). */
static bool lex_string(lexer *L, size_t *pos) {
    size_t start = *pos;
    char q = L->src[start];
    size_t i = start + 1;
    while (i < L->n && L->src[i] != q) {
        if (L->src[i] == '\\' && i + 1 < L->n) i++;
        i++;
    }
    if (i >= L->n) return lex_fail(L, start, "unexpected end of string literal");
    size_t end = i; /* closing quote */
    char *out = mxl_arena_alloc(L->a, end - start + 1, 1);
    if (!out) return lex_fail(L, start, "out of memory");
    size_t o = 0;
    for (size_t k = start + 1; k < end; k++) {
        char ch = L->src[k];
        if (ch != '\\' || k + 1 >= end) {
            out[o++] = ch;
            continue;
        }
        char e = L->src[++k];
        int32_t cp = -1;
        switch (e) {
        case 'n': out[o++] = '\n'; break;
        case 't': out[o++] = '\t'; break;
        case 'r': out[o++] = '\r'; break;
        case '\\': out[o++] = '\\'; break;
        case '\'': out[o++] = '\''; break;
        case '"': out[o++] = '"'; break;
        case 'a': out[o++] = '\a'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'v': out[o++] = '\v'; break;
        case '\n': break; /* line continuation */
        case 'x': case 'u': case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t v = 0; /* 8 hex digits fit; above U+10FFFF is refused below */
            bool ok = k + (size_t)nd < end;
            for (int d = 1; ok && d <= nd; d++) {
                int h = hexval(L->src[k + (size_t)d]);
                if (h < 0) ok = false;
                else v = v * 16 + (uint32_t)h;
            }
            if (!ok) return lex_fail(L, k - 1, "truncated \\x/\\u escape in string");
            if (v > 0x10FFFF) return lex_fail(L, k - 1, "\\U escape beyond U+10FFFF in string");
            k += (size_t)nd;
            cp = (int32_t)v;
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                int32_t v = e - '0';
                for (int d = 0; d < 2 && k + 1 < end && L->src[k + 1] >= '0' && L->src[k + 1] <= '7'; d++)
                    v = v * 8 + (L->src[++k] - '0');
                cp = v;
            } else {
                out[o++] = '\\';
                out[o++] = e;
            }
        }
        if (cp >= 0) {
            char enc[4];
            size_t len = mxl_utf8_encode(cp, enc);
            /* an escape never produces more bytes than its source text (\xNN: 4 >= 2) */
            memcpy(out + o, enc, len);
            o += len;
        }
    }
    ttoken *t = push(L, TK_STRING, start);
    if (!t) return lex_fail(L, start, "out of memory");
    t->s = out;
    t->n = o;
    *pos = end + 1;
    return true;
}

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }
static bool is_name0(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

/* digits with optional single underscores between them; returns end */
static size_t scan_digits(const char *s, size_t n, size_t i) {
    if (i >= n || !is_digit(s[i])) return i;
    while (i < n) {
        if (is_digit(s[i])) i++;
        else if (s[i] == '_' && i + 1 < n && is_digit(s[i + 1])) i++;
        else break;
    }
    return i;
}

static bool lex_number(lexer *L, size_t *pos) {
    size_t b = *pos, i = scan_digits(L->src, L->n, b);
    bool is_float = false;
    size_t j = i;
    if (j + 1 < L->n && L->src[j] == '.' && is_digit(L->src[j + 1])) {
        j = scan_digits(L->src, L->n, j + 1);
        is_float = true;
    }
    if (j < L->n && (L->src[j] == 'e' || L->src[j] == 'E')) {
        size_t k = j + 1;
        if (k < L->n && (L->src[k] == '+' || L->src[k] == '-')) k++;
        if (k < L->n && is_digit(L->src[k])) {
            j = scan_digits(L->src, L->n, k);
            is_float = true;
        }
    }
    char buf[128];
    size_t o = 0;
    size_t end = is_float ? j : i;
    for (size_t k = b; k < end && o < sizeof buf - 1; k++)
        if (L->src[k] != '_') buf[o++] = L->src[k];
    buf[o] = 0;
    if (end - b >= sizeof buf - 1) return lex_fail(L, b, "number literal too long");
    ttoken *t;
    if (is_float) {
        t = push(L, TK_FLOAT, b);
        if (!t) return lex_fail(L, b, "out of memory");
        t->f = strtod(buf, NULL);
    } else {
        if (o > 1 && buf[0] == '0') {
            for (size_t k = 0; k < o; k++)
                if (buf[k] != '0') return lex_fail(L, b, "invalid integer literal (leading zeros)");
        }
        char *ep;
        unsigned long long v = strtoull(buf, &ep, 10);
        if (o > 18 && (o > 19 || strcmp(buf, "9223372036854775807") > 0))
            return lex_fail(L, b, "integer literal too large");
        t = push(L, TK_INT, b);
        if (!t) return lex_fail(L, b, "out of memory");
        t->i = (int64_t)v;
    }
    *pos = end;
    return true;
}

static const char *const OPS2[] = {"**", "//", "==", "!=", "<=", ">=", NULL};
static const char OPS1[] = "+-/*%~[](){}<>=.:|,;";

/* Lexes the inside of a tag until its end delimiter. kind: 'v' for {{ }}, 'b' for {% %}. */
static bool lex_tag(lexer *L, size_t *pos, char kind, size_t tag_pos) {
    size_t i = *pos;
    char stack[64];
    size_t depth = 0;
    const char close = kind == 'v' ? '}' : '%';
    for (;;) {
        while (i < L->n && is_ws(L->src[i])) i++;
        if (i >= L->n)
            return lex_fail(L, tag_pos, kind == 'v' ? "unexpected end of template, expected 'end of print statement' (}})"
                                                  : "unexpected end of template, expected 'end of statement block' (%})");
        char ch = L->src[i];
        if (depth == 0) {
            char sign = 0;
            size_t k = i;
            if ((ch == '-' || (ch == '+' && kind == 'b')) && k + 2 < L->n && L->src[k + 1] == close &&
                L->src[k + 2] == '}') {
                sign = ch;
                k++;
            }
            if (k + 1 < L->n && L->src[k] == close && L->src[k + 1] == '}') {
                ttoken *t = push(L, kind == 'v' ? TK_VAR_END : TK_BLOCK_END, i);
                if (!t) return lex_fail(L, i, "out of memory");
                k += 2;
                if (sign == '-') {
                    while (k < L->n && is_ws(L->src[k])) k++;
                } else if (sign != '+' && kind == 'b' && k < L->n && L->src[k] == '\n') {
                    k++; /* trim_blocks */
                }
                *pos = k;
                return true;
            }
        }
        if (is_digit(ch)) {
            if (!lex_number(L, &i)) return false;
            continue;
        }
        if (is_name0(ch)) {
            size_t b = i;
            while (i < L->n && (is_name0(L->src[i]) || is_digit(L->src[i]))) i++;
            ttoken *t = push(L, TK_NAME, b);
            if (!t) return lex_fail(L, b, "out of memory");
            t->s = L->src + b;
            t->n = i - b;
            continue;
        }
        if (ch == '\'' || ch == '"') {
            if (!lex_string(L, &i)) return false;
            continue;
        }
        bool matched = false;
        for (int k = 0; OPS2[k]; k++) {
            if (i + 1 < L->n && L->src[i] == OPS2[k][0] && L->src[i + 1] == OPS2[k][1]) {
                ttoken *t = push(L, TK_OP, i);
                if (!t) return lex_fail(L, i, "out of memory");
                memcpy(t->op, OPS2[k], 3);
                i += 2;
                matched = true;
                break;
            }
        }
        if (matched) continue;
        if (ch && strchr(OPS1, ch)) {
            if (ch == '(' || ch == '[' || ch == '{') {
                if (depth >= sizeof stack) return lex_fail(L, i, "brackets nested too deeply");
                stack[depth++] = ch == '(' ? ')' : ch == '[' ? ']' : '}';
            } else if (ch == ')' || ch == ']' || ch == '}') {
                if (depth == 0) {
                    char m[64];
                    snprintf(m, sizeof m, "unexpected '%c'", ch);
                    return lex_fail(L, i, m);
                }
                if (stack[depth - 1] != ch) {
                    char m[64];
                    snprintf(m, sizeof m, "unexpected '%c', expected '%c'", ch, stack[depth - 1]);
                    return lex_fail(L, i, m);
                }
                depth--;
            }
            ttoken *t = push(L, TK_OP, i);
            if (!t) return lex_fail(L, i, "out of memory");
            t->op[0] = ch;
            i++;
            continue;
        }
        char m[64];
        if ((unsigned char)ch >= 0x20 && (unsigned char)ch < 0x7f)
            snprintf(m, sizeof m, "unexpected char '%c'", ch);
        else
            snprintf(m, sizeof m, "unexpected byte 0x%02x", (unsigned char)ch);
        return lex_fail(L, i, m);
    }
}

/* Matches `{%[-+]? raw [-]?%}` (or endraw) at pos; returns end of the tag or 0. */
static size_t match_raw_tag(lexer *L, size_t pos, const char *word, char *sign_out, char *end_sign) {
    size_t i = pos;
    if (i + 1 >= L->n || L->src[i] != '{' || L->src[i + 1] != '%') return 0;
    i += 2;
    char sign = 0;
    if (i < L->n && (L->src[i] == '-' || L->src[i] == '+')) sign = L->src[i++];
    while (i < L->n && is_ws(L->src[i])) i++;
    size_t wl = strlen(word);
    if (i + wl > L->n || memcmp(L->src + i, word, wl) != 0) return 0;
    i += wl;
    if (i < L->n && (is_name0(L->src[i]) || is_digit(L->src[i]))) return 0;
    while (i < L->n && is_ws(L->src[i])) i++;
    char es = 0;
    if (i < L->n && (L->src[i] == '-' || L->src[i] == '+')) es = L->src[i++];
    if (i + 1 >= L->n || L->src[i] != '%' || L->src[i + 1] != '}') return 0;
    *sign_out = sign;
    *end_sign = es;
    return i + 2;
}

bool mxl_tpl_tlex(mxl_arena *a, const char *src, size_t n, ttoken **out, size_t *n_out, char *err,
          size_t err_cap) {
    lexer L = {.a = a, .src = src, .n = n, .err = err, .err_cap = err_cap, .lc_line = 1, .lc_col = 1};
    size_t pos = 0;
    while (pos < n) {
        /* find the next tag start */
        size_t t = pos;
        const char *p = NULL;
        while (t + 1 < n) {
            p = memchr(src + t, '{', n - t - 1);
            if (!p) break;
            t = (size_t)(p - src);
            char c2 = src[t + 1];
            if (c2 == '{' || c2 == '%' || c2 == '#') break;
            t++;
            p = NULL;
        }
        if (!p) {
            if (!emit_text(&L, pos, n, 0, false)) return false;
            break;
        }
        char kind = src[t + 1];
        char sign = (t + 2 < n && (src[t + 2] == '-' || src[t + 2] == '+')) ? src[t + 2] : 0;
        if (kind == '{' && sign == '+') sign = 0; /* `{{+` is not a whitespace control */
        /* raw block */
        char rs, res;
        size_t raw_end = kind == '%' ? match_raw_tag(&L, t, "raw", &rs, &res) : 0;
        if (raw_end) {
            if (!emit_text(&L, pos, t, rs, true)) return false;
            size_t body = raw_end;
            if (res == '-')
                while (body < n && is_ws(src[body])) body++;
            /* find {% endraw %} */
            size_t k = body, tag_end = 0;
            char es = 0, ees = 0;
            while (k + 1 < n) {
                const char *q = memchr(src + k, '{', n - k - 1);
                if (!q) break;
                k = (size_t)(q - src);
                tag_end = match_raw_tag(&L, k, "endraw", &es, &ees);
                if (tag_end) break;
                k++;
            }
            if (!tag_end) return lex_fail(&L, t, "missing end of raw directive ({% endraw %})");
            if (!emit_text(&L, body, k, es, true)) return false;
            pos = tag_end;
            if (ees == '-') {
                while (pos < n && is_ws(src[pos])) pos++;
            } else if (ees != '+' && pos < n && src[pos] == '\n') {
                pos++;
            }
            continue;
        }
        if (!emit_text(&L, pos, t, sign, kind != '{')) return false;
        size_t inner = t + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            size_t k = inner;
            const char *q = NULL;
            while (k + 1 < n) {
                q = memchr(src + k, '#', n - k - 1);
                if (!q) break;
                k = (size_t)(q - src);
                if (src[k + 1] == '}') break;
                k++;
                q = NULL;
            }
            if (!q) return lex_fail(&L, t, "missing end of comment tag (#})");
            char cs = k > inner && (src[k - 1] == '-' || src[k - 1] == '+') ? src[k - 1] : 0;
            pos = k + 2;
            if (cs == '-') {
                while (pos < n && is_ws(src[pos])) pos++;
            } else if (cs != '+' && pos < n && src[pos] == '\n') {
                pos++;
            }
            continue;
        }
        ttoken *bt = push(&L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, t);
        if (!bt) return lex_fail(&L, t, "out of memory");
        pos = inner;
        if (!lex_tag(&L, &pos, kind == '{' ? 'v' : 'b', t)) return false;
    }
    ttoken *e = push(&L, TK_EOF, n);
    if (!e) return lex_fail(&L, n, "out of memory");
    *out = L.toks;
    *n_out = L.nt;
    return true;
}
