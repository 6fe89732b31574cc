/* family_qwen3_next.c - Qwen3-Next (transformers modeling_qwen3_next.py): a hybrid of Gated
 * DeltaNet layers (recurrent.h MXL_LAYER_GDN, "linear_attention": linear_attn.in_proj_qkvz /
 * in_proj_ba grouped per key head, a width-linear_conv_kernel_dim convolution, dt_bias, A_log, a
 * gated RMSNorm per value head, out_proj) and gated full attention every full_attention_interval
 * layers (layer_types; q_proj's rows per head are [query; gate], the output times sigmoid(gate);
 * per-head QK RMSNorms), each followed by Qwen2 MoE's block (softmax top-k renormalised with
 * norm_topk_prob, default true, a sigmoid-gated shared expert; dense on mlp_only_layers and off
 * decoder_sparse_step). Every RMSNorm but the gated one is zero-centred: y = norm(x) (1 + w).
 * Partial RoPE (partial_rotary_factor of head_dim). mlx-lm's conversions (recognised by
 * their convolution weights in MLX's layout) store those norms' weights as 1 + w (its sanitize).
 * GGUF (llama.cpp's qwen3next): the recurrent layers from attention.recurrent_layers (else
 * full_attention_interval), ssm.group_count / time_step_rank / state_size / inner_size the key
 * heads, value heads, dk and NV dv; per GDN layer attn_qkv [q; k; v] and attn_gate (z) split
 * out of in_proj_qkvz, ssm_ba as it was, ssm_conv1d, ssm_dt.bias, ssm_a (-exp(A_log)), ssm_norm,
 * ssm_out; the zero-centred norms stored as 1 + w; nextn (MTP) blocks appended, not run. */
#include <jansson.h>
#include <string.h>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"


mxl_status mxl_family_gdn_layer_types(mxl_family_ctx *c, json_t *lt, uint8_t *kind) {
    for (int64_t i = 0; i < c->hp->n_layers; i++) { /* (the length was checked by the config parser) */
        const char *s = json_string_value(json_array_get(lt, (size_t)i));
        if (s && strcmp(s, "linear_attention") == 0) kind[i] = MXL_LAYER_GDN;
        else if (s && strcmp(s, "full_attention") == 0) kind[i] = MXL_LAYER_ATTN;
        else
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: layer_types[%lld] = '%s' is neither 'linear_attention' nor 'full_attention'",
                                 c->ck->path, (long long)i, s ? s : "?");
    }
    return MXL_OK;
}

/* The layer kinds: layer_types ("linear_attention" / "full_attention"), else every
 * full_attention_interval-th layer (default 4) attends. */
static mxl_status gdn_layers(mxl_family_ctx *c, uint8_t *kind) {
    const int64_t n = c->hp->n_layers;
    json_t *lt = json_object_get(c->raw, "layer_types");
    if (lt && json_is_array(lt)) return mxl_family_gdn_layer_types(c, lt, kind);
    int64_t every;
    mxl_status st = mxl_family_int(c, "full_attention_interval", 4, &every);
    if (st) return st;
    if (every <= 0) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: full_attention_interval must be positive", c->ck->path);
    for (int64_t i = 0; i < n; i++) kind[i] = (i + 1) % every == 0 ? MXL_LAYER_ATTN : MXL_LAYER_GDN;
    return MXL_OK;
}

/* The Gated DeltaNet sizes (linear_*) and the zero-centred norms, shared with Qwen 3.5. */
mxl_status mxl_family_gdn_common(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    /* (Qwen MoE's attention and MLP names; the Gated DeltaNet's, Qwen3-Next's grouped form) */
    nm->ssm_in = "linear_attn.in_proj_qkvz", nm->ssm_ba = "linear_attn.in_proj_ba", nm->ssm_conv = "linear_attn.conv1d";
    nm->ssm_dt_bias = "linear_attn.dt_bias", nm->ssm_a = "linear_attn.A_log", nm->ssm_norm = "linear_attn.norm";
    nm->ssm_out = "linear_attn.out_proj";
    uint8_t *kind = mxl_family_layer_flags(c);
    if (!kind) return MXL_ERR_NOMEM;
    hp->layer_kind = kind;
    hp->norm_plus_one = true;
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    hp->attn_q_gate = true;
    if ((st = gdn_layers(c, kind)) || (st = mxl_family_int(c, "linear_conv_kernel_dim", 4, &hp->ssm_conv)) ||
        (st = mxl_family_int(c, "linear_num_key_heads", 16, &hp->gdn_k_heads)) || (st = mxl_family_int(c, "linear_num_value_heads", 32, &hp->gdn_v_heads)) ||
        (st = mxl_family_int(c, "linear_key_head_dim", 128, &hp->gdn_k_dim)) || (st = mxl_family_int(c, "linear_value_head_dim", 128, &hp->gdn_v_dim)))
        return st;
    hp->ssm_inner = hp->gdn_v_heads * hp->gdn_v_dim;
    hp->ssm_norm_eps = hp->norm_eps;
    if (hp->act != MXL_ACT_SILU)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported for %s (silu is)", c->ck->path,
                             c->cfg->hidden_act, c->cfg->model_type);
    return mxl_family_rope(c);
}

/* The GGUF's Gated DeltaNet layout and sizes (llama.cpp's qwen3next / qwen35 converters). */
mxl_status mxl_family_gguf_gdn(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    double conv, dk, nk, nv, inner;
    if ((st = mxl_family_gguf_drop_nextn(c))) return st;
    uint8_t *kind = mxl_family_layer_flags(c);
    if (!kind) return MXL_ERR_NOMEM;
    hp->layer_kind = kind;
    if ((st = mxl_family_gguf_recurrent_layers(c, kind, MXL_LAYER_GDN, 4))) return st;
    if ((st = mxl_family_gguf_number(c, "ssm.conv_kernel", 4, &conv)) || (st = mxl_family_gguf_number(c, "ssm.state_size", 0, &dk)) ||
        (st = mxl_family_gguf_number(c, "ssm.group_count", 0, &nk)) || (st = mxl_family_gguf_number(c, "ssm.time_step_rank", 0, &nv)) ||
        (st = mxl_family_gguf_number(c, "ssm.inner_size", 0, &inner)))
        return st;
    if (!(conv >= 1 && conv <= 64 && dk >= 1 && nk >= 1 && nv >= 1 && nv <= 65536 && inner >= nv && inner <= (1 << 24)))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: the ssm.* sizes are missing or out of range", c->ck->path);
    hp->ssm_conv = (int64_t)conv;
    hp->gdn_k_dim = (int64_t)dk;
    hp->gdn_k_heads = (int64_t)nk;
    hp->gdn_v_heads = (int64_t)nv;
    hp->gdn_v_dim = (int64_t)inner / hp->gdn_v_heads;
    hp->ssm_inner = (int64_t)inner;
    hp->ssm_norm_eps = hp->norm_eps;
    hp->gdn_split = true;
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    hp->attn_q_gate = true;
    nm->ssm_in = "attn_qkv", nm->ssm_in_z = "attn_gate", nm->ssm_ba = "ssm_ba", nm->ssm_conv = "ssm_conv1d";
    nm->ssm_dt_bias = "ssm_dt.bias", nm->ssm_a = "ssm_a", nm->ssm_a_neg = true, nm->ssm_norm = "ssm_norm", nm->ssm_out = "ssm_out";
    nm->ffn_norm = "post_attention_norm"; /* (transformers' post_attention_layernorm: the norm before the MLP) */
    return mxl_family_gguf_rope_neox(c);
}

void mxl_family_gdn_mlx_norms(mxl_family_ctx *c, const char *conv) {
    for (int64_t i = 0; c->ck->st && i < c->hp->n_layers; i++) {
        if (c->hp->layer_kind[i] != MXL_LAYER_GDN) continue;
        char name[256];
        snprintf(name, sizeof name, "%s%lld.%s.weight", c->names->layers, (long long)i, conv);
        const mxl_st_entry *e = mxl_st_model_find(c->ck->st, name);
        if (e && e->tensor.ndim == 3 && e->tensor.shape[2] == 1 && e->tensor.shape[1] > 1) c->hp->norm_plus_one = false;
        return;
    }
}

static mxl_status qwen3_next_setup(mxl_family_ctx *c) {
    mxl_status st;
    if (c->gguf) {
        if ((st = mxl_family_gguf_gdn(c))) return st;
        return mxl_family_gguf_moe(c, true);
    }
    if ((st = mxl_family_gdn_common(c))) return st;
    mxl_family_gdn_mlx_norms(c, "linear_attn.conv1d");
    if ((st = mxl_family_moe(c, "moe_intermediate_size", "shared_expert_intermediate_size", true, true))) return st;
    c->hp->shared_expert_gate = c->hp->shared_ffn > 0;
    return MXL_OK;
}

const mxl_decoder_family mxl_family_qwen3_next = {
    .model_type = "qwen3_next", .registry_id = "qwen3_next", .hf_class = "Qwen3NextForCausalLM", .names = &mxl_names_qwen_moe,
    .setup = qwen3_next_setup, .gguf_arch = "qwen3next", .convert_check = mxl_family_gguf_not_converted,
};
