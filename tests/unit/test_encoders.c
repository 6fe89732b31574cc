/* test_encoders.c - XLM-RoBERTa, ModernBERT and the BERT / XLM-R / ModernBERT cross-encoders
 * against PyPI transformers, tokenizers and sentence-transformers on the tiny random checkpoints
 * of tests/fixtures/encoders (made by gen_encoder_fixtures.py; reference.json):
 *   - encoder last hidden states on the reference token ids (one by one and batched), 1e-4;
 *   - token ids of single texts (truncated to max_seq_length) and of (query, document) pairs with
 *     token types (longest_first truncation at two limits), exactly;
 *   - SentenceTransformer.encode vectors, the raw mean / CLS vectors and sentence-transformers'
 *     other Pooling modes through the embedding engine, 1e-4;
 *   - reranker logits (1e-4) and CrossEncoder scores (1e-5) through the reranking engine at
 *     batch sizes 1 and 3;
 *   - the longest_first split and the ranking order against their definitions; bad inputs. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "engine/embed.h"
#include "engine/encoder_input.h"
#include "engine/rerank.h"
#include "models/checkpoint.h"
#include "models/encoder.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

static json_t *reference(void) { return mxl_test_load_json("tests/fixtures/encoders/reference.json"); }

static json_t *model_ref(json_t *ref, const char *dir) {
    json_t *m;
    size_t i;
    json_array_foreach(json_object_get(ref, "models"), i, m) {
        if (strcmp(json_string_value(json_object_get(m, "dir")), dir) == 0) return m;
    }
    return NULL;
}

static const char *fixture_dir(const char *name) {
    static char path[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/tests/fixtures/encoders/%s", mxl_test_repo_root(), name);
    return path[k];
}

static double max_diff(const float *a, json_t *ref, size_t n) {
    double m = json_array_size(ref) == n ? 0 : INFINITY;
    for (size_t i = 0; i < n && i < json_array_size(ref); i++)
        m = fmax(m, fabs(a[i] - json_number_value(json_array_get(ref, i))));
    return m;
}

static bool ids_equal(const int32_t *ids, size_t n, json_t *ref) {
    if (json_array_size(ref) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (ids[i] != json_integer_value(json_array_get(ref, i))) return false;
    return true;
}

static int32_t *json_ids(json_t *a, size_t *n) {
    *n = json_array_size(a);
    int32_t *v = mxl_malloc((*n ? *n : 1) * sizeof *v);
    for (size_t i = 0; v && i < *n; i++) v[i] = (int32_t)json_integer_value(json_array_get(a, i));
    return v;
}

/* Encoder forward on the reference ids: each case alone, then all cases in one batch. */
static void check_encoder_hidden(const char *dir, int *mxl_test_failed_) {
    json_t *ref = reference();
    REQUIRE(ref);
    json_t *mr = model_ref(ref, dir);
    REQUIRE(mr);
    mxl_checkpoint *ck = NULL;
    mxl_error err;
    REQUIRE(mxl_checkpoint_open(fixture_dir(dir), &ck, &err) == MXL_OK);
    mxl_encoder enc;
    mxl_status st = mxl_encoder_load(ck, &enc, &err);
    if (st) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == MXL_OK);
    int64_t H = enc.hidden;
    CHECK_EQ_INT(H, json_integer_value(json_object_get(mr, "hidden_size")));
    json_t *cases = json_object_get(mr, "cases");
    size_t n_cases = json_array_size(cases), total = 0;
    int32_t *all = mxl_malloc(4096 * sizeof *all);
    int64_t starts[32] = {0};
    float *hid = mxl_malloc(4096 * (size_t)H * sizeof(float));
    REQUIRE(all && hid && n_cases < 32);
    double worst = 0;
    for (size_t c = 0; c < n_cases; c++) {
        json_t *cs = json_array_get(cases, c);
        size_t n;
        int32_t *ids = json_ids(json_object_get(cs, "input_ids"), &n);
        REQUIRE(ids && total + n <= 4096);
        int64_t st1[2] = {0, (int64_t)n};
        mxl_encoder_batch b = {ids, NULL, st1, 1};
        REQUIRE(mxl_encoder_forward(&enc, &b, NULL, hid, &err) == MXL_OK);
        double d = max_diff(hid, json_object_get(cs, "hidden"), n * (size_t)H);
        worst = fmax(worst, d);
        CHECK(d < 1e-4);
        memcpy(all + total, ids, n * sizeof *ids);
        total += n;
        starts[c + 1] = (int64_t)total;
        mxl_free(ids);
    }
    /* batched, with a thread pool: the same numbers */
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    mxl_encoder_batch b = {all, NULL, starts, (int64_t)n_cases};
    REQUIRE(mxl_encoder_forward(&enc, &b, pool, hid, &err) == MXL_OK);
    for (size_t c = 0; c < n_cases; c++) {
        json_t *cs = json_array_get(cases, c);
        double d = max_diff(hid + starts[c] * H, json_object_get(cs, "hidden"), (size_t)(starts[c + 1] - starts[c]) * (size_t)H);
        CHECK(d < 1e-4);
        worst = fmax(worst, d);
    }
    fprintf(stderr, "  %s: %zu sequences, hidden max |diff| %.2e\n", dir, n_cases, worst);
    /* hostile input: an id past the vocabulary, too many tokens, a bad token type */
    int32_t bad[2] = {all[0], 1 << 30};
    int64_t st2[2] = {0, 2};
    mxl_encoder_batch bb = {bad, NULL, st2, 1};
    CHECK(mxl_encoder_forward(&enc, &bb, pool, hid, &err) == MXL_ERR_ARG);
    int32_t *many = mxl_calloc((size_t)enc.max_tokens + 1, sizeof *many);
    int64_t st3[2] = {0, enc.max_tokens + 1};
    mxl_encoder_batch bm = {many, NULL, st3, 1};
    CHECK(mxl_encoder_forward(&enc, &bm, pool, hid, &err) == MXL_ERR_ARG);
    if (enc.arch != MXL_ENCODER_MODERNBERT) {
        int32_t types[2] = {0, 7};
        int64_t st4[2] = {0, 2};
        mxl_encoder_batch bt = {all, types, st4, 1};
        CHECK(mxl_encoder_forward(&enc, &bt, pool, hid, &err) == MXL_ERR_ARG);
    }
    mxl_free(many);
    mxl_threadpool_destroy(pool);
    mxl_free(all);
    mxl_free(hid);
    mxl_encoder_free(&enc);
    mxl_checkpoint_close(ck);
    json_decref(ref);
}

TEST(encoder_xlm_roberta_hidden_states) { check_encoder_hidden("xlmr", mxl_test_failed_); }
TEST(encoder_modernbert_hidden_states) { check_encoder_hidden("modernbert", mxl_test_failed_); }

static mxl_pooling pooling_of(const char *st_mode) {
    if (strcmp(st_mode, "max") == 0) return MXL_POOLING_MAX;
    if (strcmp(st_mode, "mean_sqrt_len_tokens") == 0) return MXL_POOLING_MEAN_SQRT_LEN;
    if (strcmp(st_mode, "weightedmean") == 0) return MXL_POOLING_WEIGHTED_MEAN;
    return MXL_POOLING_LAST_TOKEN;
}

/* The embedding engine end to end: tokenization, truncation, pooling, normalization. */
static void check_embed(const char *dir, const char *pooling, int *mxl_test_failed_) {
    json_t *ref = reference();
    REQUIRE(ref);
    json_t *mr = model_ref(ref, dir);
    REQUIRE(mr);
    mxl_embed_model *m = NULL;
    mxl_error err;
    mxl_status st = mxl_embed_model_load(fixture_dir(dir), 2, &m, &err);
    if (st) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == MXL_OK);
    int64_t H = mxl_embed_model_dim(m);
    CHECK_EQ_INT(mxl_embed_model_max_length(m), json_integer_value(json_object_get(mr, "max_seq_length")));
    mxl_embed_opts def = {0};
    def.normalize = MXL_EMBED_NORMALIZE_DEFAULT;
    CHECK_EQ_STR(mxl_pooling_name(mxl_embed_resolved_pooling(m, &def)), pooling);
    CHECK_EQ_INT(mxl_embed_resolved_normalize(m, &def), 2);
    /* token ids straight from the input helpers */
    mxl_tokenizer *tok = NULL;
    REQUIRE(mxl_tokenizer_load(fixture_dir(dir), &tok, &err) == MXL_OK);
    mxl_enc_specials sp;
    REQUIRE(mxl_enc_specials_probe(tok, &sp, &err) == MXL_OK);
    json_t *cases = json_object_get(mr, "cases");
    size_t n = json_array_size(cases);
    const char **texts = mxl_calloc(n, sizeof *texts);
    float *v = mxl_malloc(n * (size_t)H * sizeof(float));
    int64_t *ntok = mxl_calloc(n, sizeof *ntok);
    REQUIRE(texts && v && ntok);
    double worst = 0;
    json_t *c;
    size_t i;
    mxl_token_ids ids = {0};
    json_array_foreach(cases, i, c) {
        texts[i] = json_string_value(json_object_get(c, "text"));
        REQUIRE(mxl_enc_tokenize_single(tok, &sp, texts[i], mxl_embed_model_max_length(m), &ids, NULL, &err) == MXL_OK);
        CHECK(ids_equal(ids.ids, ids.n, json_object_get(c, "input_ids")));
    }
    mxl_token_ids_free(&ids);
    /* defaults (checkpoint pooling + Normalize) in batches of 3 = sentence-transformers */
    def.batch_size = 3;
    REQUIRE(mxl_embed_batch(m, texts, n, &def, v, ntok, &err) == MXL_OK);
    json_array_foreach(cases, i, c) {
        CHECK_EQ_INT(ntok[i], json_array_size(json_object_get(c, "input_ids")));
        double d = max_diff(v + i * (size_t)H, json_object_get(c, "sentence_transformers"), (size_t)H);
        worst = fmax(worst, d);
        CHECK(d < 1e-4);
    }
    /* raw mean / CLS and the other Pooling modes, one text at a time */
    json_array_foreach(cases, i, c) {
        mxl_embed_opts o = {.pooling = MXL_POOLING_MEAN, .normalize = -1};
        REQUIRE(mxl_embed_text(m, texts[i], &o, v, NULL, &err) == MXL_OK);
        double d = max_diff(v, json_object_get(c, "mean"), (size_t)H);
        o.pooling = MXL_POOLING_CLS;
        REQUIRE(mxl_embed_text(m, texts[i], &o, v, NULL, &err) == MXL_OK);
        d = fmax(d, max_diff(v, json_object_get(c, "cls"), (size_t)H));
        const char *mode;
        json_t *pv;
        json_object_foreach(json_object_get(c, "pooling"), mode, pv) {
            o.pooling = pooling_of(mode);
            REQUIRE(mxl_embed_text(m, texts[i], &o, v, NULL, &err) == MXL_OK);
            double dm = max_diff(v, pv, (size_t)H);
            if (dm >= 1e-4) fprintf(stderr, "  pooling %s: %.2e\n", mode, dm);
            d = fmax(d, dm);
        }
        worst = fmax(worst, d);
        CHECK(d < 1e-4);
    }
    fprintf(stderr, "  %s: %zu texts, embedding max |diff| %.2e\n", dir, n, worst);
    /* an instruction is text prepended as written */
    mxl_embed_opts with = def, plain = def;
    with.instruction = "query: ";
    float a[512], b[512];
    REQUIRE(H <= 512);
    int64_t na = 0, nb = 0;
    REQUIRE(mxl_embed_text(m, "The cat sat on the mat.", &with, a, &na, &err) == MXL_OK);
    REQUIRE(mxl_embed_text(m, "query: The cat sat on the mat.", &plain, b, &nb, &err) == MXL_OK);
    CHECK_EQ_INT(na, nb);
    CHECK(memcmp(a, b, (size_t)H * sizeof(float)) == 0);
    /* bad input */
    const char *blank[2] = {"ok", " \n\t"};
    CHECK(mxl_embed_batch(m, blank, 2, &def, v, NULL, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "input 1") != NULL);
    CHECK(mxl_embed_batch(m, blank, 0, &def, v, NULL, &err) == MXL_ERR_ARG);
    mxl_embed_opts wide = def;
    wide.dimensions = H + 1;
    CHECK(mxl_embed_text(m, "x", &wide, v, NULL, &err) == MXL_ERR_ARG);
    mxl_tokenizer_destroy(tok);
    mxl_free(texts);
    mxl_free(v);
    mxl_free(ntok);
    mxl_embed_model_destroy(m);
    json_decref(ref);
}

TEST(embed_xlm_roberta_matches_sentence_transformers) { check_embed("xlmr", "cls", mxl_test_failed_); }
TEST(embed_modernbert_matches_sentence_transformers) { check_embed("modernbert", "mean", mxl_test_failed_); }

static void check_rerank(const char *dir, int *mxl_test_failed_) {
    json_t *ref = reference();
    REQUIRE(ref);
    json_t *mr = model_ref(ref, dir);
    REQUIRE(mr);
    mxl_reranker *r = NULL;
    mxl_error err;
    mxl_status st = mxl_reranker_load(fixture_dir(dir), 2, &r, &err);
    if (st) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(st == MXL_OK);
    CHECK_EQ_INT(mxl_reranker_max_length(r), json_integer_value(json_object_get(mr, "max_length")));
    CHECK(!mxl_reranker_takes_instruction(r));
    mxl_tokenizer *tok = NULL;
    REQUIRE(mxl_tokenizer_load(fixture_dir(dir), &tok, &err) == MXL_OK);
    mxl_enc_specials sp;
    REQUIRE(mxl_enc_specials_probe(tok, &sp, &err) == MXL_OK);
    mxl_checkpoint *ck = NULL;
    REQUIRE(mxl_checkpoint_open(fixture_dir(dir), &ck, &err) == MXL_OK);
    bool double_sep = strcmp(ck->config.model_type, "xlm-roberta") == 0;
    mxl_checkpoint_close(ck);

    json_t *docs_j = json_object_get(mr, "documents");
    size_t n = json_array_size(docs_j);
    const char **docs = mxl_calloc(n, sizeof *docs);
    double *scores = mxl_calloc(n, sizeof *scores);
    float *logits = mxl_calloc(n, sizeof *logits);
    int64_t *ntok = mxl_calloc(n, sizeof *ntok);
    REQUIRE(docs && scores && logits && ntok);
    for (size_t i = 0; i < n; i++) docs[i] = json_string_value(json_array_get(docs_j, i));
    double worst_logit = 0, worst_score = 0;
    json_t *run;
    size_t ri;
    json_array_foreach(json_object_get(mr, "runs"), ri, run) {
        const char *q = json_string_value(json_object_get(run, "query"));
        int64_t max_len = json_integer_value(json_object_get(run, "max_length"));
        json_t *pairs = json_object_get(run, "pairs");
        mxl_token_ids ids = {0}, types = {0};
        for (size_t i = 0; i < n; i++) {
            json_t *p = json_array_get(pairs, i);
            REQUIRE(mxl_enc_tokenize_pair(tok, &sp, double_sep, q, docs[i], max_len, &ids, &types, &err) == MXL_OK);
            CHECK(ids_equal(ids.ids, ids.n, json_object_get(p, "input_ids")));
            CHECK(ids_equal(types.ids, types.n, json_object_get(p, "type_ids")));
        }
        mxl_token_ids_free(&ids);
        mxl_token_ids_free(&types);
        for (int64_t bs = 1; bs <= 3; bs += 2) {
            mxl_rerank_opts o = {max_len, bs};
            REQUIRE(mxl_reranker_score(r, q, docs, n, &o, scores, logits, ntok, &err) == MXL_OK);
            for (size_t i = 0; i < n; i++) {
                json_t *p = json_array_get(pairs, i);
                CHECK_EQ_INT(ntok[i], json_array_size(json_object_get(p, "input_ids")));
                double dl = fabs(logits[i] - json_number_value(json_object_get(p, "logit")));
                double ds = fabs(scores[i] - json_number_value(json_object_get(p, "score")));
                json_t *ce = json_object_get(p, "cross_encoder");
                if (ce) ds = fmax(ds, fabs(scores[i] - json_number_value(ce)));
                CHECK(dl < 1e-4 && ds < 1e-5);
                CHECK(scores[i] >= 0 && scores[i] <= 1);
                worst_logit = fmax(worst_logit, dl);
                worst_score = fmax(worst_score, ds);
            }
        }
    }
    fprintf(stderr, "  %s: logit max |diff| %.2e, score max |diff| %.2e\n", dir, worst_logit, worst_score);
    /* bad input */
    const char *blank[2] = {"fine", "   "};
    CHECK(mxl_reranker_score(r, "q", blank, 2, NULL, scores, NULL, NULL, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "document 1") != NULL);
    CHECK(mxl_reranker_score(r, " ", docs, n, NULL, scores, NULL, NULL, &err) == MXL_ERR_ARG);
    CHECK(mxl_reranker_score(r, "q", docs, 0, NULL, scores, NULL, NULL, &err) == MXL_ERR_ARG);
    mxl_rerank_opts tiny = {3, 0};
    CHECK(mxl_reranker_score(r, "q", docs, n, &tiny, scores, NULL, NULL, &err) == MXL_ERR_ARG);
    mxl_tokenizer_destroy(tok);
    mxl_free(docs);
    mxl_free(scores);
    mxl_free(logits);
    mxl_free(ntok);
    mxl_reranker_destroy(r);
    json_decref(ref);
}

TEST(rerank_bert_cross_encoder) { check_rerank("bert-rerank", mxl_test_failed_); }
TEST(rerank_xlm_roberta_cross_encoder) { check_rerank("xlmr-rerank", mxl_test_failed_); }
TEST(rerank_modernbert_cross_encoder) { check_rerank("modernbert-rerank", mxl_test_failed_); }

TEST(rerank_refuses_non_rerankers) {
    mxl_reranker *r = NULL;
    mxl_error err;
    CHECK(mxl_reranker_load(fixture_dir("xlmr"), 1, &r, &err) == MXL_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "not a reranker") != NULL);
    CHECK(r == NULL);
    mxl_embed_model *m = NULL;
    CHECK(mxl_embed_model_load(fixture_dir("bert-rerank"), 1, &m, &err) == MXL_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "not an embedding model") != NULL);
    CHECK(m == NULL);
}

/* The split against its definition (HF tokenizers utils/truncation.rs, LongestFirst): nothing
 * is cut when both fit; otherwise the shorter keeps max(its length, budget - its length) capped
 * by the budget's halves, the total is exactly the budget, and neither grows. */
TEST(encoder_input_longest_first) {
    for (int64_t na = 0; na <= 20; na++)
        for (int64_t nb = 0; nb <= 20; nb++)
            for (int64_t budget = 2; budget <= 24; budget++) {
                int64_t ka, kb;
                mxl_enc_truncate_longest_first(na, nb, budget, &ka, &kb);
                if (na + nb <= budget) {
                    CHECK(ka == na && kb == nb);
                    continue;
                }
                CHECK(ka + kb == budget);
                CHECK(ka <= na && kb <= nb);
                int64_t s = na < nb ? na : nb;
                if (s <= budget / 2) CHECK((na <= nb ? ka : kb) == s); /* the short one is kept whole */
                else CHECK(ka >= budget / 2 && kb >= budget / 2);      /* both halved */
            }
}

TEST(rerank_order_is_descending_and_stable) {
    double s[7] = {0.2, 0.9, NAN, 0.2, 0.5, 0.9, 0.1};
    size_t order[7];
    mxl_rerank_order(s, 7, order);
    bool seen[7] = {false};
    for (size_t i = 0; i < 7; i++) {
        REQUIRE(order[i] < 7);
        CHECK(!seen[order[i]]);
        seen[order[i]] = true;
        if (i > 0) {
            double a = s[order[i - 1]], b = s[order[i]];
            CHECK(isnan(b) || (!isnan(a) && (a > b || (a == b && order[i - 1] < order[i]))));
        }
    }
    CHECK(isnan(s[order[6]]));
}

/* A copy of fixture `name` whose config.json gets `key` = `value` (JSON text; NULL deletes it);
 * the other files are symlinks. Returns the directory (static buffer) or NULL. */
static const char *patched_fixture(const char *name, const char *key, const char *value) {
    static char dir[256];
    snprintf(dir, sizeof dir, "/tmp/mxl-enc-XXXXXX");
    if (!mkdtemp(dir)) return NULL;
    static const char *const files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json"};
    char src[1200], dst[1200];
    for (size_t i = 0; i < 3; i++) {
        snprintf(src, sizeof src, "%s/%s", fixture_dir(name), files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        if (symlink(src, dst)) return NULL;
    }
    snprintf(src, sizeof src, "%s/config.json", fixture_dir(name));
    json_t *cfg = json_load_file(src, 0, NULL);
    if (!cfg) return NULL;
    if (value) json_object_set_new(cfg, key, json_loads(value, JSON_DECODE_ANY, NULL));
    else json_object_del(cfg, key);
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    int rc = json_dump_file(cfg, dst, 0);
    json_decref(cfg);
    return rc == 0 ? dir : NULL;
}

static void remove_patched(const char *dir) {
    static const char *const files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json", "config.json"};
    char p[1200];
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

static mxl_status load_patched(const char *name, const char *key, const char *value, const char *want_in_msg) {
    const char *dir = patched_fixture(name, key, value);
    if (!dir) return MXL_ERR_IO;
    mxl_checkpoint *ck = NULL;
    mxl_error err = {0};
    mxl_status st = mxl_checkpoint_open(dir, &ck, &err);
    if (!st) {
        mxl_encoder enc;
        st = mxl_encoder_load(ck, &enc, &err);
        if (!st) mxl_encoder_free(&enc);
    }
    if (st && want_in_msg && !strstr(err.msg, want_in_msg)) {
        fprintf(stderr, "  message '%s' lacks '%s'\n", err.msg, want_in_msg);
        st = MXL_ERR_INTERNAL;
    }
    mxl_checkpoint_close(ck);
    remove_patched(dir);
    return st;
}

TEST(encoder_refuses_bad_configs) {
    CHECK(load_patched("modernbert", "layer_types", "[\"full_attention\"]", "layer_types") == MXL_ERR_FORMAT);
    CHECK(load_patched("modernbert", "layer_types", "[\"full_attention\", \"chunked\", \"full_attention\"]", "layer_types") == MXL_ERR_FORMAT);
    CHECK(load_patched("modernbert", "rope_parameters", "{\"sliding_attention\": {\"rope_type\": \"yarn\", \"rope_theta\": 10.0}}", "rope_type") == MXL_ERR_UNSUPPORTED);
    CHECK(load_patched("modernbert", "hidden_activation", "\"mish\"", "mish") == MXL_ERR_UNSUPPORTED);
    CHECK(load_patched("modernbert", "norm_bias", "true", "embeddings.norm.bias") == MXL_ERR_FORMAT);
    CHECK(load_patched("modernbert", "global_attn_every_n_layers", "0", NULL) == MXL_OK); /* layer_types decide */
    CHECK(load_patched("xlmr", "position_embedding_type", "\"relative_key\"", "relative_key") == MXL_ERR_UNSUPPORTED);
    CHECK(load_patched("xlmr", "hidden_size", "64", "word_embeddings") == MXL_ERR_FORMAT);
    CHECK(load_patched("xlmr", "pad_token_id", "70", "pad_token_id") == MXL_ERR_FORMAT);
    CHECK(load_patched("xlmr", "num_attention_heads", "5", NULL) == MXL_ERR_FORMAT);
    CHECK(load_patched("xlmr", "type_vocab_size", "2", "token_type_embeddings") == MXL_ERR_FORMAT);
}
