/* test_kernels_table.c - the CPU kernel table (backends/cpu/kernels.h): how it is built, not what
 * its kernels compute (the test_kernels_* files compare each SIMD kernel with its reference).
 *   - the scalar table holds the references and no optional kernel;
 *   - each level's table is the table below it plus that level's registration, the levels in the
 *     documented order, up to the CPU's level (MXL_CPU_ISA applied) and no further;
 *   - a level above the CPU's, or one of the other architecture, gives the CPU's table;
 *   - mxl_cpu_kern_origin names the level that set an entry.
 * Runs on x86-64 and AArch64 (scripts/test_arm64.sh's `kernels` filter), at every cap. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/embed_topk.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/norm.h"
#include "backends/cpu/stream_read.h"
#include "test.h"

/* the function-pointer part of a table (everything before the facts) */
#define FN_BYTES offsetof(mxl_cpu_kernels, level)

typedef struct level_reg {
    mxl_cpu_isa isa;
    void (*reg)(mxl_cpu_kernels *k);
} level_reg;

/* the documented registration order of this architecture */
static const level_reg k_order[] = {
    {MXL_CPU_ISA_SCALAR, mxl_cpu_kernels_register_ref},
#if defined(__x86_64__)
    {MXL_CPU_ISA_AVX2, mxl_cpu_kernels_register_avx2},
    {MXL_CPU_ISA_AVX512VNNI, mxl_cpu_kernels_register_avx512},
    {MXL_CPU_ISA_AMX, mxl_cpu_kernels_register_amx},
#elif defined(__aarch64__)
    {MXL_CPU_ISA_NEON, mxl_cpu_kernels_register_neon},
    {MXL_CPU_ISA_NEON_DOTPROD, mxl_cpu_kernels_register_neon_dotprod},
#endif
};
#define N_ORDER ((int)(sizeof k_order / sizeof k_order[0]))

/* index in k_order of the CPU's level */
static int top_index(void) {
    int top = 0;
    for (int i = 0; i < N_ORDER; i++)
        if (k_order[i].isa == mxl_cpu_isa_detect()) top = i;
    return top;
}

TEST(kernels_table_scalar_is_reference) {
    const mxl_cpu_kernels *k = mxl_cpu_kern_at(MXL_CPU_ISA_SCALAR);
    CHECK(k->level == MXL_CPU_ISA_SCALAR);
    CHECK(k->act == mxl_cpu_act_ref && k->glu == mxl_cpu_glu_ref);
    CHECK(k->rmsnorm == mxl_cpu_rmsnorm_ref && k->layernorm == mxl_cpu_layernorm_ref);
    CHECK(k->argmax == mxl_cpu_argmax_ref && k->logits_scan == mxl_cpu_logits_scan_ref);
    CHECK(k->read_sum == mxl_cpu_read_sum_ref);
    CHECK(k->quant_q8a == mxl_quant_q8a_ref && k->quant_q8k == mxl_quant_q8k_ref && k->quant_q8a2 == mxl_quant_q8a2_ref);
    CHECK(k->mlx_dot == mxl_mlx_vec_dot_ref);
    CHECK(k->kv.dot_f16 == mxl_kv_dot_f16_ref && k->kv.dot_i8 == mxl_kv_dot_i8_ref &&
          k->kv.axpy_f16 == mxl_kv_axpy_f16_ref && k->kv.axpy_i8 == mxl_kv_axpy_i8_ref &&
          k->kv.store_f16 == mxl_kv_store_f16_ref);
    CHECK(k->kv.dot_q[MXL_KV_Q8_0] == mxl_kv_dot_q8_0_ref && k->kv.dot_q[MXL_KV_Q4_0] == mxl_kv_dot_q4_0_ref &&
          k->kv.dot_q[MXL_KV_Q4_1] == mxl_kv_dot_q4_1_ref && k->kv.dot_q[MXL_KV_Q5_0] == mxl_kv_dot_q5_0_ref &&
          k->kv.dot_q[MXL_KV_Q5_1] == mxl_kv_dot_q5_1_ref);
    CHECK(k->kv.axpy_q[MXL_KV_Q8_0] == mxl_kv_axpy_q8_0_ref && k->kv.axpy_q[MXL_KV_Q4_0] == mxl_kv_axpy_q4_0_ref &&
          k->kv.axpy_q[MXL_KV_Q4_1] == mxl_kv_axpy_q4_1_ref && k->kv.axpy_q[MXL_KV_Q5_0] == mxl_kv_axpy_q5_0_ref &&
          k->kv.axpy_q[MXL_KV_Q5_1] == mxl_kv_axpy_q5_1_ref);
    /* every optional kernel is absent: the callers take their references */
    CHECK(!k->gguf_dot && !k->gguf_dot4 && !k->gguf_gemm4x4 && !k->gguf_gemm4x4_pre);
    CHECK(!k->dense_dot && !k->dense_dot4 && !k->dense_gemm4x4 && !k->mlx_dot4 && !k->mlx_gemm4x4);
    CHECK(!k->qamx_panels && !k->qamx_pair_bytes && !k->qamx_tiles);
    CHECK(!k->attn_dot_f32 && !k->attn_k_f16 && !k->attn_v_f16 && !k->attn_softmax && !k->enc_attn_head);
    CHECK(!k->attn_k_q && !k->attn_v_q);
    CHECK(!k->gemm_f32_panel && !k->gemm_f32_amx);
    /* the scalar cap leaves only this table */
    const char *cap = getenv("MXL_CPU_ISA");
    if (cap && !strcmp(cap, "scalar")) CHECK(mxl_cpu_kern() == k);
}

TEST(kernels_table_levels_in_order) {
    const int top = top_index();
    CHECK(mxl_cpu_kern()->level == mxl_cpu_isa_detect());
    CHECK(mxl_cpu_kern() == mxl_cpu_kern_at(mxl_cpu_isa_detect()));
    /* rebuild every table from the registration functions, in the documented order */
    mxl_cpu_kernels k;
    memset(&k, 0, sizeof k);
    for (int i = 0; i <= top; i++) {
        k_order[i].reg(&k);
        const mxl_cpu_kernels *t = mxl_cpu_kern_at(k_order[i].isa);
        CHECK(t->level == k_order[i].isa);
        bool same = memcmp(&k, t, FN_BYTES) == 0 && k.qamx_tiles == t->qamx_tiles;
        if (!same) fprintf(stderr, "  level %s: the table is not the registrations up to it\n", mxl_cpu_isa_name(t->level));
        CHECK(same);
    }
    /* above the CPU's level (capped by MXL_CPU_ISA, or the other architecture's names): the CPU's */
    for (int i = top + 1; i < N_ORDER; i++) CHECK(mxl_cpu_kern_at(k_order[i].isa) == mxl_cpu_kern());
#if defined(__x86_64__)
    CHECK(mxl_cpu_kern_at(MXL_CPU_ISA_NEON) == mxl_cpu_kern());
    CHECK(mxl_cpu_kern_at(MXL_CPU_ISA_NEON_DOTPROD) == mxl_cpu_kern());
#elif defined(__aarch64__)
    CHECK(mxl_cpu_kern_at(MXL_CPU_ISA_AVX2) == mxl_cpu_kern());
    CHECK(mxl_cpu_kern_at(MXL_CPU_ISA_AMX) == mxl_cpu_kern());
#endif
    CHECK(mxl_cpu_kern_at((mxl_cpu_isa)1000) == mxl_cpu_kern());
}

/* what the levels leave alone: a level overrides only what it implements */
TEST(kernels_table_inherits) {
    const int top = top_index();
#if defined(__x86_64__)
    if (top >= 1) { /* AVX2: the q8k quantizer and argmax stay the references below AVX-512 */
        const mxl_cpu_kernels *a = mxl_cpu_kern_at(MXL_CPU_ISA_AVX2);
        CHECK(a->quant_q8k == mxl_quant_q8k_ref && a->argmax == mxl_cpu_argmax_ref);
        CHECK(a->act == mxl_cpu_act_avx2 && a->quant_q8a == mxl_quant_q8a_avx2 && a->attn_k_f16 == mxl_attn_k_f16_avx2);
        CHECK(a->attn_k_q == mxl_attn_k_q_avx2 && a->attn_v_q == mxl_attn_v_q_avx2 && a->kv.dot_q[MXL_KV_Q8_0] == mxl_kv_dot_q8_0_avx2 &&
              a->kv.axpy_q[MXL_KV_Q5_1] == mxl_kv_axpy_q5_1_avx2);
        CHECK(a->attn_softmax == NULL && a->qamx_pair_bytes == NULL);
    }
    if (top >= 2) { /* AVX-512 VNNI keeps AVX2's KV kernels, 1-token dots and f32 attention dots */
        const mxl_cpu_kernels *a = mxl_cpu_kern_at(MXL_CPU_ISA_AVX2), *v = mxl_cpu_kern_at(MXL_CPU_ISA_AVX512VNNI);
        CHECK(!memcmp(&v->kv, &a->kv, sizeof v->kv));
        CHECK(v->gguf_dot == a->gguf_dot && v->attn_dot_f32 == a->attn_dot_f32 && v->mlx_dot == a->mlx_dot);
        CHECK(v->act == mxl_cpu_act_avx512 && v->attn_k_f16 == mxl_attn_k_f16_avx512);
        CHECK(v->attn_k_q == mxl_attn_k_q_avx512 && v->attn_v_q == mxl_attn_v_q_avx512);
        CHECK(MXL_CPU_KERN_ORIGIN(kv.dot_f16) == MXL_CPU_ISA_AVX2);
        CHECK(MXL_CPU_KERN_ORIGIN(rmsnorm) == MXL_CPU_ISA_AVX512VNNI);
        CHECK(MXL_CPU_KERN_ORIGIN(dense_gemm4x4) == MXL_CPU_ISA_AVX512VNNI);
    }
#elif defined(__aarch64__)
    if (top >= 1) { /* NEON: LayerNorm and the q8a2 quantizer stay the references */
        const mxl_cpu_kernels *n = mxl_cpu_kern_at(MXL_CPU_ISA_NEON);
        CHECK(n->layernorm == mxl_cpu_layernorm_ref && n->quant_q8a2 == mxl_quant_q8a2_ref);
        CHECK(n->rmsnorm == mxl_cpu_rmsnorm_neon && n->quant_q8a == mxl_quant_q8a_neon);
        CHECK(n->attn_dot_f32 == NULL && n->attn_k_f16 == NULL && n->dense_dot4 == NULL);
        CHECK(n->attn_k_q == NULL && n->kv.dot_q[MXL_KV_Q8_0] == mxl_kv_dot_q8_0_ref); /* (the block formats: references) */
        CHECK(MXL_CPU_KERN_ORIGIN(layernorm) == MXL_CPU_ISA_SCALAR);
        CHECK(MXL_CPU_KERN_ORIGIN(rmsnorm) == MXL_CPU_ISA_NEON);
    }
    if (top >= 2) { /* dot product: only the SDOT forms change */
        const mxl_cpu_kernels *n = mxl_cpu_kern_at(MXL_CPU_ISA_NEON), *d = mxl_cpu_kern_at(MXL_CPU_ISA_NEON_DOTPROD);
        CHECK(d->rmsnorm == n->rmsnorm && d->dense_dot == n->dense_dot && d->quant_q8k == n->quant_q8k);
        CHECK(d->gguf_dot != n->gguf_dot && d->mlx_dot != n->mlx_dot && d->qamx_panels != n->qamx_panels);
        CHECK(MXL_CPU_KERN_ORIGIN(gguf_dot) == MXL_CPU_ISA_NEON_DOTPROD);
        CHECK(MXL_CPU_KERN_ORIGIN(dense_dot) == MXL_CPU_ISA_NEON);
    }
#endif
    if (top == 0) CHECK(MXL_CPU_KERN_ORIGIN(act) == MXL_CPU_ISA_SCALAR);
}
