/* template.h - Jinja2 chat-template engine (public API).
 *
 * Parses a Jinja2 template once (mxl_template_parse) and renders it against a JSON context with
 * the semantics Hugging Face transformers uses for apply_chat_template: trim_blocks and
 * lstrip_blocks on, loop controls, `{% generation %}` renders its body, an immutable sandbox
 * (list.append & co. are refused), Python's str/int/float formatting, `tojson` as
 * json.dumps(ensure_ascii=False), raise_exception() and strftime_now() with a pinnable clock.
 * Every render runs under a budget (steps, call depth, output and memory size) so hostile
 * templates stop with an error instead of hanging.
 *
 * Chat-level helpers (mxl_chat_template_*) build the usual variables (messages, tools,
 * documents, add_generation_prompt, bos/eos/pad/unk tokens, extra kwargs) and find the template
 * of a checkpoint (tokenizer_config.json, chat_template.jinja, chat_template.json, GGUF). */
#ifndef MXL_TEMPLATE_TEMPLATE_H
#define MXL_TEMPLATE_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct mxl_template mxl_template;

/* Budget of one render; zero fields take the defaults below. */
typedef struct mxl_template_limits {
    uint64_t max_steps;   /* evaluation steps (nodes, loop iterations, bytes copied / 64) */
    int max_depth;        /* nested macro calls / expression recursion */
    size_t max_output;    /* bytes of output and of any single string built */
    size_t max_memory;    /* bytes of scratch memory one render may use */
} mxl_template_limits;

#define MXL_TEMPLATE_DEFAULT_MAX_STEPS 20000000ull
#define MXL_TEMPLATE_DEFAULT_MAX_DEPTH 100
#define MXL_TEMPLATE_DEFAULT_MAX_OUTPUT (16u << 20)
#define MXL_TEMPLATE_DEFAULT_MAX_MEMORY (128u << 20)
/* Largest template source mxl_template_parse accepts. */
#define MXL_TEMPLATE_MAX_SOURCE (16u << 20)

/* Kind of a render failure (mxl_template_render's `kind` out-parameter). */
typedef enum mxl_template_error_kind {
    MXL_TEMPLATE_OK = 0,
    MXL_TEMPLATE_RAISED,    /* raise_exception(msg): the message is the template's */
    MXL_TEMPLATE_UNDEFINED, /* attribute/operation on an undefined value */
    MXL_TEMPLATE_TYPE,      /* Python TypeError equivalents */
    MXL_TEMPLATE_VALUE,     /* Python ValueError equivalents */
    MXL_TEMPLATE_SECURITY,  /* refused by the sandbox (e.g. list.append) */
    MXL_TEMPLATE_BUDGET,    /* steps / depth / output / memory budget exhausted */
    MXL_TEMPLATE_SYNTAX,
    MXL_TEMPLATE_OTHER
} mxl_template_error_kind;

typedef struct mxl_template_render_opts {
    mxl_template_limits limits;
    bool now_set;     /* pin strftime_now's clock */
    int64_t now_unix; /* seconds since the epoch, UTC, when now_set */
} mxl_template_render_opts;

/* Parses `src` (n bytes). `name` labels error messages ("<name>:<line>:<col>: ..."). Syntax
 * errors return MXL_ERR_FORMAT with line, column and what was expected. */
mxl_status mxl_template_parse(const char *src, size_t n, const char *name, mxl_template **out,
                              mxl_error *err);
void mxl_template_destroy(mxl_template *t);
const char *mxl_template_name(const mxl_template *t);

/* Renders with the variables of the JSON object `vars` (may be NULL). On success *out is a
 * malloc'd NUL-terminated string (free it), *out_len its length (may be NULL). On failure the
 * error message reads "<name>:<line>: <Kind>: <message>" where Kind is the Python exception name
 * (TemplateError for raise_exception, UndefinedError, TypeError, SecurityError, ...), and *kind
 * (may be NULL) says which. `opts` may be NULL (defaults, real clock). */
mxl_status mxl_template_render(const mxl_template *t, const json_t *vars,
                               const mxl_template_render_opts *opts, char **out, size_t *out_len,
                               mxl_template_error_kind *kind, mxl_error *err);

/* ---------------------------------------------------------------- chat level */

typedef struct mxl_chat_render_params {
    const json_t *messages;  /* array of {role, content (string or list of parts), ...} */
    const json_t *tools;     /* array or NULL (left undefined) */
    const json_t *documents; /* array or NULL (left undefined) */
    bool add_generation_prompt;
    const char *bos_token, *eos_token, *pad_token, *unk_token; /* NULL: not set */
    const json_t *extra;     /* object of extra variables (enable_thinking, ...) or NULL */
    const mxl_template_render_opts *opts; /* NULL: defaults */
} mxl_chat_render_params;

/* Builds the variables transformers passes (messages, tools, documents, add_generation_prompt,
 * special tokens, extra kwargs overriding them) and renders. */
mxl_status mxl_chat_template_render(const mxl_template *t, const mxl_chat_render_params *p,
                                    char **out, size_t *out_len, mxl_template_error_kind *kind,
                                    mxl_error *err);

/* A chat template found for a checkpoint. */
typedef struct mxl_chat_template_source {
    char *text;    /* malloc'd template source */
    char *origin;  /* malloc'd description: "tokenizer_config.json", "model.gguf (GGUF ...)" */
    bool generic;  /* no template in the checkpoint: the generic ChatML-style fallback */
} mxl_chat_template_source;

/* Finds the chat template of `path` (a checkpoint directory, a .gguf file, or a template file:
 * .jinja read verbatim, .json read as chat_template.json / tokenizer_config.json). `variant`
 * picks a named template ("default", "tool_use"); NULL means "default" (or the only one).
 * Directories are searched in order: chat_template.jinja, chat_template.json,
 * tokenizer_config.json, then any *.gguf. Without any template the generic format is returned
 * (generic = true). */
mxl_status mxl_chat_template_find(const char *path, const char *variant,
                                  mxl_chat_template_source *out, mxl_error *err);
void mxl_chat_template_source_free(mxl_chat_template_source *s);

/* The generic fallback template (ChatML-style). */
const char *mxl_chat_template_generic(void);

/* Parses "2026-01-15T12:34:56" (UTC; "Z" / date-only accepted) into seconds since the epoch. */
bool mxl_template_parse_time(const char *s, int64_t *out);

#endif
