/* bench_step_driver.c - timing driver for scripts/bench_server.py --engine (not part of the build):
 * the engine's decode step without the server, HTTP or clients. Loads a decoder checkpoint with a
 * pool of `threads`, then for each round and each batch size N in 1, 2, 4, 8 prefills N fresh
 * sequences (16 prompt tokens each) and times `steps` decode steps of all N together
 * (mxl_decoder_forward_batch; one sequence: mxl_decoder_forward), printing one line per round and
 * N: "N <n> step_ms <median step milliseconds>". Loading and prefill are outside the timing.
 * STEP_N=<n> in the environment times that batch size only (for a profiler).
 *
 *   bench_step_driver MODEL THREADS STEPS ROUNDS */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "models/checkpoint.h"
#include "models/decoder.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: bench_step_driver MODEL THREADS STEPS ROUNDS\n");
        return 2;
    }
    int threads = atoi(argv[2]), steps = atoi(argv[3]), rounds = atoi(argv[4]);
    if (threads < 1 || steps < 1 || steps > 4096 || rounds < 1) {
        fprintf(stderr, "bench_step_driver: bad THREADS / STEPS / ROUNDS\n");
        return 2;
    }
    mxl_error err = {0};
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_threadpool *pool = NULL;
    if (mxl_checkpoint_open(argv[1], &ck, &err) || mxl_decoder_load(ck, &d, &err) || mxl_threadpool_create(threads, &pool, &err)) {
        fprintf(stderr, "bench_step_driver: %s\n", err.msg);
        return 1;
    }
    float *logits = aligned_alloc(64, ((size_t)8 * (size_t)d.hp.vocab * sizeof(float) + 63) & ~(size_t)63); /* as the server's */
    double *ts = malloc((size_t)steps * sizeof(double));
    if (!logits || !ts) return 1;
    const char *only = getenv("STEP_N"); /* one batch size only (profiling) */
    for (int r = 0; r < rounds; r++)
        for (int n = 1; n <= 8; n *= 2) {
            if (only && atoi(only) != n) continue;
            mxl_decoder_state *s[8];
            int32_t tok[16];
            for (int i = 0; i < n; i++) {
                for (int k = 0; k < 16; k++) tok[k] = (int32_t)((100 + 7 * k + 31 * i) % d.hp.vocab);
                if (mxl_decoder_state_create(&d, 16 + steps + 1, 8, pool, &s[i], &err) ||
                    mxl_decoder_forward(&d, s[i], tok, 16, logits, &err)) {
                    fprintf(stderr, "bench_step_driver: %s\n", err.msg);
                    return 1;
                }
            }
            for (int k = 0; k < steps; k++) {
                for (int i = 0; i < n; i++) tok[i] = (int32_t)((200 + k + 13 * i) % d.hp.vocab);
                double t0 = now();
                mxl_status st = n == 1 ? mxl_decoder_forward(&d, s[0], tok, 1, logits, &err)
                                       : mxl_decoder_forward_batch(&d, s, tok, n, logits, &err);
                ts[k] = now() - t0;
                if (st) {
                    fprintf(stderr, "bench_step_driver: %s\n", err.msg);
                    return 1;
                }
            }
            qsort(ts, (size_t)steps, sizeof *ts, cmp_double);
            printf("N %d step_ms %.4f\n", n, ts[steps / 2] * 1e3);
            fflush(stdout);
            for (int i = 0; i < n; i++) mxl_decoder_state_destroy(s[i]);
        }
    free(logits);
    free(ts);
    mxl_threadpool_destroy(pool);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
    return 0;
}
