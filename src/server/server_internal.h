/* server_internal.h - what the route files share: the running server's state, error replies in
 * each API's shape, request-field readers with 400-ready messages, and the generation call that
 * turns a prompt into scheduler jobs and waits for or streams their output. */
#ifndef MXL_SERVER_INTERNAL_H
#define MXL_SERVER_INTERNAL_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/chat.h"
#include "engine/chat_parse.h"
#include "engine/embed.h"
#include "engine/generate.h"
#include "engine/rerank.h"
#include "engine/sequence.h"
#include "server/config.h"
#include "server/http.h"
#include "server/scheduler.h"
#include "tokenizer/tokenizer.h"

/* One request at a time on a model, a bounded line of waiting callers, a wait limit. */
typedef struct mxl_srv_worker {
    pthread_mutex_t run, mu;
    int waiting, queue_depth, timeout_s;
} mxl_srv_worker;
mxl_status mxl_srv_worker_init(mxl_srv_worker *w, int queue_depth, int timeout_s);
void mxl_srv_worker_destroy(mxl_srv_worker *w);

typedef struct mxl_server {
    const mxl_server_config *cfg;
    char *api_key;          /* from --api-key or --api-key-file */
    const char *prefix;     /* "" or "/llama" */
    atomic_bool ready;      /* model loaded */
    mxl_gen_model *model;   /* NULL when the server only embeds / reranks */
    mxl_embed_model *embedder;
    mxl_embed_opts embed_opts;
    mxl_srv_worker embed_worker;
    char embed_name[512];
    mxl_reranker *reranker;
    mxl_rerank_opts rerank_opts;
    mxl_srv_worker rerank_worker;
    char rerank_name[512];
    bool workers_ready;
    atomic_ullong aux_tokens, aux_passes; /* embedding / rerank tokens and forward passes, for /metrics */
    const mxl_tokenizer *tok;
    mxl_sched *sched;
    json_t *template_kwargs; /* --chat-template-kwargs or NULL */
    json_t *aliases, *tags;  /* arrays of strings from --alias / --tags */
    char model_name[512];
    char model_path[4096];
    int64_t slot_ctx, n_predict_default;
    long created;           /* start time, for /v1/models */
    char created_text[32];
    char date_string[32];
    char datetime_text[48];  /* "%b %d %Y %H:%M:%S GMT" */   /* today, "%d %b %Y", for templates that read date_string (Llama 3.x) */
    atomic_ullong next_id;
    mxl_reasoning reasoning; /* --reasoning */
    mxl_seq_params defaults; /* server-wide sampling defaults */
    mxl_logit_bias default_bias[MXL_SRV_MAX_MULTI]; /* --logit-bias */
} mxl_server;

typedef enum mxl_api { MXL_API_OPENAI, MXL_API_LLAMA, MXL_API_ANTHROPIC } mxl_api;

/* Error reply in the API's JSON shape. type: "invalid_request_error", "authentication_error",
 * "not_found_error", "unavailable_error", "server_error", "not_supported_error". */
void mxl_srv_error(mxl_http_req *r, mxl_api api, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Parses the body as a JSON object; on failure replies 400 and returns NULL. */
json_t *mxl_srv_body_json(mxl_http_req *r, mxl_api api);

/* Sampling and stopping fields shared by the completion APIs (temperature, top_k, top_p, min_p,
 * penalties, seed, stop, max_tokens / max_completion_tokens / n_predict, ignore_eos, n_probs...)
 * over the server defaults. Fills msg (for a 400) and returns false on a wrong type or value.
 * The stop strings point into `body`. */
bool mxl_srv_parse_params(const mxl_server *s, const json_t *body, mxl_seq_params *p, mxl_logit_bias **bias, char *msg,
                          size_t msg_len);

/* Chat messages of a request, content part lists flattened to text; NULL with msg set (400). */
json_t *mxl_srv_chat_messages(const json_t *msgs, char *msg, size_t ml);
/* Template options of a chat request: tools, add_generation_prompt, chat_template_kwargs over
 * the server's, enable_thinking / reasoning_effort, the server's --reasoning. *kw receives the
 * merged kwargs object to release after rendering. */
bool mxl_srv_chat_opts(const mxl_server *s, const json_t *body, mxl_chat_opts *o, json_t **kw, char *msg, size_t ml);

/* Text of the token, as JSON-able UTF-8 (invalid bytes replaced). Caller frees. */
char *mxl_srv_token_text(const mxl_server *s, int32_t id);

/* --- a generation call ---------------------------------------------------------------------- */
typedef enum mxl_gen_kind { MXL_GEN_CHAT, MXL_GEN_COMPLETION, MXL_GEN_LLAMA, MXL_GEN_ANTHROPIC } mxl_gen_kind;

typedef struct mxl_gen_call {
    mxl_server *srv;
    mxl_http_req *r;
    mxl_gen_kind kind;
    mxl_srv_channel *ch;
    int n;                  /* choices */
    bool stream, include_usage, logprobs, multi, verbose, return_progress;
    int top_logprobs;
    char id[64];
    long created;
    char *prompt_text;      /* rendered prompt (llama /completion reports it) */
    int32_t *prompt_ids;    /* the prompt of every choice, or of choice 0 when prompts differ */
    size_t n_prompt;
    int32_t *prompts[16];   /* per-choice prompts of a multi-prompt request (NULL: prompt_ids) */
    size_t n_prompts[16];
    mxl_seq_params params;
    mxl_logit_bias *bias;   /* params.sampling.logit_bias storage */
    /* chat output parsing (reasoning, tool calls): active when parse is set */
    bool parse;
    mxl_chat_syntax syn;
    json_t *tools;          /* the request's tools (reference) */
    mxl_chat_stream *pstream[16];
    /* streaming state */
    int a_kind, a_index;    /* Anthropic: open content block (0 none, 1 thinking, 2 text) and its index */
    bool a_tool;            /* Anthropic: a tool_use block was sent */
    size_t seen;
    bool started[16], finished_sent, usage_sent, done_sent, ended;
    char *out;
    size_t out_len, out_off, out_cap;
    double last_write_ms;
} mxl_gen_call;

/* Decides whether the call's output goes through the chat parser (the template thinks or calls
 * tools) and sets up the syntax; keeps special tokens in the text when its markers are special. */
void mxl_srv_setup_parse(mxl_server *s, mxl_gen_call *g, const json_t *tools);
/* A completion prompt: a string, token ids, llama-server's {"prompt_string": ...} object, or an
 * array of those (several prompts: one choice each, answered as a list by /completion). Strings
 * are tokenized with the tokenizer's special tokens added and special tokens parsed. */
bool mxl_srv_parse_prompts(mxl_server *s, const json_t *p, mxl_gen_call *g, char *msg, size_t ml);
/* Frees a call that was not run (its fields may be partly filled). */
void mxl_gen_call_free(mxl_gen_call *g);
/* Submits n jobs for the call's prompt and answers: a whole JSON response or an SSE stream.
 * Takes ownership of the call (heap-allocated). Errors are answered in the call's API shape. */
void mxl_gen_call_run(mxl_gen_call *g);

/* route handlers */
void mxl_api_openai_chat(mxl_server *s, mxl_http_req *r);
void mxl_api_openai_completions(mxl_server *s, mxl_http_req *r);
void mxl_api_openai_models(mxl_server *s, mxl_http_req *r);
void mxl_api_openai_input_tokens(mxl_server *s, mxl_http_req *r);
void mxl_api_anthropic_messages(mxl_server *s, mxl_http_req *r);
void mxl_api_anthropic_count_tokens(mxl_server *s, mxl_http_req *r);
void mxl_api_embeddings_openai(mxl_server *s, mxl_http_req *r);
void mxl_api_embeddings_llama(mxl_server *s, mxl_http_req *r);
void mxl_api_rerank(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_completion(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_tokenize(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_detokenize(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_apply_template(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_health(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_props(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_slots(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_metrics(mxl_server *s, mxl_http_req *r);
void mxl_api_cache_stats(mxl_server *s, mxl_http_req *r);

#endif
