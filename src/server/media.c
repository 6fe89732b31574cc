/* media.c - a request's images: URLs to pixel values (see media.h). */
#include "server/media.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/base64.h"
#include "engine/model.h"
#include "image/image.h"
#include "server/limits.h"

void mxl_srv_images_free(mxl_srv_images *im) {
    for (int i = 0; i < im->n; i++) mxl_vlm_input_free(&im->in[i]);
    memset(im, 0, sizeof *im);
}

static bool starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* data:[<type>][;params];base64,<payload> */
static bool from_data_url(const mxl_server *s, const char *url, int idx, uint8_t **out, size_t *n, char *msg, size_t ml) {
    const char *comma = strchr(url, ',');
    if (!comma) return snprintf(msg, ml, "image %d: a data: URL without a ',' before its payload", idx), false;
    const char *meta = url + 5;
    size_t ml_len = (size_t)(comma - meta);
    if (ml_len < 7 || memcmp(comma - 7, ";base64", 7) != 0)
        return snprintf(msg, ml, "image %d: only base64 data: URLs are accepted (data:image/png;base64,...)", idx), false;
    if (ml_len > 7 && !starts(meta, "image/") && !starts(meta, "application/octet-stream") && meta[0] != ';')
        return snprintf(msg, ml, "image %d: the data: URL's media type '%.*s' is not an image", idx, (int)(ml_len - 7), meta), false;
    const char *b64 = comma + 1;
    size_t len = strlen(b64);
    if ((uint64_t)len / 4 * 3 > (uint64_t)s->cfg->max_image_payload + 3)
        return snprintf(msg, ml, "image %d: the payload exceeds --max-image-payload-size (%lld bytes)", idx, (long long)s->cfg->max_image_payload), false;
    uint8_t *buf = mxl_malloc(mxl_base64_max_decoded(len));
    if (!buf) return snprintf(msg, ml, "out of memory"), false;
    if (!mxl_base64_decode(b64, len, buf, n)) {
        mxl_free(buf);
        return snprintf(msg, ml, "image %d: the data: URL's payload is not valid base64", idx), false;
    }
    if ((int64_t)*n > s->cfg->max_image_payload) {
        mxl_free(buf);
        return snprintf(msg, ml, "image %d: the payload exceeds --max-image-payload-size (%lld bytes)", idx, (long long)s->cfg->max_image_payload), false;
    }
    *out = buf;
    return true;
}

/* A file under --media-path: relative paths resolve against the root, absolute ones must already
 * lie inside it; the resolved path (symlinks followed) must stay inside, and what was opened is
 * checked again (limits.h mxl_srv_open_under: no race with a directory swapped for a symlink). */
static bool from_file(const mxl_server *s, const char *path, int idx, uint8_t **out, size_t *n, char *msg, size_t ml) {
    if (!s->cfg->media_path || !*s->cfg->media_path)
        return snprintf(msg, ml, "image %d: local files are refused (the server was started without --media-path)", idx), false;
    char root[PATH_MAX];
    if (!realpath(s->cfg->media_path, root)) return snprintf(msg, ml, "image %d: --media-path cannot be resolved: %s", idx, strerror(errno)), false;
    int fd = mxl_srv_open_under(root, path);
    if (fd < 0) {
        if (errno == EXDEV) return snprintf(msg, ml, "image %d: '%s' is outside --media-path", idx, path), false;
        if (errno == EINVAL || errno == EISDIR) return snprintf(msg, ml, "image %d: '%s' is not a readable file", idx, path), false;
        return snprintf(msg, ml, "image %d: '%s' cannot be read under --media-path: %s", idx, path, strerror(errno)), false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return snprintf(msg, ml, "image %d: '%s' is not a readable file", idx, path), false;
    }
    if ((int64_t)st.st_size > s->cfg->max_image_payload) {
        close(fd);
        return snprintf(msg, ml, "image %d: '%s' exceeds --max-image-payload-size (%lld bytes)", idx, path, (long long)s->cfg->max_image_payload), false;
    }
    uint8_t *buf = mxl_malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got != (size_t)st.st_size) {
        mxl_free(buf);
        return snprintf(msg, ml, "image %d: '%s' could not be read", idx, path), false;
    }
    *out = buf;
    *n = got;
    return true;
}

bool mxl_srv_images_load(const mxl_server *s, const json_t *urls, mxl_srv_images *out, char *msg, size_t ml) {
    memset(out, 0, sizeof *out);
    const mxl_vlm *v = mxl_gen_model_vlm(s->model);
    size_t count = json_array_size(urls);
    if (count == 0) return true;
    if (!v) return snprintf(msg, ml, "%s", mxl_gen_model_no_vision(s->model)), false;
    if ((int64_t)count > s->cfg->max_images || count > MXL_GEN_MAX_IMAGES)
        return snprintf(msg, ml, "%zu images in one request (at most %lld: --max-images)", count, (long long)s->cfg->max_images), false;
    mxl_image_limits lim;
    mxl_image_limits_default(&lim);
    lim.max_width = s->cfg->max_image_width;
    lim.max_height = s->cfg->max_image_height;
    lim.max_decode_bytes = (uint64_t)s->cfg->max_image_decode_alloc;
    for (size_t i = 0; i < count; i++) {
        const char *url = json_string_value(json_array_get(urls, i));
        int idx = (int)i + 1;
        uint8_t *bytes = NULL;
        size_t n = 0;
        bool ok = false;
        if (!url) snprintf(msg, ml, "image %d: the URL must be a string", idx);
        else if (starts(url, "data:")) ok = from_data_url(s, url, idx, &bytes, &n, msg, ml);
        else if (starts(url, "http://") || starts(url, "https://"))
            snprintf(msg, ml, "image %d: remote image URLs are not fetched; send the image as a data: URL (or a file under --media-path)", idx);
        else if (starts(url, "file://")) ok = from_file(s, url + 7, idx, &bytes, &n, msg, ml);
        else if (strstr(url, "://")) snprintf(msg, ml, "image %d: unsupported URL scheme in '%.40s'", idx, url);
        else ok = from_file(s, url, idx, &bytes, &n, msg, ml);
        if (!ok) {
            mxl_srv_images_free(out);
            return false;
        }
        char name[32];
        snprintf(name, sizeof name, "image %d", idx);
        mxl_image im = {0, 0, NULL};
        mxl_error err;
        mxl_status st = mxl_image_decode(bytes, n, name, &lim, &im, &err);
        mxl_free(bytes);
        if (!st && (st = mxl_vlm_prepare(v, &im, &out->in[out->n], &err))) mxl_error_prefix(&err, "%s: ", name);
        mxl_image_free(&im);
        if (st) {
            snprintf(msg, ml, "%s", err.msg);
            mxl_srv_images_free(out);
            return false;
        }
        out->n++;
    }
    return true;
}
