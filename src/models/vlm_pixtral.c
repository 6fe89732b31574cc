/* vlm_pixtral.c - the vision side of the Pixtral-tower VLMs: Mistral 3 (transformers
 * modeling_mistral3.py, Mistral3ForConditionalGeneration: Mistral Small 3.1 / 3.2, Magistral Small,
 * Ministral 3 with vision) and LLaVA with a Pixtral tower (Pixtral-12B as transformers ships it:
 * model_type llava, vision_config.model_type pixtral; vlm_llava.c hands it over).
 *   tower  Pixtral (vision_pixtral.h) over one image [3, R p, C p] at its own size
 *   sel    hidden_states[vision_feature_layer] (default -1: the last layer's output; for LLaVA also
 *          a list, concatenated)                                         [R C, n_sel Hv]
 * Mistral 3 (Mistral3MultiModalProjector):
 *   norm   RMSNorm(sel) (eps text_config.rms_norm_eps)
 *   merge  each m x m neighbourhood of patches (m = spatial_merge_size, 2 as released) one row,
 *          features in (channel, ki, kj) order (torch's unfold), rows in raster order of the
 *          R/m x C/m grid; merging_layer (no bias)                       [R C / m^2, Hv]
 *   out    linear_2(act(linear_1(merged)))  (projector_hidden_act gelu; biases when
 *          multimodal_projector_bias, false as released)                 [T, Ht]
 * LLaVA + Pixtral: out = linear_2(act(linear_1(sel))) (LLaVA's projector, biases when
 *   multimodal_projector_bias, true as LlavaConfig defaults), vision_feature_select_strategy "full".
 * The processor (PixtralProcessor with PixtralImageProcessor, PIL backend): u = patch_size *
 * spatial_merge_size (the processor's); ratio = max(h / max_h, w / max_w) with max_h = max_w =
 * size.longest_edge (or size.height / size.width); when ratio > 1, h = floor(h / ratio), w likewise;
 * then h and w rounded up to multiples of u, the image resized to that with BICUBIC, rescaled and
 * normalised (CLIP's mean / std by default). The prompt's "[IMG]" becomes R/m' rows (m' the merge,
 * 1 for LLaVA) of C/m' "[IMG]" each followed by "[IMG_BREAK]", the last one's "[IMG_END]"; the
 * [IMG] positions take the image's rows in order (T = R C / m'^2 of them), the break and end tokens
 * keep their embeddings, and every row attends causally like text. grid: [0] the image's height,
 * [1] its width in pixels. A GGUF text model takes the tower and projector from llama.cpp's pixtral
 * mmproj beside it (mxl_vlm_pixtral_load_mmproj). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "image/resize.h"
#include "io/gguf.h"
#include "io/json_read.h"
#include "models/encoder_common.h"
#include "models/vision_pixtral.h"
#include "models/vlm.h"
#include "models/weights.h"

#define MAX_SEL 8

typedef struct pixtral_vlm {
    mxl_vlm base;
    mxl_pixtral_vision tower;
    int64_t layers[MAX_SEL];   /* hidden_states indices, 0..n_layers */
    int n_sel;
    int64_t merge;             /* spatial_merge_size (Mistral 3), 1 for LLaVA */
    bool mistral3;
    mxl_arena arena;
    const float *norm;         /* [Hv] (Mistral 3) */
    float norm_eps;
    mxl_weight wm;             /* merging_layer [Hv, Hv m^2] (Mistral 3) */
    mxl_weight w1, w2;         /* [Ht, n_sel Hv], [Ht, Ht] */
    const float *b1, *b2;      /* [Ht] or NULL */
    mxl_act act;
    const mxl_backend *be;
    /* the processor */
    int64_t unit;              /* patch_size * spatial_merge_size */
    int64_t max_h, max_w;
    char img[64], brk[64], end[64]; /* "[IMG]", "[IMG_BREAK]", "[IMG_END]" */
    mxl_checkpoint *mm;        /* the mmproj GGUF the tower was read from (closed with the vlm), or NULL */
} pixtral_vlm;

static void pixtral_destroy(mxl_vlm *v) {
    pixtral_vlm *g = (pixtral_vlm *)v;
    mxl_pixtral_vision_free(&g->tower);
    mxl_arena_free(&g->arena);
    if (g->mm) mxl_checkpoint_close(g->mm);
    mxl_free(g);
}

static size_t max_sz_(size_t a, size_t b) { return a > b ? a : b; }

static void *aligned(size_t bytes) { return mxl_aligned_alloc(64, (bytes + 63) / 64 * 64); }

static mxl_status pixtral_encode(const mxl_vlm *v, const mxl_vlm_input *in, mxl_threadpool *pool, float *out, mxl_error *err) {
    const pixtral_vlm *g = (const pixtral_vlm *)v;
    const int64_t P = g->tower.patch, Hv = g->tower.hidden, Ht = v->text_hidden, m = g->merge;
    const int64_t ph = in->grid[0], pw = in->grid[1];
    if (ph < P * m || pw < P * m || ph % (P * m) || pw % (P * m) || in->n_pixels != (size_t)(3 * ph * pw))
        return mxl_error_set(err, MXL_ERR_ARG, "%s: an image of %lldx%lld pixels (%zu values); this tower takes multiples of %lld", v->family, (long long)pw,
                             (long long)ph, in->n_pixels, (long long)(P * m));
    const int64_t R = ph / P, C = pw / P, n = R * C, T = n / (m * m), Wsel = g->n_sel * Hv;
    if (in->n_tokens != T)
        return mxl_error_set(err, MXL_ERR_ARG, "%s: an image of %lld tokens; its %lldx%lld pixels give %lld", v->family, (long long)in->n_tokens,
                             (long long)pw, (long long)ph, (long long)T);
    const int nt = pool ? mxl_threadpool_size(pool) : 1;
    size_t mm = max_sz_(mxl_enc_linear_scratch_bytes(g->be, &g->w1, T, nt), mxl_enc_linear_scratch_bytes(g->be, &g->w2, T, nt));
    if (g->mistral3) mm = max_sz_(mm, mxl_enc_linear_scratch_bytes(g->be, &g->wm, T, nt));
    float *sel = aligned((size_t)(n * Wsel) * sizeof(float));
    float *merged = g->mistral3 ? aligned((size_t)(n * Hv) * sizeof(float)) : NULL;
    float *red = g->mistral3 ? aligned((size_t)(T * Hv) * sizeof(float)) : NULL;
    float *h = aligned((size_t)(T * Ht) * sizeof(float));
    void *scratch = mm ? aligned(mm) : NULL;
    mxl_status st = MXL_OK;
    if (!sel || !h || (g->mistral3 && (!merged || !red)) || (mm && !scratch)) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    else st = mxl_pixtral_vision_forward(&g->tower, in->pixels, R, C, g->layers, g->n_sel, pool, sel, err);
    if (!st) {
        const float *x = sel;
        if (g->mistral3) {
            for (int64_t t = 0; t < n; t++) g->be->ops->rmsnorm(g->be, sel + t * Hv, g->norm, Hv, g->norm_eps, 0, sel + t * Hv);
            /* merged row (bi, bj), column c m^2 + ki m + kj = sel[(bi m + ki) C + bj m + kj][c] */
            const int64_t Cm = C / m, mm2 = m * m;
            for (int64_t bi = 0; bi < R / m; bi++)
                for (int64_t bj = 0; bj < Cm; bj++) {
                    float *row = merged + (bi * Cm + bj) * Hv * mm2;
                    for (int64_t ki = 0; ki < m; ki++)
                        for (int64_t kj = 0; kj < m; kj++) {
                            const float *src = sel + ((bi * m + ki) * C + bj * m + kj) * Hv;
                            for (int64_t c = 0; c < Hv; c++) row[c * mm2 + ki * m + kj] = src[c];
                        }
                }
            mxl_enc_linear_act(g->be, &g->wm, NULL, MXL_GEMM_ACT_NONE, merged, T, red, scratch, pool);
            x = red;
        }
        mxl_enc_linear_act(g->be, &g->w1, g->b1, (int)g->act, x, T, h, scratch, pool);
        mxl_enc_linear_act(g->be, &g->w2, g->b2, MXL_GEMM_ACT_NONE, h, T, out, scratch, pool);
    }
    mxl_aligned_free(sel);
    mxl_aligned_free(merged);
    mxl_aligned_free(red);
    mxl_aligned_free(h);
    mxl_aligned_free(scratch);
    return st;
}

static mxl_status pixtral_prepare(const mxl_vlm *v, const mxl_image *im, mxl_vlm_input *out, mxl_error *err) {
    const pixtral_vlm *g = (const pixtral_vlm *)v;
    const mxl_vlm_preproc *p = &v->pre;
    const int64_t u = g->unit;
    int64_t h = im->h, w = im->w;
    if (p->do_resize) {
        /* get_resize_output_image_size: shrink to fit (floor), then round up to multiples of u */
        const double ratio = fmax((double)h / (double)g->max_h, (double)w / (double)g->max_w);
        if (ratio > 1) h = (int64_t)floor((double)h / ratio), w = (int64_t)floor((double)w / ratio);
        h = h < 1 ? 0 : ((h - 1) / u + 1) * u;
        w = w < 1 ? 0 : ((w - 1) / u + 1) * u;
    }
    if (h < u || w < u || h > (1 << 15) || w > (1 << 15) || h % u || w % u)
        return mxl_error_set(err, MXL_ERR_ARG, "the image (%dx%d) gives %lldx%lld pixels for this model's processor (positive multiples of %lld are needed)", im->w, im->h,
                             (long long)w, (long long)h, (long long)u);
    mxl_image sized = {0, 0, NULL};
    const mxl_image *cur = im;
    mxl_status st;
    if (w != im->w || h != im->h) {
        if ((st = mxl_image_resize(im, (int32_t)w, (int32_t)h, (mxl_resample)p->resample, &sized, err))) return st;
        cur = &sized;
    }
    double rs;
    const float *mean, *std;
    mxl_vlm_norm_params(p, &rs, &mean, &std);
    out->n_pixels = (size_t)(3 * h * w);
    out->pixels = mxl_malloc(out->n_pixels * sizeof(float));
    const int64_t rows = h / u, cols = w / u;
    out->n_tokens = rows * cols;
    out->grid[0] = h, out->grid[1] = w, out->grid[2] = rows, out->grid[3] = cols;
    mxl_strbuf sb = {0};
    bool ok = out->pixels != NULL;
    for (int64_t r = 0; r < rows && ok; r++) {
        for (int64_t c = 0; c < cols && ok; c++) ok = mxl_strbuf_puts(&sb, g->img);
        ok = ok && mxl_strbuf_puts(&sb, r + 1 < rows ? g->brk : g->end);
    }
    if (!ok) {
        mxl_strbuf_free(&sb);
        mxl_image_free(&sized);
        mxl_vlm_input_free(out);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    out->text = sb.p;
    out->text_len = sb.n;
    mxl_image_to_pixels(cur, rs, mean, std, out->pixels);
    mxl_image_free(&sized);
    return MXL_OK;
}

static bool file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static mxl_status token_text(const json_t *proc, const char *key, char *dst, size_t cap, const mxl_checkpoint *ck, mxl_error *err) {
    const json_t *t = proc ? json_object_get(proc, key) : NULL;
    if (!t || json_is_null(t)) return MXL_OK;
    if (!json_is_string(t) || json_string_length(t) == 0 || json_string_length(t) >= cap)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/processor_config.json: %s must be a token's text", ck->dir, key);
    snprintf(dst, cap, "%s", json_string_value(t));
    return MXL_OK;
}

/* The processor's settings: processor_config.json (tokens, patch_size, spatial_merge_size, and in
 * transformers 5 the image processor under "image_processor"), preprocessor_config.json (the image
 * processor, as the released checkpoints have it); PixtralImageProcessor's defaults else. */
static mxl_status read_processor(const mxl_checkpoint *ck, pixtral_vlm *g, mxl_error *err) {
    mxl_vlm_preproc *p = &g->base.pre;
    *p = mxl_vlm_preproc_clip_bicubic();
    g->max_h = g->max_w = 1024;
    const int64_t unit = g->tower.patch * g->merge;
    g->unit = unit;
    char path[4200];
    json_t *proc = NULL, *j = NULL;
    mxl_status st = MXL_OK;
    snprintf(path, sizeof path, "%s/processor_config.json", ck->dir);
    if (file_exists(path) && (st = mxl_json_load_file_py(path, 1 << 20, &proc, err))) return st;
    if ((st = token_text(proc, "image_token", g->img, sizeof g->img, ck, err)) || (st = token_text(proc, "image_break_token", g->brk, sizeof g->brk, ck, err)) ||
        (st = token_text(proc, "image_end_token", g->end, sizeof g->end, ck, err)))
        goto out;
    if (proc) {
        /* the processor's unit must be the model's: patch_size * spatial_merge_size */
        int64_t pp = 16, sm = 1; /* (PixtralProcessor's defaults) */
        const json_t *a = json_object_get(proc, "patch_size"), *b = json_object_get(proc, "spatial_merge_size");
        if ((a && !json_is_null(a) && mxl_json_int(a, 1, 1 << 10, &pp)) || (b && !json_is_null(b) && mxl_json_int(b, 1, 64, &sm))) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/processor_config.json: patch_size and spatial_merge_size must be positive integers", ck->dir);
            goto out;
        }
        if (pp * sm != unit) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/processor_config.json: patch_size %lld x spatial_merge_size %lld is not the model's %lld x %lld", ck->dir,
                               (long long)pp, (long long)sm, (long long)g->tower.patch, (long long)g->merge);
            goto out;
        }
    }
    snprintf(path, sizeof path, "%s/preprocessor_config.json", ck->dir);
    if (file_exists(path)) {
        if ((st = mxl_json_load_file_py(path, 1 << 20, &j, err))) goto out;
    } else if (proc && json_is_object(json_object_get(proc, "image_processor"))) {
        j = json_incref(json_object_get(proc, "image_processor"));
    }
    if (!j) goto out;
    const json_t *size = json_object_get(j, "size"), *b;
    if (json_is_object(size)) {
        const json_t *le = json_object_get(size, "longest_edge");
        if (le && !json_is_null(le)) {
            if (mxl_json_int(le, 1, 1 << 15, &g->max_h)) {
                st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's size.longest_edge must be a positive integer", ck->dir);
                goto out;
            }
            g->max_w = g->max_h;
        } else if (mxl_json_int(json_object_get(size, "height"), 1, 1 << 15, &g->max_h) || mxl_json_int(json_object_get(size, "width"), 1, 1 << 15, &g->max_w)) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's size needs longest_edge, or height and width", ck->dir);
            goto out;
        }
    }
    if ((b = json_object_get(j, "do_center_crop")) && json_is_true(b)) {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: the Pixtral image processor's do_center_crop is not supported", ck->dir);
        goto out;
    }
    int64_t rs = p->resample;
    if (json_object_get(j, "resample") && mxl_json_int(json_object_get(j, "resample"), 0, 5, &rs)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's resample must be a PIL filter number", ck->dir);
        goto out;
    }
    p->resample = (int)rs;
    mxl_vlm_preproc_json(j, p, NULL);
    if (p->std[0] == 0 || p->std[1] == 0 || p->std[2] == 0 || !(p->rescale > 0) || p->resample == 4 || p->resample == 5)
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: non-zero image_std, a positive rescale_factor and a NEAREST / BILINEAR / BICUBIC / LANCZOS resample are expected", ck->dir);
out:
    json_decref(j);
    json_decref(proc);
    /* (the default prepare's target: the largest image, for callers that read pre.width / height) */
    p->width = g->max_w / unit * unit, p->height = g->max_h / unit * unit;
    return st;
}

/* vision_feature_layer: one index (or, for LLaVA, a list), negatives from the end of
 * hidden_states (n_layers + 1 of them). */
static mxl_status read_layers(const mxl_checkpoint *ck, pixtral_vlm *g, mxl_error *err) {
    const json_t *fl = json_object_get(ck->config.raw, "vision_feature_layer");
    const int64_t L = g->tower.n_layers;
    json_t *one = NULL;
    if (!fl || json_is_null(fl)) fl = one = json_integer(-1);
    const size_t n = json_is_array(fl) ? json_array_size(fl) : 1;
    mxl_status st = MXL_OK;
    if (n < 1 || n > MAX_SEL || (g->mistral3 && json_is_array(fl)))
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_feature_layer must name %s", ck->dir,
                           g->mistral3 ? "one layer (Mistral 3's projector norms one layer's features)" : "1 to 8 layers");
    for (size_t k = 0; !st && k < n; k++) {
        int64_t i;
        if (mxl_json_int(json_is_array(fl) ? json_array_get(fl, k) : fl, -(L + 1), L, &i)) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_feature_layer must be layer indices in [%lld, %lld]", ck->dir, (long long)-(L + 1),
                               (long long)L);
            break;
        }
        g->layers[k] = i < 0 ? L + 1 + i : i;
    }
    g->n_sel = (int)n;
    json_decref(one);
    return st;
}

/* The projector's names: LLaVA's two linears and their biases, Mistral 3's norm and patch merger. */
typedef struct projector_names {
    const char *w1, *w2, *b1, *b2, *norm, *merger;
} projector_names;
static const projector_names k_proj_hf = {"linear_1.weight", "linear_2.weight", "linear_1.bias", "linear_2.bias", "norm.weight",
                                          "patch_merger.merging_layer.weight"};
static const projector_names k_proj_gguf = {"mm.1.weight", "mm.2.weight", "mm.1.bias", "mm.2.bias", "mm.input_norm.weight", "mm.patch_merger.weight"};

/* The projector under names nm (input width in: the selected layers' features). */
static mxl_status bind_projector(pixtral_vlm *g, const mxl_enc_binder *b, const projector_names *nm, int64_t in, bool bias, mxl_error *err) {
    const int64_t Hv = g->tower.hidden, Ht = g->base.text_hidden;
    if (mxl_enc_matrix(b, Ht, in, &g->w1, "%s", nm->w1) || mxl_enc_matrix(b, Ht, Ht, &g->w2, "%s", nm->w2) ||
        (bias && (mxl_enc_vector(b, Ht, &g->b1, "%s", nm->b1) || mxl_enc_vector(b, Ht, &g->b2, "%s", nm->b2))) ||
        (g->mistral3 && (mxl_enc_vector(b, Hv, &g->norm, "%s", nm->norm) || mxl_enc_matrix(b, Hv, Hv * g->merge * g->merge, &g->wm, "%s", nm->merger))))
        return err ? err->status : MXL_ERR_FORMAT;
    return MXL_OK;
}

/* A new vlm with its hooks and Pixtral's image tokens (NULL: out of memory). */
static pixtral_vlm *new_vlm(bool mistral3) {
    pixtral_vlm *g = mxl_calloc(1, sizeof *g);
    if (!g) return NULL;
    mxl_arena_init(&g->arena, 4096);
    g->be = mxl_backend_host();
    g->mistral3 = mistral3;
    snprintf(g->img, sizeof g->img, "[IMG]");
    snprintf(g->brk, sizeof g->brk, "[IMG_BREAK]");
    snprintf(g->end, sizeof g->end, "[IMG_END]");
    mxl_vlm *v = &g->base;
    v->family = mistral3 ? "mistral3" : "llava";
    v->encode = pixtral_encode;
    v->prepare = pixtral_prepare;
    v->destroy = pixtral_destroy;
    v->causal_images = true;
    v->before = v->after = "";
    return g;
}

/* The projector's weights prepared; the default image's token count; the image marker. */
static mxl_status finish(pixtral_vlm *g, mxl_error *err) {
    mxl_vlm *v = &g->base;
    mxl_status st;
    if ((st = g->be->ops->weight_prepare(g->be, &g->w1, MXL_WEIGHT_USE_GEMM, &g->arena, err)) ||
        (st = g->be->ops->weight_prepare(g->be, &g->w2, MXL_WEIGHT_USE_GEMM, &g->arena, err)) ||
        (g->mistral3 && (st = g->be->ops->weight_prepare(g->be, &g->wm, MXL_WEIGHT_USE_GEMM, &g->arena, err))))
        return st;
    /* (the default image: the largest, whose token count tokens_per_image gives) */
    v->tokens_per_image = (v->pre.width / g->unit) * (v->pre.height / g->unit);
    v->marker = v->image_text = g->img;
    return MXL_OK;
}

static mxl_status load(const mxl_checkpoint *ck, bool mistral3, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    pixtral_vlm *g = new_vlm(mistral3);
    if (!g) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_vlm *v = &g->base;
    json_t *raw = ck->config.raw, *vc = json_object_get(raw, "vision_config");
    mxl_status st = mxl_pixtral_vision_load(ck, vc, &g->tower, err);
    if (st) goto fail;
    if ((st = read_layers(ck, g, err))) goto fail;
    g->merge = 1;
    if (mistral3) {
        const json_t *sm = json_object_get(raw, "spatial_merge_size");
        g->merge = 2; /* (Mistral3Config's default) */
        if (sm && !json_is_null(sm) && mxl_json_int(sm, 1, 64, &g->merge)) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: spatial_merge_size must be a positive integer", ck->dir);
            goto fail;
        }
        double eps = 1e-6; /* (MistralConfig's rms_norm_eps, the default text_config) */
        const json_t *tc = json_object_get(raw, "text_config"), *je = tc ? json_object_get(tc, "rms_norm_eps") : NULL;
        if (je && !json_is_null(je) && (!mxl_json_number(je, &eps) || !(eps > 0))) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: text_config.rms_norm_eps must be a positive number", ck->dir);
            goto fail;
        }
        g->norm_eps = (float)eps;
    } else {
        const json_t *strat = json_object_get(raw, "vision_feature_select_strategy");
        const char *sn = json_is_string(strat) ? json_string_value(strat) : "default";
        if (strcmp(sn, "full") != 0) {
            st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/config.json: vision_feature_select_strategy '%s' with a Pixtral tower is not supported (full is)", ck->dir, sn);
            goto fail;
        }
    }
    if ((st = mxl_vlm_image_token(ck, mistral3 ? 10 : 32000, &v->image_token, err))) goto fail;
    v->text_hidden = ck->config.hidden_size;
    const json_t *pa = json_object_get(raw, "projector_hidden_act");
    char what[4200];
    snprintf(what, sizeof what, "%s/config.json: projector_hidden_act", ck->dir);
    if (mxl_enc_activation(json_is_string(pa) ? json_string_value(pa) : "gelu", what, &g->act, err)) {
        st = err ? err->status : MXL_ERR_UNSUPPORTED;
        goto fail;
    }
    const json_t *pb = json_object_get(raw, "multimodal_projector_bias");
    const bool bias = (!pb || json_is_null(pb)) ? !mistral3 : json_is_true(pb);
    static const char *const k_prefixes[] = {"multi_modal_projector.", "model.multi_modal_projector.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "linear_1.weight");
    if (!prefix) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'multi_modal_projector.linear_1.weight' is missing", ck->path);
        goto fail;
    }
    const int64_t In = g->n_sel * g->tower.hidden;
    mxl_enc_binder b = {ck, &g->arena, prefix, err};
    if (mxl_enc_has(&b, "linear_1.scales")) {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: the multimodal projector is quantized (an MLX conversion); it runs from dense F32/F16/BF16 weights", ck->path);
        goto fail;
    }
    if ((st = bind_projector(g, &b, &k_proj_hf, In, bias, err))) goto fail;
    if ((st = read_processor(ck, g, err)) || (st = finish(g, err))) goto fail;
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    pixtral_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}

/* llama.cpp's mmproj of projector type pixtral: LLaVA's two-layer projector mm.1 / mm.2 (biases
 * when the file has them), or Mistral 3's when it holds mm.patch_merger.weight (mm.input_norm,
 * clip.vision.spatial_merge_size, default 2; the norm's eps the text model's). The processor:
 * longest edge clip.vision.preproc_image_size, else the tower's image_size (the released models'
 * processors use the tower's size), the mmproj's mean / std, BICUBIC; the last block's features. */
mxl_status mxl_vlm_pixtral_load_mmproj(const mxl_checkpoint *ck, mxl_checkpoint *mm, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    const bool mistral3 = mxl_gguf_find_tensor(mm->gguf, "mm.patch_merger.weight") != NULL;
    pixtral_vlm *g = new_vlm(mistral3);
    if (!g) {
        mxl_checkpoint_close(mm);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    g->mm = mm;
    mxl_vlm *v = &g->base;
    mxl_status st = mxl_pixtral_vision_load_gguf(mm, &g->tower, err);
    if (st) goto fail;
    g->n_sel = 1, g->layers[0] = g->tower.n_layers;
    g->merge = 1;
    uint64_t u;
    if (mistral3) {
        g->merge = 2;
        if (mxl_gguf_find(mm->gguf, "clip.vision.spatial_merge_size")) {
            if ((st = mxl_gguf_get_u64(mm->gguf, "clip.vision.spatial_merge_size", &u, err))) goto fail;
            if (u < 1 || u > 64) {
                st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: clip.vision.spatial_merge_size %llu is out of range", mm->path, (unsigned long long)u);
                goto fail;
            }
            g->merge = (int64_t)u;
        }
        g->norm_eps = ck->config.rms_norm_eps > 0 ? (float)ck->config.rms_norm_eps : 1e-5f;
    }
    g->act = MXL_ACT_GELU_ERF; /* (projector_hidden_act gelu, as LlavaConfig / Mistral3Config default it) */
    const int64_t img = mxl_vlm_gguf_token_id(ck, g->img);
    if (img < 0 || mxl_vlm_gguf_token_id(ck, g->brk) < 0 || mxl_vlm_gguf_token_id(ck, g->end) < 0) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the vocabulary has no '%s' / '%s' / '%s' tokens for images", ck->path, g->img, g->brk, g->end);
        goto fail;
    }
    v->image_token = (int32_t)img;
    v->text_hidden = ck->config.hidden_size;
    mxl_enc_binder b = {mm, &g->arena, "", err};
    if ((st = bind_projector(g, &b, &k_proj_gguf, g->tower.hidden, mxl_enc_has(&b, "mm.1.bias"), err))) goto fail;
    mxl_vlm_preproc *p = &v->pre;
    *p = mxl_vlm_preproc_clip_bicubic();
    mxl_vlm_gguf_mean_std(mm, p);
    g->unit = g->tower.patch * g->merge;
    const char *edge = mxl_gguf_find(mm->gguf, "clip.vision.preproc_image_size") ? "clip.vision.preproc_image_size" : "clip.vision.image_size";
    if ((st = mxl_gguf_get_u64(mm->gguf, edge, &u, err))) goto fail;
    if (u < (uint64_t)g->unit || u > (1u << 15)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s %llu is out of range", mm->path, edge, (unsigned long long)u);
        goto fail;
    }
    g->max_h = g->max_w = (int64_t)u;
    p->width = g->max_w / g->unit * g->unit, p->height = g->max_h / g->unit * g->unit;
    if ((st = finish(g, err))) goto fail;
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    pixtral_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}

mxl_status mxl_vlm_mistral3_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) { return load(ck, true, out, err); }
mxl_status mxl_vlm_llava_pixtral_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) { return load(ck, false, out, err); }
