/* backend_cpu.c - the CPU backends behind the backend interface (backends/backend.h): "cpu", the
 * kernels of this CPU's level (kernels.h; MXL_CPU_ISA caps it), and "cpu-ref", the f32
 * reference path (dequantize-and-multiply matmuls, scalar activations and GLU; every other op as
 * "cpu"). Each op is a thin call into the kernel files of this folder; the policies that depend
 * on the CPU (which weights get the panel or tile layouts, when the register-blocked GEMM and the
 * vectorised encoder attention run) live here, not in the model code. */
#include <string.h>

#include "backends/backend.h"
#include "backends/cpu/activation.h"
#include "backends/cpu/attention.h"
#include "backends/cpu/attention_enc.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/embed_topk.h"
#include "backends/cpu/lowrank.h"
#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/kv_quant.h"
#include "backends/cpu/kv_turbo.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/norm.h"
#include "backends/cpu/quant_amx.h"
#include "backends/cpu/rope.h"
#include "backends/cpu/softmax.h"
#include "backends/cpu/tune.h"
#include "core/alloc.h"

static bool cpu_available(const mxl_backend *be) {
    (void)be;
    return true;
}
static void cpu_synchronize(const mxl_backend *be) { (void)be; }

/* ---- weights: the panel layout (quant_amx.h) for matmuls, the tile layout (gemm_f32.h) for
 * the encoders' GEMM ---- */

static size_t cpu_weight_prepared_bytes(const mxl_backend *be, const mxl_weight *W, mxl_weight_use use) {
    (void)be;
    if (use != MXL_WEIGHT_USE_MATMUL || W->rows <= 0 || W->prepared) return 0;
    return mxl_qamx_format(W) && mxl_qamx_available() ? mxl_qamx_packed_bytes(W) + 64 /* + its alignment */ : 0;
}

static mxl_status cpu_weight_prepare(const mxl_backend *be, mxl_weight *W, mxl_weight_use use, mxl_arena *arena,
                                     mxl_error *err) {
    (void)be;
    if (W->rows <= 0 || W->prepared) return MXL_OK;
    return use == MXL_WEIGHT_USE_GEMM ? mxl_gemm_f32_prepare(W, arena, err) : mxl_qamx_prepare(W, arena, err);
}

/* ---- matmul ---- */

static size_t cpu_matmul_scratch_bytes(const mxl_backend *be, const mxl_weight *W, int64_t n_tok) {
    (void)be;
    return mxl_cpu_matmul_scratch_bytes(W, n_tok);
}

static void cpu_matmul(const mxl_backend *be, const mxl_weight *W, const mxl_row_prep *prep, const float *x,
                       int64_t n_tok, float *y, void *scratch, mxl_threadpool *pool) {
    (void)be;
    mxl_cpu_matmul_prep(W, prep, x, n_tok, y, scratch, pool);
}

static void cpu_matmul_multi(const mxl_backend *be, const mxl_weight *const *W, int n_w, const mxl_row_prep *prep,
                             const mxl_side_task *side, const float *x, int64_t n_tok, float *const *y, void *scratch,
                             mxl_threadpool *pool) {
    (void)be;
    mxl_cpu_matmul_multi_side(W, n_w, prep, side, x, n_tok, y, scratch, pool);
}

/* The register-blocked GEMM pays off from one micro-tile of tokens up. A weight with the AMX
 * tile layout always takes the GEMM, whatever the token count, so a text gets the same numbers
 * alone as inside a batch (the tile rows are independent; the f32 dot path would round
 * differently). */
static bool use_gemm(const mxl_weight *W, int64_t n) {
    mxl_cpu_isa isa = mxl_cpu_isa_detect();
    return mxl_gemm_f32_supported(W, isa) && (n >= MXL_GEMM_MR || mxl_gemm_f32_amx(W, isa));
}

static size_t cpu_gemm_scratch_bytes(const mxl_backend *be, const mxl_weight *W, int64_t n_tok, int n_threads) {
    (void)be;
    return use_gemm(W, n_tok) ? mxl_gemm_f32_scratch_bytes(W, n_tok, n_threads) : 0;
}

static bool cpu_gemm_bias_act(const mxl_backend *be, const mxl_weight *W, const float *x, int64_t n_tok,
                              const float *bias, int act, float *y, void *scratch, mxl_threadpool *pool) {
    (void)be;
    if (!use_gemm(W, n_tok)) return false;
    mxl_gemm_f32(W, x, n_tok, bias, act, y, scratch, pool, mxl_cpu_isa_detect());
    return true;
}

/* ---- attention ---- */

static size_t cpu_attention_scratch_floats(const mxl_backend *be, int64_t n_kv, int n_threads) {
    (void)be;
    return mxl_cpu_attention_scratch_floats(n_kv, n_threads);
}

static void cpu_attention(const mxl_backend *be, const mxl_attn_params *p, const float *q, int64_t n_q,
                          const int64_t *q_pos, const mxl_kv_view *kv, float *out, float *scratch,
                          mxl_threadpool *pool) {
    (void)be;
    mxl_cpu_attention(p, q, n_q, q_pos, kv, out, scratch, pool, mxl_cpu_isa_detect());
}

static void cpu_attention_paged(const mxl_backend *be, const mxl_attn_params *p, const float *q, int64_t n_q,
                                const int64_t *q_pos, const mxl_kv_paged_view *kv, float *out, float *scratch,
                                mxl_threadpool *pool) {
    (void)be;
    mxl_cpu_attention_paged(p, q, n_q, q_pos, kv, out, scratch, pool, mxl_cpu_isa_detect());
}

static size_t cpu_varlen_scratch_floats(const mxl_backend *be, int64_t longest, int head_dim) {
    (void)be;
    return mxl_enc_attention_scratch_floats(longest, head_dim);
}

static bool cpu_attention_varlen(const mxl_backend *be, const mxl_enc_attn *a, float *scratch, mxl_threadpool *pool) {
    (void)be;
    mxl_cpu_isa isa = mxl_cpu_isa_detect();
    if (!mxl_enc_attention_fast(a->head_dim, isa)) return false;
    mxl_enc_attention(a, scratch, pool, isa);
    return true;
}

/* ---- row ops ---- */

static void cpu_rmsnorm(const mxl_backend *be, const float *x, const float *w, int64_t n, float eps, int plus_one,
                        float *y) {
    (void)be;
    mxl_cpu_rmsnorm(x, w, n, eps, plus_one, y);
}

static void cpu_layernorm(const mxl_backend *be, const float *x, const float *w, const float *b, int64_t n, float eps,
                          float *y) {
    (void)be;
    mxl_cpu_layernorm(x, w, b, n, eps, y);
}

static void cpu_act(const mxl_backend *be, mxl_act a, const float *x, int64_t n, float *y) {
    (void)be;
    mxl_cpu_act(a, x, n, y);
}

static void cpu_swiglu_oai(const mxl_backend *be, const float *gate, const float *up, int64_t n, float alpha, float limit, float *out) {
    (void)be;
    mxl_cpu_swiglu_oai_ref(gate, up, n, alpha, limit, out);
}

static void cpu_glu(const mxl_backend *be, mxl_act a, const float *gate, const float *up, int64_t n, float *out) {
    (void)be;
    mxl_cpu_glu(a, gate, up, n, out);
}

static void cpu_softcap(const mxl_backend *be, float *x, int64_t n, float cap) {
    (void)be;
    mxl_cpu_softcap(x, n, cap);
}

static void cpu_rope_table(const mxl_backend *be, const mxl_rope_cfg *c, const float *inv_freq, float attn_factor,
                           int64_t pos, float *cs) {
    (void)be;
    mxl_rope_table(c, inv_freq, attn_factor, pos, cs);
}

static void cpu_rope_apply_table(const mxl_backend *be, const mxl_rope_cfg *c, const float *cs, float *x,
                                 int n_heads) {
    (void)be;
    mxl_rope_apply_table(c, cs, x, n_heads);
}

/* ---- embedding rows, logits, KV storage ---- */

static mxl_status cpu_embed(const mxl_backend *be, const mxl_weight *table, const int32_t *ids, int64_t n,
                            float scale, float *out, mxl_error *err) {
    (void)be;
    return mxl_cpu_embed(table, ids, n, scale, out, err);
}

static void cpu_lowrank_acc(const mxl_backend *be, const float *x, int64_t n, int64_t K, const void *wt, mxl_dtype wt_type, int64_t N,
                            float scale, float *y) {
    (void)be;
    mxl_cpu_lowrank_acc(x, n, K, wt, wt_type, N, scale, y);
}

static int64_t cpu_argmax(const mxl_backend *be, const float *x, int64_t n) {
    (void)be;
    return mxl_cpu_argmax(x, n);
}

static void cpu_logits_scan(const mxl_backend *be, const float *x, int64_t n, bool *bad, bool *any) {
    (void)be;
    mxl_cpu_logits_scan(x, n, bad, any);
}

static void *cpu_buffer_alloc(const mxl_backend *be, size_t bytes) {
    (void)be;
    return mxl_aligned_alloc(64, (bytes + 63) & ~(size_t)63);
}

static void cpu_buffer_free(const mxl_backend *be, void *buf) {
    (void)be;
    mxl_aligned_free(buf);
}

static void cpu_buffer_copy(const mxl_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    memcpy(dst, src, bytes);
}

static void cpu_kv_store_f16(const mxl_backend *be, const float *x, int64_t n, uint16_t *h) {
    (void)be;
    mxl_cpu_kern()->kv.store_f16(n, x, h);
}

static void cpu_kv_quantize_i8(const mxl_backend *be, const float *x, int64_t n, int64_t group, int8_t *q,
                               float *scales) {
    (void)be;
    mxl_kv_quantize_i8(x, n, group, q, scales);
}

static void cpu_kv_dequantize_i8(const mxl_backend *be, const int8_t *q, const float *scales, int64_t n,
                                 int64_t group, float *x) {
    (void)be;
    mxl_kv_dequantize_i8(q, scales, n, group, x);
}

static void cpu_kv_quantize_blocks(const mxl_backend *be, mxl_dtype t, const float *x, int64_t n, void *blocks) {
    (void)be;
    mxl_kv_quantize_blocks(t, x, n, blocks);
}

static void cpu_kv_dequantize_blocks(const mxl_backend *be, mxl_dtype t, const void *blocks, int64_t n, float *x) {
    (void)be;
    mxl_kv_dequantize_blocks(t, blocks, n, x);
}

static void cpu_kv_rotate(const mxl_backend *be, float *x, int64_t n, int64_t chunk, bool inverse) {
    (void)be;
    mxl_cpu_kern()->kv.rotate(x, n, chunk, inverse);
}

static void cpu_tune_machine(const mxl_backend *be, char *cpu, size_t cap, const char **isa) {
    (void)be;
    mxl_cpu_tune_machine(cpu, cap, isa);
}

static bool cpu_tune_set(const mxl_backend *be, const char *op, int head_dim, int q_heads, int kv_heads, int64_t ctx,
                         int value) {
    (void)be;
    const int k = mxl_cpu_knob_find(op);
    return k >= 0 && mxl_cpu_tune_set((mxl_cpu_knob)k, head_dim, q_heads, kv_heads, ctx, value);
}

static void cpu_tune_reset(const mxl_backend *be) {
    (void)be;
    mxl_cpu_tune_reset();
}

static bool cpu_tune_valid(const mxl_backend *be, const char *op, int value) {
    (void)be;
    const mxl_cpu_knob_info *ki = mxl_cpu_knob_get(mxl_cpu_knob_find(op));
    return ki && value >= ki->lo && value <= ki->hi;
}

static const mxl_backend_ops k_cpu_ops = {
    .available = cpu_available,
    .synchronize = cpu_synchronize,
    .weight_prepared_bytes = cpu_weight_prepared_bytes,
    .weight_prepare = cpu_weight_prepare,
    .matmul_scratch_bytes = cpu_matmul_scratch_bytes,
    .matmul = cpu_matmul,
    .matmul_multi = cpu_matmul_multi,
    .gemm_scratch_bytes = cpu_gemm_scratch_bytes,
    .gemm_bias_act = cpu_gemm_bias_act,
    .attention_scratch_floats = cpu_attention_scratch_floats,
    .attention = cpu_attention,
    .attention_paged = cpu_attention_paged,
    .varlen_scratch_floats = cpu_varlen_scratch_floats,
    .attention_varlen = cpu_attention_varlen,
    .rmsnorm = cpu_rmsnorm,
    .layernorm = cpu_layernorm,
    .act = cpu_act,
    .glu = cpu_glu,
    .swiglu_oai = cpu_swiglu_oai,
    .softcap = cpu_softcap,
    .rope_table = cpu_rope_table,
    .rope_apply_table = cpu_rope_apply_table,
    .embed = cpu_embed,
    .lowrank_acc = cpu_lowrank_acc,
    .argmax = cpu_argmax,
    .logits_scan = cpu_logits_scan,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .buffer_copy = cpu_buffer_copy,
    .kv_store_f16 = cpu_kv_store_f16,
    .kv_quantize_i8 = cpu_kv_quantize_i8,
    .kv_dequantize_i8 = cpu_kv_dequantize_i8,
    .kv_quantize_blocks = cpu_kv_quantize_blocks,
    .kv_dequantize_blocks = cpu_kv_dequantize_blocks,
    .kv_rotate = cpu_kv_rotate,
    .tune_machine = cpu_tune_machine,
    .tune_set = cpu_tune_set,
    .tune_reset = cpu_tune_reset,
    .tune_valid = cpu_tune_valid,
};

/* ---- "cpu-ref": the f32 reference path ---- */

static size_t ref_matmul_scratch_bytes(const mxl_backend *be, const mxl_weight *W, int64_t n_tok) {
    (void)be, (void)W, (void)n_tok;
    return 0;
}

typedef struct ref_mm_ctx {
    const mxl_weight *W;
    const float *x;
    int64_t n_tok;
    float *y;
} ref_mm_ctx;

static void ref_mm_task(void *vctx, int task, int n_tasks, int thread_index) {
    (void)thread_index;
    const ref_mm_ctx *c = vctx;
    int64_t r0 = c->W->rows * task / n_tasks, r1 = c->W->rows * (task + 1) / n_tasks;
    mxl_cpu_matmul_f32_ref_rows(c->W, c->x, c->n_tok, c->y, r0, r1);
}

/* prep makes every row first, then each row of W is dequantized and dotted in f32; the rows are
 * split over the pool (each output the same bits as mxl_cpu_matmul_f32_ref gives) */
static void ref_matmul(const mxl_backend *be, const mxl_weight *W, const mxl_row_prep *prep, const float *x,
                       int64_t n_tok, float *y, void *scratch, mxl_threadpool *pool) {
    (void)be, (void)scratch;
    if (prep) prep->fn(prep->ctx, 0, n_tok);
    int n_tasks = pool ? mxl_threadpool_size(pool) : 1;
    if (n_tasks > W->rows) n_tasks = (int)W->rows;
    ref_mm_ctx c = {W, x, n_tok, y};
    if (n_tasks > 1) mxl_threadpool_run(pool, n_tasks, ref_mm_task, &c);
    else mxl_cpu_matmul_f32_ref(W, x, n_tok, y);
}

static void ref_matmul_multi(const mxl_backend *be, const mxl_weight *const *W, int n_w, const mxl_row_prep *prep,
                             const mxl_side_task *side, const float *x, int64_t n_tok, float *const *y, void *scratch,
                             mxl_threadpool *pool) {
    for (int i = 0; i < n_w; i++) ref_matmul(be, W[i], i == 0 ? prep : NULL, x, n_tok, y[i], scratch, pool);
    if (side)
        for (int i = 0; i < side->n_parts; i++) side->fn(side->ctx, i);
}

static size_t ref_gemm_scratch_bytes(const mxl_backend *be, const mxl_weight *W, int64_t n_tok, int n_threads) {
    (void)be, (void)W, (void)n_tok, (void)n_threads;
    return 0;
}

static bool ref_gemm_bias_act(const mxl_backend *be, const mxl_weight *W, const float *x, int64_t n_tok,
                              const float *bias, int act, float *y, void *scratch, mxl_threadpool *pool) {
    (void)be, (void)W, (void)x, (void)n_tok, (void)bias, (void)act, (void)y, (void)scratch, (void)pool;
    return false;
}

static void ref_act(const mxl_backend *be, mxl_act a, const float *x, int64_t n, float *y) {
    (void)be;
    mxl_cpu_act_ref(a, x, n, y);
}

static void ref_glu(const mxl_backend *be, mxl_act a, const float *gate, const float *up, int64_t n, float *out) {
    (void)be;
    mxl_cpu_glu_ref(a, gate, up, n, out);
}

/* "cpu" with the matmuls, activations and GLU replaced (mxl_backend_register_cpu fills it) */
static mxl_backend_ops k_ref_ops;

static const mxl_backend k_cpu = {"cpu", "CPU kernels at this CPU's level", &k_cpu_ops, NULL};
static void make_ref_ops(void) {
    k_ref_ops = k_cpu_ops;
    k_ref_ops.matmul_scratch_bytes = ref_matmul_scratch_bytes;
    k_ref_ops.matmul = ref_matmul;
    k_ref_ops.matmul_multi = ref_matmul_multi;
    k_ref_ops.gemm_scratch_bytes = ref_gemm_scratch_bytes;
    k_ref_ops.gemm_bias_act = ref_gemm_bias_act;
    k_ref_ops.act = ref_act;
    k_ref_ops.glu = ref_glu;
}

static const mxl_backend k_cpu_ref = {"cpu-ref", "CPU f32 reference path (MXL_DECODER_REFERENCE)", &k_ref_ops, NULL};

int mxl_backend_register_cpu(const mxl_backend **out, int cap);
int mxl_backend_register_cpu(const mxl_backend **out, int cap) {
    make_ref_ops(); /* called once, under backend.c's pthread_once */
    int n = 0;
    if (n < cap) out[n++] = &k_cpu;
    if (n < cap) out[n++] = &k_cpu_ref;
    return n;
}
