/* family_qwen3.c - Qwen3 (transformers modeling_qwen3.py): Llama's block with an RMSNorm over
 * each query and key head (self_attn.q_norm / k_norm, [head_dim]) before RoPE; biases only with
 * attention_bias; head_dim is independent of hidden / heads. Sliding layers as Qwen2.
 * GGUF (llama.cpp qwen3): attn_q_norm / attn_k_norm [head_dim], NEOX RoPE on unpermuted rows,
 * no sliding window, no biases. */
#include "models/convert_family.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static mxl_status qwen3_setup(mxl_family_ctx *c) {
    c->hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    if (c->gguf) return mxl_family_gguf_rope_neox(c);
    mxl_status st = mxl_family_rope(c);
    return st ? st : mxl_family_qwen_sliding(c);
}

static void qwen3_convert_config(const mxl_checkpoint *ck, json_t *j) {
    mxl_family_convert_config_llama(ck, j);
    mxl_family_qwen_convert_no_window(j);
}

const mxl_decoder_family mxl_family_qwen3 = {
    .model_type = "qwen3", .registry_id = "qwen3", .hf_class = "Qwen3ForCausalLM", .names = &mxl_names_llama,
    .setup = qwen3_setup, .also_runs = (const char *const[]){"qwen3_embedding", "qwen3_reranker", NULL},
    .gguf_arch = "qwen3", .convert_config = qwen3_convert_config,
};
