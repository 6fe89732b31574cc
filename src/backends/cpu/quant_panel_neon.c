/* quant_panel_neon.c - the panel path's AArch64 NEON form (quant_amx.h): the same two-term
 * products as the x86 forms, so that the default path on ARM gives their bits (and
 * transformers' greedy tokens, which the one-term q8 activations of the per-row NEON dots do not).
 * Its plain reference is mxl_qamx_panels_ref (quant_amx.c), bit for bit.
 *
 * Per panel (16 rows), 32-element block b and group of up to GROUP tokens:
 *   1. the block's 512 code bytes as signed int8 in the B-tile order (code_index: tile row kk,
 *      panel row n, byte j), once for the group: nibble kinds split (and Q5's fifth bit added),
 *      Q6_K's u - 32 and Q3_K's u - 4, Q8_0's codes as they are, U8's u - 128 (128 x the activation's exact sum
 *      added back to the dot);
 *   2. per token, the exact int32 dots of the 16 rows with its two activation terms, each tile
 *      row's 16 bytes (4 rows x 4 columns) against the token's 4 bytes of that row: SDOT by lane
 *      with the dot-product extension, else SMULL + SADALP pairs folded at the end (|product|
 *      <= 2^14); per half (tile rows 0..3, 4..7) for Q6_K and Q3_K's two scales;
 *   3. the reference's float steps on four vectors of 4 rows: acc = fma(cvt(256 dot1 + dot2),
 *      d_w * d2_x, acc) (+ fma(m_w, s_x)), or the half kinds' one per half (then Q2_K's mins).
 * The integer dots are exact and the float steps are the reference's operations in its order
 * (vfmaq is fused as fmaf is), so every (row, token) value equals mxl_qamx_panels_ref's
 * whatever the token count or grouping. */
#include "backends/cpu/quant_amx.h"
#include "backends/cpu/quant_panel.h"

#if defined(__aarch64__)
#include <arm_neon.h>

/* tokens whose float sums stay in a stack buffer while a panel's blocks go by */
#define GROUP 16

/* v in byte i (of 16) where bit i of the two mask bytes at m is set, else 0 */
static inline uint8x16_t mask_bytes(const uint8_t *m, uint8_t v) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    return vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(m[0]), vdup_n_u8(m[1])), vld1q_u8(bit)), vdupq_n_u8(v));
}

/* Step 1: block b's codes as signed bytes in the B-tile order; returns the offset that was
 * subtracted from unsigned codes to make them signed (U8: 128, its dots then get 128 x sum). */
static int block_codes(const layout *L, const uint8_t *pan, int64_t b, int8_t *out) {
    if (half_kind(L->kind)) {
        const int q3 = L->kind == K_Q3_K;
        const uint8_t *codes = half_block(L->kind, pan, b) + 32, *plane = codes + half_plane(L->kind);
        for (int r = 0; r < 8; r++) { /* tile row r: 64 code bytes, plane bytes 16 r .. 16 r + 15 */
            const uint8x16_t pl = vld1q_u8(plane + 16 * r);
            for (int c4 = 0; c4 < 4; c4++) { /* code bytes 16 c4 .. 16 c4 + 15 of the row */
                const size_t i = (size_t)r * 64 + (size_t)c4 * 16;
                uint8x16_t two = pl;
                if (c4 == 1) two = vshrq_n_u8(pl, 2);
                if (c4 == 2) two = vshrq_n_u8(pl, 4);
                if (c4 == 3) two = vshrq_n_u8(pl, 6);
                two = vandq_u8(two, vdupq_n_u8(3));
                uint8x16_t u;
                if (L->kind == K_Q2_K) u = two;
                else if (q3) /* + 4 where bit i of the 512-bit mask is set */
                    u = vorrq_u8(two, mask_bytes(codes + 128 + i / 8, 4));
                else
                    u = vorrq_u8(i < CODES_Q4 ? vandq_u8(vld1q_u8(codes + i), vdupq_n_u8(0x0F)) : vshrq_n_u8(vld1q_u8(codes + i - CODES_Q4), 4),
                                 vshlq_n_u8(two, 4));
                vst1q_s8(out + i, vsubq_s8(vreinterpretq_s8_u8(u), vdupq_n_s8((int8_t)half_off(L->kind))));
            }
        }
        return 0;
    }
    const uint8_t *c = codes_at(L->kind, pan, b, L->bb);
    if (L->kind == K_Q8_0) {
        memcpy(out, c, CODES_Q8);
        return 0;
    }
    if (L->kind == K_U8) {
        for (int i = 0; i < CODES_Q8; i += 16) vst1q_s8(out + i, vreinterpretq_s8_u8(veorq_u8(vld1q_u8(c + i), vdupq_n_u8(0x80))));
        return 128;
    }
    for (int i = 0; i < CODES_Q4; i += 16) { /* nibble kinds: byte i's low half is code byte i, its high half 256 + i */
        const uint8x16_t v = vld1q_u8(c + i);
        uint8x16_t lo = vandq_u8(v, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(v, 4);
        if (q5_kind(L->kind)) { /* + 16 where bit i of the 512-bit mask is set */
            lo = vorrq_u8(lo, mask_bytes(c + HI_PLANE + i / 8, 16));
            hi = vorrq_u8(hi, mask_bytes(c + HI_PLANE + (CODES_Q4 + i) / 8, 16));
        }
        if (lut_kind(L->kind)) { /* the IQ4 table's signed values */
            const uint8x16_t tab = vreinterpretq_u8_s8(vld1q_s8(lut_table(L->kind)));
            lo = vqtbl1q_u8(tab, lo), hi = vqtbl1q_u8(tab, hi);
        }
        vst1q_s8(out + i, vreinterpretq_s8_u8(lo));
        vst1q_s8(out + CODES_Q4 + i, vreinterpretq_s8_u8(hi));
    }
    return 0;
}

/* the 16 rows' f16 (or, wide, f32) parameters at p: 4 x 4 rows */
static inline void load_params(const uint8_t *p, int wide, float32x4_t *v) {
    for (int q = 0; q < 4; q++)
        v[q] = wide ? vld1q_f32((const float *)(const void *)p + 4 * q)
                    : vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p + 4 * q)));
}

/* the 16 rows' byte parameters at p (unsigned, or signed when sgn) as floats: 4 x 4 rows */
static inline void byte_params(const uint8_t *p, int sgn, float32x4_t *v) {
    const uint8x16_t u = vld1q_u8(p);
    for (int q = 0; q < 4; q++) {
        const uint8x8_t h = q < 2 ? vget_low_u8(u) : vget_high_u8(u);
        if (sgn) {
            const int16x8_t w = vmovl_s8(vreinterpret_s8_u8(h));
            v[q] = vcvtq_f32_s32(vmovl_s16(q & 1 ? vget_high_s16(w) : vget_low_s16(w)));
        } else {
            const uint16x8_t w = vmovl_u8(h);
            v[q] = vcvtq_f32_u32(vmovl_u16(q & 1 ? vget_high_u16(w) : vget_low_u16(w)));
        }
    }
}

/* Block b's d_w and m_w of the 16 rows, as panel_scales forms them (not the half kinds; none for
 * the signed kinds) */
static void block_scales(const layout *L, const uint8_t *pan, int64_t b, float32x4_t *dw, float32x4_t *mw) {
    if (L->kind == K_IQ4_XS) {
        const uint8_t *sb = pan + (size_t)(b >> 3) * IXSB;
        float32x4_t d[4], sc[4];
        load_params(sb, 0, d);
        byte_params(sb + 32 + 16 * (b & 7), 1, sc);
        for (int q = 0; q < 4; q++) dw[q] = vmulq_f32(d[q], sc[q]);
        return;
    }
    if (ksb_kind(L->kind)) {
        const uint8_t *sp = ksb_params(L->kind, pan, b);
        const int j = (int)(b & 7);
        float32x4_t d[4], dm[4], sc[4], mn[4];
        load_params(sp + 256, 0, d);
        load_params(sp + 288, 0, dm);
        byte_params(sp + 16 * j, 0, sc);
        byte_params(sp + 128 + 16 * j, 0, mn);
        for (int q = 0; q < 4; q++) {
            dw[q] = vmulq_f32(d[q], sc[q]);
            mw[q] = vnegq_f32(vmulq_f32(dm[q], mn[q]));
        }
        return;
    }
    const uint8_t *blk = pan + (size_t)b * L->bb;
    load_params(blk + L->codes, L->wide, dw);
    if (signed_kind(L->kind)) return;
    if (L->kind == K_Q4_0 || L->kind == K_Q5_0) {
        for (int q = 0; q < 4; q++) mw[q] = vmulq_n_f32(dw[q], L->kind == K_Q4_0 ? -8.0f : -16.0f);
        return;
    }
    load_params(blk + L->codes + (L->wide ? 4 : 2) * PANEL, L->wide, mw);
}

/* Step 2, with SDOT: D[term][half][q] = the 4 rows 4q..4q+3's dots with term `term` over tile
 * rows 4 half .. 4 half + 3 */
__attribute__((target("arch=armv8.2-a+dotprod"))) static void dots_sdot(const int8_t *codes, const mxl_block_q8a2 *x,
                                                                      int32x4_t D[2][2][4]) {
    for (int term = 0; term < 2; term++) {
        const int8_t *xs = term ? x->qs2 : x->qs;
        for (int h = 0; h < 2; h++) {
            const int8x16_t xv = vld1q_s8(xs + 16 * h);
            int32x4_t a[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
            const int8_t *w = codes + 256 * h;
            for (int q = 0; q < 4; q++) {
                a[q] = vdotq_laneq_s32(a[q], vld1q_s8(w + 16 * q), xv, 0);
                a[q] = vdotq_laneq_s32(a[q], vld1q_s8(w + 64 + 16 * q), xv, 1);
                a[q] = vdotq_laneq_s32(a[q], vld1q_s8(w + 128 + 16 * q), xv, 2);
                a[q] = vdotq_laneq_s32(a[q], vld1q_s8(w + 192 + 16 * q), xv, 3);
            }
            for (int q = 0; q < 4; q++) D[term][h][q] = a[q];
        }
    }
}

/* Step 2 on baseline AdvSIMD: each product of 4 rows x 4 columns widened (SMULL), summed in
 * pairs into int32 (SADALP), the pairs folded per row at the end */
static void dots_base(const int8_t *codes, const mxl_block_q8a2 *x, int32x4_t D[2][2][4]) {
    for (int term = 0; term < 2; term++) {
        const int8_t *xs = term ? x->qs2 : x->qs;
        for (int h = 0; h < 2; h++) {
            int32x4_t lo[4], hi[4]; /* rows 4q, 4q+1 / 4q+2, 4q+3: two column pairs each */
            for (int q = 0; q < 4; q++) lo[q] = hi[q] = vdupq_n_s32(0);
            for (int r = 0; r < 4; r++) {
                int32_t x4;
                memcpy(&x4, xs + 16 * h + 4 * r, 4);
                const int8x16_t xd = vreinterpretq_s8_s32(vdupq_n_s32(x4));
                const int8_t *w = codes + 256 * h + 64 * r;
                for (int q = 0; q < 4; q++) {
                    const int8x16_t wv = vld1q_s8(w + 16 * q);
                    lo[q] = vpadalq_s16(lo[q], vmull_s8(vget_low_s8(wv), vget_low_s8(xd)));
                    hi[q] = vpadalq_s16(hi[q], vmull_high_s8(wv, xd));
                }
            }
            for (int q = 0; q < 4; q++) D[term][h][q] = vpaddq_s32(lo[q], hi[q]);
        }
    }
}

void mxl_qamx_panels_neon(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                          int64_t n_tok, float *y, int64_t ys, int sdot) {
    layout L;
    MXL_ASSERT(layout_of(W, &L));
    void (*dots)(const int8_t *, const mxl_block_q8a2 *, int32x4_t[2][2][4]) = sdot ? dots_sdot : dots_base;
    const int64_t nb = W->cols / 32;
    int8_t codes[512] __attribute__((aligned(16)));
    float acc[GROUP][PANEL] __attribute__((aligned(16)));
    for (int64_t p = p0; p < p1; p++) {
        const uint8_t *pan = panel_at(W, &L, p);
        const int nrows = panel_rows(W, p);
        for (int64_t t0 = 0; t0 < n_tok; t0 += GROUP) {
            const int nt = n_tok - t0 < GROUP ? (int)(n_tok - t0) : GROUP;
            memset(acc, 0, sizeof acc);
            for (int64_t b = 0; b < nb; b++) {
                const int off = block_codes(&L, pan, b, codes);
                float32x4_t dw[4], mw[4], dh[2][4], mh[2][4];
                if (half_kind(L.kind)) { /* d * sc_h per half (Q2_K: its mins -(dmin * m_h) in mh) */
                    const uint8_t *blk = half_block(L.kind, pan, b), *sbp = pan + (size_t)(b >> 3) * half_sb(L.kind);
                    float32x4_t d[4], sc[4], dm[4];
                    load_params(sbp, 0, d);
                    if (L.kind == K_Q2_K) load_params(sbp + 32, 0, dm);
                    for (int h = 0; h < 2; h++) {
                        if (L.kind == K_Q2_K) {
                            uint8_t lo[16], hi[16];
                            for (int n = 0; n < PANEL; n++) lo[n] = (uint8_t)half_scale(K_Q2_K, blk, h, n), hi[n] = (uint8_t)half_min(blk, h, n);
                            byte_params(hi, 0, sc);
                            for (int q = 0; q < 4; q++) mh[h][q] = vnegq_f32(vmulq_f32(dm[q], sc[q]));
                            byte_params(lo, 0, sc);
                        } else byte_params(blk + PANEL * h, 1, sc);
                        for (int q = 0; q < 4; q++) dh[h][q] = vmulq_f32(d[q], sc[q]);
                    }
                } else {
                    block_scales(&L, pan, b, dw, mw);
                }
                for (int t = 0; t < nt; t++) {
                    const mxl_block_q8a2 *x = (const mxl_block_q8a2 *)(act + (size_t)(t0 + t) * act_stride) + b;
                    int32x4_t D[2][2][4];
                    dots(codes, x, D);
                    float *a = acc[t];
                    if (half_kind(L.kind)) { /* the reference's order: halves 0, 1 (terms folded), then Q2_K's mins */
                        int32_t sx[2][2];
                        if (L.kind == K_Q2_K) half_sums_ref(x->qs, sx[0]), half_sums_ref(x->qs2, sx[1]);
                        for (int q = 0; q < 4; q++) {
                            float32x4_t v = vld1q_f32(a + 4 * q);
                            for (int h = 0; h < 2; h++)
                                v = vfmaq_f32(v, vcvtq_f32_s32(vaddq_s32(vshlq_n_s32(D[0][h][q], 8), D[1][h][q])), vmulq_n_f32(dh[h][q], x->d2));
                            if (L.kind == K_Q2_K)
                                for (int h = 0; h < 2; h++)
                                    v = vfmaq_f32(v, vdupq_n_f32((float)(256 * sx[0][h] + sx[1][h])), vmulq_n_f32(mh[h][q], x->d2));
                            vst1q_f32(a + 4 * q, v);
                        }
                        continue;
                    }
                    for (int q = 0; q < 4; q++) {
                        int32x4_t d1 = vaddq_s32(D[0][0][q], D[0][1][q]), d2 = vaddq_s32(D[1][0][q], D[1][1][q]);
                        int32x4_t Dq = vaddq_s32(vshlq_n_s32(d1, 8), d2); /* 256 dot1 + dot2 (mod 2^32: exact) */
                        if (off) Dq = vaddq_s32(Dq, vdupq_n_s32(off * x->sum));
                        float32x4_t v = vfmaq_f32(vld1q_f32(a + 4 * q), vcvtq_f32_s32(Dq), vmulq_n_f32(dw[q], x->d2));
                        if (!signed_kind(L.kind)) v = vfmaq_n_f32(v, mw[q], x->s);
                        vst1q_f32(a + 4 * q, v);
                    }
                }
            }
            for (int t = 0; t < nt; t++) memcpy(y + (t0 + t) * ys + p * PANEL, acc[t], (size_t)nrows * sizeof(float));
        }
    }
}
#endif
