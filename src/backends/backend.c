/* backend.c - the registry of the backends compiled into the binary (backend.h). Adding a
 * backend: its folder backends/<name>/ defines mxl_backend_register_<name>, and one line below
 * names it. */
#include "backends/backend.h"

#include <pthread.h>
#include <string.h>

/* Each registration function appends its backends to out (at most cap) and returns how many. */
#define MXL_BACKEND_REGISTRATIONS(X) X(cpu)

#define DECLARE(name) int mxl_backend_register_##name(const mxl_backend **out, int cap);
MXL_BACKEND_REGISTRATIONS(DECLARE)
#undef DECLARE

#define MAX_BACKENDS 16
static const mxl_backend *g_backends[MAX_BACKENDS];
static int g_count;
static const mxl_backend *g_host, *g_reference; /* looked up once */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const mxl_backend *find(const char *name) {
    for (int i = 0; i < g_count; i++)
        if (strcmp(g_backends[i]->name, name) == 0) return g_backends[i];
    return NULL;
}

static void register_all(void) {
#define REGISTER(name) g_count += mxl_backend_register_##name(g_backends + g_count, MAX_BACKENDS - g_count);
    MXL_BACKEND_REGISTRATIONS(REGISTER)
#undef REGISTER
    g_host = find("cpu");
    g_reference = find("cpu-ref");
}

int mxl_backend_count(void) {
    pthread_once(&g_once, register_all);
    return g_count;
}

const mxl_backend *mxl_backend_at(int i) { return i >= 0 && i < mxl_backend_count() ? g_backends[i] : NULL; }

const mxl_backend *mxl_backend_get(const char *name) {
    pthread_once(&g_once, register_all);
    return find(name);
}

const mxl_backend *mxl_backend_host(void) {
    pthread_once(&g_once, register_all);
    return g_host;
}

const mxl_backend *mxl_backend_reference(void) {
    pthread_once(&g_once, register_all);
    return g_reference;
}
