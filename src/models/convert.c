/* convert.c - `mlxcel convert` (see convert.h): plan the output tensors in transformers' names,
 * then stream each one row by row from its source (dense cast, GGUF / MLX dequantization, Q/K
 * un-permutation, norm shift) into model.safetensors, MLX-quantizing matrices when asked; then
 * config.json and the tokenizer / generation files. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/weight.h"
#include "core/alloc.h"
#include "io/json_write.h"
#include "io/safetensors_write.h"
#include "models/checkpoint.h"
#include "models/config_gguf.h"
#include "models/convert.h"
#include "models/convert_experts.h"
#include "models/convert_family.h"
#include "models/decoder_family.h"
#include "models/mlx_fp.h"
#include "tokenizer/tokenizer.h"

/* One output tensor (or MLX triple) and where its values come from. */
typedef struct plan_item {
    char name[256];       /* output name ("...weight" / "...bias"); a quantized triple's base + ".weight" */
    const mxl_tensor *t;  /* the source: dense, GGUF block, or the packed codes of an MLX weight */
    mxl_weight mlx;   /* is_mlx: the source MLX weight */
    bool is_mlx;
    int ndim;
    int64_t shape[MXL_MAX_DIMS]; /* logical (dequantized) shape */
    int64_t rows, cols;   /* as rows of cols elements (1-D: one row) */
    int64_t perm_heads;   /* > 0: GGUF Q/K rows to un-permute over this many heads */
    float shift;          /* added to every value (Gemma GGUF norms: -1) */
    bool transpose;       /* GPT-2 Conv1D: output [cols, rows] of the source [rows, cols] (rows/cols here: the output's) */
    bool quantize;
    bool drop;            /* restated by views (not written) */
    const mxl_expert_view *view; /* a stacked expert tensor cut from t (convert_experts.h), or NULL */
} plan_item;

typedef struct plan {
    plan_item *v;
    size_t n, cap;
    mxl_arena arena; /* the repacked MLX floating-point-mode sources (models/mlx_fp.h) */
} plan;

static plan_item *plan_add(plan *p) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        plan_item *v = mxl_realloc(p->v, cap * sizeof *v);
        if (!v) return NULL;
        p->v = v;
        p->cap = cap;
    }
    plan_item *it = &p->v[p->n++];
    memset(it, 0, sizeof *it);
    return it;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static void set_shape(plan_item *it, const mxl_tensor *t) {
    it->ndim = t->ndim;
    memcpy(it->shape, t->shape, sizeof it->shape);
    it->cols = t->ndim ? t->shape[t->ndim - 1] : 1;
    it->rows = 1;
    for (int d = 0; d + 1 < t->ndim; d++) it->rows *= t->shape[d];
}

/* ---- sources ---- */

/* One expert's transposed source as f32 [cols, src_rows] (a view's; e: which expert it holds). */
typedef struct view_cache {
    float *m;
    int64_t e;
} view_cache;

static void dense_rows(const mxl_tensor *t, int64_t r0, int64_t n, int64_t cols, float *out) {
    uint64_t rb;
    mxl_dtype_row_bytes(t->dtype, (uint64_t)cols, &rb);
    for (int64_t r = 0; r < n; r++) mxl_dequant_row_ref(t->dtype, (const uint8_t *)t->data + (uint64_t)(r0 + r) * rb, out + r * cols, cols);
}

/* Row r of a view's output (convert_experts.h). */
static void view_row(const plan_item *it, int64_t r, float *out, view_cache *vc) {
    const mxl_expert_view *v = it->view;
    const int64_t e = v->expert >= 0 ? v->expert : r / v->rows, sr = v->off + (r % v->rows) * v->stride;
    if (!v->transposed) {
        dense_rows(it->t, e * v->src_rows + sr, 1, v->cols, out);
        return;
    }
    if (vc->e != e) {
        dense_rows(it->t, e * v->cols, v->cols, v->src_rows, vc->m);
        vc->e = e;
    }
    for (int64_t c = 0; c < v->cols; c++) out[c] = vc->m[c * v->src_rows + sr];
}

/* Row r of the source (after un-permutation) as f32. */
static void source_row(const plan_item *it, int64_t r, float *out, view_cache *vc) {
    if (it->view) {
        view_row(it, r, out, vc);
        return;
    }
    int64_t src = r;
    if (it->perm_heads > 0) {
        /* HF row h*hd + a*hd/2 + b is GGUF row h*hd + 2b + a (llama.cpp's permute) */
        int64_t hd = it->rows / it->perm_heads, h = r / hd, j = r % hd, a = j / (hd / 2), b = j % (hd / 2);
        src = h * hd + 2 * b + a;
    }
    if (it->is_mlx) {
        mxl_weight_dequant_row(&it->mlx, src, out);
    } else {
        dense_rows(it->t, src, 1, it->cols, out);
    }
    if (it->shift != 0.0f)
        for (int64_t c = 0; c < it->cols; c++) out[c] += it->shift;
}

/* A transposed item's whole source [it->cols, it->rows] as f32 (NULL when out of memory). */
static float *source_matrix(const plan_item *it) {
    int64_t sr = it->cols, sc = it->rows;
    float *m = mxl_malloc((size_t)(sr * sc) * sizeof(float));
    if (!m) return NULL;
    if (it->is_mlx) {
        for (int64_t r = 0; r < sr; r++) mxl_weight_dequant_row(&it->mlx, r, m + r * sc);
        return m;
    }
    dense_rows(it->t, 0, sr, sc, m);
    return m;
}

static void store_row(mxl_dtype dt, const float *x, int64_t n, void *out) {
    if (dt == MXL_DTYPE_F32) {
        memcpy(out, x, (size_t)n * sizeof(float));
    } else {
        uint16_t *h = out;
        for (int64_t i = 0; i < n; i++) h[i] = dt == MXL_DTYPE_F16 ? mxl_f32_to_f16(x[i]) : mxl_f32_to_bf16(x[i]);
    }
}

static size_t dt_bytes(mxl_dtype dt) { return dt == MXL_DTYPE_F32 ? 4 : 2; }

/* ---- planning ---- */

/* MLX mode / bits / group of module `base` of a quantized safetensors checkpoint. */
static void mlx_params_of(const mxl_model_config *cfg, const char *base, mxl_quant_mode *mode, int *bits, int *gs) {
    *mode = cfg->quant.mode;
    *bits = cfg->quant.bits;
    *gs = cfg->quant.group_size;
    for (int i = 0; i < cfg->quant.n_overrides; i++)
        if (strcmp(cfg->quant.overrides[i].prefix, base) == 0 && cfg->quant.overrides[i].bits > 0) {
            *mode = cfg->quant.overrides[i].mode;
            *bits = cfg->quant.overrides[i].bits;
            *gs = cfg->quant.overrides[i].group_size;
        }
}

/* mlx-lm's GPT-2 (family_gpt2.c: "model.wte", "model.h.N.*", the layer matrices as nn.Linear's
 * [out, in]) written back in transformers' GPT2LMHeadModel layout: "transformer." names and the
 * four Conv1D matrices [in, out]. Other checkpoints are left as they are. */
static mxl_status mlx_lm_gpt2_back(const mxl_checkpoint *ck, plan *p) {
    if (strcmp(ck->config.model_type, "gpt2") != 0 || !mxl_st_model_find(ck->st, "model.wte.weight")) return MXL_OK;
    static const char *const conv1d[] = {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"};
    for (size_t i = 0; i < p->n; i++) {
        plan_item *it = &p->v[i];
        if (strncmp(it->name, "model.", 6) == 0) {
            char renamed[sizeof it->name];
            snprintf(renamed, sizeof renamed, "transformer.%s", it->name + 6);
            snprintf(it->name, sizeof it->name, "%s", renamed);
        }
        bool layer = strncmp(it->name, "transformer.h.", 14) == 0;
        for (size_t k = 0; layer && it->ndim == 2 && k < sizeof conv1d / sizeof conv1d[0]; k++)
            if (ends_with(it->name, conv1d[k])) {
                int64_t r = it->rows;
                it->transpose = true;
                it->shape[0] = it->rows = it->cols;
                it->shape[1] = it->cols = r;
            }
    }
    return MXL_OK;
}

static mxl_status plan_safetensors(const mxl_checkpoint *ck, plan *p, mxl_error *err) {
    size_t n = mxl_st_model_tensor_count(ck->st);
    for (size_t i = 0; i < n; i++) {
        const mxl_st_entry *e = mxl_st_model_tensor_at(ck->st, i);
        char base[256];
        bool is_w = ends_with(e->name, ".weight");
        snprintf(base, sizeof base, "%.*s", (int)(strlen(e->name) - (is_w ? 7 : 0)), e->name);
        /* the .scales / .biases of an MLX weight travel with its .weight */
        if (ends_with(e->name, ".scales") || ends_with(e->name, ".biases")) {
            char wn[300];
            snprintf(wn, sizeof wn, "%.*s.weight", (int)(strlen(e->name) - 7), e->name);
            const mxl_st_entry *w = mxl_st_model_find(ck->st, wn);
            if (w && w->tensor.dtype == MXL_DTYPE_U32) continue;
        }
        plan_item *it = plan_add(p);
        if (!it) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        snprintf(it->name, sizeof it->name, "%s", e->name);
        char sn[300], bn[300];
        snprintf(sn, sizeof sn, "%s.scales", base);
        snprintf(bn, sizeof bn, "%s.biases", base);
        const mxl_st_entry *se = is_w ? mxl_st_model_find(ck->st, sn) : NULL, *be = is_w ? mxl_st_model_find(ck->st, bn) : NULL;
        if (is_w && se && e->tensor.dtype == MXL_DTYPE_U32) {
            int bits, gs;
            mxl_quant_mode mode;
            mlx_params_of(&ck->config, base, &mode, &bits, &gs);
            mxl_status st;
            const bool fp = mxl_mlx_fp_mode(mode);
            if (!fp && !be) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %s has scales but no biases (only affine MLX quantization converts)", ck->path, base);
            /* stacked experts [E, rows, .] read as [E * rows, .] and written back [E, rows, cols] */
            const int nd = e->tensor.ndim;
            mxl_tensor wv = e->tensor, sv = se->tensor, bv = be ? be->tensor : se->tensor;
            mxl_tensor *vs[3] = {&wv, &sv, &bv};
            for (int v = 0; nd == 3 && v < 3; v++) {
                if (vs[v]->ndim != 3) break;
                vs[v]->ndim = 2;
                vs[v]->shape[0] *= vs[v]->shape[1];
                vs[v]->shape[1] = vs[v]->shape[2];
            }
            if ((st = fp ? mxl_mlx_fp_weight(&wv, &sv, mode, e->name, &p->arena, &it->mlx, err)
                         : mxl_weight_from_mlx(&wv, &sv, &bv, bits, gs, e->name, &it->mlx, err)))
                return st;
            it->is_mlx = true;
            it->ndim = nd == 3 ? 3 : 2;
            it->rows = it->mlx.rows;
            it->cols = it->mlx.cols;
            if (nd == 3) {
                it->shape[0] = e->tensor.shape[0], it->shape[1] = e->tensor.shape[1], it->shape[2] = it->cols;
            } else {
                it->shape[0] = it->rows, it->shape[1] = it->cols;
            }
            continue;
        }
        const mxl_dtype_info *di = mxl_dtype_get_info(e->tensor.dtype);
        if (!di || !di->is_float || e->tensor.dtype == MXL_DTYPE_F64 || di->block_bytes > 4)
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: tensor %s has dtype %s, which convert does not read", ck->path, e->name,
                                 mxl_dtype_name(e->tensor.dtype));
        if (e->tensor.dtype != MXL_DTYPE_F32 && e->tensor.dtype != MXL_DTYPE_F16 && e->tensor.dtype != MXL_DTYPE_BF16)
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: tensor %s has dtype %s, which convert does not read", ck->path, e->name,
                                 mxl_dtype_name(e->tensor.dtype));
        it->t = &e->tensor;
        set_shape(it, &e->tensor);
    }
    return mlx_lm_gpt2_back(ck, p);
}

/* `convert -q`: the stacked expert tensors restated in mlx-lm's layout (convert_experts.h), so
 * that they quantize; *views (freed by the caller) backs the items. */
static mxl_status restate_experts(const mxl_checkpoint *ck, plan *p, mxl_expert_view **views, mxl_error *err) {
    size_t nv = 0;
    mxl_status st = mxl_convert_expert_views(ck, views, &nv, err);
    if (st) return st;
    for (size_t k = 0; k < nv; k++) {
        const mxl_expert_view *v = &(*views)[k];
        size_t i = 0;
        while (i < p->n && (p->v[i].view || strcmp(p->v[i].name, v->src) != 0)) i++;
        if (i == p->n || p->v[i].is_mlx) continue;
        p->v[i].drop = true;
        const mxl_tensor *t = p->v[i].t;
        plan_item *it = plan_add(p);
        if (!it) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        snprintf(it->name, sizeof it->name, "%s", v->dst);
        it->t = t;
        it->view = v;
        const int64_t n_exp = v->expert >= 0 ? 1 : v->n_exp;
        it->rows = n_exp * v->rows;
        it->cols = v->cols;
        it->ndim = v->bias || v->expert >= 0 ? 2 : 3;
        if (v->bias) {
            it->shape[0] = n_exp, it->shape[1] = v->rows;
        } else if (v->expert >= 0) {
            it->shape[0] = v->rows, it->shape[1] = v->cols;
        } else {
            it->shape[0] = n_exp, it->shape[1] = v->rows, it->shape[2] = v->cols;
        }
    }
    size_t w = 0;
    for (size_t i = 0; i < p->n; i++)
        if (!p->v[i].drop) p->v[w++] = p->v[i];
    p->n = w;
    return MXL_OK;
}

/* llama.cpp's names convert maps back for the family: its own table, else the shared one plus the
 * fused / position tensors (GPT-2's attn_qkv and position_embd). */
static mxl_decoder_names gguf_names(const mxl_decoder_family *fam) {
    if (fam->gguf_convert_names) return *fam->gguf_convert_names;
    mxl_decoder_names gn = mxl_names_gguf;
    gn.qkv = "attn_qkv";
    gn.pos_embed = "position_embd";
    return gn;
}

/* Maps one llama.cpp tensor name to transformers' (false: not a name we know). */
static bool gguf_to_hf(const mxl_decoder_names *gn, const mxl_decoder_names *hf, const char *g, char *out, size_t cap, bool *is_q,
                       bool *is_k, bool *in_layer) {
    *is_q = *is_k = *in_layer = false;
    const char *suffix = ends_with(g, ".weight") ? ".weight" : ends_with(g, ".bias") ? ".bias" : NULL;
    if (!suffix) return false;
    size_t stem = strlen(g) - strlen(suffix);
    const char *top_g[] = {gn->embed, gn->final_norm, gn->lm_head, gn->pos_embed},
               *top_h[] = {hf->embed, hf->final_norm, hf->lm_head, hf->pos_embed};
    for (int i = 0; i < 4; i++)
        if (top_g[i] && top_h[i] && strlen(top_g[i]) == stem && strncmp(g, top_g[i], stem) == 0) {
            snprintf(out, cap, "%s%s", top_h[i], suffix);
            return true;
        }
    long layer;
    int used = 0;
    if (strncmp(g, gn->layers, strlen(gn->layers)) != 0 || sscanf(g + strlen(gn->layers), "%ld.%n", &layer, &used) != 1 || used == 0)
        return false;
    const char *mod = g + strlen(gn->layers) + used;
    size_t ml = strlen(mod) - strlen(suffix);
#define FIELD(f) {gn->f, hf->f}
    const char *pairs[][2] = {FIELD(attn_norm), FIELD(q), FIELD(k), FIELD(v), FIELD(qkv), FIELD(o), FIELD(q_norm), FIELD(k_norm),
                              FIELD(post_attn_norm), FIELD(ffn_norm), FIELD(gate), FIELD(up), FIELD(gate_up), FIELD(down),
                              FIELD(post_ffn_norm)};
#undef FIELD
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        if (!pairs[i][0] || !pairs[i][1] || strlen(pairs[i][0]) != ml || strncmp(mod, pairs[i][0], ml) != 0) continue;
        snprintf(out, cap, "%s%ld.%s%s", hf->layers, layer, pairs[i][1], suffix);
        *is_q = pairs[i][0] == gn->q;
        *is_k = pairs[i][0] == gn->k;
        *in_layer = true;
        return true;
    }
    return false;
}

/* What llama.cpp would run that a transformers config.json written by config_from_gguf cannot
 * say: refused by name (RoPE scaling here; the family's own refusals through its convert_check,
 * e.g. OLMo 3's sliding layers, Granite without RoPE or logit scale, Phi-3 with separate Q/K/V,
 * GPT-2 with grouped KV heads). */
static mxl_status check_gguf_convertible(const mxl_checkpoint *ck, mxl_error *err) {
    const mxl_model_config *c = &ck->config;
    const mxl_gguf *g = ck->gguf;
    char key[192], type[64] = "";
    double v;
    const char *rope_tensors[] = {"rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"};
    for (int i = 0; i < 3; i++)
        if (mxl_gguf_find_tensor(g, rope_tensors[i]))
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: tensor '%s' (RoPE scaling) is not converted; convert takes GGUFs without RoPE scaling",
                                 ck->path, rope_tensors[i]);
    const mxl_gguf_kv *arch = mxl_gguf_find(g, "general.architecture");
    char a[64] = "";
    if (arch) mxl_gguf_value_copy_str(&arch->value, a, sizeof a);
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    const mxl_gguf_kv *kv = mxl_gguf_find(g, key);
    if (kv) mxl_gguf_value_copy_str(&kv->value, type, sizeof type);
    if (kv && strcmp(type, "none") != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: RoPE scaling '%s' (metadata key '%s') is not converted", ck->path, type, key);
    const char *factors[] = {"rope.scaling.factor", "rope.scale_linear"};
    for (int i = 0; i < 2 && !kv; i++) {
        v = 0;
        mxl_status st = mxl_gguf_arch_number(g, ck->path, factors[i], &v, err);
        if (st) return st;
        if (v != 0 && v != 1)
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: RoPE scaling factor %g (metadata key '%s.%s') is not converted", ck->path, v, a, factors[i]);
    }
    const mxl_decoder_family *fam = mxl_decoder_family_find(c->model_type);
    return fam && fam->convert_check ? fam->convert_check(ck, err) : MXL_OK;
}

static mxl_status plan_gguf(const mxl_checkpoint *ck, plan *p, mxl_error *err) {
    const mxl_model_config *cfg = &ck->config;
    const mxl_decoder_family *fam = mxl_decoder_family_find(cfg->model_type);
    if (!fam || !fam->gguf_arch) {
        char list[512];
        mxl_decoder_family_list(list, sizeof list, true);
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: converting GGUF model_type '%s' is not supported (%s are)", ck->path,
                             cfg->model_type, list);
    }
    mxl_status st = check_gguf_convertible(ck, err);
    if (st) return st;
    bool permuted = fam->gguf_permuted_qk, shift = fam->gguf_norm_plus_one, conv1d = fam->names->conv1d;
    mxl_decoder_names gn = gguf_names(fam);
    for (uint64_t i = 0; i < mxl_gguf_n_tensors(ck->gguf); i++) {
        const mxl_gguf_tensor_info *ti = mxl_gguf_tensor_at(ck->gguf, i);
        plan_item *it = plan_add(p);
        if (!it) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        bool is_q, is_k, in_layer;
        if (!gguf_to_hf(&gn, fam->names, ti->name, it->name, sizeof it->name, &is_q, &is_k, &in_layer))
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: tensor %s has no transformers name convert knows", ck->path, ti->name);
        if (!mxl_gguf_quant_supported(ti->tensor.dtype) && ti->tensor.dtype != MXL_DTYPE_F32 && ti->tensor.dtype != MXL_DTYPE_F16 &&
            ti->tensor.dtype != MXL_DTYPE_BF16)
            return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: tensor %s has type %s, which convert does not read", ck->path, ti->name,
                                 mxl_dtype_name(ti->tensor.dtype));
        it->t = &ti->tensor;
        set_shape(it, &ti->tensor);
        if (permuted && (is_q || is_k)) it->perm_heads = is_q ? cfg->num_attention_heads : cfg->num_key_value_heads;
        if (shift && ends_with(it->name, "norm.weight")) it->shift = -1.0f;
        /* GPT-2: llama.cpp's converter transposed the Conv1D matrices; transformers wants [in, out] */
        if (conv1d && in_layer && ti->tensor.ndim == 2 && ends_with(it->name, ".weight")) {
            it->transpose = true;
            it->shape[0] = it->rows = ti->tensor.shape[1];
            it->shape[1] = it->cols = ti->tensor.shape[0];
        }
    }
    return MXL_OK;
}

/* ---- config.json ---- */

static const char *dtype_torch_name(mxl_dtype dt) {
    return dt == MXL_DTYPE_F32 ? "float32" : dt == MXL_DTYPE_BF16 ? "bfloat16" : "float16";
}

static json_t *eos_json(const mxl_model_config *cfg) {
    if (cfg->n_eos == 1) return json_integer(cfg->eos_token_ids[0]);
    json_t *a = json_array();
    for (int i = 0; i < cfg->n_eos; i++) json_array_append_new(a, json_integer(cfg->eos_token_ids[i]));
    return a;
}

/* ---- the keys families share (convert_family.h) ---- */

double mxl_convert_arch_num(const mxl_checkpoint *ck, const char *suffix, double dflt) {
    double v = dflt;
    mxl_error e;
    if (mxl_gguf_arch_number(ck->gguf, ck->path, suffix, &v, &e) != MXL_OK) return dflt;
    return v;
}

bool mxl_convert_has_tensor(const mxl_checkpoint *ck, const char *name) { return mxl_gguf_find_tensor(ck->gguf, name) != NULL; }

void mxl_convert_put_layer_types(const mxl_checkpoint *ck, json_t *j) {
    const mxl_model_config *c = &ck->config;
    if (c->n_layer_types != c->num_hidden_layers) return;
    json_t *lt = json_array();
    for (int i = 0; i < c->n_layer_types; i++)
        json_array_append_new(lt, json_string(c->layer_is_sliding[i] ? "sliding_attention" : "full_attention"));
    json_object_set_new(j, "layer_types", lt);
}

void mxl_convert_put_sizes(const mxl_checkpoint *ck, json_t *j) {
    const mxl_model_config *c = &ck->config;
    json_object_set_new(j, "hidden_size", json_integer(c->hidden_size));
    json_object_set_new(j, "intermediate_size", json_integer(c->intermediate_size));
    json_object_set_new(j, "num_hidden_layers", json_integer(c->num_hidden_layers));
    json_object_set_new(j, "num_attention_heads", json_integer(c->num_attention_heads));
    json_object_set_new(j, "num_key_value_heads", json_integer(c->num_key_value_heads));
    json_object_set_new(j, "head_dim", json_integer(c->head_dim));
    json_object_set_new(j, "max_position_embeddings", json_integer(c->max_position_embeddings));
    json_object_set_new(j, "rope_theta", json_real(isnan(c->rope_theta) ? 10000.0 : c->rope_theta));
    json_object_set_new(j, "rope_scaling", json_null());
}

void mxl_convert_put_rms_eps(const mxl_checkpoint *ck, json_t *j) {
    const mxl_model_config *c = &ck->config;
    json_object_set_new(j, "rms_norm_eps", json_real(isnan(c->rms_norm_eps) ? 1e-6 : c->rms_norm_eps));
}

void mxl_convert_put_swiglu(const mxl_checkpoint *ck, json_t *j) {
    mxl_convert_put_rms_eps(ck, j);
    json_object_set_new(j, "hidden_act", json_string("silu"));
    json_object_set_new(j, "attention_bias", json_boolean(mxl_convert_has_tensor(ck, "blk.0.attn_q.bias")));
    json_object_set_new(j, "mlp_bias", json_boolean(mxl_convert_has_tensor(ck, "blk.0.ffn_down.bias")));
}

void mxl_family_convert_config_llama(const mxl_checkpoint *ck, json_t *j) {
    mxl_convert_put_sizes(ck, j);
    mxl_convert_put_swiglu(ck, j);
}

/* config.json for transformers from the GGUF metadata, describing what mlxcel (and llama.cpp)
 * run from the GGUF: the identity keys here, the rest from the family's convert_config (e.g.
 * Gemma 2's 1/sqrt(head_dim) attention scale as query_pre_attn_scalar, SmolLM3's NoPE every 4th
 * layer as no_rope_layers, no sliding window where llama.cpp runs none). */
static json_t *config_from_gguf(const mxl_checkpoint *ck, const mxl_decoder_family *fam, bool tied) {
    const mxl_model_config *c = &ck->config;
    json_t *j = json_object();
    json_object_set_new(j, "architectures", json_pack("[s]", fam->hf_class));
    json_object_set_new(j, "model_type", json_string(c->model_type));
    json_object_set_new(j, "vocab_size", json_integer(c->vocab_size));
    json_object_set_new(j, "tie_word_embeddings", json_boolean(tied));
    json_object_set_new(j, "pad_token_id", json_null());
    /* null when the GGUF has none: transformers' per-family defaults (Phi-3's 32000, GPT-2's
     * 50256, ...) need not lie inside this vocabulary */
    json_object_set_new(j, "bos_token_id", c->bos_token_id >= 0 ? json_integer(c->bos_token_id) : json_null());
    json_object_set_new(j, "eos_token_id", c->n_eos > 0 ? eos_json(c) : json_null());
    (fam->convert_config ? fam->convert_config : mxl_family_convert_config_llama)(ck, j);
    return j;
}


static mxl_status copy_file(const char *src, const char *dst, mxl_error *err) {
    FILE *a = fopen(src, "rb");
    if (!a) return MXL_OK; /* optional sidecar */
    FILE *b = fopen(dst, "wb");
    if (!b) {
        fclose(a);
        return mxl_error_set(err, MXL_ERR_IO, "%s: cannot create: %s", dst, strerror(errno));
    }
    char buf[1 << 16];
    size_t k;
    bool ok = true;
    while (ok && (k = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, k, b) == k;
    fclose(a);
    if (fclose(b) != 0 || !ok) return mxl_error_set(err, MXL_ERR_IO, "%s: write failed", dst);
    return MXL_OK;
}

/* mkdir -p */
static int make_dirs(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *c = p + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
        *c = '/';
    }
    return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* ---- writing ---- */

static mxl_status write_tensors(const plan *p, const char *path, mxl_dtype dt, int bits, int gs, mxl_error *err) {
    size_t n_out = 0;
    for (size_t i = 0; i < p->n; i++) n_out += p->v[i].quantize ? 3 : 1;
    mxl_st_out *outs = mxl_calloc(n_out ? n_out : 1, sizeof *outs);
    if (!outs) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++) {
        const plan_item *it = &p->v[i];
        if (!it->quantize) {
            mxl_st_out *o = &outs[k++];
            snprintf(o->name, sizeof o->name, "%s", it->name);
            o->dtype = dt;
            o->ndim = it->ndim;
            memcpy(o->shape, it->shape, sizeof o->shape);
            continue;
        }
        char base[240];
        snprintf(base, sizeof base, "%.*s", (int)(strlen(it->name) - 7), it->name);
        const char *sfx[3] = {"weight", "scales", "biases"};
        for (int j = 0; j < 3; j++) { /* [.., rows, cols] -> [.., rows, packed words | groups] */
            mxl_st_out *o = &outs[k++];
            snprintf(o->name, sizeof o->name, "%s.%s", base, sfx[j]);
            o->dtype = j ? dt : MXL_DTYPE_U32;
            o->ndim = it->ndim;
            memcpy(o->shape, it->shape, sizeof o->shape);
            o->shape[it->ndim - 1] = j ? it->cols / gs : it->cols * bits / 32;
        }
    }
    mxl_st_writer *w = NULL;
    mxl_status st = mxl_st_writer_create(path, outs, n_out, "mlx", &w, err);
    mxl_free(outs);
    if (st) return st;
    for (size_t i = 0; i < p->n && st == MXL_OK; i++) {
        const plan_item *it = &p->v[i];
        float *row = mxl_malloc((size_t)it->cols * sizeof(float));
        void *orow = mxl_malloc((size_t)it->cols * 4);
        const bool vt = it->view && it->view->transposed; /* (one expert's source at a time, transposed) */
        view_cache vc = {vt ? mxl_malloc((size_t)(it->view->cols * it->view->src_rows) * sizeof(float)) : NULL, -1};
        uint32_t *qw = NULL;
        float *sc = NULL, *bi = NULL;
        void *sb = NULL;
        int64_t ng = it->cols / (gs ? gs : 1), wpr = it->cols * bits / 32;
        if (it->quantize) {
            qw = mxl_malloc((size_t)(it->rows * wpr) * sizeof *qw);
            sc = mxl_malloc((size_t)(it->rows * ng) * sizeof *sc);
            bi = mxl_malloc((size_t)(it->rows * ng) * sizeof *bi);
            sb = mxl_malloc((size_t)(it->rows * ng) * 4);
        }
        if (!row || !orow || (vt && !vc.m) || (it->quantize && (!qw || !sc || !bi || !sb))) {
            st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory converting %s", path, it->name);
        } else if (!it->quantize) {
            float *src = it->transpose ? source_matrix(it) : NULL;
            if (it->transpose && !src) st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory converting %s", path, it->name);
            for (int64_t r = 0; r < it->rows && st == MXL_OK; r++) {
                if (src) /* output row r = source column r */
                    for (int64_t c = 0; c < it->cols; c++) row[c] = src[c * it->rows + r];
                else
                    source_row(it, r, row, &vc);
                store_row(dt, row, it->cols, orow);
                st = mxl_st_writer_put(w, orow, (uint64_t)it->cols * dt_bytes(dt), err);
            }
            mxl_free(src);
        } else {
            for (int64_t r = 0; r < it->rows; r++) {
                source_row(it, r, row, &vc);
                mxl_mlx_quantize_row_grid(bits, gs, row, it->cols, qw + r * wpr, sc + r * ng, bi + r * ng);
            }
            st = mxl_st_writer_put(w, qw, (uint64_t)(it->rows * wpr) * 4, err);
            for (int j = 0; j < 2 && st == MXL_OK; j++) {
                store_row(dt, j ? bi : sc, it->rows * ng, sb);
                st = mxl_st_writer_put(w, sb, (uint64_t)(it->rows * ng) * dt_bytes(dt), err);
            }
        }
        mxl_free(row);
        mxl_free(orow);
        mxl_free(vc.m);
        mxl_free(qw);
        mxl_free(sc);
        mxl_free(bi);
        mxl_free(sb);
    }
    if (st) {
        mxl_st_writer_abort(w);
        return st;
    }
    return mxl_st_writer_finish(w, err);
}

mxl_status mxl_convert(const char *in_path, const char *out_dir, const mxl_convert_opts *opts, mxl_error *err) {
    mxl_convert_opts o = *opts;
    if (o.q_group_size == 0) o.q_group_size = 64;
    if (o.q_bits && !mxl_mlx_params_valid(o.q_bits, o.q_group_size, MXL_DTYPE_F16))
        return mxl_error_set(err, MXL_ERR_ARG, "--q-bits %d with --q-group-size %d is not an MLX quantization (bits 2, 3, 4, 5, 6, 8; group 32, 64, 128)",
                             o.q_bits, o.q_group_size);
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/config.json", out_dir);
    struct stat sb;
    if (stat(probe, &sb) == 0) return mxl_error_set(err, MXL_ERR_ARG, "%s already holds a checkpoint (config.json); choose an empty directory", out_dir);
    mxl_checkpoint *ck = NULL;
    mxl_status st = mxl_checkpoint_open(in_path, &ck, err);
    if (st) return st;
    bool gguf = ck->format == MXL_CHECKPOINT_GGUF;
    if (o.dtype == MXL_DTYPE_INVALID) {
        const char *td = ck->config.torch_dtype;
        o.dtype = gguf ? MXL_DTYPE_F16 : !strcmp(td, "bfloat16") ? MXL_DTYPE_BF16 : !strcmp(td, "float16") ? MXL_DTYPE_F16 : MXL_DTYPE_F32;
    }
    plan p = {0};
    mxl_arena_init(&p.arena, 1 << 20);
    mxl_expert_view *views = NULL;
    st = gguf ? plan_gguf(ck, &p, err) : plan_safetensors(ck, &p, err);
    if (st == MXL_OK && o.q_bits && !gguf) st = restate_experts(ck, &p, &views, err);
    bool has_head = false;
    for (size_t i = 0; st == MXL_OK && i < p.n; i++) {
        plan_item *it = &p.v[i];
        has_head |= strcmp(it->name, "lm_head.weight") == 0;
        it->quantize = o.q_bits && (it->ndim == 2 || (it->ndim == 3 && (it->view || it->is_mlx))) && ends_with(it->name, ".weight") && !strstr(it->name, "norm") &&
                       it->cols % o.q_group_size == 0;
    }
    if (st == MXL_OK && o.q_bits && strcmp(ck->config.model_type, "gpt2") == 0)
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: MLX quantization of gpt2 (Conv1D layout) is not supported by convert", in_path);
    if (st == MXL_OK && make_dirs(out_dir) != 0)
        st = mxl_error_set(err, MXL_ERR_IO, "%s: cannot create: %s", out_dir, strerror(errno));
    char path[4200];
    if (st == MXL_OK) {
        snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
        st = write_tensors(&p, path, o.dtype, o.q_bits, o.q_group_size, err);
    }
    /* config.json */
    json_t *cfg = NULL;
    if (st == MXL_OK) {
        cfg = gguf ? config_from_gguf(ck, mxl_decoder_family_find(ck->config.model_type), !has_head) : json_deep_copy(ck->config.raw);
        json_object_del(cfg, "quantization");
        json_object_del(cfg, "quantization_config");
        json_object_set_new(cfg, "torch_dtype", json_string(dtype_torch_name(o.dtype)));
        if (json_object_get(cfg, "dtype")) json_object_set_new(cfg, "dtype", json_string(dtype_torch_name(o.dtype)));
        if (o.q_bits) {
            json_object_set_new(cfg, "quantization", json_pack("{s:i, s:i, s:s}", "group_size", o.q_group_size, "bits", o.q_bits, "mode", "affine"));
            json_object_set_new(cfg, "quantization_config",
                                json_pack("{s:i, s:i, s:s}", "group_size", o.q_group_size, "bits", o.q_bits, "mode", "affine"));
        }
        st = mxl_json_write_file(cfg, out_dir, "config.json", err);
    }
    /* tokenizer and generation files */
    if (st == MXL_OK && gguf) {
        /* tokenizer.ggml.model "none" (llama.cpp's LLAMA_VOCAB_TYPE_NONE): a model without a
         * vocabulary, fed token ids; no tokenizer files to write */
        const mxl_gguf_kv *tm = mxl_gguf_find(ck->gguf, "tokenizer.ggml.model");
        char tmn[16] = "";
        if (tm) mxl_gguf_value_copy_str(&tm->value, tmn, sizeof tmn);
        if (strcmp(tmn, "none") != 0) st = mxl_tokenizer_export_gguf(ck->gguf, out_dir, err);
        if (st == MXL_OK) {
            json_t *gc = json_object();
            if (ck->config.bos_token_id >= 0) json_object_set_new(gc, "bos_token_id", json_integer(ck->config.bos_token_id));
            if (ck->config.n_eos > 0) json_object_set_new(gc, "eos_token_id", eos_json(&ck->config));
            st = mxl_json_write_file(gc, out_dir, "generation_config.json", err);
        }
    } else if (st == MXL_OK) {
        const char *side[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
                              "chat_template.jinja", "chat_template.json", "tokenizer.model", "vocab.json", "merges.txt",
                              "vocab.txt", "added_tokens.json"};
        for (size_t i = 0; st == MXL_OK && i < sizeof side / sizeof side[0]; i++) {
            char a[4200], b[4200];
            snprintf(a, sizeof a, "%s/%s", ck->dir, side[i]);
            snprintf(b, sizeof b, "%s/%s", out_dir, side[i]);
            st = copy_file(a, b, err);
        }
    }
    mxl_free(p.v);
    mxl_arena_free(&p.arena);
    mxl_free(views);
    mxl_checkpoint_close(ck);
    return st;
}
