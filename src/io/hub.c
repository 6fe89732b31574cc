/* hub.c - the Hub client: repository listing, per-file metadata, parallel resumable verified
 * transfers into the hub cache or a local directory, and the resolver that downloads what a
 * command needs (see hub.h for the protocol). */
#include "io/hub.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "io/http.h"

#define HUB_DEFAULT_ENDPOINT "https://huggingface.co"
#define HUB_DEFAULT_WORKERS 8
#define HUB_MAX_WORKERS 32
#define HUB_RETRIES 3 /* transfer attempts after a transient failure (each resumes) */
#define HUB_URL_MAX 4096

/* ---- configuration from the environment ----------------------------------------------------- */

static const char *env_nonempty(const char *name) {
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

void mxl_hub_endpoint(const char *opt, char *out, size_t cap) {
    const char *e = opt && opt[0] ? opt : env_nonempty("HF_ENDPOINT");
    snprintf(out, cap, "%s", e ? e : HUB_DEFAULT_ENDPOINT);
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == '/') out[--n] = '\0';
}

static bool truthy(const char *v) {
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
                 strcasecmp(v, "on") == 0);
}

bool mxl_hub_offline_env(void) { return truthy(getenv("HF_HUB_OFFLINE")) || truthy(getenv("LLAMA_ARG_OFFLINE")); }

const char *mxl_hub_token(const char *flag) {
    if (flag && flag[0]) return flag;
    const char *t = env_nonempty("HF_TOKEN");
    if (!t) t = env_nonempty("HUGGING_FACE_HUB_TOKEN");
    if (t) return t;
    static char buf[1024];
    char path[MXL_STORE_PATH_MAX];
    const char *p = env_nonempty("HF_TOKEN_PATH");
    if (p) snprintf(path, sizeof path, "%s", p);
    else if ((p = env_nonempty("HF_HOME"))) snprintf(path, sizeof path, "%s/token", p);
    else if ((p = env_nonempty("HOME"))) snprintf(path, sizeof path, "%s/.cache/huggingface/token", p);
    else return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) buf[--n] = '\0';
    return n ? buf : NULL;
}

/* ---- errors from the Hub -------------------------------------------------------------------- */

/* One line for a non-2xx answer; `what` names the request ("repository X", "file Y of X"). */
static mxl_status http_error(const mxl_http_response *r, const char *endpoint, const char *repo_id,
                             const char *revision, const char *what, bool have_token, mxl_error *err) {
    const mxl_http_headers *h = &r->headers;
    const char *code = h->error_code;
    char extra[300] = "";
    if (h->error_message[0]) snprintf(extra, sizeof extra, ": %s", h->error_message);
    long s = r->status;
    if (strcmp(code, "GatedRepo") == 0 || (s == 403 && strstr(h->error_message, "gated")))
        return mxl_error_set(err, MXL_ERR_ARG,
                             "%s is gated: accept its conditions at %s/%s, then pass --token or set HF_TOKEN (HTTP %ld)",
                             repo_id, endpoint, repo_id, s);
    if ((s == 401 || s == 404) && strcmp(code, "RepoNotFound") == 0) /* the Hub's answer for private and missing alike */
        return mxl_error_set(err, MXL_ERR_NOT_FOUND, "repository %s not found at %s (HTTP %ld)%s", repo_id, endpoint, s,
                             have_token ? "" : "; if it is private, pass --token or set HF_TOKEN");
    if (s == 401)
        return mxl_error_set(err, MXL_ERR_ARG,
                             have_token ? "the access token was refused for %s (HTTP 401%s); check --token / HF_TOKEN"
                                        : "%s needs an access token or does not exist (HTTP 401%s); pass --token or set HF_TOKEN",
                             repo_id, extra);
    if (s == 403) return mxl_error_set(err, MXL_ERR_ARG, "access to %s is forbidden (HTTP 403%s)", what, extra);
    if (s == 404) {
        if (strcmp(code, "RevisionNotFound") == 0)
            return mxl_error_set(err, MXL_ERR_NOT_FOUND, "revision '%s' not found in %s (HTTP 404)", revision, repo_id);
        if (strcmp(code, "EntryNotFound") == 0)
            return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s not found (HTTP 404)", what);
        return mxl_error_set(err, MXL_ERR_NOT_FOUND, "repository %s not found at %s (HTTP 404)%s", repo_id, endpoint,
                             have_token ? "" : "; if it is private, pass --token or set HF_TOKEN");
    }
    if (s == 429)
        return mxl_error_set(err, MXL_ERR_IO, "rate-limited by %s (HTTP 429)%s%s%s", endpoint,
                             h->retry_after[0] ? "; retry after " : "; retry later", h->retry_after,
                             h->retry_after[0] ? " s" : "");
    return mxl_error_set(err, MXL_ERR_IO, "%s answered HTTP %ld for %s%s", endpoint, s, what, extra);
}

/* ---- the download ----------------------------------------------------------------------------- */

typedef struct file_job {
    char *path;                    /* repo path */
    char etag[MXL_HUB_ETAG_MAX];   /* normalised */
    int64_t size;                  /* -1 when the server did not say */
    char *url;                     /* where the bytes are (after the resolve redirect) */
    bool present;                  /* nothing to transfer */
    bool copy_from_cache;          /* local-dir mode: the hub cache has the blob */
} file_job;

typedef struct dl {
    const mxl_hub_opts *o;
    const char *repo_id;
    const char *revision;
    const char *token;
    char endpoint[1024];
    char origin[1024]; /* scheme://host[:port] of the endpoint, for relative redirects */
    char commit[MXL_HUB_COMMIT_MAX];
    char hub_dir[MXL_STORE_PATH_MAX];
    char repo_dir[MXL_STORE_PATH_MAX];
    file_job *jobs;
    size_t n;
    int workers;
    mxl_http *http[HUB_MAX_WORKERS]; /* one per worker slot, kept for every phase: its connection is
                                       * reused (the listing's by slot 0) rather than opened anew */

    pthread_mutex_t mu;
    size_t next; /* job queue of the running phase */
    volatile int cancel;
    volatile int disk_full; /* set before cancel when a write ran out of space */
    bool failed;
    mxl_error err;
    int64_t bytes_total, bytes_done;
    int files_total, files_done;
    int64_t bytes_transferred;
    int n_transferred;
} dl;

static void fail(dl *d, const mxl_error *e) {
    pthread_mutex_lock(&d->mu);
    if (!d->failed) {
        d->failed = true;
        d->err = *e;
    }
    d->cancel = 1;
    pthread_mutex_unlock(&d->mu);
}

static void emit(dl *d, mxl_hub_event_kind kind, int slot, const file_job *j, int64_t file_done) {
    if (!d->o->progress) return;
    mxl_hub_event ev = {
        .kind = kind,
        .slot = slot,
        .file = j ? j->path : NULL,
        .file_size = j ? j->size : 0,
        .file_done = file_done,
        .bytes_total = d->bytes_total,
        .bytes_done = d->bytes_done,
        .files_total = d->files_total,
        .files_done = d->files_done,
    };
    d->o->progress(d->o->progress_ud, &ev);
}

static bool pattern_match(const char *pat, const char *path) {
    size_t n = strlen(pat);
    if (n && pat[n - 1] == '/') { /* "dir/" means everything below dir */
        char buf[1100];
        snprintf(buf, sizeof buf, "%s*", pat);
        return fnmatch(buf, path, 0) == 0;
    }
    return fnmatch(pat, path, 0) == 0;
}

static bool wanted(const char *const *include, size_t n_include, const char *const *exclude, size_t n_exclude,
                   const char *path) {
    if (n_include) {
        bool any = false;
        for (size_t i = 0; i < n_include && !any; i++) any = pattern_match(include[i], path);
        if (!any) return false;
    }
    for (size_t i = 0; i < n_exclude; i++)
        if (pattern_match(exclude[i], path)) return false;
    return true;
}

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = mxl_malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* 1. the revision's commit and file list */
static mxl_status list_repo(dl *d, mxl_http *h, mxl_error *err) {
    char url[HUB_URL_MAX];
    snprintf(url, sizeof url, "%s/api/models/%s/revision/", d->endpoint, d->repo_id);
    if (!mxl_http_escape(d->revision, false, url, sizeof url)) return mxl_error_set(err, MXL_ERR_ARG, "revision too long");
    mxl_http_response r;
    mxl_status st = MXL_OK;
    for (int attempt = 0;; attempt++) {
        bool transient = false;
        st = mxl_http_perform(h, &(mxl_http_request){.method = "GET", .url = url, .token = d->token, .follow = true},
                              &r, &transient, err);
        if (st == MXL_OK && r.status >= 500 && attempt + 1 < HUB_RETRIES) {
            mxl_http_response_free(&r);
            sleep(1u << attempt);
            continue;
        }
        if (st && transient && attempt + 1 < HUB_RETRIES) {
            sleep(1u << attempt);
            continue;
        }
        break;
    }
    if (st) return st;
    char what[600];
    snprintf(what, sizeof what, "repository %s", d->repo_id);
    if (r.status < 200 || r.status >= 300) {
        st = http_error(&r, d->endpoint, d->repo_id, d->revision, what, d->token != NULL, err);
        mxl_http_response_free(&r);
        return st;
    }
    char **paths = NULL;
    size_t n = 0;
    st = mxl_hub_parse_listing(r.body ? r.body : "", r.body_len, d->o->include, d->o->n_include, d->o->exclude,
                               d->o->n_exclude, d->commit, &paths, &n, err);
    mxl_http_response_free(&r);
    if (st) {
        mxl_error_prefix(err, "%s: ", d->endpoint);
        return st;
    }
    d->jobs = mxl_calloc(n ? n : 1, sizeof *d->jobs);
    if (!d->jobs) {
        for (size_t i = 0; i < n; i++) mxl_free(paths[i]);
        mxl_free(paths);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        d->jobs[i].path = paths[i];
        d->jobs[i].size = -1;
    }
    d->n = n;
    mxl_free(paths);
    if (d->n == 0)
        return mxl_error_set(err, MXL_ERR_NOT_FOUND, "no file of %s@%s matches the --include / --exclude patterns",
                             d->repo_id, d->revision);
    return MXL_OK;
}

mxl_status mxl_hub_parse_listing(const char *body, size_t len, const char *const *include, size_t n_include,
                                 const char *const *exclude, size_t n_exclude, char commit[MXL_HUB_COMMIT_MAX],
                                 char ***paths_out, size_t *n_out, mxl_error *err) {
    *paths_out = NULL;
    *n_out = 0;
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    if (!root) return mxl_error_set(err, MXL_ERR_FORMAT, "the repository listing is not JSON: %s", je.text);
    const char *sha = json_string_value(json_object_get(root, "sha"));
    json_t *sib = json_object_get(root, "siblings");
    if (!sha || !mxl_hub_commit_valid(sha) || !json_is_array(sib)) {
        json_decref(root);
        return mxl_error_set(err, MXL_ERR_FORMAT, "the repository listing has no commit sha or no file list");
    }
    snprintf(commit, MXL_HUB_COMMIT_MAX, "%s", sha);
    size_t n = json_array_size(sib), k = 0;
    char **paths = mxl_calloc(n ? n : 1, sizeof *paths);
    mxl_status st = paths ? MXL_OK : mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == MXL_OK && i < n; i++) {
        const char *f = json_string_value(json_object_get(json_array_get(sib, i), "rfilename"));
        if (!f || !mxl_hub_path_valid(f)) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "the listing names an unsafe file '%.200s'", f ? f : "(none)");
            break;
        }
        bool dup = false; /* a listing naming one file twice would race two workers on one blob */
        for (size_t j = 0; j < k && !dup; j++) dup = strcmp(paths[j], f) == 0;
        if (dup || !wanted(include, n_include, exclude, n_exclude, f)) continue;
        if (!(paths[k] = xstrdup(f))) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        else k++;
    }
    json_decref(root);
    if (st) {
        for (size_t i = 0; i < k; i++) mxl_free(paths[i]);
        mxl_free(paths);
        return st;
    }
    *paths_out = paths;
    *n_out = k;
    return MXL_OK;
}

/* Paths of one job. */
static mxl_status blob_path(const dl *d, const file_job *j, char *out, size_t cap, mxl_error *err) {
    int n = snprintf(out, cap, "%s/blobs/%s", d->repo_dir, j->etag);
    return n > 0 && (size_t)n < cap ? MXL_OK : mxl_error_set(err, MXL_ERR_ARG, "path too long");
}
static mxl_status pointer_path(const dl *d, const file_job *j, char *out, size_t cap, mxl_error *err) {
    int n = snprintf(out, cap, "%s/snapshots/%s/%s", d->repo_dir, d->commit, j->path);
    return n > 0 && (size_t)n < cap ? MXL_OK : mxl_error_set(err, MXL_ERR_ARG, "path too long");
}
static mxl_status local_paths(const dl *d, const file_job *j, char *target, char *meta, char *lock, char *incomplete,
                              size_t cap, mxl_error *err) {
    const char *ld = d->o->local_dir;
    int a = snprintf(target, cap, "%s/%s", ld, j->path);
    int b = snprintf(meta, cap, "%s/.cache/huggingface/download/%s.metadata", ld, j->path);
    int c = snprintf(lock, cap, "%s/.cache/huggingface/download/%s.lock", ld, j->path);
    int e = snprintf(incomplete, cap, "%s/.cache/huggingface/download/%s.%s.incomplete", ld, j->path, j->etag);
    if (a < 0 || b < 0 || c < 0 || e < 0 || (size_t)a >= cap || (size_t)b >= cap || (size_t)c >= cap || (size_t)e >= cap)
        return mxl_error_set(err, MXL_ERR_ARG, "path too long below %s", ld);
    return MXL_OK;
}

static bool exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* The etag recorded by a --local-dir download (huggingface_hub's metadata file format). */
static bool local_meta_matches(const char *meta, const char *target, const char *etag) {
    FILE *f = fopen(meta, "rb");
    if (!f) return false;
    char commit[128] = "", tag[256] = "";
    bool ok = fgets(commit, sizeof commit, f) && fgets(tag, sizeof tag, f);
    fclose(f);
    if (!ok) return false;
    tag[strcspn(tag, "\r\n")] = '\0';
    return strcmp(tag, etag) == 0 && exists(target);
}

/* 2. HEAD: etag, size and location of one file; decides whether it is present already */
static mxl_status head_file(dl *d, mxl_http *h, file_job *j, mxl_error *err) {
    char url[HUB_URL_MAX];
    snprintf(url, sizeof url, "%s/%s/resolve/%s/", d->endpoint, d->repo_id, d->commit);
    if (!mxl_http_escape(j->path, true, url, sizeof url)) return mxl_error_set(err, MXL_ERR_ARG, "file name too long");
    char what[1400];
    snprintf(what, sizeof what, "file %s of %s@%s", j->path, d->repo_id, d->revision);
    mxl_http_response r;
    mxl_status st;
    for (int hop = 0, attempt = 0;;) {
        bool transient = false;
        st = mxl_http_perform(h, &(mxl_http_request){.method = "HEAD", .url = url, .token = d->token}, &r, &transient, err);
        if ((st && transient) || (st == MXL_OK && r.status >= 500)) {
            if (++attempt < HUB_RETRIES) {
                if (st == MXL_OK) mxl_http_response_free(&r);
                sleep(1u << (attempt - 1));
                continue;
            }
        }
        if (st) return st;
        /* a relative redirect (a renamed repo) is followed; an absolute one is the file's location */
        if (r.status >= 300 && r.status < 400 && r.headers.location[0] == '/' && ++hop <= 5) {
            snprintf(url, sizeof url, "%s%s", d->origin, r.headers.location);
            mxl_http_response_free(&r);
            continue;
        }
        break;
    }
    bool redirect = r.status >= 300 && r.status < 400;
    if (!(r.status >= 200 && r.status < 300) && !redirect) {
        st = http_error(&r, d->endpoint, d->repo_id, d->revision, what, d->token != NULL, err);
        mxl_http_response_free(&r);
        return st;
    }
    const mxl_http_headers *hd = &r.headers;
    const char *raw = hd->linked_etag[0] ? hd->linked_etag : hd->etag;
    if (!mxl_hub_etag_normalize(raw, j->etag, sizeof j->etag)) {
        mxl_http_response_free(&r);
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s gave no usable ETag for %s", d->endpoint, what);
    }
    j->size = hd->linked_size >= 0 ? hd->linked_size : (redirect ? -1 : hd->content_length);
    if (hd->repo_commit[0] && strcmp(hd->repo_commit, d->commit) != 0) {
        mxl_http_response_free(&r);
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s answered commit %.64s for %s, the listing said %s", d->endpoint,
                             hd->repo_commit, what, d->commit);
    }
    const char *loc = redirect && hd->location[0] ? hd->location : url;
    j->url = xstrdup(loc);
    mxl_http_response_free(&r);
    if (!j->url) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");

    char a[MXL_STORE_PATH_MAX], b[MXL_STORE_PATH_MAX], c[MXL_STORE_PATH_MAX], e[MXL_STORE_PATH_MAX];
    if (d->o->force) return MXL_OK;
    if (d->o->local_dir) {
        if ((st = local_paths(d, j, a, b, c, e, sizeof a, err))) return st;
        if (local_meta_matches(b, a, j->etag)) j->present = true;
        else if (blob_path(d, j, c, sizeof c, err) == MXL_OK && exists(c)) j->copy_from_cache = true;
        return MXL_OK;
    }
    if ((st = pointer_path(d, j, a, sizeof a, err)) || (st = blob_path(d, j, b, sizeof b, err))) return st;
    j->present = exists(a) || exists(b);
    return MXL_OK;
}

/* ---- 3. one transfer ------------------------------------------------------------------------- */

typedef struct sink_state {
    dl *d;
    file_job *j;
    int slot;
    int fd;
    int64_t off;          /* bytes in the file */
    EVP_MD_CTX *sha256;   /* streaming digest when the etag is a sha256 */
    int write_errno;
    bool bad_range;
    bool restarted;
} sink_state;

static bool is_hex(const char *s, size_t n) {
    if (strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F'))) return false;
    return true;
}

static bool sink_write(void *ud, const void *data, size_t n) {
    sink_state *s = ud;
    const char *p = data;
    size_t left = n;
    while (left) {
        ssize_t w = pwrite(s->fd, p, left, (off_t)s->off);
        if (w < 0) {
            if (errno == EINTR) continue;
            s->write_errno = errno;
            return false;
        }
        p += w;
        left -= (size_t)w;
        s->off += w;
    }
    if (s->sha256) EVP_DigestUpdate(s->sha256, data, n);
    dl *d = s->d;
    pthread_mutex_lock(&d->mu);
    d->bytes_done += (int64_t)n;
    d->bytes_transferred += (int64_t)n;
    emit(d, MXL_HUB_EV_FILE_BYTES, s->slot, s->j, s->off);
    pthread_mutex_unlock(&d->mu);
    return !d->cancel;
}

/* Hashes the first len bytes of fd into ctx (resume: the part already on disk). */
static bool hash_prefix(int fd, int64_t len, EVP_MD_CTX *ctx) {
    char *buf = mxl_malloc(1 << 20);
    if (!buf) return false;
    int64_t off = 0;
    bool ok = true;
    while (off < len) {
        size_t want = (size_t)(len - off < (1 << 20) ? len - off : (1 << 20));
        ssize_t r = pread(fd, buf, want, (off_t)off);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            ok = false;
            break;
        }
        EVP_DigestUpdate(ctx, buf, (size_t)r);
        off += r;
    }
    mxl_free(buf);
    return ok;
}

static void hex_of(const unsigned char *md, unsigned n, char *out) {
    static const char hx[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = hx[md[i] >> 4];
        out[2 * i + 1] = hx[md[i] & 15];
    }
    out[2 * n] = '\0';
}

/* The file's digest in the etag's terms: sha256 (LFS) or the git blob sha1 ("blob <n>\0" + bytes).
 * got is "" when the etag is neither (then only the size is checked). */
static bool file_digest(int fd, int64_t size, const char *etag, EVP_MD_CTX *streamed, char *got) {
    got[0] = '\0';
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdn = 0;
    if (is_hex(etag, 64)) {
        EVP_MD_CTX *ctx = streamed;
        if (!ctx) return false;
        if (!EVP_DigestFinal_ex(ctx, md, &mdn)) return false;
        hex_of(md, mdn, got);
        return true;
    }
    if (!is_hex(etag, 40)) return true;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx) return false;
    char hdr[48];
    int hn = snprintf(hdr, sizeof hdr, "blob %lld", (long long)size);
    bool ok = EVP_DigestInit_ex(ctx, EVP_sha1(), NULL) && EVP_DigestUpdate(ctx, hdr, (size_t)hn + 1) &&
              hash_prefix(fd, size, ctx) && EVP_DigestFinal_ex(ctx, md, &mdn);
    EVP_MD_CTX_free(ctx);
    if (ok) hex_of(md, mdn, got);
    return ok;
}

/* Copies src (a hub-cache blob) into the open fd from offset 0. */
static bool copy_into(const char *src, int fd, int64_t *copied, int *err_no) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        *err_no = errno;
        return false;
    }
    if (ftruncate(fd, 0) != 0) {
        *err_no = errno;
        close(in);
        return false;
    }
    char *buf = mxl_malloc(1 << 20);
    bool ok = buf != NULL;
    int64_t off = 0;
    while (ok) {
        ssize_t r = read(in, buf, 1 << 20);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r < 0) {
                *err_no = errno;
                ok = false;
            }
            break;
        }
        for (ssize_t done = 0; done < r;) {
            ssize_t w = pwrite(fd, buf + done, (size_t)(r - done), (off_t)(off + done));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) {
                *err_no = errno;
                ok = false;
                break;
            }
            done += w;
        }
        off += r;
    }
    mxl_free(buf);
    close(in);
    *copied = off;
    return ok;
}

/* Transfers job j into `incomplete` (resuming what is there), verifies it and renames it to
 * `final`. Called with the job's lock held. */
static mxl_status transfer(dl *d, mxl_http *h, file_job *j, int slot, const char *incomplete, const char *final,
                           const char *copy_src, mxl_error *err) {
    mxl_status st = MXL_OK;
    char what[1400];
    snprintf(what, sizeof what, "file %s of %s@%s", j->path, d->repo_id, d->revision);
    bool sha = is_hex(j->etag, 64);
    for (int restarts = 0, attempts = 0;;) {
        int fd = open(incomplete, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return mxl_error_set(err, MXL_ERR_IO, "cannot write %s: %s", incomplete, strerror(errno));
        struct stat sb;
        fstat(fd, &sb);
        int64_t have = sb.st_size;
        if (copy_src || (j->size >= 0 && have > j->size)) {
            if (ftruncate(fd, 0) != 0) {
                close(fd);
                return mxl_error_set(err, MXL_ERR_IO, "cannot truncate %s: %s", incomplete, strerror(errno));
            }
            have = 0;
        }
        sink_state s = {.d = d, .j = j, .slot = slot, .fd = fd, .off = have};
        if (sha) {
            s.sha256 = EVP_MD_CTX_new();
            if (!s.sha256 || !EVP_DigestInit_ex(s.sha256, EVP_sha256(), NULL) || !hash_prefix(fd, have, s.sha256)) {
                EVP_MD_CTX_free(s.sha256);
                close(fd);
                return mxl_error_set(err, MXL_ERR_IO, "cannot read back %s", incomplete);
            }
        }
        pthread_mutex_lock(&d->mu);
        d->bytes_done += have;
        emit(d, MXL_HUB_EV_FILE_START, slot, j, have);
        pthread_mutex_unlock(&d->mu);

        bool transient = false;
        long status = 200;
        if (copy_src) {
            int64_t copied = 0;
            int e = 0;
            if (!copy_into(copy_src, fd, &copied, &e)) {
                st = mxl_error_set(err, MXL_ERR_IO, "copying %s into %s failed: %s", copy_src, incomplete, strerror(e));
                s.write_errno = e;
            } else {
                s.off = copied;
                if (sha) hash_prefix(fd, copied, s.sha256);
                pthread_mutex_lock(&d->mu);
                d->bytes_done += copied;
                pthread_mutex_unlock(&d->mu);
            }
        } else if (!(j->size >= 0 && have == j->size)) {
            mxl_http_response r;
            st = mxl_http_perform(h,
                                  &(mxl_http_request){.method = "GET",
                                                      .url = j->url,
                                                      .token = d->token,
                                                      .follow = true,
                                                      .range_from = have,
                                                      .sink = sink_write,
                                                      .sink_ud = &s,
                                                      .cancel = &d->cancel},
                                  &r, &transient, err);
            if (st == MXL_OK) {
                status = r.status;
                if (status == 200 && have > 0) {
                    /* the server ignored the range: what arrived was written from `have` on and is
                     * not the file; start over */
                    s.bad_range = true;
                } else if (status == 206) {
                    long long start = -1;
                    if (sscanf(r.headers.content_range, "bytes %lld-", &start) != 1 || start != have) s.bad_range = true;
                } else if (status == 416) {
                    s.bad_range = true;
                } else if (status < 200 || status >= 300) {
                    st = http_error(&r, d->endpoint, d->repo_id, d->revision, what, d->token != NULL, err);
                    transient = status >= 500;
                }
                mxl_http_response_free(&r);
            } else if (s.write_errno) {
                st = mxl_error_set(err, MXL_ERR_IO, "writing %s failed: %s", incomplete, strerror(s.write_errno));
            }
        }
        pthread_mutex_lock(&d->mu);
        d->bytes_done -= s.off; /* recounted from the file on the next attempt, or at the end */
        pthread_mutex_unlock(&d->mu);

        if (s.bad_range && restarts++ < 2) {
            EVP_MD_CTX_free(s.sha256);
            if (ftruncate(fd, 0) != 0) {
            }
            close(fd);
            continue;
        }
        if (st) {
            EVP_MD_CTX_free(s.sha256);
            close(fd);
            if (s.write_errno == ENOSPC || s.write_errno == EDQUOT) {
                __atomic_store_n(&d->disk_full, 1, __ATOMIC_SEQ_CST);
                unlink(incomplete); /* a full disk: give the space back; nothing to resume into */
                return mxl_error_set(err, MXL_ERR_IO, "no space left on the device writing %s (%s needs %lld bytes)",
                                     incomplete, j->path, (long long)j->size);
            }
            if (d->cancel && __atomic_load_n(&d->disk_full, __ATOMIC_SEQ_CST)) {
                unlink(incomplete); /* another file filled the disk: its partial goes too */
                return st;
            }
            if (transient && !d->cancel && ++attempts < HUB_RETRIES) {
                sleep(1u << (attempts - 1));
                continue; /* resumes from what reached the disk */
            }
            return st;
        }
        /* verify */
        int64_t got_size = s.off;
        if (j->size >= 0 && got_size != j->size) {
            EVP_MD_CTX_free(s.sha256);
            close(fd);
            if (restarts++ < 2) {
                unlink(incomplete);
                continue;
            }
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: %lld bytes arrived, the Hub said %lld", what,
                                 (long long)got_size, (long long)j->size);
        }
        char got[EVP_MAX_MD_SIZE * 2 + 1];
        bool ok = file_digest(fd, got_size, j->etag, s.sha256, got);
        EVP_MD_CTX_free(s.sha256);
        close(fd);
        if (!ok) return mxl_error_set(err, MXL_ERR_IO, "cannot hash %s", incomplete);
        if (got[0] && strcasecmp(got, j->etag) != 0) {
            unlink(incomplete);
            if (restarts++ < 1 && !copy_src) continue; /* fetched once more from scratch */
            return mxl_error_set(err, MXL_ERR_FORMAT, "%s: its content does not match its digest (expected %s, got %s); refused",
                                 what, j->etag, got);
        }
        if (rename(incomplete, final) != 0)
            return mxl_error_set(err, MXL_ERR_IO, "cannot move %s into place: %s", final, strerror(errno));
        pthread_mutex_lock(&d->mu);
        d->bytes_done += got_size;
        d->files_done++;
        d->n_transferred++;
        emit(d, MXL_HUB_EV_FILE_DONE, slot, j, got_size);
        pthread_mutex_unlock(&d->mu);
        return MXL_OK;
    }
}

static mxl_status write_local_meta(const char *meta, const char *commit, const char *etag, mxl_error *err) {
    char tmp[MXL_STORE_PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", meta, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return mxl_error_set(err, MXL_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(f, "%s\n%s\n%.6f\n", commit, etag, (double)ts.tv_sec + ts.tv_nsec / 1e9);
    if (fclose(f) != 0 || rename(tmp, meta) != 0) {
        unlink(tmp);
        return mxl_error_set(err, MXL_ERR_IO, "cannot write %s: %s", meta, strerror(errno));
    }
    return MXL_OK;
}

static mxl_status fetch_job(dl *d, mxl_http *h, file_job *j, int slot, mxl_error *err) {
    mxl_status st;
    if (d->o->local_dir) {
        char target[MXL_STORE_PATH_MAX], meta[MXL_STORE_PATH_MAX], lock[MXL_STORE_PATH_MAX], inc[MXL_STORE_PATH_MAX];
        char dir[MXL_STORE_PATH_MAX], src[MXL_STORE_PATH_MAX];
        if ((st = local_paths(d, j, target, meta, lock, inc, sizeof target, err))) return st;
        memcpy(dir, meta, sizeof dir);
        *strrchr(dir, '/') = '\0';
        if ((st = mxl_hub_mkdirs(dir, err))) return st;
        memcpy(dir, target, sizeof dir);
        *strrchr(dir, '/') = '\0';
        if ((st = mxl_hub_mkdirs(dir, err))) return st;
        int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return mxl_error_set(err, MXL_ERR_IO, "cannot open the lock %s: %s", lock, strerror(errno));
        while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
        }
        if (!d->o->force && local_meta_matches(meta, target, j->etag)) {
            st = MXL_OK; /* another process finished it */
        } else {
            if (j->copy_from_cache) st = blob_path(d, j, src, sizeof src, err);
            if (st == MXL_OK)
                st = transfer(d, h, j, slot, inc, target, j->copy_from_cache ? src : NULL, err);
            if (st == MXL_OK) st = write_local_meta(meta, d->commit, j->etag, err);
        }
        flock(fd, LOCK_UN);
        close(fd);
        return st;
    }
    char blob[MXL_STORE_PATH_MAX], inc[MXL_STORE_PATH_MAX + 16], dir[MXL_STORE_PATH_MAX];
    if ((st = blob_path(d, j, blob, sizeof blob, err))) return st;
    if (snprintf(dir, sizeof dir, "%s/blobs", d->repo_dir) >= (int)sizeof dir)
        return mxl_error_set(err, MXL_ERR_ARG, "path too long: %s", d->repo_dir);
    if ((st = mxl_hub_mkdirs(dir, err))) return st;
    snprintf(inc, sizeof inc, "%s.incomplete", blob);
    int fd = mxl_hub_lock(d->hub_dir, d->repo_id, j->etag, err);
    if (fd < 0) return err ? err->status : MXL_ERR_IO;
    if (!d->o->force && exists(blob)) {
        st = MXL_OK; /* another process (mlxcel or huggingface_hub) wrote it meanwhile */
        pthread_mutex_lock(&d->mu);
        d->files_done++;
        if (j->size > 0) d->bytes_done += j->size;
        emit(d, MXL_HUB_EV_FILE_SKIP, slot, j, j->size);
        pthread_mutex_unlock(&d->mu);
    } else {
        st = transfer(d, h, j, slot, inc, blob, NULL, err);
    }
    mxl_hub_unlock(fd);
    return st;
}

/* ---- workers ------------------------------------------------------------------------------- */

typedef struct worker_arg {
    dl *d;
    int slot;
    int phase; /* 0: HEAD, 1: transfer */
} worker_arg;

static void *worker(void *p) {
    worker_arg *a = p;
    dl *d = a->d;
    mxl_error e = {0};
    mxl_http *h = d->http[a->slot] ? d->http[a->slot] : (d->http[a->slot] = mxl_http_new(&e));
    if (!h) {
        fail(d, &e);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&d->mu);
        size_t i = d->next++;
        bool stop = d->cancel || i >= d->n;
        pthread_mutex_unlock(&d->mu);
        if (stop) break;
        file_job *j = &d->jobs[i];
        mxl_status st;
        if (a->phase == 0) {
            st = head_file(d, h, j, &e);
        } else {
            if (j->present) continue;
            st = fetch_job(d, h, j, a->slot, &e);
        }
        if (st) {
            fail(d, &e);
            break;
        }
    }
    return NULL;
}

static mxl_status run_phase(dl *d, int phase, mxl_error *err) {
    d->next = 0;
    int nw = d->workers < (int)d->n ? d->workers : (int)d->n;
    if (nw < 1) nw = 1;
    pthread_t th[HUB_MAX_WORKERS];
    worker_arg args[HUB_MAX_WORKERS];
    int started = 0;
    for (int i = 0; i < nw; i++) {
        args[i] = (worker_arg){.d = d, .slot = i, .phase = phase};
        if (pthread_create(&th[i], NULL, worker, &args[i]) != 0) break;
        started++;
    }
    if (started == 0) worker(&args[0]);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    if (d->failed) {
        if (err) *err = d->err;
        return d->err.status ? d->err.status : MXL_ERR_IO;
    }
    return MXL_OK;
}

/* Free space under dir (walking up to an existing ancestor). */
static int64_t free_bytes(const char *dir) {
    char p[MXL_STORE_PATH_MAX];
    snprintf(p, sizeof p, "%s", dir);
    struct statvfs vs;
    while (statvfs(p, &vs) != 0) {
        char *s = strrchr(p, '/');
        if (!s || s == p) return -1;
        *s = '\0';
    }
    return (int64_t)vs.f_bavail * (int64_t)vs.f_frsize;
}

/* 4. links and refs, all at the end */
static mxl_status publish_snapshot(dl *d, bool *created, mxl_error *err) {
    char snap[MXL_STORE_PATH_MAX];
    if (snprintf(snap, sizeof snap, "%s/snapshots/%s", d->repo_dir, d->commit) >= (int)sizeof snap)
        return mxl_error_set(err, MXL_ERR_ARG, "path too long: %s", d->repo_dir);
    struct stat sb;
    *created = !(stat(snap, &sb) == 0 && S_ISDIR(sb.st_mode));
    mxl_status st;
    for (size_t i = 0; i < d->n; i++) {
        char ptr[MXL_STORE_PATH_MAX];
        if ((st = pointer_path(d, &d->jobs[i], ptr, sizeof ptr, err))) return st;
        struct stat lb;
        if (!d->o->force && lstat(ptr, &lb) == 0 && exists(ptr)) continue;
        if ((st = mxl_hub_link_pointer(d->repo_dir, d->commit, d->jobs[i].path, d->jobs[i].etag, err))) return st;
    }
    return mxl_hub_write_ref(d->repo_dir, d->revision, d->commit, err);
}

mxl_status mxl_hub_download(const char *repo_id, const mxl_hub_opts *o, mxl_hub_result *res, mxl_error *err) {
    memset(res, 0, sizeof *res);
    if (!mxl_store_repo_id_valid(repo_id))
        return mxl_error_set(err, MXL_ERR_ARG, "'%.200s' is not a repository id (owner/name)", repo_id);
    dl *d = mxl_calloc(1, sizeof *d);
    if (!d) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&d->mu, NULL);
    d->o = o;
    d->repo_id = repo_id;
    d->revision = o->revision && o->revision[0] ? o->revision : "main";
    d->token = o->token && o->token[0] ? o->token : NULL;
    d->workers = o->workers > 0 ? (o->workers < HUB_MAX_WORKERS ? o->workers : HUB_MAX_WORKERS) : HUB_DEFAULT_WORKERS;
    mxl_hub_endpoint(o->endpoint, d->endpoint, sizeof d->endpoint);
    mxl_status st = MXL_OK;
    {
        const char *p = strstr(d->endpoint, "://");
        if (!p || (strncmp(d->endpoint, "http://", 7) != 0 && strncmp(d->endpoint, "https://", 8) != 0)) {
            st = mxl_error_set(err, MXL_ERR_ARG, "HF_ENDPOINT '%.200s' is not an http(s) URL", d->endpoint);
            goto out;
        }
        size_t n = (size_t)(p + 3 - d->endpoint) + strcspn(p + 3, "/");
        snprintf(d->origin, sizeof d->origin, "%.*s", (int)n, d->endpoint);
    }
    if (o->hub_dir) snprintf(d->hub_dir, sizeof d->hub_dir, "%s", o->hub_dir);
    else if ((st = mxl_store_hf_cache_dir(d->hub_dir, sizeof d->hub_dir, err))) goto out;
    if ((st = mxl_hub_repo_dir(d->hub_dir, repo_id, d->repo_dir, sizeof d->repo_dir, err))) goto out;

    if (!(d->http[0] = mxl_http_new(err))) {
        st = err ? err->status : MXL_ERR_IO;
        goto out;
    }
    if ((st = list_repo(d, d->http[0], err))) goto out;
    if ((st = run_phase(d, 0, err))) goto out;

    /* the plan: what is to transfer, and whether it fits */
    int64_t need = 0;
    d->files_total = (int)d->n;
    for (size_t i = 0; i < d->n; i++) {
        if (d->jobs[i].present) {
            d->files_done++;
            continue;
        }
        if (d->jobs[i].size > 0) d->bytes_total += d->jobs[i].size;
    }
    need = d->bytes_total;
    {
        /* bytes already in .incomplete files count as there */
        for (size_t i = 0; i < d->n && !o->local_dir; i++) {
            char b[MXL_STORE_PATH_MAX + 16];
            struct stat sb;
            if (d->jobs[i].present || blob_path(d, &d->jobs[i], b, MXL_STORE_PATH_MAX, NULL)) continue;
            strcat(b, ".incomplete");
            if (stat(b, &sb) == 0 && sb.st_size <= need) need -= sb.st_size;
        }
        const char *where = o->local_dir ? o->local_dir : d->hub_dir;
        int64_t avail = free_bytes(where);
        if (avail >= 0 && need > avail) {
            char a[32], b[32];
            mxl_store_format_size((uint64_t)need, a, sizeof a);
            mxl_store_format_size((uint64_t)avail, b, sizeof b);
            st = mxl_error_set(err, MXL_ERR_IO, "not enough disk space in %s: %s needs %s, %s free", where, repo_id, a, b);
            goto out;
        }
    }
    pthread_mutex_lock(&d->mu);
    emit(d, MXL_HUB_EV_PLAN, 0, NULL, 0);
    for (size_t i = 0; i < d->n; i++)
        if (d->jobs[i].present) emit(d, MXL_HUB_EV_FILE_SKIP, 0, &d->jobs[i], d->jobs[i].size);
    pthread_mutex_unlock(&d->mu);
    if ((st = run_phase(d, 1, err))) goto out;

    bool created = false;
    if (!o->local_dir && (st = publish_snapshot(d, &created, err))) goto out;

    snprintf(res->commit, sizeof res->commit, "%s", d->commit);
    snprintf(res->hub_dir, sizeof res->hub_dir, "%s", d->hub_dir);
    if (o->local_dir) snprintf(res->snapshot_dir, sizeof res->snapshot_dir, "%s", o->local_dir);
    else if (snprintf(res->snapshot_dir, sizeof res->snapshot_dir, "%s/snapshots/%s", d->repo_dir, d->commit) >=
             (int)sizeof res->snapshot_dir) {
        st = mxl_error_set(err, MXL_ERR_ARG, "path too long: %s", d->repo_dir);
        goto out;
    }
    res->snapshot_created = created;
    res->n_transferred = d->n_transferred;
    res->n_present = (int)d->n - d->n_transferred;
    res->bytes_transferred = d->bytes_transferred;
    for (size_t i = 0; i < d->n; i++)
        if (d->jobs[i].size > 0) res->bytes_total += d->jobs[i].size;
    res->files = mxl_calloc(d->n ? d->n : 1, sizeof *res->files);
    if (!res->files) {
        st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < d->n; i++) {
        res->files[i] = d->jobs[i].path;
        d->jobs[i].path = NULL;
    }
    res->n_files = d->n;
out:
    for (int i = 0; i < HUB_MAX_WORKERS; i++) mxl_http_free(d->http[i]);
    for (size_t i = 0; i < d->n; i++) {
        mxl_free(d->jobs[i].path);
        mxl_free(d->jobs[i].url);
    }
    mxl_free(d->jobs);
    pthread_mutex_destroy(&d->mu);
    mxl_free(d);
    if (st) mxl_hub_result_free(res);
    return st;
}

void mxl_hub_result_free(mxl_hub_result *res) {
    if (!res) return;
    for (size_t i = 0; i < res->n_files; i++) mxl_free(res->files[i]);
    mxl_free(res->files);
    res->files = NULL;
    res->n_files = 0;
}

/* ---- the store ------------------------------------------------------------------------------ */

/* Relative paths of every file (or link) below dir, into a growing array. */
static mxl_status walk_files(const char *base, const char *rel, int depth, char ***v, size_t *n, size_t *cap,
                             mxl_error *err) {
    if (depth > 32) return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: nested too deeply", base);
    char dir[MXL_STORE_PATH_MAX];
    snprintf(dir, sizeof dir, "%s%s%s", base, rel[0] ? "/" : "", rel);
    DIR *dd = opendir(dir);
    if (!dd) return mxl_error_set(err, MXL_ERR_IO, "cannot read %s: %s", dir, strerror(errno));
    mxl_status st = MXL_OK;
    struct dirent *de;
    while (st == MXL_OK && (de = readdir(dd))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char r[MXL_STORE_PATH_MAX], full[MXL_STORE_PATH_MAX];
        if (snprintf(r, sizeof r, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name) >= (int)sizeof r ||
            snprintf(full, sizeof full, "%s/%s", base, r) >= (int)sizeof full)
            continue;
        struct stat sb;
        if (lstat(full, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            st = walk_files(base, r, depth + 1, v, n, cap, err);
            continue;
        }
        if (strstr(de->d_name, ".tmplink")) continue; /* another writer's link in flight */
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 32;
            char **nv = mxl_realloc(*v, nc * sizeof *nv);
            if (!nv) {
                st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
                break;
            }
            *v = nv;
            *cap = nc;
        }
        if (!((*v)[*n] = xstrdup(r))) st = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        else (*n)++;
    }
    closedir(dd);
    return st;
}

mxl_status mxl_hub_fetch_to_store(const char *repo_id, const char *models_dir_flag, const mxl_hub_opts *opts,
                                  mxl_hub_result *res, char *store_path_out, size_t cap, mxl_error *err) {
    char root[MXL_STORE_PATH_MAX], dest[MXL_STORE_PATH_MAX];
    mxl_status st;
    if ((st = mxl_store_root(models_dir_flag, root, sizeof root, err)) ||
        (st = mxl_store_repo_path(root, repo_id, dest, sizeof dest, err)))
        return st;
    const char *rev = opts->revision && opts->revision[0] ? opts->revision : "main";
    bool main_rev = strcmp(rev, "main") == 0;
    mxl_hub_marker prev;
    mxl_error e2;
    bool have_prev = mxl_hub_marker_read(dest, &prev, &e2) == MXL_OK;
    struct stat sb;
    if (main_rev && !have_prev && !opts->force && lstat(dest, &sb) == 0)
        return mxl_error_set(err, MXL_ERR_ARG,
                             "the store already holds a copy of %s at %s that mlxcel download did not make; "
                             "pass --force to replace it with a download",
                             repo_id, dest);
    if ((st = mxl_hub_download(repo_id, opts, res, err))) return st;
    if (!main_rev) {
        if (store_path_out) snprintf(store_path_out, cap, "%s", res->snapshot_dir);
        return MXL_OK;
    }
    mxl_hub_marker m = {0};
    snprintf(m.repo_id, sizeof m.repo_id, "%s", repo_id);
    snprintf(m.revision, sizeof m.revision, "%s", rev);
    snprintf(m.commit, sizeof m.commit, "%s", res->commit);
    snprintf(m.hub_dir, sizeof m.hub_dir, "%s", res->hub_dir);
    m.snapshot_created = res->snapshot_created ||
                         (have_prev && prev.snapshot_created && strcmp(prev.commit, res->commit) == 0 &&
                          strcmp(prev.hub_dir, res->hub_dir) == 0);
    /* the store entry mirrors the whole snapshot (earlier --include downloads too) */
    char **files = NULL;
    size_t n = 0, fcap = 0;
    st = walk_files(res->snapshot_dir, "", 0, &files, &n, &fcap, err);
    if (st == MXL_OK)
        st = mxl_hub_store_publish(root, &m, (const char *const *)files, n, opts->force, err);
    for (size_t i = 0; i < n; i++) mxl_free(files[i]);
    mxl_free(files);
    if (st) return st;
    /* an update moved main: the old snapshot this store made is no longer anyone's */
    if (have_prev && prev.snapshot_created && strcmp(prev.commit, res->commit) != 0)
        mxl_hub_drop_snapshot(prev.hub_dir, repo_id, prev.commit, NULL);
    if (store_path_out) snprintf(store_path_out, cap, "%s", dest);
    return MXL_OK;
}

mxl_status mxl_hub_resolve(const char *arg, const char *models_dir_flag, const char *revision,
                           const mxl_hub_resolve_opts *ro, mxl_resolved *out, mxl_error *err) {
    mxl_error e1;
    mxl_status st = mxl_store_resolve(arg, models_dir_flag, revision, out, &e1);
    if (st == MXL_OK && out->source == MXL_MODEL_SOURCE_STORE) {
        char dir[MXL_STORE_PATH_MAX], root[MXL_STORE_PATH_MAX];
        if (mxl_store_root(models_dir_flag, root, sizeof root, NULL) == MXL_OK &&
            mxl_store_repo_path(root, out->repo_id, dir, sizeof dir, NULL) == MXL_OK && !mxl_hub_store_entry_intact(dir)) {
            st = MXL_ERR_NOT_FOUND;
            mxl_error_set(&e1, st, "the store entry %s points at a Hugging Face cache copy that is gone; download %s again",
                          dir, out->repo_id);
        }
    }
    if (st != MXL_ERR_NOT_FOUND || !out->repo_id[0] || !ro) {
        if (st && err) *err = e1;
        return st;
    }
    char repo[MXL_STORE_REPO_ID_MAX];
    snprintf(repo, sizeof repo, "%s", out->repo_id);
    if (ro->offline)
        return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s; offline mode (--offline / HF_HUB_OFFLINE=1) does not download it",
                             e1.msg);
    /* "owner/name/file" downloads that file only */
    const char *s1 = strchr(arg, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    const char *only = s2 ? s2 + 1 : NULL;
    mxl_hub_opts o = {.token = ro->token,
                      .revision = revision,
                      .include = only ? &only : NULL,
                      .n_include = only ? 1 : 0,
                      .progress = ro->progress,
                      .progress_ud = ro->progress_ud};
    mxl_hub_result res;
    char where[MXL_STORE_PATH_MAX];
    if ((st = mxl_hub_fetch_to_store(repo, models_dir_flag, &o, &res, where, sizeof where, err))) {
        mxl_error_prefix(err, "downloading %s: ", repo);
        return st;
    }
    mxl_hub_result_free(&res);
    return mxl_store_resolve(arg, models_dir_flag, revision, out, err);
}
