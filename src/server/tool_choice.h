/* tool_choice.h - a request's tool_choice (OpenAI chat completions and Responses, Anthropic
 * messages) and the grammar that forces a tool call in the model's own call syntax.
 *
 * "none" leaves the tools out of the prompt; "required" (Anthropic "any") and a named function
 * (Anthropic {"type": "tool", "name"}) force one call, as llama-server does, by a grammar over the
 * template's call format (engine/chat_parse.h): Hermes <tool_call>{"name", "arguments"}</tool_call>,
 * Qwen3 XML <tool_call><function=N><parameter=P>...</function></tool_call> (and Seed-OSS's markers),
 * Llama 3 {"name", "parameters"}, Mistral [TOOL_CALLS]N[ARGS]{...} or [TOOL_CALLS][{"name",
 * "arguments"}], GPT-OSS <|channel|>commentary to=functions.N <|constrain|>json<|message|>{...}<|call|>.
 * The arguments follow each tool's parameter schema (json_schema.h); a thinking template may
 * think first. A template with no call format known here gets no grammar: the call is asked
 * of the model, not forced. */
#ifndef MXL_SERVER_TOOL_CHOICE_H
#define MXL_SERVER_TOOL_CHOICE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "engine/chat_parse.h"

typedef struct mxl_tool_choice {
    bool none;        /* the tools stay out of the prompt */
    bool forced;      /* one call must come */
    const char *only; /* that call's function (points into the request), or NULL for any */
} mxl_tool_choice;

/* OpenAI's tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}}
 * (chat completions) or {"type": "function", "name"} (Responses); absent or null is auto. false
 * with msg (a 400) otherwise. */
bool mxl_srv_tool_choice_openai(const json_t *tc, mxl_tool_choice *out, char *msg, size_t ml);
/* Anthropic's: {"type": "auto" | "any" | "none"} or {"type": "tool", "name"}. */
bool mxl_srv_tool_choice_anthropic(const json_t *tc, mxl_tool_choice *out, char *msg, size_t ml);

/* The GBNF that forces one call of `tools` (OpenAI function tools; only that named one when
 * `only`) in syn's format. NULL with msg empty when the format has no forcing grammar here, NULL
 * with msg set (a 400) when `only` is not among the tools, a forced choice has no tools, or a
 * parameter schema cannot be converted. The caller frees the text. */
char *mxl_srv_forced_call_grammar(const mxl_chat_syntax *syn, const char *tpl, const json_t *tools, const char *only, char *msg,
                                  size_t ml);

#endif
