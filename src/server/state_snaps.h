/* state_snaps.h - the prompt cache's recurrent-state snapshots (models with recurrent layers,
 * models/recurrent.h). Attention layers keep a prefix in KV blocks, shared through the block
 * cache (kv_pool.h); recurrent layers keep one state per sequence that exists at its last
 * position only. So the scheduler saves a sequence's state when its prefill stands on a block
 * boundary (the last one of the prompt), keyed by the block chain hash of the tokens before it;
 * a later prompt with that exact prefix adopts the cached blocks together with the snapshot and
 * runs only the rest (mxl_decoder_state_adopt_rec).
 *
 * A fixed number of entries of one size, allocated at start (their bytes are counted with the
 * slots' state); a full store replaces its least recently used entry. One thread (the
 * scheduler's engine thread) uses it. */
#ifndef MXL_SERVER_STATE_SNAPS_H
#define MXL_SERVER_STATE_SNAPS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct mxl_state_snaps mxl_state_snaps;

/* n entries of bytes each (n > 0, bytes > 0). */
mxl_status mxl_state_snaps_create(int n, size_t bytes, mxl_state_snaps **out, mxl_error *err);
void mxl_state_snaps_destroy(mxl_state_snaps *c);
/* The snapshot saved under (chain, n_pos), or NULL; a hit becomes the most recently used. */
const void *mxl_state_snaps_find(mxl_state_snaps *c, uint64_t chain, int64_t n_pos);
/* The buffer to write the snapshot of (chain, n_pos) into: its entry when there is one, else the
 * least recently used entry, now keyed so. */
void *mxl_state_snaps_put(mxl_state_snaps *c, uint64_t chain, int64_t n_pos);
/* Entries holding a snapshot, and the bytes of all entries. */
int mxl_state_snaps_used(const mxl_state_snaps *c);
uint64_t mxl_state_snaps_bytes(const mxl_state_snaps *c);

#endif
