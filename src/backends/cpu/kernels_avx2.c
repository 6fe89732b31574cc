/* kernels_avx2.c - the AVX2 level of the kernel table (kernels.h; AVX2 + FMA + F16C): the 8-lane
 * forms of the element-wise ops, the GGUF / MLX / dense dots (1 and 4 tokens), the KV-cache
 * kernels, the grouped f16 and block-format attention passes and the panel path's AVX2 form. The kernels live
 * next to their references (activation_avx2.c, quant_gguf_avx2.c, ...); this file only names them. */
#include "backends/cpu/kernels.h"

#if defined(__x86_64__)
#include "backends/cpu/kv_turbo.h"
#include "backends/cpu/norm.h"
#include "backends/cpu/quant_amx.h"
#include "backends/cpu/stream_read.h"

#if !defined(MXL_NO_TILE_KERNELS)
/* the AVX2 form has no pair form: abuf is always NULL at this level (qamx_pair_bytes unset) */
static void panels_avx2(const mxl_weight *W, int64_t p0, int64_t p1, const uint8_t *act, size_t act_stride,
                        int64_t n_tok, const uint8_t *abuf, float *y, int64_t ys) {
    (void)abuf;
    mxl_qamx_panels_avx2(W, p0, p1, act, act_stride, n_tok, y, ys);
}
#endif

void mxl_cpu_kernels_register_avx2(mxl_cpu_kernels *k) {
    k->act = mxl_cpu_act_avx2;
    k->glu = mxl_cpu_glu_avx2;
    k->rmsnorm = mxl_cpu_rmsnorm_avx2;
    k->layernorm = mxl_cpu_layernorm_avx2;
    k->read_sum = mxl_cpu_read_sum_avx2;
    k->quant_q8a = mxl_quant_q8a_avx2; /* q8k keeps the reference below the AVX-512 level */
    k->quant_q8a2 = mxl_quant_q8a2_avx2;
    k->gguf_dot = mxl_vec_dot_avx2_get;
    k->gguf_dot4 = mxl_vec_dot4_avx2_get;
    k->dense_dot = mxl_dense_dot_avx2_get;
    k->dense_dot4 = mxl_dense_dot4_avx2_get;
    k->mlx_dot = mxl_mlx_vec_dot_avx2;
    k->mlx_dot4 = mxl_mlx_vec_dot4_avx2;
#if !defined(MXL_NO_TILE_KERNELS)
    k->qamx_panels = panels_avx2;
#endif
    k->kv = (mxl_kv_kernels){mxl_kv_dot_f16_avx2, mxl_kv_dot_i8_avx2, mxl_kv_axpy_f16_avx2, mxl_kv_axpy_i8_avx2,
                             mxl_kv_store_f16_avx2,
                             {mxl_kv_dot_q8_0_avx2, mxl_kv_dot_q4_0_avx2, mxl_kv_dot_q4_1_avx2, mxl_kv_dot_q5_0_avx2,
                              mxl_kv_dot_q5_1_avx2,
                              mxl_kv_dot_turbo4_avx2, mxl_kv_dot_turbo3_avx2},
                             {mxl_kv_axpy_q8_0_avx2, mxl_kv_axpy_q4_0_avx2, mxl_kv_axpy_q4_1_avx2, mxl_kv_axpy_q5_0_avx2,
                              mxl_kv_axpy_q5_1_avx2, mxl_kv_axpy_turbo4_avx2, mxl_kv_axpy_turbo3_avx2}, mxl_kv_rotate_avx2};
    k->attn_dot_f32 = mxl_dense_dot_avx2_get(MXL_DTYPE_F32);
    k->attn_k_f16 = mxl_attn_k_f16_avx2;
    k->attn_v_f16 = mxl_attn_v_f16_avx2;
    k->attn_k_q = mxl_attn_k_q_avx2;
    k->attn_v_q = mxl_attn_v_q_avx2;
}
#endif
