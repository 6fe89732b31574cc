/* family_granitemoehybrid.c - Granite 4 (transformers modeling_granitemoehybrid.py): Mamba-2
 * layers (recurrent.h MXL_LAYER_MAMBA2, mamba.* with mamba_n_heads heads of mamba_d_head,
 * mamba_n_groups groups of B / C, mamba_d_state, a width-mamba_d_conv convolution, the gated
 * RMSNorm per group) and attention layers (layer_types: "mamba" or "linear_attention" against
 * "attention" / "full_attention"; the older layers_block_type), each followed by Granite MoE's
 * experts (block_sparse_moe: router.layer, input_linear [E, 2F, H], output_linear) plus an always
 * added shared MLP (shared_mlp.input_linear [gate; up], output_linear of shared_intermediate_size),
 * or by that MLP alone when num_local_experts is 0 (mlx-lm's conversions split the experts into
 * block_sparse_moe.switch_mlp.*). Granite's multipliers (embedding, residual,
 * attention, logits_scaling); RoPE only with position_embedding_type "rope" (NoPE otherwise, as
 * the released Granite 4 checkpoints).
 * GGUF (llama.cpp's granitehybrid): the Mamba-2 layers are those whose head_count_kv entry is 0,
 * llama.cpp's ssm.* keys and ssm_* tensors, Granite's scales, RoPE unless rope.scaling.finetuned
 * is false (the hybrids: NoPE), the experts split into ffn_{gate,up}_exps and the shared MLP into
 * ffn_{gate,up,down}_shexp (ffn_gate / up / down without experts). */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .ffn_norm = "post_attention_layernorm", .gate_up = "shared_mlp.input_linear",
    .down = "shared_mlp.output_linear", .moe_router = "block_sparse_moe.router.layer",
    .exps_gate = "block_sparse_moe.switch_mlp.gate_proj", .exps_up = "block_sparse_moe.switch_mlp.up_proj",
    .exps_down = "block_sparse_moe.switch_mlp.down_proj", .exps_gate_up = "block_sparse_moe.input_linear",
    .exps_fused_down = "block_sparse_moe.output_linear", .sh_gate_up = "shared_mlp.input_linear", .sh_down = "shared_mlp.output_linear",
    .ssm_in = "mamba.in_proj", .ssm_conv = "mamba.conv1d", .ssm_dt_bias = "mamba.dt_bias", .ssm_a = "mamba.A_log",
    .ssm_d = "mamba.D", .ssm_norm = "mamba.norm", .ssm_out = "mamba.out_proj",
};

static mxl_status layer_kinds(mxl_family_ctx *c, uint8_t *kind) {
    json_t *lt = json_object_get(c->raw, "layer_types");
    if (!lt || json_is_null(lt)) lt = json_object_get(c->raw, "layers_block_type");
    for (int64_t i = 0; i < c->hp->n_layers; i++) {
        const char *s = lt && json_is_array(lt) ? json_string_value(json_array_get(lt, (size_t)i)) : "mamba";
        if (s && (strcmp(s, "mamba") == 0 || strcmp(s, "linear_attention") == 0)) kind[i] = MXL_LAYER_MAMBA2;
        else if (s && (strcmp(s, "attention") == 0 || strcmp(s, "full_attention") == 0)) kind[i] = MXL_LAYER_ATTN;
        else
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: layer_types[%lld] = '%s' is neither a mamba nor an attention layer",
                                 c->ck->path, (long long)i, s ? s : "?");
    }
    if (lt && json_is_array(lt) && json_array_size(lt) != (size_t)c->hp->n_layers)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: layer_types has %zu entries for %lld layers", c->ck->path, json_array_size(lt),
                             (long long)c->hp->n_layers);
    return MXL_OK;
}

static mxl_status granitemoehybrid_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    if ((st = mxl_family_granite_setup(c))) return st;
    uint8_t *kind = mxl_family_layer_flags(c), *nope = mxl_family_layer_flags(c);
    if (!kind || !nope) return MXL_ERR_NOMEM;
    hp->layer_kind = kind;
    if (c->gguf) {
        if ((st = mxl_family_gguf_kv_kinds(c, kind, MXL_LAYER_MAMBA2)) || (st = mxl_family_gguf_ssm(c, MXL_LAYER_MAMBA2)) ||
            (st = mxl_family_gguf_moe(c, true)))
            return st;
        if (hp->n_experts > 0) {
            hp->ffn = 0; /* (every layer sparse) */
        } else { /* the shared MLP alone: its width */
            double w;
            if ((st = mxl_family_gguf_number(c, "expert_shared_feed_forward_length", 0, &w))) return st;
            if (w > 0) hp->ffn = (int64_t)w;
        }
        return MXL_OK;
    }
    int64_t head_dim, experts, shared;
    double expand;
    if ((st = layer_kinds(c, kind)) || (st = mxl_family_int(c, "mamba_d_conv", 4, &hp->ssm_conv)) ||
        (st = mxl_family_int(c, "mamba_d_state", 256, &hp->ssm_state)) || (st = mxl_family_int(c, "mamba_n_heads", 128, &hp->ssm_heads)) ||
        (st = mxl_family_int(c, "mamba_n_groups", 1, &hp->ssm_groups)) || (st = mxl_family_double(c, "mamba_expand", 2.0, &expand)) ||
        (st = mxl_family_bool(c, "mamba_conv_bias", true, &hp->ssm_conv_bias)) || (st = mxl_family_bool(c, "mamba_proj_bias", false, &hp->ssm_proj_bias)) ||
        (st = mxl_family_int(c, "num_local_experts", 8, &experts)) || (st = mxl_family_int(c, "shared_intermediate_size", 1024, &shared)))
        return st;
    hp->ssm_inner = (int64_t)(expand * (double)hp->hidden);
    json_t *hd = json_object_get(c->raw, "mamba_d_head");
    if (hd && json_is_integer(hd)) {
        if ((st = mxl_family_int(c, "mamba_d_head", 0, &head_dim))) return st;
        if (hp->ssm_heads <= 0 || head_dim * hp->ssm_heads != hp->ssm_inner)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: mamba_n_heads %lld x mamba_d_head %lld does not equal mamba_expand x hidden_size (%lld)",
                                 c->ck->path, (long long)hp->ssm_heads, (long long)head_dim, (long long)hp->ssm_inner);
    }
    hp->ssm_norm_eps = hp->norm_eps;
    if ((st = mxl_family_ssm_time_step_limit(c))) return st;
    /* positions: RoPE only when position_embedding_type says "rope" */
    json_t *pe = json_object_get(c->raw, "position_embedding_type");
    if (!(pe && json_is_string(pe) && strcmp(json_string_value(pe), "rope") == 0)) {
        memset(nope, 1, (size_t)hp->n_layers);
        hp->layer_no_rope = nope;
    }
    if (experts <= 0) { /* the shared MLP alone, as a dense [gate; up] MLP */
        hp->ffn = shared;
        return MXL_OK;
    }
    if ((st = mxl_family_moe(c, NULL, "shared_intermediate_size", true, false))) return st;
    hp->ffn = 0; /* (every layer sparse) */
    return MXL_OK;
}

const mxl_decoder_family mxl_family_granitemoehybrid = {
    .model_type = "granitemoehybrid", .registry_id = "granitemoehybrid", .hf_class = "GraniteMoeHybridForCausalLM",
    .names = &k_names, .setup = granitemoehybrid_setup, .gguf_arch = "granitehybrid", .gguf_permuted_qk = true,
    .convert_check = mxl_family_gguf_not_converted,
};
