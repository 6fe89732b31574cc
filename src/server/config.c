/* config.c - serve flags and environment (config.h). */
#include "server/config.h"

#include "core/alloc.h"
#include "engine/memory_estimate.h"
#include "server/constraint.h"
#include "server/limits.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum kind {
    K_STR,     /* string value */
    K_INT,     /* integer value (int64_t field) */
    K_INT32,   /* integer value (int32_t field) */
    K_NOOP,    /* boolean flag accepted with no effect (always the behaviour here) */
    K_DBL,     /* float value (double field) */
    K_FLT,     /* float value (float field), >= 0 */
    K_FLT_SIGNED, /* float value (float field), any sign */
    K_ON,      /* boolean flag setting true */
    K_OFF,     /* boolean flag setting false */
    K_BOOLV,   /* optional =BOOL value, bare means true */
    K_MULTI,   /* repeatable string (array + count field right after) */
    K_REFUSED, /* a spec flag of a feature this build does not run: startup error */
    K_REFUSED_V, /* same, taking a value */
    K_IGNORED_V, /* llama-server flag with no meaning here (GPU layers, ...): value ignored */
} kind;

typedef struct opt {
    const char *names; /* "--ctx-size|-c" */
    const char *env;   /* "LLAMA_ARG_CTX_SIZE|MLXCEL_..." or NULL */
    kind k;
    size_t off;
    int64_t min, max;  /* K_INT range */
    const char *help;
} opt;

#define F(field) offsetof(mxl_server_config, field)
#define S(field) (offsetof(mxl_server_config, sampling) + offsetof(mxl_sampler_params, field))

static const opt k_opts[] = {
    {"--model|-m|--hf-repo|-hf|-hfr", "LLAMA_ARG_MODEL", K_STR, F(model), 0, 0, "model: local path, owner/name, or bare name"},
    {"--models-dir", "LLAMA_ARG_MODELS_DIR", K_STR, F(models_dir), 0, 0, "router mode: serve the model directories under PATH"},
    {"--models-preset", NULL, K_STR, F(models_preset), 0, 0, "router mode: INI file of [name] sections (model = PATH, other keys: flags)"},
    {"--models-max", NULL, K_INT, F(models_max), 0, 1024, "router mode: models loaded at once, least recently used unloaded past it (0: no limit; default 4)"},
    {"--models-autoload", NULL, K_ON, F(models_autoload), 0, 0, "router mode: load a model on its first request (default on)"},
    {"--no-models-autoload", NULL, K_OFF, F(models_autoload), 0, 0, "router mode: a model must be loaded by POST /models/load first"},
    {"--alias|-a", "LLAMA_ARG_ALIAS", K_STR, F(alias), 0, 0, "model name(s) reported by the API, comma-separated"},
    {"--tags", NULL, K_STR, F(tags), 0, 0, "comma-separated model tags (informational)"},
    {"--threads|-t", "LLAMA_ARG_THREADS", K_INT, F(threads), -1, 1024, "compute threads (default: cores)"},
    {"--host", "LLAMA_ARG_HOST", K_STR, F(host), 0, 0, "bind address, or a path ending in .sock (default 127.0.0.1)"},
    {"--port", "LLAMA_ARG_PORT", K_INT, F(port), 0, 65535, "TCP port, 0 for an ephemeral one (default 8080)"},
    {"--api-key", "LLAMA_API_KEY", K_STR, F(api_key), 0, 0, "require Authorization: Bearer KEY"},
    {"--api-key-file", NULL, K_STR, F(api_key_file), 0, 0, "read the API key from a file"},
    {"--api-prefix", "LLAMA_ARG_API_PREFIX", K_STR, F(api_prefix), 0, 0, "serve every route under this prefix"},
    {"--allowed-origins", "MLXCEL_ALLOWED_ORIGINS", K_STR, F(allowed_origins), 0, 0, "exact CORS origins (comma list)"},
    {"--cors-origins", "LLAMA_ARG_CORS_ORIGINS", K_STR, F(cors_origins), 0, 0, "Access-Control-Allow-Origin (default *)"},
    {"--cors-headers", "LLAMA_ARG_CORS_HEADERS", K_STR, F(cors_headers), 0, 0, "allowed headers (default *)"},
    {"--cors-methods", "LLAMA_ARG_CORS_METHODS", K_STR, F(cors_methods), 0, 0, "allowed methods (default GET,POST,OPTIONS)"},
    {"--cors-credentials", "LLAMA_ARG_CORS_CREDENTIALS", K_ON, F(cors_credentials), 0, 0, "allow credentials (default on)"},
    {"--no-cors-credentials", NULL, K_OFF, F(cors_credentials), 0, 0, NULL},
    {"--ssl-cert-file", "LLAMA_ARG_SSL_CERT_FILE", K_STR, F(ssl_cert_file), 0, 0, "PEM certificate: serve HTTPS"},
    {"--ssl-key-file", "LLAMA_ARG_SSL_KEY_FILE", K_STR, F(ssl_key_file), 0, 0, "PEM private key"},
    {"--threads-http", "LLAMA_ARG_THREADS_HTTP", K_INT, F(threads_http), -1, 4096, "HTTP threads (one per connection here)"},
    {"--reuse-port", "LLAMA_ARG_REUSE_PORT", K_ON, F(reuse_port), 0, 0, "SO_REUSEPORT"},
    {"--sse-ping-interval", "LLAMA_ARG_SSE_PING_INTERVAL", K_INT, F(sse_ping_interval), -1, 86400, "seconds between SSE pings, -1 off (default 30)"},
    {"--timeout|-to", "LLAMA_ARG_TIMEOUT", K_INT, F(timeout), 1, 86400 * 7, "socket read/write timeout in seconds (default 3600)"},
    {"--max-body-bytes", "MLXCEL_MAX_BODY_BYTES", K_INT, F(max_body_bytes), 1024, INT64_C(1) << 32, "largest request body, 413 beyond (default 32 MiB)"},
    /* the limits of limits.h's table */
    {"--max-header-bytes", "MLXCEL_MAX_HEADER_BYTES", K_INT, F(max_header_bytes), 1024, 1 << 24, "largest request line + header fields in bytes, 431 beyond (16384)"},
    {"--max-headers", "MLXCEL_MAX_HEADERS", K_INT, F(max_headers), 8, 1 << 16, "most header fields in a request, 431 beyond (100)"},
    {"--max-connections-per-ip", "MLXCEL_MAX_CONNECTIONS_PER_IP", K_INT, F(max_conn_per_ip), 0, 1 << 20, "open connections per client address, 429 beyond (64; loopback counts only when given; 0: no limit)"},
    {"--max-json-depth", "MLXCEL_MAX_JSON_DEPTH", K_INT, F(max_json_depth), 1, MXL_LIMIT_JSON_DEPTH_MAX, "deepest JSON nesting of a request body (64)"},
    {"--max-messages", "MLXCEL_MAX_MESSAGES", K_INT, F(max_messages), 1, 1 << 24, "chat messages (Responses input items) per request (4096)"},
    {"--max-tools", "MLXCEL_MAX_TOOLS", K_INT, F(max_tools), 0, 1 << 24, "tools per request (128)"},
    {"--max-logit-bias", "MLXCEL_MAX_LOGIT_BIAS", K_INT, F(max_logit_bias), 0, 1 << 24, "logit_bias entries per request, a text entry counting its tokens (4096)"},
    {"--max-grammar-bytes", "MLXCEL_MAX_GRAMMAR_BYTES", K_INT, F(max_grammar_bytes), 1024, 1 << 30, "grammar or JSON schema text of a request, and the grammar made from a schema (262144)"},
    {"--max-inputs", "MLXCEL_MAX_INPUTS", K_INT, F(max_inputs), 1, 1 << 24, "embedding inputs / rerank documents per request (2048)"},
    {"--n-parallel|--parallel|-np", "LLAMA_ARG_N_PARALLEL", K_INT, F(n_parallel), 1, 256, "request slots (default 4)"},
    {"--max-batch-size", NULL, K_INT, F(max_batch_size), 1, 256, "sequences per decode batch (default n_parallel)"},
    {"--max-queue-depth", NULL, K_INT, F(max_queue_depth), 1, 1 << 20, "waiting requests before 503 (default 32)"},
    {"--prefill-chunk-size", "MLXCEL_PREFILL_CHUNK", K_INT, F(prefill_chunk), 0, 1 << 20, "prompt tokens per prefill chunk (default 2048 idle / 512 decoding)"},
    {"--batch-size|-b", "LLAMA_ARG_BATCH", K_INT, F(batch_size), 1, 1 << 20, "alias of --prefill-chunk-size"},
    {"--ubatch-size|-ub", "LLAMA_ARG_UBATCH", K_IGNORED_V, 0, 0, 0, "accepted, no effect on the CPU"},
    {"--prefill-grant-interval", "MLXCEL_PREFILL_GRANT_INTERVAL", K_INT, F(grant_interval), 0, 1 << 20, "decode ticks a parked prefill yields (default 16)"},
    {"--ctx-size|-c", "LLAMA_ARG_CTX_SIZE", K_INT, F(ctx_size), 0, INT64_C(1) << 30, "context budget shared by the slots (0: the model's)"},
    {"--n-predict|--predict|-n", "LLAMA_ARG_N_PREDICT", K_INT, F(n_predict), -1, INT64_C(1) << 30, "default max tokens (-1: the slot's context)"},
    {"--decode-timeout", "MLXCEL_DECODE_TIMEOUT", K_DBL, F(decode_timeout), 0, 0, "seconds without progress before a request is cancelled (default 600)"},
    {"--no-batch", NULL, K_ON, F(no_batch), 0, 0, "one request at a time, FIFO"},
    {"--chat-template", NULL, K_STR, F(chat_template), 0, 0, "Jinja chat template overriding the model's, or a llama.cpp built-in name (chatml, llama3, command-r, ...)"},
    {"--chat-template-file", NULL, K_STR, F(chat_template_file), 0, 0, "chat template from a file"},
    {"--chat-template-kwargs", NULL, K_STR, F(chat_template_kwargs), 0, 0, "default template kwargs (JSON object)"},
    {"--reasoning-budget", NULL, K_INT, F(reasoning_budget), -1, INT64_C(1) << 30, "thinking-token budget (-1: unlimited)"},
    {"--jinja|--no-jinja", NULL, K_NOOP, 0, 0, 0, NULL}, /* the Jinja engine always renders templates */
    {"--cont-batching|-cb|--no-cont-batching|-nocb|--kv-unified|-kvu|--no-kv-unified", NULL, K_NOOP, 0, 0, 0, NULL}, /* always batched, one pool */
    {"--offline", "LLAMA_ARG_OFFLINE", K_ON, F(offline), 0, 0, "never download: a repo id must be on this machine already (also HF_HUB_OFFLINE=1)"},
    {"--hf-token", NULL, K_STR, F(hf_token), 0, 0, "access token for downloading gated or private repos (never shown or logged; else HF_TOKEN, HUGGING_FACE_HUB_TOKEN)"},
    {"--revision", NULL, K_STR, F(revision), 0, 0, "branch, tag or commit of a repo id -m names (main)"},
    {"--model-store-root", NULL, K_STR, F(model_store_root), 0, 0, "store root holding <owner>/<name> of repo ids, downloads included (else MLXCEL_MODELS_DIR)"},
    /* the WebUI at {api_prefix}/webui/ (webui.c); as in the spec, not listed by --help */
    {"--webui|--ui", "LLAMA_ARG_UI", K_ON, F(webui), 0, 0, NULL},
    {"--no-webui|--no-ui", NULL, K_OFF, F(webui), 0, 0, NULL},
    {"--backend-sampling|--backend_sampling", NULL, K_NOOP, 0, 0, 0, NULL}, /* sampling runs on the CPU either way, same results */
    {"--reasoning-format", NULL, K_STR, F(reasoning_format), 0, 0, "deepseek|none|auto: where thinking text goes (default auto)"},
    {"--reasoning|-rea", NULL, K_STR, F(reasoning), 0, 0, "on|off|auto: default of enable_thinking"},
    {"--slots", NULL, K_ON, F(slots), 0, 0, "enable /slots (default on)"},
    {"--no-slots", NULL, K_OFF, F(slots), 0, 0, NULL},
    {"--props", NULL, K_ON, F(props), 0, 0, "enable POST /props"},
    {"--metrics", NULL, K_ON, F(metrics), 0, 0, "enable /metrics"},
    {"--warmup", NULL, K_ON, F(warmup), 0, 0, "one-token warm-up after load (default on)"},
    {"--no-warmup", NULL, K_OFF, F(warmup), 0, 0, NULL},
    {"--prompt-cache-enabled", "MLXCEL_PROMPT_CACHE_ENABLED", K_BOOLV, F(prompt_cache), 0, 0, "reuse prompt prefixes (default on)"},
    {"--no-prompt-cache", NULL, K_OFF, F(prompt_cache), 0, 0, NULL},
    {"--prompt-cache-capacity-bytes", "MLXCEL_PROMPT_CACHE_CAPACITY_BYTES", K_INT, F(prompt_cache_capacity), 0, INT64_C(1) << 50, "bytes of unreferenced cached prefix blocks (2 GiB)"},
    {"--prompt-cache-max-entries", "MLXCEL_PROMPT_CACHE_MAX_ENTRIES", K_INT, F(prompt_cache_max_entries), 0, INT64_C(1) << 30, "most unreferenced cached blocks of 32 tokens (1024)"},
    {"--prompt-cache-ttl", "MLXCEL_PROMPT_CACHE_TTL", K_INT, F(prompt_cache_ttl), 0, INT64_C(1) << 40, "seconds a cached block lives after its last use (3600; 0: forever)"},
    {"--prompt-cache-min-prefix", "MLXCEL_PROMPT_CACHE_MIN_PREFIX", K_INT, F(prompt_cache_min_prefix), 0, INT64_C(1) << 30, "shortest prefix cached or reused across slots (32)"},
    {"--prompt-cache-snapshot-capacity-bytes", "MLXCEL_PROMPT_CACHE_SNAPSHOT_CAPACITY_BYTES", K_INT, F(snapshot_capacity), 0, INT64_C(1) << 50, "recurrent models' snapshots (none run here: no effect)"},
    {"--prompt-cache-snapshot-max-entries", "MLXCEL_PROMPT_CACHE_SNAPSHOT_MAX_ENTRIES", K_INT, F(snapshot_max_entries), 0, INT64_C(1) << 30, NULL},
    {"--prompt-cache-snapshot-ttl", "MLXCEL_PROMPT_CACHE_SNAPSHOT_TTL", K_INT, F(snapshot_ttl), 0, INT64_C(1) << 40, NULL},
    {"--kv-cache-budget", "MLXCEL_KV_CACHE_BUDGET", K_STR, F(kv_cache_budget), 0, 0, "KV block pool: auto | BYTES | none (default auto)"},
    {"--kv-admission-watermark", "MLXCEL_KV_ADMISSION_WATERMARK", K_DBL, F(kv_watermark), 0, 0, "pool fraction admission keeps free while rows decode, 0..0.5 (0.01)"},
    {"--enable-preemption", NULL, K_ON, F(enable_preemption), 0, 0, "preempt running sequences when the KV pool runs dry"},
    {"--preemption-policy", NULL, K_STR, F(preemption_policy), 0, 0, "longest-first | lowest-priority (default longest-first)"},
    {"--temp|--temperature", NULL, K_FLT, S(temp), 0, 0, "default temperature (0.8)"},
    {"--top-k", "LLAMA_ARG_TOP_K", K_INT32, S(top_k), 0, INT32_MAX, "default top-k (40)"},
    {"--top-p", NULL, K_FLT, S(top_p), 0, 0, "default top-p (0.9)"},
    {"--min-p", NULL, K_FLT, S(min_p), 0, 0, "default min-p (0.1)"},
    {"--seed|-s", NULL, K_INT, F(seed), -1, INT64_MAX, "default seed (-1: random)"},
    {"--repeat-last-n", NULL, K_INT32, S(repeat_last_n), -1, INT32_MAX, "penalty window (64)"},
    {"--repeat-penalty", NULL, K_FLT, S(repeat_penalty), 0, 0, "repetition penalty (1.0)"},
    {"--presence-penalty", NULL, K_FLT, S(presence_penalty), 0, 0, "presence penalty (0.0)"},
    {"--frequency-penalty", NULL, K_FLT, S(frequency_penalty), 0, 0, "frequency penalty (0.0)"},
    {"--ignore-eos", NULL, K_ON, F(ignore_eos), 0, 0, "never stop at EOS"},
    {"--logit-bias|-l", NULL, K_MULTI, F(logit_bias), 0, 0, "TOKEN_ID(+/-)BIAS for every request (repeatable)"},
    {"--reverse-prompt|-r", NULL, K_MULTI, F(reverse_prompt), 0, 0, "stop string added to every request (repeatable)"},
    {"--verbose|-v", "LLAMA_ARG_VERBOSE", K_ON, F(verbose), 0, 0, "log every request"},
    {"--log-disable", NULL, K_ON, F(log_disable), 0, 0, "no log output"},
    {"--log-file", "LLAMA_LOG_FILE", K_STR, F(log_file), 0, 0, "write the log to this file (appended) instead of stderr"},
    {"--slot-save-path", NULL, K_STR, F(slot_save_path), 0, 0, "directory of POST /slots/:id_slot?action=save|restore files"},
    {"--shutdown-timeout", "MLXCEL_SHUTDOWN_TIMEOUT", K_INT, F(shutdown_timeout), 0, 86400, "seconds SIGTERM / SIGINT lets running requests finish before cancelling them (default 10; a second signal stops at once)"},
    {"--sleep-idle-seconds", NULL, K_INT, F(sleep_idle_seconds), -1, INT64_C(1) << 31, "release the model after this many idle seconds; the next request reloads it (-1: never)"},
    {"--help|-h", NULL, K_ON, F(help), 0, 0, "print help"},
    /* llama-server spellings with no meaning on this backend */
    {"--n-gpu-layers|-ngl|--gpu-layers", "LLAMA_ARG_N_GPU_LAYERS", K_IGNORED_V, 0, 0, 0, NULL},
    {"--flash-attn|-fa", "LLAMA_ARG_FLASH_ATTN", K_IGNORED_V, 0, 0, 0, NULL},
    {"--cache-type-k|-ctk", "LLAMA_ARG_CACHE_TYPE_K", K_STR, F(cache_type_k), 0, 0, "KV cache keys: f32, f16 (fp16), q8_0, q4_0, q4_1, q5_0, q5_1, int8, turbo4, turbo3"},
    {"--cache-type-v|-ctv", "LLAMA_ARG_CACHE_TYPE_V", K_STR, F(cache_type_v), 0, 0, "KV cache values: as keys, or fp16+turbo4 / fp16+turbo3"},
    {"--kv-cache-mode", NULL, K_STR, F(kv_cache_mode), 0, 0, "K and V at once: a type above, or fp16+turbo4 / fp16+turbo3 (keys fp16, values TurboQuant)"},
    {"--kv-bits", "LLAMA_ARG_KV_BITS", K_INT, F(kv_bits), 0, 8, "quantized KV cache: 8 (uniform: int8) or 4 (--kv-quant-scheme turboquant: turbo4); 0 off"},
    {"--kv-quant-scheme", "LLAMA_ARG_KV_QUANT_SCHEME", K_STR, F(kv_quant_scheme), 0, 0, "uniform | turboquant (the scheme of --kv-bits)"},
    {"--kv-group-size", "LLAMA_ARG_KV_GROUP_SIZE", K_INT, F(kv_group_size), 1, 1 << 20, "with --kv-bits 8: the int8 scale group, dividing the heads (64)"},
    {"--kv-skip-last-layer", "LLAMA_ARG_KV_SKIP_LAST_LAYER", K_BOOLV, F(kv_skip_last_layer), 0, 0, "with --kv-bits: the last layer's K and V stay fp16 (true)"},
    {"--turbo-boundary-v", "MLXCEL_KV_BOUNDARY_V_LAYERS", K_INT, F(turbo_boundary_v), 0, 1 << 20, "TurboQuant values: the first and last COUNT layers' V stay fp16 (2)"},
    /* spec flags of features not built yet */
    {"--draft-model|--model-draft|-md", NULL, K_STR, F(draft_model), 0, 0, "speculative decoding: a small model with the same tokenizer drafts (its own KV cache)"},
    {"--draft-max|--draft|--spec-draft-n-max|--draft-n", "LLAMA_ARG_SPEC_DRAFT_N_MAX|LLAMA_ARG_DRAFT_MAX", K_INT, F(draft_max), 0, 64, "reported as /props n_max (llama-server compatibility); the block is --draft-block-size"},
    {"--draft-kind", "LLAMA_ARG_DRAFT_KIND|MLXCEL_DRAFT_KIND", K_STR, F(draft_kind), 0, 0, "full-model | prompt-lookup (dflash and mtp need heads no family here ships)"},
    {"--draft-block-size", "LLAMA_ARG_DRAFT_BLOCK_SIZE|MLXCEL_DRAFT_BLOCK_SIZE", K_INT, F(draft_block_size), 1, 64, "tokens drafted per round (full-model 4, prompt-lookup 7)"},
    {"--prompt-lookup-max-batch", NULL, K_INT, F(prompt_lookup_max_batch), 1, 256, "most decoding rows in a tick where slots verify their own drafts (2)"},
    {"--hf-file|-hff|--model-url|-mu|--docker-repo|-dr", NULL, K_REFUSED_V, 0, 0, 0, NULL},
    {"--estimate-memory", NULL, K_ON, F(estimate_memory), 0, 0, "memory preflight at load: weights + KV for every slot + headroom against the budget; over it stops (always checked when MLXCEL_MEMORY_LIMIT is set)"},
    {"--force|--no-memory-check", NULL, K_ON, F(memory_force), 0, 0, "an over-budget preflight only warns"},
    {"--settings", NULL, K_ON, F(settings), 0, 0, "GET / PATCH /v1/settings: read and change the request defaults at run time (needs --api-key)"},
    {"--enable-vlm-prefix-cache", "MLXCEL_ENABLE_VLM_PREFIX_CACHE", K_BOOLV, F(vlm_prefix_cache), 0, 0,
     "requests with images reuse cached rows past their images (image rows keyed by the image's hash; M-RoPE positions follow the cached images)"},
    {"--spm-infill", NULL, K_ON, F(spm_infill), 0, 0, "/infill puts the suffix before the prefix (Suffix/Prefix/Middle), as some models were trained"},
    {"--adapter|--lora", NULL, K_MULTI, F(lora), 0, 0, "LoRA adapter(s) to load, comma-separated or repeated (scale 1)"},
    {"--lora-scaled", NULL, K_MULTI, F(lora_scaled), 0, 0, "LoRA adapter(s) with their scales: PATH:SCALE,..."},
    {"--lora-init-without-apply", NULL, K_ON, F(lora_init_without_apply), 0, 0, "load the adapters at scale 0 (POST /lora-adapters applies them)"},
    {"--lora-fuse", NULL, K_ON, F(lora_fuse), 0, 0, "merge the adapters into the (dense) base weights at load: no decode cost, no later scale or choice"},
    {"--surgery|--max-batch-prefill|--max-batch-prefill-tokens|--max-kv-size|--decode-storage-backend", NULL, K_REFUSED_V, 0, 0, 0, NULL},
    {"--media-path", NULL, K_STR, F(media_path), 0, 0, "root of the local image files requests may name (file URLs refused without it)"},
    {"--max-image-payload-size", "LLAMA_ARG_MAX_IMAGE_PAYLOAD_SIZE", K_INT, F(max_image_payload), 1, INT64_C(1) << 40, "encoded bytes per image (67108864)"},
    {"--max-images", "LLAMA_ARG_MAX_IMAGES", K_INT, F(max_images), 0, 16, "images per request (16)"},
    {"--max-image-width", "LLAMA_ARG_MAX_IMAGE_WIDTH", K_INT, F(max_image_width), 1, 1 << 20, "largest decoded image width (16384)"},
    {"--max-image-height", "LLAMA_ARG_MAX_IMAGE_HEIGHT", K_INT, F(max_image_height), 1, 1 << 20, "largest decoded image height (16384)"},
    {"--max-image-decode-alloc-bytes", "LLAMA_ARG_MAX_IMAGE_DECODE_ALLOC_BYTES", K_INT, F(max_image_decode_alloc), 1, INT64_C(1) << 40, "decoder allocation budget of one image (536870912)"},
    {"--vision-cache-size", NULL, K_INT, F(vision_cache_size), 0, 4096, "encoded images kept for requests that send them again (20; 0: none)"},
    {"--video-max-frames|--video-fps|--audio-queue-depth|--audio-request-timeout-secs|--image-model", NULL, K_REFUSED_V, 0, 0, 0, NULL},
    {"--embedding-model", "LLAMA_ARG_EMBEDDING_MODEL|MLXCEL_EMBEDDING_MODEL", K_STR, F(embedding_model), 0, 0, "embedding model beside the chat model"},
    {"--reranker-model", "LLAMA_ARG_RERANKER_MODEL|MLXCEL_RERANKER_MODEL", K_STR, F(reranker_model), 0, 0, "reranker beside the chat model"},
    {"--embedding-batch-size", "MLXCEL_EMBEDDING_BATCH_SIZE", K_INT, F(embedding_batch_size), 1, 4096, "texts per embedding forward pass (16)"},
    {"--embedding-max-length", "MLXCEL_EMBEDDING_MAX_LENGTH", K_INT, F(embedding_max_length), 1, 1 << 20, "lower the embedding token limit"},
    {"--embedding-queue-depth", "MLXCEL_EMBEDDING_QUEUE_DEPTH", K_INT, F(embedding_queue_depth), 1, 1 << 20, "waiting embedding/rerank requests before 503 (8)"},
    {"--embedding-request-timeout-secs", "MLXCEL_EMBEDDING_REQUEST_TIMEOUT_SECS", K_INT, F(embedding_timeout), 1, 86400, "embedding/rerank wait limit, 504 after (120)"},
    {"--rerank-batch-size", "MLXCEL_RERANK_BATCH_SIZE", K_INT, F(rerank_batch_size), 0, 4096, "pairs per rerank forward pass (0: 8)"},
    {"--pooling", NULL, K_STR, F(pooling), 0, 0, "mean|cls|last|rank: override pooling, or rank for reranking"},
    {"--embd-normalize", NULL, K_INT, F(embd_normalize), -1, 1000, "embedding normalization (-1 none, 0 max-abs, 1 taxicab, 2 euclidean, >2 p-norm)"},
    {"--embedding|--embeddings", NULL, K_ON, F(embedding_mode), 0, 0, "embedding-only compatibility mode"},
    {"--rerank|--reranking", NULL, K_ON, F(rerank_mode), 0, 0, "reranking-only compatibility mode"},
    {"--max-denoising-steps|--diffusion-sampler|--diffusion-threshold", NULL, K_REFUSED_V, 0, 0, 0, NULL},
    {"--apc-enabled|--apc-block-size|--apc-num-blocks|--apc-hash", NULL, K_REFUSED_V, 0, 0, 0, NULL},
    {"--responses-store-max-entries", "LLAMA_ARG_RESPONSES_STORE_MAX_ENTRIES", K_INT, F(responses_max), 0, 1 << 24, "stored Responses API responses (1024; 0: none stored)"},
    {"--responses-store-ttl-secs", "LLAMA_ARG_RESPONSES_STORE_TTL_SECS", K_INT, F(responses_ttl), 1, INT64_C(1) << 40, "seconds a stored response lives (3600)"},
    {"--conversation-store-max-entries", "LLAMA_ARG_CONVERSATION_STORE_MAX_ENTRIES", K_INT, F(conversations_max), 0, 1 << 24, "stored /v1/conversations conversations (256; 0: none)"},
    {"--conversation-store-ttl-secs", "LLAMA_ARG_CONVERSATION_STORE_TTL_SECS", K_INT, F(conversations_ttl), 1, INT64_C(1) << 40, "seconds a stored conversation lives (3600)"},
    {"--grammar", NULL, K_STR, F(grammar), 0, 0, "GBNF grammar constraining every generation a request does not constrain itself"},
    {"--grammar-file", NULL, K_STR, F(grammar_file), 0, 0, "the --grammar from a file"},
    {"--json-schema|-j", NULL, K_STR, F(json_schema), 0, 0, "JSON Schema constraining every generation ({}: any JSON object)"},
    {"--json-schema-file|-jf", NULL, K_STR, F(json_schema_file), 0, 0, "the --json-schema from a file"},
    {"--dry-multiplier", NULL, K_FLT, S(dry_multiplier), 0, 0, "DRY multiplier (0.0: off)"},
    {"--dry-base", NULL, K_FLT, S(dry_base), 0, 0, "DRY base (1.75)"},
    {"--dry-allowed-length", NULL, K_INT32, S(dry_allowed_length), 0, INT32_MAX, "DRY allowed length (2)"},
    {"--dry-penalty-last-n", NULL, K_INT32, S(dry_penalty_last_n), 0, INT32_MAX, "DRY window (64; 0 disables)"},
    {"--dry-sequence-breaker|--dry-sequence-breakers", NULL, K_MULTI, F(dry_breakers), 0, 0, "DRY sequence breaker (repeatable; 'none' clears)"},
    {"--typical|--typical-p", NULL, K_FLT, S(typical_p), 0, 0, "locally typical sampling (1.0: off)"},
    {"--top-nsigma|--top-n-sigma", NULL, K_FLT_SIGNED, S(top_n_sigma), 0, 0, "top-n-sigma (-1.0: off)"},
    {"--xtc-probability", NULL, K_FLT, S(xtc_probability), 0, 0, "XTC probability (0.0: off)"},
    {"--xtc-threshold", NULL, K_FLT, S(xtc_threshold), 0, 0, "XTC threshold (0.1)"},
    {"--dynatemp-range", NULL, K_FLT, S(dynatemp_range), 0, 0, "dynamic temperature range (0.0: off)"},
    {"--dynatemp-exp", NULL, K_FLT, S(dynatemp_exponent), 0, 0, "dynamic temperature exponent (1.0)"},
    {"--mirostat", NULL, K_INT32, S(mirostat), 0, 2, "mirostat 1 or 2 (0: off)"},
    {"--mirostat-lr", NULL, K_FLT, S(mirostat_eta), 0, 0, "mirostat learning rate (0.1)"},
    {"--mirostat-ent", NULL, K_FLT, S(mirostat_tau), 0, 0, "mirostat target entropy (5.0)"},
    {"--samplers|--sampler-seq", NULL, K_STR, F(samplers), 0, 0, "accepted only in llama-server's default order"},
    {"--adaptive-target|--adaptive-decay", NULL, K_REFUSED_V, 0, 0, 0, NULL},
    {"--distributed-config|--node-role|--node-id|--peers|--serving-bind|--prefill-peers|--decode-peers|--pp-layers|--pp-micro-batch-size|--pp-auto|--cluster-discovery|--cluster-discovery-port", NULL, K_REFUSED_V, 0, 0, 0, NULL},
    {"--ui-config|--ui-config-file|--path|--tools|--tools-runtime|--mcp-servers-config|--mcp-servers-json|--ui-mcp-proxy|--agent", NULL, K_REFUSED_V, 0, 0, 0, NULL},
    {NULL, NULL, 0, 0, 0, 0, NULL},
};

static const opt *find_opt(const char *name, size_t len) {
    for (const opt *o = k_opts; o->names; o++)
        for (const char *p = o->names; *p;) {
            const char *e = strchr(p, '|');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            if (n == len && strncmp(p, name, len) == 0) return o;
            p += n + (e ? 1 : 0);
        }
    return NULL;
}

static bool takes_value(kind k) {
    return k == K_STR || k == K_INT || k == K_INT32 || k == K_DBL || k == K_FLT || k == K_FLT_SIGNED || k == K_MULTI || k == K_REFUSED_V ||
           k == K_IGNORED_V;
}

static mxl_status parse_bool(const char *flag, const char *v, bool *out, mxl_error *err) {
    if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "enabled")) *out = true;
    else if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "off") || !strcasecmp(v, "no") || !strcasecmp(v, "disabled")) *out = false;
    else return mxl_error_set(err, MXL_ERR_ARG, "%s: expected a boolean, got '%s'", flag, v);
    return MXL_OK;
}

/* Applies one option with its value (NULL for flags). `flag` names it in messages. */
static mxl_status apply(mxl_server_config *c, const opt *o, const char *flag, const char *v, mxl_error *err) {
    char *base = (char *)c;
    char *end = NULL;
    switch (o->k) {
    case K_STR:
        *(const char **)(base + o->off) = v;
        return MXL_OK;
    case K_INT:
    case K_INT32: {
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end) return mxl_error_set(err, MXL_ERR_ARG, "%s: expected an integer, got '%s'", flag, v);
        if (x < o->min || x > o->max)
            return mxl_error_set(err, MXL_ERR_ARG, "%s: %lld is outside [%lld, %lld]", flag, x, (long long)o->min, (long long)o->max);
        if (o->k == K_INT) *(int64_t *)(base + o->off) = x;
        else *(int32_t *)(base + o->off) = (int32_t)x;
        if (o->off == F(max_conn_per_ip)) c->conn_per_ip_set = true;
        return MXL_OK;
    }
    case K_DBL:
    case K_FLT:
    case K_FLT_SIGNED: {
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x)) return mxl_error_set(err, MXL_ERR_ARG, "%s: expected a number, got '%s'", flag, v);
        if (x < 0 && o->k != K_FLT_SIGNED) return mxl_error_set(err, MXL_ERR_ARG, "%s: must not be negative", flag);
        if (o->k == K_DBL) *(double *)(base + o->off) = x;
        else *(float *)(base + o->off) = (float)x;
        if (o->off == F(decode_timeout)) c->decode_timeout_set = true;
        return MXL_OK;
    }
    case K_ON:
        *(bool *)(base + o->off) = true;
        return MXL_OK;
    case K_OFF:
        *(bool *)(base + o->off) = false;
        return MXL_OK;
    case K_BOOLV:
        if (!v) {
            *(bool *)(base + o->off) = true;
            return MXL_OK;
        }
        return parse_bool(flag, v, (bool *)(base + o->off), err);
    case K_MULTI: {
        const char **arr = (const char **)(base + o->off);
        int *n = (int *)(base + o->off + sizeof(const char *) * MXL_SRV_MAX_MULTI);
        if (*n >= MXL_SRV_MAX_MULTI) return mxl_error_set(err, MXL_ERR_ARG, "%s: at most %d values", flag, MXL_SRV_MAX_MULTI);
        arr[(*n)++] = v;
        return MXL_OK;
    }
    case K_NOOP:
    case K_IGNORED_V:
        return MXL_OK;
    case K_REFUSED:
    case K_REFUSED_V:
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s is not supported by this build of mlxcel serve yet", flag);
    }
    return MXL_OK;
}

static void defaults(mxl_server_config *c) {
    memset(c, 0, sizeof *c);
    c->threads = -1;
    c->host = "127.0.0.1";
    c->port = 8080;
    c->cors_credentials = true;
    c->threads_http = -1;
    c->sse_ping_interval = 30;
    c->timeout = 3600;
    c->max_body_bytes = MXL_LIMIT_BODY_BYTES;
    c->max_header_bytes = MXL_LIMIT_HEADER_BYTES;
    c->max_headers = MXL_LIMIT_HEADERS;
    c->max_conn_per_ip = MXL_LIMIT_CONN_PER_IP;
    c->max_json_depth = MXL_LIMIT_JSON_DEPTH;
    c->max_messages = MXL_LIMIT_MESSAGES;
    c->max_tools = MXL_LIMIT_TOOLS;
    c->max_logit_bias = MXL_LIMIT_LOGIT_BIAS;
    c->max_grammar_bytes = MXL_LIMIT_GRAMMAR_BYTES;
    c->max_inputs = MXL_LIMIT_INPUTS;
    c->n_parallel = 4;
    c->max_queue_depth = 32;
    c->grant_interval = 16;
    c->n_predict = -1;
    c->sleep_idle_seconds = -1;
    c->shutdown_timeout = 10;
    c->turbo_boundary_v = -1;
    c->kv_skip_last_layer = true;
    c->models_max = 4;
    c->models_autoload = true;
    c->decode_timeout = 600;
    c->reasoning_budget = -1;
    c->slots = true;
    c->warmup = true;
    c->prompt_cache = true;
    c->prompt_cache_capacity = INT64_C(2147483648);
    c->prompt_cache_max_entries = 1024;
    c->prompt_cache_ttl = 3600;
    c->prompt_cache_min_prefix = 32;
    c->snapshot_capacity = 536870912;
    c->snapshot_max_entries = 4096;
    c->snapshot_ttl = 7200;
    c->responses_max = 1024;
    c->responses_ttl = 3600;
    c->conversations_max = 256;
    c->conversations_ttl = 3600;
    c->kv_watermark = 0.01;
    c->draft_max = 16;
    c->prompt_lookup_max_batch = 2;
    mxl_sampler_params_default(&c->sampling);
    c->sampling.temp = 0.8f;
    c->sampling.top_k = 40;
    c->sampling.top_p = 0.9f;
    c->sampling.min_p = 0.1f;
    c->sampling.repeat_last_n = 64;
    c->sampling.repeat_penalty = 1.0f;
    c->sampling.dry_penalty_last_n = 64;
    c->sampling.top_n_sigma = -1.0f;
    c->seed = -1;
    c->embedding_batch_size = 16;
    c->max_image_payload = 67108864;
    c->max_images = 16;
    c->vision_cache_size = 20;
    c->max_image_width = c->max_image_height = 16384;
    c->max_image_decode_alloc = 536870912;
    c->embedding_queue_depth = 8;
    c->embedding_timeout = 120;
    c->embd_normalize = -1000; /* the checkpoint's */
}

/* --kv-cache-budget: auto, none (or 0), or a byte count with an optional K/M/G/T suffix (powers of 1024). */
static mxl_status parse_kv_budget(mxl_server_config *c, mxl_error *err) {
    const char *v = c->kv_cache_budget;
    if (!strcasecmp(v, "auto")) return c->kv_budget = 0, MXL_OK;
    if (!strcasecmp(v, "none") || !strcmp(v, "0")) return c->kv_budget = -1, MXL_OK;
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    int shift = 0;
    if (end && *end) {
        const char *u = "KMGT", *q = strchr(u, toupper((unsigned char)*end));
        if (q && *q) shift = 10 * (int)(q - u + 1), end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'b' || *end == 'B') end++;
    }
    if (errno || end == v || *end || v[0] == '-' || x == 0 || x > (UINT64_C(1) << 50) >> shift)
        return mxl_error_set(err, MXL_ERR_ARG, "--kv-cache-budget: expected auto, none or a byte count, got '%s'", v);
    c->kv_budget = (int64_t)(x << shift);
    return MXL_OK;
}

mxl_status mxl_server_config_parse(int argc, char **argv, mxl_server_config *c, mxl_error *err) {
    mxl_status st_;
    defaults(c);
    /* environment first: flags given on the command line override it */
    for (const opt *o = k_opts; o->names; o++) {
        if (!o->env) continue;
        for (const char *p = o->env; *p;) {
            const char *e = strchr(p, '|');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            char name[96];
            if (n < sizeof name) {
                memcpy(name, p, n);
                name[n] = 0;
                const char *v = getenv(name);
                if (v && *v) {
                    mxl_status st;
                    if (o->k == K_ON || o->k == K_OFF) { /* boolean env: a value */
                        bool b;
                        if ((st = parse_bool(name, v, &b, err))) return st;
                        *(bool *)((char *)c + o->off) = o->k == K_ON ? b : !b;
                    } else if ((st = apply(c, o, name, v, err))) {
                        return st;
                    }
                    break;
                }
            }
            p += n + (e ? 1 : 0);
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == 0) return mxl_error_set(err, MXL_ERR_ARG, "unexpected argument '%s'", a);
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const opt *o = find_opt(a, len);
        char flag[128];
        snprintf(flag, sizeof flag, "%.*s", (int)len, a);
        if (!o) return mxl_error_set(err, MXL_ERR_ARG, "unknown option %s (see mlxcel serve --help)", flag);
        const char *v = NULL;
        if (takes_value(o->k)) {
            if (eq) v = eq + 1;
            else if (i + 1 < argc) v = argv[++i];
            else return mxl_error_set(err, MXL_ERR_ARG, "%s needs a value", flag);
        } else if (eq) {
            if (o->k != K_BOOLV) return mxl_error_set(err, MXL_ERR_ARG, "%s takes no value", flag);
            v = eq + 1;
        }
        mxl_status st = apply(c, o, flag, v, err);
        if (st) return st;
        if (o->off == F(models_autoload) && (o->k == K_ON || o->k == K_OFF)) c->models_autoload_set = true;
        if (!c->router_flag && (o->off == F(models_dir) || o->off == F(models_preset) || o->off == F(models_max) ||
                                o->off == F(models_autoload)) && (o->k == K_STR || o->k == K_INT || o->k == K_ON || o->k == K_OFF))
            c->router_flag = o->names;
    }
    if (c->help) return MXL_OK;
    if (c->kv_cache_budget && (st_ = parse_kv_budget(c, err))) return st_;
    if (c->kv_watermark > 0.5) return mxl_error_set(err, MXL_ERR_ARG, "--kv-admission-watermark: %g is outside [0, 0.5]", c->kv_watermark);
    /* the cache types' names now (the model's head_dim is checked when it is loaded) */
    const char *scheme = c->kv_quant_scheme ? c->kv_quant_scheme : "uniform";
    if (strcmp(scheme, "uniform") && strcmp(scheme, "turboquant"))
        return mxl_error_set(err, MXL_ERR_ARG, "--kv-quant-scheme: expected uniform or turboquant, got '%s'", scheme);
    if (c->kv_bits && !(c->kv_bits == 8 && !strcmp(scheme, "uniform")) && !(c->kv_bits == 4 && !strcmp(scheme, "turboquant")))
        return mxl_error_set(err, MXL_ERR_ARG, "--kv-bits %lld with --kv-quant-scheme %s: uniform takes 8 bits, turboquant 4 (uniform 4-bit is refused: use turboquant)",
                             (long long)c->kv_bits, scheme);
    {
        mxl_kv_flags kf;
        mxl_kv_type kt, vt;
        int64_t edge;
        mxl_server_config_kv_flags(c, &kf);
        mxl_status kst = mxl_kv_flags_resolve(&kf, &kt, &vt, &edge, err);
        if (kst) return kst;
    }
    if (c->preemption_policy && strcmp(c->preemption_policy, "longest-first") && strcmp(c->preemption_policy, "lowest-priority"))
        return mxl_error_set(err, MXL_ERR_ARG, "--preemption-policy: expected longest-first or lowest-priority, got '%s'", c->preemption_policy);
    if (c->api_key && c->api_key_file) return mxl_error_set(err, MXL_ERR_ARG, "--api-key and --api-key-file are mutually exclusive");
    if (c->allowed_origins && c->cors_origins) return mxl_error_set(err, MXL_ERR_ARG, "--allowed-origins and --cors-origins are mutually exclusive");
    if (!!c->ssl_cert_file != !!c->ssl_key_file) return mxl_error_set(err, MXL_ERR_ARG, "--ssl-cert-file and --ssl-key-file must be given together");
    if (c->api_prefix && (strchr(c->api_prefix, '{') || strchr(c->api_prefix, '}')))
        return mxl_error_set(err, MXL_ERR_ARG, "--api-prefix must not contain '{' or '}'");
    if (c->api_prefix && c->api_prefix[0] && (c->api_prefix[0] != '/' || c->api_prefix[strlen(c->api_prefix) - 1] == '/'))
        return mxl_error_set(err, MXL_ERR_ARG, "--api-prefix must start with '/' and not end with one, e.g. /llama");
    if (c->chat_template && c->chat_template_file) return mxl_error_set(err, MXL_ERR_ARG, "--chat-template and --chat-template-file are mutually exclusive");
    if (c->reasoning_format && strcmp(c->reasoning_format, "deepseek") && strcmp(c->reasoning_format, "none") &&
        strcmp(c->reasoning_format, "auto") && strcmp(c->reasoning_format, "deepseek-legacy"))
        return mxl_error_set(err, MXL_ERR_ARG, "--reasoning-format: expected deepseek, deepseek-legacy, none or auto, got '%s'", c->reasoning_format);
    if (c->reasoning && strcmp(c->reasoning, "on") && strcmp(c->reasoning, "off") && strcmp(c->reasoning, "auto"))
        return mxl_error_set(err, MXL_ERR_ARG, "--reasoning: expected on, off or auto, got '%s'", c->reasoning);
    if (c->samplers && strcmp(c->samplers, "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature") &&
        strcmp(c->samplers, "edskypmxt"))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "--samplers: mlxcel's chain order is fixed to llama-server's default "
                                                       "(penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)");
    if (c->pooling && strcmp(c->pooling, "mean") && strcmp(c->pooling, "cls") && strcmp(c->pooling, "last") && strcmp(c->pooling, "rank"))
        return mxl_error_set(err, MXL_ERR_ARG, "--pooling: expected mean, cls, last or rank, got '%s'", c->pooling);
    if (c->model && c->router_flag) /* (a flag given on the command line; the environment's LLAMA_ARG_MODELS_DIR is ignored) */
        return mxl_error_set(err, MXL_ERR_ARG, "%s is a router-mode flag: it cannot be used with a model argument (-m); "
                                               "start mlxcel serve without -m to serve several models", c->router_flag);
    if (c->models_dir && c->models_preset)
        return mxl_error_set(err, MXL_ERR_ARG, "--models-dir and --models-preset are mutually exclusive");
    if (!c->model) {
        c->router = true;
        if (c->webui && !c->models_autoload_set) c->models_autoload = false; /* spec: --webui without a model */
    } else {
        c->models_dir = NULL; /* LLAMA_ARG_MODELS_DIR beside a model: not router mode */
    }
    { /* --grammar / --json-schema (and their files) -> sampling.grammar, checked now; the text
       * lives as long as the process (kept in a static so leak checkers see it reachable) */
        static char *server_grammar;
        char *gbnf = NULL;
        mxl_status st = mxl_srv_constraint_from_flags(c->grammar, c->grammar_file, c->json_schema, c->json_schema_file, &gbnf, err);
        if (st) return st;
        if (gbnf) {
            mxl_free(server_grammar);
            server_grammar = gbnf;
            c->sampling.grammar = gbnf;
        }
    }
    return MXL_OK;
}

void mxl_server_config_kv_flags(const mxl_server_config *c, mxl_kv_flags *f) {
    const char *mode = c->kv_cache_mode;
    if (!mode && c->kv_bits) mode = c->kv_bits == 4 ? "turbo4" : "int8";
    /* --kv-skip-last-layer belongs to --kv-bits' quantization (default on) */
    /* --kv-group-size is uniform --kv-bits 8's (default 64 where it divides the heads) */
    const int64_t group = c->kv_bits == 8 ? (c->kv_group_size > 0 ? c->kv_group_size : -1) : 0;
    *f = (mxl_kv_flags){mode, c->cache_type_k, c->cache_type_v, c->turbo_boundary_v, c->kv_bits && c->kv_skip_last_layer ? 1 : 0, group};
}

void mxl_server_config_print_help(void) {
    printf("Usage: mlxcel serve -m <MODEL> [OPTIONS]\n"
           "       mlxcel serve [--models-dir PATH | --models-preset INI] [OPTIONS]   (router mode)\n\n"
           "Start the OpenAI / llama-server compatible HTTP server. Without -m, the router serves every model of\n"
           "the store and the Hugging Face cache (or of --models-dir / --models-preset), each in a child server\n"
           "loaded on first use; a request's \"model\" picks it.\n\nOptions:\n");
    for (const opt *o = k_opts; o->names; o++) {
        if (!o->help) continue;
        char names[96];
        snprintf(names, sizeof names, "%s", o->names);
        for (char *p = names; *p; p++)
            if (*p == '|') *p = ',';
        printf("  %-34s %s", names, o->help);
        if (o->env) printf(" [env: %s]", o->env);
        printf("\n");
    }
    printf("\nFlags of the spec for features this build does not run (--image-model, the\n"
           "distributed flags, ...) are recognised and refused at startup;\n"
           "the routes of those features (/v1/images/*, /v1/audio/*, ...) answer 501.\n");
}

/* Flags the router keeps for itself (it listens, authenticates, logs and lists the models). */
static bool router_only(const opt *o) {
    const size_t off = o->off;
    if (o->k == K_REFUSED || o->k == K_REFUSED_V) return false;
    return off == F(model) || off == F(alias) || off == F(tags) || off == F(host) || off == F(port) || off == F(api_key) ||
           off == F(api_key_file) || off == F(api_prefix) || off == F(allowed_origins) || off == F(cors_origins) ||
           off == F(cors_headers) || off == F(cors_methods) || off == F(cors_credentials) || off == F(reuse_port) ||
           off == F(ssl_cert_file) || off == F(ssl_key_file) || off == F(log_disable) || off == F(log_file) || off == F(webui) ||
           off == F(models_dir) || off == F(models_preset) || off == F(models_max) || off == F(models_autoload) ||
           off == F(help) || off == F(model_store_root) || off == F(offline) ||
           off == F(max_conn_per_ip); /* (the children's clients are the router, on loopback) */
}

int mxl_server_config_child_args(int argc, char **argv, const char **out) {
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const opt *o = a[0] == '-' ? find_opt(a, len) : NULL;
        bool has_value = o && takes_value(o->k) && !eq && i + 1 < argc;
        if (!o || !router_only(o)) {
            out[n++] = a;
            if (has_value) out[n++] = argv[i + 1];
        }
        if (has_value) i++;
    }
    return n;
}
