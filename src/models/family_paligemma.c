/* family_paligemma.c - the text decoder of PaliGemma (transformers modeling_paligemma.py,
 * PaliGemmaForConditionalGeneration, model_type paligemma): the decoder of text_config, Gemma's
 * (PaliGemma 1, text_config.model_type gemma, the default) or Gemma 2's (PaliGemma 2), which the
 * family of that model type sets up, at language_model.model.* (the released checkpoints) or
 * model.language_model.* (transformers 5). The SigLIP tower, projector and the prefix-LM attention
 * of a prompt with images are models/vlm_paligemma.c's; text alone runs causally, as transformers
 * runs it without token_type_ids. (PaliGemma counts positions from 1: RoPE sees the same
 * distances, so nothing changes but rounding.) */
#include <jansson.h>
#include <string.h>

#include "models/decoder_family.h"

extern const mxl_decoder_family mxl_family_gemma, mxl_family_gemma2;

static mxl_status paligemma_setup(mxl_family_ctx *c) {
    json_t *mt = json_object_get(c->raw, "model_type");
    const char *s = json_is_string(mt) ? json_string_value(mt) : "gemma"; /* (PaliGemmaConfig's default text_config) */
    if (strcmp(s, "gemma") == 0) {
        *c->names = mxl_names_llama; /* Gemma 1: post_attention_layernorm is the MLP's norm */
        mxl_family_text_prefix(c);
        return mxl_family_gemma.setup(c);
    }
    if (strcmp(s, "gemma2") == 0) {
        mxl_family_text_prefix(c);
        return mxl_family_gemma2.setup(c);
    }
    return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: text_config.model_type '%s' is not supported for paligemma (gemma, gemma2 are)",
                         c->ck->path, s);
}

const mxl_decoder_family mxl_family_paligemma = {
    .model_type = "paligemma", .registry_id = "paligemma", .hf_class = "PaliGemmaForConditionalGeneration", .names = &mxl_names_gemma2,
    .setup = paligemma_setup, .text_config = true,
    .gaps = "images through generate --image only (the server's image parts go through a chat template, which PaliGemma has not)",
};
