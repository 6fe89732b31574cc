/* attention.h - grouped-query attention over a KV cache (f32, f16, grouped int8 or a ggml block
 * format - q8_0, q4_0, q4_1, q5_0, q5_1; K and V may differ, see mxl_cpu_attention_kv and
 * backends/cpu/kv_quant.h), for one query token
 * (decode) or a block of query tokens (prefill), with causal and sliding-window masks, optional
 * logit soft-cap (Gemma 2) and per-head attention sinks (gpt-oss).
 *
 * Shapes: q [n_q, n_heads, head_dim] (already RoPE'd and not pre-scaled); the cache holds
 * positions 0..n_kv-1, K and V each [n_kv, row_stride] with head h's vector at
 * h*head_dim (row_stride >= n_kv_heads*head_dim); query head h reads KV head
 * h / (n_heads/n_kv_heads). Query token i sits at position q_pos[i]; it sees key position j when
 * j <= q_pos[i] (causal) and q_pos[i] - j < window (window > 0); without causality a window is
 * symmetric, |q_pos[i] - j| < window (a bidirectional model's sliding layers). out [n_q, n_heads,
 * head_dim].
 * Per (token, head): s_j = scale * q.k_j, soft-capped, masked, softmax with the sink logit in the
 * denominator, out = sum_j p_j v_j. (query, head) pairs are split over the pool's threads (with
 * tune.h's paged-decode-splits set, a decode query's visible keys too); the
 * caller gives scratch of mxl_cpu_attention_scratch_floats() floats. The cache may also be paged
 * (mxl_kv_paged_view: fixed-size blocks found through a block table). */
#ifndef MXL_BACKENDS_CPU_ATTENTION_H
#define MXL_BACKENDS_CPU_ATTENTION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/cpu_features.h"
#include "backends/op_types.h"
#include "core/dtype.h"
#include "core/threadpool.h"


/* A cache whose K and V have their own storage types: F32, F16, I8 (int8 in groups of
 * `group` elements with one f32 scale per group, kv_quant.h) or a ggml block format (Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1; offsets in elements, op_types.h mxl_kv_offset_bytes). For I8, the scales of position j
 * start at k_scale / v_scale + j * (row_stride / group), head h's at h * head_dim / group after
 * that: row_stride and head_dim must be multiples of group. */
typedef struct mxl_kv_split_view {
    mxl_dtype k_type, v_type;
    const void *k, *v;
    const float *k_scale, *v_scale; /* I8 only, else NULL */
    int64_t group;                  /* I8 only, else 0 */
    int64_t n_kv;
    int64_t row_stride;             /* elements between positions */
} mxl_kv_split_view;


size_t mxl_cpu_attention_scratch_floats(int64_t n_kv, int n_threads);
/* isa (capped at the CPU's) picks the kernel table (kernels.h); at the scalar level every dot and
 * V accumulation runs through the plain C references. */
void mxl_cpu_attention(const mxl_attn_params *p, const float *q, int64_t n_q,
                       const int64_t *q_pos, const mxl_kv_view *kv, float *out, float *scratch,
                       mxl_threadpool *pool, mxl_cpu_isa isa);
void mxl_cpu_attention_kv(const mxl_attn_params *p, const float *q, int64_t n_q,
                          const int64_t *q_pos, const mxl_kv_split_view *kv, float *out,
                          float *scratch, mxl_threadpool *pool, mxl_cpu_isa isa);
/* The same attention through a block table: every (token, head) reads its visible keys in
 * position order, so the result is bit for bit that of a contiguous cache holding the same rows. */
void mxl_cpu_attention_paged(const mxl_attn_params *p, const float *q, int64_t n_q,
                             const int64_t *q_pos, const mxl_kv_paged_view *kv, float *out,
                             float *scratch, mxl_threadpool *pool, mxl_cpu_isa isa);

/* Internal (attention.c / attention_avx512.c), for G (1..MXL_ATTN_HEAD_GROUP) consecutive query
 * heads that read the same KV head (queries qh + g * hd, score rows s + g * ss, outputs
 * o + g * hd), f16 K / V with the head's offset hoff in each row, hd a multiple of 16:
 * s[g * ss + j] = scale * q_g . K_j for the visible keys j in [lo, hi); o_g = sum over the
 * visible keys of s[g * ss + j] * V_j. Each head's result is the same bits for every G. */
#define MXL_ATTN_HEAD_GROUP 4 /* the most; tune.h's attn-head-group may set fewer */
/* Split-K decode (tune.h: paged-decode-splits) runs only for pooled calls of at most this many
 * query tokens (a decode step or a speculative verify block). */
#define MXL_ATTN_SPLIT_MAX_Q 4
/* Floats of the scratch (for more than one thread) beyond the unsplit pass's rows: the split
 * parts' results (attention.c, split_fits). 256 KiB. */
#define MXL_ATTN_SPLIT_RESERVE 65536
/* Calls that took the split path (where the scratch had room for it), for the tests. */
extern _Atomic long mxl_cpu_attention_split_calls;
/* softmax of x[0..n) (finite) with the sink logit (-inf: none) in the denominator, no soft-cap */
void mxl_attn_softmax_avx512(float *x, int64_t n, float sink);
void mxl_attn_k_f16_avx512(const uint16_t *k, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                           int G, const float *qh, int hd, float scale, float *s, int64_t ss);
void mxl_attn_v_f16_avx512(const uint16_t *v, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                           int G, const float *s, int64_t ss, int hd, float *o);
/* The same passes on AVX2 (attention_avx2.c), bit for bit the per-head AVX2 kernels of
 * kv_quant.c: a score is scale x the f16 dot's two 8-lane chains summed (mxl_hsum8_avx2), the
 * output the axpy's fma chain from 0 (the softmax between them is mxl_cpu_softmax's). */
void mxl_attn_k_f16_avx2(const uint16_t *k, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G,
                         const float *qh, int hd, float scale, float *s, int64_t ss);
void mxl_attn_v_f16_avx2(const uint16_t *v, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G,
                         const float *s, int64_t ss, int hd, float *o);

/* The same passes for a ggml block-format K or V (kv->k_type / kv->v_type: Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1; hd a multiple of 32) on AVX-512: each key's blocks dequantized once per group into 16-lane
 * vectors (kv_quant.h's values; Q4_1 / Q5_1 within a rounding, d code + m in one FMA), then the
 * f16 passes' FMA chains. Equal to the per-head kernels within float rounding; each head's result
 * is the same bits for every G. */
void mxl_attn_k_q_avx512(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *qh, int hd,
                         float scale, float *s, int64_t ss);
void mxl_attn_v_q_avx512(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *s, int64_t ss,
                         int hd, float *o);

/* ... and on AVX2 (attention_avx2.c), bit for bit the per-head AVX2 kernels of kv_quant.c (the
 * same block decoder, kv_quant_avx2.h, and the same FMA chains). */
void mxl_attn_k_q_avx2(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *qh, int hd,
                       float scale, float *s, int64_t ss);
void mxl_attn_v_q_avx2(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *s, int64_t ss,
                       int hd, float *o);

/* For the block whose first position is b0: its row 0's element offset minus b0 * row_stride, so
 * that position j of the block is at that + j * row_stride (every pass of attention.c,
 * attention_avx2.c and attention_avx512.c walks the cache so). */
static inline int64_t mxl_attn_block_base(const mxl_kv_paged_view *kv, int64_t b0) {
    return (int64_t)kv->blocks[b0 / kv->block_size] * kv->block_stride - b0 * kv->row_stride;
}

/* Into the cache ahead of a pass: n halves at element offset off of position jp's row (any
 * block). The KV cache is read once per step, after the weights have pushed it out of the
 * caches; without this the K and V passes waited on it (at 500 positions, most of an
 * 8-sequence step's attention time). always_inline: GCC deletes a call it does not inline to a
 * function whose only effect is a prefetch (quant_amx.c's prefetch_ahead). */
#define MXL_ATTN_PF_KEYS 16 /* positions ahead */
__attribute__((always_inline)) static inline void mxl_attn_prefetch_row(const uint16_t *base, const mxl_kv_paged_view *kv,
                                                                         int64_t jp, int64_t off, int n) {
    const uint16_t *p = base + (int64_t)kv->blocks[jp / kv->block_size] * kv->block_stride + (jp % kv->block_size) * kv->row_stride + off;
    for (int o = 0; o < n; o += 32) __builtin_prefetch(p + o, 0, 3);
}
/* The same for a block-format cache (bb bytes per block of 32): the bytes of element offset e (a
 * multiple of 32), and a prefetch of the n elements (a multiple of 32) at element offset off of
 * position jp's row. */
static inline const uint8_t *mxl_attn_qrow(const void *base, int bb, int64_t e) {
    return (const uint8_t *)base + (size_t)(e / 32) * (size_t)bb;
}
__attribute__((always_inline)) static inline void mxl_attn_prefetch_qrow(const void *base, int bb, const mxl_kv_paged_view *kv,
                                                                          int64_t jp, int64_t off, int n) {
    const uint8_t *p =
        mxl_attn_qrow(base, bb, (int64_t)kv->blocks[jp / kv->block_size] * kv->block_stride + (jp % kv->block_size) * kv->row_stride + off);
    for (int o = 0; o < n / 32 * bb; o += 64) __builtin_prefetch(p + o, 0, 3);
}
#endif
