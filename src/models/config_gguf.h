/* config_gguf.h - fills the typed model config (models/config.h) from GGUF metadata.
 *
 * The GGUF keys are llama.cpp's (`general.architecture` = ARCH, then `ARCH.block_count`,
 * `ARCH.attention.head_count`, ...); the GGUF architecture name is mapped to the Hugging Face
 * model_type the rest of mlxcel dispatches on (gemma3 -> gemma3_text, qwen2moe -> qwen2_moe, ...;
 * unknown names are kept verbatim). */
#ifndef MXL_MODELS_CONFIG_GGUF_H
#define MXL_MODELS_CONFIG_GGUF_H

#include "core/status.h"
#include "io/gguf.h"
#include "models/config.h"

/* Initialises *out (mxl_model_config_init) and fills it: source = GGUF, raw = NULL,
 * quant.mode = MXL_QUANT_GGUF with `method` from general.file_type (or the most common weight
 * type). `origin` (a path; NULL = the GGUF's own name) prefixes messages. On failure *out is
 * freed again. Keys with the wrong type or absurd values are format errors naming the key. */
mxl_status mxl_model_config_from_gguf(const mxl_gguf *g, const char *origin,
                                      mxl_model_config *out, mxl_error *err);

/* A family-specific number "ARCH.<suffix>" (ARCH = general.architecture), e.g.
 * "attn_logit_softcapping": *out is set when the key is present (float or integer type, finite),
 * left untouched when absent (or when general.architecture is missing). `origin` as above. Format
 * errors name the key. */
mxl_status mxl_gguf_arch_number(const mxl_gguf *g, const char *origin, const char *suffix,
                                double *out, mxl_error *err);

/* Hugging Face model_type for a GGUF architecture name; NULL when there is no mapping. */
const char *mxl_gguf_arch_to_model_type(const char *arch);
/* llama.cpp file-type name ("Q4_K_M", "F16", ...) for general.file_type, NULL when unknown.
 * The GUESSED flag (1024) is ignored. */
const char *mxl_gguf_file_type_name(uint64_t file_type);

#endif
