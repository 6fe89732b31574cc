/* embed_dense.c - sentence-transformers Dense modules (see embed_dense.h). */
#include "engine/embed_dense.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "io/json_read.h"
#include "io/safetensors.h"
#include "models/weights.h"

enum { ACT_IDENTITY, ACT_TANH, ACT_RELU, ACT_SIGMOID, ACT_GELU };

static const struct {
    const char *name; /* last component of the torch class path */
    int act;
} k_acts[] = {{"Identity", ACT_IDENTITY}, {"Tanh", ACT_TANH}, {"ReLU", ACT_RELU}, {"Sigmoid", ACT_SIGMOID}, {"GELU", ACT_GELU}};

static bool exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* one module: dir/sub/config.json + model.safetensors */
static mxl_status load_one(const char *dir, const char *sub, int64_t width, mxl_arena *arena, mxl_embed_dense *d,
                           mxl_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/config.json", dir, sub);
    json_t *cfg;
    mxl_status ls = mxl_json_load_file_py(path, 1u << 20, &cfg, err);
    if (ls != MXL_OK) return ls;
    json_t *in = json_object_get(cfg, "in_features"), *out = json_object_get(cfg, "out_features");
    json_t *bias = json_object_get(cfg, "bias"), *act = json_object_get(cfg, "activation_function");
    json_t *res = json_object_get(cfg, "use_residual");
    mxl_status st = MXL_OK;
    if (!json_is_integer(in) || !json_is_integer(out) || json_integer_value(in) <= 0 || json_integer_value(out) <= 0 ||
        json_integer_value(in) > (1 << 20) || json_integer_value(out) > (1 << 20))
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: in_features and out_features must be positive integers", path);
    else if ((bias && !json_is_boolean(bias)) || (res && !json_is_null(res) && !json_is_boolean(res)))
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: 'bias' and 'use_residual' must be true or false", path);
    else if (act && !json_is_null(act) && !json_is_string(act))
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: 'activation_function' must be a string", path);
    if (st) {
        json_decref(cfg);
        return st;
    }
    d->in = json_integer_value(in);
    d->out = json_integer_value(out);
    d->residual = res && json_is_true(res);
    bool has_bias = !bias || json_is_true(bias); /* torch.nn.Linear's default */
    const char *an = act && json_is_string(act) ? json_string_value(act) : "torch.nn.modules.linear.Identity";
    const char *last = strrchr(an, '.');
    last = last ? last + 1 : an;
    d->act = -1;
    for (size_t i = 0; i < sizeof k_acts / sizeof k_acts[0]; i++)
        if (strcmp(last, k_acts[i].name) == 0) d->act = k_acts[i].act;
    if (d->act < 0)
        st = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: activation_function '%s' is not supported (Identity, Tanh, ReLU, Sigmoid, GELU are)", path, an);
    else if (d->in != width)
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: in_features %lld does not match the %lld-wide input it receives", path, (long long)d->in, (long long)width);
    else if (d->residual && d->in != d->out)
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: use_residual needs in_features == out_features", path);
    json_decref(cfg);
    if (st) return st;

    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, sub);
    if (!exists(path)) {
        char bin[4096];
        snprintf(bin, sizeof bin, "%s/%s/pytorch_model.bin", dir, sub);
        if (exists(bin)) return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: Dense weights in pytorch_model.bin are not read; convert them to model.safetensors", bin);
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: missing (the Dense module's weights)", path);
    }
    mxl_safetensors *sf = NULL;
    if ((st = mxl_safetensors_open(path, &sf, err))) return st;
    const mxl_st_entry *we = mxl_safetensors_find(sf, "linear.weight"), *be = mxl_safetensors_find(sf, "linear.bias");
    if (!we) st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'linear.weight' is missing", path);
    else if (we->tensor.ndim != 2 || we->tensor.shape[0] != d->out || we->tensor.shape[1] != d->in)
        st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: 'linear.weight' must be [%lld, %lld]", path, (long long)d->out, (long long)d->in);
    else if (has_bias && !be) st = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor 'linear.bias' is missing (config says bias: true)", path);
    /* the arena copies out of the mapping (the file closes below); a view would dangle */
    float *w = st ? NULL : mxl_arena_alloc(arena, (size_t)(d->out * d->in) * sizeof(float), 64);
    float *b = st || !has_bias ? NULL : mxl_arena_alloc(arena, (size_t)d->out * sizeof(float), 64);
    if (!st && (!w || (has_bias && !b))) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    const float *view = NULL;
    if (!st) st = mxl_weights_vector_f32(arena, &we->tensor, "linear.weight", d->out * d->in, &view, err);
    if (!st) memcpy(w, view, (size_t)(d->out * d->in) * sizeof(float));
    if (!st && has_bias) st = mxl_weights_vector_f32(arena, &be->tensor, "linear.bias", d->out, &view, err);
    if (!st && has_bias) memcpy(b, view, (size_t)d->out * sizeof(float));
    if (st && err && !strstr(err->msg, path)) mxl_error_prefix(err, "%s: ", path);
    mxl_safetensors_close(sf);
    d->w = w;
    d->b = b;
    return st;
}

mxl_status mxl_embed_dense_load(const char *dir, const char (*subdirs)[MXL_ST_PATH_MAX], int n, int64_t width,
                                mxl_embed_dense_chain *out, mxl_error *err) {
    memset(out, 0, sizeof *out);
    mxl_arena_init(&out->arena, 64 * 1024);
    if (n > MXL_EMBED_DENSE_MAX) return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: more than %d Dense modules", dir, MXL_EMBED_DENSE_MAX);
    for (int i = 0; i < n; i++) {
        mxl_status st = load_one(dir, subdirs[i], width, &out->arena, &out->mods[i], err);
        if (st) {
            mxl_embed_dense_free(out);
            return st;
        }
        width = out->mods[i].out;
        out->n = i + 1;
    }
    return MXL_OK;
}

void mxl_embed_dense_free(mxl_embed_dense_chain *c) {
    mxl_arena_free(&c->arena);
    memset(c, 0, sizeof *c);
}

int64_t mxl_embed_dense_width(const mxl_embed_dense_chain *c, int64_t width) {
    return c->n ? c->mods[c->n - 1].out : width;
}

int64_t mxl_embed_dense_scratch_floats(const mxl_embed_dense_chain *c) {
    int64_t w = 1;
    for (int i = 0; i < c->n; i++)
        if (c->mods[i].out > w) w = c->mods[i].out;
    return 2 * w;
}

static double act1(int a, double v) {
    switch (a) {
    case ACT_TANH: return tanh(v);
    case ACT_RELU: return v > 0 ? v : 0;
    case ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case ACT_GELU: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    default: return v;
    }
}

void mxl_embed_dense_apply(const mxl_embed_dense_chain *c, const float *x, float *y, float *scratch) {
    const float *cur = x;
    for (int i = 0; i < c->n; i++) {
        const mxl_embed_dense *d = &c->mods[i];
        float *dst = i == c->n - 1 ? y : scratch + (i % 2) * (mxl_embed_dense_scratch_floats(c) / 2);
        for (int64_t o = 0; o < d->out; o++) {
            double acc = d->b ? d->b[o] : 0.0;
            const float *wr = d->w + o * d->in;
            for (int64_t k = 0; k < d->in; k++) acc += (double)wr[k] * cur[k];
            double v = act1(d->act, acc);
            if (d->residual) v += cur[o];
            dst[o] = (float)v;
        }
        cur = dst;
    }
}
