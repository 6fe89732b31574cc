/* family_seed_oss.c - Seed-OSS (transformers modeling_seed_oss.py, ByteDance Seed-OSS-36B):
 * Llama's block where attention_bias switches the q/k/v biases and attention_out_bias (default
 * false) the o_proj bias; mlp_bias on the MLP.
 * GGUF (llama.cpp seed_oss): the norm before the MLP is blk.N.post_attention_norm; NEOX RoPE on
 * unpermuted rows; q/k/v and output biases as the file has them; not converted back. */
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static mxl_status seed_oss_setup(mxl_family_ctx *c) {
    if (c->gguf) {
        c->names->ffn_norm = "post_attention_norm";
        mxl_family_gguf_attn_biases(c);
        return mxl_family_gguf_rope_neox(c);
    }
    mxl_status st = mxl_family_bool(c, "attention_out_bias", false, &c->hp->o_bias);
    return st ? st : mxl_family_rope(c);
}

const mxl_decoder_family mxl_family_seed_oss = {
    .model_type = "seed_oss", .registry_id = "seed_oss", .hf_class = "SeedOssForCausalLM", .names = &mxl_names_llama,
    .setup = seed_oss_setup, .gguf_arch = "seed_oss", .convert_check = mxl_family_gguf_not_converted,
};
