/* family_nemotron.c - Nemotron (transformers modeling_nemotron.py: Nemotron-4, Minitron):
 * Llama's layout with LayerNorm1P (LayerNorm with bias whose weight is stored as w - 1: the
 * forward uses 1 + w; eps norm_eps), a plain MLP up_proj -> squared ReLU (hidden_act relu2) ->
 * down_proj, RoPE (NEOX) on the first partial_rotary_factor (default 0.5) of each head, and
 * attention_bias / mlp_bias.
 * GGUF (llama.cpp nemotron): the converter stores the norm weights as 1 + w already; LayerNorms with
 * bias (attention.layer_norm_epsilon), biases as the file has them, NEOX RoPE over
 * rope.dimension_count (linear scaling read by the shared GGUF reader); not converted back. */
#include <math.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

static mxl_status nemotron_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double eps;
    if (c->gguf) {
        hp->norm = MXL_NORM_LAYER;
        hp->norm_eps = (float)(!isnan(c->cfg->layer_norm_eps) ? c->cfg->layer_norm_eps : 1e-5);
        hp->mlp = MXL_MLP_PLAIN;
        hp->act = MXL_ACT_RELU2;
        mxl_family_gguf_attn_biases(c);
        hp->mlp_bias = mxl_family_gguf_has_layer0(c, "ffn_up", ".bias");
        return mxl_family_gguf_rope_neox(c);
    }
    if ((st = mxl_family_double(c, "norm_eps", 1e-5, &eps))) return st;
    hp->norm = MXL_NORM_LAYER;
    hp->norm_plus_one = true;
    hp->norm_eps = (float)eps;
    hp->mlp = MXL_MLP_PLAIN;
    if ((st = mxl_family_rope(c))) return st;
    return mxl_family_rope_partial_default(c, 0.5);
}

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .ffn_norm = "post_attention_layernorm", .up = "mlp.up_proj", .down = "mlp.down_proj",
};

const mxl_decoder_family mxl_family_nemotron = {
    .model_type = "nemotron", .registry_id = "nemotron", .hf_class = "NemotronForCausalLM", .names = &k_names,
    .setup = nemotron_setup, .gguf_arch = "nemotron", .convert_check = mxl_family_gguf_not_converted,
};
