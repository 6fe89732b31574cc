/* family_afmoe.c - Arcee's AFMoE (transformers modeling_afmoe.py): Gemma 2's four norms per layer
 * (input_layernorm, post_attention_layernorm after attention, pre_mlp_layernorm, post_mlp_layernorm)
 * around an attention with an RMSNorm over each query and key head, RoPE on the sliding layers only
 * (layer_types, else every global_attn_every_n_layers-th layer full, and NoPE), and the output
 * times sigmoid(h Wg) element-wise before o_proj (self_attn.gate_proj); the layers from
 * num_dense_layers on are a sparse MoE block: sigmoid scores chosen with a selection-only bias
 * (mlp.expert_bias), the chosen scores renormalised and times route_scale, num_shared_experts
 * shared experts of moe_intermediate_size each; mup_enabled scales the embeddings by
 * sqrt(hidden_size). */
#include <math.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* llama.cpp afmoe: the same block with its names (post_attention_norm, attn_gate, post_ffw_norm), the
 * embeddings always times sqrt(hidden) (llama.cpp applies muP unconditionally), sliding layers from
 * attention.sliding_window_pattern (default every 4th full), every 4th layer NoPE, the sigmoid
 * router's keys (expert_weights_norm / _scale, exp_probs_b), leading dense blocks. */
static mxl_status afmoe_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    nm->attn_gate = "attn_gate"; /* (the post norms keep their GGUF names: post_attention_norm, post_ffw_norm) */
    hp->embed_scale = sqrtf((float)hp->hidden);
    if ((st = mxl_family_gguf_rope_neox(c)) || (st = mxl_family_gguf_moe(c, false)) || (st = mxl_family_gguf_moe_sigmoid(c))) return st;
    if (c->cfg->sliding_window > 0 && (st = mxl_family_sliding_pattern(c, 4, c->cfg->sliding_window))) return st;
    uint8_t *nope = mxl_family_layer_flags(c);
    if (!nope) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < hp->n_layers; i++) nope[i] = (i + 1) % 4 == 0;
    hp->layer_no_rope = nope;
    return MXL_OK;
}

static mxl_status afmoe_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    int64_t dense, every;
    double route_scale;
    bool mup;
    if (c->gguf) {
        hp->qk_norm_kind = MXL_QK_NORM_HEAD;
        hp->post_norms = hp->attn_out_gate = true;
        return afmoe_gguf(c);
    }
    nm->q_norm = "self_attn.q_norm", nm->k_norm = "self_attn.k_norm";
    nm->attn_gate = "self_attn.gate_proj";
    nm->post_attn_norm = "post_attention_layernorm";
    nm->ffn_norm = "pre_mlp_layernorm";
    nm->post_ffn_norm = "post_mlp_layernorm";
    nm->moe_router = "mlp.router.gate";
    nm->moe_router_bias = "mlp.expert_bias";
    nm->experts = "mlp.experts.";
    nm->expert_gate = "gate_proj", nm->expert_up = "up_proj", nm->expert_down = "down_proj";
    nm->exps_gate = "mlp.experts.gate_proj", nm->exps_up = "mlp.experts.up_proj", nm->exps_down = "mlp.experts.down_proj";
    nm->sh_gate = "mlp.shared_experts.gate_proj", nm->sh_up = "mlp.shared_experts.up_proj";
    nm->sh_down = "mlp.shared_experts.down_proj";
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    hp->post_norms = true;
    hp->attn_out_gate = true;
    if ((st = mxl_family_rope(c)) || (st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, false)) ||
        (st = mxl_family_moe_shared_count(c, "num_shared_experts")) || (st = mxl_family_int(c, "num_dense_layers", 1, &dense)) ||
        (st = mxl_family_int(c, "global_attn_every_n_layers", 4, &every)) || (st = mxl_family_double(c, "route_scale", 1.0, &route_scale)) ||
        (st = mxl_family_bool(c, "mup_enabled", false, &mup)))
        return st;
    hp->moe_router = MXL_MOE_SIGMOID;
    hp->moe_norm_topk = true;
    hp->moe_routed_scale = (float)route_scale;
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < hp->n_layers; i++) f[i] = i >= dense;
    hp->layer_is_moe = f;
    if (mup) hp->embed_scale = sqrtf((float)hp->hidden);
    /* sliding layers rotate, full ones are NoPE (with or without a window) */
    const int64_t window = c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 0;
    if ((st = mxl_family_sliding_pattern(c, every, window > 0 ? window : 1))) return st;
    if ((st = mxl_family_nope_full_layers(c))) return st;
    if (window == 0) hp->sliding_window = 0; /* (no window: the flags only mark which layers rotate) */
    return MXL_OK;
}

const mxl_decoder_family mxl_family_afmoe = {
    .model_type = "afmoe", .registry_id = "afmoe", .hf_class = "AfmoeForCausalLM", .names = &mxl_names_llama, .setup = afmoe_setup,
    .gguf_arch = "afmoe", .convert_check = mxl_family_gguf_not_converted,
};
