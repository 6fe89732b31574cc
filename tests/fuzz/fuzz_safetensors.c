/* fuzz_safetensors.c - libFuzzer harness for the safetensors reader (src/io/safetensors.c).
 *
 * Opens the input as a borrowed buffer (an exact-size heap copy, so ASan sees any read past the
 * end), then walks every tensor and metadata entry: touches the first and last byte of each
 * view, re-finds it by name, and checks the invariants the reader promises (views inside the
 * buffer, sizes equal numel * element size, tensors tiling the data section in order). A broken
 * invariant aborts, which libFuzzer reports as a crash.
 *
 * Build: make build/fuzz/fuzz_safetensors
 * Run:   build/fuzz/fuzz_safetensors -max_len=4096 tests/fuzz/corpus/safetensors */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "io/safetensors.h"

#define FUZZ_CHECK(c) ((c) ? (void)0 : abort())

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = mxl_malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);

    mxl_safetensors *st = NULL;
    mxl_error err = {0};
    mxl_status rc = mxl_safetensors_open_buffer(size ? copy : NULL, size, "fuzz", &st, &err);
    if (rc != MXL_OK) {
        /* one line naming the buffer */
        FUZZ_CHECK(st == NULL && err.status == rc && strncmp(err.msg, "fuzz", 4) == 0 &&
                   strchr(err.msg, '\n') == NULL);
        mxl_free(copy);
        return 0;
    }

    uint64_t data_start = 8 + mxl_safetensors_header_len(st), at = 0, total = 0;
    FUZZ_CHECK(data_start <= size);
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < mxl_safetensors_count(st); i++) {
        const mxl_st_entry *e = mxl_safetensors_at(st, i);
        FUZZ_CHECK(e && e->file == st && e->name);
        FUZZ_CHECK(e->tensor.ndim >= 0 && e->tensor.ndim <= MXL_MAX_DIMS);
        uint64_t numel = 1;
        for (int d = 0; d < e->tensor.ndim; d++) {
            FUZZ_CHECK(e->tensor.shape[d] >= 0);
            FUZZ_CHECK(!mxl_mul_u64(numel, (uint64_t)e->tensor.shape[d], &numel));
        }
        uint64_t want;
        FUZZ_CHECK(!mxl_mul_u64(numel, mxl_dtype_get_info(e->tensor.dtype)->block_bytes, &want));
        FUZZ_CHECK(want == e->tensor.nbytes);
        FUZZ_CHECK(e->data_begin == at && e->data_end - e->data_begin == e->tensor.nbytes);
        FUZZ_CHECK(e->file_offset == data_start + e->data_begin);
        FUZZ_CHECK((const uint8_t *)e->tensor.data == copy + e->file_offset);
        FUZZ_CHECK(e->file_offset + e->tensor.nbytes <= size);
        if (e->tensor.nbytes) {
            const uint8_t *p = e->tensor.data;
            sink ^= p[0];
            sink ^= p[e->tensor.nbytes - 1];
        }
        FUZZ_CHECK(mxl_safetensors_find(st, e->name) == e);
        at = e->data_end;
        total += e->tensor.nbytes;
    }
    FUZZ_CHECK(at == size - data_start);
    FUZZ_CHECK(total == mxl_safetensors_total_bytes(st));
    FUZZ_CHECK(mxl_safetensors_at(st, mxl_safetensors_count(st)) == NULL);

    for (size_t i = 0; i < mxl_safetensors_metadata_count(st); i++) {
        const char *k = NULL, *v = NULL;
        FUZZ_CHECK(mxl_safetensors_metadata_at(st, i, &k, &v) == 0 && k && v);
        const char *got = mxl_safetensors_metadata_get(st, k);
        FUZZ_CHECK(got != NULL);
        sink ^= (uint8_t)strlen(got);
    }
    (void)sink;
    mxl_safetensors_close(st);
    mxl_free(copy);
    return 0;
}
