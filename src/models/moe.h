/* moe.h - the shared sparse mixture-of-experts block of the decoder (decoder.h: hparams n_experts,
 * mxl_moe_layer): a router picks each token's top-k experts, each expert is a gated MLP, their
 * outputs are summed with the router's weights, plus an optional shared expert.
 *
 * For rows h [n, hidden]:
 *   logits = h Wr^T                                    [n, n_experts]   (f32 reference matmul)
 *   p      = softmax(logits); top k of p (ties: the lower expert id), renormalised to sum 1 with
 *            moe_norm_topk                             idx, w [n, k]
 *            (SIGMOID, DeepSeek V3's noaux_tc: p = sigmoid(logits); the top k of p + bias within
 *            the moe_topk_group best groups; w = p there, renormalised with moe_norm_topk)
 *            then w *= moe_routed_scale, and each w by its expert's expert_scale (Gemma 4)
 *   y[t]   = sum_j w[t][j] * down_e(act(gate_e(h[t])) * up_e(h[t])),  e = idx[t][j]
 *            (moe_scale_input, Llama 4: sum_j down_e(act(gate_e(x)) * up_e(x)), x = w[t][j] h[t])
 *          + moe_shared_scale * (sigmoid(h[t] . w_sh) if shared_expert_gate) * shared(h[t])
 * The router runs on the f32 reference path whatever the matmul path: quantizing its input (the
 * fast path's int8 activations) would move near-tied experts across the top-k boundary, and it
 * is a small matrix (llama.cpp keeps ffn_gate_inp in f32 for the same reason).
 *
 * One row (a decode step): the chosen experts' gate and up projections run in one matmul_multi
 * (their input is the same row). Batched: the rows (decode steps of several sequences, prefill
 * chunks) are grouped by expert, so each selected expert's matrices are read once per pass, on
 * the rows that chose it (in a decode batch the threads take whole experts: the lanes below; in
 * a prefill chunk each expert's matmuls split their rows over the pool); each row's
 * result does not depend on the other rows (the backend's matmuls are batch-invariant, each row's
 * k outputs are summed in its own top-k order), so a batch gives each row the bits it gets alone.
 * Experts are never dequantized whole: they run in their stored format, either packed into the
 * backend's layout with the other matrices (the checkpoint's pages released, so each is held
 * once) or, when the model would not fit in memory that way (or MLXCEL_EXPERT_STREAM=on),
 * straight from the checkpoint's mapping, paged in as tokens choose them (decoder.c
 * expert_streaming). */
#ifndef MXL_MODELS_MOE_H
#define MXL_MODELS_MOE_H

#include <stdint.h>

#include "backends/backend.h"
#include "models/decoder.h"

/* Lanes of the expert-parallel path: when a batch's chosen experts each take at most
 * MXL_MOE_LANE_ROWS rows (decode steps of several sequences), the pool's threads take whole
 * experts, each thread on its own lane with single-threaded matmuls (the same bits: every output
 * is computed by one thread whatever the split), one dispatch per layer instead of one per expert. */
#define MXL_MOE_LANE_ROWS 16
#define MXL_MOE_MAX_LANES 64

typedef struct mxl_moe_lane {
    float *xg, *g, *u, *ys; /* [MXL_MOE_LANE_ROWS, hidden or width] */
    void *mm;               /* the matmuls' scratch for MXL_MOE_LANE_ROWS rows */
} mxl_moe_lane;

/* The block's working memory for up to max_rows rows (sizes from mxl_moe_scratch_floats). */
typedef struct mxl_moe_scratch {
    float *logits;  /* [max_rows, n_experts] */
    float *weights; /* [max_rows, k] */
    int32_t *idx;   /* [max_rows, k] expert ids */
    int32_t *order; /* [max_rows * k] (row, slot) pairs grouped by expert */
    int32_t *count; /* [n_experts + 1] */
    float *xg;      /* [max_rows, hidden] the rows one expert reads */
    float *g, *u;   /* [max_rows, max(moe_ffn, shared_ffn)] */
    float *yk;      /* [max_rows, k, hidden] each (row, slot)'s expert output */
    float *ys;      /* [max_rows, hidden] the shared expert's output */
    float *sg;      /* [max_rows] the shared expert's gate logit */
    float *choice;  /* [n_experts] the sigmoid router's selection scores of one row */
    int32_t *active, *owner; /* [n_experts] the expert-parallel path's experts and their lanes */
    int n_lanes;    /* 0: no expert-parallel path (one thread) */
    mxl_moe_lane lanes[MXL_MOE_MAX_LANES];
} mxl_moe_scratch;

/* Floats of scratch a block of up to max_rows rows needs with n_lanes lanes (the pool's thread
 * count, 0 or 1 for none; at most MXL_MOE_MAX_LANES) whose matmuls need lane_mm_bytes of scratch
 * each for MXL_MOE_LANE_ROWS rows (for mxl_moe_scratch_carve). */
uint64_t mxl_moe_scratch_floats(const mxl_decoder_hparams *hp, int64_t max_rows, int n_lanes, size_t lane_mm_bytes);
/* Points s's buffers into mem (that many floats, 64-byte aligned). */
void mxl_moe_scratch_carve(const mxl_decoder_hparams *hp, int64_t max_rows, int n_lanes, size_t lane_mm_bytes, float *mem,
                           mxl_moe_scratch *s);

/* y [n, hidden] = the MoE block of layer L on h [n, hidden], routed on hr [n, hidden] (NULL: h).
 * be runs the experts' matmuls (the state's path), with mm_scratch (the decoder's largest matmul
 * scratch) and pool. */
void mxl_moe_forward(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_moe_layer *L, const float *h,
                     const float *hr, int64_t n, float *y, const mxl_moe_scratch *s, void *mm_scratch, mxl_threadpool *pool);

/* The top k of p[n] (k <= n) into idx[k] in descending order, ties to the lower index (the
 * router's selection; exposed for tests). */
void mxl_moe_topk(const float *p, int64_t n, int64_t k, int32_t *idx);

#endif
