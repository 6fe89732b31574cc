/* test_kv_turbo.c - the TurboQuant KV cache types (backends/cpu/kv_turbo.h) against their Python
 * reference (tests/fixtures/kv_quant/gen_turbo_fixtures.py, a numpy transcription of the paper's
 * rotate-then-Lloyd-Max quantizer with the codebook of scripts/gen_turbo_codebook.py):
 *   - the C codebooks and rotation signs are the generator's, bit for bit;
 *   - the rotation, the quantizer's bytes, the dequantized values and the inverse rotation equal
 *     the reference's bit for bit on every fixture row (normal rows of 64..256 at rotation chunks
 *     32..256, outlier channels, zeros, a constant, tiny and large magnitudes, midpoint blocks);
 *     the backend op (kv_rotate) gives the same bits as the plain function;
 *   - the rotation is orthogonal: a query rotated alike keeps its dot with a key within float
 *     rounding, and rotating back restores the row. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/kv_quant.h"
#include "backends/cpu/kv_turbo.h"
#include "core/alloc.h"
#include "test.h"

static bool bits_equal(const float *a, const float *b, int64_t n, const char *what, const char *name) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += memcmp(&a[i], &b[i], 4) != 0;
    if (bad) fprintf(stderr, "  %s: %d of %lld %s values differ from the reference\n", name, bad, (long long)n, what);
    return bad == 0;
}

TEST(kv_turbo_codebook_and_signs_match_generator) {
    json_t *root = mxl_test_load_json("tests/fixtures/kv_quant/turbo_codebook.json");
    REQUIRE(root);
    const struct { const char *name; const float *c; int n; } books[2] = {{"turbo4", mxl_kv_turbo4_codebook, 16},
                                                                          {"turbo3", mxl_kv_turbo3_codebook, 8}};
    for (int b = 0; b < 2; b++) {
        json_t *hex = json_object_get(json_object_get(root, books[b].name), "centroids_hex");
        REQUIRE(json_array_size(hex) == (size_t)books[b].n);
        for (int k = 0; k < books[b].n; k++) {
            size_t len = 0;
            uint8_t *v = mxl_test_unhex(json_string_value(json_array_get(hex, (size_t)k)), &len);
            REQUIRE(v && len == 4);
            CHECK(memcmp(v, &books[b].c[k], 4) == 0);
            mxl_free(v);
        }
    }
    size_t len = 0;
    uint8_t *s = mxl_test_unhex(json_string_value(json_object_get(root, "signs_hex")), &len);
    REQUIRE(s && len == sizeof mxl_kv_turbo_signs);
    CHECK(memcmp(s, mxl_kv_turbo_signs, len) == 0);
    mxl_free(s);
    json_decref(root);
}

TEST(kv_turbo_blocks_match_python_reference) {
    json_t *root = mxl_test_load_json("tests/fixtures/kv_quant/turbo_blocks.json");
    REQUIRE(root);
    const mxl_backend *be = mxl_backend_host();
    json_t *c;
    size_t i;
    int n_cases = 0, n_rot = 0;
    json_array_foreach(json_object_get(root, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name")), *tn = json_string_value(json_object_get(c, "type"));
        const mxl_dtype t = !strcmp(tn, "turbo4") ? MXL_DTYPE_TURBO4 : MXL_DTYPE_TURBO3;
        const int64_t chunk = json_integer_value(json_object_get(c, "chunk"));
        size_t lx = 0, lr = 0, lb = 0, ld = 0;
        uint8_t *x = mxl_test_unhex(json_string_value(json_object_get(c, "x")), &lx);
        uint8_t *rot = mxl_test_unhex(json_string_value(json_object_get(c, "rotated")), &lr);
        uint8_t *blocks = mxl_test_unhex(json_string_value(json_object_get(c, "blocks")), &lb);
        uint8_t *deq = mxl_test_unhex(json_string_value(json_object_get(c, "dequantized")), &ld);
        REQUIRE(x && rot && blocks && deq && lx == lr && lx == ld && lx % 128 == 0);
        const int64_t n = (int64_t)lx / 4;
        REQUIRE(lb == mxl_kv_offset_bytes(t, n));
        float *r = mxl_malloc(lx), *r2 = mxl_malloc(lx), *y = mxl_malloc(lx);
        uint8_t *q = mxl_malloc(lb);
        REQUIRE(r && r2 && y && q);
        memcpy(r, x, lx);
        if (chunk > 0) { /* the rotation, by the plain function and by the backend op */
            memcpy(r2, x, lx);
            mxl_kv_rotate_ref(r, n, chunk, false);
            be->ops->kv_rotate(be, r2, n, chunk, false);
            CHECK(bits_equal(r, (const float *)rot, n, "rotated", name));
            CHECK(bits_equal(r2, (const float *)rot, n, "rotated (backend op)", name));
        }
        memcpy(r, rot, lx);
        mxl_kv_quantize_blocks(t, r, n, q);
        if (memcmp(q, blocks, lb)) {
            for (size_t k = 0; k < lb; k++)
                if (q[k] != blocks[k]) {
                    fprintf(stderr, "  %s: byte %zu is %02x, the reference's %02x\n", name, k, q[k], blocks[k]);
                    break;
                }
            CHECK(0);
        }
        mxl_kv_dequantize_blocks(t, blocks, n, y);
        CHECK(bits_equal(y, (const float *)deq, n, "dequantized", name));
        if (chunk > 0) {
            size_t lo = 0;
            uint8_t *restored = mxl_test_unhex(json_string_value(json_object_get(c, "restored")), &lo);
            REQUIRE(restored && lo == lx);
            mxl_kv_rotate_ref(y, n, chunk, true);
            CHECK(bits_equal(y, (const float *)restored, n, "restored", name));
            mxl_free(restored);
            n_rot++;
        }
        n_cases++;
        mxl_free(x), mxl_free(rot), mxl_free(blocks), mxl_free(deq), mxl_free(r), mxl_free(r2), mxl_free(y), mxl_free(q);
    }
    CHECK(n_cases >= 20 && n_rot >= 18);
    json_decref(root);
}

TEST(kv_turbo_rotation_is_orthogonal) {
    uint32_t rng = 99u;
    for (int64_t chunk = 2; chunk <= 256; chunk *= 2) {
        float q[512], k[512], q0[512], k0[512];
        for (int i = 0; i < 512; i++) {
            rng = rng * 1664525u + 1013904223u;
            q[i] = q0[i] = (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
            rng = rng * 1664525u + 1013904223u;
            k[i] = k0[i] = (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
        }
        mxl_kv_rotate_ref(q, 512, chunk, false);
        mxl_kv_rotate_ref(k, 512, chunk, false);
        double d0 = 0, d1 = 0, mag = 0;
        for (int i = 0; i < 512; i++) d0 += (double)q0[i] * k0[i], d1 += (double)q[i] * k[i], mag += fabs((double)q0[i] * k0[i]);
        CHECK(fabs(d0 - d1) <= 1e-5 * mag);
        mxl_kv_rotate_ref(q, 512, chunk, true);
        int far = 0;
        for (int i = 0; i < 512; i++) far += !(fabsf(q[i] - q0[i]) <= 1e-5f);
        CHECK_EQ_INT(far, 0);
    }
}

/* Every level's rotation (the kernel table's kv.rotate: AVX2 vectors on x86) gives the plain
 * function's bits, forward and back, at every chunk. */
TEST(kv_turbo_rotation_levels_bit_exact) {
    uint32_t rng = 7u;
    static float x[1024], a[1024], b[1024];
    for (int i = 0; i < 1024; i++) {
        rng = rng * 1664525u + 1013904223u;
        x[i] = ((float)((rng >> 8) & 0xffffff) / 16777216.0f - 0.5f) * (i % 17 == 0 ? 300.0f : 3.0f);
    }
    for (int isa = MXL_CPU_ISA_SCALAR; isa <= (int)mxl_cpu_isa_detect(); isa++) {
        const mxl_cpu_kernels *K = mxl_cpu_kern_at((mxl_cpu_isa)isa);
        if (K->level != (mxl_cpu_isa)isa) continue;
        for (int64_t chunk = 2; chunk <= 256; chunk *= 2)
            for (int inv = 0; inv < 2; inv++) {
                memcpy(a, x, sizeof x), memcpy(b, x, sizeof x);
                mxl_kv_rotate_ref(a, 1024, chunk, inv);
                K->kv.rotate(b, 1024, chunk, inv);
                if (memcmp(a, b, sizeof a)) fprintf(stderr, "  level %d chunk %lld inverse %d: bits differ\n", isa, (long long)chunk, inv);
                CHECK(memcmp(a, b, sizeof a) == 0);
            }
    }
}
