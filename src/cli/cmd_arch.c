/* cmd_arch.c - `mlxcel arch` (alias `supported`): prints the model-family registry compiled into
 * this binary, grouped by category, or with --json one machine-readable object
 * {"mlxcel_version": ..., "families": [...]} for recipe and coverage tooling
 * (spec: cli-reference.ko.md "mlxcel arch"). No model is loaded. Families this build cannot run
 * yet are marked in the text output and carry implemented=false in the JSON. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/alloc.h"
#include "io/json_write.h"
#include "models/registry.h"

static const mxl_cli_opt k_opts[] = {
    {"json", 0, NULL, NULL, "Print the registry as one JSON object instead of the grouped list"},
    {NULL, 0, NULL, NULL, NULL},
};

static const mxl_cli_cmd k_cmd = {
    .name = "arch",
    .usage = "mlxcel arch [--json]",
    .summary = "List every supported model architecture, grouped by category, then exit. No model is loaded.",
    .opts = k_opts,
    .min_pos = 0,
    .max_pos = 0,
    .pos_help = NULL,
};

static json_t *strlist_json(mxl_strlist list) {
    json_t *a = json_array();
    if (!a) return NULL;
    for (size_t i = 0; list && list[i]; i++)
        if (json_array_append_new(a, json_string(list[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* json_object_set_new that tolerates a NULL value by failing (so one check covers allocation). */
static int set(json_t *obj, const char *key, json_t *v) {
    if (!v) return -1;
    return json_object_set_new(obj, key, v);
}

static json_t *family_json(const mxl_family *f) {
    const mxl_family_support *s = mxl_family_support_of(f);
    json_t *o = json_object();
    json_t *backends = json_object();
    if (!o || !backends) {
        json_decref(o);
        json_decref(backends);
        return NULL;
    }
    int rc = 0;
    rc |= set(backends, "cpu", json_string(mxl_backend_status_name(s->cpu)));
    rc |= set(backends, "cuda", json_string(mxl_backend_status_name(s->cuda)));
    rc |= set(o, "id", json_string(f->id));
    rc |= set(o, "display_name", json_string(f->display_name));
    rc |= set(o, "category", json_string(f->category));
    rc |= set(o, "model_types", strlist_json(f->model_types));
    rc |= set(o, "aliases", strlist_json(f->aliases));
    rc |= set(o, "runtimes", strlist_json(mxl_family_runtimes(f)));
    rc |= set(o, "modalities_in", strlist_json(f->modalities_in));
    rc |= set(o, "output", json_string(f->output));
    rc |= set(o, "backends", backends);
    rc |= set(o, "tensor_parallel", json_boolean(s->tensor_parallel));
    rc |= set(o, "pipeline_parallel", json_boolean(s->pipeline_parallel));
    rc |= set(o, "drafters", strlist_json(s->drafters));
    rc |= set(o, "kv_modes", strlist_json(s->kv_modes));
    rc |= set(o, "implemented", json_boolean(mxl_family_implemented(f)));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int print_json(void) {
    json_t *root = json_object();
    json_t *fams = json_array();
    if (!root || !fams || set(root, "mlxcel_version", json_string(MXL_VERSION)) != 0) {
        json_decref(root);
        json_decref(fams);
        return mxl_cli_fail("out of memory building the registry JSON");
    }
    for (size_t i = 0; i < mxl_registry_count(); i++) {
        json_t *f = family_json(mxl_registry_at(i));
        if (!f || json_array_append_new(fams, f) != 0) {
            json_decref(root);
            json_decref(fams);
            return mxl_cli_fail("out of memory building the registry JSON");
        }
    }
    if (set(root, "families", fams) != 0) {
        json_decref(root);
        return mxl_cli_fail("out of memory building the registry JSON");
    }
    char *text = mxl_json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) return mxl_cli_fail("out of memory building the registry JSON");
    int ok = fputs(text, stdout) >= 0 && fputc('\n', stdout) != EOF;
    mxl_free(text);
    if (!ok || fflush(stdout) != 0) return mxl_cli_fail("writing to stdout failed");
    return 0;
}

/* Categories in order of first appearance in the registry, each with its families. */
static int print_text(void) {
    size_t n = mxl_registry_count(), n_runnable = 0;
    printf("Supported Model Architectures:\n");
    for (size_t i = 0; i < n; i++) {
        const char *cat = mxl_registry_at(i)->category;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = strcmp(mxl_registry_at(j)->category, cat) == 0;
        if (seen) continue;
        printf("%s:\n", cat);
        for (size_t j = i; j < n; j++) {
            const mxl_family *f = mxl_registry_at(j);
            if (strcmp(f->category, cat) != 0) continue;
            bool runnable = mxl_family_implemented(f);
            n_runnable += runnable;
            printf("  - %s%s\n", f->display_name, runnable ? "" : " (not yet runnable)");
        }
    }
    printf("\n%zu families; %zu runnable in this build. Architecture keys: mlxcel arch --json\n", n, n_runnable);
    if (fflush(stdout) != 0) return mxl_cli_fail("writing to stdout failed");
    return 0;
}

int mxl_cmd_arch(int argc, char **argv) {
    mxl_cli_args args;
    int rc = mxl_cli_parse(&k_cmd, argc, argv, &args);
    if (rc == 1) return 0; /* help shown */
    if (rc != 0) return rc;
    return mxl_cli_has(&args, "json") ? print_json() : print_text();
}
