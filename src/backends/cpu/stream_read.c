/* stream_read.c - read-bandwidth probe (stream_read.h). */
#include "backends/cpu/stream_read.h"

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2"))) static float sum_avx2(const float *p, size_t n) {
    __m256 a[8];
    for (int k = 0; k < 8; k++) a[k] = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 8; k++) a[k] = _mm256_add_ps(a[k], _mm256_loadu_ps(p + i + 8 * k));
    for (int k = 1; k < 8; k++) a[0] = _mm256_add_ps(a[0], a[k]);
    float t[8], s = 0.0f;
    _mm256_storeu_ps(t, a[0]);
    for (int k = 0; k < 8; k++) s += t[k];
    for (; i < n; i++) s += p[i];
    return s;
}
#endif

float mxl_cpu_read_sum(const float *p, size_t n, mxl_cpu_isa isa) {
#if defined(__x86_64__)
    if (isa >= MXL_CPU_ISA_AVX2 && mxl_cpu_isa_detect() >= MXL_CPU_ISA_AVX2) return sum_avx2(p, n);
#endif
    (void)isa;
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) s += p[i];
    return s;
}
