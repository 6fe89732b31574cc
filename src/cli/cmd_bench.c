/* cmd_bench.c - `mlxcel bench kernels`: CPU kernel throughput next to the machine's own limits.
 *
 * Measures, in one run:
 *   - STREAM-style read bandwidth (sum of a buffer of --mb MB) with 1..N threads;
 *   - matrix-vector GB/s for every weight format on a weight of >= --mb MB (decode: bytes of
 *     weight read per second), with 1..N threads, as a percentage of the read bandwidth with the
 *     same thread count;
 *   - GEMM GFLOP/s at --tokens tokens (prefill) on a --dim x --dim weight with N threads, next to
 *     f32 cblas_sgemm from the system BLAS when one can be loaded (dlopen; OpenBLAS preferred).
 * Weights are synthetic (backends/cpu/synth.h) with the real byte layouts. Best of --reps runs. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/quant_amx.h"
#include "backends/cpu/stream_read.h"
#include "backends/cpu/synth.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/alloc.h"
#include "core/threadpool.h"

static const mxl_cli_opt k_opts[] = {
    {"threads", 't', "N", "2", "Largest thread count to measure (1..N are reported)"},
    {"mb", 0, "MB", "256", "Size of the matrix-vector weights and the read buffer, in MB (>= 200 for the reference table)"},
    {"dim", 0, "N", "4096", "GEMM weight is N x N"},
    {"tokens", 0, "N", "512", "GEMM token count"},
    {"reps", 0, "N", "5", "Runs per measurement (best is reported)"},
    {"no-gemm", 0, NULL, NULL, "Skip the GEMM table"},
    {"no-matvec", 0, NULL, NULL, "Skip the read-bandwidth and matrix-vector tables"},
    {NULL, 0, NULL, NULL, NULL},
};

static const mxl_cli_cmd k_cmd = {
    .name = "bench",
    .usage = "mlxcel bench kernels [OPTIONS]",
    .summary = "Benchmark the CPU kernels: matrix-vector GB/s per weight format next to the measured "
               "read bandwidth, and GEMM GFLOP/s for prefill.",
    .opts = k_opts,
    .min_pos = 1,
    .max_pos = 1,
    .pos_help = "kernels",
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Other processes share the cores and memory bus; the load average puts figures in context. */
static void print_loadavg(const char *when) {
    FILE *f = fopen("/proc/loadavg", "r");
    double a = 0, b = 0, c = 0;
    if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
        printf("load average %s: %.2f %.2f %.2f\n", when, a, b, c);
    if (f) fclose(f);
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- read bandwidth ---------------------------------------------------------------------- */
typedef struct read_ctx {
    const float *p;
    size_t n;
    float sums[64];
} read_ctx;

static void read_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)thread_index;
    read_ctx *c = vctx;
    size_t a = c->n * (size_t)task / (size_t)n_tasks, b = c->n * (size_t)(task + 1) / (size_t)n_tasks;
    c->sums[task % 64] += mxl_cpu_read_sum(c->p + a, b - a, mxl_cpu_isa_detect());
}

static double read_bw(mxl_threadpool *pool, const float *buf, size_t n, int reps) {
    read_ctx c = {buf, n, {0}};
    double best = 1e30;
    int nth = mxl_threadpool_size(pool);
    for (int r = 0; r < reps + 1; r++) {
        double t0 = now_s();
        mxl_threadpool_run(pool, nth, read_task, &c);
        double dt = now_s() - t0;
        if (r > 0 && dt < best) best = dt; /* the first run warms up */
    }
    volatile float sink = c.sums[0];
    (void)sink;
    return (double)n * 4.0 / best / 1e9;
}

/* ---- weights ----------------------------------------------------------------------------- */
typedef struct fmt {
    const char *label;
    mxl_weight_kind kind;
    mxl_dtype dtype;
    int bits, group_size; /* MLX */
    int gemm;             /* included in the GEMM table */
} fmt;

static const fmt k_fmts[] = {
    {"F32", MXL_W_DENSE, MXL_DTYPE_F32, 0, 0, 1},
    {"F16", MXL_W_DENSE, MXL_DTYPE_F16, 0, 0, 1},
    {"BF16", MXL_W_DENSE, MXL_DTYPE_BF16, 0, 0, 0},
    {"Q8_0", MXL_W_GGUF, MXL_DTYPE_Q8_0, 0, 0, 1},
    {"Q4_0", MXL_W_GGUF, MXL_DTYPE_Q4_0, 0, 0, 1},
    {"Q4_1", MXL_W_GGUF, MXL_DTYPE_Q4_1, 0, 0, 1},
    {"Q5_0", MXL_W_GGUF, MXL_DTYPE_Q5_0, 0, 0, 0},
    {"Q5_1", MXL_W_GGUF, MXL_DTYPE_Q5_1, 0, 0, 0},
    {"Q2_K", MXL_W_GGUF, MXL_DTYPE_Q2_K, 0, 0, 0},
    {"Q3_K", MXL_W_GGUF, MXL_DTYPE_Q3_K, 0, 0, 0},
    {"Q4_K", MXL_W_GGUF, MXL_DTYPE_Q4_K, 0, 0, 1},
    {"Q5_K", MXL_W_GGUF, MXL_DTYPE_Q5_K, 0, 0, 0},
    {"Q6_K", MXL_W_GGUF, MXL_DTYPE_Q6_K, 0, 0, 1},
    {"IQ4_NL", MXL_W_GGUF, MXL_DTYPE_IQ4_NL, 0, 0, 1},
    {"IQ4_XS", MXL_W_GGUF, MXL_DTYPE_IQ4_XS, 0, 0, 1},
    {"IQ3_S", MXL_W_GGUF, MXL_DTYPE_IQ3_S, 0, 0, 0},
    {"IQ2_XXS", MXL_W_GGUF, MXL_DTYPE_IQ2_XXS, 0, 0, 0},
    {"IQ1_M", MXL_W_GGUF, MXL_DTYPE_IQ1_M, 0, 0, 0},
    {"MLX 4-bit g64", MXL_W_MLX, MXL_DTYPE_F16, 4, 64, 1},
    {"MLX 8-bit g64", MXL_W_MLX, MXL_DTYPE_F16, 8, 64, 1},
    {"MLX 3-bit g64", MXL_W_MLX, MXL_DTYPE_F16, 3, 64, 0},
    {"MLX 6-bit g64", MXL_W_MLX, MXL_DTYPE_F16, 6, 64, 0},
};

typedef struct owned_weight {
    mxl_weight w;
    uint8_t *data, *scales, *biases;
    uint8_t *panels; /* the panel layout (quant_amx.h), as the decoder gives its weights */
    uint64_t bytes;  /* everything a matrix-vector product reads */
} owned_weight;

static void owned_free(owned_weight *o) {
    mxl_aligned_free(o->panels);
    mxl_free(o->data);
    mxl_free(o->scales);
    mxl_free(o->biases);
    memset(o, 0, sizeof *o);
}

/* rows x cols weight of format f; returns 0 on allocation failure. */
static int make_weight(const fmt *f, int64_t rows, int64_t cols, uint64_t *seed, owned_weight *o) {
    memset(o, 0, sizeof *o);
    o->w.kind = f->kind;
    o->w.dtype = f->dtype;
    o->w.rows = rows;
    o->w.cols = cols;
    if (f->kind == MXL_W_MLX) {
        int64_t row_bytes = cols * f->bits / 8, ng = rows * cols / f->group_size;
        o->data = mxl_malloc((size_t)(rows * row_bytes));
        o->scales = mxl_malloc((size_t)ng * 2);
        o->biases = mxl_malloc((size_t)ng * 2);
        if (!o->data || !o->scales || !o->biases) return 0;
        for (int64_t i = 0; i < rows * row_bytes; i++) {
            *seed ^= *seed << 13, *seed ^= *seed >> 7, *seed ^= *seed << 17;
            o->data[i] = (uint8_t)*seed;
        }
        mxl_synth_fill(MXL_DTYPE_F16, o->scales, (uint64_t)ng, seed);
        mxl_synth_fill(MXL_DTYPE_F16, o->biases, (uint64_t)ng, seed);
        o->w.mlx = (mxl_mlx_qweight){f->bits, f->group_size, MXL_DTYPE_F16, rows, cols,
                                     (const uint32_t *)o->data, o->scales, o->biases};
        o->bytes = (uint64_t)(rows * row_bytes) + (uint64_t)ng * 4;
    } else {
        const mxl_dtype_info *inf = mxl_dtype_get_info(f->dtype);
        uint64_t nb = (uint64_t)(rows * cols) / inf->block_elems;
        o->data = mxl_malloc(nb * inf->block_bytes);
        if (!o->data) return 0;
        mxl_synth_fill(f->dtype, o->data, nb, seed);
        o->w.data = o->data;
        o->bytes = nb * inf->block_bytes;
    }
    if (mxl_qamx_format(&o->w) && mxl_qamx_available()) {
        size_t pb = (mxl_qamx_packed_bytes(&o->w) + 63) / 64 * 64;
        o->panels = mxl_aligned_alloc(64, pb);
        if (!o->panels) return 0;
        mxl_qamx_pack(&o->w, o->panels);
        o->w.prepared = o->panels;
    }
    return 1;
}

/* Best wall time of reps runs after a warm-up; *cpu gets the process CPU seconds of that run. */
static double time_matmul(const mxl_weight *W, const float *x, int64_t n_tok, float *y,
                          void *scratch, mxl_threadpool *pool, int reps, double *cpu) {
    double best = 1e30, best_cpu = 0;
    for (int r = 0; r < reps + 1; r++) {
        double t0 = now_s(), c0 = cpu_s();
        mxl_cpu_matmul(W, x, n_tok, y, scratch, pool);
        double dt = now_s() - t0, dc = cpu_s() - c0;
        if (r > 0 && dt < best) best = dt, best_cpu = dc;
    }
    if (cpu) *cpu = best_cpu;
    return best;
}

/* ---- system BLAS (optional, loaded at run time so the build needs no BLAS) --------------- */
typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);

static sgemm_fn load_sgemm(const char **which, void **handle) {
    static const char *libs[] = {"libopenblas.so.0", "libopenblas.so", "libblis.so.4",
                                 "libblas.so.3", NULL};
    for (int i = 0; libs[i]; i++) {
        void *h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) continue;
        void *s = dlsym(h, "cblas_sgemm");
        if (s) {
            *which = libs[i];
            *handle = h;
            sgemm_fn f;
            memcpy(&f, &s, sizeof f);
            return f;
        }
        dlclose(h);
    }
    return NULL;
}

static int bench_kernels(int max_threads, int64_t mb, int64_t dim, int64_t tokens, int reps,
                         int do_gemm, int do_matvec) {
    char feat[256];
    printf("CPU: %d online cores; features: %s; kernels: %s\n", mxl_cpu_count(),
           mxl_cpu_features_string(feat, sizeof feat), mxl_cpu_isa_name(mxl_cpu_isa_detect()));
    print_loadavg("at start");
    mxl_threadpool *pools[16] = {0};
    for (int t = 1; t <= max_threads; t++) {
        if (mxl_threadpool_create(t, &pools[t - 1], NULL) != MXL_OK) {
            for (int k = 0; k < t - 1; k++) mxl_threadpool_destroy(pools[k]);
            return mxl_cli_fail("cannot create a thread pool of %d threads", t);
        }
    }
    int rc = 0;
    uint64_t seed = 0x9E3779B97F4A7C15ULL;
    double bw[16] = {0};
    if (do_matvec) {
        size_t n = (size_t)mb * 1024 * 1024 / 4;
        float *buf = mxl_malloc(n * 4);
        if (!buf) {
            rc = mxl_cli_fail("out of memory allocating %lld MB", (long long)mb);
            goto done;
        }
        for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 1023) * 0.001f;
        printf("\nSTREAM-style read of %lld MB:", (long long)mb);
        for (int t = 1; t <= max_threads; t++) {
            bw[t - 1] = read_bw(pools[t - 1], buf, n, reps);
            printf("  %d thread%s %.1f GB/s", t, t > 1 ? "s" : "", bw[t - 1]);
        }
        printf("\n");
        mxl_free(buf);
    }

    if (do_matvec) {
        printf("\nMatrix-vector (1 token), weight >= %lld MB, 4096 columns; GB/s of weight read "
               "(%% of read bandwidth at the same thread count);\nin-cache: 1 MB of the weight, 1 thread, "
               "GB/s per CPU-second (the kernel's own speed)\n", (long long)mb);
        printf("%-15s %9s", "format", "MB");
        for (int t = 1; t <= max_threads; t++) printf("   %2d thr GB/s   %%", t);
        printf("   in-cache\n");
    }
    const int64_t cols = 4096;
    float *x = mxl_malloc((size_t)(tokens > 1 ? tokens : 1) * (size_t)(cols > dim ? cols : dim) * 4);
    if (!x) {
        rc = mxl_cli_fail("out of memory");
        goto done;
    }
    for (int64_t i = 0; i < (tokens > 1 ? tokens : 1) * (cols > dim ? cols : dim); i++)
        x[i] = (float)((i * 7919) % 2001 - 1000) * 0.001f;
    for (size_t f = 0; do_matvec && f < sizeof k_fmts / sizeof k_fmts[0]; f++) {
        const fmt *F = &k_fmts[f];
        int64_t row_bytes = F->kind == MXL_W_MLX
                                ? cols * F->bits / 8 + cols / F->group_size * 4
                                : (int64_t)(cols / mxl_dtype_get_info(F->dtype)->block_elems *
                                            mxl_dtype_get_info(F->dtype)->block_bytes);
        int64_t rows = (mb * 1024 * 1024 + row_bytes - 1) / row_bytes;
        owned_weight o;
        if (!make_weight(F, rows, cols, &seed, &o)) {
            owned_free(&o);
            rc = mxl_cli_fail("out of memory allocating the %s weight", F->label);
            break;
        }
        size_t sb = mxl_cpu_matmul_scratch_bytes(&o.w, 1);
        void *scratch = sb ? mxl_malloc(sb) : NULL;
        float *y = mxl_malloc((size_t)rows * 4);
        if (!y || (sb && !scratch)) {
            mxl_free(y);
            mxl_free(scratch);
            owned_free(&o);
            rc = mxl_cli_fail("out of memory");
            break;
        }
        printf("%-15s %9.1f", F->label, (double)o.bytes / 1048576.0);
        for (int t = 1; t <= max_threads; t++) {
            double dt = time_matmul(&o.w, x, 1, y, scratch, pools[t - 1], reps, NULL);
            double gbs = (double)o.bytes / dt / 1e9;
            printf("   %11.1f %3.0f%%", gbs, 100.0 * gbs / bw[t - 1]);
        }
        /* the kernel's own speed: the first ~1 MB of rows (cache resident), 1 thread, per
         * CPU-second; above the read bandwidth means the format is memory-bound here */
        mxl_weight small = o.w;
        small.rows = (1 << 20) / row_bytes;
        if (small.rows > o.w.rows) small.rows = o.w.rows;
        if (small.kind == MXL_W_MLX) small.mlx.rows = small.rows;
        double cpu = 0, best = 1e30;
        for (int r = 0; r < 20 * reps; r++) {
            time_matmul(&small, x, 1, y, scratch, pools[0], 1, &cpu);
            if (cpu > 0 && cpu < best) best = cpu;
        }
        printf("   %8.1f", (double)o.bytes * ((double)small.rows / (double)o.w.rows) / best / 1e9);
        printf("\n");
        fflush(stdout);
        mxl_free(y);
        mxl_free(scratch);
        owned_free(&o);
    }

    if (do_gemm && rc == 0) {
        mxl_threadpool *pool = pools[max_threads - 1];
        double flops = 2.0 * (double)dim * (double)dim * (double)tokens;
        printf("\nGEMM: [%lld tokens x %lld] x [%lld x %lld]^T, %d threads. GFLOP/s of wall time, and per\n"
               "CPU-second used (robust to other load on the machine); ratios to f32 BLAS\n",
               (long long)tokens, (long long)dim, (long long)dim, (long long)dim, max_threads);
        printf("%-15s %9s %12s   %s\n", "format", "GFLOP/s", "per CPU-s", "vs BLAS (wall, CPU)");
        float *y = mxl_malloc((size_t)(tokens * dim) * 4);
        const char *blas_name = NULL;
        void *blas_handle = NULL;
        sgemm_fn sgemm = load_sgemm(&blas_name, &blas_handle);
        double blas_gflops = 0, blas_cpu_gflops = 0;
        if (y && sgemm) {
            owned_weight o;
            if (make_weight(&k_fmts[0], dim, dim, &seed, &o)) {
                double best = 1e30, best_cpu = 0;
                for (int r = 0; r < 3; r++) {
                    double t0 = now_s(), c0 = cpu_s();
                    /* CblasRowMajor=101, CblasNoTrans=111, CblasTrans=112 */
                    sgemm(101, 111, 112, (int)tokens, (int)dim, (int)dim, 1.0f, x, (int)dim,
                          (const float *)o.data, (int)dim, 0.0f, y, (int)dim);
                    double dt = now_s() - t0, dc = cpu_s() - c0;
                    if (r > 0 && dt < best) best = dt, best_cpu = dc;
                }
                blas_gflops = flops / best / 1e9;
                blas_cpu_gflops = best_cpu > 0 ? flops / best_cpu / 1e9 : 0;
                /* OpenBLAS picks its kernel from CPUID; an old build may not know a new CPU and
                 * fall back to a slow generic one (fix: OPENBLAS_CORETYPE=SkylakeX etc.). */
                const char *core = "";
                void *cn = dlsym(blas_handle, "openblas_get_corename");
                if (cn) {
                    const char *(*corename)(void);
                    memcpy(&corename, &cn, sizeof corename);
                    core = corename();
                }
                printf("%-15s %9.1f %12.1f   (system BLAS %s%s%s, its own threading)\n",
                       "BLAS sgemm f32", blas_gflops, blas_cpu_gflops, blas_name,
                       *core ? ", kernel " : "", core);
                if (*core && MXL_CPU_KERN_ORIGIN(dense_gemm4x4) == MXL_CPU_ISA_AVX512VNNI &&
                    (strcasecmp(core, "prescott") == 0 || strcasecmp(core, "core2") == 0 || strcasecmp(core, "nehalem") == 0))
                    printf("  (OpenBLAS did not recognise this AVX-512 CPU and runs its %s kernel; rerun with "
                           "OPENBLAS_CORETYPE=SkylakeX to compare against its AVX-512 kernel)\n", core);
            }
            owned_free(&o);
        } else {
            printf("(no system BLAS with cblas_sgemm could be loaded)\n");
        }
        for (size_t f = 0; y && f < sizeof k_fmts / sizeof k_fmts[0]; f++) {
            const fmt *F = &k_fmts[f];
            if (!F->gemm) continue;
            owned_weight o;
            if (!make_weight(F, dim, dim, &seed, &o)) {
                owned_free(&o);
                break;
            }
            size_t sb = mxl_cpu_matmul_scratch_bytes(&o.w, tokens);
            void *scratch = sb ? mxl_malloc(sb) : NULL;
            if (!sb || scratch) {
                double cpu = 0;
                double dt = time_matmul(&o.w, x, tokens, y, scratch, pool, reps < 2 ? reps : 2, &cpu);
                double g = flops / dt / 1e9;
                printf("%-15s %9.1f %12.1f", F->label, g, cpu > 0 ? flops / cpu / 1e9 : 0.0);
                if (blas_gflops > 0) printf("   %.2fx", g / blas_gflops);
                if (blas_cpu_gflops > 0 && cpu > 0) printf("   %.2fx", flops / cpu / 1e9 / blas_cpu_gflops);
                printf("\n");
                fflush(stdout);
            }
            mxl_free(scratch);
            owned_free(&o);
        }
        mxl_free(y);
        if (blas_handle) dlclose(blas_handle);
    }
    mxl_free(x);
    print_loadavg("at end");
done:
    for (int t = 1; t <= max_threads; t++) mxl_threadpool_destroy(pools[t - 1]);
    return rc;
}

int mxl_cmd_bench(int argc, char **argv) {
    mxl_cli_args a;
    int prc = mxl_cli_parse(&k_cmd, argc, argv, &a);
    if (prc == 1) return 0;
    if (prc) return prc;
    if (strcmp(a.pos[0], "kernels") != 0)
        return mxl_cli_usage_error(&k_cmd, "unknown benchmark '%s' (available: kernels)", a.pos[0]);
    int64_t threads, mb, dim, tokens, reps;
    if (mxl_cli_get_int(&a, "threads", 2, 1, 16, &threads)) return 2;
    if (mxl_cli_get_int(&a, "mb", 256, 1, 1 << 16, &mb)) return 2;
    if (mxl_cli_get_int(&a, "dim", 4096, 256, 65536, &dim)) return 2;
    if (mxl_cli_get_int(&a, "tokens", 512, 1, 65536, &tokens)) return 2;
    if (mxl_cli_get_int(&a, "reps", 5, 1, 1000, &reps)) return 2;
    if (dim % 256) return mxl_cli_usage_error(&k_cmd, "--dim must be a multiple of 256");
    return bench_kernels((int)threads, mb, dim, tokens, (int)reps, !mxl_cli_has(&a, "no-gemm"),
                         !mxl_cli_has(&a, "no-matvec"));
}
