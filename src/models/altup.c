/* altup.c - Gemma 3n's AltUp mixing and Gaussian top-k (see altup.h). */
#include "models/altup.h"

#include <math.h>

void mxl_altup_predict(int A, const float *s, int64_t stride, int64_t n, int64_t hidden, const float *coef, float *pred) {
    for (int b = 0; b < A; b++)
        for (int64_t t = 0; t < n; t++) {
            const float *c = coef + t * A * A + b * A;
            float *out = pred + b * stride + t * hidden;
            const float *own = s + b * stride + t * hidden;
            for (int64_t h = 0; h < hidden; h++) {
                float acc = 0.0f;
                for (int a = 0; a < A; a++) acc += s[a * stride + t * hidden + h] * c[a];
                out[h] = acc + own[h];
            }
        }
}

void mxl_altup_correct(int A, int active, const float *pred, int64_t stride, int64_t n, int64_t hidden, const float *coef,
                       const float *y, float *s) {
    for (int b = 0; b < A; b++)
        for (int64_t t = 0; t < n; t++) {
            const float k = coef[t * A + b] + 1.0f;
            const float *p = pred + b * stride + t * hidden, *pa = pred + active * stride + t * hidden, *yt = y + t * hidden;
            float *out = s + b * stride + t * hidden;
            for (int64_t h = 0; h < hidden; h++) out[h] = (yt[h] - pa[h]) * k + p[h];
        }
}

static float rms(const float *x, int64_t m) {
    double acc = 0;
    for (int64_t i = 0; i < m; i++) acc += (double)x[i] * x[i];
    return (float)sqrt(acc / (double)m);
}

void mxl_altup_match_rms(const float *x, float *y, int64_t n, int64_t hidden) {
    for (int64_t t = 0; t < n; t++) {
        const float target = rms(x + t * hidden, hidden);
        float cur = rms(y + t * hidden, hidden);
        if (cur < sqrtf(1e-5f)) cur = sqrtf(1e-5f);
        for (int64_t h = 0; h < hidden; h++) y[t * hidden + h] = y[t * hidden + h] * target / cur;
    }
}

void mxl_gaussian_topk(float *g, int64_t rows, int64_t m, float k) {
    for (int64_t r = 0; r < rows; r++) {
        float *x = g + r * m;
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < m; i++) sum += x[i];
        const double mean = sum / (double)m;
        for (int64_t i = 0; i < m; i++) sq += ((double)x[i] - mean) * ((double)x[i] - mean);
        const float cut = (float)mean + (float)sqrt(sq / (double)m) * k;
        for (int64_t i = 0; i < m; i++) x[i] = x[i] > cut ? x[i] - cut : 0.0f;
    }
}

/* Acklam's rational approximation (relative error 1.15e-9), then one Halley step on
 * Phi(x) - p with erfc: full double precision. */
double mxl_normal_quantile(double p) {
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                               1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01, -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00};
    if (!(p > 0 && p < 1)) return p == 0 ? -INFINITY : p == 1 ? INFINITY : NAN;
    double x;
    if (p < 0.02425) {
        const double q = sqrt(-2 * log(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    } else if (p <= 1 - 0.02425) {
        const double q = p - 0.5, r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    } else {
        const double q = sqrt(-2 * log1p(-p));
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    }
    const double e = 0.5 * erfc(-x / sqrt(2.0)) - p, u = e * sqrt(2 * M_PI) * exp(x * x / 2);
    return x - u / (1 + x * u / 2);
}
