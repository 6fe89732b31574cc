/* config.h - `mlxcel serve` / `mlxcel-server` settings: every flag of the spec's serve tables
 * that this build runs, with its llama-server spellings and environment variables (flags beat
 * environment, environment beats defaults). Flags of features not built yet are recognised and
 * refused by name, so a deployment never silently runs without what it asked for. */
#ifndef MXL_SERVER_CONFIG_H
#define MXL_SERVER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "engine/sampler.h"

#define MXL_SRV_MAX_MULTI 16

struct mxl_hub_event;

typedef struct mxl_server_config {
    /* model, and where a repo id comes from (downloaded when missing unless offline) */
    const char *model, *alias, *tags;
    const char *hf_token, *revision, *model_store_root;
    bool offline;
    void (*hub_progress)(void *ud, const struct mxl_hub_event *ev); /* set by the CLI: download progress */
    void *hub_progress_ud;
    int64_t threads;
    /* network and auth */
    const char *host;
    int64_t port;
    const char *api_key, *api_key_file, *api_prefix;
    const char *allowed_origins, *cors_origins, *cors_headers, *cors_methods;
    bool cors_credentials, reuse_port;
    const char *ssl_cert_file, *ssl_key_file;
    int64_t threads_http, sse_ping_interval, timeout, max_body_bytes;
    /* limits on hostile input (limits.h has the table): header bytes and fields, connections per
     * client address (conn_per_ip_set: given, so loopback counts too), JSON depth, messages,
     * tools, logit_bias entries, grammar / schema bytes, embedding inputs */
    int64_t max_header_bytes, max_headers, max_conn_per_ip, max_json_depth, max_messages, max_tools, max_logit_bias,
        max_grammar_bytes, max_inputs;
    bool conn_per_ip_set;
    /* concurrency and batching */
    int64_t n_parallel, max_batch_size, max_queue_depth, prefill_chunk, batch_size, grant_interval;
    int64_t ctx_size, n_predict;
    const char *cache_type_k, *cache_type_v;
    /* the other KV cache flags: --kv-cache-mode, --kv-bits with --kv-quant-scheme (8 uniform: int8;
     * 4 turboquant: turbo4), --turbo-boundary-v (-1: MLXCEL_KV_BOUNDARY_V_LAYERS or 2) */
    const char *kv_cache_mode, *kv_quant_scheme;
    int64_t kv_bits, turbo_boundary_v, kv_group_size; /* (kv_group_size 0: 64 where it divides the heads) */
    bool kv_skip_last_layer; /* with --kv-bits, the last layer's K and V stay fp16 (default true) */
    double decode_timeout;
    bool no_batch, decode_timeout_set;
    /* chat template */
    const char *chat_template, *chat_template_file, *chat_template_kwargs;
    int64_t reasoning_budget;
    const char *reasoning_format, *reasoning;
    /* endpoints */
    bool slots, props, metrics, warmup, settings, spm_infill;
    bool webui; /* --webui: the page at {api_prefix}/webui/ */
    /* prompt cache */
    bool prompt_cache;
    bool vlm_prefix_cache; /* --enable-vlm-prefix-cache */
    int64_t prompt_cache_capacity, prompt_cache_max_entries, prompt_cache_ttl, prompt_cache_min_prefix;
    int64_t snapshot_capacity, snapshot_max_entries, snapshot_ttl; /* recurrent models only: accepted, unused */
    /* the Responses API's store (api_responses.c): most entries (0: none stored), seconds they live */
    int64_t responses_max, responses_ttl;
    /* the Conversations API's store (api_responses.c): most conversations (0: none), seconds they live */
    int64_t conversations_max, conversations_ttl;
    /* paged KV pool */
    const char *kv_cache_budget; /* auto | none | 0 | BYTES */
    int64_t kv_budget;           /* parsed: 0 auto, -1 none, > 0 bytes */
    double kv_watermark;
    bool enable_preemption;
    const char *preemption_policy; /* longest-first | lowest-priority */
    /* default sampling */
    mxl_sampler_params sampling;
    int64_t seed;
    bool ignore_eos;
    const char *logit_bias[MXL_SRV_MAX_MULTI];
    int n_logit_bias;
    const char *reverse_prompt[MXL_SRV_MAX_MULTI];
    int n_reverse_prompt;
    const char *dry_breakers[MXL_SRV_MAX_MULTI];
    int n_dry_breakers;
    const char *samplers;
    /* server-wide output constraint (a request's own wins); resolved into sampling.grammar (GBNF) */
    const char *grammar, *grammar_file, *json_schema, *json_schema_file;
    /* embedding and reranking workers */
    const char *embedding_model, *reranker_model, *pooling;
    int64_t embedding_batch_size, embedding_max_length, embedding_queue_depth, embedding_timeout, rerank_batch_size, embd_normalize;
    bool embedding_mode, rerank_mode;
    /* image input (vision-language models) */
    const char *media_path;                 /* root of the local files image URLs may name (NULL: file URLs refused) */
    int64_t max_image_payload, max_images; /* encoded bytes per image; images per request */
    int64_t max_image_width, max_image_height, max_image_decode_alloc;
    int64_t vision_cache_size;              /* encoded images kept (vision_cache.h); 0: none */
    /* LoRA adapters */
    const char *lora[MXL_SRV_MAX_MULTI];
    int n_lora;
    const char *lora_scaled[MXL_SRV_MAX_MULTI];
    int n_lora_scaled;
    bool lora_init_without_apply, lora_fuse;
    /* speculative decoding */
    const char *draft_model, *draft_kind;
    int64_t draft_max, draft_block_size, prompt_lookup_max_batch; /* 0: the defaults (16, by kind, 2) */
    /* logging */
    bool verbose, log_disable;
    const char *log_file;        /* --log-file: the log goes there (appended) */
    const char *slot_save_path;  /* --slot-save-path: POST /slots/:id_slot files */
    int64_t sleep_idle_seconds;  /* --sleep-idle-seconds (-1: never) */
    bool estimate_memory, memory_force; /* --estimate-memory; --force / --no-memory-check */
    int64_t shutdown_timeout;    /* --shutdown-timeout: seconds SIGTERM/SIGINT lets running requests finish */
    /* router mode (router.c): no -m; every model of the store and the Hub cache, or of
     * --models-dir / --models-preset, each served by a child `serve` process */
    const char *models_dir, *models_preset;
    int64_t models_max;       /* loaded at once; 0: unlimited (default 4) */
    bool models_autoload;     /* load a model on its first request (default on) */
    bool models_autoload_set; /* given explicitly (else --webui without a model turns it off) */
    const char *router_flag;  /* the first router-mode flag of argv (refused beside -m) */
    bool router;              /* no model argument: router mode */
    bool help;
} mxl_server_config;

/* The flags of argv (argv[0] excluded) a router passes on to its child servers: everything but
 * the model, the network, authentication, CORS, TLS, logging destination, WebUI and router flags.
 * out (argc entries at least) receives pointers into argv; returns their count. */
int mxl_server_config_child_args(int argc, char **argv, const char **out);

/* Fills defaults, then the environment, then argv (argv[0] is the command name). Errors name the
 * flag. On `--help`, sets cfg->help. */
mxl_status mxl_server_config_parse(int argc, char **argv, mxl_server_config *cfg, mxl_error *err);
/* The KV cache flags of a parsed configuration (engine/memory_estimate.h): --cache-type-k / -v
 * over --kv-cache-mode over --kv-bits. */
struct mxl_kv_flags;
void mxl_server_config_kv_flags(const mxl_server_config *cfg, struct mxl_kv_flags *f);
void mxl_server_config_print_help(void);

#endif
