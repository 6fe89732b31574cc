/* vlm_paligemma.c - PaliGemma's vision side (transformers modeling_paligemma.py /
 * processing_paligemma.py, PaliGemma 1 and 2): the SigLIP tower (vision_siglip.h) over a square
 * image, then PaliGemmaMultiModalProjector, one linear layer with bias:
 *   grid  [n_patches, Hv]   the tower's output (post_layernorm), patch (py, px) at row py * side + px
 *   out   [n_patches, Ht] = grid Wl^T + bl   (multi_modal_projector.linear [projection_dim, Hv])
 * taken as the rows' input as they are (transformers 5 no longer divides them by sqrt(hidden):
 * Gemma's embedding scale lives in its embedding layer, which the image rows bypass).
 * The processor (PaliGemmaProcessor over SiglipImageProcessor, PIL backend) resizes to size
 * (224 / 448 / 896 as released) with PIL's bicubic filter, rescales by 1/255 and normalises with
 * mean = std = 0.5 (preprocessor_config.json overrides); it writes the prompt itself, with no chat
 * template: "<image>" per image + BOS + text + "\n" (with "<image>" already in the text: BOS after
 * the last one, "\n" at the end), each "<image>" then image_seq_length = n_patches x "<image>".
 * The whole prompt attends bidirectionally (its token_type_ids are 0: the prefix-LM mask), the
 * generated text causally (vlm.h prefix_lm). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strbuf.h"
#include "io/json_read.h"
#include "io/safetensors.h"
#include "models/vision_siglip.h"
#include "models/vlm.h"

typedef struct paligemma_vlm {
    mxl_vlm base;
    mxl_siglip_vision tower;
    mxl_arena arena;
    mxl_weight proj;      /* [Ht, Hv] */
    const float *proj_b;  /* [Ht] */
    const mxl_backend *be;
} paligemma_vlm;

static void paligemma_destroy(mxl_vlm *v) {
    paligemma_vlm *g = (paligemma_vlm *)v;
    mxl_siglip_vision_free(&g->tower);
    mxl_arena_free(&g->arena);
    mxl_free(g);
}

static mxl_status paligemma_encode(const mxl_vlm *v, const mxl_vlm_input *in, mxl_threadpool *pool, float *out, mxl_error *err) {
    const paligemma_vlm *g = (const paligemma_vlm *)v;
    const int64_t n = g->tower.n_patches, Hv = g->tower.stack.hidden;
    if (in->n_tokens != n || in->n_pixels != (size_t)(3 * g->tower.image_size * g->tower.image_size))
        return mxl_error_set(err, MXL_ERR_ARG, "a PaliGemma image is %lld rows of %lldx%lld pixels", (long long)n,
                             (long long)g->tower.image_size, (long long)g->tower.image_size);
    float *grid = mxl_aligned_alloc(64, ((size_t)(n * Hv) * sizeof(float) + 63) / 64 * 64);
    size_t mm = mxl_enc_linear_scratch_bytes(g->be, &g->proj, n, pool ? mxl_threadpool_size(pool) : 1);
    void *scratch = mm ? mxl_aligned_alloc(64, (mm + 63) / 64 * 64) : NULL;
    mxl_status st = grid && (!mm || scratch) ? mxl_siglip_vision_forward(&g->tower, in->pixels, pool, grid, err)
                                             : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    if (st == MXL_OK) mxl_enc_linear_act(g->be, &g->proj, g->proj_b, MXL_GEMM_ACT_NONE, grid, n, out, scratch, pool);
    mxl_aligned_free(grid);
    mxl_aligned_free(scratch);
    return st;
}

/* PaliGemmaProcessor's prompt (prepare_inputs_layout): without "<image>" in the text,
 * "<image>" x n_images + BOS + text + "\n"; with it, BOS after the last "<image>" and "\n" at the
 * end. */
static mxl_status paligemma_prompt(const mxl_vlm *v, const char *text, size_t len, int n_images, const char *bos, size_t bos_len,
                                   char **out, size_t *out_len, mxl_error *err) {
    *out = NULL;
    *out_len = 0;
    const char *mk = v->marker;
    const size_t ml = strlen(mk);
    size_t split = 0; /* the text before it keeps its markers; BOS goes there */
    bool has = false;
    for (const char *h = text; (h = ml ? memmem(h, len - (size_t)(h - text), mk, ml) : NULL) != NULL; h += ml) {
        has = true;
        split = (size_t)(h - text) + ml;
    }
    mxl_strbuf sb = {0};
    bool ok = true;
    for (int i = 0; !has && ok && i < n_images; i++) ok = mxl_strbuf_puts(&sb, mk);
    ok = ok && mxl_strbuf_append(&sb, text, split) && mxl_strbuf_append(&sb, bos, bos_len) &&
         mxl_strbuf_append(&sb, text + split, len - split) && mxl_strbuf_puts(&sb, "\n");
    if (!ok) {
        mxl_strbuf_free(&sb);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    *out = sb.p;
    *out_len = sb.n;
    return MXL_OK;
}


mxl_status mxl_vlm_paligemma_load(const mxl_checkpoint *ck, mxl_vlm **out, mxl_error *err) {
    *out = NULL;
    paligemma_vlm *g = mxl_calloc(1, sizeof *g);
    if (!g) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    mxl_arena_init(&g->arena, 4096);
    g->be = mxl_backend_host();
    mxl_vlm *v = &g->base;
    v->family = "paligemma";
    v->encode = paligemma_encode;
    v->destroy = paligemma_destroy;
    v->prompt = paligemma_prompt;
    v->prefix_lm = true;
    v->marker = "<image>";
    v->image_text = "<image>";
    v->before = "";
    v->after = "";
    json_t *raw = ck->config.raw;
    mxl_status st = mxl_siglip_vision_load(ck, json_object_get(raw, "vision_config"), &g->tower, err);
    int64_t seq = -1;
    if (st || (st = mxl_vlm_image_token(ck, 256000, &v->image_token, err))) goto fail;
    v->tokens_per_image = g->tower.n_patches;
    v->text_hidden = ck->config.hidden_size;
    const int64_t Hv = g->tower.stack.hidden, Ht = v->text_hidden;
    static const char *const k_prefixes[] = {"multi_modal_projector.", "model.multi_modal_projector.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "linear.weight");
    if (!prefix) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'multi_modal_projector.linear.weight' is missing", ck->path);
        goto fail;
    }
    mxl_enc_binder b = {ck, &g->arena, prefix, err};
    if ((st = mxl_enc_matrix(&b, Ht, Hv, &g->proj, "linear.weight")) || (st = mxl_enc_vector(&b, Ht, &g->proj_b, "linear.bias")) ||
        (st = g->be->ops->weight_prepare(g->be, &g->proj, MXL_WEIGHT_USE_GEMM, &g->arena, err)))
        goto fail;
    v->pre = (mxl_vlm_preproc){g->tower.image_size, g->tower.image_size, 3, true, true, true, 1.0 / 255.0, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
    if ((st = mxl_vlm_read_preproc(ck, &v->pre, &seq, err))) goto fail;
    if (v->pre.width != g->tower.image_size || v->pre.height != g->tower.image_size || (seq >= 0 && seq != g->tower.n_patches)) {
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: the preprocessor's %lldx%lld images of %lld tokens differ from the tower's %lldx%lld of %lld",
                           ck->dir, (long long)v->pre.width, (long long)v->pre.height, (long long)seq, (long long)g->tower.image_size,
                           (long long)g->tower.image_size, (long long)g->tower.n_patches);
        goto fail;
    }
    *out = v;
    return MXL_OK;
fail:
    if (err && st && !err->status) err->status = st;
    paligemma_destroy(v);
    return st ? st : MXL_ERR_FORMAT;
}
