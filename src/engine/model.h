/* model.h - the loaded text-generation model: a checkpoint's decoder, tokenizer, chat template
 * and thread pool, opened once and shared by every request (generate.h runs one request on it,
 * sequence.h and the server's scheduler run many). */
#ifndef MXL_ENGINE_MODEL_H
#define MXL_ENGINE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

typedef struct mxl_gen_model mxl_gen_model;

/* path: a resolved checkpoint (GGUF file or directory). n_threads >= 1. */
mxl_status mxl_gen_model_load(const char *path, int n_threads, mxl_gen_model **out, mxl_error *err);
/* The autotune cache's one-line warning at load ("" when none; the front end prints it) and in
 * *applied (may be NULL) how many tuned values it set (engine/autotune.h, MLXCEL_AUTOTUNE). */
const char *mxl_gen_model_autotune_note(const mxl_gen_model *m, int *applied);
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
/* The KV cache storage for states made from now on, from the user's flags (engine/memory_estimate.h
 * mxl_kv_flags: --kv-cache-mode, --cache-type-k / -v, --turbo-boundary-v): f32, fp16 / f16
 * (default), q8_0, q4_0, q4_1, q5_0, q5_1 (ggml's block formats), int8, turbo4 / turbo3
 * (TurboQuant, the first and last --turbo-boundary-v layers' values kept fp16), fp16+turbo4 /
 * fp16+turbo3; bf16 and types this model cannot hold are refused by name. */
struct mxl_kv_flags;
mxl_status mxl_gen_model_set_kv(mxl_gen_model *m, const struct mxl_kv_flags *f, mxl_error *err);
/* The chat template source text. */
const char *mxl_gen_model_template_text(const mxl_gen_model *m);
/* The model's tokenizer (owned by the model). */
const struct mxl_tokenizer *mxl_gen_model_tokenizer(const mxl_gen_model *m);
/* The open checkpoint (config, weight bytes). */
const struct mxl_checkpoint *mxl_gen_model_checkpoint(const mxl_gen_model *m);
/* The loaded decoder's hyper-parameters. */
const struct mxl_decoder_hparams *mxl_gen_model_hparams(const mxl_gen_model *m);
/* The vision side of a vision-language checkpoint, NULL for a text-only model; then
 * mxl_gen_model_no_vision says why images are refused. */
const struct mxl_vlm *mxl_gen_model_vlm(const mxl_gen_model *m);
const char *mxl_gen_model_no_vision(const mxl_gen_model *m);
/* The model's thread pool (the engine thread's: the scheduler runs vision towers on it). */
struct mxl_threadpool *mxl_gen_model_pool(const mxl_gen_model *m);
/* Loads a LoRA adapter (models/lora.h: a PEFT or mlx-lm directory on a safetensors model, a
 * GGUF adapter on a GGUF model) for this model's requests (mxl_seq_params.lora); the caller frees
 * it with mxl_lora_free after the model's last request that uses it. */
struct mxl_lora;
mxl_status mxl_gen_model_load_adapter(const mxl_gen_model *m, const char *path, struct mxl_lora **out, mxl_error *err);
/* Merges a loaded adapter into the model's weights at `scale` (models/lora.h mxl_lora_fuse: dense
 * base weights only); the model's later requests run it without naming it. */
mxl_status mxl_gen_model_fuse_adapter(mxl_gen_model *m, const struct mxl_lora *lora, float scale, mxl_error *err);
/* Bytes of one sequence's recurrent-layer state (0 without recurrent layers). */
uint64_t mxl_gen_model_state_bytes(const mxl_gen_model *m);

#endif
