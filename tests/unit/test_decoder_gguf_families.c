/* test_decoder_gguf_families.c - the decoder families that load from GGUF (qwen2, qwen3, gemma,
 * gemma2, phi3, starcoder2) against transformers, on GGUF files made by llama.cpp's own
 * convert_hf_to_gguf.py from the tiny safetensors fixtures of test_decoder_families.c
 * (tests/fixtures/decoders/gguf, gen_gguf_family_fixtures.py).
 *
 * The truth is transformers' logits for what each GGUF describes: the generator applies the few
 * config.json changes that make transformers read the model as llama.cpp does (no sliding window
 * for qwen2 / phi3 / starcoder2, 1/sqrt(head_dim) attention scale for gemma2, plain RoPE for
 * qwen3; listed per case in reference.json "config_edits") and converts that same config. The f16
 * case's logits come from the weights rounded to f16 as the converter stores them.
 *
 * Each case runs the 10 token ids one per call (the logit of transformers' argmax at every
 * position, the argmax itself away from near ties, full logits at the recorded positions) and all
 * at once in chunks of 4 (full logits of the last position).
 * Reference path (dequantized weights, f32 activations and KV cache): max |diff| <= 1e-3, as
 * test_decoder_families.c. Fast path: <= 5e-3 (the f16 KV cache, see test_decoder_families.c). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/embed_topk.h"
#include "models/checkpoint.h"
#include "models/config_gguf.h"
#include "models/decoder.h"
#include "test.h"

#define REF_TOL 1e-3
#define FAST_TOL 5e-3

static const char *gguf_path(const char *name) {
    static char path[2048];
    snprintf(path, sizeof path, "%s/tests/fixtures/decoders/gguf/%s.gguf", mxl_test_repo_root(), name);
    return path;
}

/* Largest |want - got| over a full logit row; INFINITY on a length mismatch, NaN propagates. */
static double row_diff(json_t *want, const float *got, int64_t vocab) {
    if ((int64_t)json_array_size(want) != vocab) return INFINITY;
    double m = 0;
    for (int64_t i = 0; i < vocab; i++) {
        double d = fabs(json_number_value(json_array_get(want, (size_t)i)) - got[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

typedef struct result {
    double max_diff;
    int argmax_checked, argmax_bad;
} result;

static void take(result *r, double d) {
    if (!(d <= r->max_diff)) r->max_diff = d;
}

/* One case on one path; false when a call failed. */
static bool run(const mxl_decoder *d, json_t *c, json_t *tokens, bool reference, mxl_threadpool *pool, result *r) {
    mxl_error err;
    int64_t V = d->hp.vocab, n = (int64_t)json_array_size(tokens);
    int32_t ids[64];
    memset(r, 0, sizeof *r);
    if (n <= 0 || n > 64) return false;
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(tokens, (size_t)i));
    float *logits = malloc((size_t)V * sizeof(float));
    if (!logits) return false;
    json_t *fpos = json_object_get(c, "full_positions"), *full = json_object_get(c, "full_logits");
    json_t *am = json_object_get(c, "argmax"), *aml = json_object_get(c, "argmax_logit"), *mg = json_object_get(c, "margin");
    double tie = 2 * (reference ? REF_TOL : FAST_TOL);
    bool ok = true;

    mxl_decoder_state *s = NULL;
    if (mxl_decoder_state_create(d, 64, 16, pool, &s, &err) != MXL_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        free(logits);
        return false;
    }
    mxl_decoder_state_set_reference(s, reference);
    for (int64_t p = 0; p < n && ok; p++) {
        if (mxl_decoder_forward(d, s, &ids[p], 1, logits, &err) != MXL_OK) {
            fprintf(stderr, "  %s\n", err.msg);
            ok = false;
            break;
        }
        int64_t want = json_integer_value(json_array_get(am, (size_t)p));
        if (want < 0 || want >= V) {
            ok = false;
            break;
        }
        take(r, fabs(json_number_value(json_array_get(aml, (size_t)p)) - logits[want]));
        if (json_number_value(json_array_get(mg, (size_t)p)) > tie) {
            r->argmax_checked++;
            if (mxl_cpu_argmax(logits, V) != want) r->argmax_bad++;
        }
        for (size_t k = 0; k < json_array_size(fpos); k++)
            if (json_integer_value(json_array_get(fpos, k)) == p) take(r, row_diff(json_array_get(full, k), logits, V));
    }
    mxl_decoder_state_destroy(s);

    s = NULL;
    if (ok && mxl_decoder_state_create(d, 64, 4, pool, &s, &err) == MXL_OK) {
        mxl_decoder_state_set_reference(s, reference);
        size_t last = json_array_size(fpos) - 1;
        if (mxl_decoder_forward(d, s, ids, n, logits, &err) != MXL_OK) {
            fprintf(stderr, "  %s\n", err.msg);
            ok = false;
        } else if (json_integer_value(json_array_get(fpos, last)) != n - 1) {
            ok = false;
        } else {
            take(r, row_diff(json_array_get(full, last), logits, V));
        }
        mxl_decoder_state_destroy(s);
    } else {
        ok = false;
    }
    free(logits);
    return ok;
}

static void check_all(bool reference, int *mxl_test_failed_) {
    json_t *fx = mxl_test_load_json("tests/fixtures/decoders/gguf/reference.json");
    REQUIRE(fx);
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    json_t *cases = json_object_get(fx, "cases"), *c;
    size_t i;
    /* the six families, f32, plus phi3 in f16 */
    CHECK(json_array_size(cases) >= 7);
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *family = json_string_value(json_object_get(c, "family"));
        CHECK(name && family);
        if (!name || !family) continue;
        mxl_checkpoint *ck = NULL;
        mxl_decoder d;
        if (mxl_checkpoint_open(gguf_path(name), &ck, &err) != MXL_OK || mxl_decoder_load(ck, &d, &err) != MXL_OK) {
            fprintf(stderr, "  %s: %s\n", name, err.msg);
            CHECK(0);
            mxl_checkpoint_close(ck);
            continue;
        }
        CHECK(ck->format == MXL_CHECKPOINT_GGUF);
        CHECK_EQ_STR(ck->config.model_type, family);
        result r;
        bool ran = run(&d, c, json_object_get(fx, "tokens"), reference, pool, &r);
        double tol = reference ? REF_TOL : FAST_TOL;
        fprintf(stderr, "  %-16s %s: max |diff| %.2e, argmax %d/%d\n", name, reference ? "[reference]" : "[fast]", r.max_diff,
                r.argmax_checked - r.argmax_bad, r.argmax_checked);
        CHECK(ran);
        CHECK(r.max_diff <= tol);
        CHECK_EQ_INT(r.argmax_bad, 0);
        CHECK(r.argmax_checked >= 5);
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
    }
    mxl_threadpool_destroy(pool);
    json_decref(fx);
}

TEST(decoder_gguf_families_reference_match_transformers) { check_all(true, mxl_test_failed_); }

TEST(decoder_gguf_families_fast_path_match_transformers) { check_all(false, mxl_test_failed_); }

/* The hyper-parameters read from llama.cpp's metadata agree with the source fixture's config.json
 * (tests/fixtures/decoders/<family>/config.json): Gemma 2's soft-caps, window and sliding layers,
 * Phi-3's partial rotary dimension, StarCoder2's LayerNorm epsilon; and the llama.cpp readings
 * the logits tests rely on (gemma2 scale 1/sqrt(head_dim), no sliding layers for phi3). */
static bool open_gguf(const char *name, mxl_checkpoint **ck, mxl_decoder *d) {
    mxl_error err;
    *ck = NULL;
    if (mxl_checkpoint_open(gguf_path(name), ck, &err) == MXL_OK && mxl_decoder_load(*ck, d, &err) == MXL_OK) return true;
    fprintf(stderr, "  %s: %s\n", name, err.msg);
    mxl_checkpoint_close(*ck);
    *ck = NULL;
    return false;
}

static double cfg_number(json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    return v && json_is_number(v) ? json_number_value(v) : NAN;
}

TEST(decoder_gguf_families_hparams_match_source_config) {
    mxl_checkpoint *ck;
    mxl_decoder d;

    json_t *cfg = mxl_test_load_json("tests/fixtures/decoders/gemma2/config.json");
    REQUIRE(cfg);
    REQUIRE(open_gguf("gemma2_f32", &ck, &d));
    CHECK(fabs(d.hp.attn_softcap - cfg_number(cfg, "attn_logit_softcapping")) < 1e-6);
    CHECK(fabs(d.hp.final_softcap - cfg_number(cfg, "final_logit_softcapping")) < 1e-6);
    CHECK_EQ_INT(d.hp.sliding_window, (int64_t)cfg_number(cfg, "sliding_window"));
    CHECK(!d.hp.norm_plus_one);
    CHECK(fabs(d.hp.attn_scale - 1.0 / sqrt((double)d.hp.head_dim)) < 1e-7);
    json_t *types = json_object_get(cfg, "layer_types");
    CHECK_EQ_INT((int64_t)json_array_size(types), d.hp.n_layers);
    for (int64_t i = 0; i < d.hp.n_layers && i < (int64_t)json_array_size(types); i++)
        CHECK_EQ_INT(d.layers[i].sliding, strcmp(json_string_value(json_array_get(types, (size_t)i)), "sliding_attention") == 0);
    double cap = -1;
    mxl_error err;
    CHECK(mxl_gguf_arch_number(ck->gguf, NULL, "attn_logit_softcapping", &cap, &err) == MXL_OK);
    CHECK(fabs(cap - cfg_number(cfg, "attn_logit_softcapping")) < 1e-6);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
    json_decref(cfg);

    cfg = mxl_test_load_json("tests/fixtures/decoders/phi3/config.json");
    REQUIRE(cfg);
    REQUIRE(open_gguf("phi3_f16", &ck, &d));
    double prf = cfg_number(json_object_get(cfg, "rope_parameters"), "partial_rotary_factor");
    CHECK_EQ_INT(d.hp.rope.rotary_dim, (int64_t)((double)d.hp.head_dim * prf));
    CHECK(d.hp.rope.style == MXL_ROPE_NEOX);
    CHECK(d.hp.sliding_window == 0 || !d.hp.layer_is_sliding);
    CHECK_EQ_INT(d.layers[0].wq.rows, d.hp.n_heads * d.hp.head_dim);
    CHECK_EQ_INT(d.layers[0].wk.rows, d.hp.n_kv_heads * d.hp.head_dim);
    CHECK_EQ_INT(d.layers[0].w_gate.rows, (int64_t)cfg_number(cfg, "intermediate_size"));
    /* a key the file lacks leaves the value alone */
    cap = -1;
    CHECK(mxl_gguf_arch_number(ck->gguf, NULL, "attn_logit_softcapping", &cap, &err) == MXL_OK);
    CHECK(cap == -1);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
    json_decref(cfg);

    cfg = mxl_test_load_json("tests/fixtures/decoders/starcoder2/config.json");
    REQUIRE(cfg);
    REQUIRE(open_gguf("starcoder2_f32", &ck, &d));
    CHECK(d.hp.norm == MXL_NORM_LAYER && d.hp.mlp == MXL_MLP_PLAIN);
    CHECK(fabs(d.hp.norm_eps - cfg_number(cfg, "norm_epsilon")) < 1e-9);
    CHECK(d.hp.qkv_bias && d.hp.o_bias && d.hp.mlp_bias);
    CHECK(d.output_norm.b != NULL);
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
    json_decref(cfg);
}
