/* dense_neon.c - AArch64 NEON dense dot products (dense.h): four independent 4-lane FMA chains
 * (16 elements per step) to hide FMA latency, a 4-element remainder into chain 0, lanes summed
 * as (a0+a1)+(a2+a3), then the scalar tail in index order. F16 rows are widened with FCVTL
 * (exact), BF16 rows by a 16-bit left shift (exact). A float path: the result differs from the
 * reference (one f32 accumulator in index order) only by summation order and FMA rounding. */
#include "backends/cpu/dense.h"

#include "backends/cpu/quant_gguf.h"

#if defined(__aarch64__)
#include <arm_neon.h>

static inline float32x4_t load4(mxl_dtype t, const void *w, int64_t i) {
    /* byte loads: a row inside a safetensors file need not be aligned */
    if (t == MXL_DTYPE_F32) return vreinterpretq_f32_u8(vld1q_u8((const uint8_t *)w + 4 * i));
    uint16x4_t h = vreinterpret_u16_u8(vld1_u8((const uint8_t *)w + 2 * i));
    if (t == MXL_DTYPE_F16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

__attribute__((always_inline)) static inline float dot_t(mxl_dtype t, int64_t n, const void *w, const float *x) {
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, load4(t, w, i), vld1q_f32(x + i));
        a1 = vfmaq_f32(a1, load4(t, w, i + 4), vld1q_f32(x + i + 4));
        a2 = vfmaq_f32(a2, load4(t, w, i + 8), vld1q_f32(x + i + 8));
        a3 = vfmaq_f32(a3, load4(t, w, i + 12), vld1q_f32(x + i + 12));
    }
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, load4(t, w, i), vld1q_f32(x + i));
    float acc = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++) acc += mxl_dense_elem(t, w, i) * x[i];
    return acc;
}
static float dot_f32(int64_t n, const void *w, const float *x) { return dot_t(MXL_DTYPE_F32, n, w, x); }
static float dot_f16(int64_t n, const void *w, const float *x) { return dot_t(MXL_DTYPE_F16, n, w, x); }
static float dot_bf16(int64_t n, const void *w, const float *x) { return dot_t(MXL_DTYPE_BF16, n, w, x); }

mxl_dense_dot_fn mxl_dense_dot_neon_get(mxl_dtype t) {
    switch (t) {
    case MXL_DTYPE_F32: return dot_f32;
    case MXL_DTYPE_F16: return dot_f16;
    case MXL_DTYPE_BF16: return dot_bf16;
    default: return 0;
    }
}
#else
/* not AArch64: no NEON variant, callers use the reference */
mxl_dense_dot_fn mxl_dense_dot_neon_get(mxl_dtype t) {
    (void)t;
    return 0;
}
#endif
