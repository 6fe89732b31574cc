/* test_kernels_gemm_f32.c - the encoder GEMM (gemm_f32.h) against its plain reference: F32, F16
 * and BF16 weights, shapes with token and output tails (M not a multiple of 12, N not a multiple
 * of 32, K odd), bias and no bias, no activation and GELU-erf / tanh / SiLU epilogues, 1 and 2
 * threads; and batch invariance (a token's row is bitwise the same computed alone). The GEMM sums
 * k in order with FMA and the reference without, so they differ by rounding only:
 * |fast - ref| <= 1e-5 * (sum_k |w_k x_k| + |b|) + 1e-6 (the vector GELU's erf adds <= 2e-7). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/gemm_f32.h"
#include "core/alloc.h"
#include "core/arena.h"
#include "core/dtype.h"
#include "core/threadpool.h"
#include "test.h"

static uint32_t g_seed = 777;
static float frand(void) {
    g_seed ^= g_seed << 13;
    g_seed ^= g_seed >> 17;
    g_seed ^= g_seed << 5;
    return (float)(g_seed >> 8) / 16777216.0f * 2.0f - 1.0f;
}

static float elem(mxl_dtype t, const void *w, int64_t i) {
    if (t == MXL_DTYPE_F32) return ((const float *)w)[i];
    uint16_t h = ((const uint16_t *)w)[i];
    if (t == MXL_DTYPE_F16) return mxl_f16_to_f32(h);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* one case: random W [N, K] of dtype t, x [M, K], bias [N]; mismatches fail the CHECKs. With
 * `amx` the weight gets the AMX tile layout first (the CPU must have AMX). */
static void run_case_on(int *mxl_test_failed_, mxl_dtype t, int64_t M, int64_t N, int64_t K, bool with_bias, int act,
                        mxl_threadpool *pool, bool amx) {
    size_t esz = t == MXL_DTYPE_F32 ? 4 : 2;
    void *wd = mxl_malloc((size_t)(N * K) * esz);
    float *x = mxl_malloc((size_t)(M * K) * sizeof(float)), *bias = mxl_malloc((size_t)N * sizeof(float));
    float *y = mxl_malloc((size_t)(M * N) * sizeof(float)), *yr = mxl_malloc((size_t)(M * N) * sizeof(float));
    float *one = mxl_malloc((size_t)N * sizeof(float));
    int nth = pool ? mxl_threadpool_size(pool) : 1;
    mxl_arena arena;
    mxl_arena_init(&arena, 4096);
    for (int64_t i = 0; i < N * K; i++) {
        float v = frand();
        if (t == MXL_DTYPE_F32) ((float *)wd)[i] = v;
        else if (t == MXL_DTYPE_F16) ((uint16_t *)wd)[i] = mxl_f32_to_f16(v);
        else {
            uint32_t u;
            memcpy(&u, &v, 4);
            ((uint16_t *)wd)[i] = (uint16_t)(u >> 16);
        }
    }
    for (int64_t i = 0; i < M * K; i++) x[i] = 2.0f * frand();
    for (int64_t i = 0; i < N; i++) bias[i] = frand();
    mxl_weight W = {MXL_W_DENSE, t, N, K, wd, {0}, NULL};
    if (amx) {
        mxl_error err;
        REQUIRE(mxl_gemm_f32_prepare(&W, &arena, &err) == MXL_OK);
        REQUIRE(W.prepared != NULL);
    }
    float *scratch = mxl_aligned_alloc(64, (mxl_gemm_f32_scratch_bytes(&W, M, nth) + 63) / 64 * 64);
    REQUIRE(wd && x && bias && y && yr && one && scratch);
    const float *b = with_bias ? bias : NULL;
    mxl_gemm_f32_ref(&W, x, M, b, act, yr);
    mxl_gemm_f32(&W, x, M, b, act, y, scratch, pool, mxl_cpu_isa_detect());
    double worst = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double mag = b ? fabs(b[n]) : 0;
            for (int64_t k = 0; k < K; k++) mag += fabs((double)elem(t, wd, n * K + k) * x[m * K + k]);
            double d = fabs((double)y[m * N + n] - yr[m * N + n]);
            double tol = 1e-5 * mag + 1e-6;
            if (d / tol > worst) worst = d / tol;
        }
    if (getenv("MXL_TEST_VERBOSE")) fprintf(stderr, "  %s M %lld N %lld K %lld: worst %.3f of the bound\n", amx ? "amx" : "fma", (long long)M, (long long)N, (long long)K, worst);
    CHECK(worst <= 1.0);
    /* batch invariance: the last token alone gives the bits it got inside the batch */
    mxl_gemm_f32(&W, x + (M - 1) * K, 1, b, act, one, scratch, pool, mxl_cpu_isa_detect());
    CHECK(memcmp(one, y + (M - 1) * N, (size_t)N * sizeof(float)) == 0);
    mxl_free(wd);
    mxl_free(x);
    mxl_free(bias);
    mxl_free(y);
    mxl_free(yr);
    mxl_free(one);
    mxl_aligned_free(scratch);
    mxl_arena_free(&arena);
}

static void run_case(int *mxl_test_failed_, mxl_dtype t, int64_t M, int64_t N, int64_t K, bool with_bias, int act,
                     mxl_threadpool *pool) {
    run_case_on(mxl_test_failed_, t, M, N, K, with_bias, act, pool, false);
}

TEST(gemm_f32_matches_reference) {
    mxl_weight probe = {MXL_W_DENSE, MXL_DTYPE_F32, 32, 32, NULL, {0}, NULL};
    if (!mxl_gemm_f32_supported(&probe, mxl_cpu_isa_detect())) {
        /* no AVX-512 here: only the reference exists; check it against a direct sum */
        float w[6] = {1, 2, 3, 4, 5, 6}, x[3] = {1, -1, 2}, y[2];
        mxl_weight W = {MXL_W_DENSE, MXL_DTYPE_F32, 2, 3, w, {0}, NULL};
        mxl_gemm_f32_ref(&W, x, 1, NULL, MXL_GEMM_ACT_NONE, y);
        CHECK(y[0] == 5.0f && y[1] == 11.0f);
        return;
    }
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    const mxl_dtype types[3] = {MXL_DTYPE_F32, MXL_DTYPE_F16, MXL_DTYPE_BF16};
    for (int ti = 0; ti < 3; ti++) {
        run_case(mxl_test_failed_, types[ti], 29, 96, 64, true, MXL_GEMM_ACT_NONE, pool);
        run_case(mxl_test_failed_, types[ti], 12, 45, 33, false, MXL_GEMM_ACT_NONE, NULL);
    }
    run_case(mxl_test_failed_, MXL_DTYPE_F32, 37, 70, 384, true, MXL_ACT_GELU_ERF, pool);
    run_case(mxl_test_failed_, MXL_DTYPE_F32, 5, 17, 40, true, MXL_ACT_GELU_ERF, NULL);
    run_case(mxl_test_failed_, MXL_DTYPE_F32, 25, 64, 48, true, MXL_ACT_GELU_TANH, pool);
    run_case(mxl_test_failed_, MXL_DTYPE_F32, 13, 33, 16, false, MXL_ACT_SILU, pool);
    mxl_threadpool_destroy(pool);
}

/* the vector GELU-erf the GEMM epilogue applies (mxl_cpu_act's AVX-512 form) against libm's
 * over [-12, 12] */
TEST(gemm_gelu_erf_vector_matches_libm) {
    enum { N = 24001 };
    float *v = mxl_malloc(N * sizeof(float));
    REQUIRE(v);
    for (int i = 0; i < N; i++) v[i] = -12.0f + 24.0f * (float)i / (N - 1);
    mxl_cpu_act(MXL_ACT_GELU_ERF, v, N, v);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        float x = -12.0f + 24.0f * (float)i / (N - 1);
        double d = fabs(v[i] - mxl_cpu_act1(MXL_ACT_GELU_ERF, x)) / (1e-6 + 1e-6 * fabs(x));
        if (d > worst) worst = d;
    }
    CHECK(worst <= 1.0);
    mxl_free(v);
}

/* The AMX bf16x3 path (gemm_f32_amx.c), where the CPU has it: the vector hi / lo split equals its
 * scalar reference bit for bit, hi + lo recovers the value to 2^-16 relative, and the GEMM meets
 * the same bound against the exact reference as the FMA kernel, with batch invariance, for every
 * weight dtype and with K, N and M tails (K not a multiple of 32, N of 32, M of 16), at the
 * sizes that get the tile layout (K >= 256, N >= 64). Without AMX only the split reference runs
 * (and the dispatch must not pick AMX). A weight below those sizes keeps no tile layout. */
TEST(gemm_f32_amx_matches_reference) {
    enum { M = 19, K = 70 };
    float x[M * K];
    for (int i = 0; i < M * K; i++) x[i] = frand() * (float)(1 + i % 7) * (i % 3 ? 1e-3f : 10.0f);
    const int64_t M16 = 32, K32 = 96;
    uint16_t *h = mxl_calloc((size_t)(M16 * K32), 2), *l = mxl_calloc((size_t)(M16 * K32), 2);
    uint16_t *h2 = mxl_calloc((size_t)(M16 * K32), 2), *l2 = mxl_calloc((size_t)(M16 * K32), 2);
    REQUIRE(h && l && h2 && l2);
    mxl_gemm_amx_split_ref(x, M, K, h, l);
    double worst = 0;
    for (int64_t m = 0; m < M16; m++)
        for (int64_t k = 0; k < K32; k++) {
            float v = m < M && k < K ? x[m * K + k] : 0.0f;
            double back = (double)mxl_bf16_to_f32(h[m * K32 + k]) + (double)mxl_bf16_to_f32(l[m * K32 + k]);
            double d = fabs(back - v) / (fabs(v) + 1e-30);
            if (v == 0.0f) CHECK(back == 0.0);
            else if (d > worst) worst = d;
        }
    CHECK(worst <= 1.0 / 65536.0);
    mxl_weight probe = {MXL_W_DENSE, MXL_DTYPE_F32, 32, 32, NULL, {0}, NULL};
    {
        mxl_arena small_arena;
        mxl_arena_init(&small_arena, 4096);
        mxl_error serr;
        float wsmall[32 * 32] = {0};
        mxl_weight small = {MXL_W_DENSE, MXL_DTYPE_F32, 32, 32, wsmall, {0}, NULL};
        CHECK(mxl_gemm_f32_prepare(&small, &small_arena, &serr) == MXL_OK && small.prepared == NULL);
        mxl_arena_free(&small_arena);
    }
    if (mxl_cpu_isa_detect() < MXL_CPU_ISA_AMX) {
        mxl_arena arena;
        mxl_arena_init(&arena, 4096);
        mxl_error err;
        CHECK(mxl_gemm_f32_prepare(&probe, &arena, &err) == MXL_OK && probe.prepared == NULL);
        mxl_arena_free(&arena);
    } else {
        mxl_gemm_amx_split(x, M, K, h2, l2);
        CHECK(memcmp(h, h2, (size_t)(M16 * K32) * 2) == 0);
        CHECK(memcmp(l, l2, (size_t)(M16 * K32) * 2) == 0);
        mxl_threadpool *pool = NULL;
        mxl_error err;
        REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
        const mxl_dtype types[3] = {MXL_DTYPE_F32, MXL_DTYPE_F16, MXL_DTYPE_BF16};
        for (int ti = 0; ti < 3; ti++) {
            run_case_on(mxl_test_failed_, types[ti], 29, 96, 256, true, MXL_GEMM_ACT_NONE, pool, true);
            run_case_on(mxl_test_failed_, types[ti], 12, 77, 289, false, MXL_GEMM_ACT_NONE, NULL, true);
        }
        run_case_on(mxl_test_failed_, MXL_DTYPE_F32, 37, 70, 384, true, MXL_ACT_GELU_ERF, pool, true);
        run_case_on(mxl_test_failed_, MXL_DTYPE_F32, 1, 65, 300, true, MXL_ACT_GELU_ERF, NULL, true);
        run_case_on(mxl_test_failed_, MXL_DTYPE_F32, 48, 64, 1536, true, MXL_GEMM_ACT_NONE, pool, true);
        run_case_on(mxl_test_failed_, MXL_DTYPE_F32, 25, 64, 272, true, MXL_ACT_GELU_TANH, pool, true);
        run_case_on(mxl_test_failed_, MXL_DTYPE_F32, 13, 99, 257, false, MXL_ACT_SILU, pool, true);
        mxl_threadpool_destroy(pool);
    }
    mxl_free(h);
    mxl_free(l);
    mxl_free(h2);
    mxl_free(l2);
}
