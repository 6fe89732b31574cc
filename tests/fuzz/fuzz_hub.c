/* fuzz_hub.c - libFuzzer harness for what a Hub (or anything answering at $HF_ENDPOINT) sends
 * `mlxcel download`: the repository listing JSON (mxl_hub_parse_listing, with and without
 * include / exclude globs), response header lines (mxl_http_parse_header) and what is read from
 * them (ETag normalisation into a blob file name, the commit id, Content-Range), and repo file names
 * (mxl_hub_path_valid). The input is split at the first NUL byte: listing before, headers after. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "io/http.h"
#include "io/hub.h"
#include "io/hub_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A name that would leave the snapshot directory: absolute, or a "." / ".." component (names
 * such as "..a" are ordinary files). Checked here independently of mxl_hub_path_valid. */
static bool escapes(const char *p) {
    if (p[0] == '/') return true;
    for (const char *c = p;;) {
        size_t n = strcspn(c, "/");
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.') || n == 0) return true;
        if (!c[n]) return false;
        c += n + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = (const char *)data;
    const char *nul = memchr(p, 0, size);
    size_t n_list = nul ? (size_t)(nul - p) : size;

    static const char *const inc[] = {"*.json", "sub/"};
    static const char *const exc[] = {"*.bin"};
    for (int mode = 0; mode < 2; mode++) {
        char commit[MXL_HUB_COMMIT_MAX];
        char **paths = NULL;
        size_t n = 0;
        mxl_error err;
        if (mxl_hub_parse_listing(p, n_list, mode ? inc : NULL, mode ? 2 : 0, mode ? exc : NULL, mode ? 1 : 0, commit,
                                  &paths, &n, &err) == MXL_OK) {
            if (!mxl_hub_commit_valid(commit)) __builtin_trap();
            for (size_t i = 0; i < n; i++) {
                if (!mxl_hub_path_valid(paths[i]) || escapes(paths[i])) __builtin_trap();
                mxl_free(paths[i]);
            }
            mxl_free(paths);
        }
    }

    if (!nul) return 0;
    mxl_http_headers h;
    mxl_http_headers_reset(&h);
    const char *s = nul + 1, *end = p + size;
    while (s < end) {
        const char *e = memchr(s, '\n', (size_t)(end - s));
        size_t len = e ? (size_t)(e - s + 1) : (size_t)(end - s);
        mxl_http_parse_header(&h, s, len);
        s += len;
    }
    char etag[MXL_HUB_ETAG_MAX];
    const char *raw = h.linked_etag[0] ? h.linked_etag : h.etag;
    if (mxl_hub_etag_normalize(raw, etag, sizeof etag)) {
        /* a blob file name: never a path */
        if (strchr(etag, '/') || etag[0] == '.' || strlen(etag) > 128) __builtin_trap();
    }
    long long start = -1;
    (void)sscanf(h.content_range, "bytes %lld-", &start);
    (void)mxl_hub_commit_valid(h.repo_commit);
    (void)mxl_hub_path_valid(h.location);
    return 0;
}
