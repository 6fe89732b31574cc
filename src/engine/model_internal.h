/* model_internal.h - the loaded text-generation model shared by the engine's request pieces
 * (model.c loads it, chat.c renders prompts with its template, sequence.c runs sequences on
 * its decoder). Not part of the public engine API: callers outside src/engine use model.h,
 * generate.h, chat.h and sequence.h. */
#ifndef MXL_ENGINE_MODEL_INTERNAL_H
#define MXL_ENGINE_MODEL_INTERNAL_H

#include "core/threadpool.h"
#include "engine/model.h"
#include "models/checkpoint.h"
#include "models/decoder.h"
#include "models/vlm.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"

struct mxl_gen_model {
    mxl_checkpoint *ck;
    mxl_decoder dec;
    bool dec_loaded;
    mxl_tokenizer *tok;
    mxl_template *tmpl;
    mxl_chat_template_source tsrc;
    mxl_threadpool *pool;
    /* every id that ends generation: the tokenizer's (generation_config / vocab) and the
     * checkpoint config's, merged once at load */
    int32_t eos[64];
    int n_eos;
    char bos_text[256], eos_text[256]; /* the special tokens' text for the template */
    mxl_decoder_kv_opts kv;            /* KV storage of new sequences (AUTO: f16, f32 on the reference path) */
    mxl_vlm *vlm;                      /* the vision side, NULL for a text-only model */
    char no_vision[4600];              /* why images are refused when vlm is NULL */
    char autotune_note[5000];          /* the autotune cache's warning at load ("" when none) */
    int autotune_applied;              /* knob values the cache set at load (autotune.h) */
};

#endif
