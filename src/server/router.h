/* router.h - `mlxcel serve` without a model (router mode, as llama-server's): every model of the
 * store and the Hugging Face cache (or of --models-dir / --models-preset) is listed by
 * /v1/models, and each one in use runs in a child `mlxcel serve -m <path>` process on a loopback
 * port. A request's "model" (the JSON body's, or ?model= on a GET) picks the child it is relayed
 * to, byte for byte (SSE streams included, unbuffered). A model is loaded on its first request
 * (--models-autoload, default on) or by POST /models/load, unloaded by POST /models/unload or,
 * least recently used first, when loading another would pass --models-max. Requests for a model
 * still loading wait for it; a model that fails to load fails the requests that waited for it,
 * not the router. API key, CORS and --api-prefix are the router's; the children have none. */
#ifndef MXL_SERVER_ROUTER_H
#define MXL_SERVER_ROUTER_H

#include "core/status.h"
#include "server/config.h"

/* Runs until SIGINT/SIGTERM, then stops the children. argv: the serve command's (its flags are
 * passed on to the children, less the router's own: see mxl_server_config_child_args). Returns 0
 * on a clean shutdown; on a startup failure fills err and returns 1. */
int mxl_router_run(const mxl_server_config *cfg, int argc, char **argv, void (*log)(const char *line), mxl_error *err);

#endif
