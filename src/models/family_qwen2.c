/* family_qwen2.c - Qwen2 (transformers modeling_qwen2.py): Llama's block with biases on the q, k
 * and v projections (never on o_proj). Sliding-window layers only with use_sliding_window: those
 * that layer_types marks, or (older configs) layers from max_window_layers on (mlx-lm's qwen2
 * has no sliding window; its conversions keep these names and config keys).
 * GGUF (llama.cpp qwen2): attn_q/k/v biases, NEOX RoPE on unpermuted rows, and no sliding window
 * (llama.cpp has none for Qwen2 and its converter writes none). */
#include <jansson.h>
#include "models/convert_family.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

mxl_status mxl_family_qwen_sliding(mxl_family_ctx *c) {
    bool use;
    mxl_status st;
    if ((st = mxl_family_bool(c, "use_sliding_window", false, &use))) return st;
    return use ? mxl_family_sliding_max_window(c) : MXL_OK;
}

mxl_status mxl_family_sliding_max_window(mxl_family_ctx *c) {
    int64_t from;
    mxl_status st;
    if (c->cfg->sliding_window <= 0) return MXL_OK;
    if (mxl_family_sliding_from_layer_types(c, c->cfg->sliding_window)) return MXL_OK;
    if ((st = mxl_family_int(c, "max_window_layers", c->hp->n_layers, &from))) return st;
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    for (int64_t i = from; i < c->hp->n_layers; i++) f[i] = 1;
    c->hp->layer_is_sliding = f;
    c->hp->sliding_window = c->cfg->sliding_window;
    return MXL_OK;
}

static mxl_status qwen2_setup(mxl_family_ctx *c) {
    c->hp->qkv_bias = true;
    c->hp->o_bias = false;
    if (c->gguf) return mxl_family_gguf_rope_neox(c);
    mxl_status st = mxl_family_rope(c);
    return st ? st : mxl_family_qwen_sliding(c);
}

void mxl_family_qwen_convert_no_window(json_t *j) {
    json_object_set_new(j, "use_sliding_window", json_false()); /* llama.cpp's Qwen runs none */
    json_object_set_new(j, "sliding_window", json_null());
}

/* Qwen2's q/k/v biases are part of the architecture, not transformers' attention_bias. */
static void qwen2_convert_config(const mxl_checkpoint *ck, json_t *j) {
    mxl_family_convert_config_llama(ck, j);
    json_object_set_new(j, "attention_bias", json_false());
    mxl_family_qwen_convert_no_window(j);
}

const mxl_decoder_family mxl_family_qwen2 = {
    .model_type = "qwen2", .registry_id = "qwen2", .hf_class = "Qwen2ForCausalLM", .names = &mxl_names_llama,
    .setup = qwen2_setup, .gguf_arch = "qwen2", .convert_config = qwen2_convert_config,
};
