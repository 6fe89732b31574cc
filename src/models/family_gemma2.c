/* family_gemma2.c - Gemma 2 (transformers modeling_gemma2.py): Gemma's (1 + w) norms and scaled
 * embeddings, four norms per layer (input, post-attention, pre- and post-feedforward), attention
 * scale query_pre_attn_scalar^-1/2, tanh soft-caps on the attention scores
 * (attn_logit_softcapping) and the final logits (final_logit_softcapping), and sliding-window
 * layers from layer_types (default: every other layer, starting with the first).
 * GGUF (llama.cpp gemma2): norms stored as 1 + w; no query_pre_attn_scalar in the metadata:
 * llama.cpp scales by 1/sqrt(key_length), except its 27B size (46 layers), where it takes
 * 1/sqrt(n_embd / n_head) (gemma_pytorch's config, = query_pre_attn_scalar 144 there); soft-caps
 * from gemma2.attn_logit_softcapping / final_logit_softcapping (llama.cpp defaults 50 and 30);
 * sliding layers every other one from the first (config_gguf.c; or
 * attention.sliding_window_pattern), window attention.sliding_window (default 4096); sliding
 * layers' RoPE base rope.freq_base_swa, else rope.freq_base. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "models/convert_family.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

const mxl_decoder_names mxl_names_gemma2 = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .q_norm = "self_attn.q_norm", .k_norm = "self_attn.k_norm",
    .post_attn_norm = "post_attention_layernorm", .ffn_norm = "pre_feedforward_layernorm",
    .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj",
    .post_ffn_norm = "post_feedforward_layernorm",
};

mxl_status mxl_family_gemma2_common(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    hp->norm_plus_one = true;
    hp->post_norms = true;
    hp->embed_scale = sqrtf((float)hp->hidden);
    hp->act = MXL_ACT_GELU_TANH;
    json_t *ha = c->raw ? json_object_get(c->raw, "hidden_activation") : NULL;
    if (ha && json_is_string(ha)) {
        if ((st = mxl_family_act(c, "hidden_activation", json_string_value(ha), &hp->act))) return st;
    } else if (c->cfg->hidden_act[0] && (st = mxl_family_act(c, "hidden_act", c->cfg->hidden_act, &hp->act))) {
        return st;
    }
    double qpas, cap;
    if ((st = mxl_family_double(c, "query_pre_attn_scalar", 256.0, &qpas))) return st;
    if (!(qpas > 0)) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'query_pre_attn_scalar' must be positive", c->ck->path);
    hp->attn_scale = (float)(1.0 / sqrt(qpas));
    if ((st = mxl_family_double(c, "attn_logit_softcapping", 0.0, &cap))) return st;
    hp->attn_softcap = cap > 0 ? (float)cap : 0.0f;
    if ((st = mxl_family_double(c, "final_logit_softcapping", 0.0, &cap))) return st;
    hp->final_softcap = cap > 0 ? (float)cap : 0.0f;
    return MXL_OK;
}

static mxl_status gemma2_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    const mxl_model_config *cfg = c->cfg;
    mxl_status st;
    hp->norm_plus_one = false; /* GGUF stores 1 + w */
    hp->post_norms = true;
    hp->embed_scale = sqrtf((float)hp->hidden);
    hp->act = MXL_ACT_GELU_TANH;
    hp->attn_scale = hp->n_layers == 46 ? (float)(1.0 / sqrt((double)(hp->hidden / hp->n_heads))) : 1.0f / sqrtf((float)hp->head_dim);
    double cap, swa_base;
    if ((st = mxl_family_gguf_number(c, "attn_logit_softcapping", 50.0, &cap))) return st;
    hp->attn_softcap = cap > 0 ? (float)cap : 0.0f;
    if ((st = mxl_family_gguf_number(c, "final_logit_softcapping", 30.0, &cap))) return st;
    hp->final_softcap = cap > 0 ? (float)cap : 0.0f;
    if ((st = mxl_family_gguf_rope_neox(c))) return st;
    if ((st = mxl_family_gguf_number(c, "rope.freq_base_swa", hp->rope.theta, &swa_base))) return st;
    if (!(swa_base > 0)) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key 'gemma2.rope.freq_base_swa' must be positive", c->ck->path);
    hp->rope_local.theta = swa_base;
    if (cfg->n_layer_types == hp->n_layers && cfg->layer_is_sliding) {
        hp->layer_is_sliding = cfg->layer_is_sliding;
        hp->sliding_window = cfg->sliding_window > 0 ? cfg->sliding_window : 4096;
    }
    return MXL_OK;
}

static mxl_status gemma2_setup(mxl_family_ctx *c) {
    if (c->gguf) return gemma2_gguf(c);
    mxl_status st = mxl_family_gemma2_common(c);
    if (st || (st = mxl_family_rope(c))) return st;
    int64_t window = c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 0;
    if (window == 0 || mxl_family_sliding_from_layer_types(c, window)) return MXL_OK;
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < c->hp->n_layers; i++) f[i] = (i + 1) % 2 != 0;
    c->hp->layer_is_sliding = f;
    c->hp->sliding_window = window;
    return MXL_OK;
}

static void gemma2_convert_config(const mxl_checkpoint *ck, json_t *j) {
    const mxl_model_config *c = &ck->config;
    mxl_family_gemma_convert_common(ck, j);
    /* llama.cpp (and mlxcel) scale by 1/sqrt(head_dim), 1/sqrt(hidden / heads) for the 27B size */
    int64_t qpas = c->num_hidden_layers == 46 ? c->hidden_size / c->num_attention_heads : c->head_dim;
    json_object_set_new(j, "query_pre_attn_scalar", json_integer(qpas));
    json_object_set_new(j, "attn_logit_softcapping", json_real(mxl_convert_arch_num(ck, "attn_logit_softcapping", 50.0)));
    json_object_set_new(j, "final_logit_softcapping", json_real(mxl_convert_arch_num(ck, "final_logit_softcapping", 30.0)));
    json_object_set_new(j, "sliding_window", json_integer(c->sliding_window > 0 ? c->sliding_window : 4096));
    mxl_convert_put_layer_types(ck, j);
}

const mxl_decoder_family mxl_family_gemma2 = {
    .model_type = "gemma2", .registry_id = "gemma2", .hf_class = "Gemma2ForCausalLM", .names = &mxl_names_gemma2,
    .setup = gemma2_setup, .gguf_arch = "gemma2", .gguf_norm_plus_one = true, .gguf_sliding_pattern = 2,
    .convert_config = gemma2_convert_config,
};
