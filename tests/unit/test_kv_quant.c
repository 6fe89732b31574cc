/* test_kv_quant.c - the KV cache's ggml block formats (q8_0, q4_0, q4_1, q5_0, q5_1;
 * backends/cpu/kv_quant.h) against independent references, and the kernels and attention passes
 * of every block format (TurboQuant's too: its blocks against their reference in test_kv_turbo.c).
 *
 *   - Formats: mxl_kv_quantize_blocks writes, byte for byte, the blocks of the PyPI gguf package's
 *     gguf.quants.quantize (ggml-quants.c's quantize_row_*_ref), and mxl_kv_dequantize_blocks
 *     reads them back as gguf.quants.dequantize does, bit for bit (NaN where the package has NaN):
 *     random rows, outliers, zeros, constants, huge and tiny magnitudes (scales past f16's range
 *     or rounding to 0), negative maxima, rounding ties, equal magnitudes of both signs
 *     (tests/fixtures/kv_quant/gen_kv_quant_fixtures.py).
 *   - Kernels, every level this CPU runs (the kernel table): the dot and axpy kernels equal a
 *     double-precision sum over the dequantized values within float rounding (|error| <= 2e-5 x
 *     sum |k_i x_i|: n f32 additions of at most 2^-24 relative error each, n <= 256, and the AVX2
 *     q4_1 / q5_1 values' single rounding of d code + m); attention over block-format K and V
 *     (each with f16 / f32 / another block format beside it, windows, several heads per KV
 *     head, a paged table) equals a naive double-precision attention over the dequantized cache
 *     (1e-5 + 1e-4 |ref|, the bound test_decoder_kv.c uses for f16 / int8).
 *   - The SIMD variants called by name (x86-64): the AVX2 dot / axpy of each format against its
 *     reference (1e-5 x sum |k_i x_i|); the AVX2 grouped K / V passes bit for bit the per-head
 *     AVX2 kernels; the AVX-512 grouped passes against the reference kernels (same bound) and,
 *     per head, the same bits for every group size G. These tests fail (not skip) on a CPU
 *     without AVX2 / AVX-512, where these kernels cannot be checked. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/attention.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/kv_quant.h"
#include "backends/cpu/quant_gguf.h"
#include "core/alloc.h"
#include "test.h"

static uint32_t g_rng = 4242u;
static float frand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)((g_rng >> 8) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

/* by mxl_kv_qfmt: ggml's five, then TurboQuant's two (kv_turbo.h; checked against their own
 * Python reference in test_kv_turbo.c) */
static const mxl_dtype k_types[MXL_KV_QFMT_COUNT] = {MXL_DTYPE_Q8_0, MXL_DTYPE_Q4_0, MXL_DTYPE_Q4_1, MXL_DTYPE_Q5_0,
                                                     MXL_DTYPE_Q5_1, MXL_DTYPE_TURBO4, MXL_DTYPE_TURBO3};

static size_t qbytes(mxl_dtype t, int64_t n) { return mxl_kv_offset_bytes(t, n); }

static mxl_dtype type_by_name(const char *n) {
    static const char *names[MXL_KV_GGML_QFMTS] = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"};
    for (int f = 0; f < MXL_KV_GGML_QFMTS; f++)
        if (!strcmp(n, names[f])) return k_types[f];
    return MXL_DTYPE_INVALID;
}

TEST(kv_quant_blocks_match_gguf_package) {
    json_t *root = mxl_test_load_json("tests/fixtures/kv_quant/kv_quant_blocks.json");
    REQUIRE(root);
    json_t *cases = json_object_get(root, "cases"), *c;
    size_t i;
    int n_cases = 0, seen[MXL_KV_GGML_QFMTS] = {0};
    json_array_foreach(cases, i, c) {
        const char *tn = json_string_value(json_object_get(c, "type")), *name = json_string_value(json_object_get(c, "name"));
        mxl_dtype t = type_by_name(tn);
        REQUIRE(t != MXL_DTYPE_INVALID);
        int64_t n = json_integer_value(json_object_get(c, "n"));
        size_t lx = 0, lb = 0, ly = 0;
        uint8_t *x = mxl_test_unhex(json_string_value(json_object_get(c, "x")), &lx);
        uint8_t *want = mxl_test_unhex(json_string_value(json_object_get(c, "blocks")), &lb);
        uint8_t *wy = mxl_test_unhex(json_string_value(json_object_get(c, "y")), &ly);
        REQUIRE(x && want && wy && n > 0 && n % 32 == 0);
        REQUIRE(lx == (size_t)n * 4 && ly == (size_t)n * 4 && lb == qbytes(t, n));
        float *xf = mxl_malloc(lx), *y = mxl_malloc(ly), *yw = mxl_malloc(ly);
        uint8_t *got = mxl_malloc(lb);
        REQUIRE(xf && y && yw && got);
        memcpy(xf, x, lx);
        memcpy(yw, wy, ly);
        mxl_kv_quantize_blocks(t, xf, n, got);
        if (memcmp(got, want, lb)) {
            for (size_t k = 0; k < lb; k++)
                if (got[k] != want[k]) {
                    fprintf(stderr, "  %s %s: byte %zu (block %zu) %02x, gguf %02x\n", tn, name, k, k / (lb / ((size_t)n / 32)), got[k], want[k]);
                    break;
                }
            CHECK(0);
        }
        mxl_kv_dequantize_blocks(t, want, n, y);
        int bad = 0;
        for (int64_t k = 0; k < n; k++) {
            uint32_t a, b;
            memcpy(&a, &y[k], 4), memcpy(&b, &yw[k], 4);
            if (a != b && !(isnan(y[k]) && isnan(yw[k]))) bad++;
        }
        if (bad) fprintf(stderr, "  %s %s: %d dequantized values differ\n", tn, name, bad);
        CHECK_EQ_INT(bad, 0);
        seen[mxl_kv_qfmt_of(t)]++;
        n_cases++;
        mxl_free(x), mxl_free(want), mxl_free(wy), mxl_free(xf), mxl_free(y), mxl_free(yw), mxl_free(got);
    }
    CHECK(n_cases >= 80);
    for (int f = 0; f < MXL_KV_GGML_QFMTS; f++) CHECK(seen[f] >= 16);
    json_decref(root);
}

/* Random head vectors of n elements (several blocks, outliers in some) quantized to each format;
 * deq: their values (the bit-exact dequantizer, checked above against gguf). */
static void random_blocks(mxl_dtype t, int64_t n, void *q, float *deq) {
    float x[512] = {0}; /* (all of it: GCC cannot see n <= 512) */
    for (int64_t i = 0; i < n; i++) x[i] = frand() * (i % 11 == 3 ? 6.0f : 1.0f) + (i < 32 ? 0.3f : 0.0f);
    mxl_kv_quantize_blocks(t, x, n, q);
    mxl_kv_dequantize_blocks(t, q, n, deq);
}

/* |got - want| within float rounding of a sum whose terms have magnitudes summing to mag. */
static bool sum_close(double got, double want, double mag, double rel) { return fabs(got - want) <= rel * mag + 1e-30; }

static int check_kernels(mxl_kv_dot_q_fn dot, mxl_kv_axpy_q_fn axpy, mxl_dtype t, int64_t n, double rel) {
    uint8_t q[512 / 32 * 34];
    float deq[512], x[512], o[512], y[512];
    random_blocks(t, n, q, deq);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) x[i] = frand() * 2.0f, y[i] = frand();
    double want = 0, mag = 0;
    for (int64_t i = 0; i < n; i++) want += (double)deq[i] * x[i], mag += fabs((double)deq[i] * x[i]);
    if (!sum_close(dot(n, q, x), want, mag, rel)) bad++;
    const float w = 0.37f;
    memcpy(o, y, (size_t)n * 4);
    axpy(n, w, q, o);
    for (int64_t i = 0; i < n; i++) {
        const double e = (double)y[i] + (double)w * deq[i];
        if (!sum_close(o[i], e, fabs(y[i]) + fabs(w * deq[i]), 4e-7)) bad++;
    }
    return bad;
}

TEST(kv_quant_kernel_levels_match_double_sums) {
    const int64_t ns[4] = {32, 64, 128, 256};
    for (int isa = MXL_CPU_ISA_SCALAR; isa <= (int)mxl_cpu_isa_detect(); isa++) {
        const mxl_cpu_kernels *K = mxl_cpu_kern_at((mxl_cpu_isa)isa);
        if (K->level != (mxl_cpu_isa)isa) continue; /* (not a level of this architecture) */
        for (int f = 0; f < MXL_KV_QFMT_COUNT; f++)
            for (int c = 0; c < 4; c++) {
                int bad = check_kernels(K->kv.dot_q[f], K->kv.axpy_q[f], k_types[f], ns[c], 2e-5);
                if (bad) fprintf(stderr, "  level %d %s n %lld: %d mismatches\n", isa, mxl_dtype_name(k_types[f]), (long long)ns[c], bad);
                CHECK_EQ_INT(bad, 0);
            }
    }
}

/* ---- attention ---- */

/* A cache of n_kv rows of `stride` elements in type t (F32, F16 or a block format) and its values. */
typedef struct cache {
    mxl_dtype t;
    uint8_t *bytes;
    float *val;
} cache;

static bool make_cache(mxl_dtype t, const float *x, int64_t n, cache *c) {
    c->t = t;
    c->bytes = mxl_malloc(mxl_kv_offset_bytes(t, n) + 64);
    c->val = mxl_malloc((size_t)n * sizeof(float));
    if (!c->bytes || !c->val) return false;
    if (t == MXL_DTYPE_F32) {
        memcpy(c->bytes, x, (size_t)n * 4), memcpy(c->val, x, (size_t)n * 4);
    } else if (t == MXL_DTYPE_F16) {
        for (int64_t i = 0; i < n; i++) ((uint16_t *)c->bytes)[i] = mxl_f32_to_f16(x[i]), c->val[i] = mxl_h2f(((uint16_t *)c->bytes)[i]);
    } else {
        mxl_kv_quantize_blocks(t, x, n, c->bytes);
        mxl_kv_dequantize_blocks(t, c->bytes, n, c->val);
    }
    return true;
}

static void free_cache(cache *c) { mxl_free(c->bytes), mxl_free(c->val); }

/* Attention of every level this CPU runs, over K type kt and V type vt (a paged table of
 * blocks of 16 positions, shuffled), against mxl_test_attn_naive on the dequantized values. */
static int attention_case(mxl_dtype kt, mxl_dtype vt, int n_heads, int n_kv_heads, int hd, int64_t window, mxl_threadpool *pool) {
    enum { NKV = 70, NQ = 3, BS = 16, NB = (NKV + BS - 1) / BS };
    const int64_t stride = (int64_t)n_kv_heads * hd;
    float *kf = mxl_malloc(sizeof(float) * NKV * (size_t)stride), *vf = mxl_malloc(sizeof(float) * NKV * (size_t)stride);
    float *q = mxl_malloc(sizeof(float) * NQ * (size_t)(n_heads * hd)), *out = mxl_malloc(sizeof(float) * NQ * (size_t)(n_heads * hd));
    float *scratch = mxl_malloc(sizeof(float) * mxl_cpu_attention_scratch_floats(NKV, 2));
    if (!kf || !vf || !q || !out || !scratch) return 1000;
    for (int64_t i = 0; i < NKV * stride; i++) kf[i] = frand() * 1.5f, vf[i] = frand();
    for (int64_t i = 0; i < NQ * n_heads * hd; i++) q[i] = frand();
    /* the paged layout: position j in block table[j / BS]'s row j % BS; the physical blocks in
     * reverse order */
    int32_t table[NB];
    for (int b = 0; b < NB; b++) table[b] = NB - 1 - b;
    float *kp = mxl_calloc((size_t)NB * BS * (size_t)stride, sizeof(float)), *vp = mxl_calloc((size_t)NB * BS * (size_t)stride, sizeof(float));
    if (!kp || !vp) return 1000;
    for (int64_t j = 0; j < NKV; j++) {
        memcpy(kp + ((int64_t)table[j / BS] * BS + j % BS) * stride, kf + j * stride, (size_t)stride * 4);
        memcpy(vp + ((int64_t)table[j / BS] * BS + j % BS) * stride, vf + j * stride, (size_t)stride * 4);
    }
    cache ck, cv;
    if (!make_cache(kt, kp, NB * BS * stride, &ck) || !make_cache(vt, vp, NB * BS * stride, &cv)) return 1000;
    /* the dequantized values in position order, for the naive attention */
    for (int64_t j = 0; j < NKV; j++) {
        memcpy(kf + j * stride, ck.val + ((int64_t)table[j / BS] * BS + j % BS) * stride, (size_t)stride * 4);
        memcpy(vf + j * stride, cv.val + ((int64_t)table[j / BS] * BS + j % BS) * stride, (size_t)stride * 4);
    }
    mxl_attn_params p = {n_heads, n_kv_heads, hd, 1.0f / sqrtf((float)hd), 0.0f, NULL, window, 1, 0, 0, NULL};
    int64_t qpos[NQ] = {5, 40, NKV - 1};
    mxl_kv_paged_view kv = {kt, vt, ck.bytes, cv.bytes, NULL, NULL, 0, NKV, stride, BS, BS * stride, table, 0};
    int bad = 0;
    for (int isa = MXL_CPU_ISA_SCALAR; isa <= (int)mxl_cpu_isa_detect(); isa++) {
        if (mxl_cpu_kern_at((mxl_cpu_isa)isa)->level != (mxl_cpu_isa)isa) continue;
        for (int th = 0; th < 2; th++) {
            mxl_cpu_attention_paged(&p, q, NQ, qpos, &kv, out, scratch, th ? pool : NULL, (mxl_cpu_isa)isa);
            int b = 0;
            for (int t = 0; t < NQ; t++)
                for (int h = 0; h < n_heads; h++) {
                    double ref[256];
                    mxl_test_attn_naive(&p, q, t, h, qpos[t], kf, vf, NKV, stride, ref);
                    for (int i = 0; i < hd; i++)
                        if (!(fabs(out[(t * n_heads + h) * hd + i] - ref[i]) <= 1e-5 + 1e-4 * fabs(ref[i]))) b++;
                }
            if (b)
                fprintf(stderr, "  attention K %s V %s, %d/%d heads, hd %d, window %lld, level %d: %d mismatches\n", mxl_dtype_name(kt),
                        mxl_dtype_name(vt), n_heads, n_kv_heads, hd, (long long)window, isa, b);
            bad += b;
        }
    }
    free_cache(&ck), free_cache(&cv);
    mxl_free(kf), mxl_free(vf), mxl_free(q), mxl_free(out), mxl_free(scratch), mxl_free(kp), mxl_free(vp);
    return bad;
}

TEST(kv_quant_attention_matches_naive) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, NULL) == MXL_OK);
    for (int f = 0; f < MXL_KV_QFMT_COUNT; f++) {
        const mxl_dtype t = k_types[f], other = k_types[(f + 2) % MXL_KV_QFMT_COUNT];
        CHECK_EQ_INT(attention_case(t, t, 9, 3, 64, 0, pool), 0);  /* SmolLM2's shape: 3 heads per KV head */
        CHECK_EQ_INT(attention_case(t, t, 8, 2, 128, 30, pool), 0); /* 4 per KV head, a window */
        CHECK_EQ_INT(attention_case(t, t, 2, 2, 32, 0, pool), 0);   /* one head per KV head, one block per head */
        CHECK_EQ_INT(attention_case(t, MXL_DTYPE_F16, 6, 2, 96, 0, pool), 0);
        CHECK_EQ_INT(attention_case(MXL_DTYPE_F16, t, 6, 2, 64, 0, pool), 0);
        CHECK_EQ_INT(attention_case(t, MXL_DTYPE_F32, 4, 1, 64, 0, pool), 0);
        CHECK_EQ_INT(attention_case(t, other, 5, 1, 64, 0, pool), 0); /* 5 heads: groups of 4 and 1 */
    }
    mxl_threadpool_destroy(pool);
}

#if defined(__x86_64__)
/* The AVX2 kernels by name against their references on random blocks. */
TEST(kv_quant_avx2_kernels_match_reference) {
    REQUIRE(mxl_cpu_isa_detect() >= MXL_CPU_ISA_AVX2); /* else these kernels cannot be checked on this CPU */
    static const mxl_kv_dot_q_fn dots[MXL_KV_QFMT_COUNT] = {mxl_kv_dot_q8_0_avx2, mxl_kv_dot_q4_0_avx2, mxl_kv_dot_q4_1_avx2,
                                                            mxl_kv_dot_q5_0_avx2, mxl_kv_dot_q5_1_avx2, mxl_kv_dot_turbo4_avx2,
                                                            mxl_kv_dot_turbo3_avx2};
    static const mxl_kv_dot_q_fn dots_ref[MXL_KV_QFMT_COUNT] = {mxl_kv_dot_q8_0_ref, mxl_kv_dot_q4_0_ref, mxl_kv_dot_q4_1_ref,
                                                                mxl_kv_dot_q5_0_ref, mxl_kv_dot_q5_1_ref, mxl_kv_dot_turbo4_ref,
                                                                mxl_kv_dot_turbo3_ref};
    static const mxl_kv_axpy_q_fn axpys[MXL_KV_QFMT_COUNT] = {mxl_kv_axpy_q8_0_avx2, mxl_kv_axpy_q4_0_avx2, mxl_kv_axpy_q4_1_avx2,
                                                              mxl_kv_axpy_q5_0_avx2, mxl_kv_axpy_q5_1_avx2, mxl_kv_axpy_turbo4_avx2,
                                                              mxl_kv_axpy_turbo3_avx2};
    static const mxl_kv_axpy_q_fn axpys_ref[MXL_KV_QFMT_COUNT] = {mxl_kv_axpy_q8_0_ref, mxl_kv_axpy_q4_0_ref, mxl_kv_axpy_q4_1_ref,
                                                                  mxl_kv_axpy_q5_0_ref, mxl_kv_axpy_q5_1_ref, mxl_kv_axpy_turbo4_ref,
                                                                  mxl_kv_axpy_turbo3_ref};
    for (int f = 0; f < MXL_KV_QFMT_COUNT; f++)
        for (int64_t n = 32; n <= 256; n *= 2)
            for (int rep = 0; rep < 4; rep++) {
                uint8_t q[256 / 32 * 34];
                float deq[256], x[256], o1[256], o2[256];
                random_blocks(k_types[f], n, q, deq);
                double mag = 0;
                for (int64_t i = 0; i < n; i++) x[i] = frand(), o1[i] = o2[i] = frand(), mag += fabs((double)deq[i] * x[i]);
                const float a = dots[f](n, q, x), r = dots_ref[f](n, q, x);
                if (!sum_close(a, r, mag, 1e-5)) {
                    fprintf(stderr, "  %s dot n %lld: avx2 %.9g, ref %.9g\n", mxl_dtype_name(k_types[f]), (long long)n, a, r);
                    CHECK(0);
                }
                axpys[f](n, -1.7f, q, o1);
                axpys_ref[f](n, -1.7f, q, o2);
                int bad = 0;
                for (int64_t i = 0; i < n; i++)
                    if (!sum_close(o1[i], o2[i], fabs(o2[i]) + fabs(1.7 * deq[i]), 5e-7)) bad++;
                CHECK_EQ_INT(bad, 0);
                /* the symmetric formats' values are the reference's (d (code - offset) rounded once;
                 * a zero may come out +0 where the reference has -0) */
                if (k_types[f] != MXL_DTYPE_Q4_1 && k_types[f] != MXL_DTYPE_Q5_1) {
                    float z[256];
                    for (int64_t i = 0; i < n; i++) z[i] = -0.0f; /* (-0 + v is v) */
                    axpys[f](n, 1.0f, q, z);
                    int differ = 0;
                    for (int64_t i = 0; i < n; i++) differ += z[i] != deq[i] || (z[i] != 0.0f && memcmp(&z[i], &deq[i], 4));
                    CHECK_EQ_INT(differ, 0);
                }
            }
}

/* The AVX2 grouped passes by name: per head, bit for bit the per-head AVX2 kernels (a score is
 * scale x the dot, an output the axpy chain from 0 over the keys with a weight), for G = 1..4. */
TEST(kv_quant_avx2_grouped_passes_equal_per_head_kernels) {
    REQUIRE(mxl_cpu_isa_detect() >= MXL_CPU_ISA_AVX2); /* else these kernels cannot be checked on this CPU */
    enum { NKV = 45, BS = 32, NB = 2, HDMAX = 160, G4 = 4 };
    static float s[G4 * NKV], o[G4 * HDMAX], q[G4 * HDMAX], w[G4 * NKV], rows[NB * BS * HDMAX];
    static uint8_t buf[NB * BS * HDMAX / 32 * 34 + 64];
    const int32_t table[NB] = {1, 0};
    const int hds[3] = {32, 64, 160};
    const mxl_cpu_kernels *K = mxl_cpu_kern_at(MXL_CPU_ISA_AVX2);
    for (int f = 0; f < MXL_KV_QFMT_COUNT; f++)
        for (int hi_ = 0; hi_ < 3; hi_++) {
            const int hd = hds[hi_];
            const mxl_dtype t = k_types[f];
            for (int i = 0; i < NB * BS * hd; i++) rows[i] = frand() * (i % 13 == 0 ? 5.0f : 1.0f);
            mxl_kv_quantize_blocks(t, rows, NB * BS * hd, buf);
            for (int i = 0; i < G4 * hd; i++) q[i] = frand();
            for (int i = 0; i < G4 * NKV; i++) w[i] = frand() > 0.8f ? 0.0f : fabsf(frand());
            mxl_kv_paged_view kv = {t, t, buf, buf, NULL, NULL, 0, NKV, hd, BS, BS * hd, table, 0};
            const int64_t lo = 3, hi = NKV;
            for (int G = 1; G <= G4; G++) {
                mxl_attn_k_q_avx2(&kv, 0, lo, hi, G, q, hd, 0.5f, s, NKV);
                mxl_attn_v_q_avx2(&kv, 0, lo, hi, G, w, NKV, hd, o);
                int diff = 0;
                for (int g = 0; g < G; g++) {
                    float ref[HDMAX] = {0};
                    for (int64_t j = lo; j < hi; j++) {
                        const uint8_t *kj = buf + mxl_kv_offset_bytes(t, ((int64_t)table[j / BS] * BS + j % BS) * hd);
                        const float r = K->kv.dot_q[f](hd, kj, q + g * hd) * 0.5f;
                        diff += memcmp(&r, &s[g * NKV + j], 4) != 0;
                        if (w[g * NKV + j] != 0.0f) K->kv.axpy_q[f](hd, w[g * NKV + j], kj, ref);
                    }
                    diff += memcmp(ref, o + g * hd, (size_t)hd * 4) != 0;
                }
                if (diff) fprintf(stderr, "  %s hd %d G %d: %d results differ from the per-head kernels\n", mxl_dtype_name(t), hd, G, diff);
                CHECK_EQ_INT(diff, 0);
            }
        }
}

/* The AVX-512 grouped passes by name: scores and outputs of G heads sharing a KV head against the
 * reference dot / axpy per head, and per head the same bits for G = 1 and G = 2..4. */
TEST(kv_quant_avx512_grouped_passes_match_reference) {
    REQUIRE(mxl_cpu_isa_detect() >= MXL_CPU_ISA_AVX512VNNI); /* else these kernels cannot be checked on this CPU */
    enum { NKV = 45, BS = 32, NB = 2, HDMAX = 160, G4 = 4 };
    static float s[G4 * NKV], s1[NKV], o[G4 * HDMAX], o1[HDMAX], q[G4 * HDMAX], w[G4 * NKV];
    static uint8_t buf[NB * BS * HDMAX / 32 * 34 + 64];
    static float rows[NB * BS * HDMAX], deq[NB * BS * HDMAX];
    const int32_t table[NB] = {1, 0};
    const int hds[3] = {32, 64, 160};
    for (int f = 0; f < MXL_KV_QFMT_COUNT; f++)
        for (int hi_ = 0; hi_ < 3; hi_++) {
            const int hd = hds[hi_];
            const mxl_dtype t = k_types[f];
            for (int i = 0; i < NB * BS * hd; i++) rows[i] = frand() * (i % 13 == 0 ? 5.0f : 1.0f);
            mxl_kv_quantize_blocks(t, rows, NB * BS * hd, buf);
            mxl_kv_dequantize_blocks(t, buf, NB * BS * hd, deq);
            for (int i = 0; i < G4 * hd; i++) q[i] = frand();
            for (int i = 0; i < G4 * NKV; i++) w[i] = frand() > 0.8f ? 0.0f : fabsf(frand()); /* some weights 0: skipped */
            mxl_kv_paged_view kv = {t, t, buf, buf, NULL, NULL, 0, NKV, hd, BS, BS * hd, table, 0};
            const int64_t lo = 3, hi = NKV;
            for (int G = 1; G <= G4; G++) {
                mxl_attn_k_q_avx512(&kv, 0, lo, hi, G, q, hd, 0.5f, s, NKV);
                mxl_attn_v_q_avx512(&kv, 0, lo, hi, G, w, NKV, hd, o);
                int bad = 0, diff_bits = 0;
                for (int g = 0; g < G; g++) {
                    for (int64_t j = lo; j < hi; j++) {
                        const int64_t e = ((int64_t)table[j / BS] * BS + j % BS) * hd;
                        double mag = 0;
                        for (int i = 0; i < hd; i++) mag += fabs((double)deq[e + i] * q[g * hd + i]);
                        const float r = 0.5f * mxl_cpu_kern_at(MXL_CPU_ISA_SCALAR)->kv.dot_q[f](hd, buf + mxl_kv_offset_bytes(t, e), q + g * hd);
                        if (!sum_close(s[g * NKV + j], r, 0.5 * mag, 1e-5)) bad++;
                    }
                    float ref[HDMAX] = {0};
                    double mag[HDMAX] = {0};
                    for (int64_t j = lo; j < hi; j++) {
                        const int64_t e = ((int64_t)table[j / BS] * BS + j % BS) * hd;
                        if (w[g * NKV + j] == 0.0f) continue;
                        mxl_cpu_kern_at(MXL_CPU_ISA_SCALAR)->kv.axpy_q[f](hd, w[g * NKV + j], buf + mxl_kv_offset_bytes(t, e), ref);
                        for (int i = 0; i < hd; i++) mag[i] += fabs((double)w[g * NKV + j] * deq[e + i]);
                    }
                    for (int i = 0; i < hd; i++)
                        if (!sum_close(o[g * hd + i], ref[i], mag[i], 1e-5)) bad++;
                    /* head g alone (G = 1) gives the same bits */
                    mxl_attn_k_q_avx512(&kv, 0, lo, hi, 1, q + g * hd, hd, 0.5f, s1, NKV);
                    mxl_attn_v_q_avx512(&kv, 0, lo, hi, 1, w + g * NKV, NKV, hd, o1);
                    if (memcmp(s1 + lo, s + g * NKV + lo, (size_t)(hi - lo) * 4) || memcmp(o1, o + g * hd, (size_t)hd * 4)) diff_bits++;
                }
                if (bad || diff_bits)
                    fprintf(stderr, "  %s hd %d G %d: %d mismatches, %d heads not bitwise G = 1\n", mxl_dtype_name(t), hd, G, bad, diff_bits);
                CHECK_EQ_INT(bad, 0);
                CHECK_EQ_INT(diff_bits, 0);
            }
        }
}
#endif
