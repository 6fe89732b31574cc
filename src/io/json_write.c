/* json_write.c - see json_write.h. */
#include <stdio.h>

#include "core/alloc.h"
#include "io/json_write.h"

mxl_status mxl_json_write_file(json_t *doc, const char *dir, const char *name, mxl_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!doc) return mxl_error_set(err, MXL_ERR_NOMEM, "%s: out of memory", path);
    int rc = json_dump_file(doc, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(doc);
    return rc == 0 ? MXL_OK : mxl_error_set(err, MXL_ERR_IO, "%s: cannot write", path);
}

char *mxl_json_dumps(const json_t *j, size_t flags) {
    uint64_t f0 = mxl_alloc_thread_failures();
    char *s = json_dumps(j, flags);
    if (s && mxl_alloc_thread_failures() != f0) {
        mxl_free(s);
        s = NULL;
    }
    return s;
}
