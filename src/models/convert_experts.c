/* convert_experts.c - the stacked experts of a transformers checkpoint restated in mlx-lm's layout
 * for `mlxcel convert -q` (convert_experts.h). The layouts are told apart as the loader's bind_moe
 * (decoder.c) tells them, from the names the family's setup chose for the checkpoint. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "models/convert_experts.h"
#include "models/decoder_family.h"

typedef struct views {
    const mxl_checkpoint *ck;
    mxl_error *err;
    mxl_expert_view *v;
    size_t n, cap;
    char pre[160]; /* the layer's "<layers><i>." */
} views;

/* The tensor "<pre><module><suffix>" (a bare backbone export without "model.", as the loader). */
static const mxl_st_entry *find(const views *vs, const char *module, const char *suffix) {
    char name[512];
    snprintf(name, sizeof name, "%s%s%s", vs->pre, module, suffix);
    const mxl_st_entry *e = mxl_st_model_find(vs->ck->st, name);
    if (!e && strncmp(name, "model.", 6) == 0) e = mxl_st_model_find(vs->ck->st, name + 6);
    return e;
}

/* Adds a view of source "<pre><module><suffix>" (absent: nothing) as "<pre><dst>", after checking
 * that the source holds n_exp experts' [src_rows, cols]. */
static mxl_status add(views *vs, const char *module, const char *suffix, const char *dst, mxl_expert_view p) {
    const mxl_st_entry *e = find(vs, module, suffix);
    if (!e || !dst) return MXL_OK;
    if (e->tensor.dtype == MXL_DTYPE_U32) return MXL_OK; /* MLX codes: quantized already */
    int64_t numel = 1;
    for (int d = 0; d < e->tensor.ndim; d++) numel *= e->tensor.shape[d];
    if (numel != p.n_exp * p.src_rows * p.cols)
        return mxl_error_set(vs->err, MXL_ERR_FORMAT, "%s: tensor '%s' holds %lld values, but the config's %lld experts of [%lld, %lld] need %lld",
                             vs->ck->path, e->name, (long long)numel, (long long)p.n_exp, (long long)p.src_rows, (long long)p.cols,
                             (long long)(p.n_exp * p.src_rows * p.cols));
    if (vs->n == vs->cap) {
        size_t cap = vs->cap ? 2 * vs->cap : 32;
        mxl_expert_view *v = mxl_realloc(vs->v, cap * sizeof *v);
        if (!v) return mxl_error_set(vs->err, MXL_ERR_NOMEM, "out of memory");
        vs->v = v;
        vs->cap = cap;
    }
    snprintf(p.src, sizeof p.src, "%s", e->name);
    snprintf(p.dst, sizeof p.dst, "%s%s", vs->pre, dst);
    vs->v[vs->n++] = p;
    return MXL_OK;
}

/* A stack of E experts' [rows, cols] from source matrices of src_rows rows. */
static mxl_expert_view stack(int64_t E, int64_t rows, int64_t cols, int64_t src_rows, int64_t off, int64_t stride, bool transposed) {
    return (mxl_expert_view){.n_exp = E, .expert = -1, .rows = rows, .cols = cols, .src_rows = src_rows, .off = off, .stride = stride,
                             .transposed = transposed};
}

static char *cat(char *buf, size_t cap, const char *a, const char *b) {
    snprintf(buf, cap, "%s%s", a, b);
    return buf;
}

/* transformers 5's own "<experts>gate_up_proj" [E, 2F, H] (gate rows, then up; or interleaved,
 * and [E, H, 2F] when transposed) and "<experts>down_proj" [E, H, F] ([E, F, H]), with their
 * biases "..._bias" [E, 2F] / [E, H]. */
static mxl_status native(views *vs, const mxl_decoder_names *nm, const mxl_decoder_hparams *hp) {
    const int64_t E = hp->n_experts, F = hp->moe_ffn, H = hp->hidden;
    const bool T = nm->exps_native_transposed, I = nm->exps_native_interleaved;
    char gu[256], dn[256], w[3][256];
    cat(gu, sizeof gu, nm->experts, "gate_up_proj");
    cat(dn, sizeof dn, nm->experts, "down_proj");
    if (!nm->exps_gate || !nm->exps_up || !nm->exps_down) return MXL_OK;
    cat(w[0], sizeof w[0], nm->exps_gate, ".weight");
    cat(w[1], sizeof w[1], nm->exps_up, ".weight");
    cat(w[2], sizeof w[2], nm->exps_down, ".weight");
    mxl_status st;
    if ((st = add(vs, gu, "", w[0], stack(E, F, H, 2 * F, 0, I ? 2 : 1, T))) || (st = add(vs, gu, "", w[1], stack(E, F, H, 2 * F, I ? 1 : F, I ? 2 : 1, T))) ||
        (st = add(vs, dn, "", w[2], stack(E, H, F, H, 0, 1, T))))
        return st;
    if (!hp->moe_expert_bias) return MXL_OK;
    mxl_expert_view g = stack(E, F, 1, 2 * F, 0, I ? 2 : 1, false), u = stack(E, F, 1, 2 * F, I ? 1 : F, I ? 2 : 1, false),
                    d = stack(E, H, 1, H, 0, 1, false);
    g.bias = u.bias = d.bias = true;
    cat(w[0], sizeof w[0], nm->exps_gate, ".bias");
    cat(w[1], sizeof w[1], nm->exps_up, ".bias");
    cat(w[2], sizeof w[2], nm->exps_down, ".bias");
    if ((st = add(vs, gu, "_bias", w[0], g)) || (st = add(vs, gu, "_bias", w[1], u))) return st;
    return add(vs, dn, "_bias", w[2], d);
}

/* One sparse layer's experts (vs->pre set). */
static mxl_status layer(views *vs, const mxl_decoder_names *nm, const mxl_decoder_hparams *hp) {
    const int64_t E = hp->n_experts, F = hp->moe_ffn, H = hp->hidden;
    char m[256], w[3][256];
    mxl_status st;
    if (hp->moe_plain) { /* up and down: transformers' own "<experts>up_proj" [E, F, H] / down_proj */
        if (!nm->experts || !nm->exps_up || !nm->exps_down) return MXL_OK;
        return (st = add(vs, cat(m, sizeof m, nm->experts, "up_proj"), "", cat(w[0], sizeof w[0], nm->exps_up, ".weight"), stack(E, F, H, F, 0, 1, false)))
                   ? st
                   : add(vs, cat(m, sizeof m, nm->experts, "down_proj"), "", cat(w[1], sizeof w[1], nm->exps_down, ".weight"),
                         stack(E, H, F, H, 0, 1, false));
    }
    if (nm->experts && nm->expert_gate) { /* one module per expert: 2-D already */
        snprintf(m, sizeof m, "%s0.%s", nm->experts, nm->expert_gate);
        if (find(vs, m, ".weight")) return MXL_OK;
    }
    if (nm->experts && (cat(m, sizeof m, nm->experts, "gate_up_proj"), find(vs, m, ""))) return native(vs, nm, hp);
    if (!nm->exps_gate || !nm->exps_up || !nm->exps_down) return MXL_OK;
    cat(w[0], sizeof w[0], nm->exps_gate, ".weight");
    cat(w[1], sizeof w[1], nm->exps_up, ".weight");
    cat(w[2], sizeof w[2], nm->exps_down, ".weight");
    if (nm->exps_gate_up && find(vs, nm->exps_gate_up, ".weight")) { /* Granite MoE: [E, 2F, H], gate rows first */
        const char *down = nm->exps_fused_down ? nm->exps_fused_down : nm->exps_down;
        if ((st = add(vs, nm->exps_gate_up, ".weight", w[0], stack(E, F, H, 2 * F, 0, 1, false))) ||
            (st = add(vs, nm->exps_gate_up, ".weight", w[1], stack(E, F, H, 2 * F, F, 1, false))))
            return st;
        return add(vs, down, ".weight", w[2], stack(E, H, F, H, 0, 1, false));
    }
    if (find(vs, nm->exps_gate, "")) { /* bare flat stacks [E F, H] (DBRX): one module per expert, as mlx-lm */
        if (!nm->experts || !nm->expert_gate || !nm->expert_up || !nm->expert_down) return MXL_OK;
        const bool dt = nm->exps_down_transposed;
        for (int64_t e = 0; e < E; e++) {
            mxl_expert_view g = stack(E, F, H, F, 0, 1, false), d = stack(E, H, F, H, 0, 1, dt);
            g.expert = d.expert = e;
            const char *part[3] = {nm->expert_gate, nm->expert_up, nm->expert_down};
            for (int p = 0; p < 3; p++) snprintf(w[p], sizeof w[p], "%s%lld.%s.weight", nm->experts, (long long)e, part[p]);
            if ((st = add(vs, nm->exps_gate, "", w[0], g)) || (st = add(vs, nm->exps_up, "", w[1], g)) || (st = add(vs, nm->exps_down, "", w[2], d)))
                return st;
        }
        return MXL_OK;
    }
    /* mlx-lm's own stacks in float: as they are, so that they quantize */
    if ((st = add(vs, nm->exps_gate, ".weight", w[0], stack(E, F, H, F, 0, 1, false))) ||
        (st = add(vs, nm->exps_up, ".weight", w[1], stack(E, F, H, F, 0, 1, false))))
        return st;
    return add(vs, nm->exps_down, ".weight", w[2], stack(E, H, F, H, 0, 1, false));
}

mxl_status mxl_convert_expert_views(const mxl_checkpoint *ck, mxl_expert_view **out, size_t *n, mxl_error *err) {
    *out = NULL;
    *n = 0;
    if (ck->format != MXL_CHECKPOINT_SAFETENSORS || !mxl_decoder_family_find(ck->config.model_type)) return MXL_OK;
    mxl_decoder d;
    mxl_decoder_names nm;
    mxl_status st = mxl_decoder_read_names(ck, &d, &nm, err);
    if (st) return st;
    views vs = {.ck = ck, .err = err};
    const mxl_decoder_hparams *hp = &d.hp;
    for (int64_t l = 0; st == MXL_OK && hp->n_experts > 0 && l < hp->n_layers; l++) {
        if (hp->layer_is_moe && !hp->layer_is_moe[l]) continue;
        snprintf(vs.pre, sizeof vs.pre, "%s%lld.", nm.layers, (long long)l);
        st = layer(&vs, &nm, hp);
    }
    mxl_decoder_free(&d);
    if (st) {
        mxl_free(vs.v);
        return st;
    }
    *out = vs.v;
    *n = vs.n;
    return MXL_OK;
}
