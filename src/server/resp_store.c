/* resp_store.c - the Responses API store (resp_store.h): a list in insertion order (oldest at the
 * head), searched linearly: the cap is small (1024 by default) next to a generation's cost. */
#include "server/resp_store.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"

typedef struct entry {
    struct entry *prev, *next;
    char id[96];
    unsigned char owner[32];
    double born; /* monotonic seconds */
    json_t *data;
    mxl_srv_channel *ch; /* borrowed: see mxl_resp_store_put */
} entry;

struct mxl_resp_store {
    pthread_mutex_t mu;
    entry *head, *tail;
    int64_t n, max, ttl;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

mxl_resp_store *mxl_resp_store_create(int64_t max_entries, int64_t ttl_s) {
    mxl_resp_store *st = mxl_calloc(1, sizeof *st);
    if (!st) return NULL;
    pthread_mutex_init(&st->mu, NULL);
    st->max = max_entries < 0 ? 0 : max_entries;
    st->ttl = ttl_s;
    return st;
}

static void drop(mxl_resp_store *st, entry *e) {
    if (e->prev) e->prev->next = e->next;
    else st->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else st->tail = e->prev;
    st->n--;
    json_decref(e->data);
    mxl_free(e);
}

void mxl_resp_store_destroy(mxl_resp_store *st) {
    if (!st) return;
    while (st->head) drop(st, st->head);
    pthread_mutex_destroy(&st->mu);
    mxl_free(st);
}

bool mxl_resp_store_enabled(const mxl_resp_store *st) { return st && st->max > 0; }

void mxl_resp_store_owner(const char *key, unsigned char owner[32]) {
    unsigned int n = 32;
    if (!key) key = "";
    if (!EVP_Digest(key, strlen(key), owner, &n, EVP_sha256(), NULL)) memset(owner, 0, 32);
}

/* Drops the expired entries (the list is in birth order: they are at the head). mu held. */
static void expire(mxl_resp_store *st) {
    double t = now_s();
    while (st->head && st->ttl > 0 && t - st->head->born > (double)st->ttl) drop(st, st->head);
}

static entry *find(mxl_resp_store *st, const char *id, const unsigned char owner[32]) {
    expire(st);
    for (entry *e = st->tail; e; e = e->prev)
        if (!strcmp(e->id, id)) return memcmp(e->owner, owner, 32) ? NULL : e;
    return NULL;
}

static bool put(mxl_resp_store *st, const char *id, const unsigned char owner[32], json_t *data, mxl_srv_channel *ch, bool create) {
    if (!mxl_resp_store_enabled(st) || !data || strlen(id) >= sizeof ((entry *)0)->id) return false;
    pthread_mutex_lock(&st->mu);
    entry *e = find(st, id, owner);
    if (e) {
        json_decref(e->data);
    } else if (!create) {
        pthread_mutex_unlock(&st->mu);
        return false;
    } else {
        e = mxl_calloc(1, sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&st->mu);
            return false;
        }
        strcpy(e->id, id);
        memcpy(e->owner, owner, 32);
        e->born = now_s();
        e->prev = st->tail;
        if (st->tail) st->tail->next = e;
        else st->head = e;
        st->tail = e;
        st->n++;
        while (st->n > st->max) drop(st, st->head); /* the oldest past the cap */
    }
    e->data = json_incref(data);
    e->ch = ch;
    pthread_mutex_unlock(&st->mu);
    return true;
}

bool mxl_resp_store_put(mxl_resp_store *st, const char *id, const unsigned char owner[32], json_t *data, mxl_srv_channel *ch) {
    return put(st, id, owner, data, ch, true);
}

bool mxl_resp_store_replace(mxl_resp_store *st, const char *id, const unsigned char owner[32], json_t *data) {
    return put(st, id, owner, data, NULL, false);
}

json_t *mxl_resp_store_get(mxl_resp_store *st, const char *id, const unsigned char owner[32], bool *in_progress) {
    if (!st) return NULL;
    pthread_mutex_lock(&st->mu);
    entry *e = find(st, id, owner);
    json_t *d = e ? json_incref(e->data) : NULL;
    if (in_progress) *in_progress = e && e->ch;
    pthread_mutex_unlock(&st->mu);
    return d;
}

bool mxl_resp_store_delete(mxl_resp_store *st, const char *id, const unsigned char owner[32]) {
    if (!st) return false;
    pthread_mutex_lock(&st->mu);
    entry *e = find(st, id, owner);
    if (e) drop(st, e);
    pthread_mutex_unlock(&st->mu);
    return e != NULL;
}

int mxl_resp_store_cancel(mxl_resp_store *st, const char *id, const unsigned char owner[32]) {
    if (!st) return -1;
    pthread_mutex_lock(&st->mu);
    entry *e = find(st, id, owner);
    int rc = !e ? -1 : e->ch ? 1 : 0;
    if (e && e->ch) atomic_store(&e->ch->cancel, true);
    pthread_mutex_unlock(&st->mu);
    return rc;
}

void mxl_resp_store_detach(mxl_resp_store *st, const char *id, const unsigned char owner[32]) {
    if (!st) return;
    pthread_mutex_lock(&st->mu);
    entry *e = find(st, id, owner);
    if (e) e->ch = NULL;
    pthread_mutex_unlock(&st->mu);
}

json_t *mxl_resp_store_edit(mxl_resp_store *st, const char *id, const unsigned char owner[32], json_t *(*fn)(json_t *data, void *ctx), void *ctx,
                            bool *found) {
    *found = false;
    if (!st) return NULL;
    pthread_mutex_lock(&st->mu);
    entry *e = find(st, id, owner);
    json_t *out = e ? fn(e->data, ctx) : NULL;
    *found = e != NULL;
    pthread_mutex_unlock(&st->mu);
    return out;
}

int64_t mxl_resp_store_count(mxl_resp_store *st) {
    if (!st) return 0;
    pthread_mutex_lock(&st->mu);
    expire(st);
    int64_t n = st->n;
    pthread_mutex_unlock(&st->mu);
    return n;
}
