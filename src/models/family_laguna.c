/* family_laguna.c - Poolside's Laguna (transformers modeling_laguna.py): Llama's pre-norm block with
 * a query-head count per layer (num_attention_heads_per_layer; the KV heads are the same
 * everywhere), an RMSNorm over each query and key head before RoPE, RoPE per layer type
 * (rope_parameters.full_attention / sliding_attention, each with its own partial_rotary_factor),
 * sliding layers from layer_types, and the attention output times softplus(h Wg) before o_proj (one
 * gate per head with gating true / "per-head", else per element); the layers mlp_layer_types marks
 * sparse (by default all but the first) are a MoE block: router logits optionally softcapped
 * (moe_router_logit_softcapping), sigmoid scores chosen with a selection-only bias, the chosen
 * ones renormalised, the experts' sum times moe_routed_scaling_factor, plus a shared expert of
 * shared_expert_intermediate_size; moe_apply_router_weight_on_input weighs the experts' inputs
 * instead of their outputs.
 * GGUF (llama.cpp laguna): attention.head_count per layer, the softplus gate attn_gate (one per
 * head when its width is the layer's head count, else per element), NEOX RoPE over
 * rope.dimension_count at rope.freq_base on the full layers (scaled as the file says) and over
 * rope.dimension_count_swa at rope.freq_base_swa unscaled on the sliding ones (every 4th layer
 * from layer 0 on full, as llama.cpp when the file has no pattern), the sigmoid router with
 * exp_probs_b, expert_weights_norm / _scale, the shared expert; no router softcap (llama.cpp
 * applies none), the leading_dense_block_count layers dense. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* num_attention_heads_per_layer: each a multiple of the KV heads; n_heads becomes the widest */
static mxl_status layer_heads(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    json_t *v = json_object_get(c->raw, "num_attention_heads_per_layer");
    if (!v || json_is_null(v)) return MXL_OK;
    if (!json_is_array(v) || (int64_t)json_array_size(v) != hp->n_layers)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'num_attention_heads_per_layer' must hold one count per layer (%lld)", c->ck->path,
                             (long long)hp->n_layers);
    int32_t *n = mxl_arena_alloc(c->arena, (size_t)hp->n_layers * sizeof *n, 64);
    if (!n) return MXL_ERR_NOMEM;
    int64_t most = 0;
    for (int64_t i = 0; i < hp->n_layers; i++) {
        json_t *e = json_array_get(v, (size_t)i);
        if (!json_is_integer(e) || json_integer_value(e) < 1 || json_integer_value(e) > 100000 || json_integer_value(e) % hp->n_kv_heads)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'num_attention_heads_per_layer' entry %lld is not a multiple of num_key_value_heads (%lld)",
                                 c->ck->path, (long long)i, (long long)hp->n_kv_heads);
        n[i] = (int32_t)json_integer_value(e);
        most = n[i] > most ? n[i] : most;
    }
    hp->layer_heads = n;
    hp->n_heads = most;
    return MXL_OK;
}

static mxl_status laguna_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double gating, swa_base, swa_dims;
    int32_t *heads;
    char key[192];
    c->names->attn_gate = "attn_gate";
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    hp->attn_out_gate = hp->attn_gate_softplus = true;
    if ((st = mxl_family_gguf_rope_neox(c)) || (st = mxl_family_gguf_moe(c, true)) || (st = mxl_family_gguf_moe_sigmoid(c)) ||
        (st = mxl_family_gguf_number(c, "expert_gating_func", 2, &gating)) ||
        (st = mxl_family_gguf_layer_ints(c, "attention.head_count", hp->n_heads, 1, hp->n_heads, &heads)) ||
        (st = mxl_family_gguf_number(c, "rope.freq_base_swa", hp->rope.theta, &swa_base)) ||
        (st = mxl_family_gguf_number(c, "rope.dimension_count_swa", hp->rope.rotary_dim, &swa_dims)))
        return st;
    if (gating != 2) /* (llama_expert_gating_func_type: 2 is sigmoid) */
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: metadata key '%s' = %g is not supported (sigmoid)", c->ck->path,
                             mxl_family_gguf_key(c, "expert_gating_func", key, sizeof key), gating);
    for (int64_t i = 0; i < hp->n_layers; i++)
        if (heads[i] % hp->n_kv_heads)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' entry %lld is not a multiple of the KV heads (%lld)", c->ck->path,
                                 mxl_family_gguf_key(c, "attention.head_count", key, sizeof key), (long long)i, (long long)hp->n_kv_heads);
    hp->layer_heads = heads;
    if (!(swa_dims >= 2 && swa_dims <= hp->head_dim) || fmod(swa_dims, 2) != 0)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' = %g is not an even count within the head (%lld)", c->ck->path,
                             mxl_family_gguf_key(c, "rope.dimension_count_swa", key, sizeof key), swa_dims, (long long)hp->head_dim);
    hp->rope_local.rotary_dim = (int)swa_dims;
    hp->rope_local.theta = swa_base;
    /* the gate's width says per head or per element (llama.cpp reads it from the tensor) */
    char name[64];
    snprintf(name, sizeof name, "blk.0.%s.weight", c->names->attn_gate);
    const mxl_gguf_tensor_info *g = mxl_gguf_find_tensor(c->ck->gguf, name);
    hp->attn_gate_per_head = g && g->tensor.ndim == 2 && g->tensor.shape[0] == heads[0];
    if (c->cfg->sliding_window > 0) return mxl_family_gguf_sliding_dense_first(c, 4, c->cfg->sliding_window);
    return MXL_OK;
}

static mxl_status laguna_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    bool per_type, on_input;
    double scale, softcap;
    if (c->gguf) return laguna_gguf(c);
    nm->attn_gate = "self_attn.g_proj";
    nm->moe_router_bias = "mlp.experts.e_score_correction_bias"; /* (where the released checkpoints keep it) */
    nm->sh_gate = "mlp.shared_expert.gate_proj", nm->sh_up = "mlp.shared_expert.up_proj", nm->sh_down = "mlp.shared_expert.down_proj";
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    hp->attn_out_gate = hp->attn_gate_softplus = true;
    json_t *g = json_object_get(c->raw, "gating");
    if (g && !json_is_null(g) && !json_is_boolean(g) && !(json_is_string(g) && (!strcmp(json_string_value(g), "per-head") || !strcmp(json_string_value(g), "per-element"))))
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'gating' must be true, false, \"per-head\" or \"per-element\"", c->ck->path);
    if (json_is_false(g)) hp->attn_out_gate = false;
    /* transformers: true or "per-head" one gate per head; anything else per element */
    hp->attn_gate_per_head = !g || json_is_null(g) || json_is_true(g) || (json_is_string(g) && !strcmp(json_string_value(g), "per-head"));
    if ((st = layer_heads(c)) || (st = mxl_family_rope_layer_types(c, 500000.0, 10000.0, &per_type))) return st;
    if (!per_type && (st = mxl_family_rope(c))) return st;
    if ((st = mxl_family_moe(c, "moe_intermediate_size", "shared_expert_intermediate_size", true, false)) ||
        (st = mxl_family_moe_layer_types(c, 1)) || (st = mxl_family_double(c, "moe_routed_scaling_factor", 1.0, &scale)) ||
        (st = mxl_family_double(c, "moe_router_logit_softcapping", 0.0, &softcap)) ||
        (st = mxl_family_bool(c, "moe_apply_router_weight_on_input", false, &on_input)))
        return st;
    if (on_input && scale != 1.0) /* (the scale then applies to the outputs of weighted inputs) */
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'moe_apply_router_weight_on_input' with 'moe_routed_scaling_factor' %g is not supported",
                             c->ck->path, scale);
    hp->moe_router = MXL_MOE_SIGMOID;
    hp->moe_norm_topk = true;
    hp->moe_routed_scale = (float)scale;
    hp->moe_router_softcap = (float)softcap;
    hp->moe_scale_input = on_input;
    if (c->cfg->sliding_window > 0) mxl_family_sliding_from_layer_types(c, c->cfg->sliding_window);
    return MXL_OK;
}

const mxl_decoder_family mxl_family_laguna = {
    .model_type = "laguna", .registry_id = "laguna", .hf_class = "LagunaForCausalLM", .names = &mxl_names_deepseek_moe, .setup = laguna_setup,
    .gguf_arch = "laguna", .convert_check = mxl_family_gguf_not_converted,
};
