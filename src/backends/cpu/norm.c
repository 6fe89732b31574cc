/* norm.c - RMSNorm / LayerNorm references and their dispatch (norm.h) through the kernel table
 * (kernels.h): AVX-512, AVX2, NEON forms where the CPU has them. */
#include "backends/cpu/norm.h"

#include <math.h>

#include "backends/cpu/kernels.h"

void mxl_cpu_rmsnorm(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y) {
    mxl_cpu_kern()->rmsnorm(x, w, n, eps, plus_one, y);
}

void mxl_cpu_layernorm(const float *x, const float *w, const float *b, int64_t n, float eps, float *y) {
    mxl_cpu_kern()->layernorm(x, w, b, n, eps, y);
}

void mxl_cpu_rmsnorm_ref(const float *x, const float *w, int64_t n, float eps, int plus_one, float *y) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    for (int64_t i = 0; i < n; i++) {
        float g = w ? (plus_one ? 1.0f + w[i] : w[i]) : 1.0f;
        y[i] = x[i] * scale * g;
    }
}

void mxl_cpu_layernorm_ref(const float *x, const float *w, const float *b, int64_t n, float eps, float *y) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    double mean = s / (double)n, v = 0.0;
    for (int64_t i = 0; i < n; i++) v += ((double)x[i] - mean) * ((double)x[i] - mean);
    float inv = (float)(1.0 / sqrt(v / (double)n + (double)eps));
    float m = (float)mean;
    for (int64_t i = 0; i < n; i++) {
        float t = (x[i] - m) * inv;
        if (w) t *= w[i];
        if (b) t += b[i];
        y[i] = t;
    }
}
