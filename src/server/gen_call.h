/* gen_call.h - a generation call: the prompt(s) and parameters of one completion request (any
 * API), turned into scheduler jobs whose output is answered whole or streamed as SSE in the
 * request's API shape, through the chat output parser when the template thinks or calls tools
 * (gen_call.c). The OpenAI, Anthropic and llama-server completion routes build one each. */
#ifndef MXL_SERVER_GEN_CALL_H
#define MXL_SERVER_GEN_CALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/chat_parse.h"
#include "engine/sequence.h"
#include "server/http.h"
#include "server/limits.h"
#include "server/media.h"
#include "server/scheduler.h"
#include "server/server_state.h"
#include "server/tool_choice.h"

typedef enum mxl_gen_kind { MXL_GEN_CHAT, MXL_GEN_COMPLETION, MXL_GEN_LLAMA, MXL_GEN_ANTHROPIC, MXL_GEN_RESPONSES } mxl_gen_kind;

struct mxl_resp_call; /* api_responses.c */

typedef struct mxl_gen_call {
    mxl_server *srv;
    mxl_http_req *r;
    mxl_gen_kind kind;
    mxl_srv_channel *ch;
    int n;                  /* choices */
    bool pin_slot;          /* id_slot given: choice 0 runs in slot id_slot (modulo the slot count) */
    int id_slot;
    bool stream, include_usage, logprobs, multi, verbose, return_progress;
    bool timings_per_token; /* llama-server's: each streamed delta carries the timings so far */
    bool background; /* a Responses call answered at once and run on (r is NULL once answered) */
    int top_logprobs;
    char id[64];
    long created;
    char *prompt_text;      /* rendered prompt (llama /completion reports it) */
    mxl_srv_images images;  /* a vision-language request's images, in prompt order */
    mxl_decoder_media media[MXL_DECODER_MAX_MEDIA]; /* their placeholder runs in the prompt */
    int media_img[MXL_DECODER_MAX_MEDIA];           /* ... each of image media_img[b] */
    int64_t media_off[MXL_DECODER_MAX_MEDIA];       /* ... from its row media_off[b] */
    int n_media;
    int32_t *prompt_ids;    /* the prompt of every choice, or of choice 0 when prompts differ */
    size_t n_prompt;
    int32_t *prompts[MXL_SRV_MAX_CHOICES];   /* per-choice prompts of a multi-prompt request (NULL: prompt_ids) */
    size_t n_prompts[MXL_SRV_MAX_CHOICES];
    mxl_seq_params params;
    mxl_logit_bias *bias;   /* params.sampling.logit_bias storage */
    /* chat output parsing (reasoning, tool calls): active when parse is set */
    bool parse;
    mxl_chat_syntax syn;
    json_t *tools;          /* the request's tools (reference) */
    mxl_chat_stream *pstream[MXL_SRV_MAX_CHOICES];
    /* streaming state */
    int a_kind, a_index;    /* Anthropic: open content block (0 none, 1 thinking, 2 text) and its index */
    bool a_tool;            /* Anthropic: a tool_use block was sent */
    size_t seen;
    bool started[MXL_SRV_MAX_CHOICES], finished_sent, usage_sent, done_sent, ended;
    char *out;
    size_t out_len, out_off, out_cap;
    double last_write_ms;
    uint64_t alloc_failed0; /* mxl_alloc_thread_failures() when the stream started (its events are
                             * built on the connection's thread) */
    bool oom_sent;          /* the stream's out-of-memory error event went out */
    struct mxl_resp_call *resp; /* MXL_GEN_RESPONSES: the Response being built (api_responses.c) */
} mxl_gen_call;

/* Decides whether the call's output goes through the chat parser (the template thinks or calls
 * tools) and sets up the syntax; keeps special tokens in the text when its markers are special.
 * A forced tool_choice (tc, may be NULL) gets the grammar of a call in that syntax
 * (tool_choice.h) unless the request has a grammar of its own; false with msg (a 400) when it
 * cannot. Call it once the prompt is rendered (a prompt that ends inside a think tag changes
 * the grammar). */
bool mxl_srv_setup_parse(mxl_server *s, mxl_gen_call *g, const json_t *tools, const mxl_tool_choice *tc, char *msg, size_t ml);
/* A completion prompt: a string, token ids, llama-server's {"prompt_string": ...} object, or an
 * array of those (several prompts: one choice each, answered as a list by /completion). Strings
 * are tokenized with the tokenizer's special tokens added and special tokens parsed. */
bool mxl_srv_parse_prompts(mxl_server *s, const json_t *p, mxl_gen_call *g, char *msg, size_t ml);
/* llama-server's "id_slot": -1 (or absent) any free slot, N slot N modulo the slot count (as
 * llama-server wraps it); the request waits for that slot. False with msg (a 400). */
bool mxl_srv_parse_id_slot(const json_t *body, mxl_gen_call *g, char *msg, size_t ml);
/* The rendered chat prompt g->prompt_text[0..len) tokenized into g->prompt_ids: with image URLs
 * (urls, a JSON array; NULL or empty: none) the images are fetched and prepared (media.h), each
 * image marker the template wrote is expanded into the model's placeholder tokens and the
 * placeholders' rows recorded. false: msg says why (400). */
bool mxl_srv_tokenize_chat(mxl_server *s, mxl_gen_call *g, const json_t *urls, size_t len, char *msg, size_t ml);
/* Appends one server-sent event to a stream's output: "event: NAME" (when name is set) and
 * "data: JSON" (j is released). For the Responses API's stream (api_responses.c). */
void mxl_gen_call_emit(mxl_gen_call *g, const char *name, json_t *j);
/* llama-server's timings of the call so far (channel lock held; before the end, generation time
 * runs to now), and a prefill progress event's {"prompt_progress", "timings"} fields. */
json_t *mxl_gen_call_timings(const mxl_gen_call *g);
json_t *mxl_gen_progress_fields(const mxl_srv_event *e);
/* The OpenAI logprobs entry of an event's token (token, logprob, bytes, top_logprobs up to g->top_logprobs). */
json_t *mxl_gen_token_logprob(const mxl_gen_call *g, const mxl_srv_event *e);
/* Frees a call that was not run (its fields may be partly filled). */
void mxl_gen_call_free(mxl_gen_call *g);
/* Submits n jobs for the call's prompt and answers: a whole JSON response or an SSE stream.
 * Takes ownership of the call (heap-allocated). Errors are answered in the call's API shape. */
void mxl_gen_call_run(mxl_gen_call *g);

#endif
