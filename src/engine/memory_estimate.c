/* memory_estimate.c - weights + KV + headroom estimate (see memory_estimate.h). */
#include "engine/memory_estimate.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "models/decoder.h"

static const struct {
    const char *name, *alias;
    uint32_t block, bytes; /* bytes per block of `block` elements (int8's scales apart) */
} k_kv_types[MXL_KV_TYPE_COUNT] = {
    [MXL_KV_FP16] = {"fp16", "f16", 1, 2}, [MXL_KV_INT8] = {"int8", NULL, 1, 1},     [MXL_KV_F32] = {"f32", "fp32", 1, 4},
    [MXL_KV_Q8_0] = {"q8_0", NULL, 32, 34}, [MXL_KV_Q4_0] = {"q4_0", NULL, 32, 18}, [MXL_KV_Q4_1] = {"q4_1", NULL, 32, 20},
    [MXL_KV_Q5_0] = {"q5_0", NULL, 32, 22}, [MXL_KV_Q5_1] = {"q5_1", NULL, 32, 24},
    [MXL_KV_TURBO4] = {"turbo4", "turbo4-delegated", 32, 18}, [MXL_KV_TURBO3] = {"turbo3", NULL, 32, 14},
};

int64_t mxl_kv_boundary_v_default(void) {
    const char *s = getenv("MLXCEL_KV_BOUNDARY_V_LAYERS");
    char *end = NULL;
    long v = s && *s ? strtol(s, &end, 10) : -1;
    return s && *s && end && !*end && v >= 0 && v <= (1 << 20) ? (int64_t)v : 2;
}

const char *mxl_kv_type_name(mxl_kv_type t) { return (unsigned)t < MXL_KV_TYPE_COUNT ? k_kv_types[t].name : "?"; }

bool mxl_kv_type_is_block(mxl_kv_type t) { return (unsigned)t < MXL_KV_TYPE_COUNT && k_kv_types[t].block == 32; }

/* Bytes of a cached row of `elems` elements (a multiple of 32 for the block formats; of `group`,
 * int8's scale group, for int8). */
static uint64_t kv_row_bytes(mxl_kv_type t, uint64_t elems, uint64_t group) {
    uint64_t b = elems / k_kv_types[t].block * k_kv_types[t].bytes;
    if (t == MXL_KV_INT8) b += elems / group * 4;
    return b;
}

mxl_decoder_kv_type mxl_kv_type_decoder(mxl_kv_type t) {
    static const mxl_decoder_kv_type m[MXL_KV_TYPE_COUNT] = {
        [MXL_KV_FP16] = MXL_DECODER_KV_F16,  [MXL_KV_INT8] = MXL_DECODER_KV_I8,    [MXL_KV_F32] = MXL_DECODER_KV_F32,
        [MXL_KV_Q8_0] = MXL_DECODER_KV_Q8_0, [MXL_KV_Q4_0] = MXL_DECODER_KV_Q4_0, [MXL_KV_Q4_1] = MXL_DECODER_KV_Q4_1,
        [MXL_KV_Q5_0] = MXL_DECODER_KV_Q5_0, [MXL_KV_Q5_1] = MXL_DECODER_KV_Q5_1, [MXL_KV_TURBO4] = MXL_DECODER_KV_TURBO4,
        [MXL_KV_TURBO3] = MXL_DECODER_KV_TURBO3,
    };
    return (unsigned)t < MXL_KV_TYPE_COUNT ? m[t] : MXL_DECODER_KV_AUTO;
}

#define KV_TYPE_LIST "f32, f16 (fp16), q8_0, q4_0, q4_1, q5_0, q5_1, int8, turbo4, turbo3, fp16+turbo4 or fp16+turbo3"

mxl_status mxl_kv_type_parse(const char *s, mxl_kv_type *out, mxl_error *err) {
    for (int t = 0; t < MXL_KV_TYPE_COUNT; t++)
        if (strcmp(s, k_kv_types[t].name) == 0 || (k_kv_types[t].alias && strcmp(s, k_kv_types[t].alias) == 0)) {
            *out = (mxl_kv_type)t;
            return MXL_OK;
        }
    if (strcmp(s, "bf16") == 0)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "KV cache type 'bf16' is not supported by this build; use " KV_TYPE_LIST);
    return mxl_error_set(err, MXL_ERR_ARG, "unknown KV cache type '%s' (expected " KV_TYPE_LIST ")", s);
}

mxl_status mxl_kv_mode_parse(const char *s, mxl_kv_type *k, mxl_kv_type *v, mxl_error *err) {
    if (strncmp(s, "fp16+", 5) == 0 && strncmp(s + 5, "turbo", 5) == 0) {
        mxl_kv_type t;
        mxl_status st = mxl_kv_type_parse(s + 5, &t, err);
        if (st) return mxl_error_set(err, MXL_ERR_ARG, "unknown KV cache type '%s' (expected " KV_TYPE_LIST ")", s);
        *k = MXL_KV_FP16, *v = t;
        return MXL_OK;
    }
    mxl_kv_type t;
    mxl_status st = mxl_kv_type_parse(s, &t, err);
    if (!st) *k = *v = t;
    return st;
}

mxl_status mxl_kv_flags_resolve(const mxl_kv_flags *f, mxl_kv_type *k, mxl_kv_type *v, int64_t *v_edge, mxl_error *err) {
    mxl_kv_type a = MXL_KV_FP16, b = MXL_KV_FP16, x, y;
    mxl_error e;
    if (f->mode) {
        if (mxl_kv_mode_parse(f->mode, &a, &b, &e)) return mxl_error_set(err, MXL_ERR_ARG, "--kv-cache-mode %s: %s", f->mode, e.msg);
    }
    if (f->k) {
        mxl_status st = mxl_kv_mode_parse(f->k, &x, &y, &e);
        if (st) return mxl_error_set(err, st, "--cache-type-k %s: %s", f->k, e.msg);
        a = x;
    }
    if (f->v) {
        mxl_status st = mxl_kv_mode_parse(f->v, &x, &y, &e);
        if (st) return mxl_error_set(err, st, "--cache-type-v %s: %s", f->v, e.msg);
        b = y;
    }
    *k = a, *v = b;
    *v_edge = f->v_edge >= 0 ? f->v_edge : mxl_kv_boundary_v_default();
    return MXL_OK;
}

int64_t mxl_kv_flags_group(const mxl_kv_flags *f, const mxl_decoder_hparams *hp) {
    if (f->group > 0) return f->group;
    return f->group < 0 && hp && mxl_decoder_kv_group_fits(hp, 64) ? 64 : 0;
}

double mxl_mem_headroom_factor_from_env(char *warning, size_t cap) {
    const double dflt = 1.20;
    if (warning && cap) warning[0] = '\0';
    const char *s = getenv("MLXCEL_HEADROOM_FACTOR");
    if (!s || !*s) return dflt;
    char *end = NULL;
    errno = 0;
    double f = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(f) || f <= 0.0) {
        if (warning) snprintf(warning, cap, "MLXCEL_HEADROOM_FACTOR='%s' is not a positive number; using %.2f", s, dflt);
        return dflt;
    }
    return f;
}

int mxl_mem_parse_bytes(const char *s, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    while (isspace((unsigned char)*s)) s++;
    if (*s == '-') return 1;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0) return 1;
    while (isspace((unsigned char)*end)) end++;
    static const struct { const char *suffix; double mul; } units[] = {
        {"", 1},        {"b", 1},          {"k", 1e3},         {"kb", 1e3},    {"kib", 1024.0},
        {"m", 1e6},     {"mb", 1e6},       {"mib", 1048576.0}, {"g", 1e9},     {"gb", 1e9},
        {"gib", 1073741824.0}, {"t", 1e12}, {"tb", 1e12},      {"tib", 1099511627776.0},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(end, units[i].suffix) == 0) {
            double b = v * units[i].mul;
            if (b >= 18446744073709551615.0) return 1;
            *out = (uint64_t)b;
            return 0;
        }
    }
    return 1;
}

mxl_status mxl_mem_budget(uint64_t *out, bool *from_limit, mxl_error *err) {
    *out = 0;
    *from_limit = false;
    const char *lim = getenv("MLXCEL_MEMORY_LIMIT");
    if (lim && *lim) {
        uint64_t b;
        if (mxl_mem_parse_bytes(lim, &b))
            return mxl_error_set(err, MXL_ERR_ARG, "MLXCEL_MEMORY_LIMIT='%s' is not a size (examples: 16GB, 512MB, 1073741824)", lim);
        if (b > 0) {
            *out = b;
            *from_limit = true;
            return MXL_OK;
        }
    }
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return MXL_OK;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            *out = (uint64_t)kb * 1024u;
            break;
        }
    }
    fclose(f);
    return MXL_OK;
}

mxl_status mxl_mem_estimate_compute(const mxl_model_config *cfg, bool is_encoder,
                                    uint64_t weights_bytes, const mxl_mem_inputs *in,
                                    mxl_mem_estimate *out, mxl_error *err) {
    memset(out, 0, sizeof *out);
    out->weights_bytes = weights_bytes;
    out->n_layers = cfg->num_hidden_layers;
    out->n_kv_heads = cfg->num_key_value_heads;
    out->head_dim = cfg->head_dim;
    out->sliding_window = cfg->sliding_window;
    uint64_t kv_total = 0;
    /* recurrent layers (models/recurrent.h): a state per sequence instead of KV rows */
    const mxl_decoder_hparams *hp = in->dec;
    int64_t n_kv_layers = cfg->num_hidden_layers;
    if (hp && hp->layer_kind) n_kv_layers = 0;
    for (int64_t l = 0; hp && hp->layer_kind && l < hp->n_layers; l++) {
        const size_t f = mxl_rec_state_floats(hp, hp->parallel_ssm ? MXL_LAYER_MAMBA2 : (mxl_layer_kind)hp->layer_kind[l]);
        out->n_state_layers += f > 0;
        out->state_bytes_per_seq += (uint64_t)f * sizeof(float);
        n_kv_layers += hp->layer_kind[l] == MXL_LAYER_ATTN; /* (MLP-only layers hold neither) */
    }
    if (mxl_mul_u64(out->state_bytes_per_seq, (uint64_t)(in->batch > 0 ? in->batch : 1), &out->state_bytes_total))
        return mxl_error_set(err, MXL_ERR_OVERFLOW, "state size overflows");
    if (!is_encoder && n_kv_layers > 0) {
        const char *missing = cfg->num_hidden_layers <= 0 ? "num_hidden_layers"
                              : cfg->num_key_value_heads <= 0 ? "num_key_value_heads"
                              : cfg->head_dim <= 0 ? "head_dim"
                              : NULL;
        if (missing)
            return mxl_error_set(err, MXL_ERR_FORMAT, "cannot size the KV cache: the checkpoint does not declare %s", missing);
        out->has_kv = true;
        /* Which layers keep only a window of KV: the per-layer table (layer_types, or GGUF's
         * pattern), else Gemma's sliding_window_pattern (layer i is global when (i+1) % p == 0).
         * A bare sliding_window is not enough: Qwen2 declares one with use_sliding_window false,
         * so such configs are sized as full attention (an upper bound). */
        int64_t n_sliding = 0;
        if (cfg->n_layer_types == cfg->num_hidden_layers && cfg->layer_is_sliding) {
            for (int i = 0; i < cfg->n_layer_types; i++) n_sliding += cfg->layer_is_sliding[i] != 0;
        } else if (cfg->sliding_window_pattern > 1) {
            for (int64_t i = 0; i < cfg->num_hidden_layers; i++) n_sliding += (i + 1) % cfg->sliding_window_pattern != 0;
        }
        if (cfg->sliding_window <= 0) n_sliding = 0;
        out->n_sliding_layers = n_sliding;
        out->n_full_layers = n_kv_layers - n_sliding;
        uint64_t per_layer_token; /* bytes of K and V for one token in one layer */
        uint64_t kvh = (uint64_t)cfg->num_key_value_heads * (uint64_t)cfg->head_dim;
        /* per-layer head shapes (Gemma 4): each cached row is the widest layer's; KV-shared
         * layers keep no rows of their own */
        for (int64_t l = 0; hp && hp->layer_head_dim && l < hp->n_layers; l++) {
            const uint64_t w = (uint64_t)hp->layer_head_dim[l] * (uint64_t)(hp->layer_kv_heads ? hp->layer_kv_heads[l] : hp->n_kv_heads);
            if (w > kvh) kvh = w;
        }
        for (int64_t l = 0; hp && hp->layer_kv_source && l < hp->n_layers; l++) {
            if (hp->layer_kv_source[l] < 0) continue;
            n_kv_layers--;
            if (cfg->n_layer_types == cfg->num_hidden_layers && cfg->layer_is_sliding && cfg->layer_is_sliding[l] && cfg->sliding_window > 0)
                n_sliding--;
        }
        out->n_sliding_layers = n_sliding;
        out->n_full_layers = n_kv_layers - n_sliding;
        out->latent = cfg->kv_lora_rank > 0 && cfg->qk_rope_head_dim > 0;
        if (out->latent) { /* the latent row, read as K and V (models/mla.h) */
            out->n_kv_heads = 1;
            out->head_dim = cfg->kv_lora_rank + cfg->qk_rope_head_dim;
            kvh = (uint64_t)out->head_dim;
        }
        /* int8's scale group and the block formats' condition, as the decoder's cache has them
         * (models/decoder.c kv_group_of); from the config alone: 32 where it divides the head
         * (the latent row's parts), else the whole head */
        uint64_t group = 32;
        if (in->group > 0) {
            group = (uint64_t)in->group;
        } else if (hp) {
            group = (uint64_t)mxl_decoder_kv_group(hp);
        } else if (out->latent) {
            while (group > 1 && (cfg->kv_lora_rank % (int64_t)group || cfg->qk_rope_head_dim % (int64_t)group)) group /= 2;
        } else if (cfg->head_dim % 32) {
            group = (uint64_t)cfg->head_dim;
        }
        if (hp) {
            const mxl_decoder_kv_opts o = {mxl_kv_type_decoder(in->kv_k), mxl_kv_type_decoder(out->latent ? in->kv_k : in->kv_v), in->v_edge, 0, 0};
            mxl_status st = mxl_decoder_kv_check(hp, &o, err);
            if (st) return st;
        }
        for (int i = 0; i < (out->latent ? 1 : 2); i++) {
            const mxl_kv_type t = i ? in->kv_v : in->kv_k;
            if (mxl_kv_type_is_block(t) && group != 32)
                return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "cache type %s needs %s a multiple of 32, this model has %lld",
                                     mxl_kv_type_name(t), out->latent ? "the latent row's parts" : "head_dim",
                                     (long long)(out->latent ? out->head_dim : cfg->head_dim));
        }
        if (kvh % group) group = 1; /* (not reached: rows are whole heads) */
        if (mxl_add_u64(kv_row_bytes(in->kv_k, kvh, group), out->latent ? 0 : kv_row_bytes(in->kv_v, kvh, group), &per_layer_token) ||
            mxl_mul_u64(per_layer_token, (uint64_t)n_kv_layers, &out->kv_bytes_per_token))
            return mxl_error_set(err, MXL_ERR_OVERFLOW, "KV size overflows");
        uint64_t tokens = (uint64_t)in->max_tokens;
        uint64_t win_tokens = n_sliding && (uint64_t)cfg->sliding_window < tokens ? (uint64_t)cfg->sliding_window : tokens;
        uint64_t a, b, layer_tokens;
        if (mxl_mul_u64((uint64_t)out->n_full_layers, tokens, &a) ||
            mxl_mul_u64((uint64_t)n_sliding, win_tokens, &b) || mxl_add_u64(a, b, &layer_tokens) ||
            mxl_mul_u64(layer_tokens, per_layer_token, &kv_total) ||
            mxl_mul_u64(kv_total, (uint64_t)in->batch, &kv_total))
            return mxl_error_set(err, MXL_ERR_OVERFLOW, "KV size overflows");
        /* layers kept at fp16 apart from their type (models/kv_pool.h): a TurboQuant V's boundary
         * layers at each end, and with --kv-skip-last-layer the last layer's K and V where a type
         * is quantized */
        const bool quant_k = in->kv_k != MXL_KV_FP16 && in->kv_k != MXL_KV_F32, quant_v = in->kv_v != MXL_KV_FP16 && in->kv_v != MXL_KV_F32;
        int64_t vf = !out->latent && (in->kv_v == MXL_KV_TURBO4 || in->kv_v == MXL_KV_TURBO3) && in->v_edge > 0 ? in->v_edge : 0;
        if (vf > n_kv_layers / 2) vf = n_kv_layers / 2;
        int64_t kl = !out->latent && (quant_k || quant_v) && in->k_last > 0 ? in->k_last : 0;
        if (kl > n_kv_layers - vf) kl = n_kv_layers - vf;
        const int64_t vl = vf > kl ? vf : kl;
        /* bytes per token those layers add (an f32 K kept at fp16 takes some away) */
        const int64_t f16_row = (int64_t)kv_row_bytes(MXL_KV_FP16, kvh, group);
        const int64_t d = kl * (f16_row - (int64_t)kv_row_bytes(in->kv_k, kvh, group)) + (vf + vl) * (f16_row - (int64_t)kv_row_bytes(in->kv_v, kvh, group));
        uint64_t ad = (uint64_t)(d < 0 ? -d : d), tot;
        if (d > 0 ? mxl_add_u64(out->kv_bytes_per_token, ad, &out->kv_bytes_per_token) : (out->kv_bytes_per_token -= ad, false))
            return mxl_error_set(err, MXL_ERR_OVERFLOW, "KV size overflows");
        if (mxl_mul_u64(ad, tokens, &tot) || mxl_mul_u64(tot, (uint64_t)in->batch, &tot) || (d > 0 && mxl_add_u64(kv_total, tot, &kv_total)))
            return mxl_error_set(err, MXL_ERR_OVERFLOW, "KV size overflows");
        if (d < 0) kv_total -= tot < kv_total ? tot : kv_total;
    }
    out->kv_bytes_total = kv_total;
    uint64_t base;
    if (mxl_add_u64(weights_bytes, kv_total, &base) || mxl_add_u64(base, out->state_bytes_total, &base)) return mxl_error_set(err, MXL_ERR_OVERFLOW, "size overflows");
    double factor = in->headroom_factor;
    out->headroom_bytes = factor > 1.0 ? (uint64_t)((double)base * (factor - 1.0)) : 0;
    if (mxl_add_u64(base, out->headroom_bytes, &out->total_bytes)) return mxl_error_set(err, MXL_ERR_OVERFLOW, "size overflows");
    out->budget_bytes = in->budget_bytes;
    out->fits_known = in->budget_bytes > 0;
    out->fits = out->fits_known && out->total_bytes <= in->budget_bytes;
    return MXL_OK;
}

void mxl_mem_estimate_terms(const mxl_mem_estimate *e, char *out, size_t cap) {
    const double g = 1024.0 * 1024.0 * 1024.0;
    snprintf(out, cap, "weights %.3f GiB + KV %.3f GiB + headroom %.3f GiB = %.3f GiB", (double)e->weights_bytes / g,
             (double)e->kv_bytes_total / g, (double)e->headroom_bytes / g, (double)e->total_bytes / g);
}
