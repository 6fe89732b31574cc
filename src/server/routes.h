/* routes.h - the route handlers of the HTTP API, one function per endpoint, defined in the api_*.c
 * files and called by server.c's routing table after authentication and the readiness checks. */
#ifndef MXL_SERVER_ROUTES_H
#define MXL_SERVER_ROUTES_H

#include "server/http.h"
#include "server/server_state.h"

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
void mxl_api_llama_infill(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_slot_action(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_tokenize(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_detokenize(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_apply_template(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_health(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_props(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_slots(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_metrics(mxl_server *s, mxl_http_req *r);
void mxl_api_llama_lora_adapters(mxl_server *s, mxl_http_req *r);
void mxl_api_cache_stats(mxl_server *s, mxl_http_req *r);
/* GET / PATCH /v1/settings (api_settings.c) */
void mxl_api_settings(mxl_server *s, mxl_http_req *r);
void mxl_api_responses_create(mxl_server *s, mxl_http_req *r);
void mxl_api_responses_input_tokens(mxl_server *s, mxl_http_req *r);
/* /v1/responses/{rest}: GET / DELETE {id}, POST {id}/cancel, GET {id}/input_items, POST input_tokens */
void mxl_api_responses_item(mxl_server *s, mxl_http_req *r, const char *rest);
/* /v1/conversations and below (rest "" for the collection): create, {id} GET / POST / DELETE,
 * {id}/items GET / POST, {id}/items/{item_id} GET / DELETE */
void mxl_api_conversations(mxl_server *s, mxl_http_req *r, const char *rest);

#endif
