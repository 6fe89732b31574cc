/* test_kernels_dequant.c - reference dequantization against independent references:
 *   GGUF formats bit for bit against the PyPI gguf package (fixtures from real model rows and
 *   synthetic blocks, tests/fixtures/kernels/gen_dequant_fixtures.py);
 *   MLX affine against mlx.core.quantize/dequantize (same script) and a quantize round trip. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/quant_gguf.h"
#include "backends/cpu/quant_mlx.h"
#include "core/alloc.h"
#include "io/gguf.h"
#include "test.h"

static json_t *load_fixture(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/kernels/%s", mxl_test_repo_root(), name);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) fprintf(stderr, "  cannot load %s: %s\n", path, je.text);
    return j;
}

static mxl_dtype dtype_by_name(const char *n) {
    static const struct { const char *n; mxl_dtype t; } tab[] = {
        {"Q4_0", MXL_DTYPE_Q4_0}, {"Q4_1", MXL_DTYPE_Q4_1}, {"Q5_0", MXL_DTYPE_Q5_0},
        {"Q5_1", MXL_DTYPE_Q5_1}, {"Q8_0", MXL_DTYPE_Q8_0}, {"Q2_K", MXL_DTYPE_Q2_K},
        {"Q3_K", MXL_DTYPE_Q3_K}, {"Q4_K", MXL_DTYPE_Q4_K}, {"Q5_K", MXL_DTYPE_Q5_K},
        {"Q6_K", MXL_DTYPE_Q6_K}, {"F16", MXL_DTYPE_F16}, {"BF16", MXL_DTYPE_BF16},
        {"F32", MXL_DTYPE_F32}, {"MXFP4", MXL_DTYPE_MXFP4},
        {"TQ1_0", MXL_DTYPE_TQ1_0}, {"TQ2_0", MXL_DTYPE_TQ2_0},
        {"IQ4_NL", MXL_DTYPE_IQ4_NL}, {"IQ4_XS", MXL_DTYPE_IQ4_XS},
        {"IQ2_XXS", MXL_DTYPE_IQ2_XXS}, {"IQ2_XS", MXL_DTYPE_IQ2_XS}, {"IQ2_S", MXL_DTYPE_IQ2_S}, {"IQ3_XXS", MXL_DTYPE_IQ3_XXS},
        {"IQ3_S", MXL_DTYPE_IQ3_S}, {"IQ1_S", MXL_DTYPE_IQ1_S}, {"IQ1_M", MXL_DTYPE_IQ1_M}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(tab[i].n, n)) return tab[i].t;
    return MXL_DTYPE_INVALID;
}

TEST(kernels_dequant_gguf_matches_gguf_package) {
    json_t *root = load_fixture("dequant_gguf.json");
    REQUIRE(root);
    json_t *cases = json_object_get(root, "cases");
    REQUIRE(json_is_array(cases) && json_array_size(cases) >= 40);
    int seen[MXL_DTYPE_COUNT] = {0};
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        mxl_dtype t = dtype_by_name(json_string_value(json_object_get(c, "type")));
        int64_t n = json_integer_value(json_object_get(c, "n"));
        size_t nd = 0, ne = 0;
        uint8_t *data = mxl_test_unhex(json_string_value(json_object_get(c, "data")), &nd);
        uint8_t *exp = mxl_test_unhex(json_string_value(json_object_get(c, "expected_f32")), &ne);
        CHECK(data && exp && mxl_gguf_quant_supported(t) && ne == (size_t)n * 4);
        uint64_t rb = 0;
        CHECK(mxl_dtype_row_bytes(t, (uint64_t)n, &rb) == 0 && rb == nd);
        if (data && exp && mxl_gguf_quant_supported(t) && ne == (size_t)n * 4 && rb == nd) {
            float *out = mxl_malloc((size_t)n * 4);
            mxl_dequant_row_ref(t, data, out, n);
            int mism = 0;
            for (int64_t k = 0; k < n; k++)
                if (memcmp(&out[k], exp + 4 * k, 4) != 0) mism++;
            if (mism) fprintf(stderr, "  %s: %d of %lld elements differ\n", name, mism, (long long)n);
            CHECK(mism == 0);
            seen[t]++;
            mxl_free(out);
        }
        mxl_free(data);
        mxl_free(exp);
    }
    /* every GGUF format is covered */
    mxl_dtype all[] = {MXL_DTYPE_Q4_0, MXL_DTYPE_Q4_1, MXL_DTYPE_Q5_0, MXL_DTYPE_Q5_1,
                       MXL_DTYPE_Q8_0, MXL_DTYPE_Q2_K, MXL_DTYPE_Q3_K, MXL_DTYPE_Q4_K,
                       MXL_DTYPE_Q5_K, MXL_DTYPE_Q6_K, MXL_DTYPE_MXFP4, MXL_DTYPE_TQ1_0, MXL_DTYPE_TQ2_0,
                       MXL_DTYPE_IQ4_NL, MXL_DTYPE_IQ4_XS, MXL_DTYPE_IQ2_XXS, MXL_DTYPE_IQ2_XS, MXL_DTYPE_IQ2_S,
                       MXL_DTYPE_IQ3_XXS, MXL_DTYPE_IQ3_S, MXL_DTYPE_IQ1_S, MXL_DTYPE_IQ1_M};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) CHECK(seen[all[k]] >= 1);
    json_decref(root);
}

static float round_to(mxl_dtype dt, float v) {
    if (dt == MXL_DTYPE_F16) return mxl_h2f(mxl_f32_to_f16(v));
    if (dt == MXL_DTYPE_BF16) return mxl_bf2f(mxl_f32_to_bf16(v));
    return v;
}

TEST(kernels_dequant_mlx_matches_mlx_core) {
    json_t *root = load_fixture("dequant_mlx.json");
    REQUIRE(root);
    json_t *cases = json_object_get(root, "cases");
    REQUIRE(json_is_array(cases) && json_array_size(cases) == 54);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        int bits = (int)json_integer_value(json_object_get(c, "bits"));
        int gs = (int)json_integer_value(json_object_get(c, "group_size"));
        mxl_dtype dt = dtype_by_name(json_string_value(json_object_get(c, "dtype")));
        int64_t rows = json_integer_value(json_object_get(c, "rows"));
        int64_t cols = json_integer_value(json_object_get(c, "cols"));
        size_t nw, ns, nb, ne;
        uint8_t *w = mxl_test_unhex(json_string_value(json_object_get(c, "w")), &nw);
        uint8_t *s = mxl_test_unhex(json_string_value(json_object_get(c, "scales")), &ns);
        uint8_t *b = mxl_test_unhex(json_string_value(json_object_get(c, "biases")), &nb);
        uint8_t *e = mxl_test_unhex(json_string_value(json_object_get(c, "expected")), &ne);
        size_t esz = dt == MXL_DTYPE_F32 ? 4 : 2;
        int ok = w && s && b && e && mxl_mlx_params_valid(bits, gs, dt) &&
                 nw == (size_t)(rows * cols * bits / 8) && ne == (size_t)(rows * cols) * esz &&
                 ns == (size_t)(rows * cols / gs) * esz && nb == ns;
        CHECK(ok);
        if (ok) {
            /* copy into aligned buffers (the hex decode is byte-aligned only by malloc, fine) */
            mxl_mlx_qweight W = {bits, gs, dt, rows, cols, (const uint32_t *)w, s, b};
            float *out = mxl_malloc((size_t)cols * 4);
            uint8_t *q = mxl_malloc((size_t)cols);
            int mism = 0;
            for (int64_t r = 0; r < rows; r++) {
                mxl_mlx_dequant_row_ref(&W, r, out);
                mxl_mlx_unpack_row_ref(bits, W.w + r * cols * bits / 32, q, cols);
                for (int64_t j = 0; j < cols; j++) {
                    float want;
                    if (dt == MXL_DTYPE_F32) {
                        memcpy(&want, e + 4 * (r * cols + j), 4);
                        if (memcmp(&want, &out[j], 4) != 0) mism++;
                    } else {
                        uint16_t h;
                        memcpy(&h, e + 2 * (r * cols + j), 2);
                        want = dt == MXL_DTYPE_F16 ? mxl_h2f(h) : mxl_bf2f(h);
                        /* mlx computes in the scales' dtype: round(round(s*q) + b) */
                        float sc = mxl_mlx_param(s, dt, r * (cols / gs) + j / gs);
                        float bi = mxl_mlx_param(b, dt, r * (cols / gs) + j / gs);
                        float prod = sc * (float)q[j]; /* statements: no FMA contraction */
                        float got = round_to(dt, round_to(dt, prod) + bi);
                        if (memcmp(&want, &got, 4) != 0) mism++;
                        /* and our f32 value is the unrounded one */
                        float f32v = prod + bi;
                        if (out[j] != f32v) mism++;
                    }
                }
            }
            if (mism) fprintf(stderr, "  mlx bits=%d gs=%d: %d mismatches\n", bits, gs, mism);
            CHECK(mism == 0);
            mxl_free(out);
            mxl_free(q);
        }
        mxl_free(w);
        mxl_free(s);
        mxl_free(b);
        mxl_free(e);
    }
    json_decref(root);
}

TEST(kernels_mlx_quantize_round_trip) {
    const int bits_list[] = {2, 3, 4, 5, 6, 8};
    const int gs_list[] = {32, 64, 128};
    uint32_t seed = 7;
    for (int bi = 0; bi < 6; bi++) {
        for (int gi = 0; gi < 3; gi++) {
            int bits = bits_list[bi], gs = gs_list[gi];
            int64_t n = 384;
            float x[384], y[384], sc[12], bs[12];
            uint32_t w[384 * 8 / 32];
            for (int64_t j = 0; j < n; j++) {
                seed = seed * 1664525u + 1013904223u;
                x[j] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 4.0f;
            }
            for (int j = 0; j < gs; j++) x[j] = 1.25f; /* a constant group */
            mxl_mlx_quantize_row_ref(bits, gs, x, n, w, sc, bs);
            mxl_mlx_qweight W = {bits, gs, MXL_DTYPE_F32, 1, n, w, sc, bs};
            mxl_mlx_dequant_row_ref(&W, 0, y);
            int bad = 0;
            for (int64_t j = 0; j < n; j++) {
                float s = sc[j / gs];
                if (!(fabsf(y[j] - x[j]) <= 0.5f * s * 1.0001f + 1e-6f)) bad++;
            }
            CHECK(bad == 0);
            CHECK(y[0] == 1.25f);
            /* the group's extremes are reproduced to within f32 rounding */
            float mn = x[gs], mx = x[gs];
            for (int j = gs; j < 2 * gs; j++) mn = fminf(mn, x[j]), mx = fmaxf(mx, x[j]);
            float ymn = y[gs], ymx = y[gs];
            for (int j = gs; j < 2 * gs; j++) ymn = fminf(ymn, y[j]), ymx = fmaxf(ymx, y[j]);
            CHECK(ymn == mn && fabsf(ymx - mx) <= 1e-5f * fabsf(mx) + 1e-6f);
        }
    }
}

/* mxl_mlx_quantize_row_grid keeps values that already lie on a grid: rows dequantized from real
 * Q8_0 and Q4_1 blocks of the SmolLM2 GGUF (the gguf package's dequantization, which
 * mxl_dequant_row_ref equals) come back exactly at 8 bits, group 32 (Q4_1 also at 4 bits); values
 * off any grid get the same codes, scales and biases as mxl_mlx_quantize_row_ref. */
TEST(kernels_mlx_quantize_grid_keeps_gguf_blocks) {
    const char *path = mxl_test_model_path("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf");
    mxl_gguf *g = NULL;
    mxl_error err;
    REQUIRE(mxl_gguf_open(path, &g, &err) == MXL_OK);
    const char *names[] = {"token_embd.weight", "blk.0.attn_q.weight"};
    const int bits_for[2][2] = {{8, 8}, {4, 8}};
    for (int t = 0; t < 2; t++) {
        const mxl_gguf_tensor_info *ti = mxl_gguf_find_tensor(g, names[t]);
        REQUIRE(ti && ti->tensor.ndim == 2);
        int64_t cols = ti->tensor.shape[1];
        uint64_t rb;
        REQUIRE(mxl_dtype_row_bytes(ti->tensor.dtype, (uint64_t)cols, &rb) == 0);
        float *x = mxl_malloc((size_t)cols * 4), *y = mxl_malloc((size_t)cols * 4), *sc = mxl_malloc((size_t)cols * 4),
              *bs = mxl_malloc((size_t)cols * 4);
        uint32_t *w = mxl_malloc((size_t)cols * 4);
        for (int bi = 0; bi < 2; bi++) {
            int bits = bits_for[t][bi], bad = 0;
            for (int64_t r = 0; r < 64; r++) {
                mxl_dequant_row_ref(ti->tensor.dtype, (const uint8_t *)ti->tensor.data + r * rb, x, cols);
                mxl_mlx_quantize_row_grid(bits, 32, x, cols, w, sc, bs);
                mxl_mlx_qweight W = {bits, 32, MXL_DTYPE_F32, 1, cols, w, sc, bs};
                mxl_mlx_dequant_row_ref(&W, 0, y);
                /* exact up to the rounding of s * q + b in f32: a few ulps of the row's magnitude
                 * (the plain quantizer at 8 bits errs by up to half a step, about 4e-3 of it) */
                float amax = 0;
                for (int64_t j = 0; j < cols; j++) amax = fmaxf(amax, fabsf(x[j]));
                for (int64_t j = 0; j < cols; j++) bad += fabsf(y[j] - x[j]) > 1e-6f * amax;
            }
            if (bad) fprintf(stderr, "  %s at %d bits: %d values changed\n", names[t], bits, bad);
            CHECK(bad == 0);
        }
        mxl_free(x), mxl_free(y), mxl_free(sc), mxl_free(bs), mxl_free(w);
    }
    mxl_gguf_close(g);
    /* off-grid values: identical to the plain quantizer */
    uint32_t seed = 3, w1[96], w2[96];
    float x[384], s1[12], s2[12], b1[12], b2[12];
    for (int j = 0; j < 384; j++) {
        seed = seed * 1664525u + 1013904223u;
        x[j] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 4.0f;
    }
    mxl_mlx_quantize_row_ref(4, 32, x, 384, w1, s1, b1);
    mxl_mlx_quantize_row_grid(4, 32, x, 384, w2, s2, b2);
    CHECK(memcmp(w1, w2, 4 * 48) == 0 && memcmp(s1, s2, sizeof s1) == 0 && memcmp(b1, b2, sizeof b1) == 0);
}
