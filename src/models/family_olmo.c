/* family_olmo.c - OLMo 1 (transformers modeling_olmo.py, OLMo-1B-hf / 7B-hf): Llama's layout and
 * SwiGLU MLP with a LayerNorm that has neither weight nor bias (F.layer_norm(x, None, None),
 * eps 1e-5 fixed, whatever rms_norm_eps says) before attention, before the MLP and at the end, and
 * q, k, v each clamped to [-clip_qkv, clip_qkv] after their projections when clip_qkv is set.
 * No norm tensors in the checkpoint.
 * GGUF (llama.cpp olmo): Q/K rows permuted by the converter (RoPE on adjacent pairs), clip_qkv as
 * attention.clamp_kqv, the same weightless LayerNorms (eps attention.layer_norm_epsilon); not
 * converted back. */
#include <math.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

static mxl_status olmo_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double clip;
    if (c->gguf) {
        if ((st = mxl_family_gguf_number(c, "attention.clamp_kqv", 0.0, &clip))) return st;
        hp->clip_qkv = clip > 0 ? (float)clip : 0.0f;
        hp->norm = MXL_NORM_LAYER;
        hp->norm_no_weight = true;
        hp->norm_eps = (float)(!isnan(c->cfg->layer_norm_eps) ? c->cfg->layer_norm_eps : 1e-5);
        return mxl_family_gguf_rope_norm(c);
    }
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
    .setup = olmo_setup, .gguf_arch = "olmo", .gguf_permuted_qk = true, .convert_check = mxl_family_gguf_not_converted,
};
