/* family_smollm3.c - SmolLM3 (transformers modeling_smollm3.py): Llama's block where some layers
 * skip RoPE (NoPE): no_rope_layers[i] == 1 means layer i applies RoPE, 0 means it does not;
 * absent, every no_rope_layer_interval-th layer (default 4) is NoPE. Sliding layers only with
 * use_sliding_window, where layer_types says so.
 * GGUF (llama.cpp smollm3): Llama's tensors with Q/K rows permuted (GPT-J style RoPE); the
 * converter writes no NoPE key and llama.cpp's loader hard-codes n_no_rope_layer_step = 4: layer i
 * skips RoPE when (i + 1) % 4 == 0, whatever the source's no_rope_layers said (so do we); no
 * sliding window. */
#include <jansson.h>

#include "models/convert_family.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* llama.cpp's llama_model_smollm3: hparams.n_no_rope_layer_step = 4 (no metadata key) */
#define GGUF_NO_ROPE_STEP 4

static mxl_status smollm3_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    if (c->gguf) {
        if ((st = mxl_family_gguf_rope_norm(c))) return st;
        uint8_t *f = mxl_family_layer_flags(c);
        if (!f) return MXL_ERR_NOMEM;
        for (int64_t i = 0; i < hp->n_layers; i++) f[i] = (i + 1) % GGUF_NO_ROPE_STEP == 0;
        hp->layer_no_rope = f;
        return MXL_OK;
    }
    if ((st = mxl_family_rope(c))) return st;
    if ((st = mxl_family_nope_layers(c))) return st;
    bool use;
    if ((st = mxl_family_bool(c, "use_sliding_window", false, &use))) return st;
    if (use && c->cfg->sliding_window > 0) mxl_family_sliding_from_layer_types(c, c->cfg->sliding_window);
    return MXL_OK;
}

/* llama.cpp's fixed NoPE step as no_rope_layers; no sliding window. */
static void smollm3_convert_config(const mxl_checkpoint *ck, json_t *j) {
    mxl_family_convert_config_llama(ck, j);
    json_t *nr = json_array();
    for (int64_t i = 0; i < ck->config.num_hidden_layers; i++) json_array_append_new(nr, json_integer((i + 1) % GGUF_NO_ROPE_STEP != 0));
    json_object_set_new(j, "no_rope_layers", nr);
    json_object_set_new(j, "no_rope_layer_interval", json_integer(GGUF_NO_ROPE_STEP));
    json_object_set_new(j, "use_sliding_window", json_false());
    json_object_set_new(j, "sliding_window", json_null());
}

const mxl_decoder_family mxl_family_smollm3 = {
    .model_type = "smollm3", .registry_id = "smollm3", .hf_class = "SmolLM3ForCausalLM", .names = &mxl_names_llama,
    .setup = smollm3_setup, .gguf_arch = "smollm3", .gguf_permuted_qk = true, .convert_config = smollm3_convert_config,
};
