/* server.c - the `mlxcel serve` process (server.h): routing and authentication, and
 * mxl_server_run's steps (check the flags, listen, load the models, build the scheduler, wait for
 * a signal, shut down). Requests are read by request.c and answered by the api_*.c routes. */
#include "server/server.h"

#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "engine/chat_builtin.h"
#include "engine/memory_estimate.h"
#include "io/json_read.h"
#include "io/hub.h"
#include "io/store.h"
#include "models/checkpoint.h"
#include "models/detect.h"
#include "models/lora.h"
#include "template/template.h"
#include "server/limits.h"
#include "server/request.h"
#include "server/resp_store.h"
#include "server/routes.h"
#include "server/server_state.h"
#include "server/webui.h"

/* --- routing ----------------------------------------------------------------------------------- */

static bool authorized(const mxl_server *s, mxl_http_req *r) {
    if (!s->api_key) return true;
    const char *h = mxl_http_header(r, "Authorization");
    if (h && strncasecmp(h, "Bearer ", 7) == 0 && mxl_srv_key_equal(h + 7, s->api_key)) return true;
    const char *x = mxl_http_header(r, "X-Api-Key");
    return x && mxl_srv_key_equal(x, s->api_key); /* (constant time: limits.h) */
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
    {"POST", "/infill", mxl_api_llama_infill, NEED_CHAT},
    {"POST", "/tokenize", mxl_api_llama_tokenize, NEED_CHAT},
    {"POST", "/detokenize", mxl_api_llama_detokenize, NEED_CHAT},
    {"POST", "/apply-template", mxl_api_llama_apply_template, NEED_CHAT},
    {"GET", "/props", mxl_api_llama_props, NEED_CHAT},
    {"POST", "/props", mxl_api_llama_props, NEED_CHAT},
    {"GET", "/slots", mxl_api_llama_slots, NEED_CHAT},
    {"GET", "/metrics", mxl_api_llama_metrics, NEED_READY},
    {"GET", "/lora-adapters", mxl_api_llama_lora_adapters, NEED_CHAT},
    {"POST", "/lora-adapters", mxl_api_llama_lora_adapters, NEED_CHAT},
    {"GET", "/v1/cache/stats", mxl_api_cache_stats, NEED_CHAT},
    {"GET", "/v1/settings", mxl_api_settings, NEED_CHAT},
    {"PATCH", "/v1/settings", mxl_api_settings, NEED_CHAT},
    {"POST", "/v1/responses", mxl_api_responses_create, NEED_CHAT},
    {"POST", "/responses", mxl_api_responses_create, NEED_CHAT},
};

/* Routes of the spec (and of llama-server b10621, whose API `serve` follows) that this build does
 * not serve: any method on them answers 501 naming the route, where an unknown path answers 404.
 * A pattern ending in '/' also covers the paths below it (/slots/:id_slot, /v1/responses/{id}). */
static const struct unbuilt_route {
    const char *pattern, *name;
} k_unbuilt[] = {
    {"/v1/images/generations", "/v1/images/generations"},
    {"/v1/images/edits", "/v1/images/edits"},
    {"/v1/audio/transcriptions", "/v1/audio/transcriptions"},
    {"/v1/audio/translations", "/v1/audio/translations"},
    {"/v1/audio/speech", "/v1/audio/speech"},
    {"/v1/realtime", "/v1/realtime"},
    {"/api/chat", "/api/chat"},
    {"/api/show", "/api/show"},
    {"/api/tags", "/api/tags"},
};

/* The spec's name of an unbuilt route `path` is, or NULL. */
static const char *unbuilt_route(const char *path) {
    for (size_t i = 0; i < sizeof k_unbuilt / sizeof k_unbuilt[0]; i++) {
        const char *p = k_unbuilt[i].pattern;
        size_t n = strlen(p);
        if (p[n - 1] == '/' ? strncmp(path, p, n) == 0 && path[n] : strcmp(path, p) == 0) return k_unbuilt[i].name;
    }
    return NULL;
}

/* The allocation fault hook of tests/cli/test_alloc_faults_server.py, on only when the server was
 * started with MXL_ALLOC_FAULT_HOOK=1: a request's X-Mxl-Alloc-Fail-At: n makes the n-th allocation
 * from its arrival fail (core/alloc.h; 0 disarms), and GET /mxl-alloc answers the seam's counters
 * (allocated without allocating). True when the request was answered here. */
static bool alloc_fault_hook(mxl_http_req *r, const char *path, bool *armed) {
    const char *at = mxl_http_header(r, "X-Mxl-Alloc-Fail-At");
    if (!strcmp(path, "/mxl-alloc")) {
        mxl_alloc_fail_at(0);
        char body[160];
        int n = snprintf(body, sizeof body, "{\"live_bytes\":%lld,\"calls\":%llu,\"failures\":%llu}",
                         (long long)mxl_alloc_live_bytes(), (unsigned long long)mxl_alloc_calls(),
                         (unsigned long long)mxl_alloc_failures_injected());
        mxl_http_send(r, 200, "application/json", body, (size_t)n);
        return true;
    }
    if (at) mxl_alloc_fail_at(strtoull(at, NULL, 10));
    *armed = at != NULL;
    return false;
}

static void route_request(mxl_server *s, mxl_http_req *r);

/* --- sleeping (--sleep-idle-seconds) ------------------------------------------------------------- */

/* A request about to use the model: counted, and the model reloaded first when it sleeps (the
 * request waits for that, as in llama-server). False: the reload failed (answered 500). */
static bool model_acquire(mxl_server *s, mxl_http_req *r, mxl_api api) {
    if (s->cfg->sleep_idle_seconds < 0 || !s->wake) return true;
    pthread_mutex_lock(&s->sleep_mu);
    if (atomic_load(&s->sleeping)) {
        mxl_error err = {0};
        if (s->wake(s, &err)) {
            pthread_mutex_unlock(&s->sleep_mu);
            mxl_srv_error(r, api, 500, "server_error", "reloading the model after sleeping failed: %s", err.msg);
            return false;
        }
        json_decref(s->sleep_props);
        s->sleep_props = NULL;
        atomic_store(&s->sleeping, false);
    }
    s->active++;
    pthread_mutex_unlock(&s->sleep_mu);
    return true;
}

void mxl_srv_hold(mxl_server *s) {
    if (s->cfg->sleep_idle_seconds < 0 || !s->wake) return;
    pthread_mutex_lock(&s->sleep_mu);
    s->active++;
    pthread_mutex_unlock(&s->sleep_mu);
}

void mxl_srv_release(mxl_server *s) {
    if (s->cfg->sleep_idle_seconds < 0 || !s->wake) return;
    pthread_mutex_lock(&s->sleep_mu);
    s->active--;
    s->last_active_ms = mxl_now_ms();
    pthread_mutex_unlock(&s->sleep_mu);
}

static void handle(void *ctx, mxl_http_req *r) {
    mxl_server *s = ctx;
    bool armed = false;
    if (s->alloc_fault_hook && alloc_fault_hook(r, mxl_http_path(r), &armed)) return;
    route_request(s, r);
    /* the request is answered: a fault it did not reach goes (a stream's at its end, gen_call.c) */
    if (armed && !mxl_http_streaming(r)) mxl_alloc_fail_at(0);
}

static void route_request(mxl_server *s, mxl_http_req *r) {
    const char *path = mxl_http_path(r), *method = mxl_http_method(r);
    mxl_api api = strncmp(path, "/v1/messages", 12) == 0 ? MXL_API_ANTHROPIC : MXL_API_OPENAI;
    /* public routes, matched without the prefix as llama-server does */
    bool public_route = !strcmp(path, "/") || !strcmp(path, "/health") || !strcmp(path, "/v1/health");
    /* the WebUI page is static and public (a browser navigating to it sends no key): webui.c */
    size_t pl = strlen(s->prefix);
    if (s->webui && strncmp(path, s->prefix, pl) == 0 && mxl_webui_route(s, r, path + pl)) return;
    if (atomic_load(&s->draining)) { /* /health too: a balancer takes the server out of rotation */
        mxl_srv_error(r, api, 503, "unavailable_error", "the server is shutting down");
        return;
    }
    if (!public_route && !authorized(s, r)) {
        mxl_srv_error(r, api, 401, "authentication_error", "Invalid API Key");
        return;
    }
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
    /* the stored responses: /v1/responses/{id}[/cancel|/input_items], /v1/responses/input_tokens */
    const char *rest = !strncmp(path, "/v1/responses/", 14) ? path + 14 : !strncmp(path, "/responses/", 11) ? path + 11 : NULL;
    if (rest) {
        /* (only input_tokens needs the model: it wakes it; the store's routes answer while it sleeps) */
        if (!atomic_load(&s->ready)) mxl_srv_error(r, api, 503, "unavailable_error", "Loading model");
        else if (!s->model && !s->wake) mxl_srv_error(r, api, 501, "not_supported_error", "This server does not serve text generation");
        else if (strcmp(rest, "input_tokens")) mxl_api_responses_item(s, r, rest);
        else if (model_acquire(s, r, api)) {
            if (!s->model) mxl_srv_error(r, api, 501, "not_supported_error", "This server does not serve text generation");
            else mxl_api_responses_item(s, r, rest);
            mxl_srv_release(s);
        }
        return;
    }
    /* the Conversations API: /v1/conversations[/{id}[/items[/{item_id}]]] */
    const char *crest = !strcmp(path, "/v1/conversations") || !strcmp(path, "/conversations") ? ""
                        : !strncmp(path, "/v1/conversations/", 18)                                ? path + 18
                        : !strncmp(path, "/conversations/", 15)                                   ? path + 15
                                                                                                  : NULL;
    if (crest) {
        if (!atomic_load(&s->ready)) mxl_srv_error(r, api, 503, "unavailable_error", "Loading model");
        else mxl_api_conversations(s, r, crest);
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
        /* /health, /metrics and GET /props neither wake the model nor count as activity
         * (llama-server): they answer from what sleeping kept (/metrics' counters go on from
         * stats_base), or with the model held against sleeping meanwhile. (The lock also orders
         * /metrics' scrapes, which reset its throughput window.) */
        if ((rt->fn == mxl_api_llama_health && s->wake) || rt->fn == mxl_api_llama_metrics) { /* (its scheduler may be going to sleep) */
            pthread_mutex_lock(&s->sleep_mu);
            rt->fn(s, r);
            pthread_mutex_unlock(&s->sleep_mu);
            return;
        }
        if (rt->fn == mxl_api_llama_props && !strcmp(method, "GET") && s->wake) {
            pthread_mutex_lock(&s->sleep_mu);
            json_t *o = atomic_load(&s->sleeping) ? json_deep_copy(s->sleep_props) : mxl_api_llama_props_json(s, false);
            pthread_mutex_unlock(&s->sleep_mu);
            mxl_http_send_json(r, 200, o);
            return;
        }
        const bool wakes = rt->need != NEED_NONE;
        if (wakes && !model_acquire(s, r, api)) return;
        if (rt->need == NEED_CHAT && !s->model) {
            mxl_srv_error(r, api, 501, "not_supported_error", "This server does not serve text generation (it was started with an %s model)",
                          s->embedder ? "embedding" : "reranker");
        } else {
            rt->fn(s, r);
        }
        if (wakes) mxl_srv_release(s);
        return;
    }
    if (!strncmp(path, "/slots/", 7) && path[7]) { /* POST /slots/:id_slot?action=... */
        if (strcmp(method, "POST") != 0) mxl_srv_error(r, api, 405, "invalid_request_error", "method %s is not allowed on %s", method, path);
        else if (!atomic_load(&s->ready)) mxl_srv_error(r, api, 503, "unavailable_error", "Loading model");
        else if (model_acquire(s, r, api)) {
            if (!s->model) mxl_srv_error(r, api, 501, "not_supported_error", "This server does not serve text generation");
            else mxl_api_llama_slot_action(s, r);
            mxl_srv_release(s);
        }
        return;
    }
    const char *unbuilt = unbuilt_route(path);
    bool webui_path = !strcmp(path, "/webui") || !strncmp(path, "/webui/", 7);
    if (path_known) mxl_srv_error(r, api, 405, "invalid_request_error", "method %s is not allowed on %s", method, path);
    else if (webui_path && !s->webui) /* built, off without --webui (on, webui.c answers its page above) */
        mxl_srv_error(r, api, 501, "not_implemented_error", "the WebUI is off: start mlxcel serve with --webui");
    else if (!strcmp(path, "/models/load") || !strcmp(path, "/models/unload"))
        mxl_srv_error(r, api, 501, "not_implemented_error", "%s is served in router mode only: start mlxcel serve without -m", path);
    else if (unbuilt) mxl_srv_error(r, api, 501, "not_implemented_error", "%s is not implemented in this build", unbuilt);
    else mxl_srv_error(r, api, 404, "not_found_error", "File Not Found");
}

/* --- process ------------------------------------------------------------------------------------ */

static volatile sig_atomic_t g_stop; /* signals seen: the first drains, the second stops at once */
static void on_signal(int sig) {
    (void)sig;
    if (g_stop < 2) g_stop++;
}

char *mxl_srv_read_file(const char *path, mxl_error *err, const char *what) {
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
            char *p = mxl_realloc(buf, cap);
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
json_t *mxl_srv_split_list(const char *list) {
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

/* A model argument of the server: a path, or a repo id found on this machine or downloaded (progress
 * on the CLI's stderr) unless --offline / HF_HUB_OFFLINE. */
static mxl_status resolve_model(const mxl_server_config *cfg, const char *ref, const char *revision, mxl_resolved *res,
                                mxl_error *err) {
    mxl_hub_resolve_opts ro = {.offline = cfg->offline || mxl_hub_offline_env(),
                               .token = mxl_hub_token(cfg->hf_token),
                               .progress = cfg->hub_progress,
                               .progress_ud = cfg->hub_progress_ud};
    return mxl_hub_resolve(ref, cfg->model_store_root, revision, &ro, res, err);
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
        if (resolve_model(cfg, cfg->embedding_model, NULL, &res, err) || mxl_embed_model_load(res.path, threads, &s->embedder, err))
            return err->status;
        snprintf(s->embed_name, sizeof s->embed_name, "%s", res.repo_id[0] ? res.repo_id : cfg->embedding_model);
    }
    if (cfg->reranker_model && !reranker_is_main) {
        if (s->reranker) return mxl_error_set(err, MXL_ERR_ARG, "--reranker-model: -m is already a reranker (one per server)");
        if (resolve_model(cfg, cfg->reranker_model, NULL, &res, err) || mxl_reranker_load(res.path, threads, &s->reranker, err))
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

/* What mxl_server_run holds besides the server state, from reading the flags to shutdown. */
typedef struct startup {
    char *cert, *key;        /* --ssl-cert-file / --ssl-key-file contents */
    char *tmpl_file;         /* --chat-template-file contents (NULL once the model owns a copy) */
    const char *chat_tmpl;   /* --chat-template text, a built-in format's when it names one */
    mxl_resolved res;        /* -m, resolved */
    mxl_task task;           /* what -m is, after --reranker-model naming the same checkpoint */
    bool reranker_is_main;   /* -m is the --reranker-model: loaded once, as the reranker */
    int n_slots, threads;
    mxl_http_server *http;
} startup;

/* The server's identity and clock-derived fields, from the flags and the start time. */
static void init_state(mxl_server *s, const mxl_server_config *cfg) {
    s->cfg = cfg;
    s->prefix = cfg->api_prefix ? cfg->api_prefix : "";
    s->created = (long)time(NULL);
    pthread_mutex_init(&s->lora_mu, NULL);
    pthread_mutex_init(&s->defaults_mu, NULL);
    pthread_mutex_init(&s->settings_mu, NULL);
    pthread_mutex_init(&s->sleep_mu, NULL);
    /* as llama-server: thinking is on unless --reasoning off (templates that read enable_thinking
     * get it set explicitly) */
    s->reasoning = cfg->reasoning && !strcmp(cfg->reasoning, "off") ? MXL_REASONING_OFF : MXL_REASONING_ON;
    snprintf(s->created_text, sizeof s->created_text, "%ld", s->created);
    struct tm tm_now;
    time_t t_now = time(NULL);
    localtime_r(&t_now, &tm_now);
    strftime(s->date_string, sizeof s->date_string, "%d %b %Y", &tm_now);
    gmtime_r(&t_now, &tm_now);
    strftime(s->datetime_text, sizeof s->datetime_text, "%b %d %Y %H:%M:%S GMT", &tm_now);
}

static pid_t router_parent(void);

/* Everything the flags name that can be wrong is checked before listening, so a typo fails at
 * once: the API key file, --chat-template-kwargs, the chat template (it must parse), the
 * default logit biases, -m (resolved), the TLS files and the context per slot. */
static mxl_status read_startup_options(mxl_server *s, startup *up, mxl_error *err) {
    const mxl_server_config *cfg = s->cfg;
    mxl_status st;
    s->alloc_fault_hook = getenv("MXL_ALLOC_FAULT_HOOK") && !strcmp(getenv("MXL_ALLOC_FAULT_HOOK"), "1");
    if (cfg->webui && (st = mxl_webui_init(s, err))) return st;
    if (cfg->api_key) s->api_key = mxl_strdup(cfg->api_key);
    else if (cfg->api_key_file) {
        if (!(s->api_key = mxl_srv_read_file(cfg->api_key_file, err, "--api-key-file"))) return err->status;
        trim(s->api_key);
        if (!s->api_key[0]) return mxl_error_set(err, MXL_ERR_ARG, "--api-key-file %s: the file is empty", cfg->api_key_file);
    }
    /* (a router's child: the router checks the key before it forwards) */
    if (cfg->settings && !s->api_key && !router_parent())
        return mxl_error_set(err, MXL_ERR_ARG, "--settings needs --api-key or --api-key-file: /v1/settings changes the server for every client");
    if (!(s->responses = mxl_resp_store_create(cfg->responses_max, cfg->responses_ttl)) ||
        !(s->conversations = mxl_resp_store_create(cfg->conversations_max, cfg->conversations_ttl)))
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    if (cfg->chat_template_kwargs) {
        json_error_t je;
        s->template_kwargs = mxl_json_loadb(cfg->chat_template_kwargs, strlen(cfg->chat_template_kwargs), 0, &je);
        if (!s->template_kwargs || !json_is_object(s->template_kwargs))
            return mxl_error_set(err, MXL_ERR_ARG, "--chat-template-kwargs: expected a JSON object");
    }
    if (cfg->chat_template_file && !(up->tmpl_file = mxl_srv_read_file(cfg->chat_template_file, err, "--chat-template-file")))
        return err->status;
    /* --chat-template NAME of one of llama.cpp's built-in formats (chatml, command-r, ...) */
    up->chat_tmpl = mxl_chat_builtin_template(cfg->chat_template);
    if (!up->chat_tmpl) up->chat_tmpl = cfg->chat_template;
    if (up->chat_tmpl || up->tmpl_file) { /* a template that does not parse fails before listening */
        const char *src = up->tmpl_file ? up->tmpl_file : up->chat_tmpl;
        mxl_template *t = NULL;
        const char *origin = up->tmpl_file ? cfg->chat_template_file : "--chat-template";
        if ((st = mxl_template_parse(src, strlen(src), origin, &t, err))) return st;
        mxl_template_destroy(t);
    }
    for (int i = 0; i < cfg->n_logit_bias; i++)
        if ((st = mxl_logit_bias_parse(cfg->logit_bias[i], &s->default_bias[i], err))) return st;
    struct stat sb; /* llama-server: the slot directory must exist */
    if (cfg->slot_save_path && (stat(cfg->slot_save_path, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        return mxl_error_set(err, MXL_ERR_ARG, "--slot-save-path: not a directory: %s", cfg->slot_save_path);
    if ((st = resolve_model(cfg, cfg->model, cfg->revision, &up->res, err))) return st;
    snprintf(s->model_path, sizeof s->model_path, "%s", up->res.path);
    if (cfg->ssl_cert_file) {
        if (!(up->cert = mxl_srv_read_file(cfg->ssl_cert_file, err, "--ssl-cert-file")) ||
            !(up->key = mxl_srv_read_file(cfg->ssl_key_file, err, "--ssl-key-file")))
            return err->status;
    }
    up->n_slots = cfg->no_batch ? 1 : (int)(cfg->max_batch_size > 0 ? cfg->max_batch_size : cfg->n_parallel);
    if (cfg->ctx_size > 0 && cfg->ctx_size / up->n_slots < 512) /* llama-server semantics: the budget is shared */
        return mxl_error_set(err, MXL_ERR_ARG, "--ctx-size %lld over %d slots leaves %lld tokens per slot; at least 512 are needed",
                             (long long)cfg->ctx_size, up->n_slots, (long long)(cfg->ctx_size / up->n_slots));
    return MXL_OK;
}

/* SIGINT / SIGTERM ask the wait loop to stop; a client gone mid-write is not a signal. */
static void install_signal_handlers(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* What -m is (cheap: config only), so flag combinations that cannot work fail before listening. */
static mxl_status choose_model_roles(mxl_server *s, startup *up, mxl_error *err) {
    const mxl_server_config *cfg = s->cfg;
    mxl_status st;
    if ((st = model_task(s->model_path, &up->task, err))) return st;
    /* a generative-rerank-only server names the same generation checkpoint in -m and
     * --reranker-model; it is loaded once, as the reranker, with no chat model (spec: serve,
     * "Embedding and reranking workers") */
    up->reranker_is_main = up->task == MXL_TASK_GENERATE && cfg->reranker_model && same_checkpoint(cfg->reranker_model, s->model_path);
    if (up->reranker_is_main) up->task = MXL_TASK_RERANK;
    bool rank = cfg->pooling && !strcmp(cfg->pooling, "rank");
    if (cfg->embedding_mode && up->task != MXL_TASK_EMBED && !cfg->embedding_model)
        return mxl_error_set(err, MXL_ERR_ARG, "--embedding needs an embedding model (-m or --embedding-model)");
    if ((cfg->rerank_mode || rank) && up->task != MXL_TASK_RERANK && !cfg->reranker_model)
        return mxl_error_set(err, MXL_ERR_ARG, "%s needs a reranker model (-m or --reranker-model)", rank ? "--pooling rank" : "--rerank");
    return MXL_OK;
}

/* Opens the socket before the models load: requests that need them are answered 503 "Loading
 * model" until they are ready (llama-server's /health does the same). The "listening" line waits
 * for announce_ready, so a load that fails never printed it. */
static mxl_status start_listeners(mxl_server *s, startup *up, void (*log)(const char *), mxl_error *err) {
    const mxl_server_config *cfg = s->cfg;
    mxl_status st;
    mxl_http_config hc = {
        .host = cfg->host, .port = (int)cfg->port, .reuse_port = cfg->reuse_port, .cert_pem = up->cert, .key_pem = up->key,
        .cors_origins = cfg->cors_origins, .cors_headers = cfg->cors_headers, .cors_methods = cfg->cors_methods,
        .cors_credentials = cfg->cors_credentials, .allowed_origins = cfg->allowed_origins,
        .max_body = (size_t)cfg->max_body_bytes, .timeout_s = (unsigned)cfg->timeout, .max_connections = 1024,
    };
    mxl_srv_http_limits(cfg, &hc); /* limits.h */
    if ((st = mxl_http_start(&hc, handle, s, &up->http, err))) return st;
    logf_line(log, "mlxcel server: loading %s; %s answers 503 until it is ready", s->model_path, mxl_http_address(up->http));
    return MXL_OK;
}

/* --threads, or every online CPU. */
static int thread_count(const mxl_server_config *cfg) {
    int64_t threads = cfg->threads > 0 ? cfg->threads : sysconf(_SC_NPROCESSORS_ONLN);
    return threads < 1 ? 1 : (int)threads;
}

/* --alias / --tags, and the model id /v1/models reports: the first alias in sorted order
 * (llama-server keeps them in a std::set), else the repo id or the -m text. */
static void name_model(mxl_server *s, const startup *up) {
    const mxl_server_config *cfg = s->cfg;
    s->aliases = mxl_srv_split_list(cfg->alias);
    s->tags = mxl_srv_split_list(cfg->tags);
    const char *first = NULL;
    for (size_t i = 0; i < json_array_size(s->aliases); i++) {
        const char *a = json_string_value(json_array_get(s->aliases, i));
        if (!first || strcmp(a, first) < 0) first = a;
    }
    snprintf(s->model_name, sizeof s->model_name, "%s", first ? first : up->res.repo_id[0] ? up->res.repo_id : cfg->model);
}

/* The sampling and stopping defaults every request starts from (--temp, --seed, -n, -r,
 * --logit-bias, --dry-sequence-breaker, ...). */
static void set_request_defaults(mxl_server *s) {
    const mxl_server_config *cfg = s->cfg;
    if (s->defaults_set) return; /* (a reload after sleeping: kept as they are, PATCH /v1/settings's included) */
    s->defaults_set = true;
    s->n_predict_default = cfg->n_predict;
    s->defaults.sampling = cfg->sampling;
    s->defaults.sampling.seed = cfg->seed >= 0 ? (uint64_t)cfg->seed : 0;
    s->defaults.max_tokens = cfg->n_predict;
    s->defaults.ignore_eos = cfg->ignore_eos;
    s->defaults.cache_prompt = cfg->prompt_cache;
    for (int i = 0; i < cfg->n_reverse_prompt && i < MXL_SEQ_MAX_STOP; i++) s->defaults.stop[s->defaults.n_stop++] = cfg->reverse_prompt[i];
    s->defaults.sampling.logit_bias = s->default_bias;
    s->defaults.sampling.n_logit_bias = (size_t)cfg->n_logit_bias;
    if (cfg->n_dry_breakers) { /* --dry-sequence-breaker none: no breakers */
        bool none = cfg->n_dry_breakers == 1 && !strcmp(cfg->dry_breakers[0], "none");
        s->defaults.n_breakers = none ? 0 : (size_t)cfg->n_dry_breakers;
        for (size_t i = 0; i < s->defaults.n_breakers; i++) s->defaults.breakers[i] = cfg->dry_breakers[i];
        s->defaults.sampling.dry_breakers = s->defaults.breakers;
        s->defaults.sampling.n_dry_breakers = s->defaults.n_breakers;
    }
}

/* One adapter of --lora / --lora-scaled at its scale. */
static mxl_status load_adapter(mxl_server *s, const char *path, size_t len, float scale, mxl_error *err) {
    if (s->n_lora >= MXL_SRV_MAX_MULTI) return mxl_error_set(err, MXL_ERR_ARG, "at most %d LoRA adapters", MXL_SRV_MAX_MULTI);
    char p[4096];
    snprintf(p, sizeof p, "%.*s", (int)len, path);
    mxl_status st = mxl_gen_model_load_adapter(s->model, p, &s->lora[s->n_lora], err);
    if (st) return st;
    s->lora_scale[s->n_lora++] = s->cfg->lora_init_without_apply ? 0.0f : scale;
    return MXL_OK;
}

/* --lora PATH[,PATH...] (scale 1) and --lora-scaled PATH:SCALE[,...], in that order (the ids of
 * GET /lora-adapters). */
static mxl_status load_adapters(mxl_server *s, mxl_error *err) {
    const mxl_server_config *cfg = s->cfg;
    mxl_status st;
    for (int pass = 0; pass < 2; pass++) {
        const int n = pass ? cfg->n_lora_scaled : cfg->n_lora;
        for (int i = 0; i < n; i++) {
            const char *v = pass ? cfg->lora_scaled[i] : cfg->lora[i];
            while (*v) {
                const char *end = strchr(v, ',');
                size_t len = end ? (size_t)(end - v) : strlen(v);
                float scale = 1.0f;
                if (pass) {
                    const char *colon = memrchr(v, ':', len);
                    char *e = NULL;
                    double d = colon ? strtod(colon + 1, &e) : 0;
                    if (!colon || e == colon + 1 || e != v + len || !isfinite(d))
                        return mxl_error_set(err, MXL_ERR_ARG, "--lora-scaled: '%.*s' is not PATH:SCALE", (int)len, v);
                    scale = (float)d;
                    len = (size_t)(colon - v);
                }
                if (len && (st = load_adapter(s, v, len, scale, err))) return st;
                v = end ? end + 1 : v + strlen(v);
            }
        }
    }
    if (cfg->lora_fuse && s->n_lora) {
        if (cfg->lora_init_without_apply)
            return mxl_error_set(err, MXL_ERR_ARG, "--lora-fuse merges the adapters at load; --lora-init-without-apply leaves them for later");
        for (int i = 0; i < s->n_lora; i++)
            if ((st = mxl_gen_model_fuse_adapter(s->model, s->lora[i], s->lora_scale[i], err))) {
                mxl_error_prefix(err, "adapter %s: ", s->lora[i]->path);
                return st;
            }
        s->lora_fused = true;
    }
    return MXL_OK;
}

/* Loads -m as what it is: an embedding model or a reranker (no chat model, no scheduler), or
 * the chat model with its KV types, chat template override, context per slot and defaults. */
static mxl_status load_main_model(mxl_server *s, startup *up, mxl_error *err) {
    const mxl_server_config *cfg = s->cfg;
    mxl_status st;
    if (up->task == MXL_TASK_EMBED) {
        if ((st = mxl_embed_model_load(s->model_path, up->threads, &s->embedder, err))) return st;
        snprintf(s->embed_name, sizeof s->embed_name, "%s", s->model_name);
        return MXL_OK;
    }
    if (up->task == MXL_TASK_RERANK) {
        if ((st = mxl_reranker_load(s->model_path, up->threads, &s->reranker, err))) return st;
        snprintf(s->rerank_name, sizeof s->rerank_name, "%s", s->model_name);
        return MXL_OK;
    }
    if ((st = mxl_gen_model_load(s->model_path, up->threads, &s->model, err))) return st;
    s->tok = mxl_gen_model_tokenizer(s->model);
    mxl_kv_flags kf;
    mxl_server_config_kv_flags(cfg, &kf);
    if ((st = mxl_gen_model_set_kv(s->model, &kf, err))) return st;
    if (up->chat_tmpl || up->tmpl_file) {
        st = mxl_gen_model_set_template(s->model, up->tmpl_file ? up->tmpl_file : up->chat_tmpl,
                                        up->tmpl_file ? cfg->chat_template_file : "--chat-template", err);
        if (cfg->sleep_idle_seconds < 0) { /* (kept for the reload after sleeping) */
            mxl_free(up->tmpl_file);
            up->tmpl_file = NULL;
        }
        if (st) return st;
    }
    if ((st = load_adapters(s, err))) return st;
    int64_t model_ctx = mxl_gen_model_default_ctx(s->model);
    s->slot_ctx = cfg->ctx_size > 0 ? cfg->ctx_size / up->n_slots : model_ctx;
    set_request_defaults(s);
    return MXL_OK;
}

/* The memory preflight of the chat model (spec: serve --estimate-memory): inspect's estimator for
 * every slot's full context against the budget. It runs with --estimate-memory, and always when
 * MLXCEL_MEMORY_LIMIT is set (a cap the server must not plan past); over budget stops the start
 * with the estimate in the message, or only warns with --force / --no-memory-check. */
static mxl_status memory_preflight(mxl_server *s, const startup *up, void (*log)(const char *), mxl_error *err) {
    const mxl_server_config *cfg = s->cfg;
    mxl_mem_inputs in = {.max_tokens = s->slot_ctx, .batch = up->n_slots};
    mxl_status st;
    if ((st = mxl_mem_budget(&in.budget_bytes, &in.budget_from_limit, err))) return st;
    if (!cfg->estimate_memory && !in.budget_from_limit) return MXL_OK;
    mxl_kv_flags kf;
    mxl_server_config_kv_flags(cfg, &kf);
    in.k_last = kf.k_last;
    if ((st = mxl_kv_flags_resolve(&kf, &in.kv_k, &in.kv_v, &in.v_edge, err)))
        return st;
    char warning[256] = "", terms[256], line[512];
    in.headroom_factor = mxl_mem_headroom_factor_from_env(warning, sizeof warning);
    if (warning[0]) logf_line(log, "warning: %s", warning);
    const mxl_checkpoint *ck = mxl_gen_model_checkpoint(s->model);
    in.dec = mxl_gen_model_hparams(s->model);
    in.group = mxl_kv_flags_group(&kf, in.dec);
    mxl_mem_estimate est;
    if ((st = mxl_mem_estimate_compute(&ck->config, false, ck->weights_bytes, &in, &est, err))) return st;
    mxl_mem_estimate_terms(&est, terms, sizeof terms);
    snprintf(line, sizeof line, "memory preflight: %d slots x %lld tokens, %s", up->n_slots, (long long)s->slot_ctx, terms);
    const double budget_gib = (double)est.budget_bytes / (1024.0 * 1024.0 * 1024.0);
    const char *source = in.budget_from_limit ? " (MLXCEL_MEMORY_LIMIT)" : " available";
    if (!est.fits_known) logf_line(log, "%s; available memory unknown", line);
    else if (est.fits) logf_line(log, "%s of %.3f GiB%s: fits", line, budget_gib, source);
    else if (cfg->memory_force) logf_line(log, "warning: %s exceeds the %.3f GiB%s; continuing (--force)", line, budget_gib, source);
    else
        return mxl_error_set(err, MXL_ERR_NOMEM, "%s exceeds the %.3f GiB%s (fewer slots or a smaller --ctx-size may fit; --force starts anyway)",
                             line, budget_gib, source);
    return MXL_OK;
}

/* Speculative decoding (--draft-kind, --draft-model, --draft-block-size): the kind from the
 * flags (a draft model alone means full-model), the draft model loaded on one thread of its own
 * (it runs on the chat model's) and checked against the chat model's vocabulary. */
static mxl_status setup_speculation(mxl_server *s, mxl_error *err) {
    const mxl_server_config *cfg = s->cfg;
    const char *kind = cfg->draft_kind;
    mxl_draft_kind k = MXL_DRAFT_NONE;
    mxl_status st;
    if (kind && strcmp(kind, "auto") != 0 && (st = mxl_draft_kind_parse(kind, &k, err))) {
        mxl_error_prefix(err, "--draft-kind: ");
        return st;
    }
    if (k == MXL_DRAFT_NONE && cfg->draft_model) k = MXL_DRAFT_FULL_MODEL;
    if (k == MXL_DRAFT_PROMPT_LOOKUP && cfg->draft_model)
        return mxl_error_set(err, MXL_ERR_ARG, "--draft-kind prompt-lookup drafts from the context and takes no --draft-model");
    if (k == MXL_DRAFT_FULL_MODEL && !cfg->draft_model) return mxl_error_set(err, MXL_ERR_ARG, "--draft-kind full-model needs --draft-model");
    if (k == MXL_DRAFT_NONE) return MXL_OK;
    if (mxl_gen_model_state_bytes(s->model) > 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "speculative decoding: %s has recurrent layers, whose state cannot take back rejected draft tokens",
                             s->model_name);
    mxl_draft_opts_default(&s->draft, k);
    if (cfg->draft_block_size > 0) s->draft.max_draft = (int)cfg->draft_block_size;
    if (k == MXL_DRAFT_FULL_MODEL) {
        mxl_resolved res;
        if ((st = resolve_model(cfg, cfg->draft_model, NULL, &res, err)) || (st = mxl_gen_model_load(res.path, 1, &s->draft_model, err)) ||
            (st = mxl_drafter_check_model(s->model, s->draft_model, err))) {
            mxl_error_prefix(err, "draft model %s: ", cfg->draft_model);
            return st;
        }
        s->draft.model = s->draft_model;
    }
    return MXL_OK;
}

/* The chat model's slots, queue, KV budget, preemption and prompt cache. */
static mxl_status build_scheduler(mxl_server *s, const startup *up, mxl_error *err) {
    const mxl_server_config *cfg = s->cfg;
    mxl_status st = setup_speculation(s, err);
    if (st) return st;
    mxl_sched_config sc = {
        .n_slots = up->n_slots, .slot_ctx = s->slot_ctx, .max_queue = (int)cfg->max_queue_depth,
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
        .vlm_prefix_cache = cfg->vlm_prefix_cache,
        .draft = s->draft.kind != MXL_DRAFT_NONE ? &s->draft : NULL,
        .spec_max_batch = (int)cfg->prompt_lookup_max_batch,
        .vision_cache_size = (int)cfg->vision_cache_size,
    };
    return mxl_sched_create(s->model, &sc, &s->sched, err);
}

/* Opens the routes that wait for the model and says where and what is served: the "listening"
 * line, then one "ready:" line per model. */
static void announce_ready(mxl_server *s, const startup *up, void (*log)(const char *)) {
    atomic_store(&s->ready, true);
    logf_line(log, "mlxcel server listening on %s", mxl_http_address(up->http));
    if (s->model)
        logf_line(log, "model %s ready: %d slots x %lld tokens of context", s->model_name, up->n_slots, (long long)s->slot_ctx);
    int tuned = 0;
    if (s->model && mxl_gen_model_autotune_note(s->model, &tuned)[0]) logf_line(log, "warning: %s", mxl_gen_model_autotune_note(s->model, NULL));
    if (tuned) logf_line(log, "autotune: %d tuned value%s applied from the cache (MLXCEL_AUTOTUNE)", tuned, tuned == 1 ? "" : "s");
    if (s->embedder) logf_line(log, "embedding model %s ready: %s, %lld dimensions", s->embed_name, mxl_embed_model_family(s->embedder),
                               (long long)mxl_embed_model_dim(s->embedder));
    if (s->reranker) logf_line(log, "reranker %s ready: %s", s->rerank_name, mxl_reranker_family(s->reranker));
}

/* What sleeping releases: the scheduler (slots, KV pool, prompt cache), the adapters, the draft
 * model and the chat model's weights; memory freed goes back to the system. */
static void release_model(mxl_server *s) {
    mxl_sched_destroy(s->sched);
    s->sched = NULL;
    for (int i = 0; i < s->n_lora; i++) mxl_lora_free(s->lora[i]);
    s->n_lora = 0;
    s->lora_fused = false;
    mxl_gen_model_destroy(s->draft_model);
    s->draft_model = NULL;
    s->draft = (mxl_draft_opts){0};
    mxl_gen_model_destroy(s->model);
    s->model = NULL;
    s->tok = NULL;
    malloc_trim(0);
}

static mxl_status wake_model(mxl_server *s, mxl_error *err) {
    startup *up = s->startup;
    mxl_status st;
    if ((st = load_main_model(s, up, err)) || (st = build_scheduler(s, up, err))) {
        release_model(s);
        return st;
    }
    if (s->log) logf_line(s->log, "model %s reloaded after sleeping", s->model_name);
    return MXL_OK;
}

/* --sleep-idle-seconds: with nothing running, queued or in flight for that long, the model goes. */
static void maybe_sleep(mxl_server *s) {
    pthread_mutex_lock(&s->sleep_mu);
    if (!atomic_load(&s->sleeping) && s->active == 0 && mxl_now_ms() - s->last_active_ms >= (double)s->cfg->sleep_idle_seconds * 1e3 &&
        mxl_sched_idle(s->sched)) {
        s->sleep_props = mxl_api_llama_props_json(s, true);
        mxl_sched_stats st;
        mxl_sched_slot_info info[1];
        mxl_sched_get_stats(s->sched, &st, info, 0);
        mxl_sched_stats_carry(&s->stats_base, &st); /* (/metrics' counters go on across the sleep) */
        release_model(s);
        atomic_store(&s->sleeping, true);
        if (s->log) logf_line(s->log, "server is sleeping after %lld idle seconds: the model is released until the next request",
                              (long long)s->cfg->sleep_idle_seconds);
    }
    pthread_mutex_unlock(&s->sleep_mu);
}

/* A router's child (router.c sets MLXCEL_ROUTER_PID, honoured only while that process is the
 * parent): the router's pid, else 0. */
static pid_t router_parent(void) {
    const char *v = getenv("MLXCEL_ROUTER_PID");
    long pid = v ? strtol(v, NULL, 10) : 0;
    return pid > 1 && (pid_t)pid == getppid() ? (pid_t)pid : 0;
}

static void wait_for_signal(mxl_server *s, void (*log)(const char *)) {
    const bool sleep = s->model && s->cfg->sleep_idle_seconds >= 0;
    const pid_t router = router_parent();
    if (sleep) {
        s->wake = wake_model;
        s->last_active_ms = mxl_now_ms();
    }
    while (!g_stop) {
        usleep(100 * 1000);
        if (sleep) maybe_sleep(s);
        if (router && getppid() != router) { /* the router was killed: no client can reach us */
            logf_line(log, "the router (pid %ld) is gone: stopping", (long)router);
            g_stop = 2;
        }
    }
}

/* The drain after the first SIGTERM / SIGINT: new requests get 503 while the ones already begun
 * (queued, running, streaming) finish, for up to --shutdown-timeout seconds or until a second
 * signal; shut_down then cancels what is left, each with a clean "the server is shutting down". */
static void drain(mxl_server *s, mxl_http_server *http, void (*log)(const char *)) {
    atomic_store(&s->draining, true);
    /* (background responses count as requests in flight: their own requests were answered) */
    unsigned busy = mxl_http_in_flight(http) + (unsigned)atomic_load(&s->n_background);
    if (busy == 0 || s->cfg->shutdown_timeout <= 0) return;
    logf_line(log, "draining: %u request%s in flight; waiting up to %lld s for them (a second signal stops now)", busy,
              busy == 1 ? "" : "s", (long long)s->cfg->shutdown_timeout);
    const double until = mxl_now_ms() + 1000.0 * (double)s->cfg->shutdown_timeout;
    while ((busy = mxl_http_in_flight(http) + (unsigned)atomic_load(&s->n_background)) > 0 && g_stop < 2 && mxl_now_ms() < until)
        usleep(20 * 1000);
    if (busy) logf_line(log, "cancelling %u request%s still in flight", busy, busy == 1 ? "" : "s");
}

/* Frees whatever startup got to, in an order that lets in-flight requests end. */
static void shut_down(mxl_server *s, startup *up) {
    /* stopping the scheduler ends every job (cancelled), which unblocks the connection threads and
     * the background responses' threads; these store their result before the stores go */
    mxl_sched_destroy(s->sched);
    mxl_http_stop(up->http);
    for (int i = 0; i < 3000 && atomic_load(&s->n_background) > 0; i++) usleep(10 * 1000);
    for (int i = 0; i < s->n_lora; i++) mxl_lora_free(s->lora[i]);
    mxl_gen_model_destroy(s->model);
    mxl_gen_model_destroy(s->draft_model);
    mxl_embed_model_destroy(s->embedder);
    mxl_reranker_destroy(s->reranker);
    if (s->workers_ready) {
        mxl_srv_worker_destroy(&s->embed_worker);
        mxl_srv_worker_destroy(&s->rerank_worker);
    }
    json_decref(s->sleep_props);
    mxl_resp_store_destroy(s->responses);
    mxl_resp_store_destroy(s->conversations);
    json_decref(s->template_kwargs);
    json_decref(s->aliases);
    json_decref(s->tags);
    mxl_free(s->api_key);
    mxl_free(up->cert);
    mxl_free(up->key);
    mxl_free(up->tmpl_file);
}

int mxl_server_run(const mxl_server_config *cfg, void (*log)(const char *line), mxl_error *err) {
    mxl_server s = {0};
    startup up = {0};
    int rc = 1;
    init_state(&s, cfg);
    if (read_startup_options(&s, &up, err)) goto out;
    install_signal_handlers();
    if (choose_model_roles(&s, &up, err) || start_listeners(&s, &up, log, err)) goto out;
    up.threads = thread_count(cfg);
    name_model(&s, &up);
    if (load_main_model(&s, &up, err)) goto out;
    if (s.model && (memory_preflight(&s, &up, log, err) || build_scheduler(&s, &up, err))) goto out;
    if (load_side_models(&s, cfg, up.threads, up.reranker_is_main, err)) goto out;
    announce_ready(&s, &up, log);
    s.startup = &up;
    s.log = log;
    wait_for_signal(&s, log);
    logf_line(log, "shutting down");
    drain(&s, up.http, log);
    mxl_http_quiesce(up.http);
    rc = 0;
out:
    shut_down(&s, &up);
    return rc;
}
