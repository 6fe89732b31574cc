/* fuzz_request.c - libFuzzer harness for the server's request reading: each input is a request
 * body, run through the code the routes run to parse and check it, against a server state set
 * up as `mlxcel serve` sets it up (the flags parsed by mxl_server_config_parse, the request
 * defaults) with a real tokenizer and chat template (../shared/testdata: Qwen3's, which thinks
 * and calls tools) and no weights:
 *   - the body: mxl_srv_parse_json (JSON depth limit, jansson);
 *   - every object: mxl_srv_parse_params (sampling, stop, max_tokens, logit_bias, lora), the
 *     constraint (grammar / json_schema / response_format, both route kinds), compiled and run
 *     a few bytes as the sampler would;
 *   - "messages": the OpenAI chat reading (with and without image URLs), the template options,
 *     the render, the tokenization, the chat output syntax with the request's tools, and the
 *     last message's text parsed as model output; the same messages as an Anthropic request;
 *   - "input" / "instructions": the Responses items, messages and tools, rendered;
 *   - "prompt": the completion prompts (strings, ids, mixed, several); "lora": adapter scales.
 * No input may crash, leak, read out of bounds or hang; a refusal is a one-line message.
 * Seeds: tests/fuzz/corpus/request/ (bodies of real requests of each route).
 *
 *   make build/fuzz/fuzz_request
 *   build/fuzz/fuzz_request -max_len=8192 tests/fuzz/corpus/request
 * (the testdata is found beside the repository, ../shared/testdata, from the binary's path, or
 * at $MXL_TESTDATA) */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "engine/chat.h"
#include "engine/chat_parse.h"
#include "engine/grammar.h"
#include "engine/model_internal.h"
#include "server/config.h"
#include "server/constraint.h"
#include "server/gen_call.h"
#include "server/request.h"
#include "server/server_state.h"
#include "server/tool_choice.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(c) ((c) ? (void)0 : fuzz_fail(#c, __LINE__))

static void fuzz_fail(const char *expr, int line) {
    fprintf(stderr, "fuzz_request.c:%d: invariant failed: %s\n", line, expr);
    abort();
}

/* A refusal's message: not empty, within its buffer. (It may quote the request's own strings,
 * control characters included: mxl_srv_error puts it on one line.) */
static void check_msg(const char *msg, size_t cap) {
    size_t n = strnlen(msg, cap);
    FUZZ_ASSERT(n > 0 && n < cap);
}

static mxl_server g_srv;
static mxl_server_config g_cfg;
static struct mxl_gen_model g_model;
static int g_lora_dummy[2];

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? mxl_malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) mxl_free(b), b = NULL;
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

/* ../shared/testdata beside the repository the binary was built in (build/fuzz/fuzz_request). */
static void testdata_dir(char *out, size_t cap) {
    const char *env = getenv("MXL_TESTDATA");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) abort();
    exe[n] = 0;
    for (int up = 0; up < 3; up++) { /* .../repo/build/fuzz/fuzz_request -> .../repo */
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
    }
    snprintf(out, cap, "%s/../shared/testdata", exe);
}

/* The server state `serve -m ...` builds before loading weights: flags (small limits, so short
 * inputs reach them), request defaults (server.c set_request_defaults), the model's tokenizer
 * and template, two LoRA adapter ids. */
static void setup(void) {
    char *argv[] = {"serve", "-m", "fuzz", "--max-messages", "24", "--max-tools", "6", "--max-logit-bias", "48", "--max-grammar-bytes",
                    "4096", "--max-json-depth", "40", "--max-inputs", "8", "-r", "User:", NULL};
    mxl_error err = {0};
    if (mxl_server_config_parse((int)(sizeof argv / sizeof argv[0]) - 1, argv, &g_cfg, &err)) {
        fprintf(stderr, "fuzz_request: flags: %s\n", err.msg);
        abort();
    }
    char dir[PATH_MAX], path[PATH_MAX + 64];
    testdata_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tokenizers/qwen3", dir);
    if (mxl_tokenizer_load(path, &g_model.tok, &err)) {
        fprintf(stderr, "fuzz_request: %s: %s (set MXL_TESTDATA to ../shared/testdata)\n", path, err.msg);
        abort();
    }
    snprintf(path, sizeof path, "%s/templates/templates/Qwen-Qwen3-0.6B.jinja", dir);
    g_model.tsrc.text = slurp(path);
    if (!g_model.tsrc.text || mxl_template_parse(g_model.tsrc.text, strlen(g_model.tsrc.text), "qwen3.jinja", &g_model.tmpl, &err)) {
        fprintf(stderr, "fuzz_request: %s: cannot read or parse the template\n", path);
        abort();
    }
    snprintf(g_model.eos_text, sizeof g_model.eos_text, "<|im_end|>");
    mxl_server *s = &g_srv;
    s->cfg = &g_cfg;
    s->prefix = "";
    s->model = &g_model;
    s->tok = g_model.tok;
    s->reasoning = MXL_REASONING_ON;
    snprintf(s->date_string, sizeof s->date_string, "15 Jan 2026");
    snprintf(s->datetime_text, sizeof s->datetime_text, "Jan 15 2026 12:34:56 GMT");
    pthread_mutex_init(&s->lora_mu, NULL);
    pthread_mutex_init(&s->sleep_mu, NULL);
    s->n_lora = 2; /* ids only: reading a request never touches an adapter */
    s->lora[0] = (struct mxl_lora *)&g_lora_dummy[0];
    s->lora[1] = (struct mxl_lora *)&g_lora_dummy[1];
    s->lora_scale[0] = 1.0f;
    s->defaults.sampling = g_cfg.sampling;
    s->defaults.max_tokens = g_cfg.n_predict;
    s->defaults.cache_prompt = g_cfg.prompt_cache;
    for (int i = 0; i < g_cfg.n_reverse_prompt && i < MXL_SEQ_MAX_STOP; i++) s->defaults.stop[s->defaults.n_stop++] = g_cfg.reverse_prompt[i];
    s->defaults.sampling.logit_bias = s->default_bias;
}

/* A constraint as the route reads it, then compiled and run over a few bytes as the sampler's
 * grammar state would be. */
static void constraint(const json_t *body, bool openai) {
    mxl_seq_params p = g_srv.defaults;
    char msg[512] = "";
    if (!mxl_srv_parse_constraint(&g_srv, body, openai, &p, msg, sizeof msg)) {
        check_msg(msg, sizeof msg);
        return;
    }
    char *own = mxl_srv_constraint_owned(&p, g_srv.defaults.sampling.grammar);
    if (own) {
        mxl_grammar *gr = NULL;
        mxl_grammar_state *st = NULL;
        mxl_error err = {0};
        FUZZ_ASSERT(mxl_grammar_parse(own, strlen(own), &gr, &err) == MXL_OK); /* checked once already: must compile */
        if (mxl_grammar_state_create(gr, &st, &err) == MXL_OK) {
            static const char *const tries[] = {"{\"a\": 1}", "[1, \"x\"]", "true", "\"\\u00e9\"", "yes"};
            for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
                mxl_grammar_state_reset(st);
                (void)mxl_grammar_state_accept_bytes(st, tries[i], strlen(tries[i]));
                (void)mxl_grammar_state_can_end(st);
            }
            mxl_grammar_state_destroy(st);
        }
        mxl_grammar_destroy(gr);
    }
    mxl_free(own);
}

/* Renders chat messages (with tools) as the routes do, tokenizes the prompt, and runs the chat
 * output syntax it implies over `answer` (model output). */
static void render(const json_t *msgs, const mxl_chat_opts *o, const char *answer) {
    char *text = NULL;
    size_t len = 0;
    mxl_error err = {0};
    if (mxl_chat_render(&g_model, msgs, o, &text, &len, &err) != MXL_OK) {
        check_msg(err.msg, sizeof err.msg);
        return;
    }
    mxl_token_ids ids = {0};
    if (mxl_chat_tokenize_rendered(&g_model, text, len, &ids, &err) == MXL_OK) mxl_token_ids_free(&ids);
    mxl_chat_syntax syn = mxl_chat_syntax_detect(g_model.tsrc.text, text);
    if (!o->tools) mxl_chat_syntax_without_tools(&syn);
    syn.tools = o->tools;
    if (answer) {
        json_t *out = NULL;
        if (mxl_chat_parse(&syn, answer, strlen(answer), &out, &err) == MXL_OK) json_decref(out);
    }
    mxl_free(text);
}

/* The last message's text, as the model's answer to parse. */
static const char *last_text(const json_t *msgs) {
    const json_t *m = json_array_get(msgs, json_array_size(msgs) ? json_array_size(msgs) - 1 : 0);
    return json_string_value(json_object_get(m, "content"));
}

/* tool_choice in both shapes, and the forcing grammar of the request's tools in every call syntax
 * (with and without thinking first): a grammar (parsed by the builder itself) or a one-line
 * refusal */
static void forced_calls(const json_t *body, const json_t *tools) {
    char msg[512] = "";
    mxl_tool_choice tc, ta;
    if (!mxl_srv_tool_choice_openai(json_object_get(body, "tool_choice"), &tc, msg, sizeof msg)) check_msg(msg, sizeof msg);
    if (!mxl_srv_tool_choice_anthropic(json_object_get(body, "tool_choice"), &ta, msg, sizeof msg)) check_msg(msg, sizeof msg);
    if (!tools) return;
    static const mxl_chat_format fmts[] = {MXL_CHAT_FMT_HERMES, MXL_CHAT_FMT_QWEN3_XML, MXL_CHAT_FMT_LLAMA3_JSON, MXL_CHAT_FMT_MISTRAL,
                                           MXL_CHAT_FMT_MISTRAL, MXL_CHAT_FMT_GPT_OSS};
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
        mxl_chat_syntax syn = {.fmt = fmts[f]};
        if (f == 1) syn.tool_open = "<seed:tool_call>", syn.tool_close = "</seed:tool_call>";
        if (f == 2) syn.think_tags = true, syn.think_open = "<think>", syn.think_close = "</think>";
        if (f == 3) syn.think_tags = syn.starts_in_reasoning = true, syn.think_open = "[THINK]", syn.think_close = "[/THINK]";
        const char *tpl = f == 3 ? "[TOOL_CALLS]N[ARGS]" : "";
        const char *only = f % 2 ? json_string_value(json_object_get(json_object_get(json_array_get(tools, 0), "function"), "name")) : NULL;
        char *g = mxl_srv_forced_call_grammar(&syn, tpl, tools, only, msg, sizeof msg);
        if (!g) check_msg(msg, sizeof msg);
        mxl_free(g);
    }
}

static void openai_chat(const json_t *body) {
    for (int with_images = 0; with_images < 2; with_images++) {
        char msg[512] = "";
        json_t *urls = with_images ? json_array() : NULL, *kw = NULL;
        json_t *msgs = mxl_srv_chat_messages(&g_srv, json_object_get(body, "messages"), urls, msg, sizeof msg);
        mxl_chat_opts o;
        if (!msgs) {
            check_msg(msg, sizeof msg);
        } else if (!mxl_srv_chat_opts(&g_srv, body, &o, &kw, msg, sizeof msg)) {
            check_msg(msg, sizeof msg);
        } else if (!with_images) {
            render(msgs, &o, last_text(msgs));
            forced_calls(body, o.tools);
        }
        json_decref(kw);
        json_decref(msgs);
        json_decref(urls);
    }
}

static void anthropic(const json_t *body) {
    char msg[512] = "";
    json_t *urls = json_array();
    json_t *chat = mxl_srv_anthropic_chat(&g_srv, body, urls, msg, sizeof msg);
    if (!chat) {
        check_msg(msg, sizeof msg);
    } else {
        bool bad = false;
        json_t *tools = mxl_srv_anthropic_tools(&g_srv, json_object_get(body, "tools"), msg, sizeof msg, &bad);
        if (bad) {
            check_msg(msg, sizeof msg);
        } else {
            mxl_chat_opts o = {.tools = tools, .kwargs = g_srv.template_kwargs, .add_generation_prompt = true, .reasoning = g_srv.reasoning};
            render(chat, &o, NULL);
        }
        json_decref(tools);
    }
    json_decref(chat);
    json_decref(urls);
}

static void responses(const json_t *body) {
    char msg[512] = "";
    json_t *items = mxl_srv_responses_items(json_object_get(body, "input"), "resp_fuzz", msg, sizeof msg);
    if (!items) {
        check_msg(msg, sizeof msg);
        return;
    }
    json_t *msgs = mxl_srv_responses_messages(items, msg, sizeof msg), *tools = NULL, *chat = NULL, *kw = NULL;
    bool bad = false;
    if (!msgs) {
        check_msg(msg, sizeof msg);
        goto out;
    }
    const json_t *instr = json_object_get(body, "instructions");
    if (json_is_string(instr)) json_array_insert_new(msgs, 0, json_pack("{s:s, s:O}", "role", "developer", "content", instr));
    tools = mxl_srv_responses_tools(json_object_get(body, "tools"), msg, sizeof msg, &bad);
    if (bad) {
        check_msg(msg, sizeof msg);
        goto out;
    }
    if (!json_array_size(msgs)) goto out;
    json_t *cbody = json_object();
    if (tools) json_object_set(cbody, "tools", tools);
    mxl_chat_opts o;
    if (!(chat = mxl_srv_chat_messages(&g_srv, msgs, NULL, msg, sizeof msg)) || !mxl_srv_chat_opts(&g_srv, cbody, &o, &kw, msg, sizeof msg))
        check_msg(msg, sizeof msg);
    else
        render(chat, &o, NULL);
    json_decref(cbody);
out:
    json_decref(kw);
    json_decref(chat);
    json_decref(tools);
    json_decref(msgs);
    json_decref(items);
}

static void prompts(const json_t *body) {
    mxl_gen_call *g = mxl_calloc(1, sizeof *g);
    if (!g) return;
    g->srv = &g_srv;
    g->n = 1;
    const json_t *n = json_object_get(body, "n");
    if (json_is_integer(n) && json_integer_value(n) > 1 && json_integer_value(n) <= MXL_SRV_MAX_CHOICES) g->n = (int)json_integer_value(n);
    char msg[512] = "";
    if (!mxl_srv_parse_prompts(&g_srv, json_object_get(body, "prompt"), g, msg, sizeof msg)) check_msg(msg, sizeof msg);
    mxl_gen_call_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool ready;
    if (!ready) {
        setup();
        ready = true;
    }
    char msg[512] = "";
    int status = 0;
    json_t *body = mxl_srv_parse_json(&g_srv, (const char *)data, size, &status, msg, sizeof msg);
    if (!body) {
        check_msg(msg, sizeof msg);
        FUZZ_ASSERT(status == 400 || status == 500);
        return 0;
    }
    if (json_is_array(body)) { /* POST /lora-adapters */
        float scale[MXL_SRV_MAX_MULTI];
        if (!mxl_srv_lora_scales(&g_srv, body, scale, msg, sizeof msg)) check_msg(msg, sizeof msg);
    }
    if (!json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    mxl_seq_params p;
    mxl_logit_bias *bias = NULL;
    if (mxl_srv_parse_params(&g_srv, body, &p, &bias, msg, sizeof msg)) {
        FUZZ_ASSERT(p.n_stop <= MXL_SEQ_MAX_STOP);
        FUZZ_ASSERT(p.sampling.n_logit_bias <= (size_t)g_cfg.max_logit_bias + (size_t)g_cfg.n_logit_bias);
        FUZZ_ASSERT(p.max_tokens >= -1);
        mxl_free(bias);
    } else {
        check_msg(msg, sizeof msg);
    }
    constraint(body, true);
    constraint(body, false);
    if (json_object_get(body, "messages")) {
        openai_chat(body);
        anthropic(body);
    }
    if (json_object_get(body, "input") || json_object_get(body, "instructions")) responses(body);
    if (json_object_get(body, "prompt")) prompts(body);
    const json_t *lora = json_object_get(body, "lora");
    if (lora) {
        float scale[MXL_SRV_MAX_MULTI];
        if (!mxl_srv_lora_scales(&g_srv, lora, scale, msg, sizeof msg)) check_msg(msg, sizeof msg);
    }
    json_decref(body);
    return 0;
}
