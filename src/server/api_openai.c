/* api_openai.c - the OpenAI routes: /v1/chat/completions, /v1/completions, /v1/models. Requests
 * are validated field by field (400 naming the field), rendered through the model's chat
 * template and handed to the shared generation call (gen_call.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/model.h"
#include "server/constraint.h"
#include "server/gen_call.h"
#include "server/limits.h"
#include "server/request.h"
#include "server/routes.h"

/* Renders the conversation. A last message from the assistant is a prefill the model continues
 * (llama-server's assistant prefill / vLLM's continue_final_message): the turns before it are
 * rendered with the generation prompt and its content is appended verbatim. */
static bool render_with_prefill(mxl_server *s, const json_t *body, json_t *msgs, mxl_chat_opts *o, char **text, size_t *len, char *msg,
                                size_t ml) {
    const json_t *cfm = json_object_get(body, "continue_final_message"), *agp = json_object_get(body, "add_generation_prompt");
    if (cfm && !json_is_null(cfm) && !json_is_boolean(cfm)) return snprintf(msg, ml, "'continue_final_message' must be a boolean"), false;
    if (json_is_true(cfm) && json_is_true(agp))
        return snprintf(msg, ml, "'continue_final_message' and 'add_generation_prompt' cannot both be true"), false;
    size_t n = json_array_size(msgs);
    const json_t *last = n ? json_array_get(msgs, n - 1) : NULL;
    const char *role = json_string_value(json_object_get(last, "role"));
    const json_t *content = json_object_get(last, "content");
    mxl_error err = {0};
    const char *prev = n > 1 ? json_string_value(json_object_get(json_array_get(msgs, n - 2), "role")) : NULL;
    if (role && prev && !strcmp(role, "assistant") && !strcmp(prev, "assistant"))
        return snprintf(msg, ml, "the conversation cannot end with two assistant messages"), false;
    if (n > 1 && role && !strcmp(role, "assistant") && json_is_string(content) && !json_object_get(last, "tool_calls") &&
        !json_is_false(cfm)) {
        json_t *head = json_array();
        for (size_t i = 0; i + 1 < n; i++) json_array_append(head, json_array_get(msgs, i));
        o->add_generation_prompt = true;
        mxl_status st = mxl_chat_render(s->model, head, o, text, len, &err);
        json_decref(head);
        if (st) return snprintf(msg, ml, "%s", err.msg), false;
        /* a prefill given as content parts is their text joined by a blank line, as llama-server
         * renders a continued message (common_chat_msg::render_content); elsewhere parts join
         * with one newline */
        const json_t *orig = json_object_get(json_array_get(json_object_get(body, "messages"), n - 1), "content");
        size_t k = 0, i;
        const json_t *part;
        if (json_is_array(orig))
            json_array_foreach(orig, i, part) k += json_string_length(json_object_get(part, "text")) + 2;
        else
            k = json_string_length(content);
        char *p = mxl_realloc(*text, *len + k + 1);
        if (!p) return snprintf(msg, ml, "out of memory"), false;
        char *w = p + *len;
        if (json_is_array(orig)) {
            json_array_foreach(orig, i, part) {
                if (w != p + *len) memcpy(w, "\n\n", 2), w += 2;
                const json_t *t = json_object_get(part, "text");
                memcpy(w, json_string_value(t), json_string_length(t));
                w += json_string_length(t);
            }
        } else {
            memcpy(w, json_string_value(content), k);
            w += k;
        }
        *w = 0;
        *text = p;
        *len = (size_t)(w - p);
        return true;
    }
    if (mxl_chat_render(s->model, msgs, o, text, len, &err)) return snprintf(msg, ml, "%s", err.msg), false;
    return true;
}

static bool parse_stream(const json_t *body, mxl_gen_call *g, char *msg, size_t ml) {
    const json_t *v = json_object_get(body, "stream");
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v)) return snprintf(msg, ml, "'stream' must be a boolean"), false;
        g->stream = json_is_true(v);
    }
    v = json_object_get(body, "stream_options");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) return snprintf(msg, ml, "'stream_options' must be an object"), false;
        const json_t *u = json_object_get(v, "include_usage");
        if (u && !json_is_boolean(u) && !json_is_null(u)) return snprintf(msg, ml, "'stream_options.include_usage' must be a boolean"), false;
        g->include_usage = json_is_true(u);
    }
    g->verbose = json_is_true(json_object_get(body, "verbose"));
    g->return_progress = json_is_true(json_object_get(body, "return_progress"));
    g->timings_per_token = json_is_true(json_object_get(body, "timings_per_token"));
    v = json_object_get(body, "n");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > MXL_SRV_MAX_CHOICES)
            return snprintf(msg, ml, "'n' must be an integer between 1 and %d (the most choices a request may ask for)", MXL_SRV_MAX_CHOICES),
                   false;
        g->n = (int)json_integer_value(v);
    }
    return true;
}

static mxl_gen_call *new_call(mxl_server *s, mxl_http_req *r, mxl_gen_kind kind) {
    mxl_gen_call *g = mxl_calloc(1, sizeof *g);
    if (!g) return NULL;
    g->srv = s;
    g->r = r;
    g->kind = kind;
    g->n = 1;
    return g;
}

static void fail_call(mxl_gen_call *g, int status, const char *type, const char *msg) {
    mxl_srv_error(g->r, MXL_API_OPENAI, status, type, "%s", msg);
    mxl_gen_call_free(g);
}

void mxl_api_openai_chat(mxl_server *s, mxl_http_req *r) {
    json_t *body = mxl_srv_body_json(s, r, MXL_API_OPENAI);
    if (!body) return;
    char msg[512] = "";
    mxl_gen_call *g = new_call(s, r, MXL_GEN_CHAT);
    json_t *msgs = NULL, *kw = NULL;
    if (!g) {
        json_decref(body);
        mxl_srv_error(r, MXL_API_OPENAI, 500, "server_error", "out of memory");
        return;
    }
    mxl_chat_opts o;
    json_t *urls = mxl_gen_model_vlm(s->model) ? json_array() : NULL; /* image URLs, in prompt order */
    if (!(msgs = mxl_srv_chat_messages(s, json_object_get(body, "messages"), urls, msg, sizeof msg)) || !parse_stream(body, g, msg, sizeof msg) ||
        !mxl_srv_parse_params(s, body, &g->params, &g->bias, msg, sizeof msg) || !mxl_srv_chat_opts(s, body, &o, &kw, msg, sizeof msg) ||
        !mxl_srv_parse_id_slot(body, g, msg, sizeof msg))
        goto bad;
    mxl_tool_choice tc;
    if (!mxl_srv_tool_choice_openai(json_object_get(body, "tool_choice"), &tc, msg, sizeof msg)) goto bad;
    if (tc.none) o.tools = NULL; /* (the template never sees them) */
    const json_t *v = json_object_get(body, "logprobs");
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v)) {
            snprintf(msg, sizeof msg, "'logprobs' must be a boolean");
            goto bad;
        }
        g->logprobs = json_is_true(v);
    }
    v = json_object_get(body, "top_logprobs");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > MXL_SEQ_MAX_PROBS) {
            snprintf(msg, sizeof msg, "'top_logprobs' must be an integer between 0 and %d", MXL_SEQ_MAX_PROBS);
            goto bad;
        }
        g->top_logprobs = (int)json_integer_value(v);
    }
    g->params.n_probs = g->logprobs ? (g->top_logprobs > 0 ? g->top_logprobs : 1) : 0;
    /* grammar / json_schema / response_format (json_object, json_schema) */
    if (!mxl_srv_parse_constraint(s, body, true, &g->params, msg, sizeof msg)) goto bad;
    size_t len = 0;
    mxl_error err = {0};
    if (!render_with_prefill(s, body, msgs, &o, &g->prompt_text, &len, msg, sizeof msg)) goto bad;
    (void)err;
    if (!mxl_srv_tokenize_chat(s, g, urls, len, msg, sizeof msg)) goto bad;
    if (!mxl_srv_setup_parse(s, g, o.tools, &tc, msg, sizeof msg)) goto bad;
    json_decref(msgs);
    json_decref(kw);
    json_decref(urls);
    mxl_gen_call_run(g);
    json_decref(body);
    return;
bad:
    json_decref(msgs);
    json_decref(kw);
    json_decref(urls);
    fail_call(g, 400, "invalid_request_error", msg);
    json_decref(body);
}

void mxl_api_openai_completions(mxl_server *s, mxl_http_req *r) {
    json_t *body = mxl_srv_body_json(s, r, MXL_API_OPENAI);
    if (!body) return;
    char msg[512] = "";
    mxl_gen_call *g = new_call(s, r, MXL_GEN_COMPLETION);
    if (!g) {
        json_decref(body);
        mxl_srv_error(r, MXL_API_OPENAI, 500, "server_error", "out of memory");
        return;
    }
    if (!parse_stream(body, g, msg, sizeof msg) || !mxl_srv_parse_params(s, body, &g->params, &g->bias, msg, sizeof msg) ||
        !mxl_srv_parse_constraint(s, body, true, &g->params, msg, sizeof msg) ||
        !mxl_srv_parse_prompts(s, json_object_get(body, "prompt"), g, msg, sizeof msg) || !mxl_srv_parse_id_slot(body, g, msg, sizeof msg))
        goto bad;
    const json_t *v = json_object_get(body, "logprobs");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > MXL_SEQ_MAX_PROBS) {
            snprintf(msg, sizeof msg, "'logprobs' must be an integer between 0 and %d", MXL_SEQ_MAX_PROBS);
            goto bad;
        }
        g->logprobs = true;
        g->top_logprobs = (int)json_integer_value(v);
        g->params.n_probs = g->top_logprobs > 0 ? g->top_logprobs : 1;
    }
    mxl_gen_call_run(g);
    json_decref(body);
    return;
bad:
    fail_call(g, 400, "invalid_request_error", msg);
    json_decref(body);
}

void mxl_api_openai_models(mxl_server *s, mxl_http_req *r) {
    if (!s->model) {
        json_t *model = json_pack("{s:s, s:s, s:I, s:s, s:O, s:O}", "id", s->model_name, "object", "model", "created", (json_int_t)s->created,
                                  "owned_by", "mlxcel", "aliases", s->aliases, "tags", s->tags);
        json_t *meta = s->embedder ? json_pack("{s:I, s:I}", "n_embd", (json_int_t)mxl_embed_model_dim(s->embedder), "n_ctx_train",
                                               (json_int_t)mxl_embed_model_max_length(s->embedder))
                                   : json_pack("{s:I}", "n_ctx_train", (json_int_t)mxl_reranker_max_length(s->reranker));
        json_object_set_new(model, "meta", meta);
        mxl_http_send_json(r, 200, json_pack("{s:s, s:[o]}", "object", "list", "data", model));
        return;
    }
    json_t *model = json_pack("{s:s, s:s, s:I, s:s, s:O, s:O, s:{s:I, s:I}}", "id", s->model_name, "object", "model", "created",
                              (json_int_t)s->created, "owned_by", "mlxcel", "aliases", s->aliases, "tags", s->tags, "meta", "n_ctx_train",
                              (json_int_t)mxl_gen_model_default_ctx(s->model), "n_ctx_slot", (json_int_t)s->slot_ctx);
    json_t *llama_model = json_pack("{s:s, s:s, s:[s], s:s}", "name", s->model_name, "model", s->model_name, "capabilities", "completion",
                                    "path", s->model_path);
    mxl_http_send_json(r, 200, json_pack("{s:s, s:[o], s:[o]}", "object", "list", "data", model, "models", llama_model));
}
