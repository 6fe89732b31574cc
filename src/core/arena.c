/* arena.c - bump allocator (see arena.h). */
#include "core/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/alloc.h"
#include "core/status.h"

struct mxl_arena_block {
    mxl_arena_block *next;
    size_t cap;
    size_t used;
    unsigned char data[];
};

void mxl_arena_init(mxl_arena *a, size_t block_size) {
    a->head = NULL;
    a->block_size = block_size ? block_size : 64 * 1024;
    a->total = 0;
    a->huge_pages = false;
}

/* With huge_pages, blocks of at least this many bytes are rounded up and aligned to it and
 * advised as huge pages (where the kernel's transparent huge pages allow): a model's weights are
 * read front to back every token, and with 4 KB pages every page of them is a TLB miss (a costly
 * walk in a virtual machine). Opt-in: a partly used last huge page is resident whole. */
#define HUGE_PAGE ((size_t)2 << 20)

static mxl_arena_block *new_block(size_t cap, bool huge_pages) {
    if (cap > SIZE_MAX - sizeof(mxl_arena_block) - HUGE_PAGE) return NULL;
    mxl_arena_block *b = NULL;
    size_t bytes = sizeof(mxl_arena_block) + cap;
    if (huge_pages && cap >= HUGE_PAGE) {
        bytes = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        void *p = mxl_aligned_alloc(HUGE_PAGE, bytes);
        if (p) {
#ifdef MADV_HUGEPAGE
            (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice only: fine to fail */
#endif
            b = p;
            cap = bytes - sizeof(mxl_arena_block);
        }
    } else {
        b = mxl_aligned_alloc(16, bytes); /* one free for both kinds: mxl_aligned_free */
    }
    if (!b) return NULL;
    b->next = NULL;
    b->cap = cap;
    b->used = 0;
    return b;
}

void *mxl_arena_alloc(mxl_arena *a, size_t size, size_t align) {
    MXL_ASSERT(align && (align & (align - 1)) == 0 && align <= 4096);
    mxl_arena_block *b = a->head;
    if (b) {
        /* align the absolute address: malloc only guarantees 16-byte alignment of data[] */
        uintptr_t base = (uintptr_t)b->data;
        size_t off = (size_t)(((base + b->used + align - 1) & ~(uintptr_t)(align - 1)) - base);
        if (off <= b->cap && size <= b->cap - off) {
            b->used = off + size;
            a->total += size;
            memset(b->data + off, 0, size);
            return b->data + off;
        }
    }
    if (size > SIZE_MAX - align) return NULL;
    size_t need = size + align;
    size_t cap = need > a->block_size ? need : a->block_size;
    mxl_arena_block *nb = new_block(cap, a->huge_pages);
    if (!nb) return NULL;
    nb->next = a->head;
    a->head = nb;
    size_t off = (size_t)(((uintptr_t)nb->data + align - 1) & ~(uintptr_t)(align - 1)) -
                 (size_t)(uintptr_t)nb->data;
    nb->used = off + size;
    a->total += size;
    memset(nb->data + off, 0, size);
    return nb->data + off;
}

char *mxl_arena_strndup(mxl_arena *a, const char *s, size_t n) {
    if (n == SIZE_MAX) return NULL;
    char *d = mxl_arena_alloc(a, n + 1, 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *mxl_arena_strdup(mxl_arena *a, const char *s) { return mxl_arena_strndup(a, s, strlen(s)); }

void mxl_arena_reset(mxl_arena *a) {
    mxl_arena_block *b = a->head;
    if (!b) return;
    /* keep the oldest block (the last in the list), free the newer ones */
    mxl_arena_block *keep = b;
    while (keep->next) keep = keep->next;
    while (b != keep) {
        mxl_arena_block *n = b->next;
        mxl_aligned_free(b);
        b = n;
    }
    keep->used = 0;
    a->head = keep;
    a->total = 0;
}

void mxl_arena_free(mxl_arena *a) {
    mxl_arena_block *b = a->head;
    while (b) {
        mxl_arena_block *n = b->next;
        mxl_aligned_free(b);
        b = n;
    }
    a->head = NULL;
    a->total = 0;
}
