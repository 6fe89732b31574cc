/* kernels_avx512.c - the AVX-512 levels of the kernel table (kernels.h), as cpu_features.h
 * distinguishes them:
 *   - AVX-512 VNNI (F/BW/VL + VNNI): the 16-lane element-wise ops, argmax and the logit scan,
 *     the 4 x 4 GGUF / MLX / dense micro-kernels of prefill, the q8k / q8a2 quantizers, the
 *     panel path's VNNI form (with the tile kernels and their pair form where tiles run), the
 *     grouped f16 and block-format (q8_0 .. q5_1 KV) attention passes, encoder attention and the
 *     f32 GEMM;
 *   - AMX (+ AVX512-BF16 and AMX-BF16 tiles): the tile GEMM for weights given the AMX layout,
 *     and the panel path's AMX-INT8 tiles where the CPU has them too.
 * The kernels live next to their references; this file only names them. */
#include "backends/cpu/kernels.h"

#if defined(__x86_64__)
#include "backends/cpu/attention_enc.h"
#include "backends/cpu/embed_topk.h"
#include "backends/cpu/lowrank.h"
#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/norm.h"
#include "backends/cpu/quant_amx.h"

static mxl_mlx_gemm4x4_fn mlx_gemm4x4_avx512(int bits) {
    return mxl_mlx_gemm4x4_avx512_supported(bits) ? mxl_mlx_gemm4x4_avx512 : NULL;
}

void mxl_cpu_kernels_register_avx512(mxl_cpu_kernels *k) {
    k->act = mxl_cpu_act_avx512;
    k->glu = mxl_cpu_glu_avx512;
    k->rmsnorm = mxl_cpu_rmsnorm_avx512;
    k->layernorm = mxl_cpu_layernorm_avx512;
    k->argmax = mxl_cpu_argmax_avx512;
    k->logits_scan = mxl_cpu_logits_scan_avx512;
    k->lowrank_acc = mxl_cpu_lowrank_acc_avx512;
    k->quant_q8k = mxl_quant_q8k_avx512;
    k->quant_q8a2 = mxl_quant_q8a2_avx512;
    k->gguf_gemm4x4 = mxl_gemm4x4_avx512_get;
    k->gguf_gemm4x4_pre = mxl_gemm4x4_pre_avx512_get;
    k->dense_gemm4x4 = mxl_dense_gemm4x4_avx512_get;
    k->mlx_gemm4x4 = mlx_gemm4x4_avx512;
#if !defined(MXL_NO_TILE_KERNELS)
    k->qamx_panels = mxl_qamx_panels_vnni; /* (the AMX level: the tiles, below) */
#endif
    k->attn_k_f16 = mxl_attn_k_f16_avx512;
    k->attn_v_f16 = mxl_attn_v_f16_avx512;
    k->attn_k_q = mxl_attn_k_q_avx512;
    k->attn_v_q = mxl_attn_v_q_avx512;
    k->attn_q_i8 = true;
    k->attn_softmax = mxl_attn_softmax_avx512;
    k->enc_attn_head = mxl_enc_attention_head_avx512;
    k->gemm_f32_panel = mxl_gemm_f32_panel_avx512;
}

void mxl_cpu_kernels_register_amx(mxl_cpu_kernels *k) {
    k->gemm_f32_amx = mxl_gemm_amx;
    k->qamx_tiles = mxl_qamx_tiles_cpu(); /* the panel tiles need AMX-INT8 besides AMX-BF16 */
#if !defined(MXL_NO_TILE_KERNELS)
    k->qamx_panels = mxl_qamx_panels; /* the tiles where qamx_tiles, the VNNI form for a few tokens */
    k->qamx_pair_bytes = mxl_qamx_pair_bytes;
#endif
}
#endif
