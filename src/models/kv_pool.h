/* kv_pool.h - a pool of fixed-size KV cache blocks shared by decoder states (models/decoder.h),
 * and the prompt-cache index over them.
 *
 * A block holds MXL_KV_BLOCK (32) consecutive positions of one sequence: K and V of every layer
 * for those positions in the pool's storage types (F32, F16, grouped I8 with f32 scales - the
 * backend's kv_quantize_i8 - or a ggml block format: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, each row
 * kv_dim / 32 blocks of 32 elements, the backend's kv_quantize_blocks). Storage is one buffer of
 * the backend (buffer_alloc), block-major:
 *   K [n_blocks, n_layers, 32, kv_dim]  V likewise  (k_type / v_type elements)
 *   K scales [n_blocks, n_layers, 32, kv_dim / group]  V scales likewise  (I8 only)
 * (TurboQuant types: the ggml-like blocks of backends/cpu/kv_quant.h.) Layers kept in F16 apart
 * from their type (v_edge, k_last) live in F16 edge regions of their own: the K region then holds
 * the first n_layers - k_last layers and a K edge region [n_blocks, k_last, 32, kv_dim] the last
 * ones; the V region the layers between the first v_edge and the last max(v_edge, k_last), a V
 * edge region those (first ones, then last ones). mxl_kv_pool_layer_part finds a layer's rows.
 * so row r of layer l of block b starts at element ((b * n_layers + l) * 32 + r) * kv_dim (byte
 * mxl_kv_offset_bytes(type, that)), and consecutive blocks are mxl_kv_pool_block_stride()
 * elements apart (attention reads through a block table, backends/op_types.h mxl_kv_paged_view).
 *
 * Blocks are reference counted. A state holding a block takes one reference; sharing a prefix
 * (mxl_decoder_state_adopt / _fork) takes more. A block is written only when it is private
 * (mxl_kv_pool_writable: one reference and not published); otherwise the writer copies it first
 * (mxl_kv_pool_make_writable: copy-on-write).
 *
 * Prompt cache: a full block may be published under a chain hash (mxl_kv_pool_chain_hash: its 32
 * token ids and the previous block's hash, the first block's "previous" being a seed that
 * partitions the cache, e.g. by prompt_cache_key). A published block whose last reference goes
 * stays cached (evictable) instead of returning to the free list; mxl_kv_pool_lookup finds it
 * again by hash (token ids and parent are compared too, so a hash collision never returns a wrong
 * block). When no free block is left, mxl_kv_pool_alloc evicts the least recently released cached
 * block. Published blocks are immutable: writing into one goes through copy-on-write.
 *
 * Not thread-safe: the owner (one engine thread, or one state) serializes calls. Nothing here
 * allocates after create. */
#ifndef MXL_MODELS_KV_POOL_H
#define MXL_MODELS_KV_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "core/dtype.h"
#include "core/status.h"

#define MXL_KV_BLOCK 32 /* positions per block */

typedef struct mxl_kv_pool_cfg {
    int64_t n_layers, kv_dim;
    int64_t group;             /* int8 scale group: divides kv_dim (ignored unless a type is I8) */
    mxl_dtype k_type, v_type;  /* F32, F16, I8, Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1 (kv_dim a multiple
                                * of 32 for the last five) */
    int64_t n_blocks;          /* > 0, at most 2^30 */
    const mxl_backend *be;     /* whose memory holds the blocks (buffer_alloc); NULL: the host's */
    bool v_in_k;               /* no V storage: V is read from the K rows (multi-head latent
                                * attention, models/mla.h); v_type must equal k_type and
                                * mxl_kv_pool_v / _v_scale return K's */
    int64_t v_edge;            /* the first and the last v_edge layers keep V in F16 (TurboQuant's
                                * boundary layers, --turbo-boundary-v), in a region of their own;
                                * 0: none. At most n_layers / 2; not with v_in_k */
    int64_t k_last;            /* the last k_last layers keep K and V in F16 (--kv-skip-last-layer),
                                * in regions of their own; 0: none; not with v_in_k */
} mxl_kv_pool_cfg;

typedef struct mxl_kv_pool mxl_kv_pool;

/* Where layer l's K (or V) rows live: a region of one storage type holding `region_layers`
 * layers per block, block-major as above (block b's layer `layer` starts at element
 * (b * region_layers + layer) * 32 * kv_dim of base; `stride` elements between blocks). Every
 * layer's K is in the K region; V is in the V region, or in the F16 edge region for the v_edge
 * boundary layers and the K edge region for the last k_last. scale: the region's I8 scales (NULL
 * otherwise). */
typedef struct mxl_kv_pool_part {
    mxl_dtype type;
    uint8_t *base;
    float *scale;
    int64_t stride, layer;
} mxl_kv_pool_part;
void mxl_kv_pool_layer_part(const mxl_kv_pool *p, bool v, int64_t l, mxl_kv_pool_part *out);

typedef struct mxl_kv_pool_stats {
    int64_t total;    /* blocks in the pool */
    int64_t used;     /* blocks with at least one reference */
    int64_t cached;   /* published blocks (referenced or not) */
    int64_t evictable;/* published blocks with no reference (reusable by eviction) */
    int64_t free;     /* blocks on the free list (neither referenced nor published) */
    uint64_t evictions;
} mxl_kv_pool_stats;

/* Bytes of one block (K, V and scales of every layer for 32 positions), 0 on overflow. */
uint64_t mxl_kv_pool_block_bytes(const mxl_kv_pool_cfg *cfg);
mxl_status mxl_kv_pool_create(const mxl_kv_pool_cfg *cfg, mxl_kv_pool **out, mxl_error *err);
void mxl_kv_pool_destroy(mxl_kv_pool *p);
const mxl_kv_pool_cfg *mxl_kv_pool_config(const mxl_kv_pool *p);
void mxl_kv_pool_get_stats(const mxl_kv_pool *p, mxl_kv_pool_stats *st);
/* Blocks an allocation can get now: free plus evictable. */
int64_t mxl_kv_pool_available(const mxl_kv_pool *p);

/* A fresh private block (one reference), from the free list or by evicting the least recently
 * released cached block. MXL_ERR_NOMEM when every block is referenced. */
mxl_status mxl_kv_pool_alloc(mxl_kv_pool *p, int32_t *id, mxl_error *err);
void mxl_kv_pool_retain(mxl_kv_pool *p, int32_t id);
/* Drops one reference; at zero the block goes to the free list, or stays cached if published. */
void mxl_kv_pool_release(mxl_kv_pool *p, int32_t id);
int32_t mxl_kv_pool_refcount(const mxl_kv_pool *p, int32_t id);
bool mxl_kv_pool_published(const mxl_kv_pool *p, int32_t id);
/* One reference and not published: the holder may write into it. */
bool mxl_kv_pool_writable(const mxl_kv_pool *p, int32_t id);
/* Copy-on-write: if *id (held by the caller) is not writable, copies its first n_rows rows (every
 * layer, K, V and scales) into a fresh block, releases the caller's reference on the old one and
 * stores the new id. MXL_ERR_NOMEM (nothing changed) when no block is available. */
mxl_status mxl_kv_pool_make_writable(mxl_kv_pool *p, int32_t *id, int64_t n_rows, mxl_error *err);

/* Storage bases (element 0 of block 0, layer 0, row 0) and the element distance between blocks
 * (n_layers * 32 * kv_dim; scales: that / group). Scales are NULL for non-I8 types. */
void *mxl_kv_pool_k(const mxl_kv_pool *p);
void *mxl_kv_pool_v(const mxl_kv_pool *p);
float *mxl_kv_pool_k_scale(const mxl_kv_pool *p);
float *mxl_kv_pool_v_scale(const mxl_kv_pool *p);
int64_t mxl_kv_pool_block_stride(const mxl_kv_pool *p);

/* A whole block (K, V and the int8 scales of every layer, 32 positions: mxl_kv_pool_block_bytes)
 * copied out to / in from host memory - the slot files of POST /slots (server/scheduler.c).
 * block_load writes a block the caller may write (mxl_kv_pool_writable). */
void mxl_kv_pool_block_save(const mxl_kv_pool *p, int32_t id, void *dst);
void mxl_kv_pool_block_load(mxl_kv_pool *p, int32_t id, const void *src);

/* ---- prompt-cache index ---- */

/* The chain hash of a block holding tokens[0..32) after a block of hash `prev` (the chain seed
 * for the first block). */
uint64_t mxl_kv_pool_chain_hash(uint64_t prev, const int32_t *tokens);
/* The seed of a chain: mixes an optional partition key (NULL or "" = the shared partition). */
uint64_t mxl_kv_pool_chain_seed(const char *key);
/* The cached block of that hash whose tokens and parent hash match, or -1. Takes no reference
 * (call mxl_kv_pool_retain to hold it); counts as a use for LRU only once retained. */
int32_t mxl_kv_pool_lookup(const mxl_kv_pool *p, uint64_t hash, uint64_t parent, const int32_t *tokens);
/* Publishes a full block the caller holds under hash (tokens: its 32 ids, parent: the previous
 * hash). No-op if the block is already published or another block holds that hash (the first
 * one stays). */
void mxl_kv_pool_publish(mxl_kv_pool *p, int32_t id, uint64_t hash, uint64_t parent, const int32_t *tokens);
/* Evicts every evictable cached block (back to the free list); returns how many. */
int64_t mxl_kv_pool_evict_all(mxl_kv_pool *p);
/* The caller's clock (any unit, non-decreasing), stamped on blocks as they become evictable. */
void mxl_kv_pool_set_clock(mxl_kv_pool *p, double now);
/* Evicts least recently released cached blocks while more than `keep` are evictable or the
 * oldest was stamped before older_than (a TTL); returns how many. */
int64_t mxl_kv_pool_evict_lru(mxl_kv_pool *p, int64_t keep, double older_than);

#endif
