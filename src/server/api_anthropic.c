/* api_anthropic.c - the Anthropic Messages routes: /v1/messages (whole and streamed, in its
 * event format) and /v1/messages/count_tokens, plus OpenAI's /v1/chat/completions/input_tokens.
 * A Messages request becomes the same chat conversation the OpenAI route renders: `system`
 * turns into a leading system message and text blocks into plain content. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

/* Text of a string or a list of text blocks; NULL with msg set otherwise. */
static char *blocks_text(const json_t *v, const char *what, char *msg, size_t ml) {
    if (json_is_string(v)) return strdup(json_string_value(v));
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
    char *out = malloc(len + 1), *p = out;
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

/* The conversation as chat-template messages. */
static json_t *to_chat(const json_t *body, char *msg, size_t ml) {
    const json_t *msgs = json_object_get(body, "messages"), *system = json_object_get(body, "system");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
        snprintf(msg, ml, "'messages' must be a non-empty array");
        return NULL;
    }
    json_t *out = json_array();
    if (system && !json_is_null(system)) {
        char *t = blocks_text(system, "system", msg, ml);
        if (!t) goto fail;
        json_array_append_new(out, json_pack("{s:s, s:s}", "role", "system", "content", t));
        free(t);
    }
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m) {
        const json_t *role = json_object_get(m, "role");
        if (!json_is_object(m) || !json_is_string(role) ||
            (strcmp(json_string_value(role), "user") != 0 && strcmp(json_string_value(role), "assistant") != 0)) {
            snprintf(msg, ml, "messages[%zu].role must be \"user\" or \"assistant\"", i);
            goto fail;
        }
        char what[48];
        snprintf(what, sizeof what, "messages[%zu].content", i);
        char *t = blocks_text(json_object_get(m, "content"), what, msg, ml);
        if (!t) goto fail;
        json_array_append_new(out, json_pack("{s:O, s:s}", "role", role, "content", t));
        free(t);
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* Renders and tokenizes; on failure replies 400 and returns false. */
static bool prompt_of(mxl_server *s, mxl_http_req *r, mxl_api api, const json_t *chat, const json_t *tools, char **text,
                      mxl_token_ids *ids) {
    mxl_chat_opts o = {.tools = json_is_array(tools) && json_array_size(tools) ? tools : NULL, .kwargs = s->template_kwargs,
                       .add_generation_prompt = true, .reasoning = s->reasoning};
    size_t len = 0;
    mxl_error err = {0};
    if (mxl_chat_render(s->model, chat, &o, text, &len, &err) || mxl_chat_tokenize_rendered(s->model, *text, len, ids, &err)) {
        mxl_srv_error(r, api, 400, "invalid_request_error", "%s", err.msg);
        return false;
    }
    return true;
}

void mxl_api_anthropic_messages(mxl_server *s, mxl_http_req *r) {
    json_t *body = mxl_srv_body_json(r, MXL_API_ANTHROPIC);
    if (!body) return;
    char msg[512] = "";
    json_t *chat = NULL;
    mxl_gen_call *g = calloc(1, sizeof *g);
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
    if (!(chat = to_chat(body, msg, sizeof msg)) || !mxl_srv_parse_params(s, body, &g->params, &g->bias, msg, sizeof msg)) goto bad;
    const json_t *ss = json_object_get(body, "stop_sequences");
    if (ss && !json_is_null(ss)) {
        size_t i;
        const json_t *e;
        if (!json_is_array(ss)) {
            snprintf(msg, sizeof msg, "'stop_sequences' must be an array of strings");
            goto bad;
        }
        json_array_foreach(ss, i, e) {
            if (!json_is_string(e) || g->params.n_stop >= MXL_SEQ_MAX_STOP) {
                snprintf(msg, sizeof msg, "'stop_sequences' must be at most %d strings", MXL_SEQ_MAX_STOP);
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
    mxl_token_ids ids = {0};
    if (!prompt_of(s, r, MXL_API_ANTHROPIC, chat, json_object_get(body, "tools"), &g->prompt_text, &ids)) {
        json_decref(chat);
        mxl_gen_call_free(g);
        json_decref(body);
        return;
    }
    g->prompt_ids = ids.ids;
    g->n_prompt = ids.n;
    json_decref(chat);
    mxl_gen_call_run(g);
    json_decref(body);
    return;
bad:
    mxl_srv_error(r, MXL_API_ANTHROPIC, 400, "invalid_request_error", "%s", msg);
    json_decref(chat);
    mxl_gen_call_free(g);
    json_decref(body);
    return;
oom:
    json_decref(body);
    mxl_srv_error(r, MXL_API_ANTHROPIC, 500, "api_error", "out of memory");
}

static void count(mxl_server *s, mxl_http_req *r, mxl_api api) {
    json_t *body = mxl_srv_body_json(r, api);
    if (!body) return;
    char msg[512] = "";
    json_t *chat = NULL;
    if (api == MXL_API_ANTHROPIC) {
        chat = to_chat(body, msg, sizeof msg);
    } else {
        const json_t *m = json_object_get(body, "messages");
        if (json_is_array(m) && json_array_size(m)) chat = json_incref((json_t *)m);
        else snprintf(msg, sizeof msg, "'messages' must be a non-empty array");
    }
    if (!chat) {
        mxl_srv_error(r, api, 400, "invalid_request_error", "%s", msg);
        json_decref(body);
        return;
    }
    char *text = NULL;
    mxl_token_ids ids = {0};
    if (prompt_of(s, r, api, chat, json_object_get(body, "tools"), &text, &ids))
        mxl_http_send_json(r, 200, json_pack("{s:I}", "input_tokens", (json_int_t)ids.n));
    free(text);
    mxl_token_ids_free(&ids);
    json_decref(chat);
    json_decref(body);
}

void mxl_api_anthropic_count_tokens(mxl_server *s, mxl_http_req *r) { count(s, r, MXL_API_ANTHROPIC); }
void mxl_api_openai_input_tokens(mxl_server *s, mxl_http_req *r) { count(s, r, MXL_API_OPENAI); }
