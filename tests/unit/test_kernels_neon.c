/* test_kernels_neon.c - the AArch64 NEON kernels against their scalar references.
 *
 * Run on AArch64 (natively or under qemu-aarch64, scripts/test_arm64.sh). Both variants of each
 * integer kernel are checked: baseline AdvSIMD always, the dot-product (SDOT) variant when
 * mxl_cpu_isa_detect() reaches MXL_CPU_ISA_NEON_DOTPROD (MXL_CPU_ISA=neon caps below it, so the
 * capped run checks the baseline kernels through the matmul dispatch too).
 * Bounds:
 *   - GGUF fused dots (Q4_0..Q8_0, Q2_K..Q6_K, MXFP4, IQ4_NL, IQ4_XS) and the MLX affine dot: bit-identical to the
 *     reference (exact integer block sums, the reference's f32 statements in its order);
 *   - q8a / q8k activation quantizers: bit-identical blocks;
 *   - dense F32/F16/BF16 dots (a float path, FMA chains): |neon - ref| <= 1e-5 * sum_i |w_i x_i|,
 *     and the same bits for misaligned rows;
 *   - RMSNorm (double sums in another order, the same float arithmetic per element): within
 *     4e-7 relative (a few ulps), in place the same bits;
 *   - SiLU / SwiGLU (vector exp): |neon - ref| <= 1e-6 * max(1, |ref|) over [-30, 30] and
 *     saturated arguments; ReLU / ReLU^2 bit-identical.
 * On other architectures one test checks the fallback contract instead (NEON getters NULL, the
 * quantizer entry points equal to the references); nothing there claims to test NEON code. */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/activation.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/dense.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/norm.h"
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/quant_mlx.h"
#include "core/alloc.h"
#include "test.h"
#include "test_mlx_params.h"

static const mxl_dtype k_types[] = {MXL_DTYPE_Q4_0, MXL_DTYPE_Q4_1, MXL_DTYPE_Q5_0, MXL_DTYPE_Q5_1,
                                    MXL_DTYPE_Q8_0, MXL_DTYPE_Q2_K, MXL_DTYPE_Q3_K, MXL_DTYPE_Q4_K,
                                    MXL_DTYPE_Q5_K, MXL_DTYPE_Q6_K, MXL_DTYPE_MXFP4,
                                    MXL_DTYPE_IQ4_NL, MXL_DTYPE_IQ4_XS, MXL_DTYPE_IQ2_XXS, MXL_DTYPE_IQ2_XS, MXL_DTYPE_IQ2_S,
                                    MXL_DTYPE_IQ3_XXS, MXL_DTYPE_IQ3_S, MXL_DTYPE_IQ1_S, MXL_DTYPE_IQ1_M};
#define N_TYPES (sizeof k_types / sizeof k_types[0])

TEST(kernels_neon_isa_levels) {
    mxl_cpu_isa isa = mxl_cpu_isa_detect();
    const char *cap = getenv("MXL_CPU_ISA");
#if defined(__aarch64__)
    /* the x86 levels sort above every level reachable here: no x86 kernel can be selected */
    CHECK(isa < MXL_CPU_ISA_AVX2 && isa <= MXL_CPU_ISA_NEON_DOTPROD);
    if (cap && !strcmp(cap, "scalar")) CHECK(isa == MXL_CPU_ISA_SCALAR);
    else if (cap && !strcmp(cap, "neon")) CHECK(isa == MXL_CPU_ISA_NEON);
    else CHECK(isa == MXL_CPU_ISA_NEON || isa == MXL_CPU_ISA_NEON_DOTPROD);
    char buf[64];
    CHECK(strncmp(mxl_cpu_features_string(buf, sizeof buf), "neon", 4) == 0);
    CHECK_EQ_STR(mxl_cpu_isa_name(MXL_CPU_ISA_NEON_DOTPROD), "neon+dotprod");
    if (getenv("MXL_TEST_VERBOSE")) fprintf(stderr, "  level: %s (%s)\n", mxl_cpu_isa_name(isa), buf);
#else
    /* elsewhere the NEON levels are never detected, and there are no NEON kernels */
    CHECK(isa < MXL_CPU_ISA_NEON);
    (void)cap;
    for (size_t k = 0; k < N_TYPES; k++) CHECK(mxl_vec_dot_neon_get(k_types[k], false) == NULL);
    CHECK(mxl_dense_dot_neon_get(MXL_DTYPE_F32) == NULL);
#endif
}

#if defined(__aarch64__)
static uint32_t g_seed = 0x9e3779b9u;
static uint32_t rnd(void) {
    g_seed ^= g_seed << 13;
    g_seed ^= g_seed >> 17;
    g_seed ^= g_seed << 5;
    return g_seed;
}
static float frand(void) { return (float)(rnd() >> 8) / 16777216.0f * 2.0f - 1.0f; }

/* Random activations of n elements, x scaled by `mag`, with an outlier; rep picks special
 * blocks: an all-zero block (d = 0), and a block whose largest value is +-127 so d = 1 and
 * every x = k + 0.5 is a rounding tie. */
static void fill_x(float *x, int64_t n, int rep) {
    float mag = rep % 3 == 0 ? 1e-3f : rep % 3 == 1 ? 1.0f : 50.0f;
    for (int64_t i = 0; i < n; i++) x[i] = frand() * mag;
    if (rep % 4 == 1) memset(x, 0, 32 * sizeof(float));
    if (rep % 4 == 2 && n >= 256) {
        for (int i = 0; i < 256; i++) x[i] = (float)((int)(rnd() % 200) - 100) + 0.5f;
        x[17] = rep % 8 == 2 ? -127.0f : 127.0f;
    }
}

/* number of variants to check: 1 (baseline) or 2 (baseline and SDOT) */
static int n_variants(void) { return mxl_cpu_isa_detect() >= MXL_CPU_ISA_NEON_DOTPROD ? 2 : 1; }

TEST(kernels_neon_quantizers_bit_exact) {
    REQUIRE(mxl_cpu_isa_detect() >= MXL_CPU_ISA_NEON); /* MXL_CPU_ISA=scalar: nothing to run */
    for (int rep = 0; rep < 24; rep++) {
        int64_t n = 256 * (1 + rep % 3);
        float x[768];
        fill_x(x, n, rep);
        mxl_block_q8a a[24], b[24];
        memset(a, 0x55, sizeof a);
        memset(b, 0xAA, sizeof b);
        mxl_quant_q8a_ref(x, a, n);
        mxl_quant_q8a_neon(x, b, n);
        CHECK(memcmp(a, b, sizeof(mxl_block_q8a) * (size_t)(n / 32)) == 0);
        mxl_block_q8k c[3], d[3];
        memset(c, 0x55, sizeof c);
        memset(d, 0xAA, sizeof d);
        mxl_quant_q8k_ref(x, c, n);
        mxl_quant_q8k_neon(x, d, n);
        CHECK(memcmp(c, d, sizeof(mxl_block_q8k) * (size_t)(n / 256)) == 0);
        /* the tie block really has ties (x * id lands on k + 0.5), so rounding is exercised */
        if (rep % 4 == 2) CHECK(a[0].d == 1.0f && fabsf(x[0] - floorf(x[0]) - 0.5f) == 0.0f);
    }
}

/* Random weight blocks with finite f16 scales (byte offsets of ggml-common.h); block 0 of
 * every row has all bits set (extreme codes, Q8_0's -1s and Q6_K's largest values). */
static void fill_blocks(mxl_dtype t, uint8_t *p, int64_t nblocks) {
    const mxl_dtype_info *inf = mxl_dtype_get_info(t);
    for (int64_t b = 0; b < nblocks; b++) {
        uint8_t *blk = p + b * inf->block_bytes;
        for (uint32_t i = 0; i < inf->block_bytes; i++) blk[i] = b % 5 == 0 ? 0xFF : (uint8_t)rnd();
        uint16_t d = mxl_f32_to_f16(0.001f + 0.05f * (frand() + 1.0f)), m = mxl_f32_to_f16(0.05f * frand());
        switch (t) {
        case MXL_DTYPE_Q4_0: case MXL_DTYPE_Q5_0: case MXL_DTYPE_Q8_0: case MXL_DTYPE_IQ4_NL: case MXL_DTYPE_IQ4_XS:
        case MXL_DTYPE_IQ2_XXS: case MXL_DTYPE_IQ2_XS: case MXL_DTYPE_IQ2_S: case MXL_DTYPE_IQ3_XXS:
        case MXL_DTYPE_IQ3_S: case MXL_DTYPE_IQ1_S:
            memcpy(blk, &d, 2);
            break;
        case MXL_DTYPE_Q4_1: case MXL_DTYPE_Q5_1: case MXL_DTYPE_Q4_K: case MXL_DTYPE_Q5_K:
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &m, 2);
            break;
        case MXL_DTYPE_Q2_K:
            memcpy(blk + 80, &d, 2);
            memcpy(blk + 82, &m, 2);
            break;
        case MXL_DTYPE_Q3_K: memcpy(blk + 108, &d, 2); break;
        case MXL_DTYPE_Q6_K: memcpy(blk + 208, &d, 2); break;
        case MXL_DTYPE_MXFP4: blk[0] = (uint8_t)(118 + rnd() % 8); break; /* scales 2^-10 .. 2^-3 */
        case MXL_DTYPE_IQ1_M: { /* d in the top nibbles of the four u16 scales at byte 48 */
            uint16_t sc[4];
            memcpy(sc, blk + 48, 8);
            for (int k = 0; k < 4; k++) sc[k] = (uint16_t)((sc[k] & 0x0FFF) | (((d >> (4 * k)) & 0xF) << 12));
            memcpy(blk + 48, sc, 8);
            break;
        }
        default: break;
        }
    }
}

/* Activation blocks with arbitrary int8 codes (the full range, -128 included, beyond what the
 * quantizers produce) and consistent partial sums. */
static void fill_act(mxl_act_kind k, uint8_t *a, int64_t n) {
    if (k == MXL_ACT_Q8A) {
        mxl_block_q8a *b = (mxl_block_q8a *)a;
        for (int64_t i = 0; i < n / 32; i++) {
            int sum = 0;
            for (int j = 0; j < 32; j++) sum += b[i].qs[j] = (int8_t)(i % 7 == 3 ? -128 : (int)(rnd() & 0xFF) - 128);
            b[i].d = 0.01f * (1.0f + frand());
            b[i].s = b[i].d * (float)sum;
        }
    } else {
        mxl_block_q8k *b = (mxl_block_q8k *)a;
        for (int64_t i = 0; i < n / 256; i++) {
            for (int j = 0; j < 256; j++) b[i].qs[j] = (int8_t)(i % 3 == 1 ? 127 : (int)(rnd() & 0xFF) - 128);
            for (int j = 0; j < 16; j++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += b[i].qs[16 * j + l];
                b[i].bsums[j] = (int16_t)s;
            }
            b[i].d = 0.01f * (1.0f + frand());
        }
    }
}

TEST(kernels_neon_gguf_dots_bit_exact) {
    REQUIRE(mxl_cpu_isa_detect() >= MXL_CPU_ISA_NEON);
    const int64_t rows_list[] = {1, 3, 7, 13};
    const int64_t len32[] = {32, 96, 288, 1056}, lenk[] = {256, 768, 2304, 256};
    int checked = 0;
    for (size_t k = 0; k < N_TYPES; k++) {
        mxl_dtype t = k_types[k];
        const mxl_dtype_info *inf = mxl_dtype_get_info(t);
        mxl_act_kind ak = mxl_gguf_act_kind(t);
        for (int s = 0; s < 4; s++) {
            int64_t rows = rows_list[s], n = ak == MXL_ACT_Q8A ? len32[s] : lenk[s];
            int64_t rb = n / inf->block_elems * inf->block_bytes;
            uint8_t *w = mxl_malloc((size_t)(rows * rb));
            fill_blocks(t, w, rows * n / inf->block_elems);
            size_t ab = ak == MXL_ACT_Q8A ? (size_t)(n / 32) * sizeof(mxl_block_q8a) : (size_t)(n / 256) * sizeof(mxl_block_q8k);
            uint8_t *act = mxl_malloc(ab), *actq = mxl_malloc(ab);
            fill_act(ak, act, n);
            /* and activations from the quantizer, as matmul produces them */
            float *x = mxl_malloc((size_t)n * sizeof(float));
            fill_x(x, n, s);
            if (ak == MXL_ACT_Q8A) mxl_quant_q8a_ref(x, (mxl_block_q8a *)actq, n);
            else mxl_quant_q8k_ref(x, (mxl_block_q8k *)actq, n);
            for (int v = 0; v < n_variants(); v++) {
                mxl_vec_dot_fn f = mxl_vec_dot_neon_get(t, v == 1);
                REQUIRE(f != NULL);
                for (int64_t r = 0; r < rows; r++)
                    for (int which = 0; which < 2; which++) {
                        const uint8_t *a = which ? actq : act;
                        float ref = mxl_vec_dot_ref(t, n, w + r * rb, a), got = f(n, w + r * rb, a);
                        if (memcmp(&ref, &got, 4) != 0) {
                            fprintf(stderr, "  %s %s n=%lld row %lld: neon %.9g ref %.9g\n", inf->name,
                                    v ? "dotprod" : "neon", (long long)n, (long long)r, got, ref);
                            CHECK(memcmp(&ref, &got, 4) == 0);
                        }
                        checked++;
                    }
            }
            mxl_free(w);
            mxl_free(act);
            mxl_free(actq);
            mxl_free(x);
        }
    }
    CHECK(checked >= (int)N_TYPES * 2 * 24);
}

TEST(kernels_neon_mlx_dot_bit_exact) {
    REQUIRE(mxl_cpu_isa_detect() >= MXL_CPU_ISA_NEON);
    const int bits_list[] = {2, 3, 4, 5, 6, 8};
    const int gs_list[] = {32, 64, 128};
    const mxl_dtype dts[] = {MXL_DTYPE_F16, MXL_DTYPE_BF16, MXL_DTYPE_F32};
    for (int bi = 0; bi < 6; bi++)
        for (int gi = 0; gi < 3; gi++)
            for (int di = 0; di < 3; di++) {
                int bits = bits_list[bi], gs = gs_list[gi];
                mxl_dtype dt = dts[di];
                int64_t rows = 3 + 2 * di, cols = gs * (gi == 1 ? 9 : 3);
                int64_t ng = rows * cols / gs, words = rows * cols * bits / 32;
                /* one spare byte in front: codes and parameters at odd addresses */
                uint8_t *wbuf = mxl_malloc((size_t)words * 4 + 1);
                for (int64_t i = 0; i < words * 4; i++) wbuf[1 + i] = (uint8_t)rnd();
                size_t esz = dt == MXL_DTYPE_F32 ? 4 : 2;
                uint8_t *sc = mxl_malloc((size_t)ng * esz + 1), *bs = mxl_malloc((size_t)ng * esz + 1);
                mxl_test_mlx_params(dt, bits, ng, sc + 1, bs + 1, frand);
                mxl_mlx_qweight W = {bits, gs, dt, rows, cols, (const uint32_t *)(const void *)(wbuf + 1), sc + 1, bs + 1};
                float *x = mxl_malloc((size_t)cols * sizeof(float));
                fill_x(x, cols, bi + gi);
                mxl_block_q8a *xq = mxl_malloc((size_t)(cols / 32) * sizeof(mxl_block_q8a));
                mxl_quant_q8a_ref(x, xq, cols);
                for (int v = 0; v < n_variants(); v++)
                    for (int64_t r = 0; r < rows; r++) {
                        float ref = mxl_mlx_vec_dot_ref(&W, r, xq), got = mxl_mlx_vec_dot_neon(&W, r, xq, v == 1);
                        if (memcmp(&ref, &got, 4) != 0) {
                            fprintf(stderr, "  mlx b%d g%d %s row %lld (%s): neon %.9g ref %.9g\n", bits, gs,
                                    mxl_dtype_name(dt), (long long)r, v ? "dotprod" : "neon", got, ref);
                            CHECK(memcmp(&ref, &got, 4) == 0);
                        }
                    }
                mxl_free(wbuf);
                mxl_free(sc);
                mxl_free(bs);
                mxl_free(x);
                mxl_free(xq);
            }
}

TEST(kernels_neon_dense_dot_within_bound) {
    REQUIRE(mxl_cpu_isa_detect() >= MXL_CPU_ISA_NEON);
    const mxl_dtype dts[] = {MXL_DTYPE_F32, MXL_DTYPE_F16, MXL_DTYPE_BF16};
    const int64_t ns[] = {1, 3, 4, 15, 16, 17, 100, 1001};
    for (int di = 0; di < 3; di++)
        for (int ni = 0; ni < 8; ni++) {
            mxl_dtype dt = dts[di];
            int64_t n = ns[ni];
            size_t esz = dt == MXL_DTYPE_F32 ? 4 : 2;
            uint8_t *w = mxl_malloc((size_t)n * esz + 1), *wm = mxl_malloc((size_t)n * esz + 1);
            float *x = mxl_malloc((size_t)n * sizeof(float));
            for (int64_t i = 0; i < n; i++) {
                float v = frand();
                x[i] = frand();
                if (dt == MXL_DTYPE_F32) memcpy(w + 4 * i, &v, 4);
                else {
                    uint16_t h = dt == MXL_DTYPE_F16 ? mxl_f32_to_f16(v) : mxl_f32_to_bf16(v);
                    memcpy(w + 2 * i, &h, 2);
                }
            }
            memcpy(wm + 1, w, (size_t)n * esz);
            mxl_dense_dot_fn f = mxl_dense_dot_neon_get(dt);
            REQUIRE(f != NULL);
            float ref = mxl_dense_dot_ref(dt, n, w, x), got = f(n, w, x), got_m = f(n, wm + 1, x);
            double absdot = 0;
            for (int64_t i = 0; i < n; i++) absdot += fabs((double)mxl_dense_elem(dt, w, i) * x[i]);
            CHECK(fabs((double)got - ref) <= 1e-5 * absdot + 1e-30);
            CHECK(memcmp(&got, &got_m, 4) == 0);
            mxl_free(w);
            mxl_free(wm);
            mxl_free(x);
        }
}

/* Through the dispatch: at every NEON level the detected CPU allows, mxl_cpu_matmul_isa gives
 * the scalar level's bits for GGUF and MLX weights (odd row counts, several tokens). */
TEST(kernels_neon_matmul_dispatch_bit_exact) {
    REQUIRE(mxl_cpu_isa_detect() >= MXL_CPU_ISA_NEON);
    for (size_t k = 0; k < N_TYPES + 1; k++) {
        int mlx = k == N_TYPES;
        mxl_dtype t = mlx ? MXL_DTYPE_U32 : k_types[k];
        int64_t rows = 11, cols = mlx ? 192 : mxl_gguf_act_kind(t) == MXL_ACT_Q8K ? 512 : 160, n_tok = 3;
        uint8_t *w = NULL;
        uint32_t *wq = NULL;
        float sc[11 * 3], bs[11 * 3];
        mxl_weight W;
        if (mlx) {
            wq = mxl_malloc((size_t)(rows * cols / 8) * 4);
            for (int64_t i = 0; i < rows * cols / 8; i++) wq[i] = rnd();
            for (int i = 0; i < 33; i++) sc[i] = 0.02f * (1.5f + frand()), bs[i] = frand();
            W = (mxl_weight){MXL_W_MLX, MXL_DTYPE_U32, rows, cols, NULL,
                                 {4, 64, MXL_DTYPE_F32, rows, cols, wq, sc, bs}, NULL};
        } else {
            const mxl_dtype_info *inf = mxl_dtype_get_info(t);
            w = mxl_malloc((size_t)(rows * cols / inf->block_elems * inf->block_bytes));
            fill_blocks(t, w, rows * cols / inf->block_elems);
            W = (mxl_weight){MXL_W_GGUF, t, rows, cols, w, {0}, NULL};
        }
        REQUIRE(mxl_weight_check(&W, "w", NULL) == MXL_OK);
        float x[3 * 512], y0[3 * 11], y1[3 * 11];
        fill_x(x, n_tok * cols, (int)k);
        void *scratch = mxl_malloc(mxl_cpu_matmul_scratch_bytes(&W, n_tok));
        mxl_cpu_matmul_isa(&W, x, n_tok, y0, scratch, NULL, MXL_CPU_ISA_SCALAR);
        for (int isa = MXL_CPU_ISA_NEON; isa <= (int)mxl_cpu_isa_detect(); isa++) {
            mxl_cpu_matmul_isa(&W, x, n_tok, y1, scratch, NULL, (mxl_cpu_isa)isa);
            CHECK(memcmp(y0, y1, sizeof y0) == 0);
        }
        mxl_free(scratch);
        mxl_free(w);
        mxl_free(wq);
    }
}

TEST(kernels_neon_rmsnorm_matches_reference) {
    REQUIRE(mxl_cpu_isa_detect() >= MXL_CPU_ISA_NEON);
    const int64_t lens[6] = {1, 15, 16, 17, 301, 384};
    float x[384], w[384], y[384], yr[384], z[384];
    for (int i = 0; i < 384; i++) x[i] = frand() * 3.0f + 0.5f, w[i] = frand();
    for (int li = 0; li < 6; li++) {
        int64_t n = lens[li];
        for (int variant = 0; variant < 3; variant++) {
            const float *wv = variant == 2 ? NULL : w;
            mxl_cpu_rmsnorm_ref(x, wv, n, 1e-6f, variant == 1, yr);
            mxl_cpu_rmsnorm_neon(x, wv, n, 1e-6f, variant == 1, y);
            for (int64_t i = 0; i < n; i++) CHECK(fabsf(y[i] - yr[i]) <= 4e-7f * fabsf(yr[i]) + 1e-30f);
            memcpy(z, x, sizeof z);
            mxl_cpu_rmsnorm_neon(z, wv, n, 1e-6f, variant == 1, z);
            CHECK(memcmp(z, y, (size_t)n * sizeof(float)) == 0);
        }
    }
}

TEST(kernels_neon_activations_match_reference) {
    REQUIRE(mxl_cpu_isa_detect() >= MXL_CPU_ISA_NEON);
    enum { N = 6007 };
    static float x[N], up[N], y[N], yr[N];
    for (int i = 0; i < N; i++) x[i] = -30.0f + 60.0f * (float)i / (N - 1), up[i] = frand();
    x[0] = -200.0f, x[1] = -88.5f, x[2] = 87.5f, x[3] = 150.0f, x[4] = -0.0f, x[5] = 1e-30f;
    const mxl_act acts[3] = {MXL_ACT_SILU, MXL_ACT_RELU2, MXL_ACT_RELU};
    for (int k = 0; k < 3; k++) {
        mxl_cpu_act_ref(acts[k], x, N, yr);
        mxl_cpu_act_neon(acts[k], x, N, y);
        double worst = 0;
        for (int i = 0; i < N; i++) {
            double e = fabs((double)y[i] - yr[i]) / fmax(1.0, fabs(yr[i]));
            worst = e > worst ? e : worst;
        }
        if (getenv("MXL_TEST_VERBOSE")) fprintf(stderr, "  activation %d: worst %.2e\n", (int)acts[k], worst);
        CHECK(acts[k] == MXL_ACT_SILU ? worst <= 1e-6 : memcmp(y, yr, sizeof y) == 0);
        mxl_cpu_glu_ref(acts[k], x, up, N, yr);
        mxl_cpu_glu_neon(acts[k], x, up, N, y);
        for (int i = 0; i < N; i++) CHECK(fabs((double)y[i] - yr[i]) <= 1e-6 * fmax(1.0, fabs(yr[i])));
    }
}
#endif
