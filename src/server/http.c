/* http.c - HTTP transport on libmicrohttpd (http.h). */
#include "server/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/alloc.h"
#include "io/json_write.h"

#define MAX_LISTENERS 8 /* --host a,b,...: one daemon per address, all on one port */

/* Open connections of one client address (--max-connections-per-ip). */
typedef struct ip_slot {
    unsigned char addr[16]; /* IPv4 in the first 4 bytes (v4-mapped IPv6 too), or IPv6 */
    bool v6;
    unsigned count;
} ip_slot;

/* A connection's socket context: its ip_slot + 1, and IP_OVER when its address already had
 * max_conn_per_ip open connections when it came (its requests are answered 429). */
#define IP_OVER ((uintptr_t)1 << 30)

struct mxl_http_server {
    struct MHD_Daemon *d[MAX_LISTENERS];
    int listen_fd[MAX_LISTENERS];
    int n_listen;
    mxl_http_config cfg;
    mxl_http_handler handler;
    void *ctx;
    char address[600]; /* the first listener's */
    char *unix_path;
    atomic_uint in_flight; /* requests begun and not yet completed (streams until their end) */
    pthread_mutex_t ip_mu; /* the open connections by client address (ips[n_ips], free slots: count 0) */
    ip_slot *ips;
    size_t n_ips;
};

struct mxl_http_req {
    mxl_http_server *srv;
    struct MHD_Connection *conn;
    const char *method, *url;
    char *body;
    size_t body_len, body_cap;
    bool too_large, responded, streaming;
    bool close_after; /* refused by a connection limit: the connection closes after the answer */
    uint64_t alloc_failed0; /* mxl_alloc_thread_failures() when the handler started */
};

/* --- listening socket --------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Listens on one address (host, port) into *fd_out; address (cap bytes) gets its URL and
 * *real_port the bound port (port 0 asks for an ephemeral one). */
static mxl_status open_listener(mxl_http_server *s, const char *hostname, int want_port, int *fd_out, int *real_port_out,
                                char *address, size_t cap, mxl_error *err) {
    const mxl_http_config *c = &s->cfg;
    if (ends_with(hostname, ".sock")) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        if (strlen(hostname) >= sizeof a.sun_path)
            return mxl_error_set(err, MXL_ERR_ARG, "--host %s: Unix socket path is too long", hostname);
        strcpy(a.sun_path, hostname);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return mxl_error_set(err, MXL_ERR_IO, "socket: %s", strerror(errno));
        unlink(hostname); /* a stale socket file from an earlier run */
        if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 512) != 0) {
            int e = errno;
            close(fd);
            return mxl_error_set(err, MXL_ERR_IO, "cannot listen on %s: %s", hostname, strerror(e));
        }
        *fd_out = fd;
        *real_port_out = 0;
        s->unix_path = mxl_strdup(hostname);
        snprintf(address, cap, "unix:%s", hostname);
        return MXL_OK;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", want_port);
    int rc = getaddrinfo(hostname, port, &hints, &res);
    if (rc != 0) return mxl_error_set(err, MXL_ERR_ARG, "--host %s: %s", hostname, gai_strerror(rc));
    int fd = -1, last = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (c->reuse_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        /* in a list, "::" must not take the IPv4 side that "0.0.0.0" listens on too */
        if (ai->ai_family == AF_INET6 && strchr(c->host, ',')) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 512) != 0) {
            last = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) return mxl_error_set(err, MXL_ERR_IO, "cannot listen on %s:%d: %s", hostname, want_port, strerror(last));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    int real_port = want_port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a4->sin_addr, host, sizeof host);
            real_port = ntohs(a4->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof host);
            real_port = ntohs(a6->sin6_port);
        }
    }
    *fd_out = fd;
    *real_port_out = real_port;
    bool v6 = strchr(host, ':') != NULL;
    snprintf(address, cap, "%s://%s%s%s:%d", c->cert_pem ? "https" : "http", v6 ? "[" : "", host, v6 ? "]" : "", real_port);
    return MXL_OK;
}

static void close_listeners(mxl_http_server *s) {
    for (int i = 0; i < s->n_listen; i++)
        if (s->listen_fd[i] >= 0) close(s->listen_fd[i]);
    s->n_listen = 0;
    if (s->unix_path) unlink(s->unix_path);
}

/* --host is one address or a comma-separated list (llama-server: "127.0.0.1,::1"); every
 * address after the first listens on the port the first got, so --port 0 gives them one port.
 * A Unix socket stands alone. */
static mxl_status open_listeners(mxl_http_server *s, mxl_error *err) {
    const char *list = s->cfg.host;
    int port = s->cfg.port;
    bool multi = strchr(list, ',') != NULL;
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ',') e++;
        const char *t = e;
        while (t > p && t[-1] == ' ') t--;
        char host[512], address[600];
        if ((size_t)(t - p) >= sizeof host) return mxl_error_set(err, MXL_ERR_ARG, "--host: an address is too long");
        memcpy(host, p, (size_t)(t - p));
        host[t - p] = 0;
        if (host[0] == '[' && t - p > 2 && host[t - p - 1] == ']') { /* [::1] */
            memmove(host, host + 1, (size_t)(t - p - 2));
            host[t - p - 2] = 0;
        }
        if (multi && ends_with(host, ".sock")) {
            close_listeners(s);
            return mxl_error_set(err, MXL_ERR_ARG, "--host %s: a Unix socket cannot be listed with other addresses", host);
        }
        if (s->n_listen == MAX_LISTENERS) {
            close_listeners(s);
            return mxl_error_set(err, MXL_ERR_ARG, "--host: at most %d addresses", MAX_LISTENERS);
        }
        int fd = -1, real = 0;
        mxl_status st = open_listener(s, host, port, &fd, &real, address, sizeof address, err);
        if (st) {
            close_listeners(s);
            return st;
        }
        s->listen_fd[s->n_listen++] = fd;
        if (s->n_listen == 1) {
            snprintf(s->address, sizeof s->address, "%s", address);
            port = real;
        }
        p = e;
    }
    if (s->n_listen == 0) return mxl_error_set(err, MXL_ERR_ARG, "--host: no address given");
    return MXL_OK;
}

/* --- CORS ----------------------------------------------------------------------------------- */

static bool list_has(const char *list, const char *item) {
    size_t n = strlen(item);
    for (const char *p = list; p && *p;) {
        while (*p == ' ' || *p == ',') p++;
        const char *e = p;
        while (*e && *e != ',') e++;
        const char *t = e;
        while (t > p && t[-1] == ' ') t--;
        if ((size_t)(t - p) == n && strncmp(p, item, n) == 0) return true;
        p = e;
    }
    return false;
}

/* True when an Origin header names a loopback host (localhost, 127.0.0.1, [::1]) on any port. */
static bool origin_is_loopback(const char *origin) {
    const char *h = strstr(origin, "://");
    if (!h) return false;
    h += 3;
    static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        size_t n = strlen(hosts[i]);
        if (strncasecmp(h, hosts[i], n) == 0 && (h[n] == '\0' || h[n] == ':' || h[n] == '/')) return true;
    }
    return false;
}

static void add_cors(mxl_http_req *r, struct MHD_Response *resp, bool preflight) {
    const mxl_http_config *c = &r->srv->cfg;
    const char *origin = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
    const char *allow = NULL;
    if (c->allowed_origins) {
        if (origin && list_has(c->allowed_origins, origin)) allow = origin;
    } else if (!c->cors_origins || strcmp(c->cors_origins, "*") == 0) {
        allow = c->cors_credentials && origin ? origin : "*";
    } else if (strcmp(c->cors_origins, "localhost") == 0) {
        /* the spec's `localhost`: the Origin is reflected only when its host is a loopback name */
        if (origin && origin_is_loopback(origin)) allow = origin;
    } else {
        allow = c->cors_origins;
    }
    if (!allow) return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", allow);
    if (c->cors_credentials && strcmp(allow, "*") != 0)
        MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
    if (preflight) {
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", c->cors_methods ? c->cors_methods : "GET,POST,OPTIONS");
        const char *req_h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        const char *h = c->cors_headers ? c->cors_headers : "*";
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", strcmp(h, "*") == 0 && req_h ? req_h : h);
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    }
}

/* --- responses ---------------------------------------------------------------------------- */

static void queue(mxl_http_req *r, int status, struct MHD_Response *resp, const char *content_type) {
    if (!resp) return;
    if (content_type) MHD_add_response_header(resp, "Content-Type", content_type);
    MHD_add_response_header(resp, "Server", "mlxcel");
    if (r->close_after) MHD_add_response_header(resp, "Connection", "close");
    add_cors(r, resp, false);
    MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->responded = true;
}

void mxl_http_send(mxl_http_req *r, int status, const char *content_type, const char *body, size_t len) {
    if (r->responded) return;
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    queue(r, status, resp, content_type);
}

void mxl_http_send_with_header(mxl_http_req *r, int status, const char *content_type, const char *body, size_t len,
                               const char *header, const char *value) {
    if (r->responded) return;
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (resp) MHD_add_response_header(resp, header, value);
    queue(r, status, resp, content_type);
}

void mxl_http_send_static(mxl_http_req *r, int status, const char *content_type, const void *body, size_t len,
                          const char *const *headers) {
    if (r->responded) return;
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_PERSISTENT);
    for (size_t i = 0; resp && headers && headers[i] && headers[i + 1]; i += 2) MHD_add_response_header(resp, headers[i], headers[i + 1]);
    queue(r, status, resp, content_type);
}

void mxl_http_send_json(mxl_http_req *r, int status, json_t *body) {
    /* An allocation that failed on this thread while the request was handled may have left a
     * hole in the body (jansson's builders skip what they could not allocate): out of memory. */
    bool whole = !mxl_http_alloc_failed(r);
    char *s = body && whole ? mxl_json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!s) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":500}}";
        mxl_http_send(r, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    if (r->responded) {
        mxl_free(s);
        return;
    }
    /* MUST_COPY: MHD would free() a MUST_FREE buffer, and s is the seam's (jansson allocates
     * through it) */
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_COPY);
    mxl_free(s);
    queue(r, status, resp, "application/json; charset=utf-8");
}

typedef struct stream_state {
    mxl_http_produce_fn produce;
    mxl_http_done_fn done;
    void *ctx;
    bool ended;
} stream_state;

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_state *st = cls;
    ssize_t n = st->produce(st->ctx, buf, max);
    if (n < 0) {
        st->ended = true;
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    return n;
}

static void stream_free(void *cls) {
    stream_state *st = cls;
    if (st->done) st->done(st->ctx, !st->ended);
    mxl_free(st);
}

void mxl_http_stream(mxl_http_req *r, int status, const char *content_type, mxl_http_produce_fn produce,
                     mxl_http_done_fn done, void *ctx) {
    if (r->responded) {
        if (done) done(ctx, true);
        return;
    }
    stream_state *st = mxl_calloc(1, sizeof *st);
    if (!st) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":500}}";
        mxl_http_send(r, 500, "application/json", oom, sizeof oom - 1);
        if (done) done(ctx, true);
        return;
    }
    st->produce = produce;
    st->done = done;
    st->ctx = ctx;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, st, stream_free);
    if (!resp) {
        stream_free(st);
        return;
    }
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    queue(r, status, resp, content_type);
    r->streaming = r->responded;
}

bool mxl_http_streaming(const mxl_http_req *r) { return r->streaming; }

bool mxl_http_alloc_failed(const mxl_http_req *r) { return mxl_alloc_thread_failures() != r->alloc_failed0; }

/* --- request accessors -------------------------------------------------------------------- */

const char *mxl_http_method(const mxl_http_req *r) { return r->method; }
const char *mxl_http_path(const mxl_http_req *r) { return r->url; }
const char *mxl_http_body(const mxl_http_req *r, size_t *len) {
    *len = r->body_len;
    return r->body ? r->body : "";
}
const char *mxl_http_header(const mxl_http_req *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}
const char *mxl_http_query(const mxl_http_req *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

typedef struct query_buf {
    char *out;
    size_t cap, len;
    bool cut;
} query_buf;

static void query_put(query_buf *q, const char *s, bool encode) {
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool plain = !encode || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c);
        size_t need = plain ? 1 : 3;
        if (q->len + need >= q->cap) {
            q->cut = true;
            return;
        }
        if (plain) q->out[q->len++] = (char)c;
        else {
            q->out[q->len++] = '%';
            q->out[q->len++] = hex[c >> 4];
            q->out[q->len++] = hex[c & 15];
        }
    }
}

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    query_buf *q = cls;
    if (q->len) query_put(q, "&", false);
    query_put(q, key, true);
    if (value) {
        query_put(q, "=", false);
        query_put(q, value, true);
    }
    return MHD_YES;
}

bool mxl_http_query_string(const mxl_http_req *r, char *out, size_t cap) {
    query_buf q = {.out = out, .cap = cap};
    if (cap) out[0] = 0;
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_arg, &q);
    if (cap) out[q.len < cap ? q.len : cap - 1] = 0;
    return !q.cut;
}

bool mxl_http_client_gone(mxl_http_req *r) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return true;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) < 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* --- limits (server/limits.h) --------------------------------------------------------------- */

/* A refusal by the transport, in the API's shape when the server gave a refuse hook. */
static void refuse(mxl_http_req *r, int status, const char *type, const char *msg) {
    r->alloc_failed0 = mxl_alloc_thread_failures();
    if (r->srv->cfg.refuse) {
        r->srv->cfg.refuse(r, status, type, msg);
        if (r->responded) return;
    }
    char body[1024];
    int n = snprintf(body, sizeof body, "{\"error\":{\"code\":%d,\"message\":\"%s\",\"type\":\"%s\"}}", status, msg, type);
    mxl_http_send(r, status, "application/json", body, n > 0 && (size_t)n < sizeof body ? (size_t)n : 0);
}

typedef struct header_tally {
    size_t bytes;
    unsigned n;
} header_tally;

static enum MHD_Result tally_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    header_tally *t = cls;
    t->n += kind == MHD_HEADER_KIND;
    t->bytes += strlen(key) + (value ? strlen(value) : 0) + 4; /* "k: v\r\n", "k=v&" */
    return MHD_YES;
}

/* 431 when the request line and header fields pass --max-header-bytes or --max-headers. (MHD
 * answers a request whose head does not fit the connection's memory itself, with 431.) */
static bool headers_refused(mxl_http_req *r, const char *method, const char *url) {
    const mxl_http_config *c = &r->srv->cfg;
    if (!c->max_header_bytes && !c->max_headers) return false;
    header_tally t = {strlen(method) + strlen(url) + 11, 0}; /* "M URL HTTP/1.1\r\n" */
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND, tally_header, &t);
    char msg[256];
    if (c->max_headers && t.n > c->max_headers)
        snprintf(msg, sizeof msg, "the request has %u header fields; at most %u are accepted (--max-headers raises the limit)", t.n,
                 c->max_headers);
    else if (c->max_header_bytes && t.bytes > c->max_header_bytes)
        snprintf(msg, sizeof msg, "the request line and header fields are %zu bytes; at most %zu are accepted (--max-header-bytes raises the limit)",
                 t.bytes, c->max_header_bytes);
    else return false;
    r->close_after = true;
    refuse(r, 431, "invalid_request_error", msg);
    return true;
}

/* The client address of sa as a table key; false for one that is not counted (a Unix socket,
 * and loopback unless the limit was given explicitly). */
static bool ip_key(const mxl_http_server *s, const struct sockaddr *sa, unsigned char key[16], bool *v6) {
    memset(key, 0, 16);
    *v6 = false;
    if (!sa) return false;
    if (sa->sa_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            memcpy(key, a->s6_addr + 12, 4);
        } else {
            memcpy(key, a->s6_addr, 16);
            *v6 = true;
            if (IN6_IS_ADDR_LOOPBACK(a) && !s->cfg.conn_per_ip_loopback) return false;
            return true;
        }
    } else {
        return false;
    }
    return key[0] != 127 || s->cfg.conn_per_ip_loopback;
}

/* The slot of a key, or a free one (count 0); n_ips when the table is full. With ip_mu held. */
static size_t ip_find(const mxl_http_server *s, const unsigned char key[16], bool v6) {
    size_t free_slot = s->n_ips;
    for (size_t i = 0; i < s->n_ips; i++) {
        if (s->ips[i].count && s->ips[i].v6 == v6 && memcmp(s->ips[i].addr, key, 16) == 0) return i;
        if (!s->ips[i].count && free_slot == s->n_ips) free_slot = i;
    }
    return free_slot;
}

/* Accept policy: past twice the per-address limit a new connection is closed at once (idle
 * connections over the limit would hold a thread each until the timeout). */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
    (void)addrlen;
    mxl_http_server *s = cls;
    unsigned char key[16];
    bool v6;
    if (!s->cfg.max_conn_per_ip || !ip_key(s, addr, key, &v6)) return MHD_YES;
    pthread_mutex_lock(&s->ip_mu);
    size_t i = ip_find(s, key, v6);
    bool ok = i == s->n_ips || s->ips[i].count < 2 * s->cfg.max_conn_per_ip;
    pthread_mutex_unlock(&s->ip_mu);
    return ok ? MHD_YES : MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context, enum MHD_ConnectionNotificationCode toe) {
    mxl_http_server *s = cls;
    if (!s->cfg.max_conn_per_ip) return;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        unsigned char key[16];
        bool v6;
        *socket_context = NULL;
        if (!ci || !ip_key(s, ci->client_addr, key, &v6)) return;
        pthread_mutex_lock(&s->ip_mu);
        size_t i = ip_find(s, key, v6);
        if (i < s->n_ips) {
            if (!s->ips[i].count) {
                memcpy(s->ips[i].addr, key, 16);
                s->ips[i].v6 = v6;
            }
            uintptr_t over = s->ips[i].count >= s->cfg.max_conn_per_ip ? IP_OVER : 0;
            s->ips[i].count++;
            *socket_context = (void *)((i + 1) | over);
        }
        pthread_mutex_unlock(&s->ip_mu);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        size_t i = ((uintptr_t)*socket_context & (IP_OVER - 1)) - 1;
        pthread_mutex_lock(&s->ip_mu);
        if (i < s->n_ips && s->ips[i].count) s->ips[i].count--;
        pthread_mutex_unlock(&s->ip_mu);
        *socket_context = NULL;
    }
}

/* 429 for a request on a connection that came when its address had its fill open already. */
static bool connections_refused(mxl_http_req *r) {
    const mxl_http_server *s = r->srv;
    if (!s->cfg.max_conn_per_ip) return false;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (!ci || !((uintptr_t)ci->socket_context & IP_OVER)) return false;
    char msg[256];
    snprintf(msg, sizeof msg, "too many open connections from this address: at most %u (--max-connections-per-ip raises the limit)",
             s->cfg.max_conn_per_ip);
    r->close_after = true;
    refuse(r, 429, "rate_limit_error", msg);
    return true;
}

/* --- the daemon ----------------------------------------------------------------------------- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    mxl_http_server *s = cls;
    mxl_http_req *r = *con_cls;
    if (!r) {
        r = mxl_calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->srv = s;
        r->conn = conn;
        r->method = method;
        r->url = url;
        *con_cls = r;
        atomic_fetch_add(&s->in_flight, 1);
        /* the head is complete: its limits, and the connection's (answered before any body) */
        if (!connections_refused(r)) headers_refused(r, method, url);
        return MHD_YES;
    }
    if (*upload_size) { /* a body chunk */
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->too_large || r->body_len + n > s->cfg.max_body) {
            r->too_large = true;
            return MHD_YES; /* keep reading, answer 413 at the end */
        }
        if (r->body_len + n + 1 > r->body_cap) {
            size_t cap = r->body_cap ? r->body_cap : 4096;
            while (cap < r->body_len + n + 1) cap *= 2;
            char *b = mxl_realloc(r->body, cap);
            if (!b) return MHD_NO;
            r->body = b;
            r->body_cap = cap;
        }
        memcpy(r->body + r->body_len, upload_data, n);
        r->body_len += n;
        r->body[r->body_len] = 0;
        return MHD_YES;
    }
    if (r->responded) return MHD_YES;
    if (r->too_large) {
        char msg[160];
        snprintf(msg, sizeof msg, "the request body is larger than %zu bytes (--max-body-bytes raises the limit)", s->cfg.max_body);
        refuse(r, 413, "invalid_request_error", msg);
        return MHD_YES;
    }
    if (strcmp(method, "OPTIONS") == 0) { /* CORS preflight: 200 with no body, as llama-server answers it */
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (resp) {
            add_cors(r, resp, true);
            MHD_queue_response(conn, 200, resp);
            MHD_destroy_response(resp);
            r->responded = true;
        }
        return MHD_YES;
    }
    r->alloc_failed0 = mxl_alloc_thread_failures();
    s->handler(s->ctx, r);
    if (!r->responded) {
        static const char msg[] = "{\"error\":{\"message\":\"no response\",\"type\":\"server_error\",\"code\":500}}";
        mxl_http_send(r, 500, "application/json", msg, sizeof msg - 1);
    }
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)conn, (void)toe;
    mxl_http_req *r = *con_cls;
    if (!r) return;
    atomic_fetch_sub(&r->srv->in_flight, 1);
    mxl_free(r->body);
    mxl_free(r);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls, (void)fmt, (void)ap; /* transport chatter (bad requests from clients) is not an error of ours */
}

mxl_status mxl_http_start(const mxl_http_config *cfg, mxl_http_handler handler, void *ctx,
                          mxl_http_server **out, mxl_error *err) {
    *out = NULL;
    mxl_http_server *s = mxl_calloc(1, sizeof *s);
    if (!s) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    s->cfg = *cfg;
    s->handler = handler;
    s->ctx = ctx;
    unsigned max_conn = cfg->max_connections ? cfg->max_connections : 1024;
    /* one slot per open connection at most (a slot is free again when its count is 0) */
    if (cfg->max_conn_per_ip && !(s->ips = mxl_calloc(max_conn, sizeof *s->ips))) {
        mxl_free(s);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    s->n_ips = cfg->max_conn_per_ip ? max_conn : 0;
    pthread_mutex_init(&s->ip_mu, NULL);
    mxl_status st = open_listeners(s, err);
    if (st) {
        pthread_mutex_destroy(&s->ip_mu);
        mxl_free(s->ips);
        mxl_free(s->unix_path);
        mxl_free(s);
        return st;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC | MHD_USE_POLL;
    bool tls = cfg->cert_pem && cfg->key_pem;
    if (tls) flags |= MHD_USE_TLS;
    struct MHD_OptionItem opts[14];
    int n = 0;
    /* the connection's memory pool holds the request's head: room for --max-header-bytes (our
     * 431 in the API's shape), with MHD's own 431 only past it */
    size_t pool = 64 * 1024;
    if (cfg->max_header_bytes && 2 * cfg->max_header_bytes + 16 * 1024 > pool) pool = 2 * cfg->max_header_bytes + 16 * 1024;
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, -1, NULL}; /* set per listener below */
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, cfg->timeout_s, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, max_conn, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)pool, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL};
    if (tls) {
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cfg->cert_pem};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)cfg->key_pem};
    }
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    for (int i = 0; i < s->n_listen; i++) {
        opts[0].value = s->listen_fd[i];
        s->d[i] = MHD_start_daemon(flags, 0, cfg->max_conn_per_ip ? accept_policy : NULL, s, on_request, s, MHD_OPTION_ARRAY, opts,
                                   MHD_OPTION_END);
        if (s->d[i]) continue;
        for (int j = 0; j < i; j++) MHD_stop_daemon(s->d[j]);
        close_listeners(s);
        pthread_mutex_destroy(&s->ip_mu);
        mxl_free(s->ips);
        mxl_free(s->unix_path);
        mxl_free(s);
        return mxl_error_set(err, MXL_ERR_IO, tls ? "cannot start the HTTPS server (check --ssl-cert-file / --ssl-key-file)"
                                                  : "cannot start the HTTP server");
    }
    *out = s;
    return MXL_OK;
}

const char *mxl_http_address(const mxl_http_server *s) { return s->address; }

unsigned mxl_http_in_flight(mxl_http_server *s) { return s ? atomic_load(&s->in_flight) : 0; }

void mxl_http_quiesce(mxl_http_server *s) {
    if (!s) return;
    for (int i = 0; i < s->n_listen; i++) {
        if (s->listen_fd[i] < 0) continue;
        MHD_socket fd = MHD_quiesce_daemon(s->d[i]);
        if (fd != MHD_INVALID_SOCKET) close(fd);
        s->listen_fd[i] = -1;
    }
}

void mxl_http_stop(mxl_http_server *s) {
    if (!s) return;
    /* let connections that are writing their last response finish (bounded: idle keep-alive
     * connections would otherwise hold the shutdown until their timeout) */
    for (int i = 0; i < 30; i++) {
        unsigned busy = 0;
        for (int k = 0; k < s->n_listen; k++) {
            const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d[k], MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
            if (di) busy += di->num_connections;
        }
        if (busy == 0) break;
        usleep(100 * 1000);
    }
    for (int k = 0; k < s->n_listen; k++) MHD_stop_daemon(s->d[k]);
    close_listeners(s);
    pthread_mutex_destroy(&s->ip_mu);
    mxl_free(s->ips);
    mxl_free(s->unix_path);
    mxl_free(s);
}
