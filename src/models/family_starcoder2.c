/* family_starcoder2.c - StarCoder2 (transformers modeling_starcoder2.py): LayerNorm with bias
 * (norm_epsilon), a plain MLP c_fc -> activation (gelu_pytorch_tanh) -> c_proj, biases on every
 * projection when use_bias (default true), sliding window over every layer when set.
 * mlx-lm's starcoder2 (whose conversions keep these names) applies neither the window nor
 * hidden_act (always the exact GELU), so its logits differ from transformers' and ours for
 * gelu_pytorch_tanh checkpoints and past sliding_window tokens.
 * GGUF (llama.cpp starcoder2): LayerNorm weight + bias (attn_norm, ffn_norm, output_norm) with
 * attention.layer_norm_epsilon, plain MLP ffn_up -> GELU (tanh) -> ffn_down, biases when the GGUF
 * holds them (blk.0.attn_q.bias), NEOX RoPE on unpermuted rows; no sliding window (the converter
 * writes none and llama.cpp runs none). */
#include <jansson.h>
#include <math.h>

#include "models/convert_family.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .ffn_norm = "post_attention_layernorm", .up = "mlp.c_fc", .down = "mlp.c_proj",
};

static mxl_status starcoder2_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double eps;
    bool bias;
    hp->norm = MXL_NORM_LAYER;
    hp->mlp = MXL_MLP_PLAIN;
    hp->act = MXL_ACT_GELU_TANH;
    if (c->cfg->hidden_act[0] && (st = mxl_family_act(c, "hidden_act", c->cfg->hidden_act, &hp->act))) return st;
    if (c->gguf) {
        hp->norm_eps = (float)(!isnan(c->cfg->layer_norm_eps) ? c->cfg->layer_norm_eps : 1e-5);
        bias = mxl_family_gguf_has_layer0(c, "attn_q", ".bias");
        hp->qkv_bias = hp->o_bias = hp->mlp_bias = bias;
        return mxl_family_gguf_rope_neox(c);
    }
    if ((st = mxl_family_double(c, "norm_epsilon", 1e-5, &eps))) return st;
    hp->norm_eps = (float)eps;
    if ((st = mxl_family_bool(c, "use_bias", true, &bias))) return st;
    hp->qkv_bias = hp->o_bias = hp->mlp_bias = bias;
    if ((st = mxl_family_rope(c))) return st;
    return mxl_family_sliding_all(c);
}

static void starcoder2_convert_config(const mxl_checkpoint *ck, json_t *j) {
    const mxl_model_config *c = &ck->config;
    mxl_convert_put_sizes(ck, j);
    json_object_set_new(j, "norm_epsilon", json_real(isnan(c->layer_norm_eps) ? 1e-5 : c->layer_norm_eps));
    json_object_set_new(j, "hidden_act", json_string("gelu_pytorch_tanh"));
    json_object_set_new(j, "use_bias", json_boolean(mxl_convert_has_tensor(ck, "blk.0.attn_q.bias")));
    json_object_set_new(j, "sliding_window", json_null()); /* llama.cpp runs none */
}

const mxl_decoder_family mxl_family_starcoder2 = {
    .model_type = "starcoder2", .registry_id = "starcoder2", .hf_class = "Starcoder2ForCausalLM", .names = &k_names,
    .setup = starcoder2_setup, .gguf_arch = "starcoder2", .convert_config = starcoder2_convert_config,
};
