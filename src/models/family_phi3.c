/* family_phi3.c - Phi-3 (transformers modeling_phi3.py): Llama's block with fused projections:
 * self_attn.qkv_proj [q_heads*hd + 2*kv_heads*hd, hidden] (rows: q, then k, then v) and
 * mlp.gate_up_proj [2*ffn, hidden] (rows: gate, then up), bound as row views of the fused tensor
 * (dense or MLX-quantized alike). Partial rotary via rope_parameters.partial_rotary_factor;
 * sliding window over every layer when set (mlx-lm's phi3 applies none: its logits differ past
 * sliding_window tokens); longrope (the 128k variants) is refused by name. mlx-lm's conversions
 * keep the fused names.
 * GGUF (llama.cpp phi3): fused blk.N.attn_qkv (rows q, k, v; separate attn_q/k/v when absent) and
 * blk.N.ffn_up [2*ffn] holding gate then up rows; NEOX RoPE over rope.dimension_count dims; no
 * sliding window even when attention.sliding_window is set (llama.cpp disables Phi-3 SWA);
 * longrope (rope.scaling.type or rope_factors_long/short tensors) is refused by
 * mxl_family_gguf_rope_scaling. */
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

const mxl_decoder_family mxl_family_phi3 = {"phi3", true, &k_names, phi3_setup};
