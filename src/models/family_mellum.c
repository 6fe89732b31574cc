/* family_mellum.c - Mellum 2 (transformers modeling_mellum.py): Llama's pre-norm block with an
 * RMSNorm over each query and key head before RoPE, sliding-window layers from layer_types with
 * their own RoPE (rope_parameters per layer type: full 500000, sliding 10000 by default), and a
 * sparse MoE block (softmax router, top k renormalised with norm_topk_prob, no shared expert) on
 * the layers mlp_layer_types marks sparse (by default all). The multi-token-prediction layers
 * (num_mtp_layers) are not run.
 * GGUF (llama.cpp mellum): the same block with llama.cpp's names; every layer sparse (llama.cpp's
 * mellum has no dense layers), the top k of a softmax renormalised, NEOX RoPE at rope.freq_base on
 * the full layers and rope.freq_base_swa (default the same) unscaled on the sliding ones, which
 * attention.sliding_window_pattern marks (one flag per layer as the converter writes it, else every
 * 4th layer full) when attention.sliding_window is set. */
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static mxl_status mellum_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double swa_base;
    if ((st = mxl_family_gguf_rope_neox(c)) || (st = mxl_family_gguf_moe(c, true)) ||
        (st = mxl_family_gguf_number(c, "rope.freq_base_swa", hp->rope.theta, &swa_base)))
        return st;
    hp->rope_local.theta = swa_base;
    if (c->cfg->sliding_window > 0 && (st = mxl_family_sliding_pattern(c, 4, c->cfg->sliding_window))) return st;
    return MXL_OK;
}

static mxl_status mellum_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool per_type;
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    if (c->gguf) return mellum_gguf(c);
    if ((st = mxl_family_rope_layer_types(c, 500000.0, 10000.0, &per_type))) return st;
    if (!per_type && (st = mxl_family_rope(c))) return st;
    if ((st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, false)) || (st = mxl_family_moe_layer_types(c, 0))) return st;
    if (c->cfg->sliding_window > 0) mxl_family_sliding_from_layer_types(c, c->cfg->sliding_window);
    return MXL_OK;
}

const mxl_decoder_family mxl_family_mellum = {
    .model_type = "mellum", .registry_id = "mellum", .hf_class = "MellumForCausalLM", .names = &mxl_names_qwen_moe, .setup = mellum_setup,
    .gguf_arch = "mellum", .convert_check = mxl_family_gguf_not_converted,
};
