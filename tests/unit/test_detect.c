/* test_detect.c - architecture / task detection, one test per rule of the spec's "Model
 * Detection" section and table notes (../shared/spec/supported-models.md), on config.json text
 * parsed by the real config parser, temporary checkpoint directories with sentence-transformers
 * files, and the real all-MiniLM-L6-v2 snapshot in the model store. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models/config.h"
#include "models/detect.h"
#include "test.h"

/* Parses `json` and detects; the detection's family pointer outlives the config. */
static mxl_status detect_json(const char *json, const char *dir, mxl_detection *d, mxl_error *e) {
    mxl_model_config cfg;
    mxl_error_clear(e);
    mxl_status s = mxl_model_config_parse_json(json, strlen(json), "config.json", &cfg, e);
    if (s) {
        fprintf(stderr, "  config parse failed: %s\n", e->msg);
        return s;
    }
    s = mxl_model_detect(&cfg, dir, d, e);
    mxl_model_config_free(&cfg);
    return s;
}

/* Expects success with the given family id and task. */
#define EXPECT_FAMILY(json, dir, fam, task_)                                                      \
    do {                                                                                          \
        mxl_detection d_;                                                                         \
        mxl_error e_;                                                                             \
        mxl_status s_ = detect_json((json), (dir), &d_, &e_);                                     \
        if (s_) fprintf(stderr, "  detect failed: %s\n", e_.msg);                                 \
        REQUIRE(s_ == MXL_OK);                                                                    \
        REQUIRE(d_.family);                                                                       \
        CHECK_EQ_STR(d_.family->id, (fam));                                                       \
        CHECK_EQ_INT(d_.task, (task_));                                                           \
        CHECK(d_.reason[0] != '\0');                                                              \
    } while (0)

/* ---- temporary checkpoint directories ---- */

typedef struct tmpdir {
    char root[128];
    char paths[16][256]; /* created files and sub-directories, removed in reverse order */
    int n;
} tmpdir;

static void td_init(tmpdir *t) {
    snprintf(t->root, sizeof t->root, "/tmp/mxl_detect_XXXXXX");
    if (!mkdtemp(t->root)) {
        perror("mkdtemp");
        abort();
    }
    t->n = 0;
}

/* (the root is copied first: gcc's -Wrestrict cannot tell the struct's two arrays apart) */
static void td_path(tmpdir *t, const char *sub) {
    char root[sizeof t->root];
    memcpy(root, t->root, sizeof root);
    snprintf(t->paths[t->n], sizeof t->paths[0], "%s/%s", root, sub);
}

static void td_mkdir(tmpdir *t, const char *sub) {
    td_path(t, sub);
    if (mkdir(t->paths[t->n], 0700) != 0) {
        perror("mkdir");
        abort();
    }
    t->n++;
}

static void td_write(tmpdir *t, const char *sub, const char *text) {
    td_path(t, sub);
    FILE *f = fopen(t->paths[t->n], "wb");
    if (!f || fputs(text, f) < 0) {
        perror("write");
        abort();
    }
    fclose(f);
    t->n++;
}

static void td_free(tmpdir *t) {
    for (int i = t->n - 1; i >= 0; i--) remove(t->paths[i]);
    rmdir(t->root);
}

/* ---- 1. reranker heads first ---- */

TEST(detect_one_label_bert_sequence_classifier_is_reranker) {
    /* cross-encoder/ms-marco-MiniLM-L6-v2 declares one label */
    const char *cfg = "{\"model_type\":\"bert\",\"architectures\":[\"BertForSequenceClassification\"],"
                      "\"id2label\":{\"0\":\"LABEL_0\"},\"label2id\":{\"LABEL_0\":0},\"hidden_size\":384,"
                      "\"num_attention_heads\":12,\"num_hidden_layers\":6,\"vocab_size\":30522}";
    EXPECT_FAMILY(cfg, NULL, "bert_cross_encoder", MXL_TASK_RERANK);
}

TEST(detect_reranker_wins_over_sentence_transformers_pooling) {
    /* a one-label head selects reranking even where embedding layout files exist */
    tmpdir t;
    td_init(&t);
    td_mkdir(&t, "1_Pooling");
    td_write(&t, "1_Pooling/config.json", "{\"pooling_mode_cls_token\": true}");
    EXPECT_FAMILY("{\"model_type\":\"xlm-roberta\",\"architectures\":[\"XLMRobertaForSequenceClassification\"],\"num_labels\":1}",
                  t.root, "xlm_roberta_cross_encoder", MXL_TASK_RERANK);
    td_free(&t);
}

TEST(detect_modernbert_reranker_and_multilabel_refused) {
    EXPECT_FAMILY("{\"model_type\":\"modernbert\",\"architectures\":[\"ModernBertForSequenceClassification\"],\"num_labels\":1}",
                  NULL, "modernbert_cross_encoder", MXL_TASK_RERANK);
    mxl_detection d;
    mxl_error e;
    /* two labels: a classifier, not a reranker; refused by name rather than embedded */
    mxl_status s = detect_json("{\"model_type\":\"bert\",\"architectures\":[\"BertForSequenceClassification\"],"
                               "\"id2label\":{\"0\":\"NEG\",\"1\":\"POS\"}}", NULL, &d, &e);
    CHECK_EQ_INT(s, MXL_ERR_UNSUPPORTED);
    CHECK(strstr(e.msg, "BertForSequenceClassification") != NULL);
    CHECK(strstr(e.msg, "num_labels=2") != NULL);
}

TEST(detect_token_classifier_is_tag) {
    EXPECT_FAMILY("{\"model_type\":\"bert\",\"architectures\":[\"BertForTokenClassification\"],\"num_labels\":9}",
                  NULL, "token_classifier", MXL_TASK_TAG);
}

/* ---- 2. embedding rules ---- */

TEST(detect_encoder_only_model_types_embed) {
    EXPECT_FAMILY("{\"model_type\":\"bert\",\"architectures\":[\"BertModel\"]}", NULL, "bert_embedding", MXL_TASK_EMBED);
    EXPECT_FAMILY("{\"model_type\":\"xlm-roberta\",\"architectures\":[\"XLMRobertaModel\"]}", NULL, "xlm_roberta_embedding", MXL_TASK_EMBED);
    EXPECT_FAMILY("{\"model_type\":\"modernbert\"}", NULL, "modernbert_embedding", MXL_TASK_EMBED);
    EXPECT_FAMILY("{\"model_type\":\"siglip\",\"vision_config\":{\"hidden_size\":768}}", NULL, "siglip_text", MXL_TASK_EMBED);
    EXPECT_FAMILY("{\"model_type\":\"llama_bidirec\"}", NULL, "llama_bidirectional", MXL_TASK_EMBED);
    EXPECT_FAMILY("{\"model_type\":\"embedding_gemma2_text\"}", NULL, "embedding_gemma2", MXL_TASK_EMBED);
}

TEST(detect_minilm_snapshot_sentence_transformers) {
    const char *home = getenv("HOME");
    REQUIRE(home);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/.cache/mlxcel/models/sentence-transformers/all-MiniLM-L6-v2", home);
    char pool[600];
    snprintf(pool, sizeof pool, "%s/1_Pooling/config.json", dir);
    struct stat st;
    if (stat(pool, &st) != 0) fprintf(stderr, "  missing model snapshot %s\n", dir);
    REQUIRE(stat(pool, &st) == 0);
    mxl_model_config cfg;
    mxl_error e;
    mxl_status s = mxl_model_config_load_dir(dir, &cfg, &e);
    if (s) fprintf(stderr, "  %s\n", e.msg);
    REQUIRE(s == MXL_OK);
    mxl_detection d;
    s = mxl_model_detect(&cfg, dir, &d, &e);
    mxl_model_config_free(&cfg);
    if (s) fprintf(stderr, "  %s\n", e.msg);
    REQUIRE(s == MXL_OK);
    CHECK_EQ_STR(d.family->id, "bert_embedding");
    CHECK_EQ_INT(d.task, MXL_TASK_EMBED);
    /* all-MiniLM-L6-v2: Transformer -> mean Pooling (1_Pooling) -> Normalize (its model card) */
    CHECK(d.st.has_modules_json);
    CHECK(d.st.has_pooling);
    CHECK_EQ_STR(d.st.pooling_path, "1_Pooling");
    CHECK_EQ_INT(d.st.pooling, MXL_POOLING_MEAN);
    CHECK(d.st.normalize);
    CHECK_EQ_INT(d.st.n_dense, 0);
}

TEST(detect_known_embedding_architectures) {
    /* nvidia/llama-nemotron-embed: a llama key with the bidirectional class */
    EXPECT_FAMILY("{\"model_type\":\"llama\",\"architectures\":[\"LlamaBidirectionalModel\"]}", NULL,
                  "llama_bidirectional", MXL_TASK_EMBED);
    EXPECT_FAMILY("{\"model_type\":\"lfm2\",\"architectures\":[\"Lfm2BidirectionalModel\"]}", NULL, "lfm2_embedding",
                  MXL_TASK_EMBED);
    EXPECT_FAMILY("{\"model_type\":\"embedding_gemma2\",\"architectures\":[\"EmbeddingGemma2Model\"]}", NULL,
                  "embedding_gemma2", MXL_TASK_EMBED);
    EXPECT_FAMILY("{\"model_type\":\"idefics3\",\"architectures\":[\"ColIdefics3\"]}", NULL, "colidefics3", MXL_TASK_EMBED);
    /* the same keys with generation classes stay generators */
    EXPECT_FAMILY("{\"model_type\":\"llama\",\"architectures\":[\"LlamaForCausalLM\"]}", NULL, "llama", MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"model_type\":\"lfm2\",\"architectures\":[\"Lfm2ForCausalLM\"]}", NULL, "lfm2", MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"model_type\":\"idefics3\",\"vision_config\":{\"hidden_size\":768}}", NULL, "smolvlm", MXL_TASK_GENERATE);
}

TEST(detect_non_causal_configs_embed) {
    /* EmbeddingGemma: gemma3_text with bidirectional attention; Nemotron-3-Embed: non-causal ministral3 */
    EXPECT_FAMILY("{\"model_type\":\"gemma3_text\",\"use_bidirectional_attention\":true}", NULL, "embeddinggemma", MXL_TASK_EMBED);
    EXPECT_FAMILY("{\"model_type\":\"ministral3\",\"is_causal\":false}", NULL, "nemotron3_embed", MXL_TASK_EMBED);
    EXPECT_FAMILY("{\"model_type\":\"gemma3_text\",\"architectures\":[\"Gemma3ForCausalLM\"]}", NULL, "gemma3", MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"model_type\":\"ministral3\",\"is_causal\":true}", NULL, "ministral3", MXL_TASK_GENERATE);
}

TEST(detect_pooling_dir_selects_embedding_family_of_key) {
    /* Qwen3-Embedding: an ordinary qwen3 config beside 1_Pooling/config.json (last-token pooling) */
    const char *qwen3 = "{\"model_type\":\"qwen3\",\"architectures\":[\"Qwen3ForCausalLM\"]}";
    tmpdir t;
    td_init(&t);
    td_mkdir(&t, "1_Pooling");
    td_write(&t, "1_Pooling/config.json", "{\"word_embedding_dimension\":1024,\"pooling_mode_cls_token\":false,"
                                          "\"pooling_mode_mean_tokens\":false,\"pooling_mode_lasttoken\":true}");
    mxl_detection d;
    mxl_error e;
    mxl_status s = detect_json(qwen3, t.root, &d, &e);
    if (s) fprintf(stderr, "  %s\n", e.msg);
    CHECK_EQ_INT(s, MXL_OK);
    if (s == MXL_OK) {
        CHECK_EQ_STR(d.family->id, "qwen3_embedding");
        CHECK_EQ_INT(d.task, MXL_TASK_EMBED);
        CHECK_EQ_INT(d.st.pooling, MXL_POOLING_LAST_TOKEN);
        CHECK(!d.st.has_modules_json);
    }
    td_free(&t);
    /* without the directory (GGUF, or no layout files) the same config generates */
    EXPECT_FAMILY(qwen3, NULL, "qwen3", MXL_TASK_GENERATE);
}

TEST(detect_modules_json_pooling_dense_normalize) {
    /* EmbeddingGemma-style pipeline: Transformer, Pooling, Dense, Dense, Normalize */
    tmpdir t;
    td_init(&t);
    td_write(&t, "modules.json",
             "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
             "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
             "{\"idx\":2,\"name\":\"2\",\"path\":\"2_Dense\",\"type\":\"sentence_transformers.models.Dense\"},"
             "{\"idx\":3,\"name\":\"3\",\"path\":\"3_Dense\",\"type\":\"sentence_transformers.models.Dense\"},"
             "{\"idx\":4,\"name\":\"4\",\"path\":\"4_Normalize\",\"type\":\"sentence_transformers.models.Normalize\"}]");
    td_mkdir(&t, "1_Pooling");
    td_write(&t, "1_Pooling/config.json", "{\"pooling_mode_mean_tokens\":true}");
    mxl_detection d;
    mxl_error e;
    mxl_status s = detect_json("{\"model_type\":\"gemma3_text\",\"architectures\":[\"Gemma3TextModel\"]}", t.root, &d, &e);
    if (s) fprintf(stderr, "  %s\n", e.msg);
    CHECK_EQ_INT(s, MXL_OK);
    if (s == MXL_OK) {
        CHECK_EQ_STR(d.family->id, "embeddinggemma");
        CHECK(d.st.has_modules_json && d.st.has_pooling && d.st.normalize);
        CHECK_EQ_INT(d.st.pooling, MXL_POOLING_MEAN);
        CHECK_EQ_INT(d.st.n_dense, 2);
        CHECK_EQ_STR(d.st.dense_paths[0], "2_Dense");
        CHECK_EQ_STR(d.st.dense_paths[1], "3_Dense");
    }
    td_free(&t);
}

TEST(detect_pooling_layout_of_unsupported_key_refused) {
    tmpdir t;
    td_init(&t);
    td_mkdir(&t, "1_Pooling");
    td_write(&t, "1_Pooling/config.json", "{\"pooling_mode_mean_tokens\":true}");
    mxl_detection d;
    mxl_error e;
    mxl_status s = detect_json("{\"model_type\":\"mistral\"}", t.root, &d, &e);
    CHECK_EQ_INT(s, MXL_ERR_UNSUPPORTED);
    CHECK(strstr(e.msg, "'mistral'") != NULL);
    td_free(&t);
}

TEST(detect_hostile_sentence_transformers_files) {
    const char *bert = "{\"model_type\":\"bert\"}";
    mxl_detection d;
    mxl_error e;
    {
        tmpdir t;
        td_init(&t);
        td_write(&t, "modules.json", "{\"not\": \"a list\"}");
        CHECK_EQ_INT(detect_json(bert, t.root, &d, &e), MXL_ERR_FORMAT);
        CHECK(strstr(e.msg, "modules.json") != NULL);
        td_free(&t);
    }
    {
        tmpdir t;
        td_init(&t);
        td_write(&t, "modules.json", "[{\"path\":\"../../etc\",\"type\":\"sentence_transformers.models.Pooling\"}]");
        CHECK_EQ_INT(detect_json(bert, t.root, &d, &e), MXL_ERR_FORMAT);
        td_free(&t);
    }
    {
        tmpdir t;
        td_init(&t);
        td_write(&t, "modules.json", "[1, 2]");
        CHECK_EQ_INT(detect_json(bert, t.root, &d, &e), MXL_ERR_FORMAT);
        td_free(&t);
    }
    {
        tmpdir t;
        td_init(&t);
        td_mkdir(&t, "1_Pooling");
        td_write(&t, "1_Pooling/config.json", "{\"pooling_mode_mean_tokens\": \"yes\"}");
        CHECK_EQ_INT(detect_json(bert, t.root, &d, &e), MXL_ERR_FORMAT);
        CHECK(strstr(e.msg, "pooling_mode_mean_tokens") != NULL);
        td_free(&t);
    }
    {
        tmpdir t;
        td_init(&t);
        td_mkdir(&t, "1_Pooling");
        td_write(&t, "1_Pooling/config.json", "{\"pooling_mode_mean_tokens\":true,\"pooling_mode_max_tokens\":true}");
        CHECK_EQ_INT(detect_json(bert, t.root, &d, &e), MXL_ERR_UNSUPPORTED);
        td_free(&t);
    }
    {
        tmpdir t;
        td_init(&t);
        td_write(&t, "modules.json", "[{\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"}, tru");
        CHECK_EQ_INT(detect_json(bert, t.root, &d, &e), MXL_ERR_FORMAT);
        td_free(&t);
    }
}

/* ---- 3./4. generation by model_type ---- */

TEST(detect_hunyuan_by_num_experts) {
    EXPECT_FAMILY("{\"model_type\":\"hunyuan\",\"num_experts\":16}", NULL, "hunyuan_moe", MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"model_type\":\"hunyuan\",\"num_experts\":1}", NULL, "hunyuan_dense", MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"model_type\":\"hunyuan\"}", NULL, "hunyuan_dense", MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"model_type\":\"hunyuan_v1_dense\"}", NULL, "hunyuan_dense", MXL_TASK_GENERATE);
}

TEST(detect_phi_msft_by_num_local_experts) {
    EXPECT_FAMILY("{\"model_type\":\"phi-msft\",\"num_local_experts\":4,\"num_experts_per_tok\":2}", NULL, "phixtral",
                  MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"model_type\":\"phi-msft\"}", NULL, "phi", MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"model_type\":\"phi-msft\",\"num_local_experts\":1}", NULL, "phi", MXL_TASK_GENERATE);
}

TEST(detect_vlm_vs_text_by_vision_config) {
    mxl_detection d;
    mxl_error e;
    REQUIRE(detect_json("{\"model_type\":\"gemma3\",\"vision_config\":{\"hidden_size\":1152},\"text_config\":{\"hidden_size\":2560}}",
                        NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "gemma3_vlm");
    CHECK(d.vision);
    REQUIRE(detect_json("{\"model_type\":\"gemma3\"}", NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "gemma3");
    CHECK(!d.vision);
    /* vision_config null or {} means text-only */
    REQUIRE(detect_json("{\"model_type\":\"gemma3\",\"vision_config\":{}}", NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "gemma3");
    REQUIRE(detect_json("{\"model_type\":\"llama4\",\"vision_config\":null}", NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "llama4");
    /* language_model_only: true wins */
    REQUIRE(detect_json("{\"model_type\":\"qwen3_5\",\"vision_config\":{\"depth\":24},\"language_model_only\":true}",
                        NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "qwen3_5");
    CHECK(!d.vision);
    REQUIRE(detect_json("{\"model_type\":\"qwen3_5\",\"vision_config\":{\"depth\":24}}", NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "qwen3_5_vlm");
    CHECK(d.vision);
    REQUIRE(detect_json("{\"model_type\":\"mistral3\",\"vision_config\":{\"patch_size\":14}}", NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "mistral3_vlm");
    REQUIRE(detect_json("{\"model_type\":\"gemma3n\",\"vision_config\":{\"a\":1}}", NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "gemma3n_vlm");
    /* a VLM-only key without vision_config stays its family, loaded text-only */
    REQUIRE(detect_json("{\"model_type\":\"qwen2_vl\"}", NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "qwen2_vl");
    CHECK(!d.vision);
    REQUIRE(detect_json("{\"model_type\":\"qwen2_vl\",\"vision_config\":{\"depth\":32}}", NULL, &d, &e) == MXL_OK);
    CHECK(d.vision);
}

TEST(detect_llava_next_with_granite_text_is_granite_vision) {
    EXPECT_FAMILY("{\"model_type\":\"llava_next\",\"vision_config\":{\"a\":1},\"text_config\":{\"model_type\":\"granite\"}}",
                  NULL, "granite_vision", MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"model_type\":\"llava_next\",\"vision_config\":{\"a\":1},\"text_config\":{\"model_type\":\"llama\"}}",
                  NULL, "llava", MXL_TASK_GENERATE);
}

TEST(detect_architecture_decides_relabelled_checkpoints) {
    EXPECT_FAMILY("{\"model_type\":\"llama\",\"architectures\":[\"IQuestCoderForCausalLM\"]}", NULL, "iquestcoder",
                  MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"model_type\":\"iquestloopcoder\"}", NULL, "iquestloopcoder", MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"architectures\":[\"RTDetrV2ForObjectDetection\"]}", NULL, "rt_detr_v2", MXL_TASK_DETECT);
}

TEST(detect_model_type_is_lowercased) {
    EXPECT_FAMILY("{\"model_type\":\"Klear\"}", NULL, "klear", MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"model_type\":\"klear\"}", NULL, "klear", MXL_TASK_GENERATE);
    EXPECT_FAMILY("{\"model_type\":\"GOT\"}", NULL, "got_ocr2", MXL_TASK_GENERATE);
}

TEST(detect_other_surfaces) {
    EXPECT_FAMILY("{\"model_type\":\"whisper\"}", NULL, "whisper", MXL_TASK_SPEECH_TO_TEXT);
    EXPECT_FAMILY("{\"model_type\":\"nemotron_voicechat\"}", NULL, "nemotron_voicechat", MXL_TASK_SPEECH_TO_SPEECH);
    EXPECT_FAMILY("{\"model_type\":\"yolo11\"}", NULL, "yolo11", MXL_TASK_DETECT);
    EXPECT_FAMILY("{\"model_type\":\"flux2\"}", NULL, "flux2", MXL_TASK_IMAGE_GENERATION);
    EXPECT_FAMILY("{\"model_type\":\"dinov2\"}", NULL, "dinov2", MXL_TASK_PREDICT);
    mxl_detection d;
    mxl_error e;
    /* Florence-2 is seq2seq with intrinsic image input */
    REQUIRE(detect_json("{\"model_type\":\"florence2\"}", NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "florence2");
    CHECK_EQ_INT(d.task, MXL_TASK_SEQ2SEQ);
    CHECK(d.vision);
    /* Kokoro: no model_type, an istftnet block */
    EXPECT_FAMILY("{\"istftnet\":{\"upsample_rates\":[10,6]},\"dim_in\":64}", NULL, "kokoro", MXL_TASK_TEXT_TO_SPEECH);
}

TEST(detect_unknown_model_type_names_it) {
    mxl_detection d;
    mxl_error e;
    CHECK_EQ_INT(detect_json("{\"model_type\":\"frobnicator9\"}", NULL, &d, &e), MXL_ERR_UNSUPPORTED);
    CHECK(strstr(e.msg, "'frobnicator9'") != NULL);
    CHECK(strstr(e.msg, "mlxcel arch") != NULL);
    CHECK(strchr(e.msg, '\n') == NULL);
    /* with a directory the message names its config.json */
    tmpdir t;
    td_init(&t);
    CHECK_EQ_INT(detect_json("{\"model_type\":\"frobnicator9\"}", t.root, &d, &e), MXL_ERR_UNSUPPORTED);
    CHECK(strstr(e.msg, "config.json") != NULL);
    td_free(&t);
    CHECK_EQ_INT(detect_json("{\"hidden_size\":8}", NULL, &d, &e), MXL_ERR_UNSUPPORTED);
    CHECK(strstr(e.msg, "mlxcel arch") != NULL);
}

TEST(detect_typed_config_without_json) {
    /* GGUF-style: fields set directly, no raw JSON, no directory */
    mxl_model_config cfg;
    mxl_model_config_init(&cfg);
    cfg.source = MXL_CONFIG_SOURCE_GGUF;
    snprintf(cfg.model_type, sizeof cfg.model_type, "hunyuan");
    cfg.num_experts = 64;
    mxl_detection d;
    mxl_error e;
    REQUIRE(mxl_model_detect(&cfg, NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "hunyuan_moe");
    cfg.num_experts = -1;
    REQUIRE(mxl_model_detect(&cfg, NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "hunyuan_dense");
    snprintf(cfg.model_type, sizeof cfg.model_type, "gemma3");
    cfg.has_vision_config = true;
    REQUIRE(mxl_model_detect(&cfg, NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "gemma3_vlm");
    cfg.language_model_only = 1;
    REQUIRE(mxl_model_detect(&cfg, NULL, &d, &e) == MXL_OK);
    CHECK_EQ_STR(d.family->id, "gemma3");
    mxl_model_config_free(&cfg);
}

/* Every registered key, under every tie-breaker condition, resolves to exactly one family that
 * claims the key (no "matches N families" ambiguity anywhere in the table). */
TEST(detect_every_registered_key_resolves) {
    for (size_t i = 0; i < mxl_registry_count(); i++) {
        const mxl_family *f = mxl_registry_at(i);
        for (size_t k = 0; f->model_types && f->model_types[k]; k++) {
            for (int variant = 0; variant < 4; variant++) {
                mxl_model_config cfg;
                mxl_model_config_init(&cfg);
                snprintf(cfg.model_type, sizeof cfg.model_type, "%s", f->model_types[k]);
                cfg.has_vision_config = variant & 1;
                cfg.num_experts = (variant & 2) ? 8 : -1;
                if (variant == 3) snprintf(cfg.text_model_type, sizeof cfg.text_model_type, "granite");
                mxl_detection d;
                mxl_error e = {0};
                mxl_status s = mxl_model_detect(&cfg, NULL, &d, &e);
                mxl_model_config_free(&cfg);
                if (s) fprintf(stderr, "  key '%s' variant %d: %s\n", f->model_types[k], variant, e.msg);
                CHECK_EQ_INT(s, MXL_OK);
                if (s == MXL_OK) CHECK(mxl_family_has_model_type(d.family, f->model_types[k]));
            }
        }
    }
}
