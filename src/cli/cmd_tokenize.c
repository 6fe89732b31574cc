/* cmd_tokenize.c - `mlxcel tokenize` (placeholder until implemented). */
#include <stdio.h>

#include "cli/commands.h"

int mxl_cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: 'mlxcel tokenize' is not available in this build yet\n");
    return 1;
}
