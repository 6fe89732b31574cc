/* json_write.h - writes a jansson document as a pretty-printed JSON file (keys in insertion
 * order), for the files `mlxcel convert` produces (config.json, tokenizer.json, ...). */
#ifndef MXL_IO_JSON_WRITE_H
#define MXL_IO_JSON_WRITE_H

#include <jansson.h>

#include "core/status.h"

/* Writes doc to <dir>/<name> and releases doc (a NULL doc is an out-of-memory error, so a failed
 * json_object() can be passed straight in). Errors name the path. */
mxl_status mxl_json_write_file(json_t *doc, const char *dir, const char *name, mxl_error *err);

/* json_dumps, but NULL when an allocation failed during the dump: jansson 2.14 drops an object
 * key it could not append and goes on (dump.c), which would give malformed JSON. mxl_free the
 * result. */
char *mxl_json_dumps(const json_t *j, size_t flags);

#endif
