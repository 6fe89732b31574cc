/* gemm_f32.c - dispatch (through the kernel table, kernels.h) and threading for gemm_f32.h: tasks are panels of MXL_GEMM_NR weight
 * rows; each task packs its panel (converted to f32, transposed to [K][NR], zero-padded past N)
 * into its thread's scratch and runs the micro-kernel over all M tokens. */
#include "backends/cpu/gemm_f32.h"

#include <string.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/quant_gguf.h"

bool mxl_gemm_f32_supported(const mxl_weight *W, mxl_cpu_isa isa) {
    return mxl_cpu_kern_at(isa)->gemm_f32_panel && W->kind == MXL_W_DENSE &&
           (W->dtype == MXL_DTYPE_F32 || W->dtype == MXL_DTYPE_F16 || W->dtype == MXL_DTYPE_BF16);
}

/* packed panel [K][NR] + padded bias [NR], rounded to 64 bytes */
size_t mxl_gemm_f32_scratch_floats(int64_t K) { return (size_t)(K + 1) * MXL_GEMM_NR + 16; }

typedef struct gemm_ctx {
    const mxl_weight *W;
    const float *x;
    int64_t M;
    const float *bias;
    int act;
    float *y;
    float *scratch;
    size_t scratch_stride;
    /* the level's panel kernel (the table's gemm_f32_panel) */
    void (*panel)(const float *x, int64_t M, int64_t K, const float *bp, const float *bias_p, int act, float *y,
                  int64_t ldy, int ncols);
} gemm_ctx;

static void pack_panel(const mxl_weight *W, int64_t n0, int ncols, float *bp) {
    const int64_t K = W->cols;
    if (ncols < MXL_GEMM_NR) memset(bp, 0, (size_t)K * MXL_GEMM_NR * sizeof(float));
    if (W->dtype == MXL_DTYPE_F32) { /* k outer: sequential writes, 32 sequential read streams */
        const char *w = (const char *)W->data + (size_t)(n0 * K) * sizeof(float);
        if ((uintptr_t)w % _Alignof(float) == 0) {
            const float *wf = (const float *)(const void *)w;
            for (int64_t k = 0; k < K; k++)
                for (int j = 0; j < ncols; j++) bp[k * MXL_GEMM_NR + j] = wf[j * K + k];
        } else { /* (a file whose tensors start off 4-byte boundaries: mlx-vlm's) */
            for (int64_t k = 0; k < K; k++)
                for (int j = 0; j < ncols; j++) memcpy(&bp[k * MXL_GEMM_NR + j], w + (size_t)(j * K + k) * sizeof(float), sizeof(float));
        }
        return;
    }
    for (int j = 0; j < ncols; j++) {
        {
            const void *w = (const uint8_t *)W->data + (size_t)((n0 + j) * K) * 2;
            for (int64_t k = 0; k < K; k++) bp[k * MXL_GEMM_NR + j] = mxl_dense_elem(W->dtype, w, k);
        }
    }
}

static void panel_task(void *vctx, int task, int n_tasks, int thread_index) {
    gemm_ctx *c = vctx;
    const int64_t N = c->W->rows, K = c->W->cols;
    const int64_t n_panels = (N + MXL_GEMM_NR - 1) / MXL_GEMM_NR;
    int64_t p0 = n_panels * task / n_tasks, p1 = n_panels * (task + 1) / n_tasks;
    float *bp = c->scratch + (size_t)thread_index * c->scratch_stride;
    float *bias_p = bp + (size_t)K * MXL_GEMM_NR;
    for (int64_t p = p0; p < p1; p++) {
        int64_t n0 = p * MXL_GEMM_NR;
        int ncols = N - n0 < MXL_GEMM_NR ? (int)(N - n0) : MXL_GEMM_NR;
        pack_panel(c->W, n0, ncols, bp);
        for (int j = 0; j < MXL_GEMM_NR; j++) bias_p[j] = c->bias && j < ncols ? c->bias[n0 + j] : 0.0f;
        c->panel(c->x, c->M, K, bp, bias_p, c->act, c->y + n0, N, ncols);
    }
}

bool mxl_gemm_f32_amx(const mxl_weight *W, mxl_cpu_isa isa) {
    return W->prepared && mxl_cpu_kern_at(isa)->gemm_f32_amx;
}

size_t mxl_gemm_f32_scratch_bytes(const mxl_weight *W, int64_t M, int n_threads) {
    size_t per = (mxl_gemm_f32_scratch_floats(W->cols) + 15) / 16 * 16;
    size_t fma = per * (size_t)(n_threads > 0 ? n_threads : 1) * sizeof(float) + 64;
    size_t amx = W->prepared ? mxl_gemm_amx_scratch_bytes(M, W->cols, n_threads) : 0;
    return fma > amx ? fma : amx;
}

mxl_status mxl_gemm_f32_prepare(mxl_weight *W, mxl_arena *arena, mxl_error *err) {
    /* the tile path pays for its split and epilogue from K = 256 and a few panels up; smaller
     * matrices (tiny test models) keep the f32 FMA kernel and its f32 rounding */
    if (W->prepared || !mxl_cpu_kern()->gemm_f32_amx || !mxl_gemm_f32_supported(W, mxl_cpu_isa_detect()) ||
        W->cols < MXL_GEMM_AMX_MIN_K || W->rows < MXL_GEMM_AMX_MIN_N)
        return MXL_OK;
    uint16_t *p = mxl_arena_alloc(arena, mxl_gemm_amx_packed_bytes(W->rows, W->cols), 64);
    if (!p) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory for the AMX layout of a %lld x %lld weight",
                                 (long long)W->rows, (long long)W->cols);
    mxl_gemm_amx_pack(W, p);
    W->prepared = p;
    return MXL_OK;
}

void mxl_gemm_f32(const mxl_weight *W, const float *x, int64_t M, const float *bias, int act,
                  float *y, float *scratch, mxl_threadpool *pool, mxl_cpu_isa isa) {
    MXL_ASSERT(mxl_gemm_f32_supported(W, isa));
    if (M <= 0) return;
    const mxl_cpu_kernels *K = mxl_cpu_kern_at(isa);
    if (W->prepared && K->gemm_f32_amx) {
        K->gemm_f32_amx(W, x, M, bias, act, y, scratch, pool);
        return;
    }
    gemm_ctx c = {W, x, M, bias, act, y, (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63), 0, K->gemm_f32_panel};
    /* keep each thread's panel 64-byte aligned */
    c.scratch_stride = (mxl_gemm_f32_scratch_floats(W->cols) + 15) / 16 * 16;
    int nth = pool ? mxl_threadpool_size(pool) : 1;
    int64_t n_panels = (W->rows + MXL_GEMM_NR - 1) / MXL_GEMM_NR;
    int n_tasks = nth > 1 ? (int)(n_panels < nth ? n_panels : nth) : 1;
    if (n_tasks > 1) mxl_threadpool_run(pool, n_tasks, panel_task, &c);
    else panel_task(&c, 0, 1, 0);
}
