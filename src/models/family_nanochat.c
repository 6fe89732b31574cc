/* family_nanochat.c - nanochat (transformers modeling_nanochat.py, Karpathy's nanochat d20 / d32):
 * RMSNorms without weights everywhere (Llama 4's L2 norm: x / rms(x), eps rms_norm_eps), one of
 * them applied to the embeddings before the first layer (the same module as the final norm);
 * attention with RoPE rotating the other way (its rotate_half is cat(x2, -x1): the table's sines
 * negated) followed by the weightless QK-norm per head; a plain MLP fc1 -> hidden_act (relu2) ->
 * fc2; biases with attention_bias; logits soft-capped by final_logit_softcapping (15 by
 * default). No GGUF path. */
#include <jansson.h>

#include "models/decoder_family.h"

static const mxl_decoder_names k_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .ffn_norm = "post_attention_layernorm", .up = "mlp.fc1", .down = "mlp.fc2",
};

static mxl_status nanochat_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    double cap;
    if ((st = mxl_family_double(c, "final_logit_softcapping", 15.0, &cap))) return st;
    hp->final_softcap = json_is_null(json_object_get(c->raw, "final_logit_softcapping")) ? 0.0f : (float)cap;
    hp->norm_no_weight = true;
    hp->embed_norm = true;
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    hp->qk_norm_after_rope = true;
    hp->mlp = MXL_MLP_PLAIN;
    if ((st = mxl_family_rope(c))) return st;
    hp->rope.inverse = hp->rope_local.inverse = 1;
    return MXL_OK;
}

const mxl_decoder_family mxl_family_nanochat = {
    .model_type = "nanochat", .registry_id = "nanochat", .hf_class = "NanoChatForCausalLM", .names = &k_names,
    .setup = nanochat_setup,
};
