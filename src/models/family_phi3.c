/* family_phi3.c - Phi-3 (transformers modeling_phi3.py): Llama's block with fused projections:
 * self_attn.qkv_proj [q_heads*hd + 2*kv_heads*hd, hidden] (rows: q, then k, then v) and
 * mlp.gate_up_proj [2*ffn, hidden] (rows: gate, then up), bound as row views of the fused tensor
 * (dense or MLX-quantized alike). Partial rotary via rope_parameters.partial_rotary_factor;
 * sliding window over every layer when set; longrope (the 128k variants) is refused by name. */
#include "models/decoder_family.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .qkv = "self_attn.qkv_proj", .o = "self_attn.o_proj",
    .ffn_norm = "post_attention_layernorm", .gate_up = "mlp.gate_up_proj", .down = "mlp.down_proj",
};

static mxl_status phi3_setup(mxl_family_ctx *c) {
    mxl_status st = mxl_family_rope(c);
    return st ? st : mxl_family_sliding_all(c);
}

const mxl_decoder_family mxl_family_phi3 = {"phi3", false, &k_names, phi3_setup};
