/* chat.c - chat prompts through the model's template (chat.h). */
#include "engine/chat.h"

#include <stdlib.h>
#include <string.h>

#include "engine/model_internal.h"

mxl_status mxl_chat_render(const mxl_gen_model *m, const json_t *messages, const mxl_chat_opts *o,
                           char **text, size_t *len, mxl_error *err) {
    mxl_chat_render_params p = {0};
    p.messages = messages;
    p.tools = o ? o->tools : NULL;
    p.extra = o ? o->kwargs : NULL;
    p.add_generation_prompt = o ? o->add_generation_prompt : true;
    p.bos_token = m->bos_text;
    p.eos_token = m->eos_text;
    mxl_template_error_kind kind;
    return mxl_chat_template_render(m->tmpl, &p, text, len, &kind, err);
}

mxl_status mxl_chat_tokenize_rendered(const mxl_gen_model *m, const char *text, size_t len,
                                      mxl_token_ids *ids, mxl_error *err) {
    return mxl_tokenizer_encode(m->tok, text, len, MXL_TOK_PARSE_SPECIAL, ids, err);
}

mxl_status mxl_chat_tokenize_raw(const mxl_gen_model *m, const char *text, size_t len,
                                 mxl_token_ids *ids, mxl_error *err) {
    return mxl_tokenizer_encode(m->tok, text, len, MXL_TOK_ADD_SPECIAL | MXL_TOK_PARSE_SPECIAL, ids, err);
}
