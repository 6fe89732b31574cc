/* bench_embed_driver.c - timing driver for scripts/bench_embed.py (not part of the build): loads an
 * embedding model with a given thread count, reads sentences (one per line, "\n" escaped as "\\n")
 * from a file, embeds them all with the given batch size `reps` times and prints one line per
 * repetition: "seconds <wall seconds of mxl_embed_batch>". Model load is outside the timing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/embed.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s MODEL_DIR SENTENCES_FILE THREADS BATCH REPS\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[3]), batch = atoi(argv[4]), reps = atoi(argv[5]);
    FILE *f = fopen(argv[2], "r");
    if (!f) return 1;
    size_t n = 0, cap = 0;
    char **texts = NULL, line[1 << 16];
    while (fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\n"), o = 0;
        line[len] = 0;
        for (size_t i = 0; i < len; i++) { /* unescape \n and \\ */
            if (line[i] == '\\' && i + 1 < len) {
                i++;
                line[o++] = line[i] == 'n' ? '\n' : line[i];
            } else {
                line[o++] = line[i];
            }
        }
        line[o] = 0;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            texts = realloc(texts, cap * sizeof *texts);
        }
        texts[n++] = strdup(line);
    }
    fclose(f);
    mxl_error err;
    mxl_embed_model *m = NULL;
    if (mxl_embed_model_load(argv[1], threads, &m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    mxl_embed_opts o = {.pooling = MXL_POOLING_NONE, .normalize = MXL_EMBED_NORMALIZE_DEFAULT, .batch_size = batch};
    float *out = malloc(n * (size_t)mxl_embed_model_dim(m) * sizeof(float));
    if (mxl_embed_batch(m, (const char *const *)texts, n, &o, out, NULL, &err)) { /* warm-up */
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        mxl_embed_batch(m, (const char *const *)texts, n, &o, out, NULL, &err);
        printf("seconds %.6f\n", now() - t0);
    }
    printf("checksum %.6f\n", (double)out[0] + (double)out[n * (size_t)mxl_embed_model_dim(m) - 1]);
    mxl_embed_model_destroy(m);
    for (size_t i = 0; i < n; i++) free(texts[i]);
    free(texts);
    free(out);
    return 0;
}
