/* vision_siglip.c - the SigLIP vision tower's forward pass (see vision_siglip.h). */
#include "models/vision_siglip.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "io/json_read.h"

mxl_status mxl_vit_sizes(const mxl_checkpoint *ck, const json_t *vc, int64_t dflt_patch, mxl_siglip_stack *s, int64_t *image_size,
                         int64_t *patch, mxl_error *err) {
    if (!vc || !json_is_object(vc)) return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config is missing", ck->dir);
    mxl_status st;
    int64_t ch;
    /* (the Siglip / CLIP VisionConfig defaults) */
    if ((st = mxl_enc_subcfg_int(ck, vc, "vision_config", "hidden_size", 768, 1, 1 << 16, &s->hidden, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "intermediate_size", 3072, 1, 1 << 18, &s->ffn, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "num_hidden_layers", 12, 1, 1024, &s->n_layers, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "num_attention_heads", 12, 1, 1024, &s->n_heads, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "image_size", 224, 1, 1 << 14, image_size, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "patch_size", dflt_patch, 1, 1 << 10, patch, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "num_channels", 3, 3, 3, &ch, err)))
        return st;
    if (s->hidden % s->n_heads || *image_size % *patch)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config: %lld heads do not split hidden_size %lld, or patch_size %lld does not divide image_size %lld",
                             ck->dir, (long long)s->n_heads, (long long)s->hidden, (long long)*patch, (long long)*image_size);
    s->head_dim = s->hidden / s->n_heads;
    return MXL_OK;
}

/* The patch, position and post-norm tensors and the layers, once the sizes are set. */
static mxl_status bind_tower(mxl_enc_binder *b, const mxl_siglip_names *nm, const char *const *t, mxl_siglip_vision *m, mxl_error *err) {
    mxl_siglip_stack *s = &m->stack;
    const int64_t H = s->hidden, K = 3 * m->patch * m->patch;
    const float *pw;
    if (mxl_enc_conv_weight(b, H, 3, m->patch * m->patch, &pw, t[0]) || mxl_enc_vector(b, H, &m->patch_b, "%s", t[1]) ||
        mxl_enc_vector(b, m->n_patches * H, &m->pos_emb, "%s", t[2]) || mxl_enc_vector(b, H, &m->post_w, "%s", t[3]) ||
        mxl_enc_vector(b, H, &m->post_b, "%s", t[4]))
        return err ? err->status : MXL_ERR_FORMAT;
    m->patch_w = (mxl_weight){.kind = MXL_W_DENSE, .dtype = MXL_DTYPE_F32, .rows = H, .cols = K, .data = pw};
    if (s->be->ops->weight_prepare(s->be, &m->patch_w, MXL_WEIGHT_USE_GEMM, &m->arena, err)) return err ? err->status : MXL_ERR_NOMEM;
    return mxl_siglip_stack_bind(b, nm, s);
}

mxl_status mxl_siglip_vision_load(const mxl_checkpoint *ck, const json_t *vc, mxl_siglip_vision *m, mxl_error *err) {
    memset(m, 0, sizeof *m);
    mxl_arena_init(&m->arena, 64 * 1024);
    mxl_siglip_stack *s = &m->stack;
    s->be = mxl_backend_host();
    mxl_status st = mxl_vit_sizes(ck, vc, 16, s, &m->image_size, &m->patch, err);
    if (st) return st;
    m->side = m->image_size / m->patch;
    m->n_patches = m->side * m->side;
    const json_t *eps = json_object_get(vc, "layer_norm_eps");
    double e = 1e-6;
    if (eps && !json_is_null(eps) && (!mxl_json_number(eps, &e) || !(e > 0)))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.layer_norm_eps must be a positive number", ck->dir);
    s->eps = (float)e;
    const json_t *act = json_object_get(vc, "hidden_act");
    if (mxl_enc_activation(json_is_string(act) ? json_string_value(act) : "gelu_pytorch_tanh", ck->path, &s->act, err))
        return err ? err->status : MXL_ERR_UNSUPPORTED;

    static const char *const k_prefixes[] = {"vision_tower.vision_model.", "model.vision_tower.vision_model.", "vision_tower.",
                                             "model.vision_tower.", "model.vision_model.", "vision_model.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "embeddings.patch_embedding.weight");
    if (!prefix)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'vision_tower.vision_model.embeddings.patch_embedding.weight' is missing (the SigLIP vision tower)", ck->path);
    mxl_enc_binder b = {ck, &m->arena, prefix, err};
    static const char *const k_tensors[] = {"embeddings.patch_embedding.weight", "embeddings.patch_embedding.bias",
                                            "embeddings.position_embedding.weight", "post_layernorm.weight", "post_layernorm.bias"};
    return bind_tower(&b, &mxl_siglip_names_hf, k_tensors, m, err);
}

/* An integer clip.vision.* key of the mmproj GGUF. */
static mxl_status gguf_int(const mxl_checkpoint *mm, const char *key, int64_t lo, int64_t hi, int64_t *out, mxl_error *err) {
    uint64_t v;
    mxl_status st = mxl_gguf_get_u64(mm->gguf, key, &v, err);
    if (st) return st;
    if ((int64_t)v < lo || (int64_t)v > hi)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s = %llu is out of range", mm->path, key, (unsigned long long)v);
    *out = (int64_t)v;
    return MXL_OK;
}

mxl_status mxl_siglip_vision_load_gguf(const mxl_checkpoint *mm, mxl_siglip_vision *m, mxl_error *err) {
    memset(m, 0, sizeof *m);
    mxl_arena_init(&m->arena, 64 * 1024);
    mxl_siglip_stack *s = &m->stack;
    s->be = mxl_backend_host();
    mxl_status st;
    if ((st = gguf_int(mm, "clip.vision.embedding_length", 1, 1 << 16, &s->hidden, err)) ||
        (st = gguf_int(mm, "clip.vision.feed_forward_length", 1, 1 << 18, &s->ffn, err)) ||
        (st = gguf_int(mm, "clip.vision.block_count", 1, 1024, &s->n_layers, err)) ||
        (st = gguf_int(mm, "clip.vision.attention.head_count", 1, 1024, &s->n_heads, err)) ||
        (st = gguf_int(mm, "clip.vision.image_size", 1, 1 << 14, &m->image_size, err)) ||
        (st = gguf_int(mm, "clip.vision.patch_size", 1, 1 << 10, &m->patch, err)))
        return st;
    if (s->hidden % s->n_heads || m->image_size % m->patch)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the vision head count does not split its width, or the patch size the image size", mm->path);
    s->head_dim = s->hidden / s->n_heads;
    m->side = m->image_size / m->patch;
    m->n_patches = m->side * m->side;
    double eps = 1e-6;
    if (mxl_gguf_find(mm->gguf, "clip.vision.attention.layer_norm_epsilon") &&
        (st = mxl_gguf_get_f64(mm->gguf, "clip.vision.attention.layer_norm_epsilon", &eps, err)))
        return st;
    s->eps = (float)eps;
    s->act = MXL_ACT_GELU_TANH; /* (clip.use_gelu: SigLIP's gelu_pytorch_tanh, as clip.cpp runs it) */
    mxl_enc_binder b = {mm, &m->arena, "", err};
    static const char *const k_tensors[] = {"v.patch_embd.weight", "v.patch_embd.bias", "v.position_embd.weight", "v.post_ln.weight",
                                            "v.post_ln.bias"};
    return bind_tower(&b, &mxl_siglip_names_gguf, k_tensors, m, err);
}

void mxl_siglip_vision_free(mxl_siglip_vision *m) {
    mxl_arena_free(&m->arena);
    memset(m, 0, sizeof *m);
}

void mxl_vision_patchify(const float *pixels, int64_t S, int64_t P, float *patches) {
    const int64_t side = S / P, K = 3 * P * P;
    /* patches[py * side + px] = pixels[c, py*P + ky, px*P + kx] in (c, ky, kx) order */
    for (int64_t py = 0; py < side; py++)
        for (int64_t px = 0; px < side; px++) {
            float *row = patches + (py * side + px) * K;
            for (int64_t c = 0; c < 3; c++)
                for (int64_t ky = 0; ky < P; ky++)
                    memcpy(row + (c * P + ky) * P, pixels + (c * S + py * P + ky) * S + px * P, (size_t)P * sizeof(float));
        }
}

void mxl_vision_pixel_shuffle(const float *x, int64_t side, int64_t d, int64_t H, float *out) {
    const int64_t q = side / d;
    for (int64_t a = 0; a < q; a++)
        for (int64_t b = 0; b < q; b++) {
            float *o = out + (a * q + b) * d * d * H;
            for (int64_t j = 0; j < d; j++)
                for (int64_t k = 0; k < d; k++, o += H) memcpy(o, x + ((a * d + j) * side + b * d + k) * H, (size_t)H * sizeof(float));
        }
}

mxl_status mxl_siglip_vision_embed(const mxl_siglip_vision *m, const float *pixels, mxl_threadpool *pool, float *x, mxl_error *err) {
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
    mxl_enc_linear_act(s->be, &m->patch_w, m->patch_b, MXL_GEMM_ACT_NONE, patches, n, x, scratch, pool);
    mxl_aligned_free(patches);
    mxl_aligned_free(scratch);
    for (int64_t i = 0; i < n * H; i++) x[i] += m->pos_emb[i];
    return MXL_OK;
}

mxl_status mxl_siglip_vision_forward(const mxl_siglip_vision *m, const float *pixels, mxl_threadpool *pool, float *x,
                                     mxl_error *err) {
    const mxl_siglip_stack *s = &m->stack;
    const int64_t H = s->hidden, n = m->n_patches;
    mxl_status st = mxl_siglip_vision_embed(m, pixels, pool, x, err);
    if (st) return st;
    /* one sequence of n patches, every patch seeing every other */
    static const int32_t no_ids[1] = {0};
    int64_t starts[2] = {0, n};
    mxl_encoder_batch bt = {no_ids, NULL, starts, 1};
    if ((st = mxl_siglip_stack_run(s, &bt, n, pool, x, err))) return st;
    mxl_enc_add_layernorm(s->be, pool, x, NULL, m->post_w, m->post_b, n, H, s->eps, x);
    return MXL_OK;
}
