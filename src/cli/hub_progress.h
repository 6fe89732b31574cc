/* hub_progress.h - how a download shows its progress on stderr: on a terminal, a bar per file in
 * flight and a total line (speed, time left), redrawn at most ten times a second; otherwise (a
 * pipe, a log file) one quiet line when the plan is known and one per finished file. Plugged into
 * mxl_hub_opts / mxl_hub_resolve_opts as their progress callback; mxl_cli_resolve_model is the
 * model resolution of the commands that download what is missing (run, generate, embed, rerank,
 * serve). */
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

/* mxl_hub_resolve with this progress on stderr, offline from $HF_HUB_OFFLINE / $LLAMA_ARG_OFFLINE
 * (or `offline`), the token from mxl_hub_token(token_flag). */
mxl_status mxl_cli_resolve_model(const char *arg, const char *models_dir, const char *revision, bool offline,
                                 const char *token_flag, mxl_resolved *out, mxl_error *err);

#endif
