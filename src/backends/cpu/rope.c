/* rope.c - rotary embeddings reference (rope.h). Frequencies in double, then f32 like torch. */
#include "backends/cpu/rope.h"

#include <math.h>
#include <string.h>

static double yarn_get_mscale(double scale, double mscale) {
    return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}
static double yarn_corr_dim(double n_rot, double dim, double base, double max_pos) {
    return dim * log(max_pos / (n_rot * 2.0 * M_PI)) / (2.0 * log(base));
}

void mxl_rope_freqs(const mxl_rope_cfg *c, int64_t seq_len, float *inv_freq, float *attn_factor) {
    const int dim = c->rotary_dim, half = dim / 2;
    double base = c->theta;
    *attn_factor = 1.0f;
    if (c->scaling == MXL_ROPE_SCALING_DYNAMIC && (double)seq_len > c->original_max_pos)
        base *= pow(c->factor * (double)seq_len / c->original_max_pos - (c->factor - 1.0),
                    (double)dim / (double)(dim - 2));
    for (int i = 0; i < half; i++) {
        double f = 1.0 / pow(base, (double)(2 * i) / (double)dim);
        if (c->freq_factors) f /= (double)c->freq_factors[i];
        switch (c->scaling) {
        case MXL_ROPE_SCALING_LINEAR:
            f /= c->factor;
            break;
        case MXL_ROPE_SCALING_LLAMA3: {
            double low_wl = c->original_max_pos / c->low_freq_factor;
            double high_wl = c->original_max_pos / c->high_freq_factor;
            double wl = 2.0 * M_PI / f;
            if (wl > low_wl) {
                f /= c->factor;
            } else if (!(wl < high_wl)) {
                double smooth = (c->original_max_pos / wl - c->low_freq_factor) /
                                (c->high_freq_factor - c->low_freq_factor);
                f = (1.0 - smooth) * f / c->factor + smooth * f;
            }
            break;
        }
        case MXL_ROPE_SCALING_YARN: {
            double bf = c->beta_fast > 0 ? c->beta_fast : 32.0;
            double bs = c->beta_slow > 0 ? c->beta_slow : 1.0;
            double lo = yarn_corr_dim(bf, dim, base, c->original_max_pos);
            double hi = yarn_corr_dim(bs, dim, base, c->original_max_pos);
            if (!c->yarn_no_truncate) {
                lo = floor(lo);
                hi = ceil(hi);
            }
            if (lo < 0) lo = 0;
            if (hi > dim - 1) hi = dim - 1;
            if (lo == hi) hi += 0.001;
            double ramp = ((double)i - lo) / (hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double extrap = 1.0 - ramp; /* weight of the unscaled frequency */
            f = (f / c->factor) * (1.0 - extrap) + f * extrap;
            break;
        }
        case MXL_ROPE_SCALING_LONGROPE:
            f /= (double)((double)seq_len > c->original_max_pos ? c->long_factors : c->short_factors)[i];
            break;
        default:
            break;
        }
        inv_freq[i] = (float)f;
    }
    if (c->scaling == MXL_ROPE_SCALING_YARN) {
        double af = c->attention_factor;
        if (!(af > 0)) {
            if (c->mscale > 0 && c->mscale_all_dim > 0)
                af = yarn_get_mscale(c->factor, c->mscale) / yarn_get_mscale(c->factor, c->mscale_all_dim);
            else
                af = yarn_get_mscale(c->factor, 1.0);
        }
        *attn_factor = (float)af;
    }
    if (c->scaling == MXL_ROPE_SCALING_LONGROPE) {
        double af = (double)seq_len > c->original_max_pos && c->attention_factor_long > 0 ? c->attention_factor_long : c->attention_factor;
        if (!(af > 0)) af = c->factor <= 1.0 ? 1.0 : sqrt(1.0 + log(c->factor) / log(c->original_max_pos));
        *attn_factor = (float)af;
    }
    if (c->attn_mul > 0) *attn_factor = (float)((double)*attn_factor * c->attn_mul);
}

void mxl_rope_table(const mxl_rope_cfg *c, const float *inv_freq, float attn_factor, int64_t pos, float *cs) {
    const int half = c->rotary_dim / 2;
    const float p = (float)pos;
    for (int i = 0; i < half; i++) {
        float ang = p * inv_freq[i];
        cs[i] = cosf(ang) * attn_factor;
        cs[half + i] = (c->inverse ? -sinf(ang) : sinf(ang)) * attn_factor;
    }
}

typedef float v4f __attribute__((vector_size(16))); /* 4 lanes of the target's baseline SIMD */

void mxl_rope_apply_table(const mxl_rope_cfg *c, const float *cs, float *x, int n_heads) {
    const int half = c->rotary_dim / 2;
    if (c->style == MXL_ROPE_NEOX && half % 4 == 0) {
        /* the halves are contiguous: 4 pairs at a time, the same operations per element */
        for (int h = 0; h < n_heads; h++) {
            float *xa = x + (int64_t)h * c->head_dim, *xb = xa + half;
            for (int i = 0; i < half; i += 4) {
                v4f co, si, x0, x1;
                memcpy(&co, cs + i, sizeof co);
                memcpy(&si, cs + half + i, sizeof si);
                memcpy(&x0, xa + i, sizeof x0);
                memcpy(&x1, xb + i, sizeof x1);
                v4f ya = x0 * co - x1 * si, yb = x1 * co + x0 * si;
                memcpy(xa + i, &ya, sizeof ya);
                memcpy(xb + i, &yb, sizeof yb);
            }
        }
        return;
    }
    for (int i = 0; i < half; i++) {
        const float co = cs[i], si = cs[half + i];
        for (int h = 0; h < n_heads; h++) {
            float *xh = x + (int64_t)h * c->head_dim;
            int a = c->style == MXL_ROPE_NEOX ? i : 2 * i;
            int b = c->style == MXL_ROPE_NEOX ? i + half : 2 * i + 1;
            float x0 = xh[a], x1 = xh[b];
            xh[a] = x0 * co - x1 * si;
            xh[b] = x1 * co + x0 * si;
        }
    }
}

void mxl_rope_apply(const mxl_rope_cfg *c, const float *inv_freq, float attn_factor, float *x,
                    int n_heads, int64_t pos) {
    float cs[c->rotary_dim > 0 ? c->rotary_dim : 1];
    mxl_rope_table(c, inv_freq, attn_factor, pos, cs);
    mxl_rope_apply_table(c, cs, x, n_heads);
}
