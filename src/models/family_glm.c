/* family_glm.c - GLM 4 dense (transformers modeling_glm.py, model_type glm: GLM-4-9B-chat-hf;
 * modeling_glm4.py, model_type glm4: GLM-4-9B-0414, GLM-Z1). Both: Llama's layout with a fused
 * mlp.gate_up_proj [2*ffn, hidden] (rows: gate, then up), q/k/v biases (attention_bias, true by
 * default) and none on o_proj, and interleaved RoPE (GPT-J pairs) on the first
 * partial_rotary_factor (default 0.5) of each head. glm4 adds RMSNorms on the attention output
 * (post_self_attn_layernorm) and the MLP output (post_mlp_layernorm) before each residual add,
 * beside the usual pre-norms. GGUF (llama.cpp glm4): separate attn_q / k / v with biases, ffn_up
 * holding gate then up rows, post_attention_norm / post_ffw_norm, the rotary rows as transformers
 * has them (ggml's "normal" mode: GPT-J pairs) on rope.dimension_count dims; GLM-4.1V's text model
 * converts to the same architecture with rope.dimension_sections, its rotary rows permuted to NEOX
 * halves for llama.cpp's M-RoPE. GLM-4.1V
 * (modeling_glm4v.py, Glm4vForConditionalGeneration: GLM-4.1V-9B-Thinking) runs glm4's block under
 * text_config at model.language_model.* with M-RoPE (mrope_section over the rotary pairs, default
 * [8, 12, 12]) on the interleaved partial rotary; its vision tower is models/vlm_qwen2vl.c's. */
#include "io/gguf.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names_glm = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .ffn_norm = "post_attention_layernorm", .gate_up = "mlp.gate_up_proj",
    .down = "mlp.down_proj",
};

static const mxl_decoder_names k_names_glm4 = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .post_attn_norm = "post_self_attn_layernorm", .ffn_norm = "post_attention_layernorm",
    .gate_up = "mlp.gate_up_proj", .down = "mlp.down_proj", .post_ffn_norm = "post_mlp_layernorm",
};

static mxl_status glm_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    if ((st = mxl_family_bool(c, "attention_bias", true, &hp->qkv_bias))) return st;
    hp->o_bias = false;
    if ((st = mxl_family_rope_interleaved(c))) return st;
    return mxl_family_rope_partial_default(c, 0.5);
}

/* llama.cpp's glm4 (see above): GLM-4's block, or GLM-4.1V's text model when the file has
 * rope.dimension_sections. */
static mxl_status glm4_gguf(mxl_family_ctx *c) {
    c->names->gate_up = "ffn_up";
    c->names->gate = c->names->up = NULL;
    mxl_family_gguf_attn_biases(c);
    char key[128];
    if (mxl_gguf_find(c->ck->gguf, mxl_family_gguf_key(c, "rope.dimension_sections", key, sizeof key))) {
        static const int32_t k_default[3] = {8, 12, 12};
        return mxl_family_gguf_mrope(c, k_default);
    }
    return mxl_family_gguf_rope_norm(c);
}

static mxl_status glm4_setup(mxl_family_ctx *c) {
    c->hp->post_norms = true;
    if (c->gguf) return glm4_gguf(c);
    return glm_setup(c);
}

const mxl_decoder_family mxl_family_glm = {
    .model_type = "glm", .registry_id = "glm4", .hf_class = "GlmForCausalLM", .names = &k_names_glm, .setup = glm_setup,
};

const mxl_decoder_family mxl_family_glm4 = {
    .model_type = "glm4", .registry_id = "glm4", .hf_class = "Glm4ForCausalLM", .names = &k_names_glm4, .setup = glm4_setup,
    .gguf_arch = "glm4", .convert_check = mxl_family_gguf_not_converted,
};

static mxl_status glm4v_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    static const int32_t k_default[3] = {8, 12, 12}; /* (Glm4vTextRotaryEmbedding's default) */
    hp->post_norms = true;
    hp->qkv_bias = true; /* (Glm4vTextAttention: q / k / v biased, o not) */
    hp->o_bias = false;
    mxl_status st = mxl_family_mrope(c, k_default, 10000.0);
    if (st) return st;
    hp->rope.style = hp->rope_local.style = MXL_ROPE_GPTJ;
    return mxl_family_rope_partial_default(c, 0.5);
}

const mxl_decoder_family mxl_family_glm4v = {
    .model_type = "glm4v", .registry_id = "glm4v", .hf_class = "Glm4vForConditionalGeneration", .names = &k_names_glm4,
    .setup = glm4v_setup, .text_config = true, .gaps = "video input",
};
