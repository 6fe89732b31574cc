/* commands.h - entry points of the subcommands (one file per subcommand under cli/).
 * Each takes argv with argv[0] = the subcommand name and returns the process exit code. */
#ifndef MXL_CLI_COMMANDS_H
#define MXL_CLI_COMMANDS_H

int mxl_cmd_inspect(int argc, char **argv);
int mxl_cmd_list(int argc, char **argv);
int mxl_cmd_rm(int argc, char **argv);
int mxl_cmd_arch(int argc, char **argv);

#endif
