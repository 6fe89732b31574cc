/* bench_tokenizer_driver.c - timing driver for scripts/bench_tokenizer.py (not part of the build):
 * loads a tokenizer.json (timed: "load <seconds>"), reads documents separated by NUL bytes from a
 * file, encodes every document `reps` times (special tokens not parsed, no post-processor: HF's
 * encode(doc, add_special_tokens=False) with encode_special_tokens=True) and prints one "seconds <wall seconds>" line per
 * repetition, then "tokens <count>" and "hash <FNV-1a of all ids>" so the script can check the ids
 * equal Hugging Face's. One thread. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/tokenizer.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s TOKENIZER_JSON DOCS_FILE REPS\n", argv[0]);
        return 2;
    }
    int reps = atoi(argv[3]);
    FILE *f = fopen(argv[2], "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) return 1;
    fclose(f);
    buf[size] = 0;
    mxl_tokenizer *t = NULL;
    mxl_error err = {0};
    double t0 = now();
    if (mxl_tokenizer_load(argv[1], &t, &err) != MXL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("load %.6f\n", now() - t0);
    mxl_token_ids ids = {0};
    uint64_t hash = 1469598103934665603ull;
    size_t total = 0;
    for (int r = 0; r < reps; r++) {
        t0 = now();
        for (long off = 0; off < size;) {
            size_t len = strlen(buf + off);
            ids.n = 0;
            if (len && mxl_tokenizer_encode(t, buf + off, len, 0, &ids, &err) != MXL_OK) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            if (r == 0) {
                total += ids.n;
                for (size_t i = 0; i < ids.n; i++) {
                    hash = (hash ^ (uint32_t)ids.ids[i]) * 1099511628211ull;
                }
            }
            off += (long)len + 1;
        }
        printf("seconds %.6f\n", now() - t0);
    }
    printf("tokens %zu\nhash %llu\n", total, (unsigned long long)hash);
    mxl_token_ids_free(&ids);
    mxl_tokenizer_destroy(t);
    free(buf);
    return 0;
}
