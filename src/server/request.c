/* request.c - reading an HTTP request for the routes (request.h): error replies, the JSON body,
 * the sampling / stopping fields and logit_bias in each API's shape, chat messages and template
 * options, token text. */
#include "server/request.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "engine/model.h"
#include "io/json_read.h"
#include "io/json_write.h"
#include "server/limits.h"
#include "server/server_state.h"

/* --- errors and request bodies ------------------------------------------------------------------ */

void mxl_srv_error(mxl_http_req *r, mxl_api api, int status, const char *type, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* one line: messages quote the request's own strings (a role, a part's type), which may hold
     * control characters */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = ' ';
    json_t *body;
    if (api == MXL_API_ANTHROPIC)
        body = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", type, "message", msg);
    else
        body = json_pack("{s:{s:i, s:s, s:s}}", "error", "code", status, "message", msg, "type", type);
    mxl_http_send_json(r, status, body);
}

json_t *mxl_srv_body_json(const mxl_server *s, mxl_http_req *r, mxl_api api) {
    json_t *j = mxl_srv_body_json_any(s, r, api);
    if (j && !json_is_object(j)) {
        json_decref(j);
        mxl_srv_error(r, api, 400, "invalid_request_error", "the request body must be a JSON object");
        return NULL;
    }
    return j;
}

json_t *mxl_srv_parse_json(const mxl_server *s, const char *b, size_t len, int *status, char *msg, size_t ml) {
    const int max_depth = s && s->cfg ? (int)s->cfg->max_json_depth : MXL_LIMIT_JSON_DEPTH;
    int depth = 0;
    /* jansson's recursive parser stops at 2048 levels; far less is refused before it runs */
    if (!mxl_srv_json_depth_ok(b, len, max_depth, &depth)) {
        *status = 400;
        snprintf(msg, ml, "the request body's JSON nests deeper than %d levels (--max-json-depth raises the limit)", max_depth);
        return NULL;
    }
    json_error_t je;
    json_t *j = mxl_json_loadb(b, len, 0, &je);
    if (!j && mxl_json_error_is_oom(&je)) {
        *status = 500;
        snprintf(msg, ml, "out of memory reading the request body");
        return NULL;
    }
    if (!j) {
        *status = 400;
        snprintf(msg, ml, "the request body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return NULL;
    }
    return j;
}

json_t *mxl_srv_body_json_any(const mxl_server *s, mxl_http_req *r, mxl_api api) {
    size_t len;
    const char *b = mxl_http_body(r, &len);
    char msg[512];
    int status = 400;
    json_t *j = mxl_srv_parse_json(s, b, len, &status, msg, sizeof msg);
    if (!j) mxl_srv_error(r, api, status, status == 500 ? "server_error" : "invalid_request_error", "%s", msg);
    return j;
}

/* The transport's refusals in the API's shape: Anthropic's under /v1/messages, else OpenAI's
 * (llama-server's routes answer errors in OpenAI's shape too). */
static void refuse(mxl_http_req *r, int status, const char *type, const char *msg) {
    mxl_srv_error(r, strstr(mxl_http_path(r), "/v1/messages") ? MXL_API_ANTHROPIC : MXL_API_OPENAI, status, type, "%s", msg);
}

void mxl_srv_http_limits(const mxl_server_config *cfg, mxl_http_config *hc) {
    hc->max_body = (size_t)cfg->max_body_bytes;
    hc->max_header_bytes = (size_t)cfg->max_header_bytes;
    hc->max_headers = (unsigned)cfg->max_headers;
    hc->max_conn_per_ip = (unsigned)cfg->max_conn_per_ip;
    hc->conn_per_ip_loopback = cfg->conn_per_ip_set;
    hc->refuse = refuse;
}

/* --- request limits (limits.h) ------------------------------------------------------------------ */

bool mxl_srv_check_count(const mxl_server *s, const char *what, size_t n, char *msg, size_t ml) {
    if (!s || !s->cfg) return true;
    int64_t max = 0;
    const char *flag = "";
    if (!strcmp(what, "messages")) max = s->cfg->max_messages, flag = "--max-messages";
    else if (!strcmp(what, "tools")) max = s->cfg->max_tools, flag = "--max-tools";
    else if (!strcmp(what, "input") || !strcmp(what, "content") || !strcmp(what, "documents")) max = s->cfg->max_inputs, flag = "--max-inputs";
    else return true;
    if ((int64_t)n <= max) return true;
    snprintf(msg, ml, "'%s' has %zu entries; at most %lld are accepted (%s raises the limit)", what, n, (long long)max, flag);
    return false;
}

/* --- request parameters ------------------------------------------------------------------------- */

static bool get_num(const json_t *body, const char *key, double *out, bool *given, char *msg, size_t ml) {
    const json_t *v = json_object_get(body, key);
    if (given) *given = false;
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v)) {
        snprintf(msg, ml, "'%s' must be a number", key);
        return false;
    }
    *out = json_number_value(v);
    if (given) *given = true;
    return true;
}

static bool get_int(const json_t *body, const char *key, int64_t *out, bool *given, char *msg, size_t ml) {
    const json_t *v = json_object_get(body, key);
    if (given) *given = false;
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v)) {
        snprintf(msg, ml, "'%s' must be an integer", key);
        return false;
    }
    *out = json_integer_value(v);
    if (given) *given = true;
    return true;
}

/* The entries being built: b[n], room for cap; n0 of them the server's (--logit-bias), the rest
 * the request's, at most max. */
typedef struct bias_list {
    mxl_logit_bias *b;
    size_t n, cap, n0, max;
} bias_list;

/* Appends ids[0..k) at bias; false with msg past --max-logit-bias or out of memory. */
static bool bias_add(bias_list *l, const int32_t *ids, size_t k, float bias, char *msg, size_t ml) {
    if (l->n - l->n0 + k > l->max)
        return snprintf(msg, ml, "'logit_bias' comes to more than %zu tokens (--max-logit-bias raises the limit)", l->max), false;
    if (l->n + k > l->cap) {
        size_t cap = l->cap ? l->cap : 16;
        while (cap < l->n + k) cap *= 2;
        mxl_logit_bias *nb = mxl_realloc(l->b, cap * sizeof *nb);
        if (!nb) return snprintf(msg, ml, "out of memory"), false;
        l->b = nb;
        l->cap = cap;
    }
    for (size_t i = 0; i < k; i++) l->b[l->n++] = (mxl_logit_bias){.token = ids[i], .bias = bias};
    return true;
}

/* Every token of text at bias (a text entry, as llama-server reads it). */
static bool bias_add_text(const mxl_server *s, bias_list *l, const char *text, size_t len, float bias, char *msg, size_t ml) {
    mxl_token_ids ids = {0};
    mxl_error err = {0};
    if (mxl_tokenizer_encode(s->tok, text, len, 0, &ids, &err)) {
        mxl_token_ids_free(&ids);
        return snprintf(msg, ml, "'logit_bias': %s", err.msg), false;
    }
    bool ok = bias_add(l, ids.ids, ids.n, bias, msg, ml);
    mxl_token_ids_free(&ids);
    return ok;
}

/* logit_bias in either API's shape: OpenAI {"15043": 1.5}, llama-server [[15043, 1.5], [15043, false],
 * ["text", -1]] (a string biases each of its tokens; false bans). At most --max-logit-bias
 * entries, a text entry counting each of its tokens. */
static bool parse_logit_bias(const mxl_server *s, const json_t *v, mxl_seq_params *p, mxl_logit_bias **out, char *msg, size_t ml) {
    const size_t given = json_is_object(v) ? json_object_size(v) : json_array_size(v);
    bias_list l = {.n = p->sampling.n_logit_bias, .n0 = p->sampling.n_logit_bias, .max = (size_t)s->cfg->max_logit_bias};
    if (given > l.max)
        return snprintf(msg, ml, "'logit_bias' has %zu entries; at most %zu are accepted (--max-logit-bias raises the limit)", given, l.max), false;
    l.cap = l.n + 16;
    if (!(l.b = mxl_malloc(l.cap * sizeof *l.b))) return snprintf(msg, ml, "out of memory"), false;
    if (l.n) memcpy(l.b, p->sampling.logit_bias, l.n * sizeof *l.b);
    const int32_t vocab = (int32_t)mxl_tokenizer_n_vocab(s->tok);
    bool ok = true;
    if (json_is_object(v)) {
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)v, key, val) {
            if (!json_is_number(val) && !json_is_false(val)) {
                ok = false, snprintf(msg, ml, "'logit_bias' values must be numbers (or false to ban)");
                break;
            }
            const float bias = json_is_false(val) ? -INFINITY : (float)json_number_value(val);
            char *end = NULL;
            long id = strtol(key, &end, 10);
            if (*key && !*end) { /* a token id */
                if (id < 0 || id >= vocab) {
                    ok = false, snprintf(msg, ml, "'logit_bias' token id %ld is outside 0..%d", id, vocab - 1);
                    break;
                }
                const int32_t t = (int32_t)id;
                ok = bias_add(&l, &t, 1, bias, msg, ml);
            } else { /* text: every token of it, as llama-server does */
                ok = bias_add_text(s, &l, key, strlen(key), bias, msg, ml);
            }
            if (!ok) break;
        }
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) {
            const json_t *k = json_array_get(e, 0), *val = json_array_get(e, 1);
            if (!json_is_array(e) || json_array_size(e) != 2 || !(json_is_number(val) || json_is_false(val))) {
                ok = false, snprintf(msg, ml, "'logit_bias' entries are [token id or text, bias or false]");
                break;
            }
            const float bias = json_is_false(val) ? -INFINITY : (float)json_number_value(val);
            if (json_is_integer(k) && json_integer_value(k) >= 0 && json_integer_value(k) < vocab) {
                const int32_t t = (int32_t)json_integer_value(k);
                ok = bias_add(&l, &t, 1, bias, msg, ml);
            } else if (json_is_string(k)) {
                ok = bias_add_text(s, &l, json_string_value(k), json_string_length(k), bias, msg, ml);
            } else {
                ok = false, snprintf(msg, ml, "'logit_bias' entries are [token id (0..%d) or text, bias or false]", vocab - 1);
            }
            if (!ok) break;
        }
    } else {
        ok = false, snprintf(msg, ml, "'logit_bias' must be an object or an array");
    }
    if (!ok) {
        mxl_free(l.b);
        return false;
    }
    *out = l.b;
    p->sampling.logit_bias = l.b;
    p->sampling.n_logit_bias = l.n;
    return true;
}

static bool lora_params(const mxl_server *s, const json_t *body, mxl_seq_params *p, char *msg, size_t ml);

bool mxl_srv_parse_params(const mxl_server *s, const json_t *body, mxl_seq_params *p, mxl_logit_bias **bias, char *msg, size_t ml) {
    mxl_srv_defaults_get(s, p);
    double d;
    int64_t i;
    bool g;
#define NUM(key, field, lo, hi)                                                        \
    do {                                                                               \
        d = p->field;                                                                  \
        if (!get_num(body, key, &d, &g, msg, ml)) return false;                        \
        if (g && (d < (lo) || d > (hi))) {                                             \
            snprintf(msg, ml, "'%s' must be between %g and %g", key, (double)(lo), (double)(hi)); \
            return false;                                                              \
        }                                                                              \
        p->field = (float)d;                                                           \
    } while (0)
    NUM("temperature", sampling.temp, 0, 100);
    NUM("top_p", sampling.top_p, 0, 1);
    NUM("min_p", sampling.min_p, 0, 1);
    NUM("repeat_penalty", sampling.repeat_penalty, 0, 100);
    NUM("presence_penalty", sampling.presence_penalty, -2, 2);
    NUM("frequency_penalty", sampling.frequency_penalty, -2, 2);
    NUM("typical_p", sampling.typical_p, 0, 1);
    NUM("top_n_sigma", sampling.top_n_sigma, -1, 1e6);
    NUM("xtc_probability", sampling.xtc_probability, 0, 1);
    NUM("xtc_threshold", sampling.xtc_threshold, 0, 1);
    NUM("dynatemp_range", sampling.dynatemp_range, 0, 100);
    NUM("dynatemp_exponent", sampling.dynatemp_exponent, 0, 100);
    NUM("mirostat_tau", sampling.mirostat_tau, 0, 1000);
    NUM("mirostat_eta", sampling.mirostat_eta, 0, 1000);
    NUM("dry_multiplier", sampling.dry_multiplier, 0, 1000);
    NUM("dry_base", sampling.dry_base, 0, 1000);
#undef NUM
    const struct {
        const char *key;
        int32_t *field;
        int64_t lo, hi;
    } ints[] = {{"mirostat", &p->sampling.mirostat, 0, 2},
                {"dry_allowed_length", &p->sampling.dry_allowed_length, 0, INT32_MAX},
                {"dry_penalty_last_n", &p->sampling.dry_penalty_last_n, -1, INT32_MAX}};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        if (!get_int(body, ints[k].key, &i, &g, msg, ml)) return false;
        if (!g) continue;
        if (i < ints[k].lo || i > ints[k].hi)
            return snprintf(msg, ml, "'%s' must be between %lld and %lld", ints[k].key, (long long)ints[k].lo, (long long)ints[k].hi), false;
        *ints[k].field = (int32_t)i;
    }
    const json_t *br = json_object_get(body, "dry_sequence_breakers");
    if (br && !json_is_null(br)) {
        static const size_t max_br = 32;
        if (!json_is_array(br) || json_array_size(br) > max_br) return snprintf(msg, ml, "'dry_sequence_breakers' must be an array of at most 32 strings"), false;
        for (size_t k = 0; k < json_array_size(br); k++)
            if (!json_is_string(json_array_get(br, k))) return snprintf(msg, ml, "'dry_sequence_breakers' must be an array of strings"), false;
        /* the strings live in `body`; the scheduler copies them with the job */
        p->n_breakers = json_array_size(br);
        for (size_t k = 0; k < p->n_breakers; k++) p->breakers[k] = json_string_value(json_array_get(br, k));
        p->sampling.dry_breakers = p->breakers;
        p->sampling.n_dry_breakers = p->n_breakers;
    }
    i = p->sampling.top_k;
    if (!get_int(body, "top_k", &i, &g, msg, ml)) return false;
    if (g && (i < 0 || i > INT32_MAX)) return snprintf(msg, ml, "'top_k' must be >= 0"), false;
    p->sampling.top_k = (int32_t)i;
    i = p->sampling.repeat_last_n;
    if (!get_int(body, "repeat_last_n", &i, &g, msg, ml)) return false;
    if (g && (i < -1 || i > INT32_MAX)) return snprintf(msg, ml, "'repeat_last_n' must be >= -1"), false;
    p->sampling.repeat_last_n = (int32_t)i;
    if (!get_int(body, "seed", &i, &g, msg, ml)) return false;
    if (g && i >= 0) p->sampling.seed = (uint64_t)i;
    else if (s->cfg->seed < 0) /* -1: a fresh random seed per request */
        p->sampling.seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ atomic_fetch_add((atomic_ullong *)&s->next_id, 1) << 17;
    /* max tokens: each API's spelling; -1 means the slot's context */
    const char *mt_keys[] = {"max_completion_tokens", "max_tokens", "n_predict"};
    for (size_t k = 0; k < 3; k++) {
        i = 0;
        if (!get_int(body, mt_keys[k], &i, &g, msg, ml)) return false;
        if (!g) continue;
        if (i < -1) return snprintf(msg, ml, "'%s' must be >= -1", mt_keys[k]), false;
        p->max_tokens = i;
        break;
    }
    /* as llama-server: a request may ask for more than its context holds (generation ends there,
     * finish_reason "length"); a server started with --n-predict N caps every request at N */
    if (s->cfg->n_predict > 0 && (p->max_tokens < 0 || p->max_tokens > s->cfg->n_predict)) p->max_tokens = s->cfg->n_predict;
    /* llama-server's per-request speculation: speculative.n_max 0 turns it off for the request, N
     * caps its drafts; n_min and p_min (a draft model's confidence floor) are accepted, checked
     * and have no effect: the verification keeps the target's own picks whatever is drafted */
    if (!get_int(body, "speculative.n_max", &i, &g, msg, ml)) return false;
    if (g) {
        if (i < 0 || i > MXL_SEQ_MAX_DRAFT) return snprintf(msg, ml, "'speculative.n_max' must be 0..%d", MXL_SEQ_MAX_DRAFT), false;
        p->draft_max = i == 0 ? -1 : (int)i;
    }
    if (!get_int(body, "speculative.n_min", &i, &g, msg, ml)) return false;
    if (g && (i < 0 || i > MXL_SEQ_MAX_DRAFT)) return snprintf(msg, ml, "'speculative.n_min' must be 0..%d", MXL_SEQ_MAX_DRAFT), false;
    double pm = 0;
    if (!get_num(body, "speculative.p_min", &pm, &g, msg, ml)) return false;
    if (g && !(pm >= 0 && pm <= 1)) return snprintf(msg, ml, "'speculative.p_min' must be 0..1"), false;
    const json_t *v = json_object_get(body, "cache_prompt");
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v)) return snprintf(msg, ml, "'cache_prompt' must be a boolean"), false;
        p->cache_prompt = json_is_true(v) && s->cfg->prompt_cache;
    }
    v = json_object_get(body, "prompt_cache_key"); /* OpenAI: partitions the shared prompt cache */
    if (v && !json_is_null(v)) {
        if (!json_is_string(v)) return snprintf(msg, ml, "'prompt_cache_key' must be a string"), false;
        p->cache_key = json_string_value(v);
    }
    v = json_object_get(body, "ignore_eos");
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v)) return snprintf(msg, ml, "'ignore_eos' must be a boolean"), false;
        p->ignore_eos = json_is_true(v);
    }
    v = json_object_get(body, "stop");
    if (v && !json_is_null(v)) {
        if (json_is_string(v)) {
            if (json_string_length(v) && p->n_stop < MXL_SEQ_MAX_STOP) p->stop[p->n_stop++] = json_string_value(v);
        } else if (json_is_array(v)) {
            size_t k;
            const json_t *e;
            json_array_foreach(v, k, e) {
                if (!json_is_string(e)) return snprintf(msg, ml, "'stop' must be a string or an array of strings"), false;
                if (!json_string_length(e)) continue;
                if (p->n_stop >= MXL_SEQ_MAX_STOP)
                    return snprintf(msg, ml, "'stop' has more than %d strings (the most a request may give)", MXL_SEQ_MAX_STOP), false;
                p->stop[p->n_stop++] = json_string_value(e);
            }
        } else {
            return snprintf(msg, ml, "'stop' must be a string or an array of strings"), false;
        }
    }
    if (!lora_params(s, body, p, msg, ml)) return false;
    *bias = NULL;
    v = json_object_get(body, "logit_bias");
    if (v && !json_is_null(v) && !parse_logit_bias(s, v, p, bias, msg, ml)) return false;
    return true;
}

bool mxl_srv_lora_scales(const mxl_server *s, const json_t *list, float *scale, char *msg, size_t ml) {
    if (!json_is_array(list)) return snprintf(msg, ml, "'lora' must be a list of {\"id\": N, \"scale\": S}"), false;
    for (int i = 0; i < s->n_lora; i++) scale[i] = 0.0f;
    size_t k;
    const json_t *e;
    json_array_foreach(list, k, e) {
        const json_t *id = json_object_get(e, "id"), *sc = json_object_get(e, "scale");
        if (!json_is_integer(id)) return snprintf(msg, ml, "'lora' entry %zu has no integer 'id'", k), false;
        const json_int_t i = json_integer_value(id);
        if (i < 0 || i >= s->n_lora)
            return snprintf(msg, ml, "'lora' names adapter id %lld; this server has %d (GET /lora-adapters lists them)", (long long)i, s->n_lora), false;
        if (!json_is_number(sc) || !isfinite(json_number_value(sc)))
            return snprintf(msg, ml, "'lora' entry %zu has no finite 'scale'", k), false;
        scale[i] = (float)json_number_value(sc);
    }
    return true;
}

/* LoRA: the request's "lora" list (adapters it does not name run at scale 0), else the server's
 * scales (--lora, POST /lora-adapters); the nonzero ones run. */
static bool lora_params(const mxl_server *s, const json_t *body, mxl_seq_params *p, char *msg, size_t ml) {
    float scale[MXL_SRV_MAX_MULTI];
    const json_t *l = json_object_get(body, "lora");
    p->n_lora = 0;
    if (s->lora_fused) { /* (in the weights already) */
        if (l && !json_is_null(l)) return snprintf(msg, ml, "the adapters were fused into the model at load (--lora-fuse): no 'lora' per request"), false;
        return true;
    }
    if (l && !json_is_null(l)) {
        if (!mxl_srv_lora_scales(s, l, scale, msg, ml)) return false;
    } else {
        pthread_mutex_lock((pthread_mutex_t *)&s->lora_mu);
        memcpy(scale, s->lora_scale, sizeof scale);
        pthread_mutex_unlock((pthread_mutex_t *)&s->lora_mu);
    }
    p->n_lora = 0;
    for (int i = 0; i < s->n_lora; i++) {
        if (scale[i] == 0.0f) continue;
        if (p->n_lora == MXL_DECODER_MAX_LORA) return snprintf(msg, ml, "at most %d LoRA adapters apply at once", MXL_DECODER_MAX_LORA), false;
        p->lora_buf[p->n_lora++] = (mxl_decoder_lora){s->lora[i], scale[i]};
    }
    p->lora = p->lora_buf;
    return true;
}

/* --- chat requests ------------------------------------------------------------------------------ */

/* The URL of an OpenAI image_url part ({"image_url": {"url": ...}} or {"image_url": "..."}), or
 * NULL. */
static const char *image_url_of(const json_t *part) {
    const json_t *iu = json_object_get(part, "image_url");
    if (json_is_string(iu)) return json_string_value(iu);
    return json_string_value(json_object_get(iu, "url"));
}

/* A message's content list as the vision-language templates read it: {"type": "image"} for each
 * image_url part (its URL appended to images), {"type": "text", "text"} for each text part. */
static json_t *vision_parts(const json_t *content, size_t i, json_t *images, char *msg, size_t ml) {
    json_t *parts = json_array();
    size_t k;
    const json_t *part;
    json_array_foreach(content, k, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        if (type && !strcmp(type, "image_url")) {
            const char *url = image_url_of(part);
            if (!url) {
                snprintf(msg, ml, "messages[%zu].content[%zu].image_url must be a URL string or an object with a 'url'", i, k);
                json_decref(parts);
                return NULL;
            }
            json_array_append_new(images, json_string(url));
            json_array_append_new(parts, json_pack("{s:s}", "type", "image"));
        } else {
            json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", json_object_get(part, "text")));
        }
    }
    return parts;
}

/* The roles of OpenAI's chat messages (function: the deprecated form of tool). */
static bool known_role(const char *role) {
    static const char *const k_roles[] = {"system", "developer", "user", "assistant", "tool", "function"};
    for (size_t i = 0; i < sizeof k_roles / sizeof k_roles[0]; i++)
        if (!strcmp(role, k_roles[i])) return true;
    return false;
}

/* Copies messages, turning content part lists into plain text (the text parts joined) so every
 * template sees strings. With images (a vision-language model) a message with image_url parts
 * keeps a part list ({"type": "image"} where each image goes, their URLs appended to images);
 * without, image / audio parts are refused. */
json_t *mxl_srv_chat_messages(const mxl_server *s, const json_t *msgs, json_t *images, char *msg, size_t ml) {
    /* developer is OpenAI's newer name for system: a template that does not know it gets system,
     * as llama-server maps it for the templates other than gpt-oss's */
    const char *tmpl = s && s->model ? mxl_gen_model_template_text(s->model) : NULL;
    const bool developer_as_system = !tmpl || !strstr(tmpl, "developer");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
        snprintf(msg, ml, "'messages' must be a non-empty array");
        return NULL;
    }
    if (!mxl_srv_check_count(s, "messages", json_array_size(msgs), msg, ml)) return NULL;
    json_t *out = json_array();
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) {
            snprintf(msg, ml, "messages[%zu] must be an object", i);
            goto fail;
        }
        const json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) {
            snprintf(msg, ml, "messages[%zu].role must be a string", i);
            goto fail;
        }
        if (!known_role(json_string_value(role))) {
            snprintf(msg, ml, "messages[%zu].role '%.100s' is not one of system, developer, user, assistant, tool, function", i,
                     json_string_value(role));
            goto fail;
        }
        json_t *copy = json_deep_copy(m);
        if (developer_as_system && !strcmp(json_string_value(role), "developer")) json_object_set_new(copy, "role", json_string("system"));
        const json_t *content = json_object_get(m, "content");
        if (json_is_array(content)) {
            size_t len = 0, k;
            const json_t *part;
            json_array_foreach(content, k, part) {
                const json_t *type = json_object_get(part, "type");
                const json_t *text = json_object_get(part, "text");
                if (!json_is_object(part) || !json_is_string(type)) {
                    json_decref(copy);
                    snprintf(msg, ml, "messages[%zu].content[%zu] must be an object with a 'type'", i, k);
                    goto fail;
                }
                if (images && !strcmp(json_string_value(type), "image_url")) continue;
                if (strcmp(json_string_value(type), "text") != 0) {
                    json_decref(copy);
                    snprintf(msg, ml, "messages[%zu].content[%zu]: '%s' input is not supported for this model", i, k, json_string_value(type));
                    goto fail;
                }
                if (!json_is_string(text)) {
                    json_decref(copy);
                    snprintf(msg, ml, "messages[%zu].content[%zu].text must be a string", i, k);
                    goto fail;
                }
                len += json_string_length(text) + 1;
            }
            bool has_image = false;
            json_array_foreach(content, k, part) has_image |= images && !strcmp(json_string_value(json_object_get(part, "type")), "image_url");
            if (has_image) {
                json_t *parts = vision_parts(content, i, images, msg, ml);
                if (!parts) {
                    json_decref(copy);
                    goto fail;
                }
                json_object_set_new(copy, "content", parts);
                json_array_append_new(out, copy);
                continue;
            }
            char *joined = mxl_malloc(len + 1), *p = joined;
            if (!joined) {
                json_decref(copy);
                snprintf(msg, ml, "out of memory");
                goto fail;
            }
            json_array_foreach(content, k, part) {
                const json_t *text = json_object_get(part, "text");
                if (p != joined) *p++ = '\n';
                memcpy(p, json_string_value(text), json_string_length(text));
                p += json_string_length(text);
            }
            *p = 0;
            json_object_set_new(copy, "content", json_stringn(joined, (size_t)(p - joined)));
            mxl_free(joined);
        } else if (content && !json_is_string(content) && !json_is_null(content)) {
            json_decref(copy);
            snprintf(msg, ml, "messages[%zu].content must be a string, an array of parts or null", i);
            goto fail;
        }
        json_array_append_new(out, copy);
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* Template kwargs: server defaults, then the request's chat_template_kwargs, then the request
 * switches templates read (enable_thinking, reasoning_effort). */
static json_t *template_kwargs(const mxl_server *s, const json_t *body, char *msg, size_t ml) {
    json_t *kw = s->template_kwargs ? json_deep_copy(s->template_kwargs) : json_object();
    /* llama-server tells templates today's date */
    if (!json_object_get(kw, "date_string")) json_object_set_new(kw, "date_string", json_string(s->date_string));
    /* FireFunction v2's template reads `functions` (the tools as JSON) and `datetime`, which
     * llama-server provides for it */
    if (strstr(mxl_gen_model_template_text(s->model), "functools[")) {
        const json_t *tools = json_object_get(body, "tools");
        char *dump = json_is_array(tools) && json_array_size(tools) ? mxl_json_dumps(tools, JSON_INDENT(4)) : NULL;
        json_object_set_new(kw, "functions", json_string(dump ? dump : ""));
        mxl_free(dump);
        json_object_set_new(kw, "datetime", json_string(s->datetime_text));
    }
    const json_t *req = json_object_get(body, "chat_template_kwargs");
    if (req && !json_is_null(req)) {
        if (!json_is_object(req)) {
            json_decref(kw);
            snprintf(msg, ml, "'chat_template_kwargs' must be an object");
            return NULL;
        }
        json_object_update(kw, (json_t *)req);
    }
    const json_t *v = json_object_get(body, "enable_thinking");
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v)) {
            json_decref(kw);
            snprintf(msg, ml, "'enable_thinking' must be a boolean");
            return NULL;
        }
        json_object_set(kw, "enable_thinking", (json_t *)v);
    }
    v = json_object_get(body, "reasoning_effort");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v)) {
            json_decref(kw);
            snprintf(msg, ml, "'reasoning_effort' must be a string");
            return NULL;
        }
        json_object_set(kw, "reasoning_effort", (json_t *)v);
    }
    return kw;
}

bool mxl_srv_chat_opts(const mxl_server *s, const json_t *body, mxl_chat_opts *o, json_t **kw, char *msg, size_t ml) {
    const json_t *tools = json_object_get(body, "tools");
    if (tools && !json_is_null(tools) && !json_is_array(tools)) return snprintf(msg, ml, "'tools' must be an array"), false;
    if (!mxl_srv_check_count(s, "tools", json_array_size(tools), msg, ml)) return false;
    const json_t *agp = json_object_get(body, "add_generation_prompt");
    if (agp && !json_is_null(agp) && !json_is_boolean(agp)) return snprintf(msg, ml, "'add_generation_prompt' must be a boolean"), false;
    if (!(*kw = template_kwargs(s, body, msg, ml))) return false;
    o->tools = json_is_array(tools) && json_array_size(tools) ? tools : NULL;
    o->kwargs = *kw;
    o->add_generation_prompt = agp && !json_is_null(agp) ? json_is_true(agp) : true;
    o->reasoning = s->reasoning;
    return true;
}

/* --- token text --------------------------------------------------------------------------------- */

char *mxl_srv_token_text(const mxl_server *s, int32_t id) {
    char *out = NULL;
    size_t len = 0;
    mxl_error err = {0};
    if (mxl_tokenizer_decode(s->tok, &id, 1, false, &out, &len, &err)) return mxl_strdup("");
    return out;
}
