/* vlm_llava.c - LLaVA's vision side (transformers modeling_llava.py / processing_llava.py,
 * LlavaForConditionalGeneration: llava-1.5, llava-interleave, BakLLaVA and the like):
 *   tower  CLIP (vision_clip.h; vision_config.model_type clip_vision_model, the default) or
 *          SigLIP (vision_siglip.h; siglip_vision_model) over one image [3, S, S]; a Pixtral tower
 *          (vision_config.model_type pixtral: Pixtral-12B) is vlm_pixtral.c's, processor and all
 *   sel    hidden_states[vision_feature_layer] (default -2: the second-to-last layer's output,
 *          no final norm), or for a list of layers their states concatenated along the features;
 *          vision_feature_select_strategy "default" drops the first row (CLIP's class token),
 *          "full" keeps every row                                  [T, n_sel * Hv]
 *   out    linear_2(act(linear_1(sel)))  (projector_hidden_act, gelu as released; biases when
 *          multimodal_projector_bias, as released)                [T, Ht]
 * T = the tower's positions (1 + patches for CLIP, patches for SigLIP) minus one for "default".
 * The processor (LlavaProcessor) writes each "<image>" of the prompt as T copies of "<image>"
 * (its count: patches + num_additional_image_tokens - 1 for "default", the same T for the
 * released configs); the image rows attend causally like the text (the decoder's plain mask).
 * Its image processor (the PIL backend): CLIPImageProcessor - resize the shortest edge to
 * size.shortest_edge with BICUBIC, center crop to crop_size, rescale 1/255, normalise with CLIP's
 * mean / std; SiglipImageProcessor - resize to size.height x size.width; LlavaImageProcessor's
 * do_pad first pads to a square of the mean colour. Settings from preprocessor_config.json or
 * processor_config.json's "image_processor" (transformers 5), the class defaults else. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "image/resize.h"
#include "io/json_read.h"
#include "io/safetensors.h"
#include "models/vision_clip.h"
#include "models/vision_siglip.h"
#include "models/vlm.h"
#include "models/weights.h"

#define MAX_SEL 8

typedef struct llava_vlm {
    mxl_vlm base;
    bool clip;                    /* the tower: CLIP, else SigLIP */
    mxl_clip_vision ctower;
    mxl_siglip_vision stower;
    const mxl_siglip_stack *stack;
    int64_t n_pos;                /* the tower's rows per image */
    int64_t image_size;
    int64_t layers[MAX_SEL];      /* hidden_states indices, 0..n_layers */
    int n_sel;
    int64_t skip;                 /* 1 for "default" */
    mxl_arena arena;
    mxl_weight w1, w2;            /* [Ht, n_sel * Hv], [Ht, Ht] */
    const float *b1, *b2;         /* [Ht] or NULL */
    mxl_act act;
    const mxl_backend *be;
    /* the image processor */
    bool shortest;                /* resize the shortest edge to short_edge, else to rh x rw */
    int64_t short_edge, rh, rw;
    bool crop;
    int64_t ch, cw;
    bool pad;                     /* pad to a square of pad_rgb first */
    uint8_t pad_rgb[3];
    char token[64];               /* the image token's text ("<image>") */
} llava_vlm;

static void llava_destroy(mxl_vlm *v) {
    llava_vlm *g = (llava_vlm *)v;
    if (g->clip) mxl_clip_vision_free(&g->ctower);
    else mxl_siglip_vision_free(&g->stower);
    mxl_arena_free(&g->arena);
    mxl_free(g);
}

static void *aligned(size_t bytes) { return mxl_aligned_alloc(64, (bytes + 63) / 64 * 64); }

static mxl_status llava_encode(const mxl_vlm *v, const mxl_vlm_input *in, mxl_threadpool *pool, float *out, mxl_error *err) {
    const llava_vlm *g = (const llava_vlm *)v;
    const int64_t Hv = g->stack->hidden, n = g->n_pos, T = n - g->skip, Ht = v->text_hidden;
    if (in->n_tokens != T || in->n_pixels != (size_t)(3 * g->image_size * g->image_size))
        return mxl_error_set(err, MXL_ERR_ARG, "llava: an image of %zu pixel values for %lld tokens (this tower takes %lld and gives %lld)",
                             in->n_pixels, (long long)in->n_tokens, (long long)(3 * g->image_size * g->image_size), (long long)T);
    const int nt = pool ? mxl_threadpool_size(pool) : 1;
    size_t mm = mxl_enc_linear_scratch_bytes(g->be, &g->w1, T, nt), mm2 = mxl_enc_linear_scratch_bytes(g->be, &g->w2, T, nt);
    if (mm2 > mm) mm = mm2;
    float *x = aligned((size_t)(n * Hv) * sizeof(float));
    float *sel = aligned((size_t)(T * g->n_sel * Hv) * sizeof(float));
    float *h = aligned((size_t)(T * Ht) * sizeof(float));
    void *scratch = mm ? aligned(mm) : NULL;
    mxl_status st;
    if (!x || !sel || !h || (mm && !scratch)) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    else if (g->clip) st = mxl_clip_vision_embed(&g->ctower, in->pixels, pool, x, err);
    else st = mxl_siglip_vision_embed(&g->stower, in->pixels, pool, x, err);
    if (!st) st = mxl_vision_select_layers(g->stack, x, n, g->layers, g->n_sel, g->skip, pool, sel, err);
    if (!st) {
        mxl_enc_linear_act(g->be, &g->w1, g->b1, (int)g->act, sel, T, h, scratch, pool);
        mxl_enc_linear_act(g->be, &g->w2, g->b2, MXL_GEMM_ACT_NONE, h, T, out, scratch, pool);
    }
    mxl_aligned_free(x);
    mxl_aligned_free(sel);
    mxl_aligned_free(h);
    mxl_aligned_free(scratch);
    return st;
}

/* im cropped to cw x ch about its centre the way transformers' center_crop does it: top =
 * floor((h - ch) / 2), left likewise, zeros where the window leaves the image (a smaller image
 * padded about its centre). */
static mxl_status center_crop(const mxl_image *im, int64_t cw, int64_t ch, mxl_image *out, mxl_error *err) {
    out->rgb = mxl_calloc((size_t)(cw * ch * 3), 1);
    if (!out->rgb) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    out->w = (int32_t)cw, out->h = (int32_t)ch;
    const int64_t dh = (int64_t)im->h - ch, dw = (int64_t)im->w - cw;
    const int64_t top = dh >= 0 ? dh / 2 : -((-dh + 1) / 2), left = dw >= 0 ? dw / 2 : -((-dw + 1) / 2);
    for (int64_t y = 0; y < ch; y++) {
        const int64_t sy = top + y;
        if (sy < 0 || sy >= im->h) continue;
        for (int64_t x = 0; x < cw; x++) {
            const int64_t sx = left + x;
            if (sx >= 0 && sx < im->w) memcpy(out->rgb + (y * cw + x) * 3, im->rgb + (sy * im->w + sx) * 3, 3);
        }
    }
    return MXL_OK;
}

/* LlavaImageProcessor's pad_to_square: the image centred on a square of the longer side. */
static mxl_status pad_square(const mxl_image *im, const uint8_t rgb[3], mxl_image *out, mxl_error *err) {
    const int64_t s = im->w > im->h ? im->w : im->h;
    out->rgb = mxl_malloc((size_t)(s * s * 3));
    if (!out->rgb) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    out->w = out->h = (int32_t)s;
    for (int64_t i = 0; i < s * s; i++) memcpy(out->rgb + i * 3, rgb, 3);
    const int64_t oy = im->w > im->h ? (s - im->h) / 2 : 0, ox = im->h > im->w ? (s - im->w) / 2 : 0;
    for (int64_t y = 0; y < im->h; y++) memcpy(out->rgb + ((oy + y) * s + ox) * 3, im->rgb + y * im->w * 3, (size_t)im->w * 3);
    return MXL_OK;
}

static mxl_status llava_prepare(const mxl_vlm *v, const mxl_image *im, mxl_vlm_input *out, mxl_error *err) {
    const llava_vlm *g = (const llava_vlm *)v;
    const mxl_vlm_preproc *p = &v->pre;
    mxl_image stage[3] = {{0, 0, NULL}, {0, 0, NULL}, {0, 0, NULL}};
    const mxl_image *cur = im;
    mxl_status st = MXL_OK;
    if (g->pad && cur->w != cur->h) {
        if ((st = pad_square(cur, g->pad_rgb, &stage[0], err))) goto done;
        cur = &stage[0];
    }
    if (p->do_resize) {
        int64_t w = g->rw, h = g->rh;
        if (g->shortest) {
            /* get_resize_output_image_size(default_to_square=False): the short side to short_edge,
             * the long one int(short_edge * long / short) */
            const int64_t s = cur->w <= cur->h ? cur->w : cur->h, l = cur->w <= cur->h ? cur->h : cur->w;
            const int64_t nl = (int64_t)((double)(g->short_edge * l) / (double)s);
            if (cur->w <= cur->h) w = g->short_edge, h = nl;
            else h = g->short_edge, w = nl;
        }
        if (w < 1 || h < 1 || w > (1 << 15) || h > (1 << 15)) {
            st = mxl_error_set(err, MXL_ERR_ARG, "the image (%dx%d) resizes to %lldx%lld", cur->w, cur->h, (long long)w, (long long)h);
            goto done;
        }
        if (w != cur->w || h != cur->h) {
            if ((st = mxl_image_resize(cur, (int32_t)w, (int32_t)h, (mxl_resample)p->resample, &stage[1], err))) goto done;
            cur = &stage[1];
        }
    }
    if (g->crop && (cur->w != g->cw || cur->h != g->ch)) {
        if ((st = center_crop(cur, g->cw, g->ch, &stage[2], err))) goto done;
        cur = &stage[2];
    }
    if (cur->w != g->image_size || cur->h != g->image_size) {
        st = mxl_error_set(err, MXL_ERR_ARG, "the image is %dx%d after this model's processor; its vision tower takes %lldx%lld", cur->w, cur->h,
                           (long long)g->image_size, (long long)g->image_size);
        goto done;
    }
    static const float zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    out->n_pixels = (size_t)(3 * g->image_size * g->image_size);
    out->pixels = mxl_malloc(out->n_pixels * sizeof(float));
    out->n_tokens = v->tokens_per_image;
    mxl_strbuf sb = {0};
    bool ok = out->pixels != NULL;
    for (int64_t t = 0; t < out->n_tokens && ok; t++) ok = mxl_strbuf_puts(&sb, g->token);
    if (!ok) {
        mxl_strbuf_free(&sb);
        mxl_vlm_input_free(out);
        st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        goto done;
    }
    out->text = sb.p;
    out->text_len = sb.n;
    mxl_image_to_pixels(cur, p->do_rescale ? p->rescale : 1.0, p->do_normalize ? p->mean : zero, p->do_normalize ? p->std : one, out->pixels);
done:
    for (int i = 0; i < 3; i++) mxl_image_free(&stage[i]);
    return st;
}

/* The image processor's settings: preprocessor_config.json, or processor_config.json's
 * "image_processor"; *j NULL when neither exists. Also the processor's image_token. */
static mxl_status read_processor(const mxl_checkpoint *ck, llava_vlm *g, json_t **j, mxl_error *err) {
    char path[4200];
    *j = NULL;
    json_t *proc = NULL;
    snprintf(path, sizeof path, "%s/processor_config.json", ck->dir);
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        mxl_status st = mxl_json_load_file_py(path, 1 << 20, &proc, err);
        if (st) return st;
        const json_t *t = json_object_get(proc, "image_token");
        if (json_is_string(t) && json_string_length(t) > 0 && json_string_length(t) < sizeof g->token)
            snprintf(g->token, sizeof g->token, "%s", json_string_value(t));
    }
    snprintf(path, sizeof path, "%s/preprocessor_config.json", ck->dir);
    f = fopen(path, "rb");
    if (f) {
        fclose(f);
        json_decref(proc);
        return mxl_json_load_file_py(path, 1 << 20, j, err);
    }
    json_t *ip = proc ? json_object_get(proc, "image_processor") : NULL;
    if (json_is_object(ip)) *j = json_incref(ip);
    json_decref(proc);
    return MXL_OK;
}

static mxl_status size_pair(const json_t *o, const char *what, const mxl_checkpoint *ck, int64_t *h, int64_t *w, mxl_error *err) {
    const json_t *jh = json_object_get(o, "height"), *jw = json_object_get(o, "width");
    if (!jh || !jw || mxl_json_int(jh, 1, 1 << 14, h) || mxl_json_int(jw, 1, 1 << 14, w))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's %s needs a positive height and width", ck->dir, what);
    return MXL_OK;
}

static mxl_status read_preproc(const mxl_checkpoint *ck, llava_vlm *g, mxl_error *err) {
    mxl_vlm_preproc *p = &g->base.pre;
    const int64_t S = g->image_size;
    /* the class defaults: CLIPImageProcessor / SiglipImageProcessor at the tower's size */
    static const float clip_mean[3] = {0.48145466f, 0.4578275f, 0.40821073f}, clip_std[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    double mean_d[3] = {0.48145466, 0.4578275, 0.40821073};
    *p = (mxl_vlm_preproc){S, S, 3, true, true, true, 1.0 / 255.0, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
    if (g->clip) {
        memcpy(p->mean, clip_mean, sizeof clip_mean);
        memcpy(p->std, clip_std, sizeof clip_std);
        g->shortest = true, g->short_edge = S, g->crop = true, g->ch = g->cw = S;
    } else {
        mean_d[0] = mean_d[1] = mean_d[2] = 0.5;
        g->rh = g->rw = S;
    }
    json_t *j = NULL;
    mxl_status st = read_processor(ck, g, &j, err);
    if (st || !j) goto pad;
    double d;
    const json_t *size = json_object_get(j, "size"), *b;
    if (json_is_object(size)) {
        const json_t *se = json_object_get(size, "shortest_edge");
        if (se && !json_is_null(se)) {
            if (json_object_get(size, "longest_edge") && !json_is_null(json_object_get(size, "longest_edge"))) {
                st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: the image processor's size.longest_edge is not supported", ck->dir);
                goto out;
            }
            if (mxl_json_int(se, 1, 1 << 14, &g->short_edge)) {
                st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's size.shortest_edge must be a positive integer", ck->dir);
                goto out;
            }
            g->shortest = true;
        } else {
            if ((st = size_pair(size, "size", ck, &g->rh, &g->rw, err))) goto out;
            g->shortest = false;
        }
    }
    const json_t *crop = json_object_get(j, "crop_size");
    if (json_is_object(crop) && (st = size_pair(crop, "crop_size", ck, &g->ch, &g->cw, err))) goto out;
    if ((b = json_object_get(j, "do_center_crop")) && json_is_boolean(b)) g->crop = json_is_true(b);
    if (g->crop && (g->ch <= 0 || g->cw <= 0)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: do_center_crop without a crop_size", ck->dir);
        goto out;
    }
    if ((b = json_object_get(j, "do_pad")) && json_is_boolean(b)) g->pad = json_is_true(b);
    int64_t rs = p->resample;
    if (json_object_get(j, "resample") && mxl_json_int(json_object_get(j, "resample"), 0, 5, &rs)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's resample must be a PIL filter number", ck->dir);
        goto out;
    }
    p->resample = (int)rs;
    if (mxl_json_number(json_object_get(j, "rescale_factor"), &d)) p->rescale = d;
    const json_t *mean = json_object_get(j, "image_mean"), *std = json_object_get(j, "image_std");
    for (int c = 0; c < 3; c++) {
        if (json_is_array(mean) && json_array_size(mean) == 3 && mxl_json_number(json_array_get(mean, (size_t)c), &d)) p->mean[c] = (float)d, mean_d[c] = d;
        if (json_is_array(std) && json_array_size(std) == 3 && mxl_json_number(json_array_get(std, (size_t)c), &d)) p->std[c] = (float)d;
    }
    if ((b = json_object_get(j, "do_resize")) && json_is_boolean(b)) p->do_resize = json_is_true(b);
    if ((b = json_object_get(j, "do_rescale")) && json_is_boolean(b)) p->do_rescale = json_is_true(b);
    if ((b = json_object_get(j, "do_normalize")) && json_is_boolean(b)) p->do_normalize = json_is_true(b);
    if (p->std[0] == 0 || p->std[1] == 0 || p->std[2] == 0 || !(p->rescale > 0) || p->resample == 4 || p->resample == 5)
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: non-zero image_std, a positive rescale_factor and a NEAREST / BILINEAR / BICUBIC / LANCZOS resample are expected", ck->dir);
out:
    json_decref(j);
pad:
    /* (pad_to_square's background: tuple(int(x * 255) for x in image_mean)) */
    for (int c = 0; c < 3; c++) {
        const double v = mean_d[c] * 255.0;
        g->pad_rgb[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : (int)v);
    }
    p->width = p->height = S;
    return st;
}

/* vision_feature_layer: one index or a list, negatives from the end of hidden_states (whose
 * length is n_layers + 1). */
static mxl_status read_layers(const mxl_checkpoint *ck, llava_vlm *g, mxl_error *err) {
    const json_t *fl = json_object_get(ck->config.raw, "vision_feature_layer");
    const int64_t L = g->stack->n_layers;
    json_t *one = NULL;
    if (!fl || json_is_null(fl)) fl = one = json_integer(-2);
    const size_t n = json_is_array(fl) ? json_array_size(fl) : 1;
    mxl_status st = MXL_OK;
    if (n < 1 || n > MAX_SEL) st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_feature_layer must name 1 to %d layers", ck->dir, MAX_SEL);
    for (size_t k = 0; !st && k < n; k++) {
        int64_t i;
        if (mxl_json_int(json_is_array(fl) ? json_array_get(fl, k) : fl, -(L + 1), L, &i)) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_feature_layer must be layer indices in [%lld, %lld]", ck->dir,
                               (long long)-(L + 1), (long long)L);
            break;
        }
        g->layers[k] = i < 0 ? L + 1 + i : i;
    }
    g->n_sel = (int)n;
    json_decref(one);
    return st;
}

mxl_status mxl_vlm_llava_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    const json_t *pvt = json_object_get(json_object_get(ck->config.raw, "vision_config"), "model_type");
    if (json_is_string(pvt) && strcmp(json_string_value(pvt), "pixtral") == 0) return mxl_vlm_llava_pixtral_load(ck, out, err); /* (vlm_pixtral.c) */
    llava_vlm *g = mxl_calloc(1, sizeof *g);
    if (!g) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_arena_init(&g->arena, 4096);
    g->be = mxl_backend_host();
    snprintf(g->token, sizeof g->token, "<image>");
    mxl_vlm *v = &g->base;
    v->family = "llava";
    v->encode = llava_encode;
    v->prepare = llava_prepare;
    v->destroy = llava_destroy;
    v->causal_images = true;
    v->before = v->after = "";
    json_t *raw = ck->config.raw, *vc = json_object_get(raw, "vision_config");
    const json_t *vmt = json_object_get(vc, "model_type");
    const char *tower = json_is_string(vmt) ? json_string_value(vmt) : "clip_vision_model"; /* (LlavaConfig's default) */
    mxl_status st;
    g->clip = strcmp(tower, "clip_vision_model") == 0;
    if (g->clip) {
        st = mxl_clip_vision_load(ck, vc, &g->ctower, err);
        g->stack = &g->ctower.stack, g->n_pos = g->ctower.n_pos, g->image_size = g->ctower.image_size;
    } else if (strcmp(tower, "siglip_vision_model") == 0) {
        st = mxl_siglip_vision_load(ck, vc, &g->stower, err);
        g->stack = &g->stower.stack, g->n_pos = g->stower.n_patches, g->image_size = g->stower.image_size;
    } else {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: llava with a '%s' vision tower is not supported (clip_vision_model, siglip_vision_model and pixtral are)",
                           ck->path, tower);
    }
    if (st) goto fail;
    if ((st = read_layers(ck, g, err))) goto fail;
    const json_t *strat = json_object_get(raw, "vision_feature_select_strategy");
    const char *sn = json_is_string(strat) ? json_string_value(strat) : "default";
    if (strcmp(sn, "default") == 0) g->skip = 1;
    else if (strcmp(sn, "full") == 0) g->skip = 0;
    else {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/config.json: vision_feature_select_strategy '%s' is not supported (default, full are)", ck->dir, sn);
        goto fail;
    }
    if (g->n_pos - g->skip < 1) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the vision tower leaves no image rows", ck->path);
        goto fail;
    }
    int64_t img = 32000; /* (LlavaConfig's default) */
    const json_t *it = json_object_get(raw, "image_token_index");
    if (!it) it = json_object_get(raw, "image_token_id");
    if (it && !json_is_null(it) && mxl_json_int(it, 0, INT32_MAX, &img)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: image_token_index must be a token id", ck->dir);
        goto fail;
    }
    v->image_token = (int32_t)img;
    v->tokens_per_image = g->n_pos - g->skip;
    v->text_hidden = ck->config.hidden_size;
    const json_t *pa = json_object_get(raw, "projector_hidden_act");
    char what[4200];
    snprintf(what, sizeof what, "%s/config.json: projector_hidden_act", ck->dir);
    if (mxl_enc_activation(json_is_string(pa) ? json_string_value(pa) : "gelu", what, &g->act, err)) {
        st = err ? err->status : MXL_ERR_UNSUPPORTED;
        goto fail;
    }
    const json_t *pb = json_object_get(raw, "multimodal_projector_bias");
    const bool bias = !pb || json_is_null(pb) || json_is_true(pb);
    static const char *const k_prefixes[] = {"multi_modal_projector.", "model.multi_modal_projector.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "linear_1.weight");
    if (!prefix) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'multi_modal_projector.linear_1.weight' is missing", ck->path);
        goto fail;
    }
    const int64_t Hv = g->stack->hidden, Ht = v->text_hidden, In = g->n_sel * Hv;
    mxl_enc_binder b = {ck, &g->arena, prefix, err};
    if (mxl_enc_matrix(&b, Ht, In, &g->w1, "linear_1.weight") || mxl_enc_matrix(&b, Ht, Ht, &g->w2, "linear_2.weight") ||
        (bias && (mxl_enc_vector(&b, Ht, &g->b1, "linear_1.bias") || mxl_enc_vector(&b, Ht, &g->b2, "linear_2.bias")))) {
        st = err ? err->status : MXL_ERR_FORMAT;
        goto fail;
    }
    if ((st = g->be->ops->weight_prepare(g->be, &g->w1, MXL_WEIGHT_USE_GEMM, &g->arena, err)) ||
        (st = g->be->ops->weight_prepare(g->be, &g->w2, MXL_WEIGHT_USE_GEMM, &g->arena, err)))
        goto fail;
    if ((st = read_preproc(ck, g, err))) goto fail;
    const int64_t fin_w = g->crop ? g->cw : g->shortest ? -1 : g->rw, fin_h = g->crop ? g->ch : g->shortest ? -1 : g->rh;
    if (fin_w != g->image_size || fin_h != g->image_size) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's output (%s %lldx%lld) is not the vision tower's %lldx%lld image", ck->dir,
                           g->crop ? "crop_size" : "size", (long long)(g->crop ? g->cw : g->rw), (long long)(g->crop ? g->ch : g->rh),
                           (long long)g->image_size, (long long)g->image_size);
        goto fail;
    }
    v->marker = v->image_text = g->token;
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    llava_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}
