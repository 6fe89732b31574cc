/* chat_parse.h - splits what a chat model generated (decoded with its special tokens kept, e.g.
 * "<|channel|>", "[TOOL_CALLS]") into OpenAI-style pieces: content, reasoning_content and
 * tool_calls, for a whole response and incrementally for streaming.
 *
 * The format is detected from the chat template's source text (the Jinja string), as llama.cpp's
 * common/chat.cpp does, because a checkpoint says nothing else about how its model writes tool
 * calls:
 *   MXL_CHAT_FMT_HERMES      <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call> (Hermes 2/3,
 *                            Qwen 2.5, Qwen 3, QwQ, Granite 4, MiMo, Bielik); one block per call
 *   MXL_CHAT_FMT_QWEN3_XML   <tool_call>\n<function=N>\n<parameter=P>\nVALUE\n</parameter>\n
 *                            </function>\n</tool_call> (Qwen3-Coder, Nemotron 3, StepFun, and
 *                            Seed-OSS with <seed:tool_call>); VALUE is taken as JSON when it
 *                            parses as JSON and the tool's schema does not say "string"
 *   MXL_CHAT_FMT_LLAMA3_JSON the whole answer is {"name": N, "parameters": {...}} ("arguments"
 *                            too), optionally after <|python_tag|>; several calls may be
 *                            separated by ';'
 *   MXL_CHAT_FMT_MISTRAL     [TOOL_CALLS][{"name", "arguments", "id"}, ...] (Nemo) and
 *                            [TOOL_CALLS]N[CALL_ID]ID[ARGS]{...} / [TOOL_CALLS]N[ARGS]{...}
 *                            (Mistral Small 3.2, Devstral, Ministral 3), repeated per call
 *   MXL_CHAT_FMT_GPT_OSS     harmony messages: [<|start|>assistant][ to=R]<|channel|>C[ json|
 *                            <|constrain|>json]<|message|>BODY(<|end|>|<|call|>|<|return|>);
 *                            channel analysis -> reasoning, final (or commentary without a
 *                            recipient) -> content, recipient functions.N -> a tool call of N
 * Reasoning between think tags (<think>...</think>, [THINK]...[/THINK], <seed:think>...) goes to
 * reasoning_content when the template uses those tags; a think block is recognised only at the
 * start of the answer (after whitespace), and when the rendered prompt already ends inside an open
 * think tag (DeepSeek-R1, Nemotron 3, GLM 4.7, ...) the answer starts inside reasoning.
 *
 * Whitespace: except for plain text without think tags (passed through unchanged), leading and
 * trailing whitespace of the reasoning and of the content is dropped; inside them it is kept, and
 * pieces of one kind separated by a think block, a tool call or another harmony message are
 * joined by the whitespace between them, or by "\n" when there is none.
 *
 * Streaming holds text back only while it may still be a marker, with one exception: a Llama 3
 * answer that starts with '{' may be a call and is held until the end of the stream.
 *
 * Tool-call text that does not parse (bad JSON inside <tool_call>, a truncated [ARGS] object, a
 * Llama answer that is JSON but not a call) is never lost: it is returned as content, markers
 * included. Invalid UTF-8 becomes U+FFFD. Tool-call ids are the ones the format carries (Mistral)
 * or "call_" + 24 alphanumerics derived from the syntax's id_seed and the call's index, so one
 * response always gets the same ids.
 *
 * Streaming invariant (tested): for any text and any split of it into pieces, concatenating the
 * streamed content deltas gives the whole-parse content, likewise reasoning, and the streamed tool
 * calls are the whole-parse tool calls. Text that may be the start of a marker is held back until
 * it is known; a tool call is emitted whole once its end (or the end of the stream) is seen. */
#ifndef MXL_ENGINE_CHAT_PARSE_H
#define MXL_ENGINE_CHAT_PARSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef enum mxl_chat_format {
    MXL_CHAT_FMT_PLAIN = 0, /* no tool calls: everything outside think blocks is content */
    MXL_CHAT_FMT_HERMES,
    MXL_CHAT_FMT_QWEN3_XML,
    MXL_CHAT_FMT_LLAMA3_JSON,
    MXL_CHAT_FMT_MISTRAL,
    MXL_CHAT_FMT_GPT_OSS
} mxl_chat_format;

typedef struct mxl_chat_syntax {
    mxl_chat_format fmt;
    bool think_tags;          /* reasoning between think_open / think_close */
    bool starts_in_reasoning; /* the prompt ends inside an open think tag */
    /* Static strings set by mxl_chat_syntax_detect; NULL means "<think>" / "</think>" and
     * "<tool_call>" / "</tool_call>" (the tool pair is used by HERMES and QWEN3_XML). */
    const char *think_open, *think_close;
    const char *tool_open, *tool_close;
    /* The request's OpenAI "tools" array or NULL (borrowed by mxl_chat_parse; a stream holds a
     * reference). QWEN3_XML keeps a value as a string when its parameter's schema type is
     * "string". */
    const json_t *tools;
    /* Generated tool-call ids depend on it and on the call's index only: give each response its
     * own seed (a request counter) to keep ids unique across responses. */
    uint64_t id_seed;
} mxl_chat_syntax;

/* The format of a chat template (source text, may be NULL: plain) and, when the rendered prompt
 * is given (may be NULL), whether the answer starts inside reasoning. */
mxl_chat_syntax mxl_chat_syntax_detect(const char *template_src, const char *rendered_prompt);

/* For a request without tools: no tool-call parsing (so an answer in JSON is not taken for a
 * Llama 3 call), think tags kept; gpt-oss keeps its harmony parsing, whose channels also carry
 * the reasoning. */
void mxl_chat_syntax_without_tools(mxl_chat_syntax *syn);

/* "plain", "hermes", "qwen3-xml", "llama3-json", "mistral", "gpt-oss". */
const char *mxl_chat_format_name(mxl_chat_format fmt);

/* Whole response -> *out = {"content": string or null (null when empty and there are tool
 * calls), "reasoning_content": string (absent when none), "tool_calls": [{"id", "type":
 * "function", "function": {"name", "arguments": JSON text}}] (absent when none)}. */
mxl_status mxl_chat_parse(const mxl_chat_syntax *syn, const char *text, size_t len, json_t **out,
                          mxl_error *err);

/* Streaming. Each feed appends zero or more delta objects to the JSON array `deltas`:
 * {"content": "..."}, {"reasoning_content": "..."} or {"tool_calls": [{"index": i, "id", "type":
 * "function", "function": {"name", "arguments"}}]}. final = true ends the stream and flushes
 * everything held back; feeding after that is an error. */
typedef struct mxl_chat_stream mxl_chat_stream;

mxl_status mxl_chat_stream_create(const mxl_chat_syntax *syn, mxl_chat_stream **out, mxl_error *err);
mxl_status mxl_chat_stream_feed(mxl_chat_stream *s, const char *text, size_t len, bool final,
                                json_t *deltas, mxl_error *err);
/* Tool calls emitted so far. */
size_t mxl_chat_stream_tool_call_count(const mxl_chat_stream *s);
void mxl_chat_stream_destroy(mxl_chat_stream *s);

#endif
