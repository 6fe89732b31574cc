/* family_qwen2.c - Qwen2 (transformers modeling_qwen2.py): Llama's block with biases on the q, k
 * and v projections (never on o_proj). Sliding-window layers only with use_sliding_window: those
 * that layer_types marks, or (older configs) layers from max_window_layers on (mlx-lm's qwen2
 * has no sliding window; its conversions keep these names and config keys).
 * GGUF (llama.cpp qwen2): attn_q/k/v biases, NEOX RoPE on unpermuted rows, and no sliding window
 * (llama.cpp has none for Qwen2 and its converter writes none). */
#include "models/decoder_family.h"
#include "models/family_gguf.h"

mxl_status mxl_family_qwen_sliding(mxl_family_ctx *c) {
    bool use;
    int64_t from;
    mxl_status st;
    if ((st = mxl_family_bool(c, "use_sliding_window", false, &use))) return st;
    if (!use || c->cfg->sliding_window <= 0) return MXL_OK;
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

const mxl_decoder_family mxl_family_qwen2 = {"qwen2", true, &mxl_names_llama, qwen2_setup};
