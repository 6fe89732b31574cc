/* recurrent.h - the decoder's recurrent mixers: layers that carry a fixed-size state from one
 * position to the next instead of attending over a KV cache (decoder.h: hparams layer_kind).
 * Each sequence's state (decoder state: one slab per sequence, one piece per recurrent layer) is
 * f32 and starts at zero; it moves only forward, so a state can be reset but not rewound.
 *
 * Every kind starts with a depthwise causal convolution of width K over some channels (the
 * "conv state" keeps the last K - 1 inputs of each channel, oldest first):
 *   conv(u)[t][c] = b[c] + sum_k w[c][k] u[t - (K - 1) + k][c]
 * Kinds, for rows h [n, hidden]:
 *   SHORTCONV (LFM2):  B, C, x = in_proj(h) (thirds of [n, 3 hidden]);
 *                      y = C * conv(B * x);  out = out_proj(y)
 *   MAMBA (Mamba 1):   x, z = in_proj(h) ([n, 2 DI]); x = silu(conv(x));
 *                      dt_r, B, C = x_proj(x) ([n, R + 2 N]); dt = softplus(dt_proj(dt_r) + b);
 *                      per channel i and state s:  S[i][s] = exp(dt_i A[i][s]) S[i][s] + dt_i B[s] x_i
 *                      y_i = (sum_s S[i][s] C[s] + D_i x_i) * silu(z_i);  out = out_proj(y)
 *   MAMBA2 (SSD):      z, xBC, dt = in_proj(h) ([n, DI + (DI + 2 G N) + NH]); xBC = silu(conv(xBC));
 *                      x, B, C = xBC ([DI], [G, N], [G, N]); per head h (head dim P = DI / NH,
 *                      group g = h / (NH / G)): dt = clamp(softplus(dt_h + dt_bias_h), limits),
 *                      S[h][p][s] = exp(dt A_h) S[h][p][s] + dt B[g][s] x[h][p],
 *                      y[h][p] = sum_s S[h][p][s] C[g][s] + D_h x[h][p];
 *                      y = rmsnorm_per_group(y * silu(z)) * w (G groups of DI / G);  out = out_proj(y)
 *   GDN (gated delta rule: Qwen3-Next, Qwen 3.5): NK key heads and NV = r NK value heads of dk / dv;
 *                      q, k, v, z = in_proj(h) (Qwen3-Next: one in_proj_qkvz, per key head g its
 *                      [q_g, k_g, v and z of value heads g r .. g r + r - 1]; gdn_split: separate
 *                      in_proj_qkv [q; k; v] and in_proj_z), b, a = in_proj_ba(h) (likewise per key
 *                      head; or, when in_a is bound, in_proj_b and in_proj_a);
 *                      qkv = silu(conv([q; k; v])) (no bias);
 *                      per value head h (key head h / r): q, k l2-normed (eps 1e-6), q / sqrt(dk),
 *                      beta = sigmoid(b_h), decay = exp(A_h softplus(a_h + dt_bias_h)),
 *                      S [dk, dv] = decay S;  S += k (x) ((v - S^T k) beta);  o = S^T q;
 *                      y_h = rmsnorm(o) * w (dv) * silu(z_h);  out = out_proj(y)
 *                      With gdn_kda (Kimi Delta Attention, NK = NV): q, k, v = q_proj, k_proj,
 *                      v_proj(h), each with its own convolution (concatenated as one); the decay per
 *                      key channel, decay_i = exp(A_h softplus(f_b(f_a(h))_{h,i} + dt_bias_{h,i}))
 *                      scaling row i of S; beta = sigmoid(b_proj(h)_h); the output gate
 *                      sigmoid(g_b(g_a(h))_h) in place of silu(z_h)
 *   RGLRU (RecurrentGemma's Griffin block, width W = NH heads of bw): y = gelu_tanh(linear_y(h));
 *                      x = conv(linear_x(h)) (no activation); per head the gates
 *                      gx = sigmoid(x_h Wx[h] + bx[h]), ga = sigmoid(x_h Wa[h] + ba[h]) ([bw, bw]
 *                      block-diagonal, x on the left); log a = -8 ga softplus(param), a = exp(log a);
 *                      S = a S + x gx sqrt(1 - a^2), where position 0 resets (a = 0, factor 1);
 *                      out = linear_out(S * y)
 *   LIGHTNING (MiniMax): q, k, v = silu(qkv_proj(h)) per head [q; k; v] (NH heads of hd = DI / NH,
 *                      no convolution); S [hd, hd] = r S + k (x) v with r = exp(-slope) per head and
 *                      layer; o = q S; y = rmsnorm(o over all heads) * w * sigmoid(output_gate(h));
 *                      out = out_proj(y)
 * A is stored as -exp(A_log) (GGUF stores it so already).
 *
 * The scans run token by token (the plain form of every kind, and the one that makes a chunked
 * prefill, a whole prefill and a batched decode step give the same bits); the channels / heads
 * are split over the pool's threads. The reference backend runs the plain inner loops, the
 * others the same element operations in 4-lane vectors (Mamba-2's state rows, GDN's rows of
 * S: recurrent.c), whose sums differ from the plain order in the last bits only. */
#ifndef MXL_MODELS_RECURRENT_H
#define MXL_MODELS_RECURRENT_H

#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "core/threadpool.h"

typedef struct mxl_decoder_hparams mxl_decoder_hparams;

#define MXL_GDN_MAX_DIM 1024 /* GDN head dims dk, dv at most this */

typedef enum mxl_layer_kind {
    MXL_LAYER_ATTN = 0,  /* attention over the KV cache (the decoder's own) */
    MXL_LAYER_SHORTCONV, /* LFM2's gated short convolution */
    MXL_LAYER_MAMBA,     /* Mamba's selective scan */
    MXL_LAYER_MAMBA2,    /* Mamba-2's scalar-decay scan (SSD) */
    MXL_LAYER_GDN,       /* the gated delta rule (Gated DeltaNet) */
    MXL_LAYER_MLP_ONLY,  /* no token mixer: the block is norm, MLP (or experts), residual (Nemotron-H) */
    MXL_LAYER_RGLRU,     /* RecurrentGemma's real-gated linear recurrent unit */
    MXL_LAYER_LIGHTNING, /* MiniMax's lightning attention (linear attention with a per-head decay) */
    MXL_LAYER_KIND_COUNT
} mxl_layer_kind;

const char *mxl_layer_kind_name(mxl_layer_kind k);

/* One recurrent layer's weights (matrices are views in the checkpoint's format). */
typedef struct mxl_rec_layer {
    mxl_layer_kind kind;
    mxl_weight in_proj;     /* [in_dim, hidden] (GDN: qkvz, or with gdn_split qkv) */
    mxl_weight in_ba;       /* GDN: [2 NV, hidden] in_proj_ba, or [NV, hidden] in_proj_b (in_a bound) */
    mxl_weight in_a;        /* GDN: [NV, hidden] in_proj_a, or rows 0 (b and a in in_ba) */
    mxl_weight in_z;        /* GDN with gdn_split: [NV dv, hidden] in_proj_z; RGLRU: [W, hidden] linear_y */
    mxl_weight in_k, in_v;  /* GDN with gdn_kda: k_proj [NK dk, hidden], v_proj [NV dv, hidden] (in_proj: q_proj) */
    mxl_weight f_a, f_b;    /* ... the forget gate's pair: [dk, hidden], [NV dk, dk] */
    mxl_weight g_a, g_b;    /* ... the output gate's pair: [dv, hidden], [NV dv, dv] */
    const float *z_b;       /* RGLRU: linear_y's bias [W] */
    const float *gx_w, *gx_b, *ga_w, *ga_b; /* RGLRU: the input / recurrence gates [NH, bw, bw] and [NH, bw] */
    const float *lru_c;     /* RGLRU: -8 softplus(recurrent_param) [W] */
    const float *in_b;      /* [in_dim] or NULL */
    const float *conv_w;    /* [conv_dim, K] */
    const float *conv_wt;   /* the same transposed, [K, conv_dim] (the vector form's layout) */
    const float *conv_b;    /* [conv_dim] or NULL */
    mxl_weight x_proj;      /* MAMBA: [R + 2 N, DI] */
    mxl_weight dt_proj;     /* MAMBA: [DI, R] */
    const float *dt_b;      /* MAMBA: dt_proj's bias [DI]; MAMBA2: dt_bias [NH]; GDN: dt_bias [NV] (gdn_kda: [NV dk]) */
    const float *A;         /* -exp(A_log): MAMBA [DI, N]; MAMBA2 [NH]; GDN [NV] */
    const float *D;         /* MAMBA [DI]; MAMBA2 [NH] */
    const float *norm_w;    /* MAMBA2: the gated norm's weight [DI]; GDN [dv] */
    const float *dt_norm, *b_norm, *c_norm; /* MAMBA with hp.ssm_bcdt_eps: the RMSNorms' weights of the
                                             * time step [R], B and C [N] (Jamba), or NULL (weightless:
                                             * Falcon Mamba) */
    mxl_weight out_proj;    /* [hidden, DI] (SHORTCONV: [hidden, hidden]) */
    const float *out_b;     /* [hidden] or NULL */
    size_t state_off;       /* this layer's piece of a sequence's state slab (floats) */
} mxl_rec_layer;

/* Channels through the convolution, width of in_proj's output, and floats of one sequence's
 * state for a layer of kind k (0 for MXL_LAYER_ATTN). */
int64_t mxl_rec_conv_dim(const mxl_decoder_hparams *hp, mxl_layer_kind k);
int64_t mxl_rec_in_dim(const mxl_decoder_hparams *hp, mxl_layer_kind k);
size_t mxl_rec_state_floats(const mxl_decoder_hparams *hp, mxl_layer_kind k);

/* Working memory for up to max_rows rows (the largest of the kinds hp->layer_kind uses). */
typedef struct mxl_rec_scratch {
    float *in;  /* [max_rows, in_dim] in_proj's output */
    float *xc;  /* [max_rows, conv_dim] the convolution's output */
    float *dbc; /* [max_rows, R + 2 N] MAMBA's x_proj output */
    float *dt;  /* [max_rows, DI] MAMBA's time steps; GDN: per row b [NV], a [NV] (gdn_kda: the forget
                 * gate [NV dk]), then z [NV dv] (mxl_rec_gdn_gates) */
    float *y;   /* [max_rows, DI] the scan's output (out_proj's input) */
} mxl_rec_scratch;

size_t mxl_rec_scratch_floats(const mxl_decoder_hparams *hp, int64_t max_rows);
/* GDN: the width of a row of the gates (scratch dt) and where z starts in it */
int64_t mxl_rec_gdn_gates(const mxl_decoder_hparams *hp, int64_t *z_off);
void mxl_rec_scratch_carve(const mxl_decoder_hparams *hp, int64_t max_rows, float *mem, mxl_rec_scratch *s);

/* Rows [row0, row0 + n) belong to one sequence whose state piece for this layer is `state`. */
typedef struct mxl_rec_span {
    int64_t row0, n;
    float *state;
    int64_t pos; /* the position of row row0 (RGLRU resets its recurrence at position 0) */
} mxl_rec_span;

/* out [n_rows, hidden] = the layer's mixer of rows h [n_rows, hidden], each span advancing its own
 * state by its rows. prep (NULL: none) makes h's rows within in_proj's quantization (matmul.h). */
void mxl_rec_forward(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_rec_layer *R, const mxl_row_prep *prep,
                     const float *h, int64_t n_rows, const mxl_rec_span *spans, int64_t n_spans, float *out,
                     const mxl_rec_scratch *s, void *mm_scratch, mxl_threadpool *pool);

#endif
