/* test_lora.c - LoRA adapters (models/lora.h) on the decoder, against the libraries that define
 * them: tests/fixtures/lora/gen_lora_fixtures.py drew random adapters for the tiny decoder
 * fixtures and recorded every position's logits as transformers + PEFT computes them (PEFT r 4 on
 * all seven projections; r 8 with rsLoRA and an alpha_pattern on three), as the same PEFT adapter
 * converted by llama.cpp's convert_lora_to_gguf.py gives on the GGUF base (truth: PEFT on the
 * model the GGUF holds), and as mlx-lm's load_adapters computes with an mlx-lm adapter.
 * Reference path (f32): within 1e-4 of the reference; fast path (int8 activations): within 2e-2
 * (the base model's own fast-path distance). --lora-fuse's weights (mxl_lora_fuse, f32 base)
 * give PEFT's logits without the adapter in the pass, and a quantized base refuses fusion.
 * Also: scale 0 gives the base logits bit for bit,
 * a batch mixing an adapter and none gives each row its solo logits bit for bit, and the
 * refusals (another module, a GGUF adapter on a safetensors base and the reverse, a missing
 * path) name what they refuse. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "models/checkpoint.h"
#include "models/decoder.h"
#include "models/lora.h"
#include "test.h"

static const char *fixture(const char *rel) {
    static char path[2][2048];
    static int k;
    k ^= 1;
    snprintf(path[k], sizeof path[k], "%s/tests/fixtures/%s", mxl_test_repo_root(), rel);
    return path[k];
}

typedef struct loaded {
    mxl_checkpoint *ck;
    mxl_decoder d;
    mxl_lora *lora;
} loaded;

static bool load(const char *base, const char *adapter, loaded *o, int *mxl_test_failed_) {
    mxl_error err;
    memset(o, 0, sizeof *o);
    if (mxl_checkpoint_open(fixture(base), &o->ck, &err) || mxl_decoder_load(o->ck, &o->d, &err) ||
        (adapter && mxl_lora_load(fixture(adapter), o->ck, &o->d, &o->lora, &err))) {
        fprintf(stderr, "  %s + %s: %s\n", base, adapter ? adapter : "-", err.msg);
        CHECK(0);
        return false;
    }
    return true;
}

static void unload(loaded *o) {
    mxl_lora_free(o->lora);
    mxl_decoder_free(&o->d);
    mxl_checkpoint_close(o->ck);
}

/* Every position's logits of the case's tokens [n, vocab] with the adapter at scale. */
static void run(loaded *o, const int32_t *tok, int64_t n, bool reference, const mxl_lora *lora, float scale, float *out,
                int *mxl_test_failed_) {
    mxl_error err;
    mxl_decoder_state *s = NULL;
    REQUIRE(mxl_decoder_state_create(&o->d, 64, 16, NULL, &s, &err) == MXL_OK);
    mxl_decoder_state_set_reference(s, reference);
    const mxl_decoder_lora use = {lora, scale};
    REQUIRE(mxl_decoder_state_set_lora(s, &use, lora ? 1 : 0, &err) == MXL_OK);
    REQUIRE(mxl_decoder_forward_all(&o->d, s, tok, n, out, &err) == MXL_OK);
    mxl_decoder_state_destroy(s);
}

TEST(lora_matches_peft_mlx_lm_and_llama_cpp_conversion) {
    json_t *root = mxl_test_load_json("tests/fixtures/lora/lora_cases.json");
    REQUIRE(root);
    json_t *jt = json_object_get(root, "tokens");
    int32_t tok[16];
    const int64_t n = (int64_t)json_array_size(jt);
    REQUIRE(n > 0 && n <= 16);
    for (int64_t i = 0; i < n; i++) tok[i] = (int32_t)json_integer_value(json_array_get(jt, (size_t)i));
    size_t ci;
    json_t *c;
    int n_cases = 0;
    json_array_foreach(json_object_get(root, "cases"), ci, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        loaded o;
        if (!load(json_string_value(json_object_get(c, "base")), json_string_value(json_object_get(c, "adapter")), &o, mxl_test_failed_)) continue;
        const int64_t V = o.d.hp.vocab;
        float *got = mxl_malloc((size_t)(n * V) * sizeof(float)), *base = mxl_malloc((size_t)(n * V) * sizeof(float)),
              *zero = mxl_malloc((size_t)(n * V) * sizeof(float));
        REQUIRE(got && base && zero);
        json_t *ref = json_object_get(c, "logits");
        for (int pass = 0; pass < 2; pass++) {
            const bool reference = pass == 0;
            run(&o, tok, n, reference, o.lora, 1.0f, got, mxl_test_failed_);
            double worst = 0, moved = 0;
            run(&o, tok, n, reference, NULL, 0.0f, base, mxl_test_failed_);
            for (int64_t t = 0; t < n; t++) {
                double md, cos;
                mxl_test_vec_vs_json(got + t * V, json_array_get(ref, (size_t)t), V, &md, &cos);
                if (md > worst) worst = md;
                for (int64_t v = 0; v < V; v++) moved = fmax(moved, fabs((double)got[t * V + v] - base[t * V + v]));
            }
            fprintf(stderr, "  %s (%s): max |logit - reference| %.2e (the adapter moves logits by up to %.2f)\n", name,
                    reference ? "reference path" : "fast path", worst, moved);
            CHECK(worst < (reference ? 1e-4 : 2e-2));
            CHECK(moved > 0.05); /* the adapter matters: a test that cannot fail otherwise */
            /* scale 0: the base model's bits */
            run(&o, tok, n, reference, o.lora, 0.0f, zero, mxl_test_failed_);
            CHECK(memcmp(zero, base, (size_t)(n * V) * sizeof(float)) == 0);
        }
        mxl_free(got), mxl_free(base), mxl_free(zero);
        unload(&o);
        n_cases++;
    }
    CHECK_EQ_INT(n_cases, 5);
    json_decref(root);
}

/* One decode step of two sequences, one with the adapter and one without, each row its solo
 * run's bits (both paths). */
TEST(lora_batch_rows_run_their_own_adapter) {
    loaded o;
    REQUIRE(load("decoders/llama", "lora/llama_peft_r4", &o, mxl_test_failed_));
    const int64_t V = o.d.hp.vocab;
    const int32_t prompt[5] = {1, 37, 200, 5, 99}, next[2] = {142, 7};
    float *solo = mxl_malloc((size_t)(2 * V) * sizeof(float)), *batch = mxl_malloc((size_t)(2 * V) * sizeof(float)),
          *first = mxl_malloc((size_t)V * sizeof(float));
    REQUIRE(solo && batch && first);
    mxl_error err;
    for (int ref = 0; ref < 2; ref++) {
        mxl_decoder_state *s[2];
        for (int i = 0; i < 2; i++) {
            REQUIRE(mxl_decoder_state_create(&o.d, 32, 4, NULL, &s[i], &err) == MXL_OK);
            mxl_decoder_state_set_reference(s[i], ref);
            const mxl_decoder_lora use = {o.lora, 1.0f};
            REQUIRE(mxl_decoder_state_set_lora(s[i], &use, i == 0 ? 1 : 0, &err) == MXL_OK);
            REQUIRE(mxl_decoder_forward(&o.d, s[i], prompt, 5, first, &err) == MXL_OK);
            REQUIRE(mxl_decoder_forward(&o.d, s[i], &next[i], 1, solo + i * V, &err) == MXL_OK);
            mxl_decoder_state_truncate(s[i], 5);
        }
        REQUIRE(mxl_decoder_forward_batch(&o.d, s, next, 2, batch, &err) == MXL_OK);
        CHECK(memcmp(solo, batch, (size_t)(2 * V) * sizeof(float)) == 0);
        CHECK(memcmp(solo, solo + V, (size_t)V * sizeof(float)) != 0);
        for (int i = 0; i < 2; i++) mxl_decoder_state_destroy(s[i]);
    }
    mxl_free(solo), mxl_free(batch), mxl_free(first);
    unload(&o);
}

TEST(lora_refusals) {
    loaded o;
    REQUIRE(load("decoders/llama", NULL, &o, mxl_test_failed_));
    mxl_error err;
    mxl_lora *l = NULL;
    CHECK_EQ_INT(mxl_lora_load(fixture("lora/refuse_lm_head"), o.ck, &o.d, &l, &err), MXL_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "lm_head") || strstr(err.msg, "embed_tokens"));
    CHECK_EQ_INT(mxl_lora_load(fixture("lora/qwen2_gguf_r8.gguf"), o.ck, &o.d, &l, &err), MXL_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "GGUF adapter on a safetensors model") != NULL);
    CHECK_EQ_INT(mxl_lora_load(fixture("lora/nonexistent"), o.ck, &o.d, &l, &err), MXL_ERR_IO);
    CHECK(strstr(err.msg, "nonexistent") != NULL);
    unload(&o);
    /* the reverse, and an adapter for another model's shapes (the qwen2 fixture's K / V are
     * [32, 64]; the gemma fixture's are not) */
    REQUIRE(load("decoders/gguf/qwen2_f32.gguf", NULL, &o, mxl_test_failed_));
    CHECK_EQ_INT(mxl_lora_load(fixture("lora/qwen2_peft_r8_rs"), o.ck, &o.d, &l, &err), MXL_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "safetensors adapter on a GGUF model") != NULL);
    unload(&o);
    REQUIRE(load("decoders/gemma", NULL, &o, mxl_test_failed_));
    mxl_status st = mxl_lora_load(fixture("lora/llama_peft_r4"), o.ck, &o.d, &l, &err);
    if (st != MXL_ERR_ARG) fprintf(stderr, "  gemma + llama adapter: %s\n", st ? err.msg : "loaded");
    CHECK_EQ_INT(st, MXL_ERR_ARG);
    CHECK(strstr(err.msg, "the model's weight is") != NULL);
    unload(&o);
}

/* Fusion: the PEFT adapter merged into the f32 llama fixture's weights gives PEFT's logits with no
 * adapter in the pass; an MLX 4-bit base (qwen3_mlx_q4, the qwen3 fixture's shapes) refuses it,
 * naming the weight, and stays as it was. */
TEST(lora_fuse) {
    json_t *root = mxl_test_load_json("tests/fixtures/lora/lora_cases.json");
    REQUIRE(root);
    int32_t tok[16];
    json_t *jt = json_object_get(root, "tokens");
    const int64_t n = (int64_t)json_array_size(jt);
    for (int64_t i = 0; i < n; i++) tok[i] = (int32_t)json_integer_value(json_array_get(jt, (size_t)i));
    json_t *ref = NULL;
    size_t ci;
    json_t *c;
    json_array_foreach(json_object_get(root, "cases"), ci, c) if (!strcmp(json_string_value(json_object_get(c, "name")), "llama_peft_r4")) ref =
        json_object_get(c, "logits");
    REQUIRE(ref);
    loaded o;
    REQUIRE(load("decoders/llama", "lora/llama_peft_r4", &o, mxl_test_failed_));
    mxl_error err;
    REQUIRE(mxl_lora_fuse(o.lora, &o.d, 1.0f, &err) == MXL_OK);
    const int64_t V = o.d.hp.vocab;
    float *got = mxl_malloc((size_t)(n * V) * sizeof(float));
    REQUIRE(got);
    run(&o, tok, n, true, NULL, 0.0f, got, mxl_test_failed_);
    double worst = 0;
    for (int64_t t = 0; t < n; t++) {
        double md;
        mxl_test_vec_vs_json(got + t * V, json_array_get(ref, (size_t)t), V, &md, NULL);
        worst = fmax(worst, md);
    }
    fprintf(stderr, "  fused llama_peft_r4 (reference path): max |logit - PEFT| %.2e\n", worst);
    CHECK(worst < 1e-4);
    mxl_free(got);
    unload(&o);
    json_decref(root);
    REQUIRE(load("decoders/qwen3_mlx_q4", "lora/qwen3_peft_mlp_r4", &o, mxl_test_failed_));
    const void *before = o.d.layers[0].w_gate.data;
    CHECK_EQ_INT(mxl_lora_fuse(o.lora, &o.d, 1.0f, &err), MXL_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "mlp.gate_proj") != NULL);
    CHECK(o.d.layers[0].w_gate.data == before);
    unload(&o);
}

/* A PEFT adapter directory in dir: adapter_config.json and one A / B pair (zeros) of layer 0's
 * module hf (e.g. "self_attn.q_proj"), A [ra, in] and B [out, rb] (written by hand: the
 * safetensors writer refuses a [1, 0] tensor). */
static bool write_peft_pair(const char *dir, const char *hf, int64_t out, int64_t in, int64_t ra, int64_t rb) {
    char p[4200];
    snprintf(p, sizeof p, "%s/adapter_config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return false;
    fputs("{\"peft_type\": \"LORA\", \"r\": 1, \"lora_alpha\": 1}", f);
    fclose(f);
    char h[1024];
    int hl = snprintf(h, sizeof h,
                      "{\"base_model.model.model.layers.0.%s.lora_A.weight\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[0,%lld]},"
                      "\"base_model.model.model.layers.0.%s.lora_B.weight\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%lld,%lld]}}",
                      hf, (long long)ra, (long long)in, (long long)(4 * ra * in), hf, (long long)out, (long long)rb, (long long)(4 * ra * in),
                      (long long)(4 * ra * in + 4 * out * rb));
    while (hl % 8) h[hl++] = ' ';
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    if (!(f = fopen(p, "wb"))) return false;
    const uint64_t n = (uint64_t)hl;
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(n >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(h, 1, (size_t)hl, f);
    for (int64_t i = 0; i < 4 * (ra * in + out * rb); i++) fputc(0, f);
    return fclose(f) == 0;
}

/* Projections the adapter would update but the model never runs through the LoRA pass are
 * refused by name instead of loading and doing nothing: a gate_proj of empty shapes on a MoE layer
 * (no dense MLP: the empty base weight used to match), and q_proj of latent attention (DeepSeek-V2,
 * whose queries MLA projects without the pass). Found by tests/fuzz/fuzz_adapter.c. */
TEST(lora_refuses_projections_it_would_not_apply) {
    char dir[] = "/tmp/mxl-test-lora-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    static const struct {
        const char *base, *hf;
        int64_t out, in;
        const char *needle;
    } cases[] = {
        {"decoders/qwen2_moe", "mlp.gate_proj", 8, 8, "which the model does not have"},
        {"decoders/deepseek_v2", "self_attn.q_proj", 128, 64, "latent attention"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        loaded o;
        REQUIRE(load(cases[c].base, NULL, &o, mxl_test_failed_));
        REQUIRE(write_peft_pair(dir, cases[c].hf, cases[c].out, cases[c].in, 1, 1));
        mxl_error err;
        mxl_lora *l = NULL;
        mxl_status st = mxl_lora_load(dir, o.ck, &o.d, &l, &err);
        if (st != MXL_ERR_UNSUPPORTED) fprintf(stderr, "  %s + %s: %s\n", cases[c].base, cases[c].hf, st ? err.msg : "loaded");
        CHECK_EQ_INT(st, MXL_ERR_UNSUPPORTED);
        CHECK(l == NULL && strstr(err.msg, cases[c].needle) != NULL && strstr(err.msg, cases[c].hf) != NULL);
        mxl_lora_free(l);
        unload(&o);
    }
    /* the same projection shapes where the model runs them still load (DeepSeek-V2's o_proj) */
    loaded o;
    REQUIRE(load("decoders/deepseek_v2", NULL, &o, mxl_test_failed_));
    REQUIRE(write_peft_pair(dir, "self_attn.o_proj", 64, 96, 1, 1));
    mxl_error err;
    mxl_lora *l = NULL;
    CHECK_EQ_INT(mxl_lora_load(dir, o.ck, &o.d, &l, &err), MXL_OK);
    mxl_lora_free(l);
    unload(&o);
    /* a rank-0 matrix beside a rank-1 one, in either order: refused as empty, not a pair of rank
     * 1 whose empty A (or B) a decode step read past (ASan, found by fuzz_adapter.c on a GGUF
     * adapter; the check took rank 0 for "not seen yet"). (An empty matrix whose other side is
     * huge took minutes to copy: tests/fuzz/corpus/adapter/found_empty_huge_dim) */
    REQUIRE(load("decoders/llama", NULL, &o, mxl_test_failed_));
    for (int k = 0; k < 2; k++) {
        REQUIRE(write_peft_pair(dir, "self_attn.q_proj", 64, 64, k ? 1 : 0, k ? 0 : 1));
        l = NULL;
        CHECK_EQ_INT(mxl_lora_load(dir, o.ck, &o.d, &l, &err), MXL_ERR_FORMAT);
        CHECK(l == NULL && strstr(err.msg, "empty dimension") != NULL);
        mxl_lora_free(l);
    }
    unload(&o);
    char p[4200];
    snprintf(p, sizeof p, "%s/adapter_config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    unlink(p);
    rmdir(dir);
}
