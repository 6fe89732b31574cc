/* safetensors_write.h - writes one safetensors file (the layout safetensors.h reads) in a
 * streaming way: the caller declares every tensor (name, dtype, shape) up front so the header can
 * be written first, then produces each tensor's bytes in declaration order. The header is
 * padded with spaces to a multiple of 8 bytes, as the reference writer does, so data offsets
 * stay 8-aligned; tensors are laid out in declaration order. */
#ifndef MXL_IO_SAFETENSORS_WRITE_H
#define MXL_IO_SAFETENSORS_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

typedef struct mxl_st_out {
    char name[256];
    mxl_dtype dtype; /* F32, F16, BF16, U32, I32, U8, ... (no block formats) */
    int ndim;
    int64_t shape[MXL_MAX_DIMS];
} mxl_st_out;

typedef struct mxl_st_writer mxl_st_writer;

/* Creates `path` and writes the header for tensors[0..n) with "__metadata__": {"format": fmt}.
 * Names must be unique. */
mxl_status mxl_st_writer_create(const char *path, const mxl_st_out *tensors, size_t n, const char *fmt,
                                mxl_st_writer **out, mxl_error *err);
/* Appends bytes of the tensors in declaration order: one call may give a tensor's whole data or
 * a part of it (rows at a time), never bytes of two tensors. */
mxl_status mxl_st_writer_put(mxl_st_writer *w, const void *data, uint64_t nbytes, mxl_error *err);
/* Checks every tensor was written, closes the file. Frees w whatever happens. */
mxl_status mxl_st_writer_finish(mxl_st_writer *w, mxl_error *err);
/* Closes and removes a partly written file. */
void mxl_st_writer_abort(mxl_st_writer *w);
/* Bytes of one tensor as declared (0 on overflow or a dtype without a fixed element size). */
uint64_t mxl_st_out_bytes(const mxl_st_out *t);

#endif
