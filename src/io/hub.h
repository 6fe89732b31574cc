/* hub.h - downloads from the Hugging Face Hub (or any server with its HTTP API: $HF_ENDPOINT),
 * behind `mlxcel download` and the automatic download of run / generate / serve.
 *
 * One download:
 *   1. GET {endpoint}/api/models/{repo}/revision/{rev}  -> the commit and the file list
 *   2. HEAD {endpoint}/{repo}/resolve/{commit}/{path}    -> each file's ETag (X-Linked-Etag for LFS
 *      files: their sha256), size (X-Linked-Size) and location (a redirect's Location), several at once
 *   3. GET of each file not already present, several at once, into blobs/<etag>.incomplete (or the
 *      --local-dir's .cache/huggingface/download/), resumed with an HTTP Range when a previous run was
 *      cut off, checked against its digest (sha256 for LFS ETags, the git blob sha1 for the others) and
 *      only then renamed into place; a mismatch is fetched once more, then refused
 *   4. snapshots/<commit>/ links and refs/<rev>, all at the end, so a failed download never leaves a
 *      snapshot pointing at a missing or partial file; then the store entry (io/hub_cache.h).
 * Errors are one line each: 401/403 (token, gated), 404 (repository, revision, file), 429 (rate
 * limit, with Retry-After), 5xx and network failures (retried twice, resuming), a full disk (checked
 * before the transfers start and on every write). */
#ifndef MXL_IO_HUB_H
#define MXL_IO_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "io/hub_cache.h"
#include "io/store.h"

typedef enum mxl_hub_event_kind {
    MXL_HUB_EV_PLAN,       /* the file list and sizes are known: files_total, bytes_total */
    MXL_HUB_EV_FILE_START, /* file starts transferring (file_done = resumed bytes) */
    MXL_HUB_EV_FILE_BYTES, /* file_done advanced */
    MXL_HUB_EV_FILE_DONE,  /* file verified and in place */
    MXL_HUB_EV_FILE_SKIP,  /* file already present (cache, local dir): no transfer */
} mxl_hub_event_kind;

typedef struct mxl_hub_event {
    mxl_hub_event_kind kind;
    int slot;         /* worker index of the file's transfer, 0..workers-1 */
    const char *file; /* repo path (FILE_* events) */
    int64_t file_size, file_done;
    int64_t bytes_total, bytes_done; /* over the files to transfer */
    int files_total, files_done;     /* every listed file; done counts skipped ones */
} mxl_hub_event;

/* Called from worker threads, one call at a time (under the download's lock). */
typedef void (*mxl_hub_progress_fn)(void *ud, const mxl_hub_event *ev);

typedef struct mxl_hub_opts {
    const char *endpoint;  /* NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char *token;     /* NULL: anonymous */
    const char *hub_dir;   /* NULL: mxl_store_hf_cache_dir() */
    const char *revision;  /* NULL: "main" */
    const char *local_dir; /* non-NULL: plain files in this directory instead of the hub cache */
    const char *const *include; /* glob patterns (fnmatch, '*' crosses '/'; "dir/" means all below dir) */
    size_t n_include;
    const char *const *exclude;
    size_t n_exclude;
    bool force;   /* transfer every file again */
    int workers;  /* parallel transfers; 0: 8 */
    mxl_hub_progress_fn progress;
    void *progress_ud;
} mxl_hub_opts;

typedef struct mxl_hub_result {
    char commit[MXL_HUB_COMMIT_MAX];
    char snapshot_dir[MXL_STORE_PATH_MAX]; /* hub snapshot, or the local dir */
    char hub_dir[MXL_STORE_PATH_MAX];
    char **files; /* repo paths downloaded or present (after include/exclude); mxl_hub_result_free */
    size_t n_files;
    int n_transferred, n_present;
    int64_t bytes_transferred, bytes_total;
    bool snapshot_created; /* snapshots/<commit> did not exist before this download */
} mxl_hub_result;

/* Parses the Hub's repository listing (GET /api/models/{repo}/revision/{rev}: {"sha", "siblings":
 * [{"rfilename"}]}): the commit, and the file names that pass the include / exclude globs (a
 * name listed twice counts once). An unsafe name (mxl_hub_path_valid) or a missing / malformed sha
 * is MXL_ERR_FORMAT. *paths_out: n_out heap strings in a heap array (mxl_free each, then it). */
mxl_status mxl_hub_parse_listing(const char *body, size_t len, const char *const *include, size_t n_include,
                                 const char *const *exclude, size_t n_exclude, char commit[MXL_HUB_COMMIT_MAX],
                                 char ***paths_out, size_t *n_out, mxl_error *err);

/* The endpoint in use (opts or $HF_ENDPOINT or the Hub), without a trailing '/'. */
void mxl_hub_endpoint(const char *opt, char *out, size_t cap);

/* The token: flag, then $HF_TOKEN, $HUGGING_FACE_HUB_TOKEN, then the file huggingface_hub's login
 * writes ($HF_TOKEN_PATH > $HF_HOME/token > ~/.cache/huggingface/token). NULL when none. The
 * returned pointer is the flag, an environment value or a static buffer. */
const char *mxl_hub_token(const char *flag);

/* True when $HF_HUB_OFFLINE (or $LLAMA_ARG_OFFLINE) is set to 1/true/yes/on. */
bool mxl_hub_offline_env(void);

mxl_status mxl_hub_download(const char *repo_id, const mxl_hub_opts *opts, mxl_hub_result *res, mxl_error *err);
void mxl_hub_result_free(mxl_hub_result *res);

/* The whole `mlxcel download <repo>` without --local-dir: mxl_hub_download into the hub cache,
 * then (for the default revision) the store entry under the store root of models_dir_flag.
 * store_path_out (may be NULL) gets the store entry, or the snapshot for another revision. */
mxl_status mxl_hub_fetch_to_store(const char *repo_id, const char *models_dir_flag, const mxl_hub_opts *opts,
                                  mxl_hub_result *res, char *store_path_out, size_t cap, mxl_error *err);

/* How a model argument is resolved by commands that download what is missing. */
typedef struct mxl_hub_resolve_opts {
    bool offline;      /* never download: a missing repo is a clear error */
    const char *token; /* as mxl_hub_opts */
    mxl_hub_progress_fn progress;
    void *progress_ud;
} mxl_hub_resolve_opts;

/* mxl_store_resolve, and when a repo id is found nowhere (or its store entry's hub-cache copy
 * was deleted), mxl_hub_fetch_to_store then resolve again. ro NULL: never download. */
mxl_status mxl_hub_resolve(const char *arg, const char *models_dir_flag, const char *revision,
                           const mxl_hub_resolve_opts *ro, mxl_resolved *out, mxl_error *err);

#endif
