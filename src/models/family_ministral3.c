/* family_ministral3.c - Ministral 3 (transformers modeling_ministral3.py): Llama's block with
 * YaRN RoPE and Llama 4's attention temperature: after RoPE each query at position p is scaled by
 * 1 + llama_4_scaling_beta * ln(1 + floor(p / original_max_position_embeddings)), both read from
 * rope_parameters (or the older rope_scaling); a sliding window over every layer when
 * sliding_window is set (as Mistral). A config.json without rope_parameters is refused by name:
 * Ministral3Config would fill in its own YaRN defaults. No GGUF path yet. */
#include <jansson.h>

#include "models/decoder_family.h"

static mxl_status ministral3_setup(mxl_family_ctx *c) {
    mxl_status st;
    json_t *rp = json_object_get(c->raw, "rope_parameters");
    if (!json_is_object(rp)) rp = json_object_get(c->raw, "rope_scaling");
    if (!json_is_object(rp))
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json has no rope_parameters (Ministral3Config's YaRN defaults are not applied)", c->ck->path);
    if ((st = mxl_family_rope(c)) || (st = mxl_family_sliding_all(c))) return st;
    return mxl_family_llama4_temperature(c);
}

const mxl_decoder_family mxl_family_ministral3 = {
    .model_type = "ministral3", .registry_id = "ministral3", .hf_class = "Ministral3ForCausalLM", .names = &mxl_names_llama,
    .setup = ministral3_setup,
};
