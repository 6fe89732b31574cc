/* test_kernels_prims.c - primitives against independent double-precision formulas written here
 * (norms, activations, softmax, attention), structural properties (RoPE), a naive sort (top-k),
 * and the PyPI gguf package (embedding rows of the real SmolLM2 model, through the same fixture
 * as test_kernels_dequant.c). */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/activation.h"
#include "backends/cpu/attention.h"
#include "backends/cpu/embed_topk.h"
#include "backends/cpu/kv_quant.h"
#include "backends/cpu/lowrank.h"
#include "backends/cpu/norm.h"
#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/rope.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/softmax.h"
#include "core/alloc.h"
#include "io/gguf.h"
#include "test.h"

static uint32_t g_s = 99;
static float fr(void) {
    g_s = g_s * 1664525u + 1013904223u;
    return (float)(g_s >> 8) / 16777216.0f * 2.0f - 1.0f;
}
static int close_rel(double a, double b, double rel, double abs_tol) {
    return fabs(a - b) <= abs_tol + rel * fabs(b);
}

TEST(kernels_norms_match_double_formulas) {
    float x[301], w[301], b[301], y[301];
    for (int i = 0; i < 301; i++) x[i] = fr() * 3.0f, w[i] = fr(), b[i] = fr();
    for (int variant = 0; variant < 3; variant++) {
        mxl_cpu_rmsnorm(x, variant == 2 ? NULL : w, 301, 1e-6f, variant == 1, y);
        double ss = 0;
        for (int i = 0; i < 301; i++) ss += (double)x[i] * x[i];
        double r = 1.0 / sqrt(ss / 301 + 1e-6);
        for (int i = 0; i < 301; i++) {
            double g = variant == 2 ? 1.0 : variant == 1 ? 1.0 + w[i] : w[i];
            CHECK(close_rel(y[i], x[i] * r * g, 1e-5, 1e-7));
        }
    }
    for (int variant = 0; variant < 2; variant++) {
        mxl_cpu_layernorm(x, variant ? NULL : w, variant ? NULL : b, 301, 1e-5f, y);
        double m = 0, v = 0;
        for (int i = 0; i < 301; i++) m += x[i];
        m /= 301;
        for (int i = 0; i < 301; i++) v += (x[i] - m) * (x[i] - m);
        v /= 301;
        for (int i = 0; i < 301; i++) {
            double t = (x[i] - m) / sqrt(v + 1e-5);
            if (!variant) t = t * w[i] + b[i];
            CHECK(close_rel(y[i], t, 1e-5, 1e-6));
        }
    }
    /* in place */
    float z[301];
    memcpy(z, x, sizeof z);
    mxl_cpu_rmsnorm(z, w, 301, 1e-6f, 0, z);
    mxl_cpu_rmsnorm(x, w, 301, 1e-6f, 0, y);
    CHECK(memcmp(z, y, sizeof z) == 0);
}

/* the vector norms the CPU has (AVX2, AVX-512) against the references: the same float
 * arithmetic per element after double sums taken in another order, so at most a few ulps apart,
 * on lengths with and without tails; the AVX2 form bitwise the AVX-512 one */
TEST(kernels_norms_vector_match_reference) {
    if (mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX2) { /* only the references run on this CPU */
        CHECK(mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX2);
        return;
    }
    const bool v512 = mxl_cpu_isa_detect() >= MXL_CPU_ISA_AVX512VNNI;
    const int64_t lens[7] = {1, 7, 15, 16, 17, 301, 384};
    float x[384], w[384], b[384], y[384], y2[384], yr[384];
    for (int i = 0; i < 384; i++) x[i] = fr() * 3.0f + 0.5f, w[i] = fr(), b[i] = fr();
    for (int li = 0; li < 7; li++) {
        int64_t n = lens[li];
        for (int variant = 0; variant < 3; variant++) {
            mxl_cpu_rmsnorm_ref(x, variant == 2 ? NULL : w, n, 1e-6f, variant == 1, yr);
            mxl_cpu_rmsnorm_avx2(x, variant == 2 ? NULL : w, n, 1e-6f, variant == 1, y2);
            for (int64_t i = 0; i < n; i++) CHECK(close_rel(y2[i], yr[i], 4e-7, 1e-30));
            if (v512) {
                mxl_cpu_rmsnorm_avx512(x, variant == 2 ? NULL : w, n, 1e-6f, variant == 1, y);
                CHECK(memcmp(y, y2, (size_t)n * sizeof(float)) == 0);
            }
        }
        for (int variant = 0; variant < 2; variant++) {
            mxl_cpu_layernorm_ref(x, variant ? NULL : w, variant ? NULL : b, n, 1e-5f, yr);
            mxl_cpu_layernorm_avx2(x, variant ? NULL : w, variant ? NULL : b, n, 1e-5f, y2);
            for (int64_t i = 0; i < n; i++) CHECK(close_rel(y2[i], yr[i], 4e-7, 1e-6));
            if (v512) {
                mxl_cpu_layernorm_avx512(x, variant ? NULL : w, variant ? NULL : b, n, 1e-5f, y);
                CHECK(memcmp(y, y2, (size_t)n * sizeof(float)) == 0);
            }
        }
    }
}

/* the vector activations the CPU has (AVX2, AVX-512) against the libm references over [-30, 30]
 * (and a tail of 7), SwiGLU / GeGLU included: |vector - reference| <= 1e-6 * max(1, |reference|);
 * the AVX2 form bitwise the AVX-512 one */
TEST(kernels_activations_vector_match_reference) {
    if (mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX2) { /* only the references run on this CPU */
        CHECK(mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX2);
        return;
    }
    const bool v512 = mxl_cpu_isa_detect() >= MXL_CPU_ISA_AVX512VNNI;
    enum { N = 6007 };
    static float x[N], up[N], y[N], y2[N], yr[N];
    for (int i = 0; i < N; i++) x[i] = -30.0f + 60.0f * (float)i / (N - 1), up[i] = fr();
    const mxl_act acts[5] = {MXL_ACT_SILU, MXL_ACT_GELU_ERF, MXL_ACT_GELU_TANH, MXL_ACT_RELU2, MXL_ACT_RELU};
    for (int a = 0; a < 5; a++) {
        double worst = 0;
        mxl_cpu_act_ref(acts[a], x, N, yr);
        mxl_cpu_act_avx2(acts[a], x, N, y2);
        for (int i = 0; i < N; i++) worst = fmax(worst, fabs(y2[i] - yr[i]) / fmax(1.0, fabs(yr[i])));
        if (v512) {
            mxl_cpu_act_avx512(acts[a], x, N, y);
            CHECK(memcmp(y, y2, sizeof y) == 0);
        }
        mxl_cpu_glu_ref(acts[a], x, up, N, yr);
        mxl_cpu_glu_avx2(acts[a], x, up, N, y2);
        for (int i = 0; i < N; i++) worst = fmax(worst, fabs(y2[i] - yr[i]) / fmax(1.0, fabs(yr[i])));
        if (v512) {
            mxl_cpu_glu_avx512(acts[a], x, up, N, y);
            CHECK(memcmp(y, y2, sizeof y) == 0);
        }
        fprintf(stderr, "  activation %d: worst %.2e\n", a, worst);
        CHECK(worst <= 1e-6);
    }
}

TEST(kernels_activations_match_double_formulas) {
    for (int i = -400; i <= 400; i++) {
        double x = i / 40.0;
        float xf = (float)x;
        double silu = x / (1 + exp(-x));
        double gerf = 0.5 * x * (1 + erf(x / sqrt(2.0)));
        double gtanh = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        double r2 = x > 0 ? x * x : 0;
        CHECK(close_rel(mxl_cpu_act1(MXL_ACT_SILU, xf), silu, 2e-6, 1e-7));
        CHECK(close_rel(mxl_cpu_act1(MXL_ACT_GELU_ERF, xf), gerf, 2e-6, 1e-7));
        CHECK(close_rel(mxl_cpu_act1(MXL_ACT_GELU_TANH, xf), gtanh, 2e-6, 1e-6));
        CHECK(close_rel(mxl_cpu_act1(MXL_ACT_RELU2, xf), r2, 1e-6, 0));
    }
    float g[5] = {-2, -0.5f, 0, 0.5f, 2}, u[5] = {1, 2, 3, 4, 5}, o[5];
    mxl_cpu_glu(MXL_ACT_SILU, g, u, 5, o);
    for (int i = 0; i < 5; i++) CHECK(close_rel(o[i], g[i] / (1 + exp(-g[i])) * u[i], 2e-6, 1e-7));
    mxl_cpu_glu(MXL_ACT_GELU_TANH, g, u, 5, o);
    for (int i = 0; i < 5; i++)
        CHECK(close_rel(o[i], 0.5 * g[i] * (1 + tanh(sqrt(2 / M_PI) * (g[i] + 0.044715 * g[i] * g[i] * g[i]))) * u[i], 2e-6, 1e-6));
}

TEST(kernels_softmax_softcap_sinks_masks) {
    float x[7] = {1.0f, -2.0f, 30.0f, -INFINITY, 0.5f, 29.0f, -INFINITY};
    for (int mode = 0; mode < 3; mode++) {
        float y[7];
        memcpy(y, x, sizeof y);
        float cap = mode >= 1 ? 20.0f : 0.0f, sink = mode == 2 ? 31.0f : -INFINITY;
        mxl_cpu_softmax(y, 7, cap, sink);
        double z[7], m = -INFINITY, den = 0;
        for (int i = 0; i < 7; i++) {
            z[i] = x[i] == -INFINITY ? -INFINITY : (cap > 0 ? cap * tanh(x[i] / cap) : x[i]);
            if (z[i] > m) m = z[i];
        }
        if (sink > m) m = sink;
        for (int i = 0; i < 7; i++) den += z[i] == -INFINITY ? 0 : exp(z[i] - m);
        if (sink != -INFINITY) den += exp(sink - m);
        double total = 0;
        for (int i = 0; i < 7; i++) {
            double want = z[i] == -INFINITY ? 0 : exp(z[i] - m) / den;
            CHECK(close_rel(y[i], want, 1e-5, 1e-9));
            total += y[i];
        }
        CHECK(mode == 2 ? total < 0.9 : fabs(total - 1) < 1e-5);
    }
    float all_masked[3] = {-INFINITY, -INFINITY, -INFINITY};
    mxl_cpu_softmax(all_masked, 3, 0, -INFINITY);
    CHECK(all_masked[0] == 0 && all_masked[1] == 0 && all_masked[2] == 0);
}

static void rope_cfg_default(mxl_rope_cfg *c, int hd, int rot, mxl_rope_style st) {
    memset(c, 0, sizeof *c);
    c->head_dim = hd;
    c->rotary_dim = rot;
    c->theta = 10000.0;
    c->style = st;
}

TEST(kernels_rope_frequencies) {
    mxl_rope_cfg c;
    float f0[64], f1[64], af;
    rope_cfg_default(&c, 128, 128, MXL_ROPE_NEOX);
    c.theta = 500000.0;
    mxl_rope_freqs(&c, 10, f0, &af);
    for (int i = 0; i < 64; i++) CHECK(close_rel(f0[i], pow(500000.0, -2.0 * i / 128), 1e-6, 0));
    CHECK(af == 1.0f);
    /* linear: every frequency divided by the factor */
    c.scaling = MXL_ROPE_SCALING_LINEAR;
    c.factor = 4.0;
    mxl_rope_freqs(&c, 10, f1, &af);
    for (int i = 0; i < 64; i++) CHECK(close_rel(f1[i], f0[i] / 4.0, 1e-6, 0));
    /* llama3 (Llama 3.1 values): short wavelengths kept, long ones / factor, continuous blend */
    c.scaling = MXL_ROPE_SCALING_LLAMA3;
    c.factor = 8.0, c.low_freq_factor = 1.0, c.high_freq_factor = 4.0, c.original_max_pos = 8192;
    mxl_rope_freqs(&c, 10, f1, &af);
    int kept = 0, divided = 0, blended = 0;
    for (int i = 0; i < 64; i++) {
        double wl = 2 * M_PI / f0[i];
        if (wl < 8192 / 4.0) kept += f1[i] == f0[i];
        else if (wl > 8192 / 1.0) divided += close_rel(f1[i], f0[i] / 8.0, 1e-6, 0);
        else {
            /* HF: smooth = (orig/wavelen - low)/(high - low); (1-smooth)*f/factor + smooth*f */
            double sm = (8192 / wl - 1.0) / (4.0 - 1.0);
            blended += close_rel(f1[i], (1 - sm) * f0[i] / 8.0 + sm * f0[i], 1e-5, 0);
        }
    }
    CHECK(kept + divided + blended == 64 && kept > 0 && divided > 0 && blended > 0);
    /* dynamic NTK: unchanged within the original context, lower frequencies beyond it */
    c.scaling = MXL_ROPE_SCALING_DYNAMIC;
    c.factor = 2.0, c.original_max_pos = 4096;
    mxl_rope_freqs(&c, 4096, f1, &af);
    CHECK(memcmp(f0, f1, sizeof f0) == 0);
    mxl_rope_freqs(&c, 8192, f1, &af);
    double base = 500000.0 * pow(2.0 * 8192 / 4096 - 1.0, 128.0 / 126.0);
    for (int i = 0; i < 64; i++) CHECK(close_rel(f1[i], pow(base, -2.0 * i / 128), 1e-6, 0));
    /* YaRN: extrapolated (unchanged) for the fast dims, interpolated (/factor) for slow ones */
    c.scaling = MXL_ROPE_SCALING_YARN;
    c.theta = 10000.0;
    c.factor = 4.0, c.original_max_pos = 4096, c.beta_fast = 32, c.beta_slow = 1;
    mxl_rope_cfg d = c;
    d.scaling = MXL_ROPE_SCALING_NONE;
    mxl_rope_freqs(&d, 1, f0, &af);
    mxl_rope_freqs(&c, 1, f1, &af);
    double lo = floor(128 * log(4096 / (32 * 2 * M_PI)) / (2 * log(10000.0)));
    double hi = ceil(128 * log(4096 / (1 * 2 * M_PI)) / (2 * log(10000.0)));
    for (int i = 0; i < 64; i++) {
        if (i <= lo) CHECK(f1[i] == f0[i]);
        if (i >= hi) CHECK(close_rel(f1[i], f0[i] / 4.0, 1e-6, 0));
    }
    CHECK(close_rel(af, 0.1 * log(4.0) + 1.0, 1e-6, 0));
    c.mscale = 1.0, c.mscale_all_dim = 0.707;
    mxl_rope_freqs(&c, 1, f1, &af);
    CHECK(close_rel(af, (0.1 * log(4.0) + 1.0) / (0.1 * 0.707 * log(4.0) + 1.0), 1e-6, 0));
}

TEST(kernels_rope_rotation_properties) {
    mxl_rope_cfg c;
    rope_cfg_default(&c, 64, 64, MXL_ROPE_NEOX);
    float inv[32], af;
    mxl_rope_freqs(&c, 1, inv, &af);
    /* NEOX on x equals GPT-J on the interleaved permutation of x */
    float x[64], xi[64];
    for (int i = 0; i < 64; i++) x[i] = fr();
    for (int i = 0; i < 32; i++) xi[2 * i] = x[i], xi[2 * i + 1] = x[i + 32];
    mxl_rope_apply(&c, inv, 1.0f, x, 1, 37);
    mxl_rope_cfg g = c;
    g.style = MXL_ROPE_GPTJ;
    mxl_rope_apply(&g, inv, 1.0f, xi, 1, 37);
    for (int i = 0; i < 32; i++) CHECK(xi[2 * i] == x[i] && xi[2 * i + 1] == x[i + 32]);
    /* q.k depends on the position difference only; norms are preserved */
    float q[64], k[64];
    for (int i = 0; i < 64; i++) q[i] = fr(), k[i] = fr();
    double dots[2];
    for (int r = 0; r < 2; r++) {
        float qq[64], kk[64];
        memcpy(qq, q, sizeof q);
        memcpy(kk, k, sizeof k);
        int64_t base = r ? 1000 : 3;
        mxl_rope_apply(&c, inv, 1.0f, qq, 1, base + 7);
        mxl_rope_apply(&c, inv, 1.0f, kk, 1, base);
        double d = 0, nq = 0, nq0 = 0;
        for (int i = 0; i < 64; i++) d += (double)qq[i] * kk[i], nq += (double)qq[i] * qq[i], nq0 += (double)q[i] * q[i];
        dots[r] = d;
        CHECK(close_rel(nq, nq0, 1e-5, 0));
    }
    CHECK(close_rel(dots[0], dots[1], 1e-4, 1e-4));
    /* partial rotary: the tail passes through; two heads rotate independently */
    mxl_rope_cfg p;
    rope_cfg_default(&p, 64, 16, MXL_ROPE_NEOX);
    float invp[8];
    mxl_rope_freqs(&p, 1, invp, &af);
    float h2[128], orig[128];
    for (int i = 0; i < 128; i++) h2[i] = orig[i] = fr();
    mxl_rope_apply(&p, invp, 1.0f, h2, 2, 5);
    for (int h = 0; h < 2; h++) {
        for (int i = 16; i < 64; i++) CHECK(h2[h * 64 + i] == orig[h * 64 + i]);
        double a = cos(5.0 * invp[1]), s = sin(5.0 * invp[1]);
        CHECK(close_rel(h2[h * 64 + 1], orig[h * 64 + 1] * a - orig[h * 64 + 9] * s, 1e-5, 1e-6));
        CHECK(close_rel(h2[h * 64 + 9], orig[h * 64 + 9] * a + orig[h * 64 + 1] * s, 1e-5, 1e-6));
    }
}

/* naive attention in double for one (token, head) */
static void attn_naive(const mxl_attn_params *p, const float *q, int64_t t, int h, int64_t qpos,
                       const float *k, const float *v, int64_t n_kv, int64_t stride, double *out) {
    int hd = p->head_dim, kvh = h / (p->n_heads / p->n_kv_heads);
    double *s = mxl_malloc(sizeof(double) * (size_t)n_kv);
    double m = p->sinks ? p->sinks[h] : -INFINITY;
    for (int64_t j = 0; j < n_kv; j++) {
        /* (a window without causality is symmetric: |q - k| < window) */
        int vis = (!p->causal || j <= qpos) && (p->window <= 0 || (qpos - j < p->window && (p->causal || j - qpos < p->window)));
        if (!vis) {
            s[j] = -INFINITY;
            continue;
        }
        double d = 0;
        for (int i = 0; i < hd; i++) d += (double)q[(t * p->n_heads + h) * hd + i] * k[j * stride + kvh * hd + i];
        d *= p->scale;
        if (p->softcap > 0) d = p->softcap * tanh(d / p->softcap);
        s[j] = d;
        if (d > m) m = d;
    }
    double den = p->sinks ? exp(p->sinks[h] - m) : 0;
    for (int64_t j = 0; j < n_kv; j++) den += s[j] == -INFINITY ? 0 : exp(s[j] - m);
    for (int i = 0; i < hd; i++) out[i] = 0;
    for (int64_t j = 0; j < n_kv; j++) {
        if (s[j] == -INFINITY) continue;
        double w = exp(s[j] - m) / den;
        for (int i = 0; i < hd; i++) out[i] += w * v[j * stride + kvh * hd + i];
    }
    mxl_free(s);
}

TEST(kernels_attention_matches_naive) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, NULL) == MXL_OK);
    const int hds[3] = {64, 40, 256};
    for (int cfg = 0; cfg < 8; cfg++) {
        int hd = hds[cfg % 3];
        int n_heads = 8, n_kv_heads = cfg % 4 == 3 ? 8 : 2;
        int64_t n_kv = 23, stride = n_kv_heads * hd + 3; /* padded rows */
        int64_t n_q = cfg < 4 ? 1 : 5;
        float sinks[8];
        for (int h = 0; h < 8; h++) sinks[h] = fr() * 2;
        mxl_attn_params p = {n_heads, n_kv_heads, hd, 1.0f / sqrtf((float)hd),
                             cfg == 2 || cfg == 6 ? 5.0f : 0.0f, cfg == 1 || cfg == 5 ? sinks : NULL,
                             cfg >= 6 ? 4 : 0, cfg != 7, 0, 0, NULL};
        float *q = mxl_malloc(sizeof(float) * (size_t)(n_q * n_heads * hd));
        float *k = mxl_malloc(sizeof(float) * (size_t)(n_kv * stride));
        float *v = mxl_malloc(sizeof(float) * (size_t)(n_kv * stride));
        uint16_t *k16 = mxl_malloc(2 * (size_t)(n_kv * stride)), *v16 = mxl_malloc(2 * (size_t)(n_kv * stride));
        for (int64_t i = 0; i < n_q * n_heads * hd; i++) q[i] = fr() * 2;
        for (int64_t i = 0; i < n_kv * stride; i++) {
            k16[i] = mxl_f32_to_f16(fr() * 2), v16[i] = mxl_f32_to_f16(fr());
            k[i] = mxl_h2f(k16[i]), v[i] = mxl_h2f(v16[i]); /* same values in both caches */
        }
        int64_t qpos[5];
        for (int64_t t = 0; t < n_q; t++) qpos[t] = n_kv - n_q + t; /* a block at the end */
        float *out = mxl_malloc(sizeof(float) * (size_t)(n_q * n_heads * hd));
        float *out2 = mxl_malloc(sizeof(float) * (size_t)(n_q * n_heads * hd));
        float *scratch = mxl_malloc(sizeof(float) * mxl_cpu_attention_scratch_floats(n_kv, 2));
        double ref[256];
        for (int kvt = 0; kvt < 2; kvt++) {
            mxl_kv_view kv = {kvt ? MXL_DTYPE_F16 : MXL_DTYPE_F32, kvt ? (const void *)k16 : k,
                              kvt ? (const void *)v16 : v, n_kv, stride};
            for (int variant = 0; variant < 2; variant++) {
                /* variant 0: scalar, 1 thread; 1: best ISA, 2 threads */
                mxl_cpu_attention(&p, q, n_q, qpos, &kv, variant ? out2 : out, scratch,
                                  variant ? pool : NULL, variant ? mxl_cpu_isa_detect() : MXL_CPU_ISA_SCALAR);
            }
            int bad = 0;
            for (int64_t t = 0; t < n_q; t++)
                for (int h = 0; h < n_heads; h++) {
                    attn_naive(&p, q, t, h, qpos[t], k, v, n_kv, stride, ref);
                    for (int i = 0; i < hd; i++) {
                        int64_t o = (t * n_heads + h) * hd + i;
                        if (!close_rel(out[o], ref[i], 1e-4, 1e-5)) bad++;
                        if (!close_rel(out2[o], ref[i], 1e-4, 1e-5)) bad++;
                    }
                }
            if (bad) fprintf(stderr, "  attention cfg %d kv %s: %d mismatches\n", cfg, kvt ? "f16" : "f32", bad);
            CHECK(bad == 0);
            if (kvt == 1 && mxl_cpu_isa_detect() >= MXL_CPU_ISA_AVX2) { /* the AVX2 kernels too */
                mxl_cpu_attention(&p, q, n_q, qpos, &kv, out, scratch, pool, MXL_CPU_ISA_AVX2);
                bad = 0;
                for (int64_t t = 0; t < n_q; t++)
                    for (int h = 0; h < n_heads; h++) {
                        attn_naive(&p, q, t, h, qpos[t], k, v, n_kv, stride, ref);
                        for (int i = 0; i < hd; i++)
                            if (!close_rel(out[(t * n_heads + h) * hd + i], ref[i], 1e-4, 1e-5)) bad++;
                    }
                CHECK(bad == 0);
            }
        }
        mxl_free(q), mxl_free(k), mxl_free(v), mxl_free(k16), mxl_free(v16), mxl_free(out), mxl_free(out2), mxl_free(scratch);
    }
    mxl_threadpool_destroy(pool);
}

/* The grouped f16 passes (G query heads of one KV head per call) give every head the bits of the
 * one-head call: K scores over a paged cache of 3 blocks with a partial last one, then V. */
TEST(kernels_attention_f16_grouped_passes_equal_one_head) {
    if (mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX512VNNI) { /* only the references run on this CPU */
        CHECK(mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX512VNNI);
        return;
    }
    const int hds[2] = {64, 144};
    for (int hi_ = 0; hi_ < 2; hi_++) {
        const int hd = hds[hi_], n_kv_heads = 2;
        const int64_t bs = 8, n_kv = 21, rs = n_kv_heads * hd + 16, bstride = bs * rs + 32;
        const int32_t blocks[3] = {2, 0, 1}; /* out of order, as the pool hands them out */
        uint16_t *k = mxl_malloc(2 * (size_t)(3 * bstride)), *v = mxl_malloc(2 * (size_t)(3 * bstride));
        for (int64_t i = 0; i < 3 * bstride; i++) k[i] = mxl_f32_to_f16(fr() * 2), v[i] = mxl_f32_to_f16(fr());
        mxl_kv_paged_view kv = {MXL_DTYPE_F16, MXL_DTYPE_F16, k, v, NULL, NULL, 0, n_kv, rs, bs, bstride, blocks, 0};
        float q[4 * 144], s1[4 * 21], s4[4 * 21], o1[4 * 144], o4[4 * 144];
        for (int i = 0; i < 4 * hd; i++) q[i] = fr();
        for (int G = 2; G <= MXL_ATTN_HEAD_GROUP; G++) {
            const int64_t lo = G == 3 ? 5 : 0, hi = G == 4 ? 17 : n_kv; /* windows, a partial first block */
            memset(s1, 0, sizeof s1), memset(s4, 0, sizeof s4);
            mxl_attn_k_f16_avx512(k, &kv, hd, lo, hi, G, q, hd, 0.125f, s4, n_kv);
            for (int g = 0; g < G; g++) mxl_attn_k_f16_avx512(k, &kv, hd, lo, hi, 1, q + g * hd, hd, 0.125f, s1 + g * n_kv, n_kv);
            CHECK(memcmp(s1, s4, sizeof s1) == 0);
            for (int g = 0; g < G; g++) /* probabilities-like weights, some exactly 0 */
                for (int64_t j = 0; j < n_kv; j++) s1[g * n_kv + j] = (j + g) % 5 == 0 ? 0.0f : fr() * 0.1f + 0.1f;
            mxl_attn_v_f16_avx512(v, &kv, hd, lo, hi, G, s1, n_kv, hd, o4);
            for (int g = 0; g < G; g++) mxl_attn_v_f16_avx512(v, &kv, hd, lo, hi, 1, s1 + g * n_kv, n_kv, hd, o1 + g * hd);
            CHECK(memcmp(o1, o4, sizeof(float) * (size_t)(G * hd)) == 0);
        }
        mxl_free(k), mxl_free(v);
    }
}

/* The AVX2 grouped f16 passes give every head the bits of the per-head AVX2 kernels that the
 * one-head path calls (scale x the f16 dot; the axpy chain from 0 skipping zero weights), for
 * G 1..4 over a paged cache of 3 blocks (out of order, a partial last one) and key windows. */
TEST(kernels_attention_f16_grouped_avx2_equals_per_head_kernels) {
    if (mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX2) { /* only the references run on this CPU */
        CHECK(mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX2);
        return;
    }
    const mxl_kv_kernels kk = mxl_kv_kernels_get(MXL_CPU_ISA_AVX2);
    const int hds[3] = {16, 64, 144};
    for (int hi_ = 0; hi_ < 3; hi_++) {
        const int hd = hds[hi_], n_kv_heads = 2;
        const int64_t bs = 8, n_kv = 21, rs = n_kv_heads * hd + 16, bstride = bs * rs + 32;
        const int32_t blocks[3] = {2, 0, 1};
        uint16_t *k = mxl_malloc(2 * (size_t)(3 * bstride)), *v = mxl_malloc(2 * (size_t)(3 * bstride));
        for (int64_t i = 0; i < 3 * bstride; i++) k[i] = mxl_f32_to_f16(fr() * 2), v[i] = mxl_f32_to_f16(fr());
        mxl_kv_paged_view kv = {MXL_DTYPE_F16, MXL_DTYPE_F16, k, v, NULL, NULL, 0, n_kv, rs, bs, bstride, blocks, 0};
        float q[4 * 144], s[4 * 21], w[4 * 21], o[4 * 144], ref[144];
        for (int i = 0; i < 4 * hd; i++) q[i] = fr();
        for (int G = 1; G <= MXL_ATTN_HEAD_GROUP; G++) {
            const int64_t lo = G == 3 ? 5 : G == 2 ? 1 : 0, hi = G == 4 ? 17 : n_kv;
            mxl_attn_k_f16_avx2(k, &kv, hd, lo, hi, G, q, hd, 0.125f, s, n_kv);
            for (int g = 0; g < G; g++)
                for (int64_t j = lo; j < hi; j++) {
                    const uint16_t *kj = k + blocks[j / bs] * bstride + (j % bs) * rs + hd;
                    const float want = kk.dot_f16(hd, kj, q + g * hd) * 0.125f;
                    CHECK(memcmp(&want, &s[g * n_kv + j], 4) == 0);
                }
            for (int g = 0; g < G; g++)
                for (int64_t j = 0; j < n_kv; j++) w[g * n_kv + j] = (j + g) % 5 == 0 ? 0.0f : fr() * 0.1f + 0.1f;
            mxl_attn_v_f16_avx2(v, &kv, hd, lo, hi, G, w, n_kv, hd, o);
            for (int g = 0; g < G; g++) {
                memset(ref, 0, sizeof ref);
                for (int64_t j = lo; j < hi; j++)
                    if (w[g * n_kv + j] != 0.0f) kk.axpy_f16(hd, w[g * n_kv + j], v + blocks[j / bs] * bstride + (j % bs) * rs + hd, ref);
                CHECK(memcmp(ref, o + g * hd, sizeof(float) * (size_t)hd) == 0);
            }
        }
        mxl_free(k), mxl_free(v);
    }
}

/* The AVX-512 attention softmax against the reference softmax: lengths around the 16-lane tail,
 * with and without a sink, a peaked row (exp arguments far below -87) and a flat one. */
TEST(kernels_attention_softmax_avx512_matches_ref) {
    if (mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX512VNNI) { /* only the references run on this CPU */
        CHECK(mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX512VNNI);
        return;
    }
    static const int64_t ns[] = {1, 5, 16, 17, 33, 100};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int kind = 0; kind < 4; kind++) {
            const int64_t n = ns[i];
            float a[100], b[100];
            for (int64_t j = 0; j < n; j++) a[j] = kind == 2 ? (j == n / 2 ? 150.0f : fr()) : kind == 3 ? 0.5f : fr() * 8;
            memcpy(b, a, sizeof a);
            float sink = kind == 1 ? 2.0f : -INFINITY;
            mxl_cpu_softmax(a, n, 0.0f, sink);
            mxl_attn_softmax_avx512(b, n, sink);
            double sum = 0;
            for (int64_t j = 0; j < n; j++) {
                CHECK(fabsf(a[j] - b[j]) <= 1e-6f * (a[j] > 1e-3f ? a[j] : 1e-3f));
                sum += b[j];
            }
            if (kind != 1) CHECK(fabs(sum - 1.0) <= 1e-5);
        }
}

TEST(kernels_argmax_topk_match_naive_sort) {
    float x[1000];
    for (int rep = 0; rep < 5; rep++) {
        int64_t n = rep == 4 ? 3 : 1000;
        for (int64_t i = 0; i < n; i++) x[i] = (float)((int)(fr() * 50)); /* many ties */
        x[n / 2] = NAN;
        int64_t k = rep == 4 ? 10 : 1 + rep * 17;
        int32_t idx[64];
        float val[64];
        int64_t got = mxl_cpu_topk(x, n, k, idx, val);
        /* naive: repeatedly pick the best remaining (largest, then lowest index) */
        char used[1000] = {0};
        int64_t want_n = 0;
        for (int64_t r = 0; r < (k < n ? k : n); r++) {
            int64_t best = -1;
            for (int64_t i = 0; i < n; i++)
                if (!used[i] && !isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
            if (best < 0) break;
            used[best] = 1;
            CHECK(r < got && idx[r] == best && val[r] == x[best]);
            want_n++;
        }
        CHECK(got == want_n);
        int64_t am = mxl_cpu_argmax(x, n);
        CHECK(got > 0 && am == idx[0]);
    }
}

/* The AVX-512 argmax and logit scan against the references: lengths around the 16 / 32-lane
 * steps, ties, NaN / +-inf / signed zeros placed on either side of the maximum, all-NaN and
 * all--inf rows. */
TEST(kernels_argmax_logits_scan_avx512_match_ref) {
    if (mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX512VNNI) { /* only the references run on this CPU */
        CHECK(mxl_cpu_isa_detect() < MXL_CPU_ISA_AVX512VNNI);
        return;
    }
    static const int64_t ns[] = {0, 1, 15, 16, 17, 31, 32, 33, 47, 100, 1000};
    float x[1000];
    int checked = 0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int kind = 0; kind < 8; kind++) {
            const int64_t n = ns[i];
            for (int64_t j = 0; j < n; j++) x[j] = kind == 1 ? (float)((int)(fr() * 5)) : fr() * 20; /* 1: ties */
            if (n > 2) {
                if (kind == 2) x[n / 3] = NAN, x[n - 1] = NAN, x[0] = NAN;
                if (kind == 3) x[n / 2] = INFINITY;
                if (kind == 4) x[n - 1] = -INFINITY, x[1] = 1e30f;
                if (kind == 5) /* signed zeros as the maximum */
                    for (int64_t j = 0; j < n; j++) x[j] = j % 3 == 0 ? -0.0f : j % 3 == 1 ? 0.0f : -fr() - 1;
            }
            if (kind == 6)
                for (int64_t j = 0; j < n; j++) x[j] = j % 2 ? NAN : -INFINITY;
            if (kind == 7)
                for (int64_t j = 0; j < n; j++) x[j] = NAN;
            CHECK(mxl_cpu_argmax_avx512(x, n) == mxl_cpu_argmax_ref(x, n));
            bool b1, a1, b2, a2;
            mxl_cpu_logits_scan_ref(x, n, &b1, &a1);
            mxl_cpu_logits_scan_avx512(x, n, &b2, &a2);
            CHECK(b1 == b2 && a1 == a2);
            checked++;
        }
    CHECK(checked == 88);
    /* the scan's answers themselves, on rows whose answer is known */
    bool bad, any;
    float row[40];
    for (int j = 0; j < 40; j++) row[j] = -INFINITY;
    mxl_cpu_logits_scan(row, 40, &bad, &any);
    CHECK(!bad && !any);
    row[37] = NAN;
    mxl_cpu_logits_scan(row, 40, &bad, &any);
    CHECK(bad && !any);
    row[37] = -3.0f;
    mxl_cpu_logits_scan(row, 40, &bad, &any);
    CHECK(!bad && any);
    CHECK(mxl_cpu_argmax(row, 40) == 37);
}

TEST(kernels_embed_real_q8_0_table_matches_gguf_package) {
    char path[1024];
    const char *home = getenv("HOME");
    REQUIRE(home);
    snprintf(path, sizeof path,
             "%s/.cache/mlxcel/models/HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf",
             home);
    mxl_gguf *g = NULL;
    mxl_error err;
    REQUIRE(mxl_gguf_open(path, &g, &err) == MXL_OK);
    const mxl_gguf_tensor_info *ti = mxl_gguf_find_tensor(g, "token_embd.weight");
    REQUIRE(ti && ti->tensor.dtype == MXL_DTYPE_Q8_0 && ti->tensor.ndim == 2);
    mxl_weight W = {MXL_W_GGUF, MXL_DTYPE_Q8_0, ti->tensor.shape[0], ti->tensor.shape[1],
                        ti->tensor.data, {0}, NULL};
    CHECK(mxl_weight_check(&W, ti->name, &err) == MXL_OK);
    /* expected rows from the gguf-package fixture */
    char fpath[1024];
    snprintf(fpath, sizeof fpath, "%s/tests/fixtures/kernels/dequant_gguf.json", mxl_test_repo_root());
    json_t *root = json_load_file(fpath, 0, NULL);
    REQUIRE(root);
    int checked = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(root, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        int row;
        if (sscanf(name, "SmolLM2-135M-Instruct.Q4_1.gguf:token_embd.weight[%d]", &row) != 1) continue;
        const char *hex = json_string_value(json_object_get(c, "expected_f32"));
        REQUIRE(hex && strlen(hex) == (size_t)W.cols * 8);
        float *out = mxl_malloc(sizeof(float) * (size_t)W.cols);
        int32_t id = row;
        CHECK(mxl_cpu_embed(&W, &id, 1, 1.0f, out, &err) == MXL_OK);
        int bad = 0;
        for (int64_t j = 0; j < W.cols; j++) {
            unsigned b[4];
            sscanf(hex + 8 * j, "%2x%2x%2x%2x", &b[0], &b[1], &b[2], &b[3]);
            uint32_t bits = b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24, got;
            memcpy(&got, &out[j], 4);
            bad += got != bits;
        }
        CHECK(bad == 0);
        mxl_free(out);
        checked++;
    }
    CHECK(checked == 3);
    int32_t bad_ids[2] = {5, (int32_t)W.rows};
    float *tmp = mxl_malloc(sizeof(float) * (size_t)W.cols * 2);
    CHECK(mxl_cpu_embed(&W, bad_ids, 2, 1.0f, tmp, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "49152") != NULL);
    mxl_free(tmp);
    json_decref(root);
    mxl_gguf_close(g);
}

/* The low-rank up-projection (lowrank.h: LoRA's B): the AVX-512 kernel bitwise the reference for
 * F32, F16 and BF16 rows, ranks 1..33 and 300 (past the kernel's 256-row slices) and widths with
 * every tail (1..130 outputs: its 64-wide blocks and 16-wide tails, two rows);
 * and the reference against double sums within float rounding. An x86 CPU without AVX-512 fails
 * the test (the kernel it is about never ran); other architectures have only the reference. */
TEST(kernels_lowrank_acc_matches_reference) {
#if defined(__x86_64__)
    const bool v512 = mxl_cpu_isa_detect() >= MXL_CPU_ISA_AVX512VNNI;
    if (!v512) fprintf(stderr, "  this CPU has no AVX-512: the lowrank kernel under test cannot run\n");
    CHECK(v512);
#else
    const bool v512 = false;
#endif
    enum { MAXK = 300, MAXN = 130 };
    static float x[2 * MAXK], w32[MAXK * MAXN], y0[2 * MAXN], yr[2 * MAXN], yv[2 * MAXN];
    static uint16_t w16[MAXK * MAXN], wb16[MAXK * MAXN];
    double worst = 0;
    for (int ki = 0; ki < 10; ki++)
        for (int N = 1, K = ki < 9 ? 1 + 4 * ki : MAXK; N <= MAXN; N += 7) {
            for (int i = 0; i < 2 * K; i++) x[i] = fr();
            for (int i = 0; i < K * N; i++) {
                w32[i] = fr();
                w16[i] = mxl_f32_to_f16(w32[i]);
                wb16[i] = mxl_f32_to_bf16(w32[i]);
            }
            for (int i = 0; i < 2 * N; i++) y0[i] = fr();
            const void *ws[3] = {w32, w16, wb16};
            const mxl_dtype ts[3] = {MXL_DTYPE_F32, MXL_DTYPE_F16, MXL_DTYPE_BF16};
            for (int t = 0; t < 3; t++) {
                memcpy(yr, y0, sizeof y0), memcpy(yv, y0, sizeof y0);
                mxl_cpu_lowrank_acc_ref(x, 2, K, ws[t], ts[t], N, 0.75f, yr);
                if (v512) {
                    mxl_cpu_lowrank_acc_avx512(x, 2, K, ws[t], ts[t], N, 0.75f, yv);
                    CHECK(memcmp(yr, yv, (size_t)(2 * N) * sizeof(float)) == 0);
                }
                if (t == 0 && K <= 33) /* (300 f32 sums drift past 1e-5) */
                    for (int r = 0; r < 2; r++)
                        for (int o = 0; o < N; o++) {
                            double d = y0[r * N + o];
                            for (int k = 0; k < K; k++) d += 0.75 * x[r * K + k] * (double)w32[k * N + o];
                            worst = fmax(worst, fabs(d - yr[r * N + o]));
                        }
            }
        }
    fprintf(stderr, "  lowrank reference vs double sums: worst %.2e\n", worst);
    CHECK(worst < 1e-5);
}
