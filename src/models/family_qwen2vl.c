/* family_qwen2vl.c - the text decoder of Qwen2-VL and Qwen2.5-VL (transformers
 * modeling_qwen2_vl.py / modeling_qwen2_5_vl.py, Qwen2VLForConditionalGeneration and
 * Qwen2_5_VLForConditionalGeneration): Qwen2's block (q/k/v biases) with M-RoPE, the rotary's
 * frequency pairs split into mrope_section (time, height, width) sections turned by an image
 * row's 3-D position (decoder.h; text rows have three equal positions, so a text-only run is
 * plain RoPE). The released configs keep the text keys at the top level with rope_scaling
 * {"type": "mrope", "mrope_section": [16, 24, 24]}; transformers 5 writes them under text_config
 * with rope_parameters {"rope_type": "default", "mrope_section": ...}. Tensors: model.layers.*
 * and lm_head (released), model.language_model.* (transformers 5) or language_model.model.*
 * (mlx-vlm). Qwen3-VL (modeling_qwen3_vl.py, Qwen3VLForConditionalGeneration) puts Qwen3's block
 * (per-head q / k norms) under the same M-RoPE with the sections interleaved (mrope_interleaved,
 * sections [24, 20, 20] by default) and adds its DeepStack features to the image rows after the
 * first layers (decoder.h's media blocks). Qwen3-VL-MoE (modeling_qwen3_vl_moe.py) adds Qwen3
 * MoE's experts (softmax router, the top k always renormalised, dense MLPs on mlp_only_layers),
 * stacked as mlp.experts.gate_up_proj / down_proj: [E, in, out] in the released checkpoints (which
 * transformers transposes on load), [E, out, in] as transformers saves its own; the layout is
 * told by the first stacked down_proj's shape. The vision towers are models/vlm_qwen2vl.c's.
 * GGUF (llama.cpp qwen2vl / qwen3vl, the text model; the vision tower from the mmproj beside it,
 * models/vlm_qwen2vl.c): the same blocks with NEOX RoPE on unpermuted rows and the sections from
 * rope.dimension_sections ([t, h, w, 0]). */
#include <jansson.h>
#include <string.h>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

mxl_status mxl_family_mrope(mxl_family_ctx *c, const int32_t k_default[3], double default_theta) {
    mxl_family_text_prefix(c);
    json_t *p = json_object_get(c->raw, "rope_parameters");
    const char *where = "rope_parameters";
    if (!json_is_object(p)) p = json_object_get(c->raw, "rope_scaling"), where = "rope_scaling";
    json_t *rp = json_is_object(p) ? json_deep_copy(p) : NULL;
    const json_t *sec = rp ? json_object_get(rp, "mrope_section") : NULL;
    int32_t m[3] = {k_default[0], k_default[1], k_default[2]};
    if (sec && (!json_is_array(sec) || json_array_size(sec) != 3)) {
        json_decref(rp);
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json %s.mrope_section must be a list of 3 integers", c->ck->path, where);
    }
    for (int i = 0; sec && i < 3; i++) {
        const json_t *v = json_array_get(sec, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4096) {
            json_decref(rp);
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json %s.mrope_section must be a list of 3 integers", c->ck->path, where);
        }
        m[i] = (int32_t)json_integer_value(v);
    }
    if (rp) { /* "mrope" is the default RoPE with the sections (transformers renames it) */
        const char *tk = json_object_get(rp, "rope_type") ? "rope_type" : "type";
        const json_t *t = json_object_get(rp, tk);
        if (json_is_string(t) && strcmp(json_string_value(t), "mrope") == 0) json_object_set_new(rp, tk, json_string("default"));
        json_object_del(rp, "mrope_section");
        json_object_del(rp, "mrope_interleaved");
    }
    mxl_status st = mxl_family_rope_from(c, rp, where, default_theta, &c->hp->rope);
    json_decref(rp);
    if (st) return st;
    c->hp->rope_local = c->hp->rope;
    if (c->hp->rope.scaling != MXL_ROPE_SCALING_NONE)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: RoPE scaling with M-RoPE is not supported", c->ck->path);
    memcpy(c->hp->mrope_section, m, sizeof m);
    return MXL_OK;
}

/* The text prefix, M-RoPE and Qwen's sliding layers. */
static mxl_status mrope_setup(mxl_family_ctx *c, const int32_t k_default[3]) {
    mxl_status st = mxl_family_mrope(c, k_default, 1000000.0);
    return st ? st : mxl_family_qwen_sliding(c);
}

static mxl_status qwen2vl_setup(mxl_family_ctx *c) {
    c->hp->qkv_bias = true;
    c->hp->o_bias = false;
    static const int32_t k_default[3] = {16, 24, 24}; /* (transformers' default) */
    return c->gguf ? mxl_family_gguf_mrope(c, k_default) : mrope_setup(c, k_default);
}

static mxl_status qwen3vl_setup(mxl_family_ctx *c) {
    c->hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    c->hp->mrope_interleaved = true;
    static const int32_t k_default[3] = {24, 20, 20}; /* (Qwen3VLTextRotaryEmbedding's default) */
    return c->gguf ? mxl_family_gguf_mrope(c, k_default) : mrope_setup(c, k_default);
}

const mxl_decoder_family mxl_family_qwen2_vl = {
    .model_type = "qwen2_vl", .registry_id = "qwen2_vl", .hf_class = "Qwen2VLForConditionalGeneration", .names = &mxl_names_llama,
    .setup = qwen2vl_setup, .text_config = true, .gaps = "video input", .gguf_arch = "qwen2vl",
    .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_qwen2_5_vl = {
    .model_type = "qwen2_5_vl", .registry_id = "qwen2_5_vl", .hf_class = "Qwen2_5_VLForConditionalGeneration", .names = &mxl_names_llama,
    .setup = qwen2vl_setup, .text_config = true, .gaps = "video input",
};

/* Whether the stacked experts are stored [E, in, out]: the first layer's down_proj [E, F, H]
 * (F != H; else [E, H, F], transformers' own). */
static bool experts_in_out(const mxl_family_ctx *c) {
    const mxl_decoder_hparams *hp = c->hp;
    char name[320];
    for (int64_t l = 0; c->ck->st && l < hp->n_layers; l++) {
        snprintf(name, sizeof name, "%s%lld.mlp.experts.down_proj", c->names->layers, (long long)l);
        const mxl_st_entry *e = mxl_st_model_find(c->ck->st, name);
        if (e) return e->tensor.ndim == 3 && e->tensor.shape[1] == hp->moe_ffn && e->tensor.shape[2] == hp->hidden && hp->moe_ffn != hp->hidden;
    }
    return false;
}

static mxl_status qwen3vl_moe_setup(mxl_family_ctx *c) {
    mxl_status st = qwen3vl_setup(c);
    if (st || (st = mxl_family_moe(c, "moe_intermediate_size", NULL, true, true))) return st;
    c->hp->moe_norm_topk = true; /* (Qwen3VLMoeTextTopKRouter renormalises whatever the config says) */
    c->names->exps_native_transposed = experts_in_out(c);
    return MXL_OK;
}

const mxl_decoder_family mxl_family_qwen3_vl = {
    .model_type = "qwen3_vl", .registry_id = "qwen3_vl", .hf_class = "Qwen3VLForConditionalGeneration", .names = &mxl_names_llama,
    .setup = qwen3vl_setup, .text_config = true, .gaps = "video input", .gguf_arch = "qwen3vl",
    .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_qwen3_vl_moe = {
    .model_type = "qwen3_vl_moe", .registry_id = "qwen3_vl_moe", .hf_class = "Qwen3VLMoeForConditionalGeneration", .names = &mxl_names_qwen_moe,
    .setup = qwen3vl_moe_setup, .text_config = true, .gaps = "video input",
};
