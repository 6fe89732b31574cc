/* json_fast.c - a small single-pass JSON scanner for the two big members of tokenizer.json,
 * model.vocab (hundreds of thousands of "token": id pairs) and model.merges (as many "a b"
 * strings or ["a", "b"] pairs). Building a jansson DOM for them costs most of the load time of a
 * 30 MB file, so the loader cuts these spans out, parses the small rest with jansson, and reads
 * the spans here directly into the vocabulary and merge tables.
 *
 * Strictness matches jansson's for what these members hold: strings must be valid UTF-8 without
 * raw control characters, escapes are the JSON set (\uXXXX with surrogate pairs; a lone surrogate
 * is an error), ids are non-negative integers. */
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tokenizer/tok_internal.h"
#include "tokenizer/json_fast.h"

/* Pretty-printed tokenizer.json files are mostly indentation (Gemma 3's merges: each "a" and "b"
 * on its own line, eight spaces in), so whitespace is skipped 16 bytes at a time where SSE2 is
 * there (every x86-64), else a byte at a time. */
static inline bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t tok_json_ws_run(const char *s, size_t n, size_t i) {
#if defined(__SSE2__)
    const __m128i sp = _mm_set1_epi8(' '), nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'), tb = _mm_set1_epi8('\t');
    while (i + 16 <= n) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i w = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, sp), _mm_cmpeq_epi8(v, nl)),
                                 _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, tb)));
        unsigned m = (unsigned)_mm_movemask_epi8(w) ^ 0xFFFFu; /* bit set: not whitespace */
        if (m) return i + (size_t)__builtin_ctz(m);
        i += 16;
    }
#endif
    while (i < n && is_ws(s[i])) i++;
    return i;
}

static int hex4(const char *s, size_t n, size_t i, uint32_t *v) {
    if (i + 4 > n) return 0;
    uint32_t x = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[i + k];
        x <<= 4;
        if (c >= '0' && c <= '9') x |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') x |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') x |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    *v = x;
    return 1;
}

size_t tok_json_string(const char *s, size_t n, size_t i, mxl_strbuf *out) {
    if (i >= n || s[i] != '"') return TOK_JSON_BAD;
    i++;
    if (out) out->n = 0;
    size_t run = i;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') {
            if (out && (!mxl_strbuf_append(out, s + run, i - run))) return TOK_JSON_BAD;
            if (!tok_utf8_valid(s + run, i - run)) return TOK_JSON_BAD;
            return i + 1;
        }
        if (c < 0x20) return TOK_JSON_BAD;
        if (c != '\\') {
            i++;
            continue;
        }
        if (!tok_utf8_valid(s + run, i - run)) return TOK_JSON_BAD;
        if (out && !mxl_strbuf_append(out, s + run, i - run)) return TOK_JSON_BAD;
        if (i + 1 >= n) return TOK_JSON_BAD;
        char e = s[i + 1];
        char lit = 0;
        switch (e) {
        case '"': lit = '"'; break;
        case '\\': lit = '\\'; break;
        case '/': lit = '/'; break;
        case 'b': lit = '\b'; break;
        case 'f': lit = '\f'; break;
        case 'n': lit = '\n'; break;
        case 'r': lit = '\r'; break;
        case 't': lit = '\t'; break;
        case 'u': {
            uint32_t cp;
            if (!hex4(s, n, i + 2, &cp)) return TOK_JSON_BAD;
            i += 6;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (i + 1 >= n || s[i] != '\\' || s[i + 1] != 'u' || !hex4(s, n, i + 2, &lo) || lo < 0xDC00 ||
                    lo > 0xDFFF)
                    return TOK_JSON_BAD;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return TOK_JSON_BAD;
            }
            if (out && !mxl_strbuf_put_cp(out, cp)) return TOK_JSON_BAD;
            run = i;
            continue;
        }
        default: return TOK_JSON_BAD;
        }
        if (out && !mxl_strbuf_putc(out, lit)) return TOK_JSON_BAD;
        i += 2;
        run = i;
    }
    return TOK_JSON_BAD;
}

/* Skips a string without decoding it (the bytes are validated when they are really parsed). */
static size_t skip_string(const char *s, size_t n, size_t i) {
    i++;
    while (i < n) {
        const char *q = memchr(s + i, '"', n - i);
        if (!q) return TOK_JSON_BAD;
        size_t j = (size_t)(q - s), bs = 0;
        while (j - bs > i && s[j - bs - 1] == '\\') bs++;
        if (bs % 2 == 0) return j + 1;
        i = j + 1;
    }
    return TOK_JSON_BAD;
}

size_t tok_json_skip(const char *s, size_t n, size_t i) { return tok_json_skip_count(s, n, i, NULL); }

size_t tok_json_skip_count(const char *s, size_t n, size_t i, size_t *count) {
    /* iterative: strings are skipped, brackets counted (their matching is checked) */
    char stack[256];
    size_t depth = 0, commas = 0;
    i = tok_json_ws(s, n, i);
    do {
        if (i >= n) return TOK_JSON_BAD;
        char c = s[i];
        if (c == '"') {
            i = skip_string(s, n, i);
            if (i == TOK_JSON_BAD) return i;
        } else if (c == '{' || c == '[') {
            if (depth == sizeof stack) return TOK_JSON_BAD;
            stack[depth++] = c == '{' ? '}' : ']';
            i++;
        } else if (c == '}' || c == ']') {
            if (!depth || stack[depth - 1] != c) return TOK_JSON_BAD;
            depth--;
            i++;
        } else if (c == ',' || c == ':' || c == ' ' || c == '\n' || c == '\r' || c == '\t') {
            if (!depth) return TOK_JSON_BAD;
            commas += c == ',' && depth == 1;
            i = tok_json_ws(s, n, i + 1);
        } else {
            /* number / true / false / null */
            size_t j = i;
            while (j < n && ((s[j] >= '0' && s[j] <= '9') || (s[j] >= 'a' && s[j] <= 'z') || s[j] == '-' ||
                             s[j] == '+' || s[j] == '.' || s[j] == 'E'))
                j++;
            if (j == i) return TOK_JSON_BAD;
            i = j;
        }
    } while (depth);
    if (count) *count = commas + 1;
    return i;
}

/* Walks the object at obj and returns the index just after it (TOK_JSON_BAD when malformed).
 * Level 0 is the document (it descends into "model"), level 1 is the model object (it records
 * the spans of "vocab" and "merges" in spans[0..3]). The last duplicate key wins, as in jansson. */
static size_t walk_object(const char *s, size_t n, size_t obj, int level, size_t *spans) {
    size_t i = tok_json_ws(s, n, obj);
    if (i >= n || s[i] != '{') return TOK_JSON_BAD;
    i = tok_json_ws(s, n, i + 1);
    if (i < n && s[i] == '}') return i + 1;
    mxl_strbuf k = {0};
    size_t end = TOK_JSON_BAD;
    while (i < n) {
        i = tok_json_string(s, n, i, &k);
        if (i == TOK_JSON_BAD) break;
        i = tok_json_ws(s, n, i);
        if (i >= n || s[i] != ':') break;
        size_t vs = tok_json_ws(s, n, i + 1), ve;
        bool is_model = level == 0 && k.n == 5 && memcmp(k.p, "model", 5) == 0;
        if (is_model) spans[0] = spans[1] = spans[2] = spans[3] = spans[4] = spans[5] = 0;
        if (is_model && vs < n && s[vs] == '{') {
            ve = walk_object(s, n, vs, 1, spans);
        } else {
            size_t cnt = 0;
            ve = tok_json_skip_count(s, n, vs, &cnt);
            if (ve != TOK_JSON_BAD && level == 1 && k.n == 5 && memcmp(k.p, "vocab", 5) == 0) {
                spans[0] = vs;
                spans[1] = ve;
                spans[4] = cnt;
            } else if (ve != TOK_JSON_BAD && level == 1 && k.n == 6 && memcmp(k.p, "merges", 6) == 0) {
                spans[2] = vs;
                spans[3] = ve;
                spans[5] = cnt;
            }
        }
        if (ve == TOK_JSON_BAD) break;
        i = tok_json_ws(s, n, ve);
        if (i < n && s[i] == ',') {
            i = tok_json_ws(s, n, i + 1);
            continue;
        }
        if (i < n && s[i] == '}') end = i + 1;
        break;
    }
    mxl_strbuf_free(&k);
    return end;
}

void tok_json_find_model_spans(const char *s, size_t n, size_t out[6]) {
    size_t sp[6] = {0, 0, 0, 0, 0, 0};
    if (walk_object(s, n, 0, 0, sp) == TOK_JSON_BAD) memset(sp, 0, sizeof sp);
    memcpy(out, sp, sizeof sp);
}
