/* family_llava.c - the text decoder of LLaVA (transformers modeling_llava.py,
 * LlavaForConditionalGeneration: llava-1.5 over Vicuna / Llama, BakLLaVA over Mistral,
 * llava-interleave over Qwen 2, Pixtral-12B over Mistral Nemo): a CLIP or SigLIP
 * (models/vlm_llava.c) or Pixtral (models/vlm_pixtral.c) vision tower and projector before the
 * text model of text_config, whose own family (by text_config.model_type, Llama's as LlavaConfig
 * defaults) sets it up. The decoder sits at language_model.model.* (the released
 * layout, which transformers 5 also saves) or model.language_model.*. LLaVA-NeXT
 * (modeling_llava_next.py, LlavaNextForConditionalGeneration: llava-v1.6 over Mistral, Vicuna,
 * Yi-34B) has the same text side; its anyres vision side is vlm_llava.c's too. Aya Vision
 * (modeling_aya_vision.py, AyaVisionForConditionalGeneration) puts a Cohere2 text_config the same
 * way behind its SigLIP tower (vlm_aya_vision.c), its logits unscaled. Idefics3 and SmolVLM
 * (modeling_idefics3.py / modeling_smolvlm.py) put a Llama text_config at model.text_model.*
 * behind their vision transformer and pixel-shuffle connector (vlm_idefics3.c); Idefics2 a
 * Mistral one behind its vision transformer and perceiver resampler (vlm_idefics2.c). InternVL
 * (modeling_internvl.py, InternVLForConditionalGeneration: the InternVL3 / 3.5 "-hf" checkpoints)
 * puts a Qwen2 / Qwen3 / Llama text_config behind InternViT (vlm_internvl.c). */
#include <jansson.h>
#include <string.h>

#include "models/decoder_family.h"

static mxl_status llava_setup(mxl_family_ctx *c) {
    json_t *mt = json_object_get(c->raw, "model_type");
    const char *s = json_is_string(mt) ? json_string_value(mt) : "llama";
    const mxl_decoder_family *tf = c->gguf ? NULL : mxl_decoder_family_find(s);
    if (!tf || tf->text_config)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: text_config.model_type '%s' is not supported for %s (a text decoder family of 'mlxcel arch' is)",
                             c->ck->path, s, c->ck->config.model_type);
    *c->names = *tf->names;
    mxl_family_text_prefix(c);
    return tf->setup(c);
}

const mxl_decoder_family mxl_family_llava = {
    .model_type = "llava", .registry_id = "llava", .hf_class = "LlavaForConditionalGeneration", .names = &mxl_names_llama,
    .setup = llava_setup, .also_runs = (const char *const[]){"pixtral", NULL}, .text_config = true,
};

const mxl_decoder_family mxl_family_llava_next = {
    .model_type = "llava_next", .registry_id = "llava", .hf_class = "LlavaNextForConditionalGeneration", .names = &mxl_names_llama,
    .setup = llava_setup, .text_config = true,
};

/* AyaVisionForConditionalGeneration's own lm_head over the text model's output: no Cohere
 * logit_scale (text_config's is not applied). */
static mxl_status aya_vision_setup(mxl_family_ctx *c) {
    mxl_status st = llava_setup(c);
    if (!st) c->hp->logit_scale = 1.0f;
    return st;
}

const mxl_decoder_family mxl_family_aya_vision = {
    .model_type = "aya_vision", .registry_id = "aya_vision", .hf_class = "AyaVisionForConditionalGeneration", .names = &mxl_names_llama,
    .setup = aya_vision_setup, .text_config = true,
};

const mxl_decoder_family mxl_family_idefics3 = {
    .model_type = "idefics3", .registry_id = "smolvlm", .hf_class = "Idefics3ForConditionalGeneration", .names = &mxl_names_llama,
    .setup = llava_setup, .text_config = true,
};

const mxl_decoder_family mxl_family_smolvlm = {
    .model_type = "smolvlm", .registry_id = "smolvlm", .hf_class = "SmolVLMForConditionalGeneration", .names = &mxl_names_llama,
    .setup = llava_setup, .text_config = true, .gaps = "video input (SmolVLM2)",
};

const mxl_decoder_family mxl_family_internvl = {
    .model_type = "internvl", .registry_id = "internvl_chat", .hf_class = "InternVLForConditionalGeneration", .names = &mxl_names_llama,
    .setup = llava_setup, .text_config = true, .gaps = "video input; the original remote-code layout (model_type internvl_chat)",
};

const mxl_decoder_family mxl_family_idefics2 = {
    .model_type = "idefics2", .registry_id = "idefics2", .hf_class = "Idefics2ForConditionalGeneration", .names = &mxl_names_llama,
    .setup = llava_setup, .text_config = true,
};
