/* cmd_rerank.c - `mlxcel rerank`: scores each -d document against the -q query with a reranker
 * and prints the scores in request order and the ranking (spec: "mlxcel rerank"). Cross-encoders
 * (one-label *ForSequenceClassification) are detected from -m; they take no --instruction. A qwen3
 * generation checkpoint given to -m (this command's -m names a reranker explicitly, as serve's
 * --reranker-model does) runs as the Qwen3 generative reranker, whose task instruction
 * --instruction replaces (default: the model card's web-search instruction).
 * Text output: one line per document in request order, then the ranking (--top-n limits it).
 * --json prints one object {model, kind, family, query, max_length, scores, tokens, ranking}
 * with ranking entries {index, score, document}. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/hub_progress.h"
#include "core/alloc.h"
#include "core/threadpool.h"
#include "engine/encoder_input.h"
#include "engine/rerank.h"
#include "io/json_write.h"
#include "io/store.h"

static const mxl_cli_opt k_opts[] = {
    {"model", 'm', "MODEL_OR_REPO_ID", NULL, "Reranker checkpoint, owner/name repo id, or bare name (required)"},
    {"query", 'q', "TEXT", NULL, "Query text (required)"},
    {"document", 'd', "TEXT", NULL, "Candidate document; repeat for several"},
    {"query-image", 0, "FILE", NULL, "Image attached to the query for multimodal rerankers (refused: this build ranks text only)"},
    {"image", 0, "FILE", NULL, "Image candidate for multimodal rerankers (refused: this build ranks text only)"},
    {"instruction", 0, "TEXT", "per kind", "Task instruction for generative rerankers; classifiers refuse it"},
    {"top-n", 0, "N", "all", "Print only the N best documents of the ranking"},
    {"max-length", 0, "N", "checkpoint", "Lower the per-pair token limit"},
    {"batch-size", 0, "N", "8 (text pairs)", "Pairs per forward pass"},
    {"models-dir", 0, "PATH", "MLXCEL_MODELS_DIR / cache root", "Model-store root for repo-id resolution"},
    {"json", 0, NULL, NULL, "Print scores, ranking, kind and token counts as one JSON object"},
    {NULL, 0, NULL, NULL, NULL},
};
static const mxl_cli_cmd k_cmd = {
    "rerank", "mlxcel rerank -m <MODEL> -q <QUERY> -d <DOC> [-d <DOC> ...] [OPTIONS]",
    "Score each document against the query with a reranker; print the scores in request order and the ranking.",
    k_opts, 0, 0, NULL,
};

static int opt_index(const char *name) {
    for (int i = 0; k_opts[i].long_name; i++)
        if (strcmp(k_opts[i].long_name, name) == 0) return i;
    return -1;
}

/* The first line of a document, at most 60 bytes (UTF-8 safe), for the text output. */
static void preview(const char *doc, char *out, size_t cap) {
    size_t n = 0;
    while (doc[n] && doc[n] != '\n' && doc[n] != '\r' && n < 60) n++;
    while (n > 0 && doc[n] && ((unsigned char)doc[n] & 0xC0) == 0x80) n--; /* do not split a character */
    if (n >= cap) n = cap - 1;
    memcpy(out, doc, n);
    out[n] = 0;
    if (doc[n]) strncat(out, "...", cap - n - 1);
}

int mxl_cmd_rerank(int argc, char **argv) {
    mxl_cli_args a;
    int rc = mxl_cli_parse(&k_cmd, argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    const char *model = mxl_cli_get(&a, "model");
    if (!model) return mxl_cli_usage_error(&k_cmd, "missing required flag -m/--model");
    if (mxl_cli_has(&a, "image") || mxl_cli_has(&a, "query-image"))
        return mxl_cli_usage_error(&k_cmd, "--%s is not supported for this model (text rerankers only)", mxl_cli_has(&a, "image") ? "image" : "query-image");
    const char *query = mxl_cli_get(&a, "query");
    if (!query) return mxl_cli_usage_error(&k_cmd, "missing required flag -q/--query");
    if (mxl_enc_blank(query)) return mxl_cli_usage_error(&k_cmd, "the query is empty or whitespace only");
    int di = opt_index("document");
    int n = a.count[di];
    if (n == 0) return mxl_cli_usage_error(&k_cmd, "give at least one -d/--document");
    const char *const *docs = a.values[di];
    for (int i = 0; i < n; i++)
        if (mxl_enc_blank(docs[i])) return mxl_cli_usage_error(&k_cmd, "document %d is empty or whitespace only", i + 1);
    int64_t top_n;
    mxl_rerank_opts o = {0, 0};
    if (mxl_cli_get_int(&a, "top-n", n, 1, 1 << 20, &top_n)) return 2;
    if (mxl_cli_get_int(&a, "max-length", 0, 4, 1 << 20, &o.max_length)) return 2;
    if (mxl_cli_get_int(&a, "batch-size", 0, 1, 1 << 16, &o.batch_size)) return 2;
    if (top_n > n) top_n = n;

    mxl_error err;
    mxl_resolved res;
    if (mxl_cli_resolve_model(model, mxl_cli_get(&a, "models-dir"), NULL, false, NULL, &res, &err)) return mxl_cli_fail("%s", err.msg);
    mxl_reranker *r = NULL;
    if (mxl_reranker_load(res.path, mxl_cpu_count(), &r, &err)) return mxl_cli_fail("%s", err.msg);
    if (mxl_cli_has(&a, "instruction") && !mxl_reranker_takes_instruction(r)) {
        rc = mxl_cli_usage_error(&k_cmd, "--instruction is for generative rerankers; %s %s takes none", mxl_reranker_family(r), mxl_reranker_kind(r));
        mxl_reranker_destroy(r);
        return rc;
    }
    const char *instruction = mxl_cli_get(&a, "instruction");
    if (instruction && mxl_enc_blank(instruction)) {
        mxl_reranker_destroy(r);
        return mxl_cli_usage_error(&k_cmd, "--instruction is empty or whitespace only");
    }
    double *scores = mxl_calloc((size_t)n, sizeof *scores);
    int64_t *toks = mxl_calloc((size_t)n, sizeof *toks);
    size_t *order = mxl_calloc((size_t)n, sizeof *order);
    if (!scores || !toks || !order) rc = mxl_cli_fail("out of memory");
    else if (mxl_reranker_score_instructed(r, instruction, query, docs, (size_t)n, &o, scores, NULL, toks, &err)) rc = mxl_cli_fail("%s", err.msg);
    if (rc == 0) mxl_rerank_order(scores, (size_t)n, order);
    if (rc == 0 && mxl_cli_has(&a, "json")) {
        json_t *j = json_object(), *sc = json_array(), *tk = json_array(), *rank = json_array();
        json_object_set_new(j, "model", json_string(model));
        json_object_set_new(j, "kind", json_string(mxl_reranker_kind(r)));
        json_object_set_new(j, "family", json_string(mxl_reranker_family(r)));
        json_object_set_new(j, "query", json_string(query));
        if (mxl_reranker_takes_instruction(r))
            json_object_set_new(j, "instruction", json_string(instruction ? instruction : MXL_RERANK_DEFAULT_INSTRUCTION));
        json_object_set_new(j, "max_length", json_integer(o.max_length > 0 && o.max_length < mxl_reranker_max_length(r) ? o.max_length : mxl_reranker_max_length(r)));
        for (int i = 0; i < n; i++) {
            json_array_append_new(sc, json_real(scores[i]));
            json_array_append_new(tk, json_integer(toks[i]));
        }
        for (int64_t i = 0; i < top_n; i++) {
            size_t d = order[i];
            json_array_append_new(rank, json_pack("{s:I, s:f, s:s}", "index", (json_int_t)d, "score", scores[d], "document", docs[d]));
        }
        json_object_set_new(j, "scores", sc);
        json_object_set_new(j, "tokens", tk);
        json_object_set_new(j, "ranking", rank);
        char *s = mxl_json_dumps(j, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
        json_decref(j);
        if (s) puts(s);
        else rc = mxl_cli_fail("out of memory");
        mxl_free(s);
    } else if (rc == 0) {
        char pv[80];
        printf("scores (%s, request order):\n", mxl_reranker_kind(r));
        for (int i = 0; i < n; i++) {
            preview(docs[i], pv, sizeof pv);
            printf("  [%d] %.6f  (%lld tokens)  %s\n", i, scores[i], (long long)toks[i], pv);
        }
        printf("ranking:\n");
        for (int64_t i = 0; i < top_n; i++) {
            preview(docs[order[i]], pv, sizeof pv);
            printf("  %lld. [%zu] %.6f  %s\n", (long long)(i + 1), order[i], scores[order[i]], pv);
        }
    }
    mxl_free(scores);
    mxl_free(toks);
    mxl_free(order);
    mxl_reranker_destroy(r);
    return rc;
}
