/* http.h - the HTTP(S) client behind `mlxcel download`: a thin layer over libcurl (Debian's
 * libcurl4-openssl-dev) with the few things the Hub client needs and nothing else.
 *
 *  - one mxl_http per thread (a curl easy handle: keep-alive connections are reused between
 *    requests of the same handle);
 *  - TLS peers are always verified, against the system store plus the PEM bundle named by
 *    $MLXCEL_EXTRA_CA_CERTS when set;
 *  - the headers the Hub answers with are captured per response (of a redirect chain, those of the
 *    last response; with follow off, those of the redirect itself);
 *  - a body goes to a caller's sink (a file being downloaded) or into a capped memory buffer
 *    (API answers, error bodies);
 *  - the Authorization header is sent to the first host only: curl drops it on a redirect to
 *    another host, like huggingface_hub does for the Hub's CDN redirects. */
#ifndef MXL_IO_HTTP_H
#define MXL_IO_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct mxl_http mxl_http;

/* Header values kept from a response ("" when absent). */
typedef struct mxl_http_headers {
    char etag[160];
    char linked_etag[160]; /* X-Linked-Etag */
    char repo_commit[64];  /* X-Repo-Commit */
    char location[2048];
    char error_code[64];     /* X-Error-Code (RepoNotFound, GatedRepo, ...) */
    char error_message[256]; /* X-Error-Message */
    char content_range[96];
    char retry_after[32];
    int64_t content_length; /* -1 when absent */
    int64_t linked_size;    /* X-Linked-Size; -1 when absent */
    bool accept_ranges;
} mxl_http_headers;

/* Receives body bytes; returns false to abort the transfer (then the request fails with the
 * message the sink left in its own state). */
typedef bool (*mxl_http_sink)(void *ud, const void *data, size_t n);

typedef struct mxl_http_request {
    const char *method; /* "GET" or "HEAD" */
    const char *url;
    const char *token;  /* bearer token or NULL; never logged */
    bool follow;        /* follow redirects (GET of a file); HEAD keeps the redirect's headers */
    int64_t range_from; /* >0: ask for bytes range_from.. (resume); 0 or less: the whole body */
    mxl_http_sink sink; /* NULL: the body is kept in memory (at most body_cap bytes) */
    void *sink_ud;
    size_t body_cap;      /* memory body limit; 0 means 8 MiB */
    volatile int *cancel; /* non-NULL and nonzero: abort at the next progress tick */
} mxl_http_request;

typedef struct mxl_http_response {
    long status; /* HTTP status of the last response; 0 when no response arrived */
    mxl_http_headers headers;
    char *body; /* NUL-terminated memory body (sink == NULL); free with mxl_http_response_free */
    size_t body_len;
    char effective_url[2048]; /* the URL the last response came from */
} mxl_http_response;

/* Header lines as they arrive (a status line "HTTP/..." starts a new response: the kept values
 * are cleared); values longer than their field are cut, an unparsable number is -1. */
void mxl_http_headers_reset(mxl_http_headers *h);
void mxl_http_parse_header(mxl_http_headers *h, const char *line, size_t len);

/* A handle; NULL with err set when libcurl cannot start. */
mxl_http *mxl_http_new(mxl_error *err);
void mxl_http_free(mxl_http *h);

/* Performs one request. MXL_OK means a response arrived (any status: the caller maps 4xx/5xx);
 * a transport failure (DNS, connect, TLS, reset, timeout, sink abort) is MXL_ERR_IO with a
 * one-line message naming the URL's host. transient_out (may be NULL) is set when a retry may
 * help (connection reset, timeout, partial transfer). */
mxl_status mxl_http_perform(mxl_http *h, const mxl_http_request *req, mxl_http_response *resp,
                            bool *transient_out, mxl_error *err);
void mxl_http_response_free(mxl_http_response *resp);

/* Appends s to out percent-encoding every byte outside [A-Za-z0-9._~-] (and '/' when keep_slash).
 * Returns false when out is too small. */
bool mxl_http_escape(const char *s, bool keep_slash, char *out, size_t cap);

#endif
