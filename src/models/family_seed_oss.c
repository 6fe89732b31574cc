/* family_seed_oss.c - Seed-OSS (transformers modeling_seed_oss.py, ByteDance Seed-OSS-36B):
 * Llama's block where attention_bias switches the q/k/v biases and attention_out_bias (default
 * false) the o_proj bias; mlp_bias on the MLP. No GGUF path yet (llama.cpp's seed_oss). */
#include "models/decoder_family.h"

static mxl_status seed_oss_setup(mxl_family_ctx *c) {
    mxl_status st = mxl_family_bool(c, "attention_out_bias", false, &c->hp->o_bias);
    return st ? st : mxl_family_rope(c);
}

const mxl_decoder_family mxl_family_seed_oss = {
    .model_type = "seed_oss", .registry_id = "seed_oss", .hf_class = "SeedOssForCausalLM", .names = &mxl_names_llama,
    .setup = seed_oss_setup,
};
