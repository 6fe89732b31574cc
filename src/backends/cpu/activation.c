/* activation.c - activation references (activation.h); f32 math from libm; and the dispatch
 * through the kernel table (kernels.h). */
#include "backends/cpu/activation.h"

#include <math.h>

#include "backends/cpu/kernels.h"

float mxl_cpu_act1(mxl_act a, float x) {
    switch (a) {
    case MXL_ACT_SILU: return x / (1.0f + expf(-x));
    case MXL_ACT_GELU_ERF: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case MXL_ACT_GELU_TANH: {
        const float k = 0.79788456080286536f; /* sqrt(2/pi) */
        return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
    }
    case MXL_ACT_RELU2: {
        float r = x > 0.0f ? x : 0.0f;
        return r * r;
    }
    case MXL_ACT_RELU: return x > 0.0f ? x : 0.0f;
    }
    return x;
}

void mxl_cpu_act_ref(mxl_act a, const float *x, int64_t n, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = mxl_cpu_act1(a, x[i]);
}

void mxl_cpu_glu_ref(mxl_act a, const float *gate, const float *up, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) out[i] = mxl_cpu_act1(a, gate[i]) * up[i];
}

void mxl_cpu_swiglu_oai_ref(const float *gate, const float *up, int64_t n, float alpha, float limit, float *out) {
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i] < limit ? gate[i] : limit, u = up[i] < -limit ? -limit : up[i] > limit ? limit : up[i];
        out[i] = (u + 1.0f) * (g / (1.0f + expf(-alpha * g)));
    }
}

void mxl_cpu_act(mxl_act a, const float *x, int64_t n, float *y) { mxl_cpu_kern()->act(a, x, n, y); }

void mxl_cpu_glu(mxl_act a, const float *gate, const float *up, int64_t n, float *out) {
    mxl_cpu_kern()->glu(a, gate, up, n, out);
}
