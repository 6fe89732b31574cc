/* cmd_bench.c - `mlxcel bench` (placeholder until implemented). */
#include <stdio.h>

#include "cli/commands.h"

int mxl_cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: 'mlxcel bench' is not available in this build yet\n");
    return 1;
}
