/* mla.h - multi-head latent attention (DeepSeek V2 / V3, GLM-4.7-Flash, Mistral 4, Youtu): the
 * decoder's attention for layers with an mxl_mla_layer (decoder.h: hparams mla_*).
 *
 * transformers computes, for rows h [n, hidden] and heads of nope (dn) + rope (dr) dims:
 *   q      = q_b(rmsnorm(q_a(h))) or q_proj(h)              [n, heads, dn + dr]  (q_nope, q_pe)
 *   c, kr  = kv_a(h)                                         [n, R], [n, dr]
 *   c      = rmsnorm(c; kv_a_norm)                           the latent
 *   k_nope, v = kv_b(c) split per head                       [n, heads, dn], [n, heads, dv]
 *   scores = (q_nope . k_nope + rope(q_pe) . rope(kr)) * scale,  out = softmax(scores) v, then o_proj
 * The cache keeps only [rope(kr); c] per position (dr + R, not heads * (dn + dr + dv)), and the
 * key and value maps of kv_b are absorbed into the query and the output (the same sums in
 * another order):
 *   q_nope . (W_uk[h] c) = (W_uk[h]^T q_nope) . c            uk[h] = W_uk[h]^T  [R, dn]
 *   sum_j p_j (W_uv[h] c_j) = W_uv[h] (sum_j p_j c_j)         uv[h] = W_uv[h]    [dv, R]
 * so attention is multi-query attention with one KV head: queries [rope(q_pe); uk[h] q_nope]
 * (dr + R), keys the cache rows, values the last R of each cache row (head_dim_v = R, the pool
 * stores no V: kv_pool.h v_in_k), and each head's latent output goes through uv[h] before o_proj.
 * Every row, prefill or decode, takes this absorbed path, so a row's result does not depend on
 * how the rows were batched. */
#ifndef MXL_MODELS_MLA_H
#define MXL_MODELS_MLA_H

#include <stdint.h>

#include "backends/backend.h"
#include "models/decoder.h"

/* Working memory for up to max_rows rows. */
typedef struct mxl_mla_scratch {
    float *qr;   /* [max_rows, heads * (dn + dr)] the projected queries */
    float *qa;   /* [max_rows, q_rank] the low-rank queries */
    float *ckv;  /* [max_rows, R + dr] the latent projection */
    float *xin;  /* [max_rows, max(dn, R)] one head's input rows */
    float *yout; /* [max_rows, max(R, dv)] one head's output rows */
    float *vo;   /* [max_rows, heads * dv] the heads' values (o_proj's input) */
} mxl_mla_scratch;

size_t mxl_mla_scratch_floats(const mxl_decoder_hparams *hp, int64_t max_rows);
void mxl_mla_scratch_carve(const mxl_decoder_hparams *hp, int64_t max_rows, float *mem, mxl_mla_scratch *s);

/* Queries q [n, heads, dr + R] (the rotary part, then the absorbed query) and cache rows
 * k [n, dr + R] (the rotary key, then the normed latent) of rows h [n, hidden]; RoPE is applied
 * later, with the other families' (the first dr of every head). prep (NULL: none) makes h's rows
 * within the first matmul's quantization (matmul.h). */
void mxl_mla_project(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_decoder_layer *L, const mxl_row_prep *prep,
                     const float *h, int64_t n, float *q, float *k, const mxl_mla_scratch *s, void *mm_scratch,
                     mxl_threadpool *pool);

/* The heads' values s->vo [n, heads * dv] from the attention's latent outputs att [n, heads, R]. */
void mxl_mla_values(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_decoder_layer *L, const float *att, int64_t n,
                    const mxl_mla_scratch *s, void *mm_scratch, mxl_threadpool *pool);

#endif
