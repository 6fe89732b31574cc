/* family_ernie4_5.c - ERNIE 4.5 dense (transformers modeling_ernie4_5.py, the 0.3B): Llama's
 * block with interleaved RoPE (GPT-J style pairs, as Helium) and one switch, use_bias, for the
 * biases of every attention and MLP projection.
 * GGUF (llama.cpp ernie4_5): RoPE on adjacent pairs (its "normal" mode; the converter does not
 * permute: the checkpoint is interleaved already); attention biases as the file has them (the
 * converter keeps use_bias's, llama.cpp's graph reads only q/k/v/output ones); not converted back. */
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static mxl_status ernie4_5_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    bool bias;
    if (c->gguf) {
        mxl_family_gguf_attn_biases(c);
        return mxl_family_gguf_rope_norm(c);
    }
    mxl_status st = mxl_family_bool(c, "use_bias", false, &bias);
    if (st) return st;
    hp->qkv_bias = hp->o_bias = hp->mlp_bias = bias;
    return mxl_family_rope_interleaved(c);
}

const mxl_decoder_family mxl_family_ernie4_5 = {
    .model_type = "ernie4_5", .registry_id = "ernie4_5", .hf_class = "Ernie4_5ForCausalLM", .names = &mxl_names_llama,
    .setup = ernie4_5_setup, .gguf_arch = "ernie4_5", .convert_check = mxl_family_gguf_not_converted,
};
