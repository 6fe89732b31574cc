/* decoder.c - shared decoder-only transformer: family lookup, weight binding and the forward pass
 * (decoder.h). What differs between families lives in models/family_*.c (decoder_family.h).
 *
 * Reference for the math: Hugging Face transformers' modeling_llama.py and the other families'
 * modeling files. Weight formats:
 *  - Hugging Face safetensors: "<module>.weight" [out, in] dense F32/F16/BF16; MLX affine
 *    quantized modules add "<module>.scales" / "<module>.biases" with bits / group_size from
 *    config.json "quantization" (per-module overrides by module path; `false` = kept in float);
 *  - GGUF (llama.cpp's convert_hf_to_gguf.py / llama-arch.cpp): tensor names blk.N.attn_q.weight,
 *    ...; Llama-family Q/K rows are permuted at conversion so that ggml's "normal" RoPE, which
 *    rotates adjacent pairs (2i, 2i+1), reproduces HF's rotate_half: so GGUF llama uses GPT-J
 *    style, while Gemma (converted unpermuted, ggml NEOX mode) keeps the NEOX style; Gemma norm
 *    weights are stored as 1 + w, so the (1 + w) form is not applied again.
 * KV cache: paged (models/kv_pool.h): a state's positions live in 32-position blocks of a pool,
 * found through its block table; blocks are reserved before a pass runs (kv_reserve, with
 * copy-on-write of shared or published blocks), appended to per layer inside the pass, and read by
 * attention through the table (the backend's attention_paged), which visits
 * keys in position order, so the logits do not depend on where the blocks sit. Each KV row is the
 * widest layer's (d->kv_dim): a layer with narrower or fewer heads (Gemma 4's sliding layers)
 * fills its start, and a KV-shared layer reads its source layer's rows.
 * Block wiring beyond pre/post-norm residual blocks: parallel residuals, experts (models/moe.h,
 * beside the dense MLP for Gemma 4), latent attention (models/mla.h), recurrent mixers
 * (models/recurrent.h), per-layer input embeddings, and Gemma 3n's AltUp streams (models/altup.h). */
#include "models/decoder.h"

#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/memory_estimate.h"
#include "models/altup.h"
#include "models/lora.h"
#include "models/decoder_family.h"
#include "models/family_gguf.h"
#include "models/kv_pool.h"
#include "models/mla.h"
#include "models/mlx_fp.h"
#include "models/moe.h"
#include "models/weights.h"

/* ---- weight binding ---- */

typedef struct binder {
    const mxl_checkpoint *ck;
    mxl_decoder *d;
    const mxl_decoder_names *nm;
    mxl_error *err;
} binder;

static const mxl_tensor *find_tensor(const binder *b, const char *name) {
    if (b->ck->format == MXL_CHECKPOINT_GGUF) {
        const mxl_gguf_tensor_info *ti = mxl_gguf_find_tensor(b->ck->gguf, name);
        /* (llama.cpp's falcon-h1 converter names its pre-MLP norm "blk.N.ffn_norm", no ".weight") */
        const size_t len = strlen(name);
        if (!ti && len > 7 && len < 400 && strcmp(name + len - 7, ".weight") == 0) {
            char bare[400];
            memcpy(bare, name, len - 7);
            bare[len - 7] = '\0';
            ti = mxl_gguf_find_tensor(b->ck->gguf, bare);
        }
        return ti ? &ti->tensor : NULL;
    }
    const mxl_st_entry *e = mxl_st_model_find(b->ck->st, name);
    /* a bare backbone export (Qwen3Model: the Qwen3-Embedding checkpoints) stores the "model."
     * module without that prefix: embed_tokens.weight, layers.N.*, norm.weight */
    if (!e && strncmp(name, "model.", 6) == 0) e = mxl_st_model_find(b->ck->st, name + 6);
    return e ? &e->tensor : NULL;
}

/* "<module><suffix>" for globals (layer < 0), "<layers><layer>.<module><suffix>" per layer. */
static mxl_status module_name(const binder *b, int64_t layer, const char *module, const char *suffix,
                              char *out, size_t cap) {
    int w = layer < 0 ? snprintf(out, cap, "%s%s", module, suffix)
                      : snprintf(out, cap, "%s%lld.%s%s", b->nm->layers, (long long)layer, module, suffix);
    if (w < 0 || (size_t)w >= cap) return mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: tensor name too long", b->ck->path);
    return MXL_OK;
}

static mxl_status missing(const binder *b, const char *name) {
    return mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: tensor '%s' is missing", b->ck->path, name);
}

/* MLX quantization of module `base`: the config's mode, bits and group size, or its per-module
 * override. The floating-point modes (mlx_fp.h) must declare their own fixed widths. */
static mxl_status mlx_params(const binder *b, const char *base, mxl_quant_mode *mode, int *bits, int *group_size) {
    const mxl_quant_config *q = &b->ck->config.quant;
    if (q->mode != MXL_QUANT_AFFINE && !mxl_mlx_fp_mode(q->mode))
        return mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: tensor '%s.scales' is present but config.json declares no MLX quantization", b->ck->path, base);
    *mode = q->mode;
    *bits = q->bits;
    *group_size = q->group_size;
    for (int i = 0; i < q->n_overrides; i++) {
        const mxl_quant_override *o = &q->overrides[i];
        if (strcmp(o->prefix, base) != 0) continue;
        if (o->bits == 0)
            return mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: config.json leaves '%s' unquantized but the checkpoint has '%s.scales'", b->ck->path, base, base);
        if (o->mode != MXL_QUANT_AFFINE && !mxl_mlx_fp_mode(o->mode))
            return mxl_error_set(b->err, MXL_ERR_UNSUPPORTED, "%s: quantization mode '%s' of '%s' is not supported (affine, mxfp4, mxfp8, nvfp4)", b->ck->path,
                                 mxl_quant_mode_name(o->mode), base);
        *mode = o->mode;
        *bits = o->bits;
        *group_size = o->group_size;
    }
    const int want_bits = mxl_mlx_fp_bits(*mode), want_gs = mxl_mlx_fp_group(*mode);
    if (*mode != MXL_QUANT_AFFINE && (*bits != want_bits || *group_size != want_gs))
        return mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: '%s' declares %s with bits=%d, group_size=%d; that mode is bits=%d, group_size=%d", b->ck->path,
                             base, mxl_quant_mode_name(*mode), *bits, *group_size, want_bits, want_gs);
    return MXL_OK;
}

/* A stacked tensor [stack, rows, cols] viewed as the matrix [stack * rows, cols] (stack > 0: the
 * tensor must be 3-D with that outer size); a vector [cols] as [1, cols] where one row is asked;
 * otherwise t itself. NULL + error when a stacked tensor has another rank or outer size. */
static const mxl_tensor *as_matrix(const binder *b, const mxl_tensor *t, const char *name, int64_t stack, int64_t rows,
                                   mxl_tensor *view) {
    if (stack > 0) {
        if (t->ndim == 2 && t->shape[0] == rows) return t; /* already [stack * rows, cols] (DBRX's w1 / v1) */
        if (t->ndim != 3 || t->shape[0] != stack) {
            char sh[96];
            mxl_tensor_shape_str(t, sh, sizeof sh);
            mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected %lld stacked experts [%lld, ...]", b->ck->path, name, sh,
                          (long long)stack, (long long)stack);
            return NULL;
        }
        *view = *t;
        view->ndim = 2;
        view->shape[0] = t->shape[0] * t->shape[1];
        view->shape[1] = t->shape[2];
        return view;
    }
    if (rows == 1 && t->ndim == 1) {
        *view = *t;
        view->ndim = 2;
        view->shape[0] = 1;
        view->shape[1] = t->shape[0];
        return view;
    }
    return t;
}

/* GPT-OSS's released MXFP4 experts: "<module>_blocks" uint8 [E, rows, cols / 32, 16] (elements 2k,
 * 2k + 1 of a block in the low, high nibble of byte k: E2M1 codes) and "<module>_scales" uint8
 * [E, rows, cols / 32] (E8M0, 2^(s - 127)), as one owned GGUF MXFP4 weight [E * rows, cols]
 * (ggml's order: element j in the low nibble of byte j, j + 16 in the high; its doubled values
 * under a halved scale are the same numbers). interleaved: each expert's rows alternate two halves
 * (GPT-OSS's gate, up): the even ones first, as mxl_weights_stacked_transposed does. */
static mxl_status bind_mxfp4_stacked(const binder *b, int64_t layer, const char *module, int64_t E, int64_t rows, int64_t cols,
                                     bool interleaved, mxl_weight *w) {
    char bname[400], sname[400];
    mxl_status st;
    if ((st = module_name(b, layer, module, "_blocks", bname, sizeof bname)) || (st = module_name(b, layer, module, "_scales", sname, sizeof sname)))
        return st;
    const mxl_tensor *bt = find_tensor(b, bname), *stt = find_tensor(b, sname);
    if (!bt) return missing(b, bname);
    if (!stt) return missing(b, sname);
    const int64_t G = cols / 32;
    if (cols % 32 || (interleaved && rows % 2) || bt->dtype != MXL_DTYPE_U8 || stt->dtype != MXL_DTYPE_U8 || bt->ndim != 4 || stt->ndim != 3 ||
        bt->shape[0] != E || bt->shape[1] != rows || bt->shape[2] != G || bt->shape[3] != 16 || stt->shape[0] != E || stt->shape[1] != rows ||
        stt->shape[2] != G)
        return mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: tensors '%s' / '%s' must be uint8 [%lld, %lld, %lld, 16] / [%lld, %lld, %lld] (MXFP4 blocks of [%lld, %lld])",
                             b->ck->path, bname, sname, (long long)E, (long long)rows, (long long)G, (long long)E, (long long)rows, (long long)G,
                             (long long)rows, (long long)cols);
    uint8_t *out = mxl_arena_alloc(&b->d->arena, (size_t)(E * rows * G) * 17, 64); /* (17-byte blocks: e, then qs[16]) */
    if (!out) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory repacking '%s'", bname);
    const uint8_t *src = bt->data, *sc = stt->data;
    for (int64_t e = 0; e < E; e++)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t from = interleaved ? (r < rows / 2 ? 2 * r : 2 * (r - rows / 2) + 1) : r;
            for (int64_t g = 0; g < G; g++) {
                const uint8_t *in = src + (((e * rows + from) * G + g) * 16);
                uint8_t *o = out + ((e * rows + r) * G + g) * 17, code[32];
                for (int k = 0; k < 16; k++) code[2 * k] = in[k] & 15, code[2 * k + 1] = in[k] >> 4;
                for (int j = 0; j < 16; j++) o[1 + j] = (uint8_t)(code[j] | code[j + 16] << 4);
                o[0] = sc[(e * rows + from) * G + g];
            }
        }
    *w = (mxl_weight){MXL_W_GGUF, MXL_DTYPE_MXFP4, E * rows, cols, out, {0}, NULL};
    if ((st = mxl_weight_check(w, bname, b->err))) mxl_error_prefix(b->err, "%s: ", b->ck->path);
    return st;
}

/* BitNet's packed ternary matrix `name` (uint8 [ceil(rows / 4), cols], decoder.h bitnet_packed)
 * with its scalar <base>.weight_scale, as an owned MLX 2-bit weight in the largest group of 128 /
 * 64 / 32 that divides cols, f32 scales s and biases -s: w = s q - s = s t exactly. */
static mxl_status bind_ternary(const binder *b, const char *base, const char *name, const mxl_tensor *t, int64_t rows, int64_t cols,
                               mxl_weight *w) {
    const int64_t r4 = (rows + 3) / 4, gs = cols % 128 == 0 ? 128 : cols % 64 == 0 ? 64 : 32;
    if (t->ndim != 2 || t->shape[0] != r4 || t->shape[1] != cols || cols % 32 != 0)
        return mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: tensor '%s' must be uint8 [%lld, %lld] (ternary codes of [%lld, %lld], in a multiple of 32)",
                             b->ck->path, name, (long long)r4, (long long)cols, (long long)rows, (long long)cols);
    char sname[400];
    snprintf(sname, sizeof sname, "%s.weight_scale", base);
    const mxl_tensor *st_t = find_tensor(b, sname);
    if (!st_t) return missing(b, sname);
    const float *ws = NULL;
    mxl_status st = mxl_weights_vector_f32(&b->d->arena, st_t, sname, 1, &ws, b->err);
    if (st) {
        mxl_error_prefix(b->err, "%s: ", b->ck->path);
        return st;
    }
    if (!(ws[0] > 0) || !isfinite(ws[0]))
        return mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: tensor '%s' is %g; a weight scale must be positive and finite", b->ck->path, sname, (double)ws[0]);
    const float s = b->d->hp.bitnet_scale_divides ? 1.0f / ws[0] : ws[0];
    const int64_t words = cols / 16, groups = cols / gs;
    uint32_t *codes = mxl_arena_alloc(&b->d->arena, (size_t)(rows * words) * sizeof(uint32_t), 64);
    float *sc = mxl_arena_alloc(&b->d->arena, (size_t)(rows * groups) * sizeof(float), 64);
    float *bi = mxl_arena_alloc(&b->d->arena, (size_t)(rows * groups) * sizeof(float), 64);
    if (!codes || !sc || !bi) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory unpacking '%s'", name);
    const uint8_t *src = t->data;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *row = src + (r % r4) * cols;
        const int shift = (int)(2 * (r / r4));
        for (int64_t j = 0; j < words; j++) {
            uint32_t word = 0;
            for (int e = 0; e < 16; e++) {
                const uint32_t q = (row[j * 16 + e] >> shift) & 3u;
                if (q == 3)
                    return mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: tensor '%s' holds the code 3 at row %lld: ternary codes are 0, 1, 2", b->ck->path,
                                         name, (long long)r);
                word |= q << (2 * e);
            }
            codes[r * words + j] = word;
        }
        for (int64_t g = 0; g < groups; g++) sc[r * groups + g] = s, bi[r * groups + g] = -s;
    }
    memset(w, 0, sizeof *w);
    w->kind = MXL_W_MLX;
    w->rows = w->mlx.rows = rows;
    w->cols = w->mlx.cols = cols;
    w->mlx.bits = 2;
    w->mlx.group_size = (int)gs;
    w->mlx.scale_dtype = MXL_DTYPE_F32;
    w->mlx.w = codes;
    w->mlx.scales = sc;
    w->mlx.biases = bi;
    return MXL_OK;
}

/* A [rows, cols] matrix: dense / GGUF view, MLX affine (scales present), or a transposed Conv1D
 * copy (names->conv1d, per-layer matrices only); with stack > 0 a stacked [stack, rows / stack,
 * cols] tensor (MoE experts) viewed whole. */
static mxl_status bind_matrix_stacked(const binder *b, int64_t layer, const char *module, int64_t stack, int64_t rows,
                                      int64_t cols, mxl_weight *w) {
    char base[384], name[400];
    mxl_status st;
    memset(w, 0, sizeof *w);
    if ((st = module_name(b, layer, module, "", base, sizeof base))) return st;
    snprintf(name, sizeof name, "%s.weight", base);
    mxl_tensor tv, sv, bv;
    const mxl_tensor *t = find_tensor(b, name);
    /* transformers 5's own stacked experts are bare parameters ("mlp.experts.gate_up_proj"),
     * [E, in, out] in Llama 4's layout: an owned transposed copy */
    bool bare = false;
    if (!t && stack > 0 && (t = find_tensor(b, base))) snprintf(name, sizeof name, "%s", base), bare = true;
    if (!t) return missing(b, name);
    if (bare && (b->nm->exps_native_transposed || (b->nm->exps_down_transposed && module == b->nm->exps_down))) {
        const bool gate_up = strstr(name, "gate_up") != NULL;
        st = mxl_weights_stacked_transposed(&b->d->arena, t, name, stack, rows / stack, cols, gate_up && b->nm->exps_native_interleaved, w,
                                            b->err);
        if (st) mxl_error_prefix(b->err, "%s: ", b->ck->path);
        return st;
    }
    if (b->d->hp.bitnet_packed && layer >= 0 && stack == 0 && t->dtype == MXL_DTYPE_U8) return bind_ternary(b, base, name, t, rows, cols, w);
    if (!(t = as_matrix(b, t, name, stack, rows, &tv))) return MXL_ERR_FORMAT;
    if (b->ck->format == MXL_CHECKPOINT_SAFETENSORS) {
        char sname[400], bname[400];
        snprintf(sname, sizeof sname, "%s.scales", base);
        snprintf(bname, sizeof bname, "%s.biases", base);
        const mxl_tensor *sc = find_tensor(b, sname);
        if (sc) {
            int bits = 0, gs = 0;
            mxl_quant_mode mode = MXL_QUANT_AFFINE;
            if ((st = mlx_params(b, base, &mode, &bits, &gs))) return st;
            if (mode != MXL_QUANT_AFFINE) { /* mxfp4 / mxfp8 / nvfp4: no biases */
                if (!(sc = as_matrix(b, sc, sname, stack, rows, &sv))) return MXL_ERR_FORMAT;
                st = mxl_mlx_fp_weight(t, sc, mode, name, &b->d->arena, w, b->err);
                if (st == MXL_OK && (w->rows != rows || w->cols != cols))
                    st = mxl_error_set(b->err, MXL_ERR_FORMAT, "tensor '%s' holds [%lld, %lld] (%s), expected [%lld, %lld]", name, (long long)w->rows,
                                       (long long)w->cols, mxl_quant_mode_name(mode), (long long)rows, (long long)cols);
                if (st) mxl_error_prefix(b->err, "%s: ", b->ck->path);
                return st;
            }
            const mxl_tensor *bi = find_tensor(b, bname);
            if (!bi) return missing(b, bname);
            if (!(sc = as_matrix(b, sc, sname, stack, rows, &sv)) || !(bi = as_matrix(b, bi, bname, stack, rows, &bv)))
                return MXL_ERR_FORMAT;
            st = mxl_weight_from_mlx(t, sc, bi, bits, gs, name, w, b->err);
            if (st == MXL_OK && (w->rows != rows || w->cols != cols))
                st = mxl_error_set(b->err, MXL_ERR_FORMAT, "tensor '%s' holds [%lld, %lld] (bits=%d, group_size=%d), expected [%lld, %lld]", name,
                                   (long long)w->rows, (long long)w->cols, bits, gs, (long long)rows, (long long)cols);
            if (st) mxl_error_prefix(b->err, "%s: ", b->ck->path);
            return st;
        }
    }
    if (layer >= 0 && b->nm->conv1d && stack == 0)
        st = mxl_weights_matrix_transposed(&b->d->arena, t, name, rows, cols, w, b->err);
    else
        st = mxl_weights_matrix(t, name, rows, cols, w, b->err);
    if (st) mxl_error_prefix(b->err, "%s: ", b->ck->path);
    return st;
}

static mxl_status bind_matrix(const binder *b, int64_t layer, const char *module, int64_t rows, int64_t cols,
                              mxl_weight *w) {
    return bind_matrix_stacked(b, layer, module, 0, rows, cols, w);
}

/* An f32 vector "<module><suffix>" of n elements. */
static mxl_status bind_vector(const binder *b, int64_t layer, const char *module, const char *suffix, int64_t n,
                              const float **out) {
    char name[400];
    mxl_status st;
    *out = NULL;
    if ((st = module_name(b, layer, module, suffix, name, sizeof name))) return st;
    const mxl_tensor *t = find_tensor(b, name);
    if (!t) return missing(b, name);
    st = mxl_weights_vector_f32(&b->d->arena, t, name, n, out, b->err);
    if (st) mxl_error_prefix(b->err, "%s: ", b->ck->path);
    return st;
}

/* n floats in the decoder's arena: all ones, or 1 + src[i] (src given) */
static const float *ones_plus(const binder *b, const float *src, int64_t n) {
    float *v = mxl_arena_alloc(&b->d->arena, (size_t)n * sizeof(float), 64);
    if (!v) {
        mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) v[i] = 1.0f + (src ? src[i] : 0.0f);
    return v;
}

static mxl_status bind_norm(const binder *b, int64_t layer, const char *module, int64_t n, mxl_decoder_norm *out) {
    const mxl_decoder_hparams *hp = &b->d->hp;
    memset(out, 0, sizeof *out);
    if (hp->norm_no_weight) /* a weight of ones marks the norm present; the kernel multiplies by 1 */
        return (out->w = ones_plus(b, NULL, n)) ? MXL_OK : MXL_ERR_NOMEM;
    if (!module)
        return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no tensor for a norm it uses", b->ck->path);
    mxl_status st = bind_vector(b, layer, module, ".weight", n, &out->w);
    if (st == MXL_OK && hp->norm == MXL_NORM_LAYER && !hp->norm_no_bias) st = bind_vector(b, layer, module, ".bias", n, &out->b);
    if (st == MXL_OK && hp->norm == MXL_NORM_LAYER && hp->norm_plus_one && !(out->w = ones_plus(b, out->w, n)))
        return MXL_ERR_NOMEM;
    return st;
}

/* A projection with an optional bias (separate module, or rows of a fused one). */
static mxl_status bind_proj(const binder *b, int64_t layer, const char *module, int64_t rows, int64_t cols, bool bias,
                            mxl_weight *w, const float **bvec) {
    mxl_status st = bind_matrix(b, layer, module, rows, cols, w);
    if (st == MXL_OK && bias) st = bind_vector(b, layer, module, ".bias", rows, bvec);
    return st;
}

/* Splits a fused projection [sum(sizes), cols] (and its bias) into n row views. */
static mxl_status bind_fused(const binder *b, int64_t layer, const char *module, const int64_t *sizes, int n, int64_t cols,
                             bool bias, mxl_weight *const *ws, const float **const *bs) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += sizes[i];
    mxl_weight fused;
    const float *fb = NULL;
    mxl_status st = bind_proj(b, layer, module, total, cols, bias, &fused, &fb);
    if (st) return st;
    char name[400];
    module_name(b, layer, module, ".weight", name, sizeof name);
    int64_t r0 = 0;
    for (int i = 0; i < n; i++) {
        if ((st = mxl_weights_rows(&fused, r0, sizes[i], name, ws[i], b->err))) return st;
        if (fb) *bs[i] = fb + r0;
        r0 += sizes[i];
    }
    return MXL_OK;
}

/* A fused projection [heads * 3 * head_dim, cols] whose rows are grouped per head (q, k, v of
 * head 0, then of head 1, ...; GPT-NeoX query_key_value, MHA only): owned copies of the q, k and v
 * rows (and biases) in head order, so the rest of the decoder sees three plain projections. */
static mxl_status bind_fused_per_head(const binder *b, int64_t layer, const char *module, int64_t cols, bool bias,
                                      mxl_weight *const *ws, const float **const *bs) {
    const mxl_decoder_hparams *hp = &b->d->hp;
    const int64_t hd = hp->head_dim, nh = hp->n_heads, qd = nh * hd;
    if (hp->n_kv_heads != nh)
        return mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: a per-head fused qkv needs as many KV heads as heads", b->ck->path);
    mxl_weight fused;
    const float *fb = NULL;
    mxl_status st = bind_proj(b, layer, module, 3 * qd, cols, bias, &fused, &fb);
    if (st) return st;
    char name[400];
    module_name(b, layer, module, ".weight", name, sizeof name);
    int64_t *idx = mxl_malloc((size_t)qd * sizeof *idx);
    if (!idx) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
    for (int part = 0; part < 3 && st == MXL_OK; part++) {
        for (int64_t h = 0; h < nh; h++)
            for (int64_t j = 0; j < hd; j++) idx[h * hd + j] = h * 3 * hd + part * hd + j;
        st = mxl_weights_gather_rows(&b->d->arena, &fused, idx, qd, name, ws[part], b->err);
        if (st == MXL_OK && fb) {
            float *v = mxl_arena_alloc(&b->d->arena, (size_t)qd * sizeof(float), 64);
            if (!v) st = mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
            else for (int64_t r = 0; r < qd; r++) v[r] = fb[idx[r]];
            *bs[part] = v;
        }
    }
    mxl_free(idx);
    if (st) mxl_error_prefix(b->err, "%s: ", b->ck->path);
    return st;
}

/* True when the checkpoint holds "<layers><layer>.<module><suffix>" (module NULL: false). */
static bool has_tensor(const binder *b, int64_t layer, const char *module, const char *suffix) {
    char name[400];
    return module && module_name(b, layer, module, suffix, name, sizeof name) == MXL_OK && find_tensor(b, name);
}

/* Expert e's rows [r0, r0 + n) of a stacked matrix as its own weight. */
static mxl_status expert_rows(const binder *b, int64_t layer, const char *module, const mxl_weight *all, int64_t r0, int64_t n,
                              mxl_weight *out) {
    char name[400];
    module_name(b, layer, module, ".weight", name, sizeof name);
    mxl_status st = mxl_weights_rows(all, r0, n, name, out, b->err);
    if (st) mxl_error_prefix(b->err, "%s: ", b->ck->path);
    return st;
}

/* The stacked experts' biases: transformers' own "<gate_up>_bias" [E, 2F] (GPT-OSS: gate and up
 * interleaved, split here) and "<experts>down_proj_bias" [E, H], else "<exps_gate | up | down>.bias"
 * [E, F] / [E, H] (mlx-lm, GGUF). */
static mxl_status bind_expert_biases(const binder *b, int64_t i, const char *native_gate_up, mxl_moe_layer *m) {
    const mxl_decoder_hparams *hp = &b->d->hp;
    const mxl_decoder_names *nm = b->nm;
    const int64_t E = hp->n_experts, F = hp->moe_ffn, H = hp->hidden;
    mxl_status st;
    if (!native_gate_up)
        return (st = bind_vector(b, i, nm->exps_gate, ".bias", E * F, &m->gate_b)) || (st = bind_vector(b, i, nm->exps_up, ".bias", E * F, &m->up_b)) ||
                       (st = bind_vector(b, i, nm->exps_down, ".bias", E * H, &m->down_b))
                   ? st
                   : MXL_OK;
    char down[256];
    const float *gu;
    snprintf(down, sizeof down, "%sdown_proj", nm->experts);
    if ((st = bind_vector(b, i, native_gate_up, "_bias", E * 2 * F, &gu)) || (st = bind_vector(b, i, down, "_bias", E * H, &m->down_b))) return st;
    float *g = mxl_arena_alloc(&b->d->arena, (size_t)(2 * E * F) * sizeof(float), 64);
    if (!g) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; e < E; e++)
        for (int64_t j = 0; j < F; j++) {
            const float *src = gu + e * 2 * F;
            g[e * F + j] = nm->exps_native_interleaved ? src[2 * j] : src[j];
            g[E * F + e * F + j] = nm->exps_native_interleaved ? src[2 * j + 1] : src[F + j];
        }
    m->gate_b = g;
    m->up_b = g + E * F;
    return MXL_OK;
}

/* Layer i's sparse MoE block (decoder_family.h: the MoE names): router, experts (per-expert
 * modules, stacked tensors or a stacked fused gate_up) and the shared expert. */
/* Plain experts (hp.moe_plain: up and down, no gate): one module per expert
 * "<experts><e>.<expert_up | expert_down>", transformers' own stacked "<experts>up_proj" [E, F, H] /
 * "<experts>down_proj" [E, H, F], or the stacked "<exps_up>" / "<exps_down>" (MLX). */
static mxl_status bind_plain_experts(const binder *b, int64_t i, mxl_moe_layer *m) {
    const mxl_decoder_hparams *hp = &b->d->hp;
    const mxl_decoder_names *nm = b->nm;
    const int64_t E = hp->n_experts, F = hp->moe_ffn, H = hp->hidden;
    mxl_status st;
    char mod[2][256];
    if (nm->experts && nm->expert_up && (snprintf(mod[0], sizeof mod[0], "%s0.%s", nm->experts, nm->expert_up), has_tensor(b, i, mod[0], ".weight"))) {
        for (int64_t e = 0; e < E; e++) {
            snprintf(mod[0], sizeof mod[0], "%s%lld.%s", nm->experts, (long long)e, nm->expert_up);
            snprintf(mod[1], sizeof mod[1], "%s%lld.%s", nm->experts, (long long)e, nm->expert_down);
            if ((st = bind_matrix(b, i, mod[0], F, H, &m->up[e])) || (st = bind_matrix(b, i, mod[1], H, F, &m->down[e]))) return st;
        }
        return MXL_OK;
    }
    snprintf(mod[0], sizeof mod[0], "%sup_proj", nm->experts ? nm->experts : "");
    snprintf(mod[1], sizeof mod[1], "%sdown_proj", nm->experts ? nm->experts : "");
    const bool own = nm->experts && has_tensor(b, i, mod[0], "");
    const char *up = own ? mod[0] : nm->exps_up, *down = own ? mod[1] : nm->exps_down;
    if (!up || !down) return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no stacked expert tensors", b->ck->path);
    mxl_weight u, d;
    if ((st = bind_matrix_stacked(b, i, up, E, E * F, H, &u)) || (st = bind_matrix_stacked(b, i, down, E, E * H, F, &d))) return st;
    for (int64_t e = 0; e < E; e++)
        if ((st = expert_rows(b, i, up, &u, e * F, F, &m->up[e])) || (st = expert_rows(b, i, down, &d, e * H, H, &m->down[e]))) return st;
    return MXL_OK;
}

static mxl_status bind_moe(const binder *b, int64_t i, mxl_decoder_layer *L) {
    const mxl_decoder_hparams *hp = &b->d->hp;
    const mxl_decoder_names *nm = b->nm;
    const int64_t E = hp->n_experts, F = hp->moe_ffn, H = hp->hidden;
    mxl_status st;
    mxl_moe_layer *m = mxl_arena_alloc(&b->d->arena, sizeof *m, 64);
    mxl_weight *ws = mxl_arena_alloc(&b->d->arena, (size_t)(3 * E) * sizeof *ws, 64);
    if (!m || !ws) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
    memset(m, 0, sizeof *m);
    memset(ws, 0, (size_t)(3 * E) * sizeof *ws);
    m->gate = ws;
    m->up = ws + E;
    m->down = ws + 2 * E;
    if (!nm->moe_router) return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no MoE router", b->ck->path);
    /* (mlx-lm's Laguna wraps the router's matrix as "<router>.proj") */
    char wrapped[256];
    snprintf(wrapped, sizeof wrapped, "%s.proj", nm->moe_router);
    const char *router = !has_tensor(b, i, nm->moe_router, ".weight") && has_tensor(b, i, wrapped, ".weight") ? wrapped : nm->moe_router;
    if ((st = bind_matrix(b, i, router, E, H, &m->router))) return st;
    if (hp->moe_router_logit_bias && (st = bind_vector(b, i, nm->moe_router, ".bias", E, &m->router_logit_bias))) return st;
    char mxfp4[256];
    snprintf(mxfp4, sizeof mxfp4, "%sgate_up_proj_blocks", nm->experts ? nm->experts : "");
    const bool blocks = nm->experts && has_tensor(b, i, mxfp4, ""); /* GPT-OSS's released MXFP4 experts */
    /* the sigmoid router's bias is part of it; a softmax router's (ERNIE) is absent from mlx-lm's
     * conversions, which choose by probability alone: so do we there */
    if ((hp->moe_router == MXL_MOE_SIGMOID && !hp->moe_sigmoid_no_bias) || (hp->moe_select_bias && has_tensor(b, i, nm->moe_router_bias, ""))) {
        if (!nm->moe_router_bias) return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no router correction bias", b->ck->path);
        /* mlx-lm keeps it inside the gate module (DeepSeek's place) whatever the source named */
        char in_gate[256];
        snprintf(in_gate, sizeof in_gate, "%s.e_score_correction_bias", nm->moe_router);
        const char *rb = !has_tensor(b, i, nm->moe_router_bias, "") && has_tensor(b, i, in_gate, "") ? in_gate : nm->moe_router_bias;
        if ((st = bind_vector(b, i, rb, "", E, &m->router_bias))) return st;
    }
    char mod[3][256];
    if (hp->moe_plain) {
        if ((st = bind_plain_experts(b, i, m))) return st;
    } else if (nm->experts && nm->expert_gate && (snprintf(mod[0], sizeof mod[0], "%s0.%s", nm->experts, nm->expert_gate), has_tensor(b, i, mod[0], ".weight"))) {
        const char *part[3] = {nm->expert_gate, nm->expert_up, nm->expert_down};
        for (int64_t e = 0; e < E; e++) {
            for (int p = 0; p < 3; p++) snprintf(mod[p], sizeof mod[p], "%s%lld.%s", nm->experts, (long long)e, part[p]);
            if ((st = bind_matrix(b, i, mod[0], F, H, &m->gate[e])) || (st = bind_matrix(b, i, mod[1], F, H, &m->up[e])) ||
                (st = bind_matrix(b, i, mod[2], H, F, &m->down[e])))
                return st;
        }
    } else {
        mxl_weight g, u, d;
        /* transformers 5's own layout (what it saves for a model it has no conversion mapping
         * for): "<experts>gate_up_proj" [E, 2F, H], gate rows first, and "<experts>down_proj" */
        char native[2][256];
        snprintf(native[0], sizeof native[0], "%sgate_up_proj", nm->experts ? nm->experts : "");
        snprintf(native[1], sizeof native[1], "%sdown_proj", nm->experts ? nm->experts : "");
        const bool own = nm->experts && (blocks || has_tensor(b, i, native[0], ""));
        const bool fused = own || (nm->exps_gate_up && has_tensor(b, i, nm->exps_gate_up, ".weight"));
        const char *gate_up = own ? native[0] : nm->exps_gate_up,
                   *down = own ? native[1] : fused && nm->exps_fused_down ? nm->exps_fused_down : nm->exps_down;
        if (!fused && (!nm->exps_gate || !nm->exps_up || !nm->exps_down))
            return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no stacked expert tensors", b->ck->path);
        if (blocks) {
            if ((st = bind_mxfp4_stacked(b, i, gate_up, E, 2 * F, H, nm->exps_native_interleaved, &g)) ||
                (st = bind_mxfp4_stacked(b, i, down, E, H, F, false, &d)))
                return st;
        } else if (fused ? (st = bind_matrix_stacked(b, i, gate_up, E, E * 2 * F, H, &g))
                         : ((st = bind_matrix_stacked(b, i, nm->exps_gate, E, E * F, H, &g)) ||
                            (st = bind_matrix_stacked(b, i, nm->exps_up, E, E * F, H, &u)))) {
            return st;
        }
        if (!blocks && (st = bind_matrix_stacked(b, i, down, E, E * H, F, &d))) return st;
        for (int64_t e = 0; e < E; e++) {
            if (fused ? (st = expert_rows(b, i, gate_up, &g, e * 2 * F, F, &m->gate[e])) ||
                            (st = expert_rows(b, i, gate_up, &g, e * 2 * F + F, F, &m->up[e]))
                      : (st = expert_rows(b, i, nm->exps_gate, &g, e * F, F, &m->gate[e])) ||
                            (st = expert_rows(b, i, nm->exps_up, &u, e * F, F, &m->up[e])))
                return st;
            if ((st = expert_rows(b, i, down, &d, e * H, H, &m->down[e]))) return st;
        }
        if (hp->moe_expert_bias && (st = bind_expert_biases(b, i, own ? native[0] : NULL, m))) return st;
    }
    if (hp->shared_ffn > 0 && hp->moe_plain) { /* a plain shared expert: up and down */
        if (!nm->sh_up || !nm->sh_down) return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no shared expert", b->ck->path);
        if ((st = bind_matrix(b, i, nm->sh_up, hp->shared_ffn, H, &m->sh_up)) ||
            (st = bind_matrix(b, i, nm->sh_down, H, hp->shared_ffn, &m->sh_down)))
            return st;
    } else if (hp->shared_ffn > 0) {
        const int64_t S = hp->shared_ffn;
        if ((!nm->sh_gate_up && (!nm->sh_gate || !nm->sh_up)) || !nm->sh_down)
            return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no shared expert", b->ck->path);
        if (nm->sh_gate_up) { /* one [gate; up] matrix (Granite 4's shared_mlp.input_linear) */
            const int64_t sizes[2] = {S, S};
            mxl_weight *const sw[2] = {&m->sh_gate, &m->sh_up};
            const float *sb[2];
            const float **const sbp[2] = {&sb[0], &sb[1]};
            if ((st = bind_fused(b, i, nm->sh_gate_up, sizes, 2, H, false, sw, sbp))) return st;
        } else if ((st = bind_matrix(b, i, nm->sh_gate, S, H, &m->sh_gate)) || (st = bind_matrix(b, i, nm->sh_up, S, H, &m->sh_up))) {
            return st;
        }
        if ((st = bind_matrix(b, i, nm->sh_down, H, S, &m->sh_down))) return st;
        if (hp->shared_expert_gate) {
            if (!nm->sh_router) return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no shared expert gate", b->ck->path);
            if ((st = bind_matrix(b, i, nm->sh_router, 1, H, &m->sh_router))) return st;
        }
    }
    L->moe = m;
    return MXL_OK;
}

/* Layer i's latent attention (models/mla.h; decoder_family.h: the MLA names): the query
 * projection(s) into L->wq, the latent projection, the per-head absorbed key and value maps
 * (GGUF's split k_b / v_b as views; otherwise kv_b's value rows as views and its key rows
 * transposed into owned f32 copies, since a head's query is multiplied by their transpose) and
 * the output projection. */
static mxl_status bind_mla(const binder *b, int64_t i, mxl_decoder_layer *L) {
    const mxl_decoder_hparams *hp = &b->d->hp;
    const mxl_decoder_names *nm = b->nm;
    const int64_t H = hp->hidden, NH = hp->n_heads, R = hp->mla_kv_rank, dn = hp->mla_nope_dim, dr = hp->mla_rope_dim,
                  dv = hp->mla_v_dim, Q = hp->mla_q_rank;
    mxl_status st;
    mxl_mla_layer *m = mxl_arena_alloc(&b->d->arena, sizeof *m, 64);
    mxl_weight *ws = mxl_arena_alloc(&b->d->arena, (size_t)(2 * NH) * sizeof *ws, 64);
    if (!m || !ws) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
    memset(m, 0, sizeof *m);
    memset(ws, 0, (size_t)(2 * NH) * sizeof *ws);
    m->uk = ws;
    m->uv = ws + NH;
    if (!nm->kv_a || !nm->kv_a_norm || !nm->o || (Q > 0 ? !nm->q_a || !nm->q_a_norm || !nm->q_b : !nm->q))
        return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no latent attention tensors", b->ck->path);
    if (Q > 0) {
        if ((st = bind_proj(b, i, nm->q_a, Q, H, hp->qkv_bias, &m->q_a, &m->b_q_a)) ||
            (st = bind_vector(b, i, nm->q_a_norm, ".weight", Q, &m->q_a_norm)) ||
            (st = bind_matrix(b, i, nm->q_b, NH * (dn + dr), Q, &L->wq)))
            return st;
    } else if ((st = bind_matrix(b, i, nm->q, NH * (dn + dr), H, &L->wq))) {
        return st;
    }
    if ((st = bind_proj(b, i, nm->kv_a, R + dr, H, hp->qkv_bias, &m->kv_a, &m->b_kv_a)) ||
        (st = bind_vector(b, i, nm->kv_a_norm, ".weight", R, &m->kv_a_norm)) ||
        (st = bind_proj(b, i, nm->o, H, NH * dv, hp->o_bias, &L->wo, &L->bo)))
        return st;
    if (has_tensor(b, i, nm->k_b, ".weight") && has_tensor(b, i, nm->v_b, ".weight")) {
        mxl_weight kb, vb;
        if ((st = bind_matrix_stacked(b, i, nm->k_b, NH, NH * R, dn, &kb)) ||
            (st = bind_matrix_stacked(b, i, nm->v_b, NH, NH * dv, R, &vb)))
            return st;
        for (int64_t h = 0; h < NH; h++)
            if ((st = expert_rows(b, i, nm->k_b, &kb, h * R, R, &m->uk[h])) || (st = expert_rows(b, i, nm->v_b, &vb, h * dv, dv, &m->uv[h])))
                return st;
    } else {
        mxl_weight kvb;
        if (!nm->kv_b) return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no kv_b projection", b->ck->path);
        if ((st = bind_matrix(b, i, nm->kv_b, NH * (dn + dv), R, &kvb))) return st;
        float *kt = mxl_arena_alloc(&b->d->arena, (size_t)(NH * R * dn) * sizeof(float), 64);
        float *row = mxl_malloc((size_t)R * sizeof(float));
        if (!kt || !row) {
            mxl_free(row);
            return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
        }
        /* uk[h] [R, dn]: uk[h][r][j] = kv_b[h * (dn + dv) + j][r] */
        for (int64_t h = 0; h < NH; h++) {
            for (int64_t j = 0; j < dn; j++) {
                mxl_weight_dequant_row(&kvb, h * (dn + dv) + j, row);
                for (int64_t r = 0; r < R; r++) kt[(h * R + r) * dn + j] = row[r];
            }
            m->uk[h] = (mxl_weight){.kind = MXL_W_DENSE, .dtype = MXL_DTYPE_F32, .rows = R, .cols = dn, .data = kt + h * R * dn};
            if ((st = expert_rows(b, i, nm->kv_b, &kvb, h * (dn + dv) + dn, dv, &m->uv[h]))) break;
        }
        mxl_free(row);
        if (st) return st;
    }
    L->mla = m;
    return MXL_OK;
}

/* A = -exp(A_log) of n values into the decoder's arena (GGUF's ssm_a holds A already). */
static mxl_status bind_ssm_a(const binder *b, int64_t i, int64_t n, const float **out) {
    const float *src;
    mxl_status st = bind_vector(b, i, b->nm->ssm_a, "", n, &src);
    if (st || b->nm->ssm_a_neg) return (*out = src), st;
    float *a = mxl_arena_alloc(&b->d->arena, (size_t)n * sizeof(float), 64);
    if (!a) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < n; j++) a[j] = -expf(src[j]);
    *out = a;
    return MXL_OK;
}

/* R->conv_wt [K, C]: the convolution's weights transposed into the decoder's arena. */
static mxl_status transpose_conv(const binder *b, mxl_rec_layer *R, int64_t C, int64_t K) {
    float *t = mxl_arena_alloc(&b->d->arena, (size_t)(C * K) * sizeof(float), 64);
    if (!t) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t c = 0; c < C; c++)
        for (int64_t k = 0; k < K; k++) t[k * C + c] = R->conv_w[c * K + k];
    R->conv_wt = t;
    return MXL_OK;
}

/* KDA's three convolutions (queries and keys of qk channels, then the values) as one R->conv_w
 * [C, K] in the decoder's arena. */
static mxl_status bind_conv_parts(const binder *b, int64_t i, mxl_rec_layer *R, int64_t qk, int64_t K) {
    const mxl_decoder_hparams *hp = &b->d->hp;
    const char *mod[3] = {b->nm->ssm_conv, b->nm->ssm_conv_k, b->nm->ssm_conv_v};
    const int64_t rows[3] = {qk, qk, hp->gdn_v_heads * hp->gdn_v_dim};
    float *w = mxl_arena_alloc(&b->d->arena, (size_t)((rows[0] + rows[1] + rows[2]) * K) * sizeof(float), 64);
    if (!w) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
    R->conv_w = w;
    for (int j = 0; j < 3; j++) {
        const float *part;
        mxl_status st = bind_vector(b, i, mod[j], ".weight", rows[j] * K, &part);
        if (st) return st;
        memcpy(w, part, (size_t)(rows[j] * K) * sizeof(float));
        w += rows[j] * K;
    }
    return MXL_OK;
}

/* Layer i's recurrent mixer of kind k (recurrent.h; the names: decoder_family.h ssm_*). */
static mxl_status bind_rec(const binder *b, int64_t i, mxl_layer_kind k, mxl_decoder_layer *L) {
    const mxl_decoder_hparams *hp = &b->d->hp;
    const mxl_decoder_names *nm = b->nm;
    const int64_t H = hp->hidden, DI = hp->ssm_inner, N = hp->ssm_state, K = hp->ssm_conv;
    const int64_t C = mxl_rec_conv_dim(hp, k), IN = mxl_rec_in_dim(hp, k);
    mxl_status st;
    if (!nm->ssm_in || (!nm->ssm_conv && k != MXL_LAYER_LIGHTNING) || !nm->ssm_out ||
        (k != MXL_LAYER_SHORTCONV && k != MXL_LAYER_RGLRU && k != MXL_LAYER_LIGHTNING && (!nm->ssm_a || (k != MXL_LAYER_GDN && !nm->ssm_d))) ||
        (k == MXL_LAYER_LIGHTNING && (!nm->ssm_in_z || !nm->ssm_norm)) ||
        (k == MXL_LAYER_MAMBA && (!nm->ssm_x || !nm->ssm_dt)) || (k == MXL_LAYER_MAMBA2 && (!nm->ssm_dt_bias || (!nm->ssm_norm && !hp->ssm_no_norm))) ||
        (k == MXL_LAYER_GDN && (!nm->ssm_dt_bias || !nm->ssm_norm || !nm->ssm_ba || (hp->gdn_split && !nm->ssm_in_z))) ||
        (k == MXL_LAYER_GDN && hp->gdn_kda && (!nm->ssm_k || !nm->ssm_v || !nm->ssm_conv_k || !nm->ssm_conv_v || !nm->ssm_f_a ||
                                               !nm->ssm_f_b || !nm->ssm_g_a || !nm->ssm_g_b)))
        return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no %s mixer tensors", b->ck->path, mxl_layer_kind_name(k));
    mxl_rec_layer *R = mxl_arena_alloc(&b->d->arena, sizeof *R, 64);
    if (!R) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
    memset(R, 0, sizeof *R);
    R->kind = k;
    L->rec = R;
    const bool kda = k == MXL_LAYER_GDN && hp->gdn_kda;
    const int64_t QK = hp->gdn_k_heads * hp->gdn_k_dim;
    if ((st = bind_proj(b, i, nm->ssm_in, kda ? QK : IN, H, hp->ssm_proj_bias, &R->in_proj, &R->in_b)) ||
        (C > 0 && (st = kda ? bind_conv_parts(b, i, R, QK, K) : bind_vector(b, i, nm->ssm_conv, ".weight", C * K, &R->conv_w))) ||
        (C > 0 && (st = transpose_conv(b, R, C, K))) ||
        (C > 0 && hp->ssm_conv_bias && (st = bind_vector(b, i, nm->ssm_conv, ".bias", C, &R->conv_b))) ||
        (st = bind_proj(b, i, nm->ssm_out, H, k == MXL_LAYER_SHORTCONV ? H : DI, hp->ssm_proj_bias || k == MXL_LAYER_RGLRU, &R->out_proj, &R->out_b)))
        return st;
    if (k == MXL_LAYER_MAMBA)
        st = bind_proj(b, i, nm->ssm_x, hp->ssm_dt_rank + 2 * N, DI, false, &R->x_proj, NULL);
    if (!st && k == MXL_LAYER_MAMBA) st = bind_proj(b, i, nm->ssm_dt, DI, hp->ssm_dt_rank, true, &R->dt_proj, &R->dt_b);
    if (!st && k == MXL_LAYER_MAMBA) st = bind_ssm_a(b, i, DI * N, &R->A);
    if (!st && k == MXL_LAYER_MAMBA) st = bind_vector(b, i, nm->ssm_d, "", DI, &R->D);
    if (!st && k == MXL_LAYER_MAMBA && nm->ssm_dt_norm) st = bind_vector(b, i, nm->ssm_dt_norm, ".weight", hp->ssm_dt_rank, &R->dt_norm);
    if (!st && k == MXL_LAYER_MAMBA && nm->ssm_b_norm) st = bind_vector(b, i, nm->ssm_b_norm, ".weight", N, &R->b_norm);
    if (!st && k == MXL_LAYER_MAMBA && nm->ssm_c_norm) st = bind_vector(b, i, nm->ssm_c_norm, ".weight", N, &R->c_norm);
    if (!st && k == MXL_LAYER_MAMBA2) st = bind_vector(b, i, nm->ssm_dt_bias, "", hp->ssm_heads, &R->dt_b);
    if (!st && k == MXL_LAYER_MAMBA2) st = bind_ssm_a(b, i, hp->ssm_heads, &R->A);
    if (!st && k == MXL_LAYER_MAMBA2) st = bind_vector(b, i, nm->ssm_d, "", hp->ssm_heads, &R->D);
    if (!st && k == MXL_LAYER_MAMBA2 && !hp->ssm_no_norm) st = bind_vector(b, i, nm->ssm_norm, ".weight", DI, &R->norm_w);
    if (k == MXL_LAYER_LIGHTNING) { /* the per-head decay r = exp(-slope(head, layer)) */
        const int64_t NH = hp->ssm_heads;
        float *r = mxl_arena_alloc(&b->d->arena, (size_t)NH * sizeof(float), 64);
        if (!r) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
        const double base = 1.0 / pow(2.0, 8.0 / (double)NH);
        const double factor = 1.0 - (double)i / ((double)hp->n_layers - 1.0 + 1e-5) + 1e-5;
        for (int64_t h = 0; h < NH; h++) r[h] = (float)exp(-(pow(base, (double)(h + 1)) * factor));
        R->A = r;
        if (!st) st = bind_matrix(b, i, nm->ssm_in_z, DI, H, &R->in_z);
        if (!st) st = bind_vector(b, i, nm->ssm_norm, ".weight", DI, &R->norm_w);
    }
    if (k == MXL_LAYER_RGLRU) {
        const int64_t NH = hp->ssm_heads, bw = DI / NH;
        const float *param = NULL;
        if (!nm->ssm_in_z || !nm->ssm_gx_w || !nm->ssm_gx_b || !nm->ssm_ga_w || !nm->ssm_ga_b || !nm->ssm_lru_param)
            return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no RG-LRU tensors", b->ck->path);
        if (!st) st = bind_proj(b, i, nm->ssm_in_z, DI, H, hp->ssm_proj_bias, &R->in_z, &R->z_b);
        if (!st) st = bind_vector(b, i, nm->ssm_gx_w, "", NH * bw * bw, &R->gx_w);
        if (!st) st = bind_vector(b, i, nm->ssm_gx_b, "", DI, &R->gx_b);
        if (!st) st = bind_vector(b, i, nm->ssm_ga_w, "", NH * bw * bw, &R->ga_w);
        if (!st) st = bind_vector(b, i, nm->ssm_ga_b, "", DI, &R->ga_b);
        if (!st) st = bind_vector(b, i, nm->ssm_lru_param, "", DI, &param);
        float *c = st ? NULL : mxl_arena_alloc(&b->d->arena, (size_t)DI * sizeof(float), 64);
        if (!st && !c) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
        for (int64_t j = 0; !st && j < DI; j++) /* -8 softplus(param), softplus as torch computes it */
            c[j] = -8.0f * (param[j] > 20.0f ? param[j] : log1pf(expf(param[j])));
        R->lru_c = c;
    }
    if (k == MXL_LAYER_GDN) {
        const int64_t NV = hp->gdn_v_heads, dk = hp->gdn_k_dim, dv = hp->gdn_v_dim;
        if (!st) st = bind_matrix(b, i, nm->ssm_ba, nm->ssm_in_a || kda ? NV : 2 * NV, H, &R->in_ba);
        if (!st && nm->ssm_in_a) st = bind_matrix(b, i, nm->ssm_in_a, NV, H, &R->in_a);
        if (!st && hp->gdn_split) st = bind_matrix(b, i, nm->ssm_in_z, NV * dv, H, &R->in_z);
        if (!st && kda) st = bind_matrix(b, i, nm->ssm_k, QK, H, &R->in_k);
        if (!st && kda) st = bind_matrix(b, i, nm->ssm_v, NV * dv, H, &R->in_v);
        if (!st && kda) st = bind_matrix(b, i, nm->ssm_f_a, dk, H, &R->f_a);
        if (!st && kda) st = bind_matrix(b, i, nm->ssm_f_b, NV * dk, dk, &R->f_b);
        if (!st && kda) st = bind_matrix(b, i, nm->ssm_g_a, dv, H, &R->g_a);
        if (!st && kda) st = bind_matrix(b, i, nm->ssm_g_b, NV * dv, dv, &R->g_b);
        if (!st) st = bind_vector(b, i, nm->ssm_dt_bias, "", kda ? NV * dk : NV, &R->dt_b);
        if (!st) st = bind_ssm_a(b, i, NV, &R->A);
        if (!st) st = bind_vector(b, i, nm->ssm_norm, ".weight", hp->gdn_v_dim, &R->norm_w);
    }
    return st;
}

/* Gemma 3n's per-layer AltUp and Laurel weights (altup.h). */
static mxl_status bind_altup(const binder *b, int64_t i, mxl_decoder_layer *L) {
    const mxl_decoder_hparams *hp = &b->d->hp;
    const mxl_decoder_names *nm = b->nm;
    const int64_t A = hp->altup_n, H = hp->hidden;
    mxl_altup_layer *a = mxl_arena_alloc(&b->d->arena, sizeof *a, 64);
    if (!a) return mxl_error_set(b->err, MXL_ERR_NOMEM, "out of memory");
    memset(a, 0, sizeof *a);
    L->altup = a;
    mxl_status st;
    if ((st = bind_matrix(b, i, nm->altup_router, A, H, &a->router)) || (st = bind_vector(b, i, nm->altup_router_norm, ".weight", H, &a->router_norm)) ||
        (st = bind_matrix(b, i, nm->altup_predict, A * A, A, &a->predict)) || (st = bind_matrix(b, i, nm->altup_correct, A, A, &a->correct)) ||
        (st = bind_vector(b, i, nm->altup_out_scale, "", H, &a->out_scale)) ||
        (st = bind_matrix(b, i, nm->laurel_l, hp->laurel_rank, H, &a->laurel_l)) ||
        (st = bind_matrix(b, i, nm->laurel_r, H, hp->laurel_rank, &a->laurel_r)) ||
        (st = bind_vector(b, i, nm->laurel_norm, ".weight", H, &a->laurel_norm)))
        return st;
    return MXL_OK;
}

static mxl_status bind_layer(const binder *b, int64_t i, mxl_decoder_layer *L) {
    const mxl_decoder_hparams *hp = &b->d->hp;
    const mxl_decoder_names *nm = b->nm;
    const int64_t nh = hp->layer_heads ? hp->layer_heads[i] : hp->n_heads;
    const int64_t hd = hp->layer_head_dim ? hp->layer_head_dim[i] : hp->head_dim;
    const int64_t F = hp->layer_ffn ? hp->layer_ffn[i] : hp->ffn;
    int64_t H = hp->hidden, qd = nh * hd, kvd = (hp->layer_kv_heads ? hp->layer_kv_heads[i] : hp->n_kv_heads) * hd;
    mxl_status st;
    memset(L, 0, sizeof *L);
    L->n_heads = nh;
    L->head_dim = hd;
    L->n_kv_heads = kvd / hd;
    L->ffn = F;
    L->scalar = 1.0f;
    L->kv_shared = hp->layer_kv_source && hp->layer_kv_source[i] >= 0;
    const mxl_layer_kind kind = hp->layer_kind ? (mxl_layer_kind)hp->layer_kind[i] : MXL_LAYER_ATTN;
    L->no_mixer = kind == MXL_LAYER_MLP_ONLY;
    L->has_mlp = L->no_mixer || (!hp->no_mlp && !(hp->layer_no_mlp && hp->layer_no_mlp[i]));
    if (!L->no_mixer && hp->pre_norms && (st = bind_norm(b, i, nm->attn_norm, H, &L->attn_norm))) return st;
    /* a recurrent mixer: the layer's kind, or beside attention in every layer (parallel_ssm) */
    if (!L->no_mixer && (kind != MXL_LAYER_ATTN || hp->parallel_ssm) &&
        (st = bind_rec(b, i, kind != MXL_LAYER_ATTN ? kind : MXL_LAYER_MAMBA2, L)))
        return st;
    if (L->no_mixer || (L->rec && !hp->parallel_ssm)) {
        /* (no attention) */
    } else if (hp->mla_kv_rank > 0) {
        if ((st = bind_mla(b, i, L))) return st;
    } else if (nm->qkv) {
        const int64_t sizes[3] = {qd, kvd, kvd};
        mxl_weight *const ws[3] = {&L->wq, &L->wk, &L->wv};
        const float **const bs[3] = {&L->bq, &L->bk, &L->bv};
        if ((st = nm->qkv_per_head ? bind_fused_per_head(b, i, nm->qkv, H, hp->qkv_bias, ws, bs)
                                   : bind_fused(b, i, nm->qkv, sizes, 3, H, hp->qkv_bias, ws, bs)))
            return st;
    } else if ((st = bind_proj(b, i, nm->q, hp->attn_q_gate ? 2 * qd : qd, H, hp->qkv_bias, &L->wq, &L->bq)) ||
               /* (a KV-shared layer's k / v, which checkpoints may still carry, are not read; with
                * attention_k_eq_v a layer without v_proj takes V from k_proj) */
               (!L->kv_shared && (st = bind_proj(b, i, nm->k, kvd, H, hp->qkv_bias, &L->wk, &L->bk))) ||
               (!L->kv_shared && !(hp->attn_k_eq_v && !has_tensor(b, i, nm->v, ".weight")) &&
                (st = bind_proj(b, i, nm->v, kvd, H, hp->qkv_bias, &L->wv, &L->bv)))) {
        return st;
    }
    const bool attends = !L->no_mixer && (!L->rec || hp->parallel_ssm);
    if (attends && !L->mla && (st = bind_proj(b, i, nm->o, H, qd, hp->o_bias, &L->wo, &L->bo))) return st;
    L->rope = attends && !hp->learned_pos && !(hp->layer_no_rope && hp->layer_no_rope[i]);
    if (!attends || (hp->qk_norm_rope_only && !L->rope)) {
        /* (no QK-norm on this layer: q_norm / k_norm stay NULL) */
    } else if (hp->qk_norm_kind != MXL_QK_NORM_NONE && (hp->norm_no_weight || hp->qk_norm_no_weight)) { /* weightless RMSNorms (nanochat, Llama 4) */
        bool full = hp->qk_norm_kind == MXL_QK_NORM_FULL;
        if (!(L->q_norm = ones_plus(b, NULL, full ? qd : hd)) || !(L->k_norm = ones_plus(b, NULL, full ? kvd : hd)))
            return MXL_ERR_NOMEM;
    } else if (hp->qk_norm_kind != MXL_QK_NORM_NONE) {
        bool full = hp->qk_norm_kind == MXL_QK_NORM_FULL;
        if (!nm->q_norm || !nm->k_norm)
            return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no QK-norm tensors", b->ck->path);
        if ((st = bind_vector(b, i, nm->q_norm, ".weight", full ? qd : hd, &L->q_norm)) ||
            (!L->kv_shared && (st = bind_vector(b, i, nm->k_norm, ".weight", full ? kvd : hd, &L->k_norm))))
            return st;
    }
    if (attends && hp->v_norm && !L->kv_shared && !(L->v_norm = ones_plus(b, NULL, hd))) return MXL_ERR_NOMEM;
    if (!L->no_mixer && hp->post_norms && (st = bind_norm(b, i, nm->post_attn_norm, H, &L->post_attn_norm))) return st;
    if (attends && nm->attn_sub_norm && (st = bind_norm(b, i, nm->attn_sub_norm, qd, &L->attn_sub_norm))) return st;
    if (L->has_mlp && hp->pre_norms && !(hp->parallel_residual && !nm->ffn_norm) &&
        (st = bind_norm(b, i, nm->ffn_norm, H, &L->ffn_norm)))
        return st;
    if (L->has_mlp && hp->n_experts > 0 && (!hp->layer_is_moe || hp->layer_is_moe[i]) && (st = bind_moe(b, i, L))) return st;
    /* a dense MLP: no experts, or beside them (Gemma 4) */
    const bool dense = L->has_mlp && (!L->moe || hp->moe_beside_mlp);
    if (!dense) {
        /* (no MLP: Mamba's blocks; or experts alone) */
    } else if (hp->mlp == MXL_MLP_GATED && nm->gate_up) {
        const int64_t sizes[2] = {F, F};
        mxl_weight *const ws[2] = {&L->w_gate, &L->w_up};
        const float **const bs[2] = {&L->b_gate, &L->b_up};
        if ((st = bind_fused(b, i, nm->gate_up, sizes, 2, H, hp->mlp_bias, ws, bs))) return st;
    } else {
        if (hp->mlp == MXL_MLP_GATED && (st = bind_proj(b, i, nm->gate, F, H, hp->mlp_bias, &L->w_gate, &L->b_gate)))
            return st;
        if ((st = bind_proj(b, i, nm->up, F, H, hp->mlp_bias, &L->w_up, &L->b_up))) return st;
    }
    if (dense && (st = bind_proj(b, i, nm->down, H, F, hp->mlp_bias, &L->w_down, &L->b_down))) return st;
    if (L->has_mlp && hp->post_norms && (st = bind_norm(b, i, nm->post_ffn_norm, H, &L->post_ffn_norm))) return st;
    if (dense && nm->ffn_sub_norm && (st = bind_norm(b, i, nm->ffn_sub_norm, F, &L->ffn_sub_norm))) return st;
    if (L->moe && hp->moe_beside_mlp &&
        ((st = bind_norm(b, i, nm->moe_dense_post_norm, H, &L->moe_dense_post_norm)) || (st = bind_norm(b, i, nm->moe_pre_norm, H, &L->moe_pre_norm)) ||
         (st = bind_norm(b, i, nm->moe_post_norm, H, &L->moe_post_norm)) ||
         (st = bind_vector(b, i, nm->moe_router_scale, "", H, &L->moe->router_in_scale))))
        return st;
    if (L->moe && nm->moe_expert_scale && (st = bind_vector(b, i, nm->moe_expert_scale, "", hp->n_experts, &L->moe->expert_scale))) return st;
    if (hp->ple_dim > 0 && ((st = bind_matrix(b, i, nm->ple_gate, hp->ple_dim, H, &L->ple_gate)) ||
                            (st = bind_matrix(b, i, nm->ple_proj, H, hp->ple_dim, &L->ple_proj)) ||
                            (st = bind_norm(b, i, nm->ple_norm, H, &L->ple_norm))))
        return st;
    L->topk_k = hp->layer_topk_k ? hp->layer_topk_k[i] : 0.0f;
    if (hp->altup_n > 0 && (st = bind_altup(b, i, L))) return st;
    if (hp->layer_scalar) {
        const float *sc;
        if ((st = bind_vector(b, i, nm->layer_scalar, "", 1, &sc))) return st;
        L->scalar = *sc;
    }
    if (hp->xielu) {
        const float *ap, *an, *beta, *eps;
        if (!nm->act_params || hp->mlp != MXL_MLP_PLAIN)
            return mxl_error_set(b->err, MXL_ERR_UNSUPPORTED, "%s: config.json 'hidden_act' = 'xielu' is not supported for model_type '%s'",
                                 b->ck->path, b->ck->config.model_type);
        if ((st = bind_vector(b, i, nm->act_params, ".alpha_p", 1, &ap)) || (st = bind_vector(b, i, nm->act_params, ".alpha_n", 1, &an)) ||
            (st = bind_vector(b, i, nm->act_params, ".beta", 1, &beta)) || (st = bind_vector(b, i, nm->act_params, ".eps", 1, &eps)))
            return st;
        /* softplus as torch computes it (x past 20 taken as is) */
        L->xielu_ap = *ap > 20.0f ? *ap : (float)log1p(exp((double)*ap));
        L->xielu_an = *beta + (*an > 20.0f ? *an : (float)log1p(exp((double)*an)));
        L->xielu_beta = *beta;
        L->xielu_eps = *eps;
    }
    if (hp->attn_out_gate && attends) {
        if (!nm->attn_gate) return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no attention output gate", b->ck->path);
        if ((st = bind_matrix(b, i, nm->attn_gate, hp->attn_gate_per_head ? nh : qd, H, &L->w_attn_gate))) return st;
    }
    if (hp->attn_sinks && attends) {
        if (!nm->sinks) return mxl_error_set(b->err, MXL_ERR_INTERNAL, "%s: the family names no attention sinks", b->ck->path);
        if ((st = bind_vector(b, i, nm->sinks, "", nh, &L->sinks))) return st;
    }
    L->sliding = hp->sliding_window > 0 && hp->layer_is_sliding && hp->layer_is_sliding[i];
    L->chunked = hp->attn_chunk > 0 && hp->layer_is_chunked && hp->layer_is_chunked[i];
    L->attn_scale = hp->attn_scale_by_layer ? hp->attn_scale / (float)(i + 1) : hp->attn_scale;
    return MXL_OK;
}

/* The LM head: lm_head unless tie_word_embeddings is declared true (transformers then ties it to
 * the embedding) or it is absent (tied checkpoints do not store it). */
static mxl_status bind_output(const binder *b, mxl_decoder *d) {
    char name[400];
    bool tie_declared = false, tie = false;
    json_t *raw = b->ck->config.raw;
    json_t *tv = raw ? json_object_get(raw, "tie_word_embeddings") : NULL;
    if (tv && json_is_boolean(tv)) {
        tie_declared = true;
        tie = json_is_true(tv);
    }
    snprintf(name, sizeof name, "%s.weight", b->nm->lm_head ? b->nm->lm_head : "lm_head");
    bool present = b->nm->lm_head && find_tensor(b, name);
    if (d->hp.lm_head_bias) {
        mxl_status st = bind_vector(b, -1, b->nm->lm_head, ".bias", d->hp.vocab, &d->output_bias);
        if (st) return st;
    }
    if (present && !(tie_declared && tie)) return bind_matrix(b, -1, b->nm->lm_head, d->hp.vocab, d->hp.hidden, &d->output);
    /* a backbone without a head (architectures "...Model", not "...ForCausalLM") may declare untied
     * embeddings it does not ship (Qwen3-Embedding-8B): its users read hidden states, not logits */
    bool backbone = false;
    for (int i = 0; i < b->ck->config.n_architectures; i++) {
        const char *a = b->ck->config.architectures[i];
        size_t n = strlen(a);
        backbone |= n > 5 && strcmp(a + n - 5, "Model") == 0 && !strstr(a, "For");
    }
    if (!present && tie_declared && !tie && !backbone)
        return mxl_error_set(b->err, MXL_ERR_FORMAT, "%s: tensor '%s' is missing and config.json sets tie_word_embeddings to false", b->ck->path, name);
    d->output = d->tok_embd;
    return MXL_OK;
}

/* ---- hyper-parameters ---- */

static mxl_status common_hparams(const mxl_checkpoint *ck, mxl_family_ctx *fc) {
    const mxl_model_config *c = &ck->config;
    mxl_decoder_hparams *hp = fc->hp;
    memset(hp, 0, sizeof *hp);
    hp->n_layers = c->num_hidden_layers;
    hp->hidden = c->hidden_size;
    hp->n_heads = c->num_attention_heads;
    hp->n_kv_heads = c->num_key_value_heads;
    hp->head_dim = c->head_dim;
    hp->ffn = c->intermediate_size;
    hp->vocab = c->vocab_size;
    hp->max_ctx = c->max_position_embeddings;
    if (hp->n_heads <= 0 && hp->n_kv_heads <= 0 && hp->head_dim <= 0) {
        /* no attention keys (Mamba): one small head, whose KV pool layer load() keeps unused */
        hp->n_heads = hp->n_kv_heads = 1;
        hp->head_dim = 32;
    }
    if (hp->n_layers <= 0 || hp->hidden <= 0 || hp->n_heads <= 0 || hp->n_kv_heads <= 0 || hp->head_dim <= 0 ||
        hp->vocab <= 0 || hp->n_heads % hp->n_kv_heads != 0 || hp->n_layers > 100000 || hp->n_heads > 100000 ||
        hp->head_dim > 100000 || hp->hidden > (INT64_C(1) << 24) || hp->vocab > (INT64_C(1) << 26))
        return mxl_error_set(fc->err, MXL_ERR_FORMAT, "%s: incomplete or inconsistent hyper-parameters (layers %lld, hidden %lld, heads %lld/%lld, head_dim %lld, vocab %lld)",
                             ck->path, (long long)hp->n_layers, (long long)hp->hidden, (long long)hp->n_heads,
                             (long long)hp->n_kv_heads, (long long)hp->head_dim, (long long)hp->vocab);
    hp->norm = MXL_NORM_RMS;
    hp->norm_eps = (float)(!isnan(c->rms_norm_eps) ? c->rms_norm_eps : 1e-6);
    hp->pre_norms = true;
    hp->mlp = MXL_MLP_GATED;
    hp->embed_scale = 1.0f;
    hp->residual_scale = 1.0f;
    hp->logit_scale = 1.0f;
    hp->moe_routed_scale = 1.0f; /* (a mixture of experts: the softmax router, one expert group) */
    hp->moe_n_group = hp->moe_topk_group = 1;
    hp->moe_group_top = 2;
    hp->moe_shared_scale = 1.0f;
    hp->ssm_out_mult = hp->attn_out_mult = hp->ssm_in_mult = hp->mlp_gate_mult = hp->mlp_down_mult = 1.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->act = MXL_ACT_SILU;
    mxl_status st;
    /* xIELU has learned per-layer scalars: run only where the family names them (act_params) */
    if (strcmp(c->hidden_act, "xielu") == 0) hp->xielu = true;
    else if (c->hidden_act[0] && (st = mxl_family_act(fc, "hidden_act", c->hidden_act, &hp->act))) return st;
    bool b;
    if ((st = mxl_family_bool(fc, "attention_bias", false, &b))) return st;
    hp->qkv_bias = hp->o_bias = b;
    if ((st = mxl_family_bool(fc, "mlp_bias", false, &hp->mlp_bias))) return st;
    /* transformers 5's is_causal = false (create_causal_mask then makes a bidirectional mask):
     * the non-causal embedders of decoder families (Nemotron-3-Embed's ministral3) */
    if (!fc->gguf) {
        bool causal;
        if ((st = mxl_family_bool(fc, "is_causal", true, &causal))) return st;
        hp->bidirectional = !causal;
    }
    return MXL_OK;
}

/* The backend's layout (weight_prepare; the CPU's panel layout) of every matrix the forward pass
 * multiplies by, where the backend and the format have one (the embedding table stays as it is:
 * it is only looked up). The checkpoint pages of a matrix copied into such a layout are then
 * dropped from memory (they stay mapped, and page back in if the reference path reads them), so
 * the process holds each weight once. */
/* An MXFP4 matrix of a safetensors checkpoint is a copy the loader made (GPT-OSS's blocks, MLX's
 * mxfp4 codes: bind_mxfp4_stacked, mlx_fp.h), which the arena holds to the end: a panel layout of
 * it would hold the weight twice, so it stays on the row path. */
static bool owned_repack(const mxl_checkpoint *ck, const mxl_weight *W) {
    return W->kind == MXL_W_GGUF && W->dtype == MXL_DTYPE_MXFP4 && ck->format == MXL_CHECKPOINT_SAFETENSORS;
}

static mxl_status prepare_one(const mxl_checkpoint *ck, mxl_decoder *d, mxl_weight *W, mxl_error *err) {
    if (W->rows <= 0 || W->prepared || owned_repack(ck, W)) return MXL_OK;
    mxl_status st = d->be->ops->weight_prepare(d->be, W, MXL_WEIGHT_USE_MATMUL, &d->tiles, err);
    if (st != MXL_OK || !W->prepared) return st;
    if (W->kind == MXL_W_GGUF && ck->gguf && W->data != d->tok_embd.data)
        mxl_gguf_release_pages(ck->gguf, W->data, (uint64_t)(W->rows * mxl_weight_row_bytes(W)));
    if (W->kind == MXL_W_MLX && ck->st && W->mlx.w != d->tok_embd.mlx.w) {
        /* codes, scales and biases (mxl_weight_from_mlx checked these sizes) */
        const mxl_mlx_qweight *M = &W->mlx;
        uint64_t ng = (uint64_t)(M->rows * (M->cols / M->group_size)), esz = M->scale_dtype == MXL_DTYPE_F32 ? 4 : 2;
        mxl_st_model_release_pages(ck->st, M->w, (uint64_t)(M->rows * mxl_weight_row_bytes(W)));
        mxl_st_model_release_pages(ck->st, M->scales, ng * esz);
        mxl_st_model_release_pages(ck->st, M->biases, ng * esz);
    }
    return st;
}

/* every matrix the panel layout may hold, through fn (the pass that sizes them, the one that
 * packs them) */
static mxl_status each_matrix(const mxl_checkpoint *ck, mxl_decoder *d, mxl_error *err, bool experts,
                              mxl_status (*fn)(const mxl_checkpoint *, mxl_decoder *, mxl_weight *, mxl_error *)) {
    mxl_status st;
    if ((st = fn(ck, d, &d->output, err)) || (st = fn(ck, d, &d->ple_model_proj, err))) return st;
    for (int64_t a = 0; a + 1 < d->hp.altup_n; a++)
        if ((st = fn(ck, d, &d->altup_proj[a], err)) || (st = fn(ck, d, &d->altup_unembed[a], err))) return st;
    for (int64_t i = 0; i < d->hp.n_layers; i++) {
        mxl_decoder_layer *L = &d->layers[i];
        mxl_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->w_attn_gate, &L->ple_gate, &L->ple_proj};
        for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
            if ((st = fn(ck, d, ws[j], err))) return st;
        if (L->altup && ((st = fn(ck, d, &L->altup->laurel_l, err)) || (st = fn(ck, d, &L->altup->laurel_r, err)))) return st;
        if (L->rec && ((st = fn(ck, d, &L->rec->in_proj, err)) || (st = fn(ck, d, &L->rec->x_proj, err)) ||
                       (st = fn(ck, d, &L->rec->dt_proj, err)) || (st = fn(ck, d, &L->rec->out_proj, err)) ||
                       (st = fn(ck, d, &L->rec->in_ba, err)) || (st = fn(ck, d, &L->rec->in_a, err)) || (st = fn(ck, d, &L->rec->in_z, err)) ||
                       (st = fn(ck, d, &L->rec->in_k, err)) || (st = fn(ck, d, &L->rec->in_v, err)) || (st = fn(ck, d, &L->rec->f_a, err)) ||
                       (st = fn(ck, d, &L->rec->f_b, err)) || (st = fn(ck, d, &L->rec->g_a, err)) || (st = fn(ck, d, &L->rec->g_b, err))))
            return st;
        /* the shared expert runs on every row like a dense MLP; routed experts only with
         * `experts` (expert_streaming decides) */
        if (L->mla) {
            const mxl_mla_layer *M = L->mla;
            if ((st = fn(ck, d, &L->mla->q_a, err)) || (st = fn(ck, d, &L->mla->kv_a, err))) return st;
            for (int64_t h = 0; h < d->hp.n_heads; h++)
                if ((st = fn(ck, d, &M->uk[h], err)) || (st = fn(ck, d, &M->uv[h], err))) return st;
        }
        if (L->moe && ((st = fn(ck, d, &L->moe->sh_gate, err)) || (st = fn(ck, d, &L->moe->sh_up, err)) ||
                       (st = fn(ck, d, &L->moe->sh_down, err))))
            return st;
        if (L->moe && experts)
            for (int64_t e = 0; e < d->hp.n_experts; e++)
                if ((st = fn(ck, d, &L->moe->gate[e], err)) || (st = fn(ck, d, &L->moe->up[e], err)) || (st = fn(ck, d, &L->moe->down[e], err)))
                    return st;
    }
    return MXL_OK;
}

static mxl_status size_one(const mxl_checkpoint *ck, mxl_decoder *d, mxl_weight *W, mxl_error *err) {
    (void)err;
    if (!owned_repack(ck, W)) d->tiles.block_size += d->be->ops->weight_prepared_bytes(d->be, W, MXL_WEIGHT_USE_MATMUL);
    return MXL_OK;
}

/* The panel layouts go into one block of their total size, so that the whole stream of weights
 * a token reads sits on huge pages. */
/* Whether the routed experts stay in the checkpoint's mapping, read from the page cache as
 * tokens choose them (streaming), rather than packed into the backend's layout with the other
 * matrices. MLXCEL_EXPERT_STREAM: "on" streams, "off" packs, "auto" (the default) packs when
 * every packed matrix together (dense_bytes + expert_bytes) takes at most 3/4 of the memory
 * budget (MLXCEL_MEMORY_LIMIT, else MemAvailable; unknown: packs), so a mixture of experts larger
 * than memory still runs, paging experts in and out. Packing holds each expert once too (the
 * checkpoint's pages are released as for every packed matrix) and runs the faster panel kernels. */
static mxl_status expert_streaming(uint64_t dense_bytes, uint64_t expert_bytes, bool *stream,
                                   mxl_error *err) {
    const char *v = getenv("MLXCEL_EXPERT_STREAM");
    *stream = false;
    if (v && (strcmp(v, "on") == 0 || strcmp(v, "1") == 0)) return (*stream = true), MXL_OK;
    if (v && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0)) return MXL_OK;
    if (v && *v && strcmp(v, "auto") != 0)
        return mxl_error_set(err, MXL_ERR_ARG, "MLXCEL_EXPERT_STREAM='%s' is not one of auto, on, off", v);
    uint64_t budget = 0;
    bool from_limit = false;
    mxl_status st = mxl_mem_budget(&budget, &from_limit, err);
    if (st) return st;
    *stream = budget > 0 && dense_bytes + expert_bytes > budget / 4 * 3;
    return MXL_OK;
}

static mxl_status prepare_tiles(const mxl_checkpoint *ck, mxl_decoder *d, mxl_error *err) {
    mxl_arena_init(&d->tiles, 4096);
    d->tiles.huge_pages = true;
    d->tiles.block_size = 0; /* summed by size_one */
    each_matrix(ck, d, err, false, size_one);
    if (d->hp.n_experts > 0) {
        const size_t dense = d->tiles.block_size;
        d->tiles.block_size = 0;
        each_matrix(ck, d, err, true, size_one); /* dense and experts */
        bool stream;
        mxl_status st = expert_streaming(dense, d->tiles.block_size - dense, &stream, err);
        if (st) return st;
        d->experts_streamed = stream;
        if (stream) d->tiles.block_size = dense;
    }
    if (d->tiles.block_size == 0) d->tiles.block_size = 4096;
    return each_matrix(ck, d, err, d->hp.n_experts > 0 && !d->experts_streamed, prepare_one);
}

/* No layer has a dense MLP: each has none, or experts (Nemotron-H without "-" layers). */
static bool no_dense_mlp(const mxl_decoder_hparams *hp) {
    if (!hp->layer_no_mlp) return false;
    for (int64_t l = 0; l < hp->n_layers; l++)
        if (!hp->layer_no_mlp[l] && !(hp->n_experts > 0 && (!hp->layer_is_moe || hp->layer_is_moe[l]))) return false;
    return true;
}

/* Every layer a mixture of experts: no dense MLP anywhere. */
static bool all_sparse(const mxl_decoder_hparams *hp) {
    if (hp->n_experts <= 0) return false;
    for (int64_t l = 0; hp->layer_is_moe && l < hp->n_layers; l++)
        if (!hp->layer_is_moe[l]) return false;
    return true;
}

/* The recurrent layers' sizes (recurrent.h), checked before anything is bound. */
static mxl_status check_recurrent(const mxl_checkpoint *ck, const mxl_decoder_hparams *hp, mxl_error *err) {
    bool seen[MXL_LAYER_KIND_COUNT] = {false};
    for (int64_t l = 0; l < hp->n_layers; l++) {
        if (hp->layer_kind[l] >= MXL_LAYER_KIND_COUNT) return mxl_error_set(err, MXL_ERR_INTERNAL, "%s: unknown layer kind", ck->path);
        seen[hp->layer_kind[l]] = true;
    }
    if (hp->parallel_ssm) seen[MXL_LAYER_MAMBA2] = true;
    const int64_t lim = INT64_C(1) << 20;
    const bool recurrent = seen[MXL_LAYER_SHORTCONV] || seen[MXL_LAYER_MAMBA] || seen[MXL_LAYER_MAMBA2] || seen[MXL_LAYER_GDN] || seen[MXL_LAYER_RGLRU];
    if (seen[MXL_LAYER_LIGHTNING] && (hp->ssm_inner <= 0 || hp->ssm_inner > lim || hp->ssm_heads <= 0 || hp->ssm_inner % hp->ssm_heads != 0 ||
                                      hp->ssm_inner / hp->ssm_heads > MXL_GDN_MAX_DIM))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %lld heads do not split the lightning attention's width %lld", ck->path,
                             (long long)hp->ssm_heads, (long long)hp->ssm_inner);
    if (seen[MXL_LAYER_RGLRU] && (hp->ssm_inner <= 0 || hp->ssm_inner > lim || hp->ssm_heads <= 0 || hp->ssm_inner % hp->ssm_heads != 0 ||
                                  hp->ssm_inner / hp->ssm_heads > MXL_GDN_MAX_DIM))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: lru_width %lld does not split into %lld heads of at most %d", ck->path,
                             (long long)hp->ssm_inner, (long long)hp->ssm_heads, MXL_GDN_MAX_DIM);
    if (recurrent && (hp->ssm_conv < 1 || hp->ssm_conv > 64))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the convolution width (conv kernel) %lld is out of range (1..64)", ck->path,
                             (long long)hp->ssm_conv);
    if ((seen[MXL_LAYER_MAMBA] || seen[MXL_LAYER_MAMBA2]) &&
        (hp->ssm_inner <= 0 || hp->ssm_inner > lim || hp->ssm_state <= 0 || hp->ssm_state > 4096))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the state-space sizes are out of range (intermediate size %lld, state size %lld)", ck->path,
                             (long long)hp->ssm_inner, (long long)hp->ssm_state);
    if (seen[MXL_LAYER_MAMBA] && (hp->ssm_dt_rank <= 0 || hp->ssm_dt_rank > hp->ssm_inner))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: time_step_rank %lld must be between 1 and the intermediate size %lld", ck->path,
                             (long long)hp->ssm_dt_rank, (long long)hp->ssm_inner);
    if (seen[MXL_LAYER_MAMBA2] && (hp->ssm_heads <= 0 || hp->ssm_groups <= 0 || hp->ssm_inner % hp->ssm_heads != 0 ||
                                   hp->ssm_heads % hp->ssm_groups != 0))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %lld state-space heads and %lld groups do not divide the intermediate size %lld", ck->path,
                             (long long)hp->ssm_heads, (long long)hp->ssm_groups, (long long)hp->ssm_inner);
    if (seen[MXL_LAYER_GDN] && (hp->gdn_k_heads <= 0 || hp->gdn_v_heads <= 0 || hp->gdn_v_heads % hp->gdn_k_heads != 0 ||
                                hp->gdn_k_dim <= 0 || hp->gdn_k_dim > MXL_GDN_MAX_DIM || hp->gdn_v_dim <= 0 || hp->gdn_v_dim > MXL_GDN_MAX_DIM ||
                                hp->gdn_v_heads > 65536 || hp->ssm_inner != hp->gdn_v_heads * hp->gdn_v_dim))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: linear attention heads out of range (%lld key heads of %lld, %lld value heads of %lld; the value heads a multiple of the key heads, dims at most %d)",
                             ck->path, (long long)hp->gdn_k_heads, (long long)hp->gdn_k_dim, (long long)hp->gdn_v_heads,
                             (long long)hp->gdn_v_dim, MXL_GDN_MAX_DIM);
    if (seen[MXL_LAYER_MAMBA2] && !(hp->ssm_dt_min >= 0 && hp->ssm_dt_min <= hp->ssm_dt_max && isfinite(hp->ssm_norm_eps)))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: time_step_limit or the gated norm's epsilon is invalid", ck->path);
    return MXL_OK;
}

static mxl_status check_hparams(const mxl_checkpoint *ck, const mxl_decoder_hparams *hp, mxl_error *err) {
    if (hp->mrope_section[0] || hp->mrope_section[1] || hp->mrope_section[2]) {
        const int32_t *m = hp->mrope_section;
        if (m[0] < 0 || m[1] < 0 || m[2] < 0 || (int64_t)m[0] + m[1] + m[2] != hp->rope.rotary_dim / 2 || hp->rope.rotary_dim > MXL_MROPE_MAX_ROTARY)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: mrope_section [%d, %d, %d] must add up to half the rotary dimension %d (at most %d)", ck->path,
                                 m[0], m[1], m[2], hp->rope.rotary_dim, MXL_MROPE_MAX_ROTARY);
    }
    if (hp->layer_kind) {
        mxl_status st = check_recurrent(ck, hp, err);
        if (st) return st;
    }
    if (hp->no_mlp || (all_sparse(hp) && hp->ffn == 0) || no_dense_mlp(hp)) {
        /* (no dense MLP: no intermediate size to check) */
    } else if (hp->ffn <= 0) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: intermediate_size is missing", ck->path);
    if (hp->ffn > (INT64_C(1) << 26)) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: intermediate_size %lld is out of range", ck->path, (long long)hp->ffn);
    if (!(hp->norm_eps >= 0) || !isfinite(hp->attn_scale) || !isfinite(hp->embed_scale) || !isfinite(hp->residual_scale) ||
        !isfinite(hp->logit_scale) || !isfinite(hp->res_alpha_attn) || !isfinite(hp->res_beta_attn) || !isfinite(hp->res_alpha_rec) ||
        !isfinite(hp->res_beta_rec) || !isfinite(hp->res_alpha_mlp) || !isfinite(hp->res_beta_mlp))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: a norm epsilon or multiplier is not a finite number", ck->path);
    if (hp->q_temp_beta > 0 && hp->q_temp_orig <= 0)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the attention temperature needs original_max_position_embeddings", ck->path);
    if (hp->learned_pos && hp->max_ctx <= 0)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: learned positions need max_position_embeddings", ck->path);
    if (hp->n_experts > 0) {
        if (hp->n_experts > 65536)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %lld experts (num_experts) is out of range", ck->path, (long long)hp->n_experts);
        if (hp->n_experts_used <= 0 || hp->n_experts_used > hp->n_experts)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: num_experts_per_tok %lld must be between 1 and num_experts (%lld)", ck->path,
                                 (long long)hp->n_experts_used, (long long)hp->n_experts);
        if (hp->moe_ffn <= 0 || hp->moe_ffn > (INT64_C(1) << 26))
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the experts' intermediate size (%lld) is missing or out of range", ck->path,
                                 (long long)hp->moe_ffn);
        if (hp->shared_ffn < 0 || hp->shared_ffn > (INT64_C(1) << 26))
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: the shared expert's intermediate size (%lld) is out of range", ck->path,
                                 (long long)hp->shared_ffn);
        if ((hp->mlp != MXL_MLP_GATED && !hp->moe_plain) || hp->xielu)
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: experts are gated MLPs in this build", ck->path);
        if ((hp->moe_router == MXL_MOE_SIGMOID || hp->moe_n_group != 1) &&
            (hp->moe_group_top < 1 || hp->moe_group_top > 2 || hp->moe_n_group < 1 || hp->moe_n_group > 256 || hp->n_experts % hp->moe_n_group != 0 || hp->moe_topk_group < 1 || hp->moe_topk_group > hp->moe_n_group ||
             hp->n_experts_used > hp->moe_topk_group * (hp->n_experts / hp->moe_n_group) ||
             (hp->moe_n_group > 1 && hp->n_experts / hp->moe_n_group < hp->moe_group_top)))
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: n_group %lld / topk_group %lld do not divide %lld experts into groups that hold the top %lld",
                                 ck->path, (long long)hp->moe_n_group, (long long)hp->moe_topk_group, (long long)hp->n_experts,
                                 (long long)hp->n_experts_used);
        if (!isfinite(hp->moe_routed_scale) || hp->moe_routed_scale == 0)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: routed_scaling_factor must be a finite non-zero number", ck->path);
    }
    if (hp->mla_kv_rank > 0) {
        const int64_t lim = INT64_C(1) << 16;
        if (hp->mla_kv_rank > lim || hp->mla_q_rank < 0 || hp->mla_q_rank > lim || hp->mla_nope_dim <= 0 || hp->mla_nope_dim > lim ||
            hp->mla_rope_dim < 2 || hp->mla_rope_dim % 2 || hp->mla_rope_dim > lim || hp->mla_v_dim <= 0 || hp->mla_v_dim > lim)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: latent attention ranks out of range (kv_lora_rank %lld, q_lora_rank %lld, qk_nope_head_dim %lld, qk_rope_head_dim %lld (even), v_head_dim %lld)",
                                 ck->path, (long long)hp->mla_kv_rank, (long long)hp->mla_q_rank, (long long)hp->mla_nope_dim,
                                 (long long)hp->mla_rope_dim, (long long)hp->mla_v_dim);
        if (hp->head_dim != hp->mla_rope_dim + hp->mla_kv_rank || hp->n_kv_heads != 1 || hp->qk_norm_kind != MXL_QK_NORM_NONE ||
            hp->clip_qkv > 0 || hp->rope.rotary_dim != hp->mla_rope_dim)
            return mxl_error_set(err, MXL_ERR_INTERNAL, "%s: inconsistent latent attention set-up", ck->path);
    }
    return MXL_OK;
}

/* The family's hyper-parameters of ck into d->hp (per-layer arrays in d->arena) and its tensor
 * names into *names: everything before binding. */
static mxl_status read_hparams(const mxl_checkpoint *ck, mxl_decoder *d, mxl_decoder_names *names, mxl_error *err) {
    const char *mt = ck->config.model_type;
    bool gguf = ck->format == MXL_CHECKPOINT_GGUF;
    const mxl_decoder_family *fam = mxl_decoder_family_find(mt);
    if (!fam || (gguf && !fam->gguf_arch)) {
        /* the families are too many to list in one line: count them and point at `arch` */
        size_t n = 0;
        for (size_t i = 0; i < mxl_decoder_family_count(); i++) n += !gguf || mxl_decoder_family_at(i)->gguf_arch;
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: model_type '%s' cannot run from %s checkpoints yet (this build runs %zu model types from them); see 'mlxcel arch'",
                             ck->path, mt, gguf ? "GGUF" : "safetensors", n);
    }
    const mxl_quant_config *q = &ck->config.quant;
    const bool own = fam->quant_method && strcmp(q->method, fam->quant_method) == 0; /* (read by the family itself) */
    const bool mlx_fp = mxl_mlx_fp_mode(q->mode) && json_object_get(ck->config.raw, "quantization"); /* (MLX's key; Hugging Face's is quantization_config) */
    if (!gguf && q->mode != MXL_QUANT_NONE && q->mode != MXL_QUANT_AFFINE && !mlx_fp && !own)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: quantization '%s' is not supported (MLX affine, mxfp4, mxfp8 and nvfp4 quantization and GGUF are)", ck->path,
                             q->method[0] ? q->method : mxl_quant_mode_name(q->mode));
    *names = gguf ? mxl_names_gguf : *fam->names;
    json_t *raw = ck->config.raw, *tc = fam->text_config && raw ? json_object_get(raw, "text_config") : NULL;
    if (tc && json_is_object(tc)) raw = tc; /* (the decoder's keys of a vision-language config) */
    mxl_family_ctx fc = {ck, &ck->config, raw, gguf, &d->hp, names, &d->arena, err};
    mxl_status st;
    if ((st = common_hparams(ck, &fc))) return st;
    if ((st = fam->setup(&fc))) return st;
    /* GGUF RoPE scaling (rope.scaling.*, rope_freqs.weight) the way llama.cpp reads it, on top of
     * the family's plain RoPE (family_gguf.h) */
    if (gguf && (st = mxl_family_gguf_rope_scaling(&fc))) return st;
    if (d->hp.bidirectional && d->hp.sliding_window > 0 && strcmp(fam->model_type, "gemma3_text") != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: a non-causal model with sliding layers is not supported (EmbeddingGemma's gemma3_text is)", ck->path);
    d->hp.qk_norm = d->hp.qk_norm_kind != MXL_QK_NORM_NONE;
    /* every layer sparse (Qwen 3.5 MoE) or without an MLP: no intermediate_size needed */
    if (d->hp.ffn < 0 && (d->hp.no_mlp || all_sparse(&d->hp))) d->hp.ffn = 0;
    return check_hparams(ck, &d->hp, err);
}

mxl_status mxl_decoder_read_names(const mxl_checkpoint *ck, mxl_decoder *d, mxl_decoder_names *names, mxl_error *err) {
    memset(d, 0, sizeof *d);
    mxl_arena_init(&d->arena, 4096);
    mxl_status st = read_hparams(ck, d, names, err);
    if (st) mxl_decoder_free(d);
    return st;
}

mxl_status mxl_decoder_read_hparams(const mxl_checkpoint *ck, mxl_decoder *d, mxl_error *err) {
    mxl_decoder_names names;
    return mxl_decoder_read_names(ck, d, &names, err);
}

static mxl_status load(const mxl_checkpoint *ck, mxl_decoder *d, mxl_error *err) {
    mxl_decoder_names names;
    mxl_status st;
    if ((st = read_hparams(ck, d, &names, err))) return st;

    const mxl_decoder_hparams *hp = &d->hp;
    binder b = {ck, d, &names, err};
    if ((st = bind_matrix(&b, -1, names.embed, hp->vocab, hp->hidden, &d->tok_embd))) return st;
    if (hp->learned_pos) {
        if (!names.pos_embed) return mxl_error_set(err, MXL_ERR_INTERNAL, "%s: no position embedding name", ck->path);
        if ((st = bind_matrix(&b, -1, names.pos_embed, hp->max_ctx, hp->hidden, &d->pos_embd))) return st;
    }
    if ((st = bind_output(&b, d))) return st;
    if ((st = bind_norm(&b, -1, names.final_norm, hp->hidden, &d->output_norm))) return st;
    if (hp->ple_dim > 0 && ((st = bind_matrix(&b, -1, names.ple_embed, hp->ple_vocab, hp->n_layers * hp->ple_dim, &d->ple_embd)) ||
                            (st = bind_matrix(&b, -1, names.ple_model_proj, hp->n_layers * hp->ple_dim, hp->hidden, &d->ple_model_proj)) ||
                            (st = bind_vector(&b, -1, names.ple_proj_norm, ".weight", hp->ple_dim, &d->ple_proj_norm))))
        return st;
    if (hp->altup_n > 0) {
        d->altup_proj = mxl_arena_alloc(&d->arena, (size_t)(2 * (hp->altup_n - 1)) * sizeof *d->altup_proj, 64);
        if (!d->altup_proj) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        d->altup_unembed = d->altup_proj + hp->altup_n - 1;
        const int64_t A1 = hp->altup_n - 1, H = hp->hidden;
        mxl_weight all_in, all_out; /* (GGUF: one [A - 1, hidden, hidden] tensor each) */
        if (names.altup_stacked && ((st = bind_matrix_stacked(&b, -1, names.altup_proj, A1, A1 * H, H, &all_in)) ||
                                    (st = bind_matrix_stacked(&b, -1, names.altup_unembed, A1, A1 * H, H, &all_out))))
            return st;
        for (int64_t a = 0; a < A1; a++) {
            char in[256], out[256];
            snprintf(in, sizeof in, "%s%lld", names.altup_proj, (long long)a);
            snprintf(out, sizeof out, "%s%lld", names.altup_unembed, (long long)a);
            if (names.altup_stacked ? (st = expert_rows(&b, -1, names.altup_proj, &all_in, a * H, H, &d->altup_proj[a])) ||
                                          (st = expert_rows(&b, -1, names.altup_unembed, &all_out, a * H, H, &d->altup_unembed[a]))
                                    : (st = bind_matrix(&b, -1, in, H, H, &d->altup_proj[a])) ||
                                          (st = bind_matrix(&b, -1, out, H, H, &d->altup_unembed[a])))
                return st;
        }
    }
    d->layers = mxl_arena_alloc(&d->arena, (size_t)hp->n_layers * sizeof *d->layers, 64);
    if (!d->layers) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < hp->n_layers; i++)
        if ((st = bind_layer(&b, i, &d->layers[i]))) return st;
    /* attention layers take KV pool layers in order; recurrent ones a piece of the state slab */
    for (int64_t i = 0; i < hp->n_layers; i++) {
        mxl_decoder_layer *L = &d->layers[i];
        if (L->rec) {
            L->rec->state_off = d->rec_state_floats;
            d->rec_state_floats += (mxl_rec_state_floats(hp, L->rec->kind) + 15) & ~(size_t)15;
        }
        if (L->no_mixer || (L->rec && !hp->parallel_ssm)) continue;
        if (L->ffn > hp->ffn || L->n_kv_heads <= 0 || L->n_heads % L->n_kv_heads != 0 || L->head_dim > hp->head_dim)
            return mxl_error_set(err, MXL_ERR_INTERNAL, "%s: layer %lld is wider than the model's widest layer", ck->path, (long long)i);
        if (L->n_heads * L->head_dim > d->q_dim) d->q_dim = L->n_heads * L->head_dim;
        if (L->n_kv_heads * L->head_dim > d->kv_dim) d->kv_dim = L->n_kv_heads * L->head_dim;
        if (!L->kv_shared) {
            L->kv_layer = d->n_kv_layers++;
            continue;
        }
        const int32_t src = hp->layer_kv_source[i];
        const mxl_decoder_layer *S = src < i ? &d->layers[src] : NULL;
        if (!S || S->kv_shared || S->no_mixer || S->rec || S->head_dim != L->head_dim || S->n_kv_heads != L->n_kv_heads ||
            S->sliding != L->sliding)
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: layer %lld cannot share the KV cache of layer %d", ck->path, (long long)i, src);
        L->kv_layer = S->kv_layer;
    }
    if (d->n_kv_layers == 0) { /* (the pool keeps one small unused layer) */
        d->hp.n_heads = d->hp.n_kv_heads = 1;
        d->hp.head_dim = 32;
    }
    /* (no attention layer, or only latent ones: the model-wide shape) */
    if (d->n_kv_layers == 0 || d->q_dim < d->hp.n_heads * d->hp.head_dim) d->q_dim = d->hp.n_heads * d->hp.head_dim;
    if (d->n_kv_layers == 0 || d->kv_dim == 0) d->kv_dim = d->hp.n_kv_heads * d->hp.head_dim;
    return prepare_tiles(ck, d, err);
}

mxl_status mxl_decoder_load(const mxl_checkpoint *ck, mxl_decoder *d, mxl_error *err) {
    memset(d, 0, sizeof *d);
    mxl_arena_init(&d->arena, 64 * 1024);
    d->be = mxl_backend_host();
    mxl_status st = load(ck, d, err);
    if (st) mxl_decoder_free(d); /* nothing to free for the caller; freeing again is harmless */
    return st;
}

void mxl_decoder_free(mxl_decoder *d) {
    mxl_arena_free(&d->arena);
    mxl_arena_free(&d->tiles);
    memset(d, 0, sizeof *d);
}

/* ---- state ---- */

/* Rows [row0, row0 + n) of the activation block belong to one sequence: they run positions
 * pos .. pos + n - 1 of state s, whose KV cache receives their keys and values and whose cache
 * alone they attend over. A single-sequence chunk is one span of n rows; a batched decode step
 * is one span of one row per sequence. */
typedef struct row_span {
    mxl_decoder_state *s;
    int64_t row0, n, pos;
} row_span;

struct mxl_decoder_state {
    int64_t max_ctx, max_batch, pos;
    mxl_decoder_lora lora[MXL_DECODER_MAX_LORA]; /* the adapters this state's rows run with */
    int n_lora;
    float *lora_buf;      /* [3, max_batch, lora_cap] A x of a chunk of this state's rows, a block per projection of a group */
    int64_t lora_cap;     /* floats per row of lora_buf (the adapters' widest rank) */
    float *lora_delta;    /* [max_batch, delta_cap] the updates of one projection group (linear_lora) */
    int64_t delta_cap;    /* floats per row of lora_delta: the widest group's summed outputs */
    int64_t n_layers, kv_dim; /* shape of the cache, checked when states meet in a batch */
    mxl_threadpool *pool;
    int n_threads;
    mxl_decoder_kv_type k_req, v_req; /* as asked (AUTO follows the path) */
    int64_t kv_group;         /* int8 group: 32, or head_dim when it is not a multiple of 32 */
    int64_t kv_rot;           /* TurboQuant's rotation chunk (kv_rot_chunk) */
    /* The KV cache: blocks of MXL_KV_BLOCK positions in a pool (models/kv_pool.h), position p in
     * row p % 32 of block table[p / 32]. Holds one reference on each of table[0..n_table): at least
     * ceil(pos / 32) blocks (more after a forward that reserved blocks and then failed). */
    mxl_kv_pool *kvp;
    bool own_pool;            /* a private pool sized for max_ctx (freed with the state) */
    int32_t *table;           /* [max_blocks] */
    int64_t n_table, max_blocks;
    /* Workspace for up to max_batch rows; a batched call borrows one state's workspace. */
    float *x, *xn, *q, *k, *v, *att, *o, *gate, *up; /* [max_batch, ...] */
    float *ag;        /* [max_batch, n_heads * head_dim] the attention output gate (hp.attn_out_gate, attn_q_gate) */
    float *qg;        /* [max_batch, 2 n_heads head_dim] q_proj's rows of queries and gates (hp.attn_q_gate) */
    float *o2;        /* [max_batch, hidden] the Mamba-2 half of a parallel layer (hp.parallel_ssm); the
                       * router's input beside the dense MLP (hp.moe_beside_mlp) */
    float *o3;        /* [max_batch, hidden] the experts' output beside the dense MLP (hp.moe_beside_mlp) */
    float *ple;       /* [max_batch, n_layers * P] each row's per-layer inputs (hp.ple_dim) */
    float *ple_tmp;   /* [max_batch, n_layers * P] their model projection, then a layer's gate */
    float *streams;   /* [altup_n][max_batch][hidden] AltUp's streams (hp.altup_n) */
    float *pred;      /* [altup_n][max_batch][hidden] their predictions */
    float *laurel;    /* [max_batch, hidden] Laurel's output */
    float *laurel_lo; /* [max_batch, laurel_rank] */
    float *amod;      /* [max_batch, altup_n] the modality router's output */
    float *acoef;     /* [max_batch, altup_n^2] the prediction (or correction) coefficients */
    float *inv_freq, *inv_freq_local;
    float attn_factor, attn_factor_local; /* YaRN cos/sin scale */
    int64_t *q_pos;   /* [max_batch] position of each row */
    int64_t *q_end;   /* [max_batch] each row's causal horizon (q_pos + 1, or its image block's end) */
    int64_t *rope_pos; /* [max_batch][3] each row's RoPE position(s): q_pos + its state's rope_delta, or an
                        * image row's (t, h, w) under M-RoPE (hp.mrope_section) */
    int64_t rope_delta;      /* RoPE position - cache position of the rows run from now on (M-RoPE: an
                              * image advances the positions by max(grid_h, grid_w), not its row count) */
    int64_t rope_delta_from; /* the first cache position whose RoPE position differs from it (delta != 0) */
    float *rope_cs;   /* [max_batch][2][head_dim] each row's RoPE cosines / sines (mxl_rope_table), global then local */
    int32_t *pos_ids; /* [max_batch] the same as ids into the learned position table */
    row_span *spans;  /* [max_batch] the spans of a batched call */
    float *attn_scratch; /* this state's attention scratch (its own pool's threads, its max_ctx) */
    void *mm_scratch;
    float *moe_mem;      /* the MoE block's scratch (models/moe.h), carved into moe */
    mxl_moe_scratch moe;
    float *mla_mem;      /* latent attention's scratch (models/mla.h), carved into mla */
    mxl_mla_scratch mla;
    float *rec;          /* [rec_floats] the recurrent layers' state (models/recurrent.h) at position pos */
    size_t rec_floats;   /* 0: no recurrent layers */
    float *rec_mem;      /* the recurrent mixers' scratch, carved into recs */
    mxl_rec_scratch recs;
    mxl_rec_span *rec_spans; /* [max_batch] */
    void *block; /* one allocation holding the buffers above */
    bool reference; /* MXL_DECODER_REFERENCE=1 */
    const mxl_backend *be;   /* the backend the forward pass runs on: d_be, or the f32 reference path */
    const mxl_backend *d_be; /* the backend the decoder's weights were prepared for */
    bool in_call;   /* set while a batched call checks for repeated states */
};

static size_t max_scratch(const mxl_decoder *d, int64_t n_tok) {
    /* the LM head runs on one row per sequence of a batch, so up to n_tok rows too */
    size_t m = d->be->ops->matmul_scratch_bytes(d->be, &d->output, n_tok);
    for (int64_t i = 0; i < d->hp.n_layers; i++) {
        const mxl_decoder_layer *L = &d->layers[i];
        const mxl_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->w_attn_gate};
        for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++) {
            if (ws[j]->rows <= 0) continue; /* unbound (plain MLP has no gate) */
            size_t b = d->be->ops->matmul_scratch_bytes(d->be, ws[j], n_tok);
            if (b > m) m = b;
        }
        for (int j = 0; L->rec && j < 7; j++) {
            const mxl_weight *rw[7] = {&L->rec->in_proj, &L->rec->x_proj, &L->rec->dt_proj, &L->rec->out_proj,
                                       &L->rec->in_ba, &L->rec->in_a, &L->rec->in_z};
            size_t b = rw[j]->rows > 0 ? d->be->ops->matmul_scratch_bytes(d->be, rw[j], n_tok) : 0;
            if (b > m) m = b;
        }
        for (int64_t h = 0; L->mla && h < d->hp.n_heads + 1; h++) {
            /* latent attention: q_a and kv_a, then each head's absorbed maps */
            const mxl_weight *mw[2] = {h == 0 ? &L->mla->q_a : &L->mla->uk[h - 1], h == 0 ? &L->mla->kv_a : &L->mla->uv[h - 1]};
            for (int j = 0; j < 2; j++) {
                size_t b = mw[j]->rows > 0 ? d->be->ops->matmul_scratch_bytes(d->be, mw[j], n_tok) : 0;
                if (b > m) m = b;
            }
        }
        const mxl_moe_layer *M = L->moe;
        if (!M) continue;
        const mxl_backend *ref = mxl_backend_reference();
        const mxl_weight *mw[] = {&M->sh_gate, &M->sh_up, &M->sh_down};
        size_t b = ref->ops->matmul_scratch_bytes(ref, &M->router, n_tok);
        m = b > m ? b : m;
        if (M->sh_router.rows > 0 && (b = ref->ops->matmul_scratch_bytes(ref, &M->sh_router, n_tok)) > m) m = b;
        /* per-expert modules may differ in format (MLX overrides): each expert */
        for (int64_t e = 0; e < d->hp.n_experts; e++) {
            const mxl_weight *ew[] = {&M->gate[e], &M->up[e], &M->down[e]};
            for (int j = 0; j < 3; j++)
                if ((b = d->be->ops->matmul_scratch_bytes(d->be, ew[j], n_tok)) > m) m = b;
        }
        for (size_t j = 0; j < 3; j++)
            if (mw[j]->rows > 0 && (b = d->be->ops->matmul_scratch_bytes(d->be, mw[j], n_tok)) > m) m = b;
    }
    return m;
}

/* Layers of the KV pool: the attention layers (one unused layer when there is none: Mamba). */
static int64_t kv_layers(const mxl_decoder *d) { return d->n_kv_layers > 0 ? d->n_kv_layers : 1; }

/* The storage an asked type gets on a path. */
static mxl_dtype kv_dtype(mxl_decoder_kv_type t, bool reference) {
    switch (t) {
    case MXL_DECODER_KV_F32: return MXL_DTYPE_F32;
    case MXL_DECODER_KV_F16: return MXL_DTYPE_F16;
    case MXL_DECODER_KV_I8: return MXL_DTYPE_I8;
    case MXL_DECODER_KV_Q8_0: return MXL_DTYPE_Q8_0;
    case MXL_DECODER_KV_Q4_0: return MXL_DTYPE_Q4_0;
    case MXL_DECODER_KV_Q4_1: return MXL_DTYPE_Q4_1;
    case MXL_DECODER_KV_Q5_0: return MXL_DTYPE_Q5_0;
    case MXL_DECODER_KV_Q5_1: return MXL_DTYPE_Q5_1;
    case MXL_DECODER_KV_TURBO4: return MXL_DTYPE_TURBO4;
    case MXL_DECODER_KV_TURBO3: return MXL_DTYPE_TURBO3;
    default: return reference ? MXL_DTYPE_F32 : MXL_DTYPE_F16;
    }
}

static bool kv_turbo_type(mxl_dtype t) { return t == MXL_DTYPE_TURBO4 || t == MXL_DTYPE_TURBO3; }

/* the block formats (32 elements a block): ggml's and TurboQuant's */
static bool kv_block_type(mxl_dtype t) {
    return t == MXL_DTYPE_Q8_0 || t == MXL_DTYPE_Q4_0 || t == MXL_DTYPE_Q4_1 || t == MXL_DTYPE_Q5_0 || t == MXL_DTYPE_Q5_1 ||
           kv_turbo_type(t);
}

/* TurboQuant's rotation chunk: the largest power of two (<= 256) dividing every head (a multiple
 * of 32 where the block formats are allowed). */
static int64_t kv_rot_chunk(const mxl_decoder_hparams *hp) {
    int64_t r = MXL_KV_ROTATE_MAX_CHUNK;
    while (r > 1 && hp->head_dim % r != 0) r /= 2;
    for (int64_t l = 0; hp->layer_head_dim && l < hp->n_layers; l++)
        while (r > 1 && hp->layer_head_dim[l] % r != 0) r /= 2;
    return r;
}

const char *mxl_decoder_kv_type_name(mxl_decoder_kv_type t) {
    static const char *names[MXL_DECODER_KV_COUNT] = {"auto", "f32", "f16", "int8", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                                      "turbo4", "turbo3"};
    return (unsigned)t < MXL_DECODER_KV_COUNT ? names[t] : "?";
}

/* The int8 scale group: 32 where it divides the head (and, with latent attention, where V - the
 * last mla_kv_rank of each row - starts on a group), else the whole head; latent rows whose V
 * part does not start on a group of 32 take the largest power of two that does. */
static int64_t kv_group_of(const mxl_decoder_hparams *hp) {
    if (hp->mla_kv_rank > 0) {
        int64_t g = 32;
        while (g > 1 && (hp->mla_rope_dim % g != 0 || hp->mla_kv_rank % g != 0)) g /= 2;
        return g;
    }
    int64_t g = hp->head_dim % 32 == 0 ? 32 : hp->head_dim;
    /* per-layer head sizes: the largest group dividing every layer's heads (gcd) */
    for (int64_t l = 0; hp->layer_head_dim && l < hp->n_layers; l++)
        for (int64_t a = hp->layer_head_dim[l]; a != 0;) {
            const int64_t r = g % a;
            g = a, a = r;
        }
    return g;
}

int64_t mxl_decoder_kv_group(const mxl_decoder_hparams *hp) { return kv_group_of(hp); }

/* Whether g divides every head (latent attention: both parts of the row). */
bool mxl_decoder_kv_group_fits(const mxl_decoder_hparams *hp, int64_t g) {
    if (hp->mla_kv_rank > 0) return hp->mla_rope_dim % g == 0 && hp->mla_kv_rank % g == 0;
    if (hp->head_dim % g) return false;
    for (int64_t l = 0; hp->layer_head_dim && l < hp->n_layers; l++)
        if (hp->layer_head_dim[l] % g) return false;
    return true;
}

/* The int8 scale group of options o: theirs, or the model's default. */
static int64_t kv_group_opt(const mxl_decoder_hparams *hp, const mxl_decoder_kv_opts *o) { return o->group > 0 ? o->group : kv_group_of(hp); }

mxl_status mxl_decoder_kv_check(const mxl_decoder_hparams *hp, const mxl_decoder_kv_opts *opts, mxl_error *err) {
    mxl_decoder_kv_opts o = opts ? *opts : (mxl_decoder_kv_opts){MXL_DECODER_KV_AUTO, MXL_DECODER_KV_AUTO, 0, 0, 0};
    if ((unsigned)o.k >= MXL_DECODER_KV_COUNT || (unsigned)o.v >= MXL_DECODER_KV_COUNT) return mxl_error_set(err, MXL_ERR_ARG, "unknown KV cache type");
    if (o.group < 0 || (o.group > 0 && !mxl_decoder_kv_group_fits(hp, o.group)))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "an int8 KV group of %lld does not divide this model's heads (head_dim %lld)", (long long)o.group,
                             (long long)(hp->mla_kv_rank > 0 ? hp->mla_kv_rank : hp->head_dim));
    for (int i = 0; i < 2; i++) {
        mxl_decoder_kv_type t = i ? o.v : o.k;
        if (kv_turbo_type(kv_dtype(t, false)) && hp->mla_kv_rank > 0)
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED,
                                 "cache type %s is not available with latent attention (this model caches compressed latents)",
                                 mxl_decoder_kv_type_name(t));
        if (!kv_block_type(kv_dtype(t, false)) || kv_group_of(hp) == 32) continue;
        /* name the dimension that is not a multiple of 32 */
        int64_t bad = hp->head_dim;
        const char *what = "head_dim";
        if (hp->mla_kv_rank > 0) {
            bad = hp->mla_rope_dim % 32 ? hp->mla_rope_dim : hp->mla_kv_rank;
            what = hp->mla_rope_dim % 32 ? "a latent-attention RoPE part" : "a latent-attention rank";
        } else {
            for (int64_t l = 0; hp->layer_head_dim && l < hp->n_layers && bad % 32 == 0; l++) bad = hp->layer_head_dim[l];
        }
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "cache type %s needs %s a multiple of 32, this model has %lld",
                             mxl_decoder_kv_type_name(t), what, (long long)bad);
    }
    return MXL_OK;
}

mxl_status mxl_decoder_kv_pool_cfg(const mxl_decoder *d, const mxl_decoder_kv_opts *opts, bool reference, int64_t n_blocks,
                                   mxl_kv_pool_cfg *out, mxl_error *err) {
    mxl_decoder_kv_opts o = opts ? *opts : (mxl_decoder_kv_opts){MXL_DECODER_KV_AUTO, MXL_DECODER_KV_AUTO, 0, 0, 0};
    mxl_status st = mxl_decoder_kv_check(&d->hp, &o, err);
    if (st) return st;
    /* latent attention keeps one row per position, read as K and V (V: K's type) */
    const bool latent = d->hp.mla_kv_rank > 0;
    const mxl_dtype vt = kv_dtype(latent ? o.k : o.v, reference);
    const mxl_dtype kt = kv_dtype(o.k, reference);
    int64_t edge = kv_turbo_type(vt) && o.v_edge > 0 && !latent ? o.v_edge : 0;
    if (edge > kv_layers(d) / 2) edge = kv_layers(d) / 2;
    /* the last layers in F16 only where a type is quantized (not with latent rows) */
    const bool quant = (kt != MXL_DTYPE_F32 && kt != MXL_DTYPE_F16) || (vt != MXL_DTYPE_F32 && vt != MXL_DTYPE_F16);
    int64_t last = quant && !latent && o.k_last > 0 ? o.k_last : 0;
    if (last > kv_layers(d) - edge) last = kv_layers(d) - edge;
    *out = (mxl_kv_pool_cfg){kv_layers(d), d->kv_dim, kv_group_opt(&d->hp, &o), kt, vt, n_blocks, d->be, latent, edge, last};
    return MXL_OK;
}

static mxl_dtype pool_type(const mxl_decoder_state *s, bool v) {
    const mxl_kv_pool_cfg *c = mxl_kv_pool_config(s->kvp);
    return v ? c->v_type : c->k_type;
}

/* Element offset of position p's row within its region (pt: layer l's part, mxl_kv_pool_layer_part;
 * the scales' offset is that / group). */
static int64_t kv_elem(const mxl_decoder_state *s, const mxl_kv_pool_part *pt, const int32_t *table, int64_t p) {
    return (int64_t)table[p / MXL_KV_BLOCK] * pt->stride + (pt->layer * MXL_KV_BLOCK + p % MXL_KV_BLOCK) * s->kv_dim;
}

/* Stores x[kvd] (the row's first kvd <= kv_dim elements: a narrower layer's) as layer l, position p
 * of K (v false) or V (its block must be writable). A TurboQuant row is rotated first, a chunk at
 * a time. */
static void kv_put(const mxl_decoder_state *s, mxl_kv_pool *kvp, const int32_t *table, bool v, int64_t l, int64_t p,
                   const float *x, int64_t kvd) {
    const mxl_kv_pool_cfg *c = mxl_kv_pool_config(kvp);
    mxl_kv_pool_part pt;
    mxl_kv_pool_layer_part(kvp, v, l, &pt);
    const mxl_dtype t = pt.type;
    const int64_t e = kv_elem(s, &pt, table, p);
    if (t == MXL_DTYPE_F32) {
        s->be->ops->buffer_copy(s->be, (float *)pt.base + e, x, (size_t)kvd * sizeof(float));
    } else if (t == MXL_DTYPE_F16) {
        s->be->ops->kv_store_f16(s->be, x, kvd, (uint16_t *)pt.base + e);
    } else if (kv_turbo_type(t)) {
        float r[MXL_KV_ROTATE_MAX_CHUNK];
        for (int64_t c0 = 0; c0 < kvd; c0 += s->kv_rot) {
            memcpy(r, x + c0, (size_t)s->kv_rot * sizeof(float));
            s->be->ops->kv_rotate(s->be, r, s->kv_rot, s->kv_rot, false);
            s->be->ops->kv_quantize_blocks(s->be, t, r, s->kv_rot, pt.base + mxl_kv_offset_bytes(t, e + c0));
        }
    } else if (kv_block_type(t)) { /* (kvd: a multiple of 32, as every head) */
        s->be->ops->kv_quantize_blocks(s->be, t, x, kvd, pt.base + mxl_kv_offset_bytes(t, e));
    } else {
        s->be->ops->kv_quantize_i8(s->be, x, kvd, c->group, (int8_t *)pt.base + e, pt.scale + e / c->group);
    }
}

/* Reads layer l, position p of K (v false) or V as f32 (a TurboQuant row rotated back). */
static void kv_get(const mxl_decoder_state *s, const mxl_kv_pool *kvp, const int32_t *table, bool v, int64_t l, int64_t p,
                   float *x) {
    const mxl_kv_pool_cfg *c = mxl_kv_pool_config(kvp);
    mxl_kv_pool_part pt;
    mxl_kv_pool_layer_part(kvp, v, l, &pt);
    const mxl_dtype t = pt.type;
    const int64_t e = kv_elem(s, &pt, table, p), kvd = s->kv_dim;
    if (t == MXL_DTYPE_F32) {
        s->be->ops->buffer_copy(s->be, x, (const float *)pt.base + e, (size_t)kvd * sizeof(float));
    } else if (t == MXL_DTYPE_F16) {
        const uint16_t *h = (const uint16_t *)pt.base + e;
        for (int64_t i = 0; i < kvd; i++) x[i] = mxl_f16_to_f32(h[i]);
    } else if (kv_block_type(t)) {
        s->be->ops->kv_dequantize_blocks(s->be, t, pt.base + mxl_kv_offset_bytes(t, e), kvd, x);
        if (kv_turbo_type(t)) s->be->ops->kv_rotate(s->be, x, kvd, s->kv_rot, true);
    } else {
        s->be->ops->kv_dequantize_i8(s->be, (const int8_t *)pt.base + e, pt.scale + e / c->group, kvd, c->group, x);
    }
}

static int64_t blocks_for(int64_t n_pos) { return (n_pos + MXL_KV_BLOCK - 1) / MXL_KV_BLOCK; }

/* Makes positions [pos, pos + n) writable: blocks past the table are allocated, a held block that
 * is shared or published is copied first (copy-on-write, keeping its rows below s->pos). On
 * failure the positions and contents are unchanged (blocks got so far stay held). */
static mxl_status kv_reserve(mxl_decoder_state *s, int64_t pos, int64_t n, mxl_error *err) {
    mxl_status st;
    if (n <= 0) return MXL_OK;
    for (int64_t i = pos / MXL_KV_BLOCK, last = (pos + n - 1) / MXL_KV_BLOCK; i <= last; i++) {
        if (i < s->n_table) {
            int64_t keep = s->pos - i * MXL_KV_BLOCK;
            keep = keep < 0 ? 0 : keep > MXL_KV_BLOCK ? MXL_KV_BLOCK : keep;
            if ((st = mxl_kv_pool_make_writable(s->kvp, &s->table[i], keep, err))) return st;
        } else {
            MXL_ASSERT(i == s->n_table && i < s->max_blocks);
            if ((st = mxl_kv_pool_alloc(s->kvp, &s->table[i], err))) return st;
            s->n_table++;
        }
    }
    return MXL_OK;
}

/* Drops the references on blocks [keep, n_table). */
static void kv_release_from(mxl_decoder_state *s, int64_t keep) {
    while (s->n_table > keep) mxl_kv_pool_release(s->kvp, s->table[--s->n_table]);
}

/* The path new states take: MXL_DECODER_REFERENCE=1 read once, at the first state, unless
 * mxl_decoder_set_reference_default said otherwise first. */
static atomic_int g_reference_default = -1; /* -1: not read yet */

bool mxl_decoder_reference_default(void) {
    int v = atomic_load(&g_reference_default);
    if (v < 0) {
        const char *ref = getenv("MXL_DECODER_REFERENCE");
        int expected = -1;
        atomic_compare_exchange_strong(&g_reference_default, &expected, ref && strcmp(ref, "1") == 0);
        v = atomic_load(&g_reference_default);
    }
    return v == 1;
}

void mxl_decoder_set_reference_default(bool on) { atomic_store(&g_reference_default, on ? 1 : 0); }

mxl_status mxl_decoder_state_create(const mxl_decoder *d, int64_t max_ctx, int64_t max_batch,
                                    mxl_threadpool *pool, mxl_decoder_state **out, mxl_error *err) {
    return mxl_decoder_state_create_ex(d, max_ctx, max_batch, pool, NULL, out, err);
}

/* Creates the state; kvp NULL: a private pool of ceil(max_ctx / 32) blocks with opts' types. */
static mxl_status state_create(const mxl_decoder *d, mxl_kv_pool *kvp, int64_t max_ctx, int64_t max_batch,
                               mxl_threadpool *pool, const mxl_decoder_kv_opts *opts, mxl_decoder_state **out,
                               mxl_error *err) {
    const mxl_decoder_hparams *hp = &d->hp;
    *out = NULL;
    mxl_decoder_kv_opts o = opts ? *opts : (mxl_decoder_kv_opts){MXL_DECODER_KV_AUTO, MXL_DECODER_KV_AUTO, 0, 0, 0};
    mxl_status cst = mxl_decoder_kv_check(hp, &o, err);
    if (cst) return cst;
    if (max_ctx <= 0 || max_batch <= 0) return mxl_error_set(err, MXL_ERR_ARG, "context and batch sizes must be positive");
    if (max_batch > (INT64_C(1) << 20)) max_batch = INT64_C(1) << 20; /* keeps the scratch sizes below in range */
    if (hp->max_ctx > 0 && max_ctx > hp->max_ctx) max_ctx = hp->max_ctx;
    if (max_batch > max_ctx) max_batch = max_ctx;
    uint64_t qd = (uint64_t)d->q_dim, kvd = (uint64_t)d->kv_dim;
    uint64_t H = (uint64_t)hp->hidden, F = (uint64_t)hp->ffn, B = (uint64_t)max_batch;
    uint64_t kv, kv_layer;
    if (mxl_mul_u64((uint64_t)max_ctx, kvd, &kv_layer) || mxl_mul_u64(kv_layer, (uint64_t)hp->n_layers, &kv) ||
        kv > ((uint64_t)1 << 56) || max_ctx > (INT64_C(1) << 34))
        return mxl_error_set(err, MXL_ERR_NOMEM, "a KV cache of %lld positions is too large for this model", (long long)max_ctx);
    if (kvp) {
        const mxl_kv_pool_cfg *c = mxl_kv_pool_config(kvp);
        if (c->n_layers != kv_layers(d) || c->kv_dim != (int64_t)kvd || c->v_in_k != (hp->mla_kv_rank > 0) ||
            ((c->k_type == MXL_DTYPE_I8 || c->v_type == MXL_DTYPE_I8) && !mxl_decoder_kv_group_fits(hp, c->group)) ||
            ((kv_block_type(c->k_type) || kv_block_type(c->v_type)) && kv_group_of(hp) != 32))
            return mxl_error_set(err, MXL_ERR_ARG, "the KV pool was made for another model shape (%lld layers, KV width %lld)",
                                 (long long)c->n_layers, (long long)c->kv_dim);
    }
    mxl_decoder_state *s = mxl_calloc(1, sizeof *s);
    if (!s) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    s->max_ctx = max_ctx;
    s->max_batch = max_batch;
    s->n_layers = kv_layers(d);
    s->kv_dim = (int64_t)kvd;
    s->rec_floats = d->rec_state_floats;
    s->pool = pool;
    s->d_be = d->be;
    s->n_threads = pool ? mxl_threadpool_size(pool) : 1;
    s->k_req = o.k;
    s->v_req = o.v;
    s->kv_group = kvp ? mxl_kv_pool_config(kvp)->group : kv_group_opt(hp, &o);
    s->kv_rot = kv_rot_chunk(hp);
    s->max_blocks = blocks_for(max_ctx);
    /* the MoE lanes' matmul scratch (models/moe.h) */
    const size_t lane_mm = hp->n_experts > 0 ? max_scratch(d, MXL_MOE_LANE_ROWS) : 0;
    /* float counts of each buffer, carved from one block (64-byte aligned pieces) */
    uint64_t sizes[] = {
        B * H, B * H, B * qd, B * kvd, B * kvd, B * qd, B * H, B * F, B * F,
        (uint64_t)hp->head_dim, (uint64_t)hp->head_dim, B * 2, B * 2, B, B * 2 * (uint64_t)hp->head_dim, B * 6,
        (B * sizeof(row_span) + sizeof(float) - 1) / sizeof(float),
        (uint64_t)d->be->ops->attention_scratch_floats(d->be, max_ctx, s->n_threads),
        (uint64_t)(max_scratch(d, max_batch) + 3) / 4,
        (uint64_t)s->max_blocks,
        hp->n_experts > 0 ? mxl_moe_scratch_floats(hp, max_batch, s->n_threads, lane_mm) : 0,
        hp->mla_kv_rank > 0 ? mxl_mla_scratch_floats(hp, max_batch) : 0,
        hp->attn_out_gate || hp->attn_q_gate ? B * qd : 0,
        (uint64_t)d->rec_state_floats,
        d->rec_state_floats ? mxl_rec_scratch_floats(hp, max_batch) : 0,
        d->rec_state_floats ? (B * sizeof(mxl_rec_span) + sizeof(float) - 1) / sizeof(float) : 0,
        hp->attn_q_gate ? 2 * B * qd : 0,
        hp->parallel_ssm || hp->moe_beside_mlp ? B * H : 0,
        hp->moe_beside_mlp ? B * H : 0,
        B * (uint64_t)(hp->n_layers * hp->ple_dim),
        B * (uint64_t)(hp->n_layers * hp->ple_dim),
        B * H * (uint64_t)hp->altup_n, B * H * (uint64_t)hp->altup_n, hp->altup_n ? B * H : 0, B * (uint64_t)hp->laurel_rank,
        B * (uint64_t)hp->altup_n, B * (uint64_t)(hp->altup_n * hp->altup_n),
    };
    float **ptrs[] = {&s->x, &s->xn, &s->q, &s->k, &s->v, &s->att, &s->o,
                      &s->gate, &s->up, &s->inv_freq, &s->inv_freq_local, (float **)&s->q_pos, (float **)&s->q_end,
                      (float **)&s->pos_ids, &s->rope_cs, (float **)&s->rope_pos, (float **)&s->spans, &s->attn_scratch, (float **)&s->mm_scratch,
                      (float **)&s->table, &s->moe_mem, &s->mla_mem, &s->ag, &s->rec,
                      &s->rec_mem, (float **)&s->rec_spans, &s->qg, &s->o2, &s->o3, &s->ple, &s->ple_tmp,
                      &s->streams, &s->pred, &s->laurel, &s->laurel_lo, &s->amod, &s->acoef};
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) total += (sizes[i] + 16) & ~(uint64_t)15;
    s->block = total < ((uint64_t)1 << 60) / sizeof(float) ? mxl_aligned_alloc(64, (size_t)total * sizeof(float)) : NULL;
    if (!s->block) {
        mxl_free(s);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory allocating the decoder scratch (%llu MB)", (unsigned long long)(total * 4 >> 20));
    }
    float *p = s->block;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *ptrs[i] = p;
        p += (sizes[i] + 16) & ~(uint64_t)15;
    }
    if (hp->n_experts > 0) mxl_moe_scratch_carve(hp, max_batch, s->n_threads, lane_mm, s->moe_mem, &s->moe);
    if (hp->mla_kv_rank > 0) mxl_mla_scratch_carve(hp, max_batch, s->mla_mem, &s->mla);
    if (s->rec_floats) {
        mxl_rec_scratch_carve(hp, max_batch, s->rec_mem, &s->recs);
        memset(s->rec, 0, s->rec_floats * sizeof(float));
    }
    mxl_rope_freqs(&hp->rope, max_ctx, s->inv_freq, &s->attn_factor);
    mxl_rope_freqs(&hp->rope_local, max_ctx, s->inv_freq_local, &s->attn_factor_local);
    s->reference = mxl_decoder_reference_default();
    s->be = s->reference ? mxl_backend_reference() : s->d_be;
    if (kvp) {
        s->kvp = kvp;
    } else {
        mxl_kv_pool_cfg pc;
        mxl_status st = mxl_decoder_kv_pool_cfg(d, &o, s->reference, s->max_blocks, &pc, err);
        if (!st) st = mxl_kv_pool_create(&pc, &s->kvp, err);
        if (st) {
            mxl_aligned_free(s->block);
            mxl_free(s);
            return st;
        }
        s->own_pool = true;
    }
    *out = s;
    return MXL_OK;
}

mxl_status mxl_decoder_state_create_ex(const mxl_decoder *d, int64_t max_ctx, int64_t max_batch,
                                       mxl_threadpool *pool, const mxl_decoder_kv_opts *opts,
                                       mxl_decoder_state **out, mxl_error *err) {
    return state_create(d, NULL, max_ctx, max_batch, pool, opts, out, err);
}

mxl_status mxl_decoder_state_create_pooled(const mxl_decoder *d, mxl_kv_pool *kvp, int64_t max_ctx, int64_t max_batch,
                                           mxl_threadpool *pool, mxl_decoder_state **out, mxl_error *err) {
    *out = NULL;
    if (!kvp) return mxl_error_set(err, MXL_ERR_ARG, "no KV pool given");
    return state_create(d, kvp, max_ctx, max_batch, pool, NULL, out, err);
}

void mxl_decoder_state_destroy(mxl_decoder_state *s) {
    if (!s) return;
    kv_release_from(s, 0);
    if (s->own_pool) mxl_kv_pool_destroy(s->kvp);
    mxl_aligned_free(s->block);
    mxl_free(s->lora_buf);
    mxl_free(s->lora_delta);
    mxl_free(s);
}

static mxl_decoder_kv_type kv_type_of(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_F32: return MXL_DECODER_KV_F32;
    case MXL_DTYPE_F16: return MXL_DECODER_KV_F16;
    case MXL_DTYPE_Q8_0: return MXL_DECODER_KV_Q8_0;
    case MXL_DTYPE_Q4_0: return MXL_DECODER_KV_Q4_0;
    case MXL_DTYPE_Q4_1: return MXL_DECODER_KV_Q4_1;
    case MXL_DTYPE_Q5_0: return MXL_DECODER_KV_Q5_0;
    case MXL_DTYPE_Q5_1: return MXL_DECODER_KV_Q5_1;
    case MXL_DTYPE_TURBO4: return MXL_DECODER_KV_TURBO4;
    case MXL_DTYPE_TURBO3: return MXL_DECODER_KV_TURBO3;
    default: return MXL_DECODER_KV_I8;
    }
}

mxl_decoder_kv_type mxl_decoder_state_kv_type(const mxl_decoder_state *s, bool v) { return kv_type_of(pool_type(s, v)); }

uint64_t mxl_decoder_state_kv_bytes(const mxl_decoder_state *s) {
    uint64_t bb = mxl_kv_pool_block_bytes(mxl_kv_pool_config(s->kvp));
    return bb * (uint64_t)(s->own_pool ? s->max_blocks : s->n_table);
}

uint64_t mxl_decoder_state_rec_bytes(const mxl_decoder_state *s) { return (uint64_t)s->rec_floats * sizeof(float); }

int64_t mxl_decoder_state_pos(const mxl_decoder_state *s) { return s->pos; }

int64_t mxl_decoder_state_capacity(const mxl_decoder_state *s) { return s->max_ctx; }

void mxl_decoder_state_truncate(mxl_decoder_state *s, int64_t pos) {
    /* Rows at >= pos of the last kept block stay in memory but are never read again: attention
     * reads rows below the query's position only, and the next forward overwrites them from pos
     * on (after copying the block if it is shared). Whole blocks past pos go back to the pool. */
    if (pos < 0) pos = 0;
    if (pos < s->pos) s->pos = s->rec_floats ? 0 : pos; /* a recurrent state cannot go back: from the start */
    if (s->pos <= s->rope_delta_from) s->rope_delta = 0, s->rope_delta_from = 0;
    if (s->rec_floats && s->pos == 0) memset(s->rec, 0, s->rec_floats * sizeof(float));
    kv_release_from(s, blocks_for(s->pos));
}

mxl_kv_pool *mxl_decoder_state_kv_pool(const mxl_decoder_state *s) { return s->kvp; }

int64_t mxl_decoder_state_blocks(const mxl_decoder_state *s, const int32_t **ids) {
    if (ids) *ids = s->table;
    return blocks_for(s->pos);
}

/* The state's table becomes ids[0 .. ceil(n_pos / 32)) at position n_pos (checked by the callers). */
static void adopt_blocks(mxl_decoder_state *s, const int32_t *ids, int64_t n_pos) {
    int64_t nb = blocks_for(n_pos);
    /* take the new references before dropping the old ones: the lists may overlap */
    for (int64_t i = 0; i < nb; i++) mxl_kv_pool_retain(s->kvp, ids[i]);
    kv_release_from(s, 0);
    for (int64_t i = 0; i < nb; i++) s->table[i] = ids[i];
    s->n_table = nb;
    s->pos = n_pos;
    s->rope_delta = s->rope_delta_from = 0; /* (cached prefixes hold no image positions) */
}

static mxl_status adopt_checked(mxl_decoder_state *s, const int32_t *ids, int64_t n_pos, const void *rec, mxl_error *err) {
    if (s->rec_floats && n_pos > 0 && !rec)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "a model with recurrent layers cannot take cached KV blocks without their state");
    if (n_pos < 0 || n_pos > s->max_ctx)
        return mxl_error_set(err, MXL_ERR_ARG, "cannot adopt %lld positions into a context of %lld", (long long)n_pos,
                             (long long)s->max_ctx);
    int64_t nb = blocks_for(n_pos), nblk = mxl_kv_pool_config(s->kvp)->n_blocks;
    for (int64_t i = 0; i < nb; i++)
        if (ids[i] < 0 || ids[i] >= nblk)
            return mxl_error_set(err, MXL_ERR_ARG, "block id %d is not in the KV pool of %lld blocks", ids[i], (long long)nblk);
    adopt_blocks(s, ids, n_pos);
    if (s->rec_floats && n_pos > 0) memcpy(s->rec, rec, s->rec_floats * sizeof(float));
    else if (s->rec_floats) memset(s->rec, 0, s->rec_floats * sizeof(float));
    return MXL_OK;
}

mxl_status mxl_decoder_state_adopt(mxl_decoder_state *s, const int32_t *ids, int64_t n_pos, mxl_error *err) {
    return adopt_checked(s, ids, n_pos, NULL, err);
}

mxl_status mxl_decoder_state_adopt_rec(mxl_decoder_state *s, const int32_t *ids, int64_t n_pos, const void *rec, mxl_error *err) {
    return adopt_checked(s, ids, n_pos, rec, err);
}

void mxl_decoder_state_rec_save(const mxl_decoder_state *s, void *dst) {
    if (s->rec_floats) memcpy(dst, s->rec, s->rec_floats * sizeof(float));
}

mxl_status mxl_decoder_state_fork(mxl_decoder_state *dst, const mxl_decoder_state *src, int64_t n_pos, mxl_error *err) {
    if (dst == src) return mxl_error_set(err, MXL_ERR_ARG, "a state cannot fork from itself");
    if (dst->kvp != src->kvp) return mxl_error_set(err, MXL_ERR_ARG, "fork: the states use different KV pools");
    if (dst->n_layers != src->n_layers || dst->kv_dim != src->kv_dim)
        return mxl_error_set(err, MXL_ERR_ARG, "fork: the states were made for different models");
    if (n_pos < 0 || n_pos > src->pos)
        return mxl_error_set(err, MXL_ERR_ARG, "fork: %lld positions asked, the source holds %lld", (long long)n_pos,
                             (long long)src->pos);
    if (!src->rec_floats || n_pos == 0) {
        mxl_status st = mxl_decoder_state_adopt(dst, src->table, n_pos, err);
        if (!st && src->rope_delta && n_pos > src->rope_delta_from) dst->rope_delta = src->rope_delta, dst->rope_delta_from = src->rope_delta_from;
        return st;
    }
    /* recurrent layers: their state exists at the source's position only */
    if (n_pos != src->pos)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "fork: a model with recurrent layers forks at the source's position (%lld) only",
                             (long long)src->pos);
    if (n_pos > dst->max_ctx)
        return mxl_error_set(err, MXL_ERR_ARG, "cannot adopt %lld positions into a context of %lld", (long long)n_pos, (long long)dst->max_ctx);
    adopt_blocks(dst, src->table, n_pos);
    dst->rope_delta = src->rope_delta, dst->rope_delta_from = src->rope_delta_from;
    memcpy(dst->rec, src->rec, src->rec_floats * sizeof(float));
    return MXL_OK;
}

void mxl_decoder_state_set_reference(mxl_decoder_state *s, bool on) {
    s->reference = on;
    s->be = on ? mxl_backend_reference() : s->d_be;
    if (!s->own_pool) return; /* a shared pool's storage is fixed */
    const bool v_in_k = mxl_kv_pool_config(s->kvp)->v_in_k;
    mxl_dtype kt = kv_dtype(s->k_req, on), vt = v_in_k ? kt : kv_dtype(s->v_req, on);
    if (kt == pool_type(s, false) && vt == pool_type(s, true)) return;
    mxl_kv_pool_cfg c = *mxl_kv_pool_config(s->kvp);
    c.k_type = kt;
    c.v_type = vt;
    c.group = s->kv_group;
    mxl_kv_pool *n = NULL;
    if (mxl_kv_pool_create(&c, &n, NULL)) return; /* keeps the current storage */
    /* a fresh pool hands out blocks 0, 1, ...: block i of the table moves to id i, its rows
     * re-stored through f32, one row at a time in the workspace's k rows */
    int64_t nb = blocks_for(s->pos);
    for (int64_t i = 0; i < nb; i++) {
        int32_t id = -1;
        mxl_status st = mxl_kv_pool_alloc(n, &id, NULL);
        MXL_ASSERT(st == MXL_OK && id == i);
    }
    for (int64_t l = 0; l < s->n_layers; l++)
        for (int64_t p = 0; p < s->pos; p++) {
            const int32_t nid[1] = {(int32_t)(p / MXL_KV_BLOCK)};
            for (int v = 0; v < (v_in_k ? 1 : 2); v++) {
                kv_get(s, s->kvp, s->table, v, l, p, s->k);
                kv_put(s, n, nid, v, l, p % MXL_KV_BLOCK, s->k, s->kv_dim);
            }
        }
    kv_release_from(s, 0);
    mxl_kv_pool_destroy(s->kvp);
    s->kvp = n;
    for (int64_t i = 0; i < nb; i++) s->table[i] = (int32_t)i;
    s->n_table = nb;
}

/* prep (NULL: none) makes x's rows first: on the reference path all at once, otherwise within
 * the matmul's quantization dispatch (matmul.h: mxl_row_prep) */
static void matmul(const mxl_weight *W, const mxl_row_prep *prep, const float *x, int64_t n, float *y,
                   mxl_decoder_state *s) {
    s->be->ops->matmul(s->be, W, prep, x, n, y, s->mm_scratch, s->pool);
}

/* y = x W (+ b), x [n, W.cols], y [n, W.rows]; prep as matmul(). */
static void linear(const mxl_weight *W, const float *b, const mxl_row_prep *prep, const float *x, int64_t n, float *y,
                   mxl_decoder_state *s) {
    matmul(W, prep, x, n, y, s);
    if (!b) return;
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < W->rows; r++) y[t * W->rows + r] += b[r];
}

/* ---- forward ----
 *
 * Every pass runs a block of n rows through the layers with one workspace `ws` (its scratch, its
 * matmul pool and path): each matmul (QKV, O, MLP, LM head) runs once over all n rows, so the
 * weights are read once per pass whatever the number of sequences. Everything per-row (norms,
 * QK-norm, RoPE at the row's own position) and per-sequence (KV append, attention over the
 * sequence's own cache) follows the spans. */

static void norm_rows(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_decoder_norm *nw, const float *x,
                      int64_t n, int64_t dim, float *y) {
    for (int64_t t = 0; t < n; t++) {
        if (hp->norm == MXL_NORM_LAYER) be->ops->layernorm(be, x + t * dim, nw->w, nw->b, dim, hp->norm_eps, y + t * dim);
        else be->ops->rmsnorm(be, x + t * dim, nw->w, dim, hp->norm_eps, hp->norm_plus_one, y + t * dim);
    }
}

/* norm_rows of rows [t0, t1) (an mxl_row_prep) */
/* BitNet's input fake-quantization (decoder.h act_quant8) of rows x[rows, dim] in place, as
 * transformers' ActQuant computes it in f32 (round half to even). */
static void quant8_rows(float *x, int64_t rows, int64_t dim) {
    for (int64_t r = 0; r < rows; r++) {
        float *v = x + r * dim, m = 0.0f;
        for (int64_t i = 0; i < dim; i++) m = fmaxf(m, fabsf(v[i]));
        const float s = 127.0f / fmaxf(m, 1e-5f);
        for (int64_t i = 0; i < dim; i++) v[i] = fminf(fmaxf(nearbyintf(v[i] * s), -128.0f), 127.0f) / s;
    }
}

typedef struct norm_rows_ctx {
    const mxl_backend *be;
    const mxl_decoder_hparams *hp;
    const mxl_decoder_norm *nw;
    const float *x;
    float *y;
    int64_t dim;
} norm_rows_ctx;

/* The norm of rows [t0, t1) (then BitNet's fake-quantization: the linear layers read them). */
static void norm_rows_prep(void *vctx, int64_t t0, int64_t t1) {
    const norm_rows_ctx *c = vctx;
    norm_rows(c->be, c->hp, c->nw, c->x + t0 * c->dim, t1 - t0, c->dim, c->y + t0 * c->dim);
    if (c->hp->act_quant8) quant8_rows(c->y + t0 * c->dim, t1 - t0, c->dim);
}

/* QK-norm is an RMSNorm in every family that has one (Gemma's with 1 + w). */
static void rms_rows(const mxl_backend *be, const mxl_decoder_hparams *hp, const float *w, float *x, int64_t rows,
                     int64_t dim) {
    for (int64_t r = 0; r < rows; r++) be->ops->rmsnorm(be, x + r * dim, w, dim, hp->norm_eps, hp->norm_plus_one, x + r * dim);
}

typedef float v4f __attribute__((vector_size(16))); /* 4 lanes of the target's baseline SIMD */

static void residual_add(float *x, const float *y, int64_t n, float scale) {
    if (scale == 1.0f) {
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) { /* the same additions, 4 lanes at a time */
            v4f a, b;
            memcpy(&a, x + i, sizeof a);
            memcpy(&b, y + i, sizeof b);
            a += b;
            memcpy(x + i, &a, sizeof a);
        }
        for (; i < n; i++) x[i] += y[i];
    } else {
        for (int64_t i = 0; i < n; i++) x[i] += scale * y[i];
    }
}

/* x = alpha x + beta y (residual_from_norm) */
static void weighted_add(float *x, float alpha, const float *y, float beta, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = alpha * x[i] + beta * y[i];
}

/* cs = a row's RoPE cosines / sines at its positions p[3]: all three equal (text) is the plain
 * table at p[0]; else (M-RoPE's image rows) frequency pair i takes the position of the section it
 * falls in (hp.mrope_section: the first sections[0] pairs time, the next height, then width). */
static void rope_row_table(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_rope_cfg *rc, const float *inv, float af,
                           const int64_t *p, float *cs) {
    if (p[0] == p[1] && p[1] == p[2]) {
        be->ops->rope_table(be, rc, inv, af, p[0], cs);
        return;
    }
    const int half = rc->rotary_dim / 2;
    const int32_t *sec = hp->mrope_section;
    if (hp->mrope_interleaved) {
        float t3[3][2 * MXL_MROPE_MAX_ROTARY];
        for (int a = 0; a < 3; a++) be->ops->rope_table(be, rc, inv, af, p[a], t3[a]);
        for (int i = 0; i < half; i++) {
            const int a = i % 3 == 1 && i < 3 * sec[1] ? 1 : i % 3 == 2 && i < 3 * sec[2] ? 2 : 0;
            cs[i] = t3[a][i], cs[half + i] = t3[a][half + i];
        }
        return;
    }
    float tmp[2 * MXL_MROPE_MAX_ROTARY];
    for (int a = 0, i = 0; a < 3; a++) {
        be->ops->rope_table(be, rc, inv, af, p[a], tmp);
        for (int e = i + sec[a]; i < e && i < half; i++) cs[i] = tmp[i], cs[half + i] = tmp[half + i];
    }
}

/* One forward pass: workspace, spans, and the layer whose attention runs. */
typedef struct fwd_pass {
    const mxl_decoder *d;
    mxl_decoder_state *ws;
    const row_span *spans;
    int64_t n_spans, n_rows;
    int64_t layer; /* for attn_spans_task */
    bool rope_ready[2]; /* ws->rope_cs holds this pass's rows for the global / local RoPE */
    const mxl_decoder_media *media; /* rows given as embeddings (rows relative to this pass), or NULL */
    int n_media;
} fwd_pass;

/* ---- LoRA (models/lora.h) ----
 *
 * The updates of a group of projections that read the same rows (Q / K / V, gate / up, O, down):
 * for each span whose state runs adapters, delta rows = sum over its adapters of scale * B (A x)
 * (A x by the backend, a dense weight; B by lowrank_acc from zero) in the state's lora_delta, one
 * block of rows per projection the state's adapters touch; then y rows += delta. The deltas are a
 * side task of the group's base product (backend.h), one part per projection, so the threads that
 * take them make them while the others run the base weights; a span longer than its state's
 * scratch goes in chunks after the product.
 * The bits are the same either way and for any batch: each row's delta is its own sum. */
typedef struct lora_group {
    const fwd_pass *f;
    int64_t l;
    int n;
    mxl_lora_module m[3];
    const float *x; /* the group's input rows (the pass's) */
    float *y[3];    /* each projection's output rows */
} lora_group;

/* Output width of layer l's projection m in s's adapters (0: none of them touches it). */
static int64_t lora_out(const mxl_decoder_state *s, int64_t l, mxl_lora_module m) {
    for (int a = 0; a < s->n_lora; a++) {
        const mxl_lora_pair *p = mxl_lora_at(s->lora[a].lora, l, m);
        if (p) return p->out;
    }
    return 0;
}

static bool lora_group_any(const lora_group *g) {
    for (int64_t si = 0; si < g->f->n_spans; si++)
        for (int i = 0; i < g->n; i++)
            if (lora_out(g->f->spans[si].s, g->l, g->m[i])) return true;
    return false;
}

/* delta of rows [off, off + k) of span sp (k <= its state's max_batch) for the group's projection i
 * into its block of its state's lora_delta (the blocks of projections 0..i-1 come first) */
static void lora_delta_rows(const lora_group *g, const row_span *sp, int64_t off, int64_t k, int i) {
    mxl_decoder_state *s = sp->s;
    const mxl_backend *be = g->f->ws->be;
    const int64_t out = lora_out(s, g->l, g->m[i]);
    if (!out) return;
    float *d = s->lora_delta;
    for (int j = 0; j < i; j++) d += k * lora_out(s, g->l, g->m[j]);
    memset(d, 0, (size_t)(k * out) * sizeof(float));
    for (int a = 0; a < s->n_lora; a++) {
        const mxl_lora_pair *p = mxl_lora_at(s->lora[a].lora, g->l, g->m[i]);
        if (!p) continue;
        float *ax = s->lora_buf + (int64_t)i * s->max_batch * s->lora_cap; /* (a block per projection: parts run at once) */
        mxl_lora_pair_prefetch(p);
        be->ops->matmul(be, &p->wa, NULL, g->x + (sp->row0 + off) * p->in, k, ax, NULL, NULL);
        be->ops->lowrank_acc(be, ax, k, p->r, p->bt, p->bt_dtype, out, s->lora[a].scale * p->scale, d);
    }
}

/* y[0..m) += d[0..m) (blocks of 16 with a fixed count: GCC vectorizes them at -O2) */
static void add_rows_to(float *restrict y, const float *restrict d, int64_t m) {
    int64_t j = 0;
    for (; j + 16 <= m; j += 16)
        for (int u = 0; u < 16; u++) y[j + u] += d[j + u];
    for (; j < m; j++) y[j] += d[j];
}

/* y rows [off, off + k) of span sp += their deltas (lora_delta_rows) */
static void lora_add_rows(const lora_group *g, const row_span *sp, int64_t off, int64_t k) {
    const float *d = sp->s->lora_delta;
    for (int i = 0; i < g->n; i++) {
        const int64_t out = lora_out(sp->s, g->l, g->m[i]);
        if (!out) continue;
        add_rows_to(g->y[i] + (sp->row0 + off) * out, d, k * out);
        d += k * out;
    }
}

/* every span's rows fit its state's scratch: the deltas can be a side task */
static bool lora_group_fits(const lora_group *g) {
    for (int64_t si = 0; si < g->f->n_spans; si++)
        if (g->f->spans[si].n > g->f->spans[si].s->max_batch) return false;
    return true;
}

/* side task part i: projection i's deltas for every span */
static void lora_side(void *ctx, int i) {
    const lora_group *g = ctx;
    for (int64_t si = 0; si < g->f->n_spans; si++)
        if (g->f->spans[si].s->n_lora) lora_delta_rows(g, &g->f->spans[si], 0, g->f->spans[si].n, i);
}

/* after the group's product (and bias): the deltas made beside it added, or, side == false, made
 * and added chunk by chunk */
static void lora_finish(const lora_group *g, bool side) {
    for (int64_t si = 0; si < g->f->n_spans; si++) {
        const row_span *sp = &g->f->spans[si];
        if (!sp->s->n_lora) continue;
        if (side) {
            lora_add_rows(g, sp, 0, sp->n);
            continue;
        }
        for (int64_t off = 0; off < sp->n; off += sp->s->max_batch) {
            const int64_t k = sp->n - off < sp->s->max_batch ? sp->n - off : sp->s->max_batch;
            for (int i = 0; i < g->n; i++) lora_delta_rows(g, sp, off, k, i);
            lora_add_rows(g, sp, off, k);
        }
    }
}

/* linear() for n_w weights of the same input (Q, K, V; gate, up): one quantization of x and one
 * pool dispatch on the panel path (matmul.h), the same bits as n_w linear() calls; then the group's
 * LoRA updates (g NULL: none). */
static void linear_lora(const mxl_weight *const *W, const float *const *b, int n_w, const mxl_row_prep *prep, const float *x,
                        int64_t n, float *const *y, mxl_decoder_state *s, const lora_group *g) {
    if (g && !lora_group_any(g)) g = NULL;
    const bool side = g && lora_group_fits(g);
    const mxl_side_task task = {lora_side, (void *)g, g ? g->n : 0};
    s->be->ops->matmul_multi(s->be, W, n_w, prep, side ? &task : NULL, x, n, y, s->mm_scratch, s->pool);
    for (int i = 0; i < n_w; i++)
        if (b[i])
            for (int64_t t = 0; t < n; t++)
                for (int64_t r = 0; r < W[i]->rows; r++) y[i][t * W[i]->rows + r] += b[i][r];
    if (g) lora_finish(g, side);
}

/* *buf holds rows x want floats (grown when *cap, its floats per row, is less) */
static mxl_status grow_rows(float **buf, int64_t *cap, int64_t want, int64_t rows, mxl_error *err) {
    if (want <= *cap) return MXL_OK;
    float *b = mxl_malloc((size_t)(rows * want) * sizeof(float));
    if (!b) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory for the adapters' scratch");
    mxl_free(*buf);
    *buf = b, *cap = want;
    return MXL_OK;
}

mxl_status mxl_decoder_state_set_lora(mxl_decoder_state *s, const mxl_decoder_lora *use, int n, mxl_error *err) {
    if (n < 0 || n > MXL_DECODER_MAX_LORA) return mxl_error_set(err, MXL_ERR_ARG, "%d adapters at once (at most %d)", n, MXL_DECODER_MAX_LORA);
    int64_t cap = 0;
    for (int i = 0; i < n; i++)
        if (use[i].lora->max_r > cap) cap = use[i].lora->max_r;
    /* the widest group (linear_lora): per layer, the output widths of the projections any
     * adapter touches, summed over Q / K / V and over gate / up; O and down alone */
    int64_t dcap = 0, nl = 0;
    for (int i = 0; i < n; i++)
        if (use[i].lora->n_layers > nl) nl = use[i].lora->n_layers;
    for (int64_t l = 0; l < nl; l++) {
        int64_t o[MXL_LORA_N_MODULES] = {0};
        for (int a = 0; a < n; a++)
            for (int m = 0; m < MXL_LORA_N_MODULES; m++) {
                const mxl_lora_pair *p = mxl_lora_at(use[a].lora, l, (mxl_lora_module)m);
                if (p) o[m] = p->out;
            }
        const int64_t w[4] = {o[MXL_LORA_Q] + o[MXL_LORA_K] + o[MXL_LORA_V], o[MXL_LORA_GATE] + o[MXL_LORA_UP], o[MXL_LORA_O],
                              o[MXL_LORA_DOWN]};
        for (int g = 0; g < 4; g++)
            if (w[g] > dcap) dcap = w[g];
    }
    mxl_status st = grow_rows(&s->lora_buf, &s->lora_cap, cap, 3 * s->max_batch, err);
    if (!st) st = grow_rows(&s->lora_delta, &s->delta_cap, dcap, s->max_batch, err);
    if (st) return st;
    for (int i = 0; i < n; i++) s->lora[i] = use[i];
    s->n_lora = n;
    return MXL_OK;
}

/* Attention of one span over its own state's layer-l cache (rows already appended); the span's
 * queries are ws->q rows [row0, row0 + n), the outputs go to the same rows of ws->att. */
static void attend_span(const fwd_pass *f, const row_span *sp, mxl_threadpool *pool, float *scratch) {
    const mxl_decoder_hparams *hp = &f->d->hp;
    const mxl_decoder_layer *L = &f->d->layers[f->layer];
    mxl_decoder_state *s = sp->s;
    /* latent attention: V is the last mla_kv_rank of each cached row (models/mla.h) */
    int64_t hd = L->head_dim, vd = hp->mla_kv_rank > 0 ? hp->mla_kv_rank : hd, qd = L->n_heads * hd, kvd = s->kv_dim;
    const mxl_kv_pool *kvp = s->kvp;
    const mxl_kv_pool_cfg *pc = mxl_kv_pool_config(kvp);
    mxl_kv_pool_part kp, vp; /* the layer's rows: K's region, V's (its own, or the F16 edge region) */
    mxl_kv_pool_layer_part(kvp, false, L->kv_layer, &kp);
    mxl_kv_pool_layer_part(kvp, true, L->kv_layer, &vp);
    const int64_t e0 = kp.layer * MXL_KV_BLOCK * kvd; /* within a block (rows kv_dim apart) */
    const int64_t v0 = vp.layer * MXL_KV_BLOCK * kvd + (pc->v_in_k ? hd - vd : 0);
    mxl_attn_params ap = {(int)L->n_heads, (int)L->n_kv_heads, (int)hd, L->attn_scale, hp->attn_softcap, L->sinks,
                          L->sliding ? hp->sliding_window : 0, !hp->bidirectional, (int)vd, L->chunked ? hp->attn_chunk : 0,
                          f->n_media ? f->ws->q_end + sp->row0 : NULL};
    mxl_kv_paged_view kv = {kp.type, vp.type, kp.base + mxl_kv_offset_bytes(kp.type, e0), vp.base + mxl_kv_offset_bytes(vp.type, v0),
                            kp.scale ? kp.scale + e0 / pc->group : NULL, vp.scale ? vp.scale + v0 / pc->group : NULL,
                            pc->group, sp->pos + sp->n, kvd, MXL_KV_BLOCK, kp.stride, s->table, vp.stride};
    const mxl_backend *be = f->ws->be;
    float *q = f->ws->q + sp->row0 * qd, *att = f->ws->att + sp->row0 * L->n_heads * vd;
    /* TurboQuant keeps rotated rows: queries rotated alike keep every dot; a rotated V sums to a
     * rotated output, turned back */
    if (kv_turbo_type(kp.type)) be->ops->kv_rotate(be, q, sp->n * qd, s->kv_rot, false);
    be->ops->attention_paged(be, &ap, q, sp->n, f->ws->q_pos + sp->row0, &kv, att, scratch, pool);
    if (kv_turbo_type(vp.type)) be->ops->kv_rotate(be, att, sp->n * L->n_heads * vd, s->kv_rot, true);
}

/* The layer's QK-norm (if any) of one row's queries qt [n_heads * head_dim] and keys kt
 * [n_kv_heads * head_dim], in place. */
static void qk_norm(const mxl_backend *be, const mxl_decoder_hparams *hp, const mxl_decoder_layer *L, float *qt, float *kt) {
    const int64_t hd = L->head_dim;
    if (!L->q_norm) return; /* (a layer without one: Llama 4's NoPE layers) */
    const bool full = hp->qk_norm_kind == MXL_QK_NORM_FULL;
    if (hp->qk_norm_kind == MXL_QK_NORM_NONE) return;
    rms_rows(be, hp, L->q_norm, qt, full ? 1 : L->n_heads, full ? L->n_heads * hd : hd);
    if (!L->kv_shared) rms_rows(be, hp, L->k_norm, kt, full ? 1 : L->n_kv_heads, full ? L->n_kv_heads * hd : hd);
}

/* A span's rows of this layer made ready for attention: QK-norm, RoPE at each row's position
 * (ws->rope_cs), then K and V appended to its own state's cache (in its storage type). */
static void prepare_span(const fwd_pass *f, const row_span *sp) {
    const mxl_decoder_hparams *hp = &f->d->hp;
    const mxl_decoder_layer *L = &f->d->layers[f->layer];
    mxl_decoder_state *ws = f->ws, *s = sp->s;
    const int64_t hd = L->head_dim, qd = L->n_heads * hd, kvd = L->n_kv_heads * hd;
    const mxl_rope_cfg *rc = L->sliding ? &hp->rope_local : &hp->rope;
    const int rk = L->sliding ? 1 : 0;
    for (int64_t t = sp->row0; t < sp->row0 + sp->n; t++) {
        float *qt = ws->q + t * qd, *kt = ws->k + t * kvd;
        if (!hp->qk_norm_after_rope) qk_norm(ws->be, hp, L, qt, kt);
        if (L->v_norm) rms_rows(ws->be, hp, L->v_norm, ws->v + t * kvd, L->n_kv_heads, hd);
        if (L->rope) {
            const float *cs = ws->rope_cs + (t * 2 + rk) * hp->head_dim; /* (rows of the widest head apart) */
            ws->be->ops->rope_apply_table(ws->be, rc, cs, qt, (int)L->n_heads);
            if (!L->kv_shared) ws->be->ops->rope_apply_table(ws->be, rc, cs, kt, (int)L->n_kv_heads);
        }
        if (hp->qk_norm_after_rope) qk_norm(ws->be, hp, L, qt, kt);
        if (hp->q_temp_beta > 0 && !(hp->q_temp_nope_only && L->rope)) {
            const float sc = 1.0f + hp->q_temp_beta * logf(1.0f + floorf((float)(ws->q_pos[t] + hp->q_temp_offset) / (float)hp->q_temp_orig));
            for (int64_t i = 0; i < qd; i++) qt[i] *= sc;
        }
    }
    /* append in the state's storage types (f16 / int8 conversion here, once per token); the
     * blocks were reserved before the pass, so this only writes the span's own rows (a KV-shared
     * layer attends over its source layer's rows, written earlier in this pass) */
    for (int64_t t = 0; t < sp->n && !L->kv_shared; t++) {
        kv_put(s, s->kvp, s->table, false, L->kv_layer, sp->pos + t, ws->k + (sp->row0 + t) * kvd, kvd);
        if (!hp->mla_kv_rank) kv_put(s, s->kvp, s->table, true, L->kv_layer, sp->pos + t, ws->v + (sp->row0 + t) * kvd, kvd);
    }
}

/* Spans split over the workspace pool's threads, each prepared and attended on one thread with
 * its own state's scratch (slot 0, which only that span's task touches). */
static void attn_spans_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)thread_index;
    const fwd_pass *f = vctx;
    int64_t a = f->n_spans * task / n_tasks, b = f->n_spans * (task + 1) / n_tasks;
    for (int64_t i = a; i < b; i++) {
        prepare_span(f, &f->spans[i]);
        attend_span(f, &f->spans[i], NULL, f->spans[i].s->attn_scratch);
    }
}

/* The attention output att [n, heads * head_dim] times the gate g [n, gate rows]: sigmoid (AFMoE)
 * or softplus as torch computes it (Laguna), element-wise or one per head. */
static void attn_gate(const mxl_decoder_hparams *hp, const mxl_decoder_layer *L, float *att, const float *g, int64_t n) {
    const int64_t hd = L->head_dim, per = hp->attn_gate_per_head ? hd : 1;
    const int64_t rows = hp->attn_q_gate ? L->n_heads * hd : L->w_attn_gate.rows;
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < rows; r++) {
            const float x = g[t * rows + r];
            const float v = hp->attn_gate_softplus ? (x > 20.0f ? x : log1pf(expf(x))) : 1.0f / (1.0f + expf(-x));
            for (int64_t j = 0; j < per; j++) att[(t * rows + r) * per + j] *= v;
        }
}

static void attention_block(fwd_pass *f, int64_t l, const mxl_row_prep *prep, const float *h) {
    const mxl_decoder_hparams *hp = &f->d->hp;
    const mxl_decoder_layer *L = &f->d->layers[l];
    mxl_decoder_state *ws = f->ws;
    int64_t n = f->n_rows, hd = L->head_dim;
    if (L->mla) {
        mxl_mla_project(ws->be, hp, L, prep, h, n, ws->q, ws->k, &ws->mla, ws->mm_scratch, ws->pool);
    } else {
        /* (the output gate reads the same rows: one more weight of the pass; a KV-shared layer
         * projects queries only; V from K's projection without v_proj) */
        const mxl_weight *W[4] = {&L->wq};
        const float *b[4] = {L->bq};
        float *y[4] = {hp->attn_q_gate ? ws->qg : ws->q};
        int nw = 1;
        if (!L->kv_shared) {
            W[nw] = &L->wk, b[nw] = L->bk, y[nw++] = ws->k;
            if (L->wv.rows > 0) W[nw] = &L->wv, b[nw] = L->bv, y[nw++] = ws->v;
        }
        if (L->w_attn_gate.rows > 0) W[nw] = &L->w_attn_gate, b[nw] = NULL, y[nw++] = ws->ag;
        lora_group g = {f, l, 1, {MXL_LORA_Q}, h, {y[0]}};
        if (!L->kv_shared) {
            g.m[g.n] = MXL_LORA_K, g.y[g.n++] = ws->k;
            if (L->wv.rows > 0) g.m[g.n] = MXL_LORA_V, g.y[g.n++] = ws->v;
        }
        linear_lora(W, b, nw, prep, h, n, y, ws, &g);
        if (!L->kv_shared && L->wv.rows == 0) memcpy(ws->v, ws->k, (size_t)(n * L->n_kv_heads * hd) * sizeof(float));
        if (hp->attn_q_gate) /* per head [query; gate] rows apart */
            for (int64_t t = 0; t < n; t++)
                for (int64_t hh = 0; hh < L->n_heads; hh++) {
                    const float *src = ws->qg + (t * L->n_heads + hh) * 2 * hd;
                    memcpy(ws->q + (t * L->n_heads + hh) * hd, src, (size_t)hd * sizeof(float));
                    memcpy(ws->ag + (t * L->n_heads + hh) * hd, src + hd, (size_t)hd * sizeof(float));
                }
    }
    if (hp->clip_qkv > 0) {
        const float c = hp->clip_qkv;
        const int64_t nq = n * L->n_heads * hd, nkv = n * L->n_kv_heads * hd;
        for (int64_t i = 0; i < nq; i++) ws->q[i] = fminf(fmaxf(ws->q[i], -c), c);
        for (int64_t i = 0; i < nkv; i++) {
            ws->k[i] = fminf(fmaxf(ws->k[i], -c), c);
            ws->v[i] = fminf(fmaxf(ws->v[i], -c), c);
        }
    }
    const mxl_rope_cfg *rc = L->sliding ? &hp->rope_local : &hp->rope;
    const int rk = L->sliding ? 1 : 0;
    if (L->rope && !f->rope_ready[rk]) { /* each row's cosines / sines once per pass, not per layer */
        /* the frequency tables depend on the context length only for DYNAMIC scaling, which is
         * computed from each state's own max_ctx: use the row's own state's table */
        for (int64_t si = 0; si < f->n_spans; si++) {
            const row_span *sp = &f->spans[si];
            const float *inv = L->sliding ? sp->s->inv_freq_local : sp->s->inv_freq;
            float af = L->sliding ? sp->s->attn_factor_local : sp->s->attn_factor;
            for (int64_t t = sp->row0; t < sp->row0 + sp->n; t++)
                rope_row_table(ws->be, hp, rc, inv, af, ws->rope_pos + t * 3, ws->rope_cs + (t * 2 + rk) * hp->head_dim);
        }
        f->rope_ready[rk] = true;
    }
    f->layer = l;
    int nth = ws->pool ? mxl_threadpool_size(ws->pool) : 1;
    if (f->n_spans > 1 && f->n_spans >= nth && nth > 1) {
        /* a decode batch: one dispatch for all sequences rather than one per sequence */
        mxl_threadpool_run(ws->pool, nth, attn_spans_task, f);
    } else {
        /* few spans (a prefill chunk): each splits its heads over its own state's pool */
        for (int64_t si = 0; si < f->n_spans; si++) {
            prepare_span(f, &f->spans[si]);
            attend_span(f, &f->spans[si], f->spans[si].s->pool, f->spans[si].s->attn_scratch);
        }
    }
    if (L->mla) mxl_mla_values(ws->be, hp, L, ws->att, n, &ws->mla, ws->mm_scratch, ws->pool);
    if (L->w_attn_gate.rows > 0 || hp->attn_q_gate) attn_gate(hp, L, ws->att, ws->ag, n);
    if (L->attn_sub_norm.w) norm_rows(ws->be, hp, &L->attn_sub_norm, ws->att, n, L->wo.cols, ws->att);
    if (hp->act_quant8) quant8_rows(ws->att, n, L->wo.cols);
    const mxl_weight *wo = &L->wo;
    const float *att = L->mla ? ws->mla.vo : ws->att;
    const lora_group g = {f, l, 1, {MXL_LORA_O}, att, {ws->o}};
    linear_lora(&wo, &L->bo, 1, NULL, att, n, &ws->o, ws, &g);
}

/* A recurrent layer's mixer (recurrent.h) of the pass's rows into ws->o, each span on its own
 * sequence's state. */
static void rec_block(const fwd_pass *f, int64_t l, const mxl_row_prep *prep, const float *h) {
    const mxl_decoder_layer *L = &f->d->layers[l];
    mxl_decoder_state *ws = f->ws;
    for (int64_t si = 0; si < f->n_spans; si++) {
        const row_span *sp = &f->spans[si];
        ws->rec_spans[si] = (mxl_rec_span){sp->row0, sp->n, sp->s->rec + L->rec->state_off, sp->pos};
    }
    mxl_rec_forward(ws->be, &f->d->hp, L->rec, prep, h, f->n_rows, ws->rec_spans, f->n_spans, ws->o, &ws->recs, ws->mm_scratch,
                    ws->pool);
}

/* The MLP's activation of rows [t0, t1): gate = act(gate) (* up), in place. */
typedef struct act_rows_ctx {
    const mxl_decoder_hparams *hp;
    const mxl_decoder_layer *L;
    mxl_decoder_state *s;
} act_rows_ctx;

/* xIELU (transformers XIELUActivation._xielu_python) of x[m] in place with a layer's scalars */
static void xielu(const mxl_decoder_layer *L, float *x, int64_t m) {
    for (int64_t i = 0; i < m; i++) {
        const float v = x[i];
        x[i] = v > 0 ? L->xielu_ap * v * v + L->xielu_beta * v : (expm1f(fminf(v, L->xielu_eps)) - v) * L->xielu_an + L->xielu_beta * v;
    }
}

static void act_rows(void *vctx, int64_t t0, int64_t t1) {
    const act_rows_ctx *a = vctx;
    const mxl_decoder_hparams *hp = a->hp;
    mxl_decoder_state *s = a->s;
    const int64_t F = a->L->ffn;
    float *g = s->gate + t0 * F;
    const int64_t m = (t1 - t0) * F;
    if (hp->mlp_gate_mult != 1.0f)
        for (int64_t i = 0; i < m; i++) g[i] *= hp->mlp_gate_mult;
    if (a->L->topk_k != 0.0f) mxl_gaussian_topk(g, t1 - t0, F, a->L->topk_k); /* (Gemma 3n's sparse layers) */
    if (hp->xielu) xielu(a->L, g, m);
    else if (hp->mlp == MXL_MLP_GATED) s->be->ops->glu(s->be, hp->act, g, s->up + t0 * F, m, g);
    else s->be->ops->act(s->be, hp->act, g, m, g);
    if (a->L->ffn_sub_norm.w) norm_rows(s->be, hp, &a->L->ffn_sub_norm, g, t1 - t0, F, g);
    if (hp->act_quant8) quant8_rows(g, t1 - t0, F);
}

static void dense_mlp(const fwd_pass *f, int64_t l, const mxl_row_prep *prep, const float *h);

static void mlp_block(const fwd_pass *f, int64_t l, const mxl_row_prep *prep, const float *h) {
    const mxl_decoder_layer *L = &f->d->layers[l];
    mxl_decoder_state *s = f->ws;
    if (L->moe) { /* the rows are routed: made whole first */
        if (prep) prep->fn(prep->ctx, 0, f->n_rows);
        mxl_moe_forward(s->be, &f->d->hp, L->moe, h, NULL, f->n_rows, s->o, &s->moe, s->mm_scratch, s->pool);
        return;
    }
    dense_mlp(f, l, prep, h);
}

/* Gemma 4's block after attention (hp.moe_beside_mlp): the dense MLP of ffn_norm(x) and the
 * experts of moe_pre_norm(x), routed on RMSNorm(x) * router_in_scale / sqrt(hidden), each through
 * its own norm, summed into ws->o (the caller's post_ffn_norm and residual follow). */
static void mlp_beside_moe(const fwd_pass *f, int64_t l, const mxl_row_prep *ffn_norm) {
    const mxl_decoder_hparams *hp = &f->d->hp;
    const mxl_decoder_layer *L = &f->d->layers[l];
    mxl_decoder_state *s = f->ws;
    const int64_t n = f->n_rows, H = hp->hidden;
    dense_mlp(f, l, ffn_norm, s->xn);
    norm_rows(s->be, hp, &L->moe_dense_post_norm, s->o, n, H, s->o);
    const float rs = 1.0f / sqrtf((float)H);
    for (int64_t t = 0; t < n; t++) {
        float *r = s->o2 + t * H;
        s->be->ops->rmsnorm(s->be, s->x + t * H, L->moe->router_in_scale, H, hp->norm_eps, false, r);
        for (int64_t c = 0; c < H; c++) r[c] *= rs;
    }
    norm_rows(s->be, hp, &L->moe_pre_norm, s->x, n, H, s->xn);
    mxl_moe_forward(s->be, hp, L->moe, s->xn, s->o2, n, s->o3, &s->moe, s->mm_scratch, s->pool);
    norm_rows(s->be, hp, &L->moe_post_norm, s->o3, n, H, s->o3);
    residual_add(s->o, s->o3, n * H, 1.0f);
}

/* The dense MLP of the pass's rows into ws->o. */
static void dense_mlp(const fwd_pass *f, int64_t l, const mxl_row_prep *prep, const float *h) {
    const mxl_decoder_hparams *hp = &f->d->hp;
    const mxl_decoder_layer *L = &f->d->layers[l];
    mxl_decoder_state *s = f->ws;
    int64_t n = f->n_rows;
    if (hp->mlp == MXL_MLP_GATED) {
        const mxl_weight *W[2] = {&L->w_gate, &L->w_up};
        const float *b[2] = {L->b_gate, L->b_up};
        float *y[2] = {s->gate, s->up};
        const lora_group g = {f, l, 2, {MXL_LORA_GATE, MXL_LORA_UP}, h, {s->gate, s->up}};
        linear_lora(W, b, 2, prep, h, n, y, s, &g);
    } else {
        const mxl_weight *W = &L->w_up;
        const lora_group g = {f, l, 1, {MXL_LORA_UP}, h, {s->gate}};
        linear_lora(&W, &L->b_up, 1, prep, h, n, &s->gate, s, &g);
    }
    /* the activation made row by row as the down projection quantizes its input */
    act_rows_ctx ac = {hp, L, s};
    const mxl_row_prep act = {act_rows, &ac};
    const mxl_weight *wd = &L->w_down;
    const lora_group g = {f, l, 1, {MXL_LORA_DOWN}, s->gate, {s->o}};
    linear_lora(&wd, &L->b_down, 1, &act, s->gate, n, &s->o, s, &g);
    if (hp->mlp_down_mult != 1.0f)
        for (int64_t i = 0; i < n * hp->hidden; i++) s->o[i] *= hp->mlp_down_mult;
}

/* The per-layer inputs of the pass's rows into ws->ple [n, n_layers * P] (decoder.h, hp.ple_dim),
 * from the tokens and their scaled embeddings (ws->x). */
static void ple_inputs(const fwd_pass *f, const int32_t *tokens) {
    const mxl_decoder *d = f->d;
    const mxl_decoder_hparams *hp = &d->hp;
    mxl_decoder_state *ws = f->ws;
    const int64_t n = f->n_rows, P = hp->ple_dim, LP = hp->n_layers * P;
    const int32_t *ids = tokens;
    if (hp->ple_vocab < hp->vocab) { /* ids past the table read row 0 (Gemma 3n's text-only table) */
        for (int64_t t = 0; t < n; t++) ws->pos_ids[t] = tokens[t] < hp->ple_vocab ? tokens[t] : 0;
        ids = ws->pos_ids;
    }
    ws->be->ops->embed(ws->be, &d->ple_embd, ids, n, sqrtf((float)P), ws->ple, NULL);
    matmul(&d->ple_model_proj, NULL, ws->x, n, ws->ple_tmp, ws);
    const float ps = 1.0f / sqrtf((float)hp->hidden), mix = 1.0f / sqrtf(2.0f);
    for (int64_t i = 0; i < n * LP; i++) ws->ple_tmp[i] *= ps;
    rms_rows(ws->be, hp, d->ple_proj_norm, ws->ple_tmp, n * hp->n_layers, P);
    for (int64_t i = 0; i < n * LP; i++) ws->ple[i] = (ws->ple_tmp[i] + ws->ple[i]) * mix;
}

/* Layer l's per-layer input of rows x [n, hidden]: ws->o = norm(W_proj (act(x W_gate^T) * p[l])). */
static void ple_project(const fwd_pass *f, int64_t l, const float *x) {
    const mxl_decoder_hparams *hp = &f->d->hp;
    const mxl_decoder_layer *L = &f->d->layers[l];
    mxl_decoder_state *ws = f->ws;
    const int64_t n = f->n_rows, P = hp->ple_dim, LP = hp->n_layers * P;
    float *g = ws->ple_tmp;
    linear(&L->ple_gate, NULL, NULL, x, n, g, ws);
    ws->be->ops->act(ws->be, hp->act, g, n * P, g);
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < P; i++) g[t * P + i] *= ws->ple[t * LP + l * P + i];
    linear(&L->ple_proj, NULL, NULL, g, n, ws->o, ws);
    norm_rows(ws->be, hp, &L->ple_norm, ws->o, n, hp->hidden, ws->o);
}

/* ---- Gemma 3n's AltUp streams (altup.h) ---- */

/* ws->amod [n, A] = tanh(RMSNorm(x) w_rn / hidden  Wr^T): the modality router of rows x. */
static void altup_modalities(const fwd_pass *f, const mxl_altup_layer *a, const float *x) {
    const mxl_decoder_hparams *hp = &f->d->hp;
    mxl_decoder_state *ws = f->ws;
    const mxl_backend *ref = mxl_backend_reference(); /* (a tiny matrix, kept in f32 like a router) */
    const int64_t n = f->n_rows, H = hp->hidden;
    for (int64_t t = 0; t < n; t++) {
        float *r = ws->laurel + t * H;
        ws->be->ops->rmsnorm(ws->be, x + t * H, a->router_norm, H, hp->norm_eps, hp->norm_plus_one, r);
        for (int64_t c = 0; c < H; c++) r[c] /= (float)H;
    }
    ref->ops->matmul(ref, &a->router, NULL, ws->laurel, n, ws->amod, ws->mm_scratch, NULL);
    for (int64_t i = 0; i < n * hp->altup_n; i++) ws->amod[i] = tanhf(ws->amod[i]);
}

/* The streams from the scaled embeddings ws->x: S[0] = x, S[i] = x Wi^T at x's RMS. */
static void altup_expand(const fwd_pass *f) {
    const mxl_decoder_hparams *hp = &f->d->hp;
    mxl_decoder_state *ws = f->ws;
    const int64_t n = f->n_rows, H = hp->hidden, st = ws->max_batch * H;
    memcpy(ws->streams, ws->x, (size_t)(n * H) * sizeof(float));
    for (int64_t a = 1; a < hp->altup_n; a++) {
        matmul(&f->d->altup_proj[a - 1], NULL, ws->x, n, ws->streams + a * st, ws);
        mxl_altup_match_rms(ws->x, ws->streams + a * st, n, H);
    }
}

/* ws->x = the mean of S[0] and each S[i] Ui^T at S[0]'s RMS. */
static void altup_collapse(const fwd_pass *f) {
    const mxl_decoder_hparams *hp = &f->d->hp;
    mxl_decoder_state *ws = f->ws;
    const int64_t n = f->n_rows, H = hp->hidden, st = ws->max_batch * H;
    memcpy(ws->x, ws->streams, (size_t)(n * H) * sizeof(float));
    for (int64_t a = 1; a < hp->altup_n; a++) {
        matmul(&f->d->altup_unembed[a - 1], NULL, ws->streams + a * st, n, ws->o, ws);
        mxl_altup_match_rms(ws->streams, ws->o, n, H);
        residual_add(ws->x, ws->o, n * H, 1.0f);
    }
    for (int64_t i = 0; i < n * H; i++) ws->x[i] /= (float)hp->altup_n;
}

/* One Gemma 3n layer on the streams: predict, the block on the active prediction (attention with
 * Laurel beside it, then the MLP), correct, and the per-layer input into the other streams. */
static void altup_layer(fwd_pass *f, int64_t l) {
    const mxl_decoder_hparams *hp = &f->d->hp;
    const mxl_decoder_layer *L = &f->d->layers[l];
    const mxl_altup_layer *a = L->altup;
    mxl_decoder_state *ws = f->ws;
    const mxl_backend *ref = mxl_backend_reference();
    const int64_t n = f->n_rows, H = hp->hidden, st = ws->max_batch * H;
    const int A = (int)hp->altup_n, act = (int)hp->altup_active;
    const float *active = ws->pred + act * st;
    altup_modalities(f, a, ws->streams + act * st);
    ref->ops->matmul(ref, &a->predict, NULL, ws->amod, n, ws->acoef, ws->mm_scratch, NULL);
    mxl_altup_predict(A, ws->streams, st, n, H, ws->acoef, ws->pred);
    norm_rows(ws->be, hp, &L->attn_norm, active, n, H, ws->xn);
    /* Laurel: h + RMSNorm(h L^T R^T) (h the normed active prediction) */
    linear(&a->laurel_l, NULL, NULL, ws->xn, n, ws->laurel_lo, ws);
    linear(&a->laurel_r, NULL, NULL, ws->laurel_lo, n, ws->laurel, ws);
    rms_rows(ws->be, hp, a->laurel_norm, ws->laurel, n, H);
    residual_add(ws->laurel, ws->xn, n * H, 1.0f);
    attention_block(f, l, NULL, ws->xn);
    norm_rows(ws->be, hp, &L->post_attn_norm, ws->o, n, H, ws->o);
    for (int64_t i = 0; i < n * H; i++) ws->x[i] = (active[i] + ws->o[i] + ws->laurel[i]) / (float)M_SQRT2;
    norm_rows_ctx fn = {ws->be, hp, &L->ffn_norm, ws->x, ws->xn, H};
    const mxl_row_prep ffn_norm = {norm_rows_prep, &fn};
    dense_mlp(f, l, &ffn_norm, ws->xn);
    norm_rows(ws->be, hp, &L->post_ffn_norm, ws->o, n, H, ws->o);
    residual_add(ws->x, ws->o, n * H, 1.0f);
    altup_modalities(f, a, ws->x);
    ref->ops->matmul(ref, &a->correct, NULL, ws->amod, n, ws->acoef, ws->mm_scratch, NULL);
    mxl_altup_correct(A, act, ws->pred, st, n, H, ws->acoef, ws->x, ws->streams);
    float *first = ws->xn;
    for (int64_t t = 0; t < n; t++)
        for (int64_t c = 0; c < H; c++)
            first[t * H + c] = ws->streams[act * st + t * H + c] * (hp->altup_correct_scale ? a->out_scale[c] : 1.0f);
    ple_project(f, l, first);
    for (int64_t b = 1; b < A; b++) residual_add(ws->streams + b * st, ws->o, n * H, 1.0f);
}

/* M-RoPE: an image block's rows (grid_h x grid_w, row-major) take positions (st, st + y, st + x)
 * with st its first row's text position; the rows after it continue from st + max(grid_h,
 * grid_w) (transformers' get_rope_index), which the state keeps as its rope_delta for later
 * calls. (Media come one span per pass.) */
/* The offset after an image block of n rows (grid gh x gw) at cache position pos, the offset
 * before it being *delta: its rows start at pos + *delta and the next row continues from there
 * plus max(gh, gw); *from becomes pos + 1 where the offset first turns non-zero. */
static void mrope_step(int64_t pos, int64_t n, int64_t gh, int64_t gw, int64_t *delta, int64_t *from) {
    const int64_t next = pos + *delta + (gh > gw ? gh : gw);
    if (*delta == 0 && next != pos + n) *from = pos + 1;
    *delta = next - (pos + n);
}

static void mrope_media_positions(fwd_pass *f) {
    mxl_decoder_state *ws = f->ws, *s = f->spans[0].s;
    if (!f->n_media) return;
    int64_t delta = s->rope_delta;
    for (int i = 0; i < f->n_media; i++) {
        const mxl_decoder_media *md = &f->media[i];
        if (md->grid_h <= 0) continue;
        const int64_t r0 = md->row, st = ws->q_pos[r0] + delta;
        for (int64_t y = 0; y < md->grid_h; y++)
            for (int64_t x = 0; x < md->grid_w; x++) {
                int64_t *p = ws->rope_pos + (r0 + y * md->grid_w + x) * 3;
                p[0] = st, p[1] = st + y, p[2] = st + x;
            }
        mrope_step(ws->q_pos[r0], md->n, md->grid_h, md->grid_w, &delta, &s->rope_delta_from);
        for (int64_t r = r0 + md->n; r < f->n_rows; r++) ws->rope_pos[r * 3] = ws->rope_pos[r * 3 + 1] = ws->rope_pos[r * 3 + 2] = ws->q_pos[r] + delta;
    }
    s->rope_delta = delta;
}

void mxl_decoder_state_set_media_prefix(mxl_decoder_state *s, const mxl_decoder_media *media, int n_media, int64_t n_pos) {
    int64_t delta = 0, from = 0;
    for (int i = 0; i < n_media; i++)
        if (media[i].grid_h > 0 && media[i].row + media[i].n <= n_pos) mrope_step(media[i].row, media[i].n, media[i].grid_h, media[i].grid_w, &delta, &from);
    s->rope_delta = delta, s->rope_delta_from = delta ? from : 0;
}

/* DeepStack: the media blocks' rows add their layer-l features (decoder.h) after layer l. */
static void deepstack_add(fwd_pass *f, int64_t l) {
    const int64_t H = f->d->hp.hidden;
    for (int i = 0; i < f->n_media; i++) {
        const mxl_decoder_media *md = &f->media[i];
        if (!md->deep || l >= md->n_deep) continue;
        residual_add(f->ws->x + md->row * H, md->deep + l * md->deep_stride * H, md->n * H, 1.0f);
    }
}

/* Runs tokens[0..n_rows) (row r's token is tokens[r]) through every layer and advances each
 * span's state by its row count. Ids, positions, capacities were checked by the caller. */
static void forward_rows(fwd_pass *f, const int32_t *tokens) {
    const mxl_decoder *d = f->d;
    const mxl_decoder_hparams *hp = &d->hp;
    mxl_decoder_state *ws = f->ws;
    int64_t H = hp->hidden, n = f->n_rows;
    ws->be->ops->embed(ws->be, &d->tok_embd, tokens, n, hp->embed_scale, ws->x, NULL);
    for (int64_t si = 0; si < f->n_spans; si++)
        for (int64_t t = 0; t < f->spans[si].n; t++) {
            const int64_t r = f->spans[si].row0 + t, p = f->spans[si].pos + t + f->spans[si].s->rope_delta;
            ws->q_pos[r] = f->spans[si].pos + t;
            ws->rope_pos[r * 3] = ws->rope_pos[r * 3 + 1] = ws->rope_pos[r * 3 + 2] = p;
        }
    if (hp->mrope_section[0] > 0) mrope_media_positions(f);
    /* media rows: their embeddings replace the tokens', and each block sees itself whole (one
     * span per pass when there are media) */
    for (int i = 0; i < f->n_media; i++) {
        const mxl_decoder_media *md = &f->media[i];
        if (md->emb) memcpy(ws->x + md->row * H, md->emb, (size_t)(md->n * H) * sizeof(float));
    }
    if (f->n_media) {
        for (int64_t t = 0; t < n; t++) ws->q_end[t] = ws->q_pos[t] + 1;
        for (int i = 0, u = 0; i < f->n_media; i++) {
            if (i && !f->media[i - 1].joined) u = i; /* the first block of i's unit */
            const int64_t r0 = f->media[u].row, end = mxl_decoder_media_unit_end(f->media, f->n_media, i);
            for (int64_t t = f->media[i].row; !f->media[i].causal && t < f->media[i].row + f->media[i].n; t++)
                ws->q_end[t] = ws->q_pos[r0] + (end - r0);
        }
    }
    if (hp->learned_pos) {
        for (int64_t t = 0; t < n; t++) ws->pos_ids[t] = (int32_t)ws->q_pos[t];
        ws->be->ops->embed(ws->be, &d->pos_embd, ws->pos_ids, n, 1.0f, ws->o, NULL);
        residual_add(ws->x, ws->o, n * H, 1.0f);
    }
    if (hp->embed_norm) norm_rows(ws->be, hp, &d->output_norm, ws->x, n, H, ws->x);
    if (hp->ple_dim > 0) ple_inputs(f, tokens);
    if (hp->altup_n > 0) { /* Gemma 3n: the layers run on AltUp's streams */
        altup_expand(f);
        for (int64_t l = 0; l < hp->n_layers; l++) altup_layer(f, l);
        altup_collapse(f);
        for (int64_t si = 0; si < f->n_spans; si++) f->spans[si].s->pos += f->spans[si].n;
        return;
    }
    for (int64_t l = 0; l < hp->n_layers; l++) {
        if (l && f->n_media) deepstack_add(f, l - 1); /* (after layer l - 1, whichever way it ended) */
        const mxl_decoder_layer *L = &d->layers[l];
        /* the pre-norms are made row by row as the QKV / MLP matmuls quantize their input */
        norm_rows_ctx an = {ws->be, hp, &L->attn_norm, ws->x, ws->xn, H}, fn = {ws->be, hp, &L->ffn_norm, ws->x, ws->xn, H};
        const mxl_row_prep attn_norm = {norm_rows_prep, &an}, ffn_norm = {norm_rows_prep, &fn};
        if (hp->residual_from_norm) { /* x = alpha norm(x) + beta mixer(norm(x)), likewise around the MLP */
            norm_rows(ws->be, hp, &L->attn_norm, ws->x, n, H, ws->x);
            if (L->rec) rec_block(f, l, NULL, ws->x);
            else attention_block(f, l, NULL, ws->x);
            weighted_add(ws->x, L->rec ? hp->res_alpha_rec : hp->res_alpha_attn, ws->o, L->rec ? hp->res_beta_rec : hp->res_beta_attn, n * H);
            norm_rows(ws->be, hp, &L->ffn_norm, ws->x, n, H, ws->x);
            mlp_block(f, l, NULL, ws->x);
            weighted_add(ws->x, hp->res_alpha_mlp, ws->o, hp->res_beta_mlp, n * H);
            continue;
        }
        if (L->no_mixer) { /* the MLP alone */
            mlp_block(f, l, L->ffn_norm.w ? &ffn_norm : NULL, L->ffn_norm.w ? ws->xn : ws->x);
            residual_add(ws->x, ws->o, n * H, hp->residual_scale);
            continue;
        }
        if (L->rec && hp->parallel_ssm) { /* both mixers on the same normed rows (Falcon-H1) */
            rec_block(f, l, L->attn_norm.w ? &attn_norm : NULL, L->attn_norm.w ? ws->xn : ws->x);
            for (int64_t i = 0; i < n * H; i++) ws->o2[i] = hp->ssm_out_mult * ws->o[i];
            attention_block(f, l, NULL, L->attn_norm.w ? ws->xn : ws->x);
            for (int64_t i = 0; i < n * H; i++) ws->o[i] = hp->attn_out_mult * ws->o[i] + ws->o2[i];
        } else if (L->rec) {
            rec_block(f, l, L->attn_norm.w ? &attn_norm : NULL, L->attn_norm.w ? ws->xn : ws->x);
        } else {
            attention_block(f, l, L->attn_norm.w ? &attn_norm : NULL, L->attn_norm.w ? ws->xn : ws->x);
        }
        if (L->post_attn_norm.w) norm_rows(ws->be, hp, &L->post_attn_norm, ws->o, n, H, ws->o);
        if (!L->has_mlp) {
            residual_add(ws->x, ws->o, n * H, hp->residual_scale);
            continue;
        }
        if (hp->parallel_residual) {
            /* the MLP reads the block's input: its own norm of x made before the attention output
             * is added, or (shared norm) xn, which still holds attn_norm(x) */
            if (L->ffn_norm.w) norm_rows(ws->be, hp, &L->ffn_norm, ws->x, n, H, ws->xn);
            residual_add(ws->x, ws->o, n * H, hp->residual_scale);
            mlp_block(f, l, NULL, ws->xn);
            if (L->post_ffn_norm.w) norm_rows(ws->be, hp, &L->post_ffn_norm, ws->o, n, H, ws->o);
            residual_add(ws->x, ws->o, n * H, hp->residual_scale);
            continue;
        }
        residual_add(ws->x, ws->o, n * H, hp->residual_scale);
        if (L->moe && hp->moe_beside_mlp) mlp_beside_moe(f, l, &ffn_norm);
        else mlp_block(f, l, L->ffn_norm.w ? &ffn_norm : NULL, L->ffn_norm.w ? ws->xn : ws->x);
        if (L->post_ffn_norm.w) norm_rows(ws->be, hp, &L->post_ffn_norm, ws->o, n, H, ws->o);
        residual_add(ws->x, ws->o, n * H, hp->residual_scale);
        if (hp->ple_dim > 0) {
            ple_project(f, l, ws->x);
            residual_add(ws->x, ws->o, n * H, 1.0f);
        }
        if (L->scalar != 1.0f)
            for (int64_t i = 0; i < n * H; i++) ws->x[i] *= L->scalar;
    }
    if (f->n_media && hp->n_layers) deepstack_add(f, hp->n_layers - 1);
    for (int64_t si = 0; si < f->n_spans; si++) f->spans[si].s->pos += f->spans[si].n;
}

/* logits [n_spans, vocab]: the LM head on the last row of each span, in one matmul. */
/* The LM head on the n final-normed rows in ws->xn: logits [n, vocab]. */
static void head_rows(const fwd_pass *f, int64_t n, float *logits) {
    const mxl_decoder_hparams *hp = &f->d->hp;
    mxl_decoder_state *ws = f->ws;
    const int64_t V = hp->vocab;
    matmul(&f->d->output, NULL, ws->xn, n, logits, ws);
    if (f->d->output_bias)
        for (int64_t r = 0; r < n; r++)
            for (int64_t v = 0; v < V; v++) logits[r * V + v] += f->d->output_bias[v];
    if (hp->logit_scale != 1.0f)
        for (int64_t i = 0; i < n * V; i++) logits[i] *= hp->logit_scale;
    if (hp->final_softcap > 0)
        for (int64_t r = 0; r < n; r++) ws->be->ops->softcap(ws->be, logits + r * V, V, hp->final_softcap);
}

/* Each span's last row through the output norm and the LM head: logits [n_spans, vocab]. */
static void span_logits(const fwd_pass *f, float *logits) {
    const mxl_decoder_hparams *hp = &f->d->hp;
    mxl_decoder_state *ws = f->ws;
    int64_t H = hp->hidden;
    for (int64_t si = 0; si < f->n_spans; si++) {
        const row_span *sp = &f->spans[si];
        norm_rows(ws->be, hp, &f->d->output_norm, ws->x + (sp->row0 + sp->n - 1) * H, 1, H, ws->xn + si * H);
    }
    head_rows(f, f->n_spans, logits);
}

static mxl_status check_ids(const mxl_decoder *d, const int32_t *tokens, int64_t n, mxl_error *err) {
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= d->hp.vocab)
            return mxl_error_set(err, MXL_ERR_ARG, "token id %d is outside the vocabulary of %lld", tokens[i], (long long)d->hp.vocab);
    return MXL_OK;
}

/* Runs tokens[0..n) at the next positions; the last one's logits (hidden NULL) or its final-normed
 * hidden state (logits NULL) are written. */
/* A bidirectional decoder's earlier positions depend on later tokens: no incremental runs. */
static mxl_status check_causal(const mxl_decoder *d, mxl_error *err) {
    if (!d->hp.bidirectional) return MXL_OK;
    return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "a bidirectional model (use_bidirectional_attention) runs whole texts for embeddings, not token by token");
}

/* tokens[0..n) may run at the state's next positions: a count, the context, the ids, then the
 * KV blocks reserved. */
static mxl_status ready_to_run(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens, int64_t n, mxl_error *err) {
    mxl_status st;
    if (n <= 0) return mxl_error_set(err, MXL_ERR_ARG, "no tokens to run");
    if (n > s->max_ctx - s->pos)
        return mxl_error_set(err, MXL_ERR_ARG, "context full: %lld tokens at position %lld exceed the context of %lld",
                             (long long)n, (long long)s->pos, (long long)s->max_ctx);
    if ((st = check_ids(d, tokens, n, err))) return st;
    return kv_reserve(s, s->pos, n, err);
}

static mxl_status forward_last(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens, int64_t n,
                               const mxl_decoder_media *media, int n_media, float *logits, float *hidden, mxl_error *err) {
    mxl_status st;
    if ((st = check_causal(d, err)) || (st = ready_to_run(d, s, tokens, n, err))) return st;
    int64_t H = d->hp.hidden;
    mxl_decoder_media local[MXL_DECODER_MAX_MEDIA];
    for (int64_t off = 0; off < n;) {
        int64_t m = n - off < s->max_batch ? n - off : s->max_batch;
        /* a bidirectional unit (a block with the blocks joined to it) is never split: the pass
         * ends before one that would not fit; a lone causal block attends like text and may be
         * (its rows in this pass from its emb's row off - row on) */
        for (int i = 0; i < n_media; i++)
            if ((i == 0 || !media[i - 1].joined) && !mxl_decoder_media_splittable(&media[i]) && media[i].row >= off && media[i].row < off + m &&
                mxl_decoder_media_unit_end(media, n_media, i) > off + m)
                m = media[i].row - off;
        int n_local = 0;
        for (int i = 0; i < n_media; i++) {
            const int64_t a = media[i].row > off ? media[i].row : off, e = media[i].row + media[i].n < off + m ? media[i].row + media[i].n : off + m;
            if (a < e) local[n_local++] = mxl_decoder_media_slice(&media[i], a, e, off, H); /* (M-RoPE grids are never split) */
        }
        row_span sp = {s, 0, m, s->pos};
        fwd_pass f = {d, s, &sp, 1, m, 0, {false, false}, n_local ? local : NULL, n_local};
        forward_rows(&f, tokens + off);
        off += m;
        if (off < n) continue;
        if (logits) span_logits(&f, logits);
        else norm_rows(s->be, &d->hp, &d->output_norm, s->x + (m - 1) * H, 1, H, hidden);
    }
    return MXL_OK;
}

/* The media blocks of a call: within [0, n), in order, not overlapping, each bidirectional one at
 * most one pass. */
static mxl_status check_media(const mxl_decoder *d, const mxl_decoder_state *s, int64_t n, const mxl_decoder_media *media,
                              int n_media, mxl_error *err) {
    if (n_media < 0 || n_media > MXL_DECODER_MAX_MEDIA)
        return mxl_error_set(err, MXL_ERR_ARG, "%d media blocks in one call (at most %d)", n_media, MXL_DECODER_MAX_MEDIA);
    if (n_media && (d->hp.ple_dim > 0 || d->hp.altup_n > 0 || d->rec_state_floats))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "this model takes no embeddings in place of tokens");
    for (int i = 0; i < n_media; i++) {
        const mxl_decoder_media *md = &media[i];
        if (md->n <= 0 || md->row < 0 || md->row + md->n > n || (i && md->row < media[i - 1].row + media[i - 1].n))
            return mxl_error_set(err, MXL_ERR_ARG, "media block %d (rows %lld..%lld) is empty, outside the %lld tokens or overlaps the one before",
                                 i, (long long)md->row, (long long)(md->row + md->n), (long long)n);
        if (md->joined && (i + 1 == n_media || media[i + 1].row != md->row + md->n))
            return mxl_error_set(err, MXL_ERR_ARG, "media block %d is joined to a next block that does not start where it ends", i);
        if (md->grid_h < 0 || md->grid_w < 0 || (md->grid_h > 0 && md->grid_h * md->grid_w != md->n))
            return mxl_error_set(err, MXL_ERR_ARG, "media block %d: a %lld x %lld grid does not make its %lld rows", i, (long long)md->grid_h,
                                 (long long)md->grid_w, (long long)md->n);
        if (md->deep && (md->n_deep < 0 || md->n_deep > d->hp.n_layers || md->deep_stride < md->n))
            return mxl_error_set(err, MXL_ERR_ARG, "media block %d: %d DeepStack layers of stride %lld for %lld rows and %lld layers", i, md->n_deep,
                                 (long long)md->deep_stride, (long long)md->n, (long long)d->hp.n_layers);
        if ((i == 0 || !media[i - 1].joined) && !mxl_decoder_media_splittable(md) && mxl_decoder_media_unit_end(media, n_media, i) - md->row > s->max_batch)
            return mxl_error_set(err, MXL_ERR_ARG, "a media block of %lld rows exceeds the %lld one pass takes",
                                 (long long)(mxl_decoder_media_unit_end(media, n_media, i) - md->row), (long long)s->max_batch);
    }
    return MXL_OK;
}

int64_t mxl_decoder_media_max_unit(const mxl_decoder_media *media, int n_media) {
    int64_t best = 0;
    for (int i = 0; i < n_media; i++)
        if (i == 0 || !media[i - 1].joined) {
            const int64_t u = mxl_decoder_media_unit_end(media, n_media, i) - media[i].row;
            if (u > best) best = u;
        }
    return best;
}

mxl_status mxl_decoder_forward_media(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens, int64_t n,
                                     const mxl_decoder_media *media, int n_media, float *logits, mxl_error *err) {
    mxl_status st = check_media(d, s, n, media, n_media, err);
    return st ? st : forward_last(d, s, tokens, n, media, n_media, logits, NULL, err);
}

mxl_status mxl_decoder_forward(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens,
                               int64_t n, float *logits, mxl_error *err) {
    return forward_last(d, s, tokens, n, NULL, 0, logits, NULL, err);
}

mxl_status mxl_decoder_forward_hidden(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens,
                                      int64_t n, float *hidden, mxl_error *err) {
    return forward_last(d, s, tokens, n, NULL, 0, NULL, hidden, err);
}

/* tokens[0..n) in one pass at the next positions, every row's final hidden state after the output
 * norm into out[n, hidden] (the callers: the rows themselves, or the LM head's input). */
static mxl_status pass_normed(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens, int64_t n, float *out, fwd_pass *f,
                              row_span *sp, mxl_error *err) {
    mxl_status st;
    if (n > s->max_batch)
        return mxl_error_set(err, MXL_ERR_ARG, "%lld tokens exceed the %lld one pass takes", (long long)n, (long long)s->max_batch);
    if ((st = ready_to_run(d, s, tokens, n, err))) return st;
    *sp = (row_span){s, 0, n, s->pos};
    *f = (fwd_pass){d, s, sp, 1, n, 0, {false, false}, NULL, 0};
    forward_rows(f, tokens);
    norm_rows(s->be, &d->hp, &d->output_norm, s->x, n, d->hp.hidden, out);
    return MXL_OK;
}

mxl_status mxl_decoder_forward_hidden_all(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens,
                                          int64_t n, float *hidden, mxl_error *err) {
    fwd_pass f;
    row_span sp;
    return pass_normed(d, s, tokens, n, hidden, &f, &sp, err);
}

mxl_status mxl_decoder_forward_all(const mxl_decoder *d, mxl_decoder_state *s, const int32_t *tokens, int64_t n, float *logits,
                                   mxl_error *err) {
    fwd_pass f;
    row_span sp;
    mxl_status st = check_causal(d, err);
    if (!st) st = pass_normed(d, s, tokens, n, s->xn, &f, &sp, err);
    if (!st) head_rows(&f, n, logits);
    return st;
}

int64_t mxl_decoder_state_max_batch(const mxl_decoder_state *s) { return s->max_batch; }

/* Clears the repeat markers set by the first k states. */
static void unmark(mxl_decoder_state *const *states, int64_t k) {
    for (int64_t i = 0; i < k; i++) states[i]->in_call = false;
}

mxl_status mxl_decoder_forward_spans(const mxl_decoder *d, mxl_decoder_state *const *states, const int32_t *tokens,
                                     const int64_t *counts, int64_t n_seqs, float *logits, mxl_error *err) {
    mxl_status st;
    if ((st = check_causal(d, err))) return st;
    if (n_seqs <= 0) return mxl_error_set(err, MXL_ERR_ARG, "no sequences to run");
    int64_t kvd = d->kv_dim, rows = 0;
    mxl_decoder_state *ws = NULL;
    /* every check before anything runs: an error leaves every state as it was */
    for (int64_t i = 0; i < n_seqs; i++) {
        mxl_decoder_state *s = states[i];
        const int64_t c = counts ? counts[i] : 1;
        if (!s) st = mxl_error_set(err, MXL_ERR_ARG, "sequence %lld of the batch has no state", (long long)i);
        else if (s->in_call) st = mxl_error_set(err, MXL_ERR_ARG, "sequence %lld of the batch repeats an earlier state", (long long)i);
        else if (s->n_layers != kv_layers(d) || s->kv_dim != kvd || s->rec_floats != d->rec_state_floats)
            st = mxl_error_set(err, MXL_ERR_ARG, "sequence %lld of the batch has a state made for another model", (long long)i);
        else if (s->reference != states[0]->reference)
            st = mxl_error_set(err, MXL_ERR_ARG, "sequence %lld of the batch mixes the reference and fast matmul paths", (long long)i);
        else if (c < 1) st = mxl_error_set(err, MXL_ERR_ARG, "sequence %lld of the batch has no tokens to run", (long long)i);
        else if (c > s->max_ctx - s->pos)
            st = mxl_error_set(err, MXL_ERR_ARG, "context full: sequence %lld of the batch at position %lld cannot take %lld more tokens in its context of %lld",
                               (long long)i, (long long)s->pos, (long long)c, (long long)s->max_ctx);
        else if ((st = check_ids(d, tokens + rows, c, err))) mxl_error_prefix(err, "sequence %lld of the batch: ", (long long)i);
        else st = MXL_OK;
        if (st) {
            unmark(states, i);
            return st;
        }
        s->in_call = true;
        rows += c;
    }
    for (int64_t i = 0; i < n_seqs && !ws; i++)
        if (states[i]->max_batch >= rows) ws = states[i];
    unmark(states, n_seqs);
    if (!ws)
        return mxl_error_set(err, MXL_ERR_ARG, "a batch of %lld rows needs a state made for batches of at least %lld tokens",
                             (long long)rows, (long long)rows);
    /* each sequence's next positions in writable blocks (blocks got before a failure stay held,
     * which changes no position or content) */
    for (int64_t i = 0; i < n_seqs; i++)
        if ((st = kv_reserve(states[i], states[i]->pos, counts ? counts[i] : 1, err))) {
            mxl_error_prefix(err, "sequence %lld of the batch: ", (long long)i);
            return st;
        }
    for (int64_t i = 0, r = 0; i < n_seqs; r += counts ? counts[i] : 1, i++)
        ws->spans[i] = (row_span){states[i], r, counts ? counts[i] : 1, states[i]->pos};
    fwd_pass f = {d, ws, ws->spans, n_seqs, rows, 0, {false, false}, NULL, 0};
    forward_rows(&f, tokens);
    span_logits(&f, logits);
    return MXL_OK;
}

mxl_status mxl_decoder_forward_batch(const mxl_decoder *d, mxl_decoder_state *const *states, const int32_t *tokens,
                                     int64_t n_seqs, float *logits, mxl_error *err) {
    return mxl_decoder_forward_spans(d, states, tokens, NULL, n_seqs, logits, err);
}
