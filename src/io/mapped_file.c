/* mapped_file.c - mmap of checkpoint files (see mapped_file.h). */
#include "io/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"

mxl_status mxl_mapped_file_open(const char *path, mxl_mapped_file *out, mxl_error *err) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mxl_error_set(err, errno == ENOENT ? MXL_ERR_NOT_FOUND : MXL_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return mxl_error_set(err, MXL_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return mxl_error_set(err, MXL_ERR_IO, "%s: not a regular file", path);
    }
    out->size = (uint64_t)st.st_size;
    if (st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            return mxl_error_set(err, MXL_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
        }
        out->data = m;
    }
    close(fd);
    out->path = mxl_strdup(path);
    if (!out->path) {
        mxl_mapped_file_close(out);
        return mxl_error_set(err, MXL_ERR_NOMEM, "out of memory");
    }
    return MXL_OK;
}

void mxl_mapped_file_close(mxl_mapped_file *f) {
    if (f->data) munmap((void *)f->data, (size_t)f->size);
    mxl_free(f->path);
    memset(f, 0, sizeof *f);
}

void mxl_mapped_file_release(const mxl_mapped_file *f, const void *p, uint64_t n) {
    const uint8_t *a = p;
    if (!f->data || a < f->data || n > f->size || (uint64_t)(a - f->data) > f->size - n) return;
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0) return;
    uintptr_t lo = ((uintptr_t)a + (uintptr_t)ps - 1) / (uintptr_t)ps * (uintptr_t)ps;
    uintptr_t hi = ((uintptr_t)a + n) / (uintptr_t)ps * (uintptr_t)ps;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED); /* private, read-only: re-read on access */
}
