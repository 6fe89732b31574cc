/* test_embed_qwen3.c - Qwen3-Embedding and the Qwen3 generative reranker against PyPI
 * sentence-transformers / transformers on the tiny random checkpoints of
 * tests/fixtures/qwen3_embed (made by gen_qwen3_embed_fixtures.py; reference.json):
 *   - detection: a qwen3 checkpoint with a sentence-transformers 6 Pooling config
 *     ({"pooling_mode": "lasttoken"}) is the Qwen3-Embedding family, a plain one a generator;
 *     the pooling_mode string / list forms and their bad values;
 *   - token ids (the tokenizer appends <|endoftext|>, kept through truncation), exactly;
 *   - SentenceTransformer.encode vectors, with and without the Qwen3-Embedding query template,
 *     and the Matryoshka --dimensions cut: on the decoder's f32 reference path
 *     (MXL_DECODER_REFERENCE=1) within 1e-4, on the default fast path (int8-quantized
 *     activations, f16 KV cache) within 2e-3;
 *   - Qwen3-Reranker scores and yes-no logit differences (the model card's prompt, transformers)
 *     at two limits and with a custom instruction: reference path 1e-4, fast path 2e-3; scoring
 *     in another document order (other cached prefixes) gives the same numbers;
 *   - bad input: other poolings, instructions to classifiers, the wrong kind of checkpoint. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "engine/embed.h"
#include "engine/encoder_input.h"
#include "engine/rerank.h"
#include "models/decoder.h"
#include "io/safetensors_write.h"
#include "models/checkpoint.h"
#include "models/detect.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

#define REF_TOL 1e-4  /* f32 reference path */
#define FAST_TOL 2e-3 /* fast path: int8 activations, f16 KV (observed ~2e-4) */

static json_t *reference(void) { return mxl_test_load_json("tests/fixtures/qwen3_embed/reference.json"); }

static const char *fixture_dir(const char *name) {
    static char path[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/tests/fixtures/qwen3_embed/%s", mxl_test_repo_root(), name);
    return path[k];
}

/* Switches the decoder path of states made from now on (on: the f32 reference path). */
static void set_reference_path(bool on) { mxl_decoder_set_reference_default(on); }

/* The path other tests expect (the environment's MXL_DECODER_REFERENCE), put back after each test. */
static void restore_reference_env(bool saved) { mxl_decoder_set_reference_default(saved); }

static bool saved_reference_env(void) { return mxl_decoder_reference_default(); }

static bool ids_equal(const mxl_token_ids *ids, json_t *ref) {
    if (json_array_size(ref) != ids->n) return false;
    for (size_t i = 0; i < ids->n; i++)
        if (ids->ids[i] != json_integer_value(json_array_get(ref, i))) return false;
    return true;
}

TEST(embed_qwen3_detect) {
    mxl_checkpoint *ck = NULL;
    mxl_error err;
    mxl_detection det;
    REQUIRE(mxl_checkpoint_open(fixture_dir("embed"), &ck, &err) == MXL_OK);
    REQUIRE(mxl_checkpoint_detect(ck, &det, &err) == MXL_OK);
    CHECK(det.task == MXL_TASK_EMBED);
    CHECK_EQ_STR(det.family->id, "qwen3_embedding");
    CHECK(det.st.pooling == MXL_POOLING_LAST_TOKEN);
    CHECK(det.st.normalize);
    mxl_checkpoint_close(ck);
    REQUIRE(mxl_checkpoint_open(fixture_dir("rerank"), &ck, &err) == MXL_OK);
    REQUIRE(mxl_checkpoint_detect(ck, &det, &err) == MXL_OK);
    CHECK(det.task == MXL_TASK_GENERATE); /* only an explicit reranker flag makes it a reranker */
    CHECK_EQ_STR(det.family->id, "qwen3");
    mxl_checkpoint_close(ck);
}

/* 1_Pooling/config.json with `body` in a fresh directory; the layout read from it. */
static mxl_status layout_of(const char *body, mxl_st_layout *lay, mxl_error *err) {
    char dir[] = "/tmp/mxl_qwen3_pool_XXXXXX", sub[256], file[300];
    if (!mkdtemp(dir)) return MXL_ERR_IO;
    snprintf(sub, sizeof sub, "%s/1_Pooling", dir);
    snprintf(file, sizeof file, "%s/config.json", sub);
    mkdir(sub, 0700);
    FILE *f = fopen(file, "w");
    if (f) {
        fputs(body, f);
        fclose(f);
    }
    mxl_status st = mxl_st_layout_read(dir, lay, err);
    unlink(file);
    rmdir(sub);
    rmdir(dir);
    return st;
}

TEST(embed_qwen3_pooling_mode_key) {
    mxl_st_layout lay;
    mxl_error err;
    CHECK(layout_of("{\"pooling_mode\": \"lasttoken\"}", &lay, &err) == MXL_OK && lay.pooling == MXL_POOLING_LAST_TOKEN);
    CHECK(layout_of("{\"pooling_mode\": [\"cls\"]}", &lay, &err) == MXL_OK && lay.pooling == MXL_POOLING_CLS);
    CHECK(layout_of("{\"pooling_mode\": \"mean_sqrt_len_tokens\"}", &lay, &err) == MXL_OK && lay.pooling == MXL_POOLING_MEAN_SQRT_LEN);
    CHECK(layout_of("{\"pooling_mode\": \"weightedmean\"}", &lay, &err) == MXL_OK && lay.pooling == MXL_POOLING_WEIGHTED_MEAN);
    /* both forms naming the same mode are one mode */
    CHECK(layout_of("{\"pooling_mode\": \"mean\", \"pooling_mode_mean_tokens\": true}", &lay, &err) == MXL_OK && lay.pooling == MXL_POOLING_MEAN);
    CHECK(layout_of("{\"pooling_mode\": \"mean\", \"pooling_mode_cls_token\": true}", &lay, &err) == MXL_ERR_UNSUPPORTED);
    CHECK(layout_of("{\"pooling_mode\": [\"mean\", \"max\"]}", &lay, &err) == MXL_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "2 pooling modes") != NULL);
    CHECK(layout_of("{\"pooling_mode\": \"median\"}", &lay, &err) == MXL_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "median") != NULL);
    CHECK(layout_of("{\"pooling_mode\": 3}", &lay, &err) == MXL_ERR_FORMAT);
    CHECK(layout_of("{\"pooling_mode\": []}", &lay, &err) == MXL_ERR_FORMAT);
}

static double max_diff(const float *v, json_t *ref, int64_t n) {
    double m = (int64_t)json_array_size(ref) >= n ? 0 : INFINITY;
    for (int64_t i = 0; i < n && i < (int64_t)json_array_size(ref); i++)
        m = fmax(m, fabs(v[i] - json_number_value(json_array_get(ref, i))));
    return m;
}

static void check_embed(bool reference_path, double tol, int *mxl_test_failed_) {
    json_t *ref = reference();
    REQUIRE(ref);
    json_t *er = json_object_get(ref, "embed");
    set_reference_path(reference_path);
    mxl_embed_model *m = NULL;
    mxl_error err;
    mxl_status st = mxl_embed_model_load(fixture_dir("embed"), 2, &m, &err);
    if (st) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == MXL_OK);
    CHECK_EQ_INT(mxl_embed_model_dim(m), 64);
    CHECK_EQ_INT(mxl_embed_model_max_length(m), json_integer_value(json_object_get(er, "max_seq_length")));
    CHECK_EQ_STR(mxl_embed_model_family(m), "Qwen3-Embedding");
    mxl_embed_opts o = {.normalize = MXL_EMBED_NORMALIZE_DEFAULT};
    CHECK(mxl_embed_resolved_pooling(m, &o) == MXL_POOLING_LAST_TOKEN);
    CHECK_EQ_INT(mxl_embed_resolved_normalize(m, &o), 2);

    json_t *cases = json_object_get(er, "cases");
    size_t n = json_array_size(cases);
    REQUIRE(n >= 5);
    const char **texts = mxl_calloc(n, sizeof *texts);
    float *out = mxl_calloc(n * 64, sizeof *out);
    int64_t *ntok = mxl_calloc(n, sizeof *ntok);
    REQUIRE(texts && out && ntok);
    for (size_t i = 0; i < n; i++) texts[i] = json_string_value(json_object_get(json_array_get(cases, i), "text"));

    /* token ids: the tokenizer's <|endoftext|> after the (truncated) text */
    mxl_tokenizer *tok = NULL;
    REQUIRE(mxl_tokenizer_load(fixture_dir("embed"), &tok, &err) == MXL_OK);
    mxl_enc_specials sp;
    REQUIRE(mxl_enc_specials_probe(tok, &sp, &err) == MXL_OK);
    CHECK_EQ_INT(sp.n_pre, 0);
    CHECK_EQ_INT(sp.n_post, 1);
    mxl_token_ids ids = {0};
    for (size_t i = 0; i < n; i++) {
        REQUIRE(mxl_enc_tokenize_single(tok, &sp, texts[i], mxl_embed_model_max_length(m), &ids, NULL, &err) == MXL_OK);
        CHECK(ids_equal(&ids, json_object_get(json_array_get(cases, i), "input_ids")));
    }
    mxl_token_ids_free(&ids);
    mxl_tokenizer_destroy(tok);

    double worst = 0;
    REQUIRE(mxl_embed_batch(m, texts, n, &o, out, ntok, &err) == MXL_OK);
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(cases, i);
        CHECK_EQ_INT(ntok[i], json_array_size(json_object_get(c, "input_ids")));
        double d = max_diff(out + i * 64, json_object_get(c, "embedding"), 64);
        CHECK(d < tol);
        worst = fmax(worst, d);
    }
    /* the query template around the instruction */
    o.instruction = json_string_value(json_object_get(er, "task"));
    REQUIRE(mxl_embed_batch(m, texts, n, &o, out, ntok, &err) == MXL_OK);
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(cases, i);
        CHECK_EQ_INT(ntok[i], json_array_size(json_object_get(c, "instructed_input_ids")));
        double d = max_diff(out + i * 64, json_object_get(c, "instructed_embedding"), 64);
        CHECK(d < tol);
        worst = fmax(worst, d);
    }
    /* Matryoshka: the first 16 components of the unnormalized pooled vector, L2-normalized; the
     * reference vector is already unit-length, so its first 16 renormalized are the same */
    o.instruction = NULL;
    o.dimensions = 16;
    REQUIRE(mxl_embed_batch(m, texts, 2, &o, out, NULL, &err) == MXL_OK);
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_object_get(json_array_get(cases, i), "embedding");
        double nn = 0;
        for (int k = 0; k < 16; k++) nn += pow(json_number_value(json_array_get(e, k)), 2);
        double d = 0;
        for (int k = 0; k < 16; k++) d = fmax(d, fabs(out[i * 16 + k] - json_number_value(json_array_get(e, k)) / sqrt(nn)));
        CHECK(d < tol * 4);
    }
    fprintf(stderr, "  qwen3 embed (%s path): max |diff| %.2e\n", reference_path ? "reference" : "fast", worst);

    /* bad input */
    o.dimensions = 0;
    o.pooling = MXL_POOLING_MEAN;
    CHECK(mxl_embed_batch(m, texts, 1, &o, out, NULL, &err) == MXL_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "last-token") != NULL);
    o.pooling = MXL_POOLING_NONE;
    o.dimensions = 65;
    CHECK(mxl_embed_batch(m, texts, 1, &o, out, NULL, &err) == MXL_ERR_ARG);
    o.dimensions = 0;
    const char *blank = " \n";
    CHECK(mxl_embed_batch(m, &blank, 1, &o, out, NULL, &err) == MXL_ERR_ARG);

    set_reference_path(false);
    mxl_free(texts);
    mxl_free(out);
    mxl_free(ntok);
    mxl_embed_model_destroy(m);
    json_decref(ref);
}

TEST(embed_qwen3_reference_path) {
    bool saved = saved_reference_env();
    check_embed(true, REF_TOL, mxl_test_failed_);
    restore_reference_env(saved);
}

TEST(embed_qwen3_fast_path) {
    bool saved = saved_reference_env();
    check_embed(false, FAST_TOL, mxl_test_failed_);
    restore_reference_env(saved);
}

static void check_rerank(bool reference_path, double tol, int *mxl_test_failed_) {
    json_t *ref = reference();
    REQUIRE(ref);
    json_t *rr = json_object_get(ref, "rerank");
    set_reference_path(reference_path);
    mxl_reranker *r = NULL;
    mxl_error err;
    mxl_status st = mxl_reranker_load(fixture_dir("rerank"), 2, &r, &err);
    if (st) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == MXL_OK);
    CHECK_EQ_STR(mxl_reranker_kind(r), "generative");
    CHECK(mxl_reranker_takes_instruction(r));
    CHECK_EQ_INT(mxl_reranker_max_length(r), json_integer_value(json_object_get(rr, "max_position_embeddings")));
    CHECK_EQ_STR(MXL_RERANK_DEFAULT_INSTRUCTION, json_string_value(json_object_get(rr, "default_instruction")));

    const char *query = json_string_value(json_object_get(rr, "query"));
    json_t *docs_j = json_object_get(rr, "documents");
    size_t n = json_array_size(docs_j);
    const char **docs = mxl_calloc(n, sizeof *docs), **rev = mxl_calloc(n, sizeof *rev);
    double *scores = mxl_calloc(n, sizeof *scores);
    float *logits = mxl_calloc(n, sizeof *logits);
    int64_t *ntok = mxl_calloc(n, sizeof *ntok);
    REQUIRE(docs && rev && scores && logits && ntok);
    for (size_t i = 0; i < n; i++) docs[i] = rev[n - 1 - i] = json_string_value(json_array_get(docs_j, i));
    double worst = 0;
    json_t *run;
    size_t ri;
    json_array_foreach(json_object_get(rr, "runs"), ri, run) {
        json_t *ins = json_object_get(run, "instruction");
        const char *instr = json_is_string(ins) ? json_string_value(ins) : NULL;
        mxl_rerank_opts o = {json_integer_value(json_object_get(run, "max_length")), 0};
        json_t *pairs = json_object_get(run, "pairs");
        REQUIRE(json_array_size(pairs) == n);
        for (int order = 0; order < 2; order++) { /* request order, then reversed */
            st = instr ? mxl_reranker_score_instructed(r, instr, query, order ? rev : docs, n, &o, scores, logits, ntok, &err)
                       : mxl_reranker_score(r, query, order ? rev : docs, n, &o, scores, logits, ntok, &err);
            if (st) fprintf(stderr, "  %s\n", err.msg);
            REQUIRE(st == MXL_OK);
            for (size_t i = 0; i < n; i++) {
                json_t *p = json_array_get(pairs, order ? n - 1 - i : i);
                CHECK_EQ_INT(ntok[i], json_array_size(json_object_get(p, "input_ids")));
                double dl = fabs(logits[i] - json_number_value(json_object_get(p, "logit")));
                double ds = fabs(scores[i] - json_number_value(json_object_get(p, "score")));
                CHECK(dl < tol && ds < tol);
                CHECK(scores[i] > 0 && scores[i] < 1);
                worst = fmax(worst, fmax(dl, ds));
            }
        }
    }
    fprintf(stderr, "  qwen3 rerank (%s path): max |diff| %.2e\n", reference_path ? "reference" : "fast", worst);
    /* bad input */
    const char *blank[2] = {"fine", "\t"};
    CHECK(mxl_reranker_score(r, query, blank, 2, NULL, scores, NULL, NULL, &err) == MXL_ERR_ARG);
    CHECK(mxl_reranker_score(r, " ", docs, n, NULL, scores, NULL, NULL, &err) == MXL_ERR_ARG);
    mxl_rerank_opts tiny = {50, 0}; /* the prompt alone is longer */
    CHECK(mxl_reranker_score(r, query, docs, n, &tiny, scores, NULL, NULL, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "prompt") != NULL);

    set_reference_path(false);
    mxl_free(docs);
    mxl_free(rev);
    mxl_free(scores);
    mxl_free(logits);
    mxl_free(ntok);
    mxl_reranker_destroy(r);
    json_decref(ref);
}

TEST(rerank_qwen3_reference_path) {
    bool saved = saved_reference_env();
    check_rerank(true, REF_TOL, mxl_test_failed_);
    restore_reference_env(saved);
}

TEST(rerank_qwen3_fast_path) {
    bool saved = saved_reference_env();
    check_rerank(false, FAST_TOL, mxl_test_failed_);
    restore_reference_env(saved);
}

TEST(rerank_qwen3_wrong_kinds) {
    mxl_error err;
    mxl_reranker *r = NULL;
    /* an embedding checkpoint is not a reranker */
    CHECK(mxl_reranker_load(fixture_dir("embed"), 1, &r, &err) == MXL_ERR_UNSUPPORTED);
    CHECK(r == NULL);
    CHECK(strstr(err.msg, "embed") != NULL);
    /* a generation checkpoint is not an embedding model */
    mxl_embed_model *m = NULL;
    CHECK(mxl_embed_model_load(fixture_dir("rerank"), 1, &m, &err) == MXL_ERR_UNSUPPORTED);
    CHECK(m == NULL);
    /* classifiers take no instruction */
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/encoders/bert-rerank", mxl_test_repo_root());
    REQUIRE(mxl_reranker_load(path, 1, &r, &err) == MXL_OK);
    CHECK(!mxl_reranker_takes_instruction(r));
    const char *doc = "a document";
    double score;
    CHECK(mxl_reranker_score_instructed(r, "an instruction", "a query", &doc, 1, NULL, &score, NULL, NULL, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "instruction") != NULL);
    CHECK(mxl_reranker_score_instructed(r, "", "a query", &doc, 1, NULL, &score, NULL, NULL, &err) == MXL_OK);
    mxl_reranker_destroy(r);
}

/* Copies src to dst (a small fixture file). */
static bool copy_small(const char *src, const char *dst) {
    FILE *a = fopen(src, "rb"), *b = a ? fopen(dst, "wb") : NULL;
    char buf[1 << 15];
    size_t k;
    bool ok = a && b;
    while (ok && (k = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, k, b) == k;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = false;
    return ok;
}

/* The official Qwen3-Embedding exports are bare Qwen3Model backbones: tensors without the
 * "model." prefix and (8B) untied embeddings declared with no lm_head. The fixture rewritten that
 * way (io/safetensors_write) embeds bit for bit as the original. */
TEST(embed_qwen3_bare_backbone_names) {
    char dir[] = "/tmp/mxl-qwen3bare-XXXXXX", p[600], q[600];
    REQUIRE(mkdtemp(dir) != NULL);
    const char *side[] = {"tokenizer.json", "tokenizer_config.json", "modules.json", "sentence_bert_config.json"};
    for (size_t i = 0; i < sizeof side / sizeof side[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", fixture_dir("embed"), side[i]);
        snprintf(q, sizeof q, "%s/%s", dir, side[i]);
        REQUIRE(copy_small(p, q));
    }
    const char *subs[] = {"1_Pooling", "2_Normalize"};
    for (int i = 0; i < 2; i++) {
        snprintf(q, sizeof q, "%s/%s", dir, subs[i]);
        REQUIRE(mkdir(q, 0755) == 0);
    }
    snprintf(p, sizeof p, "%s/1_Pooling/config.json", fixture_dir("embed"));
    snprintf(q, sizeof q, "%s/1_Pooling/config.json", dir);
    REQUIRE(copy_small(p, q));
    snprintf(p, sizeof p, "%s/config.json", fixture_dir("embed"));
    json_t *cfg = json_load_file(p, 0, NULL);
    REQUIRE(cfg);
    json_object_set_new(cfg, "architectures", json_pack("[s]", "Qwen3Model"));
    json_object_set_new(cfg, "tie_word_embeddings", json_false());
    snprintf(q, sizeof q, "%s/config.json", dir);
    REQUIRE(json_dump_file(cfg, q, 0) == 0);
    json_decref(cfg);
    /* the weights, renamed */
    mxl_error err;
    mxl_st_model *src = NULL;
    REQUIRE(mxl_st_model_open(fixture_dir("embed"), &src, &err) == MXL_OK);
    size_t nt = mxl_st_model_tensor_count(src), k = 0;
    mxl_st_out *outs = mxl_calloc(nt, sizeof *outs);
    REQUIRE(outs);
    for (size_t i = 0; i < nt; i++) {
        const mxl_st_entry *e = mxl_st_model_tensor_at(src, i);
        if (strncmp(e->name, "lm_head.", 8) == 0) continue;
        mxl_st_out *o = &outs[k++];
        snprintf(o->name, sizeof o->name, "%s", strncmp(e->name, "model.", 6) == 0 ? e->name + 6 : e->name);
        o->dtype = e->tensor.dtype;
        o->ndim = e->tensor.ndim;
        memcpy(o->shape, e->tensor.shape, sizeof o->shape);
    }
    snprintf(q, sizeof q, "%s/model.safetensors", dir);
    mxl_st_writer *w = NULL;
    REQUIRE(mxl_st_writer_create(q, outs, k, "pt", &w, &err) == MXL_OK);
    for (size_t i = 0; i < nt; i++) {
        const mxl_st_entry *e = mxl_st_model_tensor_at(src, i);
        if (strncmp(e->name, "lm_head.", 8) == 0) continue;
        REQUIRE(mxl_st_writer_put(w, e->tensor.data, e->tensor.nbytes, &err) == MXL_OK);
    }
    REQUIRE(mxl_st_writer_finish(w, &err) == MXL_OK);
    mxl_free(outs);
    mxl_st_model_close(src);

    const char *texts[] = {"A bare backbone.", "Qwen3-Embedding without the model. prefix"};
    float a[2 * 64], b[2 * 64];
    mxl_embed_opts o = {.normalize = MXL_EMBED_NORMALIZE_DEFAULT};
    mxl_embed_model *m1 = NULL, *m2 = NULL;
    REQUIRE(mxl_embed_model_load(fixture_dir("embed"), 1, &m1, &err) == MXL_OK);
    mxl_status st = mxl_embed_model_load(dir, 1, &m2, &err);
    if (st) fprintf(stderr, "  %s\n", err.msg);
    CHECK(st == MXL_OK);
    if (st == MXL_OK) {
        REQUIRE(mxl_embed_batch(m1, texts, 2, &o, a, NULL, &err) == MXL_OK);
        REQUIRE(mxl_embed_batch(m2, texts, 2, &o, b, NULL, &err) == MXL_OK);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    mxl_embed_model_destroy(m1);
    mxl_embed_model_destroy(m2);
    const char *files[] = {"tokenizer.json", "tokenizer_config.json", "modules.json", "sentence_bert_config.json",
                           "1_Pooling/config.json", "config.json", "model.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(q, sizeof q, "%s/%s", dir, files[i]);
        remove(q);
    }
    for (int i = 0; i < 2; i++) {
        snprintf(q, sizeof q, "%s/%s", dir, subs[i]);
        rmdir(q);
    }
    rmdir(dir);
}
