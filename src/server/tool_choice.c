/* tool_choice.c - tool_choice of the three APIs and the grammars that force a call (tool_choice.h).
 *
 * A grammar is assembled from the format's fixed markers and, for the arguments, the GBNF of each
 * tool's parameter schema (json_schema.h). Each converted schema has its own rules (root, space,
 * string, ...), so every rule name of tool k's grammar gets the prefix "tk-" before the pieces are
 * joined into one grammar; the result is parsed once here, so a request never reaches the
 * sampler with a grammar that does not build. */
#include "server/tool_choice.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"

/* --- tool_choice --------------------------------------------------------------------------------- */

bool mxl_srv_tool_choice_openai(const json_t *tc, mxl_tool_choice *out, char *msg, size_t ml) {
    memset(out, 0, sizeof *out);
    if (!tc || json_is_null(tc)) return true;
    const char *s = json_string_value(tc);
    if (s && !strcmp(s, "auto")) return true;
    if (s && !strcmp(s, "none")) return out->none = true;
    if (s && !strcmp(s, "required")) return out->forced = true;
    const char *type = json_string_value(json_object_get(tc, "type"));
    const json_t *name = json_object_get(json_object_get(tc, "function"), "name");
    if (!name) name = json_object_get(tc, "name"); /* (Responses' shape) */
    if (!s && type && !strcmp(type, "function") && json_is_string(name)) {
        out->forced = true;
        out->only = json_string_value(name);
        return true;
    }
    snprintf(msg, ml, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    return false;
}

bool mxl_srv_tool_choice_anthropic(const json_t *tc, mxl_tool_choice *out, char *msg, size_t ml) {
    memset(out, 0, sizeof *out);
    if (!tc || json_is_null(tc)) return true;
    const char *type = json_string_value(json_object_get(tc, "type"));
    const json_t *name = json_object_get(tc, "name");
    if (type && !strcmp(type, "auto")) return true;
    if (type && !strcmp(type, "none")) return out->none = true;
    if (type && !strcmp(type, "any")) return out->forced = true;
    if (type && !strcmp(type, "tool") && json_is_string(name)) {
        out->forced = true;
        out->only = json_string_value(name);
        return true;
    }
    snprintf(msg, ml, "'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"none\"} or {\"type\": \"tool\", \"name\": ...}");
    return false;
}

/* --- grammar pieces ------------------------------------------------------------------------------ */

static void putf(mxl_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(mxl_strbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) mxl_strbuf_append(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* text as a GBNF string literal */
static void lit(mxl_strbuf *b, const char *text) {
    mxl_strbuf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '"' || *p == '\\') mxl_strbuf_putc(b, '\\'), mxl_strbuf_putc(b, (char)*p);
        else if (*p < 0x20 || *p == 0x7f) putf(b, "\\x%02X", *p);
        else mxl_strbuf_putc(b, (char)*p);
    }
    mxl_strbuf_putc(b, '"');
}

static bool name_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_'; }

/* The converter's GBNF for `schema` with every rule name prefixed "PREFIX-": its root becomes
 * PREFIX-root. Literals, character classes and repetition bounds are copied as they are. */
static bool schema_rules(mxl_strbuf *out, const json_t *schema, const char *prefix, char *msg, size_t ml) {
    char *g = NULL;
    mxl_error err = {0};
    json_t *any = NULL;
    if (!schema || json_is_null(schema)) schema = any = json_pack("{s:s}", "type", "object");
    mxl_status st = mxl_json_schema_to_grammar(schema, &g, &err);
    json_decref(any);
    if (st) {
        snprintf(msg, ml, "tool parameters: %.400s", err.msg);
        return false;
    }
    for (const char *p = g; *p;) {
        char c = *p;
        if (c == '"' || c == '[') { /* a literal or a class, escapes included */
            char close = c == '"' ? '"' : ']';
            mxl_strbuf_putc(out, *p++);
            while (*p && *p != close) {
                if (*p == '\\' && p[1]) mxl_strbuf_putc(out, *p++);
                mxl_strbuf_putc(out, *p++);
            }
            if (*p) mxl_strbuf_putc(out, *p++);
        } else if (c == '{') { /* {m,n} */
            while (*p && *p != '}') mxl_strbuf_putc(out, *p++);
            if (*p) mxl_strbuf_putc(out, *p++);
        } else if (c == '#') { /* a comment, to the end of the line */
            while (*p && *p != '\n') mxl_strbuf_putc(out, *p++);
        } else if (name_char(c)) {
            const char *e = p;
            while (name_char(*e)) e++;
            putf(out, "%s-", prefix);
            mxl_strbuf_append(out, p, (size_t)(e - p));
            p = e;
        } else {
            mxl_strbuf_putc(out, *p++);
        }
    }
    mxl_strbuf_putc(out, '\n');
    mxl_free(g);
    return true;
}

static const char *fn_name(const json_t *tool) { return json_string_value(json_object_get(json_object_get(tool, "function"), "name")); }
static const json_t *fn_params(const json_t *tool) { return json_object_get(json_object_get(tool, "function"), "parameters"); }

/* a parameter the template's XML format writes as plain text (no schema type, or string) */
static bool text_param(const json_t *schema) {
    const json_t *t = json_object_get(schema, "type");
    return !t || (json_is_string(t) && !strcmp(json_string_value(t), "string"));
}

/* A string parameter's raw text in the XML format: one of its enum's strings, else text without
 * '<' within its length bounds, else any text that does not close the parameter. */
static void xml_string(mxl_strbuf *b, const json_t *schema) {
    const json_t *en = json_object_get(schema, "enum");
    size_t i;
    const json_t *e;
    bool all_strings = json_is_array(en) && json_array_size(en) > 0;
    json_array_foreach(en, i, e) all_strings &= json_is_string(e) && !strstr(json_string_value(e), "</");
    if (all_strings) {
        mxl_strbuf_puts(b, "(");
        json_array_foreach(en, i, e) {
            if (i) mxl_strbuf_puts(b, " | ");
            lit(b, json_string_value(e));
        }
        mxl_strbuf_puts(b, ")");
        return;
    }
    const json_t *mn = json_object_get(schema, "minLength"), *mx = json_object_get(schema, "maxLength");
    json_int_t lo = json_is_integer(mn) && json_integer_value(mn) > 0 ? json_integer_value(mn) : 0;
    json_int_t hi = json_is_integer(mx) && json_integer_value(mx) >= lo ? json_integer_value(mx) : -1;
    if (lo > 2000 || hi > 2000) lo = 0, hi = -1; /* (the grammar's repetition limit: unbounded text) */
    if (lo == 0 && hi < 0) mxl_strbuf_puts(b, "xml-text");
    else if (hi < 0) putf(b, "[^<]{%lld,}", (long long)lo);
    else putf(b, "[^<]{%lld,%lld}", (long long)lo, (long long)hi);
}

/* Qwen3 XML: tool k's "NAME>\n" and its parameters, the required ones in order, the others
 * optional: rule tk-fn */
static bool xml_function(mxl_strbuf *b, const json_t *tool, size_t k, char *msg, size_t ml) {
    const json_t *props = json_object_get(fn_params(tool), "properties");
    const json_t *req = json_object_get(fn_params(tool), "required");
    mxl_strbuf body = {0};
    lit(&body, fn_name(tool));
    mxl_strbuf_puts(&body, " \">\\n\"");
    const char *pn;
    const json_t *ps;
    size_t j = 0;
    bool ok = true;
    json_object_foreach((json_t *)props, pn, ps) {
        bool required = false;
        size_t i;
        const json_t *r;
        json_array_foreach(req, i, r) required |= json_is_string(r) && !strcmp(json_string_value(r), pn);
        char pre[64];
        snprintf(pre, sizeof pre, "t%zu-p%zu", k, j);
        mxl_strbuf_puts(&body, " (");
        mxl_strbuf_puts(&body, "\"<parameter=\" ");
        lit(&body, pn);
        if (text_param(ps)) {
            mxl_strbuf_puts(&body, " \">\\n\" ");
            xml_string(&body, ps);
            mxl_strbuf_puts(&body, " \"\\n</parameter>\\n\")");
        } else {
            putf(&body, " \">\\n\" %s-root \"\\n</parameter>\\n\")", pre);
            if (!(ok = schema_rules(b, ps, pre, msg, ml))) break;
        }
        if (!required) mxl_strbuf_putc(&body, '?');
        j++;
    }
    if (ok) {
        putf(b, "t%zu-fn ::= ", k);
        mxl_strbuf_append(b, body.p ? body.p : "", body.n);
        mxl_strbuf_putc(b, '\n');
    }
    mxl_strbuf_free(&body);
    return ok;
}

/* One JSON schema for "a call of one of the tools": {"name": const, KEY: parameters} */
static json_t *call_schema(const json_t *tools, const char *only, const char *key) {
    json_t *any = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        if (!fn_name(t) || (only && strcmp(fn_name(t), only))) continue;
        const json_t *p = fn_params(t);
        json_t *params = p && !json_is_null(p) ? json_incref((json_t *)p) : json_pack("{s:s}", "type", "object");
        json_t *props = json_pack("{s:{s:s}, s:o}", "name", "const", fn_name(t), key, params);
        json_array_append_new(any, json_pack("{s:s, s:o, s:[s, s]}", "type", "object", "properties", props, "required", "name", key));
    }
    json_t *schema = json_array_size(any) == 1 ? json_incref(json_array_get(any, 0)) : json_pack("{s:O}", "anyOf", any);
    json_decref(any);
    return schema;
}

char *mxl_srv_forced_call_grammar(const mxl_chat_syntax *syn, const char *tpl, const json_t *tools, const char *only, char *msg,
                                  size_t ml) {
    msg[0] = 0;
    size_t n_tools = json_array_size(tools), n_pick = 0;
    if (!n_tools) {
        snprintf(msg, ml, "'tool_choice' asks for a tool call but 'tools' has no function");
        return NULL;
    }
    for (size_t i = 0; i < n_tools; i++)
        if (fn_name(json_array_get(tools, i)) && (!only || !strcmp(fn_name(json_array_get(tools, i)), only))) n_pick++;
    if (!n_pick) {
        snprintf(msg, ml, "tool_choice names the function '%.200s', which is not in 'tools'", only ? only : "");
        return NULL;
    }
    const mxl_chat_format fmt = syn->fmt;
    if (fmt != MXL_CHAT_FMT_HERMES && fmt != MXL_CHAT_FMT_LLAMA3_JSON && fmt != MXL_CHAT_FMT_MISTRAL && fmt != MXL_CHAT_FMT_QWEN3_XML &&
        fmt != MXL_CHAT_FMT_GPT_OSS)
        return NULL;
    mxl_strbuf b = {0};
    bool ok = true;
    /* root: thinking first where the template thinks, then the call */
    if (syn->think_tags && syn->think_close) {
        mxl_strbuf_puts(&b, "root ::= ");
        if (!syn->starts_in_reasoning) {
            mxl_strbuf_puts(&b, "(");
            lit(&b, syn->think_open);
            mxl_strbuf_puts(&b, " ");
        }
        mxl_strbuf_puts(&b, "think-text ");
        lit(&b, syn->think_close);
        mxl_strbuf_puts(&b, syn->starts_in_reasoning ? " [ \\t\\n]* call\n" : " [ \\t\\n]*)? call\n");
        mxl_strbuf_puts(&b, "think-text ::= ([^<[] | \"<\" [^/] | \"[\" [^/])*\n");
    } else
        mxl_strbuf_puts(&b, "root ::= call\n");
    const bool mistral_args = fmt == MXL_CHAT_FMT_MISTRAL && tpl && strstr(tpl, "[ARGS]");
    if (fmt == MXL_CHAT_FMT_HERMES || fmt == MXL_CHAT_FMT_LLAMA3_JSON || (fmt == MXL_CHAT_FMT_MISTRAL && !mistral_args)) {
        json_t *schema = call_schema(tools, only, fmt == MXL_CHAT_FMT_LLAMA3_JSON ? "parameters" : "arguments");
        ok = schema_rules(&b, schema, "c", msg, ml);
        json_decref(schema);
        if (fmt == MXL_CHAT_FMT_HERMES) {
            mxl_strbuf_puts(&b, "call ::= ");
            lit(&b, syn->tool_open ? syn->tool_open : "<tool_call>");
            mxl_strbuf_puts(&b, " \"\\n\" c-root \"\\n\" ");
            lit(&b, syn->tool_close ? syn->tool_close : "</tool_call>");
            mxl_strbuf_putc(&b, '\n');
        } else if (fmt == MXL_CHAT_FMT_MISTRAL)
            mxl_strbuf_puts(&b, "call ::= \"[TOOL_CALLS][\" c-root \"]\"\n");
        else
            mxl_strbuf_puts(&b, "call ::= c-root\n");
    } else {
        /* one alternative per tool: tk-fn */
        mxl_strbuf alts = {0};
        for (size_t k = 0; ok && k < n_tools; k++) {
            const json_t *t = json_array_get(tools, k);
            if (!fn_name(t) || (only && strcmp(fn_name(t), only))) continue;
            if (alts.n) mxl_strbuf_puts(&alts, " | ");
            putf(&alts, "t%zu-fn", k);
            if (fmt == MXL_CHAT_FMT_QWEN3_XML) {
                ok = xml_function(&b, t, k, msg, ml);
                continue;
            }
            char pre[32];
            snprintf(pre, sizeof pre, "t%zu", k);
            if (!(ok = schema_rules(&b, fn_params(t), pre, msg, ml))) break;
            putf(&b, "t%zu-fn ::= ", k);
            lit(&b, fn_name(t));
            if (fmt == MXL_CHAT_FMT_MISTRAL) putf(&b, " \"[ARGS]\" t%zu-root\n", k);
            else putf(&b, " \" <|constrain|>json<|message|>\" t%zu-root \"<|call|>\"\n", k);
        }
        if (fmt == MXL_CHAT_FMT_QWEN3_XML) {
            mxl_strbuf_puts(&b, "call ::= ");
            lit(&b, syn->tool_open ? syn->tool_open : "<tool_call>");
            putf(&b, " \"\\n<function=\" (%s) \"</function>\\n\" ", alts.p ? alts.p : "");
            lit(&b, syn->tool_close ? syn->tool_close : "</tool_call>");
            mxl_strbuf_puts(&b, "\nxml-text ::= ([^<] | \"<\" [^/])*\n");
        } else if (fmt == MXL_CHAT_FMT_MISTRAL)
            putf(&b, "call ::= \"[TOOL_CALLS]\" (%s)\n", alts.p ? alts.p : "");
        else /* GPT-OSS: an analysis message may come first */
            putf(&b, "call ::= (\"<|channel|>analysis<|message|>\" oss-text \"<|end|><|start|>assistant\")? "
                     "\"<|channel|>commentary to=functions.\" (%s)\noss-text ::= ([^<] | \"<\" [^|])*\n",
                 alts.p ? alts.p : "");
        mxl_strbuf_free(&alts);
    }
    if (ok && !b.p) snprintf(msg, ml, "out of memory"), ok = false;
    if (ok) { /* the pieces must make one grammar */
        mxl_grammar *g = NULL;
        mxl_error err = {0};
        if (mxl_grammar_parse(b.p, b.n, &g, &err) != MXL_OK) {
            snprintf(msg, ml, "cannot force a tool call with these tools: %.400s", err.msg);
            ok = false;
        }
        mxl_grammar_destroy(g);
    }
    if (!ok) {
        mxl_strbuf_free(&b);
        if (!msg[0]) snprintf(msg, ml, "out of memory");
        return NULL;
    }
    return b.p;
}
