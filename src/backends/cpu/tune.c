/* tune.c - the CPU backend's run-time tuning knobs (tune.h): their table of defaults and
 * candidates, the values set per attention shape and context, and the machine description the
 * autotune cache keys its entries by. */
#include "backends/cpu/tune.h"

#include <stdio.h>
#include <string.h>

#include "backends/cpu/attention.h"
#include "backends/cpu/cpu_features.h"
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static const mxl_cpu_knob_info k_knobs[MXL_CPU_KNOB_COUNT] = {
    [MXL_CPU_KNOB_DECODE_SPLITS] = {"paged-decode-splits", 1, 1, 16, 4, {1, 2, 4, 8}, true,
                                    "KV splits of one decode query's visible range (split-K decode attention)"},
    [MXL_CPU_KNOB_HEAD_GROUP] = {"attn-head-group", MXL_ATTN_HEAD_GROUP, 1, MXL_ATTN_HEAD_GROUP, 3, {4, 2, 1}, true,
                                 "query heads of one KV head per grouped attention pass"},
    [MXL_CPU_KNOB_MATMUL_SPLIT] = {"matmul-split", 2, 1, 16, 4, {2, 1, 4, 8}, false,
                                   "matmul work split: panel chunks of 1/(d x threads) of what is left, 2d row tasks per thread"},
};

const mxl_cpu_knob_info *mxl_cpu_knob_get(int k) {
    return k >= 0 && k < MXL_CPU_KNOB_COUNT ? &k_knobs[k] : NULL;
}

int mxl_cpu_knob_find(const char *name) {
    for (int k = 0; k < MXL_CPU_KNOB_COUNT; k++)
        if (name && strcmp(name, k_knobs[k].name) == 0) return k;
    return -1;
}

/* per attention shape: (context from, value) points of each per-context knob, by context */
#define MAX_SHAPES 8
#define MAX_POINTS 8
typedef struct tune_point {
    int64_t ctx;
    int value;
} tune_point;
typedef struct tune_shape {
    int head_dim, q_heads, kv_heads;
    int n[MXL_CPU_KNOB_COUNT];
    tune_point pt[MXL_CPU_KNOB_COUNT][MAX_POINTS];
} tune_shape;

static struct {
    int n_shapes;
    tune_shape shapes[MAX_SHAPES];
    int matmul_split;
} g_tune = {.matmul_split = 2};

void mxl_cpu_tune_reset(void) {
    memset(&g_tune, 0, sizeof g_tune);
    g_tune.matmul_split = k_knobs[MXL_CPU_KNOB_MATMUL_SPLIT].def;
}

static tune_shape *shape_of(int head_dim, int q_heads, int kv_heads, bool add) {
    for (int i = 0; i < g_tune.n_shapes; i++) {
        tune_shape *s = &g_tune.shapes[i];
        if (s->head_dim == head_dim && s->q_heads == q_heads && s->kv_heads == kv_heads) return s;
    }
    if (!add || g_tune.n_shapes == MAX_SHAPES) return NULL;
    tune_shape *s = &g_tune.shapes[g_tune.n_shapes++];
    memset(s, 0, sizeof *s);
    s->head_dim = head_dim, s->q_heads = q_heads, s->kv_heads = kv_heads;
    return s;
}

bool mxl_cpu_tune_set(mxl_cpu_knob k, int head_dim, int q_heads, int kv_heads, int64_t ctx, int value) {
    const mxl_cpu_knob_info *ki = mxl_cpu_knob_get(k);
    if (!ki || value < ki->lo || value > ki->hi) return false;
    if (!ki->per_context) {
        g_tune.matmul_split = value;
        return true;
    }
    if (head_dim <= 0 || q_heads <= 0 || kv_heads <= 0 || q_heads % kv_heads != 0 || ctx < 0) return false;
    tune_shape *s = shape_of(head_dim, q_heads, kv_heads, true);
    if (!s) return false;
    tune_point *pt = s->pt[k];
    int n = s->n[k], i = 0;
    while (i < n && pt[i].ctx < ctx) i++;
    if (i < n && pt[i].ctx == ctx) {
        pt[i].value = value;
        return true;
    }
    if (n == MAX_POINTS) return false;
    memmove(pt + i + 1, pt + i, (size_t)(n - i) * sizeof *pt); /* kept sorted by context */
    pt[i] = (tune_point){ctx, value};
    s->n[k] = n + 1;
    return true;
}

static int lookup(mxl_cpu_knob k, const mxl_attn_params *p, int64_t n_kv) {
    const int def = k_knobs[k].def;
    if (g_tune.n_shapes == 0) return def; /* (the common case: nothing tuned) */
    const tune_shape *s = shape_of(p->head_dim, p->n_heads, p->n_kv_heads, false);
    if (!s) return def;
    int v = def;
    for (int i = 0; i < s->n[k] && s->pt[k][i].ctx <= n_kv; i++) v = s->pt[k][i].value;
    return v;
}

int mxl_cpu_tune_decode_splits(const mxl_attn_params *p, int64_t n_kv) { return lookup(MXL_CPU_KNOB_DECODE_SPLITS, p, n_kv); }
int mxl_cpu_tune_head_group(const mxl_attn_params *p, int64_t n_kv) { return lookup(MXL_CPU_KNOB_HEAD_GROUP, p, n_kv); }
int mxl_cpu_tune_matmul_split(void) { return g_tune.matmul_split; }

static const char *isa_short(mxl_cpu_isa isa) {
    switch (isa) {
    case MXL_CPU_ISA_AVX2: return "avx2";
    case MXL_CPU_ISA_AVX512VNNI: return "avx512";
    case MXL_CPU_ISA_AMX: return "amx";
    case MXL_CPU_ISA_NEON: return "neon";
    case MXL_CPU_ISA_NEON_DOTPROD: return "neon-dotprod";
    default: return "scalar";
    }
}

/* "model name : X" of /proc/cpuinfo's first processor, trimmed */
static bool cpuinfo_model(char *cpu, size_t cap) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[512];
    bool ok = false;
    while (!ok && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *c = strchr(line, ':');
        if (!c) continue;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        size_t n = strcspn(c, "\r\n");
        while (n > 0 && (c[n - 1] == ' ' || c[n - 1] == '\t')) n--;
        if (n == 0) continue;
        snprintf(cpu, cap, "%.*s", (int)n, c);
        ok = true;
    }
    fclose(f);
    return ok;
}

void mxl_cpu_tune_machine(char *cpu, size_t cap, const char **isa) {
    *isa = isa_short(mxl_cpu_isa_detect());
    if (cap == 0) return;
    if (cpuinfo_model(cpu, cap)) return;
#if defined(__x86_64__) || defined(__i386__)
    unsigned r[12], a, b, c, d;
    if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        char brand[49];
        memcpy(brand, r, 48);
        brand[48] = '\0';
        const char *s = brand;
        while (*s == ' ') s++;
        if (*s) {
            snprintf(cpu, cap, "%s", s);
            return;
        }
    }
#endif
    snprintf(cpu, cap, "unknown");
}
