/* cmd_rm.c - `mlxcel rm <REPO_ID>`: removes a downloaded snapshot from the mlxcel model store
 * (spec: cli-reference "mlxcel rm"). Only <root>/<owner>/<name> under the managed store root is
 * ever deleted, after mxl_store_check_removable's realpath check, without following symlinks. A
 * model found only in the read-only Hugging Face cache is reported and left alone (exit 1).
 * Without -y the user confirms on the terminal; a non-interactive stdin without -y is refused.
 * An entry `mlxcel download` made (links into the Hugging Face cache, io/hub_cache.h) takes its
 * snapshot and the blobs nothing else uses along when the download created that snapshot; a
 * snapshot that was in the cache before (huggingface_hub's) stays, and rm says so. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "io/hub_cache.h"
#include "io/store.h"

static const mxl_cli_opt k_opts[] = {
    {"models-dir", 0, "PATH", "MLXCEL_MODELS_DIR / cache root",
     "Store root to remove from; the deleted path is <PATH>/<owner>/<name>"},
    {"yes", 'y', NULL, NULL, "Skip the interactive confirmation prompt"},
    {"revision", 0, "REV", "main",
     "Used only to find and report a Hugging Face cache snapshot when the store has no copy"},
    {NULL, 0, NULL, NULL, NULL},
};

static const mxl_cli_cmd k_cmd = {
    .name = "rm",
    .usage = "mlxcel rm <REPO_ID> [OPTIONS]",
    .summary = "Remove a downloaded model snapshot from the mlxcel store. Only snapshots under the managed "
               "store root are deleted; a model that exists only in the read-only Hugging Face cache is "
               "reported, not deleted.",
    .opts = k_opts,
    .min_pos = 1,
    .max_pos = 1,
    .pos_help = "<REPO_ID>",
};

/* Reads one answer line; true only for y / yes (any case). EOF or anything else is "no". */
static int confirmed(const char *repo_id, const char *size, const char *root) {
    fprintf(stderr, "Remove %s (%s) from %s? [y/N] ", repo_id, size, root);
    fflush(stderr);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) {
        fputc('\n', stderr);
        return 0;
    }
    char *p = line;
    while (isspace((unsigned char)*p)) p++;
    size_t n = strlen(p);
    while (n && isspace((unsigned char)p[n - 1])) p[--n] = '\0';
    return strcasecmp(p, "y") == 0 || strcasecmp(p, "yes") == 0;
}

int mxl_cmd_rm(int argc, char **argv) {
    mxl_cli_args a;
    int rc = mxl_cli_parse(&k_cmd, argc, argv, &a);
    if (rc == 1) return 0;
    if (rc) return rc;
    const char *arg = a.pos[0];
    const char *revision = mxl_cli_get(&a, "revision");

    mxl_error err = {0};
    char repo_id[MXL_STORE_REPO_ID_MAX], root[MXL_STORE_PATH_MAX], dir[MXL_STORE_PATH_MAX];
    if (mxl_store_expand_repo_id(arg, repo_id, sizeof repo_id, &err)) return mxl_cli_usage_error(&k_cmd, "%s", err.msg);
    if (mxl_store_root(mxl_cli_get(&a, "models-dir"), root, sizeof root, &err)) return mxl_cli_fail("%s", err.msg);

    mxl_status st = mxl_store_check_removable(root, repo_id, dir, sizeof dir, &err);
    if (st == MXL_ERR_NOT_FOUND) {
        char snap[MXL_STORE_PATH_MAX];
        mxl_error herr = {0};
        mxl_status hs = mxl_store_hf_lookup(repo_id, revision, snap, sizeof snap, NULL, 0, &herr);
        if (hs == MXL_OK)
            return mxl_cli_fail("model '%s' exists only in the Hugging Face cache at %s; mlxcel rm does not delete it",
                                repo_id, snap);
        if (hs != MXL_ERR_NOT_FOUND) return mxl_cli_fail("%s", herr.msg);
        return mxl_cli_fail("model '%s' not found in %s", repo_id, root);
    }
    if (st) return mxl_cli_fail("%s", err.msg);

    uint64_t bytes = 0;
    int64_t mtime = 0;
    bool has_mtime = false;
    mxl_hub_marker marker;
    mxl_error merr = {0};
    mxl_status ms = mxl_hub_marker_read(dir, &marker, &merr);
    if (ms != MXL_OK && ms != MXL_ERR_NOT_FOUND) return mxl_cli_fail("%s", merr.msg);
    bool downloaded = ms == MXL_OK;
    if ((downloaded ? mxl_store_usage_links : mxl_store_usage)(dir, &bytes, &mtime, &has_mtime, &err))
        return mxl_cli_fail("%s", err.msg);
    char size[32];
    mxl_store_format_size(bytes, size, sizeof size);

    if (!mxl_cli_has(&a, "yes")) {
        if (!isatty(STDIN_FILENO))
            return mxl_cli_fail("refusing to remove %s without confirmation: stdin is not a terminal (pass --yes)",
                                repo_id);
        if (!confirmed(repo_id, size, root)) {
            fprintf(stderr, "Cancelled; nothing removed.\n");
            return 1;
        }
    }
    if (mxl_store_remove(root, repo_id, &err)) return mxl_cli_fail("%s", err.msg);
    if (downloaded && marker.snapshot_created) {
        if (mxl_hub_drop_snapshot(marker.hub_dir, repo_id, marker.commit, &err))
            return mxl_cli_fail("removed the store entry of %s, but its Hugging Face cache snapshot stays: %s", repo_id,
                                err.msg);
    } else if (downloaded) {
        fprintf(stderr, "The Hugging Face cache snapshot %.12s of %s in %s stays: it was there before mlxcel download.\n",
                marker.commit, repo_id, marker.hub_dir);
    }
    printf("Removed %s (%s) from %s\n", repo_id, size, root);
    return 0;
}
