/* api_embed.c - the embedding and reranking workers and their routes: OpenAI /v1/embeddings,
 * llama-server /embedding and /embeddings, and /v1/rerank, /v1/reranking, /rerank, /reranking
 * (Cohere / Jina shape). Each worker runs one request at a time on its model; callers wait in a
 * bounded line (--embedding-queue-depth, 503 when full) for at most
 * --embedding-request-timeout-secs (504). `mlxcel embed` / `mlxcel rerank` call the same engine
 * functions, so the numbers are the same. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "server/request.h"
#include "server/routes.h"
#include "server/server_state.h"

/* --- workers ------------------------------------------------------------------------------------ */

mxl_status mxl_srv_worker_init(mxl_srv_worker *w, int queue_depth, int timeout_s) {
    pthread_mutex_init(&w->run, NULL);
    pthread_mutex_init(&w->mu, NULL);
    w->queue_depth = queue_depth;
    w->timeout_s = timeout_s;
    w->waiting = 0;
    return MXL_OK;
}

void mxl_srv_worker_destroy(mxl_srv_worker *w) {
    pthread_mutex_destroy(&w->run);
    pthread_mutex_destroy(&w->mu);
}

/* Takes the worker: 0, or 503 (line full) / 504 (waited too long) with the reply sent. */
static int worker_enter(mxl_srv_worker *w, mxl_http_req *r) {
    pthread_mutex_lock(&w->mu);
    if (w->waiting >= w->queue_depth) {
        pthread_mutex_unlock(&w->mu);
        mxl_srv_error(r, MXL_API_OPENAI, 503, "unavailable_error", "the embedding/rerank queue is full (%d waiting); try again later",
                      w->queue_depth);
        return 503;
    }
    w->waiting++;
    pthread_mutex_unlock(&w->mu);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += w->timeout_s;
    int rc = pthread_mutex_timedlock(&w->run, &ts);
    pthread_mutex_lock(&w->mu);
    w->waiting--;
    pthread_mutex_unlock(&w->mu);
    if (rc == ETIMEDOUT || rc != 0) {
        mxl_srv_error(r, MXL_API_OPENAI, 504, "timeout_error", "the request waited more than %d s for the worker", w->timeout_s);
        return 504;
    }
    return 0;
}

static void worker_leave(mxl_srv_worker *w) { pthread_mutex_unlock(&w->run); }

/* --- inputs -------------------------------------------------------------------------------------- */

/* A string or an array of strings (OpenAI "input", llama-server "content"); NULL with msg set. */
static const char **text_list(const mxl_server *srv, const json_t *v, const char *key, size_t *n, char *msg, size_t ml) {
    if (!v || json_is_null(v)) return snprintf(msg, ml, "'%s' is required", key), NULL;
    size_t cnt = json_is_array(v) ? json_array_size(v) : 1;
    if (!json_is_string(v) && !json_is_array(v)) return snprintf(msg, ml, "'%s' must be a string or an array of strings", key), NULL;
    if (cnt == 0) return snprintf(msg, ml, "'%s' must not be empty", key), NULL;
    if (!mxl_srv_check_count(srv, key, cnt, msg, ml)) return NULL;
    const char **t = mxl_calloc(cnt, sizeof *t);
    if (!t) return snprintf(msg, ml, "out of memory"), NULL;
    for (size_t i = 0; i < cnt; i++) {
        const json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_string(e)) {
            mxl_free(t);
            return snprintf(msg, ml, "'%s[%zu]' must be a string", key, i), NULL;
        }
        const char *s = json_string_value(e);
        if (!s[strspn(s, " \t\r\n\f\v")]) {
            mxl_free(t);
            return snprintf(msg, ml, "'%s[%zu]' is empty or only whitespace", key, i), NULL;
        }
        t[i] = s;
    }
    *n = cnt;
    return t;
}

static const char k_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Little-endian float32 bytes in base64 (OpenAI's encoding_format "base64"). */
static json_t *base64_floats(const float *v, int64_t n) {
    size_t len = (size_t)n * 4, out_len = 4 * ((len + 2) / 3);
    char *o = mxl_malloc(out_len + 1);
    if (!o) return json_string("");
    const unsigned char *b = (const unsigned char *)v;
    size_t j = 0;
    for (size_t i = 0; i < len; i += 3) {
        unsigned x = (unsigned)b[i] << 16 | (i + 1 < len ? (unsigned)b[i + 1] << 8 : 0) | (i + 2 < len ? b[i + 2] : 0);
        o[j++] = k_b64[x >> 18 & 63];
        o[j++] = k_b64[x >> 12 & 63];
        o[j++] = i + 1 < len ? k_b64[x >> 6 & 63] : '=';
        o[j++] = i + 2 < len ? k_b64[x & 63] : '=';
    }
    o[j] = 0;
    json_t *s = json_string(o);
    mxl_free(o);
    return s;
}

static json_t *float_array(const float *v, int64_t n) {
    json_t *a = json_array();
    for (int64_t i = 0; i < n; i++) json_array_append_new(a, json_real(v[i]));
    return a;
}

/* --- embeddings ------------------------------------------------------------------------------------ */

static void embed(mxl_server *s, mxl_http_req *r, bool oai) {
    if (!s->embedder) {
        mxl_srv_error(r, MXL_API_OPENAI, 501, "not_supported_error", "This server does not serve embeddings (start it with an embedding model)");
        return;
    }
    json_t *body = mxl_srv_body_json(s, r, MXL_API_OPENAI);
    if (!body) return;
    char msg[512] = "";
    size_t n = 0;
    const json_t *in = json_object_get(body, oai ? "input" : "content");
    if (!oai && !in) in = json_object_get(body, "input");
    const char **texts = text_list(s, in, oai ? "input" : "content", &n, msg, sizeof msg);
    float *vecs = NULL;
    int64_t *toks = NULL;
    mxl_embed_opts o = s->embed_opts;
    bool b64 = false;
    const json_t *ef = json_object_get(body, "encoding_format");
    if (texts && ef && !json_is_null(ef)) {
        if (!json_is_string(ef) || (strcmp(json_string_value(ef), "float") && strcmp(json_string_value(ef), "base64"))) {
            snprintf(msg, sizeof msg, "'encoding_format' must be \"float\" or \"base64\"");
            goto bad;
        }
        b64 = !strcmp(json_string_value(ef), "base64");
    }
    const json_t *dim = json_object_get(body, "dimensions");
    if (texts && dim && !json_is_null(dim)) {
        if (!json_is_integer(dim) || json_integer_value(dim) < 1 || json_integer_value(dim) > mxl_embed_model_dim(s->embedder)) {
            snprintf(msg, sizeof msg, "'dimensions' must be an integer between 1 and %lld", (long long)mxl_embed_model_dim(s->embedder));
            goto bad;
        }
        o.dimensions = json_integer_value(dim);
    }
    if (!texts) goto bad;
    int64_t width = o.dimensions > 0 ? o.dimensions : mxl_embed_model_dim(s->embedder);
    vecs = mxl_malloc(n * (size_t)mxl_embed_model_dim(s->embedder) * sizeof(float));
    toks = mxl_calloc(n, sizeof *toks);
    int64_t n_tokens = 0;
    mxl_error err = {0};
    if (!vecs || !toks) {
        snprintf(msg, sizeof msg, "out of memory");
        goto bad;
    }
    if (worker_enter(&s->embed_worker, r)) goto done;
    mxl_status st = mxl_embed_batch(s->embedder, texts, n, &o, vecs, toks, &err);
    worker_leave(&s->embed_worker);
    if (st) {
        snprintf(msg, sizeof msg, "%s", err.msg);
        goto bad;
    }
    for (size_t i = 0; i < n; i++) n_tokens += toks[i];
    atomic_fetch_add(&s->aux_tokens, (unsigned long long)n_tokens);
    atomic_fetch_add(&s->aux_passes, 1);
    json_t *data = json_array();
    for (size_t i = 0; i < n; i++) {
        const float *v = vecs + i * (size_t)width;
        if (oai)
            json_array_append_new(data, json_pack("{s:s, s:I, s:o}", "object", "embedding", "index", (json_int_t)i, "embedding",
                                                  b64 ? base64_floats(v, width) : float_array(v, width)));
        else /* llama-server: one pooled vector per input, as a one-row matrix */
            json_array_append_new(data, json_pack("{s:I, s:[o]}", "index", (json_int_t)i, "embedding", float_array(v, width)));
    }
    if (oai)
        mxl_http_send_json(r, 200, json_pack("{s:s, s:o, s:s, s:{s:I, s:I}}", "object", "list", "data", data, "model", s->embed_name, "usage",
                                             "prompt_tokens", (json_int_t)n_tokens, "total_tokens", (json_int_t)n_tokens));
    else
        mxl_http_send_json(r, 200, data);
    goto done;
bad:
    mxl_srv_error(r, MXL_API_OPENAI, 400, "invalid_request_error", "%s", msg);
done:
    mxl_free(vecs);
    mxl_free(toks);
    mxl_free(texts);
    json_decref(body);
}

void mxl_api_embeddings_openai(mxl_server *s, mxl_http_req *r) { embed(s, r, true); }
void mxl_api_embeddings_llama(mxl_server *s, mxl_http_req *r) { embed(s, r, false); }

/* --- reranking ------------------------------------------------------------------------------------- */

void mxl_api_rerank(mxl_server *s, mxl_http_req *r) {
    if (!s->reranker) {
        mxl_srv_error(r, MXL_API_OPENAI, 501, "not_supported_error", "This server does not serve reranking (start it with a reranker model)");
        return;
    }
    json_t *body = mxl_srv_body_json(s, r, MXL_API_OPENAI);
    if (!body) return;
    char msg[512] = "";
    const json_t *q = json_object_get(body, "query"), *docs = json_object_get(body, "documents");
    const char **texts = NULL;
    double *scores = NULL;
    int64_t *toks = NULL;
    size_t *order = NULL, n = 0;
    if (!json_is_string(q) || !json_string_value(q)[strspn(json_string_value(q), " \t\r\n")]) {
        snprintf(msg, sizeof msg, "'query' must be a non-empty string");
        goto bad;
    }
    if (!json_is_array(docs) || json_array_size(docs) == 0) {
        snprintf(msg, sizeof msg, "'documents' must be a non-empty array");
        goto bad;
    }
    n = json_array_size(docs);
    if (!mxl_srv_check_count(s, "documents", n, msg, sizeof msg)) goto bad;
    texts = mxl_calloc(n, sizeof *texts);
    scores = mxl_calloc(n, sizeof *scores);
    order = mxl_calloc(n, sizeof *order);
    toks = mxl_calloc(n, sizeof *toks);
    if (!texts || !scores || !order || !toks) {
        snprintf(msg, sizeof msg, "out of memory");
        goto bad;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(docs, i);
        if (json_is_object(d)) d = json_object_get(d, "text"); /* {"text": ...} documents */
        if (!json_is_string(d) || !json_string_value(d)[strspn(json_string_value(d), " \t\r\n")]) {
            snprintf(msg, sizeof msg, "'documents[%zu]' must be a non-empty string (or {\"text\": ...})", i);
            goto bad;
        }
        texts[i] = json_string_value(d);
    }
    const json_t *tn = json_object_get(body, "top_n"), *rd = json_object_get(body, "return_documents");
    if (tn && !json_is_null(tn) && (!json_is_integer(tn) || json_integer_value(tn) < 0)) {
        snprintf(msg, sizeof msg, "'top_n' must be a non-negative integer");
        goto bad;
    }
    if (rd && !json_is_null(rd) && !json_is_boolean(rd)) {
        snprintf(msg, sizeof msg, "'return_documents' must be a boolean");
        goto bad;
    }
    /* a task instruction for generative rerankers (llama-server's Qwen3-Reranker "instruction") */
    const json_t *ins = json_object_get(body, "instruction");
    const char *instruction = NULL;
    if (ins && !json_is_null(ins)) {
        if (!json_is_string(ins) || !json_string_value(ins)[strspn(json_string_value(ins), " \t\r\n")]) {
            snprintf(msg, sizeof msg, "'instruction' must be a non-empty string");
            goto bad;
        }
        if (!mxl_reranker_takes_instruction(s->reranker)) {
            snprintf(msg, sizeof msg, "'instruction' is for generative rerankers; %s takes none", mxl_reranker_family(s->reranker));
            goto bad;
        }
        instruction = json_string_value(ins);
    }
    size_t top = tn && json_integer_value(tn) > 0 && (size_t)json_integer_value(tn) < n ? (size_t)json_integer_value(tn) : n;
    int64_t n_tokens = 0;
    mxl_error err = {0};
    if (worker_enter(&s->rerank_worker, r)) goto done;
    mxl_status st = mxl_reranker_score_instructed(s->reranker, instruction, json_string_value(q), texts, n, &s->rerank_opts, scores, NULL, toks,
                                                   &err);
    worker_leave(&s->rerank_worker);
    if (st) {
        snprintf(msg, sizeof msg, "%s", err.msg);
        goto bad;
    }
    for (size_t i = 0; i < n; i++) n_tokens += toks[i];
    atomic_fetch_add(&s->aux_tokens, (unsigned long long)n_tokens);
    atomic_fetch_add(&s->aux_passes, 1);
    mxl_rerank_order(scores, n, order);
    json_t *results = json_array();
    for (size_t k = 0; k < top; k++) {
        size_t i = order[k];
        json_t *o = json_pack("{s:I, s:f}", "index", (json_int_t)i, "relevance_score", scores[i]);
        if (json_is_true(rd)) json_object_set_new(o, "document", json_pack("{s:s}", "text", texts[i]));
        json_array_append_new(results, o);
    }
    mxl_http_send_json(r, 200, json_pack("{s:s, s:s, s:o, s:{s:I, s:I}}", "model", s->rerank_name, "object", "list", "results", results,
                                         "usage", "prompt_tokens", (json_int_t)n_tokens, "total_tokens", (json_int_t)n_tokens));
    goto done;
bad:
    mxl_srv_error(r, MXL_API_OPENAI, 400, "invalid_request_error", "%s", msg);
done:
    mxl_free(toks);
    mxl_free(texts);
    mxl_free(scores);
    mxl_free(order);
    json_decref(body);
}
