/* family_gpt_neox.c - GPT-NeoX (transformers modeling_gpt_neox.py: Pythia, GPT-NeoX-20B,
 * StableLM-alpha, RedPajama-INCITE): LayerNorms with bias (layer_norm_eps); the attention's
 * query_key_value [3 * hidden, hidden] holds q, k, v side by side per head ([heads][q, k,
 * v][head_dim]: copied into three plain projections at load, decoder.c bind_fused_per_head);
 * biases on it and on attention.dense (attention_bias, true by default) and on the plain MLP
 * dense_h_to_4h -> hidden_act (exact GELU) -> dense_4h_to_h; the parallel residual
 * (use_parallel_residual, default true: x + attn(ln1(x)) + mlp(ln2(x))) or the sequential block;
 * RoPE (NEOX) on the first partial_rotary_factor (older configs: rotary_pct, default 0.25) of each
 * head, base rope_theta (older configs: rotary_emb_base); untied embed_out head. mlx-lm's
 * conversions rename the modules (k_names_mlx_lm). GGUF: llama.cpp's gptneox (gpt_neox_gguf). */
#include <jansson.h>
#include <math.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "gpt_neox.embed_in", .final_norm = "gpt_neox.final_layer_norm", .lm_head = "embed_out",
    .layers = "gpt_neox.layers.", .attn_norm = "input_layernorm", .qkv = "attention.query_key_value", .qkv_per_head = true,
    .o = "attention.dense", .ffn_norm = "post_attention_layernorm", .up = "mlp.dense_h_to_4h", .down = "mlp.dense_4h_to_h",
};

/* mlx-lm's conversion (mlx_lm/models/gpt_neox.py sanitize): "model." prefix, layers under
 * model.h., the same per-head query_key_value */
static const mxl_decoder_names k_names_mlx_lm = {
    .embed = "model.embed_in", .final_norm = "model.final_layer_norm", .lm_head = "model.embed_out", .layers = "model.h.",
    .attn_norm = "input_layernorm", .qkv = "attention.query_key_value", .qkv_per_head = true, .o = "attention.dense",
    .ffn_norm = "post_attention_layernorm", .up = "mlp.dense_h_to_4h", .down = "mlp.dense_4h_to_h",
};

/* GGUF (llama.cpp gptneox): the converter regroups query_key_value into q, k, v blocks (a plain
 * fused attn_qkv); attn_norm / ffn_norm / output_norm with bias; use_parallel_residual (default
 * true); NEOX RoPE over rope.dimension_count; GELU (tanh: llama.cpp's gptneox graph uses it
 * whatever hidden_act said); biases everywhere; untied output. */
static mxl_status gpt_neox_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st = mxl_family_gguf_bool(c, "use_parallel_residual", true, &hp->parallel_residual);
    if (st) return st;
    c->names->qkv = "attn_qkv";
    c->names->q = c->names->k = c->names->v = NULL;
    hp->norm = MXL_NORM_LAYER;
    hp->norm_eps = (float)(!isnan(c->cfg->layer_norm_eps) ? c->cfg->layer_norm_eps : 1e-5);
    hp->mlp = MXL_MLP_PLAIN;
    hp->act = MXL_ACT_GELU_TANH;
    hp->qkv_bias = hp->o_bias = hp->mlp_bias = true;
    return mxl_family_gguf_rope_neox(c);
}

static mxl_status gpt_neox_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    if (c->gguf) return gpt_neox_gguf(c);
    if (!mxl_st_model_find(c->ck->st, "gpt_neox.embed_in.weight") && mxl_st_model_find(c->ck->st, "model.embed_in.weight"))
        *c->names = k_names_mlx_lm;
    bool bias;
    double base, pct;
    if ((st = mxl_family_bool(c, "use_parallel_residual", true, &hp->parallel_residual)) ||
        (st = mxl_family_bool(c, "attention_bias", true, &bias)) || (st = mxl_family_double(c, "rotary_emb_base", 10000.0, &base)) ||
        (st = mxl_family_double(c, "rotary_pct", 0.25, &pct)))
        return st;
    hp->norm = MXL_NORM_LAYER;
    hp->norm_eps = (float)(!isnan(c->cfg->layer_norm_eps) ? c->cfg->layer_norm_eps : 1e-5);
    hp->mlp = MXL_MLP_PLAIN;
    hp->qkv_bias = hp->o_bias = bias;
    hp->mlp_bias = true;
    if ((st = mxl_family_rope(c))) return st;
    /* GPTNeoXConfig's own spellings, used when rope_parameters (or rope_theta) does not say */
    json_t *rp = json_object_get(c->raw, "rope_parameters");
    if (!(json_is_object(rp) && json_object_get(rp, "rope_theta")) && !json_is_number(json_object_get(c->raw, "rope_theta")))
        hp->rope.theta = hp->rope_local.theta = base;
    return mxl_family_rope_partial_default(c, pct);
}

const mxl_decoder_family mxl_family_gpt_neox = {
    .model_type = "gpt_neox", .registry_id = "gpt_neox", .hf_class = "GPTNeoXForCausalLM", .names = &k_names,
    .setup = gpt_neox_setup, .gguf_arch = "gptneox", .convert_check = mxl_family_gguf_not_converted,
};
