/* embed_topk_avx512.c - AVX-512 argmax and logit scan over a vocabulary row (embed_topk.h), for
 * the sampler's per-token passes (a 49k-256k row per sequence per step, on the engine thread).
 * argmax: pass 1 keeps the lane-wise maximum of the non-NaN values (VMAXPS returns its second
 * operand when the first is NaN), pass 2 finds the first index equal to it: the reference's index
 * (the first of the largest non-NaN values). */
#include "backends/cpu/embed_topk.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

AVX512 static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

AVX512 int64_t mxl_cpu_argmax_avx512(const float *x, int64_t n) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m0 = ninf, m1 = ninf;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
        m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
    }
    for (; i < n; i += 16) m0 = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, tail_mask(n - i), x + i), m0);
    const float m = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
    /* every value NaN or -inf: the first -inf (the reference's pick), else 0 */
    const __m512 mv = _mm512_set1_ps(m);
    for (i = 0; i < n; i += 16) {
        __mmask16 eq = _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(tail_mask(n - i), x + i), mv, _CMP_EQ_OQ) & tail_mask(n - i);
        if (eq) return i + __builtin_ctz((unsigned)eq);
    }
    return 0;
}

AVX512 void mxl_cpu_logits_scan_avx512(const float *x, int64_t n, bool *bad, bool *any) {
    const __m512 inf = _mm512_set1_ps(INFINITY), ninf = _mm512_set1_ps(-INFINITY);
    __mmask16 b = 0, a = 0;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        b |= _mm512_mask_cmp_ps_mask(k, v, inf, _CMP_NLT_UQ); /* NaN or +inf */
        a |= _mm512_mask_cmp_ps_mask(k, v, ninf, _CMP_GT_OQ);
    }
    *bad = b != 0, *any = a != 0;
}

#else
int64_t mxl_cpu_argmax_avx512(const float *x, int64_t n) { return mxl_cpu_argmax_ref(x, n); }
void mxl_cpu_logits_scan_avx512(const float *x, int64_t n, bool *bad, bool *any) { mxl_cpu_logits_scan_ref(x, n, bad, any); }
#endif
