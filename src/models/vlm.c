/* vlm.c - picks a checkpoint's vision side by model_type and expands image markers in prompts
 * (see vlm.h). */
#include "models/vlm.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "image/image.h"
#include "image/resize.h"
#include "io/json_read.h"
#include "io/safetensors.h"

/* True when the weights hold a vision tower under one of the usual prefixes. */
static bool has_tower(const mxl_checkpoint *ck) {
    if (!ck->st) return false;
    static const char *const k_probe[] = {"vision_tower.vision_model.embeddings.patch_embedding.weight",
                                          "vision_tower.embeddings.patch_embedding.weight",
                                          "model.vision_tower.vision_model.embeddings.patch_embedding.weight",
                                          "model.vision_tower.embeddings.patch_embedding.weight",
                                          "model.vision_model.embeddings.patch_embedding.weight", /* (Idefics3, SmolVLM) */
                                          "vision_tower.embeddings.cls_token", "model.vision_tower.embeddings.cls_token", /* (InternVL) */
                                          "visual.patch_embed.proj.weight", "model.visual.patch_embed.proj.weight",
                                          "vision_tower.patch_embed.proj.weight", /* (mlx-vlm's Qwen-VL) */
                                          "vision_tower.patch_conv.weight", /* (Pixtral) */
                                          "model.vision_tower.patch_conv.weight", NULL};
    for (int i = 0; k_probe[i]; i++)
        if (mxl_st_model_find(ck->st, k_probe[i])) return true;
    return false;
}

/* The mmproj GGUF beside a GGUF text model (llama.cpp's, LM Studio's and ollama's layout: a file
 * named mmproj*.gguf in the same directory), opened as a checkpoint; *out NULL when there is none. */
static mxl_status open_mmproj(const mxl_checkpoint *ck, mxl_checkpoint **out, mxl_error *err) {
    *out = NULL;
    char dir[4096], found[4096 + 256] = "";
    snprintf(dir, sizeof dir, "%s", ck->path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    DIR *d = opendir(dir);
    if (!d) return MXL_OK;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (strncasecmp(e->d_name, "mmproj", 6) == 0 && l > 5 && strcasecmp(e->d_name + l - 5, ".gguf") == 0) {
            if (!n++) snprintf(found, sizeof found, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    if (n == 0) return MXL_OK;
    if (n > 1) return mxl_error_set(err, MXL_ERR_ARG, "%s: %d mmproj*.gguf files beside the model; keep the one that belongs to it", dir, n);
    mxl_checkpoint *mm = mxl_calloc(1, sizeof *mm);
    if (!mm) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mm->format = MXL_CHECKPOINT_GGUF;
    if (strlen(found) >= sizeof mm->path) {
        mxl_free(mm);
        return mxl_error_set(err, MXL_ERR_ARG, "%s: path too long", found);
    }
    memcpy(mm->path, found, strlen(found) + 1);
    snprintf(mm->dir, sizeof mm->dir, "%s", dir);
    mxl_status st = mxl_gguf_open(found, &mm->gguf, err);
    mxl_gguf_str arch = {0};
    if (!st && (st = mxl_gguf_get_str(mm->gguf, "general.architecture", &arch, err)) == MXL_OK && (arch.len != 4 || memcmp(arch.data, "clip", 4)))
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: general.architecture is '%.*s', not an mmproj ('clip')", found, (int)arch.len, arch.data);
    if (st) {
        mxl_checkpoint_close(mm);
        return st;
    }
    *out = mm;
    return MXL_OK;
}

/* A GGUF text model's vision side from its mmproj file, by the projector type. */
static mxl_status load_mmproj(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) {
    mxl_checkpoint *mm = NULL;
    mxl_status st = open_mmproj(ck, &mm, err);
    if (st || !mm) return st;
    mxl_gguf_str pt = {0};
    if (mxl_gguf_get_str(mm->gguf, "clip.projector_type", &pt, NULL) && mxl_gguf_get_str(mm->gguf, "clip.vision.projector_type", &pt, NULL)) {
        mxl_checkpoint_close(mm);
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: no clip.projector_type", ck->path);
    }
    if (pt.len == 6 && memcmp(pt.data, "gemma3", 6) == 0) return mxl_vlm_gemma3_load_mmproj(ck, mm, out, err);
    if (pt.len == 8 && memcmp(pt.data, "idefics3", 8) == 0) return mxl_vlm_idefics3_load_mmproj(ck, mm, out, err);
    if (pt.len == 7 && memcmp(pt.data, "pixtral", 7) == 0) return mxl_vlm_pixtral_load_mmproj(ck, mm, out, err);
    if ((pt.len == 14 && (memcmp(pt.data, "qwen2vl_merger", 14) == 0 || memcmp(pt.data, "qwen3vl_merger", 14) == 0)) ||
        (pt.len == 16 && memcmp(pt.data, "qwen2.5vl_merger", 16) == 0) || (pt.len == 5 && memcmp(pt.data, "glm4v", 5) == 0))
        return mxl_vlm_qwen2vl_load_mmproj(ck, mm, out, err);
    st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: the vision tower of projector type '%.*s' does not run in mlxcel yet", mm->path, (int)pt.len, pt.data);
    mxl_checkpoint_close(mm);
    return st;
}

mxl_status mxl_vlm_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    const mxl_model_config *c = &ck->config;
    if (ck->format == MXL_CHECKPOINT_GGUF) return load_mmproj(ck, out, err);
    if (ck->format != MXL_CHECKPOINT_SAFETENSORS || !c->has_vision_config || c->language_model_only == 1 || !has_tower(ck)) return MXL_OK;
    if (strcmp(c->model_type, "gemma3") == 0) return mxl_vlm_gemma3_load(ck, out, err);
    if (strcmp(c->model_type, "llava") == 0) return mxl_vlm_llava_load(ck, out, err);
    if (strcmp(c->model_type, "paligemma") == 0) return mxl_vlm_paligemma_load(ck, out, err);
    if (strcmp(c->model_type, "qwen2_vl") == 0 || strcmp(c->model_type, "qwen2_5_vl") == 0 || strcmp(c->model_type, "qwen3_vl") == 0 ||
        strcmp(c->model_type, "qwen3_vl_moe") == 0 || strcmp(c->model_type, "glm4v") == 0 || strcmp(c->model_type, "glm4v_moe") == 0)
        return mxl_vlm_qwen2vl_load(ck, out, err);
    if (strcmp(c->model_type, "mistral3") == 0) return mxl_vlm_mistral3_load(ck, out, err);
    if (strcmp(c->model_type, "llava_next") == 0) return mxl_vlm_llava_next_load(ck, out, err);
    if (strcmp(c->model_type, "aya_vision") == 0) return mxl_vlm_aya_vision_load(ck, out, err);
    if (strcmp(c->model_type, "internvl") == 0) return mxl_vlm_internvl_load(ck, out, err);
    if (strcmp(c->model_type, "idefics2") == 0) return mxl_vlm_idefics2_load(ck, out, err);
    if (strcmp(c->model_type, "idefics3") == 0 || strcmp(c->model_type, "smolvlm") == 0) return mxl_vlm_idefics3_load(ck, out, err);
    return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: the vision tower of model_type '%s' does not run in mlxcel yet", ck->path, c->model_type);
}

void mxl_vlm_free(mxl_vlm *v) {
    if (v && v->destroy) v->destroy(v);
}

mxl_vlm_preproc mxl_vlm_preproc_clip_bicubic(void) {
    return (mxl_vlm_preproc){0, 0, 3, true, true, true, 1.0 / 255.0, {0.48145466f, 0.4578275f, 0.40821073f}, {0.26862954f, 0.26130258f, 0.27577711f}};
}

void mxl_vlm_preproc_json(const json_t *j, mxl_vlm_preproc *p, double mean_d[3]) {
    double d;
    if (mxl_json_number(json_object_get(j, "rescale_factor"), &d)) p->rescale = d;
    const json_t *mean = json_object_get(j, "image_mean"), *std = json_object_get(j, "image_std");
    for (int c = 0; c < 3; c++) {
        if (json_is_array(mean) && json_array_size(mean) == 3 && mxl_json_number(json_array_get(mean, (size_t)c), &d)) {
            p->mean[c] = (float)d;
            if (mean_d) mean_d[c] = d;
        }
        if (json_is_array(std) && json_array_size(std) == 3 && mxl_json_number(json_array_get(std, (size_t)c), &d)) p->std[c] = (float)d;
    }
    const json_t *b;
    if ((b = json_object_get(j, "do_resize")) && json_is_boolean(b)) p->do_resize = json_is_true(b);
    if ((b = json_object_get(j, "do_rescale")) && json_is_boolean(b)) p->do_rescale = json_is_true(b);
    if ((b = json_object_get(j, "do_normalize")) && json_is_boolean(b)) p->do_normalize = json_is_true(b);
}

mxl_status mxl_vlm_read_preproc(const mxl_checkpoint *ck, mxl_vlm_preproc *p, int64_t *seq, mxl_error *err) {
    int64_t seq_dummy;
    if (!seq) seq = &seq_dummy;
    *seq = -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/preprocessor_config.json", ck->dir);
    FILE *f = fopen(path, "rb");
    if (!f) return MXL_OK;
    fclose(f);
    json_t *j = NULL;
    mxl_status st = mxl_json_load_file_py(path, 1 << 20, &j, err);
    if (st) return st;
    const json_t *size = json_object_get(j, "size");
    int64_t h = p->height, w = p->width, rs = p->resample;
    bool bad = false;
    if (json_is_object(size)) {
        const json_t *jh = json_object_get(size, "height"), *jw = json_object_get(size, "width");
        bad |= (jh && mxl_json_int(jh, 1, 1 << 14, &h)) || (jw && mxl_json_int(jw, 1, 1 << 14, &w));
    }
    if (json_object_get(j, "resample")) bad |= mxl_json_int(json_object_get(j, "resample"), 0, 5, &rs) != 0;
    if (json_object_get(j, "image_seq_length")) bad |= mxl_json_int(json_object_get(j, "image_seq_length"), 1, 1 << 20, seq) != 0;
    mxl_vlm_preproc_json(j, p, NULL);
    json_decref(j);
    if (bad) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: size, resample and image_seq_length must be positive integers", path);
    if (p->std[0] == 0 || p->std[1] == 0 || p->std[2] == 0 || !(p->rescale > 0))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: non-zero image_std and a positive rescale_factor are expected", path);
    p->height = h, p->width = w, p->resample = (int)rs;
    return MXL_OK;
}

mxl_status mxl_vlm_pixels(const mxl_vlm *v, const mxl_image *im, float **pixels, mxl_error *err) {
    *pixels = NULL;
    const mxl_vlm_preproc *p = &v->pre;
    mxl_image sized = {0, 0, NULL};
    const mxl_image *src = im;
    if (p->do_resize && (im->w != p->width || im->h != p->height)) {
        mxl_status st = mxl_image_resize(im, (int32_t)p->width, (int32_t)p->height, (mxl_resample)p->resample, &sized, err);
        if (st) return st;
        src = &sized;
    }
    if (src->w != p->width || src->h != p->height) {
        mxl_image_free(&sized);
        return mxl_error_set(err, MXL_ERR_ARG, "the image is %dx%d; this model's processor takes %lldx%lld without resizing", src->w, src->h,
                             (long long)p->width, (long long)p->height);
    }
    double rs;
    const float *mean, *std;
    mxl_vlm_norm_params(p, &rs, &mean, &std);
    float *px = mxl_malloc((size_t)(3 * p->width * p->height) * sizeof(float));
    if (!px) {
        mxl_image_free(&sized);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    mxl_image_to_pixels(src, rs, mean, std, px);
    mxl_image_free(&sized);
    *pixels = px;
    return MXL_OK;
}

void mxl_vlm_input_free(mxl_vlm_input *in) {
    mxl_free(in->pixels);
    mxl_free(in->text);
    memset(in, 0, sizeof *in);
}

/* before + n x image_text + after */
static char *placeholder_text(const mxl_vlm *v, int64_t n, size_t *len) {
    mxl_strbuf sb = {0};
    bool ok = mxl_strbuf_puts(&sb, v->before);
    for (int64_t t = 0; t < n && ok; t++) ok = mxl_strbuf_puts(&sb, v->image_text);
    ok = ok && mxl_strbuf_puts(&sb, v->after);
    if (!ok) {
        mxl_strbuf_free(&sb);
        return NULL;
    }
    *len = sb.n;
    return sb.p;
}

mxl_status mxl_vlm_prepare(const mxl_vlm *v, const mxl_image *im, mxl_vlm_input *out, mxl_error *err) {
    memset(out, 0, sizeof *out);
    if (v->prepare) return v->prepare(v, im, out, err);
    mxl_status st = mxl_vlm_pixels(v, im, &out->pixels, err);
    if (st) return st;
    out->n_pixels = (size_t)(3 * v->pre.width * v->pre.height);
    out->n_tokens = v->tokens_per_image;
    out->text = placeholder_text(v, out->n_tokens, &out->text_len);
    if (!out->text) {
        mxl_vlm_input_free(out);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    return MXL_OK;
}

mxl_status mxl_vlm_json_if(const char *path, json_t **out, mxl_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return MXL_OK;
    fclose(f);
    return mxl_json_load_file_py(path, 1 << 20, out, err);
}

void mxl_vlm_str_key(const json_t *o, const char *key, char *dst, size_t cap) {
    const json_t *t = json_object_get(o, key);
    if (json_is_string(t) && json_string_length(t) > 0 && json_string_length(t) < cap) snprintf(dst, cap, "%s", json_string_value(t));
}

mxl_status mxl_vlm_processor_files(const mxl_checkpoint *ck, json_t **image_processor, json_t **proc, mxl_error *err) {
    char path[4200];
    json_t *pc = NULL, *pre = NULL;
    *image_processor = NULL;
    if (proc) *proc = NULL;
    snprintf(path, sizeof path, "%s/processor_config.json", ck->dir);
    mxl_status st = mxl_vlm_json_if(path, &pc, err);
    if (!st) {
        snprintf(path, sizeof path, "%s/preprocessor_config.json", ck->dir);
        st = mxl_vlm_json_if(path, &pre, err);
    }
    if (st) {
        json_decref(pc);
        return st;
    }
    json_t *ip = json_object_get(pc, "image_processor");
    *image_processor = pre ? pre : json_is_object(ip) ? json_incref(ip) : NULL;
    if (proc) *proc = pc;
    else json_decref(pc);
    return MXL_OK;
}

mxl_status mxl_vlm_check_seq_len(const mxl_checkpoint *ck, const json_t *proc, const char *key, int64_t want, mxl_error *err) {
    int64_t seq;
    const json_t *js = json_object_get(proc, key);
    if (js && (mxl_json_int(js, 1, 1 << 20, &seq) || seq != want))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the processor's %s is not the %lld tokens per image (or tile) the model gives", ck->dir, key, (long long)want);
    return MXL_OK;
}

mxl_status mxl_vlm_tokenizer_config(const mxl_checkpoint *ck, json_t **out, mxl_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", ck->dir);
    return mxl_vlm_json_if(path, out, err);
}

mxl_status mxl_vlm_image_token(const mxl_checkpoint *ck, int64_t dflt, int32_t *out, mxl_error *err) {
    const json_t *raw = ck->config.raw, *it = json_object_get(raw, "image_token_index");
    if (!it || json_is_null(it)) it = json_object_get(raw, "image_token_id");
    int64_t v = dflt;
    if (it && !json_is_null(it) && mxl_json_int(it, 0, INT32_MAX, &v))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: image_token_index / image_token_id must be a token id", ck->dir);
    *out = (int32_t)v;
    return MXL_OK;
}

void mxl_vlm_norm_params(const mxl_vlm_preproc *p, double *rescale, const float **mean, const float **std) {
    static const float zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    *rescale = p->do_rescale ? p->rescale : 1.0;
    *mean = p->do_normalize ? p->mean : zero;
    *std = p->do_normalize ? p->std : one;
}

int64_t mxl_vlm_gguf_token_id(const mxl_checkpoint *ck, const char *text) {
    const mxl_gguf_array *toks = NULL;
    if (mxl_gguf_get_array(ck->gguf, "tokenizer.ggml.tokens", &toks, NULL) || !toks || toks->elem_type != MXL_GGUF_TYPE_STRING) return -1;
    const size_t n = strlen(text);
    for (uint64_t i = 0; i < toks->n; i++)
        if (toks->strs[i].len == n && memcmp(toks->strs[i].data, text, n) == 0) return (int64_t)i;
    return -1;
}

void mxl_vlm_gguf_mean_std(const mxl_checkpoint *mm, mxl_vlm_preproc *p) {
    const mxl_gguf_array *mean = NULL, *std = NULL;
    if (!mxl_gguf_find(mm->gguf, "clip.vision.image_mean") || mxl_gguf_get_array(mm->gguf, "clip.vision.image_mean", &mean, NULL) ||
        mxl_gguf_get_array(mm->gguf, "clip.vision.image_std", &std, NULL) || mean->n != 3 || std->n != 3)
        return;
    for (uint64_t c = 0; c < 3; c++) {
        mxl_gguf_value a, d;
        double x, y;
        if (mxl_gguf_array_get(mean, c, &a) && mxl_gguf_value_as_f64(&a, &x) && mxl_gguf_array_get(std, c, &d) && mxl_gguf_value_as_f64(&d, &y) && y != 0)
            p->mean[c] = (float)x, p->std[c] = (float)y;
    }
}

size_t mxl_vlm_rows_floats(const mxl_vlm *v, const mxl_vlm_input *in) { return (size_t)((1 + v->n_deep) * in->n_tokens * v->text_hidden); }

void mxl_vlm_point_block(const mxl_vlm *v, const mxl_vlm_input *in, const float *rows, int64_t off, mxl_decoder_media *b) {
    b->emb = rows + off * v->text_hidden;
    if (v->n_deep) b->deep = rows + (in->n_tokens + off) * v->text_hidden, b->n_deep = v->n_deep, b->deep_stride = in->n_tokens;
}

mxl_status mxl_vlm_expand_prompt(const mxl_vlm *v, const char *text, size_t len, const mxl_vlm_input *inputs, int n_images,
                                 char **out, size_t *out_len, mxl_error *err) {
    *out = NULL;
    *out_len = 0;
    const size_t ml = strlen(v->marker);
    int found = 0;
    mxl_strbuf sb = {0};
    size_t i = 0;
    bool ok = mxl_strbuf_reserve(&sb, len);
    while (i < len && ok) {
        const char *hit = ml ? memmem(text + i, len - i, v->marker, ml) : NULL;
        size_t upto = hit ? (size_t)(hit - text) : len;
        ok = mxl_strbuf_append(&sb, text + i, upto - i);
        if (!hit) break;
        if (found < n_images) ok = ok && mxl_strbuf_append(&sb, inputs[found].text, inputs[found].text_len);
        found++;
        i = upto + ml;
    }
    if (!ok) {
        mxl_strbuf_free(&sb);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    if (found != n_images) {
        mxl_strbuf_free(&sb);
        return mxl_error_set(err, MXL_ERR_ARG, "the prompt has %d image markers (%s) for %d images", found, v->marker, n_images);
    }
    *out_len = sb.n;
    *out = sb.p;
    mxl_status st = v->finish_prompt ? v->finish_prompt(v, out, out_len, err) : MXL_OK;
    if (st) mxl_free(*out), *out = NULL, *out_len = 0;
    return st;
}

/* The image blocks [0, *n_blocks) with the text rows around them as blocks of their own (img -1),
 * all joined: one bidirectional block over rows [0, n). */
static mxl_status prefix_blocks(int64_t n, mxl_decoder_media *blocks, int *img, int64_t *off, int max_blocks, int *n_blocks,
                                mxl_error *err) {
    mxl_decoder_media b[MXL_DECODER_MAX_MEDIA];
    int bi[MXL_DECODER_MAX_MEDIA];
    int64_t bo[MXL_DECODER_MAX_MEDIA];
    int k = 0;
    int64_t row = 0;
    for (int i = 0; i <= *n_blocks; i++) {
        const int64_t next = i < *n_blocks ? blocks[i].row : n;
        for (int part = 0; part < 2; part++) {
            const bool text = part == 0;
            if (text ? next == row : i == *n_blocks) continue;
            if (k >= max_blocks || k >= MXL_DECODER_MAX_MEDIA)
                return mxl_error_set(err, MXL_ERR_ARG, "the prompt's images and text make more than %d blocks", max_blocks);
            b[k] = text ? (mxl_decoder_media){.row = row, .n = next - row, .joined = true} : blocks[i];
            b[k].causal = false, b[k].joined = true;
            bi[k] = text ? -1 : img[i];
            bo[k] = text ? 0 : off[i];
            row = b[k].row + b[k].n;
            k++;
        }
    }
    b[k - 1].joined = false;
    memcpy(blocks, b, (size_t)k * sizeof *b);
    memcpy(img, bi, (size_t)k * sizeof *bi);
    memcpy(off, bo, (size_t)k * sizeof *bo);
    *n_blocks = k;
    return MXL_OK;
}

mxl_status mxl_vlm_media_blocks(const mxl_vlm *v, const int32_t *ids, size_t n, const mxl_vlm_input *inputs, int n_images,
                                mxl_decoder_media *blocks, int *img, int64_t *off, int max_blocks, int *n_blocks, mxl_error *err) {
    int k = 0, cur = 0;
    int64_t used = 0; /* rows of image cur already placed */
    for (size_t i = 0; i < n; i++) {
        if (ids[i] != v->image_token) continue;
        while (cur < n_images && used == inputs[cur].n_tokens) cur++, used = 0;
        if (cur >= n_images)
            return mxl_error_set(err, MXL_ERR_ARG, "the prompt holds more image placeholder tokens than its %d images take", n_images);
        /* a block: the run from i, within the current image */
        size_t e = i;
        while (e < n && ids[e] == v->image_token && (int64_t)(e - i) < inputs[cur].n_tokens - used) e++;
        if (k >= max_blocks) return mxl_error_set(err, MXL_ERR_ARG, "the prompt's images make more than %d runs of placeholders", max_blocks);
        blocks[k] = (mxl_decoder_media){.row = (int64_t)i, .n = (int64_t)(e - i), .causal = v->causal_images};
        if (v->mrope_grid) { /* the whole image in one run: its token grid places its rows (decoder.h) */
            if (used || (int64_t)(e - i) != inputs[cur].n_tokens)
                return mxl_error_set(err, MXL_ERR_ARG, "image %d's %lld placeholder tokens are not one run in the prompt", cur, (long long)inputs[cur].n_tokens);
            blocks[k].grid_h = inputs[cur].grid[1], blocks[k].grid_w = inputs[cur].grid[2];
        }
        img[k] = cur;
        off[k] = used;
        k++;
        used += (int64_t)(e - i);
        i = e - 1;
    }
    while (cur < n_images && used == inputs[cur].n_tokens) cur++, used = 0;
    if (cur != n_images)
        return mxl_error_set(err, MXL_ERR_ARG, "the prompt's image placeholder tokens do not match its %d images", n_images);
    *n_blocks = k;
    return v->prefix_lm && n > 0 ? prefix_blocks((int64_t)n, blocks, img, off, max_blocks, n_blocks, err) : MXL_OK;
}
