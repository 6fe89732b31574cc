/* stream_read.h - STREAM-style read bandwidth probe: sums a large buffer as fast as the core can
 * load it, so the benchmark can put each kernel's GB/s next to what memory delivers. */
#ifndef MXL_BACKENDS_CPU_STREAM_READ_H
#define MXL_BACKENDS_CPU_STREAM_READ_H

#include <stddef.h>

#include "backends/cpu/cpu_features.h"

/* Sum of n floats (reference: one accumulator; AVX2: 8 independent vector accumulators). */
float mxl_cpu_read_sum(const float *p, size_t n, mxl_cpu_isa isa);

#endif
