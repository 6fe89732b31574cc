/* http.h - the server's HTTP transport on libmicrohttpd: a listening socket (TCP host:port,
 * port 0 for an ephemeral one, or a Unix socket when the host ends in ".sock"), optional TLS,
 * one thread per connection, request bodies gathered up to a cap (413 beyond it), the request
 * head held to its limits (431) and the connections of one client address (429), CORS and
 * preflight, and responses either whole (JSON) or streamed from a
 * producer callback (SSE). Routing and the APIs live in the route files; this file knows no
 * endpoint. */
#ifndef MXL_SERVER_HTTP_H
#define MXL_SERVER_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/status.h"

typedef struct mxl_http_req mxl_http_req;

/* Handles one complete request: must send exactly one response with mxl_http_send_* or
 * mxl_http_stream (a handler that sends none gets a 500 from the transport). */
typedef void (*mxl_http_handler)(void *ctx, mxl_http_req *r);

typedef struct mxl_http_config {
    const char *host;      /* address, or a path ending in ".sock" */
    int port;              /* 0: ephemeral */
    bool reuse_port;
    const char *cert_pem, *key_pem; /* TLS when both set (file contents) */
    const char *cors_origins, *cors_headers, *cors_methods; /* llama-server semantics */
    bool cors_credentials;
    const char *allowed_origins; /* mlxcel: comma list of exact origins, or NULL */
    size_t max_body;       /* bytes */
    unsigned timeout_s;    /* socket idle timeout */
    unsigned max_connections;
    /* limits the transport keeps (server/limits.h): the request line and header fields (bytes,
     * count; 0: none), connections per client address (0: none; loopback counted only when
     * conn_per_ip_loopback) */
    size_t max_header_bytes;
    unsigned max_headers, max_conn_per_ip;
    bool conn_per_ip_loopback;
    /* Answers a request the transport refuses itself (413 body, 431 headers, 429 connections)
     * in the API's error shape, naming the flag; NULL: OpenAI's shape. */
    void (*refuse)(mxl_http_req *r, int status, const char *type, const char *msg);
} mxl_http_config;

typedef struct mxl_http_server mxl_http_server;

mxl_status mxl_http_start(const mxl_http_config *cfg, mxl_http_handler handler, void *ctx,
                          mxl_http_server **out, mxl_error *err);
/* The address clients reach: "http://127.0.0.1:PORT" or "unix:/path.sock". */
const char *mxl_http_address(const mxl_http_server *s);
/* Requests begun and not yet completed: bodies arriving, handlers running, streams not ended. */
unsigned mxl_http_in_flight(mxl_http_server *s);
/* Stops accepting new connections (in-flight ones continue). */
void mxl_http_quiesce(mxl_http_server *s);
void mxl_http_stop(mxl_http_server *s);

/* --- request accessors ------------------------------------------------------------------ */
const char *mxl_http_method(const mxl_http_req *r);
const char *mxl_http_path(const mxl_http_req *r); /* without the query string */
const char *mxl_http_body(const mxl_http_req *r, size_t *len);
const char *mxl_http_header(const mxl_http_req *r, const char *name);
const char *mxl_http_query(const mxl_http_req *r, const char *name);
/* The query arguments, percent-encoded again ("a=1&b=x%20y"; "" when none). False when it did not
 * fit in cap. */
bool mxl_http_query_string(const mxl_http_req *r, char *out, size_t cap);
/* True once the client has closed its connection (checked on the socket). */
bool mxl_http_client_gone(mxl_http_req *r);

/* --- responses -------------------------------------------------------------------------- */
void mxl_http_send(mxl_http_req *r, int status, const char *content_type, const char *body, size_t len);
/* Same with one extra response header. */
void mxl_http_send_with_header(mxl_http_req *r, int status, const char *content_type, const char *body, size_t len,
                               const char *header, const char *value);
/* Sends `body`, which outlives the server (not copied), with extra headers: a NULL-terminated list
 * of name, value pairs. */
void mxl_http_send_static(mxl_http_req *r, int status, const char *content_type, const void *body, size_t len,
                          const char *const *headers);
/* Sends and steals (decrefs) the JSON value. */
void mxl_http_send_json(mxl_http_req *r, int status, json_t *body);

/* Streams a response: `produce` is called (from the connection's thread, may block) to write
 * up to `max` bytes into buf; it returns the count, 0 to be called again, -1 at the end.
 * `done` is called once when the stream ends or the client goes away (gone = true). */
typedef ssize_t (*mxl_http_produce_fn)(void *ctx, char *buf, size_t max);
typedef void (*mxl_http_done_fn)(void *ctx, bool gone);
void mxl_http_stream(mxl_http_req *r, int status, const char *content_type, mxl_http_produce_fn produce,
                     mxl_http_done_fn done, void *ctx);
/* True when an allocation has failed on the handler's thread since the handler began: what the
 * request built may have a hole (a message jansson could not copy), so it must not run. */
bool mxl_http_alloc_failed(const mxl_http_req *r);
/* True once the handler answered with mxl_http_stream (the stream goes on after it returns). */
bool mxl_http_streaming(const mxl_http_req *r);

#endif
