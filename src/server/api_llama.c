/* api_llama.c - llama-server's own routes: /completion (and /completions), /tokenize,
 * /detokenize, /apply-template, /health, /props, /slots, /metrics, in its field names and
 * shapes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "models/lora.h"
#include "server/constraint.h"
#include "server/gen_call.h"
#include "server/request.h"
#include "server/routes.h"

/* The fields /completion and /infill share: sampling, grammar, stream, n_probs, ... false: msg
 * says why (400). */
static bool parse_llama_call(mxl_server *s, const json_t *body, mxl_gen_call *g, char *msg, size_t ml) {
    const json_t *v;
    if (!mxl_srv_parse_params(s, body, &g->params, &g->bias, msg, ml)) return false;
    /* grammar / json_schema */
    if (!mxl_srv_parse_constraint(s, body, false, &g->params, msg, ml)) return false;
    v = json_object_get(body, "stream");
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v)) {
            snprintf(msg, ml, "'stream' must be a boolean");
            return false;
        }
        g->stream = json_is_true(v);
    }
    g->return_progress = json_is_true(json_object_get(body, "return_progress"));
    g->timings_per_token = json_is_true(json_object_get(body, "timings_per_token"));
    v = json_object_get(body, "n_probs");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > MXL_SEQ_MAX_PROBS) {
            snprintf(msg, ml, "'n_probs' must be an integer between 0 and %d", MXL_SEQ_MAX_PROBS);
            return false;
        }
        g->top_logprobs = (int)json_integer_value(v);
        g->params.n_probs = g->top_logprobs;
    }
    v = json_object_get(body, "post_sampling_probs");
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v)) {
            snprintf(msg, ml, "'post_sampling_probs' must be a boolean");
            return false;
        }
        g->params.post_sampling_probs = json_is_true(v);
    }
    if (!mxl_srv_parse_id_slot(body, g, msg, ml)) return false;
    v = json_object_get(body, "cache_prompt");
    if (v && !json_is_null(v) && !json_is_boolean(v)) {
        snprintf(msg, ml, "'cache_prompt' must be a boolean");
        return false;
    }
    return true;
}

static mxl_gen_call *new_llama_call(mxl_server *s, mxl_http_req *r) {
    mxl_gen_call *g = mxl_calloc(1, sizeof *g);
    if (!g) return NULL;
    g->srv = s;
    g->r = r;
    g->kind = MXL_GEN_LLAMA;
    g->n = 1;
    return g;
}

void mxl_api_llama_completion(mxl_server *s, mxl_http_req *r) {
    json_t *body = mxl_srv_body_json(s, r, MXL_API_LLAMA);
    if (!body) return;
    char msg[512] = "";
    mxl_gen_call *g = new_llama_call(s, r);
    if (!g) {
        json_decref(body);
        mxl_srv_error(r, MXL_API_LLAMA, 500, "server_error", "out of memory");
        return;
    }
    if (!parse_llama_call(s, body, g, msg, sizeof msg)) goto bad;
    if (!mxl_srv_parse_prompts(s, json_object_get(body, "prompt"), g, msg, sizeof msg)) goto bad;
    mxl_gen_call_run(g);
    json_decref(body);
    return;
bad:
    mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "%s", msg);
    mxl_gen_call_free(g);
    json_decref(body);
}

/* --- /infill ------------------------------------------------------------------------------------ */

typedef struct id_vec {
    int32_t *ids;
    size_t n, cap;
    bool oom;
} id_vec;

static void vec_put(id_vec *v, size_t at, const int32_t *ids, size_t n) {
    if (v->oom || n == 0) return;
    if (v->n + n > v->cap) {
        size_t cap = v->cap ? v->cap : 256;
        while (cap < v->n + n) cap *= 2;
        int32_t *p = mxl_realloc(v->ids, cap * sizeof *p);
        if (!p) {
            v->oom = true;
            return;
        }
        v->ids = p, v->cap = cap;
    }
    memmove(v->ids + at + n, v->ids + at, (v->n - at) * sizeof *v->ids);
    memcpy(v->ids + at, ids, n * sizeof *ids);
    v->n += n;
}
static void vec_push(id_vec *v, int32_t id) { vec_put(v, v->n, &id, 1); }

/* Appends text's ids (no special tokens added; special_parse: llama.cpp's parse_special). */
static bool vec_text(const mxl_tokenizer *tok, id_vec *v, const char *text, size_t len, bool parse_special, char *msg, size_t ml) {
    mxl_token_ids t = {0};
    mxl_error err = {0};
    if (mxl_tokenizer_encode(tok, text, len, parse_special ? MXL_TOK_PARSE_SPECIAL : 0, &t, &err))
        return snprintf(msg, ml, "%s", err.msg), false;
    vec_put(v, v->n, t.ids, t.n);
    mxl_token_ids_free(&t);
    return true;
}

/* llama-server's tokenize_mixed(vocab, j, add_special=false, parse_special=false): a string, or an
 * array of strings and token ids. */
static bool vec_mixed(const mxl_tokenizer *tok, id_vec *v, const json_t *j, const char *field, char *msg, size_t ml) {
    if (json_is_string(j)) return vec_text(tok, v, json_string_value(j), json_string_length(j), false, msg, ml);
    if (!json_is_array(j)) return snprintf(msg, ml, "\"%s\" must be a string or an array of strings and token ids", field), false;
    size_t i;
    const json_t *e;
    json_array_foreach(j, i, e) {
        if (json_is_string(e)) {
            if (!vec_text(tok, v, json_string_value(e), json_string_length(e), false, msg, ml)) return false;
        } else if (json_is_integer(e) && json_integer_value(e) >= 0 && json_integer_value(e) < (json_int_t)mxl_tokenizer_n_vocab(tok)) {
            vec_push(v, (int32_t)json_integer_value(e));
        } else {
            return snprintf(msg, ml, "\"%s\" must be a string or an array of strings and token ids", field), false;
        }
    }
    return true;
}

/* llama-server's format_prompt_infill (tools/server/server-common.cpp), the repo-level FIM pattern
 * (https://arxiv.org/pdf/2409.12186) when the vocabulary has <|repo_name|> / <|file_sep|>:
 *   [FIM_REP]myproject\n [FIM_SEP]filename0\n extra0 ... [FIM_SEP]filename\n
 *   [BOS] [FIM_PRE]prefix prompt [FIM_SUF]suffix [FIM_MID]
 * (--spm-infill: [BOS] [FIM_SUF]suffix [FIM_PRE]prefix prompt [FIM_MID])
 * with the prefix cut to its last 3/4 of a batch, the suffix to 1/4 of a batch less the prompt,
 * and the extra context to its last n_ctx - n_batch - 2 n_predict tokens. */
static bool build_infill(mxl_server *s, const json_t *prefix, const json_t *suffix, const json_t *extra, const id_vec *prompt, id_vec *out,
                         char *msg, size_t ml) {
    const mxl_tokenizer *tok = s->tok;
    const int32_t pre = mxl_tokenizer_fim_id(tok, MXL_TOK_FIM_PRE), suf = mxl_tokenizer_fim_id(tok, MXL_TOK_FIM_SUF),
                  mid = mxl_tokenizer_fim_id(tok, MXL_TOK_FIM_MID), rep = mxl_tokenizer_fim_id(tok, MXL_TOK_FIM_REP),
                  sep = mxl_tokenizer_fim_id(tok, MXL_TOK_FIM_SEP);
    const mxl_server_config *cfg = s->cfg;
    const int64_t n_batch = cfg->prefill_chunk > 0 ? cfg->prefill_chunk : cfg->batch_size > 0 ? cfg->batch_size : 2048;
    const int64_t n_predict = cfg->n_predict, n_ctx = s->slot_ctx;
    id_vec ex = {0}, tp = {0}, ts = {0};
    bool ok = vec_mixed(tok, &tp, prefix, "input_prefix", msg, ml) && vec_mixed(tok, &ts, suffix, "input_suffix", msg, ml);
    if (ok && rep >= 0) {
        vec_push(&ex, rep);
        ok = vec_text(tok, &ex, "myproject\n", 10, false, msg, ml);
    }
    size_t i;
    const json_t *c;
    json_array_foreach(extra, i, c) {
        if (!ok) break;
        const json_t *fn = json_object_get(c, "filename"), *tx = json_object_get(c, "text");
        if (sep >= 0) {
            char name[4096];
            int n = snprintf(name, sizeof name, "%s\n", json_is_string(fn) ? json_string_value(fn) : "tmp");
            vec_push(&ex, sep);
            ok = vec_text(tok, &ex, name, n < (int)sizeof name ? (size_t)n : sizeof name - 1, false, msg, ml);
        } else {
            ok = vec_text(tok, &ex, "\n\n--- snippet ---\n\n", 19, false, msg, ml); /* the chunk separator */
        }
        if (ok) ok = vec_text(tok, &ex, json_string_value(tx), json_string_length(tx), false, msg, ml);
    }
    if (ok && sep >= 0) {
        vec_push(&ex, sep);
        ok = vec_text(tok, &ex, "filename\n", 9, false, msg, ml);
    }
    if (ok) {
        int64_t n_prefix_take = (int64_t)tp.n < 3 * (n_batch / 4) ? (int64_t)tp.n : 3 * (n_batch / 4);
        int64_t room = n_batch / 4 - (2 + (int64_t)prompt->n);
        if (room < 0) room = 0;
        int64_t n_suffix_take = (int64_t)ts.n < room ? (int64_t)ts.n : room;
        int64_t n_extra_take = n_ctx - n_batch - 2 * n_predict;
        if (n_extra_take < 0) n_extra_take = 0;
        if (n_extra_take > (int64_t)ex.n) n_extra_take = (int64_t)ex.n;
        vec_put(out, 0, ex.ids + ex.n - n_extra_take, (size_t)n_extra_take);
        if (mxl_tokenizer_add_bos(tok) && mxl_tokenizer_bos_id(tok) >= 0) vec_push(out, mxl_tokenizer_bos_id(tok));
        for (int part = 0; part < 2; part++) { /* prefix then suffix; --spm-infill: suffix then prefix */
            if ((part == 0) != cfg->spm_infill) {
                vec_push(out, pre);
                vec_put(out, out->n, tp.ids + tp.n - n_prefix_take, (size_t)n_prefix_take);
                vec_put(out, out->n, prompt->ids, prompt->n);
            } else {
                vec_push(out, suf);
                vec_put(out, out->n, ts.ids, (size_t)n_suffix_take);
            }
        }
        vec_push(out, mid);
        if (ex.oom || tp.oom || ts.oom || out->oom) {
            snprintf(msg, ml, "out of memory");
            ok = false;
        }
    }
    mxl_free(ex.ids);
    mxl_free(tp.ids);
    mxl_free(ts.ids);
    return ok;
}

void mxl_api_llama_infill(mxl_server *s, mxl_http_req *r) {
    char msg[512] = "";
    /* llama-server: the model must have the three FIM tokens (501 otherwise, naming the missing) */
    if (mxl_tokenizer_fim_id(s->tok, MXL_TOK_FIM_PRE) < 0) strcat(msg, "prefix token is missing. ");
    if (mxl_tokenizer_fim_id(s->tok, MXL_TOK_FIM_SUF) < 0) strcat(msg, "suffix token is missing. ");
    if (mxl_tokenizer_fim_id(s->tok, MXL_TOK_FIM_MID) < 0) strcat(msg, "middle token is missing. ");
    if (msg[0]) {
        mxl_srv_error(r, MXL_API_LLAMA, 501, "not_supported_error", "Infill is not supported by this model: %s", msg);
        return;
    }
    json_t *body = mxl_srv_body_json(s, r, MXL_API_LLAMA);
    if (!body) return;
    mxl_gen_call *g = new_llama_call(s, r);
    id_vec prompt = {0}, ids = {0};
    if (!g) {
        json_decref(body);
        mxl_srv_error(r, MXL_API_LLAMA, 500, "server_error", "out of memory");
        return;
    }
    const json_t *p = json_object_get(body, "prompt"), *extra = json_object_get(body, "input_extra");
    if (p && !json_is_string(p)) {
        snprintf(msg, sizeof msg, "\"prompt\" must be a string");
        goto bad;
    }
    if (!json_object_get(body, "input_prefix")) {
        snprintf(msg, sizeof msg, "\"input_prefix\" is required");
        goto bad;
    }
    if (!json_object_get(body, "input_suffix")) {
        snprintf(msg, sizeof msg, "\"input_suffix\" is required");
        goto bad;
    }
    if (extra && !json_is_array(extra)) {
        snprintf(msg, sizeof msg, "\"input_extra\" must be an array of {\"filename\": string, \"text\": string}");
        goto bad;
    }
    size_t i;
    const json_t *c;
    json_array_foreach(extra, i, c) {
        const json_t *tx = json_object_get(c, "text"), *fn = json_object_get(c, "filename");
        if (!json_is_string(tx)) {
            snprintf(msg, sizeof msg, "extra_context chunk must contain a \"text\" field with a string value");
            goto bad;
        }
        if (fn && !json_is_string(fn)) {
            snprintf(msg, sizeof msg, "extra_context chunk's \"filename\" field must be a string");
            goto bad;
        }
    }
    if (!parse_llama_call(s, body, g, msg, sizeof msg)) goto bad;
    /* the prompt goes after the prefix, special tokens parsed, none added */
    if (p && !vec_text(s->tok, &prompt, json_string_value(p), json_string_length(p), true, msg, sizeof msg)) goto bad;
    if (!build_infill(s, json_object_get(body, "input_prefix"), json_object_get(body, "input_suffix"), extra, &prompt, &ids, msg, sizeof msg))
        goto bad;
    g->prompt_ids = ids.ids;
    g->n_prompt = ids.n;
    ids.ids = NULL;
    {
        char *text = NULL;
        size_t len = 0;
        mxl_error err = {0};
        if (!mxl_tokenizer_decode(s->tok, g->prompt_ids, g->n_prompt, false, &text, &len, &err)) g->prompt_text = text;
    }
    mxl_free(prompt.ids);
    json_decref(body);
    mxl_gen_call_run(g);
    return;
bad:
    mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "%s", msg);
    mxl_free(prompt.ids);
    mxl_free(ids.ids);
    mxl_gen_call_free(g);
    json_decref(body);
}

/* --- POST /slots/:id_slot?action=save|restore|erase ------------------------------------------------ */

/* llama.cpp's fs_validate_filename, as strict: a plain file name inside --slot-save-path (no
 * directory parts, no "..", no leading dot, nothing a shell or another OS would read otherwise). */
static bool valid_slot_filename(const char *f) {
    size_t n = strlen(f);
    if (n == 0 || n > 255 || f[0] == '.' || f[0] == ' ' || f[n - 1] == ' ' || f[n - 1] == '.' || strstr(f, "..")) return false;
    for (const unsigned char *p = (const unsigned char *)f; *p; p++)
        if (*p < 0x20 || *p == 0x7f || strchr("/\\:*?\"<>|", *p)) return false;
    return true;
}

void mxl_api_llama_slot_action(mxl_server *s, mxl_http_req *r) {
    const char *dir = s->cfg->slot_save_path;
    if (!dir || !*dir) {
        mxl_srv_error(r, MXL_API_LLAMA, 501, "not_supported_error", "This server does not support slots action. Start it with `--slot-save-path`");
        return;
    }
    const char *id_text = mxl_http_path(r) + strlen("/slots/");
    if (s->prefix[0]) id_text = strstr(mxl_http_path(r), "/slots/") + strlen("/slots/");
    char *end = NULL;
    long id = strtol(id_text, &end, 10);
    if (!*id_text || *end || id < 0 || id > INT32_MAX) {
        mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "Invalid slot ID");
        return;
    }
    const char *action = mxl_http_query(r, "action");
    mxl_sched_slot_op op;
    if (action && !strcmp(action, "save")) op = MXL_SCHED_SLOT_SAVE;
    else if (action && !strcmp(action, "restore")) op = MXL_SCHED_SLOT_RESTORE;
    else if (action && !strcmp(action, "erase")) op = MXL_SCHED_SLOT_ERASE;
    else {
        mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "Invalid action");
        return;
    }
    char path[4096] = "";
    const char *filename = NULL;
    json_t *body = NULL;
    if (op != MXL_SCHED_SLOT_ERASE) {
        if (!(body = mxl_srv_body_json(s, r, MXL_API_LLAMA))) return;
        const json_t *f = json_object_get(body, "filename");
        filename = json_string_value(f);
        if (!filename) {
            json_decref(body);
            mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "\"filename\" is required (a string)");
            return;
        }
        size_t dl = strlen(dir);
        if (!valid_slot_filename(filename) ||
            snprintf(path, sizeof path, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", filename) >= (int)sizeof path) {
            json_decref(body);
            mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "Invalid filename");
            return;
        }
    }
    mxl_sched_slot_result res = {0};
    mxl_error err = {0};
    mxl_status st = mxl_sched_slot_action(s->sched, (int)id, op, path, s->model_name, &res, &err);
    if (st) {
        mxl_srv_error(r, MXL_API_LLAMA, st == MXL_ERR_ARG ? 400 : st == MXL_ERR_UNSUPPORTED ? 503 : 500,
                      st == MXL_ERR_ARG ? "invalid_request_error" : "server_error", "%s", err.msg);
    } else if (op == MXL_SCHED_SLOT_SAVE) {
        mxl_http_send_json(r, 200, json_pack("{s:i, s:s, s:I, s:I, s:{s:f}}", "id_slot", (int)id, "filename", filename, "n_saved",
                                             (json_int_t)res.n_tokens, "n_written", (json_int_t)res.n_bytes, "timings", "save_ms", res.ms));
    } else if (op == MXL_SCHED_SLOT_RESTORE) {
        mxl_http_send_json(r, 200, json_pack("{s:i, s:s, s:I, s:I, s:{s:f}}", "id_slot", (int)id, "filename", filename, "n_restored",
                                             (json_int_t)res.n_tokens, "n_read", (json_int_t)res.n_bytes, "timings", "restore_ms", res.ms));
    } else {
        mxl_http_send_json(r, 200, json_pack("{s:i, s:I}", "id_slot", (int)id, "n_erased", (json_int_t)res.n_tokens));
    }
    json_decref(body);
}

/* A token's text as llama-server reports a piece: a string when it is valid UTF-8, else the
 * list of its bytes. */
static json_t *piece_json(const mxl_server *s, int32_t id) {
    char *text = NULL;
    size_t len = 0;
    mxl_error err = {0};
    if (mxl_tokenizer_decode(s->tok, &id, 1, false, &text, &len, &err)) return json_string("");
    json_t *j = json_stringn(text, len);
    if (!j) {
        j = json_array();
        for (size_t i = 0; i < len; i++) json_array_append_new(j, json_integer((unsigned char)text[i]));
    }
    mxl_free(text);
    return j;
}

static bool opt_bool(const json_t *body, const char *key, bool dflt, bool *out, char *msg, size_t ml) {
    const json_t *v = json_object_get(body, key);
    *out = dflt;
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) return snprintf(msg, ml, "'%s' must be a boolean", key), false;
    *out = json_is_true(v);
    return true;
}

void mxl_api_llama_tokenize(mxl_server *s, mxl_http_req *r) {
    json_t *body = mxl_srv_body_json(s, r, MXL_API_LLAMA);
    if (!body) return;
    char msg[256];
    bool add_special, parse_special, with_pieces;
    const json_t *content = json_object_get(body, "content");
    if (!opt_bool(body, "add_special", false, &add_special, msg, sizeof msg) || !opt_bool(body, "parse_special", true, &parse_special, msg, sizeof msg) ||
        !opt_bool(body, "with_pieces", false, &with_pieces, msg, sizeof msg)) {
        mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "%s", msg);
        json_decref(body);
        return;
    }
    if (!json_is_string(content)) {
        mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "'content' must be a string");
        json_decref(body);
        return;
    }
    mxl_token_ids ids = {0};
    mxl_error err = {0};
    unsigned flags = (add_special ? MXL_TOK_ADD_SPECIAL : 0) | (parse_special ? MXL_TOK_PARSE_SPECIAL : 0);
    if (mxl_tokenizer_encode(s->tok, json_string_value(content), json_string_length(content), flags, &ids, &err)) {
        mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "%s", err.msg);
        json_decref(body);
        return;
    }
    json_t *tokens = json_array();
    for (size_t i = 0; i < ids.n; i++)
        json_array_append_new(tokens, with_pieces ? json_pack("{s:i, s:o}", "id", ids.ids[i], "piece", piece_json(s, ids.ids[i]))
                                                  : json_integer(ids.ids[i]));
    mxl_token_ids_free(&ids);
    json_decref(body);
    mxl_http_send_json(r, 200, json_pack("{s:o}", "tokens", tokens));
}

void mxl_api_llama_detokenize(mxl_server *s, mxl_http_req *r) {
    json_t *body = mxl_srv_body_json(s, r, MXL_API_LLAMA);
    if (!body) return;
    const json_t *tokens = json_object_get(body, "tokens");
    if (tokens && !json_is_array(tokens)) {
        mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "'tokens' must be an array of token ids");
        json_decref(body);
        return;
    }
    size_t n = tokens ? json_array_size(tokens) : 0, i;
    int32_t *ids = mxl_malloc((n ? n : 1) * sizeof(int32_t));
    const json_t *e;
    int32_t vocab = (int32_t)mxl_tokenizer_n_vocab(s->tok);
    if (!ids) {
        json_decref(body);
        mxl_srv_error(r, MXL_API_LLAMA, 500, "server_error", "out of memory");
        return;
    }
    if (tokens) json_array_foreach(tokens, i, e) {
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= vocab) {
                mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "tokens[%zu] is not a token id of this model (0..%d)", i, vocab - 1);
                mxl_free(ids);
                json_decref(body);
                return;
            }
            ids[i] = (int32_t)json_integer_value(e);
        }
    char *text = NULL;
    size_t len = 0;
    mxl_error err = {0};
    mxl_status st = mxl_tokenizer_decode(s->tok, ids, n, false, &text, &len, &err);
    mxl_free(ids);
    json_decref(body);
    if (st) {
        mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "%s", err.msg);
        return;
    }
    json_t *content = json_stringn(text, len);
    mxl_free(text);
    mxl_http_send_json(r, 200, json_pack("{s:o}", "content", content ? content : json_string("")));
}

void mxl_api_llama_apply_template(mxl_server *s, mxl_http_req *r) {
    json_t *body = mxl_srv_body_json(s, r, MXL_API_LLAMA);
    if (!body) return;
    char msg[512] = "";
    json_t *msgs = NULL, *kw = NULL;
    mxl_chat_opts o = {.add_generation_prompt = true, .reasoning = s->reasoning};
    if (!(msgs = mxl_srv_chat_messages(s, json_object_get(body, "messages"), NULL, msg, sizeof msg)) ||
        !mxl_srv_chat_opts(s, body, &o, &kw, msg, sizeof msg)) {
        mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "%s", msg);
        json_decref(msgs);
        json_decref(body);
        return;
    }
    char *text = NULL;
    size_t len = 0;
    mxl_error err = {0};
    mxl_status st = mxl_chat_render(s->model, msgs, &o, &text, &len, &err);
    json_decref(msgs);
    json_decref(kw);
    json_decref(body);
    if (st) {
        mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "%s", err.msg);
        return;
    }
    json_t *prompt = json_stringn(text, len);
    mxl_free(text);
    mxl_http_send_json(r, 200, json_pack("{s:o}", "prompt", prompt ? prompt : json_string("")));
}

void mxl_api_llama_health(mxl_server *s, mxl_http_req *r) {
    if (!atomic_load(&s->ready)) {
        mxl_srv_error(r, MXL_API_LLAMA, 503, "unavailable_error", "Loading model");
        return;
    }
    if (!s->sched) { /* embedding / reranking only, or the chat model sleeping (--sleep-idle-seconds) */
        mxl_http_send_json(r, 200, json_pack("{s:s}", "status", "ok"));
        return;
    }
    mxl_sched_stats st;
    mxl_sched_slot_info info[1];
    mxl_sched_get_stats(s->sched, &st, info, 0);
    mxl_http_send_json(r, 200, json_pack("{s:s, s:I, s:i, s:i}", "status", "ok", "context_size", (json_int_t)s->slot_ctx, "slots_idle",
                                         st.n_slots - st.busy, "slots_processing", st.busy));
}

static json_t *default_settings(const mxl_server *s) {
    mxl_seq_params dp;
    mxl_srv_defaults_get(s, &dp);
    const mxl_sampler_params *p = &dp.sampling;
    json_t *d = json_pack("{s:I, s:{s:f, s:i, s:f, s:f, s:i, s:f, s:f, s:f, s:I, s:I, s:b}}", "n_ctx", (json_int_t)s->slot_ctx, "params", "temperature",
                     (double)p->temp, "top_k", p->top_k, "top_p", (double)p->top_p, "min_p", (double)p->min_p, "repeat_last_n",
                     p->repeat_last_n, "repeat_penalty", (double)p->repeat_penalty, "presence_penalty", (double)p->presence_penalty,
                     "frequency_penalty", (double)p->frequency_penalty, "n_predict", (json_int_t)dp.max_tokens, "seed",
                     (json_int_t)s->cfg->seed, "ignore_eos", dp.ignore_eos);
    /* llama-server's speculative settings (n_max: --draft-max, as it reports it) and ours: the kind
     * and the block the drafts take ("none" when speculation is off) */
    json_t *params = d ? json_object_get(d, "params") : NULL;
    if (params) {
        const mxl_draft_opts *o = &s->draft;
        const char *kind = o->kind == MXL_DRAFT_PROMPT_LOOKUP ? "prompt-lookup" : o->kind == MXL_DRAFT_FULL_MODEL ? "full-model" : "none";
        json_object_set_new(params, "speculative.n_max", json_integer(s->cfg->draft_max));
        json_object_set_new(params, "speculative.n_min", json_integer(0));
        json_object_set_new(params, "speculative.p_min", json_real(0.0));
        json_object_set_new(params, "speculative.kind", json_string(kind));
        json_object_set_new(params, "speculative.block_size", json_integer(o->kind != MXL_DRAFT_NONE ? o->max_draft : 0));
    }
    return d;
}

void mxl_api_llama_props(mxl_server *s, mxl_http_req *r) {
    if (!strcmp(mxl_http_method(r), "POST")) {
        if (!s->cfg->props) {
            mxl_srv_error(r, MXL_API_LLAMA, 403, "permission_error", "This server does not support changing global properties. Start it with `--props`");
            return;
        }
        json_t *body = mxl_srv_body_json(s, r, MXL_API_LLAMA);
        if (!body) return;
        json_decref(body); /* no property is writable yet; llama-server accepts and ignores unknown ones */
        mxl_http_send_json(r, 200, json_pack("{s:b}", "success", 1));
        return;
    }
    mxl_http_send_json(r, 200, mxl_api_llama_props_json(s, false));
}

json_t *mxl_api_llama_props_json(mxl_server *s, bool sleeping) {
    mxl_sched_stats st;
    mxl_sched_slot_info info[1];
    mxl_sched_get_stats(s->sched, &st, info, 0);
    bool generic = false;
    mxl_gen_model_template_origin(s->model, &generic);
    size_t bl = 0, el = 0;
    int32_t bos = mxl_tokenizer_bos_id(s->tok), eos = mxl_tokenizer_eos_id(s->tok);
    const char *bt = bos >= 0 ? mxl_tokenizer_token(s->tok, bos, &bl) : NULL;
    const char *et = eos >= 0 ? mxl_tokenizer_token(s->tok, eos, &el) : NULL;
    json_t *o = json_pack("{s:o, s:i, s:s, s:s, s:s, s:{s:b, s:b}, s:s, s:o, s:o, s:b}", "default_generation_settings", default_settings(s),
                          "total_slots", st.n_slots, "model_path", s->model_path, "model_alias", s->model_name, "chat_template",
                          mxl_gen_model_template_text(s->model), "modalities", "vision", mxl_gen_model_vlm(s->model) != NULL, "audio", 0, "build_info", "mlxcel " MXL_VERSION,
                          "bos_token", bt ? json_stringn(bt, bl) : json_string(""), "eos_token", et ? json_stringn(et, el) : json_string(""),
                          "is_sleeping", sleeping);
    return o;
}

void mxl_api_llama_slots(mxl_server *s, mxl_http_req *r) {
    if (!s->cfg->slots) {
        mxl_srv_error(r, MXL_API_LLAMA, 501, "not_supported_error", "This server does not support slots endpoint. Start it with `--slots`");
        return;
    }
    mxl_sched_stats st;
    mxl_sched_slot_info info[256];
    mxl_sched_get_stats(s->sched, &st, info, 256);
    json_t *arr = json_array();
    for (int i = 0; i < st.n_slots && i < 256; i++)
        json_array_append_new(arr, json_pack("{s:i, s:I, s:b, s:[{s:b, s:I, s:I, s:I}], s:I}", "id", info[i].id, "n_ctx", (json_int_t)info[i].n_ctx,
                                             "is_processing", info[i].busy, "next_token", "has_next_token", info[i].busy, "n_remain",
                                             (json_int_t)(info[i].busy ? info[i].n_remain : -1), "n_decoded", (json_int_t)info[i].n_decoded,
                                             "n_prompt_tokens", (json_int_t)info[i].n_prompt, "recurrent_state_bytes",
                                             (json_int_t)info[i].state_bytes));
    mxl_http_send_json(r, 200, arr);
}

void mxl_api_llama_metrics(mxl_server *s, mxl_http_req *r) {
    if (!s->cfg->metrics) {
        mxl_srv_error(r, MXL_API_LLAMA, 501, "not_supported_error", "This server does not support metrics endpoint. Start it with `--metrics`");
        return;
    }
    mxl_sched_stats st = {0};
    mxl_sched_slot_info info[1];
    if (s->sched) mxl_sched_get_stats(s->sched, &st, info, 0); /* (none while sleeping: the counters are in stats_base) */
    mxl_sched_stats_carry(&st, &s->stats_base);
    /* embedding and rerank passes count as prompt processing and decodes, as in llama-server */
    st.prompt_tokens_total += atomic_load(&s->aux_tokens);
    st.n_decode_total += atomic_load(&s->aux_passes);
    char buf[8192];
    double pt = st.prompt_ms_total / 1e3, dt = st.decode_ms_total / 1e3;
    /* the throughput gauges: since the previous scrape, as llama-server's buckets (reset by a scrape) */
    double wpt = (st.prompt_ms_total - s->scraped_prompt_ms) / 1e3, wdt = (st.decode_ms_total - s->scraped_decode_ms) / 1e3;
    double wpn = (double)(st.prompt_tokens_total - s->scraped_prompt_tokens), wdn = (double)(st.tokens_predicted_total - s->scraped_predicted);
    s->scraped_prompt_ms = st.prompt_ms_total;
    s->scraped_decode_ms = st.decode_ms_total;
    s->scraped_prompt_tokens = st.prompt_tokens_total;
    s->scraped_predicted = st.tokens_predicted_total;
    struct {
        const char *name, *type, *help;
        double v;
    } m[] = {
        {"prompt_tokens_total", "counter", "Number of prompt tokens processed.", (double)st.prompt_tokens_total},
        {"prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache.", (double)st.prompt_tokens_cached_total},
        {"prompt_seconds_total", "counter", "Prompt process time", pt},
        {"tokens_predicted_total", "counter", "Number of generation tokens processed.", (double)st.tokens_predicted_total},
        {"tokens_predicted_seconds_total", "counter", "Predict process time", dt},
        {"n_decode_total", "counter", "Total number of decode steps.", (double)st.n_decode_total},
        {"n_tokens_max", "counter", "Largest observed n_tokens.", (double)st.n_tokens_max},
        {"spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed.", (double)st.spec_draft_tokens},
        {"spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.", (double)st.spec_accepted},
        {"spec_decode_num_drafts_total", "counter", "Drafts proposed.", (double)st.spec_drafts},
        {"vision_encodes_total", "counter", "Images run through the vision tower.", (double)st.vision_encodes},
        {"vision_cache_hits_total", "counter", "Images whose encoding came from the vision cache (--vision-cache-size).", (double)st.vision_cache_hits},
        {"prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", wpt > 0 ? wpn / wpt : 0.0},
        {"predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", wdt > 0 ? wdn / wdt : 0.0},
        {"requests_processing", "gauge", "Number of requests processing.", (double)st.busy},
        {"requests_deferred", "gauge", "Number of requests deferred.", (double)st.queued},
        {"n_busy_slots_per_decode", "gauge", "Average number of busy slots per decode step.",
         st.n_decode_total ? (double)st.busy_slots_total / (double)st.n_decode_total : 0.0},
        {"recurrent_state_bytes", "gauge", "Bytes of the slots' recurrent layer state (0 without recurrent layers).", (double)st.state_bytes},
        {"recurrent_state_snapshot_bytes", "gauge", "Bytes of the prompt cache's recurrent-state snapshots (0 without recurrent layers).",
         (double)st.state_snap_bytes},
        {"recurrent_state_snapshots", "gauge", "Recurrent-state snapshots the prompt cache holds now.", (double)st.state_snaps_used},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof m / sizeof m[0] && n < sizeof buf; i++) {
        int k = snprintf(buf + n, sizeof buf - n, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %.17g\n", m[i].name, m[i].help,
                         m[i].name, m[i].type, m[i].name, m[i].v);
        if (k < 0) break;
        n += (size_t)k;
    }
    if (n >= sizeof buf) n = sizeof buf - 1;
    mxl_http_send_with_header(r, 200, "text/plain; version=0.0.4", buf, n, "Process-Start-Time-Unix", s->created_text);
}

/* GET /v1/cache/stats: the prompt cache's effect (per-slot prefix reuse). */
void mxl_api_cache_stats(mxl_server *s, mxl_http_req *r) {
    mxl_sched_stats st;
    mxl_sched_slot_info info[1];
    mxl_sched_get_stats(s->sched, &st, info, 0);
    uint64_t total = st.prompt_tokens_total + st.prompt_tokens_cached_total;
    json_t *o = json_pack("{s:b, s:s, s:i, s:I, s:I, s:f, s:I, s:I, s:f}", "enabled", s->cfg->prompt_cache, "scope", "pool",
                                         "slots", st.n_slots, "requests", (json_int_t)st.requests_started, "hits", (json_int_t)st.cache_hits,
                                         "hit_rate", st.requests_started ? (double)st.cache_hits / (double)st.requests_started : 0.0,
                                         "prompt_tokens", (json_int_t)total, "cached_tokens", (json_int_t)st.prompt_tokens_cached_total,
                                         "cached_fraction", total ? (double)st.prompt_tokens_cached_total / (double)total : 0.0);
    /* the paged KV pool (blocks of 32 positions, scheduler.h) */
    json_object_set_new(o, "blocks", json_pack("{s:I, s:I, s:I, s:I, s:i, s:I, s:I, s:I, s:I}", "total", (json_int_t)st.kv_blocks_total, "used",
                                               (json_int_t)st.kv_blocks_used, "cached", (json_int_t)st.kv_blocks_cached, "free",
                                               (json_int_t)st.kv_blocks_free, "block_tokens", MXL_KV_BLOCK, "block_bytes",
                                               (json_int_t)st.kv_block_bytes, "hit_tokens", (json_int_t)st.cache_block_hit_tokens,
                                               "evictions", (json_int_t)st.kv_evictions, "preemptions", (json_int_t)st.preemptions));
    mxl_http_send_json(r, 200, o);
}

/* llama-server's GET /lora-adapters (id, path, scale of each loaded adapter) and POST (a list
 * of {id, scale}: the scales of requests that name none; adapters it does not name go to 0). */
void mxl_api_llama_lora_adapters(mxl_server *s, mxl_http_req *r) {
    if (!strcmp(mxl_http_method(r), "POST")) {
        if (s->lora_fused) {
            mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "the adapters were fused into the model at load (--lora-fuse): their scales are fixed");
            return;
        }
        json_t *body = mxl_srv_body_json_any(s, r, MXL_API_LLAMA);
        if (!body) return;
        float scale[MXL_SRV_MAX_MULTI];
        char msg[256];
        bool ok = mxl_srv_lora_scales(s, body, scale, msg, sizeof msg);
        json_decref(body);
        if (!ok) {
            mxl_srv_error(r, MXL_API_LLAMA, 400, "invalid_request_error", "%s", msg);
            return;
        }
        pthread_mutex_lock(&s->lora_mu);
        memcpy(s->lora_scale, scale, sizeof scale);
        pthread_mutex_unlock(&s->lora_mu);
    }
    json_t *a = json_array();
    pthread_mutex_lock(&s->lora_mu);
    for (int i = 0; i < s->n_lora; i++)
        json_array_append_new(a, json_pack("{s:i, s:s, s:f}", "id", i, "path", s->lora[i]->path, "scale", (double)s->lora_scale[i]));
    pthread_mutex_unlock(&s->lora_mu);
    mxl_http_send_json(r, 200, a);
}
