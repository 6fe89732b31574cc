/* test_decoder_decode_steps.c - the attention decoders (dense and mixtures of experts) over a
 * prefill and 16 decode steps against transformers.
 *
 * Truth: the "decode" record that gen_decoder_fixtures.py --add-decode writes into the fixtures of
 * the dense-breadth and mixture-of-experts families (DECODE_ADDED): transformers on the fixture's
 * f32 weights, a 40-token prompt, the 16 tokens its cached greedy generate() picks, and the logits
 * before each of them. Here (test_decoder_compare.h mxl_test_decoder_decode_steps) the prompt is
 * prefilled in chunks of 7, then 16 decode steps feed transformers' tokens: every step's logits
 * within the decoder tests' bounds (1e-3 on the reference path, 5e-3 on the fast one) and our
 * greedy pick equal to transformers' wherever its top-2 margin is past twice the bound.
 * The fast path runs here with an f32 cache: over 56 positions the f16 cache's rounding moves a
 * mixture of experts' hidden state enough to flip near-tied router choices (measured: Mistral 4
 * 3.4 from its first decode step on, Command MoE 0.12 at one step, both 1e-3 - 5e-3 with the f32
 * cache), and dense models drift to 5.4e-3 - 5.7e-3 (BitNet, gpt-oss, Ministral 3, Nemotron); the
 * f16 cache's own bounds are the 10-token tests' (test_decoder_families.c, the KV-type tests).
 * The recurrent families' records run in test_decoder_recurrent.c with their state checks. */
#include <jansson.h>
#include <stdio.h>

#include "models/decoder.h"
#include "test.h"
#include "test_decoder_compare.h"

/* gen_decoder_fixtures.py DECODE_ADDED */
#define N_DECODE_ADDED 50

TEST(decoder_decode_steps_match_transformers) {
    json_t *fx = mxl_test_decoder_cases();
    REQUIRE(fx);
    mxl_threadpool *pool = NULL;
    mxl_error err;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    json_t *c;
    size_t i;
    int ran = 0;
    json_array_foreach(json_object_get(fx, "cases"), i, c) {
        json_t *rec = json_object_get(c, "decode");
        const char *name = json_string_value(json_object_get(c, "name"));
        if (!rec || !name) continue;
        char dir[2048];
        snprintf(dir, sizeof dir, "%s/tests/fixtures/decoders/%s", mxl_test_repo_root(), name);
        mxl_checkpoint *ck = NULL;
        mxl_decoder d;
        if (mxl_checkpoint_open(dir, &ck, &err) != MXL_OK || mxl_decoder_load(ck, &d, &err) != MXL_OK) {
            fprintf(stderr, "  %s: %s\n", name, err.msg);
            CHECK(0);
            mxl_checkpoint_close(ck);
            continue;
        }
        if (d.rec_state_floats == 0) { /* (the recurrent ones: test_decoder_recurrent.c) */
            ran++;
            for (int reference = 1; reference >= 0; reference--) {
                const double tol = reference ? MXL_TEST_DEC_REF_TOL : MXL_TEST_DEC_FAST_DENSE_TOL;
                const mxl_decoder_kv_opts f32 = {MXL_DECODER_KV_F32, MXL_DECODER_KV_F32, 0, 0, 0};
                mxl_test_logit_result r;
                CHECK(mxl_test_decoder_decode_steps(&d, rec, reference, tol, &f32, reference ? pool : NULL, &r));
                fprintf(stderr, "  %-18s %s 40 + 16 steps: max |diff| %.2e, greedy %d/%d\n", name, reference ? "[reference]" : "[fast]     ",
                        r.max_diff, r.argmax_checked - r.argmax_bad, r.argmax_checked);
                CHECK(r.max_diff <= tol);
                CHECK_EQ_INT(r.argmax_bad, 0);
                CHECK(r.argmax_checked >= 8);
            }
        }
        mxl_decoder_free(&d);
        mxl_checkpoint_close(ck);
    }
    CHECK_EQ_INT(ran, N_DECODE_ADDED);
    mxl_threadpool_destroy(pool);
    json_decref(fx);
}
