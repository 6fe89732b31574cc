/* kernels_neon.c - the AArch64 levels of the kernel table (kernels.h):
 *   - NEON (baseline AdvSIMD, every AArch64 CPU): SiLU / SwiGLU and RMSNorm, the GGUF, MLX and
 *     dense dots, the q8a / q8k quantizers (bit-identical to the references) and the panel path's
 *     NEON form;
 *   - NEON dot product (SDOT/UDOT, HWCAP_ASIMDDP): the SDOT forms of the GGUF and MLX dots and of
 *     the panel path (the same bits as the baseline ones).
 * The kernels live next to their references; this file only names them. The dotprod argument of
 * the NEON entry points becomes two registered variants here. */
#include "backends/cpu/kernels.h"

#if defined(__aarch64__)
#include "backends/cpu/norm.h"
#include "backends/cpu/quant_amx.h"

static mxl_vec_dot_fn gguf_dot_neon(mxl_dtype t) { return mxl_vec_dot_neon_get(t, false); }
static mxl_vec_dot_fn gguf_dot_sdot(mxl_dtype t) { return mxl_vec_dot_neon_get(t, true); }
static float mlx_dot_neon(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq) {
    return mxl_mlx_vec_dot_neon(W, r, xq, false);
}
static float mlx_dot_sdot(const mxl_mlx_qweight *W, int64_t r, const mxl_block_q8a *xq) {
    return mxl_mlx_vec_dot_neon(W, r, xq, true);
}
/* no pair form on AArch64: abuf is always NULL (qamx_pair_bytes unset) */
static void panels_neon(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                        int64_t n_tok, const uint8_t *abuf, float *y, int64_t ys) {
    (void)abuf;
    mxl_qamx_panels_neon(W, p0, p1, act, act_stride, n_tok, y, ys, 0);
}
static void panels_sdot(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                        int64_t n_tok, const uint8_t *abuf, float *y, int64_t ys) {
    (void)abuf;
    mxl_qamx_panels_neon(W, p0, p1, act, act_stride, n_tok, y, ys, 1);
}

void mxl_cpu_kernels_register_neon(mxl_cpu_kernels *k) {
    k->act = mxl_cpu_act_neon;
    k->glu = mxl_cpu_glu_neon;
    k->rmsnorm = mxl_cpu_rmsnorm_neon; /* LayerNorm keeps the reference */
    k->quant_q8a = mxl_quant_q8a_neon;
    k->quant_q8k = mxl_quant_q8k_neon;
    k->gguf_dot = gguf_dot_neon;
    k->dense_dot = mxl_dense_dot_neon_get;
    k->mlx_dot = mlx_dot_neon;
    k->qamx_panels = panels_neon;
}

void mxl_cpu_kernels_register_neon_dotprod(mxl_cpu_kernels *k) {
    k->gguf_dot = gguf_dot_sdot;
    k->mlx_dot = mlx_dot_sdot;
    k->qamx_panels = panels_sdot;
}
#endif
