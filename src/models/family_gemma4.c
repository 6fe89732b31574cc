/* family_gemma4.c - Gemma 4 text decoder (transformers modeling_gemma4.py: Gemma4ForCausalLM,
 * model_type gemma4_text, and the text path of Gemma4ForConditionalGeneration, model_type gemma4,
 * whose text_config it reads and whose decoder sits at model.language_model.*, or language_model.model.*
 * in mlx-lm's conversions). Gemma 3's block
 * (pre and post norms around attention and MLP, scaled embeddings, GeGLU, QK-norm, sliding and
 * full layers, final soft-cap) with:
 *   - plain RMSNorm weights (y = norm(x) * w, not Gemma 3's 1 + w) and attention scale 1;
 *   - values RMS-normed per head without a weight (v_norm);
 *   - full layers with their own head size (global_head_dim, or per_layer_config's head_dim) and,
 *     with attention_k_eq_v, their own KV head count (num_global_key_value_heads) and no v_proj:
 *     V is k_proj's output before the key's norm and RoPE;
 *   - RoPE per layer type (rope_parameters.full_attention / sliding_attention): "default" rotates
 *     the whole head; "proportional" rotates the first int(partial_rotary_factor * head_dim / 2)
 *     frequency pairs of the whole head (NeoX halves, exponent over the full head_dim) and leaves
 *     the rest at frequency 0, each frequency divided by `factor`: bound as per-pair divisors
 *     (freq_factors: factor, then infinity);
 *   - the last num_kv_shared_layers layers compute queries only and attend over the cache of the
 *     last earlier layer of their type; with use_double_wide_mlp their MLP is twice as wide;
 *   - per-layer input embeddings (hidden_size_per_layer_input: decoder.h hp.ple_dim);
 *   - each layer's output times its stored layer_scalar;
 *   - with enable_moe_block (26B-A4B), experts beside every layer's dense MLP (moe_block below).
 * Sliding layers from layer_types (else every sixth layer full), the last layer always full.
 * Refused by name: whole-text bidirectional attention (use_bidirectional_attention "all"). GGUF:
 * gemma4_gguf below. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "io/gguf.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names_gemma4 = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .q_norm = "self_attn.q_norm", .k_norm = "self_attn.k_norm",
    .post_attn_norm = "post_attention_layernorm", .ffn_norm = "pre_feedforward_layernorm",
    .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj", .post_ffn_norm = "post_feedforward_layernorm",
    .ple_embed = "model.embed_tokens_per_layer", .ple_model_proj = "model.per_layer_model_projection",
    .ple_proj_norm = "model.per_layer_projection_norm", .ple_gate = "per_layer_input_gate", .ple_proj = "per_layer_projection",
    .ple_norm = "post_per_layer_input_norm", .layer_scalar = "layer_scalar",
};

static int32_t *layer_ints(mxl_family_ctx *c) {
    int32_t *a = mxl_arena_alloc(c->arena, (size_t)c->hp->n_layers * sizeof *a, 64);
    if (!a) mxl_error_set(c->err, MXL_ERR_NOMEM, "out of memory");
    return a;
}

/* A layer type's RoPE (rope_parameters.<kind>) for heads of hd: "default" or "proportional". */
static mxl_status type_rope(mxl_family_ctx *c, const char *kind, const char *dflt_type, double dflt_theta, double dflt_partial,
                            int64_t hd, mxl_rope_cfg *r) {
    json_t *rp = json_object_get(c->raw, "rope_parameters"), *p = json_is_object(rp) ? json_object_get(rp, kind) : NULL;
    if (p && !json_is_object(p))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'rope_parameters.%s' must be an object", c->ck->path, kind);
    json_t *t = p ? json_object_get(p, "rope_type") : NULL, *th = p ? json_object_get(p, "rope_theta") : NULL;
    json_t *pf = p ? json_object_get(p, "partial_rotary_factor") : NULL, *fa = p ? json_object_get(p, "factor") : NULL;
    const char *type = t ? json_string_value(t) : p ? "default" : dflt_type;
    if (!type || (strcmp(type, "default") != 0 && strcmp(type, "proportional") != 0))
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'rope_parameters.%s.rope_type' must be 'default' or 'proportional' for Gemma 4",
                             c->ck->path, kind);
    const double theta = th ? json_number_value(th) : dflt_theta, partial = pf ? json_number_value(pf) : p ? 1.0 : dflt_partial;
    const double factor = fa ? json_number_value(fa) : 1.0;
    if ((th && !json_is_number(th)) || (pf && !json_is_number(pf)) || (fa && !json_is_number(fa)) || !(theta > 0) || !isfinite(theta) ||
        !(partial > 0 && partial <= 1) || !(factor > 0) || !isfinite(factor))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'rope_parameters.%s': rope_theta and factor must be positive, partial_rotary_factor in (0, 1]",
                             c->ck->path, kind);
    memset(r, 0, sizeof *r);
    r->head_dim = r->rotary_dim = (int)hd;
    r->theta = theta;
    r->style = MXL_ROPE_NEOX;
    r->scaling = MXL_ROPE_SCALING_NONE;
    r->factor = 1.0;
    /* transformers' default RoPE of Gemma 4 ignores partial_rotary_factor and any factor */
    const bool prop = strcmp(type, "proportional") == 0;
    const int64_t angles = prop ? (int64_t)(partial * (double)hd) / 2 : hd / 2;
    if (angles == hd / 2 && (!prop || factor == 1.0)) return MXL_OK;
    float *ff = mxl_arena_alloc(c->arena, (size_t)(hd / 2) * sizeof *ff, 64);
    if (!ff) return mxl_error_set(c->err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < hd / 2; i++) ff[i] = i < angles ? (float)factor : INFINITY;
    r->freq_factors = ff;
    return MXL_OK;
}

mxl_status mxl_family_gemma_plain_common(mxl_family_ctx *c, double default_cap) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    hp->post_norms = true;
    hp->embed_scale = sqrtf((float)hp->hidden);
    hp->attn_scale = 1.0f;
    hp->qk_norm_kind = MXL_QK_NORM_HEAD;
    hp->v_norm = true;
    hp->act = MXL_ACT_GELU_TANH;
    double cap;
    if (c->gguf) { /* (llama.cpp runs the tanh GELU; the file names none) */
        if ((st = mxl_family_gguf_number(c, "final_logit_softcapping", 0.0, &cap))) return st;
    } else {
        json_t *ha = json_object_get(c->raw, "hidden_activation");
        if (ha && json_is_string(ha) && (st = mxl_family_act(c, "hidden_activation", json_string_value(ha), &hp->act))) return st;
        if ((st = mxl_family_double(c, "final_logit_softcapping", default_cap, &cap))) return st;
    }
    hp->final_softcap = cap > 0 ? (float)cap : 0.0f;
    return MXL_OK;
}

/* layer_types (else transformers' default: every `pattern`-th layer full), with last_full the last
 * layer made full (Gemma 4). */
mxl_status mxl_family_gemma_layer_types(mxl_family_ctx *c, int64_t pattern, bool last_full, uint8_t **out) {
    const int64_t n = c->hp->n_layers;
    uint8_t *sl = mxl_family_layer_flags(c);
    if (!sl) return MXL_ERR_NOMEM;
    json_t *lt = json_object_get(c->raw, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || (int64_t)json_array_size(lt) != n)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'layer_types' must list %lld layer types", c->ck->path, (long long)n);
        for (int64_t i = 0; i < n; i++) {
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (!s || (strcmp(s, "sliding_attention") != 0 && strcmp(s, "full_attention") != 0))
                return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json layer_types[%lld] must be sliding_attention or full_attention", c->ck->path,
                                     (long long)i);
            sl[i] = strcmp(s, "sliding_attention") == 0;
        }
    } else {
        for (int64_t i = 0; i < n; i++) sl[i] = (i + 1) % pattern != 0;
    }
    if (last_full) sl[n - 1] = 0;
    *out = sl;
    return MXL_OK;
}

/* Per layer: full layers' head size and KV heads from per_layer_config (transformers 5's saved
 * form: {"<layer>": {"head_dim": .., "num_key_value_heads": ..}}) or global_head_dim /
 * num_global_key_value_heads (with attention_k_eq_v). */
static mxl_status head_shapes(mxl_family_ctx *c, const uint8_t *sliding, bool k_eq_v) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    int64_t ghd, gkv;
    if ((st = mxl_family_int(c, "global_head_dim", hp->head_dim, &ghd)) ||
        (st = mxl_family_int(c, "num_global_key_value_heads", hp->n_kv_heads, &gkv)))
        return st;
    if (!k_eq_v) gkv = hp->n_kv_heads;
    int32_t *hd = layer_ints(c), *kv = layer_ints(c);
    if (!hd || !kv) return MXL_ERR_NOMEM;
    json_t *plc = json_object_get(c->raw, "per_layer_config");
    if (plc && !json_is_null(plc) && !json_is_object(plc))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'per_layer_config' must be an object", c->ck->path);
    int64_t widest = 0;
    for (int64_t i = 0; i < hp->n_layers; i++) {
        int64_t h = sliding[i] ? hp->head_dim : ghd, k = sliding[i] ? hp->n_kv_heads : gkv;
        char key[24];
        snprintf(key, sizeof key, "%lld", (long long)i);
        json_t *o = json_is_object(plc) ? json_object_get(plc, key) : NULL;
        json_t *oh = o ? json_object_get(o, "head_dim") : NULL, *ok = o ? json_object_get(o, "num_key_value_heads") : NULL;
        if (oh) h = json_is_integer(oh) ? json_integer_value(oh) : -1;
        if (ok) k = json_is_integer(ok) ? json_integer_value(ok) : -1;
        if (h <= 0 || h > 65536 || h % 2 || k <= 0 || hp->n_heads % k != 0)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: layer %lld's head size %lld (even) or %lld KV heads (dividing %lld) are invalid", c->ck->path,
                                 (long long)i, (long long)h, (long long)k, (long long)hp->n_heads);
        hd[i] = (int32_t)h, kv[i] = (int32_t)k;
        if (h > widest) widest = h;
    }
    hp->layer_head_dim = hd, hp->layer_kv_heads = kv;
    hp->head_dim = widest; /* (the buffers' head width; each layer runs its own) */
    return MXL_OK;
}

/* The last num_kv_shared_layers layers read the cache of the last earlier layer of their type;
 * their MLP is twice as wide with use_double_wide_mlp (Gemma 4). */
mxl_status mxl_family_gemma_kv_sharing(mxl_family_ctx *c, const uint8_t *sliding) {
    mxl_status st;
    int64_t shared;
    bool wide;
    if ((st = mxl_family_int(c, "num_kv_shared_layers", 0, &shared)) || (st = mxl_family_bool(c, "use_double_wide_mlp", false, &wide))) return st;
    return mxl_family_gemma_kv_share(c, sliding, shared, wide);
}

mxl_status mxl_family_gemma_kv_share(mxl_family_ctx *c, const uint8_t *sliding, int64_t shared, bool wide) {
    mxl_decoder_hparams *hp = c->hp;
    if (shared == 0) return MXL_OK;
    const int64_t first = hp->n_layers - shared;
    if (first < 1) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: num_kv_shared_layers %lld leaves no layer computing its own keys", c->ck->path, (long long)shared);
    int32_t *src = layer_ints(c), *ffn = layer_ints(c);
    if (!src || !ffn) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < hp->n_layers; i++) {
        src[i] = -1;
        ffn[i] = (int32_t)hp->ffn;
        if (i < first) continue;
        for (int64_t j = first - 1; j >= 0 && src[i] < 0; j--)
            if (sliding[j] == sliding[i]) src[i] = (int32_t)j;
        if (src[i] < 0)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: KV-shared layer %lld has no earlier %s layer to read", c->ck->path, (long long)i,
                                 sliding[i] ? "sliding" : "full");
        if (wide) ffn[i] = (int32_t)(2 * hp->ffn);
    }
    hp->layer_kv_source = src;
    if (wide) {
        hp->layer_ffn = ffn;
        hp->ffn *= 2; /* (the widest: the buffers') */
    }
    return MXL_OK;
}

int mxl_family_gemma_text_prefix(mxl_family_ctx *c) {
    static const char *const k_ple[2][3] = {
        {"model.language_model.embed_tokens_per_layer", "model.language_model.per_layer_model_projection",
         "model.language_model.per_layer_projection_norm"},
        {"language_model.model.embed_tokens_per_layer", "language_model.model.per_layer_model_projection",
         "language_model.model.per_layer_projection_norm"},
    };
    mxl_decoder_names *nm = c->names;
    mxl_family_text_prefix(c);
    const int v = strcmp(nm->layers, "model.language_model.layers.") == 0 ? 0 : strcmp(nm->layers, "language_model.model.layers.") == 0 ? 1 : -1;
    if (v >= 0) nm->ple_embed = k_ple[v][0], nm->ple_model_proj = k_ple[v][1], nm->ple_proj_norm = k_ple[v][2];
    return v;
}

mxl_status mxl_family_gemma_gguf_common(mxl_family_ctx *c, int64_t pattern, uint8_t **sliding_out) {
    mxl_decoder_hparams *hp = c->hp;
    const mxl_model_config *cfg = c->cfg;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    double shared, ple;
    if ((st = mxl_family_gemma_plain_common(c, 0.0)) || (st = mxl_family_gguf_number(c, "attention.shared_kv_layers", 0.0, &shared)) ||
        (st = mxl_family_gguf_number(c, "embedding_length_per_layer_input", 0.0, &ple)))
        return st;
    const mxl_gguf_tensor_info *t = mxl_gguf_find_tensor(c->ck->gguf, "per_layer_token_embd.weight");
    if (!(shared >= 0 && shared < (double)hp->n_layers && ple >= 0 && ple <= 65536) || (ple > 0 && (!t || t->tensor.ndim != 2)))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: the shared KV layers or the per-layer inputs (their width, per_layer_token_embd) are out of range",
                             c->ck->path);
    uint8_t *sliding = mxl_family_layer_flags(c);
    if (!sliding) return MXL_ERR_NOMEM;
    for (int64_t i = 0; i < hp->n_layers; i++)
        sliding[i] = cfg->n_layer_types == hp->n_layers && cfg->layer_is_sliding ? cfg->layer_is_sliding[i] : (i + 1) % pattern != 0;
    hp->layer_is_sliding = sliding;
    hp->sliding_window = cfg->sliding_window > 0 ? cfg->sliding_window : 512;
    *sliding_out = sliding;
    if ((st = mxl_family_gemma_kv_share(c, sliding, (int64_t)shared, false))) return st;
    if (ple > 0) {
        hp->ple_dim = (int64_t)ple, hp->ple_vocab = t->tensor.shape[0];
        nm->ple_embed = "per_layer_token_embd", nm->ple_model_proj = "per_layer_model_proj", nm->ple_proj_norm = "per_layer_proj_norm";
        nm->ple_gate = "inp_gate", nm->ple_proj = "proj", nm->ple_norm = "post_norm";
    }
    return MXL_OK;
}

/* The experts beside the dense MLP: e of width f, the top k of a softmax renormalised. */
static void moe_beside(mxl_decoder_hparams *hp, int64_t e, int64_t k, int64_t f) {
    hp->n_experts = e, hp->n_experts_used = k, hp->moe_ffn = f;
    hp->moe_router = MXL_MOE_SOFTMAX;
    hp->moe_norm_topk = true;
    hp->moe_beside_mlp = true;
}

/* GGUF (llama.cpp's gemma4: convert_hf_to_gguf.py Gemma4Model): the same model from its keys -
 * attention.key_length / key_length_swa, rope.dimension_count / _swa, rope.freq_base / _swa,
 * head_count_kv and feed_forward_length per layer (arrays where the layers differ),
 * attention.shared_kv_layers, embedding_length_per_layer_input, expert_count /
 * expert_feed_forward_length - and llama.cpp's tensor names (the proportional RoPE's unrotated
 * pairs as rope_freqs.weight factors of 1e30, which the decoder applies to the full layers). */
static mxl_status gemma4_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    const mxl_model_config *cfg = c->cfg;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    uint8_t *sliding;
    if ((st = mxl_family_gemma_gguf_common(c, 6, &sliding))) return st;
    hp->attn_k_eq_v = true; /* (where a layer has no attn_v) */
    double kls, rot, rot_swa, base_swa;
    const double kl = (double)cfg->head_dim;
    if ((st = mxl_family_gguf_number(c, "attention.key_length_swa", kl, &kls)) || (st = mxl_family_gguf_number(c, "rope.dimension_count", kl, &rot)) ||
        (st = mxl_family_gguf_number(c, "rope.dimension_count_swa", kls, &rot_swa)) ||
        (st = mxl_family_gguf_number(c, "rope.freq_base_swa", 10000.0, &base_swa)))
        return st;
    if (!(kls >= 2 && kls <= 65536 && rot >= 2 && rot <= kl && rot_swa >= 2 && rot_swa <= kls && base_swa > 0))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: Gemma 4 head sizes or rotary dimensions out of range", c->ck->path);
    int32_t *hd;
    if ((st = mxl_family_gguf_layer_ints(c, "attention.head_count_kv", hp->n_kv_heads, 1, hp->n_heads, (int32_t **)&hp->layer_kv_heads)) ||
        (st = mxl_family_gguf_layer_ints(c, "feed_forward_length", hp->ffn, 1, hp->ffn, (int32_t **)&hp->layer_ffn)) ||
        (st = mxl_family_gguf_layer_ints(c, "attention.key_length", (int64_t)kl, 1, 65536, &hd)))
        return st;
    for (int64_t i = 0; i < hp->n_layers; i++) hd[i] = sliding[i] ? (int32_t)kls : (int32_t)kl;
    hp->layer_head_dim = hd;
    hp->head_dim = kls > kl ? (int64_t)kls : (int64_t)kl;
    hp->rope = (mxl_rope_cfg){.head_dim = (int)kl, .rotary_dim = (int)rot, .theta = !isnan(cfg->rope_theta) ? cfg->rope_theta : 1000000.0,
                              .style = MXL_ROPE_NEOX, .scaling = MXL_ROPE_SCALING_NONE, .factor = 1.0};
    hp->rope_local = (mxl_rope_cfg){.head_dim = (int)kls, .rotary_dim = (int)rot_swa, .theta = base_swa, .style = MXL_ROPE_NEOX,
                                    .scaling = MXL_ROPE_SCALING_NONE, .factor = 1.0};
    if (mxl_family_gguf_has_layer0(c, "layer_output_scale", ".weight")) hp->layer_scalar = true;
    nm->layer_scalar = "layer_output_scale.weight";
    if (cfg->num_experts > 0) {
        double f;
        if ((st = mxl_family_gguf_number(c, "expert_feed_forward_length", 0.0, &f))) return st;
        if (!(f >= 1 && f <= (double)(INT64_C(1) << 26)) || cfg->num_experts_per_tok <= 0)
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: Gemma 4 experts need expert_feed_forward_length and expert_used_count", c->ck->path);
        moe_beside(hp, cfg->num_experts, cfg->num_experts_per_tok, (int64_t)f);
        nm->exps_gate_up = "ffn_gate_up_exps", nm->exps_down = "ffn_down_exps";
        nm->moe_dense_post_norm = "post_ffw_norm_1", nm->moe_pre_norm = "pre_ffw_norm_2", nm->moe_post_norm = "post_ffw_norm_2";
        nm->moe_router_scale = "ffn_gate_inp.scale", nm->moe_expert_scale = "ffn_down_exps.scale";
    }
    return MXL_OK;
}

/* enable_moe_block (26B-A4B): beside each layer's dense MLP, num_experts GeGLU experts of
 * moe_intermediate_size, the top top_k_experts of a softmax router renormalised, each weight times
 * its expert's per_expert_scale (decoder.h hp.moe_beside_mlp). Experts in transformers' own
 * stacked layout (experts.gate_up_proj / down_proj) or mlx-lm's (experts.switch_glu.*). */
static mxl_status moe_block(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    int64_t e, k, f;
    if ((st = mxl_family_int(c, "num_experts", 0, &e)) || (st = mxl_family_int(c, "top_k_experts", 0, &k)) ||
        (st = mxl_family_int(c, "moe_intermediate_size", 0, &f)))
        return st;
    if (e <= 0 || k <= 0 || k > e || f <= 0)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: enable_moe_block needs num_experts, top_k_experts (at most num_experts) and moe_intermediate_size",
                             c->ck->path);
    moe_beside(hp, e, k, f);
    nm->moe_router = "router", nm->experts = "experts.";
    nm->exps_gate = "experts.switch_glu.gate_proj", nm->exps_up = "experts.switch_glu.up_proj", nm->exps_down = "experts.switch_glu.down_proj";
    nm->moe_dense_post_norm = "post_feedforward_layernorm_1", nm->moe_pre_norm = "pre_feedforward_layernorm_2";
    nm->moe_post_norm = "post_feedforward_layernorm_2";
    nm->moe_router_scale = "router.scale", nm->moe_expert_scale = "router.per_expert_scale";
    return MXL_OK;
}

static mxl_status gemma4_setup(mxl_family_ctx *c) {
    if (c->gguf) return gemma4_gguf(c);
    mxl_decoder_hparams *hp = c->hp;
    mxl_status st;
    bool moe, k_eq_v;
    if ((st = mxl_family_bool(c, "enable_moe_block", false, &moe)) || (st = mxl_family_bool(c, "attention_k_eq_v", false, &k_eq_v))) return st;
    if (moe && (st = moe_block(c))) return st;
    json_t *bidir = json_object_get(c->raw, "use_bidirectional_attention");
    if (json_is_string(bidir) && strcmp(json_string_value(bidir), "all") == 0)
        return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: Gemma 4 with use_bidirectional_attention 'all' is not supported", c->ck->path);
    /* the vision-language layouts: model.language_model.* (transformers 5), language_model.model.*
     * (mlx-lm's conversions) */
    mxl_family_gemma_text_prefix(c);
    if ((st = mxl_family_gemma_plain_common(c, 0.0))) return st;
    hp->attn_k_eq_v = k_eq_v;
    hp->layer_scalar = true;

    uint8_t *sliding = NULL;
    if ((st = mxl_family_gemma_layer_types(c, 6, true, &sliding))) return st;
    const int64_t sliding_hd = hp->head_dim;
    if ((st = head_shapes(c, sliding, k_eq_v))) return st;
    int64_t full_hd = sliding_hd;
    for (int64_t i = 0; i < hp->n_layers; i++)
        if (!sliding[i]) full_hd = hp->layer_head_dim[i];
    if ((st = type_rope(c, "full_attention", "proportional", 1000000.0, 0.25, full_hd, &hp->rope)) ||
        (st = type_rope(c, "sliding_attention", "default", 10000.0, 1.0, sliding_hd, &hp->rope_local)))
        return st;
    int64_t window = c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 512;
    hp->sliding_window = window;
    hp->layer_is_sliding = sliding;
    for (int64_t i = 0; i < hp->n_layers; i++)
        if (hp->layer_head_dim[i] != (sliding[i] ? sliding_hd : full_hd))
            return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: Gemma 4 layers of one type with different head sizes are not supported", c->ck->path);
    if ((st = mxl_family_gemma_kv_sharing(c, sliding))) return st;

    int64_t ple, ple_vocab;
    if ((st = mxl_family_int(c, "hidden_size_per_layer_input", 0, &ple)) ||
        (st = mxl_family_int(c, "vocab_size_per_layer_input", hp->vocab, &ple_vocab)))
        return st;
    if (ple > 0 && (ple > 65536 || ple_vocab < hp->vocab || ple_vocab > (INT64_C(1) << 26)))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: per-layer inputs of %lld over a vocabulary of %lld (at least the model's %lld) are out of range",
                             c->ck->path, (long long)ple, (long long)ple_vocab, (long long)hp->vocab);
    hp->ple_dim = ple;
    hp->ple_vocab = ple_vocab;
    return MXL_OK;
}

const mxl_decoder_family mxl_family_gemma4_text = {
    .model_type = "gemma4_text", .registry_id = "gemma4", .hf_class = "Gemma4ForCausalLM", .names = &k_names_gemma4,
    .setup = gemma4_setup, .gguf_arch = "gemma4", .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_gemma4 = {
    .model_type = "gemma4", .registry_id = "gemma4", .hf_class = "Gemma4ForConditionalGeneration", .names = &k_names_gemma4,
    .setup = gemma4_setup, .gaps = "the vision and audio towers (text decoder only)", .text_config = true,
};
