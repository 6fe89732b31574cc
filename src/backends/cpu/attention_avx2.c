/* attention_avx2.c - the f16 and ggml block-format (q8_0, q4_0, q4_1, q5_0, q5_1) K and V passes
 * of attention.c on AVX2, for G (1..4) query heads that
 * share one KV head (grouped-query attention): each K and V vector is loaded and converted once
 * per group instead of once per head, several keys are scored per pass, and the output is held
 * in registers while the keys go by instead of an axpy that loads and stores the whole output row
 * per key. Bit for bit the per-head AVX2 kernels (kv_quant.c) that attention.c's one-head path
 * calls: a score is the f16 dot's two 8-lane FMA chains over 16-element steps, summed and reduced
 * by mxl_hsum8_avx2, times the scale; an output element is the axpy's fma(p_j, v_j, acc) chain
 * from 0 over the keys whose p_j is not 0. hd is a multiple of 16. The block formats likewise
 * reproduce kv_quant.c's per-head block kernels: each block decoded by kv_quant_avx2.h into four
 * 8-lane vectors, a score the two chains over vectors 0, 2 and 1, 3 of every block, an output
 * element the fma chain of the axpy; hd is a multiple of 32. */
#include "backends/cpu/attention.h"

#include "core/status.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backends/cpu/kv_quant_avx2.h"
#include "backends/cpu/reduce_avx2.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE __attribute__((always_inline)) static inline

/* K pass for G heads of one KV head, KEYS keys at a time (12 chains: 2 per head and key). The
 * last keys of a block run the same pass with their pointers clamped to the last one (only valid
 * scores stored). */
AVX2 INLINE void k_group(int G, const uint16_t *k, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                         const float *qh, int hd, float scale, float *s, int64_t ss) {
    const int KEYS = G == 1 ? 6 : G == 2 ? 3 : G == 3 ? 2 : 1;
    const int64_t bs = kv->block_size, rs = kv->row_stride;
    for (int64_t j = lo; j < hi && j < lo + MXL_ATTN_PF_KEYS; j++) mxl_attn_prefetch_row(k, kv, j, hoff, hd); /* the first keys */
    for (int64_t b0 = lo - lo % bs; b0 < hi; b0 += bs) {
        const int64_t base = mxl_attn_block_base(kv, b0) + hoff;
        const int64_t j1 = b0 + bs < hi ? b0 + bs : hi;
        for (int64_t j = b0 > lo ? b0 : lo; j < j1; j += KEYS) {
            const int nk = j1 - j < KEYS ? (int)(j1 - j) : KEYS;
            const uint16_t *kp[6];
#pragma GCC unroll 6
            for (int i = 0; i < KEYS; i++) kp[i] = k + base + (j + (i < nk ? i : nk - 1)) * rs;
            for (int i = 0; i < KEYS && j + MXL_ATTN_PF_KEYS + i < hi; i++) mxl_attn_prefetch_row(k, kv, j + MXL_ATTN_PF_KEYS + i, hoff, hd);
            __m256 a0[4][6], a1[4][6]; /* head g, key i: the chains of the even and odd 8-element halves */
#pragma GCC unroll 4
            for (int g = 0; g < G; g++)
#pragma GCC unroll 6
                for (int i = 0; i < KEYS; i++) a0[g][i] = a1[g][i] = _mm256_setzero_ps();
            for (int e = 0; e < hd; e += 16) {
#pragma GCC unroll 6
                for (int i = 0; i < KEYS; i++) {
                    const __m256 k0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kp[i] + e)));
                    const __m256 k1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kp[i] + e + 8)));
#pragma GCC unroll 4
                    for (int g = 0; g < G; g++) {
                        a0[g][i] = _mm256_fmadd_ps(k0, _mm256_loadu_ps(qh + g * hd + e), a0[g][i]);
                        a1[g][i] = _mm256_fmadd_ps(k1, _mm256_loadu_ps(qh + g * hd + e + 8), a1[g][i]);
                    }
                }
            }
#pragma GCC unroll 4
            for (int g = 0; g < G; g++)
                for (int i = 0; i < nk; i++) s[g * ss + j + i] = mxl_hsum8_avx2(_mm256_add_ps(a0[g][i], a1[g][i])) * scale;
        }
    }
}

AVX2 void mxl_attn_k_f16_avx2(const uint16_t *k, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G,
                         const float *qh, int hd, float scale, float *s, int64_t ss) {
    MXL_ASSERT(hd % 16 == 0);
    switch (G) {
    case 1: k_group(1, k, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;
    case 2: k_group(2, k, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;
    case 3: k_group(3, k, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;
    case 4: k_group(4, k, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;
    default: MXL_ASSERT(0 && "attention K group");
    }
}

/* V pass for G heads of one KV head, output elements c0 .. c0 + 8 nv (G nv <= 12 accumulators):
 * each V vector loaded and converted once for the G heads; head g skips the keys its p_j is 0
 * for. */
AVX2 INLINE void v_group(int G, int nv, const uint16_t *v, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                         const float *s, int64_t ss, int hd, float *o, int c0) {
    const int64_t bs = kv->block_size, rs = kv->row_stride;
    for (int64_t j = lo; j < hi && j < lo + MXL_ATTN_PF_KEYS; j++) mxl_attn_prefetch_row(v, kv, j, hoff + c0, 8 * nv);
    __m256 acc[4][8];
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int u = 0; u < nv; u++) acc[g][u] = _mm256_setzero_ps();
    for (int64_t b0 = lo - lo % bs; b0 < hi; b0 += bs) {
        const int64_t base = mxl_attn_block_base(kv, b0) + hoff + c0;
        const int64_t j1 = b0 + bs < hi ? b0 + bs : hi;
        for (int64_t j = b0 > lo ? b0 : lo; j < j1; j++) {
            const uint16_t *vj = v + base + j * rs;
            if (j + MXL_ATTN_PF_KEYS < hi) mxl_attn_prefetch_row(v, kv, j + MXL_ATTN_PF_KEYS, hoff + c0, 8 * nv);
            __m256 vv[8];
#pragma GCC unroll 8
            for (int u = 0; u < nv; u++) vv[u] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(vj + 8 * u)));
#pragma GCC unroll 4
            for (int g = 0; g < G; g++) {
                const float w = s[g * ss + j];
                if (w == 0.0f) continue;
                const __m256 wv = _mm256_set1_ps(w);
#pragma GCC unroll 8
                for (int u = 0; u < nv; u++) acc[g][u] = _mm256_fmadd_ps(wv, vv[u], acc[g][u]);
            }
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int u = 0; u < nv; u++) _mm256_storeu_ps(o + g * hd + c0 + 8 * u, acc[g][u]);
}

/* Output columns in chunks of 64 (one head), 48 (two), 32 (three) or 24 (four) */
AVX2 void mxl_attn_v_f16_avx2(const uint16_t *v, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G,
                         const float *s, int64_t ss, int hd, float *o) {
    MXL_ASSERT(G >= 1 && G <= MXL_ATTN_HEAD_GROUP && hd % 16 == 0);
    const int chunk = G == 1 ? 8 : G == 2 ? 6 : G == 3 ? 4 : 3; /* vectors per chunk */
    for (int c0 = 0; c0 < hd; c0 += 8 * chunk) {
        const int nv = (hd - c0) / 8 < chunk ? (hd - c0) / 8 : chunk;
        switch (G * 16 + nv) {
#define VCASE(g, n) \
    case g * 16 + n: v_group(g, n, v, kv, hoff, lo, hi, s, ss, hd, o, c0); break;
            VCASE(1, 8) VCASE(1, 6) VCASE(1, 4) VCASE(1, 2) VCASE(2, 6) VCASE(2, 4) VCASE(2, 2) VCASE(3, 4) VCASE(3, 2)
            VCASE(4, 3) VCASE(4, 2) VCASE(4, 1)
#undef VCASE
        default: MXL_ASSERT(0 && "attention V chunk");
        }
    }
}

/* ---- ggml block formats ---- */

/* K pass for G heads of one KV head, KEYS keys at a time (2 chains per head and key, 8 at most),
 * each key's blocks decoded once for the G heads. */
AVX2 INLINE void kq_group(mxl_kv_qfmt f, int G, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, const float *qh,
                          int hd, float scale, float *s, int64_t ss) {
    const int KEYS = G == 1 ? 4 : G == 2 ? 2 : 1, bb = mxl_kv_qbytes[f];
    const int64_t bs = kv->block_size, rs = kv->row_stride;
    for (int64_t j = lo; j < hi && j < lo + MXL_ATTN_PF_KEYS; j++) mxl_attn_prefetch_qrow(kv->k, bb, kv, j, hoff, hd);
    for (int64_t b0 = lo - lo % bs; b0 < hi; b0 += bs) {
        const int64_t base = mxl_attn_block_base(kv, b0) + hoff;
        const int64_t j1 = b0 + bs < hi ? b0 + bs : hi;
        for (int64_t j = b0 > lo ? b0 : lo; j < j1; j += KEYS) {
            const int nk = j1 - j < KEYS ? (int)(j1 - j) : KEYS;
            const uint8_t *kp[4];
#pragma GCC unroll 4
            for (int i = 0; i < KEYS; i++) kp[i] = mxl_attn_qrow(kv->k, bb, base + (j + (i < nk ? i : nk - 1)) * rs);
            for (int i = 0; i < KEYS && j + MXL_ATTN_PF_KEYS + i < hi; i++)
                mxl_attn_prefetch_qrow(kv->k, bb, kv, j + MXL_ATTN_PF_KEYS + i, hoff, hd);
            __m256 a0[4][4], a1[4][4];
#pragma GCC unroll 4
            for (int g = 0; g < G; g++)
#pragma GCC unroll 4
                for (int i = 0; i < KEYS; i++) a0[g][i] = a1[g][i] = _mm256_setzero_ps();
            for (int u = 0; u < hd / 32; u++) {
#pragma GCC unroll 4
                for (int i = 0; i < KEYS; i++) {
                    __m256 v[4];
                    mxl_kv_deq32_avx2(f, kp[i] + u * bb, v);
#pragma GCC unroll 4
                    for (int g = 0; g < G; g++) {
                        const float *x = qh + g * hd + 32 * u;
                        a0[g][i] = _mm256_fmadd_ps(v[0], _mm256_loadu_ps(x), a0[g][i]);
                        a1[g][i] = _mm256_fmadd_ps(v[1], _mm256_loadu_ps(x + 8), a1[g][i]);
                        a0[g][i] = _mm256_fmadd_ps(v[2], _mm256_loadu_ps(x + 16), a0[g][i]);
                        a1[g][i] = _mm256_fmadd_ps(v[3], _mm256_loadu_ps(x + 24), a1[g][i]);
                    }
                }
            }
#pragma GCC unroll 4
            for (int g = 0; g < G; g++)
                for (int i = 0; i < nk; i++) s[g * ss + j + i] = mxl_hsum8_avx2(_mm256_add_ps(a0[g][i], a1[g][i])) * scale;
        }
    }
}

#define KQ2_G(f)                                                                     \
    switch (G) {                                                                     \
    case 1: kq_group(f, 1, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;           \
    case 2: kq_group(f, 2, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;           \
    case 3: kq_group(f, 3, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;           \
    case 4: kq_group(f, 4, kv, hoff, lo, hi, qh, hd, scale, s, ss); break;           \
    default: MXL_ASSERT(0 && "attention K group");                                    \
    }
AVX2 void mxl_attn_k_q_avx2(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *qh, int hd,
                            float scale, float *s, int64_t ss) {
    MXL_ASSERT(hd % 32 == 0);
    switch (mxl_kv_qfmt_of(kv->k_type)) {
    case MXL_KV_Q8_0: KQ2_G(MXL_KV_Q8_0) break;
    case MXL_KV_Q4_0: KQ2_G(MXL_KV_Q4_0) break;
    case MXL_KV_Q4_1: KQ2_G(MXL_KV_Q4_1) break;
    case MXL_KV_Q5_0: KQ2_G(MXL_KV_Q5_0) break;
    case MXL_KV_Q5_1: KQ2_G(MXL_KV_Q5_1) break;
    case MXL_KV_TURBO4: KQ2_G(MXL_KV_TURBO4) break;
    case MXL_KV_TURBO3: KQ2_G(MXL_KV_TURBO3) break;
    default: MXL_ASSERT(0 && "attention K: not a block format");
    }
}
#undef KQ2_G

/* V pass for G (1..3) heads of one KV head over output blocks c0 / 32 .. + nbk (4 G nbk <= 12
 * accumulators), each key's blocks decoded once for the G heads. */
AVX2 INLINE void vq_group(mxl_kv_qfmt f, int G, int nbk, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                          const float *s, int64_t ss, int hd, float *o, int c0) {
    const int64_t bs = kv->block_size, rs = kv->row_stride;
    const int bb = mxl_kv_qbytes[f];
    for (int64_t j = lo; j < hi && j < lo + MXL_ATTN_PF_KEYS; j++) mxl_attn_prefetch_qrow(kv->v, bb, kv, j, hoff + c0, 32 * nbk);
    __m256 acc[3][8];
#pragma GCC unroll 3
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int u = 0; u < 4 * nbk; u++) acc[g][u] = _mm256_setzero_ps();
    for (int64_t b0 = lo - lo % bs; b0 < hi; b0 += bs) {
        const int64_t base = mxl_attn_block_base(kv, b0) + hoff + c0;
        const int64_t j1 = b0 + bs < hi ? b0 + bs : hi;
        for (int64_t j = b0 > lo ? b0 : lo; j < j1; j++) {
            const uint8_t *vj = mxl_attn_qrow(kv->v, bb, base + j * rs);
            if (j + MXL_ATTN_PF_KEYS < hi) mxl_attn_prefetch_qrow(kv->v, bb, kv, j + MXL_ATTN_PF_KEYS, hoff + c0, 32 * nbk);
#pragma GCC unroll 2
            for (int u = 0; u < nbk; u++) {
                __m256 v[4];
                mxl_kv_deq32_avx2(f, vj + u * bb, v);
#pragma GCC unroll 3
                for (int g = 0; g < G; g++) {
                    const float w = s[g * ss + j];
                    if (w == 0.0f) continue;
                    const __m256 wv = _mm256_set1_ps(w);
#pragma GCC unroll 4
                    for (int i = 0; i < 4; i++) acc[g][4 * u + i] = _mm256_fmadd_ps(wv, v[i], acc[g][4 * u + i]);
                }
            }
        }
    }
#pragma GCC unroll 3
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int u = 0; u < 4 * nbk; u++) _mm256_storeu_ps(o + g * hd + c0 + 8 * u, acc[g][u]);
}

/* Output columns in chunks of 2 blocks (one head) or 1 (two or three); four heads run as two
 * pairs. */
#define VQ2_G(f)                                                                                   \
    switch (G * 16 + nbk) {                                                                        \
    case 16 + 2: vq_group(f, 1, 2, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                     \
    case 16 + 1: vq_group(f, 1, 1, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                     \
    case 32 + 1: vq_group(f, 2, 1, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                     \
    case 48 + 1: vq_group(f, 3, 1, kv, hoff, lo, hi, s, ss, hd, o, c0); break;                     \
    default: MXL_ASSERT(0 && "attention V chunk");                                                 \
    }
AVX2 void mxl_attn_v_q_avx2(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *s, int64_t ss,
                            int hd, float *o) {
    MXL_ASSERT(G >= 1 && G <= MXL_ATTN_HEAD_GROUP && hd % 32 == 0);
    if (G == 4) {
        mxl_attn_v_q_avx2(kv, hoff, lo, hi, 2, s, ss, hd, o);
        mxl_attn_v_q_avx2(kv, hoff, lo, hi, 2, s + 2 * ss, ss, hd, o + 2 * hd);
        return;
    }
    const int chunk = G == 1 ? 2 : 1;
    for (int c0 = 0; c0 < hd; c0 += 32 * chunk) {
        const int nbk = (hd - c0) / 32 < chunk ? (hd - c0) / 32 : chunk;
        switch (mxl_kv_qfmt_of(kv->v_type)) {
        case MXL_KV_Q8_0: VQ2_G(MXL_KV_Q8_0) break;
        case MXL_KV_Q4_0: VQ2_G(MXL_KV_Q4_0) break;
        case MXL_KV_Q4_1: VQ2_G(MXL_KV_Q4_1) break;
        case MXL_KV_Q5_0: VQ2_G(MXL_KV_Q5_0) break;
        case MXL_KV_Q5_1: VQ2_G(MXL_KV_Q5_1) break;
        case MXL_KV_TURBO4: VQ2_G(MXL_KV_TURBO4) break;
        case MXL_KV_TURBO3: VQ2_G(MXL_KV_TURBO3) break;
        default: MXL_ASSERT(0 && "attention V: not a block format");
        }
    }
}
#undef VQ2_G
#else
void mxl_attn_k_f16_avx2(const uint16_t *k, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G,
                         const float *qh, int hd, float scale, float *s, int64_t ss) {
    (void)k; (void)kv; (void)hoff; (void)lo; (void)hi; (void)G; (void)qh; (void)hd; (void)scale; (void)s; (void)ss;
    MXL_ASSERT(0 && "no AVX2 on this build");
}
void mxl_attn_v_f16_avx2(const uint16_t *v, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G,
                         const float *s, int64_t ss, int hd, float *o) {
    (void)v; (void)kv; (void)hoff; (void)lo; (void)hi; (void)G; (void)s; (void)ss; (void)hd; (void)o;
    MXL_ASSERT(0 && "no AVX2 on this build");
}
void mxl_attn_k_q_avx2(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *qh, int hd,
                       float scale, float *s, int64_t ss) {
    (void)kv; (void)hoff; (void)lo; (void)hi; (void)G; (void)qh; (void)hd; (void)scale; (void)s; (void)ss;
    MXL_ASSERT(0 && "no AVX2 on this build");
}
void mxl_attn_v_q_avx2(const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi, int G, const float *s, int64_t ss,
                       int hd, float *o) {
    (void)kv; (void)hoff; (void)lo; (void)hi; (void)G; (void)s; (void)ss; (void)hd; (void)o;
    MXL_ASSERT(0 && "no AVX2 on this build");
}
#endif
