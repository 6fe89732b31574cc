/* generate.h - one generation request end to end on one sequence: prompt rendering through the
 * checkpoint's chat template (or raw text), tokenization with special tokens parsed, prefill,
 * the decode loop with the sampler, EOS stop, and UTF-8-safe streaming of the text. `mlxcel
 * generate` and `mlxcel run -p` use it; the server will drive the same pieces per slot. */
#ifndef MXL_ENGINE_GENERATE_H
#define MXL_ENGINE_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "engine/sampler.h"

typedef struct mxl_gen_model mxl_gen_model;

/* path: a resolved checkpoint (GGUF file or directory). n_threads >= 1. */
mxl_status mxl_gen_model_load(const char *path, int n_threads, mxl_gen_model **out, mxl_error *err);
void mxl_gen_model_destroy(mxl_gen_model *m);
/* The chat template's origin ("tokenizer.chat_template in the GGUF", ...) and whether it is the
 * generic fallback (the checkpoint ships none). */
const char *mxl_gen_model_template_origin(const mxl_gen_model *m, bool *generic);

/* Vocabulary size of the model's logits. */
int64_t mxl_gen_model_vocab(const mxl_gen_model *m);
/* The context a request gets when it names none: the model's own limit, capped at 8192. */
int64_t mxl_gen_model_default_ctx(const mxl_gen_model *m);

/* Replaces the checkpoint's chat template (--chat-template / --chat-template-file); a template
 * that does not parse is refused with its error and the old one is kept. */
mxl_status mxl_gen_model_set_template(mxl_gen_model *m, const char *text, const char *origin, mxl_error *err);
/* KV cache storage of the model's future sequences, by the spec's names: "fp16" (default) or
 * "int8" for K and V separately (NULL keeps the current one); other modes are refused by name. */
mxl_status mxl_gen_model_set_kv_types(mxl_gen_model *m, const char *k, const char *v, mxl_error *err);
/* The chat template source text. */
const char *mxl_gen_model_template_text(const mxl_gen_model *m);
/* The model's tokenizer (owned by the model). */
const struct mxl_tokenizer *mxl_gen_model_tokenizer(const mxl_gen_model *m);

typedef struct mxl_gen_request {
    const char *prompt;
    bool chat;           /* render through the chat template as one user message */
    int64_t max_tokens;  /* -1: until EOS or the context is full */
    int64_t max_context; /* KV capacity; <= 0: the model's own limit, capped at 8192 */
    bool ignore_eos;     /* EOS ids are masked out instead of stopping */
    mxl_sampler_params sampling;
    const char *stop[16]; /* stop strings (never printed) */
    int n_stop;
    bool show_reasoning; /* chat: also pass the reasoning on (else only the answer; markers never) */
} mxl_gen_request;

#define MXL_GEN_MAX_STOP 16

typedef struct mxl_gen_stats {
    int64_t prompt_tokens, generated_tokens;
    double prefill_ms, decode_ms;
    const char *finish_reason; /* "stop" (EOS), "length" */
} mxl_gen_stats;

/* Called with each newly final piece of text; return nonzero to stop early. */
typedef int (*mxl_gen_text_fn)(void *ctx, const char *text, size_t len);

/* Tokens of the prompt as req renders it (chat template or raw), e.g. for a memory preflight. */
mxl_status mxl_gen_prompt_tokens(mxl_gen_model *m, const mxl_gen_request *req, int64_t *n, mxl_error *err);
/* The open checkpoint (config, weight bytes). */
const struct mxl_checkpoint *mxl_gen_model_checkpoint(const mxl_gen_model *m);

mxl_status mxl_gen_run(mxl_gen_model *m, const mxl_gen_request *req, mxl_gen_text_fn on_text,
                       void *ctx, mxl_gen_stats *stats, mxl_error *err);

#endif
