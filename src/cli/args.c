/* args.c - table-driven flag parser (see args.h). */
#include "cli/args.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_opts_of(const mxl_cli_cmd *cmd) {
    int n = 0;
    while (cmd->opts && cmd->opts[n].long_name) n++;
    return n;
}

int mxl_cli_usage_error(const mxl_cli_cmd *cmd, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cmd)
        fprintf(stderr, "error: %s (see 'mlxcel %s --help')\n", msg, cmd->name);
    else
        fprintf(stderr, "error: %s (see 'mlxcel --help')\n", msg);
    return 2;
}

int mxl_cli_fail(const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "error: %s\n", msg);
    return 1;
}

int mxl_cli_not_supported_flag(const mxl_cli_cmd *cmd, const char *flag) {
    fprintf(stderr, "error: %s is not supported by this build of mlxcel %s yet\n", flag, cmd->name);
    return 2;
}

void mxl_cli_print_help(const mxl_cli_cmd *cmd) {
    printf("%s\n\nUsage: %s\n", cmd->summary, cmd->usage);
    int n = n_opts_of(cmd);
    if (n) printf("\nOptions:\n");
    for (int i = 0; i < n; i++) {
        const mxl_cli_opt *o = &cmd->opts[i];
        char left[96];
        if (o->short_name)
            snprintf(left, sizeof left, "-%c, --%s%s%s", o->short_name, o->long_name,
                     o->metavar ? " " : "", o->metavar ? o->metavar : "");
        else
            snprintf(left, sizeof left, "    --%s%s%s", o->long_name, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
        printf("  %-34s %s", left, o->help ? o->help : "");
        if (o->default_text) printf(" [default: %s]", o->default_text);
        printf("\n");
    }
    printf("  %-34s %s\n", "-h, --help", "Print help");
}

static int find_long(const mxl_cli_cmd *cmd, const char *name, size_t len) {
    for (int i = 0; cmd->opts && cmd->opts[i].long_name; i++)
        if (strlen(cmd->opts[i].long_name) == len && strncmp(cmd->opts[i].long_name, name, len) == 0)
            return i;
    return -1;
}

static int find_short(const mxl_cli_cmd *cmd, char c) {
    for (int i = 0; cmd->opts && cmd->opts[i].long_name; i++)
        if (cmd->opts[i].short_name == c) return i;
    return -1;
}

static int add_value(const mxl_cli_cmd *cmd, mxl_cli_args *out, int i, const char *v) {
    if (out->count[i] >= MXL_CLI_MAX_VALUES)
        return mxl_cli_usage_error(cmd, "--%s given too many times", cmd->opts[i].long_name);
    out->values[i][out->count[i]++] = v;
    return 0;
}

int mxl_cli_parse(const mxl_cli_cmd *cmd, int argc, char **argv, mxl_cli_args *out) {
    memset(out, 0, sizeof *out);
    out->cmd = cmd;
    out->n_opts = n_opts_of(cmd);
    if (out->n_opts > MXL_CLI_MAX_OPTS) return mxl_cli_usage_error(cmd, "internal: too many options");
    int only_pos = 0;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k];
        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (!only_pos && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 || strcmp(a, "--usage") == 0)) {
            mxl_cli_print_help(cmd);
            return 1;
        }
        if (!only_pos && a[0] == '-' && a[1] == '-' && a[2]) {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            int i = find_long(cmd, name, len);
            if (i < 0) return mxl_cli_usage_error(cmd, "unknown flag '--%.*s' for 'mlxcel %s'", (int)len, name, cmd->name);
            const mxl_cli_opt *o = &cmd->opts[i];
            if (!o->metavar) {
                if (eq) return mxl_cli_usage_error(cmd, "flag '--%s' takes no value", o->long_name);
                out->count[i]++;
                continue;
            }
            const char *v = eq ? eq + 1 : NULL;
            if (!v) {
                if (k + 1 >= argc) return mxl_cli_usage_error(cmd, "flag '--%s' needs a value <%s>", o->long_name, o->metavar);
                v = argv[++k];
            }
            int rc = add_value(cmd, out, i, v);
            if (rc) return rc;
            continue;
        }
        if (!only_pos && a[0] == '-' && a[1] && a[1] != '-' && !(a[1] >= '0' && a[1] <= '9')) {
            /* short flag(s): -q, -y, -m VALUE, -mVALUE, -qv */
            for (const char *c = a + 1; *c; c++) {
                int i = find_short(cmd, *c);
                if (i < 0) return mxl_cli_usage_error(cmd, "unknown flag '-%c' for 'mlxcel %s'", *c, cmd->name);
                const mxl_cli_opt *o = &cmd->opts[i];
                if (!o->metavar) {
                    out->count[i]++;
                    continue;
                }
                const char *v = c[1] ? c + 1 : NULL;
                if (!v) {
                    if (k + 1 >= argc) return mxl_cli_usage_error(cmd, "flag '-%c' needs a value <%s>", *c, o->metavar);
                    v = argv[++k];
                }
                int rc = add_value(cmd, out, i, v);
                if (rc) return rc;
                break;
            }
            continue;
        }
        if (out->n_pos >= cmd->max_pos || out->n_pos >= MXL_CLI_MAX_POS)
            return mxl_cli_usage_error(cmd, "unexpected argument '%s'", a);
        out->pos[out->n_pos++] = a;
    }
    if (out->n_pos < cmd->min_pos)
        return mxl_cli_usage_error(cmd, "missing argument %s", cmd->pos_help ? cmd->pos_help : "");
    return 0;
}

static int index_of(const mxl_cli_args *a, const char *long_name) {
    for (int i = 0; i < a->n_opts; i++)
        if (strcmp(a->cmd->opts[i].long_name, long_name) == 0) return i;
    return -1;
}

bool mxl_cli_has(const mxl_cli_args *a, const char *long_name) {
    int i = index_of(a, long_name);
    return i >= 0 && a->count[i] > 0;
}

const char *mxl_cli_get(const mxl_cli_args *a, const char *long_name) {
    int i = index_of(a, long_name);
    if (i < 0 || a->count[i] == 0 || !a->cmd->opts[i].metavar) return NULL;
    return a->values[i][a->count[i] - 1];
}

int mxl_cli_count(const mxl_cli_args *a, const char *long_name) {
    int i = index_of(a, long_name);
    return i < 0 ? 0 : a->count[i] < MXL_CLI_MAX_VALUES ? a->count[i] : MXL_CLI_MAX_VALUES;
}

const char *mxl_cli_get_nth(const mxl_cli_args *a, const char *long_name, int n) {
    int i = index_of(a, long_name);
    if (i < 0 || !a->cmd->opts[i].metavar || n < 0 || n >= mxl_cli_count(a, long_name)) return NULL;
    return a->values[i][n];
}

int mxl_cli_get_int(const mxl_cli_args *a, const char *long_name, int64_t dflt, int64_t min,
                    int64_t max, int64_t *out) {
    const char *v = mxl_cli_get(a, long_name);
    if (!v) {
        *out = dflt;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        return mxl_cli_usage_error(a->cmd, "--%s expects an integer, got '%s'", long_name, v);
    if (x < min || x > max)
        return mxl_cli_usage_error(a->cmd, "--%s must be between %" PRId64 " and %" PRId64 ", got %lld", long_name, min, max, x);
    *out = x;
    return 0;
}
