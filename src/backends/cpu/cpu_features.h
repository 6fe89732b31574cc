/* cpu_features.h - which instruction-set level the CPU kernels may use, decided once at run time
 * from CPUID (and the OS's saved-state support, via __builtin_cpu_supports), never from -march.
 * The kernel table (kernels.h) is built from it: the kernels of every level up to this one.
 * Tests and the benchmark can ask for a lower level to compare variants. */
#ifndef MXL_BACKENDS_CPU_CPU_FEATURES_H
#define MXL_BACKENDS_CPU_CPU_FEATURES_H

#include <stddef.h>

typedef enum mxl_cpu_isa {
    MXL_CPU_ISA_SCALAR = 0, /* plain C references */
#if defined(__aarch64__)
    /* AArch64: the levels are ordered within the host's family only. The x86 names sort above
     * every level detect() can return here, so asking for one gives the CPU's level (the kernel
     * table, kernels.h, caps every level at the CPU's); no x86 kernel is registered here. */
    MXL_CPU_ISA_NEON = 1,         /* AdvSIMD (always present on AArch64) */
    MXL_CPU_ISA_NEON_DOTPROD = 2, /* + the dot-product extension (SDOT/UDOT, HWCAP_ASIMDDP) */
    MXL_CPU_ISA_AVX2 = 3,
    MXL_CPU_ISA_AVX512VNNI = 4,
    MXL_CPU_ISA_AMX = 5,
#else
    MXL_CPU_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
    MXL_CPU_ISA_AVX512VNNI = 2, /* + AVX-512 F/BW/VL and VNNI (prefill micro-kernels) */
    MXL_CPU_ISA_AMX = 3,        /* + AVX512-BF16 and AMX-BF16 tiles, granted by the kernel (encoder GEMM) */
    /* the ARM levels sort above every level detect() returns on x86 (never reached here) */
    MXL_CPU_ISA_NEON = 4,
    MXL_CPU_ISA_NEON_DOTPROD = 5,
#endif
} mxl_cpu_isa;

/* Highest level this CPU supports (cached), capped by the environment variable
 * MXL_CPU_ISA=scalar|avx2|avx512 when set (on AArch64: MXL_CPU_ISA=scalar|neon, `neon` leaving
 * out the dot-product kernels so both NEON variants can be tested). Reaching MXL_CPU_ISA_AMX
 * asks Linux for the process's permission to use the tile data state (arch_prctl
 * ARCH_REQ_XCOMP_PERM) once. */
mxl_cpu_isa mxl_cpu_isa_detect(void);
const char *mxl_cpu_isa_name(mxl_cpu_isa isa);
/* Human-readable feature list ("avx2 fma f16c avx512f avx512vnni ..."), for bench output. */
const char *mxl_cpu_features_string(char *buf, size_t cap);

#endif
