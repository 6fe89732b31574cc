/* decoder_family.h - how a decoder family plugs into the shared decoder (decoder.c): one record
 * per Hugging Face model_type (mxl_decoder_family, below) giving its tensor names, a setup
 * function that fills what is special about it (norm kind, QK-norm, biases, multipliers, RoPE,
 * sliding layers...), its GGUF facts and its convert hooks.
 *
 * mxl_decoder_load first fills the common hyper-parameters from the typed config (sizes, eps,
 * activation from hidden_act, attention scale 1/sqrt(head_dim), attention_bias / mlp_bias, no
 * sliding window, pre-norm RMSNorm blocks with a gated MLP), then calls the family's setup, then
 * binds the tensors named by the (possibly adjusted) names table. Setup functions also run for
 * GGUF checkpoints when the family names a `gguf_arch` (then `raw` is NULL and names are GGUF's).
 *
 * Family files are models/family_<name>.c; the helpers below (family_common.c) parse the shared
 * config.json conventions once: RoPE parameters (rope_parameters, or the older rope_scaling +
 * rope_theta), activations, layer_types, and typed optional keys. */
#ifndef MXL_MODELS_DECODER_FAMILY_H
#define MXL_MODELS_DECODER_FAMILY_H

#include <stdbool.h>
#include <stddef.h>

#include "models/decoder.h"

typedef struct json_t json_t;

/* Tensor names as module paths: a matrix binds "<module>.weight" (dense, GGUF block format, or
 * MLX affine with "<module>.scales" / "<module>.biases"), a bias "<module>.bias", a norm
 * "<module>.weight" (+ ".bias" for LayerNorm). Per-layer modules sit under "<layers><i>.".
 * NULL: the family has no such module. Which optional modules are bound follows the
 * hyper-parameters (pre_norms, post_norms, qk_norm_kind, biases, mlp kind). */
typedef struct mxl_decoder_names {
    const char *embed;      /* "model.embed_tokens" */
    const char *pos_embed;  /* learned positions ("transformer.wpe") or NULL */
    const char *final_norm; /* "model.norm" */
    const char *lm_head;    /* "lm_head"; absent or tied: the embedding */
    const char *layers;     /* "model.layers." */
    const char *attn_norm, *q, *k, *v, *qkv, *o, *q_norm, *k_norm, *post_attn_norm;
    const char *ffn_norm, *gate, *up, *gate_up, *down, *post_ffn_norm;
    const char *attn_sub_norm, *ffn_sub_norm; /* BitNet's norms before o_proj and down_proj (NULL: none) */
    const char *act_params; /* xIELU's per-layer scalars "<act_params>.alpha_p" ... (Apertus) */
    /* Multi-head latent attention (hp.mla_kv_rank > 0): queries through q (q_proj) or q_a, its
     * RMSNorm q_a_norm and q_b; keys and values through kv_a (kv_a_proj_with_mqa), kv_a_norm and
     * kv_b [heads * (nope + v), kv_rank], or GGUF's split k_b [heads, kv_rank, nope] and v_b
     * [heads, v, kv_rank] when the file has them. */
    const char *q_a, *q_a_norm, *q_b, *kv_a, *kv_a_norm, *kv_b, *k_b, *v_b;
    /* Mixture of experts (hp.n_experts > 0, on the layers hp.layer_is_moe marks): the router
     * "<moe_router>" [n_experts, hidden]; the experts as one module per expert
     * "<experts><e>.<expert_gate | expert_up | expert_down>" (Hugging Face), else stacked 3-D
     * tensors [n_experts, rows, cols] "<exps_gate | exps_up | exps_down>" (MLX switch_mlp, GGUF
     * ffn_*_exps) or a stacked fused gate then up "<exps_gate_up>" [n_experts, 2 moe_ffn, hidden]
     * (Granite MoE) with its down projection "<exps_fused_down>" (else "<exps_down>"); the shared expert "<sh_gate | sh_up | sh_down>" and its gate "<sh_router>"
     * [1, hidden] (GGUF stores it as a vector [hidden]). */
    const char *moe_router, *experts, *expert_gate, *expert_up, *expert_down;
    const char *moe_router_bias; /* "<layers><i>.<moe_router_bias>" [n_experts] (hp.moe_router SIGMOID) */
    const char *exps_gate, *exps_up, *exps_down, *exps_gate_up, *exps_fused_down;
    const char *sh_gate, *sh_up, *sh_down, *sh_router;
    const char *sh_gate_up; /* the shared expert's gate and up as one [2 S, hidden] matrix (Granite 4), or NULL */
    bool conv1d;            /* GPT-2 Conv1D: dense layer matrices stored [in, out] */
    bool qkv_per_head;      /* qkv rows grouped per head: [heads][q, k, v][head_dim] (GPT-NeoX) */
    bool exps_native_transposed; /* transformers' own stacked experts "<experts>gate_up_proj" /
                                  * "down_proj" are [E, in, out] (Llama 4): bound as transposed copies */
    bool exps_native_interleaved; /* ... with gate_up's outputs alternating gate, up (GPT-OSS); their
                                   * biases "<experts>gate_up_proj_bias" / "down_proj_bias" */
    bool exps_down_transposed; /* the bare stacked "<exps_down>" holds E matrices [in, out] (DBRX's w2) */
    const char *sinks;      /* per-layer attention sinks "<layers><i>.<sinks>" [n_heads] (hp.attn_sinks) */
    const char *attn_gate;  /* the attention output gate's projection (hp.attn_out_gate) */
    /* Recurrent mixers (hp.layer_kind, models/recurrent.h), per layer: "<ssm_in>" (in_proj),
     * "<ssm_conv>" (the depthwise convolution's [C, 1, K] or [C, K] weight, + ".bias"),
     * "<ssm_x>" x_proj and "<ssm_dt>" dt_proj (+ bias) for Mamba, "<ssm_dt_bias>" for Mamba-2,
     * "<ssm_a>" (A_log, or with ssm_a_neg GGUF's -exp(A_log) "ssm_a"), "<ssm_d>", the gated norm
     * "<ssm_norm>", "<ssm_out>" (out_proj). Names are the tensors' full names after the layer
     * prefix, suffix included where they are parameters rather than modules (A_log, D, dt_bias). */
    const char *ssm_in, *ssm_conv, *ssm_x, *ssm_dt, *ssm_dt_bias, *ssm_a, *ssm_d, *ssm_norm, *ssm_out;
    const char *ssm_ba, *ssm_in_a, *ssm_in_z; /* GDN: in_proj_ba (or in_proj_b when ssm_in_a names in_proj_a),
                                               * and with hp.gdn_split in_proj_z */
    /* GDN with hp.gdn_kda (Kimi Delta Attention): ssm_in the query projection, ssm_k / ssm_v the key
     * and value ones, ssm_conv / ssm_conv_k / ssm_conv_v their convolutions ([C / 3, 1, K] each),
     * ssm_ba b_proj, the gates' low-rank pairs ssm_f_a, ssm_f_b and ssm_g_a, ssm_g_b */
    const char *ssm_k, *ssm_v, *ssm_conv_k, *ssm_conv_v, *ssm_f_a, *ssm_f_b, *ssm_g_a, *ssm_g_b;
    bool ssm_a_neg;         /* ssm_a holds A = -exp(A_log) already (GGUF) */
    const char *ssm_dt_norm, *ssm_b_norm, *ssm_c_norm; /* MAMBA's weighted dt / B / C RMSNorms (Jamba), or NULL */
    const char *ssm_gx_w, *ssm_gx_b, *ssm_ga_w, *ssm_ga_b, *ssm_lru_param; /* RGLRU's gate parameters and
                                                                        * recurrent_param (full names) */
    /* Per-layer inputs (hp.ple_dim): the table "<ple_embed>" [ple_vocab, n_layers * P], the model
     * projection "<ple_model_proj>" and its norm "<ple_proj_norm>" (full modules), and per layer
     * "<ple_gate>", "<ple_proj>", "<ple_norm>"; "<layer_scalar>" the per-layer scalar's full name
     * after the layer prefix (hp.layer_scalar). */
    const char *ple_embed, *ple_model_proj, *ple_proj_norm, *ple_gate, *ple_proj, *ple_norm, *layer_scalar;
    /* hp.moe_beside_mlp: the norms after the dense MLP, before and after the experts; the router's
     * input scale "<moe_router_scale>" [hidden] and "<moe_expert_scale>" [n_experts] (full names
     * after the layer prefix) */
    const char *moe_dense_post_norm, *moe_pre_norm, *moe_post_norm, *moe_router_scale, *moe_expert_scale;
    /* hp.altup_n (models/altup.h): "<altup_proj><i>" / "<altup_unembed><i>" (full module prefixes,
     * i < altup_n - 1), and per layer the modality router, its norm, the prediction and correction
     * coefficients, the output scale (full name), Laurel's two projections and norm */
    const char *altup_proj, *altup_unembed, *altup_router, *altup_router_norm, *altup_predict, *altup_correct, *altup_out_scale;
    const char *laurel_l, *laurel_r, *laurel_norm;
    bool altup_stacked;     /* the projections stacked in one tensor each, "<altup_proj>" [A - 1, H, H] (GGUF) */
} mxl_decoder_names;

typedef struct mxl_family_ctx {
    const mxl_checkpoint *ck;
    const mxl_model_config *cfg;
    json_t *raw;              /* config.json, NULL for GGUF */
    bool gguf;
    mxl_decoder_hparams *hp;  /* common values already filled */
    mxl_decoder_names *names; /* the family's names (or GGUF's), adjustable */
    mxl_arena *arena;         /* the decoder's arena: per-layer arrays live here */
    mxl_error *err;
} mxl_family_ctx;

/* Everything about one decoder family, in one record (its family file defines it; families.h
 * lists the records). The loader (decoder.c), convert (convert.c), GGUF metadata reading
 * (config_gguf.c) and the registry's build facts (registry.c) all read these records, so adding a
 * family is its family file plus one line in families.h (docs/adding-a-family.md). */
typedef struct mxl_decoder_family {
    const char *model_type;  /* config.json model_type (lower case) */
    const char *registry_id; /* the registry row (registry.c) this family runs: "llama" for mistral */
    const char *hf_class;    /* transformers class convert names in config.json "architectures" */
    const mxl_decoder_names *names;
    /* Fills what is special about the family (the contract at the top of this file); refuses the
     * config values it cannot run by name. Runs for GGUF checkpoints too (c->gguf). */
    mxl_status (*setup)(mxl_family_ctx *c);
    /* Other registry rows the same decoder serves (NULL-terminated, or NULL): Qwen3's embedding
     * and generative-reranker families. */
    const char *const *also_runs;
    /* A Hugging Face quantization_config quant_method the family binds itself (BitNet's "bitnet",
     * GPT-OSS's "mxfp4"), or NULL: any other is refused at load by name. */
    const char *quant_method;
    /* What this build leaves out of the registry family (NULL: nothing); makes it "partial" in
     * `mlxcel arch` (Gemma 3 runs its text path only). */
    const char *gaps;
    /* config.json's "text_config" object, when there is one, holds the decoder's keys (a
     * vision-language checkpoint run on text): setup's c->raw is that object. */
    bool text_config;

    /* ---- GGUF facts (llama.cpp's convert_hf_to_gguf.py and llama-model.cpp) ---- */
    const char *gguf_arch;        /* general.architecture it loads from; NULL: no GGUF path */
    bool gguf_permuted_qk;        /* Q/K rows permuted for ggml's "normal" RoPE (LlamaModel converter) */
    bool gguf_norm_plus_one;      /* norm weights stored as 1 + w (the Gemma converters add 1) */
    int gguf_sliding_pattern;     /* every N-th layer global when the GGUF has no pattern key (0: none) */
    double gguf_rope_local_theta; /* RoPE base of sliding layers llama.cpp hard-codes (0: none) */
    /* llama.cpp's tensor names convert maps back (NULL: mxl_names_gguf with fused attn_qkv and
     * position_embd); the loader adjusts its names in setup. */
    const mxl_decoder_names *gguf_convert_names;

    /* ---- convert hooks (convert.c, GGUF -> transformers directory) ---- */
    /* What llama.cpp runs that the family's transformers config cannot say: refused by name
     * (NULL: nothing beyond the common checks). */
    mxl_status (*convert_check)(const mxl_checkpoint *ck, mxl_error *err);
    /* The family's config.json keys from the GGUF metadata; the common keys are in j already
     * (architectures, model_type, vocab, ids, sizes, rope_theta, rms_norm_eps). NULL: Llama's
     * (mxl_family_convert_config_llama). */
    void (*convert_config)(const mxl_checkpoint *ck, json_t *j);
} mxl_decoder_family;

/* The records (families.h), looked up by config.json model_type or GGUF general.architecture
 * (the first record claiming it); NULL when none. */
const mxl_decoder_family *mxl_decoder_family_find(const char *model_type);
const mxl_decoder_family *mxl_decoder_family_find_gguf(const char *gguf_arch);
size_t mxl_decoder_family_count(void);
const mxl_decoder_family *mxl_decoder_family_at(size_t i);
/* "llama, mistral, ..." (only those with a GGUF path when gguf_only) into buf. */
void mxl_decoder_family_list(char *buf, size_t cap, bool gguf_only);
/* mxl_decoder_read_hparams (decoder.h) that also gives the tensor names the family's setup chose
 * for this checkpoint (convert_experts.c reads the experts' layout from them). */
mxl_status mxl_decoder_read_names(const mxl_checkpoint *ck, mxl_decoder *d, mxl_decoder_names *names, mxl_error *err);

/* Names of the Llama-style layout (model.embed_tokens, model.layers.N.self_attn.q_proj, ...,
 * input_layernorm before attention, post_attention_layernorm before the MLP). */
extern const mxl_decoder_names mxl_names_llama;

/* llama.cpp's tensor names (token_embd, blk.N.attn_q, ...), the same for every GGUF family we run. */
extern const mxl_decoder_names mxl_names_gguf;

/* Gemma 2 / Gemma 3 layout: input_layernorm, post_attention_layernorm (after attention),
 * pre_feedforward_layernorm, post_feedforward_layernorm. */
extern const mxl_decoder_names mxl_names_gemma2;

/* OLMo 2's post-norm layout (no pre-norms; post_attention_layernorm and post_feedforward_layernorm
 * after each block, self_attn.q_norm / k_norm): OLMo 2 and 3, EXAONE 4. */
extern const mxl_decoder_names mxl_names_olmo2;

/* Shared between sibling families: Qwen2/Qwen3 sliding layers (family_qwen2.c); Gemma 2/3 norms,
 * embedding scale, activation, attention scale and soft-caps (family_gemma2.c). */
mxl_status mxl_family_qwen_sliding(mxl_family_ctx *c);
mxl_status mxl_family_gemma2_common(mxl_family_ctx *c);
/* Granite's multipliers and RoPE (family_granite.c; Granite MoE's too). */
mxl_status mxl_family_granite_setup(mxl_family_ctx *c);
/* Llama's attention names with the Qwen MoE block (family_qwen_moe.c; OLMoE's too). */
extern const mxl_decoder_names mxl_names_qwen_moe;
/* Llama's attention with a per-head QK-norm and DeepSeek V3's MoE names: mlp.gate (+ its
 * e_score_correction_bias), mlp.experts.N.*, mlp.shared_experts.* (family_glm4_moe.c; dots1 and
 * ERNIE 4.5 MoE adjust theirs in setup). */
extern const mxl_decoder_names mxl_names_deepseek_moe;
/* Llama's attention with Mixtral's block_sparse_moe (gate, experts.N.w1 / w3 / w2, or mlx-lm's
 * switch_mlp.*) (family_mixtral.c; PhiMoE's too). */
extern const mxl_decoder_names mxl_names_mixtral;
/* Sliding layers of a config with a sliding_window (none when it is unset): those layer_types
 * marks, else (older configs) from max_window_layers on (family_qwen2.c; Qwen2 checks
 * use_sliding_window first). */
mxl_status mxl_family_sliding_max_window(mxl_family_ctx *c);
/* convert hooks shared the same way: Qwen's "no sliding window" keys (family_qwen2.c); Gemma's
 * sizes, eps, GELU (tanh) and no attention bias (family_gemma.c). */
void mxl_family_qwen_convert_no_window(json_t *j);
void mxl_family_gemma_convert_common(const mxl_checkpoint *ck, json_t *j);

/* ---- helpers (family_common.c); each returns MXL_OK or sets c->err naming the key ---- */

/* Typed optional keys of config.json (absent or null: the default; GGUF: the default). */
mxl_status mxl_family_bool(mxl_family_ctx *c, const char *key, bool dflt, bool *out);
mxl_status mxl_family_double(mxl_family_ctx *c, const char *key, double dflt, double *out);
mxl_status mxl_family_int(mxl_family_ctx *c, const char *key, int64_t dflt, int64_t *out);
/* An activation by its transformers name (silu, gelu, gelu_pytorch_tanh, gelu_new, relu, ...);
 * `key` is only used in the message. */
mxl_status mxl_family_act(mxl_family_ctx *c, const char *key, const char *name, mxl_act *out);
/* RoPE from one rope-parameters object `p` (may be NULL): rope_type / type (default, linear,
 * llama3, yarn; dynamic, longrope and others refused by name), rope_theta (else default_theta),
 * partial_rotary_factor, factor, and the type's own keys, with top-level config.json fallbacks
 * as transformers' standardize_rope_params applies them. NEOX style. `where` names p. */
mxl_status mxl_family_rope_from(mxl_family_ctx *c, json_t *p, const char *where, double default_theta,
                                mxl_rope_cfg *out);
/* The model's single RoPE: rope_parameters, else rope_scaling, with rope_theta (default 10000);
 * also sets hp->rope_local to the same. */
mxl_status mxl_family_rope(mxl_family_ctx *c);
/* mxl_family_rope with GPT-J style (interleaved pairs 2i, 2i+1): the rotate_half of Helium,
 * ERNIE 4.5, GLM and Cohere, whose cos/sin are repeat_interleave'd. */
mxl_status mxl_family_rope_interleaved(mxl_family_ctx *c);
/* Llama 4's attention temperature (Ministral 3, Mistral 4): rope_parameters (or rope_scaling)
 * llama_4_scaling_beta with original_max_position_embeddings into hp->q_temp_beta / q_temp_orig:
 * queries at position p scaled by 1 + beta * ln(1 + floor(p / orig)); absent: none. */
mxl_status mxl_family_llama4_temperature(mxl_family_ctx *c);
/* After mxl_family_rope*: the rotary dims of a family whose config class defaults
 * partial_rotary_factor to `factor` (StableLM 0.25, GLM and Nemotron 0.5), when config.json says
 * none (the shared parser's default is 1); refuses rotary dims that are odd or under 2. */
mxl_status mxl_family_rope_partial_default(mxl_family_ctx *c, double factor);
/* transformers 5's per-layer-type RoPE: rope_parameters.full_attention into hp->rope and
 * rope_parameters.sliding_attention into hp->rope_local (each with its default theta when it
 * names none). *found: whether rope_parameters has either key (else nothing is set). */
mxl_status mxl_family_rope_layer_types(mxl_family_ctx *c, double full_theta, double sliding_theta, bool *found);
/* A zeroed per-layer flag array [n_layers] in the decoder's arena (NULL + error when out of
 * memory). */
uint8_t *mxl_family_layer_flags(mxl_family_ctx *c);
/* Sliding layers from config.json layer_types ("sliding_attention") when present (length checked
 * by the config parser), with window `window`; else no layer is marked. Returns true when
 * layer_types was present. */
bool mxl_family_sliding_from_layer_types(mxl_family_ctx *c, int64_t window);
/* Sliding layers from the config's per-layer list (config.json layer_types, or the GGUF's
 * attention.sliding_window_pattern array: mxl_family_sliding_from_layer_types), else every layer
 * but each pattern-th (pattern <= 0 refused), all with window `window`. */
mxl_status mxl_family_sliding_pattern(mxl_family_ctx *c, int64_t pattern, int64_t window);
/* A config.json list of one 0/1 (or false/true) per layer into a flags array in the arena; absent
 * or null: *out NULL. Other lengths and values are refused naming the key. */
mxl_status mxl_family_layer_list(mxl_family_ctx *c, const char *key, uint8_t **out);
/* NoPE layers (SmolLM3, Llama 4): no_rope_layers[i] 1 = layer i rotates, 0 = it does not; absent,
 * every no_rope_layer_interval-th layer (default 4) is NoPE. Sets hp->layer_no_rope. */
mxl_status mxl_family_nope_layers(mxl_family_ctx *c);
/* Full-attention layers without positions (NoPE) beside sliding layers with RoPE (EXAONE 4,
 * Command R7B): the sliding flags already set decide; none set, nothing changes. */
mxl_status mxl_family_nope_full_layers(mxl_family_ctx *c);
/* Every layer sliding with the config's sliding_window when it is set (Mistral, Phi-3,
 * StarCoder2). */
mxl_status mxl_family_sliding_all(mxl_family_ctx *c);
/* Vision-language checkpoints: where their text decoder sits - model.language_model.*
 * (transformers 5's layout) or language_model.model.* with language_model.lm_head (the older
 * layout, mlx-lm's conversions); the names stay the family's (model.*) otherwise. */
void mxl_family_text_prefix(mxl_family_ctx *c);
/* family_qwen2vl.c: the text prefix (mxl_family_text_prefix) and the RoPE of rope_parameters /
 * rope_scaling (default_theta when absent) with M-RoPE's mrope_section (k_default when absent;
 * the sections taken out of what the RoPE reads; RoPE scaling refused). */
mxl_status mxl_family_mrope(mxl_family_ctx *c, const int32_t k_default[3], double default_theta);

/* ---- mixture of experts (family_moe.c) ---- */
/* The MoE layout from config.json: num_experts (or num_local_experts ...), num_experts_per_tok,
 * each expert's width from `ffn_key` (NULL: intermediate_size), the shared expert's from
 * `shared_key` (NULL or absent: none), norm_topk_prob (default norm_default), softmax router;
 * with qwen_layers the sparse layers follow decoder_sparse_step and mlp_only_layers (Qwen MoE),
 * else every layer is sparse. */
mxl_status mxl_family_moe(mxl_family_ctx *c, const char *ffn_key, const char *shared_key, bool norm_default, bool qwen_layers);
/* The same from GGUF metadata (llama.cpp's keys): expert_count (0 or absent: dense, nothing
 * set), expert_used_count, expert_feed_forward_length (else feed_forward_length),
 * the shared experts' width from their tensors (ffn_gate_shexp; the converters spell the width
 * keys differently per architecture); the sparse layers are those
 * with blk.N.ffn_gate_inp from leading_dense_block_count on; the shared expert's gate when
 * ffn_gate_inp_shexp is there. `norm`: whether the top-k weights are renormalised, which
 * llama.cpp fixes per architecture (its build_moe_ffn argument) for these families. */
mxl_status mxl_family_gguf_moe(mxl_family_ctx *c, bool norm);
/* After mxl_family_moe: DeepSeek V3's sigmoid router (noaux_tc) with routed_scaling_factor
 * (default 1), n_group and topk_group (default 1). */
mxl_status mxl_family_moe_sigmoid(mxl_family_ctx *c);
/* The same keys for any router: routed_scaling_factor (default 1), n_group and topk_group (default 1). */
mxl_status mxl_family_moe_scale_groups(mxl_family_ctx *c);
/* After mxl_family_gguf_moe: the same from llama.cpp's keys (expert_weights_scale, default 1;
 * expert_weights_norm, default false; expert_group_count / expert_group_used_count, default 1). */
mxl_status mxl_family_gguf_moe_sigmoid(mxl_family_ctx *c);
/* Layers from config.json `key` (first_k_dense_replace; default 0) on are sparse, those before
 * dense. */
mxl_status mxl_family_moe_first_dense(mxl_family_ctx *c, const char *key);
/* Sparse layers from config.json mlp_layer_types ("dense" / "sparse" per layer), else the layers
 * from first_k_dense_replace (default first_dense_default) on (GLM-4.7-Flash, EXAONE MoE, Mellum). */
mxl_status mxl_family_moe_layer_types(mxl_family_ctx *c, int64_t first_dense_default);
/* After mxl_family_moe: `key` (n_shared_experts, moe_num_shared_experts; default 0) shared experts
 * run as one MLP of moe_ffn * that width. */
mxl_status mxl_family_moe_shared_count(mxl_family_ctx *c, const char *key);

/* ---- recurrent layers ---- */
/* Mamba-2's time step limits from config.json time_step_limit (absent: (0, inf)), also in
 * transformers' {"__float__": "Infinity"} spelling (family_mamba.c). */
mxl_status mxl_family_ssm_time_step_limit(mxl_family_ctx *c);
/* Gated DeltaNet hybrids (family_qwen3_next.c; Qwen 3.5 too): layer_types "linear_attention" /
 * "full_attention" (else every full_attention_interval-th layer attends), the linear_* sizes,
 * zero-centred RMSNorms, per-head QK-norms, gated attention queries (attn_q_gate), RoPE. */
mxl_status mxl_family_gdn_common(mxl_family_ctx *c);
/* layer_types' "linear_attention" / "full_attention" into kind[n_layers] (MXL_LAYER_GDN /
 * MXL_LAYER_ATTN), anything else refused by name (family_qwen3_next.c; Kimi Linear's too). */
mxl_status mxl_family_gdn_layer_types(mxl_family_ctx *c, json_t *lt, uint8_t *kind);
/* The same from llama.cpp's GGUF (attention.recurrent_layers or full_attention_interval, the
 * ssm.* sizes, attn_qkv / attn_gate / ssm_ba / ssm_* tensors, norms stored as 1 + w). */
mxl_status mxl_family_gguf_gdn(mxl_family_ctx *c);
/* mlx-lm's conversions of these families store the zero-centred norms as 1 + w (its sanitize):
 * recognised by their convolution weights in MLX's layout [C, K, 1] (transformers': [C, 1, K]),
 * norm_plus_one is then cleared. */
void mxl_family_gdn_mlx_norms(mxl_family_ctx *c, const char *conv);

/* ---- multi-head latent attention (family_mla.c) ---- */
/* Latent attention from config.json (the module names self_attn.q_a_proj, ... kv_b_proj, and
 * mlx-lm's embed_q / unembed_out, set in c->names): q_lora_rank (absent or null: one q_proj), kv_lora_rank,
 * qk_nope_head_dim, qk_rope_head_dim, v_head_dim; RoPE (mxl_family_rope) on the rotary part, in
 * GPT-J pairs unless rope_interleave (default interleave_default) is false; the softmax scale
 * 1/sqrt(nope + rope) times YaRN's mscale(factor, mscale_all_dim)^2. Sets the cache geometry
 * (decoder.h: head_dim = rope + kv_lora_rank, one KV head). */
mxl_status mxl_family_mla(mxl_family_ctx *c, bool interleave_default);
/* The same from llama.cpp's deepseek2 keys (attention.q_lora_rank, kv_lora_rank,
 * key_length_mla / value_length_mla or, in older files, key_length / value_length,
 * rope.dimension_count), RoPE in ggml's normal mode (GPT-J pairs).
 * Both take a value head width hp->mla_v_dim the family set before the call as the default when
 * the config or file says none (MiniCPM3: hidden / heads; 0: required). */
mxl_status mxl_family_gguf_mla(mxl_family_ctx *c);

/* ---- Gemma 3n / 4 (family_gemma4.c) ---- */
/* What the two share: pre and post norms with plain weights (y = norm(x) * w), scaled embeddings,
 * attention at scale 1 over RMS-normed query / key heads and weightless-normed values,
 * hidden_activation (gelu_pytorch_tanh), final_logit_softcapping (default_cap when absent; from
 * a GGUF its key, else none). */
mxl_status mxl_family_gemma_plain_common(mxl_family_ctx *c, double default_cap);
/* The sliding layers from layer_types, else every pattern-th layer full (last_full: the last layer
 * always full, Gemma 4), as a per-layer flag array. */
mxl_status mxl_family_gemma_layer_types(mxl_family_ctx *c, int64_t pattern, bool last_full, uint8_t **out);
/* KV sharing: the last num_kv_shared_layers layers read the cache of the last earlier layer of
 * their type (hp.layer_kv_source); with use_double_wide_mlp their MLP is twice as wide. */
mxl_status mxl_family_gemma_kv_sharing(mxl_family_ctx *c, const uint8_t *sliding);
/* The same from the values (a GGUF's shared_kv_layers; wide: use_double_wide_mlp). */
mxl_status mxl_family_gemma_kv_share(mxl_family_ctx *c, const uint8_t *sliding, int64_t shared, bool wide);
/* The vision-language layouts (mxl_family_text_prefix) with the per-layer input tensors under the
 * same prefix: 0 for model.language_model.*, 1 for language_model.model.*, -1 for neither. */
int mxl_family_gemma_text_prefix(mxl_family_ctx *c);
/* What the GGUF setups share: the plain-norm common part, the sliding layers (the file's pattern,
 * else every pattern-th layer full) and window, KV sharing (attention.shared_kv_layers) and the
 * per-layer inputs (embedding_length_per_layer_input; the table's rows its vocabulary) with
 * llama.cpp's names. *sliding: the per-layer flags. */
mxl_status mxl_family_gemma_gguf_common(mxl_family_ctx *c, int64_t pattern, uint8_t **sliding);

#endif
