/* lora.c - LoRA adapters (lora.h): the three formats read into f32 A / B pairs per (layer,
 * projection), checked against the decoder's weights, and the row-wise update. */
#include "models/lora.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/arena.h"
#include "core/dtype.h"
#include "io/gguf.h"
#include "io/json_read.h"
#include "io/safetensors.h"

/* The projection names of both conventions, by module. */
static const char *const k_hf_names[MXL_LORA_N_MODULES] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                                          "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
static const char *const k_gguf_names[MXL_LORA_N_MODULES] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

static const mxl_weight *base_weight(const mxl_decoder_layer *L, mxl_lora_module m) {
    switch (m) {
    case MXL_LORA_Q: return &L->wq;
    case MXL_LORA_K: return &L->wk;
    case MXL_LORA_V: return &L->wv;
    case MXL_LORA_O: return &L->wo;
    case MXL_LORA_GATE: return &L->w_gate;
    case MXL_LORA_UP: return &L->w_up;
    default: return &L->w_down;
    }
}

/* One tensor of the adapter: the projection it updates and whether it is A (down, to rank r)
 * or B (up, from r). */
typedef struct lora_name {
    int64_t layer;
    mxl_lora_module m;
    bool is_b;
} lora_name;

/* "...layers.N.<hf name>.<suffix A|B>" or "blk.N.<gguf name>.weight.lora_<a|b>": false when the
 * name is no projection update this build applies. */
static bool parse_name(const char *name, bool gguf, const char *sfx_a, const char *sfx_b, lora_name *out) {
    const char *p = gguf ? (strncmp(name, "blk.", 4) == 0 ? name + 4 : NULL) : strstr(name, "layers.");
    if (!p) return false;
    if (!gguf) p += 7;
    char *end = NULL;
    long layer = strtol(p, &end, 10);
    if (end == p || *end != '.' || layer < 0) return false;
    const char *rest = end + 1;
    for (int m = 0; m < MXL_LORA_N_MODULES; m++) {
        const char *mn = gguf ? k_gguf_names[m] : k_hf_names[m];
        const size_t ml = strlen(mn);
        if (strncmp(rest, mn, ml) != 0 || rest[ml] != '.') continue;
        const char *s = rest + ml + 1;
        if (strcmp(s, sfx_a) == 0 || strcmp(s, sfx_b) == 0) {
            out->layer = layer;
            out->m = (mxl_lora_module)m;
            out->is_b = strcmp(s, sfx_b) == 0;
            return true;
        }
    }
    return false;
}

static size_t elem_bytes(mxl_dtype t) { return t == MXL_DTYPE_F32 ? 4 : 2; }

/* t's values in its own dtype (F32, F16 or BF16: adapters keep what they were saved as, the
 * bytes a decode step reads), transposed when transpose ([rows, cols] of the stored [cols, rows]). */
static mxl_status tensor_copy(const mxl_tensor *t, const char *name, bool transpose, void **out, mxl_dtype *dt, int64_t *rows,
                              int64_t *cols, mxl_error *err) {
    if (t->ndim != 2) return mxl_error_set(err, MXL_ERR_FORMAT, "adapter tensor %s has %d dimensions, not 2", name, t->ndim);
    if (t->dtype != MXL_DTYPE_F32 && t->dtype != MXL_DTYPE_F16 && t->dtype != MXL_DTYPE_BF16)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "adapter tensor %s is %s; LoRA matrices load from F32, F16 or BF16", name,
                             mxl_dtype_name(t->dtype));
    const int64_t r0 = t->shape[0], c0 = t->shape[1];
    /* (an empty matrix is no rank; its other side may still be huge: a GGUF's [141733920770, 0]
     * made the copy below loop that many times, minutes per file - found by fuzz_adapter.c) */
    if (r0 <= 0 || c0 <= 0)
        return mxl_error_set(err, MXL_ERR_FORMAT, "adapter tensor %s has an empty dimension (%lld x %lld)", name, (long long)r0, (long long)c0);
    const size_t es = elem_bytes(t->dtype);
    uint8_t *f = mxl_malloc((size_t)(r0 * c0) * es);
    if (!f) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    const uint8_t *src = t->data;
    if (!transpose) memcpy(f, src, (size_t)(r0 * c0) * es);
    else
        for (int64_t i = 0; i < r0; i++)
            for (int64_t j = 0; j < c0; j++) memcpy(f + (size_t)(j * r0 + i) * es, src + (size_t)(i * c0 + j) * es, es);
    *out = f;
    *dt = t->dtype;
    *rows = transpose ? c0 : r0;
    *cols = transpose ? r0 : c0;
    return MXL_OK;
}

typedef struct loader {
    mxl_lora *l;
    const mxl_decoder *d;
    bool transpose; /* mlx-lm stores lora_a [in, r] and lora_b [r, out]: transposed to A, B */
    mxl_error *err;
} loader;

/* Takes one A or B matrix for its pair. */
static mxl_status take(loader *ld, const lora_name *nm, const mxl_tensor *t, const char *tname) {
    mxl_lora *l = ld->l;
    if (nm->layer >= l->n_layers)
        return mxl_error_set(ld->err, MXL_ERR_ARG, "adapter tensor %s is for layer %lld; the model has %lld layers", tname, (long long)nm->layer,
                             (long long)l->n_layers);
    mxl_lora_pair *p = &l->pairs[nm->layer * MXL_LORA_N_MODULES + nm->m];
    void **slot = nm->is_b ? &p->bt : &p->a;
    if (*slot) return mxl_error_set(ld->err, MXL_ERR_FORMAT, "adapter tensor %s appears twice", tname);
    int64_t rows = 0, cols = 0;
    /* A kept [r, in]; B kept transposed, [r, out] */
    mxl_status st = tensor_copy(t, tname, nm->is_b ? !ld->transpose : ld->transpose, slot, nm->is_b ? &p->bt_dtype : &p->wa.dtype, &rows,
                                &cols, ld->err);
    if (st) return st;
    if (nm->is_b) { /* (as stored: [out, r]) */
        const int64_t c = cols;
        cols = rows, rows = c;
    }
    const int64_t r = nm->is_b ? cols : rows; /* A [r, in], B [out, r] */
    /* (against the other matrix whenever it came first, whatever its rank: a rank-0 A
     * followed by a rank-1 B left A empty under a pair of rank 1, read past its end) */
    if ((nm->is_b ? p->a : p->bt) && r != p->r)
        return mxl_error_set(ld->err, MXL_ERR_FORMAT, "adapter tensor %s: rank %lld does not match its pair's %lld", tname, (long long)r,
                             (long long)p->r);
    p->r = r;
    if (nm->is_b) p->out = rows;
    else p->in = cols;
    return MXL_OK;
}

/* bytes of pair p's A and B^T, each rounded up to a cache line */
static size_t pair_a_bytes(const mxl_lora_pair *p) { return ((size_t)(p->r * p->in) * elem_bytes(p->wa.dtype) + 63) & ~(size_t)63; }
static size_t pair_bt_bytes(const mxl_lora_pair *p) { return ((size_t)(p->r * p->out) * elem_bytes(p->bt_dtype) + 63) & ~(size_t)63; }

void mxl_lora_pair_prefetch(const mxl_lora_pair *p) {
    const size_t na = pair_a_bytes(p), nb = pair_bt_bytes(p);
    for (size_t o = 0; o < na; o += 64) __builtin_prefetch((const char *)p->a + o, 0, 2);
    for (size_t o = 0; o < nb; o += 64) __builtin_prefetch((const char *)p->bt + o, 0, 2);
}

/* Moves every pair's A and B^T into one block on huge pages, in the order a decode step reads
 * them (layer by layer, each projection's A then B^T): a step then walks the adapter as one
 * stream, where a few hundred small heap copies cost a TLB miss every page. The block is taken
 * whole first, so a failure leaves every pair as it was. */
static mxl_status pack(mxl_lora *l, mxl_error *err) {
    size_t total = 0;
    for (int64_t i = 0; i < l->n_layers * MXL_LORA_N_MODULES; i++)
        if (l->pairs[i].a) total += pair_a_bytes(&l->pairs[i]) + pair_bt_bytes(&l->pairs[i]);
    mxl_arena_init(&l->arena, total);
    l->arena.huge_pages = true;
    uint8_t *at = mxl_arena_alloc(&l->arena, total, 64);
    if (!at) {
        mxl_arena_free(&l->arena);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory for the adapter");
    }
    for (int64_t i = 0; i < l->n_layers * MXL_LORA_N_MODULES; i++) {
        mxl_lora_pair *p = &l->pairs[i];
        if (!p->a) continue;
        const size_t na = pair_a_bytes(p), nb = pair_bt_bytes(p);
        memcpy(at, p->a, (size_t)(p->r * p->in) * elem_bytes(p->wa.dtype));
        memcpy(at + na, p->bt, (size_t)(p->r * p->out) * elem_bytes(p->bt_dtype));
        mxl_free(p->a), mxl_free(p->bt);
        p->a = at, p->wa.data = at, p->bt = at + na;
        at += na + nb;
    }
    l->packed = true;
    return MXL_OK;
}

/* Every pair complete and fitting its base weight; scales set by scale_of; then packed. */
static mxl_status finish(loader *ld, float (*scale_of)(const void *ctx, int64_t layer, mxl_lora_module m, int64_t r), const void *ctx) {
    mxl_lora *l = ld->l;
    for (int64_t i = 0; i < l->n_layers; i++)
        for (int m = 0; m < MXL_LORA_N_MODULES; m++) {
            mxl_lora_pair *p = &l->pairs[i * MXL_LORA_N_MODULES + m];
            if (!p->a && !p->bt) continue;
            const char *mn = k_hf_names[m];
            if (!p->a || !p->bt)
                return mxl_error_set(ld->err, MXL_ERR_FORMAT, "the adapter has only %s of layer %lld's %s", p->a ? "A" : "B", (long long)i, mn);
            const mxl_decoder_layer *L = &ld->d->layers[i];
            const mxl_weight *w = base_weight(L, (mxl_lora_module)m);
            /* a projection the layer lacks (MoE experts instead of a dense MLP, no attention, V
             * from K) would otherwise match an adapter of empty shapes, and latent attention
             * (MLA) projects its queries without the LoRA pass: both would load and do nothing */
            if (w->rows == 0 || w->cols == 0)
                return mxl_error_set(ld->err, MXL_ERR_UNSUPPORTED, "the adapter updates layer %lld's %s, which the model does not have", (long long)i, mn);
            if (L->mla && m == MXL_LORA_Q)
                return mxl_error_set(ld->err, MXL_ERR_UNSUPPORTED, "the adapter updates layer %lld's %s, which latent attention (MLA) runs without LoRA in this build",
                                     (long long)i, mn);
            if (w->rows != p->out || w->cols != p->in)
                return mxl_error_set(ld->err, MXL_ERR_ARG, "the adapter's layer %lld %s is [%lld, %lld], the model's weight is [%lld, %lld]", (long long)i, mn,
                                     (long long)p->out, (long long)p->in, (long long)w->rows, (long long)w->cols);
            if (p->r < 1 || p->r > MXL_LORA_MAX_RANK)
                return mxl_error_set(ld->err, MXL_ERR_UNSUPPORTED, "the adapter's layer %lld %s has rank %lld (1..%d load)", (long long)i, mn,
                                     (long long)p->r, MXL_LORA_MAX_RANK);
            p->scale = scale_of(ctx, i, (mxl_lora_module)m, p->r);
            p->wa = (mxl_weight){.kind = MXL_W_DENSE, .dtype = p->wa.dtype, .rows = p->r, .cols = p->in, .data = p->a};
            l->n_pairs++;
            if (p->r > l->max_r) l->max_r = p->r;
        }
    if (l->n_pairs == 0) return mxl_error_set(ld->err, MXL_ERR_FORMAT, "the adapter updates no projection");
    return pack(l, ld->err);
}

/* ---- PEFT ---- */

typedef struct peft_cfg {
    double alpha;
    bool rslora;
    const json_t *alpha_pattern; /* module name suffix -> alpha */
} peft_cfg;

static float peft_scale(const void *ctx, int64_t layer, mxl_lora_module m, int64_t r) {
    const peft_cfg *c = ctx;
    double alpha = c->alpha;
    const char *key;
    const json_t *v;
    char full[128];
    snprintf(full, sizeof full, "layers.%lld.%s", (long long)layer, k_hf_names[m]);
    json_object_foreach((json_t *)c->alpha_pattern, key, v) { /* PEFT: the pattern matches the module name's end */
        size_t kl = strlen(key), fl = strlen(full);
        if (kl <= fl && strcmp(full + fl - kl, key) == 0 && (kl == fl || full[fl - kl - 1] == '.') && json_is_number(v)) alpha = json_number_value(v);
    }
    return (float)(c->rslora ? alpha / sqrt((double)r) : alpha / (double)r);
}

static mxl_status refuse_cfg(const json_t *cfg, mxl_error *err) {
    const json_t *v;
    if ((v = json_object_get(cfg, "peft_type")) && json_is_string(v) && strcmp(json_string_value(v), "LORA") != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "PEFT adapter type %s: only LORA adapters load", json_string_value(v));
    if ((v = json_object_get(cfg, "use_dora")) && json_is_true(v)) return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "DoRA adapters (use_dora) do not load yet");
    if ((v = json_object_get(cfg, "fan_in_fan_out")) && json_is_true(v))
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "adapters with fan_in_fan_out (Conv1D projections) do not load yet");
    if ((v = json_object_get(cfg, "modules_to_save")) && json_is_array(v) && json_array_size(v) > 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "the adapter replaces whole modules (modules_to_save), which this build does not load");
    if ((v = json_object_get(cfg, "bias")) && json_is_string(v) && strcmp(json_string_value(v), "none") != 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "adapter biases (bias %s) do not load yet", json_string_value(v));
    return MXL_OK;
}

/* The tensors of one safetensors file through parse_name; any other tensor is refused. */
static mxl_status load_st(loader *ld, const char *file, const char *sfx_a, const char *sfx_b) {
    mxl_safetensors *sf = NULL;
    mxl_status st = mxl_safetensors_open(file, &sf, ld->err);
    if (st) return st;
    for (size_t i = 0; i < mxl_safetensors_count(sf) && !st; i++) {
        const mxl_st_entry *e = mxl_safetensors_at(sf, i);
        lora_name nm;
        if (!parse_name(e->name, false, sfx_a, sfx_b, &nm))
            st = mxl_error_set(ld->err, MXL_ERR_UNSUPPORTED, "adapter tensor %s updates no q/k/v/o/gate/up/down projection of a layer, which is all this build applies",
                               e->name);
        else st = take(ld, &nm, &e->tensor, e->name);
    }
    mxl_safetensors_close(sf);
    return st;
}

static mxl_status load_peft(loader *ld, const char *dir, const json_t *cfg) {
    mxl_status st = refuse_cfg(cfg, ld->err);
    if (st) return st;
    const json_t *a = json_object_get(cfg, "lora_alpha");
    peft_cfg pc = {json_is_number(a) ? json_number_value(a) : 8.0, json_is_true(json_object_get(cfg, "use_rslora")),
                   json_object_get(cfg, "alpha_pattern")};
    char file[4200];
    snprintf(file, sizeof file, "%s/adapter_model.safetensors", dir);
    struct stat sb;
    if (stat(file, &sb) != 0) return mxl_error_set(ld->err, MXL_ERR_IO, "%s: no adapter_model.safetensors (adapter_model.bin is not read: convert it to safetensors)", dir);
    snprintf(ld->l->format, sizeof ld->l->format, "peft");
    if ((st = load_st(ld, file, "lora_A.weight", "lora_B.weight"))) return st;
    return finish(ld, peft_scale, &pc);
}

/* ---- mlx-lm ---- */

static float fixed_scale(const void *ctx, int64_t layer, mxl_lora_module m, int64_t r) {
    (void)layer, (void)m, (void)r;
    return *(const float *)ctx;
}

static mxl_status load_mlx(loader *ld, const char *dir, const json_t *cfg) {
    const json_t *t = json_object_get(cfg, "fine_tune_type");
    if (t && json_is_string(t) && strcmp(json_string_value(t), "lora") != 0)
        return mxl_error_set(ld->err, MXL_ERR_UNSUPPORTED, "mlx-lm adapter of type %s: only lora adapters load", json_string_value(t));
    const json_t *s = json_object_get(json_object_get(cfg, "lora_parameters"), "scale");
    float scale = json_is_number(s) ? (float)json_number_value(s) : 20.0f; /* mlx-lm's LoRALinear default */
    char file[4200];
    snprintf(file, sizeof file, "%s/adapters.safetensors", dir);
    snprintf(ld->l->format, sizeof ld->l->format, "mlx");
    ld->transpose = true;
    mxl_status st = load_st(ld, file, "lora_a", "lora_b");
    return st ? st : finish(ld, fixed_scale, &scale);
}

/* ---- GGUF ---- */

/* llama.cpp's: alpha / r, or 1 without alpha */
static float gguf_scale(const void *ctx, int64_t layer, mxl_lora_module m, int64_t r) {
    (void)layer, (void)m;
    const double alpha = *(const double *)ctx;
    return alpha != 0 ? (float)(alpha / (double)r) : 1.0f;
}

static mxl_status load_gguf(loader *ld, const char *path) {
    mxl_gguf *g = NULL;
    mxl_status st = mxl_gguf_open(path, &g, ld->err);
    if (st) return st;
    mxl_gguf_str s;
    mxl_error e2;
    if (mxl_gguf_get_str(g, "general.type", &s, &e2) || s.len != 7 || memcmp(s.data, "adapter", 7) != 0)
        st = mxl_error_set(ld->err, MXL_ERR_FORMAT, "%s is not a GGUF adapter (general.type is not 'adapter')", path);
    else if (mxl_gguf_get_str(g, "adapter.type", &s, &e2) || s.len != 4 || memcmp(s.data, "lora", 4) != 0)
        st = mxl_error_set(ld->err, MXL_ERR_UNSUPPORTED, "%s: only LoRA GGUF adapters (adapter.type lora) load", path);
    double alpha = 0;
    if (!st && mxl_gguf_get_f64(g, "adapter.lora.alpha", &alpha, &e2)) alpha = 0;
    snprintf(ld->l->format, sizeof ld->l->format, "gguf");
    for (uint64_t i = 0; !st && i < mxl_gguf_n_tensors(g); i++) {
        const mxl_gguf_tensor_info *ti = mxl_gguf_tensor_at(g, i);
        lora_name nm;
        if (!parse_name(ti->name, true, "weight.lora_a", "weight.lora_b", &nm))
            st = mxl_error_set(ld->err, MXL_ERR_UNSUPPORTED, "adapter tensor %s updates no q/k/v/o/gate/up/down projection of a layer, which is all this build applies",
                               ti->name);
        else st = take(ld, &nm, &ti->tensor, ti->name);
    }
    mxl_gguf_close(g);
    if (st) return st;
    return finish(ld, gguf_scale, &alpha);
}

mxl_status mxl_lora_load(const char *path, const mxl_checkpoint *ck, const mxl_decoder *d, mxl_lora **out, mxl_error *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return mxl_error_set(err, MXL_ERR_IO, "adapter %s: no such file or directory", path);
    mxl_lora *l = mxl_calloc(1, sizeof *l);
    if (!l) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    l->n_layers = d->hp.n_layers;
    l->pairs = mxl_calloc((size_t)(l->n_layers * MXL_LORA_N_MODULES), sizeof *l->pairs);
    l->path = mxl_strdup(path);
    if (!l->pairs || !l->path) {
        mxl_lora_free(l);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    loader ld = {l, d, false, err};
    const bool base_gguf = ck->format == MXL_CHECKPOINT_GGUF;
    mxl_status st;
    if (S_ISDIR(sb.st_mode)) {
        char cfgp[4200];
        snprintf(cfgp, sizeof cfgp, "%s/adapter_config.json", path);
        json_t *cfg = NULL;
        st = mxl_json_load_file_py(cfgp, 1 << 20, &cfg, err);
        if (!st && !json_is_object(cfg)) st = mxl_error_set(err, MXL_ERR_FORMAT, "%s is not a JSON object", cfgp);
        if (!st && base_gguf)
            st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "a safetensors adapter on a GGUF model: convert it with llama.cpp's convert_lora_to_gguf.py (GGUF keeps Q and K rows in another order)");
        if (!st) st = json_object_get(cfg, "lora_parameters") || json_object_get(cfg, "fine_tune_type") ? load_mlx(&ld, path, cfg) : load_peft(&ld, path, cfg);
        json_decref(cfg);
    } else if (!base_gguf) {
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "a GGUF adapter on a safetensors model: use the adapter's PEFT or mlx-lm form (GGUF keeps Q and K rows in another order)");
    } else {
        st = load_gguf(&ld, path);
    }
    if (st) {
        mxl_error_prefix(err, "adapter %s: ", path);
        mxl_lora_free(l);
        return st;
    }
    *out = l;
    return MXL_OK;
}

void mxl_lora_free(mxl_lora *l) {
    if (!l) return;
    if (l->packed) mxl_arena_free(&l->arena);
    else
        for (int64_t i = 0; l->pairs && i < l->n_layers * MXL_LORA_N_MODULES; i++) mxl_free(l->pairs[i].a), mxl_free(l->pairs[i].bt);
    mxl_free(l->pairs);
    mxl_free(l->path);
    mxl_free(l);
}

static float elem_of(const void *p, mxl_dtype t, int64_t i) {
    return t == MXL_DTYPE_F32   ? ((const float *)p)[i]
           : t == MXL_DTYPE_F16 ? mxl_f16_to_f32(((const uint16_t *)p)[i])
                                : mxl_bf16_to_f32(((const uint16_t *)p)[i]);
}

mxl_status mxl_lora_fuse(const mxl_lora *l, mxl_decoder *d, float scale, mxl_error *err) {
    /* every target checked first: a refusal changes nothing */
    for (int64_t i = 0; i < l->n_layers; i++)
        for (int m = 0; m < MXL_LORA_N_MODULES; m++) {
            const mxl_weight *w = base_weight(&d->layers[i], (mxl_lora_module)m);
            if (!mxl_lora_at(l, i, (mxl_lora_module)m)) continue;
            if (w->kind != MXL_W_DENSE || w->prepared)
                return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "--lora-fuse needs dense (F32 / F16 / BF16) base weights; layer %lld's %s is %s (without --lora-fuse the adapter runs beside it)",
                                     (long long)i, k_hf_names[m], w->kind == MXL_W_DENSE ? "prepared for the backend" : mxl_dtype_name(w->dtype));
        }
    for (int64_t i = 0; i < l->n_layers; i++)
        for (int m = 0; m < MXL_LORA_N_MODULES; m++) {
            const mxl_lora_pair *p = mxl_lora_at(l, i, (mxl_lora_module)m);
            if (!p) continue;
            mxl_weight *w = (mxl_weight *)base_weight(&d->layers[i], (mxl_lora_module)m);
            const size_t es = w->dtype == MXL_DTYPE_F32 ? 4 : 2;
            uint8_t *nw = mxl_arena_alloc(&d->arena, (size_t)(w->rows * w->cols) * es, 64);
            if (!nw) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory fusing the adapter");
            const float s = scale * p->scale;
            for (int64_t o = 0; o < w->rows; o++)
                for (int64_t c = 0; c < w->cols; c++) {
                    float delta = 0.0f;
                    for (int64_t k = 0; k < p->r; k++) delta += elem_of(p->bt, p->bt_dtype, k * p->out + o) * elem_of(p->a, p->wa.dtype, k * p->in + c);
                    const float v = elem_of(w->data, w->dtype, o * w->cols + c) + s * delta;
                    const size_t at = (size_t)(o * w->cols + c);
                    if (w->dtype == MXL_DTYPE_F32) ((float *)nw)[at] = v;
                    else ((uint16_t *)nw)[at] = w->dtype == MXL_DTYPE_F16 ? mxl_f32_to_f16(v) : mxl_f32_to_bf16(v);
                }
            w->data = nw;
        }
    return MXL_OK;
}
