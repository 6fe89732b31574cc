/* store.c - model store: root selection, repo-id validation, model resolution (local path, store,
 * Hugging Face cache), disk usage, listing and symlink-safe removal (see store.h).
 *
 * Directory walks use openat/fstatat with O_NOFOLLOW / AT_SYMLINK_NOFOLLOW so that a symlink
 * planted inside the store can neither inflate a size nor redirect a deletion outside it. */
#include "io/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"

/* Walks deeper than this are refused rather than risking fd exhaustion on a hostile tree. */
#define STORE_MAX_DEPTH 128

const char *mxl_model_source_name(mxl_model_source source) {
    switch (source) {
    case MXL_MODEL_SOURCE_LOCAL: return "local";
    case MXL_MODEL_SOURCE_STORE: return "store";
    case MXL_MODEL_SOURCE_HF_CACHE: return "hf-cache";
    }
    return "unknown";
}

static const char *env_nonempty(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* snprintf into out; a truncated result is an error naming the start of the path. */
static mxl_status fmt_path(char *out, size_t cap, mxl_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static mxl_status fmt_path(char *out, size_t cap, mxl_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap) {
        if (cap) out[0] = '\0';
        return mxl_error_set(err, MXL_ERR_ARG, "path too long (more than %zu bytes)", cap ? cap - 1 : 0);
    }
    return MXL_OK;
}

/* Makes p absolute against the current directory (without resolving symlinks: the directory may
 * not exist yet) and drops trailing slashes. */
static mxl_status absolutize(const char *p, char *out, size_t cap, mxl_error *err) {
    mxl_status st;
    if (p[0] == '/') {
        st = fmt_path(out, cap, err, "%s", p);
    } else {
        char cwd[MXL_STORE_PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return mxl_error_set(err, MXL_ERR_IO, "cannot resolve '%s': current directory unknown: %s", p, strerror(errno));
        const char *rel = p;
        while (rel[0] == '.' && rel[1] == '/') rel += 2;
        if (strcmp(rel, ".") == 0) rel = "";
        st = fmt_path(out, cap, err, "%s%s%s", cwd, (rel[0] && strcmp(cwd, "/") != 0) ? "/" : "", rel);
    }
    if (st) return st;
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') out[--n] = '\0';
    return MXL_OK;
}

static mxl_status home_dir(char *out, size_t cap, mxl_error *err) {
    const char *h = env_nonempty("HOME");
    if (!h) {
        struct passwd *pw = getpwuid(getuid());
        if (pw && pw->pw_dir && pw->pw_dir[0]) h = pw->pw_dir;
    }
    if (!h) return mxl_error_set(err, MXL_ERR_ARG, "cannot locate the home directory: HOME is not set");
    return absolutize(h, out, cap, err);
}

mxl_status mxl_store_root(const char *models_dir_flag, char *out, size_t cap, mxl_error *err) {
    char base[MXL_STORE_PATH_MAX];
    mxl_status st;
    if (models_dir_flag) {
        if (!models_dir_flag[0]) return mxl_error_set(err, MXL_ERR_ARG, "--models-dir is empty");
        return absolutize(models_dir_flag, out, cap, err);
    }
    const char *v = env_nonempty("MLXCEL_MODELS_DIR");
    if (v) return absolutize(v, out, cap, err);
    v = env_nonempty("MLXCEL_CACHE_DIR");
    if (v) {
        if ((st = absolutize(v, base, sizeof base, err))) return st;
    } else {
        char home[MXL_STORE_PATH_MAX];
        if ((st = home_dir(home, sizeof home, err))) return st;
        if ((st = fmt_path(base, sizeof base, err, "%s/.cache/mlxcel", home))) return st;
    }
    return fmt_path(out, cap, err, "%s%smodels", base, strcmp(base, "/") ? "/" : "");
}

/* One owner or name: 1..MXL_STORE_REPO_PART_MAX bytes of [A-Za-z0-9._-], no "..", not starting
 * with '.' or '-' (so ".", "..", hidden directories and option-like names are all out). */
static bool part_valid(const char *s, size_t len) {
    if (len == 0 || len > MXL_STORE_REPO_PART_MAX) return false;
    if (s[0] == '.' || s[0] == '-') return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok) return false;
        if (c == '.' && i + 1 < len && s[i + 1] == '.') return false;
    }
    return true;
}

bool mxl_store_repo_id_valid(const char *s) {
    if (!s) return false;
    const char *slash = strchr(s, '/');
    if (!slash || strchr(slash + 1, '/')) return false;
    return part_valid(s, (size_t)(slash - s)) && part_valid(slash + 1, strlen(slash + 1));
}

mxl_status mxl_store_expand_repo_id(const char *arg, char *out, size_t cap, mxl_error *err) {
    if (!arg || !arg[0]) return mxl_error_set(err, MXL_ERR_ARG, "empty repo id");
    if (!strchr(arg, '/')) {
        const char *org = env_nonempty("MLXCEL_DEFAULT_ORG");
        if (!org) org = MXL_STORE_DEFAULT_ORG;
        if (!part_valid(org, strlen(org)))
            return mxl_error_set(err, MXL_ERR_ARG,
                                 "MLXCEL_DEFAULT_ORG '%.128s' is not a valid Hugging Face owner name", org);
        if (!part_valid(arg, strlen(arg)))
            return mxl_error_set(err, MXL_ERR_ARG,
                                 "'%.256s' is not a valid model name (letters, digits, '.', '_', '-'; no leading '.' or '-')", arg);
        mxl_status st = fmt_path(out, cap, err, "%s/%s", org, arg);
        return st ? mxl_error_set(err, MXL_ERR_ARG, "repo id '%s/%.256s' is too long", org, arg) : MXL_OK;
    }
    if (!mxl_store_repo_id_valid(arg))
        return mxl_error_set(err, MXL_ERR_ARG,
                             "'%.256s' is not a valid repo id (expected owner/name made of letters, digits, '.', '_', '-')", arg);
    if (strlen(arg) >= cap) return mxl_error_set(err, MXL_ERR_ARG, "repo id '%.256s' is too long", arg);
    memcpy(out, arg, strlen(arg) + 1);
    return MXL_OK;
}

mxl_status mxl_store_repo_path(const char *root, const char *repo_id, char *out, size_t cap, mxl_error *err) {
    if (!mxl_store_repo_id_valid(repo_id))
        return mxl_error_set(err, MXL_ERR_ARG, "'%.256s' is not a valid repo id", repo_id ? repo_id : "");
    return fmt_path(out, cap, err, "%s%s%s", root, strcmp(root, "/") ? "/" : "", repo_id);
}

/* huggingface_hub's own order: HF_HUB_CACHE, then HF_HOME/hub, then
 * ${XDG_CACHE_HOME:-~/.cache}/huggingface/hub. */
mxl_status mxl_store_hf_cache_dir(char *out, size_t cap, mxl_error *err) {
    char base[MXL_STORE_PATH_MAX];
    mxl_status st;
    const char *v = env_nonempty("HF_HUB_CACHE");
    if (v) return absolutize(v, out, cap, err);
    v = env_nonempty("HF_HOME");
    if (v) {
        if ((st = absolutize(v, base, sizeof base, err))) return st;
        return fmt_path(out, cap, err, "%s/hub", base);
    }
    v = env_nonempty("XDG_CACHE_HOME");
    if (v) {
        if ((st = absolutize(v, base, sizeof base, err))) return st;
    } else {
        char home[MXL_STORE_PATH_MAX];
        if ((st = home_dir(home, sizeof home, err))) return st;
        if ((st = fmt_path(base, sizeof base, err, "%s/.cache", home))) return st;
    }
    return fmt_path(out, cap, err, "%s/huggingface/hub", base);
}

/* Branch, tag or commit: [A-Za-z0-9._/-], 1..255 bytes, no "..", no "//", not starting with
 * '/' or '.', not ending with '/' (refs/<rev> must stay inside refs/). */
static bool revision_valid(const char *r) {
    size_t n = strlen(r);
    if (n == 0 || n > 255 || r[0] == '/' || r[0] == '.' || r[n - 1] == '/') return false;
    for (size_t i = 0; i < n; i++) {
        char c = r[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-' || c == '/';
        if (!ok) return false;
        if (c == '.' && r[i + 1] == '.') return false;
        if (c == '/' && (r[i + 1] == '/' || r[i + 1] == '.')) return false;
    }
    return true;
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

mxl_status mxl_store_hf_lookup(const char *repo_id, const char *revision, char *out, size_t cap,
                               char *commit_out, size_t commit_cap, mxl_error *err) {
    const char *rev = revision ? revision : "main";
    if (!mxl_store_repo_id_valid(repo_id))
        return mxl_error_set(err, MXL_ERR_ARG, "'%.256s' is not a valid repo id", repo_id ? repo_id : "");
    if (!revision_valid(rev))
        return mxl_error_set(err, MXL_ERR_ARG, "revision '%.256s' is not a valid branch, tag or commit name", rev);
    char cache[MXL_STORE_PATH_MAX], repo_dir[MXL_STORE_PATH_MAX], p[MXL_STORE_PATH_MAX];
    mxl_status st = mxl_store_hf_cache_dir(cache, sizeof cache, err);
    if (st) return st;
    const char *slash = strchr(repo_id, '/');
    if ((st = fmt_path(repo_dir, sizeof repo_dir, err, "%s/models--%.*s--%s", cache,
                       (int)(slash - repo_id), repo_id, slash + 1)))
        return st;

    char commit[128] = "";
    if ((st = fmt_path(p, sizeof p, err, "%s/refs/%s", repo_dir, rev))) return st;
    FILE *f = fopen(p, "rb");
    if (f) {
        size_t n = fread(commit, 1, sizeof commit - 1, f);
        fclose(f);
        commit[n] = '\0';
        while (n > 0 && (commit[n - 1] == '\n' || commit[n - 1] == '\r' || commit[n - 1] == ' ' || commit[n - 1] == '\t'))
            commit[--n] = '\0';
        bool hex = n > 0 && n <= 64;
        for (size_t i = 0; hex && i < n; i++)
            hex = (commit[i] >= '0' && commit[i] <= '9') || (commit[i] >= 'a' && commit[i] <= 'f') ||
                  (commit[i] >= 'A' && commit[i] <= 'F');
        if (!hex) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: does not hold a commit hash", p);
    } else if (!strchr(rev, '/')) {
        /* No such ref: the revision may itself be a commit (a snapshots/ directory name). */
        if (strlen(rev) >= sizeof commit)
            return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: revision '%s' not found", repo_dir, rev);
        memcpy(commit, rev, strlen(rev) + 1);
    } else {
        return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: revision '%s' not found", repo_dir, rev);
    }
    if ((st = fmt_path(p, sizeof p, err, "%s/snapshots/%s", repo_dir, commit))) return st;
    if (!is_dir(p))
        return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: no snapshot for revision '%s'", repo_dir, rev);
    if ((st = fmt_path(out, cap, err, "%s", p))) return st;
    if (commit_out && commit_cap) {
        if ((st = fmt_path(commit_out, commit_cap, err, "%s", commit))) return st;
    }
    return MXL_OK;
}

/* A single file-name component: what may follow owner/name in "owner/name/<file>". */
static bool file_component_valid(const char *s) { return part_valid(s, strlen(s)); }

mxl_status mxl_store_resolve(const char *arg, const char *models_dir_flag, const char *revision,
                             mxl_resolved *out, mxl_error *err) {
    memset(out, 0, sizeof *out);
    if (!arg || !arg[0]) return mxl_error_set(err, MXL_ERR_ARG, "empty model argument");
    mxl_status st;

    /* 1. An existing local path wins; --revision makes no sense for it. */
    struct stat sb;
    if (stat(arg, &sb) == 0) {
        if (revision)
            return mxl_error_set(err, MXL_ERR_ARG,
                                 "--revision cannot be used with a local model path ('%.256s')", arg);
        /* Absolute but symlinks kept: an HF snapshot file is a link to blobs/<sha256>, and
         * resolving it would lose both its extension and its sibling files. */
        if ((st = absolutize(arg, out->path, sizeof out->path, err))) return st;
        out->source = MXL_MODEL_SOURCE_LOCAL;
        return MXL_OK;
    }

    /* 2. A repo id: "owner/name", a bare "name", or "owner/name/<file>" naming one file of a repo
     * (GGUF repos often carry several quantizations). Anything else path-like is a missing path. */
    char repo_arg[MXL_STORE_REPO_ID_MAX] = "";
    const char *file = NULL;
    const char *s1 = strchr(arg, '/');
    const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    bool pathlike = arg[0] == '/' || arg[0] == '.' || arg[0] == '~' || (s2 && strchr(s2 + 1, '/'));
    if (!pathlike && s2) {
        size_t n = (size_t)(s2 - arg);
        if (n < sizeof repo_arg) {
            memcpy(repo_arg, arg, n);
            repo_arg[n] = '\0';
            file = s2 + 1;
        }
        if (!file || !mxl_store_repo_id_valid(repo_arg) || !file_component_valid(file)) pathlike = true;
    }
    if (pathlike) return mxl_error_set(err, MXL_ERR_NOT_FOUND, "model path '%.256s' does not exist", arg);
    if (!file) {
        if (strlen(arg) >= sizeof repo_arg)
            return mxl_error_set(err, MXL_ERR_ARG, "model '%.256s' is not an existing path or a valid repo id", arg);
        memcpy(repo_arg, arg, strlen(arg) + 1);
    }
    mxl_error e2;
    if (mxl_store_expand_repo_id(repo_arg, out->repo_id, sizeof out->repo_id, &e2))
        return mxl_error_set(err, MXL_ERR_ARG, "model '%.256s' is not an existing path: %s", arg, e2.msg);
    if (revision && !revision_valid(revision))
        return mxl_error_set(err, MXL_ERR_ARG, "revision '%.256s' is not a valid branch, tag or commit name", revision);

    /* 3. The mlxcel store (no revision namespace: refuse a revision we cannot honour). */
    char root[MXL_STORE_PATH_MAX], dir[MXL_STORE_PATH_MAX];
    if ((st = mxl_store_root(models_dir_flag, root, sizeof root, err))) return st;
    if ((st = mxl_store_repo_path(root, out->repo_id, dir, sizeof dir, err))) return st;
    bool found = false;
    if (is_dir(dir)) {
        if (revision && strcmp(revision, "main") != 0)
            return mxl_error_set(err, MXL_ERR_ARG,
                                 "model '%s' in the store at %s is not kept per revision, so --revision %.128s is refused; "
                                 "use a separate --models-dir for each revision",
                                 out->repo_id, dir, revision);
        out->source = MXL_MODEL_SOURCE_STORE;
        found = true;
    } else {
        /* 4. The read-only Hugging Face cache. */
        mxl_error herr;
        st = mxl_store_hf_lookup(out->repo_id, revision, dir, sizeof dir, out->revision, sizeof out->revision, &herr);
        if (st == MXL_OK) {
            out->source = MXL_MODEL_SOURCE_HF_CACHE;
            found = true;
        } else if (st != MXL_ERR_NOT_FOUND) {
            if (err) *err = herr;
            return st;
        }
    }
    if (!found) {
        char shown[MXL_STORE_REPO_ID_MAX + 300];
        if (strcmp(repo_arg, out->repo_id) != 0 || file)
            snprintf(shown, sizeof shown, "'%.256s' (%s)", arg, out->repo_id);
        else
            snprintf(shown, sizeof shown, "'%s'", out->repo_id);
        char revtxt[300] = "";
        if (revision && strcmp(revision, "main") != 0) snprintf(revtxt, sizeof revtxt, " at revision '%.255s'", revision);
        return mxl_error_set(err, MXL_ERR_NOT_FOUND,
                             "model %s%s not found in %s or the Hugging Face cache (mlxcel download %s fetches it)",
                             shown, revtxt, root, out->repo_id);
    }
    if (file) {
        char fp[MXL_STORE_PATH_MAX];
        if ((st = fmt_path(fp, sizeof fp, err, "%s/%s", dir, file))) return st;
        if (stat(fp, &sb) != 0)
            return mxl_error_set(err, MXL_ERR_NOT_FOUND, "model '%s' (%s) has no file '%s'", out->repo_id, dir, file);
        memcpy(dir, fp, sizeof dir);
    }
    /* Absolute already (root and cache dir are); keep the snapshot path rather than its blob
     * target so that sibling files (tokenizer.json, ...) stay reachable from it. */
    return fmt_path(out->path, sizeof out->path, err, "%s", dir);
}

static bool has_suffix_ci(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcasecmp(s + n - m, suffix) == 0;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

mxl_status mxl_store_gguf_in_dir(const char *dir, char *out, size_t cap, mxl_error *err) {
    if (cap) out[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) return mxl_error_set(err, MXL_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    bool has_config = false;
    char **names = NULL;
    size_t n = 0, cap_names = 0;
    mxl_status st = MXL_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, "config.json") == 0) has_config = true;
        if (de->d_name[0] == '.' || !has_suffix_ci(de->d_name, ".gguf")) continue;
        struct stat sb; /* follow links: HF snapshot files are symlinks into blobs/ */
        if (fstatat(dirfd(d), de->d_name, &sb, 0) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (n == cap_names) {
            size_t nc = cap_names ? cap_names * 2 : 8;
            char **nn = mxl_realloc(names, nc * sizeof *nn);
            if (!nn) {
                st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory listing GGUF files", dir);
                break;
            }
            names = nn;
            cap_names = nc;
        }
        names[n] = mxl_strdup(de->d_name);
        if (!names[n]) {
            st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory listing GGUF files", dir);
            break;
        }
        n++;
    }
    closedir(d);
    if (st == MXL_OK && !has_config && n == 1) {
        st = fmt_path(out, cap, err, "%s/%s", dir, names[0]);
    } else if (st == MXL_OK && !has_config && n > 1) {
        qsort(names, n, sizeof *names, cmp_str_ptr);
        char list[320] = "";
        size_t used = 0;
        for (size_t i = 0; i < n; i++) {
            int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", names[i]);
            if (w < 0 || (size_t)w >= sizeof list - used) {
                snprintf(list + (used < sizeof list - 5 ? used : sizeof list - 5), 5, ", ..");
                break;
            }
            used += (size_t)w;
        }
        st = mxl_error_set(err, MXL_ERR_ARG, "%s holds %zu GGUF files (%s); pass one of them as the model path",
                           dir, n, list);
    }
    for (size_t i = 0; i < n; i++) mxl_free(names[i]);
    mxl_free(names);
    return st;
}

/* ---- usage: sum of regular-file sizes and newest mtime, without following symlinks ---------- */

typedef struct usage_walk {
    char path[MXL_STORE_PATH_MAX]; /* current directory, for messages */
    uint64_t bytes;
    int64_t newest;
    bool has;
    bool follow_file_links; /* count a symlinked file at its target's size (never enter linked dirs) */
} usage_walk;

static void usage_add(usage_walk *w, const struct stat *sb, mxl_error *err, mxl_status *st) {
    if (mxl_add_u64(w->bytes, (uint64_t)sb->st_size, &w->bytes)) {
        *st = mxl_error_set(err, MXL_ERR_OVERFLOW, "%s: total size overflows", w->path);
        return;
    }
    int64_t mt = (int64_t)sb->st_mtim.tv_sec;
    if (!w->has || mt > w->newest) w->newest = mt;
    w->has = true;
}

/* Takes ownership of fd. */
static mxl_status usage_dir(int fd, usage_walk *w, int depth, mxl_error *err) {
    if (depth > STORE_MAX_DEPTH) {
        close(fd);
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: directory tree nested too deeply", w->path);
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return mxl_error_set(err, MXL_ERR_IO, "%s: cannot read directory: %s", w->path, strerror(e));
    }
    mxl_status st = MXL_OK;
    struct dirent *de;
    while (st == MXL_OK && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        struct stat sb;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue; /* vanished */
        struct stat tb;
        if (S_ISLNK(sb.st_mode) && w->follow_file_links && fstatat(dirfd(d), de->d_name, &tb, 0) == 0 &&
            S_ISREG(tb.st_mode)) {
            usage_add(w, &tb, err, &st);
        } else if (S_ISREG(sb.st_mode)) {
            usage_add(w, &sb, err, &st);
        } else if (S_ISDIR(sb.st_mode)) {
            size_t len = strlen(w->path);
            int n = snprintf(w->path + len, sizeof w->path - len, "/%s", de->d_name);
            if (n < 0 || (size_t)n >= sizeof w->path - len) {
                w->path[len] = '\0';
                st = mxl_error_set(err, MXL_ERR_ARG, "%s: path too long below it", w->path);
                break;
            }
            int cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd < 0)
                st = mxl_error_set(err, MXL_ERR_IO, "%s: cannot open directory: %s", w->path, strerror(errno));
            else
                st = usage_dir(cfd, w, depth + 1, err);
            w->path[len] = '\0';
        }
    }
    closedir(d);
    return st;
}

static mxl_status usage(const char *path, bool follow_file_links, uint64_t *bytes, int64_t *newest_mtime,
                        bool *has_mtime, mxl_error *err) {
    usage_walk *w = mxl_calloc(1, sizeof *w);
    if (!w) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
    w->follow_file_links = follow_file_links;
    mxl_status st = fmt_path(w->path, sizeof w->path, err, "%s", path);
    struct stat sb;
    if (st == MXL_OK && lstat(path, &sb) != 0)
        st = mxl_error_set(err, errno == ENOENT ? MXL_ERR_NOT_FOUND : MXL_ERR_IO, "%s: %s", path, strerror(errno));
    if (st == MXL_OK) {
        if (S_ISREG(sb.st_mode)) {
            usage_add(w, &sb, err, &st);
        } else if (S_ISDIR(sb.st_mode)) {
            int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0)
                st = mxl_error_set(err, MXL_ERR_IO, "%s: cannot open directory: %s", path, strerror(errno));
            else
                st = usage_dir(fd, w, 0, err);
        }
    }
    if (st == MXL_OK) {
        *bytes = w->bytes;
        *newest_mtime = w->has ? w->newest : 0;
        *has_mtime = w->has;
    }
    mxl_free(w);
    return st;
}

mxl_status mxl_store_usage(const char *path, uint64_t *bytes, int64_t *newest_mtime, bool *has_mtime,
                           mxl_error *err) {
    return usage(path, false, bytes, newest_mtime, has_mtime, err);
}

mxl_status mxl_store_usage_links(const char *path, uint64_t *bytes, int64_t *newest_mtime, bool *has_mtime,
                                 mxl_error *err) {
    return usage(path, true, bytes, newest_mtime, has_mtime, err);
}

/* ---- list --------------------------------------------------------------------------------- */

/* A model directory has config.json, *.safetensors or *.gguf directly inside. */
static bool holds_model(int dfd) {
    int fd = dup(dfd);
    if (fd < 0) return false;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return false;
    }
    bool yes = false;
    struct dirent *de;
    while (!yes && (de = readdir(d))) {
        const char *n = de->d_name;
        if (n[0] == '.') continue;
        yes = strcmp(n, "config.json") == 0 || has_suffix_ci(n, ".safetensors") || has_suffix_ci(n, ".gguf");
    }
    closedir(d);
    return yes;
}

static mxl_status entries_push(mxl_store_entry **v, size_t *n, size_t *cap, mxl_error *err) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        mxl_store_entry *nv = mxl_realloc(*v, nc * sizeof *nv);
        if (!nv) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory listing the model store");
        *v = nv;
        *cap = nc;
    }
    memset(&(*v)[*n], 0, sizeof **v);
    (*n)++;
    return MXL_OK;
}

mxl_status mxl_store_list(const char *root, mxl_store_entry **out, size_t *n_out, mxl_error *err) {
    *out = NULL;
    *n_out = 0;
    DIR *rd = opendir(root);
    if (!rd) {
        if (errno == ENOENT) return MXL_OK;
        return mxl_error_set(err, MXL_ERR_IO, "%s: cannot read the model store: %s", root, strerror(errno));
    }
    mxl_store_entry *v = NULL;
    size_t n = 0, cap = 0;
    mxl_status st = MXL_OK;
    struct dirent *oe;
    while (st == MXL_OK && (oe = readdir(rd))) {
        if (!part_valid(oe->d_name, strlen(oe->d_name))) continue;
        struct stat sb;
        if (fstatat(dirfd(rd), oe->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(sb.st_mode)) continue;
        int ofd = openat(dirfd(rd), oe->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ofd < 0) continue;
        DIR *od = fdopendir(ofd);
        if (!od) {
            close(ofd);
            continue;
        }
        struct dirent *ne;
        while (st == MXL_OK && (ne = readdir(od))) {
            if (!part_valid(ne->d_name, strlen(ne->d_name))) continue;
            if (fstatat(dirfd(od), ne->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(sb.st_mode)) continue;
            int mfd = openat(dirfd(od), ne->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (mfd < 0) continue;
            bool model = holds_model(mfd);
            close(mfd);
            if (!model) continue;
            if ((st = entries_push(&v, &n, &cap, err))) break;
            mxl_store_entry *e = &v[n - 1];
            /* Both parts are <= MXL_STORE_REPO_PART_MAX (checked above), so this fits. */
            int w = snprintf(e->repo_id, sizeof e->repo_id, "%s/%s", oe->d_name, ne->d_name);
            MXL_ASSERT(w > 0 && (size_t)w < sizeof e->repo_id);
            if ((st = mxl_store_repo_path(root, e->repo_id, e->path, sizeof e->path, err))) break;
            /* A download's entry is links into the hub cache: count what they point at. */
            char marker[MXL_STORE_PATH_MAX + 32];
            snprintf(marker, sizeof marker, "%s/%s", e->path, MXL_STORE_DOWNLOAD_MARKER);
            if (access(marker, F_OK) == 0)
                st = mxl_store_usage_links(e->path, &e->size_bytes, &e->modified, &e->has_modified, err);
            else
                st = mxl_store_usage(e->path, &e->size_bytes, &e->modified, &e->has_modified, err);
            if (st == MXL_ERR_NOT_FOUND) { /* removed while we looked: drop it */
                n--;
                st = MXL_OK;
            }
        }
        closedir(od);
    }
    closedir(rd);
    if (st) {
        mxl_free(v);
        return st;
    }
    *out = v;
    *n_out = n;
    return MXL_OK;
}


mxl_status mxl_store_hf_list(mxl_store_entry **out, size_t *n_out, mxl_error *err) {
    *out = NULL;
    *n_out = 0;
    char cache[MXL_STORE_PATH_MAX];
    mxl_status st = mxl_store_hf_cache_dir(cache, sizeof cache, err);
    if (st) return st;
    DIR *d = opendir(cache);
    if (!d) return errno == ENOENT ? MXL_OK : mxl_error_set(err, MXL_ERR_IO, "%s: cannot read: %s", cache, strerror(errno));
    mxl_store_entry *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while (st == MXL_OK && (de = readdir(d))) {
        /* models--<owner>--<name>: owners and names cannot hold "--" on the Hub */
        const char *nm = de->d_name;
        if (strncmp(nm, "models--", 8) != 0) continue;
        const char *sep = strstr(nm + 8, "--");
        if (!sep) continue;
        char repo[MXL_STORE_REPO_ID_MAX];
        if (snprintf(repo, sizeof repo, "%.*s/%s", (int)(sep - (nm + 8)), nm + 8, sep + 2) >= (int)sizeof repo ||
            !mxl_store_repo_id_valid(repo))
            continue;
        char snap[MXL_STORE_PATH_MAX], commit[64];
        mxl_error e2;
        if (mxl_store_hf_lookup(repo, NULL, snap, sizeof snap, commit, sizeof commit, &e2) != MXL_OK) continue;
        if ((st = entries_push(&v, &n, &cap, err))) break;
        mxl_store_entry *e = &v[n - 1];
        memcpy(e->repo_id, repo, strlen(repo) + 1);
        if ((st = fmt_path(e->path, sizeof e->path, err, "%s", snap))) break;
        e->hf_cache = true;
        /* the repo's disk usage is its blobs, as `hf cache scan` counts it */
        char blobs[MXL_STORE_PATH_MAX];
        if ((st = fmt_path(blobs, sizeof blobs, err, "%s/%s/blobs", cache, nm))) break;
        st = mxl_store_usage(blobs, &e->size_bytes, &e->modified, &e->has_modified, err);
        if (st == MXL_ERR_NOT_FOUND) {
            n--;
            st = MXL_OK;
        }
    }
    closedir(d);
    if (st) {
        mxl_free(v);
        return st;
    }
    *out = v;
    *n_out = n;
    return MXL_OK;
}

void mxl_store_entries_free(mxl_store_entry *entries) { mxl_free(entries); }

/* ---- rm ----------------------------------------------------------------------------------- */

mxl_status mxl_store_check_removable(const char *root, const char *repo_id, char *path_out, size_t cap,
                                     mxl_error *err) {
    if (!mxl_store_repo_id_valid(repo_id))
        return mxl_error_set(err, MXL_ERR_ARG, "'%.256s' is not a valid repo id (owner/name)", repo_id ? repo_id : "");
    char rroot[PATH_MAX], owner_path[MXL_STORE_PATH_MAX], dir[MXL_STORE_PATH_MAX], real[PATH_MAX];
    mxl_status st;
    if (!realpath(root, rroot))
        return mxl_error_set(err, errno == ENOENT ? MXL_ERR_NOT_FOUND : MXL_ERR_IO, "model store %s: %s", root,
                             strerror(errno));
    const char *slash = strchr(repo_id, '/');
    if ((st = fmt_path(owner_path, sizeof owner_path, err, "%s/%.*s", root, (int)(slash - repo_id), repo_id))) return st;
    if ((st = mxl_store_repo_path(root, repo_id, dir, sizeof dir, err))) return st;
    struct stat sb;
    const char *checks[2] = {owner_path, dir};
    for (int i = 0; i < 2; i++)
        if (lstat(checks[i], &sb) != 0)
            return mxl_error_set(err, errno == ENOENT ? MXL_ERR_NOT_FOUND : MXL_ERR_IO, "%s: %s", checks[i],
                                 strerror(errno));
    /* The resolved path must be exactly <realpath(root)>/<owner>/<name>: any symlink at the owner
     * or name level (pointing out of the store or to another repo inside it) changes it. */
    char expect[MXL_STORE_PATH_MAX];
    if ((st = fmt_path(expect, sizeof expect, err, "%s%s%s", rroot, strcmp(rroot, "/") ? "/" : "", repo_id))) return st;
    if (!realpath(dir, real)) {
        if (errno == ENOENT) /* a dangling symlink */
            return mxl_error_set(err, MXL_ERR_ARG, "refusing to remove %s: %s is a dangling symlink", repo_id, dir);
        return mxl_error_set(err, MXL_ERR_IO, "%s: %s", dir, strerror(errno));
    }
    if (strcmp(real, expect) != 0)
        return mxl_error_set(err, MXL_ERR_ARG,
                             "refusing to remove %s: %s resolves through a symlink to %s, not to its own directory in the store root %s",
                             repo_id, dir, real, rroot);
    if (stat(real, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return mxl_error_set(err, MXL_ERR_ARG, "refusing to remove %s: %s is not a directory", repo_id, dir);
    if (path_out) return fmt_path(path_out, cap, err, "%s", dir);
    return MXL_OK;
}

/* Empties the directory open at fd (taking ownership of fd), never following symlinks: a link is
 * unlinked, a subdirectory is opened with O_NOFOLLOW, emptied and removed. `where` is the path for
 * messages. Repeats passes until nothing is left because POSIX leaves readdir's view of entries
 * removed during iteration unspecified. */
static mxl_status rm_contents(int fd, const char *where, int depth, mxl_error *err) {
    if (depth > STORE_MAX_DEPTH) {
        close(fd);
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: directory tree nested too deeply to remove", where);
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return mxl_error_set(err, MXL_ERR_IO, "%s: cannot read directory: %s", where, strerror(e));
    }
    mxl_status st = MXL_OK;
    for (;;) {
        bool any = false; /* something was removed in this pass: look again */
        struct dirent *de;
        rewinddir(d);
        while (st == MXL_OK && (de = readdir(d))) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
            struct stat sb;
            if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
            if (S_ISDIR(sb.st_mode)) {
                int cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (cfd < 0) {
                    st = mxl_error_set(err, MXL_ERR_IO, "%s/%s: cannot open: %s", where, de->d_name, strerror(errno));
                    break;
                }
                char sub[MXL_STORE_PATH_MAX];
                snprintf(sub, sizeof sub, "%s/%s", where, de->d_name);
                if ((st = rm_contents(cfd, sub, depth + 1, err))) break;
                if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
                    st = mxl_error_set(err, MXL_ERR_IO, "%s: cannot remove: %s", sub, strerror(errno));
                    break;
                }
            } else if (unlinkat(dirfd(d), de->d_name, 0) != 0 && errno != ENOENT) {
                st = mxl_error_set(err, MXL_ERR_IO, "%s/%s: cannot remove: %s", where, de->d_name, strerror(errno));
                break;
            }
            any = true;
        }
        if (st || !any) break;
    }
    closedir(d);
    return st;
}

mxl_status mxl_store_remove(const char *root, const char *repo_id, mxl_error *err) {
    char dir[MXL_STORE_PATH_MAX], rroot[PATH_MAX];
    mxl_status st = mxl_store_check_removable(root, repo_id, dir, sizeof dir, err);
    if (st) return st;
    if (!realpath(root, rroot)) return mxl_error_set(err, MXL_ERR_IO, "model store %s: %s", root, strerror(errno));
    const char *slash = strchr(repo_id, '/');
    char owner[MXL_STORE_REPO_PART_MAX + 1];
    size_t olen = (size_t)(slash - repo_id);
    memcpy(owner, repo_id, olen);
    owner[olen] = '\0';
    const char *name = slash + 1;

    int rfd = open(rroot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0) return mxl_error_set(err, MXL_ERR_IO, "%s: cannot open: %s", rroot, strerror(errno));
    int ofd = openat(rfd, owner, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ofd < 0) {
        st = mxl_error_set(err, MXL_ERR_IO, "%s/%s: cannot open without following links: %s", rroot, owner, strerror(errno));
        close(rfd);
        return st;
    }
    int mfd = openat(ofd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (mfd < 0) {
        st = mxl_error_set(err, MXL_ERR_IO, "%s: cannot open without following links: %s", dir, strerror(errno));
    } else if ((st = rm_contents(mfd, dir, 0, err)) == MXL_OK) {
        if (unlinkat(ofd, name, AT_REMOVEDIR) != 0)
            st = mxl_error_set(err, MXL_ERR_IO, "%s: cannot remove: %s", dir, strerror(errno));
        else if (unlinkat(rfd, owner, AT_REMOVEDIR) != 0 && errno != ENOTEMPTY && errno != EEXIST)
            st = mxl_error_set(err, MXL_ERR_IO, "%s/%s: cannot remove the empty owner directory: %s", rroot, owner,
                               strerror(errno));
    }
    close(ofd);
    close(rfd);
    return st;
}

mxl_status mxl_store_rmtree(const char *path, mxl_error *err) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return errno == ENOENT ? MXL_OK : mxl_error_set(err, MXL_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) {
        if (unlink(path) != 0 && errno != ENOENT)
            return mxl_error_set(err, MXL_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
        return MXL_OK;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return mxl_error_set(err, MXL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    mxl_status st = rm_contents(fd, path, 0, err);
    if (st == MXL_OK && rmdir(path) != 0 && errno != ENOENT)
        st = mxl_error_set(err, MXL_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    return st;
}

void mxl_store_format_size(uint64_t bytes, char *out, size_t cap) {
    static const char *units[] = {"KB", "MB", "GB", "TB", "PB", "EB"};
    if (bytes < 1000) {
        snprintf(out, cap, "%llu B", (unsigned long long)bytes);
        return;
    }
    double v = (double)bytes / 1000.0;
    size_t u = 0;
    /* Move up a unit when one decimal would print "1000.0". */
    while (v >= 999.95 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1000.0;
        u++;
    }
    snprintf(out, cap, "%.1f %s", v, units[u]);
}
