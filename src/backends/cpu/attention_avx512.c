/* attention_avx512.c - the f16 K and V passes of attention.c on AVX-512. K: scores four keys at a
 * time, each a 16-lane FMA chain reduced once. V: out = sum_j p_j v_j for one
 * (token, head), 128 output elements at a time held in eight zmm accumulators while the keys are
 * walked (block by block, in position order, skipping p_j == 0), instead of an axpy that loads and
 * stores the whole output row per key. Per element it is the same fma(p_j, v_j, acc) chain from
 * 0 as the axpy kernels, so results are bitwise those of attention.c's AVX2 path. */
#include "backends/cpu/attention.h"

#include "core/status.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

AVX512 void mxl_attn_v_f16_avx512(const uint16_t *v, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                                  const float *s, int hd, float *o) {
    const int64_t bs = kv->block_size, rs = kv->row_stride;
    for (int c0 = 0; c0 < hd; c0 += 128) {
        int nv = (hd - c0) / 16 < 8 ? (hd - c0) / 16 : 8;
        __m512 acc[8];
        for (int u = 0; u < 8; u++) acc[u] = _mm512_setzero_ps();
        for (int64_t b0 = lo - lo % bs; b0 < hi; b0 += bs) {
            int64_t base = (int64_t)kv->blocks[b0 / bs] * kv->block_stride - b0 * rs + hoff + c0;
            int64_t j1 = b0 + bs < hi ? b0 + bs : hi;
            for (int64_t j = b0 > lo ? b0 : lo; j < j1; j++) {
                float w = s[j];
                if (w == 0.0f) continue;
                const uint16_t *vj = v + base + j * rs;
                __m512 wv = _mm512_set1_ps(w);
                if (nv == 8) {
#pragma GCC unroll 8
                    for (int u = 0; u < 8; u++)
                        acc[u] = _mm512_fmadd_ps(wv, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vj + 16 * u))), acc[u]);
                } else {
                    for (int u = 0; u < nv; u++)
                        acc[u] = _mm512_fmadd_ps(wv, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vj + 16 * u))), acc[u]);
                }
            }
        }
        for (int u = 0; u < nv; u++) _mm512_storeu_ps(o + c0 + 16 * u, acc[u]);
    }
}
/* s[j] = scale * q . K_j over the visible keys, four keys at a time (four independent FMA
 * chains of head_dim / 16 steps, each reduced once). */
AVX512 void mxl_attn_k_f16_avx512(const uint16_t *k, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                                  const float *qh, int hd, float scale, float *s) {
    const int64_t bs = kv->block_size, rs = kv->row_stride;
    const int nv = hd / 16;
    for (int64_t b0 = lo - lo % bs; b0 < hi; b0 += bs) {
        int64_t base = (int64_t)kv->blocks[b0 / bs] * kv->block_stride - b0 * rs + hoff;
        int64_t j = b0 > lo ? b0 : lo, j1 = b0 + bs < hi ? b0 + bs : hi;
        for (; j + 4 <= j1; j += 4) {
            const uint16_t *k0 = k + base + j * rs;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int u = 0; u < nv; u++) {
                __m512 qv = _mm512_loadu_ps(qh + 16 * u);
                a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(k0 + 16 * u))), qv, a0);
                a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(k0 + rs + 16 * u))), qv, a1);
                a2 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(k0 + 2 * rs + 16 * u))), qv, a2);
                a3 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(k0 + 3 * rs + 16 * u))), qv, a3);
            }
            s[j] = _mm512_reduce_add_ps(a0) * scale;
            s[j + 1] = _mm512_reduce_add_ps(a1) * scale;
            s[j + 2] = _mm512_reduce_add_ps(a2) * scale;
            s[j + 3] = _mm512_reduce_add_ps(a3) * scale;
        }
        for (; j < j1; j++) {
            const uint16_t *kj = k + base + j * rs;
            __m512 a = _mm512_setzero_ps();
            for (int u = 0; u < nv; u++)
                a = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(kj + 16 * u))), _mm512_loadu_ps(qh + 16 * u), a);
            s[j] = _mm512_reduce_add_ps(a) * scale;
        }
    }
}
#else
void mxl_attn_k_f16_avx512(const uint16_t *k, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                           const float *qh, int hd, float scale, float *s) {
    (void)k; (void)kv; (void)hoff; (void)lo; (void)hi; (void)qh; (void)hd; (void)scale; (void)s;
    MXL_ASSERT(0 && "no AVX-512 on this build");
}
void mxl_attn_v_f16_avx512(const uint16_t *v, const mxl_kv_paged_view *kv, int64_t hoff, int64_t lo, int64_t hi,
                           const float *s, int hd, float *o) {
    (void)v; (void)kv; (void)hoff; (void)lo; (void)hi; (void)s; (void)hd; (void)o;
    MXL_ASSERT(0 && "no AVX-512 on this build");
}
#endif
