/* test_kernels_qamx.c - the AMX-INT8 matmul path for GGUF Q4_0 / Q4_1 / Q8_0 (quant_amx.h).
 *
 *  - The panel layout holds the weight exactly: every row dequantized from it equals the GGUF
 *    reference dequantization bit for bit (shapes with a partial last panel).
 *  - The tile kernel against the plain f32 reference (dequantized weights, f32 activations): the
 *    NMSE bound of test_kernels_matmul.c, and per output the f32-order bound against the scalar
 *    quantized-activation reference (1e-5 * sum |w x|).
 *  - Batch invariance: token counts 1..40 (one and several 16-token groups, remainders, and the
 *    path that splits a panel's codes once for several groups), with and without a pool, give
 *    each token the bits it gets alone.
 * On a CPU without AMX-INT8, mxl_qamx_prepare must leave the weight untouched (the path cannot
 * run; the other kernel tests cover that CPU). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/quant_amx.h"
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/synth.h"
#include "core/arena.h"
#include "core/threadpool.h"
#include "test.h"

static uint64_t g_seed = 0x8F1BBCDCCA62C1D6ULL;
static float frand(void) {
    g_seed ^= g_seed << 13, g_seed ^= g_seed >> 7, g_seed ^= g_seed << 17;
    return (float)(g_seed >> 40) / 16777216.0f * 2.0f - 1.0f;
}

static const mxl_dtype k_types[] = {MXL_DTYPE_Q4_0, MXL_DTYPE_Q4_1, MXL_DTYPE_Q8_0};
/* rows: a partial panel only, one whole and a partial, several; cols: odd and even block counts */
static const int64_t k_shapes[][2] = {{5, 96}, {29, 256}, {70, 544}};
#define MAX_TOK 40
static const int64_t k_ntoks[] = {1, 2, 7, 15, 16, 17, 33, 40};

static int check_one(mxl_dtype t, int64_t rows, int64_t cols, mxl_threadpool *pool) {
    int fails = 0;
    const mxl_dtype_info *inf = mxl_dtype_get_info(t);
    int64_t nb = rows * cols / inf->block_elems;
    uint8_t *w = malloc((size_t)nb * inf->block_bytes);
    uint64_t seed = 0x9E3779B97F4A7C15ULL ^ (uint64_t)(rows * 131 + cols);
    mxl_synth_fill(t, w, (uint64_t)nb, &seed);
    mxl_cpu_weight W = {MXL_CPU_W_GGUF, t, rows, cols, w, {0}, NULL};
    mxl_arena arena;
    mxl_arena_init(&arena, 4096);
    if (mxl_qamx_prepare(&W, &arena, NULL) != MXL_OK) fails++;
    if (!mxl_qamx_available()) {
        if (W.amx != NULL) fails++;
        mxl_arena_free(&arena);
        free(w);
        return fails;
    }
    if (W.amx == NULL) {
        fprintf(stderr, "  %s: AMX-INT8 CPU but no panel layout\n", inf->name);
        mxl_arena_free(&arena);
        free(w);
        return fails + 1;
    }
    /* the layout round trip */
    float *a = malloc((size_t)cols * 4), *b = malloc((size_t)cols * 4);
    int64_t rb = mxl_cpu_weight_row_bytes(&W);
    for (int64_t r = 0; r < rows; r++) {
        mxl_dequant_row_ref(t, w + r * rb, a, cols);
        mxl_qamx_dequant_row_ref(&W, r, b);
        if (memcmp(a, b, (size_t)cols * 4) != 0) {
            if (fails < 4) fprintf(stderr, "  %s [%lld,%lld]: row %lld differs in the panel layout\n", inf->name, (long long)rows, (long long)cols, (long long)r);
            fails++;
        }
    }
    free(a);
    free(b);
    /* the kernel */
    float *x = malloc((size_t)(MAX_TOK * cols) * 4);
    for (int64_t i = 0; i < MAX_TOK * cols; i++) x[i] = frand();
    x[0] = 3.0f;
    x[20 * cols + 3] = -5.0f; /* outliers, so activation scales differ between tokens */
    size_t sb = mxl_cpu_matmul_scratch_bytes(&W, MAX_TOK);
    void *scratch = malloc(sb);
    float *lone = malloc((size_t)(MAX_TOK * rows) * 4), *y = malloc((size_t)(MAX_TOK * rows) * 4);
    float *ref = malloc((size_t)(MAX_TOK * rows) * 4), *f32 = malloc((size_t)(MAX_TOK * rows) * 4);
    mxl_cpu_weight plain = W;
    plain.amx = NULL;
    mxl_cpu_matmul_isa(&plain, x, MAX_TOK, ref, scratch, NULL, MXL_CPU_ISA_SCALAR);
    mxl_cpu_matmul_f32_ref(&W, x, MAX_TOK, f32);
    for (int64_t tk = 0; tk < MAX_TOK; tk++) mxl_cpu_matmul(&W, x + tk * cols, 1, lone + tk * rows, scratch, NULL);
    float *row = malloc((size_t)cols * 4);
    double num = 0, den = 0;
    for (int64_t r = 0; r < rows; r++) {
        mxl_dequant_row_ref(t, w + r * rb, row, cols);
        for (int64_t tk = 0; tk < MAX_TOK; tk++) {
            double s = 0;
            for (int64_t i = 0; i < cols; i++) s += fabs((double)row[i] * x[tk * cols + i]);
            double got = lone[tk * rows + r], want = ref[tk * rows + r];
            if (!(fabs(got - want) <= 1e-5 * s + 1e-30)) {
                if (fails < 4) fprintf(stderr, "  %s [%lld,%lld]: tok %lld row %lld amx %.9g ref %.9g\n", inf->name, (long long)rows, (long long)cols, (long long)tk, (long long)r, got, want);
                fails++;
            }
            double d = got - f32[tk * rows + r];
            num += d * d, den += (double)f32[tk * rows + r] * f32[tk * rows + r];
        }
    }
    free(row);
    if (!(num / den <= 1e-3)) {
        fprintf(stderr, "  %s: NMSE %.3g vs f32\n", inf->name, num / den);
        fails++;
    }
    for (int p = 0; p < 2; p++)
        for (size_t k = 0; k < sizeof k_ntoks / sizeof k_ntoks[0]; k++) {
            int64_t nt = k_ntoks[k];
            for (int64_t i = 0; i < MAX_TOK * rows; i++) y[i] = NAN;
            mxl_cpu_matmul(&W, x, nt, y, scratch, p ? pool : NULL);
            if (memcmp(y, lone, (size_t)(nt * rows) * 4) != 0) {
                if (fails < 4) fprintf(stderr, "  %s [%lld,%lld]: n_tok %lld (%s) differs from tokens alone\n", inf->name, (long long)rows, (long long)cols, (long long)nt, p ? "pool" : "no pool");
                fails++;
            }
        }
    free(x);
    free(scratch);
    free(lone);
    free(y);
    free(ref);
    free(f32);
    mxl_arena_free(&arena);
    free(w);
    return fails;
}

TEST(kernels_qamx_layout_accuracy_invariance) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(3, &pool, NULL) == MXL_OK);
    for (size_t k = 0; k < sizeof k_types / sizeof k_types[0]; k++)
        for (size_t s = 0; s < sizeof k_shapes / sizeof k_shapes[0]; s++)
            CHECK(check_one(k_types[k], k_shapes[s][0], k_shapes[s][1], pool) == 0);
    mxl_threadpool_destroy(pool);
}
