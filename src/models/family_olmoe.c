/* family_olmoe.c - OLMoE (transformers modeling_olmoe.py): Llama's pre-norm block with an
 * RMSNorm over the whole q and k projections (self_attn.q_norm [heads * head_dim], k_norm
 * [kv_heads * head_dim]) before RoPE (clip_qkv, which OLMoE applies after that norm, is refused), and a sparse MoE
 * block on every layer (mlp.gate, mlp.experts.N.*, mlx-lm's mlp.switch_mlp.*): softmax then the
 * top num_experts_per_tok, renormalised with norm_topk_prob (default false), experts of
 * intermediate_size.
 * GGUF (llama.cpp olmoe): attn_q_norm / attn_k_norm over the whole projection, NEOX RoPE,
 * ffn_*_exps; llama.cpp does not renormalise (its build_moe_ffn argument) unless
 * expert_weights_norm says so. */
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static mxl_status olmoe_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    hp->qk_norm_kind = MXL_QK_NORM_FULL;
    if (c->gguf) {
        if ((st = mxl_family_gguf_rope_neox(c))) return st;
        return mxl_family_gguf_moe(c, false);
    }
    double clip;
    if ((st = mxl_family_double(c, "clip_qkv", 0.0, &clip))) return st;
    if (clip != 0) /* OLMoE clamps after its QK-norm; the shared decoder clamps the projections */
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'clip_qkv' is not supported for model_type 'olmoe' (the released OLMoE checkpoints set none)", c->ck->path);
    if ((st = mxl_family_rope(c))) return st;
    return mxl_family_moe(c, NULL, NULL, false, false);
}

const mxl_decoder_family mxl_family_olmoe = {
    .model_type = "olmoe", .registry_id = "olmoe", .hf_class = "OlmoeForCausalLM", .names = &mxl_names_qwen_moe,
    .setup = olmoe_setup, .gguf_arch = "olmoe", .convert_check = mxl_family_gguf_not_converted,
};
