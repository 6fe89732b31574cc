/* cpu_features.h - which instruction-set level the CPU kernels may use, decided once at run time
 * from CPUID (and the OS's saved-state support, via __builtin_cpu_supports), never from -march.
 * Tests and the benchmark can ask for a lower level to compare variants. */
#ifndef MXL_BACKENDS_CPU_CPU_FEATURES_H
#define MXL_BACKENDS_CPU_CPU_FEATURES_H

#include <stddef.h>

typedef enum mxl_cpu_isa {
    MXL_CPU_ISA_SCALAR = 0, /* plain C references */
    MXL_CPU_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
    MXL_CPU_ISA_AVX512VNNI = 2, /* + AVX-512 F/BW/VL and VNNI (prefill micro-kernels) */
    MXL_CPU_ISA_AMX = 3,        /* + AVX512-BF16 and AMX-BF16 tiles, granted by the kernel (encoder GEMM) */
} mxl_cpu_isa;

/* Highest level this CPU supports (cached), capped by the environment variable
 * MXL_CPU_ISA=scalar|avx2|avx512 when set. Reaching MXL_CPU_ISA_AMX asks Linux for the
 * process's permission to use the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM) once. */
mxl_cpu_isa mxl_cpu_isa_detect(void);
const char *mxl_cpu_isa_name(mxl_cpu_isa isa);
/* Human-readable feature list ("avx2 fma f16c avx512f avx512vnni ..."), for bench output. */
const char *mxl_cpu_features_string(char *buf, size_t cap);

#endif
