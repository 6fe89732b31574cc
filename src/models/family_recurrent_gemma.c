/* family_recurrent_gemma.c - RecurrentGemma (transformers modeling_recurrent_gemma.py, Griffin):
 * block_types repeated over the layers ("recurrent": recurrent.h MXL_LAYER_RGLRU of lru_width in
 * num_attention_heads blocks, temporal_block.linear_x / linear_y / conv_1d / rg_lru.* /
 * linear_out, all with biases; "attention": local attention over attention_window_size positions
 * with partial RoPE, o_proj with a bias), each followed by a GeGLU MLP with biases (mlp_block.*)
 * of half of intermediate_size.
 * Gemma's conventions: RMSNorms of (1 + w) (temporal_pre_norm, channel_pre_norm, final_norm),
 * the embedding scaled by sqrt(hidden_size) rounded to bfloat16 as transformers keeps it, the
 * logits soft-capped at logits_soft_cap; tied head. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "models/decoder_family.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.final_norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "temporal_pre_norm", .q = "temporal_block.q_proj", .k = "temporal_block.k_proj", .v = "temporal_block.v_proj",
    .o = "temporal_block.o_proj", .ffn_norm = "channel_pre_norm", .gate = "mlp_block.gate_proj", .up = "mlp_block.up_proj",
    .down = "mlp_block.down_proj", .ssm_in = "temporal_block.linear_x", .ssm_in_z = "temporal_block.linear_y",
    .ssm_conv = "temporal_block.conv_1d", .ssm_out = "temporal_block.linear_out",
    .ssm_gx_w = "temporal_block.rg_lru.input_gate_weight", .ssm_gx_b = "temporal_block.rg_lru.input_gate_bias",
    .ssm_ga_w = "temporal_block.rg_lru.recurrent_gate_weight", .ssm_ga_b = "temporal_block.rg_lru.recurrent_gate_bias",
    .ssm_lru_param = "temporal_block.rg_lru.recurrent_param",
};

static mxl_status recurrent_gemma_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    if (c->gguf) return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: RecurrentGemma from GGUF is not supported yet", c->ck->path);
    uint8_t *kind = mxl_family_layer_flags(c), *sliding = mxl_family_layer_flags(c);
    if (!kind || !sliding) return MXL_ERR_NOMEM;
    json_t *bt = json_object_get(c->raw, "block_types");
    size_t nb = bt && json_is_array(bt) ? json_array_size(bt) : 0;
    for (int64_t i = 0; i < hp->n_layers; i++) {
        const char *s = nb ? json_string_value(json_array_get(bt, (size_t)i % nb)) : (i % 3 == 2 ? "attention" : "recurrent");
        if (s && strcmp(s, "recurrent") == 0) kind[i] = MXL_LAYER_RGLRU;
        else if (s && strcmp(s, "attention") == 0) kind[i] = MXL_LAYER_ATTN, sliding[i] = 1;
        else
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: block_types[%zu] is neither 'recurrent' nor 'attention'", c->ck->path,
                                 nb ? (size_t)i % nb : 0);
    }
    hp->layer_kind = kind, hp->layer_is_sliding = sliding;
    int64_t window, width;
    double cap;
    if ((st = mxl_family_int(c, "attention_window_size", 2048, &window)) || (st = mxl_family_int(c, "lru_width", hp->hidden, &width)) ||
        (st = mxl_family_int(c, "conv1d_width", 4, &hp->ssm_conv)) || (st = mxl_family_double(c, "logits_soft_cap", 30.0, &cap)))
        return st;
    hp->sliding_window = window;
    hp->ssm_inner = width;
    hp->ssm_heads = hp->n_heads;
    hp->ssm_conv_bias = hp->ssm_proj_bias = true;
    hp->norm_plus_one = true;
    hp->o_bias = true;
    hp->mlp_bias = true;
    hp->ffn = hp->ffn / 2; /* (its MLP is half of intermediate_size wide) */
    hp->final_softcap = (float)cap;
    /* sqrt(hidden) as the bfloat16 buffer transformers multiplies by */
    hp->embed_scale = mxl_bf16_to_f32(mxl_f32_to_bf16(sqrtf((float)hp->hidden)));
    if ((st = mxl_family_rope(c))) return st;
    hp->rope_local = hp->rope; /* (every attention layer is local, with the one RoPE) */
    return mxl_family_rope_partial_default(c, 0.5);
}

const mxl_decoder_family mxl_family_recurrent_gemma = {
    .model_type = "recurrent_gemma", .registry_id = "recurrent_gemma", .hf_class = "RecurrentGemmaForCausalLM", .names = &k_names,
    .setup = recurrent_gemma_setup,
};
