/* kv_pool.c - the KV block pool and its prompt-cache index (kv_pool.h).
 *
 * Bookkeeping per block: reference count, published flag with its hash / parent / 32 token ids,
 * links of the LRU list of evictable cached blocks, and the free stack. The index is an
 * open-addressing table (linear probing, backward-shift deletion) of block ids keyed by hash,
 * sized to twice the block count, so lookups stay short and nothing grows after create. */
#include "models/kv_pool.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

struct mxl_kv_pool {
    mxl_kv_pool_cfg cfg;
    uint64_t block_bytes;
    int64_t stride;                /* elements between blocks (K; V too without edge layers) */
    int64_t vstride, estride;      /* ... of the V region and of the V edge region */
    int64_t kestride;              /* ... of the K edge region */
    int64_t vf, vl, kl;            /* F16 edge layers: V's first and last, K's last */
    uint8_t *k, *v, *ve, *ke;      /* storage (ve / ke: the edge regions, NULL without them) */
    float *ks, *vs;                /* I8 scales or NULL */
    const mxl_backend *be;         /* whose buffer holds the storage */
    void *mem;                     /* one buffer for the storage */
    int32_t *ref;                  /* [n_blocks] */
    uint8_t *pub;                  /* [n_blocks] published */
    uint64_t *hash, *parent;       /* [n_blocks] of published blocks */
    int32_t *tokens;               /* [n_blocks, 32] of published blocks */
    int32_t *lru_prev, *lru_next;  /* evictable cached blocks, oldest at lru_head */
    int32_t lru_head, lru_tail;
    double *stamp;                 /* [n_blocks] clock when it last became evictable */
    double clock;
    int32_t *free_stack;           /* [n_blocks] */
    int64_t n_free, n_used, n_pub, n_evictable;
    uint64_t evictions;
    int32_t *table;                /* [table_cap] block ids, -1 empty */
    uint64_t table_mask;
    void *meta;                    /* one allocation for the bookkeeping arrays */
};

/* The block formats of llama.cpp's KV cache types (32 elements a block, op_types.h). */
static bool block_type(mxl_dtype t) {
    return t == MXL_DTYPE_Q8_0 || t == MXL_DTYPE_Q4_0 || t == MXL_DTYPE_Q4_1 || t == MXL_DTYPE_Q5_0 || t == MXL_DTYPE_Q5_1 ||
           t == MXL_DTYPE_TURBO4 || t == MXL_DTYPE_TURBO3;
}
static bool valid_type(mxl_dtype t) { return t == MXL_DTYPE_F32 || t == MXL_DTYPE_F16 || t == MXL_DTYPE_I8 || block_type(t); }
/* Bytes of e elements (a multiple of 32 for a block format). */
static uint64_t span_bytes(mxl_dtype t, uint64_t e) { return (uint64_t)mxl_kv_offset_bytes(t, (int64_t)e); }

/* Element counts of one block's K (or V) and of its scales. */
static uint64_t block_elems(const mxl_kv_pool_cfg *c) { return (uint64_t)c->n_layers * MXL_KV_BLOCK * (uint64_t)c->kv_dim; }
/* The F16 edge layers: V's first and last, K's last (kv_pool.h). */
static int64_t edge_vf(const mxl_kv_pool_cfg *c) { return c->v_edge; }
static int64_t edge_vl(const mxl_kv_pool_cfg *c) { return c->v_edge > c->k_last ? c->v_edge : c->k_last; }
static bool edges_fit(const mxl_kv_pool_cfg *c) {
    return c->v_edge >= 0 && c->k_last >= 0 && edge_vf(c) + edge_vl(c) <= c->n_layers && !((c->v_edge || c->k_last) && c->v_in_k);
}
/* ... elements of a block's V edge region and K edge region */
static uint64_t edge_elems(const mxl_kv_pool_cfg *c) { return (uint64_t)(edge_vf(c) + edge_vl(c)) * MXL_KV_BLOCK * (uint64_t)c->kv_dim; }
static uint64_t kedge_elems(const mxl_kv_pool_cfg *c) { return (uint64_t)c->k_last * MXL_KV_BLOCK * (uint64_t)c->kv_dim; }

uint64_t mxl_kv_pool_block_bytes(const mxl_kv_pool_cfg *c) {
    if (c->n_layers <= 0 || c->kv_dim <= 0 || c->n_layers > (1 << 20) || c->kv_dim > (1 << 24)) return 0;
    if (!edges_fit(c)) return 0;
    uint64_t n = block_elems(c), ne = edge_elems(c), nv = n - ne, nke = kedge_elems(c), nk = n - nke;
    uint64_t b = span_bytes(c->k_type, nk) + nke * 2 + (c->v_in_k ? 0 : span_bytes(c->v_type, nv) + ne * 2);
    uint64_t g = c->group > 0 ? (uint64_t)c->group : 1;
    if (c->k_type == MXL_DTYPE_I8) b += nk / g * 4;
    if (c->v_type == MXL_DTYPE_I8 && !c->v_in_k) b += nv / g * 4;
    return b;
}

mxl_status mxl_kv_pool_create(const mxl_kv_pool_cfg *cfg, mxl_kv_pool **out, mxl_error *err) {
    *out = NULL;
    const mxl_kv_pool_cfg *c = cfg;
    if (!valid_type(c->k_type) || !valid_type(c->v_type))
        return mxl_error_set(err, MXL_ERR_ARG, "KV pool: storage types must be f32, f16, int8, q8_0, q4_0, q4_1, q5_0, q5_1, turbo4 or turbo3");
    if (!edges_fit(c))
        return mxl_error_set(err, MXL_ERR_ARG, "KV pool: F16 edge layers (V %lld at each end, K and V the last %lld) do not fit %lld layers",
                             (long long)c->v_edge, (long long)c->k_last, (long long)c->n_layers);
    if ((block_type(c->k_type) || block_type(c->v_type)) && c->kv_dim % 32 != 0)
        return mxl_error_set(err, MXL_ERR_ARG, "KV pool: the block formats need a KV width that is a multiple of 32, not %lld",
                             (long long)c->kv_dim);
    if (c->v_in_k && c->v_type != c->k_type) return mxl_error_set(err, MXL_ERR_ARG, "KV pool: V read from K must have K's type");
    bool i8 = c->k_type == MXL_DTYPE_I8 || c->v_type == MXL_DTYPE_I8;
    if (i8 && (c->group <= 0 || c->kv_dim % c->group != 0))
        return mxl_error_set(err, MXL_ERR_ARG, "KV pool: int8 group %lld does not divide the KV width %lld", (long long)c->group,
                             (long long)c->kv_dim);
    uint64_t bb = mxl_kv_pool_block_bytes(c);
    if (bb == 0) return mxl_error_set(err, MXL_ERR_ARG, "KV pool: bad shape (%lld layers, KV width %lld)", (long long)c->n_layers, (long long)c->kv_dim);
    if (c->n_blocks <= 0 || c->n_blocks > (INT64_C(1) << 30))
        return mxl_error_set(err, MXL_ERR_ARG, "KV pool: %lld blocks is out of range (1..2^30)", (long long)c->n_blocks);
    uint64_t nb = (uint64_t)c->n_blocks, n = block_elems(c), ne = edge_elems(c), nv = n - ne, nke = kedge_elems(c), nk = n - nke;
    uint64_t ns = i8 ? nk / (uint64_t)c->group : 0, nvs = i8 ? nv / (uint64_t)c->group : 0;
    uint64_t sizes[6] = {0, 0, 0, 0, 0, 0}, total = 0;
    const bool has_v = !c->v_in_k;
    if (mxl_mul_u64(nb, span_bytes(c->k_type, nk), &sizes[0]) || mxl_mul_u64(nb, has_v ? span_bytes(c->v_type, nv) : 0, &sizes[1]) ||
        mxl_mul_u64(nb, c->k_type == MXL_DTYPE_I8 ? ns * 4 : 0, &sizes[2]) ||
        mxl_mul_u64(nb, has_v && c->v_type == MXL_DTYPE_I8 ? nvs * 4 : 0, &sizes[3]) || mxl_mul_u64(nb, ne * 2, &sizes[4]) ||
        mxl_mul_u64(nb, nke * 2, &sizes[5]))
        return mxl_error_set(err, MXL_ERR_NOMEM, "KV pool: %lld blocks of %llu bytes overflow", (long long)c->n_blocks, (unsigned long long)bb);
    for (int i = 0; i < 6; i++)
        if (mxl_add_u64(total, (sizes[i] + 63) & ~(uint64_t)63, &total) || total > ((uint64_t)1 << 56))
            return mxl_error_set(err, MXL_ERR_NOMEM, "KV pool: %lld blocks of %llu bytes is too large", (long long)c->n_blocks,
                                 (unsigned long long)bb);
    mxl_kv_pool *p = mxl_calloc(1, sizeof *p);
    if (!p) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    p->cfg = *c;
    if (!i8) p->cfg.group = c->group > 0 ? c->group : 1;
    p->block_bytes = bb;
    p->stride = (int64_t)nk;
    p->vstride = (int64_t)nv;
    p->estride = (int64_t)ne;
    p->kestride = (int64_t)nke;
    p->vf = edge_vf(c), p->vl = edge_vl(c), p->kl = c->k_last;
    p->be = c->be ? c->be : mxl_backend_host();
    p->cfg.be = p->be;
    p->mem = p->be->ops->buffer_alloc(p->be, (size_t)total);
    uint64_t cap = 16;
    while (cap < nb * 2) cap <<= 1;
    p->table_mask = cap - 1;
    /* bookkeeping: int32 ref, lru_prev, lru_next, free_stack [nb]; u64 hash, parent [nb];
     * int32 tokens [nb * 32]; int32 table [cap]; u8 pub [nb] */
    size_t meta = (size_t)nb * (4 * 4 + 3 * 8 + 4 * MXL_KV_BLOCK + 1) + (size_t)cap * 4 + 64;
    p->meta = mxl_calloc(1, meta);
    if (!p->mem || !p->meta) {
        uint64_t mb = total >> 20;
        mxl_kv_pool_destroy(p);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory allocating a KV pool of %lld blocks (%llu MB)", (long long)c->n_blocks,
                             (unsigned long long)mb);
    }
    uint8_t *m = p->mem;
    p->k = m;
    m += (sizes[0] + 63) & ~(uint64_t)63;
    p->v = m;
    m += (sizes[1] + 63) & ~(uint64_t)63;
    p->ks = sizes[2] ? (float *)m : NULL;
    m += (sizes[2] + 63) & ~(uint64_t)63;
    p->vs = sizes[3] ? (float *)m : NULL;
    m += (sizes[3] + 63) & ~(uint64_t)63;
    p->ve = sizes[4] ? m : NULL;
    m += (sizes[4] + 63) & ~(uint64_t)63;
    p->ke = sizes[5] ? m : NULL;
    if (!has_v) { /* V is K's */
        p->v = p->k;
        p->vs = p->ks;
    }
    uint8_t *q = p->meta;
    p->hash = (uint64_t *)q, q += nb * 8;
    p->parent = (uint64_t *)q, q += nb * 8;
    p->stamp = (double *)q, q += nb * 8;
    p->ref = (int32_t *)q, q += nb * 4;
    p->lru_prev = (int32_t *)q, q += nb * 4;
    p->lru_next = (int32_t *)q, q += nb * 4;
    p->free_stack = (int32_t *)q, q += nb * 4;
    p->tokens = (int32_t *)q, q += nb * 4 * MXL_KV_BLOCK;
    p->table = (int32_t *)q, q += cap * 4;
    p->pub = q;
    for (uint64_t i = 0; i < cap; i++) p->table[i] = -1;
    /* the stack pops low ids first, so a fresh pool hands out blocks 0, 1, 2, ... */
    for (int64_t i = 0; i < c->n_blocks; i++) p->free_stack[i] = (int32_t)(c->n_blocks - 1 - i);
    p->n_free = c->n_blocks;
    p->lru_head = p->lru_tail = -1;
    *out = p;
    return MXL_OK;
}

void mxl_kv_pool_destroy(mxl_kv_pool *p) {
    if (!p) return;
    if (p->mem) p->be->ops->buffer_free(p->be, p->mem);
    mxl_free(p->meta);
    mxl_free(p);
}

const mxl_kv_pool_cfg *mxl_kv_pool_config(const mxl_kv_pool *p) { return &p->cfg; }

void mxl_kv_pool_get_stats(const mxl_kv_pool *p, mxl_kv_pool_stats *st) {
    st->total = p->cfg.n_blocks;
    st->used = p->n_used;
    st->cached = p->n_pub;
    st->evictable = p->n_evictable;
    st->free = p->n_free;
    st->evictions = p->evictions;
}

int64_t mxl_kv_pool_available(const mxl_kv_pool *p) { return p->n_free + p->n_evictable; }

void *mxl_kv_pool_k(const mxl_kv_pool *p) { return p->k; }
void *mxl_kv_pool_v(const mxl_kv_pool *p) { return p->v; }
float *mxl_kv_pool_k_scale(const mxl_kv_pool *p) { return p->ks; }
float *mxl_kv_pool_v_scale(const mxl_kv_pool *p) { return p->vs; }
int64_t mxl_kv_pool_block_stride(const mxl_kv_pool *p) { return p->stride; }

void mxl_kv_pool_layer_part(const mxl_kv_pool *p, bool v, int64_t l, mxl_kv_pool_part *out) {
    const mxl_kv_pool_cfg *c = &p->cfg;
    MXL_ASSERT(l >= 0 && l < c->n_layers);
    if (!v || c->v_in_k) {
        if (l >= c->n_layers - p->kl) *out = (mxl_kv_pool_part){MXL_DTYPE_F16, p->ke, NULL, p->kestride, l - (c->n_layers - p->kl)};
        else *out = (mxl_kv_pool_part){c->k_type, p->k, p->ks, p->stride, l};
        return;
    }
    const int64_t n_mid = c->n_layers - p->vf - p->vl;
    if (l < p->vf || l >= p->vf + n_mid) *out = (mxl_kv_pool_part){MXL_DTYPE_F16, p->ve, NULL, p->estride, l < p->vf ? l : l - n_mid};
    else *out = (mxl_kv_pool_part){c->v_type, p->v, p->vs, p->vstride, l - p->vf};
}

static void check_id(const mxl_kv_pool *p, int32_t id) { MXL_ASSERT(id >= 0 && id < p->cfg.n_blocks); }

/* ---- LRU of evictable cached blocks ---- */

static void lru_push(mxl_kv_pool *p, int32_t id) {
    p->stamp[id] = p->clock;
    p->lru_prev[id] = p->lru_tail;
    p->lru_next[id] = -1;
    if (p->lru_tail >= 0) p->lru_next[p->lru_tail] = id;
    else p->lru_head = id;
    p->lru_tail = id;
    p->n_evictable++;
}

static void lru_remove(mxl_kv_pool *p, int32_t id) {
    int32_t a = p->lru_prev[id], b = p->lru_next[id];
    if (a >= 0) p->lru_next[a] = b;
    else p->lru_head = b;
    if (b >= 0) p->lru_prev[b] = a;
    else p->lru_tail = a;
    p->n_evictable--;
}

/* ---- hash index ---- */

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t mxl_kv_pool_chain_hash(uint64_t prev, const int32_t *tokens) {
    uint64_t h = mix64(prev ^ 0x9e3779b97f4a7c15ull);
    for (int i = 0; i < MXL_KV_BLOCK; i++) h = mix64(h ^ (uint64_t)(uint32_t)tokens[i]) + (uint64_t)i;
    return h;
}

uint64_t mxl_kv_pool_chain_seed(const char *key) {
    uint64_t h = 0x6d6c7863656c6b76ull; /* the shared partition */
    if (!key) return h;
    for (const unsigned char *s = (const unsigned char *)key; *s; s++) h = mix64(h ^ *s);
    return h;
}

static void table_insert(mxl_kv_pool *p, int32_t id) {
    uint64_t i = mix64(p->hash[id]) & p->table_mask;
    while (p->table[i] >= 0) i = (i + 1) & p->table_mask;
    p->table[i] = id;
}

static void table_remove(mxl_kv_pool *p, int32_t id) {
    uint64_t i = mix64(p->hash[id]) & p->table_mask;
    while (p->table[i] != id) {
        MXL_ASSERT(p->table[i] >= 0);
        i = (i + 1) & p->table_mask;
    }
    /* backward-shift deletion: move later entries of the probe run into the hole */
    uint64_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & p->table_mask;
        int32_t e = p->table[j];
        if (e < 0) break;
        uint64_t home = mix64(p->hash[e]) & p->table_mask;
        /* e may fill the hole when its home is not cyclically within (hole, j] */
        bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
        if (movable) {
            p->table[hole] = e;
            hole = j;
        }
    }
    p->table[hole] = -1;
}

int32_t mxl_kv_pool_lookup(const mxl_kv_pool *p, uint64_t hash, uint64_t parent, const int32_t *tokens) {
    uint64_t i = mix64(hash) & p->table_mask;
    for (int32_t e; (e = p->table[i]) >= 0; i = (i + 1) & p->table_mask)
        if (p->hash[e] == hash && p->parent[e] == parent &&
            memcmp(p->tokens + (size_t)e * MXL_KV_BLOCK, tokens, MXL_KV_BLOCK * sizeof(int32_t)) == 0)
            return e;
    return -1;
}

void mxl_kv_pool_publish(mxl_kv_pool *p, int32_t id, uint64_t hash, uint64_t parent, const int32_t *tokens) {
    check_id(p, id);
    MXL_ASSERT(p->ref[id] > 0);
    if (p->pub[id] || mxl_kv_pool_lookup(p, hash, parent, tokens) >= 0) return;
    p->pub[id] = 1;
    p->hash[id] = hash;
    p->parent[id] = parent;
    memcpy(p->tokens + (size_t)id * MXL_KV_BLOCK, tokens, MXL_KV_BLOCK * sizeof(int32_t));
    table_insert(p, id);
    p->n_pub++;
}

static void unpublish(mxl_kv_pool *p, int32_t id) {
    table_remove(p, id);
    p->pub[id] = 0;
    p->n_pub--;
}

void mxl_kv_pool_set_clock(mxl_kv_pool *p, double now) { p->clock = now; }

int64_t mxl_kv_pool_evict_all(mxl_kv_pool *p) { return mxl_kv_pool_evict_lru(p, 0, 0.0); }

int64_t mxl_kv_pool_evict_lru(mxl_kv_pool *p, int64_t keep, double older_than) {
    int64_t n = 0;
    if (keep < 0) keep = 0;
    /* the LRU is in release order, so stamps grow from head to tail */
    while (p->lru_head >= 0 && (p->n_evictable > keep || p->stamp[p->lru_head] < older_than)) {
        int32_t id = p->lru_head;
        lru_remove(p, id);
        unpublish(p, id);
        p->free_stack[p->n_free++] = id;
        p->evictions++;
        n++;
    }
    return n;
}

/* ---- references ---- */

mxl_status mxl_kv_pool_alloc(mxl_kv_pool *p, int32_t *id, mxl_error *err) {
    int32_t b;
    if (p->n_free > 0) {
        b = p->free_stack[--p->n_free];
    } else if (p->lru_head >= 0) {
        b = p->lru_head;
        lru_remove(p, b);
        unpublish(p, b);
        p->evictions++;
    } else {
        return mxl_error_set(err, MXL_ERR_NOMEM, "KV cache pool exhausted: all %lld blocks of %d positions are in use",
                             (long long)p->cfg.n_blocks, MXL_KV_BLOCK);
    }
    p->ref[b] = 1;
    p->n_used++;
    *id = b;
    return MXL_OK;
}

void mxl_kv_pool_retain(mxl_kv_pool *p, int32_t id) {
    check_id(p, id);
    if (p->ref[id] == 0) {
        MXL_ASSERT(p->pub[id]); /* only a cached block can be picked up again */
        lru_remove(p, id);
        p->n_used++;
    }
    p->ref[id]++;
}

void mxl_kv_pool_release(mxl_kv_pool *p, int32_t id) {
    check_id(p, id);
    MXL_ASSERT(p->ref[id] > 0);
    if (--p->ref[id] > 0) return;
    p->n_used--;
    if (p->pub[id]) lru_push(p, id);
    else p->free_stack[p->n_free++] = id;
}

int32_t mxl_kv_pool_refcount(const mxl_kv_pool *p, int32_t id) {
    check_id(p, id);
    return p->ref[id];
}

bool mxl_kv_pool_published(const mxl_kv_pool *p, int32_t id) {
    check_id(p, id);
    return p->pub[id] != 0;
}

bool mxl_kv_pool_writable(const mxl_kv_pool *p, int32_t id) {
    check_id(p, id);
    return p->ref[id] == 1 && !p->pub[id];
}

/* Copies rows [0, n_rows) of every layer of block src into block dst. */
static void copy_rows(mxl_kv_pool *p, int32_t dst, int32_t src, int64_t n_rows) {
    const mxl_kv_pool_cfg *c = &p->cfg;
    const uint64_t row = (uint64_t)c->kv_dim, g = (uint64_t)c->group, n = (uint64_t)n_rows * row;
    const mxl_backend *be = p->be;
    for (int64_t l = 0; l < c->n_layers; l++)
        for (int v = 0; v < (c->v_in_k ? 1 : 2); v++) {
            mxl_kv_pool_part pt;
            mxl_kv_pool_layer_part(p, v, l, &pt);
            const uint64_t in = (uint64_t)pt.layer * MXL_KV_BLOCK * row;
            const uint64_t e_dst = (uint64_t)dst * (uint64_t)pt.stride + in, e_src = (uint64_t)src * (uint64_t)pt.stride + in;
            be->ops->buffer_copy(be, pt.base + span_bytes(pt.type, e_dst), pt.base + span_bytes(pt.type, e_src), span_bytes(pt.type, n));
            if (pt.scale) be->ops->buffer_copy(be, pt.scale + e_dst / g, pt.scale + e_src / g, (size_t)(n / g) * 4);
        }
}

/* A block's storage is six contiguous runs (K, V, K scales, V scales, F16 edge V, F16 edge K:
 * block-major layout), saved and loaded in that order. */
static void block_runs(const mxl_kv_pool *p, int32_t id, uint8_t *run[6], uint64_t len[6]) {
    const mxl_kv_pool_cfg *c = &p->cfg;
    const uint64_t e = (uint64_t)id * (uint64_t)p->stride, n = (uint64_t)p->stride, g = c->group > 0 ? (uint64_t)c->group : 1;
    const uint64_t ev = (uint64_t)id * (uint64_t)p->vstride, nv = (uint64_t)p->vstride;
    run[0] = p->k + span_bytes(c->k_type, e), len[0] = span_bytes(c->k_type, n);
    run[1] = c->v_in_k ? NULL : p->v + span_bytes(c->v_type, ev), len[1] = c->v_in_k ? 0 : span_bytes(c->v_type, nv);
    run[2] = p->ks ? (uint8_t *)(p->ks + e / g) : NULL, len[2] = p->ks ? n / g * 4 : 0;
    run[3] = p->vs && !c->v_in_k ? (uint8_t *)(p->vs + ev / g) : NULL, len[3] = p->vs && !c->v_in_k ? nv / g * 4 : 0;
    run[4] = p->ve ? p->ve + (uint64_t)id * (uint64_t)p->estride * 2 : NULL, len[4] = p->ve ? (uint64_t)p->estride * 2 : 0;
    run[5] = p->ke ? p->ke + (uint64_t)id * (uint64_t)p->kestride * 2 : NULL, len[5] = p->ke ? (uint64_t)p->kestride * 2 : 0;
}

void mxl_kv_pool_block_save(const mxl_kv_pool *p, int32_t id, void *dst) {
    MXL_ASSERT(id >= 0 && id < p->cfg.n_blocks);
    uint8_t *run[6], *out = dst;
    uint64_t len[6];
    block_runs(p, id, run, len);
    for (int i = 0; i < 6; i++)
        if (len[i]) p->be->ops->buffer_copy(p->be, out, run[i], len[i]), out += len[i];
    MXL_ASSERT((uint64_t)(out - (uint8_t *)dst) == p->block_bytes);
}

void mxl_kv_pool_block_load(mxl_kv_pool *p, int32_t id, const void *src) {
    MXL_ASSERT(id >= 0 && id < p->cfg.n_blocks && mxl_kv_pool_writable(p, id));
    uint8_t *run[6];
    const uint8_t *in = src;
    uint64_t len[6];
    block_runs(p, id, run, len);
    for (int i = 0; i < 6; i++)
        if (len[i]) p->be->ops->buffer_copy(p->be, run[i], in, len[i]), in += len[i];
    MXL_ASSERT((uint64_t)(in - (const uint8_t *)src) == p->block_bytes);
}

mxl_status mxl_kv_pool_make_writable(mxl_kv_pool *p, int32_t *id, int64_t n_rows, mxl_error *err) {
    int32_t old = *id, fresh;
    if (mxl_kv_pool_writable(p, old)) return MXL_OK;
    MXL_ASSERT(p->ref[old] > 0 && n_rows >= 0 && n_rows <= MXL_KV_BLOCK);
    /* keep `old` referenced while allocating so eviction cannot take it */
    mxl_status st = mxl_kv_pool_alloc(p, &fresh, err);
    if (st) return st;
    copy_rows(p, fresh, old, n_rows);
    mxl_kv_pool_release(p, old);
    *id = fresh;
    return MXL_OK;
}
