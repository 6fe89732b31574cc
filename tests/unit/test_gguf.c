/* test_gguf.c - GGUF reader (io/gguf.h) and GGUF -> model config (models/config_gguf.h).
 *
 * Three kinds of evidence:
 *  - files built byte by byte here (a small writer below) for v2/v3 headers, every value type,
 *    nested arrays, alignment, tensor sizes and every malformed case (truncation at each prefix,
 *    hostile counts and lengths, bad offsets, unknown types, duplicates, v1, big-endian, ...);
 *  - seed files written by gguf-py's GGUFWriter (tests/fixtures/gen_gguf_fixtures.py), whose
 *    contents and offsets the fixture JSON records;
 *  - the two real models, read by gguf-py's GGUFReader into the same fixture JSON. The model files
 *    must be installed (scripts/fetch-models.sh); the test fails, not skips, without them. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "io/gguf.h"
#include "models/config_gguf.h"
#include "test.h"

/* ---- byte writer ------------------------------------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void b_put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = mxl_realloc(b->p, cap);
        if (!b->p) abort();
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void b_le(buf *b, uint64_t v, int n) {
    uint8_t t[8];
    for (int i = 0; i < n; i++) t[i] = (uint8_t)(v >> (8 * i));
    b_put(b, t, (size_t)n);
}
static void b_u8(buf *b, uint8_t v) { b_le(b, v, 1); }
static void b_u16(buf *b, uint16_t v) { b_le(b, v, 2); }
static void b_u32(buf *b, uint32_t v) { b_le(b, v, 4); }
static void b_u64(buf *b, uint64_t v) { b_le(b, v, 8); }
static void b_f32(buf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    b_u32(b, u);
}
static void b_f64(buf *b, double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    b_u64(b, u);
}
static void b_strn(buf *b, const char *s, size_t n) {
    b_u64(b, n);
    b_put(b, s, n);
}
static void b_str(buf *b, const char *s) { b_strn(b, s, strlen(s)); }
static void b_free(buf *b) {
    mxl_free(b->p);
    memset(b, 0, sizeof *b);
}

/* A GGUF under construction: metadata and tensor infos are collected separately and joined by
 * gw_finish (header, kvs, infos, padding to `align`, data). Counts can be overridden to lie. */
typedef struct gw {
    buf kv, ti, data;
    uint64_t n_kv, n_t;
    uint32_t version;
    uint64_t align;
} gw;

static void gw_init(gw *w, uint32_t version) {
    memset(w, 0, sizeof *w);
    w->version = version;
    w->align = 32;
}
static void gw_free(gw *w) {
    b_free(&w->kv);
    b_free(&w->ti);
    b_free(&w->data);
}
/* key + type; the caller appends the value to w->kv */
static buf *gw_key(gw *w, const char *key, uint32_t type) {
    b_str(&w->kv, key);
    b_u32(&w->kv, type);
    w->n_kv++;
    return &w->kv;
}
static void gw_u32(gw *w, const char *key, uint32_t v) { b_u32(gw_key(w, key, MXL_GGUF_TYPE_UINT32), v); }
static void gw_i32(gw *w, const char *key, int32_t v) {
    b_u32(gw_key(w, key, MXL_GGUF_TYPE_INT32), (uint32_t)v);
}
static void gw_f32(gw *w, const char *key, float v) { b_f32(gw_key(w, key, MXL_GGUF_TYPE_FLOAT32), v); }
static void gw_string(gw *w, const char *key, const char *v) { b_str(gw_key(w, key, MXL_GGUF_TYPE_STRING), v); }

/* Tensor info with an explicit data offset (no data written). ne[] innermost first. */
static void gw_tensor_info(gw *w, const char *name, uint32_t type, uint32_t n_dims,
                           const uint64_t *ne, uint64_t offset) {
    b_str(&w->ti, name);
    b_u32(&w->ti, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) b_u64(&w->ti, ne[d]);
    b_u32(&w->ti, type);
    b_u64(&w->ti, offset);
    w->n_t++;
}
/* Tensor info + `nbytes` of data (bytes = running counter) placed at the next aligned offset. */
static uint64_t gw_tensor(gw *w, const char *name, uint32_t type, uint32_t n_dims,
                          const uint64_t *ne, uint64_t nbytes) {
    while (w->data.n % w->align) b_u8(&w->data, 0);
    uint64_t off = w->data.n;
    gw_tensor_info(w, name, type, n_dims, ne, off);
    for (uint64_t i = 0; i < nbytes; i++) b_u8(&w->data, (uint8_t)(i * 7 + 1));
    return off;
}
static void gw_finish(const gw *w, buf *out) {
    memset(out, 0, sizeof *out);
    b_put(out, "GGUF", 4);
    b_u32(out, w->version);
    b_u64(out, w->n_t);
    b_u64(out, w->n_kv);
    b_put(out, w->kv.p, w->kv.n);
    b_put(out, w->ti.p, w->ti.n);
    if (w->data.n) {
        while (out->n % w->align) b_u8(out, 0);
        b_put(out, w->data.p, w->data.n);
    }
}

/* Opens `b` from an exact-size heap copy (so ASan sees any over-read). */
static mxl_status open_copy(const buf *b, size_t len, mxl_gguf **g, uint8_t **copy, mxl_error *err) {
    *copy = mxl_malloc(len ? len : 1);
    if (len) memcpy(*copy, b->p, len);
    mxl_status st = mxl_gguf_open_buffer(*copy, len, "t.gguf", g, err);
    if (st != MXL_OK) {
        mxl_free(*copy);
        *copy = NULL;
    }
    return st;
}

/* Expects opening to fail with `status`, a one-line message starting with the file name and
 * containing every string in `needles` (NULL-terminated). */
static int expect_fail_(const buf *b, mxl_status status, const char *const *needles) {
    mxl_gguf *g = NULL;
    uint8_t *copy = NULL;
    mxl_error err = {0};
    mxl_status st = open_copy(b, b->n, &g, &copy, &err);
    int ok = 1;
    if (st == MXL_OK) {
        fprintf(stderr, "  expected failure, file opened\n");
        mxl_gguf_close(g);
        mxl_free(copy);
        return 0;
    }
    if (st != status) {
        fprintf(stderr, "  status %s, expected %s (%s)\n", mxl_status_name(st), mxl_status_name(status), err.msg);
        ok = 0;
    }
    if (strncmp(err.msg, "t.gguf: ", 8) != 0 || strchr(err.msg, '\n')) {
        fprintf(stderr, "  message not one line naming the file: %s\n", err.msg);
        ok = 0;
    }
    for (int i = 0; needles && needles[i]; i++)
        if (!strstr(err.msg, needles[i])) {
            fprintf(stderr, "  message lacks '%s': %s\n", needles[i], err.msg);
            ok = 0;
        }
    return ok;
}
#define EXPECT_FAIL(b, status, ...)                                                              \
    CHECK(expect_fail_((b), (status), (const char *const[]){__VA_ARGS__, NULL}))

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}
/* Decodes a hex string into out (cap bytes); returns length or -1. */
static long unhex(const char *h, uint8_t *out, size_t cap) {
    size_t n = strlen(h);
    if (n % 2 || n / 2 > cap) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int a = hexval(h[2 * i]), b = hexval(h[2 * i + 1]);
        if (a < 0 || b < 0) return -1;
        out[i] = (uint8_t)(a * 16 + b);
    }
    return (long)(n / 2);
}

static int str_eq(mxl_gguf_str s, const char *c) {
    return s.len == strlen(c) && memcmp(s.data, c, s.len) == 0;
}

/* ---- a file with every value type --------------------------------------------------------- */

static void build_all_types(gw *w, uint32_t version) {
    gw_init(w, version);
    gw_string(w, "general.architecture", "llama");
    b_u8(gw_key(w, "v.u8", MXL_GGUF_TYPE_UINT8), 250);
    b_u8(gw_key(w, "v.i8", MXL_GGUF_TYPE_INT8), (uint8_t)-5);
    b_u16(gw_key(w, "v.u16", MXL_GGUF_TYPE_UINT16), 65535);
    b_u16(gw_key(w, "v.i16", MXL_GGUF_TYPE_INT16), (uint16_t)-300);
    gw_u32(w, "v.u32", 4294967295u);
    gw_i32(w, "v.i32", -70000);
    gw_f32(w, "v.f32", 0.5f);
    b_u8(gw_key(w, "v.bool", MXL_GGUF_TYPE_BOOL), 1);
    b_strn(gw_key(w, "v.str", MXL_GGUF_TYPE_STRING), "a\0b", 3);
    b_u64(gw_key(w, "v.u64", MXL_GGUF_TYPE_UINT64), UINT64_MAX);
    b_u64(gw_key(w, "v.i64", MXL_GGUF_TYPE_INT64), (uint64_t)INT64_MIN);
    b_f64(gw_key(w, "v.f64", MXL_GGUF_TYPE_FLOAT64), -2.25);
    buf *b = gw_key(w, "v.arr_i16", MXL_GGUF_TYPE_ARRAY);
    b_u32(b, MXL_GGUF_TYPE_INT16);
    b_u64(b, 3);
    b_u16(b, 1);
    b_u16(b, (uint16_t)-2);
    b_u16(b, 3);
    b = gw_key(w, "v.arr_str", MXL_GGUF_TYPE_ARRAY);
    b_u32(b, MXL_GGUF_TYPE_STRING);
    b_u64(b, 2);
    b_str(b, "hello");
    b_str(b, "");
    /* [[1.5], [], [[true]]] is not homogeneous in GGUF terms; nested arrays are typed per level:
     * v.nest = ARRAY<ARRAY> of 2: [ARRAY<F64>[1.5, 2.5], ARRAY<ARRAY>[ARRAY<BOOL>[1]]] */
    b = gw_key(w, "v.nest", MXL_GGUF_TYPE_ARRAY);
    b_u32(b, MXL_GGUF_TYPE_ARRAY);
    b_u64(b, 2);
    b_u32(b, MXL_GGUF_TYPE_FLOAT64);
    b_u64(b, 2);
    b_f64(b, 1.5);
    b_f64(b, 2.5);
    b_u32(b, MXL_GGUF_TYPE_ARRAY);
    b_u64(b, 1);
    b_u32(b, MXL_GGUF_TYPE_BOOL);
    b_u64(b, 1);
    b_u8(b, 1);
    b = gw_key(w, "v.empty", MXL_GGUF_TYPE_ARRAY);
    b_u32(b, MXL_GGUF_TYPE_UINT32);
    b_u64(b, 0);
    uint64_t ne1[2] = {4, 3}; /* [3, 4] outermost first */
    gw_tensor(w, "w.f32", MXL_GGML_TYPE_F32, 2, ne1, 48);
    uint64_t ne2[1] = {64};
    gw_tensor(w, "w.q8", MXL_GGML_TYPE_Q8_0, 1, ne2, 68);
}

static void check_all_types(int *mxl_test_failed_, const mxl_gguf *g, uint32_t version) {
    mxl_error err = {0};
    CHECK_EQ_INT(mxl_gguf_version(g), version);
    CHECK_EQ_INT(mxl_gguf_n_kv(g), 17);
    CHECK_EQ_STR(mxl_gguf_kv_at(g, 0)->key, "general.architecture");
    CHECK(mxl_gguf_kv_at(g, 17) == NULL);
    uint64_t u;
    int64_t i;
    double f;
    bool bo;
    mxl_gguf_str s;
    CHECK(mxl_gguf_get_u64(g, "v.u8", &u, &err) == MXL_OK && u == 250);
    CHECK(mxl_gguf_get_i64(g, "v.u8", &i, &err) == MXL_OK && i == 250);
    CHECK(mxl_gguf_get_i64(g, "v.i8", &i, &err) == MXL_OK && i == -5);
    CHECK(mxl_gguf_get_u64(g, "v.i8", &u, &err) == MXL_ERR_FORMAT && strstr(err.msg, "negative"));
    CHECK(mxl_gguf_get_u64(g, "v.u16", &u, &err) == MXL_OK && u == 65535);
    CHECK(mxl_gguf_get_i64(g, "v.i16", &i, &err) == MXL_OK && i == -300);
    CHECK(mxl_gguf_get_u64(g, "v.u32", &u, &err) == MXL_OK && u == 4294967295u);
    CHECK(mxl_gguf_get_i64(g, "v.i32", &i, &err) == MXL_OK && i == -70000);
    CHECK(mxl_gguf_get_f64(g, "v.f32", &f, &err) == MXL_OK && f == 0.5);
    CHECK(mxl_gguf_get_f64(g, "v.i32", &f, &err) == MXL_OK && f == -70000.0);
    CHECK(mxl_gguf_get_u64(g, "v.f32", &u, &err) == MXL_ERR_FORMAT && strstr(err.msg, "FLOAT32"));
    CHECK(mxl_gguf_get_bool(g, "v.bool", &bo, &err) == MXL_OK && bo);
    CHECK(mxl_gguf_get_bool(g, "v.u8", &bo, &err) == MXL_ERR_FORMAT);
    CHECK(mxl_gguf_get_str(g, "v.str", &s, &err) == MXL_OK && s.len == 3 && memcmp(s.data, "a\0b", 3) == 0);
    CHECK(mxl_gguf_get_str(g, "v.u8", &s, &err) == MXL_ERR_FORMAT && strstr(err.msg, "'v.u8'"));
    CHECK(mxl_gguf_get_u64(g, "v.u64", &u, &err) == MXL_OK && u == UINT64_MAX);
    CHECK(mxl_gguf_get_i64(g, "v.u64", &i, &err) == MXL_ERR_FORMAT && strstr(err.msg, "too large"));
    CHECK(mxl_gguf_get_i64(g, "v.i64", &i, &err) == MXL_OK && i == INT64_MIN);
    CHECK(mxl_gguf_get_f64(g, "v.f64", &f, &err) == MXL_OK && f == -2.25);
    CHECK(mxl_gguf_get_u64(g, "v.missing", &u, &err) == MXL_ERR_NOT_FOUND && strstr(err.msg, "v.missing"));
    CHECK(mxl_gguf_find(g, "v.missing") == NULL);
    CHECK(mxl_gguf_find(g, "v.st") == NULL); /* prefix of a key is not the key */
    char sb[8];
    CHECK(mxl_gguf_value_copy_str(&mxl_gguf_find(g, "general.architecture")->value, sb, sizeof sb));
    CHECK_EQ_STR(sb, "llama");
    CHECK(!mxl_gguf_value_copy_str(&mxl_gguf_find(g, "general.architecture")->value, sb, 5));

    const mxl_gguf_array *a;
    mxl_gguf_value e;
    REQUIRE(mxl_gguf_get_array(g, "v.arr_i16", &a, &err) == MXL_OK);
    CHECK(a->elem_type == MXL_GGUF_TYPE_INT16 && a->n == 3 && a->nbytes == 6);
    CHECK(mxl_gguf_array_get(a, 1, &e) && e.type == MXL_GGUF_TYPE_INT16 && e.v.i64 == -2);
    CHECK(mxl_gguf_array_get(a, 2, &e) && e.v.i64 == 3);
    CHECK(!mxl_gguf_array_get(a, 3, &e));
    CHECK(mxl_gguf_get_array(g, "v.u8", &a, &err) == MXL_ERR_FORMAT);
    REQUIRE(mxl_gguf_get_array(g, "v.arr_str", &a, &err) == MXL_OK);
    CHECK(a->n == 2 && str_eq(a->strs[0], "hello") && a->strs[1].len == 0);
    CHECK(mxl_gguf_array_get(a, 0, &e) && e.type == MXL_GGUF_TYPE_STRING && str_eq(e.v.str, "hello"));
    REQUIRE(mxl_gguf_get_array(g, "v.nest", &a, &err) == MXL_OK);
    REQUIRE(a->elem_type == MXL_GGUF_TYPE_ARRAY && a->n == 2);
    REQUIRE(mxl_gguf_array_get(a, 0, &e) && e.type == MXL_GGUF_TYPE_ARRAY);
    mxl_gguf_value e2;
    CHECK(e.v.arr.elem_type == MXL_GGUF_TYPE_FLOAT64 && e.v.arr.n == 2);
    CHECK(mxl_gguf_array_get(&e.v.arr, 1, &e2) && e2.v.f64 == 2.5);
    REQUIRE(mxl_gguf_array_get(a, 1, &e) && e.v.arr.elem_type == MXL_GGUF_TYPE_ARRAY && e.v.arr.n == 1);
    REQUIRE(mxl_gguf_array_get(&e.v.arr, 0, &e2) && e2.v.arr.elem_type == MXL_GGUF_TYPE_BOOL);
    mxl_gguf_value e3;
    CHECK(mxl_gguf_array_get(&e2.v.arr, 0, &e3) && e3.type == MXL_GGUF_TYPE_BOOL && e3.v.b);
    REQUIRE(mxl_gguf_get_array(g, "v.empty", &a, &err) == MXL_OK);
    CHECK(a->n == 0 && !mxl_gguf_array_get(a, 0, &e));

    CHECK_EQ_INT(mxl_gguf_n_tensors(g), 2);
    CHECK_EQ_INT(mxl_gguf_alignment(g), 32);
    CHECK_EQ_INT(mxl_gguf_data_offset(g) % 32, 0);
    const mxl_gguf_tensor_info *t = mxl_gguf_find_tensor(g, "w.f32");
    REQUIRE(t && t == mxl_gguf_tensor_at(g, 0));
    CHECK(t->tensor.dtype == MXL_DTYPE_F32 && t->tensor.ndim == 2);
    CHECK(t->tensor.shape[0] == 3 && t->tensor.shape[1] == 4 && t->tensor.nbytes == 48);
    CHECK(t->file_offset == mxl_gguf_data_offset(g) && t->offset == 0);
    CHECK(((const uint8_t *)t->tensor.data)[1] == 8);
    t = mxl_gguf_find_tensor(g, "w.q8");
    REQUIRE(t);
    CHECK(t->tensor.dtype == MXL_DTYPE_Q8_0 && t->tensor.nbytes == 68 && t->offset == 64);
    CHECK(mxl_gguf_find_tensor(g, "w") == NULL && mxl_gguf_tensor_at(g, 2) == NULL);
    CHECK_EQ_INT(mxl_gguf_tensor_bytes_total(g), 48 + 68);
}

TEST(gguf_value_types_v2_v3) {
    for (uint32_t version = 2; version <= 3; version++) {
        gw w;
        buf b;
        build_all_types(&w, version);
        gw_finish(&w, &b);
        mxl_gguf *g = NULL;
        uint8_t *copy = NULL;
        mxl_error err = {0};
        REQUIRE(open_copy(&b, b.n, &g, &copy, &err) == MXL_OK);
        CHECK_EQ_INT(mxl_gguf_file_size(g), b.n);
        CHECK_EQ_STR(mxl_gguf_name(g), "t.gguf");
        check_all_types(mxl_test_failed_, g, version);
        mxl_gguf_close(g);
        mxl_free(copy);

        /* same bytes through a real file and mmap */
        const char *path = mxl_test_write_temp(".gguf", b.p, b.n);
        REQUIRE(mxl_gguf_open(path, &g, &err) == MXL_OK);
        CHECK_EQ_STR(mxl_gguf_name(g), path);
        check_all_types(mxl_test_failed_, g, version);
        mxl_gguf_close(g);
        unlink(path);
        gw_free(&w);
        b_free(&b);
    }
}

TEST(gguf_open_missing_file) {
    mxl_gguf *g = (mxl_gguf *)1;
    mxl_error err = {0};
    CHECK(mxl_gguf_open("/nonexistent/x.gguf", &g, &err) == MXL_ERR_NOT_FOUND);
    CHECK(g == NULL && strstr(err.msg, "/nonexistent/x.gguf"));
    mxl_gguf_close(NULL);
}

/* Every strict prefix of a valid file is refused cleanly (the sanitizer build checks that no
 * prefix reads out of bounds). */
TEST(gguf_truncated_every_prefix) {
    gw w;
    buf b;
    build_all_types(&w, 3);
    gw_finish(&w, &b);
    int opened = 0;
    for (size_t len = 0; len < b.n; len++) {
        mxl_gguf *g = NULL;
        uint8_t *copy = NULL;
        mxl_error err = {0};
        mxl_status st = open_copy(&b, len, &g, &copy, &err);
        if (st == MXL_OK) {
            opened++;
            mxl_gguf_close(g);
            mxl_free(copy);
        } else if (strchr(err.msg, '\n') || strncmp(err.msg, "t.gguf: ", 8) != 0) {
            fprintf(stderr, "  prefix %zu: bad message %s\n", len, err.msg);
            CHECK(0);
        }
    }
    CHECK_EQ_INT(opened, 0);
    gw_free(&w);
    b_free(&b);
}

TEST(gguf_header_errors) {
    buf b = {0};
    b_put(&b, "GGUX", 4);
    b_u32(&b, 3);
    b_u64(&b, 0);
    b_u64(&b, 0);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "bad magic");
    memcpy(b.p, "GGUF", 4);
    b.p[4] = 1; /* v1 */
    EXPECT_FAIL(&b, MXL_ERR_UNSUPPORTED, "version 1");
    b.p[4] = 4;
    EXPECT_FAIL(&b, MXL_ERR_UNSUPPORTED, "version 4");
    b.p[4] = 0;
    b.p[7] = 3; /* big-endian 3 */
    EXPECT_FAIL(&b, MXL_ERR_UNSUPPORTED, "big-endian");
    b.p[7] = 0;
    b.p[4] = 3;
    mxl_gguf *g = NULL;
    uint8_t *copy = NULL;
    mxl_error err;
    /* an empty v3 file (no kvs, no tensors) is valid */
    REQUIRE(open_copy(&b, b.n, &g, &copy, &err) == MXL_OK);
    CHECK(mxl_gguf_n_kv(g) == 0 && mxl_gguf_n_tensors(g) == 0 && mxl_gguf_find(g, "x") == NULL);
    CHECK(mxl_gguf_find_tensor(g, "x") == NULL && mxl_gguf_tensor_bytes_total(g) == 0);
    mxl_gguf_close(g);
    mxl_free(copy);
    /* hostile counts fail before allocating */
    memcpy(b.p + 8, &(uint64_t){(uint64_t)1 << 60}, 8);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "tensors");
    memset(b.p + 8, 0, 8);
    memcpy(b.p + 16, &(uint64_t){(uint64_t)1 << 60}, 8);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "metadata entries");
    memset(b.p + 16, 0xff, 8);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "metadata entries");
    b_free(&b);
    b_put(&b, "GGUF\x03\0\0", 7); /* truncated version */
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "truncated");
    b_free(&b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "bad magic"); /* empty buffer */
}

TEST(gguf_hostile_lengths) {
    gw w;
    buf b;
    /* key length 2^63 */
    gw_init(&w, 3);
    b_u64(&w.kv, (uint64_t)1 << 63);
    b_put(&w.kv, "abcdefgh", 8);
    w.n_kv = 1;
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "metadata entry 0", "key");
    gw_free(&w);
    b_free(&b);
    /* string value length 2^60 */
    gw_init(&w, 3);
    buf *k = gw_key(&w, "s", MXL_GGUF_TYPE_STRING);
    b_u64(k, (uint64_t)1 << 60);
    b_put(k, "xyz", 3);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "'s'", "string length");
    gw_free(&w);
    b_free(&b);
    /* array counts 2^60 for fixed, string and nested element types */
    const uint32_t ets[] = {MXL_GGUF_TYPE_UINT8, MXL_GGUF_TYPE_STRING, MXL_GGUF_TYPE_ARRAY,
                            MXL_GGUF_TYPE_FLOAT64};
    for (size_t i = 0; i < sizeof ets / sizeof ets[0]; i++) {
        gw_init(&w, 3);
        k = gw_key(&w, "arr", MXL_GGUF_TYPE_ARRAY);
        b_u32(k, ets[i]);
        b_u64(k, (uint64_t)1 << 60);
        b_u64(k, 0);
        gw_finish(&w, &b);
        EXPECT_FAIL(&b, MXL_ERR_FORMAT, "'arr'", "does not fit");
        gw_free(&w);
        b_free(&b);
    }
    /* tensor name length 2^62 */
    gw_init(&w, 3);
    b_u64(&w.ti, (uint64_t)1 << 62);
    b_put(&w.ti, "0123456789abcdef0123456789abcdef", 32);
    w.n_t = 1;
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "tensor info 0", "name");
    gw_free(&w);
    b_free(&b);
}

TEST(gguf_bad_value_types_and_nesting) {
    gw w;
    buf b;
    gw_init(&w, 3);
    b_u32(gw_key(&w, "bad\ntype", 13), 0);
    gw_finish(&w, &b);
    /* the newline in the key is escaped so the message stays one line */
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "bad\\x0atype", "unknown value type 13");
    gw_free(&w);
    b_free(&b);
    gw_init(&w, 3);
    buf *k = gw_key(&w, "arr", MXL_GGUF_TYPE_ARRAY);
    b_u32(k, 42);
    b_u64(k, 1);
    b_u64(k, 0);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "'arr'", "unknown value type 42");
    gw_free(&w);
    b_free(&b);
    /* nesting: depth MXL_GGUF_MAX_ARRAY_DEPTH is fine, one more is refused */
    for (int depth = MXL_GGUF_MAX_ARRAY_DEPTH; depth <= MXL_GGUF_MAX_ARRAY_DEPTH + 1; depth++) {
        gw_init(&w, 3);
        k = gw_key(&w, "deep", MXL_GGUF_TYPE_ARRAY);
        for (int d = 1; d < depth; d++) {
            b_u32(k, MXL_GGUF_TYPE_ARRAY);
            b_u64(k, 1);
        }
        b_u32(k, MXL_GGUF_TYPE_UINT8);
        b_u64(k, 1);
        b_u8(k, 42);
        gw_finish(&w, &b);
        if (depth == MXL_GGUF_MAX_ARRAY_DEPTH) {
            mxl_gguf *g;
            uint8_t *copy;
            mxl_error err;
            REQUIRE(open_copy(&b, b.n, &g, &copy, &err) == MXL_OK);
            mxl_gguf_value v = mxl_gguf_find(g, "deep")->value;
            for (int d = 1; d < depth; d++) {
                mxl_gguf_value inner;
                REQUIRE(mxl_gguf_array_get(&v.v.arr, 0, &inner));
                v = inner;
            }
            mxl_gguf_value leaf;
            CHECK(mxl_gguf_array_get(&v.v.arr, 0, &leaf) && leaf.v.u64 == 42);
            mxl_gguf_close(g);
            mxl_free(copy);
        } else {
            EXPECT_FAIL(&b, MXL_ERR_FORMAT, "'deep'", "nested deeper");
        }
        gw_free(&w);
        b_free(&b);
    }
}

/* Getter messages escape keys too: a file key with a newline still yields a one-line message. */
TEST(gguf_getter_messages_one_line) {
    gw w;
    buf b;
    gw_init(&w, 3);
    b_u8(gw_key(&w, "neg\nkey", MXL_GGUF_TYPE_INT8), 0xff);
    gw_finish(&w, &b);
    mxl_gguf *g;
    uint8_t *copy;
    mxl_error err = {0};
    REQUIRE(open_copy(&b, b.n, &g, &copy, &err) == MXL_OK);
    uint64_t u;
    mxl_gguf_str s;
    CHECK(mxl_gguf_get_u64(g, "neg\nkey", &u, &err) == MXL_ERR_FORMAT && !strchr(err.msg, '\n') &&
          strstr(err.msg, "neg\\x0akey") && strstr(err.msg, "negative (-1)"));
    CHECK(mxl_gguf_get_str(g, "neg\nkey", &s, &err) == MXL_ERR_FORMAT && !strchr(err.msg, '\n'));
    CHECK(mxl_gguf_get_str(g, "new\nkey", &s, &err) == MXL_ERR_NOT_FOUND && !strchr(err.msg, '\n'));
    mxl_gguf_close(g);
    mxl_free(copy);
    gw_free(&w);
    b_free(&b);
}

TEST(gguf_duplicates) {
    gw w;
    buf b;
    gw_init(&w, 3);
    gw_u32(&w, "a.b", 1);
    gw_u32(&w, "a.c", 2);
    gw_u32(&w, "a.b", 3);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "duplicate metadata key 'a.b'");
    gw_free(&w);
    b_free(&b);
    gw_init(&w, 3);
    uint64_t ne[1] = {8};
    gw_tensor(&w, "t0", MXL_GGML_TYPE_F32, 1, ne, 32);
    gw_tensor(&w, "t0", MXL_GGML_TYPE_F32, 1, ne, 32);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "duplicate tensor name 't0'");
    gw_free(&w);
    b_free(&b);
}

TEST(gguf_alignment) {
    /* custom alignment 64: data section and tensor offsets on 64-byte boundaries */
    gw w;
    buf b;
    gw_init(&w, 3);
    gw_u32(&w, "general.alignment", 64);
    w.align = 64;
    uint64_t ne[1] = {8};
    gw_tensor(&w, "a", MXL_GGML_TYPE_F32, 1, ne, 32);
    gw_tensor(&w, "b", MXL_GGML_TYPE_F32, 1, ne, 32);
    gw_finish(&w, &b);
    mxl_gguf *g;
    uint8_t *copy;
    mxl_error err;
    REQUIRE(open_copy(&b, b.n, &g, &copy, &err) == MXL_OK);
    CHECK_EQ_INT(mxl_gguf_alignment(g), 64);
    CHECK_EQ_INT(mxl_gguf_data_offset(g) % 64, 0);
    CHECK_EQ_INT(mxl_gguf_tensor_at(g, 1)->offset, 64);
    CHECK_EQ_INT(mxl_gguf_tensor_at(g, 1)->file_offset, mxl_gguf_data_offset(g) + 64);
    mxl_gguf_close(g);
    mxl_free(copy);
    gw_free(&w);
    b_free(&b);

    /* a 32-aligned offset is misaligned under alignment 64 */
    gw_init(&w, 3);
    gw_u32(&w, "general.alignment", 64);
    w.align = 64;
    gw_tensor_info(&w, "mis", MXL_GGML_TYPE_F32, 1, ne, 32);
    for (int i = 0; i < 128; i++) b_u8(&w.data, 0);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "'mis'", "not a multiple of the alignment 64");
    gw_free(&w);
    b_free(&b);

    const uint32_t bad[] = {0, 3, 48, 0x80000000u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gw_init(&w, 3);
        gw_u32(&w, "general.alignment", bad[i]);
        gw_finish(&w, &b);
        EXPECT_FAIL(&b, MXL_ERR_FORMAT, "general.alignment", "power of two");
        gw_free(&w);
        b_free(&b);
    }
    gw_init(&w, 3);
    gw_string(&w, "general.alignment", "32");
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "general.alignment", "STRING");
    gw_free(&w);
    b_free(&b);
}

TEST(gguf_tensor_placement_errors) {
    gw w;
    buf b;
    uint64_t ne[2] = {32, 2};
    /* beyond the end of the file */
    gw_init(&w, 3);
    gw_tensor_info(&w, "far", MXL_GGML_TYPE_Q4_0, 2, ne, 1024);
    for (int i = 0; i < 64; i++) b_u8(&w.data, 0);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "'far'", "past the end");
    gw_free(&w);
    b_free(&b);
    /* offset + nbytes overflows u64 */
    gw_init(&w, 3);
    gw_tensor_info(&w, "wrap", MXL_GGML_TYPE_Q4_0, 2, ne, UINT64_MAX - 31);
    for (int i = 0; i < 64; i++) b_u8(&w.data, 0);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "'wrap'", "past the end");
    gw_free(&w);
    b_free(&b);
    /* data cut short by one byte */
    gw_init(&w, 3);
    gw_tensor(&w, "short", MXL_GGML_TYPE_Q4_0, 2, ne, 36);
    gw_finish(&w, &b);
    b.n--;
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "'short'", "past the end");
    gw_free(&w);
    b_free(&b);
    /* overlap: same offset, and a partial overlap */
    const uint64_t second[] = {0, 32};
    for (int i = 0; i < 2; i++) {
        gw_init(&w, 3);
        gw_tensor_info(&w, "x0", MXL_GGML_TYPE_F32, 2, ne, 0); /* 256 bytes */
        gw_tensor_info(&w, "x1", MXL_GGML_TYPE_F32, 2, ne, second[i]);
        for (int j = 0; j < 512; j++) b_u8(&w.data, 0);
        gw_finish(&w, &b);
        EXPECT_FAIL(&b, MXL_ERR_FORMAT, "overlaps", "'x0'", "'x1'");
        gw_free(&w);
        b_free(&b);
    }
    /* innermost dim not whole blocks */
    gw_init(&w, 3);
    uint64_t ne_bad[2] = {16, 2};
    gw_tensor(&w, "blk.0.q", MXL_GGML_TYPE_Q4_0, 2, ne_bad, 18);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "'blk.0.q'", "whole number of Q4_0 blocks");
    gw_free(&w);
    b_free(&b);
    /* too many dims; element count overflow; dim with the sign bit set */
    gw_init(&w, 3);
    uint64_t ne9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    gw_tensor_info(&w, "nine", MXL_GGML_TYPE_F32, 9, ne9, 0);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "'nine'", "9 dimensions");
    gw_free(&w);
    b_free(&b);
    gw_init(&w, 3);
    uint64_t ne_big[2] = {(uint64_t)1 << 40, (uint64_t)1 << 40};
    gw_tensor_info(&w, "big", MXL_GGML_TYPE_F32, 2, ne_big, 0);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_OVERFLOW, "'big'", "overflows");
    gw_free(&w);
    b_free(&b);
    /* a zero dim does not excuse an absurd product of the others */
    gw_init(&w, 3);
    uint64_t ne_zero[3] = {(uint64_t)1 << 40, (uint64_t)1 << 40, 0};
    gw_tensor_info(&w, "zero", MXL_GGML_TYPE_F32, 3, ne_zero, 0);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_OVERFLOW, "'zero'", "overflows");
    gw_free(&w);
    b_free(&b);
    gw_init(&w, 3);
    uint64_t ne_bytes[2] = {(uint64_t)1 << 32, (uint64_t)1 << 30}; /* 2^62 elems x 4 bytes */
    gw_tensor_info(&w, "bytes", MXL_GGML_TYPE_F32, 2, ne_bytes, 0);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_OVERFLOW, "'bytes'", "byte size overflows");
    gw_free(&w);
    b_free(&b);
    gw_init(&w, 3);
    uint64_t ne_neg[1] = {UINT64_MAX};
    gw_tensor_info(&w, "neg", MXL_GGML_TYPE_F32, 1, ne_neg, 0);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_FORMAT, "'neg'", "dimension 0");
    gw_free(&w);
    b_free(&b);
}

TEST(gguf_unknown_tensor_type_named) {
    gw w;
    buf b;
    uint64_t ne[2] = {256, 4};
    const struct { uint32_t id; const char *name; } refused[] = {
        {40, "NVFP4"}, {41, "Q1_0"}, {9, "Q8_1"}, {15, "Q8_K"},
        {4, "Q4_2"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        gw_init(&w, 3);
        gw_tensor_info(&w, "blk.0.attn_q.weight", refused[i].id, 2, ne, 0);
        for (int j = 0; j < 2048; j++) b_u8(&w.data, 0);
        gw_finish(&w, &b);
        char want[96];
        snprintf(want, sizeof want, "tensor 'blk.0.attn_q.weight' has type %s, which mlxcel does not load yet",
                 refused[i].name);
        EXPECT_FAIL(&b, MXL_ERR_UNSUPPORTED, want);
        gw_free(&w);
        b_free(&b);
    }
    gw_init(&w, 3);
    gw_tensor_info(&w, "odd", 99, 2, ne, 0);
    gw_finish(&w, &b);
    EXPECT_FAIL(&b, MXL_ERR_UNSUPPORTED, "'odd'", "unknown ggml type id 99");
    gw_free(&w);
    b_free(&b);
}

/* Byte size of each loadable tensor type: a [3, 2 blocks] tensor must take 6 blocks. The block
 * sizes come from ggml-common.h (sizeof(block_q4_0) = 2 + 16, ...). */
TEST(gguf_tensor_type_sizes) {
    const struct { uint32_t id; mxl_dtype dt; uint32_t be, bb; } types[] = {
        {0, MXL_DTYPE_F32, 1, 4},      {1, MXL_DTYPE_F16, 1, 2},      {30, MXL_DTYPE_BF16, 1, 2},
        {2, MXL_DTYPE_Q4_0, 32, 18},   {3, MXL_DTYPE_Q4_1, 32, 20},   {6, MXL_DTYPE_Q5_0, 32, 22},
        {7, MXL_DTYPE_Q5_1, 32, 24},   {8, MXL_DTYPE_Q8_0, 32, 34},   {10, MXL_DTYPE_Q2_K, 256, 84},
        {11, MXL_DTYPE_Q3_K, 256, 110}, {12, MXL_DTYPE_Q4_K, 256, 144}, {13, MXL_DTYPE_Q5_K, 256, 176},
        {14, MXL_DTYPE_Q6_K, 256, 210}, {24, MXL_DTYPE_I8, 1, 1},     {25, MXL_DTYPE_I16, 1, 2},
        {26, MXL_DTYPE_I32, 1, 4},     {27, MXL_DTYPE_I64, 1, 8},     {28, MXL_DTYPE_F64, 1, 8},
        {39, MXL_DTYPE_MXFP4, 32, 17}, {34, MXL_DTYPE_TQ1_0, 256, 54}, {35, MXL_DTYPE_TQ2_0, 256, 66},
        {20, MXL_DTYPE_IQ4_NL, 32, 18}, {23, MXL_DTYPE_IQ4_XS, 256, 136},
        {16, MXL_DTYPE_IQ2_XXS, 256, 66}, {17, MXL_DTYPE_IQ2_XS, 256, 74}, {22, MXL_DTYPE_IQ2_S, 256, 82},
        {18, MXL_DTYPE_IQ3_XXS, 256, 98}, {21, MXL_DTYPE_IQ3_S, 256, 110}, {19, MXL_DTYPE_IQ1_S, 256, 50},
        {29, MXL_DTYPE_IQ1_M, 256, 56},
    };
    gw w;
    gw_init(&w, 3);
    char names[32][16];
    uint64_t offs[32];
    size_t n = sizeof types / sizeof types[0];
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "t%zu", i);
        uint64_t ne[2] = {2ull * types[i].be, 3};
        offs[i] = gw_tensor(&w, names[i], types[i].id, 2, ne, 6ull * types[i].bb);
    }
    buf b;
    gw_finish(&w, &b);
    mxl_gguf *g;
    uint8_t *copy;
    mxl_error err;
    REQUIRE(open_copy(&b, b.n, &g, &copy, &err) == MXL_OK);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const mxl_gguf_tensor_info *t = mxl_gguf_find_tensor(g, names[i]);
        REQUIRE(t);
        CHECK_EQ_INT(t->tensor.dtype, types[i].dt);
        CHECK_EQ_INT(t->tensor.nbytes, 6ull * types[i].bb);
        CHECK_EQ_INT(t->tensor.shape[0], 3);
        CHECK_EQ_INT(t->tensor.shape[1], 2ull * types[i].be);
        CHECK_EQ_INT(t->offset, offs[i]);
        CHECK(t->tensor.data == copy + mxl_gguf_data_offset(g) + offs[i]);
        /* the dtype table agrees with the ggml table */
        uint64_t rb;
        CHECK(mxl_dtype_row_bytes(types[i].dt, 6ull * types[i].be, &rb) == 0 && rb == 6ull * types[i].bb);
        total += 6ull * types[i].bb;
    }
    CHECK_EQ_INT(mxl_gguf_tensor_bytes_total(g), total);
    mxl_gguf_close(g);
    mxl_free(copy);
    gw_free(&w);
    b_free(&b);
}

/* ---- fixtures from gguf-py ---------------------------------------------------------------- */

static json_t *load_fixture(int *mxl_test_failed_) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/gguf_real_models.json", mxl_test_repo_root());
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        fprintf(stderr, "  cannot read %s: %s (run tests/fixtures/gen_gguf_fixtures.py)\n", path, je.text);
        CHECK(0);
    }
    return root;
}

static const char *jstr(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }
static long long jint(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

/* The ggml type table (ids, names, block sizes) agrees with gguf-py's. */
TEST(gguf_type_table_matches_gguf_py) {
    json_t *root = load_fixture(mxl_test_failed_);
    REQUIRE(root);
    json_t *types = json_object_get(root, "ggml_types");
    REQUIRE(json_array_size(types) > 30);
    size_t i;
    json_t *t;
    json_array_foreach(types, i, t) {
        uint32_t id = (uint32_t)jint(t, "id");
        const char *name = mxl_ggml_type_name(id);
        CHECK(name && strcmp(name, jstr(t, "name")) == 0);
        uint32_t be = 0, bb = 0;
        CHECK(mxl_ggml_type_block(id, &be, &bb));
        CHECK_EQ_INT(be, jint(t, "block_elems"));
        /* gguf-py still lists Q8_1 with two f32 scales (40 bytes); ggml's block_q8_1 has two
         * f16 (2*2 + 32 = 36). Nobody stores Q8_1 in files; we follow ggml. */
        if (id != MXL_GGML_TYPE_Q8_1) CHECK_EQ_INT(bb, jint(t, "block_bytes"));
        /* a loadable type's dtype has the same block layout */
        mxl_dtype dt = mxl_ggml_type_to_dtype(id);
        if (dt != MXL_DTYPE_INVALID) {
            CHECK_EQ_INT(mxl_dtype_get_info(dt)->block_elems, be);
            CHECK_EQ_INT(mxl_dtype_get_info(dt)->block_bytes, bb);
        }
    }
    json_decref(root);
}

/* Compares a value with its fixture description (see expect() in the generator). */
static int value_matches(const mxl_gguf_value *v, json_t *e, const char *where) {
    const char *type = jstr(e, "type");
    if (!type || strcmp(type, mxl_gguf_type_name(v->type)) != 0) {
        fprintf(stderr, "  %s: type %s, expected %s\n", where, mxl_gguf_type_name(v->type), type);
        return 0;
    }
    if (json_object_get(e, "int")) {
        const char *s = jstr(e, "int");
        if (s[0] == '-') {
            int64_t x;
            if (!mxl_gguf_value_as_i64(v, &x) || x != strtoll(s, NULL, 10)) goto bad;
        } else {
            uint64_t x;
            if (!mxl_gguf_value_as_u64(v, &x) || x != strtoull(s, NULL, 10)) goto bad;
        }
        return 1;
    }
    if (json_object_get(e, "float")) {
        double x;
        if (!mxl_gguf_value_as_f64(v, &x) || x != json_real_value(json_object_get(e, "float"))) goto bad;
        return 1;
    }
    if (json_object_get(e, "bool")) {
        if (v->v.b != json_is_true(json_object_get(e, "bool"))) goto bad;
        return 1;
    }
    if (json_object_get(e, "hex")) {
        uint8_t tmp[256];
        long n = unhex(jstr(e, "hex"), tmp, sizeof tmp);
        if (n < 0 || v->v.str.len != (uint64_t)n || memcmp(v->v.str.data, tmp, (size_t)n) != 0) goto bad;
        return 1;
    }
    json_t *items = json_object_get(e, "items");
    if (!items || strcmp(jstr(e, "elem_type"), mxl_gguf_type_name(v->v.arr.elem_type)) != 0 ||
        v->v.arr.n != json_array_size(items))
        goto bad;
    for (size_t i = 0; i < v->v.arr.n; i++) {
        mxl_gguf_value el;
        char w2[256];
        snprintf(w2, sizeof w2, "%s[%zu]", where, i);
        if (!mxl_gguf_array_get(&v->v.arr, i, &el) || !value_matches(&el, json_array_get(items, i), w2))
            return 0;
    }
    return 1;
bad:
    fprintf(stderr, "  %s: value differs from the fixture\n", where);
    return 0;
}

static void check_tensor_fixture(int *mxl_test_failed_, const mxl_gguf *g,
                                 const mxl_gguf_tensor_info *t, json_t *e) {
    REQUIRE(t);
    CHECK_EQ_STR(t->name, jstr(e, "name"));
    CHECK_EQ_STR(mxl_ggml_type_name(t->ggml_type), jstr(e, "type"));
    json_t *shape = json_object_get(e, "shape");
    CHECK_EQ_INT(t->tensor.ndim, json_array_size(shape));
    for (int d = 0; d < t->tensor.ndim && d < (int)json_array_size(shape); d++)
        CHECK_EQ_INT(t->tensor.shape[d], json_integer_value(json_array_get(shape, (size_t)d)));
    CHECK_EQ_INT(t->tensor.nbytes, jint(e, "n_bytes"));
    CHECK_EQ_INT(t->file_offset, jint(e, "file_offset"));
    CHECK_EQ_INT(t->file_offset, mxl_gguf_data_offset(g) + t->offset);
}

TEST(gguf_seed_files_match_gguf_py) {
    json_t *root = load_fixture(mxl_test_failed_);
    REQUIRE(root);
    json_t *seeds = json_object_get(root, "synthetic");
    REQUIRE(json_array_size(seeds) >= 4);
    size_t i;
    json_t *s;
    json_array_foreach(seeds, i, s) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", mxl_test_repo_root(), jstr(s, "path"));
        mxl_gguf *g;
        mxl_error err = {0};
        mxl_status st = mxl_gguf_open(path, &g, &err);
        if (st != MXL_OK) fprintf(stderr, "  %s\n", err.msg);
        REQUIRE(st == MXL_OK);
        CHECK_EQ_INT(mxl_gguf_version(g), jint(s, "version"));
        CHECK_EQ_INT(mxl_gguf_file_size(g), jint(s, "file_size"));
        CHECK_EQ_INT(mxl_gguf_alignment(g), jint(s, "alignment"));
        CHECK_EQ_INT(mxl_gguf_data_offset(g), jint(s, "data_offset"));
        CHECK_EQ_INT(mxl_gguf_tensor_bytes_total(g), jint(s, "tensor_bytes_total"));
        json_t *kvs = json_object_get(s, "kvs");
        CHECK_EQ_INT(mxl_gguf_n_kv(g), json_array_size(kvs));
        for (size_t k = 0; k < json_array_size(kvs) && k < mxl_gguf_n_kv(g); k++) {
            json_t *e = json_array_get(kvs, k);
            const mxl_gguf_kv *kv = mxl_gguf_kv_at(g, k);
            CHECK_EQ_STR(kv->key, jstr(e, "key"));
            CHECK(mxl_gguf_find(g, jstr(e, "key")) == kv);
            CHECK(value_matches(&kv->value, e, kv->key));
        }
        json_t *ts = json_object_get(s, "tensors");
        CHECK_EQ_INT(mxl_gguf_n_tensors(g), json_array_size(ts));
        for (size_t k = 0; k < json_array_size(ts) && k < mxl_gguf_n_tensors(g); k++) {
            json_t *e = json_array_get(ts, k);
            check_tensor_fixture(mxl_test_failed_, g, mxl_gguf_tensor_at(g, k), e);
            CHECK(mxl_gguf_find_tensor(g, jstr(e, "name")) == mxl_gguf_tensor_at(g, k));
        }
        mxl_gguf_close(g);
    }
    json_decref(root);
}

/* Path of a real model from the store; fails the test with a pointer to the fetch script. */
static int model_path(const char *rel, char *out, size_t cap) {
    snprintf(out, cap, "%s", mxl_test_model_path(rel));
    struct stat st;
    if (stat(out, &st) != 0) {
        fprintf(stderr, "  model file %s is missing: run scripts/fetch-models.sh\n", out);
        return 0;
    }
    return 1;
}

TEST(gguf_real_models_match_gguf_py) {
    json_t *root = load_fixture(mxl_test_failed_);
    REQUIRE(root);
    json_t *models = json_object_get(root, "models");
    REQUIRE(json_array_size(models) == 2);
    size_t mi;
    json_t *m;
    json_array_foreach(models, mi, m) {
        char path[2048];
        if (!model_path(jstr(m, "path"), path, sizeof path)) {
            CHECK(0);
            continue;
        }
        mxl_gguf *g;
        mxl_error err = {0};
        mxl_status st = mxl_gguf_open(path, &g, &err);
        if (st != MXL_OK) fprintf(stderr, "  %s\n", err.msg);
        REQUIRE(st == MXL_OK);
        CHECK_EQ_INT(mxl_gguf_file_size(g), jint(m, "file_size"));
        CHECK_EQ_INT(mxl_gguf_version(g), jint(m, "version"));
        CHECK_EQ_INT(mxl_gguf_n_kv(g), jint(m, "kv_count"));
        CHECK_EQ_INT(mxl_gguf_n_tensors(g), jint(m, "tensor_count"));
        CHECK_EQ_INT(mxl_gguf_alignment(g), jint(m, "alignment"));
        CHECK_EQ_INT(mxl_gguf_data_offset(g), jint(m, "data_offset"));
        CHECK_EQ_INT(mxl_gguf_tensor_bytes_total(g), jint(m, "tensor_bytes_total"));

        /* every key, in order, with its (nested) type */
        json_t *kvs = json_object_get(m, "kvs");
        CHECK_EQ_INT(json_array_size(kvs), mxl_gguf_n_kv(g));
        for (size_t k = 0; k < json_array_size(kvs) && k < mxl_gguf_n_kv(g); k++) {
            const mxl_gguf_kv *kv = mxl_gguf_kv_at(g, k);
            char ts[128];
            const mxl_gguf_value *v = &kv->value;
            if (v->type == MXL_GGUF_TYPE_ARRAY)
                snprintf(ts, sizeof ts, "ARRAY[%s]", mxl_gguf_type_name(v->v.arr.elem_type));
            else
                snprintf(ts, sizeof ts, "%s", mxl_gguf_type_name(v->type));
            CHECK_EQ_STR(kv->key, jstr(json_array_get(kvs, k), "key"));
            CHECK_EQ_STR(ts, jstr(json_array_get(kvs, k), "type"));
        }

        /* tensor type histogram */
        json_t *counts = json_object_get(m, "type_counts");
        uint64_t hist[64] = {0};
        for (uint64_t t = 0; t < mxl_gguf_n_tensors(g); t++) {
            uint32_t ty = mxl_gguf_tensor_at(g, t)->ggml_type;
            if (ty < 64) hist[ty]++;
        }
        size_t n_types = 0;
        for (uint32_t ty = 0; ty < 64; ty++) {
            if (!hist[ty]) continue;
            n_types++;
            json_t *c = json_object_get(counts, mxl_ggml_type_name(ty));
            CHECK(c && (uint64_t)json_integer_value(c) == hist[ty]);
        }
        CHECK_EQ_INT(n_types, json_object_size(counts));

        size_t ti;
        json_t *te;
        json_array_foreach(json_object_get(m, "tensors"), ti, te) {
            const mxl_gguf_tensor_info *t = mxl_gguf_tensor_at(g, (uint64_t)jint(te, "index"));
            check_tensor_fixture(mxl_test_failed_, g, t, te);
            CHECK(mxl_gguf_find_tensor(g, jstr(te, "name")) == t);
        }

        /* architecture hyper-parameters straight from the keys */
        const char *arch = jstr(m, "architecture");
        mxl_gguf_str as;
        CHECK(mxl_gguf_get_str(g, "general.architecture", &as, &err) == MXL_OK && str_eq(as, arch));
        const char *fields[][2] = {{"block_count", "block_count"},
                                   {"embedding_length", "embedding_length"},
                                   {"attention.head_count", "head_count"},
                                   {"attention.head_count_kv", "head_count_kv"},
                                   {"context_length", "context_length"}};
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
            char key[128];
            snprintf(key, sizeof key, "%s.%s", arch, fields[f][0]);
            uint64_t v = 0;
            CHECK(mxl_gguf_get_u64(g, key, &v, &err) == MXL_OK);
            CHECK_EQ_INT(v, jint(m, fields[f][1]));
        }

        /* tokenizer arrays: strings, scores, token types */
        const mxl_gguf_array *tok;
        REQUIRE(mxl_gguf_get_array(g, "tokenizer.ggml.tokens", &tok, &err) == MXL_OK);
        CHECK_EQ_INT(tok->n, jint(m, "vocab_size"));
        size_t si;
        json_t *se;
        json_array_foreach(json_object_get(m, "token_samples"), si, se) {
            uint8_t raw[256];
            long n = unhex(jstr(se, "hex"), raw, sizeof raw);
            mxl_gguf_value v;
            REQUIRE(n >= 0 && mxl_gguf_array_get(tok, (uint64_t)jint(se, "index"), &v));
            CHECK(v.v.str.len == (uint64_t)n && memcmp(v.v.str.data, raw, (size_t)n) == 0);
        }
        const mxl_gguf_array *arr;
        json_array_foreach(json_object_get(m, "score_samples"), si, se) {
            mxl_gguf_value v;
            REQUIRE(mxl_gguf_get_array(g, "tokenizer.ggml.scores", &arr, &err) == MXL_OK);
            REQUIRE(mxl_gguf_array_get(arr, (uint64_t)jint(se, "index"), &v));
            CHECK(v.v.f64 == json_number_value(json_object_get(se, "value")));
        }
        json_array_foreach(json_object_get(m, "token_type_samples"), si, se) {
            mxl_gguf_value v;
            int64_t x;
            REQUIRE(mxl_gguf_get_array(g, "tokenizer.ggml.token_type", &arr, &err) == MXL_OK);
            REQUIRE(mxl_gguf_array_get(arr, (uint64_t)jint(se, "index"), &v));
            CHECK(mxl_gguf_value_as_i64(&v, &x) && x == jint(se, "value"));
        }
        mxl_gguf_close(g);
    }
    json_decref(root);
}

/* ---- config mapping ------------------------------------------------------------------------ */

static double jnum_or_nan(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

TEST(gguf_config_real_models) {
    json_t *root = load_fixture(mxl_test_failed_);
    REQUIRE(root);
    size_t mi;
    json_t *m;
    json_array_foreach(json_object_get(root, "models"), mi, m) {
        char path[2048];
        if (!model_path(jstr(m, "path"), path, sizeof path)) {
            CHECK(0);
            continue;
        }
        mxl_gguf *g;
        mxl_error err = {0};
        REQUIRE(mxl_gguf_open(path, &g, &err) == MXL_OK);
        mxl_model_config cfg;
        mxl_status st = mxl_model_config_from_gguf(g, NULL, &cfg, &err);
        if (st != MXL_OK) fprintf(stderr, "  %s\n", err.msg);
        REQUIRE(st == MXL_OK);
        const char *arch = jstr(m, "architecture");
        CHECK(cfg.source == MXL_CONFIG_SOURCE_GGUF && cfg.raw == NULL);
        CHECK_EQ_STR(cfg.model_type, strcmp(arch, "gemma3") == 0 ? "gemma3_text" : arch);
        CHECK_EQ_INT(cfg.num_hidden_layers, jint(m, "block_count"));
        CHECK_EQ_INT(cfg.hidden_size, jint(m, "embedding_length"));
        CHECK_EQ_INT(cfg.intermediate_size, jint(m, "feed_forward_length"));
        CHECK_EQ_INT(cfg.num_attention_heads, jint(m, "head_count"));
        CHECK_EQ_INT(cfg.num_key_value_heads, jint(m, "head_count_kv"));
        long long hd = json_is_integer(json_object_get(m, "key_length"))
                           ? jint(m, "key_length")
                           : jint(m, "embedding_length") / jint(m, "head_count");
        CHECK_EQ_INT(cfg.head_dim, hd);
        CHECK_EQ_INT(cfg.max_position_embeddings, jint(m, "context_length"));
        CHECK_EQ_INT(cfg.vocab_size, jint(m, "vocab_size"));
        CHECK_EQ_INT(cfg.bos_token_id, jint(m, "bos_token_id"));
        CHECK(cfg.n_eos >= 1 && cfg.eos_token_ids[0] == jint(m, "eos_token_id"));
        CHECK(cfg.tie_word_embeddings == !json_is_true(json_object_get(m, "has_output_weight")));
        CHECK(cfg.rope_theta == jnum_or_nan(m, "rope_freq_base"));
        CHECK(cfg.rms_norm_eps == jnum_or_nan(m, "rms_eps"));
        if (json_is_integer(json_object_get(m, "sliding_window")))
            CHECK_EQ_INT(cfg.sliding_window, jint(m, "sliding_window"));
        else
            CHECK_EQ_INT(cfg.sliding_window, -1);
        if (json_is_integer(json_object_get(m, "rope_dimension_count")))
            CHECK(cfg.partial_rotary_factor == (double)jint(m, "rope_dimension_count") / (double)hd);
        CHECK(cfg.quant.mode == MXL_QUANT_GGUF);
        CHECK_EQ_STR(cfg.quant.method, jstr(m, "file_type_name"));
        if (strcmp(arch, "gemma3") == 0) {
            /* 5 sliding layers then 1 global: layers 5, 11, 17 are global */
            CHECK_EQ_INT(cfg.sliding_window_pattern, 6);
            REQUIRE(cfg.layer_is_sliding && cfg.n_layer_types == cfg.num_hidden_layers);
            for (int l = 0; l < cfg.n_layer_types; l++)
                CHECK_EQ_INT(cfg.layer_is_sliding[l], !(l == 5 || l == 11 || l == 17));
            CHECK(cfg.rope_local_base_freq == 10000.0);
        } else {
            CHECK(cfg.layer_is_sliding == NULL && cfg.sliding_window_pattern == -1);
        }
        mxl_model_config_free(&cfg);
        mxl_gguf_close(g);
    }
    json_decref(root);
}

static mxl_status config_of_seed(const char *name, mxl_model_config *cfg, mxl_error *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus/gguf/%s", mxl_test_repo_root(), name);
    mxl_gguf *g;
    mxl_status st = mxl_gguf_open(path, &g, err);
    if (st != MXL_OK) return st;
    st = mxl_model_config_from_gguf(g, "seed", cfg, err);
    mxl_gguf_close(g);
    return st;
}

TEST(gguf_config_seeds) {
    mxl_model_config cfg;
    mxl_error err = {0};
    REQUIRE(config_of_seed("llama_v2_align64.gguf", &cfg, &err) == MXL_OK);
    CHECK_EQ_STR(cfg.model_type, "llama");
    CHECK_EQ_INT(cfg.num_hidden_layers, 2);
    CHECK_EQ_INT(cfg.head_dim, 32 / 4); /* no key_length: embedding / heads */
    CHECK_EQ_INT(cfg.num_key_value_heads, 2);
    CHECK(cfg.partial_rotary_factor == 1.0);
    CHECK_EQ_INT(cfg.vocab_size, 8); /* from the token list */
    CHECK(cfg.tie_word_embeddings);
    CHECK_EQ_STR(cfg.quant.method, "Q4_1");
    CHECK(isnan(cfg.layer_norm_eps) && cfg.num_experts == -1);
    mxl_model_config_free(&cfg);

    REQUIRE(config_of_seed("gemma3_kquants.gguf", &cfg, &err) == MXL_OK);
    CHECK_EQ_STR(cfg.model_type, "gemma3_text");
    CHECK_EQ_INT(cfg.head_dim, 128);
    CHECK_EQ_INT(cfg.sliding_window, 512);
    CHECK(!cfg.tie_word_embeddings);
    CHECK_EQ_STR(cfg.quant.method, "Q4_K_M");
    REQUIRE(cfg.n_layer_types == 7 && cfg.layer_is_sliding);
    const uint8_t want[7] = {1, 1, 1, 1, 1, 0, 1};
    CHECK(memcmp(cfg.layer_is_sliding, want, 7) == 0);
    mxl_model_config_free(&cfg);

    REQUIRE(config_of_seed("qwen2moe_ints.gguf", &cfg, &err) == MXL_OK);
    CHECK_EQ_STR(cfg.model_type, "qwen2_moe");
    CHECK_EQ_INT(cfg.num_key_value_heads, 4); /* max of the per-layer [2, 4, 1] */
    CHECK_EQ_INT(cfg.num_experts, 8);
    CHECK_EQ_INT(cfg.num_experts_per_tok, 2);
    CHECK_EQ_INT(cfg.vocab_size, 5);
    /* no general.file_type: most common matrix type (2 x Q8_0 vs 1 x Q4_0 / I16 / I64) */
    CHECK_EQ_STR(cfg.quant.method, "Q8_0");
    mxl_model_config_free(&cfg);
}

/* Builds a one-architecture file from a callback that adds keys. */
static mxl_status config_of(void (*add)(gw *), mxl_model_config *cfg, mxl_error *err) {
    gw w;
    buf b;
    gw_init(&w, 3);
    add(&w);
    gw_finish(&w, &b);
    mxl_gguf *g;
    mxl_status st = mxl_gguf_open_buffer(b.p, b.n, "c.gguf", &g, err);
    if (st == MXL_OK) {
        st = mxl_model_config_from_gguf(g, NULL, cfg, err);
        mxl_gguf_close(g);
    }
    gw_free(&w);
    b_free(&b);
    return st;
}

static void add_no_arch(gw *w) { gw_u32(w, "llama.block_count", 2); }
static void add_bad_block_type(gw *w) {
    gw_string(w, "general.architecture", "llama");
    gw_string(w, "llama.block_count", "two");
}
static void add_huge_blocks(gw *w) {
    gw_string(w, "general.architecture", "gemma3");
    b_u64(gw_key(w, "gemma3.block_count", MXL_GGUF_TYPE_UINT64), (uint64_t)1 << 40);
}
static void add_bad_kv_array(gw *w) {
    gw_string(w, "general.architecture", "llama");
    buf *b = gw_key(w, "llama.attention.head_count_kv", MXL_GGUF_TYPE_ARRAY);
    b_u32(b, MXL_GGUF_TYPE_STRING);
    b_u64(b, 1);
    b_str(b, "x");
}
static void add_unknown_arch(gw *w) {
    gw_string(w, "general.architecture", "frobnicator-9");
    gw_u32(w, "frobnicator-9.block_count", 3);
    gw_u32(w, "general.file_type", 1);
}
static void add_pattern_int(gw *w) {
    gw_string(w, "general.architecture", "cohere2");
    gw_u32(w, "cohere2.block_count", 8);
    gw_u32(w, "cohere2.attention.sliding_window_pattern", 4);
    gw_u32(w, "tokenizer.ggml.eos_token_id", 5);
    gw_u32(w, "tokenizer.ggml.eot_token_id", 9);
}
static void add_pattern_bools(gw *w) {
    gw_string(w, "general.architecture", "gemma3");
    gw_u32(w, "gemma3.block_count", 3);
    buf *b = gw_key(w, "gemma3.attention.sliding_window_pattern", MXL_GGUF_TYPE_ARRAY);
    b_u32(b, MXL_GGUF_TYPE_BOOL);
    b_u64(b, 3);
    b_u8(b, 0);
    b_u8(b, 1);
    b_u8(b, 0);
}
static void add_deepseek_v3(gw *w) {
    gw_string(w, "general.architecture", "deepseek2");
    gw_u32(w, "deepseek2.expert_gating_func", 2);
}

TEST(gguf_config_errors_and_mappings) {
    mxl_model_config cfg;
    mxl_error err = {0};
    CHECK(config_of(add_no_arch, &cfg, &err) == MXL_ERR_FORMAT && strstr(err.msg, "general.architecture"));
    CHECK(config_of(add_bad_block_type, &cfg, &err) == MXL_ERR_FORMAT &&
          strstr(err.msg, "'llama.block_count'") && strstr(err.msg, "STRING"));
    CHECK(config_of(add_huge_blocks, &cfg, &err) == MXL_ERR_FORMAT &&
          strstr(err.msg, "'gemma3.block_count'") && strncmp(err.msg, "c.gguf: ", 8) == 0);
    CHECK(config_of(add_bad_kv_array, &cfg, &err) == MXL_ERR_FORMAT &&
          strstr(err.msg, "head_count_kv"));

    REQUIRE(config_of(add_unknown_arch, &cfg, &err) == MXL_OK);
    CHECK_EQ_STR(cfg.model_type, "frobnicator-9");
    CHECK_EQ_INT(cfg.num_hidden_layers, 3);
    CHECK_EQ_STR(cfg.quant.method, "F16");
    CHECK(cfg.vocab_size == -1 && cfg.head_dim == -1 && cfg.tie_word_embeddings);
    mxl_model_config_free(&cfg);

    REQUIRE(config_of(add_pattern_int, &cfg, &err) == MXL_OK);
    CHECK_EQ_STR(cfg.model_type, "cohere2");
    CHECK_EQ_INT(cfg.sliding_window_pattern, 4);
    REQUIRE(cfg.n_layer_types == 8);
    for (int l = 0; l < 8; l++) CHECK_EQ_INT(cfg.layer_is_sliding[l], (l + 1) % 4 != 0);
    CHECK(cfg.n_eos == 2 && cfg.eos_token_ids[0] == 5 && cfg.eos_token_ids[1] == 9);
    mxl_model_config_free(&cfg);

    REQUIRE(config_of(add_pattern_bools, &cfg, &err) == MXL_OK);
    REQUIRE(cfg.n_layer_types == 3);
    CHECK(cfg.layer_is_sliding[0] == 0 && cfg.layer_is_sliding[1] == 1 && cfg.layer_is_sliding[2] == 0);
    mxl_model_config_free(&cfg);

    REQUIRE(config_of(add_deepseek_v3, &cfg, &err) == MXL_OK);
    CHECK_EQ_STR(cfg.model_type, "deepseek_v3");
    mxl_model_config_free(&cfg);

    CHECK_EQ_STR(mxl_gguf_arch_to_model_type("phi2"), "phi");
    CHECK_EQ_STR(mxl_gguf_arch_to_model_type("qwen3moe"), "qwen3_moe");
    CHECK_EQ_STR(mxl_gguf_arch_to_model_type("nomic-bert"), "nomic_bert");
    CHECK(mxl_gguf_arch_to_model_type("nope") == NULL);
    CHECK_EQ_STR(mxl_gguf_file_type_name(15 | 1024), "Q4_K_M");
    CHECK(mxl_gguf_file_type_name(5) == NULL && mxl_gguf_file_type_name(1u << 20) == NULL);
}
