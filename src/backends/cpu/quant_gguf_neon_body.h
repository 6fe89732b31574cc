/* quant_gguf_neon_body.h - the NEON fused dots of quant_gguf_neon.c, written once and included
 * twice by that file: once with DOT16 = widening multiply + pairwise add (baseline AdvSIMD), once
 * with DOT16 = SDOT (ARMv8.2 dot-product extension, compiled under a target attribute so the
 * file needs no -march). Not a public header: only quant_gguf_neon.c includes it, with
 *   NEON_FN(name)  the function name for this variant,
 *   NEON_TARGET    the variant's function attribute (empty or the dotprod target),
 *   DOT16(acc,a,b) acc (int32x4) + the 16 products a[i]*b[i] (int8x16 each) summed in groups of 4.
 *
 * Every block's integer sum is exact (int8 x int8 products, int32 sums) and the f32 combination
 * per block repeats the reference's statements in the reference's order (quant_gguf_ref.c; the
 * K-quants through mxl_kq_combine), so each dot is bit-identical to mxl_vec_dot_ref. */

/* Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / MXFP4 / IQ4_NL against q8a: per block float a = d*xd*sumi, b = m*xs. */
NEON_TARGET static float NEON_FN(dot_q4_0)(int64_t n, const void *w, const void *xq) {
    const mxl_block_q4_0 *b = w;
    const mxl_block_q8a *x = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int8x16_t lo, hi;
        nib_lo_hi(b[i].qs, &lo, &hi);
        lo = vsubq_s8(lo, vdupq_n_s8(8));
        hi = vsubq_s8(hi, vdupq_n_s8(8));
        int32x4_t s = DOT16(vdupq_n_s32(0), lo, vld1q_s8(x[i].qs));
        s = DOT16(s, hi, vld1q_s8(x[i].qs + 16));
        acc += block_f32(mxl_h2f(b[i].d), 0.0f, &x[i], vaddvq_s32(s));
    }
    return acc;
}

/* The integer dot of a block's 32 nibble codes (16 bytes: low nibbles first) looked up in a
 * 16-entry int8 table (TBL) with one q8a block: MXFP4's and IQ4_NL's */
NEON_TARGET static inline int32_t NEON_FN(table_dot32)(int8x16_t lut, const uint8_t *qs, const mxl_block_q8a *x) {
    int8x16_t lo, hi;
    nib_lo_hi(qs, &lo, &hi);
    lo = vqtbl1q_s8(lut, vreinterpretq_u8_s8(lo));
    hi = vqtbl1q_s8(lut, vreinterpretq_u8_s8(hi));
    int32x4_t s = DOT16(vdupq_n_s32(0), lo, vld1q_s8(x->qs));
    s = DOT16(s, hi, vld1q_s8(x->qs + 16));
    return vaddvq_s32(s);
}

/* MXFP4: the nibbles looked up in the doubled E2M1 table, the block scale halved E8M0 */
NEON_TARGET static float NEON_FN(dot_mxfp4)(int64_t n, const void *w, const void *xq) {
    const mxl_block_mxfp4 *b = w;
    const mxl_block_q8a *x = xq;
    const int8x16_t lut = vld1q_s8(mxl_kvalues_mxfp4);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) acc += block_f32(mxl_e8m0_half(b[i].e), 0.0f, &x[i], NEON_FN(table_dot32)(lut, b[i].qs, &x[i]));
    return acc;
}

/* IQ4_NL: the nibbles looked up in kvalues_iq4nl, then Q4_0's block expression */
NEON_TARGET static float NEON_FN(dot_iq4_nl)(int64_t n, const void *w, const void *xq) {
    const mxl_block_iq4_nl *b = w;
    const mxl_block_q8a *x = xq;
    const int8x16_t lut = vld1q_s8(mxl_kvalues_iq4nl);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) acc += block_f32(mxl_h2f(b[i].d), 0.0f, &x[i], NEON_FN(table_dot32)(lut, b[i].qs, &x[i]));
    return acc;
}

/* IQ4_XS against q8k: per sub-block the table codes' dot times ls - 32, summed exactly in int32,
 * one mxl_kq_combine per super-block */
NEON_TARGET static float NEON_FN(dot_iq4_xs)(int64_t n, const void *w, const void *xq) {
    const mxl_block_iq4_xs *b = w;
    const mxl_block_q8k *x = xq;
    const int8x16_t lut = vld1q_s8(mxl_kvalues_iq4nl);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        int32x4_t sumv = vdupq_n_s32(0);
        for (int ib = 0; ib < 8; ib++) {
            int8x16_t lo, hi;
            nib_lo_hi(b[i].qs + 16 * ib, &lo, &hi);
            lo = vqtbl1q_s8(lut, vreinterpretq_u8_s8(lo));
            hi = vqtbl1q_s8(lut, vreinterpretq_u8_s8(hi));
            int32x4_t s = DOT16(vdupq_n_s32(0), lo, vld1q_s8(x[i].qs + 32 * ib));
            s = DOT16(s, hi, vld1q_s8(x[i].qs + 32 * ib + 16));
            sumv = vmlaq_n_s32(sumv, s, mxl_iq4xs_scale(&b[i], ib));
        }
        acc += mxl_kq_combine(mxl_h2f(b[i].d), 0.0f, x[i].d, vaddvq_s32(sumv), 0);
    }
    return acc;
}

NEON_TARGET static float NEON_FN(dot_q4_1)(int64_t n, const void *w, const void *xq) {
    const mxl_block_q4_1 *b = w;
    const mxl_block_q8a *x = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int8x16_t lo, hi;
        nib_lo_hi(b[i].qs, &lo, &hi);
        int32x4_t s = DOT16(vdupq_n_s32(0), lo, vld1q_s8(x[i].qs));
        s = DOT16(s, hi, vld1q_s8(x[i].qs + 16));
        acc += block_f32(mxl_h2f(b[i].d), mxl_h2f(b[i].m), &x[i], vaddvq_s32(s));
    }
    return acc;
}

NEON_TARGET static float NEON_FN(dot_q5_0)(int64_t n, const void *w, const void *xq) {
    const mxl_block_q5_0 *b = w;
    const mxl_block_q8a *x = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int8x16_t lo, hi;
        q5_codes(b[i].qs, b[i].qh, 16, &lo, &hi);
        int32x4_t s = DOT16(vdupq_n_s32(0), lo, vld1q_s8(x[i].qs));
        s = DOT16(s, hi, vld1q_s8(x[i].qs + 16));
        acc += block_f32(mxl_h2f(b[i].d), 0.0f, &x[i], vaddvq_s32(s));
    }
    return acc;
}

NEON_TARGET static float NEON_FN(dot_q5_1)(int64_t n, const void *w, const void *xq) {
    const mxl_block_q5_1 *b = w;
    const mxl_block_q8a *x = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int8x16_t lo, hi;
        q5_codes(b[i].qs, b[i].qh, 0, &lo, &hi);
        int32x4_t s = DOT16(vdupq_n_s32(0), lo, vld1q_s8(x[i].qs));
        s = DOT16(s, hi, vld1q_s8(x[i].qs + 16));
        acc += block_f32(mxl_h2f(b[i].d), mxl_h2f(b[i].m), &x[i], vaddvq_s32(s));
    }
    return acc;
}

NEON_TARGET static float NEON_FN(dot_q8_0)(int64_t n, const void *w, const void *xq) {
    const mxl_block_q8_0 *b = w;
    const mxl_block_q8a *x = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int32x4_t s = DOT16(vdupq_n_s32(0), vld1q_s8(b[i].qs), vld1q_s8(x[i].qs));
        s = DOT16(s, vld1q_s8(b[i].qs + 16), vld1q_s8(x[i].qs + 16));
        acc += block_f32(mxl_h2f(b[i].d), 0.0f, &x[i], vaddvq_s32(s));
    }
    return acc;
}

/* K-quants: sumi = sum_j scale_j * (sub-block j's integer dot), formed lane-wise in int32 (exact)
 * and reduced once; summ from the activation's partial sums; then mxl_kq_combine. */
NEON_TARGET static float NEON_FN(dot_q2_k)(int64_t n, const void *w, const void *xq) {
    const mxl_block_q8k *x = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        const mxl_block_q2_k *b = (const mxl_block_q2_k *)w + i;
        const int8_t *qx = x[i].qs;
        int32x4_t sumv = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            /* element h*128 + s*32 + l is bits 2s..2s+1 of qs[h*32 + l]; sub-block h*8 + 2s + l/16 */
            uint8x16_t q0 = vld1q_u8(b->qs + 32 * h), q1 = vld1q_u8(b->qs + 32 * h + 16);
            for (int s = 0; s < 4; s++) {
                int j = h * 8 + 2 * s;
                const int8_t *xs = qx + h * 128 + s * 32;
                int8x16_t c0 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q0, vdupq_n_s8((int8_t)(-2 * s))), vdupq_n_u8(3)));
                int8x16_t c1 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q1, vdupq_n_s8((int8_t)(-2 * s))), vdupq_n_u8(3)));
                sumv = vmlaq_n_s32(sumv, DOT16(vdupq_n_s32(0), c0, vld1q_s8(xs)), b->scales[j] & 0xF);
                sumv = vmlaq_n_s32(sumv, DOT16(vdupq_n_s32(0), c1, vld1q_s8(xs + 16)), b->scales[j + 1] & 0xF);
            }
        }
        int summ = 0;
        for (int j = 0; j < 16; j++) summ += (b->scales[j] >> 4) * x[i].bsums[j];
        acc += mxl_kq_combine(mxl_h2f(b->d), mxl_h2f(b->dmin), x[i].d, vaddvq_s32(sumv), summ);
    }
    return acc;
}

NEON_TARGET static float NEON_FN(dot_q3_k)(int64_t n, const void *w, const void *xq) {
    const mxl_block_q8k *x = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        const mxl_block_q3_k *b = (const mxl_block_q3_k *)w + i;
        const int8_t *qx = x[i].qs;
        int sc[16];
        q3k_scales(b->scales, sc);
        uint8x16_t m0 = vld1q_u8(b->hmask), m1 = vld1q_u8(b->hmask + 16);
        int32x4_t sumv = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            uint8x16_t q0 = vld1q_u8(b->qs + 32 * h), q1 = vld1q_u8(b->qs + 32 * h + 16);
            for (int s = 0; s < 4; s++) {
                int j = h * 8 + 2 * s;
                const int8_t *xs = qx + h * 128 + s * 32;
                /* low 2 bits as above; minus 4 where bit (h*4 + s) of hmask[l] is clear */
                uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (h * 4 + s)));
                uint8x16_t four = vdupq_n_u8(4);
                uint8x16_t l0 = vandq_u8(vshlq_u8(q0, vdupq_n_s8((int8_t)(-2 * s))), vdupq_n_u8(3));
                uint8x16_t l1 = vandq_u8(vshlq_u8(q1, vdupq_n_s8((int8_t)(-2 * s))), vdupq_n_u8(3));
                int8x16_t c0 = vreinterpretq_s8_u8(vsubq_u8(l0, vbicq_u8(four, vtstq_u8(m0, bit))));
                int8x16_t c1 = vreinterpretq_s8_u8(vsubq_u8(l1, vbicq_u8(four, vtstq_u8(m1, bit))));
                sumv = vmlaq_n_s32(sumv, DOT16(vdupq_n_s32(0), c0, vld1q_s8(xs)), sc[j]);
                sumv = vmlaq_n_s32(sumv, DOT16(vdupq_n_s32(0), c1, vld1q_s8(xs + 16)), sc[j + 1]);
            }
        }
        acc += mxl_kq_combine(mxl_h2f(b->d), 0.0f, x[i].d, vaddvq_s32(sumv), 0);
    }
    return acc;
}

/* Q4_K (qh NULL) and Q5_K: sub-block j (32 elements) is nibble j%2 of qs[(j/2)*32 + l], plus bit j
 * of qh[l] as the fifth bit for Q5_K. */
NEON_TARGET static inline float NEON_FN(dot_q45_k)(int64_t n, const void *w, const void *xq, int five) {
    const mxl_block_q8k *x = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *scales, *qs, *qh = NULL;
        float d, dmin;
        if (five) {
            const mxl_block_q5_k *b = (const mxl_block_q5_k *)w + i;
            scales = b->scales, qs = b->qs, qh = b->qh, d = mxl_h2f(b->d), dmin = mxl_h2f(b->dmin);
        } else {
            const mxl_block_q4_k *b = (const mxl_block_q4_k *)w + i;
            scales = b->scales, qs = b->qs, d = mxl_h2f(b->d), dmin = mxl_h2f(b->dmin);
        }
        const int8_t *qx = x[i].qs;
        uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
        if (five) h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
        int32x4_t sumv = vdupq_n_s32(0);
        int summ = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            mxl_q4k_scale_min(j, scales, &sc, &m);
            uint8x16_t v0 = vld1q_u8(qs + (j / 2) * 32), v1 = vld1q_u8(qs + (j / 2) * 32 + 16);
            uint8x16_t c0 = j % 2 ? vshrq_n_u8(v0, 4) : vandq_u8(v0, vdupq_n_u8(0xF));
            uint8x16_t c1 = j % 2 ? vshrq_n_u8(v1, 4) : vandq_u8(v1, vdupq_n_u8(0xF));
            if (five) {
                uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << j));
                c0 = vorrq_u8(c0, vandq_u8(vtstq_u8(h0, bit), vdupq_n_u8(16)));
                c1 = vorrq_u8(c1, vandq_u8(vtstq_u8(h1, bit), vdupq_n_u8(16)));
            }
            int32x4_t s = DOT16(vdupq_n_s32(0), vreinterpretq_s8_u8(c0), vld1q_s8(qx + 32 * j));
            s = DOT16(s, vreinterpretq_s8_u8(c1), vld1q_s8(qx + 32 * j + 16));
            sumv = vmlaq_n_s32(sumv, s, sc);
            summ += m * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
        }
        acc += mxl_kq_combine(d, dmin, x[i].d, vaddvq_s32(sumv), summ);
    }
    return acc;
}
NEON_TARGET static float NEON_FN(dot_q4_k)(int64_t n, const void *w, const void *xq) {
    return NEON_FN(dot_q45_k)(n, w, xq, 0);
}
NEON_TARGET static float NEON_FN(dot_q5_k)(int64_t n, const void *w, const void *xq) {
    return NEON_FN(dot_q45_k)(n, w, xq, 1);
}

/* Q6_K: element h*128 + k*32 + l = (nibble k/2 of ql[h*64 + (k%2)*32 + l]) | (bits 2k..2k+1 of
 * qh[h*32 + l]) << 4, minus 32; sub-block (16 elements) h*8 + 2k + l/16 with a signed scale. */
NEON_TARGET static float NEON_FN(dot_q6_k)(int64_t n, const void *w, const void *xq) {
    const mxl_block_q8k *x = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        const mxl_block_q6_k *b = (const mxl_block_q6_k *)w + i;
        const int8_t *qx = x[i].qs;
        int32x4_t sumv = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            uint8x16_t qh0 = vld1q_u8(b->qh + 32 * h), qh1 = vld1q_u8(b->qh + 32 * h + 16);
            for (int k = 0; k < 4; k++) {
                const uint8_t *ql = b->ql + h * 64 + (k % 2) * 32;
                uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16);
                l0 = k / 2 ? vshrq_n_u8(l0, 4) : vandq_u8(l0, vdupq_n_u8(0xF));
                l1 = k / 2 ? vshrq_n_u8(l1, 4) : vandq_u8(l1, vdupq_n_u8(0xF));
                uint8x16_t hb0 = vandq_u8(vshlq_u8(qh0, vdupq_n_s8((int8_t)(-2 * k))), vdupq_n_u8(3));
                uint8x16_t hb1 = vandq_u8(vshlq_u8(qh1, vdupq_n_s8((int8_t)(-2 * k))), vdupq_n_u8(3));
                int8x16_t c0 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l0, vshlq_n_u8(hb0, 4))), vdupq_n_s8(32));
                int8x16_t c1 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l1, vshlq_n_u8(hb1, 4))), vdupq_n_s8(32));
                int j = h * 8 + 2 * k;
                const int8_t *xs = qx + h * 128 + k * 32;
                sumv = vmlaq_n_s32(sumv, DOT16(vdupq_n_s32(0), c0, vld1q_s8(xs)), b->scales[j]);
                sumv = vmlaq_n_s32(sumv, DOT16(vdupq_n_s32(0), c1, vld1q_s8(xs + 16)), b->scales[j + 1]);
            }
        }
        acc += mxl_kq_combine(mxl_h2f(b->d), 0.0f, x[i].d, vaddvq_s32(sumv), 0);
    }
    return acc;
}

/* IQ grid formats against q8k: the sub-block's signed codes (iq_codes32) dotted with x, each
 * half times its multiplier, exact in int32; p * mxl_kq_combine per super-block. */
NEON_TARGET static inline float NEON_FN(dot_iq_grid)(mxl_dtype t, int64_t n, const void *w, const void *xq) {
    const mxl_block_q8k *x = xq;
    const size_t bb = mxl_dtype_get_info(t)->block_bytes;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        const void *blk = (const uint8_t *)w + (size_t)i * bb;
        int32x4_t sumv = vdupq_n_s32(0);
        for (int ib = 0; ib < 8; ib++) {
            int8x16_t lo, hi;
            int m0, m1;
            iq_codes32(t, blk, ib, &lo, &hi, &m0, &m1);
            sumv = vmlaq_n_s32(sumv, DOT16(vdupq_n_s32(0), lo, vld1q_s8(x[i].qs + 32 * ib)), m0);
            sumv = vmlaq_n_s32(sumv, DOT16(vdupq_n_s32(0), hi, vld1q_s8(x[i].qs + 32 * ib + 16)), m1);
        }
        float p;
        const float d = iq_d(t, blk, &p);
        acc += p * mxl_kq_combine(d, 0.0f, x[i].d, vaddvq_s32(sumv), 0);
    }
    return acc;
}
NEON_TARGET static float NEON_FN(dot_iq2_xxs)(int64_t n, const void *w, const void *x) { return NEON_FN(dot_iq_grid)(MXL_DTYPE_IQ2_XXS, n, w, x); }
NEON_TARGET static float NEON_FN(dot_iq2_xs)(int64_t n, const void *w, const void *x) { return NEON_FN(dot_iq_grid)(MXL_DTYPE_IQ2_XS, n, w, x); }
NEON_TARGET static float NEON_FN(dot_iq2_s)(int64_t n, const void *w, const void *x) { return NEON_FN(dot_iq_grid)(MXL_DTYPE_IQ2_S, n, w, x); }
NEON_TARGET static float NEON_FN(dot_iq3_xxs)(int64_t n, const void *w, const void *x) { return NEON_FN(dot_iq_grid)(MXL_DTYPE_IQ3_XXS, n, w, x); }
NEON_TARGET static float NEON_FN(dot_iq3_s)(int64_t n, const void *w, const void *x) { return NEON_FN(dot_iq_grid)(MXL_DTYPE_IQ3_S, n, w, x); }
NEON_TARGET static float NEON_FN(dot_iq1_s)(int64_t n, const void *w, const void *x) { return NEON_FN(dot_iq_grid)(MXL_DTYPE_IQ1_S, n, w, x); }
NEON_TARGET static float NEON_FN(dot_iq1_m)(int64_t n, const void *w, const void *x) { return NEON_FN(dot_iq_grid)(MXL_DTYPE_IQ1_M, n, w, x); }

static mxl_vec_dot_fn NEON_FN(get)(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_Q4_0: return NEON_FN(dot_q4_0);
    case MXL_DTYPE_Q4_1: return NEON_FN(dot_q4_1);
    case MXL_DTYPE_Q5_0: return NEON_FN(dot_q5_0);
    case MXL_DTYPE_Q5_1: return NEON_FN(dot_q5_1);
    case MXL_DTYPE_Q8_0: return NEON_FN(dot_q8_0);
    case MXL_DTYPE_MXFP4: return NEON_FN(dot_mxfp4);
    case MXL_DTYPE_IQ4_NL: return NEON_FN(dot_iq4_nl);
    case MXL_DTYPE_IQ4_XS: return NEON_FN(dot_iq4_xs);
    case MXL_DTYPE_IQ2_XXS: return NEON_FN(dot_iq2_xxs);
    case MXL_DTYPE_IQ2_XS: return NEON_FN(dot_iq2_xs);
    case MXL_DTYPE_IQ2_S: return NEON_FN(dot_iq2_s);
    case MXL_DTYPE_IQ3_XXS: return NEON_FN(dot_iq3_xxs);
    case MXL_DTYPE_IQ3_S: return NEON_FN(dot_iq3_s);
    case MXL_DTYPE_IQ1_S: return NEON_FN(dot_iq1_s);
    case MXL_DTYPE_IQ1_M: return NEON_FN(dot_iq1_m);
    case MXL_DTYPE_Q2_K: return NEON_FN(dot_q2_k);
    case MXL_DTYPE_Q3_K: return NEON_FN(dot_q3_k);
    case MXL_DTYPE_Q4_K: return NEON_FN(dot_q4_k);
    case MXL_DTYPE_Q5_K: return NEON_FN(dot_q5_k);
    case MXL_DTYPE_Q6_K: return NEON_FN(dot_q6_k);
    default: return 0;
    }
}
