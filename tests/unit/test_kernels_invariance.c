/* test_kernels_invariance.c - a token's matmul result does not depend on the batch around it.
 *
 * mxl_cpu_matmul(W, x, n_tok) must give, in row t, the same bits as mxl_cpu_matmul(W, x + t*cols,
 * 1): the server runs the same request alone, batched with others, chunked or after a cached
 * prefix, and greedy decoding must not diverge between those (mlxcel issues 3 and 7). Checked for
 * every weight format the CPU backend runs (GGUF blocks, MLX affine 2..8 bits with every group
 * size, dense F32/F16/BF16 with column counts that leave SIMD tails), every instruction-set level
 * this CPU has, n_tok in {1,2,3,4,5,7,8,9,13} (whole 4-token groups, remainders and both), weight
 * shapes with partial 8-row tiles and partial 4-row quads, with no pool and with a 3-thread pool
 * (rows are split over threads; each output is still computed by one thread).
 *
 * The comparison is memcmp of the float bits. So that identical garbage cannot pass, each
 * batched result is also checked against the plain f32 reference (dequantized weights, f32
 * activations) with the NMSE bound of test_kernels_matmul.c. */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/synth.h"
#include "core/alloc.h"
#include "core/threadpool.h"
#include "test.h"
#include "test_mlx_params.h"

#define MAX_TOK 13
static const int64_t k_ntoks[] = {1, 2, 3, 4, 5, 7, 8, 9, 13};

static uint64_t g_seed = 0x2545F4914F6CDD1DULL;
static float frand(void) {
    g_seed ^= g_seed << 13, g_seed ^= g_seed >> 7, g_seed ^= g_seed << 17;
    return (float)(g_seed >> 40) / 16777216.0f * 2.0f - 1.0f;
}

static double nmse(const float *a, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

/* Every ISA level and pool setting for W: returns the number of mismatching (level, pool,
 * n_tok, token) cases, printing the first few. */
static int check_invariance(const mxl_weight *W, mxl_threadpool *pool, double nmse_bound,
                            const char *label) {
    int fails = 0;
    const int64_t rows = W->rows, cols = W->cols;
    float *x = mxl_malloc((size_t)(MAX_TOK * cols) * 4);
    for (int64_t i = 0; i < MAX_TOK * cols; i++) x[i] = frand();
    x[0] = 3.0f; /* an outlier, so activation scales differ between tokens */
    x[5 * cols + 1] = -4.0f;
    size_t sb = mxl_cpu_matmul_scratch_bytes(W, MAX_TOK);
    void *scratch = sb ? mxl_malloc(sb) : NULL;
    float *lone = mxl_malloc((size_t)(MAX_TOK * rows) * 4); /* row t: token t multiplied alone */
    float *y = mxl_malloc((size_t)(MAX_TOK * rows) * 4);
    float *ref = mxl_malloc((size_t)(MAX_TOK * rows) * 4);
    mxl_cpu_matmul_f32_ref(W, x, MAX_TOK, ref);
    for (int isa = MXL_CPU_ISA_SCALAR; isa <= (int)mxl_cpu_isa_detect(); isa++) {
        for (int64_t t = 0; t < MAX_TOK; t++)
            mxl_cpu_matmul_isa(W, x + t * cols, 1, lone + t * rows, scratch, NULL, (mxl_cpu_isa)isa);
        if (!(nmse(lone, ref, MAX_TOK * rows) <= nmse_bound)) {
            fprintf(stderr, "  %s (%s): lone-token results far from the f32 reference\n", label,
                    mxl_cpu_isa_name((mxl_cpu_isa)isa));
            fails++;
        }
        for (int p = 0; p < 2; p++) {
            for (size_t k = 0; k < sizeof k_ntoks / sizeof k_ntoks[0]; k++) {
                int64_t nt = k_ntoks[k];
                /* poison, so a row the kernels skip cannot pass by keeping old bits */
                for (int64_t i = 0; i < MAX_TOK * rows; i++) y[i] = NAN;
                mxl_cpu_matmul_isa(W, x, nt, y, scratch, p ? pool : NULL, (mxl_cpu_isa)isa);
                for (int64_t t = 0; t < nt; t++) {
                    if (memcmp(y + t * rows, lone + t * rows, (size_t)rows * 4) == 0) continue;
                    if (fails < 6) {
                        int64_t r = 0;
                        while (r < rows && memcmp(&y[t * rows + r], &lone[t * rows + r], 4) == 0) r++;
                        fprintf(stderr,
                                "  %s (%s, %s): n_tok %lld token %lld row %lld: %.9g batched, "
                                "%.9g alone\n",
                                label, mxl_cpu_isa_name((mxl_cpu_isa)isa), p ? "pool" : "no pool",
                                (long long)nt, (long long)t, (long long)r,
                                (double)y[t * rows + r], (double)lone[t * rows + r]);
                    }
                    fails++;
                }
            }
        }
    }
    mxl_free(x);
    mxl_free(scratch);
    mxl_free(lone);
    mxl_free(y);
    mxl_free(ref);
    return fails;
}

/* Row counts: below one 4-row quad, a partial tile + partial quad, and several whole tiles plus
 * a partial one (so the 3-thread split gives each thread several tiles). */
static const int64_t k_rows[] = {3, 13, 45};

TEST(kernels_invariance_gguf) {
    static const mxl_dtype types[] = {MXL_DTYPE_Q4_0, MXL_DTYPE_Q4_1, MXL_DTYPE_Q5_0,
                                      MXL_DTYPE_Q5_1, MXL_DTYPE_Q8_0, MXL_DTYPE_Q2_K,
                                      MXL_DTYPE_Q3_K, MXL_DTYPE_Q4_K, MXL_DTYPE_Q5_K,
                                      MXL_DTYPE_Q6_K, MXL_DTYPE_IQ4_NL, MXL_DTYPE_IQ4_XS};
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(3, &pool, NULL) == MXL_OK);
    uint64_t seed = 0x9E3779B97F4A7C15ULL;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        mxl_dtype t = types[k];
        const mxl_dtype_info *inf = mxl_dtype_get_info(t);
        int is_k = mxl_gguf_act_kind(t) == MXL_ACT_Q8K;
        for (size_t ri = 0; ri < sizeof k_rows / sizeof k_rows[0]; ri++) {
            /* an odd block count (the 512-bit kernels take blocks in pairs) and an even one */
            int64_t rows = k_rows[ri], cols = is_k ? 256 * (1 + (int64_t)ri) : 32 * (3 + (int64_t)ri);
            int64_t nb = rows * cols / inf->block_elems;
            uint8_t *w = mxl_malloc((size_t)nb * inf->block_bytes);
            mxl_synth_fill(t, w, (uint64_t)nb, &seed);
            mxl_weight W = {MXL_W_GGUF, t, rows, cols, w, {0}, NULL};
            REQUIRE(mxl_weight_check(&W, "w", NULL) == MXL_OK);
            char label[64];
            snprintf(label, sizeof label, "%s [%lld,%lld]", inf->name, (long long)rows, (long long)cols);
            CHECK(check_invariance(&W, pool, 1e-3, label) == 0);
            mxl_free(w);
        }
    }
    mxl_threadpool_destroy(pool);
}

TEST(kernels_invariance_mlx) {
    static const int bits_list[] = {2, 3, 4, 5, 6, 8};
    static const int gs_list[] = {32, 64, 128};
    static const mxl_dtype dts[] = {MXL_DTYPE_F16, MXL_DTYPE_BF16, MXL_DTYPE_F32};
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(3, &pool, NULL) == MXL_OK);
    for (int bi = 0; bi < 6; bi++)
        for (int gi = 0; gi < 3; gi++) {
            int bits = bits_list[bi], gs = gs_list[gi];
            mxl_dtype dt = dts[(bi + gi) % 3];
            int64_t rows = k_rows[(bi + gi) % 3];
            int64_t cols = gs == 32 ? 96 : gs == 64 ? 192 : 384; /* 3, 6, 12 blocks of 32 */
            int64_t words = rows * cols * bits / 32, ng = rows * cols / gs;
            uint32_t *w = mxl_malloc((size_t)words * 4);
            for (int64_t i = 0; i < words; i++) {
                g_seed ^= g_seed << 13, g_seed ^= g_seed >> 7, g_seed ^= g_seed << 17;
                w[i] = (uint32_t)(g_seed >> 16);
            }
            size_t esz = dt == MXL_DTYPE_F32 ? 4 : 2;
            uint8_t *sc = mxl_malloc((size_t)ng * esz), *bs = mxl_malloc((size_t)ng * esz);
            mxl_test_mlx_params(dt, bits, ng, sc, bs, frand);
            mxl_weight W = {MXL_W_MLX, MXL_DTYPE_U32, rows, cols, NULL,
                                {bits, gs, dt, rows, cols, w, sc, bs}, NULL};
            REQUIRE(mxl_weight_check(&W, "w", NULL) == MXL_OK);
            char label[64];
            snprintf(label, sizeof label, "mlx b%d g%d %s rows %lld", bits, gs, mxl_dtype_name(dt),
                     (long long)rows);
            CHECK(check_invariance(&W, pool, 1e-3, label) == 0);
            mxl_free(w);
            mxl_free(sc);
            mxl_free(bs);
        }
    mxl_threadpool_destroy(pool);
}

TEST(kernels_invariance_dense) {
    static const mxl_dtype dts[] = {MXL_DTYPE_F32, MXL_DTYPE_F16, MXL_DTYPE_BF16};
    /* column counts around the SIMD widths (8, 16, 32): every kind of tail */
    static const int64_t cols_list[] = {1, 7, 24, 33, 100, 1001};
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(3, &pool, NULL) == MXL_OK);
    uint64_t seed = 0xD1B54A32D192ED03ULL;
    for (int di = 0; di < 3; di++)
        for (int ci = 0; ci < 6; ci++) {
            mxl_dtype dt = dts[di];
            int64_t rows = k_rows[(di + ci) % 3], cols = cols_list[ci];
            size_t esz = dt == MXL_DTYPE_F32 ? 4 : 2;
            uint8_t *w = mxl_malloc((size_t)(rows * cols) * esz);
            mxl_synth_fill(dt, w, (uint64_t)(rows * cols), &seed);
            mxl_weight W = {MXL_W_DENSE, dt, rows, cols, w, {0}, NULL};
            REQUIRE(mxl_weight_check(&W, "w", NULL) == MXL_OK);
            char label[64];
            snprintf(label, sizeof label, "dense %s [%lld,%lld]", mxl_dtype_name(dt), (long long)rows,
                     (long long)cols);
            /* f32 activations: only summation order separates the paths from the reference */
            CHECK(check_invariance(&W, pool, 1e-10, label) == 0);
            mxl_free(w);
        }
    mxl_threadpool_destroy(pool);
}
