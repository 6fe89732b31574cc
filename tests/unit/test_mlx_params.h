/* test_mlx_params.h - random MLX affine scales and biases for the kernel tests
 * (test_kernels_matmul.c, test_kernels_invariance.c, test_matvec_avx512.c). */
#ifndef MXL_TESTS_UNIT_TEST_MLX_PARAMS_H
#define MXL_TESTS_UNIT_TEST_MLX_PARAMS_H

#include <stdint.h>

#include "core/dtype.h"

/* ng groups of (scale, bias) in dt (F32, F16 or BF16) into sc and bs (ng elements each): scales
 * that spread `bits`-bit codes over about +-0.1..0.3, biases centring them, drawn with frand
 * (uniform in [-1, 1)), two calls per group in order. */
void mxl_test_mlx_params(mxl_dtype dt, int bits, int64_t ng, uint8_t *sc, uint8_t *bs, float (*frand)(void));

#endif
