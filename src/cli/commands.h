/* commands.h - entry points of the subcommands (one file per subcommand under cli/).
 * Each takes argv with argv[0] = the subcommand name and returns the process exit code. */
#ifndef MXL_CLI_COMMANDS_H
#define MXL_CLI_COMMANDS_H

int mxl_cmd_inspect(int argc, char **argv);
int mxl_cmd_generate(int argc, char **argv);
int mxl_cmd_run(int argc, char **argv);
int mxl_cmd_embed(int argc, char **argv);
int mxl_cmd_rerank(int argc, char **argv);
int mxl_cmd_serve(int argc, char **argv);
int mxl_cmd_list(int argc, char **argv);
int mxl_cmd_rm(int argc, char **argv);
int mxl_cmd_download(int argc, char **argv);
int mxl_cmd_tune(int argc, char **argv);
int mxl_cmd_arch(int argc, char **argv);
/* developer commands beyond the spec */
int mxl_cmd_tokenize(int argc, char **argv);
int mxl_cmd_chat_template(int argc, char **argv);
int mxl_cmd_bench(int argc, char **argv);
int mxl_cmd_convert(int argc, char **argv);

#endif
