/* grammar_parse.c - GBNF text -> compiled rules (grammar_internal.h), following the grammar of
 * llama.cpp's src/llama-grammar.cpp parser (parse_space / parse_name / parse_sequence /
 * parse_alternates / parse_rule) and its rewriting of repetitions into helper rules:
 *
 *   S{m,n} -> S ... S (m times) R(n-m),  R(k) ::= S R(k-1) | ,  R(1) ::= S |
 *   S{m,}  -> S ... S (m times) R,       R ::= S R |
 *
 * so `*`, `+` and `?` are {0,}, {1,} and {0,1}. Groups ( ... ) become rules of their own. After
 * parsing: every referenced rule must be defined, `root` must exist, and no rule may reach itself
 * through leftmost positions (left recursion would make the stack matcher grow forever). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/grammar_internal.h"

#define GR_MAX_REPEAT 2000
#define GR_MAX_RULES (1u << 18)
#define GR_MAX_ELEMS (1u << 22)

/* A growable array of grammar elements (not text, so not core/strbuf.h): a rule body. */
typedef struct ebuf {
    gr_elem *v;
    size_t n, cap;
} ebuf;

typedef struct prule {
    char *name;    /* defined or referenced name (generated names for helper rules) */
    ebuf body;
    bool defined;
} prule;

typedef struct parser {
    const char *src; /* NUL-terminated copy */
    size_t len;
    prule *rules;
    size_t n_rules, cap_rules;
    uint32_t *slots; /* name hash index: rule id + 1, 0 = free; n_slots a power of two */
    size_t n_slots;
    mxl_error *err;
    bool failed;
    int depth;       /* parentheses open (recursion of parse_alternates) */
    size_t n_elems;  /* total, for the size cap */
} parser;

static bool fail_at(parser *p, const char *at, const char *what) {
    if (p->failed) return false;
    p->failed = true;
    size_t line = 1, col = 1;
    for (const char *c = p->src; c < at && *c; c++) {
        if (*c == '\n') line++, col = 1;
        else col++;
    }
    mxl_error_set(p->err, MXL_ERR_ARG, "grammar: %s at line %zu column %zu", what, line, col);
    return false;
}

static bool fail_msg(parser *p, mxl_status st, const char *fmt, const char *arg) {
    if (p->failed) return false;
    p->failed = true;
    char buf[256];
    snprintf(buf, sizeof buf, fmt, arg);
    mxl_error_set(p->err, st, "grammar: %s", buf);
    return false;
}

static bool push(parser *p, ebuf *b, uint32_t type, uint32_t value) {
    if (p->failed) return false;
    if (++p->n_elems > GR_MAX_ELEMS) return fail_msg(p, MXL_ERR_ARG, "%s", "the grammar expands to too many elements");
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        gr_elem *v = mxl_realloc(b->v, cap * sizeof *v);
        if (!v) return fail_msg(p, MXL_ERR_NOMEM, "%s", "out of memory");
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = (gr_elem){type, value};
    return true;
}

static bool append(parser *p, ebuf *b, const gr_elem *e, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!push(p, b, e[i].type, e[i].value)) return false;
    return true;
}

static uint64_t name_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* Keeps the name index at most half full. */
static bool index_reserve(parser *p) {
    if (p->n_slots && (p->n_rules + 1) * 2 <= p->n_slots) return true;
    size_t ns = p->n_slots ? p->n_slots * 2 : 64;
    uint32_t *t = mxl_calloc(ns, sizeof *t);
    if (!t) return false;
    for (size_t r = 0; r < p->n_rules; r++) {
        size_t i = (size_t)name_hash(p->rules[r].name, strlen(p->rules[r].name)) & (ns - 1);
        while (t[i]) i = (i + 1) & (ns - 1);
        t[i] = (uint32_t)(r + 1);
    }
    mxl_free(p->slots);
    p->slots = t;
    p->n_slots = ns;
    return true;
}

/* A new rule entry (undefined until define); UINT32_MAX on failure. */
static uint32_t add_symbol(parser *p, const char *name, size_t len) {
    if (p->n_rules >= GR_MAX_RULES) return fail_msg(p, MXL_ERR_ARG, "%s", "too many rules"), UINT32_MAX;
    if (p->n_rules == p->cap_rules) {
        size_t cap = p->cap_rules ? p->cap_rules * 2 : 16;
        prule *r = mxl_realloc(p->rules, cap * sizeof *r);
        if (!r) return fail_msg(p, MXL_ERR_NOMEM, "%s", "out of memory"), UINT32_MAX;
        p->rules = r;
        p->cap_rules = cap;
    }
    if (!index_reserve(p)) return fail_msg(p, MXL_ERR_NOMEM, "%s", "out of memory"), UINT32_MAX;
    prule *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    if (!(r->name = mxl_malloc(len + 1))) return fail_msg(p, MXL_ERR_NOMEM, "%s", "out of memory"), UINT32_MAX;
    memcpy(r->name, name, len);
    r->name[len] = 0;
    size_t i = (size_t)name_hash(name, len) & (p->n_slots - 1);
    while (p->slots[i]) i = (i + 1) & (p->n_slots - 1);
    p->slots[i] = (uint32_t)(p->n_rules + 1);
    return (uint32_t)p->n_rules++;
}

/* Id of a rule name, adding an undefined entry on first sight; UINT32_MAX on failure. */
static uint32_t symbol(parser *p, const char *name, size_t len) {
    if (p->n_slots) {
        size_t i = (size_t)name_hash(name, len) & (p->n_slots - 1);
        for (uint32_t e; (e = p->slots[i]); i = (i + 1) & (p->n_slots - 1)) {
            const char *rn = p->rules[e - 1].name;
            if (strlen(rn) == len && memcmp(rn, name, len) == 0) return e - 1;
        }
    }
    return add_symbol(p, name, len);
}

/* A fresh helper rule named after its parent (parent_N, N = its id). User names cannot hold '_'
 * and N is unique, so the name is new without a lookup. */
static uint32_t generated(parser *p, uint32_t parent) {
    char name[300];
    snprintf(name, sizeof name, "%.200s_%zu", p->rules[parent].name, p->n_rules);
    return add_symbol(p, name, strlen(name));
}

static bool define(parser *p, uint32_t id, ebuf *body) {
    prule *r = &p->rules[id];
    mxl_free(r->body.v);
    r->body = *body; /* a later definition of a name replaces the earlier one, as in llama.cpp */
    r->defined = true;
    memset(body, 0, sizeof *body);
    return true;
}

static bool is_word(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static const char *skip_space(const char *s, bool newline_ok) {
    while (*s == ' ' || *s == '\t' || *s == '#' || (newline_ok && (*s == '\r' || *s == '\n'))) {
        if (*s == '#')
            while (*s && *s != '\r' && *s != '\n') s++;
        else s++;
    }
    return s;
}

static const char *parse_name(parser *p, const char *s) {
    const char *e = s;
    while (is_word(*e)) e++;
    if (e == s) return fail_at(p, s, "expecting a name"), NULL;
    return e;
}

/* One UTF-8 character of the source (invalid bytes stand for themselves). */
static const char *utf8_char(const char *s, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    int n = u[0] < 0x80 ? 0 : (u[0] >> 5) == 6 ? 1 : (u[0] >> 4) == 14 ? 2 : (u[0] >> 3) == 30 ? 3 : -1;
    if (n < 0) {
        *cp = u[0];
        return s + 1;
    }
    uint32_t v = n == 0 ? u[0] : u[0] & (0x3Fu >> n);
    for (int i = 1; i <= n; i++) {
        if ((u[i] & 0xC0) != 0x80) { /* truncated: take the lead byte alone */
            *cp = u[0];
            return s + 1;
        }
        v = (v << 6) | (u[i] & 0x3F);
    }
    *cp = v;
    return s + n + 1;
}

static const char *parse_hex(parser *p, const char *s, int n, uint32_t *cp) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) {
            char what[48];
            snprintf(what, sizeof what, "expecting %d hex digits", n);
            return fail_at(p, s, what), NULL;
        }
        v = v * 16 + (uint32_t)d;
    }
    *cp = v;
    return s + n;
}

/* A literal or class character, escapes decoded. */
static const char *parse_char(parser *p, const char *s, uint32_t *cp) {
    if (*s == '\\') {
        switch (s[1]) {
        case 'x': return parse_hex(p, s + 2, 2, cp);
        case 'u': return parse_hex(p, s + 2, 4, cp);
        case 'U': return parse_hex(p, s + 2, 8, cp);
        case 't': *cp = '\t'; return s + 2;
        case 'r': *cp = '\r'; return s + 2;
        case 'n': *cp = '\n'; return s + 2;
        case '\\': case '"': case '[': case ']': case '-': *cp = (unsigned char)s[1]; return s + 2;
        default: return fail_at(p, s, "unknown escape"), NULL;
        }
    }
    if (!*s) return fail_at(p, s, "unexpected end of input"), NULL;
    return utf8_char(s, cp);
}

static const char *parse_alternates(parser *p, const char *s, uint32_t rule_id, bool nested);

/* Rewrites the symbol out->v[sym_start..] into min..max (max < 0: unbounded) repetitions. */
static bool repeat(parser *p, ebuf *out, size_t sym_start, uint32_t rule_id, long min, long max, const char *at) {
    if (sym_start == out->n) return fail_at(p, at, "expecting an item before the repetition operator");
    if (min > GR_MAX_REPEAT || max > GR_MAX_REPEAT) return fail_at(p, at, "repetition count over 2000");
    if (max >= 0 && max < min) return fail_at(p, at, "repetition maximum below its minimum");
    size_t n_sym = out->n - sym_start;
    gr_elem *sym = mxl_malloc(n_sym * sizeof *sym);
    if (!sym) return fail_msg(p, MXL_ERR_NOMEM, "%s", "out of memory");
    memcpy(sym, out->v + sym_start, n_sym * sizeof *sym);
    bool ok = true;
    if (min == 0) out->n = sym_start;
    else
        for (long i = 1; i < min && ok; i++) ok = append(p, out, sym, n_sym);
    long n_opt = max < 0 ? 1 : max - min;
    uint32_t last = 0;
    for (long i = 0; i < n_opt && ok; i++) {
        uint32_t id = generated(p, rule_id);
        if (id == UINT32_MAX) {
            ok = false;
            break;
        }
        ebuf body = {0};
        ok = append(p, &body, sym, n_sym);
        if (ok && (i > 0 || max < 0)) ok = push(p, &body, GR_REF, max < 0 ? id : last);
        if (ok) ok = push(p, &body, GR_ALT, 0) && push(p, &body, GR_END, 0);
        if (ok) define(p, id, &body);
        mxl_free(body.v);
        last = id;
    }
    if (ok && n_opt > 0) ok = push(p, out, GR_REF, last);
    mxl_free(sym);
    return ok;
}

static const char *parse_int(const char *s, long *v) {
    long x = 0;
    while (is_digit(*s)) {
        if (x <= 100000000L) x = x * 10 + (*s - '0');
        s++;
    }
    *v = x;
    return s;
}

static const char *parse_sequence(parser *p, const char *s, uint32_t rule_id, ebuf *out, bool nested) {
    size_t sym_start = out->n;
    while (*s && !p->failed) {
        const char *at = s;
        if (*s == '"') {
            s++;
            sym_start = out->n;
            while (*s != '"') {
                if (!*s) return fail_at(p, s, "unexpected end of input in a string literal"), NULL;
                uint32_t cp;
                if (!(s = parse_char(p, s, &cp)) || !push(p, out, GR_CHAR, cp)) return NULL;
            }
            s = skip_space(s + 1, nested);
        } else if (*s == '[') {
            s++;
            uint32_t first = GR_CHAR;
            if (*s == '^') s++, first = GR_CHAR_NOT;
            sym_start = out->n;
            if (*s == ']') return fail_at(p, s, "empty character class"), NULL;
            while (*s != ']') {
                if (!*s) return fail_at(p, s, "unexpected end of input in a character class"), NULL;
                uint32_t cp;
                if (!(s = parse_char(p, s, &cp))) return NULL;
                if (!push(p, out, sym_start < out->n ? GR_CHAR_ALT : first, cp)) return NULL;
                if (s[0] == '-' && s[1] != ']') {
                    if (!s[1]) return fail_at(p, s + 1, "unexpected end of input in a character class"), NULL;
                    uint32_t hi;
                    if (!(s = parse_char(p, s + 1, &hi)) || !push(p, out, GR_CHAR_RNG_UPPER, hi)) return NULL;
                }
            }
            s = skip_space(s + 1, nested);
        } else if (is_word(*s)) {
            const char *e = parse_name(p, s);
            if (!e) return NULL;
            uint32_t ref = symbol(p, s, (size_t)(e - s));
            if (ref == UINT32_MAX) return NULL;
            s = skip_space(e, nested);
            sym_start = out->n;
            if (!push(p, out, GR_REF, ref)) return NULL;
        } else if (*s == '(') {
            if (p->depth >= 1000) return fail_at(p, s, "parentheses nest too deeply"), NULL;
            s = skip_space(s + 1, true);
            uint32_t sub = generated(p, rule_id);
            p->depth++;
            s = sub == UINT32_MAX ? NULL : parse_alternates(p, s, sub, true);
            p->depth--;
            if (!s) return NULL;
            sym_start = out->n;
            if (!push(p, out, GR_REF, sub)) return NULL;
            if (*s != ')') return fail_at(p, s, "expecting ')'"), NULL;
            s = skip_space(s + 1, nested);
        } else if (*s == '.') {
            sym_start = out->n;
            if (!push(p, out, GR_CHAR_ANY, 0)) return NULL;
            s = skip_space(s + 1, nested);
        } else if (*s == '*' || *s == '+' || *s == '?') {
            char op = *s;
            s = skip_space(s + 1, nested);
            if (!repeat(p, out, sym_start, rule_id, op == '+' ? 1 : 0, op == '?' ? 1 : -1, at)) return NULL;
        } else if (*s == '{') {
            s = skip_space(s + 1, nested);
            if (!is_digit(*s)) return fail_at(p, s, "expecting an integer"), NULL;
            long min, max;
            s = skip_space(parse_int(s, &min), nested);
            if (*s == '}') max = min;
            else if (*s == ',') {
                s = skip_space(s + 1, nested);
                if (is_digit(*s)) s = skip_space(parse_int(s, &max), nested);
                else max = -1;
            } else return fail_at(p, s, "expecting ',' or '}'"), NULL;
            if (*s != '}') return fail_at(p, s, "expecting '}'"), NULL;
            s = skip_space(s + 1, nested);
            if (!repeat(p, out, sym_start, rule_id, min, max, at)) return NULL;
        } else {
            break;
        }
    }
    return p->failed ? NULL : s;
}

static const char *parse_alternates(parser *p, const char *s, uint32_t rule_id, bool nested) {
    ebuf body = {0};
    s = parse_sequence(p, s, rule_id, &body, nested);
    while (s && *s == '|') {
        if (!push(p, &body, GR_ALT, 0)) s = NULL;
        else s = parse_sequence(p, skip_space(s + 1, true), rule_id, &body, nested);
    }
    if (s && push(p, &body, GR_END, 0)) define(p, rule_id, &body);
    else s = NULL;
    mxl_free(body.v);
    return s;
}

static const char *parse_rule(parser *p, const char *s) {
    const char *e = parse_name(p, s);
    if (!e) return NULL;
    uint32_t id = symbol(p, s, (size_t)(e - s));
    if (id == UINT32_MAX) return NULL;
    s = skip_space(e, false);
    if (!(s[0] == ':' && s[1] == ':' && s[2] == '=')) return fail_at(p, s, "expecting '::='"), NULL;
    s = skip_space(s + 3, true);
    if (!(s = parse_alternates(p, s, id, false))) return NULL;
    if (*s == '\r') s += s[1] == '\n' ? 2 : 1;
    else if (*s == '\n') s++;
    else if (*s) return fail_at(p, s, "expecting a newline or the end"), NULL;
    return skip_space(s, true);
}

/* ---- checks after parsing ------------------------------------------------------------------ */

/* Rules with an empty alternative. Like llama.cpp's left-recursion check, emptiness is not
 * followed through references (a rule that is empty only through another rule does not count), so
 * the same grammars are accepted; cycles this misses are cut by the matcher's seen-set and
 * stack-size cap instead. */
static void nullable_rules(const parser *p, bool *nul) {
    for (size_t r = 0; r < p->n_rules; r++) {
        const ebuf *b = &p->rules[r].body;
        bool at_start = true;
        for (size_t i = 0; i < b->n; i++) {
            if (gr_is_end_of_seq(&b->v[i])) {
                if (at_start) {
                    nul[r] = true;
                    break;
                }
                at_start = true;
            } else at_start = false;
        }
    }
}

/* Depth-first over leftmost references: 1 = on the current path, 2 = done. */
static bool left_recursive(const parser *p, uint32_t r, uint8_t *mark, const bool *nul, uint32_t *culprit, int depth) {
    if (depth > 10000) { /* a chain this long of leftmost references: refuse rather than recurse on */
        *culprit = UINT32_MAX;
        return true;
    }
    if (mark[r] == 1) {
        *culprit = r;
        return true;
    }
    if (mark[r] == 2) return false;
    mark[r] = 1;
    const ebuf *b = &p->rules[r].body;
    bool leftmost = true;
    for (size_t i = 0; i < b->n; i++) {
        const gr_elem *e = &b->v[i];
        if (gr_is_end_of_seq(e)) leftmost = true;
        else if (e->type == GR_REF) {
            if (leftmost && left_recursive(p, e->value, mark, nul, culprit, depth + 1)) return true;
            leftmost = leftmost && nul[e->value];
        } else if (e->type != GR_CHAR_ALT && e->type != GR_CHAR_RNG_UPPER) leftmost = false;
    }
    mark[r] = 2;
    return false;
}

static void parser_free(parser *p) {
    for (size_t i = 0; i < p->n_rules; i++) {
        mxl_free(p->rules[i].name);
        mxl_free(p->rules[i].body.v);
    }
    mxl_free(p->rules);
    mxl_free(p->slots);
    mxl_free((char *)p->src);
}

mxl_status mxl_grammar_parse(const char *text, size_t len, mxl_grammar **out, mxl_error *err) {
    *out = NULL;
    parser p = {.err = err};
    char *src = mxl_malloc(len + 1);
    if (!src) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    if (len) memcpy(src, text, len);
    src[len] = 0;
    if (strlen(src) != len) {
        mxl_free(src);
        return mxl_error_set(err, MXL_ERR_ARG, "grammar: the text contains a NUL byte");
    }
    p.src = src;
    p.len = len;
    const char *s = skip_space(src, true);
    while (s && *s) s = parse_rule(&p, s);
    mxl_status st = MXL_OK;
    if (!s) st = err ? err->status : MXL_ERR_ARG;
    if (!st && p.n_rules == 0) st = mxl_error_set(err, MXL_ERR_ARG, "grammar: the grammar is empty (no rules)");
    for (size_t i = 0; !st && i < p.n_rules; i++)
        if (!p.rules[i].defined) st = mxl_error_set(err, MXL_ERR_ARG, "grammar: undefined rule '%.200s'", p.rules[i].name);
    uint32_t root = UINT32_MAX;
    for (size_t i = 0; !st && i < p.n_rules; i++)
        if (!strcmp(p.rules[i].name, "root")) root = (uint32_t)i;
    if (!st && root == UINT32_MAX) st = mxl_error_set(err, MXL_ERR_ARG, "grammar: no 'root' rule");
    if (!st) {
        bool *nul = mxl_calloc(p.n_rules, sizeof *nul);
        uint8_t *mark = mxl_calloc(p.n_rules, 1);
        if (!nul || !mark) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        else {
            nullable_rules(&p, nul);
            uint32_t culprit = 0;
            for (size_t r = 0; !st && r < p.n_rules; r++)
                if (left_recursive(&p, (uint32_t)r, mark, nul, &culprit, 0))
                    st = culprit == UINT32_MAX
                             ? mxl_error_set(err, MXL_ERR_ARG, "grammar: rules reference each other more than 10000 deep")
                             : mxl_error_set(err, MXL_ERR_ARG, "grammar: left recursion in rule '%.200s' is not supported", p.rules[culprit].name);
        }
        mxl_free(nul);
        mxl_free(mark);
    }
    mxl_grammar *g = NULL;
    if (!st) {
        g = mxl_calloc(1, sizeof *g);
        size_t total = 0;
        for (size_t i = 0; i < p.n_rules; i++) total += p.rules[i].body.n;
        if (g) {
            g->el = mxl_malloc((total ? total : 1) * sizeof *g->el);
            g->rule_start = mxl_malloc(p.n_rules * sizeof *g->rule_start);
        }
        if (!g || !g->el || !g->rule_start) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        else {
            for (size_t i = 0; i < p.n_rules; i++) {
                g->rule_start[i] = (uint32_t)g->n_el;
                memcpy(g->el + g->n_el, p.rules[i].body.v, p.rules[i].body.n * sizeof *g->el);
                g->n_el += p.rules[i].body.n;
            }
            g->n_rules = p.n_rules;
            g->root = root;
        }
    }
    parser_free(&p);
    if (st) {
        mxl_grammar_destroy(g);
        return st;
    }
    *out = g;
    return MXL_OK;
}

void mxl_grammar_destroy(mxl_grammar *g) {
    if (!g) return;
    mxl_free(g->el);
    mxl_free(g->rule_start);
    mxl_free(g);
}

size_t mxl_grammar_n_rules(const mxl_grammar *g) { return g->n_rules; }
