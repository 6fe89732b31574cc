/* family_exaone.c - EXAONE 3.0 / 3.5 (LG AI Research, remote code on the Hub; truth: mlx-lm's
 * exaone): Llama's block (RMSNorm, grouped-query attention without biases, SiLU-gated MLP, RoPE
 * with llama3 scaling on 3.5) under GPT-2-style names: transformer.wte, transformer.h.N.ln_1,
 * attn.attention.{q,k,v,out}_proj, ln_2, mlp.c_fc_0 (gate), mlp.c_fc_1 (up), mlp.c_proj,
 * transformer.ln_f, lm_head (tied when tie_word_embeddings); num_layers, layer_norm_epsilon and
 * activation_function (silu only) as its config names them.
 * GGUF (llama.cpp exaone): Llama's tensor names, NEOX RoPE (Q/K not permuted), llama3 scaling as
 * rope_freqs.weight; the RMSNorm epsilon from attention.layer_norm_rms_epsilon, else
 * attention.layer_norm_epsilon (what the converter writes); not converted back. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "transformer.wte", .final_norm = "transformer.ln_f", .lm_head = "lm_head", .layers = "transformer.h.",
    .attn_norm = "ln_1", .q = "attn.attention.q_proj", .k = "attn.attention.k_proj", .v = "attn.attention.v_proj",
    .o = "attn.attention.out_proj", .ffn_norm = "ln_2", .gate = "mlp.c_fc_0", .up = "mlp.c_fc_1", .down = "mlp.c_proj",
};

static mxl_status exaone_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    /* (the RMSNorms' epsilon is layer_norm_epsilon; llama.cpp's converter writes it as the
     * LayerNorm one, attention.layer_norm_epsilon, where llama.cpp's exaone reads only the RMS key) */
    if (isnan(c->cfg->rms_norm_eps) && !isnan(c->cfg->layer_norm_eps)) hp->norm_eps = (float)c->cfg->layer_norm_eps;
    if (c->gguf) return mxl_family_gguf_rope_neox(c);
    json_t *a = json_object_get(c->raw, "activation_function");
    if (a && !json_is_null(a)) {
        if (!json_is_string(a)) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'activation_function' must be a string", c->ck->path);
        mxl_status st = mxl_family_act(c, "activation_function", json_string_value(a), &hp->act);
        if (st) return st;
    }
    return mxl_family_rope(c);
}

const mxl_decoder_family mxl_family_exaone = {
    .model_type = "exaone", .registry_id = "exaone", .hf_class = "ExaoneForCausalLM", .names = &k_names, .setup = exaone_setup,
    .gguf_arch = "exaone", .convert_check = mxl_family_gguf_not_converted,
};
