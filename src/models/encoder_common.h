/* encoder_common.h - pieces every encoder family (BERT / XLM-RoBERTa, ModernBERT) and their
 * classification heads share: binding checkpoint tensors by name under a prefix ("bert.",
 * "roberta.", "model." or none: the base-model prefix of *ForSequenceClassification checkpoints),
 * reading the few config.json keys the typed config does not carry, and the biased linear layer
 * y = x W^T + b. Binding errors name the checkpoint and the tensor. */
#ifndef MXL_MODELS_ENCODER_COMMON_H
#define MXL_MODELS_ENCODER_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "core/arena.h"
#include "core/threadpool.h"
#include "models/checkpoint.h"

/* Several token sequences run in one forward pass: their tokens back to back (so every matmul
 * sees all of them at once) and attention kept within each sequence. */
typedef struct mxl_encoder_batch {
    const int32_t *ids;       /* [n_tokens] */
    const int32_t *type_ids;  /* [n_tokens] token_type_ids, or NULL for all 0 */
    const int64_t *seq_start; /* [n_seqs + 1]: sequence s is tokens [seq_start[s], seq_start[s+1]) */
    int64_t n_seqs;
} mxl_encoder_batch;

/* Checks a batch's offsets (non-decreasing from 0, each sequence 1..max_len tokens); returns the
 * total token count and the longest sequence, or an MXL_ERR_ARG message. */
mxl_status mxl_encoder_batch_check(const mxl_encoder_batch *b, int64_t max_len, int64_t *n_tokens,
                                   int64_t *longest, mxl_error *err);

typedef struct mxl_enc_binder {
    const mxl_checkpoint *ck;
    mxl_arena *arena;  /* owns f32 copies of non-f32 vectors */
    const char *prefix; /* prepended to every name */
    mxl_error *err;
} mxl_enc_binder;

/* The first prefix p in `prefixes` (NULL-terminated) with a tensor named p + probe, else NULL. */
const char *mxl_enc_find_prefix(const mxl_checkpoint *ck, const char *const *prefixes, const char *probe);

/* True when prefix + name (printf format) exists. */
bool mxl_enc_has(const mxl_enc_binder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A [rows, cols] matrix view. */
mxl_status mxl_enc_matrix(const mxl_enc_binder *b, int64_t rows, int64_t cols, mxl_weight *out,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* An f32 vector of n elements. */
mxl_status mxl_enc_vector(const mxl_enc_binder *b, int64_t n, const float **out, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A convolution's weight as f32 in PyTorch's order [out, in_c, kernel...] (k: the kernel's
 * element count): as stored, or put back from the channels-last [out, kernel..., in_c] MLX
 * conversions store (a dimension 1 equal to in_c reads as PyTorch's). Copies live in b's arena. */
mxl_status mxl_enc_conv_weight(const mxl_enc_binder *b, int64_t out, int64_t in_c, int64_t k, const float **w, const char *name);

/* Config keys beyond the typed config (raw config.json; defaults when absent or mistyped is an
 * error naming the key). */
mxl_status mxl_enc_cfg_bool(const mxl_checkpoint *ck, const char *key, bool dflt, bool *out, mxl_error *err);
mxl_status mxl_enc_cfg_int(const mxl_checkpoint *ck, const char *key, int64_t dflt, int64_t *out, mxl_error *err);
mxl_status mxl_enc_cfg_double(const mxl_checkpoint *ck, const char *key, double dflt, double *out, mxl_error *err);
/* An integer of a config.json sub-object (vision_config, given as obj, named `what` in errors):
 * dflt when absent or null, else within [lo, hi]. */
mxl_status mxl_enc_subcfg_int(const mxl_checkpoint *ck, const json_t *obj, const char *what, const char *key, int64_t dflt, int64_t lo,
                              int64_t hi, int64_t *out, mxl_error *err);
/* A string key; dflt when absent. The result lives in the config. */
mxl_status mxl_enc_cfg_string(const mxl_checkpoint *ck, const char *key, const char *dflt, const char **out,
                              mxl_error *err);

/* HF ACT2FN name -> activation: gelu (erf), gelu_new / gelu_pytorch_tanh / gelu_fast (tanh), relu,
 * silu / swish. MXL_ERR_UNSUPPORTED naming `what` and the name otherwise. */
mxl_status mxl_enc_activation(const char *name, const char *what, mxl_act *out, mxl_error *err);

/* x[i] = act(x[i]) for i < n, split over the pool. */
void mxl_enc_act(const mxl_backend *be, mxl_threadpool *pool, mxl_act a, float *x, int64_t n);
/* out[t, :I] = act(g[t, :I]) * g[t, I:2I] for t < rows (GeGLU / SwiGLU of a fused [rows, 2I]
 * projection), split over the pool. */
void mxl_enc_glu(const mxl_backend *be, mxl_threadpool *pool, mxl_act a, const float *g, int64_t rows, int64_t I, float *out);
/* Per row t < rows of width H: x[t] += add[t] (when add is not NULL), then
 * y[t] = LayerNorm(x[t]) * w + b (b may be NULL; y may be x). Split over the pool. */
void mxl_enc_add_layernorm(const mxl_backend *be, mxl_threadpool *pool, float *x, const float *add, const float *w, const float *b,
                           int64_t rows, int64_t H, float eps, float *y);

/* Scratch floats mxl_enc_self_attention needs for sequences of at most `longest` tokens. */
size_t mxl_enc_self_attention_scratch_floats(const mxl_backend *be, int64_t longest, int head_dim, int n_threads);
/* a[n, H] = softmax(q k^T * scale) v per head, each sequence of the batch attending over its own
 * tokens only, every position seeing every other (no mask). q, k, v, a [n, H] with H = n_heads *
 * head_dim; pos[n] each token's index within its sequence (the fallback kernel's positions). The
 * backend's packed varlen kernel where it has one, else its decoder attention per sequence. */
void mxl_enc_self_attention(const mxl_backend *be, const mxl_encoder_batch *bt, const float *q, const float *k, const float *v,
                       float *a, int64_t H, int n_heads, int head_dim, float scale, const int64_t *pos, float *scratch,
                       mxl_threadpool *pool);

/* y[n, W.rows] = x[n, W.cols] W^T (+ bias[W.rows] when bias is not NULL). */
void mxl_enc_linear(const mxl_backend *be, const mxl_weight *w, const float *bias, const float *x, int64_t n, float *y,
                    void *scratch, mxl_threadpool *pool);

/* Scratch bytes mxl_enc_linear_act needs for n tokens with a pool of n_threads (64-byte
 * aligned by the caller). */
size_t mxl_enc_linear_scratch_bytes(const mxl_backend *be, const mxl_weight *w, int64_t n, int n_threads);
/* y[n, W.rows] = act(x W^T + bias) (act: MXL_GEMM_ACT_NONE or an mxl_act; bias may be NULL):
 * the register-blocked GEMM of gemm_f32.h with the bias and activation fused when the CPU has
 * it and n is at least one micro-tile, else mxl_enc_linear then the activation. */
void mxl_enc_linear_act(const mxl_backend *be, const mxl_weight *w, const float *bias, int act, const float *x, int64_t n, float *y,
                        void *scratch, mxl_threadpool *pool);

#endif
