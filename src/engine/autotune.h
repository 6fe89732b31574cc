/* autotune.h - the autotune cache: the knob values `mlxcel tune` chose, in
 * ${MLXCEL_CACHE_DIR:-$HOME/.cache/mlxcel}/autotune/cpu.json, and their use at model load under
 * MLXCEL_AUTOTUNE=cache|1 (unset, empty, 0 or off: the file is not read at all).
 *
 * The file (JSON, format version MXL_AUTOTUNE_VERSION):
 *   {"format": "mlxcel-autotune", "version": 1, "backend": "cpu",
 *    "entries": [{"machine": {"cpu": "AMD EPYC 9R14", "isa": "avx512", "threads": 2},
 *                 "shape": {"head_dim": 64, "q_heads": 32, "kv_heads": 8, "block_size": 32},
 *                 "op": "paged-decode-splits", "context": 4096, "value": 2, "default": 1,
 *                 "default_us": 812.5, "tuned_us": 640.2, "spread": 0.03}, ...]}
 * An entry belongs to one machine (processor model name, kernel level, thread count) and one
 * attention shape (head_dim, query heads, KV heads, KV block size); "context" is where an
 * attention knob's value starts to apply (backends' tune_set), -1 for a knob without one. The
 * timings are the medians that decided it (informational).
 *
 * At load only the entries of this machine and the model's shape are applied (through the
 * backend's tune_set). A file that is not JSON, has another format or version, or holds a
 * malformed entry (a missing field, an unknown op, a value the backend refuses) is ignored as a
 * whole; entries of another machine are skipped; either way with one line of warning for the
 * front end to print. Nothing here prints. */
#ifndef MXL_ENGINE_AUTOTUNE_H
#define MXL_ENGINE_AUTOTUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "core/status.h"

#define MXL_AUTOTUNE_FORMAT "mlxcel-autotune"
#define MXL_AUTOTUNE_VERSION 1
#define MXL_AUTOTUNE_FILE "cpu.json"

typedef struct mxl_autotune_machine {
    char cpu[128];
    char isa[32];
    int threads;
} mxl_autotune_machine;

typedef struct mxl_autotune_shape {
    int head_dim, q_heads, kv_heads, block_size;
} mxl_autotune_shape;

typedef struct mxl_autotune_entry {
    mxl_autotune_machine machine;
    mxl_autotune_shape shape;
    char op[48];
    int64_t context; /* -1: the knob has none */
    int value, def;
    double default_us, tuned_us, spread;
} mxl_autotune_entry;

typedef enum mxl_autotune_mode {
    MXL_AUTOTUNE_OFF = 0,
    MXL_AUTOTUNE_CACHE,
} mxl_autotune_mode;

/* MLXCEL_AUTOTUNE: "cache" or "1" read the cache; unset, "", "0" or "off" do not; anything else
 * does not either, with a warning in warn (warn[0] == 0 otherwise). */
mxl_autotune_mode mxl_autotune_mode_from_env(char *warn, size_t cap);
/* ${MLXCEL_CACHE_DIR:-$HOME/.cache/mlxcel}/autotune */
mxl_status mxl_autotune_dir(char *out, size_t cap, mxl_error *err);
/* This machine for backend be with a pool of `threads` threads. */
void mxl_autotune_machine_of(const mxl_backend *be, int threads, mxl_autotune_machine *m);
bool mxl_autotune_machine_eq(const mxl_autotune_machine *a, const mxl_autotune_machine *b);

/* Parses and checks the cache file at path: every entry into *out (mxl_free it; NULL when none),
 * their count in *n. MXL_ERR_NOT_FOUND when there is no file, MXL_ERR_IO when it cannot be read,
 * MXL_ERR_FORMAT (the message says why) for anything malformed or of another format version;
 * with be (may be NULL) an op or value be's tune_valid refuses is malformed too. */
mxl_status mxl_autotune_read(const char *path, const mxl_backend *be, mxl_autotune_entry **out, int *n, mxl_error *err);
/* Writes entries e[n] into <dir>/cpu.json (dir created), keeping the file's other entries (those
 * of another machine, shape, op or context) when it is valid; a file that is not is replaced and
 * its problem put in warn. Written to a temporary file and renamed over the old one. */
mxl_status mxl_autotune_write(const char *dir, const mxl_autotune_entry *e, int n, const mxl_backend *be, char *warn,
                              size_t cap, mxl_error *err);
/* Applies the entries of file path that belong to machine m and shape s through be's tune_set;
 * returns how many; a problem (malformed file, entries of another machine) as one line in warn
 * (warn[0] == 0 when none). A missing file applies nothing, silently. */
int mxl_autotune_apply_file(const mxl_backend *be, const char *path, const mxl_autotune_machine *m,
                            const mxl_autotune_shape *s, char *warn, size_t cap);
/* The model load's use: nothing unless MLXCEL_AUTOTUNE asks for the cache; then
 * mxl_autotune_apply_file on the default path for this machine with `threads` threads. */
int mxl_autotune_load(const mxl_backend *be, int threads, const mxl_autotune_shape *s, char *warn, size_t cap);

#endif
