/* altup.h - the pieces of Gemma 3n's decoder block that no other family has (transformers
 * modeling_gemma3n.py): AltUp's streams, and the Gaussian top-k of its sparse MLP layers.
 *
 * AltUp keeps A copies ("streams") of the hidden state, S [A][n][hidden], stream `active` the one
 * the layer's attention and MLP run on. Per layer:
 *   m     = tanh(RMSNorm(S[active]) w_rn / hidden  Wr^T)                   [n, A] (modality router)
 *   c     = m Wp^T                                                          [n, A*A]
 *   P[b]  = S[b] + sum_a c[b*A + a] S[a]                                    (predict)
 *   ... the block runs on P[active] and gives y ...
 *   m'    = tanh(RMSNorm(y) w_rn / hidden  Wr^T);  k = m' Wc^T + 1          [n, A]
 *   S[b]  = P[b] + k[b] (y - P[active])                                     (correct)
 * Before the first layer S[0] = x (the scaled embedding), S[i] = x Wi^T rescaled to x's RMS
 * (the new RMS clamped below at sqrt(1e-5)); after the last, the mean of S[0] and each
 * S[i] Ui^T rescaled to S[0]'s RMS. The matrices are the decoder's (decoder.c); these functions
 * do the mixing arithmetic. */
#ifndef MXL_MODELS_ALTUP_H
#define MXL_MODELS_ALTUP_H

#include <stdint.h>

#include "backends/backend.h"

/* One layer's AltUp and Laurel weights. */
typedef struct mxl_altup_layer {
    mxl_weight router;        /* modality_router [A, hidden] */
    const float *router_norm; /* [hidden] */
    mxl_weight predict;       /* prediction_coefs [A * A, A] */
    mxl_weight correct;       /* correction_coefs [A, A] */
    const float *out_scale;   /* correct_output_scale [hidden] */
    /* Laurel (a low-rank residual beside attention): h + RMSNorm(h L^T R^T) w */
    mxl_weight laurel_l;      /* [rank, hidden] */
    mxl_weight laurel_r;      /* [hidden, rank] */
    const float *laurel_norm; /* [hidden] */
} mxl_altup_layer;

/* pred[b] = s[b] + sum_a coef[t][b * A + a] s[a] for rows t < n; streams are `stride` floats
 * apart, rows `hidden` apart; coef [n, A * A]. */
void mxl_altup_predict(int A, const float *s, int64_t stride, int64_t n, int64_t hidden, const float *coef, float *pred);

/* s[b] = pred[b] + (coef[t][b] + 1) (y[t] - pred[active][t]) for rows t < n; coef [n, A]
 * (correction_coefs' output, before the + 1). */
void mxl_altup_correct(int A, int active, const float *pred, int64_t stride, int64_t n, int64_t hidden, const float *coef,
                       const float *y, float *s);

/* y[t] *= rms(x[t]) / max(rms(y[t]), sqrt(1e-5)) for rows t < n (rms = sqrt(mean of squares)). */
void mxl_altup_match_rms(const float *x, float *y, int64_t n, int64_t hidden);

/* Gaussian top-k of the sparse MLP layers: g = relu(g - (mean(g) + std(g) * k)) over each row
 * of m values (std the population one), k = the standard normal quantile of the layer's target
 * sparsity (mxl_normal_quantile). */
void mxl_gaussian_topk(float *g, int64_t rows, int64_t m, float k);

/* The standard normal quantile Phi^-1(p), 0 < p < 1, to double precision. */
double mxl_normal_quantile(double p);

#endif
