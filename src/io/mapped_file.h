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

#endif
