/* family_minimax.c - MiniMax-Text-01 (transformers modeling_minimax.py): lightning attention
 * (recurrent.h MXL_LAYER_LIGHTNING, "linear_attention": self_attn.qkv_proj, silu, a per-head
 * decaying K^T V state, the RMSNorm self_attn.norm times sigmoid(self_attn.output_gate), then
 * self_attn.out_proj) and grouped-query attention with RoPE ("full_attention"), each followed by
 * Mixtral's sparse MoE block (block_sparse_moe.gate, softmax top num_experts_per_tok
 * renormalised, experts.N.w1 / w3 / w2). layer_types says which layer is which; without it every
 * even layer attends. The blocks are post-norm residuals (decoder.h residual_from_norm):
 * h = input_layernorm(x), x = alpha h + beta mixer(h) with the full or linear attention's
 * alpha / beta factors, then h = post_attention_layernorm(x), x = mlp_alpha h + mlp_beta moe(h).
 * The decay of head h in layer l is exp(-slope), slope = (2^(-8 / heads))^(h + 1) *
 * (1 - l / (layers - 1 + 1e-5) + 1e-5).
 * GGUF (llama.cpp's minimax-01): the lightning layers from attention.recurrent_layers, else all but
 * every full_attention_interval-th (default 8); per lightning layer attn_qkv, attn_gate,
 * attn_norm_2 (with the model's RMSNorm epsilon) and attn_output; one residual_scale for every
 * alpha, every beta 1 (what llama.cpp runs; its converter refuses other configs); NEOX RoPE over
 * rope.dimension_count; ffn_gate_inp + ffn_*_exps experts, softmax, renormalised. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* The GGUF's layers, residual weights and names. */
static mxl_status minimax_gguf(mxl_family_ctx *c, uint8_t *kind) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    double scale;
    char key[192];
    if ((st = mxl_family_gguf_recurrent_layers(c, kind, MXL_LAYER_LIGHTNING, 8)) ||
        (st = mxl_family_gguf_number(c, "residual_scale", NAN, &scale)))
        return st;
    if (!isfinite(scale))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' is missing", c->ck->path,
                             mxl_family_gguf_key(c, "residual_scale", key, sizeof key));
    hp->residual_from_norm = true;
    hp->res_alpha_attn = hp->res_alpha_rec = hp->res_alpha_mlp = (float)scale;
    hp->res_beta_attn = hp->res_beta_rec = hp->res_beta_mlp = 1.0f;
    hp->ssm_heads = hp->n_heads;
    hp->ssm_inner = hp->n_heads * hp->head_dim;
    hp->ssm_norm_eps = hp->norm_eps;
    nm->ssm_in = "attn_qkv", nm->ssm_in_z = "attn_gate", nm->ssm_norm = "attn_norm_2", nm->ssm_out = "attn_output";
    if ((st = mxl_family_gguf_rope_neox(c))) return st;
    return mxl_family_gguf_moe(c, true);
}

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .ffn_norm = "post_attention_layernorm", .moe_router = "block_sparse_moe.gate",
    .experts = "block_sparse_moe.experts.", .expert_gate = "w1", .expert_up = "w3", .expert_down = "w2",
    .exps_gate = "block_sparse_moe.switch_mlp.gate_proj", .exps_up = "block_sparse_moe.switch_mlp.up_proj",
    .exps_down = "block_sparse_moe.switch_mlp.down_proj",
    .ssm_in = "self_attn.qkv_proj", .ssm_in_z = "self_attn.output_gate", .ssm_norm = "self_attn.norm", .ssm_out = "self_attn.out_proj",
};

/* The layer kinds from layer_types, else transformers' default (even layers attend). */
static mxl_status minimax_layers(mxl_family_ctx *c, uint8_t *kind) {
    const int64_t n = c->hp->n_layers;
    json_t *lt = json_object_get(c->raw, "layer_types");
    if (lt && !json_is_null(lt) && !json_is_array(lt)) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: 'layer_types' must be an array", c->ck->path);
    for (int64_t i = 0; i < n; i++) {
        if (!lt || json_is_null(lt)) {
            kind[i] = i % 2 == 0 ? MXL_LAYER_ATTN : MXL_LAYER_LIGHTNING;
            continue;
        }
        const char *s = json_string_value(json_array_get(lt, (size_t)i)); /* (the length was checked by the config parser) */
        if (s && strcmp(s, "linear_attention") == 0) kind[i] = MXL_LAYER_LIGHTNING;
        else if (s && strcmp(s, "full_attention") == 0) kind[i] = MXL_LAYER_ATTN;
        else
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: layer_types[%lld] = '%s' is neither 'linear_attention' nor 'full_attention'",
                                 c->ck->path, (long long)i, s ? s : "?");
    }
    return MXL_OK;
}

static mxl_status minimax_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    uint8_t *kind = mxl_family_layer_flags(c);
    if (!kind) return MXL_ERR_NOMEM;
    hp->layer_kind = kind;
    if (c->gguf) return minimax_gguf(c, kind);
    if ((st = minimax_layers(c, kind))) return st;
    double f[6];
    static const char *const keys[6] = {"full_attn_alpha_factor", "full_attn_beta_factor", "linear_attn_alpha_factor",
                                        "linear_attn_beta_factor", "mlp_alpha_factor", "mlp_beta_factor"};
    for (int i = 0; i < 6; i++)
        if ((st = mxl_family_double(c, keys[i], 1.0, &f[i]))) return st;
    hp->residual_from_norm = true;
    hp->res_alpha_attn = (float)f[0], hp->res_beta_attn = (float)f[1];
    hp->res_alpha_rec = (float)f[2], hp->res_beta_rec = (float)f[3];
    hp->res_alpha_mlp = (float)f[4], hp->res_beta_mlp = (float)f[5];
    /* the lightning attention: all query heads, each of head_dim, its own RMSNorm's default eps */
    hp->ssm_heads = hp->n_heads;
    hp->ssm_inner = hp->n_heads * hp->head_dim;
    hp->ssm_norm_eps = 1e-6f;
    if (hp->act != MXL_ACT_SILU)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported for minimax (silu is)", c->ck->path,
                             c->cfg->hidden_act);
    if ((st = mxl_family_rope(c))) return st;
    return mxl_family_moe(c, NULL, NULL, true, false);
}

const mxl_decoder_family mxl_family_minimax = {
    .model_type = "minimax", .registry_id = "minimax", .hf_class = "MiniMaxForCausalLM", .names = &k_names, .setup = minimax_setup,
    .gguf_arch = "minimax-01", .convert_check = mxl_family_gguf_not_converted,
};
