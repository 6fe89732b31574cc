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
 * processor_config.json's "image_processor" (transformers 5), the class defaults else.
 *
 * LLaVA-NeXT (modeling_llava_next.py, LlavaNextForConditionalGeneration: llava-v1.6 over Mistral,
 * Vicuna, Yi-34B) is the same tower, selection and projector run over several crops of one image
 * ("anyres"). Its image processor (LlavaNextImageProcessor, the PIL backend) picks the
 * resolution of image_grid_pinpoints [(h, w), ...] that keeps the most of the image and wastes
 * the least (select_best_resolution), resizes the image into it keeping the aspect ratio (the
 * long side fills it, the other ceil-scaled), pads it centred with zeros, and cuts it into
 * (h / S) x (w / S) crops of the tower's size S, row by row, after the base crop (the whole
 * image resized to S x S); each crop then goes through the CLIP processor's steps above
 * (do_pad there means padding the batch, not the square pad). The model (pack_image_features)
 * projects each crop's rows, lays the crops' patch grids out as one [ph*side, pw*side] grid,
 * un-pads it back to the image's aspect ratio (unpad_image: the centred rows or columns the pad
 * added, by int(round(len * scale, 7))), appends image_newline after each grid row and puts the
 * base crop's rows first: T + rows * (cols + 1) placeholder tokens, the count LlavaNextProcessor
 * writes (its _get_number_of_features). grid[0..1] of an input: the image's height and width
 * (image_sizes), from which the layout is recomputed. */
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
#define MAX_PIN 64

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
    /* LLaVA-NeXT */
    bool next;
    int n_pin;
    int64_t pin[MAX_PIN][2];      /* image_grid_pinpoints: (height, width), multiples of image_size */
    const float *newline;         /* image_newline [Ht] */
    int64_t side;                 /* the tower's patches per side (side * side = its rows per crop) */
    int64_t base_h, base_w;       /* the base crop's resize (the processor's size) */
} llava_vlm;

static void llava_destroy(mxl_vlm *v) {
    llava_vlm *g = (llava_vlm *)v;
    if (g->clip) mxl_clip_vision_free(&g->ctower);
    else mxl_siglip_vision_free(&g->stower);
    mxl_arena_free(&g->arena);
    mxl_free(g);
}

static void *aligned(size_t bytes) { return mxl_aligned_alloc(64, (bytes + 63) / 64 * 64); }

/* out [T, Ht]: one crop's pixels [3, S, S] through the tower, the layer selection and the projector. */
static mxl_status tower_rows(const llava_vlm *g, const float *pixels, mxl_threadpool *pool, float *out, mxl_error *err) {
    const int64_t Hv = g->stack->hidden, n = g->n_pos, T = n - g->skip, Ht = g->base.text_hidden;
    const int nt = pool ? mxl_threadpool_size(pool) : 1;
    size_t mm = mxl_enc_linear_scratch_bytes(g->be, &g->w1, T, nt), mm2 = mxl_enc_linear_scratch_bytes(g->be, &g->w2, T, nt);
    if (mm2 > mm) mm = mm2;
    float *x = aligned((size_t)(n * Hv) * sizeof(float));
    float *sel = aligned((size_t)(T * g->n_sel * Hv) * sizeof(float));
    float *h = aligned((size_t)(T * Ht) * sizeof(float));
    void *scratch = mm ? aligned(mm) : NULL;
    mxl_status st;
    if (!x || !sel || !h || (mm && !scratch)) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    else if (g->clip) st = mxl_clip_vision_embed(&g->ctower, pixels, pool, x, err);
    else st = mxl_siglip_vision_embed(&g->stower, pixels, pool, x, err);
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

static mxl_status llava_encode(const mxl_vlm *v, const mxl_vlm_input *in, mxl_threadpool *pool, float *out, mxl_error *err) {
    const llava_vlm *g = (const llava_vlm *)v;
    const int64_t T = g->n_pos - g->skip;
    if (in->n_tokens != T || in->n_pixels != (size_t)(3 * g->image_size * g->image_size))
        return mxl_error_set(err, MXL_ERR_ARG, "llava: an image of %zu pixel values for %lld tokens (this tower takes %lld and gives %lld)",
                             in->n_pixels, (long long)in->n_tokens, (long long)(3 * g->image_size * g->image_size), (long long)T);
    return tower_rows(g, in->pixels, pool, out, err);
}

/* select_best_resolution: the pinpoint (h, w) that keeps the most of an oh x ow image (its
 * aspect-kept downscale, at most the image's own area) and, on a tie, wastes the least. */
static void best_resolution(const llava_vlm *g, int64_t oh, int64_t ow, int64_t *bh, int64_t *bw) {
    int64_t best_eff = 0, best_waste = INT64_MAX;
    *bh = g->pin[0][0], *bw = g->pin[0][1];
    for (int k = 0; k < g->n_pin; k++) {
        const int64_t h = g->pin[k][0], w = g->pin[k][1];
        const double sw = (double)w / (double)ow, sh = (double)h / (double)oh, sc = sw < sh ? sw : sh;
        const int64_t dw = (int64_t)((double)ow * sc), dh = (int64_t)((double)oh * sc);
        int64_t eff = dw * dh;
        if (eff > ow * oh) eff = ow * oh;
        const int64_t waste = w * h - eff;
        if (eff > best_eff || (eff == best_eff && waste < best_waste)) best_eff = eff, best_waste = waste, *bh = h, *bw = w;
    }
}

/* Python's int(round(x, 7)) for x >= 0: x's integer part unless x lies within 5e-8 below the next integer. */
static int64_t int_round7(double x) {
    const double r = nearbyint(x);
    return (int64_t)(fabs(x - r) < 5e-8 ? r : x);
}

/* An oh x ow image's LLaVA-NeXT layout: ph x pw crops after the base one, and the rows
 * [r0, r1) and columns [c0, c1) of the crops' [ph*side, pw*side] feature grid that unpad_image
 * keeps. Returns the image's token count. */
static int64_t next_layout(const llava_vlm *g, int64_t oh, int64_t ow, int64_t *ph, int64_t *pw, int64_t *r0, int64_t *r1, int64_t *c0,
                           int64_t *c1) {
    int64_t bh, bw;
    best_resolution(g, oh, ow, &bh, &bw);
    *ph = bh / g->image_size, *pw = bw / g->image_size;
    const int64_t ch = *ph * g->side, cw = *pw * g->side;
    *r0 = 0, *r1 = ch, *c0 = 0, *c1 = cw;
    if ((double)ow / (double)oh > (double)cw / (double)ch) {
        const int64_t nh = int_round7((double)oh * ((double)cw / (double)ow)), pad = (ch - nh) / 2;
        *r0 = pad, *r1 = ch - pad;
    } else {
        const int64_t nw = int_round7((double)ow * ((double)ch / (double)oh)), pad = (cw - nw) / 2;
        *c0 = pad, *c1 = cw - pad;
    }
    return g->side * g->side + (*r1 - *r0) * (*c1 - *c0 + 1);
}

static mxl_status next_encode(const mxl_vlm *v, const mxl_vlm_input *in, mxl_threadpool *pool, float *out, mxl_error *err) {
    const llava_vlm *g = (const llava_vlm *)v;
    const int64_t S = g->image_size, T = g->side * g->side, Ht = v->text_hidden, oh = in->grid[0], ow = in->grid[1];
    if (oh < 1 || ow < 1 || oh > (1 << 15) || ow > (1 << 15))
        return mxl_error_set(err, MXL_ERR_ARG, "llava_next: an image input without its size (grid[0..1]: %lld x %lld)", (long long)oh, (long long)ow);
    int64_t ph, pw, r0, r1, c0, c1;
    const int64_t n_tok = next_layout(g, oh, ow, &ph, &pw, &r0, &r1, &c0, &c1), nc = 1 + ph * pw;
    if (in->n_tokens != n_tok || in->n_pixels != (size_t)(nc * 3 * S * S))
        return mxl_error_set(err, MXL_ERR_ARG, "llava_next: a %lldx%lld image of %zu pixel values for %lld tokens (it takes %lld crops and gives %lld)",
                             (long long)ow, (long long)oh, in->n_pixels, (long long)in->n_tokens, (long long)nc, (long long)n_tok);
    float *crops = aligned((size_t)(nc * T * Ht) * sizeof(float));
    if (!crops) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_status st = MXL_OK;
    for (int64_t c = 0; c < nc && !st; c++) st = tower_rows(g, in->pixels + c * 3 * S * S, pool, crops + c * T * Ht, err);
    if (!st) {
        memcpy(out, crops, (size_t)(T * Ht) * sizeof(float));
        float *o = out + T * Ht;
        for (int64_t r = r0; r < r1; r++) {
            for (int64_t c = c0; c < c1; c++, o += Ht) {
                const int64_t crop = 1 + (r / g->side) * pw + c / g->side, row = (r % g->side) * g->side + c % g->side;
                memcpy(o, crops + (crop * T + row) * Ht, (size_t)Ht * sizeof(float));
            }
            memcpy(o, g->newline, (size_t)Ht * sizeof(float));
            o += Ht;
        }
    }
    mxl_aligned_free(crops);
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

/* px [3, S, S] = im through the processor's per-image steps: the square pad (LlavaImageProcessor's
 * do_pad), the resize, the center crop, rescale and normalise. */
static mxl_status process_crop(const llava_vlm *g, const mxl_image *im, float *px, mxl_error *err) {
    const mxl_vlm_preproc *p = &g->base.pre;
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
    double rs;
    const float *mean, *std;
    mxl_vlm_norm_params(p, &rs, &mean, &std);
    mxl_image_to_pixels(cur, rs, mean, std, px);
done:
    for (int i = 0; i < 3; i++) mxl_image_free(&stage[i]);
    return st;
}

/* out's pixels (n_crops crops) and its text: n_tokens copies of the image token. */
static mxl_status input_alloc(const llava_vlm *g, int64_t n_crops, int64_t n_tokens, mxl_vlm_input *out, mxl_error *err) {
    out->n_pixels = (size_t)(n_crops * 3 * g->image_size * g->image_size);
    out->pixels = mxl_malloc(out->n_pixels * sizeof(float));
    out->n_tokens = n_tokens;
    mxl_strbuf sb = {0};
    bool ok = out->pixels != NULL;
    for (int64_t t = 0; t < n_tokens && ok; t++) ok = mxl_strbuf_puts(&sb, g->token);
    if (!ok) {
        mxl_strbuf_free(&sb);
        mxl_vlm_input_free(out);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    out->text = sb.p;
    out->text_len = sb.n;
    return MXL_OK;
}

static mxl_status llava_prepare(const mxl_vlm *v, const mxl_image *im, mxl_vlm_input *out, mxl_error *err) {
    const llava_vlm *g = (const llava_vlm *)v;
    mxl_status st = input_alloc(g, 1, v->tokens_per_image, out, err);
    if (!st && (st = process_crop(g, im, out->pixels, err))) mxl_vlm_input_free(out);
    return st;
}

/* LlavaNextImageProcessor's anyres crops (the header): the base crop, then the padded
 * best-resolution image's crops row by row. */
static mxl_status next_prepare(const mxl_vlm *v, const mxl_image *im, mxl_vlm_input *out, mxl_error *err) {
    const llava_vlm *g = (const llava_vlm *)v;
    const int64_t S = g->image_size, oh = im->h, ow = im->w;
    int64_t ph, pw, r0, r1, c0, c1;
    const int64_t n_tok = next_layout(g, oh, ow, &ph, &pw, &r0, &r1, &c0, &c1), th = ph * S, tw = pw * S;
    /* get_patch_output_size: the side with the smaller scale fills the target, the other is ceil-scaled */
    const double sw = (double)tw / (double)ow, sh = (double)th / (double)oh;
    int64_t nw, nh;
    if (sw < sh) {
        nw = tw;
        nh = (int64_t)ceil((double)oh * sw);
        if (nh > th) nh = th;
    } else {
        nh = th;
        nw = (int64_t)ceil((double)ow * sh);
        if (nw > tw) nw = tw;
    }
    mxl_status st = input_alloc(g, 1 + ph * pw, n_tok, out, err);
    if (st) return st;
    out->grid[0] = oh, out->grid[1] = ow, out->grid[2] = ph, out->grid[3] = pw;
    mxl_image sized = {0, 0, NULL}, padded = {0, 0, NULL}, crop = {0, 0, NULL}, base = {0, 0, NULL};
    if ((st = mxl_image_resize(im, (int32_t)g->base_w, (int32_t)g->base_h, (mxl_resample)v->pre.resample, &base, err)) ||
        (st = process_crop(g, &base, out->pixels, err)))
        goto done;
    if (nw != ow || nh != oh) {
        if ((st = mxl_image_resize(im, (int32_t)nw, (int32_t)nh, (mxl_resample)v->pre.resample, &sized, err))) goto done;
    }
    const mxl_image *src = sized.rgb ? &sized : im;
    padded.rgb = mxl_calloc((size_t)(tw * th * 3), 1);
    crop.rgb = mxl_malloc((size_t)(S * S * 3));
    if (!padded.rgb || !crop.rgb) {
        st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        goto done;
    }
    padded.w = (int32_t)tw, padded.h = (int32_t)th, crop.w = crop.h = (int32_t)S;
    const int64_t py = (th - nh) / 2, px = (tw - nw) / 2;
    for (int64_t y = 0; y < nh; y++) memcpy(padded.rgb + ((py + y) * tw + px) * 3, src->rgb + y * nw * 3, (size_t)nw * 3);
    for (int64_t i = 0; i < ph && !st; i++)
        for (int64_t j = 0; j < pw && !st; j++) {
            for (int64_t y = 0; y < S; y++) memcpy(crop.rgb + y * S * 3, padded.rgb + ((i * S + y) * tw + j * S) * 3, (size_t)S * 3);
            st = process_crop(g, &crop, out->pixels + (1 + i * pw + j) * 3 * S * S, err);
        }
done:
    mxl_image_free(&sized);
    mxl_image_free(&padded);
    mxl_image_free(&crop);
    mxl_image_free(&base);
    if (st) mxl_vlm_input_free(out);
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

/* image_grid_pinpoints [[h, w], ...] into pin (n_pin of them), each a positive multiple of S. */
static mxl_status read_pinpoints(const json_t *a, const char *what, int64_t S, int64_t pin[][2], int *n_pin, mxl_error *err) {
    const size_t n = json_array_size(a);
    if (!json_is_array(a) || n < 1 || n > MAX_PIN)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: image_grid_pinpoints must be a list of 1 to %d [height, width] pairs", what, MAX_PIN);
    for (size_t k = 0; k < n; k++) {
        const json_t *e = json_array_get(a, k);
        if (!json_is_array(e) || json_array_size(e) != 2 || mxl_json_int(json_array_get(e, 0), 1, 1 << 14, &pin[k][0]) ||
            mxl_json_int(json_array_get(e, 1), 1, 1 << 14, &pin[k][1]) || pin[k][0] % S || pin[k][1] % S)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: image_grid_pinpoints[%zu] must be [height, width], multiples of the vision tower's %lld", what,
                                 k, (long long)S);
    }
    *n_pin = (int)n;
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
    mxl_vlm_preproc_json(j, p, mean_d);
    const json_t *jp = json_object_get(j, "image_grid_pinpoints");
    if (g->next && jp && !json_is_null(jp)) {
        /* the processor's crops must be the layout the model un-packs */
        int64_t pp[MAX_PIN][2];
        int np = 0;
        char what[4200];
        snprintf(what, sizeof what, "%s: the image processor", ck->dir);
        if ((st = read_pinpoints(jp, what, S, pp, &np, err))) goto out;
        if (np != g->n_pin || memcmp(pp, g->pin, sizeof pp[0] * (size_t)np)) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's image_grid_pinpoints differ from config.json's", ck->dir);
            goto out;
        }
    }
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

static mxl_status llava_load(const mxl_checkpoint *ck, bool next, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    const json_t *pvt = json_object_get(json_object_get(ck->config.raw, "vision_config"), "model_type");
    if (json_is_string(pvt) && strcmp(json_string_value(pvt), "pixtral") == 0) return mxl_vlm_llava_pixtral_load(ck, out, err); /* (vlm_pixtral.c) */
    llava_vlm *g = mxl_calloc(1, sizeof *g);
    if (!g) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_arena_init(&g->arena, 4096);
    g->be = mxl_backend_host();
    snprintf(g->token, sizeof g->token, "<image>");
    mxl_vlm *v = &g->base;
    g->next = next;
    v->family = next ? "llava_next" : "llava";
    v->encode = next ? next_encode : llava_encode;
    v->prepare = next ? next_prepare : llava_prepare;
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
    if ((st = mxl_vlm_image_token(ck, 32000, &v->image_token, err))) goto fail;
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
    if (next) {
        const json_t *jp = json_object_get(raw, "image_grid_pinpoints");
        json_t *dflt = NULL;
        if (!jp || json_is_null(jp)) /* (LlavaNextConfig's default) */
            jp = dflt = json_pack("[[i,i],[i,i],[i,i],[i,i],[i,i]]", 336, 672, 672, 336, 672, 672, 1008, 336, 336, 1008);
        char what2[4200];
        snprintf(what2, sizeof what2, "%s/config.json", ck->dir);
        st = read_pinpoints(jp, what2, g->image_size, g->pin, &g->n_pin, err);
        json_decref(dflt);
        if (st) goto fail;
        const int64_t patch = g->clip ? g->ctower.patch : g->stower.patch;
        g->side = g->image_size / patch;
        if (g->n_pos - g->skip != g->side * g->side) {
            st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/config.json: llava_next needs the %lld x %lld patch rows per crop; select strategy '%s' leaves %lld",
                               ck->dir, (long long)g->side, (long long)g->side, sn, (long long)(g->n_pos - g->skip));
            goto fail;
        }
        mxl_enc_binder nb = {ck, &g->arena, strncmp(prefix, "model.", 6) == 0 ? "model." : "", err};
        if (mxl_enc_vector(&nb, Ht, &g->newline, "image_newline")) {
            st = err ? err->status : MXL_ERR_FORMAT;
            goto fail;
        }
    }
    if ((st = read_preproc(ck, g, err))) goto fail;
    if (next) {
        g->pad = false; /* (LlavaNextImageProcessor's do_pad pads the batch of crops, not the image) */
        g->base_h = g->shortest ? g->short_edge : g->rh, g->base_w = g->shortest ? g->short_edge : g->rw;
    }
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

mxl_status mxl_vlm_llava_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) { return llava_load(ck, false, out, err); }

mxl_status mxl_vlm_llava_next_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) { return llava_load(ck, true, out, err); }
