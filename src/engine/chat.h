/* chat.h - a chat conversation (OpenAI-style messages JSON) to prompt text and token ids through
 * the model's chat template, and a raw prompt to ids. `mlxcel run`/`generate` and the server's
 * chat routes share it, so one request gives the same tokens everywhere. */
#ifndef MXL_ENGINE_CHAT_H
#define MXL_ENGINE_CHAT_H

#include <jansson.h>
#include <stdbool.h>

#include "core/status.h"
#include "engine/generate.h"
#include "tokenizer/tokenizer.h"

typedef enum mxl_reasoning { MXL_REASONING_AUTO = 0, MXL_REASONING_ON, MXL_REASONING_OFF } mxl_reasoning;

typedef struct mxl_chat_opts {
    const json_t *tools;  /* array or NULL */
    const json_t *kwargs; /* object of extra template variables (enable_thinking, ...) or NULL */
    bool add_generation_prompt;
    mxl_reasoning reasoning; /* on / off set enable_thinking (unless the kwargs do); off also closes a
                                think block the template left open, so the model answers directly
                                (llama-server's --reasoning off) */
} mxl_chat_opts;

/* Renders messages (a JSON array of {role, content, ...}) to malloc'd text. A template that
 * raises gives MXL_ERR_ARG with its message. */
mxl_status mxl_chat_render(const mxl_gen_model *m, const json_t *messages, const mxl_chat_opts *o,
                           char **text, size_t *len, mxl_error *err);
/* Token ids of a rendered chat prompt (special tokens parsed, none added, as transformers'
 * apply_chat_template does; for a vision-language model as its processor does: added, BOS and
 * the like, unless the render starts with the BOS text). */
mxl_status mxl_chat_tokenize_rendered(const mxl_gen_model *m, const char *text, size_t len,
                                      mxl_token_ids *ids, mxl_error *err);
/* Token ids of raw prompt text (BOS etc. added as the tokenizer says, special tokens parsed). */
mxl_status mxl_chat_tokenize_raw(const mxl_gen_model *m, const char *text, size_t len,
                                 mxl_token_ids *ids, mxl_error *err);

#endif
