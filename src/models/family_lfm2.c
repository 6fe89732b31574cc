/* family_lfm2.c - LFM2 (transformers modeling_lfm2.py, Liquid AI): a hybrid of gated short
 * convolutions (recurrent.h MXL_LAYER_SHORTCONV, conv_L_cache wide) and grouped-query attention
 * with per-head QK RMSNorms (q_layernorm / k_layernorm), each followed by a SwiGLU MLP
 * (feed_forward.w1 / w3 / w2) whose width transformers derives from intermediate_size
 * (block_auto_adjust_ff_dim: 2/3 of it, times block_ffn_dim_multiplier, rounded up to
 * block_multiple_of). layer_types says which layers attend ("full_attention") and which convolve
 * ("conv"); older configs list full_attn_idxs. The final norm is called embedding_norm.
 * GGUF (llama.cpp's lfm2): the convolution layers are those whose attention.head_count_kv entry is
 * 0, shortconv.l_cache the width, blk.N.shortconv.{in_proj,conv,out_proj}, token_embd_norm the
 * final norm; feed_forward_length is the MLP's width already; NEOX RoPE (no permuted rows). */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.embedding_norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "operator_norm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.out_proj", .q_norm = "self_attn.q_layernorm", .k_norm = "self_attn.k_layernorm",
    .ffn_norm = "ffn_norm", .gate = "feed_forward.w1", .up = "feed_forward.w3", .down = "feed_forward.w2",
    .ssm_in = "conv.in_proj", .ssm_conv = "conv.conv", .ssm_out = "conv.out_proj",
};

static const mxl_decoder_names k_moe_names = {
    .embed = "model.embed_tokens", .final_norm = "model.embedding_norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "operator_norm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.out_proj", .q_norm = "self_attn.q_layernorm", .k_norm = "self_attn.k_layernorm",
    .ffn_norm = "ffn_norm", .gate = "feed_forward.w1", .up = "feed_forward.w3", .down = "feed_forward.w2",
    .ssm_in = "conv.in_proj", .ssm_conv = "conv.conv", .ssm_out = "conv.out_proj",
    .moe_router = "feed_forward.gate", .moe_router_bias = "feed_forward.expert_bias", .experts = "feed_forward.experts.",
    .expert_gate = "w1", .expert_up = "w3", .expert_down = "w2", .exps_gate = "feed_forward.switch_mlp.gate_proj",
    .exps_up = "feed_forward.switch_mlp.up_proj", .exps_down = "feed_forward.switch_mlp.down_proj",
};

/* The layer kinds from layer_types, else full_attn_idxs, else attention everywhere. */
static mxl_status lfm2_layers(mxl_family_ctx *c, uint8_t *kind) {
    const int64_t n = c->hp->n_layers;
    json_t *lt = json_object_get(c->raw, "layer_types"), *idx = json_object_get(c->raw, "full_attn_idxs");
    if (lt && json_is_array(lt)) {
        for (int64_t i = 0; i < n; i++) { /* (the length was checked by the config parser) */
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (s && strcmp(s, "conv") == 0) kind[i] = MXL_LAYER_SHORTCONV;
            else if (s && strcmp(s, "full_attention") == 0) kind[i] = MXL_LAYER_ATTN;
            else
                return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: layer_types[%lld] = '%s' is neither 'conv' nor 'full_attention'",
                                     c->ck->path, (long long)i, s ? s : "?");
        }
    } else if (idx && json_is_array(idx)) {
        for (int64_t i = 0; i < n; i++) kind[i] = MXL_LAYER_SHORTCONV;
        for (size_t j = 0; j < json_array_size(idx); j++) {
            json_t *v = json_array_get(idx, j);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n)
                return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: full_attn_idxs[%zu] is not a layer index below %lld", c->ck->path, j,
                                     (long long)n);
            kind[json_integer_value(v)] = MXL_LAYER_ATTN;
        }
    } else if (lt && !json_is_null(lt)) {
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: 'layer_types' must be an array", c->ck->path);
    }
    return MXL_OK;
}

static mxl_status lfm2_gguf(mxl_family_ctx *c, uint8_t *kind) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    double k;
    if ((st = mxl_family_gguf_kv_kinds(c, kind, MXL_LAYER_SHORTCONV))) return st;
    if ((st = mxl_family_gguf_number(c, "shortconv.l_cache", 3, &k))) return st;
    hp->ssm_conv = (int64_t)k;
    for (int64_t i = 0; i < hp->n_layers; i++) /* (conv_bias: the first convolution layer's tensors say) */
        if (kind[i] == MXL_LAYER_SHORTCONV) {
            char name[96];
            snprintf(name, sizeof name, "blk.%lld.shortconv.conv.bias", (long long)i);
            hp->ssm_conv_bias = hp->ssm_proj_bias = mxl_gguf_find_tensor(c->ck->gguf, name) != NULL;
            break;
        }
    nm->final_norm = "token_embd_norm";
    nm->ssm_in = "shortconv.in_proj", nm->ssm_conv = "shortconv.conv", nm->ssm_out = "shortconv.out_proj";
    return mxl_family_gguf_rope_neox(c);
}

/* What LFM2 and LFM2-MoE share: the layer kinds, the convolution, QK-norms, norm_eps, RoPE. */
static mxl_status lfm2_common(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool bias;
    int64_t k;
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    if (!isnan(c->cfg->layer_norm_eps)) hp->norm_eps = (float)c->cfg->layer_norm_eps; /* (norm_eps) */
    uint8_t *kind = mxl_family_layer_flags(c);
    if (!kind) return MXL_ERR_NOMEM;
    hp->layer_kind = kind;
    if (c->gguf) return lfm2_gguf(c, kind);
    if ((st = lfm2_layers(c, kind)) || (st = mxl_family_int(c, "conv_L_cache", 3, &k)) || (st = mxl_family_bool(c, "conv_bias", false, &bias)))
        return st;
    hp->ssm_conv = k;
    hp->ssm_conv_bias = hp->ssm_proj_bias = bias;
    return mxl_family_rope(c);
}

static mxl_status lfm2_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool adjust;
    int64_t ff, multiple;
    double mult;
    if ((st = lfm2_common(c)) || c->gguf) return st;
    if ((st = mxl_family_int(c, "block_ff_dim", hp->ffn, &ff)) || (st = mxl_family_bool(c, "block_auto_adjust_ff_dim", true, &adjust)) ||
        (st = mxl_family_int(c, "block_multiple_of", 256, &multiple)) || (st = mxl_family_double(c, "block_ffn_dim_multiplier", 1.0, &mult)))
        return st;
    if (adjust && ff > 0) { /* Lfm2MLP's width */
        ff = (int64_t)(2 * ff / 3);
        if (json_object_get(c->raw, "block_ffn_dim_multiplier") == NULL || !json_is_null(json_object_get(c->raw, "block_ffn_dim_multiplier"))) {
            if (multiple <= 0) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: block_multiple_of must be positive", c->ck->path);
            ff = (int64_t)(mult * (double)ff);
            ff = multiple * ((ff + multiple - 1) / multiple);
        }
    }
    hp->ffn = ff;
    return MXL_OK;
}

/* LFM2-MoE: the first num_dense_layers keep a dense MLP of intermediate_size; the others route
 * through experts of moe_intermediate_size by sigmoid scores (the selection adds expert_bias when
 * use_expert_bias), the top k renormalised (norm_topk_prob) and scaled (routed_scaling_factor). */
static mxl_status lfm2_moe_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool bias;
    if ((st = lfm2_common(c))) return st;
    if (c->gguf) {
        if ((st = mxl_family_gguf_moe(c, true)) || (st = mxl_family_gguf_moe_sigmoid(c))) return st;
        hp->moe_router = MXL_MOE_SIGMOID;
        hp->moe_norm_topk = true;
        hp->moe_sigmoid_no_bias = hp->layer_is_moe == NULL; /* (set below from the first sparse layer) */
        for (int64_t i = 0; hp->layer_is_moe && i < hp->n_layers; i++)
            if (hp->layer_is_moe[i]) {
                char name[96];
                snprintf(name, sizeof name, "blk.%lld.%s", (long long)i, c->names->moe_router_bias);
                hp->moe_sigmoid_no_bias = mxl_gguf_find_tensor(c->ck->gguf, name) == NULL;
                break;
            }
        return MXL_OK;
    }
    if ((st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, false)) || (st = mxl_family_moe_first_dense(c, "num_dense_layers")) ||
        (st = mxl_family_moe_scale_groups(c)) || (st = mxl_family_bool(c, "use_expert_bias", true, &bias)))
        return st;
    hp->moe_router = MXL_MOE_SIGMOID;
    hp->moe_sigmoid_no_bias = !bias;
    /* mlx-lm's conversions name the dense MLP gate_proj / up_proj / down_proj */
    for (int64_t i = 0; i < hp->n_layers; i++) {
        char name[96];
        snprintf(name, sizeof name, "model.layers.%lld.feed_forward.gate_proj.weight", (long long)i);
        if (mxl_st_model_find(c->ck->st, name)) {
            c->names->gate = "feed_forward.gate_proj", c->names->up = "feed_forward.up_proj", c->names->down = "feed_forward.down_proj";
            break;
        }
    }
    return MXL_OK;
}

const mxl_decoder_family mxl_family_lfm2 = {
    .model_type = "lfm2", .registry_id = "lfm2", .hf_class = "Lfm2ForCausalLM", .names = &k_names,
    .setup = lfm2_setup, .gguf_arch = "lfm2", .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_lfm2_moe = {
    .model_type = "lfm2_moe", .registry_id = "lfm2_moe", .hf_class = "Lfm2MoeForCausalLM", .names = &k_moe_names,
    .setup = lfm2_moe_setup, .gguf_arch = "lfm2moe", .convert_check = mxl_family_gguf_not_converted,
};
