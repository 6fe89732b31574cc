/* test_core.c - arena, thread pool, error messages and the CLI flag parser. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "core/alloc.h"
#include "core/arena.h"
#include "core/status.h"
#include "core/threadpool.h"
#include "test.h"

TEST(arena_alignment_growth_reset) {
    mxl_arena a;
    mxl_arena_init(&a, 256);
    for (int i = 0; i < 1000; i++) {
        size_t align = (size_t)1 << (i % 7);
        unsigned char *p = mxl_arena_alloc(&a, (size_t)(i % 300) + 1, align);
        REQUIRE(p);
        CHECK(((uintptr_t)p & (align - 1)) == 0);
        CHECK(p[0] == 0);
        p[0] = 0xab;
    }
    char *s = mxl_arena_strdup(&a, "hello");
    CHECK_EQ_STR(s, "hello");
    CHECK(mxl_arena_alloc(&a, SIZE_MAX - 8, 16) == NULL); /* overflow refused, not wrapped */
    mxl_arena_reset(&a);
    CHECK(a.total == 0);
    CHECK(mxl_arena_alloc(&a, 10, 8) != NULL);
    mxl_arena_free(&a);
}

/* A block of 2 MB or more in an arena with huge_pages: zeroed, aligned as asked, every byte
 * writable, and later allocations fill its rounded-up tail before a new block is made. */
TEST(arena_large_block) {
    mxl_arena a;
    mxl_arena_init(&a, 4096);
    a.huge_pages = true;
    const size_t big = (size_t)3 << 20;
    unsigned char *p = mxl_arena_alloc(&a, big, 64);
    REQUIRE(p);
    CHECK(((uintptr_t)p & 63) == 0);
    size_t nz = 0;
    for (size_t i = 0; i < big; i += 4096) nz += p[i] != 0;
    CHECK(nz == 0 && p[big - 1] == 0);
    memset(p, 0x5a, big);
    unsigned char *q = mxl_arena_alloc(&a, 512 << 10, 64); /* in the 4 MB block's tail */
    REQUIRE(q);
    CHECK(q >= p + big && q + (512 << 10) <= p + ((size_t)4 << 20));
    CHECK(q[0] == 0 && p[big - 1] == 0x5a);
    CHECK(a.total == big + ((size_t)512 << 10));
    mxl_arena_free(&a);
}

typedef struct sum_ctx {
    atomic_long sum;
    atomic_int hits[1000];
} sum_ctx;

static void sum_task(void *ctx, int task, int n_tasks, int thread_index) {
    sum_ctx *c = ctx;
    (void)n_tasks;
    (void)thread_index;
    atomic_fetch_add(&c->sum, task);
    atomic_fetch_add(&c->hits[task], 1);
}

TEST(threadpool_runs_every_task_once) {
    for (int threads = 1; threads <= 4; threads++) {
        mxl_threadpool *p;
        REQUIRE(mxl_threadpool_create(threads, &p, NULL) == MXL_OK);
        for (int round = 0; round < 50; round++) {
            sum_ctx *c = mxl_calloc(1, sizeof *c);
            int n = 1 + (round * 37) % 1000;
            mxl_threadpool_run(p, n, sum_task, c);
            CHECK_EQ_INT(atomic_load(&c->sum), (long)n * (n - 1) / 2);
            for (int i = 0; i < n; i++) CHECK_EQ_INT(atomic_load(&c->hits[i]), 1);
            mxl_free(c);
        }
        mxl_threadpool_destroy(p);
    }
    mxl_error e;
    mxl_threadpool *p;
    CHECK(mxl_threadpool_create(0, &p, &e) == MXL_ERR_ARG);
}

typedef struct count_ctx {
    atomic_int hits[8];
    atomic_int bad_index;
    int n_threads;
} count_ctx;

static void count_task(void *ctx, int task, int n_tasks, int thread_index) {
    count_ctx *c = ctx;
    (void)n_tasks;
    if (thread_index < 0 || thread_index >= c->n_threads) atomic_fetch_add(&c->bad_index, 1);
    atomic_fetch_add(&c->hits[task], 1);
}

/* Back-to-back tiny jobs (the decode step's pattern) with more threads than cores, so workers
 * are descheduled while holding or before claiming tasks, and pauses long enough that the
 * workers fall asleep between jobs: every task of every job runs exactly once, on a valid
 * thread index, and no job returns before its tasks are done. */
TEST(threadpool_many_short_jobs_oversubscribed) {
    for (int threads = 2; threads <= 5; threads += 3) {
        mxl_threadpool *p;
        REQUIRE(mxl_threadpool_create(threads, &p, NULL) == MXL_OK);
        int wrong = 0;
        for (int round = 0; round < 20000; round++) {
            count_ctx c = {.n_threads = threads};
            int n = 1 + round % 8;
            mxl_threadpool_run(p, n, count_task, &c);
            for (int i = 0; i < n; i++) wrong += atomic_load(&c.hits[i]) != 1;
            wrong += atomic_load(&c.bad_index);
            if (round % 5000 == 4999) usleep(20000); /* workers go to sleep */
        }
        CHECK_EQ_INT(wrong, 0);
        mxl_threadpool_destroy(p);
    }
}

TEST(error_set_and_prefix) {
    mxl_error e;
    CHECK(mxl_error_set(&e, MXL_ERR_FORMAT, "%s: bad %d", "f.gguf", 3) == MXL_ERR_FORMAT);
    CHECK_EQ_STR(e.msg, "f.gguf: bad 3");
    mxl_error_prefix(&e, "loading %s: ", "m");
    CHECK_EQ_STR(e.msg, "loading m: f.gguf: bad 3");
    CHECK(mxl_error_set(NULL, MXL_ERR_IO, "x") == MXL_ERR_IO);
    char big[2000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    mxl_error_set(&e, MXL_ERR_IO, "%s", big);
    mxl_error_prefix(&e, "p: ");
    CHECK(strlen(e.msg) == MXL_ERROR_MSG_MAX - 1);
    CHECK(strncmp(e.msg, "p: aaa", 6) == 0);
    /* one line whatever the arguments hold (a JSON parser quoting input with a newline) */
    mxl_error_set(&e, MXL_ERR_FORMAT, "bad near '%s'", "\"\\\n\r\t\x7f\xc3\xa9'");
    CHECK_EQ_STR(e.msg, "bad near '\"\\    \xc3\xa9''");
    mxl_error_prefix(&e, "in %s: ", "a\nb");
    CHECK_EQ_STR(e.msg, "in a b: bad near '\"\\    \xc3\xa9''");
}

static const mxl_cli_opt k_opts[] = {
    {"model", 'm', "PATH", NULL, "model"},
    {"json", 0, NULL, NULL, "json"},
    {"quiet", 'q', NULL, NULL, "quiet"},
    {"max-tokens", 'n', "N", "8192", "tokens"},
    {"prompt", 'p', "TEXT", NULL, "prompt"},
    {NULL, 0, NULL, NULL, NULL},
};
static const mxl_cli_cmd k_cmd = {"test", "mlxcel test", "Test command.", k_opts, 0, 1, "[X]"};

TEST(cli_parse_flags) {
    char *argv[] = {"test", "-m", "a/b", "--json", "-q", "--max-tokens=32", "-p", "x", "-p", "y", "pos", NULL};
    mxl_cli_args a;
    REQUIRE(mxl_cli_parse(&k_cmd, 11, argv, &a) == 0);
    CHECK_EQ_STR(mxl_cli_get(&a, "model"), "a/b");
    CHECK(mxl_cli_has(&a, "json"));
    CHECK(mxl_cli_has(&a, "quiet"));
    int64_t n;
    CHECK(mxl_cli_get_int(&a, "max-tokens", 8192, 1, 1 << 30, &n) == 0 && n == 32);
    CHECK_EQ_STR(mxl_cli_get(&a, "prompt"), "y");
    CHECK_EQ_INT(a.n_pos, 1);
    CHECK_EQ_STR(a.pos[0], "pos");
    char *argv2[] = {"test", "-mfoo", "-n", "-5", NULL};
    REQUIRE(mxl_cli_parse(&k_cmd, 4, argv2, &a) == 0);
    CHECK_EQ_STR(mxl_cli_get(&a, "model"), "foo");
    CHECK(mxl_cli_get_int(&a, "max-tokens", 8192, 1, 100, &n) == 2); /* out of range */
}

TEST(cli_parse_errors) {
    mxl_cli_args a;
    char *unknown[] = {"test", "--nope", NULL};
    CHECK(mxl_cli_parse(&k_cmd, 2, unknown, &a) == 2);
    char *missing[] = {"test", "--model", NULL};
    CHECK(mxl_cli_parse(&k_cmd, 2, missing, &a) == 2);
    char *boolval[] = {"test", "--json=1", NULL};
    CHECK(mxl_cli_parse(&k_cmd, 2, boolval, &a) == 2);
    char *extra[] = {"test", "a", "b", NULL};
    CHECK(mxl_cli_parse(&k_cmd, 3, extra, &a) == 2);
    char *shortu[] = {"test", "-z", NULL};
    CHECK(mxl_cli_parse(&k_cmd, 2, shortu, &a) == 2);
    char *dashdash[] = {"test", "--", "--json", NULL};
    CHECK(mxl_cli_parse(&k_cmd, 3, dashdash, &a) == 0 && a.n_pos == 1 && !mxl_cli_has(&a, "json"));
    char *notint[] = {"test", "-n", "12x", NULL};
    int64_t n;
    REQUIRE(mxl_cli_parse(&k_cmd, 3, notint, &a) == 0);
    CHECK(mxl_cli_get_int(&a, "max-tokens", 1, 0, 100, &n) == 2);
}
