/* alloc.h - the allocation seam: every heap allocation of mlxcel goes through these functions.
 *
 * They count the live bytes and the allocation calls (atomically: the server, the scheduler and
 * the thread pool allocate from several threads), and a test can make one chosen call fail
 * (mxl_alloc_fail_at) to drive every out-of-memory path in turn (tests/unit/test_alloc_faults.c).
 * jansson and PCRE2 allocate through the seam too (alloc.c sets jansson's allocator before main;
 * mxl_pcre2_gcontext for PCRE2), so JSON values and dumps are freed with mxl_free.
 *
 * Outside the seam, by design (scripts/check_alloc_seam.sh keeps the list): memory that libc or
 * a library allocates with its own malloc and hands back (getline buffers, utf8proc_map results)
 * is released with plain free() where it is used; libmicrohttpd allocates its connection and
 * response memory itself.
 *
 * Blocks from mxl_malloc/mxl_calloc/mxl_realloc/mxl_strdup/mxl_strndup carry a 16-byte header
 * (size and a check word) and are freed with mxl_free; passing one to free(), or a malloc'd
 * pointer to mxl_free, trips an assertion or the C library's own check. Blocks from
 * mxl_aligned_alloc have no header (their alignment can be a 2 MB huge page) and are freed with
 * mxl_aligned_free. */
#ifndef MXL_CORE_ALLOC_H
#define MXL_CORE_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *mxl_malloc(size_t size);
void *mxl_calloc(size_t n, size_t size);
/* realloc(p, size); on failure returns NULL and leaves p as it was. */
void *mxl_realloc(void *p, size_t size);
void mxl_free(void *p);
char *mxl_strdup(const char *s);
char *mxl_strndup(const char *s, size_t n);

/* `align` a power of two >= sizeof(void *); the block is freed with mxl_aligned_free. */
void *mxl_aligned_alloc(size_t align, size_t size);
void mxl_aligned_free(void *p);

/* Bytes currently allocated through the seam (requested sizes; aligned blocks count their usable
 * size) and the number of allocation calls so far (every malloc/calloc/realloc/strdup/aligned
 * call, jansson's and PCRE2's included, failed ones too). */
int64_t mxl_alloc_live_bytes(void);
uint64_t mxl_alloc_calls(void);

/* Makes the n-th allocation call from now fail once (return NULL as if out of memory); 0
 * disarms. A test counts an operation's calls (mxl_alloc_calls before and after one good run),
 * then for n = 1.. that count arms the n-th and reruns the operation. */
void mxl_alloc_fail_at(uint64_t n);
/* How many calls have been failed by mxl_alloc_fail_at since the start. */
uint64_t mxl_alloc_failures_injected(void);

/* How many allocations have returned NULL on the calling thread (injected or real). A caller of a
 * library that reports running out of memory poorly (jansson's parser can say "invalid token")
 * compares it before and after the call. */
uint64_t mxl_alloc_thread_failures(void);

/* While on (calls nest), jansson's allocations on the calling thread whose size is a power of two
 * from 32 up are counted but never failed by mxl_alloc_fail_at. jansson 2.14's lexer grows its
 * token buffer by doubling from 16 bytes, and when that fails it drops the byte and later trips
 * an assert (load.c lex_scan_string); mxl_json_loadb parses with the guard on. The parse's other
 * allocations (values, strings, tables) still fail, and jansson handles those. */
void mxl_alloc_json_parse_guard(bool on);

/* A PCRE2 general context (pcre2_general_context_8 *) whose memory functions are the seam's,
 * created before main; pass it (or a compile context made from it) to PCRE2. NULL if that failed. */
void *mxl_pcre2_gcontext(void);

#endif
