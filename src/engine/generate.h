/* generate.h - one generation request end to end on one sequence: prompt rendering through the
 * checkpoint's chat template (or raw text), tokenization with special tokens parsed, prefill,
 * the decode loop with the sampler, EOS stop, and UTF-8-safe streaming of the text. `mlxcel
 * generate` and `mlxcel run -p` use it; the server drives the same pieces per slot. The model it
 * runs on is model.h's. */
#ifndef MXL_ENGINE_GENERATE_H
#define MXL_ENGINE_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/speculate.h"
#include "models/vlm.h"
#include "tokenizer/tokenizer.h"

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
    const char *const *images; /* image files for a vision-language model, in prompt order: chat
                                  puts them before the text of the user message; raw text places
                                  each where it writes the model's image marker (at the start when
                                  it writes none) */
    int n_images;
    const mxl_decoder_lora *lora; /* LoRA adapters of the model (mxl_gen_model_load_adapter) and their
                                     scales (1: as trained), n_lora of them */
    int n_lora;
    const struct mxl_draft_opts *draft; /* speculative decoding (engine/speculate.h), NULL: off;
                                           the output is the same tokens either way */
} mxl_gen_request;
#define MXL_GEN_MAX_IMAGES 16

#define MXL_GEN_MAX_STOP 16

typedef struct mxl_gen_stats {
    int64_t prompt_tokens, generated_tokens;
    double prefill_ms, decode_ms;
    double image_ms; /* decoding, preparing and encoding the request's images (vision tower) */
    const char *finish_reason; /* "stop" (EOS), "length" */
    mxl_draft_stats draft;     /* speculative decoding's rounds and acceptance */
} mxl_gen_stats;

/* Called with each newly final piece of text; return nonzero to stop early. */
typedef int (*mxl_gen_text_fn)(void *ctx, const char *text, size_t len);

/* An image file for the model's vision side: decoded and through its processor (the model's
 * refusal when it has none). */
mxl_status mxl_gen_image_load(const mxl_gen_model *m, const char *path, mxl_vlm_input *out, mxl_error *err);
/* The media blocks of a tokenized prompt holding n_images images (models/vlm.h), pointing at each
 * image's rows from the vision tower: rows[i] is encoded when NULL (mxl_free'd by the caller; a
 * REPL keeps them across turns). */
mxl_status mxl_gen_image_media(mxl_gen_model *m, const mxl_token_ids *ids, const mxl_vlm_input *inputs, float **rows,
                               int n_images, mxl_decoder_media *media, int *n_media, mxl_error *err);
/* Tokens of the prompt as req renders it (chat template or raw), e.g. for a memory preflight. */
mxl_status mxl_gen_prompt_tokens(mxl_gen_model *m, const mxl_gen_request *req, int64_t *n, mxl_error *err);

mxl_status mxl_gen_run(mxl_gen_model *m, const mxl_gen_request *req, mxl_gen_text_fn on_text,
                       void *ctx, mxl_gen_stats *stats, mxl_error *err);

#endif
