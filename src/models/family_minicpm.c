/* family_minicpm.c - MiniCPM's muP-scaled decoders:
 *  - minicpm (MiniCPM 1 / 2 / 4, remote code on the Hub; truth: mlx-lm's minicpm): Llama's block;
 *  - minicpm3 (transformers modeling_minicpm3.py, openbmb/MiniCPM3-4B): DeepSeek-V2's multi-head
 *    latent attention (models/mla.h; the plain rotate-half RoPE, not the interleaved one) over a
 *    dense gated MLP in every layer.
 * Both scale the embeddings by scale_emb, each residual branch by scale_depth /
 * sqrt(num_hidden_layers), and divide the final hidden state by hidden_size / dim_model_base
 * before the LM head, tied or not (the original code and llama.cpp; mlx-lm skips it under a tied
 * head). Absent keys take the configs' class defaults (12, 1.4, 256); explicit nulls collapse to
 * no scaling as MiniCPM3Config does (scale_depth sqrt(layers), dim_model_base hidden_size). The
 * released checkpoints use longrope (family_common.c).
 * GGUF (llama.cpp minicpm): the converter writes the three as embedding_scale, residual_scale and
 * logit_scale, read as Granite's (family_granite.c), over Llama's permuted Q/K; llama.cpp's
 * minicpm3 hard-codes MiniCPM3-4B's scales (minicpm3_gguf). Neither is converted back. */
#include <jansson.h>
#include <math.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* key's number, dflt when absent, null_value when null. */
static mxl_status scale_key(mxl_family_ctx *c, const char *key, double dflt, double null_value, double *out) {
    json_t *v = json_object_get(c->raw, key);
    if (v && json_is_null(v)) {
        *out = null_value;
        return MXL_OK;
    }
    mxl_status st = mxl_family_double(c, key, dflt, out);
    if (st) return st;
    if (!(*out > 0)) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' must be positive", c->ck->path, key);
    return MXL_OK;
}

static mxl_status mup_scales(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double emb, depth, base;
    if ((st = scale_key(c, "scale_emb", 12.0, 1.0, &emb)) ||
        (st = scale_key(c, "scale_depth", 1.4, sqrt((double)hp->n_layers), &depth)) ||
        (st = scale_key(c, "dim_model_base", 256.0, (double)hp->hidden, &base)))
        return st;
    hp->embed_scale = (float)emb;
    hp->residual_scale = (float)(depth / sqrt((double)hp->n_layers));
    hp->logit_scale = (float)(base / (double)hp->hidden);
    return MXL_OK;
}

static mxl_status minicpm_setup(mxl_family_ctx *c) {
    if (c->gguf) return mxl_family_granite_setup(c);
    mxl_status st = mup_scales(c);
    return st ? st : mxl_family_rope(c);
}

/* llama.cpp's minicpm3: the scales of MiniCPM3-4B hard-coded (its converter writes none), latent
 * attention from the deepseek2-style keys with value heads of hidden / heads (no value_length
 * key), NEOX RoPE (Q/K not permuted), kv_b whole, no attention biases. */
static mxl_status minicpm3_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    hp->mla_v_dim = hp->hidden / hp->n_heads; /* (no value_length key) */
    mxl_status st = mxl_family_gguf_mla(c);
    if (st) return st;
    hp->embed_scale = 12.0f;
    hp->residual_scale = (float)(1.4 / sqrt((double)hp->n_layers));
    hp->logit_scale = (float)(256.0 / (double)hp->hidden);
    hp->rope.style = hp->rope_local.style = MXL_ROPE_NEOX;
    return MXL_OK;
}

static mxl_status minicpm3_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    if (c->gguf) return minicpm3_gguf(c);
    mxl_status st = mup_scales(c);
    if (st) return st;
    hp->mla_v_dim = hp->hidden / hp->n_heads; /* v_head_dim's default (MiniCPM3Config) */
    hp->o_bias = hp->qkv_bias;
    return mxl_family_mla(c, false);
}

const mxl_decoder_family mxl_family_minicpm = {
    .model_type = "minicpm", .registry_id = "minicpm", .hf_class = "MiniCPMForCausalLM", .names = &mxl_names_llama, .setup = minicpm_setup,
    .gguf_arch = "minicpm", .gguf_permuted_qk = true, .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_minicpm3 = {
    .model_type = "minicpm3", .registry_id = "minicpm3", .hf_class = "MiniCPM3ForCausalLM", .names = &mxl_names_llama, .setup = minicpm3_setup,
    .gguf_arch = "minicpm3", .convert_check = mxl_family_gguf_not_converted,
};
