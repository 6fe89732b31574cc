/* status.h - recoverable-error type shared by every layer.
 *
 * Functions that can fail on bad input (files, requests, flags) return an mxl_status and, when the
 * caller passes a non-NULL mxl_error, a one-line message naming the file/field and the problem.
 * Only cli/ prints messages and exits. Programming errors trip MXL_ASSERT, which is always on. */
#ifndef MXL_CORE_STATUS_H
#define MXL_CORE_STATUS_H

#include <stddef.h>
#include <stdint.h>

typedef enum mxl_status {
    MXL_OK = 0,
    MXL_ERR_IO,          /* open/read/mmap failed */
    MXL_ERR_FORMAT,      /* malformed or hostile file contents */
    MXL_ERR_UNSUPPORTED, /* well-formed but not something we run (named in the message) */
    MXL_ERR_NOMEM,       /* allocation failed */
    MXL_ERR_ARG,         /* bad argument from the user */
    MXL_ERR_NOT_FOUND,   /* model / file / key not present */
    MXL_ERR_OVERFLOW,    /* size arithmetic on untrusted input overflowed */
    MXL_ERR_INTERNAL
} mxl_status;

#define MXL_ERROR_MSG_MAX 512

typedef struct mxl_error {
    mxl_status status;
    char msg[MXL_ERROR_MSG_MAX];
} mxl_error;

/* Records status + printf-style message into err (if non-NULL) and returns status, so callers can
 * write `return mxl_error_set(err, MXL_ERR_FORMAT, "%s: bad header", path);`. The message is kept
 * to one line: control characters (from quoted input) become spaces, here and in the prefix. */
mxl_status mxl_error_set(mxl_error *err, mxl_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message with more context ("loading X: " + old message). */
void mxl_error_prefix(mxl_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void mxl_error_clear(mxl_error *err);
const char *mxl_status_name(mxl_status status);

/* Always-on assertion for programming errors (never for bad input). */
void mxl_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define MXL_ASSERT(cond) ((cond) ? (void)0 : mxl_assert_fail(#cond, __FILE__, __LINE__))

/* Overflow-checked size arithmetic for untrusted sizes: return 0 on success, 1 on overflow. */
static inline int mxl_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
static inline int mxl_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_add_overflow(a, b, out);
}

#endif
