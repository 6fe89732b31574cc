/* test_chat_builtin.c - llama.cpp's built-in chat template names (engine/chat_builtin.h) render,
 * through our Jinja engine, byte for byte what llama.cpp's legacy formatter gives
 * (tests/fixtures/templates/builtin_templates.json, made by gen_builtin_templates.py from
 * llama.cpp's own llama_chat_apply_template). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/chat_builtin.h"
#include "template/template.h"
#include "test.h"

#define FIXTURE "tests/fixtures/templates/builtin_templates.json"
/* Names implemented when this test was written; the count may grow, never shrink. */
#define MIN_IMPLEMENTED 54

/* Renders `messages` through the built-in `name` the way the server does (bos/eos set, as
 * mxl_chat_render passes them; the legacy formats must not use them). *out NULL on failure. */
static mxl_status render_builtin(const char *name, const json_t *messages, bool add_gen, char **out, size_t *len,
                                 mxl_error *err) {
    *out = NULL;
    const char *src = mxl_chat_builtin_template(name);
    if (!src) return mxl_error_set(err, MXL_ERR_ARG, "%s: not a built-in template", name);
    mxl_template *t = NULL;
    mxl_status st = mxl_template_parse(src, strlen(src), name, &t, err);
    if (st) return st;
    mxl_chat_render_params p = {.messages = messages, .add_generation_prompt = add_gen, .bos_token = "<s>",
                                .eos_token = "</s>"};
    st = mxl_chat_template_render(t, &p, out, len, NULL, err);
    mxl_template_destroy(t);
    return st;
}

/* Prints a JSON-escaped view of n bytes, so whitespace differences show. */
static void show(const char *label, const char *s, size_t n) {
    json_t *j = json_stringn(s, n);
    char *d = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    fprintf(stderr, "    %s %s\n", label, d ? d : "(unprintable)");
    mxl_free(d);
    json_decref(j);
}

TEST(chat_builtin_matches_llamacpp_legacy_formatter) {
    json_t *fx = mxl_test_load_json(FIXTURE);
    REQUIRE(fx != NULL);
    json_t *names = json_object_get(fx, "names"), *convs = json_object_get(fx, "conversations"),
           *cases = json_object_get(fx, "cases");
    REQUIRE(json_is_array(names) && json_is_object(convs) && json_is_array(cases));
    int implemented = 0;
    size_t i;
    json_t *v;
    json_array_foreach(names, i, v) {
        const char *name = json_string_value(v);
        if (mxl_chat_builtin_template(name)) implemented++;
        else fprintf(stderr, "  note: llama.cpp built-in template '%s' is not implemented\n", name);
    }
    int n = 0, bad = 0, skipped = 0;
    json_array_foreach(cases, i, v) {
        const char *name = json_string_value(json_object_get(v, "name"));
        const char *cid = json_string_value(json_object_get(v, "conversation"));
        json_t *want = json_object_get(v, "output"), *msgs = json_object_get(convs, cid ? cid : "");
        REQUIRE(name && json_is_string(want) && json_is_array(msgs));
        if (!mxl_chat_builtin_template(name)) {
            skipped++;
            continue;
        }
        n++;
        bool gen = json_is_true(json_object_get(v, "add_generation_prompt"));
        char *out = NULL;
        size_t len = 0;
        mxl_error err = {0};
        mxl_status st = render_builtin(name, msgs, gen, &out, &len, &err);
        size_t wl = json_string_length(want);
        if (st || len != wl || memcmp(out, json_string_value(want), wl) != 0) {
            if (bad++ < 20) {
                fprintf(stderr, "  %s / %s / add_generation_prompt=%d:\n", name, cid, gen);
                show("want:", json_string_value(want), wl);
                if (st) fprintf(stderr, "    error: %s\n", err.msg);
                else show("got: ", out, len);
            }
        }
        mxl_free(out);
    }
    fprintf(stderr, "  %d of %zu llama.cpp names implemented; %d cases compared, %d mismatched\n", implemented,
            json_array_size(names), n, bad);
    CHECK(implemented >= MIN_IMPLEMENTED);
    CHECK(n >= MIN_IMPLEMENTED * 20);
    CHECK_EQ_INT(bad, 0);
    json_decref(fx);
}

/* llama-server's legacy route turns a null (or missing) content into "" before formatting. */
TEST(chat_builtin_null_content_renders_as_empty) {
    json_t *empty = json_loads("[{\"role\":\"system\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"\"},"
                               "{\"role\":\"assistant\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"\"}]",
                               0, NULL);
    json_t *null = json_loads("[{\"role\":\"system\",\"content\":null},{\"role\":\"user\",\"content\":null},"
                              "{\"role\":\"assistant\"},{\"role\":\"user\",\"content\":null}]",
                              0, NULL);
    REQUIRE(empty && null);
    int n = 0;
    for (size_t i = 0; mxl_chat_builtin_name(i); i++, n++) {
        const char *name = mxl_chat_builtin_name(i);
        char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        mxl_error e1 = {0}, e2 = {0};
        mxl_status s1 = render_builtin(name, empty, true, &a, &la, &e1), s2 = render_builtin(name, null, true, &b, &lb, &e2);
        CHECK(s1 == MXL_OK && s2 == MXL_OK);
        if (s1 == MXL_OK && s2 == MXL_OK && (la != lb || memcmp(a, b, la) != 0)) {
            fprintf(stderr, "  %s: null content renders differently from \"\"\n", name);
            show("\"\":  ", a, la);
            show("null:", b, lb);
            CHECK(false);
        }
        mxl_free(a);
        mxl_free(b);
    }
    CHECK(n >= MIN_IMPLEMENTED);
    json_decref(empty);
    json_decref(null);
}

TEST(chat_builtin_lookup_is_exact) {
    CHECK(mxl_chat_builtin_template("command-r") != NULL);
    CHECK(mxl_chat_builtin_template("chatml") != NULL);
    CHECK(mxl_chat_builtin_template(NULL) == NULL);
    CHECK(mxl_chat_builtin_template("") == NULL);
    CHECK(mxl_chat_builtin_template("Command-R") == NULL);
    CHECK(mxl_chat_builtin_template("chatml ") == NULL);
    CHECK(mxl_chat_builtin_template("{{ messages }}") == NULL);
    CHECK(mxl_chat_builtin_name((size_t)-1) == NULL);
    /* the list is sorted byte-wise (llama.cpp's std::map order), so names are unique */
    for (size_t i = 1; mxl_chat_builtin_name(i); i++) CHECK(strcmp(mxl_chat_builtin_name(i - 1), mxl_chat_builtin_name(i)) < 0);
}
