/* test_template_features.c - unit tests of the Jinja engine feature by feature: the generated case
 * table (expected outputs from Python Jinja2, see tests/fixtures/templates/gen_template_cases.py), the render budget,
 * syntax-error positions, the chat render API and template discovery. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "template/template.h"
#include "test.h"
#include "test_template_cases.h"

/* Python exceptions whose message we reproduce word for word. */
static bool message_must_match(const char *py_error) {
    return !strncmp(py_error, "TemplateError: ", 15) || !strncmp(py_error, "UndefinedError: ", 16) ||
           !strncmp(py_error, "SecurityError: ", 15) || !strncmp(py_error, "TypeError: ", 11);
}

static mxl_status render_src(const char *src, const json_t *vars, const mxl_template_render_opts *opts, char **out,
                             mxl_template_error_kind *kind, mxl_error *err) {
    mxl_template *t = NULL;
    *out = NULL;
    mxl_status st = mxl_template_parse(src, strlen(src), "case", &t, err);
    if (st != MXL_OK) {
        if (kind) *kind = MXL_TEMPLATE_SYNTAX;
        return st;
    }
    st = mxl_template_render(t, vars, opts, out, NULL, kind, err);
    mxl_template_destroy(t);
    return st;
}

TEST(template_cases_match_jinja2) {
    json_t *vars = json_loads(TPL_CASE_VARS, 0, NULL);
    REQUIRE(vars != NULL);
    mxl_template_render_opts opts = {0};
    opts.now_set = mxl_template_parse_time("2026-01-15T12:34:56", &opts.now_unix);
    int n = 0, bad = 0;
    for (const tpl_case *c = TPL_CASES; c->name; c++) {
        n++;
        char *out = NULL;
        mxl_error err = {0};
        mxl_template_error_kind kind;
        mxl_status st = render_src(c->source, vars, &opts, &out, &kind, &err);
        if (c->output) {
            if (st != MXL_OK || strcmp(out, c->output) != 0) {
                bad++;
                fprintf(stderr, "  case %s:\n    want: %s\n    got:  %s\n", c->name, c->output,
                        st == MXL_OK ? out : err.msg);
            }
        } else if (st == MXL_OK) {
            bad++;
            fprintf(stderr, "  case %s: Python raised %s but we rendered: %s\n", c->name, c->error, out);
        } else if (message_must_match(c->error)) {
            size_t el = strlen(err.msg), pl = strlen(c->error);
            if (el < pl || strcmp(err.msg + el - pl, c->error) != 0) {
                bad++;
                fprintf(stderr, "  case %s: want error ...%s\n    got %s\n", c->name, c->error, err.msg);
            }
        }
        mxl_free(out);
    }
    json_decref(vars);
    CHECK(n >= 70);
    CHECK_EQ_INT(bad, 0);
}

/* ---------------------------------------------------------------- budget */

static void expect_budget(int *mxl_test_failed_, const char *src, const char *what) {
    char *out = NULL;
    mxl_error err = {0};
    mxl_template_error_kind kind = MXL_TEMPLATE_OK;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    mxl_status st = render_src(src, NULL, NULL, &out, &kind, &err);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    CHECK(st != MXL_OK);
    CHECK_EQ_INT(kind, MXL_TEMPLATE_BUDGET);
    if (st == MXL_OK || kind != MXL_TEMPLATE_BUDGET) fprintf(stderr, "  %s: %s\n", what, st == MXL_OK ? "rendered" : err.msg);
    CHECK(strstr(err.msg, "BudgetExceeded") != NULL);
    CHECK(secs < 5.0);
    mxl_free(out);
}

TEST(template_budget_stops_runaway_templates) {
    expect_budget(mxl_test_failed_,
                  "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "nested loops");
    expect_budget(mxl_test_failed_, "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", "infinite recursion");
    expect_budget(mxl_test_failed_,
                  "{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                  "string doubling");
    expect_budget(mxl_test_failed_, "{{ 'x' * 1000000000 }}", "string repetition");
    expect_budget(mxl_test_failed_, "{% for i in range(99999) %}{{ range(99999) | list | length }}{% endfor %}",
                  "huge work");
}

TEST(template_budget_limits_are_configurable) {
    mxl_template_render_opts opts = {0};
    opts.limits.max_output = 10;
    char *out = NULL;
    mxl_error err = {0};
    mxl_template_error_kind kind;
    CHECK(render_src("{{ 'abcdefghijk' }}", NULL, &opts, &out, &kind, &err) != MXL_OK);
    CHECK_EQ_INT(kind, MXL_TEMPLATE_BUDGET);
    mxl_free(out);
    out = NULL;
    CHECK(render_src("{{ 'abcdefghi' }}", NULL, &opts, &out, &kind, &err) == MXL_OK);
    CHECK_EQ_STR(out, "abcdefghi");
    mxl_free(out);
    opts = (mxl_template_render_opts){0};
    opts.limits.max_steps = 50;
    out = NULL;
    CHECK(render_src("{% for i in range(100) %}{{ i }}{% endfor %}", NULL, &opts, &out, &kind, &err) != MXL_OK);
    CHECK_EQ_INT(kind, MXL_TEMPLATE_BUDGET);
    mxl_free(out);
}

/* ---------------------------------------------------------------- syntax errors */

static void expect_syntax(int *mxl_test_failed_, const char *src, const char *where, const char *needle) {
    mxl_template *t = NULL;
    mxl_error err = {0};
    mxl_status st = mxl_template_parse(src, strlen(src), "t.jinja", &t, &err);
    CHECK(st == MXL_ERR_FORMAT);
    CHECK(t == NULL);
    if (!strstr(err.msg, where) || !strstr(err.msg, needle))
        fprintf(stderr, "  syntax error for %s: want '%s' and '%s' in: %s\n", src, where, needle, err.msg);
    CHECK(strstr(err.msg, where) != NULL);
    CHECK(strstr(err.msg, needle) != NULL);
    mxl_template_destroy(t);
}

TEST(template_syntax_errors_have_line_col_and_expectation) {
    expect_syntax(mxl_test_failed_, "ok\n{% if x %}\n{{ 1 + }}", "t.jinja:3:8:", "expected an expression");
    expect_syntax(mxl_test_failed_, "{% if x %}\nno end", "t.jinja:2:7:", "'endif'");
    expect_syntax(mxl_test_failed_, "{% for x in y %}{% endif %}", ":1:", "unexpected 'endif'");
    expect_syntax(mxl_test_failed_, "{{ x ", ":1:1:", "end of print statement");
    expect_syntax(mxl_test_failed_, "\n\n   {% frob %}", "t.jinja:3:7:", "unknown tag 'frob'");
    expect_syntax(mxl_test_failed_, "{{ (1, 2 }}", ":1:", "expected ')'");
    expect_syntax(mxl_test_failed_, "{% break %}", ":1:", "outside of a loop");
    expect_syntax(mxl_test_failed_, "{{ 'abc }}", ":1:4:", "string");
    expect_syntax(mxl_test_failed_, "{# open comment", ":1:1:", "comment");
    expect_syntax(mxl_test_failed_, "{% set x = 1 %}{{ x is }}", ":1:", "expected a name");
    /* 8 hex digits past U+10FFFF (Python: "illegal Unicode character"); 0x88888888 once overflowed
     * a signed accumulator (the fuzzer, under UBSan) */
    expect_syntax(mxl_test_failed_, "{{ '\\U88888888' }}", ":1:", "beyond U+10FFFF");
    expect_syntax(mxl_test_failed_, "{{ '\\U00110000' }}", ":1:", "beyond U+10FFFF");
    expect_syntax(mxl_test_failed_, "{{ '\\U0001F6' }}", ":1:", "truncated");
}

/* ---------------------------------------------------------------- render API */

TEST(template_render_errors_name_kind_and_line) {
    char *out = NULL;
    mxl_error err = {0};
    mxl_template_error_kind kind;
    CHECK(render_src("line1\n{{ raise_exception('boom') }}", NULL, NULL, &out, &kind, &err) != MXL_OK);
    CHECK_EQ_INT(kind, MXL_TEMPLATE_RAISED);
    CHECK_EQ_STR(err.msg, "case:2: TemplateError: boom");
    CHECK(render_src("{{ a.b.c }}", NULL, NULL, &out, &kind, &err) != MXL_OK);
    CHECK_EQ_INT(kind, MXL_TEMPLATE_UNDEFINED);
    CHECK_EQ_STR(err.msg, "case:1: UndefinedError: 'a' is undefined");
    CHECK(render_src("{% set l = [1] %}{{ l.pop() }}", NULL, NULL, &out, &kind, &err) != MXL_OK);
    CHECK_EQ_INT(kind, MXL_TEMPLATE_SECURITY);
}

TEST(template_strftime_now_pinned_clock) {
    mxl_template_render_opts opts = {0};
    REQUIRE(mxl_template_parse_time("2024-02-29T23:59:58", &opts.now_unix));
    opts.now_set = true;
    char *out = NULL;
    mxl_error err = {0};
    REQUIRE(render_src("{{ strftime_now('%Y-%m-%d %H:%M:%S %a') }}", NULL, &opts, &out, NULL, &err) == MXL_OK);
    CHECK_EQ_STR(out, "2024-02-29 23:59:58 Thu");
    mxl_free(out);
    int64_t t;
    CHECK(mxl_template_parse_time("1970-01-01T00:00:00", &t) && t == 0);
    CHECK(mxl_template_parse_time("2026-01-15", &t) && t == 1768435200);
    CHECK(!mxl_template_parse_time("2026-13-01T00:00:00", &t));
    CHECK(!mxl_template_parse_time("yesterday", &t));
}

TEST(template_chat_render_api) {
    const char *src =
        "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{% if m.content is string %}{{ m.content }}"
        "{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}]{% endfor %}"
        "{% if tools is defined %}T{{ tools | length }}{% endif %}{% if documents is defined %}D{{ documents[0].title }}{% endif %}"
        "{% if add_generation_prompt %}<gen>{% endif %}{{ eos_token }}{{ enable_thinking }}{{ pad_token }}{{ unk_token }}";
    mxl_template *t = NULL;
    mxl_error err = {0};
    REQUIRE(mxl_template_parse(src, strlen(src), "chat", &t, &err) == MXL_OK);
    json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"hi\"},"
                              "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}]",
                              0, NULL);
    json_t *tools = json_loads("[{\"type\":\"function\"},{\"type\":\"function\"}]", 0, NULL);
    json_t *docs = json_loads("[{\"title\":\"T1\",\"text\":\"x\"}]", 0, NULL);
    json_t *extra = json_loads("{\"enable_thinking\": false, \"eos_token\": \"<E2>\"}", 0, NULL);
    REQUIRE(msgs && tools && docs && extra);
    mxl_chat_render_params p = {0};
    p.messages = msgs;
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    char *out = NULL;
    CHECK(mxl_chat_template_render(t, &p, &out, NULL, NULL, &err) == MXL_OK);
    CHECK_EQ_STR(out, "<s>[user:hi][user:ab]</s>");
    mxl_free(out);
    p.tools = tools;
    p.documents = docs;
    p.add_generation_prompt = true;
    p.extra = extra; /* extra kwargs override the special tokens, as **kwargs do in transformers */
    p.pad_token = "<pad>";
    p.unk_token = "<unk>";
    out = NULL;
    CHECK(mxl_chat_template_render(t, &p, &out, NULL, NULL, &err) == MXL_OK);
    CHECK_EQ_STR(out, "<s>[user:hi][user:ab]T2DT1<gen><E2>False<pad><unk>");
    mxl_free(out);
    json_decref(msgs);
    json_decref(tools);
    json_decref(docs);
    json_decref(extra);
    mxl_template_destroy(t);
}

/* ---------------------------------------------------------------- discovery */

static void write_file(const char *dir, const char *name, const void *data, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

static void remove_file(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
}

/* minimal GGUF v3: no tensors, string KVs */
static size_t make_gguf(uint8_t *buf, const char *const *kv, int n_kv) {
    size_t o = 0;
    memcpy(buf, "GGUF", 4);
    o = 4;
    uint32_t ver = 3;
    memcpy(buf + o, &ver, 4);
    o += 4;
    uint64_t nt = 0, nk = (uint64_t)n_kv;
    memcpy(buf + o, &nt, 8);
    o += 8;
    memcpy(buf + o, &nk, 8);
    o += 8;
    for (int i = 0; i < n_kv; i++) {
        uint64_t kl = strlen(kv[2 * i]), vl = strlen(kv[2 * i + 1]);
        uint32_t type = 8;
        memcpy(buf + o, &kl, 8);
        o += 8;
        memcpy(buf + o, kv[2 * i], kl);
        o += kl;
        memcpy(buf + o, &type, 4);
        o += 4;
        memcpy(buf + o, &vl, 8);
        o += 8;
        memcpy(buf + o, kv[2 * i + 1], vl);
        o += vl;
    }
    return o;
}

TEST(template_discovery_sources) {
    char dir[] = "/tmp/mxl_tpl_discover_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    mxl_chat_template_source s;
    mxl_error err = {0};

    /* nothing: generic fallback */
    CHECK(mxl_chat_template_find(dir, NULL, &s, &err) == MXL_OK);
    CHECK(s.generic);
    CHECK(s.text && strstr(s.text, "im_start") != NULL);
    mxl_chat_template_source_free(&s);

    /* GGUF metadata */
    uint8_t g[1024];
    const char *kvs[] = {"tokenizer.chat_template", "GGUF {{ x }}", "tokenizer.chat_template.tool_use", "GGUF tools"};
    size_t gn = make_gguf(g, kvs, 2);
    write_file(dir, "model.gguf", g, gn);
    CHECK(mxl_chat_template_find(dir, NULL, &s, &err) == MXL_OK);
    CHECK(!s.generic);
    CHECK_EQ_STR(s.text, "GGUF {{ x }}");
    mxl_chat_template_source_free(&s);
    CHECK(mxl_chat_template_find(dir, "tool_use", &s, &err) == MXL_OK);
    CHECK_EQ_STR(s.text, "GGUF tools");
    mxl_chat_template_source_free(&s);

    /* tokenizer_config.json string beats GGUF */
    const char *tc = "{\"bos_token\": \"<s>\", \"chat_template\": \"TC {{ messages }}\"}";
    write_file(dir, "tokenizer_config.json", tc, strlen(tc));
    CHECK(mxl_chat_template_find(dir, NULL, &s, &err) == MXL_OK);
    CHECK_EQ_STR(s.text, "TC {{ messages }}");
    mxl_chat_template_source_free(&s);

    /* named list */
    const char *tl = "{\"chat_template\": [{\"name\": \"default\", \"template\": \"D\"}, {\"name\": \"tool_use\", \"template\": \"TU\"}]}";
    write_file(dir, "tokenizer_config.json", tl, strlen(tl));
    CHECK(mxl_chat_template_find(dir, NULL, &s, &err) == MXL_OK);
    CHECK_EQ_STR(s.text, "D");
    mxl_chat_template_source_free(&s);
    CHECK(mxl_chat_template_find(dir, "tool_use", &s, &err) == MXL_OK);
    CHECK_EQ_STR(s.text, "TU");
    mxl_chat_template_source_free(&s);
    CHECK(mxl_chat_template_find(dir, "rag", &s, &err) == MXL_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "default, tool_use") != NULL);

    /* chat_template.json beats tokenizer_config.json */
    const char *cj = "{\"chat_template\": \"CJ\"}";
    write_file(dir, "chat_template.json", cj, strlen(cj));
    CHECK(mxl_chat_template_find(dir, NULL, &s, &err) == MXL_OK);
    CHECK_EQ_STR(s.text, "CJ");
    mxl_chat_template_source_free(&s);

    /* chat_template.jinja beats everything */
    write_file(dir, "chat_template.jinja", "JINJA\n", 6);
    CHECK(mxl_chat_template_find(dir, NULL, &s, &err) == MXL_OK);
    CHECK_EQ_STR(s.text, "JINJA\n");
    mxl_chat_template_source_free(&s);

    /* explicit files */
    char p[512];
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    CHECK(mxl_chat_template_find(p, "tool_use", &s, &err) == MXL_OK);
    CHECK_EQ_STR(s.text, "TU");
    mxl_chat_template_source_free(&s);
    snprintf(p, sizeof p, "%s/model.gguf", dir);
    CHECK(mxl_chat_template_find(p, NULL, &s, &err) == MXL_OK);
    CHECK_EQ_STR(s.text, "GGUF {{ x }}");
    mxl_chat_template_source_free(&s);

    /* malformed config */
    write_file(dir, "bad.json", "{\"chat_template\": 5}", 20);
    snprintf(p, sizeof p, "%s/bad.json", dir);
    CHECK(mxl_chat_template_find(p, NULL, &s, &err) == MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "bad.json") != NULL);
    CHECK(mxl_chat_template_find("/nonexistent/path/x", NULL, &s, &err) == MXL_ERR_NOT_FOUND);

    const char *names[] = {"chat_template.jinja", "chat_template.json", "tokenizer_config.json", "model.gguf", "bad.json"};
    for (size_t i = 0; i < 5; i++) remove_file(dir, names[i]);
    rmdir(dir);
}

TEST(template_generic_fallback_renders) {
    mxl_template *t = NULL;
    mxl_error err = {0};
    const char *g = mxl_chat_template_generic();
    REQUIRE(mxl_template_parse(g, strlen(g), "generic", &t, &err) == MXL_OK);
    json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"yo\"}]}]", 0, NULL);
    mxl_chat_render_params p = {0};
    p.messages = msgs;
    p.add_generation_prompt = true;
    char *out = NULL;
    CHECK(mxl_chat_template_render(t, &p, &out, NULL, NULL, &err) == MXL_OK);
    CHECK_EQ_STR(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n<|im_start|>assistant\n");
    mxl_free(out);
    json_decref(msgs);
    mxl_template_destroy(t);
}

/* Chat templates embedded in real GGUF files (llama.cpp's vocab test files): found through
 * mxl_chat_template_find (named variants included) and rendered as Python Jinja2 renders them. */
TEST(template_gguf_embedded_templates) {
    char dir[1024], path[1400];
    snprintf(dir, sizeof dir, "%s/../shared/testdata", mxl_test_repo_root());
    snprintf(path, sizeof path, "%s/templates/conversations.json", dir);
    json_t *convs = json_load_file(path, 0, NULL);
    if (!convs) fprintf(stderr, "  missing test data: %s\n", path);
    REQUIRE(convs != NULL);
    mxl_template_render_opts opts = {0};
    opts.now_set = mxl_template_parse_time("2026-01-15T12:34:56", &opts.now_unix);
    int n = 0;
    for (const tpl_gguf_case *gc = TPL_GGUF_CASES; gc->file; gc++, n++) {
        snprintf(path, sizeof path, "%s/llama-cpp-vocab/%s", dir, gc->file);
        mxl_chat_template_source src;
        mxl_error err = {0};
        if (mxl_chat_template_find(path, gc->variant, &src, &err) != MXL_OK) {
            fprintf(stderr, "  %s: %s\n", gc->file, err.msg);
            CHECK(0);
            continue;
        }
        CHECK(!src.generic);
        json_t *conv = NULL;
        for (size_t i = 0; i < json_array_size(convs); i++)
            if (!strcmp(json_string_value(json_object_get(json_array_get(convs, i), "id")), gc->conversation))
                conv = json_array_get(convs, i);
        REQUIRE(conv != NULL);
        mxl_template *t = NULL;
        char *out = NULL;
        mxl_status st = mxl_template_parse(src.text, strlen(src.text), src.origin, &t, &err);
        if (st == MXL_OK) {
            mxl_chat_render_params p = {0};
            p.messages = json_object_get(conv, "messages");
            p.tools = json_object_get(conv, "tools");
            p.extra = json_object_get(conv, "vars");
            p.add_generation_prompt = json_is_true(json_object_get(p.extra, "add_generation_prompt"));
            p.opts = &opts;
            st = mxl_chat_template_render(t, &p, &out, NULL, NULL, &err);
        }
        if (gc->output) {
            bool same = st == MXL_OK && !strcmp(out, gc->output);
            if (!same) fprintf(stderr, "  %s %s/%s: %s\n", gc->file, gc->variant ? gc->variant : "default", gc->conversation,
                               st == MXL_OK ? "output differs" : err.msg);
            CHECK(same);
        } else {
            CHECK(st != MXL_OK);
        }
        mxl_free(out);
        mxl_template_destroy(t);
        mxl_chat_template_source_free(&src);
    }
    CHECK(n >= 6);
    json_decref(convs);
}
