/* vision_pixtral.c - the Pixtral vision tower: binding, the patch embedding with ln_pre, the 2-D
 * axial RoPE and the RMSNorm / SiLU-gated layers over one image (see vision_pixtral.h). */
#include "models/vision_pixtral.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "io/gguf.h"
#include "io/json_read.h"
#include "io/safetensors.h"
#include "models/encoder_common.h"
#include "models/weights.h"

#define PIXTRAL_EPS 1e-5f /* (PixtralRMSNorm(eps=1e-5) for ln_pre and every layer's norms) */


/* rope_theta and the rope type: vision_config.rope_parameters (transformers 5), else
 * vision_config.rope_theta; PixtralVisionRotaryEmbedding takes only "axial". */
static mxl_status read_rope(const mxl_checkpoint *ck, const json_t *vc, double *theta, mxl_error *err) {
    *theta = 10000.0;
    const json_t *rp = json_object_get(vc, "rope_parameters"), *t = NULL, *type = NULL;
    if (json_is_object(rp)) t = json_object_get(rp, "rope_theta"), type = json_object_get(rp, "rope_type");
    if (!t || json_is_null(t)) t = json_object_get(vc, "rope_theta");
    if (t && !json_is_null(t) && (!mxl_json_number(t, theta) || !(*theta > 1)))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config's rope_theta must be a number above 1", ck->dir);
    if (json_is_string(type) && strcmp(json_string_value(type), "axial") != 0 && strcmp(json_string_value(type), "default") != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s/config.json: vision_config.rope_parameters.rope_type '%s' is not supported (axial is)", ck->dir,
                             json_string_value(type));
    return MXL_OK;
}

/* head_dim (hidden / heads, as PixtralVisionConfig sets it) and the rotary's frequencies */
static mxl_status set_heads(mxl_pixtral_vision *m, double theta, const char *where, mxl_error *err) {
    if (m->hidden % m->n_heads || (m->hidden / m->n_heads) % 4 || m->hidden / m->n_heads > 1024)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %lld heads must split hidden_size %lld into heads of a multiple of 4 (at most 1024)", where,
                             (long long)m->n_heads, (long long)m->hidden);
    m->head_dim = m->hidden / m->n_heads;
    for (int64_t i = 0; i < m->head_dim / 2; i++) m->inv_freq[i] = (float)(1.0 / pow(theta, (double)(2 * i) / (double)m->head_dim));
    return MXL_OK;
}

/* The tower's tensor names: the patch Conv2d, ln_pre, and a block's (a format with %lld) norms,
 * q / k / v / o and gate / up / down. */
typedef struct pixtral_names {
    const char *patch, *ln_pre, *attn_norm, *ffn_norm, *proj[7];
    bool qk_interleaved; /* q / k rows in llama.cpp's rotary order (its converter's permute) */
} pixtral_names;
static const pixtral_names k_names_hf = {
    "patch_conv.weight", "ln_pre.weight", "transformer.layers.%lld.attention_norm.weight", "transformer.layers.%lld.ffn_norm.weight",
    {"transformer.layers.%lld.attention.q_proj.weight", "transformer.layers.%lld.attention.k_proj.weight", "transformer.layers.%lld.attention.v_proj.weight",
     "transformer.layers.%lld.attention.o_proj.weight", "transformer.layers.%lld.feed_forward.gate_proj.weight",
     "transformer.layers.%lld.feed_forward.up_proj.weight", "transformer.layers.%lld.feed_forward.down_proj.weight"},
    false};
static const pixtral_names k_names_gguf = {
    "v.patch_embd.weight", "v.pre_ln.weight", "v.blk.%lld.ln1.weight", "v.blk.%lld.ln2.weight",
    {"v.blk.%lld.attn_q.weight", "v.blk.%lld.attn_k.weight", "v.blk.%lld.attn_v.weight", "v.blk.%lld.attn_out.weight", "v.blk.%lld.ffn_gate.weight",
     "v.blk.%lld.ffn_up.weight", "v.blk.%lld.ffn_down.weight"},
    true};

/* w's rows back in the halves order the rotary here takes: llama.cpp's converter stores a head's
 * rows (half, i) at 2 i + half (LlamaModel.permute), i < head_dim / 2. */
static mxl_status unpermute(mxl_pixtral_vision *m, mxl_weight *w, const char *name, mxl_error *err) {
    const int64_t d = m->head_dim, n = m->n_heads * d;
    int64_t *idx = mxl_malloc((size_t)n * sizeof *idx);
    if (!idx) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t h = 0; h < m->n_heads; h++)
        for (int64_t half = 0; half < 2; half++)
            for (int64_t i = 0; i < d / 2; i++) idx[h * d + half * (d / 2) + i] = h * d + 2 * i + half;
    mxl_weight src = *w;
    mxl_status st = mxl_weights_gather_rows(&m->arena, &src, idx, n, name, w, err);
    mxl_free(idx);
    return st;
}

/* The patch embedding, ln_pre and every block under names nm. */
static mxl_status bind(const mxl_enc_binder *b, const pixtral_names *nm, mxl_pixtral_vision *m, mxl_error *err) {
    const int64_t H = m->hidden, I = m->ffn, K = 3 * m->patch * m->patch;
    const float *pw;
    if (mxl_enc_conv_weight(b, H, 3, m->patch * m->patch, &pw, nm->patch) || mxl_enc_vector(b, H, &m->ln_pre, "%s", nm->ln_pre))
        return err ? err->status : MXL_ERR_FORMAT;
    m->patch_w = (mxl_weight){.kind = MXL_W_DENSE, .dtype = MXL_DTYPE_F32, .rows = H, .cols = K, .data = pw};
    if (m->be->ops->weight_prepare(m->be, &m->patch_w, MXL_WEIGHT_USE_GEMM, &m->arena, err)) return err ? err->status : MXL_ERR_NOMEM;
    m->layers = mxl_arena_alloc(&m->arena, (size_t)m->n_layers * sizeof *m->layers, 64);
    if (!m->layers) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    memset(m->layers, 0, (size_t)m->n_layers * sizeof *m->layers);
    /* rows, cols of q, k, v, o, gate, up, down */
    const int64_t shape[7][2] = {{H, H}, {H, H}, {H, H}, {H, H}, {I, H}, {I, H}, {H, I}};
    for (int64_t l = 0; l < m->n_layers; l++) {
        mxl_pixtral_layer *L = &m->layers[l];
        const long long ll = (long long)l;
        mxl_weight *ws[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wg, &L->wu, &L->wd};
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        if (mxl_enc_vector(b, H, &L->attn_norm, nm->attn_norm, ll) || mxl_enc_vector(b, H, &L->ffn_norm, nm->ffn_norm, ll))
            return err ? err->status : MXL_ERR_FORMAT;
        for (int i = 0; i < 7; i++)
            if (mxl_enc_matrix(b, shape[i][0], shape[i][1], ws[i], nm->proj[i], ll)) return err ? err->status : MXL_ERR_FORMAT;
#pragma GCC diagnostic pop
        mxl_status st;
        if (nm->qk_interleaved && ((st = unpermute(m, &L->wq, "attn_q", err)) || (st = unpermute(m, &L->wk, "attn_k", err)))) return st;
        for (int i = 0; i < 7; i++)
            if ((st = m->be->ops->weight_prepare(m->be, ws[i], MXL_WEIGHT_USE_GEMM, &m->arena, err))) return st;
    }
    return MXL_OK;
}

mxl_status mxl_pixtral_vision_load(const mxl_checkpoint *ck, const json_t *vc, mxl_pixtral_vision *m, mxl_error *err) {
    memset(m, 0, sizeof *m);
    mxl_arena_init(&m->arena, 64 * 1024);
    m->be = mxl_backend_host();
    if (!vc || !json_is_object(vc)) return mxl_error_set(err, MXL_ERR_FORMAT, "%s/config.json: vision_config is missing", ck->dir);
    mxl_status st;
    int64_t ch;
    /* (PixtralVisionConfig's defaults) */
    if ((st = mxl_enc_subcfg_int(ck, vc, "vision_config", "hidden_size", 1024, 1, 1 << 16, &m->hidden, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "intermediate_size", 4096, 1, 1 << 18, &m->ffn, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "num_hidden_layers", 24, 1, 1024, &m->n_layers, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "num_attention_heads", 16, 1, 1024, &m->n_heads, err)) ||
        (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "patch_size", 16, 1, 1 << 10, &m->patch, err)) || (st = mxl_enc_subcfg_int(ck, vc, "vision_config", "num_channels", 3, 3, 3, &ch, err)))
        return st;
    double theta;
    if ((st = read_rope(ck, vc, &theta, err))) return st;
    char where[4200];
    snprintf(where, sizeof where, "%s/config.json: vision_config", ck->dir);
    if ((st = set_heads(m, theta, where, err))) return st;
    const json_t *act = json_object_get(vc, "hidden_act");
    char what[4200];
    snprintf(what, sizeof what, "%s/config.json: vision_config.hidden_act", ck->dir);
    if (mxl_enc_activation(json_is_string(act) ? json_string_value(act) : "gelu", what, &m->act, err)) return err ? err->status : MXL_ERR_UNSUPPORTED;

    static const char *const k_prefixes[] = {"vision_tower.", "model.vision_tower.", NULL};
    const char *prefix = mxl_enc_find_prefix(ck, k_prefixes, "patch_conv.weight");
    if (!prefix) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'vision_tower.patch_conv.weight' is missing (the Pixtral vision tower)", ck->path);
    mxl_enc_binder b = {ck, &m->arena, prefix, err};
    const int64_t H = m->hidden, P = m->patch;
    /* the Conv2d's [hidden, 3, p, p], or channels-last [hidden, p, p, 3] as MLX conversions store it */
    char pname[512];
    snprintf(pname, sizeof pname, "%spatch_conv.weight", prefix);
    const mxl_st_entry *pe = mxl_st_model_find(ck->st, pname);
    /* (its quantized layers: a model that still runs as text) */
    if (mxl_enc_has(&b, "transformer.layers.0.attention.q_proj.scales"))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: the Pixtral tower is quantized (an MLX conversion); it runs from dense F32/F16/BF16 weights", ck->path);
    const int64_t *ps = pe ? pe->tensor.shape : NULL;
    if (pe && (pe->tensor.ndim != 4 || ps[0] != H || !((ps[1] == 3 && ps[2] == P && ps[3] == P) || (ps[1] == P && ps[2] == P && ps[3] == 3))))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor '%s' must have shape [%lld, 3, %lld, %lld] (a PyTorch Conv2d's layout)", ck->path, pname,
                             (long long)H, (long long)P, (long long)P);
    if (mxl_enc_has(&b, "patch_conv.bias"))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the Pixtral tower's patch_conv has a bias (Pixtral's Conv2d has none)", ck->path);
    return bind(&b, &k_names_hf, m, err);
}

/* ---- llama.cpp's mmproj GGUF (projector type pixtral: convert_hf_to_gguf.py's
 * PixtralModel / LlavaVisionModel): clip.vision.embedding_length, feed_forward_length,
 * block_count, attention.head_count, patch_size; the Conv2d v.patch_embd.weight [H, 3, P, P],
 * v.pre_ln, per block ln1 / ln2 and attn_q / k / v / out, ffn_gate / up / down (no biases; q and
 * k in llama.cpp's rotary row order, put back); the rotary's theta 10000 and the SiLU MLP
 * (clip.use_silu), as clip.cpp runs the tower. */
mxl_status mxl_pixtral_vision_load_gguf(const mxl_checkpoint *mm, mxl_pixtral_vision *m, mxl_error *err) {
    memset(m, 0, sizeof *m);
    mxl_arena_init(&m->arena, 64 * 1024);
    m->be = mxl_backend_host();
    static const char *const k_keys[5] = {"clip.vision.embedding_length", "clip.vision.feed_forward_length", "clip.vision.block_count",
                                          "clip.vision.attention.head_count", "clip.vision.patch_size"};
    int64_t *dst[5] = {&m->hidden, &m->ffn, &m->n_layers, &m->n_heads, &m->patch};
    static const int64_t k_max[5] = {1 << 16, 1 << 18, 1024, 1024, 1 << 10};
    for (int i = 0; i < 5; i++) {
        uint64_t u;
        mxl_status st = mxl_gguf_get_u64(mm->gguf, k_keys[i], &u, err);
        if (st) return st;
        if (u < 1 || u > (uint64_t)k_max[i]) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s = %llu is out of range", mm->path, k_keys[i], (unsigned long long)u);
        *dst[i] = (int64_t)u;
    }
    mxl_status st = set_heads(m, 10000.0, mm->path, err);
    if (st) return st;
    m->act = MXL_ACT_SILU;
    mxl_enc_binder b = {mm, &m->arena, "", err};
    return bind(&b, &k_names_gguf, m, err);
}

void mxl_pixtral_vision_free(mxl_pixtral_vision *m) {
    mxl_arena_free(&m->arena);
    memset(m, 0, sizeof *m);
}

/* patches [rows * cols, 3 P P] of pixels [3, rows P, cols P] */
static void patchify(const float *px, int64_t rows, int64_t cols, int64_t P, float *patches) {
    const int64_t W = cols * P, Hh = rows * P, K = 3 * P * P;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            float *row = patches + (r * cols + c) * K;
            for (int64_t ch = 0; ch < 3; ch++)
                for (int64_t ky = 0; ky < P; ky++) memcpy(row + (ch * P + ky) * P, px + (ch * Hh + r * P + ky) * W + c * P, (size_t)P * sizeof(float));
        }
}

/* x [n, n_heads * d] rotated in place: position t = (t / cols, t % cols); cs [n, d] holds each
 * position's d/2 cosines then d/2 sines. */
static void rope_apply(float *x, int64_t n, int64_t n_heads, int64_t d, const float *cs) {
    const int64_t h2 = d / 2;
    for (int64_t t = 0; t < n; t++) {
        const float *c = cs + t * d, *s = c + h2;
        for (int64_t hd = 0; hd < n_heads; hd++) {
            float *v = x + (t * n_heads + hd) * d;
            for (int64_t j = 0; j < h2; j++) {
                const float a = v[j], b = v[j + h2];
                v[j] = a * c[j] - b * s[j];
                v[j + h2] = b * c[j] + a * s[j];
            }
        }
    }
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

mxl_status mxl_pixtral_vision_forward(const mxl_pixtral_vision *m, const float *pixels, int64_t rows, int64_t cols, const int64_t *layers,
                                      int n_sel, mxl_threadpool *pool, float *out, mxl_error *err) {
    const mxl_backend *be = m->be;
    const int64_t H = m->hidden, I = m->ffn, P = m->patch, K = 3 * P * P, d = m->head_dim, n = rows * cols, Wsel = (int64_t)n_sel * H;
    if (rows < 1 || cols < 1 || n > (INT64_C(1) << 24)) return mxl_error_set(err, MXL_ERR_ARG, "pixtral: an image of %lld x %lld patches", (long long)rows, (long long)cols);
    int64_t deepest = 0;
    for (int k = 0; k < n_sel; k++) {
        if (layers[k] < 0 || layers[k] > m->n_layers)
            return mxl_error_set(err, MXL_ERR_ARG, "vision feature layer %lld is outside the tower's %lld layers", (long long)layers[k], (long long)m->n_layers);
        if (layers[k] > deepest) deepest = layers[k];
    }
    const int nt = pool ? mxl_threadpool_size(pool) : 1;
    size_t mm = mxl_enc_linear_scratch_bytes(be, &m->patch_w, n, nt);
    if (m->n_layers > 0) {
        const mxl_pixtral_layer *L0 = &m->layers[0];
        mm = max_sz(mm, max_sz(mxl_enc_linear_scratch_bytes(be, &L0->wq, n, nt),
                               max_sz(mxl_enc_linear_scratch_bytes(be, &L0->wg, n, nt), mxl_enc_linear_scratch_bytes(be, &L0->wd, n, nt))));
    }
    const size_t att = mxl_enc_self_attention_scratch_floats(be, n, (int)d, nt);
    /* x, h, q, k, v, a [n, H]; g, u [n, I] (patches [n, K] in g's place first); cs [n, d] */
    const size_t big = (size_t)(n * (I > K ? I : K));
    const size_t fl = (size_t)(n * H) * 6 + big + (size_t)(n * I) + (size_t)(n * d) + att + mm / sizeof(float) + 64;
    float *buf = mxl_aligned_alloc(64, (fl * sizeof(float) + 63) / 64 * 64);
    int64_t *pos = mxl_calloc((size_t)n, sizeof *pos);
    if (!buf || !pos) {
        mxl_aligned_free(buf);
        mxl_free(pos);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    float *x = buf, *h = x + n * H, *q = h + n * H, *k = q + n * H, *v = k + n * H, *a = v + n * H, *g = a + n * H, *u = g + big, *cs = u + n * I;
    float *att_scratch = cs + n * d;
    void *mm_scratch = (void *)(((uintptr_t)(att_scratch + att) + 63) & ~(uintptr_t)63);
    for (int64_t t = 0; t < n; t++) pos[t] = t;
    /* the axial RoPE table */
    const int64_t h2 = d / 2, h4 = d / 4;
    for (int64_t t = 0; t < n; t++) {
        const float r = (float)(t / cols), c = (float)(t % cols);
        for (int64_t j = 0; j < h2; j++) {
            const float ang = j < h4 ? r * m->inv_freq[2 * j] : c * m->inv_freq[2 * (j - h4) + 1];
            cs[t * d + j] = cosf(ang);
            cs[t * d + h2 + j] = sinf(ang);
        }
    }
    /* x = ln_pre(patches Wp^T) */
    patchify(pixels, rows, cols, P, g);
    mxl_enc_linear_act(be, &m->patch_w, NULL, MXL_GEMM_ACT_NONE, g, n, x, mm_scratch, pool);
    for (int64_t t = 0; t < n; t++) be->ops->rmsnorm(be, x + t * H, m->ln_pre, H, PIXTRAL_EPS, 0, x + t * H);
    static const int32_t no_ids[1] = {0};
    int64_t starts[2] = {0, n};
    const mxl_encoder_batch bt = {no_ids, NULL, starts, 1};
    const float scale = 1.0f / sqrtf((float)d);
    for (int64_t l = 0;; l++) {
        for (int s = 0; s < n_sel; s++)
            if (layers[s] == l)
                for (int64_t t = 0; t < n; t++) memcpy(out + t * Wsel + s * H, x + t * H, (size_t)H * sizeof(float));
        if (l == deepest) break;
        const mxl_pixtral_layer *L = &m->layers[l];
        for (int64_t t = 0; t < n; t++) be->ops->rmsnorm(be, x + t * H, L->attn_norm, H, PIXTRAL_EPS, 0, h + t * H);
        mxl_enc_linear_act(be, &L->wq, NULL, MXL_GEMM_ACT_NONE, h, n, q, mm_scratch, pool);
        mxl_enc_linear_act(be, &L->wk, NULL, MXL_GEMM_ACT_NONE, h, n, k, mm_scratch, pool);
        mxl_enc_linear_act(be, &L->wv, NULL, MXL_GEMM_ACT_NONE, h, n, v, mm_scratch, pool);
        rope_apply(q, n, m->n_heads, d, cs);
        rope_apply(k, n, m->n_heads, d, cs);
        mxl_enc_self_attention(be, &bt, q, k, v, a, H, (int)m->n_heads, (int)d, scale, pos, att_scratch, pool);
        mxl_enc_linear_act(be, &L->wo, NULL, MXL_GEMM_ACT_NONE, a, n, h, mm_scratch, pool);
        for (int64_t i = 0; i < n * H; i++) x[i] += h[i];
        for (int64_t t = 0; t < n; t++) be->ops->rmsnorm(be, x + t * H, L->ffn_norm, H, PIXTRAL_EPS, 0, h + t * H);
        mxl_enc_linear_act(be, &L->wg, NULL, MXL_GEMM_ACT_NONE, h, n, g, mm_scratch, pool);
        mxl_enc_linear_act(be, &L->wu, NULL, MXL_GEMM_ACT_NONE, h, n, u, mm_scratch, pool);
        be->ops->glu(be, m->act, g, u, n * I, g);
        mxl_enc_linear_act(be, &L->wd, NULL, MXL_GEMM_ACT_NONE, g, n, h, mm_scratch, pool);
        for (int64_t i = 0; i < n * H; i++) x[i] += h[i];
    }
    mxl_aligned_free(buf);
    mxl_free(pos);
    return MXL_OK;
}
