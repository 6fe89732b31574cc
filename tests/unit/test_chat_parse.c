/* test_chat_parse.c - engine/chat_parse: generated text -> content / reasoning / tool calls.
 *
 * The reference is Python Jinja2: ../shared/testdata/templates/golden.jsonl and
 * tests/fixtures/templates/extra_golden.jsonl hold real chat templates rendered by transformers'
 * environment for conversations whose assistant turns carry tool calls (tools_call_roundtrip,
 * strargs, multi_tools) or reasoning_content (think_on). Each test cuts the assistant turn out
 * of a render (after the template's assistant header, up to its end-of-turn marker), parses it
 * with the syntax detected from that template's source, and requires back what the conversation
 * put in: tool names and arguments (compared as JSON values), ids where the format carries them,
 * content and reasoning. Every parsed text is also streamed split at every byte position, byte
 * by byte and in random pieces, and must give exactly the whole-text result. Missing test data
 * fails the test. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/chat_parse.h"
#include "test.h"

/* ---------------------------------------------------------------- test data */

static const char *shared_dir(void) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/../shared/testdata/templates", mxl_test_repo_root());
    return dir;
}

/* Template source of templates/<name>.jinja (malloc'd) or NULL. */
static char *template_src(const char *name) {
    char path[1400];
    snprintf(path, sizeof path, "%s/templates/%s.jinja", shared_dir(), name);
    char *s = mxl_test_read_file(path, NULL);
    if (!s) fprintf(stderr, "  missing test data: %s\n", path);
    return s;
}

/* Records of both golden files and both conversation files, loaded once. */
typedef struct golden_db {
    json_t *records; /* array of {template, conversation, output | error} */
    json_t *convs;   /* object: conversation id -> conversation */
} golden_db;

static bool load_jsonl(json_t *into, const char *path) {
    char *text = mxl_test_read_file(path, NULL);
    if (!text) {
        fprintf(stderr, "  missing test data: %s\n", path);
        return false;
    }
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        json_t *rec = json_loads(line, 0, NULL);
        if (rec) json_array_append_new(into, rec);
        line = nl ? nl + 1 : NULL;
    }
    mxl_free(text);
    return true;
}

static bool load_convs(json_t *into, const char *path) {
    json_t *a = json_load_file(path, 0, NULL);
    if (!a) {
        fprintf(stderr, "  missing test data: %s\n", path);
        return false;
    }
    size_t i;
    json_t *c;
    json_array_foreach(a, i, c) json_object_set(into, json_string_value(json_object_get(c, "id")), c);
    json_decref(a);
    return true;
}

static bool db_load(golden_db *db) {
    char p[1400];
    db->records = json_array();
    db->convs = json_object();
    bool ok = true;
    snprintf(p, sizeof p, "%s/golden.jsonl", shared_dir());
    ok &= load_jsonl(db->records, p);
    snprintf(p, sizeof p, "%s/conversations.json", shared_dir());
    ok &= load_convs(db->convs, p);
    snprintf(p, sizeof p, "%s/tests/fixtures/templates/extra_golden.jsonl", mxl_test_repo_root());
    ok &= load_jsonl(db->records, p);
    snprintf(p, sizeof p, "%s/tests/fixtures/templates/extra_conversations.json", mxl_test_repo_root());
    ok &= load_convs(db->convs, p);
    return ok;
}

static void db_free(golden_db *db) {
    json_decref(db->records);
    json_decref(db->convs);
}

/* The record of (template, conversation): NULL when there is none. */
static json_t *db_record(const golden_db *db, const char *tpl, const char *conv) {
    size_t i;
    json_t *r;
    json_array_foreach(db->records, i, r) {
        if (!strcmp(json_string_value(json_object_get(r, "template")), tpl) &&
            !strcmp(json_string_value(json_object_get(r, "conversation")), conv))
            return r;
    }
    return NULL;
}

static const char *db_output(const golden_db *db, const char *tpl, const char *conv) {
    return json_string_value(json_object_get(db_record(db, tpl, conv), "output"));
}

/* ---------------------------------------------------------------- parsing helpers */

/* Concatenates stream deltas into the whole-parse shape ({content, reasoning_content?,
 * tool_calls?}); tool-call indices must count up from 0. */
static json_t *aggregate(int *mxl_test_failed_, const json_t *deltas) {
    json_t *calls = json_array();
    char *content = mxl_calloc(1, 1), *reasoning = mxl_calloc(1, 1);
    size_t cn = 0, rn = 0, i;
    json_t *d;
    json_array_foreach(deltas, i, d) {
        CHECK(json_object_size(d) == 1);
        const char *keys[2] = {"content", "reasoning_content"};
        char **dst[2] = {&content, &reasoning};
        size_t *dn[2] = {&cn, &rn};
        for (int k = 0; k < 2; k++) {
            json_t *v = json_object_get(d, keys[k]);
            if (!v) continue;
            CHECK(json_string_length(v) > 0);
            *dst[k] = mxl_realloc(*dst[k], *dn[k] + json_string_length(v) + 1);
            memcpy(*dst[k] + *dn[k], json_string_value(v), json_string_length(v) + 1);
            *dn[k] += json_string_length(v);
        }
        size_t j;
        json_t *tc;
        json_array_foreach(json_object_get(d, "tool_calls"), j, tc) {
            CHECK_EQ_INT(json_integer_value(json_object_get(tc, "index")), json_array_size(calls));
            json_array_append_new(calls, json_pack("{sOsssO}", "id", json_object_get(tc, "id"), "type", "function",
                                                   "function", json_object_get(tc, "function")));
        }
    }
    json_t *res = json_object();
    json_object_set_new(res, "content", cn || !json_array_size(calls) ? json_stringn(content, cn) : json_null());
    if (rn) json_object_set_new(res, "reasoning_content", json_stringn(reasoning, rn));
    if (json_array_size(calls)) json_object_set(res, "tool_calls", calls);
    json_decref(calls);
    mxl_free(content);
    mxl_free(reasoning);
    return res;
}

/* Streams text in pieces cut at cuts[0..ncuts) (increasing) and returns the aggregate. */
static json_t *stream_pieces(int *mxl_test_failed_, const mxl_chat_syntax *syn, const char *text, size_t len,
                             const size_t *cuts, size_t ncuts) {
    mxl_chat_stream *s = NULL;
    mxl_error err = {0};
    if (mxl_chat_stream_create(syn, &s, &err) != MXL_OK) {
        CHECK(!"stream create failed");
        return NULL;
    }
    json_t *deltas = json_array();
    size_t at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : len;
        bool final = i == ncuts;
        size_t before = json_array_size(deltas);
        if (mxl_chat_stream_feed(s, text + at, to - at, final, deltas, &err) != MXL_OK) {
            fprintf(stderr, "  feed failed: %s\n", err.msg);
            CHECK(0);
        }
        /* a tool call is emitted whole: its arguments parse */
        for (size_t k = before; k < json_array_size(deltas); k++) {
            json_t *tcs = json_object_get(json_array_get(deltas, k), "tool_calls");
            if (!tcs) continue;
            json_t *args = json_object_get(json_object_get(json_array_get(tcs, 0), "function"), "arguments");
            json_t *v = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
            CHECK(v != NULL);
            json_decref(v);
        }
        at = to;
    }
    mxl_chat_stream_destroy(s);
    json_t *res = aggregate(mxl_test_failed_, deltas);
    json_decref(deltas);
    return res;
}

static bool same_result(const json_t *a, const json_t *b, const char *what, const char *text, size_t cut) {
    if (json_equal((json_t *)a, (json_t *)b)) return true;
    char *sa = json_dumps(a, JSON_ENCODE_ANY), *sb = json_dumps(b, JSON_ENCODE_ANY);
    fprintf(stderr, "  stream (%s, cut %zu) differs on %.60s...\n    whole:  %s\n    stream: %s\n", what, cut, text, sa, sb);
    mxl_free(sa);
    mxl_free(sb);
    return false;
}

/* Whole parse of text, checked against streaming it split at every byte position (two pieces),
 * byte by byte, and in seeded random pieces. Returns the whole-parse result (caller frees). */
static json_t *parse_checked_n(int *mxl_test_failed_, const mxl_chat_syntax *syn, const char *text, size_t len);
static json_t *parse_checked(int *mxl_test_failed_, const mxl_chat_syntax *syn, const char *text) {
    return parse_checked_n(mxl_test_failed_, syn, text, strlen(text));
}

/* The same for text of len bytes (may hold NUL). */
static json_t *parse_checked_n(int *mxl_test_failed_, const mxl_chat_syntax *syn, const char *text, size_t len) {
    json_t *whole = NULL;
    mxl_error err = {0};
    if (mxl_chat_parse(syn, text, len, &whole, &err) != MXL_OK) {
        fprintf(stderr, "  parse failed: %s\n", err.msg);
        CHECK(0);
        return NULL;
    }
    for (size_t cut = 0; cut <= len; cut++) {
        json_t *r = stream_pieces(mxl_test_failed_, syn, text, len, &cut, 1);
        bool same = same_result(whole, r, "two pieces", text, cut);
        CHECK(same);
        json_decref(r);
        if (!same) break;
    }
    size_t *cuts = mxl_malloc((len + 1) * sizeof *cuts);
    for (size_t i = 0; i < len; i++) cuts[i] = i + 1;
    json_t *r = stream_pieces(mxl_test_failed_, syn, text, len, cuts, len ? len - 1 : 0);
    CHECK(same_result(whole, r, "byte by byte", text, 0));
    json_decref(r);
    uint64_t x = 0x853C49E6748FEA9Bull ^ len;
    for (int round = 0; round < 8 && len > 1; round++) {
        size_t n = 0;
        for (size_t at = 0;;) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            at += 1 + (size_t)((x >> 33) % 7);
            if (at >= len) break;
            cuts[n++] = at;
        }
        r = stream_pieces(mxl_test_failed_, syn, text, len, cuts, n);
        CHECK(same_result(whole, r, "random pieces", text, n));
        json_decref(r);
    }
    mxl_free(cuts);
    return whole;
}

static const char *res_content(const json_t *r) { return json_string_value(json_object_get(r, "content")); }
static const char *res_reasoning(const json_t *r) { return json_string_value(json_object_get(r, "reasoning_content")); }
static size_t res_ncalls(const json_t *r) { return json_array_size(json_object_get(r, "tool_calls")); }

static bool is_generated_id(const char *id) {
    if (!id || strlen(id) != 29 || strncmp(id, "call_", 5)) return false;
    for (int i = 5; i < 29; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= '0' && id[i] <= '9')))
            return false;
    return true;
}

static char *strndup_(const char *p, size_t n) {
    char *s = mxl_malloc(n + 1);
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

/* ---------------------------------------------------------------- (1) tool calls from renders */


/* Templates whose tool calls we parse: the format detection must give, and the assistant header
 * and end-of-turn marker that delimit a turn in a render (NULL end: the conversation's
 * eos_token, as Mistral templates close a turn with it). */
static const struct {
    const char *tpl;
    mxl_chat_format fmt;
    const char *header, *end;
    bool required; /* named by the issue: must have at least one render with a tool call */
} TOOL_TEMPLATES[] = {
    {"Qwen-Qwen2.5-7B-Instruct", MXL_CHAT_FMT_HERMES, "<|im_start|>assistant\n", "<|im_end|>", true},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", MXL_CHAT_FMT_HERMES, "<|im_start|>assistant\n", "<|im_end|>", true},
    {"Qwen-Qwen3-0.6B", MXL_CHAT_FMT_HERMES, "<|im_start|>assistant\n", "<|im_end|>", true},
    {"Qwen-QwQ-32B", MXL_CHAT_FMT_HERMES, "<|im_start|>assistant\n", "<|im_end|>", false},
    {"Bielik-11B-v3.0-Instruct", MXL_CHAT_FMT_HERMES, "<|im_start|>assistant\n", "<|im_end|>", false},
    {"MiMo-VL", MXL_CHAT_FMT_HERMES, "<|im_start|>assistant\n", "<|im_end|>", false},
    {"ibm-granite-granite-4.1", MXL_CHAT_FMT_HERMES, "<|start_of_role|>assistant<|end_of_role|>", "<|end_of_text|>", false},
    {"Qwen3-Coder", MXL_CHAT_FMT_QWEN3_XML, "<|im_start|>assistant\n", "<|im_end|>", true},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", MXL_CHAT_FMT_QWEN3_XML, "<|im_start|>assistant\n", "<|im_end|>", true},
    {"StepFun3.5-Flash", MXL_CHAT_FMT_QWEN3_XML, "<|im_start|>assistant\n", "<|im_end|>", false},
    {"ByteDance-Seed-OSS", MXL_CHAT_FMT_QWEN3_XML, "<seed:bos>assistant\n", "<seed:eos>", false},
    {"meta-llama-Llama-3.1-8B-Instruct", MXL_CHAT_FMT_LLAMA3_JSON, "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>", true},
    {"meta-llama-Llama-3.2-3B-Instruct", MXL_CHAT_FMT_LLAMA3_JSON, "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>", true},
    {"meta-llama-Llama-3.3-70B-Instruct", MXL_CHAT_FMT_LLAMA3_JSON, "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>", true},
    {"Mistral-Small-3.2-24B-Instruct-2506", MXL_CHAT_FMT_MISTRAL, "[/INST]", NULL, true},
    {"mistralai-Mistral-Nemo-Instruct-2407", MXL_CHAT_FMT_MISTRAL, "[/INST]", NULL, true},
    {"unsloth-mistral-Devstral-Small-2507", MXL_CHAT_FMT_MISTRAL, "[/INST]", NULL, false},
    {"mistralai-Ministral-3-14B-Reasoning-2512", MXL_CHAT_FMT_MISTRAL, "[/INST]", NULL, false},
    {"openai-gpt-oss-120b", MXL_CHAT_FMT_GPT_OSS, "<|start|>assistant", "<|call|>", true},
};

/* Renders whose arguments are not JSON, so only the call names and count are compared. */
static const struct {
    const char *tpl, *conv, *why;
} ARGS_NOT_JSON[] = {
    {"ByteDance-Seed-OSS", "multi_tools", "the template writes a list argument with Python str(): [1, 2.5, None]"},
};

static const char *args_not_json(const char *tpl, const char *conv) {
    for (size_t i = 0; i < sizeof ARGS_NOT_JSON / sizeof ARGS_NOT_JSON[0]; i++)
        if (!strcmp(ARGS_NOT_JSON[i].tpl, tpl) && !strcmp(ARGS_NOT_JSON[i].conv, conv)) return ARGS_NOT_JSON[i].why;
    return NULL;
}

/* Conversations with an assistant tool-call turn. */
static const char *const TOOL_CONVS[] = {"tools_call_roundtrip", "strargs", "multi_tools"};

/* The assistant message with tool_calls and the user text before it. */
static json_t *tool_message(json_t *conv, const char **user_text) {
    json_t *msgs = json_object_get(conv, "messages");
    size_t i;
    json_t *m;
    *user_text = NULL;
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!strcmp(role, "user")) *user_text = json_string_value(json_object_get(m, "content"));
        if (!strcmp(role, "assistant") && json_array_size(json_object_get(m, "tool_calls"))) return m;
    }
    return NULL;
}

/* Parses the tool-call turn of (template, conversation); returns false when there is no render
 * (the template raised for this conversation). */
static bool check_tool_turn(int *mxl_test_failed_, const golden_db *db, size_t ti, const char *conv_id,
                            const char *src) {
    const char *tpl = TOOL_TEMPLATES[ti].tpl;
    json_t *rec = db_record(db, tpl, conv_id);
    if (!rec) fprintf(stderr, "  no golden record %s / %s\n", tpl, conv_id);
    CHECK(rec != NULL);
    const char *out = json_string_value(json_object_get(rec, "output"));
    if (!out) return false;
    json_t *conv = json_object_get(db->convs, conv_id);
    const char *user;
    json_t *msg = tool_message(conv, &user);
    if (!msg || !user) {
        CHECK(!"conversation without a tool-call turn");
        return false;
    }
    /* the turn: after the first assistant header following the user's text, up to the end marker */
    const char *end_marker = TOOL_TEMPLATES[ti].end
                                 ? TOOL_TEMPLATES[ti].end
                                 : json_string_value(json_object_get(json_object_get(conv, "vars"), "eos_token"));
    const char *u = strstr(out, user);
    const char *h = u ? strstr(u + strlen(user), TOOL_TEMPLATES[ti].header) : NULL;
    const char *start = h ? h + strlen(TOOL_TEMPLATES[ti].header) : NULL;
    const char *end = start ? strstr(start, end_marker) : NULL;
    if (!end) fprintf(stderr, "  %s / %s: assistant turn not found\n", tpl, conv_id);
    CHECK(end != NULL);
    if (!end) return true;
    char *turn = strndup_(start, (size_t)(end - start));

    mxl_chat_syntax syn = mxl_chat_syntax_detect(src, NULL);
    syn.id_seed = 42;
    CHECK_EQ_STR(mxl_chat_format_name(syn.fmt), mxl_chat_format_name(TOOL_TEMPLATES[ti].fmt));
    json_t *res = parse_checked(mxl_test_failed_, &syn, turn);
    if (!res) {
        mxl_free(turn);
        return true;
    }

    json_t *want_calls = json_object_get(msg, "tool_calls");
    size_t n_want = json_array_size(want_calls);
    /* gpt-oss's template renders only tool_calls[0] of a message (`message.tool_calls[0]`) */
    if (TOOL_TEMPLATES[ti].fmt == MXL_CHAT_FMT_GPT_OSS) n_want = 1;
    json_t *got_calls = json_object_get(res, "tool_calls");
    bool ok = json_array_size(got_calls) == n_want;
    for (size_t k = 0; ok && k < n_want; k++) {
        json_t *w = json_object_get(json_array_get(want_calls, k), "function");
        json_t *g = json_array_get(got_calls, k);
        json_t *gf = json_object_get(g, "function");
        json_t *wargs = json_object_get(w, "arguments");
        json_t *wparsed = json_is_string(wargs) ? json_loads(json_string_value(wargs), 0, NULL) : json_incref(wargs);
        json_t *gparsed = json_loads(json_string_value(json_object_get(gf, "arguments")), 0, NULL);
        ok &= json_equal(json_object_get(w, "name"), json_object_get(gf, "name"));
        ok &= (wparsed && gparsed && json_equal(wparsed, gparsed)) || args_not_json(tpl, conv_id);
        ok &= !strcmp(json_string_value(json_object_get(g, "type")), "function");
        /* the id is the conversation's where the render carries it, else a generated one */
        const char *wid = json_string_value(json_object_get(json_array_get(want_calls, k), "id"));
        const char *gid = json_string_value(json_object_get(g, "id"));
        if (wid && strstr(turn, wid) && (TOOL_TEMPLATES[ti].fmt == MXL_CHAT_FMT_MISTRAL)) ok &= gid && !strcmp(gid, wid);
        else ok &= is_generated_id(gid);
        json_decref(wparsed);
        json_decref(gparsed);
    }
    /* content: what the message said when the render kept it (gpt-oss puts the content of a
     * tool-calling message in the analysis channel: reasoning) */
    const char *wc = json_string_value(json_object_get(msg, "content"));
    const char *want_content = NULL, *want_reasoning = NULL;
    if (wc && *wc && strstr(turn, wc)) {
        if (TOOL_TEMPLATES[ti].fmt == MXL_CHAT_FMT_GPT_OSS && strstr(turn, "<|channel|>analysis<|message|>"))
            want_reasoning = wc;
        else
            want_content = wc;
    }
    if (want_content) ok &= res_content(res) && !strcmp(res_content(res), want_content);
    else ok &= json_is_null(json_object_get(res, "content"));
    if (want_reasoning) ok &= res_reasoning(res) && !strcmp(res_reasoning(res), want_reasoning);
    else ok &= json_object_get(res, "reasoning_content") == NULL;
    if (!ok) {
        char *d = json_dumps(res, 0);
        fprintf(stderr, "  %s / %s: turn %s\n    parsed %s\n", tpl, conv_id, turn, d);
        mxl_free(d);
    }
    CHECK(ok);
    json_decref(res);
    mxl_free(turn);
    return true;
}

TEST(chat_parse_tool_calls_from_golden_renders) {
    golden_db db;
    bool loaded = db_load(&db);
    if (!loaded) db_free(&db);
    REQUIRE(loaded);
    int turns = 0;
    for (size_t ti = 0; ti < sizeof TOOL_TEMPLATES / sizeof TOOL_TEMPLATES[0]; ti++) {
        char *src = template_src(TOOL_TEMPLATES[ti].tpl);
        CHECK(src != NULL);
        if (!src) continue;
        int rendered = 0;
        for (size_t c = 0; c < sizeof TOOL_CONVS / sizeof TOOL_CONVS[0]; c++)
            rendered += check_tool_turn(mxl_test_failed_, &db, ti, TOOL_CONVS[c], src);
        if (TOOL_TEMPLATES[ti].required && !rendered)
            fprintf(stderr, "  %s: no render with a tool call\n", TOOL_TEMPLATES[ti].tpl);
        CHECK(rendered > 0 || !TOOL_TEMPLATES[ti].required);
        turns += rendered;
        mxl_free(src);
    }
    fprintf(stderr, "  %d tool-call turns parsed\n", turns);
    CHECK(turns >= 35);
    db_free(&db);
}

/* Templates of other tool formats must not be taken for one we parse (their text would be
 * mangled): GLM-style <arg_key>, MiniMax <invoke>, functionary, DeepSeek, Cohere. */
TEST(chat_parse_detect_leaves_other_formats_plain) {
    static const char *const OTHERS[] = {"GLM-4.6", "GLM-4.7-Flash", "MiniMax-M3", "poolside-Laguna-XS.2",
                                         "inclusionai-ling-3.0-flash", "meetkai-functionary-medium-v3.1",
                                         "deepseek-ai-DeepSeek-V3.1", "Cohere2MoE", "tokcfg-llama3", "tokcfg-gemma3"};
    for (size_t i = 0; i < sizeof OTHERS / sizeof OTHERS[0]; i++) {
        char *src = template_src(OTHERS[i]);
        CHECK(src != NULL);
        if (!src) continue;
        mxl_chat_syntax syn = mxl_chat_syntax_detect(src, NULL);
        if (syn.fmt != MXL_CHAT_FMT_PLAIN) fprintf(stderr, "  %s detected as %s\n", OTHERS[i], mxl_chat_format_name(syn.fmt));
        CHECK(syn.fmt == MXL_CHAT_FMT_PLAIN);
        mxl_free(src);
    }
    mxl_chat_syntax none = mxl_chat_syntax_detect(NULL, NULL);
    CHECK(none.fmt == MXL_CHAT_FMT_PLAIN && !none.think_tags);
}

/* ---------------------------------------------------------------- (2) reasoning */

/* think_on: {"content": "a1", "reasoning_content": "rc"} rendered into each template that shows
 * reasoning; the model's text is the render from the open think tag to the answer. */
TEST(chat_parse_reasoning_from_golden_renders) {
    golden_db db;
    bool loaded = db_load(&db);
    if (!loaded) db_free(&db);
    REQUIRE(loaded);
    int covered = 0, from_prompt = 0;
    bool qwen3 = false, nemotron = false, seed = false;
    size_t i;
    json_t *rec;
    json_array_foreach(db.records, i, rec) {
        if (strcmp(json_string_value(json_object_get(rec, "conversation")), "think_on")) continue;
        const char *tpl = json_string_value(json_object_get(rec, "template"));
        const char *out = json_string_value(json_object_get(rec, "output"));
        if (!out) continue;
        char *src = template_src(tpl);
        CHECK(src != NULL);
        if (!src) continue;
        mxl_chat_syntax syn = mxl_chat_syntax_detect(src, NULL);
        const char *q = strstr(out, "q1");
        const char *open = syn.think_tags && q ? strstr(q, syn.think_open) : NULL;
        const char *close = open ? strstr(open, syn.think_close) : NULL;
        const char *a = close ? strstr(close, "a1") : NULL;
        const char *rc = open ? strstr(open, "rc") : NULL;
        /* only templates that render the reasoning (some drop it: Kimi-K2-Thinking, DeepSeek-V3.1) */
        if (!a || !rc || rc > close || syn.fmt == MXL_CHAT_FMT_GPT_OSS) {
            mxl_free(src);
            continue;
        }
        char *turn = strndup_(open, (size_t)(a + 2 - open));
        json_t *res = parse_checked(mxl_test_failed_, &syn, turn);
        bool ok = res && res_reasoning(res) && !strcmp(res_reasoning(res), "rc") && res_content(res) &&
                  !strcmp(res_content(res), "a1") && !res_ncalls(res);
        if (!ok) fprintf(stderr, "  %s: reasoning turn %s not split into rc / a1\n", tpl, turn);
        CHECK(ok);
        covered++;
        qwen3 |= !strcmp(tpl, "Qwen-Qwen3-0.6B");
        nemotron |= !strcmp(tpl, "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16");
        seed |= !strcmp(tpl, "ByteDance-Seed-OSS");
        json_decref(res);

        /* where the generation prompt already opens the think block (the template's own render
         * of single_user_gen), the model writes only the rest of the turn */
        const char *gen = db_output(&db, tpl, "single_user_gen");
        mxl_chat_syntax syn_gen = mxl_chat_syntax_detect(src, gen);
        if (gen && syn_gen.starts_in_reasoning) {
            const char *tail = strstr(gen, syn.think_open), *t2;
            while (tail && (t2 = strstr(tail + 1, syn.think_open))) tail = t2;
            size_t tl = strlen(tail);
            CHECK(strncmp(turn, tail, tl) == 0);
            if (!strncmp(turn, tail, tl)) {
                res = parse_checked(mxl_test_failed_, &syn_gen, turn + tl);
                ok = res && res_reasoning(res) && !strcmp(res_reasoning(res), "rc") && res_content(res) &&
                     !strcmp(res_content(res), "a1");
                if (!ok) fprintf(stderr, "  %s: continuation %s not split into rc / a1\n", tpl, turn + tl);
                CHECK(ok);
                json_decref(res);
                from_prompt++;
            }
        }
        mxl_free(turn);
        mxl_free(src);
    }
    fprintf(stderr, "  %d templates with reasoning, %d starting inside it\n", covered, from_prompt);
    CHECK(qwen3 && nemotron && seed);
    CHECK(covered >= 10);
    CHECK(from_prompt >= 2);
    db_free(&db);
}

/* The prompt decides whether the answer starts inside reasoning: DeepSeek-R1 distills open
 * <think> in the generation prompt; Qwen3 does not, and with enable_thinking=false it closes an
 * empty block. */
TEST(chat_parse_starts_in_reasoning_from_prompt) {
    golden_db db;
    bool loaded = db_load(&db);
    if (!loaded) db_free(&db);
    REQUIRE(loaded);
    static const struct {
        const char *tpl, *conv;
        bool open;
    } CASES[] = {
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "single_user_gen", true},
        {"llama-cpp-deepseek-r1", "single_user_gen", true},
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "single_user_gen", true},
        {"Qwen-Qwen3-0.6B", "single_user_gen", false},
        {"Qwen-Qwen3-0.6B", "think", false},                 /* enable_thinking=false: <think>\n\n</think> */
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "single_user_gen", false}, /* <think>\n</think> */
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "think", false},                /* <think></think> */
    };
    /* what a reasoning model writes after an open <think>: the Qwen3 think_on turn past its tag */
    const char *qwen_on = db_output(&db, "Qwen-Qwen3-0.6B", "think_on");
    const char *cont = qwen_on ? strstr(qwen_on, "<think>") : NULL;
    const char *cont_end = cont ? strstr(cont, "a1") : NULL;
    CHECK(cont_end != NULL);
    for (size_t i = 0; cont_end && i < sizeof CASES / sizeof CASES[0]; i++) {
        char *src = template_src(CASES[i].tpl);
        const char *prompt = db_output(&db, CASES[i].tpl, CASES[i].conv);
        CHECK(src && prompt);
        if (!src || !prompt) {
            mxl_free(src);
            continue;
        }
        mxl_chat_syntax syn = mxl_chat_syntax_detect(src, prompt);
        CHECK(syn.think_tags);
        if (syn.starts_in_reasoning != CASES[i].open) fprintf(stderr, "  %s / %s: starts_in_reasoning wrong\n", CASES[i].tpl, CASES[i].conv);
        CHECK(syn.starts_in_reasoning == CASES[i].open);
        if (syn.starts_in_reasoning) {
            char *text = strndup_(cont + strlen("<think>"), (size_t)(cont_end + 2 - cont - strlen("<think>")));
            json_t *res = parse_checked(mxl_test_failed_, &syn, text);
            CHECK(res && res_reasoning(res) && !strcmp(res_reasoning(res), "rc"));
            CHECK(res && res_content(res) && !strcmp(res_content(res), "a1"));
            json_decref(res);
            /* a model that repeats the open tag is understood too */
            char *again = mxl_malloc(strlen(text) + 16);
            sprintf(again, "<think>%s", text);
            res = parse_checked(mxl_test_failed_, &syn, again);
            CHECK(res && res_reasoning(res) && !strcmp(res_reasoning(res), "rc"));
            json_decref(res);
            mxl_free(again);
            /* cut off while thinking: all of it is reasoning */
            res = parse_checked(mxl_test_failed_, &syn, "still thinking about it");
            CHECK(res && res_reasoning(res) && !strcmp(res_reasoning(res), "still thinking about it"));
            CHECK(res && res_content(res) && !strcmp(res_content(res), ""));
            json_decref(res);
            mxl_free(text);
        }
        mxl_free(src);
    }
    db_free(&db);
}

/* gpt-oss: an analysis message (multi_tools renders "sure" there) followed by a final message
 * (think_on renders "a1" there), both cut from Python renders. */
TEST(chat_parse_harmony_analysis_and_final) {
    golden_db db;
    bool loaded = db_load(&db);
    if (!loaded) db_free(&db);
    REQUIRE(loaded);
    const char *multi = db_output(&db, "openai-gpt-oss-120b", "multi_tools");
    const char *on = db_output(&db, "openai-gpt-oss-120b", "think_on");
    char *src = template_src("openai-gpt-oss-120b");
    const char *an = multi ? strstr(multi, "<|channel|>analysis<|message|>") : NULL;
    const char *an_end = an ? strstr(an, "<|end|>") : NULL;
    const char *fin = on ? strstr(on, "<|start|>assistant<|channel|>final<|message|>") : NULL;
    const char *fin_end = fin ? strstr(fin, "<|return|>") : NULL;
    CHECK(src && an_end && fin_end);
    if (src && an_end && fin_end) {
        size_t l1 = (size_t)(an_end + strlen("<|end|>") - an), l2 = (size_t)(fin_end - fin);
        char *text = mxl_malloc(l1 + l2 + 16);
        memcpy(text, an, l1);
        memcpy(text + l1, fin, l2);
        text[l1 + l2] = 0;
        mxl_chat_syntax syn = mxl_chat_syntax_detect(src, NULL);
        CHECK(syn.fmt == MXL_CHAT_FMT_GPT_OSS);
        json_t *res = parse_checked(mxl_test_failed_, &syn, text);
        CHECK(res && res_reasoning(res) && !strcmp(res_reasoning(res), "sure"));
        CHECK(res && res_content(res) && !strcmp(res_content(res), "a1"));
        CHECK(res && !res_ncalls(res));
        json_decref(res);
        /* with the end-of-answer marker kept, and a commentary preamble (content) */
        strcpy(text + l1 + l2, "<|return|>");
        res = parse_checked(mxl_test_failed_, &syn, text);
        CHECK(res && res_content(res) && !strcmp(res_content(res), "a1"));
        json_decref(res);
        mxl_free(text);
        /* the constrain form of a call, after analysis */
        res = parse_checked(mxl_test_failed_, &syn,
                            "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
                            "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Seoul\"}<|call|>");
        CHECK(res && res_ncalls(res) == 1 && res_reasoning(res) && !strcmp(res_reasoning(res), "Need weather."));
        if (res && res_ncalls(res) == 1) {
            json_t *f = json_object_get(json_array_get(json_object_get(res, "tool_calls"), 0), "function");
            CHECK_EQ_STR(json_string_value(json_object_get(f, "name")), "get_weather");
            CHECK_EQ_STR(json_string_value(json_object_get(f, "arguments")), "{\"city\":\"Seoul\"}");
        }
        json_decref(res);
        /* a header without <|message|> in its window (1024 bytes) is content, and only the window
         * is: a message after it is read, whole or streamed (found by fuzz_chat_parse: the whole
         * parse took the rest of the text as content) */
        char *lng = mxl_malloc(1200 + 128);
        size_t k = (size_t)sprintf(lng, "<|channel|>");
        memset(lng + k, 'x', 1100);
        strcpy(lng + k + 1100, "<|end|><|start|>assistant<|channel|>analysis<|message|>late<|end|>");
        res = parse_checked(mxl_test_failed_, &syn, lng);
        CHECK(res && res_reasoning(res) && !strcmp(res_reasoning(res), "late"));
        CHECK(res && res_content(res) && strlen(res_content(res)) == k + 1100 && !strncmp(res_content(res), lng, k + 1100));
        json_decref(res);
        mxl_free(lng);
    }
    mxl_free(src);
    db_free(&db);
}

/* ---------------------------------------------------------------- (3) malformed calls */

static mxl_chat_syntax syntax_of(const char *tpl) {
    char *src = template_src(tpl);
    mxl_chat_syntax syn = mxl_chat_syntax_detect(src, NULL);
    mxl_free(src);
    return syn;
}

static void expect_content_only(int *mxl_test_failed_, const mxl_chat_syntax *syn, const char *text, const char *want) {
    json_t *res = parse_checked(mxl_test_failed_, syn, text);
    bool ok = res && !res_ncalls(res) && res_content(res) && !strcmp(res_content(res), want);
    if (!ok) {
        char *d = res ? json_dumps(res, 0) : NULL;
        fprintf(stderr, "  %s: expected content only, got %s\n", text, d ? d : "(null)");
        mxl_free(d);
    }
    CHECK(ok);
    json_decref(res);
}

TEST(chat_parse_malformed_calls_fall_back_to_content) {
    mxl_chat_syntax hermes = syntax_of("Qwen-Qwen2.5-7B-Instruct");
    mxl_chat_syntax xml = syntax_of("Qwen3-Coder");
    mxl_chat_syntax llama = syntax_of("meta-llama-Llama-3.1-8B-Instruct");
    mxl_chat_syntax mistral = syntax_of("Mistral-Small-3.2-24B-Instruct-2506");
    mxl_chat_syntax nemo = syntax_of("mistralai-Mistral-Nemo-Instruct-2407");
    mxl_chat_syntax oss = syntax_of("openai-gpt-oss-120b");
    REQUIRE(hermes.fmt == MXL_CHAT_FMT_HERMES && xml.fmt == MXL_CHAT_FMT_QWEN3_XML &&
            llama.fmt == MXL_CHAT_FMT_LLAMA3_JSON && mistral.fmt == MXL_CHAT_FMT_MISTRAL &&
            nemo.fmt == MXL_CHAT_FMT_MISTRAL && oss.fmt == MXL_CHAT_FMT_GPT_OSS);

    expect_content_only(mxl_test_failed_, &hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>",
                        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>");
    expect_content_only(mxl_test_failed_, &hermes, "Sure.\n<tool_call>\n{\"arguments\": {}}\n</tool_call>",
                        "Sure.\n<tool_call>\n{\"arguments\": {}}\n</tool_call>");
    expect_content_only(mxl_test_failed_, &hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}",
                        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}");
    expect_content_only(mxl_test_failed_, &xml, "<tool_call>\nnot xml at all\n</tool_call>", "<tool_call>\nnot xml at all\n</tool_call>");
    expect_content_only(mxl_test_failed_, &xml, "<tool_call>\n<function=f>\n<oops>\n</function>\n</tool_call>",
                        "<tool_call>\n<function=f>\n<oops>\n</function>\n</tool_call>");
    /* a control character in a name (found by fuzz_chat_parse: a NUL in a parameter name gave
     * arguments with a \u0000 key, which jansson cannot load) */
    {
        static const char nul_name[] = "<tool_call>\n<function=f>\n<parameter=n\0x>\n5\n</parameter>\n</function>\n</tool_call>";
        json_t *r = parse_checked_n(mxl_test_failed_, &xml, nul_name, sizeof nul_name - 1);
        CHECK(r && res_ncalls(r) == 0 && res_content(r) && json_string_length(json_object_get(r, "content")) == sizeof nul_name - 1);
        json_decref(r);
    }
    expect_content_only(mxl_test_failed_, &xml, "<tool_call>\n<function=f\tg>\n</function>\n</tool_call>",
                        "<tool_call>\n<function=f\tg>\n</function>\n</tool_call>");
    expect_content_only(mxl_test_failed_, &llama, "{\"name\": \"get_weather\"}", "{\"name\": \"get_weather\"}");
    expect_content_only(mxl_test_failed_, &llama, "{not json", "{not json");
    expect_content_only(mxl_test_failed_, &llama, "{\"answer\": 42}", "{\"answer\": 42}");
    expect_content_only(mxl_test_failed_, &mistral, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Seo",
                        "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Seo");
    expect_content_only(mxl_test_failed_, &mistral, "[TOOL_CALLS]get weather[ARGS]{}", "[TOOL_CALLS]get weather[ARGS]{}");
    expect_content_only(mxl_test_failed_, &mistral, "[TOOL_CALLS]get_weather[ARGS]42", "[TOOL_CALLS]get_weather[ARGS]42");
    expect_content_only(mxl_test_failed_, &nemo, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, 3]",
                        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, 3]");
    /* arguments given as a string must hold an object's JSON text (found by fuzz_chat_parse:
     * the string's text was handed on as the arguments, JSON or not) */
    expect_content_only(mxl_test_failed_, &mistral, "[TOOL_CALLS]f[CALL_ID]abcdefghi[ARGS]\" \\\":a\"",
                        "[TOOL_CALLS]f[CALL_ID]abcdefghi[ARGS]\" \\\":a\"");
    expect_content_only(mxl_test_failed_, &hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"a=1\"}\n</tool_call>",
                        "<tool_call>\n{\"name\": \"f\", \"arguments\": \"a=1\"}\n</tool_call>");
    expect_content_only(mxl_test_failed_, &nemo, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": \"[1]\"}]",
                        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": \"[1]\"}]");
    /* (content is trimmed: the leading space goes) */
    expect_content_only(mxl_test_failed_, &oss, " to=functions.get_weather<|channel|>commentary json<|message|>{bad<|call|>",
                        "to=functions.get_weather<|channel|>commentary json<|message|>{bad<|call|>");

    /* a bad block does not stop a good one after it */
    json_t *res = parse_checked(mxl_test_failed_, &hermes,
                                "Hi\n<tool_call>\n{bad}\n</tool_call>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 0.1}}\n</tool_call>");
    CHECK(res && res_ncalls(res) == 1);
    CHECK(res && res_content(res) && !strcmp(res_content(res), "Hi\n<tool_call>\n{bad}\n</tool_call>"));
    if (res && res_ncalls(res) == 1) {
        json_t *f = json_object_get(json_array_get(json_object_get(res, "tool_calls"), 0), "function");
        /* arguments as the model wrote them (no float reformatting) */
        CHECK_EQ_STR(json_string_value(json_object_get(f, "arguments")), "{\"a\": 0.1}");
    }
    json_decref(res);
    /* an unclosed but complete block at the end of the stream is a call */
    res = parse_checked(mxl_test_failed_, &hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n");
    CHECK(res && res_ncalls(res) == 1 && json_is_null(json_object_get(res, "content")));
    json_decref(res);
    /* a string holding an object's text is the arguments */
    res = parse_checked(mxl_test_failed_, &mistral, "[TOOL_CALLS]f[ARGS]\"{\\\"a\\\": 1}\"");
    CHECK(res && res_ncalls(res) == 1);
    if (res && res_ncalls(res) == 1) {
        json_t *f = json_object_get(json_array_get(json_object_get(res, "tool_calls"), 0), "function");
        CHECK_EQ_STR(json_string_value(json_object_get(f, "arguments")), "{\"a\": 1}");
    }
    json_decref(res);
    /* a [TOOL_CALLS] that fails is content and later text is still scanned */
    res = parse_checked(mxl_test_failed_, &mistral, "[TOOL_CALLS]x y[TOOL_CALLS]f[ARGS]{\"a\": [1, \"]\"]}");
    CHECK(res && res_ncalls(res) == 1 && res_content(res) && !strcmp(res_content(res), "[TOOL_CALLS]x y"));
    json_decref(res);
}

/* ---------------------------------------------------------------- streaming and details */

TEST(chat_parse_stream_holds_back_markers) {
    mxl_chat_syntax syn = syntax_of("Qwen-Qwen3-0.6B");
    REQUIRE(syn.fmt == MXL_CHAT_FMT_HERMES && syn.think_tags);
    mxl_chat_stream *s = NULL;
    REQUIRE(mxl_chat_stream_create(&syn, &s, NULL) == MXL_OK);
    json_t *d = json_array();
    /* a possible "<think>" at the start is held */
    CHECK(mxl_chat_stream_feed(s, "<th", 3, false, d, NULL) == MXL_OK);
    CHECK_EQ_INT(json_array_size(d), 0);
    CHECK(mxl_chat_stream_feed(s, "ink>\nplan", 9, false, d, NULL) == MXL_OK);
    CHECK_EQ_INT(json_array_size(d), 1);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(d, 0), "reasoning_content")), "plan");
    json_array_clear(d);
    CHECK(mxl_chat_stream_feed(s, "\n</think>\n\nHello <tool", 22, false, d, NULL) == MXL_OK);
    CHECK_EQ_INT(json_array_size(d), 1);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(d, 0), "content")), "Hello");
    json_array_clear(d);
    /* the call goes out whole when its end is seen, not before */
    const char *body = "_call>\n{\"name\": \"f\", \"arguments\": {\"x\": \"</tool\"}}\n";
    CHECK(mxl_chat_stream_feed(s, body, strlen(body), false, d, NULL) == MXL_OK);
    CHECK_EQ_INT(json_array_size(d), 0);
    CHECK(mxl_chat_stream_feed(s, "</tool_call>", 12, false, d, NULL) == MXL_OK);
    CHECK_EQ_INT(json_array_size(d), 1);
    json_t *tc = json_array_get(json_object_get(json_array_get(d, 0), "tool_calls"), 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(tc, "index")), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(tc, "function"), "arguments")), "{\"x\": \"</tool\"}");
    CHECK_EQ_INT(mxl_chat_stream_tool_call_count(s), 1);
    CHECK(mxl_chat_stream_feed(s, "", 0, true, d, NULL) == MXL_OK);
    CHECK(mxl_chat_stream_feed(s, "x", 1, false, d, NULL) == MXL_ERR_ARG); /* after final */
    mxl_chat_stream_destroy(s);
    json_decref(d);
}

TEST(chat_parse_ids_and_schema_types) {
    mxl_chat_syntax syn = syntax_of("Qwen3-Coder");
    REQUIRE(syn.fmt == MXL_CHAT_FMT_QWEN3_XML);
    const char *text = "<tool_call>\n<function=lookup>\n<parameter=zip>\n01234\n</parameter>\n<parameter=n>\n5\n"
                       "</parameter>\n<parameter=note>\nline one\nline two\n</parameter>\n</function>\n</tool_call>";
    json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"lookup\", \"parameters\": {\"type\": "
                               "\"object\", \"properties\": {\"zip\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\"}}}}}]",
                               0, NULL);
    REQUIRE(tools != NULL);
    syn.tools = tools;
    syn.id_seed = 7;
    json_t *a = parse_checked(mxl_test_failed_, &syn, text);
    json_t *b = parse_checked(mxl_test_failed_, &syn, text);
    syn.id_seed = 8;
    json_t *c = parse_checked(mxl_test_failed_, &syn, text);
    REQUIRE(a && b && c && res_ncalls(a) == 1 && res_ncalls(c) == 1);
    json_t *ca = json_array_get(json_object_get(a, "tool_calls"), 0), *cc = json_array_get(json_object_get(c, "tool_calls"), 0);
    const char *ida = json_string_value(json_object_get(ca, "id"));
    CHECK(is_generated_id(ida));
    CHECK(json_equal(a, b));                                                      /* same seed, same ids */
    CHECK(strcmp(ida, json_string_value(json_object_get(cc, "id"))) != 0);        /* another seed, another id */
    json_t *args = json_loads(json_string_value(json_object_get(json_object_get(ca, "function"), "arguments")), 0, NULL);
    json_t *want = json_loads("{\"zip\": \"01234\", \"n\": 5, \"note\": \"line one\\nline two\"}", 0, NULL);
    CHECK(args && json_equal(args, want));
    json_decref(args);
    json_decref(want);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(tools);
}

TEST(chat_parse_llama_variants_and_utf8) {
    mxl_chat_syntax llama = syntax_of("meta-llama-Llama-3.2-3B-Instruct");
    REQUIRE(llama.fmt == MXL_CHAT_FMT_LLAMA3_JSON);
    json_t *res = parse_checked(mxl_test_failed_, &llama,
                                "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"arguments\": {}}<|eom_id|>");
    CHECK(res && res_ncalls(res) == 2);
    json_decref(res);
    res = parse_checked(mxl_test_failed_, &llama, "Checking.<|python_tag|>{\"name\": \"a\", \"parameters\": {}}");
    CHECK(res && res_ncalls(res) == 1 && res_content(res) && !strcmp(res_content(res), "Checking."));
    json_decref(res);
    /* a request without tools: the same text is an answer */
    mxl_chat_syntax no_tools = llama;
    mxl_chat_syntax_without_tools(&no_tools);
    CHECK(no_tools.fmt == MXL_CHAT_FMT_PLAIN);
    expect_content_only(mxl_test_failed_, &no_tools, "{\"name\": \"a\", \"parameters\": {}}", "{\"name\": \"a\", \"parameters\": {}}");
    mxl_chat_syntax oss = syntax_of("openai-gpt-oss-120b");
    mxl_chat_syntax_without_tools(&oss);
    CHECK(oss.fmt == MXL_CHAT_FMT_GPT_OSS);

    /* plain text passes through unchanged, whitespace included; bad UTF-8 becomes U+FFFD, and
     * a character cut between pieces is joined again (parse_checked splits inside it) */
    mxl_chat_syntax plain = mxl_chat_syntax_detect(NULL, NULL);
    res = parse_checked(mxl_test_failed_, &plain, "  caf\xC3\xA9 \xF0\x9F\x91\x8B \xFF\xE2\x82 end  ");
    CHECK(res && res_content(res) && !strcmp(res_content(res), "  caf\xC3\xA9 \xF0\x9F\x91\x8B \xEF\xBF\xBD\xEF\xBF\xBD end  "));
    json_decref(res);
    mxl_chat_syntax qwen = syntax_of("Qwen-Qwen3-0.6B");
    res = parse_checked(mxl_test_failed_, &qwen, "<think>\xE2\x82</think>\xC3");
    CHECK(res && res_reasoning(res) && !strcmp(res_reasoning(res), "\xEF\xBF\xBD"));
    CHECK(res && res_content(res) && !strcmp(res_content(res), "\xEF\xBF\xBD"));
    json_decref(res);
}

/* Ministral 3 Reasoning thinks in [THINK]...[/THINK]; its template's default system message
 * shows the shape of an answer, which is parsed here as the model would write it. */
TEST(chat_parse_mistral_think_blocks) {
    char *src = template_src("mistralai-Ministral-3-14B-Reasoning-2512");
    REQUIRE(src != NULL);
    mxl_chat_syntax syn = mxl_chat_syntax_detect(src, NULL);
    CHECK(syn.fmt == MXL_CHAT_FMT_MISTRAL && syn.think_tags);
    CHECK_EQ_STR(syn.think_open, "[THINK]");
    const char *open = strstr(src, "[THINK]");
    const char *close = open ? strstr(open, "[/THINK]") : NULL;
    const char *end = close ? strstr(close, "' %}") : NULL;
    CHECK(end != NULL);
    if (end) {
        char *text = strndup_(open, (size_t)(end - open));
        char *want_r = strndup_(open + 7, (size_t)(close - open - 7));
        json_t *res = parse_checked(mxl_test_failed_, &syn, text);
        CHECK(res && res_reasoning(res) && !strcmp(res_reasoning(res), want_r));
        CHECK(res && res_content(res) && !strcmp(res_content(res), "Here, provide a self-contained response."));
        json_decref(res);
        mxl_free(text);
        mxl_free(want_r);
    }
    json_t *res = parse_checked(mxl_test_failed_, &syn, "[THINK]Need the weather.[/THINK]Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Seoul\"}");
    CHECK(res && res_ncalls(res) == 1 && res_reasoning(res) && !strcmp(res_reasoning(res), "Need the weather."));
    CHECK(res && res_content(res) && !strcmp(res_content(res), "Checking."));
    json_decref(res);
    mxl_free(src);
}
