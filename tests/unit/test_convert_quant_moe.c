/* test_convert_quant_moe.c - `mlxcel convert --q-bits 4 / 8 --q-group-size 32` (models/convert.h) of
 * the mixture-of-experts and latent-attention families' tiny checkpoints, those whose experts are
 * stored stacked among them (restated in mlx-lm's layout: models/convert_experts.h).
 *
 * Truth: tests/fixtures/convert/moe_quant.json (gen_convert_moe_fixtures.py): transformers on the
 * weights the converted checkpoint holds, dequantized by numpy from what convert wrote, and how
 * many matrices came out quantized. Here the fixture is converted again, must quantize as many
 * matrices (the experts among them: the first sparse layer's gate, and its down projection where
 * the group divides its width, are MLX weights), and runs on both
 * paths against those logits: the reference path within 1e-3, the fast path (int8 activations)
 * within FAST_TOL, greedy tokens equal where transformers' top-2 margin exceeds twice the bound. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "models/checkpoint.h"
#include "models/convert.h"
#include "models/decoder.h"
#include "test.h"
#include "test_decoder_compare.h"

/* the fast path: int8 activations against exactly the stored weights (measured 4.4e-4 - 5.8e-3) */
#define FAST_TOL 2.5e-2

TEST(convert_quant_moe_families_match_transformers) {
    json_t *fx = mxl_test_load_json("tests/fixtures/convert/moe_quant.json");
    REQUIRE(fx);
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    char tmp[] = "/tmp/mxl-convert-moe-XXXXXX";
    REQUIRE(mkdtemp(tmp) != NULL);
    json_t *c;
    size_t i;
    int ran = 0;
    json_array_foreach(json_object_get(fx, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name")), *family = json_string_value(json_object_get(c, "family"));
        const int bits = (int)json_integer_value(json_object_get(c, "bits"));
        REQUIRE(name && family);
        char src[2048], out[256];
        snprintf(src, sizeof src, "%s/tests/fixtures/decoders/%s", mxl_test_repo_root(), family);
        snprintf(out, sizeof out, "%s/%s", tmp, name);
        mxl_convert_opts co = {MXL_DTYPE_F32, bits, (int)json_integer_value(json_object_get(c, "group_size"))};
        mxl_checkpoint *ck = NULL;
        mxl_decoder d;
        if (mxl_convert(src, out, &co, &err) != MXL_OK || mxl_checkpoint_open(out, &ck, &err) != MXL_OK ||
            mxl_decoder_load(ck, &d, &err) != MXL_OK) {
            fprintf(stderr, "  %s: %s\n", name, err.msg);
            CHECK(0);
            mxl_checkpoint_close(ck);
            continue;
        }
        CHECK_EQ_INT(ck->config.quant.mode, MXL_QUANT_AFFINE);
        /* as many quantized matrices (weight + scales + biases) as when the truth was made */
        int64_t n_quant = 0;
        for (size_t t = 0; t < mxl_st_model_tensor_count(ck->st); t++) {
            const char *tn = mxl_st_model_tensor_at(ck->st, t)->name;
            n_quant += strlen(tn) > 7 && strcmp(tn + strlen(tn) - 7, ".scales") == 0;
        }
        CHECK_EQ_INT(n_quant, json_integer_value(json_object_get(c, "quantized_matrices")));
        const mxl_decoder_layer *L = NULL;
        for (int64_t l = 0; l < d.hp.n_layers && !L; l++)
            if (d.layers[l].moe) L = &d.layers[l];
        CHECK(L != NULL || d.hp.n_experts == 0); /* (youtu: latent attention before a dense MLP) */
        if (L) CHECK_EQ_INT(L->moe->gate[0].kind, MXL_W_MLX);
        if (L && d.hp.moe_ffn % co.q_group_size == 0) CHECK_EQ_INT(L->moe->down[0].kind, MXL_W_MLX);
        if (d.layers[0].mla) CHECK_EQ_INT(d.layers[0].mla->kv_a.kind, MXL_W_MLX);
        for (int reference = 1; reference >= 0; reference--) {
            const double tol = reference ? MXL_TEST_DEC_REF_TOL : FAST_TOL;
            mxl_test_logit_result r;
            CHECK(mxl_test_decoder_compare(&d, c, json_object_get(fx, "tokens"), reference, 2 * tol, pool, &r));
            fprintf(stderr, "  %-18s %s: max |diff| %.2e, argmax %d/%d\n", name, reference ? "[reference]" : "[fast]     ", r.max_diff,
                    r.argmax_checked - r.argmax_bad, r.argmax_checked);
            CHECK(r.max_diff <= tol);
            CHECK_EQ_INT(r.argmax_bad, 0);
            CHECK(r.argmax_checked >= 3);
        }
        ran++;
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
    }
    CHECK_EQ_INT(ran, 52); /* 26 families x 4 and 8 bits */
    mxl_test_rmtree(tmp);
    mxl_threadpool_destroy(pool);
    json_decref(fx);
}

/* A config whose expert count disagrees with the stacked expert tensors: `convert -q` refuses it
 * naming the tensor, and writes nothing. */
TEST(convert_quant_moe_refuses_expert_count_mismatch) {
    char tmp[] = "/tmp/mxl-convert-moe-bad-XXXXXX";
    REQUIRE(mkdtemp(tmp) != NULL);
    char src[2048], path[2400], out[2200];
    snprintf(src, sizeof src, "%s/tests/fixtures/decoders/granitemoe", mxl_test_repo_root());
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    char dst[2200];
    snprintf(dst, sizeof dst, "%s/model.safetensors", tmp);
    REQUIRE(symlink(path, dst) == 0);
    snprintf(path, sizeof path, "%s/config.json", src);
    json_error_t je;
    json_t *cfg = json_load_file(path, 0, &je);
    REQUIRE(cfg);
    json_object_set_new(cfg, "num_local_experts", json_integer(4)); /* the tensors hold 8 */
    snprintf(path, sizeof path, "%s/config.json", tmp);
    REQUIRE(json_dump_file(cfg, path, 0) == 0);
    json_decref(cfg);
    snprintf(out, sizeof out, "%s/out", tmp);
    mxl_convert_opts co = {MXL_DTYPE_F32, 4, 32};
    mxl_error err = {0};
    CHECK(mxl_convert(tmp, out, &co, &err) != MXL_OK);
    CHECK(strstr(err.msg, "block_sparse_moe.input_linear.weight") != NULL);
    CHECK(strstr(err.msg, "4 experts") != NULL);
    fprintf(stderr, "  %s\n", err.msg);
    snprintf(path, sizeof path, "%s/config.json", out);
    CHECK(access(path, F_OK) != 0);
    mxl_test_rmtree(tmp);
}
