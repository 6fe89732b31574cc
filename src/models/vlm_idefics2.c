/* vlm_idefics2.c - Idefics2's vision side (transformers modeling_idefics2.py /
 * processing_idefics2.py / image_processing_pil_idefics2.py, Idefics2ForConditionalGeneration:
 * idefics2-8b over Mistral, family_llava.c's idefics2 record):
 *   tower   the Idefics2 vision transformer (SigLIP's layers, encoder_siglip.h) over an image of
 *           its own size H x W: h = H / P by w = W / P patches (the remainder dropped, as the
 *           patch Conv2d does), patch (i, j) at position id bucket(i / h) * S + bucket(j / w) of
 *           the S x S table (S = image_size / P; bucket: the count of the boundaries k / S,
 *           0 < k < S, at or below the coordinate, float32 as torch.bucketize sees them), every
 *           patch seeing every patch, post_layernorm                   [h*w, Hv]
 *   proj    modality_projection: down(act(gate x) * up x), text_config's intermediate_size and
 *           hidden_act, no biases                                      [h*w, Ht]
 *   resampler the perceiver: L learned latents; per layer (resampler_depth) the latents' and the
 *           context's RMSNorms, attention of the latents over [context; latents] (resampler_n_heads
 *           heads of resampler_head_dim, num_key_value_heads of them for keys / values, no mask, no
 *           positions), a residual, RMSNorm and an MLP of 4 Ht, a residual; then an RMSNorm
 *                                                                      [L, Ht]
 * The processor: with do_image_splitting the image's four quarters (its halves by integer
 * division) and then the whole image are the tiles; each tile resized to keep its longest edge
 * within size.longest_edge and each side at least size.shortest_edge (BILINEAR as released),
 * rescaled, normalised (mean = std = 0.5). Each tile takes L <image> tokens after a
 * <fake_token_around_image>, the last closed by one more; then, over the whole prompt, two
 * adjacent boundary tokens become one and a closing one followed by text gets a space (the
 * processor's replacements). The tiles differ in size: an input's pixels begin with each tile's
 * height and width (2 floats per tile), then the tiles [3, h, w] one after the other; grid[0] is
 * the tile count. */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "image/resize.h"
#include "io/json_read.h"
#include "models/encoder_common.h"
#include "models/encoder_siglip.h"
#include "models/vision_siglip.h"
#include "models/vlm.h"
#include "models/weights.h"

typedef struct perceiver_layer {
    const float *lat_norm, *ctx_norm, *post_norm; /* [Ht] */
    mxl_weight wq, wk, wv, wo;                     /* [nh*hd, Ht], [nkv*hd, Ht] x 2, [Ht, nh*hd] */
    mxl_weight gate, up, down;                     /* [4 Ht, Ht] x 2, [Ht, 4 Ht] */
} perceiver_layer;

typedef struct idefics2_vlm {
    mxl_vlm base;
    mxl_arena arena;
    const mxl_backend *be;
    /* the tower */
    int64_t P, S;                  /* patch size, position grid side */
    mxl_siglip_stack stack;
    mxl_weight patch_w;            /* [Hv, 3*P*P] */
    const float *patch_b, *pos, *post_w, *post_b;
    /* the connector */
    int64_t I;                     /* modality projection width */
    mxl_weight pg, pu, pd;         /* [I, Hv] x 2, [Ht, I] */
    mxl_act act;                   /* text_config's hidden_act (projection and resampler MLPs) */
    int64_t L, depth, nh, nkv, hd; /* latents, layers, heads, key/value heads, head width */
    float rms_eps;
    const float *latents, *final_norm; /* [L, Ht], [Ht] */
    perceiver_layer *layers;
    /* the processor */
    bool split;
    int64_t shortest, longest;
    char fake_tok[64], image_tok[64];
} idefics2_vlm;

static void idefics2_destroy(mxl_vlm *v) {
    idefics2_vlm *g = (idefics2_vlm *)v;
    mxl_arena_free(&g->arena);
    mxl_free(g);
}

static void *aligned(size_t bytes) { return mxl_aligned_alloc(64, (bytes + 63) / 64 * 64); }

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* torch.bucketize(arange(0, 1 - 1e-6, 1 / n), arange(1 / S, 1, 1 / S), right=True)[i]: both
 * aranges float32 values made in double (ATen's CPU arange), compared as float32. */
static int64_t bucket(int64_t i, int64_t n, int64_t S) {
    const float v = (float)((double)i * (1.0 / (double)n));
    const double step = 1.0 / (double)S;
    const int64_t nb = (int64_t)ceil((1.0 - step) / step);
    int64_t k = 0;
    while (k < nb && (float)(step + (double)k * step) <= v) k++;
    return k;
}

static void rms_rows(const mxl_backend *be, const float *x, const float *w, int64_t n, int64_t D, float eps, float *y) {
    for (int64_t r = 0; r < n; r++) be->ops->rmsnorm(be, x + r * D, w, D, eps, 0, y + r * D);
}

/* y [n, out] = down(act(gate x) * up x) (scratch f, u [n, width]). */
static void swiglu(const idefics2_vlm *g, const mxl_weight *gate, const mxl_weight *up, const mxl_weight *down, const float *x, int64_t n,
                   float *f, float *u, float *y, void *mm, mxl_threadpool *pool) {
    mxl_enc_linear_act(g->be, gate, NULL, (int)g->act, x, n, f, mm, pool);
    mxl_enc_linear_act(g->be, up, NULL, MXL_GEMM_ACT_NONE, x, n, u, mm, pool);
    for (int64_t i = 0; i < n * gate->rows; i++) f[i] *= u[i];
    mxl_enc_linear_act(g->be, down, NULL, MXL_GEMM_ACT_NONE, f, n, y, mm, pool);
}

/* out [L, Ht] for one tile [3, H, W]. */
static mxl_status tile_rows(const idefics2_vlm *g, const float *px, int64_t H, int64_t W, mxl_threadpool *pool, float *out, mxl_error *err) {
    const int64_t P = g->P, h = H / P, w = W / P, n = h * w, K = 3 * P * P, Hv = g->stack.hidden, Ht = g->base.text_hidden;
    const int64_t L = g->L, nq = g->nh * g->hd, nk = g->nkv * g->hd, F = 4 * Ht, FW = g->I > F ? g->I : F, NK = n + L;
    if (h < 1 || w < 1) return mxl_error_set(err, MXL_ERR_ARG, "idefics2: a %lldx%lld tile has no whole %lld-pixel patch", (long long)W, (long long)H, (long long)P);
    const int nt = pool ? mxl_threadpool_size(pool) : 1;
    size_t mm = max_sz(mxl_enc_linear_scratch_bytes(g->be, &g->patch_w, n, nt), mxl_enc_linear_scratch_bytes(g->be, &g->pg, n, nt));
    mm = max_sz(mm, max_sz(mxl_enc_linear_scratch_bytes(g->be, &g->pd, n, nt), mxl_enc_linear_scratch_bytes(g->be, &g->layers[0].wk, NK, nt)));
    mm = max_sz(mm, max_sz(mxl_enc_linear_scratch_bytes(g->be, &g->layers[0].gate, L, nt), mxl_enc_linear_scratch_bytes(g->be, &g->layers[0].down, L, nt)));
    /* patches [n, K]; x [n, Hv]; ctx [n, Ht]; cn [n + L, Ht] (normed context, then latents);
     * lat, ln, o [L, Ht]; q [L, nq]; k, v [n + L, nk]; a [L, nq]; f, u [max(n, L), FW]; sc [n + L] */
    const size_t fl = (size_t)(n * K + n * Hv + n * Ht + NK * Ht + 3 * L * Ht + 2 * L * nq + 2 * NK * nk + 2 * (n > L ? n : L) * FW + NK) + 64;
    float *buf = aligned(fl * sizeof(float));
    void *scratch = mm ? aligned(mm) : NULL;
    if (!buf || (mm && !scratch)) {
        mxl_aligned_free(buf), mxl_aligned_free(scratch);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    float *patches = buf, *x = patches + n * K, *ctx = x + n * Hv, *cn = ctx + n * Ht, *lat = cn + NK * Ht, *ln = lat + L * Ht, *o = ln + L * Ht;
    float *q = o + L * Ht, *a = q + L * nq, *k = a + L * nq, *v = k + NK * nk, *f = v + NK * nk, *u = f + (n > L ? n : L) * FW;
    float *sc = u + (n > L ? n : L) * FW;
    /* the embeddings: patch (i, j) of the h x w grid, flattened (c, ky, kx), plus its bucketed position */
    for (int64_t i = 0; i < h; i++)
        for (int64_t j = 0; j < w; j++)
            for (int64_t c = 0; c < 3; c++)
                for (int64_t ky = 0; ky < P; ky++)
                    memcpy(patches + (i * w + j) * K + (c * P + ky) * P, px + (c * H + i * P + ky) * W + j * P, (size_t)P * sizeof(float));
    mxl_enc_linear_act(g->be, &g->patch_w, g->patch_b, MXL_GEMM_ACT_NONE, patches, n, x, scratch, pool);
    for (int64_t i = 0; i < h; i++) {
        const int64_t bi = bucket(i, h, g->S);
        for (int64_t j = 0; j < w; j++) {
            const float *pe = g->pos + (bi * g->S + bucket(j, w, g->S)) * Hv;
            for (int64_t c = 0; c < Hv; c++) x[(i * w + j) * Hv + c] += pe[c];
        }
    }
    static const int32_t no_ids[1] = {0};
    int64_t starts[2] = {0, n};
    mxl_encoder_batch bt = {no_ids, NULL, starts, 1};
    mxl_status st = mxl_siglip_stack_run(&g->stack, &bt, n, pool, x, err);
    if (st) goto done;
    mxl_enc_add_layernorm(g->be, pool, x, NULL, g->post_w, g->post_b, n, Hv, g->stack.eps, x);
    swiglu(g, &g->pg, &g->pu, &g->pd, x, n, f, u, ctx, scratch, pool);
    /* the perceiver */
    memcpy(lat, g->latents, (size_t)(L * Ht) * sizeof(float));
    const int64_t grp = g->nh / g->nkv;
    const float scale = 1.0f / sqrtf((float)g->hd);
    for (int64_t l = 0; l < g->depth; l++) {
        const perceiver_layer *Ly = &g->layers[l];
        rms_rows(g->be, lat, Ly->lat_norm, L, Ht, g->rms_eps, ln);
        rms_rows(g->be, ctx, Ly->ctx_norm, n, Ht, g->rms_eps, cn);
        memcpy(cn + n * Ht, ln, (size_t)(L * Ht) * sizeof(float));
        mxl_enc_linear_act(g->be, &Ly->wq, NULL, MXL_GEMM_ACT_NONE, ln, L, q, scratch, pool);
        mxl_enc_linear_act(g->be, &Ly->wk, NULL, MXL_GEMM_ACT_NONE, cn, NK, k, scratch, pool);
        mxl_enc_linear_act(g->be, &Ly->wv, NULL, MXL_GEMM_ACT_NONE, cn, NK, v, scratch, pool);
        for (int64_t hh = 0; hh < g->nh; hh++) {
            const int64_t kh = hh / grp;
            for (int64_t t = 0; t < L; t++) {
                const float *qv = q + t * nq + hh * g->hd;
                float mx = -INFINITY, sum = 0.0f;
                for (int64_t s = 0; s < NK; s++) {
                    const float *kv = k + s * nk + kh * g->hd;
                    float d = 0.0f;
                    for (int64_t e = 0; e < g->hd; e++) d += qv[e] * kv[e];
                    sc[s] = d * scale;
                    if (sc[s] > mx) mx = sc[s];
                }
                for (int64_t s = 0; s < NK; s++) sum += (sc[s] = expf(sc[s] - mx));
                float *av = a + t * nq + hh * g->hd;
                for (int64_t e = 0; e < g->hd; e++) av[e] = 0.0f;
                for (int64_t s = 0; s < NK; s++) {
                    const float p = sc[s] / sum, *vv = v + s * nk + kh * g->hd;
                    for (int64_t e = 0; e < g->hd; e++) av[e] += p * vv[e];
                }
            }
        }
        mxl_enc_linear_act(g->be, &Ly->wo, NULL, MXL_GEMM_ACT_NONE, a, L, o, scratch, pool);
        for (int64_t i = 0; i < L * Ht; i++) lat[i] += o[i];
        rms_rows(g->be, lat, Ly->post_norm, L, Ht, g->rms_eps, ln);
        swiglu(g, &Ly->gate, &Ly->up, &Ly->down, ln, L, f, u, o, scratch, pool);
        for (int64_t i = 0; i < L * Ht; i++) lat[i] += o[i];
    }
    rms_rows(g->be, lat, g->final_norm, L, Ht, g->rms_eps, out);
done:
    mxl_aligned_free(buf);
    mxl_aligned_free(scratch);
    return st;
}

static mxl_status idefics2_encode(const mxl_vlm *v, const mxl_vlm_input *in, mxl_threadpool *pool, float *out, mxl_error *err) {
    const idefics2_vlm *g = (const idefics2_vlm *)v;
    const int64_t nt = in->grid[0];
    size_t at = (size_t)(2 * nt);
    if (nt < 1 || in->n_tokens != nt * g->L || in->n_pixels < at) return mxl_error_set(err, MXL_ERR_ARG, "idefics2: an image of %lld tiles for %lld tokens", (long long)nt, (long long)in->n_tokens);
    mxl_status st = MXL_OK;
    for (int64_t t = 0; t < nt && !st; t++) {
        const int64_t H = (int64_t)in->pixels[2 * t], W = (int64_t)in->pixels[2 * t + 1];
        if (H < 1 || W < 1 || at + (size_t)(3 * H * W) > in->n_pixels) return mxl_error_set(err, MXL_ERR_ARG, "idefics2: tile %lld's %lldx%lld pixels are not there", (long long)t, (long long)W, (long long)H);
        st = tile_rows(g, in->pixels + at, H, W, pool, out + t * g->L * v->text_hidden, err);
        at += (size_t)(3 * H * W);
    }
    return st;
}

/* Idefics2ImageProcessor's get_resize_output_image_size. */
static void fit(const idefics2_vlm *g, int64_t h, int64_t w, int64_t *oh, int64_t *ow) {
    const double aspect = (double)w / (double)h;
    if (w >= h && w > g->longest) w = g->longest, h = (int64_t)((double)w / aspect);
    else if (h > w && h > g->longest) h = g->longest, w = (int64_t)((double)h * aspect);
    *oh = h < g->shortest ? g->shortest : h;
    *ow = w < g->shortest ? g->shortest : w;
}

static mxl_status idefics2_prepare(const mxl_vlm *v, const mxl_image *im, mxl_vlm_input *out, mxl_error *err) {
    const idefics2_vlm *g = (const idefics2_vlm *)v;
    const mxl_vlm_preproc *p = &v->pre;
    double rs;
    const float *mean, *std;
    mxl_vlm_norm_params(p, &rs, &mean, &std);
    const int64_t nt = g->split ? 5 : 1, mh = im->h / 2, mw = im->w / 2;
    /* the tiles as (x0, y0, w, h) crops of the image: its quarters, then itself */
    const int64_t crop[5][4] = {{0, 0, mw, mh}, {mw, 0, im->w - mw, mh}, {0, mh, mw, im->h - mh}, {mw, mh, im->w - mw, im->h - mh}, {0, 0, im->w, im->h}};
    mxl_image tiles[5] = {{0}}, sized[5] = {{0}};
    int64_t th[5], tw[5];
    size_t total = (size_t)(2 * nt);
    mxl_status st = MXL_OK;
    for (int64_t t = 0; t < nt && !st; t++) {
        const int64_t *c = crop[g->split ? t : 4];
        if (c[2] < 1 || c[3] < 1) {
            st = mxl_error_set(err, MXL_ERR_ARG, "a %dx%d image is too small to split into quarters", im->w, im->h);
            break;
        }
        tiles[t] = (mxl_image){(int32_t)c[2], (int32_t)c[3], mxl_malloc((size_t)(c[2] * c[3] * 3))};
        if (!tiles[t].rgb) {
            st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
            break;
        }
        for (int64_t y = 0; y < c[3]; y++) memcpy(tiles[t].rgb + y * c[2] * 3, im->rgb + ((c[1] + y) * im->w + c[0]) * 3, (size_t)(c[2] * 3));
        th[t] = c[3], tw[t] = c[2];
        if (p->do_resize) fit(g, c[3], c[2], &th[t], &tw[t]);
        st = mxl_image_resize(&tiles[t], (int32_t)tw[t], (int32_t)th[t], (mxl_resample)p->resample, &sized[t], err);
        total += (size_t)(3 * th[t] * tw[t]);
    }
    mxl_strbuf sb = {0};
    if (!st) {
        out->pixels = mxl_malloc(total * sizeof(float));
        if (!out->pixels) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    if (!st) {
        size_t at = (size_t)(2 * nt);
        for (int64_t t = 0; t < nt; t++) {
            out->pixels[2 * t] = (float)th[t], out->pixels[2 * t + 1] = (float)tw[t];
            mxl_image_to_pixels(&sized[t], rs, mean, std, out->pixels + at);
            at += (size_t)(3 * th[t] * tw[t]);
        }
        out->n_pixels = total;
        out->n_tokens = nt * g->L;
        out->grid[0] = nt;
        bool ok = true;
        for (int64_t t = 0; t < nt && ok; t++) {
            ok = mxl_strbuf_puts(&sb, g->fake_tok);
            for (int64_t k = 0; k < g->L && ok; k++) ok = mxl_strbuf_puts(&sb, g->image_tok);
        }
        if (!ok || !mxl_strbuf_puts(&sb, g->fake_tok)) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        else out->text = sb.p, out->text_len = sb.n, sb.p = NULL;
    }
    mxl_strbuf_free(&sb);
    for (int t = 0; t < 5; t++) mxl_image_free(&tiles[t]), mxl_image_free(&sized[t]);
    if (st) mxl_vlm_input_free(out);
    return st;
}

/* Idefics2Processor's replacements over the expanded prompt: "<fake><fake>" -> "<fake>", then a
 * boundary token followed by a character that is neither whitespace nor '<' gets a space. */
static mxl_status idefics2_finish(const mxl_vlm *v, char **text, size_t *len, mxl_error *err) {
    const idefics2_vlm *g = (const idefics2_vlm *)v;
    const size_t fl = strlen(g->fake_tok);
    mxl_strbuf sb = {0};
    bool ok = mxl_strbuf_reserve(&sb, *len + 16);
    const char *s = *text;
    size_t i = 0;
    while (ok && i < *len) {
        if (i + fl <= *len && memcmp(s + i, g->fake_tok, fl) == 0) {
            ok = mxl_strbuf_append(&sb, g->fake_tok, fl);
            i += fl;
            if (i + fl <= *len && memcmp(s + i, g->fake_tok, fl) == 0) i += fl; /* (the pair becomes one) */
            if (ok && i < *len && s[i] != '<' && !isspace((unsigned char)s[i])) ok = mxl_strbuf_putc(&sb, ' ');
            continue;
        }
        ok = mxl_strbuf_putc(&sb, s[i++]);
    }
    if (!ok) {
        mxl_strbuf_free(&sb);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    mxl_free(*text);
    *text = sb.p, *len = sb.n;
    return MXL_OK;
}

/* processor_config.json (image_seq_len, its "image_processor"), preprocessor_config.json over it. */
static mxl_status read_processor(const mxl_checkpoint *ck, idefics2_vlm *g, mxl_error *err) {
    mxl_vlm_preproc *p = &g->base.pre;
    *p = (mxl_vlm_preproc){0, 0, 2, true, true, true, 1.0 / 255.0, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
    g->split = false, g->shortest = 378, g->longest = 980;
    json_t *proc = NULL, *j = NULL;
    mxl_status st;
    if ((st = mxl_vlm_processor_files(ck, &j, &proc, err)) || (st = mxl_vlm_check_seq_len(ck, proc, "image_seq_len", g->L, err))) goto out;
    if (!j) goto out;
    const json_t *size = json_object_get(j, "size"), *b;
    if (size && (!json_is_object(size) || mxl_json_int(json_object_get(size, "shortest_edge"), 1, 1 << 14, &g->shortest) ||
                 mxl_json_int(json_object_get(size, "longest_edge"), 1, 1 << 14, &g->longest) || g->shortest > g->longest)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's size needs shortest_edge <= longest_edge", ck->dir);
        goto out;
    }
    int64_t rsm = p->resample;
    if (json_object_get(j, "resample") && mxl_json_int(json_object_get(j, "resample"), 0, 3, &rsm)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's resample must be NEAREST / LANCZOS / BILINEAR / BICUBIC (0-3)", ck->dir);
        goto out;
    }
    p->resample = (int)rsm;
    mxl_vlm_preproc_json(j, p, NULL);
    if ((b = json_object_get(j, "do_image_splitting")) && json_is_boolean(b)) g->split = json_is_true(b);
    if (p->std[0] == 0 || p->std[1] == 0 || p->std[2] == 0 || !(p->rescale > 0))
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: non-zero image_std and a positive rescale_factor are expected", ck->dir);
out:
    json_decref(j);
    json_decref(proc);
    return st;
}

/* The tower: vision_config's sizes (Idefics2VisionConfig's defaults) and tensors. */
static mxl_status load_tower(const mxl_checkpoint *ck, const json_t *vc, idefics2_vlm *g, mxl_error *err) {
    mxl_siglip_stack *s = &g->stack;
    int64_t isz;
    mxl_status st;
    if (!json_is_object(vc)) return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config is missing", ck->dir);
    if ((st = mxl_enc_subcfg_int(ck, vc, "vision_config", "hidden_size", 768, 1, 1 << 16, &s->hidden, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "intermediate_size", 3072, 1, 1 << 18, &s->ffn, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "num_hidden_layers", 12, 1, 1024, &s->n_layers, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "num_attention_heads", 12, 1, 1024, &s->n_heads, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "image_size", 224, 1, 1 << 14, &isz, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "patch_size", 32, 1, 1 << 10, &g->P, err)))
        return st;
    if (s->hidden % s->n_heads || isz % g->P)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config: the heads do not split hidden_size, or patch_size does not divide image_size", ck->dir);
    s->head_dim = s->hidden / s->n_heads;
    g->S = isz / g->P;
    double eps = 1e-6;
    const json_t *t = json_object_get(vc, "layer_norm_eps");
    if (t && !json_is_null(t) && (!mxl_json_number(t, &eps) || !(eps > 0)))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.layer_norm_eps must be a positive number", ck->dir);
    s->eps = (float)eps;
    t = json_object_get(vc, "hidden_act");
    if (mxl_enc_activation(json_is_string(t) ? json_string_value(t) : "gelu_pytorch_tanh", ck->path, &s->act, err)) return err ? err->status : MXL_ERR_UNSUPPORTED;
    s->be = g->be;
    static const char *const k_prefixes[] = {"model.vision_model.", "vision_model.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "embeddings.patch_embedding.weight");
    if (!prefix) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'model.vision_model.embeddings.patch_embedding.weight' is missing", ck->path);
    mxl_enc_binder b = {ck, &g->arena, prefix, err};
    const int64_t H = s->hidden, K = 3 * g->P * g->P;
    const float *pw;
    if (mxl_enc_conv_weight(&b, H, 3, g->P * g->P, &pw, "embeddings.patch_embedding.weight") ||
        mxl_enc_vector(&b, H, &g->patch_b, "embeddings.patch_embedding.bias") ||
        mxl_enc_vector(&b, g->S * g->S * H, &g->pos, "embeddings.position_embedding.weight") ||
        mxl_enc_vector(&b, H, &g->post_w, "post_layernorm.weight") || mxl_enc_vector(&b, H, &g->post_b, "post_layernorm.bias"))
        return err ? err->status : MXL_ERR_FORMAT;
    g->patch_w = (mxl_weight){.kind = MXL_W_DENSE, .dtype = MXL_DTYPE_F32, .rows = H, .cols = K, .data = pw};
    if ((st = g->be->ops->weight_prepare(g->be, &g->patch_w, MXL_WEIGHT_USE_GEMM, &g->arena, err))) return st;
    return mxl_siglip_stack_bind(&b, &mxl_siglip_names_hf, s);
}

/* The connector: the modality projection and the perceiver resampler (perceiver_config). */
static mxl_status load_connector(const mxl_checkpoint *ck, idefics2_vlm *g, mxl_error *err) {
    const json_t *pc = json_object_get(ck->config.raw, "perceiver_config");
    const int64_t Ht = g->base.text_hidden, Hv = g->stack.hidden;
    mxl_status st;
    if (pc && !json_is_object(pc)) return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: perceiver_config must be an object", ck->dir);
    if ((st = mxl_enc_subcfg_int(ck, pc, "perceiver_config", "resampler_n_latents", 64, 1, 1 << 14, &g->L, err)) ||
        (st = mxl_enc_subcfg_int(ck, pc, "perceiver_config", "resampler_depth", 3, 1, 64, &g->depth, err)) ||
        (st = mxl_enc_subcfg_int(ck, pc, "perceiver_config", "resampler_n_heads", 16, 1, 1024, &g->nh, err)) ||
        (st = mxl_enc_subcfg_int(ck, pc, "perceiver_config", "resampler_head_dim", 96, 1, 4096, &g->hd, err)) ||
        (st = mxl_enc_subcfg_int(ck, pc, "perceiver_config", "num_key_value_heads", 4, 1, 1024, &g->nkv, err)))
        return st;
    if (g->nh % g->nkv) return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: perceiver_config's %lld key/value heads do not divide its %lld heads", ck->dir, (long long)g->nkv, (long long)g->nh);
    double eps = 1e-6;
    const json_t *t = pc ? json_object_get(pc, "rms_norm_eps") : NULL;
    if (t && !json_is_null(t) && (!mxl_json_number(t, &eps) || !(eps > 0)))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: perceiver_config.rms_norm_eps must be a positive number", ck->dir);
    g->rms_eps = (float)eps;
    g->I = ck->config.intermediate_size;
    if (g->I <= 0) return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: text_config.intermediate_size is missing", ck->dir);
    if (mxl_enc_activation(ck->config.hidden_act[0] ? ck->config.hidden_act : "silu", ck->path, &g->act, err)) return err ? err->status : MXL_ERR_UNSUPPORTED;
    static const char *const k_prefixes[] = {"model.connector.", "connector.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "perceiver_resampler.latents");
    if (!prefix) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'model.connector.perceiver_resampler.latents' is missing", ck->path);
    mxl_enc_binder b = {ck, &g->arena, prefix, err};
    const int64_t nq = g->nh * g->hd, nk = g->nkv * g->hd;
    if (mxl_enc_matrix(&b, g->I, Hv, &g->pg, "modality_projection.gate_proj.weight") || mxl_enc_matrix(&b, g->I, Hv, &g->pu, "modality_projection.up_proj.weight") ||
        mxl_enc_matrix(&b, Ht, g->I, &g->pd, "modality_projection.down_proj.weight") ||
        mxl_enc_vector(&b, g->L * Ht, &g->latents, "perceiver_resampler.latents") || mxl_enc_vector(&b, Ht, &g->final_norm, "perceiver_resampler.norm.weight"))
        return err ? err->status : MXL_ERR_FORMAT;
    g->layers = mxl_arena_alloc(&g->arena, (size_t)g->depth * sizeof *g->layers, 64);
    if (!g->layers) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_weight *mats[] = {&g->pg, &g->pu, &g->pd};
    for (size_t i = 0; i < 3; i++)
        if ((st = g->be->ops->weight_prepare(g->be, mats[i], MXL_WEIGHT_USE_GEMM, &g->arena, err))) return st;
    for (int64_t l = 0; l < g->depth; l++) {
        perceiver_layer *L = &g->layers[l];
        const long long i = (long long)l;
        if (mxl_enc_vector(&b, Ht, &L->lat_norm, "perceiver_resampler.layers.%lld.input_latents_norm.weight", i) ||
            mxl_enc_vector(&b, Ht, &L->ctx_norm, "perceiver_resampler.layers.%lld.input_context_norm.weight", i) ||
            mxl_enc_vector(&b, Ht, &L->post_norm, "perceiver_resampler.layers.%lld.post_attention_layernorm.weight", i) ||
            mxl_enc_matrix(&b, nq, Ht, &L->wq, "perceiver_resampler.layers.%lld.self_attn.q_proj.weight", i) ||
            mxl_enc_matrix(&b, nk, Ht, &L->wk, "perceiver_resampler.layers.%lld.self_attn.k_proj.weight", i) ||
            mxl_enc_matrix(&b, nk, Ht, &L->wv, "perceiver_resampler.layers.%lld.self_attn.v_proj.weight", i) ||
            mxl_enc_matrix(&b, Ht, nq, &L->wo, "perceiver_resampler.layers.%lld.self_attn.o_proj.weight", i) ||
            mxl_enc_matrix(&b, 4 * Ht, Ht, &L->gate, "perceiver_resampler.layers.%lld.mlp.gate_proj.weight", i) ||
            mxl_enc_matrix(&b, 4 * Ht, Ht, &L->up, "perceiver_resampler.layers.%lld.mlp.up_proj.weight", i) ||
            mxl_enc_matrix(&b, Ht, 4 * Ht, &L->down, "perceiver_resampler.layers.%lld.mlp.down_proj.weight", i))
            return err ? err->status : MXL_ERR_FORMAT;
        mxl_weight *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
        for (size_t k = 0; k < sizeof lm / sizeof lm[0]; k++)
            if ((st = g->be->ops->weight_prepare(g->be, lm[k], MXL_WEIGHT_USE_GEMM, &g->arena, err))) return st;
    }
    return MXL_OK;
}

mxl_status mxl_vlm_idefics2_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    idefics2_vlm *g = mxl_calloc(1, sizeof *g);
    if (!g) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_arena_init(&g->arena, 4096);
    g->be = mxl_backend_host();
    snprintf(g->fake_tok, sizeof g->fake_tok, "<fake_token_around_image>");
    snprintf(g->image_tok, sizeof g->image_tok, "<image>");
    mxl_vlm *v = &g->base;
    v->family = "idefics2";
    v->encode = idefics2_encode;
    v->prepare = idefics2_prepare;
    v->finish_prompt = idefics2_finish;
    v->destroy = idefics2_destroy;
    v->causal_images = true;
    v->before = v->after = "";
    v->text_hidden = ck->config.hidden_size;
    json_t *raw = ck->config.raw;
    mxl_status st;
    if ((st = load_tower(ck, json_object_get(raw, "vision_config"), g, err)) || (st = load_connector(ck, g, err))) goto fail;
    v->tokens_per_image = g->L;
    if ((st = mxl_vlm_image_token(ck, 32001, &v->image_token, err))) goto fail;
    if ((st = read_processor(ck, g, err))) goto fail;
    json_t *tc = NULL;
    if ((st = mxl_vlm_tokenizer_config(ck, &tc, err))) goto fail;
    mxl_vlm_str_key(tc, "image_boundary_token", g->fake_tok, sizeof g->fake_tok);
    mxl_vlm_str_key(tc, "image_token", g->image_tok, sizeof g->image_tok);
    json_decref(tc);
    v->image_text = g->image_tok;
    v->marker = g->image_tok; /* the chat template writes <image>, which the processor expands */
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    idefics2_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}
