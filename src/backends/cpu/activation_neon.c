/* activation_neon.c - AArch64 NEON forms of SiLU and SwiGLU (activation.h), 4 lanes and a scalar
 * tail through the reference: SiLU x / (1 + e^-x) with a vector e^y (Cody-Waite reduction
 * y = n ln2 + r, |r| <= ln2/2, a degree-7 minimax-style polynomial for e^r, 2^n through the
 * exponent bits). The exponent argument is clamped to [-87, 88], where the float SiLU is already
 * saturated, so 2^n stays a normal float. ReLU / ReLU^2 are exact; the GELUs use the references.
 * Within 1e-6 of the libm reference relative to max(|x|, 1) (measured 3e-8); not bit-identical. */
#include "backends/cpu/activation.h"

#if defined(__aarch64__)
#include <arm_neon.h>

static inline float32x4_t vexp4(float32x4_t y) {
    y = vminq_f32(vmaxq_f32(y, vdupq_n_f32(-87.0f)), vdupq_n_f32(88.0f));
    float32x4_t n = vrndnq_f32(vmulq_n_f32(y, 1.44269504088896341f)); /* |n| <= 127 */
    /* r = y - n ln2, ln2 split so n * 0.693359375 is exact (Cody-Waite) */
    float32x4_t r = vfmsq_f32(y, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    /* e^r = 1 + r + r^2 * P(r), P the Cephes expf coefficients */
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

static inline float32x4_t silu4(float32x4_t x) {
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), vexp4(vnegq_f32(x))));
}

void mxl_cpu_act_neon(mxl_act a, const float *x, int64_t n, float *y) {
    int64_t i = 0;
    if (a == MXL_ACT_SILU || a == MXL_ACT_RELU || a == MXL_ACT_RELU2)
        for (; i + 4 <= n; i += 4) {
            float32x4_t v = vld1q_f32(x + i), r;
            if (a == MXL_ACT_SILU) r = silu4(v);
            else {
                r = vmaxq_f32(v, vdupq_n_f32(0.0f));
                if (a == MXL_ACT_RELU2) r = vmulq_f32(r, r);
            }
            vst1q_f32(y + i, r);
        }
    mxl_cpu_act_ref(a, x + i, n - i, y + i);
}

void mxl_cpu_glu_neon(mxl_act a, const float *gate, const float *up, int64_t n, float *out) {
    int64_t i = 0;
    if (a == MXL_ACT_SILU)
        for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vmulq_f32(silu4(vld1q_f32(gate + i)), vld1q_f32(up + i)));
    mxl_cpu_glu_ref(a, gate + i, up + i, n - i, out + i);
}
#else
/* not AArch64: the references */
void mxl_cpu_act_neon(mxl_act a, const float *x, int64_t n, float *y) { mxl_cpu_act_ref(a, x, n, y); }
void mxl_cpu_glu_neon(mxl_act a, const float *gate, const float *up, int64_t n, float *out) {
    mxl_cpu_glu_ref(a, gate, up, n, out);
}
#endif
