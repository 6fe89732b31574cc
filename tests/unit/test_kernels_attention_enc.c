/* test_kernels_attention_enc.c - encoder attention (attention_enc.h): the AVX-512 path against
 * the plain reference, and the reference against the decoder-side mxl_cpu_attention (non-causal)
 * as an independent yardstick; packed sequences of 1..70 tokens (tails of the 4-query and
 * 16-key blocks) and one of 300 (the blocked-GEMM path from MXL_ENC_ATTN_GEMM_MIN_L tokens on, with
 * the tails of its 96-query blocks and 32-key panels), head_dim 32, 64 and 72 (SigLIP-so400m's: zero-padded to 80), 1 and 2 threads. Both are f32 with different summation
 * orders and exp implementations: |fast - ref| <= 2e-5 (values are O(1) averages of V). */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/attention.h"
#include "backends/cpu/attention_enc.h"
#include "core/alloc.h"
#include "test.h"

static uint32_t g_seed = 4242;
static float frand(void) {
    g_seed ^= g_seed << 13;
    g_seed ^= g_seed >> 17;
    g_seed ^= g_seed << 5;
    return (float)(g_seed >> 8) / 16777216.0f * 2.0f - 1.0f;
}

TEST(enc_attention_matches_reference) {
    enum { NS = 6, LONGEST = 300 };
    const int64_t lens[NS] = {1, 3, 17, 70, 5, LONGEST};
    int64_t starts[NS + 1] = {0};
    for (int s = 0; s < NS; s++) starts[s + 1] = starts[s] + lens[s];
    const int64_t n = starts[NS];
    const int dims[3] = {32, 64, 72};
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    for (int di = 0; di < 3; di++) {
        int d = dims[di], nh = 3;
        int64_t stride = (int64_t)d * nh;
        float *q = mxl_malloc((size_t)(n * stride) * sizeof(float)), *k = mxl_malloc((size_t)(n * stride) * sizeof(float));
        float *v = mxl_malloc((size_t)(n * stride) * sizeof(float)), *o1 = mxl_malloc((size_t)(n * stride) * sizeof(float));
        float *o2 = mxl_malloc((size_t)(n * stride) * sizeof(float)), *o3 = mxl_malloc((size_t)(n * stride) * sizeof(float));
        size_t per = mxl_enc_attention_scratch_floats(LONGEST, d);
        float *scratch = mxl_malloc(per * 2 * sizeof(float)), *dscr = mxl_malloc(mxl_cpu_attention_scratch_floats(LONGEST, 1) * sizeof(float));
        int64_t pos[LONGEST];
        REQUIRE(q && k && v && o1 && o2 && o3 && scratch && dscr);
        for (int64_t i = 0; i < n * stride; i++) {
            q[i] = 3.0f * frand();
            k[i] = 3.0f * frand();
            v[i] = frand();
        }
        for (int i = 0; i < LONGEST; i++) pos[i] = i;
        mxl_enc_attn a = {q, k, v, o1, stride, starts, NS, nh, d, 1.0f / sqrtf((float)d)};
        mxl_enc_attention_ref(&a);
        double worst_fast = 0, worst_dec = 0;
        for (int th = 0; th < 2; th++) {
            a.out = o2;
            mxl_enc_attention(&a, scratch, th ? pool : NULL, mxl_cpu_isa_detect());
            for (int64_t i = 0; i < n * stride; i++) worst_fast = fmax(worst_fast, fabs(o2[i] - o1[i]));
        }
        /* independent: the decoder attention without a causal mask, one sequence at a time */
        mxl_attn_params ap = {nh, nh, d, 1.0f / sqrtf((float)d), 0.0f, NULL, 0, 0, 0, 0, NULL};
        for (int s = 0; s < NS; s++) {
            mxl_kv_view kv = {MXL_DTYPE_F32, k + starts[s] * stride, v + starts[s] * stride, lens[s], stride};
            mxl_cpu_attention(&ap, q + starts[s] * stride, lens[s], pos, &kv, o3 + starts[s] * stride, dscr, NULL,
                              MXL_CPU_ISA_SCALAR);
        }
        for (int64_t i = 0; i < n * stride; i++) worst_dec = fmax(worst_dec, fabs(o3[i] - o1[i]));
        CHECK(worst_fast <= 2e-5);
        CHECK(worst_dec <= 2e-5);
        mxl_free(q);
        mxl_free(k);
        mxl_free(v);
        mxl_free(o1);
        mxl_free(o2);
        mxl_free(o3);
        mxl_free(scratch);
        mxl_free(dscr);
    }
    mxl_threadpool_destroy(pool);
}
