/* family_helium.c - Helium (transformers modeling_helium.py, Kyutai's Helium 1): Llama's block
 * with interleaved RoPE (its rotate_half pairs (2i, 2i+1), cos/sin repeat_interleave'd: GPT-J
 * style) and attention_bias on q/k/v only (o_proj never has a bias). No GGUF path (llama.cpp has
 * no helium architecture). */
#include "models/decoder_family.h"

static mxl_status helium_setup(mxl_family_ctx *c) {
    c->hp->o_bias = false;
    return mxl_family_rope_interleaved(c);
}

const mxl_decoder_family mxl_family_helium = {
    .model_type = "helium", .registry_id = "helium", .hf_class = "HeliumForCausalLM", .names = &mxl_names_llama,
    .setup = helium_setup,
};
