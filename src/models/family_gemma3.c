/* family_gemma3.c - Gemma 3 text decoder (transformers modeling_gemma3.py, model_type
 * gemma3_text): Gemma 2's block (without soft-caps by default) plus an RMSNorm (1 + w) over each
 * query and key head, and two RoPEs: full-attention layers use rope_parameters.full_attention
 * (theta 1e6, often linear scaling), sliding layers rope_parameters.sliding_attention (theta 1e4).
 * Older configs spell these rope_theta + rope_scaling (global) and rope_local_base_freq (local).
 * Sliding layers from layer_types, else every layer but each sliding_window_pattern-th (6).
 * GGUF: norms are stored as 1 + w already; the attention scale is 1/sqrt(head_dim). */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "models/convert_family.h"
#include "models/decoder_family.h"

static void plain_rope(mxl_rope_cfg *r, int64_t head_dim, double theta) {
    memset(r, 0, sizeof *r);
    r->head_dim = r->rotary_dim = (int)head_dim;
    r->theta = theta;
    r->style = MXL_ROPE_NEOX;
    r->scaling = MXL_ROPE_SCALING_NONE;
    r->factor = 1.0;
}

static mxl_status gemma3_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    const mxl_model_config *cfg = c->cfg;
    hp->act = MXL_ACT_GELU_TANH;
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    hp->post_norms = true;
    hp->norm_plus_one = false; /* GGUF stores 1 + w */
    hp->embed_scale = sqrtf((float)hp->hidden);
    plain_rope(&hp->rope, hp->head_dim, !isnan(cfg->rope_theta) ? cfg->rope_theta : 10000.0);
    plain_rope(&hp->rope_local, hp->head_dim, !isnan(cfg->rope_local_base_freq) ? cfg->rope_local_base_freq : 10000.0);
    hp->sliding_window = cfg->sliding_window > 0 ? cfg->sliding_window : 0;
    hp->layer_is_sliding = cfg->n_layer_types == hp->n_layers ? cfg->layer_is_sliding : NULL;
    return MXL_OK;
}

static mxl_status gemma3_setup(mxl_family_ctx *c) {
    if (c->gguf) return gemma3_gguf(c);
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool bidir;
    if ((st = mxl_family_bool(c, "use_bidirectional_attention", false, &bidir))) return st;
    hp->bidirectional = bidir; /* (EmbeddingGemma: run whole, engine/embed.c) */
    if ((st = mxl_family_gemma2_common(c))) return st;
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;

    json_t *rp = json_object_get(c->raw, "rope_parameters");
    bool per_type;
    if ((st = mxl_family_rope_layer_types(c, 1000000.0, 10000.0, &per_type))) return st;
    if (!per_type) {
        json_t *p = rp && !json_is_null(rp) ? rp : json_object_get(c->raw, "rope_scaling");
        if (p && json_is_null(p)) p = NULL;
        if ((st = mxl_family_rope_from(c, p, rp && !json_is_null(rp) ? "rope_parameters" : "rope_scaling", 1000000.0, &hp->rope))) return st;
        double local;
        if ((st = mxl_family_double(c, "rope_local_base_freq", 10000.0, &local))) return st;
        if ((st = mxl_family_rope_from(c, NULL, "rope_local_base_freq", local, &hp->rope_local))) return st;
        hp->rope_local.theta = local; /* rope_local_base_freq, not the global rope_theta */
    }

    int64_t window = c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 0;
    /* Gemma3TextConfig makes a bidirectional model's window W // 2 + 1 (|q - k| < it) */
    if (bidir && window > 0) window = window / 2 + 1;
    if (window == 0 || mxl_family_sliding_from_layer_types(c, window)) return MXL_OK;
    int64_t pattern;
    if ((st = mxl_family_int(c, "sliding_window_pattern", 6, &pattern))) return st;
    return mxl_family_sliding_pattern(c, pattern, window);
}

static void gemma3_convert_config(const mxl_checkpoint *ck, json_t *j) {
    const mxl_model_config *c = &ck->config;
    mxl_family_gemma_convert_common(ck, j);
    json_object_set_new(j, "query_pre_attn_scalar", json_integer(c->head_dim)); /* we run 1/sqrt(head_dim) from GGUF */
    json_object_set_new(j, "rope_local_base_freq", json_real(isnan(c->rope_local_base_freq) ? 10000.0 : c->rope_local_base_freq));
    json_object_set_new(j, "final_logit_softcapping", json_null());
    json_object_set_new(j, "attn_logit_softcapping", json_null());
    json_object_set_new(j, "sliding_window", json_integer(c->sliding_window > 0 ? c->sliding_window : 4096));
    mxl_convert_put_layer_types(ck, j);
}

/* Gemma3ForConditionalGeneration (model_type gemma3): the decoder of text_config at
 * language_model.model.* (the released checkpoints) or model.language_model.* (transformers 5);
 * the SigLIP tower and projector are models/vlm_gemma3.c's. */
static mxl_status gemma3_vlm_setup(mxl_family_ctx *c) {
    mxl_family_text_prefix(c);
    return gemma3_setup(c);
}

const mxl_decoder_family mxl_family_gemma3 = {
    .model_type = "gemma3", .registry_id = "gemma3", .hf_class = "Gemma3ForConditionalGeneration", .names = &mxl_names_gemma2,
    .setup = gemma3_vlm_setup, .text_config = true, .also_runs = (const char *const[]){"gemma3_vlm", NULL},
    .gaps = "images through generate --image only (not yet the server's image parts, pan-and-scan or GGUF mmproj files)",
};

/* GGUF: sliding layers use RoPE base 10000 (transformers' rope_local_base_freq default; llama.cpp
 * hard-codes it as rope_freq_base_train_swa); the GGUF has no key for it. */
const mxl_decoder_family mxl_family_gemma3_text = {
    .model_type = "gemma3_text", .registry_id = "gemma3", .hf_class = "Gemma3ForCausalLM", .names = &mxl_names_gemma2,
    .setup = gemma3_setup, .gaps = "text only: the vision tower is not built", .also_runs = (const char *const[]){"embeddinggemma", NULL},
    .gguf_arch = "gemma3", .gguf_norm_plus_one = true, .gguf_sliding_pattern = 6, .gguf_rope_local_theta = 10000.0,
    .convert_config = gemma3_convert_config,
};
