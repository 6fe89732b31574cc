/* fuzz_gguf.c - libFuzzer harness for the GGUF reader and the GGUF -> config mapping.
 *
 * Opens the input as a GGUF buffer; when it parses, walks every metadata value (nested arrays
 * included, through the public accessors), every tensor (reading its first and last byte, so
 * ASan checks the view lies inside the buffer), checks the lookup tables agree with the lists,
 * and runs mxl_model_config_from_gguf. Any error must be a one-line message. Seeds:
 * tests/fuzz/corpus/gguf/ (tests/fixtures/gen_gguf_fixtures.py).
 *
 *   make build/fuzz/fuzz_gguf
 *   build/fuzz/fuzz_gguf -max_len=4096 tests/fuzz/corpus/gguf */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "models/config_gguf.h"

#define FUZZ_ASSERT(c) ((c) ? (void)0 : fuzz_fail(#c, __LINE__))

static void fuzz_fail(const char *expr, int line) {
    fprintf(stderr, "fuzz_gguf.c:%d: invariant failed: %s\n", line, expr);
    abort();
}

static volatile uint64_t g_sink;

static void check_msg(const mxl_error *err) {
    size_t n = strnlen(err->msg, sizeof err->msg);
    FUZZ_ASSERT(n > 0 && n < sizeof err->msg);
    FUZZ_ASSERT(memchr(err->msg, '\n', n) == NULL);
}

static void walk_value(const mxl_gguf_value *v, int depth) {
    FUZZ_ASSERT(depth <= MXL_GGUF_MAX_ARRAY_DEPTH);
    uint64_t u;
    int64_t i;
    double f;
    char buf[16];
    g_sink += mxl_gguf_value_as_u64(v, &u) ? u : 1;
    g_sink += mxl_gguf_value_as_i64(v, &i) ? (uint64_t)i : 2;
    g_sink += mxl_gguf_value_as_f64(v, &f) ? (uint64_t)(f == f) : 3;
    g_sink += mxl_gguf_value_copy_str(v, buf, sizeof buf) ? (uint64_t)buf[0] : 4;
    if (v->type == MXL_GGUF_TYPE_STRING) {
        if (v->v.str.len) g_sink += (uint8_t)v->v.str.data[0] + (uint8_t)v->v.str.data[v->v.str.len - 1];
        return;
    }
    if (v->type != MXL_GGUF_TYPE_ARRAY) return;
    const mxl_gguf_array *a = &v->v.arr;
    for (uint64_t k = 0; k < a->n; k++) {
        mxl_gguf_value e;
        FUZZ_ASSERT(mxl_gguf_array_get(a, k, &e));
        FUZZ_ASSERT(e.type == a->elem_type);
        walk_value(&e, depth + 1);
    }
    mxl_gguf_value e;
    FUZZ_ASSERT(!mxl_gguf_array_get(a, a->n, &e));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mxl_gguf *g = NULL;
    mxl_error err = {0};
    if (mxl_gguf_open_buffer(data, size, "fuzz.gguf", &g, &err) != MXL_OK) {
        check_msg(&err);
        FUZZ_ASSERT(g == NULL);
        return 0;
    }
    FUZZ_ASSERT(mxl_gguf_version(g) == 2 || mxl_gguf_version(g) == 3);
    uint64_t align = mxl_gguf_alignment(g);
    FUZZ_ASSERT(align && (align & (align - 1)) == 0);

    for (uint64_t k = 0; k < mxl_gguf_n_kv(g); k++) {
        const mxl_gguf_kv *kv = mxl_gguf_kv_at(g, k);
        FUZZ_ASSERT(kv && kv->key[kv->key_len] == '\0');
        walk_value(&kv->value, 1);
        /* a key without embedded NULs is found by name */
        if (strlen(kv->key) == kv->key_len) FUZZ_ASSERT(mxl_gguf_find(g, kv->key) == kv);
        uint64_t u;
        mxl_gguf_str s;
        const mxl_gguf_array *a;
        if (mxl_gguf_get_u64(g, kv->key, &u, &err) != MXL_OK) check_msg(&err);
        if (mxl_gguf_get_str(g, kv->key, &s, &err) != MXL_OK) check_msg(&err);
        if (mxl_gguf_get_array(g, kv->key, &a, &err) != MXL_OK) check_msg(&err);
    }

    uint64_t total = 0;
    for (uint64_t k = 0; k < mxl_gguf_n_tensors(g); k++) {
        const mxl_gguf_tensor_info *t = mxl_gguf_tensor_at(g, k);
        FUZZ_ASSERT(t && t->name[t->name_len] == '\0');
        if (strlen(t->name) == t->name_len) FUZZ_ASSERT(mxl_gguf_find_tensor(g, t->name) == t);
        FUZZ_ASSERT(t->offset % align == 0);
        FUZZ_ASSERT(t->file_offset == mxl_gguf_data_offset(g) + t->offset);
        FUZZ_ASSERT(t->file_offset <= size && t->tensor.nbytes <= size - t->file_offset);
        FUZZ_ASSERT(mxl_ggml_type_to_dtype(t->ggml_type) == t->tensor.dtype);
        uint64_t want;
        mxl_error e2;
        FUZZ_ASSERT(mxl_tensor_expected_bytes(t->tensor.dtype, t->tensor.ndim, t->tensor.shape,
                                              &want, &e2) == MXL_OK &&
                    want == t->tensor.nbytes);
        if (t->tensor.nbytes) {
            const uint8_t *p = t->tensor.data;
            g_sink += p[0] + p[t->tensor.nbytes - 1];
        }
        total += t->tensor.nbytes;
    }
    FUZZ_ASSERT(total == mxl_gguf_tensor_bytes_total(g));

    mxl_model_config cfg;
    if (mxl_model_config_from_gguf(g, NULL, &cfg, &err) == MXL_OK) {
        FUZZ_ASSERT(cfg.source == MXL_CONFIG_SOURCE_GGUF && cfg.raw == NULL);
        FUZZ_ASSERT(cfg.quant.mode == MXL_QUANT_GGUF);
        for (int l = 0; l < cfg.n_layer_types; l++) g_sink += cfg.layer_is_sliding[l];
        FUZZ_ASSERT(memchr(cfg.model_type, '\0', sizeof cfg.model_type) != NULL);
        mxl_model_config_free(&cfg);
    } else {
        check_msg(&err);
    }
    mxl_gguf_close(g);
    return 0;
}
