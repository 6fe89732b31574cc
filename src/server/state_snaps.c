/* state_snaps.c - the prompt cache's recurrent-state snapshots (state_snaps.h). */
#include "server/state_snaps.h"

#include "core/alloc.h"

typedef struct snap {
    uint64_t chain;
    int64_t n_pos; /* 0: empty */
    uint64_t used; /* the clock at the last find / put */
    void *data;
} snap;

struct mxl_state_snaps {
    int n;
    size_t bytes;
    uint64_t clock;
    snap *e;
};

mxl_status mxl_state_snaps_create(int n, size_t bytes, mxl_state_snaps **out, mxl_error *err) {
    *out = NULL;
    if (n <= 0 || bytes == 0) return mxl_error_set(err, MXL_ERR_ARG, "state snapshots: %d entries of %zu bytes", n, bytes);
    mxl_state_snaps *c = mxl_calloc(1, sizeof *c);
    if (c) c->e = mxl_calloc((size_t)n, sizeof *c->e);
    if (!c || !c->e) {
        mxl_state_snaps_destroy(c);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    c->n = n;
    c->bytes = bytes;
    for (int i = 0; i < n; i++)
        if (!(c->e[i].data = mxl_malloc(bytes))) {
            mxl_state_snaps_destroy(c);
            return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory for %d recurrent-state snapshots of %zu bytes", n, bytes);
        }
    *out = c;
    return MXL_OK;
}

void mxl_state_snaps_destroy(mxl_state_snaps *c) {
    if (!c) return;
    for (int i = 0; c->e && i < c->n; i++) mxl_free(c->e[i].data);
    mxl_free(c->e);
    mxl_free(c);
}

const void *mxl_state_snaps_find(mxl_state_snaps *c, uint64_t chain, int64_t n_pos) {
    for (int i = 0; c && n_pos > 0 && i < c->n; i++)
        if (c->e[i].n_pos == n_pos && c->e[i].chain == chain) {
            c->e[i].used = ++c->clock;
            return c->e[i].data;
        }
    return NULL;
}

void *mxl_state_snaps_put(mxl_state_snaps *c, uint64_t chain, int64_t n_pos) {
    snap *v = &c->e[0];
    for (int i = 0; i < c->n; i++) {
        snap *e = &c->e[i];
        if (e->n_pos == n_pos && e->chain == chain) {
            v = e;
            break;
        }
        if (e->used < v->used) v = e; /* (an empty entry's clock is 0) */
    }
    v->chain = chain;
    v->n_pos = n_pos;
    v->used = ++c->clock;
    return v->data;
}

int mxl_state_snaps_used(const mxl_state_snaps *c) {
    int k = 0;
    for (int i = 0; c && i < c->n; i++) k += c->e[i].n_pos > 0;
    return k;
}

uint64_t mxl_state_snaps_bytes(const mxl_state_snaps *c) { return c ? (uint64_t)c->n * c->bytes : 0; }
