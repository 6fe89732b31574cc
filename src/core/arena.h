/* arena.h - bump allocator for objects that live and die together (a parsed file's tensor table,
 * a request's scratch). Blocks are malloc'd up front or on growth; nothing is freed individually.
 * Hot loops allocate from an arena reset per step, never from malloc. */
#ifndef MXL_CORE_ARENA_H
#define MXL_CORE_ARENA_H

#include <stdbool.h>
#include <stddef.h>

typedef struct mxl_arena_block mxl_arena_block;

typedef struct mxl_arena {
    mxl_arena_block *head; /* newest block first */
    size_t block_size;     /* default size of new blocks */
    size_t total;          /* bytes handed out since the last reset */
    bool huge_pages;       /* blocks of 2 MB or more on huge pages (arena.c); off by default */
} mxl_arena;

void mxl_arena_init(mxl_arena *a, size_t block_size);
/* Returns zeroed memory aligned to `align` (power of two, <= 4096), or NULL on OOM/overflow. */
void *mxl_arena_alloc(mxl_arena *a, size_t size, size_t align);
char *mxl_arena_strdup(mxl_arena *a, const char *s);
char *mxl_arena_strndup(mxl_arena *a, const char *s, size_t n);
/* Keeps the first block's memory for reuse, frees the rest. */
void mxl_arena_reset(mxl_arena *a);
void mxl_arena_free(mxl_arena *a);

#endif
