/* family_phi.c - Phi 1 / 1.5 / 2 (transformers modeling_phi.py, model_type phi): one LayerNorm
 * with bias per layer (input_layernorm, eps layer_norm_eps) feeding attention and a plain MLP
 * (fc1 -> hidden_act, gelu_new -> fc2) side by side (parallel residual); biases on q/k/v, on
 * self_attn.dense (the output projection), on fc1/fc2 and on the LM head; RoPE (NEOX) on the first
 * partial_rotary_factor (default 0.5) of each head; final LayerNorm model.final_layernorm.
 * qk_layernorm (a LayerNorm on queries and keys) is refused by name, and so is the older
 * remote-code layout (model_type phi-msft, transformer.h.N.mixer.Wqkv), which is not a family
 * record. GGUF: llama.cpp's phi2 (phi_gguf below). */
#include <math.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.final_layernorm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.dense", .up = "mlp.fc1", .down = "mlp.fc2",
};

/* GGUF (llama.cpp phi2): attn_q / attn_k / attn_v (or a fused attn_qkv, rows q, k, v),
 * attn_output, ffn_up / ffn_down, each with a bias, attn_norm (+ bias) shared by attention and MLP,
 * output_norm (+ bias), output (+ bias); NEOX RoPE over rope.dimension_count; GELU (tanh). */
static mxl_status phi_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    hp->norm = MXL_NORM_LAYER;
    hp->norm_eps = (float)(!isnan(c->cfg->layer_norm_eps) ? c->cfg->layer_norm_eps : 1e-5);
    hp->parallel_residual = true;
    hp->mlp = MXL_MLP_PLAIN;
    hp->act = MXL_ACT_GELU_TANH;
    hp->qkv_bias = hp->o_bias = hp->mlp_bias = hp->lm_head_bias = true;
    c->names->ffn_norm = NULL;
    if (mxl_family_gguf_has_layer0(c, "attn_qkv", ".weight")) {
        c->names->qkv = "attn_qkv";
        c->names->q = c->names->k = c->names->v = NULL;
    }
    return mxl_family_gguf_rope_neox(c);
}

static mxl_status phi_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool qk_ln;
    if (c->gguf) return phi_gguf(c);
    if ((st = mxl_family_bool(c, "qk_layernorm", false, &qk_ln))) return st;
    if (qk_ln) return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'qk_layernorm' = true is not supported", c->ck->path);
    hp->norm = MXL_NORM_LAYER;
    hp->norm_eps = (float)(!isnan(c->cfg->layer_norm_eps) ? c->cfg->layer_norm_eps : 1e-5);
    hp->parallel_residual = true;
    hp->mlp = MXL_MLP_PLAIN;
    hp->qkv_bias = hp->o_bias = hp->mlp_bias = hp->lm_head_bias = true;
    if ((st = mxl_family_rope(c))) return st;
    return mxl_family_rope_partial_default(c, 0.5);
}

const mxl_decoder_family mxl_family_phi = {
    .model_type = "phi", .registry_id = "phi", .hf_class = "PhiForCausalLM", .names = &k_names, .setup = phi_setup,
    .gguf_arch = "phi2", .convert_check = mxl_family_gguf_not_converted,
};
