/* threadpool.c - pthread pool with an atomic task counter (see threadpool.h).
 *
 * A decode step dispatches a few hundred short jobs (one per matmul, norm, attention), tens of
 * microseconds each, so waking sleeping workers through a condition variable for every job cost
 * more than the work on small models. Workers therefore spin on the job generation for a while
 * (about a millisecond of pause instructions) after each job and only then sleep on the condition
 * variable; the caller likewise spins on the count of workers still busy before sleeping.
 * Publication: the caller writes fn / ctx / n_tasks, then release-stores the new generation;
 * a worker acquire-loads it before reading them. Every worker takes part in every generation
 * (the caller waits until all have left it), so none can miss one or read a newer job's fields
 * while still in an older one. The mutex only closes the sleep / wake races. */
#include "core/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#define SPIN_LIMIT (1 << 14) /* pause iterations before sleeping (~1 ms) */

struct mxl_threadpool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_cond_t done;
    /* current job: written by the caller before it publishes the generation */
    mxl_task_fn fn;
    void *ctx;
    int n_tasks;
    atomic_int next_task;
    atomic_int active_workers; /* workers still inside the current job */
    atomic_ulong generation;
    atomic_int shutdown;
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

/* The next generation after `seen` (spinning, then sleeping), or 0 at shutdown. */
static unsigned long await_job(mxl_threadpool *p, unsigned long seen) {
    for (int spins = 0; spins < SPIN_LIMIT; spins++) {
        if (atomic_load_explicit(&p->shutdown, memory_order_acquire)) return 0;
        unsigned long g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen) return g;
        CPU_RELAX();
    }
    pthread_mutex_lock(&p->mu);
    unsigned long g;
    while (!atomic_load_explicit(&p->shutdown, memory_order_acquire) &&
           (g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen)
        pthread_cond_wait(&p->wake, &p->mu);
    int stop = atomic_load_explicit(&p->shutdown, memory_order_acquire);
    g = atomic_load_explicit(&p->generation, memory_order_acquire);
    pthread_mutex_unlock(&p->mu);
    return stop ? 0 : g;
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    mxl_threadpool *p = wa->pool;
    int index = wa->index;
    free(wa);
    unsigned long seen = 0;
    for (;;) {
        unsigned long g = await_job(p, seen);
        if (g == 0) break;
        seen = g;
        drain(p, p->fn, p->ctx, p->n_tasks, index);
        if (atomic_fetch_sub_explicit(&p->active_workers, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu); /* the caller may be asleep on `done` */
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
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
    atomic_init(&p->active_workers, 0);
    atomic_init(&p->generation, 0);
    atomic_init(&p->shutdown, 0);
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
    atomic_store_explicit(&p->shutdown, 1, memory_order_release);
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
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&p->active_workers, p->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    /* sleepers re-check the generation under the mutex, so this wakes every one of them */
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p, fn, ctx, n_tasks, 0);
    for (int spins = 0; spins < SPIN_LIMIT; spins++) {
        if (atomic_load_explicit(&p->active_workers, memory_order_acquire) == 0) return;
        CPU_RELAX();
    }
    pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&p->active_workers, memory_order_acquire) > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

int mxl_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
