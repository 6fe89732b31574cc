/* norm_neon.c - AArch64 NEON RMSNorm (norm.h): the sum of squares in double lanes (each square of
 * a float is exact in double, so only the order of the double sum differs from the reference),
 * then the reference's float arithmetic per element, (x * scale) * g, four lanes at a time. */
#include "backends/cpu/norm.h"

#include <math.h>

#if defined(__aarch64__)
#include <arm_neon.h>

void mxl_cpu_rmsnorm_neon(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y) {
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(x + i);
        float64x2_t lo = vcvt_f64_f32(vget_low_f32(v)), hi = vcvt_high_f64_f32(v);
        s0 = vaddq_f64(s0, vmulq_f64(lo, lo));
        s1 = vaddq_f64(s1, vmulq_f64(hi, hi));
    }
    double ss = vaddvq_f64(vaddq_f64(s0, s1));
    for (int64_t j = i; j < n; j++) ss += (double)x[j] * x[j];
    float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    /* x and y may alias: each element is read before its own store */
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t g = w ? vld1q_f32(w + i) : vdupq_n_f32(1.0f);
        if (w && plus_one) g = vaddq_f32(vdupq_n_f32(1.0f), g);
        vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), g));
    }
    for (; i < n; i++) {
        float g = w ? (plus_one ? 1.0f + w[i] : w[i]) : 1.0f;
        y[i] = x[i] * scale * g;
    }
}
#else
/* not AArch64: the reference */
void mxl_cpu_rmsnorm_neon(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y) {
    mxl_cpu_rmsnorm_ref(x, w, n, eps, plus_one, y);
}
#endif
