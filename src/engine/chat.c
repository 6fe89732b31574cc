/* chat.c - chat prompts through the model's template (chat.h). */
#include "engine/chat.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/model_internal.h"

static bool ends_with(const char *s, size_t n, const char *suf) {
    size_t k = strlen(suf);
    return n >= k && memcmp(s + n - k, suf, k) == 0;
}

/* Appends suf to a malloc'd render. */
static mxl_status append(char **text, size_t *len, const char *suf, mxl_error *err) {
    size_t k = strlen(suf);
    char *p = mxl_realloc(*text, *len + k + 1);
    if (!p) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    memcpy(p + *len, suf, k + 1);
    *text = p;
    *len += k;
    return MXL_OK;
}

mxl_status mxl_chat_render(const mxl_gen_model *m, const json_t *messages, const mxl_chat_opts *o,
                           char **text, size_t *len, mxl_error *err) {
    mxl_chat_render_params p = {0};
    mxl_reasoning reasoning = o ? o->reasoning : MXL_REASONING_AUTO;
    json_t *kw = NULL;
    p.messages = messages;
    p.tools = o ? o->tools : NULL;
    p.extra = o ? o->kwargs : NULL;
    p.add_generation_prompt = o ? o->add_generation_prompt : true;
    p.bos_token = m->bos_text;
    p.eos_token = m->eos_text;
    if (reasoning != MXL_REASONING_AUTO && !(p.extra && json_object_get(p.extra, "enable_thinking"))) {
        kw = p.extra ? json_copy((json_t *)p.extra) : json_object();
        if (!kw) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        json_object_set_new(kw, "enable_thinking", json_boolean(reasoning == MXL_REASONING_ON));
        p.extra = kw;
    }
    mxl_template_error_kind kind;
    mxl_status st = mxl_chat_template_render(m->tmpl, &p, text, len, &kind, err);
    json_decref(kw);
    if (st || reasoning != MXL_REASONING_OFF || !p.add_generation_prompt) return st;
    /* thinking off, but the template opened a think block: close it */
    if (ends_with(*text, *len, "<think>\n") || ends_with(*text, *len, "<think>")) return append(text, len, "</think>", err);
    if (strstr(m->tsrc.text, "<|START_THINKING|>") && ends_with(*text, *len, "<|CHATBOT_TOKEN|>"))
        return append(text, len, "<|START_THINKING|><|END_THINKING|>", err);
    return MXL_OK;
}

mxl_status mxl_chat_tokenize_rendered(const mxl_gen_model *m, const char *text, size_t len,
                                      mxl_token_ids *ids, mxl_error *err) {
    /* A vision-language checkpoint's prompts go through its processor (ProcessorMixin's
     * apply_chat_template): special tokens added unless the render starts with the BOS text
     * (LLaVA's template writes none and its Llama tokenizer adds <s>; Gemma 3's writes it). */
    const size_t bl = strlen(m->bos_text);
    const bool add = m->vlm && !(bl && len >= bl && memcmp(text, m->bos_text, bl) == 0);
    return mxl_tokenizer_encode(m->tok, text, len, MXL_TOK_PARSE_SPECIAL | (add ? MXL_TOK_ADD_SPECIAL : 0), ids, err);
}

mxl_status mxl_chat_tokenize_raw(const mxl_gen_model *m, const char *text, size_t len,
                                 mxl_token_ids *ids, mxl_error *err) {
    return mxl_tokenizer_encode(m->tok, text, len, MXL_TOK_ADD_SPECIAL | MXL_TOK_PARSE_SPECIAL, ids, err);
}
