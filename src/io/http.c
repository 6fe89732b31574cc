/* http.c - libcurl behind mxl_http (see http.h): handles, TLS trust, header capture, bodies. */
#include "io/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"

struct mxl_http {
    CURL *curl;
};

/* --- process-wide state: curl_global_init and the CA bundle blob --------------------------- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CURLcode g_init_rc = CURLE_OK;
static char *g_ca_blob;       /* system bundle + $MLXCEL_EXTRA_CA_CERTS, or NULL (curl's default) */
static size_t g_ca_blob_len;
static char g_ca_error[512];  /* non-empty: $MLXCEL_EXTRA_CA_CERTS could not be read */

/* Appends the whole file at path to the blob; false when it cannot be read. */
static bool blob_append_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char buf[65536];
    size_t n;
    bool ok = true;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        char *grown = mxl_realloc(g_ca_blob, g_ca_blob_len + n + 2);
        if (!grown) {
            ok = false;
            break;
        }
        g_ca_blob = grown;
        memcpy(g_ca_blob + g_ca_blob_len, buf, n);
        g_ca_blob_len += n;
    }
    if (ferror(f)) ok = false;
    fclose(f);
    if (ok && g_ca_blob) g_ca_blob[g_ca_blob_len++] = '\n'; /* PEM files need not end in one */
    return ok;
}

static void global_init(void) {
    g_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *extra = getenv("MLXCEL_EXTRA_CA_CERTS");
    if (!extra || !extra[0]) return;
    /* curl takes one CA source; trusting "the system store plus these" means handing it both. */
    const char *system_bundles[] = {"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                                    "/etc/ssl/cert.pem"};
    for (size_t i = 0; i < sizeof system_bundles / sizeof system_bundles[0]; i++)
        if (blob_append_file(system_bundles[i])) break;
    int saved = 0;
    if (!blob_append_file(extra)) {
        saved = errno;
        snprintf(g_ca_error, sizeof g_ca_error, "MLXCEL_EXTRA_CA_CERTS=%.256s cannot be read: %s", extra,
                 strerror(saved ? saved : EIO));
    }
}

mxl_http *mxl_http_new(mxl_error *err) {
    pthread_once(&g_once, global_init);
    if (g_init_rc != CURLE_OK) {
        mxl_error_set(err, MXL_ERR_IO, "libcurl failed to initialise: %s", curl_easy_strerror(g_init_rc));
        return NULL;
    }
    if (g_ca_error[0]) {
        mxl_error_set(err, MXL_ERR_ARG, "%s", g_ca_error);
        return NULL;
    }
    mxl_http *h = mxl_calloc(1, sizeof *h);
    if (!h || !(h->curl = curl_easy_init())) {
        mxl_free(h);
        mxl_error_set(err, MXL_ERR_NOMEM, "libcurl could not create a handle");
        return NULL;
    }
    return h;
}

void mxl_http_free(mxl_http *h) {
    if (!h) return;
    curl_easy_cleanup(h->curl);
    mxl_free(h);
}

void mxl_http_response_free(mxl_http_response *resp) {
    if (!resp) return;
    mxl_free(resp->body);
    resp->body = NULL;
    resp->body_len = 0;
}

/* --- callbacks ------------------------------------------------------------------------------- */

typedef struct xfer {
    CURL *curl;
    const mxl_http_request *req;
    mxl_http_response *resp;
    size_t body_cap;
    size_t body_alloc;
    bool too_large;
    bool sink_abort;
    bool oom;
} xfer;

static void copy_value(char *dst, size_t cap, const char *v, size_t n) {
    if (n >= cap) n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static int64_t parse_i64(const char *v, size_t n) {
    char tmp[32];
    if (n == 0 || n >= sizeof tmp) return -1;
    memcpy(tmp, v, n);
    tmp[n] = '\0';
    char *end;
    errno = 0;
    long long x = strtoll(tmp, &end, 10);
    if (errno || *end || x < 0) return -1;
    return (int64_t)x;
}

void mxl_http_headers_reset(mxl_http_headers *h) {
    memset(h, 0, sizeof *h);
    h->content_length = -1;
    h->linked_size = -1;
}

void mxl_http_parse_header(mxl_http_headers *h, const char *data, size_t len) {
    if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) { /* a new response of the chain */
        mxl_http_headers_reset(h);
        return;
    }
    const char *colon = memchr(data, ':', len);
    if (!colon) return;
    size_t nlen = (size_t)(colon - data);
    const char *v = colon + 1, *end = data + len;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t')) end--;
    size_t vlen = (size_t)(end - v);
#define IS(name) (nlen == sizeof(name) - 1 && strncasecmp(data, name, nlen) == 0)
    if (IS("etag")) copy_value(h->etag, sizeof h->etag, v, vlen);
    else if (IS("x-linked-etag")) copy_value(h->linked_etag, sizeof h->linked_etag, v, vlen);
    else if (IS("x-repo-commit")) copy_value(h->repo_commit, sizeof h->repo_commit, v, vlen);
    else if (IS("location")) copy_value(h->location, sizeof h->location, v, vlen);
    else if (IS("x-error-code")) copy_value(h->error_code, sizeof h->error_code, v, vlen);
    else if (IS("x-error-message")) copy_value(h->error_message, sizeof h->error_message, v, vlen);
    else if (IS("content-range")) copy_value(h->content_range, sizeof h->content_range, v, vlen);
    else if (IS("retry-after")) copy_value(h->retry_after, sizeof h->retry_after, v, vlen);
    else if (IS("content-length")) h->content_length = parse_i64(v, vlen);
    else if (IS("x-linked-size")) h->linked_size = parse_i64(v, vlen);
    else if (IS("accept-ranges")) h->accept_ranges = vlen == 5 && strncasecmp(v, "bytes", 5) == 0;
#undef IS
}

static size_t on_header(char *data, size_t size, size_t nitems, void *ud) {
    xfer *x = ud;
    size_t len = size * nitems;
    mxl_http_parse_header(&x->resp->headers, data, len);
    return len;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud) {
    xfer *x = ud;
    size_t n = size * nmemb;
    /* The body of an error answer is not the file: it stays in memory (for the message) instead of
     * going to the sink. */
    long code = 0;
    curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &code);
    if (x->req->sink && code >= 200 && code < 300) {
        if (!x->req->sink(x->req->sink_ud, data, n)) {
            x->sink_abort = true;
            return 0;
        }
        return n;
    }
    mxl_http_response *r = x->resp;
    if (r->body_len + n > x->body_cap) {
        x->too_large = true;
        return 0;
    }
    if (r->body_len + n + 1 > x->body_alloc) {
        size_t want = x->body_alloc ? x->body_alloc * 2 : 4096;
        while (want < r->body_len + n + 1) want *= 2;
        char *grown = mxl_realloc(r->body, want);
        if (!grown) {
            x->oom = true;
            return 0;
        }
        r->body = grown;
        x->body_alloc = want;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
    return n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    const xfer *x = ud;
    return x->req->cancel && *x->req->cancel ? 1 : 0;
}

/* --- one request ----------------------------------------------------------------------------- */

static bool is_transient(CURLcode rc) {
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

static void host_of(const char *url, char *out, size_t cap) {
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t n = strcspn(p, "/?#");
    copy_value(out, cap, p, n);
}

mxl_status mxl_http_perform(mxl_http *h, const mxl_http_request *req, mxl_http_response *resp,
                            bool *transient_out, mxl_error *err) {
    if (transient_out) *transient_out = false;
    memset(resp, 0, sizeof *resp);
    mxl_http_headers_reset(&resp->headers);
    xfer x = {.curl = h->curl, .req = req, .resp = resp, .body_cap = req->body_cap ? req->body_cap : (size_t)8 << 20};
    if (req->sink && !req->body_cap) x.body_cap = 64 << 10; /* an error body next to a sink */
    CURL *c = h->curl;
    curl_easy_reset(c);
    char errbuf[CURL_ERROR_SIZE] = "";
    char auth[1024];
    struct curl_slist *hdrs = NULL;
    if (req->token && req->token[0]) {
        if (strlen(req->token) > 900 || strpbrk(req->token, "\r\n"))
            return mxl_error_set(err, MXL_ERR_ARG, "the access token is malformed (too long or has a line break)");
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", req->token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    hdrs = curl_slist_append(hdrs, "Accept-Encoding: identity");
    curl_easy_setopt(c, CURLOPT_URL, req->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "mlxcel/" MXL_VERSION);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (g_ca_blob) {
        struct curl_blob blob = {.data = g_ca_blob, .len = g_ca_blob_len, .flags = CURL_BLOB_NOCOPY};
        curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
    }
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a stalled transfer fails after 60 s */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, req->follow ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    if (strcmp(req->method, "HEAD") == 0) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    char range[48];
    if (req->range_from > 0) {
        snprintf(range, sizeof range, "%lld-", (long long)req->range_from);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &x);
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024L);

    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(hdrs);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
    char *eff = NULL;
    if (curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &eff) == CURLE_OK && eff)
        copy_value(resp->effective_url, sizeof resp->effective_url, eff, strlen(eff));
    if (rc == CURLE_OK) return MXL_OK;

    char host[256];
    host_of(req->url, host, sizeof host);
    mxl_status st = MXL_ERR_IO;
    if (x.sink_abort) {
        st = MXL_ERR_IO; /* the sink's owner holds the reason */
        mxl_error_set(err, st, "writing the body from %s failed", host);
    } else if (x.too_large) {
        mxl_error_set(err, MXL_ERR_FORMAT, "the answer from %s is larger than %zu bytes", host, x.body_cap);
        st = MXL_ERR_FORMAT;
    } else if (x.oom) {
        st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory reading the answer from %s", host);
    } else if (rc == CURLE_ABORTED_BY_CALLBACK) {
        mxl_error_set(err, st, "the transfer from %s was cancelled", host);
    } else {
        if (transient_out) *transient_out = is_transient(rc);
        mxl_error_set(err, st, "cannot reach %s: %s", host, errbuf[0] ? errbuf : curl_easy_strerror(rc));
    }
    mxl_http_response_free(resp);
    return st;
}

bool mxl_http_escape(const char *s, bool keep_slash, char *out, size_t cap) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = strlen(out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' ||
                     *p == '_' || *p == '~' || *p == '-' || (keep_slash && *p == '/');
        if (o + (plain ? 1 : 3) >= cap) return false;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
    return true;
}
