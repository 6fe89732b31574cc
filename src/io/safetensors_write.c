/* safetensors_write.c - streaming safetensors writer (see safetensors_write.h). The header JSON is
 * built with jansson (keys in declaration order: it preserves insertion order when dumping with
 * JSON_PRESERVE_ORDER). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors_write.h"

#include "core/alloc.h"
#include "io/json_write.h"

struct mxl_st_writer {
    FILE *f;
    char *path;
    mxl_st_out *t;
    uint64_t *bytes;
    size_t n, next;  /* tensors declared; the one being written */
    uint64_t done;    /* its bytes written so far */
};

uint64_t mxl_st_out_bytes(const mxl_st_out *t) {
    const mxl_dtype_info *di = mxl_dtype_get_info(t->dtype);
    if (!di || di->block_elems != 1 || t->ndim < 0 || t->ndim > MXL_MAX_DIMS) return 0;
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0 || mxl_mul_u64(n, (uint64_t)t->shape[i], &n)) return 0;
    }
    uint64_t b;
    return mxl_mul_u64(n, di->block_bytes, &b) ? 0 : b;
}

static void writer_free(mxl_st_writer *w) {
    if (!w) return;
    mxl_free(w->path);
    mxl_free(w->t);
    mxl_free(w->bytes);
    mxl_free(w);
}

mxl_status mxl_st_writer_create(const char *path, const mxl_st_out *tensors, size_t n, const char *fmt,
                                mxl_st_writer **out, mxl_error *err) {
    *out = NULL;
    mxl_st_writer *w = mxl_calloc(1, sizeof *w);
    json_t *hdr = json_object(), *meta = json_object();
    char *text = NULL;
    mxl_status st = MXL_ERR_NOMEM;
    if (!w || !hdr || !meta || !(w->path = mxl_strdup(path)) || !(w->t = mxl_malloc((n ? n : 1) * sizeof *w->t)) ||
        !(w->bytes = mxl_malloc((n ? n : 1) * sizeof *w->bytes))) {
        mxl_error_set(err, st, "%s: out of memory", path);
        goto fail;
    }
    memcpy(w->t, tensors, n * sizeof *tensors);
    w->n = n;
    json_object_set_new(meta, "format", json_string(fmt ? fmt : "pt"));
    json_object_set_new(hdr, "__metadata__", meta);
    meta = NULL;
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const mxl_st_out *t = &tensors[i];
        uint64_t b = mxl_st_out_bytes(t);
        const char *dn = mxl_dtype_name(t->dtype);
        if ((!b && t->ndim > 0 && t->shape[0] != 0) || !dn) {
            st = mxl_error_set(err, MXL_ERR_ARG, "%s: tensor %s has no size in safetensors", path, t->name);
            goto fail;
        }
        if (json_object_get(hdr, t->name)) {
            st = mxl_error_set(err, MXL_ERR_ARG, "%s: tensor %s declared twice", path, t->name);
            goto fail;
        }
        json_t *shape = json_array(), *e = json_object();
        for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        json_object_set_new(e, "dtype", json_string(dn));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets", json_pack("[II]", (json_int_t)off, (json_int_t)(off + b)));
        json_object_set_new(hdr, t->name, e);
        w->bytes[i] = b;
        off += b;
    }
    text = mxl_json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text) {
        st = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    size_t hl = strlen(text), padded = (hl + 7) & ~(size_t)7;
    w->f = fopen(path, "wb");
    if (!w->f) {
        st = mxl_error_set(err, MXL_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        goto fail;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    bool ok = fwrite(len8, 1, 8, w->f) == 8 && fwrite(text, 1, hl, w->f) == hl;
    for (size_t i = hl; ok && i < padded; i++) ok = fputc(' ', w->f) != EOF;
    if (!ok) {
        st = mxl_error_set(err, MXL_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        goto fail;
    }
    mxl_free(text);
    json_decref(hdr);
    *out = w;
    return MXL_OK;
fail:
    mxl_free(text);
    json_decref(hdr);
    json_decref(meta);
    if (w && w->f) {
        fclose(w->f);
        remove(path);
    }
    writer_free(w);
    return st;
}

mxl_status mxl_st_writer_put(mxl_st_writer *w, const void *data, uint64_t nbytes, mxl_error *err) {
    while (w->next < w->n && w->done == w->bytes[w->next] && nbytes) w->next++, w->done = 0;
    if (w->next >= w->n) return mxl_error_set(err, MXL_ERR_ARG, "%s: more tensor bytes written than declared", w->path);
    if (nbytes > w->bytes[w->next] - w->done)
        return mxl_error_set(err, MXL_ERR_ARG, "%s: tensor %s: more than its %llu bytes given", w->path, w->t[w->next].name,
                             (unsigned long long)w->bytes[w->next]);
    if (nbytes && fwrite(data, 1, nbytes, w->f) != nbytes)
        return mxl_error_set(err, MXL_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    w->done += nbytes;
    return MXL_OK;
}

mxl_status mxl_st_writer_finish(mxl_st_writer *w, mxl_error *err) {
    mxl_status st = MXL_OK;
    while (w->next < w->n && w->done == w->bytes[w->next]) w->next++, w->done = 0;
    if (w->next != w->n) st = mxl_error_set(err, MXL_ERR_ARG, "%s: %zu of %zu tensors written", w->path, w->next, w->n);
    if (fclose(w->f) != 0 && st == MXL_OK) st = mxl_error_set(err, MXL_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    w->f = NULL;
    if (st != MXL_OK) remove(w->path);
    writer_free(w);
    return st;
}

void mxl_st_writer_abort(mxl_st_writer *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    remove(w->path);
    writer_free(w);
}
