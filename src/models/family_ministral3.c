/* family_ministral3.c - Ministral 3 (transformers modeling_ministral3.py): Llama's block with
 * YaRN RoPE and Llama 4's attention temperature: after RoPE each query at position p is scaled by
 * 1 + llama_4_scaling_beta * ln(1 + floor(p / original_max_position_embeddings)), both read from
 * rope_parameters (or the older rope_scaling); a sliding window over every layer when
 * sliding_window is set (as Mistral). A config.json without rope_parameters is refused by name:
 * Ministral3Config would fill in its own YaRN defaults. No GGUF path yet. */
#include <jansson.h>

#include "models/decoder_family.h"

static mxl_status ministral3_setup(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    json_t *rp = json_object_get(c->raw, "rope_parameters");
    if (!json_is_object(rp)) rp = json_object_get(c->raw, "rope_scaling");
    if (!json_is_object(rp))
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json has no rope_parameters (Ministral3Config's YaRN defaults are not applied)", c->ck->path);
    if ((st = mxl_family_rope(c)) || (st = mxl_family_sliding_all(c))) return st;
    json_t *beta = json_object_get(rp, "llama_4_scaling_beta"), *orig = json_object_get(rp, "original_max_position_embeddings");
    if (!beta || json_is_null(beta)) return MXL_OK;
    if (!json_is_number(beta) || !json_is_number(orig) || json_number_value(beta) < 0 || json_number_value(orig) < 1)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json rope_parameters 'llama_4_scaling_beta' needs a non-negative number and 'original_max_position_embeddings' a positive one", c->ck->path);
    hp->q_temp_beta = (float)json_number_value(beta);
    hp->q_temp_orig = (int64_t)json_number_value(orig);
    return MXL_OK;
}

const mxl_decoder_family mxl_family_ministral3 = {
    .model_type = "ministral3", .registry_id = "ministral3", .hf_class = "Ministral3ForCausalLM", .names = &mxl_names_llama,
    .setup = ministral3_setup,
};
