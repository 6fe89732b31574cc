/* strbuf.c - the growable byte string (strbuf.h). */
#include "core/strbuf.h"

#include <stdlib.h>

#include "core/alloc.h"
#include "core/utf8.h"

bool mxl_strbuf_reserve(mxl_strbuf *b, size_t extra) {
    if (b->cap && extra < b->cap - b->n) return true;
    size_t need;
    if (__builtin_add_overflow(b->n, extra, &need) || __builtin_add_overflow(need, (size_t)1, &need)) return false;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) return false;
        cap *= 2;
    }
    char *p = mxl_realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
    return true;
}

bool mxl_strbuf_put_cp(mxl_strbuf *b, uint32_t cp) {
    char tmp[4];
    size_t k = mxl_utf8_encode(cp, tmp);
    return mxl_strbuf_append(b, tmp, k);
}

void mxl_strbuf_clear(mxl_strbuf *b) {
    b->n = 0;
    if (b->p) b->p[0] = 0;
}

void mxl_strbuf_free(mxl_strbuf *b) {
    mxl_free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}
