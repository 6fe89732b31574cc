/* vlm_qwen2vl.c - Qwen2-VL's, Qwen2.5-VL's, Qwen3-VL's and GLM-4.1V / 4.5V's vision side (transformers
 * processing_qwen2_vl.py / processing_qwen3_vl.py, image_processing_pil_qwen2_vl.py
 * Qwen2VLImageProcessorPil, modeling_qwen2_vl.py / modeling_qwen2_5_vl.py / modeling_qwen3_vl.py;
 * processing_glm4v.py, image_processing_pil_glm4v.py, modeling_glm4v.py / modeling_glm4v_moe.py:
 * the same steps with GLM's smart_resize, <|image|> tokens between <|begin_of_image|> and
 * <|end_of_image|>).
 * The processor keeps each image near its own resolution:
 *   smart_resize: (h, w) rounded (half to even) to multiples of f = patch_size * merge_size, then
 *                 scaled down to at most max_pixels (floor) or up to at least min_pixels (ceil),
 *                 the aspect ratio below 200
 *   resize with PIL's bicubic filter (preprocessor_config.json resample), rescale, normalise
 *   (CLIP's mean / std), then patchify: grid_h = h / P, grid_w = w / P patches, each repeated over
 *   temporal_patch_size frames, in merge-block order (vision_qwen2vl.h) -> [grid_h * grid_w,
 *   3 * T * P * P]; the image takes grid_h * grid_w / merge^2 tokens.
 * The chat template writes "<|vision_start|><|image_pad|><|vision_end|>" per image; the
 * processor repeats "<|image_pad|>" once per token. The decoder places the image's rows by M-RoPE
 * over its (grid_h / merge) x (grid_w / merge) token grid (mrope_grid; decoder.h). Qwen3-VL's
 * encode also writes its DeepStack features after the rows (n_deep slabs; the text decoder's
 * first layers add them to the image's rows). Videos are not taken. A GGUF text model takes the
 * tower from llama.cpp's mmproj beside it (mxl_vlm_qwen2vl_load_mmproj): the mean / std from it,
 * the pixel limits clip.cpp uses for these towers (8 to 4096 tokens) or its image_min_pixels /
 * image_max_pixels, "<|image_pad|>" from the text model's vocabulary. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "io/gguf.h"
#include "io/json_read.h"
#include "models/vision_qwen2vl.h"
#include "models/vlm.h"

typedef struct qwen2vl_vlm {
    mxl_vlm base;
    mxl_qwen2vl_vision tower;
    mxl_checkpoint *mm; /* the mmproj GGUF the tower was read from (closed with the vlm), or NULL */
    int64_t min_pixels, max_pixels, patch, merge, temporal;
    bool glm; /* GLM-4.1V's smart_resize (see smart_resize) */
} qwen2vl_vlm;

static void qwen2vl_destroy(mxl_vlm *v) {
    qwen2vl_vlm *q = (qwen2vl_vlm *)v;
    mxl_qwen2vl_vision_free(&q->tower);
    if (q->mm) mxl_checkpoint_close(q->mm);
    mxl_free(q);
}

/* transformers' smart_resize (Python's round: half to even). GLM-4.1V's (image_processing_glm4v.py)
 * first scales a side below f up (int(side * max(f / h, f / w))) and counts the pixel limits over
 * temporal_patch_size frames. */
static mxl_status smart_resize(const qwen2vl_vlm *q, int64_t h, int64_t w, int64_t *oh, int64_t *ow, mxl_error *err) {
    const double f = (double)(q->patch * q->merge), t = q->glm ? (double)q->temporal : 1.0;
    if (q->glm && (h < (int64_t)f || w < (int64_t)f)) {
        const double sc = fmax(f / (double)h, f / (double)w);
        h = (int64_t)((double)h * sc), w = (int64_t)((double)w * sc);
    }
    if ((double)(h > w ? h : w) / (double)(h < w ? h : w) > 200)
        return mxl_error_set(err, MXL_ERR_ARG, "the image is %lldx%lld: its aspect ratio must be below 200", (long long)w, (long long)h);
    double hb = nearbyint((double)h / f) * f, wb = nearbyint((double)w / f) * f;
    if (t * hb * wb > (double)q->max_pixels) {
        const double beta = sqrt(t * (double)(h * w) / (double)q->max_pixels);
        hb = fmax(f, floor((double)h / beta / f) * f);
        wb = fmax(f, floor((double)w / beta / f) * f);
    } else if (t * hb * wb < (double)q->min_pixels) {
        const double beta = sqrt((double)q->min_pixels / (t * (double)(h * w)));
        hb = ceil((double)h * beta / f) * f;
        wb = ceil((double)w * beta / f) * f;
    }
    if (hb < f || wb < f || hb > 65536 || wb > 65536)
        return mxl_error_set(err, MXL_ERR_ARG, "the image is %lldx%lld: no size within the processor's pixel limits keeps it", (long long)w, (long long)h);
    *oh = (int64_t)hb, *ow = (int64_t)wb;
    return MXL_OK;
}

static mxl_status qwen2vl_prepare(const mxl_vlm *v, const mxl_image *im, mxl_vlm_input *out, mxl_error *err) {
    const qwen2vl_vlm *q = (const qwen2vl_vlm *)v;
    int64_t h = im->h, w = im->w;
    mxl_status st = MXL_OK;
    if (v->pre.do_resize && (st = smart_resize(q, im->h, im->w, &h, &w, err))) return st;
    const int64_t P = q->patch, m = q->merge, T = q->temporal;
    if (h % (P * m) || w % (P * m))
        return mxl_error_set(err, MXL_ERR_ARG, "the image is %lldx%lld, not whole merge blocks of %lld pixels", (long long)w, (long long)h,
                             (long long)(P * m));
    mxl_vlm sized = *v;
    sized.pre.width = w, sized.pre.height = h;
    float *px = NULL;
    if ((st = mxl_vlm_pixels(&sized, im, &px, err))) return st;
    const int64_t gh = h / P, gw = w / P, K = 3 * T * P * P;
    float *pt = mxl_malloc((size_t)(gh * gw * K) * sizeof(float));
    if (!pt) {
        mxl_free(px);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    /* row (bh, bw, my, mx), column (c, t, ky, kx) = pixel (c, (bh m + my) P + ky, (bw m + mx) P + kx) */
    int64_t r = 0;
    for (int64_t bh = 0; bh < gh / m; bh++)
        for (int64_t bw = 0; bw < gw / m; bw++)
            for (int64_t my = 0; my < m; my++)
                for (int64_t mx = 0; mx < m; mx++, r++) {
                    float *row = pt + r * K;
                    const int64_t y0 = (bh * m + my) * P, x0 = (bw * m + mx) * P;
                    for (int64_t c = 0; c < 3; c++)
                        for (int64_t t = 0; t < T; t++)
                            for (int64_t ky = 0; ky < P; ky++)
                                memcpy(row + ((c * T + t) * P + ky) * P, px + (c * h + y0 + ky) * w + x0, (size_t)P * sizeof(float));
                }
    mxl_free(px);
    out->pixels = pt;
    out->n_pixels = (size_t)(gh * gw * K);
    out->n_tokens = gh * gw / (m * m);
    out->grid[0] = 1, out->grid[1] = gh / m, out->grid[2] = gw / m, out->grid[3] = m;
    mxl_strbuf sb = {0};
    bool ok = true;
    for (int64_t t = 0; t < out->n_tokens && ok; t++) ok = mxl_strbuf_puts(&sb, v->image_text);
    if (!ok) {
        mxl_strbuf_free(&sb);
        mxl_vlm_input_free(out);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    out->text = sb.p;
    out->text_len = sb.n;
    return MXL_OK;
}

static mxl_status qwen2vl_encode(const mxl_vlm *v, const mxl_vlm_input *in, mxl_threadpool *pool, float *out, mxl_error *err) {
    const qwen2vl_vlm *q = (const qwen2vl_vlm *)v;
    const int64_t gh = in->grid[1] * q->merge, gw = in->grid[2] * q->merge;
    if (in->n_pixels != (size_t)(gh * gw * q->tower.patch_dim))
        return mxl_error_set(err, MXL_ERR_ARG, "the image's patches do not match its %lld x %lld grid", (long long)gh, (long long)gw);
    return mxl_qwen2vl_vision_forward(&q->tower, in->pixels, gh, gw, pool, out, v->n_deep ? out + in->n_tokens * v->text_hidden : NULL, err);
}

/* An integer key of preprocessor_config.json (or of its size object) when present. */
static mxl_status pp_int(const char *path, const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, mxl_error *err) {
    const json_t *x = json_object_get(o, key);
    if (!x || json_is_null(x)) return MXL_OK;
    if (mxl_json_int(x, lo, hi, out)) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: '%s' must be an integer in [%lld, %lld]", path, key, (long long)lo, (long long)hi);
    return MXL_OK;
}

/* preprocessor_config.json, or processor_config.json's "image_processor" (transformers 5), when
 * the checkpoint has one (Qwen2VLImageProcessor's defaults else). */
static mxl_status read_preproc(const mxl_checkpoint *ck, qwen2vl_vlm *q, mxl_error *err) {
    mxl_vlm_preproc *p = &q->base.pre;
    char path[4200];
    json_t *j = NULL;
    mxl_status st;
    snprintf(path, sizeof path, "%s/preprocessor_config.json", ck->dir);
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        if ((st = mxl_json_load_file_py(path, 1 << 20, &j, err))) return st;
    } else {
        snprintf(path, sizeof path, "%s/processor_config.json", ck->dir);
        if (!(f = fopen(path, "rb"))) return MXL_OK;
        fclose(f);
        json_t *proc = NULL;
        if ((st = mxl_json_load_file_py(path, 1 << 20, &proc, err))) return st;
        j = json_incref(json_object_get(proc, "image_processor"));
        json_decref(proc);
        if (!json_is_object(j)) {
            json_decref(j);
            return MXL_OK;
        }
    }
    const json_t *size = json_object_get(j, "size");
    int64_t rs = p->resample;
    if ((json_is_object(size) && ((st = pp_int(path, size, "shortest_edge", 1, INT64_C(1) << 40, &q->min_pixels, err)) ||
                                  (st = pp_int(path, size, "longest_edge", 1, INT64_C(1) << 40, &q->max_pixels, err)))) ||
        (st = pp_int(path, j, "min_pixels", 1, INT64_C(1) << 40, &q->min_pixels, err)) ||
        (st = pp_int(path, j, "max_pixels", 1, INT64_C(1) << 40, &q->max_pixels, err)) ||
        (st = pp_int(path, j, "patch_size", 1, 1024, &q->patch, err)) || (st = pp_int(path, j, "merge_size", 1, 16, &q->merge, err)) ||
        (st = pp_int(path, j, "temporal_patch_size", 1, 16, &q->temporal, err)) || (st = pp_int(path, j, "resample", 0, 5, &rs, err))) {
        json_decref(j);
        return st;
    }
    mxl_vlm_preproc_json(j, p, NULL);
    json_decref(j);
    p->resample = (int)rs;
    if (p->std[0] == 0 || p->std[1] == 0 || p->std[2] == 0 || !(p->rescale > 0) || q->min_pixels > q->max_pixels)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: non-zero image_std, a positive rescale_factor and min_pixels <= max_pixels are expected", path);
    return MXL_OK;
}

/* The hooks, the image text and Qwen2VLImageProcessor's defaults (CLIP's mean and std, bicubic;
 * Qwen3-VL's configs: 0.5) of a new q (q->glm set). */
static void init_vlm(qwen2vl_vlm *q) {
    mxl_vlm *v = &q->base;
    v->prepare = qwen2vl_prepare;
    v->encode = qwen2vl_encode;
    v->destroy = qwen2vl_destroy;
    v->marker = v->image_text = q->glm ? "<|image|>" : "<|image_pad|>";
    v->before = v->after = "";
    v->causal_images = true;
    v->mrope_grid = true;
    v->pre = mxl_vlm_preproc_clip_bicubic();
}

/* The tower's merger width against the text model's; q's patch geometry from its tower. */
static mxl_status check_tower(qwen2vl_vlm *q, const char *where, mxl_error *err) {
    if (q->tower.out_hidden != q->base.text_hidden)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the vision merger's width %lld is not the text hidden size %lld", where,
                             (long long)q->tower.out_hidden, (long long)q->base.text_hidden);
    q->patch = q->tower.patch, q->merge = q->tower.merge, q->temporal = q->tower.temporal;
    return MXL_OK;
}

mxl_status mxl_vlm_qwen2vl_load_mmproj(const mxl_checkpoint *ck, mxl_checkpoint *mm, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    qwen2vl_vlm *q = mxl_calloc(1, sizeof *q);
    if (!q) {
        mxl_checkpoint_close(mm);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    mxl_vlm *v = &q->base;
    q->mm = mm;
    mxl_gguf_str pt = {0};
    q->glm = !mxl_gguf_get_str(mm->gguf, "clip.projector_type", &pt, NULL) && pt.len == 5 && memcmp(pt.data, "glm4v", 5) == 0;
    init_vlm(q);
    mxl_status st = mxl_qwen2vl_vision_load_gguf(mm, &q->tower, err);
    if (st) goto fail;
    v->family = q->glm ? "glm4v" : q->tower.v25 ? "qwen2_5_vl" : q->tower.v3 ? "qwen3_vl" : "qwen2_vl";
    v->n_deep = q->tower.n_deep;
    v->text_hidden = ck->config.hidden_size;
    if ((st = check_tower(q, mm->path, err))) goto fail;
    const int64_t img = mxl_vlm_gguf_token_id(ck, v->image_text);
    if (img < 0) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the vocabulary has no '%s' token for images", ck->path, v->image_text);
        goto fail;
    }
    v->image_token = (int32_t)img;
    mxl_vlm_gguf_mean_std(mm, &v->pre);
    /* clip.cpp's pixel limits for these towers: 8 to 4096 tokens of (patch x merge)^2 pixels, or
     * the mmproj's clip.vision.image_min_pixels / image_max_pixels (GLM's smart_resize counts the
     * pixels of every temporal frame: the defaults so many times over) */
    const int64_t area = q->patch * q->patch * q->merge * q->merge * (q->glm ? q->temporal : 1);
    q->min_pixels = 8 * area, q->max_pixels = 4096 * area;
    static const char *const k_keys[2] = {"clip.vision.image_min_pixels", "clip.vision.image_max_pixels"};
    int64_t *lim[2] = {&q->min_pixels, &q->max_pixels};
    for (int i = 0; i < 2; i++) {
        uint64_t u;
        if (!mxl_gguf_find(mm->gguf, k_keys[i])) continue;
        if ((st = mxl_gguf_get_u64(mm->gguf, k_keys[i], &u, err))) goto fail;
        if (u < 1 || u > (UINT64_C(1) << 40)) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s = %llu is out of range", mm->path, k_keys[i], (unsigned long long)u);
            goto fail;
        }
        *lim[i] = (int64_t)u;
    }
    if (q->min_pixels > q->max_pixels) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: image_min_pixels is above image_max_pixels", mm->path);
        goto fail;
    }
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    qwen2vl_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}

mxl_status mxl_vlm_qwen2vl_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    qwen2vl_vlm *q = mxl_calloc(1, sizeof *q);
    if (!q) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_vlm *v = &q->base;
    const char *mt = ck->config.model_type;
    const bool v25 = strcmp(mt, "qwen2_5_vl") == 0, v3 = strcmp(mt, "qwen3_vl") == 0 || strcmp(mt, "qwen3_vl_moe") == 0;
    q->glm = strcmp(mt, "glm4v") == 0 || strcmp(mt, "glm4v_moe") == 0;
    v->family = v25 ? "qwen2_5_vl" : v3 || q->glm ? mt : "qwen2_vl";
    init_vlm(q);
    json_t *raw = ck->config.raw;
    mxl_status st = mxl_qwen2vl_vision_load(ck, json_object_get(raw, "vision_config"), v25 ? 25 : v3 ? 3 : q->glm ? 4 : 2, &q->tower, err);
    if (st) goto fail;
    v->n_deep = q->tower.n_deep;
    /* (Glm4vConfig's default; Qwen2VLConfig's and Qwen3VLConfig's) */
    if ((st = mxl_vlm_image_token(ck, q->glm ? 151343 : 151655, &v->image_token, err))) goto fail;
    v->text_hidden = ck->config.hidden_size;
    char where[4200];
    snprintf(where, sizeof where, "%s/config.json", ck->dir);
    if ((st = check_tower(q, where, err))) goto fail;
    q->min_pixels = 56 * 56, q->max_pixels = 28 * 28 * 1280;
    if (q->glm) q->min_pixels = 112 * 112, q->max_pixels = 28 * 28 * 15000; /* (Glm4vImageProcessor's) */
    if ((st = read_preproc(ck, q, err))) goto fail;
    if (q->patch != q->tower.patch || q->merge != q->tower.merge || q->temporal != q->tower.temporal) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the preprocessor's patch_size / merge_size / temporal_patch_size differ from the vision tower's", ck->dir);
        goto fail;
    }
    v->tokens_per_image = 0; /* (per image: prepare) */
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    qwen2vl_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}
