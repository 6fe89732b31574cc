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
#include <jansson.h>
#include <math.h>
#include <string.h>

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

/* Command MoE (transformers modeling_cohere2_moe.py): Command R7B's block (one norm - LayerNorm,
 * or RMSNorm when rms_norm_eps is set - feeding attention and MLP side by side, interleaved RoPE on
 * sliding layers, NoPE on full ones, logit_scale) with sparse MoE layers: the top k router logits
 * softmaxed (the renormalised top k of a softmax), num_shared_experts shared experts of
 * intermediate_size each, combined by "sum" or "average" ((routed + shared) / 2); the dense
 * layers (mlp_layer_types, else first_k_dense_replace) have prefix_dense_intermediate_size and,
 * with prefix_dense_sliding_window_pattern 1, rotate although full.
 * GGUF (llama.cpp cohere2moe): Command R7B's GGUF block (LayerNorm, or RMSNorm when
 * attention.layer_norm_rms_epsilon is there), the output tensor when the file has one, the router
 * by expert_gating_func (softmax, or sigmoid - also when the key is absent, as llama.cpp) with
 * expert_weights_norm / _scale, shared experts always averaged with the routed ones; sliding layers
 * from attention.sliding_window_pattern (else every 4th full from layer 0 on) rotate at
 * rope.freq_base_swa, the full ones are NoPE except the leading_dense_block_count dense layers;
 * appended MTP blocks are not run. */
/* Command MoE's dense layers rotate although full (force_rope): their NoPE flags cleared. */
static void dense_layers_rotate(mxl_decoder_hparams *hp) {
    if (!hp->layer_no_rope || !hp->layer_is_moe) return;
    for (int64_t i = 0; i < hp->n_layers; i++)
        if (!hp->layer_is_moe[i]) ((uint8_t *)hp->layer_no_rope)[i] = 0;
}

static mxl_status cohere2_moe_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double rms_eps, gating, scale, swa_base;
    char key[192];
    if ((st = mxl_family_gguf_drop_nextn(c)) || (st = cohere_gguf(c)) || (st = mxl_family_gguf_moe(c, false)) || (st = mxl_family_gguf_bool(c, "expert_weights_norm", false, &hp->moe_norm_topk)) ||
        (st = mxl_family_gguf_number(c, "expert_gating_func", 0, &gating)) || (st = mxl_family_gguf_number(c, "expert_weights_scale", 0, &scale)) ||
        (st = mxl_family_gguf_number(c, "attention.layer_norm_rms_epsilon", NAN, &rms_eps)) ||
        (st = mxl_family_gguf_number(c, "rope.freq_base_swa", hp->rope.theta, &swa_base)))
        return st;
    c->names->lm_head = "output"; /* (llama.cpp reads it when the file has it, else ties) */
    if (!isnan(rms_eps)) {
        hp->norm = MXL_NORM_RMS;
        hp->norm_no_bias = false;
        hp->norm_eps = (float)rms_eps;
    }
    /* llama_expert_gating_func_type: 1 softmax, 2 sigmoid; none written means sigmoid */
    if (gating != 0 && gating != 1 && gating != 2)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: metadata key '%s' = %g is not supported (softmax or sigmoid)", c->ck->path,
                             mxl_family_gguf_key(c, "expert_gating_func", key, sizeof key), gating);
    if (gating != 1) hp->moe_router = MXL_MOE_SIGMOID;
    hp->moe_routed_scale = (float)(scale != 0 ? scale : 1.0);
    if (hp->shared_ffn > 0) { /* (routed + shared) / 2 */
        hp->moe_routed_scale *= 0.5f;
        hp->moe_shared_scale = 0.5f;
    }
    hp->rope_local.theta = swa_base;
    if (c->cfg->sliding_window > 0) {
        if ((st = mxl_family_gguf_sliding_dense_first(c, 4, c->cfg->sliding_window)) || (st = mxl_family_nope_full_layers(c))) return st;
        dense_layers_rotate(hp);
    }
    return MXL_OK;
}

static mxl_status cohere2_moe_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    if (c->gguf) return cohere2_moe_gguf(c);
    if ((st = cohere_setup(c))) return st;
    if (!isnan(c->cfg->rms_norm_eps) && json_is_number(json_object_get(c->raw, "rms_norm_eps"))) {
        hp->norm = MXL_NORM_RMS;
        hp->norm_no_bias = false;
        hp->norm_eps = (float)c->cfg->rms_norm_eps;
    }
    nm->moe_router = "mlp.gate";
    nm->experts = "mlp.experts.";
    nm->expert_gate = "gate_proj", nm->expert_up = "up_proj", nm->expert_down = "down_proj";
    nm->sh_gate = "mlp.shared_experts.gate_proj", nm->sh_up = "mlp.shared_experts.up_proj", nm->sh_down = "mlp.shared_experts.down_proj";
    const char *fn = json_string_value(json_object_get(c->raw, "expert_selection_fn"));
    const char *how = json_string_value(json_object_get(c->raw, "shared_expert_combination_strategy"));
    if (fn && strcmp(fn, "softmax") != 0)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'expert_selection_fn' = '%s' is not supported (softmax)", c->ck->path, fn);
    if (how && strcmp(how, "sum") != 0 && strcmp(how, "average") != 0)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'shared_expert_combination_strategy' = '%s' is not sum or average", c->ck->path, how);
    int64_t dense_ffn, dense_pattern;
    if ((st = mxl_family_moe(c, NULL, NULL, true, false)) || (st = mxl_family_moe_shared_count(c, "num_shared_experts")) ||
        (st = mxl_family_moe_layer_types(c, 0)) || (st = mxl_family_int(c, "prefix_dense_intermediate_size", hp->ffn, &dense_ffn)) ||
        (st = mxl_family_int(c, "prefix_dense_sliding_window_pattern", 1, &dense_pattern)))
        return st;
    hp->moe_norm_topk = true; /* softmax over the top k logits */
    if (hp->shared_ffn > 0 && (!how || strcmp(how, "average") == 0)) hp->moe_routed_scale = hp->moe_shared_scale = 0.5f;
    hp->ffn = dense_ffn;
    int64_t window = c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 0;
    if (window == 0) return MXL_OK;
    int64_t pattern;
    if ((st = mxl_family_int(c, "sliding_window_pattern", 4, &pattern)) || (st = mxl_family_sliding_pattern(c, pattern, window)) ||
        (st = mxl_family_nope_full_layers(c)))
        return st;
    if (dense_pattern == 1) dense_layers_rotate(hp); /* force_rope */
    return MXL_OK;
}

const mxl_decoder_family mxl_family_cohere = {
    .model_type = "cohere", .registry_id = "cohere", .hf_class = "CohereForCausalLM", .names = &k_names, .setup = cohere_setup,
    .gguf_arch = "command-r", .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_cohere2 = {
    .model_type = "cohere2", .registry_id = "cohere2", .hf_class = "Cohere2ForCausalLM", .names = &k_names,
    .setup = cohere2_setup, .gguf_arch = "cohere2", .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_cohere2_moe = {
    .model_type = "cohere2_moe", .registry_id = "cohere2_moe", .hf_class = "Cohere2MoeForCausalLM", .names = &k_names,
    .setup = cohere2_moe_setup, .gguf_arch = "cohere2moe", .convert_check = mxl_family_gguf_not_converted,
};
