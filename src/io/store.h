/* store.h - the local model store: where repo ids live on disk, how a model argument resolves to a
 * path, and the listing / safe removal behind `mlxcel list` and `mlxcel rm`.
 *
 * Layout (spec: cli-reference "환경 변수", "모델 옵션", "mlxcel list/rm/download"):
 *   store root  = --models-dir flag
 *               > $MLXCEL_MODELS_DIR                      (snapshots directly under it)
 *               > $MLXCEL_CACHE_DIR/models
 *               > $HOME/.cache/mlxcel/models
 *   a repo      = <root>/<owner>/<name>                     (no revision namespace)
 *   HF cache    = $HF_HUB_CACHE > $HF_HOME/hub > ~/.cache/huggingface/hub, read-only:
 *                 models--<owner>--<name>/refs/<revision> holds a commit hash and
 *                 models--<owner>--<name>/snapshots/<commit>/ holds the files.
 *
 * Resolution order for a model argument: an existing local path, then the store, then the HF
 * cache. A bare name (no '/') becomes ${MLXCEL_DEFAULT_ORG:-mlx-community}/<name>. A repo found
 * nowhere is a NOT_FOUND error here; io/hub.h's mxl_hub_resolve downloads it instead. Empty
 * environment variables count as unset. */
#ifndef MXL_IO_STORE_H
#define MXL_IO_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define MXL_STORE_PATH_MAX 4096
/* Each of owner and name is at most this many bytes (Hugging Face allows 96 for names). */
#define MXL_STORE_REPO_PART_MAX 128
#define MXL_STORE_REPO_ID_MAX (2 * MXL_STORE_REPO_PART_MAX + 2)
#define MXL_STORE_DEFAULT_ORG "mlx-community"
/* The file `mlxcel download` leaves in a store entry it made of links (see io/hub_cache.h). */
#define MXL_STORE_DOWNLOAD_MARKER ".mlxcel-download.json"

typedef enum mxl_model_source {
    MXL_MODEL_SOURCE_LOCAL,    /* the argument was an existing path */
    MXL_MODEL_SOURCE_STORE,    /* <root>/<owner>/<name> */
    MXL_MODEL_SOURCE_HF_CACHE, /* a snapshot in the Hugging Face hub cache */
} mxl_model_source;

typedef struct mxl_resolved {
    mxl_model_source source;
    char path[MXL_STORE_PATH_MAX];       /* absolute path of the file or directory */
    char repo_id[MXL_STORE_REPO_ID_MAX]; /* "owner/name"; "" for a local path */
    char revision[MXL_STORE_PATH_MAX];   /* hf-cache: the commit used; otherwise "" */
} mxl_resolved;

/* "local", "store" or "hf-cache". */
const char *mxl_model_source_name(mxl_model_source source);

/* The store root (absolute; it need not exist). models_dir_flag may be NULL. */
mxl_status mxl_store_root(const char *models_dir_flag, char *out, size_t cap, mxl_error *err);

/* True when s is "owner/name": exactly one '/', each part 1..MXL_STORE_REPO_PART_MAX bytes of
 * [A-Za-z0-9._-], no "..", not starting with '.' or '-'. */
bool mxl_store_repo_id_valid(const char *s);

/* Turns a repo argument into "owner/name": a bare name gets ${MLXCEL_DEFAULT_ORG:-mlx-community}.
 * Errors (MXL_ERR_ARG) name the argument when the result is not a valid repo id. */
mxl_status mxl_store_expand_repo_id(const char *arg, char *out, size_t cap, mxl_error *err);

/* <root>/<owner>/<name> for a valid repo id. */
mxl_status mxl_store_repo_path(const char *root, const char *repo_id, char *out, size_t cap,
                               mxl_error *err);

/* The Hugging Face hub cache directory (it need not exist). */
mxl_status mxl_store_hf_cache_dir(char *out, size_t cap, mxl_error *err);

/* Finds the snapshot directory of repo_id at revision (NULL = "main") in the HF cache: refs/<rev>
 * names the commit, or <rev> is itself a snapshots/ entry. commit_out (may be NULL) receives the
 * commit. MXL_ERR_NOT_FOUND when absent, MXL_ERR_ARG for a malformed revision. */
mxl_status mxl_store_hf_lookup(const char *repo_id, const char *revision, char *out, size_t cap,
                               char *commit_out, size_t commit_cap, mxl_error *err);

/* Resolves a -m/--model argument (see the order above). revision is NULL when --revision was not
 * given; it is refused for a local path, and anything but "main" is refused for a store copy. */
mxl_status mxl_store_resolve(const char *arg, const char *models_dir_flag, const char *revision,
                             mxl_resolved *out, mxl_error *err);

/* For a GGUF repo directory (no config.json, exactly one *.gguf file directly inside) writes that
 * file's path to out. Writes "" and returns MXL_OK when dir is not a GGUF repo directory (it has a
 * config.json, or no .gguf file). Several .gguf files and no config.json: MXL_ERR_ARG naming them. */
mxl_status mxl_store_gguf_in_dir(const char *dir, char *out, size_t cap, mxl_error *err);

/* Disk usage of a tree: the sum of regular file sizes (symlinks are not followed and count 0) and
 * the newest regular-file mtime (has_mtime false when there is none). path may be a file. */
mxl_status mxl_store_usage(const char *path, uint64_t *bytes, int64_t *newest_mtime,
                           bool *has_mtime, mxl_error *err);

/* The same, counting each symlinked file at its target's size and mtime (a download's store entry
 * or a hub-cache snapshot, whose files are links); linked directories are still not entered. */
mxl_status mxl_store_usage_links(const char *path, uint64_t *bytes, int64_t *newest_mtime, bool *has_mtime,
                                 mxl_error *err);

/* Removes a file or a directory tree without following symlinks (a link is unlinked, its target
 * untouched). A missing path is not an error. */
mxl_status mxl_store_rmtree(const char *path, mxl_error *err);

typedef struct mxl_store_entry {
    char repo_id[MXL_STORE_REPO_ID_MAX];
    char path[MXL_STORE_PATH_MAX];
    uint64_t size_bytes;
    int64_t modified; /* Unix seconds; meaningful only when has_modified */
    bool has_modified;
    bool hf_cache; /* a Hugging Face cache repo (mxl_store_hf_list), not a store entry */
} mxl_store_entry;

/* Lists <root>/<owner>/<name> directories holding a model (config.json, *.safetensors or *.gguf
 * directly inside). Owner/name entries that are symlinks or not valid repo-id parts (such as the
 * fetch script's ".fetch-tmp.*" directories) are skipped. A missing root is an empty store.
 * *out is heap-allocated (NULL when empty); free with mxl_store_entries_free. Unsorted. */
mxl_status mxl_store_list(const char *root, mxl_store_entry **out, size_t *n, mxl_error *err);
void mxl_store_entries_free(mxl_store_entry *entries);

/* The repos of the Hugging Face cache that have a snapshot for main: path is that snapshot, size
 * the repo's blobs (what deleting it would free), hf_cache set. Unsorted; a missing cache is empty. */
mxl_status mxl_store_hf_list(mxl_store_entry **out, size_t *n, mxl_error *err);

/* Safety check before deleting repo_id from root: the repo id is valid, <root>/<owner>/<name> is
 * a directory whose realpath is exactly realpath(root)/<owner>/<name> (so neither <owner> nor
 * <name> is a symlink, whether it points out of the store or to another repo inside it). path_out (may be NULL) gets the
 * directory. MXL_ERR_NOT_FOUND when absent; MXL_ERR_ARG when unsafe. */
mxl_status mxl_store_check_removable(const char *root, const char *repo_id, char *path_out,
                                     size_t cap, mxl_error *err);

/* Deletes <root>/<owner>/<name> recursively after mxl_store_check_removable, never following a
 * symlink (a link is unlinked, its target untouched), then removes <root>/<owner> if empty. */
mxl_status mxl_store_remove(const char *root, const char *repo_id, mxl_error *err);

/* "93.7 MB": decimal (1000-based) units like ollama and huggingface-cli; bytes as "512 B". */
void mxl_store_format_size(uint64_t bytes, char *out, size_t cap);

#endif
