/* cmd_list.c - `mlxcel list` (placeholder until implemented). */
#include <stdio.h>

#include "cli/commands.h"

int mxl_cmd_list(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: 'mlxcel list' is not available in this build yet\n");
    return 1;
}
