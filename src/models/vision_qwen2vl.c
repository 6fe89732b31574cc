/* vision_qwen2vl.c - the Qwen2-VL / Qwen2.5-VL / Qwen3-VL / GLM-4.1V vision towers: binding from
 * safetensors or llama.cpp's mmproj GGUF, and the forward pass (see vision_qwen2vl.h). */
#include "models/vision_qwen2vl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "io/gguf.h"
#include "io/json_read.h"
#include "models/encoder_common.h"
#include "models/weights.h"

/* An integer of vision_config (dflt when absent), within [lo, hi]. */
static mxl_status vint(const mxl_checkpoint *ck, const json_t *vc, const char *key, int64_t dflt, int64_t lo, int64_t hi, int64_t *out,
                       mxl_error *err) {
    const json_t *v = json_object_get(vc, key);
    *out = dflt;
    if (!v || json_is_null(v)) return MXL_OK;
    if (mxl_json_int(v, lo, hi, out))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.%s must be an integer in [%lld, %lld]", ck->dir, key,
                             (long long)lo, (long long)hi);
    return MXL_OK;
}

static mxl_status prepare(const mxl_qwen2vl_vision *m, mxl_weight *w, mxl_error *err) {
    return m->be->ops->weight_prepare(m->be, w, MXL_WEIGHT_USE_GEMM, (mxl_arena *)&m->arena, err);
}

/* A merger's norm and MLP under `name` (name.norm, name.fc1, name.fc2: Qwen3-VL's linear_fc1 /
 * linear_fc2, llama.cpp's fc1 / fc2), norm width nw. */
static mxl_status bind_merger(const mxl_qwen2vl_vision *m, const mxl_enc_binder *b, const char *name, const char *fc1, const char *fc2, int64_t nw,
                              mxl_qwen2vl_merger *g, mxl_error *err) {
    const int64_t M = m->dim * m->merge * m->merge;
    if (mxl_enc_vector(b, nw, &g->ln_w, "%s.norm.weight", name) || mxl_enc_vector(b, nw, &g->ln_b, "%s.norm.bias", name) ||
        mxl_enc_matrix(b, M, M, &g->fc1, "%s.%s.weight", name, fc1) || mxl_enc_vector(b, M, &g->fc1_b, "%s.%s.bias", name, fc1) ||
        mxl_enc_matrix(b, m->out_hidden, M, &g->fc2, "%s.%s.weight", name, fc2) || mxl_enc_vector(b, m->out_hidden, &g->fc2_b, "%s.%s.bias", name, fc2))
        return err ? err->status : MXL_ERR_FORMAT;
    if (prepare(m, &g->fc1, err) || prepare(m, &g->fc2, err)) return err ? err->status : MXL_ERR_NOMEM;
    return MXL_OK;
}

/* Qwen3-VL's learned positions and DeepStack taps. */
static mxl_status load_v3_extras(const mxl_checkpoint *ck, const json_t *vc, const mxl_enc_binder *b, mxl_qwen2vl_vision *m, mxl_error *err) {
    int64_t np;
    mxl_status st = vint(ck, vc, "num_position_embeddings", 2304, 1, INT64_C(1) << 24, &np, err);
    if (st) return st;
    m->pos_side = (int64_t)llround(sqrt((double)np));
    if (m->pos_side * m->pos_side != np)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.num_position_embeddings %lld is not a square", ck->dir, (long long)np);
    if (mxl_enc_vector(b, m->dim, &m->patch_b, "patch_embed.proj.bias") || mxl_enc_vector(b, np * m->dim, &m->pos_table, "pos_embed.weight"))
        return err ? err->status : MXL_ERR_FORMAT;
    const json_t *di = json_object_get(vc, "deepstack_visual_indexes");
    static const int64_t k_default[3] = {8, 16, 24};
    if (di && !json_is_null(di) && (!json_is_array(di) || json_array_size(di) > MXL_QWEN3VL_MAX_DEEP))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.deepstack_visual_indexes must be a list of at most %d block numbers", ck->dir,
                             MXL_QWEN3VL_MAX_DEEP);
    m->n_deep = di && !json_is_null(di) ? (int)json_array_size(di) : 3;
    for (int k = 0; k < m->n_deep; k++) {
        int64_t at = k_default[k < 3 ? k : 2];
        if (di && !json_is_null(di) && mxl_json_int(json_array_get(di, (size_t)k), 0, m->n_layers - 1, &at))
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.deepstack_visual_indexes[%d] is not a block number", ck->dir, k);
        if (at >= m->n_layers || (k && at <= m->deep_at[k - 1]))
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.deepstack_visual_indexes must be increasing block numbers", ck->dir);
        m->deep_at[k] = at;
        char name[64];
        snprintf(name, sizeof name, "deepstack_merger_list.%d", k);
        if ((st = bind_merger(m, b, name, "linear_fc1", "linear_fc2", m->dim * m->merge * m->merge, &m->deep_m[k], err))) return st;
    }
    return MXL_OK;
}

/* The names of GLM-4.1V's extra tensors: patch bias, post-conv norm, positions, post norm, the
 * downsample Conv2d and its bias, the merger's proj, post-projection LayerNorm and SwiGLU. */
typedef struct glm_names {
    const char *patch_b, *post_conv, *pos, *post, *ds_w, *ds_b, *mp, *mp_ln_w, *mp_ln_b, *mg, *mu, *md;
} glm_names;
static const glm_names k_glm_hf = {"patch_embed.proj.bias", "post_conv_layernorm.weight", "embeddings.position_embedding.weight",
                                   "post_layernorm.weight", "downsample.weight", "downsample.bias", "merger.proj.weight",
                                   "merger.post_projection_norm.weight", "merger.post_projection_norm.bias", "merger.gate_proj.weight",
                                   "merger.up_proj.weight", "merger.down_proj.weight"};
static const glm_names k_glm_gguf = {"v.patch_embd.bias", "v.norm_embd.weight", "v.position_embd.weight", "v.post_ln.weight",
                                     "mm.patch_merger.weight", "mm.patch_merger.bias", "mm.model.fc.weight", "mm.post_norm.weight",
                                     "mm.post_norm.bias", "mm.gate.weight", "mm.up.weight", "mm.down.weight"};

/* GLM-4.1V's patch bias, norms, positions, downsample and merger under names nm. */
static mxl_status load_glm_extras(const mxl_enc_binder *b, const glm_names *nm, mxl_qwen2vl_vision *m, mxl_error *err) {
    const int64_t D = m->dim, O = m->out_hidden, mg = m->merge, K = mg * mg * D;
    const float *dw;
    if (mxl_enc_vector(b, D, &m->patch_b, "%s", nm->patch_b) || mxl_enc_vector(b, D, &m->post_conv_w, "%s", nm->post_conv) ||
        mxl_enc_vector(b, m->pos_side * m->pos_side * D, &m->pos_table, "%s", nm->pos) || mxl_enc_vector(b, D, &m->post_w, "%s", nm->post) ||
        mxl_enc_conv_weight(b, O, D, mg * mg, &dw, nm->ds_w) || mxl_enc_vector(b, O, &m->ds_b, "%s", nm->ds_b) ||
        mxl_enc_matrix(b, O, O, &m->mp, "%s", nm->mp) || mxl_enc_vector(b, O, &m->mp_ln_w, "%s", nm->mp_ln_w) ||
        mxl_enc_vector(b, O, &m->mp_ln_b, "%s", nm->mp_ln_b) || mxl_enc_matrix(b, m->ctx, O, &m->mg, "%s", nm->mg) ||
        mxl_enc_matrix(b, m->ctx, O, &m->mu, "%s", nm->mu) || mxl_enc_matrix(b, O, m->ctx, &m->md, "%s", nm->md))
        return err ? err->status : MXL_ERR_FORMAT;
    /* the Conv2d's weight [O, D, m, m] with its columns in the merge unit's row order (ky, kx, c) */
    float *w = mxl_arena_alloc(b->arena, (size_t)(O * K) * sizeof(float), 64);
    if (!w) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < D; c++)
            for (int64_t k = 0; k < mg * mg; k++) w[o * K + k * D + c] = dw[(o * D + c) * mg * mg + k];
    m->ds = (mxl_weight){.kind = MXL_W_DENSE, .dtype = MXL_DTYPE_F32, .rows = O, .cols = K, .data = w};
    mxl_weight *mats[] = {&m->ds, &m->mp, &m->mg, &m->mu, &m->md};
    for (size_t j = 0; j < sizeof mats / sizeof mats[0]; j++)
        if (prepare(m, mats[j], err)) return err ? err->status : MXL_ERR_NOMEM;
    return MXL_OK;
}

/* A block's tensor names (formats with the block's %lld): norms, attention output, and the MLP's
 * (SwiGLU gate / up / down or fc1 / fc2), each weight then bias. */
typedef struct layer_names {
    const char *n1[2], *n2[2], *proj[2], *gate[2], *up[2], *down[2], *fc1[2], *fc2[2];
} layer_names;
static const layer_names k_layer_hf = {{"blocks.%lld.norm1.weight", "blocks.%lld.norm1.bias"}, {"blocks.%lld.norm2.weight", "blocks.%lld.norm2.bias"},
                                       {"blocks.%lld.attn.proj.weight", "blocks.%lld.attn.proj.bias"},
                                       {"blocks.%lld.mlp.gate_proj.weight", "blocks.%lld.mlp.gate_proj.bias"},
                                       {"blocks.%lld.mlp.up_proj.weight", "blocks.%lld.mlp.up_proj.bias"},
                                       {"blocks.%lld.mlp.down_proj.weight", "blocks.%lld.mlp.down_proj.bias"},
                                       {"blocks.%lld.mlp.fc1.weight", "blocks.%lld.mlp.fc1.bias"}, {"blocks.%lld.mlp.fc2.weight", "blocks.%lld.mlp.fc2.bias"}};
static const layer_names k_layer_hf_v3 = {{"blocks.%lld.norm1.weight", "blocks.%lld.norm1.bias"}, {"blocks.%lld.norm2.weight", "blocks.%lld.norm2.bias"},
                                          {"blocks.%lld.attn.proj.weight", "blocks.%lld.attn.proj.bias"}, {NULL, NULL}, {NULL, NULL}, {NULL, NULL},
                                          {"blocks.%lld.mlp.linear_fc1.weight", "blocks.%lld.mlp.linear_fc1.bias"},
                                          {"blocks.%lld.mlp.linear_fc2.weight", "blocks.%lld.mlp.linear_fc2.bias"}};
static const layer_names k_layer_gguf = {{"v.blk.%lld.ln1.weight", "v.blk.%lld.ln1.bias"}, {"v.blk.%lld.ln2.weight", "v.blk.%lld.ln2.bias"},
                                         {"v.blk.%lld.attn_out.weight", "v.blk.%lld.attn_out.bias"},
                                         {"v.blk.%lld.ffn_gate.weight", "v.blk.%lld.ffn_gate.bias"}, {"v.blk.%lld.ffn_up.weight", "v.blk.%lld.ffn_up.bias"},
                                         {"v.blk.%lld.ffn_down.weight", "v.blk.%lld.ffn_down.bias"},
                                         {"v.blk.%lld.ffn_up.weight", "v.blk.%lld.ffn_up.bias"}, {"v.blk.%lld.ffn_down.weight", "v.blk.%lld.ffn_down.bias"}};

/* Block i's norms (biased with LayerNorm), attention output (biased but GLM's) and MLP (SwiGLU
 * biased in 2.5 only, fc1 / fc2 always) under names nm, every matrix prepared once L->qkv is set
 * (the callers bind it: fused or joined). */
static mxl_status bind_layer(const mxl_enc_binder *b, const layer_names *nm, mxl_qwen2vl_vision *m, int64_t i, mxl_qwen2vl_vision_layer *L,
                             mxl_error *err) {
    const int64_t D = m->dim, F = m->ffn;
    const long long l = (long long)i;
    const bool mb = m->v25; /* (SwiGLU biases: 2.5's; GLM has none) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    if (mxl_enc_vector(b, D, &L->n1_w, nm->n1[0], l) || mxl_enc_vector(b, D, &L->n2_w, nm->n2[0], l) ||
        (!m->rms && (mxl_enc_vector(b, D, &L->n1_b, nm->n1[1], l) || mxl_enc_vector(b, D, &L->n2_b, nm->n2[1], l))) ||
        mxl_enc_matrix(b, D, D, &L->proj, nm->proj[0], l) || (!m->glm && mxl_enc_vector(b, D, &L->proj_b, nm->proj[1], l)))
        return err ? err->status : MXL_ERR_FORMAT;
    if (m->swiglu ? (mxl_enc_matrix(b, F, D, &L->gate, nm->gate[0], l) || (mb && mxl_enc_vector(b, F, &L->gate_b, nm->gate[1], l)) ||
                     mxl_enc_matrix(b, F, D, &L->up, nm->up[0], l) || (mb && mxl_enc_vector(b, F, &L->up_b, nm->up[1], l)) ||
                     mxl_enc_matrix(b, D, F, &L->down, nm->down[0], l) || (mb && mxl_enc_vector(b, D, &L->down_b, nm->down[1], l)))
                  : (mxl_enc_matrix(b, F, D, &L->fc1, nm->fc1[0], l) || mxl_enc_vector(b, F, &L->fc1_b, nm->fc1[1], l) ||
                     mxl_enc_matrix(b, D, F, &L->fc2, nm->fc2[0], l) || mxl_enc_vector(b, D, &L->fc2_b, nm->fc2[1], l)))
        return err ? err->status : MXL_ERR_FORMAT;
#pragma GCC diagnostic pop
    mxl_weight *mats[] = {&L->qkv, &L->proj, &L->fc1, &L->fc2, &L->gate, &L->up, &L->down};
    for (size_t j = 0; j < sizeof mats / sizeof mats[0]; j++)
        if (mats[j]->rows > 0 && prepare(m, mats[j], err)) return err ? err->status : MXL_ERR_NOMEM;
    return MXL_OK;
}

/* head_dim from dim / n_heads, and the 2-D rotary's frequencies for theta; where names the source */
static mxl_status set_heads(mxl_qwen2vl_vision *m, double theta, const char *where, mxl_error *err) {
    if (m->dim % m->n_heads || (m->dim / m->n_heads) % 4 || m->dim / m->n_heads / 4 > 256)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %lld heads must split the width %lld into heads of a multiple of 4 (at most 1024)", where,
                             (long long)m->n_heads, (long long)m->dim);
    m->head_dim = m->dim / m->n_heads;
    /* inv_freq = 1 / theta^(2i / (hd / 2)), i < hd / 4 (torch float32 arithmetic) */
    const int64_t sd = m->head_dim / 2;
    for (int64_t i = 0; i < sd / 2; i++) m->inv_freq[i] = 1.0f / (float)pow((float)theta, (float)(2 * i) / (float)sd);
    return MXL_OK;
}

mxl_status mxl_qwen2vl_vision_load(const mxl_checkpoint *ck, const json_t *vc, int version, mxl_qwen2vl_vision *m, mxl_error *err) {
    memset(m, 0, sizeof *m);
    mxl_arena_init(&m->arena, 64 * 1024);
    m->be = mxl_backend_host();
    const bool v25 = version == 25, v3 = version == 3, glm = version == 4;
    m->v25 = v25, m->v3 = v3, m->glm = glm;
    m->rms = m->swiglu = v25 || glm;
    m->eps = 1e-6f;
    if (!json_is_object(vc)) return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config is missing", ck->dir);
    mxl_status st;
    int64_t ch;
    /* (Qwen2VLVisionConfig's / Qwen2_5_VLVisionConfig's / Qwen3VLVisionConfig's defaults) */
    if ((st = vint(ck, vc, "depth", v3 ? 27 : glm ? 24 : 32, 1, 1024, &m->n_layers, err)) ||
        (st = vint(ck, vc, "num_heads", glm ? 12 : 16, 1, 1024, &m->n_heads, err)) ||
        (st = vint(ck, vc, "patch_size", v3 ? 16 : 14, 1, 1024, &m->patch, err)) ||
        (st = vint(ck, vc, "temporal_patch_size", 2, 1, 16, &m->temporal, err)) ||
        (st = vint(ck, vc, "spatial_merge_size", 2, 1, 16, &m->merge, err)) ||
        (st = vint(ck, vc, json_object_get(vc, "in_chans") ? "in_chans" : "in_channels", 3, 3, 3, &ch, err)))
        return st;
    const char *act = v25 || glm ? "silu" : v3 ? "gelu_pytorch_tanh" : "quick_gelu";
    const json_t *a = json_object_get(vc, "hidden_act");
    if (json_is_string(a)) act = json_string_value(a);
    if (glm) {
        double eps = 1e-5;
        const json_t *e = json_object_get(vc, "rms_norm_eps");
        if (e && !json_is_null(e) && (!mxl_json_number(e, &eps) || !(eps > 0)))
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.rms_norm_eps must be a positive number", ck->dir);
        m->eps = (float)eps;
        int64_t isz;
        if ((st = vint(ck, vc, "hidden_size", 1536, 1, 1 << 16, &m->dim, err)) ||
            (st = vint(ck, vc, "out_hidden_size", 4096, 1, 1 << 16, &m->out_hidden, err)) ||
            (st = vint(ck, vc, "intermediate_size", 13696, 1, 1 << 18, &m->ctx, err)) || (st = vint(ck, vc, "image_size", 336, 1, 1 << 14, &isz, err)))
            return st;
        m->ffn = m->out_hidden; /* (Glm4VisionMlp's width) */
        m->pos_side = isz / m->patch;
        if (m->pos_side < 1 || m->pos_side * m->patch != isz)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.patch_size does not divide image_size", ck->dir);
    } else if (v25 || v3) {
        if ((st = vint(ck, vc, "hidden_size", v3 ? 1152 : 1280, 1, 1 << 16, &m->dim, err)) ||
            (st = vint(ck, vc, "intermediate_size", v3 ? 4304 : 3420, 1, 1 << 18, &m->ffn, err)) ||
            (st = vint(ck, vc, "out_hidden_size", 3584, 1, 1 << 16, &m->out_hidden, err)) ||
            (v25 && (st = vint(ck, vc, "window_size", 112, 1, 1 << 16, &m->window, err))))
            return st;
    } else {
        double ratio = 4;
        const json_t *r = json_object_get(vc, "mlp_ratio");
        if (r && !json_is_null(r) && (!mxl_json_number(r, &ratio) || !(ratio > 0)))
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.mlp_ratio must be a positive number", ck->dir);
        if ((st = vint(ck, vc, "embed_dim", 1280, 1, 1 << 16, &m->dim, err)) ||
            (st = vint(ck, vc, "hidden_size", 3584, 1, 1 << 16, &m->out_hidden, err)))
            return st;
        m->ffn = (int64_t)((double)m->dim * ratio); /* int(embed_dim * mlp_ratio) */
    }
    if (strcmp(act, "quick_gelu") == 0) m->quick_gelu = true, m->act = MXL_ACT_SILU;
    else if (mxl_enc_activation(act, ck->path, &m->act, err)) return err ? err->status : MXL_ERR_UNSUPPORTED;
    const bool glm_qkv_bias = glm && json_is_true(json_object_get(vc, "attention_bias"));
    if (v25 && (m->window % (m->merge * m->patch) || m->window < m->merge * m->patch))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.window_size %lld is not a multiple of spatial_merge_size x patch_size", ck->dir,
                             (long long)m->window);
    double theta = 10000.0;
    const json_t *rp = json_object_get(vc, "rope_parameters"), *th = json_is_object(rp) ? json_object_get(rp, "rope_theta") : NULL;
    if (!th) th = json_object_get(vc, "rope_theta");
    if (th && !json_is_null(th) && (!mxl_json_number(th, &theta) || !(theta > 0)))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config rope_theta must be a positive number", ck->dir);
    char where[4200];
    snprintf(where, sizeof where, "%s/config.json: vision_config", ck->dir);
    if ((st = set_heads(m, theta, where, err))) return st;

    static const char *const k_prefixes[] = {"visual.", "model.visual.", "vision_tower.", NULL}; /* (vision_tower.: mlx-vlm) */
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "patch_embed.proj.weight");
    if (!prefix) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'visual.patch_embed.proj.weight' is missing (the Qwen2-VL vision tower)", ck->path);
    mxl_enc_binder b = {ck, &m->arena, prefix, err};
    const int64_t D = m->dim, M = D * m->merge * m->merge;
    m->patch_dim = 3 * m->temporal * m->patch * m->patch;
    const float *pw;
    /* (mlx-vlm stores it channels-last, [D, T, P, P, 3]) */
    if (mxl_enc_conv_weight(&b, D, 3, m->temporal * m->patch * m->patch, &pw, "patch_embed.proj.weight")) return err ? err->status : MXL_ERR_FORMAT;
    m->patch_w = (mxl_weight){.kind = MXL_W_DENSE, .dtype = MXL_DTYPE_F32, .rows = D, .cols = m->patch_dim, .data = pw};
    if (prepare(m, &m->patch_w, err)) return err ? err->status : MXL_ERR_NOMEM;
    m->layers = mxl_arena_alloc(&m->arena, (size_t)m->n_layers * sizeof *m->layers, 64);
    if (!m->layers) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    memset(m->layers, 0, (size_t)m->n_layers * sizeof *m->layers);
    for (int64_t i = 0; i < m->n_layers; i++) {
        mxl_qwen2vl_vision_layer *L = &m->layers[i];
        const long long l = (long long)i;
        L->full = !v25;
        if (mxl_enc_matrix(&b, 3 * D, D, &L->qkv, "blocks.%lld.attn.qkv.weight", l) ||
            ((!glm || glm_qkv_bias) && mxl_enc_vector(&b, 3 * D, &L->qkv_b, "blocks.%lld.attn.qkv.bias", l)))
            return err ? err->status : MXL_ERR_FORMAT;
        if ((st = bind_layer(&b, v3 ? &k_layer_hf_v3 : &k_layer_hf, m, i, L, err))) return st;
    }
    if (v25) {
        const json_t *fa = json_object_get(vc, "fullatt_block_indexes");
        if (fa && !json_is_array(fa))
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.fullatt_block_indexes must be a list of block numbers", ck->dir);
        static const int k_default[4] = {7, 15, 23, 31};
        size_t nf = fa ? json_array_size(fa) : 4;
        for (size_t j = 0; j < nf; j++) {
            int64_t k = k_default[j];
            if (fa && mxl_json_int(json_array_get(fa, j), 0, m->n_layers - 1, &k))
                return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config.fullatt_block_indexes[%zu] is not a block number", ck->dir, j);
            if (k < m->n_layers) m->layers[k].full = true;
        }
    }
    if (glm) return load_glm_extras(&b, &k_glm_hf, m, err);
    if (v3) {
        mxl_qwen2vl_merger g;
        if ((st = bind_merger(m, &b, "merger", "linear_fc1", "linear_fc2", D, &g, err)) || (st = load_v3_extras(ck, vc, &b, m, err))) return st;
        m->lnq_w = g.ln_w, m->lnq_b = g.ln_b, m->m0 = g.fc1, m->m0_b = g.fc1_b, m->m2 = g.fc2, m->m2_b = g.fc2_b;
        return MXL_OK;
    }
    if (mxl_enc_vector(&b, D, &m->lnq_w, "merger.ln_q.weight") || (!v25 && mxl_enc_vector(&b, D, &m->lnq_b, "merger.ln_q.bias")) ||
        mxl_enc_matrix(&b, M, M, &m->m0, "merger.mlp.0.weight") || mxl_enc_vector(&b, M, &m->m0_b, "merger.mlp.0.bias") ||
        mxl_enc_matrix(&b, m->out_hidden, M, &m->m2, "merger.mlp.2.weight") || mxl_enc_vector(&b, m->out_hidden, &m->m2_b, "merger.mlp.2.bias"))
        return err ? err->status : MXL_ERR_FORMAT;
    if (prepare(m, &m->m0, err) || prepare(m, &m->m2, err)) return err ? err->status : MXL_ERR_NOMEM;
    return MXL_OK;
}

/* ---- llama.cpp's mmproj GGUF (convert_hf_to_gguf.py Qwen2VLVisionModel / Qwen3VLVisionModel) ----
 * clip.projector_type qwen2vl_merger, qwen2.5vl_merger or qwen3vl_merger; clip.vision.* sizes
 * (embedding_length, feed_forward_length, block_count, attention.head_count, patch_size,
 * projection_dim, spatial_merge_size (2), attention.layer_norm_epsilon; 2.5: n_wa_pattern, a block
 * attending over the whole image when (i + 1) % n_wa_pattern == 0, and window_size, which the
 * converter leaves out and clip.cpp takes as 112; 3: is_deepstack_layers). The Conv3d comes as its
 * two frames v.patch_embd.weight and .weight.1 [D, 3, P, P]; 2 / 2.5 split the fused qkv into
 * v.blk.N.attn_q / attn_k / attn_v (joined again here), 3 keeps attn_qkv; ln1 / ln2, attn_out,
 * ffn_up / ffn_down (2.5: and ffn_gate); the merger's norm is v.post_ln, its MLP mm.0 / mm.2;
 * 3: v.patch_embd.bias, v.position_embd.weight, v.deepstack.N.{norm, fc1, fc2} after block N.
 * GLM-4.1V (projector type glm4v): RMSNorm blocks with fused attn_qkv (biased when its
 * attention_bias was), SwiGLU MLPs without biases, the tensors of k_glm_gguf, the merger's SwiGLU
 * feed_forward_length wide, the position grid image_size / patch_size a side.
 * The rotary's theta is 10000, as clip.cpp runs these towers. */

/* A clip.vision.* integer of the mmproj (dflt when absent; dflt < 0: required). */
static mxl_status gint(const mxl_checkpoint *mm, const char *key, int64_t dflt, int64_t lo, int64_t hi, int64_t *out, mxl_error *err) {
    uint64_t v;
    if (!mxl_gguf_find(mm->gguf, key)) {
        if (dflt < 0) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s is missing", mm->path, key);
        *out = dflt;
        return MXL_OK;
    }
    mxl_status st = mxl_gguf_get_u64(mm->gguf, key, &v, err);
    if (st) return st;
    if (v < (uint64_t)lo || v > (uint64_t)hi)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s = %llu is out of range", mm->path, key, (unsigned long long)v);
    *out = (int64_t)v;
    return MXL_OK;
}

/* the Conv3d [D, 3, T = 2, P, P] from its two frames [D, 3, P, P] */
static mxl_status gguf_patch(const mxl_enc_binder *b, mxl_qwen2vl_vision *m, mxl_error *err) {
    const int64_t D = m->dim, PP = m->patch * m->patch, F = 3 * PP;
    const float *f0, *f1;
    if (mxl_enc_vector(b, D * F, &f0, "v.patch_embd.weight") || mxl_enc_vector(b, D * F, &f1, "v.patch_embd.weight.1"))
        return err ? err->status : MXL_ERR_FORMAT;
    float *w = mxl_arena_alloc(&m->arena, (size_t)(D * m->patch_dim) * sizeof(float), 64);
    if (!w) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t d = 0; d < D; d++)
        for (int64_t c = 0; c < 3; c++) {
            memcpy(w + d * m->patch_dim + (c * 2 + 0) * PP, f0 + d * F + c * PP, (size_t)PP * sizeof(float));
            memcpy(w + d * m->patch_dim + (c * 2 + 1) * PP, f1 + d * F + c * PP, (size_t)PP * sizeof(float));
        }
    m->patch_w = (mxl_weight){.kind = MXL_W_DENSE, .dtype = MXL_DTYPE_F32, .rows = D, .cols = m->patch_dim, .data = w};
    return prepare(m, &m->patch_w, err);
}

/* block i's fused qkv: attn_qkv (3, GLM) or attn_q / attn_k / attn_v joined (2, 2.5) */
static mxl_status gguf_qkv(const mxl_enc_binder *b, mxl_qwen2vl_vision *m, long long i, mxl_qwen2vl_vision_layer *L, mxl_error *err) {
    const int64_t D = m->dim;
    if (m->v3 || m->glm) { /* (GLM's q / k / v biases as its attention_bias: when the file has them) */
        const bool bias = !m->glm || mxl_enc_has(b, "v.blk.%lld.attn_qkv.bias", i);
        if (mxl_enc_matrix(b, 3 * D, D, &L->qkv, "v.blk.%lld.attn_qkv.weight", i) ||
            (bias && mxl_enc_vector(b, 3 * D, &L->qkv_b, "v.blk.%lld.attn_qkv.bias", i)))
            return err ? err->status : MXL_ERR_FORMAT;
        return MXL_OK;
    }
    static const char *const k_part[3] = {"q", "k", "v"};
    mxl_weight w[3];
    float *bias = mxl_arena_alloc(&m->arena, (size_t)(3 * D) * sizeof(float), 64);
    if (!bias) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (int j = 0; j < 3; j++) {
        const float *bj;
        if (mxl_enc_matrix(b, D, D, &w[j], "v.blk.%lld.attn_%s.weight", i, k_part[j]) || mxl_enc_vector(b, D, &bj, "v.blk.%lld.attn_%s.bias", i, k_part[j]))
            return err ? err->status : MXL_ERR_FORMAT;
        memcpy(bias + j * D, bj, (size_t)D * sizeof(float));
    }
    char name[64];
    snprintf(name, sizeof name, "v.blk.%lld.attn_q/k/v.weight", i);
    mxl_status st = mxl_weights_concat_rows(&m->arena, w, 3, name, &L->qkv, err);
    if (st) {
        mxl_error_prefix(err, "%s: ", b->ck->path);
        return st;
    }
    L->qkv_b = bias;
    return MXL_OK;
}

/* Qwen3-VL's patch bias, learned positions and DeepStack mergers */
static mxl_status gguf_v3_extras(const mxl_checkpoint *mm, const mxl_enc_binder *b, mxl_qwen2vl_vision *m, mxl_error *err) {
    const int64_t D = m->dim, M = D * m->merge * m->merge;
    const mxl_gguf_tensor_info *pe = mxl_gguf_find_tensor(mm->gguf, "v.position_embd.weight");
    const int64_t np = pe && pe->tensor.ndim == 2 ? pe->tensor.shape[0] : 0;
    m->pos_side = (int64_t)llround(sqrt((double)np));
    if (np < 1 || m->pos_side * m->pos_side != np)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: v.position_embd.weight is missing or not a square grid of positions", mm->path);
    if (mxl_enc_vector(b, D, &m->patch_b, "v.patch_embd.bias") || mxl_enc_vector(b, np * D, &m->pos_table, "v.position_embd.weight"))
        return err ? err->status : MXL_ERR_FORMAT;
    const mxl_gguf_array *ds = NULL;
    mxl_status st;
    if ((st = mxl_gguf_get_array(mm->gguf, "clip.vision.is_deepstack_layers", &ds, err))) return st;
    m->n_deep = 0;
    for (uint64_t i = 0; i < ds->n; i++) {
        mxl_gguf_value v;
        if (!mxl_gguf_array_get(ds, i, &v) || v.type != MXL_GGUF_TYPE_BOOL || i >= (uint64_t)m->n_layers)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: clip.vision.is_deepstack_layers must hold a flag per block", mm->path);
        if (!v.v.b) continue;
        if (m->n_deep == MXL_QWEN3VL_MAX_DEEP) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: more than %d DeepStack blocks", mm->path, MXL_QWEN3VL_MAX_DEEP);
        char name[64];
        snprintf(name, sizeof name, "v.deepstack.%llu", (unsigned long long)i);
        m->deep_at[m->n_deep] = (int64_t)i;
        if ((st = bind_merger(m, b, name, "fc1", "fc2", M, &m->deep_m[m->n_deep++], err))) return st;
    }
    return MXL_OK;
}

mxl_status mxl_qwen2vl_vision_load_gguf(const mxl_checkpoint *mm, mxl_qwen2vl_vision *m, mxl_error *err) {
    memset(m, 0, sizeof *m);
    mxl_arena_init(&m->arena, 64 * 1024);
    m->be = mxl_backend_host();
    mxl_gguf_str pt = {0};
    mxl_status st = mxl_gguf_get_str(mm->gguf, "clip.projector_type", &pt, err);
    if (st) return st;
    const bool v2 = pt.len == 14 && memcmp(pt.data, "qwen2vl_merger", 14) == 0;
    m->v25 = pt.len == 16 && memcmp(pt.data, "qwen2.5vl_merger", 16) == 0;
    m->v3 = pt.len == 14 && memcmp(pt.data, "qwen3vl_merger", 14) == 0;
    m->glm = pt.len == 5 && memcmp(pt.data, "glm4v", 5) == 0;
    if (!v2 && !m->v25 && !m->v3 && !m->glm)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: projector type '%.*s' is not a Qwen-VL merger", mm->path, (int)pt.len, pt.data);
    m->rms = m->swiglu = m->v25 || m->glm;
    m->temporal = 2; /* (the converter writes the Conv3d's two frames) */
    int64_t wa = 0, isz = 0;
    if ((st = gint(mm, "clip.vision.embedding_length", -1, 1, 1 << 16, &m->dim, err)) ||
        (st = gint(mm, "clip.vision.feed_forward_length", -1, 1, 1 << 18, &m->ffn, err)) ||
        (st = gint(mm, "clip.vision.block_count", -1, 1, 1024, &m->n_layers, err)) ||
        (st = gint(mm, "clip.vision.attention.head_count", -1, 1, 1024, &m->n_heads, err)) ||
        (st = gint(mm, "clip.vision.patch_size", -1, 1, 1024, &m->patch, err)) ||
        (st = gint(mm, "clip.vision.projection_dim", -1, 1, 1 << 16, &m->out_hidden, err)) ||
        (st = gint(mm, "clip.vision.spatial_merge_size", 2, 1, 16, &m->merge, err)) ||
        (m->v25 && ((st = gint(mm, "clip.vision.n_wa_pattern", -1, 1, 1024, &wa, err)) ||
                    (st = gint(mm, "clip.vision.window_size", 112, 1, 1 << 16, &m->window, err)))) ||
        (m->glm && (st = gint(mm, "clip.vision.image_size", -1, 1, 1 << 14, &isz, err))))
        return st;
    if (m->glm) { /* (feed_forward_length is the merger's SwiGLU; the blocks' MLPs are out_hidden wide) */
        m->ctx = m->ffn, m->ffn = m->out_hidden;
        m->pos_side = isz / m->patch;
        if (m->pos_side < 1 || m->pos_side * m->patch != isz)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: clip.vision.patch_size does not divide clip.vision.image_size", mm->path);
    }
    if (m->v25 && (m->window % (m->merge * m->patch) || m->window < m->merge * m->patch))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the window %lld is not a multiple of spatial_merge_size x patch_size", mm->path, (long long)m->window);
    double eps = 1e-6;
    if (mxl_gguf_find(mm->gguf, "clip.vision.attention.layer_norm_epsilon") &&
        (st = mxl_gguf_get_f64(mm->gguf, "clip.vision.attention.layer_norm_epsilon", &eps, err)))
        return st;
    m->eps = (float)eps;
    /* 2: quick_gelu (clip.cpp's FFN_GELU_QUICK); 2.5, GLM: SiLU gate (clip.use_silu); 3: tanh GELU (clip.use_gelu) */
    m->act = m->v3 ? MXL_ACT_GELU_TANH : MXL_ACT_SILU;
    m->quick_gelu = v2;
    if ((st = set_heads(m, 10000.0, mm->path, err))) return st;
    m->patch_dim = 3 * m->temporal * m->patch * m->patch;
    mxl_enc_binder b = {mm, &m->arena, "", err};
    if ((st = gguf_patch(&b, m, err))) return st;
    const int64_t D = m->dim, M = D * m->merge * m->merge;
    m->layers = mxl_arena_alloc(&m->arena, (size_t)m->n_layers * sizeof *m->layers, 64);
    if (!m->layers) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    memset(m->layers, 0, (size_t)m->n_layers * sizeof *m->layers);
    for (int64_t i = 0; i < m->n_layers; i++) {
        mxl_qwen2vl_vision_layer *L = &m->layers[i];
        L->full = !m->v25 || (i + 1) % wa == 0;
        if ((st = gguf_qkv(&b, m, (long long)i, L, err)) || (st = bind_layer(&b, &k_layer_gguf, m, i, L, err))) return st;
    }
    if (m->glm) return load_glm_extras(&b, &k_glm_gguf, m, err);
    if (mxl_enc_vector(&b, D, &m->lnq_w, "v.post_ln.weight") || (!m->rms && mxl_enc_vector(&b, D, &m->lnq_b, "v.post_ln.bias")) ||
        mxl_enc_matrix(&b, M, M, &m->m0, "mm.0.weight") || mxl_enc_vector(&b, M, &m->m0_b, "mm.0.bias") ||
        mxl_enc_matrix(&b, m->out_hidden, M, &m->m2, "mm.2.weight") || mxl_enc_vector(&b, m->out_hidden, &m->m2_b, "mm.2.bias"))
        return err ? err->status : MXL_ERR_FORMAT;
    if (prepare(m, &m->m0, err) || prepare(m, &m->m2, err)) return err ? err->status : MXL_ERR_NOMEM;
    return m->v3 ? gguf_v3_extras(mm, &b, m, err) : MXL_OK;
}

void mxl_qwen2vl_vision_free(mxl_qwen2vl_vision *m) {
    mxl_arena_free(&m->arena);
    memset(m, 0, sizeof *m);
}

/* y[r] = norm(x[r]) for rows r < n of width D: LayerNorm (2-VL, 3-VL) or RMSNorm (2.5, GLM), eps
 * m->eps. */
static void norm_rows(const mxl_qwen2vl_vision *m, mxl_threadpool *pool, const float *x, const float *w, const float *b, int64_t n,
                      float *y) {
    const int64_t D = m->dim;
    if (!m->rms) {
        mxl_enc_add_layernorm(m->be, pool, (float *)x, NULL, w, b, n, D, m->eps, y);
        return;
    }
    for (int64_t r = 0; r < n; r++) m->be->ops->rmsnorm(m->be, x + r * D, w, D, m->eps, 0, y + r * D);
}

static void quick_gelu(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-1.702f * x[i]));
}

/* x [n, hd] heads rotated in place by cs (cos [hd/2] then sin [hd/2]): NEOX halves. */
static void rotate(float *x, int64_t n_heads, int64_t hd, const float *cs) {
    const int64_t h2 = hd / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *v = x + h * hd;
        for (int64_t j = 0; j < h2; j++) {
            const float a = v[j], b = v[j + h2], c = cs[j], s = cs[h2 + j];
            v[j] = a * c - b * s;
            v[j + h2] = b * c + a * s;
        }
    }
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* One axis's two bilinear taps (align_corners) of target index i on an axis of `size` into the
 * table's `side` (transformers' _interpolation_axis_taps_weights, float32). */
static void taps_of(int64_t i, int64_t size, int64_t side, int64_t t[2], float w[2]) {
    const float src = (float)i * (float)(side - 1) / (float)(size > 1 ? size - 1 : 1), fl = floorf(src);
    for (int o = 0; o < 2; o++) {
        int64_t k = (int64_t)fl + o;
        t[o] = k < 0 ? 0 : k > side - 1 ? side - 1 : k;
        const float dist = fabsf(src - fl - (float)o);
        w[o] = 1.0f - dist > 0.0f ? 1.0f - dist : 0.0f;
    }
}

/* Qwen3-VL: x[row] += the learned positions resampled to patch (py, px) of a gh x gw grid. */
static void add_positions(const mxl_qwen2vl_vision *m, float *x, int64_t row, int64_t py, int64_t px, int64_t gh, int64_t gw) {
    const int64_t D = m->dim, S = m->pos_side;
    int64_t th[2], tw[2];
    float wh[2], ww[2];
    taps_of(py, gh, S, th, wh);
    taps_of(px, gw, S, tw, ww);
    float *r = x + row * D;
    for (int64_t c = 0; c < D; c++) {
        float acc = 0.0f;
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) acc += m->pos_table[(th[a] * S + tw[b]) * D + c] * (wh[a] * ww[b]);
        r[c] += acc;
    }
}

/* A merger over the [nu, dim m^2] rows of x (norm per patch, or per merged row for DeepStack's,
 * nw its width) into res [nu, out_hidden] (tmp, tmp2 [nu, max(dim m^2, out_hidden)] scratch). */
static void run_merger(const mxl_qwen2vl_vision *m, const float *ln_w, const float *ln_b, int64_t nw, const mxl_weight *fc1, const float *b1,
                       const mxl_weight *fc2, const float *b2, const float *x, int64_t nu, float *tmp, float *tmp2, float *res, void *mm_s,
                       mxl_threadpool *pool) {
    const int64_t M = m->dim * m->merge * m->merge;
    if (nw == m->dim) norm_rows(m, pool, x, ln_w, ln_b, nu * M / nw, tmp);
    else mxl_enc_add_layernorm(m->be, pool, (float *)x, NULL, ln_w, ln_b, nu, nw, 1e-6f, tmp);
    mxl_enc_linear_act(m->be, fc1, b1, MXL_ACT_GELU_ERF, tmp, nu, tmp2, mm_s, pool);
    mxl_enc_linear_act(m->be, fc2, b2, MXL_GEMM_ACT_NONE, tmp2, nu, res, mm_s, pool);
}

/* PyTorch's cubic convolution coefficients (A = -0.75) for fraction t (upsample_bicubic2d's). */
static void cubic_coeffs(float t, float c[4]) {
    const float A = -0.75f, x1 = t + 1.0f, x2 = 1.0f - t, x3 = 2.0f - t;
    c[0] = ((A * x1 - 5.0f * A) * x1 + 8.0f * A) * x1 - 4.0f * A;
    c[1] = ((A + 2.0f) * t - (A + 3.0f)) * t * t + 1.0f;
    c[2] = ((A + 2.0f) * x2 - (A + 3.0f)) * x2 * x2 + 1.0f;
    c[3] = ((A * x3 - 5.0f * A) * x3 + 8.0f * A) * x3 - 4.0f * A;
}

/* GLM-4.1V: x[row] += the learned positions at patch (py, px) of a gh x gw grid, as F.grid_sample
 * (bicubic, align_corners false, border) reads them at ((px + 0.5) / gw * 2 - 1, (py + 0.5) / gh *
 * 2 - 1): taps clamped into the side x side table, float32. */
static void add_positions_bicubic(const mxl_qwen2vl_vision *m, float *x, int64_t row, int64_t py, int64_t px, int64_t gh, int64_t gw) {
    const int64_t D = m->dim, S = m->pos_side;
    const float gx = ((float)px + 0.5f) / (float)gw * 2.0f - 1.0f, gy = ((float)py + 0.5f) / (float)gh * 2.0f - 1.0f;
    const float ix = ((gx + 1.0f) * (float)S - 1.0f) / 2.0f, iy = ((gy + 1.0f) * (float)S - 1.0f) / 2.0f;
    const float fx = floorf(ix), fy = floorf(iy);
    float cx[4], cy[4];
    cubic_coeffs(ix - fx, cx);
    cubic_coeffs(iy - fy, cy);
    int64_t tx[4], ty[4];
    for (int i = 0; i < 4; i++) {
        const int64_t a = (int64_t)fx - 1 + i, b = (int64_t)fy - 1 + i;
        tx[i] = a < 0 ? 0 : a > S - 1 ? S - 1 : a;
        ty[i] = b < 0 ? 0 : b > S - 1 ? S - 1 : b;
    }
    float *r = x + row * D;
    for (int64_t c = 0; c < D; c++) {
        float rows[4];
        for (int i = 0; i < 4; i++) {
            const float *t = m->pos_table + ty[i] * S * D + c;
            rows[i] = t[tx[0] * D] * cx[0] + t[tx[1] * D] * cx[1] + t[tx[2] * D] * cx[2] + t[tx[3] * D] * cx[3];
        }
        r[c] += rows[0] * cy[0] + rows[1] * cy[1] + rows[2] * cy[2] + rows[3] * cy[3];
    }
}

/* GLM-4.1V: x [n, dim] (units of m^2 rows in run order) -> res [nu, out_hidden]: post_layernorm,
 * the downsample Conv2d over each unit, then the merger (proj, LayerNorm, GELU, SwiGLU). */
static mxl_status glm_merger(const mxl_qwen2vl_vision *m, float *x, int64_t nu, float *res, void *mm_s, mxl_threadpool *pool, mxl_error *err) {
    const int64_t O = m->out_hidden, C = m->ctx, n = nu * m->merge * m->merge;
    float *t = mxl_aligned_alloc(64, ((size_t)(nu * O) * sizeof(float) + 63) / 64 * 64);
    float *gt = mxl_aligned_alloc(64, ((size_t)(nu * C) * 2 * sizeof(float) + 63) / 64 * 64);
    if (!t || !gt) {
        mxl_aligned_free(t), mxl_aligned_free(gt);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    float *up = gt + nu * C;
    norm_rows(m, pool, x, m->post_w, NULL, n, x);
    mxl_enc_linear_act(m->be, &m->ds, m->ds_b, MXL_GEMM_ACT_NONE, x, nu, res, mm_s, pool);
    mxl_enc_linear_act(m->be, &m->mp, NULL, MXL_GEMM_ACT_NONE, res, nu, t, mm_s, pool);
    mxl_enc_add_layernorm(m->be, pool, t, NULL, m->mp_ln_w, m->mp_ln_b, nu, O, 1e-5f, t);
    mxl_enc_act(m->be, pool, MXL_ACT_GELU_ERF, t, nu * O);
    mxl_enc_linear_act(m->be, &m->mg, NULL, (int)m->act, t, nu, gt, mm_s, pool);
    mxl_enc_linear_act(m->be, &m->mu, NULL, MXL_GEMM_ACT_NONE, t, nu, up, mm_s, pool);
    for (int64_t i = 0; i < nu * C; i++) gt[i] *= up[i];
    mxl_enc_linear_act(m->be, &m->md, NULL, MXL_GEMM_ACT_NONE, gt, nu, res, mm_s, pool);
    mxl_aligned_free(t), mxl_aligned_free(gt);
    return MXL_OK;
}

mxl_status mxl_qwen2vl_vision_forward(const mxl_qwen2vl_vision *m, const float *patches, int64_t gh, int64_t gw, mxl_threadpool *pool,
                                      float *out, float *deep, mxl_error *err) {
    const int64_t mg = m->merge, u2 = mg * mg, D = m->dim, F = m->ffn, hd = m->head_dim, M = D * u2;
    if (gh <= 0 || gw <= 0 || gh % mg || gw % mg || gh * gw > (INT64_C(1) << 24))
        return mxl_error_set(err, MXL_ERR_ARG, "a %lld x %lld patch grid is not whole merge blocks of %lld", (long long)gh, (long long)gw, (long long)mg);
    const int64_t n = gh * gw, nu = n / u2, lh = gh / mg, lw = gw / mg;
    const int n_threads = pool ? mxl_threadpool_size(pool) : 1;
    /* the order the rows run in: merge units (row-major over the lh x lw grid), or for 2.5 its
     * windows (vw x vw units each, row-major over the windows, row-major within) */
    int64_t *unit = mxl_malloc((size_t)nu * sizeof *unit), *wstart = mxl_malloc((size_t)(nu + 2) * sizeof *wstart);
    int64_t *pos = mxl_malloc((size_t)n * sizeof *pos), *fstart = mxl_malloc(2 * sizeof *fstart);
    float *cs = mxl_aligned_alloc(64, ((size_t)(n * hd) * sizeof(float) + 63) / 64 * 64);
    int64_t nw = 0, longest = 0;
    if (unit && wstart && pos && fstart) {
        const int64_t vw = m->v25 ? m->window / mg / m->patch : (lh > lw ? lh : lw);
        const int64_t nwh = (lh + vw - 1) / vw, nww = (lw + vw - 1) / vw;
        int64_t k = 0;
        wstart[0] = 0;
        for (int64_t a = 0; a < nwh; a++)
            for (int64_t b = 0; b < nww; b++) {
                int64_t k0 = k;
                for (int64_t y = a * vw; y < (a + 1) * vw && y < lh; y++)
                    for (int64_t x = b * vw; x < (b + 1) * vw && x < lw; x++) unit[k++] = y * lw + x;
                if (k > k0) {
                    wstart[++nw] = k * u2;
                    if ((k - k0) * u2 > longest) longest = (k - k0) * u2;
                }
            }
        if (!m->v25) { /* one window: the whole image in unit order */
            for (int64_t u = 0; u < nu; u++) unit[u] = u;
            nw = 1, wstart[1] = n, longest = n;
        }
        fstart[0] = 0, fstart[1] = n;
    }
    size_t mm = 0;
    const mxl_weight *ws[] = {&m->patch_w, &m->m0, &m->m2, &m->ds, &m->mp, &m->mg, &m->mu, &m->md};
    for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
        if (ws[j]->rows > 0) mm = max_sz(mm, mxl_enc_linear_scratch_bytes(m->be, ws[j], j ? nu : n, n_threads));
    for (int64_t l = 0; l < m->n_layers; l++) {
        const mxl_qwen2vl_vision_layer *L = &m->layers[l];
        const mxl_weight *lw2[] = {&L->qkv, &L->proj, &L->fc1, &L->fc2, &L->gate, &L->up, &L->down};
        for (size_t j = 0; j < 7; j++)
            if (lw2[j]->rows > 0) mm = max_sz(mm, mxl_enc_linear_scratch_bytes(m->be, lw2[j], n, n_threads));
    }
    const size_t att = mxl_enc_self_attention_scratch_floats(m->be, n, (int)hd, n_threads);
    /* x, h, a, o [n, D]; qkv [n, 3D]; q, k, v [n, D]; f, g [n, F]; merged [nu, max(M, out)], [nu, M] */
    const int64_t MO = M > m->out_hidden ? M : m->out_hidden;
    const size_t fl = (size_t)(n * D) * 7 + (size_t)(n * 3 * D) + (size_t)(n * F) * 2 + (size_t)(nu * (M + MO)) + att + mm / sizeof(float) + 64;
    float *buf = mxl_aligned_alloc(64, (fl * sizeof(float) + 63) / 64 * 64);
    if (!unit || !wstart || !pos || !fstart || !cs || !buf) {
        mxl_free(unit), mxl_free(wstart), mxl_free(pos), mxl_free(fstart), mxl_aligned_free(cs), mxl_aligned_free(buf);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    float *x = buf, *h = x + n * D, *a = h + n * D, *o = a + n * D, *q = o + n * D, *k = q + n * D, *v = k + n * D, *qkv = v + n * D;
    float *f = qkv + n * 3 * D, *g = f + n * F, *mrg = g + n * F, *mrg2 = mrg + nu * MO, *att_s = mrg2 + nu * M;
    void *mm_s = (void *)(((uintptr_t)(att_s + att) + 63) & ~(uintptr_t)63);
    /* patches in run order (unit by unit), embedded */
    float *pr = h; /* (n x patch_dim may exceed n x D: use the MLP buffers, n x 2F, when larger) */
    if (m->patch_dim > D) pr = f;
    if (m->patch_dim > 2 * F && m->patch_dim > D) pr = NULL;
    float *tmp = pr ? NULL : mxl_aligned_alloc(64, ((size_t)(n * m->patch_dim) * sizeof(float) + 63) / 64 * 64);
    if (!pr && !tmp) {
        mxl_free(unit), mxl_free(wstart), mxl_free(pos), mxl_free(fstart), mxl_aligned_free(cs), mxl_aligned_free(buf);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    if (!pr) pr = tmp;
    for (int64_t r = 0; r < nu; r++)
        memcpy(pr + r * u2 * m->patch_dim, patches + unit[r] * u2 * m->patch_dim, (size_t)(u2 * m->patch_dim) * sizeof(float));
    mxl_enc_linear_act(m->be, &m->patch_w, m->patch_b, MXL_GEMM_ACT_NONE, pr, n, x, mm_s, pool);
    mxl_aligned_free(tmp);
    if (m->glm) norm_rows(m, pool, x, m->post_conv_w, NULL, n, x); /* (post_conv_layernorm, before the positions) */
    /* each row's rotary table: unit u = (uy, ux), patch (my, mx) within it -> (py, px) */
    const int64_t q4 = hd / 4;
    for (int64_t r = 0; r < nu; r++)
        for (int64_t e = 0; e < u2; e++) {
            const int64_t uy = unit[r] / lw, ux = unit[r] % lw, py = uy * mg + e / mg, px = ux * mg + e % mg;
            float *c = cs + (r * u2 + e) * hd;
            if (m->pos_table && m->glm) add_positions_bicubic(m, x, r * u2 + e, py, px, gh, gw);
            else if (m->pos_table) add_positions(m, x, r * u2 + e, py, px, gh, gw);
            for (int64_t j = 0; j < q4; j++) {
                const float fh = (float)py * m->inv_freq[j], fw = (float)px * m->inv_freq[j];
                c[j] = cosf(fh), c[q4 + j] = cosf(fw);
                c[2 * q4 + j] = sinf(fh), c[3 * q4 + j] = sinf(fw);
            }
        }
    static const int32_t no_ids[1] = {0};
    mxl_encoder_batch full = {no_ids, NULL, fstart, 1}, win = {no_ids, NULL, wstart, nw};
    const float scale = 1.0f / sqrtf((float)hd);
    for (int64_t l = 0; l < m->n_layers; l++) {
        const mxl_qwen2vl_vision_layer *L = &m->layers[l];
        const mxl_encoder_batch *bt = L->full ? &full : &win;
        for (int64_t s = 0; s < bt->n_seqs; s++)
            for (int64_t t = bt->seq_start[s]; t < bt->seq_start[s + 1]; t++) pos[t] = t - bt->seq_start[s];
        norm_rows(m, pool, x, L->n1_w, L->n1_b, n, h);
        mxl_enc_linear_act(m->be, &L->qkv, L->qkv_b, MXL_GEMM_ACT_NONE, h, n, qkv, mm_s, pool);
        for (int64_t t = 0; t < n; t++) {
            memcpy(q + t * D, qkv + t * 3 * D, (size_t)D * sizeof(float));
            memcpy(k + t * D, qkv + t * 3 * D + D, (size_t)D * sizeof(float));
            memcpy(v + t * D, qkv + t * 3 * D + 2 * D, (size_t)D * sizeof(float));
            rotate(q + t * D, m->n_heads, hd, cs + t * hd);
            rotate(k + t * D, m->n_heads, hd, cs + t * hd);
        }
        mxl_enc_self_attention(m->be, bt, q, k, v, a, D, (int)m->n_heads, (int)hd, scale, pos, att_s, pool);
        mxl_enc_linear_act(m->be, &L->proj, L->proj_b, MXL_GEMM_ACT_NONE, a, n, o, mm_s, pool);
        for (int64_t i = 0; i < n * D; i++) x[i] += o[i];
        norm_rows(m, pool, x, L->n2_w, L->n2_b, n, h);
        if (m->swiglu) {
            mxl_enc_linear_act(m->be, &L->gate, L->gate_b, (int)m->act, h, n, f, mm_s, pool);
            mxl_enc_linear_act(m->be, &L->up, L->up_b, MXL_GEMM_ACT_NONE, h, n, g, mm_s, pool);
            for (int64_t i = 0; i < n * F; i++) f[i] *= g[i];
            mxl_enc_linear_act(m->be, &L->down, L->down_b, MXL_GEMM_ACT_NONE, f, n, o, mm_s, pool);
        } else {
            mxl_enc_linear_act(m->be, &L->fc1, L->fc1_b, m->quick_gelu ? MXL_GEMM_ACT_NONE : (int)m->act, h, n, f, mm_s, pool);
            if (m->quick_gelu) quick_gelu(f, n * F);
            mxl_enc_linear_act(m->be, &L->fc2, L->fc2_b, MXL_GEMM_ACT_NONE, f, n, o, mm_s, pool);
        }
        for (int64_t i = 0; i < n * D; i++) x[i] += o[i];
        for (int di = 0; deep && di < m->n_deep; di++) /* DeepStack: this block's output through its merger */
            if (m->deep_at[di] == l) {
                const mxl_qwen2vl_merger *dm = &m->deep_m[di];
                run_merger(m, dm->ln_w, dm->ln_b, M, &dm->fc1, dm->fc1_b, &dm->fc2, dm->fc2_b, x, nu, mrg2, h, mrg, mm_s, pool);
                float *dk = deep + (int64_t)di * nu * m->out_hidden;
                for (int64_t r = 0; r < nu; r++) memcpy(dk + unit[r] * m->out_hidden, mrg + r * m->out_hidden, (size_t)m->out_hidden * sizeof(float));
            }
    }
    /* the merger: m^2 consecutive rows (one unit) become one */
    if (m->glm) {
        mxl_status st = glm_merger(m, x, nu, mrg, mm_s, pool, err);
        if (st) {
            mxl_free(unit), mxl_free(wstart), mxl_free(pos), mxl_free(fstart), mxl_aligned_free(cs), mxl_aligned_free(buf);
            return st;
        }
    } else {
        run_merger(m, m->lnq_w, m->lnq_b, D, &m->m0, m->m0_b, &m->m2, m->m2_b, x, nu, mrg, mrg2, mrg, mm_s, pool);
    }
    for (int64_t r = 0; r < nu; r++) memcpy(out + unit[r] * m->out_hidden, mrg + r * m->out_hidden, (size_t)m->out_hidden * sizeof(float));
    mxl_free(unit), mxl_free(wstart), mxl_free(pos), mxl_free(fstart), mxl_aligned_free(cs), mxl_aligned_free(buf);
    return MXL_OK;
}
