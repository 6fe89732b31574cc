/* vlm_gemma3.c - Gemma 3's vision side (transformers modeling_gemma3.py / processing_gemma3.py):
 * the SigLIP tower (vision_siglip.h) over a square image, then Gemma3MultiModalProjector:
 *   grid  [side, side, Hv]   the tower's output, patch (py, px) at row py * side + px
 *   pool  [t, t, Hv]         AvgPool2d(k, stride k), t = sqrt(mm_tokens_per_image), k = side / t
 *   norm  RMSNorm with (1 + w), eps = vision_config.layer_norm_eps
 *   out   [t * t, Ht] = norm Wm   (mm_input_projection_weight [Hv, Ht])
 * The processor resizes to size (896 x 896 as released) with PIL's bilinear filter, rescales by
 * 1/255 and normalises with mean = std = 0.5 (preprocessor_config.json overrides), and writes each
 * image as "\n\n<start_of_image>" + mm_tokens_per_image x "<image_soft_token>" + "<end_of_image>\n\n"
 * where the chat template wrote "<start_of_image>". Pan-and-scan (off by default) is not done. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "io/json_read.h"
#include "io/safetensors.h"
#include "models/vision_siglip.h"
#include "models/vlm.h"
#include "models/weights.h"

typedef struct gemma3_vlm {
    mxl_vlm base;
    mxl_siglip_vision tower;
    mxl_arena arena;
    int64_t tps, kernel;  /* tokens per side, pooling kernel */
    float eps;
    const float *norm_w;  /* [Hv] */
    bool norm_plus_one;   /* the norm scales by 1 + w (transformers'; the mmproj GGUF stores 1 + w) */
    mxl_checkpoint *mm;   /* the mmproj GGUF the tower was read from, or NULL */
    mxl_weight proj;      /* [Ht, Hv] (the stored [Hv, Ht] transposed) */
    const mxl_backend *be;
} gemma3_vlm;

static void gemma3_destroy(mxl_vlm *v) {
    gemma3_vlm *g = (gemma3_vlm *)v;
    mxl_siglip_vision_free(&g->tower);
    mxl_arena_free(&g->arena);
    mxl_checkpoint_close(g->mm);
    mxl_free(g);
}

static mxl_status gemma3_encode(const mxl_vlm *v, const mxl_vlm_input *in, mxl_threadpool *pool, float *out, mxl_error *err) {
    const float *pixels = in->pixels;
    const gemma3_vlm *g = (const gemma3_vlm *)v;
    const int64_t Hv = g->tower.stack.hidden, side = g->tower.side, t = g->tps, k = g->kernel;
    float *grid = mxl_aligned_alloc(64, ((size_t)(g->tower.n_patches * Hv) * sizeof(float) + 63) / 64 * 64);
    float *pooled = mxl_aligned_alloc(64, ((size_t)(t * t * Hv) * sizeof(float) + 63) / 64 * 64);
    size_t mm = mxl_enc_linear_scratch_bytes(g->be, &g->proj, t * t, pool ? mxl_threadpool_size(pool) : 1);
    void *scratch = mm ? mxl_aligned_alloc(64, (mm + 63) / 64 * 64) : NULL;
    mxl_status st = grid && pooled && (!mm || scratch) ? mxl_siglip_vision_forward(&g->tower, pixels, pool, grid, err)
                                                       : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    if (st == MXL_OK) {
        const float inv = 1.0f / (float)(k * k);
        for (int64_t ty = 0; ty < t; ty++)
            for (int64_t tx = 0; tx < t; tx++) {
                float *o = pooled + (ty * t + tx) * Hv;
                for (int64_t c = 0; c < Hv; c++) o[c] = 0.0f;
                for (int64_t dy = 0; dy < k; dy++)
                    for (int64_t dx = 0; dx < k; dx++) {
                        const float *p = grid + ((ty * k + dy) * side + tx * k + dx) * Hv;
                        for (int64_t c = 0; c < Hv; c++) o[c] += p[c];
                    }
                double ss = 0;
                for (int64_t c = 0; c < Hv; c++) {
                    o[c] *= inv;
                    ss += (double)o[c] * o[c];
                }
                const float r = 1.0f / sqrtf((float)(ss / (double)Hv) + g->eps);
                for (int64_t c = 0; c < Hv; c++) o[c] = o[c] * r * ((g->norm_plus_one ? 1.0f : 0.0f) + g->norm_w[c]);
            }
        mxl_enc_linear_act(g->be, &g->proj, NULL, MXL_GEMM_ACT_NONE, pooled, t * t, out, scratch, pool);
    }
    mxl_aligned_free(grid);
    mxl_aligned_free(pooled);
    mxl_aligned_free(scratch);
    return st;
}

/* preprocessor_config.json over Gemma3ImageProcessor's defaults; pan-and-scan is not done. */
static mxl_status read_preproc(const mxl_checkpoint *ck, mxl_vlm_preproc *p, mxl_error *err) {
    mxl_status st = mxl_vlm_read_preproc(ck, p, NULL, err);
    if (st) return st;
    char path[4200];
    snprintf(path, sizeof path, "%s/preprocessor_config.json", ck->dir);
    json_t *j = NULL;
    mxl_error ignore;
    bool pan = mxl_json_load_file_py(path, 1 << 20, &j, &ignore) == MXL_OK && json_is_true(json_object_get(j, "do_pan_and_scan"));
    json_decref(j);
    if (pan) return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: do_pan_and_scan is not supported", path);
    if (p->height != p->width) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: a square size is expected", path);
    return MXL_OK;
}

/* A fresh gemma3_vlm with the processor's texts. */
static gemma3_vlm *new_vlm(void) {
    gemma3_vlm *g = mxl_calloc(1, sizeof *g);
    if (!g) return NULL;
    mxl_arena_init(&g->arena, 4096);
    g->be = mxl_backend_host();
    mxl_vlm *v = &g->base;
    v->family = "gemma3";
    v->encode = gemma3_encode;
    v->destroy = gemma3_destroy;
    v->marker = "<start_of_image>";
    v->image_text = "<image_soft_token>";
    v->before = "\n\n<start_of_image>";
    v->after = "<end_of_image>\n\n";
    return g;
}

/* The pooling grid for mm tokens per image, and the projector (norm, matrix) under b. */
static mxl_status projector(gemma3_vlm *g, const char *where, int64_t mm, mxl_enc_binder *b, const char *norm, const char *proj,
                            mxl_error *err) {
    g->tps = (int64_t)llround(sqrt((double)mm));
    if (g->tps * g->tps != mm || g->tower.side % g->tps)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %lld image tokens are not a square whose side divides the %lld patches per side", where,
                             (long long)mm, (long long)g->tower.side);
    g->kernel = g->tower.side / g->tps;
    g->eps = g->tower.stack.eps;
    g->base.tokens_per_image = mm;
    const int64_t Hv = g->tower.stack.hidden, Ht = g->base.text_hidden;
    char name[256];
    snprintf(name, sizeof name, "%s%s", b->prefix, proj);
    const mxl_tensor *t = NULL;
    if (b->ck->st) {
        const mxl_st_entry *e = mxl_st_model_find(b->ck->st, name);
        t = e ? &e->tensor : NULL;
    } else {
        const mxl_gguf_tensor_info *ti = mxl_gguf_find_tensor(b->ck->gguf, name);
        t = ti ? &ti->tensor : NULL;
    }
    if (!t) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor '%s' is missing", b->ck->path, name);
    mxl_status st;
    if ((st = mxl_enc_vector(b, Hv, &g->norm_w, "%s", norm)) || (st = mxl_weights_matrix_transposed(&g->arena, t, name, Ht, Hv, &g->proj, err)) ||
        (st = g->be->ops->weight_prepare(g->be, &g->proj, MXL_WEIGHT_USE_GEMM, &g->arena, err)))
        return st;
    g->base.pre = (mxl_vlm_preproc){g->tower.image_size, g->tower.image_size, 2, true, true, true, 1.0 / 255.0, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
    return MXL_OK;
}

mxl_status mxl_vlm_gemma3_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    gemma3_vlm *g = new_vlm();
    if (!g) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_vlm *v = &g->base;
    g->norm_plus_one = true;
    json_t *raw = ck->config.raw;
    mxl_status st = mxl_siglip_vision_load(ck, json_object_get(raw, "vision_config"), &g->tower, err);
    int64_t mm = 256;
    if (!st && json_object_get(raw, "mm_tokens_per_image") && mxl_json_int(json_object_get(raw, "mm_tokens_per_image"), 1, 1 << 20, &mm))
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: mm_tokens_per_image must be a positive integer", ck->dir);
    if (st || (st = mxl_vlm_image_token(ck, 262144, &v->image_token, err))) goto fail;
    v->text_hidden = ck->config.hidden_size;
    static const char *const k_prefixes[] = {"multi_modal_projector.", "model.multi_modal_projector.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "mm_input_projection_weight");
    if (!prefix) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'multi_modal_projector.mm_input_projection_weight' is missing", ck->path);
        goto fail;
    }
    mxl_enc_binder b = {ck, &g->arena, prefix, err};
    if ((st = projector(g, ck->dir, mm, &b, "mm_soft_emb_norm.weight", "mm_input_projection_weight", err))) goto fail;
    if ((st = read_preproc(ck, &v->pre, err))) goto fail;
    if (v->pre.width != g->tower.image_size) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: preprocessor size %lld differs from the tower's image_size %lld", ck->dir,
                           (long long)v->pre.width, (long long)g->tower.image_size);
        goto fail;
    }
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    gemma3_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}

mxl_status mxl_vlm_gemma3_load_mmproj(const mxl_checkpoint *ck, mxl_checkpoint *mm, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    gemma3_vlm *g = new_vlm();
    if (!g) {
        mxl_checkpoint_close(mm);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    mxl_vlm *v = &g->base;
    g->mm = mm; /* (closed with the vlm) */
    g->norm_plus_one = false;
    v->text_hidden = ck->config.hidden_size;
    mxl_status st = mxl_siglip_vision_load_gguf(mm, &g->tower, err);
    int64_t scale = 4, img = mxl_vlm_gguf_token_id(ck, v->image_text);
    if (!st && img < 0) st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the vocabulary has no '%s' token for images", ck->path, v->image_text);
    if (!st && mxl_gguf_find(mm->gguf, "clip.vision.projector.scale_factor")) {
        uint64_t sf;
        if (!(st = mxl_gguf_get_u64(mm->gguf, "clip.vision.projector.scale_factor", &sf, err))) scale = (int64_t)sf;
    }
    if (!st && (scale < 1 || g->tower.side % scale))
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: projector scale factor %lld does not divide the %lld patches per side", mm->path,
                           (long long)scale, (long long)g->tower.side);
    if (st) goto fail;
    v->image_token = (int32_t)img;
    mxl_enc_binder b = {mm, &g->arena, "", err};
    const int64_t tps = g->tower.side / scale;
    if ((st = projector(g, mm->path, tps * tps, &b, "mm.soft_emb_norm.weight", "mm.input_projection.weight", err))) goto fail;
    mxl_vlm_gguf_mean_std(mm, &v->pre);
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    gemma3_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}
