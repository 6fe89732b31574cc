/* config.h - the typed model configuration every loader fills: from config.json (Hugging Face /
 * MLX checkpoints) or from GGUF metadata. Family code reads typed fields; anything a family needs
 * beyond them it reads from `raw` (the parsed config.json, NULL for GGUF) or from the GGUF keys.
 *
 * Integers that a checkpoint does not declare are -1; floats are NAN; strings are "". For
 * vision-language checkpoints the decoder fields come from `text_config` (with top-level values as
 * fallback), as transformers does. */
#ifndef MXL_MODELS_CONFIG_H
#define MXL_MODELS_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/status.h"

typedef struct json_t json_t;

typedef enum mxl_config_source {
    MXL_CONFIG_SOURCE_HF_JSON = 0, /* config.json */
    MXL_CONFIG_SOURCE_GGUF,
} mxl_config_source;

typedef enum mxl_quant_mode {
    MXL_QUANT_NONE = 0,
    MXL_QUANT_AFFINE,       /* MLX affine: w = scale * q + bias, per group */
    MXL_QUANT_MXFP4,        /* MLX mxfp4 (no biases) */
    MXL_QUANT_MXFP8,        /* MLX mxfp8 (no biases) */
    MXL_QUANT_NVFP4,        /* MLX nvfp4 (no biases) */
    MXL_QUANT_FP8_BLOCK,    /* quantization_config quant_method fp8 with weight_block_size */
    MXL_QUANT_COMPRESSED,   /* compressed-tensors (llm-compressor) */
    MXL_QUANT_GGUF,         /* ggml block formats, per tensor */
    MXL_QUANT_OTHER,        /* declared but not one we load (named in `method`) */
} mxl_quant_mode;

typedef struct mxl_quant_override {
    const char *prefix; /* module path, e.g. "model.layers.0.mlp.down_proj" */
    int bits;           /* 0 = not quantized ("false" in config) */
    int group_size;
    mxl_quant_mode mode;
} mxl_quant_override;

typedef struct mxl_quant_config {
    mxl_quant_mode mode;
    int bits;        /* -1 if not declared */
    int group_size;  /* -1 if not declared */
    char method[32]; /* "affine", "mxfp4", "fp8", "gptq", "Q4_K" (GGUF file type), ... */
    int n_overrides;
    mxl_quant_override *overrides; /* arena-owned */
} mxl_quant_config;

#define MXL_CONFIG_MAX_ARCHS 8
#define MXL_CONFIG_MAX_EOS 16

typedef struct mxl_model_config {
    mxl_arena arena; /* owns every string and array below */
    mxl_config_source source;
    json_t *raw; /* parsed config.json (owned), NULL for GGUF */

    char model_type[64];      /* lower-cased top-level model_type ("" if absent) */
    char text_model_type[64]; /* lower-cased text_config.model_type ("" if absent) */
    int n_architectures;
    const char *architectures[MXL_CONFIG_MAX_ARCHS];
    bool has_vision_config;   /* vision_config present, non-null, non-empty object */
    bool has_audio_config;
    int language_model_only;  /* -1 absent, 0 false, 1 true */
    char torch_dtype[16];     /* "bfloat16", "float16", "float32" or "" */

    /* decoder / encoder hyper-parameters */
    int64_t vocab_size;
    int64_t hidden_size;
    int64_t intermediate_size;
    int64_t num_hidden_layers;
    int64_t num_attention_heads;
    int64_t num_key_value_heads; /* defaults to num_attention_heads when absent */
    int64_t head_dim;            /* defaults to hidden_size / num_attention_heads */
    int64_t max_position_embeddings;
    int64_t sliding_window;      /* -1 when none */
    int64_t sliding_window_pattern; /* gemma: every Nth layer is global; -1 when none */
    int64_t num_experts;         /* num_experts / num_local_experts / n_routed_experts */
    int64_t num_experts_per_tok;
    int64_t kv_lora_rank;        /* multi-head latent attention: the latent's width (-1: none) */
    int64_t qk_rope_head_dim;    /* ... and the rotary key part cached beside it (-1: none) */
    int64_t num_labels;          /* sequence classifiers (id2label size or num_labels) */
    int64_t type_vocab_size;
    double rms_norm_eps;
    double layer_norm_eps;
    double rope_theta;
    double rope_local_base_freq;
    double partial_rotary_factor;
    bool tie_word_embeddings;
    char hidden_act[32];

    /* Per-layer attention kind: n_layer_types == num_hidden_layers when known, each entry
     * 1 for sliding-window attention and 0 for full attention. */
    int n_layer_types;
    uint8_t *layer_is_sliding;

    mxl_quant_config quant;

    int64_t bos_token_id;
    int n_eos;
    int64_t eos_token_ids[MXL_CONFIG_MAX_EOS];
} mxl_model_config;

void mxl_model_config_init(mxl_model_config *cfg);
void mxl_model_config_free(mxl_model_config *cfg);

/* Parses config.json text. `origin` (a path) prefixes error messages. Validates types and ranges
 * of the fields it reads (negative or absurd sizes, wrong JSON types are format errors). */
mxl_status mxl_model_config_parse_json(const char *text, size_t len, const char *origin,
                                       mxl_model_config *out, mxl_error *err);
/* Reads <dir>/config.json. */
mxl_status mxl_model_config_load_dir(const char *dir, mxl_model_config *out, mxl_error *err);

const char *mxl_quant_mode_name(mxl_quant_mode mode);
/* True when the config's architectures list contains `name`. */
bool mxl_model_config_has_arch(const mxl_model_config *cfg, const char *name);

#endif
