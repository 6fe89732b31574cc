/* family_ernie4_5_moe.c - ERNIE 4.5 MoE (transformers modeling_ernie4_5_moe.py, the 21B-A3B and
 * 300B-A47B): ERNIE 4.5's attention (interleaved RoPE, family_ernie4_5.c) with a sparse MoE block
 * on the layers moe_layer_interval / moe_layer_start_index / moe_layer_end_index choose, dense
 * MLPs of intermediate_size elsewhere. Router mlp.gate [moe_num_experts, hidden] in f32: softmax,
 * the top moe_k chosen by probability plus a selection-only correction bias
 * (mlp.moe_statics.e_score_correction_bias [1, experts]), their plain probabilities divided by
 * max(sum, moe_norm_min) (mlx-lm's conversions drop the bias and choose by probability alone;
 * so does the loader when the tensor is absent); experts of moe_intermediate_size and
 * moe_num_shared_experts shared ones
 * (mlp.shared_experts.*). use_bias (biases on the shared and dense MLPs too) is refused: the
 * released checkpoints set none.
 * GGUF (llama.cpp ernie4_5-moe): ERNIE 4.5's adjacent-pair RoPE (family_ernie4_5.c), ffn_gate_inp,
 * exp_probs_b.bias, stacked experts and shexp tensors on the layers holding a router
 * (leading_dense_block_count, interleave_moe_layer_step), renormalised as llama.cpp's graph does
 * (without moe_norm_min's floor, which only matters for sums below 1e-12). */
#include <jansson.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

static mxl_status ernie4_5_moe_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool bias;
    int64_t interval, start, end;
    double norm_min;
    if (c->gguf) { /* llama.cpp ernie4_5-moe: softmax, renormalised, the selection bias */
        mxl_family_gguf_attn_biases(c);
        if ((st = mxl_family_gguf_rope_norm(c)) || (st = mxl_family_gguf_moe(c, true))) return st;
        hp->moe_select_bias = true;
        return MXL_OK;
    }
    c->names->moe_router_bias = "mlp.moe_statics.e_score_correction_bias";
    if ((st = mxl_family_bool(c, "use_bias", false, &bias))) return st;
    if (bias) return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'use_bias' = true is not supported for model_type 'ernie4_5_moe'", c->ck->path);
    if ((st = mxl_family_rope_interleaved(c))) return st;
    if ((st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, false)) || (st = mxl_family_int(c, "moe_layer_interval", 1, &interval)) ||
        (st = mxl_family_int(c, "moe_layer_start_index", 1, &start)) || (st = mxl_family_moe_shared_count(c, "moe_num_shared_experts")) ||
        (st = mxl_family_double(c, "moe_norm_min", 1e-12, &norm_min)))
        return st;
    /* moe_layer_end_index: -1 (the default) is the last layer */
    end = hp->n_layers - 1;
    json_t *e = c->raw ? json_object_get(c->raw, "moe_layer_end_index") : NULL;
    if (e && json_is_integer(e) && json_integer_value(e) >= 0) end = json_integer_value(e);
    if (interval < 1 || !(norm_min >= 0))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'moe_layer_interval' or 'moe_norm_min' is out of range", c->ck->path);
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < hp->n_layers; i++) f[i] = (i + 1) % interval == 0 && i >= start && i <= end;
    hp->layer_is_moe = f;
    hp->moe_select_bias = true;
    hp->moe_norm_min = (float)norm_min;
    return MXL_OK;
}

const mxl_decoder_family mxl_family_ernie4_5_moe = {
    .model_type = "ernie4_5_moe", .registry_id = "ernie4_5_moe", .hf_class = "Ernie4_5_MoeForCausalLM", .names = &mxl_names_deepseek_moe,
    .setup = ernie4_5_moe_setup, .gguf_arch = "ernie4_5-moe", .convert_check = mxl_family_gguf_not_converted,
};
