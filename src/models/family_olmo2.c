/* family_olmo2.c - OLMo 2 (transformers modeling_olmo2.py): no norm before attention or MLP;
 * instead RMSNorms on their outputs (post_attention_layernorm, post_feedforward_layernorm)
 * before the residual add, and QK-norm over the whole q and k projections (q_norm
 * [heads*head_dim], k_norm [kv_heads*head_dim]) before RoPE.
 * GGUF (llama.cpp olmo2, also what OLMo 3 converts to): attn_q_norm [heads*head_dim],
 * attn_k_norm [kv_heads*head_dim], post_attention_norm, post_ffw_norm, no pre-norms, NEOX RoPE on
 * unpermuted rows, untied output.weight. Sliding window only when attention.sliding_window > 0
 * (OLMo 3): sliding layers from attention.sliding_window_pattern (config_gguf.c), else llama.cpp's
 * default pattern 4 (every 4th layer full); sliding layers use rope.freq_base_swa (default
 * rope.freq_base) and no RoPE scaling (llama.cpp runs them with freq_scale 1, attn_factor 1, as
 * mxl_family_gguf_rope_scaling leaves hp->rope_local). */
#include <jansson.h>

#include "models/convert_family.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

const mxl_decoder_names mxl_names_olmo2 = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj", .o = "self_attn.o_proj",
    .q_norm = "self_attn.q_norm", .k_norm = "self_attn.k_norm", .post_attn_norm = "post_attention_layernorm",
    .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj",
    .post_ffn_norm = "post_feedforward_layernorm",
};

static mxl_status olmo2_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    const mxl_model_config *cfg = c->cfg;
    mxl_status st;
    char key[192];
    if ((st = mxl_family_gguf_rope_neox(c))) return st;
    if (cfg->sliding_window <= 0) return MXL_OK;
    double swa_base;
    if ((st = mxl_family_gguf_number(c, "rope.freq_base_swa", hp->rope.theta, &swa_base))) return st;
    if (!(swa_base > 0))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' must be positive", c->ck->path,
                             mxl_family_gguf_key(c, "rope.freq_base_swa", key, sizeof key));
    hp->rope_local.theta = swa_base;
    return mxl_family_sliding_pattern(c, 4, cfg->sliding_window);
}

/* OLMo 2's block: post norms only, QK-norm over the whole projection (OLMo 3's too). */
static void olmo2_block(mxl_family_ctx *c) {
    c->hp->pre_norms = false;
    c->hp->post_norms = true;
    c->hp->qk_norm_kind = MXL_QK_NORM_FULL;
}

static mxl_status olmo2_setup(mxl_family_ctx *c) {
    olmo2_block(c);
    if (c->gguf) return olmo2_gguf(c);
    return mxl_family_rope(c);
}

/* OLMo 3 (transformers modeling_olmo3.py): OLMo 2's block with sliding layers (layer_types, by
 * default every layer but each 4th) and one RoPE per layer type (rope_parameters.full_attention /
 * sliding_attention, theta 500000 by default; older configs: rope_theta and rope_scaling on
 * full layers, theta 500000 on sliding ones, as transformers reads them). GGUF: llama.cpp writes OLMo 3 as olmo2 (olmo2_gguf above). */
static mxl_status olmo3_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    olmo2_block(c);
    bool per_type;
    if ((st = mxl_family_rope_layer_types(c, 500000.0, 500000.0, &per_type))) return st;
    if (!per_type) {
        /* the older spelling as transformers reads it (Olmo3Config.convert_rope_params_to_dict):
         * rope_theta and rope_scaling go to full layers; sliding layers get the default theta
         * 500000 whatever rope_theta says (it is consumed by the full layers' entry) */
        json_t *scaling = json_object_get(c->raw, "rope_scaling");
        if (json_is_null(scaling)) scaling = NULL;
        if ((st = mxl_family_rope_from(c, scaling, "rope_scaling", 500000.0, &hp->rope))) return st;
        hp->rope_local = hp->rope;
        hp->rope_local.theta = 500000.0;
        hp->rope_local.scaling = MXL_ROPE_SCALING_NONE;
        hp->rope_local.factor = 1.0;
    }
    int64_t window = c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 0;
    return window == 0 ? MXL_OK : mxl_family_sliding_pattern(c, 4, window);
}

static mxl_status olmo2_convert_check(const mxl_checkpoint *ck, mxl_error *err) {
    if (ck->config.sliding_window > 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: olmo2 GGUF with a sliding window (metadata key 'olmo2.attention.sliding_window', OLMo 3) is not converted yet (it runs as it is)", ck->path);
    return MXL_OK;
}

const mxl_decoder_family mxl_family_olmo2 = {
    .model_type = "olmo2", .registry_id = "olmo2", .hf_class = "Olmo2ForCausalLM", .names = &mxl_names_olmo2, .setup = olmo2_setup,
    .gguf_arch = "olmo2", .convert_check = olmo2_convert_check,
};

const mxl_decoder_family mxl_family_olmo3 = {
    .model_type = "olmo3", .registry_id = "olmo3", .hf_class = "Olmo3ForCausalLM", .names = &mxl_names_olmo2, .setup = olmo3_setup,
};
