/* json_read.c - checkpoint JSON read as Python's json module reads it (see json_read.h).
 *
 * jansson does the parsing. Before it, one pass over the text finds what Python accepts and
 * jansson does not (a BOM, integers past int64, reals past the double range, NaN / Infinity /
 * -Infinity, lone surrogate escapes) and rewrites just those tokens into a copy; text without
 * them (nearly every file) goes to jansson untouched, with no copy. The pass tracks strings so
 * that a "NaN" or a long digit run inside a string is left alone; it never decides validity:
 * malformed text stays malformed and jansson reports it (a rewrite never adds a newline, so
 * jansson's line numbers are the file's). */
#include "io/json_read.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "io/mapped_file.h"

/* The tagged strings that stand for the non-finite literals (json_read.h). */
#define TAG_NAN "\"\\u0000NaN\""
#define TAG_INF "\"\\u0000Infinity\""
#define TAG_NINF "\"\\u0000-Infinity\""

typedef struct rewriter {
    const char *s;
    size_t n;
    mxl_strbuf out; /* empty until the first rewrite */
    size_t copied;  /* s[0, copied) is in out already */
    bool oom;
} rewriter;

static void put(rewriter *w, const char *p, size_t k) {
    if (!w->oom && !mxl_strbuf_append(&w->out, p, k)) w->oom = true;
}

/* s[a, b) is replaced by `rep`. */
static void replace(rewriter *w, size_t a, size_t b, const char *rep, size_t rep_len) {
    put(w, w->s + w->copied, a - w->copied);
    put(w, rep, rep_len);
    w->copied = b;
}

static bool starts(const rewriter *w, size_t i, const char *lit) {
    size_t k = strlen(lit);
    return w->n - i >= k && memcmp(w->s + i, lit, k) == 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The code unit of a \uXXXX escape at s[i] ('\\'), or -1 when s[i..] is not one. */
static long u_escape(const rewriter *w, size_t i) {
    if (w->n - i < 6 || w->s[i] != '\\' || w->s[i + 1] != 'u') return -1;
    long v = 0;
    for (int k = 2; k < 6; k++) {
        int h = hexval(w->s[i + k]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* s[i] is the opening quote; returns the index past the closing one (n when unterminated). */
static size_t scan_string(rewriter *w, size_t i) {
    const char *s = w->s;
    size_t n = w->n;
    for (i++; i < n; i++) {
        char c = s[i];
        if (c == '"') return i + 1;
        if (c != '\\') continue;
        long u = u_escape(w, i);
        if (u < 0) {
            i++; /* any other escape is two characters (a bad one is jansson's to report) */
            continue;
        }
        if (u >= 0xD800 && u <= 0xDBFF) {
            long lo = u_escape(w, i + 6);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                i += 11;
                continue;
            }
        }
        if (u >= 0xD800 && u <= 0xDFFF) replace(w, i, i + 6, "\\uFFFD", 6);
        i += 5;
    }
    return n;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* End of the JSON number starting at s[i], or i when s[i..] does not match the grammar
 * -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; *real tells whether it has a fraction or an
 * exponent. */
static size_t number_end(const rewriter *w, size_t i, bool *real) {
    const char *s = w->s;
    size_t n = w->n, j = i;
    *real = false;
    if (j < n && s[j] == '-') j++;
    if (j >= n || !is_digit(s[j])) return i;
    if (s[j] == '0') j++;
    else
        while (j < n && is_digit(s[j])) j++;
    if (j < n && s[j] == '.') {
        *real = true;
        if (++j >= n || !is_digit(s[j])) return i;
        while (j < n && is_digit(s[j])) j++;
    }
    if (j < n && (s[j] == 'e' || s[j] == 'E')) {
        *real = true;
        if (++j < n && (s[j] == '+' || s[j] == '-')) j++;
        if (j >= n || !is_digit(s[j])) return i;
        while (j < n && is_digit(s[j])) j++;
    }
    return j;
}

/* The number s[a, b): integers past int64 become reals (Python's float() of them: the nearest
 * double, which strtod gives too), numbers past the double range become +-Infinity. */
static void number(rewriter *w, size_t a, size_t b, bool real) {
    char small[128], *tmp = small;
    size_t k = b - a;
    if (k >= sizeof small && !(tmp = mxl_malloc(k + 1))) {
        w->oom = true;
        return;
    }
    memcpy(tmp, w->s + a, k);
    tmp[k] = 0;
    errno = 0;
    bool fits = true;
    if (!real) {
        (void)strtoll(tmp, NULL, 10);
        fits = errno != ERANGE;
    }
    if (!fits || real) {
        double d = strtod(tmp, NULL);
        if (isinf(d)) {
            if (d > 0) replace(w, a, b, TAG_INF, sizeof TAG_INF - 1);
            else replace(w, a, b, TAG_NINF, sizeof TAG_NINF - 1);
        } else if (!fits) {
            replace(w, a, b, tmp, k); /* the digits, then ".0": jansson reads a real */
            put(w, ".0", 2);
        }
    }
    if (tmp != small) mxl_free(tmp);
}

/* Runs the rewriting pass; *text / *len point at what jansson should parse (the input past a BOM,
 * or w->out). False when out of memory. */
static bool prepare(rewriter *w, const char **text, size_t *len) {
    if (w->n >= 3 && memcmp(w->s, "\xEF\xBB\xBF", 3) == 0) {
        w->s += 3;
        w->n -= 3;
    }
    const char *s = w->s;
    size_t n = w->n, i = 0;
    while (i < n && !w->oom) {
        char c = s[i];
        if (c == '"') {
            i = scan_string(w, i);
        } else if (c == '-' && starts(w, i, "-Infinity")) {
            replace(w, i, i + 9, TAG_NINF, sizeof TAG_NINF - 1);
            i += 9;
        } else if (c == '-' || is_digit(c)) {
            bool real;
            size_t e = number_end(w, i, &real);
            if (e == i) {
                i++;
                continue;
            }
            number(w, i, e, real);
            i = e;
        } else if (c == 'N' && starts(w, i, "NaN")) {
            replace(w, i, i + 3, TAG_NAN, sizeof TAG_NAN - 1);
            i += 3;
        } else if (c == 'I' && starts(w, i, "Infinity")) {
            replace(w, i, i + 8, TAG_INF, sizeof TAG_INF - 1);
            i += 8;
        } else {
            i++;
        }
    }
    if (w->out.p) put(w, s + w->copied, n - w->copied);
    if (w->oom) return false;
    *text = w->out.p ? w->out.p : s;
    *len = w->out.p ? w->out.n : n;
    return true;
}

json_t *mxl_json_loadb(const char *text, size_t len, size_t flags, json_error_t *je) {
    uint64_t f0 = mxl_alloc_thread_failures();
    mxl_alloc_json_parse_guard(true); /* jansson's lexer asserts when its buffer cannot grow (alloc.h) */
    json_t *root = json_loadb(text, len, flags, je);
    mxl_alloc_json_parse_guard(false);
    if (!root && je && mxl_alloc_thread_failures() != f0) {
        memset(je, 0, sizeof *je);
        snprintf(je->text, sizeof je->text, "out of memory");
    }
    return root;
}

bool mxl_json_error_is_oom(const json_error_t *je) { return !strcmp(je->text, "out of memory"); }

json_t *mxl_json_loads_py(const char *text, size_t len, json_error_t *je) {
    rewriter w = {.s = text ? text : "", .n = text ? len : 0};
    const char *t;
    size_t n;
    json_t *root = NULL;
    if (prepare(&w, &t, &n)) {
        root = mxl_json_loadb(t, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, je);
    } else if (je) {
        memset(je, 0, sizeof *je);
        snprintf(je->text, sizeof je->text, "out of memory");
    }
    mxl_strbuf_free(&w.out);
    return root;
}

mxl_status mxl_json_load_file_py(const char *path, size_t max_bytes, json_t **out, mxl_error *err) {
    *out = NULL;
    mxl_mapped_file f;
    mxl_status st = mxl_mapped_file_open(path, &f, err);
    if (st != MXL_OK) return st;
    if (f.size > max_bytes) {
        mxl_mapped_file_close(&f);
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %llu bytes is larger than any real file of its kind", path,
                             (unsigned long long)f.size);
    }
    json_error_t je;
    *out = mxl_json_loads_py((const char *)f.data, (size_t)f.size, &je);
    mxl_mapped_file_close(&f);
    if (!*out) {
        if (mxl_json_error_is_oom(&je)) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: invalid JSON at line %d column %d: %s", path, je.line,
                             je.column, je.text);
    }
    return MXL_OK;
}

bool mxl_json_number(const json_t *v, double *out) {
    if (json_is_integer(v)) {
        *out = (double)json_integer_value(v);
        return true;
    }
    if (json_is_real(v)) {
        *out = json_real_value(v);
        return true;
    }
    if (!json_is_string(v) || json_string_length(v) < 2 || json_string_value(v)[0] != '\0') return false;
    const char *t = json_string_value(v) + 1;
    size_t k = json_string_length(v) - 1;
    if (k == 3 && !memcmp(t, "NaN", 3)) *out = NAN;
    else if (k == 8 && !memcmp(t, "Infinity", 8)) *out = INFINITY;
    else if (k == 9 && !memcmp(t, "-Infinity", 9)) *out = -INFINITY;
    else return false;
    return true;
}

int mxl_json_int(const json_t *v, int64_t lo, int64_t hi, int64_t *out) {
    int64_t x;
    double d;
    if (json_is_integer(v)) {
        x = (int64_t)json_integer_value(v);
    } else if (mxl_json_number(v, &d)) {
        if (isnan(d)) return 1;
        if (isinf(d) || fabs(d) >= 0x1p63) return 2;
        if (floor(d) != d) return 1;
        x = (int64_t)d;
    } else {
        return 1;
    }
    if (x < lo || x > hi) return 2;
    *out = x;
    return 0;
}
