/* tpl_parser.c - Jinja2 parser: tokens -> AST (tnode), following Jinja2's grammar and operator
 * precedence (condexpr < or < and < not < compare < +,- < ~ < *,/,//,% < ** < unary; filters and
 * `is` tests bind to the unary operand). Syntax errors give line:col and what was expected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tpl_internal.h"

#define MAX_PARSE_DEPTH 200

typedef struct parser {
    mxl_arena *a;
    const ttoken *t;
    size_t n, i;
    char *err;
    size_t err_cap;
    int depth;
    int loop_depth;
    bool failed;
} parser;

static const ttoken *cur(parser *p) { return &p->t[p->i < p->n ? p->i : p->n - 1]; }
static const ttoken *peek(parser *p, size_t k) {
    size_t j = p->i + k;
    return &p->t[j < p->n ? j : p->n - 1];
}

static void describe(const ttoken *t, char *buf, size_t cap) {
    switch (t->type) {
    case TK_EOF: snprintf(buf, cap, "end of template"); break;
    case TK_TEXT: snprintf(buf, cap, "template data"); break;
    case TK_VAR_BEGIN: snprintf(buf, cap, "begin of print statement"); break;
    case TK_VAR_END: snprintf(buf, cap, "end of print statement"); break;
    case TK_BLOCK_BEGIN: snprintf(buf, cap, "begin of statement block"); break;
    case TK_BLOCK_END: snprintf(buf, cap, "end of statement block"); break;
    case TK_NAME: snprintf(buf, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); break;
    case TK_STRING: snprintf(buf, cap, "string"); break;
    case TK_INT: snprintf(buf, cap, "integer"); break;
    case TK_FLOAT: snprintf(buf, cap, "float"); break;
    case TK_OP: snprintf(buf, cap, "'%s'", t->op); break;
    }
}

/* Records a syntax error at t. In fmt, "%W" stands for the description of t and "%s" for arg. */
static void *fail(parser *p, const ttoken *t, const char *fmt, const char *arg) {
    if (p->failed) return NULL;
    p->failed = true;
    char what[96], msg[256];
    describe(t, what, sizeof what);
    size_t o = 0;
    for (const char *f = fmt; *f && o + 1 < sizeof msg; f++) {
        const char *ins = NULL;
        if (f[0] == '%' && f[1] == 'W') ins = what;
        else if (f[0] == '%' && f[1] == 's') ins = arg ? arg : "";
        else if (f[0] == '%' && f[1] == '%') ins = "%";
        if (ins) {
            f++;
            for (; *ins && o + 1 < sizeof msg; ins++) msg[o++] = *ins;
        } else {
            msg[o++] = *f;
        }
    }
    msg[o] = 0;
    snprintf(p->err, p->err_cap, "%d:%d: %s", t->line, t->col, msg);
    return NULL;
}

static bool is_op(const ttoken *t, const char *op) { return t->type == TK_OP && strcmp(t->op, op) == 0; }
static bool is_name(const ttoken *t, const char *name) {
    return t->type == TK_NAME && strlen(name) == t->n && memcmp(t->s, name, t->n) == 0;
}

static bool expect_op(parser *p, const char *op) {
    if (!is_op(cur(p), op)) {
        char m[64];
        snprintf(m, sizeof m, "expected '%s', got %%W", op);
        fail(p, cur(p), m, NULL);
        return false;
    }
    p->i++;
    return true;
}

static bool expect_type(parser *p, ttok type, const char *what) {
    if (cur(p)->type != type) {
        char m[96];
        snprintf(m, sizeof m, "expected %s, got %%W", what);
        fail(p, cur(p), m, NULL);
        return false;
    }
    p->i++;
    return true;
}

static bool expect_block_end(parser *p) { return expect_type(p, TK_BLOCK_END, "'end of statement block' (%})"); }

static tnode *node(parser *p, tnode_kind k, const ttoken *at) {
    tnode *nd = mxl_arena_alloc(p->a, sizeof(tnode), 8);
    if (!nd) {
        fail(p, at, "out of memory", "");
        return NULL;
    }
    nd->kind = k;
    nd->line = at->line;
    return nd;
}

static bool list_push(parser *p, tnode_list *l, tnode *nd) {
    if (!nd) return false;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4;
        tnode **v = mxl_arena_alloc(p->a, nc * sizeof(tnode *), 8);
        if (!v) {
            fail(p, cur(p), "out of memory", "");
            return false;
        }
        if (l->n) memcpy(v, l->v, l->n * sizeof(tnode *));
        l->v = v;
        l->cap = nc;
    }
    l->v[l->n++] = nd;
    return true;
}

static char *tokdup(parser *p, const ttoken *t) {
    char *s = mxl_arena_strndup(p->a, t->s, t->n);
    if (!s) fail(p, t, "out of memory", "");
    return s;
}

static tnode *parse_expression(parser *p, bool with_condexpr);
static tnode *parse_unary(parser *p, bool with_filter);
static tnode *parse_tuple(parser *p, bool with_condexpr, bool explicit_parens);
static tnode *parse_primary(parser *p);

/* ( args ) for calls, filters and tests: positional then keyword args. */
static bool parse_call_args(parser *p, tnode *nd) {
    if (!expect_op(p, "(")) return false;
    size_t kwcap = 0;
    while (!is_op(cur(p), ")")) {
        if (nd->items.n || nd->kwvals.n) {
            if (!expect_op(p, ",")) return false;
            if (is_op(cur(p), ")")) break;
        }
        if (is_op(cur(p), "*") || is_op(cur(p), "**")) {
            fail(p, cur(p), "unsupported: *args / **kwargs in calls (%W)", NULL);
            return false;
        }
        if (cur(p)->type == TK_NAME && is_op(peek(p, 1), "=")) {
            char *kn = tokdup(p, cur(p));
            if (!kn) return false;
            p->i += 2;
            tnode *v = parse_expression(p, true);
            if (!v) return false;
            if (nd->kwvals.n == kwcap) {
                size_t nc = kwcap ? kwcap * 2 : 4;
                const char **names = mxl_arena_alloc(p->a, nc * sizeof(char *), 8);
                if (!names) return false;
                if (nd->kwvals.n) memcpy(names, nd->kwnames, nd->kwvals.n * sizeof(char *));
                nd->kwnames = names;
                kwcap = nc;
            }
            nd->kwnames[nd->kwvals.n] = kn;
            if (!list_push(p, &nd->kwvals, v)) return false;
        } else {
            if (nd->kwvals.n) {
                fail(p, cur(p), "positional argument after keyword argument (%W)", NULL);
                return false;
            }
            if (!list_push(p, &nd->items, parse_expression(p, true))) return false;
        }
    }
    p->i++;
    return true;
}

/* dotted name for filters/tests: a.b.c */
static char *parse_dotted(parser *p) {
    const ttoken *t = cur(p);
    if (t->type != TK_NAME) return fail(p, t, "expected a name, got %W", NULL);
    size_t b = (size_t)(t->s - p->t[0].s), len = t->n;
    (void)b;
    char buf[256];
    if (t->n >= sizeof buf) return fail(p, t, "name too long", "");
    memcpy(buf, t->s, t->n);
    len = t->n;
    p->i++;
    while (is_op(cur(p), ".") && peek(p, 1)->type == TK_NAME) {
        const ttoken *nt = peek(p, 1);
        if (len + 1 + nt->n >= sizeof buf) return fail(p, nt, "name too long", "");
        buf[len++] = '.';
        memcpy(buf + len, nt->s, nt->n);
        len += nt->n;
        p->i += 2;
    }
    char *s = mxl_arena_strndup(p->a, buf, len);
    if (!s) return fail(p, t, "out of memory", "");
    return s;
}

static tnode *parse_subscript(parser *p, tnode *obj) {
    const ttoken *at = cur(p);
    p->i++; /* [ */
    tnode *parts[3] = {NULL, NULL, NULL};
    int nparts = 0;
    bool is_slice = false;
    for (;;) {
        if (is_op(cur(p), ":")) {
            is_slice = true;
            if (nparts >= 2) return fail(p, cur(p), "unexpected ':' in subscript", "");
            nparts++;
            p->i++;
            continue;
        }
        if (is_op(cur(p), "]")) break;
        if (parts[nparts]) return fail(p, cur(p), "expected ']' or ':', got %W", NULL);
        parts[nparts] = is_slice ? parse_expression(p, true) : parse_tuple(p, true, true);
        if (!parts[nparts]) return NULL;
        if (!is_slice && !is_op(cur(p), ":")) break;
    }
    if (!expect_op(p, "]")) return NULL;
    tnode *nd;
    if (is_slice) {
        nd = node(p, N_SLICE, at);
        if (!nd) return NULL;
        nd->b = parts[0];
        nd->c = parts[1];
        nd->d = parts[2];
    } else {
        if (!parts[0]) return fail(p, at, "empty subscript", "");
        nd = node(p, N_GETITEM, at);
        if (!nd) return NULL;
        nd->b = parts[0];
    }
    nd->a = obj;
    return nd;
}

static tnode *parse_postfix(parser *p, tnode *nd) {
    while (nd) {
        const ttoken *t = cur(p);
        if (is_op(t, ".")) {
            const ttoken *nt = peek(p, 1);
            if (nt->type == TK_NAME) {
                tnode *g = node(p, N_GETATTR, t);
                if (!g) return NULL;
                g->a = nd;
                g->s = tokdup(p, nt);
                g->n = nt->n;
                if (!g->s) return NULL;
                p->i += 2;
                nd = g;
            } else if (nt->type == TK_INT) {
                tnode *g = node(p, N_GETITEM, t);
                tnode *k = node(p, N_CONST, nt);
                if (!g || !k) return NULL;
                k->val = tv_int(nt->i);
                g->a = nd;
                g->b = k;
                p->i += 2;
                nd = g;
            } else {
                return fail(p, nt, "expected name or number after '.', got %W", NULL);
            }
        } else if (is_op(t, "[")) {
            nd = parse_subscript(p, nd);
        } else if (is_op(t, "(")) {
            tnode *c = node(p, N_CALL, t);
            if (!c) return NULL;
            c->a = nd;
            if (!parse_call_args(p, c)) return NULL;
            nd = c;
        } else {
            break;
        }
    }
    return nd;
}

static tnode *parse_filter(parser *p, tnode *obj) {
    const ttoken *at = cur(p);
    tnode *f = node(p, N_FILTER, at);
    if (!f) return NULL;
    f->a = obj;
    f->s = parse_dotted(p);
    if (!f->s) return NULL;
    f->n = strlen(f->s);
    if (is_op(cur(p), "(") && !parse_call_args(p, f)) return NULL;
    return f;
}

static tnode *parse_filter_expr(parser *p, tnode *nd) {
    while (nd) {
        const ttoken *t = cur(p);
        if (is_op(t, "|")) {
            p->i++;
            nd = parse_filter(p, nd);
        } else if (is_name(t, "is")) {
            p->i++;
            tnode *tn = node(p, N_TEST, t);
            if (!tn) return NULL;
            tn->a = nd;
            if (is_name(cur(p), "not")) {
                tn->neg = true;
                p->i++;
            }
            tn->s = parse_dotted(p);
            if (!tn->s) return NULL;
            tn->n = strlen(tn->s);
            const ttoken *c = cur(p);
            if (is_op(c, "(")) {
                if (!parse_call_args(p, tn)) return NULL;
            } else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT ||
                        c->type == TK_FLOAT || is_op(c, "[") || is_op(c, "{")) &&
                       !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
                if (is_name(c, "is")) return fail(p, c, "You cannot chain multiple tests with is", "");
                tnode *arg = parse_postfix(p, parse_primary(p));
                if (!list_push(p, &tn->items, arg)) return NULL;
            }
            nd = tn;
        } else if (is_op(t, "(")) {
            tnode *c = node(p, N_CALL, t);
            if (!c) return NULL;
            c->a = nd;
            if (!parse_call_args(p, c)) return NULL;
            nd = c;
        } else {
            break;
        }
    }
    return nd;
}

static tnode *parse_primary(parser *p) {
    const ttoken *t = cur(p);
    if (++p->depth > MAX_PARSE_DEPTH) return fail(p, t, "expression nested too deeply", "");
    tnode *nd = NULL;
    switch (t->type) {
    case TK_NAME:
        if (is_name(t, "true") || is_name(t, "True") || is_name(t, "false") || is_name(t, "False")) {
            nd = node(p, N_CONST, t);
            if (nd) nd->val = tv_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (is_name(t, "none") || is_name(t, "None")) {
            nd = node(p, N_CONST, t);
            if (nd) nd->val = tv_none();
        } else {
            nd = node(p, N_NAME, t);
            if (nd) {
                nd->s = tokdup(p, t);
                nd->n = t->n;
                if (!nd->s) nd = NULL;
            }
        }
        p->i++;
        break;
    case TK_STRING: {
        /* adjacent string literals concatenate */
        size_t total = 0, j = p->i;
        while (p->t[j].type == TK_STRING) total += p->t[j++].n;
        char *buf = mxl_arena_alloc(p->a, total + 1, 1);
        nd = node(p, N_CONST, t);
        if (!buf || !nd) return fail(p, t, "out of memory", "");
        size_t o = 0;
        while (cur(p)->type == TK_STRING) {
            memcpy(buf + o, cur(p)->s, cur(p)->n);
            o += cur(p)->n;
            p->i++;
        }
        nd->val = tv_strn(buf, o);
        break;
    }
    case TK_INT:
        nd = node(p, N_CONST, t);
        if (nd) nd->val = tv_int(t->i);
        p->i++;
        break;
    case TK_FLOAT:
        nd = node(p, N_CONST, t);
        if (nd) nd->val = tv_float(t->f);
        p->i++;
        break;
    case TK_OP:
        if (is_op(t, "(")) {
            p->i++;
            nd = parse_tuple(p, true, true);
            if (nd && !expect_op(p, ")")) nd = NULL;
        } else if (is_op(t, "[")) {
            p->i++;
            nd = node(p, N_LIST, t);
            while (nd && !is_op(cur(p), "]")) {
                if (nd->items.n && (!expect_op(p, ",") || is_op(cur(p), "]"))) {
                    if (p->failed) nd = NULL;
                    break;
                }
                if (!list_push(p, &nd->items, parse_expression(p, true))) nd = NULL;
            }
            if (nd && !expect_op(p, "]")) nd = NULL;
        } else if (is_op(t, "{")) {
            p->i++;
            nd = node(p, N_DICT, t);
            while (nd && !is_op(cur(p), "}")) {
                if (nd->items.n && (!expect_op(p, ",") || is_op(cur(p), "}"))) {
                    if (p->failed) nd = NULL;
                    break;
                }
                if (!list_push(p, &nd->keys, parse_expression(p, true)) || !expect_op(p, ":") ||
                    !list_push(p, &nd->items, parse_expression(p, true)))
                    nd = NULL;
            }
            if (nd && !expect_op(p, "}")) nd = NULL;
        } else {
            fail(p, t, "unexpected %W", NULL);
        }
        break;
    default:
        fail(p, t, "expected an expression, got %W", NULL);
    }
    p->depth--;
    return nd;
}

static tnode *parse_unary(parser *p, bool with_filter) {
    const ttoken *t = cur(p);
    if (++p->depth > MAX_PARSE_DEPTH) return fail(p, t, "expression nested too deeply", "");
    tnode *nd;
    if (is_op(t, "-") || is_op(t, "+")) {
        p->i++;
        nd = node(p, N_UNARY, t);
        if (nd) {
            nd->op[0] = t->op[0];
            nd->a = parse_unary(p, false);
            if (!nd->a) nd = NULL;
        }
    } else {
        nd = parse_primary(p);
    }
    nd = parse_postfix(p, nd);
    if (with_filter) nd = parse_filter_expr(p, nd);
    p->depth--;
    return nd;
}

static tnode *binary(parser *p, const ttoken *t, tnode *a, tnode *b) {
    if (!a || !b) return NULL;
    tnode *nd = node(p, N_BINARY, t);
    if (!nd) return NULL;
    memcpy(nd->op, t->op, sizeof nd->op);
    nd->a = a;
    nd->b = b;
    return nd;
}

static tnode *parse_pow(parser *p) {
    tnode *l = parse_unary(p, true);
    while (l && is_op(cur(p), "**")) {
        const ttoken *t = cur(p);
        p->i++;
        l = binary(p, t, l, parse_unary(p, true));
    }
    return l;
}

static tnode *parse_math2(parser *p) {
    tnode *l = parse_pow(p);
    while (l && (is_op(cur(p), "*") || is_op(cur(p), "/") || is_op(cur(p), "//") || is_op(cur(p), "%"))) {
        const ttoken *t = cur(p);
        p->i++;
        l = binary(p, t, l, parse_pow(p));
    }
    return l;
}

static tnode *parse_concat(parser *p) {
    tnode *l = parse_math2(p);
    while (l && is_op(cur(p), "~")) {
        const ttoken *t = cur(p);
        p->i++;
        l = binary(p, t, l, parse_math2(p));
    }
    return l;
}

static tnode *parse_math1(parser *p) {
    tnode *l = parse_concat(p);
    while (l && (is_op(cur(p), "+") || is_op(cur(p), "-"))) {
        const ttoken *t = cur(p);
        p->i++;
        l = binary(p, t, l, parse_concat(p));
    }
    return l;
}

static tnode *parse_compare(parser *p) {
    const ttoken *at = cur(p);
    tnode *l = parse_math1(p);
    if (!l) return NULL;
    tnode *cmp = NULL;
    size_t opcap = 0;
    for (;;) {
        const ttoken *t = cur(p);
        char op[4] = {0};
        if (t->type == TK_OP && (!strcmp(t->op, "==") || !strcmp(t->op, "!=") || !strcmp(t->op, "<") ||
                                 !strcmp(t->op, ">") || !strcmp(t->op, "<=") || !strcmp(t->op, ">="))) {
            memcpy(op, t->op, sizeof op);
            p->i++;
        } else if (is_name(t, "in")) {
            memcpy(op, "in", 3);
            p->i++;
        } else if (is_name(t, "not") && is_name(peek(p, 1), "in")) {
            memcpy(op, "ni", 3);
            p->i += 2;
        } else {
            break;
        }
        if (!cmp) {
            cmp = node(p, N_COMPARE, at);
            if (!cmp) return NULL;
            cmp->a = l;
        }
        if (cmp->items.n == opcap) {
            size_t nc = opcap ? opcap * 2 : 2;
            char(*ops)[4] = mxl_arena_alloc(p->a, nc * 4, 4);
            if (!ops) return fail(p, t, "out of memory", "");
            if (cmp->items.n) memcpy(ops, cmp->cmp_ops, cmp->items.n * 4);
            cmp->cmp_ops = ops;
            opcap = nc;
        }
        memcpy(cmp->cmp_ops[cmp->items.n], op, 4);
        if (!list_push(p, &cmp->items, parse_math1(p))) return NULL;
    }
    return cmp ? cmp : l;
}

static tnode *parse_not(parser *p) {
    const ttoken *t = cur(p);
    if (is_name(t, "not")) {
        if (++p->depth > MAX_PARSE_DEPTH) return fail(p, t, "expression nested too deeply", "");
        p->i++;
        tnode *nd = node(p, N_NOT, t);
        if (nd) {
            nd->a = parse_not(p);
            if (!nd->a) nd = NULL;
        }
        p->depth--;
        return nd;
    }
    return parse_compare(p);
}

static tnode *parse_and(parser *p) {
    tnode *l = parse_not(p);
    while (l && is_name(cur(p), "and")) {
        const ttoken *t = cur(p);
        p->i++;
        tnode *r = parse_not(p);
        if (!r) return NULL;
        tnode *nd = node(p, N_AND, t);
        if (!nd) return NULL;
        nd->a = l;
        nd->b = r;
        l = nd;
    }
    return l;
}

static tnode *parse_or(parser *p) {
    tnode *l = parse_and(p);
    while (l && is_name(cur(p), "or")) {
        const ttoken *t = cur(p);
        p->i++;
        tnode *r = parse_and(p);
        if (!r) return NULL;
        tnode *nd = node(p, N_OR, t);
        if (!nd) return NULL;
        nd->a = l;
        nd->b = r;
        l = nd;
    }
    return l;
}

static tnode *parse_expression(parser *p, bool with_condexpr) {
    if (++p->depth > MAX_PARSE_DEPTH) return fail(p, cur(p), "expression nested too deeply", "");
    tnode *l = parse_or(p);
    while (with_condexpr && l && is_name(cur(p), "if")) {
        const ttoken *t = cur(p);
        p->i++;
        tnode *nd = node(p, N_CONDEXPR, t);
        if (!nd) return NULL;
        nd->b = l;
        nd->a = parse_or(p);
        if (!nd->a) return NULL;
        if (is_name(cur(p), "else")) {
            p->i++;
            nd->c = parse_expression(p, true);
            if (!nd->c) return NULL;
        }
        l = nd;
    }
    p->depth--;
    return l;
}

static bool is_tuple_end(parser *p, const char *extra) {
    const ttoken *t = cur(p);
    return t->type == TK_VAR_END || t->type == TK_BLOCK_END || t->type == TK_EOF || is_op(t, ")") ||
           is_op(t, "]") || is_op(t, "=") || (extra && is_name(t, extra));
}

static tnode *parse_tuple_ex(parser *p, bool with_condexpr, bool explicit_parens, const char *extra) {
    const ttoken *at = cur(p);
    tnode *tup = NULL, *first = NULL;
    bool comma = false;
    for (;;) {
        if (first || tup) {
            if (!is_op(cur(p), ",")) break;
            p->i++;
            comma = true;
        }
        if (is_tuple_end(p, extra)) break;
        tnode *e = parse_expression(p, with_condexpr);
        if (!e) return NULL;
        if (!first && !tup) {
            first = e;
        } else {
            if (!tup) {
                tup = node(p, N_TUPLE, at);
                if (!tup || !list_push(p, &tup->items, first)) return NULL;
            }
            if (!list_push(p, &tup->items, e)) return NULL;
        }
    }
    if (!first && !tup) {
        if (!explicit_parens) return fail(p, cur(p), "expected an expression, got %W", NULL);
        return node(p, N_TUPLE, at); /* () */
    }
    if (comma && !tup) {
        tup = node(p, N_TUPLE, at);
        if (!tup || !list_push(p, &tup->items, first)) return NULL;
    }
    return tup ? tup : first;
}

static tnode *parse_tuple(parser *p, bool with_condexpr, bool explicit_parens) {
    return parse_tuple_ex(p, with_condexpr, explicit_parens, NULL);
}

/* for/set targets: name, (a, b), a, b  -> N_NAME or N_TUPLE of N_NAME */
static tnode *parse_target(parser *p, bool allow_ns) {
    const ttoken *at = cur(p);
    bool paren = false;
    if (is_op(at, "(")) {
        paren = true;
        p->i++;
    }
    if (allow_ns && !paren && cur(p)->type == TK_NAME && is_op(peek(p, 1), ".") &&
        peek(p, 2)->type == TK_NAME) {
        tnode *g = node(p, N_GETATTR, at);
        tnode *nm = node(p, N_NAME, at);
        if (!g || !nm) return NULL;
        nm->s = tokdup(p, cur(p));
        nm->n = cur(p)->n;
        g->s = tokdup(p, peek(p, 2));
        g->n = peek(p, 2)->n;
        if (!nm->s || !g->s) return NULL;
        g->a = nm;
        p->i += 3;
        return g;
    }
    tnode *tup = node(p, N_TUPLE, at);
    if (!tup) return NULL;
    bool comma = false;
    for (;;) {
        const ttoken *t = cur(p);
        if (t->type != TK_NAME || is_name(t, "in"))
            return fail(p, t, "expected a variable name, got %W", NULL);
        tnode *nm = node(p, N_NAME, t);
        if (!nm) return NULL;
        nm->s = tokdup(p, t);
        nm->n = t->n;
        if (!nm->s || !list_push(p, &tup->items, nm)) return NULL;
        p->i++;
        if (!is_op(cur(p), ",")) break;
        comma = true;
        p->i++;
        if (paren && is_op(cur(p), ")")) break;
    }
    if (paren && !expect_op(p, ")")) return NULL;
    if (tup->items.n == 1 && !comma) return tup->items.v[0];
    return tup;
}

static bool subparse(parser *p, tnode_list *out, const char *const *ends, const char **hit);

static bool parse_body_until(parser *p, tnode_list *out, const char *const *ends, const char **hit) {
    return subparse(p, out, ends, hit);
}

static tnode *parse_if(parser *p, const ttoken *at) {
    tnode *nd = node(p, N_IF, at);
    if (!nd) return NULL;
    nd->a = parse_tuple(p, false, false);
    if (!nd->a || !expect_block_end(p)) return NULL;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    const char *hit = NULL;
    if (!parse_body_until(p, &nd->body, ends, &hit)) return NULL;
    if (!strcmp(hit, "elif")) {
        const ttoken *et = cur(p);
        p->i++;
        tnode *e = parse_if(p, et);
        if (!e || !list_push(p, &nd->else_body, e)) return NULL;
        return nd; /* nested if consumed endif */
    }
    if (!strcmp(hit, "else")) {
        p->i++;
        if (!expect_block_end(p)) return NULL;
        static const char *const ends2[] = {"endif", NULL};
        if (!parse_body_until(p, &nd->else_body, ends2, &hit)) return NULL;
    }
    p->i++; /* endif */
    if (!expect_block_end(p)) return NULL;
    return nd;
}

static tnode *parse_for(parser *p, const ttoken *at) {
    tnode *nd = node(p, N_FOR, at);
    if (!nd) return NULL;
    nd->target = parse_target(p, false);
    if (!nd->target) return NULL;
    if (!is_name(cur(p), "in")) return fail(p, cur(p), "expected 'in', got %W", NULL);
    p->i++;
    nd->a = parse_tuple_ex(p, false, false, "if");
    if (!nd->a) return NULL;
    if (is_name(cur(p), "recursive")) return fail(p, cur(p), "unsupported: recursive for loops", "");
    if (is_name(cur(p), "if")) {
        p->i++;
        nd->b = parse_expression(p, true);
        if (!nd->b) return NULL;
    }
    if (!expect_block_end(p)) return NULL;
    static const char *const ends[] = {"endfor", "else", NULL};
    const char *hit = NULL;
    p->loop_depth++;
    bool ok = parse_body_until(p, &nd->body, ends, &hit);
    p->loop_depth--;
    if (!ok) return NULL;
    if (!strcmp(hit, "else")) {
        p->i++;
        if (!expect_block_end(p)) return NULL;
        static const char *const ends2[] = {"endfor", NULL};
        int saved = p->loop_depth;
        p->loop_depth = 0; /* the else body is outside the loop */
        ok = parse_body_until(p, &nd->else_body, ends2, &hit);
        p->loop_depth = saved;
        if (!ok) return NULL;
    }
    p->i++;
    if (!expect_block_end(p)) return NULL;
    return nd;
}

/* filter chain for `{% filter a|b %}` and `{% set x | f %}`: returns N_FILTER chain with a NULL
 * innermost operand. */
static tnode *parse_filter_chain(parser *p) {
    tnode *chain = NULL;
    do {
        tnode *f = parse_filter(p, chain);
        if (!f) return NULL;
        chain = f;
        if (!is_op(cur(p), "|")) break;
        p->i++;
    } while (1);
    return chain;
}

static tnode *parse_set(parser *p, const ttoken *at) {
    tnode *nd = node(p, N_SET, at);
    if (!nd) return NULL;
    nd->target = parse_target(p, true);
    if (!nd->target) return NULL;
    if (is_op(cur(p), "=")) {
        p->i++;
        nd->a = parse_tuple(p, true, false);
        if (!nd->a || !expect_block_end(p)) return NULL;
        return nd;
    }
    if (is_op(cur(p), "|")) {
        p->i++;
        nd->c = parse_filter_chain(p);
        if (!nd->c) return NULL;
    }
    if (!expect_block_end(p)) return NULL;
    static const char *const ends[] = {"endset", NULL};
    const char *hit;
    if (!parse_body_until(p, &nd->body, ends, &hit)) return NULL;
    p->i++;
    if (!expect_block_end(p)) return NULL;
    return nd;
}

/* ( a, b=default, ... ) parameter list into nd->params / nd->keys (defaults, NULL if none) */
static bool parse_params(parser *p, tnode *nd) {
    if (!expect_op(p, "(")) return false;
    size_t cap = 0;
    while (!is_op(cur(p), ")")) {
        if (nd->n_params && !expect_op(p, ",")) return false;
        if (is_op(cur(p), ")")) break;
        const ttoken *t = cur(p);
        if (t->type != TK_NAME) {
            fail(p, t, "expected a parameter name, got %W", NULL);
            return false;
        }
        if (nd->n_params == cap) {
            size_t nc = cap ? cap * 2 : 4;
            const char **v = mxl_arena_alloc(p->a, nc * sizeof(char *), 8);
            if (!v) return false;
            if (nd->n_params) memcpy(v, nd->params, nd->n_params * sizeof(char *));
            nd->params = v;
            cap = nc;
        }
        nd->params[nd->n_params] = tokdup(p, t);
        if (!nd->params[nd->n_params]) return false;
        nd->n_params++;
        p->i++;
        tnode *def = NULL;
        if (is_op(cur(p), "=")) {
            p->i++;
            def = parse_expression(p, true);
            if (!def) return false;
        }
        /* keys holds defaults; push a placeholder for "no default" */
        if (!def) {
            def = node(p, N_CONST, t);
            if (!def) return false;
            def->val = tv_undef(NULL);
            def->neg = true; /* marks "no default" */
        }
        if (!list_push(p, &nd->keys, def)) return false;
    }
    p->i++;
    return true;
}

static tnode *parse_macro(parser *p, const ttoken *at) {
    tnode *nd = node(p, N_MACRO, at);
    if (!nd) return NULL;
    if (cur(p)->type != TK_NAME) return fail(p, cur(p), "expected a macro name, got %W", NULL);
    nd->s = tokdup(p, cur(p));
    nd->n = cur(p)->n;
    if (!nd->s) return NULL;
    p->i++;
    if (!parse_params(p, nd) || !expect_block_end(p)) return NULL;
    static const char *const ends[] = {"endmacro", NULL};
    const char *hit;
    int saved = p->loop_depth;
    p->loop_depth = 0;
    bool ok = parse_body_until(p, &nd->body, ends, &hit);
    p->loop_depth = saved;
    if (!ok) return NULL;
    p->i++;
    if (!expect_block_end(p)) return NULL;
    return nd;
}

static tnode *parse_callblock(parser *p, const ttoken *at) {
    tnode *nd = node(p, N_CALLBLOCK, at);
    if (!nd) return NULL;
    if (is_op(cur(p), "(") && !parse_params(p, nd)) return NULL;
    nd->a = parse_expression(p, true);
    if (!nd->a) return NULL;
    if (nd->a->kind != N_CALL) return fail(p, at, "expected a call expression in {%% call %%}", "");
    if (!expect_block_end(p)) return NULL;
    static const char *const ends[] = {"endcall", NULL};
    const char *hit;
    int saved = p->loop_depth;
    p->loop_depth = 0;
    bool ok = parse_body_until(p, &nd->body, ends, &hit);
    p->loop_depth = saved;
    if (!ok) return NULL;
    p->i++;
    if (!expect_block_end(p)) return NULL;
    return nd;
}

static tnode *parse_statement(parser *p) {
    const ttoken *t = cur(p);
    if (t->type != TK_NAME) return fail(p, t, "expected a statement name, got %W", NULL);
    p->i++;
    if (is_name(t, "if")) return parse_if(p, t);
    if (is_name(t, "for")) return parse_for(p, t);
    if (is_name(t, "set")) return parse_set(p, t);
    if (is_name(t, "macro")) return parse_macro(p, t);
    if (is_name(t, "call")) return parse_callblock(p, t);
    if (is_name(t, "filter")) {
        tnode *nd = node(p, N_FILTERBLOCK, t);
        if (!nd) return NULL;
        nd->c = parse_filter_chain(p);
        if (!nd->c || !expect_block_end(p)) return NULL;
        static const char *const ends[] = {"endfilter", NULL};
        const char *hit;
        if (!parse_body_until(p, &nd->body, ends, &hit)) return NULL;
        p->i++;
        if (!expect_block_end(p)) return NULL;
        return nd;
    }
    if (is_name(t, "with")) {
        /* {% with a = 1, b = x %}...{% endwith %}: a scope with its own assignments */
        tnode *nd = node(p, N_WITH, t);
        if (!nd) return NULL;
        while (cur(p)->type != TK_BLOCK_END) {
            if (nd->items.n && !expect_op(p, ",")) return NULL;
            tnode *as = node(p, N_SET, cur(p));
            if (!as) return NULL;
            as->target = parse_target(p, false);
            if (!as->target || !expect_op(p, "=")) return NULL;
            as->a = parse_expression(p, true);
            if (!as->a || !list_push(p, &nd->items, as)) return NULL;
        }
        p->i++;
        static const char *const ends[] = {"endwith", NULL};
        const char *hit;
        if (!parse_body_until(p, &nd->body, ends, &hit)) return NULL;
        p->i++;
        if (!expect_block_end(p)) return NULL;
        return nd;
    }
    if (is_name(t, "generation")) {
        tnode *nd = node(p, N_GENERATION, t);
        if (!nd || !expect_block_end(p)) return NULL;
        static const char *const ends[] = {"endgeneration", NULL};
        const char *hit;
        if (!parse_body_until(p, &nd->body, ends, &hit)) return NULL;
        p->i++;
        if (!expect_block_end(p)) return NULL;
        return nd;
    }
    if (is_name(t, "break") || is_name(t, "continue")) {
        if (p->loop_depth == 0)
            return fail(p, t, "%s outside of a loop", is_name(t, "break") ? "break" : "continue");
        tnode *nd = node(p, is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
        if (!nd || !expect_block_end(p)) return NULL;
        return nd;
    }
    char nm[64];
    snprintf(nm, sizeof nm, "%.*s", (int)(t->n > 40 ? 40 : t->n), t->s);
    return fail(p, t, "Encountered unknown tag '%s'", nm);
}

/* Parses template data and tags until a `{% <end> %}` tag whose name is in ends (the cursor is
 * left on that name) or the end of the template (allowed only when ends is NULL). */
static bool subparse(parser *p, tnode_list *out, const char *const *ends, const char **hit) {
    if (++p->depth > MAX_PARSE_DEPTH) {
        fail(p, cur(p), "blocks nested too deeply", "");
        return false;
    }
    for (;;) {
        const ttoken *t = cur(p);
        if (t->type == TK_EOF) {
            if (ends) {
                char m[160];
                size_t o = 0;
                o += (size_t)snprintf(m + o, sizeof m - o, "unexpected end of template, expected ");
                for (int k = 0; ends[k] && o < sizeof m; k++)
                    o += (size_t)snprintf(m + o, sizeof m - o, "%s'%s'", k ? " or " : "", ends[k]);
                fail(p, t, "%s", m);
                return false;
            }
            break;
        }
        if (t->type == TK_TEXT) {
            tnode *nd = node(p, N_TEXT, t);
            if (!nd) return false;
            nd->s = t->s;
            nd->n = t->n;
            if (!list_push(p, out, nd)) return false;
            p->i++;
        } else if (t->type == TK_VAR_BEGIN) {
            p->i++;
            tnode *nd = node(p, N_OUTPUT, t);
            if (!nd) return false;
            nd->a = parse_tuple(p, true, false);
            if (!nd->a) return false;
            if (!expect_type(p, TK_VAR_END, "'end of print statement' (}})")) return false;
            if (!list_push(p, out, nd)) return false;
        } else if (t->type == TK_BLOCK_BEGIN) {
            p->i++;
            const ttoken *nt = cur(p);
            if (ends && nt->type == TK_NAME) {
                for (int k = 0; ends[k]; k++) {
                    if (is_name(nt, ends[k])) {
                        *hit = ends[k];
                        p->depth--;
                        return true;
                    }
                }
            }
            if (nt->type == TK_NAME && nt->n >= 3 &&
                (memcmp(nt->s, "end", 3) == 0 || is_name(nt, "elif") || is_name(nt, "else"))) {
                char nm[64];
                snprintf(nm, sizeof nm, "%.*s", (int)(nt->n > 40 ? 40 : nt->n), nt->s);
                fail(p, nt, "unexpected '%s' tag", nm);
                return false;
            }
            tnode *st = parse_statement(p);
            if (!st || !list_push(p, out, st)) return false;
        } else {
            fail(p, t, "unexpected %W", NULL);
            return false;
        }
        if (p->failed) return false;
    }
    p->depth--;
    return true;
}

bool mxl_tpl_tparse(mxl_arena *a, const ttoken *toks, size_t n, tnode **root, char *err, size_t err_cap) {
    parser p = {.a = a, .t = toks, .n = n, .err = err, .err_cap = err_cap};
    tnode *r = mxl_arena_alloc(a, sizeof(tnode), 8);
    if (!r) {
        snprintf(err, err_cap, "out of memory");
        return false;
    }
    r->kind = N_TEMPLATE;
    r->line = 1;
    if (!subparse(&p, &r->body, NULL, NULL) || p.failed) {
        if (!p.failed) snprintf(err, err_cap, "syntax error");
        return false;
    }
    *root = r;
    return true;
}
