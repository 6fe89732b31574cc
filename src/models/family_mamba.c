/* family_mamba.c - the attention-free state-space families (recurrent.h): Mamba (transformers
 * modeling_mamba.py), Falcon Mamba (Mamba with weightless RMSNorms on the time step, B and C
 * after x_proj, mixer_rms_eps) and Mamba-2 (modeling_mamba2.py: SSD heads, grouped B / C, a gated
 * RMSNorm before out_proj). Every block is RMSNorm, mixer, residual; there is no MLP and no
 * position encoding. Names: backbone.embeddings, backbone.layers.N.norm / mixer.*,
 * backbone.norm_f.
 * GGUF (llama.cpp's mamba and mamba2 architectures; Falcon Mamba is mamba with ssm.dt_b_c_rms):
 * ssm.conv_kernel, ssm.inner_size, ssm.state_size, ssm.time_step_rank (Mamba-2: the head count),
 * ssm.group_count; tensors blk.N.ssm_in / ssm_conv1d / ssm_x / ssm_dt / ssm_a (-exp(A_log)
 * already) / ssm_d / ssm_norm / ssm_out, Mamba-2's dt_bias as ssm_dt.bias. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_mamba_names = {
    .embed = "backbone.embeddings", .final_norm = "backbone.norm_f", .lm_head = "lm_head", .layers = "backbone.layers.",
    .attn_norm = "norm", .ssm_in = "mixer.in_proj", .ssm_conv = "mixer.conv1d", .ssm_x = "mixer.x_proj", .ssm_dt = "mixer.dt_proj",
    .ssm_a = "mixer.A_log", .ssm_d = "mixer.D", .ssm_out = "mixer.out_proj",
};

static const mxl_decoder_names k_mamba2_names = {
    .embed = "backbone.embeddings", .final_norm = "backbone.norm_f", .lm_head = "lm_head", .layers = "backbone.layers.",
    .attn_norm = "norm", .ssm_in = "mixer.in_proj", .ssm_conv = "mixer.conv1d", .ssm_dt_bias = "mixer.dt_bias",
    .ssm_a = "mixer.A_log", .ssm_d = "mixer.D", .ssm_norm = "mixer.norm", .ssm_out = "mixer.out_proj",
};

mxl_status mxl_family_gguf_ssm(mxl_family_ctx *c, uint8_t k) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    double conv, inner, state, rank, groups;
    bool bcdt;
    if ((st = mxl_family_gguf_number(c, "ssm.conv_kernel", 4, &conv)) || (st = mxl_family_gguf_number(c, "ssm.inner_size", 0, &inner)) ||
        (st = mxl_family_gguf_number(c, "ssm.state_size", 0, &state)) || (st = mxl_family_gguf_number(c, "ssm.time_step_rank", 0, &rank)) ||
        (st = mxl_family_gguf_number(c, "ssm.group_count", 1, &groups)) || (st = mxl_family_gguf_bool(c, "ssm.dt_b_c_rms", false, &bcdt)))
        return st;
    if (!(conv >= 1 && conv <= 64 && inner >= 1 && inner <= (1 << 20) && state >= 1 && state <= 4096 && rank >= 1 && rank <= inner &&
          groups >= 1 && groups <= inner))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: the ssm.* sizes are missing or out of range", c->ck->path);
    hp->ssm_conv = (int64_t)conv;
    hp->ssm_inner = (int64_t)inner;
    hp->ssm_state = (int64_t)state;
    if (k == MXL_LAYER_MAMBA) hp->ssm_dt_rank = (int64_t)rank;
    else hp->ssm_heads = (int64_t)rank;
    hp->ssm_groups = (int64_t)groups;
    hp->ssm_bcdt_eps = bcdt ? 1e-6f : 0.0f; /* (transformers' mixer_rms_eps default; the file has none) */
    hp->ssm_conv_bias = mxl_family_gguf_has_layer0(c, "ssm_conv1d", ".bias");
    hp->ssm_proj_bias = mxl_family_gguf_has_layer0(c, "ssm_in", ".bias");
    nm->ssm_in = "ssm_in", nm->ssm_conv = "ssm_conv1d", nm->ssm_x = "ssm_x", nm->ssm_dt = "ssm_dt", nm->ssm_dt_bias = "ssm_dt.bias";
    nm->ssm_a = "ssm_a", nm->ssm_a_neg = true, nm->ssm_d = "ssm_d", nm->ssm_norm = "ssm_norm", nm->ssm_out = "ssm_out";
    hp->ssm_norm_eps = hp->norm_eps;
    hp->ssm_dt_min = 0.0f;
    hp->ssm_dt_max = INFINITY;
    return MXL_OK;
}

/* Every layer of kind k, no MLP; the keys both Mamba configs share (or the GGUF's). */
static mxl_status ssm_common(mxl_family_ctx *c, mxl_layer_kind k) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    uint8_t *kind = mxl_family_layer_flags(c);
    if (!kind) return MXL_ERR_NOMEM;
    memset(kind, k, (size_t)hp->n_layers);
    hp->layer_kind = kind;
    hp->no_mlp = true;
    if (c->gguf) return mxl_family_gguf_ssm(c, k);
    if (!isnan(c->cfg->layer_norm_eps)) hp->norm_eps = (float)c->cfg->layer_norm_eps; /* layer_norm_epsilon */
    if (hp->act != MXL_ACT_SILU)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported for %s (silu is)", c->ck->path,
                             c->cfg->hidden_act, c->cfg->model_type);
    if ((st = mxl_family_int(c, "conv_kernel", 4, &hp->ssm_conv)) || (st = mxl_family_int(c, "state_size", 16, &hp->ssm_state)) ||
        (st = mxl_family_bool(c, "use_conv_bias", true, &hp->ssm_conv_bias)) || (st = mxl_family_bool(c, "use_bias", false, &hp->ssm_proj_bias)))
        return st;
    /* time_step_rank: "auto" is ceil(hidden / 16) */
    json_t *r = json_object_get(c->raw, "time_step_rank");
    if (!r || json_is_null(r) || (json_is_string(r) && strcmp(json_string_value(r), "auto") == 0)) hp->ssm_dt_rank = (hp->hidden + 15) / 16;
    else if ((st = mxl_family_int(c, "time_step_rank", 0, &hp->ssm_dt_rank))) return st;
    double expand;
    if ((st = mxl_family_double(c, "expand", 2.0, &expand))) return st;
    hp->ssm_inner = (int64_t)(expand * (double)hp->hidden);
    return MXL_OK;
}

static mxl_status mamba_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st = ssm_common(c, MXL_LAYER_MAMBA);
    if (st || c->gguf) return st;
    if (c->cfg->intermediate_size > 0) hp->ssm_inner = c->cfg->intermediate_size;
    if (strcmp(c->cfg->model_type, "falcon_mamba") == 0) {
        double eps;
        if ((st = mxl_family_double(c, "mixer_rms_eps", 1e-6, &eps))) return st;
        hp->ssm_bcdt_eps = (float)eps;
    }
    return MXL_OK;
}

/* A number, or transformers' JSON spelling of a non-finite one ({"__float__": "Infinity"}). */
static bool limit_value(json_t *v, double *out) {
    if (json_is_number(v)) return (*out = json_number_value(v)), true;
    const char *f = json_is_object(v) ? json_string_value(json_object_get(v, "__float__")) : NULL;
    if (f && strcmp(f, "Infinity") == 0) return (*out = INFINITY), true;
    if (f && strcmp(f, "-Infinity") == 0) return (*out = -INFINITY), true;
    return false;
}

mxl_status mxl_family_ssm_time_step_limit(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    hp->ssm_dt_min = 0.0f;
    hp->ssm_dt_max = INFINITY;
    json_t *lim = json_object_get(c->raw, "time_step_limit");
    if (!lim || json_is_null(lim)) return MXL_OK;
    double v[2];
    if (!json_is_array(lim) || json_array_size(lim) != 2 || !limit_value(json_array_get(lim, 0), &v[0]) ||
        !limit_value(json_array_get(lim, 1), &v[1]))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: time_step_limit must be a list of two numbers", c->ck->path);
    hp->ssm_dt_min = (float)v[0];
    hp->ssm_dt_max = (float)v[1];
    return MXL_OK;
}

static mxl_status mamba2_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st = ssm_common(c, MXL_LAYER_MAMBA2);
    if (st || c->gguf) return st;
    int64_t head_dim;
    if ((st = mxl_family_int(c, "num_heads", 128, &hp->ssm_heads)) || (st = mxl_family_int(c, "head_dim", 64, &head_dim)) ||
        (st = mxl_family_int(c, "n_groups", 8, &hp->ssm_groups)) || (st = mxl_family_int(c, "state_size", 128, &hp->ssm_state)))
        return st;
    if (hp->ssm_heads * head_dim != hp->ssm_inner)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: num_heads %lld x head_dim %lld does not equal expand x hidden_size (%lld)", c->ck->path,
                             (long long)hp->ssm_heads, (long long)head_dim, (long long)hp->ssm_inner);
    hp->ssm_norm_eps = hp->norm_eps;
    return mxl_family_ssm_time_step_limit(c);
}

const mxl_decoder_family mxl_family_mamba = {
    .model_type = "mamba", .registry_id = "mamba", .hf_class = "MambaForCausalLM", .names = &k_mamba_names, .setup = mamba_setup,
    .gguf_arch = "mamba", .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_falcon_mamba = {
    .model_type = "falcon_mamba", .registry_id = "mamba", .hf_class = "FalconMambaForCausalLM", .names = &k_mamba_names,
    .setup = mamba_setup,
};

const mxl_decoder_family mxl_family_mamba2 = {
    .model_type = "mamba2", .registry_id = "mamba2", .hf_class = "Mamba2ForCausalLM", .names = &k_mamba2_names, .setup = mamba2_setup,
    .gguf_arch = "mamba2", .convert_check = mxl_family_gguf_not_converted,
};
