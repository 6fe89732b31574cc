/* test_registry.c - the model-family registry: table well-formedness, the keys that the spec
 * makes families share (listed here from ../shared/spec/supported-models.md, independently of
 * registry.c), lookups, and the build-support invariants. The spec-wide check that every
 * architecture key in the spec tables is registered lives in tests/cli/test_arch.py. */
#include <strings.h>

#include "models/registry.h"
#include "test.h"

TEST(registry_validate_ok) {
    mxl_error err = {0};
    mxl_status s = mxl_registry_validate(&err);
    if (s) fprintf(stderr, "  %s\n", err.msg);
    CHECK_EQ_INT(s, MXL_OK);
}

TEST(registry_ids_unique_and_lower_snake) {
    size_t n = mxl_registry_count();
    REQUIRE(n > 0);
    for (size_t i = 0; i < n; i++) {
        const mxl_family *f = mxl_registry_at(i);
        for (const char *p = f->id; *p; p++)
            CHECK((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_');
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(f->id, mxl_registry_at(j)->id) == 0) {
                fprintf(stderr, "  duplicate id %s\n", f->id);
                CHECK(0);
            }
        CHECK(mxl_registry_find_id(f->id) == f);
    }
}

/* Keys the spec makes several families share, with exactly the families that share them:
 * text/VLM pairs ("<key> with vision_config"), hunyuan by num_experts, phi-msft by
 * num_local_experts, llava_next with a Granite text config, and generation keys that embedding /
 * reranker / token-classification rows reuse with another head or layout. */
static const struct {
    const char *key;
    const char *families[4];
} k_shared[] = {
    {"gemma3", {"gemma3", "gemma3_vlm", "embeddinggemma", NULL}},
    {"gemma3_text", {"gemma3", "embeddinggemma", NULL}},
    {"gemma3n", {"gemma3n", "gemma3n_vlm", NULL}},
    {"gemma4", {"gemma4", "gemma4_vlm", NULL}},
    {"llama4", {"llama4", "llama4_vlm", NULL}},
    {"qwen3_5", {"qwen3_5", "qwen3_5_vlm", NULL}},
    {"qwen3_5_moe", {"qwen3_5_moe", "qwen3_5_moe_vlm", NULL}},
    {"mistral3", {"mistral3", "mistral3_vlm", NULL}},
    {"kimi_k3", {"kimi_k3", "kimi_k3_vlm", NULL}},
    {"minimax_m3", {"minimax_m3", "minimax_m3_vl", NULL}},
    {"hunyuan", {"hunyuan_moe", "hunyuan_dense", NULL}},
    {"phi-msft", {"phi", "phixtral", NULL}},
    {"llava_next", {"llava", "granite_vision", NULL}},
    {"qwen3", {"qwen3", "qwen3_embedding", "qwen3_reranker", NULL}},
    {"qwen3_vl", {"qwen3_vl", "qwen3_vl_embedding", "qwen3_vl_reranker", NULL}},
    {"qwen2_5_vl", {"qwen2_5_vl", "colqwen2_5", NULL}},
    {"idefics3", {"smolvlm", "colidefics3", NULL}},
    {"ministral3", {"ministral3", "nemotron3_embed", NULL}},
    {"lfm2", {"lfm2", "lfm2_embedding", NULL}},
    {"bert", {"bert_embedding", "bert_cross_encoder", "token_classifier", NULL}},
    {"xlm-roberta", {"xlm_roberta_embedding", "xlm_roberta_cross_encoder", "token_classifier", NULL}},
    {"modernbert", {"modernbert_embedding", "modernbert_cross_encoder", NULL}},
};
#define N_SHARED (sizeof k_shared / sizeof k_shared[0])

TEST(registry_shared_keys_only_where_spec_shares) {
    size_t n = mxl_registry_count();
    for (size_t i = 0; i < n; i++) {
        const mxl_family *f = mxl_registry_at(i);
        for (size_t k = 0; f->model_types && f->model_types[k]; k++) {
            const char *key = f->model_types[k];
            const mxl_family *all[16];
            size_t m = mxl_registry_find_all_model_type(key, all, 16);
            REQUIRE(m >= 1 && m <= 16);
            if (m == 1) continue;
            size_t s = 0;
            while (s < N_SHARED && strcmp(k_shared[s].key, key) != 0) s++;
            if (s == N_SHARED) {
                fprintf(stderr, "  key '%s' is claimed by %zu families (first %s, %s) but the spec does not share it\n",
                        key, m, all[0]->id, all[1]->id);
                CHECK(0);
                continue;
            }
            size_t expect = 0;
            while (expect < 4 && k_shared[s].families[expect]) expect++;
            CHECK_EQ_INT(m, expect);
            for (size_t j = 0; j < m; j++) {
                bool listed = false;
                for (size_t e = 0; e < expect; e++) listed |= strcmp(k_shared[s].families[e], all[j]->id) == 0;
                if (!listed) fprintf(stderr, "  key '%s': unexpected family %s\n", key, all[j]->id);
                CHECK(listed);
            }
        }
    }
    /* and every listed share really exists (the list is not stale) */
    for (size_t s = 0; s < N_SHARED; s++)
        for (size_t e = 0; e < 4 && k_shared[s].families[e]; e++) {
            const mxl_family *f = mxl_registry_find_id(k_shared[s].families[e]);
            REQUIRE(f);
            CHECK(mxl_family_has_model_type(f, k_shared[s].key));
        }
}

/* Within a task, families sharing a key must be told apart by their select rule: at most one
 * unconditional (ANY) family, and the conditional ones must use different rules. */
TEST(registry_shared_keys_have_tie_breakers) {
    for (size_t s = 0; s < N_SHARED; s++) {
        const mxl_family *all[16];
        size_t m = mxl_registry_find_all_model_type(k_shared[s].key, all, 16);
        for (size_t a = 0; a < m; a++)
            for (size_t b = a + 1; b < m; b++) {
                if (all[a]->task != all[b]->task) continue;
                bool distinct = all[a]->select != all[b]->select;
                if (!distinct) fprintf(stderr, "  key '%s': %s and %s share task and rule\n", k_shared[s].key, all[a]->id, all[b]->id);
                CHECK(distinct);
            }
    }
}

TEST(registry_lookup_by_model_type_case_insensitive) {
    const mxl_family *f = mxl_registry_find_model_type("llama");
    REQUIRE(f);
    CHECK_EQ_STR(f->id, "llama");
    CHECK(mxl_registry_find_model_type("MISTRAL") == f); /* "llama or mistral": shared dense runtime */
    CHECK(mxl_registry_find_model_type("Mistral") == f);
    f = mxl_registry_find_model_type("Klear"); /* the published checkpoints capitalize it */
    REQUIRE(f);
    CHECK_EQ_STR(f->id, "klear");
    f = mxl_registry_find_model_type("GOT");
    REQUIRE(f);
    CHECK_EQ_STR(f->id, "got_ocr2");
    f = mxl_registry_find_model_type("deepseek_v3.2");
    REQUIRE(f);
    CHECK_EQ_STR(f->id, "deepseek_v32");
    CHECK(mxl_registry_find_model_type("deepseek_v32") == f);
    /* shared keys resolve to the text-generation family first */
    f = mxl_registry_find_model_type("gemma3");
    REQUIRE(f);
    CHECK_EQ_STR(f->id, "gemma3");
    CHECK(mxl_registry_find_model_type("not_a_model") == NULL);
    CHECK(mxl_registry_find_model_type("") == NULL);
    CHECK(mxl_registry_find_model_type(NULL) == NULL);
}

TEST(registry_lookup_all_and_architecture) {
    const mxl_family *all[8];
    size_t n = mxl_registry_find_all_model_type("HUNYUAN", all, 8);
    CHECK_EQ_INT(n, 2);
    /* cap smaller than the count still reports the count */
    CHECK_EQ_INT(mxl_registry_find_all_model_type("bert", all, 1), 3);
    const mxl_family *f = mxl_registry_find_architecture("IQuestCoderForCausalLM");
    REQUIRE(f);
    CHECK_EQ_STR(f->id, "iquestcoder");
    f = mxl_registry_find_architecture("XLMRobertaForSequenceClassification");
    REQUIRE(f);
    CHECK_EQ_INT(f->task, MXL_TASK_RERANK);
    CHECK(mxl_registry_find_architecture("LlamaForCausalLM") == NULL);
    CHECK(mxl_registry_find_id("no_such_family") == NULL);
}

TEST(registry_family_fields) {
    for (size_t i = 0; i < mxl_registry_count(); i++) {
        const mxl_family *f = mxl_registry_at(i);
        mxl_strlist rt = mxl_family_runtimes(f);
        CHECK(mxl_strlist_len(rt) >= 1);
        CHECK(mxl_strlist_has(rt, mxl_task_name(f->task)));
        CHECK(mxl_strlist_len(f->modalities_in) >= 1);
        for (size_t k = 0; f->modalities_in[k]; k++) {
            const char *m = f->modalities_in[k];
            CHECK(!strcmp(m, "text") || !strcmp(m, "image") || !strcmp(m, "audio") || !strcmp(m, "video"));
        }
        /* VLM forms take images */
        if (f->form != MXL_FORM_TEXT) CHECK(mxl_strlist_has(f->modalities_in, "image"));
        if (f->select == MXL_SELECT_VISION) CHECK(f->form == MXL_FORM_VLM);
    }
}

/* Families the spec names without any architecture key (their detection is by file layout or is
 * not described). Every other family must list at least one key. */
TEST(registry_keyless_families_are_the_spec_ones) {
    static const char *const keyless[] = {"kokoro", "pp_doclayout_v3", "rf_detr", "sapiens2", "sam3",
                                          "video_depth_anything", "moge3", "sam3d_objects", "sam3d_body",
                                          "openai_privacy_filter", "gliner2_5", NULL};
    for (size_t i = 0; i < mxl_registry_count(); i++) {
        const mxl_family *f = mxl_registry_at(i);
        bool expect_keyless = mxl_strlist_has(keyless, f->id);
        if ((mxl_strlist_len(f->model_types) == 0) != expect_keyless)
            fprintf(stderr, "  %s: %zu keys\n", f->id, mxl_strlist_len(f->model_types));
        CHECK((mxl_strlist_len(f->model_types) == 0) == expect_keyless);
    }
    for (size_t k = 0; keyless[k]; k++) CHECK(mxl_registry_find_id(keyless[k]) != NULL);
}

TEST(registry_build_support_consistent) {
    for (size_t i = 0; i < mxl_registry_count(); i++) {
        const mxl_family *f = mxl_registry_at(i);
        const mxl_family_support *s = mxl_family_support_of(f);
        REQUIRE(s);
        bool runs = s->cpu != MXL_BACKEND_PLANNED || s->cuda != MXL_BACKEND_PLANNED;
        CHECK(mxl_family_implemented(f) == runs);
        /* parallelism, drafters and KV modes only mean something for a family that runs */
        if (!runs) {
            CHECK(!s->tensor_parallel && !s->pipeline_parallel);
            CHECK(mxl_strlist_len(s->drafters) == 0 && mxl_strlist_len(s->kv_modes) == 0);
        }
    }
    CHECK_EQ_STR(mxl_backend_status_name(MXL_BACKEND_PLANNED), "planned");
    CHECK_EQ_STR(mxl_backend_status_name(MXL_BACKEND_PARTIAL), "partial");
    CHECK_EQ_STR(mxl_backend_status_name(MXL_BACKEND_SUPPORTED), "supported");
    CHECK_EQ_STR(mxl_task_name(MXL_TASK_IMAGE_GENERATION), "image-generation");
}
