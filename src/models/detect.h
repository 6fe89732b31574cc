/* detect.h - architecture and task detection: which registry family a checkpoint belongs to and
 * which runtime (generate, embed, rerank, ...) it goes to, from its typed config and, for
 * Hugging Face directories, the sentence-transformers files beside config.json.
 *
 * Rules, in order (../shared/spec/supported-models.md, "Model Detection" and the table notes):
 *  1. a supported classifier head in `architectures`: one-label Bert/XLMRoberta/ModernBert
 *     ForSequenceClassification -> rerank (a head with another label count is refused by name);
 *     Bert/XLMRoberta ForTokenClassification -> tag;
 *  2. embedding: a known embedding architecture name (LlamaBidirectionalModel,
 *     Lfm2BidirectionalModel, EmbeddingGemma2Model, Gemma3TextModel, ...); a model_type that only
 *     embedding-side families claim (encoder-only bert, xlm-roberta, modernbert, siglip,
 *     llama_bidirec, ...); a non-causal config (is_causal: false or
 *     use_bidirectional_attention: true) of a key an embedding family claims; a
 *     sentence-transformers Pooling module in modules.json or a 1_Pooling/config.json;
 *  3. a distinguishing architecture class of another family (IQuestCoderForCausalLM on a
 *     checkpoint relabelled llama, RTDetrV2ForObjectDetection, ...);
 *  4. generation (and the other non-embedding surfaces) by lower-cased model_type, with the
 *     shared-key tie-breakers: hunyuan by num_experts, phi-msft by num_local_experts, llava_next
 *     by a Granite text config, and a VLM key by whether vision_config is present and non-empty
 *     and language_model_only is not true;
 *  5. Kokoro, whose config.json has no model_type, by its `istftnet` block or
 *     kokoro-v1_0.safetensors.
 * Anything else is MXL_ERR_UNSUPPORTED naming the model_type and pointing at `mlxcel arch`.
 *
 * Not decided here: whether the weights actually carry a vision tower (the loader checks tensor
 * names and may still load a VLM-form checkpoint text-only), and generative rerankers (Qwen3,
 * Qwen3-VL), which only the explicit --reranker-model flag selects. */
#ifndef MXL_MODELS_DETECT_H
#define MXL_MODELS_DETECT_H

#include <stdbool.h>

#include "core/status.h"
#include "models/config.h"
#include "models/registry.h"

typedef enum mxl_pooling {
    MXL_POOLING_NONE = 0,       /* no sentence-transformers pooling config read */
    MXL_POOLING_CLS,            /* pooling_mode_cls_token */
    MXL_POOLING_MEAN,           /* pooling_mode_mean_tokens */
    MXL_POOLING_MAX,            /* pooling_mode_max_tokens */
    MXL_POOLING_MEAN_SQRT_LEN,  /* pooling_mode_mean_sqrt_len_tokens */
    MXL_POOLING_WEIGHTED_MEAN,  /* pooling_mode_weightedmean_tokens */
    MXL_POOLING_LAST_TOKEN,     /* pooling_mode_lasttoken */
} mxl_pooling;

const char *mxl_pooling_name(mxl_pooling p); /* "none", "cls", "mean", "max", ... */

#define MXL_ST_MAX_DENSE 4
#define MXL_ST_PATH_MAX 64

/* The sentence-transformers layout found in the checkpoint directory (all zero when none). */
typedef struct mxl_st_layout {
    bool has_modules_json;
    bool has_pooling;                     /* a Pooling module or a 1_Pooling/config.json */
    char pooling_path[MXL_ST_PATH_MAX];   /* sub-directory of the Pooling module, e.g. "1_Pooling" */
    mxl_pooling pooling;                  /* from <pooling_path>/config.json */
    bool normalize;                       /* a Normalize module (or a 2_Normalize directory) */
    int n_dense;                          /* Dense modules, in pipeline order */
    char dense_paths[MXL_ST_MAX_DENSE][MXL_ST_PATH_MAX];
} mxl_st_layout;

typedef struct mxl_detection {
    mxl_task task;
    const mxl_family *family; /* never NULL on success */
    bool vision;              /* VLM form: the vision tower is wanted (vision_config present and
                                 non-empty, language_model_only not true), or intrinsic */
    mxl_st_layout st;
    char reason[200];         /* one short line: which rule decided, for logs and `inspect` */
} mxl_detection;

/* Detects the family and task of a checkpoint. `dir` is the checkpoint directory (NULL for a
 * GGUF file or an in-memory config: then no sentence-transformers files are consulted).
 * Errors: MXL_ERR_UNSUPPORTED (unknown model_type, unsupported classifier head, embedding layout
 * of a family we do not embed with), MXL_ERR_FORMAT (malformed modules.json / pooling config). */
mxl_status mxl_model_detect(const mxl_model_config *cfg, const char *dir, mxl_detection *out,
                            mxl_error *err);

/* Reads the sentence-transformers layout of `dir` (modules.json, 1_Pooling/config.json,
 * 2_Normalize, Dense modules). The pooling config names its mode with the pooling_mode_*
 * booleans or, as sentence-transformers >= 6 writes it, one "pooling_mode" string ("cls",
 * "mean", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken") or a one-element list of
 * them; several modes are MXL_ERR_UNSUPPORTED. A directory without those files gives an
 * all-zero layout. */
mxl_status mxl_st_layout_read(const char *dir, mxl_st_layout *out, mxl_error *err);

#endif
