/* cmd_rm.c - `mlxcel rm` (placeholder until implemented). */
#include <stdio.h>

#include "cli/commands.h"

int mxl_cmd_rm(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: 'mlxcel rm' is not available in this build yet\n");
    return 1;
}
