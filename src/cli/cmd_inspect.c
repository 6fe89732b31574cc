/* cmd_inspect.c - `mlxcel inspect`: pre-load memory breakdown of a checkpoint (spec: "mlxcel
 * inspect"). Resolves -m like every model command, reads only metadata (config.json +
 * safetensors headers, or GGUF header), detects the family, and prints the estimate of
 * engine/memory_estimate.h as a text banner or one JSON object (--json). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/alloc.h"
#include "engine/memory_estimate.h"
#include "models/decoder.h"
#include "io/json_write.h"
#include "io/store.h"
#include "models/checkpoint.h"
#include "models/detect.h"

static const mxl_cli_opt k_opts[] = {
    {"model", 'm', "PATH_OR_REPO_ID", NULL, "Local model directory or .gguf file, owner/name repo id, or bare name (required)"},
    {"models-dir", 0, "PATH", "MLXCEL_MODELS_DIR / cache root", "Model-store root for repo-id resolution"},
    {"revision", 0, "REV", "main", "Repository revision for repo-id resolution"},
    {"max-tokens", 'n', "N", "8192", "Context length the KV cache is sized for"},
    {"batch", 0, "N", "1", "Concurrent sequences (server slots) the KV cache is sized for"},
    {"quant", 0, "default|fp16|int8|int4", "default", "Intended weight mode (shown; weights still come from metadata)"},
    {"json", 0, NULL, NULL, "Print one JSON object with raw byte fields"},
    {"kv-cache-mode", 0, "MODE", "fp16", "K/V cache mode shorthand (f32, fp16, q8_0, q4_0, q4_1, q5_0, q5_1, int8, turbo4, turbo3, fp16+turbo4, fp16+turbo3)"},
    {"cache-type-k", 0, "TYPE", "fp16", "K cache mode; overrides --kv-cache-mode"},
    {"cache-type-v", 0, "TYPE", "fp16", "V cache mode; overrides --kv-cache-mode"},
    {"turbo-boundary-v", 0, "COUNT", "MLXCEL_KV_BOUNDARY_V_LAYERS / 2", "Boundary V layers kept at high precision (turbo modes)"},
    {NULL, 0, NULL, NULL, NULL},
};

static const mxl_cli_cmd k_cmd = {
    "inspect", "mlxcel inspect -m <PATH_OR_REPO_ID> [OPTIONS]",
    "Print the memory a model needs (weights, KV cache, runtime headroom) against the available\n"
    "memory, without loading it.",
    k_opts, 0, 0, NULL,
};

static void human(uint64_t b, char *out, size_t cap) {
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024.0 && i < 4) {
        v /= 1024.0;
        i++;
    }
    if (i == 0) snprintf(out, cap, "%llu B", (unsigned long long)b);
    else snprintf(out, cap, "%.2f %s", v, u[i]);
}

static json_t *json_int_or_null(int64_t v) { return v >= 0 ? json_integer(v) : json_null(); }
static json_t *json_real_or_null(double v) { return isnan(v) ? json_null() : json_real(v); }

typedef struct inspect_opts {
    const char *model_arg;
    int64_t max_tokens, batch, turbo_boundary_v;
    bool has_turbo_boundary;
    const char *quant;
    const char *k_name, *v_name;
} inspect_opts;

static json_t *config_json(const mxl_checkpoint *ck) {
    const mxl_model_config *c = &ck->config;
    json_t *o = json_object();
    json_object_set_new(o, "num_hidden_layers", json_int_or_null(c->num_hidden_layers));
    json_object_set_new(o, "hidden_size", json_int_or_null(c->hidden_size));
    json_object_set_new(o, "intermediate_size", json_int_or_null(c->intermediate_size));
    json_object_set_new(o, "num_attention_heads", json_int_or_null(c->num_attention_heads));
    json_object_set_new(o, "num_key_value_heads", json_int_or_null(c->num_key_value_heads));
    json_object_set_new(o, "head_dim", json_int_or_null(c->head_dim));
    json_object_set_new(o, "vocab_size", json_int_or_null(c->vocab_size));
    json_object_set_new(o, "max_position_embeddings", json_int_or_null(c->max_position_embeddings));
    json_object_set_new(o, "sliding_window", json_int_or_null(c->sliding_window));
    json_object_set_new(o, "rope_theta", json_real_or_null(c->rope_theta));
    json_object_set_new(o, "num_experts", json_int_or_null(c->num_experts));
    json_t *q = json_object();
    json_object_set_new(q, "mode", json_string(mxl_quant_mode_name(c->quant.mode)));
    json_object_set_new(q, "method", c->quant.method[0] ? json_string(c->quant.method) : json_null());
    json_object_set_new(q, "bits", c->quant.bits >= 0 ? json_integer(c->quant.bits) : json_null());
    json_object_set_new(q, "group_size", c->quant.group_size >= 0 ? json_integer(c->quant.group_size) : json_null());
    json_object_set_new(o, "quantization", q);
    return o;
}

/* Whether V is TurboQuant (its boundary layers count). */
static bool turbo_v(const mxl_mem_inputs *in) { return in->kv_v == MXL_KV_TURBO4 || in->kv_v == MXL_KV_TURBO3; }

static int print_json(const inspect_opts *io, const mxl_resolved *res, const mxl_checkpoint *ck,
                      const mxl_detection *det, const mxl_mem_inputs *in, const mxl_mem_estimate *est) {
    json_t *o = json_object();
    json_object_set_new(o, "mlxcel_version", json_string(MXL_VERSION));
    json_object_set_new(o, "model", json_string(io->model_arg));
    json_object_set_new(o, "path", json_string(ck->path));
    json_object_set_new(o, "repo_id", res->repo_id[0] ? json_string(res->repo_id) : json_null());
    json_object_set_new(o, "source", json_string(mxl_model_source_name(res->source)));
    json_object_set_new(o, "format", json_string(mxl_checkpoint_format_name(ck->format)));
    json_object_set_new(o, "model_type", ck->config.model_type[0] ? json_string(ck->config.model_type) : json_null());
    json_object_set_new(o, "family", det->family ? json_string(det->family->id) : json_null());
    json_object_set_new(o, "task", det->family ? json_string(mxl_task_name(det->task)) : json_null());
    json_t *inputs = json_object();
    json_object_set_new(inputs, "max_tokens", json_integer(io->max_tokens));
    json_object_set_new(inputs, "batch", json_integer(io->batch));
    json_object_set_new(inputs, "quant", json_string(io->quant));
    json_object_set_new(inputs, "cache_type_k", json_string(mxl_kv_type_name(in->kv_k)));
    json_object_set_new(inputs, "cache_type_v", json_string(mxl_kv_type_name(in->kv_v)));
    json_object_set_new(inputs, "turbo_boundary_v", turbo_v(in) ? json_integer(in->v_edge) : json_null());
    json_object_set_new(o, "inputs", inputs);
    json_object_set_new(o, "config", config_json(ck));
    json_object_set_new(o, "n_tensors", json_integer((json_int_t)ck->n_tensors));
    json_object_set_new(o, "weights_bytes", json_integer((json_int_t)est->weights_bytes));
    json_object_set_new(o, "weights_source", json_string(ck->format == MXL_CHECKPOINT_GGUF ? "gguf_tensor_infos" : "safetensors_headers"));
    json_object_set_new(o, "kv_bytes_per_token", json_integer((json_int_t)est->kv_bytes_per_token));
    json_object_set_new(o, "kv_bytes_total", json_integer((json_int_t)est->kv_bytes_total));
    json_t *kd = json_object();
    if (est->has_kv) {
        json_object_set_new(kd, "cache_type_k", json_string(mxl_kv_type_name(in->kv_k)));
        json_object_set_new(kd, "cache_type_v", json_string(mxl_kv_type_name(in->kv_v)));
        json_object_set_new(kd, "n_layers", json_integer(est->n_layers));
        json_object_set_new(kd, "n_full_attention_layers", json_integer(est->n_full_layers));
        json_object_set_new(kd, "n_sliding_window_layers", json_integer(est->n_sliding_layers));
        json_object_set_new(kd, "sliding_window", est->n_sliding_layers ? json_integer(est->sliding_window) : json_null());
        json_object_set_new(kd, "n_kv_heads", json_integer(est->n_kv_heads));
        json_object_set_new(kd, "head_dim", json_integer(est->head_dim));
        json_object_set_new(kd, "latent", json_boolean(est->latent)); /* multi-head latent attention: one row, K only */
    } else {
        json_object_set_new(kd, "kind", json_string("none"));
        json_object_set_new(kd, "reason", json_string(est->n_state_layers ? "no attention layers: no KV cache" : "encoder model: no KV cache"));
    }
    json_object_set_new(o, "kv_detail", kd);
    /* recurrent layers: a fixed state per sequence (models/recurrent.h) */
    json_object_set_new(o, "state_detail", json_pack("{s:I, s:I, s:I}", "n_layers", (json_int_t)est->n_state_layers, "bytes_per_sequence",
                                                     (json_int_t)est->state_bytes_per_seq, "bytes_total", (json_int_t)est->state_bytes_total));
    json_object_set_new(o, "per_slot_overhead_bytes", json_null());
    json_object_set_new(o, "activation_bytes", json_null());
    json_object_set_new(o, "backend_inflight_bytes", json_integer(0));
    json_object_set_new(o, "headroom_bytes", json_integer((json_int_t)est->headroom_bytes));
    json_object_set_new(o, "headroom_factor", json_real(in->headroom_factor));
    json_object_set_new(o, "budget_bytes", est->budget_bytes ? json_integer((json_int_t)est->budget_bytes) : json_null());
    json_object_set_new(o, "budget_source", json_string(in->budget_from_limit ? "MLXCEL_MEMORY_LIMIT" : est->budget_bytes ? "MemAvailable" : "unknown"));
    json_object_set_new(o, "total_bytes", json_integer((json_int_t)est->total_bytes));
    json_object_set_new(o, "fits", est->fits_known ? json_boolean(est->fits) : json_null());
    char *s = mxl_json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(o);
    if (!s) return mxl_cli_fail("out of memory");
    puts(s);
    mxl_free(s);
    return 0;
}

static void print_text(const inspect_opts *io, const mxl_checkpoint *ck, const mxl_detection *det,
                       const mxl_mem_inputs *in, const mxl_mem_estimate *est) {
    const mxl_model_config *c = &ck->config;
    char a[32], b[32], d[32];
    printf("Model:        %s\n", io->model_arg);
    printf("Path:         %s (%s)\n", ck->path, mxl_checkpoint_format_name(ck->format));
    printf("Architecture: %s", c->model_type[0] ? c->model_type : "?");
    if (det->family) printf(" -> %s (%s)", det->family->display_name, mxl_task_name(det->task));
    printf("\n");
    printf("Shape:        %lld layers, hidden %lld, %lld heads / %lld KV heads, head_dim %lld, vocab %lld\n",
           (long long)c->num_hidden_layers, (long long)c->hidden_size, (long long)c->num_attention_heads,
           (long long)c->num_key_value_heads, (long long)c->head_dim, (long long)c->vocab_size);
    if (c->num_experts > 0) /* every expert's weights are counted below; a token reads only its top k */
        printf("Experts:      %lld per MoE layer, %lld used per token\n", (long long)c->num_experts,
               (long long)c->num_experts_per_tok);
    human(est->weights_bytes, a, sizeof a);
    printf("Weights:      %s in %llu tensors (%s%s%s)\n", a, (unsigned long long)ck->n_tensors,
           mxl_quant_mode_name(c->quant.mode), c->quant.method[0] ? " " : "", c->quant.method);
    if (est->has_kv) {
        human(est->kv_bytes_per_token, a, sizeof a);
        human(est->kv_bytes_total, b, sizeof b);
        if (est->latent) /* one row read as K and V: the V type does not apply */
            printf("KV cache:     %s per token (latent rows of %lld, %s); %lld tokens x %lld = %s", a, (long long)est->head_dim,
                   mxl_kv_type_name(in->kv_k), (long long)io->max_tokens, (long long)io->batch, b);
        else
            printf("KV cache:     %s per token (K %s, V %s); %lld tokens x %lld = %s", a,
                   mxl_kv_type_name(in->kv_k), mxl_kv_type_name(in->kv_v), (long long)io->max_tokens,
                   (long long)io->batch, b);
        if (est->n_sliding_layers)
            printf(" (%lld of %lld layers keep a %lld-token window)", (long long)est->n_sliding_layers,
                   (long long)est->n_layers, (long long)est->sliding_window);
        if (!est->latent && turbo_v(in) && in->v_edge > 0) printf(" (V of the first and last %lld layers fp16)", (long long)in->v_edge);
        printf("\n");
    } else {
        printf("KV cache:     none (%s)\n", est->n_state_layers ? "no attention layers" : "encoder model");
    }
    if (est->n_state_layers) {
        human(est->state_bytes_per_seq, a, sizeof a);
        human(est->state_bytes_total, b, sizeof b);
        printf("State:        %s per sequence in %lld recurrent layers (f32); x %lld = %s\n", a, (long long)est->n_state_layers,
               (long long)io->batch, b);
    }
    human(est->headroom_bytes, a, sizeof a);
    printf("Headroom:     %s (factor %.2f)\n", a, in->headroom_factor);
    human(est->total_bytes, a, sizeof a);
    printf("Total:        %s\n", a);
    if (est->budget_bytes) {
        human(est->budget_bytes, d, sizeof d);
        printf("Available:    %s (%s)\n", d, in->budget_from_limit ? "MLXCEL_MEMORY_LIMIT" : "MemAvailable");
        printf("Fits:         %s\n", est->fits ? "yes" : "no");
    } else {
        printf("Available:    unknown\nFits:         unknown\n");
    }
}

int mxl_cmd_inspect(int argc, char **argv) {
    mxl_cli_args args;
    int rc = mxl_cli_parse(&k_cmd, argc, argv, &args);
    if (rc) return rc == 1 ? 0 : rc;
    inspect_opts io = {0};
    io.model_arg = mxl_cli_get(&args, "model");
    if (!io.model_arg) return mxl_cli_usage_error(&k_cmd, "missing required flag -m/--model");
    if (mxl_cli_get_int(&args, "max-tokens", 8192, 1, INT64_C(1) << 32, &io.max_tokens)) return 2;
    if (mxl_cli_get_int(&args, "batch", 1, 1, 1 << 20, &io.batch)) return 2;
    io.has_turbo_boundary = mxl_cli_has(&args, "turbo-boundary-v");
    if (mxl_cli_get_int(&args, "turbo-boundary-v", 0, 0, 1 << 20, &io.turbo_boundary_v)) return 2;
    io.quant = mxl_cli_get(&args, "quant") ? mxl_cli_get(&args, "quant") : "default";
    if (strcmp(io.quant, "default") && strcmp(io.quant, "fp16") && strcmp(io.quant, "int8") && strcmp(io.quant, "int4"))
        return mxl_cli_usage_error(&k_cmd, "--quant must be default, fp16, int8 or int4, got '%s'", io.quant);

    mxl_mem_inputs in = {0};
    in.max_tokens = io.max_tokens;
    in.batch = io.batch;
    mxl_error err;
    const mxl_kv_flags kf = {mxl_cli_get(&args, "kv-cache-mode"), mxl_cli_get(&args, "cache-type-k"), mxl_cli_get(&args, "cache-type-v"),
                             io.has_turbo_boundary ? io.turbo_boundary_v : -1, 0, 0};
    if (mxl_kv_flags_resolve(&kf, &in.kv_k, &in.kv_v, &in.v_edge, &err)) return mxl_cli_usage_error(&k_cmd, "%s", err.msg);
    char warning[256];
    in.headroom_factor = mxl_mem_headroom_factor_from_env(warning, sizeof warning);
    if (warning[0]) fprintf(stderr, "warning: %s\n", warning);
    if (mxl_mem_budget(&in.budget_bytes, &in.budget_from_limit, &err)) return mxl_cli_fail("%s", err.msg);

    mxl_resolved res;
    if (mxl_store_resolve(io.model_arg, mxl_cli_get(&args, "models-dir"), mxl_cli_get(&args, "revision"), &res, &err))
        return mxl_cli_fail("%s", err.msg);
    mxl_checkpoint *ck = NULL;
    if (mxl_checkpoint_open(res.path, &ck, &err)) return mxl_cli_fail("%s", err.msg);
    mxl_detection det;
    if (mxl_checkpoint_detect(ck, &det, &err)) {
        mxl_checkpoint_close(ck);
        return mxl_cli_fail("%s", err.msg);
    }
    bool is_encoder = det.task != MXL_TASK_GENERATE;
    /* a decoder the build runs: its layer kinds and state sizes too (else the config alone) */
    mxl_decoder dec;
    bool have_dec = !is_encoder && mxl_decoder_read_hparams(ck, &dec, NULL) == MXL_OK;
    in.dec = have_dec ? &dec.hp : NULL;
    mxl_mem_estimate est;
    mxl_status st = mxl_mem_estimate_compute(&ck->config, is_encoder, ck->weights_bytes, &in, &est, &err);
    if (have_dec) mxl_decoder_free(&dec);
    if (st) {
        mxl_checkpoint_close(ck);
        return mxl_cli_fail("%s: %s", res.path, err.msg);
    }
    if (mxl_cli_has(&args, "json"))
        rc = print_json(&io, &res, ck, &det, &in, &est);
    else
        print_text(&io, ck, &det, &in, &est);
    mxl_checkpoint_close(ck);
    return rc;
}
