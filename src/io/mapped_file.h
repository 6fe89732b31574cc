/* mapped_file.h - read-only memory mapping of a checkpoint file; tensors are views into it. */
#ifndef MXL_IO_MAPPED_FILE_H
#define MXL_IO_MAPPED_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct mxl_mapped_file {
    char *path;         /* owned copy */
    const uint8_t *data; /* NULL for an empty file */
    uint64_t size;
} mxl_mapped_file;

/* Maps the whole file read-only. Errors name the path. */
mxl_status mxl_mapped_file_open(const char *path, mxl_mapped_file *out, mxl_error *err);
void mxl_mapped_file_close(mxl_mapped_file *f);
/* Drops the resident pages lying wholly inside [p, p + n) when that range is in f's mapping
 * (nothing otherwise): for weights the engine has copied into another layout. The bytes stay
 * readable - a later access reads them from the file again. */
void mxl_mapped_file_release(const mxl_mapped_file *f, const void *p, uint64_t n);

#endif
