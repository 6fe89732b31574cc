/* threadpool.h - the project's own fixed-size thread pool for data-parallel loops.
 *
 * mxl_threadpool_run(pool, n_tasks, fn, ctx) calls fn(ctx, task, n_tasks, thread_index) for task in
 * [0, n_tasks) spread over the pool's threads (the caller's thread takes part) and returns when all
 * are done. Kernels split rows by task index. Workers spin briefly after each run (decode steps
 * dispatch hundreds of short jobs), then sleep on a condition variable;
 * one run at a time per pool (callers serialize). */
#ifndef MXL_CORE_THREADPOOL_H
#define MXL_CORE_THREADPOOL_H

#include "core/status.h"

typedef struct mxl_threadpool mxl_threadpool;
typedef void (*mxl_task_fn)(void *ctx, int task, int n_tasks, int thread_index);

/* n_threads >= 1 (1 means run on the caller only). */
mxl_status mxl_threadpool_create(int n_threads, mxl_threadpool **out, mxl_error *err);
void mxl_threadpool_destroy(mxl_threadpool *pool);
int mxl_threadpool_size(const mxl_threadpool *pool);
void mxl_threadpool_run(mxl_threadpool *pool, int n_tasks, mxl_task_fn fn, void *ctx);
/* Number of online CPUs (at least 1). */
int mxl_cpu_count(void);

#endif
