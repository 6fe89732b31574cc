/* backend.h - the backend interface: what the model code (models/, engine/) asks of a device.
 *
 * A backend is an ops table behind an opaque handle, in the spirit of ggml's backend interface.
 * The model code holds weights in their stored form (weight.h) and asks the backend to prepare
 * them once at load (a layout of its own in W->prepared, which only the backend reads), then
 * runs the forward pass through the ops below: matmuls (one weight, several weights sharing an
 * input, and the dense GEMM with a fused bias and activation), attention over a contiguous or a
 * paged KV cache and over packed encoder sequences, norms, RoPE, activations and GLU, embedding
 * rows, the logits scan / argmax, the KV cache's block storage and its codecs. Scratch memory is sized by the
 * backend and supplied by the caller, so the decode path allocates nothing.
 *
 * Every op is synchronous on the host today (the CPU backends); `synchronize` is the point where
 * a device backend would wait for its queue. Activations live in host memory (float *): a device
 * backend would own its buffers behind the same calls.
 *
 * The backends compiled into the binary are listed in backend.c (one registration line each; a
 * backend is one folder, backends/<name>/, plus that line):
 *   "cpu"      the CPU kernels at the CPU's level (MXL_CPU_ISA caps it): quantized activations,
 *              the panel layouts, batch-invariant matmuls (backends/cpu/matmul.h);
 *   "cpu-ref"  the engine's f32 reference path (MXL_DECODER_REFERENCE=1): every matmul
 *              dequantizes its weight and multiplies in f32, activations and GLU are the plain
 *              scalar forms; its other ops are the "cpu" ones. It reads only the stored form, so
 *              it runs weights prepared for "cpu".
 * tests/unit/test_backend_ops.c checks every op of every registered backend against the CPU
 * scalar references. */
#ifndef MXL_BACKENDS_BACKEND_H
#define MXL_BACKENDS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/op_types.h"
#include "backends/weight.h"
#include "core/arena.h"
#include "core/status.h"
#include "core/threadpool.h"

typedef struct mxl_backend mxl_backend;

/* What a weight is prepared for: the layouts differ. */
typedef enum mxl_weight_use {
    MXL_WEIGHT_USE_MATMUL = 0, /* matmul / matmul_multi (decoders; quantized and dense) */
    MXL_WEIGHT_USE_GEMM,       /* gemm_bias_act (encoders' dense f32 layers) */
} mxl_weight_use;

/* Makes rows [t0, t1) of a matmul's input x (an RMSNorm, a GLU) just before they are used, on
 * the thread that then quantizes them: a decode batch's per-row work then runs split over the
 * pool inside the matmul's dispatch. Every row is made exactly once, before any product reads
 * it; a backend that cannot fuse calls fn(ctx, 0, n_tok) first. */
typedef struct mxl_row_prep {
    void (*fn)(void *ctx, int64_t t0, int64_t t1);
    void *ctx;
} mxl_row_prep;

/* Work beside a product of the same input: fn(ctx, part) runs once for each part in [0, n_parts)
 * (independent of each other, any order, each on one thread of the product's dispatch) after every
 * row of x is made, while the other threads run the product; it may read x and must write none of
 * the y (the decoder's LoRA deltas, models/lora.h). A backend that cannot overlap it runs the parts
 * after the product. */
typedef struct mxl_side_task {
    void (*fn)(void *ctx, int part);
    void *ctx;
    int n_parts;
} mxl_side_task;

/* Shapes: x [n_tok, W.cols], y [n_tok, W.rows], all f32 row-major, host memory. `pool` splits
 * the work over its threads (NULL: the caller's thread). */
typedef struct mxl_backend_ops {
    /* ---- the device ---- */
    bool (*available)(const mxl_backend *be); /* its device is present on this machine */
    void (*synchronize)(const mxl_backend *be);

    /* ---- weights ---- */
    /* Bytes weight_prepare takes from its arena for W (0: W keeps its stored form). */
    size_t (*weight_prepared_bytes)(const mxl_backend *be, const mxl_weight *W, mxl_weight_use use);
    /* Makes W->prepared (memory from arena) where the backend has a layout for W and `use`;
     * leaves it NULL otherwise. The stored bytes stay valid and may still be read. */
    mxl_status (*weight_prepare)(const mxl_backend *be, mxl_weight *W, mxl_weight_use use, mxl_arena *arena,
                                 mxl_error *err);

    /* ---- matmul ---- */
    /* Scratch bytes matmul / matmul_multi need for W and n_tok tokens. */
    size_t (*matmul_scratch_bytes)(const mxl_backend *be, const mxl_weight *W, int64_t n_tok);
    /* y[t][r] = sum_c W[r][c] * x[t][c] after prep (NULL: none) has made x's rows. */
    void (*matmul)(const mxl_backend *be, const mxl_weight *W, const mxl_row_prep *prep, const float *x,
                   int64_t n_tok, float *y, void *scratch, mxl_threadpool *pool);
    /* y[i] = W[i] x for n_w (1..8) weights of the same cols and the same x (Q/K/V, gate/up):
     * each y[i] bitwise what matmul gives; side (NULL: none) runs beside them. scratch: the
     * largest matmul_scratch_bytes. */
    void (*matmul_multi)(const mxl_backend *be, const mxl_weight *const *W, int n_w, const mxl_row_prep *prep,
                         const mxl_side_task *side, const float *x, int64_t n_tok, float *const *y, void *scratch,
                         mxl_threadpool *pool);
    /* Scratch bytes gemm_bias_act needs (0 where it has no path for W and n_tok); n_threads the
     * pool's thread count. */
    size_t (*gemm_scratch_bytes)(const mxl_backend *be, const mxl_weight *W, int64_t n_tok, int n_threads);
    /* y = act(x W^T + bias) (act: MXL_GEMM_ACT_NONE or an mxl_act; bias may be NULL) where the
     * backend has a dense GEMM for W and n_tok; returns false without touching y otherwise (the
     * caller then runs matmul, the bias and act). */
    bool (*gemm_bias_act)(const mxl_backend *be, const mxl_weight *W, const float *x, int64_t n_tok,
                          const float *bias, int act, float *y, void *scratch, mxl_threadpool *pool);

    /* ---- attention (op_types.h: mxl_attn_params and the KV views) ---- */
    /* Scratch floats attention / attention_paged need for up to n_kv positions. */
    size_t (*attention_scratch_floats)(const mxl_backend *be, int64_t n_kv, int n_threads);
    /* out [n_q, n_heads, head_dim] for q [n_q, n_heads, head_dim] at positions q_pos against a
     * contiguous f32 / f16 cache. */
    void (*attention)(const mxl_backend *be, const mxl_attn_params *p, const float *q, int64_t n_q,
                      const int64_t *q_pos, const mxl_kv_view *kv, float *out, float *scratch, mxl_threadpool *pool);
    /* The same against a paged cache (f32, f16 or grouped int8 blocks): a prefill span or a
     * batched decode row. */
    void (*attention_paged)(const mxl_backend *be, const mxl_attn_params *p, const float *q, int64_t n_q,
                            const int64_t *q_pos, const mxl_kv_paged_view *kv, float *out, float *scratch,
                            mxl_threadpool *pool);
    /* Bidirectional attention over packed encoder sequences (mxl_enc_attn) where the backend has
     * a path for head_dim; false otherwise (the caller runs `attention` per sequence). scratch:
     * varlen_scratch_floats per pool thread. */
    size_t (*varlen_scratch_floats)(const mxl_backend *be, int64_t longest, int head_dim);
    bool (*attention_varlen)(const mxl_backend *be, const mxl_enc_attn *a, float *scratch, mxl_threadpool *pool);

    /* ---- row ops (one row of n; y may be x) ---- */
    /* y = x / rms(x) * (w or 1 + w) */
    void (*rmsnorm)(const mxl_backend *be, const float *x, const float *w, int64_t n, float eps, int plus_one,
                    float *y);
    /* y = (x - mean) / std * w + b (b may be NULL) */
    void (*layernorm)(const mxl_backend *be, const float *x, const float *w, const float *b, int64_t n, float eps,
                      float *y);
    void (*act)(const mxl_backend *be, mxl_act a, const float *x, int64_t n, float *y);
    /* out = act(gate) * up */
    void (*glu)(const mxl_backend *be, mxl_act a, const float *gate, const float *up, int64_t n, float *out);
    /* GPT-OSS's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
     * out = (u + 1) * g * sigmoid(alpha * g); out may alias gate. */
    void (*swiglu_oai)(const mxl_backend *be, const float *gate, const float *up, int64_t n, float alpha, float limit, float *out);
    /* x = cap * tanh(x / cap) */
    void (*softcap)(const mxl_backend *be, float *x, int64_t n, float cap);
    /* cs[rotary_dim] = position pos's cosines then sines (times attn_factor) */
    void (*rope_table)(const mxl_backend *be, const mxl_rope_cfg *c, const float *inv_freq, float attn_factor,
                       int64_t pos, float *cs);
    /* rotates n_heads heads [n_heads, head_dim] in place with a table from rope_table */
    void (*rope_apply_table)(const mxl_backend *be, const mxl_rope_cfg *c, const float *cs, float *x, int n_heads);

    /* ---- embedding rows and logits ---- */
    /* out[i] = scale * row ids[i] of table (any stored format), i < n; an id outside the table
     * is refused. */
    mxl_status (*embed)(const mxl_backend *be, const mxl_weight *table, const int32_t *ids, int64_t n, float scale,
                        float *out, mxl_error *err);
    /* index of the largest of x[0..n) (the first on ties; NaN never wins) */
    /* y[n, N] += scale * x[n, K] Wt for Wt [K, N] (F32, F16 or BF16) with a small K (a LoRA
     * adapter's B^T) */
    void (*lowrank_acc)(const mxl_backend *be, const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N,
                        float scale, float *y);
    int64_t (*argmax)(const mxl_backend *be, const float *x, int64_t n);
    /* *bad: some x is NaN or +-Inf; *any: some x is finite */
    void (*logits_scan)(const mxl_backend *be, const float *x, int64_t n, bool *bad, bool *any);

    /* ---- memory the ops read and write: the KV cache's block storage ---- */
    /* bytes of it, 64-byte aligned, or NULL when out of memory */
    void *(*buffer_alloc)(const mxl_backend *be, size_t bytes);
    void (*buffer_free)(const mxl_backend *be, void *buf); /* NULL is ignored */
    /* copies bytes within the backend's memory: its buffers and the activations its ops read
     * and write (a KV row appended, a block copied on write) */
    void (*buffer_copy)(const mxl_backend *be, void *dst, const void *src, size_t bytes);

    /* ---- KV-cache storage codecs (one row of n elements) ---- */
    void (*kv_store_f16)(const mxl_backend *be, const float *x, int64_t n, uint16_t *h);
    /* int8 codes with one f32 scale max|x|/127 per group (n a multiple of group) */
    void (*kv_quantize_i8)(const mxl_backend *be, const float *x, int64_t n, int64_t group, int8_t *q,
                           float *scales);
    void (*kv_dequantize_i8)(const mxl_backend *be, const int8_t *q, const float *scales, int64_t n, int64_t group,
                             float *x);
    /* a ggml block format (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1; n a multiple of 32): the bytes of ggml's
     * quantize_row_<t>_ref, read back as its dequantize_row_<t> (backends/cpu/kv_quant.h); or a
     * TurboQuant block (TURBO4, TURBO3) of values already rotated (kv_rotate) */
    void (*kv_quantize_blocks)(const mxl_backend *be, mxl_dtype t, const float *x, int64_t n, void *blocks);
    void (*kv_dequantize_blocks)(const mxl_backend *be, mxl_dtype t, const void *blocks, int64_t n, float *x);
    /* TurboQuant's rotation of x[n] in place (n a multiple of chunk, a power of two <= 256): the
     * randomized Hadamard transform of backends/cpu/kv_turbo.h, or its inverse */
    void (*kv_rotate)(const mxl_backend *be, float *x, int64_t n, int64_t chunk, bool inverse);

    /* ---- run-time tuning (`mlxcel tune`, engine/autotune.h) ---- */
    /* The machine tuned values belong to: the processor's model name into cpu[cap] and the
     * kernel level's short name (static). */
    void (*tune_machine)(const mxl_backend *be, char *cpu, size_t cap, const char **isa);
    /* Sets the knob named op (the backend's `--op` names) for attention shape (head_dim, q_heads,
     * kv_heads) from context ctx on, process-wide; false (nothing set) for an unknown op or a
     * value it does not accept. reset puts every knob back to its default. */
    bool (*tune_set)(const mxl_backend *be, const char *op, int head_dim, int q_heads, int kv_heads, int64_t ctx,
                     int value);
    void (*tune_reset)(const mxl_backend *be);
    /* whether tune_set would take op and value (for any valid shape) */
    bool (*tune_valid)(const mxl_backend *be, const char *op, int value);
} mxl_backend_ops;

struct mxl_backend {
    const char *name;        /* "cpu", "cpu-ref" */
    const char *description; /* one line: the device and its level */
    const mxl_backend_ops *ops;
    const void *ctx;         /* the backend's own */
};

/* The registered backends, in registration order (backend.c); n is small. */
int mxl_backend_count(void);
const mxl_backend *mxl_backend_at(int i);
/* By name, or NULL. */
const mxl_backend *mxl_backend_get(const char *name);
/* The backend of host arrays ("cpu"): the sampler's logits, the encoders' pooling. */
const mxl_backend *mxl_backend_host(void);
/* The f32 reference path ("cpu-ref"). */
const mxl_backend *mxl_backend_reference(void);

#endif
