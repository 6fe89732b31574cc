/* cmd_generate.c - `mlxcel generate` (alias gen) and `mlxcel run`: one prompt through the engine's
 * generation path (engine/generate.h), text streamed to stdout, a summary line on stderr.
 * `run` differs in taking the model as a positional argument (default: the model
 * scripts/setup.sh installs); without -p both open the interactive chat REPL (cli/repl.h).
 * Flags of the spec that this build cannot honour yet are recognised and refused by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/hub_progress.h"
#include "cli/repl.h"
#include "core/threadpool.h"
#include "engine/generate.h"
#include "engine/memory_estimate.h"
#include "models/checkpoint.h"
#include "models/lora.h"
#include "models/vlm.h"
#include "io/store.h"

/* The bundled default model (scripts/models.lock "default"). */
#define MXL_DEFAULT_MODEL "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"

#define SAMPLING_OPTS                                                                                          \
    {"temp", 't', "FLOAT", "0.0", "Sampling temperature; 0 is greedy"},                                        \
    {"top-p", 0, "FLOAT", "1.0", "Nucleus sampling threshold; 1.0 disables"},                                  \
    {"top-k", 0, "K", "0", "Keep only the K most likely tokens; 0 disables"},                                  \
    {"min-p", 0, "FLOAT", "0.0", "Drop tokens below min_p * p(max); 0 disables"},                               \
    {"repetition-penalty", 0, "FLOAT", "1.0", "Penalty for tokens already present"},                           \
    {"repeat-last-n", 0, "N", "-1", "Window of the penalties; -1 whole history, 0 off"},                       \
    {"presence-penalty", 0, "FLOAT", "0.0", "Presence penalty"},                                               \
    {"frequency-penalty", 0, "FLOAT", "0.0", "Frequency penalty"},                                             \
    {"seed", 0, "N", "random", "Seed for reproducible sampling"},                                              \
    {"ignore-eos", 0, NULL, NULL, "Keep generating past end-of-sequence tokens"},                              \
    {"no-chat-template", 0, NULL, NULL, "Send the prompt as raw text (special tokens in it are parsed)"},      \
    {"profile", 0, NULL, NULL, "Print prompt/generated token counts and prefill/decode timings"},              \
    {"threads", 0, "N", "all cores", "CPU threads"},                                                           \
    {"image", 0, "PATH", NULL, "Image file for a vision-language model (repeatable; JPEG, PNG, WebP, GIF)"},   \
    /* spec flags not built yet: recognised, then refused */                                                   \
    {"audio", 0, "PATH", NULL, "Audio input (refused: no model family in this build takes audio yet)"},  \
    {"video", 0, "PATH", NULL, "Video input (refused: no model family in this build takes video yet)"},  \
    {"adapter", 0, "PATH", NULL, "LoRA adapter: a PEFT or mlx-lm directory, or a GGUF LoRA for a GGUF model"},  \
    {"draft-model", 0, "PATH_OR_REPO_ID", NULL, "Speculative decoding with this small model (same tokenizer) drafting"},  \
    {"draft-kind", 0, "KIND", "auto", "Draft kind: full-model (dflash and mtp need heads no family here ships)"},        \
    {"draft-block-size", 0, "N", "4", "Tokens the draft model proposes per round (1..64)"},                            \
    {"prompt-lookup", 0, NULL, NULL, "Speculative decoding with n-gram drafts from the context"},                      \
    {"prompt-lookup-ngram-max", 0, "N", "3", "Longest suffix n-gram matched against the context (max 16)"},            \
    {"prompt-lookup-ngram-min", 0, "N", "2", "Shortest suffix n-gram matched against the context"},                    \
    {"prompt-lookup-max-draft", 0, "N", "7", "Most tokens proposed per round (max 64)"},                              \
    {"prompt-lookup-no-adaptive", 0, NULL, NULL, "Propose the most every round (A/B measurement)"},                   \
    {"prompt-lookup-policy", 0, "POLICY", "auto", "auto, graded or gated: how proposals shrink and resume"},          \
    {"typical-p", 0, "FLOAT", "1.0", "Locally typical sampling; 1.0 disables"},                                \
    {"typical", 0, "FLOAT", NULL, "Alias of --typical-p"},                                                     \
    {"top-n-sigma", 0, "FLOAT", "0.0", "Keep logits within N standard deviations of the max; 0 disables"},     \
    {"top-nsigma", 0, "FLOAT", NULL, "Alias of --top-n-sigma"},                                                \
    {"p-less", 0, NULL, NULL, "Hyper-parameter-free p-less truncation after temperature"},                     \
    {"xtc-probability", 0, "FLOAT", "0.0", "XTC: chance of excluding the top choices; 0 disables"},            \
    {"xtc-threshold", 0, "FLOAT", "0.1", "XTC probability threshold"},                                         \
    {"dry-multiplier", 0, "FLOAT", "0.0", "DRY repetition penalty multiplier; 0 disables"},                    \
    {"dry-base", 0, "FLOAT", "1.75", "DRY penalty base"},                                                      \
    {"dry-allowed-length", 0, "N", "2", "Shortest repeat DRY leaves alone"},                                   \
    {"dry-penalty-last-n", 0, "N", "-1", "DRY look-back window; -1 whole history, 0 off"},                     \
    {"mirostat", 0, "N", "0", "Mirostat 1 or 2 (replaces the truncation chain); 0 off"},                      \
    {"mirostat-lr", 0, "FLOAT", "0.1", "Mirostat learning rate (eta)"},                                        \
    {"mirostat-ent", 0, "FLOAT", "5.0", "Mirostat target entropy (tau)"},                                      \
    {"dynatemp-range", 0, "FLOAT", "0.0", "Dynamic temperature range; 0 disables"},                            \
    {"dynatemp-exp", 0, "FLOAT", "1.0", "Dynamic temperature exponent"},                                       \
    {"logit-bias", 0, "TOKEN(+/-)BIAS", NULL, "Bias a token id, e.g. 15043+1 or 15043-inf (repeatable)"},       \
    {"stop", 0, "STRING", NULL, "Stop when this text appears; it is not printed (repeatable)"},                \
    {"estimate-memory", 0, NULL, NULL, "Memory preflight before generating: weights + KV + headroom vs the budget"},   \
    {"force", 0, NULL, NULL, "With --estimate-memory: warn instead of stopping when over budget"},              \
    {"no-memory-check", 0, NULL, NULL, "Alias of --force"},                                                    \
    {"show-reasoning", 0, NULL, NULL, "Also print the reasoning of thinking models (hidden by default)"},      \
    {"cache-type-k", 0, "TYPE", "fp16", "KV cache storage of keys: f32, fp16, q8_0, q4_0, q4_1, q5_0, q5_1, int8, turbo4, turbo3; overrides --kv-cache-mode"}, \
    {"cache-type-v", 0, "TYPE", "fp16", "KV cache storage of values: as keys, or fp16+turbo4 / fp16+turbo3 (TurboQuant values)"}, \
    {"kv-cache-mode", 0, "MODE", "fp16", "Both K and V at once: a type above, or fp16+turbo4 / fp16+turbo3 (keys fp16, values TurboQuant)"}, \
    {"turbo-boundary-v", 0, "COUNT", "MLXCEL_KV_BOUNDARY_V_LAYERS / 2", "TurboQuant values: keep the first and last COUNT layers' V in fp16 (clamped to half the layers)"}

static const char *const k_refused[] = {"audio", "video", NULL};

static const mxl_cli_opt k_gen_opts[] = {
    {"model", 'm', "PATH_OR_REPO_ID", NULL, "Local model path, owner/name repo id, or bare name (required)"},
    {"models-dir", 0, "PATH", "MLXCEL_MODELS_DIR / cache root", "Model-store root for repo-id resolution"},
    {"revision", 0, "REV", "main", "Repository revision for repo-id resolution"},
    {"prompt", 'p', "TEXT", NULL, "Input prompt (chat template applied unless --no-chat-template); without it, a chat REPL"},
    {"max-tokens", 'n', "N", "-1", "Maximum tokens to generate; -1 until EOS or the context is full"},
    SAMPLING_OPTS,
    {NULL, 0, NULL, NULL, NULL},
};
static const mxl_cli_cmd k_gen_cmd = {
    "generate", "mlxcel generate -m <PATH_OR_REPO_ID> -p <TEXT> [OPTIONS]",
    "Load a model, apply its chat template to the prompt, and stream the generated text.", k_gen_opts, 0, 0, NULL,
};

static const mxl_cli_opt k_run_opts[] = {
    {"models-dir", 0, "PATH", "MLXCEL_MODELS_DIR / cache root", "Model-store root for repo-id resolution"},
    {"revision", 0, "REV", "main", "Repository revision for repo-id resolution"},
    {"prompt", 'p', "TEXT", NULL, "One-shot prompt; without it, an interactive chat REPL opens"},
    {"max-tokens", 'n', "N", "-1", "Maximum tokens to generate; -1 until EOS or the context is full"},
    SAMPLING_OPTS,
    {NULL, 0, NULL, NULL, NULL},
};
static const mxl_cli_cmd k_run_cmd = {
    "run", "mlxcel run [MODEL_OR_REPO_ID] [-p <TEXT>] [OPTIONS]",
    "Chat with a model interactively, or answer one prompt with -p (default model: " MXL_DEFAULT_MODEL ").", k_run_opts, 0, 1,
    "[MODEL_OR_REPO_ID]",
};

static int get_float(const mxl_cli_args *a, const char *name, float dflt, float *out) {
    const char *v = mxl_cli_get(a, name);
    if (!v) {
        *out = dflt;
        return 0;
    }
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || *end) return mxl_cli_usage_error(a->cmd, "--%s expects a number, got '%s'", name, v);
    *out = (float)x;
    return 0;
}

static double gib(uint64_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

/* The KV flags (--kv-cache-mode, --cache-type-k / -v, --turbo-boundary-v); nonzero (reported)
 * on a bad count. */
static int kv_flags(const mxl_cli_args *a, mxl_kv_flags *f) {
    *f = (mxl_kv_flags){mxl_cli_get(a, "kv-cache-mode"), mxl_cli_get(a, "cache-type-k"), mxl_cli_get(a, "cache-type-v"), -1, 0, 0};
    return mxl_cli_has(a, "turbo-boundary-v") ? mxl_cli_get_int(a, "turbo-boundary-v", -1, 0, 1 << 20, &f->v_edge) : 0;
}

/* --estimate-memory (spec: generate, "memory preflight"): the inspect estimator for the rendered
 * prompt plus --max-tokens (the context when -1) against the budget; over budget stops (exit 1)
 * unless --force / --no-memory-check, which only warns. Prints one line on stderr. */
static int memory_preflight(const mxl_cli_args *a, mxl_gen_model *m, const mxl_gen_request *req, int64_t ctx) {
    mxl_error err;
    int64_t n_prompt = 0;
    if (mxl_gen_prompt_tokens(m, req, &n_prompt, &err)) return mxl_cli_fail("%s", err.msg);
    mxl_mem_inputs in = {0};
    in.max_tokens = req->max_tokens < 0 ? ctx : n_prompt + req->max_tokens;
    if (in.max_tokens > ctx) in.max_tokens = ctx;
    in.batch = 1;
    mxl_kv_flags kf;
    if (kv_flags(a, &kf)) return 2;
    if (mxl_kv_flags_resolve(&kf, &in.kv_k, &in.kv_v, &in.v_edge, &err)) return mxl_cli_usage_error(a->cmd, "%s", err.msg);
    char warning[256];
    in.headroom_factor = mxl_mem_headroom_factor_from_env(warning, sizeof warning);
    if (warning[0]) fprintf(stderr, "warning: %s\n", warning);
    if (mxl_mem_budget(&in.budget_bytes, &in.budget_from_limit, &err)) return mxl_cli_fail("%s", err.msg);
    const mxl_checkpoint *ck = mxl_gen_model_checkpoint(m);
    in.dec = mxl_gen_model_hparams(m);
    mxl_mem_estimate est;
    if (mxl_mem_estimate_compute(&ck->config, false, ck->weights_bytes, &in, &est, &err)) return mxl_cli_fail("%s", err.msg);
    char line[512], terms[256];
    mxl_mem_estimate_terms(&est, terms, sizeof terms);
    snprintf(line, sizeof line, "memory preflight: %lld tokens (prompt %lld), %s", (long long)in.max_tokens, (long long)n_prompt, terms);
    if (!est.fits_known) {
        fprintf(stderr, "%s; available memory unknown\n", line);
        return 0;
    }
    if (est.fits) {
        fprintf(stderr, "%s of %.3f GiB %s: fits\n", line, gib(est.budget_bytes), in.budget_from_limit ? "(MLXCEL_MEMORY_LIMIT)" : "available");
        return 0;
    }
    if (mxl_cli_has(a, "force") || mxl_cli_has(a, "no-memory-check")) {
        fprintf(stderr, "warning: %s exceeds the %.3f GiB available; continuing (--force)\n", line, gib(est.budget_bytes));
        return 0;
    }
    return mxl_cli_fail("%s exceeds the %.3f GiB available%s (use --force to continue anyway)", line, gib(est.budget_bytes),
                        in.budget_from_limit ? " (MLXCEL_MEMORY_LIMIT)" : "");
}

static int print_text(void *ctx, const char *text, size_t len) {
    (void)ctx;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

/* Speculative decoding flags (spec: generate, "프롬프트 조회" and --draft-*): opts->kind stays
 * MXL_DRAFT_NONE without them. */
static int parse_speculation(const mxl_cli_args *a, mxl_draft_opts *o) {
    static const char *const tuning[] = {"prompt-lookup-ngram-max", "prompt-lookup-ngram-min", "prompt-lookup-max-draft",
                                         "prompt-lookup-no-adaptive", "prompt-lookup-policy", NULL};
    const bool pl = mxl_cli_has(a, "prompt-lookup"), dm = mxl_cli_has(a, "draft-model");
    const char *kind = mxl_cli_get(a, "draft-kind");
    mxl_error err;
    o->kind = MXL_DRAFT_NONE;
    if (kind && strcmp(kind, "prompt-lookup") == 0)
        return mxl_cli_usage_error(a->cmd, "--draft-kind prompt-lookup is the server's form; use --prompt-lookup");
    if (pl && dm) return mxl_cli_usage_error(a->cmd, "--prompt-lookup cannot be combined with --draft-model");
    for (int i = 0; tuning[i]; i++)
        if (!pl && mxl_cli_has(a, tuning[i])) return mxl_cli_usage_error(a->cmd, "--%s needs --prompt-lookup", tuning[i]);
    if ((kind || mxl_cli_has(a, "draft-block-size")) && !dm)
        return mxl_cli_usage_error(a->cmd, "--%s needs --draft-model", kind ? "draft-kind" : "draft-block-size");
    int64_t v;
    if (pl) {
        mxl_draft_opts_default(o, MXL_DRAFT_PROMPT_LOOKUP);
        if (mxl_cli_get_int(a, "prompt-lookup-ngram-max", 3, 1, 16, &v)) return 2;
        o->ngram_max = (int)v;
        if (mxl_cli_get_int(a, "prompt-lookup-ngram-min", 2, 1, 16, &v)) return 2;
        o->ngram_min = (int)v;
        if (o->ngram_min > o->ngram_max)
            return mxl_cli_usage_error(a->cmd, "--prompt-lookup-ngram-min (%d) exceeds --prompt-lookup-ngram-max (%d)", o->ngram_min, o->ngram_max);
        if (mxl_cli_get_int(a, "prompt-lookup-max-draft", 7, 1, 64, &v)) return 2;
        o->max_draft = (int)v;
        o->no_adaptive = mxl_cli_has(a, "prompt-lookup-no-adaptive");
        const char *pol = mxl_cli_get(a, "prompt-lookup-policy");
        if (pol && mxl_draft_policy_parse(pol, &o->policy, &err)) return mxl_cli_usage_error(a->cmd, "%s", err.msg);
    } else if (dm) {
        mxl_draft_kind k = MXL_DRAFT_FULL_MODEL;
        if (kind && strcmp(kind, "auto") != 0 && mxl_draft_kind_parse(kind, &k, &err)) return mxl_cli_usage_error(a->cmd, "%s", err.msg);
        mxl_draft_opts_default(o, k);
        if (mxl_cli_get_int(a, "draft-block-size", 4, 1, 64, &v)) return 2;
        o->max_draft = (int)v;
    }
    return 0;
}

/* Loads --draft-model (resolved as -m) on one thread of its own (it runs on the target's). */
static int load_draft(const mxl_cli_args *a, mxl_draft_opts *o, mxl_gen_model **out) {
    *out = NULL;
    if (o->kind != MXL_DRAFT_FULL_MODEL) return 0;
    mxl_error err;
    mxl_resolved res;
    if (mxl_cli_resolve_model(mxl_cli_get(a, "draft-model"), mxl_cli_get(a, "models-dir"), mxl_cli_get(a, "revision"), false, NULL, &res, &err))
        return mxl_cli_fail("--draft-model: %s", err.msg);
    if (mxl_gen_model_load(res.path, 1, out, &err)) return mxl_cli_fail("--draft-model: %s", err.msg);
    o->model = *out;
    return 0;
}

static int generate_common(const mxl_cli_args *a, const char *model_arg) {
    for (int i = 0; k_refused[i]; i++)
        if (mxl_cli_has(a, k_refused[i])) {
            fprintf(stderr, "error: --%s is not supported for this model yet (no family in this build takes it)\n", k_refused[i]);
            return 2;
        }
    const char *prompt = mxl_cli_get(a, "prompt");
    bool repl = !prompt; /* spec: without --prompt, generate enters the same REPL as run */
    mxl_gen_request req = {0};
    req.prompt = prompt;
    req.chat = !mxl_cli_has(a, "no-chat-template");
    req.ignore_eos = mxl_cli_has(a, "ignore-eos");
    req.show_reasoning = mxl_cli_has(a, "show-reasoning");
    mxl_sampler_params_default(&req.sampling);
    int64_t v, threads;
    if (mxl_cli_get_int(a, "max-tokens", -1, -1, INT64_C(1) << 31, &req.max_tokens)) return 2;
    if (get_float(a, "temp", 0.0f, &req.sampling.temp) || get_float(a, "top-p", 1.0f, &req.sampling.top_p) ||
        get_float(a, "min-p", 0.0f, &req.sampling.min_p) || get_float(a, "repetition-penalty", 1.0f, &req.sampling.repeat_penalty) ||
        get_float(a, "presence-penalty", 0.0f, &req.sampling.presence_penalty) ||
        get_float(a, "frequency-penalty", 0.0f, &req.sampling.frequency_penalty))
        return 2;
    if (mxl_cli_get_int(a, "top-k", 0, 0, INT32_MAX, &v)) return 2;
    req.sampling.top_k = (int32_t)v;
    /* run is a client of the server worker: without the flag it gets the server's 64-token window */
    int64_t window_default = strcmp(a->cmd->name, "run") == 0 ? 64 : -1;
    if (mxl_cli_get_int(a, "repeat-last-n", window_default, -1, INT32_MAX, &v)) return 2;
    req.sampling.repeat_last_n = (int32_t)v;
    mxl_sampler_params *sp = &req.sampling;
    if (get_float(a, mxl_cli_has(a, "typical") ? "typical" : "typical-p", 1.0f, &sp->typical_p) ||
        get_float(a, mxl_cli_has(a, "top-nsigma") ? "top-nsigma" : "top-n-sigma", 0.0f, &sp->top_n_sigma) ||
        get_float(a, "xtc-probability", 0.0f, &sp->xtc_probability) || get_float(a, "xtc-threshold", 0.1f, &sp->xtc_threshold) ||
        get_float(a, "dry-multiplier", 0.0f, &sp->dry_multiplier) || get_float(a, "dry-base", 1.75f, &sp->dry_base) ||
        get_float(a, "mirostat-lr", 0.1f, &sp->mirostat_eta) || get_float(a, "mirostat-ent", 5.0f, &sp->mirostat_tau) ||
        get_float(a, "dynatemp-range", 0.0f, &sp->dynatemp_range) || get_float(a, "dynatemp-exp", 1.0f, &sp->dynatemp_exponent))
        return 2;
    sp->p_less = mxl_cli_has(a, "p-less");
    if (mxl_cli_get_int(a, "dry-allowed-length", 2, 0, INT32_MAX, &v)) return 2;
    sp->dry_allowed_length = (int32_t)v;
    if (mxl_cli_get_int(a, "dry-penalty-last-n", window_default, -1, INT32_MAX, &v)) return 2;
    sp->dry_penalty_last_n = (int32_t)v;
    if (mxl_cli_get_int(a, "mirostat", 0, 0, 2, &v)) return 2;
    sp->mirostat = (int32_t)v;
    static mxl_logit_bias biases[MXL_CLI_MAX_VALUES];
    int nb = mxl_cli_count(a, "logit-bias");
    for (int i = 0; i < nb; i++) {
        mxl_error berr;
        if (mxl_logit_bias_parse(mxl_cli_get_nth(a, "logit-bias", i), &biases[i], &berr))
            return mxl_cli_usage_error(a->cmd, "%s", berr.msg);
    }
    sp->logit_bias = biases;
    sp->n_logit_bias = (size_t)nb;
    static const char *images[MXL_GEN_MAX_IMAGES];
    req.n_images = mxl_cli_count(a, "image");
    if (req.n_images > MXL_GEN_MAX_IMAGES) return mxl_cli_usage_error(a->cmd, "at most %d --image files", MXL_GEN_MAX_IMAGES);
    for (int i = 0; i < req.n_images; i++) images[i] = mxl_cli_get_nth(a, "image", i);
    req.images = images;
    req.n_stop = mxl_cli_count(a, "stop");
    for (int i = 0; i < req.n_stop && i < MXL_GEN_MAX_STOP; i++) req.stop[i] = mxl_cli_get_nth(a, "stop", i);
    if (req.n_stop > MXL_GEN_MAX_STOP) return mxl_cli_usage_error(a->cmd, "at most %d --stop strings", MXL_GEN_MAX_STOP);
    if (mxl_cli_has(a, "seed")) {
        if (mxl_cli_get_int(a, "seed", 0, INT64_MIN, INT64_MAX, &v)) return 2;
        req.sampling.seed = (uint64_t)v;
    } else {
        req.sampling.seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    }
    if (mxl_cli_get_int(a, "threads", mxl_cpu_count(), 1, 1024, &threads)) return 2;
    static mxl_draft_opts spec;
    if ((v = parse_speculation(a, &spec))) return (int)v;
    if (spec.kind != MXL_DRAFT_NONE) {
        if (repl) return mxl_cli_usage_error(a->cmd, "speculative decoding (--%s) needs a prompt (-p); the chat REPL does not take it",
                                             spec.kind == MXL_DRAFT_PROMPT_LOOKUP ? "prompt-lookup" : "draft-model");
        if (req.n_images) return mxl_cli_usage_error(a->cmd, "speculative decoding does not take images");
        req.draft = &spec;
    }

    mxl_error err;
    mxl_resolved res;
    if (mxl_cli_resolve_model(model_arg, mxl_cli_get(a, "models-dir"), mxl_cli_get(a, "revision"), false, NULL, &res, &err))
        return mxl_cli_fail("%s", err.msg);
    mxl_gen_model *m = NULL;
    if (mxl_gen_model_load(res.path, (int)threads, &m, &err)) return mxl_cli_fail("%s", err.msg);
    int tuned = 0;
    if (mxl_gen_model_autotune_note(m, &tuned)[0]) fprintf(stderr, "warning: %s\n", mxl_gen_model_autotune_note(m, NULL));
    if (tuned) fprintf(stderr, "autotune: %d tuned value%s applied from the cache (MLXCEL_AUTOTUNE)\n", tuned, tuned == 1 ? "" : "s");
    mxl_kv_flags kf;
    if (kv_flags(a, &kf)) {
        mxl_gen_model_destroy(m);
        return 2;
    }
    if (mxl_gen_model_set_kv(m, &kf, &err)) {
        mxl_gen_model_destroy(m);
        return mxl_cli_fail("%s", err.msg);
    }
    if (mxl_cli_has(a, "estimate-memory")) {
        int prc = memory_preflight(a, m, &req, mxl_gen_model_default_ctx(m));
        if (prc) {
            mxl_gen_model_destroy(m);
            return prc;
        }
    }
    mxl_lora *adapter = NULL;
    if (mxl_cli_has(a, "adapter")) {
        if (mxl_gen_model_load_adapter(m, mxl_cli_get(a, "adapter"), &adapter, &err)) {
            mxl_gen_model_destroy(m);
            return mxl_cli_fail("%s", err.msg);
        }
        static mxl_decoder_lora use;
        use = (mxl_decoder_lora){adapter, 1.0f};
        req.lora = &use;
        req.n_lora = 1;
    }
    bool generic = false;
    mxl_gen_model_template_origin(m, &generic);
    const mxl_vlm *vlm = mxl_gen_model_vlm(m);
    if (req.chat && generic && !(req.n_images && vlm && vlm->prompt)) /* (PaliGemma's processor writes its own prompt) */
        fprintf(stderr, "note: %s has no chat template; using a generic chat format (likely a base model: try --no-chat-template)\n", model_arg);
    if (repl) {
        int rc = mxl_repl_run(m, &req, mxl_cli_has(a, "profile"));
        mxl_lora_free(adapter);
        mxl_gen_model_destroy(m);
        return rc;
    }
    mxl_gen_model *draft = NULL;
    if ((v = load_draft(a, &spec, &draft))) {
        mxl_lora_free(adapter);
        mxl_gen_model_destroy(m);
        return (int)v;
    }
    mxl_gen_stats stats;
    mxl_status st = mxl_gen_run(m, &req, print_text, NULL, &stats, &err);
    mxl_lora_free(adapter);
    mxl_gen_model_destroy(draft);
    mxl_gen_model_destroy(m);
    printf("\n");
    fflush(stdout);
    if (st) return mxl_cli_fail("%s", err.msg);
    double dec_s = stats.decode_ms / 1e3;
    if (mxl_cli_has(a, "profile")) {
        fprintf(stderr, "[Profile Results]\nPrompt tokens: %lld\nGenerated tokens: %lld\n", (long long)stats.prompt_tokens, (long long)stats.generated_tokens);
        if (req.n_images) fprintf(stderr, "Image encode: %.1f ms (%d images)\n", stats.image_ms, req.n_images);
        fprintf(stderr, "Prefill: %.1f ms (%.1f tok/s)\n", stats.prefill_ms, stats.prefill_ms > 0 ? stats.prompt_tokens * 1e3 / stats.prefill_ms : 0.0);
        fprintf(stderr, "Decode: %.1f ms (%.1f tok/s)\n", stats.decode_ms, dec_s > 0 ? stats.generated_tokens / dec_s : 0.0);
        if (req.draft)
            fprintf(stderr, "Speculation: %lld rounds, %lld drafted, %lld accepted (%.1f%%)\n", (long long)stats.draft.rounds,
                    (long long)stats.draft.drafted, (long long)stats.draft.accepted,
                    stats.draft.drafted ? 100.0 * (double)stats.draft.accepted / (double)stats.draft.drafted : 0.0);
    } else {
        fprintf(stderr, "[Generated %lld tokens in %.2f s (%.1f tok/s); prompt %lld tokens, prefill %.1f tok/s; finish: %s]\n",
                (long long)stats.generated_tokens, dec_s, dec_s > 0 ? stats.generated_tokens / dec_s : 0.0,
                (long long)stats.prompt_tokens, stats.prefill_ms > 0 ? stats.prompt_tokens * 1e3 / stats.prefill_ms : 0.0,
                stats.finish_reason);
    }
    return 0;
}

int mxl_cmd_generate(int argc, char **argv) {
    mxl_cli_args a;
    int rc = mxl_cli_parse(&k_gen_cmd, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    const char *model = mxl_cli_get(&a, "model");
    if (!model) return mxl_cli_usage_error(&k_gen_cmd, "missing required flag -m/--model");
    return generate_common(&a, model);
}

int mxl_cmd_run(int argc, char **argv) {
    mxl_cli_args a;
    int rc = mxl_cli_parse(&k_run_cmd, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    return generate_common(&a, a.n_pos ? a.pos[0] : MXL_DEFAULT_MODEL);
}
