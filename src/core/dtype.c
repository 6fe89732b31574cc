/* dtype.c - dtype table and scalar float conversions (see dtype.h). */
#include "core/dtype.h"

#include <math.h>
#include <string.h>

#include "core/status.h"

static const mxl_dtype_info k_infos[MXL_DTYPE_COUNT] = {
    [MXL_DTYPE_INVALID] = {"INVALID", 1, 0, false, false},
    [MXL_DTYPE_F32] = {"F32", 1, 4, true, false},
    [MXL_DTYPE_F16] = {"F16", 1, 2, true, false},
    [MXL_DTYPE_BF16] = {"BF16", 1, 2, true, false},
    [MXL_DTYPE_F64] = {"F64", 1, 8, true, false},
    [MXL_DTYPE_F8_E4M3] = {"F8_E4M3", 1, 1, true, false},
    [MXL_DTYPE_F8_E5M2] = {"F8_E5M2", 1, 1, true, false},
    [MXL_DTYPE_I8] = {"I8", 1, 1, false, false},
    [MXL_DTYPE_U8] = {"U8", 1, 1, false, false},
    [MXL_DTYPE_I16] = {"I16", 1, 2, false, false},
    [MXL_DTYPE_U16] = {"U16", 1, 2, false, false},
    [MXL_DTYPE_I32] = {"I32", 1, 4, false, false},
    [MXL_DTYPE_U32] = {"U32", 1, 4, false, false},
    [MXL_DTYPE_I64] = {"I64", 1, 8, false, false},
    [MXL_DTYPE_U64] = {"U64", 1, 8, false, false},
    [MXL_DTYPE_BOOL] = {"BOOL", 1, 1, false, false},
    /* ggml-common.h block_* structs */
    [MXL_DTYPE_Q4_0] = {"Q4_0", 32, 18, false, true},  /* d f16 + 16 nibble bytes */
    [MXL_DTYPE_Q4_1] = {"Q4_1", 32, 20, false, true},  /* d, m f16 + 16 */
    [MXL_DTYPE_Q5_0] = {"Q5_0", 32, 22, false, true},  /* d + qh[4] + 16 */
    [MXL_DTYPE_Q5_1] = {"Q5_1", 32, 24, false, true},  /* d, m + qh[4] + 16 */
    [MXL_DTYPE_Q8_0] = {"Q8_0", 32, 34, false, true},  /* d + 32 int8 */
    [MXL_DTYPE_Q8_1] = {"Q8_1", 32, 36, false, true},  /* d, s + 32 int8 */
    [MXL_DTYPE_Q2_K] = {"Q2_K", 256, 84, false, true}, /* scales[16] qs[64] d dmin */
    [MXL_DTYPE_Q3_K] = {"Q3_K", 256, 110, false, true}, /* hmask[32] qs[64] scales[12] d */
    [MXL_DTYPE_Q4_K] = {"Q4_K", 256, 144, false, true}, /* d dmin scales[12] qs[128] */
    [MXL_DTYPE_Q5_K] = {"Q5_K", 256, 176, false, true}, /* d dmin scales[12] qh[32] qs[128] */
    [MXL_DTYPE_Q6_K] = {"Q6_K", 256, 210, false, true}, /* ql[128] qh[64] scales[16] d */
    [MXL_DTYPE_Q8_K] = {"Q8_K", 256, 292, false, true}, /* d f32 qs[256] bsums[16] i16 */
    [MXL_DTYPE_MXFP4] = {"MXFP4", 32, 17, false, true}, /* e (E8M0) + 16 nibble bytes */
    [MXL_DTYPE_TQ1_0] = {"TQ1_0", 256, 54, false, true}, /* qs[48] qh[4] d */
    [MXL_DTYPE_TQ2_0] = {"TQ2_0", 256, 66, false, true}, /* qs[64] d */
    [MXL_DTYPE_IQ4_NL] = {"IQ4_NL", 32, 18, false, true}, /* d + 16 nibble bytes */
    [MXL_DTYPE_IQ4_XS] = {"IQ4_XS", 256, 136, false, true}, /* d scales_h scales_l[4] qs[128] */
    [MXL_DTYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66, false, true}, /* d qs[32] u16 */
    [MXL_DTYPE_IQ2_XS] = {"IQ2_XS", 256, 74, false, true},   /* d qs[32] u16 scales[8] */
    [MXL_DTYPE_IQ2_S] = {"IQ2_S", 256, 82, false, true},     /* d qs[64] qh[8] scales[8] */
    [MXL_DTYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98, false, true}, /* d qs[96] */
    [MXL_DTYPE_IQ3_S] = {"IQ3_S", 256, 110, false, true},    /* d qs[64] qh[8] signs[32] scales[4] */
    [MXL_DTYPE_IQ1_S] = {"IQ1_S", 256, 50, false, true},     /* d qs[32] qh[8] u16 */
    [MXL_DTYPE_IQ1_M] = {"IQ1_M", 256, 56, false, true},     /* qs[32] qh[16] scales[8] (d inside) */
    [MXL_DTYPE_TURBO4] = {"TURBO4", 32, 18, false, false},   /* d f16 + 16 nibble bytes (KV cache only) */
    [MXL_DTYPE_TURBO3] = {"TURBO3", 32, 14, false, false},   /* d f16 + qs[8] (2 bits) + qh[4] (KV cache only) */
};

const mxl_dtype_info *mxl_dtype_get_info(mxl_dtype dtype) {
    if ((int)dtype <= 0 || dtype >= MXL_DTYPE_COUNT) return &k_infos[MXL_DTYPE_INVALID];
    return &k_infos[dtype];
}

const char *mxl_dtype_name(mxl_dtype dtype) { return mxl_dtype_get_info(dtype)->name; }

mxl_dtype mxl_dtype_from_safetensors(const char *name) {
    static const struct { const char *s; mxl_dtype d; } map[] = {
        {"F32", MXL_DTYPE_F32},         {"F16", MXL_DTYPE_F16},   {"BF16", MXL_DTYPE_BF16},
        {"F64", MXL_DTYPE_F64},         {"F8_E4M3", MXL_DTYPE_F8_E4M3},
        {"F8_E5M2", MXL_DTYPE_F8_E5M2}, {"I8", MXL_DTYPE_I8},     {"U8", MXL_DTYPE_U8},
        {"I16", MXL_DTYPE_I16},         {"U16", MXL_DTYPE_U16},   {"I32", MXL_DTYPE_I32},
        {"U32", MXL_DTYPE_U32},         {"I64", MXL_DTYPE_I64},   {"U64", MXL_DTYPE_U64},
        {"BOOL", MXL_DTYPE_BOOL},
    };
    if (!name) return MXL_DTYPE_INVALID;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i].s, name) == 0) return map[i].d;
    return MXL_DTYPE_INVALID;
}

int mxl_dtype_row_bytes(mxl_dtype dtype, uint64_t n_elems, uint64_t *out_bytes) {
    const mxl_dtype_info *info = mxl_dtype_get_info(dtype);
    if (info->block_bytes == 0) return 1;
    if (n_elems % info->block_elems != 0) return 1;
    return mxl_mul_u64(n_elems / info->block_elems, info->block_bytes, out_bytes);
}

static float bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint32_t f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float mxl_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24 */
        float v = ldexpf((float)mant, -24);
        return sign ? -v : v;
    }
    if (exp == 31) return bits_to_f32(sign | 0x7f800000u | (mant << 13));
    return bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t mxl_f32_to_f16(float f) {
    uint32_t u = f32_to_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return sign | 0x7e00u; /* nan */
    if (abs >= 0x477ff000u) return sign | 0x7c00u; /* rounds to inf (>= 65520) */
    if (abs < 0x38800000u) {
        /* result is subnormal or zero: value / 2^-24, round half to even */
        float v = bits_to_f32(abs);
        float scaled = v * 16777216.0f; /* exact: power of two */
        float r = nearbyintf(scaled);   /* default rounding mode is nearest-even */
        return sign | (uint16_t)r;
    }
    uint32_t exp = (abs >> 23) - 112;
    uint32_t mant = abs & 0x7fffffu;
    uint32_t half = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half++;
    return sign | (uint16_t)half;
}

float mxl_bf16_to_f32(uint16_t b) { return bits_to_f32((uint32_t)b << 16); }

uint16_t mxl_f32_to_bf16(float f) {
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float mxl_f8_e4m3_to_f32(uint8_t v) {
    uint32_t sign = v & 0x80u;
    uint32_t exp = (v >> 3) & 0xfu;
    uint32_t mant = v & 0x7u;
    float r;
    if (exp == 0xf && mant == 0x7) return sign ? -NAN : NAN;
    if (exp == 0) r = ldexpf((float)mant, -9); /* subnormal: mant/8 * 2^-6 */
    else r = ldexpf(1.0f + (float)mant / 8.0f, (int)exp - 7);
    return sign ? -r : r;
}
