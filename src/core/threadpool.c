/* threadpool.c - pthread pool with an atomic task counter (see threadpool.h).
 *
 * A decode step dispatches a few hundred short jobs (one per matmul, norm, attention), tens of
 * microseconds each, so waking sleeping workers through a condition variable for every job cost
 * more than the work on small models. Workers therefore spin briefly on the job generation after
 * each job (pause instructions, then sched_yield) before sleeping on a condition variable.
 *
 * The caller waits for the job's TASKS, not for the workers: a worker that has not woken yet by
 * the time the caller (or another worker) has run every task is simply not waited for, so a
 * descheduled worker on an oversubscribed machine costs nothing unless it holds a task.
 * Jobs alternate between two slots. A slot's claim word packs (generation, next task); a worker
 * claims a task with a compare-and-swap that also checks the generation, so a late worker can
 * never take a task of a newer job, and a job's fn / ctx are read only after a successful claim
 * (the slot cannot be reused until that task is done). The caller publishes job g in slot g & 1
 * only after job g - 1 is done, and job g - 2 (the slot's last) finished before that. */
#include "core/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/alloc.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* Waiting: SPIN_PAUSES pause instructions (~150 us: the gap between the jobs of a step), then
 * SPIN_YIELDS sched_yield calls, then sleep. */
#define SPIN_PAUSES 2048
#define SPIN_YIELDS 64

typedef struct job_slot {
    mxl_task_fn fn;
    void *ctx;
    atomic_int n_tasks; /* atomic: a late worker may read it while the caller refills the slot */
    _Atomic uint64_t claim; /* generation (high 32 bits) | next task (low 32) */
    atomic_int done;        /* tasks finished */
} job_slot;

struct mxl_threadpool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_cond_t finished;
    job_slot slot[2];
    atomic_ulong generation; /* the latest published job (0: none yet) */
    atomic_int shutdown;
};

typedef struct worker_arg {
    mxl_threadpool *pool;
    int index;
} worker_arg;

static void spin_or_yield(int i) {
    if (i < SPIN_PAUSES) CPU_RELAX();
    else sched_yield();
}

/* Runs tasks of job g until none is left (or the slot has moved on to a newer job). */
static void run_tasks(mxl_threadpool *p, unsigned long g, int thread_index) {
    job_slot *s = &p->slot[g & 1];
    const uint64_t tag = (uint64_t)(uint32_t)g << 32;
    for (;;) {
        uint64_t st = atomic_load_explicit(&s->claim, memory_order_acquire);
        if ((st & 0xffffffff00000000ull) != tag) return;
        uint32_t t = (uint32_t)st;
        int n = atomic_load_explicit(&s->n_tasks, memory_order_acquire); /* used only if the claim succeeds */
        if ((int)t >= n) return;
        if (!atomic_compare_exchange_weak_explicit(&s->claim, &st, st + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        s->fn(s->ctx, (int)t, n, thread_index);
        if (atomic_fetch_add_explicit(&s->done, 1, memory_order_acq_rel) + 1 == n) {
            pthread_mutex_lock(&p->mu); /* the caller may be asleep waiting for this job */
            pthread_cond_broadcast(&p->finished);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

/* The next generation after `seen` (spinning, then sleeping), or 0 at shutdown. */
static unsigned long await_job(mxl_threadpool *p, unsigned long seen) {
    for (int i = 0; i < SPIN_PAUSES + SPIN_YIELDS; i++) {
        if (atomic_load_explicit(&p->shutdown, memory_order_acquire)) return 0;
        unsigned long g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen) return g;
        spin_or_yield(i);
    }
    pthread_mutex_lock(&p->mu);
    while (!atomic_load_explicit(&p->shutdown, memory_order_acquire) &&
           atomic_load_explicit(&p->generation, memory_order_acquire) == seen)
        pthread_cond_wait(&p->wake, &p->mu);
    int stop = atomic_load_explicit(&p->shutdown, memory_order_acquire);
    unsigned long g = atomic_load_explicit(&p->generation, memory_order_acquire);
    pthread_mutex_unlock(&p->mu);
    return stop ? 0 : g;
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    mxl_threadpool *p = wa->pool;
    int index = wa->index;
    mxl_free(wa);
    unsigned long seen = 0;
    for (;;) {
        unsigned long g = await_job(p, seen);
        if (g == 0) break;
        seen = g;
        run_tasks(p, g, index);
    }
    return NULL;
}

mxl_status mxl_threadpool_create(int n_threads, mxl_threadpool **out, mxl_error *err) {
    if (n_threads < 1) return mxl_error_set(err, MXL_ERR_ARG, "thread count must be >= 1, got %d", n_threads);
    mxl_threadpool *p = mxl_calloc(1, sizeof *p);
    if (!p) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory creating thread pool");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->finished, NULL);
    for (int i = 0; i < 2; i++) {
        atomic_init(&p->slot[i].claim, 0);
        atomic_init(&p->slot[i].done, 0);
        atomic_init(&p->slot[i].n_tasks, 0);
    }
    atomic_init(&p->generation, 0);
    atomic_init(&p->shutdown, 0);
    if (n_threads > 1) {
        p->threads = mxl_calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!p->threads) {
            mxl_threadpool_destroy(p);
            return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory creating thread pool");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            worker_arg *wa = mxl_malloc(sizeof *wa);
            if (wa) {
                wa->pool = p;
                wa->index = i + 1;
            }
            if (!wa || pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
                mxl_free(wa);
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
    mxl_free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->finished);
    mxl_free(p);
}

int mxl_threadpool_size(const mxl_threadpool *p) { return p->n_threads; }

void mxl_threadpool_run(mxl_threadpool *p, int n_tasks, mxl_task_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, n_tasks, 0);
        return;
    }
    /* the caller is the only writer of generation and of the slots' job fields */
    unsigned long g = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
    if ((uint32_t)g == 0) g++; /* keep the 32-bit tag of a job nonzero */
    job_slot *s = &p->slot[g & 1];
    /* the new tag first: a worker still in run_tasks for the slot's last job (descheduled through
     * the whole of the job between) must not pair that job's claim word with this job's n_tasks.
     * It did: the claim CAS on the old tag succeeded against the new, larger n_tasks, ran a task
     * of this job a second time and counted it in `done`, which then passed n_tasks and the
     * caller waited forever (seen as a hang in test_threadpool_many_short_jobs_oversubscribed).
     * n_tasks is stored with release after the tag and read with acquire, so a worker that sees
     * the new count sees the new tag and its CAS fails. */
    atomic_store_explicit(&s->claim, (uint64_t)(uint32_t)g << 32, memory_order_release);
    s->fn = fn;
    s->ctx = ctx;
    atomic_store_explicit(&s->done, 0, memory_order_relaxed);
    atomic_store_explicit(&s->n_tasks, n_tasks, memory_order_release);
    atomic_store_explicit(&p->generation, g, memory_order_release);
    /* sleepers re-check the generation under the mutex, so this wakes every one of them */
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, g, 0);
    for (int i = 0; i < SPIN_PAUSES + SPIN_YIELDS; i++) {
        if (atomic_load_explicit(&s->done, memory_order_acquire) == n_tasks) return;
        spin_or_yield(i);
    }
    pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&s->done, memory_order_acquire) != n_tasks) pthread_cond_wait(&p->finished, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

int mxl_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
