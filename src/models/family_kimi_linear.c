/* family_kimi_linear.c - Kimi Linear (transformers modeling_kimi_linear.py, Moonshot AI): Kimi
 * Delta Attention layers ("linear_attention"; recurrent.h MXL_LAYER_GDN with gdn_kda:
 * self_attn.q_proj / k_proj / v_proj each with its short convolution q_conv1d / k_conv1d /
 * v_conv1d, a decay per key channel from the forget gate f_b(f_a(h)) + dt_bias and A_log, beta =
 * sigmoid(b_proj(h)), the per-head RMSNorm o_norm times sigmoid(g_b(g_a(h))), o_proj) beside
 * multi-head latent attention without positions ("full_attention": DeepSeek's MLA, models/mla.h,
 * no RoPE on any part). The MLP is dense on the first first_k_dense_replace layers (or where
 * mlp_layer_types says "dense") and DeepSeek V3's experts elsewhere: a sigmoid router with a
 * correction bias, num_expert_group groups, the top k renormalised (moe_renormalize) times
 * routed_scaling_factor, num_shared_experts shared experts of moe_intermediate_size.
 * The released config.json names: num_experts, num_experts_per_token, num_shared_experts,
 * num_expert_group, moe_renormalize and the linear_attn_config object (head_dim, num_heads,
 * short_conv_kernel_size, full_attn_layers / kda_layers counted from 1); transformers' own:
 * linear_head_dim, linear_num_heads, linear_conv_kernel_dim, layer_types, n_shared_experts,
 * n_group, norm_topk_prob. Saved by transformers, the MLP of every layer (dense ones too) sits
 * under block_sparse_moe.; the released files name the dense ones mlp.; mlx-lm's conversions put
 * the experts under mlp. too (mlp.gate, mlp.e_score_correction_bias, mlp.switch_mlp.*,
 * mlp.shared_experts.*) and the convolutions at self_attn.q_conv.conv ([C, K, 1]).
 * GGUF (llama.cpp's kimi-linear): the KDA layers are those whose attention.head_count_kv entry is
 * 0, with kda.head_dim, ssm.conv_kernel and attention.head_count heads; per KDA layer attn_q /
 * attn_k / attn_v, ssm_conv1d_q / _k / _v, ssm_f_a / ssm_f_b, ssm_beta, ssm_a (-exp(A_log)),
 * ssm_dt.bias, ssm_g_a / ssm_g_b, ssm_norm and attn_output; the MLA layers as deepseek2's (attn_q,
 * attn_kv_a_mqa, attn_kv_a_norm, attn_k_b / attn_v_b); leading_dense_block_count dense MLPs, then
 * ffn_*_exps experts, the exp_probs_b correction bias and ffn_*_shexp shared experts. llama.cpp
 * always renormalises the top k (times expert_weights_scale) and has no expert groups here. */
#include <jansson.h>
#include <string.h>

#include "io/safetensors.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .o = "self_attn.o_proj", .ffn_norm = "post_attention_layernorm",
    .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj",
    .moe_router = "block_sparse_moe.gate", .moe_router_bias = "block_sparse_moe.gate.e_score_correction_bias",
    .experts = "block_sparse_moe.experts.", .expert_gate = "w1", .expert_up = "w3", .expert_down = "w2",
    .exps_gate = "block_sparse_moe.switch_mlp.gate_proj", .exps_up = "block_sparse_moe.switch_mlp.up_proj",
    .exps_down = "block_sparse_moe.switch_mlp.down_proj", .sh_gate = "block_sparse_moe.shared_experts.gate_proj",
    .sh_up = "block_sparse_moe.shared_experts.up_proj", .sh_down = "block_sparse_moe.shared_experts.down_proj",
    .ssm_in = "self_attn.q_proj", .ssm_k = "self_attn.k_proj", .ssm_v = "self_attn.v_proj", .ssm_conv = "self_attn.q_conv1d",
    .ssm_conv_k = "self_attn.k_conv1d", .ssm_conv_v = "self_attn.v_conv1d", .ssm_ba = "self_attn.b_proj",
    .ssm_f_a = "self_attn.f_a_proj", .ssm_f_b = "self_attn.f_b_proj", .ssm_g_a = "self_attn.g_a_proj", .ssm_g_b = "self_attn.g_b_proj",
    .ssm_dt_bias = "self_attn.dt_bias", .ssm_a = "self_attn.A_log", .ssm_norm = "self_attn.o_norm", .ssm_out = "self_attn.o_proj",
};

/* The checkpoint has model.layers.<i>.<rest> (safetensors; false for GGUF). */
static bool has(const mxl_family_ctx *c, int64_t i, const char *rest) {
    char name[160];
    snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)i, rest);
    return c->ck->st && mxl_st_model_find(c->ck->st, name) != NULL;
}

/* An integer from linear_attn_config's key when that object has it, else config.json's own key. */
static mxl_status lin_int(mxl_family_ctx *c, json_t *lac, const char *sub, const char *key, int64_t dflt, int64_t *out) {
    json_t *v = lac ? json_object_get(lac, sub) : NULL;
    if (!v) return mxl_family_int(c, key, dflt, out);
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json linear_attn_config.%s must be a positive integer", c->ck->path, sub);
    *out = json_integer_value(v);
    return MXL_OK;
}

/* The layer kinds: layer_types, else linear_attn_config's 1-based full_attn_layers / kda_layers,
 * else transformers' default (every fourth layer from layer 4 attends). */
static mxl_status kimi_layers(mxl_family_ctx *c, json_t *lac, uint8_t *kind) {
    const int64_t n = c->hp->n_layers;
    json_t *lt = json_object_get(c->raw, "layer_types");
    json_t *full = lac ? json_object_get(lac, "full_attn_layers") : NULL, *kda = lac ? json_object_get(lac, "kda_layers") : NULL;
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt)) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: 'layer_types' must be an array", c->ck->path);
        return mxl_family_gdn_layer_types(c, lt, kind);
    }
    if (json_is_array(full) && json_is_array(kda)) {
        memset(kind, 0xff, (size_t)n);
        json_t *lists[2] = {full, kda};
        for (int l = 0; l < 2; l++)
            for (size_t j = 0; j < json_array_size(lists[l]); j++) {
                json_t *v = json_array_get(lists[l], j);
                if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > n)
                    return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: linear_attn_config.%s[%zu] is not a layer number from 1 to %lld", c->ck->path,
                                         l ? "kda_layers" : "full_attn_layers", j, (long long)n);
                kind[json_integer_value(v) - 1] = l ? MXL_LAYER_GDN : MXL_LAYER_ATTN;
            }
        for (int64_t i = 0; i < n; i++)
            if (kind[i] == 0xff)
                return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: linear_attn_config names layer %lld in neither full_attn_layers nor kda_layers",
                                     c->ck->path, (long long)i + 1);
        return MXL_OK;
    }
    for (int64_t i = 0; i < n; i++) kind[i] = i && i % 4 == 0 ? MXL_LAYER_ATTN : MXL_LAYER_GDN;
    return MXL_OK;
}

/* The GGUF's layers, sizes and names (llama.cpp's kimi-linear converter). */
static mxl_status kimi_gguf(mxl_family_ctx *c, uint8_t *kind) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    double dim, conv, gating;
    char key[192];
    if ((st = mxl_family_gguf_kv_kinds(c, kind, MXL_LAYER_GDN)) || (st = mxl_family_gguf_number(c, "kda.head_dim", 0, &dim)) ||
        (st = mxl_family_gguf_number(c, "ssm.conv_kernel", 0, &conv)) || (st = mxl_family_gguf_number(c, "expert_gating_func", 0, &gating)))
        return st;
    if (!(dim >= 1 && dim <= 4096 && conv >= 1 && conv <= 64))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' or the convolution width is missing or out of range", c->ck->path,
                             mxl_family_gguf_key(c, "kda.head_dim", key, sizeof key));
    hp->gdn_kda = true;
    hp->gdn_k_heads = hp->gdn_v_heads = hp->n_heads;
    hp->gdn_k_dim = hp->gdn_v_dim = (int64_t)dim;
    hp->ssm_inner = hp->n_heads * hp->gdn_k_dim;
    hp->ssm_conv = (int64_t)conv;
    hp->ssm_norm_eps = hp->norm_eps;
    hp->o_bias = hp->qkv_bias = false;
    nm->ssm_in = "attn_q", nm->ssm_k = "attn_k", nm->ssm_v = "attn_v", nm->ssm_conv = "ssm_conv1d_q", nm->ssm_conv_k = "ssm_conv1d_k";
    nm->ssm_conv_v = "ssm_conv1d_v", nm->ssm_ba = "ssm_beta", nm->ssm_f_a = "ssm_f_a", nm->ssm_f_b = "ssm_f_b", nm->ssm_g_a = "ssm_g_a";
    nm->ssm_g_b = "ssm_g_b", nm->ssm_dt_bias = "ssm_dt.bias", nm->ssm_a = "ssm_a", nm->ssm_a_neg = true, nm->ssm_norm = "ssm_norm";
    nm->ssm_out = "attn_output";
    if ((st = mxl_family_gguf_mla(c)) || (st = mxl_family_gguf_moe(c, true))) return st;
    if (hp->n_experts == 0) return MXL_OK;
    if (gating != 2) /* (llama_expert_gating_func_type: 2 is sigmoid) */
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: metadata key '%s' = %g is not supported (2, sigmoid, is)", c->ck->path,
                             mxl_family_gguf_key(c, "expert_gating_func", key, sizeof key), gating);
    if ((st = mxl_family_gguf_moe_sigmoid(c))) return st;
    hp->moe_norm_topk = true;
    hp->moe_n_group = hp->moe_topk_group = 1;
    return MXL_OK;
}

static mxl_status kimi_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    json_t *lac = json_object_get(c->raw, "linear_attn_config");
    if (lac && !json_is_object(lac)) lac = NULL;
    uint8_t *kind = mxl_family_layer_flags(c), *nope = mxl_family_layer_flags(c);
    if (!kind || !nope) return MXL_ERR_NOMEM;
    hp->layer_kind = kind;
    memset(nope, 1, (size_t)hp->n_layers); /* the attention layers have no positions */
    hp->layer_no_rope = nope;
    if (c->gguf) return kimi_gguf(c, kind);
    int64_t heads, dim;
    if ((st = kimi_layers(c, lac, kind)) || (st = lin_int(c, lac, "head_dim", "linear_head_dim", 128, &dim)) ||
        (st = lin_int(c, lac, "num_heads", "linear_num_heads", 32, &heads)) ||
        (st = lin_int(c, lac, "short_conv_kernel_size", "linear_conv_kernel_dim", 4, &hp->ssm_conv)))
        return st;
    hp->gdn_kda = true;
    hp->gdn_k_heads = hp->gdn_v_heads = heads;
    hp->gdn_k_dim = hp->gdn_v_dim = dim;
    hp->ssm_inner = heads * dim;
    hp->ssm_norm_eps = hp->norm_eps;
    if (hp->act != MXL_ACT_SILU)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported for kimi_linear (silu is)", c->ck->path,
                             c->cfg->hidden_act);
    json_t *fn = json_object_get(c->raw, "moe_router_activation_func");
    if (fn && !json_is_null(fn) && !(json_is_string(fn) && strcmp(json_string_value(fn), "sigmoid") == 0))
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'moe_router_activation_func' is not supported (sigmoid is)", c->ck->path);
    /* the MLA attention (its RoPE read but never applied: every layer is NoPE) */
    if ((st = mxl_family_mla(c, false))) return st;
    /* the experts, under either spelling of their keys */
    const char *shared_key = json_object_get(c->raw, "num_shared_experts") ? "num_shared_experts" : "n_shared_experts";
    if ((st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, false)) || (st = mxl_family_moe_layer_types(c, 1)) ||
        (st = mxl_family_moe_shared_count(c, shared_key)) || (st = mxl_family_moe_sigmoid(c)))
        return st;
    if (json_object_get(c->raw, "moe_renormalize") && (st = mxl_family_bool(c, "moe_renormalize", true, &hp->moe_norm_topk))) return st;
    if (json_object_get(c->raw, "num_expert_group") && (st = mxl_family_int(c, "num_expert_group", 1, &hp->moe_n_group))) return st;
    /* the spellings of the layout: the first layer of each kind says */
    mxl_decoder_names *nm = c->names;
    for (int64_t i = 0; i < hp->n_layers; i++)
        if (!hp->layer_is_moe[i]) { /* the dense MLP: mlp., or block_sparse_moe. as transformers saves it */
            if (!has(c, i, "mlp.gate_proj.weight") && has(c, i, "block_sparse_moe.gate_proj.weight"))
                nm->gate = "block_sparse_moe.gate_proj", nm->up = "block_sparse_moe.up_proj", nm->down = "block_sparse_moe.down_proj";
            break;
        }
    for (int64_t i = 0; i < hp->n_layers; i++)
        if (hp->layer_is_moe[i]) { /* mlx-lm's experts */
            if (has(c, i, "mlp.gate.weight")) {
                nm->moe_router = "mlp.gate", nm->moe_router_bias = "mlp.e_score_correction_bias", nm->experts = "mlp.experts.";
                nm->exps_gate = "mlp.switch_mlp.gate_proj", nm->exps_up = "mlp.switch_mlp.up_proj", nm->exps_down = "mlp.switch_mlp.down_proj";
                nm->sh_gate = "mlp.shared_experts.gate_proj", nm->sh_up = "mlp.shared_experts.up_proj", nm->sh_down = "mlp.shared_experts.down_proj";
            }
            break;
        }
    for (int64_t i = 0; i < hp->n_layers; i++)
        if (kind[i] == MXL_LAYER_GDN) { /* mlx-lm's convolutions */
            if (has(c, i, "self_attn.q_conv.conv.weight"))
                nm->ssm_conv = "self_attn.q_conv.conv", nm->ssm_conv_k = "self_attn.k_conv.conv", nm->ssm_conv_v = "self_attn.v_conv.conv";
            break;
        }
    return MXL_OK;
}

const mxl_decoder_family mxl_family_kimi_linear = {
    .model_type = "kimi_linear", .registry_id = "kimi_linear", .hf_class = "KimiLinearForCausalLM", .names = &k_names, .setup = kimi_setup,
    .gguf_arch = "kimi-linear", .convert_check = mxl_family_gguf_not_converted,
};
