/* alloc.c - the allocation seam (see alloc.h): counted malloc/calloc/realloc/free with a 16-byte
 * header before each block, aligned blocks, one-shot fault injection, and the jansson / PCRE2
 * allocator hooks. */
#include "core/alloc.h"

#include <jansson.h>
#include <malloc.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/status.h"

/* The header keeps the block's requested size and a check word; 16 bytes keeps the caller's
 * pointer aligned as malloc's (max_align_t is 16 bytes on x86-64 and AArch64 Linux). */
typedef struct alloc_header {
    uint64_t size;
    uint64_t check;
} alloc_header;
#define HDR sizeof(alloc_header)
_Static_assert(sizeof(alloc_header) % alignof(max_align_t) == 0, "header keeps malloc's alignment");
#define CHECK_LIVE 0x6d786c616c6c6f63ull /* "mxlalloc" */
#define CHECK_FREED 0x6d786c6672656564ull

static atomic_int_fast64_t g_live;
static atomic_uint_fast64_t g_calls;
static atomic_uint_fast64_t g_fail_target; /* the call number that fails; 0: none */
static atomic_uint_fast64_t g_failures;
static _Thread_local uint64_t t_failed; /* allocations that returned NULL on this thread */
static _Thread_local int t_shielded;    /* > 0: no injected failure on this thread */
static _Thread_local int t_json_parse;  /* > 0: inside mxl_json_loadb (mxl_alloc_json_parse_guard) */

/* Called on each injected failure: a place for a debugger's breakpoint
 * (gdb -ex 'break alloc_fault_injected' ...) to see which allocation a sweep failed. */
__attribute__((noinline)) static void alloc_fault_injected(void) { __asm__ volatile(""); }

/* Counts one allocation call; false when this is the call chosen to fail. */
static bool take_call(void) {
    uint64_t c = atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed) + 1;
    uint64_t t = atomic_load_explicit(&g_fail_target, memory_order_relaxed);
    if (t && c == t && !t_shielded) {
        atomic_fetch_add_explicit(&g_failures, 1, memory_order_relaxed);
        t_failed++;
        alloc_fault_injected();
        return false;
    }
    return true;
}

static void *failed(void) {
    t_failed++;
    return NULL;
}

static alloc_header *header_of(void *p) {
    alloc_header *h = (alloc_header *)((unsigned char *)p - HDR);
    MXL_ASSERT(h->check == CHECK_LIVE); /* a block from malloc (or freed twice) given to mxl_free */
    return h;
}

static void *finish(alloc_header *h, size_t size) {
    h->size = size;
    h->check = CHECK_LIVE;
    atomic_fetch_add_explicit(&g_live, (int_fast64_t)size, memory_order_relaxed);
    return (unsigned char *)h + HDR;
}

void *mxl_malloc(size_t size) {
    if (!take_call()) return NULL;
    if (size > SIZE_MAX - HDR) return failed();
    alloc_header *h = malloc(HDR + size);
    return h ? finish(h, size) : failed();
}

void *mxl_calloc(size_t n, size_t size) {
    if (!take_call()) return NULL;
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes) || bytes > SIZE_MAX - HDR) return failed();
    alloc_header *h = calloc(1, HDR + bytes);
    return h ? finish(h, bytes) : failed();
}

void *mxl_realloc(void *p, size_t size) {
    if (!p) return mxl_malloc(size);
    if (!take_call()) return NULL;
    if (size > SIZE_MAX - HDR) return failed();
    alloc_header *h = header_of(p);
    size_t old = h->size;
    alloc_header *n = realloc(h, HDR + size);
    if (!n) return failed();
    atomic_fetch_sub_explicit(&g_live, (int_fast64_t)old, memory_order_relaxed);
    return finish(n, size);
}

void mxl_free(void *p) {
    if (!p) return;
    alloc_header *h = header_of(p);
    atomic_fetch_sub_explicit(&g_live, (int_fast64_t)h->size, memory_order_relaxed);
    h->check = CHECK_FREED;
    free(h);
}

char *mxl_strndup(const char *s, size_t n) {
    size_t len = strnlen(s, n);
    char *d = mxl_malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *mxl_strdup(const char *s) { return mxl_strndup(s, SIZE_MAX); }

void *mxl_aligned_alloc(size_t align, size_t size) {
    MXL_ASSERT(align >= sizeof(void *) && (align & (align - 1)) == 0);
    if (!take_call()) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : 1) != 0) return failed();
    atomic_fetch_add_explicit(&g_live, (int_fast64_t)malloc_usable_size(p), memory_order_relaxed);
    return p;
}

void mxl_aligned_free(void *p) {
    if (!p) return;
    atomic_fetch_sub_explicit(&g_live, (int_fast64_t)malloc_usable_size(p), memory_order_relaxed);
    free(p);
}

int64_t mxl_alloc_live_bytes(void) { return (int64_t)atomic_load(&g_live); }
uint64_t mxl_alloc_calls(void) { return (uint64_t)atomic_load(&g_calls); }
uint64_t mxl_alloc_failures_injected(void) { return (uint64_t)atomic_load(&g_failures); }
uint64_t mxl_alloc_thread_failures(void) { return t_failed; }
void mxl_alloc_json_parse_guard(bool on) { t_json_parse += on ? 1 : -1; }

/* jansson's allocator (alloc.h: mxl_alloc_json_parse_guard). */
static void *json_malloc(size_t size) {
    bool guard = t_json_parse > 0 && size >= 32 && (size & (size - 1)) == 0;
    t_shielded += guard;
    void *p = mxl_malloc(size);
    t_shielded -= guard;
    return p;
}

void mxl_alloc_fail_at(uint64_t n) {
    atomic_store(&g_fail_target, n ? (uint64_t)atomic_load(&g_calls) + n : 0);
}

/* PCRE2's memory functions take a context pointer. */
static void *pcre2_malloc_fn(PCRE2_SIZE size, void *data) {
    (void)data;
    return mxl_malloc(size);
}
static void pcre2_free_fn(void *p, void *data) {
    (void)data;
    mxl_free(p);
}
static pcre2_general_context *g_pcre2;

void *mxl_pcre2_gcontext(void) { return g_pcre2; }

/* Before main (and before any test arms a fault): jansson's allocator must be set before its
 * first allocation, or a value malloc'd by libc would later reach mxl_free. */
__attribute__((constructor)) static void alloc_seam_init(void) {
    json_set_alloc_funcs(json_malloc, mxl_free);
    g_pcre2 = pcre2_general_context_create(pcre2_malloc_fn, pcre2_free_fn, NULL);
}
