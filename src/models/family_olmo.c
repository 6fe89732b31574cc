/* family_olmo.c - OLMo 1 (transformers modeling_olmo.py, OLMo-1B-hf / 7B-hf): Llama's layout and
 * SwiGLU MLP with a LayerNorm that has neither weight nor bias (F.layer_norm(x, None, None),
 * eps 1e-5 fixed, whatever rms_norm_eps says) before attention, before the MLP and at the end, and
 * q, k, v each clamped to [-clip_qkv, clip_qkv] after their projections when clip_qkv is set.
 * No norm tensors in the checkpoint. No GGUF path yet (llama.cpp's olmo). */
#include "models/decoder_family.h"

static mxl_status olmo_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double clip;
    if ((st = mxl_family_double(c, "clip_qkv", 0.0, &clip))) return st;
    if (clip < 0) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'clip_qkv' must not be negative", c->ck->path);
    hp->clip_qkv = (float)clip;
    hp->norm = MXL_NORM_LAYER;
    hp->norm_no_weight = true;
    hp->norm_eps = 1e-5f;
    return mxl_family_rope(c);
}

const mxl_decoder_family mxl_family_olmo = {
    .model_type = "olmo", .registry_id = "olmo", .hf_class = "OlmoForCausalLM", .names = &mxl_names_llama,
    .setup = olmo_setup,
};
