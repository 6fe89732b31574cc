/* kv_turbo.h - the TurboQuant KV cache types (the spec's turbo4 / turbo3): a random rotation, then
 * an MSE-optimal scalar quantizer per coordinate (Zandieh et al., "TurboQuant: Online Vector
 * Quantization with Near-optimal Distortion Rate", 2025).
 *
 * Rotation: a randomized Hadamard transform over chunks of R coordinates (R a power of two from 32
 * to 256 dividing every head; the decoder picks the largest): y = H diag(s) x / sqrt(R), with H
 * the Sylvester Hadamard matrix (the in-place butterflies of mxl_kv_rotate_ref, stage h = 1, 2,
 * 4, ...: a, b -> a + b, a - b) and s the fixed signs mxl_kv_turbo_signs (bit i set: negate
 * coordinate i of a chunk). The inverse is diag(s) H y / sqrt(R). Orthogonal, so a query rotated
 * the same way gives the same dot products; attention sums rotated values and the output is
 * rotated back.
 *
 * Blocks: each 32 consecutive rotated coordinates keep one norm, stored as the f16
 * d = sqrt(sum x^2 / 32); x / d is then a point of the sphere of radius sqrt(32) in 32
 * dimensions, whose coordinates (for a rotated vector) follow TurboQuant's density
 * (1 - x^2 / 32)^(29/2). Each coordinate is the index of the nearest entry of that density's
 * Lloyd-Max codebook (scripts/gen_turbo_codebook.py; 16 entries for turbo4, 8 for turbo3,
 * ascending and symmetric): code = the number of midpoints between consecutive entries that
 * x * (1 / d16) exceeds, with d16 the stored scale as f32 (a zero scale gives the code of the
 * entry just below 0, read back as -0). Read back: x = d16 * codebook[code].
 *   TURBO4 (18 bytes per 32): d (f16), qs[16]: code j in the low nibble of byte j, code j + 16 in
 *          its high nibble (q4_0's packing).
 *   TURBO3 (14 bytes per 32): d (f16), qs[8]: bits 0-1 of code j at bits 2 (j / 8) of byte j % 8,
 *          qh[4]: bit 2 of code j at bit j of the little-endian 32-bit word.
 * The quantizer sums x^2 in index order without fused multiply-adds; the Python reference
 * (tests/fixtures/kv_quant/gen_turbo_fixtures.py) makes the same bytes. */
#ifndef MXL_BACKENDS_CPU_KV_TURBO_H
#define MXL_BACKENDS_CPU_KV_TURBO_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/op_types.h"
#include "core/dtype.h"

#define MXL_KV_TURBO_MAX_CHUNK MXL_KV_ROTATE_MAX_CHUNK

extern const float mxl_kv_turbo4_codebook[16];
extern const float mxl_kv_turbo3_codebook[8];
extern const uint8_t mxl_kv_turbo_signs[MXL_KV_TURBO_MAX_CHUNK / 8];

/* x[n] (n a multiple of chunk; chunk a power of two, 1 < chunk <= 256) rotated in place, chunk by
 * chunk (inverse: rotated back). */
void mxl_kv_rotate_ref(float *x, int64_t n, int64_t chunk, bool inverse);
/* The same on AVX2 vectors, bit for bit (x86-64 builds; call on AVX2 CPUs). */
void mxl_kv_rotate_avx2(float *x, int64_t n, int64_t chunk, bool inverse);

/* One block of 32 (already rotated) values into turbo4 / turbo3 bytes, and back. */
void mxl_kv_turbo_quantize32(mxl_dtype t, const float *x, uint8_t *block);
void mxl_kv_turbo_dequantize32(mxl_dtype t, const uint8_t *block, float *x);

#endif
