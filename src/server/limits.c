/* limits.c - checks on hostile input that several routes share (limits.h): JSON nesting depth,
 * the API key compared in constant time, slot and media files opened without escaping their
 * directory. */
#include "server/limits.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool mxl_srv_json_depth_ok(const char *b, size_t n, int max, int *depth) {
    int d = 0, top = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        const char c = b[i];
        if (in_str) {
            if (c == '\\') i++; /* the escaped character (\" included) */
            else if (c == '"') in_str = false;
            continue;
        }
        if (c == '"') {
            in_str = true;
        } else if (c == '[' || c == '{') {
            if (++d > top) top = d;
            if (d > max) {
                if (depth) *depth = d;
                return false;
            }
        } else if ((c == ']' || c == '}') && d > 0) {
            d--;
        }
    }
    if (depth) *depth = top;
    return true;
}

static bool sha256(const char *s, unsigned char out[32]) {
    unsigned int n = 0;
    return EVP_Digest(s, strlen(s), out, &n, EVP_sha256(), NULL) == 1 && n == 32;
}

bool mxl_srv_key_equal(const char *given, const char *key) {
    if (!given || !key) return false;
    unsigned char a[32], b[32];
    if (!sha256(given, a) || !sha256(key, b)) return false;
    return CRYPTO_memcmp(a, b, sizeof a) == 0;
}

/* fd opened with O_NONBLOCK (a FIFO must not block the caller): a regular file, made blocking
 * again; else closed, -1 with errno EINVAL. */
static int keep_regular(int fd) {
    struct stat st;
    if (fd < 0) return -1;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int mxl_srv_open_regular(const char *path) { return keep_regular(open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)); }

int mxl_srv_create_beside(const char *path, char *tmp, size_t cap) {
    if (snprintf(tmp, cap, "%s.XXXXXX", path) >= (int)cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkostemp(tmp, O_CLOEXEC);
}

/* True when path (resolved) is root or lies below it. */
static bool inside(const char *root, const char *path) {
    size_t rl = strlen(root);
    if (rl == 1 && root[0] == '/') return path[0] == '/';
    return strncmp(path, root, rl) == 0 && (path[rl] == '/' || path[rl] == 0);
}

int mxl_srv_open_under(const char *root, const char *path) {
    char want[PATH_MAX * 2], real[PATH_MAX];
    int n = path[0] == '/' ? snprintf(want, sizeof want, "%s", path) : snprintf(want, sizeof want, "%s/%s", root, path);
    if (n < 0 || (size_t)n >= sizeof want) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* realpath follows every symlink: where the name leads now */
    if (!realpath(want, real)) return -1;
    if (!inside(root, real)) {
        errno = EXDEV;
        return -1;
    }
    int fd = keep_regular(open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (fd < 0) return -1;
    /* a directory of the path swapped for a symlink since realpath: what was opened is checked
     * (where /proc is mounted) */
    char link[64], got[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, got, sizeof got - 1);
    if (k > 0) {
        got[k] = 0;
        if (!inside(root, got)) {
            close(fd);
            errno = EXDEV;
            return -1;
        }
    }
    return fd;
}
