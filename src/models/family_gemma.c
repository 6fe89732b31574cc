/* family_gemma.c - Gemma (transformers modeling_gemma.py): Llama's block with RMSNorm scaling by
 * (1 + w), embeddings multiplied by sqrt(hidden_size), and a GeGLU MLP (tanh GELU: the legacy
 * hidden_act "gelu" of the official configs means the tanh approximation, as transformers
 * rewrites it).
 * mlx-lm (models/gemma.py) computes this MLP with the exact erf GELU whatever hidden_act says, so
 * its logits for a Gemma 1 checkpoint differ slightly from transformers' and ours (7.5e-4 on the
 * tiny fixtures; test_decoder_mlx_lm.c allows for it); its conversions use the names above.
 * GGUF (llama.cpp gemma): norms stored as 1 + w already (the converter adds 1), embeddings scaled
 * by sqrt(n_embd), tanh GELU, NEOX RoPE on unpermuted rows. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "models/convert_family.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static mxl_status gemma_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    hp->norm_plus_one = true;
    hp->embed_scale = sqrtf((float)hp->hidden);
    hp->act = MXL_ACT_GELU_TANH;
    if (c->gguf) {
        hp->norm_plus_one = false;
        return mxl_family_gguf_rope_neox(c);
    }
    if (c->cfg->hidden_act[0] && strcmp(c->cfg->hidden_act, "gelu") != 0) {
        mxl_status st = mxl_family_act(c, "hidden_act", c->cfg->hidden_act, &hp->act);
        if (st) return st;
    }
    return mxl_family_rope(c);
}

void mxl_family_gemma_convert_common(const mxl_checkpoint *ck, json_t *j) {
    mxl_convert_put_sizes(ck, j);
    mxl_convert_put_rms_eps(ck, j);
    json_object_set_new(j, "hidden_activation", json_string("gelu_pytorch_tanh"));
    json_object_set_new(j, "hidden_act", json_string("gelu_pytorch_tanh"));
    json_object_set_new(j, "attention_bias", json_false());
}

const mxl_decoder_family mxl_family_gemma = {
    .model_type = "gemma", .registry_id = "gemma", .hf_class = "GemmaForCausalLM", .names = &mxl_names_llama,
    .setup = gemma_setup, .gguf_arch = "gemma", .gguf_norm_plus_one = true,
    .convert_config = mxl_family_gemma_convert_common,
};
