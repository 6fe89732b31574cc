/* stream_read.h - STREAM-style read bandwidth probe: sums a large buffer as fast as the core can
 * load it, so the benchmark can put each kernel's GB/s next to what memory delivers. */
#ifndef MXL_BACKENDS_CPU_STREAM_READ_H
#define MXL_BACKENDS_CPU_STREAM_READ_H

#include <stddef.h>

#include "backends/cpu/cpu_features.h"

/* Sum of n floats at level isa (capped at the CPU's; kernels.h): the reference (one accumulator)
 * or the AVX2 form (8 independent vector accumulators, x86-64 only). */
float mxl_cpu_read_sum(const float *p, size_t n, mxl_cpu_isa isa);
float mxl_cpu_read_sum_ref(const float *p, size_t n);
float mxl_cpu_read_sum_avx2(const float *p, size_t n);

#endif
