/* family_llama4.c - Llama 4's text decoder (transformers modeling_llama4.py, model_type
 * llama4_text): Llama's pre-norm block where
 *  - the layers no_rope_layers marks 1 rotate (complex pairs: GPT-J style), the others use no
 *    positions (NoPE; by default every no_rope_layer_interval-th, 4); the rotating layers attend in
 *    chunks of attention_chunk_size positions (layer_types "chunked_attention"), the NoPE ones to
 *    everything;
 *  - use_qk_norm: an L2 norm (an RMSNorm without weight, eps rms_norm_eps) over each rotated query
 *    and key head, on rotating layers only;
 *  - attn_temperature_tuning: NoPE layers' queries times 1 + attn_scale * ln(1 + floor((p + 1) /
 *    floor_scale));
 *  - the layers moe_layers lists (else every interleave_moe_layer_step-th) are a sparse MoE block:
 *    the top k router logits through a sigmoid weigh each expert's INPUT row, the outputs summed,
 *    plus a shared expert, all of intermediate_size; the others a dense MLP of
 *    intermediate_size_mlp.
 * transformers' own checkpoints stack the experts [E, in, out] (feed_forward.experts.gate_up_proj,
 * gate then up along out; down_proj): they are bound as owned transposed copies. */
#include <jansson.h>
#include <string.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* which layers rotate (and attend in chunks) */
static mxl_status positions(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    uint8_t *chunked = mxl_family_layer_flags(c);
    int64_t chunk;
    if (!chunked) return MXL_ERR_NOMEM;
    if ((st = mxl_family_nope_layers(c)) || (st = mxl_family_int(c, "attention_chunk_size", 0, &chunk))) return st;
    json_t *types = json_object_get(c->raw, "layer_types");
    if (types && !json_is_null(types) && (!json_is_array(types) || (int64_t)json_array_size(types) != hp->n_layers))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'layer_types' must name one type per layer", c->ck->path);
    for (int64_t i = 0; i < hp->n_layers; i++) {
        const char *t = types && json_is_array(types) ? json_string_value(json_array_get(types, (size_t)i)) : NULL;
        chunked[i] = t ? strcmp(t, "chunked_attention") == 0 : !hp->layer_no_rope[i];
    }
    hp->layer_is_chunked = chunked;
    hp->attn_chunk = chunk;
    return MXL_OK;
}

/* the sparse layers: moe_layers, else every interleave_moe_layer_step-th from step - 1 */
static mxl_status moe_layers(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    uint8_t *f = mxl_family_layer_flags(c);
    if (!f) return MXL_ERR_NOMEM;
    json_t *v = json_object_get(c->raw, "moe_layers");
    if (v && !json_is_null(v)) {
        size_t k;
        json_t *e;
        if (!json_is_array(v)) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'moe_layers' must be a list of layer indices", c->ck->path);
        json_array_foreach(v, k, e) {
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= hp->n_layers)
                return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'moe_layers' holds an entry that is not a layer index", c->ck->path);
            f[json_integer_value(e)] = 1;
        }
    } else {
        int64_t step;
        mxl_status st = mxl_family_int(c, "interleave_moe_layer_step", 1, &step);
        if (st) return st;
        if (step < 1) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'interleave_moe_layer_step' must be at least 1", c->ck->path);
        for (int64_t i = step - 1; i < hp->n_layers; i += step) f[i] = 1;
    }
    hp->layer_is_moe = f;
    return MXL_OK;
}

/* llama.cpp llama4 (src/models/llama4.cpp): attention.sliding_window 0 means every layer full and
 * rotating; otherwise chunks of 8192, every 4th layer (attention.sliding_window_pattern) NoPE with
 * the temperature (floor 8192, scale 0.1, offset 1), whatever the source config said; the L2
 * QK-norm unless the model has 128 experts; the sparse layers those with a router. */
static mxl_status llama4_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double swa = -1;
    if ((st = mxl_family_gguf_rope_norm(c)) || (st = mxl_family_gguf_moe(c, false)) ||
        (st = mxl_family_gguf_number(c, "attention.sliding_window", -1, &swa)))
        return st;
    hp->moe_router = MXL_MOE_SIGMOID;
    hp->moe_sigmoid_no_bias = hp->moe_scale_input = true;
    if (hp->n_experts != 128) {
        hp->qk_norm_kind = MXL_QK_NORM_HEAD;
        hp->qk_norm_after_rope = hp->qk_norm_no_weight = hp->qk_norm_rope_only = true;
    }
    if (swa == 0) return MXL_OK;
    uint8_t *nope = mxl_family_layer_flags(c), *chunked = mxl_family_layer_flags(c);
    if (!nope || !chunked) return MXL_ERR_NOMEM;
    if ((st = mxl_family_sliding_pattern(c, 4, 8192))) return st; /* the chunked layers, in llama.cpp's pattern key */
    for (int64_t i = 0; i < hp->n_layers; i++) {
        chunked[i] = hp->layer_is_sliding[i];
        nope[i] = !chunked[i];
    }
    hp->layer_is_sliding = NULL;
    hp->sliding_window = 0;
    hp->layer_no_rope = nope;
    hp->layer_is_chunked = chunked;
    hp->attn_chunk = 8192;
    hp->q_temp_beta = 0.1f;
    hp->q_temp_orig = 8192;
    hp->q_temp_offset = 1;
    hp->q_temp_nope_only = true;
    return MXL_OK;
}

static mxl_status llama4_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    if (c->gguf) return llama4_gguf(c);
    bool qk, temp;
    int64_t dense_ffn, floor_scale;
    double attn_scale;
    nm->gate = "feed_forward.gate_proj", nm->up = "feed_forward.up_proj", nm->down = "feed_forward.down_proj";
    nm->moe_router = "feed_forward.router";
    nm->experts = "feed_forward.experts.";
    nm->expert_gate = "gate_proj", nm->expert_up = "up_proj", nm->expert_down = "down_proj";
    nm->exps_gate = "feed_forward.switch_mlp.gate_proj", nm->exps_up = "feed_forward.switch_mlp.up_proj";
    nm->exps_down = "feed_forward.switch_mlp.down_proj";
    nm->sh_gate = "feed_forward.shared_expert.gate_proj", nm->sh_up = "feed_forward.shared_expert.up_proj";
    nm->sh_down = "feed_forward.shared_expert.down_proj";
    nm->exps_native_transposed = true;
    if ((st = mxl_family_rope_interleaved(c)) || (st = positions(c)) || (st = mxl_family_bool(c, "use_qk_norm", true, &qk)) ||
        (st = mxl_family_bool(c, "attn_temperature_tuning", true, &temp)) || (st = mxl_family_int(c, "floor_scale", 8192, &floor_scale)) ||
        (st = mxl_family_double(c, "attn_scale", 0.1, &attn_scale)) ||
        (st = mxl_family_int(c, "intermediate_size_mlp", hp->ffn, &dense_ffn)) ||
        (st = mxl_family_moe(c, NULL, NULL, false, false)) || (st = moe_layers(c)))
        return st;
    if (qk) {
        hp->qk_norm_kind = MXL_QK_NORM_HEAD;
        hp->qk_norm_after_rope = hp->qk_norm_no_weight = hp->qk_norm_rope_only = true;
    }
    if (temp && attn_scale > 0) {
        if (floor_scale < 1) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'floor_scale' must be at least 1", c->ck->path);
        hp->q_temp_beta = (float)attn_scale;
        hp->q_temp_orig = floor_scale;
        hp->q_temp_offset = 1;
        hp->q_temp_nope_only = true;
    }
    hp->moe_router = MXL_MOE_SIGMOID; /* sigmoid of the top k logits, not renormalised */
    hp->moe_sigmoid_no_bias = true;
    hp->moe_norm_topk = false;
    hp->moe_scale_input = true;
    hp->shared_ffn = hp->moe_ffn;
    hp->ffn = dense_ffn;
    return MXL_OK;
}

const mxl_decoder_family mxl_family_llama4_text = {
    .model_type = "llama4_text", .registry_id = "llama4", .hf_class = "Llama4ForCausalLM", .names = &mxl_names_llama,
    .setup = llama4_setup, .gguf_arch = "llama4", .convert_check = mxl_family_gguf_not_converted,
};
