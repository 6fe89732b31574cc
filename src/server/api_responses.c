/* api_responses.c - the OpenAI Responses API: POST /v1/responses (whole or streamed), the stored
 * responses (GET / DELETE /v1/responses/{id}, POST .../cancel, GET .../input_items), POST
 * /v1/responses/input_tokens. A request's items become the chat messages /v1/chat/completions
 * renders (instructions a leading developer message, function_call items an assistant turn's
 * tool_calls, function_call_output items tool messages), and its output goes through the same
 * generation call and chat output parser (gen_call.c): text becomes a message item, reasoning a
 * reasoning item, tool calls function_call items. A stored response keeps its conversation (the
 * items of every turn, output included) so previous_response_id continues it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "engine/json_schema.h"
#include "engine/model.h"
#include "io/json_read.h"
#include "server/constraint.h"
#include "server/gen_call.h"
#include "server/request.h"
#include "server/resp_store.h"
#include "server/responses.h"
#include "server/routes.h"

typedef struct mxl_resp_call {
    unsigned char owner[32];
    bool store;            /* keep it in the store */
    char conv_id[96];      /* the conversation it continues (request's `conversation`), or "" */
    json_t *skeleton;      /* the Response's fields that echo the request */
    json_t *conversation;  /* items of the earlier turns and this input (ids given); output added at the end */
    json_t *input_items;   /* this request's input items (ids given) */
    /* streaming */
    int seq, open;         /* open item: 0 none, 1 reasoning, 2 message */
    char open_id[96];
    char *buf;             /* the open item's text so far */
    size_t len, cap;
    json_t *output;        /* finished output items */
    int n_items;           /* ids given out */
    bool started;          /* its jobs were submitted (mxl_resp_started) */
    bool finalized;
    /* include "message.output_text.logprobs": the entries of tokens whose text has not gone out
     * yet, and those of the open message */
    json_t *lp_pending, *lp_message;
} mxl_resp_call;

static void owner_of(mxl_http_req *r, unsigned char owner[32]) {
    const char *h = mxl_http_header(r, "Authorization");
    const char *key = h && strncasecmp(h, "Bearer ", 7) == 0 ? h + 7 : mxl_http_header(r, "X-Api-Key");
    mxl_resp_store_owner(key, owner);
}

/* --- request items -> chat messages -------------------------------------------------------------- */

/* Text of an item's content: a string, or its text parts (input_text, output_text, text) joined
 * by "\n"; input_image parts go to parts as image_url parts when parts is set. NULL with msg. */
static json_t *content_of(const json_t *content, size_t i, json_t **parts, char *msg, size_t ml) {
    if (json_is_string(content)) return json_incref((json_t *)content);
    if (!json_is_array(content)) return snprintf(msg, ml, "input[%zu].content must be a string or an array of content parts", i), NULL;
    size_t k;
    const json_t *p;
    json_t *out = json_array();
    bool image = false;
    json_array_foreach(content, k, p) {
        const char *type = json_string_value(json_object_get(p, "type"));
        const json_t *text = json_object_get(p, "text");
        if (!type) {
            json_decref(out);
            return snprintf(msg, ml, "input[%zu].content[%zu] must be an object with a 'type'", i, k), NULL;
        }
        if (!strcmp(type, "input_text") || !strcmp(type, "output_text") || !strcmp(type, "text")) {
            if (!json_is_string(text)) {
                json_decref(out);
                return snprintf(msg, ml, "input[%zu].content[%zu].text must be a string", i, k), NULL;
            }
            json_array_append_new(out, json_pack("{s:s, s:O}", "type", "text", "text", text));
        } else if (!strcmp(type, "refusal")) {
            const json_t *t = json_object_get(p, "refusal");
            if (json_is_string(t)) json_array_append_new(out, json_pack("{s:s, s:O}", "type", "text", "text", t));
        } else if (!strcmp(type, "input_image") && json_is_string(json_object_get(p, "image_url"))) {
            json_array_append_new(out, json_pack("{s:s, s:{s:O}}", "type", "image_url", "image_url", "url", json_object_get(p, "image_url")));
            image = true;
        } else {
            json_decref(out);
            return snprintf(msg, ml, "input[%zu].content[%zu]: '%.60s' input is not supported", i, k, type), NULL;
        }
    }
    if (image || !parts) return out;
    /* text only: one string, as a string content would be */
    size_t len = 0;
    json_array_foreach(out, k, p) len += json_string_length(json_object_get(p, "text")) + 1;
    char *joined = mxl_malloc(len + 1), *w = joined;
    if (!joined) {
        json_decref(out);
        return snprintf(msg, ml, "out of memory"), NULL;
    }
    json_array_foreach(out, k, p) {
        const json_t *t = json_object_get(p, "text");
        if (w != joined) *w++ = '\n';
        memcpy(w, json_string_value(t), json_string_length(t));
        w += json_string_length(t);
    }
    json_decref(out);
    json_t *s = json_stringn(joined, (size_t)(w - joined));
    mxl_free(joined);
    return s ? s : json_string("");
}

static const char *item_type(const json_t *it) {
    const char *t = json_string_value(json_object_get(it, "type"));
    return t ? t : json_object_get(it, "role") ? "message" : NULL;
}

/* The conversation's items as chat messages. Reasoning items go to the next assistant turn's
 * reasoning_content; function_call items join the assistant turn they follow. */
json_t *mxl_srv_responses_messages(const json_t *items, char *msg, size_t ml) {
    json_t *out = json_array();
    json_t *reasoning = NULL;
    bool assistant_open = false; /* the last message is an assistant turn further items may join */
    size_t i;
    const json_t *it;
    json_array_foreach(items, i, it) {
        const char *type = json_is_object(it) ? item_type(it) : NULL;
        if (!type) {
            snprintf(msg, ml, "input[%zu] must be an object with a 'type' (or a message with a 'role')", i);
            goto fail;
        }
        if (!strcmp(type, "message")) {
            const char *role = json_string_value(json_object_get(it, "role"));
            if (!role || (strcmp(role, "user") && strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "assistant"))) {
                snprintf(msg, ml, "input[%zu].role must be one of user, system, developer, assistant", i);
                goto fail;
            }
            json_t *dummy = NULL;
            json_t *content = content_of(json_object_get(it, "content"), i, &dummy, msg, ml);
            if (!content) goto fail;
            json_t *m = json_pack("{s:s, s:o}", "role", role, "content", content);
            if (!strcmp(role, "assistant") && reasoning) json_object_set(m, "reasoning_content", reasoning);
            if (!strcmp(role, "assistant")) json_decref(reasoning), reasoning = NULL;
            json_array_append_new(out, m);
            assistant_open = !strcmp(role, "assistant");
        } else if (!strcmp(type, "function_call")) {
            const json_t *name = json_object_get(it, "name"), *args = json_object_get(it, "arguments"), *cid = json_object_get(it, "call_id");
            if (!json_is_string(name) || !json_is_string(args) || !json_is_string(cid)) {
                snprintf(msg, ml, "input[%zu]: a function_call item needs string 'call_id', 'name' and 'arguments'", i);
                goto fail;
            }
            /* templates read the arguments as an object (they apply tojson themselves) */
            json_t *a = mxl_json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
            if (!json_is_object(a)) json_decref(a), a = json_incref((json_t *)args);
            json_t *call = json_pack("{s:O, s:s, s:{s:O, s:o}}", "id", cid, "type", "function", "function", "name", name, "arguments", a);
            json_t *last = json_array_get(out, json_array_size(out) - 1);
            if (!assistant_open || !last) {
                last = json_pack("{s:s, s:s}", "role", "assistant", "content", "");
                if (reasoning) json_object_set(last, "reasoning_content", reasoning), json_decref(reasoning), reasoning = NULL;
                json_array_append_new(out, last);
                assistant_open = true;
            }
            json_t *calls = json_object_get(last, "tool_calls");
            if (!calls) json_object_set_new(last, "tool_calls", calls = json_array());
            json_array_append_new(calls, call);
        } else if (!strcmp(type, "function_call_output")) {
            const json_t *cid = json_object_get(it, "call_id"), *o = json_object_get(it, "output");
            if (!json_is_string(cid)) {
                snprintf(msg, ml, "input[%zu]: a function_call_output item needs a string 'call_id'", i);
                goto fail;
            }
            json_t *text = json_is_string(o) ? json_incref((json_t *)o) : content_of(o, i, NULL, msg, ml);
            if (!text) goto fail;
            if (json_is_array(text)) { /* parts: their text joined */
                json_t *dummy = NULL;
                json_decref(text);
                if (!(text = content_of(o, i, &dummy, msg, ml))) goto fail;
                if (!json_is_string(text)) {
                    json_decref(text);
                    snprintf(msg, ml, "input[%zu].output: only text output is supported", i);
                    goto fail;
                }
            }
            json_array_append_new(out, json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id", cid, "content", text));
            assistant_open = false;
        } else if (!strcmp(type, "reasoning")) {
            const json_t *parts = json_object_get(it, "content");
            if (!json_array_size(parts)) parts = json_object_get(it, "summary");
            size_t k;
            const json_t *p;
            json_array_foreach(parts, k, p) {
                const json_t *t = json_object_get(p, "text");
                if (!json_is_string(t)) continue;
                if (!reasoning) reasoning = json_incref((json_t *)t);
                else {
                    char *j = mxl_malloc(json_string_length(reasoning) + json_string_length(t) + 2);
                    if (!j) continue;
                    sprintf(j, "%s\n%s", json_string_value(reasoning), json_string_value(t));
                    json_decref(reasoning);
                    reasoning = json_string(j);
                    mxl_free(j);
                }
            }
        } else {
            snprintf(msg, ml, "input[%zu]: item type '%.60s' is not supported (message, function_call, function_call_output, reasoning)", i,
                     type);
            goto fail;
        }
    }
    json_decref(reasoning);
    return out;
fail:
    json_decref(reasoning);
    json_decref(out);
    return NULL;
}

/* The request's input as items with ids (a string: one user message). */
static json_t *conv_items_copy(json_t *data, void *ctx);
static void conv_append(mxl_server *s, const char *id, const unsigned char owner[32], const json_t *a, const json_t *b);

json_t *mxl_srv_responses_items(const json_t *input, const char *rid, char *msg, size_t ml) {
    json_t *out = json_array();
    if (!input || json_is_null(input)) return out; /* previous_response_id alone (input_tokens) */
    if (json_is_string(input)) {
        json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:[{s:s, s:O}]}", "type", "message", "role", "user", "status", "completed",
                                             "content", "type", "input_text", "text", input));
    } else if (json_is_array(input)) {
        size_t i;
        const json_t *it;
        json_array_foreach(input, i, it) {
            if (!json_is_object(it)) {
                json_decref(out);
                return snprintf(msg, ml, "input[%zu] must be an object", i), NULL;
            }
            json_t *c = json_deep_copy(it);
            const char *type = item_type(it);
            if (type && !json_object_get(c, "type")) json_object_set_new(c, "type", json_string(type));
            const json_t *content = json_object_get(it, "content");
            if (type && !strcmp(type, "message") && json_is_string(content)) { /* the content as one part */
                const char *role = json_string_value(json_object_get(it, "role"));
                json_object_set_new(c, "content", json_pack("[{s:s, s:O}]", "type", role && !strcmp(role, "assistant") ? "output_text" : "input_text",
                                                            "text", content));
            }
            json_array_append_new(out, c);
        }
    } else {
        json_decref(out);
        return snprintf(msg, ml, "'input' must be a string or an array of input items"), NULL;
    }
    size_t i;
    json_t *it;
    json_array_foreach(out, i, it) {
        if (json_is_string(json_object_get(it, "id"))) continue;
        const char *type = item_type(it);
        const char *pfx = type && !strcmp(type, "function_call") ? "fc" : type && !strcmp(type, "function_call_output") ? "fco"
                          : type && !strcmp(type, "reasoning")   ? "rs"
                                                                 : "msg";
        char id[128];
        snprintf(id, sizeof id, "%s_%s_in%zu", pfx, rid + 5, i);
        json_object_set_new(it, "id", json_string(id));
    }
    return out;
}

/* Responses function tools -> chat tools ({type, function: {name, description, parameters}}). */
json_t *mxl_srv_responses_tools(const json_t *tools, char *msg, size_t ml, bool *bad) {
    *bad = false;
    if (!tools || json_is_null(tools)) return NULL;
    if (!json_is_array(tools)) return *bad = true, snprintf(msg, ml, "'tools' must be an array"), NULL;
    json_t *out = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        const char *type = json_string_value(json_object_get(t, "type"));
        const json_t *name = json_object_get(t, "name");
        if (!type || strcmp(type, "function")) {
            json_decref(out);
            *bad = true;
            snprintf(msg, ml, "tools[%zu]: only function tools are supported, not '%.60s'", i, type ? type : "(no type)");
            return NULL;
        }
        if (!json_is_string(name)) {
            json_decref(out);
            *bad = true;
            snprintf(msg, ml, "tools[%zu].name must be a string", i);
            return NULL;
        }
        json_t *fn = json_pack("{s:O}", "name", name);
        const json_t *d = json_object_get(t, "description"), *p = json_object_get(t, "parameters");
        if (json_is_string(d)) json_object_set(fn, "description", (json_t *)d);
        json_object_set_new(fn, "parameters", json_is_object(p) ? json_incref((json_t *)p) : json_pack("{s:s, s:{}}", "type", "object", "properties"));
        json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
    if (!json_array_size(out)) json_decref(out), out = NULL;
    return out;
}

/* --- the request --------------------------------------------------------------------------------- */

/* Everything a create or an input_tokens request needs, read, rendered and tokenized into g;
 * false with *status and msg (400 / 404) otherwise. */

/* Input items {"type": "item_reference", "id": ...} become the item of that id among the earlier
 * items (the previous response's conversation, or the conversation's): a 404 when there is none. */
static bool resolve_references(json_t *items, const json_t *earlier, int *status, char *msg, size_t ml) {
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        if (strcmp(item_type(it) ? item_type(it) : "", "item_reference")) continue;
        const char *id = json_string_value(json_object_get(it, "id"));
        const json_t *hit = NULL;
        size_t k;
        const json_t *e;
        json_array_foreach(earlier, k, e) {
            const char *eid = json_string_value(json_object_get(e, "id"));
            if (id && eid && !strcmp(id, eid) && strcmp(item_type(e) ? item_type(e) : "", "item_reference")) hit = e;
        }
        if (!hit) {
            *status = id ? 404 : 400;
            if (!id) return snprintf(msg, ml, "input[%zu]: an item_reference needs the 'id' of an item", i), false;
            return snprintf(msg, ml, "Item with id '%.100s' not found (an item_reference names an item of the previous response or of the conversation)", id), false;
        }
        json_array_set_new(items, i, json_deep_copy(hit));
    }
    return true;
}

static bool prepare(mxl_server *s, mxl_http_req *r, const json_t *body, mxl_gen_call *g, mxl_resp_call *rc, json_t **cbody_out, int *status,
                    char *msg, size_t ml) {
    *status = 400;
    json_t *cbody = json_object(), *msgs = NULL, *chat = NULL, *kw = NULL, *urls = NULL, *prev_conv = NULL;
    *cbody_out = cbody;
    bool ok = false;
    const json_t *input = json_object_get(body, "input"), *instr = json_object_get(body, "instructions");
    const json_t *prev = json_object_get(body, "previous_response_id");
    if (instr && !json_is_null(instr) && !json_is_string(instr)) return snprintf(msg, ml, "'instructions' must be a string"), false;
    if (prev && !json_is_null(prev) && !json_is_string(prev)) return snprintf(msg, ml, "'previous_response_id' must be a string"), false;
    const json_t *conv = json_object_get(body, "conversation");
    if (conv && !json_is_null(conv)) {
        const json_t *cid = json_is_object(conv) ? json_object_get(conv, "id") : conv;
        if (!json_is_string(cid) || !json_string_length(cid) || json_string_length(cid) >= sizeof rc->conv_id)
            return snprintf(msg, ml, "'conversation' must be a conversation id or an object with its 'id'"), false;
        if (json_is_string(prev))
            return snprintf(msg, ml, "'previous_response_id' cannot be used together with 'conversation'"), false;
        bool found;
        prev_conv = mxl_resp_store_edit(s->conversations, json_string_value(cid), rc->owner, conv_items_copy, NULL, &found);
        if (!found) {
            *status = 404;
            return snprintf(msg, ml, "Conversation with id '%.100s' not found.", json_string_value(cid)), false;
        }
        snprintf(rc->conv_id, sizeof rc->conv_id, "%s", json_string_value(cid));
    }
    if (json_is_string(prev)) {
        json_t *d = mxl_resp_store_get(s->responses, json_string_value(prev), rc->owner, NULL);
        prev_conv = d ? json_incref(json_object_get(d, "conversation")) : NULL;
        json_decref(d);
        if (!json_is_array(prev_conv)) {
            json_decref(prev_conv);
            *status = 404;
            return snprintf(msg, ml, "Previous response with id '%.100s' not found.", json_string_value(prev)), false;
        }
    }
    if (!(rc->input_items = mxl_srv_responses_items(input, g->id, msg, ml))) goto done;
    if (!resolve_references(rc->input_items, prev_conv, status, msg, ml)) goto done;
    rc->conversation = prev_conv ? json_deep_copy(prev_conv) : json_array();
    json_array_extend(rc->conversation, rc->input_items);
    if (!(msgs = mxl_srv_responses_messages(rc->conversation, msg, ml))) goto done;
    if (!json_array_size(msgs) && !json_is_string(instr)) {
        snprintf(msg, ml, "'input' is required");
        goto done;
    }
    if (json_is_string(instr)) json_array_insert_new(msgs, 0, json_pack("{s:s, s:O}", "role", "developer", "content", instr));
    /* the chat request the Responses request is: sampling fields pass through as they are */
    json_object_update(cbody, (json_t *)body);
    static const char *const k_drop[] = {"input", "instructions", "tools", "tool_choice", "text", "reasoning", "max_output_tokens", "stream",
                                         "store", "previous_response_id", "conversation", "metadata", "messages", "response_format", "max_tokens"};
    for (size_t i = 0; i < sizeof k_drop / sizeof k_drop[0]; i++) json_object_del(cbody, k_drop[i]);
    const json_t *v = json_object_get(body, "max_output_tokens");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            snprintf(msg, ml, "'max_output_tokens' must be a positive integer");
            goto done;
        }
        json_object_set(cbody, "max_tokens", (json_t *)v);
    }
    v = json_object_get(body, "reasoning");
    if (v && !json_is_null(v)) {
        const json_t *eff = json_object_get(v, "effort");
        if (!json_is_object(v) || (eff && !json_is_null(eff) && !json_is_string(eff))) {
            snprintf(msg, ml, "'reasoning' must be an object with a string 'effort'");
            goto done;
        }
        if (json_is_string(eff)) {
            json_object_set(cbody, "reasoning_effort", (json_t *)eff);
            if (!strcmp(json_string_value(eff), "none")) json_object_set_new(cbody, "enable_thinking", json_false());
        }
    }
    v = json_object_get(body, "text");
    if (v && !json_is_null(v)) {
        const json_t *f = json_object_get(v, "format");
        const char *ft = json_string_value(json_object_get(f, "type"));
        if (!json_is_object(v) || (f && !ft)) {
            snprintf(msg, ml, "'text' must be an object whose 'format' has a 'type'");
            goto done;
        }
        if (ft && !strcmp(ft, "json_schema")) {
            const json_t *sc = json_object_get(f, "schema");
            if (!json_is_object(sc)) {
                snprintf(msg, ml, "'text.format.schema' must be an object");
                goto done;
            }
            json_object_set_new(cbody, "response_format", json_pack("{s:s, s:{s:O}}", "type", "json_schema", "json_schema", "schema", sc));
        } else if (ft && !strcmp(ft, "json_object")) {
            json_object_set_new(cbody, "response_format", json_pack("{s:s}", "type", "json_object"));
        } else if (ft && strcmp(ft, "text")) {
            snprintf(msg, ml, "'text.format.type' must be text, json_schema or json_object");
            goto done;
        }
    }
    bool bad = false;
    json_t *tools = mxl_srv_responses_tools(json_object_get(body, "tools"), msg, ml, &bad);
    if (bad) goto done;
    /* tool_choice: none drops the tools; required / a named function forces a call (setup_parse) */
    mxl_tool_choice tc;
    if (!mxl_srv_tool_choice_openai(json_object_get(body, "tool_choice"), &tc, msg, ml)) {
        json_decref(tools);
        goto done;
    }
    if (tc.none) json_decref(tools), tools = NULL;
    if (tools) json_object_set_new(cbody, "tools", tools);
    urls = mxl_gen_model_vlm(s->model) ? json_array() : NULL;
    mxl_chat_opts o;
    if (!(chat = mxl_srv_chat_messages(s, msgs, urls, msg, ml)) || !mxl_srv_parse_params(s, cbody, &g->params, &g->bias, msg, ml) ||
        !mxl_srv_chat_opts(s, cbody, &o, &kw, msg, ml) || !mxl_srv_parse_constraint(s, cbody, true, &g->params, msg, ml))
        goto done;
    size_t len = 0;
    mxl_error err = {0};
    if (mxl_chat_render(s->model, chat, &o, &g->prompt_text, &len, &err)) {
        snprintf(msg, ml, "%s", err.msg);
        goto done;
    }
    if (!mxl_srv_tokenize_chat(s, g, urls, len, msg, ml)) goto done;
    if (!mxl_srv_setup_parse(s, g, o.tools, &tc, msg, ml)) goto done;
    ok = true;
done:
    json_decref(prev_conv);
    json_decref(msgs);
    json_decref(chat);
    json_decref(kw);
    json_decref(urls);
    (void)r;
    return ok;
}

/* The Response fields that echo the request. */
static json_t *skeleton_of(mxl_server *s, const json_t *body, const mxl_gen_call *g, bool store) {
    const json_t *v;
    json_t *k = json_object();
    json_object_set_new(k, "object", json_string("response"));
    json_object_set_new(k, "model", json_string(s->model_name));
    json_object_set_new(k, "background", json_boolean(g->background));
    json_object_set_new(k, "error", json_null());
    json_object_set_new(k, "incomplete_details", json_null());
    v = json_object_get(body, "instructions");
    json_object_set_new(k, "instructions", json_is_string(v) ? json_incref((json_t *)v) : json_null());
    v = json_object_get(body, "max_output_tokens");
    json_object_set_new(k, "max_output_tokens", json_is_integer(v) ? json_incref((json_t *)v) : json_null());
    v = json_object_get(body, "metadata");
    json_object_set_new(k, "metadata", json_is_object(v) ? json_deep_copy(v) : json_object());
    json_object_set_new(k, "parallel_tool_calls", json_true());
    v = json_object_get(body, "previous_response_id");
    json_object_set_new(k, "previous_response_id", json_is_string(v) ? json_incref((json_t *)v) : json_null());
    v = json_object_get(json_object_get(body, "reasoning"), "effort");
    json_object_set_new(k, "reasoning", json_pack("{s:o, s:n}", "effort", json_is_string(v) ? json_incref((json_t *)v) : json_null(), "summary"));
    json_object_set_new(k, "store", json_boolean(store));
    json_object_set_new(k, "temperature", json_real(g->params.sampling.temp));
    v = json_object_get(body, "text");
    json_object_set_new(k, "text", json_is_object(v) ? json_deep_copy(v) : json_pack("{s:{s:s}}", "format", "type", "text"));
    v = json_object_get(body, "tool_choice");
    json_object_set_new(k, "tool_choice", v && !json_is_null(v) ? json_deep_copy(v) : json_string("auto"));
    v = json_object_get(body, "tools");
    json_object_set_new(k, "tools", json_is_array(v) ? json_deep_copy(v) : json_array());
    json_object_set_new(k, "top_p", json_real(g->params.sampling.top_p));
    json_object_set_new(k, "truncation", json_string("disabled"));
    json_object_set_new(k, "user", json_null());
    json_object_set_new(k, "usage", json_null());
    return k;
}

/* --- the Response ---------------------------------------------------------------------------------- */

static json_t *usage_of(const mxl_srv_channel *c) {
    return json_pack("{s:I, s:{s:I}, s:I, s:{s:i}, s:I}", "input_tokens", (json_int_t)c->prompt_tokens, "input_tokens_details", "cached_tokens",
                     (json_int_t)c->cached_tokens, "output_tokens", (json_int_t)c->completion_tokens, "output_tokens_details", "reasoning_tokens",
                     0, "total_tokens", (json_int_t)(c->prompt_tokens + c->completion_tokens));
}

/* The Response object: the skeleton with id, time, status, output (a new reference) and usage. */
static json_t *response_json(const mxl_gen_call *g, const char *status, json_t *output, bool usage, const char *incomplete, const char *error) {
    json_t *o = json_deep_copy(g->resp->skeleton);
    json_object_set_new(o, "id", json_string(g->id));
    json_object_set_new(o, "created_at", json_integer(g->created));
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "output", output ? json_incref(output) : json_array());
    if (usage && g->ch) json_object_set_new(o, "usage", usage_of(g->ch));
    if (incomplete) json_object_set_new(o, "incomplete_details", json_pack("{s:s}", "reason", incomplete));
    if (error) json_object_set_new(o, "error", json_pack("{s:s, s:s}", "code", "server_error", "message", error));
    return o;
}

static void next_id(mxl_gen_call *g, const char *pfx, char *out, size_t n) { snprintf(out, n, "%s_%s_%d", pfx, g->id + 5, g->resp->n_items++); }

static json_t *message_item(const char *id, const char *text, size_t len, const char *status) {
    json_t *t = json_stringn(text ? text : "", text ? len : 0);
    return json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:o, s:[], s:[]}]}", "id", id, "type", "message", "role", "assistant", "status", status, "content",
                     "type", "output_text", "text", t ? t : json_string(""), "annotations", "logprobs");
}

static json_t *reasoning_item(const char *id, const char *text, size_t len) {
    json_t *t = json_stringn(text ? text : "", text ? len : 0);
    return json_pack("{s:s, s:s, s:[], s:[{s:s, s:o}]}", "id", id, "type", "reasoning", "summary", "content", "type", "reasoning_text", "text",
                     t ? t : json_string(""));
}

static json_t *call_item(const char *id, const json_t *call, const char *status) {
    const json_t *fn = json_object_get(call, "function");
    const json_t *args = json_object_get(fn, "arguments");
    return json_pack("{s:s, s:s, s:s, s:O, s:O, s:o}", "id", id, "type", "function_call", "status", status, "call_id", json_object_get(call, "id"),
                     "name", json_object_get(fn, "name"), "arguments", json_is_string(args) ? json_incref((json_t *)args) : json_string("{}"));
}

/* Stores the finished response with its conversation (input and output items). */
static void store_final(mxl_gen_call *g, json_t *response) {
    mxl_resp_call *rc = g->resp;
    rc->finalized = true;
    /* a conversation gains the turn's input and output items once the turn is done */
    const char *status = json_string_value(json_object_get(response, "status"));
    if (rc->conv_id[0] && status && (!strcmp(status, "completed") || !strcmp(status, "incomplete")))
        conv_append(g->srv, rc->conv_id, rc->owner, rc->input_items, json_object_get(response, "output"));
    if (!rc->store) return;
    json_t *conv = json_deep_copy(rc->conversation);
    json_array_extend(conv, json_object_get(response, "output"));
    json_t *d = json_pack("{s:O, s:O, s:o}", "response", response, "input_items", rc->input_items, "conversation", conv);
    /* only over its in_progress entry: one deleted (or evicted) meanwhile stays gone */
    mxl_resp_store_replace(g->srv->responses, g->id, rc->owner, d);
    json_decref(d);
}

static const mxl_srv_event *final_event(const mxl_srv_channel *c) {
    const mxl_srv_event *fin = NULL;
    for (size_t i = 0; i < c->n_ev; i++)
        if (c->ev[i].final) fin = &c->ev[i];
    return fin;
}

/* include "message.output_text.logprobs" on a whole response: the message's tokens are the
 * answer's, less those of the reasoning before it (the last tokens that spell the message's
 * text); with tool calls they go with the message only when it is all the text there is. */
static void whole_logprobs(mxl_gen_call *g, json_t *item, size_t text_len, bool split) {
    mxl_srv_channel *c = g->ch;
    json_t *all = json_array();
    for (size_t i = 0; i < c->n_ev; i++)
        if (c->ev[i].index == 0 && c->ev[i].token >= 0 && !c->ev[i].progress) json_array_append_new(all, mxl_gen_token_logprob(g, &c->ev[i]));
    size_t from = 0;
    if (split) { /* the tail whose tokens hold the message's text */
        size_t n = json_array_size(all), have = 0;
        from = n;
        while (from > 0 && have < text_len) have += json_string_length(json_object_get(json_array_get(all, --from), "token"));
    }
    json_t *lp = json_array();
    for (size_t i = from; i < json_array_size(all); i++) json_array_append(lp, json_array_get(all, i));
    json_decref(all);
    json_object_set_new(json_array_get(json_object_get(item, "content"), 0), "logprobs", lp);
}

void mxl_resp_respond_whole(mxl_gen_call *g, const char *fail) {
    mxl_srv_channel *c = g->ch;
    if (fail && strcmp(fail, "cancelled")) {
        json_t *resp = response_json(g, "failed", NULL, true, NULL, c->error[0] ? c->error : "generation failed");
        store_final(g, resp);
        json_decref(resp);
        if (g->r) mxl_srv_error(g->r, MXL_API_OPENAI, 500, "server_error", "%s", c->error[0] ? c->error : "generation failed");
        return;
    }
    json_t *output = json_array();
    char id[128];
    json_t *parsed = NULL;
    mxl_error perr = {0};
    if (g->parse && !mxl_chat_parse(&g->syn, c->text ? c->text : "", c->text_len, &parsed, &perr)) {
        const json_t *rs = json_object_get(parsed, "reasoning_content"), *content = json_object_get(parsed, "content");
        if (json_is_string(rs) && json_string_length(rs)) {
            next_id(g, "rs", id, sizeof id);
            json_array_append_new(output, reasoning_item(id, json_string_value(rs), json_string_length(rs)));
        }
        const json_t *calls = json_object_get(parsed, "tool_calls");
        if ((json_is_string(content) && json_string_length(content)) || !json_array_size(calls)) {
            next_id(g, "msg", id, sizeof id);
            json_t *item = message_item(id, json_string_value(content), json_string_length(content), "completed");
            if (g->logprobs && (!json_array_size(calls) || json_string_length(content) == c->text_len))
                whole_logprobs(g, item, json_string_length(content), json_string_length(content) != c->text_len);
            json_array_append_new(output, item);
        }
        size_t k;
        const json_t *call;
        json_array_foreach(calls, k, call) {
            next_id(g, "fc", id, sizeof id);
            json_array_append_new(output, call_item(id, call, "completed"));
        }
        json_decref(parsed);
    } else {
        next_id(g, "msg", id, sizeof id);
        json_t *item = message_item(id, c->text, c->text_len, "completed");
        if (g->logprobs) whole_logprobs(g, item, c->text_len, false);
        json_array_append_new(output, item);
    }
    const mxl_srv_event *fin = final_event(c);
    bool length = fin && fin->finish_reason && !strcmp(fin->finish_reason, "length");
    json_t *resp = response_json(g, fail ? "cancelled" : length ? "incomplete" : "completed", output, true, length ? "max_output_tokens" : NULL, NULL);
    json_decref(output);
    store_final(g, resp);
    if (!g->r) { /* a background response: stored only */
        json_decref(resp);
        return;
    }
    if ((g->srv->cfg->verbose || g->verbose)) json_object_set_new(resp, "__verbose", json_pack("{s:s}", "prompt", g->prompt_text ? g->prompt_text : ""));
    mxl_http_send_json(g->r, 200, resp);
}

void mxl_resp_send_started(mxl_gen_call *g) { mxl_http_send_json(g->r, 200, response_json(g, "in_progress", NULL, true, NULL, NULL)); }

/* --- streaming ------------------------------------------------------------------------------------- */

static void emit(mxl_gen_call *g, const char *type, json_t *ev) {
    json_object_set_new(ev, "type", json_string(type));
    /* llama-server's telemetry: the timings on each text delta (timings_per_token) and at the end */
    if (g->ch && ((g->timings_per_token && !strcmp(type, "response.output_text.delta")) || !strcmp(type, "response.completed") ||
                  !strcmp(type, "response.incomplete")))
        json_object_set_new(ev, "timings", mxl_gen_call_timings(g));
    json_object_set_new(ev, "sequence_number", json_integer(g->resp->seq++));
    mxl_gen_call_emit(g, type, ev);
}

static void buf_add(mxl_resp_call *rc, const char *t, size_t n) {
    if (rc->len + n + 1 > rc->cap) {
        size_t cap = rc->cap ? rc->cap : 256;
        while (cap < rc->len + n + 1) cap *= 2;
        char *p = mxl_realloc(rc->buf, cap);
        if (!p) return;
        rc->buf = p;
        rc->cap = cap;
    }
    memcpy(rc->buf + rc->len, t, n);
    rc->len += n;
    rc->buf[rc->len] = 0;
}

static int out_index(const mxl_resp_call *rc) { return (int)json_array_size(rc->output); }

static void close_item(mxl_gen_call *g) {
    mxl_resp_call *rc = g->resp;
    int oi = out_index(rc);
    if (rc->open == 2) {
        json_t *t = json_stringn(rc->buf ? rc->buf : "", rc->len);
        if (!t) t = json_string("");
        json_t *lp = rc->lp_message ? rc->lp_message : json_array();
        rc->lp_message = NULL;
        emit(g, "response.output_text.done", json_pack("{s:s, s:i, s:i, s:O, s:O}", "item_id", rc->open_id, "output_index", oi, "content_index", 0,
                                                       "text", t, "logprobs", lp));
        emit(g, "response.content_part.done", json_pack("{s:s, s:i, s:i, s:{s:s, s:O, s:[], s:O}}", "item_id", rc->open_id, "output_index", oi,
                                                        "content_index", 0, "part", "type", "output_text", "text", t, "annotations", "logprobs", lp));
        json_decref(t);
        json_t *item = message_item(rc->open_id, rc->buf, rc->len, "completed");
        json_object_set_new(json_array_get(json_object_get(item, "content"), 0), "logprobs", lp);
        emit(g, "response.output_item.done", json_pack("{s:i, s:O}", "output_index", oi, "item", item));
        json_array_append_new(rc->output, item);
    } else if (rc->open == 1) {
        json_t *t = json_stringn(rc->buf ? rc->buf : "", rc->len);
        if (!t) t = json_string("");
        emit(g, "response.reasoning_text.done", json_pack("{s:s, s:i, s:i, s:o}", "item_id", rc->open_id, "output_index", oi, "content_index", 0,
                                                          "text", t));
        json_t *item = reasoning_item(rc->open_id, rc->buf, rc->len);
        emit(g, "response.output_item.done", json_pack("{s:i, s:O}", "output_index", oi, "item", item));
        json_array_append_new(rc->output, item);
    }
    rc->open = 0;
    rc->len = 0;
    if (rc->buf) rc->buf[0] = 0;
}

/* Opens an item of kind 1 reasoning / 2 message unless it is the open one. */
static void open_item(mxl_gen_call *g, int kind) {
    mxl_resp_call *rc = g->resp;
    if (rc->open == kind) return;
    close_item(g);
    rc->open = kind;
    int oi = out_index(rc);
    if (kind == 2) {
        next_id(g, "msg", rc->open_id, sizeof rc->open_id);
        emit(g, "response.output_item.added", json_pack("{s:i, s:{s:s, s:s, s:s, s:s, s:[]}}", "output_index", oi, "item", "id", rc->open_id, "type",
                                                        "message", "status", "in_progress", "role", "assistant", "content"));
        emit(g, "response.content_part.added", json_pack("{s:s, s:i, s:i, s:{s:s, s:s, s:[], s:[]}}", "item_id", rc->open_id, "output_index", oi,
                                                         "content_index", 0, "part", "type", "output_text", "text", "", "annotations", "logprobs"));
    } else {
        next_id(g, "rs", rc->open_id, sizeof rc->open_id);
        emit(g, "response.output_item.added", json_pack("{s:i, s:{s:s, s:s, s:[], s:[]}}", "output_index", oi, "item", "id", rc->open_id, "type",
                                                        "reasoning", "summary", "content"));
    }
}

/* The logprobs entries of the tokens whose text a message delta carries (with include
 * "message.output_text.logprobs"; an empty list otherwise). Tokens whose text went to reasoning or
 * a tool call are dropped (lp_drop). */
static json_t *lp_take(mxl_resp_call *rc) {
    json_t *lp = rc->lp_pending ? rc->lp_pending : json_array();
    rc->lp_pending = NULL;
    if (!rc->lp_message) rc->lp_message = json_array();
    json_array_extend(rc->lp_message, lp);
    return lp;
}

static void lp_drop(mxl_resp_call *rc) {
    json_decref(rc->lp_pending);
    rc->lp_pending = NULL;
}

static void delta(mxl_gen_call *g, int kind, const json_t *text) {
    if (!json_string_length(text)) return;
    open_item(g, kind);
    mxl_resp_call *rc = g->resp;
    buf_add(rc, json_string_value(text), json_string_length(text));
    if (kind != 2) lp_drop(rc);
    emit(g, kind == 2 ? "response.output_text.delta" : "response.reasoning_text.delta",
         kind == 2 ? json_pack("{s:s, s:i, s:i, s:O, s:o}", "item_id", rc->open_id, "output_index", out_index(rc), "content_index", 0, "delta", text,
                               "logprobs", lp_take(rc))
                   : json_pack("{s:s, s:i, s:i, s:O}", "item_id", rc->open_id, "output_index", out_index(rc), "content_index", 0, "delta", text));
}

static void call_events(mxl_gen_call *g, const json_t *call) {
    mxl_resp_call *rc = g->resp;
    lp_drop(rc);
    close_item(g);
    char id[128];
    next_id(g, "fc", id, sizeof id);
    int oi = out_index(rc);
    json_t *item = call_item(id, call, "in_progress");
    json_t *args = json_incref(json_object_get(item, "arguments"));
    json_object_set_new(item, "arguments", json_string(""));
    emit(g, "response.output_item.added", json_pack("{s:i, s:o}", "output_index", oi, "item", item));
    emit(g, "response.function_call_arguments.delta", json_pack("{s:s, s:i, s:O}", "item_id", id, "output_index", oi, "delta", args));
    emit(g, "response.function_call_arguments.done",
         json_pack("{s:s, s:i, s:O, s:O}", "item_id", id, "output_index", oi, "name", json_object_get(json_object_get(call, "function"), "name"),
                   "arguments", args));
    json_decref(args);
    item = call_item(id, call, "completed");
    emit(g, "response.output_item.done", json_pack("{s:i, s:O}", "output_index", oi, "item", item));
    json_array_append_new(rc->output, item);
}

void mxl_resp_started(mxl_gen_call *g) {
    mxl_resp_call *rc = g->resp;
    rc->started = true;
    json_t *resp = response_json(g, "in_progress", NULL, false, NULL, NULL);
    if (rc->store) {
        json_t *d = json_pack("{s:O, s:O, s:n}", "response", resp, "input_items", rc->input_items, "conversation");
        mxl_resp_store_put(g->srv->responses, g->id, rc->owner, d, g->ch);
        json_decref(d);
    }
    if (g->stream) {
        emit(g, "response.created", json_pack("{s:O}", "response", resp));
        emit(g, "response.in_progress", json_pack("{s:O}", "response", resp));
    }
    json_decref(resp);
}

void mxl_resp_progress_event(mxl_gen_call *g, const mxl_srv_event *e) {
    if (!g->stream || g->resp->finalized) return;
    json_t *ev = mxl_gen_progress_fields(e);
    if (!ev) return;
    json_object_set_new(ev, "response", json_pack("{s:s, s:s, s:s}", "id", g->id, "object", "response", "status", "in_progress"));
    emit(g, "response.in_progress", ev);
}

void mxl_resp_stream_event(mxl_gen_call *g, const mxl_srv_event *e, const json_t *text, bool failed) {
    mxl_resp_call *rc = g->resp;
    if (rc->finalized) return;
    if (g->logprobs && e->token >= 0) {
        if (!rc->lp_pending) rc->lp_pending = json_array();
        json_array_append_new(rc->lp_pending, mxl_gen_token_logprob(g, e));
    }
    if (g->parse) {
        mxl_error perr = {0};
        if (!g->pstream[0] && mxl_chat_stream_create(&g->syn, &g->pstream[0], &perr)) return;
        json_t *deltas = json_array();
        mxl_chat_stream_feed(g->pstream[0], json_string_value(text), json_string_length(text), e->final, deltas, &perr);
        size_t k;
        json_t *d;
        json_array_foreach(deltas, k, d) {
            const json_t *v;
            if ((v = json_object_get(d, "reasoning_content")) && json_is_string(v)) delta(g, 1, v);
            if ((v = json_object_get(d, "content")) && json_is_string(v)) delta(g, 2, v);
            size_t q;
            const json_t *call;
            json_array_foreach(json_object_get(d, "tool_calls"), q, call) call_events(g, call);
        }
        json_decref(deltas);
    } else {
        delta(g, 2, text);
    }
    if (!e->final) return;
    bool cancelled = failed && e->finish_reason && !strcmp(e->finish_reason, "cancelled");
    if (!json_array_size(rc->output) && rc->open != 2) open_item(g, 2); /* at least one (empty) message */
    close_item(g);
    bool length = !failed && e->finish_reason && !strcmp(e->finish_reason, "length");
    const char *status = failed ? (cancelled ? "cancelled" : "failed") : length ? "incomplete" : "completed";
    json_t *resp = response_json(g, status, rc->output, true, length ? "max_output_tokens" : NULL,
                                 failed && !cancelled ? (g->ch->error[0] ? g->ch->error : "generation failed") : NULL);
    store_final(g, resp);
    /* the API has no event of its own for a cancelled response: it ends as response.incomplete
     * does (a typed event for the SDKs), with status "cancelled" */
    emit(g, failed ? (cancelled ? "response.incomplete" : "response.failed") : length ? "response.incomplete" : "response.completed",
         json_pack("{s:o}", "response", resp));
}

void mxl_resp_call_free(mxl_gen_call *g) {
    mxl_resp_call *rc = g->resp;
    if (rc->started && !rc->finalized && rc->store) { /* ended before its last event: the client went away, or an error */
        bool cancelled = atomic_load(&g->ch->cancel);
        json_t *resp = response_json(g, cancelled ? "cancelled" : "failed", rc->output, true, NULL, cancelled ? NULL : "the response did not finish");
        store_final(g, resp);
        json_decref(resp);
    }
    if (rc->store) mxl_resp_store_detach(g->srv->responses, g->id, rc->owner); /* its channel goes with the call */
    json_decref(rc->skeleton);
    json_decref(rc->conversation);
    json_decref(rc->input_items);
    json_decref(rc->output);
    json_decref(rc->lp_pending);
    json_decref(rc->lp_message);
    mxl_free(rc->buf);
    mxl_free(rc);
    g->resp = NULL;
}

/* --- routes ---------------------------------------------------------------------------------------- */

/* include (what the output adds: "message.output_text.logprobs" gives each output_text its
 * tokens' logprobs; the other values name outputs mlxcel has not got, and add nothing) and
 * top_logprobs (0-20 alternatives per token). False with msg (a 400). */
static bool parse_include(const json_t *body, mxl_gen_call *g, char *msg, size_t ml) {
    const json_t *inc = json_object_get(body, "include"), *top = json_object_get(body, "top_logprobs");
    if (inc && !json_is_null(inc)) {
        if (!json_is_array(inc)) return snprintf(msg, ml, "'include' must be an array of strings"), false;
        size_t i;
        const json_t *v;
        json_array_foreach(inc, i, v) {
            if (!json_is_string(v)) return snprintf(msg, ml, "'include' must be an array of strings"), false;
            if (!strcmp(json_string_value(v), "message.output_text.logprobs")) g->logprobs = true;
        }
    }
    if (top && !json_is_null(top)) {
        if (!json_is_integer(top) || json_integer_value(top) < 0 || json_integer_value(top) > 20)
            return snprintf(msg, ml, "'top_logprobs' must be an integer between 0 and 20"), false;
        g->top_logprobs = (int)json_integer_value(top);
    }
    g->params.n_probs = g->logprobs ? (g->top_logprobs > 0 ? g->top_logprobs : 1) : 0;
    return true;
}

static mxl_gen_call *new_call(mxl_server *s, mxl_http_req *r) {
    mxl_gen_call *g = mxl_calloc(1, sizeof *g);
    mxl_resp_call *rc = g ? mxl_calloc(1, sizeof *rc) : NULL;
    if (!rc) {
        mxl_free(g);
        return NULL;
    }
    g->srv = s;
    g->r = r;
    g->kind = MXL_GEN_RESPONSES;
    g->n = 1;
    g->resp = rc;
    rc->output = json_array();
    owner_of(r, rc->owner);
    return g;
}

/* The request's body and a call for it; NULL after answering (bad JSON, out of memory). */
static mxl_gen_call *begin_call(mxl_server *s, mxl_http_req *r, json_t **body) {
    *body = mxl_srv_body_json(s, r, MXL_API_OPENAI);
    if (!*body) return NULL;
    mxl_gen_call *g = new_call(s, r);
    if (!g) {
        json_decref(*body);
        mxl_srv_error(r, MXL_API_OPENAI, 500, "server_error", "out of memory");
    }
    return g;
}

/* A request that prepare() or the checks refused: 404 for an unknown id, else 400. */
static void refuse(mxl_http_req *r, int status, const char *msg) {
    mxl_srv_error(r, MXL_API_OPENAI, status, status == 404 ? "not_found_error" : "invalid_request_error", "%s", msg);
}

void mxl_api_responses_create(mxl_server *s, mxl_http_req *r) {
    json_t *body, *cbody = NULL;
    mxl_gen_call *g = begin_call(s, r, &body);
    if (!g) return;
    char msg[512] = "";
    int status = 400;
    /* the id first: stored items are named after it */
    g->created = (long)time(NULL);
    snprintf(g->id, sizeof g->id, "resp_%llx%llx", (unsigned long long)g->created, (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    const json_t *st = json_object_get(body, "stream"), *sto = json_object_get(body, "store"), *bg = json_object_get(body, "background");
    if ((st && !json_is_null(st) && !json_is_boolean(st)) || (sto && !json_is_null(sto) && !json_is_boolean(sto))) {
        snprintf(msg, sizeof msg, "'stream' and 'store' must be booleans");
        goto bad;
    }
    if (bg && !json_is_null(bg) && !json_is_boolean(bg)) {
        snprintf(msg, sizeof msg, "'background' must be a boolean");
        goto bad;
    }
    /* background: answered at once (in_progress), run on, polled with GET /v1/responses/{id} */
    g->background = json_is_true(bg);
    if (g->background && (json_is_false(sto) || !mxl_resp_store_enabled(s->responses))) {
        snprintf(msg, sizeof msg, "a 'background' response must be stored ('store': true, and a response store on this server)");
        goto bad;
    }
    if (g->background && json_is_true(st)) {
        snprintf(msg, sizeof msg, "'background' with 'stream' is not supported by this server: poll GET /v1/responses/{id}");
        goto bad;
    }
    const json_t *md = json_object_get(body, "metadata");
    if (md && !json_is_null(md) && !json_is_object(md)) {
        snprintf(msg, sizeof msg, "'metadata' must be an object");
        goto bad;
    }
    g->stream = json_is_true(st);
    g->resp->store = !json_is_false(sto) && mxl_resp_store_enabled(s->responses);
    if (!prepare(s, r, body, g, g->resp, &cbody, &status, msg, sizeof msg)) goto bad;
    g->verbose = json_is_true(json_object_get(body, "verbose"));
    g->return_progress = json_is_true(json_object_get(body, "return_progress")); /* llama-server's telemetry */
    g->timings_per_token = json_is_true(json_object_get(body, "timings_per_token"));
    if (!parse_include(body, g, msg, sizeof msg)) goto bad;
    g->resp->skeleton = skeleton_of(s, body, g, !json_is_false(sto));
    if (g->resp->conv_id[0]) json_object_set_new(g->resp->skeleton, "conversation", json_pack("{s:s}", "id", g->resp->conv_id));
    mxl_gen_call_run(g); /* keeps g->id and created: see gen_call.c */
    json_decref(cbody);
    json_decref(body);
    return;
bad:
    refuse(r, status, msg);
    mxl_gen_call_free(g);
    json_decref(cbody);
    json_decref(body);
}

void mxl_api_responses_input_tokens(mxl_server *s, mxl_http_req *r) {
    json_t *body, *cbody = NULL;
    mxl_gen_call *g = begin_call(s, r, &body);
    if (!g) return;
    char msg[512] = "";
    int status = 400;
    snprintf(g->id, sizeof g->id, "resp_count");
    if (prepare(s, r, body, g, g->resp, &cbody, &status, msg, sizeof msg))
        mxl_http_send_json(r, 200, json_pack("{s:s, s:I}", "object", "response.input_tokens", "input_tokens", (json_int_t)g->n_prompt));
    else
        refuse(r, status, msg);
    mxl_gen_call_free(g);
    json_decref(cbody);
    json_decref(body);
}

static void not_found(mxl_http_req *r, const char *id) {
    mxl_srv_error(r, MXL_API_OPENAI, 404, "not_found_error", "Response with id '%.100s' not found.", id);
}

/* GET .../input_items: a list page (order desc by default, limit 20, after an id). */
static void input_items(mxl_http_req *r, const json_t *items) {
    const char *order = mxl_http_query(r, "order"), *after = mxl_http_query(r, "after"), *lim = mxl_http_query(r, "limit");
    bool asc = order && !strcmp(order, "asc");
    if (order && !asc && strcmp(order, "desc")) {
        mxl_srv_error(r, MXL_API_OPENAI, 400, "invalid_request_error", "'order' must be asc or desc");
        return;
    }
    long limit = lim ? strtol(lim, NULL, 10) : 20;
    if (limit < 1 || limit > 100) {
        mxl_srv_error(r, MXL_API_OPENAI, 400, "invalid_request_error", "'limit' must be between 1 and 100");
        return;
    }
    size_t n = json_array_size(items);
    json_t *data = json_array();
    bool started = !after, more = false;
    for (size_t k = 0; k < n; k++) {
        const json_t *it = json_array_get(items, asc ? k : n - 1 - k);
        if (!started) {
            started = !strcmp(json_string_value(json_object_get(it, "id")) ? json_string_value(json_object_get(it, "id")) : "", after);
            continue;
        }
        if ((long)json_array_size(data) == limit) {
            more = true;
            break;
        }
        json_array_append(data, (json_t *)it);
    }
    size_t dn = json_array_size(data);
    json_t *first = dn ? json_object_get(json_array_get(data, 0), "id") : NULL, *last = dn ? json_object_get(json_array_get(data, dn - 1), "id") : NULL;
    mxl_http_send_json(r, 200, json_pack("{s:s, s:o, s:O, s:O, s:b}", "object", "list", "data", data, "first_id", first ? first : json_null(),
                                         "last_id", last ? last : json_null(), "has_more", more));
}

void mxl_api_responses_item(mxl_server *s, mxl_http_req *r, const char *rest) {
    const char *method = mxl_http_method(r);
    char id[128];
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    const char *sub = slash ? slash + 1 : "";
    if (n == 0 || n >= sizeof id) {
        mxl_srv_error(r, MXL_API_OPENAI, 404, "not_found_error", "File Not Found");
        return;
    }
    memcpy(id, rest, n);
    id[n] = 0;
    if (!*sub && !strcmp(id, "input_tokens")) {
        if (strcmp(method, "POST")) mxl_srv_error(r, MXL_API_OPENAI, 405, "invalid_request_error", "method %s is not allowed on this route", method);
        else mxl_api_responses_input_tokens(s, r);
        return;
    }
    bool get = !strcmp(method, "GET"), del = !strcmp(method, "DELETE"), post = !strcmp(method, "POST");
    if (!(*sub ? (!strcmp(sub, "cancel") && post) || (!strcmp(sub, "input_items") && get) : get || del)) {
        if (*sub && strcmp(sub, "cancel") && strcmp(sub, "input_items")) mxl_srv_error(r, MXL_API_OPENAI, 404, "not_found_error", "File Not Found");
        else mxl_srv_error(r, MXL_API_OPENAI, 405, "invalid_request_error", "method %s is not allowed on this route", method);
        return;
    }
    unsigned char owner[32];
    owner_of(r, owner);
    if (del) {
        if (!mxl_resp_store_delete(s->responses, id, owner)) {
            not_found(r, id);
            return;
        }
        mxl_http_send_json(r, 200, json_pack("{s:s, s:s, s:b}", "id", id, "object", "response", "deleted", 1));
        return;
    }
    bool in_progress = false;
    json_t *d = mxl_resp_store_get(s->responses, id, owner, &in_progress);
    if (!d) {
        not_found(r, id);
        return;
    }
    if (!strcmp(sub, "input_items")) {
        input_items(r, json_object_get(d, "input_items"));
    } else if (!strcmp(sub, "cancel")) {
        int rc = mxl_resp_store_cancel(s->responses, id, owner);
        if (rc == 1) {
            json_t *resp = json_deep_copy(json_object_get(d, "response"));
            json_object_set_new(resp, "status", json_string("cancelled"));
            mxl_http_send_json(r, 200, resp);
        } else if (rc == 0) {
            mxl_srv_error(r, MXL_API_OPENAI, 400, "invalid_request_error", "Cannot cancel a response with status '%s': only in-progress responses can be cancelled",
                          json_string_value(json_object_get(json_object_get(d, "response"), "status")));
        } else {
            not_found(r, id);
        }
    } else {
        mxl_http_send_json(r, 200, json_deep_copy(json_object_get(d, "response")));
    }
    json_decref(d);
}

/* --- the Conversations API ------------------------------------------------------------------------- */
/* A conversation is an entry of s->conversations (the responses' store kind, resp_store.h): data
 * {"conv": the Conversation object, "items": its items in order}, changed in place and read only
 * under the store's lock (mxl_resp_store_edit): callers get deep copies. */

#define CONV_MAX_NEW_ITEMS 20 /* items one create or items.create call may add (as OpenAI) */

static json_t *conv_items_copy(json_t *data, void *ctx) {
    (void)ctx;
    return json_deep_copy(json_object_get(data, "items"));
}

static json_t *conv_obj_copy(json_t *data, void *ctx) {
    (void)ctx;
    return json_deep_copy(json_object_get(data, "conv"));
}

static json_t *conv_set_metadata(json_t *data, void *ctx) {
    json_object_set(json_object_get(data, "conv"), "metadata", (json_t *)ctx);
    return json_deep_copy(json_object_get(data, "conv"));
}

/* ctx: the items to add; returns them */
static json_t *conv_add_items(json_t *data, void *ctx) {
    json_array_extend(json_object_get(data, "items"), (json_t *)ctx);
    return json_deep_copy((json_t *)ctx);
}

static json_t *conv_item_get(json_t *data, void *ctx) {
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(data, "items"), i, it) {
        const char *iid = json_string_value(json_object_get(it, "id"));
        if (iid && !strcmp(iid, (const char *)ctx)) return json_deep_copy(it);
    }
    return NULL;
}

/* removes the item; returns the conversation (NULL: no such item) */
static json_t *conv_item_del(json_t *data, void *ctx) {
    json_t *items = json_object_get(data, "items");
    for (size_t i = 0; i < json_array_size(items); i++) {
        const char *iid = json_string_value(json_object_get(json_array_get(items, i), "id"));
        if (iid && !strcmp(iid, (const char *)ctx)) {
            json_array_remove(items, i);
            return json_deep_copy(json_object_get(data, "conv"));
        }
    }
    return NULL;
}

/* A response's turn joins its conversation (gone meanwhile: nothing). */
static void conv_append(mxl_server *s, const char *id, const unsigned char owner[32], const json_t *a, const json_t *b) {
    json_t *add = json_array();
    json_array_extend(add, (json_t *)a);
    json_array_extend(add, (json_t *)b);
    bool found;
    json_decref(mxl_resp_store_edit(s->conversations, id, owner, conv_add_items, add, &found));
    json_decref(add);
}

/* metadata: at most 16 string pairs, keys up to 64 and values up to 512 characters (as OpenAI). */
static bool metadata_ok(const json_t *md, char *msg, size_t ml) {
    if (!json_is_object(md)) return snprintf(msg, ml, "'metadata' must be an object of strings"), false;
    if (json_object_size(md) > 16) return snprintf(msg, ml, "'metadata' may hold at most 16 keys"), false;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)md, k, v) {
        if (!json_is_string(v)) return snprintf(msg, ml, "'metadata.%.64s' must be a string", k), false;
        if (strlen(k) > 64 || json_string_length(v) > 512)
            return snprintf(msg, ml, "'metadata' keys are at most 64 characters and values at most 512"), false;
    }
    return true;
}

/* The request's items (at most CONV_MAX_NEW_ITEMS) as stored items with new ids; NULL with msg when
 * they are not an array of items the Responses input accepts. */
static json_t *conv_new_items(mxl_server *s, const json_t *items, char *msg, size_t ml) {
    if (!json_is_array(items)) return snprintf(msg, ml, "'items' must be an array of items"), NULL;
    if (json_array_size(items) > CONV_MAX_NEW_ITEMS) return snprintf(msg, ml, "'items' may hold at most %d items", CONV_MAX_NEW_ITEMS), NULL;
    char rid[96];
    snprintf(rid, sizeof rid, "item_%llx%llx", (unsigned long long)time(NULL), (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    json_t *out = mxl_srv_responses_items(items, rid, msg, ml);
    if (!out) return NULL;
    json_t *msgs = mxl_srv_responses_messages(out, msg, ml); /* the items a later turn renders: checked now */
    if (!msgs) {
        json_decref(out);
        return NULL;
    }
    json_decref(msgs);
    size_t i;
    json_t *it;
    json_array_foreach(out, i, it) {
        const char *iid = json_string_value(json_object_get(it, "id"));
        if (strlen(iid) >= 96) {
            json_decref(out);
            return snprintf(msg, ml, "items[%zu].id is too long", i), NULL;
        }
        if (!strcmp(item_type(it), "message") && !json_object_get(it, "status")) json_object_set_new(it, "status", json_string("completed"));
    }
    return out;
}

static void conv_not_found(mxl_http_req *r, const char *id) {
    mxl_srv_error(r, MXL_API_OPENAI, 404, "not_found_error", "Conversation with id '%.100s' not found.", id);
}

static void conv_create(mxl_server *s, mxl_http_req *r, const unsigned char owner[32]) {
    json_t *body = mxl_srv_body_json(s, r, MXL_API_OPENAI);
    if (!body) return;
    char msg[512] = "";
    json_t *items = NULL, *conv = NULL;
    const json_t *md = json_object_get(body, "metadata"), *its = json_object_get(body, "items");
    if (md && !json_is_null(md) && !metadata_ok(md, msg, sizeof msg)) goto bad;
    if (!(items = its && !json_is_null(its) ? conv_new_items(s, its, msg, sizeof msg) : json_array())) goto bad;
    if (!mxl_resp_store_enabled(s->conversations)) {
        snprintf(msg, sizeof msg, "the conversation store is off (--conversation-store-max-entries 0)");
        goto bad;
    }
    char id[96];
    long now = (long)time(NULL);
    snprintf(id, sizeof id, "conv_%llx%llx", (unsigned long long)now, (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    conv = json_pack("{s:s, s:s, s:I, s:o}", "id", id, "object", "conversation", "created_at", (json_int_t)now, "metadata",
                     json_is_object(md) ? json_deep_copy(md) : json_object());
    json_t *d = json_pack("{s:O, s:O}", "conv", conv, "items", items);
    bool ok = d && mxl_resp_store_put(s->conversations, id, owner, d, NULL);
    json_decref(d);
    if (!ok) mxl_srv_error(r, MXL_API_OPENAI, 500, "server_error", "out of memory");
    else mxl_http_send_json(r, 200, json_incref(conv));
    json_decref(conv);
    json_decref(items);
    json_decref(body);
    return;
bad:
    mxl_srv_error(r, MXL_API_OPENAI, 400, "invalid_request_error", "%s", msg);
    json_decref(items);
    json_decref(body);
}

static void method_not_allowed(mxl_http_req *r, const char *method) {
    mxl_srv_error(r, MXL_API_OPENAI, 405, "invalid_request_error", "method %s is not allowed on this route", method);
}

void mxl_api_conversations(mxl_server *s, mxl_http_req *r, const char *rest) {
    const char *method = mxl_http_method(r);
    bool get = !strcmp(method, "GET"), del = !strcmp(method, "DELETE"), post = !strcmp(method, "POST");
    unsigned char owner[32];
    owner_of(r, owner);
    if (!*rest) {
        if (post) conv_create(s, r, owner);
        else method_not_allowed(r, method);
        return;
    }
    /* {id}[/items[/{item_id}]] */
    char id[96], item[96] = "";
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    const char *sub = slash ? slash + 1 : NULL;
    bool items = false;
    if (n == 0 || n >= sizeof id) goto not_found_route;
    memcpy(id, rest, n);
    id[n] = 0;
    if (sub) {
        if (strncmp(sub, "items", 5) || (sub[5] && sub[5] != '/')) goto not_found_route;
        items = true;
        if (sub[5] == '/') {
            size_t in = strlen(sub + 6);
            if (in == 0 || in >= sizeof item || strchr(sub + 6, '/')) goto not_found_route;
            memcpy(item, sub + 6, in + 1);
        }
    }
    bool found = false;
    json_t *out = NULL;
    if (!items) {
        if (get) {
            out = mxl_resp_store_edit(s->conversations, id, owner, conv_obj_copy, NULL, &found);
        } else if (del) {
            if ((found = mxl_resp_store_delete(s->conversations, id, owner)))
                out = json_pack("{s:s, s:s, s:b}", "id", id, "object", "conversation.deleted", "deleted", 1);
        } else if (post) {
            json_t *body = mxl_srv_body_json(s, r, MXL_API_OPENAI);
            if (!body) return;
            char msg[512];
            const json_t *md = json_object_get(body, "metadata");
            if (!md || !metadata_ok(md, msg, sizeof msg)) {
                mxl_srv_error(r, MXL_API_OPENAI, 400, "invalid_request_error", "%s", md ? msg : "'metadata' is required");
                json_decref(body);
                return;
            }
            out = mxl_resp_store_edit(s->conversations, id, owner, conv_set_metadata, (void *)md, &found);
            json_decref(body);
        } else {
            method_not_allowed(r, method);
            return;
        }
    } else if (!item[0]) {
        if (get) {
            json_t *all = mxl_resp_store_edit(s->conversations, id, owner, conv_items_copy, NULL, &found);
            if (found) input_items(r, all); /* the same list page as a response's input_items */
            json_decref(all);
            if (found) return;
        } else if (post) {
            json_t *body = mxl_srv_body_json(s, r, MXL_API_OPENAI);
            if (!body) return;
            char msg[512];
            json_t *add = conv_new_items(s, json_object_get(body, "items"), msg, sizeof msg);
            json_decref(body);
            if (!add) {
                mxl_srv_error(r, MXL_API_OPENAI, 400, "invalid_request_error", "%s", msg);
                return;
            }
            json_t *added = mxl_resp_store_edit(s->conversations, id, owner, conv_add_items, add, &found);
            json_decref(add);
            if (found) {
                size_t k = json_array_size(added);
                json_t *first = k ? json_object_get(json_array_get(added, 0), "id") : NULL, *last = k ? json_object_get(json_array_get(added, k - 1), "id") : NULL;
                out = json_pack("{s:s, s:o, s:O, s:O, s:b}", "object", "list", "data", added, "first_id", first ? first : json_null(), "last_id",
                                last ? last : json_null(), "has_more", 0);
            }
        } else {
            method_not_allowed(r, method);
            return;
        }
    } else {
        if (!get && !del) {
            method_not_allowed(r, method);
            return;
        }
        out = mxl_resp_store_edit(s->conversations, id, owner, get ? conv_item_get : conv_item_del, item, &found);
        if (found && !out) {
            mxl_srv_error(r, MXL_API_OPENAI, 404, "not_found_error", "Item with id '%.100s' not found.", item);
            return;
        }
    }
    if (!found) conv_not_found(r, id);
    else if (!out) mxl_srv_error(r, MXL_API_OPENAI, 500, "server_error", "out of memory");
    else mxl_http_send_json(r, 200, out);
    return;
not_found_route:
    mxl_srv_error(r, MXL_API_OPENAI, 404, "not_found_error", "File Not Found");
}
