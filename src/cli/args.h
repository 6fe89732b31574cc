/* args.h - table-driven flag parser shared by every subcommand.
 *
 * Accepts `--name value`, `--name=value`, `-x value`, boolean `--name`, repeated flags, and `--`.
 * An unknown flag, a missing value or an unexpected positional prints one line to stderr and the
 * parse returns 2 (the exit code for usage errors); `-h`/`--help` prints the generated help and
 * returns 1. Only cli/ prints. */
#ifndef MXL_CLI_ARGS_H
#define MXL_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#define MXL_CLI_MAX_OPTS 64
#define MXL_CLI_MAX_VALUES 64
#define MXL_CLI_MAX_POS 16

typedef struct mxl_cli_opt {
    const char *long_name;  /* without leading dashes, e.g. "model" */
    char short_name;        /* 0 if none */
    const char *metavar;    /* NULL for a boolean flag, else the value's name, e.g. "PATH" */
    const char *default_text; /* shown in help; NULL for none */
    const char *help;
} mxl_cli_opt;

typedef struct mxl_cli_cmd {
    const char *name;        /* "inspect" */
    const char *usage;       /* "mlxcel inspect -m <MODEL> [OPTIONS]" */
    const char *summary;     /* one paragraph */
    const mxl_cli_opt *opts; /* terminated by an entry with long_name == NULL */
    int min_pos, max_pos;    /* positional argument counts */
    const char *pos_help;    /* e.g. "<REPO_ID>" */
} mxl_cli_cmd;

typedef struct mxl_cli_args {
    const mxl_cli_cmd *cmd;
    int n_opts;
    /* For option i: the values given (count[i] of them); booleans have count only. */
    int count[MXL_CLI_MAX_OPTS];
    const char *values[MXL_CLI_MAX_OPTS][MXL_CLI_MAX_VALUES];
    int n_pos;
    const char *pos[MXL_CLI_MAX_POS];
} mxl_cli_args;

/* argv[0] is the subcommand name. Returns 0 ok, 1 help shown (exit 0), 2 usage error (exit 2). */
int mxl_cli_parse(const mxl_cli_cmd *cmd, int argc, char **argv, mxl_cli_args *out);
void mxl_cli_print_help(const mxl_cli_cmd *cmd);

bool mxl_cli_has(const mxl_cli_args *a, const char *long_name);
/* How many times the option was given, and its i-th value (NULL when out of range). */
int mxl_cli_count(const mxl_cli_args *a, const char *long_name);
const char *mxl_cli_get_nth(const mxl_cli_args *a, const char *long_name, int i);
/* Last value given for the option, or NULL. */
const char *mxl_cli_get(const mxl_cli_args *a, const char *long_name);
/* Parses an integer option; returns 2 (after printing) when malformed or out of [min, max]. */
int mxl_cli_get_int(const mxl_cli_args *a, const char *long_name, int64_t dflt, int64_t min,
                    int64_t max, int64_t *out);
/* Prints "error: <msg>" for usage errors and returns 2. */
int mxl_cli_usage_error(const mxl_cli_cmd *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "error: <msg>" and returns 1 (runtime failure). */
int mxl_cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Reports that a flag parsed from the spec is not implemented yet; returns 2. */
int mxl_cli_not_supported_flag(const mxl_cli_cmd *cmd, const char *flag);

#endif
