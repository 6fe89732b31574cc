/* hub_cache.h - the on-disk side of downloads: the Hugging Face hub cache layout that
 * huggingface_hub writes, shared with it byte for byte, and the mlxcel store's entry for a
 * downloaded repo.
 *
 * Hub cache (the directory of mxl_store_hf_cache_dir: $HF_HUB_CACHE > $HF_HOME/hub >
 * ~/.cache/huggingface/hub):
 *   models--<owner>--<name>/blobs/<etag>                 one file per content (LFS: its sha256)
 *   models--<owner>--<name>/blobs/<etag>.incomplete      a download in progress (resumable)
 *   models--<owner>--<name>/snapshots/<commit>/<path>    -> ../../blobs/<etag> (relative link)
 *   models--<owner>--<name>/refs/<revision>              the commit a branch or tag names
 *   .locks/models--<owner>--<name>/<etag>.lock           flock(2) while a blob is written
 * The lock file and flock are what huggingface_hub's filelock takes, so the two tools never write
 * the same blob at once.
 *
 * Store entry (mlxcel download without --local-dir, default revision): <root>/<owner>/<name>/ is
 * a directory whose files are symlinks to the snapshot's files (absolute paths), plus
 * .mlxcel-download.json recording where they point and whether this store created the snapshot
 * (then `mlxcel rm` deletes it and the blobs nothing else uses; otherwise it belongs to the hub
 * cache's other users and stays). */
#ifndef MXL_IO_HUB_CACHE_H
#define MXL_IO_HUB_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"
#include "io/store.h"

#define MXL_HUB_COMMIT_MAX 64
#define MXL_HUB_ETAG_MAX 130

/* A repo file name as the Hub lists it: '/'-separated components, none empty, "." or "..", no
 * leading '/', no backslash or control character, at most 1024 bytes. */
bool mxl_hub_path_valid(const char *path);

/* An ETag usable as a blob file name after normalisation (W/ prefix and quotes stripped):
 * 1..128 bytes of [A-Za-z0-9_.-], not starting with '.'. Writes the normalised form to out. */
bool mxl_hub_etag_normalize(const char *raw, char *out, size_t cap);

/* A commit id: 40 lowercase hex digits. */
bool mxl_hub_commit_valid(const char *s);

/* <hub_dir>/models--<owner>--<name> */
mxl_status mxl_hub_repo_dir(const char *hub_dir, const char *repo_id, char *out, size_t cap, mxl_error *err);

/* Takes the exclusive flock on <hub_dir>/.locks/models--<owner>--<name>/<etag>.lock, waiting for
 * another holder. Returns the fd (release with mxl_hub_unlock) or -1 with err set. */
int mxl_hub_lock(const char *hub_dir, const char *repo_id, const char *etag, mxl_error *err);
void mxl_hub_unlock(int fd);

/* mkdir -p (mode 0755). */
mxl_status mxl_hub_mkdirs(const char *path, mxl_error *err);

/* snapshots/<commit>/<path> -> ../..(/..)*blobs/<etag>, replacing what is there atomically. */
mxl_status mxl_hub_link_pointer(const char *repo_dir, const char *commit, const char *path, const char *etag,
                                mxl_error *err);

/* refs/<revision> = commit (atomic replace); nothing when revision is the commit itself. */
mxl_status mxl_hub_write_ref(const char *repo_dir, const char *revision, const char *commit, mxl_error *err);

/* Deletes snapshots/<commit>, the refs naming it, and the blobs no remaining snapshot links to;
 * then the repo folder (and its .locks folder) when no snapshot is left. */
mxl_status mxl_hub_drop_snapshot(const char *hub_dir, const char *repo_id, const char *commit, mxl_error *err);

/* What .mlxcel-download.json holds. */
typedef struct mxl_hub_marker {
    char repo_id[MXL_STORE_REPO_ID_MAX];
    char revision[256];
    char commit[MXL_HUB_COMMIT_MAX];
    char hub_dir[MXL_STORE_PATH_MAX];
    bool snapshot_created;
} mxl_hub_marker;

/* Reads <store_repo_dir>/.mlxcel-download.json: MXL_ERR_NOT_FOUND when there is none (a plain
 * store copy), MXL_ERR_FORMAT when it is malformed. */
mxl_status mxl_hub_marker_read(const char *store_repo_dir, mxl_hub_marker *m, mxl_error *err);

/* Publishes <root>/<owner>/<name> as links to the snapshot's files (paths: n repo file names) with
 * the marker, atomically: built beside it, then swapped in under a lock, the old entry removed. An
 * existing entry without a marker (a plain copy) is replaced only when replace_plain. */
mxl_status mxl_hub_store_publish(const char *root, const mxl_hub_marker *m, const char *const *paths, size_t n,
                                 bool replace_plain, mxl_error *err);

/* True when every link of a store entry with a marker still reaches a file (the hub cache copy may
 * have been deleted by another tool). An entry without a marker counts as intact. */
bool mxl_hub_store_entry_intact(const char *store_repo_dir);

#endif
