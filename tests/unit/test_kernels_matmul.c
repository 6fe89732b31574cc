/* test_kernels_matmul.c - fused dots and matmul: every SIMD variant against its scalar reference,
 * threaded against single-threaded, and the quantized-activation paths against the plain f32
 * reference (dequantized weights, f32 activations) with a stated NMSE bound.
 *
 * Bounds: K-quant AVX2 dots (Q2_K..Q6_K) are bit-identical to the reference (their integer
 * super-block sums are exact and combined by the same f32 expression); 32-element formats, MLX,
 * dense and the AVX-512 4x4 tiles differ only in f32 summation order:
 * |simd - ref| <= 1e-5 * sum_i |w_i x_i|.
 * Activation quantization to int8 costs NMSE < 1e-3 relative to the f32 product (measured 1e-6..6e-4 on random data with
 * an outlier of 3x the range in the first block; values
 * are printed with MXL_TEST_VERBOSE=1). */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/dense.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/quant_mlx.h"
#include "core/alloc.h"
#include "core/threadpool.h"
#include "test.h"
#include "test_mlx_params.h"

static uint32_t g_seed = 12345;
static uint32_t rnd(void) {
    g_seed ^= g_seed << 13;
    g_seed ^= g_seed >> 17;
    g_seed ^= g_seed << 5;
    return g_seed;
}
static float frand(void) { return (float)(rnd() >> 8) / 16777216.0f * 2.0f - 1.0f; }

static void put_f16(uint8_t *p, float v) {
    uint16_t h = mxl_f32_to_f16(v);
    memcpy(p, &h, 2);
}

/* Random blocks with finite, moderate f16 scales (byte offsets of ggml-common.h). */
static void fill_random_blocks(mxl_dtype t, uint8_t *p, int64_t nblocks) {
    const mxl_dtype_info *inf = mxl_dtype_get_info(t);
    for (int64_t b = 0; b < nblocks; b++) {
        uint8_t *blk = p + b * inf->block_bytes;
        for (uint32_t i = 0; i < inf->block_bytes; i++) blk[i] = (uint8_t)rnd();
        float d = 0.001f + 0.05f * (frand() + 1.0f), m = 0.05f * frand();
        switch (t) {
        case MXL_DTYPE_Q4_0: case MXL_DTYPE_Q5_0: case MXL_DTYPE_Q8_0: case MXL_DTYPE_IQ4_NL:
            put_f16(blk, d);
            break;
        case MXL_DTYPE_Q4_1: case MXL_DTYPE_Q5_1: case MXL_DTYPE_Q4_K: case MXL_DTYPE_Q5_K:
            put_f16(blk, d);
            put_f16(blk + 2, m);
            break;
        case MXL_DTYPE_Q2_K:
            put_f16(blk + 80, d);
            put_f16(blk + 82, m);
            break;
        case MXL_DTYPE_Q3_K: put_f16(blk + 108, d); break;
        case MXL_DTYPE_Q6_K: put_f16(blk + 208, d * 0.1f); break;
        case MXL_DTYPE_MXFP4: blk[0] = (uint8_t)(118 + rnd() % 8); break; /* 2^-10 .. 2^-3 */
        case MXL_DTYPE_TQ1_0: put_f16(blk + 52, d); break;
        case MXL_DTYPE_IQ4_XS: put_f16(blk, d * 0.1f); break;
        case MXL_DTYPE_IQ2_XXS: case MXL_DTYPE_IQ2_XS: case MXL_DTYPE_IQ2_S: case MXL_DTYPE_IQ3_XXS:
        case MXL_DTYPE_IQ3_S: case MXL_DTYPE_IQ1_S:
            put_f16(blk, d * 0.1f);
            break;
        case MXL_DTYPE_IQ1_M: { /* d in the top nibbles of the four u16 scales at byte 48 */
            uint16_t h = mxl_f32_to_f16(d), sc[4];
            memcpy(sc, blk + 48, 8);
            for (int k = 0; k < 4; k++) sc[k] = (uint16_t)((sc[k] & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12));
            memcpy(blk + 48, sc, 8);
            break;
        }
        case MXL_DTYPE_TQ2_0: /* ternary codes only (3, which no quantizer writes, made 2) */
            for (int j = 0; j < 64; j++)
                for (int l = 0; l < 8; l += 2)
                    if (((blk[j] >> l) & 3) == 3) blk[j] = (uint8_t)(blk[j] & ~(1 << l));
            put_f16(blk + 64, d);
            break;
        default: break;
        }
    }
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

static const mxl_dtype k_gguf_types[] = {MXL_DTYPE_Q4_0, MXL_DTYPE_Q4_1, MXL_DTYPE_Q5_0,
                                         MXL_DTYPE_Q5_1, MXL_DTYPE_Q8_0, MXL_DTYPE_Q2_K,
                                         MXL_DTYPE_Q3_K, MXL_DTYPE_Q4_K, MXL_DTYPE_Q5_K,
                                         MXL_DTYPE_Q6_K, MXL_DTYPE_MXFP4, MXL_DTYPE_TQ1_0, MXL_DTYPE_TQ2_0,
                                         MXL_DTYPE_IQ4_NL, MXL_DTYPE_IQ4_XS, MXL_DTYPE_IQ2_XXS, MXL_DTYPE_IQ2_XS, MXL_DTYPE_IQ2_S,
                                         MXL_DTYPE_IQ3_XXS, MXL_DTYPE_IQ3_S, MXL_DTYPE_IQ1_S, MXL_DTYPE_IQ1_M};

/* sum_i |w_i x_i| of row r (for the f32-order tolerance). */
static double abs_dot(const mxl_weight *W, int64_t r, const float *x) {
    float *row = mxl_malloc((size_t)W->cols * 4);
    mxl_weight_dequant_row(W, r, row);
    double s = 0;
    for (int64_t i = 0; i < W->cols; i++) s += fabs((double)row[i] * x[i]);
    mxl_free(row);
    return s;
}

/* Runs W over n_tok random tokens with: scalar/1 thread, scalar/2 threads, every SIMD level the
 * CPU has (AVX2, AVX-512 VNNI) with 2 threads, and the f32 reference; checks the agreement
 * described at the top. Bit i of exact_mask: level i must equal the scalar result bit for bit. */
static int check_weight(const mxl_weight *W, int64_t n_tok, mxl_threadpool *pool,
                        int exact_mask, double nmse_bound, const char *label) {
    int fails = 0;
    int64_t rows = W->rows, cols = W->cols;
    float *x = mxl_malloc((size_t)(n_tok * cols) * 4);
    for (int64_t i = 0; i < n_tok * cols; i++) x[i] = frand();
    x[0] = 3.0f; /* an outlier */
    size_t sb = mxl_cpu_matmul_scratch_bytes(W, n_tok);
    void *scratch = sb ? mxl_malloc(sb) : NULL;
    float *y_ref1 = mxl_malloc((size_t)(n_tok * rows) * 4), *y_ref2 = mxl_malloc((size_t)(n_tok * rows) * 4);
    float *y_simd = mxl_malloc((size_t)(n_tok * rows) * 4), *y_f32 = mxl_malloc((size_t)(n_tok * rows) * 4);
    mxl_cpu_matmul_isa(W, x, n_tok, y_ref1, scratch, NULL, MXL_CPU_ISA_SCALAR);
    mxl_cpu_matmul_isa(W, x, n_tok, y_ref2, scratch, pool, MXL_CPU_ISA_SCALAR);
    mxl_cpu_matmul_f32_ref(W, x, n_tok, y_f32);
    /* threads never change a result: each output is one dot computed by one thread */
    if (memcmp(y_ref1, y_ref2, (size_t)(n_tok * rows) * 4) != 0) {
        fprintf(stderr, "  %s: 2-thread result differs from 1-thread\n", label);
        fails++;
    }
    /* every level above scalar: AVX2.. on x86, NEON / NEON+dotprod on AArch64 */
    for (int isa = MXL_CPU_ISA_SCALAR + 1; isa <= (int)mxl_cpu_isa_detect(); isa++) {
        mxl_cpu_matmul_isa(W, x, n_tok, y_simd, scratch, pool, (mxl_cpu_isa)isa);
        int exact = (exact_mask >> isa) & 1;
        for (int64_t t = 0; t < n_tok; t++) {
            for (int64_t r = 0; r < rows; r++) {
                float a = y_simd[t * rows + r], b = y_ref1[t * rows + r];
                int ok = exact ? memcmp(&a, &b, 4) == 0
                               : fabs((double)a - b) <= 1e-5 * abs_dot(W, r, x + t * cols) + 1e-30;
                if (!ok) {
                    if (fails < 5)
                        fprintf(stderr, "  %s (%s): tok %lld row %lld simd %.9g ref %.9g\n", label,
                                mxl_cpu_isa_name((mxl_cpu_isa)isa), (long long)t, (long long)r, a, b);
                    fails++;
                }
            }
        }
    }
    double e = nmse(y_ref1, y_f32, n_tok * rows);
    if (getenv("MXL_TEST_VERBOSE")) fprintf(stderr, "  %-28s NMSE vs f32 = %.3g\n", label, e);
    if (!(e <= nmse_bound)) {
        fprintf(stderr, "  %s: NMSE %.3g above %.3g\n", label, e, nmse_bound);
        fails++;
    }
    mxl_free(x);
    mxl_free(scratch);
    mxl_free(y_ref1);
    mxl_free(y_ref2);
    mxl_free(y_simd);
    mxl_free(y_f32);
    return fails;
}

TEST(kernels_quant_q8a_simd_equals_ref) {
    for (int rep = 0; rep < 20; rep++) {
        int64_t n = 32 * (1 + rep % 7);
        float x[224];
        for (int64_t i = 0; i < n; i++) x[i] = frand() * (rep % 3 == 0 ? 1e-3f : 10.0f);
        if (rep == 5) memset(x, 0, sizeof x); /* all-zero blocks: d = 0 */
        if (rep == 6) x[3] = 0.5f * (float)(rep) / 127.0f;
        mxl_block_q8a a[7], b[7];
        memset(a, 0, sizeof a);
        memset(b, 0, sizeof b);
        mxl_quant_q8a_ref(x, a, n);
#if defined(__aarch64__)
        if (mxl_cpu_isa_detect() >= MXL_CPU_ISA_NEON) mxl_quant_q8a_neon(x, b, n);
        else mxl_quant_q8a_ref(x, b, n);
#else
        if (mxl_cpu_isa_detect() >= MXL_CPU_ISA_AVX2) mxl_quant_q8a_avx2(x, b, n);
        else mxl_quant_q8a_ref(x, b, n);
#endif
        CHECK(memcmp(a, b, sizeof(mxl_block_q8a) * (size_t)(n / 32)) == 0);
        /* and the codes reproduce x to within half a step */
        for (int64_t i = 0; i < n; i++)
            CHECK(fabsf(a[i / 32].d * a[i / 32].qs[i % 32] - x[i]) <= 0.5f * a[i / 32].d * 1.001f + 1e-30f);
    }
}

TEST(kernels_matmul_gguf_simd_vs_ref) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, NULL) == MXL_OK);
    for (size_t k = 0; k < sizeof k_gguf_types / sizeof k_gguf_types[0]; k++) {
        mxl_dtype t = k_gguf_types[k];
        int is_k = mxl_gguf_act_kind(t) == MXL_ACT_Q8K;
        const int64_t shapes[3][2] = {{13, is_k ? 256 : 96}, {37, is_k ? 768 : 288}, {1, is_k ? 512 : 32}};
        for (int s = 0; s < 3; s++) {
            int64_t rows = shapes[s][0], cols = shapes[s][1];
            const mxl_dtype_info *inf = mxl_dtype_get_info(t);
            int64_t nb = rows * cols / inf->block_elems;
            uint8_t *w = mxl_malloc((size_t)nb * inf->block_bytes);
            fill_random_blocks(t, w, nb);
            mxl_weight W = {MXL_W_GGUF, t, rows, cols, w, {0}, NULL};
            CHECK(mxl_weight_check(&W, "w", NULL) == MXL_OK);
            int64_t ntok = s == 1 ? 5 : 1 + s;
            /* K-quant dots are exact at the AVX2 level and at the AVX-512 level for formats
             * without a VNNI micro-kernel (a float path, used for every token count so that
             * results do not depend on the batch) and for IQ4_XS's (exact integer sums, the
             * reference's f32 expression); formats without a SIMD dot fall back to the
             * reference */
            int tiled = mxl_gemm4x4_avx512_get(t) != NULL;
            int kq = mxl_gguf_act_kind(t) == MXL_ACT_Q8K;
            int exact = (kq || !mxl_vec_dot_avx2_get(t) ? 1 << MXL_CPU_ISA_AVX2 : 0) |
                        (kq && (!tiled || t == MXL_DTYPE_IQ4_XS) ? 1 << MXL_CPU_ISA_AVX512VNNI : 0);
            char label[64];
            snprintf(label, sizeof label, "%s [%lld,%lld]", inf->name, (long long)rows, (long long)cols);
            CHECK(check_weight(&W, ntok, pool, exact, 1e-3, label) == 0);
            mxl_free(w);
        }
    }
    mxl_threadpool_destroy(pool);
}

TEST(kernels_matmul_mlx_simd_vs_ref) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, NULL) == MXL_OK);
    const int bits_list[] = {2, 3, 4, 5, 6, 8};
    const int gs_list[] = {32, 64, 128};
    const mxl_dtype dts[] = {MXL_DTYPE_F16, MXL_DTYPE_BF16, MXL_DTYPE_F32};
    /* cols 384 (an even number of groups of every size) and an odd number of groups (SmolLM2's
     * 576 = 9 x 64 caught a kernel that read groups in pairs) */
    for (int bi = 0; bi < 6; bi++)
        for (int gi = 0; gi < 3; gi++)
            for (int di = 0; di < 3 * 2; di++) {
                int bits = bits_list[bi], gs = gs_list[gi];
                mxl_dtype dt = dts[di % 3];
                int64_t rows = 11 + bi, cols = di < 3 ? 384 : gs == 128 ? 5 * gs : 9 * gs;
                int64_t ng = rows * cols / gs;
                uint32_t *w = mxl_malloc((size_t)(rows * cols * bits / 32) * 4);
                for (int64_t i = 0; i < rows * cols * bits / 32; i++) w[i] = rnd();
                size_t esz = dt == MXL_DTYPE_F32 ? 4 : 2;
                uint8_t *sc = mxl_malloc((size_t)ng * esz), *bs = mxl_malloc((size_t)ng * esz);
                mxl_test_mlx_params(dt, bits, ng, sc, bs, frand);
                mxl_weight W = {MXL_W_MLX, MXL_DTYPE_U32, rows, cols, NULL,
                                    {bits, gs, dt, rows, cols, w, sc, bs}, NULL};
                CHECK(mxl_weight_check(&W, "w", NULL) == MXL_OK);
                char label[64];
                snprintf(label, sizeof label, "mlx b%d g%d %s cols %lld", bits, gs, mxl_dtype_name(dt), (long long)cols);
                CHECK(check_weight(&W, (bi + gi) % 2 ? 5 : 1 + gi, pool, 0, 1e-3, label) == 0);
                mxl_free(w);
                mxl_free(sc);
                mxl_free(bs);
            }
    mxl_threadpool_destroy(pool);
}

TEST(kernels_matmul_dense_simd_vs_ref) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, NULL) == MXL_OK);
    const mxl_dtype dts[] = {MXL_DTYPE_F32, MXL_DTYPE_F16, MXL_DTYPE_BF16};
    const int64_t cols_list[] = {1, 7, 33, 100, 1001};
    for (int di = 0; di < 3; di++)
        for (int ci = 0; ci < 5; ci++) {
            mxl_dtype dt = dts[di];
            int64_t rows = 9, cols = cols_list[ci];
            size_t esz = dt == MXL_DTYPE_F32 ? 4 : 2;
            uint8_t *w = mxl_malloc((size_t)(rows * cols) * esz);
            for (int64_t i = 0; i < rows * cols; i++) {
                float v = frand();
                if (dt == MXL_DTYPE_F32) memcpy(w + 4 * i, &v, 4);
                else {
                    uint16_t h = dt == MXL_DTYPE_F16 ? mxl_f32_to_f16(v) : mxl_f32_to_bf16(v);
                    memcpy(w + 2 * i, &h, 2);
                }
            }
            mxl_weight W = {MXL_W_DENSE, dt, rows, cols, w, {0}, NULL};
            CHECK(mxl_weight_check(&W, "w", NULL) == MXL_OK);
            char label[64];
            snprintf(label, sizeof label, "dense %s n=%lld", mxl_dtype_name(dt), (long long)cols);
            /* dense scalar path == f32 reference formula: NMSE bound only covers rounding */
            CHECK(check_weight(&W, 5, pool, 0, 1e-10, label) == 0); /* 4-token kernel + 1 */
            mxl_free(w);
        }
    mxl_threadpool_destroy(pool);
}

TEST(kernels_weight_check_refuses_bad_shapes) {
    mxl_error err;
    mxl_weight W = {MXL_W_GGUF, MXL_DTYPE_Q4_K, 4, 100, NULL, {0}, NULL};
    CHECK(mxl_weight_check(&W, "blk.0.q", &err) == MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "blk.0.q") != NULL);
    W.dtype = MXL_DTYPE_I32;
    CHECK(mxl_weight_check(&W, "x", &err) == MXL_ERR_UNSUPPORTED);
    mxl_weight M = {MXL_W_MLX, MXL_DTYPE_U32, 4, 96, NULL, {4, 64, MXL_DTYPE_F16, 4, 96, 0, 0, 0}, NULL};
    CHECK(mxl_weight_check(&M, "m", &err) == MXL_ERR_FORMAT);
    M.mlx.bits = 7;
    CHECK(mxl_weight_check(&M, "m", &err) == MXL_ERR_UNSUPPORTED);
}

/* The 4-token kernels are bit-identical to the 1-token SIMD kernels (same per-token operations). */
TEST(kernels_dot4_equals_single_token_simd) {
    if (mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX2) return; /* nothing to compare on this CPU */
    for (size_t k = 0; k < sizeof k_gguf_types / sizeof k_gguf_types[0]; k++) {
        mxl_dtype t = k_gguf_types[k];
        mxl_vec_dot4_fn d4 = mxl_vec_dot4_avx2_get(t);
        mxl_vec_dot_fn d1 = mxl_vec_dot_avx2_get(t);
        if (!d4) continue;
        REQUIRE(d1 != NULL);
        int is_k = mxl_gguf_act_kind(t) == MXL_ACT_Q8K;
        int64_t n = is_k ? 768 : 352;
        const mxl_dtype_info *inf = mxl_dtype_get_info(t);
        uint8_t *w = mxl_malloc((size_t)(n / inf->block_elems * inf->block_bytes));
        fill_random_blocks(t, w, n / inf->block_elems);
        float x[4 * 768];
        for (int i = 0; i < 4 * 768; i++) x[i] = frand();
        size_t stride = is_k ? (size_t)(n / 256) * sizeof(mxl_block_q8k) : (size_t)(n / 32) * sizeof(mxl_block_q8a);
        uint8_t *act = mxl_malloc(4 * stride);
        for (int tk = 0; tk < 4; tk++) {
            if (is_k) mxl_quant_q8k_ref(x + tk * n, (mxl_block_q8k *)(act + tk * stride), n);
            else mxl_quant_q8a_ref(x + tk * n, (mxl_block_q8a *)(act + tk * stride), n);
        }
        float o4[4];
        d4(n, w, act, stride, o4);
        for (int tk = 0; tk < 4; tk++) {
            float o1 = d1(n, w, act + tk * stride);
            CHECK(memcmp(&o1, &o4[tk], 4) == 0);
        }
        mxl_free(w);
        mxl_free(act);
    }
    const int bits_list[] = {2, 3, 4, 5, 6, 8};
    for (int bi = 0; bi < 6; bi++) {
        int bits = bits_list[bi];
        int64_t cols = 256;
        uint32_t w[256 * 8 / 32];
        for (int i = 0; i < 256 * bits / 32; i++) w[i] = rnd();
        float sc[4], bs[4];
        for (int g = 0; g < 4; g++) sc[g] = 0.01f * (1 + frand()), bs[g] = frand();
        mxl_mlx_qweight W = {bits, 64, MXL_DTYPE_F32, 1, cols, w, sc, bs};
        float x[4 * 256];
        for (int i = 0; i < 4 * 256; i++) x[i] = frand();
        mxl_block_q8a act[4 * 8];
        for (int tk = 0; tk < 4; tk++) mxl_quant_q8a_ref(x + tk * 256, act + tk * 8, 256);
        float o4[4];
        mxl_mlx_vec_dot4_avx2(&W, 0, act, 8 * sizeof(mxl_block_q8a), o4);
        for (int tk = 0; tk < 4; tk++) {
            float o1 = mxl_mlx_vec_dot_avx2(&W, 0, act + tk * 8);
            CHECK(memcmp(&o1, &o4[tk], 4) == 0);
        }
    }
}

TEST(kernels_weight_from_tensors_checks_shapes) {
    mxl_error err;
    mxl_weight W;
    static uint8_t buf[4096];
    /* GGUF Q4_0 [3, 64]: 3 rows x 2 blocks x 18 bytes */
    mxl_tensor t = {MXL_DTYPE_Q4_0, 2, {3, 64}, buf, 3 * 2 * 18};
    CHECK(mxl_weight_from_tensor(&t, "blk.0.ffn_up.weight", &W, &err) == MXL_OK);
    CHECK(W.kind == MXL_W_GGUF && W.rows == 3 && W.cols == 64);
    t.nbytes = 100;
    CHECK(mxl_weight_from_tensor(&t, "blk.0.ffn_up.weight", &W, &err) == MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "blk.0.ffn_up.weight") != NULL);
    mxl_tensor d = {MXL_DTYPE_BF16, 2, {4, 5}, buf, 40};
    CHECK(mxl_weight_from_tensor(&d, "lm_head", &W, &err) == MXL_OK && W.kind == MXL_W_DENSE);
    d.ndim = 3;
    CHECK(mxl_weight_from_tensor(&d, "lm_head", &W, &err) == MXL_ERR_FORMAT);
    /* MLX 4-bit, group 64: [2, 128] -> w U32 [2, 16], scales/biases F16 [2, 2] */
    mxl_tensor w = {MXL_DTYPE_U32, 2, {2, 16}, buf, 2 * 16 * 4};
    mxl_tensor s = {MXL_DTYPE_F16, 2, {2, 2}, buf, 8}, b = s;
    CHECK(mxl_weight_from_mlx(&w, &s, &b, 4, 64, "q_proj", &W, &err) == MXL_OK);
    CHECK(W.kind == MXL_W_MLX && W.cols == 128 && W.mlx.bits == 4);
    /* declared 8 bits do not fit these shapes: refused by name */
    CHECK(mxl_weight_from_mlx(&w, &s, &b, 8, 64, "q_proj", &W, &err) == MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "q_proj") != NULL && strstr(err.msg, "bits=8") != NULL);
    /* 3-bit [2, 128]: 12 words per row */
    mxl_tensor w3 = {MXL_DTYPE_U32, 2, {2, 12}, buf, 2 * 12 * 4};
    CHECK(mxl_weight_from_mlx(&w3, &s, &b, 3, 64, "k_proj", &W, &err) == MXL_OK && W.cols == 128);
    mxl_tensor big = {MXL_DTYPE_F16, 2, {2, INT64_MAX / 2}, buf, 8};
    CHECK(mxl_weight_from_mlx(&w3, &big, &big, 3, 64, "k_proj", &W, &err) == MXL_ERR_FORMAT);
    b.dtype = MXL_DTYPE_BF16;
    CHECK(mxl_weight_from_mlx(&w, &s, &b, 4, 64, "q_proj", &W, &err) == MXL_ERR_FORMAT);
}

/* Tensors inside a safetensors file need not be aligned: misaligned copies give the same bits. */
TEST(kernels_matmul_misaligned_weights) {
    const int64_t rows = 9, cols = 128;
    uint8_t *base = mxl_malloc(rows * cols * 4 + 64);
    float x[5 * 128], y0[5 * 9], y1[5 * 9];
    for (int i = 0; i < 5 * 128; i++) x[i] = frand();
    /* dense F16 */
    uint16_t w16[9 * 128];
    for (int i = 0; i < 9 * 128; i++) w16[i] = mxl_f32_to_f16(frand());
    memcpy(base + 1, w16, sizeof w16);
    mxl_weight A = {MXL_W_DENSE, MXL_DTYPE_F16, rows, cols, w16, {0}, NULL};
    mxl_weight B = {MXL_W_DENSE, MXL_DTYPE_F16, rows, cols, base + 1, {0}, NULL};
    for (int isa = 0; isa <= (int)mxl_cpu_isa_detect(); isa++) {
        mxl_cpu_matmul_isa(&A, x, 5, y0, NULL, NULL, (mxl_cpu_isa)isa);
        mxl_cpu_matmul_isa(&B, x, 5, y1, NULL, NULL, (mxl_cpu_isa)isa);
        CHECK(memcmp(y0, y1, sizeof y0) == 0);
    }
    /* MLX 3-bit, F16 scales: codes at +1, scales at +3 (odd), biases at +5 */
    uint32_t w[9 * 128 * 3 / 32];
    uint16_t sc[9 * 2], bs[9 * 2];
    for (size_t i = 0; i < sizeof w / 4; i++) w[i] = rnd();
    for (int i = 0; i < 18; i++) sc[i] = mxl_f32_to_f16(0.01f), bs[i] = mxl_f32_to_f16(frand());
    uint8_t *pw = base + 1, *ps = pw + sizeof w + 2, *pb = ps + sizeof sc + 2;
    memcpy(pw, w, sizeof w);
    memcpy(ps, sc, sizeof sc);
    memcpy(pb, bs, sizeof bs);
    mxl_weight C = {MXL_W_MLX, MXL_DTYPE_U32, rows, cols, NULL, {3, 64, MXL_DTYPE_F16, rows, cols, w, sc, bs}, NULL};
    mxl_weight D = C;
    D.mlx.w = (const uint32_t *)(const void *)pw;
    D.mlx.scales = ps;
    D.mlx.biases = pb;
    void *scratch = mxl_malloc(mxl_cpu_matmul_scratch_bytes(&C, 5));
    for (int isa = 0; isa <= (int)mxl_cpu_isa_detect(); isa++) {
        mxl_cpu_matmul_isa(&C, x, 5, y0, scratch, NULL, (mxl_cpu_isa)isa);
        mxl_cpu_matmul_isa(&D, x, 5, y1, scratch, NULL, (mxl_cpu_isa)isa);
        CHECK(memcmp(y0, y1, sizeof y0) == 0);
    }
    mxl_free(scratch);
    mxl_free(base);
}
