/* test_tune.c - the CPU backend's run-time knobs (backends/cpu/tune.h) and the autotune cache
 * (engine/autotune.h):
 *   - every knob's alternative values against its default on real decode shapes: attn-head-group
 *     and matmul-split bit for bit, paged-decode-splits (a different summation order) within the
 *     attention kernel tests' tolerance, and the split path really taken;
 *   - the knob table: defaults, per-shape and per-context lookup, refused values;
 *   - the cache file: written and applied for this machine and shape; a malformed file, another
 *     format version, an unknown op or an entry of another machine changes nothing and says so;
 *     MLXCEL_AUTOTUNE unset / 0 does not read the file.
 * No timings are asserted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/cpu/attention.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/kv_quant.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/quant_amx.h"
#include "backends/cpu/synth.h"
#include "backends/cpu/tune.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/threadpool.h"
#include "engine/autotune.h"
#include "test.h"

static uint32_t g_seed = 12345;
static float frand(void) { /* [-1, 1) */
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)(g_seed >> 8) / 8388608.0f - 1.0f;
}

static int close_rel(double a, double b, double rel, double abs_tol) { return fabs(a - b) <= abs_tol + rel * fabs(b); }

/* A paged cache of n_kv positions (blocks of bs in shuffled order) of K type kt and V type vt
 * from random values; row stride kvh * hd. */
typedef struct paged {
    void *k, *v;
    int32_t *blocks;
    mxl_kv_paged_view view;
} paged;

static void *fill(mxl_dtype t, int64_t n, float amp) {
    float *x = mxl_malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = frand() * amp;
    void *out = mxl_malloc(mxl_kv_offset_bytes(t, n) + 64);
    if (t == MXL_DTYPE_F32) memcpy(out, x, sizeof(float) * (size_t)n);
    else if (t == MXL_DTYPE_F16)
        for (int64_t i = 0; i < n; i++) ((uint16_t *)out)[i] = mxl_f32_to_f16(x[i]);
    else mxl_kv_quantize_blocks(t, x, n, out);
    mxl_free(x);
    return out;
}

static void paged_make(paged *pc, mxl_dtype kt, mxl_dtype vt, int hd, int kvh, int64_t n_kv, int64_t bs) {
    const int64_t rs = (int64_t)kvh * hd, nb = (n_kv + bs - 1) / bs;
    pc->k = fill(kt, nb * bs * rs, 2.0f);
    pc->v = fill(vt, nb * bs * rs, 1.0f);
    pc->blocks = mxl_malloc(sizeof(int32_t) * (size_t)nb);
    for (int64_t i = 0; i < nb; i++) pc->blocks[i] = (int32_t)i;
    for (int64_t i = nb - 1; i > 0; i--) {
        int64_t j = (int64_t)((uint32_t)(frand() * 1e6f + 1e6f) % (uint32_t)(i + 1));
        int32_t t = pc->blocks[i];
        pc->blocks[i] = pc->blocks[j], pc->blocks[j] = t;
    }
    pc->view = (mxl_kv_paged_view){kt, vt, pc->k, pc->v, NULL, NULL, 0, n_kv, rs, bs, bs * rs, pc->blocks, 0};
}

static void paged_free(paged *pc) { mxl_free(pc->k), mxl_free(pc->v), mxl_free(pc->blocks); }

typedef struct attn_case {
    const char *name;
    mxl_dtype kt, vt;
    int hd, heads, kvh;
    int64_t n_kv, n_q, window;
    float softcap;
    bool sinks;
} attn_case;

/* decode shapes: Llama-3.2-1B (64 x 32 / 8), an 8B-like 128 x 32 / 8 with block-format K and
 * V, Qwen-like 128 x 16 / 2 with sinks and a soft-cap, an f32 cache (the per-head path) with a
 * 3-token verify block, a sliding window narrower than the splits */
static const attn_case k_cases[] = {
    {"f16 64x32/8", MXL_DTYPE_F16, MXL_DTYPE_F16, 64, 32, 8, 3000, 1, 0, 0.0f, false},
    {"q8_0/q4_0 128x32/8", MXL_DTYPE_Q8_0, MXL_DTYPE_Q4_0, 128, 32, 8, 2100, 1, 0, 0.0f, false},
    {"f16 128x16/2 sinks softcap", MXL_DTYPE_F16, MXL_DTYPE_F16, 128, 16, 2, 1500, 1, 0, 30.0f, true},
    {"f32 64x4/4 n_q 3", MXL_DTYPE_F32, MXL_DTYPE_F32, 64, 4, 4, 1200, 3, 0, 0.0f, false},
    {"q4_1/f16 64x8/2 window 20", MXL_DTYPE_Q4_1, MXL_DTYPE_F16, 64, 8, 2, 1500, 1, 20, 0.0f, false},
};

/* out[n_q, heads, hd] of case c with the knobs as they stand */
static void run_case(const attn_case *c, const paged *pc, const float *q, const float *sinks, mxl_threadpool *pool, mxl_cpu_isa isa,
                     float *out) {
    mxl_attn_params p = {c->heads, c->kvh, c->hd, 1.0f / sqrtf((float)c->hd), c->softcap, c->sinks ? sinks : NULL,
                         c->window, 1, 0, 0, NULL};
    int64_t qpos[4];
    for (int64_t t = 0; t < c->n_q; t++) qpos[t] = c->n_kv - c->n_q + t;
    float *scratch = mxl_malloc(sizeof(float) * mxl_cpu_attention_scratch_floats(c->n_kv, pool ? mxl_threadpool_size(pool) : 1));
    mxl_cpu_attention_paged(&p, q, c->n_q, qpos, &pc->view, out, scratch, pool, isa);
    mxl_free(scratch);
}

static bool set_attn(mxl_cpu_knob k, const attn_case *c, int v) {
    mxl_cpu_tune_reset();
    return mxl_cpu_tune_set(k, c->hd, c->heads, c->kvh, 0, v);
}

TEST(tune_decode_splits_match_unsplit) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, NULL) == MXL_OK);
    const mxl_cpu_isa isas[2] = {mxl_cpu_isa_detect(), MXL_CPU_ISA_SCALAR};
    for (size_t ci = 0; ci < sizeof k_cases / sizeof k_cases[0]; ci++) {
        const attn_case *c = &k_cases[ci];
        paged pc;
        paged_make(&pc, c->kt, c->vt, c->hd, c->kvh, c->n_kv, 32);
        const int64_t no = c->n_q * c->heads * c->hd;
        float *q = mxl_malloc(sizeof(float) * (size_t)no), *ref = mxl_malloc(sizeof(float) * (size_t)no),
              *got = mxl_malloc(sizeof(float) * (size_t)no), sinks[32];
        for (int64_t i = 0; i < no; i++) q[i] = frand();
        for (int h = 0; h < 32; h++) sinks[h] = frand() * 3;
        for (int li = 0; li < 2; li++) {
            mxl_cpu_tune_reset();
            run_case(c, &pc, q, sinks, pool, isas[li], ref);
            for (int S = 2; S <= 8; S *= 2) {
                CHECK(set_attn(MXL_CPU_KNOB_DECODE_SPLITS, c, S));
                const long before = atomic_load(&mxl_cpu_attention_split_calls);
                run_case(c, &pc, q, sinks, pool, isas[li], got);
                CHECK(atomic_load(&mxl_cpu_attention_split_calls) == before + 1); /* the split path ran */
                int bad = 0;
                for (int64_t i = 0; i < no; i++) bad += !close_rel(got[i], ref[i], 1e-4, 1e-5);
                if (bad) fprintf(stderr, "  %s, %s, %d splits: %d of %lld outputs differ\n", c->name, mxl_cpu_isa_name(isas[li]), S, bad, (long long)no);
                CHECK(bad == 0);
                /* without a pool (a decode batch's per-sequence calls) the knob does nothing */
                const long b2 = atomic_load(&mxl_cpu_attention_split_calls);
                run_case(c, &pc, q, sinks, NULL, isas[li], got);
                CHECK(atomic_load(&mxl_cpu_attention_split_calls) == b2);
                CHECK(memcmp(got, ref, sizeof(float) * (size_t)no) == 0);
            }
        }
        mxl_cpu_tune_reset();
        mxl_free(q), mxl_free(ref), mxl_free(got);
        paged_free(&pc);
    }
    mxl_threadpool_destroy(pool);
}

TEST(tune_head_group_bitwise) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, NULL) == MXL_OK);
    mxl_cpu_isa isas[2] = {mxl_cpu_isa_detect(), MXL_CPU_ISA_AVX2};
    for (size_t ci = 0; ci < sizeof k_cases / sizeof k_cases[0]; ci++) {
        const attn_case *c = &k_cases[ci];
        paged pc;
        paged_make(&pc, c->kt, c->vt, c->hd, c->kvh, c->n_kv, 32);
        const int64_t no = c->n_q * c->heads * c->hd;
        float *q = mxl_malloc(sizeof(float) * (size_t)no), *ref = mxl_malloc(sizeof(float) * (size_t)no),
              *got = mxl_malloc(sizeof(float) * (size_t)no), sinks[32];
        for (int64_t i = 0; i < no; i++) q[i] = frand();
        for (int h = 0; h < 32; h++) sinks[h] = frand() * 3;
        for (int li = 0; li < 2; li++) {
            for (int wp = 0; wp < 2; wp++) {
                mxl_threadpool *pl = wp ? pool : NULL;
                mxl_cpu_tune_reset();
                run_case(c, &pc, q, sinks, pl, isas[li], ref);
                for (int G = 1; G < MXL_ATTN_HEAD_GROUP; G++) {
                    CHECK(set_attn(MXL_CPU_KNOB_HEAD_GROUP, c, G));
                    run_case(c, &pc, q, sinks, pl, isas[li], got);
                    if (memcmp(got, ref, sizeof(float) * (size_t)no) != 0)
                        fprintf(stderr, "  %s, %s, group %d: not the default's bits\n", c->name, mxl_cpu_isa_name(isas[li]), G);
                    CHECK(memcmp(got, ref, sizeof(float) * (size_t)no) == 0);
                }
            }
        }
        mxl_cpu_tune_reset();
        mxl_free(q), mxl_free(ref), mxl_free(got);
        paged_free(&pc);
    }
    mxl_threadpool_destroy(pool);
}

/* matmul-split on the panel path (Q4_K, Q8_0 with the panel layout where the CPU has one) and
 * the row path (the same weights unprepared, and F16): every value gives the default's bits. */
TEST(tune_matmul_split_bitwise) {
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, NULL) == MXL_OK);
    const mxl_dtype types[3] = {MXL_DTYPE_Q4_K, MXL_DTYPE_Q8_0, MXL_DTYPE_F16};
    const int64_t rows = 2048 + 48, cols = 2048;
    for (int ti = 0; ti < 3; ti++)
        for (int prep = 0; prep < 2; prep++) {
            const mxl_dtype_info *inf = mxl_dtype_get_info(types[ti]);
            uint64_t nb = (uint64_t)(rows * cols) / inf->block_elems, seed = 0x9E3779B97F4A7C15ULL + (uint64_t)ti;
            uint8_t *data = mxl_malloc(nb * inf->block_bytes), *panels = NULL;
            mxl_synth_fill(types[ti], data, nb, &seed);
            mxl_weight W = {.kind = types[ti] == MXL_DTYPE_F16 ? MXL_W_DENSE : MXL_W_GGUF, .dtype = types[ti], .rows = rows, .cols = cols, .data = data};
            if (prep && W.kind == MXL_W_GGUF && mxl_qamx_format(&W) && mxl_qamx_available()) {
                panels = mxl_aligned_alloc(64, (mxl_qamx_packed_bytes(&W) + 63) / 64 * 64);
                mxl_qamx_pack(&W, panels);
                W.prepared = panels;
            }
            const int64_t max_tok = 9;
            float *x = mxl_malloc(sizeof(float) * (size_t)(max_tok * cols)), *ref = mxl_malloc(sizeof(float) * (size_t)(max_tok * rows)),
                  *got = mxl_malloc(sizeof(float) * (size_t)(max_tok * rows));
            void *scratch = mxl_aligned_alloc(64, (mxl_cpu_matmul_scratch_bytes(&W, max_tok) + 63) / 64 * 64 + 64);
            for (int64_t i = 0; i < max_tok * cols; i++) x[i] = frand();
            const int toks[3] = {1, 4, 9};
            for (int k = 0; k < 3; k++) {
                mxl_cpu_tune_reset();
                mxl_cpu_matmul(&W, x, toks[k], ref, scratch, pool);
                for (int d = 1; d <= 16; d *= 2) {
                    CHECK(mxl_cpu_tune_set(MXL_CPU_KNOB_MATMUL_SPLIT, 0, 0, 0, -1, d));
                    CHECK_EQ_INT(mxl_cpu_tune_matmul_split(), d);
                    mxl_cpu_matmul(&W, x, toks[k], got, scratch, pool);
                    CHECK(memcmp(got, ref, sizeof(float) * (size_t)(toks[k] * rows)) == 0);
                }
            }
            mxl_cpu_tune_reset();
            mxl_free(data), mxl_aligned_free(panels), mxl_free(x), mxl_free(ref), mxl_free(got), mxl_aligned_free(scratch);
        }
    mxl_threadpool_destroy(pool);
}

TEST(tune_knob_table) {
    mxl_cpu_tune_reset();
    mxl_attn_params p = {32, 8, 64, 0.125f, 0, NULL, 0, 1, 0, 0, NULL}, other = {32, 8, 128, 0.1f, 0, NULL, 0, 1, 0, 0, NULL};
    CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&p, 5000), 1);
    CHECK_EQ_INT(mxl_cpu_tune_head_group(&p, 5000), MXL_ATTN_HEAD_GROUP);
    CHECK_EQ_INT(mxl_cpu_tune_matmul_split(), 2);
    CHECK(mxl_cpu_tune_set(MXL_CPU_KNOB_DECODE_SPLITS, 64, 32, 8, 4096, 4));
    CHECK(mxl_cpu_tune_set(MXL_CPU_KNOB_DECODE_SPLITS, 64, 32, 8, 1024, 2));
    CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&p, 1000), 1); /* below the smallest tuned context */
    CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&p, 1024), 2);
    CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&p, 4095), 2);
    CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&p, 100000), 4);
    CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&other, 100000), 1); /* another shape */
    CHECK_EQ_INT(mxl_cpu_tune_head_group(&p, 100000), MXL_ATTN_HEAD_GROUP);
    CHECK(!mxl_cpu_tune_set(MXL_CPU_KNOB_DECODE_SPLITS, 64, 32, 8, 0, 0));
    CHECK(!mxl_cpu_tune_set(MXL_CPU_KNOB_HEAD_GROUP, 64, 32, 8, 0, MXL_ATTN_HEAD_GROUP + 1));
    CHECK(!mxl_cpu_tune_set(MXL_CPU_KNOB_HEAD_GROUP, 64, 32, 7, 0, 2)); /* 32 heads over 7 */
    CHECK(!mxl_cpu_tune_set(MXL_CPU_KNOB_MATMUL_SPLIT, 0, 0, 0, -1, 0));
    CHECK_EQ_INT(mxl_cpu_knob_find("paged-decode-splits"), MXL_CPU_KNOB_DECODE_SPLITS);
    CHECK_EQ_INT(mxl_cpu_knob_find("qmm-tile"), -1);
    for (int k = 0; k < MXL_CPU_KNOB_COUNT; k++) CHECK_EQ_INT(mxl_cpu_knob_get(k)->cand[0], mxl_cpu_knob_get(k)->def);
    mxl_cpu_tune_reset();
    CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&p, 100000), 1);
}

/* ---- the cache file ---- */

static char g_dir[256];

static const char *tmp_dir(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/mxl_tune_test_%ld/autotune", (long)getpid());
    return g_dir;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) fputs(text, f), fclose(f);
}

static mxl_autotune_entry entry(const mxl_autotune_machine *m, const char *op, int64_t ctx, int value) {
    mxl_autotune_entry e = {.machine = *m, .shape = {64, 32, 8, 32}, .context = ctx, .value = value, .def = 1};
    snprintf(e.op, sizeof e.op, "%s", op);
    return e;
}

TEST(tune_cache_write_apply_and_refuse) {
    const mxl_backend *be = mxl_backend_get("cpu");
    REQUIRE(be && be->ops->tune_set);
    const char *dir = tmp_dir();
    char path[400], warn[5000];
    snprintf(path, sizeof path, "%s/%s", dir, MXL_AUTOTUNE_FILE);
    mxl_autotune_machine m, m1;
    mxl_autotune_machine_of(be, 2, &m);
    mxl_autotune_machine_of(be, 1, &m1);
    CHECK(m.cpu[0] && m.isa[0] && m.threads == 2);
    const mxl_autotune_shape shape = {64, 32, 8, 32}, other_shape = {128, 32, 8, 32};
    mxl_attn_params p = {32, 8, 64, 0.125f, 0, NULL, 0, 1, 0, 0, NULL};
    mxl_error err;

    /* written, then merged: a second write replaces the same key and keeps the others */
    mxl_autotune_entry e[3] = {entry(&m, "paged-decode-splits", 1024, 2), entry(&m, "attn-head-group", 1024, 2),
                               entry(&m1, "paged-decode-splits", 1024, 8)};
    REQUIRE(mxl_autotune_write(dir, e, 3, be, warn, sizeof warn, &err) == MXL_OK);
    CHECK(warn[0] == 0);
    mxl_autotune_entry e2 = entry(&m, "paged-decode-splits", 1024, 4);
    REQUIRE(mxl_autotune_write(dir, &e2, 1, be, warn, sizeof warn, &err) == MXL_OK);
    mxl_autotune_entry *rd = NULL;
    int n = 0;
    REQUIRE(mxl_autotune_read(path, be, &rd, &n, &err) == MXL_OK);
    CHECK_EQ_INT(n, 3);
    mxl_free(rd);

    /* applied: only this machine's (2 threads) entries of this shape; the 1-thread one is warned about */
    mxl_cpu_tune_reset();
    CHECK_EQ_INT(mxl_autotune_apply_file(be, path, &m, &shape, warn, sizeof warn), 2);
    CHECK(strstr(warn, "another machine") != NULL);
    CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&p, 2000), 4);
    CHECK_EQ_INT(mxl_cpu_tune_head_group(&p, 2000), 2);
    mxl_cpu_tune_reset();
    CHECK_EQ_INT(mxl_autotune_apply_file(be, path, &m, &other_shape, warn, sizeof warn), 0); /* another model */
    CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&p, 2000), 1);

    /* broken files: nothing applied, one line saying why */
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"{\"format\": \"mlxcel-autotune\", \"version\": 1, \"entries\": [", "not valid JSON"},
        {"[1, 2]", "not an mlxcel autotune file"},
        {"{\"format\": \"mlxcel-autotune\", \"version\": 0, \"entries\": []}", "version 0"},
        {"{\"format\": \"mlxcel-autotune\", \"version\": 2, \"entries\": []}", "version 2"},
        {"{\"format\": \"mlxcel-autotune\", \"version\": 1}", "no \"entries\""},
        {"{\"format\": \"mlxcel-autotune\", \"version\": 1, \"entries\": [{\"op\": \"paged-decode-splits\"}]}", "entry 0"},
        {"{\"format\": \"mlxcel-autotune\", \"version\": 1, \"entries\": [{\"machine\": {\"cpu\": \"x\", \"isa\": \"avx2\", "
         "\"threads\": 2}, \"shape\": {\"head_dim\": 64, \"q_heads\": 32, \"kv_heads\": 8, \"block_size\": 32}, \"op\": \"qmm-tile\", "
         "\"context\": 0, \"value\": 64}]}",
         "not a knob"},
        {"{\"format\": \"mlxcel-autotune\", \"version\": 1, \"entries\": [{\"machine\": {\"cpu\": \"x\", \"isa\": \"avx2\", "
         "\"threads\": 2}, \"shape\": {\"head_dim\": 64, \"q_heads\": 32, \"kv_heads\": 8, \"block_size\": 32}, \"op\": "
         "\"paged-decode-splits\", \"context\": 0, \"value\": 1000}]}",
         "not a knob"},
        {"", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(path, bad[i].text);
        mxl_cpu_tune_reset();
        CHECK_EQ_INT(mxl_autotune_apply_file(be, path, &m, &shape, warn, sizeof warn), 0);
        if (!strstr(warn, bad[i].why)) fprintf(stderr, "  bad file %zu: warning '%s' lacks '%s'\n", i, warn, bad[i].why);
        CHECK(strstr(warn, bad[i].why) != NULL);
        CHECK(strchr(warn, '\n') == NULL); /* one line */
        CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&p, 2000), 1);
    }
    /* a broken file is replaced by the next write, with a warning */
    REQUIRE(mxl_autotune_write(dir, e, 1, be, warn, sizeof warn, &err) == MXL_OK);
    CHECK(strstr(warn, "replacing it") != NULL);
    REQUIRE(mxl_autotune_read(path, be, &rd, &n, &err) == MXL_OK);
    CHECK_EQ_INT(n, 1);
    mxl_free(rd);

    /* entries of another machine only: nothing applied, warned */
    mxl_autotune_machine far = m;
    snprintf(far.cpu, sizeof far.cpu, "Some Other CPU 9000");
    mxl_autotune_entry fe = entry(&far, "paged-decode-splits", 0, 8);
    REQUIRE(mxl_autotune_write(dir, &fe, 1, be, warn, sizeof warn, &err) == MXL_OK);
    mxl_cpu_tune_reset();
    CHECK_EQ_INT(mxl_autotune_apply_file(be, path, &m, &shape, warn, sizeof warn), 1); /* (the earlier entry of this machine) */
    CHECK(strstr(warn, "another machine") != NULL);
    CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&p, 100), 1);    /* not the other machine's 8 */
    CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&p, 2000), 2);   /* this machine's, from 1024 */

    /* no file: nothing, silently */
    unlink(path);
    CHECK_EQ_INT(mxl_autotune_apply_file(be, path, &m, &shape, warn, sizeof warn), 0);
    CHECK(warn[0] == 0);
    mxl_cpu_tune_reset();
    rmdir(dir);
    *strrchr(g_dir, '/') = '\0';
    rmdir(g_dir);
}

TEST(tune_cache_env_modes) {
    const mxl_backend *be = mxl_backend_get("cpu");
    REQUIRE(be != NULL);
    char warn[5000], base[256], dir[300];
    snprintf(base, sizeof base, "/tmp/mxl_tune_env_%ld", (long)getpid());
    const char *old_cache = getenv("MLXCEL_CACHE_DIR"), *old_mode = getenv("MLXCEL_AUTOTUNE");
    char *saved_cache = old_cache ? strdup(old_cache) : NULL, *saved_mode = old_mode ? strdup(old_mode) : NULL;
    setenv("MLXCEL_CACHE_DIR", base, 1);
    mxl_error err;
    REQUIRE(mxl_autotune_dir(dir, sizeof dir, &err) == MXL_OK);
    char want[300];
    snprintf(want, sizeof want, "%s/autotune", base);
    CHECK_EQ_STR(dir, want);
    mxl_autotune_machine m;
    mxl_autotune_machine_of(be, 3, &m);
    mxl_autotune_entry e = {.machine = m, .shape = {64, 32, 8, 32}, .context = 0, .value = 2, .def = 1};
    snprintf(e.op, sizeof e.op, "paged-decode-splits");
    REQUIRE(mxl_autotune_write(dir, &e, 1, be, warn, sizeof warn, &err) == MXL_OK);
    const mxl_autotune_shape shape = {64, 32, 8, 32};
    mxl_attn_params p = {32, 8, 64, 0.125f, 0, NULL, 0, 1, 0, 0, NULL};
    static const struct {
        const char *v;
        int applied;
        bool warns;
    } modes[] = {{NULL, 0, false}, {"0", 0, false}, {"off", 0, false}, {"", 0, false},
                 {"cache", 1, false}, {"1", 1, false}, {"always", 0, true}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (modes[i].v) setenv("MLXCEL_AUTOTUNE", modes[i].v, 1);
        else unsetenv("MLXCEL_AUTOTUNE");
        mxl_cpu_tune_reset();
        CHECK_EQ_INT(mxl_autotune_load(be, 3, &shape, warn, sizeof warn), modes[i].applied);
        CHECK_EQ_INT(mxl_cpu_tune_decode_splits(&p, 10), modes[i].applied ? 2 : 1);
        CHECK((warn[0] != 0) == modes[i].warns);
    }
    mxl_cpu_tune_reset();
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, MXL_AUTOTUNE_FILE);
    unlink(path), rmdir(dir), rmdir(base);
    if (saved_cache) setenv("MLXCEL_CACHE_DIR", saved_cache, 1);
    else unsetenv("MLXCEL_CACHE_DIR");
    if (saved_mode) setenv("MLXCEL_AUTOTUNE", saved_mode, 1);
    else unsetenv("MLXCEL_AUTOTUNE");
    free(saved_cache), free(saved_mode);
}
