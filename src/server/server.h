/* server.h - the `mlxcel serve` process: loads the model behind an HTTP listener that answers
 * 503 until it is ready, runs the scheduler, routes requests to the API files (api_openai.c,
 * api_llama.c) and shuts down cleanly on SIGINT/SIGTERM. */
#ifndef MXL_SERVER_SERVER_H
#define MXL_SERVER_SERVER_H

#include <jansson.h>

#include "core/status.h"
#include "server/config.h"

/* Runs until a signal asks it to stop. Returns 0 on a clean shutdown; on a startup failure
 * fills err and returns 1. `log` receives one-line progress messages (startup address, ...). */
int mxl_server_run(const mxl_server_config *cfg, void (*log)(const char *line), mxl_error *err);
/* A whole file as a NUL-terminated string (the TLS PEM files, templates, ...); NULL with err set
 * ("WHAT PATH: cannot open") when it cannot be read. */
char *mxl_srv_read_file(const char *path, mxl_error *err, const char *what);
/* A comma-separated list (--alias, --tags) as a JSON array of its trimmed, non-empty items. */
json_t *mxl_srv_split_list(const char *list);

#endif
