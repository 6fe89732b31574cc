/* router.c - router mode of `mlxcel serve` (router.h): the model list, the child servers (one
 * process per loaded model, started from /proc/self/exe), their load / unload / LRU eviction, and
 * the relay of requests to them over a loopback socket. */
#include "server/router.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "io/json_read.h"
#include "io/store.h"
#include "server/http.h"
#include "server/limits.h"
#include "server/request.h"
#include "server/server.h"
#include "server/server_state.h"
#include "server/webui.h"

extern char **environ;

#define LOAD_TIMEOUT_MS (600 * 1000)
#define STOP_GRACE_MS (15 * 1000)
#define MAX_ARGS 256

typedef enum mstate { M_UNLOADED, M_LOADING, M_LOADED, M_UNLOADING } mstate;

typedef struct rmodel {
    char id[MXL_STORE_PATH_MAX / 4];
    char path[MXL_STORE_PATH_MAX];
    bool in_cache;           /* from the store or the Hub cache (not --models-dir / a preset) */
    const char *extra[64];   /* preset arguments (heap strings) */
    int n_extra;
    bool load_on_startup;    /* preset: load-on-startup = true */
    char tags[512];          /* preset: tags = a,b (else the router's --tags), listed by /v1/models */
    /* under router.mu */
    mstate state;
    bool failed, unloading;  /* the last load failed / the child is being stopped on purpose */
    int exit_code;
    char error[768];
    pid_t pid;
    int port;
    int active;              /* requests relayed to the child right now */
    uint64_t last_used;      /* router.clock at the last use (LRU) */
} rmodel;

typedef struct router {
    const mxl_server_config *cfg;
    void (*log)(const char *);
    rmodel *models;
    size_t n_models;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t clock;
    bool stopping;
    int drainers; /* child stderr readers still running */
    struct waiter *q_first, *q_last; /* requests waiting to load a model, in arrival order (FIFO) */
    bool fake_timing; /* LLAMA_SERVER_DEBUG_FAKE_TIMING (llama-server's test hook): 2 s more per load and per request */
    char exe[PATH_MAX];
    const char *child_args[MAX_ARGS];
    int n_child_args;
    char **child_env;
    char *api_key;
    const char *prefix;
    mxl_server web; /* only what webui.c reads: prefix, webui, webui_csp */
    mxl_http_server *http;
} router;

static void rlog(router *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rlog(router *rt, const char *fmt, ...) {
    if (!rt->log) return;
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    rt->log(line);
}

/* Copies s into d (cap bytes), cut when longer. */
static void scopy(char *d, size_t cap, const char *s) {
    size_t n = strlen(s);
    if (n >= cap) n = cap - 1;
    memcpy(d, s, n);
    d[n] = 0;
}

static volatile sig_atomic_t g_stop; /* signals seen: the first drains, the second stops at once */
static void on_signal(int sig) {
    (void)sig;
    if (g_stop < 2) g_stop++;
}

static void cond_wait_ms(router *rt, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&rt->cv, &rt->mu, &ts);
}

/* A request waiting for its turn to load a model (acquire); lives on that request's stack. */
typedef struct waiter {
    struct waiter *prev, *next;
} waiter;

static void enqueue_locked(router *rt, waiter *w) {
    w->next = NULL;
    w->prev = rt->q_last;
    if (rt->q_last) rt->q_last->next = w;
    else rt->q_first = w;
    rt->q_last = w;
}

static void dequeue_locked(router *rt, waiter *w) {
    if (w->prev) w->prev->next = w->next;
    else rt->q_first = w->next;
    if (w->next) w->next->prev = w->prev;
    else rt->q_last = w->prev;
    w->prev = w->next = NULL;
    pthread_cond_broadcast(&rt->cv); /* the next one in line may go */
}

/* --- the model list ------------------------------------------------------------------------ */

static bool is_model_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return false;
    bool yes = false;
    struct dirent *e;
    while (!yes && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (!strcmp(e->d_name, "config.json") || (n > 12 && !strcmp(e->d_name + n - 12, ".safetensors")) ||
            (n > 5 && !strcmp(e->d_name + n - 5, ".gguf")))
            yes = true;
    }
    closedir(d);
    return yes;
}

static mxl_status add_model(router *rt, const char *id, const char *path, bool in_cache, mxl_error *err) {
    for (size_t i = 0; i < rt->n_models; i++)
        if (!strcmp(rt->models[i].id, id)) return MXL_OK; /* the store's copy wins over the Hub cache's */
    rmodel *m = mxl_realloc(rt->models, (rt->n_models + 1) * sizeof *m);
    if (!m) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    rt->models = m;
    m = &rt->models[rt->n_models++];
    memset(m, 0, sizeof *m);
    scopy(m->id, sizeof m->id, id);
    scopy(m->path, sizeof m->path, path);
    m->in_cache = in_cache;
    return MXL_OK;
}

static bool dir_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* --models-dir PATH: each model directory (or .gguf file) under PATH, or one level further down
 * (PATH/<owner>/<name>, a store's layout). */
static mxl_status list_models_dir(router *rt, const char *root, mxl_error *err) {
    DIR *d = opendir(root);
    if (!d) return mxl_error_set(err, MXL_ERR_IO, "--models-dir %s: cannot open the directory", root);
    struct dirent *e;
    mxl_status st = MXL_OK;
    while (!st && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[MXL_STORE_PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", root, e->d_name);
        size_t n = strlen(e->d_name);
        if (n > 5 && !strcmp(e->d_name + n - 5, ".gguf") && !dir_exists(p)) {
            char id[256];
            snprintf(id, sizeof id, "%.*s", (int)(n - 5), e->d_name);
            st = add_model(rt, id, p, false, err);
            continue;
        }
        if (!dir_exists(p)) continue;
        if (is_model_dir(p)) {
            st = add_model(rt, e->d_name, p, false, err);
            continue;
        }
        DIR *d2 = opendir(p);
        struct dirent *e2;
        while (!st && d2 && (e2 = readdir(d2))) {
            if (e2->d_name[0] == '.') continue;
            char p2[MXL_STORE_PATH_MAX], id[MXL_STORE_PATH_MAX / 4];
            snprintf(p2, sizeof p2, "%.3800s/%.255s", p, e2->d_name);
            snprintf(id, sizeof id, "%s/%s", e->d_name, e2->d_name);
            if (dir_exists(p2) && is_model_dir(p2)) st = add_model(rt, id, p2, false, err);
        }
        if (d2) closedir(d2);
    }
    closedir(d);
    return st;
}

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && strchr(" \t\r\n", s[n - 1])) s[--n] = 0;
    size_t k = strspn(s, " \t");
    memmove(s, s + k, n - k + 1);
}

/* --models-preset INI: [name] sections; `model = PATH_OR_REPO` (or m / hf-repo) names the model,
 * load-on-startup = true loads it at startup, every other key is a serve flag for its child
 * (key = true: the bare flag; false: left out). Keys of a [*] section apply to every model. */
static mxl_status list_preset(router *rt, const char *file, mxl_error *err) {
    FILE *f = fopen(file, "r");
    if (!f) return mxl_error_set(err, MXL_ERR_IO, "--models-preset %s: cannot open", file);
    char line[4096];
    int lineno = 0;
    rmodel *cur = NULL;
    bool global = false;
    const char *g_extra[64];
    char g_tags[512] = "";
    int n_g = 0;
    mxl_status st = MXL_OK;
    size_t first = rt->n_models;
    while (!st && fgets(line, sizeof line, f)) {
        lineno++;
        trim(line);
        if (!line[0] || line[0] == ';' || line[0] == '#') continue;
        if (line[0] == '[') {
            char *end = strchr(line, ']');
            if (!end) {
                st = mxl_error_set(err, MXL_ERR_ARG, "--models-preset %s:%d: unterminated section", file, lineno);
                break;
            }
            *end = 0;
            global = !strcmp(line + 1, "*");
            if (global) {
                cur = NULL;
                continue;
            }
            if ((st = add_model(rt, line + 1, "", false, err))) break;
            cur = &rt->models[rt->n_models - 1];
            continue;
        }
        char *eq = strchr(line, '=');
        if (!eq) {
            st = mxl_error_set(err, MXL_ERR_ARG, "--models-preset %s:%d: expected key = value", file, lineno);
            break;
        }
        *eq = 0;
        char *key = line, *val = eq + 1;
        trim(key);
        trim(val);
        size_t vl = strlen(val);
        if (vl >= 2 && (val[0] == '"' || val[0] == '\'') && val[vl - 1] == val[0]) val[vl - 1] = 0, val++;
        if (!cur && !global) continue; /* version = 1 and other top-level keys */
        if (cur && (!strcmp(key, "model") || !strcmp(key, "m") || !strcmp(key, "hf-repo") || !strcmp(key, "hf"))) {
            scopy(cur->path, sizeof cur->path, val);
            continue;
        }
        if (!strcmp(key, "tags") || !strcmp(key, "--tags")) { /* (passed on too: the child lists them as well) */
            scopy(cur ? cur->tags : g_tags, sizeof g_tags, val);
            if (!cur) continue; /* [*]'s: below, for the models without their own */
        }
        if (cur && !strcmp(key, "load-on-startup")) {
            cur->load_on_startup = !strcasecmp(val, "true") || !strcmp(val, "1") || !strcasecmp(val, "on");
            continue;
        }
        if (!strcasecmp(val, "false") || !strcasecmp(val, "off")) continue;
        const char **arr = cur ? cur->extra : g_extra;
        int *n = cur ? &cur->n_extra : &n_g;
        if (*n + 2 > 64) {
            st = mxl_error_set(err, MXL_ERR_ARG, "--models-preset %s:%d: too many keys", file, lineno);
            break;
        }
        char flag[256];
        snprintf(flag, sizeof flag, "%s%.200s", key[0] == '-' ? "" : strlen(key) <= 2 ? "-" : "--", key);
        arr[(*n)++] = mxl_strdup(flag);
        if (strcasecmp(val, "true") && strcasecmp(val, "on")) arr[(*n)++] = mxl_strdup(val);
    }
    fclose(f);
    for (size_t i = first; !st && i < rt->n_models; i++) {
        rmodel *m = &rt->models[i];
        if (!m->path[0]) st = mxl_error_set(err, MXL_ERR_ARG, "--models-preset %s: [%s] has no model = PATH", file, m->id);
        if (!m->tags[0] && g_tags[0] && m->n_extra + 2 <= 64) {
            scopy(m->tags, sizeof m->tags, g_tags);
            m->extra[m->n_extra++] = mxl_strdup("--tags");
            m->extra[m->n_extra++] = mxl_strdup(g_tags);
        }
        for (int k = 0; k < n_g && m->n_extra < 64; k++) m->extra[m->n_extra++] = mxl_strdup(g_extra[k]);
    }
    for (int k = 0; k < n_g; k++) mxl_free((void *)g_extra[k]);
    return st;
}

/* llama.cpp's quantization tag of a GGUF file name (its router lists cache models as
 * "owner/name:TAG"): the part after the last '-' or '.' before ".gguf" (and before a
 * "-0000N-of-0000M" split suffix), upper-cased, when it is all letters, digits and '_'. False for
 * no tag, for a split's later parts and for projectors and drafters (mmproj, mtp-, eagle3-,
 * dflash-, dspark-), which are no model of their own. */
static bool gguf_tag(const char *name, char *tag, size_t cap) {
    size_t n = strlen(name);
    if (n <= 5 || strcmp(name + n - 5, ".gguf")) return false;
    n -= 5;
    static const char *const skip[] = {"mmproj", "mtp-", "eagle3-", "dflash-", "dspark-"};
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (strstr(name, skip[i]) && (size_t)(strstr(name, skip[i]) - name) < n) return false;
    /* "-00001-of-00003": 15 bytes */
    if (n > 15 && name[n - 15] == '-' && !strncmp(name + n - 9, "-of-", 4) &&
        strspn(name + n - 14, "0123456789") == 5 && strspn(name + n - 5, "0123456789") == 5) {
        if (strncmp(name + n - 14, "00001", 5)) return false;
        n -= 15;
    }
    size_t k = n;
    while (k > 0 && (isalnum((unsigned char)name[k - 1]) || name[k - 1] == '_')) k--;
    if (k == 0 || k == n || (name[k - 1] != '-' && name[k - 1] != '.') || n - k >= cap) return false;
    for (size_t i = k; i < n; i++) tag[i - k] = (char)toupper((unsigned char)name[i]);
    tag[n - k] = 0;
    return true;
}

/* The GGUF files of dir with a tag, as models "repo:TAG" (a tag seen before keeps its file);
 * with subdirs, those of each directory in dir too, after dir's own. */
static mxl_status add_tagged(router *rt, const char *repo, const char *dir, bool subdirs, bool *tagged, mxl_error *err) {
    mxl_status st = MXL_OK;
    for (int pass = 0; pass < (subdirs ? 2 : 1) && !st; pass++) {
        DIR *d = opendir(dir);
        struct dirent *e;
        while (!st && d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[MXL_STORE_PATH_MAX], tag[64], id[MXL_STORE_PATH_MAX / 4];
            snprintf(p, sizeof p, "%.3800s/%.255s", dir, e->d_name);
            if (pass == 1) {
                if (dir_exists(p)) st = add_tagged(rt, repo, p, false, tagged, err);
            } else if (gguf_tag(e->d_name, tag, sizeof tag) && !dir_exists(p)) {
                snprintf(id, sizeof id, "%.900s:%s", repo, tag);
                *tagged = true;
                st = add_model(rt, id, p, true, err);
            }
        }
        if (d) closedir(d);
    }
    return st;
}

/* A Hugging Face cache repo (its snapshot directory): one model per GGUF quantization tag, named
 * "owner/name:TAG" as llama-server's router names them, and the repo itself when it holds a
 * model otherwise (config.json + safetensors). GGUF files one directory down count too. */
static mxl_status add_cache_repo(router *rt, const char *repo, const char *snap, mxl_error *err) {
    bool tagged = false;
    mxl_status st = add_tagged(rt, repo, snap, true, &tagged, err);
    if (st) return st;
    char cfgp[MXL_STORE_PATH_MAX];
    snprintf(cfgp, sizeof cfgp, "%.3800s/config.json", snap);
    if (!tagged || access(cfgp, F_OK) == 0) return add_model(rt, repo, snap, true, err);
    return MXL_OK;
}

static int cmp_model(const void *a, const void *b) { return strcmp(((const rmodel *)a)->id, ((const rmodel *)b)->id); }

static mxl_status list_models(router *rt, mxl_error *err) {
    const mxl_server_config *cfg = rt->cfg;
    mxl_status st;
    if (cfg->models_preset) {
        if ((st = list_preset(rt, cfg->models_preset, err))) return st;
    } else if (cfg->models_dir) {
        if ((st = list_models_dir(rt, cfg->models_dir, err))) return st;
    } else {
        char root[MXL_STORE_PATH_MAX];
        mxl_store_entry *e = NULL;
        size_t n = 0;
        if ((st = mxl_store_root(cfg->model_store_root, root, sizeof root, err)) || (st = mxl_store_list(root, &e, &n, err))) return st;
        for (size_t i = 0; !st && i < n; i++) st = add_model(rt, e[i].repo_id, e[i].path, true, err);
        mxl_store_entries_free(e);
        e = NULL;
        n = 0;
        if (!st && (st = mxl_store_hf_list(&e, &n, err))) return st;
        for (size_t i = 0; !st && i < n; i++) st = add_cache_repo(rt, e[i].repo_id, e[i].path, err);
        mxl_store_entries_free(e);
        if (st) return st;
    }
    if (rt->n_models) qsort(rt->models, rt->n_models, sizeof *rt->models, cmp_model);
    return MXL_OK;
}

/* A request's model: its id (a cache tag in any case: "owner/name:q8_0"), else the only model
 * whose id is "<name>:TAG" (a cache repo with one quantization), else the only model whose id
 * ends in "/<name>". */
static rmodel *find_model(router *rt, const char *name) {
    if (!name || !*name) return NULL;
    rmodel *hit = NULL;
    for (size_t i = 0; i < rt->n_models; i++)
        if (!strcmp(rt->models[i].id, name)) return &rt->models[i];
    size_t nl = strlen(name);
    for (size_t i = 0; i < rt->n_models; i++) {
        const char *id = rt->models[i].id;
        if (strchr(name, ':') ? !strcasecmp(id, name) : (!strncmp(id, name, nl) && id[nl] == ':')) {
            if (hit) return NULL;
            hit = &rt->models[i];
        }
    }
    if (hit) return hit;
    for (size_t i = 0; i < rt->n_models; i++) {
        const char *slash = strrchr(rt->models[i].id, '/');
        if (slash && !strcmp(slash + 1, name)) {
            if (hit) return NULL;
            hit = &rt->models[i];
        }
    }
    return hit;
}

/* --- child servers ---------------------------------------------------------------------------- */

/* A child's line the router logs without --verbose: its errors and sanitizer reports. */
static bool worth_logging(const char *line) {
    return !strncmp(line, "error: ", 7) || strstr(line, "Sanitizer") || strstr(line, "runtime error") || strstr(line, "LeakSanitizer");
}

typedef struct drainer {
    router *rt;
    rmodel *m;
    int fd;
    pid_t pid;
} drainer;

/* After the load: keeps the child's stderr drained (logged with --verbose) and, when it closes,
 * reaps the child and marks the model unloaded (failed, when nobody asked it to stop). */
static void *drain_child(void *arg) {
    drainer *d = arg;
    router *rt = d->rt;
    FILE *f = fdopen(d->fd, "r");
    char line[2048], last_error[768] = "";
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "error: ", 7)) scopy(last_error, sizeof last_error, line + 7);
        if (rt->cfg->verbose || worth_logging(line)) rlog(rt, "[%s] %s", d->m->id, line);
    }
    if (f) fclose(f);
    else close(d->fd);
    int ws = 0;
    while (waitpid(d->pid, &ws, 0) < 0 && errno == EINTR) {}
    pthread_mutex_lock(&rt->mu);
    rmodel *m = d->m;
    if (m->pid == d->pid) {
        if (!m->unloading && !rt->stopping) {
            m->failed = true;
            m->exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            snprintf(m->error, sizeof m->error, "the server of %.200s exited (%s %d)%s%.400s", m->id, WIFEXITED(ws) ? "status" : "signal",
                     WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws), last_error[0] ? ": " : "", last_error);
            rlog(rt, "model %s: %s", m->id, m->error);
        }
        m->state = M_UNLOADED;
        m->unloading = false;
        m->pid = 0;
        m->port = 0;
    }
    rt->drainers--;
    pthread_cond_broadcast(&rt->cv);
    pthread_mutex_unlock(&rt->mu);
    mxl_free(d);
    return NULL;
}

/* Starts the child of m and waits for its "ready:" line. Called without the lock, m in
 * M_LOADING. On success fills *port and hands the child to a drainer. */
static mxl_status start_child(router *rt, rmodel *m, mxl_error *err) {
    const char *argv[MAX_ARGS + 80];
    int n = 0;
    argv[n++] = rt->exe;
    argv[n++] = "serve";
    argv[n++] = "-m";
    argv[n++] = m->path;
    argv[n++] = "--host";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--alias";
    argv[n++] = m->id;
    for (int i = 0; i < rt->n_child_args; i++) argv[n++] = rt->child_args[i];
    for (int i = 0; i < m->n_extra; i++) argv[n++] = m->extra[i];
    argv[n] = NULL;
    int p[2];
    if (pipe2(p, O_CLOEXEC)) return mxl_error_set(err, MXL_ERR_IO, "pipe: %s", strerror(errno));
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        if (devnull >= 0) close(devnull);
        return mxl_error_set(err, MXL_ERR_IO, "fork: %s", strerror(errno));
    }
    if (pid == 0) { /* async-signal-safe calls only */
        /* (no PR_SET_PDEATHSIG: it follows the forking thread, a connection's, which ends first) */
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        dup2(p[1], 2);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(rt->exe, (char *const *)argv, rt->child_env);
        static const char msg[] = "error: cannot run the mlxcel binary for the child server\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(127);
    }
    close(p[1]);
    if (devnull >= 0) close(devnull);
    pthread_mutex_lock(&rt->mu);
    m->pid = pid;
    pthread_mutex_unlock(&rt->mu);
    /* its lines, until "ready:" (or the end: a failed load) */
    char buf[8192], last_error[768] = "", last_line[768] = "";
    size_t len = 0;
    int port = 0;
    bool ready = false, eof = false;
    double deadline = mxl_now_ms() + LOAD_TIMEOUT_MS;
    while (!ready && !eof) {
        double left = deadline - mxl_now_ms();
        if (left <= 0) break;
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        int pr = poll(&pf, 1, left > 1000 ? 1000 : (int)left);
        if (pr < 0 && errno != EINTR) break;
        if (pr <= 0) continue;
        ssize_t r = read(p[0], buf + len, sizeof buf - 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            eof = true;
            if (len) buf[len++] = '\n'; /* a last line without its newline */
        } else {
            len += (size_t)r;
        }
        buf[len] = 0;
        char *nl;
        while ((nl = memchr(buf, '\n', len))) {
            *nl = 0;
            const char *line = buf;
            if (rt->cfg->verbose || worth_logging(line)) rlog(rt, "[%s] %s", m->id, line);
            const char *u = strstr(line, "http://127.0.0.1:");
            if (u && !port) port = atoi(u + 17);
            if (strstr(line, "ready:")) ready = true;
            if (!strncmp(line, "error: ", 7)) scopy(last_error, sizeof last_error, line + 7);
            else if (line[0]) scopy(last_line, sizeof last_line, line);
            size_t used = (size_t)(nl - buf) + 1;
            memmove(buf, nl + 1, len - used);
            len -= used;
            buf[len] = 0;
        }
        if (len == sizeof buf - 1) len = 0; /* an overlong line: dropped */
    }
    if (ready && port > 0) {
        drainer *d = mxl_calloc(1, sizeof *d);
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (d) *d = (drainer){rt, m, p[0], pid};
        pthread_mutex_lock(&rt->mu);
        m->port = port;
        rt->drainers++;
        bool started = d && pthread_create(&th, &at, drain_child, d) == 0;
        if (!started) rt->drainers--;
        pthread_mutex_unlock(&rt->mu);
        pthread_attr_destroy(&at);
        if (started) return MXL_OK;
        mxl_free(d);
        snprintf(last_error, sizeof last_error, "cannot start a thread for the child server");
    }
    /* failed: stop it if it still runs, and reap it */
    kill(pid, SIGTERM);
    double stop_by = mxl_now_ms() + STOP_GRACE_MS;
    int ws = 0;
    pid_t w;
    while ((w = waitpid(pid, &ws, WNOHANG)) == 0 && mxl_now_ms() < stop_by) usleep(20 * 1000);
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &ws, 0);
    }
    close(p[0]);
    pthread_mutex_lock(&rt->mu);
    m->pid = 0;
    m->exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    pthread_mutex_unlock(&rt->mu);
    if (!eof && !ready) return mxl_error_set(err, MXL_ERR_IO, "loading %s timed out after %d s", m->id, LOAD_TIMEOUT_MS / 1000);
    return mxl_error_set(err, MXL_ERR_IO, "loading %s failed: %s", m->id,
                         last_error[0] ? last_error : last_line[0] ? last_line : "the child server exited");
}

/* Asks m's child to stop and waits until its drainer reaped it. With the lock held. */
static void stop_child_locked(router *rt, rmodel *m) {
    if (m->state != M_LOADED || m->pid <= 0) return;
    m->state = M_UNLOADING;
    m->unloading = true;
    pid_t pid = m->pid;
    kill(pid, SIGTERM);
    double kill_at = mxl_now_ms() + STOP_GRACE_MS;
    while (m->pid == pid) {
        if (mxl_now_ms() > kill_at) {
            kill(pid, SIGKILL);
            kill_at = mxl_now_ms() + 60 * 1000;
        }
        cond_wait_ms(rt, 200);
    }
}

/* Makes room for one more loaded model under --models-max: unloads the least recently used idle
 * one, or waits for one to become idle. With the lock held; false when it waited or unloaded (the
 * caller looks at the state again). */
static bool make_room_locked(router *rt, rmodel *want) {
    if (rt->cfg->models_max <= 0) return true;
    int64_t in_memory = 0;
    rmodel *lru = NULL;
    for (size_t i = 0; i < rt->n_models; i++) {
        rmodel *m = &rt->models[i];
        if (m == want || m->state == M_UNLOADED) continue;
        in_memory++;
        if (m->state == M_LOADED && m->active == 0 && (!lru || m->last_used < lru->last_used)) lru = m;
    }
    if (in_memory < rt->cfg->models_max) return true;
    if (lru) {
        rlog(rt, "model %s: unloading it (least recently used) to load %s under --models-max %lld", lru->id, want->id,
             (long long)rt->cfg->models_max);
        stop_child_locked(rt, lru);
    } else {
        cond_wait_ms(rt, 500); /* every loaded model is busy: wait for one to finish */
    }
    return false;
}

/* Gets m loaded (loading it when `load` allows) and counts a use of it. False with *status and
 * msg set when it cannot be. Requests that must load a model queue in arrival order: only the
 * first in line evicts and loads, so two waiters never take two models' places for one, and a
 * waiter whose model another one is loading just waits for that load (one load for all). A
 * request whose client leaves (r, when given) while it waits gives up its place. */
static bool acquire(router *rt, rmodel *m, mxl_http_req *r, bool load, bool count_use, int *status, char *msg, size_t cap) {
    pthread_mutex_lock(&rt->mu);
    bool waited_for_load = false, queued = false;
    waiter w = {0};
    for (;;) {
        if (rt->stopping) {
            *status = 503;
            snprintf(msg, cap, "the server is shutting down");
            break;
        }
        if (m->state == M_LOADED) {
            if (queued) dequeue_locked(rt, &w);
            if (count_use) m->active++;
            m->last_used = ++rt->clock;
            pthread_mutex_unlock(&rt->mu);
            return true;
        }
        if (r && mxl_http_client_gone(r)) {
            *status = 499;
            snprintf(msg, cap, "the client closed the connection while the request waited for %.400s", m->id);
            break;
        }
        if (m->state == M_LOADING || m->state == M_UNLOADING) {
            waited_for_load |= m->state == M_LOADING;
            cond_wait_ms(rt, 200);
            continue;
        }
        if (waited_for_load && m->failed) { /* the load this request waited for failed */
            *status = 500;
            snprintf(msg, cap, "%s", m->error);
            break;
        }
        if (!load) {
            *status = 400;
            snprintf(msg, cap, "model %.400s is not loaded: load it first with POST /models/load (autoload is off)", m->id);
            break;
        }
        if (!queued) {
            enqueue_locked(rt, &w);
            queued = true;
        }
        if (rt->q_first != &w) { /* another request is first in line */
            cond_wait_ms(rt, 200);
            continue;
        }
        if (!make_room_locked(rt, m)) continue;
        dequeue_locked(rt, &w);
        queued = false;
        m->state = M_LOADING;
        m->failed = false;
        m->error[0] = 0;
        m->exit_code = 0;
        waited_for_load = true;
        pthread_mutex_unlock(&rt->mu);
        if (rt->fake_timing) sleep(2);
        rlog(rt, "model %s: loading %s", m->id, m->path);
        double t0 = mxl_now_ms();
        mxl_error err = {0};
        mxl_status st = start_child(rt, m, &err);
        pthread_mutex_lock(&rt->mu);
        if (st) {
            m->state = M_UNLOADED;
            m->failed = true;
            scopy(m->error, sizeof m->error, err.msg);
            rlog(rt, "model %s: %s", m->id, err.msg);
        } else {
            m->state = M_LOADED;
            m->last_used = ++rt->clock;
            rlog(rt, "model %s ready: pid %d on http://127.0.0.1:%d, loaded in %.1f s", m->id, (int)m->pid, m->port, (mxl_now_ms() - t0) / 1e3);
        }
        pthread_cond_broadcast(&rt->cv);
    }
    if (queued) dequeue_locked(rt, &w);
    pthread_mutex_unlock(&rt->mu);
    return false;
}

static void release(router *rt, rmodel *m) {
    pthread_mutex_lock(&rt->mu);
    m->active--;
    m->last_used = ++rt->clock;
    pthread_cond_broadcast(&rt->cv);
    pthread_mutex_unlock(&rt->mu);
}

/* --- relaying a request ------------------------------------------------------------------------ */

static bool write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

typedef struct relay {
    router *rt;
    rmodel *m;
    int fd;
    char *pending; /* body bytes read with the head */
    size_t pending_len, pending_off;
} relay;

static ssize_t relay_produce(void *ctx, char *buf, size_t max) {
    relay *x = ctx;
    if (x->pending_off < x->pending_len) {
        size_t n = x->pending_len - x->pending_off;
        if (n > max) n = max;
        memcpy(buf, x->pending + x->pending_off, n);
        x->pending_off += n;
        return (ssize_t)n;
    }
    for (;;) {
        ssize_t r = recv(x->fd, buf, max, 0);
        if (r < 0 && errno == EINTR) continue;
        return r > 0 ? r : -1;
    }
}

static void relay_done(void *ctx, bool gone) {
    (void)gone;
    relay *x = ctx;
    close(x->fd); /* a client gone mid-stream: the child sees its connection close and stops */
    release(x->rt, x->m);
    mxl_free(x->pending);
    mxl_free(x);
}

static const char *header_value(const char *head, const char *name, char *out, size_t cap) {
    size_t nl = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *h = p + 2;
        if (!strncasecmp(h, name, nl) && h[nl] == ':') {
            h += nl + 1;
            while (*h == ' ') h++;
            const char *e = strstr(h, "\r\n");
            size_t n = e ? (size_t)(e - h) : strlen(h);
            snprintf(out, cap, "%.*s", (int)n, h);
            return out;
        }
    }
    return NULL;
}

/* Relays r to m's child (which acquire() counted as in use: released here or when the stream
 * ends). The child answers HTTP/1.0, so its body ends when it closes the connection. */
/* Relays r to m's child and its answer back; releases m. With probe, a whole 404 answer is not
 * relayed: false, and the caller may ask another child (nothing was sent). */
static bool relay_request(router *rt, mxl_http_req *r, rmodel *m, const char *path, mxl_api api, bool probe) {
    pthread_mutex_lock(&rt->mu);
    int port = m->port;
    pthread_mutex_unlock(&rt->mu);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0) close(fd);
        release(rt, m);
        mxl_srv_error(r, api, 502, "server_error", "the server of %s does not answer", m->id);
        return true;
    }
    size_t body_len = 0;
    const char *body = mxl_http_body(r, &body_len);
    char query[4096];
    mxl_http_query_string(r, query, sizeof query);
    const char *ctype = mxl_http_header(r, "Content-Type"), *accept = mxl_http_header(r, "Accept");
    const char *version = mxl_http_header(r, "anthropic-version");
    char head[8192];
    int hn = snprintf(head, sizeof head, "%s %s%s%s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\nContent-Length: %zu\r\n%s%s%s%s%s%s%s%s%s\r\n",
                      mxl_http_method(r), path, query[0] ? "?" : "", query, port, body_len, ctype ? "Content-Type: " : "",
                      ctype ? ctype : "", ctype ? "\r\n" : "", accept ? "Accept: " : "", accept ? accept : "", accept ? "\r\n" : "",
                      version ? "anthropic-version: " : "", version ? version : "", version ? "\r\n" : "");
    if (hn < 0 || (size_t)hn >= sizeof head || !write_all(fd, head, (size_t)hn) || !write_all(fd, body, body_len)) {
        close(fd);
        release(rt, m);
        mxl_srv_error(r, api, 502, "server_error", "the server of %s closed the connection", m->id);
        return true;
    }
    /* the response head */
    size_t cap = 16384, len = 0;
    char *buf = mxl_malloc(cap + 1);
    char *end = NULL;
    while (buf) {
        ssize_t n = recv(fd, buf + len, cap - len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
        buf[len] = 0;
        if ((end = strstr(buf, "\r\n\r\n"))) break;
        if (len == cap) break;
    }
    int status = 0;
    if (!buf || !end || sscanf(buf, "HTTP/%*d.%*d %d", &status) != 1 || status < 100) {
        close(fd);
        mxl_free(buf);
        release(rt, m);
        mxl_srv_error(r, api, 502, "server_error", "the server of %s gave no valid response", m->id);
        return true;
    }
    *end = 0;
    char content_type[256];
    if (!header_value(buf, "Content-Type", content_type, sizeof content_type)) snprintf(content_type, sizeof content_type, "application/json");
    size_t body_off = (size_t)(end + 4 - buf);
    if (strstr(content_type, "text/event-stream")) { /* a stream: relayed as it comes */
        relay *x = mxl_calloc(1, sizeof *x);
        if (!x) {
            close(fd);
            mxl_free(buf);
            release(rt, m);
            mxl_srv_error(r, api, 500, "server_error", "out of memory");
            return true;
        }
        *x = (relay){rt, m, fd, buf, len, body_off};
        mxl_http_stream(r, status, content_type, relay_produce, relay_done, x);
        return true;
    }
    memmove(buf, buf + body_off, len - body_off); /* a whole answer: read to its end */
    len -= body_off;
    for (;;) {
        if (len == cap) {
            char *nb = mxl_realloc(buf, cap * 2 + 1);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        ssize_t n = recv(fd, buf + len, cap - len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
    }
    close(fd);
    release(rt, m);
    if (probe && status == 404) {
        mxl_free(buf);
        return false;
    }
    mxl_http_send(r, status, content_type, buf, len);
    mxl_free(buf);
    return true;
}

/* --- the router's own routes -------------------------------------------------------------------- */

static const char *state_name(mstate s) {
    return s == M_LOADED ? "loaded" : s == M_LOADING ? "loading" : s == M_UNLOADING ? "unloading" : "unloaded";
}

/* GET /v1/models, /models: llama-server's router listing (id, path, in_cache, status{value,
 * failed, exit_code}), with the OpenAI fields. */
static void list_route(router *rt, mxl_http_req *r) {
    json_t *data = json_array();
    pthread_mutex_lock(&rt->mu);
    for (size_t i = 0; i < rt->n_models; i++) {
        rmodel *m = &rt->models[i];
        json_t *st = json_pack("{s:s}", "value", state_name(m->state));
        if (m->state == M_LOADED || m->state == M_LOADING) {
            json_t *args = json_array();
            json_array_append_new(args, json_string("mlxcel-server"));
            for (int k = 0; k < rt->n_child_args; k++) json_array_append_new(args, json_string(rt->child_args[k]));
            for (int k = 0; k < m->n_extra; k++) json_array_append_new(args, json_string(m->extra[k]));
            json_object_set_new(st, "args", args);
        }
        if (m->state == M_UNLOADED && m->failed) {
            json_object_set_new(st, "failed", json_true());
            json_object_set_new(st, "exit_code", json_integer(m->exit_code));
            json_object_set_new(st, "error", json_string(m->error));
        }
        json_array_append_new(data, json_pack("{s:s, s:s, s:s, s:I, s:s, s:b, s:o, s:o}", "id", m->id, "object", "model", "owned_by", "mlxcel",
                                              "created", (json_int_t)rt->web.created, "path", m->path, "in_cache", m->in_cache, "status", st,
                                              "tags", mxl_srv_split_list(m->tags[0] ? m->tags : rt->cfg->tags)));
    }
    pthread_mutex_unlock(&rt->mu);
    mxl_http_send_json(r, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

/* The JSON body's "model" (a copy; NULL when there is none). */
static char *body_model(mxl_http_req *r) {
    size_t len = 0;
    const char *body = mxl_http_body(r, &len);
    if (!len) return NULL;
    json_error_t je;
    json_t *o = mxl_json_loadb(body, len, 0, &je);
    const char *v = json_is_object(o) ? json_string_value(json_object_get(o, "model")) : NULL;
    char *out = v ? mxl_strdup(v) : NULL;
    json_decref(o);
    return out;
}

/* POST /models/load and /models/unload {"model": "..."}: {"success": true}. */
static void load_route(router *rt, mxl_http_req *r, bool load) {
    char *name = body_model(r);
    rmodel *m = find_model(rt, name);
    if (!name) mxl_srv_error(r, MXL_API_OPENAI, 400, "invalid_request_error", "the body needs a \"model\" field");
    else if (!m) mxl_srv_error(r, MXL_API_OPENAI, 404, "not_found_error", "model '%s' not found", name);
    else if (load) {
        int status = 0;
        char msg[1024];
        if (acquire(rt, m, r, true, false, &status, msg, sizeof msg)) mxl_http_send_json(r, 200, json_pack("{s:b}", "success", 1));
        else mxl_srv_error(r, MXL_API_OPENAI, status, status == 500 ? "server_error" : "unavailable_error", "%s", msg);
    } else {
        pthread_mutex_lock(&rt->mu);
        while (m->state == M_LOADING || m->state == M_UNLOADING) pthread_cond_wait(&rt->cv, &rt->mu);
        bool was_loaded = m->state == M_LOADED;
        if (was_loaded) {
            rlog(rt, "model %s: unloading it (POST /models/unload)", m->id);
            stop_child_locked(rt, m);
        }
        pthread_mutex_unlock(&rt->mu);
        if (was_loaded) mxl_http_send_json(r, 200, json_pack("{s:b}", "success", 1));
        else mxl_srv_error(r, MXL_API_OPENAI, 400, "invalid_request_error", "model %s is not loaded", m->id);
    }
    mxl_free(name);
}

/* GET /props without ?model=: the router's own, as llama-server's router answers it (role,
 * max_instances, models_autoload, and placeholders where a model's values would be). */
static void props_route(router *rt, mxl_http_req *r) {
    mxl_http_send_json(r, 200, json_pack("{s:s, s:I, s:b, s:s, s:s, s:{s:{}, s:i}, s:s}", "role", "router", "max_instances",
                                         (json_int_t)rt->cfg->models_max, "models_autoload", rt->cfg->models_autoload, "model_alias",
                                         "mlxcel-router", "model_path", "none", "default_generation_settings", "params", "n_ctx", 0,
                                         "build_info", "mlxcel " MXL_VERSION));
}

static bool authorized(const router *rt, mxl_http_req *r) {
    if (!rt->api_key) return true;
    const char *h = mxl_http_header(r, "Authorization");
    if (h && strncasecmp(h, "Bearer ", 7) == 0 && mxl_srv_key_equal(h + 7, rt->api_key)) return true;
    const char *x = mxl_http_header(r, "X-Api-Key");
    return x && mxl_srv_key_equal(x, rt->api_key); /* (constant time: limits.h) */
}

static void handle(void *ctx, mxl_http_req *r) {
    router *rt = ctx;
    const char *path = mxl_http_path(r), *method = mxl_http_method(r);
    mxl_api api = strncmp(path, "/v1/messages", 12) == 0 ? MXL_API_ANTHROPIC : MXL_API_OPENAI;
    bool public_route = !strcmp(path, "/") || !strcmp(path, "/health") || !strcmp(path, "/v1/health");
    size_t pl = strlen(rt->prefix);
    if (rt->web.webui && strncmp(path, rt->prefix, pl) == 0 && mxl_webui_route(&rt->web, r, path + pl)) return;
    if (g_stop) { /* draining: the children finish what they run, nothing new starts */
        mxl_srv_error(r, api, 503, "unavailable_error", "the server is shutting down");
        return;
    }
    if (!public_route && !authorized(rt, r)) {
        mxl_srv_error(r, api, 401, "authentication_error", "Invalid API Key");
        return;
    }
    if (pl && !public_route) {
        if (strncmp(path, rt->prefix, pl) != 0 || (path[pl] != '/' && path[pl] != 0)) {
            mxl_srv_error(r, api, 404, "not_found_error", "File Not Found");
            return;
        }
        path += pl;
    }
    if (!strcmp(path, "/") || !*path) {
        const char *page = "mlxcel router: see /v1/models, /models/load, /models/unload, /v1/chat/completions, /health\n";
        mxl_http_send(r, 200, "text/plain; charset=utf-8", page, strlen(page));
        return;
    }
    if (!strcmp(path, "/health") || !strcmp(path, "/v1/health")) {
        mxl_http_send_json(r, 200, json_pack("{s:s}", "status", "ok"));
        return;
    }
    bool get = !strcmp(method, "GET");
    if (!strcmp(path, "/v1/models") || !strcmp(path, "/models")) {
        if (get) list_route(rt, r);
        else mxl_srv_error(r, api, 405, "invalid_request_error", "method %s is not allowed on %s", method, path);
        return;
    }
    if ((!strcmp(path, "/props") || !strcmp(path, "/v1/props")) && get && !mxl_http_query(r, "model")) {
        props_route(rt, r); /* with ?model=, the model's own (relayed below) */
        return;
    }
    if (!strcmp(path, "/models/load") || !strcmp(path, "/models/unload")) {
        if (!strcmp(method, "POST")) load_route(rt, r, !strcmp(path, "/models/load"));
        else mxl_srv_error(r, api, 405, "invalid_request_error", "method %s is not allowed on %s", method, path);
        return;
    }
    /* a stored response or conversation named by its id alone lives in one of the children: each
     * loaded one is asked in turn (they keep their own stores) */
    /* (creating a conversation is not: it goes to the model the request names, below, or the only
     * one loaded) */
    const bool create = !strcmp(path, "/v1/conversations") && !strcmp(method, "POST");
    const bool stored = (!strncmp(path, "/v1/responses/", 14) && path[14]) || (!strncmp(path, "/responses/", 11) && path[11]) ||
                        (!strncmp(path, "/v1/conversations", 17) && !create);
    if (stored && !mxl_http_query(r, "model")) {
        rmodel *loaded[64];
        size_t n_loaded = 0;
        pthread_mutex_lock(&rt->mu);
        for (size_t i = 0; i < rt->n_models && n_loaded < 64; i++)
            if (rt->models[i].state == M_LOADED) loaded[n_loaded++] = &rt->models[i];
        pthread_mutex_unlock(&rt->mu);
        int st = 0;
        char msg[1024];
        for (size_t i = 0; i < n_loaded; i++)
            if (acquire(rt, loaded[i], r, false, false, &st, msg, sizeof msg) && relay_request(rt, r, loaded[i], path, api, true)) return;
        mxl_srv_error(r, api, 404, "not_found_error", "%s was not found in any loaded model's store (a model's stored responses go when it is unloaded)", path);
        return;
    }
    /* everything else goes to the model the request names */
    char *name = NULL;
    const char *q = mxl_http_query(r, "model");
    if (q) name = mxl_strdup(q);
    else if (!get) name = body_model(r);
    rmodel *m = find_model(rt, name);
    if (!name) {
        /* no model named: the only one loaded, as a single-model server would answer */
        pthread_mutex_lock(&rt->mu);
        size_t loaded = 0;
        for (size_t i = 0; i < rt->n_models; i++)
            if (rt->models[i].state == M_LOADED) loaded++, m = &rt->models[i];
        pthread_mutex_unlock(&rt->mu);
        if (loaded != 1) {
            mxl_srv_error(r, api, 400, "invalid_request_error",
                          "router mode: the request must name its model (\"model\" in the body, or ?model= on a GET); see /v1/models");
            return;
        }
    } else if (!m) {
        mxl_srv_error(r, api, 404, "not_found_error", "model '%s' not found: see /v1/models", name);
        mxl_free(name);
        return;
    }
    mxl_free(name);
    int status = 0;
    char msg[1024];
    if (!acquire(rt, m, r, rt->cfg->models_autoload, true, &status, msg, sizeof msg)) {
        if (status == 499) return; /* nobody to answer */
        mxl_srv_error(r, api, status, status == 500 ? "server_error" : status == 503 ? "unavailable_error" : "invalid_request_error", "%s", msg);
        return;
    }
    if (rt->fake_timing) sleep(2); /* (the model counts as busy meanwhile, as in llama-server) */
    relay_request(rt, r, m, path, api, false);
}

/* --- the process ------------------------------------------------------------------------------- */

/* The environment of the children, less what would give them the router's address, key, prefix
 * or model. */
static char **child_environment(void) {
    static const char *const drop[] = {"LLAMA_API_KEY=", "LLAMA_ARG_API_PREFIX=", "LLAMA_ARG_HOST=", "LLAMA_ARG_PORT=",
                                       "LLAMA_ARG_MODELS_DIR=", "LLAMA_ARG_UI=", "LLAMA_ARG_MODEL=", "LLAMA_ARG_ALIAS=",
                                       "LLAMA_ARG_CORS_", "MLXCEL_ALLOWED_ORIGINS=", "LLAMA_ARG_REUSE_PORT=",
                                       "MLXCEL_MAX_CONNECTIONS_PER_IP=" /* (their clients: the router, on loopback) */};
    /* the children watch for the router's end (server.c wait_for_signal): a SIGKILLed router,
     * which can stop nothing, leaves no server behind */
    static char router_pid[64];
    snprintf(router_pid, sizeof router_pid, "MLXCEL_ROUTER_PID=%ld", (long)getpid());
    size_t n = 0;
    while (environ[n]) n++;
    char **env = mxl_calloc(n + 2, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool keep = strncmp(environ[i], "MLXCEL_ROUTER_PID=", 18) != 0;
        for (size_t d = 0; d < sizeof drop / sizeof drop[0]; d++)
            if (!strncmp(environ[i], drop[d], strlen(drop[d]))) keep = false;
        if (keep) env[k++] = environ[i];
    }
    env[k++] = router_pid;
    return env;
}

static char *read_key_file(const char *path, mxl_error *err) {
    FILE *f = fopen(path, "r");
    if (!f) {
        mxl_error_set(err, MXL_ERR_IO, "--api-key-file %s: cannot open", path);
        return NULL;
    }
    char line[4096] = "";
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    fclose(f);
    trim(line);
    if (!line[0]) {
        mxl_error_set(err, MXL_ERR_ARG, "--api-key-file %s: the file is empty", path);
        return NULL;
    }
    return mxl_strdup(line);
}

static void stop_all(router *rt) {
    pthread_mutex_lock(&rt->mu);
    rt->stopping = true;
    pthread_cond_broadcast(&rt->cv);
    for (size_t i = 0; i < rt->n_models; i++)
        if (rt->models[i].pid > 0) kill(rt->models[i].pid, SIGTERM);
    /* each child drains for up to --shutdown-timeout (it has the flag too), then is killed */
    double kill_at = mxl_now_ms() + 1000.0 * (double)rt->cfg->shutdown_timeout + STOP_GRACE_MS;
    bool forwarded = false;
    for (;;) {
        if (g_stop >= 2 && !forwarded) { /* a second signal: the children stop at once too */
            for (size_t i = 0; i < rt->n_models; i++)
                if (rt->models[i].pid > 0) kill(rt->models[i].pid, SIGTERM);
            forwarded = true;
        }
        bool busy = rt->drainers > 0;
        for (size_t i = 0; i < rt->n_models; i++) busy |= rt->models[i].state == M_LOADING;
        if (!busy) break;
        if (mxl_now_ms() > kill_at) {
            for (size_t i = 0; i < rt->n_models; i++)
                if (rt->models[i].pid > 0) kill(rt->models[i].pid, SIGKILL);
            kill_at = mxl_now_ms() + 60 * 1000;
        }
        cond_wait_ms(rt, 100);
    }
    pthread_mutex_unlock(&rt->mu);
}

typedef struct startup_load {
    router *rt;
    rmodel *m;
} startup_load;

static void *load_at_startup(void *arg) {
    startup_load *s = arg;
    int status;
    char msg[1024];
    acquire(s->rt, s->m, NULL, true, false, &status, msg, sizeof msg);
    mxl_free(s);
    return NULL;
}

int mxl_router_run(const mxl_server_config *cfg, int argc, char **argv, void (*log)(const char *line), mxl_error *err) {
    router *rt = mxl_calloc(1, sizeof *rt);
    if (!rt) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory"), 1;
    int rc = 1;
    char *cert = NULL, *key = NULL; /* --ssl-cert-file / --ssl-key-file's PEM text */
    rt->cfg = cfg;
    rt->log = log;
    rt->prefix = cfg->api_prefix ? cfg->api_prefix : "";
    rt->web.prefix = rt->prefix;
    rt->web.created = (long)time(NULL);
    const char *fake = getenv("LLAMA_SERVER_DEBUG_FAKE_TIMING");
    rt->fake_timing = fake && *fake;
    pthread_mutex_init(&rt->mu, NULL);
    pthread_cond_init(&rt->cv, NULL);
    ssize_t n = readlink("/proc/self/exe", rt->exe, sizeof rt->exe - 1);
    if (n <= 0) {
        mxl_error_set(err, MXL_ERR_IO, "router mode: cannot find the mlxcel binary (/proc/self/exe)");
        goto out;
    }
    rt->exe[n] = 0;
    if (argc > MAX_ARGS) {
        mxl_error_set(err, MXL_ERR_ARG, "router mode: at most %d arguments", MAX_ARGS);
        goto out;
    }
    rt->n_child_args = mxl_server_config_child_args(argc, argv, rt->child_args);
    if (!(rt->child_env = child_environment())) {
        mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (cfg->api_key) rt->api_key = mxl_strdup(cfg->api_key);
    else if (cfg->api_key_file && !(rt->api_key = read_key_file(cfg->api_key_file, err))) goto out;
    if (cfg->settings && !rt->api_key) {
        mxl_error_set(err, MXL_ERR_ARG, "--settings needs --api-key or --api-key-file: /v1/settings changes the server for every client");
        goto out;
    }
    if (cfg->webui && mxl_webui_init(&rt->web, err)) goto out;
    if (list_models(rt, err)) goto out;
    /* TLS ends at the router: the children serve plain HTTP on loopback */
    if (cfg->ssl_cert_file && (!(cert = mxl_srv_read_file(cfg->ssl_cert_file, err, "--ssl-cert-file")) ||
                               !(key = mxl_srv_read_file(cfg->ssl_key_file, err, "--ssl-key-file"))))
        goto out;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    mxl_http_config hc = {
        .host = cfg->host, .port = (int)cfg->port, .reuse_port = cfg->reuse_port, .cert_pem = cert, .key_pem = key,
        .cors_origins = cfg->cors_origins, .cors_headers = cfg->cors_headers, .cors_methods = cfg->cors_methods,
        .cors_credentials = cfg->cors_credentials, .allowed_origins = cfg->allowed_origins,
        .max_body = (size_t)cfg->max_body_bytes, .timeout_s = (unsigned)cfg->timeout, .max_connections = 1024,
    };
    mxl_srv_http_limits(cfg, &hc); /* limits.h */
    if (mxl_http_start(&hc, handle, rt, &rt->http, err)) goto out;
    rlog(rt, "mlxcel router listening on %s", mxl_http_address(rt->http));
    for (size_t i = 0; i < rt->n_models; i++) rlog(rt, "  model %s: %s", rt->models[i].id, rt->models[i].path);
    char limit[64];
    if (cfg->models_max > 0) snprintf(limit, sizeof limit, "up to %lld loaded at once", (long long)cfg->models_max);
    else snprintf(limit, sizeof limit, "no limit on the models loaded at once");
    rlog(rt, "router ready: %zu model%s, %s, autoload %s", rt->n_models, rt->n_models == 1 ? "" : "s", limit,
         cfg->models_autoload ? "on" : "off (POST /models/load)");
    for (size_t i = 0; i < rt->n_models; i++) {
        if (!rt->models[i].load_on_startup) continue;
        startup_load *s = mxl_calloc(1, sizeof *s);
        pthread_t th;
        if (!s) continue;
        *s = (startup_load){rt, &rt->models[i]};
        if (pthread_create(&th, NULL, load_at_startup, s) == 0) pthread_detach(th);
        else mxl_free(s);
    }
    while (!g_stop) usleep(100 * 1000);
    rlog(rt, "shutting down");
    stop_all(rt); /* new requests get 503 meanwhile (handle) */
    mxl_http_quiesce(rt->http);
    rc = 0;
out:
    if (rt->http) mxl_http_stop(rt->http);
    for (size_t i = 0; i < rt->n_models; i++)
        for (int k = 0; k < rt->models[i].n_extra; k++) mxl_free((void *)rt->models[i].extra[k]);
    mxl_free(rt->models);
    mxl_free(rt->child_env);
    mxl_free(rt->api_key);
    mxl_free(rt);
    mxl_free(cert);
    mxl_free(key);
    return rc;
}
