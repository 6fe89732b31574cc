/* convert_family.h - what a family's convert hooks (mxl_decoder_family.convert_check /
 * convert_config, decoder_family.h) build on when `mlxcel convert` writes a transformers
 * config.json for a GGUF checkpoint: the config.json keys most families share, and reads of the
 * GGUF the hooks need. Implemented in convert.c. */
#ifndef MXL_MODELS_CONVERT_FAMILY_H
#define MXL_MODELS_CONVERT_FAMILY_H

#include <stdbool.h>

#include "models/checkpoint.h"

typedef struct json_t json_t;

/* hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
 * head_dim, max_position_embeddings, rope_theta and rope_scaling (null) from the GGUF's config. */
void mxl_convert_put_sizes(const mxl_checkpoint *ck, json_t *j);
/* Llama's SwiGLU block: rms_norm_eps, hidden_act silu, attention_bias (blk.0.attn_q.bias present)
 * and mlp_bias (blk.0.ffn_down.bias present). */
void mxl_convert_put_swiglu(const mxl_checkpoint *ck, json_t *j);
/* rms_norm_eps alone (default 1e-6). */
void mxl_convert_put_rms_eps(const mxl_checkpoint *ck, json_t *j);
/* layer_types from the GGUF's sliding-layer flags, when it has one per layer. */
void mxl_convert_put_layer_types(const mxl_checkpoint *ck, json_t *j);
/* The GGUF number "ARCH.<suffix>", dflt when absent or unreadable. */
double mxl_convert_arch_num(const mxl_checkpoint *ck, const char *suffix, double dflt);
/* True when the GGUF holds tensor `name`. */
bool mxl_convert_has_tensor(const mxl_checkpoint *ck, const char *name);

/* The default convert_config (a NULL hook): sizes + Llama's SwiGLU keys. */
void mxl_family_convert_config_llama(const mxl_checkpoint *ck, json_t *j);

#endif
