/* autotune.c - the autotune cache file (autotune.h): where it lives, parsing and checking it,
 * merging new entries into it (temporary file + rename), and applying the entries of this
 * machine and model shape at load through the backend's tune_set. */
#include "engine/autotune.h"

#include <errno.h>
#include <jansson.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "io/json_write.h"

mxl_autotune_mode mxl_autotune_mode_from_env(char *warn, size_t cap) {
    if (cap) warn[0] = '\0';
    const char *v = getenv("MLXCEL_AUTOTUNE");
    if (!v || !v[0] || strcmp(v, "0") == 0 || strcmp(v, "off") == 0) return MXL_AUTOTUNE_OFF;
    if (strcmp(v, "cache") == 0 || strcmp(v, "1") == 0) return MXL_AUTOTUNE_CACHE;
    if (cap) snprintf(warn, cap, "MLXCEL_AUTOTUNE=%.64s is not one of cache, 1, 0, off; the autotune cache is not used", v);
    return MXL_AUTOTUNE_OFF;
}

mxl_status mxl_autotune_dir(char *out, size_t cap, mxl_error *err) {
    const char *v = getenv("MLXCEL_CACHE_DIR");
    int n;
    if (v && v[0]) {
        n = snprintf(out, cap, "%s/autotune", v);
    } else {
        const char *h = getenv("HOME");
        if (!h || !h[0]) {
            struct passwd *pw = getpwuid(getuid());
            h = pw && pw->pw_dir && pw->pw_dir[0] ? pw->pw_dir : NULL;
        }
        if (!h) return mxl_error_set(err, MXL_ERR_ARG, "cannot locate the autotune cache: neither MLXCEL_CACHE_DIR nor HOME is set");
        n = snprintf(out, cap, "%s/.cache/mlxcel/autotune", h);
    }
    if (n < 0 || (size_t)n >= cap) return mxl_error_set(err, MXL_ERR_ARG, "the autotune cache path is too long");
    return MXL_OK;
}

void mxl_autotune_machine_of(const mxl_backend *be, int threads, mxl_autotune_machine *m) {
    memset(m, 0, sizeof *m);
    const char *isa = "none";
    if (be->ops->tune_machine) be->ops->tune_machine(be, m->cpu, sizeof m->cpu, &isa);
    else snprintf(m->cpu, sizeof m->cpu, "unknown");
    snprintf(m->isa, sizeof m->isa, "%s", isa);
    m->threads = threads;
}

bool mxl_autotune_machine_eq(const mxl_autotune_machine *a, const mxl_autotune_machine *b) {
    return strcmp(a->cpu, b->cpu) == 0 && strcmp(a->isa, b->isa) == 0 && a->threads == b->threads;
}

/* ---- parsing ---- */

static bool get_int(const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *v) {
    const json_t *j = json_object_get(o, key);
    if (!json_is_integer(j)) return false;
    *v = json_integer_value(j);
    return *v >= lo && *v <= hi;
}

static bool get_str(const json_t *o, const char *key, char *out, size_t cap) {
    const json_t *j = json_object_get(o, key);
    if (!json_is_string(j) || json_string_length(j) == 0 || json_string_length(j) >= cap) return false;
    memcpy(out, json_string_value(j), json_string_length(j) + 1);
    return strlen(out) == json_string_length(j); /* (no NUL inside) */
}

static double get_num(const json_t *o, const char *key) {
    const json_t *j = json_object_get(o, key);
    return json_is_number(j) ? json_number_value(j) : 0.0;
}

/* one entry; false with the reason in why */
static bool parse_entry(const json_t *je, const mxl_backend *be, mxl_autotune_entry *e, char *why, size_t cap) {
    memset(e, 0, sizeof *e);
    const json_t *jm = json_object_get(je, "machine"), *js = json_object_get(je, "shape");
    int64_t v;
    if (!json_is_object(je)) return snprintf(why, cap, "not an object"), false;
    if (!json_is_object(jm) || !get_str(jm, "cpu", e->machine.cpu, sizeof e->machine.cpu) ||
        !get_str(jm, "isa", e->machine.isa, sizeof e->machine.isa) || !get_int(jm, "threads", 1, 4096, &v))
        return snprintf(why, cap, "\"machine\" needs \"cpu\", \"isa\" and \"threads\" (1..4096)"), false;
    e->machine.threads = (int)v;
    int *sf[4] = {&e->shape.head_dim, &e->shape.q_heads, &e->shape.kv_heads, &e->shape.block_size};
    const char *sk[4] = {"head_dim", "q_heads", "kv_heads", "block_size"};
    if (!json_is_object(js)) return snprintf(why, cap, "no \"shape\" object"), false;
    for (int i = 0; i < 4; i++) {
        if (!get_int(js, sk[i], 1, 1 << 20, &v)) return snprintf(why, cap, "\"shape\".\"%s\" is not a positive integer", sk[i]), false;
        *sf[i] = (int)v;
    }
    if (e->shape.q_heads % e->shape.kv_heads != 0) return snprintf(why, cap, "q_heads is not a multiple of kv_heads"), false;
    if (!get_str(je, "op", e->op, sizeof e->op)) return snprintf(why, cap, "no \"op\" string"), false;
    if (!get_int(je, "context", -1, INT64_C(1) << 40, &e->context)) return snprintf(why, cap, "no \"context\" integer (-1 or more)"), false;
    if (!get_int(je, "value", INT32_MIN, INT32_MAX, &v)) return snprintf(why, cap, "no \"value\" integer"), false;
    e->value = (int)v;
    e->def = get_int(je, "default", INT32_MIN, INT32_MAX, &v) ? (int)v : 0;
    if (be && (!be->ops->tune_valid || !be->ops->tune_valid(be, e->op, e->value)))
        return snprintf(why, cap, "op \"%.48s\" with value %d is not a knob of the %s backend", e->op, e->value, "cpu"), false;
    e->default_us = get_num(je, "default_us");
    e->tuned_us = get_num(je, "tuned_us");
    e->spread = get_num(je, "spread");
    return true;
}

mxl_status mxl_autotune_read(const char *path, const mxl_backend *be, mxl_autotune_entry **out, int *n, mxl_error *err) {
    *out = NULL, *n = 0;
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT) return mxl_error_set(err, MXL_ERR_NOT_FOUND, "%s: no such file", path);
        return mxl_error_set(err, MXL_ERR_IO, "%s: %s", path, strerror(errno));
    }
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) return mxl_error_set(err, MXL_ERR_FORMAT, "%s: not valid JSON (line %d: %s)", path, je.line, je.text);
    mxl_status s = MXL_OK;
    const json_t *fmt = json_object_get(root, "format"), *ver = json_object_get(root, "version"), *ents = json_object_get(root, "entries");
    if (!json_is_object(root) || !json_is_string(fmt) || strcmp(json_string_value(fmt), MXL_AUTOTUNE_FORMAT) != 0) {
        s = mxl_error_set(err, MXL_ERR_FORMAT, "%s: not an mlxcel autotune file (\"format\" is not \"%s\")", path, MXL_AUTOTUNE_FORMAT);
    } else if (!json_is_integer(ver) || json_integer_value(ver) != MXL_AUTOTUNE_VERSION) {
        s = mxl_error_set(err, MXL_ERR_FORMAT, "%s: format version %lld, this build reads version %d (rerun mlxcel tune)", path,
                          json_is_integer(ver) ? (long long)json_integer_value(ver) : -1LL, MXL_AUTOTUNE_VERSION);
    } else if (!json_is_array(ents)) {
        s = mxl_error_set(err, MXL_ERR_FORMAT, "%s: no \"entries\" array", path);
    } else if (json_array_size(ents) > 100000) {
        s = mxl_error_set(err, MXL_ERR_FORMAT, "%s: %zu entries (at most 100000)", path, json_array_size(ents));
    } else if (json_array_size(ents) > 0) {
        size_t cnt = json_array_size(ents);
        mxl_autotune_entry *e = mxl_calloc(cnt, sizeof *e);
        if (!e) s = mxl_error_set(err, MXL_ERR_NOMEM, "out of memory for %zu autotune entries", cnt);
        for (size_t i = 0; e && i < cnt && !s; i++) {
            char why[160];
            if (!parse_entry(json_array_get(ents, i), be, &e[i], why, sizeof why))
                s = mxl_error_set(err, MXL_ERR_FORMAT, "%s: entry %zu: %s", path, i, why);
        }
        if (s) mxl_free(e);
        else *out = e, *n = (int)cnt;
    }
    json_decref(root);
    return s;
}

/* ---- writing ---- */

static bool same_key(const mxl_autotune_entry *a, const mxl_autotune_entry *b) {
    return mxl_autotune_machine_eq(&a->machine, &b->machine) && memcmp(&a->shape, &b->shape, sizeof a->shape) == 0 &&
           strcmp(a->op, b->op) == 0 && a->context == b->context;
}

static json_t *entry_json(const mxl_autotune_entry *e) {
    json_t *o = json_object(), *m = json_object(), *s = json_object();
    if (!o || !m || !s) {
        json_decref(o), json_decref(m), json_decref(s);
        return NULL;
    }
    json_object_set_new(m, "cpu", json_string(e->machine.cpu));
    json_object_set_new(m, "isa", json_string(e->machine.isa));
    json_object_set_new(m, "threads", json_integer(e->machine.threads));
    json_object_set_new(s, "head_dim", json_integer(e->shape.head_dim));
    json_object_set_new(s, "q_heads", json_integer(e->shape.q_heads));
    json_object_set_new(s, "kv_heads", json_integer(e->shape.kv_heads));
    json_object_set_new(s, "block_size", json_integer(e->shape.block_size));
    json_object_set_new(o, "machine", m);
    json_object_set_new(o, "shape", s);
    json_object_set_new(o, "op", json_string(e->op));
    json_object_set_new(o, "context", json_integer(e->context));
    json_object_set_new(o, "value", json_integer(e->value));
    json_object_set_new(o, "default", json_integer(e->def));
    json_object_set_new(o, "default_us", json_real(e->default_us));
    json_object_set_new(o, "tuned_us", json_real(e->tuned_us));
    json_object_set_new(o, "spread", json_real(e->spread));
    return o;
}

/* mkdir -p of dir */
static mxl_status make_dirs(const char *dir, mxl_error *err) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return mxl_error_set(err, MXL_ERR_ARG, "%s: path too long", dir);
    for (char *c = p + 1;; c++) {
        if (*c != '/' && *c != '\0') continue;
        const char keep = *c;
        *c = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) return mxl_error_set(err, MXL_ERR_IO, "cannot create %s: %s", p, strerror(errno));
        *c = keep;
        if (!keep) break;
    }
    return MXL_OK;
}

mxl_status mxl_autotune_write(const char *dir, const mxl_autotune_entry *e, int n, const mxl_backend *be, char *warn,
                              size_t cap, mxl_error *err) {
    if (cap) warn[0] = '\0';
    char path[4200], tmp[4300];
    if (snprintf(path, sizeof path, "%s/%s", dir, MXL_AUTOTUNE_FILE) >= (int)sizeof path)
        return mxl_error_set(err, MXL_ERR_ARG, "%s: path too long", dir);
    mxl_status s = make_dirs(dir, err);
    if (s) return s;
    mxl_autotune_entry *old = NULL;
    int n_old = 0;
    mxl_error rerr;
    mxl_status rs = mxl_autotune_read(path, be, &old, &n_old, &rerr);
    if (rs && rs != MXL_ERR_NOT_FOUND && cap) snprintf(warn, cap, "%s; replacing it", rerr.msg);
    json_t *root = json_object(), *arr = json_array();
    if (!root || !arr) {
        json_decref(root), json_decref(arr), mxl_free(old);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    json_object_set_new(root, "format", json_string(MXL_AUTOTUNE_FORMAT));
    json_object_set_new(root, "version", json_integer(MXL_AUTOTUNE_VERSION));
    json_object_set_new(root, "backend", json_string("cpu"));
    for (int i = 0; i < n_old; i++) { /* the old entries the new ones do not replace */
        bool replaced = false;
        for (int k = 0; k < n && !replaced; k++) replaced = same_key(&old[i], &e[k]);
        if (!replaced) json_array_append_new(arr, entry_json(&old[i]));
    }
    for (int k = 0; k < n; k++) json_array_append_new(arr, entry_json(&e[k]));
    json_object_set_new(root, "entries", arr);
    mxl_free(old);
    char *text = mxl_json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    if (!text) return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory writing %s", path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        mxl_free(text);
        return mxl_error_set(err, MXL_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    }
    size_t len = strlen(text);
    bool ok = fwrite(text, 1, len, f) == len && fputc('\n', f) != EOF;
    ok = fflush(f) == 0 && ok;
    ok = fsync(fileno(f)) == 0 && ok;
    ok = fclose(f) == 0 && ok;
    mxl_free(text);
    if (!ok || rename(tmp, path) != 0) {
        int e2 = errno;
        unlink(tmp);
        return mxl_error_set(err, MXL_ERR_IO, "cannot write %s: %s", path, strerror(e2));
    }
    return MXL_OK;
}

/* ---- use ---- */

int mxl_autotune_apply_file(const mxl_backend *be, const char *path, const mxl_autotune_machine *m,
                            const mxl_autotune_shape *s, char *warn, size_t cap) {
    if (cap) warn[0] = '\0';
    if (!be->ops->tune_set) return 0;
    mxl_autotune_entry *e = NULL;
    int n = 0, applied = 0, other = 0;
    mxl_error err;
    mxl_status st = mxl_autotune_read(path, be, &e, &n, &err);
    if (st == MXL_ERR_NOT_FOUND) return 0;
    if (st) {
        if (cap) snprintf(warn, cap, "autotune cache ignored: %s", err.msg);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        if (!mxl_autotune_machine_eq(&e[i].machine, m)) {
            other++;
            continue;
        }
        if (memcmp(&e[i].shape, s, sizeof *s) != 0) continue; /* (another model's) */
        if (be->ops->tune_set(be, e[i].op, s->head_dim, s->q_heads, s->kv_heads, e[i].context, e[i].value)) applied++;
    }
    if (other && cap)
        snprintf(warn, cap, "autotune cache %s: %d entr%s of another machine ignored (this one: %s, %s, %d threads)", path, other,
                 other == 1 ? "y" : "ies", m->cpu, m->isa, m->threads);
    mxl_free(e);
    return applied;
}

int mxl_autotune_load(const mxl_backend *be, int threads, const mxl_autotune_shape *s, char *warn, size_t cap) {
    if (mxl_autotune_mode_from_env(warn, cap) != MXL_AUTOTUNE_CACHE) return 0;
    char dir[4096], path[4200];
    mxl_error err;
    if (mxl_autotune_dir(dir, sizeof dir, &err)) {
        if (cap) snprintf(warn, cap, "autotune cache not used: %s", err.msg);
        return 0;
    }
    snprintf(path, sizeof path, "%s/%s", dir, MXL_AUTOTUNE_FILE);
    mxl_autotune_machine m;
    mxl_autotune_machine_of(be, threads, &m);
    return mxl_autotune_apply_file(be, path, &m, s, warn, cap);
}
