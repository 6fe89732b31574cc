/* server_state.h - the running server's state: the models it serves (chat, embedding, reranker)
 * and their workers, the scheduler, the identity it reports (/v1/models, /props) and the
 * server-wide defaults requests start from. server.c fills it at start; the request helpers
 * (request.c), the generation call (gen_call.c) and the routes (api_*.c) read it. */
#ifndef MXL_SERVER_STATE_H
#define MXL_SERVER_STATE_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/chat.h"
#include "engine/embed.h"
#include "engine/generate.h"
#include "engine/rerank.h"
#include "engine/sequence.h"
#include "server/config.h"
#include "engine/speculate.h"
#include "server/scheduler.h"
#include "tokenizer/tokenizer.h"

/* One request at a time on a model, a bounded line of waiting callers, a wait limit. */
typedef struct mxl_srv_worker {
    pthread_mutex_t run, mu;
    int waiting, queue_depth, timeout_s;
} mxl_srv_worker;
mxl_status mxl_srv_worker_init(mxl_srv_worker *w, int queue_depth, int timeout_s);
void mxl_srv_worker_destroy(mxl_srv_worker *w);

typedef struct mxl_server {
    const mxl_server_config *cfg;
    char *api_key;          /* from --api-key or --api-key-file */
    const char *prefix;     /* "" or "/llama" */
    bool webui;             /* --webui: the page at {prefix}/webui/ */
    char webui_csp[512];    /* its Content-Security-Policy (the hashes of its style and script) */
    atomic_bool ready;      /* model loaded */
    atomic_bool draining;   /* SIGTERM / SIGINT seen: new requests get 503 while running ones finish */
    atomic_int n_background; /* background responses still running (their request has been answered) */
    mxl_gen_model *model;   /* NULL when the server only embeds / reranks */
    mxl_embed_model *embedder;
    mxl_embed_opts embed_opts;
    mxl_srv_worker embed_worker;
    char embed_name[512];
    mxl_reranker *reranker;
    mxl_rerank_opts rerank_opts;
    mxl_srv_worker rerank_worker;
    char rerank_name[512];
    bool workers_ready;
    atomic_ullong aux_tokens, aux_passes; /* embedding / rerank tokens and forward passes, for /metrics */
    const mxl_tokenizer *tok;
    mxl_sched *sched;
    mxl_draft_opts draft;         /* speculative decoding (draft.kind MXL_DRAFT_NONE: off) */
    mxl_gen_model *draft_model;   /* --draft-model (full-model drafts) */
    json_t *template_kwargs; /* --chat-template-kwargs or NULL */
    json_t *aliases, *tags;  /* arrays of strings from --alias / --tags */
    char model_name[512];
    char model_path[4096];
    int64_t slot_ctx, n_predict_default;
    long created;           /* start time, for /v1/models */
    char created_text[32];
    char date_string[32];
    char datetime_text[48];  /* "%b %d %Y %H:%M:%S GMT" */   /* today, "%d %b %Y", for templates that read date_string (Llama 3.x) */
    atomic_ullong next_id;
    bool alloc_fault_hook;   /* MXL_ALLOC_FAULT_HOOK=1 at start (tests only): server.c handle() */
    mxl_reasoning reasoning; /* --reasoning */
    /* LoRA adapters (--lora, --lora-scaled) by id, and their scales for requests that name none
     * (POST /lora-adapters changes them, under lora_mu) */
    struct mxl_lora *lora[MXL_SRV_MAX_MULTI];
    float lora_scale[MXL_SRV_MAX_MULTI];
    int n_lora;
    bool lora_fused;        /* --lora-fuse: merged into the weights, no scale or choice per request */
    pthread_mutex_t lora_mu;
    /* --sleep-idle-seconds: after that long without requests the chat model (weights, KV pool,
     * scheduler) is released; the next request that needs it reloads it first (server.c) */
    pthread_mutex_t sleep_mu;
    atomic_bool sleeping;
    int active;              /* requests and streams using the model now (under sleep_mu) */
    double last_active_ms;   /* when the last one ended */
    json_t *sleep_props;     /* GET /props while sleeping (llama-server answers it without waking) */
    mxl_sched_stats stats_base; /* the counters of the schedulers sleeping released (under sleep_mu): /metrics goes on from them */
    /* /metrics' throughput gauges cover the time since the previous scrape, as llama-server's
     * buckets do: the totals at that scrape (under sleep_mu) */
    uint64_t scraped_prompt_tokens, scraped_predicted;
    double scraped_prompt_ms, scraped_decode_ms;
    mxl_status (*wake)(struct mxl_server *s, mxl_error *err); /* reloads what sleeping released */
    void *startup;           /* server.c's startup state, for wake */
    void (*log)(const char *line); /* the log (NULL: --log-disable) */
    /* server-wide sampling defaults (read with mxl_srv_defaults_get; PATCH /v1/settings changes
     * them under defaults_mu, one change at a time under settings_mu) */
    mxl_seq_params defaults;
    bool defaults_set;       /* filled once, at the first load (a reload after sleeping keeps them) */
    pthread_mutex_t defaults_mu, settings_mu;
    struct mxl_resp_store *responses; /* the Responses API's stored responses (resp_store.h) */
    struct mxl_resp_store *conversations; /* the Conversations API's conversations (same store kind, edited in place) */
    mxl_logit_bias default_bias[MXL_SRV_MAX_MULTI]; /* --logit-bias */
} mxl_server;

/* A stream that goes on after its handler returned keeps the model awake until it ends. */
void mxl_srv_hold(mxl_server *s);
void mxl_srv_release(mxl_server *s);
/* GET /props' body (api_llama.c); is_sleeping as given. */
json_t *mxl_api_llama_props_json(mxl_server *s, bool sleeping);

#endif
