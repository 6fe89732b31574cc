/* test_kv_pool.c - the paged KV cache: the block pool (models/kv_pool.h), paged attention
 * (backends/cpu/attention.h mxl_cpu_attention_paged) and prefix sharing between decoder states
 * (models/decoder.h mxl_decoder_state_adopt / _fork).
 *
 * Pool: reference counts and the free list (a fresh pool hands out every block once, the next
 * allocation fails with MXL_ERR_NOMEM, a released block is handed out again); copy-on-write
 * copies exactly the kept rows of every layer (K, V and int8 scales; every storage type) and leaves private blocks in
 * place; the prompt-cache index finds a published block only with its own tokens and parent,
 * keeps released published blocks as evictable and evicts the least recently released first; a
 * random publish / retain / release / alloc run is checked against a naive model of the index
 * (which exercises the table's backward-shift deletion).
 * Attention through a shuffled block table equals, bit for bit, attention over the same rows laid
 * out contiguously (mxl_cpu_attention_kv), for f32 / f16 / int8 / q8_0 / q4_0 / q4_1 / q5_0 / q5_1
 * storage on both kernel sets.
 * Decoder (tiny random checkpoints of tests/fixtures/decoders: sliding windows, learned positions,
 * MLX weights): a state that adopts another's prefix (partial last block included) and runs the
 * rest gives the logits of a state that ran everything itself, bit for bit, on both paths and with
 * int8, q8_0, q4_0 and q5_1 storage; the source state, whose partial block the fork shared, keeps giving its own
 * recompute bits after the fork wrote (copy-on-write); blocks published under chain hashes are
 * found again by a third state; batches of forked states equal their one-by-one bits; a shared
 * pool that runs dry fails the forward with NOMEM and an unchanged position, and every block goes
 * back to the pool when the states are destroyed. */
#include <stdlib.h>

#include "backends/cpu/attention.h"
#include "backends/cpu/kv_quant.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "models/decoder.h"
#include "models/kv_pool.h"
#include "test.h"

static uint32_t g_rng = 777u;
static uint32_t urand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return g_rng >> 8;
}
static float frand(void) { return (float)(urand() & 0xffffff) / 16777216.0f * 2.0f - 1.0f; }

static mxl_kv_pool *tiny_pool(mxl_dtype kt, mxl_dtype vt, int64_t n_blocks) {
    mxl_kv_pool_cfg c = {2, 64, 32, kt, vt, n_blocks, NULL, false, 0, 0};
    mxl_kv_pool *p = NULL;
    return mxl_kv_pool_create(&c, &p, NULL) == MXL_OK ? p : NULL;
}

TEST(kv_pool_refcounts_and_exhaustion) {
    mxl_kv_pool *p = tiny_pool(MXL_DTYPE_F16, MXL_DTYPE_F16, 4);
    REQUIRE(p);
    mxl_kv_pool_cfg c = {2, 64, 32, MXL_DTYPE_F16, MXL_DTYPE_F16, 4, NULL, false, 0, 0};
    CHECK(mxl_kv_pool_block_bytes(&c) == 2ull * 32 * 64 * 2 * 2);
    mxl_kv_pool_cfg c8 = {2, 64, 32, MXL_DTYPE_I8, MXL_DTYPE_F32, 4, NULL, false, 0, 0};
    CHECK(mxl_kv_pool_block_bytes(&c8) == 2ull * 32 * 64 * (1 + 4) + 2ull * 32 * 2 * 4);
    int32_t id[4];
    int seen = 0;
    mxl_error err;
    for (int i = 0; i < 4; i++) {
        REQUIRE(mxl_kv_pool_alloc(p, &id[i], &err) == MXL_OK);
        CHECK(id[i] >= 0 && id[i] < 4 && mxl_kv_pool_refcount(p, id[i]) == 1 && mxl_kv_pool_writable(p, id[i]));
        seen |= 1 << id[i];
    }
    CHECK(seen == 15);
    int32_t extra = -7;
    CHECK(mxl_kv_pool_alloc(p, &extra, &err) == MXL_ERR_NOMEM && extra == -7);
    CHECK(strstr(err.msg, "exhausted") != NULL);
    mxl_kv_pool_stats st;
    mxl_kv_pool_get_stats(p, &st);
    CHECK(st.total == 4 && st.used == 4 && st.free == 0 && st.cached == 0 && mxl_kv_pool_available(p) == 0);
    mxl_kv_pool_retain(p, id[2]);
    CHECK(mxl_kv_pool_refcount(p, id[2]) == 2 && !mxl_kv_pool_writable(p, id[2]));
    mxl_kv_pool_release(p, id[2]);
    CHECK(mxl_kv_pool_alloc(p, &extra, &err) == MXL_ERR_NOMEM); /* still referenced once */
    mxl_kv_pool_release(p, id[2]);
    CHECK(mxl_kv_pool_refcount(p, id[2]) == 0);
    mxl_kv_pool_get_stats(p, &st);
    CHECK(st.used == 3 && st.free == 1);
    REQUIRE(mxl_kv_pool_alloc(p, &extra, &err) == MXL_OK);
    CHECK(extra == id[2]);
    for (int i = 0; i < 4; i++) mxl_kv_pool_release(p, id[i]);
    mxl_kv_pool_get_stats(p, &st);
    CHECK(st.used == 0 && st.free == 4);
    mxl_kv_pool_destroy(p);

    /* bad configurations are refused, not asserted */
    mxl_kv_pool *bad = NULL;
    mxl_kv_pool_cfg b1 = {2, 64, 48, MXL_DTYPE_I8, MXL_DTYPE_F16, 4, NULL, false, 0, 0}, b2 = {2, 64, 32, MXL_DTYPE_F16, MXL_DTYPE_F16, 0, NULL, false, 0, 0},
                    b3 = {2, 64, 32, MXL_DTYPE_BF16, MXL_DTYPE_F16, 4, NULL, false, 0, 0};
    CHECK(mxl_kv_pool_create(&b1, &bad, &err) == MXL_ERR_ARG && !bad);
    CHECK(mxl_kv_pool_create(&b2, &bad, &err) == MXL_ERR_ARG && !bad);
    CHECK(mxl_kv_pool_create(&b3, &bad, &err) == MXL_ERR_ARG && !bad);
}

/* Fills block id with a pattern depending on (seed, element). */
static void fill_block(mxl_kv_pool *p, int32_t id, uint8_t seed) {
    const mxl_kv_pool_cfg *c = mxl_kv_pool_config(p);
    int64_t n = mxl_kv_pool_block_stride(p), nb = (int64_t)mxl_kv_offset_bytes(c->k_type, n); /* (K and V of one type here) */
    uint8_t *k = (uint8_t *)mxl_kv_pool_k(p) + (size_t)(id * nb), *v = (uint8_t *)mxl_kv_pool_v(p) + (size_t)(id * nb);
    for (int64_t i = 0; i < nb; i++) k[i] = (uint8_t)(seed + i * 7), v[i] = (uint8_t)(seed + i * 13 + 1);
    float *ks = mxl_kv_pool_k_scale(p), *vs = mxl_kv_pool_v_scale(p);
    for (int64_t i = 0; ks && i < n / c->group; i++) ks[id * n / c->group + i] = (float)(seed + i), vs[id * n / c->group + i] = -(float)(seed + i);
}

/* Rows [0, rows) of every layer equal between blocks a and b (K, V, scales). */
static bool rows_equal(mxl_kv_pool *p, int32_t a, int32_t b, int64_t rows) {
    const mxl_kv_pool_cfg *c = mxl_kv_pool_config(p);
    const mxl_dtype t = c->k_type;
    int64_t n = mxl_kv_pool_block_stride(p), row = c->kv_dim;
    for (int64_t l = 0; l < c->n_layers; l++) {
        int64_t ea = a * n + l * MXL_KV_BLOCK * row, ebb = b * n + l * MXL_KV_BLOCK * row;
        const uint8_t *k = mxl_kv_pool_k(p), *v = mxl_kv_pool_v(p);
        const size_t oa = mxl_kv_offset_bytes(t, ea), ob = mxl_kv_offset_bytes(t, ebb), len = mxl_kv_offset_bytes(t, rows * row);
        if (memcmp(k + oa, k + ob, len) || memcmp(v + oa, v + ob, len)) return false;
        const float *ks = mxl_kv_pool_k_scale(p), *vs = mxl_kv_pool_v_scale(p);
        if (ks && (memcmp(ks + ea / c->group, ks + ebb / c->group, (size_t)(rows * row / c->group) * 4) ||
                   memcmp(vs + ea / c->group, vs + ebb / c->group, (size_t)(rows * row / c->group) * 4)))
            return false;
    }
    return true;
}

TEST(kv_pool_copy_on_write) {
    mxl_dtype types[8] = {MXL_DTYPE_F32, MXL_DTYPE_F16, MXL_DTYPE_I8, MXL_DTYPE_Q8_0, MXL_DTYPE_Q4_0, MXL_DTYPE_Q4_1, MXL_DTYPE_Q5_0, MXL_DTYPE_Q5_1};
    mxl_error err;
    for (int t = 0; t < 8; t++) {
        mxl_kv_pool *p = tiny_pool(types[t], types[t], 3);
        REQUIRE(p);
        int32_t a, b, z;
        REQUIRE(mxl_kv_pool_alloc(p, &a, &err) == MXL_OK && mxl_kv_pool_alloc(p, &b, &err) == MXL_OK &&
                mxl_kv_pool_alloc(p, &z, &err) == MXL_OK);
        fill_block(p, a, 11);
        fill_block(p, b, 99);
        fill_block(p, z, 55); /* the block the copy will land in (the free list is LIFO) */
        mxl_kv_pool_release(p, z);
        /* private: no copy */
        int32_t id = a;
        CHECK(mxl_kv_pool_make_writable(p, &id, 32, &err) == MXL_OK && id == a);
        /* shared: the holder gets a fresh block with the kept rows, the other keeps the original */
        mxl_kv_pool_retain(p, a);
        id = a;
        CHECK(mxl_kv_pool_make_writable(p, &id, 20, &err) == MXL_OK);
        CHECK(id != a && id != b && mxl_kv_pool_refcount(p, a) == 1 && mxl_kv_pool_refcount(p, id) == 1);
        CHECK(rows_equal(p, a, id, 20));
        CHECK(id == z && !rows_equal(p, a, id, 21)); /* row 20 was not copied: it keeps the old bytes */
        /* exhausted: COW fails and leaves the id alone */
        mxl_kv_pool_retain(p, b);
        int32_t idb = b;
        CHECK(mxl_kv_pool_make_writable(p, &idb, 32, &err) == MXL_ERR_NOMEM && idb == b && mxl_kv_pool_refcount(p, b) == 2);
        mxl_kv_pool_release(p, b);
        /* published blocks are immutable even with one reference */
        int32_t toks[MXL_KV_BLOCK];
        for (int i = 0; i < MXL_KV_BLOCK; i++) toks[i] = i;
        mxl_kv_pool_publish(p, b, 1234, 5, toks);
        CHECK(mxl_kv_pool_published(p, b) && !mxl_kv_pool_writable(p, b));
        mxl_kv_pool_release(p, id); /* frees a block for the copy */
        idb = b;
        CHECK(mxl_kv_pool_make_writable(p, &idb, 32, &err) == MXL_OK && idb != b && rows_equal(p, b, idb, 32));
        CHECK(mxl_kv_pool_refcount(p, b) == 0 && mxl_kv_pool_published(p, b) && mxl_kv_pool_lookup(p, 1234, 5, toks) == b);
        mxl_kv_pool_destroy(p);
    }
}

TEST(kv_pool_index_lru_eviction) {
    mxl_kv_pool *p = tiny_pool(MXL_DTYPE_F16, MXL_DTYPE_F16, 3);
    REQUIRE(p);
    mxl_error err;
    int32_t t0[MXL_KV_BLOCK], t1[MXL_KV_BLOCK];
    for (int i = 0; i < MXL_KV_BLOCK; i++) t0[i] = 100 + i, t1[i] = 200 + i;
    uint64_t seed = mxl_kv_pool_chain_seed(NULL), h0 = mxl_kv_pool_chain_hash(seed, t0), h1 = mxl_kv_pool_chain_hash(h0, t1);
    CHECK(mxl_kv_pool_chain_seed("alice") != seed && mxl_kv_pool_chain_seed("") == seed);
    CHECK(mxl_kv_pool_chain_hash(mxl_kv_pool_chain_seed("alice"), t0) != h0 && h1 != h0);
    int32_t a, b, c;
    REQUIRE(mxl_kv_pool_alloc(p, &a, &err) == MXL_OK && mxl_kv_pool_alloc(p, &b, &err) == MXL_OK);
    mxl_kv_pool_publish(p, a, h0, seed, t0);
    mxl_kv_pool_publish(p, b, h1, h0, t1);
    CHECK(mxl_kv_pool_lookup(p, h0, seed, t0) == a && mxl_kv_pool_lookup(p, h1, h0, t1) == b);
    CHECK(mxl_kv_pool_lookup(p, h1, seed, t1) == -1); /* wrong parent */
    t1[5]++;
    CHECK(mxl_kv_pool_lookup(p, h1, h0, t1) == -1); /* wrong tokens (a hash collision) */
    t1[5]--;
    /* released published blocks stay cached; b released first is the older */
    mxl_kv_pool_release(p, b);
    mxl_kv_pool_release(p, a);
    mxl_kv_pool_stats st;
    mxl_kv_pool_get_stats(p, &st);
    CHECK(st.used == 0 && st.cached == 2 && st.evictable == 2 && st.free == 1 && mxl_kv_pool_available(p) == 3);
    REQUIRE(mxl_kv_pool_alloc(p, &c, &err) == MXL_OK); /* the free block first */
    CHECK(c != a && c != b && mxl_kv_pool_lookup(p, h0, seed, t0) == a);
    int32_t d;
    REQUIRE(mxl_kv_pool_alloc(p, &d, &err) == MXL_OK); /* evicts b, the least recently released */
    CHECK(d == b && mxl_kv_pool_lookup(p, h1, h0, t1) == -1 && mxl_kv_pool_lookup(p, h0, seed, t0) == a);
    mxl_kv_pool_retain(p, a); /* a cache hit takes it out of the LRU */
    int32_t e = -1;
    CHECK(mxl_kv_pool_alloc(p, &e, &err) == MXL_ERR_NOMEM);
    mxl_kv_pool_get_stats(p, &st);
    CHECK(st.used == 3 && st.cached == 1 && st.evictable == 0 && st.evictions == 1);
    mxl_kv_pool_release(p, a);
    CHECK(mxl_kv_pool_evict_all(p) == 1 && mxl_kv_pool_lookup(p, h0, seed, t0) == -1);
    mxl_kv_pool_destroy(p);
}

/* Random operations against a naive model of the index (hash -> block). */
TEST(kv_pool_index_random_against_model) {
    enum { NB = 24, OPS = 6000 };
    mxl_kv_pool *p = tiny_pool(MXL_DTYPE_F16, MXL_DTYPE_F16, NB);
    REQUIRE(p);
    int32_t ref[NB] = {0};
    uint64_t key[NB];
    bool pub[NB] = {false};
    int bad = 0;
    mxl_error err;
    for (int op = 0; op < OPS; op++) {
        uint32_t r = urand() % 4;
        int32_t toks[MXL_KV_BLOCK];
        if (r == 0) {
            int32_t id;
            int64_t avail = 0;
            for (int i = 0; i < NB; i++) avail += ref[i] == 0;
            mxl_status st = mxl_kv_pool_alloc(p, &id, &err);
            if ((st == MXL_OK) != (avail > 0)) bad++;
            if (st == MXL_OK) {
                if (ref[id] != 0) bad++;
                ref[id] = 1;
                pub[id] = false;
            }
        } else {
            int32_t id = (int32_t)(urand() % NB);
            if (r == 1 && ref[id] > 0) {
                mxl_kv_pool_release(p, id);
                ref[id]--;
            } else if (r == 2 && (ref[id] > 0 || pub[id])) {
                mxl_kv_pool_retain(p, id);
                ref[id]++;
            } else if (r == 3 && ref[id] > 0 && !pub[id]) {
                /* hashes collide in their table slots on purpose: few distinct low bits */
                key[id] = (uint64_t)(urand() % 64) << 40 | (uint64_t)id;
                for (int i = 0; i < MXL_KV_BLOCK; i++) toks[i] = (int32_t)key[id] + i;
                mxl_kv_pool_publish(p, id, key[id], 0, toks);
                pub[id] = true;
            }
        }
        /* a published block is gone once evicted: the pool reports which are still published */
        for (int i = 0; i < NB; i++) {
            if (pub[i] && !mxl_kv_pool_published(p, i)) pub[i] = false;
            if (mxl_kv_pool_refcount(p, i) != ref[i]) bad++;
        }
        for (int i = 0; i < NB; i++) {
            if (!pub[i]) continue;
            for (int k = 0; k < MXL_KV_BLOCK; k++) toks[k] = (int32_t)key[i] + k;
            if (mxl_kv_pool_lookup(p, key[i], 0, toks) != i) bad++;
        }
    }
    CHECK(bad == 0);
    mxl_kv_pool_destroy(p);
}

/* Attention through a shuffled block table equals the contiguous layout bit for bit. */
TEST(kv_pool_paged_attention_equals_contiguous) {
    enum { NH = 4, NKVH = 2, HD = 64, KVD = NKVH * HD, NKV = 77, NQ = 5, BS = MXL_KV_BLOCK, NBLK = 3 };
    enum { POOL = 6, NL = 2 }; /* a pool of 6 blocks of 2 layers: layer 1 of blocks {4, 1, 3} */
    static float kf[NKV * KVD], vf[NKV * KVD], q[NQ * NH * HD];
    for (int i = 0; i < NKV * KVD; i++) kf[i] = frand(), vf[i] = frand();
    for (int i = 0; i < NQ * NH * HD; i++) q[i] = frand();
    const int32_t table[NBLK] = {4, 1, 3};
    mxl_dtype types[8] = {MXL_DTYPE_F32, MXL_DTYPE_F16, MXL_DTYPE_I8, MXL_DTYPE_Q8_0, MXL_DTYPE_Q4_0, MXL_DTYPE_Q4_1, MXL_DTYPE_Q5_0, MXL_DTYPE_Q5_1};
    mxl_threadpool *tp = NULL;
    REQUIRE(mxl_threadpool_create(2, &tp, NULL) == MXL_OK);
    int64_t qpos[NQ] = {0, 31, 32, 60, NKV - 1};
    for (int t = 0; t < 8; t++) {
        mxl_dtype ty = types[t];
        int64_t stride = NL * BS * KVD, layer_off = BS * KVD;
        uint8_t *ck = mxl_calloc(mxl_kv_offset_bytes(ty, NKV * KVD), 1), *cv = mxl_calloc(mxl_kv_offset_bytes(ty, NKV * KVD), 1);
        uint8_t *pk = mxl_calloc(mxl_kv_offset_bytes(ty, POOL * stride), 1), *pv = mxl_calloc(mxl_kv_offset_bytes(ty, POOL * stride), 1);
        float *cks = mxl_calloc(NKV * KVD / 32, 4), *cvs = mxl_calloc(NKV * KVD / 32, 4);
        float *pks = mxl_calloc((size_t)POOL * stride / 32, 4), *pvs = mxl_calloc((size_t)POOL * stride / 32, 4);
        REQUIRE(ck && cv && pk && pv && cks && cvs && pks && pvs);
        for (int j = 0; j < NKV; j++) {
            int64_t c0 = (int64_t)j * KVD, p0 = table[j / BS] * stride + layer_off + (j % BS) * KVD;
            for (int x = 0; x < 2; x++) {
                const float *src = (x ? vf : kf) + c0;
                uint8_t *cd = (x ? cv : ck), *pd = (x ? pv : pk);
                float *cs = x ? cvs : cks, *ps = x ? pvs : pks;
                if (ty == MXL_DTYPE_F32) {
                    memcpy(cd + c0 * 4, src, KVD * 4);
                    memcpy(pd + p0 * 4, src, KVD * 4);
                } else if (ty == MXL_DTYPE_F16) {
                    for (int i = 0; i < KVD; i++) ((uint16_t *)cd)[c0 + i] = ((uint16_t *)pd)[p0 + i] = mxl_f32_to_f16(src[i]);
                } else if (ty == MXL_DTYPE_I8) {
                    mxl_kv_quantize_i8(src, KVD, 32, (int8_t *)cd + c0, cs + c0 / 32);
                    mxl_kv_quantize_i8(src, KVD, 32, (int8_t *)pd + p0, ps + p0 / 32);
                } else {
                    mxl_kv_quantize_blocks(ty, src, KVD, cd + mxl_kv_offset_bytes(ty, c0));
                    mxl_kv_quantize_blocks(ty, src, KVD, pd + mxl_kv_offset_bytes(ty, p0));
                }
            }
        }
        bool i8 = ty == MXL_DTYPE_I8;
        mxl_kv_split_view cvw = {ty, ty, ck, cv, i8 ? cks : NULL, i8 ? cvs : NULL, 32, NKV, KVD};
        mxl_kv_paged_view pvw = {ty, ty, pk + mxl_kv_offset_bytes(ty, layer_off), pv + mxl_kv_offset_bytes(ty, layer_off), i8 ? pks + layer_off / 32 : NULL,
                                 i8 ? pvs + layer_off / 32 : NULL, 32, NKV, KVD, BS, stride, table, 0};
        for (int win = 0; win < 2; win++)
            for (int isa = 0; isa < 2; isa++) {
                mxl_attn_params ap = {NH, NKVH, HD, 0.125f, win ? 0.0f : 30.0f, NULL, win ? 20 : 0, 1, 0, 0, NULL};
                static float o1[NQ * NH * HD], o2[NQ * NH * HD], scr[NKV * MXL_ATTN_HEAD_GROUP * 2]; /* scratch_floats(NKV, 2) */
                mxl_cpu_isa is = isa ? mxl_cpu_isa_detect() : MXL_CPU_ISA_SCALAR;
                mxl_cpu_attention_kv(&ap, q, NQ, qpos, &cvw, o1, scr, isa ? tp : NULL, is);
                mxl_cpu_attention_paged(&ap, q, NQ, qpos, &pvw, o2, scr, isa ? tp : NULL, is);
                CHECK(memcmp(o1, o2, sizeof o1) == 0);
            }
        mxl_free(ck), mxl_free(cv), mxl_free(pk), mxl_free(pv), mxl_free(cks), mxl_free(cvs), mxl_free(pks), mxl_free(pvs);
    }
    mxl_threadpool_destroy(tp);
}

/* ---- decoder states on a shared pool ---- */

static bool load_fixture(const char *name, mxl_checkpoint **ck, mxl_decoder *d) {
    char path[1024];
    mxl_error err;
    snprintf(path, sizeof path, "%s/tests/fixtures/decoders/%s", mxl_test_repo_root(), name);
    if (mxl_checkpoint_open(path, ck, &err) != MXL_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        return false;
    }
    if (mxl_decoder_load(*ck, d, &err) != MXL_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        mxl_checkpoint_close(*ck);
        return false;
    }
    return true;
}

static int32_t tok(int64_t vocab, int k) { return (int32_t)(((int64_t)k * 104729 + 13) % vocab); }

/* the fixtures' context is 64 positions (2 blocks) */
enum { N_ALL = 56, N_FORK = 40, N_STEPS = 4 };

/* The yardstick: a private-pool state running tokens 0..N_ALL-1 in one call (logits of the last),
 * then N_STEPS single tokens. rows [1 + N_STEPS, vocab]. */
static bool recompute(const mxl_decoder *d, bool reference, const mxl_decoder_kv_opts *o, int64_t upto, float *rows) {
    mxl_decoder_state *s = NULL;
    mxl_error err;
    int32_t ids[N_ALL + N_STEPS];
    for (int k = 0; k < N_ALL + N_STEPS; k++) ids[k] = tok(d->hp.vocab, k);
    if (mxl_decoder_state_create_ex(d, 128, 16, NULL, o, &s, &err) != MXL_OK) return false;
    mxl_decoder_state_set_reference(s, reference);
    bool ok = mxl_decoder_forward(d, s, ids, upto, rows, &err) == MXL_OK;
    for (int k = 0; ok && k < N_STEPS; k++)
        ok = mxl_decoder_forward(d, s, ids + upto + k, 1, rows + (size_t)(k + 1) * (size_t)d->hp.vocab, &err) == MXL_OK;
    mxl_decoder_state_destroy(s);
    return ok;
}

static void fork_case(const char *name, bool reference, mxl_decoder_kv_type kt, int *mxl_test_failed_) {
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    REQUIRE(load_fixture(name, &ck, &d));
    int64_t V = d.hp.vocab;
    size_t rows = (size_t)(1 + N_STEPS) * (size_t)V;
    float *want = mxl_malloc(rows * sizeof(float)), *want_a = mxl_malloc(rows * sizeof(float)), *got = mxl_malloc(rows * sizeof(float));
    REQUIRE(want && want_a && got);
    const mxl_decoder_kv_opts o = {kt, kt, 0, 0, 0};
    int32_t ids[N_ALL + N_STEPS];
    for (int k = 0; k < N_ALL + N_STEPS; k++) ids[k] = tok(V, k);
    REQUIRE(recompute(&d, reference, &o, N_ALL, want));
    REQUIRE(recompute(&d, reference, &o, N_FORK + 3, want_a));

    mxl_kv_pool_cfg pc;
    mxl_kv_pool *pool = NULL;
    REQUIRE(mxl_decoder_kv_pool_cfg(&d, &o, reference, 16, &pc, &err) == MXL_OK);
    REQUIRE(mxl_kv_pool_create(&pc, &pool, &err) == MXL_OK);
    mxl_decoder_state *a = NULL, *b = NULL, *c = NULL;
    REQUIRE(mxl_decoder_state_create_pooled(&d, pool, 128, 16, NULL, &a, &err) == MXL_OK);
    REQUIRE(mxl_decoder_state_create_pooled(&d, pool, 128, 16, NULL, &b, &err) == MXL_OK);
    REQUIRE(mxl_decoder_state_create_pooled(&d, pool, 128, 16, NULL, &c, &err) == MXL_OK);
    mxl_decoder_state_set_reference(a, reference);
    mxl_decoder_state_set_reference(b, reference);
    mxl_decoder_state_set_reference(c, reference);
    CHECK(mxl_decoder_state_kv_type(a, false) == (kt != MXL_DECODER_KV_AUTO ? kt : reference ? MXL_DECODER_KV_F32 : MXL_DECODER_KV_F16));

    /* a runs the first N_FORK + 3 tokens (block 1 partial: positions 32..42) */
    CHECK(mxl_decoder_forward(&d, a, ids, N_FORK + 3, got, &err) == MXL_OK);
    CHECK(memcmp(got, want_a, (size_t)V * sizeof(float)) == 0);
    const int32_t *ta = NULL;
    CHECK(mxl_decoder_state_blocks(a, &ta) == 2);
    int32_t a_block1 = ta[1];
    /* b adopts a's first N_FORK positions (sharing the partial block) and runs the rest */
    CHECK(mxl_decoder_state_fork(b, a, N_FORK, &err) == MXL_OK);
    CHECK(mxl_decoder_state_pos(b) == N_FORK && mxl_kv_pool_refcount(pool, a_block1) == 2);
    CHECK(mxl_decoder_forward(&d, b, ids + N_FORK, N_ALL - N_FORK, got, &err) == MXL_OK);
    const int32_t *tb = NULL;
    CHECK(mxl_decoder_state_blocks(b, &tb) == 2 && tb[0] == ta[0] && tb[1] != a_block1); /* block 1 copied on write */
    CHECK(mxl_kv_pool_refcount(pool, a_block1) == 1 && mxl_kv_pool_refcount(pool, ta[0]) == 2);
    for (int k = 0; k < N_STEPS; k++)
        CHECK(mxl_decoder_forward(&d, b, ids + N_ALL + k, 1, got + (size_t)(k + 1) * (size_t)V, &err) == MXL_OK);
    CHECK(memcmp(got, want, rows * sizeof(float)) == 0);
    /* a is untouched by b's writes: its next steps are its own recompute */
    for (int k = 0; k < N_STEPS; k++)
        CHECK(mxl_decoder_forward(&d, a, ids + N_FORK + 3 + k, 1, got + (size_t)(k + 1) * (size_t)V, &err) == MXL_OK);
    CHECK(memcmp(got + V, want_a + V, (size_t)N_STEPS * (size_t)V * sizeof(float)) == 0);

    /* prompt cache: b publishes its full block; c finds it by chain hash and adopts */
    uint64_t seed = mxl_kv_pool_chain_seed("k"), h0 = mxl_kv_pool_chain_hash(seed, ids);
    mxl_kv_pool_publish(pool, tb[0], h0, seed, ids);
    int32_t hit = mxl_kv_pool_lookup(pool, h0, seed, ids);
    CHECK(hit == tb[0]);
    CHECK(mxl_kv_pool_lookup(pool, mxl_kv_pool_chain_hash(mxl_kv_pool_chain_seed("other"), ids), mxl_kv_pool_chain_seed("other"), ids) == -1);
    mxl_decoder_state_destroy(b); /* the published blocks survive as cache */
    b = NULL;
    CHECK(mxl_decoder_state_adopt(c, &hit, MXL_KV_BLOCK, &err) == MXL_OK);
    CHECK(mxl_decoder_forward(&d, c, ids + MXL_KV_BLOCK, N_ALL - MXL_KV_BLOCK, got, &err) == MXL_OK);
    CHECK(memcmp(got, want, (size_t)V * sizeof(float)) == 0);
    /* c truncates into the published block and rewrites it: copy-on-write keeps the cached one */
    mxl_decoder_state_truncate(c, 20);
    CHECK(mxl_decoder_forward(&d, c, ids + 20, N_ALL - 20, got, &err) == MXL_OK);
    CHECK(memcmp(got, want, (size_t)V * sizeof(float)) == 0);
    CHECK(mxl_kv_pool_lookup(pool, h0, seed, ids) == hit && mxl_kv_pool_refcount(pool, hit) == 1); /* a's */
    const int32_t *tc = NULL;
    mxl_decoder_state_blocks(c, &tc);
    CHECK(tc[0] != hit);

    /* a batch of a forked state and its source equals their one-by-one bits */
    mxl_decoder_state *f1 = NULL;
    REQUIRE(mxl_decoder_state_create_pooled(&d, pool, 128, 16, NULL, &f1, &err) == MXL_OK);
    mxl_decoder_state_set_reference(f1, reference);
    CHECK(mxl_decoder_state_fork(f1, c, N_FORK, &err) == MXL_OK);
    CHECK(mxl_decoder_forward(&d, f1, ids + N_FORK, 3, got, &err) == MXL_OK); /* now f1 = a's first N_FORK + 3 */
    mxl_decoder_state *pair[2] = {f1, c};
    int32_t next[2] = {ids[N_FORK + 3], ids[N_ALL]};
    float *two = mxl_malloc(2 * (size_t)V * sizeof(float));
    REQUIRE(two);
    CHECK(mxl_decoder_forward_batch(&d, pair, next, 2, two, &err) == MXL_OK);
    CHECK(memcmp(two, want_a + V, (size_t)V * sizeof(float)) == 0);
    CHECK(memcmp(two + V, want + V, (size_t)V * sizeof(float)) == 0);
    mxl_free(two);

    mxl_decoder_state_destroy(a);
    mxl_decoder_state_destroy(c);
    mxl_decoder_state_destroy(f1);
    mxl_kv_pool_stats st;
    mxl_kv_pool_get_stats(pool, &st);
    CHECK(st.used == 0 && st.free + st.evictable == st.total);
    mxl_kv_pool_destroy(pool);
    mxl_free(want), mxl_free(want_a), mxl_free(got);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
}

TEST(kv_pool_fork_equals_recompute_bitwise) {
    /* qwen3: QK-norm; gemma3_text: sliding windows; gpt2: learned positions; phi3_mlx_q8: MLX */
    const char *names[] = {"qwen3", "gemma3_text", "gpt2", "phi3_mlx_q8"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int before = *mxl_test_failed_;
        fork_case(names[i], false, MXL_DECODER_KV_AUTO, mxl_test_failed_);
        fork_case(names[i], true, MXL_DECODER_KV_AUTO, mxl_test_failed_);
        if (*mxl_test_failed_ != before) fprintf(stderr, "  (fixture %s)\n", names[i]);
    }
    fork_case("llama", false, MXL_DECODER_KV_I8, mxl_test_failed_);
    /* the block formats (head_dim 32 fixtures: llama's 16 cannot take them) */
    fork_case("qwen3", false, MXL_DECODER_KV_Q8_0, mxl_test_failed_);
    fork_case("qwen3", true, MXL_DECODER_KV_Q4_0, mxl_test_failed_);
    fork_case("gemma", false, MXL_DECODER_KV_Q5_1, mxl_test_failed_);
}

TEST(kv_pool_decoder_exhaustion_and_return) {
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    REQUIRE(load_fixture("qwen3", &ck, &d));
    int64_t V = d.hp.vocab;
    float *lg = mxl_malloc((size_t)V * sizeof(float));
    REQUIRE(lg);
    mxl_kv_pool_cfg pc;
    mxl_kv_pool *pool = NULL;
    REQUIRE(mxl_decoder_kv_pool_cfg(&d, NULL, false, 3, &pc, &err) == MXL_OK);
    REQUIRE(mxl_kv_pool_create(&pc, &pool, &err) == MXL_OK);
    mxl_decoder_state *a = NULL, *b = NULL;
    REQUIRE(mxl_decoder_state_create_pooled(&d, pool, 128, 8, NULL, &a, &err) == MXL_OK);
    REQUIRE(mxl_decoder_state_create_pooled(&d, pool, 128, 8, NULL, &b, &err) == MXL_OK);
    CHECK(mxl_decoder_state_kv_bytes(a) == 0);
    int32_t ids[64];
    for (int k = 0; k < 64; k++) ids[k] = tok(V, k);
    CHECK(mxl_decoder_forward(&d, a, ids, 32, lg, &err) == MXL_OK); /* 1 block */
    CHECK(mxl_decoder_state_kv_bytes(a) == mxl_kv_pool_block_bytes(&pc));
    CHECK(mxl_decoder_forward(&d, b, ids, 60, lg, &err) == MXL_OK); /* 2 blocks: the pool is full */
    CHECK(mxl_decoder_forward(&d, a, ids + 32, 1, lg, &err) == MXL_ERR_NOMEM);
    CHECK(mxl_decoder_state_pos(a) == 32 && strstr(err.msg, "exhausted"));
    mxl_decoder_state *pair[2] = {b, a};
    int32_t two[2] = {1, 2};
    float *lg2 = mxl_malloc(2 * (size_t)V * sizeof(float));
    REQUIRE(lg2);
    /* b has room in its block, a needs a new one: the batch fails, positions kept */
    CHECK(mxl_decoder_forward_batch(&d, pair, two, 2, lg2, &err) == MXL_ERR_NOMEM);
    CHECK(mxl_decoder_state_pos(a) == 32 && mxl_decoder_state_pos(b) == 60);
    mxl_decoder_state_truncate(b, 20); /* gives b's block 1 back */
    CHECK(mxl_decoder_forward_batch(&d, pair, two, 2, lg2, &err) == MXL_OK);
    CHECK(mxl_decoder_state_pos(a) == 33 && mxl_decoder_state_pos(b) == 21);
    mxl_kv_pool_stats st;
    mxl_kv_pool_get_stats(pool, &st);
    CHECK(st.used == 3 && st.free == 0);
    mxl_decoder_state_destroy(a);
    mxl_decoder_state_destroy(b);
    mxl_kv_pool_get_stats(pool, &st);
    CHECK(st.used == 0 && st.free == 3);
    /* a pool of another shape is refused */
    mxl_kv_pool_cfg other = pc;
    other.kv_dim *= 2;
    mxl_kv_pool *op = NULL;
    REQUIRE(mxl_kv_pool_create(&other, &op, &err) == MXL_OK);
    mxl_decoder_state *x = NULL;
    CHECK(mxl_decoder_state_create_pooled(&d, op, 64, 8, NULL, &x, &err) == MXL_ERR_ARG && !x);
    mxl_kv_pool_destroy(op);
    mxl_free(lg), mxl_free(lg2);
    mxl_kv_pool_destroy(pool);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
}

/* TurboQuant's F16 boundary V layers (v_edge): bytes per block, where each layer's rows live,
 * and that copy-on-write and the slot files (block save / load) carry every region. */
TEST(kv_pool_v_edge_regions) {
    enum { NL = 6, KVD = 64, E = 2 };
    mxl_kv_pool_cfg c = {NL, KVD, 32, MXL_DTYPE_TURBO4, MXL_DTYPE_TURBO4, 3, NULL, false, E, 0};
    /* K: 6 layers of turbo4; V: 2 middle layers of turbo4 and 4 edge layers of f16 */
    CHECK(mxl_kv_pool_block_bytes(&c) == 6ull * 32 * KVD / 32 * 18 + 2ull * 32 * KVD / 32 * 18 + 4ull * 32 * KVD * 2);
    mxl_kv_pool_cfg bad = c;
    bad.v_edge = 4; /* more than half the layers */
    mxl_kv_pool *p = NULL;
    mxl_error err;
    CHECK(mxl_kv_pool_create(&bad, &p, &err) == MXL_ERR_ARG && !p);
    REQUIRE(mxl_kv_pool_create(&c, &p, &err) == MXL_OK);
    const int64_t want_layer[NL] = {0, 1, 0, 1, 2, 3}; /* V: edge 0, 1; middle 0, 1; edge 2, 3 */
    for (int64_t l = 0; l < NL; l++) {
        mxl_kv_pool_part k, v;
        mxl_kv_pool_layer_part(p, false, l, &k);
        mxl_kv_pool_layer_part(p, true, l, &v);
        CHECK(k.type == MXL_DTYPE_TURBO4 && k.layer == l && k.stride == NL * 32 * KVD);
        const bool edge = l < E || l >= NL - E;
        CHECK(v.type == (edge ? MXL_DTYPE_F16 : MXL_DTYPE_TURBO4) && v.layer == want_layer[l]);
        CHECK(v.stride == (edge ? 2 * E : NL - 2 * E) * 32 * KVD && !v.scale);
    }
    /* fill block a with a pattern in every region, copy-on-write it, save and load it */
    int32_t a, b = -1, d;
    REQUIRE(mxl_kv_pool_alloc(p, &a, &err) == MXL_OK);
    const uint64_t bb = mxl_kv_pool_block_bytes(&c);
    uint8_t *img = mxl_malloc(bb), *img2 = mxl_malloc(bb);
    REQUIRE(img && img2);
    for (uint64_t i = 0; i < bb; i++) img[i] = (uint8_t)(urand() & 0xff);
    mxl_kv_pool_block_load(p, a, img);
    b = a;
    mxl_kv_pool_retain(p, a);
    REQUIRE(mxl_kv_pool_make_writable(p, &b, 32, &err) == MXL_OK); /* shared: copied */
    CHECK(b != a);
    mxl_kv_pool_block_save(p, b, img2);
    CHECK(memcmp(img, img2, bb) == 0);
    REQUIRE(mxl_kv_pool_alloc(p, &d, &err) == MXL_OK);
    mxl_kv_pool_block_load(p, d, img2);
    memset(img2, 0, bb);
    mxl_kv_pool_block_save(p, d, img2);
    CHECK(memcmp(img, img2, bb) == 0);
    mxl_free(img), mxl_free(img2);
    mxl_kv_pool_destroy(p);
    /* k_last (--kv-skip-last-layer): the last layer's K in a K edge region, its V with the last V
     * edges (max(v_edge, k_last) at the end) */
    mxl_kv_pool_cfg ck = {NL, KVD, 32, MXL_DTYPE_Q8_0, MXL_DTYPE_TURBO4, 3, NULL, false, 1, 1};
    CHECK(mxl_kv_pool_block_bytes(&ck) == 5ull * 32 * KVD / 32 * 34 + 32ull * KVD * 2 + 4ull * 32 * KVD / 32 * 18 + 2ull * 32 * KVD * 2);
    ck.v_edge = 0, ck.k_last = 2, ck.v_type = MXL_DTYPE_Q8_0;
    REQUIRE(mxl_kv_pool_create(&ck, &p, &err) == MXL_OK);
    for (int64_t l = 0; l < NL; l++) {
        mxl_kv_pool_part k, v;
        mxl_kv_pool_layer_part(p, false, l, &k);
        mxl_kv_pool_layer_part(p, true, l, &v);
        const bool last = l >= NL - 2;
        CHECK(k.type == (last ? MXL_DTYPE_F16 : MXL_DTYPE_Q8_0) && k.layer == (last ? l - (NL - 2) : l));
        CHECK(v.type == (last ? MXL_DTYPE_F16 : MXL_DTYPE_Q8_0) && v.layer == (last ? l - (NL - 2) : l));
    }
    mxl_kv_pool_destroy(p);
    ck.k_last = NL + 1;
    CHECK(mxl_kv_pool_create(&ck, &p, &err) == MXL_ERR_ARG);
}
