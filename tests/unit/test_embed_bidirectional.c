/* test_embed_bidirectional.c - the bidirectional decoder embedders against PyPI
 * sentence-transformers on the tiny random checkpoints of tests/fixtures/embeddinggemma (made by
 * gen_embeddinggemma_fixtures.py): EmbeddingGemma (model/, reference.json: a bidirectional
 * Gemma 3 text model under Pooling (mean), two Dense modules and Normalize) and
 * Nemotron-3-Embed's shape (nemotron3/, reference_nemotron3.json: a ministral3 with is_causal
 * false, mean pooling, Normalize) and llama-nemotron-embed / LLM2Vec's bidirectional Llama
 * (llama_bidirec/, reference_llama_bidirec.json: transformers' LlamaModel with is_causal false,
 * saved under the released model_type llama_bidirec):
 *   - detection: Gemma3TextModel with use_bidirectional_attention is the embeddinggemma family,
 *     the non-causal ministral3 nemotron3_embed;
 *   - SentenceTransformer.encode vectors (token counts too), with and without a prompt, and the
 *     Matryoshka cut to 32 dimensions: the decoder's f32 reference path within 1e-4 (cosine
 *     >= 0.99999), the default fast path (int8 activations, f16 KV cache) within 2e-3. The
 *     sliding layers' bidirectional window (|q - k| <= sliding_window / 2, transformers' rule) and
 *     the whole-text attention both show: a causal run or another window misses by 1e-2 or more. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/embed.h"
#include "models/checkpoint.h"
#include "models/decoder.h"
#include "models/detect.h"
#include "test.h"

static const char *model_dir(const char *name) {
    static char path[2048];
    snprintf(path, sizeof path, "%s/tests/fixtures/embeddinggemma/%s", mxl_test_repo_root(), name);
    return path;
}

TEST(embed_bidirectional_detect) {
    const char *const cases[][2] = {{"model", "embeddinggemma"}, {"nemotron3", "nemotron3_embed"}, {"llama_bidirec", "llama_bidirectional"}};
    for (int i = 0; i < 3; i++) {
        mxl_checkpoint *ck = NULL;
        mxl_error err;
        mxl_detection det;
        REQUIRE(mxl_checkpoint_open(model_dir(cases[i][0]), &ck, &err) == MXL_OK);
        REQUIRE(mxl_checkpoint_detect(ck, &det, &err) == MXL_OK);
        CHECK(det.task == MXL_TASK_EMBED);
        CHECK_EQ_STR(det.family->id, cases[i][1]);
        mxl_checkpoint_close(ck);
    }
}

/* max |ours - ref| and min cosine over the texts of reference key `key` */
static void compare(mxl_embed_model *m, json_t *ref, const char *key, const mxl_embed_opts *o, double tol, bool reference, int *mxl_test_failed_) {
    json_t *texts = json_object_get(ref, "texts"), *want = json_object_get(ref, key), *ids = json_object_get(ref, "ids");
    size_t n = json_array_size(texts);
    const int64_t dim = o->dimensions > 0 ? o->dimensions : mxl_embed_model_dim(m);
    REQUIRE(n > 0 && json_array_size(want) == n && (int64_t)json_array_size(json_array_get(want, 0)) == dim);
    const char *tx[16];
    REQUIRE(n <= 16);
    for (size_t i = 0; i < n; i++) tx[i] = json_string_value(json_array_get(texts, i));
    float *out = mxl_malloc(n * (size_t)dim * sizeof *out);
    int64_t ntok[16];
    mxl_error err;
    REQUIRE(out && mxl_embed_batch(m, tx, n, o, out, ntok, &err) == MXL_OK);
    double worst = 0, cmin = 1;
    for (size_t i = 0; i < n; i++) {
        double d, cosv;
        mxl_test_vec_vs_json(out + i * dim, json_array_get(want, i), dim, &d, &cosv);
        worst = fmax(worst, d), cmin = fmin(cmin, cosv);
        if (!o->instruction) CHECK_EQ_INT(ntok[i], (int64_t)json_array_size(json_array_get(ids, i)));
    }
    fprintf(stderr, "  %-18s %-18s %s: max |diff| %.2e, min cosine %.7f\n", json_string_value(json_object_get(ref, "model")), key,
            reference ? "[reference]" : "[fast]", worst, cmin);
    CHECK(worst <= tol);
    if (reference) CHECK(cmin >= 0.99999);
    mxl_free(out);
}

static void run(const char *name, const char *reference_json, bool reference, int *mxl_test_failed_) {
    const bool saved = mxl_decoder_reference_default();
    mxl_decoder_set_reference_default(reference);
    json_t *ref = mxl_test_load_json(reference_json);
    REQUIRE(ref);
    json_object_set_new(ref, "model", json_string(name));
    mxl_embed_model *m = NULL;
    mxl_error err;
    REQUIRE(mxl_embed_model_load(model_dir(name), 2, &m, &err) == MXL_OK);
    CHECK_EQ_INT(mxl_embed_model_dim(m), 64);
    const double tol = reference ? 1e-4 : 2e-3;
    mxl_embed_opts o = {.normalize = MXL_EMBED_NORMALIZE_DEFAULT};
    compare(m, ref, "embeddings", &o, tol, reference, mxl_test_failed_);
    o.instruction = json_string_value(json_object_get(ref, "prompt"));
    compare(m, ref, "embeddings_prompt", &o, tol, reference, mxl_test_failed_);
    o.instruction = NULL;
    o.dimensions = 32;
    compare(m, ref, "embeddings_dim32", &o, tol, reference, mxl_test_failed_);
    mxl_embed_model_destroy(m);
    json_decref(ref);
    mxl_decoder_set_reference_default(saved);
}

#define GEMMA "tests/fixtures/embeddinggemma/reference.json"
#define NEMOTRON "tests/fixtures/embeddinggemma/reference_nemotron3.json"
#define LLAMA "tests/fixtures/embeddinggemma/reference_llama_bidirec.json"

TEST(embed_bidirectional_reference_match_sentence_transformers) {
    run("model", GEMMA, true, mxl_test_failed_);
    run("nemotron3", NEMOTRON, true, mxl_test_failed_);
    run("llama_bidirec", LLAMA, true, mxl_test_failed_);
}

TEST(embed_bidirectional_fast_path_match_sentence_transformers) {
    run("model", GEMMA, false, mxl_test_failed_);
    run("nemotron3", NEMOTRON, false, mxl_test_failed_);
    run("llama_bidirec", LLAMA, false, mxl_test_failed_);
}
