/* test_decoder_kv.c - KV cache storage types (models/decoder.h mxl_decoder_kv_type, kernels in
 * backends/cpu/kv_quant.h).
 *
 * Kernels: int8 quantization keeps every element within half a step (scale/2) of its input; the
 * f16 / int8 dot and accumulate kernels (reference and AVX2) equal a double-precision sum over
 * the dequantized values; attention over f16 / int8 / mixed K and V equals a naive attention over
 * the dequantized cache.
 * Decoder: on the tiny random checkpoints (tests/fixtures/decoders, transformers' logits) the
 * fast path with f32 KV stays within the old fast-path bound (1e-3 dense, 0.15 MLX), f16 KV (the
 * default) within 5e-3 dense / 0.15 MLX, int8 KV within 0.1 / 0.2 (measurements at the
 * #defines). The default state is f16 (bitwise equal to an explicit f16 state), f32 on the reference
 * path; the KV bytes halve with f16; switching paths re-stores the cache exactly (f16 -> f32 ->
 * f16); truncate and mixed-type batches keep giving the one-by-one bits.
 * ggml block formats (q8_0, q4_0, q4_1, q5_0, q5_1): on the head_dim-32 fixtures each format's
 * logits equal, within float rounding, those of an f32 cache holding the dequantized blocks (a
 * test backend round-trips every appended row through the bit-exact codecs); bytes, truncate and
 * mixed-type batches keep the cache invariants; head_dim 16 is refused by name.
 * The real SmolLM2 (slow_): with f16 KV (reference matmuls, so only the KV storage differs from
 * test_decoder_real.c) the first 8 greedy tokens of every prompt match transformers; with q8_0 /
 * int8 the greedy tokens part from f16's only at near ties, and the mean KL divergence from the
 * f16 cache's next-token distributions over a 2k-token text is printed and bounded per mode. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/attention.h"
#include "backends/cpu/embed_topk.h"
#include "backends/cpu/kv_quant.h"
#include "backends/cpu/kv_turbo.h"
#include "backends/cpu/quant_gguf.h"
#include "core/alloc.h"
#include "models/decoder.h"
#include "tokenizer/tokenizer.h"
#include "test.h"
#include "test_decoder_compare.h"

/* f32 KV: the fast path's own bound (test_decoder_families.c before f16 became the default). */
#define F32_DENSE_TOL 1e-3
/* f16 KV: each cached element rounds to half precision (relative error <= 2^-12); through 2
 * layers and the LM head of these deliberately large random weights the logits move by up to
 * 3.4e-3 on dense checkpoints (measured 4e-4..3.4e-3). MLX checkpoints keep their 0.15 (the q8
 * activations dominate). */
#define F16_DENSE_TOL 5e-3
#define QUANT_TOL 0.15
/* int8 KV (groups of 32, f32 scale): each element is off by up to 1/254 of its group's largest
 * value, ~16x the f16 error; measured 9e-3..6.1e-2 on dense checkpoints (0.12 on the 8-bit MLX
 * phi3). Bounds 0.1 dense, 0.2 MLX: loose, but they still catch a broken scale or layout, which
 * moves logits by O(1). */
#define INT8_DENSE_TOL 0.1
#define INT8_QUANT_TOL 0.2

static uint32_t g_rng = 12345u;
static float frand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)((g_rng >> 8) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

TEST(decoder_kv_kernels_match_double_sums) {
    const int64_t ns[3] = {64, 40, 96};
    for (int c = 0; c < 3; c++) {
        int64_t n = ns[c], group = n == 40 ? 40 : 32;
        float x[96], y[96], deq[96], sc[3], o_ref[96], o_simd[96];
        int8_t q[96];
        uint16_t h[96];
        for (int64_t i = 0; i < n; i++) x[i] = frand() * (i % 7 == 0 ? 8.0f : 1.0f), y[i] = frand();
        mxl_kv_quantize_i8(x, n, group, q, sc);
        mxl_kv_dequantize_i8(q, sc, n, group, deq);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float amax = 0;
            for (int64_t j = i / group * group; j < (i / group + 1) * group; j++) amax = fmaxf(amax, fabsf(x[j]));
            if (!(fabsf(deq[i] - x[i]) <= amax / 254.0f * 1.0001f)) bad++;
            h[i] = mxl_f32_to_f16(x[i]);
        }
        CHECK_EQ_INT(bad, 0);
        double want_i8 = 0, want_f16 = 0;
        for (int64_t i = 0; i < n; i++) want_i8 += (double)deq[i] * y[i], want_f16 += (double)mxl_h2f(h[i]) * y[i];
        for (int isa = 0; isa < 2; isa++) {
            mxl_kv_kernels k = mxl_kv_kernels_get(isa ? mxl_cpu_isa_detect() : MXL_CPU_ISA_SCALAR);
            CHECK(fabs(k.dot_i8(n, group, q, sc, y) - want_i8) <= 1e-4);
            CHECK(fabs(k.dot_f16(n, h, y) - want_f16) <= 1e-4);
            for (int64_t i = 0; i < n; i++) o_ref[i] = o_simd[i] = y[i];
            k.axpy_i8(n, group, 0.7f, q, sc, o_ref);
            k.axpy_f16(n, -0.3f, h, o_simd);
            for (int64_t i = 0; i < n; i++) {
                CHECK(fabs(o_ref[i] - (y[i] + 0.7 * deq[i])) <= 1e-5);
                CHECK(fabs(o_simd[i] - (y[i] - 0.3 * mxl_h2f(h[i]))) <= 1e-5);
            }
        }
    }
    /* the f16 store equals the scalar conversion bit for bit: ties, overflow to inf, subnormals,
     * NaN (canonical quiet NaN), at odd lengths */
    float xs[43];
    for (int i = 0; i < 43; i++) xs[i] = frand() * (i % 3 == 0 ? 70000.0f : i % 3 == 1 ? 1e-5f : 3.0f);
    xs[4] = 65520.0f, xs[5] = -65519.0f, xs[6] = 1.0f + 1.0f / 2048.0f, xs[7] = 1.0f + 3.0f / 2048.0f;
    xs[9] = NAN, xs[20] = -INFINITY, xs[21] = 5.9604644775390625e-08f * 1.5f, xs[22] = -0.0f;
    for (int isa = 0; isa < 2; isa++) {
        mxl_kv_kernels k = mxl_kv_kernels_get(isa ? mxl_cpu_isa_detect() : MXL_CPU_ISA_SCALAR);
        for (int64_t n = 1; n <= 43; n += 7) {
            uint16_t got[43], want[43];
            k.store_f16(n, xs, got);
            for (int64_t i = 0; i < n; i++) want[i] = mxl_f32_to_f16(xs[i]);
            CHECK(memcmp(got, want, (size_t)n * 2) == 0);
        }
    }
    /* zero groups quantize to scale 0 and read back as zeros */
    float z[32] = {0}, sz = -1;
    int8_t qz[32];
    mxl_kv_quantize_i8(z, 32, 32, qz, &sz);
    CHECK(sz == 0.0f && qz[0] == 0 && qz[31] == 0);
}

TEST(decoder_kv_attention_types_match_naive) {
    enum { HD = 64, NH = 4, NKVH = 2, NKV = 21, NQ = 3, STRIDE = NKVH * HD, G = 32 };
    float *q = mxl_malloc(sizeof(float) * NQ * NH * HD), *kf = mxl_malloc(sizeof(float) * NKV * STRIDE),
          *vf = mxl_malloc(sizeof(float) * NKV * STRIDE);
    float kd[2][NKV * STRIDE], vd[2][NKV * STRIDE]; /* dequantized: [0] f16, [1] int8 */
    uint16_t k16[NKV * STRIDE], v16[NKV * STRIDE];
    int8_t k8[NKV * STRIDE], v8[NKV * STRIDE];
    float ks[NKV * STRIDE / G], vs[NKV * STRIDE / G];
    REQUIRE(q && kf && vf);
    for (int i = 0; i < NQ * NH * HD; i++) q[i] = frand() * 2;
    for (int i = 0; i < NKV * STRIDE; i++) kf[i] = frand() * 2, vf[i] = frand();
    for (int i = 0; i < NKV * STRIDE; i++) {
        k16[i] = mxl_f32_to_f16(kf[i]), v16[i] = mxl_f32_to_f16(vf[i]);
        kd[0][i] = mxl_h2f(k16[i]), vd[0][i] = mxl_h2f(v16[i]);
    }
    mxl_kv_quantize_i8(kf, NKV * STRIDE, G, k8, ks);
    mxl_kv_quantize_i8(vf, NKV * STRIDE, G, v8, vs);
    mxl_kv_dequantize_i8(k8, ks, NKV * STRIDE, G, kd[1]);
    mxl_kv_dequantize_i8(v8, vs, NKV * STRIDE, G, vd[1]);
    mxl_attn_params p = {NH, NKVH, HD, 0.125f, 0.0f, NULL, 0, 1, 0, 0, NULL};
    int64_t qpos[NQ] = {NKV - 3, NKV - 2, NKV - 1};
    float out[NQ * NH * HD], *scratch = mxl_malloc(sizeof(float) * mxl_cpu_attention_scratch_floats(NKV, 2));
    mxl_threadpool *pool = NULL;
    REQUIRE(scratch && mxl_threadpool_create(2, &pool, NULL) == MXL_OK);
    /* (K type, V type): 0 f16, 1 int8 */
    for (int kt = 0; kt < 2; kt++)
        for (int vt = 0; vt < 2; vt++)
            for (int isa = 0; isa < 2; isa++) {
                mxl_kv_split_view kv = {kt ? MXL_DTYPE_I8 : MXL_DTYPE_F16, vt ? MXL_DTYPE_I8 : MXL_DTYPE_F16,
                                        kt ? (const void *)k8 : k16, vt ? (const void *)v8 : v16,
                                        kt ? ks : NULL, vt ? vs : NULL, G, NKV, STRIDE};
                mxl_cpu_attention_kv(&p, q, NQ, qpos, &kv, out, scratch, isa ? pool : NULL,
                                     isa ? mxl_cpu_isa_detect() : MXL_CPU_ISA_SCALAR);
                int bad = 0;
                for (int t = 0; t < NQ; t++)
                    for (int h = 0; h < NH; h++) {
                        double ref[HD];
                        mxl_test_attn_naive(&p, q, t, h, qpos[t], kd[kt], vd[vt], NKV, STRIDE, ref);
                        for (int i = 0; i < HD; i++)
                            if (!(fabs(out[(t * NH + h) * HD + i] - ref[i]) <= 1e-5 + 1e-4 * fabs(ref[i]))) bad++;
                    }
                if (bad) fprintf(stderr, "  attention K %s V %s isa %d: %d mismatches\n", kt ? "int8" : "f16", vt ? "int8" : "f16", isa, bad);
                CHECK_EQ_INT(bad, 0);
            }
    mxl_threadpool_destroy(pool);
    mxl_free(q), mxl_free(kf), mxl_free(vf), mxl_free(scratch);
}

/* ---- decoder ---- */

static const char *fixture_dir(const char *name) {
    static char path[2048];
    snprintf(path, sizeof path, "%s/tests/fixtures/decoders/%s", mxl_test_repo_root(), name);
    return path;
}

static double full_diff(json_t *want, const float *got, int64_t vocab) {
    double m = 0;
    if ((int64_t)json_array_size(want) != vocab) return INFINITY;
    for (int64_t i = 0; i < vocab; i++) {
        double d = fabs(json_number_value(json_array_get(want, (size_t)i)) - got[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

/* Fast path, one token per call, KV types `o`: max |diff| against transformers over the argmax
 * logits and the recorded full logits; the last position's logits go to last[vocab]. Returns
 * INFINITY when it could not run. */
static double run_decode(const mxl_decoder *d, json_t *c, const int32_t *ids, int64_t n, const mxl_decoder_kv_opts *o,
                         mxl_threadpool *pool, float *last) {
    mxl_error err;
    mxl_decoder_state *s = NULL;
    if (mxl_decoder_state_create_ex(d, 64, 4, pool, o, &s, &err) != MXL_OK) return INFINITY;
    mxl_decoder_state_set_reference(s, false);
    json_t *full_pos = json_object_get(c, "full_positions"), *full = json_object_get(c, "full_logits");
    json_t *am = json_object_get(c, "argmax"), *aml = json_object_get(c, "argmax_logit");
    double m = 0;
    for (int64_t p = 0; p < n; p++) {
        if (mxl_decoder_forward(d, s, &ids[p], 1, last, &err) != MXL_OK) {
            m = INFINITY;
            break;
        }
        int64_t want = json_integer_value(json_array_get(am, (size_t)p));
        double dv = fabs(json_number_value(json_array_get(aml, (size_t)p)) - last[want]);
        if (!(dv <= m)) m = dv;
        for (size_t k = 0; k < json_array_size(full_pos); k++)
            if (json_integer_value(json_array_get(full_pos, k)) == p) {
                double fd = full_diff(json_array_get(full, k), last, d->hp.vocab);
                if (!(fd <= m)) m = fd;
            }
    }
    mxl_decoder_state_destroy(s);
    return m;
}

TEST(decoder_kv_families_f16_int8_within_bounds) {
    json_t *fx = mxl_test_decoder_cases();
    REQUIRE(fx);
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    json_t *tokens = json_object_get(fx, "tokens"), *c;
    int32_t ids[64];
    int64_t n = (int64_t)json_array_size(tokens);
    REQUIRE(n > 0 && n <= 64);
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(tokens, (size_t)i));
    size_t ci;
    int n_cases = 0;
    json_array_foreach(json_object_get(fx, "cases"), ci, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        mxl_checkpoint *ck = NULL;
        mxl_decoder d;
        if (mxl_checkpoint_open(fixture_dir(name), &ck, &err) != MXL_OK || mxl_decoder_load(ck, &d, &err) != MXL_OK) {
            fprintf(stderr, "  %s: %s\n", name, err.msg);
            CHECK(0);
            mxl_checkpoint_close(ck);
            continue;
        }
        const mxl_moe_layer *ml = d.layers[d.hp.n_layers - 1].moe; /* (quantized experts: GPT-OSS's MXFP4) */
        bool quant = d.tok_embd.kind == MXL_W_MLX || d.layers[0].w_down.kind == MXL_W_MLX || (ml && ml->gate[0].kind != MXL_W_DENSE);
        float *a = mxl_malloc((size_t)d.hp.vocab * sizeof(float)), *b = mxl_malloc((size_t)d.hp.vocab * sizeof(float));
        REQUIRE(a && b);
        const mxl_decoder_kv_opts f32 = {MXL_DECODER_KV_F32, MXL_DECODER_KV_F32, 0, 0, 0}, f16 = {MXL_DECODER_KV_F16, MXL_DECODER_KV_F16, 0, 0, 0},
                                  i8 = {MXL_DECODER_KV_I8, MXL_DECODER_KV_I8, 0, 0, 0}, mixed = {MXL_DECODER_KV_I8, MXL_DECODER_KV_F16, 0, 0, 0};
        double e_def = run_decode(&d, c, ids, n, NULL, pool, a);
        double e_f16 = run_decode(&d, c, ids, n, &f16, pool, b);
        CHECK(memcmp(a, b, (size_t)d.hp.vocab * sizeof(float)) == 0); /* the default is f16 */
        double e_f32 = run_decode(&d, c, ids, n, &f32, pool, a);
        double e_i8 = run_decode(&d, c, ids, n, &i8, pool, a);
        double e_mix = run_decode(&d, c, ids, n, &mixed, pool, a);
        fprintf(stderr, "  %-22s%s KV f32 %.2e, f16 %.2e, int8 %.2e, int8 K + f16 V %.2e\n", name, quant ? " (MLX)" : "", e_f32,
                e_f16, e_i8, e_mix);
        const double qtol = d.hp.act_quant8 ? MXL_TEST_DEC_BITNET_FAST_TOL : QUANT_TOL; /* (BitNet: test_decoder_compare.h) */
        CHECK(e_f32 <= (quant ? qtol : F32_DENSE_TOL));
        const double gain = mxl_test_kv_gain(&d); /* (Gemma 4's unscaled attention: test_decoder_compare.h) */
        CHECK(e_def <= (quant ? qtol : F16_DENSE_TOL * gain));
        CHECK(e_f16 <= (quant ? qtol : F16_DENSE_TOL * gain));
        /* Mixtures of experts: int8's error moves a row's router scores enough to swap near-tied
         * experts, a discontinuous change of O(1) in the logits (measured up to 1.9 on glm4_moe),
         * so the int8 bound (which the dense fixtures hold for the shared KV code) is not applied
         * there; f32 and f16 above still are. */
        if (d.hp.n_experts > 0) {
            fprintf(stderr, "  %-22s int8 bounds not applied: a mixture of experts (router flips)\n", name);
        } else {
            CHECK(e_i8 <= (quant ? INT8_QUANT_TOL : INT8_DENSE_TOL * gain));
            CHECK(e_mix <= (quant ? INT8_QUANT_TOL : INT8_DENSE_TOL * gain));
        }
        mxl_free(a), mxl_free(b);
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
        n_cases++;
    }
    CHECK(n_cases >= 16);
    mxl_threadpool_destroy(pool);
    json_decref(fx);
}

static bool load_fixture(const char *name, mxl_checkpoint **ck, mxl_decoder *d) {
    mxl_error err;
    if (mxl_checkpoint_open(fixture_dir(name), ck, &err) != MXL_OK) return false;
    if (mxl_decoder_load(*ck, d, &err) != MXL_OK) {
        mxl_checkpoint_close(*ck);
        return false;
    }
    return true;
}

TEST(decoder_kv_types_bytes_and_path_switch) {
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    REQUIRE(load_fixture("qwen3", &ck, &d));
    int64_t V = d.hp.vocab, ctx = 32;
    uint64_t n = (uint64_t)(d.hp.n_layers * ctx * d.hp.n_kv_heads * d.hp.head_dim);
    mxl_decoder_state *s16 = NULL, *s32 = NULL, *s8 = NULL;
    const mxl_decoder_kv_opts o32 = {MXL_DECODER_KV_F32, MXL_DECODER_KV_F32, 0, 0, 0}, o8 = {MXL_DECODER_KV_I8, MXL_DECODER_KV_I8, 0, 0, 0};
    REQUIRE(mxl_decoder_state_create(&d, ctx, 4, NULL, &s16, &err) == MXL_OK);
    REQUIRE(mxl_decoder_state_create_ex(&d, ctx, 4, NULL, &o32, &s32, &err) == MXL_OK);
    REQUIRE(mxl_decoder_state_create_ex(&d, ctx, 4, NULL, &o8, &s8, &err) == MXL_OK);
    mxl_decoder_state_set_reference(s16, false);
    mxl_decoder_state_set_reference(s32, false);
    mxl_decoder_state_set_reference(s8, false);
    CHECK(mxl_decoder_state_kv_type(s16, false) == MXL_DECODER_KV_F16 && mxl_decoder_state_kv_type(s16, true) == MXL_DECODER_KV_F16);
    CHECK(mxl_decoder_state_kv_type(s32, true) == MXL_DECODER_KV_F32 && mxl_decoder_state_kv_type(s8, false) == MXL_DECODER_KV_I8);
    CHECK(mxl_decoder_state_kv_bytes(s32) == 2 * n * 4);
    CHECK(mxl_decoder_state_kv_bytes(s16) * 2 == mxl_decoder_state_kv_bytes(s32));
    int64_t group = d.hp.head_dim % 32 == 0 ? 32 : d.hp.head_dim;
    CHECK(mxl_decoder_state_kv_bytes(s8) == 2 * (n + n / (uint64_t)group * 4));

    /* AUTO on the reference path is f32: the same bits as an explicit f32 reference state */
    mxl_decoder_state *r_auto = NULL, *r32 = NULL;
    REQUIRE(mxl_decoder_state_create(&d, ctx, 4, NULL, &r_auto, &err) == MXL_OK);
    REQUIRE(mxl_decoder_state_create_ex(&d, ctx, 4, NULL, &o32, &r32, &err) == MXL_OK);
    mxl_decoder_state_set_reference(r_auto, true);
    mxl_decoder_state_set_reference(r32, true);
    CHECK(mxl_decoder_state_kv_type(r_auto, false) == MXL_DECODER_KV_F32 && mxl_decoder_state_kv_bytes(r_auto) == 2 * n * 4);
    int32_t ids[10] = {1, 17, 42, 5, 99, 3, 64, 8, 120, 7};
    float *a = mxl_malloc((size_t)V * sizeof(float)), *b = mxl_malloc((size_t)V * sizeof(float));
    REQUIRE(a && b);
    CHECK(mxl_decoder_forward(&d, r_auto, ids, 10, a, &err) == MXL_OK);
    CHECK(mxl_decoder_forward(&d, r32, ids, 10, b, &err) == MXL_OK);
    CHECK(memcmp(a, b, (size_t)V * sizeof(float)) == 0);

    /* f16 -> f32 -> f16 mid-sequence is exact: a fast AUTO state that visits the reference path
     * (no forward there) continues with the bits of one that never left */
    mxl_decoder_state *t1 = NULL, *t2 = NULL;
    REQUIRE(mxl_decoder_state_create(&d, ctx, 4, NULL, &t1, &err) == MXL_OK);
    REQUIRE(mxl_decoder_state_create(&d, ctx, 4, NULL, &t2, &err) == MXL_OK);
    mxl_decoder_state_set_reference(t1, false);
    mxl_decoder_state_set_reference(t2, false);
    CHECK(mxl_decoder_forward(&d, t1, ids, 6, a, &err) == MXL_OK);
    CHECK(mxl_decoder_forward(&d, t2, ids, 6, b, &err) == MXL_OK);
    mxl_decoder_state_set_reference(t1, true);
    CHECK(mxl_decoder_state_kv_type(t1, true) == MXL_DECODER_KV_F32);
    mxl_decoder_state_set_reference(t1, false);
    CHECK(mxl_decoder_state_kv_type(t1, true) == MXL_DECODER_KV_F16);
    CHECK(mxl_decoder_forward(&d, t1, ids + 6, 4, a, &err) == MXL_OK);
    CHECK(mxl_decoder_forward(&d, t2, ids + 6, 4, b, &err) == MXL_OK);
    CHECK(memcmp(a, b, (size_t)V * sizeof(float)) == 0);

    /* truncate on f16 and int8 caches: re-running the dropped suffix gives the same bits */
    mxl_decoder_state *tr[2] = {s16, s8};
    for (int i = 0; i < 2; i++) {
        CHECK(mxl_decoder_forward(&d, tr[i], ids, 10, a, &err) == MXL_OK);
        mxl_decoder_state_truncate(tr[i], 4);
        CHECK(mxl_decoder_forward(&d, tr[i], ids + 4, 6, b, &err) == MXL_OK);
        CHECK(memcmp(a, b, (size_t)V * sizeof(float)) == 0);
    }

    /* a batch of f16, int8 and f32 states equals each state's one-token forward */
    mxl_decoder_state *one[3] = {NULL, NULL, NULL}, *bat[3] = {NULL, NULL, NULL};
    const mxl_decoder_kv_opts kinds[3] = {{MXL_DECODER_KV_AUTO, MXL_DECODER_KV_AUTO, 0, 0, 0}, {MXL_DECODER_KV_I8, MXL_DECODER_KV_I8, 0, 0, 0}, {MXL_DECODER_KV_F32, MXL_DECODER_KV_I8, 0, 0, 0}};
    for (int i = 0; i < 3; i++) {
        REQUIRE(mxl_decoder_state_create_ex(&d, ctx, 4, NULL, &kinds[i], &one[i], &err) == MXL_OK);
        REQUIRE(mxl_decoder_state_create_ex(&d, ctx, 4, NULL, &kinds[i], &bat[i], &err) == MXL_OK);
        mxl_decoder_state_set_reference(one[i], false);
        mxl_decoder_state_set_reference(bat[i], false);
        CHECK(mxl_decoder_forward(&d, one[i], ids, 3 + i, a, &err) == MXL_OK);
        CHECK(mxl_decoder_forward(&d, bat[i], ids, 3 + i, a, &err) == MXL_OK);
    }
    float *lb = mxl_malloc(3 * (size_t)V * sizeof(float));
    REQUIRE(lb);
    int32_t next[3] = {11, 22, 33};
    for (int step = 0; step < 3; step++) {
        CHECK(mxl_decoder_forward_batch(&d, bat, next, 3, lb, &err) == MXL_OK);
        for (int i = 0; i < 3; i++) {
            CHECK(mxl_decoder_forward(&d, one[i], &next[i], 1, a, &err) == MXL_OK);
            CHECK(memcmp(a, lb + i * V, (size_t)V * sizeof(float)) == 0);
        }
    }
    for (int i = 0; i < 3; i++) mxl_decoder_state_destroy(one[i]), mxl_decoder_state_destroy(bat[i]);
    mxl_free(lb), mxl_free(a), mxl_free(b);
    mxl_decoder_state *st[] = {s16, s32, s8, r_auto, r32, t1, t2};
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) mxl_decoder_state_destroy(st[i]);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
}

/* ---- block formats: ggml's (q8_0, q4_0, q4_1, q5_0, q5_1) and TurboQuant's (turbo4, turbo3) ---- */

#define N_BLOCK_TYPES 7
static const mxl_decoder_kv_type k_block_types[N_BLOCK_TYPES] = {MXL_DECODER_KV_Q8_0, MXL_DECODER_KV_Q4_0, MXL_DECODER_KV_Q4_1,
                                                                 MXL_DECODER_KV_Q5_0, MXL_DECODER_KV_Q5_1, MXL_DECODER_KV_TURBO4,
                                                                 MXL_DECODER_KV_TURBO3};
static const mxl_dtype k_block_dtypes[N_BLOCK_TYPES] = {MXL_DTYPE_Q8_0, MXL_DTYPE_Q4_0, MXL_DTYPE_Q4_1, MXL_DTYPE_Q5_0,
                                                        MXL_DTYPE_Q5_1, MXL_DTYPE_TURBO4, MXL_DTYPE_TURBO3};

/* The reference of a block-format cache: an f32 cache whose appended rows are the dequantized
 * blocks of what they would be stored as. A test backend (the host's ops, but buffer_copy into
 * the f32 pool's K / V storage - which is how the decoder appends an f32 row - stores
 * dequantize(quantize(row)) with the bit-exact codecs of kv_quant.h instead of the row; for
 * TurboQuant, each chunk of the row rotated (kv_turbo.h), round-tripped, and rotated back). */
static mxl_backend_ops g_rt_ops;
static mxl_backend g_rt_be;
static struct {
    const uint8_t *lo[2], *hi[2];
    mxl_dtype t;
    int64_t chunk; /* TurboQuant's rotation chunk: the largest power of two <= 256 dividing head_dim */
    int64_t rows;  /* rows round-tripped (a check that the hook ran) */
} g_rt;

static void rt_buffer_copy(const mxl_backend *be, void *dst, const void *src, size_t bytes) {
    const uint8_t *d8 = dst;
    for (int i = 0; i < 2; i++)
        if (d8 >= g_rt.lo[i] && d8 < g_rt.hi[i]) {
            const int64_t n = (int64_t)(bytes / 4);
            uint8_t blocks[4096];
            MXL_ASSERT(n % 32 == 0 && (size_t)mxl_kv_offset_bytes(g_rt.t, n) <= sizeof blocks);
            if (g_rt.t == MXL_DTYPE_TURBO4 || g_rt.t == MXL_DTYPE_TURBO3) {
                float r[1024];
                MXL_ASSERT(n <= 1024 && n % g_rt.chunk == 0);
                memcpy(r, src, bytes);
                mxl_kv_rotate_ref(r, n, g_rt.chunk, false);
                mxl_kv_quantize_blocks(g_rt.t, r, n, blocks);
                mxl_kv_dequantize_blocks(g_rt.t, blocks, n, dst);
                mxl_kv_rotate_ref(dst, n, g_rt.chunk, true);
                g_rt.rows++;
                return;
            }
            mxl_kv_quantize_blocks(g_rt.t, src, n, blocks);
            mxl_kv_dequantize_blocks(g_rt.t, blocks, n, dst);
            g_rt.rows++;
            return;
        }
    mxl_backend_host()->ops->buffer_copy(be, dst, src, bytes);
}

/* An f32 state whose cache holds the round-tripped rows of type t (fast path). */
static mxl_decoder_state *rt_state(mxl_decoder *d, mxl_dtype t, int64_t ctx) {
    const mxl_backend *orig = d->be;
    g_rt_ops = *orig->ops;
    g_rt_ops.buffer_copy = rt_buffer_copy;
    g_rt_be = *orig;
    g_rt_be.ops = &g_rt_ops;
    d->be = &g_rt_be; /* the state keeps it as its backend (and its pool's) */
    const mxl_decoder_kv_opts o = {MXL_DECODER_KV_F32, MXL_DECODER_KV_F32, 0, 0, 0};
    mxl_decoder_state *s = NULL;
    mxl_error err;
    mxl_status st = mxl_decoder_state_create_ex(d, ctx, 4, NULL, &o, &s, &err);
    d->be = orig;
    if (st) return NULL;
    mxl_decoder_state_set_reference(s, false);
    mxl_kv_pool *kvp = mxl_decoder_state_kv_pool(s);
    const mxl_kv_pool_cfg *c = mxl_kv_pool_config(kvp);
    const size_t bytes = (size_t)c->n_blocks * (size_t)mxl_kv_pool_block_stride(kvp) * 4;
    g_rt.lo[0] = mxl_kv_pool_k(kvp), g_rt.hi[0] = g_rt.lo[0] + bytes;
    g_rt.lo[1] = mxl_kv_pool_v(kvp), g_rt.hi[1] = g_rt.lo[1] + bytes;
    g_rt.t = t;
    g_rt.chunk = 256;
    while (d->hp.head_dim % g_rt.chunk) g_rt.chunk /= 2;
    g_rt.rows = 0;
    return s;
}

/* Decoder logits with each block-format cache (fast path, one token per call) against the f32
 * cache holding the dequantized blocks (rt_state): the two differ only in how attention reads
 * the same values (block kernels vs f32 dots, grouped softmax vs the plain one), so the logits
 * agree within accumulated float rounding: bound 1e-4 on the dense fixtures (measured at most
 * 1.9e-6). With MLX weights the fast path quantizes each activation row to int8, where a
 * rounding-level difference can move a code by one step (1/127 of the row's largest value):
 * bound 2e-2 there (measured at most 2.1e-3). A wrong byte layout, scale or code moves the
 * logits by O(0.1..1) (the printed distances from transformers' logits, which the quantization
 * error of the q4 / q5 caches sets). Models whose heads are not a multiple of 32 refuse the
 * block types by name. */
#define BLOCK_REF_TOL 1e-4
#define BLOCK_REF_QUANT_TOL 2e-2
TEST(decoder_kv_block_types_match_dequantized_reference) {
    json_t *fx = mxl_test_decoder_cases();
    REQUIRE(fx);
    json_t *tokens = json_object_get(fx, "tokens");
    int32_t ids[64];
    int64_t n = (int64_t)json_array_size(tokens);
    REQUIRE(n > 0 && n <= 64);
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(tokens, (size_t)i));
    /* qwen3: QK-norm, 2 heads per KV head; gemma: 4 heads on one KV head; qwen3_mlx_q4: MLX weights */
    const char *names[] = {"qwen3", "gemma", "qwen3_mlx_q4"};
    for (size_t ni = 0; ni < sizeof names / sizeof names[0]; ni++) {
        json_t *c = NULL, *ci;
        size_t k;
        json_array_foreach(json_object_get(fx, "cases"), k, ci) if (!strcmp(json_string_value(json_object_get(ci, "name")), names[ni])) c = ci;
        REQUIRE(c);
        mxl_checkpoint *ck = NULL;
        mxl_decoder d;
        REQUIRE(load_fixture(names[ni], &ck, &d));
        REQUIRE(mxl_decoder_kv_group(&d.hp) == 32);
        const bool quant = d.tok_embd.kind == MXL_W_MLX || d.layers[0].w_down.kind == MXL_W_MLX;
        const int64_t V = d.hp.vocab;
        float *a = mxl_malloc((size_t)V * 4), *b = mxl_malloc((size_t)V * 4);
        REQUIRE(a && b);
        for (int f = 0; f < N_BLOCK_TYPES; f++) {
            const mxl_decoder_kv_opts o = {k_block_types[f], k_block_types[f], 0, 0, 0};
            mxl_decoder_state *sa = NULL, *sb = rt_state(&d, k_block_dtypes[f], 64);
            mxl_error err;
            REQUIRE(sb);
            REQUIRE(mxl_decoder_state_create_ex(&d, 64, 4, NULL, &o, &sa, &err) == MXL_OK);
            mxl_decoder_state_set_reference(sa, false);
            CHECK(mxl_decoder_state_kv_type(sa, false) == k_block_types[f] && mxl_decoder_state_kv_type(sa, true) == k_block_types[f]);
            double worst = 0;
            for (int64_t p = 0; p < n; p++) {
                REQUIRE(mxl_decoder_forward(&d, sa, &ids[p], 1, a, &err) == MXL_OK);
                REQUIRE(mxl_decoder_forward(&d, sb, &ids[p], 1, b, &err) == MXL_OK);
                for (int64_t i = 0; i < V; i++) {
                    double df = fabs((double)a[i] - b[i]);
                    if (!(df <= worst)) worst = df;
                }
            }
            CHECK(g_rt.rows == n * d.hp.n_layers * 2); /* every K and V row went through the round trip */
            mxl_decoder_state_destroy(sa);
            mxl_decoder_state_destroy(sb);
            mxl_threadpool *pool = NULL;
            REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
            double e_hf = run_decode(&d, c, ids, n, &o, pool, a);
            mxl_threadpool_destroy(pool);
            fprintf(stderr, "  %-14s %s KV: vs the dequantized f32 cache %.2e, vs transformers %.2e\n", names[ni],
                    mxl_decoder_kv_type_name(k_block_types[f]), worst, e_hf);
            CHECK(worst <= (quant ? BLOCK_REF_QUANT_TOL : BLOCK_REF_TOL));
        }
        mxl_free(a), mxl_free(b);
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
    }
    /* head_dim 16: refused by name, state and pool configuration alike */
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    REQUIRE(load_fixture("llama", &ck, &d));
    for (int f = 0; f < N_BLOCK_TYPES; f++) {
        const mxl_decoder_kv_opts o = {MXL_DECODER_KV_F16, k_block_types[f], 0, 0, 0};
        mxl_decoder_state *s = NULL;
        CHECK(mxl_decoder_state_create_ex(&d, 64, 4, NULL, &o, &s, &err) == MXL_ERR_UNSUPPORTED && !s);
        char want[128];
        snprintf(want, sizeof want, "cache type %s needs head_dim a multiple of 32, this model has 16", mxl_decoder_kv_type_name(k_block_types[f]));
        CHECK_EQ_STR(err.msg, want);
        mxl_kv_pool_cfg pc;
        CHECK(mxl_decoder_kv_pool_cfg(&d, &o, false, 4, &pc, &err) == MXL_ERR_UNSUPPORTED);
    }
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
    json_decref(fx);
}

/* TurboQuant's fp16 boundary V layers: with every layer a boundary (v_edge past half the layers,
 * clamped) a turbo4 V cache stores the same values as an f16 V cache, so the logits are the same
 * bits as turbo4 K + f16 V; without boundary layers they differ. (The fixture has two layers;
 * partial boundaries: the pool's region test and the SmolLM2 KL test, 30 layers.) */
TEST(decoder_kv_turbo_boundary_layers) {
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    REQUIRE(load_fixture("qwen3", &ck, &d));
    const int64_t V = d.hp.vocab, ctx = 32, L = d.hp.n_layers, row = d.hp.n_kv_heads * d.hp.head_dim;
    REQUIRE(L % 2 == 0);
    int32_t ids[6] = {1, 17, 42, 5, 99, 3};
    float *a = mxl_malloc((size_t)V * 4), *b = mxl_malloc((size_t)V * 4), *e = mxl_malloc((size_t)V * 4);
    REQUIRE(a && b && e);
    const mxl_decoder_kv_opts all = {MXL_DECODER_KV_TURBO4, MXL_DECODER_KV_TURBO4, 1000, 0, 0},
                              f16v = {MXL_DECODER_KV_TURBO4, MXL_DECODER_KV_F16, 0, 0, 0},
                              none = {MXL_DECODER_KV_TURBO4, MXL_DECODER_KV_TURBO4, 0, 0, 0};
    const mxl_decoder_kv_opts *os[3] = {&all, &f16v, &none};
    float *out[3] = {a, b, e};
    for (int i = 0; i < 3; i++) {
        mxl_decoder_state *s = NULL;
        REQUIRE(mxl_decoder_state_create_ex(&d, ctx, 4, NULL, os[i], &s, &err) == MXL_OK);
        mxl_decoder_state_set_reference(s, false);
        const uint64_t per_layer = (uint64_t)ctx * (uint64_t)row, turbo = per_layer / 32 * 18, f16 = per_layer * 2;
        const int64_t n_f16 = i == 2 ? 0 : L;
        CHECK(mxl_decoder_state_kv_bytes(s) == (uint64_t)L * turbo + (uint64_t)(L - n_f16) * turbo + (uint64_t)n_f16 * f16);
        CHECK(mxl_decoder_forward(&d, s, ids, 6, out[i], &err) == MXL_OK);
        mxl_decoder_state_destroy(s);
    }
    CHECK(memcmp(a, b, (size_t)V * 4) == 0);
    CHECK(memcmp(e, a, (size_t)V * 4) != 0 && memcmp(e, b, (size_t)V * 4) != 0);
    /* --kv-skip-last-layer past every layer: a quantized cache that keeps all of them fp16 is the
     * fp16 cache, bit for bit; the int8 scale group is the option's (16 here, 48 refused) */
    const mxl_decoder_kv_opts q8_all = {MXL_DECODER_KV_Q8_0, MXL_DECODER_KV_TURBO4, 0, 1000, 0}, f16 = {MXL_DECODER_KV_F16, MXL_DECODER_KV_F16, 0, 0, 0},
                              g16 = {MXL_DECODER_KV_I8, MXL_DECODER_KV_I8, 0, 0, 16}, g48 = {MXL_DECODER_KV_I8, MXL_DECODER_KV_I8, 0, 0, 48};
    const mxl_decoder_kv_opts *more[3] = {&q8_all, &f16, &g16};
    for (int i = 0; i < 3; i++) {
        mxl_decoder_state *s = NULL;
        REQUIRE(mxl_decoder_state_create_ex(&d, ctx, 4, NULL, more[i], &s, &err) == MXL_OK);
        mxl_decoder_state_set_reference(s, false);
        if (i == 2) CHECK(mxl_decoder_state_kv_bytes(s) == (uint64_t)L * 2 * (uint64_t)ctx * ((uint64_t)row + (uint64_t)row / 16 * 4));
        CHECK(mxl_decoder_forward(&d, s, ids, 6, out[i], &err) == MXL_OK);
        mxl_decoder_state_destroy(s);
    }
    CHECK(memcmp(a, b, (size_t)V * 4) == 0);
    mxl_decoder_state *bad = NULL;
    CHECK(mxl_decoder_state_create_ex(&d, ctx, 4, NULL, &g48, &bad, &err) == MXL_ERR_UNSUPPORTED && !bad);
    CHECK(strstr(err.msg, "an int8 KV group of 48 does not divide") != NULL);
    mxl_kv_pool_cfg pc;
    REQUIRE(mxl_decoder_kv_pool_cfg(&d, &all, false, 4, &pc, &err) == MXL_OK);
    CHECK(pc.v_edge == L / 2 && pc.v_type == MXL_DTYPE_TURBO4);
    REQUIRE(mxl_decoder_kv_pool_cfg(&d, &f16v, false, 4, &pc, &err) == MXL_OK);
    CHECK(pc.v_edge == 0); /* (only a TurboQuant V has boundary layers) */
    mxl_free(a), mxl_free(b), mxl_free(e);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
}

/* Block-format caches keep the cache invariants: bytes as the format says, truncate and re-run
 * gives the same bits, a batch of mixed-type states equals each state's one-token forward. */
TEST(decoder_kv_block_types_bytes_truncate_batch) {
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    REQUIRE(load_fixture("qwen3", &ck, &d));
    const int64_t V = d.hp.vocab, ctx = 32;
    const uint64_t n = (uint64_t)(d.hp.n_layers * ctx * d.hp.n_kv_heads * d.hp.head_dim);
    const uint64_t per32[N_BLOCK_TYPES] = {34, 18, 20, 22, 24, 18, 14};
    int32_t ids[10] = {1, 17, 42, 5, 99, 3, 64, 8, 120, 7};
    float *a = mxl_malloc((size_t)V * 4), *b = mxl_malloc((size_t)V * 4), *lb = mxl_malloc(3 * (size_t)V * 4);
    REQUIRE(a && b && lb);
    for (int f = 0; f < N_BLOCK_TYPES; f++) {
        const mxl_decoder_kv_opts o = {k_block_types[f], k_block_types[f], 0, 0, 0}, mix = {k_block_types[f], MXL_DECODER_KV_F16, 0, 0, 0};
        mxl_decoder_state *s = NULL, *m = NULL;
        REQUIRE(mxl_decoder_state_create_ex(&d, ctx, 4, NULL, &o, &s, &err) == MXL_OK);
        REQUIRE(mxl_decoder_state_create_ex(&d, ctx, 4, NULL, &mix, &m, &err) == MXL_OK);
        mxl_decoder_state_set_reference(s, false);
        mxl_decoder_state_set_reference(m, false);
        CHECK(mxl_decoder_state_kv_bytes(s) == 2 * (n / 32 * per32[f]));
        CHECK(mxl_decoder_state_kv_bytes(m) == n / 32 * per32[f] + n * 2);
        /* truncate: re-running the dropped suffix gives the same bits */
        CHECK(mxl_decoder_forward(&d, s, ids, 10, a, &err) == MXL_OK);
        mxl_decoder_state_truncate(s, 4);
        CHECK(mxl_decoder_forward(&d, s, ids + 4, 6, b, &err) == MXL_OK);
        CHECK(memcmp(a, b, (size_t)V * 4) == 0);
        /* the reference path keeps an explicit type (its cache is not re-stored) */
        mxl_decoder_state_set_reference(s, true);
        CHECK(mxl_decoder_state_kv_type(s, false) == k_block_types[f]);
        mxl_decoder_state_set_reference(s, false);
        mxl_decoder_state_destroy(s);
        mxl_decoder_state_destroy(m);
        /* a batch of this type, f16 and the mix equals each state's one-token forward */
        const mxl_decoder_kv_opts kinds[3] = {o, {MXL_DECODER_KV_AUTO, MXL_DECODER_KV_AUTO, 0, 0, 0}, mix};
        mxl_decoder_state *one[3], *bat[3];
        for (int i = 0; i < 3; i++) {
            REQUIRE(mxl_decoder_state_create_ex(&d, ctx, 4, NULL, &kinds[i], &one[i], &err) == MXL_OK);
            REQUIRE(mxl_decoder_state_create_ex(&d, ctx, 4, NULL, &kinds[i], &bat[i], &err) == MXL_OK);
            mxl_decoder_state_set_reference(one[i], false);
            mxl_decoder_state_set_reference(bat[i], false);
            CHECK(mxl_decoder_forward(&d, one[i], ids, 3 + i, a, &err) == MXL_OK);
            CHECK(mxl_decoder_forward(&d, bat[i], ids, 3 + i, a, &err) == MXL_OK);
        }
        int32_t next[3] = {11, 22, 33};
        for (int step = 0; step < 3; step++) {
            CHECK(mxl_decoder_forward_batch(&d, bat, next, 3, lb, &err) == MXL_OK);
            for (int i = 0; i < 3; i++) {
                CHECK(mxl_decoder_forward(&d, one[i], &next[i], 1, a, &err) == MXL_OK);
                CHECK(memcmp(a, lb + i * V, (size_t)V * 4) == 0);
            }
        }
        for (int i = 0; i < 3; i++) mxl_decoder_state_destroy(one[i]), mxl_decoder_state_destroy(bat[i]);
    }
    mxl_free(a), mxl_free(b), mxl_free(lb);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
}

/* ---- the real SmolLM2 (tests/fixtures/generation/real_greedy.json, see test_decoder_real.c) ---- */

typedef struct real_stats {
    int exact8;        /* cases whose first 8 greedy tokens match transformers */
    int steps_matched; /* greedy tokens matched over all cases (up to 64 each) */
    double max_top10;  /* first-step top-10 logits, max |diff| */
} real_stats;

/* Greedy decoding of every case with KV types `o` on the reference (reference matmuls: only the
 * KV storage differs from test_decoder_real.c) or fast path. */
static void run_smollm2(const mxl_decoder_kv_opts *o, bool reference, size_t max_steps, real_stats *rs, int *mxl_test_failed_) {
    char path[2048];
    memset(rs, 0, sizeof *rs);
    json_t *fx = mxl_test_load_json("tests/fixtures/generation/real_greedy.json");
    REQUIRE(fx);
    json_t *m = json_array_get(json_object_get(fx, "models"), 0);
    REQUIRE(m && strcmp(json_string_value(json_object_get(m, "id")), "smollm2") == 0);
    snprintf(path, sizeof path, "%s/%s", json_string_value(json_object_get(m, "repo")), json_string_value(json_object_get(m, "file")));
    snprintf(path, sizeof path, "%s", mxl_test_model_path(path));
    mxl_checkpoint *ck = NULL;
    mxl_error err;
    if (mxl_checkpoint_open(path, &ck, &err) != MXL_OK) {
        fprintf(stderr, "  %s (run scripts/fetch-models.sh)\n", err.msg);
        json_decref(fx);
        REQUIRE(0);
    }
    mxl_decoder d;
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_decoder_load(ck, &d, &err) == MXL_OK);
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    float *logits = mxl_malloc((size_t)d.hp.vocab * sizeof(float));
    REQUIRE(logits);
    json_t *c;
    size_t i;
    json_array_foreach(json_object_get(m, "cases"), i, c) {
        mxl_decoder_state *s = NULL;
        REQUIRE(mxl_decoder_state_create_ex(&d, 256, 64, pool, o, &s, &err) == MXL_OK);
        mxl_decoder_state_set_reference(s, reference);
        json_t *in = json_object_get(c, "input_ids"), *want = json_object_get(c, "output_ids");
        int32_t toks[256];
        size_t n_in = json_array_size(in);
        REQUIRE(n_in < 200);
        for (size_t k = 0; k < n_in; k++) toks[k] = (int32_t)json_integer_value(json_array_get(in, k));
        mxl_status st = mxl_decoder_forward(&d, s, toks, (int64_t)n_in, logits, &err);
        CHECK(st == MXL_OK);
        json_t *tid = json_object_get(c, "first_top10_ids"), *tlg = json_object_get(c, "first_top10_logits");
        for (size_t k = 0; k < json_array_size(tid); k++) {
            double diff = fabs(json_real_value(json_array_get(tlg, k)) - logits[json_integer_value(json_array_get(tid, k))]);
            if (!(diff <= rs->max_top10)) rs->max_top10 = diff;
        }
        size_t step;
        for (step = 0; step < json_array_size(want) && step < max_steps && st == MXL_OK; step++) {
            for (int e = 0; e < ck->config.n_eos; e++) /* min_new_tokens: EOS suppressed */
                if (ck->config.eos_token_ids[e] >= 0 && ck->config.eos_token_ids[e] < d.hp.vocab)
                    logits[ck->config.eos_token_ids[e]] = -INFINITY;
            int32_t got = (int32_t)mxl_cpu_argmax(logits, d.hp.vocab);
            if (got != (int32_t)json_integer_value(json_array_get(want, step))) break;
            st = mxl_decoder_forward(&d, s, &got, 1, logits, &err);
        }
        if (step >= 8) rs->exact8++;
        rs->steps_matched += (int)step;
        mxl_decoder_state_destroy(s);
    }
    mxl_free(logits);
    mxl_threadpool_destroy(pool);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
    json_decref(fx);
}

/* Reference matmuls with f16 KV: first 8 greedy tokens of every prompt as transformers, top-10
 * first-step logits within 2e-2 (measured 0.0105; 1e-4 with f32 KV). Measured once over all 64
 * tokens: f16 KV 320/320; int8 KV 135/320 (all 5 first-8s, top-10 |diff| 0.31). The fast path
 * (q8 activations) does not follow transformers that far with any cache (64-token greedy matches:
 * f32 KV 25/320, f16 51/320, int8 52/320), so it is not compared here. */
TEST(slow_decoder_kv_smollm2_f16_matches_transformers) {
    const mxl_decoder_kv_opts f16 = {MXL_DECODER_KV_F16, MXL_DECODER_KV_F16, 0, 0, 0};
    real_stats r16;
    run_smollm2(&f16, true, 8, &r16, mxl_test_failed_);
    fprintf(stderr, "  smollm2 reference matmuls, f16 KV: %d/5 cases match 8 tokens, top-10 |diff| %.4f\n", r16.exact8, r16.max_top10);
    CHECK_EQ_INT(r16.exact8, 5);
    CHECK(r16.max_top10 <= 2e-2);
}

/* ---- the real SmolLM2 with the block formats and int8 (slow_: the release step) ---- */

typedef struct smol {
    mxl_checkpoint *ck;
    mxl_decoder d;
    mxl_threadpool *pool;
    json_t *fx;
} smol;

static bool smol_open(smol *m) {
    char path[2048];
    mxl_error err;
    memset(m, 0, sizeof *m);
    m->fx = mxl_test_load_json("tests/fixtures/generation/real_greedy.json");
    if (!m->fx) return false;
    json_t *md = json_array_get(json_object_get(m->fx, "models"), 0);
    snprintf(path, sizeof path, "%s/%s", json_string_value(json_object_get(md, "repo")), json_string_value(json_object_get(md, "file")));
    snprintf(path, sizeof path, "%s", mxl_test_model_path(path));
    if (mxl_checkpoint_open(path, &m->ck, &err) != MXL_OK) {
        fprintf(stderr, "  %s (run scripts/fetch-models.sh)\n", err.msg);
        return false;
    }
    return mxl_decoder_load(m->ck, &m->d, &err) == MXL_OK && mxl_threadpool_create(2, &m->pool, &err) == MXL_OK;
}

static void smol_close(smol *m) {
    if (m->pool) mxl_threadpool_destroy(m->pool);
    if (m->ck) mxl_decoder_free(&m->d), mxl_checkpoint_close(m->ck);
    json_decref(m->fx);
}

/* Greedy tokens (EOS suppressed, as in run_smollm2) of case c on the fast path with KV types o. */
static int smol_greedy(smol *m, json_t *c, const mxl_decoder_kv_opts *o, int n_steps, int32_t *out, float *hist) {
    mxl_error err;
    mxl_decoder_state *s = NULL;
    if (mxl_decoder_state_create_ex(&m->d, 512, 64, m->pool, o, &s, &err) != MXL_OK) return 0;
    mxl_decoder_state_set_reference(s, false);
    json_t *in = json_object_get(c, "input_ids");
    int32_t toks[256];
    size_t n_in = json_array_size(in);
    if (n_in >= 256) return 0;
    for (size_t k = 0; k < n_in; k++) toks[k] = (int32_t)json_integer_value(json_array_get(in, k));
    float *logits = mxl_malloc((size_t)m->d.hp.vocab * sizeof(float));
    int n = 0;
    if (logits && mxl_decoder_forward(&m->d, s, toks, (int64_t)n_in, logits, &err) == MXL_OK)
        for (; n < n_steps; n++) {
            for (int e = 0; e < m->ck->config.n_eos; e++)
                if (m->ck->config.eos_token_ids[e] >= 0 && m->ck->config.eos_token_ids[e] < m->d.hp.vocab)
                    logits[m->ck->config.eos_token_ids[e]] = -INFINITY;
            out[n] = (int32_t)mxl_cpu_argmax(logits, m->d.hp.vocab);
            if (hist) memcpy(hist + (size_t)n * (size_t)m->d.hp.vocab, logits, (size_t)m->d.hp.vocab * sizeof(float));
            if (mxl_decoder_forward(&m->d, s, &out[n], 1, logits, &err) != MXL_OK) break;
        }
    mxl_free(logits);
    mxl_decoder_state_destroy(s);
    return n;
}

/* log-softmax of x[n] in place (double sums) */
static void log_softmax(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - mx);
    const double l = mx + log(s);
    for (int64_t i = 0; i < n; i++) x[i] = (float)((double)x[i] - l);
}

/* The fast path (the engine's default: q8 activations), SmolLM2 Q4_1:
 *  - greedy, 64 tokens of each of the 5 prompts of real_greedy.json with f16, q8_0 and int8
 *    caches: how many prompts keep f16's 64 tokens is printed. It is not asserted: these prompts
 *    reach near ties of f16's logits within 64 tokens (its top token leads by 0.014 .. 0.24 at
 *    the steps where q8_0 / int8 part from it), and an 8-bit cache moves that lead by up to 0.31
 *    while both run the same tokens (f32 keeps f16's 64 tokens on all 5; measured q8_0 0/5,
 *    int8 1/5; on the reference path q8_0 1/5, int8 0/5). Asserted instead: the 8-bit caches move
 *    f16's top-two lead by less than 0.5 on the shared steps, and they part from f16 only where
 *    that lead is below 0.5 - greedy output equal except after near ties.
 *  - the mean KL divergence KL(p_f16 || p_mode) of the next-token distribution at each of the
 *    2027 positions of tests/fixtures/kv_quant/kl_text.txt (an original English text), per mode,
 *    printed (measured: q8_0 0.00041, int8 0.00040, q5_1 0.0138, q5_0 0.0271, q4_1 0.0571, q4_0
 *    0.1157 nats; turbo4 0.0444, turbo3 0.1888, turbo4 with 2 fp16 boundary V layers 0.0416,
 *    fp16+turbo4 0.0045, fp16+turbo3 0.0198). Bounds: q8_0 and int8 below 0.01 nats, the 5-bit
 *    formats below 0.05, the 4-bit ones below 0.2, and the orderings the formats' step sizes
 *    imply: q8_0 below every 4/5-bit format, q5_0 below q4_0, q5_1 below q4_1; TurboQuant's
 *    bounds where they are checked below. */
TEST(slow_decoder_kv_smollm2_block_types_greedy_and_kl) {
    smol m;
    REQUIRE(smol_open(&m));
    const int64_t V = m.d.hp.vocab;
    /* greedy */
    enum { STEPS = 64 };
    const mxl_decoder_kv_opts f16 = {MXL_DECODER_KV_F16, MXL_DECODER_KV_F16, 0, 0, 0}, q8 = {MXL_DECODER_KV_Q8_0, MXL_DECODER_KV_Q8_0, 0, 0, 0},
                              i8 = {MXL_DECODER_KV_I8, MXL_DECODER_KV_I8, 0, 0, 0};
    int same_q8 = 0, same_i8 = 0, n_cases = 0;
    double max_moved = 0, worst_lead_at_split = 0;
    float *ha = mxl_malloc((size_t)STEPS * (size_t)V * 4), *hb = mxl_malloc((size_t)STEPS * (size_t)V * 4),
          *he = mxl_malloc((size_t)STEPS * (size_t)V * 4);
    REQUIRE(ha && hb && he);
    json_t *c;
    size_t ci;
    json_array_foreach(json_object_get(json_array_get(json_object_get(m.fx, "models"), 0), "cases"), ci, c) {
        int32_t a[STEPS], b[STEPS], e[STEPS];
        REQUIRE(smol_greedy(&m, c, &f16, STEPS, a, ha) == STEPS && smol_greedy(&m, c, &q8, STEPS, b, hb) == STEPS &&
                smol_greedy(&m, c, &i8, STEPS, e, he) == STEPS);
        int fb = 0, fe = 0;
        while (fb < STEPS && a[fb] == b[fb]) fb++;
        while (fe < STEPS && a[fe] == e[fe]) fe++;
        /* f16's lead of its top token over the runner-up at each step, and how much the other
         * cache moved that lead while both ran the same tokens */
        for (int k = 0; k < 2; k++) {
            const float *h = k ? he : hb;
            const int f = k ? fe : fb;
            for (int t = 0; t < STEPS && t <= f; t++) {
                const float *l16 = ha + (size_t)t * (size_t)V, *lq = h + (size_t)t * (size_t)V;
                int64_t r2 = -1;
                for (int64_t v = 0; v < V; v++)
                    if (v != a[t] && (r2 < 0 || l16[v] > l16[r2])) r2 = v;
                const double lead = (double)l16[a[t]] - l16[r2], moved = fabs(((double)lq[a[t]] - lq[r2]) - lead);
                if (t < f && !(moved <= max_moved)) max_moved = moved;
                if (t == f) {
                    fprintf(stderr, "  prompt %zu: %s differs from f16 at token %d, where f16's lead is %.3f\n", ci, k ? "int8" : "q8_0", f, lead);
                    if (!(lead <= worst_lead_at_split)) worst_lead_at_split = lead;
                }
            }
        }
        same_q8 += fb == STEPS, same_i8 += fe == STEPS, n_cases++;
    }
    fprintf(stderr, "  greedy 64 tokens equal to the f16 cache's: q8_0 %d/%d prompts, int8 %d/%d\n", same_q8, n_cases, same_i8, n_cases);
    fprintf(stderr, "  over the shared steps the 8-bit caches moved f16's top-two lead by at most %.3f; they split from f16 where its lead was at most %.3f\n",
            max_moved, worst_lead_at_split);
    mxl_free(ha), mxl_free(hb), mxl_free(he);
    CHECK(n_cases == 5);
    CHECK(max_moved < 0.5);
    CHECK(worst_lead_at_split < 0.5);

    /* KL over the text, in chunks of 128 positions run through every cache side by side */
    char path[2048];
    snprintf(path, sizeof path, "%s/tests/fixtures/kv_quant/kl_text.txt", mxl_test_repo_root());
    size_t tl = 0;
    char *text = mxl_test_read_file(path, &tl);
    REQUIRE(text);
    mxl_tokenizer *tk = NULL;
    mxl_error err;
    mxl_token_ids ids = {0};
    REQUIRE(mxl_tokenizer_load(m.ck->path, &tk, &err) == MXL_OK);
    REQUIRE(mxl_tokenizer_encode(tk, text, tl, 0, &ids, &err) == MXL_OK);
    mxl_tokenizer_destroy(tk);
    mxl_free(text);
    fprintf(stderr, "  KL text: %zu tokens\n", ids.n);
    CHECK(ids.n >= 1800 && ids.n <= 2400);
    enum { NM = 12, CH = 128 };
    const mxl_decoder_kv_type modes[7] = {MXL_DECODER_KV_F16,  MXL_DECODER_KV_Q8_0, MXL_DECODER_KV_Q4_0, MXL_DECODER_KV_Q4_1,
                                          MXL_DECODER_KV_Q5_0, MXL_DECODER_KV_Q5_1, MXL_DECODER_KV_I8};
    /* [7..11]: turbo4, turbo3, turbo4 with the spec's 2 fp16 boundary V layers at each end,
     * fp16+turbo4 and fp16+turbo3 (keys fp16, values TurboQuant, 2 boundary layers) */
    const mxl_decoder_kv_opts turbo[5] = {{MXL_DECODER_KV_TURBO4, MXL_DECODER_KV_TURBO4, 0, 0, 0},
                                          {MXL_DECODER_KV_TURBO3, MXL_DECODER_KV_TURBO3, 0, 0, 0},
                                          {MXL_DECODER_KV_TURBO4, MXL_DECODER_KV_TURBO4, 2, 0, 0},
                                          {MXL_DECODER_KV_F16, MXL_DECODER_KV_TURBO4, 2, 0, 0},
                                          {MXL_DECODER_KV_F16, MXL_DECODER_KV_TURBO3, 2, 0, 0}};
    static const char *turbo_names[5] = {"turbo4", "turbo3", "turbo4 (2 fp16 boundary V layers)", "fp16+turbo4", "fp16+turbo3"};
    mxl_decoder_state *st[NM];
    for (int i = 0; i < NM; i++) {
        const mxl_decoder_kv_opts o = i < 7 ? (mxl_decoder_kv_opts){modes[i], modes[i], 0, 0, 0} : turbo[i - 7];
        REQUIRE(mxl_decoder_state_create_ex(&m.d, (int64_t)ids.n + 8, CH, m.pool, &o, &st[i], &err) == MXL_OK);
        mxl_decoder_state_set_reference(st[i], false);
    }
    float *ref = mxl_malloc((size_t)CH * (size_t)V * 4), *got = mxl_malloc((size_t)CH * (size_t)V * 4);
    REQUIRE(ref && got);
    double kl[NM] = {0};
    for (size_t p0 = 0; p0 < ids.n; p0 += CH) {
        const int64_t n = (int64_t)(ids.n - p0 < CH ? ids.n - p0 : CH);
        REQUIRE(mxl_decoder_forward_all(&m.d, st[0], ids.ids + p0, n, ref, &err) == MXL_OK);
        for (int64_t r = 0; r < n; r++) log_softmax(ref + r * V, V);
        for (int i = 1; i < NM; i++) {
            REQUIRE(mxl_decoder_forward_all(&m.d, st[i], ids.ids + p0, n, got, &err) == MXL_OK);
            for (int64_t r = 0; r < n; r++) {
                float *lq = got + r * V;
                const float *lp = ref + r * V;
                log_softmax(lq, V);
                double k = 0;
                for (int64_t v = 0; v < V; v++) k += exp((double)lp[v]) * ((double)lp[v] - lq[v]);
                kl[i] += k;
            }
        }
    }
    for (int i = 1; i < NM; i++) {
        kl[i] /= (double)ids.n;
        fprintf(stderr, "  mean KL(f16 || %s) over %zu positions: %.5f nats\n", i < 7 ? mxl_decoder_kv_type_name(modes[i]) : turbo_names[i - 7],
                ids.n, kl[i]);
    }
    /* kl[1] q8_0, [2] q4_0, [3] q4_1, [4] q5_0, [5] q5_1, [6] int8 */
    CHECK(kl[1] < 0.01 && kl[6] < 0.01);
    CHECK(kl[4] < 0.05 && kl[5] < 0.05);
    CHECK(kl[2] < 0.2 && kl[3] < 0.2);
    CHECK(kl[1] < kl[2] && kl[1] < kl[3] && kl[1] < kl[4] && kl[1] < kl[5]);
    CHECK(kl[4] < kl[2] && kl[5] < kl[3]);
    /* TurboQuant: turbo4 (4.5 bits a value, as q4_0) below both 4-bit ggml formats; turbo3 (3.5
     * bits) below 0.3; the boundary layers help; fp16 keys with TurboQuant values near 8-bit */
    CHECK(kl[7] < kl[2] && kl[7] < kl[3] && kl[8] < 0.3);
    CHECK(kl[9] <= kl[7]);
    CHECK(kl[10] < 0.01 && kl[11] < 0.05 && kl[10] < kl[11]);
    for (int i = 0; i < NM; i++) mxl_decoder_state_destroy(st[i]);
    mxl_free(ref), mxl_free(got);
    mxl_token_ids_free(&ids);
    smol_close(&m);
}
