/* registry.h - the model-family registry: one static entry per family that
 * ../shared/spec/supported-models.md lists (every table row of every section, plus the image-
 * generation and page-OCR families its prose names), with the architecture keys (config.json
 * `model_type`, lower-cased) that select it, what it takes in and puts out, and what this build
 * can do with it. `mlxcel arch` prints this table; detection (detect.h) routes checkpoints by it.
 *
 * Two kinds of facts live here, kept apart on purpose:
 *  - identity and detection facts from the spec (id, names, keys, task, modalities), fixed;
 *  - build facts (backends, tensor/pipeline parallel, drafters, KV modes), which change as
 *    families are implemented. Those are derived from the family records that run them (the
 *    decoder records of families.h, the encoder records of encoder.c); a family no record names
 *    is "planned" on every backend and not runnable. */
#ifndef MXL_MODELS_REGISTRY_H
#define MXL_MODELS_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

/* What a checkpoint is run for; each value matches a runtime / subcommand surface. */
typedef enum mxl_task {
    MXL_TASK_GENERATE = 0,       /* autoregressive (or diffusion) text generation: run/generate/serve */
    MXL_TASK_SEQ2SEQ,            /* encoder-decoder document models (Florence-2, Nemotron-Parse) */
    MXL_TASK_EMBED,              /* mlxcel embed */
    MXL_TASK_RERANK,             /* mlxcel rerank */
    MXL_TASK_SPEECH_TO_TEXT,     /* Whisper */
    MXL_TASK_TEXT_TO_SPEECH,     /* Kokoro */
    MXL_TASK_SPEECH_TO_SPEECH,   /* Nemotron VoiceChat */
    MXL_TASK_DETECT,             /* mlxcel detect */
    MXL_TASK_PREDICT,            /* mlxcel predict (depth, normals, masks, ...) */
    MXL_TASK_TAG,                /* mlxcel tag (token classification) */
    MXL_TASK_EXTRACT,            /* mlxcel extract (span extraction) */
    MXL_TASK_IMAGE_GENERATION,   /* mlxcel generate-image */
    MXL_TASK_COUNT
} mxl_task;

/* "generate", "seq2seq", "embed", "rerank", "speech-to-text", "text-to-speech",
 * "speech-to-speech", "detect", "predict", "tag", "extract", "image-generation". */
const char *mxl_task_name(mxl_task task);

typedef enum mxl_backend_status {
    MXL_BACKEND_PLANNED = 0, /* not runnable on this backend in this build */
    MXL_BACKEND_PARTIAL,     /* runs, with named gaps */
    MXL_BACKEND_SUPPORTED,
} mxl_backend_status;

/* "planned", "partial", "supported". */
const char *mxl_backend_status_name(mxl_backend_status s);

/* How the family relates to vision input. */
typedef enum mxl_family_form {
    MXL_FORM_TEXT = 0,   /* no image input */
    MXL_FORM_VLM,        /* vision form only when config.json has a non-empty vision_config and
                            language_model_only is not true; otherwise it loads text-only */
    MXL_FORM_MULTIMODAL, /* image input is intrinsic (encoder-free patch projection, seq2seq
                            document models); no text-only form */
} mxl_family_form;

/* Tie-breaker used only when several families of the same task claim one model_type
 * (spec "Model Detection" and the table notes). A family whose rule holds wins over one with
 * MXL_SELECT_ANY; exactly one family must remain. */
typedef enum mxl_family_select {
    MXL_SELECT_ANY = 0,
    MXL_SELECT_VISION,       /* vision_config present and non-empty, language_model_only not true */
    MXL_SELECT_MOE,          /* num_experts (or num_local_experts) > 1 */
    MXL_SELECT_DENSE,        /* num_experts absent or <= 1 */
    MXL_SELECT_GRANITE_TEXT, /* text_config.model_type is "granite" */
} mxl_family_select;

/* A NULL-terminated list of strings; a NULL list means empty. */
typedef const char *const *mxl_strlist;
size_t mxl_strlist_len(mxl_strlist list);
/* Case-insensitive membership. */
bool mxl_strlist_has(mxl_strlist list, const char *s);

typedef struct mxl_family {
    const char *id;           /* stable lower_snake id (also the recipe page name) */
    const char *display_name; /* what `mlxcel arch` prints */
    const char *category;     /* heading it is grouped under */
    mxl_task task;            /* what detection routes this family's checkpoints to */
    mxl_family_form form;
    mxl_family_select select;
    mxl_strlist model_types;   /* lower-case architecture keys; may be shared (see select) */
    mxl_strlist architectures; /* config.json `architectures` class names that select this family
                                  whatever model_type says (rerank/tag heads, embedding layouts,
                                  relabelled checkpoints); empty for most */
    mxl_strlist aliases;       /* other names users know the family by */
    mxl_strlist runtimes;      /* NULL: just the task's runtime (use mxl_family_runtimes) */
    mxl_strlist modalities_in; /* "text", "image", "audio", "video" */
    const char *output;        /* "text", "embedding", "token_embeddings", "score", "boxes",
                                  "audio", "image", "prediction", "labels", "spans" */
} mxl_family;

/* What this build can do with a family (see k_build_support in registry.c). */
typedef struct mxl_family_support {
    mxl_backend_status cpu;
    mxl_backend_status cuda;
    bool tensor_parallel;
    bool pipeline_parallel;
    mxl_strlist drafters; /* speculative drafters usable with it ("mtp", "dflash", ...) */
    mxl_strlist kv_modes; /* "fp16", "int8", ... */
} mxl_family_support;

size_t mxl_registry_count(void);
/* i < mxl_registry_count(); table order (spec order). */
const mxl_family *mxl_registry_at(size_t i);
const mxl_family *mxl_registry_find_id(const char *id);
/* First family (table order) claiming `model_type`, compared case-insensitively, or NULL. Shared
 * keys resolve to their text-generation family; use detection to pick among them. */
const mxl_family *mxl_registry_find_model_type(const char *model_type);
/* Every family claiming `model_type` (case-insensitive), in table order; writes up to `cap`
 * and returns the total number. */
size_t mxl_registry_find_all_model_type(const char *model_type, const mxl_family **out, size_t cap);
/* First family listing `arch` (exact, case-sensitive like transformers' class names). */
const mxl_family *mxl_registry_find_architecture(const char *arch);

bool mxl_family_has_model_type(const mxl_family *f, const char *model_type);
mxl_strlist mxl_family_runtimes(const mxl_family *f);
const mxl_family_support *mxl_family_support_of(const mxl_family *f);
/* True when some backend runs the family in this build. */
bool mxl_family_implemented(const mxl_family *f);

/* Self-check of the static tables (ids unique and lower_snake, keys lower-case, build-support
 * rows naming real families). Returns MXL_ERR_INTERNAL naming the first problem. */
mxl_status mxl_registry_validate(mxl_error *err);

#endif
