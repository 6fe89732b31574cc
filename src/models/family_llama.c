/* family_llama.c - Llama and Mistral (transformers modeling_llama.py / modeling_mistral.py): the
 * plain pre-norm RMSNorm + SwiGLU block every other family starts from. Llama honours
 * attention_bias / mlp_bias and every RoPE type the shared parser knows (llama3 included);
 * Mistral adds a sliding window over every layer when sliding_window is set (mlx-lm runs mistral
 * as its llama, which slides only the layers layer_types marks: none in Mistral's configs).
 * mlx-lm's conversions keep these names; RoPE there comes from rope_theta / rope_scaling, not
 * transformers 5's rope_parameters (both read here).
 * GGUF: Q/K rows are permuted by llama.cpp's converter, so RoPE rotates adjacent pairs (GPT-J
 * style) there; GGUF RoPE scaling (rope_freqs.weight, linear, yarn) is read by
 * mxl_family_gguf_rope_scaling. (A "llama" GGUF with experts is Mixtral: config_gguf.c names it
 * so and family_mixtral.c runs it.) */
#include <math.h>
#include <string.h>

#include "models/decoder_family.h"

const mxl_decoder_names mxl_names_llama = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .q_norm = "self_attn.q_norm", .k_norm = "self_attn.k_norm",
    .ffn_norm = "post_attention_layernorm", .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj",
};

static mxl_status llama_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    if (!c->gguf) return mxl_family_rope(c);
    /* GGUF: the permuted Q/K rows pair (2i, 2i+1) */
    mxl_rope_cfg *r = &hp->rope;
    memset(r, 0, sizeof *r);
    r->head_dim = r->rotary_dim = (int)hp->head_dim;
    r->theta = !isnan(c->cfg->rope_theta) ? c->cfg->rope_theta : 10000.0;
    r->style = MXL_ROPE_GPTJ;
    r->scaling = MXL_ROPE_SCALING_NONE;
    r->factor = 1.0;
    double prf = c->cfg->partial_rotary_factor;
    if (!isnan(prf) && prf > 0 && prf < 1) r->rotary_dim = (int)((double)hp->head_dim * prf) & ~1;
    hp->rope_local = *r;
    return MXL_OK;
}

static mxl_status mistral_setup(mxl_family_ctx *c) {
    mxl_status st = llama_setup(c);
    if (st || c->gguf) return st;
    return mxl_family_sliding_all(c);
}

const mxl_decoder_family mxl_family_llama = {
    .model_type = "llama", .registry_id = "llama", .hf_class = "LlamaForCausalLM", .names = &mxl_names_llama,
    .setup = llama_setup, .gguf_arch = "llama", .gguf_permuted_qk = true,
};

/* GGUF: llama.cpp converts Mistral 1/2 as "llama" (that record takes it). */
/* llama_bidirec (NVIDIA's llama-nemotron-embed, LLM2Vec exports: LlamaBidirectionalModel in
 * remote code): Llama's decoder with every query seeing the whole text, which transformers'
 * LlamaModel with is_causal false computes; the embedding path runs it whole (engine/embed.c). */
static mxl_status llama_bidirec_setup(mxl_family_ctx *c) {
    c->hp->bidirectional = true;
    return mxl_family_rope(c);
}

const mxl_decoder_family mxl_family_llama_bidirec = {
    .model_type = "llama_bidirec", .registry_id = "llama_bidirectional", .hf_class = "LlamaBidirectionalModel", .names = &mxl_names_llama,
    .setup = llama_bidirec_setup,
};

const mxl_decoder_family mxl_family_mistral = {
    .model_type = "mistral", .registry_id = "llama", .hf_class = "MistralForCausalLM", .names = &mxl_names_llama,
    .setup = mistral_setup,
};

/* InternLM 3 (transformers runs model_type internlm3 as LlamaForCausalLM): its own configs spell
 * attention_bias "qkv_bias" and mlp_bias "bias" (InternLM3Config's attribute_map), read here when
 * present. */
static mxl_status internlm3_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool qkv_bias = hp->qkv_bias;
    if ((st = mxl_family_bool(c, "qkv_bias", qkv_bias, &qkv_bias)) || (st = mxl_family_bool(c, "bias", hp->mlp_bias, &hp->mlp_bias)))
        return st;
    hp->qkv_bias = hp->o_bias = qkv_bias;
    return llama_setup(c);
}

const mxl_decoder_family mxl_family_internlm3 = {
    .model_type = "internlm3", .registry_id = "internlm3", .hf_class = "LlamaForCausalLM", .names = &mxl_names_llama,
    .setup = internlm3_setup,
};

/* IQuest-Coder V1 (transformers runs model_type iquestcoder as LlamaForCausalLM). */
const mxl_decoder_family mxl_family_iquestcoder = {
    .model_type = "iquestcoder", .registry_id = "iquestcoder", .hf_class = "LlamaForCausalLM", .names = &mxl_names_llama,
    .setup = llama_setup,
};
