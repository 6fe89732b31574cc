/* cmd_tokenize.c - `mlxcel tokenize`, a developer command:
 *   mlxcel tokenize -m <model dir | tokenizer.json | .gguf | repo id> [--special] [--json]
 *                   [--file F] [--decode] [TEXT | -]
 * Prints the ids of TEXT (space-separated, or a JSON array with --json). With --file, F (or "-"
 * for stdin) holds one JSON string per line and each line prints {"ids": [...], "pieces": [...]}
 * (pieces are the vocabulary strings). --special parses special tokens written in the text
 * (otherwise they are ordinary text). --decode reverses: TEXT is ids ("1 2 3" or "[1,2,3]"), or
 * with --file one JSON array of ids per line, printing {"text": ...} per line. No special tokens
 * are added (no BOS). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/alloc.h"
#include "io/json_write.h"
#include "io/store.h"
#include "tokenizer/tokenizer.h"

static const mxl_cli_opt k_opts[] = {
    {"model", 'm', "PATH_OR_REPO_ID", NULL,
     "Model directory, tokenizer.json, .gguf file, or owner/name repo id (required)"},
    {"models-dir", 0, "PATH", "MLXCEL_MODELS_DIR / cache root", "Model-store root for repo-id resolution"},
    {"special", 0, NULL, NULL, "Parse special tokens written in the text (chat-prompt behaviour)"},
    {"json", 0, NULL, NULL, "Print ids as a JSON array"},
    {"file", 0, "F", NULL, "Read JSON lines (one JSON string per line; '-' for stdin)"},
    {"decode", 0, NULL, NULL, "Decode ids back to text"},
    {NULL, 0, NULL, NULL, NULL},
};

static const mxl_cli_cmd k_cmd = {
    "tokenize", "mlxcel tokenize -m <MODEL> [--special] [--json] [--file F] [--decode] [TEXT | -]",
    "Print the token ids of TEXT (or of stdin with '-'), or with --decode the text of ids.",
    k_opts, 0, 1, "[TEXT | -]",
};

static char *read_all(FILE *f, size_t *len) {
    size_t cap = 65536, n = 0;
    char *p = mxl_malloc(cap);
    if (!p) return NULL;
    for (;;) {
        if (n + 1 >= cap) {
            char *q = mxl_realloc(p, cap * 2);
            if (!q) {
                mxl_free(p);
                return NULL;
            }
            p = q;
            cap *= 2;
        }
        size_t r = fread(p + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    p[n] = 0;
    *len = n;
    return p;
}

static int load(const char *arg, const char *models_dir, mxl_tokenizer **tok) {
    char path[MXL_STORE_PATH_MAX];
    mxl_error err = {0};
    struct stat st;
    if (stat(arg, &st) == 0) {
        snprintf(path, sizeof(path), "%s", arg);
    } else {
        mxl_resolved r;
        if (mxl_store_resolve(arg, models_dir, NULL, &r, &err) != MXL_OK) return mxl_cli_fail("%s", err.msg);
        snprintf(path, sizeof(path), "%s", r.path);
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        char gg[MXL_STORE_PATH_MAX];
        char tj[MXL_STORE_PATH_MAX + 32];
        snprintf(tj, sizeof(tj), "%s/tokenizer.json", path);
        struct stat s2;
        if (stat(tj, &s2) != 0) {
            if (mxl_store_gguf_in_dir(path, gg, sizeof(gg), &err) != MXL_OK) return mxl_cli_fail("%s", err.msg);
            if (gg[0]) snprintf(path, sizeof(path), "%s", gg);
        }
    }
    if (mxl_tokenizer_load(path, tok, &err) != MXL_OK) return mxl_cli_fail("%s", err.msg);
    return 0;
}

static void print_ids(const mxl_token_ids *ids, bool json) {
    if (json) fputc('[', stdout);
    for (size_t i = 0; i < ids->n; i++) printf(i ? (json ? ", %d" : " %d") : "%d", ids->ids[i]);
    fputs(json ? "]\n" : "\n", stdout);
}

/* Parses "1 2 3", "1,2,3" or "[1, 2, 3]" into ids. */
static int parse_ids(const char *s, mxl_token_ids *ids) {
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '[' || *p == ']' || *p == '\n' || *p == '\t' || *p == '\r') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) return mxl_cli_fail("bad token id near '%.20s'", p);
        int32_t id = (int32_t)v;
        int32_t *q = mxl_realloc(ids->ids, (ids->n + 1) * sizeof(int32_t));
        if (!q) return mxl_cli_fail("out of memory");
        ids->ids = q;
        ids->ids[ids->n++] = id;
        ids->cap = ids->n;
        p = end;
    }
    return 0;
}

static int run_file(const mxl_tokenizer *tok, const char *fname, bool decode, unsigned flags) {
    FILE *f = strcmp(fname, "-") == 0 ? stdin : fopen(fname, "rb");
    if (!f) return mxl_cli_fail("%s: cannot open", fname);
    size_t len;
    char *all = read_all(f, &len);
    if (f != stdin) fclose(f);
    if (!all) return mxl_cli_fail("%s: out of memory", fname);
    int rc = 0;
    size_t lineno = 0;
    for (char *line = all; line && *line && rc == 0;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        lineno++;
        if (line[strspn(line, " \t\r")] != 0) {
            json_error_t je;
            json_t *v = json_loads(line, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
            mxl_error err = {0};
            if (!decode) {
                if (!json_is_string(v)) {
                    rc = mxl_cli_fail("%s:%zu: expected a JSON string", fname, lineno);
                } else {
                    mxl_token_ids ids = {0};
                    if (mxl_tokenizer_encode(tok, json_string_value(v), json_string_length(v), flags, &ids, &err) != MXL_OK) {
                        rc = mxl_cli_fail("%s", err.msg);
                    } else {
                        json_t *o = json_object(), *ja = json_array(), *jp = json_array();
                        for (size_t i = 0; i < ids.n; i++) {
                            size_t tl;
                            const char *ts = mxl_tokenizer_token(tok, ids.ids[i], &tl);
                            json_array_append_new(ja, json_integer(ids.ids[i]));
                            json_array_append_new(jp, json_stringn_nocheck(ts ? ts : "", ts ? tl : 0));
                        }
                        json_object_set_new(o, "ids", ja);
                        json_object_set_new(o, "pieces", jp);
                        char *out = mxl_json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
                        if (out) puts(out);
                        mxl_free(out);
                        json_decref(o);
                    }
                    mxl_token_ids_free(&ids);
                }
            } else {
                if (!json_is_array(v)) {
                    rc = mxl_cli_fail("%s:%zu: expected a JSON array of ids", fname, lineno);
                } else {
                    mxl_token_ids ids = {0};
                    for (size_t i = 0; i < json_array_size(v) && rc == 0; i++) {
                        json_t *e = json_array_get(v, i);
                        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > INT32_MAX)
                            rc = mxl_cli_fail("%s:%zu: ids must be non-negative integers", fname, lineno);
                        else {
                            int32_t *q = mxl_realloc(ids.ids, (ids.n + 1) * sizeof(int32_t));
                            if (!q) {
                                rc = mxl_cli_fail("out of memory");
                                break;
                            }
                            ids.ids = q;
                            ids.ids[ids.n++] = (int32_t)json_integer_value(e);
                            ids.cap = ids.n;
                        }
                    }
                    char *text = NULL;
                    size_t tl = 0;
                    if (rc == 0 && mxl_tokenizer_decode(tok, ids.ids, ids.n, false, &text, &tl, &err) != MXL_OK)
                        rc = mxl_cli_fail("%s", err.msg);
                    if (rc == 0) {
                        json_t *o = json_pack("{s:s%}", "text", text, tl);
                        char *out = o ? mxl_json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
                        if (out) puts(out);
                        else rc = mxl_cli_fail("decoded text is not valid UTF-8");
                        mxl_free(out);
                        json_decref(o);
                    }
                    mxl_free(text);
                    mxl_token_ids_free(&ids);
                }
            }
            json_decref(v);
        }
        line = nl ? nl + 1 : NULL;
    }
    mxl_free(all);
    return rc;
}

int mxl_cmd_tokenize(int argc, char **argv) {
    mxl_cli_args a;
    int rc = mxl_cli_parse(&k_cmd, argc, argv, &a);
    if (rc == 1) return 0;
    if (rc) return rc;
    const char *model = mxl_cli_get(&a, "model");
    if (!model) return mxl_cli_usage_error(&k_cmd, "-m/--model is required");
    const char *file = mxl_cli_get(&a, "file");
    bool decode = mxl_cli_has(&a, "decode"), json = mxl_cli_has(&a, "json");
    if (file && a.n_pos) return mxl_cli_usage_error(&k_cmd, "give either --file or TEXT, not both");
    if (!file && !a.n_pos) return mxl_cli_usage_error(&k_cmd, "missing TEXT (use '-' to read stdin)");
    unsigned flags = mxl_cli_has(&a, "special") ? MXL_TOK_PARSE_SPECIAL : 0;
    mxl_tokenizer *tok = NULL;
    if ((rc = load(model, mxl_cli_get(&a, "models-dir"), &tok)) != 0) return rc;
    if (file) {
        rc = run_file(tok, file, decode, flags);
        mxl_tokenizer_destroy(tok);
        return rc;
    }
    size_t len;
    char *text;
    if (strcmp(a.pos[0], "-") == 0) {
        text = read_all(stdin, &len);
    } else {
        len = strlen(a.pos[0]);
        text = mxl_malloc(len + 1);
        if (text) memcpy(text, a.pos[0], len + 1);
    }
    if (!text) {
        mxl_tokenizer_destroy(tok);
        return mxl_cli_fail("out of memory");
    }
    mxl_error err = {0};
    mxl_token_ids ids = {0};
    if (decode) {
        rc = parse_ids(text, &ids);
        char *out = NULL;
        size_t ol = 0;
        if (rc == 0 && mxl_tokenizer_decode(tok, ids.ids, ids.n, false, &out, &ol, &err) != MXL_OK)
            rc = mxl_cli_fail("%s", err.msg);
        if (rc == 0) {
            if (json) {
                json_t *o = json_stringn(out, ol);
                char *s = o ? mxl_json_dumps(o, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
                if (s) puts(s);
                else rc = mxl_cli_fail("decoded text is not valid UTF-8");
                mxl_free(s);
                json_decref(o);
            } else {
                fwrite(out, 1, ol, stdout);
                fputc('\n', stdout);
            }
        }
        mxl_free(out);
    } else {
        if (mxl_tokenizer_encode(tok, text, len, flags, &ids, &err) != MXL_OK) rc = mxl_cli_fail("%s", err.msg);
        else print_ids(&ids, json);
    }
    mxl_token_ids_free(&ids);
    mxl_free(text);
    mxl_tokenizer_destroy(tok);
    return rc;
}
