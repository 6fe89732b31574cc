/* hub_progress.h - how a download shows its progress on stderr: on a terminal, a bar per file in
 * flight and a total line (speed, time left), redrawn at most ten times a second; otherwise (a
 * pipe, a log file) one quiet line when the plan is known and one per finished file. Plugged into
 * mxl_hub_opts / mxl_hub_resolve_opts as their progress callback. */
#ifndef MXL_CLI_HUB_PROGRESS_H
#define MXL_CLI_HUB_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "io/hub.h"

#define MXL_CLI_PROGRESS_SLOTS 32

typedef struct mxl_cli_progress {
    const char *label; /* the repo id, for the lines */
    bool tty;
    bool quiet;  /* nothing at all */
    double t0, last_draw;
    int drawn; /* lines of the live block on screen */
    struct {
        char name[96];
        int64_t size, done;
        bool active;
    } slot[MXL_CLI_PROGRESS_SLOTS];
    int64_t bytes_total, bytes_done;
    int files_total, files_done;
} mxl_cli_progress;

/* tty: whether stderr is a terminal (and TERM is not "dumb"). */
void mxl_cli_progress_init(mxl_cli_progress *p, const char *label, bool quiet);
void mxl_cli_progress_event(void *ud, const mxl_hub_event *ev);
/* Clears the live block (call before printing the outcome). */
void mxl_cli_progress_end(mxl_cli_progress *p);

#endif
