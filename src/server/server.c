/* server.c - process life, routing, authentication and the request helpers every API shares
 * (server.h, server_internal.h). */
#include "server/server.h"

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/chat_builtin.h"
#include "io/store.h"
#include "models/checkpoint.h"
#include "models/detect.h"
#include "template/template.h"
#include "server/server_internal.h"

/* --- errors and request bodies ------------------------------------------------------------------ */

void mxl_srv_error(mxl_http_req *r, mxl_api api, int status, const char *type, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *body;
    if (api == MXL_API_ANTHROPIC)
        body = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", type, "message", msg);
    else
        body = json_pack("{s:{s:i, s:s, s:s}}", "error", "code", status, "message", msg, "type", type);
    mxl_http_send_json(r, status, body);
}

json_t *mxl_srv_body_json(mxl_http_req *r, mxl_api api) {
    size_t len;
    const char *b = mxl_http_body(r, &len);
    json_error_t je;
    json_t *j = json_loadb(b, len, JSON_REJECT_DUPLICATES * 0, &je);
    if (!j) {
        mxl_srv_error(r, api, 400, "invalid_request_error", "the request body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
                      je.column);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        mxl_srv_error(r, api, 400, "invalid_request_error", "the request body must be a JSON object");
        return NULL;
    }
    return j;
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

/* logit_bias in either API's shape: OpenAI {"15043": 1.5}, llama-server [[15043, 1.5], [15043, false],
 * ["text", -1]] (a string biases each of its tokens; false bans). */
static bool parse_logit_bias(const mxl_server *s, const json_t *v, mxl_seq_params *p, mxl_logit_bias **out, char *msg, size_t ml) {
    size_t n = p->sampling.n_logit_bias, cap = n + 16;
    mxl_logit_bias *b = malloc(cap * sizeof *b);
    if (!b) return snprintf(msg, ml, "out of memory"), false;
    if (n) memcpy(b, p->sampling.logit_bias, n * sizeof *b);
    int32_t vocab = (int32_t)mxl_tokenizer_n_vocab(s->tok);
#define PUSH(tok, val)                                                                     \
    do {                                                                                   \
        if (n == cap) {                                                                    \
            mxl_logit_bias *nb = realloc(b, (cap *= 2) * sizeof *b);                       \
            if (!nb) {                                                                     \
                free(b);                                                                   \
                return snprintf(msg, ml, "out of memory"), false;                          \
            }                                                                              \
            b = nb;                                                                        \
        }                                                                                  \
        b[n].token = (tok);                                                                \
        b[n++].bias = (val);                                                               \
    } while (0)
    if (json_is_object(v)) {
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)v, key, val) {
            char *end = NULL;
            long id = strtol(key, &end, 10);
            if (!json_is_number(val) && !json_is_false(val)) {
                free(b);
                return snprintf(msg, ml, "'logit_bias' values must be numbers (or false to ban)"), false;
            }
            float bias = json_is_false(val) ? -INFINITY : (float)json_number_value(val);
            if (*key && !*end) { /* a token id */
                if (id < 0 || id >= vocab) {
                    free(b);
                    return snprintf(msg, ml, "'logit_bias' token id %ld is outside 0..%d", id, vocab - 1), false;
                }
                PUSH((int32_t)id, bias);
            } else { /* text: every token of it, as llama-server does */
                mxl_token_ids ids = {0};
                mxl_error err = {0};
                if (mxl_tokenizer_encode(s->tok, key, strlen(key), 0, &ids, &err)) {
                    free(b);
                    return snprintf(msg, ml, "'logit_bias': %s", err.msg), false;
                }
                for (size_t t = 0; t < ids.n; t++) PUSH(ids.ids[t], bias);
                mxl_token_ids_free(&ids);
            }
        }
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) {
            const json_t *k = json_array_get(e, 0), *val = json_array_get(e, 1);
            float bias;
            if (!json_is_array(e) || json_array_size(e) != 2 || !(json_is_number(val) || json_is_false(val))) {
                free(b);
                return snprintf(msg, ml, "'logit_bias' entries are [token id or text, bias or false]"), false;
            }
            bias = json_is_false(val) ? -INFINITY : (float)json_number_value(val);
            if (json_is_integer(k) && json_integer_value(k) >= 0 && json_integer_value(k) < vocab) {
                PUSH((int32_t)json_integer_value(k), bias);
            } else if (json_is_string(k)) {
                mxl_token_ids ids = {0};
                mxl_error err = {0};
                if (mxl_tokenizer_encode(s->tok, json_string_value(k), json_string_length(k), 0, &ids, &err)) {
                    free(b);
                    return snprintf(msg, ml, "'logit_bias': %s", err.msg), false;
                }
                for (size_t t = 0; t < ids.n; t++) PUSH(ids.ids[t], bias);
                mxl_token_ids_free(&ids);
            } else {
                free(b);
                return snprintf(msg, ml, "'logit_bias' entries are [token id (0..%d) or text, bias or false]", vocab - 1), false;
            }
        }
    } else {
        free(b);
        return snprintf(msg, ml, "'logit_bias' must be an object or an array"), false;
    }
#undef PUSH
    *out = b;
    p->sampling.logit_bias = b;
    p->sampling.n_logit_bias = n;
    return true;
}

bool mxl_srv_parse_params(const mxl_server *s, const json_t *body, mxl_seq_params *p, mxl_logit_bias **bias, char *msg, size_t ml) {
    *p = s->defaults;
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
                if (p->n_stop >= MXL_SEQ_MAX_STOP) return snprintf(msg, ml, "'stop' has more than %d strings", MXL_SEQ_MAX_STOP), false;
                p->stop[p->n_stop++] = json_string_value(e);
            }
        } else {
            return snprintf(msg, ml, "'stop' must be a string or an array of strings"), false;
        }
    }
    *bias = NULL;
    v = json_object_get(body, "logit_bias");
    if (v && !json_is_null(v) && !parse_logit_bias(s, v, p, bias, msg, ml)) return false;
    return true;
}

char *mxl_srv_token_text(const mxl_server *s, int32_t id) {
    char *out = NULL;
    size_t len = 0;
    mxl_error err = {0};
    if (mxl_tokenizer_decode(s->tok, &id, 1, false, &out, &len, &err)) return strdup("");
    return out;
}

/* --- routing ----------------------------------------------------------------------------------- */

static bool authorized(const mxl_server *s, mxl_http_req *r) {
    if (!s->api_key) return true;
    const char *h = mxl_http_header(r, "Authorization");
    if (h && strncasecmp(h, "Bearer ", 7) == 0 && strcmp(h + 7, s->api_key) == 0) return true;
    const char *x = mxl_http_header(r, "X-Api-Key");
    return x && strcmp(x, s->api_key) == 0;
}

typedef enum route_need { NEED_NONE, NEED_READY, NEED_CHAT } route_need;

typedef struct route {
    const char *method, *path;
    void (*fn)(mxl_server *, mxl_http_req *);
    route_need need; /* READY: after loading (503 before); CHAT: also a chat model (501 without) */
} route;

static const route k_routes[] = {
    {"GET", "/health", mxl_api_llama_health, NEED_NONE},
    {"GET", "/v1/health", mxl_api_llama_health, NEED_NONE},
    {"GET", "/v1/models", mxl_api_openai_models, NEED_READY},
    {"GET", "/models", mxl_api_openai_models, NEED_READY},
    {"POST", "/v1/embeddings", mxl_api_embeddings_openai, NEED_READY},
    {"POST", "/embeddings", mxl_api_embeddings_llama, NEED_READY},
    {"POST", "/embedding", mxl_api_embeddings_llama, NEED_READY},
    {"POST", "/v1/rerank", mxl_api_rerank, NEED_READY},
    {"POST", "/v1/reranking", mxl_api_rerank, NEED_READY},
    {"POST", "/rerank", mxl_api_rerank, NEED_READY},
    {"POST", "/reranking", mxl_api_rerank, NEED_READY},
    {"POST", "/v1/chat/completions", mxl_api_openai_chat, NEED_CHAT},
    {"POST", "/chat/completions", mxl_api_openai_chat, NEED_CHAT},
    {"POST", "/v1/completions", mxl_api_openai_completions, NEED_CHAT},
    {"POST", "/v1/chat/completions/input_tokens", mxl_api_openai_input_tokens, NEED_CHAT},
    {"POST", "/chat/completions/input_tokens", mxl_api_openai_input_tokens, NEED_CHAT},
    {"POST", "/v1/messages", mxl_api_anthropic_messages, NEED_CHAT},
    {"POST", "/v1/messages/count_tokens", mxl_api_anthropic_count_tokens, NEED_CHAT},
    {"POST", "/completion", mxl_api_llama_completion, NEED_CHAT},
    {"POST", "/completions", mxl_api_llama_completion, NEED_CHAT},
    {"POST", "/tokenize", mxl_api_llama_tokenize, NEED_CHAT},
    {"POST", "/detokenize", mxl_api_llama_detokenize, NEED_CHAT},
    {"POST", "/apply-template", mxl_api_llama_apply_template, NEED_CHAT},
    {"GET", "/props", mxl_api_llama_props, NEED_CHAT},
    {"POST", "/props", mxl_api_llama_props, NEED_CHAT},
    {"GET", "/slots", mxl_api_llama_slots, NEED_CHAT},
    {"GET", "/metrics", mxl_api_llama_metrics, NEED_READY},
    {"GET", "/v1/cache/stats", mxl_api_cache_stats, NEED_CHAT},
};

static void handle(void *ctx, mxl_http_req *r) {
    mxl_server *s = ctx;
    const char *path = mxl_http_path(r), *method = mxl_http_method(r);
    mxl_api api = strncmp(path, "/v1/messages", 12) == 0 ? MXL_API_ANTHROPIC : MXL_API_OPENAI;
    /* public routes, matched without the prefix as llama-server does */
    bool public_route = !strcmp(path, "/") || !strcmp(path, "/health") || !strcmp(path, "/v1/health");
    if (!public_route && !authorized(s, r)) {
        mxl_srv_error(r, api, 401, "authentication_error", "Invalid API Key");
        return;
    }
    size_t pl = strlen(s->prefix);
    if (pl && !public_route) {
        if (strncmp(path, s->prefix, pl) != 0 || (path[pl] != '/' && path[pl] != 0)) {
            mxl_srv_error(r, api, 404, "not_found_error", "File Not Found");
            return;
        }
        path += pl;
    }
    if (!strcmp(path, "/") || !*path) {
        const char *page = "mlxcel server: see /v1/models, /v1/chat/completions, /completion, /health\n";
        mxl_http_send(r, 200, "text/plain; charset=utf-8", page, strlen(page));
        return;
    }
    bool path_known = false;
    for (size_t i = 0; i < sizeof k_routes / sizeof k_routes[0]; i++) {
        const route *rt = &k_routes[i];
        if (strcmp(rt->path, path) != 0) continue;
        path_known = true;
        if (strcmp(rt->method, method) != 0) continue;
        if (rt->need != NEED_NONE && !atomic_load(&s->ready)) {
            mxl_srv_error(r, api, 503, "unavailable_error", "Loading model");
            return;
        }
        if (rt->need == NEED_CHAT && !s->model) {
            mxl_srv_error(r, api, 501, "not_supported_error", "This server does not serve text generation (it was started with an %s model)",
                          s->embedder ? "embedding" : "reranker");
            return;
        }
        rt->fn(s, r);
        return;
    }
    if (path_known) mxl_srv_error(r, api, 405, "invalid_request_error", "method %s is not allowed on %s", method, path);
    else mxl_srv_error(r, api, 404, "not_found_error", "File Not Found");
}

/* --- process ------------------------------------------------------------------------------------ */

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static char *read_file(const char *path, mxl_error *err, const char *what) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        mxl_error_set(err, MXL_ERR_IO, "%s %s: cannot open", what, path);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *p = realloc(buf, cap);
            if (!p) break;
            buf = p;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0) break;
    }
    fclose(f);
    if (!buf) {
        mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    buf[len] = 0;
    return buf;
}

/* "a, b,c" -> ["a", "b", "c"] (empty items dropped). */
static json_t *split_list(const char *list) {
    json_t *out = json_array();
    for (const char *p = list; p && *p;) {
        while (*p == ' ' || *p == ',') p++;
        const char *e = p;
        while (*e && *e != ',') e++;
        const char *t = e;
        while (t > p && t[-1] == ' ') t--;
        if (t > p) json_array_append_new(out, json_stringn(p, (size_t)(t - p)));
        p = e;
    }
    return out;
}

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == '\t')) s[--n] = 0;
    size_t k = strspn(s, " \t\r\n");
    memmove(s, s + k, n - k + 1);
}

static void logf_line(void (*log)(const char *), const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_line(void (*log)(const char *), const char *fmt, ...) {
    if (!log) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log(line);
}

/* What -m is: a chat model, an embedding model or a reranker (cross-encoder). */
static mxl_status model_task(const char *path, mxl_task *task, mxl_error *err) {
    mxl_checkpoint *ck = NULL;
    mxl_status st = mxl_checkpoint_open(path, &ck, err);
    if (st) return st;
    mxl_detection det;
    st = mxl_checkpoint_detect(ck, &det, err);
    if (!st) *task = det.task;
    mxl_checkpoint_close(ck);
    return st;
}

/* Whether `ref` (a --reranker-model value) resolves to the checkpoint at `path`. */
static bool same_checkpoint(const char *ref, const char *path) {
    mxl_resolved res;
    mxl_error e;
    if (mxl_store_resolve(ref, NULL, NULL, &res, &e)) return false;
    char a[PATH_MAX], b[PATH_MAX];
    if (!realpath(res.path, a) || !realpath(path, b)) return false;
    return strcmp(a, b) == 0;
}

/* --embedding-model / --reranker-model beside the -m model, the workers and their options.
 * reranker_is_main: -m is that reranker already (a generative-rerank-only server). */
static mxl_status load_side_models(mxl_server *s, const mxl_server_config *cfg, int threads, bool reranker_is_main,
                                   mxl_error *err) {
    mxl_resolved res;
    if (cfg->embedding_model) {
        if (s->embedder) return mxl_error_set(err, MXL_ERR_ARG, "--embedding-model: -m is already an embedding model (one per server)");
        if (mxl_store_resolve(cfg->embedding_model, NULL, NULL, &res, err) || mxl_embed_model_load(res.path, threads, &s->embedder, err))
            return err->status;
        snprintf(s->embed_name, sizeof s->embed_name, "%s", res.repo_id[0] ? res.repo_id : cfg->embedding_model);
    }
    if (cfg->reranker_model && !reranker_is_main) {
        if (s->reranker) return mxl_error_set(err, MXL_ERR_ARG, "--reranker-model: -m is already a reranker (one per server)");
        if (mxl_store_resolve(cfg->reranker_model, NULL, NULL, &res, err) || mxl_reranker_load(res.path, threads, &s->reranker, err))
            return err->status;
        snprintf(s->rerank_name, sizeof s->rerank_name, "%s", res.repo_id[0] ? res.repo_id : cfg->reranker_model);
    }
    bool rank = cfg->pooling && !strcmp(cfg->pooling, "rank");
    s->embed_opts = (mxl_embed_opts){.normalize = (int)cfg->embd_normalize, .max_length = cfg->embedding_max_length,
                                     .batch_size = cfg->embedding_batch_size};
    if (cfg->pooling && !rank)
        s->embed_opts.pooling = !strcmp(cfg->pooling, "cls") ? MXL_POOLING_CLS : !strcmp(cfg->pooling, "last") ? MXL_POOLING_LAST_TOKEN
                                                                                                              : MXL_POOLING_MEAN;
    s->rerank_opts = (mxl_rerank_opts){.max_length = cfg->embedding_max_length, .batch_size = cfg->rerank_batch_size};
    mxl_srv_worker_init(&s->embed_worker, (int)cfg->embedding_queue_depth, (int)cfg->embedding_timeout);
    mxl_srv_worker_init(&s->rerank_worker, (int)cfg->embedding_queue_depth, (int)cfg->embedding_timeout);
    s->workers_ready = true;
    return MXL_OK;
}

int mxl_server_run(const mxl_server_config *cfg, void (*log)(const char *line), mxl_error *err) {
    mxl_server s = {0};
    s.cfg = cfg;
    s.prefix = cfg->api_prefix ? cfg->api_prefix : "";
    s.created = (long)time(NULL);
    /* as llama-server: thinking is on unless --reasoning off (templates that read enable_thinking
     * get it set explicitly) */
    s.reasoning = cfg->reasoning && !strcmp(cfg->reasoning, "off") ? MXL_REASONING_OFF : MXL_REASONING_ON;
    snprintf(s.created_text, sizeof s.created_text, "%ld", s.created);
    struct tm tm_now;
    time_t t_now = time(NULL);
    localtime_r(&t_now, &tm_now);
    strftime(s.date_string, sizeof s.date_string, "%d %b %Y", &tm_now);
    gmtime_r(&t_now, &tm_now);
    strftime(s.datetime_text, sizeof s.datetime_text, "%b %d %Y %H:%M:%S GMT", &tm_now);
    char *cert = NULL, *key = NULL, *tmpl_file = NULL;
    mxl_http_server *http = NULL;
    int rc = 1;
    if (cfg->api_key) s.api_key = strdup(cfg->api_key);
    else if (cfg->api_key_file) {
        if (!(s.api_key = read_file(cfg->api_key_file, err, "--api-key-file"))) goto out;
        trim(s.api_key);
        if (!s.api_key[0]) {
            mxl_error_set(err, MXL_ERR_ARG, "--api-key-file %s: the file is empty", cfg->api_key_file);
            goto out;
        }
    }
    if (cfg->chat_template_kwargs) {
        json_error_t je;
        s.template_kwargs = json_loads(cfg->chat_template_kwargs, 0, &je);
        if (!s.template_kwargs || !json_is_object(s.template_kwargs)) {
            mxl_error_set(err, MXL_ERR_ARG, "--chat-template-kwargs: expected a JSON object");
            goto out;
        }
    }
    if (cfg->chat_template_file && !(tmpl_file = read_file(cfg->chat_template_file, err, "--chat-template-file"))) goto out;
    /* --chat-template NAME of one of llama.cpp's built-in formats (chatml, command-r, ...) */
    const char *chat_tmpl = mxl_chat_builtin_template(cfg->chat_template);
    if (!chat_tmpl) chat_tmpl = cfg->chat_template;
    if (chat_tmpl || tmpl_file) { /* a template that does not parse fails before listening */
        const char *src = tmpl_file ? tmpl_file : chat_tmpl;
        mxl_template *t = NULL;
        if (mxl_template_parse(src, strlen(src), tmpl_file ? cfg->chat_template_file : "--chat-template", &t, err)) goto out;
        mxl_template_destroy(t);
    }
    for (int i = 0; i < cfg->n_logit_bias; i++)
        if (mxl_logit_bias_parse(cfg->logit_bias[i], &s.default_bias[i], err)) goto out;
    /* resolve the model before listening, so a typo fails at once */
    mxl_resolved res;
    if (mxl_store_resolve(cfg->model, NULL, NULL, &res, err)) goto out;
    snprintf(s.model_path, sizeof s.model_path, "%s", res.path);
    if (cfg->ssl_cert_file) {
        if (!(cert = read_file(cfg->ssl_cert_file, err, "--ssl-cert-file")) || !(key = read_file(cfg->ssl_key_file, err, "--ssl-key-file")))
            goto out;
    }
    int n_slots = cfg->no_batch ? 1 : (int)(cfg->max_batch_size > 0 ? cfg->max_batch_size : cfg->n_parallel);
    mxl_http_config hc = {
        .host = cfg->host, .port = (int)cfg->port, .reuse_port = cfg->reuse_port, .cert_pem = cert, .key_pem = key,
        .cors_origins = cfg->cors_origins, .cors_headers = cfg->cors_headers, .cors_methods = cfg->cors_methods,
        .cors_credentials = cfg->cors_credentials, .allowed_origins = cfg->allowed_origins,
        .max_body = (size_t)cfg->max_body_bytes, .timeout_s = (unsigned)cfg->timeout, .max_connections = 1024,
    };
    if (cfg->ctx_size > 0 && cfg->ctx_size / n_slots < 512) { /* llama-server semantics: the budget is shared */
        mxl_error_set(err, MXL_ERR_ARG, "--ctx-size %lld over %d slots leaves %lld tokens per slot; at least 512 are needed",
                      (long long)cfg->ctx_size, n_slots, (long long)(cfg->ctx_size / n_slots));
        goto out;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* what -m is (cheap: config only), so flag combinations that cannot work fail before listening */
    mxl_task task;
    if (model_task(s.model_path, &task, err)) goto out;
    /* a generative-rerank-only server names the same generation checkpoint in -m and
     * --reranker-model; it is loaded once, as the reranker, with no chat model (spec: serve,
     * "Embedding and reranking workers") */
    bool reranker_is_main = task == MXL_TASK_GENERATE && cfg->reranker_model && same_checkpoint(cfg->reranker_model, s.model_path);
    if (reranker_is_main) task = MXL_TASK_RERANK;
    bool rank = cfg->pooling && !strcmp(cfg->pooling, "rank");
    if (cfg->embedding_mode && task != MXL_TASK_EMBED && !cfg->embedding_model) {
        mxl_error_set(err, MXL_ERR_ARG, "--embedding needs an embedding model (-m or --embedding-model)");
        goto out;
    }
    if ((cfg->rerank_mode || rank) && task != MXL_TASK_RERANK && !cfg->reranker_model) {
        mxl_error_set(err, MXL_ERR_ARG, "%s needs a reranker model (-m or --reranker-model)", rank ? "--pooling rank" : "--rerank");
        goto out;
    }
    if (mxl_http_start(&hc, handle, &s, &http, err)) goto out;
    logf_line(log, "mlxcel server listening on %s (loading %s)", mxl_http_address(http), s.model_path);

    int64_t threads = cfg->threads > 0 ? cfg->threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    s.aliases = split_list(cfg->alias);
    s.tags = split_list(cfg->tags);
    /* the id is the first alias in sorted order (llama-server keeps them in a std::set) */
    const char *first = NULL;
    for (size_t i = 0; i < json_array_size(s.aliases); i++) {
        const char *a = json_string_value(json_array_get(s.aliases, i));
        if (!first || strcmp(a, first) < 0) first = a;
    }
    snprintf(s.model_name, sizeof s.model_name, "%s", first ? first : res.repo_id[0] ? res.repo_id : cfg->model);
    if (task == MXL_TASK_EMBED) { /* an embedding-only server: no chat model, no scheduler */
        if (mxl_embed_model_load(s.model_path, (int)threads, &s.embedder, err)) goto out;
        snprintf(s.embed_name, sizeof s.embed_name, "%s", s.model_name);
    } else if (task == MXL_TASK_RERANK) {
        if (mxl_reranker_load(s.model_path, (int)threads, &s.reranker, err)) goto out;
        snprintf(s.rerank_name, sizeof s.rerank_name, "%s", s.model_name);
    } else {
        if (mxl_gen_model_load(s.model_path, (int)(threads > 0 ? threads : 1), &s.model, err)) goto out;
        s.tok = mxl_gen_model_tokenizer(s.model);
        if (mxl_gen_model_set_kv_types(s.model, cfg->cache_type_k, cfg->cache_type_v, err)) goto out;
        if (chat_tmpl || tmpl_file) {
            mxl_status tst = mxl_gen_model_set_template(s.model, tmpl_file ? tmpl_file : chat_tmpl,
                                                        tmpl_file ? cfg->chat_template_file : "--chat-template", err);
            free(tmpl_file);
            tmpl_file = NULL;
            if (tst) goto out;
        }
        int64_t model_ctx = mxl_gen_model_default_ctx(s.model);
        s.slot_ctx = cfg->ctx_size > 0 ? cfg->ctx_size / n_slots : model_ctx;
        s.n_predict_default = cfg->n_predict;
        s.defaults.sampling = cfg->sampling;
        s.defaults.sampling.seed = cfg->seed >= 0 ? (uint64_t)cfg->seed : 0;
        s.defaults.max_tokens = cfg->n_predict;
        s.defaults.ignore_eos = cfg->ignore_eos;
        s.defaults.cache_prompt = cfg->prompt_cache;
        for (int i = 0; i < cfg->n_reverse_prompt && i < MXL_SEQ_MAX_STOP; i++) s.defaults.stop[s.defaults.n_stop++] = cfg->reverse_prompt[i];
        s.defaults.sampling.logit_bias = s.default_bias;
        s.defaults.sampling.n_logit_bias = (size_t)cfg->n_logit_bias;
        if (cfg->n_dry_breakers) { /* --dry-sequence-breaker none: no breakers */
            bool none = cfg->n_dry_breakers == 1 && !strcmp(cfg->dry_breakers[0], "none");
            s.defaults.n_breakers = none ? 0 : (size_t)cfg->n_dry_breakers;
            for (size_t i = 0; i < s.defaults.n_breakers; i++) s.defaults.breakers[i] = cfg->dry_breakers[i];
            s.defaults.sampling.dry_breakers = s.defaults.breakers;
            s.defaults.sampling.n_dry_breakers = s.defaults.n_breakers;
        }
        mxl_sched_config sc = {
            .n_slots = n_slots, .slot_ctx = s.slot_ctx, .max_queue = (int)cfg->max_queue_depth,
            .prefill_chunk = cfg->prefill_chunk > 0 ? cfg->prefill_chunk : cfg->batch_size,
            .grant_interval = (int)cfg->grant_interval,
            .decode_timeout_s = cfg->decode_timeout > 0 ? cfg->decode_timeout : 300,
            .kv_budget = cfg->kv_budget < 0 ? MXL_SCHED_KV_NONE : cfg->kv_budget,
            .kv_watermark = cfg->kv_watermark,
            .preemption = cfg->enable_preemption,
            .preempt_policy = cfg->preemption_policy && !strcmp(cfg->preemption_policy, "lowest-priority") ? MXL_SCHED_PREEMPT_LOWEST_PRIORITY
                                                                                                        : MXL_SCHED_PREEMPT_LONGEST_FIRST,
            .prompt_cache = cfg->prompt_cache && cfg->prompt_cache_capacity > 0,
            .cache_capacity_bytes = cfg->prompt_cache_capacity,
            .cache_max_entries = cfg->prompt_cache_max_entries,
            .cache_ttl_s = (double)cfg->prompt_cache_ttl,
            .cache_min_prefix = cfg->prompt_cache_min_prefix,
        };
        if (mxl_sched_create(s.model, &sc, &s.sched, err)) goto out;
    }
    if (load_side_models(&s, cfg, (int)threads, reranker_is_main, err)) goto out;
    atomic_store(&s.ready, true);
    if (s.model)
        logf_line(log, "model %s ready: %d slots x %lld tokens of context", s.model_name, n_slots, (long long)s.slot_ctx);
    if (s.embedder) logf_line(log, "embedding model %s ready: %s, %lld dimensions", s.embed_name, mxl_embed_model_family(s.embedder),
                              (long long)mxl_embed_model_dim(s.embedder));
    if (s.reranker) logf_line(log, "reranker %s ready: %s", s.rerank_name, mxl_reranker_family(s.reranker));
    while (!g_stop) usleep(100 * 1000);
    logf_line(log, "shutting down");
    mxl_http_quiesce(http);
    rc = 0;
out:
    /* stopping the scheduler ends every job (cancelled), which unblocks the connection threads */
    mxl_sched_destroy(s.sched);
    mxl_http_stop(http);
    mxl_gen_model_destroy(s.model);
    mxl_embed_model_destroy(s.embedder);
    mxl_reranker_destroy(s.reranker);
    if (s.workers_ready) {
        mxl_srv_worker_destroy(&s.embed_worker);
        mxl_srv_worker_destroy(&s.rerank_worker);
    }
    json_decref(s.template_kwargs);
    json_decref(s.aliases);
    json_decref(s.tags);
    free(s.api_key);
    free(cert);
    free(key);
    free(tmpl_file);
    return rc;
}
