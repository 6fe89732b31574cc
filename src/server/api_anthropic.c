/* api_anthropic.c - the Anthropic Messages routes: /v1/messages (whole and streamed, in its
 * event format) and /v1/messages/count_tokens, plus OpenAI's /v1/chat/completions/input_tokens.
 * A Messages request becomes the same chat conversation the OpenAI route renders: `system`
 * turns into a leading system message and text blocks into plain content. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/model.h"
#include "server/gen_call.h"
#include "server/request.h"
#include "server/routes.h"

/* Text of a string or a list of text blocks; NULL with msg set otherwise. */
static char *blocks_text(const json_t *v, const char *what, char *msg, size_t ml) {
    if (json_is_string(v)) return mxl_strdup(json_string_value(v));
    if (!json_is_array(v)) {
        snprintf(msg, ml, "%s must be a string or an array of content blocks", what);
        return NULL;
    }
    size_t len = 0, i;
    const json_t *b;
    json_array_foreach(v, i, b) {
        const json_t *type = json_object_get(b, "type"), *text = json_object_get(b, "text");
        if (!json_is_object(b) || !json_is_string(type)) {
            snprintf(msg, ml, "%s[%zu] must be a content block with a 'type'", what, i);
            return NULL;
        }
        if (strcmp(json_string_value(type), "text") != 0) {
            snprintf(msg, ml, "%s[%zu]: '%s' blocks are not supported for this model", what, i, json_string_value(type));
            return NULL;
        }
        if (!json_is_string(text)) {
            snprintf(msg, ml, "%s[%zu].text must be a string", what, i);
            return NULL;
        }
        len += json_string_length(text) + 1;
    }
    char *out = mxl_malloc(len + 1), *p = out;
    if (!out) return snprintf(msg, ml, "out of memory"), NULL;
    json_array_foreach(v, i, b) {
        const json_t *text = json_object_get(b, "text");
        if (p != out) *p++ = '\n';
        memcpy(p, json_string_value(text), json_string_length(text));
        p += json_string_length(text);
    }
    *p = 0;
    return out;
}

/* Appends text to a growing buffer ("\n" between pieces). */
static bool add_text(char **buf, size_t *len, const char *t, size_t n) {
    char *p = mxl_realloc(*buf, *len + n + 2);
    if (!p) return false;
    if (*len) p[(*len)++] = '\n';
    memcpy(p + *len, t, n);
    *len += n;
    p[*len] = 0;
    *buf = p;
    return true;
}

/* The URL of an Anthropic image block's source: base64 data as a data: URL, or a "url" source. */
static json_t *image_source_url(const json_t *b) {
    const json_t *src = json_object_get(b, "source");
    const char *st = json_string_value(json_object_get(src, "type"));
    if (st && !strcmp(st, "url") && json_is_string(json_object_get(src, "url"))) return json_incref(json_object_get(src, "url"));
    const char *mt = json_string_value(json_object_get(src, "media_type")), *data = json_string_value(json_object_get(src, "data"));
    if (!st || strcmp(st, "base64") || !mt || !data) return NULL;
    size_t n = strlen(mt) + strlen(data) + 16;
    char *u = mxl_malloc(n);
    if (!u) return NULL;
    snprintf(u, n, "data:%s;base64,%s", mt, data);
    json_t *j = json_string(u);
    mxl_free(u);
    return j;
}

/* A user turn with image blocks (a vision-language model): one user message whose content is a
 * part list ({"type": "image"} in each image's place, its URL appended to urls; text parts) and,
 * for each tool_result, a "tool" message with its text, the parts before it sent before it. */
static bool user_turn_images(json_t *out, const json_t *content, size_t i, json_t *urls, char *msg, size_t ml) {
    json_t *parts = json_array();
    size_t k;
    const json_t *b;
    json_array_foreach(content, k, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        if (type && !strcmp(type, "text") && json_is_string(json_object_get(b, "text"))) {
            json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", json_object_get(b, "text")));
        } else if (type && !strcmp(type, "image")) {
            json_t *u = image_source_url(b);
            if (!u) {
                json_decref(parts);
                return snprintf(msg, ml, "messages[%zu].content[%zu]: an image block needs a base64 source with media_type and data, or a url source", i, k), false;
            }
            json_array_append_new(urls, u);
            json_array_append_new(parts, json_pack("{s:s}", "type", "image"));
        } else if (type && !strcmp(type, "tool_result") && json_is_string(json_object_get(b, "content"))) {
            if (json_array_size(parts)) json_array_append_new(out, json_pack("{s:s, s:o}", "role", "user", "content", parts)), parts = json_array();
            const json_t *id = json_object_get(b, "tool_use_id");
            json_array_append_new(out, json_pack("{s:s, s:s, s:O}", "role", "tool", "tool_call_id", json_is_string(id) ? json_string_value(id) : "",
                                                 "content", json_object_get(b, "content")));
        } else {
            json_decref(parts);
            return snprintf(msg, ml, "messages[%zu].content[%zu] is not a content block this server takes beside images", i, k), false;
        }
    }
    if (json_array_size(parts)) json_array_append_new(out, json_pack("{s:s, s:o}", "role", "user", "content", parts));
    else json_decref(parts);
    return true;
}

/* One user turn: its text blocks become a user message, each tool_result a "tool" message; with
 * urls (a vision-language model), a turn with image blocks goes through user_turn_images. */
static bool user_turn(json_t *out, const json_t *content, size_t i, json_t *urls, char *msg, size_t ml) {
    if (urls && json_is_array(content)) {
        size_t k;
        const json_t *b;
        json_array_foreach(content, k, b) {
            const char *type = json_string_value(json_object_get(b, "type"));
            if (type && !strcmp(type, "image")) return user_turn_images(out, content, i, urls, msg, ml);
        }
    }
    if (json_is_string(content)) {
        json_array_append_new(out, json_pack("{s:s, s:O}", "role", "user", "content", content));
        return true;
    }
    if (!json_is_array(content)) return snprintf(msg, ml, "messages[%zu].content must be a string or an array of content blocks", i), false;
    char *text = NULL;
    size_t len = 0, k;
    const json_t *b;
    json_array_foreach(content, k, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        if (!type) goto bad_block;
        if (!strcmp(type, "text") && json_is_string(json_object_get(b, "text"))) {
            const json_t *t = json_object_get(b, "text");
            if (!add_text(&text, &len, json_string_value(t), json_string_length(t))) goto oom;
        } else if (!strcmp(type, "tool_result")) {
            if (text) { /* text before the result stays before it */
                json_array_append_new(out, json_pack("{s:s, s:s}", "role", "user", "content", text));
                mxl_free(text);
                text = NULL;
                len = 0;
            }
            const json_t *id = json_object_get(b, "tool_use_id"), *c = json_object_get(b, "content");
            char *rt = NULL;
            size_t rl = 0;
            if (json_is_string(c)) {
                if (!add_text(&rt, &rl, json_string_value(c), json_string_length(c))) goto oom;
            } else if (json_is_array(c)) {
                size_t q;
                const json_t *cb;
                json_array_foreach(c, q, cb) {
                    const json_t *t = json_object_get(cb, "text");
                    const char *ct = json_string_value(json_object_get(cb, "type"));
                    if (ct && strcmp(ct, "text") != 0) {
                        mxl_free(rt);
                        mxl_free(text);
                        return snprintf(msg, ml, "messages[%zu].content[%zu]: %s input is not supported for this model", i, k, ct), false;
                    }
                    if (json_is_string(t) && !add_text(&rt, &rl, json_string_value(t), json_string_length(t))) goto oom;
                }
            }
            json_array_append_new(out, json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id", json_is_string(id) ? json_string_value(id) : "",
                                                 "content", rt ? rt : ""));
            mxl_free(rt);
        } else if (!strcmp(type, "image") || !strcmp(type, "document")) {
            mxl_free(text);
            return snprintf(msg, ml, "messages[%zu].content[%zu]: %s input is not supported for this model", i, k, type), false;
        } else {
            goto bad_block;
        }
        continue;
    bad_block:
        mxl_free(text);
        return snprintf(msg, ml, "messages[%zu].content[%zu] is not a content block this server takes", i, k), false;
    }
    if (text || json_array_size(content) == 0) json_array_append_new(out, json_pack("{s:s, s:s}", "role", "user", "content", text ? text : ""));
    mxl_free(text);
    return true;
oom:
    mxl_free(text);
    return snprintf(msg, ml, "out of memory"), false;
}

/* One assistant turn: text, thinking (-> reasoning_content) and tool_use (-> tool_calls). */
static bool assistant_turn(json_t *out, const json_t *content, size_t i, char *msg, size_t ml) {
    if (json_is_string(content)) {
        json_array_append_new(out, json_pack("{s:s, s:O}", "role", "assistant", "content", content));
        return true;
    }
    if (!json_is_array(content)) return snprintf(msg, ml, "messages[%zu].content must be a string or an array of content blocks", i), false;
    char *text = NULL, *think = NULL;
    size_t tl = 0, hl = 0, k;
    json_t *calls = json_array();
    const json_t *b;
    json_array_foreach(content, k, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        const json_t *t;
        if (type && !strcmp(type, "text") && json_is_string(t = json_object_get(b, "text"))) {
            if (!add_text(&text, &tl, json_string_value(t), json_string_length(t))) break;
        } else if (type && !strcmp(type, "thinking") && json_is_string(t = json_object_get(b, "thinking"))) {
            if (!add_text(&think, &hl, json_string_value(t), json_string_length(t))) break;
        } else if (type && !strcmp(type, "redacted_thinking")) {
            continue;
        } else if (type && !strcmp(type, "tool_use") && json_is_string(json_object_get(b, "name"))) {
            const json_t *input = json_object_get(b, "input"), *id = json_object_get(b, "id");
            /* templates read the arguments as an object (they apply tojson themselves); a block
             * without "input" gets a new empty one, handed over ("o": "O" would leak it) */
            json_t *args = input ? json_incref((json_t *)input) : json_object();
            json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:O, s:o}}", "id", json_is_string(id) ? json_string_value(id) : "",
                                                   "type", "function", "function", "name", json_object_get(b, "name"), "arguments", args));
        } else {
            mxl_free(text);
            mxl_free(think);
            json_decref(calls);
            return snprintf(msg, ml, "messages[%zu].content[%zu] is not a content block this server takes", i, k), false;
        }
    }
    json_t *m = json_pack("{s:s, s:s}", "role", "assistant", "content", text ? text : "");
    if (think) json_object_set_new(m, "reasoning_content", json_string(think));
    if (json_array_size(calls)) json_object_set(m, "tool_calls", calls);
    json_decref(calls);
    json_array_append_new(out, m);
    mxl_free(text);
    mxl_free(think);
    return true;
}

/* The conversation as chat-template messages (OpenAI shape). Empty is accepted, as llama-server
 * does. */
json_t *mxl_srv_anthropic_chat(const mxl_server *s, const json_t *body, json_t *urls, char *msg, size_t ml) {
    const json_t *msgs = json_object_get(body, "messages"), *system = json_object_get(body, "system");
    if (!json_is_array(msgs)) {
        snprintf(msg, ml, "'messages' must be an array");
        return NULL;
    }
    if (!mxl_srv_check_count(s, "messages", json_array_size(msgs), msg, ml)) return NULL;
    json_t *out = json_array();
    if (system && !json_is_null(system)) {
        char *t = blocks_text(system, "system", msg, ml);
        if (!t) goto fail;
        json_array_append_new(out, json_pack("{s:s, s:s}", "role", "system", "content", t));
        mxl_free(t);
    }
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        bool ok;
        if (role && !strcmp(role, "user")) ok = user_turn(out, json_object_get(m, "content"), i, urls, msg, ml);
        else if (role && !strcmp(role, "assistant")) ok = assistant_turn(out, json_object_get(m, "content"), i, msg, ml);
        else {
            snprintf(msg, ml, "messages[%zu].role must be \"user\" or \"assistant\"", i);
            ok = false;
        }
        if (!ok) goto fail;
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* Anthropic tools [{name, description, input_schema}] as the OpenAI function tools templates
 * expect; NULL when there are none. */
json_t *mxl_srv_anthropic_tools(const mxl_server *s, const json_t *tools, char *msg, size_t ml, bool *bad) {
    *bad = false;
    if (!tools || json_is_null(tools)) return NULL;
    if (!json_is_array(tools)) {
        *bad = true;
        snprintf(msg, ml, "'tools' must be an array");
        return NULL;
    }
    if (!mxl_srv_check_count(s, "tools", json_array_size(tools), msg, ml)) {
        *bad = true;
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        const json_t *name = json_object_get(t, "name");
        if (!json_is_string(name)) continue; /* server tools (web_search, ...) are not ours to run */
        const json_t *desc = json_object_get(t, "description"), *schema = json_object_get(t, "input_schema");
        json_t *fn = json_pack("{s:O}", "name", name);
        if (json_is_string(desc)) json_object_set(fn, "description", (json_t *)desc);
        json_object_set_new(fn, "parameters", schema ? json_incref((json_t *)schema) : json_pack("{s:s}", "type", "object"));
        json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
    if (!json_array_size(out)) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* Renders and tokenizes into g (with the images of urls); on failure replies 400 and returns
 * false. */
static bool prompt_of(mxl_server *s, mxl_http_req *r, mxl_api api, const json_t *chat, const json_t *tools, const json_t *urls,
                      mxl_gen_call *g) {
    mxl_chat_opts o = {.tools = json_is_array(tools) && json_array_size(tools) ? tools : NULL, .kwargs = s->template_kwargs,
                       .add_generation_prompt = true, .reasoning = s->reasoning};
    size_t len = 0;
    mxl_error err = {0};
    char msg[512];
    if (mxl_chat_render(s->model, chat, &o, &g->prompt_text, &len, &err)) {
        mxl_srv_error(r, api, 400, "invalid_request_error", "%s", err.msg);
        return false;
    }
    if (!mxl_srv_tokenize_chat(s, g, urls, len, msg, sizeof msg)) {
        mxl_srv_error(r, api, 400, "invalid_request_error", "%s", msg);
        return false;
    }
    return true;
}

void mxl_api_anthropic_messages(mxl_server *s, mxl_http_req *r) {
    json_t *body = mxl_srv_body_json(s, r, MXL_API_ANTHROPIC);
    if (!body) return;
    char msg[512] = "";
    json_t *chat = NULL, *urls = NULL;
    mxl_gen_call *g = mxl_calloc(1, sizeof *g);
    if (!g) goto oom;
    g->srv = s;
    g->r = r;
    g->kind = MXL_GEN_ANTHROPIC;
    g->n = 1;
    const json_t *mt = json_object_get(body, "max_tokens");
    if (!json_is_integer(mt) || json_integer_value(mt) < 1) {
        snprintf(msg, sizeof msg, "'max_tokens' is required and must be a positive integer");
        goto bad;
    }
    urls = mxl_gen_model_vlm(s->model) ? json_array() : NULL; /* image URLs, in prompt order */
    if (!(chat = mxl_srv_anthropic_chat(s, body, urls, msg, sizeof msg)) || !mxl_srv_parse_params(s, body, &g->params, &g->bias, msg, sizeof msg))
        goto bad;
    const json_t *ss = json_object_get(body, "stop_sequences");
    if (ss && !json_is_null(ss)) {
        size_t i;
        const json_t *e;
        if (!json_is_array(ss)) {
            snprintf(msg, sizeof msg, "'stop_sequences' must be an array of strings");
            goto bad;
        }
        json_array_foreach(ss, i, e) {
            if (!json_is_string(e)) {
                snprintf(msg, sizeof msg, "'stop_sequences' must be an array of strings");
                goto bad;
            }
            if (g->params.n_stop >= MXL_SEQ_MAX_STOP) {
                snprintf(msg, sizeof msg, "'stop_sequences' has more than %d strings (the most a request may give)", MXL_SEQ_MAX_STOP);
                goto bad;
            }
            if (json_string_length(e)) g->params.stop[g->params.n_stop++] = json_string_value(e);
        }
    }
    const json_t *st = json_object_get(body, "stream");
    if (st && !json_is_null(st) && !json_is_boolean(st)) {
        snprintf(msg, sizeof msg, "'stream' must be a boolean");
        goto bad;
    }
    g->stream = json_is_true(st);
    mxl_tool_choice tc;
    if (!mxl_srv_tool_choice_anthropic(json_object_get(body, "tool_choice"), &tc, msg, sizeof msg)) goto bad;
    bool bad_tools;
    json_t *tools = mxl_srv_anthropic_tools(s, json_object_get(body, "tools"), msg, sizeof msg, &bad_tools);
    if (bad_tools) goto bad;
    if (tc.none) json_decref(tools), tools = NULL; /* (the template never sees them) */
    if (!prompt_of(s, r, MXL_API_ANTHROPIC, chat, tools, urls, g)) {
        json_decref(tools);
        json_decref(chat);
        json_decref(urls);
        mxl_gen_call_free(g);
        json_decref(body);
        return;
    }
    bool parse_ok = mxl_srv_setup_parse(s, g, tools, &tc, msg, sizeof msg);
    json_decref(tools);
    if (!parse_ok) goto bad;
    json_decref(chat);
    json_decref(urls);
    mxl_gen_call_run(g);
    json_decref(body);
    return;
bad:
    mxl_srv_error(r, MXL_API_ANTHROPIC, 400, "invalid_request_error", "%s", msg);
    json_decref(chat);
    json_decref(urls);
    mxl_gen_call_free(g);
    json_decref(body);
    return;
oom:
    json_decref(body);
    mxl_srv_error(r, MXL_API_ANTHROPIC, 500, "api_error", "out of memory");
}

static void count(mxl_server *s, mxl_http_req *r, mxl_api api) {
    json_t *body = mxl_srv_body_json(s, r, api);
    if (!body) return;
    char msg[512] = "";
    json_t *urls = mxl_gen_model_vlm(s->model) ? json_array() : NULL; /* image URLs, in prompt order */
    /* the OpenAI messages read as /v1/chat/completions reads them (roles checked, part lists) */
    json_t *chat = api == MXL_API_ANTHROPIC ? mxl_srv_anthropic_chat(s, body, urls, msg, sizeof msg)
                                            : mxl_srv_chat_messages(s, json_object_get(body, "messages"), urls, msg, sizeof msg);
    if (!chat) {
        mxl_srv_error(r, api, 400, "invalid_request_error", "%s", msg);
        json_decref(urls);
        json_decref(body);
        return;
    }
    bool bad_tools = false;
    json_t *tools = api == MXL_API_ANTHROPIC ? mxl_srv_anthropic_tools(s, json_object_get(body, "tools"), msg, sizeof msg, &bad_tools)
                                             : json_incref(json_object_get(body, "tools"));
    if (api != MXL_API_ANTHROPIC && !mxl_srv_check_count(s, "tools", json_array_size(tools), msg, sizeof msg)) bad_tools = true;
    mxl_gen_call *g = bad_tools ? NULL : mxl_calloc(1, sizeof *g);
    if (!g) {
        if (bad_tools) mxl_srv_error(r, api, 400, "invalid_request_error", "%s", msg);
        else mxl_srv_error(r, api, 500, api == MXL_API_ANTHROPIC ? "api_error" : "server_error", "out of memory");
    } else {
        g->srv = s;
        if (prompt_of(s, r, api, chat, tools, urls, g)) mxl_http_send_json(r, 200, json_pack("{s:I}", "input_tokens", (json_int_t)g->n_prompt));
        mxl_gen_call_free(g);
    }
    json_decref(tools);
    json_decref(chat);
    json_decref(urls);
    json_decref(body);
}

void mxl_api_anthropic_count_tokens(mxl_server *s, mxl_http_req *r) { count(s, r, MXL_API_ANTHROPIC); }
void mxl_api_openai_input_tokens(mxl_server *s, mxl_http_req *r) { count(s, r, MXL_API_OPENAI); }
