/* quant_mlx_ref.c - plain scalar reference kernels for MLX affine quantization (quant_mlx.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/quant_mlx.h"
#include "core/status.h"

int mxl_mlx_params_valid(int bits, int group_size, mxl_dtype dt) {
    int bits_ok = bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8;
    int gs_ok = group_size == 32 || group_size == 64 || group_size == 128;
    int dt_ok = dt == MXL_DTYPE_F16 || dt == MXL_DTYPE_BF16 || dt == MXL_DTYPE_F32;
    return bits_ok && gs_ok && dt_ok;
}

void mxl_mlx_unpack_row_ref(int bits, const uint32_t *row, uint8_t *q, int64_t n) {
    uint32_t mask = (1u << bits) - 1u;
    for (int64_t j = 0; j < n; j++) {
        int64_t bit = j * bits;
        int64_t word = bit / 32;
        int off = (int)(bit % 32);
        uint32_t lo, hi = 0; /* memcpy: checkpoint bytes need not be 4-byte aligned */
        memcpy(&lo, row + word, 4);
        if (off + bits > 32) memcpy(&hi, row + word + 1, 4); /* straddles two words */
        uint64_t v = (uint64_t)lo | (uint64_t)hi << 32;
        q[j] = (uint8_t)((v >> off) & mask);
    }
}

static const uint32_t *row_words(const mxl_mlx_qweight *W, int64_t r) {
    return W->w + r * (W->cols * W->bits / 32);
}

void mxl_mlx_dequant_row_ref(const mxl_mlx_qweight *W, int64_t r, float *out) {
    uint8_t q[128];
    int64_t ng = W->cols / W->group_size;
    const uint32_t *row = row_words(W, r);
    for (int64_t g = 0; g < ng; g++) {
        float s = mxl_mlx_param(W->scales, W->scale_dtype, r * ng + g);
        float b = mxl_mlx_param(W->biases, W->scale_dtype, r * ng + g);
        /* a group starts on a word boundary: group_size*bits is a multiple of 32 */
        mxl_mlx_unpack_row_ref(W->bits, row + g * W->group_size * W->bits / 32, q, W->group_size);
        for (int j = 0; j < W->group_size; j++) {
            float t = s * (float)q[j]; /* separate statement: never contracted to an FMA */
            out[g * W->group_size + j] = t + b;
        }
    }
}

/* Packs group g of a row with scale s and bias mn (codes rounded and clamped to [0, 2^bits - 1]). */
static void quantize_group(int bits, int gs, int64_t g, const float *xg, float s, float mn, uint32_t *w) {
    float maxq = (float)((1 << bits) - 1);
    for (int j = 0; j < gs; j++) {
        float v = nearbyintf((xg[j] - mn) / s);
        if (v < 0) v = 0;
        if (v > maxq) v = maxq;
        uint64_t qv = (uint64_t)v;
        int64_t bit = (g * gs + j) * bits;
        int64_t word = bit / 32;
        int off = (int)(bit % 32);
        w[word] |= (uint32_t)(qv << off);
        if (off + bits > 32) w[word + 1] |= (uint32_t)(qv >> (32 - off));
    }
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* The step of an evenly spaced grid of at most `levels` values holding every element of xg
 * (min mn, max mx), or 0 when there is none. Every gap between distinct values is a multiple of
 * the step, so the step is the smallest gap divided by some m >= 1: the first m that puts every
 * element on the grid wins (the coarsest grid; an unused level costs nothing). */
static bool on_grid(const float *xg, int gs, float mn, float step) {
    for (int j = 0; j < gs; j++) {
        float q = (xg[j] - mn) / step;
        if (fabsf(q - nearbyintf(q)) > 1e-3f) return false;
    }
    return true;
}

static float grid_step(const float *xg, int gs, float mn, float mx, int levels) {
    float v[128];
    memcpy(v, xg, (size_t)gs * sizeof(float));
    qsort(v, (size_t)gs, sizeof(float), cmp_float);
    float gap = 0.0f;
    for (int j = 1; j < gs; j++)
        if (v[j] > v[j - 1] && (gap == 0.0f || v[j] - v[j - 1] < gap)) gap = v[j] - v[j - 1];
    if (gap == 0.0f) return 0.0f;
    for (int m = 1;; m++) {
        float k = nearbyintf((mx - mn) * (float)m / gap);
        if (k < 1.0f || k > (float)(levels - 1)) return 0.0f;
        float step = (mx - mn) / k;
        if (on_grid(xg, gs, mn, step)) return step;
    }
}

static void quantize_row(int bits, int gs, const float *x, int64_t n, uint32_t *w, float *scales, float *biases,
                         bool keep_grid) {
    int64_t words = n * bits / 32;
    for (int64_t i = 0; i < words; i++) w[i] = 0;
    float maxq = (float)((1 << bits) - 1);
    for (int64_t g = 0; g < n / gs; g++) {
        const float *xg = x + g * gs;
        float mn = xg[0], mx = xg[0];
        for (int j = 1; j < gs; j++) {
            mn = fminf(mn, xg[j]);
            mx = fmaxf(mx, xg[j]);
        }
        float s = keep_grid ? grid_step(xg, gs, mn, mx, 1 << bits) : 0.0f;
        if (s == 0.0f) s = (mx - mn) / maxq;
        if (s == 0.0f) s = 1.0f; /* constant group: every q is 0, value = bias */
        scales[g] = s;
        biases[g] = mn;
        quantize_group(bits, gs, g, xg, s, mn, w);
    }
}

void mxl_mlx_quantize_row_ref(int bits, int gs, const float *x, int64_t n, uint32_t *w,
                              float *scales, float *biases) {
    quantize_row(bits, gs, x, n, w, scales, biases, false);
}

void mxl_mlx_quantize_row_grid(int bits, int gs, const float *x, int64_t n, uint32_t *w, float *scales, float *biases) {
    quantize_row(bits, gs, x, n, w, scales, biases, true);
}

float mxl_mlx_vec_dot_ref(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq) {
    uint8_t q[128];
    int64_t ng = W->cols / W->group_size;
    int sub = W->group_size / 32;
    const uint32_t *row = row_words(W, r);
    float acc = 0.0f;
    for (int64_t g = 0; g < ng; g++) {
        float s = mxl_mlx_param(W->scales, W->scale_dtype, r * ng + g);
        float b = mxl_mlx_param(W->biases, W->scale_dtype, r * ng + g);
        mxl_mlx_unpack_row_ref(W->bits, row + g * W->group_size * W->bits / 32, q, W->group_size);
        float sq = 0.0f, sx = 0.0f;
        for (int k = 0; k < sub; k++) {
            const mxl_block_q8a *xb = &xq[g * sub + k];
            int isum = 0;
            for (int j = 0; j < 32; j++) isum += (int)q[k * 32 + j] * xb->qs[j];
            sq += xb->d * (float)isum;
            sx += xb->s;
        }
        acc += s * sq + b * sx;
    }
    return acc;
}
