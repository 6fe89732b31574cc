/* test_main.c - runner for the unit tests registered with TEST() (see test.h). */
#include <ftw.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "backends/cpu/cpu_features.h"
#include "backends/op_types.h"
#include "core/alloc.h"
#include "test.h"

#define MAX_TESTS 4096

typedef struct entry {
    const char *name;
    const char *file;
    mxl_test_fn fn;
} entry;

static entry g_tests[MAX_TESTS];
static int g_n_tests;

void mxl_test_register(const char *name, const char *file, mxl_test_fn fn) {
    if (g_n_tests >= MAX_TESTS) {
        fprintf(stderr, "too many tests\n");
        abort();
    }
    g_tests[g_n_tests++] = (entry){name, file, fn};
}

/* MXL_REPO_ROOT, else the working directory as an absolute path (tests link fixture files from
 * temporary directories, where a relative root would dangle). */
const char *mxl_test_repo_root(void) {
    const char *r = getenv("MXL_REPO_ROOT");
    if (r && *r) return r;
    static char cwd[4096];
    if (!cwd[0] && !getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
    return cwd;
}

char *mxl_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? mxl_malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        mxl_free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        if (len) *len = (size_t)n;
    }
    return buf;
}

const char *mxl_test_model_path(const char *rel) {
    static char path[4096];
    const char *md = getenv("MLXCEL_MODELS_DIR"), *cache = getenv("MLXCEL_CACHE_DIR");
    if (md && *md) snprintf(path, sizeof path, "%s/%s", md, rel);
    else if (cache && *cache) snprintf(path, sizeof path, "%s/models/%s", cache, rel);
    else snprintf(path, sizeof path, "%s/.cache/mlxcel/models/%s", getenv("HOME") ? getenv("HOME") : "", rel);
    return path;
}

struct json_t *mxl_test_load_json(const char *rel) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", mxl_test_repo_root(), rel);
    json_error_t je;
    json_t *j = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!j) fprintf(stderr, "  cannot load %s: %s (line %d)\n", path, je.text, je.line);
    return j;
}

void mxl_test_vec_vs_json(const float *v, struct json_t *ref, int64_t n, double *max_diff, double *cosine) {
    double m = 0, ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; i++) {
        const double x = v[i], y = json_number_value(json_array_get(ref, (size_t)i));
        m = fmax(m, fabs(x - y));
        ab += x * y, aa += x * x, bb += y * y;
    }
    if (max_diff) *max_diff = m;
    if (cosine) *cosine = ab / sqrt(aa * bb);
}

const char *mxl_test_write_temp(const char *suffix, const void *data, size_t size) {
    static char paths[64][256];
    static int next;
    char *p = paths[next++ % 64];
    snprintf(p, 256, "/tmp/mxl_test_XXXXXX%s", suffix ? suffix : "");
    int fd = mkstemps(p, suffix ? (int)strlen(suffix) : 0);
    if (fd < 0) {
        perror("mkstemps");
        abort();
    }
    if (size && write(fd, data, size) != (ssize_t)size) {
        perror("write");
        abort();
    }
    close(fd);
    return p;
}

uint8_t *mxl_test_unhex(const char *s, size_t *len) {
    size_t n = strlen(s);
    if (n % 2) return NULL;
    uint8_t *b = mxl_malloc(n / 2 + 1);
    if (!b) return NULL;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) {
            mxl_free(b);
            return NULL;
        }
        b[i] = (uint8_t)v;
    }
    *len = n / 2;
    return b;
}

void mxl_test_attn_naive(const mxl_attn_params *p, const float *q, int64_t t, int h, int64_t qpos, const float *k, const float *v,
                         int64_t n_kv, int64_t stride, double *out) {
    const int hd = p->head_dim, kvh = h / (p->n_heads / p->n_kv_heads);
    double s[256], mx = -INFINITY, sum = 0;
    if (n_kv > 256) abort();
    for (int64_t j = 0; j < n_kv; j++) {
        s[j] = -INFINITY;
        if ((p->causal && j > qpos) || (p->window > 0 && qpos - j >= p->window)) continue;
        double d = 0;
        for (int i = 0; i < hd; i++) d += (double)q[(t * p->n_heads + h) * hd + i] * k[j * stride + kvh * hd + i];
        s[j] = d * p->scale;
        if (s[j] > mx) mx = s[j];
    }
    for (int64_t j = 0; j < n_kv; j++) sum += s[j] == -INFINITY ? 0 : exp(s[j] - mx);
    for (int i = 0; i < hd; i++) out[i] = 0;
    for (int64_t j = 0; j < n_kv; j++) {
        if (s[j] == -INFINITY) continue;
        double w = exp(s[j] - mx) / sum;
        for (int i = 0; i < hd; i++) out[i] += w * v[j * stride + kvh * hd + i];
    }
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void mxl_test_rmtree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* MXL_TEST_REQUIRE_ISA=avx2|avx512|amx|neon|dotprod: the kernel tests compare each SIMD level the
 * CPU has against the scalar reference, so on a CPU without the named level they would pass
 * without running its kernels; the run fails instead (the test command names the level its
 * machines have). True when the requirement holds or none is set. */
static bool isa_requirement_met(void) {
    const char *want = getenv("MXL_TEST_REQUIRE_ISA");
    if (!want || !*want) return true;
    static const struct {
        const char *name;
        mxl_cpu_isa isa;
    } k_levels[] = {
#if defined(__aarch64__)
        {"neon", MXL_CPU_ISA_NEON}, {"dotprod", MXL_CPU_ISA_NEON_DOTPROD},
#else
        {"avx2", MXL_CPU_ISA_AVX2}, {"avx512", MXL_CPU_ISA_AVX512VNNI}, {"amx", MXL_CPU_ISA_AMX},
#endif
    };
    for (size_t i = 0; i < sizeof k_levels / sizeof k_levels[0]; i++) {
        if (strcmp(want, k_levels[i].name) != 0) continue;
        mxl_cpu_isa have = mxl_cpu_isa_detect();
        if (have >= k_levels[i].isa) return true;
        fprintf(stderr, "unit: MXL_TEST_REQUIRE_ISA=%s but this CPU's kernels stop at %s: the %s kernel tests would not run\n",
                want, mxl_cpu_isa_name(have), want);
        return false;
    }
    fprintf(stderr, "unit: MXL_TEST_REQUIRE_ISA=%s is not a level of this architecture\n", want);
    return false;
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    if (!isa_requirement_met()) return 1;
    /* MXL_TEST_EXCLUDE=prefix leaves out tests whose name starts with it (the sanitizer run leaves
     * out the slow_ real-model tests, which the release run covers); the count is printed. */
    const char *exclude = getenv("MXL_TEST_EXCLUDE");
    int passed = 0, failed = 0, excluded = 0;
    for (int i = 0; i < g_n_tests; i++) {
        if (filter && !strstr(g_tests[i].name, filter)) continue;
        if (exclude && *exclude && strncmp(g_tests[i].name, exclude, strlen(exclude)) == 0) {
            excluded++;
            continue;
        }
        int f = 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        g_tests[i].fn(&f);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (f) {
            failed++;
            fprintf(stderr, "FAIL %s (%s, %.1f s)\n", g_tests[i].name, g_tests[i].file, secs);
        } else {
            passed++;
            if (getenv("MXL_TEST_VERBOSE")) fprintf(stderr, "ok   %s (%.1f s)\n", g_tests[i].name, secs);
        }
    }
    if (excluded) printf("unit: %d tests named %s* left out of this run\n", excluded, exclude);
    printf("unit: %d passed, %d failed\n", passed, failed);
    if (passed + failed + excluded == 0) { /* a filter that names no test must not pass as if it ran */
        fprintf(stderr, "unit: no test matches '%s'\n", filter ? filter : "");
        return 1;
    }
    return failed ? 1 : 0;
}
