/* cmd_list.c - `mlxcel list` (alias `ls`): the models in the local model store, one per line, with
 * repo id, disk usage and last-modified time (spec: cli-reference "mlxcel list"). No model is
 * loaded. Output forms: a table (default; -v adds an absolute PATH column), repo ids only (-q),
 * or a JSON array of {repo_id, size_bytes, path, modified} (--json); --sort applies to all. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/alloc.h"
#include "io/json_write.h"
#include "io/store.h"

static const mxl_cli_opt k_opts[] = {
    {"models-dir", 0, "PATH", "MLXCEL_MODELS_DIR / cache root",
     "Model-store root to list: snapshots directly under <PATH>/<owner>/<name>"},
    {"json", 0, NULL, NULL,
     "Print a JSON array of {repo_id, size_bytes, path, modified} (modified: Unix seconds or null); "
     "not with --quiet / --verbose"},
    {"quiet", 'q', NULL, NULL, "Print only repo ids, one per line; not with --json / --verbose"},
    {"verbose", 'v', NULL, NULL, "Add an absolute PATH column to the table; not with --json / --quiet"},
    {"sort", 0, "SORT", "name",
     "name (repo id), size (largest first) or modified (newest first, unknown last)"},
    {NULL, 0, NULL, NULL, NULL},
};

static const mxl_cli_cmd k_cmd = {
    .name = "list",
    .usage = "mlxcel list [OPTIONS]",
    .summary = "List the models downloaded into the local mlxcel store with their repo id, disk usage "
               "and last-modified time. No model is loaded; see 'mlxcel arch' for supported architectures.",
    .opts = k_opts,
    .min_pos = 0,
    .max_pos = 0,
    .pos_help = NULL,
};

typedef enum sort_key { SORT_NAME, SORT_SIZE, SORT_MODIFIED } sort_key;

static int cmp_name(const mxl_store_entry *a, const mxl_store_entry *b) {
    int c = strcasecmp(a->repo_id, b->repo_id);
    return c ? c : strcmp(a->repo_id, b->repo_id);
}
static int cmp_by_name(const void *pa, const void *pb) { return cmp_name(pa, pb); }
static int cmp_by_size(const void *pa, const void *pb) {
    const mxl_store_entry *a = pa, *b = pb;
    if (a->size_bytes != b->size_bytes) return a->size_bytes > b->size_bytes ? -1 : 1;
    return cmp_name(a, b);
}
static int cmp_by_modified(const void *pa, const void *pb) {
    const mxl_store_entry *a = pa, *b = pb;
    if (a->has_modified != b->has_modified) return a->has_modified ? -1 : 1; /* unknown last */
    if (a->has_modified && a->modified != b->modified) return a->modified > b->modified ? -1 : 1;
    return cmp_name(a, b);
}

/* The MODIFIED column is a relative time ("3 days ago"), as ollama and `hf cache scan` print it;
 * the exact epoch is in --json. A future mtime (clock skew) prints as an ISO-8601 UTC time. */
static void format_age(const mxl_store_entry *e, time_t now, char *out, size_t cap) {
    if (!e->has_modified) {
        snprintf(out, cap, "-");
        return;
    }
    int64_t d = (int64_t)now - e->modified;
    if (d < 0) {
        time_t t = (time_t)e->modified;
        struct tm tm;
        if (gmtime_r(&t, &tm) && strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm)) return;
        snprintf(out, cap, "-");
        return;
    }
    static const struct { int64_t secs; const char *unit; } steps[] = {
        {365LL * 86400, "year"}, {30LL * 86400, "month"}, {7LL * 86400, "week"},
        {86400, "day"},          {3600, "hour"},          {60, "minute"},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        if (d >= steps[i].secs) {
            int64_t n = d / steps[i].secs;
            snprintf(out, cap, "%lld %s%s ago", (long long)n, steps[i].unit, n == 1 ? "" : "s");
            return;
        }
    }
    snprintf(out, cap, "just now");
}

static int print_json(const mxl_store_entry *v, size_t n) {
    json_t *arr = json_array();
    if (!arr) return mxl_cli_fail("out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object();
        if (!o || json_array_append_new(arr, o)) {
            json_decref(arr);
            return mxl_cli_fail("out of memory");
        }
        json_object_set_new(o, "repo_id", json_string(v[i].repo_id));
        json_object_set_new(o, "size_bytes", json_integer((json_int_t)v[i].size_bytes));
        json_object_set_new(o, "path", json_string(v[i].path));
        json_object_set_new(o, "modified", v[i].has_modified ? json_integer((json_int_t)v[i].modified) : json_null());
        json_object_set_new(o, "source", json_string(v[i].hf_cache ? "hf-cache" : "store"));
    }
    char *s = mxl_json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(arr);
    if (!s) return mxl_cli_fail("out of memory");
    printf("%s\n", s);
    mxl_free(s);
    return 0;
}

static int print_table(const mxl_store_entry *v, size_t n, int verbose) {
    /* Per-row cells first, so the columns can be sized to the widest cell. */
    char (*size)[32] = mxl_calloc(n ? n : 1, sizeof *size);
    char (*age)[48] = mxl_calloc(n ? n : 1, sizeof *age);
    if (!size || !age) {
        mxl_free(size);
        mxl_free(age);
        return mxl_cli_fail("out of memory");
    }
    size_t w_id = strlen("REPO ID"), w_size = strlen("SIZE"), w_age = strlen("MODIFIED");
    time_t now = time(NULL);
    for (size_t i = 0; i < n; i++) {
        mxl_store_format_size(v[i].size_bytes, size[i], sizeof size[i]);
        format_age(&v[i], now, age[i], sizeof age[i]);
        if (strlen(v[i].repo_id) > w_id) w_id = strlen(v[i].repo_id);
        if (strlen(size[i]) > w_size) w_size = strlen(size[i]);
        if (strlen(age[i]) > w_age) w_age = strlen(age[i]);
    }
    if (verbose)
        printf("%-*s    %-*s    %-*s    %s\n", (int)w_id, "REPO ID", (int)w_size, "SIZE", (int)w_age, "MODIFIED", "PATH");
    else
        printf("%-*s    %-*s    %s\n", (int)w_id, "REPO ID", (int)w_size, "SIZE", "MODIFIED");
    for (size_t i = 0; i < n; i++) {
        if (verbose)
            printf("%-*s    %-*s    %-*s    %s\n", (int)w_id, v[i].repo_id, (int)w_size, size[i], (int)w_age, age[i],
                   v[i].path);
        else
            printf("%-*s    %-*s    %s\n", (int)w_id, v[i].repo_id, (int)w_size, size[i], age[i]);
    }
    mxl_free(size);
    mxl_free(age);
    return 0;
}

int mxl_cmd_list(int argc, char **argv) {
    mxl_cli_args a;
    int rc = mxl_cli_parse(&k_cmd, argc, argv, &a);
    if (rc == 1) return 0;
    if (rc) return rc;
    int json = mxl_cli_has(&a, "json"), quiet = mxl_cli_has(&a, "quiet"), verbose = mxl_cli_has(&a, "verbose");
    if (json && quiet) return mxl_cli_usage_error(&k_cmd, "--json cannot be used with --quiet");
    if (json && verbose) return mxl_cli_usage_error(&k_cmd, "--json cannot be used with --verbose");
    if (quiet && verbose) return mxl_cli_usage_error(&k_cmd, "--quiet cannot be used with --verbose");
    sort_key key = SORT_NAME;
    const char *s = mxl_cli_get(&a, "sort");
    if (s) {
        if (strcmp(s, "name") == 0) key = SORT_NAME;
        else if (strcmp(s, "size") == 0) key = SORT_SIZE;
        else if (strcmp(s, "modified") == 0) key = SORT_MODIFIED;
        else return mxl_cli_usage_error(&k_cmd, "--sort must be name, size or modified, got '%s'", s);
    }

    mxl_error err = {0};
    char root[MXL_STORE_PATH_MAX];
    if (mxl_store_root(mxl_cli_get(&a, "models-dir"), root, sizeof root, &err)) return mxl_cli_fail("%s", err.msg);
    mxl_store_entry *v = NULL;
    size_t n = 0;
    if (mxl_store_list(root, &v, &n, &err)) return mxl_cli_fail("%s", err.msg);
    /* With the default store root, the Hugging Face cache's repos too (those the store has not) */
    mxl_store_entry *h = NULL;
    size_t nh = 0;
    bool default_root = !mxl_cli_get(&a, "models-dir") && !(getenv("MLXCEL_MODELS_DIR") && getenv("MLXCEL_MODELS_DIR")[0]);
    if (default_root && mxl_store_hf_list(&h, &nh, &err)) {
        mxl_store_entries_free(v);
        return mxl_cli_fail("%s", err.msg);
    }
    size_t kept = 0;
    for (size_t i = 0; i < nh; i++) {
        bool dup = false;
        for (size_t j = 0; j < n && !dup; j++) dup = strcmp(v[j].repo_id, h[i].repo_id) == 0;
        if (!dup) h[kept++] = h[i];
    }
    nh = kept;
    int (*cmp)(const void *, const void *) = key == SORT_SIZE ? cmp_by_size : key == SORT_MODIFIED ? cmp_by_modified : cmp_by_name;
    if (n > 1) qsort(v, n, sizeof *v, cmp);
    if (nh > 1) qsort(h, nh, sizeof *h, cmp);

    if (json) {
        mxl_store_entry *all = mxl_calloc(n + nh ? n + nh : 1, sizeof *all);
        if (!all) {
            rc = mxl_cli_fail("out of memory");
        } else {
            if (n) memcpy(all, v, n * sizeof *v);
            if (nh) memcpy(all + n, h, nh * sizeof *h);
            if (n + nh > 1) qsort(all, n + nh, sizeof *all, cmp);
            rc = print_json(all, n + nh);
            mxl_free(all);
        }
    } else if (quiet) {
        for (size_t i = 0; i < n; i++) printf("%s\n", v[i].repo_id);
    } else {
        if (n == 0)
            printf("No models in %s yet: 'mlxcel download <owner/name>' fetches one (scripts/fetch-models.sh installs "
                   "the bundled models).\n", root);
        else
            rc = print_table(v, n, verbose);
        if (nh && !rc) {
            char cache[MXL_STORE_PATH_MAX] = "";
            mxl_store_hf_cache_dir(cache, sizeof cache, NULL);
            printf("\nIn the Hugging Face cache (%s; read-only for mlxcel rm):\n", cache);
            rc = print_table(h, nh, verbose);
        }
    }
    mxl_store_entries_free(v);
    mxl_store_entries_free(h);
    if (fflush(stdout) != 0 && !rc) rc = 1;
    return rc;
}
