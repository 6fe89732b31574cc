/* main.c - the `mlxcel` binary: global flags and dispatch to subcommands.
 *
 * Subcommands follow ../shared/spec/cli-reference.ko.md. Those not built yet are listed with
 * their spec summary and answer plainly that they are not available in this build (exit 1). */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

typedef struct subcommand {
    const char *name;
    const char *alias; /* NULL if none */
    int (*fn)(int argc, char **argv); /* NULL: in the spec, not built yet */
    const char *summary;
} subcommand;

static const subcommand k_subcommands[] = {
    {"run", NULL, mxl_cmd_run, "Chat with a model (an interactive REPL), or one reply with -p"},
    {"generate", "gen", mxl_cmd_generate, "Generate text from a prompt (a chat REPL without -p)"},
    {"generate-image", NULL, NULL, "Render images with an image-generation model"},
    {"embed", NULL, mxl_cmd_embed, "Compute embedding vectors"},
    {"rerank", NULL, mxl_cmd_rerank, "Score query-document pairs with a reranker"},
    {"detect", NULL, NULL, "Detect objects in an image"},
    {"predict", NULL, NULL, "Dense prediction (depth, segmentation, keypoints)"},
    {"tag", NULL, NULL, "Token classification"},
    {"extract", NULL, NULL, "Span extraction"},
    {"inspect", NULL, mxl_cmd_inspect, "Estimate memory for a model before loading it"},
    {"serve", NULL, mxl_cmd_serve, "Start the OpenAI / llama-server compatible HTTP server"},
    {"list", "ls", mxl_cmd_list, "List models in the local model store"},
    {"arch", "supported", mxl_cmd_arch, "List supported model architectures"},
    {"download", NULL, mxl_cmd_download, "Download a Hugging Face repository into the model store"},
    {"rm", NULL, mxl_cmd_rm, "Remove a model from the local model store"},
    {"tune", NULL, mxl_cmd_tune, "Profile the CPU knobs and cache the fastest stable choices (MLXCEL_AUTOTUNE)"},
    {"split-mtp", NULL, NULL, "Split the MTP drafter out of a GLM-4.7-Flash checkpoint"},
    {"prepare-external-ple", NULL, NULL, "Prepare qwen4_exp external PLE storage"},
    {"prepare-expert-stream", NULL, NULL, "Prepare qwen4_exp expert streaming storage"},
    /* developer commands beyond the spec */
    {"tokenize", NULL, mxl_cmd_tokenize, "Tokenize text (or --decode ids) with a model's tokenizer"},
    {"chat-template", NULL, mxl_cmd_chat_template, "Render a chat template for a conversation"},
    {"bench", NULL, mxl_cmd_bench, "Benchmark kernels (mlxcel bench kernels)"},
    {"convert", NULL, mxl_cmd_convert, "Write a checkpoint as a Hugging Face / MLX directory (optionally quantized)"},
};
#define N_SUBCOMMANDS (sizeof k_subcommands / sizeof k_subcommands[0])

static void print_help(void) {
    printf("mlxcel %s - run language, embedding and reranking models locally\n\n", MXL_VERSION);
    printf("Usage: mlxcel <COMMAND> [OPTIONS]\n\nCommands:\n");
    for (size_t i = 0; i < N_SUBCOMMANDS; i++) {
        const subcommand *s = &k_subcommands[i];
        char name[48];
        snprintf(name, sizeof name, "%s%s%s", s->name, s->alias ? ", " : "", s->alias ? s->alias : "");
        printf("  %-24s %s%s\n", name, s->summary, s->fn ? "" : " (not available in this build)");
    }
    printf("\nOptions:\n  -h, --help                Print help\n  -V, --version             Print version\n");
    printf("\nRun 'mlxcel <COMMAND> --help' for the options of a command.\n");
}

int main(int argc, char **argv) {
    /* installed or linked as `mlxcel-server`: llama-server's command line, all flags to serve */
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    if (strcmp(base, "mlxcel-server") == 0) {
        if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
            printf("mlxcel-server %s\n", MXL_VERSION);
            return 0;
        }
        if (argc >= 2 && strcmp(argv[1], "download") == 0) return mxl_cmd_download(argc - 1, argv + 1);
        return mxl_cmd_serve(argc, argv);
    }
    if (argc < 2) {
        print_help();
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        print_help();
        return 0;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("mlxcel %s\n", MXL_VERSION);
        return 0;
    }
    for (size_t i = 0; i < N_SUBCOMMANDS; i++) {
        const subcommand *s = &k_subcommands[i];
        if (strcmp(cmd, s->name) != 0 && !(s->alias && strcmp(cmd, s->alias) == 0)) continue;
        if (!s->fn) {
            fprintf(stderr, "error: 'mlxcel %s' is not available in this build yet (%s)\n", s->name, s->summary);
            return 1;
        }
        return s->fn(argc - 1, argv + 1);
    }
    if (cmd[0] == '-')
        fprintf(stderr, "error: unknown flag '%s' (see 'mlxcel --help')\n", cmd);
    else
        fprintf(stderr, "error: unknown command '%s' (see 'mlxcel --help')\n", cmd);
    return 2;
}
