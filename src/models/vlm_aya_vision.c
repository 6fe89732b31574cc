/* vlm_aya_vision.c - Aya Vision's vision side (transformers modeling_aya_vision.py /
 * processing_aya_vision.py, AyaVisionForConditionalGeneration: aya-vision-8b / 32b over a
 * Cohere2 text model, family_llava.c's aya_vision record):
 *   tower  SigLIP (vision_siglip.h) over each tile [3, S, S]; hidden_states[vision_feature_layer]
 *          (default -1: the last layer's output, before post_layernorm), every row ("full")
 *                                                                [side*side, Hv]
 *   shuffle pixel_shuffle by d = downsample_factor: row (a, b) of the [side/d, side/d] grid is
 *          the concatenation over j, k < d of patch (a*d + j, b*d + k)   [(side/d)^2, d*d*Hv]
 *   proj   LayerNorm (adapter_layer_norm_eps) -> linear_1 -> x * silu(gate) over its two halves
 *          (x first) -> linear_2, biases throughout                 [(side/d)^2, Ht]
 * The processor: AyaVisionProcessor with GotOcr2ImageProcessor's crop_to_patches (vlm_gotocr2.c:
 * tiles row by row, then a thumbnail when there is more than one; BICUBIC and mean = std = 0.5 as
 * released). Each image becomes
 *   <|START_OF_IMG|> TILE_1 P..P ... TILE_{n-1} P..P TILE_GLOBAL P..P <|END_OF_IMG|>
 * with (img_size / patch_size)^2 = (side/d)^2 copies of the patch token <|IMG_PATCH|> (P) per
 * tile: the image's rows fill its patch tokens in tile order (several runs, one media block each,
 * attending causally like the text). grid[0] of an input: its tile count. Settings from
 * processor_config.json (and its "image_processor") or preprocessor_config.json. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "image/resize.h"
#include "io/json_read.h"
#include "models/vision_clip.h"
#include "models/vision_siglip.h"
#include "models/vlm.h"
#include "models/weights.h"

typedef struct aya_vlm {
    mxl_vlm base;
    mxl_siglip_vision tower;
    int64_t layer;               /* hidden_states index, 0..n_layers */
    int64_t d, side, tpt;        /* downsample_factor, the tower's patches per side, rows per tile */
    int64_t I;                   /* alignment_intermediate_size (linear_1's output; SwiGLU halves it) */
    float eps;
    mxl_arena arena;
    const float *ln_w, *ln_b;    /* [d*d*Hv] */
    mxl_weight w1, w2;           /* [I, d*d*Hv], [Ht, I/2] */
    const float *b1, *b2;
    const mxl_backend *be;
    /* the image processor */
    mxl_vlm_gotocr2 tiles;       /* GotOcr2ImageProcessor's crop_to_patches */
    char patch_tok[64], start_tok[64], end_tok[64], tile_tok[64], global_tok[64];
    char marker[64];             /* what the chat template writes for an image ("<image>") */
} aya_vlm;

static void aya_destroy(mxl_vlm *v) {
    aya_vlm *g = (aya_vlm *)v;
    mxl_siglip_vision_free(&g->tower);
    mxl_arena_free(&g->arena);
    mxl_free(g);
}

static void *aligned(size_t bytes) { return mxl_aligned_alloc(64, (bytes + 63) / 64 * 64); }

/* out [tpt, Ht] for one tile [3, S, S]. */
static mxl_status tile_rows(const aya_vlm *g, const float *pixels, mxl_threadpool *pool, float *out, mxl_error *err) {
    const int64_t Hv = g->tower.stack.hidden, n = g->tower.n_patches, T = g->tpt, D = g->d * g->d * Hv;
    const int nt = pool ? mxl_threadpool_size(pool) : 1;
    size_t mm = mxl_enc_linear_scratch_bytes(g->be, &g->w1, T, nt), mm2 = mxl_enc_linear_scratch_bytes(g->be, &g->w2, T, nt);
    if (mm2 > mm) mm = mm2;
    float *x = aligned((size_t)(n * Hv) * sizeof(float)), *sel = aligned((size_t)(n * Hv) * sizeof(float));
    float *sh = aligned((size_t)(T * D) * sizeof(float)), *h = aligned((size_t)(T * g->I) * sizeof(float));
    float *gl = aligned((size_t)(T * (g->I / 2)) * sizeof(float));
    void *scratch = mm ? aligned(mm) : NULL;
    mxl_status st;
    if (!x || !sel || !sh || !h || !gl || (mm && !scratch)) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    else st = mxl_siglip_vision_embed(&g->tower, pixels, pool, x, err);
    if (!st) st = mxl_vision_select_layers(&g->tower.stack, x, n, &g->layer, 1, 0, pool, sel, err);
    if (!st) {
        mxl_vision_pixel_shuffle(sel, g->side, g->d, Hv, sh);
        mxl_enc_add_layernorm(g->be, pool, sh, NULL, g->ln_w, g->ln_b, T, D, g->eps, sh);
        mxl_enc_linear_act(g->be, &g->w1, g->b1, MXL_GEMM_ACT_NONE, sh, T, h, scratch, pool);
        const int64_t half = g->I / 2;
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < half; i++) {
                const float xv = h[t * g->I + i], gv = h[t * g->I + half + i];
                gl[t * half + i] = xv * (gv / (1.0f + expf(-gv)));
            }
        mxl_enc_linear_act(g->be, &g->w2, g->b2, MXL_GEMM_ACT_NONE, gl, T, out, scratch, pool);
    }
    mxl_aligned_free(x);
    mxl_aligned_free(sel);
    mxl_aligned_free(sh);
    mxl_aligned_free(h);
    mxl_aligned_free(gl);
    mxl_aligned_free(scratch);
    return st;
}

static mxl_status aya_encode(const mxl_vlm *v, const mxl_vlm_input *in, mxl_threadpool *pool, float *out, mxl_error *err) {
    const aya_vlm *g = (const aya_vlm *)v;
    const int64_t S = g->tower.image_size, nt = in->grid[0];
    if (nt < 1 || in->n_tokens != nt * g->tpt || in->n_pixels != (size_t)(nt * 3 * S * S))
        return mxl_error_set(err, MXL_ERR_ARG, "aya_vision: an image of %zu pixel values for %lld tokens (%lld tiles of %lld tokens and %lld values each)",
                             in->n_pixels, (long long)in->n_tokens, (long long)nt, (long long)g->tpt, (long long)(3 * S * S));
    mxl_status st = MXL_OK;
    for (int64_t t = 0; t < nt && !st; t++) st = tile_rows(g, in->pixels + t * 3 * S * S, pool, out + t * g->tpt * v->text_hidden, err);
    return st;
}

static mxl_status aya_prepare(const mxl_vlm *v, const mxl_image *im, mxl_vlm_input *out, mxl_error *err) {
    const aya_vlm *g = (const aya_vlm *)v;
    int64_t nt, rows, cols;
    mxl_status st = mxl_vlm_gotocr2_tiles(&v->pre, &g->tiles, im, &out->pixels, &nt, &rows, &cols, err);
    if (st) return st;
    out->n_pixels = (size_t)(nt * 3 * g->tiles.S * g->tiles.S);
    out->n_tokens = nt * g->tpt;
    out->grid[0] = nt, out->grid[1] = rows, out->grid[2] = cols;
    mxl_strbuf sb = {0};
    bool ok = mxl_strbuf_puts(&sb, g->start_tok);
    for (int64_t t = 0; t < nt && ok; t++) {
        char head[96];
        if (t < nt - 1) snprintf(head, sizeof head, "%s_%lld", g->tile_tok, (long long)(t + 1));
        else snprintf(head, sizeof head, "%s", g->global_tok);
        ok = mxl_strbuf_puts(&sb, head);
        for (int64_t k = 0; k < g->tpt && ok; k++) ok = mxl_strbuf_puts(&sb, g->patch_tok);
    }
    if (ok) ok = mxl_strbuf_puts(&sb, g->end_tok);
    if (!ok) {
        st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        goto done;
    }
    out->text = sb.p, out->text_len = sb.n;
    sb.p = NULL;
done:
    mxl_strbuf_free(&sb);
    if (st) mxl_vlm_input_free(out);
    return st;
}

/* processor_config.json (token strings, img_size / patch_size) and the image processor's
 * settings (its "image_processor", or preprocessor_config.json). */
static mxl_status read_processor(const mxl_checkpoint *ck, aya_vlm *g, mxl_error *err) {
    mxl_vlm_preproc *p = &g->base.pre;
    const int64_t S = g->tower.image_size;
    /* GotOcr2ImageProcessor's defaults but SigLIP's mean / std (as aya-vision's configs say), tiles of the tower's size */
    *p = (mxl_vlm_preproc){S, S, 3, true, true, true, 1.0 / 255.0, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
    g->tiles = (mxl_vlm_gotocr2){S, true, 1, 12};
    json_t *proc = NULL, *j = NULL;
    mxl_status st = mxl_vlm_processor_files(ck, &j, &proc, err);
    if (st) return st;
    if (proc) {
        mxl_vlm_str_key(proc, "img_patch_token", g->patch_tok, sizeof g->patch_tok);
        mxl_vlm_str_key(proc, "start_of_img_token", g->start_tok, sizeof g->start_tok);
        mxl_vlm_str_key(proc, "end_of_img_token", g->end_tok, sizeof g->end_tok);
        mxl_vlm_str_key(proc, "tile_token", g->tile_tok, sizeof g->tile_tok);
        mxl_vlm_str_key(proc, "tile_global_token", g->global_tok, sizeof g->global_tok);
        mxl_vlm_str_key(proc, "image_token", g->marker, sizeof g->marker);
        /* AyaVisionProcessor's tokens per tile: (img_size / (patch_size * its downsample_factor))^2
         * (save_pretrained writes the product as patch_size and no downsample_factor) */
        int64_t isz, psz, pds = 1;
        const json_t *ji = json_object_get(proc, "img_size"), *jp = json_object_get(proc, "patch_size"), *jd = json_object_get(proc, "downsample_factor");
        if (jd && mxl_json_int(jd, 1, 64, &pds)) pds = 1;
        if (ji && jp && !mxl_json_int(ji, 1, 1 << 14, &isz) && !mxl_json_int(jp, 1, 1 << 14, &psz) && (psz *= pds) &&
            (isz / psz) * (isz / psz) != g->tpt) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the processor's (img_size / patch_size)^2 = %lld placeholder tokens per tile, the model gives %lld",
                               ck->dir, (long long)((isz / psz) * (isz / psz)), (long long)g->tpt);
            goto out;
        }
    }
    if (j) st = mxl_vlm_gotocr2_read(ck, j, p, &g->tiles, err);
out:
    json_decref(j);
    json_decref(proc);
    return st;
}

mxl_status mxl_vlm_aya_vision_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    aya_vlm *g = mxl_calloc(1, sizeof *g);
    if (!g) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_arena_init(&g->arena, 4096);
    g->be = mxl_backend_host();
    snprintf(g->patch_tok, sizeof g->patch_tok, "<|IMG_PATCH|>");
    snprintf(g->start_tok, sizeof g->start_tok, "<|START_OF_IMG|>");
    snprintf(g->end_tok, sizeof g->end_tok, "<|END_OF_IMG|>");
    snprintf(g->tile_tok, sizeof g->tile_tok, "TILE");
    snprintf(g->global_tok, sizeof g->global_tok, "TILE_GLOBAL");
    mxl_vlm *v = &g->base;
    v->family = "aya_vision";
    v->encode = aya_encode;
    v->prepare = aya_prepare;
    v->destroy = aya_destroy;
    v->causal_images = true;
    v->before = v->after = "";
    snprintf(g->marker, sizeof g->marker, "<image>");
    json_t *raw = ck->config.raw, *vc = json_object_get(raw, "vision_config");
    const json_t *vmt = json_object_get(vc, "model_type");
    mxl_status st;
    if (json_is_string(vmt) && strcmp(json_string_value(vmt), "siglip_vision_model") != 0) {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: aya_vision with a '%s' vision tower is not supported (siglip_vision_model is)", ck->path,
                           json_string_value(vmt));
        goto fail;
    }
    if ((st = mxl_siglip_vision_load(ck, vc, &g->tower, err))) goto fail;
    const int64_t L = g->tower.stack.n_layers, Hv = g->tower.stack.hidden;
    const json_t *fl = json_object_get(raw, "vision_feature_layer");
    int64_t layer = -1;
    if (fl && !json_is_null(fl) && mxl_json_int(fl, -(L + 1), L, &layer)) {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/config.json: vision_feature_layer must be one layer index in [%lld, %lld] for aya_vision", ck->dir,
                           (long long)-(L + 1), (long long)L);
        goto fail;
    }
    g->layer = layer < 0 ? L + 1 + layer : layer;
    const json_t *strat = json_object_get(raw, "vision_feature_select_strategy");
    if (json_is_string(strat) && strcmp(json_string_value(strat), "full") != 0) {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/config.json: vision_feature_select_strategy '%s' is not supported for aya_vision's SigLIP tower (full is)",
                           ck->dir, json_string_value(strat));
        goto fail;
    }
    double eps = 1e-6;
    if ((st = mxl_enc_cfg_int(ck, "downsample_factor", 2, &g->d, err)) || (st = mxl_enc_cfg_double(ck, "adapter_layer_norm_eps", 1e-6, &eps, err)))
        goto fail;
    g->eps = (float)eps;
    g->side = g->tower.side;
    if (g->d < 1 || g->side % g->d) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: downsample_factor %lld does not divide the vision tower's %lld patches per side", ck->dir,
                           (long long)g->d, (long long)g->side);
        goto fail;
    }
    g->tpt = (g->side / g->d) * (g->side / g->d);
    v->tokens_per_image = g->tpt;
    v->text_hidden = ck->config.hidden_size;
    if ((st = mxl_vlm_image_token(ck, 255036, &v->image_token, err))) goto fail;
    const int64_t Ht = v->text_hidden, D = g->d * g->d * Hv;
    if ((st = mxl_enc_cfg_int(ck, "alignment_intermediate_size", Ht, &g->I, err))) goto fail;
    if (g->I < 2 || g->I % 2) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: alignment_intermediate_size must be even (SwiGLU halves it)", ck->dir);
        goto fail;
    }
    static const char *const k_prefixes[] = {"model.multi_modal_projector.", "multi_modal_projector.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "linear_1.weight");
    if (!prefix) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'multi_modal_projector.linear_1.weight' is missing", ck->path);
        goto fail;
    }
    mxl_enc_binder b = {ck, &g->arena, prefix, err};
    if (mxl_enc_vector(&b, D, &g->ln_w, "layernorm.weight") || mxl_enc_vector(&b, D, &g->ln_b, "layernorm.bias") ||
        mxl_enc_matrix(&b, g->I, D, &g->w1, "linear_1.weight") || mxl_enc_vector(&b, g->I, &g->b1, "linear_1.bias") ||
        mxl_enc_matrix(&b, Ht, g->I / 2, &g->w2, "linear_2.weight") || mxl_enc_vector(&b, Ht, &g->b2, "linear_2.bias")) {
        st = err ? err->status : MXL_ERR_FORMAT;
        goto fail;
    }
    if ((st = g->be->ops->weight_prepare(g->be, &g->w1, MXL_WEIGHT_USE_GEMM, &g->arena, err)) ||
        (st = g->be->ops->weight_prepare(g->be, &g->w2, MXL_WEIGHT_USE_GEMM, &g->arena, err)))
        goto fail;
    if ((st = read_processor(ck, g, err))) goto fail;
    v->image_text = g->patch_tok;
    v->marker = g->marker;
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    aya_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}
