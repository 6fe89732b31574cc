/* threadpool.c - pthread pool with an atomic task counter (see threadpool.h). */
#include "core/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct mxl_threadpool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_cond_t done;
    /* current job, guarded by mu for publication */
    mxl_task_fn fn;
    void *ctx;
    int n_tasks;
    atomic_int next_task;
    int active_workers; /* workers still inside the current job */
    unsigned long generation;
    int shutdown;
};

typedef struct worker_arg {
    mxl_threadpool *pool;
    int index;
} worker_arg;

static void drain(mxl_threadpool *p, mxl_task_fn fn, void *ctx, int n_tasks, int thread_index) {
    for (;;) {
        int t = atomic_fetch_add(&p->next_task, 1);
        if (t >= n_tasks) break;
        fn(ctx, t, n_tasks, thread_index);
    }
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    mxl_threadpool *p = wa->pool;
    int index = wa->index;
    free(wa);
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->shutdown && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->shutdown) break;
        seen = p->generation;
        mxl_task_fn fn = p->fn;
        void *ctx = p->ctx;
        int n = p->n_tasks;
        pthread_mutex_unlock(&p->mu);
        drain(p, fn, ctx, n, index);
        pthread_mutex_lock(&p->mu);
        if (--p->active_workers == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

mxl_status mxl_threadpool_create(int n_threads, mxl_threadpool **out, mxl_error *err) {
    if (n_threads < 1) return mxl_error_set(err, MXL_ERR_ARG, "thread count must be >= 1, got %d", n_threads);
    mxl_threadpool *p = calloc(1, sizeof *p);
    if (!p) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory creating thread pool");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next_task, 0);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!p->threads) {
            mxl_threadpool_destroy(p);
            return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory creating thread pool");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (wa) {
                wa->pool = p;
                wa->index = i + 1;
            }
            if (!wa || pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
                free(wa);
                p->n_threads = i + 1; /* destroy joins only the started ones */
                mxl_threadpool_destroy(p);
                return mxl_error_set(err, MXL_ERR_INTERNAL, "cannot start worker thread %d", i + 1);
            }
        }
    }
    *out = p;
    return MXL_OK;
}

void mxl_threadpool_destroy(mxl_threadpool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->shutdown = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    if (p->threads)
        for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p);
}

int mxl_threadpool_size(const mxl_threadpool *p) { return p->n_threads; }

void mxl_threadpool_run(mxl_threadpool *p, int n_tasks, mxl_task_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, n_tasks, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next_task, 0);
    p->active_workers = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p, fn, ctx, n_tasks, 0);
    pthread_mutex_lock(&p->mu);
    while (p->active_workers > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

int mxl_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
