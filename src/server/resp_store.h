/* resp_store.h - the bounded in-memory stores of the Responses API (api_responses.c): stored
 * responses by id ("resp_...") and, a second store of the same kind, conversations ("conv_..."), each with the SHA-256 of the API key that created it, a JSON
 * document (never changed once put: a put replaces it) and, while the response is being
 * generated, its scheduler channel (POST /v1/responses/{id}/cancel cancels it). At most
 * max_entries live entries, the oldest evicted first; an entry older than ttl_s is gone. Lookups
 * with another key's digest find nothing, as if the id did not exist. Thread-safe (one mutex). */
#ifndef MXL_SERVER_RESP_STORE_H
#define MXL_SERVER_RESP_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/scheduler.h"

typedef struct mxl_resp_store mxl_resp_store;

/* max_entries 0: a store that keeps nothing (puts are dropped). NULL when out of memory. */
mxl_resp_store *mxl_resp_store_create(int64_t max_entries, int64_t ttl_s);
void mxl_resp_store_destroy(mxl_resp_store *st);
bool mxl_resp_store_enabled(const mxl_resp_store *st);

/* The owner digest of an API key (NULL or "": the digest of ""). */
void mxl_resp_store_owner(const char *key, unsigned char owner[32]);

/* Puts id's entry (replacing an entry of the same id and owner, which keeps its place in the
 * eviction order): data gains a reference. ch (NULL when the response is finished) is borrowed,
 * not referenced: the store never takes a channel's lock (a streamed response is finished under
 * it), so the call that owns ch puts its entry again without it before releasing ch. False when
 * out of memory or when the store keeps nothing. */
bool mxl_resp_store_put(mxl_resp_store *st, const char *id, const unsigned char owner[32], json_t *data, mxl_srv_channel *ch);
/* Replaces the data of id's entry, finished (no channel), when it is still there (not deleted,
 * evicted or expired); false otherwise. */
bool mxl_resp_store_replace(mxl_resp_store *st, const char *id, const unsigned char owner[32], json_t *data);
/* A new reference to id's data (NULL: no such live entry of this owner); *in_progress: whether
 * it still has a channel. */
json_t *mxl_resp_store_get(mxl_resp_store *st, const char *id, const unsigned char owner[32], bool *in_progress);
/* Removes id's entry; false when there was none of this owner. */
bool mxl_resp_store_delete(mxl_resp_store *st, const char *id, const unsigned char owner[32]);
/* Cancels id's generation: 1 cancelled (its channel told to stop), 0 the entry is finished, -1 no
 * such entry of this owner. */
int mxl_resp_store_cancel(mxl_resp_store *st, const char *id, const unsigned char owner[32]);
/* Forgets id's channel (the call that owns it is ending). */
void mxl_resp_store_detach(mxl_resp_store *st, const char *id, const unsigned char owner[32]);
/* Runs fn(data, ctx) on id's live entry of this owner with the store's lock held and returns what
 * fn returns; *found: whether there was such an entry (fn not called otherwise). fn may change the
 * data in place: a store whose entries are edited this way (the conversations) is read only
 * through here, never with mxl_resp_store_get, so no reader sees a half-made change. */
json_t *mxl_resp_store_edit(mxl_resp_store *st, const char *id, const unsigned char owner[32], json_t *(*fn)(json_t *data, void *ctx), void *ctx,
                            bool *found);
/* Live entries (after expiring the old ones). */
int64_t mxl_resp_store_count(mxl_resp_store *st);

#endif
