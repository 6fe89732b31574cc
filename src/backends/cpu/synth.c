/* synth.c - synthetic weights for benchmarks (synth.h). */
#include "backends/cpu/synth.h"

#include <string.h>

static inline uint64_t next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}
static inline float unit(uint64_t *s) { return (float)(next(s) >> 40) / 16777216.0f; }
static void put_h(uint8_t *p, float v) {
    uint16_t h = mxl_f32_to_f16(v);
    memcpy(p, &h, 2);
}

void mxl_synth_fill(mxl_dtype t, uint8_t *p, uint64_t nblocks, uint64_t *seed) {
    const mxl_dtype_info *inf = mxl_dtype_get_info(t);
    uint64_t bytes = nblocks * inf->block_bytes;
    if (t == MXL_DTYPE_F32 || t == MXL_DTYPE_F16 || t == MXL_DTYPE_BF16) {
        for (uint64_t i = 0; i < nblocks; i++) {
            float v = unit(seed) * 2.0f - 1.0f;
            if (t == MXL_DTYPE_F32) memcpy(p + 4 * i, &v, 4);
            else {
                uint16_t h = t == MXL_DTYPE_F16 ? mxl_f32_to_f16(v) : mxl_f32_to_bf16(v);
                memcpy(p + 2 * i, &h, 2);
            }
        }
        return;
    }
    uint64_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t v = next(seed);
        memcpy(p + i, &v, 8);
    }
    for (; i < bytes; i++) p[i] = (uint8_t)next(seed);
    int off_d = -1, off_m = -1;
    switch (t) {
    case MXL_DTYPE_Q4_0: case MXL_DTYPE_Q5_0: case MXL_DTYPE_Q8_0: case MXL_DTYPE_IQ4_NL: off_d = 0; break;
    case MXL_DTYPE_IQ4_XS: off_d = 0; break; /* (random 6-bit scales: |ls - 32| <= 32) */
    case MXL_DTYPE_IQ2_XXS: case MXL_DTYPE_IQ2_XS: case MXL_DTYPE_IQ2_S: case MXL_DTYPE_IQ3_XXS:
    case MXL_DTYPE_IQ3_S: case MXL_DTYPE_IQ1_S:
        off_d = 0;
        break;
    case MXL_DTYPE_Q4_1: case MXL_DTYPE_Q5_1: case MXL_DTYPE_Q4_K: case MXL_DTYPE_Q5_K:
        off_d = 0, off_m = 2;
        break;
    case MXL_DTYPE_Q2_K: off_d = 80, off_m = 82; break;
    case MXL_DTYPE_Q3_K: off_d = 108; break;
    case MXL_DTYPE_Q6_K: off_d = 208; break;
    case MXL_DTYPE_TQ1_0: off_d = 52; break;
    case MXL_DTYPE_TQ2_0: off_d = 64; break;
    default: break;
    }
    for (uint64_t b = 0; b < nblocks; b++) {
        uint8_t *blk = p + b * inf->block_bytes;
        if (t == MXL_DTYPE_MXFP4) blk[0] = (uint8_t)(114 + next(seed) % 8); /* scales 2^-14 .. 2^-7 (x 12 at most) */
        if (t == MXL_DTYPE_IQ1_M) { /* d in the top nibbles of the four u16 scales at byte 48 */
            uint16_t h = mxl_f32_to_f16(0.001f + 0.01f * unit(seed)), sc[4];
            memcpy(sc, blk + 48, 8);
            for (int k = 0; k < 4; k++) sc[k] = (uint16_t)((sc[k] & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12));
            memcpy(blk + 48, sc, 8);
        }
        if (off_d >= 0) put_h(blk + off_d, 0.001f + 0.01f * unit(seed));
        if (off_m >= 0) put_h(blk + off_m, 0.01f * unit(seed));
    }
}
