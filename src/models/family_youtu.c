/* family_youtu.c - Youtu-LLM (transformers modeling_youtu.py): DeepSeek-style multi-head latent
 * attention (models/mla.h) with a dense gated MLP in every layer, tied embeddings by default.
 * The released checkpoints (and mlx-lm) name the model_type youtu_llm, transformers 5 youtu: both
 * load. GGUF files of it are llama.cpp deepseek2 files without experts (they run as deepseek_v2). */
#include "models/decoder_family.h"

static mxl_status youtu_setup(mxl_family_ctx *c) {
    c->hp->o_bias = c->hp->qkv_bias;
    return mxl_family_mla(c, true);
}

const mxl_decoder_family mxl_family_youtu = {
    .model_type = "youtu", .registry_id = "youtu", .hf_class = "YoutuForCausalLM", .names = &mxl_names_llama, .setup = youtu_setup,
};

const mxl_decoder_family mxl_family_youtu_llm = {
    .model_type = "youtu_llm", .registry_id = "youtu", .hf_class = "YoutuForCausalLM", .names = &mxl_names_llama, .setup = youtu_setup,
};
