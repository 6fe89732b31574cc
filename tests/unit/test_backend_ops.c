/* test_backend_ops.c - every op of every backend compiled into the binary (backends/backend.h)
 * against the CPU scalar references, by normalised error with a stated bound per op, in the
 * spirit of ggml's test-backend-ops.
 *
 * Error measure: NMSE = sum (y - ref)^2 / sum ref^2 over an op's whole output. Bounds:
 *   matmul, quantized weights (the CPU quantizes activations to int8)        5e-4
 *   matmul, dense weights (f32 activations)                                  1e-10
 *   matmul_multi                                                             bitwise matmul
 *   gemm_bias_act (where the backend takes it; f32 sums in another order)     1e-8
 *   attention / attention_paged (f32, f16, int8, q8_0 .. q5_1 caches)        1e-6 (int8 and the
 *                                                                            block formats: 1e-3)
 *   attention_varlen (where the backend takes it; a vector exp)              1e-8
 *   rmsnorm, layernorm, act, glu, softcap, rope, lowrank_acc                 1e-10
 *   embed, kv_store_f16, buffer_copy                                         bitwise
 *   kv_quantize_i8 then kv_dequantize_i8: each element within half a step    (scale / 2)
 *   kv_quantize_blocks, kv_dequantize_blocks (q8_0 .. q5_1)                  bitwise kv_quant.h's
 *   argmax, logits_scan                                                      exact
 * References: mxl_cpu_matmul_f32_ref (dequantize, f32 dot), mxl_gemm_f32_ref, the attention
 * kernels at the scalar level, mxl_enc_attention_ref, the *_ref row kernels, plain loops in
 * double for softcap and RoPE.
 * Shapes are those of the bundled real models (SmolLM2-135M: hidden 576, FFN 1536, 9/3 heads of
 * 64; Gemma 3 270M: hidden 640, FFN 2048, 4/1 heads of 256; MiniLM-L6: hidden 384, FFN 1536, 12
 * heads of 32) and of the test fixtures (hidden 64, odd row counts), every weight format, batch
 * 1 and 8 (and 13, past the GEMM's micro-tile). A backend whose device is absent is reported as
 * not run. Each op's worst NMSE is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cpu/activation.h"
#include "backends/cpu/attention.h"
#include "backends/cpu/attention_enc.h"
#include "backends/cpu/embed_topk.h"
#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/kv_quant.h"
#include "backends/cpu/lowrank.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/norm.h"
#include "backends/cpu/rope.h"
#include "backends/cpu/synth.h"
#include "core/alloc.h"
#include "test.h"

/* ---- helpers ---- */

/* failures of the helpers below (CHECK works inside a TEST body only) */
static int g_failures;
#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: expected %s\n", __FILE__, __LINE__, #cond);                 \
            g_failures++;                                                                          \
        }                                                                                          \
    } while (0)

static uint64_t g_seed = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    g_seed ^= g_seed << 13, g_seed ^= g_seed >> 7, g_seed ^= g_seed << 17;
    return (float)((g_seed >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static float *randv(int64_t n, float scale) {
    float *v = mxl_malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = scale * frand();
    return v;
}

static double nmse(const float *y, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)y[i] - ref[i];
        num += d * d, den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

/* the worst error seen per op, printed at the end of a backend's run */
typedef struct op_stat {
    const char *name;
    double worst, bound;
    int cases;
} op_stat;
static op_stat g_stats[32];
static int g_n_stats;

static void record(const char *op, double err, double bound, const char *what) {
    op_stat *s = NULL;
    for (int i = 0; i < g_n_stats; i++)
        if (strcmp(g_stats[i].name, op) == 0) s = &g_stats[i];
    if (!s) {
        s = &g_stats[g_n_stats++];
        *s = (op_stat){op, 0, bound, 0};
    }
    s->cases++;
    if (err > s->worst) s->worst = err;
    if (!(err <= bound)) fprintf(stderr, "  %s %s: error %.3g above the bound %.3g\n", op, what, err, bound);
    EXPECT(err <= bound);
}

/* the ops a backend may decline (returning false: the caller then composes simpler ops) */
static const char *const k_optional_ops[] = {"gemm_bias_act", "attention_varlen"};

static void print_stats(const mxl_backend *be) {
    fprintf(stderr, "  backend %s (%s):\n", be->name, be->description);
    for (int i = 0; i < g_n_stats; i++)
        fprintf(stderr, "    %-18s %4d cases  worst %.3g  bound %.3g\n", g_stats[i].name, g_stats[i].cases,
                g_stats[i].worst, g_stats[i].bound);
    for (size_t o = 0; o < sizeof k_optional_ops / sizeof k_optional_ops[0]; o++) {
        bool seen = false;
        for (int i = 0; i < g_n_stats; i++) seen = seen || strcmp(g_stats[i].name, k_optional_ops[o]) == 0;
        if (!seen) fprintf(stderr, "    %-18s declined on every case here (no path on this backend / CPU level)\n", k_optional_ops[o]);
    }
    g_n_stats = 0;
}

/* ---- weights of every format ---- */

typedef struct test_weight {
    mxl_weight w;
    void *data, *scales, *biases; /* owned */
} test_weight;

/* dense / GGUF: synthetic blocks with the real layouts; MLX: quantized random rows */
static void make_weight(test_weight *tw, mxl_dtype t, int mlx_bits, int gs, int64_t rows, int64_t cols) {
    memset(tw, 0, sizeof *tw);
    if (mlx_bits) {
        int64_t wpr = cols * mlx_bits / 32, ng = cols / gs;
        uint32_t *w = mxl_malloc((size_t)(rows * wpr) * 4);
        float *sc = mxl_malloc((size_t)(rows * ng) * 4), *bi = mxl_malloc((size_t)(rows * ng) * 4);
        float *row = randv(cols, 1.0f);
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t c = 0; c < cols; c++) row[c] = frand();
            mxl_mlx_quantize_row_grid(mlx_bits, gs, row, cols, w + r * wpr, sc + r * ng, bi + r * ng);
        }
        mxl_free(row);
        tw->data = w, tw->scales = sc, tw->biases = bi;
        tw->w = (mxl_weight){MXL_W_MLX, MXL_DTYPE_U32, rows, cols, NULL,
                             {mlx_bits, gs, MXL_DTYPE_F32, rows, cols, w, sc, bi}, NULL};
        return;
    }
    uint64_t rb = 0;
    EXPECT(mxl_dtype_row_bytes(t, (uint64_t)cols, &rb) == 0);
    tw->data = mxl_malloc(rb * (uint64_t)rows);
    const mxl_dtype_info *info = mxl_dtype_get_info(t);
    uint64_t per_block = info->block_elems ? info->block_elems : 1;
    mxl_synth_fill(t, tw->data, (uint64_t)(rows * cols) / per_block, &g_seed);
    tw->w = (mxl_weight){mxl_gguf_quant_supported(t) ? MXL_W_GGUF : MXL_W_DENSE, t, rows, cols, tw->data, {0}, NULL};
}
static void free_weight(test_weight *tw) {
    mxl_free(tw->data), mxl_free(tw->scales), mxl_free(tw->biases);
}

typedef struct wformat {
    const char *name;
    mxl_dtype t;
    int mlx_bits, gs;
} wformat;
static const wformat k_formats[] = {
    {"F32", MXL_DTYPE_F32, 0, 0},   {"F16", MXL_DTYPE_F16, 0, 0},   {"BF16", MXL_DTYPE_BF16, 0, 0},
    {"Q4_0", MXL_DTYPE_Q4_0, 0, 0}, {"Q4_1", MXL_DTYPE_Q4_1, 0, 0}, {"Q5_0", MXL_DTYPE_Q5_0, 0, 0},
    {"Q5_1", MXL_DTYPE_Q5_1, 0, 0}, {"Q8_0", MXL_DTYPE_Q8_0, 0, 0}, {"Q2_K", MXL_DTYPE_Q2_K, 0, 0},
    {"Q3_K", MXL_DTYPE_Q3_K, 0, 0}, {"Q4_K", MXL_DTYPE_Q4_K, 0, 0}, {"Q5_K", MXL_DTYPE_Q5_K, 0, 0},
    {"Q6_K", MXL_DTYPE_Q6_K, 0, 0}, {"MXFP4", MXL_DTYPE_MXFP4, 0, 0}, {"TQ1_0", MXL_DTYPE_TQ1_0, 0, 0}, {"TQ2_0", MXL_DTYPE_TQ2_0, 0, 0},
    {"IQ4_NL", MXL_DTYPE_IQ4_NL, 0, 0}, {"IQ4_XS", MXL_DTYPE_IQ4_XS, 0, 0},
    {"IQ2_XXS", MXL_DTYPE_IQ2_XXS, 0, 0}, {"IQ2_XS", MXL_DTYPE_IQ2_XS, 0, 0}, {"IQ2_S", MXL_DTYPE_IQ2_S, 0, 0}, {"IQ3_XXS", MXL_DTYPE_IQ3_XXS, 0, 0},
    {"IQ3_S", MXL_DTYPE_IQ3_S, 0, 0}, {"IQ1_S", MXL_DTYPE_IQ1_S, 0, 0}, {"IQ1_M", MXL_DTYPE_IQ1_M, 0, 0}, {"MLX2/64", 0, 2, 64},          {"MLX3/64", 0, 3, 64},
    {"MLX4/32", 0, 4, 32},          {"MLX4/64", 0, 4, 64},          {"MLX5/64", 0, 5, 64},
    {"MLX6/64", 0, 6, 64},          {"MLX8/128", 0, 8, 128},
};
#define N_FORMATS ((int)(sizeof k_formats / sizeof k_formats[0]))

/* [rows, cols]: the real models' projections and odd fixture-like shapes (cols a multiple of 256
 * so that every format fits) */
static const int64_t k_mm_shapes[][2] = {{576, 1536}, {1536, 768}, {640, 2048}, {37, 256}, {67, 512}};
#define N_MM_SHAPES ((int)(sizeof k_mm_shapes / sizeof k_mm_shapes[0]))

static void check_matmul(const mxl_backend *be) {
    static const int64_t batches[] = {1, 8};
    for (int f = 0; f < N_FORMATS; f++)
        for (int s = 0; s < N_MM_SHAPES; s++) {
            const wformat *F = &k_formats[f];
            int64_t rows = k_mm_shapes[s][0], cols = k_mm_shapes[s][1];
            if (F->mlx_bits && cols % F->gs) continue;
            test_weight tw;
            make_weight(&tw, F->t, F->mlx_bits, F->gs, rows, cols);
            bool quant = tw.w.kind != MXL_W_DENSE;
            mxl_arena arena;
            mxl_arena_init(&arena, 1 << 20);
            for (int prep = 0; prep < 2; prep++) {
                if (prep) {
                    mxl_error err = {0};
                    size_t want = be->ops->weight_prepared_bytes(be, &tw.w, MXL_WEIGHT_USE_MATMUL);
                    EXPECT(be->ops->weight_prepare(be, &tw.w, MXL_WEIGHT_USE_MATMUL, &arena, &err) == MXL_OK);
                    EXPECT((want > 0) == (tw.w.prepared != NULL));
                    if (!tw.w.prepared) break; /* no layout of its own: the first pass covered it */
                }
                for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
                    int64_t n = batches[b];
                    float *x = randv(n * cols, 1.0f), *y = mxl_calloc((size_t)(n * rows), 4), *ref = mxl_calloc((size_t)(n * rows), 4);
                    void *scratch = mxl_malloc(be->ops->matmul_scratch_bytes(be, &tw.w, n) + 64);
                    be->ops->matmul(be, &tw.w, NULL, x, n, y, scratch, NULL);
                    mxl_cpu_matmul_f32_ref(&tw.w, x, n, ref);
                    char what[96];
                    snprintf(what, sizeof what, "%s [%lld, %lld] x %lld%s", F->name, (long long)rows, (long long)cols,
                             (long long)n, prep ? " (prepared)" : "");
                    record(quant ? "matmul (quant)" : "matmul (dense)", nmse(y, ref, n * rows), quant ? 5e-4 : 1e-10, what);
                    /* matmul_multi: the same weight twice gives matmul's bits for each */
                    float *y2[2] = {mxl_calloc((size_t)(n * rows), 4), mxl_calloc((size_t)(n * rows), 4)};
                    const mxl_weight *ws[2] = {&tw.w, &tw.w};
                    be->ops->matmul_multi(be, ws, 2, NULL, NULL, x, n, y2, scratch, NULL);
                    bool same = memcmp(y2[0], y, (size_t)(n * rows) * 4) == 0 && memcmp(y2[1], y, (size_t)(n * rows) * 4) == 0;
                    record("matmul_multi", same ? 0 : 1, 0, what);
                    mxl_free(y2[0]), mxl_free(y2[1]), mxl_free(scratch), mxl_free(x), mxl_free(y), mxl_free(ref);
                }
            }
            mxl_arena_free(&arena);
            free_weight(&tw);
        }
}

/* the encoders' dense GEMM: f32 weights, bias, every activation */
static void check_gemm(const mxl_backend *be) {
    static const int64_t shapes[][2] = {{384, 384}, {1536, 384}, {384, 1536}, {37, 64}};
    static const int64_t batches[] = {1, 8, 13};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        test_weight tw;
        make_weight(&tw, MXL_DTYPE_F32, 0, 0, rows, cols);
        mxl_arena arena;
        mxl_arena_init(&arena, 1 << 20);
        mxl_error err = {0};
        EXPECT(be->ops->weight_prepare(be, &tw.w, MXL_WEIGHT_USE_GEMM, &arena, &err) == MXL_OK);
        float *bias = randv(rows, 0.5f);
        for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
            for (int act = MXL_GEMM_ACT_NONE; act <= MXL_ACT_GELU_ERF; act++) {
                int64_t n = batches[b];
                float *x = randv(n * cols, 1.0f), *y = mxl_calloc((size_t)(n * rows), 4), *ref = mxl_calloc((size_t)(n * rows), 4);
                void *scratch = mxl_malloc(be->ops->gemm_scratch_bytes(be, &tw.w, n, 1) + 64);
                if (be->ops->gemm_bias_act(be, &tw.w, x, n, bias, act, y, scratch, NULL)) {
                    mxl_gemm_f32_ref(&tw.w, x, n, bias, act, ref);
                    char what[64];
                    snprintf(what, sizeof what, "[%lld, %lld] x %lld act %d", (long long)rows, (long long)cols, (long long)n, act);
                    record("gemm_bias_act", nmse(y, ref, n * rows), 1e-8, what);
                }
                mxl_free(scratch), mxl_free(x), mxl_free(y), mxl_free(ref);
            }
        mxl_free(bias);
        mxl_arena_free(&arena);
        free_weight(&tw);
    }
}

/* ---- attention ---- */

typedef struct attn_shape {
    int n_heads, n_kv_heads, head_dim;
} attn_shape;
static const attn_shape k_attn[] = {{9, 3, 64}, {4, 1, 256}, {12, 12, 32}, {4, 2, 16}};

/* K/V [n_kv, kvd] in dtype t (I8: groups of 32 or head_dim, with scales) */
typedef struct kv_data {
    void *k, *v;
    float *ks, *vs;
    int64_t group;
} kv_data;

static void fill_kv(const mxl_backend *be, mxl_dtype t, int64_t n_kv, int64_t kvd, int64_t hd, kv_data *o) {
    float *k = randv(n_kv * kvd, 1.0f), *v = randv(n_kv * kvd, 1.0f);
    memset(o, 0, sizeof *o);
    if (t == MXL_DTYPE_F32) {
        o->k = k, o->v = v;
        return;
    }
    if (t == MXL_DTYPE_F16) {
        o->k = mxl_malloc((size_t)(n_kv * kvd) * 2), o->v = mxl_malloc((size_t)(n_kv * kvd) * 2);
        be->ops->kv_store_f16(be, k, n_kv * kvd, o->k);
        be->ops->kv_store_f16(be, v, n_kv * kvd, o->v);
    } else if (t != MXL_DTYPE_I8) { /* a block format */
        o->k = mxl_malloc(mxl_kv_offset_bytes(t, n_kv * kvd)), o->v = mxl_malloc(mxl_kv_offset_bytes(t, n_kv * kvd));
        be->ops->kv_quantize_blocks(be, t, k, n_kv * kvd, o->k);
        be->ops->kv_quantize_blocks(be, t, v, n_kv * kvd, o->v);
    } else {
        o->group = hd % 32 == 0 ? 32 : hd;
        o->k = mxl_malloc((size_t)(n_kv * kvd)), o->v = mxl_malloc((size_t)(n_kv * kvd));
        o->ks = mxl_malloc((size_t)(n_kv * kvd / o->group) * 4), o->vs = mxl_malloc((size_t)(n_kv * kvd / o->group) * 4);
        be->ops->kv_quantize_i8(be, k, n_kv * kvd, o->group, o->k, o->ks);
        be->ops->kv_quantize_i8(be, v, n_kv * kvd, o->group, o->v, o->vs);
    }
    mxl_free(k), mxl_free(v);
}
static void free_kv(kv_data *o) { mxl_free(o->k), mxl_free(o->v), mxl_free(o->ks), mxl_free(o->vs); }

static void check_attention(const mxl_backend *be) {
    static const mxl_dtype types[] = {MXL_DTYPE_F32, MXL_DTYPE_F16, MXL_DTYPE_I8, MXL_DTYPE_Q8_0, MXL_DTYPE_Q4_0,
                                      MXL_DTYPE_Q4_1, MXL_DTYPE_Q5_0, MXL_DTYPE_Q5_1};
    static const int64_t n_kvs[] = {1, 37, 100};
    static const int64_t n_qs[] = {1, 8};
    for (size_t a = 0; a < sizeof k_attn / sizeof k_attn[0]; a++)
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            for (size_t ki = 0; ki < 3; ki++)
                for (size_t qi = 0; qi < 2; qi++) {
                    const attn_shape *S = &k_attn[a];
                    int64_t n_kv = n_kvs[ki], n_q = n_qs[qi] < n_kv ? n_qs[qi] : n_kv;
                    int64_t qd = (int64_t)S->n_heads * S->head_dim, kvd = (int64_t)S->n_kv_heads * S->head_dim;
                    mxl_dtype t = types[ti];
                    const bool blk = mxl_kv_qfmt_of(t) >= 0;
                    if (blk && S->head_dim % 32) continue; /* (the block formats need heads of a multiple of 32) */
                    kv_data kv;
                    fill_kv(be, t, n_kv, kvd, S->head_dim, &kv);
                    float *q = randv(n_q * qd, 1.0f), *out = mxl_calloc((size_t)(n_q * qd), 4), *ref = mxl_calloc((size_t)(n_q * qd), 4);
                    float *sinks = randv(S->n_heads, 1.0f);
                    int64_t *pos = mxl_malloc((size_t)n_q * sizeof *pos);
                    for (int64_t i = 0; i < n_q; i++) pos[i] = n_kv - n_q + i;
                    /* plain, then soft-capped with a window and sinks (Gemma 2, gpt-oss) */
                    for (int variant = 0; variant < 2; variant++) {
                        mxl_attn_params p = {S->n_heads, S->n_kv_heads, S->head_dim, 1.0f / sqrtf((float)S->head_dim),
                                             variant ? 30.0f : 0.0f, variant ? sinks : NULL, variant ? 16 : 0, 1, 0, 0, NULL};
                        size_t sf = be->ops->attention_scratch_floats(be, n_kv, 1);
                        float *scratch = mxl_malloc(sf * 4 + 64), *rscratch = mxl_malloc(mxl_cpu_attention_scratch_floats(n_kv, 1) * 4 + 64);
                        /* paged: blocks of 16 positions in reverse order */
                        int64_t bs = 16, nb = (n_kv + bs - 1) / bs;
                        int32_t *blocks = mxl_malloc((size_t)nb * 4);
                        for (int64_t b = 0; b < nb; b++) blocks[b] = (int32_t)(nb - 1 - b);
                        uint8_t *pk = mxl_calloc(mxl_kv_offset_bytes(t, nb * bs * kvd), 1), *pv = mxl_calloc(mxl_kv_offset_bytes(t, nb * bs * kvd), 1);
                        float *pks = NULL, *pvs = NULL;
                        if (t == MXL_DTYPE_I8) pks = mxl_calloc((size_t)(nb * bs * kvd / kv.group), 4), pvs = mxl_calloc((size_t)(nb * bs * kvd / kv.group), 4);
                        for (int64_t j = 0; j < n_kv; j++) {
                            int64_t dst = (int64_t)blocks[j / bs] * bs * kvd + (j % bs) * kvd;
                            memcpy(pk + mxl_kv_offset_bytes(t, dst), (uint8_t *)kv.k + mxl_kv_offset_bytes(t, j * kvd), mxl_kv_offset_bytes(t, kvd));
                            memcpy(pv + mxl_kv_offset_bytes(t, dst), (uint8_t *)kv.v + mxl_kv_offset_bytes(t, j * kvd), mxl_kv_offset_bytes(t, kvd));
                            if (pks) {
                                memcpy(pks + dst / kv.group, kv.ks + j * kvd / kv.group, (size_t)(kvd / kv.group) * 4);
                                memcpy(pvs + dst / kv.group, kv.vs + j * kvd / kv.group, (size_t)(kvd / kv.group) * 4);
                            }
                        }
                        mxl_kv_paged_view pvw = {t, t, pk, pv, pks, pvs, kv.group, n_kv, kvd, bs, bs * kvd, blocks, 0};
                        mxl_kv_paged_view flat = {t, t, kv.k, kv.v, kv.ks, kv.vs, kv.group, n_kv, kvd, n_kv, 0, (const int32_t[]){0}, 0};
                        mxl_cpu_attention_paged(&p, q, n_q, pos, &flat, ref, rscratch, NULL, MXL_CPU_ISA_SCALAR);
                        be->ops->attention_paged(be, &p, q, n_q, pos, &pvw, out, scratch, NULL);
                        char what[96];
                        snprintf(what, sizeof what, "%d/%d x %d, %s, n_kv %lld, n_q %lld, variant %d", S->n_heads, S->n_kv_heads,
                                 S->head_dim, mxl_dtype_name(t), (long long)n_kv, (long long)n_q, variant);
                        double bound = t == MXL_DTYPE_I8 || blk ? 1e-3 : 1e-6;
                        record("attention_paged", nmse(out, ref, n_q * qd), bound, what);
                        if (t == MXL_DTYPE_F32 || t == MXL_DTYPE_F16) { /* the contiguous view holds f32 or f16 */
                            mxl_kv_view cv = {t, kv.k, kv.v, n_kv, kvd};
                            memset(out, 0, (size_t)(n_q * qd) * 4);
                            be->ops->attention(be, &p, q, n_q, pos, &cv, out, scratch, NULL);
                            record("attention", nmse(out, ref, n_q * qd), bound, what);
                        }
                        mxl_free(blocks), mxl_free(pk), mxl_free(pv), mxl_free(pks), mxl_free(pvs), mxl_free(scratch), mxl_free(rscratch);
                    }
                    mxl_free(q), mxl_free(out), mxl_free(ref), mxl_free(sinks), mxl_free(pos);
                    free_kv(&kv);
                }
}

static void check_attention_varlen(const mxl_backend *be) {
    static const int head_dims[] = {32, 64, 48};
    for (size_t h = 0; h < sizeof head_dims / sizeof head_dims[0]; h++) {
        int hd = head_dims[h], nh = 4;
        int64_t starts[] = {0, 7, 8, 45}, n = 45, stride = (int64_t)nh * hd;
        float *q = randv(n * stride, 1.0f), *k = randv(n * stride, 1.0f), *v = randv(n * stride, 1.0f);
        float *out = mxl_calloc((size_t)(n * stride), 4), *ref = mxl_calloc((size_t)(n * stride), 4);
        float *scratch = mxl_malloc(be->ops->varlen_scratch_floats(be, 37, hd) * 4 + 64);
        mxl_enc_attn a = {q, k, v, out, stride, starts, 3, nh, hd, 1.0f / sqrtf((float)hd)};
        if (be->ops->attention_varlen(be, &a, scratch, NULL)) {
            a.out = ref;
            mxl_enc_attention_ref(&a);
            char what[32];
            snprintf(what, sizeof what, "head_dim %d", hd);
            record("attention_varlen", nmse(out, ref, n * stride), 1e-8, what);
        }
        mxl_free(q), mxl_free(k), mxl_free(v), mxl_free(out), mxl_free(ref), mxl_free(scratch);
    }
}

/* ---- row ops ---- */

static void check_rows(const mxl_backend *be) {
    static const int64_t sizes[] = {64, 384, 576, 640, 1536, 2048, 37};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int64_t n = sizes[si];
        float *x = randv(n, 3.0f), *w = randv(n, 1.0f), *b = randv(n, 0.5f), *u = randv(n, 2.0f);
        float *y = mxl_malloc((size_t)n * 4), *ref = mxl_malloc((size_t)n * 4);
        char what[48];
        snprintf(what, sizeof what, "n %lld", (long long)n);
        for (int plus_one = 0; plus_one < 2; plus_one++) {
            be->ops->rmsnorm(be, x, w, n, 1e-6f, plus_one, y);
            mxl_cpu_rmsnorm_ref(x, w, n, 1e-6f, plus_one, ref);
            record("rmsnorm", nmse(y, ref, n), 1e-10, what);
        }
        for (int with_b = 0; with_b < 2; with_b++) {
            be->ops->layernorm(be, x, w, with_b ? b : NULL, n, 1e-5f, y);
            mxl_cpu_layernorm_ref(x, w, with_b ? b : NULL, n, 1e-5f, ref);
            record("layernorm", nmse(y, ref, n), 1e-10, what);
        }
        for (int a = MXL_ACT_SILU; a <= MXL_ACT_RELU; a++) {
            be->ops->act(be, (mxl_act)a, x, n, y);
            mxl_cpu_act_ref((mxl_act)a, x, n, ref);
            record("act", nmse(y, ref, n), 1e-10, what);
            be->ops->glu(be, (mxl_act)a, x, u, n, y);
            mxl_cpu_glu_ref((mxl_act)a, x, u, n, ref);
            record("glu", nmse(y, ref, n), 1e-10, what);
        }
        memcpy(y, x, (size_t)n * 4);
        be->ops->softcap(be, y, n, 2.0f);
        for (int64_t i = 0; i < n; i++) ref[i] = (float)(2.0 * tanh((double)x[i] / 2.0));
        record("softcap", nmse(y, ref, n), 1e-10, what);
        /* the low-rank up-projection: 2 rows of rank 16 onto outputs of n (a LoRA adapter's B^T) */
        if (n >= 32) {
            const int64_t N = n / 2, K = 16;
            float *wt = randv(K * N, 1.0f);
            memcpy(y, u, (size_t)n * 4), memcpy(ref, u, (size_t)n * 4);
            be->ops->lowrank_acc(be, x, 2, K, wt, MXL_DTYPE_F32, N, 0.5f, y);
            mxl_cpu_lowrank_acc_ref(x, 2, K, wt, MXL_DTYPE_F32, N, 0.5f, ref);
            record("lowrank_acc", nmse(y, ref, 2 * N), 1e-10, what);
            mxl_free(wt);
        }
        mxl_free(x), mxl_free(w), mxl_free(b), mxl_free(u), mxl_free(y), mxl_free(ref);
    }
}

/* RoPE against the rotation in double: NEOX and GPT-J pairs, full and partial rotary */
static void check_rope(const mxl_backend *be) {
    static const int dims[][2] = {{64, 64}, {256, 256}, {32, 16}, {80, 40}};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int style = 0; style < 2; style++) {
            int hd = dims[d][0], rot = dims[d][1], nh = 3;
            mxl_rope_cfg c = {.head_dim = hd, .rotary_dim = rot, .theta = 10000.0, .style = (mxl_rope_style)style};
            float inv[128], af = 1.0f, cs[256];
            mxl_rope_freqs(&c, 4096, inv, &af);
            int64_t poss[] = {0, 1, 17, 4000};
            for (size_t pi = 0; pi < 4; pi++) {
                int64_t pos = poss[pi];
                float *x = randv(nh * hd, 1.0f), *y = mxl_malloc((size_t)(nh * hd) * 4), *ref = mxl_malloc((size_t)(nh * hd) * 4);
                memcpy(y, x, (size_t)(nh * hd) * 4);
                memcpy(ref, x, (size_t)(nh * hd) * 4);
                be->ops->rope_table(be, &c, inv, af, pos, cs);
                be->ops->rope_apply_table(be, &c, cs, y, nh);
                for (int h = 0; h < nh; h++)
                    for (int i = 0; i < rot / 2; i++) {
                        float ang = (float)pos * inv[i]; /* f32 angle, as transformers computes it */
                        double co = cos((double)ang), si = sin((double)ang);
                        int i0 = style == MXL_ROPE_NEOX ? i : 2 * i, i1 = style == MXL_ROPE_NEOX ? i + rot / 2 : 2 * i + 1;
                        double a0 = x[h * hd + i0], a1 = x[h * hd + i1];
                        ref[h * hd + i0] = (float)(a0 * co - a1 * si);
                        ref[h * hd + i1] = (float)(a1 * co + a0 * si);
                    }
                char what[64];
                snprintf(what, sizeof what, "head %d rot %d style %d pos %lld", hd, rot, style, (long long)pos);
                record("rope", nmse(y, ref, nh * hd), 1e-10, what);
                mxl_free(x), mxl_free(y), mxl_free(ref);
            }
        }
}

/* ---- embedding rows, logits, KV codecs ---- */

static void check_embed(const mxl_backend *be) {
    for (int f = 0; f < N_FORMATS; f++) {
        const wformat *F = &k_formats[f];
        int64_t rows = 50, cols = 512;
        test_weight tw;
        make_weight(&tw, F->t, F->mlx_bits, F->gs, rows, cols);
        int32_t ids[] = {0, 49, 7, 7, 23};
        float *y = mxl_malloc(5 * (size_t)cols * 4), *ref = mxl_malloc(5 * (size_t)cols * 4);
        mxl_error err = {0};
        EXPECT(be->ops->embed(be, &tw.w, ids, 5, 0.5f, y, &err) == MXL_OK);
        for (int i = 0; i < 5; i++) {
            mxl_weight_dequant_row(&tw.w, ids[i], ref + i * cols);
            for (int64_t c = 0; c < cols; c++) ref[i * cols + c] *= 0.5f;
        }
        record("embed", memcmp(y, ref, 5 * (size_t)cols * 4) == 0 ? 0 : 1, 0, F->name);
        int32_t bad[] = {50};
        EXPECT(be->ops->embed(be, &tw.w, bad, 1, 1.0f, y, &err) != MXL_OK); /* an id outside the table */
        mxl_free(y), mxl_free(ref);
        free_weight(&tw);
    }
}

static void check_logits(const mxl_backend *be) {
    static const int64_t sizes[] = {1, 15, 49152, 100003};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int64_t n = sizes[si];
        float *x = randv(n, 10.0f);
        for (int c = 0; c < 4; c++) { /* plain; a tie; a NaN; an infinity */
            if (c == 1 && n > 3) x[n - 1] = x[mxl_cpu_argmax_ref(x, n)];
            if (c == 2) x[n / 2] = NAN;
            if (c == 3) x[0] = INFINITY;
            bool bad = false, any = false, rbad = false, rany = false;
            be->ops->logits_scan(be, x, n, &bad, &any);
            mxl_cpu_logits_scan_ref(x, n, &rbad, &rany);
            record("logits_scan", bad == rbad && any == rany ? 0 : 1, 0, "scan");
            record("argmax", be->ops->argmax(be, x, n) == mxl_cpu_argmax_ref(x, n) ? 0 : 1, 0, "argmax");
        }
        mxl_free(x);
    }
}

/* buffers: what is written into one and copied within it reads back the same */
static void check_buffers(const mxl_backend *be) {
    static const size_t sizes[] = {1, 64, 4096 + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        uint8_t *b = be->ops->buffer_alloc(be, 2 * n), *src = mxl_malloc(n), *back = mxl_malloc(n);
        EXPECT(b != NULL && ((uintptr_t)b & 63) == 0);
        for (size_t j = 0; j < n; j++) src[j] = (uint8_t)(j * 131 + 7);
        be->ops->buffer_copy(be, b, src, n);
        be->ops->buffer_copy(be, b + n, b, n);
        be->ops->buffer_copy(be, back, b + n, n);
        be->ops->synchronize(be);
        record("buffer_copy", memcmp(back, src, n) == 0 ? 0 : 1, 0, "bytes");
        be->ops->buffer_free(be, b);
        mxl_free(src), mxl_free(back);
    }
    be->ops->buffer_free(be, NULL);
}

static void check_kv_codecs(const mxl_backend *be) {
    static const int64_t sizes[][2] = {{64 * 3, 32}, {256, 32}, {48 * 2, 48}, {16, 16}};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int64_t n = sizes[si][0], g = sizes[si][1];
        float *x = randv(n, 4.0f), *y = mxl_malloc((size_t)n * 4), *sc = mxl_malloc((size_t)(n / g) * 4);
        uint16_t *h = mxl_malloc((size_t)n * 2), *hr = mxl_malloc((size_t)n * 2);
        be->ops->kv_store_f16(be, x, n, h);
        mxl_kv_store_f16_ref(n, x, hr);
        record("kv_store_f16", memcmp(h, hr, (size_t)n * 2) == 0 ? 0 : 1, 0, "f16");
        int8_t *q = mxl_malloc((size_t)n);
        be->ops->kv_quantize_i8(be, x, n, g, q, sc);
        be->ops->kv_dequantize_i8(be, q, sc, n, g, y);
        double worst = 0; /* in steps: |x - y| / scale, at most 1/2 */
        for (int64_t i = 0; i < n; i++) {
            double s = sc[i / g], e = s > 0 ? fabs((double)x[i] - y[i]) / s : fabs((double)x[i] - y[i]);
            if (e > worst) worst = e;
        }
        record("kv_i8 (steps)", worst, 0.5 + 1e-4, "i8");
        for (int f = 0; f < MXL_KV_QFMT_COUNT && n % 32 == 0; f++) { /* the block formats: kv_quant.h's bytes and values */
            const mxl_dtype t = mxl_kv_qfmt_dtype((mxl_kv_qfmt)f);
            const size_t nb = mxl_kv_offset_bytes(t, n);
            uint8_t *b1 = mxl_malloc(nb), *b2 = mxl_malloc(nb);
            float *y2 = mxl_malloc((size_t)n * 4);
            be->ops->kv_quantize_blocks(be, t, x, n, b1);
            mxl_kv_quantize_blocks(t, x, n, b2);
            be->ops->kv_dequantize_blocks(be, t, b1, n, y);
            mxl_kv_dequantize_blocks(t, b2, n, y2);
            record("kv_blocks", memcmp(b1, b2, nb) == 0 && memcmp(y, y2, (size_t)n * 4) == 0 ? 0 : 1, 0, mxl_dtype_name(t));
            mxl_free(b1), mxl_free(b2), mxl_free(y2);
        }
        mxl_free(x), mxl_free(y), mxl_free(sc), mxl_free(h), mxl_free(hr), mxl_free(q);
    }
}

TEST(backend_ops_every_backend) {
    CHECK(mxl_backend_count() >= 2);
    CHECK(mxl_backend_host() != NULL && mxl_backend_reference() != NULL);
    CHECK(mxl_backend_get("no-such-backend") == NULL);
    for (int i = 0; i < mxl_backend_count(); i++) {
        const mxl_backend *be = mxl_backend_at(i);
        if (!be->ops->available(be)) {
            fprintf(stderr, "  backend %s (%s): not run, its device is absent on this machine\n", be->name, be->description);
            continue;
        }
        check_matmul(be);
        check_gemm(be);
        check_attention(be);
        check_attention_varlen(be);
        check_rows(be);
        check_rope(be);
        check_embed(be);
        check_logits(be);
        check_kv_codecs(be);
        check_buffers(be);
        be->ops->synchronize(be);
        print_stats(be);
    }
    CHECK(g_failures == 0);
}
