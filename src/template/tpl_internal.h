/* tpl_internal.h - shared internals of the Jinja chat-template engine: values, tokens, AST nodes
 * and the render context. Everything a render allocates lives in one arena freed when the render
 * ends, so values need no reference counting; the parsed AST lives in the template's own arena.
 * Not a public header: only the src/template sources include it. */
#ifndef MXL_TEMPLATE_TPL_INTERNAL_H
#define MXL_TEMPLATE_TPL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/arena.h"
#include "core/utf8.h"
#include "template/template.h"

/* ---------------------------------------------------------------- values */

typedef enum tv_type {
    TV_UNDEF = 0, /* Jinja2's default Undefined; u.s/n hold the missing name (may be NULL) */
    TV_NONE,
    TV_BOOL,
    TV_INT,
    TV_FLOAT,
    TV_STR, /* u.s: UTF-8 bytes (not NUL-terminated), n: byte length */
    TV_LIST, /* also tuples (tlist.tuple) */
    TV_DICT, /* also namespaces (tdict.ns) */
    TV_FUNC, /* macro, builtin global, bound method, caller */
    TV_LOOP  /* the `loop` variable of a for loop */
} tv_type;

typedef struct tlist tlist;
typedef struct tdict tdict;
typedef struct tfunc tfunc;
typedef struct tloop tloop;

typedef struct tv {
    uint8_t t;
    uint8_t safe; /* TV_STR: a Markup string (from |safe / |escape): `+` escapes the other side */
    uint32_t n;
    union {
        bool b;
        int64_t i;
        double f;
        const char *s;
        tlist *l;
        tdict *d;
        tfunc *fn;
        tloop *loop;
    } u;
} tv;

struct tlist {
    size_t n, cap;
    tv *items;
    bool tuple;
};

struct tdict {
    size_t n, cap;
    tv *keys;
    tv *vals;
    bool ns; /* namespace(): attribute assignment allowed */
};

typedef struct tnode tnode;
typedef struct tframe tframe;

typedef enum tfunc_kind {
    TF_MACRO,
    TF_CALLER,
    TF_BUILTIN, /* global function by name */
    TF_METHOD,  /* bound method: self + name */
    TF_LOOP_CYCLE
} tfunc_kind;

struct tfunc {
    tfunc_kind kind;
    const char *name;
    const tnode *node; /* macro / call-block node */
    tframe *closure;   /* frame the macro / caller body runs under */
    tv self;           /* bound object for methods; caller: the macro's caller value */
};

struct tloop {
    int64_t index0, length;
    tlist *items;
    int depth;
};

/* ---------------------------------------------------------------- tokens */

typedef enum ttok {
    TK_EOF = 0,
    TK_TEXT,      /* raw template data between tags */
    TK_VAR_BEGIN, /* {{ */
    TK_VAR_END,   /* }} */
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING, /* decoded value in s/n */
    TK_INT,
    TK_FLOAT,
    TK_OP /* punctuation; op holds the operator text (1-2 chars + NUL) */
} ttok;

typedef struct ttoken {
    ttok type;
    int line, col;
    const char *s;
    size_t n;
    int64_t i;
    double f;
    char op[4];
} ttoken;

/* ---------------------------------------------------------------- AST */

typedef enum tnode_kind {
    /* statements */
    N_TEMPLATE, /* body */
    N_TEXT,     /* s/n */
    N_OUTPUT,   /* a = expression */
    N_IF,       /* a = cond, body, else_body (elif nests as an N_IF in else_body) */
    N_FOR,      /* target, a = iter, b = filter cond, body, else_body */
    N_SET,      /* target, a = value expression or NULL with body (block set), filters in c */
    N_MACRO,    /* s = name, params/defaults, body */
    N_CALLBLOCK, /* a = call expression, params (caller args), body */
    N_FILTERBLOCK, /* c = filter chain (N_FILTER with a == NULL at the innermost), body */
    N_BREAK,
    N_CONTINUE,
    N_GENERATION, /* body */
    N_WITH,       /* items: N_SET assignments evaluated in the outer scope, body */
    /* expressions */
    N_CONST,   /* val */
    N_NAME,    /* s */
    N_GETATTR, /* a . s */
    N_GETITEM, /* a [ b ] */
    N_SLICE,   /* a [ b : c : d ], missing parts NULL */
    N_CALL,    /* a ( args, kwnames/kwargs ) */
    N_FILTER,  /* a | s ( args ) */
    N_TEST,    /* a is s ( args ), neg */
    N_UNARY,   /* op, a */
    N_BINARY,  /* op, a, b */
    N_AND,
    N_OR,
    N_NOT,
    N_COMPARE, /* a, then ops[]/operands[] chain */
    N_CONDEXPR, /* b if a else c */
    N_LIST,    /* items */
    N_TUPLE,   /* items */
    N_DICT     /* keys/items */
} tnode_kind;

typedef struct tnode_list {
    tnode **v;
    size_t n, cap;
} tnode_list;

struct tnode {
    tnode_kind kind;
    int line;
    const char *s;
    size_t n;
    char op[4];
    bool neg;
    tv val;
    tnode *a, *b, *c, *d;
    tnode *target;
    tnode_list body, else_body;
    tnode_list items, keys;     /* list/tuple/dict items; call args; macro params' defaults */
    tnode_list kwvals;          /* call keyword values */
    const char **kwnames;       /* call keyword names [kwvals.n] */
    const char **params;        /* macro / caller parameter names [items.n] */
    size_t n_params;
    char (*cmp_ops)[4];         /* N_COMPARE: operators [items.n] */
};

/* ---------------------------------------------------------------- template object */

struct mxl_template {
    mxl_arena arena; /* AST, token texts */
    tnode *root;
    char *name;
    char *source; /* normalized source (\r\n -> \n) */
};

/* ---------------------------------------------------------------- render context */

struct tframe {
    tframe *parent;
    tdict vars;
};

/* The render's text buffer. Not core/strbuf.h's mxl_strbuf on purpose: it grows in the render's
 * arena (freed with the render, no frees on error paths) and every append is charged to the
 * output budget and the fuel (mxl_tpl_tbuf_put). */
typedef struct tbuf {
    char *p;
    size_t n, cap;
} tbuf;

typedef enum terr_kind {
    TE_NONE = 0,
    TE_TEMPLATE, /* raise_exception */
    TE_UNDEFINED,
    TE_TYPE,
    TE_VALUE,
    TE_SECURITY,
    TE_BUDGET,
    TE_SYNTAX,
    TE_NOMEM,
    TE_RUNTIME, /* TemplateRuntimeError: unknown filter/test at render time, bad assignment */
    TE_OTHER
} terr_kind;

typedef struct tctx {
    mxl_arena *arena;
    const mxl_template *tpl;
    tframe *globals; /* render variables (context) */
    tframe *root;    /* template-level assignments */
    tbuf *out;
    terr_kind ekind;
    int eline;
    char emsg[400];
    int line; /* line of the node being evaluated */
    uint64_t fuel;
    int depth;          /* evaluation nesting (expressions, blocks) */
    int calls, max_depth; /* nested macro / caller calls */
    size_t max_output;
    size_t max_memory;
    int64_t now_unix; /* pinned clock (seconds since epoch, UTC) or INT64_MIN for the real clock */
} tctx;

/* Records an error (first one wins) and returns -1 so callers can `return mxl_tpl_terr(...)`. */
int mxl_tpl_terr(tctx *c, terr_kind k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *mxl_tpl_terr_kind_name(terr_kind k);
void *mxl_tpl_talloc(tctx *c, size_t n); /* arena memory or NULL after recording TE_NOMEM/TE_BUDGET */
bool mxl_tpl_tfuel(tctx *c, uint64_t cost);

/* value constructors / helpers (tpl_value.c) */
static inline tv tv_undef(const char *name) {
    tv v = {0};
    v.t = TV_UNDEF;
    v.u.s = name;
    v.n = name ? (uint32_t)strlen(name) : 0;
    return v;
}
static inline tv tv_undef_n(const char *hint, size_t n) {
    tv v = {0};
    v.t = TV_UNDEF;
    v.u.s = hint;
    v.n = (uint32_t)n;
    return v;
}
static inline tv tv_none(void) { tv v = {0}; v.t = TV_NONE; return v; }
static inline tv tv_bool(bool b) { tv v = {0}; v.t = TV_BOOL; v.u.b = b; return v; }
static inline tv tv_int(int64_t i) { tv v = {0}; v.t = TV_INT; v.u.i = i; return v; }
static inline tv tv_float(double f) { tv v = {0}; v.t = TV_FLOAT; v.u.f = f; return v; }
static inline tv tv_strn(const char *s, size_t n) {
    tv v = {0};
    v.t = TV_STR;
    v.u.s = s;
    v.n = (uint32_t)n;
    return v;
}
tv mxl_tpl_tv_str_copy(tctx *c, const char *s, size_t n, bool *ok);
tv mxl_tpl_tv_cstr(const char *s); /* static string */
tlist *mxl_tpl_tlist_new(tctx *c, size_t cap);
bool mxl_tpl_tlist_push(tctx *c, tlist *l, tv v);
tdict *mxl_tpl_tdict_new(tctx *c, size_t cap);
bool mxl_tpl_tdict_set(tctx *c, tdict *d, tv key, tv val);
tv *mxl_tpl_tdict_get(const tdict *d, tv key);
tv *mxl_tpl_tdict_get_str(const tdict *d, const char *s, size_t n);
tv mxl_tpl_tv_list(tlist *l);
tv mxl_tpl_tv_dict(tdict *d);

bool mxl_tpl_tv_truthy(tv v);
bool mxl_tpl_tv_equal(tv a, tv b);
/* -2 on type mismatch (error recorded), else -1/0/1 */
int mxl_tpl_tv_compare(tctx *c, tv a, tv b);
const char *mxl_tpl_tv_type_name(tv v); /* Python type name: 'str', 'int', 'dict', 'NoneType'... */
bool mxl_tpl_tv_is_number(tv v); /* int/float/bool */
double mxl_tpl_tv_as_double(tv v);

/* Python str() / repr() appended to a buffer; false on error (recorded). */
bool mxl_tpl_tv_str_append(tctx *c, tbuf *b, tv v);
bool mxl_tpl_tv_repr_append(tctx *c, tbuf *b, tv v);
/* str(v) as a string value */
bool mxl_tpl_tv_to_str(tctx *c, tv v, tv *out);

bool mxl_tpl_tbuf_put(tctx *c, tbuf *b, const char *s, size_t n);
bool mxl_tpl_tbuf_putc(tctx *c, tbuf *b, char ch);
tv mxl_tpl_tbuf_value(tbuf *b); /* string value viewing the buffer (buffer must not grow afterwards) */

/* UTF-8 helpers */
size_t mxl_tpl_tutf8_len(const char *s, size_t n); /* code points */
/* byte offset of code point index i (clamped to n) */
size_t mxl_tpl_tutf8_offset(const char *s, size_t n, size_t i);
/* decode one code point at s[*pos], advancing; invalid bytes decode as themselves (latin-1) */
int32_t mxl_tpl_tutf8_next(const char *s, size_t n, size_t *pos);

/* Python float repr ("1.0", "1e+20", "inf") into buf (>= 32 bytes). */
void mxl_tpl_tfmt_float_repr(double f, char *buf, size_t cap);

/* tpl_json.c */
/* indent NULL: single line; else newline + indent repeated per level (json.dumps' indent) */
bool mxl_tpl_tjson_dump(tctx *c, tbuf *b, tv v, const char *indent, size_t indent_len, const char *item_sep,
                const char *key_sep, bool sort_keys, bool ensure_ascii);
struct json_t;
bool mxl_tpl_tjson_to_value(tctx *c, const struct json_t *j, tv *out, int depth);

/* tpl_lexer.c: tokens into an array (arena); false on syntax error (message in err). */
bool mxl_tpl_tlex(mxl_arena *a, const char *src, size_t n, ttoken **out, size_t *n_out, char *err,
          size_t err_cap);

/* tpl_parser.c */
bool mxl_tpl_tparse(mxl_arena *a, const ttoken *toks, size_t n, tnode **root, char *err, size_t err_cap);

/* tpl_render.c */
int mxl_tpl_trender_body(tctx *c, const tnode_list *body, tframe *f);
bool mxl_tpl_teval(tctx *c, const tnode *n, tframe *f, tv *out);
bool mxl_tpl_tcall_value(tctx *c, tv fn, tv *args, size_t nargs, const char **kwn, tv *kwv, size_t nkw,
                 tv *out);
bool mxl_tpl_tgetattr(tctx *c, tv obj, const char *name, size_t n, tv *out);
bool mxl_tpl_tgetitem(tctx *c, tv obj, tv key, tv *out);
/* Iterates a value into a list (dict -> keys, str -> chars, undefined -> empty). */
bool mxl_tpl_titer_list(tctx *c, tv v, tlist **out);

/* tpl_filters.c */
bool mxl_tpl_tfilter_apply(tctx *c, const char *name, tv v, tv *args, size_t nargs, const char **kwn,
                   tv *kwv, size_t nkw, tv *out);
bool mxl_tpl_tfilter_exists(const char *name);
/* HTML-escapes s (& < > " ') into a Markup string */
bool mxl_tpl_thtml_escape(tctx *c, tv s, tv *out);
/* tpl_tests.c */
bool mxl_tpl_ttest_apply(tctx *c, const char *name, tv v, tv *args, size_t nargs, bool *out);
bool mxl_tpl_ttest_exists(const char *name);
/* tpl_methods.c */
bool mxl_tpl_tmethod_call(tctx *c, tv self, const char *name, tv *args, size_t nargs, const char **kwn,
                  tv *kwv, size_t nkw, tv *out);
bool mxl_tpl_tmethod_exists(tv self, const char *name, size_t n, bool *unsafe);
/* tpl_format.c: printf-style `%` and str.format */
bool mxl_tpl_tfmt_percent(tctx *c, tv fmt, tv args, tv *out);
bool mxl_tpl_tfmt_format(tctx *c, tv fmt, tv *args, size_t nargs, const char **kwn, tv *kwv, size_t nkw,
                 tv *out);
/* tpl_globals.c */
bool mxl_tpl_tglobal_lookup(const char *name, size_t n, tv *out);
bool mxl_tpl_tglobal_call(tctx *c, const char *name, tv *args, size_t nargs, const char **kwn, tv *kwv,
                  size_t nkw, tv *out);

/* keyword arg helper: finds kw `name` or positional index pos; NULL if absent */
tv *mxl_tpl_targ(tv *args, size_t nargs, const char **kwn, tv *kwv, size_t nkw, size_t pos,
         const char *name);

#endif
