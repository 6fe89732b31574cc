/* json_schema.c - JSON Schema -> GBNF (json_schema.h). The rule shapes follow llama.cpp's
 * common/json-schema-to-grammar.cpp (SchemaConverter) so that generation under a schema accepts
 * the same texts as llama-server: the same primitive rules (number with at most 16 integral and
 * 16 fraction digits, strings of JSON characters), properties in schema order with optional ones
 * chained so each may be skipped, additionalProperties keys that avoid the known names (a trie of
 * the names turned into a "none of these strings" rule), integer ranges spelled digit by digit.
 * Rules are named after the schema path (root, root-item, ref-defs-x...), made unique by a number
 * when two different bodies want one name, and written in the order they were made. */
#include "engine/json_schema.h"
#include "core/alloc.h"
#include "io/json_read.h"
#include "io/json_write.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- strings -------------------------------------------------------------------------------- */

typedef struct sb {
    char *p;
    size_t n, cap;
    bool oom;
} sb;

static void sb_putn(sb *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = mxl_realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_puts(sb *b, const char *s) { sb_putn(b, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static void sb_printf(sb *b, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof buf) {
        sb_putn(b, buf, (size_t)n);
        return;
    }
    char *big = mxl_malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_putn(b, big, (size_t)n);
    mxl_free(big);
}

static const char *sb_str(const sb *b) { return b->p ? b->p : ""; }

/* ---- converter state ------------------------------------------------------------------------- */

typedef struct conv {
    char **names, **bodies;
    size_t n, cap;
    /* name index: rule index + 1, 0 = free; n_slots a power of two, at most half full. A linear
     * scan per lookup made big schemas cubic (found by fuzz_json_schema: 1000 optional
     * properties took 8 s, 2000 names that escape to one rule name 5 s) */
    uint32_t *slots;
    size_t n_slots;
    const json_t *root;
    json_t *refs;      /* "#/..." -> target schema */
    json_t *resolving; /* refs being visited (recursion guard) */
    char err[400];
    bool failed, oom;
    int depth;
} conv;

static void fail(conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(conv *c, const char *fmt, ...) {
    if (c->failed) return;
    c->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

static char *dupn(const char *s, size_t n) {
    char *p = mxl_malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

static uint64_t rule_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static ptrdiff_t find_rule(const conv *c, const char *name) {
    if (!c->n_slots) return -1;
    size_t mask = c->n_slots - 1;
    for (size_t i = (size_t)rule_hash(name) & mask;; i = (i + 1) & mask) {
        uint32_t e = c->slots[i];
        if (!e) return -1;
        if (!strcmp(c->names[e - 1], name)) return (ptrdiff_t)e - 1;
    }
}

/* Indexes rule c->names[k] (new), growing the index to stay at most half full. */
static bool index_rule(conv *c, size_t k) {
    if ((k + 1) * 2 > c->n_slots) {
        size_t ns = c->n_slots ? c->n_slots * 2 : 64;
        while ((k + 1) * 2 > ns) ns *= 2;
        uint32_t *t = mxl_calloc(ns, sizeof *t);
        if (!t) return false;
        for (size_t r = 0; r < k; r++) {
            size_t i = (size_t)rule_hash(c->names[r]) & (ns - 1);
            while (t[i]) i = (i + 1) & (ns - 1);
            t[i] = (uint32_t)(r + 1);
        }
        mxl_free(c->slots);
        c->slots = t;
        c->n_slots = ns;
    }
    size_t i = (size_t)rule_hash(c->names[k]) & (c->n_slots - 1);
    while (c->slots[i]) i = (i + 1) & (c->n_slots - 1);
    c->slots[i] = (uint32_t)(k + 1);
    return true;
}

/* Sets name -> body (new or replaced); returns the stored name. */
static const char *set_rule(conv *c, const char *name, const char *body) {
    ptrdiff_t i = find_rule(c, name);
    char *b = dupn(body, strlen(body));
    if (!b) {
        c->oom = true;
        return "";
    }
    if (i >= 0) {
        mxl_free(c->bodies[i]);
        c->bodies[i] = b;
        return c->names[i];
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 32;
        char **nn = mxl_realloc(c->names, cap * sizeof *nn);
        if (nn) c->names = nn;
        char **bb = mxl_realloc(c->bodies, cap * sizeof *bb);
        if (bb) c->bodies = bb;
        if (!nn || !bb) {
            mxl_free(b);
            c->oom = true;
            return "";
        }
        c->cap = cap;
    }
    char *n = dupn(name, strlen(name));
    if (!n) {
        mxl_free(b);
        c->oom = true;
        return "";
    }
    c->names[c->n] = n;
    c->bodies[c->n] = b;
    if (!index_rule(c, c->n)) {
        mxl_free(n);
        mxl_free(b);
        c->oom = true;
        return "";
    }
    c->n++;
    return n;
}

static bool name_char(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-'; }

/* Adds a rule under name (runs of characters a rule name cannot hold become '-'); a different
 * body already under that name gets the first free name0, name1, ... */
static const char *add_rule(conv *c, const char *name, const char *body) {
    sb esc = {0};
    for (const char *s = name; *s;) {
        if (name_char(*s)) sb_putn(&esc, s++, 1);
        else {
            while (*s && !name_char(*s)) s++;
            sb_putn(&esc, "-", 1);
        }
    }
    const char *e = sb_str(&esc);
    const char *out;
    ptrdiff_t i = find_rule(c, e);
    if (i < 0 || !strcmp(c->bodies[i], body)) out = set_rule(c, e, body);
    else {
        sb key = {0};
        for (int k = 0;; k++) {
            key.n = 0;
            sb_printf(&key, "%s%d", e, k);
            ptrdiff_t j = find_rule(c, sb_str(&key));
            if (j < 0 || !strcmp(c->bodies[j], body) || key.oom) break;
        }
        out = set_rule(c, sb_str(&key), body);
        mxl_free(key.p);
    }
    if (esc.oom) c->oom = true;
    mxl_free(esc.p);
    return out;
}

/* ---- built-in rules -------------------------------------------------------------------------- */

typedef struct builtin {
    const char *name, *body, *deps[6];
} builtin;

static const char k_space_rule[] = "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}";

static const builtin k_primitives[] = {
    {"boolean", "(\"true\" | \"false\") space", {NULL}},
    {"decimal-part", "[0-9]{1,16}", {NULL}},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", {NULL}},
    {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space", {"integral-part", "decimal-part", NULL}},
    {"integer", "(\"-\"? integral-part) space", {"integral-part", NULL}},
    {"value", "object | array | string | number | boolean | null", {"object", "array", "string", "number", "boolean", "null"}},
    {"object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space", {"string", "value", NULL}},
    {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", {"value", NULL}},
    {"uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\" space", {NULL}},
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", {NULL}},
    {"string", "\"\\\"\" char* \"\\\"\" space", {"char", NULL}},
    {"null", "\"null\" space", {NULL}},
};

static const builtin k_formats[] = {
    {"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )", {NULL}},
    {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", {NULL}},
    {"date-time", "date \"T\" time", {"date", "time", NULL}},
    {"date-string", "\"\\\"\" date \"\\\"\" space", {"date", NULL}},
    {"time-string", "\"\\\"\" time \"\\\"\" space", {"time", NULL}},
    {"date-time-string", "\"\\\"\" date-time \"\\\"\" space", {"date-time", NULL}},
};

#define N_PRIM (sizeof k_primitives / sizeof k_primitives[0])
#define N_FMT (sizeof k_formats / sizeof k_formats[0])

static const builtin *find_builtin(const char *name) {
    for (size_t i = 0; i < N_PRIM; i++)
        if (!strcmp(k_primitives[i].name, name)) return &k_primitives[i];
    for (size_t i = 0; i < N_FMT; i++)
        if (!strcmp(k_formats[i].name, name)) return &k_formats[i];
    return NULL;
}

static const builtin *find_primitive(const char *name) {
    for (size_t i = 0; i < N_PRIM; i++)
        if (!strcmp(k_primitives[i].name, name)) return &k_primitives[i];
    return NULL;
}

static bool reserved_name(const char *name) { return !strcmp(name, "root") || find_builtin(name) != NULL; }

static const char *add_primitive(conv *c, const char *name, const builtin *b) {
    const char *n = add_rule(c, name, b->body);
    for (int i = 0; i < 6 && b->deps[i]; i++)
        if (find_rule(c, b->deps[i]) < 0) add_primitive(c, b->deps[i], find_builtin(b->deps[i]));
    return n;
}

/* A GBNF string literal of s (", \, CR and LF escaped). */
static void put_literal(sb *out, const char *s, size_t n) {
    sb_putn(out, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '\r': sb_puts(out, "\\r"); break;
        case '\n': sb_puts(out, "\\n"); break;
        case '"': sb_puts(out, "\\\""); break;
        case '\\': sb_puts(out, "\\\\"); break;
        default: sb_putn(out, &s[i], 1);
        }
    }
    sb_putn(out, "\"", 1);
}

/* The literal of a JSON value's compact text. */
static void put_constant(conv *c, sb *out, const json_t *v) {
    char *d = mxl_json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!d) {
        c->oom = true;
        return;
    }
    put_literal(out, d, strlen(d));
    mxl_free(d);
}

/* ---- integer ranges (llama.cpp's _build_min_max_int) ----------------------------------------- */

static void digit_range(sb *o, char from, char to) {
    if (from == to) sb_printf(o, "[%c]", from);
    else sb_printf(o, "[%c-%c]", from, to);
}

static void more_digits(sb *o, int min_d, int max_d) {
    sb_puts(o, "[0-9]");
    if (min_d == max_d && min_d == 1) return;
    sb_printf(o, "{%d", min_d);
    if (max_d != min_d) {
        sb_puts(o, ",");
        if (max_d != INT32_MAX) sb_printf(o, "%d", max_d);
    }
    sb_puts(o, "}");
}

/* Numbers from `from` to `to`, both strings of the same length. */
static void uniform_range(sb *o, const char *from, const char *to) {
    size_t len = strlen(from), i = 0;
    while (i < len && from[i] == to[i]) i++;
    if (i > 0) {
        sb_puts(o, "\"");
        sb_putn(o, from, i);
        sb_puts(o, "\"");
    }
    if (i >= len) return;
    if (i > 0) sb_puts(o, " ");
    size_t sub_len = len - i - 1;
    if (sub_len == 0) {
        sb_printf(o, "[%c-%c]", from[i], to[i]);
        return;
    }
    char zeros[32], nines[32];
    memset(zeros, '0', sub_len);
    memset(nines, '9', sub_len);
    zeros[sub_len] = nines[sub_len] = 0;
    const char *from_sub = from + i + 1, *to_sub = to + i + 1;
    bool to_reached = false;
    sb_puts(o, "(");
    if (!strcmp(from_sub, zeros)) {
        digit_range(o, from[i], (char)(to[i] - 1));
        sb_puts(o, " ");
        more_digits(o, (int)sub_len, (int)sub_len);
    } else {
        sb_printf(o, "[%c] (", from[i]);
        uniform_range(o, from_sub, nines);
        sb_puts(o, ")");
        if (from[i] < to[i] - 1) {
            sb_puts(o, " | ");
            if (!strcmp(to_sub, nines)) {
                digit_range(o, (char)(from[i] + 1), to[i]);
                to_reached = true;
            } else {
                digit_range(o, (char)(from[i] + 1), (char)(to[i] - 1));
            }
            sb_puts(o, " ");
            more_digits(o, (int)sub_len, (int)sub_len);
        }
    }
    if (!to_reached) {
        sb_puts(o, " | ");
        digit_range(o, to[i], to[i]);
        sb_puts(o, " ");
        uniform_range(o, zeros, to_sub);
    }
    sb_puts(o, ")");
}

/* Digit strings of m's length that are >= m (m: digits, possibly with leading zeros inside a
 * longer number): a larger first digit and any rest, or m's first digit and the rest >= m's. */
static void at_least_same_length(sb *o, const char *m) {
    size_t len = strlen(m);
    if (len == 1) {
        digit_range(o, m[0], '9');
        return;
    }
    if (m[0] < '9') {
        digit_range(o, (char)(m[0] + 1), '9');
        sb_puts(o, " ");
        more_digits(o, (int)len - 1, (int)len - 1);
        sb_puts(o, " | ");
    }
    digit_range(o, m[0], m[0]);
    sb_puts(o, " (");
    at_least_same_length(o, m + 1);
    sb_puts(o, ")");
}

/* Integers >= m > 0 (m's decimal digits) of at most `digits` digits: the longer ones, then those of
 * m's length that are >= m. (llama.cpp recurses on the rest of m as a number, which drops its
 * leading zeros: a minimum of 405 admitted 45.) */
static void at_least(sb *o, const char *m, int digits) {
    int len = (int)strlen(m);
    if (digits > len) {
        sb_puts(o, "[1-9] ");
        more_digits(o, len, digits - 1);
        sb_puts(o, " | ");
    }
    at_least_same_length(o, m);
}

static void min_max_int(sb *o, int64_t min_v, int64_t max_v, int decimals_left, bool top_level) {
    bool has_min = min_v != INT64_MIN, has_max = max_v != INT64_MAX;
    if (has_min && has_max) {
        if (min_v < 0 && max_v < 0) {
            sb_puts(o, "\"-\" (");
            min_max_int(o, -max_v, -min_v, decimals_left, true);
            sb_puts(o, ")");
            return;
        }
        if (min_v < 0) {
            sb_puts(o, "\"-\" (");
            min_max_int(o, 0, -min_v, decimals_left, true);
            sb_puts(o, ") | ");
            min_v = 0;
        }
        char min_s[32], max_s[32];
        snprintf(min_s, sizeof min_s, "%" PRId64, min_v);
        snprintf(max_s, sizeof max_s, "%" PRId64, max_v);
        size_t min_d = strlen(min_s), max_d = strlen(max_s);
        for (size_t d = min_d; d < max_d; d++) {
            char nines[32];
            memset(nines, '9', d);
            nines[d] = 0;
            uniform_range(o, min_s, nines);
            min_s[0] = '1';
            memset(min_s + 1, '0', d);
            min_s[d + 1] = 0;
            sb_puts(o, " | ");
        }
        uniform_range(o, min_s, max_s);
        return;
    }
    int less = decimals_left - 1 > 1 ? decimals_left - 1 : 1;
    if (has_min) {
        if (min_v < 0) {
            sb_puts(o, "\"-\" (");
            min_max_int(o, INT64_MIN, -min_v, decimals_left, false);
            sb_puts(o, ") | [0] | [1-9] ");
            more_digits(o, 0, decimals_left - 1);
        } else if (min_v == 0) {
            if (top_level) {
                sb_puts(o, "[0] | [1-9] ");
                more_digits(o, 0, less);
            } else {
                more_digits(o, 1, decimals_left);
            }
        } else {
            char min_s[32];
            snprintf(min_s, sizeof min_s, "%" PRId64, min_v);
            at_least(o, min_s, decimals_left);
        }
        return;
    }
    if (has_max) {
        if (max_v >= 0) {
            if (top_level) {
                sb_puts(o, "\"-\" [1-9] ");
                more_digits(o, 0, less);
                sb_puts(o, " | ");
            }
            min_max_int(o, 0, max_v, decimals_left, true);
        } else {
            sb_puts(o, "\"-\" (");
            min_max_int(o, -max_v, INT64_MAX, decimals_left, false);
            sb_puts(o, ")");
        }
    }
}

/* ---- repetition ------------------------------------------------------------------------------ */

/* item{min,max} with an optional separator between items (max < 0: unbounded). */
static void build_repetition(sb *o, const char *item, long min, long max, const char *sep) {
    if (max == 0) return;
    if (min == 0 && max == 1) {
        sb_printf(o, "%s?", item);
        return;
    }
    if (!sep || !*sep) {
        if (min == 1 && max < 0) sb_printf(o, "%s+", item);
        else if (min == 0 && max < 0) sb_printf(o, "%s*", item);
        else if (max < 0) sb_printf(o, "%s{%ld,}", item, min);
        else sb_printf(o, "%s{%ld,%ld}", item, min, max);
        return;
    }
    sb inner = {0}, rest = {0};
    sb_printf(&inner, "(%s %s)", sep, item);
    build_repetition(&rest, sb_str(&inner), min == 0 ? 0 : min - 1, max < 0 ? -1 : max - 1, NULL);
    if (min == 0) sb_puts(o, "(");
    sb_printf(o, "%s %s", item, sb_str(&rest));
    if (min == 0) sb_puts(o, ")?");
    if (inner.oom || rest.oom) o->oom = true;
    mxl_free(inner.p);
    mxl_free(rest.p);
}

/* Bounds of a repetition the grammar parser takes (GBNF repetition counts stop at 2000): a
 * maximum over 2000 becomes unbounded, as llama.cpp's converter does (schemas write maxLength:
 * 65536 to mean "long"), while a minimum over 2000 or above the maximum (no instance could
 * match) is refused by name. false after fail(). */
#define REPEAT_MAX 2000
static bool repetition_bounds(conv *c, long *min, long *max, const char *what) {
    if (*max > REPEAT_MAX) *max = -1;
    if (*min > REPEAT_MAX) {
        fail(c, "json_schema: %s minimum %ld is over %d, the most a grammar repeats", what, *min, REPEAT_MAX);
        return false;
    }
    if (*max >= 0 && *min > *max) {
        fail(c, "json_schema: %s minimum %ld is above its maximum %ld: nothing could match", what, *min, *max);
        return false;
    }
    return true;
}

/* ---- visiting --------------------------------------------------------------------------------- */

static const char *visit(conv *c, const json_t *schema, const char *name);

static void child_name(sb *o, const char *name, const char *sep_if_named, const char *suffix) {
    sb_printf(o, "%s%s%s", name, *name ? sep_if_named : "", suffix);
}

/* Trie of strings for "a JSON string that is none of these" (additionalProperties keys). */
typedef struct tnode {
    int child[256];
    bool end;
} tnode;

typedef struct tpool {
    tnode *v;
    size_t n, cap;
} tpool;

static int tnew(tpool *p) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        tnode *v = mxl_realloc(p->v, cap * sizeof *v);
        if (!v) return -1;
        p->v = v;
        p->cap = cap;
    }
    memset(&p->v[p->n], 0, sizeof p->v[p->n]);
    return (int)p->n++;
}

/* A byte of a property name inside a GBNF character class: letters and digits as they are,
 * anything else as \xHH (a raw ] \ ^ or - would end the class, escape or negate it: found by
 * fuzz_json_schema, "i]]:12d" made "[]]"). Bytes of a multi-byte character stand for U+0080..
 * U+00FF here as they did written raw: the trie is over bytes. */
static void put_class_byte(sb *o, unsigned char b) {
    if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')) sb_putn(o, (const char *)&b, 1);
    else sb_printf(o, "\\x%02X", (unsigned)b);
}

static void not_strings_visit(const tpool *p, int node, const char *char_rule, sb *o) {
    const tnode *t = &p->v[node];
    bool first = true;
    sb rejects = {0};
    for (int b = 0; b < 256; b++) {
        int k = t->child[b];
        if (!k) continue;
        put_class_byte(&rejects, (unsigned char)b);
        if (!first) sb_puts(o, " | ");
        first = false;
        sb_puts(o, "[");
        put_class_byte(o, (unsigned char)b);
        sb_puts(o, "]");
        const tnode *kid = &p->v[k - 1];
        bool has_kids = false;
        for (int j = 0; j < 256 && !has_kids; j++) has_kids = kid->child[j] != 0;
        if (has_kids) {
            sb_puts(o, " (");
            not_strings_visit(p, k - 1, char_rule, o);
            sb_puts(o, ")");
        } else if (kid->end) {
            sb_printf(o, " %s+", char_rule);
        }
    }
    if (!first) sb_printf(o, " | [^\"%s] %s*", sb_str(&rejects), char_rule);
    mxl_free(rejects.p);
}

#define NOT_STRINGS_MAX_LEN 500
static void not_strings(conv *c, const char *const *strs, size_t n, sb *o) {
    tpool p = {0};
    if (tnew(&p) < 0) {
        c->oom = true;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        /* one level of parentheses per character: the grammar parser nests at most 1000 */
        if (strlen(strs[i]) > NOT_STRINGS_MAX_LEN) {
            fail(c, "json_schema: a property name of %zu bytes is too long to exclude from additionalProperties (at most %d)",
                 strlen(strs[i]), NOT_STRINGS_MAX_LEN);
            mxl_free(p.v);
            return;
        }
        int node = 0;
        for (const unsigned char *s = (const unsigned char *)strs[i]; *s; s++) {
            if (!p.v[node].child[*s]) {
                if (p.n >= 8192) { /* 1 KiB a node and one recursion level per character: bound both */
                    fail(c, "json_schema: too many property-name characters for additionalProperties");
                    mxl_free(p.v);
                    return;
                }
                int k = tnew(&p);
                if (k < 0) {
                    c->oom = true;
                    mxl_free(p.v);
                    return;
                }
                p.v[node].child[*s] = k + 1;
            }
            node = p.v[node].child[*s] - 1;
        }
        p.v[node].end = true;
    }
    const char *char_rule = add_primitive(c, "char", find_primitive("char"));
    sb_puts(o, "[\"] ( ");
    not_strings_visit(&p, 0, char_rule, o);
    sb_puts(o, " )");
    if (!p.v[0].end) sb_puts(o, "?");
    sb_puts(o, " [\"] space");
    mxl_free(p.v);
}

typedef struct prop {
    const char *key;
    const json_t *schema;
} prop;

static bool in_required(const json_t *req, const char *key) {
    size_t i;
    const json_t *v;
    json_array_foreach(req, i, v) if (json_is_string(v) && !strcmp(json_string_value(v), key)) return true;
    return false;
}

/* kv names indexed like keys; "*" is the additional-properties entry. */
/* memo[j]: the "-rest" rule already made for the keys after keys[j] (build_object_rule asks for
 * every suffix of the optional keys: without it the rules were rebuilt O(n^2) times) */
static void recursive_refs(conv *c, const char *name, char **keys, const char **kv, size_t n, bool first_optional, sb *o,
                           const char **memo) {
    if (n == 0) return;
    const char *k = keys[0];
    bool star = !strcmp(k, "*");
    sb comma = {0};
    sb_printf(&comma, "( \",\" space %s )", kv[0]);
    if (first_optional) sb_printf(o, "%s%s", sb_str(&comma), star ? "*" : "?");
    else {
        sb_puts(o, kv[0]);
        if (star) sb_printf(o, " %s*", sb_str(&comma));
    }
    if (n > 1 && memo[0]) {
        sb_printf(o, " %s", memo[0]);
    } else if (n > 1) {
        sb rest = {0}, rn = {0};
        recursive_refs(c, name, keys + 1, kv + 1, n - 1, true, &rest, memo + 1);
        child_name(&rn, name, "-", k);
        sb_puts(&rn, "-rest");
        memo[0] = add_rule(c, sb_str(&rn), sb_str(&rest));
        sb_printf(o, " %s", memo[0]);
        if (rest.oom || rn.oom) c->oom = true;
        mxl_free(rest.p);
        mxl_free(rn.p);
    }
    if (comma.oom) c->oom = true;
    mxl_free(comma.p);
}

static void build_object_rule(conv *c, const prop *props, size_t n_props, const json_t *required, const char *name,
                              const json_t *additional, sb *o) {
    /* required first, then optional, each in schema order */
    char **keys = mxl_calloc(n_props + 1, sizeof *keys);
    const char **kv = mxl_calloc(n_props + 1, sizeof *kv);
    char **req_keys = mxl_calloc(n_props + 1, sizeof *req_keys), **opt_keys = mxl_calloc(n_props + 1, sizeof *opt_keys);
    const char **req_kv = mxl_calloc(n_props + 1, sizeof *req_kv), **opt_kv = mxl_calloc(n_props + 1, sizeof *opt_kv);
    const char **names_only = mxl_calloc(n_props + 1, sizeof *names_only);
    if (!keys || !kv || !req_keys || !opt_keys || !req_kv || !opt_kv || !names_only) {
        c->oom = true;
        goto out;
    }
    size_t n_req = 0, n_opt = 0;
    for (size_t i = 0; i < n_props && !c->failed; i++) {
        sb pn = {0}, kn = {0}, body = {0};
        child_name(&pn, name, "-", props[i].key);
        const char *prule = visit(c, props[i].schema, sb_str(&pn));
        json_t *ks = json_string(props[i].key);
        put_constant(c, &body, ks);
        json_decref(ks);
        sb_printf(&body, " space \":\" space %s", prule);
        child_name(&kn, name, "-", props[i].key);
        sb_puts(&kn, "-kv");
        const char *kvname = add_rule(c, sb_str(&kn), sb_str(&body));
        if (pn.oom || kn.oom || body.oom) c->oom = true;
        mxl_free(pn.p);
        mxl_free(kn.p);
        mxl_free(body.p);
        names_only[i] = props[i].key;
        if (required && in_required(required, props[i].key)) {
            req_keys[n_req] = (char *)props[i].key;
            req_kv[n_req++] = kvname;
        } else {
            opt_keys[n_opt] = (char *)props[i].key;
            opt_kv[n_opt++] = kvname;
        }
    }
    /* (after a failure the property loop stopped early: names_only is not filled) */
    if (!c->failed && (json_is_true(additional) || json_is_object(additional))) {
        sb sub = {0}, vn = {0}, kname = {0}, kvn = {0}, kbody = {0}, kvbody = {0};
        child_name(&sub, name, "-", "additional");
        const char *value_rule;
        if (json_is_object(additional)) {
            sb_printf(&vn, "%s-value", sb_str(&sub));
            value_rule = visit(c, additional, sb_str(&vn));
        } else value_rule = add_primitive(c, "value", find_primitive("value"));
        const char *key_rule;
        if (n_props == 0) key_rule = add_primitive(c, "string", find_primitive("string"));
        else {
            not_strings(c, names_only, n_props, &kbody);
            sb_printf(&kname, "%s-k", sb_str(&sub));
            key_rule = add_rule(c, sb_str(&kname), sb_str(&kbody));
        }
        sb_printf(&kvbody, "%s \":\" space %s", key_rule, value_rule);
        sb_printf(&kvn, "%s-kv", sb_str(&sub));
        opt_keys[n_opt] = "*";
        opt_kv[n_opt++] = add_rule(c, sb_str(&kvn), sb_str(&kvbody));
        if (sub.oom || vn.oom || kname.oom || kvn.oom || kbody.oom || kvbody.oom) c->oom = true;
        mxl_free(sub.p);
        mxl_free(vn.p);
        mxl_free(kname.p);
        mxl_free(kvn.p);
        mxl_free(kbody.p);
        mxl_free(kvbody.p);
    }
    sb_puts(o, "\"{\" space ");
    for (size_t i = 0; i < n_req; i++) {
        if (i) sb_puts(o, " \",\" space ");
        sb_puts(o, req_kv[i]);
    }
    if (n_opt) {
        sb_puts(o, " (");
        if (n_req) sb_puts(o, " \",\" space ( ");
        const char **memo = mxl_calloc(n_opt, sizeof *memo);
        if (!memo) c->oom = true;
        for (size_t i = 0; i < n_opt && memo; i++) {
            if (i) sb_puts(o, " | ");
            recursive_refs(c, name, opt_keys + i, opt_kv + i, n_opt - i, false, o, memo + i);
        }
        mxl_free((void *)memo);
        if (n_req) sb_puts(o, " )");
        sb_puts(o, " )?");
    }
    sb_puts(o, " \"}\" space");
out:
    mxl_free(keys);
    mxl_free(kv);
    mxl_free(req_keys);
    mxl_free(opt_keys);
    mxl_free(req_kv);
    mxl_free(opt_kv);
    mxl_free(names_only);
}

/* The rule a $ref stands for (malloc'd name): "ref" + the pointer with other characters as '-',
 * visited on first use; a ref met again while it is being visited (a recursive schema) is named
 * before its rule exists, which the outer visit then defines. */
static char *resolve_ref(conv *c, const char *ref) {
    const char *hash = strchr(ref, '#');
    sb rn = {0};
    sb_puts(&rn, "ref");
    for (const char *s = hash ? hash + 1 : ref; *s;) {
        if (name_char(*s)) sb_putn(&rn, s++, 1);
        else {
            while (*s && !name_char(*s)) s++;
            sb_putn(&rn, "-", 1);
        }
    }
    char *out = NULL;
    if (find_rule(c, sb_str(&rn)) < 0 && !json_object_get(c->resolving, ref)) {
        const json_t *target = json_object_get(c->refs, ref);
        if (!target) fail(c, "json_schema: unresolved $ref '%.200s'", ref);
        else {
            json_object_set_new(c->resolving, ref, json_true());
            const char *v = visit(c, target, sb_str(&rn));
            out = dupn(v, strlen(v));
            json_object_del(c->resolving, ref);
        }
    } else {
        out = dupn(sb_str(&rn), strlen(sb_str(&rn)));
    }
    if (!out || rn.oom) c->oom = true;
    mxl_free(rn.p);
    return out;
}

/* Collects local $refs (#/...) into c->refs, resolving each JSON pointer against the root. */
static void collect_refs(conv *c, const json_t *n, int depth) {
    if (c->failed || depth > 256) return;
    if (json_is_array(n)) {
        size_t i;
        const json_t *v;
        json_array_foreach(n, i, v) collect_refs(c, v, depth + 1);
        return;
    }
    if (!json_is_object(n)) return;
    const json_t *r = json_object_get(n, "$ref");
    if (r) {
        const char *ref = json_string_value(r);
        if (!ref) {
            fail(c, "json_schema: $ref must be a string");
            return;
        }
        if (json_object_get(c->refs, ref)) return;
        if (strncmp(ref, "#/", 2) != 0 && strcmp(ref, "#") != 0) {
            fail(c, "json_schema: unsupported $ref '%.200s' (only local #/... references; convert remote schemas with --grammar)", ref);
            return;
        }
        const json_t *t = c->root;
        const char *s = ref + 1;
        while (*s == '/') {
            s++;
            const char *e = strchr(s, '/');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            char key[256];
            if (len >= sizeof key) {
                fail(c, "json_schema: $ref '%.200s' has a segment too long", ref);
                return;
            }
            memcpy(key, s, len);
            key[len] = 0;
            if (json_is_object(t) && json_object_get(t, key)) t = json_object_get(t, key);
            else if (json_is_array(t)) {
                char *end;
                unsigned long k = strtoul(key, &end, 10);
                if (*end || k >= json_array_size(t)) {
                    fail(c, "json_schema: error resolving $ref '%.200s': '%s' not found", ref, key);
                    return;
                }
                t = json_array_get(t, k);
            } else {
                fail(c, "json_schema: error resolving $ref '%.200s': '%s' not found", ref, key);
                return;
            }
            s += len;
        }
        json_object_set(c->refs, ref, (json_t *)t);
        return;
    }
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)n, k, v) collect_refs(c, v, depth + 1);
}

/* ---- pattern (llama.cpp's _visit_pattern: literals, ., [...], (...), |, * + ? {m,n}) --------- */

typedef struct pitem {
    char *s;
    bool literal;
    /* 0 an item, 1 quantified, 2 quantified and made lazy by '?', 3 the alternation bar: GBNF
     * cannot stack repetitions (x?+ is left recursion to its parser), so a lazy '?' is dropped
     * (the same strings match) and any other quantifier after one is refused, as a regex would
     * (nothing to repeat) */
    unsigned char quant;
    /* a group with an empty branch (( ), (a|) ...): its rule has an empty alternative, so an
     * unbounded repetition of it is left recursion to the grammar parser, which counts a rule
     * as empty by its own alternatives (as llama.cpp's does); one is refused by name */
    bool nullable;
} pitem;

typedef struct pstate {
    conv *c;
    const char *p;
    size_t i, len;
    const char *name;
    int n_sub;
    char **sub_keys, **sub_ids;
    size_t n_subs;
} pstate;

static char *item_rule(const pitem *it) {
    sb o = {0};
    if (it->literal) sb_printf(&o, "\"%s\"", it->s);
    else sb_puts(&o, it->s);
    if (o.oom) {
        mxl_free(o.p);
        return NULL;
    }
    return o.p ? o.p : dupn("", 0);
}

static bool non_literal(char ch) { return strchr("|.()[]{}*+?", ch) != NULL; }
static bool regex_only_escape(char ch) { return strchr("^$.[]()|{}*+?", ch) != NULL; }
static bool is_hex(char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'); }

/* The regex escape at ps->p[ps->i] ('\\') as GBNF text that means the same inside a string
 * literal or a character class: \t \r \n \xHH \uHHHH as they are, \f \v \0 as hex, an escaped
 * punctuation character (\/ \- \^ \" ...) as \xHH (GBNF knows few identity escapes, and a
 * bare ^ or - could mean something in a class), an escaped non-ASCII character as itself.
 * Class escapes (\d \w \s ...), back references and the rest are refused by name rather than
 * copied into a grammar the parser would refuse. false after fail(). */
static bool pattern_escape(pstate *ps, sb *o) {
    conv *c = ps->c;
    if (ps->i + 1 >= ps->len) {
        fail(c, "json_schema: pattern ends with a lone backslash");
        return false;
    }
    char e = ps->p[ps->i + 1];
    size_t rest = ps->len - ps->i - 2;
    const char *h = ps->p + ps->i + 2;
    if (e == 't' || e == 'r' || e == 'n') {
        sb_putn(o, ps->p + ps->i, 2);
        ps->i += 2;
    } else if (e == 'f' || e == 'v' || (e == '0' && !(rest && h[0] >= '0' && h[0] <= '9'))) {
        sb_puts(o, e == 'f' ? "\\x0C" : e == 'v' ? "\\x0B" : "\\x00");
        ps->i += 2;
    } else if ((e == 'x' && rest >= 2 && is_hex(h[0]) && is_hex(h[1])) ||
               (e == 'u' && rest >= 4 && is_hex(h[0]) && is_hex(h[1]) && is_hex(h[2]) && is_hex(h[3]))) {
        size_t n = e == 'x' ? 4 : 6;
        sb_putn(o, ps->p + ps->i, n);
        ps->i += n;
    } else if ((unsigned char)e >= 0x80) { /* an escaped non-ASCII character: its UTF-8 bytes */
        size_t k = ps->i + 2;
        while (k < ps->len && ((unsigned char)ps->p[k] & 0xC0) == 0x80) k++;
        sb_putn(o, ps->p + ps->i + 1, k - ps->i - 1);
        ps->i = k;
    } else if (!((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))) {
        sb_printf(o, "\\x%02X", (unsigned)(unsigned char)e);
        ps->i += 2;
    } else {
        fail(c, "json_schema: pattern escape '\\%c' is not supported", e);
        return false;
    }
    return true;
}

static void free_items(pitem *v, size_t n) {
    for (size_t i = 0; i < n; i++) mxl_free(v[i].s);
    mxl_free(v);
}

/* Parses until ')' or the end; returns the sequence as rule text (not literal), and in *nullable
 * whether one of its branches is empty. */
static char *pattern_seq(pstate *ps, int depth, bool *nullable) {
    conv *c = ps->c;
    size_t start = ps->i;
    pitem *seq = NULL;
    size_t n = 0, cap = 0;
#define PUSH_ITEM(str, lit)                                                   \
    do {                                                                      \
        if (n == cap) {                                                       \
            cap = cap ? cap * 2 : 8;                                          \
            pitem *nv = mxl_realloc(seq, cap * sizeof *nv);                       \
            if (!nv) {                                                        \
                c->oom = true;                                                \
                mxl_free(str);                                                    \
                goto done;                                                    \
            }                                                                 \
            seq = nv;                                                         \
        }                                                                     \
        seq[n].s = (str);                                                     \
        seq[n].quant = 0;                                                     \
        seq[n].nullable = false;                                              \
        seq[n++].literal = (lit);                                             \
    } while (0)
    if (depth > 64) {
        fail(c, "json_schema: pattern nests too deeply");
        goto done;
    }
    while (ps->i < ps->len && !c->failed && !c->oom) {
        char ch = ps->p[ps->i];
        if (ch == '.') {
            const char *dot = add_rule(c, "dot", "[^\\x0A\\x0D]");
            char *d = dupn(dot, strlen(dot));
            PUSH_ITEM(d, false);
            ps->i++;
        } else if (ch == '(') {
            ps->i++;
            if (ps->i < ps->len && ps->p[ps->i] == '?') {
                fail(c, "json_schema: pattern syntax '(?' is not supported");
                goto done;
            }
            bool inner_nullable = false;
            char *inner = pattern_seq(ps, depth + 1, &inner_nullable);
            if (!inner) goto done;
            sb o = {0};
            sb_printf(&o, "(%s)", inner);
            mxl_free(inner);
            PUSH_ITEM(o.p, false);
            seq[n - 1].nullable = inner_nullable;
        } else if (ch == ')') {
            ps->i++;
            if (start > 0 && ps->p[start - 1] != '(') fail(c, "json_schema: pattern has unbalanced parentheses");
            break;
        } else if (ch == '[') {
            sb o = {0};
            sb_putn(&o, "[", 1);
            ps->i++;
            size_t first = ps->i + (ps->i < ps->len && ps->p[ps->i] == '^');
            while (ps->i < ps->len && ps->p[ps->i] != ']') {
                if (ps->p[ps->i] == '\\') {
                    if (!pattern_escape(ps, &o)) break;
                } else sb_putn(&o, ps->p + ps->i++, 1);
            }
            if (c->failed) {
                mxl_free(o.p);
                goto done;
            }
            if (ps->i >= ps->len) fail(c, "json_schema: pattern has unbalanced square brackets");
            else if (ps->i == first) fail(c, "json_schema: pattern has an empty character class");
            sb_putn(&o, "]", 1);
            ps->i++;
            PUSH_ITEM(o.p, false);
        } else if (ch == '|') {
            PUSH_ITEM(dupn("|", 1), false);
            seq[n - 1].quant = 3;
            ps->i++;
        } else if (ch == '?' && n && seq[n - 1].quant == 1) {
            seq[n - 1].quant = 2; /* lazy: the same strings */
            ps->i++;
        } else if ((ch == '*' || ch == '+' || ch == '?' || ch == '{') && (!n || seq[n - 1].quant)) {
            if (!n || seq[n - 1].quant == 3) fail(c, "json_schema: pattern has '%c' with nothing before it", ch);
            else fail(c, "json_schema: pattern has a quantifier '%c' right after another", ch);
            goto done;
        } else if (ch == '*' || ch == '+' || ch == '?') {
            if (ch != '?' && seq[n - 1].nullable) {
                fail(c, "json_schema: pattern repeats with '%c' a group that can match the empty string", ch);
                goto done;
            }
            seq[n - 1].nullable = false; /* a reference to the repetition's rule */
            char *r = item_rule(&seq[n - 1]);
            sb o = {0};
            sb_printf(&o, "%s%c", r ? r : "", ch);
            mxl_free(r);
            mxl_free(seq[n - 1].s);
            seq[n - 1].s = o.p;
            seq[n - 1].literal = false;
            seq[n - 1].quant = 1;
            ps->i++;
        } else if (ch == '{') {
            size_t b = ++ps->i;
            while (ps->i < ps->len && ps->p[ps->i] != '}') ps->i++;
            if (ps->i >= ps->len) {
                fail(c, "json_schema: pattern has unbalanced curly brackets");
                goto done;
            }
            char nums[64];
            size_t nl = ps->i - b < sizeof nums - 1 ? ps->i - b : sizeof nums - 1;
            memcpy(nums, ps->p + b, nl);
            nums[nl] = 0;
            ps->i++;
            long mn = 0, mx = -1;
            char *comma = strchr(nums, ',');
            char *end;
            if (!comma) {
                mn = mx = strtol(nums, &end, 10);
                if (end == nums || *end || mn < 0) fail(c, "json_schema: pattern has an invalid number in curly brackets");
            } else {
                *comma = 0;
                if (*nums) {
                    mn = strtol(nums, &end, 10);
                    if (*end || mn < 0) fail(c, "json_schema: pattern has an invalid number in curly brackets");
                }
                if (comma[1]) {
                    mx = strtol(comma + 1, &end, 10);
                    if (*end || mx < 0) fail(c, "json_schema: pattern has an invalid number in curly brackets");
                }
            }
            if (!c->failed) repetition_bounds(c, &mn, &mx, "pattern repetition");
            if (!n || c->failed) {
                if (!n) fail(c, "json_schema: pattern has '{' with nothing before it");
                goto done;
            }
            pitem *last = &seq[n - 1];
            if (mx < 0 && last->nullable) {
                fail(c, "json_schema: pattern repeats with '{%ld,}' a group that can match the empty string", mn);
                goto done;
            }
            last->nullable = false;
            char *sub;
            if (!last->literal) {
                /* the same sub-pattern gets one rule */
                const char *id = NULL;
                for (size_t k = 0; k < ps->n_subs; k++)
                    if (!strcmp(ps->sub_keys[k], last->s)) id = ps->sub_ids[k];
                if (!id) {
                    sb rn = {0};
                    sb_printf(&rn, "%s-%zu", ps->name, ps->n_subs + 1);
                    id = add_rule(c, sb_str(&rn), last->s);
                    mxl_free(rn.p);
                    char **nk = mxl_realloc(ps->sub_keys, (ps->n_subs + 1) * sizeof *nk);
                    if (nk) ps->sub_keys = nk;
                    char **ni = mxl_realloc(ps->sub_ids, (ps->n_subs + 1) * sizeof *ni);
                    if (ni) ps->sub_ids = ni;
                    if (!nk || !ni) {
                        c->oom = true;
                        goto done;
                    }
                    ps->sub_keys[ps->n_subs] = dupn(last->s, strlen(last->s));
                    ps->sub_ids[ps->n_subs++] = (char *)id;
                }
                sub = dupn(id, strlen(id));
            } else {
                sub = item_rule(last);
            }
            sb o = {0};
            build_repetition(&o, sub ? sub : "", mn, mx, NULL);
            mxl_free(sub);
            mxl_free(last->s);
            last->s = o.p ? o.p : dupn("", 0);
            last->literal = false;
            last->quant = 1;
        } else {
            sb lit = {0};
            while (ps->i < ps->len) {
                char cc = ps->p[ps->i];
                if (cc == '\\') {
                    char next = ps->i + 1 < ps->len ? ps->p[ps->i + 1] : 0;
                    if (next && regex_only_escape(next)) {
                        sb_putn(&lit, &next, 1);
                        ps->i += 2;
                    } else if (!pattern_escape(ps, &lit)) {
                        mxl_free(lit.p);
                        goto done;
                    }
                } else if (cc == '"') {
                    sb_puts(&lit, "\\\"");
                    ps->i++;
                } else if (!non_literal(cc) &&
                           (ps->i == ps->len - 1 || lit.n == 0 || ps->p[ps->i + 1] == '.' || !non_literal(ps->p[ps->i + 1]))) {
                    sb_putn(&lit, &cc, 1);
                    ps->i++;
                } else break;
            }
            if (lit.n) PUSH_ITEM(lit.p, true);
            else {
                mxl_free(lit.p);
                if (ps->i < ps->len && !non_literal(ps->p[ps->i])) ps->i++; /* cannot happen; keep moving */
                else if (ps->i < ps->len && (ps->p[ps->i] == '}' || ps->p[ps->i] == ']')) {
                    fail(c, "json_schema: pattern has an unexpected '%c'", ps->p[ps->i]);
                }
            }
        }
    }
    {
        /* nullable: some branch between the bars is empty */
        bool empty = true;
        *nullable = false;
        for (size_t k = 0; k < n; k++) {
            if (seq[k].quant == 3) *nullable |= empty;
            empty = seq[k].quant == 3;
        }
        *nullable |= empty;
        /* join, merging consecutive literals */
        sb o = {0}, lit = {0};
        bool first = true;
        for (size_t k = 0; k <= n; k++) {
            if (k < n && seq[k].literal) {
                sb_puts(&lit, seq[k].s);
                continue;
            }
            if (lit.n) {
                sb_printf(&o, "%s\"%s\"", first ? "" : " ", lit.p);
                first = false;
                lit.n = 0;
            }
            if (k < n) {
                sb_printf(&o, "%s%s", first ? "" : " ", seq[k].s);
                first = false;
            }
        }
        mxl_free(lit.p);
        free_items(seq, n);
        if (o.oom) c->oom = true;
        return o.p ? o.p : dupn("", 0);
    }
done:
    free_items(seq, n);
    return NULL;
#undef PUSH_ITEM
}

static const char *visit_pattern(conv *c, const char *pattern, const char *name) {
    size_t len = strlen(pattern);
    if (len < 2 || pattern[0] != '^' || pattern[len - 1] != '$') {
        fail(c, "json_schema: pattern must start with '^' and end with '$'");
        return "";
    }
    pstate ps = {.c = c, .p = pattern + 1, .len = len - 2, .name = name};
    bool nullable = false;
    char *body = pattern_seq(&ps, 0, &nullable);
    for (size_t k = 0; k < ps.n_subs; k++) mxl_free(ps.sub_keys[k]);
    mxl_free(ps.sub_keys);
    mxl_free(ps.sub_ids);
    if (!body) return "";
    sb o = {0};
    sb_printf(&o, "\"\\\"\" (%s) \"\\\"\" space", body);
    mxl_free(body);
    const char *r = add_rule(c, name, sb_str(&o));
    mxl_free(o.p);
    return r;
}

/* ---- the visitor -------------------------------------------------------------------------------- */

static bool type_is(const json_t *t, const char *name) { return json_is_string(t) && !strcmp(json_string_value(t), name); }

static long get_int(conv *c, const json_t *schema, const char *key, long dflt) {
    const json_t *v = json_object_get(schema, key);
    if (!v) return dflt;
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        fail(c, "json_schema: '%s' must be a non-negative integer", key);
        return dflt;
    }
    json_int_t x = json_integer_value(v);
    return x > 100000 ? 100000 : (long)x;
}

static const char *union_rule(conv *c, const char *rule_name, const char *name, const json_t *const *alts, size_t n) {
    sb body = {0};
    for (size_t i = 0; i < n && !c->failed; i++) {
        sb an = {0};
        sb_printf(&an, "%s%s%zu", name, *name ? "-" : "alternative-", i);
        const char *r = visit(c, alts[i], sb_str(&an));
        mxl_free(an.p);
        sb_printf(&body, "%s%s", i ? " | " : "", r);
    }
    const char *out = add_rule(c, rule_name, sb_str(&body));
    if (body.oom) c->oom = true;
    mxl_free(body.p);
    return out;
}

static const char *visit_inner(conv *c, const json_t *schema, const char *name);

static const char *visit(conv *c, const json_t *schema, const char *name) {
    if (c->failed || c->oom) return "";
    if (++c->depth > 128) {
        fail(c, "json_schema: the schema nests too deeply");
        c->depth--;
        return "";
    }
    const char *r = visit_inner(c, schema, name);
    c->depth--;
    return r;
}

static const char *visit_inner(conv *c, const json_t *schema, const char *name) {
    if (json_is_true(schema)) schema = NULL; /* `true` accepts anything: treat as {} */
    else if (!json_is_object(schema)) {
        char *d = mxl_json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
        fail(c, "json_schema: unrecognized schema: %.200s", d ? d : "?");
        mxl_free(d);
        return "";
    }
    const json_t *type = json_object_get(schema, "type");
    const json_t *fmt = json_object_get(schema, "format");
    const char *format = json_is_string(fmt) ? json_string_value(fmt) : "";
    sb rn = {0};
    if (reserved_name(name)) sb_printf(&rn, "%s-", name);
    else sb_puts(&rn, *name ? name : "root");
    const char *rule_name = sb_str(&rn);
    const char *out = "";
    sb body = {0};
    bool untyped = type == NULL || json_is_null(type);

    if (type && !json_is_string(type) && !json_is_array(type) && !json_is_null(type)) {
        fail(c, "json_schema: 'type' must be a string or an array of strings");
    } else if (json_object_get(schema, "$ref")) {
        const char *ref = json_string_value(json_object_get(schema, "$ref"));
        if (!ref) fail(c, "json_schema: $ref must be a string");
        else {
            char *t = resolve_ref(c, ref);
            out = add_rule(c, rule_name, t ? t : "");
            mxl_free(t);
        }
    } else if (json_object_get(schema, "oneOf") || json_object_get(schema, "anyOf")) {
        const json_t *alts = json_object_get(schema, "oneOf");
        if (!alts) alts = json_object_get(schema, "anyOf");
        if (!json_is_array(alts) || json_array_size(alts) == 0) fail(c, "json_schema: anyOf/oneOf must be a non-empty array");
        else {
            size_t n = json_array_size(alts);
            const json_t **v = mxl_malloc(n * sizeof *v);
            if (!v) c->oom = true;
            else {
                for (size_t i = 0; i < n; i++) v[i] = json_array_get(alts, i);
                out = union_rule(c, rule_name, name, v, n);
                mxl_free(v);
            }
        }
    } else if (json_is_array(type)) {
        size_t n = json_array_size(type);
        if (n == 0) fail(c, "json_schema: 'type' is an empty array");
        json_t **copies = mxl_calloc(n ? n : 1, sizeof *copies);
        if (!copies) c->oom = true;
        for (size_t i = 0; copies && i < n; i++) {
            copies[i] = json_copy((json_t *)schema);
            if (copies[i]) json_object_set(copies[i], "type", json_array_get(type, i));
            else c->oom = true;
        }
        if (copies && !c->oom && n) out = union_rule(c, rule_name, name, (const json_t *const *)copies, n);
        for (size_t i = 0; copies && i < n; i++) json_decref(copies[i]);
        mxl_free(copies);
    } else if (json_object_get(schema, "const")) {
        put_constant(c, &body, json_object_get(schema, "const"));
        sb_puts(&body, " space");
        out = add_rule(c, rule_name, sb_str(&body));
    } else if (json_object_get(schema, "enum")) {
        const json_t *e = json_object_get(schema, "enum");
        if (!json_is_array(e) || json_array_size(e) == 0) fail(c, "json_schema: 'enum' must be a non-empty array");
        else {
            sb_puts(&body, "(");
            size_t i;
            const json_t *v;
            json_array_foreach(e, i, v) {
                if (i) sb_puts(&body, " | ");
                put_constant(c, &body, v);
            }
            sb_puts(&body, ") space");
            out = add_rule(c, rule_name, sb_str(&body));
        }
    } else if ((untyped || type_is(type, "object")) &&
               (json_object_get(schema, "properties") ||
                (json_object_get(schema, "additionalProperties") && !json_is_true(json_object_get(schema, "additionalProperties"))))) {
        const json_t *pr = json_object_get(schema, "properties");
        if (pr && !json_is_object(pr)) fail(c, "json_schema: 'properties' must be an object");
        size_t n = json_is_object(pr) ? json_object_size(pr) : 0;
        prop *props = mxl_calloc(n + 1, sizeof *props);
        if (!props) c->oom = true;
        else {
            /* jansson keeps insertion order (the schema's order) when iterating */
            size_t k = 0;
            const char *key;
            const json_t *v;
            if (json_is_object(pr)) json_object_foreach((json_t *)pr, key, v) props[k++] = (prop){key, v};
            const json_t *req = json_object_get(schema, "required");
            build_object_rule(c, props, k, json_is_array(req) ? req : NULL, name, json_object_get(schema, "additionalProperties"), &body);
            out = add_rule(c, rule_name, sb_str(&body));
            mxl_free(props);
        }
    } else if ((untyped || type_is(type, "object") || type_is(type, "string")) && json_object_get(schema, "allOf")) {
        const json_t *all = json_object_get(schema, "allOf");
        if (!json_is_array(all)) fail(c, "json_schema: 'allOf' must be an array");
        else {
            /* merge the components' properties (required ones from plain components, optional
             * from components inside an anyOf), or intersect their enums */
            json_t *required = json_array(), *seen_enum = json_object();
            prop *props = NULL;
            size_t n_props = 0, cap = 0;
            size_t i;
            const json_t *t;
            json_array_foreach(all, i, t) {
                const json_t *comps[64];
                size_t n_comps = 0;
                bool is_req = true;
                const json_t *any = json_object_get(t, "anyOf");
                if (json_is_array(any)) {
                    is_req = false;
                    for (size_t j = 0; j < json_array_size(any) && n_comps < 64; j++) comps[n_comps++] = json_array_get(any, j);
                } else comps[n_comps++] = t;
                for (size_t j = 0; j < n_comps; j++) {
                    const json_t *comp = comps[j];
                    for (int hops = 0; hops < 32 && json_object_get(comp, "$ref"); hops++)
                        comp = json_object_get(c->refs, json_string_value(json_object_get(comp, "$ref")));
                    const json_t *cp = json_object_get(comp, "properties");
                    const json_t *ce = json_object_get(comp, "enum");
                    if (json_is_object(cp)) {
                        const char *key;
                        const json_t *v;
                        json_object_foreach((json_t *)cp, key, v) {
                            if (n_props == cap) {
                                cap = cap ? cap * 2 : 8;
                                prop *np = mxl_realloc(props, cap * sizeof *np);
                                if (!np) {
                                    c->oom = true;
                                    break;
                                }
                                props = np;
                            }
                            props[n_props++] = (prop){key, v};
                            if (is_req) json_array_append_new(required, json_string(key));
                        }
                    } else if (json_is_array(ce)) {
                        size_t q;
                        const json_t *ev;
                        json_array_foreach(ce, q, ev) {
                            sb lit = {0};
                            put_constant(c, &lit, ev);
                            json_t *cnt = json_object_get(seen_enum, sb_str(&lit));
                            json_object_set_new(seen_enum, sb_str(&lit), json_integer(cnt ? json_integer_value(cnt) + 1 : 1));
                            mxl_free(lit.p);
                        }
                    }
                }
            }
            bool done = false;
            if (json_object_size(seen_enum)) {
                const char *lit;
                json_t *cnt;
                bool first = true;
                sb_puts(&body, "(");
                json_object_foreach(seen_enum, lit, cnt) {
                    if ((size_t)json_integer_value(cnt) != json_array_size(all)) continue;
                    sb_printf(&body, "%s%s", first ? "" : " | ", lit);
                    first = false;
                }
                sb_puts(&body, ") space");
                if (!first) {
                    out = add_rule(c, rule_name, sb_str(&body));
                    done = true;
                }
                body.n = 0;
            }
            if (!done) {
                build_object_rule(c, props, n_props, required, name, NULL, &body);
                out = add_rule(c, rule_name, sb_str(&body));
            }
            mxl_free(props);
            json_decref(required);
            json_decref(seen_enum);
        }
    } else if ((untyped || type_is(type, "array")) && (json_object_get(schema, "items") || json_object_get(schema, "prefixItems"))) {
        const json_t *items = json_object_get(schema, "items");
        /* prefixItems with items false (no more elements) is the same closed tuple */
        if (!items || (json_is_false(items) && json_is_array(json_object_get(schema, "prefixItems")))) items = json_object_get(schema, "prefixItems");
        if (json_is_array(items)) {
            sb_puts(&body, "\"[\" space ");
            size_t i;
            const json_t *it;
            json_array_foreach(items, i, it) {
                if (i) sb_puts(&body, " \",\" space ");
                sb tn = {0};
                child_name(&tn, name, "-", "tuple-");
                sb_printf(&tn, "%zu", i);
                sb_puts(&body, visit(c, it, sb_str(&tn)));
                mxl_free(tn.p);
            }
            sb_puts(&body, " \"]\" space");
        } else {
            sb in = {0};
            child_name(&in, name, "-", "item");
            const char *item = visit(c, items, sb_str(&in));
            char *item_copy = dupn(item, strlen(item));
            mxl_free(in.p);
            long mn = get_int(c, schema, "minItems", 0), mx = get_int(c, schema, "maxItems", -1);
            repetition_bounds(c, &mn, &mx, "minItems / maxItems:");
            sb_puts(&body, "\"[\" space ");
            build_repetition(&body, item_copy ? item_copy : "", mn, mx, "\",\" space");
            sb_puts(&body, " \"]\" space");
            mxl_free(item_copy);
        }
        out = add_rule(c, rule_name, sb_str(&body));
    } else if ((untyped || type_is(type, "string")) && json_object_get(schema, "pattern")) {
        const char *pat = json_string_value(json_object_get(schema, "pattern"));
        if (!pat) fail(c, "json_schema: 'pattern' must be a string");
        else out = visit_pattern(c, pat, rule_name);
    } else if ((untyped || type_is(type, "string")) && !strncmp(format, "uuid", 4) &&
               (format[4] == 0 || (format[4] >= '1' && format[4] <= '5' && format[5] == 0))) {
        out = add_primitive(c, !strcmp(rule_name, "root") ? "root" : format, find_primitive("uuid"));
    } else if ((untyped || type_is(type, "string")) && *format &&
               (!strcmp(format, "date") || !strcmp(format, "time") || !strcmp(format, "date-time"))) {
        sb pn = {0};
        sb_printf(&pn, "%s-string", format);
        const char *prim = add_primitive(c, sb_str(&pn), find_builtin(sb_str(&pn)));
        char *p = dupn(prim, strlen(prim));
        out = add_rule(c, rule_name, p ? p : "");
        mxl_free(p);
        mxl_free(pn.p);
    } else if (type_is(type, "string") && (json_object_get(schema, "minLength") || json_object_get(schema, "maxLength"))) {
        const char *ch = add_primitive(c, "char", find_primitive("char"));
        long mn = get_int(c, schema, "minLength", 0), mx = get_int(c, schema, "maxLength", -1);
        repetition_bounds(c, &mn, &mx, "minLength / maxLength:");
        sb_puts(&body, "\"\\\"\" ");
        build_repetition(&body, ch, mn, mx, NULL);
        sb_puts(&body, " \"\\\"\" space");
        out = add_rule(c, rule_name, sb_str(&body));
    } else if (type_is(type, "integer") && (json_object_get(schema, "minimum") || json_object_get(schema, "exclusiveMinimum") ||
                                            json_object_get(schema, "maximum") || json_object_get(schema, "exclusiveMaximum"))) {
        int64_t mn = INT64_MIN, mx = INT64_MAX;
        const json_t *v;
        bool bad = false;
        /* bounds that are not integers, or at the int64 edge, are refused rather than mis-spelled */
#define BOUND(key, var, adj)                                                           \
        if ((v = json_object_get(schema, key))) {                                      \
            if (!json_is_integer(v) || json_integer_value(v) <= INT64_MIN / 2 || json_integer_value(v) >= INT64_MAX / 2) bad = true; \
            else var = (int64_t)json_integer_value(v) + (adj);                         \
        }
        BOUND("minimum", mn, 0) else BOUND("exclusiveMinimum", mn, 1)
        BOUND("maximum", mx, 0) else BOUND("exclusiveMaximum", mx, -1)
#undef BOUND
        if (bad) fail(c, "json_schema: integer minimum/maximum must be integers of moderate size");
        else if (mn != INT64_MIN && mx != INT64_MAX && mn > mx) fail(c, "json_schema: integer minimum is above its maximum");
        else {
            /* llama.cpp's 16 digits at most, or one more than a bound has (a 16-digit bound
             * left no room for the longer numbers: [0-9]{16,15}, found by fuzz_json_schema) */
            int digits = 16;
            char tmp[32];
            if (mn != INT64_MIN && (int)snprintf(tmp, sizeof tmp, "%" PRId64, mn < 0 ? -mn : mn) + 1 > digits) digits = (int)strlen(tmp) + 1;
            if (mx != INT64_MAX && (int)snprintf(tmp, sizeof tmp, "%" PRId64, mx < 0 ? -mx : mx) + 1 > digits) digits = (int)strlen(tmp) + 1;
            sb_puts(&body, "(");
            min_max_int(&body, mn, mx, digits, true);
            sb_puts(&body, ") space");
            out = add_rule(c, rule_name, sb_str(&body));
        }
    } else if (!schema || json_object_size(schema) == 0 || type_is(type, "object")) {
        const char *obj = add_primitive(c, "object", find_primitive("object"));
        char *p = dupn(obj, strlen(obj));
        out = add_rule(c, rule_name, p ? p : "");
        mxl_free(p);
    } else {
        const builtin *b = json_is_string(type) ? find_primitive(json_string_value(type)) : NULL;
        if (!b || !strcmp(json_string_value(type), "value") || !strcmp(json_string_value(type), "char") ||
            !strcmp(json_string_value(type), "uuid") || strstr(json_string_value(type), "-part")) {
            char *d = mxl_json_dumps(schema, JSON_COMPACT);
            fail(c, "json_schema: unrecognized schema: %.200s", d ? d : "?");
            mxl_free(d);
        } else {
            out = add_primitive(c, !strcmp(rule_name, "root") ? "root" : json_string_value(type), b);
        }
    }
    if (body.oom || rn.oom) c->oom = true;
    mxl_free(body.p);
    mxl_free(rn.p);
    return out;
}

static void conv_free(conv *c) {
    for (size_t i = 0; i < c->n; i++) {
        mxl_free(c->names[i]);
        mxl_free(c->bodies[i]);
    }
    mxl_free(c->names);
    mxl_free(c->bodies);
    mxl_free(c->slots);
    json_decref(c->refs);
    json_decref(c->resolving);
}

mxl_status mxl_json_schema_to_grammar(const json_t *schema, char **out, mxl_error *err) {
    *out = NULL;
    conv c = {.root = schema, .refs = json_object(), .resolving = json_object()};
    if (!c.refs || !c.resolving) {
        conv_free(&c);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    set_rule(&c, "space", k_space_rule);
    collect_refs(&c, schema, 0);
    if (!c.failed) visit(&c, schema, "");
    if (!c.failed && !c.oom && find_rule(&c, "root") < 0) fail(&c, "json_schema: the schema produced no root rule");
    sb g = {0};
    for (size_t i = 0; i < c.n && !c.failed; i++) sb_printf(&g, "%s ::= %s\n", c.names[i], c.bodies[i]);
    mxl_status st = MXL_OK;
    if (c.failed) st = mxl_error_set(err, MXL_ERR_ARG, "%s", c.err);
    else if (c.oom || g.oom) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    conv_free(&c);
    if (st) {
        mxl_free(g.p);
        return st;
    }
    *out = g.p;
    return MXL_OK;
}

mxl_status mxl_json_schema_text_to_grammar(const char *text, size_t len, char **out, mxl_error *err) {
    *out = NULL;
    json_error_t je;
    json_t *j = mxl_json_loadb(text, len, JSON_DECODE_ANY, &je);
    if (!j && mxl_json_error_is_oom(&je)) return mxl_error_set(err, MXL_ERR_NOMEM, "json_schema: out of memory");
    if (!j) return mxl_error_set(err, MXL_ERR_ARG, "json_schema: not valid JSON (%s at line %d column %d)", je.text, je.line, je.column);
    mxl_status st = mxl_json_schema_to_grammar(j, out, err);
    json_decref(j);
    return st;
}
