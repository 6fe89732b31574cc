/* decoder.h - the shared decoder-only transformer: blocks of grouped-query attention with RoPE
 * (or learned positions) and an MLP, the shape Llama, Mistral, Qwen, Gemma, Phi-3, OLMo 2,
 * Granite, SmolLM3, StarCoder2, GPT-2 and most text families share. A family contributes only
 * its hyper-parameters, switches and tensor names (models/family_*.c, registered through the
 * table in models/decoder_family.h); the forward pass and weight binding live here once.
 *
 * Per layer, for hidden states x [n_tok, hidden]:
 *   h  = attn_norm ? norm(x) : x              norm = RMSNorm (w or 1 + w) or LayerNorm (w, b)
 *   q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)   q [n_tok, n_heads, head_dim],
 *                                                  k/v [n_tok, n_kv_heads, head_dim]
 *   QK-norm: RMSNorm over each head (Qwen3, Gemma 3) or over the whole projection (OLMo 2)
 *   q, k = rope(q, k; the layer's RoPE) unless the layer is NoPE (SmolLM3) or positions are
 *          learned (GPT-2); (QK-norm here instead with qk_norm_after_rope: Hunyuan)
 *          then k, v are appended to the layer's KV cache (f16 by default,
 *          f32, grouped int8 or a ggml block format on request: mxl_decoder_kv_type)
 *   a  = attention(q, cache; scale, soft-cap, causal, layer window) Wo (+bo)
 *   a  = post_attn_norm ? norm(a) : a
 *   x  = x + residual_scale * a
 *   h  = ffn_norm ? norm(x) : x
 *   m  = gated: (act(h Wgate + bg) * (h Wup + bu)) Wdown + bd;  plain: act(h Wup + bu) Wdown + bd
 *   m  = post_ffn_norm ? norm(m) : m
 *   x  = x + residual_scale * m
 * With residual_from_norm (MiniMax) each residual adds to the normed input instead, weighted
 * (hparams below).
 * With parallel_residual the MLP reads ffn_norm(x) (or h) of the block's input x, not x + a.
 * Embeddings: x = embed_scale * E[token] (+ P[position] for learned positions), then
 * norm(x; output_norm) with embed_norm; logits =
 * logit_scale * (norm(x; output_norm) Wout) (Wout = E when tied), then the final soft-cap.
 * Weights stay in their checkpoint format (memory-mapped views; only GPT-2's Conv1D matrices are
 * transposed into owned copies); every op runs through the backend interface (backends/backend.h;
 * the CPU's matmuls quantize activations on the fly). The decode path allocates nothing.
 * One pass runs a block of rows that may belong to several sequences (spans of rows, each with
 * its own state and positions): a prefill chunk is one span, a batched decode step
 * (mxl_decoder_forward_batch) one row per sequence; both share the same layer code. */
#ifndef MXL_MODELS_DECODER_H
#define MXL_MODELS_DECODER_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "core/arena.h"
#include "core/status.h"
#include "core/threadpool.h"
#include "models/checkpoint.h"
#include "models/kv_pool.h"
#include "models/recurrent.h"

typedef enum mxl_norm_kind {
    MXL_NORM_RMS = 0, /* x / rms(x) * w  (or * (1 + w) with norm_plus_one) */
    MXL_NORM_LAYER,   /* (x - mean) / std * w + b */
} mxl_norm_kind;

typedef enum mxl_qk_norm_kind {
    MXL_QK_NORM_NONE = 0,
    MXL_QK_NORM_HEAD, /* RMSNorm over each head, weight [head_dim] (Qwen3, Gemma 3) */
    MXL_QK_NORM_FULL, /* RMSNorm over the whole projection, weight [heads * head_dim] (OLMo 2) */
} mxl_qk_norm_kind;

typedef enum mxl_mlp_kind {
    MXL_MLP_GATED = 0, /* down(act(gate(h)) * up(h)) */
    MXL_MLP_PLAIN,     /* down(act(up(h)))  (StarCoder2 c_fc/c_proj, GPT-2) */
} mxl_mlp_kind;

/* How a mixture-of-experts layer weighs its experts (models/moe.h). */
typedef enum mxl_moe_router {
    MXL_MOE_SOFTMAX = 0, /* softmax over all experts' logits, the top k kept (renormalised to sum 1
                          * with moe_norm_topk): Qwen MoE, OLMoE; Mixtral and Granite MoE (their
                          * softmax over the top-k logits is the same weights renormalised) */
    MXL_MOE_SIGMOID,     /* DeepSeek V3's noaux_tc (GLM-4 MoE, dots.llm1): sigmoid scores; the
                          * choice adds a per-expert correction bias and keeps only the
                          * moe_topk_group best of moe_n_group expert groups (a group's score: its
                          * two best); the weights are the chosen experts' plain scores */
    MXL_MOE_SPARSEMIXER, /* PhiMoE's sparsemixer (inference form, exactly 2 experts): the best
                          * logit, weighted by its softmax among the logits within 2 moe_jitter_eps
                          * of it (relative: (max - x) / max(|x|, max)); then the best of the
                          * others, weighted likewise among the others near it */
} mxl_moe_router;

typedef struct mxl_decoder_hparams {
    int64_t n_layers, hidden, n_heads, n_kv_heads, head_dim, ffn, vocab, max_ctx;
    float norm_eps;
    mxl_norm_kind norm;
    bool norm_plus_one;    /* Gemma: y = norm(x) * (1 + w) (HF weights; GGUF stores 1 + w);
                            * with LayerNorm (Nemotron's LayerNorm1P) 1 + w is made at load */
    bool norm_no_bias;     /* LayerNorm without a bias (Cohere) */
    bool norm_no_weight;   /* norms (QK-norms too) without weight or bias (OLMo 1's LayerNorm,
                            * nanochat's RMSNorm): no norm tensors */
    bool qk_norm;          /* qk_norm_kind != NONE */
    mxl_qk_norm_kind qk_norm_kind;
    bool qk_norm_after_rope; /* QK-norm on the rotated heads (Hunyuan), not before RoPE */
    bool qk_norm_no_weight;  /* the QK-norm has no weight (Llama 4's L2 norm: an RMSNorm without one) */
    bool qk_norm_rope_only;  /* the QK-norm only on layers that rotate (Llama 4) */
    bool pre_norms;        /* norms before attention and MLP (all but OLMo 2) */
    bool post_norms;       /* norms after attention and after the MLP (Gemma 2/3, OLMo 2) */
    bool qkv_bias, o_bias; /* attention projection biases */
    bool mlp_bias;         /* biases on every MLP projection */
    mxl_mlp_kind mlp;
    bool embed_norm;       /* the output norm also applied to the embeddings (nanochat) */
    bool parallel_residual; /* x + attn(h) + mlp(h') from the same x (Phi, Cohere, GPT-NeoX); h' =
                             * ffn_norm(x), or h itself when the family names no ffn_norm */
    float q_temp_beta;     /* > 0: queries scaled by 1 + beta * ln(1 + floor((pos + q_temp_offset) /
                            * q_temp_orig)) after RoPE (Llama 4 / Ministral 3 attention temperature;
                            * Llama 4's own on its NoPE layers only: q_temp_nope_only, offset 1) */
    int64_t q_temp_orig, q_temp_offset;
    bool q_temp_nope_only;
    const int32_t *layer_heads; /* [n_layers] each layer's query heads (Laguna), or NULL: n_heads
                                 * everywhere (with it, n_heads is their maximum) */
    int64_t attn_chunk;    /* chunked attention on the layers layer_is_chunked marks (Llama 4) */
    const uint8_t *layer_is_chunked; /* [n_layers] or NULL */
    float clip_qkv;        /* > 0: q, k, v clamped to [-clip_qkv, clip_qkv] (OLMo 1) */
    bool lm_head_bias;     /* the LM head has a bias (Phi) */
    bool learned_pos;      /* GPT-2: position embedding table instead of RoPE */
    float embed_scale;     /* Gemma: sqrt(hidden); Granite: embedding_multiplier; 1 otherwise */
    float residual_scale;  /* Granite: residual_multiplier; 1 otherwise */
    bool residual_from_norm; /* MiniMax: each residual is the normed input, weighted:
                              * h = norm(x); x = res_alpha h + res_beta mixer(h) (the attention or the
                              * recurrent layer's pair); h = ffn_norm(x); x = mlp_alpha h + mlp_beta mlp(h) */
    float res_alpha_attn, res_beta_attn, res_alpha_rec, res_beta_rec, res_alpha_mlp, res_beta_mlp;
    float logit_scale;     /* Granite: 1 / logits_scaling; 1 otherwise */
    float attn_scale;      /* usually 1/sqrt(head_dim) */
    bool attn_scale_by_layer; /* GPT-2 scale_attn_by_inverse_layer_idx: layer l uses scale/(l+1) */
    float attn_softcap;    /* <= 0: none (Gemma 2: attn_logit_softcapping) */
    float final_softcap;   /* <= 0: none */
    mxl_act act;           /* MLP activation (of the gate in gated MLPs) */
    bool xielu;            /* instead of act: xIELU with each layer's own scalars (Apertus) */
    bool bidirectional;    /* every query sees every position of its sequence (EmbeddingGemma's
                            * use_bidirectional_attention; sliding layers |q - k| < window): only
                            * for whole-sequence runs (mxl_decoder_forward_hidden_all) */
    bool act_quant8;       /* BitNet b1.58: every linear layer but the LM head reads its input rows
                            * fake-quantized to 8 bits (transformers' ActQuant: s = 127 / max|x|,
                            * round(x s) clamped to [-128, 127], divided by s) */
    bool bitnet_packed;    /* BitNet safetensors: layer matrices stored as ternary codes (transformers'
                            * pack_weights: uint8 [ceil(rows / 4), cols], row i * R4 + r in bits 2i of
                            * row r, value + 1) with a scalar weight_scale: bound as exact MLX 2-bit
                            * weights (q = t + 1, scale s, bias -s) */
    bool bitnet_scale_divides; /* linear_class bitlinear: s = 1 / weight_scale (autobitlinear: s = weight_scale) */
    mxl_rope_cfg rope;       /* global layers */
    mxl_rope_cfg rope_local; /* sliding-window layers (Gemma 3's local base frequency) */
    /* M-RoPE (Qwen2-VL, Qwen2.5-VL; all 0: plain RoPE): each row has 3 positions (time, height,
     * width), equal for text; the rotary's first mrope_section[0] frequency pairs turn by the
     * time position, the next [1] by the height, the last [2] by the width (sum = rotary_dim / 2,
     * rotary_dim <= MXL_MROPE_MAX_ROTARY). Image rows get theirs from their media block's grid. */
    int32_t mrope_section[3];
    bool mrope_interleaved;  /* Qwen3-VL: the sections interleave - pair i turns by the height when
                              * i % 3 == 1 and i < 3 * mrope_section[1], by the width when i % 3 == 2
                              * and i < 3 * mrope_section[2], else by the time */
    int64_t sliding_window;  /* window of the sliding layers (0: none) */
    const uint8_t *layer_is_sliding; /* [n_layers] or NULL: 1 = sliding-window layer */
    const uint8_t *layer_no_rope;    /* [n_layers] or NULL: 1 = NoPE layer (SmolLM3) */
    /* Mixture of experts (models/moe.h): n_experts > 0 makes the layers that layer_is_moe marks
     * (every layer when NULL) sparse MoE blocks in place of the MLP; the others keep the dense
     * MLP of width ffn. */
    int64_t n_experts, n_experts_used; /* experts per layer, experts each token uses (top k) */
    int64_t moe_ffn;                   /* each expert's gated-MLP width */
    int64_t shared_ffn;                /* the shared expert's width (0: none) */
    bool shared_expert_gate;           /* the shared expert's output * sigmoid(h . w) (Qwen2 MoE) */
    mxl_moe_router moe_router;
    bool moe_norm_topk;                /* the k weights renormalised to sum 1 */
    float moe_routed_scale;            /* the k weights times this (routed_scaling_factor; 1) */
    int64_t moe_n_group, moe_topk_group; /* SIGMOID: expert groups and the groups kept (1, 1) */
    bool moe_select_bias;              /* SOFTMAX: experts chosen by p + the router's correction bias
                                        * (ERNIE 4.5 MoE; SIGMOID always has one) */
    float moe_norm_min;                /* the renormalising sum at least this (ERNIE's moe_norm_min; 0) */
    bool moe_router_logit_bias;        /* the router has a bias added to its logits (GPT-OSS) */
    bool moe_expert_bias;              /* the experts' projections have biases (GPT-OSS) */
    bool attn_sinks;                   /* per-head attention sink logits on every layer (GPT-OSS) */
    bool attn_out_gate;                /* the attention output times sigmoid(h Wg) element-wise before
                                        * o_proj (AFMoE): Wg [n_heads * head_dim, hidden] */
    bool attn_gate_softplus;           /* ... softplus(h Wg) instead (Laguna) */
    bool attn_gate_per_head;           /* ... one gate per head: Wg [n_heads, hidden] (Laguna) */
    float moe_oai_alpha, moe_oai_limit; /* > 0 limit: the experts' GLU is GPT-OSS's clamped SwiGLU
                                        * (backend swiglu_oai) instead of act(gate) * up */
    bool moe_scale_input;              /* each expert reads its row times the router weight, and the
                                        * outputs are summed unweighted (Llama 4) */
    float moe_jitter_eps;              /* MXL_MOE_SPARSEMIXER's router_jitter_noise (PhiMoE: 0.01) */
    float moe_router_softcap;          /* > 0: router logits softcapped, c * tanh(x / c) (Laguna) */
    bool moe_sigmoid_no_bias;          /* SIGMOID without a correction bias (Llama 4: sigmoid of the
                                        * top k logits) */
    bool moe_plain;                    /* the experts (and the shared expert) are plain MLPs down(act(up(h)))
                                        * without a gate (Nemotron-H's relu2 experts) */
    float moe_shared_scale;            /* the shared expert's output times this (1; Command MoE's
                                        * "average" strategy: 0.5, with moe_routed_scale 0.5) */
    const uint8_t *layer_is_moe;       /* [n_layers] or NULL (all, when n_experts > 0) */
    int64_t moe_group_top;             /* a group's score is the sum of its best this many (2: DeepSeek
                                        * V3; 1: V2's group_limited_greedy, on softmax scores) */
    /* Multi-head latent attention (models/mla.h), mla_kv_rank > 0: every layer's attention. The
     * cache holds one latent row per position, so head_dim = mla_rope_dim + mla_kv_rank (the
     * row: the rotated key part, then the normed latent) and n_kv_heads = 1; the RoPE (rope,
     * rotary_dim = mla_rope_dim) turns the first mla_rope_dim of each row. */
    int64_t mla_q_rank;   /* q_lora_rank: queries through a low-rank pair with an RMSNorm (0: one q_proj) */
    int64_t mla_kv_rank;  /* kv_lora_rank R */
    int64_t mla_nope_dim, mla_rope_dim, mla_v_dim; /* qk_nope_head_dim, qk_rope_head_dim, v_head_dim */
    float mla_norm_eps;   /* eps of the q_a and kv_a RMSNorms (transformers: 1e-6 whatever rms_norm_eps) */
    /* Recurrent layers (models/recurrent.h): layer_kind [n_layers] (mxl_layer_kind) or NULL, attention
     * everywhere. Only attention layers have KV cache rows; the others keep a per-sequence state. */
    const uint8_t *layer_kind;
    bool no_mlp;          /* blocks are norm, mixer, residual: no MLP (Mamba) */
    const uint8_t *layer_no_mlp; /* [n_layers] or NULL: 1 = that layer's block has no MLP (Nemotron-H's
                                  * mixer-only blocks; its MLP-only ones are MXL_LAYER_MLP_ONLY) */
    int64_t ssm_conv;     /* the convolution's width K */
    int64_t ssm_inner;    /* DI: the mixer's inner width (Mamba intermediate_size, expand * hidden) */
    int64_t ssm_state;    /* N: state size per channel */
    int64_t ssm_dt_rank;  /* R: MAMBA's time-step rank */
    int64_t ssm_heads, ssm_groups; /* MAMBA2: NH heads of DI / NH, G groups of B and C */
    float ssm_dt_min, ssm_dt_max;  /* MAMBA2: time_step_limit (0, inf) */
    float ssm_norm_eps;   /* MAMBA2's gated RMSNorm */
    float ssm_bcdt_eps;   /* > 0: MAMBA's time step, B and C each through an RMSNorm (weightless: Falcon
                           * Mamba; with the weights names.ssm_dt_norm ...: Jamba) */
    int64_t gdn_k_heads, gdn_v_heads, gdn_k_dim, gdn_v_dim; /* GDN: NK, NV, dk, dv */
    bool gdn_split;       /* GDN: separate in_proj_qkv [q; k; v] and in_proj_z (Qwen 3.5, GGUF), not
                           * Qwen3-Next's per-key-head in_proj_qkvz */
    bool gdn_kda;         /* GDN as Kimi Delta Attention (recurrent.h): q / k / v projections and convolutions
                           * of their own, a decay per key channel, a sigmoid output gate (Kimi Linear) */
    bool gdn_v_tiled;     /* GDN: value head h reads key head h % NK (llama.cpp's qwen35 files order the
                           * value heads tiled), not h / (NV / NK) */
    bool parallel_ssm;    /* every layer runs attention and a Mamba-2 mixer side by side on the same normed
                           * input: ssm_out_mult * mamba(h) + attn_out_mult * attn(h) (Falcon-H1) */
    float ssm_out_mult, attn_out_mult; /* (1 unless parallel_ssm) */
    float ssm_in_mult;    /* in_proj's output times this (its input's multiplier; 1) */
    const float *ssm_in_scale; /* [MAMBA2 in_dim] then each output column times these (Falcon-H1's muP
                                * vector of z, x, B, C, dt multipliers), or NULL */
    bool ssm_no_norm;     /* MAMBA2 without the gated RMSNorm: y * silu(z) goes to out_proj (Falcon-H1) */
    float mlp_gate_mult, mlp_down_mult; /* the MLP's gate projection before the activation, and its
                                         * output, times these (Falcon-H1's mlp_multipliers; 1) */
    bool attn_q_gate;     /* q_proj's rows per head are [query; gate] and the attention output is
                           * multiplied by sigmoid(gate) before o_proj (Qwen3-Next's full attention) */
    bool ssm_conv_bias, ssm_proj_bias; /* the convolution has a bias; in_proj / out_proj have biases */
    /* Per-layer attention and MLP widths (Gemma 4: global layers have wider heads and their own KV
     * head count; KV-shared layers a double-wide MLP), or NULL: head_dim / n_kv_heads / ffn on
     * every layer. With them head_dim * n_kv_heads (and n_heads * head_dim) is at least every
     * layer's: those size the buffers and each KV cache row, which a narrower layer fills in part. */
    const int32_t *layer_head_dim, *layer_kv_heads, *layer_ffn;
    /* [n_layers] -1, or the earlier attention layer whose cached K and V this layer attends over
     * instead of computing its own (Gemma 4's KV-shared layers: no k/v projections, no cache rows) */
    const int32_t *layer_kv_source;
    bool v_norm;          /* values RMS-normed per head without a weight before caching (Gemma 4) */
    bool attn_k_eq_v;     /* a layer without v_proj takes V from k_proj's output, before the key's norm and
                           * RoPE (Gemma 4's attention_k_eq_v global layers) */
    /* Per-layer input embeddings (Gemma 4's PLE; ple_dim 0: none). Once per token:
     *   p = (RMSNorm_P(x0 Wm^T / sqrt(hidden)) + E_ple[id] * sqrt(P)) / sqrt(2)   [n_layers, P]
     * with x0 the scaled token embedding; after layer l's MLP residual:
     *   x += RMSNorm(W_proj (act(x W_gate^T) * p[l]))                              [hidden] */
    int64_t ple_dim, ple_vocab;
    bool layer_scalar;    /* each layer's output times its own stored scalar (Gemma 4's layer_scalar) */
    /* Every layer runs its dense MLP and the experts side by side on the attention residual x
     * (Gemma 4's MoE block): x += post_norm(post_norm_1(mlp(ffn_norm(x))) + post_norm_2(experts(
     * pre_norm_2(x)))), routed on RMSNorm(x) * router_in_scale / sqrt(hidden) (weightless norm) */
    bool moe_beside_mlp;
    /* Gemma 3n (models/altup.h): altup_n > 0 streams of the hidden state, each layer's block run on
     * stream altup_active: attention with a Laurel residual beside it (x = (a + attn + laurel) / sqrt 2,
     * a the active prediction), then the MLP; the per-layer input added to the other streams (of the
     * corrected active stream, times its correct_output_scale with altup_correct_scale). */
    int64_t altup_n, altup_active, laurel_rank;
    bool altup_correct_scale;
    const float *layer_topk_k; /* [n_layers] each MLP's Gaussian top-k std multiplier (altup.h; 0: none), or NULL */
} mxl_decoder_hparams;

/* A norm's weight and (LayerNorm) bias as f32; w == NULL: the norm is absent. */
typedef struct mxl_decoder_norm {
    const float *w, *b;
} mxl_decoder_norm;

/* One layer's experts: every matrix a view of the checkpoint (per-expert tensors, or rows of a
 * stacked [n_experts, rows, cols] one), packed at load like the other matrices unless the
 * experts are streamed (mxl_decoder.experts_streamed; models/moe.h). */
typedef struct mxl_moe_layer {
    mxl_weight router;                 /* [n_experts, hidden] */
    const float *router_bias;          /* [n_experts] SIGMOID's selection-only correction, or NULL */
    const float *router_logit_bias;    /* [n_experts] added to the router's logits (GPT-OSS), or NULL */
    const float *gate_b, *up_b, *down_b; /* the experts' biases [n_experts, moe_ffn] x2, [n_experts,
                                          * hidden] (GPT-OSS), or NULL */
    mxl_weight *gate, *up, *down;      /* [n_experts] each: [moe_ffn, hidden] x2, [hidden, moe_ffn] */
    mxl_weight sh_gate, sh_up, sh_down; /* the shared expert (rows 0: none) */
    mxl_weight sh_router;              /* [1, hidden] the shared expert's gate (rows 0: none) */
    const float *expert_scale;         /* [n_experts] each chosen expert's weight times its own (Gemma 4), or NULL */
    const float *router_in_scale;      /* [hidden] hp.moe_beside_mlp: the router input's scale (times 1/sqrt(hidden)) */
} mxl_moe_layer;

/* One layer's multi-head latent attention (models/mla.h); wq of the layer is q_proj
 * [n_heads * (nope + rope), hidden] or q_b_proj [.., mla_q_rank]. */
typedef struct mxl_mla_layer {
    mxl_weight q_a;            /* [mla_q_rank, hidden] (rows 0: no low-rank queries) */
    const float *q_a_norm;     /* [mla_q_rank] */
    mxl_weight kv_a;           /* [mla_kv_rank + mla_rope_dim, hidden]: the latent, then the rotated key */
    const float *b_q_a, *b_kv_a; /* biases (attention_bias) or NULL */
    const float *kv_a_norm;    /* [mla_kv_rank] */
    mxl_weight *uk;            /* [n_heads] each [mla_kv_rank, mla_nope_dim]: a head's query into the latent
                                * (kv_b_proj's key rows transposed, or GGUF attn_k_b) */
    mxl_weight *uv;            /* [n_heads] each [mla_v_dim, mla_kv_rank]: the latent into a head's value */
} mxl_mla_layer;

typedef struct mxl_decoder_layer {
    mxl_weight wq, wk, wv, wo, w_gate, w_up, w_down; /* w_gate unbound (rows 0) in plain MLPs */
    const float *bq, *bk, *bv, *bo, *b_gate, *b_up, *b_down; /* or NULL */
    mxl_decoder_norm attn_norm, ffn_norm, post_attn_norm, post_ffn_norm;
    mxl_decoder_norm attn_sub_norm; /* BitNet: RMSNorm of the attention output [n_heads * head_dim]
                                     * before o_proj (w NULL: none) */
    mxl_decoder_norm ffn_sub_norm;  /* BitNet: RMSNorm of the MLP's activation [ffn] before down_proj */
    const float *q_norm, *k_norm; /* [head_dim] or [heads * head_dim] (QK_NORM_FULL), or NULL */
    mxl_moe_layer *moe;           /* a sparse MoE block instead of the MLP (w_gate.. unbound), or NULL */
    mxl_mla_layer *mla;           /* latent attention (wk, wv unbound), or NULL */
    int64_t n_heads;  /* this layer's query heads (hp.layer_heads, else hp.n_heads) */
    bool sliding;
    bool chunked;     /* chunked attention (hp.attn_chunk) */
    bool rope;        /* applies RoPE (false on NoPE layers and with learned positions) */
    /* xIELU: x > 0 ? ap x^2 + beta x : (expm1(min(x, eps)) - x) an + beta x, with
     * ap = softplus(alpha_p), an = beta + softplus(alpha_n) */
    float xielu_ap, xielu_an, xielu_beta, xielu_eps;
    float attn_scale;
    const float *sinks; /* [n_heads] attention sink logits (GPT-OSS), or NULL */
    mxl_weight w_attn_gate; /* hp.attn_out_gate: [n_heads * head_dim, hidden] (rows 0: none) */
    mxl_rec_layer *rec;     /* a recurrent mixer instead of attention (hp.layer_kind), or NULL */
    int64_t kv_layer;       /* attention layers: this layer's index among them (its KV pool layer; a
                             * KV-shared layer's is its source's) */
    int64_t head_dim, n_kv_heads, ffn; /* this layer's (hp.layer_head_dim ..., else hp's) */
    bool kv_shared;         /* reads another layer's cache (hp.layer_kv_source): computes queries only */
    const float *v_norm;    /* hp.v_norm: ones [head_dim] (the weightless RMSNorm), or NULL */
    mxl_weight ple_gate;    /* hp.ple_dim: [P, hidden] */
    mxl_weight ple_proj;    /* [hidden, P] */
    mxl_decoder_norm ple_norm; /* the RMSNorm after ple_proj */
    float scalar;           /* hp.layer_scalar: the layer's output times this (else 1) */
    mxl_decoder_norm moe_dense_post_norm, moe_pre_norm, moe_post_norm; /* hp.moe_beside_mlp's three norms */
    struct mxl_altup_layer *altup; /* hp.altup_n: the layer's AltUp and Laurel weights, or NULL */
    float topk_k;           /* hp.layer_topk_k's (0: a dense MLP activation) */
    bool has_mlp;           /* the block has an MLP or MoE (not with hp.no_mlp / layer_no_mlp) */
    bool no_mixer;          /* no token mixer (MXL_LAYER_MLP_ONLY): the block is its MLP alone */
} mxl_decoder_layer;

typedef struct mxl_decoder {
    mxl_decoder_hparams hp;
    mxl_arena arena; /* layers, per-layer flags, f32 copies of vectors, transposed Conv1D weights */
    const mxl_backend *be; /* the backend the weights are prepared for and run on (the host's) */
    mxl_arena tiles; /* the backend's layouts of the matrices (weight_prepare): one block (huge pages: arena.c) */
    mxl_weight tok_embd, output, pos_embd; /* pos_embd: learned positions (rows 0: none) */
    const float *output_bias;              /* [vocab] with lm_head_bias, else NULL */
    bool experts_streamed; /* routed experts left in the checkpoint's mapping (MLXCEL_EXPERT_STREAM) */
    mxl_decoder_norm output_norm;
    mxl_weight ple_embd;       /* hp.ple_dim: [ple_vocab, n_layers * P] per-layer input embeddings */
    mxl_weight ple_model_proj; /* [n_layers * P, hidden] */
    const float *ple_proj_norm; /* [P] */
    mxl_weight *altup_proj, *altup_unembed; /* hp.altup_n: [altup_n - 1] each [hidden, hidden] (the streams in and out) */
    mxl_decoder_layer *layers;
    int64_t n_kv_layers;       /* attention layers (those with KV cache rows) */
    int64_t q_dim, kv_dim;     /* the widest layer's queries (n_heads * head_dim) and KV row
                                * (n_kv_heads * head_dim): the buffers' and KV rows' widths */
    size_t rec_state_floats;   /* one sequence's recurrent state, every recurrent layer (0: none) */
} mxl_decoder;

/* Finds the family of the checkpoint's model_type, fills the hyper-parameters from the typed
 * config (and config.json / GGUF facts) and binds every weight, checking shapes. Hugging Face
 * safetensors checkpoints (dense F32/F16/BF16 or MLX affine-quantized) of every family in
 * decoder_family.h load; GGUF checkpoints of every family whose record names a gguf_arch
 * (families.h; `mlxcel arch` lists them, a refusal names the model_type). Unknown model types,
 * unsupported config values (RoPE types, activations, quantization modes...) are refused by name;
 * errors name the file and the tensor or key. */
mxl_status mxl_decoder_load(const mxl_checkpoint *ck, mxl_decoder *out, mxl_error *err);
void mxl_decoder_free(mxl_decoder *d);
/* Only the hyper-parameters (d->hp, per-layer arrays in d->arena) of what mxl_decoder_load would
 * load, reading no weights: for memory estimates. Refuses what load refuses by name; free with
 * mxl_decoder_free. */
mxl_status mxl_decoder_read_hparams(const mxl_checkpoint *ck, mxl_decoder *d, mxl_error *err);

/* Storage of a state's K or V cache (the CLI's --cache-type-k / --cache-type-v).
 *  AUTO: f16 on the fast path, f32 on the reference path (mxl_decoder_state_set_reference), the
 *        default of mxl_decoder_state_create;
 *  F32:  exact; F16: IEEE half (round to nearest even on append), half the bytes of f32;
 *  I8:   symmetric int8 in groups of 32 elements along each head vector (llama.cpp's q8_0
 *        grouping; the whole head vector when head_dim is not a multiple of 32) with one f32
 *        scale max|x|/127 per group (the backend's kv_quantize_i8): (1 + 4/32)/4 of the f32 bytes
 *        (the spec's `int8`).
 *  TURBO4, TURBO3: TurboQuant (backends/cpu/kv_turbo.h): each head rotated by a randomized
 *        Hadamard transform over chunks of the largest power of two (<= 256) dividing every head,
 *        then 32-value blocks of an f16 norm and 4- / 3-bit Lloyd-Max codes (18 / 14 bytes a
 *        block). The queries are rotated the same way before attention and a TurboQuant V's
 *        outputs rotated back after it. Not with latent attention (refused by name).
 *  Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: llama.cpp's --cache-type-k/-v block formats, exactly ggml's
 *        (quantize_row_<fmt>_ref's bytes, backends/cpu/kv_quant.h): each head vector is
 *        head_dim / 32 blocks of 32 values, 34 / 18 / 20 / 22 / 24 bytes a block. They need every
 *        head (and, with latent attention, where V starts in a row) on a multiple of 32:
 *        mxl_decoder_kv_check refuses them by name otherwise.
 * Explicit types are kept on both paths. Values are converted when appended; attention reads
 * them directly (f16 / int8 / block-format dot and accumulate kernels), nothing is expanded to
 * f32 in the cache. */
typedef enum mxl_decoder_kv_type {
    MXL_DECODER_KV_AUTO = 0,
    MXL_DECODER_KV_F32,
    MXL_DECODER_KV_F16,
    MXL_DECODER_KV_I8,
    MXL_DECODER_KV_Q8_0,
    MXL_DECODER_KV_Q4_0,
    MXL_DECODER_KV_Q4_1,
    MXL_DECODER_KV_Q5_0,
    MXL_DECODER_KV_Q5_1,
    MXL_DECODER_KV_TURBO4,
    MXL_DECODER_KV_TURBO3,
    MXL_DECODER_KV_COUNT
} mxl_decoder_kv_type;

typedef struct mxl_decoder_kv_opts {
    mxl_decoder_kv_type k, v;
    int64_t v_edge; /* with a TurboQuant V: the first and last v_edge attention layers keep V in F16
                     * (the spec's --turbo-boundary-v; clamped to half the layers); else ignored */
    int64_t k_last; /* the last k_last attention layers keep K and V in F16 where their types are
                     * quantized (the server's --kv-skip-last-layer: 1); 0: none */
    int64_t group;  /* the int8 cache's scale group (the server's --kv-group-size; it must divide
                     * every head); 0: mxl_decoder_kv_group's */
} mxl_decoder_kv_opts;

/* The CLI's name of a type: "auto", "f32", "f16", "int8", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
 * "turbo4", "turbo3". */
const char *mxl_decoder_kv_type_name(mxl_decoder_kv_type t);
/* Whether this model can keep its cache in the types of o (NULL: AUTO): the block formats need
 * every head_dim (and latent attention's rope and rank dims) a multiple of 32; refused by name
 * ("cache type q4_0 needs head_dim a multiple of 32, this model has 80"). */
mxl_status mxl_decoder_kv_check(const mxl_decoder_hparams *hp, const mxl_decoder_kv_opts *o, mxl_error *err);
/* The int8 cache's scale group: 32 where it divides every head (and latent attention's parts),
 * else the whole head (latent rows: the largest power of two dividing both parts). The block
 * formats need it to be 32. */
int64_t mxl_decoder_kv_group(const mxl_decoder_hparams *hp);
/* Whether an int8 scale group of g divides every head (latent attention: both parts of a row). */
bool mxl_decoder_kv_group_fits(const mxl_decoder_hparams *hp, int64_t g);

/* (engine/memory_estimate.h parses the CLI's names - f32, fp16, q8_0, ..., int8 - into its own
 * mxl_kv_type; engine/model.c maps them onto these.) */

/* One sequence's KV cache and all scratch buffers for up to max_batch tokens per call. max_ctx is
 * capped at the model's max_position_embeddings. mxl_decoder_state_create uses MXL_DECODER_KV_AUTO for
 * K and V; the _ex form takes the types (opts NULL: AUTO).
 * The cache is paged: blocks of MXL_KV_BLOCK (32) positions from a KV block pool
 * (models/kv_pool.h) found through the state's block table; blocks are taken from the pool as the
 * sequence grows (never inside the matmul/attention loop: before a forward runs) and given back on
 * truncate / destroy. States made by create / create_ex own a private pool of ceil(max_ctx / 32)
 * blocks (so they never run dry); mxl_decoder_state_create_pooled puts a state on a shared pool,
 * where states can share prefix blocks (mxl_decoder_state_adopt / _fork, copy-on-write) and a
 * forward fails with MXL_ERR_NOMEM, leaving the position unchanged, when the pool is exhausted. */
typedef struct mxl_decoder_state mxl_decoder_state;
mxl_status mxl_decoder_state_create(const mxl_decoder *d, int64_t max_ctx, int64_t max_batch,
                                    mxl_threadpool *pool, mxl_decoder_state **out, mxl_error *err);
mxl_status mxl_decoder_state_create_ex(const mxl_decoder *d, int64_t max_ctx, int64_t max_batch,
                                       mxl_threadpool *pool, const mxl_decoder_kv_opts *opts,
                                       mxl_decoder_state **out, mxl_error *err);
/* A state on a shared pool made with mxl_decoder_kv_pool_cfg (the pool's types are the cache's;
 * max_ctx is still the state's context capacity). The pool must outlive the state. */
mxl_status mxl_decoder_state_create_pooled(const mxl_decoder *d, mxl_kv_pool *kvp, int64_t max_ctx, int64_t max_batch,
                                           mxl_threadpool *pool, mxl_decoder_state **out, mxl_error *err);
/* The pool configuration for this model's states with the given types (AUTO resolved for the
 * path: reference = f32, else f16) and n_blocks blocks. */
mxl_status mxl_decoder_kv_pool_cfg(const mxl_decoder *d, const mxl_decoder_kv_opts *opts, bool reference, int64_t n_blocks,
                                   mxl_kv_pool_cfg *out, mxl_error *err);
mxl_kv_pool *mxl_decoder_state_kv_pool(const mxl_decoder_state *s);
/* The block table: *ids [n] with n = ceil(pos / 32); block i holds positions 32i .. 32i + 31. */
int64_t mxl_decoder_state_blocks(const mxl_decoder_state *s, const int32_t **ids);
/* Replaces the state's cache by positions 0..n_pos-1 held in blocks ids[0 .. ceil(n_pos / 32)) of
 * the state's pool, by reference (each block's refcount + 1; the old blocks are released): the
 * next forward runs at position n_pos. The blocks must hold those positions of the same token
 * prefix (a state's table, or prompt-cache hits of mxl_kv_pool_lookup); a shared block is copied
 * before the state writes into it. Fails (nothing changed) when n_pos exceeds the capacity or an
 * id is outside the pool. */
mxl_status mxl_decoder_state_adopt(mxl_decoder_state *s, const int32_t *ids, int64_t n_pos, mxl_error *err);
/* The same for a model with recurrent layers: with the blocks, the recurrent state those n_pos
 * positions left (rec: mxl_decoder_state_rec_bytes bytes that mxl_decoder_state_rec_save wrote
 * when a state of the same model stood at n_pos after the same tokens; the prompt cache's
 * snapshots). Without recurrent layers rec is ignored. */
mxl_status mxl_decoder_state_adopt_rec(mxl_decoder_state *s, const int32_t *ids, int64_t n_pos, const void *rec, mxl_error *err);
/* Copies the recurrent layers' state (mxl_decoder_state_rec_bytes bytes) into dst. */
void mxl_decoder_state_rec_save(const mxl_decoder_state *s, void *dst);
/* dst adopts the first n_pos (<= src's position) positions of src; both on the same pool. Running
 * dst on from there gives, bit for bit, the logits of a state that ran the whole prefix itself. */
mxl_status mxl_decoder_state_fork(mxl_decoder_state *dst, const mxl_decoder_state *src, int64_t n_pos, mxl_error *err);
/* The storage in use now for K (v false) or V (v true): any type but AUTO. */
mxl_decoder_kv_type mxl_decoder_state_kv_type(const mxl_decoder_state *s, bool v);
/* Bytes of the KV cache storage (K and V of every layer and position, int8 scales and the block
 * formats' d / m included): the
 * private pool's size (ceil(max_ctx / 32) blocks), or the blocks held now on a shared pool. */
uint64_t mxl_decoder_state_kv_bytes(const mxl_decoder_state *s);
/* Bytes of the recurrent layers' state (models/recurrent.h; fixed per sequence, 0 without such layers). */
uint64_t mxl_decoder_state_rec_bytes(const mxl_decoder_state *s);
void mxl_decoder_state_destroy(mxl_decoder_state *s);
/* Number of positions in the cache (the next token runs at this position). */
int64_t mxl_decoder_state_pos(const mxl_decoder_state *s);
/* The context capacity (max_ctx after the cap). */
int64_t mxl_decoder_state_capacity(const mxl_decoder_state *s);
/* Forgets positions >= pos (no-op when pos >= the current position; pos < 0 counts as 0): the
 * next forward runs at position pos, so a cached prompt prefix is kept and only a new suffix
 * needs running. A model with recurrent layers (hp.layer_kind) cannot go back to a position
 * before the current one: its state starts over at 0 instead (mxl_decoder_state_pos says where
 * the next forward runs). Such states adopt cached blocks only with the state of their last
 * position (mxl_decoder_state_adopt refuses n_pos > 0; mxl_decoder_state_adopt_rec) and fork at
 * the source's position only, copying its recurrent state. */
void mxl_decoder_state_truncate(mxl_decoder_state *s, int64_t pos);
/* Runs every matmul through the plain f32 reference (dequantized weights, f32 activations) instead
 * of the fast kernels that quantize activations to int8: slow, the yardstick in tests. Also
 * switched on for new states by the environment variable MXL_DECODER_REFERENCE=1. An AUTO cache
 * follows the path: switching re-stores the cached positions in the path's type (f32 <-> f16;
 * f16 -> f32 is exact), so a reference state made by mxl_decoder_state_create keeps f32 KV. If
 * that allocation fails the cache keeps its current storage (mxl_decoder_state_kv_type says).
 * A state on a shared pool keeps the pool's storage (only the matmul path switches). */
void mxl_decoder_state_set_reference(mxl_decoder_state *s, bool on);
/* The path states made from now on start on: the environment's MXL_DECODER_REFERENCE=1, read once
 * (at the first call), or what mxl_decoder_set_reference_default set (tests switch it). */
bool mxl_decoder_reference_default(void);
void mxl_decoder_set_reference_default(bool on);
/* Runs tokens[0..n) at the next positions (in chunks of max_batch) and writes the logits of the
 * last one to logits[vocab]. Fails (nothing appended) when the context would overflow or an id is
 * out of range. */
mxl_status mxl_decoder_forward(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens,
                               int64_t n, float *logits, mxl_error *err);
/* Rows of a call given as embeddings instead of token ids (an image's features): tokens
 * [row, row + n) of the call take emb [n, hidden] as their input (at the residual stream's scale:
 * no embed_scale; emb NULL: the rows keep their tokens' embeddings) and, unless causal, form a
 * bidirectional block - each of its queries sees the whole block, sliding windows still bounding
 * from below (transformers' token_type_ids mask of Gemma 3, PaliGemma's prefix). A bidirectional
 * block is never split across passes; a causal one may be (its rows run like text). */
typedef struct mxl_decoder_media {
    int64_t row, n;
    const float *emb; /* [n, hidden], or NULL */
    bool causal;      /* the rows attend causally, as text (LLaVA, Qwen2-VL, ...) */
    bool joined;      /* one bidirectional block with the next media block, which starts where this
                       * one ends (PaliGemma's prefix: image rows, then text rows with emb NULL);
                       * the joined blocks run in one pass, as one block */
    /* M-RoPE models (hp.mrope_section): grid_h > 0 makes the block one image of grid_h x grid_w
     * rows (n of them, row-major) at 3-D positions (st, st + y, st + x), st the RoPE position its
     * first row would have as text; the rows after it continue from st + max(grid_h, grid_w)
     * (transformers' get_rope_index), in this call and, through the state's position delta, in
     * later ones (a truncation back to the image's start forgets the delta). 0: text positions. */
    int64_t grid_h, grid_w;
    /* DeepStack (Qwen3-VL): after layer l < n_deep the block's rows add deep + l * deep_stride *
     * hidden [n, hidden] (deep_stride: the rows between two layers' slabs, the image's token count;
     * NULL: none) */
    const float *deep;
    int n_deep;
    int64_t deep_stride;
} mxl_decoder_media;
#define MXL_DECODER_MAX_MEDIA 512 /* (a Pixtral image is one run per row of patches: 64 rows at 1024 px) */
#define MXL_MROPE_MAX_ROTARY 1024
/* The end (one past the last row) of the joined blocks media[i] belongs to. */
static inline int64_t mxl_decoder_media_unit_end(const mxl_decoder_media *media, int n_media, int i) {
    while (i + 1 < n_media && media[i].joined) i++;
    return media[i].row + media[i].n;
}
/* The rows [a, e) of block m (inside it) as a block of their own at row a - origin: emb and deep
 * advanced to them. */
static inline mxl_decoder_media mxl_decoder_media_slice(const mxl_decoder_media *m, int64_t a, int64_t e, int64_t origin, int64_t hidden) {
    mxl_decoder_media r = *m;
    r.row = a - origin, r.n = e - a;
    if (m->emb) r.emb = m->emb + (a - m->row) * hidden;
    if (m->deep) r.deep = m->deep + (a - m->row) * hidden;
    return r;
}
/* A block that may be split across passes: causal rows attending like text, not joined, not an
 * M-RoPE grid (whose positions are the image's as a whole). */
static inline bool mxl_decoder_media_splittable(const mxl_decoder_media *m) { return m->causal && !m->joined && m->grid_h == 0; }
/* M-RoPE (media blocks with a grid): the RoPE offset of the rows after the first n_pos positions
 * of a prompt whose media are media[0 .. n_media) (row order; blocks that end past n_pos do not
 * count), as the forward that ran them left it - so a state whose cached prefix of n_pos
 * positions came from elsewhere (the prompt cache) continues with the right positions. Sets the
 * state's offset (zero when no image lies in the prefix). */
void mxl_decoder_state_set_media_prefix(mxl_decoder_state *s, const mxl_decoder_media *media, int n_media, int64_t n_pos);
/* The rows of the largest unit of joined blocks (a pass must take at least that many). */
int64_t mxl_decoder_media_max_unit(const mxl_decoder_media *media, int n_media);
/* mxl_decoder_forward with media blocks (in order, not overlapping, each bidirectional unit at
 * most the state's max_batch rows; the token ids of their rows are ignored). Models with per-layer inputs,
 * AltUp or recurrent layers refuse them. */
mxl_status mxl_decoder_forward_media(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens, int64_t n,
                                     const mxl_decoder_media *media, int n_media, float *logits, mxl_error *err);
/* As mxl_decoder_forward, but writes the last token's final hidden state (after the output norm,
 * before the LM head) to hidden[hidden_size] instead of logits: the last-token pooling of
 * decoder-based embedders such as Qwen3-Embedding. */
mxl_status mxl_decoder_forward_hidden(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens,
                                      int64_t n, float *hidden, mxl_error *err);
/* tokens[0..n) in one pass (n at most the state's batch: a bidirectional model's queries see the
 * whole sequence) at the next positions, every token's final hidden state (after the output norm)
 * to hidden[n, hidden_size]: the pooling of decoder embedders (EmbeddingGemma's mean). */
mxl_status mxl_decoder_forward_hidden_all(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens,
                                          int64_t n, float *hidden, mxl_error *err);
/* tokens[0..n) in one pass (n at most the state's max_batch) at the next positions, the
 * next-token logits after every one of them to logits[n, vocab]: the verification pass of
 * speculative decoding. Row t equals, bit for bit, the logits of running tokens[0..t] one at a
 * time (the matmuls are batch-invariant, attention is per query), so a verified draft gives the
 * tokens plain decoding gives. */
mxl_status mxl_decoder_forward_all(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens, int64_t n, float *logits,
                                   mxl_error *err);
/* LoRA (models/lora.h): the state's rows run with the updates of n adapters, each at its user
 * scale (n 0: none), whatever the other states of a batch run. The adapters must have been loaded
 * for this decoder and outlive the setting; the state's scratch for them is allocated here (the
 * only failures: more than MXL_DECODER_MAX_LORA, out of memory; the setting then unchanged). */
struct mxl_lora;
typedef struct mxl_decoder_lora {
    const struct mxl_lora *lora;
    float scale;
} mxl_decoder_lora;
#define MXL_DECODER_MAX_LORA 8
mxl_status mxl_decoder_state_set_lora(mxl_decoder_state *s, const mxl_decoder_lora *use, int n, mxl_error *err);
/* The most tokens one call runs in one pass (the state's max_batch). */
int64_t mxl_decoder_state_max_batch(const mxl_decoder_state *s);
/* One decode step of n_seqs sequences together: tokens[i] runs at the next position of states[i]
 * (each state at its own position, with its own context capacity) and logits[i * vocab ..] get
 * its next-token logits (logits [n_seqs, vocab]). Every matmul (QKV, O, MLP, LM head) runs once
 * on the [n_seqs, hidden] block, so the weights are read once for all sequences (the point on a
 * memory-bound CPU); RoPE, the KV append and attention (windows, soft-caps, NoPE layers) are
 * per sequence, over its own cache only. Each sequence's logits equal, bit for bit, those of a
 * one-token mxl_decoder_forward on its state, on both paths: activations are quantized per row
 * and the backend's matmuls are batch-invariant (backend.h), so greedy output does not
 * depend on which other sequences share the step (tests/unit/test_decoder_batch.c).
 * Scratch comes from the first of the states made with max_batch >= n_seqs (its pool runs the
 * matmuls; attention runs on each state's own scratch); nothing is allocated. Fails, leaving
 * every state unchanged, when a state is NULL or appears twice, a context is full, an id is out
 * of range, the states mix the reference and fast paths or no state's scratch holds n_seqs rows. */
mxl_status mxl_decoder_forward_batch(const mxl_decoder *d, mxl_decoder_state *const *states,
                                     const int32_t *tokens, int64_t n_seqs, float *logits,
                                     mxl_error *err);
/* The same with counts[i] >= 1 tokens for states[i] (tokens: each state's run after the previous
 * one's; counts NULL: one each): prompt chunks of several sequences, or prompt chunks beside
 * decode tokens, in one pass; logits[i * vocab ..] are those after states[i]'s last token. The
 * rows together must fit one state's max_batch. Each row's results are those of running its
 * state alone (the same batch invariance). */
mxl_status mxl_decoder_forward_spans(const mxl_decoder *d, mxl_decoder_state *const *states, const int32_t *tokens,
                                     const int64_t *counts, int64_t n_seqs, float *logits, mxl_error *err);

#endif
