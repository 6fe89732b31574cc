/* safetensors.c - safetensors file and model-directory reader (see safetensors.h).
 *
 * Validation of one file, in order; every failure is one line naming the file (and tensor/key):
 *   1. the file has at least 8 bytes; N (LE u64) <= 100,000,000 and N <= file size - 8;
 *   2. the N header bytes are UTF-8 JSON (jansson checks UTF-8), trailing whitespace allowed,
 *      duplicate keys refused (JSON_REJECT_DUPLICATES), and the top level is an object;
 *   3. `__metadata__` is an object whose values are all strings (or null, which the reference
 *      crate reads as "no metadata" through its Option<HashMap<String, String>>);
 *   4. every other key is an object with "dtype" (a dtype we know, else refused by name),
 *      "shape" (array of <= MXL_MAX_DIMS non-negative integers), "data_offsets" (exactly two
 *      non-negative integers, begin <= end <= data section size); other fields are ignored as
 *      serde does; (end - begin) == numel * dtype size, products overflow-checked;
 *   5. coverage, exactly as huggingface/safetensors `safetensors/src/tensor.rs` enforces it:
 *      `TryFrom<HashMetadata>` sorts the tensors by data_offsets (begin, then end) and
 *      `Metadata::validate` requires each tensor to start where the previous one ended (the
 *      first at 0), and `read_metadata` requires the last end to be the end of the buffer
 *      (MetadataIncompleteBuffer). So tensors tile the data section: no overlap, no hole, no
 *      trailing bytes. Empty tensors (begin == end) may sit at any tensor boundary, since they
 *      sort next to the tensor that starts there; we accept exactly the same layouts.
 * Where we are stricter than the crate: duplicate keys (serde keeps the last), more than
 * MXL_MAX_DIMS dims, and dtypes we do not run (F4, F6_*, F8_E8M0, FNUZ, C64) are refused. */
#include "io/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "io/json_read.h"
#include "io/mapped_file.h"

/* ---- name -> entry hash table (open addressing; slots hold index + 1, 0 = empty) ---------- */

typedef struct name_index {
    uint32_t *slots;
    size_t mask; /* capacity - 1; capacity is a power of two >= 2 * count */
} name_index;

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64 */
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 1099511628211ull;
    }
    return h;
}

/* Entries are reached either through a flat array (one file) or an array of pointers (model). */
typedef struct entry_list {
    const mxl_st_entry *flat;
    const mxl_st_entry *const *ptrs;
    size_t n;
} entry_list;

static const mxl_st_entry *list_get(entry_list l, size_t i) {
    return l.flat ? &l.flat[i] : l.ptrs[i];
}

static void index_free(name_index *ix) {
    mxl_free(ix->slots);
    ix->slots = NULL;
    ix->mask = 0;
}

/* Builds the index; returns -1 on allocation failure, else the position of the first entry
 * whose name repeats an earlier one (its earlier twin in *dup_of), or (size_t)n when none. */
static int index_build(name_index *ix, entry_list l, size_t *dup_at, size_t *dup_of) {
    size_t cap = 8;
    while (cap < l.n * 2) cap *= 2;
    ix->slots = mxl_calloc(cap, sizeof *ix->slots);
    if (!ix->slots) return -1;
    ix->mask = cap - 1;
    *dup_at = l.n;
    for (size_t i = 0; i < l.n; i++) {
        const char *name = list_get(l, i)->name;
        size_t s = (size_t)hash_name(name) & ix->mask;
        while (ix->slots[s]) {
            size_t j = ix->slots[s] - 1;
            if (strcmp(list_get(l, j)->name, name) == 0) {
                *dup_at = i;
                *dup_of = j;
                return 0;
            }
            s = (s + 1) & ix->mask;
        }
        ix->slots[s] = (uint32_t)(i + 1);
    }
    return 0;
}

static const mxl_st_entry *index_find(const name_index *ix, entry_list l, const char *name) {
    if (!ix->slots || !name) return NULL;
    size_t s = (size_t)hash_name(name) & ix->mask;
    while (ix->slots[s]) {
        const mxl_st_entry *e = list_get(l, ix->slots[s] - 1);
        if (strcmp(e->name, name) == 0) return e;
        s = (s + 1) & ix->mask;
    }
    return NULL;
}

/* Copies a name from untrusted input for an error message: printable, short, one line. */
static const char *clean(const char *s, char *buf, size_t cap) {
    size_t o = 0;
    if (!s) s = "(null)";
    for (; *s && o + 4 < cap; s++) buf[o++] = ((uint8_t)*s < 0x20 || *s == 0x7f) ? '?' : *s;
    if (*s) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}
#define NAME_BUF 160

/* ---- single file -------------------------------------------------------------------------- */

struct mxl_safetensors {
    char *path;
    mxl_mapped_file map; /* zeroed when the buffer is borrowed */
    const uint8_t *base;
    uint64_t size;
    uint64_t header_len;
    mxl_st_entry *entries;
    size_t n;
    const char **meta_keys;
    const char **meta_vals;
    size_t n_meta;
    char *strings; /* names, metadata keys and values, NUL-terminated, back to back */
    uint64_t total;
    name_index ix;
};

static entry_list file_list(const mxl_safetensors *st) {
    return (entry_list){st->entries, NULL, st->n};
}

static uint64_t read_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int entry_cmp(const void *a, const void *b) {
    const mxl_st_entry *x = a, *y = b;
    if (x->data_begin != y->data_begin) return x->data_begin < y->data_begin ? -1 : 1;
    if (x->data_end != y->data_end) return x->data_end < y->data_end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Reads a JSON value that must be a non-negative integer. */
static int json_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v)) return 1;
    json_int_t i = json_integer_value(v);
    if (i < 0) return 1;
    *out = (uint64_t)i;
    return 0;
}

/* Fills one entry from the tensor object `v` named `key`; offsets are checked against the data
 * section size `data_size`. Coverage is checked later, once all entries are known. */
static mxl_status parse_tensor(const mxl_safetensors *st, const char *key, const json_t *v,
                               uint64_t data_size, mxl_st_entry *e, mxl_error *err) {
    char nb[NAME_BUF], db[NAME_BUF];
    const char *p = st->path;
    if (!json_is_object(v))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor '%s': header entry is not an object",
                             p, clean(key, nb, sizeof nb));

    const json_t *jd = json_object_get(v, "dtype");
    if (!json_is_string(jd))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor '%s': missing or non-string \"dtype\"",
                             p, clean(key, nb, sizeof nb));
    e->tensor.dtype = mxl_dtype_from_safetensors(json_string_value(jd));
    if (e->tensor.dtype == MXL_DTYPE_INVALID)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: tensor '%s': unsupported dtype '%s'", p,
                             clean(key, nb, sizeof nb), clean(json_string_value(jd), db, sizeof db));

    const json_t *js = json_object_get(v, "shape");
    if (!json_is_array(js))
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor '%s': missing or non-array \"shape\"",
                             p, clean(key, nb, sizeof nb));
    size_t nd = json_array_size(js);
    if (nd > MXL_MAX_DIMS)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED,
                             "%s: tensor '%s': shape has %zu dimensions, more than %d", p,
                             clean(key, nb, sizeof nb), nd, MXL_MAX_DIMS);
    e->tensor.ndim = (int)nd;
    for (size_t d = 0; d < nd; d++) {
        uint64_t dim;
        if (json_u64(json_array_get(js, d), &dim))
            return mxl_error_set(err, MXL_ERR_FORMAT,
                                 "%s: tensor '%s': shape[%zu] is not a non-negative integer", p,
                                 clean(key, nb, sizeof nb), d);
        e->tensor.shape[d] = (int64_t)dim; /* < 2^63: it came from a non-negative json_int_t */
    }

    const json_t *jo = json_object_get(v, "data_offsets");
    uint64_t b, en;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || json_u64(json_array_get(jo, 0), &b) ||
        json_u64(json_array_get(jo, 1), &en))
        return mxl_error_set(err, MXL_ERR_FORMAT,
                             "%s: tensor '%s': \"data_offsets\" is not [begin, end] of two "
                             "non-negative integers",
                             p, clean(key, nb, sizeof nb));
    if (b > en)
        return mxl_error_set(err, MXL_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets begin %llu is after end %llu", p,
                             clean(key, nb, sizeof nb), (unsigned long long)b,
                             (unsigned long long)en);
    if (en > data_size)
        return mxl_error_set(err, MXL_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets end %llu is past the data section "
                             "(%llu bytes)",
                             p, clean(key, nb, sizeof nb), (unsigned long long)en,
                             (unsigned long long)data_size);

    uint64_t numel, need;
    if (mxl_tensor_shape_numel(e->tensor.ndim, e->tensor.shape, &numel) ||
        mxl_dtype_row_bytes(e->tensor.dtype, numel, &need))
        return mxl_error_set(err, MXL_ERR_OVERFLOW,
                             "%s: tensor '%s': byte size of the shape overflows 64 bits", p,
                             clean(key, nb, sizeof nb));
    if (en - b != need) {
        char sb[96];
        mxl_tensor_shape_str(&e->tensor, sb, sizeof sb);
        return mxl_error_set(err, MXL_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but %s %s "
                             "needs %llu",
                             p, clean(key, nb, sizeof nb), (unsigned long long)b,
                             (unsigned long long)en, (unsigned long long)(en - b),
                             mxl_dtype_name(e->tensor.dtype), sb, (unsigned long long)need);
    }
    e->data_begin = b;
    e->data_end = en;
    e->tensor.nbytes = need;
    e->file_offset = 8 + st->header_len + b; /* <= file size: checked above */
    e->tensor.data = st->base + e->file_offset;
    e->file = st;
    return MXL_OK;
}

/* Appends a NUL-terminated copy of s to the string blob at *off and returns it. */
static const char *blob_put(char *blob, size_t *off, const char *s) {
    size_t len = strlen(s) + 1;
    char *d = blob + *off;
    memcpy(d, s, len);
    *off += len;
    return d;
}

static mxl_status parse_header(mxl_safetensors *st, mxl_error *err) {
    const char *p = st->path;
    char nb[NAME_BUF], kb[NAME_BUF];
    if (st->size < 8)
        return mxl_error_set(err, MXL_ERR_FORMAT,
                             "%s: file is %llu bytes, too short for the 8-byte header length", p,
                             (unsigned long long)st->size);
    uint64_t n = read_le64(st->base);
    if (n > MXL_SAFETENSORS_MAX_HEADER)
        return mxl_error_set(err, MXL_ERR_FORMAT,
                             "%s: header length %llu is above the %llu-byte limit", p,
                             (unsigned long long)n, MXL_SAFETENSORS_MAX_HEADER);
    if (n > st->size - 8)
        return mxl_error_set(err, MXL_ERR_FORMAT,
                             "%s: header length %llu runs past the end of the file (%llu bytes)",
                             p, (unsigned long long)n, (unsigned long long)st->size);
    st->header_len = n;
    uint64_t data_size = st->size - 8 - n;

    json_error_t jerr;
    json_t *root = mxl_json_loadb((const char *)st->base + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root && mxl_json_error_is_oom(&jerr)) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: header: out of memory", p);
    if (!root)
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: header is not valid JSON: %s (byte %d)", p,
                             clean(jerr.text, nb, sizeof nb), jerr.position);
    mxl_status rc = MXL_OK;
    if (!json_is_object(root)) {
        rc = mxl_error_set(err, MXL_ERR_FORMAT, "%s: header is a JSON %s, not an object", p,
                           json_is_array(root) ? "array" : "scalar");
        goto done;
    }

    /* Size the string blob and the arrays. */
    const char *key;
    json_t *val;
    const json_t *meta = NULL;
    size_t n_tensors = 0, blob = 0;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            meta = val;
            continue;
        }
        n_tensors++;
        blob += strlen(key) + 1;
    }
    if (meta && !json_is_object(meta) && !json_is_null(meta)) {
        rc = mxl_error_set(err, MXL_ERR_FORMAT, "%s: __metadata__ is not an object", p);
        goto done;
    }
    size_t n_meta = json_is_object(meta) ? json_object_size(meta) : 0;
    if (n_meta) {
        const char *mk;
        json_t *mv;
        json_object_foreach((json_t *)meta, mk, mv) {
            if (!json_is_string(mv)) {
                rc = mxl_error_set(err, MXL_ERR_FORMAT,
                                   "%s: __metadata__ key '%s' has a non-string value", p,
                                   clean(mk, kb, sizeof kb));
                goto done;
            }
            blob += strlen(mk) + 1 + strlen(json_string_value(mv)) + 1;
        }
    }
    if (n_tensors > UINT32_MAX - 1) {
        rc = mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: too many tensors (%zu)", p, n_tensors);
        goto done;
    }
    st->entries = mxl_calloc(n_tensors ? n_tensors : 1, sizeof *st->entries);
    st->meta_keys = mxl_calloc(n_meta ? n_meta : 1, sizeof *st->meta_keys);
    st->meta_vals = mxl_calloc(n_meta ? n_meta : 1, sizeof *st->meta_vals);
    st->strings = mxl_malloc(blob ? blob : 1);
    if (!st->entries || !st->meta_keys || !st->meta_vals || !st->strings) {
        rc = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory reading the header", p);
        goto done;
    }

    size_t off = 0;
    if (n_meta) {
        const char *mk;
        json_t *mv;
        json_object_foreach((json_t *)meta, mk, mv) {
            st->meta_keys[st->n_meta] = blob_put(st->strings, &off, mk);
            st->meta_vals[st->n_meta] = blob_put(st->strings, &off, json_string_value(mv));
            st->n_meta++;
        }
    }
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) continue;
        mxl_st_entry *e = &st->entries[st->n];
        rc = parse_tensor(st, key, val, data_size, e, err);
        if (rc != MXL_OK) goto done;
        e->name = blob_put(st->strings, &off, key);
        st->n++;
    }

    /* Coverage (see the top comment): sorted by (begin, end), each starts where the last ended. */
    qsort(st->entries, st->n, sizeof *st->entries, entry_cmp);
    uint64_t at = 0;
    for (size_t i = 0; i < st->n; i++) {
        const mxl_st_entry *e = &st->entries[i];
        if (e->data_begin < at) {
            rc = mxl_error_set(err, MXL_ERR_FORMAT,
                               "%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' "
                               "which ends at %llu",
                               p, clean(e->name, nb, sizeof nb), (unsigned long long)e->data_begin,
                               (unsigned long long)e->data_end,
                               clean(st->entries[i - 1].name, kb, sizeof kb),
                               (unsigned long long)at);
            goto done;
        }
        if (e->data_begin > at) {
            rc = mxl_error_set(err, MXL_ERR_FORMAT,
                               "%s: tensor '%s': data section bytes [%llu, %llu) before it belong "
                               "to no tensor",
                               p, clean(e->name, nb, sizeof nb), (unsigned long long)at,
                               (unsigned long long)e->data_begin);
            goto done;
        }
        at = e->data_end;
        st->total += e->tensor.nbytes; /* no overflow: the tensors tile data_size */
    }
    if (at != data_size) {
        rc = mxl_error_set(err, MXL_ERR_FORMAT,
                           "%s: data section has %llu bytes but the tensors cover only %llu", p,
                           (unsigned long long)data_size, (unsigned long long)at);
        goto done;
    }

    size_t dup_at, dup_of;
    if (index_build(&st->ix, file_list(st), &dup_at, &dup_of) != 0) {
        rc = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory indexing tensors", p);
        goto done;
    }
    /* Cannot happen after JSON_REJECT_DUPLICATES, but the lookup table must not hide one. */
    if (dup_at != st->n)
        rc = mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor '%s' appears twice", p,
                           clean(st->entries[dup_at].name, nb, sizeof nb));
done:
    json_decref(root);
    return rc;
}

static mxl_status open_common(mxl_safetensors *st, mxl_safetensors **out, mxl_error *err) {
    mxl_status rc = parse_header(st, err);
    if (rc != MXL_OK) {
        mxl_safetensors_close(st);
        return rc;
    }
    *out = st;
    return MXL_OK;
}

mxl_status mxl_safetensors_open(const char *path, mxl_safetensors **out, mxl_error *err) {
    *out = NULL;
    mxl_safetensors *st = mxl_calloc(1, sizeof *st);
    if (!st) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
    mxl_status rc = mxl_mapped_file_open(path, &st->map, err);
    if (rc != MXL_OK) {
        mxl_free(st);
        return rc;
    }
    st->path = st->map.path;
    st->base = st->map.data;
    st->size = st->map.size;
    return open_common(st, out, err);
}

mxl_status mxl_safetensors_open_buffer(const uint8_t *data, uint64_t size, const char *name,
                                       mxl_safetensors **out, mxl_error *err) {
    *out = NULL;
    if (!name) name = "<buffer>";
    mxl_safetensors *st = mxl_calloc(1, sizeof *st);
    if (!st || !(st->path = mxl_strdup(name))) {
        mxl_free(st);
        return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", name);
    }
    st->base = data;
    st->size = data ? size : 0;
    return open_common(st, out, err);
}

void mxl_safetensors_close(mxl_safetensors *st) {
    if (!st) return;
    if (st->map.path) mxl_mapped_file_close(&st->map); /* frees st->path too */
    else mxl_free(st->path);
    mxl_free(st->entries);
    mxl_free(st->meta_keys);
    mxl_free(st->meta_vals);
    mxl_free(st->strings);
    index_free(&st->ix);
    mxl_free(st);
}

const char *mxl_safetensors_path(const mxl_safetensors *st) { return st->path; }
size_t mxl_safetensors_count(const mxl_safetensors *st) { return st->n; }
uint64_t mxl_safetensors_total_bytes(const mxl_safetensors *st) { return st->total; }
uint64_t mxl_safetensors_header_len(const mxl_safetensors *st) { return st->header_len; }
uint64_t mxl_safetensors_file_size(const mxl_safetensors *st) { return st->size; }

const mxl_st_entry *mxl_safetensors_at(const mxl_safetensors *st, size_t i) {
    return i < st->n ? &st->entries[i] : NULL;
}

const mxl_st_entry *mxl_safetensors_find(const mxl_safetensors *st, const char *name) {
    return index_find(&st->ix, file_list(st), name);
}

size_t mxl_safetensors_metadata_count(const mxl_safetensors *st) { return st->n_meta; }

int mxl_safetensors_metadata_at(const mxl_safetensors *st, size_t i, const char **key,
                                const char **value) {
    if (i >= st->n_meta) return 1;
    *key = st->meta_keys[i];
    *value = st->meta_vals[i];
    return 0;
}

const char *mxl_safetensors_metadata_get(const mxl_safetensors *st, const char *key) {
    if (!key) return NULL;
    for (size_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_vals[i];
    return NULL;
}

/* ---- model directory ---------------------------------------------------------------------- */

struct mxl_st_model {
    char *path;
    mxl_safetensors **files;
    size_t n_files;
    const mxl_st_entry **tensors;
    size_t n;
    uint64_t total;
    name_index ix;
};

static entry_list model_list(const mxl_st_model *m) {
    return (entry_list){NULL, m->tensors, m->n};
}

static char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *s = mxl_malloc(a + b + 2);
    if (!s) return NULL;
    memcpy(s, dir, a);
    size_t o = a;
    if (a && dir[a - 1] != '/') s[o++] = '/';
    memcpy(s + o, name, b + 1);
    return s;
}

static int is_regular(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int str_ptr_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Opens `n` files named (plain names) inside m->path, in the given (sorted) order. */
static mxl_status open_files(mxl_st_model *m, const char *const *names, size_t n, mxl_error *err) {
    m->files = mxl_calloc(n ? n : 1, sizeof *m->files);
    if (!m->files) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", m->path);
    for (size_t i = 0; i < n; i++) {
        char *fp = path_join(m->path, names[i]);
        if (!fp) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", m->path);
        mxl_status rc = mxl_safetensors_open(fp, &m->files[i], err);
        mxl_free(fp);
        if (rc != MXL_OK) return rc;
        m->n_files++;
    }
    return MXL_OK;
}

/* Flattens every file's tensors into one name-indexed table; a name in two files is an error. */
static mxl_status build_table(mxl_st_model *m, mxl_error *err) {
    size_t n = 0;
    for (size_t f = 0; f < m->n_files; f++) n += mxl_safetensors_count(m->files[f]);
    if (n > UINT32_MAX - 1)
        return mxl_error_set(err, MXL_ERR_UNSUPPORTED, "%s: too many tensors (%zu)", m->path, n);
    m->tensors = mxl_calloc(n ? n : 1, sizeof *m->tensors);
    if (!m->tensors) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", m->path);
    for (size_t f = 0; f < m->n_files; f++)
        for (size_t i = 0; i < mxl_safetensors_count(m->files[f]); i++) {
            const mxl_st_entry *e = mxl_safetensors_at(m->files[f], i);
            m->tensors[m->n++] = e;
            m->total += e->tensor.nbytes; /* each file's total fits its size; sum of sizes too */
        }
    size_t dup_at, dup_of;
    if (index_build(&m->ix, model_list(m), &dup_at, &dup_of) != 0)
        return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", m->path);
    if (dup_at != m->n) {
        char nb[NAME_BUF];
        return mxl_error_set(err, MXL_ERR_FORMAT, "%s: tensor '%s' is in both %s and %s", m->path,
                             clean(m->tensors[dup_at]->name, nb, sizeof nb),
                             m->tensors[dup_of]->file->path, m->tensors[dup_at]->file->path);
    }
    return MXL_OK;
}

/* A shard name from weight_map must be a plain file name inside the directory. */
static int shard_name_ok(const char *s) {
    return s[0] != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static mxl_status open_index(mxl_st_model *m, const char *index_path, mxl_error *err) {
    char nb[NAME_BUF], sb[NAME_BUF];
    json_t *root;
    mxl_status ls = mxl_json_load_file_py(index_path, 256u << 20, &root, err);
    if (ls != MXL_OK) return ls;
    mxl_status rc = MXL_OK;
    const char **names = NULL;
    const json_t *wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    if (!json_is_object(wm)) {
        rc = mxl_error_set(err, MXL_ERR_FORMAT, "%s: no \"weight_map\" object", index_path);
        goto done;
    }
    size_t n_map = json_object_size(wm);
    if (n_map == 0) {
        rc = mxl_error_set(err, MXL_ERR_FORMAT, "%s: \"weight_map\" is empty", index_path);
        goto done;
    }
    names = mxl_calloc(n_map, sizeof *names);
    if (!names) {
        rc = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", index_path);
        goto done;
    }
    const char *key;
    json_t *val;
    size_t k = 0;
    json_object_foreach((json_t *)wm, key, val) {
        if (!json_is_string(val)) {
            rc = mxl_error_set(err, MXL_ERR_FORMAT,
                               "%s: weight_map tensor '%s': shard is not a string", index_path,
                               clean(key, nb, sizeof nb));
            goto done;
        }
        const char *shard = json_string_value(val);
        if (!shard_name_ok(shard)) {
            rc = mxl_error_set(err, MXL_ERR_FORMAT,
                               "%s: weight_map tensor '%s': shard '%s' is not a plain file name "
                               "inside the directory",
                               index_path, clean(key, nb, sizeof nb), clean(shard, sb, sizeof sb));
            goto done;
        }
        names[k++] = shard;
    }
    /* Each shard once, sorted by name. */
    qsort(names, k, sizeof *names, str_ptr_cmp);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || strcmp(names[u - 1], names[i]) != 0) names[u++] = names[i];
    rc = open_files(m, names, u, err);
    if (rc != MXL_OK) {
        mxl_error_prefix(err, "%s: shard: ", index_path);
        goto done;
    }
    /* Every mapped tensor must be in the shard the index names. */
    json_object_foreach((json_t *)wm, key, val) {
        const char *shard = json_string_value(val);
        const char **hit = bsearch(&shard, names, u, sizeof *names, str_ptr_cmp);
        MXL_ASSERT(hit != NULL);
        if (!mxl_safetensors_find(m->files[hit - names], key)) {
            rc = mxl_error_set(err, MXL_ERR_FORMAT,
                               "%s: tensor '%s' is mapped to %s, which does not contain it",
                               index_path, clean(key, nb, sizeof nb), clean(shard, sb, sizeof sb));
            goto done;
        }
    }
done:
    mxl_free(names);
    json_decref(root);
    return rc;
}

static mxl_status scan_dir(mxl_st_model *m, mxl_error *err) {
    DIR *d = opendir(m->path);
    if (!d)
        return mxl_error_set(err, MXL_ERR_IO, "%s: cannot list directory: %s", m->path,
                             strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    mxl_status rc = MXL_OK;
    const char *suffix = ".safetensors";
    size_t sl = strlen(suffix);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len <= sl || strcmp(de->d_name + len - sl, suffix) != 0)
            continue;
        char *full = path_join(m->path, de->d_name);
        int reg = full && is_regular(full);
        mxl_free(full);
        if (!reg) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            char **nn = mxl_realloc(names, nc * sizeof *nn);
            if (!nn) {
                rc = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", m->path);
                goto done;
            }
            names = nn;
            cap = nc;
        }
        if (!(names[n] = mxl_strdup(de->d_name))) {
            rc = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", m->path);
            goto done;
        }
        n++;
    }
    if (n == 0) {
        rc = mxl_error_set(err, MXL_ERR_NOT_FOUND,
                           "%s: no safetensors weights (no model.safetensors.index.json, "
                           "model.safetensors or *.safetensors)",
                           m->path);
        goto done;
    }
    qsort(names, n, sizeof *names, str_ptr_cmp);
    rc = open_files(m, (const char *const *)names, n, err);
done:
    closedir(d);
    for (size_t i = 0; i < n; i++) mxl_free(names[i]);
    mxl_free(names);
    return rc;
}

mxl_status mxl_st_model_open(const char *path, mxl_st_model **out, mxl_error *err) {
    *out = NULL;
    mxl_st_model *m = mxl_calloc(1, sizeof *m);
    if (!m || !(m->path = mxl_strdup(path))) {
        mxl_free(m);
        return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
    }
    mxl_status rc;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        rc = mxl_error_set(err, errno == ENOENT ? MXL_ERR_NOT_FOUND : MXL_ERR_IO, "%s: %s", path,
                           strerror(errno));
    } else if (S_ISREG(sb.st_mode)) {
        m->files = mxl_calloc(1, sizeof *m->files);
        rc = m->files ? mxl_safetensors_open(path, &m->files[0], err)
                      : mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
        if (rc == MXL_OK) m->n_files = 1;
    } else if (!S_ISDIR(sb.st_mode)) {
        rc = mxl_error_set(err, MXL_ERR_ARG, "%s: not a directory or a regular file", path);
    } else {
        char *index = path_join(path, "model.safetensors.index.json");
        char *single = path_join(path, "model.safetensors");
        if (!index || !single) rc = mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
        else if (is_regular(index)) rc = open_index(m, index, err);
        else if (is_regular(single)) {
            const char *one = "model.safetensors";
            rc = open_files(m, &one, 1, err);
        } else rc = scan_dir(m, err);
        mxl_free(index);
        mxl_free(single);
    }
    if (rc == MXL_OK) rc = build_table(m, err);
    if (rc != MXL_OK) {
        mxl_st_model_close(m);
        return rc;
    }
    *out = m;
    return MXL_OK;
}

void mxl_st_model_release_pages(const mxl_st_model *m, const void *p, uint64_t n) {
    for (size_t i = 0; i < m->n_files; i++)
        if (m->files[i]->map.data) mxl_mapped_file_release(&m->files[i]->map, p, n);
}

void mxl_st_model_close(mxl_st_model *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_files; i++) mxl_safetensors_close(m->files[i]);
    mxl_free(m->files);
    mxl_free(m->tensors);
    index_free(&m->ix);
    mxl_free(m->path);
    mxl_free(m);
}

size_t mxl_st_model_tensor_count(const mxl_st_model *m) { return m->n; }
uint64_t mxl_st_model_total_bytes(const mxl_st_model *m) { return m->total; }
size_t mxl_st_model_file_count(const mxl_st_model *m) { return m->n_files; }
const char *mxl_st_model_path(const mxl_st_model *m) { return m->path; }

const mxl_st_entry *mxl_st_model_tensor_at(const mxl_st_model *m, size_t i) {
    return i < m->n ? m->tensors[i] : NULL;
}

const mxl_st_entry *mxl_st_model_find(const mxl_st_model *m, const char *name) {
    return index_find(&m->ix, model_list(m), name);
}

const mxl_safetensors *mxl_st_model_file_at(const mxl_st_model *m, size_t i) {
    return i < m->n_files ? m->files[i] : NULL;
}

const char *mxl_st_model_metadata_get(const mxl_st_model *m, const char *key) {
    for (size_t i = 0; i < m->n_files; i++) {
        const char *v = mxl_safetensors_metadata_get(m->files[i], key);
        if (v) return v;
    }
    return NULL;
}
