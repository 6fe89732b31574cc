/* safetensors.h - reader for safetensors checkpoints: one file, or a model directory of shards.
 *
 * File layout (https://github.com/huggingface/safetensors, README "Format"):
 *   [8 bytes]  N, little-endian u64: length of the JSON header
 *   [N bytes]  UTF-8 JSON object, possibly padded with trailing spaces:
 *              { "__metadata__": {"format": "pt", ...},              (optional, string values)
 *                "<tensor name>": {"dtype": "BF16", "shape": [out, in],
 *                                  "data_offsets": [begin, end]}, ... }
 *   [rest]     the data section; offsets are relative to its start (byte 8 + N).
 *
 * Opening validates everything a consumer relies on (see safetensors.c for the exact rules,
 * which match the reference Rust crate's `Metadata::validate`), so every entry handed out is a
 * view whose bytes lie inside the mapping and whose size equals numel * dtype size. Tensor data
 * is not copied: views point into the memory-mapped file (or the borrowed buffer). A view's
 * data pointer is only as aligned as the writer made it (the reference writer pads the header to
 * a multiple of 8); readers of wide types that cannot assume alignment should memcpy.
 *
 * Directory API (mxl_st_model): `model.safetensors.index.json` (its `weight_map`) if present,
 * else `model.safetensors`, else every `*.safetensors` in the directory, sorted by name. With an
 * index, each shard it names is opened once and every mapped tensor must be in its shard; a
 * tensor a shard holds but the map does not name is still listed; a name in two files is an
 * error. */
#ifndef MXL_IO_SAFETENSORS_H
#define MXL_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

/* Cap on the JSON header length; the reference crate refuses headers above 100,000,000 bytes. */
#define MXL_SAFETENSORS_MAX_HEADER 100000000ull

typedef struct mxl_safetensors mxl_safetensors;

/* One tensor of a file. All pointers live as long as the file (or model) that handed it out. */
typedef struct mxl_st_entry {
    const char *name;
    mxl_tensor tensor;           /* dtype, shape (outermost first), data view, nbytes */
    uint64_t data_begin;         /* [begin, end) relative to the data section, from the header */
    uint64_t data_end;
    uint64_t file_offset;        /* absolute offset of the first byte in the file: 8 + N + begin */
    const mxl_safetensors *file; /* the file it lives in */
} mxl_st_entry;

/* --- single file ------------------------------------------------------------------------- */

/* Maps `path` read-only and validates it. Errors name the file (and tensor / key). */
mxl_status mxl_safetensors_open(const char *path, mxl_safetensors **out, mxl_error *err);
/* Same over a caller-owned buffer that must outlive the object (fuzzer, tests, embedded data).
 * `name` is used in error messages and as the path (may be NULL: "<buffer>"). */
mxl_status mxl_safetensors_open_buffer(const uint8_t *data, uint64_t size, const char *name,
                                       mxl_safetensors **out, mxl_error *err);
void mxl_safetensors_close(mxl_safetensors *st); /* NULL is fine */

const char *mxl_safetensors_path(const mxl_safetensors *st);
/* Entries are ordered by data offset (ties, i.e. empty tensors, by name). */
size_t mxl_safetensors_count(const mxl_safetensors *st);
const mxl_st_entry *mxl_safetensors_at(const mxl_safetensors *st, size_t i); /* NULL if i >= count */
const mxl_st_entry *mxl_safetensors_find(const mxl_safetensors *st, const char *name); /* or NULL */
/* Sum of every tensor's nbytes (equals the data section size of a valid file). */
uint64_t mxl_safetensors_total_bytes(const mxl_safetensors *st);
uint64_t mxl_safetensors_header_len(const mxl_safetensors *st); /* N */
uint64_t mxl_safetensors_file_size(const mxl_safetensors *st);

/* `__metadata__` string map, in header order. */
size_t mxl_safetensors_metadata_count(const mxl_safetensors *st);
/* Returns 0 and sets *key / *value, or nonzero if i >= count. */
int mxl_safetensors_metadata_at(const mxl_safetensors *st, size_t i, const char **key,
                                const char **value);
const char *mxl_safetensors_metadata_get(const mxl_safetensors *st, const char *key); /* or NULL */

/* --- model directory (possibly sharded) ---------------------------------------------------- */

typedef struct mxl_st_model mxl_st_model;

/* Opens a checkpoint directory (see top comment). A path to a single regular file is opened as
 * a one-file model. Errors name the directory, the index or the shard, and the tensor. */
mxl_status mxl_st_model_open(const char *path, mxl_st_model **out, mxl_error *err);
void mxl_st_model_close(mxl_st_model *m); /* NULL is fine */
/* mxl_mapped_file_release on whichever of m's files maps [p, p + n) (nothing when none does). */
void mxl_st_model_release_pages(const mxl_st_model *m, const void *p, uint64_t n);

/* Tensors of all files: files in order, each file's tensors in data-offset order. */
size_t mxl_st_model_tensor_count(const mxl_st_model *m);
const mxl_st_entry *mxl_st_model_tensor_at(const mxl_st_model *m, size_t i);
const mxl_st_entry *mxl_st_model_find(const mxl_st_model *m, const char *name);
uint64_t mxl_st_model_total_bytes(const mxl_st_model *m);
/* Files opened, sorted by file name. */
size_t mxl_st_model_file_count(const mxl_st_model *m);
const mxl_safetensors *mxl_st_model_file_at(const mxl_st_model *m, size_t i);
/* First value of `__metadata__[key]` among the files, in file order; NULL when none has it. */
const char *mxl_st_model_metadata_get(const mxl_st_model *m, const char *key);
/* The directory (or file) that was opened. */
const char *mxl_st_model_path(const mxl_st_model *m);

#endif
