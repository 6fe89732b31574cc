/* family_cohere.c - Command R (transformers modeling_cohere.py, model_type cohere) and Command R7B
 * (modeling_cohere2.py, cohere2). One LayerNorm per layer (input_layernorm: mean-centred, weight
 * only, no bias, eps layer_norm_eps) feeds attention and the SwiGLU MLP side by side (parallel
 * residual: x + attn(h) + mlp(h)); interleaved RoPE (GPT-J pairs); the logits are multiplied by
 * logit_scale (default 0.0625); tied embeddings by default. Cohere's use_qk_norm (a LayerNorm per
 * head with weights of its own) is refused by name. cohere2 adds sliding layers (layer_types,
 * else every layer but each sliding_window_pattern-th, 4) that rotate and full layers that use no
 * positions (NoPE). No GGUF path yet (llama.cpp's command-r / cohere2). */
#include "models/decoder_family.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj",
};

static mxl_status cohere_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool qk_norm;
    double scale, eps;
    if ((st = mxl_family_bool(c, "use_qk_norm", false, &qk_norm)) || (st = mxl_family_double(c, "logit_scale", 0.0625, &scale)) ||
        (st = mxl_family_double(c, "layer_norm_eps", 1e-5, &eps)))
        return st;
    if (qk_norm) return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'use_qk_norm' = true is not supported (per-head LayerNorm)", c->ck->path);
    hp->norm = MXL_NORM_LAYER;
    hp->norm_no_bias = true;
    hp->norm_eps = (float)eps;
    hp->parallel_residual = true;
    hp->logit_scale = (float)scale;
    return mxl_family_rope_interleaved(c);
}

static mxl_status cohere2_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st = cohere_setup(c);
    if (st) return st;
    int64_t window = c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 0;
    if (window == 0) return MXL_OK;
    if (!mxl_family_sliding_from_layer_types(c, window)) {
        int64_t pattern;
        if ((st = mxl_family_int(c, "sliding_window_pattern", 4, &pattern))) return st;
        if (pattern <= 0) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'sliding_window_pattern' must be positive", c->ck->path);
        uint8_t *f = mxl_family_layer_flags(c);
        if (!f) return MXL_ERR_NOMEM;
        for (int64_t i = 0; i < hp->n_layers; i++) f[i] = (i + 1) % pattern != 0;
        hp->layer_is_sliding = f;
        hp->sliding_window = window;
    }
    return mxl_family_nope_full_layers(c);
}

const mxl_decoder_family mxl_family_cohere = {
    .model_type = "cohere", .registry_id = "cohere", .hf_class = "CohereForCausalLM", .names = &k_names, .setup = cohere_setup,
};

const mxl_decoder_family mxl_family_cohere2 = {
    .model_type = "cohere2", .registry_id = "cohere2", .hf_class = "Cohere2ForCausalLM", .names = &k_names,
    .setup = cohere2_setup,
};
