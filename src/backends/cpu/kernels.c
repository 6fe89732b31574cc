/* kernels.c - builds the CPU kernel table (kernels.h) once: the list of ISA levels of this
 * architecture, lowest first, each with its registration function; a table per level the CPU
 * reaches, each the one below plus that level's overrides. */
#include "backends/cpu/kernels.h"

#include <pthread.h>
#include <string.h>

#include "core/status.h"

/* The levels in registration order. Adding an ISA: its enum value and detection in
 * cpu_features.c, a kernels_<isa>.c with its registration function, and one line here. */
static const struct {
    mxl_cpu_isa isa;
    void (*reg)(mxl_cpu_kernels *k);
} k_levels[] = {
    {MXL_CPU_ISA_SCALAR, mxl_cpu_kernels_register_ref},
#if defined(__x86_64__)
    {MXL_CPU_ISA_AVX2, mxl_cpu_kernels_register_avx2},
    {MXL_CPU_ISA_AVX512VNNI, mxl_cpu_kernels_register_avx512},
    {MXL_CPU_ISA_AMX, mxl_cpu_kernels_register_amx},
#elif defined(__aarch64__)
    {MXL_CPU_ISA_NEON, mxl_cpu_kernels_register_neon},
    {MXL_CPU_ISA_NEON_DOTPROD, mxl_cpu_kernels_register_neon_dotprod},
#endif
};
#define N_LEVELS ((int)(sizeof k_levels / sizeof k_levels[0]))
/* enum values mxl_cpu_kern_at looks up directly (every mxl_cpu_isa value is below this) */
#define N_ISA_VALUES 8
_Static_assert(MXL_CPU_ISA_AVX2 < N_ISA_VALUES && MXL_CPU_ISA_AVX512VNNI < N_ISA_VALUES && MXL_CPU_ISA_AMX < N_ISA_VALUES &&
                   MXL_CPU_ISA_NEON < N_ISA_VALUES && MXL_CPU_ISA_NEON_DOTPROD < N_ISA_VALUES,
               "a level outside mxl_cpu_kern_at's lookup");

static mxl_cpu_kernels g_tables[N_LEVELS];
static int g_top;                                   /* index in k_levels of the CPU's level */
static const mxl_cpu_kernels *g_at[N_ISA_VALUES];   /* by enum value: the table that level runs */
_Atomic(const mxl_cpu_kernels *) mxl_cpu_kern_active;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Every entry the references must set (the optional ones may stay NULL). */
static void check_complete(const mxl_cpu_kernels *k) {
    MXL_ASSERT(k->act && k->glu && k->rmsnorm && k->layernorm && k->argmax && k->logits_scan && k->read_sum);
    MXL_ASSERT(k->quant_q8a && k->quant_q8k && k->quant_q8a2 && k->mlx_dot);
    MXL_ASSERT(k->kv.dot_f16 && k->kv.dot_i8 && k->kv.axpy_f16 && k->kv.axpy_i8 && k->kv.store_f16 && k->kv.rotate);
    for (int f = 0; f < MXL_KV_QFMT_COUNT; f++) MXL_ASSERT(k->kv.dot_q[f] && k->kv.axpy_q[f]);
}

static void build(void) {
    /* the CPU's level: the highest listed level at or below what detection (capped by MXL_CPU_ISA)
     * gives; within one architecture's list the enum values ascend */
    const mxl_cpu_isa cpu = mxl_cpu_isa_detect();
    g_top = 0;
    for (int i = 1; i < N_LEVELS; i++)
        if (k_levels[i].isa <= cpu) g_top = i;
    mxl_cpu_kernels k;
    memset(&k, 0, sizeof k);
    for (int i = 0; i <= g_top; i++) {
        k_levels[i].reg(&k);
        k.level = k_levels[i].isa;
        check_complete(&k);
        g_tables[i] = k;
    }
    /* level v runs the table of the highest listed level at or below it, capped at the CPU's;
     * the other architecture's names sort above every level of this one, so they get the CPU's */
    for (int v = 0; v < N_ISA_VALUES; v++) {
        int t = 0;
        for (int i = 1; i <= g_top; i++)
            if ((int)k_levels[i].isa <= v) t = i;
        g_at[v] = &g_tables[t];
    }
    atomic_store_explicit(&mxl_cpu_kern_active, &g_tables[g_top], memory_order_release);
}

const mxl_cpu_kernels *mxl_cpu_kern_init(void) {
    pthread_once(&g_once, build);
    return atomic_load_explicit(&mxl_cpu_kern_active, memory_order_acquire);
}

const mxl_cpu_kernels *mxl_cpu_kern_at(mxl_cpu_isa isa) {
    const mxl_cpu_kernels *active = mxl_cpu_kern();
    return (unsigned)isa < N_ISA_VALUES ? g_at[isa] : active;
}

mxl_cpu_isa mxl_cpu_kern_origin(size_t offset) {
    typedef void (*any_fn)(void);
    MXL_ASSERT(offset + sizeof(any_fn) <= offsetof(mxl_cpu_kernels, level));
    (void)mxl_cpu_kern();
    int i = g_top;
    while (i > 0 && !memcmp((const char *)&g_tables[i] + offset, (const char *)&g_tables[i - 1] + offset,
                            sizeof(any_fn)))
        i--;
    return k_levels[i].isa;
}
