/* vlm_internvl.c - InternVL's vision side (transformers modeling_internvl.py /
 * processing_internvl.py, InternVLForConditionalGeneration: the OpenGVLab/InternVL3 and InternVL3.5
 * "-hf" checkpoints over a Qwen2 / Qwen3 / Llama text model, family_llava.c's internvl record):
 *   tower   InternViT (InternVLVisionModel) over each tile [3, S, S]:
 *           x = [cls; patches Wp^T + bp] + pos_emb                      [1 + side*side, Hv]
 *           per layer: x += lambda_1 * attn(LayerNorm_before(x)) (q / k / v biases as
 *           attention_bias says); x += lambda_2 * mlp(LayerNorm_after(x)) (the layer stack of
 *           encoder_siglip.h with its layer scales); hidden_states[vision_feature_layer] (-1: the
 *           last layer's output, then the final LayerNorm unless use_mean_pooling), the CLS row
 *           dropped ("default")                                         [side*side, Hv]
 *   shuffle pixel_shuffle by d = 1 / downsample_ratio (vision_siglip.h)  [(side/d)^2, d*d*Hv]
 *   proj    LayerNorm (eps 1e-5) -> linear_1 -> projector_hidden_act -> linear_2, biases throughout
 *                                                                        [(side/d)^2, Ht]
 * The processor: InternVLProcessor with GotOcr2ImageProcessor (vlm_gotocr2.c; crop_to_patches as
 * its config says: tiles row by row, then a thumbnail). Each image becomes
 *   <img> <IMG_CONTEXT> x (image_seq_length x tiles) </img>
 * with image_seq_length = (side/d)^2: the image's rows fill one run of context tokens (one media
 * block, attending causally like the text). The chat template writes <IMG_CONTEXT> for an image.
 * grid[0] of an input: its tile count. Settings from processor_config.json (image_seq_length, its
 * "image_processor") or preprocessor_config.json; token strings from tokenizer_config.json's
 * start_image_token, end_image_token and context_image_token. The tower's sizes are fixed by the
 * checkpoint (image_size = the processor's tile side); use_qk_norm and norm_type rms_norm
 * (InternViT-6B) are refused by name. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "io/json_read.h"
#include "models/encoder_common.h"
#include "models/encoder_siglip.h"
#include "models/vision_clip.h"
#include "models/vision_siglip.h"
#include "models/vlm.h"
#include "models/weights.h"

typedef struct internvl_vlm {
    mxl_vlm base;
    mxl_arena arena;
    const mxl_backend *be;
    /* the tower */
    int64_t S, P, side, n;   /* image and patch size, patches per side, side^2 */
    mxl_siglip_stack stack;
    mxl_weight patch_w;      /* [Hv, 3*P*P] */
    const float *patch_b, *cls, *pos; /* [Hv], [Hv], [1 + n, Hv] */
    const float *final_w, *final_b;   /* [Hv] (use_mean_pooling false), else NULL */
    int64_t layer;           /* hidden_states index, 0..n_layers */
    /* the connector */
    int64_t d, tpt;          /* 1 / downsample_ratio, rows per tile */
    const float *ln_w, *ln_b; /* [d*d*Hv] */
    mxl_weight w1, w2;       /* [Ht, d*d*Hv], [Ht, Ht] */
    const float *b1, *b2;
    mxl_act act;
    /* the processor */
    mxl_vlm_gotocr2 tiles;
    char start_tok[64], end_tok[64], context_tok[64];
} internvl_vlm;

static void internvl_destroy(mxl_vlm *v) {
    internvl_vlm *g = (internvl_vlm *)v;
    mxl_arena_free(&g->arena);
    mxl_free(g);
}

static void *aligned(size_t bytes) { return mxl_aligned_alloc(64, (bytes + 63) / 64 * 64); }

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* out [tpt, Ht] for one tile [3, S, S]. */
static mxl_status tile_rows(const internvl_vlm *g, const float *pixels, mxl_threadpool *pool, float *out, mxl_error *err) {
    const int64_t Hv = g->stack.hidden, n = g->n, T = g->tpt, D = g->d * g->d * Hv, Ht = g->base.text_hidden, K = 3 * g->P * g->P;
    const int nt = pool ? mxl_threadpool_size(pool) : 1;
    const size_t mm = max_sz(mxl_enc_linear_scratch_bytes(g->be, &g->patch_w, n, nt),
                             max_sz(mxl_enc_linear_scratch_bytes(g->be, &g->w1, T, nt), mxl_enc_linear_scratch_bytes(g->be, &g->w2, T, nt)));
    float *patches = aligned((size_t)(n * K) * sizeof(float)), *x = aligned((size_t)((n + 1) * Hv) * sizeof(float));
    float *sel = aligned((size_t)(n * Hv) * sizeof(float)), *sh = aligned((size_t)(T * D) * sizeof(float));
    float *h = aligned((size_t)(T * Ht) * sizeof(float));
    void *scratch = mm ? aligned(mm) : NULL;
    mxl_status st = MXL_OK;
    if (!patches || !x || !sel || !sh || !h || (mm && !scratch)) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    if (!st) {
        /* x = [cls; patches Wp^T + bp] + pos */
        mxl_vision_patchify(pixels, g->S, g->P, patches);
        mxl_enc_linear_act(g->be, &g->patch_w, g->patch_b, MXL_GEMM_ACT_NONE, patches, n, x + Hv, scratch, pool);
        memcpy(x, g->cls, (size_t)Hv * sizeof(float));
        for (int64_t i = 0; i < (n + 1) * Hv; i++) x[i] += g->pos[i];
        st = mxl_vision_select_layers(&g->stack, x, n + 1, &g->layer, 1, 1, pool, sel, err);
    }
    if (!st) {
        if (g->final_w) mxl_enc_add_layernorm(g->be, pool, sel, NULL, g->final_w, g->final_b, n, Hv, g->stack.eps, sel);
        mxl_vision_pixel_shuffle(sel, g->side, g->d, Hv, sh);
        mxl_enc_add_layernorm(g->be, pool, sh, NULL, g->ln_w, g->ln_b, T, D, 1e-5f, sh);
        mxl_enc_linear_act(g->be, &g->w1, g->b1, (int)g->act, sh, T, h, scratch, pool);
        mxl_enc_linear_act(g->be, &g->w2, g->b2, MXL_GEMM_ACT_NONE, h, T, out, scratch, pool);
    }
    mxl_aligned_free(patches);
    mxl_aligned_free(x);
    mxl_aligned_free(sel);
    mxl_aligned_free(sh);
    mxl_aligned_free(h);
    mxl_aligned_free(scratch);
    return st;
}

static mxl_status internvl_encode(const mxl_vlm *v, const mxl_vlm_input *in, mxl_threadpool *pool, float *out, mxl_error *err) {
    const internvl_vlm *g = (const internvl_vlm *)v;
    const int64_t S = g->S, nt = in->grid[0];
    if (nt < 1 || in->n_tokens != nt * g->tpt || in->n_pixels != (size_t)(nt * 3 * S * S))
        return mxl_error_set(err, MXL_ERR_ARG, "internvl: an image of %zu pixel values for %lld tokens (%lld tiles of %lld tokens and %lld values each)",
                             in->n_pixels, (long long)in->n_tokens, (long long)nt, (long long)g->tpt, (long long)(3 * S * S));
    mxl_status st = MXL_OK;
    for (int64_t t = 0; t < nt && !st; t++) st = tile_rows(g, in->pixels + t * 3 * S * S, pool, out + t * g->tpt * v->text_hidden, err);
    return st;
}

static mxl_status internvl_prepare(const mxl_vlm *v, const mxl_image *im, mxl_vlm_input *out, mxl_error *err) {
    const internvl_vlm *g = (const internvl_vlm *)v;
    int64_t nt, rows, cols;
    mxl_status st = mxl_vlm_gotocr2_tiles(&v->pre, &g->tiles, im, &out->pixels, &nt, &rows, &cols, err);
    if (st) return st;
    out->n_pixels = (size_t)(nt * 3 * g->S * g->S);
    out->n_tokens = nt * g->tpt;
    out->grid[0] = nt, out->grid[1] = rows, out->grid[2] = cols;
    mxl_strbuf sb = {0};
    bool ok = mxl_strbuf_puts(&sb, g->start_tok);
    for (int64_t k = 0; k < out->n_tokens && ok; k++) ok = mxl_strbuf_puts(&sb, g->context_tok);
    if (!ok || !mxl_strbuf_puts(&sb, g->end_tok)) {
        mxl_strbuf_free(&sb);
        mxl_vlm_input_free(out);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    out->text = sb.p, out->text_len = sb.n;
    return MXL_OK;
}

/* processor_config.json (image_seq_length, its "image_processor"), preprocessor_config.json over
 * it, tokenizer_config.json's token strings. */
static mxl_status read_processor(const mxl_checkpoint *ck, internvl_vlm *g, mxl_error *err) {
    mxl_vlm_preproc *p = &g->base.pre;
    const int64_t S = g->S;
    /* GotOcr2ImageProcessor's defaults with InternVL's ImageNet mean / std, tiles of the tower's size */
    *p = (mxl_vlm_preproc){S, S, 3, true, true, true, 1.0 / 255.0, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
    g->tiles = (mxl_vlm_gotocr2){S, false, 1, 12};
    json_t *proc = NULL, *j = NULL, *tc = NULL;
    mxl_status st;
    if ((st = mxl_vlm_processor_files(ck, &j, &proc, err)) || (st = mxl_vlm_check_seq_len(ck, proc, "image_seq_length", g->tpt, err)) ||
        (st = mxl_vlm_tokenizer_config(ck, &tc, err)))
        goto out;
    mxl_vlm_str_key(tc, "start_image_token", g->start_tok, sizeof g->start_tok);
    mxl_vlm_str_key(tc, "end_image_token", g->end_tok, sizeof g->end_tok);
    mxl_vlm_str_key(tc, "context_image_token", g->context_tok, sizeof g->context_tok);
    if (j) st = mxl_vlm_gotocr2_read(ck, j, p, &g->tiles, err);
out:
    json_decref(j);
    json_decref(proc);
    json_decref(tc);
    return st;
}

/* vision_config's image_size / patch_size: an integer or a square [h, w]. */
static mxl_status square_size(const mxl_checkpoint *ck, const json_t *vc, const char *key, int64_t dflt, int64_t *out, mxl_error *err) {
    const json_t *t = json_object_get(vc, key);
    int64_t a = dflt, b = dflt;
    if (t && !json_is_null(t)) {
        if (json_is_array(t) && json_array_size(t) == 2) {
            if (mxl_json_int(json_array_get(t, 0), 1, 1 << 14, &a) || mxl_json_int(json_array_get(t, 1), 1, 1 << 14, &b)) a = -1;
        } else if (mxl_json_int(t, 1, 1 << 14, &a)) {
            a = -1;
        } else {
            b = a;
        }
    }
    if (a < 1 || a != b)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/config.json: vision_config.%s must be one size or a square [h, w] (1..16384)", ck->dir, key);
    *out = a;
    return MXL_OK;
}

static const mxl_siglip_names k_names_bias = {{
    "encoder.layer.%lld.layernorm_before.weight", "encoder.layer.%lld.layernorm_before.bias",
    "encoder.layer.%lld.attention.q_proj.weight", "encoder.layer.%lld.attention.q_proj.bias",
    "encoder.layer.%lld.attention.k_proj.weight", "encoder.layer.%lld.attention.k_proj.bias",
    "encoder.layer.%lld.attention.v_proj.weight", "encoder.layer.%lld.attention.v_proj.bias",
    "encoder.layer.%lld.attention.projection_layer.weight", "encoder.layer.%lld.attention.projection_layer.bias",
    "encoder.layer.%lld.layernorm_after.weight", "encoder.layer.%lld.layernorm_after.bias",
    "encoder.layer.%lld.mlp.fc1.weight", "encoder.layer.%lld.mlp.fc1.bias",
    "encoder.layer.%lld.mlp.fc2.weight", "encoder.layer.%lld.mlp.fc2.bias",
    "encoder.layer.%lld.lambda_1", "encoder.layer.%lld.lambda_2",
}};

/* The tower's sizes and switches (vision_config, InternVLVisionConfig's defaults) and tensors. */
static mxl_status load_tower(const mxl_checkpoint *ck, const json_t *vc, internvl_vlm *g, mxl_error *err) {
    mxl_siglip_stack *s = &g->stack;
    mxl_status st;
    if (!json_is_object(vc)) return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config is missing", ck->dir);
    const json_t *t;
    if ((t = json_object_get(vc, "use_qk_norm")) && json_is_true(t))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: internvl's vision tower with use_qk_norm (InternViT-6B) is not supported yet", ck->path);
    if ((t = json_object_get(vc, "norm_type")) && json_is_string(t) && strcmp(json_string_value(t), "layer_norm") != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: internvl's vision tower with norm_type '%s' is not supported yet (layer_norm is)", ck->path,
                             json_string_value(t));
    if ((t = json_object_get(vc, "use_absolute_position_embeddings")) && json_is_false(t))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: internvl's vision tower without absolute position embeddings is not supported", ck->path);
    if ((st = mxl_enc_subcfg_int(ck, vc, "vision_config", "hidden_size", 1024, 1, 1 << 16, &s->hidden, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "intermediate_size", 4096, 1, 1 << 18, &s->ffn, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "num_hidden_layers", 24, 1, 1024, &s->n_layers, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "num_attention_heads", 16, 1, 1024, &s->n_heads, err)) ||
        (st = square_size(ck, vc, "image_size", 448, &g->S, err)) || (st = square_size(ck, vc, "patch_size", 14, &g->P, err)))
        return st;
    if (s->hidden % s->n_heads || g->S % g->P)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config: the heads do not split hidden_size, or patch_size does not divide image_size",
                             ck->dir);
    s->head_dim = s->hidden / s->n_heads;
    g->side = g->S / g->P, g->n = g->side * g->side;
    double eps = 1e-6;
    if ((t = json_object_get(vc, "layer_norm_eps")) && !json_is_null(t) && (!mxl_json_number(t, &eps) || !(eps > 0)))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.layer_norm_eps must be a positive number", ck->dir);
    s->eps = (float)eps;
    t = json_object_get(vc, "hidden_act");
    if (mxl_enc_activation(json_is_string(t) ? json_string_value(t) : "gelu", ck->path, &s->act, err)) return err ? err->status : MXL_ERR_UNSUPPORTED;
    s->be = g->be;
    const bool bias = json_is_true(json_object_get(vc, "attention_bias"));
    const bool mean_pool = !json_is_false(json_object_get(vc, "use_mean_pooling"));
    static const char *const k_prefixes[] = {"model.vision_tower.", "vision_tower.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "embeddings.cls_token");
    if (!prefix) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'vision_tower.embeddings.cls_token' is missing (the InternVL vision tower)", ck->path);
    mxl_enc_binder b = {ck, &g->arena, prefix, err};
    const int64_t H = s->hidden;
    const float *pw;
    if (mxl_enc_conv_weight(&b, H, 3, g->P * g->P, &pw, "embeddings.patch_embeddings.projection.weight") ||
        mxl_enc_vector(&b, H, &g->patch_b, "embeddings.patch_embeddings.projection.bias") || mxl_enc_vector(&b, H, &g->cls, "embeddings.cls_token") ||
        mxl_enc_vector(&b, (g->n + 1) * H, &g->pos, "embeddings.position_embeddings") ||
        (!mean_pool && (mxl_enc_vector(&b, H, &g->final_w, "layernorm.weight") || mxl_enc_vector(&b, H, &g->final_b, "layernorm.bias"))))
        return err ? err->status : MXL_ERR_FORMAT;
    g->patch_w = (mxl_weight){.kind = MXL_W_DENSE, .dtype = MXL_DTYPE_F32, .rows = H, .cols = 3 * g->P * g->P, .data = pw};
    if ((st = g->be->ops->weight_prepare(g->be, &g->patch_w, MXL_WEIGHT_USE_GEMM, &g->arena, err))) return st;
    mxl_siglip_names nm = k_names_bias;
    if (!bias) nm.t[3] = nm.t[5] = nm.t[7] = NULL;
    return mxl_siglip_stack_bind(&b, &nm, s);
}

mxl_status mxl_vlm_internvl_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    internvl_vlm *g = mxl_calloc(1, sizeof *g);
    if (!g) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_arena_init(&g->arena, 4096);
    g->be = mxl_backend_host();
    snprintf(g->start_tok, sizeof g->start_tok, "<img>");
    snprintf(g->end_tok, sizeof g->end_tok, "</img>");
    snprintf(g->context_tok, sizeof g->context_tok, "<IMG_CONTEXT>");
    mxl_vlm *v = &g->base;
    v->family = "internvl";
    v->encode = internvl_encode;
    v->prepare = internvl_prepare;
    v->destroy = internvl_destroy;
    v->causal_images = true;
    v->before = v->after = "";
    json_t *raw = ck->config.raw;
    mxl_status st;
    if ((st = load_tower(ck, json_object_get(raw, "vision_config"), g, err))) goto fail;
    const int64_t L = g->stack.n_layers, Hv = g->stack.hidden;
    const json_t *fl = json_object_get(raw, "vision_feature_layer");
    int64_t layer = -1;
    if (fl && !json_is_null(fl) && mxl_json_int(fl, -(L + 1), L, &layer)) {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/config.json: vision_feature_layer must be one layer index in [%lld, %lld] for internvl", ck->dir,
                           (long long)-(L + 1), (long long)L);
        goto fail;
    }
    g->layer = layer < 0 ? L + 1 + layer : layer;
    if (layer != -1) g->final_w = g->final_b = NULL; /* (hidden_states[k]: no final norm) */
    const json_t *strat = json_object_get(raw, "vision_feature_select_strategy");
    if (json_is_string(strat) && strcmp(json_string_value(strat), "default") != 0) {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/config.json: vision_feature_select_strategy '%s' is not supported for internvl (default is)", ck->dir,
                           json_string_value(strat));
        goto fail;
    }
    double ratio = 0.5;
    if ((st = mxl_enc_cfg_double(ck, "downsample_ratio", 0.5, &ratio, err))) goto fail;
    g->d = ratio > 0 ? (int64_t)llround(1.0 / ratio) : 0;
    if (g->d < 1 || fabs(1.0 / (double)g->d - ratio) > 1e-9 || g->side % g->d) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: downsample_ratio %g is not 1 / d for a d dividing the vision tower's %lld patches per side", ck->dir,
                           ratio, (long long)g->side);
        goto fail;
    }
    g->tpt = (g->side / g->d) * (g->side / g->d);
    v->tokens_per_image = g->tpt;
    v->text_hidden = ck->config.hidden_size;
    if ((st = mxl_vlm_image_token(ck, 151667, &v->image_token, err))) goto fail;
    const char *act = "gelu";
    if ((st = mxl_enc_cfg_string(ck, "projector_hidden_act", "gelu", &act, err))) goto fail;
    if (mxl_enc_activation(act, ck->path, &g->act, err)) {
        st = err ? err->status : MXL_ERR_UNSUPPORTED;
        goto fail;
    }
    if ((st = read_processor(ck, g, err))) goto fail;
    static const char *const k_prefixes[] = {"model.multi_modal_projector.", "multi_modal_projector.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "linear_1.weight");
    if (!prefix) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'multi_modal_projector.linear_1.weight' is missing", ck->path);
        goto fail;
    }
    const int64_t Ht = v->text_hidden, D = g->d * g->d * Hv;
    mxl_enc_binder b = {ck, &g->arena, prefix, err};
    if (mxl_enc_vector(&b, D, &g->ln_w, "layer_norm.weight") || mxl_enc_vector(&b, D, &g->ln_b, "layer_norm.bias") ||
        mxl_enc_matrix(&b, Ht, D, &g->w1, "linear_1.weight") || mxl_enc_vector(&b, Ht, &g->b1, "linear_1.bias") ||
        mxl_enc_matrix(&b, Ht, Ht, &g->w2, "linear_2.weight") || mxl_enc_vector(&b, Ht, &g->b2, "linear_2.bias")) {
        st = err ? err->status : MXL_ERR_FORMAT;
        goto fail;
    }
    if ((st = g->be->ops->weight_prepare(g->be, &g->w1, MXL_WEIGHT_USE_GEMM, &g->arena, err)) ||
        (st = g->be->ops->weight_prepare(g->be, &g->w2, MXL_WEIGHT_USE_GEMM, &g->arena, err)))
        goto fail;
    v->image_text = g->context_tok;
    v->marker = g->context_tok; /* the chat template writes <IMG_CONTEXT>, which the processor expands */
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    internvl_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}
