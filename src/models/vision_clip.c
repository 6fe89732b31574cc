/* vision_clip.c - the CLIP vision tower's embeddings and LLaVA's layer selection over a ViT layer
 * stack (see vision_clip.h). */
#include "models/vision_clip.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "io/json_read.h"
#include "io/safetensors.h"
#include "models/vision_siglip.h"


mxl_status mxl_clip_vision_load(const mxl_checkpoint *ck, const json_t *vc, mxl_clip_vision *m, mxl_error *err) {
    memset(m, 0, sizeof *m);
    mxl_arena_init(&m->arena, 64 * 1024);
    mxl_siglip_stack *s = &m->stack;
    s->be = mxl_backend_host();
    mxl_status st = mxl_vit_sizes(ck, vc, 32, s, &m->image_size, &m->patch, err); /* (CLIPVisionConfig's patch_size 32) */
    if (st) return st;
    m->side = m->image_size / m->patch;
    m->n_patches = m->side * m->side;
    m->n_pos = m->n_patches + 1;
    const json_t *eps = json_object_get(vc, "layer_norm_eps");
    double e = 1e-5;
    if (eps && !json_is_null(eps) && (!mxl_json_number(eps, &e) || !(e > 0)))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.layer_norm_eps must be a positive number", ck->dir);
    s->eps = (float)e;
    const json_t *act = json_object_get(vc, "hidden_act");
    const char *an = json_is_string(act) ? json_string_value(act) : "quick_gelu";
    if (strcmp(an, "quick_gelu") == 0) s->quick_gelu = true;
    else {
        char what[4200];
        snprintf(what, sizeof what, "%s/config.json: vision_config.hidden_act", ck->dir);
        if (mxl_enc_activation(an, what, &s->act, err)) return err ? err->status : MXL_ERR_UNSUPPORTED;
    }

    static const char *const k_prefixes[] = {"vision_tower.vision_model.", "model.vision_tower.vision_model.", "vision_tower.",
                                             "model.vision_tower.", "vision_model.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "embeddings.class_embedding");
    if (!prefix)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'vision_tower.vision_model.embeddings.class_embedding' is missing (the CLIP vision tower)", ck->path);
    mxl_enc_binder b = {ck, &m->arena, prefix, err};
    const int64_t H = s->hidden, K = 3 * m->patch * m->patch;
    /* the Conv2d's [hidden, 3, p, p] (a channels-last [hidden, p, p, 3] as MLX conversions store
     * it holds the same count in another order: refused rather than misread) */
    char pname[512];
    snprintf(pname, sizeof pname, "%sembeddings.patch_embedding.weight", prefix);
    const mxl_st_entry *pe = mxl_st_model_find(ck->st, pname);
    const int64_t *ps = pe ? pe->tensor.shape : NULL; /* (PyTorch's [H, 3, p, p] or mlx-vlm's channels-last [H, p, p, 3]) */
    if (pe && (pe->tensor.ndim != 4 || ps[0] != H || !((ps[1] == 3 && ps[2] == m->patch && ps[3] == m->patch) || (ps[1] == m->patch && ps[2] == m->patch && ps[3] == 3))))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor '%s' must have shape [%lld, 3, %lld, %lld] (a PyTorch Conv2d's layout)", ck->path, pname,
                             (long long)H, (long long)m->patch, (long long)m->patch);
    const float *pw; /* (the Conv2d's [hidden, 3, p, p] read as [hidden, 3 p p], in f32) */
    if (mxl_enc_conv_weight(&b, H, 3, m->patch * m->patch, &pw, "embeddings.patch_embedding.weight") ||
        mxl_enc_vector(&b, H, &m->class_emb, "embeddings.class_embedding") ||
        mxl_enc_vector(&b, m->n_pos * H, &m->pos_emb, "embeddings.position_embedding.weight") ||
        mxl_enc_vector(&b, H, &m->pre_w, "pre_layrnorm.weight") || mxl_enc_vector(&b, H, &m->pre_b, "pre_layrnorm.bias"))
        return err ? err->status : MXL_ERR_FORMAT;
    if (mxl_enc_has(&b, "embeddings.patch_embedding.bias"))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the CLIP tower's patch embedding has a bias (CLIP's Conv2d has none)", ck->path);
    m->patch_w = (mxl_weight){.kind = MXL_W_DENSE, .dtype = MXL_DTYPE_F32, .rows = H, .cols = K, .data = pw};
    if (s->be->ops->weight_prepare(s->be, &m->patch_w, MXL_WEIGHT_USE_GEMM, &m->arena, err)) return err ? err->status : MXL_ERR_NOMEM;
    return mxl_siglip_stack_bind(&b, &mxl_siglip_names_hf, s);
}

void mxl_clip_vision_free(mxl_clip_vision *m) {
    mxl_arena_free(&m->arena);
    memset(m, 0, sizeof *m);
}

mxl_status mxl_clip_vision_embed(const mxl_clip_vision *m, const float *pixels, mxl_threadpool *pool, float *x, mxl_error *err) {
    const mxl_siglip_stack *s = &m->stack;
    const int64_t H = s->hidden, P = m->patch, K = 3 * P * P, n = m->n_patches;
    int n_threads = pool ? mxl_threadpool_size(pool) : 1;
    size_t mm = mxl_enc_linear_scratch_bytes(s->be, &m->patch_w, n, n_threads);
    float *patches = mxl_aligned_alloc(64, ((size_t)(n * K) * sizeof(float) + 63) / 64 * 64);
    void *scratch = mm ? mxl_aligned_alloc(64, (mm + 63) / 64 * 64) : NULL;
    if (!patches || (mm && !scratch)) {
        mxl_aligned_free(patches);
        mxl_aligned_free(scratch);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    mxl_vision_patchify(pixels, m->image_size, P, patches);
    /* row 0 the class embedding, rows 1.. the patches */
    memcpy(x, m->class_emb, (size_t)H * sizeof(float));
    mxl_enc_linear_act(s->be, &m->patch_w, NULL, MXL_GEMM_ACT_NONE, patches, n, x + H, scratch, pool);
    mxl_aligned_free(patches);
    mxl_aligned_free(scratch);
    for (int64_t i = 0; i < m->n_pos * H; i++) x[i] += m->pos_emb[i];
    mxl_enc_add_layernorm(s->be, pool, x, NULL, m->pre_w, m->pre_b, m->n_pos, H, s->eps, x);
    return MXL_OK;
}

mxl_status mxl_vision_select_layers(const mxl_siglip_stack *s, float *x, int64_t n, const int64_t *layers, int n_sel, int64_t skip,
                                    mxl_threadpool *pool, float *out, mxl_error *err) {
    const int64_t H = s->hidden, W = (int64_t)n_sel * H;
    int64_t deepest = 0;
    for (int k = 0; k < n_sel; k++) {
        if (layers[k] < 0 || layers[k] > s->n_layers)
            return mxl_error_set(err, MXL_ERR_ARG, "vision feature layer %lld is outside the tower's %lld layers", (long long)layers[k],
                                 (long long)s->n_layers);
        if (layers[k] > deepest) deepest = layers[k];
    }
    if (skip < 0 || skip >= n) return mxl_error_set(err, MXL_ERR_ARG, "no vision rows are left to select");
    static const int32_t no_ids[1] = {0};
    int64_t starts[2] = {0, n};
    mxl_encoder_batch bt = {no_ids, NULL, starts, 1};
    int64_t done = 0; /* x is hidden_states[done] */
    for (;;) {
        for (int k = 0; k < n_sel; k++)
            if (layers[k] == done)
                for (int64_t r = skip; r < n; r++) memcpy(out + (r - skip) * W + k * H, x + r * H, (size_t)H * sizeof(float));
        if (done == deepest) break;
        /* the next selected depth */
        int64_t next = deepest;
        for (int k = 0; k < n_sel; k++)
            if (layers[k] > done && layers[k] < next) next = layers[k];
        mxl_siglip_stack part = *s;
        part.layers = s->layers + done;
        part.n_layers = next - done;
        mxl_status st = mxl_siglip_stack_run(&part, &bt, n, pool, x, err);
        if (st) return st;
        done = next;
    }
    return MXL_OK;
}
