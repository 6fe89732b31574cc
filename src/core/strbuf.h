/* strbuf.h - a growable byte string, NUL-terminated once allocated: the one text buffer the
 * tokenizer, the chat output parser and the REPL build strings in. `mxl_strbuf b = {0}` is an
 * empty buffer with nothing allocated; every append (even of zero bytes) leaves b.p allocated
 * and b.p[b.n] == 0. Appends return false on out of memory or a size that would overflow, and
 * leave the buffer as it was. (The template engine's tbuf is not one of these: it allocates from
 * the render's arena and charges the output budget and fuel, tpl_internal.h.) */
#ifndef MXL_CORE_STRBUF_H
#define MXL_CORE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct mxl_strbuf {
    char *p;
    size_t n, cap; /* n bytes of text, then the NUL; cap is 0 or > n */
} mxl_strbuf;

/* Makes room for `extra` more bytes and the NUL (allocates an empty buffer's first block). */
bool mxl_strbuf_reserve(mxl_strbuf *b, size_t extra);

/* Inline: the tokenizer appends a piece at a time on its hot path, so the case with room left
 * is a compare and a copy; growing goes out of line. */
static inline bool mxl_strbuf_append(mxl_strbuf *b, const char *s, size_t n) {
    if (n >= b->cap - b->n && !mxl_strbuf_reserve(b, n)) return false; /* cap - n: room beyond the NUL */
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

static inline bool mxl_strbuf_putc(mxl_strbuf *b, char c) { return mxl_strbuf_append(b, &c, 1); }
static inline bool mxl_strbuf_puts(mxl_strbuf *b, const char *s) { return mxl_strbuf_append(b, s, strlen(s)); }
/* The UTF-8 bytes of a code point (mxl_utf8_encode: U+FFFD for a value that is not one). */
bool mxl_strbuf_put_cp(mxl_strbuf *b, uint32_t cp);

/* Empties the text, keeping the allocation. */
void mxl_strbuf_clear(mxl_strbuf *b);
/* Frees the allocation; the buffer is empty again ({0}). */
void mxl_strbuf_free(mxl_strbuf *b);

#endif
