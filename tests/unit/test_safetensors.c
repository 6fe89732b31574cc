/* test_safetensors.c - tests for src/io/safetensors.c: a small writer builds files for every
 * dtype, sharded and unsharded model directories, and hostile files (truncations, bad headers,
 * bad offsets, overlaps, holes, duplicates, bad indexes); a real checkpoint (all-MiniLM-L6-v2)
 * is checked against tests/fixtures/safetensors_real_models.json, which the PyPI `safetensors`
 * package produced (tests/fixtures/gen_safetensors_fixtures.py). */
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "io/safetensors.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------------------------- */

/* CRC-32 (IEEE 802.3, reflected, as zlib.crc32) for comparing tensor bytes with the fixture. */
static uint32_t crc32_ieee(const uint8_t *p, uint64_t n) {
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    uint32_t c = 0xFFFFFFFFu;
    for (uint64_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* Element sizes from the safetensors format description (not from the library's table). */
static uint64_t st_dtype_size(const char *dt) {
    static const struct { const char *n; uint64_t s; } sz[] = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1},
        {"I16", 2},  {"U16", 2}, {"F16", 2},  {"BF16", 2},    {"I32", 4},
        {"U32", 4},  {"F32", 4}, {"F64", 8},  {"I64", 8},     {"U64", 8},
    };
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
        if (strcmp(sz[i].n, dt) == 0) return sz[i].s;
    return 0;
}

static uint8_t pattern_byte(size_t tensor, uint64_t k) { return (uint8_t)(tensor * 31 + k * 7 + 1); }

/* A file: 8-byte LE length, `header` padded with spaces to a multiple of 8 (as the reference
 * writer does), then `data_len` bytes (data, or a pattern when data is NULL). When `declared`
 * is not UINT64_MAX it is written as N instead of the true header length. malloc'd, exact size,
 * so ASan catches any read past the end. */
static uint8_t *make_file(const char *header, uint64_t declared, const uint8_t *data,
                          size_t data_len, size_t *out_len) {
    size_t hl = strlen(header), padded = (hl + 7) / 8 * 8;
    size_t len = 8 + padded + data_len;
    uint8_t *f = mxl_malloc(len);
    uint64_t n = declared == UINT64_MAX ? padded : declared;
    for (int i = 0; i < 8; i++) f[i] = (uint8_t)(n >> (8 * i));
    memcpy(f + 8, header, hl);
    memset(f + 8 + hl, ' ', padded - hl);
    for (size_t k = 0; k < data_len; k++) f[8 + padded + k] = data ? data[k] : pattern_byte(0, k);
    *out_len = len;
    return f;
}

typedef struct tspec {
    const char *name;
    const char *dtype;
    int ndim;
    int64_t shape[MXL_MAX_DIMS];
} tspec;

static uint64_t spec_bytes(const tspec *t) {
    uint64_t n = st_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
    return n;
}

/* Writes tensors back to back in the given order, tensor i filled with pattern_byte(i, k).
 * `meta` is the JSON text of __metadata__ or NULL. begins[i] gets each tensor's data offset. */
static uint8_t *write_specs(const tspec *t, size_t n, const char *meta, size_t *out_len,
                            uint64_t *begins) {
    char *hdr = mxl_malloc(65536);
    size_t o = 0;
    uint64_t off = 0;
    o += (size_t)snprintf(hdr + o, 65536 - o, "{");
    if (meta) o += (size_t)snprintf(hdr + o, 65536 - o, "\"__metadata__\":%s", meta);
    for (size_t i = 0; i < n; i++) {
        uint64_t b = spec_bytes(&t[i]);
        o += (size_t)snprintf(hdr + o, 65536 - o, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                              (meta || i) ? "," : "", t[i].name, t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++)
            o += (size_t)snprintf(hdr + o, 65536 - o, d ? ",%lld" : "%lld",
                                  (long long)t[i].shape[d]);
        o += (size_t)snprintf(hdr + o, 65536 - o, "],\"data_offsets\":[%llu,%llu]}",
                              (unsigned long long)off, (unsigned long long)(off + b));
        if (begins) begins[i] = off;
        off += b;
    }
    snprintf(hdr + o, 65536 - o, "}");
    uint8_t *data = mxl_malloc(off ? off : 1);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++)
        for (uint64_t k = 0; k < spec_bytes(&t[i]); k++) data[at++] = pattern_byte(i, k);
    uint8_t *f = make_file(hdr, UINT64_MAX, data, (size_t)off, out_len);
    mxl_free(data);
    mxl_free(hdr);
    return f;
}

static int one_line(const char *msg) { return msg[0] != '\0' && strchr(msg, '\n') == NULL; }

/* Opens a hand-made header + data_len pattern bytes and expects failure with `want`, a message
 * of one line that names the buffer and contains `needle` (when non-NULL). */
static int fails_with(const char *header, size_t data_len, mxl_status want, const char *needle) {
    size_t len;
    uint8_t *f = make_file(header, UINT64_MAX, NULL, data_len, &len);
    mxl_safetensors *st = (mxl_safetensors *)1;
    mxl_error err = {0};
    mxl_status rc = mxl_safetensors_open_buffer(f, len, "hostile.safetensors", &st, &err);
    int ok = rc == want && st == NULL && err.status == want && one_line(err.msg) &&
             strstr(err.msg, "hostile.safetensors") && (!needle || strstr(err.msg, needle));
    if (!ok)
        fprintf(stderr, "  header %s: got %s \"%s\", want %s containing \"%s\"\n", header,
                mxl_status_name(rc), err.msg, mxl_status_name(want), needle ? needle : "");
    if (rc == MXL_OK) mxl_safetensors_close(st);
    mxl_free(f);
    return ok;
}

/* Opens a header + pattern data that must be accepted; returns the object (caller closes). */
static mxl_safetensors *opens(const char *header, size_t data_len, uint8_t **keep) {
    size_t len;
    uint8_t *f = make_file(header, UINT64_MAX, NULL, data_len, &len);
    mxl_safetensors *st = NULL;
    mxl_error err = {0};
    if (mxl_safetensors_open_buffer(f, len, "ok.safetensors", &st, &err) != MXL_OK) {
        fprintf(stderr, "  header %s: unexpected error: %s\n", header, err.msg);
        mxl_free(f);
        return NULL;
    }
    *keep = f;
    return st;
}

/* Checks the invariants every accepted file must satisfy: entries inside the buffer, sized
 * numel * element size, tiling the data section in order. */
static int invariants_hold(const mxl_safetensors *st, const uint8_t *buf, uint64_t len) {
    uint64_t data_start = 8 + mxl_safetensors_header_len(st), at = 0, total = 0;
    for (size_t i = 0; i < mxl_safetensors_count(st); i++) {
        const mxl_st_entry *e = mxl_safetensors_at(st, i);
        uint64_t numel = mxl_tensor_numel(&e->tensor);
        if (e->data_begin != at || e->data_end < e->data_begin) return 0;
        if (e->tensor.nbytes != e->data_end - e->data_begin) return 0;
        if (numel * mxl_dtype_get_info(e->tensor.dtype)->block_bytes != e->tensor.nbytes)
            return 0;
        if ((const uint8_t *)e->tensor.data != buf + data_start + e->data_begin) return 0;
        if (e->file_offset != data_start + e->data_begin || e->file_offset + e->tensor.nbytes > len)
            return 0;
        if (mxl_safetensors_find(st, e->name) != e) return 0;
        at = e->data_end;
        total += e->tensor.nbytes;
    }
    return at == len - data_start && total == mxl_safetensors_total_bytes(st);
}

/* ---- valid files --------------------------------------------------------------------------- */

static const char *k_all_dtypes[] = {"BOOL", "U8",  "I8",   "F8_E5M2", "F8_E4M3",
                                     "I16",  "U16", "F16",  "BF16",    "I32",
                                     "U32",  "F32", "F64",  "I64",     "U64"};
#define N_DTYPES (sizeof k_all_dtypes / sizeof k_all_dtypes[0])

static void check_every_dtype(int *mxl_test_failed_, const mxl_safetensors *st, const tspec *t,
                              const uint64_t *begins, size_t n) {
    REQUIRE(mxl_safetensors_count(st) == n);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const mxl_st_entry *e = mxl_safetensors_find(st, t[i].name);
        REQUIRE(e != NULL);
        CHECK_EQ_STR(e->name, t[i].name);
        CHECK_EQ_STR(mxl_dtype_name(e->tensor.dtype), t[i].dtype);
        CHECK_EQ_INT(e->tensor.ndim, t[i].ndim);
        for (int d = 0; d < t[i].ndim; d++) CHECK_EQ_INT(e->tensor.shape[d], t[i].shape[d]);
        CHECK_EQ_INT(e->tensor.nbytes, spec_bytes(&t[i]));
        CHECK_EQ_INT(e->data_begin, begins[i]);
        CHECK_EQ_INT(e->data_end, begins[i] + spec_bytes(&t[i]));
        CHECK_EQ_INT(e->file_offset, 8 + mxl_safetensors_header_len(st) + begins[i]);
        CHECK(e->file == st);
        int same = 1;
        for (uint64_t k = 0; k < e->tensor.nbytes; k++)
            if (((const uint8_t *)e->tensor.data)[k] != pattern_byte(i, k)) same = 0;
        CHECK(same);
        total += spec_bytes(&t[i]);
    }
    CHECK_EQ_INT(mxl_safetensors_total_bytes(st), total);
    CHECK_EQ_STR(mxl_safetensors_metadata_get(st, "format"), "pt");
    CHECK_EQ_STR(mxl_safetensors_metadata_get(st, "note"), "every dtype");
    CHECK(mxl_safetensors_metadata_get(st, "absent") == NULL);
    CHECK_EQ_INT(mxl_safetensors_metadata_count(st), 2);
    const char *k0, *v0;
    CHECK(mxl_safetensors_metadata_at(st, 0, &k0, &v0) == 0);
    CHECK(mxl_safetensors_metadata_at(st, 2, &k0, &v0) != 0);
    CHECK(mxl_safetensors_find(st, "absent") == NULL);
    CHECK(mxl_safetensors_at(st, n) == NULL);
    /* at() walks in data-offset order */
    for (size_t i = 1; i < n; i++)
        CHECK(mxl_safetensors_at(st, i - 1)->data_end == mxl_safetensors_at(st, i)->data_begin);
}

TEST(safetensors_every_dtype_buffer_and_file) {
    tspec t[N_DTYPES];
    uint64_t begins[N_DTYPES];
    for (size_t i = 0; i < N_DTYPES; i++) {
        static char names[N_DTYPES][32];
        snprintf(names[i], sizeof names[i], "layer.%zu.%s", i, k_all_dtypes[i]);
        /* shapes of 0..3 dims, so scalars and vectors are covered too */
        t[i] = (tspec){names[i], k_all_dtypes[i], (int)(i % 4), {3, 2, 5}};
    }
    size_t len;
    uint8_t *f = write_specs(t, N_DTYPES, "{\"format\":\"pt\",\"note\":\"every dtype\"}", &len,
                             begins);
    mxl_safetensors *st = NULL;
    mxl_error err = {0};
    REQUIRE(mxl_safetensors_open_buffer(f, len, "mem", &st, &err) == MXL_OK);
    CHECK_EQ_STR(mxl_safetensors_path(st), "mem");
    CHECK_EQ_INT(mxl_safetensors_file_size(st), len);
    check_every_dtype(mxl_test_failed_, st, t, begins, N_DTYPES);
    CHECK(invariants_hold(st, f, len));
    mxl_safetensors_close(st);

    const char *path = mxl_test_write_temp(".safetensors", f, len);
    REQUIRE(mxl_safetensors_open(path, &st, &err) == MXL_OK);
    CHECK_EQ_STR(mxl_safetensors_path(st), path);
    check_every_dtype(mxl_test_failed_, st, t, begins, N_DTYPES);
    mxl_safetensors_close(st);
    unlink(path);
    mxl_free(f);
}

TEST(safetensors_reference_crate_examples) {
    /* The example from the safetensors crate's documentation (SafeTensors::deserialize):
     * N = 60 ('<'), I32 [2, 2] at [0, 16], 16 zero bytes. */
    static const char doc[] = "<\x00\x00\x00\x00\x00\x00\x00"
                              "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}"
                              "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";
    uint8_t *buf = mxl_malloc(sizeof doc - 1);
    memcpy(buf, doc, sizeof doc - 1);
    mxl_safetensors *st = NULL;
    mxl_error err = {0};
    REQUIRE(mxl_safetensors_open_buffer(buf, sizeof doc - 1, "doc", &st, &err) == MXL_OK);
    const mxl_st_entry *e = mxl_safetensors_find(st, "test");
    REQUIRE(e != NULL);
    CHECK(e->tensor.dtype == MXL_DTYPE_I32 && e->tensor.ndim == 2 && e->tensor.nbytes == 16);
    CHECK(e->tensor.data == buf + 68);
    mxl_safetensors_close(st);
    mxl_free(buf);

    /* The crate's serialization of an empty dict: N = 8, "{}" + 6 spaces, no data. */
    static const uint8_t empty[] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    buf = mxl_malloc(sizeof empty);
    memcpy(buf, empty, sizeof empty);
    REQUIRE(mxl_safetensors_open_buffer(buf, sizeof empty, "empty", &st, &err) == MXL_OK);
    CHECK_EQ_INT(mxl_safetensors_count(st), 0);
    CHECK_EQ_INT(mxl_safetensors_total_bytes(st), 0);
    CHECK(mxl_safetensors_find(st, "x") == NULL);
    mxl_safetensors_close(st);
    mxl_free(buf);
}

TEST(safetensors_empty_tensors_and_order) {
    uint8_t *keep = NULL;
    /* Header order differs from data order; at() follows data order. Empty tensors may sit at
     * any boundary (the crate sorts by offsets and they chain), scalars take one element. */
    mxl_safetensors *st = opens(
        "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
        "\"z\":{\"dtype\":\"F16\",\"shape\":[0,7],\"data_offsets\":[12,12]},"
        "\"e\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
        "\"m\":{\"dtype\":\"I64\",\"shape\":[3,0,2],\"data_offsets\":[4,4]},"
        "\"__metadata__\":{\"format\":\"mlx\"}}",
        12, &keep);
    REQUIRE(st != NULL);
    static const char *order[] = {"e", "a", "m", "b", "z"};
    REQUIRE(mxl_safetensors_count(st) == 5);
    for (size_t i = 0; i < 5; i++) CHECK_EQ_STR(mxl_safetensors_at(st, i)->name, order[i]);
    CHECK_EQ_INT(mxl_safetensors_find(st, "a")->tensor.ndim, 0);
    CHECK_EQ_INT(mxl_safetensors_find(st, "a")->tensor.nbytes, 4);
    CHECK_EQ_INT(mxl_safetensors_find(st, "z")->tensor.nbytes, 0);
    CHECK_EQ_STR(mxl_safetensors_metadata_get(st, "format"), "mlx");
    CHECK_EQ_INT(mxl_safetensors_total_bytes(st), 12);
    mxl_safetensors_close(st);
    mxl_free(keep);

    /* __metadata__: null is "no metadata" for the crate (Option<HashMap>). Unknown fields in a
     * tensor entry are ignored, as serde does. */
    st = opens("{\"__metadata__\":null,\"a\":{\"dtype\":\"U8\",\"shape\":[3],"
               "\"data_offsets\":[0,3],\"extra\":[1,{\"x\":2}]}}",
               3, &keep);
    REQUIRE(st != NULL);
    CHECK_EQ_INT(mxl_safetensors_metadata_count(st), 0);
    mxl_safetensors_close(st);
    mxl_free(keep);

    /* Padding: many trailing spaces and newlines after the object are allowed. */
    st = opens("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}   \n\t          ",
               1, &keep);
    CHECK(st != NULL);
    mxl_safetensors_close(st);
    mxl_free(keep);
}

/* ---- hostile files ------------------------------------------------------------------------- */

TEST(safetensors_every_truncation_fails) {
    tspec t[] = {{"w", "F32", 2, {2, 3}}, {"b", "BF16", 1, {3}}, {"i", "I64", 1, {2}}};
    size_t len;
    uint8_t *f = write_specs(t, 3, "{\"format\":\"pt\"}", &len, NULL);
    mxl_error err = {0};
    mxl_safetensors *st = NULL;
    REQUIRE(mxl_safetensors_open_buffer(f, len, "whole", &st, &err) == MXL_OK);
    mxl_safetensors_close(st);
    int all_failed = 1, all_one_line = 1;
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *p = mxl_malloc(cut ? cut : 1);
        memcpy(p, f, cut);
        st = (mxl_safetensors *)1;
        mxl_error_clear(&err);
        mxl_status rc = mxl_safetensors_open_buffer(cut ? p : NULL, cut, "cut.safetensors", &st, &err);
        if (rc == MXL_OK) {
            fprintf(stderr, "  prefix of %zu bytes accepted\n", cut);
            all_failed = 0;
            mxl_safetensors_close(st);
        } else if (st != NULL || !one_line(err.msg) || !strstr(err.msg, "cut.safetensors")) {
            fprintf(stderr, "  prefix %zu: bad error \"%s\"\n", cut, err.msg);
            all_one_line = 0;
        }
        mxl_free(p);
    }
    CHECK(all_failed);
    CHECK(all_one_line);
    /* An extra byte after the data is refused too (MetadataIncompleteBuffer in the crate). */
    uint8_t *longer = mxl_malloc(len + 1);
    memcpy(longer, f, len);
    longer[len] = 0;
    CHECK(mxl_safetensors_open_buffer(longer, len + 1, "long", &st, &err) == MXL_ERR_FORMAT);
    mxl_free(longer);
    mxl_free(f);
}

TEST(safetensors_header_length) {
    size_t len;
    mxl_safetensors *st = NULL;
    mxl_error err = {0};
    const char *h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
    /* N one byte past the end of the file */
    uint8_t *f = make_file(h, UINT64_MAX, NULL, 1, &len);
    uint64_t past = len - 8 + 1;
    for (int i = 0; i < 8; i++) f[i] = (uint8_t)(past >> (8 * i));
    CHECK(mxl_safetensors_open_buffer(f, len, "hostile", &st, &err) == MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "runs past the end") && strstr(err.msg, "hostile"));
    mxl_free(f);
    /* N = 2^63, N = 2^64 - 2, N just above the 100 MB cap: refused before any arithmetic */
    const uint64_t huge[] = {1ull << 63, UINT64_MAX - 1, MXL_SAFETENSORS_MAX_HEADER + 1};
    for (size_t i = 0; i < 3; i++) {
        f = make_file(h, huge[i], NULL, 1, &len);
        CHECK(mxl_safetensors_open_buffer(f, len, "hostile", &st, &err) == MXL_ERR_FORMAT);
        CHECK(strstr(err.msg, "limit") != NULL && one_line(err.msg));
        mxl_free(f);
    }
    /* N = 0: the empty string is not JSON */
    f = make_file("", 0, NULL, 0, &len);
    CHECK(mxl_safetensors_open_buffer(f, len, "hostile", &st, &err) == MXL_ERR_FORMAT);
    mxl_free(f);
    /* N shorter than the JSON: the object is cut */
    f = make_file(h, 10, NULL, 1, &len);
    CHECK(mxl_safetensors_open_buffer(f, len, "hostile", &st, &err) == MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "JSON") != NULL);
    mxl_free(f);
    /* Files shorter than 8 bytes, including empty and NULL */
    static const uint8_t tiny[7] = {0};
    for (size_t n = 0; n < 8; n++) {
        CHECK(mxl_safetensors_open_buffer(n ? tiny : NULL, n, "tiny", &st, &err) == MXL_ERR_FORMAT);
        CHECK(strstr(err.msg, "tiny") && strstr(err.msg, "too short"));
    }
    /* An empty file on disk */
    const char *path = mxl_test_write_temp(".safetensors", "", 0);
    CHECK(mxl_safetensors_open(path, &st, &err) == MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, path) != NULL);
    unlink(path);
    /* A missing file */
    CHECK(mxl_safetensors_open("/nonexistent/x.safetensors", &st, &err) == MXL_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "/nonexistent/x.safetensors") != NULL);
}

#define T(name, body) "\"" name "\":{" body "}"
#define F32_2X2 "\"dtype\":\"F32\",\"shape\":[2,2],"

TEST(safetensors_hostile_json) {
    CHECK(fails_with("not json", 0, MXL_ERR_FORMAT, "not valid JSON"));
    CHECK(fails_with("[1,2,3]", 0, MXL_ERR_FORMAT, "array"));
    CHECK(fails_with("[]", 0, MXL_ERR_FORMAT, "not an object"));
    CHECK(fails_with("\"str\"", 0, MXL_ERR_FORMAT, NULL));
    CHECK(fails_with("42", 0, MXL_ERR_FORMAT, NULL));
    CHECK(fails_with("{", 0, MXL_ERR_FORMAT, "not valid JSON"));
    CHECK(fails_with("{}{}", 0, MXL_ERR_FORMAT, "not valid JSON"));
    CHECK(fails_with("{\"a\":1,}", 0, MXL_ERR_FORMAT, "not valid JSON"));
    CHECK(fails_with("{\"\xff\":1}", 0, MXL_ERR_FORMAT, "not valid JSON")); /* invalid UTF-8 */
    CHECK(fails_with("{\"a\\u0000b\":{}}", 0, MXL_ERR_FORMAT, "not valid JSON")); /* NUL in name */
    /* Duplicate keys: tensors, and inside __metadata__ */
    CHECK(fails_with("{" T("a", F32_2X2 "\"data_offsets\":[0,16]") ","
                     T("a", F32_2X2 "\"data_offsets\":[16,32]") "}",
                     32, MXL_ERR_FORMAT, "duplicate"));
    CHECK(fails_with("{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", 0, MXL_ERR_FORMAT,
                     "duplicate"));
    /* A deeply nested ignored field is bounded by the parser's depth limit, not the stack. */
    char deep[20000];
    size_t o = (size_t)snprintf(deep, sizeof deep, "{\"a\":{\"dtype\":\"U8\",\"x\":");
    for (int i = 0; i < 5000; i++) deep[o++] = '[';
    for (int i = 0; i < 5000; i++) deep[o++] = ']';
    snprintf(deep + o, sizeof deep - o, "}}");
    CHECK(fails_with(deep, 0, MXL_ERR_FORMAT, NULL));
}

TEST(safetensors_hostile_tensor_entries) {
    CHECK(fails_with("{\"a\":5}", 0, MXL_ERR_FORMAT, "'a': header entry is not an object"));
    CHECK(fails_with("{\"a\":[]}", 0, MXL_ERR_FORMAT, "'a'"));
    /* dtype */
    CHECK(fails_with("{" T("w", "\"shape\":[1],\"data_offsets\":[0,4]") "}", 4, MXL_ERR_FORMAT,
                     "'w': missing or non-string \"dtype\""));
    CHECK(fails_with("{" T("w", "\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]") "}", 4,
                     MXL_ERR_FORMAT, "dtype"));
    const char *bad_dtypes[] = {"F128", "f32", "float32", "", "Q4_0", "F4", "C64", "F8_E8M0"};
    for (size_t i = 0; i < sizeof bad_dtypes / sizeof bad_dtypes[0]; i++) {
        char h[256], want[64];
        snprintf(h, sizeof h,
                 "{\"w\":{\"dtype\":\"%s\",\"shape\":[1],\"data_offsets\":[0,4]}}", bad_dtypes[i]);
        snprintf(want, sizeof want, "'w': unsupported dtype '%s'", bad_dtypes[i]);
        CHECK(fails_with(h, 4, MXL_ERR_UNSUPPORTED, want));
    }
    /* shape */
    CHECK(fails_with("{" T("w", "\"dtype\":\"F32\",\"data_offsets\":[0,4]") "}", 4, MXL_ERR_FORMAT,
                     "'w': missing or non-array \"shape\""));
    CHECK(fails_with("{" T("w", "\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]") "}", 16,
                     MXL_ERR_FORMAT, "shape"));
    CHECK(fails_with("{" T("w", "\"dtype\":\"F32\",\"shape\":[-1,2],\"data_offsets\":[0,8]") "}",
                     8, MXL_ERR_FORMAT, "'w': shape[0] is not a non-negative integer"));
    CHECK(fails_with("{" T("w", "\"dtype\":\"F32\",\"shape\":[2,2.0],\"data_offsets\":[0,16]") "}",
                     16, MXL_ERR_FORMAT, "shape[1]"));
    CHECK(fails_with("{" T("w", "\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]") "}",
                     8, MXL_ERR_FORMAT, "shape[0]"));
    CHECK(fails_with("{" T("w", "\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,8]") "}",
                     8, MXL_ERR_FORMAT, "shape[0]"));
    /* a dim beyond int64 is a JSON integer overflow in the parser */
    CHECK(fails_with("{" T("w", "\"dtype\":\"U8\",\"shape\":[18446744073709551616],"
                              "\"data_offsets\":[0,1]") "}",
                     1, MXL_ERR_FORMAT, "JSON"));
    /* products that overflow 64 bits: elements, then bytes */
    CHECK(fails_with("{" T("w", "\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
                              "\"data_offsets\":[0,1]") "}",
                     1, MXL_ERR_OVERFLOW, "'w'"));
    CHECK(fails_with("{" T("w", "\"dtype\":\"U8\",\"shape\":[9223372036854775807,3],"
                              "\"data_offsets\":[0,1]") "}",
                     1, MXL_ERR_OVERFLOW, "overflow"));
    CHECK(fails_with("{" T("w", "\"dtype\":\"F64\",\"shape\":[4611686018427387904],"
                              "\"data_offsets\":[0,8]") "}",
                     8, MXL_ERR_OVERFLOW, "'w'"));
    CHECK(fails_with("{" T("w", "\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                              "\"data_offsets\":[0,1]") "}",
                     1, MXL_ERR_UNSUPPORTED, "'w': shape has 9 dimensions"));
    /* data_offsets */
    CHECK(fails_with("{" T("w", "\"dtype\":\"F32\",\"shape\":[2,2]") "}", 16, MXL_ERR_FORMAT,
                     "'w': \"data_offsets\""));
    CHECK(fails_with("{" T("w", F32_2X2 "\"data_offsets\":[0]") "}", 16, MXL_ERR_FORMAT,
                     "data_offsets"));
    CHECK(fails_with("{" T("w", F32_2X2 "\"data_offsets\":[0,16,16]") "}", 16, MXL_ERR_FORMAT,
                     "data_offsets"));
    CHECK(fails_with("{" T("w", F32_2X2 "\"data_offsets\":[-16,0]") "}", 16, MXL_ERR_FORMAT,
                     "data_offsets"));
    CHECK(fails_with("{" T("w", F32_2X2 "\"data_offsets\":[0.0,16]") "}", 16, MXL_ERR_FORMAT,
                     "data_offsets"));
    CHECK(fails_with("{" T("w", F32_2X2 "\"data_offsets\":{\"0\":16}") "}", 16, MXL_ERR_FORMAT,
                     "data_offsets"));
    CHECK(fails_with("{" T("w", F32_2X2 "\"data_offsets\":[16,0]") "}", 16, MXL_ERR_FORMAT,
                     "'w': data_offsets begin 16 is after end 0"));
    CHECK(fails_with("{" T("w", F32_2X2 "\"data_offsets\":[0,17]") "}", 16, MXL_ERR_FORMAT,
                     "'w': data_offsets end 17 is past the data section (16 bytes)"));
    CHECK(fails_with("{" T("w", F32_2X2 "\"data_offsets\":[0,9223372036854775807]") "}", 16,
                     MXL_ERR_FORMAT, "past the data section"));
    /* size mismatch, both ways */
    CHECK(fails_with("{" T("w", F32_2X2 "\"data_offsets\":[0,12]") "}", 12, MXL_ERR_FORMAT,
                     "'w': data_offsets [0, 12] hold 12 bytes but F32 [2, 2] needs 16"));
    CHECK(fails_with("{" T("w", F32_2X2 "\"data_offsets\":[0,20]") "}", 20, MXL_ERR_FORMAT,
                     "needs 16"));
}

TEST(safetensors_hostile_layout) {
    /* overlap */
    CHECK(fails_with("{" T("a", F32_2X2 "\"data_offsets\":[0,16]") ","
                     T("b", F32_2X2 "\"data_offsets\":[8,24]") "}",
                     24, MXL_ERR_FORMAT, "'b': data_offsets [8, 24] overlap tensor 'a'"));
    /* identical ranges */
    CHECK(fails_with("{" T("a", F32_2X2 "\"data_offsets\":[0,16]") ","
                     T("b", F32_2X2 "\"data_offsets\":[0,16]") "}",
                     16, MXL_ERR_FORMAT, "overlap"));
    /* an empty tensor inside another one: the crate refuses it too (8 != 16 after sorting) */
    CHECK(fails_with("{" T("a", F32_2X2 "\"data_offsets\":[0,16]") ","
                     "\"e\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,8]}}",
                     16, MXL_ERR_FORMAT, "'e'"));
    /* hole between tensors, hole at the start, trailing bytes */
    CHECK(fails_with("{" T("a", F32_2X2 "\"data_offsets\":[0,16]") ","
                     T("b", F32_2X2 "\"data_offsets\":[20,36]") "}",
                     36, MXL_ERR_FORMAT, "'b': data section bytes [16, 20) before it belong"));
    CHECK(fails_with("{" T("a", F32_2X2 "\"data_offsets\":[4,20]") "}", 20, MXL_ERR_FORMAT,
                     "bytes [0, 4)"));
    CHECK(fails_with("{" T("a", F32_2X2 "\"data_offsets\":[0,16]") "}", 17, MXL_ERR_FORMAT,
                     "data section has 17 bytes but the tensors cover only 16"));
    CHECK(fails_with("{}", 1, MXL_ERR_FORMAT, "cover only 0"));
}

TEST(safetensors_hostile_metadata) {
    CHECK(fails_with("{\"__metadata__\":[\"format\",\"pt\"]}", 0, MXL_ERR_FORMAT,
                     "__metadata__ is not an object"));
    CHECK(fails_with("{\"__metadata__\":\"pt\"}", 0, MXL_ERR_FORMAT, "__metadata__"));
    CHECK(fails_with("{\"__metadata__\":{\"format\":1}}", 0, MXL_ERR_FORMAT,
                     "__metadata__ key 'format' has a non-string value"));
    CHECK(fails_with("{\"__metadata__\":{\"a\":\"b\",\"n\":{\"x\":\"y\"}}}", 0, MXL_ERR_FORMAT,
                     "'n'"));
    CHECK(fails_with("{\"__metadata__\":{\"a\":null}}", 0, MXL_ERR_FORMAT, "'a'"));
}

TEST(safetensors_error_names_are_one_line) {
    /* A tensor name with a newline and a very long one: the message stays one bounded line. */
    CHECK(fails_with("{\"bad\\nname\":{\"dtype\":\"X\",\"shape\":[],\"data_offsets\":[0,0]}}", 0,
                     MXL_ERR_UNSUPPORTED, "bad?name"));
    char h[4096];
    size_t o = (size_t)snprintf(h, sizeof h, "{\"");
    for (int i = 0; i < 2000; i++) h[o++] = 'n';
    snprintf(h + o, sizeof h - o, "\":{\"dtype\":\"X\",\"shape\":[],\"data_offsets\":[0,0]}}");
    CHECK(fails_with(h, 0, MXL_ERR_UNSUPPORTED, "..."));
}

TEST(safetensors_header_mutations_never_break_invariants) {
    /* Every header byte replaced by each of a few JSON-significant bytes: whatever opens must
     * satisfy the invariants; whatever fails must fail with one line naming the buffer. */
    tspec t[] = {{"w", "F16", 2, {2, 3}}, {"b", "U8", 1, {4}}, {"s", "F64", 0, {0}}};
    size_t len;
    uint8_t *f = write_specs(t, 3, "{\"format\":\"pt\"}", &len, NULL);
    const uint8_t subst[] = {'0', '9', '-', '"', '{', '}', '[', ']', ',', ':', ' ', '.', 'e', 0xff};
    size_t header_end = 8 + (size_t)(f[0] | (f[1] << 8));
    int bad = 0;
    for (size_t pos = 0; pos < header_end; pos++)
        for (size_t s = 0; s < sizeof subst; s++) {
            uint8_t *m = mxl_malloc(len);
            memcpy(m, f, len);
            m[pos] = subst[s];
            mxl_safetensors *st = NULL;
            mxl_error err = {0};
            mxl_status rc = mxl_safetensors_open_buffer(m, len, "mut", &st, &err);
            if (rc == MXL_OK) {
                if (!invariants_hold(st, m, len)) bad++;
                mxl_safetensors_close(st);
            } else if (!one_line(err.msg) || !strstr(err.msg, "mut")) {
                bad++;
            }
            mxl_free(m);
        }
    CHECK_EQ_INT(bad, 0);
    mxl_free(f);
}

/* ---- model directories --------------------------------------------------------------------- */

static char *make_temp_dir(void) {
    static char dirs[16][64];
    static int next;
    char *d = dirs[next++ % 16];
    snprintf(d, 64, "/tmp/mxl_st_XXXXXX");
    return mkdtemp(d);
}

static void put_file(const char *dir, const char *name, const void *data, size_t len) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *fp = fopen(p, "wb");
    if (!fp) return;
    if (len) fwrite(data, 1, len, fp);
    fclose(fp);
}

static void put_text(const char *dir, const char *name, const char *text) {
    put_file(dir, name, text, strlen(text));
}

static void put_specs(const char *dir, const char *name, const tspec *t, size_t n,
                      const char *meta) {
    size_t len;
    uint8_t *f = write_specs(t, n, meta, &len, NULL);
    put_file(dir, name, f, len);
    mxl_free(f);
}

/* Removes the files this test put in its own temp dir, then the dir (no recursion). */
static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char p[512];
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static const tspec k_shard1[] = {{"model.embed.weight", "BF16", 2, {4, 8}},
                                 {"model.layers.0.w", "F32", 2, {8, 8}}};
static const tspec k_shard2[] = {{"model.layers.1.w", "F32", 2, {8, 8}},
                                 {"model.norm.weight", "F16", 1, {8}},
                                 {"lm_head.scales", "U32", 2, {4, 2}}};

static const char k_index[] =
    "{\"metadata\":{\"total_size\":624},\"weight_map\":{"
    "\"model.embed.weight\":\"model-00001-of-00002.safetensors\","
    "\"model.layers.0.w\":\"model-00001-of-00002.safetensors\","
    "\"model.layers.1.w\":\"model-00002-of-00002.safetensors\","
    "\"model.norm.weight\":\"model-00002-of-00002.safetensors\","
    "\"lm_head.scales\":\"model-00002-of-00002.safetensors\"}}";

static char *sharded_dir(void) {
    char *d = make_temp_dir();
    if (!d) return NULL;
    put_specs(d, "model-00001-of-00002.safetensors", k_shard1, 2, "{\"format\":\"mlx\"}");
    put_specs(d, "model-00002-of-00002.safetensors", k_shard2, 3, "{\"format\":\"mlx\"}");
    put_text(d, "model.safetensors.index.json", k_index);
    put_text(d, "config.json", "{}");
    return d;
}

TEST(safetensors_model_sharded_index) {
    char *d = sharded_dir();
    REQUIRE(d != NULL);
    /* a stray file that the index does not name is not opened */
    put_text(d, "stray.safetensors", "garbage");
    mxl_st_model *m = NULL;
    mxl_error err = {0};
    REQUIRE(mxl_st_model_open(d, &m, &err) == MXL_OK);
    CHECK_EQ_STR(mxl_st_model_path(m), d);
    CHECK_EQ_INT(mxl_st_model_file_count(m), 2);
    CHECK_EQ_INT(mxl_st_model_tensor_count(m), 5);
    uint64_t want_total = 0;
    for (size_t i = 0; i < 2; i++) want_total += spec_bytes(&k_shard1[i]);
    for (size_t i = 0; i < 3; i++) want_total += spec_bytes(&k_shard2[i]);
    CHECK_EQ_INT(mxl_st_model_total_bytes(m), want_total);
    CHECK_EQ_INT(want_total, 624);
    CHECK(strstr(mxl_safetensors_path(mxl_st_model_file_at(m, 0)), "model-00001-of-00002"));
    CHECK(strstr(mxl_safetensors_path(mxl_st_model_file_at(m, 1)), "model-00002-of-00002"));
    CHECK(mxl_st_model_file_at(m, 2) == NULL);
    for (size_t i = 0; i < 5; i++) {
        const tspec *t = i < 2 ? &k_shard1[i] : &k_shard2[i - 2];
        size_t fi = i < 2 ? 0 : 1, ti = i < 2 ? i : i - 2;
        const mxl_st_entry *e = mxl_st_model_find(m, t->name);
        REQUIRE(e != NULL);
        CHECK(e->file == mxl_st_model_file_at(m, fi));
        CHECK_EQ_STR(mxl_dtype_name(e->tensor.dtype), t->dtype);
        CHECK_EQ_INT(e->tensor.nbytes, spec_bytes(t));
        CHECK_EQ_INT(((const uint8_t *)e->tensor.data)[e->tensor.nbytes - 1],
                     pattern_byte(ti, e->tensor.nbytes - 1));
    }
    size_t seen = 0;
    for (size_t i = 0; i < mxl_st_model_tensor_count(m); i++) {
        const mxl_st_entry *e = mxl_st_model_tensor_at(m, i);
        if (mxl_st_model_find(m, e->name) == e) seen++;
    }
    CHECK_EQ_INT(seen, 5);
    CHECK(mxl_st_model_tensor_at(m, 5) == NULL);
    CHECK(mxl_st_model_find(m, "nope") == NULL);
    CHECK_EQ_STR(mxl_st_model_metadata_get(m, "format"), "mlx");
    CHECK(mxl_st_model_metadata_get(m, "nope") == NULL);
    mxl_st_model_close(m);
    remove_dir(d);
}

/* Writes `index` into a fresh sharded dir and expects the open to fail naming `needle`. */
static int index_fails(const char *index, mxl_status want, const char *needle) {
    char *d = sharded_dir();
    if (!d) return 0;
    put_text(d, "model.safetensors.index.json", index);
    mxl_st_model *m = (mxl_st_model *)1;
    mxl_error err = {0};
    mxl_status rc = mxl_st_model_open(d, &m, &err);
    int ok = rc == want && m == NULL && one_line(err.msg) &&
             strstr(err.msg, "model.safetensors.index.json") && strstr(err.msg, needle);
    if (!ok)
        fprintf(stderr, "  index %s: got %s \"%s\", want %s with \"%s\"\n", index,
                mxl_status_name(rc), err.msg, mxl_status_name(want), needle);
    if (rc == MXL_OK) mxl_st_model_close(m);
    remove_dir(d);
    return ok;
}

TEST(safetensors_model_bad_index) {
    CHECK(index_fails("{\"weight_map\":{\"model.embed.weight\":\"missing.safetensors\"}}",
                      MXL_ERR_NOT_FOUND, "missing.safetensors"));
    CHECK(index_fails("{\"weight_map\":{\"model.embed.weight\":\"../x.safetensors\"}}",
                      MXL_ERR_FORMAT, "'../x.safetensors' is not a plain file name"));
    CHECK(index_fails("{\"weight_map\":{\"model.embed.weight\":\"/etc/passwd\"}}", MXL_ERR_FORMAT,
                      "not a plain file name"));
    CHECK(index_fails("{\"weight_map\":{\"model.embed.weight\":\"..\"}}", MXL_ERR_FORMAT,
                      "not a plain file name"));
    CHECK(index_fails("{\"weight_map\":{\"model.embed.weight\":\"\"}}", MXL_ERR_FORMAT,
                      "not a plain file name"));
    CHECK(index_fails("{\"weight_map\":{\"model.embed.weight\":3}}", MXL_ERR_FORMAT,
                      "'model.embed.weight': shard is not a string"));
    /* tensor missing from the shard the index names (it is in the other one) */
    CHECK(index_fails("{\"weight_map\":{"
                      "\"model.embed.weight\":\"model-00002-of-00002.safetensors\"}}",
                      MXL_ERR_FORMAT,
                      "'model.embed.weight' is mapped to model-00002-of-00002.safetensors, which "
                      "does not contain it"));
    CHECK(index_fails("{\"weight_map\":{\"ghost\":\"model-00001-of-00002.safetensors\"}}",
                      MXL_ERR_FORMAT, "'ghost'"));
    CHECK(index_fails("{\"weight_map\":{}}", MXL_ERR_FORMAT, "empty"));
    CHECK(index_fails("{\"metadata\":{}}", MXL_ERR_FORMAT, "weight_map"));
    CHECK(index_fails("{\"weight_map\":[]}", MXL_ERR_FORMAT, "weight_map"));
    CHECK(index_fails("[1]", MXL_ERR_FORMAT, "weight_map"));
    CHECK(index_fails("{weight_map", MXL_ERR_FORMAT, "invalid JSON at line 1"));
    /* duplicate keys: the last wins, as in Python's json (which wrote the file) */
    CHECK(index_fails("{\"weight_map\":{"
                      "\"model.embed.weight\":\"model-00001-of-00002.safetensors\","
                      "\"model.embed.weight\":\"model-00002-of-00002.safetensors\"}}",
                      MXL_ERR_FORMAT, "'model.embed.weight' is mapped to model-00002-of-00002.safetensors, which does not contain it"));
}

TEST(safetensors_model_tensor_in_two_shards) {
    char *d = sharded_dir();
    REQUIRE(d != NULL);
    /* shard 2 also carries model.embed.weight; the index maps it to shard 1 */
    tspec twice[] = {{"model.layers.1.w", "F32", 2, {8, 8}},
                     {"model.norm.weight", "F16", 1, {8}},
                     {"lm_head.scales", "U32", 2, {4, 2}},
                     {"model.embed.weight", "BF16", 2, {4, 8}}};
    put_specs(d, "model-00002-of-00002.safetensors", twice, 4, NULL);
    mxl_st_model *m = NULL;
    mxl_error err = {0};
    CHECK(mxl_st_model_open(d, &m, &err) == MXL_ERR_FORMAT);
    CHECK(m == NULL);
    CHECK(strstr(err.msg, "'model.embed.weight' is in both") != NULL);
    CHECK(strstr(err.msg, "model-00001-of-00002") && strstr(err.msg, "model-00002-of-00002"));
    CHECK(one_line(err.msg));
    remove_dir(d);
}

TEST(safetensors_model_bad_shard_names_the_shard) {
    char *d = sharded_dir();
    REQUIRE(d != NULL);
    put_text(d, "model-00002-of-00002.safetensors", "\x10\0\0\0\0\0\0\0{\"a\":1}");
    mxl_st_model *m = NULL;
    mxl_error err = {0};
    CHECK(mxl_st_model_open(d, &m, &err) != MXL_OK);
    CHECK(strstr(err.msg, "model-00002-of-00002.safetensors") != NULL);
    CHECK(one_line(err.msg));
    remove_dir(d);
}

TEST(safetensors_model_single_and_glob) {
    mxl_st_model *m = NULL;
    mxl_error err = {0};
    /* model.safetensors wins over other files */
    char *d = make_temp_dir();
    REQUIRE(d != NULL);
    put_specs(d, "model.safetensors", k_shard1, 2, NULL);
    put_text(d, "other.safetensors", "junk");
    REQUIRE(mxl_st_model_open(d, &m, &err) == MXL_OK);
    CHECK_EQ_INT(mxl_st_model_file_count(m), 1);
    CHECK_EQ_INT(mxl_st_model_tensor_count(m), 2);
    CHECK(mxl_st_model_find(m, "model.layers.0.w") != NULL);
    mxl_st_model_close(m);

    /* a path to a file is a one-file model */
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    REQUIRE(mxl_st_model_open(p, &m, &err) == MXL_OK);
    CHECK_EQ_INT(mxl_st_model_tensor_count(m), 2);
    mxl_st_model_close(m);
    remove_dir(d);

    /* no index, no model.safetensors: every *.safetensors, sorted; hidden and other files out */
    d = make_temp_dir();
    REQUIRE(d != NULL);
    put_specs(d, "b.safetensors", k_shard2, 3, "{\"format\":\"pt\"}");
    put_specs(d, "a.safetensors", k_shard1, 2, NULL);
    put_text(d, "._a.safetensors", "junk");
    put_text(d, "notes.safetensors.txt", "junk");
    put_text(d, "config.json", "{}");
    char sub[512];
    snprintf(sub, sizeof sub, "%s/dir.safetensors", d);
    mkdir(sub, 0700);
    REQUIRE(mxl_st_model_open(d, &m, &err) == MXL_OK);
    CHECK_EQ_INT(mxl_st_model_file_count(m), 2);
    CHECK(strstr(mxl_safetensors_path(mxl_st_model_file_at(m, 0)), "/a.safetensors") != NULL);
    CHECK(strstr(mxl_safetensors_path(mxl_st_model_file_at(m, 1)), "/b.safetensors") != NULL);
    CHECK_EQ_INT(mxl_st_model_tensor_count(m), 5);
    CHECK_EQ_STR(mxl_st_model_tensor_at(m, 0)->name, "model.embed.weight");
    CHECK_EQ_STR(mxl_st_model_metadata_get(m, "format"), "pt");
    mxl_st_model_close(m);
    rmdir(sub);

    /* the same tensor in two unindexed files */
    put_specs(d, "c.safetensors", k_shard1, 1, NULL);
    CHECK(mxl_st_model_open(d, &m, &err) == MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "'model.embed.weight' is in both") != NULL);
    remove_dir(d);
}

TEST(safetensors_model_no_weights) {
    mxl_st_model *m = (mxl_st_model *)1;
    mxl_error err = {0};
    char *d = make_temp_dir();
    REQUIRE(d != NULL);
    put_text(d, "config.json", "{}");
    CHECK(mxl_st_model_open(d, &m, &err) == MXL_ERR_NOT_FOUND);
    CHECK(m == NULL);
    CHECK(strstr(err.msg, d) != NULL && strstr(err.msg, "no safetensors") != NULL);
    CHECK(one_line(err.msg));
    remove_dir(d);
    CHECK(mxl_st_model_open("/nonexistent/model-dir", &m, &err) == MXL_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "/nonexistent/model-dir") != NULL);
}

/* ---- real checkpoint ----------------------------------------------------------------------- */

static void models_dir(char *buf, size_t cap) {
    const char *p = mxl_test_model_path("");
    size_t n = strlen(p);
    snprintf(buf, cap, "%.*s", (int)(n && p[n - 1] == '/' ? n - 1 : n), p);
}

static void check_real_model(int *mxl_test_failed_, const json_t *jm) {
    const char *id = json_string_value(json_object_get(jm, "id"));
    const char *file = json_string_value(json_object_get(jm, "file"));
    REQUIRE(id && file);
    char dir[1024], path[1200];
    models_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s/%s", dir, id, file);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "  %s is missing: run scripts/fetch-models.sh (models go to "
                        "$MLXCEL_CACHE_DIR/models, default ~/.cache/mlxcel/models)\n", path);
        CHECK(!"real model present");
        return;
    }
    mxl_safetensors *st = NULL;
    mxl_error err = {0};
    if (mxl_safetensors_open(path, &st, &err) != MXL_OK) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st != NULL);
    CHECK_EQ_INT(mxl_safetensors_file_size(st), json_integer_value(json_object_get(jm, "file_size")));
    CHECK_EQ_INT(mxl_safetensors_header_len(st), json_integer_value(json_object_get(jm, "header_len")));
    CHECK_EQ_INT(mxl_safetensors_count(st), json_integer_value(json_object_get(jm, "tensor_count")));
    CHECK_EQ_INT(mxl_safetensors_total_bytes(st),
                 json_integer_value(json_object_get(jm, "total_bytes")));
    const json_t *meta = json_object_get(jm, "metadata");
    CHECK_EQ_INT(mxl_safetensors_metadata_count(st), json_object_size(meta));
    const char *mk;
    json_t *mv;
    json_object_foreach((json_t *)meta, mk, mv)
        CHECK_EQ_STR(mxl_safetensors_metadata_get(st, mk), json_string_value(mv));

    const json_t *tensors = json_object_get(jm, "tensors");
    CHECK_EQ_INT(json_array_size(tensors), mxl_safetensors_count(st));
    size_t i;
    json_t *jt;
    int crc_bad = 0;
    json_array_foreach(tensors, i, jt) {
        const char *name = json_string_value(json_object_get(jt, "name"));
        const mxl_st_entry *e = mxl_safetensors_find(st, name);
        if (!e) {
            fprintf(stderr, "  tensor %s not found\n", name);
            CHECK(e != NULL);
            continue;
        }
        CHECK_EQ_STR(mxl_dtype_name(e->tensor.dtype),
                     json_string_value(json_object_get(jt, "dtype")));
        const json_t *shape = json_object_get(jt, "shape");
        CHECK_EQ_INT(e->tensor.ndim, json_array_size(shape));
        for (int d = 0; d < e->tensor.ndim && (size_t)d < json_array_size(shape); d++)
            CHECK_EQ_INT(e->tensor.shape[d], json_integer_value(json_array_get(shape, (size_t)d)));
        const json_t *off = json_object_get(jt, "data_offsets");
        CHECK_EQ_INT(e->data_begin, json_integer_value(json_array_get(off, 0)));
        CHECK_EQ_INT(e->data_end, json_integer_value(json_array_get(off, 1)));
        uint32_t crc = crc32_ieee(e->tensor.data, e->tensor.nbytes);
        if ((json_int_t)crc != json_integer_value(json_object_get(jt, "crc32"))) {
            fprintf(stderr, "  tensor %s: crc32 %u differs from the fixture\n", name, crc);
            crc_bad++;
        }
    }
    CHECK_EQ_INT(crc_bad, 0);
    /* the directory API picks model.safetensors and agrees */
    char mdir[1100];
    snprintf(mdir, sizeof mdir, "%s/%s", dir, id);
    mxl_st_model *m = NULL;
    if (mxl_st_model_open(mdir, &m, &err) != MXL_OK) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(m != NULL);
    CHECK_EQ_INT(mxl_st_model_file_count(m), 1);
    CHECK_EQ_INT(mxl_st_model_tensor_count(m), mxl_safetensors_count(st));
    CHECK_EQ_INT(mxl_st_model_total_bytes(m), mxl_safetensors_total_bytes(st));
    json_array_foreach(tensors, i, jt) {
        const mxl_st_entry *e = mxl_st_model_find(m, json_string_value(json_object_get(jt, "name")));
        CHECK(e != NULL && e->data_begin == (uint64_t)json_integer_value(
                                                json_array_get(json_object_get(jt, "data_offsets"), 0)));
    }
    mxl_st_model_close(m);
    mxl_safetensors_close(st);
}

TEST(safetensors_real_models_match_reference) {
    char fx[1024];
    snprintf(fx, sizeof fx, "%s/tests/fixtures/safetensors_real_models.json", mxl_test_repo_root());
    json_error_t jerr;
    json_t *root = json_load_file(fx, 0, &jerr);
    if (!root) fprintf(stderr, "  %s: %s\n", fx, jerr.text);
    REQUIRE(root != NULL);
    const json_t *models = json_object_get(root, "models");
    CHECK(json_array_size(models) >= 1);
    size_t i;
    json_t *jm;
    json_array_foreach(models, i, jm) check_real_model(mxl_test_failed_, jm);
    json_decref(root);
}
