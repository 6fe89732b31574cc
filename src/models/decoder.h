/* decoder.h - the shared decoder-only transformer: pre-norm blocks of grouped-query attention with
 * RoPE and a gated MLP, the shape Llama, Mistral, Qwen, Gemma and most text families share. A
 * family contributes only its hyper-parameters and switches (mxl_decoder_hparams, filled in
 * models/family_*.c); the forward pass and weight binding live here once.
 *
 * Per layer, for hidden states x [n_tok, hidden]:
 *   h  = norm(x; attn_norm)
 *   q, k, v = h Wq, h Wk, h Wv          q [n_tok, n_heads, head_dim], k/v [n_tok, n_kv_heads, head_dim]
 *   (qk_norm) q, k = rmsnorm per head
 *   q, k = rope(q, k; layer theta)       then k, v appended to the layer's KV cache
 *   a  = attention(q, cache; causal, layer window) Wo
 *   (post_attn_norm) a = norm(a)
 *   x  = x + a
 *   h  = norm(x; ffn_norm);  m = (act(h Wgate) * h Wup) Wdown;  (post_ffn_norm) m = norm(m)
 *   x  = x + m
 * then logits = norm(x; output_norm) Wout (Wout = token embedding when tied), optionally
 * soft-capped. Weights stay in their checkpoint format (memory-mapped views); matmuls quantize
 * activations on the fly (backends/cpu/matmul.h). The decode path allocates nothing. */
#ifndef MXL_MODELS_DECODER_H
#define MXL_MODELS_DECODER_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/cpu/activation.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/rope.h"
#include "core/arena.h"
#include "core/status.h"
#include "core/threadpool.h"
#include "models/checkpoint.h"

typedef struct mxl_decoder_hparams {
    int64_t n_layers, hidden, n_heads, n_kv_heads, head_dim, ffn, vocab, max_ctx;
    float norm_eps;
    bool norm_plus_one;    /* Gemma: y = norm(x) * (1 + w) (HF weights; GGUF stores 1 + w) */
    bool qk_norm;          /* Qwen3 / Gemma 3: RMSNorm over each q and k head */
    bool post_norms;       /* Gemma 2/3: norms after attention and after the MLP */
    float embed_scale;     /* Gemma: sqrt(hidden); 1 otherwise */
    float attn_scale;      /* usually 1/sqrt(head_dim) */
    float final_softcap;   /* <= 0: none */
    mxl_act act;           /* gate activation of the gated MLP */
    mxl_rope_cfg rope;       /* global layers */
    mxl_rope_cfg rope_local; /* sliding-window layers (Gemma 3's local base frequency) */
    int64_t sliding_window;  /* window of the sliding layers (0: none) */
    const uint8_t *layer_is_sliding; /* [n_layers] or NULL */
} mxl_decoder_hparams;

typedef struct mxl_decoder_layer {
    mxl_cpu_weight wq, wk, wv, wo, w_gate, w_up, w_down;
    const float *attn_norm, *ffn_norm;           /* [hidden] */
    const float *post_attn_norm, *post_ffn_norm; /* [hidden] or NULL */
    const float *q_norm, *k_norm;                /* [head_dim] or NULL */
    bool sliding;
} mxl_decoder_layer;

typedef struct mxl_decoder {
    mxl_decoder_hparams hp;
    mxl_arena arena; /* layers, f32 copies of non-f32 norm vectors */
    mxl_cpu_weight tok_embd, output;
    const float *output_norm;
    mxl_decoder_layer *layers;
} mxl_decoder;

/* Fills the family hyper-parameters from the typed config (and GGUF facts) and binds every weight
 * of the checkpoint, checking shapes; errors name the tensor. Only GGUF checkpoints of the
 * families in family_*.c are bound so far; others are refused by model_type. */
mxl_status mxl_decoder_load(const mxl_checkpoint *ck, mxl_decoder *out, mxl_error *err);
void mxl_decoder_free(mxl_decoder *d);

/* One sequence's KV cache (f32) and all scratch buffers for up to max_batch tokens per call. */
typedef struct mxl_decoder_state mxl_decoder_state;
mxl_status mxl_decoder_state_create(const mxl_decoder *d, int64_t max_ctx, int64_t max_batch,
                                    mxl_threadpool *pool, mxl_decoder_state **out, mxl_error *err);
void mxl_decoder_state_destroy(mxl_decoder_state *s);
int64_t mxl_decoder_state_pos(const mxl_decoder_state *s);
/* Runs every matmul through the plain f32 reference (dequantized weights, f32 activations) instead
 * of the fast kernels that quantize activations to int8: slow, the yardstick in tests. Also
 * switched on for new states by the environment variable MXL_DECODER_REFERENCE=1. */
void mxl_decoder_state_set_reference(mxl_decoder_state *s, bool on);
/* Runs tokens[0..n) at the next positions (in chunks of max_batch) and writes the logits of the
 * last one to logits[vocab]. Fails (nothing appended) when the context would overflow or an id is
 * out of range. */
mxl_status mxl_decoder_forward(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens,
                               int64_t n, float *logits, mxl_error *err);

#endif
