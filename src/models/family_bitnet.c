/* family_bitnet.c - BitNet b1.58 (transformers modeling_bitnet.py, microsoft/bitnet-b1.58-2B-4T):
 * Llama's block with two more RMSNorms, attn_sub_norm on the attention output before o_proj and
 * ffn_sub_norm on the MLP's activation before down_proj (decoder.h), relu2 by default. With
 * quantization_config quant_method "bitnet" (the released checkpoints) every linear layer but
 * the LM head holds ternary weights, packed four to a byte with a scalar weight_scale
 * (decoder.h bitnet_packed: bound exactly as MLX 2-bit weights), and reads its input
 * fake-quantized to 8 bits per row (act_quant8); linear_class "bitlinear" divides by
 * weight_scale, "autobitlinear" multiplies (transformers' two classes). Online quantization (the
 * float master weights ternarized at every call) and use_rms_norm are refused by name; without a
 * quantization_config the float checkpoint runs as transformers runs it (plain linear layers). */
#include <jansson.h>
#include <string.h>

#include "models/decoder_family.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .ffn_norm = "post_attention_layernorm", .gate = "mlp.gate_proj", .up = "mlp.up_proj",
    .down = "mlp.down_proj", .attn_sub_norm = "self_attn.attn_sub_norm", .ffn_sub_norm = "mlp.ffn_sub_norm",
};

/* quantization_config's string `key` (dflt when absent) */
static const char *qc_string(json_t *qc, const char *key, const char *dflt) {
    json_t *v = json_object_get(qc, key);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

static mxl_status bitnet_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    json_t *qc = json_object_get(c->raw, "quantization_config");
    if (json_is_object(qc)) {
        const char *cls = qc_string(qc, "linear_class", "bitlinear"), *mode = qc_string(qc, "quantization_mode", "offline");
        json_t *rn = json_object_get(qc, "use_rms_norm");
        if (strcmp(cls, "bitlinear") != 0 && strcmp(cls, "autobitlinear") != 0)
            return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: quantization_config linear_class '%s' is not supported (bitlinear, autobitlinear)", c->ck->path, cls);
        if (strcmp(mode, "offline") != 0)
            return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: quantization_config quantization_mode '%s' is not supported (offline: packed ternary weights)",
                                 c->ck->path, mode);
        if (json_is_true(rn))
            return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: quantization_config use_rms_norm is not supported", c->ck->path);
        hp->bitnet_packed = true;
        hp->bitnet_scale_divides = strcmp(cls, "bitlinear") == 0;
        hp->act_quant8 = true;
    }
    return mxl_family_rope(c);
}

const mxl_decoder_family mxl_family_bitnet = {
    .model_type = "bitnet", .registry_id = "bitnet", .hf_class = "BitNetForCausalLM", .names = &k_names, .setup = bitnet_setup,
    .quant_method = "bitnet",
};
