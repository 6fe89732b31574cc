/* attention_avx512.c - the f16 and ggml block-format (q8_0, q4_0, q4_1, q5_0, q5_1) K and V
 * passes of attention.c on AVX-512, for G (1..4) query heads
 * that share one KV head (grouped-query attention), so each K and V vector is loaded and
 * converted once per group instead of once per head. K: scores 16 / G keys at a time, each a
 * 16-lane FMA chain per head, the 16 chains reduced together. V: out = sum_j p_j v_j per head,
 * 128 (one head) or 64 (a group) output elements at a time held in zmm accumulators while the
 * keys are walked (block by block, in position order, each head skipping the keys its p_j is 0
 * for), instead of an axpy that loads and stores the whole output row per key. Per element and
 * head it is the same fma(p_j, v_j, acc) chain from 0 as the axpy kernels, so results are
 * bitwise those of attention.c's AVX2 path, and the same for every G. The block formats run the
 * same passes with each key's 32-element blocks dequantized into two 16-lane vectors (q8_0:
 * int8 -> f32 times d; q4_0 / q5_0: fma(code, d, -8 d / -16 d), which is d (code - offset)
 * rounded once, the reference's value; q4_1 / q5_1: fma(code, d, m)). */
#include "backends/cpu/attention.h"

#include <math.h>
#include <string.h>

#include "backends/cpu/kv_quant.h"
#include "backends/cpu/kv_turbo.h"

#include "core/status.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backends/cpu/reduce_avx512.h"
#include "backends/cpu/vexp_avx512.h"

#undef AVX512
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define INLINE __attribute__((always_inline)) static inline

/* Softmax of x[0..n) (finite scores) with the sink logit in the denominator (-inf: none), no
 * soft-cap: the max, then e = exp(x - max) by mxl_exp512_ps (about 1 ulp; arguments below -87
 * clamped, e ~ 1e-38 instead of a denormal), summed in 16 f32 lanes, then scaled by 1 / sum.
 * Not the bits of mxl_cpu_softmax (expf, a double sum) but within its float rounding, and the
 * same for a row whatever the batch. */
AVX512 void mxl_attn_softmax_avx512(float *x, int64_t n, float sink) {
    const __mmask16 tail = (__mmask16)(n % 16 ? (1u << (n % 16)) - 1 : 0xffff);
    __m512 mx = _mm512_set1_ps(sink);
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 mk = j + 16 <= n ? 0xffff : tail;
        mx = _mm512_mask_max_ps(mx, mk, mx, _mm512_maskz_loadu_ps(mk, x + j));
    }
    const float m = _mm512_reduce_max_ps(mx);
    const __m512 vm = _mm512_set1_ps(m), lo = _mm512_set1_ps(-87.0f);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 mk = j + 16 <= n ? 0xffff : tail;
        __m512 e = _mm512_maskz_mov_ps(mk, mxl_exp512_ps(_mm512_max_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, x + j), vm), lo)));
        _mm512_mask_storeu_ps(x + j, mk, e);
        sum = _mm512_add_ps(sum, e);
    }
    float total = _mm512_reduce_add_ps(sum);
    if (sink > -INFINITY) total += expf(sink - m);
    const __m512 inv = _mm512_set1_ps(1.0f / total);
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 mk = j + 16 <= n ? 0xffff : tail;
        _mm512_mask_storeu_ps(x + j, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + j), inv));
    }
}

/* V pass for G heads of one KV head, output elements c0 .. c0 + 16 nv: each V vector is loaded
 * and converted once for the G heads; head g skips the keys its own p_j is 0 for. */
AVX512 INLINE void v_group(int G, int nv, const uint16_t *v, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo,
                           int64_t hi, const float *s, int64_t ss, int hd, float *o, int c0) {
    const int64_t bs = kv->block_size, rs = kv->row_stride;
    __m512 acc[MXL_ATTN_HEAD_GROUP][8];
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int u = 0; u < nv; u++) acc[g][u] = _mm512_setzero_ps();
    for (int64_t b0 = lo - lo % bs; b0 < hi; b0 += bs) {
        int64_t base = mxl_attn_block_base(kv, b0) + hoff + c0;
        int64_t j1 = b0 + bs < hi ? b0 + bs : hi;
        for (int64_t j = b0 > lo ? b0 : lo; j < j1; j++) {
            const uint16_t *vj = v + base + j * rs;
            if (j + MXL_ATTN_PF_KEYS < hi) mxl_attn_prefetch_row(v, kv, j + MXL_ATTN_PF_KEYS, hoff + c0, 16 * nv);
            __m512 vv[8];
#pragma GCC unroll 8
            for (int u = 0; u < nv; u++) vv[u] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vj + 16 * u)));
#pragma GCC unroll 4
            for (int g = 0; g < G; g++) {
                float w = s[g * ss + j];
                if (w == 0.0f) continue;
                __m512 wv = _mm512_set1_ps(w);
#pragma GCC unroll 8
                for (int u = 0; u < nv; u++) acc[g][u] = _mm512_fmadd_ps(wv, vv[u], acc[g][u]);
            }
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int u = 0; u < nv; u++) _mm512_storeu_ps(o + g * hd + c0 + 16 * u, acc[g][u]);
}

/* Output columns in chunks of 128 (one head) or 64 (two or more: G x 4 accumulators) */
AVX512 void mxl_attn_v_f16_avx512(const uint16_t *v, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                                  int G, const float *s, int64_t ss, int hd, float *o) {
    MXL_ASSERT(G >= 1 && G <= MXL_ATTN_HEAD_GROUP);
    const int chunk = G == 1 ? 8 : 4; /* vectors per chunk */
    for (int c0 = 0; c0 < hd; c0 += 16 * chunk) {
        int nv = (hd - c0) / 16 < chunk ? (hd - c0) / 16 : chunk;
        switch (G * 16 + nv) {
#define VCASE(g, n) case g * 16 + n: v_group(g, n, v, kv, hoff, lo, hi, s, ss, hd, o, c0); break;
            VCASE(1, 8) VCASE(1, 7) VCASE(1, 6) VCASE(1, 5) VCASE(1, 4) VCASE(1, 3) VCASE(1, 2) VCASE(1, 1)
            VCASE(2, 4) VCASE(2, 3) VCASE(2, 2) VCASE(2, 1) VCASE(3, 4) VCASE(3, 3) VCASE(3, 2) VCASE(3, 1)
            VCASE(4, 4) VCASE(4, 3) VCASE(4, 2) VCASE(4, 1)
#undef VCASE
        default: MXL_ASSERT(0 && "attention V chunk");
        }
    }
}

/* K pass for G heads of one KV head: KEYS keys at a time (16 / G: every head's chain for every
 * key, 16 at most), each key's K vector converted once per 16 elements and multiplied into the
 * G heads' 16-lane FMA chains, then all chains reduced together (mxl_reduce16_avx512). The last
 * keys of a block run the same pass with their pointers clamped to the last one (only valid
 * scores stored), so a key's score is the same FMA chain and reduction tree wherever it falls
 * and whatever G. */
AVX512 INLINE void k_group(int G, const uint16_t *k, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                           const float *qh, int hd, float scale, float *s, int64_t ss) {
    const int KEYS = G == 1 ? 16 : G == 2 ? 8 : G == 3 ? 5 : 4;
    const int64_t bs = kv->block_size, rs = kv->row_stride;
    const int nv = hd / 16;
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int64_t b0 = lo - lo % bs; b0 < hi; b0 += bs) {
        int64_t base = mxl_attn_block_base(kv, b0) + hoff;
        int64_t j1 = b0 + bs < hi ? b0 + bs : hi;
        for (int64_t j = b0 > lo ? b0 : lo; j < j1; j += KEYS) {
            const int nk = j1 - j < KEYS ? (int)(j1 - j) : KEYS;
            const uint16_t *kp[16];
#pragma GCC unroll 16
            for (int i = 0; i < KEYS; i++) kp[i] = k + base + (j + (i < nk ? i : nk - 1)) * rs;
            for (int i = 0; i < KEYS && j + MXL_ATTN_PF_KEYS + i < hi; i++) mxl_attn_prefetch_row(k, kv, j + MXL_ATTN_PF_KEYS + i, hoff, hd);
            __m512i a[16]; /* chain of head g, key i: a[g * KEYS + i] (unused slots zero) */
#pragma GCC unroll 16
            for (int c = 0; c < 16; c++) a[c] = _mm512_setzero_si512();
            for (int u = 0; u < nv; u++) {
#pragma GCC unroll 16
                for (int i = 0; i < KEYS; i++) {
                    __m512 kv1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(kp[i] + 16 * u)));
#pragma GCC unroll 4
                    for (int g = 0; g < G; g++)
                        a[g * KEYS + i] = _mm512_castps_si512(
                            _mm512_fmadd_ps(kv1, _mm512_loadu_ps(qh + g * hd + 16 * u), _mm512_castsi512_ps(a[g * KEYS + i])));
                }
            }
            _Alignas(64) float sc[16];
            _mm512_store_ps(sc, _mm512_mul_ps(_mm512_castsi512_ps(mxl_reduce16_avx512(a, MXL_REDUCE_ADD_F32)), vscale));
#pragma GCC unroll 4
            for (int g = 0; g < G; g++)
                for (int i = 0; i < nk; i++) s[g * ss + j + i] = sc[g * KEYS + i];
        }
    }
}
AVX512 void mxl_attn_k_f16_avx512(const uint16_t *k, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                                  int G, const float *qh, int hd, float scale, float *s, int64_t ss) {
    switch (G) {
    case 1: k_group(1, k, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;
    case 2: k_group(2, k, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;
    case 3: k_group(3, k, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;
    case 4: k_group(4, k, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;
    default: MXL_ASSERT(0 && "attention K group");
    }
}

/* ---- ggml block formats ---- */

/* Bytes per block of 32 by mxl_kv_qfmt. */
static const int k_qb[MXL_KV_QFMT_COUNT + 1] = {34, 18, 20, 22, 24, 18, 14, 32};
/* int8 in scale groups of 32 (the I8 cache where heads are multiples of 32): 32 codes a block, its
 * f32 scale in the view's scale array at the block's element offset / 32 */
#define KV_I8G32 MXL_KV_QFMT_COUNT

/* Block p of format f: elements 0..15 in *lo, 16..31 in *hi. TurboQuant: d * codebook[code]
 * (kv_turbo.h), the reference's product. */
AVX512 INLINE void deq32_512(int f, const uint8_t *p, const float *sc, __m512 *lo, __m512 *hi) {
    if (f == KV_I8G32) { /* (the reference's scale * code: one rounding) */
        const __m512 d = _mm512_set1_ps(*sc);
        *lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p))));
        *hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 16)))));
        return;
    }
    uint16_t dh;
    memcpy(&dh, p, 2);
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(dh));
    if (f == MXL_KV_TURBO4) {
        const __m512 t = _mm512_loadu_ps(mxl_kv_turbo4_codebook);
        const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + 2)));
        *lo = _mm512_mul_ps(d, _mm512_permutexvar_ps(_mm512_and_si512(x, _mm512_set1_epi32(0x0F)), t));
        *hi = _mm512_mul_ps(d, _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), t));
        return;
    }
    if (f == MXL_KV_TURBO3) { /* lanes j: byte j % 8 of qs, pair j / 8; bit 2 from qh */
        const __m512 t = _mm512_zextps256_ps512(_mm256_loadu_ps(mxl_kv_turbo3_codebook)); /* (codes < 8) */
        int64_t q8;
        uint32_t qh;
        memcpy(&q8, p + 2, 8);
        memcpy(&qh, p + 10, 4);
        const __m128i q = _mm_cvtsi64_si128(q8);
        const __m512i x = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(q, q)), three = _mm512_set1_epi32(3), four = _mm512_set1_epi32(4);
        const __m512i sh_lo = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
        __m512i cl = _mm512_and_si512(_mm512_srlv_epi32(x, sh_lo), three);
        __m512i ch = _mm512_and_si512(_mm512_srlv_epi32(x, _mm512_add_epi32(sh_lo, four)), three);
        cl = _mm512_mask_or_epi32(cl, (__mmask16)(qh & 0xFFFF), cl, four);
        ch = _mm512_mask_or_epi32(ch, (__mmask16)(qh >> 16), ch, four);
        *lo = _mm512_mul_ps(d, _mm512_permutexvar_ps(cl, t));
        *hi = _mm512_mul_ps(d, _mm512_permutexvar_ps(ch, t));
        return;
    }
    if (f == MXL_KV_Q8_0) {
        *lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 2)))), d);
        *hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 18)))), d);
        return;
    }
    const bool asym = f == MXL_KV_Q4_1 || f == MXL_KV_Q5_1, q5 = f == MXL_KV_Q5_0 || f == MXL_KV_Q5_1;
    const uint8_t *qs = p + (asym ? 4 : 2) + (q5 ? 4 : 0);
    const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));
    __m512i cl = _mm512_and_si512(x, _mm512_set1_epi32(0x0F)), ch = _mm512_srli_epi32(x, 4);
    if (q5) {
        uint32_t qh;
        memcpy(&qh, p + (asym ? 4 : 2), 4);
        const __m512i b4 = _mm512_set1_epi32(16);
        cl = _mm512_mask_or_epi32(cl, (__mmask16)(qh & 0xFFFF), cl, b4);
        ch = _mm512_mask_or_epi32(ch, (__mmask16)(qh >> 16), ch, b4);
    }
    __m512 off;
    if (asym) {
        uint16_t mh;
        memcpy(&mh, p + 2, 2);
        off = _mm512_set1_ps(_cvtsh_ss(mh));
    } else {
        off = _mm512_mul_ps(d, _mm512_set1_ps(q5 ? -16.0f : -8.0f));
    }
    *lo = _mm512_fmadd_ps(_mm512_cvtepi32_ps(cl), d, off);
    *hi = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ch), d, off);
}

/* K pass (as k_group above): KEYS keys at a time, each key's blocks dequantized once for the G
 * heads, a 16-lane FMA chain per (head, key) over the blocks' low then high halves, the chains
 * reduced together. */
AVX512 INLINE void kq_group(int f, int G, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, const float *qh,
                            int hd, float scale, float *s, int64_t ss) {
    const int KEYS = G == 1 ? 16 : G == 2 ? 8 : G == 3 ? 5 : 4, bb = k_qb[f];
    const int64_t bs = kv->block_size, rs = kv->row_stride;
    const int nb = hd / 32;
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int64_t b0 = lo - lo % bs; b0 < hi; b0 += bs) {
        int64_t base = mxl_attn_block_base(kv, b0) + hoff;
        int64_t j1 = b0 + bs < hi ? b0 + bs : hi;
        for (int64_t j = b0 > lo ? b0 : lo; j < j1; j += KEYS) {
            const int nk = j1 - j < KEYS ? (int)(j1 - j) : KEYS;
            const uint8_t *kp[16];
            const float *ks[16] = {0};
#pragma GCC unroll 16
            for (int i = 0; i < KEYS; i++) {
                const int64_t e = base + (j + (i < nk ? i : nk - 1)) * rs;
                kp[i] = mxl_attn_qrow(kv->k, bb, e);
                if (f == KV_I8G32) ks[i] = kv->k_scale + e / 32;
            }
            for (int i = 0; i < KEYS && j + MXL_ATTN_PF_KEYS + i < hi; i++) mxl_attn_prefetch_qrow(kv->k, bb, kv, j + MXL_ATTN_PF_KEYS + i, hoff, hd);
            __m512i a[16];
#pragma GCC unroll 16
            for (int c = 0; c < 16; c++) a[c] = _mm512_setzero_si512();
            for (int u = 0; u < nb; u++) {
#pragma GCC unroll 16
                for (int i = 0; i < KEYS; i++) {
                    __m512 k0, k1;
                    deq32_512(f, kp[i] + u * bb, ks[i] + u, &k0, &k1);
#pragma GCC unroll 4
                    for (int g = 0; g < G; g++) {
                        __m512 acc = _mm512_castsi512_ps(a[g * KEYS + i]);
                        acc = _mm512_fmadd_ps(k0, _mm512_loadu_ps(qh + g * hd + 32 * u), acc);
                        acc = _mm512_fmadd_ps(k1, _mm512_loadu_ps(qh + g * hd + 32 * u + 16), acc);
                        a[g * KEYS + i] = _mm512_castps_si512(acc);
                    }
                }
            }
            _Alignas(64) float sc[16];
            _mm512_store_ps(sc, _mm512_mul_ps(_mm512_castsi512_ps(mxl_reduce16_avx512(a, MXL_REDUCE_ADD_F32)), vscale));
#pragma GCC unroll 4
            for (int g = 0; g < G; g++)
                for (int i = 0; i < nk; i++) s[g * ss + j + i] = sc[g * KEYS + i];
        }
    }
}

/* V pass (as v_group above) over output blocks c0 / 32 .. + nbk: accumulators held across the
 * keys, each key's blocks dequantized once for the G heads. */
AVX512 INLINE void vq_group(int f, int G, int nbk, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                            const float *s, int64_t ss, int hd, float *o, int c0) {
    const int64_t bs = kv->block_size, rs = kv->row_stride;
    const int bb = k_qb[f];
    __m512 acc[MXL_ATTN_HEAD_GROUP][8];
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int u = 0; u < 2 * nbk; u++) acc[g][u] = _mm512_setzero_ps();
    for (int64_t b0 = lo - lo % bs; b0 < hi; b0 += bs) {
        int64_t base = mxl_attn_block_base(kv, b0) + hoff + c0;
        int64_t j1 = b0 + bs < hi ? b0 + bs : hi;
        for (int64_t j = b0 > lo ? b0 : lo; j < j1; j++) {
            const uint8_t *vj = mxl_attn_qrow(kv->v, bb, base + j * rs);
            const float *vs = f == KV_I8G32 ? kv->v_scale + (base + j * rs) / 32 : NULL;
            if (j + MXL_ATTN_PF_KEYS < hi) mxl_attn_prefetch_qrow(kv->v, bb, kv, j + MXL_ATTN_PF_KEYS, hoff + c0, 32 * nbk);
            __m512 vv[8];
#pragma GCC unroll 4
            for (int u = 0; u < nbk; u++) deq32_512(f, vj + u * bb, vs + u, &vv[2 * u], &vv[2 * u + 1]);
#pragma GCC unroll 4
            for (int g = 0; g < G; g++) {
                float w = s[g * ss + j];
                if (w == 0.0f) continue;
                __m512 wv = _mm512_set1_ps(w);
#pragma GCC unroll 8
                for (int u = 0; u < 2 * nbk; u++) acc[g][u] = _mm512_fmadd_ps(wv, vv[u], acc[g][u]);
            }
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int u = 0; u < 2 * nbk; u++) _mm512_storeu_ps(o + g * hd + c0 + 16 * u, acc[g][u]);
}

#define KQ_G(f)                                                                   \
    switch (G) {                                                                  \
    case 1: kq_group(f, 1, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;        \
    case 2: kq_group(f, 2, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;        \
    case 3: kq_group(f, 3, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;        \
    case 4: kq_group(f, 4, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;        \
    default: MXL_ASSERT(0 && "attention K group");                                 \
    }
AVX512 void mxl_attn_k_q_avx512(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *qh, int hd,
                                float scale, float *s, int64_t ss) {
    MXL_ASSERT(hd % 32 == 0);
    switch (mxl_kv_qfmt_of(kv->k_type)) {
    case MXL_KV_Q8_0: KQ_G(MXL_KV_Q8_0) break;
    case MXL_KV_Q4_0: KQ_G(MXL_KV_Q4_0) break;
    case MXL_KV_Q4_1: KQ_G(MXL_KV_Q4_1) break;
    case MXL_KV_Q5_0: KQ_G(MXL_KV_Q5_0) break;
    case MXL_KV_Q5_1: KQ_G(MXL_KV_Q5_1) break;
    case MXL_KV_TURBO4: KQ_G(MXL_KV_TURBO4) break;
    case MXL_KV_TURBO3: KQ_G(MXL_KV_TURBO3) break;
    default:
        MXL_ASSERT(kv->k_type == MXL_DTYPE_I8 && kv->group == 32 && "attention K: not a block format");
        KQ_G(KV_I8G32)
    }
}
#undef KQ_G

/* Output columns in chunks of 4 blocks (one head: 8 accumulators) or 2 (two or more heads). */
#define VQ_G(f)                                                                                     \
    switch (G * 16 + nbk) {                                                                         \
    case 16 + 4: vq_group(f, 1, 4, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                      \
    case 16 + 3: vq_group(f, 1, 3, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                      \
    case 16 + 2: vq_group(f, 1, 2, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                      \
    case 16 + 1: vq_group(f, 1, 1, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                      \
    case 32 + 2: vq_group(f, 2, 2, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                      \
    case 32 + 1: vq_group(f, 2, 1, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                      \
    case 48 + 2: vq_group(f, 3, 2, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                      \
    case 48 + 1: vq_group(f, 3, 1, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                      \
    case 64 + 2: vq_group(f, 4, 2, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                      \
    case 64 + 1: vq_group(f, 4, 1, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                      \
    default: MXL_ASSERT(0 && "attention V chunk");                                                  \
    }
AVX512 void mxl_attn_v_q_avx512(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *s, int64_t ss,
                                int hd, float *o) {
    MXL_ASSERT(G >= 1 && G <= MXL_ATTN_HEAD_GROUP && hd % 32 == 0);
    const int chunk = G == 1 ? 4 : 2, f = mxl_kv_qfmt_of(kv->v_type);
    for (int c0 = 0; c0 < hd; c0 += 32 * chunk) {
        const int nbk = (hd - c0) / 32 < chunk ? (hd - c0) / 32 : chunk;
        switch (f) {
        case MXL_KV_Q8_0: VQ_G(MXL_KV_Q8_0) break;
        case MXL_KV_Q4_0: VQ_G(MXL_KV_Q4_0) break;
        case MXL_KV_Q4_1: VQ_G(MXL_KV_Q4_1) break;
        case MXL_KV_Q5_0: VQ_G(MXL_KV_Q5_0) break;
        case MXL_KV_Q5_1: VQ_G(MXL_KV_Q5_1) break;
        case MXL_KV_TURBO4: VQ_G(MXL_KV_TURBO4) break;
        case MXL_KV_TURBO3: VQ_G(MXL_KV_TURBO3) break;
        default:
            MXL_ASSERT(kv->v_type == MXL_DTYPE_I8 && kv->group == 32 && "attention V: not a block format");
            VQ_G(KV_I8G32)
        }
    }
}
#undef VQ_G
#else
void mxl_attn_softmax_avx512(float *x, int64_t n, float sink) {
    (void)x; (void)n; (void)sink;
    MXL_ASSERT(0 && "no AVX-512 on this build");
}
void mxl_attn_k_f16_avx512(const uint16_t *k, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                           int G, const float *qh, int hd, float scale, float *s, int64_t ss) {
    (void)k; (void)kv; (void)hoff; (void)lo; (void)hi; (void)G; (void)qh; (void)hd; (void)scale; (void)s; (void)ss;
    MXL_ASSERT(0 && "no AVX-512 on this build");
}
void mxl_attn_v_f16_avx512(const uint16_t *v, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                           int G, const float *s, int64_t ss, int hd, float *o) {
    (void)v; (void)kv; (void)hoff; (void)lo; (void)hi; (void)G; (void)s; (void)ss; (void)hd; (void)o;
    MXL_ASSERT(0 && "no AVX-512 on this build");
}
void mxl_attn_k_q_avx512(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *qh, int hd,
                         float scale, float *s, int64_t ss) {
    (void)kv; (void)hoff; (void)lo; (void)hi; (void)G; (void)qh; (void)hd; (void)scale; (void)s; (void)ss;
    MXL_ASSERT(0 && "no AVX-512 on this build");
}
void mxl_attn_v_q_avx512(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *s, int64_t ss,
                         int hd, float *o) {
    (void)kv; (void)hoff; (void)lo; (void)hi; (void)G; (void)s; (void)ss; (void)hd; (void)o;
    MXL_ASSERT(0 && "no AVX-512 on this build");
}
#endif
