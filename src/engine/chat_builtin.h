/* chat_builtin.h - llama.cpp's built-in chat template names (`--chat-template chatml`,
 * `command-r`, `llama3`, ...) as Jinja sources for mlxcel's template engine.
 *
 * llama-server accepts the name of one of llama.cpp's hand-written chat formats
 * (llama_chat_builtin_templates / llama_chat_apply_template, src/llama-chat.cpp) in place of a
 * Jinja template. Each name here maps to a Jinja template that renders, with the variables
 * mxl_chat_template_render sets (messages with string or null content, add_generation_prompt),
 * byte for byte what that legacy formatter gives; tests/fixtures/templates/builtin_templates.json
 * holds llama.cpp's own output for the check. */
#ifndef MXL_ENGINE_CHAT_BUILTIN_H
#define MXL_ENGINE_CHAT_BUILTIN_H

#include <stddef.h>

/* Jinja source of the built-in template `name` (static storage), or NULL when `name` (may be
 * NULL) is not a built-in name. Names are matched exactly, as llama.cpp does. */
const char *mxl_chat_builtin_template(const char *name);

/* The i-th built-in name, in llama.cpp's (sorted) order, or NULL when i is past the last one;
 * for help and errors: for (size_t i = 0; mxl_chat_builtin_name(i); i++) ... */
const char *mxl_chat_builtin_name(size_t i);

#endif
