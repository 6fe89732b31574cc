/* kernels_ref.c - the scalar level of the kernel table (kernels.h): every always-set entry gets
 * its plain C reference, the optional ones stay NULL. Registered first on every architecture;
 * what the SIMD levels register is tested against these. */
#include "backends/cpu/kernels.h"

#include "backends/cpu/embed_topk.h"
#include "backends/cpu/lowrank.h"
#include "backends/cpu/kv_turbo.h"
#include "backends/cpu/norm.h"
#include "backends/cpu/stream_read.h"

void mxl_cpu_kernels_register_ref(mxl_cpu_kernels *k) {
    k->act = mxl_cpu_act_ref;
    k->glu = mxl_cpu_glu_ref;
    k->rmsnorm = mxl_cpu_rmsnorm_ref;
    k->layernorm = mxl_cpu_layernorm_ref;
    k->argmax = mxl_cpu_argmax_ref;
    k->logits_scan = mxl_cpu_logits_scan_ref;
    k->lowrank_acc = mxl_cpu_lowrank_acc_ref;
    k->read_sum = mxl_cpu_read_sum_ref;
    k->quant_q8a = mxl_quant_q8a_ref;
    k->quant_q8k = mxl_quant_q8k_ref;
    k->quant_q8a2 = mxl_quant_q8a2_ref;
    k->mlx_dot = mxl_mlx_vec_dot_ref; /* the GGUF and dense references take a dtype: matmul.c calls
                                       * them itself where the getters give no kernel */
    k->kv = (mxl_kv_kernels){mxl_kv_dot_f16_ref, mxl_kv_dot_i8_ref, mxl_kv_axpy_f16_ref, mxl_kv_axpy_i8_ref,
                             mxl_kv_store_f16_ref,
                             {mxl_kv_dot_q8_0_ref, mxl_kv_dot_q4_0_ref, mxl_kv_dot_q4_1_ref, mxl_kv_dot_q5_0_ref, mxl_kv_dot_q5_1_ref,
                              mxl_kv_dot_turbo4_ref, mxl_kv_dot_turbo3_ref},
                             {mxl_kv_axpy_q8_0_ref, mxl_kv_axpy_q4_0_ref, mxl_kv_axpy_q4_1_ref, mxl_kv_axpy_q5_0_ref,
                              mxl_kv_axpy_q5_1_ref, mxl_kv_axpy_turbo4_ref, mxl_kv_axpy_turbo3_ref}, mxl_kv_rotate_ref};
}
