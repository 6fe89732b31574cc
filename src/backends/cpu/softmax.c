/* softmax.c - softmax reference (softmax.h). */
#include "backends/cpu/softmax.h"

#include <math.h>

void mxl_cpu_softcap(float *x, int64_t n, float cap) {
    if (!(cap > 0.0f)) return;
    for (int64_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

void mxl_cpu_softmax(float *x, int64_t n, float softcap, float sink) {
    mxl_cpu_softcap(x, n, softcap);
    float m = sink;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    if (m == -INFINITY) { /* everything masked, no sink */
        for (int64_t i = 0; i < n; i++) x[i] = 0.0f;
        return;
    }
    double sum = sink == -INFINITY ? 0.0 : exp((double)(sink - m));
    for (int64_t i = 0; i < n; i++) {
        float e = x[i] == -INFINITY ? 0.0f : expf(x[i] - m);
        x[i] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}
