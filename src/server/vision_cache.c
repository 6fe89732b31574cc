/* vision_cache.c - the server's LRU of encoded images (vision_cache.h). A small array searched
 * linearly: the spec's default is 20 entries, each a few megabytes of rows. */
#include "server/vision_cache.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"

typedef struct entry {
    uint8_t key[32];
    float *rows; /* NULL: free */
    size_t n;
    uint64_t used; /* the use counter when last read or written */
} entry;

struct mxl_vision_cache {
    pthread_mutex_t mu;
    int cap;
    entry *e;
    uint64_t clock;
};

mxl_vision_cache *mxl_vision_cache_create(int capacity) {
    mxl_vision_cache *c = mxl_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->cap = capacity > 0 ? capacity : 0;
    if (c->cap && !(c->e = mxl_calloc((size_t)c->cap, sizeof *c->e))) {
        mxl_free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void mxl_vision_cache_destroy(mxl_vision_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->cap; i++) mxl_free(c->e[i].rows);
    mxl_free(c->e);
    pthread_mutex_destroy(&c->mu);
    mxl_free(c);
}

void mxl_vision_cache_key(const mxl_vlm_input *in, uint8_t key[32]) {
    int64_t facts[6] = {(int64_t)in->n_pixels, in->n_tokens, in->grid[0], in->grid[1], in->grid[2], in->grid[3]};
    unsigned int len = 32;
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    if (!m || EVP_DigestInit_ex(m, EVP_sha256(), NULL) != 1 || EVP_DigestUpdate(m, facts, sizeof facts) != 1 ||
        EVP_DigestUpdate(m, in->pixels, in->n_pixels * sizeof(float)) != 1 || EVP_DigestFinal_ex(m, key, &len) != 1)
        memset(key, 0xff, 32); /* (no digest: a key no lookup finds, as puts under it are refused) */
    EVP_MD_CTX_free(m);
}

static bool usable(const uint8_t key[32]) {
    for (int i = 0; i < 32; i++)
        if (key[i] != 0xff) return true;
    return false;
}

bool mxl_vision_cache_get(mxl_vision_cache *c, const uint8_t key[32], float *rows, size_t n_floats) {
    if (!c || !c->cap || !usable(key)) return false;
    bool hit = false;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->cap && !hit; i++) {
        entry *e = &c->e[i];
        if (!e->rows || e->n != n_floats || memcmp(e->key, key, 32) != 0) continue;
        memcpy(rows, e->rows, n_floats * sizeof(float));
        e->used = ++c->clock;
        hit = true;
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void mxl_vision_cache_put(mxl_vision_cache *c, const uint8_t key[32], const float *rows, size_t n_floats) {
    if (!c || !c->cap || !usable(key)) return;
    float *copy = mxl_malloc(n_floats * sizeof(float));
    if (!copy) return;
    memcpy(copy, rows, n_floats * sizeof(float));
    pthread_mutex_lock(&c->mu);
    entry *slot = NULL;
    for (int i = 0; i < c->cap; i++) { /* the same key again, else a free entry, else the least recently used */
        entry *e = &c->e[i];
        if (e->rows && memcmp(e->key, key, 32) == 0) {
            slot = e;
            break;
        }
        if (!slot || (slot->rows && (!e->rows || e->used < slot->used))) slot = e;
    }
    mxl_free(slot->rows);
    memcpy(slot->key, key, 32);
    slot->rows = copy;
    slot->n = n_floats;
    slot->used = ++c->clock;
    pthread_mutex_unlock(&c->mu);
}
