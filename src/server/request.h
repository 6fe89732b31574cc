/* request.h - reading an HTTP request, for every API route (api_*.c) and the generation call:
 * error replies in each API's JSON shape, the JSON body, the sampling and stopping fields over
 * the server's defaults, chat messages and template options, and a token's text. Each reader
 * fills a 400-ready message naming the field it refuses. */
#ifndef MXL_SERVER_REQUEST_H
#define MXL_SERVER_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/chat.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "server/config.h"
#include "server/http.h"

typedef struct mxl_server mxl_server; /* server_state.h */

typedef enum mxl_api { MXL_API_OPENAI, MXL_API_LLAMA, MXL_API_ANTHROPIC } mxl_api;

/* Error reply in the API's JSON shape, its message on one line (control characters become
 * spaces). type: "invalid_request_error", "authentication_error",
 * "not_found_error", "unavailable_error", "server_error", "not_supported_error". */
void mxl_srv_error(mxl_http_req *r, mxl_api api, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Parses the body as a JSON object; on failure replies 400 and returns NULL. */
json_t *mxl_srv_body_json(const mxl_server *s, mxl_http_req *r, mxl_api api);
/* The same for a body of any JSON value (POST /lora-adapters takes a list). */
json_t *mxl_srv_body_json_any(const mxl_server *s, mxl_http_req *r, mxl_api api);
/* What both run: the JSON text b[0..len) of a request to a value, nested no deeper than
 * --max-json-depth. NULL with *status (400, 500 out of memory) and msg set. */
json_t *mxl_srv_parse_json(const mxl_server *s, const char *b, size_t len, int *status, char *msg, size_t ml);

/* The transport's limits (server/limits.h) from the serve flags into hc, with the hook that
 * answers its refusals (413, 431, 429) in the API's error shape. */
void mxl_srv_http_limits(const mxl_server_config *cfg, mxl_http_config *hc);

/* The count limits of limits.h: n entries of a request's list `what` ("messages", "tools",
 * "input" / "content" / "documents") against --max-messages, --max-tools, --max-inputs. False
 * with msg (a 400 naming the limit and its flag) when there are more. */
bool mxl_srv_check_count(const mxl_server *s, const char *what, size_t n, char *msg, size_t ml);

/* A copy of the server-wide request defaults (api_settings.c; PATCH /v1/settings changes them). */
void mxl_srv_defaults_get(const mxl_server *s, mxl_seq_params *out);
/* Sampling and stopping fields shared by the completion APIs (temperature, top_k, top_p, min_p,
 * penalties, seed, stop, max_tokens / max_completion_tokens / n_predict, ignore_eos, n_probs...)
 * over the server defaults. Fills msg (for a 400) and returns false on a wrong type or value.
 * The stop strings point into `body`. */
bool mxl_srv_parse_params(const mxl_server *s, const json_t *body, mxl_seq_params *p, mxl_logit_bias **bias, char *msg,
                          size_t msg_len);

/* Chat messages of a request, content part lists flattened to text; NULL with msg set (400).
 * images: NULL refuses image parts; else (a vision-language model) messages with image_url parts
 * keep a part list with {"type": "image"} in each image's place and the URLs are appended to it. */
/* A "lora" list [{id, scale}] into scale[server's adapters] (those it does not name: 0); false
 * with msg on a bad entry or id. */
bool mxl_srv_lora_scales(const mxl_server *s, const json_t *list, float *scale, char *msg, size_t ml);
/* The request's messages checked (each an object with a known role: system, developer, user,
 * assistant, tool or function) and copied for s's chat template (developer becomes system where
 * the template does not name it); NULL with msg on a bad one. */
json_t *mxl_srv_chat_messages(const mxl_server *s, const json_t *msgs, json_t *images, char *msg, size_t ml);
/* Template options of a chat request: tools, add_generation_prompt, chat_template_kwargs over
 * the server's, enable_thinking / reasoning_effort, the server's --reasoning. *kw receives the
 * merged kwargs object to release after rendering. */
bool mxl_srv_chat_opts(const mxl_server *s, const json_t *body, mxl_chat_opts *o, json_t **kw, char *msg, size_t ml);

/* Other APIs' requests read as chat requests (the fuzz harness runs them too):
 * Anthropic Messages (api_anthropic.c): `system` and `messages` as chat messages (image block
 * URLs appended to urls when set; NULL with msg), and its tools as OpenAI function tools (NULL
 * when there are none; *bad with msg on a wrong one). */
json_t *mxl_srv_anthropic_chat(const mxl_server *s, const json_t *body, json_t *urls, char *msg, size_t ml);
json_t *mxl_srv_anthropic_tools(const mxl_server *s, const json_t *tools, char *msg, size_t ml, bool *bad);
/* Responses (api_responses.c): a request's `input` as items with ids under response id rid,
 * items as chat messages, and its function tools as chat tools (NULL with msg; tools: NULL when
 * none, *bad on a wrong one). */
json_t *mxl_srv_responses_items(const json_t *input, const char *rid, char *msg, size_t ml);
json_t *mxl_srv_responses_messages(const json_t *items, char *msg, size_t ml);
json_t *mxl_srv_responses_tools(const json_t *tools, char *msg, size_t ml, bool *bad);

/* Text of the token, as JSON-able UTF-8 (invalid bytes replaced). Caller frees. */
char *mxl_srv_token_text(const mxl_server *s, int32_t id);

#endif
