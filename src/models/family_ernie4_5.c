/* family_ernie4_5.c - ERNIE 4.5 dense (transformers modeling_ernie4_5.py, the 0.3B): Llama's
 * block with interleaved RoPE (GPT-J style pairs, as Helium) and one switch, use_bias, for the
 * biases of every attention and MLP projection. No GGUF path yet (llama.cpp's ernie4_5). */
#include "models/decoder_family.h"

static mxl_status ernie4_5_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    bool bias;
    mxl_status st = mxl_family_bool(c, "use_bias", false, &bias);
    if (st) return st;
    hp->qkv_bias = hp->o_bias = hp->mlp_bias = bias;
    return mxl_family_rope_interleaved(c);
}

const mxl_decoder_family mxl_family_ernie4_5 = {
    .model_type = "ernie4_5", .registry_id = "ernie4_5", .hf_class = "Ernie4_5ForCausalLM", .names = &mxl_names_llama,
    .setup = ernie4_5_setup,
};
