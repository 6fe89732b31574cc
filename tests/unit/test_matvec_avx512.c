/* test_matvec_avx512.c - the AVX-512 VNNI matrix-vector micro-kernels called directly, against
 * the scalar reference dots, on odd shapes the matmul-level tests do not reach: rows that leave
 * partial 4-row quads, odd block counts, and (MLX) more groups than one 16-group chunk with a
 * partial last chunk.
 *
 * For every (row, token): |kernel - reference| <= 1e-5 * sum_i |w_i x_i| (both consume the same
 * quantized activations; only the f32 summation order differs, as test_kernels_matmul.c states;
 * IQ4_XS: equal, its kernel keeping the reference's exact integer sums and f32 expression),
 * and the result is the same bits whatever the number of rows (1..4) and tokens (1..4) computed
 * alongside it (batch invariance, matmul.h), compared against the 1-row, 1-token call.
 * Without AVX-512 VNNI the same shapes go through mxl_cpu_matmul (the dispatcher's fallback)
 * and are checked against the reference with the same bound. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/quant_mlx.h"
#include "backends/cpu/synth.h"
#include "core/alloc.h"
#include "test.h"
#include "test_mlx_params.h"

static uint64_t g_seed = 0xD1B54A32D192ED03ULL;
static uint32_t rnd32(void) {
    g_seed ^= g_seed << 13, g_seed ^= g_seed >> 7, g_seed ^= g_seed << 17;
    return (uint32_t)(g_seed >> 16);
}
static float frand(void) { return (float)(rnd32() >> 8) / 16777216.0f * 2.0f - 1.0f; }

#define NTOK 4

/* Activation row t dequantized (x_i = d * q_i), for the tolerance's sum |w_i x_i|. */
static void act_f32(mxl_act_kind k, const uint8_t *a, int64_t cols, float *x) {
    for (int64_t i = 0; i < cols; i++) {
        if (k == MXL_ACT_Q8A) {
            const mxl_block_q8a *b = (const mxl_block_q8a *)a + i / 32;
            x[i] = b->d * (float)b->qs[i % 32];
        } else {
            const mxl_block_q8k *b = (const mxl_block_q8k *)a + i / 256;
            x[i] = b->d * (float)b->qs[i % 256];
        }
    }
}

/* Every (nrows, ntok) split of rows x NTOK through `call`, checked against ref[t*rows + r] and
 * against the 1-row, 1-token result. Returns the number of failures (first few printed). */
typedef void (*kern_fn)(const void *ctx, int64_t r0, int nr, int nt, int64_t t0, float *y, int64_t ys);
static int check_splits(kern_fn call, const void *ctx, int64_t rows, const double *ref,
                        const double *bound, const char *label) {
    int fails = 0;
    float *lone = mxl_malloc((size_t)(rows * NTOK) * 4), *y = mxl_malloc((size_t)(rows * NTOK) * 4);
    for (int64_t t = 0; t < NTOK; t++)
        for (int64_t r = 0; r < rows; r++) call(ctx, r, 1, 1, t, lone + t * rows + r, rows);
    for (int64_t i = 0; i < rows * NTOK; i++) {
        if (!(fabs((double)lone[i] - ref[i]) <= bound[i])) {
            if (fails < 4)
                fprintf(stderr, "  %s: row %lld tok %lld: kernel %.9g ref %.9g\n", label,
                        (long long)(i % rows), (long long)(i / rows), (double)lone[i], ref[i]);
            fails++;
        }
    }
    for (int nr = 1; nr <= 4; nr++)
        for (int nt = 1; nt <= NTOK; nt++) {
            for (int64_t i = 0; i < rows * NTOK; i++) y[i] = NAN;
            for (int64_t t0 = 0; t0 < NTOK; t0 += nt) {
                int ntt = NTOK - t0 < nt ? (int)(NTOK - t0) : nt;
                for (int64_t r0 = 0; r0 < rows; r0 += nr) {
                    int nrr = rows - r0 < nr ? (int)(rows - r0) : nr;
                    call(ctx, r0, nrr, ntt, t0, y + t0 * rows + r0, rows);
                }
            }
            if (memcmp(y, lone, (size_t)(rows * NTOK) * 4) != 0) {
                if (fails < 4) fprintf(stderr, "  %s: nrows %d ntok %d differs from 1 x 1\n", label, nr, nt);
                fails++;
            }
        }
    mxl_free(lone);
    mxl_free(y);
    return fails;
}

/* ---- GGUF ---------------------------------------------------------------------------------- */
typedef struct gguf_case {
    mxl_gemm4x4_fn fn;
    const uint8_t *w, *act;
    int64_t cols, row_bytes;
    size_t act_stride;
} gguf_case;

static void gguf_call(const void *vctx, int64_t r0, int nr, int nt, int64_t t0, float *y, int64_t ys) {
    const gguf_case *c = vctx;
    c->fn(c->cols, c->w + r0 * c->row_bytes, (size_t)c->row_bytes, nr, c->act + t0 * c->act_stride,
          c->act_stride, nt, y, ys);
}

TEST(matvec_avx512_gguf_kernels_vs_ref) {
    static const mxl_dtype types[] = {MXL_DTYPE_Q4_0, MXL_DTYPE_Q4_1, MXL_DTYPE_Q4_K, MXL_DTYPE_Q8_0,
                                      MXL_DTYPE_Q5_0, MXL_DTYPE_Q5_1, MXL_DTYPE_Q6_K, MXL_DTYPE_IQ4_NL,
                                      MXL_DTYPE_IQ4_XS};
    const int vnni = mxl_cpu_isa_detect() >= MXL_CPU_ISA_AVX512VNNI;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        mxl_dtype t = types[k];
        const mxl_dtype_info *inf = mxl_dtype_get_info(t);
        mxl_act_kind ak = mxl_gguf_act_kind(t);
        for (int shape = 0; shape < 2; shape++) {
            /* odd block counts (a lone last block for the 32-element formats), rows leaving a
             * partial quad */
            int64_t rows = shape ? 11 : 6, cols = ak == MXL_ACT_Q8K ? 256 * (shape ? 5 : 2) : 32 * (shape ? 45 : 8);
            int64_t nb = rows * cols / inf->block_elems, rb = cols / inf->block_elems * inf->block_bytes;
            uint8_t *w = mxl_malloc((size_t)(nb * inf->block_bytes));
            mxl_synth_fill(t, w, (uint64_t)nb, &g_seed);
            float *x = mxl_malloc((size_t)(NTOK * cols) * 4), *xd = mxl_malloc((size_t)cols * 4);
            float *row = mxl_malloc((size_t)cols * 4);
            for (int64_t i = 0; i < NTOK * cols; i++) x[i] = frand();
            x[7] = 4.0f; /* an outlier */
            size_t as = ak == MXL_ACT_Q8A ? (size_t)(cols / 32) * sizeof(mxl_block_q8a)
                                          : (size_t)(cols / 256) * sizeof(mxl_block_q8k);
            uint8_t *act = mxl_malloc(as * NTOK);
            for (int64_t tk = 0; tk < NTOK; tk++) {
                if (ak == MXL_ACT_Q8A) mxl_quant_q8a_ref(x + tk * cols, (mxl_block_q8a *)(act + tk * as), cols);
                else mxl_quant_q8k_ref(x + tk * cols, (mxl_block_q8k *)(act + tk * as), cols);
            }
            double *ref = mxl_malloc((size_t)(rows * NTOK) * 8), *bound = mxl_malloc((size_t)(rows * NTOK) * 8);
            for (int64_t tk = 0; tk < NTOK; tk++) {
                act_f32(ak, act + tk * as, cols, xd);
                for (int64_t r = 0; r < rows; r++) {
                    mxl_dequant_row_ref(t, w + r * rb, row, cols);
                    double s = 0;
                    for (int64_t i = 0; i < cols; i++) s += fabs((double)row[i] * xd[i]);
                    ref[tk * rows + r] = mxl_vec_dot_ref(t, cols, w + r * rb, act + tk * as);
                    /* IQ4_XS's kernel keeps the reference's exact sums and f32 expression */
                    bound[tk * rows + r] = t == MXL_DTYPE_IQ4_XS && vnni ? 0.0 : 1e-5 * s + 1e-30;
                }
            }
            char label[64];
            snprintf(label, sizeof label, "%s [%lld,%lld]", inf->name, (long long)rows, (long long)cols);
            if (vnni) {
                gguf_case c = {mxl_gemm4x4_avx512_get(t), w, act, cols, rb, as};
                REQUIRE(c.fn != NULL);
                CHECK(check_splits(gguf_call, &c, rows, ref, bound, label) == 0);
            } else { /* the dispatcher without the kernel: same bound */
                mxl_weight W = {MXL_W_GGUF, t, rows, cols, w, {0}, NULL};
                float *y = mxl_malloc((size_t)(rows * NTOK) * 4);
                void *scratch = mxl_malloc(mxl_cpu_matmul_scratch_bytes(&W, NTOK));
                mxl_cpu_matmul(&W, x, NTOK, y, scratch, NULL);
                for (int64_t i = 0; i < rows * NTOK; i++) CHECK(fabs((double)y[i] - ref[i]) <= bound[i]);
                mxl_free(y);
                mxl_free(scratch);
            }
            mxl_free(w);
            mxl_free(x);
            mxl_free(xd);
            mxl_free(row);
            mxl_free(act);
            mxl_free(ref);
            mxl_free(bound);
        }
    }
}

/* ---- MLX ----------------------------------------------------------------------------------- */
typedef struct mlx_case {
    const mxl_mlx_qweight *W;
    const uint8_t *act;
    size_t act_stride;
} mlx_case;

static void mlx_call(const void *vctx, int64_t r0, int nr, int nt, int64_t t0, float *y, int64_t ys) {
    const mlx_case *c = vctx;
    mxl_mlx_gemm4x4_avx512(c->W, r0, nr, c->act + t0 * c->act_stride, c->act_stride, nt, y, ys);
}

TEST(matvec_avx512_mlx_kernel_vs_ref) {
    static const int bits_list[] = {2, 4, 8};
    static const int gs_list[] = {32, 64, 128};
    static const mxl_dtype dts[] = {MXL_DTYPE_F16, MXL_DTYPE_BF16, MXL_DTYPE_F32};
    const int vnni = mxl_cpu_isa_detect() >= MXL_CPU_ISA_AVX512VNNI;
    for (int bi = 0; bi < 3; bi++)
        for (int gi = 0; gi < 3; gi++)
            for (int di = 0; di < 3; di++) {
                int bits = bits_list[bi], gs = gs_list[gi];
                mxl_dtype dt = dts[di];
                /* 37 / 35 / 19 groups: three, three and two 16-group chunks, the last partial;
                 * gs 32: an odd block count (a lone last block) */
                int64_t ng_row = gs == 32 ? 37 : gs == 64 ? 35 : 19;
                int64_t rows = 5 + 2 * di, cols = ng_row * gs, ng = rows * ng_row;
                int64_t words = rows * cols * bits / 32;
                uint32_t *w = mxl_malloc((size_t)words * 4);
                for (int64_t i = 0; i < words; i++) w[i] = rnd32();
                size_t esz = dt == MXL_DTYPE_F32 ? 4 : 2;
                uint8_t *sc = mxl_malloc((size_t)ng * esz), *bs = mxl_malloc((size_t)ng * esz);
                mxl_test_mlx_params(dt, bits, ng, sc, bs, frand);
                mxl_mlx_qweight M = {bits, gs, dt, rows, cols, w, sc, bs};
                float *x = mxl_malloc((size_t)(NTOK * cols) * 4), *xd = mxl_malloc((size_t)cols * 4);
                float *row = mxl_malloc((size_t)cols * 4);
                for (int64_t i = 0; i < NTOK * cols; i++) x[i] = frand();
                x[cols + 3] = -5.0f;
                size_t as = (size_t)(cols / 32) * sizeof(mxl_block_q8a);
                uint8_t *act = mxl_malloc(as * NTOK);
                for (int64_t tk = 0; tk < NTOK; tk++)
                    mxl_quant_q8a_ref(x + tk * cols, (mxl_block_q8a *)(act + tk * as), cols);
                double *ref = mxl_malloc((size_t)(rows * NTOK) * 8), *bound = mxl_malloc((size_t)(rows * NTOK) * 8);
                for (int64_t tk = 0; tk < NTOK; tk++) {
                    act_f32(MXL_ACT_Q8A, act + tk * as, cols, xd);
                    for (int64_t r = 0; r < rows; r++) {
                        mxl_mlx_dequant_row_ref(&M, r, row);
                        double s = 0;
                        for (int64_t i = 0; i < cols; i++) s += fabs((double)row[i] * xd[i]);
                        ref[tk * rows + r] = mxl_mlx_vec_dot_ref(&M, r, (const mxl_block_q8a *)(act + tk * as));
                        bound[tk * rows + r] = 1e-5 * s + 1e-30;
                    }
                }
                char label[64];
                snprintf(label, sizeof label, "mlx b%d g%d %s [%lld,%lld]", bits, gs, mxl_dtype_name(dt),
                         (long long)rows, (long long)cols);
                if (vnni) {
                    REQUIRE(mxl_mlx_gemm4x4_avx512_supported(bits));
                    mlx_case c = {&M, act, as};
                    CHECK(check_splits(mlx_call, &c, rows, ref, bound, label) == 0);
                } else {
                    mxl_weight W = {MXL_W_MLX, MXL_DTYPE_U32, rows, cols, NULL, M, NULL};
                    float *y = mxl_malloc((size_t)(rows * NTOK) * 4);
                    void *scratch = mxl_malloc(mxl_cpu_matmul_scratch_bytes(&W, NTOK));
                    mxl_cpu_matmul(&W, x, NTOK, y, scratch, NULL);
                    for (int64_t i = 0; i < rows * NTOK; i++) CHECK(fabs((double)y[i] - ref[i]) <= bound[i]);
                    mxl_free(y);
                    mxl_free(scratch);
                }
                mxl_free(w);
                mxl_free(sc);
                mxl_free(bs);
                mxl_free(x);
                mxl_free(xd);
                mxl_free(row);
                mxl_free(act);
                mxl_free(ref);
                mxl_free(bound);
            }
}

/* Q8_K activation quantization on AVX-512 is bit for bit the reference: random blocks at several
 * magnitudes, an all-zero block, a block whose largest magnitude occurs with both signs (the
 * first one sets the sign of the scale), and one with ties at the rounding boundary. */
TEST(quant_q8k_avx512_equals_reference) {
    if (mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX512VNNI) {
        CHECK(mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX512VNNI);
        return;
    }
    enum { NB = 9, N = NB * 256 };
    static float x[N];
    static mxl_block_q8k a[NB], b[NB];
    for (int i = 0; i < N; i++) x[i] = frand() * (float)(1 << (i / 256)) * 0.37f;
    for (int i = 256; i < 512; i++) x[i] = 0.0f;                 /* block 1: zeros */
    x[2 * 256 + 7] = -5000.0f, x[2 * 256 + 200] = 5000.0f;       /* block 2: both signs, minus first */
    for (int i = 3 * 256; i < 4 * 256; i++) x[i] = (float)(i % 9 - 4) * 0.5f; /* block 3: halves */
    mxl_quant_q8k_ref(x, a, N);
    mxl_quant_q8k_avx512(x, b, N);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(a[2].d > 0.0f && a[2].qs[7] == -127 && a[2].qs[200] == 127); /* scale -127 / max, max = -5000 */
}
