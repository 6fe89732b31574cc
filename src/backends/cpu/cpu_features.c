/* cpu_features.c - run-time CPU feature detection for kernel dispatch (cpu_features.h). */
#include "backends/cpu/cpu_features.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

static int has_f16c(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c >> 29) & 1;
}

/* AMX-BF16 + AMX-TILE (CPUID.7.0:EDX bits 22, 24), AVX512-BF16 (CPUID.7.1:EAX bit 5), the OS
 * saving the tile state (XCR0 bits 17, 18), and Linux granting this process its use. */
static int has_amx(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 22) & 1) || !((d >> 24) & 1)) return 0;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d) || !((a >> 5) & 1)) return 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return 0; /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return 0;
#if defined(__linux__) && defined(__x86_64__)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return 0;
#endif
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
        /* MXL_CPU_ISA=scalar|avx2|avx512 caps the level (to compare variants; never raises it) */
        const char *cap = getenv("MXL_CPU_ISA");
        if (cap && !strcmp(cap, "scalar")) v = MXL_CPU_ISA_SCALAR;
        if (cap && !strcmp(cap, "avx2") && v > MXL_CPU_ISA_AVX2) v = MXL_CPU_ISA_AVX2;
        if (v == MXL_CPU_ISA_AVX512VNNI && !(cap && !strcmp(cap, "avx512")) && has_amx()) v = MXL_CPU_ISA_AMX;
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
    if (mxl_cpu_isa_detect() == MXL_CPU_ISA_AMX) { /* the top x86 level */
        size_t n = strlen(buf);
        snprintf(buf + n, cap > n ? cap - n : 0, " avx512bf16 amx-bf16");
    }
    return buf;
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20) /* Linux arm64 hwcap bit of the dot-product extension */
#endif

/* AdvSIMD is architectural on AArch64; SDOT/UDOT (ARMv8.2 DotProd) is optional and reported by
 * the kernel in AT_HWCAP. */
static int has_dotprod(void) { return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0; }

mxl_cpu_isa mxl_cpu_isa_detect(void) {
    static atomic_int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        v = has_dotprod() ? MXL_CPU_ISA_NEON_DOTPROD : MXL_CPU_ISA_NEON;
        /* MXL_CPU_ISA=scalar|neon caps the level (never raises it) */
        const char *cap = getenv("MXL_CPU_ISA");
        if (cap && !strcmp(cap, "scalar")) v = MXL_CPU_ISA_SCALAR;
        if (cap && !strcmp(cap, "neon") && v > MXL_CPU_ISA_NEON) v = MXL_CPU_ISA_NEON;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return (mxl_cpu_isa)v;
}

const char *mxl_cpu_features_string(char *buf, size_t cap) {
    snprintf(buf, cap, "neon%s", has_dotprod() ? " dotprod" : "");
    return buf;
}
#else
mxl_cpu_isa mxl_cpu_isa_detect(void) { return MXL_CPU_ISA_SCALAR; }
const char *mxl_cpu_features_string(char *buf, size_t cap) {
    snprintf(buf, cap, "(no SIMD kernels for this architecture)");
    return buf;
}
#endif

const char *mxl_cpu_isa_name(mxl_cpu_isa isa) {
    switch (isa) {
    case MXL_CPU_ISA_AVX2: return "avx2+fma";
    case MXL_CPU_ISA_AVX512VNNI: return "avx512-vnni (prefill) + avx2+fma";
    case MXL_CPU_ISA_AMX: return "amx-bf16 (encoder GEMM) + avx512-vnni (prefill) + avx2+fma";
    case MXL_CPU_ISA_NEON: return "neon";
    case MXL_CPU_ISA_NEON_DOTPROD: return "neon+dotprod";
    default: return "scalar";
    }
}
