/* family_ministral3.c - Ministral 3 (transformers modeling_ministral3.py): Llama's block with
 * YaRN RoPE and Llama 4's attention temperature: after RoPE each query at position p is scaled by
 * 1 + llama_4_scaling_beta * ln(1 + floor(p / original_max_position_embeddings)), both read from
 * rope_parameters (or the older rope_scaling); a sliding window over every layer when
 * sliding_window is set (as Mistral). A config.json without rope_parameters is refused by name:
 * Ministral3Config would fill in its own YaRN defaults. GGUF: llama.cpp's mistral3 (ministral3_gguf);
 * not converted back. */
#include <jansson.h>

#include "models/decoder_family.h"
#include "models/family_gguf.h"

/* llama.cpp's mistral3 (its converter's Ministral3ForCausalLM / Mistral3ForConditionalGeneration
 * text model): Llama's permuted Q/K, YaRN with rope.scaling.yarn_log_multiplier =
 * mscale_all_dim (family_gguf.c), and the temperature from attention.temperature_scale over
 * rope.scaling.original_context_length positions (offset 0), as llama.cpp's mistral3 graph. */
static mxl_status ministral3_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    double beta, orig;
    mxl_status st;
    if ((st = mxl_family_gguf_rope_norm(c)) || (st = mxl_family_gguf_number(c, "attention.temperature_scale", 0.0, &beta)) ||
        (st = mxl_family_gguf_number(c, "rope.scaling.original_context_length", (double)c->cfg->max_position_embeddings, &orig)))
        return st;
    if (beta != 0) {
        char key[192];
        if (!(beta > 0 && beta < 1e6) || !(orig >= 1 && orig < 1e12))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' = %g needs a positive value and an original context length", c->ck->path,
                                 mxl_family_gguf_key(c, "attention.temperature_scale", key, sizeof key), beta);
        hp->q_temp_beta = (float)beta;
        hp->q_temp_orig = (int64_t)orig;
        hp->q_temp_offset = 0;
    }
    return MXL_OK;
}

static mxl_status ministral3_setup(mxl_family_ctx *c) {
    mxl_status st;
    if (c->gguf) return ministral3_gguf(c);
    json_t *rp = json_object_get(c->raw, "rope_parameters");
    if (!json_is_object(rp)) rp = json_object_get(c->raw, "rope_scaling");
    if (!json_is_object(rp))
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json has no rope_parameters (Ministral3Config's YaRN defaults are not applied)", c->ck->path);
    if ((st = mxl_family_rope(c)) || (st = mxl_family_sliding_all(c))) return st;
    return mxl_family_llama4_temperature(c);
}

const mxl_decoder_family mxl_family_ministral3 = {
    .model_type = "ministral3", .registry_id = "ministral3", .hf_class = "Ministral3ForCausalLM", .names = &mxl_names_llama,
    .setup = ministral3_setup, .gguf_arch = "mistral3", .gguf_permuted_qk = true, .convert_check = mxl_family_gguf_not_converted,
    .also_runs = (const char *const[]){"nemotron3_embed", NULL}, /* (is_causal false: engine/embed.c) */
};
