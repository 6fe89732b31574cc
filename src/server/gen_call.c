/* gen_call.c - one generation request end to end on the server side (gen_call.h): submits its
 * jobs to the scheduler, then either waits and answers one JSON document or streams server-sent
 * events, in the shape of the API that asked (OpenAI chat / completions, llama-server
 * /completion). The client going away cancels the jobs, which frees their slots at the next
 * engine step. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "io/json_read.h"
#include "io/json_write.h"
#include "models/vlm.h"
#include "server/constraint.h"
#include "server/constraint.h"
#include "server/gen_call.h"

#include "server/request.h"
#include "server/responses.h"

static mxl_api api_of(const mxl_gen_call *g) {
    return g->kind == MXL_GEN_ANTHROPIC ? MXL_API_ANTHROPIC : g->kind == MXL_GEN_LLAMA ? MXL_API_LLAMA : MXL_API_OPENAI;
}

bool mxl_srv_setup_parse(mxl_server *s, mxl_gen_call *g, const json_t *tools, const mxl_tool_choice *tc, char *msg, size_t ml) {
    const char *tpl = mxl_gen_model_template_text(s->model);
    mxl_chat_syntax syn = mxl_chat_syntax_detect(tpl, g->prompt_text ? g->prompt_text : "");
    if (!tools) mxl_chat_syntax_without_tools(&syn);
    if (s->cfg->reasoning_format && !strcmp(s->cfg->reasoning_format, "none")) syn.think_tags = false, syn.starts_in_reasoning = false;
    if (tc && tc->forced) {
        if (!tools) return snprintf(msg, ml, "'tool_choice' asks for a tool call but 'tools' has no function"), false;
        if (!mxl_srv_constraint_owned(&g->params, s->defaults.sampling.grammar)) {
            char *gram = mxl_srv_forced_call_grammar(&syn, tpl, tools, tc->only, msg, ml);
            if (!gram && msg[0]) return false;
            if (gram) g->params.sampling.grammar = gram; /* (freed with the call: constraint_owned) */
        }
    }
    if (syn.fmt == MXL_CHAT_FMT_PLAIN && !syn.think_tags && !syn.starts_in_reasoning) return true; /* text passes through */
    g->tools = tools ? json_incref((json_t *)tools) : NULL;
    syn.tools = g->tools;
    syn.id_seed = atomic_fetch_add(&s->next_id, 1) * 0x9E3779B97F4A7C15ull;
    g->syn = syn;
    g->parse = true;
    g->params.keep_special = syn.fmt == MXL_CHAT_FMT_GPT_OSS || syn.fmt == MXL_CHAT_FMT_MISTRAL;
    return true;
}

/* One prompt into ids; text also kept when it is the first. */
static bool one_prompt(mxl_server *s, const json_t *p, int32_t **ids_out, size_t *n_out, char **text_out, char *msg, size_t ml) {
    if (json_is_object(p)) { /* {"prompt_string": "...", "multimodal_data": [...]} */
        if (json_object_get(p, "multimodal_data")) return snprintf(msg, ml, "multimodal input is not supported for this model"), false;
        p = json_object_get(p, "prompt_string");
        if (!json_is_string(p)) return snprintf(msg, ml, "'prompt.prompt_string' must be a string"), false;
    }
    if (json_is_string(p)) {
        mxl_token_ids ids = {0};
        mxl_error err = {0};
        if (mxl_chat_tokenize_raw(s->model, json_string_value(p), json_string_length(p), &ids, &err))
            return snprintf(msg, ml, "%s", err.msg), false;
        *ids_out = ids.ids;
        *n_out = ids.n;
        if (text_out && !*text_out) *text_out = mxl_strdup(json_string_value(p));
        return true;
    }
    if (json_is_array(p) && json_array_size(p) > 0) {
        /* token ids, possibly mixed with strings (llama-server's tokenize_mixed): a string is
         * tokenized in place, special tokens parsed, with the BOS only when it comes first */
        size_t i;
        const json_t *e;
        mxl_token_ids ids = {0};
        mxl_error err = {0};
        json_array_foreach(p, i, e) {
            if (json_is_string(e)) {
                unsigned flags = MXL_TOK_PARSE_SPECIAL | (i == 0 ? MXL_TOK_ADD_SPECIAL : 0);
                if (mxl_tokenizer_encode(mxl_gen_model_tokenizer(s->model), json_string_value(e), json_string_length(e), flags,
                                         &ids, &err)) {
                    mxl_token_ids_free(&ids);
                    return snprintf(msg, ml, "%s", err.msg), false;
                }
                continue;
            }
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > INT32_MAX) {
                mxl_token_ids_free(&ids);
                return snprintf(msg, ml, "'prompt' must be a string, an array of token ids (and strings), or an array of those"), false;
            }
            if (ids.n == ids.cap) {
                size_t cap = ids.cap ? 2 * ids.cap : 64;
                int32_t *grown = mxl_realloc(ids.ids, cap * sizeof *grown);
                if (!grown) {
                    mxl_token_ids_free(&ids);
                    return snprintf(msg, ml, "out of memory"), false;
                }
                ids.ids = grown;
                ids.cap = cap;
            }
            ids.ids[ids.n++] = (int32_t)json_integer_value(e);
        }
        if (ids.n == 0) return snprintf(msg, ml, "'prompt' is empty"), false;
        *ids_out = ids.ids;
        *n_out = ids.n;
        return true;
    }
    return snprintf(msg, ml, "'prompt' must be a non-empty string, an array of token ids, or an array of those"), false;
}

bool mxl_srv_parse_id_slot(const json_t *body, mxl_gen_call *g, char *msg, size_t ml) {
    const json_t *v = json_object_get(body, "id_slot");
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v) || json_integer_value(v) < -1 || json_integer_value(v) > INT32_MAX)
        return snprintf(msg, ml, "'id_slot' must be an integer (-1: any free slot)"), false;
    g->pin_slot = json_integer_value(v) >= 0;
    g->id_slot = (int)json_integer_value(v);
    return true;
}

bool mxl_srv_parse_prompts(mxl_server *s, const json_t *p, mxl_gen_call *g, char *msg, size_t ml) {
    /* a list whose items are strings, objects or lists is several prompts; ids mixed with strings
     * (any integer among them) are one prompt */
    bool multi = json_is_array(p) && json_array_size(p) > 0;
    for (size_t i = 0; multi && i < json_array_size(p); i++)
        if (json_is_integer(json_array_get(p, i))) multi = false;
    if (!multi) return one_prompt(s, p, &g->prompt_ids, &g->n_prompt, &g->prompt_text, msg, ml);
    size_t n = json_array_size(p);
    if (n > MXL_SRV_MAX_CHOICES)
        return snprintf(msg, ml, "'prompt' has %zu prompts; at most %d are accepted in one request", n, MXL_SRV_MAX_CHOICES), false;
    if (g->n > 1) return snprintf(msg, ml, "'n' > 1 cannot be combined with several prompts"), false;
    for (size_t i = 0; i < n; i++)
        if (!one_prompt(s, json_array_get(p, i), &g->prompts[i], &g->n_prompts[i], &g->prompt_text, msg, ml)) return false;
    g->n = (int)n;
    g->multi = true;
    g->prompt_ids = mxl_malloc(g->n_prompts[0] * sizeof(int32_t));
    if (!g->prompt_ids) return snprintf(msg, ml, "out of memory"), false;
    if (g->n_prompts[0]) memcpy(g->prompt_ids, g->prompts[0], g->n_prompts[0] * sizeof(int32_t)); /* ("": no ids, NULL) */
    g->n_prompt = g->n_prompts[0];
    return true;
}

bool mxl_srv_tokenize_chat(mxl_server *s, mxl_gen_call *g, const json_t *urls, size_t len, char *msg, size_t ml) {
    mxl_error err = {0};
    if (urls && json_array_size(urls)) {
        const mxl_vlm *v = mxl_gen_model_vlm(s->model);
        if (!mxl_srv_images_load(s, urls, &g->images, msg, ml)) return false;
        char *x = NULL;
        size_t xl = 0;
        if (mxl_vlm_expand_prompt(v, g->prompt_text, len, g->images.in, g->images.n, &x, &xl, &err)) return snprintf(msg, ml, "%s", err.msg), false;
        mxl_free(g->prompt_text);
        g->prompt_text = x;
        len = xl;
    }
    mxl_token_ids ids = {0};
    if (mxl_chat_tokenize_rendered(s->model, g->prompt_text, len, &ids, &err)) return snprintf(msg, ml, "%s", err.msg), false;
    g->prompt_ids = ids.ids;
    g->n_prompt = ids.n;
    if (!g->images.n) return true;
    if (mxl_vlm_media_blocks(mxl_gen_model_vlm(s->model), ids.ids, ids.n, g->images.in, g->images.n, g->media, g->media_img, g->media_off,
                             MXL_DECODER_MAX_MEDIA, &g->n_media, &err))
        return snprintf(msg, ml, "%s", err.msg), false;
    return true;
}

void mxl_gen_call_free(mxl_gen_call *g) {
    if (!g) return;
    if (g->resp) mxl_resp_call_free(g);
    for (int i = 0; i < MXL_SRV_MAX_CHOICES; i++) mxl_free(g->prompts[i]);
    for (int i = 0; i < MXL_SRV_MAX_CHOICES; i++) mxl_chat_stream_destroy(g->pstream[i]);
    json_decref(g->tools);
    /* the request's own grammar text (its jobs hold copies: mxl_sched_submit) */
    mxl_free(mxl_srv_constraint_owned(&g->params, g->srv ? g->srv->defaults.sampling.grammar : NULL));
    if (g->ch) mxl_srv_channel_unref(g->ch);
    mxl_free(g->prompt_text);
    mxl_free(g->prompt_ids);
    mxl_srv_images_free(&g->images);
    mxl_free(g->bias);
    mxl_free(g->out);
    mxl_free(g);
}

/* --- JSON pieces ------------------------------------------------------------------------------ */

/* The bytes of a token's text as a JSON array (clients rebuild split UTF-8 from them). */
static json_t *bytes_json(const char *t) {
    json_t *a = json_array();
    for (const unsigned char *p = (const unsigned char *)t; *p; p++) json_array_append_new(a, json_integer(*p));
    return a;
}

/* OpenAI logprobs entry for one token. */
static json_t *token_logprob_json(const mxl_server *s, const mxl_srv_event *e, int top_n) {
    char *t = mxl_srv_token_text(s, e->token);
    json_t *o = json_pack("{s:s, s:f, s:o, s:[]}", "token", t, "logprob", (double)e->logprob, "bytes", bytes_json(t), "top_logprobs");
    mxl_free(t);
    json_t *top = json_object_get(o, "top_logprobs");
    for (int i = 0; i < e->n_top && i < top_n; i++) {
        char *tt = mxl_srv_token_text(s, e->top_ids[i]);
        json_array_append_new(top, json_pack("{s:s, s:f, s:o}", "token", tt, "logprob", (double)e->top_logprobs[i], "bytes", bytes_json(tt)));
        mxl_free(tt);
    }
    return o;
}

/* llama-server completion_probabilities entry: "logprob" / "top_logprobs", or with
 * post_sampling_probs "prob" / "top_probs" (probabilities after the sampler chain). */
static json_t *llama_prob_json(const mxl_server *s, const mxl_srv_event *e, int n) {
    const char *pk = e->post_sampling ? "prob" : "logprob", *tk = e->post_sampling ? "top_probs" : "top_logprobs";
    char *t = mxl_srv_token_text(s, e->token);
    json_t *o = json_pack("{s:i, s:s, s:f, s:o, s:[]}", "id", e->token, "token", t, pk, (double)e->logprob, "bytes", bytes_json(t), tk);
    mxl_free(t);
    json_t *top = json_object_get(o, tk);
    for (int i = 0; i < e->n_top && i < n; i++) {
        char *tt = mxl_srv_token_text(s, e->top_ids[i]);
        json_array_append_new(top, json_pack("{s:i, s:s, s:f, s:o}", "id", e->top_ids[i], "token", tt, pk, (double)e->top_logprobs[i],
                                             "bytes", bytes_json(tt)));
        mxl_free(tt);
    }
    return o;
}

static json_t *usage_json(const mxl_gen_call *g) {
    const mxl_srv_channel *c = g->ch;
    json_int_t prompt = c->prompt_tokens;
    if (g->multi) /* several prompts: all of them count */
        for (int i = 1; i < g->n && i < MXL_SRV_MAX_CHOICES; i++) prompt += (json_int_t)g->n_prompts[i];
    return json_pack("{s:I, s:I, s:I}", "prompt_tokens", prompt, "completion_tokens", (json_int_t)c->completion_tokens, "total_tokens",
                     prompt + (json_int_t)c->completion_tokens);
}

/* llama-server's timings: prompt time from admission to the end of prefill; generation time after
 * it, whose rate counts n - 1 steps (the first token comes from the prefill's logits). */
static json_t *timings_json(const mxl_srv_channel *c) {
    double pm = c->t_prefill_done > c->t_admit && c->t_admit > 0 ? c->t_prefill_done - c->t_admit : 0;
    double end = c->t_end > 0 ? c->t_end : mxl_now_ms(); /* (a stream's delta: so far) */
    double dm = end > c->t_prefill_done && c->t_prefill_done > 0 ? end - c->t_prefill_done : 0;
    double pn = (double)(c->prompt_tokens - c->cached_tokens), steps = (double)(c->completion_tokens > 1 ? c->completion_tokens - 1 : 0);
    json_t *t = json_pack("{s:I, s:I, s:f, s:f, s:f, s:I, s:f, s:f, s:f}", "cache_n", (json_int_t)c->cached_tokens, "prompt_n",
                     (json_int_t)(c->prompt_tokens - c->cached_tokens), "prompt_ms", pm, "prompt_per_token_ms", pn > 0 ? pm / pn : 0.0,
                     "prompt_per_second", pm > 0 ? pn * 1e3 / pm : 0.0, "predicted_n", (json_int_t)c->completion_tokens, "predicted_ms", dm,
                     "predicted_per_token_ms", steps > 0 && dm > 0 ? dm / steps : 0.0, "predicted_per_second", steps > 0 && dm > 0 ? steps * 1e3 / dm : 0.0);
    if (t && c->draft_n > 0) { /* llama-server's speculative counts, only when drafts ran */
        json_object_set_new(t, "draft_n", json_integer(c->draft_n));
        json_object_set_new(t, "draft_n_accepted", json_integer(c->draft_accepted));
    }
    return t;
}

json_t *mxl_gen_call_timings(const mxl_gen_call *g) { return timings_json(g->ch); }

json_t *mxl_gen_token_logprob(const mxl_gen_call *g, const mxl_srv_event *e) { return token_logprob_json(g->srv, e, g->top_logprobs); }

static const char *openai_reason(const char *r) { return r && !strcmp(r, "length") ? "length" : "stop"; }

/* llama-server's stop_type: "eos", "word" or "limit". */
static const char *llama_stop_type(const mxl_srv_event *e) {
    if (e->stop_word) return "word";
    return e->finish_reason && !strcmp(e->finish_reason, "length") ? "limit" : "eos";
}

static json_t *llama_final_fields(const mxl_gen_call *g, const mxl_srv_event *fin, json_t *o) {
    const mxl_srv_channel *c = g->ch;
    int idx = fin ? fin->index : 0;
    json_object_set_new(o, "id_slot", json_integer(c->slot_id));
    json_object_set_new(o, "stop", json_true());
    json_object_set_new(o, "model", json_string(g->srv->model_name));
    json_object_set_new(o, "tokens_predicted", json_integer(c->completion_tokens));
    json_object_set_new(o, "tokens_evaluated", json_integer(g->multi && idx < MXL_SRV_MAX_CHOICES ? (json_int_t)g->n_prompts[idx] : c->prompt_tokens));
    json_object_set_new(o, "prompt", json_string(g->prompt_text ? g->prompt_text : ""));
    json_object_set_new(o, "has_new_line", json_false());
    json_object_set_new(o, "truncated", json_false());
    json_object_set_new(o, "stop_type", json_string(fin ? llama_stop_type(fin) : "none"));
    json_object_set_new(o, "stopping_word", json_string(fin && fin->stop_word ? fin->stop_word : ""));
    json_object_set_new(o, "tokens_cached", json_integer(c->prompt_tokens + c->completion_tokens));
    json_object_set_new(o, "timings", timings_json(c));
    json_object_set_new(o, "generation_settings",
                        json_pack("{s:I, s:f, s:i, s:f, s:f, s:I, s:f, s:f, s:f, s:I}", "n_ctx", (json_int_t)g->srv->slot_ctx, "temperature",
                                  (double)g->params.sampling.temp, "top_k", g->params.sampling.top_k, "top_p", (double)g->params.sampling.top_p,
                                  "min_p", (double)g->params.sampling.min_p, "n_predict", (json_int_t)g->params.max_tokens,
                                  "repeat_penalty", (double)g->params.sampling.repeat_penalty, "presence_penalty",
                                  (double)g->params.sampling.presence_penalty, "frequency_penalty", (double)g->params.sampling.frequency_penalty,
                                  "seed", (json_int_t)g->params.sampling.seed));
    return o;
}

/* Engine failure of a finished channel: "error" or "cancelled" on any choice. */
static const char *failure(const mxl_srv_channel *c) {
    if (c->lost) return "error";
    for (size_t i = 0; i < c->n_ev; i++)
        if (c->ev[i].final && c->ev[i].finish_reason &&
            (!strcmp(c->ev[i].finish_reason, "error") || !strcmp(c->ev[i].finish_reason, "cancelled")))
            return c->ev[i].finish_reason;
    return NULL;
}

/* --- Anthropic Messages ------------------------------------------------------------------------ */

static const char *anthropic_stop_reason(const mxl_srv_event *fin) {
    if (fin && fin->stop_word) return "stop_sequence";
    return fin && fin->finish_reason && !strcmp(fin->finish_reason, "length") ? "max_tokens" : "end_turn";
}

static json_t *anthropic_usage(const mxl_srv_channel *c) {
    return json_pack("{s:I, s:I, s:I, s:i}", "input_tokens", (json_int_t)(c->prompt_tokens - c->cached_tokens), "output_tokens",
                     (json_int_t)c->completion_tokens, "cache_read_input_tokens", (json_int_t)c->cached_tokens, "cache_creation_input_tokens", 0);
}

/* A parsed tool call as an Anthropic tool_use block (arguments JSON text -> input object). */
static json_t *tool_use_block(const json_t *call) {
    const json_t *fn = json_object_get(call, "function");
    const json_t *args = json_object_get(fn, "arguments");
    /* (the arguments' length, not strlen: a "\u0000" inside them is text, not their end) */
    json_t *input = json_is_string(args) ? mxl_json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
    if (!json_is_object(input)) {
        json_decref(input);
        input = json_object();
    }
    return json_pack("{s:s, s:O, s:O, s:o}", "type", "tool_use", "id", json_object_get(call, "id"), "name", json_object_get(fn, "name"),
                     "input", input);
}

static void respond_anthropic(mxl_gen_call *g) {
    mxl_srv_channel *c = g->ch;
    const mxl_srv_event *fin = NULL;
    for (size_t i = 0; i < c->n_ev; i++)
        if (c->ev[i].final) fin = &c->ev[i];
    json_t *blocks = json_array();
    bool calls = false;
    json_t *parsed = NULL;
    mxl_error perr = {0};
    if (g->parse && !mxl_chat_parse(&g->syn, c->text ? c->text : "", c->text_len, &parsed, &perr)) {
        const json_t *rc = json_object_get(parsed, "reasoning_content"), *content = json_object_get(parsed, "content");
        if (json_is_string(rc) && json_string_length(rc))
            json_array_append_new(blocks, json_pack("{s:s, s:O, s:s}", "type", "thinking", "thinking", rc, "signature", ""));
        if (json_is_string(content) && json_string_length(content))
            json_array_append_new(blocks, json_pack("{s:s, s:O}", "type", "text", "text", content));
        size_t k;
        const json_t *call;
        json_array_foreach(json_object_get(parsed, "tool_calls"), k, call) {
            json_array_append_new(blocks, tool_use_block(call));
            calls = true;
        }
        json_decref(parsed);
    } else {
        json_t *text = json_stringn(c->text ? c->text : "", c->text_len);
        json_array_append_new(blocks, json_pack("{s:s, s:o}", "type", "text", "text", text ? text : json_string("")));
    }
    if (!json_array_size(blocks)) json_array_append_new(blocks, json_pack("{s:s, s:s}", "type", "text", "text", ""));
    json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:o}", "id", g->id, "type", "message", "role", "assistant", "model",
                             g->srv->model_name, "content", blocks, "stop_reason", calls ? "tool_use" : anthropic_stop_reason(fin),
                             "stop_sequence", fin && fin->stop_word ? json_string(fin->stop_word) : json_null(), "usage", anthropic_usage(c));
    mxl_http_send_json(g->r, 200, body);
}

/* --- whole responses ---------------------------------------------------------------------------- */

static void respond_whole(mxl_gen_call *g) {
    mxl_srv_channel *c = g->ch;
    const char *fail = failure(c);
    if (g->kind == MXL_GEN_RESPONSES) {
        mxl_resp_respond_whole(g, fail);
        return;
    }
    if (fail) {
        if (!strcmp(fail, "cancelled")) mxl_srv_error(g->r, api_of(g), 503, "unavailable_error", "%s", c->error[0] ? c->error : "the request was cancelled");
        else mxl_srv_error(g->r, api_of(g), 500, "server_error", "%s", c->error[0] ? c->error : "generation failed");
        return;
    }
    if (g->kind == MXL_GEN_ANTHROPIC) {
        respond_anthropic(g);
        return;
    }
    json_t *choices = json_array();
    for (int idx = 0; idx < g->n; idx++) {
        json_t *text = json_stringn("", 0);
        char *buf = mxl_malloc(c->text_len + 1);
        size_t len = 0;
        const mxl_srv_event *fin = NULL;
        json_t *lp = json_array(), *tokens = json_array();
        for (size_t i = 0; i < c->n_ev; i++) {
            const mxl_srv_event *e = &c->ev[i];
            if (e->index != idx) continue;
            if (buf) memcpy(buf + len, c->text + e->text_off, e->text_len), len += e->text_len;
            if (e->token >= 0) {
                json_array_append_new(tokens, json_integer(e->token));
                if (g->logprobs || g->top_logprobs > 0)
                    json_array_append_new(lp, g->kind == MXL_GEN_LLAMA ? llama_prob_json(g->srv, e, g->top_logprobs)
                                                                       : token_logprob_json(g->srv, e, g->top_logprobs));
            }
            if (e->final) fin = e;
        }
        json_decref(text);
        text = json_stringn(buf ? buf : "", buf ? len : 0);
        if (!text) text = json_string(""); /* cannot happen: released text is whole UTF-8 */
        mxl_free(buf);
        json_t *choice;
        if (g->kind == MXL_GEN_CHAT && g->parse) {
            json_t *msg = NULL;
            mxl_error perr = {0};
            if (mxl_chat_parse(&g->syn, json_string_value(text), json_string_length(text), &msg, &perr)) msg = json_pack("{s:O}", "content", text);
            json_object_set_new(msg, "role", json_string("assistant"));
            bool calls = json_array_size(json_object_get(msg, "tool_calls")) > 0;
            json_decref(text);
            choice = json_pack("{s:i, s:o, s:s}", "index", idx, "message", msg, "finish_reason",
                               calls ? "tool_calls" : openai_reason(fin ? fin->finish_reason : NULL));
            json_object_set_new(choice, "logprobs", g->logprobs ? json_pack("{s:o}", "content", lp) : json_null());
            if (!g->logprobs) json_decref(lp);
            json_decref(tokens);
        } else if (g->kind == MXL_GEN_CHAT) {
            choice = json_pack("{s:i, s:{s:s, s:o}, s:s}", "index", idx, "message", "role", "assistant", "content", text, "finish_reason",
                               openai_reason(fin ? fin->finish_reason : NULL));
            json_object_set_new(choice, "logprobs", g->logprobs ? json_pack("{s:o}", "content", lp) : json_null());
            if (!g->logprobs) json_decref(lp);
            json_decref(tokens);
        } else if (g->kind == MXL_GEN_COMPLETION) {
            choice = json_pack("{s:o, s:i, s:s}", "text", text, "index", idx, "finish_reason", openai_reason(fin ? fin->finish_reason : NULL));
            json_object_set_new(choice, "logprobs", g->logprobs ? json_pack("{s:o}", "content", lp) : json_null());
            if (!g->logprobs) json_decref(lp);
            json_decref(tokens);
        } else {
            choice = json_pack("{s:i, s:o, s:o}", "index", idx, "content", text, "tokens", tokens);
            llama_final_fields(g, fin, choice);
            if (g->top_logprobs > 0) json_object_set_new(choice, "completion_probabilities", lp);
            else json_decref(lp);
        }
        json_array_append_new(choices, choice);
    }
    json_t *body;
    if (g->kind == MXL_GEN_LLAMA) {
        body = g->n == 1 ? json_incref(json_array_get(choices, 0)) : json_incref(choices);
        json_decref(choices);
    } else {
        body = json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:o}", "id", g->id, "object",
                         g->kind == MXL_GEN_CHAT ? "chat.completion" : "text_completion", "created", (json_int_t)g->created, "model",
                         g->srv->model_name, "system_fingerprint", "mlxcel-" MXL_VERSION, "choices", choices, "usage", usage_json(g));
        json_object_set_new(body, "timings", timings_json(c));
    }
    if ((g->srv->cfg->verbose || g->verbose) && json_is_object(body)) /* llama-server --verbose / "verbose": what the model saw */
        json_object_set_new(body, "__verbose", json_pack("{s:s}", "prompt", g->prompt_text ? g->prompt_text : ""));
    mxl_http_send_json(g->r, 200, body);
}

/* --- streaming ---------------------------------------------------------------------------------- */

static void out_append(mxl_gen_call *g, const char *s, size_t n) {
    if (g->out_len + n > g->out_cap) {
        size_t cap = g->out_cap ? g->out_cap : 4096;
        while (cap < g->out_len + n) cap *= 2;
        char *p = mxl_realloc(g->out, cap);
        if (!p) return;
        g->out = p;
        g->out_cap = cap;
    }
    memcpy(g->out + g->out_len, s, n);
    g->out_len += n;
}

static void out_event(mxl_gen_call *g, json_t *j) {
    char *s = j ? mxl_json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s) return;
    out_append(g, "data: ", 6);
    out_append(g, s, strlen(s));
    out_append(g, "\n\n", 2);
    mxl_free(s);
}

static void out_named(mxl_gen_call *g, const char *name, json_t *j) {
    out_append(g, "event: ", 7);
    out_append(g, name, strlen(name));
    out_append(g, "\n", 1);
    out_event(g, j);
}

void mxl_gen_call_emit(mxl_gen_call *g, const char *name, json_t *j) {
    if (name) out_named(g, name, j);
    else out_event(g, j);
}

/* Closes the open content block, if any. */
static void anthropic_close(mxl_gen_call *g) {
    if (g->a_kind) out_named(g, "content_block_stop", json_pack("{s:s, s:i}", "type", "content_block_stop", "index", g->a_index));
    g->a_kind = 0;
}

/* Opens a block of kind 1 thinking / 2 text unless it is the open one. */
static void anthropic_open(mxl_gen_call *g, int kind) {
    if (g->a_kind == kind) return;
    if (g->a_kind) {
        anthropic_close(g);
        g->a_index++;
    }
    g->a_kind = kind;
    out_named(g, "content_block_start",
              kind == 1 ? json_pack("{s:s, s:i, s:{s:s, s:s, s:s}}", "type", "content_block_start", "index", g->a_index, "content_block",
                                    "type", "thinking", "thinking", "", "signature", "")
                        : json_pack("{s:s, s:i, s:{s:s, s:s}}", "type", "content_block_start", "index", g->a_index, "content_block", "type",
                                    "text", "text", ""));
}

static void anthropic_delta(mxl_gen_call *g, int kind, const json_t *text) {
    anthropic_open(g, kind);
    out_named(g, "content_block_delta", json_pack("{s:s, s:i, s:{s:s, s:O}}", "type", "content_block_delta", "index", g->a_index, "delta",
                                                  "type", kind == 1 ? "thinking_delta" : "text_delta", kind == 1 ? "thinking" : "text", text));
}

static void format_anthropic(mxl_gen_call *g, const mxl_srv_event *e, json_t *text, bool failed) {
    mxl_srv_channel *c = g->ch;
    if (!g->started[0]) {
        g->started[0] = true;
        out_named(g, "message_start", json_pack("{s:s, s:{s:s, s:s, s:s, s:[], s:s, s:n, s:n, s:o}}", "type", "message_start", "message",
                                                "id", g->id, "type", "message", "role", "assistant", "content", "model", g->srv->model_name,
                                                "stop_reason", "stop_sequence", "usage", anthropic_usage(c)));
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
            if ((v = json_object_get(d, "reasoning_content"))) anthropic_delta(g, 1, v);
            if ((v = json_object_get(d, "content")) && json_is_string(v)) anthropic_delta(g, 2, v);
            size_t q;
            const json_t *call;
            json_array_foreach(json_object_get(d, "tool_calls"), q, call) {
                if (g->a_kind) {
                    anthropic_close(g);
                    g->a_index++;
                }
                json_t *blk = tool_use_block(call);
                json_t *input = json_incref(json_object_get(blk, "input"));
                json_object_set_new(blk, "input", json_object());
                out_named(g, "content_block_start", json_pack("{s:s, s:i, s:o}", "type", "content_block_start", "index", g->a_index,
                                                              "content_block", blk));
                char *args = mxl_json_dumps(input, JSON_COMPACT);
                json_decref(input);
                out_named(g, "content_block_delta", json_pack("{s:s, s:i, s:{s:s, s:s}}", "type", "content_block_delta", "index", g->a_index,
                                                              "delta", "type", "input_json_delta", "partial_json", args ? args : "{}"));
                mxl_free(args);
                out_named(g, "content_block_stop", json_pack("{s:s, s:i}", "type", "content_block_stop", "index", g->a_index));
                g->a_index++;
                g->a_tool = true;
            }
        }
        json_decref(deltas);
    } else if (e->text_len) {
        anthropic_delta(g, 2, text);
    }
    if (failed) {
        out_named(g, "error", json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", "api_error", "message",
                                        c->error[0] ? c->error : "generation failed"));
        return;
    }
    if (e->final) {
        if (!g->a_kind && !g->a_tool && g->a_index == 0) anthropic_open(g, 2); /* at least one (empty) text block */
        anthropic_close(g);
        out_named(g, "message_delta", json_pack("{s:s, s:{s:s, s:o}, s:o}", "type", "message_delta", "delta", "stop_reason",
                                                g->a_tool ? "tool_use" : anthropic_stop_reason(e), "stop_sequence",
                                                e->stop_word ? json_string(e->stop_word) : json_null(), "usage", anthropic_usage(c)));
        out_named(g, "message_stop", json_pack("{s:s}", "type", "message_stop"));
    }
}

static json_t *chunk(mxl_gen_call *g, json_t *choice);

/* The error event that ends a failed stream: a cancelled job (the server shutting down) is 503, as
 * the same failure is without streaming (respond_whole); an engine failure 500. */
static json_t *failure_event(const mxl_srv_channel *c, const mxl_srv_event *e) {
    const bool cancelled = !strcmp(e->finish_reason, "cancelled");
    return json_pack("{s:{s:i, s:s, s:s}}", "error", "code", cancelled ? 503 : 500, "message",
                     c->error[0] ? c->error : cancelled ? "the request was cancelled" : "generation failed", "type",
                     cancelled ? "unavailable_error" : "server_error");
}

/* Streams a chat choice through the output parser: its deltas (content, reasoning_content,
 * whole tool calls) become chunks; the finish chunk says "tool_calls" when there were any. */
static void format_parsed(mxl_gen_call *g, const mxl_srv_event *e, json_t *text, bool failed) {
    int idx = e->index;
    mxl_error perr = {0};
    if (!g->pstream[idx] && mxl_chat_stream_create(&g->syn, &g->pstream[idx], &perr)) return;
    json_t *deltas = json_array();
    mxl_chat_stream_feed(g->pstream[idx], json_string_value(text), json_string_length(text), e->final, deltas, &perr);
    size_t k;
    json_t *d;
    json_array_foreach(deltas, k, d) {
        json_t *choice = json_pack("{s:i, s:O, s:n}", "index", idx, "delta", d, "finish_reason");
        json_object_set_new(choice, "logprobs", json_null());
        out_event(g, chunk(g, choice));
    }
    json_decref(deltas);
    if (failed) {
        out_event(g, failure_event(g->ch, e));
        return;
    }
    if (e->final) {
        const char *why = mxl_chat_stream_tool_call_count(g->pstream[idx]) ? "tool_calls" : openai_reason(e->finish_reason);
        out_event(g, chunk(g, json_pack("{s:i, s:{}, s:n, s:s}", "index", idx, "delta", "logprobs", "finish_reason", why)));
    }
}

static json_t *chunk(mxl_gen_call *g, json_t *choice) {
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o]}", "id", g->id, "object",
                          g->kind == MXL_GEN_CHAT ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)g->created,
                          "model", g->srv->model_name, "system_fingerprint", "mlxcel-" MXL_VERSION, "choices", choice);
    if (o && g->timings_per_token) json_object_set_new(o, "timings", timings_json(g->ch));
    return o;
}

json_t *mxl_gen_progress_fields(const mxl_srv_event *e) {
    int64_t done = e->p_processed - e->p_cache;
    return json_pack("{s:{s:I, s:I, s:I, s:f}, s:{s:I, s:I, s:f, s:f, s:f, s:i, s:f, s:f, s:f}}", "prompt_progress", "total",
                          (json_int_t)e->p_total, "cache", (json_int_t)e->p_cache, "processed", (json_int_t)e->p_processed, "time_ms", e->p_ms,
                          "timings", "cache_n", (json_int_t)e->p_cache, "prompt_n", (json_int_t)done, "prompt_ms", e->p_ms,
                          "prompt_per_token_ms", done > 0 ? e->p_ms / (double)done : 0.0, "prompt_per_second",
                          e->p_ms > 0 ? (double)done * 1e3 / e->p_ms : 0.0, "predicted_n", 0, "predicted_ms", 0.0, "predicted_per_token_ms", 0.0,
                          "predicted_per_second", 0.0);
}

/* A prefill progress report: llama-server's prompt_progress with the timings so far. */
static void format_progress(mxl_gen_call *g, const mxl_srv_event *e) {
    json_t *o = mxl_gen_progress_fields(e);
    if (!o) return;
    if (g->kind == MXL_GEN_LLAMA) {
        json_object_set_new(o, "index", json_integer(e->index));
        json_object_set_new(o, "content", json_string(""));
        json_object_set_new(o, "stop", json_false());
    } else {
        json_object_set_new(o, "id", json_string(g->id));
        json_object_set_new(o, "object", json_string(g->kind == MXL_GEN_CHAT ? "chat.completion.chunk" : "text_completion"));
        json_object_set_new(o, "created", json_integer(g->created));
        json_object_set_new(o, "model", json_string(g->srv->model_name));
        json_object_set_new(o, "choices", json_array());
    }
    out_event(g, o);
}

/* Formats one engine event (channel lock held: the text buffer is read in place). */
static void format_event(mxl_gen_call *g, const mxl_srv_event *e) {
    if (e->progress) {
        if (g->kind == MXL_GEN_RESPONSES) mxl_resp_progress_event(g, e);
        else if (g->kind != MXL_GEN_ANTHROPIC) format_progress(g, e);
        return;
    }
    mxl_srv_channel *c = g->ch;
    json_t *text = json_stringn(c->text + e->text_off, e->text_len);
    if (!text) text = json_string("");
    int idx = e->index;
    bool failed = e->final && e->finish_reason && (!strcmp(e->finish_reason, "error") || !strcmp(e->finish_reason, "cancelled"));
    if (g->kind == MXL_GEN_ANTHROPIC) {
        format_anthropic(g, e, text, failed);
        json_decref(text);
        return;
    }
    if (g->kind == MXL_GEN_RESPONSES) {
        mxl_resp_stream_event(g, e, text, failed);
        json_decref(text);
        return;
    }
    if (g->kind == MXL_GEN_LLAMA) {
        if (e->token < 0 && e->text_len == 0 && !e->final) {
            json_decref(text);
            return;
        }
        json_t *o = json_pack("{s:o, s:[], s:b, s:i, s:i}", "content", text, "tokens", "stop", 0, "id_slot", c->slot_id, "index", idx);
        if (e->token >= 0) {
            json_array_append_new(json_object_get(o, "tokens"), json_integer(e->token));
            if (g->top_logprobs > 0) json_object_set_new(o, "completion_probabilities", json_pack("[o]", llama_prob_json(g->srv, e, g->top_logprobs)));
        }
        if (failed) {
            json_decref(o);
            out_event(g, failure_event(c, e));
            return;
        }
        if (e->final) llama_final_fields(g, e, o);
        else if (g->timings_per_token) json_object_set_new(o, "timings", timings_json(c));
        out_event(g, o);
        return;
    }
    if (g->kind == MXL_GEN_CHAT && idx < MXL_SRV_MAX_CHOICES && !g->started[idx]) {
        g->started[idx] = true;
        json_t *o = chunk(g, json_pack("{s:i, s:{s:s, s:n}, s:n, s:n}", "index", idx, "delta", "role", "assistant", "content", "logprobs",
                                       "finish_reason"));
        json_object_del(o, "timings"); /* (the role chunk has none: nothing was generated yet, as llama-server) */
        out_event(g, o);
    }
    if (g->kind == MXL_GEN_CHAT && g->parse && idx < MXL_SRV_MAX_CHOICES) {
        format_parsed(g, e, text, failed);
        json_decref(text);
        return;
    }
    if (e->text_len) {
        json_t *choice = g->kind == MXL_GEN_CHAT ? json_pack("{s:i, s:{s:o}, s:n}", "index", idx, "delta", "content", json_incref(text), "finish_reason")
                                                 : json_pack("{s:o, s:i, s:n}", "text", json_incref(text), "index", idx, "finish_reason");
        json_object_set_new(choice, "logprobs",
                            g->logprobs && e->token >= 0 ? json_pack("{s:[o]}", "content", token_logprob_json(g->srv, e, g->top_logprobs)) : json_null());
        out_event(g, chunk(g, choice));
    }
    json_decref(text);
    if (failed) {
        out_event(g, failure_event(c, e));
        return;
    }
    if (e->final) {
        const char *why = openai_reason(e->finish_reason);
        json_t *choice = g->kind == MXL_GEN_CHAT ? json_pack("{s:i, s:{}, s:n, s:s}", "index", idx, "delta", "logprobs", "finish_reason", why)
                                                 : json_pack("{s:s, s:i, s:n, s:s}", "text", "", "index", idx, "logprobs", "finish_reason", why);
        out_event(g, chunk(g, choice));
    }
}

static ssize_t produce(void *ctx, char *buf, size_t max) {
    mxl_gen_call *g = ctx;
    mxl_srv_channel *c = g->ch;
    for (;;) {
        if (g->out_off < g->out_len) {
            size_t n = g->out_len - g->out_off < max ? g->out_len - g->out_off : max;
            memcpy(buf, g->out + g->out_off, n);
            g->out_off += n;
            g->last_write_ms = mxl_now_ms();
            return (ssize_t)n;
        }
        g->out_len = g->out_off = 0;
        if (g->ended) return -1;
        pthread_mutex_lock(&c->mu);
        mxl_srv_channel_wait_locked(c, g->seen, 100);
        while (g->seen < c->n_ev) format_event(g, &c->ev[g->seen++]);
        bool done = mxl_srv_channel_done(c) && g->seen == c->n_ev;
        bool lost = c->lost;
        pthread_mutex_unlock(&c->mu);
        if (g->out_len) continue;
        if (done && !g->oom_sent && (lost || mxl_alloc_thread_failures() != g->alloc_failed0)) {
            /* an event missing (the engine could not store it, or its JSON could not be built):
             * an error event before the end, as for an engine error */
            static const char oom[] = "data: {\"error\":{\"code\":500,\"message\":\"out of memory\",\"type\":\"server_error\"}}\n\n";
            out_append(g, oom, sizeof oom - 1);
            g->oom_sent = true;
            continue;
        }
        if (done) {
            if (g->kind == MXL_GEN_CHAT || g->kind == MXL_GEN_COMPLETION) {
                if (g->include_usage) {
                    json_t *u = json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", g->id, "object",
                                          g->kind == MXL_GEN_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                                          (json_int_t)g->created, "model", g->srv->model_name, "choices", "usage", usage_json(g));
                    json_object_set_new(u, "timings", timings_json(c));
                    out_event(g, u);
                }
                out_append(g, "data: [DONE]\n\n", 14);
            }
            g->ended = true;
            continue;
        }
        if (mxl_http_client_gone(g->r)) {
            atomic_store(&c->cancel, true);
            return -1;
        }
        int64_t ping = g->srv->cfg->sse_ping_interval;
        if (ping > 0 && mxl_now_ms() - g->last_write_ms > (double)ping * 1e3) out_append(g, ": ping\n\n", 8);
    }
}

static void stream_done(void *ctx, bool gone) {
    mxl_gen_call *g = ctx;
    if (gone || !g->ended) atomic_store(&g->ch->cancel, true);
    mxl_server *srv = g->srv;
    bool hook = srv->alloc_fault_hook;
    mxl_gen_call_free(g);
    mxl_srv_release(srv); /* the hold mxl_gen_call_run took for the stream */
    if (hook) mxl_alloc_fail_at(0); /* the stream is over: a fault it did not reach goes (server.c) */
}

/* A background response runs on after its request is answered: this thread waits for the jobs
 * and stores the result (a cancel through the store ends them). The model is held awake and
 * the server's shutdown waits for n_background to reach 0 before freeing the stores. */
static void *background_main(void *arg) {
    mxl_gen_call *g = arg;
    mxl_server *s = g->srv;
    mxl_srv_channel *c = g->ch;
    pthread_mutex_lock(&c->mu);
    while (!mxl_srv_channel_done(c)) mxl_srv_channel_wait_locked(c, c->n_ev, 100);
    pthread_mutex_unlock(&c->mu);
    respond_whole(g);
    mxl_gen_call_free(g);
    mxl_srv_release(s);
    atomic_fetch_sub(&s->n_background, 1);
    return NULL;
}

static void background(mxl_gen_call *g) {
    mxl_resp_send_started(g);
    g->r = NULL;
    mxl_srv_hold(g->srv);
    atomic_fetch_add(&g->srv->n_background, 1);
    pthread_t th;
    if (pthread_create(&th, NULL, background_main, g) == 0) {
        pthread_detach(th);
        return;
    }
    atomic_store(&g->ch->cancel, true); /* (no thread: it ends here, cancelled) */
    background_main(g);
}

void mxl_gen_call_run(mxl_gen_call *g) {
    if (!g->created) g->created = (long)time(NULL);
    unsigned long long id = atomic_fetch_add(&g->srv->next_id, 1);
    if (!g->id[0]) /* the Responses route names its response before (its items are named after it) */
        snprintf(g->id, sizeof g->id, "%s%llx%llx",
             g->kind == MXL_GEN_CHAT ? "chatcmpl-" : g->kind == MXL_GEN_ANTHROPIC ? "msg_" : g->kind == MXL_GEN_RESPONSES ? "resp_" : "cmpl-",
             (unsigned long long)g->created, id);
    if (g->n < 1) g->n = 1;
    g->ch = mxl_http_alloc_failed(g->r) ? NULL : mxl_srv_channel_create(g->n); /* a request built with a hole */
    if (!g->ch) {
        mxl_srv_error(g->r, api_of(g), 500, "server_error", "out of memory");
        mxl_gen_call_free(g);
        return;
    }
    g->ch->want_progress = g->stream && g->return_progress;
    if (g->pin_slot) g->ch->want_slot = g->id_slot;
    for (int i = 0; i < g->n; i++) {
        mxl_seq_params p = g->params;
        if (!g->multi) p.sampling.seed += (uint64_t)i; /* n > 1: different draws of one prompt */
        mxl_error err = {0};
        const mxl_sched_images im = {g->images.n, g->images.in, g->n_media, g->media, g->media_img, g->media_off};
        mxl_status st = g->multi ? mxl_sched_submit(g->srv->sched, g->ch, i, g->prompts[i], g->n_prompts[i], &p, &err)
                                 : mxl_sched_submit_images(g->srv->sched, g->ch, i, g->prompt_ids, g->n_prompt, &p, &im, &err);
        if (st) {
            atomic_store(&g->ch->cancel, true);
            if (st == MXL_ERR_UNSUPPORTED) mxl_srv_error(g->r, api_of(g), 503, "unavailable_error", "%s", err.msg);
            else if (st == MXL_ERR_ARG && (size_t)i < MXL_SRV_MAX_CHOICES && (g->multi ? g->n_prompts[i] : g->n_prompt) >= (size_t)g->srv->slot_ctx) {
                /* llama-server's shape for a prompt over the context */
                json_t *e = json_pack("{s:{s:i, s:s, s:s, s:I, s:I}}", "error", "code", 400, "message", err.msg, "type",
                                      "exceed_context_size_error", "n_prompt_tokens", (json_int_t)(g->multi ? g->n_prompts[i] : g->n_prompt),
                                      "n_ctx", (json_int_t)g->srv->slot_ctx);
                if (api_of(g) == MXL_API_ANTHROPIC) mxl_srv_error(g->r, api_of(g), 400, "invalid_request_error", "%s", err.msg), json_decref(e);
                else mxl_http_send_json(g->r, 400, e);
            } else if (st == MXL_ERR_ARG) mxl_srv_error(g->r, api_of(g), 400, "invalid_request_error", "%s", err.msg);
            else mxl_srv_error(g->r, api_of(g), 500, "server_error", "%s", err.msg);
            /* jobs already queued end as cancelled and drop their references */
            mxl_gen_call_free(g);
            return;
        }
    }
    if (g->resp) mxl_resp_started(g);
    if (g->background) {
        background(g);
        return;
    }
    if (g->stream) {
        g->last_write_ms = mxl_now_ms();
        g->alloc_failed0 = mxl_alloc_thread_failures();
        mxl_srv_hold(g->srv);
        mxl_http_stream(g->r, 200, "text/event-stream", produce, stream_done, g);
        return;
    }
    mxl_srv_channel *c = g->ch;
    pthread_mutex_lock(&c->mu);
    while (!mxl_srv_channel_done(c)) {
        mxl_srv_channel_wait_locked(c, c->n_ev, 100);
        if (mxl_srv_channel_done(c)) break;
        pthread_mutex_unlock(&c->mu);
        bool gone = mxl_http_client_gone(g->r);
        pthread_mutex_lock(&c->mu);
        if (gone) {
            atomic_store(&c->cancel, true);
            break;
        }
    }
    bool done = mxl_srv_channel_done(c);
    pthread_mutex_unlock(&c->mu);
    if (done) respond_whole(g);
    else mxl_srv_error(g->r, api_of(g), 400, "invalid_request_error", "the client closed the connection");
    mxl_gen_call_free(g);
}
