/* quant_gguf_ref.c - plain scalar reference kernels for the ggml block formats (quant_gguf.h).
 *
 * Dequantization does exactly the f32 operations of the PyPI gguf package's dequantize_blocks
 * (and of ggml's dequantize_row_*): e.g. Q4_K: (d*sc) * q - (dmin*m), so the results agree bit
 * for bit. The fused dots follow ggml-cpu's generic vec_dot_*_q8_*: exact integer sums per block,
 * one f32 multiply-add per block. MXFP4 follows ggml's dequantize_row_mxfp4 and
 * ggml_vec_dot_mxfp4_q8_0 (the doubled E2M1 values as integers, the halved E8M0 scale per block).
 * IQ4_NL / IQ4_XS look their nibbles up in kvalues_iq4nl (gguf.quants.IQ4_NL / IQ4_XS): IQ4_NL
 * dequantizes d * value and dots as Q4_0; IQ4_XS dequantizes (d * (ls - 32)) * value and dots
 * against q8k with one exact integer sum per super-block (ggml's vec_dot_iq4_xs_q8_K). The IQ grid
 * formats (IQ2_*, IQ3_*, IQ1_*) are decoded once into integer codes, multipliers and a power of
 * two (mxl_iq_grid_decode, layouts in quant_gguf.h) that serve dequantization and the dot alike;
 * their grids and sign table come generated from the gguf package (quant_iq_grids.h). */
#include <math.h>
#include <string.h>

#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/quant_iq_grids.h"
#include "core/status.h"

int mxl_gguf_quant_supported(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_Q4_0: case MXL_DTYPE_Q4_1: case MXL_DTYPE_Q5_0: case MXL_DTYPE_Q5_1:
    case MXL_DTYPE_Q8_0: case MXL_DTYPE_Q2_K: case MXL_DTYPE_Q3_K: case MXL_DTYPE_Q4_K:
    case MXL_DTYPE_Q5_K: case MXL_DTYPE_Q6_K: case MXL_DTYPE_MXFP4: case MXL_DTYPE_TQ1_0: case MXL_DTYPE_TQ2_0:
    case MXL_DTYPE_IQ4_NL: case MXL_DTYPE_IQ4_XS:
    case MXL_DTYPE_IQ2_XXS: case MXL_DTYPE_IQ2_XS: case MXL_DTYPE_IQ2_S: case MXL_DTYPE_IQ3_XXS:
    case MXL_DTYPE_IQ3_S: case MXL_DTYPE_IQ1_S: case MXL_DTYPE_IQ1_M:
        return 1;
    default:
        return 0;
    }
}

mxl_act_kind mxl_gguf_act_kind(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_Q4_0: case MXL_DTYPE_Q4_1: case MXL_DTYPE_Q5_0: case MXL_DTYPE_Q5_1:
    case MXL_DTYPE_Q8_0: case MXL_DTYPE_MXFP4: case MXL_DTYPE_IQ4_NL:
        return MXL_ACT_Q8A;
    case MXL_DTYPE_Q2_K: case MXL_DTYPE_Q3_K: case MXL_DTYPE_Q4_K: case MXL_DTYPE_Q5_K:
    case MXL_DTYPE_Q6_K: case MXL_DTYPE_TQ1_0: case MXL_DTYPE_TQ2_0: case MXL_DTYPE_IQ4_XS:
    case MXL_DTYPE_IQ2_XXS: case MXL_DTYPE_IQ2_XS: case MXL_DTYPE_IQ2_S: case MXL_DTYPE_IQ3_XXS:
    case MXL_DTYPE_IQ3_S: case MXL_DTYPE_IQ1_S: case MXL_DTYPE_IQ1_M:
        return MXL_ACT_Q8K;
    default:
        return MXL_ACT_F32;
    }
}


static void mxfp4_vals(const mxl_block_mxfp4 *b, int *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = mxl_kvalues_mxfp4[b->qs[j] & 0xF];
        q[j + 16] = mxl_kvalues_mxfp4[b->qs[j] >> 4];
    }
}

/* IQ4_NL's 32 table values (low nibbles first); IQ4_XS's 256 (sub-block ib from qs[16 ib]). */
static void iq4nl_vals(const uint8_t *qs, int *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = mxl_kvalues_iq4nl[qs[j] & 0xF];
        q[j + 16] = mxl_kvalues_iq4nl[qs[j] >> 4];
    }
}
static void iq4xs_vals(const mxl_block_iq4_xs *b, int *q) {
    for (int ib = 0; ib < 8; ib++) iq4nl_vals(b->qs + 16 * ib, q + 32 * ib);
}

/* ---- IQ grid formats ---- */
/* 8 grid magnitudes g[j] with sign bit j of `signs` into q[0..7] */
static inline void put8(int *q, const uint8_t *g, unsigned signs) {
    for (int j = 0; j < 8; j++) q[j] = (signs >> j) & 1 ? -(int)g[j] : (int)g[j];
}
static inline void put4(int *q, const uint8_t *g, unsigned signs) {
    for (int j = 0; j < 4; j++) q[j] = (signs >> j) & 1 ? -(int)g[j] : (int)g[j];
}
/* IQ1: 8 x grid value (-1, 0, 1) + the delta's sign (+1, or -1 when neg) */
static inline void put8_iq1(int *q, const int8_t *g, int neg) {
    for (int j = 0; j < 8; j++) q[j] = 8 * g[j] + (neg ? -1 : 1);
}
static inline int nib(const uint8_t *s, int i) { return (s[i / 2] >> (4 * (i % 2))) & 0xF; }

float mxl_iq_grid_decode(mxl_dtype t, const void *blk, int *q, int *m, float *p) {
    switch (t) {
    case MXL_DTYPE_IQ2_XXS: {
        const mxl_block_iq2_xxs *b = blk;
        for (int ib = 0; ib < 8; ib++) {
            const uint32_t idx = mxl_rd_u32(b->qs + 4 * ib), aux = mxl_rd_u32(b->qs + 4 * ib + 2);
            for (int l = 0; l < 4; l++)
                put8(q + 32 * ib + 8 * l, mxl_iq2xxs_grid[(idx >> (8 * l)) & 0xFF], mxl_ksigns_iq2xs[(aux >> (7 * l)) & 127]);
            m[2 * ib] = m[2 * ib + 1] = 2 * (int)(aux >> 28) + 1;
        }
        *p = 0.125f;
        return mxl_h2f(b->d);
    }
    case MXL_DTYPE_IQ2_XS: {
        const mxl_block_iq2_xs *b = blk;
        for (int k = 0; k < 32; k++) put8(q + 8 * k, mxl_iq2xs_grid[b->qs[k] & 511], mxl_ksigns_iq2xs[b->qs[k] >> 9]);
        for (int g = 0; g < 16; g++) m[g] = 2 * nib(b->scales, g) + 1;
        *p = 0.125f;
        return mxl_h2f(b->d);
    }
    case MXL_DTYPE_IQ2_S: {
        const mxl_block_iq2_s *b = blk;
        for (int k = 0; k < 32; k++) {
            const int idx = b->qs[k] | (((b->qh[k / 4] >> (2 * (k % 4))) & 3) << 8);
            put8(q + 8 * k, mxl_iq2s_grid[idx], b->qs[32 + k]);
        }
        for (int g = 0; g < 16; g++) m[g] = 2 * nib(b->scales, g) + 1;
        *p = 0.125f;
        return mxl_h2f(b->d);
    }
    case MXL_DTYPE_IQ3_XXS: {
        const mxl_block_iq3_xxs *b = blk;
        for (int ib = 0; ib < 8; ib++) {
            const uint32_t aux = mxl_rd_u32(b->qs + 64 + 4 * ib);
            for (int l = 0; l < 4; l++) {
                const unsigned s = mxl_ksigns_iq2xs[(aux >> (7 * l)) & 127];
                put4(q + 32 * ib + 8 * l, mxl_iq3xxs_grid[b->qs[8 * ib + 2 * l]], s);
                put4(q + 32 * ib + 8 * l + 4, mxl_iq3xxs_grid[b->qs[8 * ib + 2 * l + 1]], s >> 4);
            }
            m[2 * ib] = m[2 * ib + 1] = 2 * (int)(aux >> 28) + 1;
        }
        *p = 0.25f;
        return mxl_h2f(b->d);
    }
    case MXL_DTYPE_IQ3_S: {
        const mxl_block_iq3_s *b = blk;
        for (int k = 0; k < 64; k++) {
            const int idx = b->qs[k] | (((b->qh[k / 8] >> (k % 8)) & 1) << 8);
            put4(q + 4 * k, mxl_iq3s_grid[idx], (unsigned)b->signs[k / 2] >> (4 * (k % 2)));
        }
        for (int ib = 0; ib < 8; ib++) m[2 * ib] = m[2 * ib + 1] = 1 + 2 * nib(b->scales, ib);
        *p = 1.0f;
        return mxl_h2f(b->d);
    }
    case MXL_DTYPE_IQ1_S: {
        const mxl_block_iq1_s *b = blk;
        for (int ib = 0; ib < 8; ib++) {
            const unsigned qh = b->qh[ib];
            for (int l = 0; l < 4; l++)
                put8_iq1(q + 32 * ib + 8 * l, mxl_iq1s_grid[b->qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)], qh >> 15);
            m[2 * ib] = m[2 * ib + 1] = 2 * (int)((qh >> 12) & 7) + 1;
        }
        *p = 0.125f;
        return mxl_h2f(b->d);
    }
    default: { /* IQ1_M */
        const mxl_block_iq1_m *b = blk;
        for (int k = 0; k < 32; k++) {
            const unsigned h = (b->qh[k / 2] >> (4 * (k % 2))) & 0xF;
            put8_iq1(q + 8 * k, mxl_iq1s_grid[b->qs[k] | ((h & 7) << 8)], (h >> 3) & 1);
        }
        for (int g = 0; g < 16; g++) m[g] = 2 * ((b->scales[g / 4] >> (3 * (g % 4))) & 7) + 1;
        const uint16_t dh = (uint16_t)((b->scales[0] >> 12) | ((b->scales[1] >> 8) & 0xF0) |
                                       ((b->scales[2] >> 4) & 0xF00) | (b->scales[3] & 0xF000));
        *p = 0.125f;
        return mxl_h2f(dh);
    }
    }
}

static int is_iq_grid(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_IQ2_XXS: case MXL_DTYPE_IQ2_XS: case MXL_DTYPE_IQ2_S: case MXL_DTYPE_IQ3_XXS:
    case MXL_DTYPE_IQ3_S: case MXL_DTYPE_IQ1_S: case MXL_DTYPE_IQ1_M:
        return 1;
    default:
        return 0;
    }
}

/* Quantized values of one block as small ints, shared by dequant and the dots. */
static void q4_0_vals(const mxl_block_q4_0 *b, int *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = (b->qs[j] & 0xF) - 8;
        q[j + 16] = (b->qs[j] >> 4) - 8;
    }
}
static void q4_1_vals(const mxl_block_q4_1 *b, int *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = b->qs[j] & 0xF;
        q[j + 16] = b->qs[j] >> 4;
    }
}
static void q5_vals(const uint8_t *qh4, const uint8_t *qs, int offset, int *q) {
    uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 |
                  (uint32_t)qh4[3] << 24;
    for (int j = 0; j < 16; j++) {
        q[j] = (int)((qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - offset;
        q[j + 16] = (int)((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - offset;
    }
}
static void q2_k_vals(const mxl_block_q2_k *b, int *q) {
    for (int e = 0; e < 256; e++) q[e] = mxl_k2bits(b->qs, e);
}
static void q4_k_vals(const mxl_block_q4_k *b, int *q) {
    for (int e = 0; e < 256; e++) {
        int j = e / 32;
        q[e] = (b->qs[(j / 2) * 32 + e % 32] >> (4 * (j % 2))) & 0xF;
    }
}
static void q5_k_vals(const mxl_block_q5_k *b, int *q) {
    for (int e = 0; e < 256; e++) {
        int j = e / 32;
        int lo = (b->qs[(j / 2) * 32 + e % 32] >> (4 * (j % 2))) & 0xF;
        q[e] = lo | (((b->qh[e % 32] >> j) & 1) << 4);
    }
}
void mxl_dequant_row_ref(mxl_dtype t, const void *src, float *y, int64_t n) {
    int q[256];
    switch (t) {
    case MXL_DTYPE_F32:
        memcpy(y, src, (size_t)n * 4);
        return;
    case MXL_DTYPE_F16:
    case MXL_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) y[i] = mxl_dense_elem(t, src, i);
        return;
    case MXL_DTYPE_Q4_0: {
        const mxl_block_q4_0 *b = src;
        for (int64_t i = 0; i < n / 32; i++, y += 32) {
            float d = mxl_h2f(b[i].d);
            q4_0_vals(&b[i], q);
            for (int j = 0; j < 32; j++) y[j] = d * (float)q[j];
        }
        return;
    }
    case MXL_DTYPE_Q4_1: {
        const mxl_block_q4_1 *b = src;
        for (int64_t i = 0; i < n / 32; i++, y += 32) {
            float d = mxl_h2f(b[i].d), m = mxl_h2f(b[i].m);
            q4_1_vals(&b[i], q);
            for (int j = 0; j < 32; j++) {
                float prod = d * (float)q[j];
                y[j] = prod + m;
            }
        }
        return;
    }
    case MXL_DTYPE_Q5_0: {
        const mxl_block_q5_0 *b = src;
        for (int64_t i = 0; i < n / 32; i++, y += 32) {
            float d = mxl_h2f(b[i].d);
            q5_vals(b[i].qh, b[i].qs, 16, q);
            for (int j = 0; j < 32; j++) y[j] = d * (float)q[j];
        }
        return;
    }
    case MXL_DTYPE_Q5_1: {
        const mxl_block_q5_1 *b = src;
        for (int64_t i = 0; i < n / 32; i++, y += 32) {
            float d = mxl_h2f(b[i].d), m = mxl_h2f(b[i].m);
            q5_vals(b[i].qh, b[i].qs, 0, q);
            for (int j = 0; j < 32; j++) {
                float prod = d * (float)q[j];
                y[j] = prod + m;
            }
        }
        return;
    }
    case MXL_DTYPE_Q8_0: {
        const mxl_block_q8_0 *b = src;
        for (int64_t i = 0; i < n / 32; i++, y += 32) {
            float d = mxl_h2f(b[i].d);
            for (int j = 0; j < 32; j++) y[j] = (float)b[i].qs[j] * d;
        }
        return;
    }
    case MXL_DTYPE_TQ1_0: case MXL_DTYPE_TQ2_0: {
        const size_t bb = t == MXL_DTYPE_TQ1_0 ? sizeof(mxl_block_tq1_0) : sizeof(mxl_block_tq2_0);
        for (int64_t i = 0; i < n / 256; i++, y += 256) {
            const void *blk = (const uint8_t *)src + (size_t)i * bb;
            float d;
            if (t == MXL_DTYPE_TQ1_0) mxl_tq1_0_codes(blk, q), d = mxl_h2f(((const mxl_block_tq1_0 *)blk)->d);
            else mxl_tq2_0_codes(blk, q), d = mxl_h2f(((const mxl_block_tq2_0 *)blk)->d);
            for (int j = 0; j < 256; j++) y[j] = d * (float)q[j];
        }
        return;
    }
    case MXL_DTYPE_MXFP4: {
        const mxl_block_mxfp4 *b = src;
        for (int64_t i = 0; i < n / 32; i++, y += 32) {
            const float d = mxl_e8m0_half(b[i].e);
            mxfp4_vals(&b[i], q);
            for (int j = 0; j < 32; j++) y[j] = d * (float)q[j];
        }
        return;
    }
    case MXL_DTYPE_IQ4_NL: {
        const mxl_block_iq4_nl *b = src;
        for (int64_t i = 0; i < n / 32; i++, y += 32) {
            const float d = mxl_h2f(b[i].d);
            iq4nl_vals(b[i].qs, q);
            for (int j = 0; j < 32; j++) y[j] = d * (float)q[j];
        }
        return;
    }
    case MXL_DTYPE_IQ4_XS: {
        const mxl_block_iq4_xs *b = src;
        for (int64_t i = 0; i < n / 256; i++, y += 256) {
            const float d = mxl_h2f(b[i].d);
            iq4xs_vals(&b[i], q);
            for (int ib = 0; ib < 8; ib++) {
                const float dl = d * (float)mxl_iq4xs_scale(&b[i], ib);
                for (int j = 0; j < 32; j++) y[32 * ib + j] = dl * (float)q[32 * ib + j];
            }
        }
        return;
    }
    case MXL_DTYPE_Q2_K: {
        const mxl_block_q2_k *b = src;
        for (int64_t i = 0; i < n / 256; i++, y += 256) {
            float d = mxl_h2f(b[i].d), dmin = mxl_h2f(b[i].dmin);
            q2_k_vals(&b[i], q);
            for (int e = 0; e < 256; e++) {
                uint8_t sc = b[i].scales[e / 16];
                float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
                float prod = dl * (float)q[e];
                y[e] = prod - ml;
            }
        }
        return;
    }
    case MXL_DTYPE_Q3_K: {
        const mxl_block_q3_k *b = src;
        for (int64_t i = 0; i < n / 256; i++, y += 256) {
            float d = mxl_h2f(b[i].d);
            mxl_q3k_codes(&b[i], q);
            for (int e = 0; e < 256; e++) {
                float dl = d * (float)mxl_q3k_scale(b[i].scales, e / 16);
                y[e] = dl * (float)q[e];
            }
        }
        return;
    }
    case MXL_DTYPE_Q4_K: {
        const mxl_block_q4_k *b = src;
        for (int64_t i = 0; i < n / 256; i++, y += 256) {
            float d = mxl_h2f(b[i].d), dmin = mxl_h2f(b[i].dmin);
            q4_k_vals(&b[i], q);
            for (int j = 0; j < 8; j++) {
                uint8_t sc, m;
                mxl_q4k_scale_min(j, b[i].scales, &sc, &m);
                float d1 = d * (float)sc, m1 = dmin * (float)m;
                for (int l = 0; l < 32; l++) {
                    float prod = d1 * (float)q[j * 32 + l];
                    y[j * 32 + l] = prod - m1;
                }
            }
        }
        return;
    }
    case MXL_DTYPE_Q5_K: {
        const mxl_block_q5_k *b = src;
        for (int64_t i = 0; i < n / 256; i++, y += 256) {
            float d = mxl_h2f(b[i].d), dmin = mxl_h2f(b[i].dmin);
            q5_k_vals(&b[i], q);
            for (int j = 0; j < 8; j++) {
                uint8_t sc, m;
                mxl_q4k_scale_min(j, b[i].scales, &sc, &m);
                float d1 = d * (float)sc, m1 = dmin * (float)m;
                for (int l = 0; l < 32; l++) {
                    float prod = d1 * (float)q[j * 32 + l];
                    y[j * 32 + l] = prod - m1;
                }
            }
        }
        return;
    }
    case MXL_DTYPE_Q6_K: {
        const mxl_block_q6_k *b = src;
        for (int64_t i = 0; i < n / 256; i++, y += 256) {
            float d = mxl_h2f(b[i].d);
            mxl_q6k_codes(&b[i], q);
            for (int e = 0; e < 256; e++) {
                float dl = d * (float)b[i].scales[e / 16];
                y[e] = dl * (float)q[e];
            }
        }
        return;
    }
    case MXL_DTYPE_IQ2_XXS: case MXL_DTYPE_IQ2_XS: case MXL_DTYPE_IQ2_S: case MXL_DTYPE_IQ3_XXS:
    case MXL_DTYPE_IQ3_S: case MXL_DTYPE_IQ1_S: case MXL_DTYPE_IQ1_M: {
        const size_t bb = mxl_dtype_get_info(t)->block_bytes;
        int m[16];
        for (int64_t i = 0; i < n / 256; i++, y += 256) {
            float p;
            const float d = mxl_iq_grid_decode(t, (const uint8_t *)src + (size_t)i * bb, q, m, &p);
            for (int g = 0; g < 16; g++) {
                const float dl = (d * (float)m[g]) * p;
                for (int j = 0; j < 16; j++) y[16 * g + j] = dl * (float)q[16 * g + j];
            }
        }
        return;
    }
    default:
        MXL_ASSERT(!"mxl_dequant_row_ref: unsupported dtype");
    }
}

float mxl_kq_combine(float d, float dmin, float xd, int sumi, int summ) {
    float a = d * xd;
    a = a * (float)sumi;
    float b = dmin * xd;
    b = b * (float)summ;
    return a - b;
}

/* Round to nearest, ties to even (what _mm256_round_ps / cvtps does), so the SIMD quantizers can
 * reproduce the reference exactly. */
static inline int round_even(float v) { return (int)nearbyintf(v); }

void mxl_quant_q8a_ref(const float *x, mxl_block_q8a *y, int64_t n) {
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            int v = round_even(x[j] * id);
            y[i].qs[j] = (int8_t)v;
            sum += v;
        }
        y[i].d = d;
        y[i].s = d * (float)sum;
    }
}

void mxl_quant_q8a2_ref(const float *x, mxl_block_q8a2 *y, int64_t n) {
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        float d2 = d * MXL_Q8A2_STEP2, id2 = id * (1.0f / MXL_Q8A2_STEP2); /* exact: a power of two */
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            int v = round_even(x[j] * id2);            /* |v| <= 127 * 256 */
            int hi = (v + 128 + 256 * 128) / 256 - 128; /* floor((v + 128) / 256): -127..127 */
            y[i].qs[j] = (int8_t)hi;
            y[i].qs2[j] = (int8_t)(v - 256 * hi); /* -128..127 */
            sum += v;
        }
        y[i].d = d;
        y[i].d2 = d2;
        y[i].s = d2 * (float)sum; /* exact sum: |sum| < 2^20 */
        y[i].sum = sum;
    }
}

void mxl_quant_q8k_ref(const float *x, mxl_block_q8k *y, int64_t n) {
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 256; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -127.0f / max;
        for (int j = 0; j < 256; j++) {
            int v = round_even(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[i].qs[j * 16 + l];
            y[i].bsums[j] = (int16_t)s;
        }
        y[i].d = 1.0f / iscale;
    }
}

static float dot_32(mxl_dtype t, int64_t n, const void *w, const mxl_block_q8a *x) {
    int q[32];
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        float d, m = 0.0f;
        switch (t) {
        case MXL_DTYPE_Q4_0: {
            const mxl_block_q4_0 *b = (const mxl_block_q4_0 *)w + i;
            d = mxl_h2f(b->d);
            q4_0_vals(b, q);
            break;
        }
        case MXL_DTYPE_Q4_1: {
            const mxl_block_q4_1 *b = (const mxl_block_q4_1 *)w + i;
            d = mxl_h2f(b->d);
            m = mxl_h2f(b->m);
            q4_1_vals(b, q);
            break;
        }
        case MXL_DTYPE_Q5_0: {
            const mxl_block_q5_0 *b = (const mxl_block_q5_0 *)w + i;
            d = mxl_h2f(b->d);
            q5_vals(b->qh, b->qs, 16, q);
            break;
        }
        case MXL_DTYPE_Q5_1: {
            const mxl_block_q5_1 *b = (const mxl_block_q5_1 *)w + i;
            d = mxl_h2f(b->d);
            m = mxl_h2f(b->m);
            q5_vals(b->qh, b->qs, 0, q);
            break;
        }
        case MXL_DTYPE_MXFP4: {
            const mxl_block_mxfp4 *b = (const mxl_block_mxfp4 *)w + i;
            d = mxl_e8m0_half(b->e);
            mxfp4_vals(b, q);
            break;
        }
        case MXL_DTYPE_IQ4_NL: {
            const mxl_block_iq4_nl *b = (const mxl_block_iq4_nl *)w + i;
            d = mxl_h2f(b->d);
            iq4nl_vals(b->qs, q);
            break;
        }
        default: { /* Q8_0 */
            const mxl_block_q8_0 *b = (const mxl_block_q8_0 *)w + i;
            d = mxl_h2f(b->d);
            for (int j = 0; j < 32; j++) q[j] = b->qs[j];
            break;
        }
        }
        int sumi = 0;
        for (int j = 0; j < 32; j++) sumi += q[j] * x[i].qs[j];
        float a = d * x[i].d * (float)sumi, b = m * x[i].s;
        acc += a + b;
    }
    return acc;
}

/* TQ1_0 / TQ2_0 against q8k (ggml's vec_dot_tq*_q8_K): the block's exact integer sum, then
 * sum * (d * xd). */
static float dot_tq(mxl_dtype t, int64_t n, const void *w, const mxl_block_q8k *x) {
    int q[256];
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        float d;
        if (t == MXL_DTYPE_TQ1_0) {
            const mxl_block_tq1_0 *b = (const mxl_block_tq1_0 *)w + i;
            mxl_tq1_0_codes(b, q), d = mxl_h2f(b->d);
        } else {
            const mxl_block_tq2_0 *b = (const mxl_block_tq2_0 *)w + i;
            mxl_tq2_0_codes(b, q), d = mxl_h2f(b->d);
        }
        int sumi = 0;
        for (int j = 0; j < 256; j++) sumi += q[j] * x[i].qs[j];
        acc += (float)sumi * (d * x[i].d);
    }
    return acc;
}

/* IQ4_XS against q8k: sumi = sum over sub-blocks of (ls - 32) * (values . x), exact in int32,
 * then mxl_kq_combine(d, 0, xd, sumi, 0) as the K-quants without a min. */
static float dot_iq4_xs(int64_t n, const void *w, const mxl_block_q8k *x) {
    int q[256];
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        const mxl_block_iq4_xs *b = (const mxl_block_iq4_xs *)w + i;
        iq4xs_vals(b, q);
        int sumi = 0;
        for (int ib = 0; ib < 8; ib++) {
            int isum = 0;
            for (int l = 0; l < 32; l++) isum += q[32 * ib + l] * x[i].qs[32 * ib + l];
            sumi += mxl_iq4xs_scale(b, ib) * isum;
        }
        acc += mxl_kq_combine(mxl_h2f(b->d), 0.0f, x[i].d, sumi, 0);
    }
    return acc;
}

/* IQ grid formats against q8k: sumi = sum over 16-element groups of m * (codes . x), exact in
 * int32 (|sumi| < 2^26 for every format), then p * mxl_kq_combine(d, 0, xd, sumi, 0). */
static float dot_iq_grid(mxl_dtype t, int64_t n, const void *w, const mxl_block_q8k *x) {
    const size_t bb = mxl_dtype_get_info(t)->block_bytes;
    int q[256], m[16];
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        float p;
        const float d = mxl_iq_grid_decode(t, (const uint8_t *)w + (size_t)i * bb, q, m, &p);
        int sumi = 0;
        for (int g = 0; g < 16; g++) {
            int isum = 0;
            for (int l = 0; l < 16; l++) isum += q[16 * g + l] * x[i].qs[16 * g + l];
            sumi += m[g] * isum;
        }
        acc += p * mxl_kq_combine(d, 0.0f, x[i].d, sumi, 0);
    }
    return acc;
}

static float dot_k(mxl_dtype t, int64_t n, const void *w, const mxl_block_q8k *x) {
    int q[256];
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *qx = x[i].qs;
        switch (t) {
        case MXL_DTYPE_Q2_K: {
            const mxl_block_q2_k *b = (const mxl_block_q2_k *)w + i;
            q2_k_vals(b, q);
            int sumi = 0, summ = 0;
            for (int j = 0; j < 16; j++) {
                int isum = 0;
                for (int l = 0; l < 16; l++) isum += q[j * 16 + l] * qx[j * 16 + l];
                sumi += (b->scales[j] & 0xF) * isum;
                summ += (b->scales[j] >> 4) * x[i].bsums[j];
            }
            acc += mxl_kq_combine(mxl_h2f(b->d), mxl_h2f(b->dmin), x[i].d, sumi, summ);
            break;
        }
        case MXL_DTYPE_Q3_K: {
            const mxl_block_q3_k *b = (const mxl_block_q3_k *)w + i;
            mxl_q3k_codes(b, q);
            int sumi = 0;
            for (int j = 0; j < 16; j++) {
                int isum = 0;
                for (int l = 0; l < 16; l++) isum += q[j * 16 + l] * qx[j * 16 + l];
                sumi += mxl_q3k_scale(b->scales, j) * isum;
            }
            acc += mxl_kq_combine(mxl_h2f(b->d), 0.0f, x[i].d, sumi, 0);
            break;
        }
        case MXL_DTYPE_Q4_K:
        case MXL_DTYPE_Q5_K: {
            const uint8_t *scales;
            float d, dmin;
            if (t == MXL_DTYPE_Q4_K) {
                const mxl_block_q4_k *b = (const mxl_block_q4_k *)w + i;
                q4_k_vals(b, q);
                scales = b->scales;
                d = mxl_h2f(b->d);
                dmin = mxl_h2f(b->dmin);
            } else {
                const mxl_block_q5_k *b = (const mxl_block_q5_k *)w + i;
                q5_k_vals(b, q);
                scales = b->scales;
                d = mxl_h2f(b->d);
                dmin = mxl_h2f(b->dmin);
            }
            int sumi = 0, summ = 0;
            for (int j = 0; j < 8; j++) {
                uint8_t sc, m;
                mxl_q4k_scale_min(j, scales, &sc, &m);
                int isum = 0;
                for (int l = 0; l < 32; l++) isum += q[j * 32 + l] * qx[j * 32 + l];
                sumi += sc * isum;
                summ += m * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
            }
            acc += mxl_kq_combine(d, dmin, x[i].d, sumi, summ);
            break;
        }
        default: { /* Q6_K */
            const mxl_block_q6_k *b = (const mxl_block_q6_k *)w + i;
            mxl_q6k_codes(b, q);
            int sumi = 0;
            for (int j = 0; j < 16; j++) {
                int isum = 0;
                for (int l = 0; l < 16; l++) isum += q[j * 16 + l] * qx[j * 16 + l];
                sumi += b->scales[j] * isum;
            }
            acc += mxl_kq_combine(mxl_h2f(b->d), 0.0f, x[i].d, sumi, 0);
            break;
        }
        }
    }
    return acc;
}

float mxl_vec_dot_ref(mxl_dtype t, int64_t n, const void *w, const void *xq) {
    MXL_ASSERT(mxl_gguf_quant_supported(t));
    if (mxl_gguf_act_kind(t) == MXL_ACT_Q8A) return dot_32(t, n, w, xq);
    if (t == MXL_DTYPE_TQ1_0 || t == MXL_DTYPE_TQ2_0) return dot_tq(t, n, w, xq);
    if (t == MXL_DTYPE_IQ4_XS) return dot_iq4_xs(n, w, xq);
    if (is_iq_grid(t)) return dot_iq_grid(t, n, w, xq);
    return dot_k(t, n, w, xq);
}
