/* family_stablelm.c - StableLM (transformers modeling_stablelm.py: StableLM-3B-4E1T, StableLM 2):
 * Llama's layout and SwiGLU MLP with LayerNorm (weight and bias, layer_norm_eps) before
 * attention, before the MLP and at the end; q/k/v biases when use_qkv_bias, none elsewhere; RoPE
 * on the first int(head_dim * partial_rotary_factor) dims of each head (rotate_half, NEOX style),
 * partial_rotary_factor 0.25 when the config does not say; head_dim is hidden / heads whatever the
 * config says (StableLmAttention computes it so).
 * Refused by name: qk_layernorm (a LayerNorm per head with weights of its own, StableLM 2 12B) and
 * use_parallel_residual (attention and MLP from the same input), which the shared block does not
 * run. No GGUF path yet (llama.cpp's stablelm). */
#include <math.h>

#include "models/decoder_family.h"

static mxl_status stablelm_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool qk_ln, parallel, qkv_bias;
    if ((st = mxl_family_bool(c, "qk_layernorm", false, &qk_ln)) ||
        (st = mxl_family_bool(c, "use_parallel_residual", false, &parallel)) ||
        (st = mxl_family_bool(c, "use_qkv_bias", false, &qkv_bias)))
        return st;
    if (qk_ln) return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'qk_layernorm' = true is not supported (per-head LayerNorm)", c->ck->path);
    if (parallel)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'use_parallel_residual' = true is not supported", c->ck->path);
    hp->head_dim = hp->hidden / hp->n_heads;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->norm = MXL_NORM_LAYER;
    hp->norm_eps = (float)(!isnan(c->cfg->layer_norm_eps) ? c->cfg->layer_norm_eps : 1e-5);
    hp->qkv_bias = qkv_bias;
    hp->o_bias = hp->mlp_bias = false;
    if ((st = mxl_family_rope(c))) return st;
    return mxl_family_rope_partial_default(c, 0.25);
}

const mxl_decoder_family mxl_family_stablelm = {
    .model_type = "stablelm", .registry_id = "stablelm", .hf_class = "StableLmForCausalLM", .names = &mxl_names_llama,
    .setup = stablelm_setup,
};
