/* family_mistral3.c - the text decoder of Mistral 3 (transformers modeling_mistral3.py,
 * Mistral3ForConditionalGeneration: Mistral Small 3.1 / 3.2, Ministral 3, Magistral Small): a
 * Pixtral vision tower and projector (models/vlm_pixtral.c) before the text model of text_config, Mistral's
 * (model_type mistral) or Ministral 3's (YaRN and Llama 4's attention temperature), which the
 * family of that model type sets up. The decoder sits at model.language_model.* (transformers 5)
 * or language_model.model.* (the older layout and mlx-lm's conversions). */
#include <jansson.h>
#include <string.h>

#include "models/decoder_family.h"

extern const mxl_decoder_family mxl_family_mistral, mxl_family_ministral3;

static mxl_status mistral3_setup(mxl_family_ctx *c) {
    json_t *mt = json_object_get(c->raw, "model_type");
    const char *s = json_is_string(mt) ? json_string_value(mt) : "mistral"; /* (Mistral3Config's default text_config) */
    mxl_family_text_prefix(c);
    if (strcmp(s, "mistral") == 0) return mxl_family_mistral.setup(c);
    if (strcmp(s, "ministral3") == 0) return mxl_family_ministral3.setup(c);
    return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: text_config.model_type '%s' is not supported for mistral3 (mistral, ministral3 are)",
                         c->ck->path, s);
}

const mxl_decoder_family mxl_family_mistral3 = {
    .model_type = "mistral3", .registry_id = "mistral3", .hf_class = "Mistral3ForConditionalGeneration", .names = &mxl_names_llama,
    .setup = mistral3_setup, .text_config = true,
    .also_runs = (const char *const[]){"mistral3_vlm", NULL},
};
