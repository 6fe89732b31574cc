/* family_falcon_h1.c - Falcon-H1 (transformers modeling_falcon_h1.py): every layer runs
 * attention and a Mamba-2 mixer side by side on the same RMSNorm'd input (decoder.h
 * parallel_ssm), ssm_out_multiplier * mamba(h) + attention_out_multiplier * attn(h *
 * attention_in_multiplier), then a SwiGLU MLP with mlp_multipliers (on the gate before the
 * activation, and on the output). The muP multipliers: embedding_multiplier, lm_head_multiplier,
 * key_multiplier (on the keys), ssm_in_multiplier (on the mixer's input) and ssm_multipliers
 * (on in_proj's z, x, B, C and dt columns). The mixer's width is mamba_d_ssm (else mamba_expand x
 * hidden_size); its gated RMSNorm only with mamba_rms_norm (norm after the gate; before it is
 * refused by name), else y * silu(z) goes to out_proj. attention_in_multiplier and key_multiplier
 * fold into the attention's scale (q k scaled by m^2 key_multiplier) and its output (v by m),
 * which holds without attention biases. mlx-lm's conversions have the multipliers it applies
 * folded into their weights, and it applies no others: those run as mlx-lm runs them.
 * GGUF (llama.cpp's falcon-h1): every multiplier folded into the weights by the converter (keys
 * included), attention and Mamba-2 in every layer, the gated norm where ssm_norm is, NEOX RoPE
 * (rows not permuted), the pre-MLP norm stored as "blk.N.ffn_norm". */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "io/safetensors.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.final_layernorm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .ffn_norm = "pre_ff_layernorm", .gate = "feed_forward.gate_proj", .up = "feed_forward.up_proj",
    .down = "feed_forward.down_proj", .ssm_in = "mamba.in_proj", .ssm_conv = "mamba.conv1d", .ssm_dt_bias = "mamba.dt_bias",
    .ssm_a = "mamba.A_log", .ssm_d = "mamba.D", .ssm_norm = "mamba.norm", .ssm_out = "mamba.out_proj",
};

/* A list of n numbers at config.json `key` into v (absent or null: all ones). */
static mxl_status multipliers(mxl_family_ctx *c, const char *key, int n, double *v) {
    for (int i = 0; i < n; i++) v[i] = 1.0;
    json_t *a = json_object_get(c->raw, key);
    if (!a || json_is_null(a)) return MXL_OK;
    if (!json_is_array(a) || json_array_size(a) != (size_t)n)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' must be a list of %d numbers", c->ck->path, key, n);
    for (int i = 0; i < n; i++) {
        json_t *x = json_array_get(a, (size_t)i);
        if (!json_is_number(x)) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json '%s' must be a list of %d numbers", c->ck->path, key, n);
        v[i] = json_number_value(x);
    }
    return MXL_OK;
}

/* mlx-lm's conversion: its convolution weights in MLX's layout [C, K, 1] (transformers': [C, 1, K]) */
static bool mlx_lm_folded(mxl_family_ctx *c) {
    const mxl_st_entry *e = mxl_st_model_find(c->ck->st, "model.layers.0.mamba.conv1d.weight");
    return e && e->tensor.ndim == 3 && e->tensor.shape[2] == 1 && e->tensor.shape[1] > 1;
}

static mxl_status falcon_h1_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    uint8_t *kind = mxl_family_layer_flags(c); /* (attention everywhere, the mixer beside it) */
    if (!kind) return MXL_ERR_NOMEM;
    hp->layer_kind = kind;
    hp->parallel_ssm = true;
    if (c->gguf) {
        if ((st = mxl_family_gguf_ssm(c, MXL_LAYER_MAMBA2))) return st;
        hp->ssm_no_norm = !mxl_family_gguf_has_layer0(c, "ssm_norm", ".weight");
        return mxl_family_gguf_rope_neox(c);
    }
    double expand, em, lm, km, ain, aout, sin_m, sout, ssm_m[5], mlp_m[2];
    int64_t d_ssm, head_dim = 0;
    bool rms_norm, before_gate, proj_bias, projectors_bias;
    if ((st = mxl_family_int(c, "mamba_d_state", 256, &hp->ssm_state)) || (st = mxl_family_int(c, "mamba_d_conv", 4, &hp->ssm_conv)) ||
        (st = mxl_family_int(c, "mamba_n_heads", 128, &hp->ssm_heads)) || (st = mxl_family_int(c, "mamba_n_groups", 1, &hp->ssm_groups)) ||
        (st = mxl_family_double(c, "mamba_expand", 2.0, &expand)) || (st = mxl_family_int(c, "mamba_d_ssm", 0, &d_ssm)) ||
        (st = mxl_family_bool(c, "mamba_conv_bias", true, &hp->ssm_conv_bias)) || (st = mxl_family_bool(c, "mamba_proj_bias", false, &proj_bias)) ||
        (st = mxl_family_bool(c, "projectors_bias", false, &projectors_bias)) || (st = mxl_family_bool(c, "mamba_rms_norm", false, &rms_norm)) ||
        (st = mxl_family_bool(c, "mamba_norm_before_gate", true, &before_gate)) ||
        (st = mxl_family_double(c, "embedding_multiplier", 1.0, &em)) || (st = mxl_family_double(c, "lm_head_multiplier", 1.0, &lm)) ||
        (st = mxl_family_double(c, "key_multiplier", 1.0, &km)) || (st = mxl_family_double(c, "attention_in_multiplier", 1.0, &ain)) ||
        (st = mxl_family_double(c, "attention_out_multiplier", 1.0, &aout)) || (st = mxl_family_double(c, "ssm_in_multiplier", 1.0, &sin_m)) ||
        (st = mxl_family_double(c, "ssm_out_multiplier", 1.0, &sout)) || (st = multipliers(c, "ssm_multipliers", 5, ssm_m)) ||
        (st = multipliers(c, "mlp_multipliers", 2, mlp_m)) || (st = mxl_family_ssm_time_step_limit(c)))
        return st;
    hp->ssm_inner = d_ssm > 0 ? d_ssm : (int64_t)(expand * (double)hp->hidden);
    json_t *hd = json_object_get(c->raw, "mamba_d_head");
    if (hd && json_is_integer(hd) && (st = mxl_family_int(c, "mamba_d_head", 0, &head_dim))) return st;
    if (head_dim > 0 && head_dim * hp->ssm_heads != hp->ssm_inner)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: mamba_n_heads %lld x mamba_d_head %lld does not equal the mixer's width %lld", c->ck->path,
                             (long long)hp->ssm_heads, (long long)head_dim, (long long)hp->ssm_inner);
    if (proj_bias != projectors_bias)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: mamba_proj_bias != projectors_bias is not supported (in_proj and out_proj biases together)",
                             c->ck->path);
    if (rms_norm && before_gate)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'mamba_norm_before_gate' = true with 'mamba_rms_norm' is not supported",
                             c->ck->path);
    if (hp->qkv_bias && ain != 1.0)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: attention biases with attention_in_multiplier != 1 are not supported", c->ck->path);
    if (hp->act != MXL_ACT_SILU)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported for falcon_h1 (silu is)", c->ck->path,
                             c->cfg->hidden_act);
    hp->ssm_proj_bias = proj_bias;
    hp->ssm_no_norm = !rms_norm;
    hp->ssm_norm_eps = hp->norm_eps;
    hp->ssm_in_mult = (float)sin_m;
    hp->ssm_out_mult = (float)sout;
    hp->embed_scale = (float)em;
    hp->logit_scale = (float)lm;
    hp->attn_scale = (float)(km * ain * ain) / sqrtf((float)hp->head_dim);
    hp->attn_out_mult = (float)(aout * ain);
    hp->mlp_gate_mult = (float)mlp_m[0];
    hp->mlp_down_mult = (float)mlp_m[1];
    /* the muP vector over in_proj's columns: z, x (the mixer's width each), B, C (groups x state
     * each), dt (one per head) */
    const int64_t DI = hp->ssm_inner, GN = hp->ssm_groups * hp->ssm_state, IN = 2 * DI + 2 * GN + hp->ssm_heads;
    if (DI <= 0 || GN <= 0 || hp->ssm_heads <= 0 || IN > (INT64_C(1) << 26))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: the mixer's sizes are missing or out of range", c->ck->path);
    float *scale = mxl_arena_alloc(c->arena, (size_t)IN * sizeof(float), 64);
    if (!scale) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < IN; i++)
        scale[i] = (float)ssm_m[i < DI ? 0 : i < 2 * DI ? 1 : i < 2 * DI + GN ? 2 : i < 2 * DI + 2 * GN ? 3 : 4];
    hp->ssm_in_scale = scale;
    if (mlx_lm_folded(c)) {
        /* mlx-lm's conversion multiplied the weights by the multipliers it applies (embedding, lm
         * head, q / k by attention_in, o_proj, out_proj, in_proj by ssm_in and the muP vector, the
         * MLP's gate and down) and runs none of them, nor key_multiplier or v's attention_in:
         * as it does, so its conversions give its outputs (a tied head scales by lm / embedding) */
        const bool tied = c->cfg->tie_word_embeddings;
        hp->embed_scale = 1.0f;
        hp->logit_scale = tied ? (float)(lm / em) : 1.0f;
        hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
        hp->attn_out_mult = hp->ssm_out_mult = hp->ssm_in_mult = hp->mlp_gate_mult = hp->mlp_down_mult = 1.0f;
        hp->ssm_in_scale = NULL;
    }
    return mxl_family_rope(c);
}

const mxl_decoder_family mxl_family_falcon_h1 = {
    .model_type = "falcon_h1", .registry_id = "falcon_h1", .hf_class = "FalconH1ForCausalLM", .names = &k_names,
    .setup = falcon_h1_setup, .gguf_arch = "falcon-h1", .convert_check = mxl_family_gguf_not_converted,
};
