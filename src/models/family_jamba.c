/* family_jamba.c - Jamba (transformers modeling_jamba.py): Mamba layers (recurrent.h
 * MXL_LAYER_MAMBA, mamba.*, with RMSNorms weighted by dt_layernorm / b_layernorm / c_layernorm on
 * the time step, B and C, eps rms_norm_eps) and, every attn_layer_period-th layer from
 * attn_layer_offset, attention without positions; every layer then an MLP (pre_ff_layernorm,
 * feed_forward.*) that is, every expert_layer_period-th layer from expert_layer_offset, a mixture
 * of num_experts (feed_forward.router, softmax top num_experts_per_tok, the weights not
 * renormalised). Final norm model.final_layernorm.
 * GGUF (llama.cpp's jamba): the Mamba layers are those whose head_count_kv entry is 0, the ssm.*
 * keys and ssm_* tensors with ssm_dt_norm / ssm_b_norm / ssm_c_norm, the experts where
 * ffn_gate_inp is. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.final_layernorm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .ffn_norm = "pre_ff_layernorm", .gate = "feed_forward.gate_proj", .up = "feed_forward.up_proj",
    .down = "feed_forward.down_proj", .moe_router = "feed_forward.router", .experts = "feed_forward.experts.",
    .expert_gate = "gate_proj", .expert_up = "up_proj", .expert_down = "down_proj",
    .exps_gate = "feed_forward.switch_mlp.gate_proj", .exps_up = "feed_forward.switch_mlp.up_proj",
    .exps_down = "feed_forward.switch_mlp.down_proj",
    .ssm_in = "mamba.in_proj", .ssm_conv = "mamba.conv1d", .ssm_x = "mamba.x_proj", .ssm_dt = "mamba.dt_proj",
    .ssm_a = "mamba.A_log", .ssm_d = "mamba.D", .ssm_out = "mamba.out_proj", .ssm_dt_norm = "mamba.dt_layernorm",
    .ssm_b_norm = "mamba.b_layernorm", .ssm_c_norm = "mamba.c_layernorm",
};

static mxl_status jamba_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    if (c->gguf) {
        uint8_t *kind = mxl_family_layer_flags(c), *nope = mxl_family_layer_flags(c);
        if (!kind || !nope) return MXL_ERR_NOMEM;
        memset(nope, 1, (size_t)hp->n_layers);
        hp->layer_kind = kind, hp->layer_no_rope = nope;
        if ((st = mxl_family_gguf_kv_kinds(c, kind, MXL_LAYER_MAMBA)) || (st = mxl_family_gguf_ssm(c, MXL_LAYER_MAMBA))) return st;
        c->names->ssm_dt_norm = "ssm_dt_norm", c->names->ssm_b_norm = "ssm_b_norm", c->names->ssm_c_norm = "ssm_c_norm";
        hp->ssm_bcdt_eps = hp->norm_eps;
        return mxl_family_gguf_moe(c, false);
    }
    int64_t ap, ao, ep, eo, expand;
    if ((st = mxl_family_int(c, "attn_layer_period", 8, &ap)) || (st = mxl_family_int(c, "attn_layer_offset", 4, &ao)) ||
        (st = mxl_family_int(c, "expert_layer_period", 2, &ep)) || (st = mxl_family_int(c, "expert_layer_offset", 1, &eo)) ||
        (st = mxl_family_int(c, "mamba_d_state", 16, &hp->ssm_state)) || (st = mxl_family_int(c, "mamba_d_conv", 4, &hp->ssm_conv)) ||
        (st = mxl_family_int(c, "mamba_expand", 2, &expand)) || (st = mxl_family_bool(c, "mamba_conv_bias", true, &hp->ssm_conv_bias)) ||
        (st = mxl_family_bool(c, "mamba_proj_bias", false, &hp->ssm_proj_bias)))
        return st;
    if (ap <= 0 || ep <= 0)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: attn_layer_period and expert_layer_period must be positive", c->ck->path);
    uint8_t *kind = mxl_family_layer_flags(c), *nope = mxl_family_layer_flags(c), *moe = mxl_family_layer_flags(c);
    if (!kind || !nope || !moe) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < hp->n_layers; i++) {
        kind[i] = i % ap == ao ? MXL_LAYER_ATTN : MXL_LAYER_MAMBA;
        moe[i] = i % ep == eo;
        nope[i] = 1;
    }
    hp->layer_kind = kind, hp->layer_no_rope = nope;
    hp->ssm_inner = expand * hp->hidden;
    json_t *r = json_object_get(c->raw, "mamba_dt_rank");
    if (!r || json_is_null(r) || (json_is_string(r) && strcmp(json_string_value(r), "auto") == 0)) hp->ssm_dt_rank = (hp->hidden + 15) / 16;
    else if ((st = mxl_family_int(c, "mamba_dt_rank", 0, &hp->ssm_dt_rank))) return st;
    hp->ssm_bcdt_eps = hp->norm_eps;
    if (hp->act != MXL_ACT_SILU)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported for jamba (silu is)", c->ck->path,
                             c->cfg->hidden_act);
    if (c->cfg->num_experts > 1) {
        if ((st = mxl_family_moe(c, NULL, NULL, false, false))) return st;
        hp->layer_is_moe = moe;
    } else {
        hp->n_experts = 0;
    }
    return MXL_OK;
}

const mxl_decoder_family mxl_family_jamba = {
    .model_type = "jamba", .registry_id = "jamba", .hf_class = "JambaForCausalLM", .names = &k_names, .setup = jamba_setup,
    .gguf_arch = "jamba", .convert_check = mxl_family_gguf_not_converted,
};
