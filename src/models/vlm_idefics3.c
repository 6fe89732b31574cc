/* vlm_idefics3.c - the vision side of Idefics3 and SmolVLM (transformers modeling_idefics3.py /
 * modeling_smolvlm.py, Idefics3ForConditionalGeneration: Idefics3-8B-Llama3;
 * SmolVLMForConditionalGeneration: SmolVLM-256M / 500M / 2.2B, SmolVLM2; a Llama text model,
 * family_llava.c's idefics3 / smolvlm records):
 *   tower   the Idefics3 / SmolVLM vision transformer (SigLIP's layers, vision_siglip.h) over each
 *           tile [3, S, S], post_layernorm applied                          [side*side, Hv]
 *   shuffle pixel_shuffle by d = scale_factor (vision_siglip.h)             [(side/d)^2, d*d*Hv]
 *   proj    modality_projection.proj, no bias                               [(side/d)^2, Ht]
 * The processor (Idefics3ImageProcessor / SmolVLMImageProcessor's PIL backend, the same steps):
 * the image's longest edge resized to size.longest_edge (the other side in proportion, made even),
 * then with do_image_splitting both sides rounded up to multiples of the tile side T =
 * max_image_size.longest_edge (the tower's image size) by a second resize; past one tile the
 * image is cut into T x T tiles row by row and then resized whole to T x T as the global tile
 * (without splitting: resized to T x T, the global tile alone). Every resize is PIL's on 8-bit RGB
 * (resample, LANCZOS as released); rescale, normalise (mean = std = 0.5 as released). Each image
 * becomes, with N = (side/d)^2 copies of <image> per tile,
 *   <fake_token_around_image><row_1_col_1><image> x N ... (one "\n" after each row of tiles)
 *   \n<fake_token_around_image><global-img><image> x N<fake_token_around_image>
 * or the global part alone for one tile: the image's rows fill its <image> tokens tile by tile (one
 * run, one media block per tile, attending causally like the text). grid[0] of an input: its tile
 * count (the global one included), grid[1] / grid[2]: its rows / columns of tiles (0 when one).
 * Settings from processor_config.json (image_seq_len, its "image_processor") and
 * preprocessor_config.json; token strings from tokenizer_config.json's fake_image_token,
 * image_token and global_image_token when it names them. Or from llama.cpp's mmproj GGUF
 * (projector type idefics3) beside a GGUF text model: the tower's v.* tensors, mm.model.fc as the
 * projection, clip.vision.projector.scale_factor, clip.vision.preproc_image_size as
 * size.longest_edge, the image mean / std; the processor's other settings its defaults (LANCZOS,
 * splitting), the tokens looked up in the text model's vocabulary. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "image/resize.h"
#include "io/json_read.h"
#include "models/encoder_common.h"
#include "models/vision_siglip.h"
#include "models/vlm.h"
#include "models/weights.h"

typedef struct idefics3_vlm {
    mxl_vlm base;
    mxl_siglip_vision tower;
    int64_t d, side, tpt;    /* scale_factor, the tower's patches per side, rows per tile */
    mxl_arena arena;
    mxl_weight proj;         /* [Ht, d*d*Hv] */
    const mxl_backend *be;
    /* the image processor */
    bool split;              /* do_image_splitting */
    int64_t longest;         /* size.longest_edge (0: do_resize false) */
    char fake_tok[64], image_tok[64], global_tok[64];
    mxl_checkpoint *mm;      /* the mmproj GGUF the tower was read from (closed with the vlm), or NULL */
} idefics3_vlm;

static void idefics3_destroy(mxl_vlm *v) {
    idefics3_vlm *g = (idefics3_vlm *)v;
    mxl_siglip_vision_free(&g->tower);
    mxl_arena_free(&g->arena);
    mxl_checkpoint_close(g->mm);
    mxl_free(g);
}

static void *aligned(size_t bytes) { return mxl_aligned_alloc(64, (bytes + 63) / 64 * 64); }

static mxl_status idefics3_encode(const mxl_vlm *v, const mxl_vlm_input *in, mxl_threadpool *pool, float *out, mxl_error *err) {
    const idefics3_vlm *g = (const idefics3_vlm *)v;
    const int64_t S = g->tower.image_size, nt = in->grid[0], Hv = g->tower.stack.hidden, n = g->tower.n_patches, T = g->tpt;
    if (nt < 1 || in->n_tokens != nt * T || in->n_pixels != (size_t)(nt * 3 * S * S))
        return mxl_error_set(err, MXL_ERR_ARG, "%s: an image of %zu pixel values for %lld tokens (%lld tiles of %lld tokens and %lld values each)", v->family,
                             in->n_pixels, (long long)in->n_tokens, (long long)nt, (long long)T, (long long)(3 * S * S));
    const int nth = pool ? mxl_threadpool_size(pool) : 1;
    const size_t mm = mxl_enc_linear_scratch_bytes(g->be, &g->proj, T, nth);
    float *x = aligned((size_t)(n * Hv) * sizeof(float)), *sh = aligned((size_t)(n * Hv) * sizeof(float));
    void *scratch = mm ? aligned(mm) : NULL;
    mxl_status st = MXL_OK;
    if (!x || !sh || (mm && !scratch)) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t t = 0; t < nt && !st; t++) {
        /* x [side*side, Hv] -> sh [T, d*d*Hv] -> out rows [T, Ht] */
        if ((st = mxl_siglip_vision_forward(&g->tower, in->pixels + t * 3 * S * S, pool, x, err))) break;
        mxl_vision_pixel_shuffle(x, g->side, g->d, Hv, sh);
        mxl_enc_linear_act(g->be, &g->proj, NULL, MXL_GEMM_ACT_NONE, sh, T, out + t * T * v->text_hidden, scratch, pool);
    }
    mxl_aligned_free(x);
    mxl_aligned_free(sh);
    mxl_aligned_free(scratch);
    return st;
}

/* _resize_output_size_rescale_to_max_len then _resize_output_size_scale_below_upper_bound (4096):
 * the first resize's target for an h x w image. */
static void fit_longest(int64_t h, int64_t w, int64_t L, int64_t *oh, int64_t *ow) {
    double aspect = (double)w / (double)h;
    if (w >= h) {
        w = L, h = (int64_t)((double)w / aspect);
        if (h % 2) h++;
    } else {
        h = L, w = (int64_t)((double)h * aspect);
        if (w % 2) w++;
    }
    if (h < 1) h = 1;
    if (w < 1) w = 1;
    aspect = (double)w / (double)h;
    if (w >= h && w > 4096) w = 4096, h = (int64_t)((double)w / aspect);
    else if (h > w && h > 4096) h = 4096, w = (int64_t)((double)h * aspect);
    *oh = h < 1 ? 1 : h;
    *ow = w < 1 ? 1 : w;
}

/* resize_for_vision_encoder: both sides up to multiples of T, the shorter one from the longer. */
static void fit_tiles(int64_t h, int64_t w, int64_t T, int64_t *oh, int64_t *ow) {
    const double aspect = (double)w / (double)h;
    if (w >= h) {
        w = (w + T - 1) / T * T;
        h = (int64_t)((double)w / aspect);
        h = (h + T - 1) / T * T;
    } else {
        h = (h + T - 1) / T * T;
        w = (int64_t)((double)h * aspect);
        w = (w + T - 1) / T * T;
    }
    *oh = h < T ? T : h;
    *ow = w < T ? T : w;
}

static bool put_run(mxl_strbuf *sb, const idefics3_vlm *g) {
    bool ok = true;
    for (int64_t k = 0; k < g->tpt && ok; k++) ok = mxl_strbuf_puts(sb, g->image_tok);
    return ok;
}

static mxl_status idefics3_prepare(const mxl_vlm *v, const mxl_image *im, mxl_vlm_input *out, mxl_error *err) {
    const idefics3_vlm *g = (const idefics3_vlm *)v;
    const mxl_vlm_preproc *p = &v->pre;
    const int64_t S = g->tower.image_size;
    const mxl_resample rsm = (mxl_resample)p->resample;
    mxl_image first = {0, 0, NULL}, sized = {0, 0, NULL}, glob = {0, 0, NULL};
    mxl_strbuf sb = {0};
    mxl_status st = MXL_OK;
    double rs;
    const float *mean, *std;
    mxl_vlm_norm_params(p, &rs, &mean, &std);
    const mxl_image *cur = im;
    int64_t h = im->h, w = im->w, rows = 0, cols = 0;
    if (g->longest > 0) {
        fit_longest(h, w, g->longest, &h, &w);
        if ((st = mxl_image_resize(cur, (int32_t)w, (int32_t)h, rsm, &first, err))) goto done;
        cur = &first;
    }
    if (g->split) {
        fit_tiles(h, w, S, &h, &w);
        if ((st = mxl_image_resize(cur, (int32_t)w, (int32_t)h, rsm, &sized, err))) goto done;
        cur = &sized;
        if (h > S || w > S) rows = h / S, cols = w / S;
    }
    const int64_t nt = rows * cols + 1;
    out->n_pixels = (size_t)(nt * 3 * S * S);
    out->pixels = mxl_malloc(out->n_pixels * sizeof(float));
    out->n_tokens = nt * g->tpt;
    out->grid[0] = nt, out->grid[1] = rows, out->grid[2] = cols;
    if (!out->pixels) {
        st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < rows * cols; i++)
        mxl_image_crop_to_pixels(cur, (int32_t)(i % cols * S), (int32_t)(i / cols * S), (int32_t)S, (int32_t)S, rs, mean, std,
                                 out->pixels + i * 3 * S * S);
    /* the global tile: the (split-sized) image resized to S x S (unchanged when it is S x S) */
    if ((st = mxl_image_resize(cur, (int32_t)S, (int32_t)S, rsm, &glob, err))) goto done;
    mxl_image_to_pixels(&glob, rs, mean, std, out->pixels + (nt - 1) * 3 * S * S);
    bool ok = true;
    for (int64_t r = 0; r < rows && ok; r++) {
        for (int64_t c = 0; c < cols && ok; c++) {
            char head[64];
            snprintf(head, sizeof head, "<row_%lld_col_%lld>", (long long)(r + 1), (long long)(c + 1));
            ok = mxl_strbuf_puts(&sb, g->fake_tok) && mxl_strbuf_puts(&sb, head) && put_run(&sb, g);
        }
        ok = ok && mxl_strbuf_puts(&sb, "\n");
    }
    if (rows) ok = ok && mxl_strbuf_puts(&sb, "\n");
    ok = ok && mxl_strbuf_puts(&sb, g->fake_tok) && mxl_strbuf_puts(&sb, g->global_tok) && put_run(&sb, g) && mxl_strbuf_puts(&sb, g->fake_tok);
    if (!ok) {
        st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        goto done;
    }
    out->text = sb.p, out->text_len = sb.n;
    sb.p = NULL;
done:
    mxl_strbuf_free(&sb);
    mxl_image_free(&first);
    mxl_image_free(&sized);
    mxl_image_free(&glob);
    if (st) mxl_vlm_input_free(out);
    return st;
}

/* A size dict's longest_edge (absent: *out unchanged). */
static mxl_status longest_edge(const mxl_checkpoint *ck, const json_t *j, const char *key, int64_t *out, mxl_error *err) {
    const json_t *o = json_object_get(j, key);
    if (!o || json_is_null(o)) return MXL_OK;
    if (!json_is_object(o) || mxl_json_int(json_object_get(o, "longest_edge"), 1, 1 << 14, out))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: the image processor's %s must be {\"longest_edge\": N} (1..16384)", ck->dir, key);
    return MXL_OK;
}

/* processor_config.json (image_seq_len, its "image_processor"), preprocessor_config.json over it,
 * tokenizer_config.json's token strings. */
static mxl_status read_processor(const mxl_checkpoint *ck, idefics3_vlm *g, mxl_error *err) {
    mxl_vlm_preproc *p = &g->base.pre;
    const int64_t S = g->tower.image_size;
    /* Idefics3ImageProcessor's (and SmolVLMImageProcessor's) defaults */
    *p = (mxl_vlm_preproc){S, S, 1, true, true, true, 1.0 / 255.0, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
    g->split = true, g->longest = 4 * S;
    json_t *proc = NULL, *j = NULL, *tc = NULL;
    mxl_status st;
    if ((st = mxl_vlm_processor_files(ck, &j, &proc, err)) || (st = mxl_vlm_check_seq_len(ck, proc, "image_seq_len", g->tpt, err)) ||
        (st = mxl_vlm_tokenizer_config(ck, &tc, err)))
        goto out;
    mxl_vlm_str_key(tc, "fake_image_token", g->fake_tok, sizeof g->fake_tok);
    mxl_vlm_str_key(tc, "image_token", g->image_tok, sizeof g->image_tok);
    mxl_vlm_str_key(tc, "global_image_token", g->global_tok, sizeof g->global_tok);
    if (!j) goto out;
    int64_t tile = S, rsm = p->resample;
    if ((st = longest_edge(ck, j, "size", &g->longest, err)) || (st = longest_edge(ck, j, "max_image_size", &tile, err))) goto out;
    if (tile != S) {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: the image processor's tiles (max_image_size %lld) are not the vision tower's image_size %lld", ck->dir,
                           (long long)tile, (long long)S);
        goto out;
    }
    if (json_object_get(j, "resample") && mxl_json_int(json_object_get(j, "resample"), 0, 3, &rsm)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the image processor's resample must be NEAREST / LANCZOS / BILINEAR / BICUBIC (0-3)", ck->dir);
        goto out;
    }
    p->resample = (int)rsm;
    mxl_vlm_preproc_json(j, p, NULL);
    if (!p->do_resize) g->longest = 0;
    const json_t *b = json_object_get(j, "do_image_splitting");
    if (json_is_boolean(b)) g->split = json_is_true(b);
    if (p->std[0] == 0 || p->std[1] == 0 || p->std[2] == 0 || !(p->rescale > 0))
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: non-zero image_std and a positive rescale_factor are expected", ck->dir);
out:
    json_decref(j);
    json_decref(proc);
    json_decref(tc);
    return st;
}

/* vision_config with Idefics3VisionConfig's defaults for the sizes it leaves out (transformers
 * writes only what differs from them). */
static json_t *vision_config_with_defaults(const json_t *vc) {
    json_t *c = json_deep_copy(vc);
    static const struct {
        const char *key;
        json_int_t v;
    } k_dflt[] = {{"hidden_size", 1152}, {"intermediate_size", 3072}, {"num_hidden_layers", 12}, {"num_attention_heads", 16},
                  {"image_size", 224}, {"patch_size", 32}};
    for (size_t i = 0; c && i < sizeof k_dflt / sizeof k_dflt[0]; i++)
        if (!json_object_get(c, k_dflt[i].key)) json_object_set_new(c, k_dflt[i].key, json_integer(k_dflt[i].v));
    return c;
}

/* A fresh vlm with the processor's token strings and the callbacks. */
static idefics3_vlm *new_vlm(const char *family) {
    idefics3_vlm *g = mxl_calloc(1, sizeof *g);
    if (!g) return NULL;
    mxl_arena_init(&g->arena, 4096);
    g->be = mxl_backend_host();
    snprintf(g->fake_tok, sizeof g->fake_tok, "<fake_token_around_image>");
    snprintf(g->image_tok, sizeof g->image_tok, "<image>");
    snprintf(g->global_tok, sizeof g->global_tok, "<global-img>");
    mxl_vlm *v = &g->base;
    v->family = family;
    v->encode = idefics3_encode;
    v->prepare = idefics3_prepare;
    v->destroy = idefics3_destroy;
    v->causal_images = true;
    v->before = v->after = "";
    v->image_text = v->marker = g->image_tok; /* the chat template writes <image>, which the processor expands */
    return g;
}

/* After the tower: the scale factor d's checks and the tokens per tile. */
static mxl_status set_scale(idefics3_vlm *g, const char *path, mxl_error *err) {
    g->side = g->tower.side;
    if (g->d < 1 || g->side % g->d)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: scale_factor %lld does not divide the vision tower's %lld patches per side", path, (long long)g->d,
                             (long long)g->side);
    g->tpt = (g->side / g->d) * (g->side / g->d);
    g->base.tokens_per_image = g->tpt;
    return MXL_OK;
}

/* The projection [Ht, d*d*Hv] under b's name, prepared for the GEMM. */
static mxl_status bind_proj(idefics3_vlm *g, const mxl_enc_binder *b, const char *name, mxl_error *err) {
    if (mxl_enc_matrix(b, g->base.text_hidden, g->d * g->d * g->tower.stack.hidden, &g->proj, "%s", name)) return err ? err->status : MXL_ERR_FORMAT;
    return g->be->ops->weight_prepare(g->be, &g->proj, MXL_WEIGHT_USE_GEMM, &g->arena, err);
}

mxl_status mxl_vlm_idefics3_load_mmproj(const mxl_checkpoint *ck, mxl_checkpoint *mm, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    idefics3_vlm *g = new_vlm("idefics3");
    if (!g) {
        mxl_checkpoint_close(mm);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    mxl_vlm *v = &g->base;
    g->mm = mm;
    v->text_hidden = ck->config.hidden_size;
    mxl_status st = mxl_siglip_vision_load_gguf(mm, &g->tower, err);
    uint64_t u = 2;
    if (!st && mxl_gguf_find(mm->gguf, "clip.vision.projector.scale_factor")) st = mxl_gguf_get_u64(mm->gguf, "clip.vision.projector.scale_factor", &u, err);
    g->d = (int64_t)(u < 64 ? u : 0);
    if (!st) st = set_scale(g, mm->path, err);
    const int64_t S = g->tower.image_size;
    u = (uint64_t)(4 * S);
    if (!st && mxl_gguf_find(mm->gguf, "clip.vision.preproc_image_size")) st = mxl_gguf_get_u64(mm->gguf, "clip.vision.preproc_image_size", &u, err);
    if (st) goto fail;
    if (u < 1 || u > (1u << 14)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: clip.vision.preproc_image_size %llu is out of range", mm->path, (unsigned long long)u);
        goto fail;
    }
    g->longest = (int64_t)u, g->split = true;
    v->pre = (mxl_vlm_preproc){S, S, 1, true, true, true, 1.0 / 255.0, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
    mxl_vlm_gguf_mean_std(mm, &v->pre);
    const int64_t img = mxl_vlm_gguf_token_id(ck, g->image_tok);
    if (img < 0 || mxl_vlm_gguf_token_id(ck, g->fake_tok) < 0) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the vocabulary has no '%s' / '%s' tokens for images", ck->path, g->image_tok, g->fake_tok);
        goto fail;
    }
    v->image_token = (int32_t)img;
    mxl_enc_binder b = {mm, &g->arena, "", err};
    if ((st = bind_proj(g, &b, "mm.model.fc.weight", err))) goto fail;
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    idefics3_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}

mxl_status mxl_vlm_idefics3_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    idefics3_vlm *g = new_vlm(strcmp(ck->config.model_type, "smolvlm") == 0 ? "smolvlm" : "idefics3");
    if (!g) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_vlm *v = &g->base;
    json_t *raw = ck->config.raw, *vc = vision_config_with_defaults(json_object_get(raw, "vision_config"));
    mxl_status st;
    if (!vc) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config must be an object", ck->dir);
        goto fail;
    }
    st = mxl_siglip_vision_load(ck, vc, &g->tower, err);
    json_decref(vc);
    if (st) goto fail;
    char cfg_path[4200];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", ck->dir);
    if ((st = mxl_enc_cfg_int(ck, "scale_factor", 2, &g->d, err)) || (st = set_scale(g, cfg_path, err))) goto fail;
    v->text_hidden = ck->config.hidden_size;
    if ((st = mxl_vlm_image_token(ck, 128257, &v->image_token, err))) goto fail;
    if ((st = read_processor(ck, g, err))) goto fail;
    static const char *const k_prefixes[] = {"model.connector.", "connector.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "modality_projection.proj.weight");
    if (!prefix) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'model.connector.modality_projection.proj.weight' is missing", ck->path);
        goto fail;
    }
    mxl_enc_binder b = {ck, &g->arena, prefix, err};
    if ((st = bind_proj(g, &b, "modality_projection.proj.weight", err))) goto fail;
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    idefics3_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}
