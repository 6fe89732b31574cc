/* test_decoder_compare.h - one decoder against recorded reference logits, the comparison the
 * decoder tests share (test_decoder_families.c against transformers, test_decoder_gguf_families.c
 * against transformers on llama.cpp's conversions, test_decoder_mlx_lm.c against mlx-lm).
 *
 * A case is a reference.json object as gen_decoder_fixtures.py's record() writes it:
 * "full_positions" (ascending, the last one = the last token), "full_logits" [n_full][vocab],
 * and per position "argmax", "argmax_logit" and "margin" (top-1 minus top-2). */
#ifndef MXL_TESTS_UNIT_TEST_DECODER_COMPARE_H
#define MXL_TESTS_UNIT_TEST_DECODER_COMPARE_H

#include <stdbool.h>

#include "models/decoder.h"

typedef struct json_t json_t;

/* The decoder tests' bounds on |logit - reference|; test_decoder_families.c's header comment says
 * where each comes from. Reference path (dequantized weights, f32 activations and KV cache): */
#define MXL_TEST_DEC_REF_TOL 1e-3
/* fast path, dense weights (the f16 KV cache) and its argmax near-tie margin 2 * 5e-3: */
#define MXL_TEST_DEC_FAST_DENSE_TOL 5e-3
/* fast path, MLX-quantized weights (activations quantized to int8 in blocks of 32 for the
 * quantized matmuls), with the argmax checked where the reference margin exceeds 0.2: */
#define MXL_TEST_DEC_FAST_QUANT_TOL 0.15
/* BitNet's packed checkpoints on the fast path: each linear layer's input is fake-quantized to 8
 * bits per row (a step of max|x| / 127, rounded: discontinuous), and the fast kernels quantize
 * that again in blocks of 32 (q8a); half a block step moves a value across the next layer's
 * rounding, and those flips compound over the layers (measured: 0.12 / 0.18 on the two packed
 * fixtures, 1.3e-6 on the reference path; llama.cpp's TQ kernels requantize in blocks of 256
 * alike). An int8 x ternary kernel on the row's own codes would make it exact (the quant-format
 * issue's TQ work). */
#define MXL_TEST_DEC_BITNET_FAST_TOL 0.25
#define MXL_TEST_DEC_QUANT_TIE_MARGIN 0.2
/* The factor by which a reduced-precision KV cache's bounds grow for a model: rounding K moves an
 * attention logit by about scale * |q| * |dk|, which the 1/sqrt(head_dim) families keep at 1;
 * Gemma 4 attends at scale 1 over RMS-normed heads (|q| = sqrt(head_dim)), so its errors grow by
 * sqrt(head_dim) (measured on gemma4_text: 1.0e-2 with the f16 cache, 8.4e-6 with f32). */
static inline double mxl_test_kv_gain(const mxl_decoder *d) {
    const double g = (double)d->hp.attn_scale * __builtin_sqrt((double)d->hp.head_dim);
    return g > 1.0 ? g : 1.0;
}

typedef struct mxl_test_logit_result {
    double max_diff;    /* over every compared logit (NaN shows as a failure, never as 0) */
    int argmax_checked; /* positions whose reference margin exceeds the tie margin */
    int argmax_bad;     /* ... and whose argmax differs */
} mxl_test_logit_result;

/* Runs `tokens` (a JSON array of ids) through d on one path (reference: dequantized weights,
 * f32 activations and KV cache; else the fast path) twice:
 *  - one token per call: at every position the logit of the reference's argmax, and the argmax
 *    itself where the reference margin exceeds tie_margin; full logits at full_positions;
 *  - the whole sequence in one call with a batch of 4 (chunked prefill): full logits of the last
 *    position.
 * Returns false when a call failed (printing why) or the case does not fit the tokens. */
bool mxl_test_decoder_compare(const mxl_decoder *d, json_t *c, json_t *tokens, bool reference, double tie_margin,
                              mxl_threadpool *pool, mxl_test_logit_result *r);

/* A case's "decode" record (gen_decoder_fixtures.py record_decode: a 40-token prompt, the 16
 * tokens transformers' cached greedy generate() picks after it and the logits before each): the
 * prompt prefilled in chunks of 7, then 16 decode steps feeding transformers' tokens; every step's
 * logits against the recorded ones (max_diff) and the greedy pick where the recorded margin
 * exceeds 2 * tol (argmax_checked / argmax_bad); the cache in the types of kv (NULL: the path's
 * own, f32 on the reference path and f16 on the fast one). False when a call failed or the record
 * is malformed. */
bool mxl_test_decoder_decode_steps(const mxl_decoder *d, json_t *rec, bool reference, double tol, const mxl_decoder_kv_opts *kv,
                                   mxl_threadpool *pool, mxl_test_logit_result *r);

/* Every case of tests/fixtures/decoders/<case>/case.json (one per fixture directory, written by
 * gen_decoder_fixtures.py, so a new family's fixture is files of its own), in name order, as one
 * {"tokens", "cases"} document (json_decref it); NULL, saying why, when a case is unreadable or
 * runs other tokens than the first. */
json_t *mxl_test_decoder_cases(void);

/* The case named `name` of fx["cases"], or NULL. */
json_t *mxl_test_find_case(json_t *fx, const char *name);

#endif
