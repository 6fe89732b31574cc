/* attention_enc_avx512.c - one (sequence, head) of attention_enc.h on AVX-512.
 * scratch: kt [d][Lp] (K^T, zero past L), s [4][Lp] (score / probability rows).
 * Scores: 4 queries x 32 (then 16) keys per step, sum over c in order. Softmax per row with the vector exp
 * (inputs clamped at -87; keys past L get probability 0). Output: sum_j p_j v_j over j in order,
 * 4 queries sharing each V row load, then divided by the row's sum. */
#include "backends/cpu/attention_enc.h"

#include <math.h>

#include "core/status.h"

#if defined(__x86_64__)
#include "backends/cpu/vexp_avx512.h"

/* nq (1..4) queries starting at q (row stride `stride`) */
AVX512 __attribute__((always_inline)) static inline void block(int nq, const float *q, const float *v, float *out,
                                                               int64_t stride, int64_t L, int64_t Lp, int d,
                                                               float scale, const float *kt, float *s) {
    /* scores: 32 keys at a time (eight accumulators for four queries hide the FMA latency) */
    int64_t j0 = 0;
    for (; j0 + 32 <= Lp; j0 += 32) {
        __m512 acc[4], acc2[4];
#pragma GCC unroll 4
        for (int r = 0; r < nq; r++) acc[r] = acc2[r] = _mm512_setzero_ps();
        for (int c = 0; c < d; c++) {
            __m512 kv = _mm512_loadu_ps(kt + (int64_t)c * Lp + j0), kv2 = _mm512_loadu_ps(kt + (int64_t)c * Lp + j0 + 16);
#pragma GCC unroll 4
            for (int r = 0; r < nq; r++) {
                __m512 qb = _mm512_set1_ps(q[r * stride + c]);
                acc[r] = _mm512_fmadd_ps(qb, kv, acc[r]);
                acc2[r] = _mm512_fmadd_ps(qb, kv2, acc2[r]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < nq; r++) {
            _mm512_storeu_ps(s + r * Lp + j0, _mm512_mul_ps(acc[r], _mm512_set1_ps(scale)));
            _mm512_storeu_ps(s + r * Lp + j0 + 16, _mm512_mul_ps(acc2[r], _mm512_set1_ps(scale)));
        }
    }
    for (int64_t j = j0; j < Lp; j += 16) {
        __m512 acc[4];
#pragma GCC unroll 4
        for (int r = 0; r < nq; r++) acc[r] = _mm512_setzero_ps();
        for (int c = 0; c < d; c++) {
            __m512 kv = _mm512_loadu_ps(kt + (int64_t)c * Lp + j);
#pragma GCC unroll 4
            for (int r = 0; r < nq; r++) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r * stride + c]), kv, acc[r]);
        }
#pragma GCC unroll 4
        for (int r = 0; r < nq; r++) _mm512_storeu_ps(s + r * Lp + j, _mm512_mul_ps(acc[r], _mm512_set1_ps(scale)));
    }
    float inv[4];
    const __mmask16 tail = (__mmask16)(L % 16 ? (1u << (L % 16)) - 1 : 0xffff);
    for (int r = 0; r < nq; r++) {
        float *sr = s + r * Lp;
        __m512 mx = _mm512_set1_ps(-INFINITY);
        for (int64_t j = 0; j < Lp; j += 16) {
            __mmask16 mk = j + 16 <= L ? 0xffff : tail;
            mx = _mm512_mask_max_ps(mx, mk, mx, _mm512_loadu_ps(sr + j));
        }
        __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx)), sum = _mm512_setzero_ps();
        for (int64_t j = 0; j < Lp; j += 16) {
            __mmask16 mk = j + 16 <= L ? 0xffff : tail;
            __m512 x = _mm512_max_ps(_mm512_sub_ps(_mm512_loadu_ps(sr + j), vmax), _mm512_set1_ps(-87.0f));
            __m512 e = _mm512_maskz_mov_ps(mk, mxl_exp512_ps(x));
            _mm512_storeu_ps(sr + j, e);
            sum = _mm512_add_ps(sum, e);
        }
        inv[r] = 1.0f / _mm512_reduce_add_ps(sum);
    }
    /* out = P V; d <= 64 handled as up to 4 accumulators per query, larger d in 64-wide slices */
    for (int c0 = 0; c0 < d; c0 += 64) {
        int nv = (d - c0) / 16 < 4 ? (d - c0) / 16 : 4;
        __m512 o[4][4];
        for (int r = 0; r < 4; r++)
            for (int u = 0; u < 4; u++) o[r][u] = _mm512_setzero_ps();
        for (int64_t j = 0; j < L; j++) {
            const float *vj = v + j * stride + c0;
            for (int u = 0; u < nv; u++) {
                __m512 vv = _mm512_loadu_ps(vj + 16 * u);
#pragma GCC unroll 4
                for (int r = 0; r < nq; r++) o[r][u] = _mm512_fmadd_ps(_mm512_set1_ps(s[r * Lp + j]), vv, o[r][u]);
            }
        }
        for (int r = 0; r < nq; r++)
            for (int u = 0; u < nv; u++)
                _mm512_storeu_ps(out + r * stride + c0 + 16 * u, _mm512_mul_ps(o[r][u], _mm512_set1_ps(inv[r])));
    }
}

AVX512 void mxl_enc_attention_head_avx512(const float *q, const float *k, const float *v, float *out, int64_t stride,
                                          int64_t L, int d, float scale, float *scratch) {
    int64_t Lp = (L + 15) / 16 * 16;
    float *kt = scratch, *s = scratch + (int64_t)d * Lp;
    for (int c = 0; c < d; c++) {
        for (int64_t j = 0; j < L; j++) kt[(int64_t)c * Lp + j] = k[j * stride + c];
        for (int64_t j = L; j < Lp; j++) kt[(int64_t)c * Lp + j] = 0.0f;
    }
    int64_t i = 0;
    for (; i + 4 <= L; i += 4) block(4, q + i * stride, v, out + i * stride, stride, L, Lp, d, scale, kt, s);
    switch (L - i) {
    case 1: block(1, q + i * stride, v, out + i * stride, stride, L, Lp, d, scale, kt, s); break;
    case 2: block(2, q + i * stride, v, out + i * stride, stride, L, Lp, d, scale, kt, s); break;
    case 3: block(3, q + i * stride, v, out + i * stride, stride, L, Lp, d, scale, kt, s); break;
    default: break;
    }
}
#else
void mxl_enc_attention_head_avx512(const float *q, const float *k, const float *v, float *out, int64_t stride,
                                   int64_t L, int d, float scale, float *scratch) {
    (void)q; (void)k; (void)v; (void)out; (void)stride; (void)L; (void)d; (void)scale; (void)scratch;
    MXL_ASSERT(0 && "no AVX-512 on this build");
}
#endif
