/* cmd_chat_template.c - `mlxcel chat-template` (placeholder until implemented). */
#include <stdio.h>

#include "cli/commands.h"

int mxl_cmd_chat_template(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: 'mlxcel chat-template' is not available in this build yet\n");
    return 1;
}
