/* fuzz_chat_parse.c - libFuzzer harness for the chat-output parser (engine/chat_parse.h). The
 * first three bytes choose the syntax and the splits, the rest is the model's text:
 *   byte 0  the format (every mxl_chat_format value)
 *   byte 1  bit 0 think tags, bit 1 starts in reasoning, bits 2-3 the request's tools (none, the
 *           golden conversations' get_weather, several tools with string / integer / array / enum
 *           parameters, malformed tool entries), bits 4-5 the think markers (default, <think>,
 *           [THINK], <seed:think>), bit 6 the Seed-OSS tool markers, bit 7 the id seed
 *   byte 2  seed of the split points
 * The text is parsed whole (mxl_chat_parse) and streamed (mxl_chat_stream_feed) byte by byte, in
 * pieces of seeded random sizes and in two pieces, each stream ending with a final empty feed.
 *
 * Asserts (abort()), besides no crash / leak / UB: the streaming invariant of chat_parse.h (the
 * concatenated content deltas equal the whole-parse content, likewise reasoning_content, and the
 * streamed tool calls, indexed 0, 1, ... in order, equal the whole-parse tool_calls); every delta
 * has exactly one key and a non-empty text; a tool call has an id, type "function", a name and
 * arguments that parse as JSON, and mxl_chat_stream_tool_call_count counts them; the whole result
 * has the documented shape (content null only when empty with tool calls, reasoning_content and
 * tool_calls absent when empty); every output string is valid UTF-8 (no overlongs, surrogates or
 * code points past U+10FFFF); a feed after the final one is refused. */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/chat_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TEXT 4096

static const char TOOLS_WEATHER[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the current weather in a city\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"},"
    " \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}]";
static const char TOOLS_MANY[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"does f\", \"parameters\": {\"type\": \"object\","
    "   \"properties\": {\"a\": {\"type\": \"integer\", \"description\": \"an int\"}}, \"required\": [\"a\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"g\", \"description\": \"G\", \"parameters\": {\"type\": \"object\","
    "   \"properties\": {\"x\": {\"type\": \"array\", \"items\": {\"type\": \"number\"}}, \"y\": {\"type\": \"string\", \"enum\": [\"\\u00e9\", \"b\"]}}}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"h\", \"description\": \"H\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"lookup\", \"parameters\": {\"type\": \"object\", \"properties\": {"
    "   \"zip\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\"}, \"note\": {\"type\": [\"string\", \"null\"]}}}}}]";
static const char TOOLS_ODD[] =
    "[1, null, \"f\", {}, {\"type\": \"function\"}, {\"function\": 3}, {\"name\": \"f\", \"parameters\": {\"properties\": {\"a\": "
    "{\"type\": \"string\"}}}}, {\"function\": {\"name\": \"g\", \"parameters\": []}}, {\"function\": {\"name\": \"h\", "
    "\"parameters\": {\"properties\": {\"p\": {\"type\": [1, \"string\"]}, \"q\": {\"type\": []}, \"r\": 5, \"s\": {\"type\": "
    "[\"null\", \"string\"]}}}}}, {\"function\": {\"name\": 7}}, {\"function\": {\"name\": \"\", \"parameters\": {\"properties\": "
    "{\"\": {\"type\": \"string\"}}}}}]";

/* Strict UTF-8: no overlongs, surrogates or code points above U+10FFFF. */
static bool valid_utf8(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) need = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else
            return false;
        if (n - i < need) return false;
        for (size_t k = 1; k < need; k++) {
            unsigned b = p[i + k];
            if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return false;
        }
        i += need;
    }
    return true;
}

static void check_str(const json_t *v, bool nonempty) {
    if (!json_is_string(v)) abort();
    if (nonempty && json_string_length(v) == 0) abort();
    if (!valid_utf8(json_string_value(v), json_string_length(v))) abort();
}

/* {"id", "type": "function", "function": {"name", "arguments"}}: arguments must be JSON */
static void check_call(const json_t *c) {
    check_str(json_object_get(c, "id"), true);
    const json_t *type = json_object_get(c, "type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "function")) abort();
    const json_t *f = json_object_get(c, "function");
    if (!json_is_object(f)) abort();
    check_str(json_object_get(f, "name"), false);
    const json_t *args = json_object_get(f, "arguments");
    check_str(args, false);
    json_t *v = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!v) abort();
    json_decref(v);
}

typedef struct acc {
    char *p;
    size_t n;
} acc;

static void acc_add(acc *a, const json_t *v) {
    size_t k = json_string_length(v);
    char *p = mxl_realloc(a->p, a->n + k + 1);
    if (!p) abort();
    memcpy(p + a->n, json_string_value(v), k);
    a->p = p;
    a->n += k;
}

/* Streams text cut at cuts[0..ncuts) (increasing) and returns the deltas gathered into the shape
 * of the whole parse. */
static json_t *stream(const mxl_chat_syntax *syn, const char *text, size_t len, const size_t *cuts, size_t ncuts) {
    mxl_chat_stream *s = NULL;
    mxl_error err = {0};
    if (mxl_chat_stream_create(syn, &s, &err) != MXL_OK) abort();
    json_t *deltas = json_array();
    size_t at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : len;
        if (mxl_chat_stream_feed(s, text + at, to - at, false, deltas, &err) != MXL_OK) abort();
        at = to;
    }
    if (mxl_chat_stream_feed(s, "", 0, true, deltas, &err) != MXL_OK) abort();
    if (mxl_chat_stream_feed(s, "x", 1, false, deltas, &err) == MXL_OK) abort(); /* after final */
    json_t *calls = json_array();
    acc content = {0}, reasoning = {0};
    size_t i;
    json_t *d;
    json_array_foreach(deltas, i, d) {
        if (json_object_size(d) != 1) abort();
        json_t *c = json_object_get(d, "content"), *r = json_object_get(d, "reasoning_content"),
               *tcs = json_object_get(d, "tool_calls");
        if (c) check_str(c, true), acc_add(&content, c);
        else if (r) check_str(r, true), acc_add(&reasoning, r);
        else if (json_is_array(tcs) && json_array_size(tcs) > 0) {
            size_t j;
            json_t *tc;
            json_array_foreach(tcs, j, tc) {
                json_t *idx = json_object_get(tc, "index");
                if (!json_is_integer(idx) || json_integer_value(idx) != (json_int_t)json_array_size(calls)) abort();
                json_t *call = json_pack("{sOsOsO}", "id", json_object_get(tc, "id"), "type", json_object_get(tc, "type"),
                                         "function", json_object_get(tc, "function"));
                if (!call) abort();
                check_call(call);
                json_array_append_new(calls, call);
            }
        } else
            abort();
    }
    if (mxl_chat_stream_tool_call_count(s) != json_array_size(calls)) abort();
    mxl_chat_stream_destroy(s);
    json_t *res = json_object();
    bool any = json_array_size(calls) > 0;
    json_object_set_new(res, "content", content.n || !any ? json_stringn(content.p ? content.p : "", content.n) : json_null());
    if (!json_object_get(res, "content")) abort();
    if (reasoning.n) json_object_set_new(res, "reasoning_content", json_stringn(reasoning.p, reasoning.n));
    if (any) json_object_set(res, "tool_calls", calls);
    json_decref(calls);
    json_decref(deltas);
    mxl_free(content.p);
    mxl_free(reasoning.p);
    return res;
}

static void check_whole(const json_t *r) {
    if (!json_is_object(r)) abort();
    const json_t *c = json_object_get(r, "content"), *rc = json_object_get(r, "reasoning_content"),
                 *tcs = json_object_get(r, "tool_calls");
    size_t n_keys = 1 + (rc != NULL) + (tcs != NULL);
    if (json_object_size(r) != n_keys) abort();
    if (tcs) {
        if (!json_is_array(tcs) || json_array_size(tcs) == 0) abort();
        size_t i;
        json_t *call;
        json_array_foreach(tcs, i, call) check_call(call);
    }
    if (json_is_null(c)) {
        if (!tcs) abort();
    } else {
        check_str(c, false);
        if (tcs && json_string_length(c) == 0) abort(); /* empty content with calls is null */
    }
    if (rc) check_str(rc, true);
}

/* the streaming invariant; on a mismatch both results go to stderr before the abort */
static void same(const json_t *whole, const json_t *streamed, const char *how) {
    if (json_equal((json_t *)whole, (json_t *)streamed)) return;
    char *a = json_dumps(whole, JSON_ENCODE_ANY), *b = json_dumps(streamed, JSON_ENCODE_ANY);
    fprintf(stderr, "streamed (%s) differs from the whole parse:\n whole:    %s\n streamed: %s\n", how, a ? a : "?", b ? b : "?");
    free(a);
    free(b);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *tools[4];
    if (!tools[1]) {
        tools[1] = json_loads(TOOLS_WEATHER, 0, NULL);
        tools[2] = json_loads(TOOLS_MANY, 0, NULL);
        tools[3] = json_loads(TOOLS_ODD, 0, NULL);
        if (!tools[1] || !tools[2] || !tools[3]) abort();
    }
    static const char *const THINK[4][2] = {{NULL, NULL}, {"<think>", "</think>"}, {"[THINK]", "[/THINK]"}, {"<seed:think>", "</seed:think>"}};
    if (size < 3) return 0;
    uint8_t b0 = data[0], b1 = data[1], b2 = data[2];
    const char *text = (const char *)data + 3;
    size_t len = size - 3;
    if (len > MAX_TEXT) len = MAX_TEXT;

    mxl_chat_syntax syn;
    memset(&syn, 0, sizeof syn);
    syn.fmt = (mxl_chat_format)(b0 % 6);
    syn.think_tags = b1 & 1;
    syn.starts_in_reasoning = (b1 >> 1) & 1;
    syn.tools = tools[(b1 >> 2) & 3];
    syn.think_open = THINK[(b1 >> 4) & 3][0];
    syn.think_close = THINK[(b1 >> 4) & 3][1];
    if (b1 & 64) syn.tool_open = "<seed:tool_call>", syn.tool_close = "</seed:tool_call>";
    syn.id_seed = (b1 & 128) ? 0x9E3779B97F4A7C15ull : 0;
    if (strcmp(mxl_chat_format_name(syn.fmt), "?") == 0) abort();

    json_t *whole = NULL;
    mxl_error err = {0};
    if (mxl_chat_parse(&syn, text, len, &whole, &err) != MXL_OK) abort();
    check_whole(whole);

    size_t *cuts = mxl_malloc((len + 1) * sizeof *cuts);
    if (!cuts) abort();
    /* byte by byte */
    for (size_t i = 0; i + 1 < len; i++) cuts[i] = i + 1;
    json_t *r = stream(&syn, text, len, cuts, len > 1 ? len - 1 : 0);
    same(whole, r, "byte by byte");
    json_decref(r);
    /* seeded random pieces of 1..(b2 % 16 + 1) bytes */
    uint64_t x = 0x853C49E6748FEA9Bull ^ b2 ^ ((uint64_t)len << 8);
    size_t n = 0, span = (size_t)(b2 % 16) + 1;
    for (size_t at = 0;;) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        at += 1 + (size_t)((x >> 33) % span);
        if (at >= len) break;
        cuts[n++] = at;
    }
    r = stream(&syn, text, len, cuts, n);
    same(whole, r, "random pieces");
    json_decref(r);
    /* two pieces */
    cuts[0] = len * b2 / 255;
    r = stream(&syn, text, len, cuts, 1);
    same(whole, r, "two pieces");
    json_decref(r);

    mxl_free(cuts);
    json_decref(whole);
    return 0;
}
