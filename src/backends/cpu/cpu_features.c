/* cpu_features.c - run-time CPU feature detection for kernel dispatch (cpu_features.h). */
#include "backends/cpu/cpu_features.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static int has_f16c(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c >> 29) & 1;
}

/* Threads may race to fill the cache; they all store the same value (atomically). */
mxl_cpu_isa mxl_cpu_isa_detect(void) {
    static atomic_int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        __builtin_cpu_init();
        int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
        int vnni = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
        v = vnni ? MXL_CPU_ISA_AVX512VNNI : avx2 ? MXL_CPU_ISA_AVX2 : MXL_CPU_ISA_SCALAR;
        /* MXL_CPU_ISA=scalar|avx2 caps the level (to compare variants; never raises it) */
        const char *cap = getenv("MXL_CPU_ISA");
        if (cap && !strcmp(cap, "scalar")) v = MXL_CPU_ISA_SCALAR;
        if (cap && !strcmp(cap, "avx2") && v > MXL_CPU_ISA_AVX2) v = MXL_CPU_ISA_AVX2;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return (mxl_cpu_isa)v;
}

/* Fills buf (cap >= 1) with the feature list; for the benchmark's header. */
const char *mxl_cpu_features_string(char *buf, size_t cap) {
    __builtin_cpu_init();
    snprintf(buf, cap, "%s%s%s%s%s%s", __builtin_cpu_supports("avx2") ? "avx2 " : "",
             __builtin_cpu_supports("fma") ? "fma " : "", has_f16c() ? "f16c " : "",
             __builtin_cpu_supports("avx512f") ? "avx512f " : "",
             __builtin_cpu_supports("avx512bw") ? "avx512bw " : "",
             __builtin_cpu_supports("avx512vnni") ? "avx512vnni" : "");
    return buf;
}
#else
mxl_cpu_isa mxl_cpu_isa_detect(void) { return MXL_CPU_ISA_SCALAR; }
const char *mxl_cpu_features_string(char *buf, size_t cap) {
    snprintf(buf, cap, "(no x86 SIMD)");
    return buf;
}
#endif

const char *mxl_cpu_isa_name(mxl_cpu_isa isa) {
    switch (isa) {
    case MXL_CPU_ISA_AVX2: return "avx2+fma";
    case MXL_CPU_ISA_AVX512VNNI: return "avx512-vnni (prefill) + avx2+fma";
    default: return "scalar";
    }
}
