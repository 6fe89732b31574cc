/* attention_enc_avx512.c - one (sequence, head) of attention_enc.h on AVX-512. Sequences of at
 * least MXL_ENC_ATTN_GEMM_MIN_L tokens run as two GEMMs over query blocks (head_gemm below);
 * shorter ones as follows. scratch: kt [d][Lp] (K^T, zero past L), s [4][Lp] (score / probability rows).
 * Scores: 4 queries x 32 (then 16) keys per step, sum over c in order. Softmax per row with the vector exp
 * (inputs clamped at -87; keys past L get probability 0). Output: sum_j p_j v_j over j in order,
 * 4 queries sharing each V row load, then divided by the row's sum. */
#include "backends/cpu/attention_enc.h"

#include <math.h>

#include "backends/cpu/gemm_f32.h"
#include "core/status.h"

#define ENC_GEMM_MB 96
#define ENC_GEMM_KC 256

size_t mxl_enc_attention_gemm_floats(int64_t L, int d) {
    const int64_t Lk = (L + 31) / 32 * 32, nv = (d + 31) / 32;
    return (size_t)(Lk * d * 2 + nv * 32 * Lk + ENC_GEMM_MB * Lk + 2 * ENC_GEMM_MB * nv * 32 + 64);
}

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

/* Long sequences (an image's thousands of patches): the two products as the register-blocked
 * GEMM's panels (gemm_f32.h: 12 queries x 32 keys / outputs per micro-tile) over blocks of
 * ENC_GEMM_MB queries: S = Q K^T [mb, Lk] (K packed once into panels of 32 keys), the row
 * softmax with the vector exp, then O = P V (V packed once into panels of 32 output dims, over
 * chunks of ENC_GEMM_KC keys added in order) divided by the row's sum. Scratch: see enc_gemm_floats. */
AVX512 static void head_gemm(const float *q, const float *k, const float *v, float *out, int64_t stride, int64_t L, int d, float scale,
                             float *scratch) {
    const int64_t Lk = (L + 31) / 32 * 32, nv = (d + 31) / 32, ldo = nv * 32;
    float *qh = scratch, *kp = qh + Lk * d, *vp = kp + Lk * d, *S = vp + nv * 32 * Lk, *O = S + ENC_GEMM_MB * Lk;
    static const float zero32[32] = {0};
    for (int64_t j = 0; j < L; j++)
        for (int c = 0; c < d; c++) qh[j * d + c] = q[j * stride + c];
    /* K panels [Lk / 32][d][32], V panels [nv][Lk][32], zero past L and past d */
    for (int64_t p = 0; p < Lk / 32; p++)
        for (int c = 0; c < d; c++)
            for (int u = 0; u < 32; u++) kp[(p * d + c) * 32 + u] = p * 32 + u < L ? k[(p * 32 + u) * stride + c] : 0.0f;
    for (int64_t w = 0; w < nv; w++)
        for (int64_t j = 0; j < Lk; j++)
            for (int u = 0; u < 32; u++) vp[(w * Lk + j) * 32 + u] = j < L && w * 32 + u < d ? v[j * stride + w * 32 + u] : 0.0f;
    const __mmask16 tail = (__mmask16)(L % 16 ? (1u << (L % 16)) - 1 : 0xffff);
    const __m512 vs = _mm512_set1_ps(scale);
    for (int64_t i0 = 0; i0 < L; i0 += ENC_GEMM_MB) {
        const int64_t mb = L - i0 < ENC_GEMM_MB ? L - i0 : ENC_GEMM_MB;
        for (int64_t p = 0; p < Lk / 32; p++)
            mxl_gemm_f32_panel_avx512(qh + i0 * d, mb, d, kp + p * d * 32, zero32, MXL_GEMM_ACT_NONE, S + p * 32, Lk,
                                      L - p * 32 < 32 ? (int)(L - p * 32) : 32);
        float inv[ENC_GEMM_MB];
        for (int64_t r = 0; r < mb; r++) {
            float *sr = S + r * Lk;
            __m512 mx = _mm512_set1_ps(-INFINITY);
            for (int64_t j = 0; j < L; j += 16) mx = _mm512_mask_max_ps(mx, j + 16 <= L ? 0xffff : tail, mx, _mm512_loadu_ps(sr + j));
            const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx) * scale);
            __m512 sum = _mm512_setzero_ps();
            for (int64_t j = 0; j < Lk; j += 16) {
                const __mmask16 mk = j + 16 <= L ? 0xffff : j < L ? tail : 0;
                __m512 x = _mm512_max_ps(_mm512_fmsub_ps(_mm512_loadu_ps(sr + j), vs, vmax), _mm512_set1_ps(-87.0f));
                __m512 e = _mm512_maskz_mov_ps(mk, mxl_exp512_ps(x));
                _mm512_storeu_ps(sr + j, e);
                sum = _mm512_add_ps(sum, e);
            }
            inv[r] = 1.0f / _mm512_reduce_add_ps(sum);
        }
        /* P V over chunks of ENC_GEMM_KC keys (each chunk's V panel stays in L1 across the query
         * block's micro-tiles), summed chunk by chunk */
        for (int64_t c0 = 0; c0 < Lk; c0 += ENC_GEMM_KC) {
            const int64_t kc = Lk - c0 < ENC_GEMM_KC ? Lk - c0 : ENC_GEMM_KC;
            float *dst = c0 ? O + ENC_GEMM_MB * ldo : O;
            for (int64_t w = 0; w < nv; w++)
                mxl_gemm_f32_panel_ld_avx512(S + c0, Lk, mb, kc, vp + (w * Lk + c0) * 32, zero32, MXL_GEMM_ACT_NONE, dst + w * 32, ldo,
                                             d - w * 32 < 32 ? (int)(d - w * 32) : 32);
            if (c0)
                for (int64_t r = 0; r < mb; r++)
                    for (int64_t c = 0; c < ldo; c += 16)
                        _mm512_storeu_ps(O + r * ldo + c, _mm512_add_ps(_mm512_loadu_ps(O + r * ldo + c), _mm512_loadu_ps(dst + r * ldo + c)));
        }
        for (int64_t r = 0; r < mb; r++)
            for (int c = 0; c < d; c++) out[(i0 + r) * stride + c] = O[r * ldo + c] * inv[r];
    }
}

AVX512 void mxl_enc_attention_head_avx512(const float *q, const float *k, const float *v, float *out, int64_t stride,
                                          int64_t L, int d, float scale, float *scratch) {
    if (L >= MXL_ENC_ATTN_GEMM_MIN_L) {
        head_gemm(q, k, v, out, stride, L, d, scale, scratch);
        return;
    }
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
