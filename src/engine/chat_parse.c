/* chat_parse.c - generated chat text -> content / reasoning_content / tool_calls (chat_parse.h).
 *
 * One byte-driven state machine serves both the streaming and the whole-response API: the whole
 * parse is one feed of the full text with final = true, so the two agree by construction and the
 * split invariant only depends on every decision being a function of the bytes seen, never of
 * where a piece ended. Text that could still turn into a marker is held in `in` until it is
 * known; tool-call text is collected in `raw` and parsed once its end is seen, falling back to
 * content (markers and all) when it does not parse.
 *
 * Text goes out through two sinks (content, reasoning) that repair UTF-8 (invalid bytes ->
 * U+FFFD, a sequence cut by a piece boundary is carried over) and trim whitespace: whitespace is
 * held until the next non-whitespace text of the same kind arrives, dropped when none does and
 * at the start. Formats follow llama.cpp's common/chat.cpp parsers and the real templates in
 * testdata/templates (Hermes/Qwen, Qwen3-Coder XML, Llama 3.x JSON, Mistral [TOOL_CALLS],
 * OpenAI harmony). */
#include "engine/chat_parse.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "io/json_read.h"
#include "io/json_write.h"

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static bool has(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

/* How p[0..n) relates to marker m: the whole marker is there, p is a proper prefix of it, or
 * neither. */
typedef enum { PFX_NO, PFX_PARTIAL, PFX_FULL } pfx;
static pfx prefix_of(const char *p, size_t n, const char *m) {
    size_t ml = strlen(m);
    if (n >= ml) return memcmp(p, m, ml) == 0 ? PFX_FULL : PFX_NO;
    return memcmp(p, m, n) == 0 ? PFX_PARTIAL : PFX_NO;
}

static bool starts(const char *p, size_t n, const char *m) { return prefix_of(p, n, m) == PFX_FULL; }

static size_t skip_ws(const char *t, size_t n, size_t i) {
    while (i < n && is_ws(t[i])) i++;
    return i;
}

/* ---------------------------------------------------------------- UTF-8 */

/* The UTF-8 sequence at p[0..n): > 0 its length (valid), 0 a valid but incomplete prefix,
 * -k invalid where the first k bytes are the maximal valid prefix (replaced by one U+FFFD, as the
 * Unicode standard recommends). Overlongs, surrogates and code points above U+10FFFF are invalid. */
static int utf8_check(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    int need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return -1;
    for (int k = 1; k < need; k++) {
        if ((size_t)k >= n) return 0;
        unsigned b = p[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return -k;
    }
    return need;
}

static const char FFFD[] = "\xEF\xBF\xBD";

/* ---------------------------------------------------------------- JSON text walking
 *
 * jansson gives values but not where they sit in the text; tool-call arguments are handed on as
 * the model wrote them (jansson would print 0.1 as 0.10000000000000001), so these helpers find
 * the byte span of a value. They only run on text jansson accepted, and stay in bounds anyway. */

/* End (one past) of the JSON value starting at t[i], or 0 when there is none. */
static size_t jw_value_end(const char *t, size_t n, size_t i) {
    if (i >= n) return 0;
    char c = t[i];
    if (c == '"') {
        for (size_t k = i + 1; k < n; k++) {
            if (t[k] == '\\') k++;
            else if (t[k] == '"') return k + 1;
        }
        return 0;
    }
    if (c == '{' || c == '[') {
        size_t depth = 0;
        for (size_t k = i; k < n; k++) {
            char d = t[k];
            if (d == '"') {
                size_t e = jw_value_end(t, n, k);
                if (!e) return 0;
                k = e - 1;
            } else if (d == '{' || d == '[') depth++;
            else if (d == '}' || d == ']') {
                if (--depth == 0) return k + 1;
            }
        }
        return 0;
    }
    size_t k = i;
    while (k < n && (t[k] == '-' || t[k] == '+' || t[k] == '.' || (t[k] >= '0' && t[k] <= '9') ||
                     (t[k] >= 'a' && t[k] <= 'z') || (t[k] >= 'A' && t[k] <= 'Z')))
        k++;
    return k > i ? k : 0;
}

/* Span [*vs, *ve) of the value of member `key` (raw key bytes, no escapes) of the object at t[i];
 * the last one when the key repeats, as jansson keeps the last. */
static bool jw_member(const char *t, size_t n, size_t i, const char *key, size_t *vs, size_t *ve) {
    size_t kl = strlen(key);
    bool found = false;
    if (i >= n || t[i] != '{') return false;
    i = skip_ws(t, n, i + 1);
    if (i < n && t[i] == '}') return false;
    while (i < n) {
        if (t[i] != '"') return false;
        size_t ke = jw_value_end(t, n, i);
        if (!ke) return false;
        bool match = ke - i - 2 == kl && memcmp(t + i + 1, key, kl) == 0;
        i = skip_ws(t, n, ke);
        if (i >= n || t[i] != ':') return false;
        i = skip_ws(t, n, i + 1);
        size_t e = jw_value_end(t, n, i);
        if (!e) return false;
        if (match) {
            *vs = i;
            *ve = e;
            found = true;
        }
        i = skip_ws(t, n, e);
        if (i < n && t[i] == ',') i = skip_ws(t, n, i + 1);
        else break;
    }
    return found;
}

/* Incremental end-of-value finder for text still arriving (Mistral [ARGS] / arrays): only an
 * object, array or string may start the value; brackets are counted outside strings. */
typedef struct jscan {
    int depth;
    bool started, in_str, esc;
} jscan;

#define JSCAN_MAX_DEPTH 1000

/* 1: the value ended with c; 0: go on; -1: c cannot be part of the value. */
static int jscan_byte(jscan *j, char c) {
    if (!j->started) {
        if (is_ws(c)) return 0;
        if (c == '{' || c == '[') {
            j->started = true;
            j->depth = 1;
            return 0;
        }
        if (c == '"') {
            j->started = j->in_str = true;
            j->depth = 0;
            return 0;
        }
        return -1;
    }
    if (j->in_str) {
        if (j->esc) j->esc = false;
        else if (c == '\\') j->esc = true;
        else if (c == '"') {
            j->in_str = false;
            if (j->depth == 0) return 1;
        }
        return 0;
    }
    if (c == '"') j->in_str = true;
    else if (c == '{' || c == '[') {
        if (++j->depth > JSCAN_MAX_DEPTH) return -1;
    } else if (c == '}' || c == ']') {
        if (--j->depth == 0) return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- stream state */

enum { K_CONTENT = 0, K_REASON = 1 };

typedef enum mode {
    M_CONTENT,
    M_REASON,
    M_TOOL_TAG,     /* HERMES / QWEN3_XML: inside tool_open ... tool_close */
    M_TOOL_MISTRAL, /* after [TOOL_CALLS] */
    M_TOOL_LLAMA,   /* the answer is (probably) a JSON call: collected to the end */
    M_H_HEADER,     /* harmony: a message header up to <|message|> */
    M_H_BODY        /* harmony: a message body */
} mode;

typedef enum ms_state { MS_START, MS_NAME, MS_ID, MS_ARGS, MS_ARRAY } ms_state;

typedef struct sink {
    mxl_strbuf ws;      /* whitespace held until more text of this kind arrives */
    bool emitted;       /* some non-whitespace text went out */
    unsigned char carry[4]; /* an incomplete UTF-8 sequence at the end of the last piece */
    size_t ncarry;
} sink;

/* A harmony header longer than this without <|message|> is not a header. */
#define H_HEADER_MAX 1024
/* Longest tool name / call id accepted from Mistral's name form. */
#define NAME_MAX_LEN 256
#define ID_MAX_LEN 64

static const char *const H_PREFIXES[] = {"<|start|>", "<|channel|>", " to="};
static const char *const H_BODY_MARKERS[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>", "<|channel|>"};
enum { H_N_END_MARKERS = 3 }; /* the first three end a message and are consumed */

struct mxl_chat_stream {
    mxl_chat_syntax syn;
    const char *think_open, *think_close, *tool_open, *tool_close;
    bool trim;          /* whitespace trimming (everything but plain text without think tags) */
    mode mode;
    bool at_start;      /* content: the answer's first non-whitespace byte is still to come */
    bool skip_open;     /* reasoning from the prompt: a repeated open tag is dropped */
    bool done, oom;
    mxl_strbuf in;      /* bytes fed and not consumed yet: from `off` */
    size_t off;
    sink sk[2];
    mxl_strbuf cur;     /* the text delta being built (kind cur_kind) */
    int cur_kind;
    json_t *deltas;     /* the array of the feed in progress */
    mxl_strbuf raw;     /* raw text of the tool-call segment being collected */
    /* Mistral */
    ms_state ms;
    mxl_strbuf name, id;
    jscan js;
    size_t args_start;  /* offset in raw where the JSON value starts */
    /* harmony */
    int h_kind;
    bool h_tool;
    mxl_strbuf h_name;
    size_t n_calls;
};

static void sadd(mxl_chat_stream *s, mxl_strbuf *b, const char *p, size_t n) {
    if (!mxl_strbuf_append(b, p, n)) s->oom = true;
}

static void consume(mxl_chat_stream *s, size_t n) { s->off += n; }

/* ---------------------------------------------------------------- output */

static void out_flush(mxl_chat_stream *s) {
    if (!s->cur.n) return;
    json_t *o = json_object();
    json_t *str = json_stringn(s->cur.p, s->cur.n);
    if (!o || !str || json_object_set_new(o, s->cur_kind == K_REASON ? "reasoning_content" : "content", str) ||
        json_array_append_new(s->deltas, o)) {
        s->oom = true;
        if (o) json_decref(o);
        else if (str) json_decref(str);
    }
    mxl_strbuf_clear(&s->cur);
}

static void out_text(mxl_chat_stream *s, int kind, const char *p, size_t n) {
    if (!n) return;
    if (s->cur.n && s->cur_kind != kind) out_flush(s);
    s->cur_kind = kind;
    sadd(s, &s->cur, p, n);
}

/* Valid UTF-8 text into a sink: whitespace handling. */
static void sink_valid(mxl_chat_stream *s, int kind, const char *p, size_t n) {
    if (!s->trim) {
        out_text(s, kind, p, n);
        return;
    }
    sink *k = &s->sk[kind];
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && is_ws(p[j])) j++;
        if (j > i && k->emitted) sadd(s, &k->ws, p + i, j - i); /* leading whitespace is dropped */
        i = j;
        if (i >= n) break;
        size_t e = i;
        while (e < n && !is_ws(p[e])) e++;
        if (k->ws.n) out_text(s, kind, k->ws.p, k->ws.n);
        mxl_strbuf_clear(&k->ws);
        out_text(s, kind, p + i, e - i);
        k->emitted = true;
        i = e;
    }
}

/* Any bytes into a sink: UTF-8 repair, carrying an incomplete sequence to the next piece. */
static void sink_put(mxl_chat_stream *s, int kind, const char *text, size_t n) {
    sink *k = &s->sk[kind];
    const unsigned char *p = (const unsigned char *)text;
    size_t i = 0;
    while (k->ncarry && i < n) {
        unsigned char tmp[4];
        size_t c = k->ncarry, take = n - i < 4 - c ? n - i : 4 - c;
        memcpy(tmp, k->carry, c);
        memcpy(tmp + c, p + i, take);
        int r = utf8_check(tmp, c + take);
        if (r == 0) { /* still incomplete: everything left joins the carry */
            memcpy(k->carry + c, p + i, take);
            k->ncarry += take;
            return;
        }
        k->ncarry = 0;
        if (r > 0) {
            sink_valid(s, kind, (const char *)tmp, (size_t)r);
            i += (size_t)r - c;
        } else {
            sink_valid(s, kind, FFFD, 3);
            i += (size_t)(-r) > c ? (size_t)(-r) - c : 0;
        }
    }
    size_t run = i;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        int r = utf8_check(p + i, n - i);
        if (r > 0) {
            i += (size_t)r;
            continue;
        }
        sink_valid(s, kind, text + run, i - run);
        if (r == 0) {
            memcpy(k->carry, p + i, n - i);
            k->ncarry = n - i;
            return;
        }
        sink_valid(s, kind, FFFD, 3);
        i += (size_t)(-r);
        run = i;
    }
    sink_valid(s, kind, text + run, i - run);
}

/* The text of this kind is interrupted (a marker): a cut UTF-8 sequence is invalid now. */
static void sink_break(mxl_chat_stream *s, int kind) {
    sink *k = &s->sk[kind];
    if (k->ncarry) {
        k->ncarry = 0;
        sink_valid(s, kind, FFFD, 3);
    }
}

/* A block of this kind ended (think block, harmony message, before a tool call): the next text
 * of the kind starts on a new line. */
static void sink_block_end(mxl_chat_stream *s, int kind) {
    sink_break(s, kind);
    sink *k = &s->sk[kind];
    if (s->trim && k->emitted && !k->ws.n) sadd(s, &k->ws, "\n", 1);
}

/* ---------------------------------------------------------------- tool calls */

static const char ID_ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* "call_" + 24 alphanumerics from the seed and the call's index. */
static void make_id(uint64_t seed, size_t index, char out[32]) {
    uint64_t x = seed ^ ((uint64_t)index + 1) * 0xD1B54A32D192ED03ull;
    memcpy(out, "call_", 5);
    uint64_t z = 0;
    for (int i = 0; i < 24; i++) {
        if (i % 8 == 0) z = splitmix64(&x); /* 62^8 < 2^64: 8 digits per draw */
        out[5 + i] = ID_ALPHABET[z % 62];
        z /= 62;
    }
    out[29] = '\0';
}

/* Appends {"name", "arguments", "id"?} to calls; false when a string is not valid UTF-8 or the
 * name is empty. */
static bool call_add(json_t *calls, const char *name, size_t name_n, const char *args, size_t args_n,
                     const char *id, size_t id_n) {
    if (!name_n || name_n > NAME_MAX_LEN) return false;
    json_t *o = json_object();
    json_t *jn = json_stringn(name, name_n), *ja = json_stringn(args, args_n);
    json_t *ji = id_n ? json_stringn(id, id_n) : NULL;
    bool ok = o && jn && ja && (!id_n || ji);
    if (ok) {
        json_object_set_new(o, "name", jn);
        json_object_set_new(o, "arguments", ja);
        if (ji) json_object_set_new(o, "id", ji);
        jn = ja = ji = NULL;
        ok = json_array_append(calls, o) == 0;
    }
    json_decref(o);
    json_decref(jn);
    json_decref(ja);
    json_decref(ji);
    return ok;
}

static json_t *json_parse_any(const char *t, size_t n);

/* Whether a string given as the arguments holds a JSON object's text (a client json.loads the
 * arguments: anything else is not a call, and its text stays content). */
static bool args_string_ok(const json_t *str) {
    json_t *v = json_parse_any(json_string_value(str), json_string_length(str));
    bool ok = json_is_object(v);
    json_decref(v);
    return ok;
}

/* A call from a parsed JSON object `obj` whose text starts at t[i]: "name", arguments under
 * "arguments" or "parameters" (object: its text as written; string: taken as the JSON text,
 * which must be an object's), "id" when present. Missing arguments are {} unless required. */
static bool call_from_obj(json_t *calls, const char *t, size_t n, size_t i, json_t *obj, bool require_args) {
    if (!json_is_object(obj)) return false;
    json_t *name = json_object_get(obj, "name");
    if (!json_is_string(name)) return false;
    const char *key = "arguments";
    json_t *args = json_object_get(obj, key);
    if (!args) args = json_object_get(obj, key = "parameters");
    const char *at = "{}";
    size_t an = 2;
    char *dumped = NULL;
    if (json_is_object(args)) {
        size_t vs, ve;
        if (jw_member(t, n, i, key, &vs, &ve) && t[vs] == '{') {
            at = t + vs;
            an = ve - vs;
        } else {
            dumped = mxl_json_dumps(args, JSON_COMPACT);
            if (!dumped) return false;
            at = dumped;
            an = strlen(dumped);
        }
    } else if (json_is_string(args)) {
        if (!args_string_ok(args)) return false;
        at = json_string_value(args);
        an = json_string_length(args);
    } else if (args || require_args)
        return false;
    json_t *id = json_object_get(obj, "id");
    bool ok = call_add(calls, json_string_value(name), json_string_length(name), at, an,
                       json_is_string(id) ? json_string_value(id) : NULL, json_is_string(id) ? json_string_length(id) : 0);
    mxl_free(dumped);
    return ok;
}

static json_t *json_parse_any(const char *t, size_t n) {
    return mxl_json_loadb(t, n, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, NULL);
}

/* Hermes body: one JSON object {"name", "arguments"}. */
static bool parse_hermes(json_t *calls, const char *t, size_t n) {
    size_t i = skip_ws(t, n, 0);
    json_t *v = json_parse_any(t + i, n - i);
    bool ok = v && call_from_obj(calls, t + i, n - i, 0, v, false);
    json_decref(v);
    return ok;
}

/* Whether the tools' schema says parameter `param` of function `fn` is a string. */
static bool param_is_string(const json_t *tools, const char *fn, size_t fn_n, const char *param, size_t param_n) {
    size_t i;
    json_t *t;
    if (!json_is_array(tools)) return false;
    json_array_foreach((json_t *)tools, i, t) {
        json_t *f = json_object_get(t, "function");
        if (!f) f = t;
        json_t *name = json_object_get(f, "name");
        if (!json_is_string(name) || json_string_length(name) != fn_n || memcmp(json_string_value(name), fn, fn_n)) continue;
        json_t *props = json_object_get(json_object_get(f, "parameters"), "properties");
        json_t *p = NULL;
        const char *k;
        json_t *v;
        json_object_foreach(props, k, v) {
            if (strlen(k) == param_n && !memcmp(k, param, param_n)) p = v;
        }
        json_t *type = json_object_get(p, "type");
        if (json_is_string(type)) return strcmp(json_string_value(type), "string") == 0;
        if (json_is_array(type)) { /* ["string", "null"] */
            size_t j, n_str = 0, n_other = 0;
            json_t *e;
            json_array_foreach(type, j, e) {
                if (!json_is_string(e)) n_other++;
                else if (!strcmp(json_string_value(e), "string")) n_str++;
                else if (strcmp(json_string_value(e), "null")) n_other++;
            }
            return n_str && !n_other;
        }
        return false;
    }
    return false;
}

/* Earliest of the markers in t[i..n), n when none. */
static size_t find_first(const char *t, size_t n, size_t i, const char *const *m, size_t nm) {
    size_t best = n;
    for (size_t k = 0; k < nm; k++) {
        const char *f = memmem(t + i, n - i, m[k], strlen(m[k]));
        if (f && (size_t)(f - t) < best) best = (size_t)(f - t);
    }
    return best;
}

/* Appends the JSON string of t[0..n) to b (false: not UTF-8). */
static bool add_json_string(mxl_chat_stream *s, mxl_strbuf *b, const char *t, size_t n) {
    json_t *str = json_stringn(t, n);
    if (!str) return false;
    char *d = mxl_json_dumps(str, JSON_ENCODE_ANY);
    json_decref(str);
    if (!d) {
        s->oom = true;
        return false;
    }
    sadd(s, b, d, strlen(d));
    mxl_free(d);
    return true;
}

/* Whether a function or parameter name holds '<' or a control character (a newline, NUL, ...):
 * then it is not a name (and NUL could not be a JSON object key for jansson, which the server and
 * clients parse the arguments with). */
static bool bad_name(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] == '<' || (unsigned char)p[i] < 0x20 || p[i] == 0x7F) return true;
    return false;
}

/* Qwen3-Coder XML body: <function=N> (<parameter=P>\nVALUE\n</parameter>)* </function>, one or
 * more functions. A parameter also ends at the next <parameter= or </function> (models drop the
 * closing tag); one newline is stripped on each side of VALUE, as the templates add them. */
static bool parse_xml(mxl_chat_stream *s, json_t *calls, const char *t, size_t n) {
    static const char *const VALUE_END[] = {"</parameter>", "<parameter=", "</function>"};
    size_t i = skip_ws(t, n, 0), count = 0;
    mxl_strbuf args = {0};
    bool ok = true;
    while (ok && i < n) {
        if (!starts(t + i, n - i, "<function=")) {
            ok = false;
            break;
        }
        i += strlen("<function=");
        const char *gt = memchr(t + i, '>', n - i);
        if (!gt) {
            ok = false;
            break;
        }
        size_t ns = i, ne = (size_t)(gt - t);
        while (ns < ne && is_ws(t[ns])) ns++;
        while (ne > ns && is_ws(t[ne - 1])) ne--;
        if (bad_name(t + ns, ne - ns)) {
            ok = false;
            break;
        }
        i = (size_t)(gt - t) + 1;
        mxl_strbuf_clear(&args);
        sadd(s, &args, "{", 1);
        bool first = true;
        for (;;) {
            i = skip_ws(t, n, i);
            if (i >= n) break;
            if (starts(t + i, n - i, "</function>")) {
                i += strlen("</function>");
                break;
            }
            if (!starts(t + i, n - i, "<parameter=")) {
                ok = false;
                break;
            }
            i += strlen("<parameter=");
            const char *pg = memchr(t + i, '>', n - i);
            if (!pg) {
                ok = false;
                break;
            }
            size_t ps = i, pe = (size_t)(pg - t);
            while (ps < pe && is_ws(t[ps])) ps++;
            while (pe > ps && is_ws(t[pe - 1])) pe--;
            if (pe == ps || bad_name(t + ps, pe - ps)) {
                ok = false;
                break;
            }
            size_t vs = (size_t)(pg - t) + 1;
            size_t ve = find_first(t, n, vs, VALUE_END, 3);
            i = starts(t + ve, n - ve, "</parameter>") ? ve + strlen("</parameter>") : ve;
            if (vs < ve && t[vs] == '\n') vs++;
            else if (ve - vs >= 2 && t[vs] == '\r' && t[vs + 1] == '\n') vs += 2;
            if (ve > vs && t[ve - 1] == '\n') ve--;
            if (ve > vs && t[ve - 1] == '\r') ve--;
            if (!first) sadd(s, &args, ", ", 2);
            first = false;
            if (!add_json_string(s, &args, t + ps, pe - ps)) {
                ok = false;
                break;
            }
            sadd(s, &args, ": ", 2);
            /* JSON when it parses (numbers, objects, arrays, true/null) unless the schema says
             * string; otherwise the text itself as a string */
            size_t js = skip_ws(t, ve, vs), je = ve;
            while (je > js && is_ws(t[je - 1])) je--;
            json_t *v = NULL;
            if (je > js && !param_is_string(s->syn.tools, t + ns, ne - ns, t + ps, pe - ps))
                v = json_parse_any(t + js, je - js);
            if (v) {
                sadd(s, &args, t + js, je - js);
                json_decref(v);
            } else if (!add_json_string(s, &args, t + vs, ve - vs)) {
                ok = false;
                break;
            }
        }
        if (!ok) break;
        sadd(s, &args, "}", 1);
        if (s->oom || !call_add(calls, t + ns, ne - ns, args.p, args.n, NULL, 0)) ok = false;
        count++;
        i = skip_ws(t, n, i);
    }
    mxl_strbuf_free(&args);
    return ok && count > 0;
}

/* Llama 3.x: [<|python_tag|>] {"name", "parameters"} [; {...}]* [<|eom_id|>|<|eot_id|>]. */
static bool parse_llama(json_t *calls, const char *t, size_t n) {
    static const char *const ENDS[] = {"<|eom_id|>", "<|eot_id|>"};
    size_t i = skip_ws(t, n, 0);
    if (starts(t + i, n - i, "<|python_tag|>")) i += strlen("<|python_tag|>");
    for (bool again = true; again;) {
        again = false;
        while (n > i && is_ws(t[n - 1])) n--;
        for (int k = 0; k < 2; k++) {
            size_t l = strlen(ENDS[k]);
            if (n - i >= l && !memcmp(t + n - l, ENDS[k], l)) {
                n -= l;
                again = true;
            }
        }
    }
    size_t count = 0;
    for (;;) {
        i = skip_ws(t, n, i);
        if (i >= n || t[i] != '{') return false;
        size_t e = jw_value_end(t, n, i);
        if (!e) return false;
        json_t *v = json_parse_any(t + i, e - i);
        bool ok = v && call_from_obj(calls, t + i, e - i, 0, v, true);
        json_decref(v);
        if (!ok) return false;
        count++;
        i = skip_ws(t, n, e);
        if (i >= n) break;
        if (t[i] != ';') return false;
        i++;
        if (skip_ws(t, n, i) >= n) break;
    }
    return count > 0;
}

/* Mistral Nemo: [{"name", "arguments", "id"}, ...] starting at t[i]. */
static bool parse_mistral_array(json_t *calls, const char *t, size_t n) {
    size_t i = skip_ws(t, n, 0);
    json_t *v = i < n && t[i] == '[' ? json_parse_any(t + i, n - i) : NULL;
    bool ok = json_is_array(v) && json_array_size(v) > 0;
    size_t idx = 0;
    size_t k = skip_ws(t, n, i + 1);
    while (ok && idx < json_array_size(v)) {
        size_t e = jw_value_end(t, n, k);
        ok = e && t[k] == '{' && call_from_obj(calls, t, e, k, json_array_get(v, idx), false);
        idx++;
        k = skip_ws(t, n, e);
        if (k < n && t[k] == ',') k = skip_ws(t, n, k + 1);
    }
    json_decref(v);
    return ok;
}

/* Sends parsed calls out as tool_calls deltas. */
static void emit_calls(mxl_chat_stream *s, json_t *calls) {
    out_flush(s);
    sink_block_end(s, K_CONTENT);
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        char gen[32];
        json_t *id = json_object_get(c, "id");
        if (!json_is_string(id)) {
            make_id(s->syn.id_seed, s->n_calls, gen);
            id = json_string(gen);
        } else
            json_incref(id);
        json_t *fn = json_pack("{sOsO}", "name", json_object_get(c, "name"), "arguments", json_object_get(c, "arguments"));
        json_t *tc = id && fn ? json_pack("{sIsOsssO}", "index", (json_int_t)s->n_calls, "id", id, "type", "function", "function", fn)
                              : NULL;
        json_t *d = tc ? json_pack("{s[O]}", "tool_calls", tc) : NULL;
        json_decref(id);
        json_decref(fn);
        json_decref(tc);
        if (!d || json_array_append_new(s->deltas, d)) {
            s->oom = true;
            return;
        }
        s->n_calls++;
    }
}

/* The collected segment did not parse: it is content, as written. */
static void raw_to_content(mxl_chat_stream *s) {
    sink_put(s, K_CONTENT, s->raw.p ? s->raw.p : "", s->raw.n);
    mxl_strbuf_clear(&s->raw);
    s->mode = M_CONTENT;
}

/* ---------------------------------------------------------------- markers in the input */

/* Earliest complete marker in p[0..n) (longest on a tie): its index, *which its number (-1: none,
 * then the index is how many bytes are certainly plain: all but a suffix that could start a
 * marker, or everything when final). */
static size_t scan(const char *p, size_t n, const char *const *m, size_t nm, bool final, int *which) {
    size_t best = n, best_len = 0;
    *which = -1;
    for (size_t k = 0; k < nm; k++) {
        size_t ml = strlen(m[k]);
        const char *f = memmem(p, n, m[k], ml);
        if (f && ((size_t)(f - p) < best || ((size_t)(f - p) == best && ml > best_len))) {
            best = (size_t)(f - p);
            best_len = ml;
            *which = (int)k;
        }
    }
    if (*which >= 0 || final) return best;
    size_t hold = 0;
    for (size_t k = 0; k < nm; k++) {
        size_t ml = strlen(m[k]);
        for (size_t l = ml - 1 < n ? ml - 1 : n; l > hold; l--)
            if (!memcmp(p + n - l, m[k], l)) {
                hold = l;
                break;
            }
    }
    return n - hold;
}

/* The marker that starts a tool call in content, or NULL. */
static const char *tool_marker(const mxl_chat_stream *s) {
    switch (s->syn.fmt) {
    case MXL_CHAT_FMT_HERMES:
    case MXL_CHAT_FMT_QWEN3_XML: return s->tool_open;
    case MXL_CHAT_FMT_MISTRAL: return "[TOOL_CALLS]";
    case MXL_CHAT_FMT_LLAMA3_JSON: return "<|python_tag|>";
    default: return NULL;
    }
}

/* ---------------------------------------------------------------- mode steps
 * Each step looks at the unconsumed input p[0..n) and returns whether it consumed bytes or changed
 * state; with final it must not wait for more input. */

static bool step_content(mxl_chat_stream *s, const char *p, size_t n, bool final) {
    if (s->at_start) {
        size_t j = skip_ws(p, n, 0);
        if (j) {
            sink_put(s, K_CONTENT, p, j);
            consume(s, j);
            return true;
        }
        if (!n) {
            if (final) s->at_start = false;
            return final;
        }
        if (s->syn.think_tags) {
            pfx r = prefix_of(p, n, s->think_open);
            if (r == PFX_FULL) {
                consume(s, strlen(s->think_open));
                s->at_start = false;
                s->mode = M_REASON;
                return true;
            }
            if (r == PFX_PARTIAL && !final) return false;
        }
        if (s->syn.fmt == MXL_CHAT_FMT_LLAMA3_JSON && p[0] == '{') {
            s->at_start = false;
            mxl_strbuf_clear(&s->raw);
            s->mode = M_TOOL_LLAMA;
            return true;
        }
        s->at_start = false;
        return true;
    }
    const char *tm = tool_marker(s);
    int which;
    size_t plain = scan(p, n, &tm, tm ? 1 : 0, final, &which);
    sink_put(s, K_CONTENT, p, plain);
    consume(s, plain);
    if (which < 0) return plain > 0;
    consume(s, strlen(tm));
    sink_break(s, K_CONTENT);
    mxl_strbuf_clear(&s->raw);
    sadd(s, &s->raw, tm, strlen(tm));
    if (s->syn.fmt == MXL_CHAT_FMT_MISTRAL) {
        s->mode = M_TOOL_MISTRAL;
        s->ms = MS_START;
        mxl_strbuf_clear(&s->name);
        mxl_strbuf_clear(&s->id);
    } else if (s->syn.fmt == MXL_CHAT_FMT_LLAMA3_JSON)
        s->mode = M_TOOL_LLAMA;
    else
        s->mode = M_TOOL_TAG;
    return true;
}

static bool step_reason(mxl_chat_stream *s, const char *p, size_t n, bool final) {
    if (s->skip_open) {
        size_t j = skip_ws(p, n, 0);
        if (j) {
            sink_put(s, K_REASON, p, j);
            consume(s, j);
            return true;
        }
        if (!n) {
            if (final) s->skip_open = false;
            return final;
        }
        pfx r = prefix_of(p, n, s->think_open);
        if (r == PFX_FULL) consume(s, strlen(s->think_open));
        else if (r == PFX_PARTIAL && !final) return false;
        s->skip_open = false;
        return true;
    }
    int which;
    size_t plain = scan(p, n, &s->think_close, 1, final, &which);
    sink_put(s, K_REASON, p, plain);
    consume(s, plain);
    if (which < 0) return plain > 0;
    consume(s, strlen(s->think_close));
    sink_block_end(s, K_REASON);
    s->mode = M_CONTENT;
    return true;
}

/* The end of a <tool_call> block (closed: its close marker was seen). */
static void finish_tag_call(mxl_chat_stream *s, bool closed) {
    size_t ol = strlen(s->tool_open);
    const char *body = s->raw.p + ol;
    size_t bn = s->raw.n - ol;
    json_t *calls = json_array();
    if (!calls) {
        s->oom = true;
        return;
    }
    bool ok = s->syn.fmt == MXL_CHAT_FMT_QWEN3_XML ? parse_xml(s, calls, body, bn) : parse_hermes(calls, body, bn);
    if (ok) {
        emit_calls(s, calls);
        mxl_strbuf_clear(&s->raw);
        s->mode = M_CONTENT;
    } else {
        if (closed) sadd(s, &s->raw, s->tool_close, strlen(s->tool_close));
        raw_to_content(s);
    }
    json_decref(calls);
}

static bool step_tool_tag(mxl_chat_stream *s, const char *p, size_t n, bool final) {
    int which;
    size_t plain = scan(p, n, &s->tool_close, 1, final, &which);
    sadd(s, &s->raw, p, plain);
    consume(s, plain);
    if (which < 0) {
        if (final) {
            finish_tag_call(s, false);
            return true;
        }
        return plain > 0;
    }
    consume(s, strlen(s->tool_close));
    finish_tag_call(s, true);
    return true;
}

static bool name_char(char c, bool id) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return !id && (c == '_' || c == '-' || c == '.');
}

/* A complete [ARGS] value or [...] array is in raw from args_start. */
static void mistral_done(mxl_chat_stream *s) {
    json_t *calls = json_array();
    if (!calls) {
        s->oom = true;
        return;
    }
    const char *t = s->raw.p + s->args_start;
    size_t n = s->raw.n - s->args_start;
    bool ok;
    if (s->ms == MS_ARRAY) ok = parse_mistral_array(calls, t, n);
    else {
        size_t i = skip_ws(t, n, 0);
        json_t *v = json_parse_any(t + i, n - i);
        if (json_is_object(v))
            ok = call_add(calls, s->name.p, s->name.n, t + i, n - i, s->id.p, s->id.n);
        else if (json_is_string(v) && args_string_ok(v))
            ok = call_add(calls, s->name.p, s->name.n, json_string_value(v), json_string_length(v), s->id.p, s->id.n);
        else
            ok = false;
        json_decref(v);
    }
    if (ok) {
        emit_calls(s, calls);
        mxl_strbuf_clear(&s->raw);
        s->mode = M_CONTENT;
    } else
        raw_to_content(s);
    json_decref(calls);
}

static bool step_mistral(mxl_chat_stream *s, const char *p, size_t n, bool final) {
    static const char *const NAME_END[] = {"[ARGS]", "[CALL_ID]"};
    switch (s->ms) {
    case MS_START: {
        size_t j = skip_ws(p, n, 0);
        sadd(s, &s->raw, p, j);
        consume(s, j);
        if (j < n) {
            s->ms = p[j] == '[' ? MS_ARRAY : MS_NAME;
            s->js = (jscan){0};
            s->args_start = s->raw.n;
            return true;
        }
        if (final) raw_to_content(s);
        return j > 0 || final;
    }
    case MS_NAME:
    case MS_ID: {
        bool is_id = s->ms == MS_ID;
        int which;
        size_t plain = scan(p, n, NAME_END, is_id ? 1 : 2, final, &which);
        mxl_strbuf *b = is_id ? &s->id : &s->name;
        size_t max = is_id ? ID_MAX_LEN : NAME_MAX_LEN;
        for (size_t q = 0; q < plain; q++) {
            if (!name_char(p[q], is_id) || b->n + q >= max) {
                sadd(s, &s->raw, p, q);
                consume(s, q);
                raw_to_content(s);
                return true;
            }
        }
        sadd(s, b, p, plain);
        sadd(s, &s->raw, p, plain);
        consume(s, plain);
        if (which < 0) {
            if (final) raw_to_content(s);
            return plain > 0 || final;
        }
        if (!b->n) { /* "[TOOL_CALLS][ARGS]": no name */
            raw_to_content(s);
            return true;
        }
        const char *m = NAME_END[which];
        sadd(s, &s->raw, m, strlen(m));
        consume(s, strlen(m));
        s->ms = which == 0 ? MS_ARGS : MS_ID;
        s->js = (jscan){0};
        s->args_start = s->raw.n;
        return true;
    }
    case MS_ARGS:
    case MS_ARRAY:
        for (size_t q = 0; q < n; q++) {
            int r = jscan_byte(&s->js, p[q]);
            if (r < 0) {
                sadd(s, &s->raw, p, q);
                consume(s, q);
                raw_to_content(s);
                return true;
            }
            if (r > 0) {
                sadd(s, &s->raw, p, q + 1);
                consume(s, q + 1);
                mistral_done(s);
                return true;
            }
        }
        sadd(s, &s->raw, p, n);
        consume(s, n);
        if (final) raw_to_content(s);
        return n > 0 || final;
    }
    return false;
}

static bool step_llama(mxl_chat_stream *s, const char *p, size_t n, bool final) {
    sadd(s, &s->raw, p, n);
    consume(s, n);
    if (!final) return n > 0;
    json_t *calls = json_array();
    if (!calls) {
        s->oom = true;
        return false;
    }
    if (parse_llama(calls, s->raw.p, s->raw.n)) {
        emit_calls(s, calls);
        mxl_strbuf_clear(&s->raw);
        s->mode = M_CONTENT;
    } else
        raw_to_content(s);
    json_decref(calls);
    return true;
}

/* The last "key" token in a harmony header: what follows it up to whitespace or '<'. */
static void h_field(const char *h, size_t n, const char *key, size_t *vs, size_t *ve) {
    size_t kl = strlen(key);
    *vs = *ve = 0;
    for (size_t i = 0; i + kl <= n; i++) {
        if (memcmp(h + i, key, kl)) continue;
        size_t e = i + kl;
        while (e < n && !is_ws(h[e]) && h[e] != '<') e++;
        *vs = i + kl;
        *ve = e;
    }
}

static bool step_h_header(mxl_chat_stream *s, const char *p, size_t n, bool final) {
    if (!n) return false;
    bool compat = false, full = false;
    for (size_t k = 0; k < 3; k++) {
        pfx r = prefix_of(p, n, H_PREFIXES[k]);
        compat |= r != PFX_NO;
        full |= r == PFX_FULL;
    }
    if (!compat) { /* text outside any message: content */
        s->mode = M_H_BODY;
        s->h_kind = K_CONTENT;
        s->h_tool = false;
        return true;
    }
    size_t lim = n < H_HEADER_MAX ? n : H_HEADER_MAX;
    const char *f = full ? memmem(p, lim, "<|message|>", strlen("<|message|>")) : NULL;
    if (!f) {
        if (final || n >= H_HEADER_MAX) { /* not a header after all */
            /* (the header's window only, final or not: what follows may hold markers, and the
             * streamed parse, which sees the window first, reads them too) */
            size_t take = n < H_HEADER_MAX ? n : H_HEADER_MAX;
            sink_put(s, K_CONTENT, p, take);
            consume(s, take);
            s->mode = M_H_BODY;
            s->h_kind = K_CONTENT;
            s->h_tool = false;
            return true;
        }
        return false;
    }
    size_t hn = (size_t)(f - p);
    size_t rs, re, cs, ce;
    h_field(p, hn, "to=", &rs, &re);
    h_field(p, hn, "<|channel|>", &cs, &ce);
    bool tool = re > rs && !(re - rs == 9 && !memcmp(p + rs, "assistant", 9)) && !(re - rs == 4 && !memcmp(p + rs, "user", 4));
    mxl_strbuf_clear(&s->raw);
    mxl_strbuf_clear(&s->h_name);
    s->h_tool = tool;
    if (tool) {
        size_t ns = rs;
        if (re - rs > strlen("functions.") && !memcmp(p + rs, "functions.", strlen("functions."))) ns += strlen("functions.");
        sadd(s, &s->h_name, p + ns, re - ns);
        sadd(s, &s->raw, p, hn + strlen("<|message|>"));
        s->h_kind = K_CONTENT;
    } else
        s->h_kind = ce - cs == 8 && !memcmp(p + cs, "analysis", 8) ? K_REASON : K_CONTENT;
    consume(s, hn + strlen("<|message|>"));
    s->mode = M_H_BODY;
    return true;
}

/* A harmony message ended (end: the end marker consumed, or NULL). */
static void h_end_message(mxl_chat_stream *s, const char *end) {
    s->mode = M_H_HEADER;
    if (!s->h_tool) {
        sink_block_end(s, s->h_kind);
        return;
    }
    s->h_tool = false;
    /* raw = header + "<|message|>" + body */
    const char *m = memmem(s->raw.p, s->raw.n, "<|message|>", strlen("<|message|>"));
    size_t bs = m ? (size_t)(m - s->raw.p) + strlen("<|message|>") : s->raw.n;
    size_t i = skip_ws(s->raw.p, s->raw.n, bs), e = s->raw.n;
    while (e > i && is_ws(s->raw.p[e - 1])) e--;
    json_t *calls = json_array();
    if (!calls) {
        s->oom = true;
        return;
    }
    json_t *v = e > i ? json_parse_any(s->raw.p + i, e - i) : NULL;
    bool ok = (json_is_object(v) && call_add(calls, s->h_name.p, s->h_name.n, s->raw.p + i, e - i, NULL, 0));
    json_decref(v);
    if (ok) {
        emit_calls(s, calls);
        mxl_strbuf_clear(&s->raw);
    } else {
        if (end) sadd(s, &s->raw, end, strlen(end));
        sink_put(s, K_CONTENT, s->raw.p, s->raw.n);
        sink_block_end(s, K_CONTENT);
        mxl_strbuf_clear(&s->raw);
    }
    json_decref(calls);
}

static bool step_h_body(mxl_chat_stream *s, const char *p, size_t n, bool final) {
    int which;
    size_t plain = scan(p, n, H_BODY_MARKERS, 5, final, &which);
    if (s->h_tool) sadd(s, &s->raw, p, plain);
    else sink_put(s, s->h_kind, p, plain);
    consume(s, plain);
    if (which < 0) {
        if (final) {
            h_end_message(s, NULL);
            return true;
        }
        return plain > 0;
    }
    const char *m = H_BODY_MARKERS[which];
    if (which < H_N_END_MARKERS) consume(s, strlen(m));
    h_end_message(s, which < H_N_END_MARKERS ? m : NULL);
    return true;
}

/* ---------------------------------------------------------------- public API */

const char *mxl_chat_format_name(mxl_chat_format fmt) {
    switch (fmt) {
    case MXL_CHAT_FMT_PLAIN: return "plain";
    case MXL_CHAT_FMT_HERMES: return "hermes";
    case MXL_CHAT_FMT_QWEN3_XML: return "qwen3-xml";
    case MXL_CHAT_FMT_LLAMA3_JSON: return "llama3-json";
    case MXL_CHAT_FMT_MISTRAL: return "mistral";
    case MXL_CHAT_FMT_GPT_OSS: return "gpt-oss";
    }
    return "?";
}

mxl_chat_syntax mxl_chat_syntax_detect(const char *tpl, const char *prompt) {
    static const char *const THINK[][2] = {
        {"<seed:think>", "</seed:think>"}, /* ByteDance Seed-OSS */
        {"[THINK]", "[/THINK]"},           /* Magistral / Ministral reasoning */
        {"<think>", "</think>"},           /* Qwen3, QwQ, DeepSeek-R1, Nemotron, GLM, ... */
    };
    mxl_chat_syntax syn;
    memset(&syn, 0, sizeof syn);
    if (!tpl) tpl = "";
    if (has(tpl, "<|channel|>") && has(tpl, "<|message|>")) syn.fmt = MXL_CHAT_FMT_GPT_OSS;
    else if (has(tpl, "[TOOL_CALLS]"))
        syn.fmt = MXL_CHAT_FMT_MISTRAL;
    else if (has(tpl, "<seed:tool_call>") && has(tpl, "<function=") && has(tpl, "<parameter=")) {
        syn.fmt = MXL_CHAT_FMT_QWEN3_XML;
        syn.tool_open = "<seed:tool_call>";
        syn.tool_close = "</seed:tool_call>";
    } else if (has(tpl, "<tool_call>") && has(tpl, "<function=") && has(tpl, "<parameter="))
        syn.fmt = MXL_CHAT_FMT_QWEN3_XML;
    else if (has(tpl, "<tool_call>") && !has(tpl, "<arg_key>") && !has(tpl, "<invoke") && !has(tpl, "<function="))
        syn.fmt = MXL_CHAT_FMT_HERMES; /* GLM-style <arg_key> and MiniMax <invoke> bodies are not JSON */
    else if (has(tpl, "<|start_header_id|>") && (has(tpl, "<|python_tag|>") || has(tpl, "ipython")) &&
             !has(tpl, "<function="))
        syn.fmt = MXL_CHAT_FMT_LLAMA3_JSON; /* functionary's <function=...> is another format */
    if (syn.fmt != MXL_CHAT_FMT_GPT_OSS) {
        for (size_t k = 0; k < sizeof THINK / sizeof THINK[0]; k++) {
            if (has(tpl, THINK[k][0]) || has(tpl, THINK[k][1])) {
                syn.think_tags = true;
                syn.think_open = THINK[k][0];
                syn.think_close = THINK[k][1];
                break;
            }
        }
    }
    if (syn.think_tags && prompt) {
        size_t n = strlen(prompt), ol = strlen(syn.think_open);
        while (n && is_ws(prompt[n - 1])) n--;
        syn.starts_in_reasoning = n >= ol && !memcmp(prompt + n - ol, syn.think_open, ol);
    }
    return syn;
}

void mxl_chat_syntax_without_tools(mxl_chat_syntax *syn) {
    if (syn && syn->fmt != MXL_CHAT_FMT_GPT_OSS) syn->fmt = MXL_CHAT_FMT_PLAIN;
}

mxl_status mxl_chat_stream_create(const mxl_chat_syntax *syn, mxl_chat_stream **out, mxl_error *err) {
    if (!syn || !out) return mxl_error_set(err, MXL_ERR_ARG, "chat parse: missing syntax or output");
    *out = NULL;
    mxl_chat_stream *s = mxl_calloc(1, sizeof *s);
    if (!s) return mxl_error_set(err, MXL_ERR_NOMEM, "chat parse: out of memory");
    s->syn = *syn;
    if (s->syn.tools) json_incref((json_t *)s->syn.tools);
    s->think_open = syn->think_open ? syn->think_open : "<think>";
    s->think_close = syn->think_close ? syn->think_close : "</think>";
    s->tool_open = syn->tool_open ? syn->tool_open : "<tool_call>";
    s->tool_close = syn->tool_close ? syn->tool_close : "</tool_call>";
    if (!*s->think_open || !*s->think_close || !*s->tool_open || !*s->tool_close) {
        mxl_chat_stream_destroy(s);
        return mxl_error_set(err, MXL_ERR_ARG, "chat parse: empty think or tool marker");
    }
    s->trim = !(syn->fmt == MXL_CHAT_FMT_PLAIN && !syn->think_tags);
    if (syn->fmt == MXL_CHAT_FMT_GPT_OSS) s->mode = M_H_HEADER;
    else if (syn->think_tags && syn->starts_in_reasoning) {
        s->mode = M_REASON;
        s->skip_open = true;
    } else {
        s->mode = M_CONTENT;
        s->at_start = syn->think_tags || syn->fmt == MXL_CHAT_FMT_LLAMA3_JSON;
    }
    *out = s;
    return MXL_OK;
}

size_t mxl_chat_stream_tool_call_count(const mxl_chat_stream *s) { return s ? s->n_calls : 0; }

mxl_status mxl_chat_stream_feed(mxl_chat_stream *s, const char *text, size_t len, bool final, json_t *deltas,
                                mxl_error *err) {
    if (!s || !json_is_array(deltas) || (!text && len))
        return mxl_error_set(err, MXL_ERR_ARG, "chat parse: bad stream, text or deltas array");
    if (s->done) return mxl_error_set(err, MXL_ERR_ARG, "chat parse: feed after the final piece");
    if (s->oom) return mxl_error_set(err, MXL_ERR_NOMEM, "chat parse: out of memory earlier in this stream");
    /* drop consumed input before adding more */
    if (s->off) {
        memmove(s->in.p, s->in.p + s->off, s->in.n - s->off);
        s->in.n -= s->off;
        s->off = 0;
    }
    sadd(s, &s->in, text, len);
    s->deltas = deltas;
    bool progress = true;
    while (progress && !s->oom) {
        const char *p = s->in.p ? s->in.p + s->off : "";
        size_t n = s->in.n - s->off;
        switch (s->mode) {
        case M_CONTENT: progress = step_content(s, p, n, final); break;
        case M_REASON: progress = step_reason(s, p, n, final); break;
        case M_TOOL_TAG: progress = step_tool_tag(s, p, n, final); break;
        case M_TOOL_MISTRAL: progress = step_mistral(s, p, n, final); break;
        case M_TOOL_LLAMA: progress = step_llama(s, p, n, final); break;
        case M_H_HEADER: progress = step_h_header(s, p, n, final); break;
        case M_H_BODY: progress = step_h_body(s, p, n, final); break;
        }
    }
    if (final) {
        sink_break(s, K_CONTENT);
        sink_break(s, K_REASON);
        s->done = true;
    }
    out_flush(s);
    s->deltas = NULL;
    if (s->oom) return mxl_error_set(err, MXL_ERR_NOMEM, "chat parse: out of memory");
    return MXL_OK;
}

void mxl_chat_stream_destroy(mxl_chat_stream *s) {
    if (!s) return;
    if (s->syn.tools) json_decref((json_t *)s->syn.tools);
    mxl_strbuf_free(&s->in);
    mxl_strbuf_free(&s->sk[0].ws);
    mxl_strbuf_free(&s->sk[1].ws);
    mxl_strbuf_free(&s->cur);
    mxl_strbuf_free(&s->raw);
    mxl_strbuf_free(&s->name);
    mxl_strbuf_free(&s->id);
    mxl_strbuf_free(&s->h_name);
    mxl_free(s);
}

static mxl_status append_str(mxl_strbuf *b, json_t *v) {
    if (!json_is_string(v)) return MXL_OK;
    return mxl_strbuf_append(b, json_string_value(v), json_string_length(v)) ? MXL_OK : MXL_ERR_NOMEM;
}

mxl_status mxl_chat_parse(const mxl_chat_syntax *syn, const char *text, size_t len, json_t **out, mxl_error *err) {
    if (!out) return mxl_error_set(err, MXL_ERR_ARG, "chat parse: missing output");
    *out = NULL;
    mxl_chat_stream *s;
    mxl_status st = mxl_chat_stream_create(syn, &s, err);
    if (st) return st;
    json_t *deltas = json_array();
    if (!deltas) {
        mxl_chat_stream_destroy(s);
        return mxl_error_set(err, MXL_ERR_NOMEM, "chat parse: out of memory");
    }
    st = mxl_chat_stream_feed(s, text, len, true, deltas, err);
    mxl_chat_stream_destroy(s);
    mxl_strbuf content = {0}, reasoning = {0};
    json_t *calls = json_array(), *res = json_object();
    if (!st && (!calls || !res)) st = MXL_ERR_NOMEM;
    size_t i;
    json_t *d;
    json_array_foreach(deltas, i, d) {
        if (st) break;
        if ((st = append_str(&content, json_object_get(d, "content")))) break;
        if ((st = append_str(&reasoning, json_object_get(d, "reasoning_content")))) break;
        size_t j;
        json_t *tc;
        json_array_foreach(json_object_get(d, "tool_calls"), j, tc) {
            json_t *c = json_pack("{sOsssO}", "id", json_object_get(tc, "id"), "type", "function", "function",
                                  json_object_get(tc, "function"));
            if (!c || json_array_append_new(calls, c)) {
                st = MXL_ERR_NOMEM;
                break;
            }
        }
    }
    if (!st) {
        bool any_calls = json_array_size(calls) > 0;
        json_t *c = content.n || !any_calls ? json_stringn(content.p ? content.p : "", content.n) : json_null();
        if (!c || json_object_set_new(res, "content", c)) st = MXL_ERR_NOMEM;
        if (!st && reasoning.n) {
            json_t *r = json_stringn(reasoning.p, reasoning.n);
            if (!r || json_object_set_new(res, "reasoning_content", r)) st = MXL_ERR_NOMEM;
        }
        if (!st && any_calls && json_object_set(res, "tool_calls", calls)) st = MXL_ERR_NOMEM;
    }
    json_decref(deltas);
    json_decref(calls);
    mxl_strbuf_free(&content);
    mxl_strbuf_free(&reasoning);
    if (st) {
        json_decref(res);
        if (st == MXL_ERR_NOMEM) mxl_error_set(err, st, "chat parse: out of memory");
        return st;
    }
    *out = res;
    return MXL_OK;
}
