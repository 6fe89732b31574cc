/* status.c - error message recording for mxl_status (see status.h). */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Messages are one line: a control character (a newline in a JSON parser's quoted input, a
 * file name, a user's text) becomes a space. */
static void one_line(char *msg) {
    for (unsigned char *p = (unsigned char *)msg; *p; p++)
        if (*p < 0x20 || *p == 0x7F) *p = ' ';
}

mxl_status mxl_error_set(mxl_error *err, mxl_status status, const char *fmt, ...) {
    if (err) {
        err->status = status;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        one_line(err->msg);
    }
    return status;
}

void mxl_error_prefix(mxl_error *err, const char *fmt, ...) {
    if (!err) return;
    char prefix[MXL_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t plen = strlen(prefix), olen = strnlen(err->msg, sizeof err->msg - 1);
    if (plen > sizeof err->msg - 1) plen = sizeof err->msg - 1;
    if (plen + olen > sizeof err->msg - 1) olen = sizeof err->msg - 1 - plen;
    memmove(err->msg + plen, err->msg, olen);
    memcpy(err->msg, prefix, plen);
    err->msg[plen + olen] = '\0';
    one_line(err->msg);
}

void mxl_error_clear(mxl_error *err) {
    if (!err) return;
    err->status = MXL_OK;
    err->msg[0] = '\0';
}

const char *mxl_status_name(mxl_status status) {
    switch (status) {
    case MXL_OK: return "ok";
    case MXL_ERR_IO: return "io error";
    case MXL_ERR_FORMAT: return "format error";
    case MXL_ERR_UNSUPPORTED: return "unsupported";
    case MXL_ERR_NOMEM: return "out of memory";
    case MXL_ERR_ARG: return "bad argument";
    case MXL_ERR_NOT_FOUND: return "not found";
    case MXL_ERR_OVERFLOW: return "size overflow";
    case MXL_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

void mxl_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "mlxcel: internal assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}
