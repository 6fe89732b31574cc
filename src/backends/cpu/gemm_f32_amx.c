/* gemm_f32_amx.c - AMX-BF16 path of gemm_f32.h: an f32-accurate GEMM on the tile unit by
 * "bf16x3" splitting.
 *
 * Every f32 value v is split into two bf16 values, hi = bf16(v) and lo = bf16(v - hi) (both
 * rounded to nearest even), so v = hi + lo to about 2^-16 relative. A product x * w is taken as
 * xh*wh + xh*wl + xl*wh: the dropped xl*wl and the two roundings are each <= 2^-16 |x w|, and a
 * dot product's error is about 2^-16 of sqrt(sum_k (x_k w_k)^2) - the accuracy of an f32 sum, at
 * three tile products (TDPBF16PS, f32 accumulation) per pair of tiles. A tile product does 16 x
 * 16 x 32 multiply-adds in 16 cycles, so even three of them outrun the AVX-512 FMA kernel
 * several times over.
 *
 * Layouts (K32 = K rounded up to 32, N32 = N rounded up to 32, zero padded):
 *   packed weight [N32 / 32 panels][K32 / 32 k-blocks][4 tiles][16 k-pairs][16 outputs][2] bf16:
 *     tiles 0, 1 = hi of outputs 0-15 / 16-31 of the panel, tiles 2, 3 = lo of the same; a tile
 *     row r holds, for each of its 16 outputs n, W[n][k0 + 2r] and W[n][k0 + 2r + 1] (the
 *     "VNNI" pair layout TDPBF16PS reads its second operand in).
 *   activations xh, xl [M16][K32] bf16 row-major (M16 = M rounded up to 16 tokens).
 * The kernel takes 32 tokens x 32 outputs at a time in four accumulator tiles, reloading two
 * activation and two weight tiles three times per k-block (8 loads for 12 tile products; a last
 * block of 16 tokens takes two accumulators). Each output row of a tile
 * depends only on its own token's row, so a token's result is the same whatever M is (batch
 * invariance, as gemm_f32.h promises). Tasks are panels split over the pool, after a first pass
 * that converts the activations (rows split over the pool).
 * The plain reference is mxl_gemm_f32_ref (the exact f32 sum); the tests bound the difference. */
#include "backends/cpu/gemm_f32.h"

#include <stdlib.h>
#include <string.h>

#include "backends/cpu/quant_gguf.h"
#include "core/alloc.h"
#include "core/dtype.h"

#define AMX_BLOCK_U16 (4 * 16 * 32) /* one k-block of a panel: 4 tiles of 16 x 32 bf16 */

static int64_t up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

size_t mxl_gemm_amx_packed_bytes(int64_t N, int64_t K) { return (size_t)up(N, 32) * (size_t)up(K, 32) * 4; }

/* Scalar split of one value: hi then lo, both bf16 bits (the same rounding as the vector path). */
static void split1(float v, uint16_t *hi, uint16_t *lo) {
    *hi = mxl_f32_to_bf16(v);
    *lo = mxl_f32_to_bf16(v - mxl_bf16_to_f32(*hi));
}

void mxl_gemm_amx_pack(const mxl_weight *W, uint16_t *dst) {
    const int64_t N = W->rows, K = W->cols, nkb = up(K, 32) / 32;
    float *row = mxl_malloc((size_t)K * sizeof(float));
    MXL_ASSERT(row != NULL);
    memset(dst, 0, mxl_gemm_amx_packed_bytes(N, K));
    for (int64_t n = 0; n < N; n++) {
        mxl_weight_dequant_row(W, n, row);
        int64_t p = n / 32, c = n % 32;
        uint16_t *pan = dst + (size_t)(p * nkb) * AMX_BLOCK_U16;
        int t = c / 16; /* hi tile of this output; its lo tile is t + 2 */
        int col = c % 16;
        for (int64_t k = 0; k < K; k++) {
            uint16_t *blk = pan + (size_t)(k / 32) * AMX_BLOCK_U16;
            int r = (int)(k % 32) / 2, j = (int)(k % 2);
            size_t off = (size_t)r * 32 + (size_t)col * 2 + (size_t)j;
            split1(row[k], &blk[(size_t)t * 512 + off], &blk[(size_t)(t + 2) * 512 + off]);
        }
    }
    mxl_free(row);
}

void mxl_gemm_amx_split_ref(const float *x, int64_t M, int64_t K, uint16_t *xh, uint16_t *xl) {
    const int64_t K32 = up(K, 32), M16 = up(M, 16);
    for (int64_t m = 0; m < M16; m++)
        for (int64_t k = 0; k < K32; k++) {
            uint16_t h = 0, l = 0;
            if (m < M && k < K) split1(x[m * K + k], &h, &l);
            xh[m * K32 + k] = h;
            xl[m * K32 + k] = l;
        }
}

#if defined(__x86_64__)
#include <immintrin.h>

#include "backends/cpu/amx_tile.h"

#define AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))

/* eight tiles of 16 rows x 64 bytes */
AMX static void tiles_configure(void) {
    mxl_amx_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.colsb[i] = 64;
        c.rows[i] = 16;
    }
    mxl_amx_set_config(&c);
}

/* bf16 bits of 16 floats, round to nearest even, and those bf16 back as floats */
AMX static inline __m256i to_bf16(__m512 v) { return (__m256i)_mm512_cvtneps_pbh(v); }
AMX static inline __m512 from_bf16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* rows [m0, m1) of the split activations, padded rows and columns zero */
AMX static void split_rows(const float *x, int64_t M, int64_t K, int64_t m0, int64_t m1, uint16_t *xh,
                           uint16_t *xl) {
    const int64_t K32 = up(K, 32);
    for (int64_t m = m0; m < m1; m++) {
        uint16_t *h = xh + m * K32, *l = xl + m * K32;
        if (m >= M) {
            memset(h, 0, (size_t)K32 * 2);
            memset(l, 0, (size_t)K32 * 2);
            continue;
        }
        const float *xm = x + m * K;
        for (int64_t k = 0; k < K32; k += 16) {
            int64_t left = K - k;
            __mmask16 mk = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
            __m512 v = _mm512_maskz_loadu_ps(mk, xm + (left > 0 ? k : 0));
            __m256i vh = to_bf16(v);
            __m256i vl = to_bf16(_mm512_sub_ps(v, from_bf16(vh)));
            _mm256_storeu_si256((__m256i *)(h + k), vh);
            _mm256_storeu_si256((__m256i *)(l + k), vl);
        }
    }
}

void mxl_gemm_amx_split(const float *x, int64_t M, int64_t K, uint16_t *xh, uint16_t *xl) {
    split_rows(x, M, K, 0, up(M, 16), xh, xl);
}

typedef struct amx_ctx {
    const mxl_weight *W;
    const float *x;
    int64_t M, M16, K32;
    const float *bias;
    int act;
    float *y;
    uint16_t *xh, *xl;
    float *tmp; /* per thread [32][32] floats */
} amx_ctx;

static void split_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)thread_index;
    amx_ctx *c = vctx;
    int64_t blocks = c->M16 / 16;
    int64_t b0 = blocks * task / n_tasks, b1 = blocks * (task + 1) / n_tasks;
    split_rows(c->x, c->M, c->W->cols, b0 * 16, b1 * 16, c->xh, c->xl);
}

/* 32 tokens x 32 outputs: accumulators 0-3 (C[token half][output half]), activations in 4, 5
 * and weights in 6, 7, reloaded three times per k-block: 8 tile loads feed 12 products. */
AMX static inline void block32(const uint16_t *ah, const uint16_t *al, size_t lda, const uint16_t *bp, int64_t nkb,
                               float *tmp) {
    const size_t a1 = lda / 2 * 16; /* 16 rows further, in elements */
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t kb = 0; kb < nkb; kb++, bp += AMX_BLOCK_U16) {
        _tile_loadd(4, al + kb * 32, lda); /* xl * wh */
        _tile_loadd(5, al + a1 + kb * 32, lda);
        _tile_loadd(6, bp, 64);
        _tile_loadd(7, bp + 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
        _tile_loadd(4, ah + kb * 32, lda); /* xh * wh */
        _tile_loadd(5, ah + a1 + kb * 32, lda);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
        _tile_loadd(6, bp + 1024, 64); /* xh * wl */
        _tile_loadd(7, bp + 1536, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, tmp, 128);
    _tile_stored(1, tmp + 16, 128);
    _tile_stored(2, tmp + 16 * 32, 128);
    _tile_stored(3, tmp + 16 * 32 + 16, 128);
}

/* 16 tokens x 32 outputs (the last block when M16 is not a multiple of 32): accumulators 0, 1. */
AMX static inline void block16(const uint16_t *ah, const uint16_t *al, size_t lda, const uint16_t *bp, int64_t nkb,
                               float *tmp) {
    _tile_zero(0);
    _tile_zero(1);
    for (int64_t kb = 0; kb < nkb; kb++, bp += AMX_BLOCK_U16) {
        _tile_loadd(4, al + kb * 32, lda);
        _tile_loadd(5, ah + kb * 32, lda);
        _tile_loadd(6, bp, 64);
        _tile_loadd(7, bp + 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(0, 5, 6);
        _tile_dpbf16ps(1, 5, 7);
        _tile_loadd(6, bp + 1024, 64);
        _tile_loadd(7, bp + 1536, 64);
        _tile_dpbf16ps(0, 5, 6);
        _tile_dpbf16ps(1, 5, 7);
    }
    _tile_stored(0, tmp, 128);
    _tile_stored(1, tmp + 16, 128);
}

AMX static void panel_task_amx(void *vctx, int task, int n_tasks, int thread_index) {
    amx_ctx *c = vctx;
    const int64_t N = c->W->rows, K32 = c->K32, nkb = K32 / 32, npan = up(N, 32) / 32;
    const int64_t p0 = npan * task / n_tasks, p1 = npan * (task + 1) / n_tasks;
    const uint16_t *packed = c->W->prepared;
    float *tmp = c->tmp + (size_t)thread_index * 32 * 32;
    const size_t lda = (size_t)K32 * 2;
    float bias_p[32];
    tiles_configure();
    for (int64_t m0 = 0; m0 < c->M; m0 += 32) {
        bool two = m0 + 32 <= c->M16;
        int rows = c->M - m0 < 32 ? (int)(c->M - m0) : 32;
        for (int64_t p = p0; p < p1; p++) {
            const uint16_t *bp = packed + (size_t)(p * nkb) * AMX_BLOCK_U16;
            if (two) block32(c->xh + m0 * K32, c->xl + m0 * K32, lda, bp, nkb, tmp);
            else block16(c->xh + m0 * K32, c->xl + m0 * K32, lda, bp, nkb, tmp);
            int64_t n0 = p * 32;
            int ncols = N - n0 < 32 ? (int)(N - n0) : 32;
            for (int j = 0; j < 32; j++) bias_p[j] = c->bias && j < ncols ? c->bias[n0 + j] : 0.0f;
            mxl_gemm_f32_store_avx512(tmp, 32, rows, bias_p, c->act, c->y + m0 * N + n0, N, ncols);
        }
    }
    mxl_amx_release();
}

size_t mxl_gemm_amx_scratch_bytes(int64_t M, int64_t K, int n_threads) {
    return (size_t)up(M, 16) * (size_t)up(K, 32) * 4 + (size_t)(n_threads > 0 ? n_threads : 1) * 32 * 32 * 4 + 64;
}

void mxl_gemm_amx(const mxl_weight *W, const float *x, int64_t M, const float *bias, int act, float *y,
                  void *scratch, mxl_threadpool *pool) {
    amx_ctx c = {W, x, M, up(M, 16), up(W->cols, 32), bias, act, y, NULL, NULL, NULL};
    uint8_t *s = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    c.xh = (uint16_t *)s;
    c.xl = c.xh + c.M16 * c.K32;
    c.tmp = (float *)(c.xl + c.M16 * c.K32);
    int nth = pool ? mxl_threadpool_size(pool) : 1;
    int64_t blocks = c.M16 / 16, npan = up(W->rows, 32) / 32;
    int split_tasks = nth > 1 && blocks > 1 ? (blocks < nth ? (int)blocks : nth) : 1;
    if (split_tasks > 1) mxl_threadpool_run(pool, split_tasks, split_task, &c);
    else split_task(&c, 0, 1, 0);
    int n_tasks = nth > 1 ? (int)(npan < nth ? npan : nth) : 1;
    if (n_tasks > 1) mxl_threadpool_run(pool, n_tasks, panel_task_amx, &c);
    else panel_task_amx(&c, 0, 1, 0);
}
#else
void mxl_gemm_amx_split(const float *x, int64_t M, int64_t K, uint16_t *xh, uint16_t *xl) {
    mxl_gemm_amx_split_ref(x, M, K, xh, xl);
}
size_t mxl_gemm_amx_scratch_bytes(int64_t M, int64_t K, int n_threads) {
    (void)M; (void)K; (void)n_threads;
    return 0;
}
void mxl_gemm_amx(const mxl_weight *W, const float *x, int64_t M, const float *bias, int act, float *y,
                  void *scratch, mxl_threadpool *pool) {
    (void)W; (void)x; (void)M; (void)bias; (void)act; (void)y; (void)scratch; (void)pool;
    MXL_ASSERT(0 && "no AMX on this build");
}
#endif
