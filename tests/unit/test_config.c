/* test_config.c - config.json -> mxl_model_config: field spellings, text_config nesting, defaults
 * as transformers applies them, MLX quantization blocks, and hostile values. */
#include <math.h>
#include <stdlib.h>

#include "models/config.h"
#include "test.h"

static mxl_status parse(const char *json, mxl_model_config *cfg, mxl_error *err) {
    return mxl_model_config_parse_json(json, strlen(json), "config.json", cfg, err);
}

TEST(config_llama_fields_and_defaults) {
    /* SmolLM2-135M-Instruct's config.json (HuggingFaceTB), abridged */
    const char *j = "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","
                    "\"hidden_size\":576,\"intermediate_size\":1536,\"num_hidden_layers\":30,"
                    "\"num_attention_heads\":9,\"num_key_value_heads\":3,\"max_position_embeddings\":8192,"
                    "\"rms_norm_eps\":1e-05,\"rope_theta\":100000,\"tie_word_embeddings\":true,"
                    "\"vocab_size\":49152,\"bos_token_id\":1,\"eos_token_id\":2,\"hidden_act\":\"silu\","
                    "\"torch_dtype\":\"bfloat16\"}";
    mxl_model_config c;
    mxl_error e;
    REQUIRE(parse(j, &c, &e) == MXL_OK);
    CHECK_EQ_STR(c.model_type, "llama");
    CHECK_EQ_INT(c.n_architectures, 1);
    CHECK_EQ_STR(c.architectures[0], "LlamaForCausalLM");
    CHECK_EQ_INT(c.hidden_size, 576);
    CHECK_EQ_INT(c.num_hidden_layers, 30);
    CHECK_EQ_INT(c.num_key_value_heads, 3);
    CHECK_EQ_INT(c.head_dim, 64); /* hidden / heads when head_dim is absent */
    CHECK_EQ_INT(c.vocab_size, 49152);
    CHECK(fabs(c.rope_theta - 100000.0) < 1e-9);
    CHECK(fabs(c.rms_norm_eps - 1e-5) < 1e-15);
    CHECK(c.tie_word_embeddings);
    CHECK_EQ_INT(c.n_eos, 1);
    CHECK_EQ_INT(c.eos_token_ids[0], 2);
    CHECK_EQ_STR(c.torch_dtype, "bfloat16");
    CHECK_EQ_INT(c.quant.mode, MXL_QUANT_NONE);
    CHECK(!c.has_vision_config);
    mxl_model_config_free(&c);
}

TEST(config_defaults_when_absent) {
    mxl_model_config c;
    REQUIRE(parse("{\"model_type\":\"LLAMA\",\"hidden_size\":64,\"num_attention_heads\":4}", &c, NULL) == MXL_OK);
    CHECK_EQ_STR(c.model_type, "llama"); /* detection lower-cases model_type */
    CHECK_EQ_INT(c.num_key_value_heads, 4);
    CHECK_EQ_INT(c.head_dim, 16);
    CHECK_EQ_INT(c.num_hidden_layers, -1);
    CHECK(isnan(c.rope_theta));
    CHECK(c.tie_word_embeddings); /* PretrainedConfig default */
    mxl_model_config_free(&c);
}

TEST(config_gpt2_spellings) {
    mxl_model_config c;
    REQUIRE(parse("{\"model_type\":\"gpt2\",\"n_embd\":768,\"n_layer\":12,\"n_head\":12,\"n_positions\":1024,"
                  "\"vocab_size\":50257,\"layer_norm_epsilon\":1e-05,\"activation_function\":\"gelu_new\"}", &c, NULL) == MXL_OK);
    CHECK_EQ_INT(c.hidden_size, 768);
    CHECK_EQ_INT(c.num_hidden_layers, 12);
    CHECK_EQ_INT(c.num_attention_heads, 12);
    CHECK_EQ_INT(c.max_position_embeddings, 1024);
    CHECK_EQ_STR(c.hidden_act, "gelu_new");
    CHECK(fabs(c.layer_norm_eps - 1e-5) < 1e-15);
    mxl_model_config_free(&c);
}

TEST(config_text_config_nesting_and_vision) {
    /* Gemma 3 VLM layout: decoder fields under text_config */
    const char *j = "{\"model_type\":\"gemma3\",\"architectures\":[\"Gemma3ForConditionalGeneration\"],"
                    "\"text_config\":{\"model_type\":\"gemma3_text\",\"hidden_size\":2560,\"num_hidden_layers\":34,"
                    "\"num_attention_heads\":8,\"num_key_value_heads\":4,\"head_dim\":256,\"sliding_window\":1024,"
                    "\"layer_types\":[\"sliding_attention\",\"full_attention\"]},"
                    "\"vision_config\":{\"hidden_size\":1152},\"eos_token_id\":[1,106]}";
    mxl_model_config c;
    mxl_error e;
    mxl_status st = parse(j, &c, &e);
    /* layer_types has 2 entries but 34 layers: refused */
    CHECK(st == MXL_ERR_FORMAT);
    CHECK(strstr(e.msg, "layer_types") != NULL);
    const char *j2 = "{\"model_type\":\"gemma3\",\"text_config\":{\"model_type\":\"gemma3_text\",\"hidden_size\":2560,"
                     "\"num_hidden_layers\":2,\"num_attention_heads\":8,\"head_dim\":256,"
                     "\"layer_types\":[\"sliding_attention\",\"full_attention\"]},\"vision_config\":{\"a\":1},"
                     "\"eos_token_id\":[1,106],\"vocab_size\":262208}";
    REQUIRE(parse(j2, &c, &e) == MXL_OK);
    CHECK_EQ_STR(c.model_type, "gemma3");
    CHECK_EQ_STR(c.text_model_type, "gemma3_text");
    CHECK(c.has_vision_config);
    CHECK_EQ_INT(c.hidden_size, 2560);
    CHECK_EQ_INT(c.head_dim, 256);
    CHECK_EQ_INT(c.vocab_size, 262208); /* top-level fallback */
    CHECK_EQ_INT(c.n_layer_types, 2);
    CHECK_EQ_INT(c.layer_is_sliding[0], 1);
    CHECK_EQ_INT(c.layer_is_sliding[1], 0);
    CHECK_EQ_INT(c.n_eos, 2);
    CHECK_EQ_INT(c.eos_token_ids[1], 106);
    mxl_model_config_free(&c);
}

TEST(config_empty_vision_config_is_text_only) {
    mxl_model_config c;
    REQUIRE(parse("{\"model_type\":\"qwen3_5\",\"vision_config\":{},\"language_model_only\":true}", &c, NULL) == MXL_OK);
    CHECK(!c.has_vision_config);
    CHECK_EQ_INT(c.language_model_only, 1);
    mxl_model_config_free(&c);
    mxl_error e;
    CHECK(parse("{\"model_type\":\"qwen3_5\",\"language_model_only\":\"yes\"}", &c, &e) == MXL_ERR_FORMAT);
    CHECK(strstr(e.msg, "language_model_only") != NULL);
    REQUIRE(parse("{\"model_type\":\"qwen3_5\",\"vision_config\":null}", &c, NULL) == MXL_OK);
    CHECK(!c.has_vision_config);
    mxl_model_config_free(&c);
}

TEST(config_mlx_quantization) {
    const char *j = "{\"model_type\":\"qwen3\",\"quantization\":{\"group_size\":64,\"bits\":4,"
                    "\"model.layers.0.mlp.down_proj\":{\"group_size\":32,\"bits\":8},"
                    "\"lm_head\":false},\"quantization_config\":{\"group_size\":64,\"bits\":4}}";
    mxl_model_config c;
    mxl_error e;
    REQUIRE(parse(j, &c, &e) == MXL_OK);
    CHECK_EQ_INT(c.quant.mode, MXL_QUANT_AFFINE);
    CHECK_EQ_INT(c.quant.bits, 4);
    CHECK_EQ_INT(c.quant.group_size, 64);
    CHECK_EQ_INT(c.quant.n_overrides, 2);
    int seen = 0;
    for (int i = 0; i < c.quant.n_overrides; i++) {
        const mxl_quant_override *o = &c.quant.overrides[i];
        if (strcmp(o->prefix, "model.layers.0.mlp.down_proj") == 0) {
            CHECK_EQ_INT(o->bits, 8);
            CHECK_EQ_INT(o->group_size, 32);
            seen++;
        } else if (strcmp(o->prefix, "lm_head") == 0) {
            CHECK_EQ_INT(o->bits, 0);
            seen++;
        }
    }
    CHECK_EQ_INT(seen, 2);
    mxl_model_config_free(&c);
}

TEST(config_mlx_quant_modes_and_refusals) {
    mxl_model_config c;
    mxl_error e;
    REQUIRE(parse("{\"quantization\":{\"mode\":\"mxfp4\",\"group_size\":32,\"bits\":4}}", &c, &e) == MXL_OK);
    CHECK_EQ_INT(c.quant.mode, MXL_QUANT_MXFP4);
    mxl_model_config_free(&c);
    CHECK(parse("{\"quantization\":{\"group_size\":64,\"bits\":7}}", &c, &e) == MXL_ERR_UNSUPPORTED);
    CHECK(strstr(e.msg, "bits=7") != NULL);
    CHECK(parse("{\"quantization\":{\"group_size\":48,\"bits\":4}}", &c, &e) == MXL_ERR_UNSUPPORTED);
    CHECK(strstr(e.msg, "group_size=48") != NULL);
    CHECK(parse("{\"quantization\":{\"mode\":\"weird\"}}", &c, &e) == MXL_ERR_UNSUPPORTED);
    CHECK(strstr(e.msg, "weird") != NULL);
    CHECK(parse("{\"quantization\":{\"bits\":4,\"group_size\":64,\"a.b\":{\"bits\":9}}}", &c, &e) == MXL_ERR_UNSUPPORTED);
    CHECK(strstr(e.msg, "a.b") != NULL);
}

TEST(config_hf_quantization_config) {
    mxl_model_config c;
    REQUIRE(parse("{\"quantization_config\":{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"weight_block_size\":[128,128]}}", &c, NULL) == MXL_OK);
    CHECK_EQ_INT(c.quant.mode, MXL_QUANT_FP8_BLOCK);
    CHECK_EQ_INT(c.quant.group_size, 128);
    mxl_model_config_free(&c);
    REQUIRE(parse("{\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":128}}", &c, NULL) == MXL_OK);
    CHECK_EQ_INT(c.quant.mode, MXL_QUANT_OTHER);
    CHECK_EQ_STR(c.quant.method, "gptq");
    mxl_model_config_free(&c);
}

TEST(config_classifier_labels) {
    mxl_model_config c;
    REQUIRE(parse("{\"model_type\":\"bert\",\"architectures\":[\"BertForSequenceClassification\"],"
                  "\"id2label\":{\"0\":\"LABEL_0\"}}", &c, NULL) == MXL_OK);
    CHECK_EQ_INT(c.num_labels, 1);
    CHECK(mxl_model_config_has_arch(&c, "BertForSequenceClassification"));
    CHECK(!mxl_model_config_has_arch(&c, "BertModel"));
    mxl_model_config_free(&c);
}

/* Gemma 3n lists one MLP width per layer: the typed config holds the widest. */
TEST(config_per_layer_mlp_widths) {
    mxl_model_config c;
    mxl_error e;
    REQUIRE(parse("{\"model_type\":\"gemma3n_text\",\"intermediate_size\":[8192,16384,8192]}", &c, &e) == MXL_OK);
    CHECK_EQ_INT(c.intermediate_size, 16384);
    mxl_model_config_free(&c);
}

TEST(config_hostile_values) {
    static const char *bad[] = {
        "",
        "[]",
        "{\"hidden_size\":-1}",
        "{\"hidden_size\":1e300}",
        "{\"hidden_size\":\"576\"}",
        "{\"num_hidden_layers\":99999999999999999}",
        "{\"rope_theta\":\"x\"}",
        "{\"architectures\":\"LlamaForCausalLM\"}",
        "{\"architectures\":[1]}",
        "{\"eos_token_id\":\"2\"}",
        "{\"eos_token_id\":[1,\"x\"]}",
        "{\"layer_types\":[1,2]}",
        "{\"text_config\":[]}",
        "{\"quantization\":[]}",
        "{\"quantization\":{\"bits\":-4}}",
        "{\"tie_word_embeddings\":1}",
        "{\"model_type\":\"llama\"",
        "{\"intermediate_size\":[96,\"x\"]}",
        "{\"intermediate_size\":[96,-1]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mxl_model_config c;
        mxl_error e;
        mxl_error_clear(&e);
        mxl_status st = parse(bad[i], &c, &e);
        if (st == MXL_OK) {
            fprintf(stderr, "  accepted hostile config #%zu: %s\n", i, bad[i]);
            mxl_model_config_free(&c);
        }
        CHECK(st != MXL_OK);
        CHECK(strncmp(e.msg, "config.json", 11) == 0); /* message names the file */
        CHECK(strchr(e.msg, '\n') == NULL);            /* one line */
    }
}

/* Python's json, which wrote these files, reads the last of duplicate keys, integers of any size,
 * NaN / Infinity and a BOM; a value no field can use is refused by that field's name. */
TEST(config_python_json_quirks) {
    mxl_model_config c;
    mxl_error e;
    REQUIRE(parse("\xEF\xBB\xBF{\"model_type\":\"a\",\"hidden_size\":8,\"model_type\":\"llama\","
                  "\"max_length\":1000000000000000019884624838656,\"unused\":[NaN,Infinity,-Infinity,1e400],"
                  "\"rope_theta\":1000000000000000000000000}", &c, &e) == MXL_OK);
    CHECK_EQ_STR(c.model_type, "llama");
    CHECK_EQ_INT(c.hidden_size, 8);
    CHECK(c.rope_theta == 1e24);
    mxl_model_config_free(&c);
    static const struct { const char *text, *msg; } k_refused[] = {
        {"{\"rms_norm_eps\":NaN}", "config.json: 'rms_norm_eps' is not finite"},
        {"{\"rope_theta\":Infinity}", "config.json: 'rope_theta' is not finite"},
        {"{\"rope_parameters\":{\"rope_theta\":-Infinity}}", "config.json: 'rope_theta' is not finite"},
        {"{\"hidden_size\":1000000000000000019884624838656}", "config.json: 'hidden_size' = 1e+30 is out of range"},
        {"{\"max_position_embeddings\":Infinity}", "config.json: 'max_position_embeddings' = inf is out of range"},
        {"{\"num_hidden_layers\":NaN}", "config.json: 'num_hidden_layers' must be an integer"},
        {"{\"quantization\":{\"bits\":1e400}}", "config.json: quantization.bits must be a small non-negative integer"},
    };
    for (size_t i = 0; i < sizeof k_refused / sizeof k_refused[0]; i++) {
        mxl_error_clear(&e);
        mxl_status st = parse(k_refused[i].text, &c, &e);
        if (st == MXL_OK) mxl_model_config_free(&c);
        CHECK(st != MXL_OK);
        if (strcmp(e.msg, k_refused[i].msg)) fprintf(stderr, "  %s -> %s\n", k_refused[i].text, e.msg);
        CHECK_EQ_STR(e.msg, k_refused[i].msg);
    }
}

TEST(config_load_dir_real_minilm) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", mxl_test_model_path("sentence-transformers/all-MiniLM-L6-v2"));
    mxl_model_config c;
    mxl_error e;
    mxl_status st = mxl_model_config_load_dir(dir, &c, &e);
    if (st != MXL_OK) fprintf(stderr, "  %s (run scripts/fetch-models.sh)\n", e.msg);
    REQUIRE(st == MXL_OK);
    CHECK_EQ_STR(c.model_type, "bert");
    CHECK_EQ_INT(c.hidden_size, 384);
    CHECK_EQ_INT(c.num_hidden_layers, 6);
    CHECK_EQ_INT(c.num_attention_heads, 12);
    CHECK_EQ_INT(c.intermediate_size, 1536);
    CHECK_EQ_INT(c.vocab_size, 30522);
    CHECK_EQ_INT(c.type_vocab_size, 2);
    mxl_model_config_free(&c);
    mxl_model_config c2;
    CHECK(mxl_model_config_load_dir("/nonexistent-dir", &c2, &e) == MXL_ERR_NOT_FOUND);
    CHECK(strstr(e.msg, "/nonexistent-dir/config.json") != NULL);
}

TEST(config_unbuildable_attention_geometry_refused) {
    /* transformers' attention cannot run these either (KV heads repeated in whole groups; a head
     * size derived from hidden_size): refused by name instead of loading a model that cannot work */
    mxl_model_config c;
    mxl_error e;
    const char *groups = "{\"model_type\":\"llama\",\"hidden_size\":63,\"num_attention_heads\":7,"
                         "\"num_key_value_heads\":3,\"num_hidden_layers\":2,\"vocab_size\":100}";
    CHECK(parse(groups, &c, &e) == MXL_ERR_FORMAT);
    CHECK(strstr(e.msg, "num_attention_heads 7 is not a multiple of num_key_value_heads 3") != NULL);
    const char *size = "{\"model_type\":\"llama\",\"hidden_size\":64,\"num_attention_heads\":7,"
                       "\"num_key_value_heads\":7,\"num_hidden_layers\":2,\"vocab_size\":100}";
    CHECK(parse(size, &c, &e) == MXL_ERR_FORMAT);
    CHECK(strstr(e.msg, "hidden_size 64 is not divisible by num_attention_heads 7") != NULL);
    /* an explicit head_dim makes the second one buildable (q_proj is then 7 * 16 wide) */
    const char *ok = "{\"model_type\":\"llama\",\"hidden_size\":64,\"num_attention_heads\":7,\"head_dim\":16,"
                     "\"num_key_value_heads\":7,\"num_hidden_layers\":2,\"vocab_size\":100}";
    REQUIRE(parse(ok, &c, &e) == MXL_OK);
    CHECK_EQ_INT(c.head_dim, 16);
    mxl_model_config_free(&c);
}
