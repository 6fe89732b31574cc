/* family_gemma3n.c - Gemma 3n text decoder (transformers modeling_gemma3n.py: Gemma3nForCausalLM,
 * model_type gemma3n_text, and the text path of Gemma3nForConditionalGeneration, model_type
 * gemma3n, whose text_config it reads and whose decoder sits at model.language_model.*). Gemma 3's
 * attention (QK-norm, sliding and full layers with their own RoPE) with Gemma 4's plain-weight
 * norms, V norm and attention scale 1, and what only Gemma 3n has (decoder.h hp.altup_n,
 * models/altup.h):
 *   - AltUp: altup_num_inputs streams of the hidden state, each layer predicting, running its block
 *     on stream altup_active_idx and correcting the others;
 *   - Laurel: a low-rank residual (laurel_rank) beside attention;
 *   - per-layer MLP widths (intermediate_size as a list) and, on the layers
 *     activation_sparsity_pattern marks (default: the first 10 of more than 10 at 0.95), a Gaussian
 *     top-k of the gate before GELU;
 *   - per-layer input embeddings (their table may be smaller than the vocabulary: ids past it read
 *     row 0), added to the streams but the first;
 *   - the last num_kv_shared_layers layers reading the cache of the last earlier layer of their type.
 * Sliding layers from layer_types, else every fifth layer full. Not run: the vision and audio
 * towers. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "io/gguf.h"
#include "models/altup.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"

static const mxl_decoder_names k_names_gemma3n = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head", .layers = "model.layers.",
    .attn_norm = "input_layernorm", .q = "self_attn.q_proj", .k = "self_attn.k_proj", .v = "self_attn.v_proj",
    .o = "self_attn.o_proj", .q_norm = "self_attn.q_norm", .k_norm = "self_attn.k_norm",
    .post_attn_norm = "post_attention_layernorm", .ffn_norm = "pre_feedforward_layernorm",
    .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj", .post_ffn_norm = "post_feedforward_layernorm",
    .ple_embed = "model.embed_tokens_per_layer", .ple_model_proj = "model.per_layer_model_projection",
    .ple_proj_norm = "model.per_layer_projection_norm", .ple_gate = "per_layer_input_gate", .ple_proj = "per_layer_projection",
    .ple_norm = "post_per_layer_input_norm",
    .altup_proj = "model.altup_projections.", .altup_unembed = "model.altup_unembed_projections.",
    .altup_router = "altup.modality_router", .altup_router_norm = "altup.router_norm", .altup_predict = "altup.prediction_coefs",
    .altup_correct = "altup.correction_coefs", .altup_out_scale = "altup.correct_output_scale",
    .laurel_l = "laurel.linear_left", .laurel_r = "laurel.linear_right", .laurel_norm = "laurel.post_laurel_norm",
};

/* intermediate_size: one width for all layers, or one per layer. */
static mxl_status mlp_widths(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    json_t *w = json_object_get(c->raw, "intermediate_size");
    if (!json_is_array(w)) return MXL_OK;
    if ((int64_t)json_array_size(w) != hp->n_layers)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'intermediate_size' must list one width per layer (%lld)", c->ck->path,
                             (long long)hp->n_layers);
    int32_t *f = mxl_arena_alloc(c->arena, (size_t)hp->n_layers * sizeof *f, 64);
    if (!f) return mxl_error_set(c->err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < hp->n_layers; i++) f[i] = (int32_t)json_integer_value(json_array_get(w, (size_t)i)); /* (checked by config.c) */
    hp->layer_ffn = f;
    return MXL_OK;
}

/* activation_sparsity_pattern: a number for every layer, a list, or null (transformers: 0.95 on
 * the first 10 layers of a model of more than 10); each target sparsity p > 0 as the std
 * multiplier Phi^-1(p) (torch's float32 icdf of the float32 p). */
static mxl_status sparsity(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    json_t *v = json_object_get(c->raw, "activation_sparsity_pattern");
    float *k = mxl_arena_alloc(c->arena, (size_t)hp->n_layers * sizeof *k, 64);
    if (!k) return mxl_error_set(c->err, MXL_ERR_NOMEM, "out of memory");
    if (json_is_array(v) && (int64_t)json_array_size(v) != hp->n_layers)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json 'activation_sparsity_pattern' must list one value per layer (%lld)", c->ck->path,
                             (long long)hp->n_layers);
    for (int64_t i = 0; i < hp->n_layers; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, (size_t)i) : v;
        double p = !e || json_is_null(e) ? (hp->n_layers > 10 && i < 10 ? 0.95 : 0.0) : json_number_value(e);
        if ((e && !json_is_null(e) && !json_is_number(e)) || !(p >= 0 && p < 1))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: config.json activation_sparsity_pattern values must be in [0, 1)", c->ck->path);
        k[i] = p > 0 ? (float)mxl_normal_quantile((double)(float)p) : 0.0f;
    }
    hp->layer_topk_k = k;
    return MXL_OK;
}

/* GGUF (llama.cpp's gemma3n: convert_hf_to_gguf.py Gemma3NModel): feed_forward_length per layer,
 * activation_sparsity_scale (the std multipliers themselves, -inf for dense layers),
 * altup.num_inputs / active_idx, attention.shared_kv_layers, embedding_length_per_layer_input (the
 * table padded to the whole vocabulary), the Laurel rank from laurel_l's rows, and llama.cpp's
 * names (the AltUp projections stacked: altup_proj / altup_unembd_proj [3, H, H]). */
static mxl_status gemma3n_gguf(mxl_family_ctx *c) {
    mxl_decoder_hparams *hp = c->hp;
    const mxl_model_config *cfg = c->cfg;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    uint8_t *sliding;
    if ((st = mxl_family_gemma_gguf_common(c, 5, &sliding))) return st;
    double base_swa, n, active;
    if ((st = mxl_family_gguf_number(c, "rope.freq_base_swa", 10000.0, &base_swa)) ||
        (st = mxl_family_gguf_number(c, "altup.num_inputs", 4.0, &n)) || (st = mxl_family_gguf_number(c, "altup.active_idx", 0.0, &active)))
        return st;
    const mxl_gguf_tensor_info *lt = mxl_gguf_find_tensor(c->ck->gguf, "blk.0.laurel_l.weight");
    if (!(base_swa > 0 && hp->ple_dim > 0 && n >= 2 && n <= 16 && active >= 0 && active < n && lt && lt->tensor.ndim == 2))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: Gemma 3n's per-layer inputs, AltUp streams or Laurel tensors are missing or out of range",
                             c->ck->path);
    hp->rope = (mxl_rope_cfg){.head_dim = (int)hp->head_dim, .rotary_dim = (int)hp->head_dim,
                              .theta = !isnan(cfg->rope_theta) ? cfg->rope_theta : 1000000.0, .style = MXL_ROPE_NEOX,
                              .scaling = MXL_ROPE_SCALING_NONE, .factor = 1.0};
    hp->rope_local = hp->rope;
    hp->rope_local.theta = base_swa;
    if ((st = mxl_family_gguf_layer_ints(c, "feed_forward_length", hp->ffn, 1, hp->ffn, (int32_t **)&hp->layer_ffn))) return st;
    float *k = mxl_arena_alloc(c->arena, (size_t)hp->n_layers * sizeof *k, 64);
    if (!k) return mxl_error_set(c->err, MXL_ERR_NOMEM, "out of memory");
    char key[192];
    const mxl_gguf_kv *kv = mxl_gguf_find(c->ck->gguf, mxl_family_gguf_key(c, "activation_sparsity_scale", key, sizeof key));
    const mxl_gguf_array *a = kv && kv->value.type == MXL_GGUF_TYPE_ARRAY ? &kv->value.v.arr : NULL;
    if (kv && (!a || a->n != (uint64_t)hp->n_layers))
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' must list each of the %lld layers", c->ck->path, key, (long long)hp->n_layers);
    for (int64_t i = 0; i < hp->n_layers; i++) {
        mxl_gguf_value e;
        double x = -INFINITY;
        if (a && (!mxl_gguf_array_get(a, (uint64_t)i, &e) || !mxl_gguf_value_as_f64(&e, &x) || isnan(x) || x == INFINITY))
            return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: metadata key '%s' must hold numbers (-inf for a dense layer)", c->ck->path, key);
        k[i] = isfinite(x) ? (float)x : 0.0f;
    }
    hp->layer_topk_k = k;
    hp->altup_n = (int64_t)n, hp->altup_active = (int64_t)active, hp->altup_correct_scale = true;
    hp->laurel_rank = lt->tensor.shape[0];
    nm->altup_proj = "altup_proj", nm->altup_unembed = "altup_unembd_proj", nm->altup_stacked = true;
    nm->altup_router = "altup_router", nm->altup_router_norm = "altup_router_norm", nm->altup_predict = "altup_predict_coef";
    nm->altup_correct = "altup_correct_coef", nm->altup_out_scale = "altup_correct_scale.weight";
    nm->laurel_l = "laurel_l", nm->laurel_r = "laurel_r", nm->laurel_norm = "laurel_post_norm";
    return MXL_OK;
}

static mxl_status gemma3n_setup(mxl_family_ctx *c) {
    if (c->gguf) return gemma3n_gguf(c);
    mxl_decoder_hparams *hp = c->hp;
    mxl_decoder_names *nm = c->names;
    mxl_status st;
    static const char *const k_altup[2][2] = {
        {"model.language_model.altup_projections.", "model.language_model.altup_unembed_projections."},
        {"language_model.model.altup_projections.", "language_model.model.altup_unembed_projections."},
    };
    const int v = mxl_family_gemma_text_prefix(c);
    if (v >= 0) nm->altup_proj = k_altup[v][0], nm->altup_unembed = k_altup[v][1];
    if ((st = mxl_family_gemma_plain_common(c, 30.0))) return st;

    bool per_type;
    if ((st = mxl_family_rope_layer_types(c, 1000000.0, 10000.0, &per_type))) return st;
    if (!per_type) {
        double global, local;
        if ((st = mxl_family_double(c, "rope_theta", 1000000.0, &global)) || (st = mxl_family_double(c, "rope_local_base_freq", 10000.0, &local)) ||
            (st = mxl_family_rope_from(c, NULL, "rope_theta", global, &hp->rope)) ||
            (st = mxl_family_rope_from(c, NULL, "rope_local_base_freq", local, &hp->rope_local)))
            return st;
        hp->rope_local.theta = local;
    }
    uint8_t *sliding = NULL;
    if ((st = mxl_family_gemma_layer_types(c, 5, false, &sliding))) return st;
    hp->sliding_window = c->cfg->sliding_window > 0 ? c->cfg->sliding_window : 512;
    hp->layer_is_sliding = sliding;
    if ((st = mlp_widths(c)) || (st = sparsity(c)) || (st = mxl_family_gemma_kv_sharing(c, sliding))) return st;

    int64_t ple, ple_vocab, n, active, rank;
    bool scale;
    if ((st = mxl_family_int(c, "hidden_size_per_layer_input", 256, &ple)) ||
        (st = mxl_family_int(c, "vocab_size_per_layer_input", 262144, &ple_vocab)) || (st = mxl_family_int(c, "altup_num_inputs", 4, &n)) ||
        (st = mxl_family_int(c, "altup_active_idx", 0, &active)) || (st = mxl_family_int(c, "laurel_rank", 64, &rank)) ||
        (st = mxl_family_bool(c, "altup_correct_scale", true, &scale)))
        return st;
    if (ple <= 0 || ple > 65536 || ple_vocab <= 0 || ple_vocab > (INT64_C(1) << 26) || n < 2 || n > 16 || active >= n || rank <= 0 ||
        rank > 65536)
        return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: Gemma 3n's per-layer inputs (%lld over %lld ids), AltUp streams (%lld, active %lld) or Laurel rank (%lld) are out of range",
                             c->ck->path, (long long)ple, (long long)ple_vocab, (long long)n, (long long)active, (long long)rank);
    hp->ple_dim = ple, hp->ple_vocab = ple_vocab;
    hp->altup_n = n, hp->altup_active = active, hp->laurel_rank = rank, hp->altup_correct_scale = scale;
    return MXL_OK;
}

const mxl_decoder_family mxl_family_gemma3n_text = {
    .model_type = "gemma3n_text", .registry_id = "gemma3n", .hf_class = "Gemma3nForCausalLM", .names = &k_names_gemma3n,
    .setup = gemma3n_setup, .gguf_arch = "gemma3n", .convert_check = mxl_family_gguf_not_converted,
};

const mxl_decoder_family mxl_family_gemma3n = {
    .model_type = "gemma3n", .registry_id = "gemma3n", .hf_class = "Gemma3nForConditionalGeneration", .names = &k_names_gemma3n,
    .setup = gemma3n_setup, .gaps = "the vision and audio towers (text decoder only)", .text_config = true,
};
