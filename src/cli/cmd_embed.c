/* cmd_embed.c - `mlxcel embed`: one vector per -p prompt and, for several prompts, the cosine
 * similarity matrix (spec: "mlxcel embed"). Text output shows the first and last components;
 * --json prints one object {model, shape, tokens, pooling, normalize, embeddings, similarity}. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/hub_progress.h"
#include "core/alloc.h"
#include "core/threadpool.h"
#include "engine/embed.h"
#include "engine/encoder_input.h"
#include "io/json_write.h"
#include "io/store.h"

static const mxl_cli_opt k_opts[] = {
    {"model", 'm', "MODEL_OR_REPO_ID", NULL, "Local checkpoint, owner/name repo id, or bare name (required)"},
    {"prompt", 'p', "TEXT", NULL, "Text to embed; repeat for several"},
    {"image", 0, "FILE", NULL, "Image input for multimodal embedders (refused: this build embeds text only)"},
    {"instruction", 0, "TEXT", NULL, "Query instruction: encoder families prepend it to every prompt as written; Qwen3-Embedding uses \"Instruct: <TEXT>\\nQuery:<prompt>\""},
    {"dimensions", 0, "N", "full width", "Keep the first N components (re-normalized)"},
    {"pooling", 0, "mean|cls|last", "checkpoint", "Override the pooling"},
    {"embd-normalize", 0, "N", "checkpoint", "-1 none, 0 max-abs int16, 1 L1, 2 L2, p > 2 p-norm"},
    {"max-length", 0, "N", "checkpoint", "Lower the token limit"},
    {"batch-size", 0, "N", "16", "Texts per forward pass"},
    {"models-dir", 0, "PATH", "MLXCEL_MODELS_DIR / cache root", "Model-store root for repo-id resolution"},
    {"json", 0, NULL, NULL, "Print embeddings, shape, token counts and similarities as one JSON object"},
    {NULL, 0, NULL, NULL, NULL},
};
static const mxl_cli_cmd k_cmd = {
    "embed", "mlxcel embed -m <MODEL> -p <TEXT> [-p <TEXT> ...] [OPTIONS]",
    "Compute one embedding vector per prompt and, for several prompts, their cosine similarities.",
    k_opts, 0, 0, NULL,
};

static double cosine(const float *a, const float *b, int64_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0;
}

int mxl_cmd_embed(int argc, char **argv) {
    mxl_cli_args a;
    int rc = mxl_cli_parse(&k_cmd, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    const char *model = mxl_cli_get(&a, "model");
    if (!model) return mxl_cli_usage_error(&k_cmd, "missing required flag -m/--model");
    if (mxl_cli_has(&a, "image")) return mxl_cli_usage_error(&k_cmd, "--image is not supported for this model (this build embeds text only)");
    int idx = -1;
    for (int i = 0; i < a.n_opts; i++)
        if (strcmp(k_opts[i].long_name, "prompt") == 0) idx = i;
    int n = a.count[idx];
    if (n == 0) return mxl_cli_usage_error(&k_cmd, "give at least one -p/--prompt");
    for (int i = 0; i < n; i++)
        if (mxl_enc_blank(a.values[idx][i])) return mxl_cli_usage_error(&k_cmd, "prompt %d is empty or whitespace only", i + 1);
    mxl_embed_opts o = {.pooling = MXL_POOLING_NONE, .normalize = MXL_EMBED_NORMALIZE_DEFAULT};
    int64_t v;
    if (mxl_cli_get_int(&a, "dimensions", 0, 1, 1 << 20, &o.dimensions)) return 2;
    if (mxl_cli_get_int(&a, "max-length", 0, 2, 1 << 20, &o.max_length)) return 2;
    if (mxl_cli_get_int(&a, "batch-size", MXL_EMBED_BATCH_DEFAULT, 1, 1 << 16, &o.batch_size)) return 2;
    if (mxl_cli_has(&a, "embd-normalize")) {
        if (mxl_cli_get_int(&a, "embd-normalize", 2, -1, 64, &v)) return 2;
        o.normalize = (int)v;
    }
    const char *pool = mxl_cli_get(&a, "pooling");
    if (pool) {
        if (strcmp(pool, "mean") == 0) o.pooling = MXL_POOLING_MEAN;
        else if (strcmp(pool, "cls") == 0) o.pooling = MXL_POOLING_CLS;
        else if (strcmp(pool, "last") == 0) o.pooling = MXL_POOLING_LAST_TOKEN;
        else return mxl_cli_usage_error(&k_cmd, "--pooling must be mean, cls or last, got '%s'", pool);
    }
    /* encoder families take the instruction as a prefix written before every prompt
     * (sentence-transformers' prompt=, e.g. "query: " for E5); Qwen3-Embedding puts it in its
     * query template (engine/embed.h) */
    o.instruction = mxl_cli_get(&a, "instruction");

    mxl_error err;
    mxl_resolved res;
    if (mxl_cli_resolve_model(model, mxl_cli_get(&a, "models-dir"), NULL, false, NULL, &res, &err)) return mxl_cli_fail("%s", err.msg);
    mxl_embed_model *m = NULL;
    if (mxl_embed_model_load(res.path, mxl_cpu_count(), &m, &err)) return mxl_cli_fail("%s", err.msg);
    int64_t dim = o.dimensions > 0 ? o.dimensions : mxl_embed_model_dim(m);
    float *vecs = mxl_malloc((size_t)n * (size_t)dim * sizeof(float));
    int64_t *toks = mxl_calloc((size_t)n, sizeof *toks);
    if (!vecs || !toks) {
        mxl_free(vecs);
        mxl_free(toks);
        mxl_embed_model_destroy(m);
        return mxl_cli_fail("out of memory");
    }
    if (mxl_embed_batch(m, a.values[idx], (size_t)n, &o, vecs, toks, &err)) rc = mxl_cli_fail("%s", err.msg);
    mxl_pooling pooling = mxl_embed_resolved_pooling(m, &o);
    int norm = mxl_embed_resolved_normalize(m, &o);
    mxl_embed_model_destroy(m);
    if (rc == 0 && mxl_cli_has(&a, "json")) {
        json_t *j = json_object(), *embs = json_array(), *tk = json_array(), *sim = n > 1 ? json_array() : json_null();
        json_object_set_new(j, "model", json_string(model));
        json_object_set_new(j, "shape", json_pack("[I, I]", (json_int_t)n, (json_int_t)dim));
        json_object_set_new(j, "pooling", json_string(mxl_pooling_name(pooling)));
        json_object_set_new(j, "normalize", json_integer(norm));
        for (int i = 0; i < n; i++) {
            json_t *e = json_array();
            for (int64_t k = 0; k < dim; k++) json_array_append_new(e, json_real(vecs[(size_t)i * (size_t)dim + (size_t)k]));
            json_array_append_new(embs, e);
            json_array_append_new(tk, json_integer(toks[i]));
            if (n > 1) {
                json_t *row = json_array();
                for (int k = 0; k < n; k++) json_array_append_new(row, json_real(cosine(vecs + (size_t)i * (size_t)dim, vecs + (size_t)k * (size_t)dim, dim)));
                json_array_append_new(sim, row);
            }
        }
        json_object_set_new(j, "tokens", tk);
        json_object_set_new(j, "embeddings", embs);
        json_object_set_new(j, "similarity", sim);
        char *s = mxl_json_dumps(j, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
        json_decref(j);
        if (s) puts(s);
        mxl_free(s);
    } else if (rc == 0) {
        for (int i = 0; i < n; i++) {
            const float *e = vecs + (size_t)i * (size_t)dim;
            printf("embedding %d (%lld tokens, %lld dims): [", i, (long long)toks[i], (long long)dim);
            for (int64_t k = 0; k < dim; k++) {
                if (dim > 8 && k == 4) {
                    printf(", ...");
                    k = dim - 3;
                    continue;
                }
                printf(k ? ", %.6f" : "%.6f", e[k]);
            }
            printf("]\n");
        }
        if (n > 1) {
            printf("cosine similarity:\n");
            for (int i = 0; i < n; i++) {
                printf("  ");
                for (int k = 0; k < n; k++) printf(" %7.4f", cosine(vecs + (size_t)i * (size_t)dim, vecs + (size_t)k * (size_t)dim, dim));
                printf("\n");
            }
        }
    }
    mxl_free(vecs);
    mxl_free(toks);
    return rc;
}
