/* cmd_download.c - `mlxcel download <REPO_ID>` (and `mlxcel-server download`): a Hugging Face
 * repository snapshot into the hub cache shared with huggingface_hub plus its mlxcel store entry,
 * or into an exact --local-dir (spec: cli-reference "mlxcel download"; io/hub.h has the
 * protocol, io/hub_cache.h the layout). Prints the model's path on stdout, progress on stderr. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/hub_progress.h"
#include "core/clock.h"
#include "io/hub.h"
#include "io/store.h"

static const mxl_cli_opt k_opts[] = {
    {"local-dir", 0, "PATH", NULL,
     "Write the snapshot as plain files exactly into PATH, bypassing the store (resumable; a file the "
     "Hugging Face cache already holds is copied from it)"},
    {"models-dir", 0, "PATH", "MLXCEL_MODELS_DIR / cache root",
     "Store root in which <owner>/<name> is created; ignored with --local-dir"},
    {"revision", 0, "REV", "main", "Branch, tag or commit hash to download"},
    {"token", 0, "TOKEN", "HF_TOKEN, then HUGGING_FACE_HUB_TOKEN, else anonymous",
     "Access token for gated or private repositories (never printed or written)"},
    {"force", 0, NULL, NULL, "Download every file again even when an identical local copy exists"},
    {"include", 0, "GLOB", NULL, "Download only files matching GLOB (repeatable; '*' matches across '/')"},
    {"exclude", 0, "GLOB", NULL, "Skip files matching GLOB (repeatable)"},
    {"max-workers", 0, "N", "8", "Files transferred at once"},
    {"quiet", 'q', NULL, NULL, "No progress output; only the path on stdout"},
    {NULL, 0, NULL, NULL, NULL},
};

static const mxl_cli_cmd k_cmd = {
    .name = "download",
    .usage = "mlxcel download <REPO_ID> [OPTIONS]",
    .summary = "Download a Hugging Face repository snapshot without Python. Files go once into the Hugging Face "
               "cache ($HF_HUB_CACHE, shared with huggingface_hub: a copy either tool made is reused, never "
               "duplicated) and the repo appears in the mlxcel store at "
               "${MLXCEL_CACHE_DIR:-$HOME/.cache/mlxcel}/models/<owner>/<name>. Interrupted downloads resume; "
               "every file is checked against its sha256 before it is used. HF_ENDPOINT picks the server.",
    .opts = k_opts,
    .min_pos = 1,
    .max_pos = 1,
    .pos_help = "<REPO_ID>",
};

int mxl_cmd_download(int argc, char **argv) {
    mxl_cli_args a;
    int rc = mxl_cli_parse(&k_cmd, argc, argv, &a);
    if (rc == 1) return 0;
    if (rc) return rc;
    mxl_error err = {0};
    char repo_id[MXL_STORE_REPO_ID_MAX];
    if (mxl_store_expand_repo_id(a.pos[0], repo_id, sizeof repo_id, &err))
        return mxl_cli_usage_error(&k_cmd, "%s", err.msg);
    int64_t workers = 8;
    if ((rc = mxl_cli_get_int(&a, "max-workers", 8, 1, 32, &workers))) return rc;
    const char *local_dir = mxl_cli_get(&a, "local-dir");
    if (local_dir && !local_dir[0]) return mxl_cli_usage_error(&k_cmd, "--local-dir needs a directory");
    const char *revision = mxl_cli_get(&a, "revision");
    if (revision && (!revision[0] || strstr(revision, "..") || revision[0] == '/' || strchr(revision, '\\')))
        return mxl_cli_usage_error(&k_cmd, "--revision '%s' is not a branch, tag or commit name", revision);
    if (mxl_hub_offline_env()) {
        /* as huggingface-cli: a copy already on disk is the answer, unchecked */
        mxl_resolved have;
        if (local_dir || mxl_cli_has(&a, "force"))
            return mxl_cli_fail("offline mode is on (HF_HUB_OFFLINE=1): mlxcel download %s needs the network",
                                local_dir ? "--local-dir" : "--force");
        if (mxl_store_resolve(repo_id, mxl_cli_get(&a, "models-dir"), revision, &have, &err) != MXL_OK)
            return mxl_cli_fail("offline mode is on (HF_HUB_OFFLINE=1): %s is not on disk and mlxcel download needs the network",
                                repo_id);
        if (!mxl_cli_has(&a, "quiet")) fprintf(stderr, "offline mode: %s is on disk (%s copy; not checked for updates)\n", repo_id,
                                               mxl_model_source_name(have.source));
        printf("%s\n", have.path);
        return 0;
    }

    const char *inc[MXL_CLI_MAX_VALUES], *exc[MXL_CLI_MAX_VALUES];
    int ni = mxl_cli_count(&a, "include"), ne = mxl_cli_count(&a, "exclude");
    for (int i = 0; i < ni; i++) inc[i] = mxl_cli_get_nth(&a, "include", i);
    for (int i = 0; i < ne; i++) exc[i] = mxl_cli_get_nth(&a, "exclude", i);

    mxl_cli_progress prog;
    mxl_cli_progress_init(&prog, repo_id, mxl_cli_has(&a, "quiet"));
    mxl_hub_opts o = {
        .token = mxl_hub_token(mxl_cli_get(&a, "token")),
        .revision = revision,
        .local_dir = local_dir,
        .include = inc,
        .n_include = (size_t)ni,
        .exclude = exc,
        .n_exclude = (size_t)ne,
        .force = mxl_cli_has(&a, "force"),
        .workers = (int)workers,
        .progress = mxl_cli_progress_event,
        .progress_ud = &prog,
    };
    double t0 = (mxl_now_ms() / 1e3);
    mxl_hub_result res;
    char where[MXL_STORE_PATH_MAX];
    mxl_status st;
    if (local_dir) {
        st = mxl_hub_download(repo_id, &o, &res, &err);
        if (st == MXL_OK) snprintf(where, sizeof where, "%s", res.snapshot_dir);
    } else {
        st = mxl_hub_fetch_to_store(repo_id, mxl_cli_get(&a, "models-dir"), &o, &res, where, sizeof where, &err);
    }
    mxl_cli_progress_end(&prog);
    if (st) return mxl_cli_fail("%s", err.msg);
    double el = (mxl_now_ms() / 1e3) - t0;
    if (!prog.quiet) {
        char got[32], tot[32];
        mxl_store_format_size((uint64_t)res.bytes_transferred, got, sizeof got);
        mxl_store_format_size((uint64_t)res.bytes_total, tot, sizeof tot);
        if (res.n_transferred == 0)
            fprintf(stderr, "%s@%.12s is up to date (%zu files, %s)\n", repo_id, res.commit, res.n_files, tot);
        else
            fprintf(stderr, "downloaded %s@%.12s: %d of %zu files, %s in %.1f s (%s in all)\n", repo_id, res.commit,
                    res.n_transferred, res.n_files, got, el, tot);
    }
    printf("%s\n", where);
    mxl_hub_result_free(&res);
    return 0;
}
