/* family_cohere.c - Command R (transformers modeling_cohere.py, model_type cohere) and Command R7B
 * (modeling_cohere2.py, cohere2). One LayerNorm per layer (input_layernorm: mean-centred, weight
 * only, no bias, eps layer_norm_eps) feeds attention and the SwiGLU MLP side by side (parallel
 * residual: x + attn(h) + mlp(h)); interleaved RoPE (GPT-J pairs); the logits are multiplied by
 * logit_scale (default 0.0625); tied embeddings by default. Cohere's use_qk_norm (a LayerNorm per
 * head with weights of its own) is refused by name. cohere2 adds sliding layers (layer_types,
 * else every layer but each sliding_window_pattern-th, 4) that rotate and full layers that use no
 * positions (NoPE).
 * GGUF (llama.cpp command-r / cohere2): the same block (weight-only LayerNorm attn_norm shared by
 * attention and MLP, logit_scale from the metadata, RoPE on adjacent pairs of unpermuted rows, the
 * head tied to the embedding: llama.cpp never reads an output tensor); cohere2's sliding layers from
 * attention.sliding_window_pattern (default every 4th layer full) with attention.sliding_window,
 * rope.freq_base_swa on them; not converted back. Per-head QK-norm (command-r's attn_q_norm) is
 * refused by name. */
#include <math.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj",
};

static mxl_status cohere_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double scale;
    if (mxl_family_gguf_has_layer0(c, "attn_q_norm", ".weight"))
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: per-head QK-norm (blk.0.attn_q_norm.weight) is not supported", c->ck->path);
    if ((st = mxl_family_gguf_number(c, "logit_scale", 1.0, &scale))) return st;
    hp->norm = MXL_NORM_LAYER;
    hp->norm_no_bias = true;
    hp->norm_eps = (float)(!isnan(c->cfg->layer_norm_eps) ? c->cfg->layer_norm_eps : 1e-5);
    hp->parallel_residual = true;
    hp->logit_scale = (float)scale;
    c->names->ffn_norm = NULL;
    c->names->lm_head = NULL; /* llama.cpp ties the head whatever the file holds */
    mxl_family_gguf_attn_biases(c);
    return mxl_family_gguf_rope_norm(c);
}

static mxl_status cohere_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool qk_norm;
    double scale, eps;
    if (c->gguf) return cohere_gguf(c);
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

static mxl_status cohere2_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    const mxl_model_config *cfg = c->cfg;
    mxl_status st = cohere_gguf(c);
    if (st) return st;
    double swa_base;
    if ((st = mxl_family_gguf_number(c, "rope.freq_base_swa", hp->rope.theta, &swa_base))) return st;
    hp->rope_local.theta = swa_base;
    if ((st = mxl_family_sliding_pattern(c, 4, cfg->sliding_window))) return st;
    return mxl_family_nope_full_layers(c);
}

static mxl_status cohere2_setup(mxl_family_ctx *c) {
    if (c->gguf) return cohere2_gguf(c);
    mxl_status st = cohere_setup(c);
    if (st) return st;
    int64_t window = c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 0;
    if (window == 0) return MXL_OK;
    int64_t pattern;
    if ((st = mxl_family_int(c, "sliding_window_pattern", 4, &pattern)) || (st = mxl_family_sliding_pattern(c, pattern, window)))
        return st;
    return mxl_family_nope_full_layers(c);
}

const mxl_decoder_family mxl_family_cohere = {
    .model_type = "cohere", .registry_id = "cohere", .hf_class = "CohereForCausalLM", .names = &k_names, .setup = cohere_setup,
    .gguf_arch = "command-r", .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_cohere2 = {
    .model_type = "cohere2", .registry_id = "cohere2", .hf_class = "Cohere2ForCausalLM", .names = &k_names,
    .setup = cohere2_setup, .gguf_arch = "cohere2", .convert_check = mxl_family_gguf_not_converted,
};
