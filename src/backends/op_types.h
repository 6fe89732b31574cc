/* op_types.h - the parameter types of the backend operations (backend.h): activations, RoPE
 * configurations, attention parameters and the KV-cache views. Backend-neutral: the model code
 * fills these, every backend reads them.
 *
 * Activations: SiLU(x) = x * sigmoid(x); GELU erf: 0.5 x (1 + erf(x/sqrt2)); GELU tanh (HF
 * gelu_pytorch_tanh): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); ReLU^2: max(x,0)^2.
 * SwiGLU: out = SiLU(gate) * up; GeGLU: out = GELU(gate) * up.
 *
 * RoPE (RoFormer; scaling variants as transformers' modeling_rope_utils.py computes them):
 * inv_freq[i] = 1 / theta^(2i / rotary_dim), i < rotary_dim/2, rescaled per `scaling`
 * (backends/cpu/rope.h spells each out); NEOX style rotates pairs (i, i + rot/2), GPTJ pairs
 * (2i, 2i+1); only the first rotary_dim elements rotate.
 *
 * Attention: q [n_q, n_heads, head_dim] (RoPE'd, not pre-scaled); the cache holds positions
 * 0..n_kv-1; query head h reads KV head h / (n_heads/n_kv_heads); query token i at q_pos[i] sees
 * key j when j <= q_pos[i] (causal) and q_pos[i] - j < window (window > 0). */
#ifndef MXL_BACKENDS_OP_TYPES_H
#define MXL_BACKENDS_OP_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"

typedef enum mxl_act {
    MXL_ACT_SILU = 0,
    MXL_ACT_GELU_ERF,
    MXL_ACT_GELU_TANH,
    MXL_ACT_RELU2,
    MXL_ACT_RELU,
} mxl_act;

/* The epilogue's activation: MXL_GEMM_ACT_NONE or an mxl_act value. */
#define MXL_GEMM_ACT_NONE (-1)

typedef enum mxl_rope_style { MXL_ROPE_NEOX = 0, MXL_ROPE_GPTJ } mxl_rope_style;
typedef enum mxl_rope_scaling {
    MXL_ROPE_SCALING_NONE = 0,
    MXL_ROPE_SCALING_LINEAR,
    MXL_ROPE_SCALING_DYNAMIC,
    MXL_ROPE_SCALING_LLAMA3,
    MXL_ROPE_SCALING_YARN,
    MXL_ROPE_SCALING_LONGROPE, /* Phi-3 / MiniCPM3: per-dimension divisors, long or short by context */
} mxl_rope_scaling;

typedef struct mxl_rope_cfg {
    int head_dim;
    int rotary_dim; /* even, <= head_dim (head_dim * partial_rotary_factor) */
    double theta;
    mxl_rope_style style;
    mxl_rope_scaling scaling;
    double factor;
    double original_max_pos;   /* LLAMA3 / YARN original context; DYNAMIC max_position_embeddings */
    double low_freq_factor;    /* LLAMA3 */
    double high_freq_factor;   /* LLAMA3 */
    double beta_fast, beta_slow; /* YARN (0 = defaults 32 and 1) */
    double mscale, mscale_all_dim; /* YARN (0 = unset) */
    double attention_factor;   /* YARN, LONGROPE (0 = derived: LONGROPE's sqrt(1 + ln factor /
                                * ln original_max_pos), 1 when factor <= 1) */
    int yarn_no_truncate;      /* YARN: 1 = do not floor/ceil the correction range */
    /* Per-dimension frequency divisors [rotary_dim/2] or NULL: inv_freq[i] is divided by
     * freq_factors[i] before the scaling above (llama.cpp's rope_freqs.weight, ggml_rope_ext's
     * freq_factors: how Llama 3.1-style GGUFs carry the llama3 rescaling). Not owned. */
    const float *freq_factors;
    /* LONGROPE [rotary_dim/2] each (not owned): inv_freq[i] is divided by long_factors[i] when the
     * context (seq_len of mxl_rope_freqs) exceeds original_max_pos, else by short_factors[i] (as
     * llama.cpp chooses; transformers switches per forward call at the same length). */
    const float *long_factors, *short_factors;
    double attention_factor_long; /* LONGROPE: the attention factor with the long factors (PhiMoE's
                                   * long_mscale; 0 = attention_factor) */
    double attn_mul;           /* extra cos/sin scale on top of *attn_factor (GGUF
                                * rope.scaling.attn_factor); 0 = 1 */
    int inverse;               /* 1: rotate by -angle (nanochat's rotate_half is cat(x2, -x1)):
                                * the table holds -sin */
} mxl_rope_cfg;

/* Fills inv_freq[rotary_dim/2] and *attn_factor (1 except YARN, times attn_mul when set) for
 * sequences of seq_len tokens (only DYNAMIC depends on it). */
void mxl_rope_freqs(const mxl_rope_cfg *c, int64_t seq_len, float *inv_freq, float *attn_factor);

typedef struct mxl_attn_params {
    int n_heads, n_kv_heads, head_dim;
    float scale;         /* usually 1/sqrt(head_dim) */
    float softcap;       /* <= 0: none */
    const float *sinks;  /* [n_heads] sink logits, or NULL */
    int64_t window;      /* sliding window in positions, 0 = none */
    int causal;          /* 0 = attend to the whole cache (encoders; with a window: |q - k| < window) */
    int head_dim_v;      /* width of a V head and of an output head (0: head_dim); V rows hold
                          * n_kv_heads heads of it. Multi-head latent attention reads its V as
                          * the last head_dim_v elements of each K row (models/mla.h) */
    int64_t chunk;       /* > 0: chunked attention (Llama 4): a query at position p sees only the
                          * positions of its own chunk, from p - p % chunk (with the window and
                          * causality); 0 = none */
    const int64_t *q_end; /* [n_q] or NULL: with causal, query t also sees the positions before
                           * q_end[t] (> its own: a bidirectional block, such as an image's
                           * tokens, whose keys are all in the cache); the window still bounds
                           * from below */
} mxl_attn_params;

typedef struct mxl_kv_view {
    mxl_dtype dtype;     /* F32 or F16 */
    const void *k, *v;
    int64_t n_kv;
    int64_t row_stride;  /* elements between positions */
} mxl_kv_view;

/* A paged cache (the decoder's KV block pool, models/kv_pool.h): positions live in blocks of
 * block_size consecutive positions; position j is row j % block_size of block
 * blocks[j / block_size], whose rows start at element blocks[..] * block_stride of k / v (its
 * scales at that / group of k_scale / v_scale, I8 only: block_stride a multiple of group). Rows of
 * a block are row_stride elements apart, as in mxl_kv_split_view. A split view is the paged view
 * of one block holding every position (block table {0}). */
/* K and V types: F32, F16, I8 (with k_scale / v_scale), a ggml block format (Q8_0, Q4_0, Q4_1,
 * Q5_0, Q5_1: 32 elements in one block of 34 / 18 / 20 / 22 / 24 bytes, backends/cpu/kv_quant.h)
 * or a TurboQuant block (TURBO4, TURBO3: 18 / 14 bytes; the cache holds rotated vectors, so the
 * caller rotates the queries for a TurboQuant K and rotates the outputs back for a TurboQuant V,
 * the backend's kv_rotate).
 * Offsets stay in elements whatever the type (for the block formats every row, head and block
 * offset is a multiple of 32): element e of a cache of type t starts mxl_kv_offset_bytes(t, e)
 * bytes in. */
typedef struct mxl_kv_paged_view {
    mxl_dtype k_type, v_type;
    const void *k, *v;
    const float *k_scale, *v_scale; /* I8 only, else NULL */
    int64_t group;                  /* I8 only, else 0 */
    int64_t n_kv;
    int64_t row_stride;             /* elements between positions of a block */
    int64_t block_size;             /* positions per block (> 0) */
    int64_t block_stride;           /* elements between block ids b and b + 1 */
    const int32_t *blocks;          /* [ceil(n_kv / block_size)] block ids */
    int64_t v_block_stride;         /* ... for V when its storage differs (a KV pool's V region,
                                     * models/kv_pool.h); 0: block_stride */
} mxl_kv_paged_view;

/* The longest chunk of TurboQuant's rotation (the backend's kv_rotate). */
#define MXL_KV_ROTATE_MAX_CHUNK 256

/* Bytes before element e (a multiple of 32 for the block formats) of a KV cache of type t. */
static inline size_t mxl_kv_offset_bytes(mxl_dtype t, int64_t e) {
    switch (t) {
    case MXL_DTYPE_F32: return (size_t)e * 4;
    case MXL_DTYPE_F16: return (size_t)e * 2;
    case MXL_DTYPE_Q8_0: return (size_t)(e / 32) * 34;
    case MXL_DTYPE_Q4_0: return (size_t)(e / 32) * 18;
    case MXL_DTYPE_Q4_1: return (size_t)(e / 32) * 20;
    case MXL_DTYPE_Q5_0: return (size_t)(e / 32) * 22;
    case MXL_DTYPE_Q5_1: return (size_t)(e / 32) * 24;
    case MXL_DTYPE_TURBO4: return (size_t)(e / 32) * 18;
    case MXL_DTYPE_TURBO3: return (size_t)(e / 32) * 14;
    default: return (size_t)e; /* I8 */
    }
}

typedef struct mxl_enc_attn {
    const float *q, *k, *v;
    float *out;
    int64_t stride;            /* floats between tokens */
    const int64_t *seq_start;  /* [n_seqs + 1] */
    int64_t n_seqs;
    int n_heads, head_dim;
    float scale;
} mxl_enc_attn;

#endif
