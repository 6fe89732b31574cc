/* memory_estimate.h - pre-load memory estimate: weights + KV cache + allocator headroom against
 * the memory budget. `mlxcel inspect` prints it; generate --estimate-memory and the server's
 * startup check will use the same function.
 *
 * Terms (bytes):
 *   weights       sum of tensor sizes from checkpoint metadata (never by loading)
 *   kv_total      batch x [ full-attention layers x n_tokens + sliding layers x min(n_tokens,
 *                 window) ] x (row bytes of K + of V), a row being n_kv_heads x head_dim
 *                 elements in the type's format: f32 4, fp16 2 bytes each; int8 1 byte each plus
 *                 an f32 scale per group of 32 (per head when head_dim is not a multiple of 32);
 *                 q8_0 / q4_0 / q4_1 / q5_0 / q5_1 34 / 18 / 20 / 22 / 24 bytes per 32;
 *                 turbo4 / turbo3 18 / 14 bytes per 32, the v_edge boundary layers' V at
 *                 fp16 (counted at the full context: an upper bound for a sliding one);
 *                 multi-head latent attention (kv_lora_rank set) caches one row of
 *                 kv_lora_rank + qk_rope_head_dim per layer and token, read as K and V: x bytes_k
 *   headroom      (weights + kv_total) x (factor - 1), factor = MLXCEL_HEADROOM_FACTOR (1.20);
 *                 a positive factor <= 1.0 turns the term off
 *   total         weights + kv_total + headroom (+ activations when known)
 *   budget        MLXCEL_MEMORY_LIMIT when set and non-zero, else MemAvailable
 * Values the estimator cannot know are reported as unknown (null in JSON), never guessed. */
#ifndef MXL_ENGINE_MEMORY_ESTIMATE_H
#define MXL_ENGINE_MEMORY_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "models/config.h"
#include "models/decoder.h"

/* The KV cache types by the CLI's names (models/decoder.h mxl_decoder_kv_type has the layouts). */
typedef enum mxl_kv_type {
    MXL_KV_FP16 = 0, /* fp16 / f16: 2 bytes */
    MXL_KV_INT8,     /* int8: 1 byte + an f32 scale per 32 (per head when head_dim is not a multiple of 32) */
    MXL_KV_F32,      /* f32 / fp32: 4 bytes */
    MXL_KV_Q8_0,     /* ggml block formats: bytes per 32 values 34, 18, 20, 22, 24 */
    MXL_KV_Q4_0,
    MXL_KV_Q4_1,
    MXL_KV_Q5_0,
    MXL_KV_Q5_1,
    MXL_KV_TURBO4,   /* TurboQuant: bytes per 32 values 18 (4-bit codes) and 14 (3-bit) */
    MXL_KV_TURBO3,
    MXL_KV_TYPE_COUNT
} mxl_kv_type;

/* The first and last COUNT attention layers keep V in fp16 under a TurboQuant V: the spec's
 * --turbo-boundary-v default, MLXCEL_KV_BOUNDARY_V_LAYERS when it is a count, else 2. */
int64_t mxl_kv_boundary_v_default(void);

typedef struct mxl_mem_inputs {
    int64_t max_tokens; /* context length to size the KV cache for */
    int64_t batch;      /* concurrent sequences */
    mxl_kv_type kv_k, kv_v;
    int64_t v_edge;     /* a TurboQuant V's fp16 boundary layers at each end (clamped to half) */
    int64_t k_last;     /* the last layers' K and V at fp16 where quantized (--kv-skip-last-layer) */
    int64_t group;      /* the int8 scale group (mxl_kv_flags_group); 0: the model's */
    double headroom_factor; /* already validated (see mxl_mem_headroom_factor_from_env) */
    uint64_t budget_bytes;  /* 0 = unknown */
    bool budget_from_limit; /* budget came from MLXCEL_MEMORY_LIMIT */
    /* the decoder's hyper-parameters (mxl_decoder_read_hparams), or NULL: the config alone. With
     * them, recurrent layers (hp->layer_kind) hold no KV but a fixed state per sequence. */
    const struct mxl_decoder_hparams *dec;
} mxl_mem_inputs;

typedef struct mxl_mem_estimate {
    uint64_t weights_bytes;
    bool has_kv;                 /* false for encoders (no KV cache) */
    uint64_t kv_bytes_per_token; /* all attention layers, one sequence */
    uint64_t kv_bytes_total;
    int64_t n_layers, n_full_layers, n_sliding_layers, sliding_window;
    int64_t n_kv_heads, head_dim;
    bool latent;                 /* one latent row per layer and token (K only), head_dim wide */
    int64_t n_state_layers;      /* recurrent layers (no KV; a fixed state per sequence) */
    uint64_t state_bytes_per_seq; /* their state, one sequence (f32) */
    uint64_t state_bytes_total;   /* ... times the batch */
    uint64_t headroom_bytes;
    uint64_t total_bytes;
    uint64_t budget_bytes; /* 0 = unknown */
    bool fits_known;
    bool fits;
} mxl_mem_estimate;

const char *mxl_kv_type_name(mxl_kv_type t);
/* Parses a --cache-type-k/-v value: f32 (fp32), fp16 (f16), q8_0, q4_0, q4_1, q5_0, q5_1, int8,
 * turbo4 (turbo4-delegated: our attention always reads the TurboQuant cache directly), turbo3.
 * bf16 is refused by name (MXL_ERR_UNSUPPORTED), anything else is MXL_ERR_ARG. */
mxl_status mxl_kv_type_parse(const char *s, mxl_kv_type *out, mxl_error *err);
/* Parses a K/V mode (--kv-cache-mode, and what --cache-type-k / -v accept): any type above for
 * both, or fp16+turbo4 / fp16+turbo3: keys fp16, values TurboQuant. */
mxl_status mxl_kv_mode_parse(const char *s, mxl_kv_type *k, mxl_kv_type *v, mxl_error *err);
/* The KV cache flags as users give them (generate / run / serve / inspect). */
typedef struct mxl_kv_flags {
    const char *mode; /* --kv-cache-mode (NULL: fp16 for both) */
    const char *k, *v;/* --cache-type-k / -v: override the mode's side (a mode name takes its own side:
                       * --cache-type-v fp16+turbo4 is turbo4) */
    int64_t v_edge;   /* --turbo-boundary-v; < 0: mxl_kv_boundary_v_default() */
    int64_t k_last;   /* --kv-skip-last-layer: the last layer's K and V stay fp16 where quantized (1) */
    int64_t group;    /* --kv-group-size: the int8 scale group (> 0: as given, it must divide the
                       * heads; -1: 64 where it divides them; 0: the model's, 32 or the head) */
} mxl_kv_flags;
/* The int8 scale group those flags give a model of hyper-parameters hp (0: the decoder's default). */
int64_t mxl_kv_flags_group(const mxl_kv_flags *f, const struct mxl_decoder_hparams *hp);
/* The K and V types and the boundary count of those flags; errors name the flag. */
mxl_status mxl_kv_flags_resolve(const mxl_kv_flags *f, mxl_kv_type *k, mxl_kv_type *v, int64_t *v_edge, mxl_error *err);
/* True for the block formats (q8_0 .. q5_1, turbo4, turbo3), which need heads of a multiple of 32. */
bool mxl_kv_type_is_block(mxl_kv_type t);
/* The decoder's storage type of that name (models/decoder.h). */
mxl_decoder_kv_type mxl_kv_type_decoder(mxl_kv_type t);
/* MLXCEL_HEADROOM_FACTOR: default 1.20; invalid or <= 0 -> default with a warning in *warning. */
double mxl_mem_headroom_factor_from_env(char *warning, size_t cap);
/* Parses "96GB", "512MB", "1.5GiB", "123456" (bytes). Returns nonzero when malformed. */
int mxl_mem_parse_bytes(const char *s, uint64_t *out);
/* MLXCEL_MEMORY_LIMIT if set and non-zero, else MemAvailable from /proc/meminfo (0 if unknown).
 * A malformed MLXCEL_MEMORY_LIMIT is an error. */
mxl_status mxl_mem_budget(uint64_t *out, bool *from_limit, mxl_error *err);
/* Does the arithmetic; `is_encoder` models have no KV cache. Fails on missing config fields
 * needed for the KV term (named) or on overflow. */
mxl_status mxl_mem_estimate_compute(const mxl_model_config *cfg, bool is_encoder,
                                    uint64_t weights_bytes, const mxl_mem_inputs *in,
                                    mxl_mem_estimate *out, mxl_error *err);

/* "weights W GiB + KV K GiB + headroom H GiB = T GiB" (3 decimals): the preflight lines of
 * generate --estimate-memory and serve. */
void mxl_mem_estimate_terms(const mxl_mem_estimate *e, char *out, size_t cap);

#endif
