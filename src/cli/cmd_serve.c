/* cmd_serve.c - `mlxcel serve` and the `mlxcel-server` entry point (llama-server spellings): parses
 * the flags and environment (server/config.c), prints the startup lines and runs the server until
 * SIGINT/SIGTERM; without a model, the router (server/router.c). */
#include <stdio.h>

#include "cli/commands.h"
#include "cli/hub_progress.h"
#include "server/config.h"
#include "server/router.h"
#include "server/server.h"

static FILE *g_log; /* --log-file (appended), else stderr */

static void log_line(const char *line) {
    FILE *f = g_log ? g_log : stderr;
    fprintf(f, "%s\n", line);
    fflush(f);
}

int mxl_cmd_serve(int argc, char **argv) {
    mxl_server_config cfg;
    mxl_error err = {0};
    if (mxl_server_config_parse(argc, argv, &cfg, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 2;
    }
    if (cfg.help) {
        mxl_server_config_print_help();
        return 0;
    }
    if (cfg.log_file && !cfg.log_disable && !(g_log = fopen(cfg.log_file, "a"))) {
        perror(cfg.log_file);
        fprintf(stderr, "error: --log-file %s: cannot open it for appending\n", cfg.log_file);
        return 2;
    }
    mxl_cli_progress prog; /* a repo id that is not on this machine is downloaded first */
    mxl_cli_progress_init(&prog, cfg.model ? cfg.model : "", cfg.log_disable);
    cfg.hub_progress = mxl_cli_progress_event;
    cfg.hub_progress_ud = &prog;
    int rc = cfg.router ? mxl_router_run(&cfg, argc, argv, cfg.log_disable ? NULL : log_line, &err)
                        : mxl_server_run(&cfg, cfg.log_disable ? NULL : log_line, &err);
    if (rc) {
        fprintf(stderr, "error: %s\n", err.msg);
        if (g_log) fprintf(g_log, "error: %s\n", err.msg);
    }
    if (g_log) fclose(g_log);
    return rc;
}
