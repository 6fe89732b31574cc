/* family_exaone4.c - EXAONE 4.0 (transformers modeling_exaone4.py): OLMo 2's post-norm block
 * (RMSNorm on the attention output and on the MLP output, none before them) with an RMSNorm over
 * each query and key head before RoPE. With a sliding window the sliding layers (layer_types, else
 * sliding_window_pattern: an integer N, every N-th layer full, or a string like "LLLG", one letter
 * per layer repeating) use RoPE and the window, and the full layers use no positions at all
 * (NoPE); without one every layer is full and rotates.
 * GGUF (llama.cpp exaone4): post_attention_norm / post_ffw_norm, attn_q_norm / attn_k_norm, NEOX
 * RoPE; llama.cpp applies the sliding window (and NoPE on full layers) only to 64-layer models (the
 * 32B), from attention.sliding_window_pattern (default every 4th layer full) and
 * attention.sliding_window; every other size runs all layers full with RoPE, whatever the file's
 * window keys say. Not converted back. */
#include <jansson.h>
#include <string.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* Sliding layers from sliding_window_pattern when config.json has no layer_types. */
static mxl_status sliding_from_pattern(mxl_family_ctx *c, int64_t window) {
    mxl_decoder_hparams *hp = c->hp;
    json_t *p = json_object_get(c->raw, "sliding_window_pattern");
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    const char *s = json_is_string(p) ? json_string_value(p) : NULL;
    int64_t n = json_is_integer(p) ? json_integer_value(p) : !p || json_is_null(p) ? 4 : -1;
    if (s && (!s[0] || strspn(s, "LG") != strlen(s)))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'sliding_window_pattern' must be a number or letters L/G", c->ck->path);
    if (!s && n <= 0)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'sliding_window_pattern' must be a positive number or letters L/G", c->ck->path);
    for (int64_t i = 0; i < hp->n_layers; i++) f[i] = s ? s[i % (int64_t)strlen(s)] == 'L' : (i + 1) % n != 0;
    hp->layer_is_sliding = f;
    hp->sliding_window = window;
    return MXL_OK;
}

static mxl_status exaone4_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    const mxl_model_config *cfg = c->cfg;
    mxl_status st = mxl_family_gguf_rope_neox(c);
    if (st || hp->n_layers != 64) return st;
    if ((st = mxl_family_sliding_pattern(c, 4, cfg->sliding_window > 0 ? cfg->sliding_window : 4096))) return st;
    return mxl_family_nope_full_layers(c);
}

static mxl_status exaone4_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    hp->pre_norms = false;
    hp->post_norms = true;
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    if (c->gguf) return exaone4_gguf(c);
    if ((st = mxl_family_rope(c))) return st;
    int64_t window = c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 0;
    if (window == 0) return MXL_OK;
    if (!mxl_family_sliding_from_layer_types(c, window) && (st = sliding_from_pattern(c, window))) return st;
    return mxl_family_nope_full_layers(c);
}

const mxl_decoder_family mxl_family_exaone4 = {
    .model_type = "exaone4", .registry_id = "exaone4", .hf_class = "Exaone4ForCausalLM", .names = &mxl_names_olmo2,
    .setup = exaone4_setup, .gguf_arch = "exaone4", .convert_check = mxl_family_gguf_not_converted,
};
