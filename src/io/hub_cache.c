/* hub_cache.c - the hub cache layout and the store entry of a download (see hub_cache.h). */
#include "io/hub_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "io/json_write.h"

#define HUB_PATH_MAX_LEN 1024

/* ---- names ---------------------------------------------------------------------------------- */

bool mxl_hub_path_valid(const char *path) {
    size_t n = strlen(path);
    if (n == 0 || n > HUB_PATH_MAX_LEN || path[0] == '/') return false;
    const char *c = path;
    while (*c) {
        size_t len = strcspn(c, "/");
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) return false;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f || c[i] == '\\') return false;
        c += len;
        if (*c == '/') {
            c++;
            if (!*c) return false; /* trailing slash */
        }
    }
    return true;
}

bool mxl_hub_etag_normalize(const char *raw, char *out, size_t cap) {
    if (!raw) return false;
    const char *s = raw;
    if (s[0] == 'W' && s[1] == '/') s += 2;
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        s++;
        n -= 2;
    }
    if (n == 0 || n > 128 || n >= cap || s[0] == '.') return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                  ch == '-' || ch == '.';
        if (!ok) return false;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    return true;
}

bool mxl_hub_commit_valid(const char *s) {
    if (strlen(s) != 40) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

static mxl_status fmt(char *out, size_t cap, mxl_error *err, const char *f, ...) __attribute__((format(printf, 4, 5)));
static mxl_status fmt(char *out, size_t cap, mxl_error *err, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(out, cap, f, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap) return mxl_error_set(err, MXL_ERR_ARG, "path too long: %.200s...", out);
    return MXL_OK;
}

static void repo_folder(const char *repo_id, char *out, size_t cap) {
    const char *slash = strchr(repo_id, '/');
    snprintf(out, cap, "models--%.*s--%s", (int)(slash - repo_id), repo_id, slash + 1);
}

mxl_status mxl_hub_repo_dir(const char *hub_dir, const char *repo_id, char *out, size_t cap, mxl_error *err) {
    if (!mxl_store_repo_id_valid(repo_id)) return mxl_error_set(err, MXL_ERR_ARG, "'%.200s' is not a repo id", repo_id);
    char folder[MXL_STORE_REPO_ID_MAX + 16];
    repo_folder(repo_id, folder, sizeof folder);
    return fmt(out, cap, err, "%s/%s", hub_dir, folder);
}

mxl_status mxl_hub_mkdirs(const char *path, mxl_error *err) {
    char tmp[MXL_STORE_PATH_MAX];
    mxl_status st = fmt(tmp, sizeof tmp, err, "%s", path);
    if (st) return st;
    for (char *p = tmp + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                return mxl_error_set(err, MXL_ERR_IO, "cannot create directory %s: %s", tmp, strerror(errno));
            *p = saved;
            if (!saved) break;
        }
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return mxl_error_set(err, MXL_ERR_IO, "%s is not a directory", path);
    return MXL_OK;
}

/* ---- locks ---------------------------------------------------------------------------------- */

int mxl_hub_lock(const char *hub_dir, const char *repo_id, const char *etag, mxl_error *err) {
    char folder[MXL_STORE_REPO_ID_MAX + 16], dir[MXL_STORE_PATH_MAX], path[MXL_STORE_PATH_MAX];
    repo_folder(repo_id, folder, sizeof folder);
    if (fmt(dir, sizeof dir, err, "%s/.locks/%s", hub_dir, folder) || mxl_hub_mkdirs(dir, err) ||
        fmt(path, sizeof path, err, "%s/%s.lock", dir, etag))
        return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        mxl_error_set(err, MXL_ERR_IO, "cannot open the lock %s: %s", path, strerror(errno));
        return -1;
    }
    while (flock(fd, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        mxl_error_set(err, MXL_ERR_IO, "cannot lock %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

void mxl_hub_unlock(int fd) {
    if (fd < 0) return;
    flock(fd, LOCK_UN);
    close(fd);
}

/* ---- snapshots and refs --------------------------------------------------------------------- */

/* A name beside path no other thread or process uses: <path>.<pid>.<n>.<suffix>. */
static mxl_status unique_sibling(const char *path, const char *suffix, char *out, size_t cap, mxl_error *err) {
    static unsigned counter;
    unsigned k = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    return fmt(out, cap, err, "%s.%d.%u.%s", path, (int)getpid(), k, suffix);
}

/* Writes a symlink at path atomically: a uniquely named link beside it, renamed over it. */
static mxl_status symlink_replace(const char *target, const char *path, mxl_error *err) {
    char tmp[MXL_STORE_PATH_MAX];
    mxl_status st = unique_sibling(path, "tmplink", tmp, sizeof tmp, err);
    if (st) return st;
    unlink(tmp);
    if (symlink(target, tmp) != 0) return mxl_error_set(err, MXL_ERR_IO, "cannot create link %s: %s", tmp, strerror(errno));
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return mxl_error_set(err, MXL_ERR_IO, "cannot place link %s: %s", path, strerror(e));
    }
    return MXL_OK;
}

mxl_status mxl_hub_link_pointer(const char *repo_dir, const char *commit, const char *path, const char *etag,
                                mxl_error *err) {
    if (!mxl_hub_path_valid(path)) return mxl_error_set(err, MXL_ERR_FORMAT, "unsafe repo file name '%.200s'", path);
    char link[MXL_STORE_PATH_MAX], dir[MXL_STORE_PATH_MAX], target[MXL_STORE_PATH_MAX] = "";
    mxl_status st = fmt(link, sizeof link, err, "%s/snapshots/%s/%s", repo_dir, commit, path);
    if (st) return st;
    memcpy(dir, link, strlen(link) + 1);
    *strrchr(dir, '/') = '\0';
    if ((st = mxl_hub_mkdirs(dir, err))) return st;
    /* from snapshots/<commit>/<a/b/> back to the repo folder: two levels plus one per '/' */
    size_t ups = 2;
    for (const char *p = path; *p; p++) ups += *p == '/';
    size_t o = 0;
    for (size_t i = 0; i < ups; i++) {
        if (o + 4 >= sizeof target) return mxl_error_set(err, MXL_ERR_ARG, "repo file name too deep: %.200s", path);
        memcpy(target + o, "../", 3);
        o += 3;
    }
    target[o] = '\0';
    if ((st = fmt(target + o, sizeof target - o, err, "blobs/%s", etag))) return st;
    return symlink_replace(target, link, err);
}

/* Writes text to path through a temporary file and rename. */
static mxl_status write_atomic(const char *path, const char *text, mxl_error *err) {
    char tmp[MXL_STORE_PATH_MAX];
    mxl_status st = unique_sibling(path, "tmp", tmp, sizeof tmp, err);
    if (st) return st;
    FILE *f = fopen(tmp, "wb");
    if (!f) return mxl_error_set(err, MXL_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    size_t n = strlen(text);
    bool ok = fwrite(text, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        int e = errno;
        unlink(tmp);
        return mxl_error_set(err, MXL_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return mxl_error_set(err, MXL_ERR_IO, "cannot place %s: %s", path, strerror(e));
    }
    return MXL_OK;
}

mxl_status mxl_hub_write_ref(const char *repo_dir, const char *revision, const char *commit, mxl_error *err) {
    if (strcmp(revision, commit) == 0) return MXL_OK;
    char path[MXL_STORE_PATH_MAX], dir[MXL_STORE_PATH_MAX];
    mxl_status st = fmt(path, sizeof path, err, "%s/refs/%s", repo_dir, revision);
    if (st) return st;
    memcpy(dir, path, strlen(path) + 1);
    *strrchr(dir, '/') = '\0';
    if ((st = mxl_hub_mkdirs(dir, err))) return st;
    /* unchanged refs are left alone, as huggingface_hub does (a read-only cache stays usable) */
    FILE *f = fopen(path, "rb");
    if (f) {
        char cur[64] = "";
        size_t n = fread(cur, 1, sizeof cur - 1, f);
        fclose(f);
        cur[n] = '\0';
        if (strcmp(cur, commit) == 0) return MXL_OK;
    }
    return write_atomic(path, commit, err);
}

/* ---- dropping a snapshot -------------------------------------------------------------------- */

/* Adds the blob names that the links under dir point at (the last path component) to *names. */
static void collect_blob_refs(const char *dir, int depth, char ***names, size_t *n, size_t *cap) {
    if (depth > 32) return;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2]))) continue;
        char p[MXL_STORE_PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p) continue;
        struct stat sb;
        if (lstat(p, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            collect_blob_refs(p, depth + 1, names, n, cap);
        } else if (S_ISLNK(sb.st_mode)) {
            char t[MXL_STORE_PATH_MAX];
            ssize_t k = readlink(p, t, sizeof t - 1);
            if (k <= 0) continue;
            t[k] = '\0';
            const char *base = strrchr(t, '/');
            base = base ? base + 1 : t;
            if (*n == *cap) {
                size_t nc = *cap ? *cap * 2 : 64;
                char **nv = mxl_realloc(*names, nc * sizeof *nv);
                if (!nv) continue;
                *names = nv;
                *cap = nc;
            }
            char *copy = mxl_malloc(strlen(base) + 1);
            if (!copy) continue;
            memcpy(copy, base, strlen(base) + 1);
            (*names)[(*n)++] = copy;
        }
    }
    closedir(d);
}

/* Removes the refs files under dir whose content is commit. */
static void drop_refs(const char *dir, const char *commit, int depth) {
    if (depth > 8) return;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[MXL_STORE_PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p) continue;
        struct stat sb;
        if (lstat(p, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            drop_refs(p, commit, depth + 1);
            rmdir(p); /* only when now empty */
        } else if (S_ISREG(sb.st_mode)) {
            FILE *f = fopen(p, "rb");
            if (!f) continue;
            char cur[64] = "";
            size_t k = fread(cur, 1, sizeof cur - 1, f);
            fclose(f);
            cur[k] = '\0';
            if (strcmp(cur, commit) == 0) unlink(p);
        }
    }
    closedir(d);
}

mxl_status mxl_hub_drop_snapshot(const char *hub_dir, const char *repo_id, const char *commit, mxl_error *err) {
    if (!mxl_hub_commit_valid(commit)) return mxl_error_set(err, MXL_ERR_FORMAT, "'%.64s' is not a commit id", commit);
    char repo_dir[MXL_STORE_PATH_MAX], snap[MXL_STORE_PATH_MAX], p[MXL_STORE_PATH_MAX];
    mxl_status st;
    if ((st = mxl_hub_repo_dir(hub_dir, repo_id, repo_dir, sizeof repo_dir, err))) return st;
    if ((st = fmt(snap, sizeof snap, err, "%s/snapshots/%s", repo_dir, commit))) return st;
    if ((st = mxl_store_rmtree(snap, err))) return st;
    if ((st = fmt(p, sizeof p, err, "%s/refs", repo_dir))) return st;
    drop_refs(p, commit, 0);

    /* blobs nothing links to any more */
    char **keep = NULL;
    size_t n_keep = 0, cap = 0;
    if ((st = fmt(p, sizeof p, err, "%s/snapshots", repo_dir))) return st;
    collect_blob_refs(p, 0, &keep, &n_keep, &cap);
    char blobs[MXL_STORE_PATH_MAX];
    if ((st = fmt(blobs, sizeof blobs, err, "%s/blobs", repo_dir))) goto done;
    DIR *d = opendir(blobs);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            bool used = false;
            for (size_t i = 0; i < n_keep && !used; i++) used = strcmp(keep[i], de->d_name) == 0;
            if (used) continue;
            if (snprintf(p, sizeof p, "%s/%s", blobs, de->d_name) < (int)sizeof p) unlink(p);
        }
        closedir(d);
    }
    if (n_keep == 0) { /* nothing left: the whole repo folder and its locks */
        bool empty = true;
        if ((st = fmt(p, sizeof p, err, "%s/snapshots", repo_dir))) goto done;
        DIR *sd = opendir(p);
        if (sd) {
            struct dirent *de;
            while ((de = readdir(sd)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) empty = false;
            closedir(sd);
        }
        if (empty) {
            if ((st = mxl_store_rmtree(repo_dir, err))) goto done;
            char folder[MXL_STORE_REPO_ID_MAX + 16];
            repo_folder(repo_id, folder, sizeof folder);
            if (fmt(p, sizeof p, err, "%s/.locks/%s", hub_dir, folder) == MXL_OK) mxl_store_rmtree(p, NULL);
        }
    }
done:
    for (size_t i = 0; i < n_keep; i++) mxl_free(keep[i]);
    mxl_free(keep);
    return st;
}

/* ---- the store entry ------------------------------------------------------------------------ */

static void copy_str(char *dst, size_t cap, const char *s) {
    snprintf(dst, cap, "%s", s ? s : "");
}

mxl_status mxl_hub_marker_read(const char *store_repo_dir, mxl_hub_marker *m, mxl_error *err) {
    memset(m, 0, sizeof *m);
    char path[MXL_STORE_PATH_MAX];
    mxl_status st = fmt(path, sizeof path, err, "%s/%s", store_repo_dir, MXL_STORE_DOWNLOAD_MARKER);
    if (st) return st;
    struct stat sb;
    if (lstat(path, &sb) != 0) return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: no download record", store_repo_dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: not valid JSON: %s", path, je.text);
    const char *repo = json_string_value(json_object_get(root, "repo_id"));
    const char *rev = json_string_value(json_object_get(root, "revision"));
    const char *commit = json_string_value(json_object_get(root, "commit"));
    const char *hub = json_string_value(json_object_get(root, "hub_cache"));
    json_t *created = json_object_get(root, "snapshot_created");
    if (!repo || !rev || !commit || !hub || !json_is_boolean(created) || !mxl_store_repo_id_valid(repo) ||
        !mxl_hub_commit_valid(commit) || hub[0] != '/') {
        json_decref(root);
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: not a download record of this mlxcel", path);
    }
    copy_str(m->repo_id, sizeof m->repo_id, repo);
    copy_str(m->revision, sizeof m->revision, rev);
    copy_str(m->commit, sizeof m->commit, commit);
    copy_str(m->hub_dir, sizeof m->hub_dir, hub);
    m->snapshot_created = json_is_true(created);
    json_decref(root);
    return MXL_OK;
}

static mxl_status marker_write(const char *dir, const mxl_hub_marker *m, mxl_error *err) {
    json_t *o = json_object();
    if (!o) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    json_object_set_new(o, "format", json_integer(1));
    json_object_set_new(o, "repo_id", json_string(m->repo_id));
    json_object_set_new(o, "revision", json_string(m->revision));
    json_object_set_new(o, "commit", json_string(m->commit));
    json_object_set_new(o, "hub_cache", json_string(m->hub_dir));
    json_object_set_new(o, "snapshot_created", json_boolean(m->snapshot_created));
    char *text = mxl_json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    char path[MXL_STORE_PATH_MAX];
    mxl_status st = fmt(path, sizeof path, err, "%s/%s", dir, MXL_STORE_DOWNLOAD_MARKER);
    if (st == MXL_OK) st = write_atomic(path, text, err);
    mxl_free(text);
    return st;
}

mxl_status mxl_hub_store_publish(const char *root, const mxl_hub_marker *m, const char *const *paths, size_t n,
                                 bool replace_plain, mxl_error *err) {
    char dest[MXL_STORE_PATH_MAX], owner_dir[MXL_STORE_PATH_MAX], tmp[MXL_STORE_PATH_MAX], old[MXL_STORE_PATH_MAX];
    char lockp[MXL_STORE_PATH_MAX], repo_dir[MXL_STORE_PATH_MAX];
    mxl_status st;
    if ((st = mxl_store_repo_path(root, m->repo_id, dest, sizeof dest, err))) return st;
    if ((st = mxl_hub_repo_dir(m->hub_dir, m->repo_id, repo_dir, sizeof repo_dir, err))) return st;
    memcpy(owner_dir, dest, strlen(dest) + 1);
    char *slash = strrchr(owner_dir, '/');
    const char *name = strrchr(dest, '/') + 1;
    *slash = '\0';
    if ((st = mxl_hub_mkdirs(owner_dir, err))) return st;
    static unsigned counter;
    unsigned k = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    if ((st = fmt(tmp, sizeof tmp, err, "%s/.%s.partial-%d-%u", owner_dir, name, (int)getpid(), k)) ||
        (st = fmt(old, sizeof old, err, "%s/.%s.old-%d-%u", owner_dir, name, (int)getpid(), k)) ||
        (st = fmt(lockp, sizeof lockp, err, "%s/.%s.lock", owner_dir, name)))
        return st;
    mxl_store_rmtree(tmp, NULL);
    if (mkdir(tmp, 0755) != 0) return mxl_error_set(err, MXL_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    for (size_t i = 0; i < n && st == MXL_OK; i++) {
        char link[MXL_STORE_PATH_MAX], target[MXL_STORE_PATH_MAX], dir[MXL_STORE_PATH_MAX];
        if (!mxl_hub_path_valid(paths[i])) {
            st = mxl_error_set(err, MXL_ERR_FORMAT, "unsafe repo file name '%.200s'", paths[i]);
            break;
        }
        if ((st = fmt(link, sizeof link, err, "%s/%s", tmp, paths[i])) ||
            (st = fmt(target, sizeof target, err, "%s/snapshots/%s/%s", repo_dir, m->commit, paths[i])))
            break;
        memcpy(dir, link, strlen(link) + 1);
        *strrchr(dir, '/') = '\0';
        if ((st = mxl_hub_mkdirs(dir, err))) break;
        if (symlink(target, link) != 0) st = mxl_error_set(err, MXL_ERR_IO, "cannot create link %s: %s", link, strerror(errno));
    }
    if (st == MXL_OK) st = marker_write(tmp, m, err);
    if (st) {
        mxl_store_rmtree(tmp, NULL);
        return st;
    }

    /* swap under the entry's lock: concurrent downloads of the same repo publish one at a time */
    int lfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lfd < 0) {
        mxl_store_rmtree(tmp, NULL);
        return mxl_error_set(err, MXL_ERR_IO, "cannot open the lock %s: %s", lockp, strerror(errno));
    }
    while (flock(lfd, LOCK_EX) != 0 && errno == EINTR) {
    }
    struct stat sb;
    bool have_old = false;
    if (lstat(dest, &sb) == 0) {
        mxl_hub_marker prev;
        mxl_error e2;
        mxl_status ms = S_ISDIR(sb.st_mode) ? mxl_hub_marker_read(dest, &prev, &e2) : MXL_ERR_FORMAT;
        if (ms == MXL_ERR_NOT_FOUND && !replace_plain) {
            st = mxl_error_set(err, MXL_ERR_ARG,
                               "the store already holds a copy of %s at %s that mlxcel download did not make; "
                               "pass --force to replace it",
                               m->repo_id, dest);
        } else if (!S_ISDIR(sb.st_mode)) {
            st = mxl_error_set(err, MXL_ERR_ARG, "%s exists and is not a directory", dest);
        } else if (rename(dest, old) != 0) {
            st = mxl_error_set(err, MXL_ERR_IO, "cannot move %s aside: %s", dest, strerror(errno));
        } else {
            have_old = true;
        }
    }
    if (st == MXL_OK && rename(tmp, dest) != 0) {
        st = mxl_error_set(err, MXL_ERR_IO, "cannot publish %s: %s", dest, strerror(errno));
        if (have_old) rename(old, dest);
        have_old = false;
    }
    flock(lfd, LOCK_UN);
    close(lfd);
    if (have_old) mxl_store_rmtree(old, NULL);
    mxl_store_rmtree(tmp, NULL);
    return st;
}

/* Every symlink below dir reaches an existing file. */
static bool links_intact(const char *dir, int depth) {
    if (depth > 32) return false;
    DIR *d = opendir(dir);
    if (!d) return false;
    bool ok = true;
    struct dirent *de;
    while (ok && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[MXL_STORE_PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p) continue;
        struct stat sb, tb;
        if (lstat(p, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) ok = links_intact(p, depth + 1);
        else if (S_ISLNK(sb.st_mode)) ok = stat(p, &tb) == 0;
    }
    closedir(d);
    return ok;
}

bool mxl_hub_store_entry_intact(const char *store_repo_dir) {
    char marker[MXL_STORE_PATH_MAX + 32];
    snprintf(marker, sizeof marker, "%s/%s", store_repo_dir, MXL_STORE_DOWNLOAD_MARKER);
    if (access(marker, F_OK) != 0) return true;
    return links_intact(store_repo_dir, 0);
}
