/* test_kernels_qamx.c - the panel matmul path (AMX-INT8 tiles, their AVX-512 VNNI form, the AVX2
 * form, the AArch64 NEON form with and without SDOT) for GGUF Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / Q2_K..Q6_K / IQ4_NL / IQ4_XS /
 * TQ1_0 / TQ2_0 / MXFP4 and MLX 2- to 8-bit weights
 * (quant_amx.h).
 *
 *  - The panel layout holds the weight exactly: every row dequantized from it equals the GGUF /
 *    MLX reference dequantization bit for bit (shapes with a partial last panel; MLX group sizes
 *    32 / 64 / 128 and f16 / bf16 / f32 scales).
 *  - The tile kernel against the plain f32 reference (dequantized weights, f32 activations): the
 *    NMSE bound of test_kernels_matmul.c, and per output the f32-order bound against the exact
 *    quantized-activation reference (1e-5 * sum |w x|).
 *  - The detected form and the AVX2 form equal mxl_qamx_panels_ref bit for bit (so every CPU's
 *    default path gives the same bits), and the AVX2 q8a2 quantizer the reference's.
 *  - Batch invariance: token counts 1..40 (one and several 16-token groups, remainders, and the
 *    path that splits a panel's codes once for several groups), with and without a pool, give
 *    each token the bits it gets alone; so do outputs large enough for non-temporal stores.
 *  - Input rows made inside the quantization dispatch (mxl_row_prep) give the bits of
 *    making them first.
 * On an x86 CPU below the AVX2 level, mxl_qamx_prepare must leave the weight untouched (the path cannot
 * run; the other kernel tests cover that CPU). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/quant_amx.h"
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/synth.h"
#include "core/alloc.h"
#include "core/arena.h"
#include "core/threadpool.h"
#include "test.h"
#include "test_mlx_params.h"

static uint64_t g_seed = 0x8F1BBCDCCA62C1D6ULL;
static float frand(void) {
    g_seed ^= g_seed << 13, g_seed ^= g_seed >> 7, g_seed ^= g_seed << 17;
    return (float)(g_seed >> 40) / 16777216.0f * 2.0f - 1.0f;
}

static const mxl_dtype k_types[] = {MXL_DTYPE_Q4_0, MXL_DTYPE_Q4_1, MXL_DTYPE_Q8_0, MXL_DTYPE_Q2_K, MXL_DTYPE_Q3_K, MXL_DTYPE_Q4_K, MXL_DTYPE_Q5_K, MXL_DTYPE_Q5_0, MXL_DTYPE_Q5_1,
                                    MXL_DTYPE_Q6_K, MXL_DTYPE_IQ4_NL, MXL_DTYPE_IQ4_XS, MXL_DTYPE_TQ1_0, MXL_DTYPE_TQ2_0, MXL_DTYPE_MXFP4};
/* rows: a partial panel only, one whole and a partial, several; cols: odd and even block counts */
static const int64_t k_shapes[][2] = {{5, 96}, {29, 256}, {70, 544}};
#define MAX_TOK 40
static const int64_t k_ntoks[] = {1, 2, 5, 8, 15, 16, 17, 33, 40};

/* W (without a panel layout; its storage owned by the caller) through the path. */
static int check_weight(mxl_weight W, const char *label, mxl_threadpool *pool) {
    int fails = 0;
    const int64_t rows = W.rows, cols = W.cols;
    mxl_arena arena;
    mxl_arena_init(&arena, 4096);
    if (mxl_qamx_prepare(&W, &arena, NULL) != MXL_OK) fails++;
    if (!mxl_qamx_available()) {
        if (W.prepared != NULL) fails++;
        mxl_arena_free(&arena);
        return fails;
    }
    if (W.prepared == NULL) {
        fprintf(stderr, "  %s: AVX2 CPU but no panel layout\n", label);
        mxl_arena_free(&arena);
        return fails + 1;
    }
    mxl_weight plain = W;
    plain.prepared = NULL;
    /* the layout round trip */
    float *a = mxl_malloc((size_t)cols * 4), *b = mxl_malloc((size_t)cols * 4);
    for (int64_t r = 0; r < rows; r++) {
        mxl_weight_dequant_row(&plain, r, a);
        mxl_qamx_dequant_row_ref(&W, r, b);
        if (memcmp(a, b, (size_t)cols * 4) != 0) {
            if (fails < 4) fprintf(stderr, "  %s: row %lld differs in the panel layout\n", label, (long long)r);
            fails++;
        }
    }
    mxl_free(a);
    mxl_free(b);
    /* the kernel */
    float *x = mxl_malloc((size_t)(MAX_TOK * cols) * 4);
    for (int64_t i = 0; i < MAX_TOK * cols; i++) x[i] = frand();
    x[0] = 3.0f;
    x[20 * cols + 3] = -5.0f; /* outliers, so activation scales differ between tokens */
    size_t sb = mxl_cpu_matmul_scratch_bytes(&W, MAX_TOK);
    void *scratch = mxl_malloc(sb);
    float *lone = mxl_malloc((size_t)(MAX_TOK * rows) * 4), *y = mxl_malloc((size_t)(MAX_TOK * rows) * 4);
    float *ref = mxl_malloc((size_t)(MAX_TOK * rows) * 4), *f32 = mxl_malloc((size_t)(MAX_TOK * rows) * 4);
    /* the same products exactly: dequantized weights against the two-term q8a activations the
     * path multiplies (scalar quantizer, d q + d2 q2 in double), summed in double */
    double *xq = mxl_malloc((size_t)(MAX_TOK * cols) * 8);
    float *wr = mxl_malloc((size_t)cols * 4);
    mxl_block_q8a2 *qa = mxl_malloc((size_t)(cols / 32) * sizeof *qa);
    for (int64_t tk = 0; tk < MAX_TOK; tk++) {
        mxl_quant_q8a2_ref(x + tk * cols, qa, cols);
        for (int64_t i = 0; i < cols; i++)
            xq[tk * cols + i] = (double)qa[i / 32].d * qa[i / 32].qs[i % 32] + (double)qa[i / 32].d2 * qa[i / 32].qs2[i % 32];
    }
    for (int64_t r = 0; r < rows; r++) {
        mxl_weight_dequant_row(&plain, r, wr);
        for (int64_t tk = 0; tk < MAX_TOK; tk++) {
            double acc = 0;
            for (int64_t i = 0; i < cols; i++) acc += (double)wr[i] * xq[tk * cols + i];
            ref[tk * rows + r] = (float)acc;
        }
    }
    mxl_free(xq);
    mxl_free(wr);
    mxl_free(qa);
    mxl_cpu_matmul_f32_ref(&W, x, MAX_TOK, f32);
    for (int64_t tk = 0; tk < MAX_TOK; tk++) mxl_cpu_matmul(&W, x + tk * cols, 1, lone + tk * rows, scratch, NULL);
    {
        /* bit for bit the plain reference of the products: the detected form (lone) and the
         * AVX2 form at every level (its quantizer: the reference's bits) */
        const int64_t nb = cols / 32;
        mxl_block_q8a2 *acts = mxl_malloc((size_t)(MAX_TOK * nb) * sizeof *acts), *acts2 = mxl_malloc((size_t)nb * sizeof *acts2);
        float *exact = mxl_malloc((size_t)(MAX_TOK * rows) * 4), *y2 = mxl_malloc((size_t)(MAX_TOK * rows) * 4);
        for (int64_t tk = 0; tk < MAX_TOK; tk++) {
            mxl_quant_q8a2_ref(x + tk * cols, acts + tk * nb, cols);
            mxl_quant_q8a2_avx2(x + tk * cols, acts2, cols);
            if (memcmp(acts2, acts + tk * nb, (size_t)nb * sizeof *acts) != 0) {
                if (fails < 4) fprintf(stderr, "  %s: AVX2 q8a2 quantization of token %lld differs\n", label, (long long)tk);
                fails++;
            }
        }
        mxl_qamx_panels_ref(&W, 0, (rows + 15) / 16, (const uint8_t *)acts, (size_t)nb * sizeof *acts, MAX_TOK, exact, rows);
        mxl_cpu_matmul_isa(&W, x, MAX_TOK, y2, scratch, NULL, MXL_CPU_ISA_AVX2);
        if (memcmp(lone, exact, (size_t)(MAX_TOK * rows) * 4) != 0) {
            fprintf(stderr, "  %s: the panel kernels differ from mxl_qamx_panels_ref\n", label);
            fails++;
        }
        if (memcmp(y2, exact, (size_t)(MAX_TOK * rows) * 4) != 0) {
            fprintf(stderr, "  %s: the AVX2 form differs from mxl_qamx_panels_ref\n", label);
            fails++;
        }
        if (mxl_cpu_isa_detect() >= MXL_CPU_ISA_AVX512VNNI && mxl_cpu_isa_detect() <= MXL_CPU_ISA_AMX) {
            /* the AVX-512 VNNI level's forms for every token count (on an AMX CPU the tiles take
             * more than a few tokens at the detected level) */
            mxl_cpu_matmul_isa(&W, x, MAX_TOK, y2, scratch, NULL, MXL_CPU_ISA_AVX512VNNI);
            if (memcmp(y2, exact, (size_t)(MAX_TOK * rows) * 4) != 0) {
                fprintf(stderr, "  %s: the AVX-512 VNNI form differs from mxl_qamx_panels_ref\n", label);
                fails++;
            }
        }
#if defined(__aarch64__)
        /* the NEON form's baseline variant (SMULL pairs) beside the detected SDOT one */
        mxl_cpu_matmul_isa(&W, x, MAX_TOK, y2, scratch, NULL, MXL_CPU_ISA_NEON);
        if (memcmp(y2, exact, (size_t)(MAX_TOK * rows) * 4) != 0) {
            fprintf(stderr, "  %s: the NEON form (no dot product) differs from mxl_qamx_panels_ref\n", label);
            fails++;
        }
#endif
        mxl_free(acts), mxl_free(acts2), mxl_free(exact), mxl_free(y2);
    }
    float *row = mxl_malloc((size_t)cols * 4);
    double num = 0, den = 0;
    for (int64_t r = 0; r < rows; r++) {
        mxl_weight_dequant_row(&plain, r, row);
        for (int64_t tk = 0; tk < MAX_TOK; tk++) {
            double s = 0;
            for (int64_t i = 0; i < cols; i++) s += fabs((double)row[i] * x[tk * cols + i]);
            double got = lone[tk * rows + r], want = ref[tk * rows + r];
            if (!(fabs(got - want) <= 1e-5 * s + 1e-30)) {
                if (fails < 4) fprintf(stderr, "  %s: tok %lld row %lld amx %.9g ref %.9g\n", label, (long long)tk, (long long)r, got, want);
                fails++;
            }
            double d = got - f32[tk * rows + r];
            num += d * d, den += (double)f32[tk * rows + r] * f32[tk * rows + r];
        }
    }
    mxl_free(row);
    if (!(num / den <= 1e-3)) {
        fprintf(stderr, "  %s: NMSE %.3g vs f32\n", label, num / den);
        fails++;
    }
    for (int p = 0; p < 2; p++)
        for (size_t k = 0; k < sizeof k_ntoks / sizeof k_ntoks[0]; k++) {
            int64_t nt = k_ntoks[k];
            for (int64_t i = 0; i < MAX_TOK * rows; i++) y[i] = NAN;
            /* scratch sized for a few more tokens than the call has, as the decoder sizes it for
             * its largest batch (the sanitizer build catches a size that falls short) */
            void *sc = mxl_malloc(mxl_cpu_matmul_scratch_bytes(&W, nt + 5));
            mxl_cpu_matmul(&W, x, nt, y, sc, p ? pool : NULL);
            mxl_free(sc);
            if (memcmp(y, lone, (size_t)(nt * rows) * 4) != 0) {
                if (fails < 4) fprintf(stderr, "  %s: n_tok %lld (%s) differs from tokens alone\n", label, (long long)nt, p ? "pool" : "no pool");
                fails++;
            }
        }
    mxl_free(x);
    mxl_free(scratch);
    mxl_free(lone);
    mxl_free(y);
    mxl_free(ref);
    mxl_free(f32);
    mxl_arena_free(&arena);
    return fails;
}

static int check_gguf(mxl_dtype t, int64_t rows, int64_t cols, mxl_threadpool *pool) {
    const mxl_dtype_info *inf = mxl_dtype_get_info(t);
    int64_t nb = rows * cols / inf->block_elems;
    uint8_t *w = mxl_malloc((size_t)nb * inf->block_bytes);
    uint64_t seed = 0x9E3779B97F4A7C15ULL ^ (uint64_t)(rows * 131 + cols);
    mxl_synth_fill(t, w, (uint64_t)nb, &seed);
    mxl_weight W = {MXL_W_GGUF, t, rows, cols, w, {0}, NULL};
    char label[64];
    snprintf(label, sizeof label, "%s [%lld,%lld]", inf->name, (long long)rows, (long long)cols);
    int fails = check_weight(W, label, pool);
    mxl_free(w);
    return fails;
}

static int check_mlx(int bits, int gs, mxl_dtype dt, int64_t rows, int64_t cols, mxl_threadpool *pool) {
    int64_t words = rows * cols * bits / 32, ng = rows * cols / gs;
    uint32_t *w = mxl_malloc((size_t)words * 4);
    for (int64_t i = 0; i < words; i++) {
        g_seed ^= g_seed << 13, g_seed ^= g_seed >> 7, g_seed ^= g_seed << 17;
        w[i] = (uint32_t)(g_seed >> 16);
    }
    size_t esz = dt == MXL_DTYPE_F32 ? 4 : 2;
    uint8_t *sc = mxl_malloc((size_t)ng * esz), *bs = mxl_malloc((size_t)ng * esz);
    mxl_test_mlx_params(dt, bits, ng, sc, bs, frand);
    mxl_weight W = {MXL_W_MLX, MXL_DTYPE_U32, rows, cols, NULL, {bits, gs, dt, rows, cols, w, sc, bs}, NULL};
    char label[64];
    snprintf(label, sizeof label, "mlx b%d g%d %s [%lld,%lld]", bits, gs, mxl_dtype_name(dt), (long long)rows, (long long)cols);
    int fails = check_weight(W, label, pool);
    mxl_free(w);
    mxl_free(sc);
    mxl_free(bs);
    return fails;
}

TEST(kernels_qamx_gguf_mlx_layout_accuracy_invariance) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(3, &pool, NULL) == MXL_OK);
    for (size_t k = 0; k < sizeof k_types / sizeof k_types[0]; k++)
        for (size_t s = 0; s < sizeof k_shapes / sizeof k_shapes[0]; s++)
            CHECK(check_gguf(k_types[k], k_shapes[s][0],
                             mxl_dtype_get_info(k_types[k])->block_elems == 256 ? (k_shapes[s][1] + 255) / 256 * 256 : k_shapes[s][1],
                             pool) == 0);
    static const int gs_list[] = {32, 64, 128};
    static const mxl_dtype dts[] = {MXL_DTYPE_F16, MXL_DTYPE_BF16, MXL_DTYPE_F32};
    static const int bits_list[] = {2, 3, 4, 5, 6, 8};
    for (size_t bi = 0; bi < sizeof bits_list / sizeof bits_list[0]; bi++)
        for (int g = 0, bits = bits_list[bi]; g < 3; g++)
            for (int d = 0; d < 3; d++) {
                const int64_t *shape = k_shapes[(g + d) % 3];
                int64_t cols = (shape[1] + 127) / 128 * 128; /* whole groups of 128 */
                CHECK(check_mlx(bits, gs_list[g], dts[d], shape[0], cols, pool) == 0);
            }
    mxl_threadpool_destroy(pool);
}

/* mxl_cpu_matmul_multi: several weights of one input (formats with and without the pair form,
 * a partial last panel) give each the bits of its own mxl_cpu_matmul, at every token count the
 * paths distinguish, with and without a pool. */
TEST(kernels_matmul_multi_equals_single_calls) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, NULL) == MXL_OK);
    const int64_t cols = 256, rows[3] = {48, 29, 64};
    const mxl_dtype types[3] = {MXL_DTYPE_Q4_1, MXL_DTYPE_Q6_K, MXL_DTYPE_Q8_0};
    mxl_arena arena;
    mxl_arena_init(&arena, 4096);
    mxl_weight W[3];
    uint8_t *mem[3];
    for (int i = 0; i < 3; i++) {
        const mxl_dtype_info *inf = mxl_dtype_get_info(types[i]);
        int64_t nb = rows[i] * cols / inf->block_elems;
        mem[i] = mxl_malloc((size_t)nb * inf->block_bytes);
        uint64_t seed = 77 + (uint64_t)i;
        mxl_synth_fill(types[i], mem[i], (uint64_t)nb, &seed);
        W[i] = (mxl_weight){MXL_W_GGUF, types[i], rows[i], cols, mem[i], {0}, NULL};
        REQUIRE(mxl_qamx_prepare(&W[i], &arena, NULL) == MXL_OK);
        CHECK((W[i].prepared != NULL) == mxl_qamx_available());
    }
    float *x = mxl_malloc((size_t)(12 * cols) * 4);
    for (int64_t i = 0; i < 12 * cols; i++) x[i] = frand();
    size_t sb = 0;
    for (int i = 0; i < 3; i++) {
        size_t b = mxl_cpu_matmul_scratch_bytes(&W[i], 12);
        sb = b > sb ? b : sb;
    }
    void *scratch = mxl_malloc(sb);
    const mxl_weight *Wp[3] = {&W[0], &W[1], &W[2]};
    static const int64_t ntoks[] = {1, 3, 6, 8, 12};
    for (int p = 0; p < 2; p++)
        for (size_t k = 0; k < sizeof ntoks / sizeof ntoks[0]; k++) {
            float *one[3], *many[3];
            for (int i = 0; i < 3; i++) {
                one[i] = mxl_malloc((size_t)(12 * rows[i]) * 4), many[i] = mxl_malloc((size_t)(12 * rows[i]) * 4);
                mxl_cpu_matmul(&W[i], x, ntoks[k], one[i], scratch, p ? pool : NULL);
                for (int64_t j = 0; j < 12 * rows[i]; j++) many[i][j] = NAN;
            }
            mxl_cpu_matmul_multi(Wp, 3, NULL, x, ntoks[k], many, scratch, p ? pool : NULL);
            for (int i = 0; i < 3; i++) {
                CHECK(memcmp(one[i], many[i], (size_t)(ntoks[k] * rows[i]) * 4) == 0);
                mxl_free(one[i]), mxl_free(many[i]);
            }
        }
    mxl_free(scratch), mxl_free(x);
    for (int i = 0; i < 3; i++) mxl_free(mem[i]);
    mxl_arena_free(&arena);
    mxl_threadpool_destroy(pool);
}

/* mxl_row_prep: a matmul whose input rows are made by prep inside its quantization dispatch
 * (mxl_cpu_matmul_prep, mxl_cpu_matmul_multi) gives the bits of making them all first and then
 * multiplying, and makes every row exactly once; with and without a pool, at token counts below
 * and above the pool's size, on a panel format and on a dense one (no quantization: prep runs
 * before the products). */
typedef struct prep_ctx {
    const float *src;
    float *dst;
    int64_t cols;
    int calls[16];
} prep_ctx;

static void prep_scale(void *vctx, int64_t t0, int64_t t1) {
    prep_ctx *c = vctx;
    for (int64_t t = t0; t < t1; t++) {
        c->calls[t]++;
        for (int64_t i = 0; i < c->cols; i++) c->dst[t * c->cols + i] = 0.5f * c->src[t * c->cols + i] + 0.25f;
    }
}

TEST(kernels_matmul_row_prep_equals_prep_first) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, NULL) == MXL_OK);
    const int64_t cols = 128, rows = 40, max_tok = 9;
    mxl_arena arena;
    mxl_arena_init(&arena, 4096);
    const mxl_dtype_info *inf = mxl_dtype_get_info(MXL_DTYPE_Q4_1);
    uint8_t *wq = mxl_malloc((size_t)(rows * cols / 32) * inf->block_bytes);
    uint64_t seed = 99;
    mxl_synth_fill(MXL_DTYPE_Q4_1, wq, (uint64_t)(rows * cols / 32), &seed);
    float *wd = mxl_malloc((size_t)(rows * cols) * 4);
    for (int64_t i = 0; i < rows * cols; i++) wd[i] = frand();
    mxl_weight W[2] = {{MXL_W_GGUF, MXL_DTYPE_Q4_1, rows, cols, wq, {0}, NULL},
                           {MXL_W_DENSE, MXL_DTYPE_F32, rows, cols, wd, {0}, NULL}};
    REQUIRE(mxl_qamx_prepare(&W[0], &arena, NULL) == MXL_OK);
    float *src = mxl_malloc((size_t)(max_tok * cols) * 4), *made = mxl_malloc((size_t)(max_tok * cols) * 4);
    float *x = mxl_malloc((size_t)(max_tok * cols) * 4), *want = mxl_malloc((size_t)(max_tok * rows) * 4);
    float *got = mxl_malloc((size_t)(max_tok * rows) * 4), *got2 = mxl_malloc((size_t)(max_tok * rows) * 4);
    for (int64_t i = 0; i < max_tok * cols; i++) src[i] = frand();
    void *scratch = mxl_malloc(mxl_cpu_matmul_scratch_bytes(&W[0], max_tok));
    static const int64_t ntoks[] = {1, 2, 5, 9};
    for (int w = 0; w < 2; w++)
        for (int p = 0; p < 2; p++)
            for (size_t k = 0; k < sizeof ntoks / sizeof ntoks[0]; k++) {
                const int64_t nt = ntoks[k];
                prep_ctx first = {src, made, cols, {0}};
                prep_scale(&first, 0, nt);
                mxl_cpu_matmul(&W[w], made, nt, want, scratch, p ? pool : NULL);
                prep_ctx c = {src, x, cols, {0}};
                for (int64_t i = 0; i < max_tok * cols; i++) x[i] = NAN;
                const mxl_row_prep prep = {prep_scale, &c};
                mxl_cpu_matmul_prep(&W[w], &prep, x, nt, got, scratch, p ? pool : NULL);
                CHECK(memcmp(got, want, (size_t)(nt * rows) * 4) == 0);
                for (int64_t t = 0; t < nt; t++) CHECK(c.calls[t] == 1);
                /* two weights of one input: rows made once for both */
                prep_ctx c2 = {src, x, cols, {0}};
                for (int64_t i = 0; i < max_tok * cols; i++) x[i] = NAN;
                const mxl_row_prep prep2 = {prep_scale, &c2};
                const mxl_weight *Wp[2] = {&W[w], &W[w]};
                float *ys[2] = {got, got2};
                mxl_cpu_matmul_multi(Wp, 2, &prep2, x, nt, ys, scratch, p ? pool : NULL);
                CHECK(memcmp(got, want, (size_t)(nt * rows) * 4) == 0);
                CHECK(memcmp(got2, want, (size_t)(nt * rows) * 4) == 0);
                for (int64_t t = 0; t < nt; t++) CHECK(c2.calls[t] == 1);
            }
    mxl_free(src), mxl_free(made), mxl_free(x), mxl_free(want), mxl_free(got), mxl_free(got2), mxl_free(scratch), mxl_free(wq), mxl_free(wd);
    mxl_arena_free(&arena);
    mxl_threadpool_destroy(pool);
}

/* An output larger than NT_STORE_BYTES (quant_amx.c: written with non-temporal stores where a
 * 16-row line is whole and 64-byte aligned): every token count gives each token the bits of its
 * one-token call (whose output is small, cache stores), into an aligned output and into one
 * shifted by a float (cache stores again), with and without a pool. 66005 rows: a partial last
 * panel; 4 x 66005 floats is just over 1 MB. */
TEST(kernels_qamx_large_output_same_bits) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, NULL) == MXL_OK);
    const int64_t rows = 66005, cols = 64, max_tok = 8;
    const mxl_dtype_info *inf = mxl_dtype_get_info(MXL_DTYPE_Q8_0);
    uint8_t *w = mxl_malloc((size_t)(rows * cols / 32) * inf->block_bytes);
    uint64_t seed = 4242;
    mxl_synth_fill(MXL_DTYPE_Q8_0, w, (uint64_t)(rows * cols / 32), &seed);
    mxl_weight W = {MXL_W_GGUF, MXL_DTYPE_Q8_0, rows, cols, w, {0}, NULL};
    mxl_arena arena;
    mxl_arena_init(&arena, 4096);
    REQUIRE(mxl_qamx_prepare(&W, &arena, NULL) == MXL_OK);
    float *x = mxl_malloc((size_t)(max_tok * cols) * 4);
    for (int64_t i = 0; i < max_tok * cols; i++) x[i] = frand();
    void *scratch = mxl_malloc(mxl_cpu_matmul_scratch_bytes(&W, max_tok));
    const size_t ybytes = (size_t)(max_tok * rows + 16) * 4;
    float *lone = mxl_malloc(ybytes), *y = mxl_aligned_alloc(64, (ybytes + 63) & ~(size_t)63);
    for (int64_t t = 0; t < max_tok; t++) mxl_cpu_matmul(&W, x + t * cols, 1, lone + t * rows, scratch, NULL);
    static const int64_t ntoks[] = {2, 4, 5, 8};
    for (int p = 0; p < 2; p++)
        for (size_t k = 0; k < sizeof ntoks / sizeof ntoks[0]; k++)
            for (int shift = 0; shift < 2; shift++) {
                float *yo = y + shift;
                for (int64_t i = 0; i < ntoks[k] * rows; i++) yo[i] = NAN;
                mxl_cpu_matmul(&W, x, ntoks[k], yo, scratch, p ? pool : NULL);
                if (memcmp(yo, lone, (size_t)(ntoks[k] * rows) * 4) != 0) {
                    fprintf(stderr, "  n_tok %lld (%s, output shifted %d) differs from tokens alone\n", (long long)ntoks[k],
                            p ? "pool" : "no pool", shift);
                    CHECK(0);
                }
            }
    mxl_free(x), mxl_free(scratch), mxl_free(lone), mxl_aligned_free(y), mxl_free(w);
    mxl_arena_free(&arena);
    mxl_threadpool_destroy(pool);
}

/* The two-term activation quantizer: AVX2 and AVX-512 (where the CPU has them) equal the scalar
 * reference bit for bit (1 to 37
 * blocks: whole groups of 16 and the rest), d2 is d / 256, and the two terms reproduce x to
 * within half a step of d2 (about 2^-16 of the block's largest value) plus the float rounding
 * of x * (256 / d), s their sum and sum the integer sum of 256 qs + qs2. */
TEST(kernels_quant_q8a2_simd_equals_ref) {
    enum { N = 32 * 37 };
    float *x = mxl_malloc(N * 4);
    for (int i = 0; i < N; i++) x[i] = frand() * (i % 97 == 0 ? 40.0f : 1.0f); /* outliers */
    for (int i = 64; i < 96; i++) x[i] = 0.0f;                                    /* an all-zero block */
    for (int i = 96; i < 128; i++) x[i] = (float)(i % 7 - 3) * 0.25f + 0.125f;    /* residuals at d / 2 */
    mxl_block_q8a2 *a = mxl_calloc(N / 32, sizeof *a), *b = mxl_calloc(N / 32, sizeof *b);
    const int nbs[] = {1, 2, 15, 16, 17, 18, 32, 37};
    for (size_t k = 0; k < sizeof nbs / sizeof nbs[0]; k++) {
        memset(a, 0, sizeof *a * (N / 32));
        memset(b, 0, sizeof *b * (N / 32));
        mxl_quant_q8a2_ref(x, a, 32 * nbs[k]);
        for (int isa = MXL_CPU_ISA_AVX2; isa <= MXL_CPU_ISA_AVX512VNNI && isa <= (int)mxl_cpu_isa_detect(); isa++) {
            memset(b, 0, sizeof *b * (N / 32));
            if (isa == MXL_CPU_ISA_AVX2) mxl_quant_q8a2_avx2(x, b, 32 * nbs[k]);
            else mxl_quant_q8a2_avx512(x, b, 32 * nbs[k]);
            CHECK(memcmp(a, b, sizeof *a * (N / 32)) == 0);
        }
    }
    for (int i = 0; i < N; i++) {
        const mxl_block_q8a2 *q = &a[i / 32];
        double v = (double)q->d * q->qs[i % 32] + (double)q->d2 * q->qs2[i % 32];
        /* half a step of d2, plus the float product x * (256 / d): relative 2^-23 of x / d2 */
        CHECK(fabs(v - x[i]) <= 0.5 * q->d2 + fabs(x[i]) * 0x1p-22 + 1e-30);
        CHECK(q->d2 == q->d / 256.0f);
        if (i % 32 == 0) {
            double s = 0;
            int sum = 0;
            for (int j = 0; j < 32; j++) {
                s += (double)q->d * q->qs[j] + (double)q->d2 * q->qs2[j];
                sum += 256 * q->qs[j] + q->qs2[j];
            }
            CHECK(fabs(s - q->s) <= 1e-6 * fabs(s) + 1e-30);
            CHECK_EQ_INT(q->sum, sum);
        }
    }
    mxl_free(x);
    mxl_free(a);
    mxl_free(b);
}
