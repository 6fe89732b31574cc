/* gguf.h - reader for GGUF v2/v3 files (llama.cpp / ggml checkpoints).
 *
 * Layout (all little-endian; ggml's gguf.h is the reference):
 *   "GGUF" | u32 version | u64 tensor_count | u64 kv_count
 *   kv_count x { string key | u32 value_type | value }
 *   tensor_count x { string name | u32 n_dims | u64 ne[n_dims] (innermost first) | u32 ggml_type
 *                    | u64 offset (relative to the data section) }
 *   padding to `general.alignment` (default 32) | data section
 * where string = u64 length + bytes (no NUL), and an ARRAY value = u32 element type + u64 count +
 * elements (arrays may nest).
 *
 * The file is memory-mapped (or a caller's buffer is borrowed) and every table is validated when
 * opened: counts and lengths are bounded by the bytes that remain before anything is allocated,
 * tensors must lie inside the file, be aligned, not overlap, and have a type we load. Afterwards
 * every accessor is bounds-safe. Strings point into the file bytes and are NOT NUL-terminated
 * (use the length); key and tensor names are additionally copied NUL-terminated.
 *
 * Tensor shapes are stored outermost first (core/tensor.h), i.e. reversed from GGUF's ne[]. */
#ifndef MXL_IO_GGUF_H
#define MXL_IO_GGUF_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

/* GGUF metadata value types (gguf.h numbering). */
typedef enum mxl_gguf_type {
    MXL_GGUF_TYPE_UINT8 = 0,
    MXL_GGUF_TYPE_INT8 = 1,
    MXL_GGUF_TYPE_UINT16 = 2,
    MXL_GGUF_TYPE_INT16 = 3,
    MXL_GGUF_TYPE_UINT32 = 4,
    MXL_GGUF_TYPE_INT32 = 5,
    MXL_GGUF_TYPE_FLOAT32 = 6,
    MXL_GGUF_TYPE_BOOL = 7,
    MXL_GGUF_TYPE_STRING = 8,
    MXL_GGUF_TYPE_ARRAY = 9,
    MXL_GGUF_TYPE_UINT64 = 10,
    MXL_GGUF_TYPE_INT64 = 11,
    MXL_GGUF_TYPE_FLOAT64 = 12,
    MXL_GGUF_TYPE_COUNT
} mxl_gguf_type;

/* ggml tensor type ids (ggml.h numbering; gaps are ids ggml has retired). */
typedef enum mxl_ggml_type {
    MXL_GGML_TYPE_F32 = 0,
    MXL_GGML_TYPE_F16 = 1,
    MXL_GGML_TYPE_Q4_0 = 2,
    MXL_GGML_TYPE_Q4_1 = 3,
    MXL_GGML_TYPE_Q5_0 = 6,
    MXL_GGML_TYPE_Q5_1 = 7,
    MXL_GGML_TYPE_Q8_0 = 8,
    MXL_GGML_TYPE_Q8_1 = 9,
    MXL_GGML_TYPE_Q2_K = 10,
    MXL_GGML_TYPE_Q3_K = 11,
    MXL_GGML_TYPE_Q4_K = 12,
    MXL_GGML_TYPE_Q5_K = 13,
    MXL_GGML_TYPE_Q6_K = 14,
    MXL_GGML_TYPE_Q8_K = 15,
    MXL_GGML_TYPE_IQ2_XXS = 16,
    MXL_GGML_TYPE_IQ2_XS = 17,
    MXL_GGML_TYPE_IQ3_XXS = 18,
    MXL_GGML_TYPE_IQ1_S = 19,
    MXL_GGML_TYPE_IQ4_NL = 20,
    MXL_GGML_TYPE_IQ3_S = 21,
    MXL_GGML_TYPE_IQ2_S = 22,
    MXL_GGML_TYPE_IQ4_XS = 23,
    MXL_GGML_TYPE_I8 = 24,
    MXL_GGML_TYPE_I16 = 25,
    MXL_GGML_TYPE_I32 = 26,
    MXL_GGML_TYPE_I64 = 27,
    MXL_GGML_TYPE_F64 = 28,
    MXL_GGML_TYPE_IQ1_M = 29,
    MXL_GGML_TYPE_BF16 = 30,
    MXL_GGML_TYPE_TQ1_0 = 34,
    MXL_GGML_TYPE_TQ2_0 = 35,
    MXL_GGML_TYPE_MXFP4 = 39,
    MXL_GGML_TYPE_NVFP4 = 40,
    MXL_GGML_TYPE_Q1_0 = 41,
} mxl_ggml_type;

/* Deepest array nesting accepted (a top-level ARRAY value is depth 1). */
#define MXL_GGUF_MAX_ARRAY_DEPTH 8
#define MXL_GGUF_DEFAULT_ALIGNMENT 32

/* A string inside the file: `len` bytes at `data`, not NUL-terminated, may contain NULs. */
typedef struct mxl_gguf_str {
    const char *data;
    uint64_t len;
} mxl_gguf_str;

typedef struct mxl_gguf_value mxl_gguf_value;

/* An ARRAY value. Elements of fixed-size types are read from `data` (little-endian, possibly
 * unaligned) with mxl_gguf_array_get; STRING elements are pre-split into `strs`; ARRAY elements
 * (nested arrays) are pre-parsed into `items`. */
typedef struct mxl_gguf_array {
    mxl_gguf_type elem_type;
    uint64_t n;
    const uint8_t *data;        /* first element in the file */
    uint64_t nbytes;            /* bytes the elements occupy in the file */
    const mxl_gguf_str *strs;   /* [n] when elem_type == STRING, else NULL */
    const mxl_gguf_value *items; /* [n] when elem_type == ARRAY, else NULL */
} mxl_gguf_array;

struct mxl_gguf_value {
    mxl_gguf_type type;
    union {
        uint64_t u64;  /* UINT8/16/32/64 (zero-extended) */
        int64_t i64;   /* INT8/16/32/64 (sign-extended) */
        double f64;    /* FLOAT32 (widened) / FLOAT64 */
        bool b;        /* BOOL (any non-zero byte is true) */
        mxl_gguf_str str;
        mxl_gguf_array arr;
    } v;
};

typedef struct mxl_gguf_kv {
    const char *key; /* NUL-terminated copy (arena) */
    uint64_t key_len;
    mxl_gguf_value value;
} mxl_gguf_kv;

typedef struct mxl_gguf_tensor_info {
    const char *name; /* NUL-terminated copy (arena) */
    uint64_t name_len;
    uint32_t ggml_type;   /* mxl_ggml_type */
    uint64_t offset;      /* relative to the data section, as stored */
    uint64_t file_offset; /* absolute offset of the first byte in the file */
    mxl_tensor tensor;    /* dtype, shape (outermost first), data view, nbytes */
} mxl_gguf_tensor_info;

typedef struct mxl_gguf mxl_gguf;

/* Maps `path` and parses it. Errors name the path (and key / tensor). */
mxl_status mxl_gguf_open(const char *path, mxl_gguf **out, mxl_error *err);
/* Parses a caller-owned buffer (borrowed: it must outlive the mxl_gguf). `name` labels errors. */
mxl_status mxl_gguf_open_buffer(const uint8_t *data, uint64_t size, const char *name,
                                mxl_gguf **out, mxl_error *err);
void mxl_gguf_close(mxl_gguf *g);
/* mxl_mapped_file_release on the file g maps (nothing for a borrowed buffer). */
void mxl_gguf_release_pages(const mxl_gguf *g, const void *p, uint64_t n);

const char *mxl_gguf_name(const mxl_gguf *g);
uint32_t mxl_gguf_version(const mxl_gguf *g);
uint64_t mxl_gguf_file_size(const mxl_gguf *g);
uint64_t mxl_gguf_alignment(const mxl_gguf *g);
/* Absolute file offset of the data section (header end rounded up to the alignment). */
uint64_t mxl_gguf_data_offset(const mxl_gguf *g);

/* Metadata, in file order. */
uint64_t mxl_gguf_n_kv(const mxl_gguf *g);
const mxl_gguf_kv *mxl_gguf_kv_at(const mxl_gguf *g, uint64_t i);
/* NULL when absent. */
const mxl_gguf_kv *mxl_gguf_find(const mxl_gguf *g, const char *key);

/* Typed getters by key. Return MXL_ERR_NOT_FOUND (message names the key) when absent and
 * MXL_ERR_FORMAT when the value has an incompatible type or is out of range:
 *   u64: any integer type holding a value >= 0;   i64: any integer type holding a value that
 *   fits in int64;   f64: FLOAT32/FLOAT64 (and integer types, converted);   bool: BOOL;
 *   str: STRING;   array: ARRAY. */
mxl_status mxl_gguf_get_u64(const mxl_gguf *g, const char *key, uint64_t *out, mxl_error *err);
mxl_status mxl_gguf_get_i64(const mxl_gguf *g, const char *key, int64_t *out, mxl_error *err);
mxl_status mxl_gguf_get_f64(const mxl_gguf *g, const char *key, double *out, mxl_error *err);
mxl_status mxl_gguf_get_bool(const mxl_gguf *g, const char *key, bool *out, mxl_error *err);
mxl_status mxl_gguf_get_str(const mxl_gguf *g, const char *key, mxl_gguf_str *out,
                            mxl_error *err);
mxl_status mxl_gguf_get_array(const mxl_gguf *g, const char *key, const mxl_gguf_array **out,
                              mxl_error *err);

/* Value-level coercions (same rules as above); return false when the type does not fit. */
bool mxl_gguf_value_as_u64(const mxl_gguf_value *v, uint64_t *out);
bool mxl_gguf_value_as_i64(const mxl_gguf_value *v, int64_t *out);
bool mxl_gguf_value_as_f64(const mxl_gguf_value *v, double *out);
/* Copies a STRING into buf (NUL-terminated, truncated to cap-1); false if not a STRING or the
 * string does not fit. */
bool mxl_gguf_value_copy_str(const mxl_gguf_value *v, char *buf, uint64_t cap);

/* Element i of an array as a value (scalars decoded, strings as views, nested arrays as arrays).
 * False when i >= n. */
bool mxl_gguf_array_get(const mxl_gguf_array *a, uint64_t i, mxl_gguf_value *out);

/* Tensors, in file order. */
uint64_t mxl_gguf_n_tensors(const mxl_gguf *g);
const mxl_gguf_tensor_info *mxl_gguf_tensor_at(const mxl_gguf *g, uint64_t i);
/* NULL when absent. */
const mxl_gguf_tensor_info *mxl_gguf_find_tensor(const mxl_gguf *g, const char *name);
/* Sum of every tensor's nbytes. */
uint64_t mxl_gguf_tensor_bytes_total(const mxl_gguf *g);

/* Names: "UINT32", "ARRAY", ... / ggml's "Q4_K", "IQ2_XXS", ... ("?" / NULL when unknown). */
const char *mxl_gguf_type_name(uint32_t type);
const char *mxl_ggml_type_name(uint32_t ggml_type); /* NULL for ids ggml never used */
/* The mxl_dtype a ggml type loads as, or MXL_DTYPE_INVALID when we do not load it. */
mxl_dtype mxl_ggml_type_to_dtype(uint32_t ggml_type);
/* Elements per block and bytes per block of a ggml type (from ggml's type traits), false when
 * the type is unknown. Covers the types we do not load too (for sizes in `inspect`). */
bool mxl_ggml_type_block(uint32_t ggml_type, uint32_t *block_elems, uint32_t *block_bytes);

#endif
