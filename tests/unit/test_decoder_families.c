/* test_decoder_families.c - every decoder family from Hugging Face safetensors against
 * transformers, on tiny random-weight checkpoints (tests/fixtures/decoders/<case>, made by
 * gen_decoder_fixtures.py: dense f32 / bf16 / f16 and MLX affine 4- and 8-bit variants).
 *
 * Each case runs the fixture's 10 token ids twice per path (test_decoder_compare.h): one token
 * per call (the decode path; at every position the logit of transformers' argmax and, away from
 * near ties, the argmax itself; full logits at the recorded positions) and the whole sequence in
 * one call with a batch of 4 (chunked prefill; full logits of the last position).
 *
 * Reference path (mxl_decoder_state_set_reference: dequantized weights, f32 activations): max
 * |diff| <= 1e-3 everywhere, for every case.
 * Fast path: dense weights multiply f32 activations there too (SIMD dots, a different summation
 * order), but the default KV cache is f16 (decoder.h MXL_DECODER_KV_AUTO): every cached K/V
 * element is rounded to half precision (relative error up to 2^-12), which moves these random
 * models' logits by up to 3.4e-3 (measured; with an f32 cache the fast path stays within 1e-3,
 * test_decoder_kv.c), so the bound is 5e-3, with the argmax checked where the margin exceeds
 * twice that. MLX-quantized weights multiply activations quantized to int8
 * in blocks of 32 (q8a, one f32 scale per block: an error up to 1/254 of the block's largest
 * value per element; one such matmul is off by 0.3-0.7% of its largest output, fused row views
 * and whole matrices alike); through 2 layers and the
 * quantized LM head of these deliberately large random weights that compounds to 1-2% of the
 * [-5, 5] logit range: measured 0.066 (4-bit qwen3) and 0.093 (8-bit phi3, q8 weights add almost
 * nothing: the activations dominate) with AVX-512, AVX2 and scalar kernels alike. The bound there
 * is 0.15, with the argmax kept wherever transformers' top-2 margin exceeds 0.2 (twice the
 * largest logit error, so a flip would need two worst-case errors in opposite directions).
 *
 * The last tests check that unsupported config values and broken checkpoints are refused by
 * name at load. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "engine/sampler.h"
#include "models/decoder.h"
#include "test.h"
#include "test_decoder_compare.h"

/* the bounds above: MXL_TEST_DEC_* in test_decoder_compare.h */
#define REF_TOL MXL_TEST_DEC_REF_TOL
#define FAST_DENSE_TOL MXL_TEST_DEC_FAST_DENSE_TOL
#define FAST_QUANT_TOL MXL_TEST_DEC_FAST_QUANT_TOL
#define QUANT_TIE_MARGIN MXL_TEST_DEC_QUANT_TIE_MARGIN

static json_t *load_reference(void) { return mxl_test_decoder_cases(); }

static const char *fixture_dir(const char *name) {
    static char path[2048];
    snprintf(path, sizeof path, "%s/tests/fixtures/decoders/%s", mxl_test_repo_root(), name);
    return path;
}

/* MLX-quantized weights, or quantized experts (GPT-OSS's MXFP4 ones): int8 activations somewhere */
static bool is_quantized(const mxl_decoder *d) {
    const mxl_moe_layer *m = d->layers[d->hp.n_layers - 1].moe;
    return d->tok_embd.kind == MXL_W_MLX || d->layers[0].w_down.kind == MXL_W_MLX || (m && m->gate[0].kind != MXL_W_DENSE);
}

static const char *edited_checkpoint(const char *fixture, const char *edit);
static void remove_checkpoint(const char *dir);

/* Loads case `c` (from its fixture directory, or from a copy whose config.json has `edit`
 * applied) and checks it on one path against the reference logits. */
static void check_case(json_t *fx, json_t *c, const char *edit, bool reference, mxl_threadpool *pool, int *mxl_test_failed_) {
    const char *name = json_string_value(json_object_get(c, "name"));
    const char *dir = edit ? edited_checkpoint(name, edit) : fixture_dir(name);
    REQUIRE(dir);
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    bool ok = mxl_checkpoint_open(dir, &ck, &err) == MXL_OK && mxl_decoder_load(ck, &d, &err) == MXL_OK;
    if (!ok) {
        fprintf(stderr, "  %s%s%s: %s\n", name, edit ? " + " : "", edit ? edit : "", err.msg);
        CHECK(0);
    } else {
        bool quant = is_quantized(&d);
        const double kv_gain = mxl_test_kv_gain(&d); /* (the f16 cache: test_decoder_compare.h) */
        double tol = reference ? REF_TOL : d.hp.act_quant8 ? MXL_TEST_DEC_BITNET_FAST_TOL : quant ? FAST_QUANT_TOL : FAST_DENSE_TOL * kv_gain;
        double margin = reference ? 2 * REF_TOL : !quant ? 2 * FAST_DENSE_TOL * kv_gain : QUANT_TIE_MARGIN;
        mxl_test_logit_result r = {0, 0, 0};
        bool ran = mxl_test_decoder_compare(&d, c, json_object_get(fx, "tokens"), reference, margin, pool, &r);
        fprintf(stderr, "  %-22s %s%s%s: max |diff| %.2e, argmax %d/%d\n", name, reference ? "[reference]" : "[fast]",
                quant ? " (MLX)" : "", edit ? " (edited config)" : "", r.max_diff, r.argmax_checked - r.argmax_bad, r.argmax_checked);
        CHECK(ran);
        CHECK(r.max_diff <= tol);
        CHECK_EQ_INT(r.argmax_bad, 0);
        CHECK(r.argmax_checked >= 5);
        mxl_decoder_free(&d);
    }
    mxl_checkpoint_close(ck);
    if (edit) remove_checkpoint(dir);
}

static void run_all(bool reference, int *mxl_test_failed_) {
    json_t *fx = load_reference();
    REQUIRE(fx);
    json_t *c;
    size_t i;
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    json_array_foreach(json_object_get(fx, "cases"), i, c) check_case(fx, c, NULL, reference, pool, mxl_test_failed_);
    CHECK(json_array_size(json_object_get(fx, "cases")) >= 16);
    mxl_threadpool_destroy(pool);
    json_decref(fx);
}

TEST(decoder_families_reference_match_transformers) { run_all(true, mxl_test_failed_); }

TEST(decoder_families_fast_path_match_transformers) { run_all(false, mxl_test_failed_); }

/* The routed experts left in the checkpoint's mapping (MLXCEL_EXPERT_STREAM=on: the stored-form
 * kernels instead of the packed panels the tiny fixtures otherwise get) match transformers as
 * well, and the loader knows which it did. */
TEST(decoder_families_moe_streamed_experts_match_transformers) {
    json_t *fx = load_reference();
    REQUIRE(fx);
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    static const char *const k_moe[] = {"mixtral", "qwen2_moe", "qwen2_moe_mlx_q4", "qwen3_moe", "olmoe", "granitemoe", "glm4_moe", "dots1", "ernie4_5_moe", "hunyuan_v1_moe"};
    bool has_layout = false; /* the backend has a layout for these experts (read while they are not prepared) */
    for (int on = 1; on >= 0; on--) {
        setenv("MLXCEL_EXPERT_STREAM", on ? "on" : "off", 1);
        mxl_checkpoint *ck = NULL;
        mxl_decoder d;
        REQUIRE(mxl_checkpoint_open(fixture_dir("qwen2_moe_mlx_q4"), &ck, &err) == MXL_OK && mxl_decoder_load(ck, &d, &err) == MXL_OK);
        CHECK(d.experts_streamed == (on == 1));
        /* packed: the backend's layout wherever it has one for the format (MLX 4-bit: AVX-512 VNNI) */
        const mxl_weight *g = &d.layers[0].moe->gate[0];
        if (on) has_layout = d.be->ops->weight_prepared_bytes(d.be, g, MXL_WEIGHT_USE_MATMUL) > 0;
        CHECK(on || !has_layout ? g->prepared == NULL : g->prepared != NULL);
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
    }
    setenv("MLXCEL_EXPERT_STREAM", "on", 1);
    for (size_t i = 0; i < sizeof k_moe / sizeof k_moe[0]; i++) {
        json_t *c = mxl_test_find_case(fx, k_moe[i]);
        CHECK(c != NULL);
        if (c) check_case(fx, c, NULL, false, pool, mxl_test_failed_);
    }
    unsetenv("MLXCEL_EXPERT_STREAM");
    mxl_threadpool_destroy(pool);
    json_decref(fx);
}

/* Older config.json spellings of the same models (rope_scaling + rope_theta, rope_local_base_freq,
 * no layer_types / no_rope_layers: the defaults transformers derives them from) must give the same
 * logits. */
TEST(decoder_families_older_config_spellings) {
    static const struct { const char *name, *edit; } k_cases[] = {
        {"llama_bias_llama3rope", "{\"rope_parameters\": null, \"rope_theta\": 10000.0, \"rope_scaling\": {\"type\": \"llama3\", "
                                  "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 16}}"},
        {"mistral", "{\"rope_parameters\": null, \"rope_theta\": 10000.0, \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}}"},
        {"qwen3", "{\"rope_parameters\": null, \"rope_theta\": 10000.0, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
                  "\"original_max_position_embeddings\": 16}, \"layer_types\": null}"},
        {"gemma3_text", "{\"rope_parameters\": null, \"rope_theta\": 1000000.0, \"rope_local_base_freq\": 10000.0, "
                        "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 4.0}, \"layer_types\": null, \"sliding_window_pattern\": 2}"},
        {"phi3", "{\"rope_parameters\": null, \"rope_theta\": 10000.0, \"partial_rotary_factor\": 0.5}"},
        {"qwen2", "{\"layer_types\": null}"},
        {"gemma2", "{\"layer_types\": null}"},
        {"smollm3", "{\"no_rope_layers\": null, \"layer_types\": null}"},
        {"glm", "{\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}}"}, /* partial 0.5 by default */
        {"internlm3", "{\"attention_bias\": null, \"mlp_bias\": null, \"qkv_bias\": true, \"bias\": true}"},
        {"exaone4", "{\"layer_types\": null, \"sliding_window_pattern\": \"LG\"}"},
        {"exaone4", "{\"layer_types\": null, \"sliding_window_pattern\": 2}"},
        {"nemotron", "{\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}}"}, /* partial 0.5 */
        {"phi", "{\"rope_parameters\": null, \"rope_theta\": 10000.0}"},                                     /* partial 0.5 */
        {"cohere2", "{\"layer_types\": null, \"sliding_window_pattern\": 2}"},
        {"gpt_neox", "{\"rope_parameters\": null, \"rotary_pct\": 0.25, \"rotary_emb_base\": 10000}"},
        {"gpt_neox", "{\"rope_parameters\": null}"}, /* rotary_pct 0.25, base 10000 by default */
        {"youtu", "{\"model_type\": \"youtu_llm\"}"}, /* the released checkpoints' (and mlx-lm's) name */
        /* Kimi Linear's released config: linear_attn_config's 1-based layer lists and sizes,
         * first_k_dense_replace, its expert keys' own names */
        {"kimi_linear", "{\"layer_types\": null, \"mlp_layer_types\": null, \"first_k_dense_replace\": 1, \"linear_head_dim\": null, "
                        "\"linear_num_heads\": null, \"linear_conv_kernel_dim\": null, \"linear_attn_config\": {\"head_dim\": 16, "
                        "\"num_heads\": 4, \"short_conv_kernel_size\": 4, \"full_attn_layers\": [3], \"kda_layers\": [1, 2, 4]}, "
                        "\"moe_router_activation_func\": \"sigmoid\", \"mla_use_nope\": true}"},
    };
    json_t *fx = load_reference();
    REQUIRE(fx);
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        json_t *c = mxl_test_find_case(fx, k_cases[i].name);
        CHECK(c != NULL);
        if (c) check_case(fx, c, k_cases[i].edit, true, NULL, mxl_test_failed_);
    }
    json_decref(fx);
}

/* max_position_embeddings caps the context (GPT-2's position table has 64 rows). */
TEST(decoder_families_context_capped_at_max_positions) {
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    REQUIRE(mxl_checkpoint_open(fixture_dir("gpt2"), &ck, &err) == MXL_OK);
    REQUIRE(mxl_decoder_load(ck, &d, &err) == MXL_OK);
    CHECK_EQ_INT(d.hp.max_ctx, 64);
    mxl_decoder_state *s = NULL;
    REQUIRE(mxl_decoder_state_create(&d, 1000, 32, NULL, &s, &err) == MXL_OK);
    int32_t ids[65];
    for (int i = 0; i < 65; i++) ids[i] = (int32_t)((i * 37) % 256);
    float *logits = mxl_malloc(256 * sizeof(float));
    REQUIRE(logits);
    CHECK(mxl_decoder_forward(&d, s, ids, 64, logits, &err) == MXL_OK);
    CHECK(isfinite(logits[0]));
    CHECK_EQ_INT(mxl_decoder_forward(&d, s, ids, 1, logits, &err), MXL_ERR_ARG);
    CHECK(strstr(err.msg, "context") != NULL);
    CHECK_EQ_INT(mxl_decoder_state_pos(s), 64);
    mxl_free(logits);
    mxl_decoder_state_destroy(s);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
}

/* A mixture of experts whose router produces NaN (layer 0's router weights NaN in a copy of the
 * qwen3_moe fixture): the routing still picks valid experts (no read outside the expert tables:
 * the ASan build runs this too), the NaN reaches the logits on both paths and a single and a
 * batched step, and the sampler's check refuses them with one line, so a request ends with an
 * error instead of a crash or a garbage token. */
TEST(decoder_families_moe_nan_router_ends_in_an_error) {
    char dir[] = "/tmp/mxl_moe_nan_XXXXXX", path[1200], src[2400];
    REQUIRE(mkdtemp(dir));
    const char *files[] = {"config.json", "model.safetensors"};
    for (int f = 0; f < 2; f++) { /* copies (the weights are edited) */
        snprintf(src, sizeof src, "%s/%s", fixture_dir("qwen3_moe"), files[f]);
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        FILE *in = fopen(src, "rb"), *out = fopen(path, "wb");
        REQUIRE(in && out);
        char buf[65536];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, in)) > 0) REQUIRE(fwrite(buf, 1, k, out) == k);
        fclose(in);
        fclose(out);
    }
    /* safetensors: u64 header length, JSON header, data; NaN over the router's bytes */
    FILE *f = fopen(path, "r+b");
    REQUIRE(f);
    uint64_t hlen = 0;
    REQUIRE(fread(&hlen, 8, 1, f) == 1 && hlen < (1u << 20));
    char *h = mxl_malloc((size_t)hlen + 1);
    REQUIRE(h && fread(h, 1, (size_t)hlen, f) == hlen);
    h[hlen] = 0;
    json_error_t je;
    json_t *hdr = json_loads(h, 0, &je), *t = json_object_get(hdr, "model.layers.0.mlp.gate.weight");
    REQUIRE(t);
    json_t *off = json_object_get(t, "data_offsets");
    const int64_t a = json_integer_value(json_array_get(off, 0)), b = json_integer_value(json_array_get(off, 1));
    const float nan = NAN;
    REQUIRE(fseek(f, (long)(8 + hlen + (uint64_t)a), SEEK_SET) == 0);
    for (int64_t i = a; i < b; i += 4) REQUIRE(fwrite(&nan, 4, 1, f) == 1);
    fclose(f);
    json_decref(hdr);
    mxl_free(h);

    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    REQUIRE(mxl_checkpoint_open(dir, &ck, &err) == MXL_OK && mxl_decoder_load(ck, &d, &err) == MXL_OK);
    const int64_t V = d.hp.vocab;
    float *logits = mxl_malloc((size_t)(2 * V) * sizeof(float));
    REQUIRE(logits);
    const int32_t ids[4] = {1, 37, 200, 5};
    for (int ref = 0; ref < 2; ref++) {
        mxl_decoder_state *s[2] = {NULL, NULL};
        REQUIRE(mxl_decoder_state_create(&d, 16, 4, NULL, &s[0], &err) == MXL_OK);
        REQUIRE(mxl_decoder_state_create(&d, 16, 4, NULL, &s[1], &err) == MXL_OK);
        mxl_decoder_state_set_reference(s[0], ref);
        mxl_decoder_state_set_reference(s[1], ref);
        CHECK(mxl_decoder_forward(&d, s[0], ids, 4, logits, &err) == MXL_OK); /* a prefill chunk */
        CHECK(mxl_decoder_forward(&d, s[1], ids, 1, logits, &err) == MXL_OK); /* one row */
        CHECK(mxl_sampler_check_logits(logits, (int32_t)V, &err) != MXL_OK);
        CHECK(strstr(err.msg, "NaN") != NULL && strchr(err.msg, '\n') == NULL);
        CHECK(mxl_decoder_forward_batch(&d, s, ids + 1, 2, logits, &err) == MXL_OK); /* a batched step */
        CHECK(mxl_sampler_check_logits(logits + V, (int32_t)V, &err) != MXL_OK);
        mxl_decoder_state_destroy(s[0]);
        mxl_decoder_state_destroy(s[1]);
    }
    mxl_free(logits);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
    remove_checkpoint(dir);
}

/* ---- refusals ---- */

/* A temporary checkpoint directory: the fixture's config.json with `edit` applied (a JSON object
 * whose keys replace the config's; a null value deletes the key) and a symlink to its weights. */
static const char *edited_checkpoint(const char *fixture, const char *edit) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "/tmp/mxl_dec_fam_XXXXXX");
    if (!mkdtemp(dir)) return NULL;
    char src[2400], dst[1200];
    snprintf(src, sizeof src, "%s/config.json", fixture_dir(fixture));
    json_error_t je;
    json_t *cfg = json_load_file(src, 0, &je), *e = json_loads(edit, 0, &je);
    if (!cfg || !e) return NULL;
    const char *k;
    json_t *v;
    json_object_foreach(e, k, v) {
        if (json_is_null(v)) json_object_del(cfg, k);
        else json_object_set(cfg, k, v);
    }
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    int rc = json_dump_file(cfg, dst, 0);
    json_decref(cfg);
    json_decref(e);
    if (rc) return NULL;
    snprintf(src, sizeof src, "%s/model.safetensors", fixture_dir(fixture));
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    if (symlink(src, dst)) return NULL;
    return dir;
}

static void remove_checkpoint(const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    rmdir(dir);
}

/* Loads the edited checkpoint and expects a failure whose message contains every `needles`. */
static void expect_refused(const char *fixture, const char *edit, mxl_status want, const char *needle1, const char *needle2,
                           int *mxl_test_failed_) {
    const char *dir = edited_checkpoint(fixture, edit);
    REQUIRE(dir);
    mxl_checkpoint *ck = NULL;
    mxl_error err;
    mxl_error_clear(&err);
    mxl_status st = mxl_checkpoint_open(dir, &ck, &err);
    if (st == MXL_OK) {
        mxl_decoder d;
        st = mxl_decoder_load(ck, &d, &err);
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
    }
    fprintf(stderr, "  %s + %s -> %s\n", fixture, edit, err.msg);
    CHECK_EQ_INT(st, want);
    CHECK(strstr(err.msg, needle1) != NULL);
    if (needle2) CHECK(strstr(err.msg, needle2) != NULL);
    remove_checkpoint(dir);
}

TEST(decoder_families_refuse_unsupported_config_by_name) {
    expect_refused("llama", "{\"rope_parameters\": {\"rope_type\": \"dynamic\", \"factor\": 2.0, \"rope_theta\": 10000.0}}",
                   MXL_ERR_UNSUPPORTED, "'dynamic'", "rope_parameters", mxl_test_failed_);
    expect_refused("phi3", "{\"rope_parameters\": {\"rope_type\": \"longrope\", \"rope_theta\": 10000.0}}",
                   MXL_ERR_FORMAT, "long_factor", "must list 8 numbers", mxl_test_failed_);
    expect_refused("phi3_longrope", "{\"rope_parameters\": {\"rope_type\": \"longrope\", \"partial_rotary_factor\": 0.5, "
                   "\"long_factor\": [1, 2, 3, 4], \"short_factor\": [1, 2, 0, 4]}}",
                   MXL_ERR_FORMAT, "short_factor' element 2", NULL, mxl_test_failed_);
    expect_refused("minicpm3", "{\"scale_emb\": 0}", MXL_ERR_FORMAT, "scale_emb", NULL, mxl_test_failed_);
    expect_refused("bitnet_packed", "{\"quantization_config\": {\"quant_method\": \"bitnet\", \"linear_class\": \"autobitlinear\", "
                   "\"quantization_mode\": \"online\"}}", MXL_ERR_UNSUPPORTED, "quantization_mode 'online'", NULL, mxl_test_failed_);
    expect_refused("llama", "{\"quantization_config\": {\"quant_method\": \"bitnet\"}}", MXL_ERR_UNSUPPORTED, "'bitnet'", NULL,
                   mxl_test_failed_);
    expect_refused("llama", "{\"rope_parameters\": null, \"rope_scaling\": {\"type\": \"su\", \"factor\": 2.0}}",
                   MXL_ERR_UNSUPPORTED, "'su'", "rope_scaling", mxl_test_failed_);
    expect_refused("qwen2", "{\"hidden_act\": \"swiglu_oai\"}", MXL_ERR_UNSUPPORTED, "'swiglu_oai'", "hidden_act", mxl_test_failed_);
    expect_refused("llama", "{\"model_type\": \"rwkv\"}", MXL_ERR_UNSUPPORTED, "'rwkv'", "mlxcel arch", mxl_test_failed_);
    expect_refused("llama", "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4}}", MXL_ERR_UNSUPPORTED, "gptq", NULL,
                   mxl_test_failed_);
    expect_refused("gpt2", "{\"add_cross_attention\": true}", MXL_ERR_UNSUPPORTED, "add_cross_attention", NULL, mxl_test_failed_);
    expect_refused("smollm3", "{\"no_rope_layers\": [1, 0]}", MXL_ERR_FORMAT, "no_rope_layers", NULL, mxl_test_failed_);
    expect_refused("llama", "{\"hidden_act\": \"xielu\"}", MXL_ERR_UNSUPPORTED, "xielu", NULL, mxl_test_failed_);
    expect_refused("ministral3", "{\"rope_parameters\": null}", MXL_ERR_UNSUPPORTED, "rope_parameters", NULL, mxl_test_failed_);
    expect_refused("cohere", "{\"use_qk_norm\": true}", MXL_ERR_UNSUPPORTED, "use_qk_norm", NULL, mxl_test_failed_);
    expect_refused("phi", "{\"qk_layernorm\": true}", MXL_ERR_UNSUPPORTED, "qk_layernorm", NULL, mxl_test_failed_);
    expect_refused("gpt_bigcode", "{\"multi_query\": false}", MXL_ERR_UNSUPPORTED, "multi_query", NULL, mxl_test_failed_);
    expect_refused("olmo", "{\"clip_qkv\": -1.0}", MXL_ERR_FORMAT, "clip_qkv", NULL, mxl_test_failed_);
    expect_refused("exaone4", "{\"layer_types\": null, \"sliding_window_pattern\": \"LXG\"}", MXL_ERR_FORMAT,
                   "sliding_window_pattern", NULL, mxl_test_failed_);
    expect_refused("mistral3", "{\"text_config\": {\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
                   "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, \"vocab_size\": 256}}", MXL_ERR_UNSUPPORTED, "text_config.model_type 'qwen2'",
                   "mistral3", mxl_test_failed_);
    /* Gemma 4 / 3n: shapes that disagree with each other, named */
    expect_refused("gemma4_text", "{\"num_kv_shared_layers\": 5}", MXL_ERR_FORMAT, "num_kv_shared_layers", NULL, mxl_test_failed_);
    expect_refused("gemma4_text", "{\"per_layer_config\": {\"1\": {\"head_dim\": 31}}}", MXL_ERR_FORMAT, "layer 1", NULL, mxl_test_failed_);
    expect_refused("gemma4_text", "{\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"yarn\", \"rope_theta\": 10000.0}}}",
                   MXL_ERR_UNSUPPORTED, "'proportional'", NULL, mxl_test_failed_);
    expect_refused("gemma4_text", "{\"use_bidirectional_attention\": \"all\"}", MXL_ERR_UNSUPPORTED, "use_bidirectional_attention", NULL,
                   mxl_test_failed_);
    expect_refused("gemma4_text_moe", "{\"top_k_experts\": 9}", MXL_ERR_FORMAT, "top_k_experts", NULL, mxl_test_failed_);
    expect_refused("gemma3n_text", "{\"altup_num_inputs\": 1}", MXL_ERR_FORMAT, "AltUp", NULL, mxl_test_failed_);
    expect_refused("gemma3n_text", "{\"activation_sparsity_pattern\": [0.95, 1.5, 0.0, 0.0]}", MXL_ERR_FORMAT, "activation_sparsity_pattern",
                   NULL, mxl_test_failed_);
    expect_refused("gemma3n_text", "{\"intermediate_size\": [96, 128]}", MXL_ERR_FORMAT, "intermediate_size", NULL, mxl_test_failed_);
}

/* A bidirectional Gemma 3 (EmbeddingGemma) loads for whole-text embedding runs; token-by-token
 * forwards are refused by name. */
TEST(decoder_families_bidirectional_runs_whole_only) {
    const char *dir = edited_checkpoint("gemma3_text", "{\"use_bidirectional_attention\": true}");
    REQUIRE(dir);
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    REQUIRE(mxl_checkpoint_open(dir, &ck, &err) == MXL_OK && mxl_decoder_load(ck, &d, &err) == MXL_OK);
    CHECK(d.hp.bidirectional);
    mxl_decoder_state *s = NULL;
    REQUIRE(mxl_decoder_state_create(&d, 16, 16, NULL, &s, &err) == MXL_OK);
    const int32_t ids[3] = {1, 37, 200};
    float logits[256], hidden[3 * 64];
    CHECK(mxl_decoder_forward(&d, s, ids, 3, logits, &err) == MXL_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "bidirectional") != NULL);
    CHECK(mxl_decoder_forward_hidden_all(&d, s, ids, 3, hidden, &err) == MXL_OK);
    mxl_decoder_state_destroy(s);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
    remove_checkpoint(dir);
}

/* Recurrent families (models/recurrent.h): state sizes, head groupings and layer lists that
 * disagree with each other or the layer count are refused at load, by name. */
TEST(decoder_families_refuse_inconsistent_recurrent_configs_by_name) {
    expect_refused("mamba2", "{\"num_heads\": 7}", MXL_ERR_FORMAT, "num_heads 7", "expand", mxl_test_failed_);
    expect_refused("mamba2", "{\"n_groups\": 3}", MXL_ERR_FORMAT, "3 groups", "do not divide", mxl_test_failed_);
    expect_refused("mamba", "{\"time_step_rank\": 1000}", MXL_ERR_FORMAT, "time_step_rank 1000", NULL, mxl_test_failed_);
    expect_refused("mamba", "{\"conv_kernel\": 0}", MXL_ERR_FORMAT, "conv kernel", NULL, mxl_test_failed_);
    expect_refused("mamba2", "{\"hidden_act\": \"gelu\"}", MXL_ERR_UNSUPPORTED, "hidden_act 'gelu'", "mamba2", mxl_test_failed_);
    expect_refused("qwen3_next", "{\"linear_num_value_heads\": 3}", MXL_ERR_FORMAT, "linear attention heads", NULL, mxl_test_failed_);
    expect_refused("qwen3_next", "{\"layer_types\": [\"linear_attention\", \"sliding_attention\", \"linear_attention\", \"full_attention\"]}",
                   MXL_ERR_FORMAT, "layer_types[1]", "sliding_attention", mxl_test_failed_);
    expect_refused("lfm2", "{\"layer_types\": [\"conv\", \"mamba\", \"conv\"]}", MXL_ERR_FORMAT, "layer_types[1]", "'mamba'", mxl_test_failed_);
    expect_refused("lfm2", "{\"layer_types\": [\"conv\", \"conv\"]}", MXL_ERR_FORMAT, "layer_types", "num_hidden_layers", mxl_test_failed_);
    expect_refused("granitemoehybrid", "{\"mamba_d_head\": 12}", MXL_ERR_FORMAT, "mamba_d_head 12", NULL, mxl_test_failed_);
    expect_refused("nemotron_h", "{\"layers_block_type\": null, \"hybrid_override_pattern\": \"MX*E-E\"}", MXL_ERR_FORMAT, "letter 'X'",
                   NULL, mxl_test_failed_);
    expect_refused("nemotron_h", "{\"moe_latent_size\": 16}", MXL_ERR_UNSUPPORTED, "moe_latent_size", NULL, mxl_test_failed_);
    expect_refused("mamba2", "{\"time_step_limit\": [0.0]}", MXL_ERR_FORMAT, "time_step_limit", NULL, mxl_test_failed_);
    expect_refused("minimax", "{\"layer_types\": [\"full_attention\", \"lightning\", \"linear_attention\", \"full_attention\"]}",
                   MXL_ERR_FORMAT, "layer_types[1]", "'lightning'", mxl_test_failed_);
    expect_refused("minimax", "{\"mlp_beta_factor\": \"one\"}", MXL_ERR_FORMAT, "mlp_beta_factor", NULL, mxl_test_failed_);
    expect_refused("kimi_linear", "{\"layer_types\": null, \"linear_attn_config\": {\"full_attn_layers\": [3], \"kda_layers\": [1, 2]}}",
                   MXL_ERR_FORMAT, "layer 4", "neither", mxl_test_failed_);
    expect_refused("kimi_linear", "{\"layer_types\": null, \"linear_attn_config\": {\"full_attn_layers\": [3], \"kda_layers\": [1, 2, 9]}}",
                   MXL_ERR_FORMAT, "kda_layers[2]", NULL, mxl_test_failed_);
    expect_refused("kimi_linear", "{\"linear_attn_config\": {\"num_heads\": 0}}", MXL_ERR_FORMAT, "linear_attn_config.num_heads", NULL,
                   mxl_test_failed_);
    expect_refused("kimi_linear", "{\"moe_router_activation_func\": \"softmax\"}", MXL_ERR_UNSUPPORTED, "moe_router_activation_func", NULL,
                   mxl_test_failed_);
    expect_refused("phimoe", "{\"num_experts_per_tok\": 3}", MXL_ERR_UNSUPPORTED, "num_experts_per_tok", "exactly 2", mxl_test_failed_);
    expect_refused("phimoe", "{\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2.0, \"rope_theta\": 10000.0}}",
                   MXL_ERR_UNSUPPORTED, "rope_scaling", "phimoe", mxl_test_failed_);
    expect_refused("phimoe", "{\"router_jitter_noise\": -1}", MXL_ERR_FORMAT, "router_jitter_noise", NULL, mxl_test_failed_);
}

TEST(decoder_families_refuse_mismatched_tensors_by_name) {
    /* tied checkpoint (no lm_head.weight) declared untied */
    expect_refused("gemma", "{\"tie_word_embeddings\": false}", MXL_ERR_FORMAT, "lm_head.weight", "missing", mxl_test_failed_);
    /* QK-norm family without its norms: qwen2's weights under qwen3's name */
    expect_refused("qwen2", "{\"model_type\": \"qwen3\"}", MXL_ERR_FORMAT, "self_attn.q_norm.weight", "missing", mxl_test_failed_);
    /* head_dim that does not match the projections */
    expect_refused("llama", "{\"head_dim\": 8}", MXL_ERR_FORMAT, "model.layers.0.self_attn.q_proj.weight", NULL, mxl_test_failed_);
    /* declared bits that do not fit the packed shapes */
    expect_refused("qwen3_mlx_q4", "{\"quantization\": {\"group_size\": 32, \"bits\": 8}, \"quantization_config\": null}", MXL_ERR_FORMAT,
                   "bits=8", "model.embed_tokens.weight", mxl_test_failed_);
    /* scales present but no quantization declared */
    expect_refused("phi3_mlx_q8", "{\"quantization\": null, \"quantization_config\": null}", MXL_ERR_FORMAT, ".scales", "quantization",
                   mxl_test_failed_);
    /* mixtures of experts: counts and widths that disagree with each other or with the tensors */
    expect_refused("qwen3_moe", "{\"num_experts_per_tok\": 9}", MXL_ERR_FORMAT, "num_experts_per_tok 9", "num_experts (8)", mxl_test_failed_);
    expect_refused("qwen3_moe", "{\"num_experts_per_tok\": 0}", MXL_ERR_FORMAT, "num_experts_per_tok", NULL, mxl_test_failed_);
    expect_refused("mixtral", "{\"num_local_experts\": 4}", MXL_ERR_FORMAT, "model.layers.0.block_sparse_moe.gate.weight", NULL,
                   mxl_test_failed_);
    expect_refused("qwen2_moe", "{\"moe_intermediate_size\": 16}", MXL_ERR_FORMAT, "model.layers.0.mlp.experts.0.gate_proj.weight", NULL,
                   mxl_test_failed_);
    expect_refused("qwen2_moe", "{\"shared_expert_intermediate_size\": 40}", MXL_ERR_FORMAT, "mlp.shared_expert.gate_proj.weight", NULL,
                   mxl_test_failed_);
    expect_refused("qwen3_moe", "{\"mlp_only_layers\": [5]}", MXL_ERR_FORMAT, "mlp_only_layers", NULL, mxl_test_failed_);
    expect_refused("qwen3_moe", "{\"moe_intermediate_size\": null}", MXL_ERR_FORMAT, "moe_intermediate_size", NULL, mxl_test_failed_);
    expect_refused("olmoe", "{\"clip_qkv\": 2.0}", MXL_ERR_UNSUPPORTED, "clip_qkv", NULL, mxl_test_failed_);
    /* latent attention: ranks and head widths that disagree with each other or with the tensors */
    expect_refused("deepseek_v3", "{\"kv_lora_rank\": 16}", MXL_ERR_FORMAT, "self_attn.kv_a_proj_with_mqa.weight", NULL, mxl_test_failed_);
    expect_refused("deepseek_v3", "{\"q_lora_rank\": 32}", MXL_ERR_FORMAT, "self_attn.q_a_proj.weight", NULL, mxl_test_failed_);
    expect_refused("deepseek_v2", "{\"q_lora_rank\": 24}", MXL_ERR_FORMAT, "self_attn.q_a_proj.weight", "missing", mxl_test_failed_);
    expect_refused("deepseek_v2", "{\"v_head_dim\": 16}", MXL_ERR_FORMAT, "self_attn.o_proj.weight", NULL, mxl_test_failed_);
    expect_refused("deepseek_v2", "{\"qk_rope_head_dim\": 15}", MXL_ERR_FORMAT, "qk_rope_head_dim", NULL, mxl_test_failed_);
    expect_refused("deepseek_v2", "{\"kv_lora_rank\": null}", MXL_ERR_FORMAT, "kv_lora_rank", NULL, mxl_test_failed_);
    expect_refused("deepseek_v2", "{\"topk_method\": \"noaux_tc\"}", MXL_ERR_UNSUPPORTED, "topk_method", NULL, mxl_test_failed_);
    expect_refused("glm4_moe_lite", "{\"mlp_layer_types\": [\"sparse\", \"dense\"]}", MXL_ERR_FORMAT, "mlp_layer_types", NULL,
                   mxl_test_failed_);
    expect_refused("mistral4", "{\"n_group\": 3}", MXL_ERR_FORMAT, "n_group 3", NULL, mxl_test_failed_);
    /* Llama 4: per-layer lists of the wrong length or out of range, experts of the wrong width */
    expect_refused("llama4_text", "{\"no_rope_layers\": [1, 0]}", MXL_ERR_FORMAT, "no_rope_layers", NULL, mxl_test_failed_);
    expect_refused("llama4_text", "{\"moe_layers\": [1, 7]}", MXL_ERR_FORMAT, "moe_layers", NULL, mxl_test_failed_);
    expect_refused("llama4_text", "{\"intermediate_size\": 16}", MXL_ERR_FORMAT, "feed_forward.experts.gate_up_proj", NULL, mxl_test_failed_);
    expect_refused("exaone_moe", "{\"is_moe_layer\": [true]}", MXL_ERR_FORMAT, "is_moe_layer", NULL, mxl_test_failed_);
    expect_refused("cohere2_moe", "{\"expert_selection_fn\": \"sigmoid\"}", MXL_ERR_UNSUPPORTED, "expert_selection_fn", NULL, mxl_test_failed_);
}
