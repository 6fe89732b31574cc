/* stream_read.c - read-bandwidth probe (stream_read.h): the reference, its AVX2 form, and the
 * call through the kernel table. */
#include "backends/cpu/stream_read.h"

#include "backends/cpu/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2"))) float mxl_cpu_read_sum_avx2(const float *p, size_t n) {
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

float mxl_cpu_read_sum_ref(const float *p, size_t n) {
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) s += p[i];
    return s;
}

float mxl_cpu_read_sum(const float *p, size_t n, mxl_cpu_isa isa) { return mxl_cpu_kern_at(isa)->read_sum(p, n); }
