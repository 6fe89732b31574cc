/* responses.h - the OpenAI Responses API's side of a generation call (api_responses.c): the
 * Response object built from the call's output, whole or as the API's server-sent events, and
 * its entry in the response store. gen_call.c calls these for calls of kind MXL_GEN_RESPONSES;
 * everything else (rendering, scheduling, the chat output parser) is the chat route's. */
#ifndef MXL_SERVER_RESPONSES_H
#define MXL_SERVER_RESPONSES_H

#include "server/gen_call.h"

/* The jobs are submitted: stores the response as in_progress (with its channel, for cancel) and,
 * for a stream, queues response.created and response.in_progress. */
void mxl_resp_started(mxl_gen_call *g);
/* A prefill progress event (return_progress, llama-server's telemetry): response.in_progress with
 * its prompt_progress and timings. */
void mxl_resp_progress_event(mxl_gen_call *g, const mxl_srv_event *e);
/* One engine event of a streamed response (channel lock held); text: its text as a JSON string. */
void mxl_resp_stream_event(mxl_gen_call *g, const mxl_srv_event *e, const json_t *text, bool failed);
/* A background response's first answer: the stored response, in_progress. */
void mxl_resp_send_started(mxl_gen_call *g);
/* Answers a finished non-streamed call (fail: "error", "cancelled" or NULL) and stores it (a
 * background call's request was answered already: it is only stored). */
void mxl_resp_respond_whole(mxl_gen_call *g, const char *fail);
/* Frees g->resp; a response never finished (client gone, error) is stored with what it has, as
 * cancelled or failed. */
void mxl_resp_call_free(mxl_gen_call *g);

#endif
