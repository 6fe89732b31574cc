/* cmd_convert.c - `mlxcel convert -m <HF dir | .gguf | repo id> -o DIR [--dtype f32|f16|bf16]
 * [--q-bits 2..8 --q-group-size 32|64|128]`: writes a Hugging Face / MLX directory
 * (models/convert.h), like mlx_lm.convert. Beyond the spec: the issue that asked for it names
 * these flags; -q alone is mlx-lm's spelling for 4-bit. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "io/store.h"
#include "models/convert.h"

static const mxl_cli_opt k_opts[] = {
    {"model", 'm', "PATH_OR_REPO_ID", NULL, "Checkpoint to convert: a Hugging Face / MLX directory, a .gguf file or a store repo id"},
    {"output", 'o', "DIR", NULL, "Directory to write (created; must not hold a checkpoint already)"},
    {"dtype", 0, "TYPE", "source dtype; f16 for GGUF", "Float type of the written tensors (and of MLX scales): f32, f16, bf16"},
    {"quantize", 'q', NULL, NULL, "MLX affine quantization with --q-bits (default 4)"},
    {"q-bits", 0, "N", "4 with -q", "MLX quantization bits: 2, 3, 4, 5, 6 or 8"},
    {"q-group-size", 0, "N", "64", "MLX quantization group size: 32, 64 or 128"},
    {"models-dir", 0, "PATH", "MLXCEL_MODELS_DIR / cache root", "Store root used to resolve a repo id"},
    {NULL, 0, NULL, NULL, NULL},
};

static const mxl_cli_cmd k_cmd = {
    .name = "convert",
    .usage = "mlxcel convert -m <MODEL> -o <DIR> [OPTIONS]",
    .summary = "Write a checkpoint (Hugging Face / MLX safetensors directory or GGUF file) as a Hugging Face "
               "directory: config.json, model.safetensors, tokenizer and generation files; optionally "
               "MLX-quantized (like mlx_lm.convert). The unquantized output also loads in transformers.",
    .opts = k_opts,
    .min_pos = 0,
    .max_pos = 0,
    .pos_help = "",
};

int mxl_cmd_convert(int argc, char **argv) {
    mxl_cli_args a;
    int rc = mxl_cli_parse(&k_cmd, argc, argv, &a);
    if (rc == 1) return 0;
    if (rc) return rc;
    const char *model = mxl_cli_get(&a, "model"), *out = mxl_cli_get(&a, "output"), *dt = mxl_cli_get(&a, "dtype");
    if (!model) return mxl_cli_usage_error(&k_cmd, "-m <MODEL> is required");
    if (!out || !out[0]) return mxl_cli_usage_error(&k_cmd, "-o <DIR> is required");
    mxl_convert_opts o = {MXL_DTYPE_INVALID, 0, 64};
    if (dt) {
        if (!strcmp(dt, "f32") || !strcmp(dt, "float32")) o.dtype = MXL_DTYPE_F32;
        else if (!strcmp(dt, "f16") || !strcmp(dt, "float16")) o.dtype = MXL_DTYPE_F16;
        else if (!strcmp(dt, "bf16") || !strcmp(dt, "bfloat16")) o.dtype = MXL_DTYPE_BF16;
        else return mxl_cli_usage_error(&k_cmd, "--dtype must be f32, f16 or bf16, got '%s'", dt);
    }
    int64_t bits = 0, gs = 64;
    if (mxl_cli_get_int(&a, "q-bits", mxl_cli_has(&a, "quantize") ? 4 : 0, 2, 8, &bits)) return 2;
    if (mxl_cli_get_int(&a, "q-group-size", 64, 32, 128, &gs)) return 2;
    if (gs != 32 && gs != 64 && gs != 128) return mxl_cli_usage_error(&k_cmd, "--q-group-size must be 32, 64 or 128, got %lld", (long long)gs);
    if (bits == 7) return mxl_cli_usage_error(&k_cmd, "--q-bits 7 is not an MLX quantization (2, 3, 4, 5, 6, 8)");
    if (mxl_cli_has(&a, "q-group-size") && !bits) return mxl_cli_usage_error(&k_cmd, "--q-group-size needs --q-bits (or -q)");
    o.q_bits = (int)bits;
    o.q_group_size = (int)gs;
    mxl_error err = {0};
    mxl_resolved res;
    if (mxl_store_resolve(model, mxl_cli_get(&a, "models-dir"), NULL, &res, &err)) return mxl_cli_fail("%s", err.msg);
    if (mxl_convert(res.path, out, &o, &err)) return mxl_cli_fail("%s", err.msg);
    printf("Converted %s -> %s%s\n", res.path, out, o.q_bits ? " (MLX-quantized)" : "");
    return 0;
}
