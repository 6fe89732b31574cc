/* quant_panel_avx2.c - the panel path's AVX2 form (quant_amx.h): the same two-term products as
 * the tile kernels and their AVX-512 VNNI form, on CPUs with AVX2 + FMA + F16C only, so that the
 * default path there gives the same bits (and transformers' greedy tokens) as on AVX-512 CPUs.
 * Its plain reference is mxl_qamx_panels_ref (quant_amx.c), bit for bit.
 *
 * Per panel (16 rows), group of up to GROUP tokens and 32-element block b, the exact int32 dots
 * of the 16 rows with each token's two activation terms (256 dot1 + dot2, as the VNNI form):
 *   - nibble kinds (codes <= 31) and Q6_K / Q3_K (unsigned codes <= 63 / 7, minus 32 / 4 x the
 *     terms' sums):
 *     VPMADDUBSW of the code bytes (split from the nibbles once for the group) with each term,
 *     summed in int16 over as many tile rows as cannot overflow, then widened (VPMADDWD by 1);
 *   - 8-bit kinds (Q8_0 signed, U8): the codes widened to int16 as they are loaded and the two
 *     terms folded into one int16 v = 256 q + q2 (|v| <= 127 * 256, quant_gguf.h): one
 *     VPMADDWD per 4 rows and 2 columns;
 * then the float steps of scale_block / post_q6 on two vectors of 8 rows: acc += cvt(D) *
 * (d_w * d2_x) (+ m_w * s_x; the half kinds per half, Q2_K's mins after). Several tokens (a decode batch) go through a block's code vectors
 * four at a time (nib_tokens, w8_tokens), each code vector loaded once for the four. On a Zen 3
 * a VPMADDUBSW and the VPADDW that sums it issue about once a cycle together, so a nibble block
 * (16 rows x 32 columns) costs at least 32 cycles per token with two terms; these kernels take
 * about 36. */
#include "backends/cpu/quant_amx.h"
#include "backends/cpu/quant_panel.h"

#if defined(__x86_64__) && !defined(MXL_NO_TILE_KERNELS)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* v stays a register at this point: GCC otherwise re-associates the long int16 add chains of
 * the token-blocked kernels into trees of products held on the stack (about twice the time) */
#define KEEP(v) __asm__("" : "+x"(v))

/* tokens whose float sums stay in a stack buffer while a panel's blocks go by (the split nibbles
 * are made once per group) */
#define GROUP 16
/* blocks a panel's read runs ahead of its use (software prefetch) */
#ifndef PF_BLOCKS
#define PF_BLOCKS 32
#endif

/* rows 0..7 and 8..15 of a block's dots from the four 4-row accumulators (each row's two
 * column-pair partials adjacent) */
AVX2 static inline void fold_rows(const __m256i *a, __m256i *lo, __m256i *hi) {
    *lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(a[0], a[1]), 0xD8);
    *hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(a[2], a[3]), 0xD8);
}

/* 8-bit kinds: the exact int32 dots of the block's 16 rows with 32 int16 activations v (tile
 * row kk: columns 4 kk .. 4 kk + 3), the 8-bit codes c8 (signed when sgn) widened here */
AVX2 __attribute__((always_inline)) static inline void dots16(const uint8_t *c8, int sgn, const int16_t *v, __m256i *lo, __m256i *hi) {
    __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; kk++) {
        int64_t x4;
        memcpy(&x4, v + 4 * kk, 8);
        const __m256i x = _mm256_set1_epi64x(x4);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            const __m128i b = _mm_loadu_si128((const __m128i *)(c8 + 64 * kk + 16 * q));
            const __m256i wq = sgn ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b);
            a[q] = _mm256_add_epi32(a[q], _mm256_madd_epi16(wq, x));
        }
    }
    fold_rows(a, lo, hi);
}

/* v where bit i of the 32-bit mask at m4 is set, for byte i of 32, else 0: byte i picks its
 * mask byte, tests its bit */
AVX2 __attribute__((always_inline)) static inline __m256i mask_bytes(const uint8_t *m4, char v) {
    int32_t m;
    memcpy(&m, m4, 4);
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                                          3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    __m256i mb = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(m), pick), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(mb, bit), _mm256_set1_epi8(v));
}

/* Nibble kinds (codes <= 31): the 32 code bytes of tile row kk for rows 8 h .. 8 h + 7 */
AVX2 __attribute__((always_inline)) static inline __m256i nib_codes(const uint8_t *c, int q5, int kk, int h) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(c + 64 * (kk & 3) + 32 * h));
    if (kk >= 4) v = _mm256_srli_epi16(v, 4);
    v = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
    if (q5) v = _mm256_or_si256(v, mask_bytes(c + HI_PLANE + 8 * kk + 4 * h, 0x10)); /* mask bits 32 h .. of the row's 64 */
    return v;
}

/* Nibble kinds: the exact int32 dots of the 16 rows (D[0]: rows 0..7, D[1]: 8..15) with one
 * token's two terms, by VPMADDUBSW (unsigned codes x signed terms; |pair| <= 31 * 128 * 2, no
 * saturation) summed in int16 over up to 8 (Q4) or 4 (Q5) tile rows before widening: 256 dot1 +
 * dot2, the codes split from the nibbles c here. */
AVX2 __attribute__((always_inline)) static inline void nib_dots16(const uint8_t *c, int q5, const mxl_block_q8a2 *x, __m256i *D) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p1[2], p2[2], a1[2], a2[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) p1[h] = p2[h] = a1[h] = a2[h] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int kk = 0; kk < 8; kk++) {
        int32_t x1, x2;
        memcpy(&x1, x->qs + 4 * kk, 4);
        memcpy(&x2, x->qs2 + 4 * kk, 4);
        const __m256i b1 = _mm256_set1_epi32(x1), b2 = _mm256_set1_epi32(x2);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i codes = nib_codes(c, q5, kk, h);
            p1[h] = _mm256_add_epi16(p1[h], _mm256_maddubs_epi16(codes, b1));
            p2[h] = _mm256_add_epi16(p2[h], _mm256_maddubs_epi16(codes, b2));
            if (q5 && kk == 3) { /* 4 x 31 x 128 x 2 < 2^15: widen before the next four */
                a1[h] = _mm256_madd_epi16(p1[h], ones), a2[h] = _mm256_madd_epi16(p2[h], ones);
                p1[h] = p2[h] = _mm256_setzero_si256();
            }
        }
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        a1[h] = _mm256_add_epi32(a1[h], _mm256_madd_epi16(p1[h], ones));
        a2[h] = _mm256_add_epi32(a2[h], _mm256_madd_epi16(p2[h], ones));
        D[h] = _mm256_add_epi32(_mm256_slli_epi32(a1[h], 8), a2[h]);
    }
}

/* Q6_K / Q3_K / Q2_K: the unsigned codes of tile row kk for rows 8 h .. 8 h + 7 (code byte c of
 * the row: plane byte c % 16, bits 2 (c / 16)): Q6_K the nibbles | the plane's two bits << 4
 * (0..63), Q3_K the plane's two bits | the mask's bit << 2 (0..7), Q2_K the plane's (0..3) */
AVX2 __attribute__((always_inline)) static inline __m256i half_codes(int kind, const uint8_t *blk, int kk, int h) {
    const uint8_t *codes = blk + 32;
    const __m256i plane = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(codes + half_plane(kind) + 16 * kk)));
    const __m256i sh = _mm256_setr_epi32(4 * h, 4 * h, 4 * h, 4 * h, 4 * h + 2, 4 * h + 2, 4 * h + 2, 4 * h + 2);
    const __m256i two = _mm256_and_si256(_mm256_srlv_epi32(plane, sh), _mm256_set1_epi8(3));
    if (kind == K_Q2_K) return two;
    if (kind == K_Q3_K) return _mm256_or_si256(two, mask_bytes(codes + 128 + 8 * kk + 4 * h, 4));
    __m256i v = _mm256_loadu_si256((const __m256i *)(codes + 64 * (kk & 3) + 32 * h));
    if (kk >= 4) v = _mm256_srli_epi16(v, 4);
    v = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
    return _mm256_or_si256(v, _mm256_slli_epi16(two, 4));
}

/* Q6_K / Q3_K: the two terms' exact int32 dots of rows 8 h .. 8 h + 7 over column half hh (tile
 * rows 4 hh .. 4 hh + 3), on signed codes: dot(u, x) - half_off sum(x) (as the VNNI form).
 * VPMADDUBSW pairs stay below 63 x 128 x 2, so two tile rows are summed in int16 before widening.
 * sums: [term][half] of the token's codes. pre: the block's unsigned codes, or NULL to make them
 * here. */
AVX2 __attribute__((always_inline)) static inline void q6_dots8(int kind, const uint8_t *pre, const uint8_t *blk, const mxl_block_q8a2 *x,
                                                                int h, int hh, int32_t (*sums)[2], __m256i *c1, __m256i *c2) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i a1 = _mm256_setzero_si256(), a2 = a1;
#pragma GCC unroll 2
    for (int k2 = 0; k2 < 2; k2++) {
        __m256i p1 = _mm256_setzero_si256(), p2 = p1;
#pragma GCC unroll 2
        for (int kk = 4 * hh + 2 * k2; kk < 4 * hh + 2 * k2 + 2; kk++) {
            const __m256i codes = pre ? _mm256_load_si256((const __m256i *)(pre + 64 * kk + 32 * h)) : half_codes(kind, blk, kk, h);
            int32_t x1, x2;
            memcpy(&x1, x->qs + 4 * kk, 4);
            memcpy(&x2, x->qs2 + 4 * kk, 4);
            p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(codes, _mm256_set1_epi32(x1)));
            p2 = _mm256_add_epi16(p2, _mm256_maddubs_epi16(codes, _mm256_set1_epi32(x2)));
        }
        a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(p1, ones));
        a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(p2, ones));
    }
    *c1 = _mm256_sub_epi32(a1, _mm256_set1_epi32(half_off(kind) * sums[0][hh]));
    *c2 = _mm256_sub_epi32(a2, _mm256_set1_epi32(half_off(kind) * sums[1][hh]));
}

/* d_w and m_w of the block's rows 8 h .. 8 h + 7 (block_scales of quant_amx.c, 8 lanes) */
AVX2 static inline void scales8(const layout *L, const uint8_t *pan, int64_t b, int h, __m256 *dw, __m256 *mw) {
    if (ksb_kind(L->kind)) {
        const uint8_t *sp = ksb_params(L->kind, pan, b);
        const int j = (int)(b & 7);
        int64_t s8, m8;
        memcpy(&s8, sp + 16 * j + 8 * h, 8);
        memcpy(&m8, sp + 128 + 16 * j + 8 * h, 8);
        const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(s8)));
        const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(m8)));
        *dw = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sp + 256 + 16 * h))), sc);
        const __m256 m = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sp + 288 + 16 * h))), mn);
        *mw = _mm256_xor_ps(m, _mm256_set1_ps(-0.0f));
        return;
    }
    if (L->kind == K_IQ4_XS) {
        const uint8_t *sb = pan + (size_t)(b >> 3) * IXSB;
        int64_t s8;
        memcpy(&s8, sb + 32 + 16 * (b & 7) + 8 * h, 8);
        *dw = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + 16 * h))),
                            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(s8))));
        *mw = _mm256_setzero_ps();
        return;
    }
    const uint8_t *p = pan + (size_t)b * L->bb + L->codes;
    *dw = L->wide ? _mm256_loadu_ps((const float *)(p + 32 * h)) : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16 * h)));
    *mw = signed_kind(L->kind) ? _mm256_setzero_ps()
          : L->kind == K_Q4_0 ? _mm256_mul_ps(*dw, _mm256_set1_ps(-8.0f))
          : L->kind == K_Q5_0 ? _mm256_mul_ps(*dw, _mm256_set1_ps(-16.0f))
          : L->wide           ? _mm256_loadu_ps((const float *)(p + 64 + 32 * h))
                              : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 32 + 16 * h)));
}

/* one token's activation block as int16: v = 256 q + q2 */
AVX2 static inline void act16(const mxl_block_q8a2 *x, int16_t *v) {
    for (int h = 0; h < 2; h++) {
        const __m256i q1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x->qs + 16 * h)));
        const __m256i q2 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x->qs2 + 16 * h)));
        _mm256_store_si256((__m256i *)(v + 16 * h), _mm256_add_epi16(_mm256_slli_epi16(q1, 8), q2));
    }
}

/* acc (16 rows) += one token's products with a 32-element block (not Q6_K), codes c */
AVX2 __attribute__((always_inline)) static inline void block_token(int kind, const uint8_t *c, const mxl_block_q8a2 *x,
                                                                   const __m256 *dw, const __m256 *mw, float *acc) {
    __m256i D[2];
    if (nib_kind(kind)) nib_dots16(c, q5_kind(kind), x, D);
    else {
        _Alignas(32) int16_t v[32];
        act16(x, v);
        dots16(c, kind == K_Q8_0, v, &D[0], &D[1]);
    }
    const __m256 d2 = _mm256_set1_ps(x->d2), s = _mm256_set1_ps(x->s);
#pragma GCC unroll 2
    for (int g = 0; g < 2; g++) {
        __m256 a = _mm256_load_ps(acc + 8 * g);
        a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(D[g]), _mm256_mul_ps(dw[g], d2), a);
        if (kind != K_Q8_0) a = _mm256_fmadd_ps(mw[g], s, a);
        _mm256_store_ps(acc + 8 * g, a);
    }
}

/* Nibble kinds, several tokens: T tokens x[0..T) of one block (T <= 4, 2 for Q5 whose 4-row
 * widening holds twice the sums; a constant in each instance), acc[t] += their products. Per row
 * half, each code vector of the block's split codes pre is loaded once and multiplied with every
 * token's two terms, the 2 T int16 sums kept in registers. The one-token path's steps and bits
 * (nib_dots16, then block_token's float steps in its order). */
AVX2 __attribute__((always_inline)) static inline void nib_tokens(int T, int q5, const uint8_t *pre, const mxl_block_q8a2 *const *x,
                                                                  const __m256 *dw, const __m256 *mw, float (*acc)[16]) {
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m256i p1[4], p2[4], a1[4], a2[4];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) p1[t] = p2[t] = a1[t] = a2[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int kk = 0; kk < 8; kk++) {
            const __m256i codes = _mm256_load_si256((const __m256i *)(pre + 64 * kk + 32 * h));
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                int32_t x1, x2;
                memcpy(&x1, x[t]->qs + 4 * kk, 4);
                memcpy(&x2, x[t]->qs2 + 4 * kk, 4);
                p1[t] = _mm256_add_epi16(p1[t], _mm256_maddubs_epi16(codes, _mm256_set1_epi32(x1)));
                p2[t] = _mm256_add_epi16(p2[t], _mm256_maddubs_epi16(codes, _mm256_set1_epi32(x2)));
                KEEP(p1[t]);
                KEEP(p2[t]);
            }
            if (q5 && kk == 3) /* 4 x 31 x 128 x 2 < 2^15: widen before the next four */
#pragma GCC unroll 4
                for (int t = 0; t < T; t++) {
                    a1[t] = _mm256_madd_epi16(p1[t], ones), a2[t] = _mm256_madd_epi16(p2[t], ones);
                    p1[t] = p2[t] = _mm256_setzero_si256();
                }
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            a1[t] = _mm256_add_epi32(a1[t], _mm256_madd_epi16(p1[t], ones));
            a2[t] = _mm256_add_epi32(a2[t], _mm256_madd_epi16(p2[t], ones));
            const __m256i D = _mm256_add_epi32(_mm256_slli_epi32(a1[t], 8), a2[t]);
            __m256 a = _mm256_load_ps(acc[t] + 8 * h);
            a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(D), _mm256_mul_ps(dw[h], _mm256_set1_ps(x[t]->d2)), a);
            a = _mm256_fmadd_ps(mw[h], _mm256_set1_ps(x[t]->s), a);
            _mm256_store_ps(acc[t] + 8 * h, a);
        }
    }
}

/* Nibble kinds: tokens [0, nt) of block b, four (Q5: two) at a time. Not inlined into the group
 * loop: there its other live values pushed the sums out of registers (a third slower). */
AVX2 __attribute__((noinline)) static void nib_group(int q5, const uint8_t *pre, const uint8_t *act, size_t as, int64_t b, int nt,
                                                     const __m256 *dw, const __m256 *mw, float (*acc)[16]) {
    const int step = q5 ? 2 : 4;
    for (int t0 = 0; t0 < nt; t0 += step) {
        const mxl_block_q8a2 *x[4];
        const int n = nt - t0 < step ? nt - t0 : step;
        for (int t = 0; t < n; t++) x[t] = (const mxl_block_q8a2 *)(act + (size_t)(t0 + t) * as) + b;
        if (q5) {
            if (n == 2) nib_tokens(2, 1, pre, x, dw, mw, acc + t0);
            else nib_tokens(1, 1, pre, x, dw, mw, acc + t0);
        } else if (n == 4) nib_tokens(4, 0, pre, x, dw, mw, acc + t0);
        else if (n == 3) nib_tokens(3, 0, pre, x, dw, mw, acc + t0);
        else if (n == 2) nib_tokens(2, 0, pre, x, dw, mw, acc + t0);
        else nib_tokens(1, 0, pre, x, dw, mw, acc + t0);
    }
}

/* 8-bit kinds, several tokens: T tokens x[0..T) of one block (T <= 4, a constant in each
 * instance), acc[t] += their products from the block's codes c8. Per 8-row half, each code
 * vector is loaded (and widened) once and multiplied with every token's folded terms (dots16's
 * sums and fold, then block_token's float steps in its order). */
AVX2 __attribute__((always_inline)) static inline void w8_tokens(int T, int kind, const uint8_t *c8, const mxl_block_q8a2 *const *x,
                                                                 const __m256 *dw, const __m256 *mw, float (*acc)[16]) {
    _Alignas(32) int16_t v[4][32];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) act16(x[t], v[t]);
#pragma GCC unroll 2
    for (int g = 0; g < 2; g++) { /* rows 8 g .. 8 g + 7: code vectors q = 2 g, 2 g + 1 */
        /* v is read back by each half's broadcasts: not kept in registers and taken apart lane
         * by lane, nor broadcast once for both halves and the 32 broadcasts spilled */
        __asm__("" : : "r"(v) : "memory");
        __m256i a[4][2];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) a[t][0] = a[t][1] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int kk = 0; kk < 8; kk++) {
            const __m128i b0 = _mm_loadu_si128((const __m128i *)(c8 + 64 * kk + 32 * g));
            const __m128i b1 = _mm_loadu_si128((const __m128i *)(c8 + 64 * kk + 32 * g + 16));
            const __m256i c0 = kind == K_Q8_0 ? _mm256_cvtepi8_epi16(b0) : _mm256_cvtepu8_epi16(b0);
            const __m256i c1 = kind == K_Q8_0 ? _mm256_cvtepi8_epi16(b1) : _mm256_cvtepu8_epi16(b1);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                int64_t x4;
                memcpy(&x4, v[t] + 4 * kk, 8);
                const __m256i xb = _mm256_set1_epi64x(x4);
                a[t][0] = _mm256_add_epi32(a[t][0], _mm256_madd_epi16(c0, xb));
                a[t][1] = _mm256_add_epi32(a[t][1], _mm256_madd_epi16(c1, xb));
                KEEP(a[t][0]);
                KEEP(a[t][1]);
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const __m256i D = _mm256_permute4x64_epi64(_mm256_hadd_epi32(a[t][0], a[t][1]), 0xD8);
            __m256 r = _mm256_load_ps(acc[t] + 8 * g);
            r = _mm256_fmadd_ps(_mm256_cvtepi32_ps(D), _mm256_mul_ps(dw[g], _mm256_set1_ps(x[t]->d2)), r);
            if (kind != K_Q8_0) r = _mm256_fmadd_ps(mw[g], _mm256_set1_ps(x[t]->s), r);
            _mm256_store_ps(acc[t] + 8 * g, r);
        }
    }
}

/* 8-bit kinds: tokens [0, nt) of block b, four at a time (not inlined, as nib_group) */
AVX2 __attribute__((noinline)) static void w8_group(int kind, const uint8_t *c8, const uint8_t *act, size_t as, int64_t b, int nt,
                                                    const __m256 *dw, const __m256 *mw, float (*acc)[16]) {
    for (int t0 = 0; t0 < nt; t0 += 4) {
        const mxl_block_q8a2 *x[4];
        const int n = nt - t0 < 4 ? nt - t0 : 4;
        for (int t = 0; t < n; t++) x[t] = (const mxl_block_q8a2 *)(act + (size_t)(t0 + t) * as) + b;
        if (kind == K_Q8_0) {
            if (n == 4) w8_tokens(4, K_Q8_0, c8, x, dw, mw, acc + t0);
            else if (n == 3) w8_tokens(3, K_Q8_0, c8, x, dw, mw, acc + t0);
            else if (n == 2) w8_tokens(2, K_Q8_0, c8, x, dw, mw, acc + t0);
            else w8_tokens(1, K_Q8_0, c8, x, dw, mw, acc + t0);
        } else if (n == 4) w8_tokens(4, K_U8, c8, x, dw, mw, acc + t0);
        else if (n == 3) w8_tokens(3, K_U8, c8, x, dw, mw, acc + t0);
        else if (n == 2) w8_tokens(2, K_U8, c8, x, dw, mw, acc + t0);
        else w8_tokens(1, K_U8, c8, x, dw, mw, acc + t0);
    }
}

/* one panel, tokens [0, nt) (nt <= GROUP) of act: y[t * ys + n], n < nrows (kind: L's, a
 * constant in each instance) */
AVX2 __attribute__((always_inline)) static inline void group_body(int kind, const layout *L, const uint8_t *pan, int64_t nb, int nt,
                                                                  const uint8_t *act, size_t as, float *y, int64_t ys, int nrows) {
    _Alignas(32) uint8_t pre[512];
    _Alignas(32) float acc[GROUP][16];
    memset(acc, 0, sizeof acc[0] * (size_t)nt);
    for (int64_t b = 0; b < nb; b++) {
        /* the panels are one contiguous stream: every cache line PF_BLOCKS blocks ahead */
        for (size_t o = 0; o < L->bb; o += 64) _mm_prefetch((const char *)pan + (size_t)(b + PF_BLOCKS) * L->bb + o, _MM_HINT_T0);
        if (half_kind(kind)) {
            const uint8_t *sbp = pan + (size_t)(b >> 3) * half_sb(kind);
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sbp));
            const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sbp + 16)));
            const uint8_t *blk = half_block(kind, pan, b);
            int64_t s[4];
            memcpy(s, blk, 32);
            /* dh[half][row group]: d * sc of the half's scale; Q2_K's mh: -(dmin * m) */
            __m256 dh[2][2], mh[2][2];
            for (int hh = 0; hh < 2; hh++)
                for (int g = 0; g < 2; g++) {
                    const __m128i sb = _mm_cvtsi64_si128(s[2 * hh + g]);
                    const __m256 dg = g ? d8 : d;
                    if (kind == K_Q2_K) {
                        const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sbp + 32 + 16 * g)));
                        const __m128i lo = _mm_and_si128(sb, _mm_set1_epi8(0x0F)), hi = _mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0F));
                        dh[hh][g] = _mm256_mul_ps(dg, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)));
                        mh[hh][g] = _mm256_xor_ps(_mm256_mul_ps(dm, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi))), _mm256_set1_ps(-0.0f));
                    } else {
                        dh[hh][g] = _mm256_mul_ps(dg, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sb)));
                        mh[hh][g] = _mm256_setzero_ps();
                    }
                }
            if (nt > 1) /* made once for the group */
                for (int kk = 0; kk < 8; kk++)
                    for (int h = 0; h < 2; h++) _mm256_store_si256((__m256i *)(pre + 64 * kk + 32 * h), half_codes(kind, blk, kk, h));
            for (int t = 0; t < nt; t++) {
                const mxl_block_q8a2 *x = (const mxl_block_q8a2 *)(act + (size_t)t * as) + b;
                int32_t sums[2][2];
                half_sums(x->qs, sums[0]);
                half_sums(x->qs2, sums[1]);
                __m256i c[2][2][2]; /* [term][half][row group] */
                for (int g = 0; g < 2; g++)
                    for (int hh = 0; hh < 2; hh++) q6_dots8(kind, nt > 1 ? pre : NULL, blk, x, g, hh, sums, &c[0][hh][g], &c[1][hh][g]);
                for (int g = 0; g < 2; g++) {
                    __m256 a = _mm256_load_ps(acc[t] + 8 * g);
                    const __m256 d2 = _mm256_set1_ps(x->d2);
                    for (int hh = 0; hh < 2; hh++) /* the terms folded: 256 dot1 + dot2 */
                        a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_slli_epi32(c[0][hh][g], 8), c[1][hh][g])),
                                            _mm256_mul_ps(dh[hh][g], d2), a);
                    if (kind == K_Q2_K) /* then the mins, as the reference */
                        for (int hh = 0; hh < 2; hh++)
                            a = _mm256_fmadd_ps(_mm256_set1_ps((float)(256 * sums[0][hh] + sums[1][hh])), _mm256_mul_ps(mh[hh][g], d2), a);
                    _mm256_store_ps(acc[t] + 8 * g, a);
                }
            }
            continue;
        }
        __m256 dw[2], mw[2];
        scales8(L, pan, b, 0, &dw[0], &mw[0]);
        scales8(L, pan, b, 1, &dw[1], &mw[1]);
        const uint8_t *c = codes_at(kind, pan, b, L->bb);
        const int nib = nib_kind(kind), q5 = q5_kind(kind);
        if (nib && nt > 1) /* split once for the group */
            for (int kk = 0; kk < 8; kk++)
                for (int h = 0; h < 2; h++) _mm256_store_si256((__m256i *)(pre + 64 * kk + 32 * h), nib_codes(c, q5, kk, h));
        if (lut_kind(kind)) { /* the table's signed values, then Q8_0's products */
            const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lut_table(kind)));
            for (int kk = 0; kk < 8; kk++)
                for (int h = 0; h < 2; h++)
                    _mm256_store_si256((__m256i *)(pre + 64 * kk + 32 * h), _mm256_shuffle_epi8(tab, nib_codes(c, 0, kk, h)));
            if (nt == 1) block_token(K_Q8_0, pre, (const mxl_block_q8a2 *)act + b, dw, mw, acc[0]);
            else w8_group(K_Q8_0, pre, act, as, b, nt, dw, mw, acc);
            continue;
        }
        /* one token: no token loop, so the compiler does not hoist (and spill) the block's code
         * loads out of one */
        if (nt == 1) block_token(kind, c, (const mxl_block_q8a2 *)act + b, dw, mw, acc[0]);
        else if (nib) nib_group(q5, pre, act, as, b, nt, dw, mw, acc);
        else w8_group(kind, c, act, as, b, nt, dw, mw, acc);
    }
    for (int t = 0; t < nt; t++) memcpy(y + t * ys, acc[t], (size_t)nrows * sizeof(float));
}

#define GROUP_CASE(K) \
    case K: group_body(K, L, pan, nb, nt, act, as, y, ys, nrows); break;
AVX2 static void panel_group(const layout *L, const uint8_t *pan, int64_t nb, int nt, const uint8_t *act, size_t as, float *y,
                             int64_t ys, int nrows) {
    switch (L->kind) {
        GROUP_CASE(K_Q8_0) GROUP_CASE(K_Q4_0) GROUP_CASE(K_Q4_1) GROUP_CASE(K_U8) GROUP_CASE(K_Q4_K) GROUP_CASE(K_Q5_0)
        GROUP_CASE(K_Q5_1) GROUP_CASE(K_Q6_K) GROUP_CASE(K_Q5_K) GROUP_CASE(K_Q3_K) GROUP_CASE(K_Q2_K)
        GROUP_CASE(K_IQ4_NL) GROUP_CASE(K_IQ4_XS) GROUP_CASE(K_MXFP4)
    default: MXL_ASSERT(0 && "not a panel kind");
    }
}

AVX2 void mxl_qamx_panels_avx2(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                               int64_t n_tok, float *y, int64_t ys) {
    layout L;
    MXL_ASSERT(layout_of(W, &L));
    const int64_t nb = W->cols / 32;
    for (int64_t p = p0; p < p1; p++) {
        const uint8_t *pan = panel_at(W, &L, p);
        const int nrows = panel_rows(W, p);
        for (int64_t t0 = 0; t0 < n_tok; t0 += GROUP) {
            const int nt = n_tok - t0 < GROUP ? (int)(n_tok - t0) : GROUP;
            panel_group(&L, pan, nb, nt, act + (size_t)t0 * act_stride, act_stride, y + t0 * ys + p * PANEL, ys, nrows);
        }
    }
}
#else
void mxl_qamx_panels_avx2(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                          int64_t n_tok, float *y, int64_t ys) {
    mxl_qamx_panels_ref(W, p0, p1, act, act_stride, n_tok, y, ys);
}
#endif
