/* repl.h - the interactive multi-turn chat REPL of `mlxcel run` without -p: reads turns from
 * stdin (prompt decorations only on a terminal, so piped input is scriptable), keeps the
 * conversation as a JSON messages array, re-renders it through the chat template each turn and
 * drives ONE sequence with the prompt cache on, so a follow-up turn only prefills its new tokens.
 * Commands: /bye, /clear, /? and /help, /image (refused in this build), """ multi-line blocks.
 * Ctrl-C cancels the answer being streamed (the exchange is dropped); twice exits. */
#ifndef MXL_CLI_REPL_H
#define MXL_CLI_REPL_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "engine/generate.h"

/* Kinds of input the REPL reads. */
typedef enum mxl_repl_input {
    MXL_REPL_EOF = 0,     /* end of input (Ctrl-D): leave */
    MXL_REPL_TEXT,        /* *out holds a message (or a /command line) */
    MXL_REPL_INTERRUPTED, /* Ctrl-C at the prompt: the line (or block) was dropped */
    MXL_REPL_NOMEM,
} mxl_repl_input;

/* Reads one input from `in`: a line, or a """ ... """ block joined with newlines (text after the
 * opening quotes and before the closing ones included). Prompts (">>> ", "... ") go to `prompt_out`
 * when it is not NULL. *out is malloc'd (free it) for MXL_REPL_TEXT, else NULL. `interrupted`, when
 * not NULL, is polled after a read fails (EINTR) to tell Ctrl-C from EOF. */
mxl_repl_input mxl_repl_read_input(FILE *in, FILE *prompt_out, volatile sig_atomic_t *interrupted, char **out);

/* Runs the REPL on a loaded model. req carries the sampling, max_tokens, stop strings, ignore_eos,
 * chat (false: raw turns, no transcript) and max_context of every turn (req->prompt is unused).
 * profile: print the --profile block instead of the summary line. Returns the exit code: 0, or 1
 * when a turn failed with piped input. */
int mxl_repl_run(mxl_gen_model *m, const mxl_gen_request *req, bool profile);

#endif
