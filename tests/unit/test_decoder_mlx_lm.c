/* test_decoder_mlx_lm.c - every decoder family from the checkpoints mlx-lm's own `convert` writes
 * (what the mlx-community publishes), against mlx-lm's logits: tests/fixtures/mlx_lm, made by
 * gen_mlx_lm_fixtures.py with mlx_lm.convert (4 and 8 bits, and 2, 3, 5 and 6 for a few
 * families, and the mxfp4 / mxfp8 / nvfp4 modes for a few; groups of 64, or 32 where a
 * dimension is no multiple of 64, bf16 scales / biases / norms) from the tiny random-weight
 * checkpoints of test_decoder_families.c. Those directories hold mlx-lm's config.json
 * ("quantization" with "mode", granite's per-module 8-bit entries), model.safetensors with the
 * tensor names of mlx-lm's models (each model's sanitize: GPT-2 as model.wte / model.h.N with
 * [out, in] matrices) and model.safetensors.index.json.
 *
 * The reference is mlx-lm itself running the converted directory with every float parameter
 * (scales and biases included) widened to f32, so exact for the stored values. The generator
 * checked that mlx-lm reads each config.json as transformers does (float32, unquantized:
 * "mlx_lm_vs_transformers", a few 1e-6) except for gemma, whose MLP mlx-lm computes with the
 * exact GELU where transformers (and mlxcel) use the tanh form: that family's reference bound
 * grows by the measured difference.
 *
 * Both paths, one token per call and the whole sequence in chunks of 4 (test_decoder_compare.h):
 * reference path (dequantized weights, f32 activations and KV cache) within 1e-3 (+ the gemma
 * GELU difference); fast path within the quantized bound of test_decoder_families.c (0.15, its
 * int8 activations), the argmax kept where mlx-lm's top-2 margin exceeds 0.2. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "models/checkpoint.h"
#include "models/convert.h"
#include "models/decoder.h"
#include "models/decoder_family.h"
#include "models/mlx_fp.h"
#include "test.h"
#include "test_decoder_compare.h"

/* Every family mlxcel runs from safetensors (the records of models/families.h) must have a _q4 and
 * a _q8 case (but those of k_no_mlx_lm below): a family added without its mlx-lm fixture fails here. */
#define N_FAMILIES mxl_decoder_family_count()
/* and the other widths for a few families (gen_mlx_lm_fixtures.py EXTRA_BITS): llama at 2, 3, 5
 * and 6 bits, qwen3 at 3 and 6, qwen3_moe at 3 */
#define N_EXTRA_BITS 7
/* and the floating-point modes (EXTRA_MODES): llama in mxfp4, mxfp8 and nvfp4, qwen3 in mxfp4 and
 * nvfp4, qwen3_moe in mxfp4 */
#define N_EXTRA_MODES 6
#define FAMILY(f) (mxl_decoder_family_at(f)->model_type)

/* Families mlx-lm cannot convert from transformers' layout, each with the reason; their MLX
 * checkpoints are checked by test_decoder_families (our own quantizer's fixtures) instead. */
static const char *const k_no_mlx_lm[][2] = {
    {"olmo", "mlx-lm's olmo model runs only the ai2-olmo (hf_olmo) layout and exits without that package"},
    {"nanochat", "mlx-lm's nanochat takes only the original nanochat layout (transformer.wte, attn.c_q, ...), not transformers'"},
    {"hunyuan_v1_moe", "mlx-lm has no hunyuan_v1_moe model (its hunyuan runs the original Hunyuan-A13B checkpoints' names and config)"},
    {"youtu", "mlx-lm reads Youtu-LLM as model_type youtu_llm, which transformers 5 (youtu) does not load: no one checkpoint both run"},
    {"youtu_llm", "as youtu (the same decoder under the released checkpoints' model_type)"},
    {"cohere2_moe", "mlx-lm has no cohere2_moe model"},
    {"gemma3n_text", "mlx-lm converts the released vision-language gemma3n (its fixture: the same decoder), not the bare text model type"},
    {"llama4_text", "mlx-lm's llama4 reads only the multimodal layout (text_config, language_model.*), which this build does not load yet"},
    {"jamba", "mlx-lm's jamba renormalises the chosen experts' weights (a softmax over the top k), transformers' does not: no checkpoint both run alike"},
    {"qwen3_5_text", "mlx-lm converts the released vision-language qwen3_5 (its fixture: the same decoder), not the bare text model type"},
    {"qwen3_5_moe_text", "mlx-lm converts the released vision-language qwen3_5_moe (its fixture: the same decoder), not the bare text model type"},
    {"llama_bidirec", "an embedding model (llama-nemotron-embed, LLM2Vec) whose LlamaBidirectionalModel is remote code: mlx-lm has no model for it"},
    {"bitnet", "mlx-lm's BitLinear runs only as a Metal kernel (no CPU path) and reads its input unquantized, where transformers fake-quantizes it to 8 bits"},
    {"paligemma", "mlx-lm has no paligemma model (PaliGemma runs in mlx-vlm); its Gemma / Gemma 2 decoders are checked by the gemma and gemma2 fixtures"},
    {"minimax", "mlx-lm's minimax is MiniMax-M2's decoder (attention on every layer, a sigmoid router): it has no lightning attention for MiniMax-Text-01"},
    {"llava_next", "mlx-lm has no llava_next model and no MODEL_REMAPPING entry for it (only llava -> mistral3): it refuses the model type"},
    {"aya_vision", "mlx-lm has no aya_vision model and no MODEL_REMAPPING entry for it: it refuses the model type"},
    {"idefics3", "mlx-lm has no idefics3 model and no MODEL_REMAPPING entry for it (Idefics3 runs in mlx-vlm): it refuses the model type"},
    {"internvl", "mlx-lm has no internvl model and no MODEL_REMAPPING entry for it (InternVL runs in mlx-vlm): it refuses the model type"},
    {"glm4v_moe", "mlx-lm has no glm4v_moe model and no MODEL_REMAPPING entry for it (GLM-4.5V runs in mlx-vlm): it refuses the model type"},
    {"glm4v", "mlx-lm has no glm4v model and no MODEL_REMAPPING entry for it (GLM-4.1V runs in mlx-vlm): it refuses the model type"},
    {"idefics2", "mlx-lm has no idefics2 model and no MODEL_REMAPPING entry for it (Idefics2 runs in mlx-vlm): it refuses the model type"},
    {"smolvlm", "mlx-lm has no smolvlm model and no MODEL_REMAPPING entry for it (SmolVLM runs in mlx-vlm): it refuses the model type"},
};
#define N_NO_MLX_LM (sizeof k_no_mlx_lm / sizeof k_no_mlx_lm[0])

static bool mlx_lm_converts(const char *family) {
    for (size_t i = 0; i < N_NO_MLX_LM; i++)
        if (strcmp(k_no_mlx_lm[i][0], family) == 0) return false;
    return true;
}

static const char *fixture_dir(const char *name) {
    static char path[2048];
    snprintf(path, sizeof path, "%s/tests/fixtures/mlx_lm/%s", mxl_test_repo_root(), name);
    return path;
}

/* What the converted checkpoint must have bound: MLX-affine layer matrices at the case's bits
 * (granite's mlx-lm model keeps o_proj and down_proj at 8 bits in groups of 64 whatever is asked)
 * with bf16 scales, as mlx-lm writes them; in MoE layers the last expert's gate projection (a
 * row view of the stacked switch_mlp tensor) in place of down_proj (Granite MoE's experts are
 * too narrow for a group of 64: mlx-lm leaves their down projections in float) and the router,
 * which mlx-lm's Qwen3 MoE, Granite MoE and Gemma 4 keep at 8 bits (Granite MoE's o_proj too: its
 * quant_predicate, like Granite's); mlx-lm's glm4_moe router (Solar Open's, whose first layer has
 * experts) is no linear layer and stays in float. */
static void check_binding(const mxl_decoder *d, const char *family, int bits, int group_size, int *mxl_test_failed_) {
    const mxl_decoder_layer *L = &d->layers[0];
    bool granite = strcmp(family, "granite") == 0, granitemoe = strcmp(family, "granitemoe") == 0;
    bool router8 = granitemoe || strcmp(family, "qwen3_moe") == 0 || strcmp(family, "mellum") == 0 || strcmp(family, "gpt_oss") == 0 ||
                   strcmp(family, "qwen3_next") == 0 || strcmp(family, "qwen3_5_moe") == 0 || strcmp(family, "qwen3_vl_moe") == 0 ||
                   strcmp(family, "granitemoehybrid") == 0 || strcmp(family, "gemma4_text") == 0;
    /* (a recurrent first layer: its in_proj and out_proj in place of q_proj and o_proj, and in
     * place of down_proj too when the block has no MLP: Mamba) */
    const mxl_weight *wq = L->rec ? &L->rec->in_proj : &L->wq, *wo = L->rec ? &L->rec->out_proj : &L->wo;
    const mxl_weight *down = L->moe ? &L->moe->gate[d->hp.n_experts - 1] : L->has_mlp ? &L->w_down : wo;
    /* (mlx-lm leaves a matrix whose rows are no multiple of the group size in float: the
     * 48-wide MLP of the RecurrentGemma fixture) */
    if (down->cols % group_size != 0) down = wq;
    /* (likewise a query low rank that is no multiple of the group size: MiniCPM3's q_b_proj over
     * a rank of 24; its latent projection kv_a stands in) */
    if (L->mla && wq->cols % group_size != 0) wq = &L->mla->kv_a;
    CHECK_EQ_INT(wq->kind, MXL_W_MLX);
    CHECK_EQ_INT(down->kind, MXL_W_MLX);
    CHECK_EQ_INT(d->tok_embd.kind, MXL_W_MLX);
    if (wq->kind != MXL_W_MLX || down->kind != MXL_W_MLX) return;
    CHECK_EQ_INT(wq->mlx.bits, bits);
    CHECK_EQ_INT(wq->mlx.group_size, group_size);
    CHECK_EQ_INT(wq->mlx.scale_dtype, MXL_DTYPE_BF16);
    CHECK_EQ_INT(down->mlx.bits, granite ? 8 : bits);
    CHECK_EQ_INT(down->mlx.group_size, granite ? 64 : group_size);
    CHECK_EQ_INT(wo->mlx.bits, granite || granitemoe ? 8 : bits);
    if (L->moe && strcmp(family, "solar_open") == 0) {
        CHECK(L->moe->router.kind != MXL_W_MLX);
    } else if (L->moe) {
        CHECK_EQ_INT(L->moe->router.kind, MXL_W_MLX);
        CHECK_EQ_INT(L->moe->router.mlx.bits, router8 ? 8 : bits);
    }
}

/* A floating-point mode's matrices as models/mlx_fp.h makes them: mxfp4 as ggml's MXFP4 blocks,
 * mxfp8 and nvfp4 as BF16 (the experts' stacked projections and the embedding alike). */
static void check_binding_fp(const mxl_decoder *d, mxl_quant_mode mode, int *mxl_test_failed_) {
    const mxl_decoder_layer *L = &d->layers[0];
    const mxl_weight *ws[3] = {&L->wq, L->moe ? &L->moe->gate[d->hp.n_experts - 1] : &L->w_down, &d->tok_embd};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(ws[i]->kind, mode == MXL_QUANT_MXFP4 ? MXL_W_GGUF : MXL_W_DENSE);
        CHECK_EQ_INT(ws[i]->dtype, mode == MXL_QUANT_MXFP4 ? MXL_DTYPE_MXFP4 : MXL_DTYPE_BF16);
    }
}

static mxl_quant_mode mode_of(json_t *c) {
    const char *m = json_string_value(json_object_get(c, "mode"));
    return !m ? MXL_QUANT_AFFINE : !strcmp(m, "mxfp4") ? MXL_QUANT_MXFP4 : !strcmp(m, "mxfp8") ? MXL_QUANT_MXFP8
                                                                                              : !strcmp(m, "nvfp4") ? MXL_QUANT_NVFP4
                                                                                                                    : MXL_QUANT_OTHER;
}

static void check_case(json_t *fx, json_t *c, const char *family, int bits, bool reference, mxl_threadpool *pool,
                       int *mxl_test_failed_) {
    const char *name = json_string_value(json_object_get(c, "name"));
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_error err;
    if (mxl_checkpoint_open(fixture_dir(name), &ck, &err) != MXL_OK || mxl_decoder_load(ck, &d, &err) != MXL_OK) {
        fprintf(stderr, "  %s: %s\n", name, err.msg);
        CHECK(0);
        mxl_checkpoint_close(ck);
        return;
    }
    CHECK_EQ_STR(ck->config.model_type, family);
    CHECK_EQ_INT(ck->config.quant.mode, mode_of(c));
    if (mode_of(c) == MXL_QUANT_AFFINE)
        check_binding(&d, family, bits, (int)json_integer_value(json_object_get(c, "group_size")), mxl_test_failed_);
    else
        check_binding_fp(&d, mode_of(c), mxl_test_failed_);
    double xd = json_number_value(json_object_get(c, "mlx_lm_vs_transformers"));
    double tol = reference ? MXL_TEST_DEC_REF_TOL + xd : MXL_TEST_DEC_FAST_QUANT_TOL;
    double margin = reference ? 2 * tol : MXL_TEST_DEC_QUANT_TIE_MARGIN;
    mxl_test_logit_result r = {0, 0, 0};
    bool ran = mxl_test_decoder_compare(&d, c, json_object_get(fx, "tokens"), reference, margin, pool, &r);
    fprintf(stderr, "  %-15s %s: max |diff| %.2e (bound %.2e), argmax %d/%d\n", name, reference ? "[reference]" : "[fast]",
            r.max_diff, tol, r.argmax_checked - r.argmax_bad, r.argmax_checked);
    CHECK(ran);
    CHECK(r.max_diff <= tol);
    CHECK_EQ_INT(r.argmax_bad, 0);
    /* the argmax is compared somewhere: past the fast path's 0.2 margin these random models
     * leave 4 (phi3_q4) to 10 of the 10 positions */
    CHECK(r.argmax_checked >= (reference ? 5 : 3));
    mxl_decoder_free(&d);
    mxl_checkpoint_close(ck);
}

static void run_all(bool reference, int *mxl_test_failed_) {
    json_t *fx = mxl_test_load_json("tests/fixtures/mlx_lm/reference.json");
    REQUIRE(fx);
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (int bits = 4; bits <= 8 && mlx_lm_converts(FAMILY(f)); bits += 4) {
            char name[64];
            snprintf(name, sizeof name, "%s_q%d", FAMILY(f), bits);
            json_t *c = mxl_test_find_case(fx, name);
            if (!c) fprintf(stderr, "  %s: no case in tests/fixtures/mlx_lm/reference.json\n", name);
            CHECK(c != NULL);
            if (!c) continue;
            CHECK_EQ_STR(json_string_value(json_object_get(c, "family")), FAMILY(f));
            CHECK_EQ_INT(json_integer_value(json_object_get(c, "bits")), bits);
            check_case(fx, c, FAMILY(f), bits, reference, pool, mxl_test_failed_);
        }
    /* the other widths mlx-lm writes (gen_mlx_lm_fixtures.py EXTRA_BITS: 2, 3, 5, 6 bits) */
    json_t *c;
    size_t i;
    /* and the floating-point modes (EXTRA_MODES) */
    int extra = 0, modes = 0;
    json_array_foreach(json_object_get(fx, "cases"), i, c) {
        const int bits = (int)json_integer_value(json_object_get(c, "bits"));
        const char *family = json_string_value(json_object_get(c, "family"));
        if (!family) continue;
        if (mode_of(c) != MXL_QUANT_AFFINE) {
            CHECK(mode_of(c) != MXL_QUANT_OTHER);
            check_case(fx, c, family, bits, reference, pool, mxl_test_failed_);
            modes++;
            continue;
        }
        if (bits == 4 || bits == 8) continue;
        CHECK(bits == 2 || bits == 3 || bits == 5 || bits == 6);
        check_case(fx, c, family, bits, reference, pool, mxl_test_failed_);
        extra++;
    }
    CHECK_EQ_INT(extra, N_EXTRA_BITS);
    CHECK_EQ_INT(modes, N_EXTRA_MODES);
    CHECK_EQ_INT(json_array_size(json_object_get(fx, "cases")), 2 * (N_FAMILIES - N_NO_MLX_LM) + N_EXTRA_BITS + N_EXTRA_MODES);
    mxl_threadpool_destroy(pool);
    json_decref(fx);
}

TEST(decoder_mlx_lm_reference_match_mlx_lm) { run_all(true, mxl_test_failed_); }

TEST(decoder_mlx_lm_fast_path_match_mlx_lm) { run_all(false, mxl_test_failed_); }

/* `mlxcel convert` of mlx-lm's GPT-2 to an unquantized directory writes transformers' layout
 * (transformers.h.N.* names, Conv1D matrices [in, out]); the converted weights still give mlx-lm's
 * logits (transformers itself, loading such a directory, gives them within 2.3e-6: measured when
 * this was written). */
TEST(decoder_mlx_lm_gpt2_converts_back_to_transformers_layout) {
    json_t *fx = mxl_test_load_json("tests/fixtures/mlx_lm/reference.json");
    REQUIRE(fx);
    json_t *c = mxl_test_find_case(fx, "gpt2_q8");
    REQUIRE(c);
    char tmp[] = "/tmp/mxl-convert-mlx-gpt2-XXXXXX", out[128], st_path[160];
    REQUIRE(mkdtemp(tmp) != NULL);
    snprintf(out, sizeof out, "%s/out", tmp);
    mxl_error err;
    mxl_convert_opts co = {MXL_DTYPE_F32, 0, 0};
    mxl_status st = mxl_convert(fixture_dir("gpt2_q8"), out, &co, &err);
    if (st) fprintf(stderr, "  convert: %s\n", err.msg);
    REQUIRE(st == MXL_OK);
    mxl_st_model *m = NULL;
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", out);
    REQUIRE(mxl_st_model_open(st_path, &m, &err) == MXL_OK);
    const mxl_st_entry *qkv = mxl_st_model_find(m, "transformer.h.0.attn.c_attn.weight");
    const mxl_st_entry *fc = mxl_st_model_find(m, "transformer.h.1.mlp.c_fc.weight");
    CHECK(qkv && qkv->tensor.ndim == 2 && qkv->tensor.shape[0] == 64 && qkv->tensor.shape[1] == 192);
    CHECK(fc && fc->tensor.shape[0] == 64 && fc->tensor.shape[1] == 256);
    CHECK(mxl_st_model_find(m, "transformer.wte.weight") && !mxl_st_model_find(m, "model.wte.weight"));
    mxl_st_model_close(m);
    mxl_checkpoint *ck = NULL;
    mxl_decoder d;
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    bool ok = mxl_checkpoint_open(out, &ck, &err) == MXL_OK && mxl_decoder_load(ck, &d, &err) == MXL_OK;
    if (!ok) fprintf(stderr, "  converted: %s\n", err.msg);
    CHECK(ok);
    if (ok) {
        mxl_test_logit_result r = {0, 0, 0};
        CHECK(mxl_test_decoder_compare(&d, c, json_object_get(fx, "tokens"), true, 2 * MXL_TEST_DEC_REF_TOL, pool, &r));
        fprintf(stderr, "  gpt2_q8 converted [reference]: max |diff| %.2e, argmax %d/%d\n", r.max_diff,
                r.argmax_checked - r.argmax_bad, r.argmax_checked);
        CHECK(r.max_diff <= MXL_TEST_DEC_REF_TOL);
        CHECK_EQ_INT(r.argmax_bad, 0);
        mxl_decoder_free(&d);
    }
    mxl_checkpoint_close(ck);
    mxl_threadpool_destroy(pool);
    char rm[256];
    snprintf(rm, sizeof rm, "rm -rf '%s'", tmp);
    CHECK(system(rm) == 0);
    json_decref(fx);
}

/* `mlxcel convert --dtype f32` of the floating-point-mode checkpoints (mxfp4, mxfp8, nvfp4) and of
 * an affine one with stacked experts (qwen3_moe_q4: switch_mlp [E, rows, .] written back 3-D): the
 * unquantized weights it writes still give mlx-lm's logits (they are the very values: every mode
 * is exact in f32). */
TEST(decoder_mlx_lm_fp_modes_and_stacked_experts_convert_to_float) {
    json_t *fx = mxl_test_load_json("tests/fixtures/mlx_lm/reference.json");
    REQUIRE(fx);
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    char tmp[] = "/tmp/mxl-convert-mlx-fp-XXXXXX";
    REQUIRE(mkdtemp(tmp) != NULL);
    json_t *c;
    size_t i;
    int ran = 0;
    json_array_foreach(json_object_get(fx, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        if (mode_of(c) == MXL_QUANT_AFFINE && strcmp(name, "qwen3_moe_q4") != 0) continue;
        char out[128];
        snprintf(out, sizeof out, "%s/%s", tmp, name);
        mxl_convert_opts co = {MXL_DTYPE_F32, 0, 0};
        mxl_checkpoint *ck = NULL;
        mxl_decoder d;
        if (mxl_convert(fixture_dir(name), out, &co, &err) != MXL_OK || mxl_checkpoint_open(out, &ck, &err) != MXL_OK ||
            mxl_decoder_load(ck, &d, &err) != MXL_OK) {
            fprintf(stderr, "  %s: %s\n", name, err.msg);
            CHECK(0);
            mxl_checkpoint_close(ck);
            continue;
        }
        CHECK_EQ_INT(ck->config.quant.mode, MXL_QUANT_NONE);
        CHECK_EQ_INT(d.layers[0].wq.dtype, MXL_DTYPE_F32);
        mxl_test_logit_result r = {0, 0, 0};
        CHECK(mxl_test_decoder_compare(&d, c, json_object_get(fx, "tokens"), true, 2 * MXL_TEST_DEC_REF_TOL, pool, &r));
        fprintf(stderr, "  %-15s converted to f32 [reference]: max |diff| %.2e, argmax %d/%d\n", name, r.max_diff,
                r.argmax_checked - r.argmax_bad, r.argmax_checked);
        CHECK(r.max_diff <= MXL_TEST_DEC_REF_TOL);
        CHECK_EQ_INT(r.argmax_bad, 0);
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
        ran++;
    }
    CHECK_EQ_INT(ran, N_EXTRA_MODES + 1);
    mxl_test_rmtree(tmp);
    mxl_threadpool_destroy(pool);
    json_decref(fx);
}

/* The element codes of the floating-point modes (OCP MX / NVIDIA's definitions), and a scales
 * tensor of the wrong width refused by name. */
TEST(mlx_fp_codes_and_shapes) {
    static const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int c = 0; c < 16; c++) CHECK(mxl_fp_e2m1((uint8_t)c) == e2m1[c]);
    CHECK(mxl_fp_e4m3(0x00) == 0.0f);
    CHECK(mxl_fp_e4m3(0x01) == 0x1p-9f); /* smallest subnormal */
    CHECK(mxl_fp_e4m3(0x08) == 0x1p-6f); /* smallest normal */
    CHECK(mxl_fp_e4m3(0x38) == 1.0f);
    CHECK(mxl_fp_e4m3(0x7E) == 448.0f && mxl_fp_e4m3(0xFE) == -448.0f);
    CHECK(isnan(mxl_fp_e4m3(0x7F)) && isnan(mxl_fp_e4m3(0xFF)));
    CHECK(mxl_fp_e8m0(127) == 1.0f && mxl_fp_e8m0(0) == 0x1p-127f && mxl_fp_e8m0(254) == 0x1p127f && isnan(mxl_fp_e8m0(255)));
    uint32_t w[2 * 8] = {0};
    uint8_t sc[2 * 4] = {0};
    mxl_tensor tw = {.dtype = MXL_DTYPE_U32, .ndim = 2, .shape = {2, 8}, .data = w, .nbytes = sizeof w};
    mxl_tensor ts = {.dtype = MXL_DTYPE_U8, .ndim = 2, .shape = {2, 4}, .data = sc, .nbytes = sizeof sc};
    mxl_arena a;
    mxl_arena_init(&a, 4096);
    mxl_weight out;
    mxl_error err = {0};
    CHECK(mxl_mlx_fp_weight(&tw, &ts, MXL_QUANT_NVFP4, "x.weight", &a, &out, &err) == MXL_OK); /* 64 columns: 4 groups of 16 */
    CHECK_EQ_INT(out.cols, 64);
    CHECK(mxl_mlx_fp_weight(&tw, &ts, MXL_QUANT_MXFP4, "x.weight", &a, &out, &err) != MXL_OK); /* mxfp4 wants 2 groups */
    CHECK(strstr(err.msg, "x.weight") && strstr(err.msg, "mxfp4"));
    mxl_arena_free(&a);
}
