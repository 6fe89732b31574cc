/* cmd_chat_template.c - `mlxcel chat-template`: renders a model's (or a file's) chat template for
 * a conversation and prints the exact text the model would see; a developer command for checking
 * templates against transformers. Errors (syntax, raise_exception, budget) go to stderr with a
 * non-zero exit. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/alloc.h"
#include "io/gguf.h"
#include "io/json_read.h"
#include "io/store.h"
#include "template/template.h"

static const mxl_cli_opt k_opts[] = {
    {"model", 'm', "MODEL", NULL, "Model directory, .gguf file or repo id whose chat template to render"},
    {"template-file", 0, "FILE", NULL, "Template file instead of a model (.jinja, chat_template.json, tokenizer_config.json, .gguf)"},
    {"template-name", 0, "NAME", "default", "Named template to use when the checkpoint ships several (e.g. tool_use)"},
    {"messages-json", 0, "FILE", NULL, "JSON file with the messages: a list, or an object with \"messages\" (and optional \"tools\", \"vars\"); - reads stdin (required)"},
    {"tools-json", 0, "FILE", NULL, "JSON file with the tool definitions (a list)"},
    {"var", 0, "K=V", NULL, "Template variable; V is read as JSON when it parses (false, 3, [\"a\"]), else as a string (repeatable)"},
    {"add-generation-prompt", 0, NULL, NULL, "Append the assistant turn header (add_generation_prompt=true)"},
    {"now", 0, "DATETIME", "current time", "Pin strftime_now's clock, e.g. 2026-01-15T12:34:56"},
    {"models-dir", 0, "PATH", "MLXCEL_MODELS_DIR / cache root", "Model-store root for repo-id resolution"},
    {"revision", 0, "REV", "main", "Repository revision for repo-id resolution"},
    {NULL, 0, NULL, NULL, NULL},
};

static const mxl_cli_cmd k_cmd = {
    "chat-template",
    "mlxcel chat-template (-m MODEL | --template-file FILE) --messages-json FILE [OPTIONS]",
    "Render a chat template for a conversation exactly as transformers' apply_chat_template would\n"
    "and print the result (no trailing newline is added). bos/eos/pad/unk tokens come from the\n"
    "model's tokenizer configuration; --var overrides them.",
    k_opts, 0, 0, NULL,
};

static json_t *load_json(const char *path, const char *what, char *msg, size_t cap) {
    json_error_t jerr;
    json_t *j = !strcmp(path, "-") ? json_loadf(stdin, JSON_DECODE_ANY, &jerr)
                                   : json_load_file(path, JSON_DECODE_ANY, &jerr);
    if (!j) snprintf(msg, cap, "%s %s:%d: %s", what, path, jerr.line, jerr.text);
    return j;
}

/* tokenizer_config.json token fields are strings or AddedToken objects {"content": ...} */
static void token_from_config(json_t *vars, const json_t *cfg, const char *key) {
    const json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (json_is_string(v)) json_object_set_new(vars, key, json_string(json_string_value(v)));
}

static void tokens_from_gguf(json_t *vars, const char *path) {
    mxl_gguf *g = NULL;
    mxl_error err = {0};
    if (mxl_gguf_open(path, &g, &err) != MXL_OK) return;
    const mxl_gguf_kv *toks = mxl_gguf_find(g, "tokenizer.ggml.tokens");
    static const char *const names[][2] = {{"bos_token", "tokenizer.ggml.bos_token_id"},
                                           {"eos_token", "tokenizer.ggml.eos_token_id"},
                                           {"pad_token", "tokenizer.ggml.padding_token_id"},
                                           {"unk_token", "tokenizer.ggml.unknown_token_id"}};
    for (size_t i = 0; toks && toks->value.type == MXL_GGUF_TYPE_ARRAY && i < 4; i++) {
        uint64_t id;
        if (mxl_gguf_get_u64(g, names[i][1], &id, NULL) != MXL_OK) continue;
        const mxl_gguf_array *a = &toks->value.v.arr;
        if (a->elem_type != MXL_GGUF_TYPE_STRING || id >= a->n) continue;
        json_t *s = json_stringn_nocheck(a->strs[id].data, a->strs[id].len);
        if (s) json_object_set_new(vars, names[i][0], s);
    }
    mxl_gguf_close(g);
}

static void special_tokens(json_t *vars, const char *model_path) {
    struct stat sb;
    if (stat(model_path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        char p[4200];
        snprintf(p, sizeof p, "%s/tokenizer_config.json", model_path);
        json_t *cfg = NULL;
        mxl_error jerr;
        if (mxl_json_load_file_py(p, MXL_JSON_SIDE_FILE_MAX, &cfg, &jerr) != MXL_OK) cfg = NULL;
        if (cfg) {
            token_from_config(vars, cfg, "bos_token");
            token_from_config(vars, cfg, "eos_token");
            token_from_config(vars, cfg, "pad_token");
            token_from_config(vars, cfg, "unk_token");
            json_decref(cfg);
            return;
        }
        char gg[4200] = "";
        mxl_error err = {0};
        if (mxl_store_gguf_in_dir(model_path, gg, sizeof gg, &err) == MXL_OK && gg[0]) tokens_from_gguf(vars, gg);
    } else {
        size_t n = strlen(model_path);
        if (n > 5 && !strcmp(model_path + n - 5, ".gguf")) tokens_from_gguf(vars, model_path);
    }
}

int mxl_cmd_chat_template(int argc, char **argv) {
    mxl_cli_args args;
    int rc = mxl_cli_parse(&k_cmd, argc, argv, &args);
    if (rc == 1) return 0;
    if (rc) return rc;
    const char *model = mxl_cli_get(&args, "model"), *tfile = mxl_cli_get(&args, "template-file");
    const char *mfile = mxl_cli_get(&args, "messages-json");
    if (!model == !tfile) return mxl_cli_usage_error(&k_cmd, "give exactly one of -m/--model and --template-file");
    if (!mfile) return mxl_cli_usage_error(&k_cmd, "--messages-json is required");
    mxl_template_render_opts opts = {0};
    const char *now = mxl_cli_get(&args, "now");
    if (now) {
        if (!mxl_template_parse_time(now, &opts.now_unix))
            return mxl_cli_usage_error(&k_cmd, "--now: expected YYYY-MM-DDTHH:MM:SS, got '%s'", now);
        opts.now_set = true;
    }

    mxl_error err = {0};
    char model_path[MXL_STORE_PATH_MAX] = "";
    const char *tpl_path = tfile;
    if (model) {
        mxl_resolved res;
        if (mxl_store_resolve(model, mxl_cli_get(&args, "models-dir"), mxl_cli_get(&args, "revision"), &res, &err))
            return mxl_cli_fail("%s", err.msg);
        snprintf(model_path, sizeof model_path, "%s", res.path);
        tpl_path = model_path;
    }
    const char *variant = mxl_cli_get(&args, "template-name");
    mxl_chat_template_source src;
    if (mxl_chat_template_find(tpl_path, variant, &src, &err)) return mxl_cli_fail("%s", err.msg);
    if (src.generic)
        fprintf(stderr, "note: %s has no chat template; using the generic chat format (this is likely a base model)\n",
                tpl_path);

    char msg[600];
    json_t *vars = json_object(), *messages = NULL, *tools = NULL, *conv = NULL;
    int ret = 1;
    mxl_template *t = NULL;
    char *out = NULL;
    size_t out_len = 0;
    if (model) special_tokens(vars, model_path);
    conv = load_json(mfile, "--messages-json", msg, sizeof msg);
    if (!conv) {
        mxl_cli_fail("%s", msg);
        goto done;
    }
    if (json_is_array(conv)) {
        messages = json_incref(conv);
    } else if (json_is_object(conv) && json_is_array(json_object_get(conv, "messages"))) {
        messages = json_incref(json_object_get(conv, "messages"));
        json_t *tv = json_object_get(conv, "tools");
        if (tv && !json_is_null(tv)) tools = json_incref(tv);
        json_t *cv = json_object_get(conv, "vars");
        if (json_is_object(cv)) json_object_update(vars, cv);
    } else {
        mxl_cli_fail("--messages-json %s: expected a list of messages or an object with \"messages\"", mfile);
        goto done;
    }
    const char *tj = mxl_cli_get(&args, "tools-json");
    if (tj) {
        json_decref(tools);
        tools = load_json(tj, "--tools-json", msg, sizeof msg);
        if (!tools) {
            mxl_cli_fail("%s", msg);
            goto done;
        }
    }
    bool agp = mxl_cli_has(&args, "add-generation-prompt");
    if (agp) json_object_set_new(vars, "add_generation_prompt", json_true());
    int vi;
    for (vi = 0; vi < args.n_opts && strcmp(args.cmd->opts[vi].long_name, "var") != 0; vi++) {}
    for (int k = 0; vi < args.n_opts && k < args.count[vi]; k++) {
        const char *kv = args.values[vi][k];
        const char *eq = strchr(kv, '=');
        if (!eq || eq == kv) {
            ret = mxl_cli_usage_error(&k_cmd, "--var expects K=V, got '%s'", kv);
            goto done;
        }
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
        json_t *val = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
        if (!val) val = json_string(eq + 1);
        if (!val) {
            ret = mxl_cli_usage_error(&k_cmd, "--var %s: value is not valid UTF-8", key);
            goto done;
        }
        json_object_set_new(vars, key, val);
    }
    if (mxl_template_parse(src.text, strlen(src.text), src.origin, &t, &err)) {
        mxl_cli_fail("%s", err.msg);
        goto done;
    }
    mxl_chat_render_params p = {0};
    p.messages = messages;
    p.tools = tools;
    p.add_generation_prompt = agp || json_is_true(json_object_get(vars, "add_generation_prompt"));
    p.extra = vars;
    p.opts = &opts;
    if (mxl_chat_template_render(t, &p, &out, &out_len, NULL, &err)) {
        mxl_cli_fail("%s", err.msg);
        goto done;
    }
    fwrite(out, 1, out_len, stdout);
    fflush(stdout);
    ret = 0;
done:
    mxl_free(out);
    mxl_template_destroy(t);
    json_decref(conv);
    json_decref(messages);
    json_decref(tools);
    json_decref(vars);
    mxl_chat_template_source_free(&src);
    return ret;
}
