/* cmd_inspect.c - `mlxcel inspect` (placeholder until implemented). */
#include <stdio.h>

#include "cli/commands.h"

int mxl_cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: 'mlxcel inspect' is not available in this build yet\n");
    return 1;
}
