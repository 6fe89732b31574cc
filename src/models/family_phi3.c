/* family_phi3.c - Phi-3 (transformers modeling_phi3.py): Llama's block with fused projections:
 * self_attn.qkv_proj [q_heads*hd + 2*kv_heads*hd, hidden] (rows: q, then k, then v) and
 * mlp.gate_up_proj [2*ffn, hidden] (rows: gate, then up), bound as row views of the fused tensor
 * (dense or MLX-quantized alike). Partial rotary via rope_parameters.partial_rotary_factor;
 * sliding window over every layer when set (mlx-lm's phi3 applies none: its logits differ past
 * sliding_window tokens); longrope (the 128k variants, Phi-3.5, Phi-4-mini) by the context: the
 * long factors when the context exceeds original_max_position_embeddings. mlx-lm's conversions
 * keep the fused names.
 * GGUF (llama.cpp phi3): fused blk.N.attn_qkv (rows q, k, v; separate attn_q/k/v when absent) and
 * blk.N.ffn_up [2*ffn] holding gate then up rows; NEOX RoPE over rope.dimension_count dims; no
 * sliding window even when attention.sliding_window is set (llama.cpp disables Phi-3 SWA);
 * longrope from the rope_factors_long/short tensors and rope.scaling.attn_factor
 * (mxl_family_gguf_rope_scaling). */
#include <jansson.h>
#include <math.h>

#include "models/convert_family.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .qkv = "self_attn.qkv_proj", .o = "self_attn.o_proj",
    .ffn_norm = "post_attention_layernorm", .gate_up = "mlp.gate_up_proj", .down = "mlp.down_proj",
};

static mxl_status phi3_setup(mxl_family_ctx *c) {
    if (c->gguf) {
        if (mxl_family_gguf_has_layer0(c, "attn_qkv", ".weight")) {
            c->names->qkv = "attn_qkv";
            c->names->q = c->names->k = c->names->v = NULL;
        }
        c->names->gate_up = "ffn_up";
        c->names->gate = c->names->up = NULL;
        return mxl_family_gguf_rope_neox(c);
    }
    mxl_status st = mxl_family_rope(c);
    return st ? st : mxl_family_sliding_all(c);
}

/* llama.cpp's Phi-3 names: fused attn_qkv (rows q, k, v) and ffn_up holding gate then up rows
 * (transformers' gate_up_proj). */
static const mxl_decoder_names k_names_gguf = {
    .embed = "token_embd", .final_norm = "output_norm", .lm_head = "output", .layers = "blk.",
    .attn_norm = "attn_norm", .qkv = "attn_qkv", .o = "attn_output", .ffn_norm = "ffn_norm", .gate_up = "ffn_up",
    .down = "ffn_down",
};

static mxl_status phi3_convert_check(const mxl_checkpoint *ck, mxl_error *err) {
    if (!mxl_convert_has_tensor(ck, "blk.0.attn_qkv.weight"))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: phi3 GGUF with separate attn_q/attn_k/attn_v (no blk.0.attn_qkv.weight) is not converted", ck->path);
    return MXL_OK;
}

static void phi3_convert_config(const mxl_checkpoint *ck, json_t *j) {
    const mxl_model_config *c = &ck->config;
    mxl_convert_put_sizes(ck, j);
    mxl_convert_put_rms_eps(ck, j);
    json_object_set_new(j, "hidden_act", json_string("silu"));
    json_object_set_new(j, "partial_rotary_factor", json_real(isnan(c->partial_rotary_factor) ? 1.0 : c->partial_rotary_factor));
    json_object_set_new(j, "original_max_position_embeddings", json_integer(c->max_position_embeddings));
    json_object_set_new(j, "sliding_window", json_null()); /* llama.cpp disables Phi-3's window */
}

const mxl_decoder_family mxl_family_phi3 = {
    .model_type = "phi3", .registry_id = "phi3", .hf_class = "Phi3ForCausalLM", .names = &k_names, .setup = phi3_setup,
    .gguf_arch = "phi3", .gguf_convert_names = &k_names_gguf, .convert_check = phi3_convert_check,
    .convert_config = phi3_convert_config,
};
