/* family_qwen3.c - Qwen3 (transformers modeling_qwen3.py): Llama's block with an RMSNorm over
 * each query and key head (self_attn.q_norm / k_norm, [head_dim]) before RoPE; biases only with
 * attention_bias; head_dim is independent of hidden / heads. Sliding layers as Qwen2.
 * GGUF (llama.cpp qwen3): attn_q_norm / attn_k_norm [head_dim], NEOX RoPE on unpermuted rows,
 * no sliding window, no biases. */
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static mxl_status qwen3_setup(mxl_family_ctx *c) {
    c->hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    if (c->gguf) return mxl_family_gguf_rope_neox(c);
    mxl_status st = mxl_family_rope(c);
    return st ? st : mxl_family_qwen_sliding(c);
}

const mxl_decoder_family mxl_family_qwen3 = {"qwen3", true, &mxl_names_llama, qwen3_setup};
