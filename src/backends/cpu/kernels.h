/* kernels.h - the CPU kernel table: one struct of function pointers through which every CPU
 * kernel dispatch goes, in place of comparisons of ISA levels at each call site.
 *
 * The table is filled once, on first use: the plain C references register every entry
 * (kernels_ref.c), then each ISA level this CPU reaches - after MXL_CPU_ISA has capped the level
 * (cpu_features.h) - overrides the entries it implements, lowest level first (x86-64:
 * kernels_avx2.c, then kernels_avx512.c's AVX-512 VNNI and AMX levels; AArch64: kernels_neon.c's
 * NEON and NEON dot-product levels). A level that has no kernel of its own for an entry leaves the
 * one below it in place (at the AVX-512 level the KV-cache kernels are still AVX2's). A new ISA is
 * one registration file and one line in kernels.c's list of levels.
 *
 * A table is kept for every level up to the CPU's, so tests and the benchmark can run a level
 * below the CPU's on purpose (mxl_cpu_kern_at; the `_isa` entry points of matmul.h, attention.h,
 * ... take their level so). Callers look the table up once per operation (a matmul, an
 * attention, a norm) and keep the kernels they need: the dispatch sits where the level tests
 * were (per call, per row dot, per panel range), never per element.
 *
 * Entries marked (optional) are NULL where no registered level has that kernel (the caller then
 * takes its reference or its general path); the getters (by dtype or bits) may be NULL and, where
 * set, may return NULL for a format without a kernel. Every other entry is always set. */
#ifndef MXL_BACKENDS_CPU_KERNELS_H
#define MXL_BACKENDS_CPU_KERNELS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/activation.h"
#include "backends/cpu/attention.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/dense.h"
#include "backends/cpu/kv_quant.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/quant_mlx.h"
#include "core/threadpool.h"

/* The panel path's products (quant_amx.h) for panels [p0, p1): one signature for every form; abuf
 * (the pair form's operands) is NULL where the level has no pair form. */
typedef void (*mxl_qamx_panels_fn)(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act,
                                   size_t act_stride, int64_t n_tok, const uint8_t *abuf, float *y, int64_t ys);
/* MLX affine dots (quant_mlx.h): one row against one token / four tokens / a 4 x 4 micro-tile. */
typedef float (*mxl_mlx_dot_fn)(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq);
typedef void (*mxl_mlx_dot4_fn)(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq, size_t xstride,
                                float *out);
typedef void (*mxl_mlx_gemm4x4_fn)(const mxl_mlx_qweight *W, int64_t r0, int nrows, const void *xq, size_t xstride,
                                   int ntok, float *y, int64_t y_stride);
/* The grouped f16 attention passes (attention.h) */
typedef void (*mxl_attn_k_f16_fn)(const uint16_t *k, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo,
                                  int64_t hi, int G, const float *qh, int hd, float scale, float *s, int64_t ss);
typedef void (*mxl_attn_v_f16_fn)(const uint16_t *v, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo,
                                  int64_t hi, int G, const float *s, int64_t ss, int hd, float *o);
/* ... and for a ggml block-format K / V (kv->k_type / v_type: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) */
typedef void (*mxl_attn_k_q_fn)(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *qh,
                                int hd, float scale, float *s, int64_t ss);
typedef void (*mxl_attn_v_q_fn)(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *s,
                                int64_t ss, int hd, float *o);

typedef struct mxl_cpu_kernels {
    /* ---- element-wise and row ops (activation.h, norm.h, embed_topk.h, stream_read.h) ---- */
    void (*act)(mxl_act a, const float *x, int64_t n, float *y);
    void (*glu)(mxl_act a, const float *gate, const float *up, int64_t n, float *out);
    void (*rmsnorm)(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y);
    void (*layernorm)(const float *x, const float *w, const float *b, int64_t n, float eps, float *y);
    int64_t (*argmax)(const float *x, int64_t n);
    void (*logits_scan)(const float *x, int64_t n, bool *bad, bool *any);
    float (*read_sum)(const float *p, size_t n);
    /* y[n, N] += scale * x[n, K] Wt[K, N] for a small K (lowrank.h: LoRA's B) */
    void (*lowrank_acc)(const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N, float scale, float *y);

    /* ---- matmul (matmul.c): activation quantizers, per-format dots and micro-kernels ---- */
    void (*quant_q8a)(const float *x, mxl_block_q8a *y, int64_t n);
    void (*quant_q8k)(const float *x, mxl_block_q8k *y, int64_t n);
    void (*quant_q8a2)(const float *x, mxl_block_q8a2 *y, int64_t n); /* the panel path's */
    mxl_vec_dot_fn (*gguf_dot)(mxl_dtype t);                   /* (optional getter) 1 token */
    mxl_vec_dot4_fn (*gguf_dot4)(mxl_dtype t);                 /* (optional getter) 4 tokens */
    mxl_gemm4x4_fn (*gguf_gemm4x4)(mxl_dtype t);               /* (optional getter) 4 rows x 1..4 tokens */
    bool (*gguf_gemm4x4_pre)(mxl_dtype t, mxl_gemm4x4_unpack_fn *unpack, mxl_gemm4x4_pre_fn *kern); /* (optional) */
    mxl_dense_dot_fn (*dense_dot)(mxl_dtype t);                /* (optional getter) */
    mxl_dense_dot4_fn (*dense_dot4)(mxl_dtype t);              /* (optional getter) */
    mxl_dense_gemm4x4_fn (*dense_gemm4x4)(mxl_dtype t);        /* (optional getter) */
    mxl_mlx_dot_fn mlx_dot;
    mxl_mlx_dot4_fn mlx_dot4;                                  /* (optional) */
    mxl_mlx_gemm4x4_fn (*mlx_gemm4x4)(int bits);               /* (optional getter) */
    /* the panel path (quant_amx.h): runs where set; the pair form's operand bytes for W and n_tok
     * tokens (0: not for this W / count), where the level's panel kernel has that form */
    mxl_qamx_panels_fn qamx_panels;                            /* (optional) */
    size_t (*qamx_pair_bytes)(const mxl_weight *W, int64_t n_tok); /* (optional) */

    /* ---- attention (attention.c, attention_enc.c) and the KV cache (kv_quant.h) ---- */
    mxl_kv_kernels kv;
    mxl_dense_dot_fn attn_dot_f32;       /* (optional) f32 K dots; NULL: mxl_dense_dot_ref */
    mxl_attn_k_f16_fn attn_k_f16;        /* (optional) the grouped f16 K pass; with attn_v_f16 */
    mxl_attn_v_f16_fn attn_v_f16;        /* (optional) */
    mxl_attn_k_q_fn attn_k_q;            /* (optional) the grouped block-format K pass; with attn_v_q */
    mxl_attn_v_q_fn attn_v_q;            /* (optional) */
    bool attn_q_i8;                      /* attn_k_q / attn_v_q also read an int8 cache in scale
                                          * groups of 32 (AVX-512) */
    void (*attn_softmax)(float *x, int64_t n, float sink); /* (optional) the grouped passes' softmax
                                                            * without soft-cap; NULL: mxl_cpu_softmax */
    /* (optional) one (sequence, head) of encoder attention, head_dim a multiple of 16 */
    void (*enc_attn_head)(const float *q, const float *k, const float *v, float *out, int64_t stride, int64_t L,
                          int d, float scale, float *scratch);

    /* ---- encoder GEMM (gemm_f32.h) ---- */
    /* (optional) the register-blocked FMA GEMM's panel kernel (gemm_f32.c) */
    void (*gemm_f32_panel)(const float *x, int64_t M, int64_t K, const float *bp, const float *bias_p, int act,
                           float *y, int64_t ldy, int ncols);
    /* (optional) the tile GEMM for weights given the AMX layout */
    void (*gemm_f32_amx)(const mxl_weight *W, const float *x, int64_t M, const float *bias, int act, float *y,
                         void *scratch, mxl_threadpool *pool);

    /* ---- facts, not kernels (after every function pointer: mxl_cpu_kern_origin reads those) ---- */
    mxl_cpu_isa level; /* the level this table was built for */
    bool qamx_tiles;   /* the panel path may use the AMX-INT8 tile unit (quant_amx.h) */
} mxl_cpu_kernels;

/* The registration functions, one per level (kernels_<isa>.c): each overrides the entries its
 * level implements and leaves the others as the levels below set them. */
void mxl_cpu_kernels_register_ref(mxl_cpu_kernels *k);
void mxl_cpu_kernels_register_avx2(mxl_cpu_kernels *k);
void mxl_cpu_kernels_register_avx512(mxl_cpu_kernels *k);
void mxl_cpu_kernels_register_amx(mxl_cpu_kernels *k);
void mxl_cpu_kernels_register_neon(mxl_cpu_kernels *k);
void mxl_cpu_kernels_register_neon_dotprod(mxl_cpu_kernels *k);

/* Builds the tables (once, thread-safe) and returns the active one (internal to mxl_cpu_kern). */
const mxl_cpu_kernels *mxl_cpu_kern_init(void);
extern _Atomic(const mxl_cpu_kernels *) mxl_cpu_kern_active;

/* The table of the CPU's level (mxl_cpu_isa_detect(), MXL_CPU_ISA applied). One acquire load
 * once the tables exist. */
static inline const mxl_cpu_kernels *mxl_cpu_kern(void) {
    const mxl_cpu_kernels *k = atomic_load_explicit(&mxl_cpu_kern_active, memory_order_acquire);
    return k ? k : mxl_cpu_kern_init();
}
/* The table of level isa, capped at the CPU's (a level above it, or one of the other
 * architecture, gives the CPU's table, as the `_isa` entry points always capped). */
const mxl_cpu_kernels *mxl_cpu_kern_at(mxl_cpu_isa isa);
/* Which level's registration set the active table's function-pointer entry at byte offset
 * `offset` (MXL_CPU_KERN_ORIGIN(entry) gives it by name): the lowest level whose entry equals the
 * active one with no change above it. For the benchmark, which names levels. */
mxl_cpu_isa mxl_cpu_kern_origin(size_t offset);
#define MXL_CPU_KERN_ORIGIN(entry) mxl_cpu_kern_origin(offsetof(mxl_cpu_kernels, entry))

#endif
