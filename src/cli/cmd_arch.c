/* cmd_arch.c - `mlxcel arch` (placeholder until implemented). */
#include <stdio.h>

#include "cli/commands.h"

int mxl_cmd_arch(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: 'mlxcel arch' is not available in this build yet\n");
    return 1;
}
