/* attention_avx512.c - the f16 K and V passes of attention.c on AVX-512, for G (1..4) query heads
 * that share one KV head (grouped-query attention), so each K and V vector is loaded and
 * converted once per group instead of once per head. K: scores 16 / G keys at a time, each a
 * 16-lane FMA chain per head, the 16 chains reduced together. V: out = sum_j p_j v_j per head,
 * 128 (one head) or 64 (a group) output elements at a time held in zmm accumulators while the
 * keys are walked (block by block, in position order, each head skipping the keys its p_j is 0
 * for), instead of an axpy that loads and stores the whole output row per key. Per element and
 * head it is the same fma(p_j, v_j, acc) chain from 0 as the axpy kernels, so results are
 * bitwise those of attention.c's AVX2 path, and the same for every G. */
#include "backends/cpu/attention.h"

#include <math.h>

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
#endif
