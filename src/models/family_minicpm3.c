/* family_minicpm3.c - MiniCPM3 (transformers modeling_minicpm3.py, openbmb/MiniCPM3-4B):
 * DeepSeek-V2's multi-head latent attention (models/mla.h; the plain rotate-half RoPE, not the
 * interleaved one) over a dense gated MLP in every layer, with muP scales: embeddings times
 * scale_emb, each residual branch times scale_depth / sqrt(num_hidden_layers), and the final
 * hidden state divided by hidden_size / dim_model_base before the (tied) LM head. Absent keys take
 * MiniCPM3Config's defaults (12, 1.4, 256); explicit nulls collapse to no scaling as there
 * (scale_depth sqrt(layers), dim_model_base hidden_size). The released checkpoints use longrope
 * (family_common.c). */
#include <jansson.h>
#include <math.h>

#include "models/decoder_family.h"

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

static mxl_status minicpm3_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double emb, depth, base;
    if ((st = scale_key(c, "scale_emb", 12.0, 1.0, &emb)) ||
        (st = scale_key(c, "scale_depth", 1.4, sqrt((double)hp->n_layers), &depth)) ||
        (st = scale_key(c, "dim_model_base", 256.0, (double)hp->hidden, &base)))
        return st;
    /* v_head_dim defaults to hidden_size / num_attention_heads (MiniCPM3Config) */
    if (!json_is_number(json_object_get(c->raw, "v_head_dim"))) {
        json_t *raw = c->raw;
        if (json_object_set_new(raw, "v_head_dim", json_integer(hp->hidden / hp->n_heads))) return MXL_ERR_NOMEM;
    }
    hp->embed_scale = (float)emb;
    hp->residual_scale = (float)(depth / sqrt((double)hp->n_layers));
    hp->logit_scale = (float)(base / (double)hp->hidden);
    hp->o_bias = hp->qkv_bias;
    return mxl_family_mla(c, false);
}

const mxl_decoder_family mxl_family_minicpm3 = {
    .model_type = "minicpm3", .registry_id = "minicpm3", .hf_class = "MiniCPM3ForCausalLM", .names = &mxl_names_llama, .setup = minicpm3_setup,
};
