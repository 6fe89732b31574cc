/* resize.c - PIL's Image.resize for 8-bit RGB, bit for bit (Pillow libImaging/Resample.c and, for
 * NEAREST, Geometry.c ImagingScaleAffine), and mxl_image_to_pixels (transformers' rescale +
 * normalize).
 *
 * Convolution filters (BILINEAR, BICUBIC a = -0.5, LANCZOS a = 3), per axis (precompute_coeffs):
 *   scale = in / out; filterscale = max(scale, 1); support = filter_support * filterscale;
 *   for output xx: center = (xx + 0.5) * scale, xmin = max((int)(center - support + 0.5), 0),
 *   xmax = min((int)(center + support + 0.5), in); w[x] = filter((x + xmin - center + 0.5) /
 *   filterscale), normalised by their sum in double, then rounded half away from zero to fixed point
 *   with 22 fraction bits (PRECISION_BITS = 32 - 8 - 2).
 *   Two passes, each sum starting at 1 << 21 (rounding), shifted down by 22 and clipped to 0..255:
 *   horizontal then vertical (the horizontal only over the input rows the vertical one reads),
 *   except that Pillow 13 runs the vertical pass first when the height shrinks by more than twice
 *   as many pixels as the width (the order changes results). A pass whose dimension is unchanged
 *   is skipped; when neither changes the image is copied. Checked against Pillow 13.0.0's sdist.
 * NEAREST: x_src = (int)(a * 0.5 + a + a + ...) with a = in / out in double, accumulated by repeated
 *   addition exactly as Geometry.c does (a product would round differently).
 *
 * mxl_image_resize precomputes the tables and runs the passes row by row; the reference walks
 * pixel by pixel over a full intermediate image and recomputes each pixel's weights. */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "image/resize.h"

#define PRECISION_BITS (32 - 8 - 2)

static double bilinear_filter(double x) {
    if (x < 0.0) x = -x;
    if (x < 1.0) return 1.0 - x;
    return 0.0;
}

static double bicubic_filter(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double sinc_filter(double x) {
    if (x == 0.0) return 1.0;
    x = x * M_PI;
    return sin(x) / x;
}

static double lanczos_filter(double x) {
    if (-3.0 <= x && x < 3.0) return sinc_filter(x) * sinc_filter(x / 3);
    return 0.0;
}

typedef struct filter_def {
    double (*fn)(double);
    double support;
} filter_def;

static const filter_def *filter_of(mxl_resample f) {
    static const filter_def bil = {bilinear_filter, 1.0}, bic = {bicubic_filter, 2.0}, lan = {lanczos_filter, 3.0};
    switch (f) {
    case MXL_RESAMPLE_BILINEAR: return &bil;
    case MXL_RESAMPLE_BICUBIC: return &bic;
    case MXL_RESAMPLE_LANCZOS: return &lan;
    default: return NULL;
    }
}

/* One output position's weights: xmin, count, and the fixed-point weights k[count] (count <= ksize).
 * in0 / in1 are the box edges as PIL's float box holds them. */
static int weights_at(int in_size, int out_size, const filter_def *f, int xx, int ksize, int *xmin_out, int32_t *k) {
    const float in0 = 0.0f, in1 = (float)in_size;
    double scale = (double)(in1 - in0) / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = f->support * filterscale, inv = 1.0 / filterscale;
    double center = in0 + (xx + 0.5) * scale, ww = 0.0;
    int xmin = (int)(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = (int)(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    if (xmax > ksize) xmax = ksize; /* (cannot happen: the span is at most 2 * support + 1) */
    double w[64 + 1];
    double *wp = ksize <= 64 ? w : mxl_malloc(sizeof(double) * (size_t)ksize);
    if (!wp) return -1;
    for (int x = 0; x < xmax; x++) {
        double v = f->fn((x + xmin - center + 0.5) * inv);
        wp[x] = v;
        ww += v;
    }
    for (int x = 0; x < xmax; x++) {
        double v = ww != 0.0 ? wp[x] / ww : wp[x];
        k[x] = v < 0 ? (int32_t)(-0.5 + v * (1 << PRECISION_BITS)) : (int32_t)(0.5 + v * (1 << PRECISION_BITS));
    }
    if (wp != w) mxl_free(wp);
    *xmin_out = xmin;
    return xmax;
}

static int ksize_of(int in_size, int out_size, const filter_def *f) {
    double scale = (double)((float)in_size - 0.0f) / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    return (int)ceil(f->support * filterscale) * 2 + 1;
}

/* Tables for one axis: bounds[2 * out] (xmin, count), k[out * ksize]. */
typedef struct axis_coeffs {
    int ksize;
    int *bounds;
    int32_t *k;
} axis_coeffs;

static mxl_status axis_init(axis_coeffs *a, int in_size, int out_size, const filter_def *f, mxl_error *err) {
    a->ksize = ksize_of(in_size, out_size, f);
    a->bounds = mxl_malloc(sizeof(int) * 2 * (size_t)out_size);
    a->k = mxl_calloc((size_t)out_size * (size_t)a->ksize, sizeof(int32_t));
    if (!a->bounds || !a->k) return mxl_error_set(err, MXL_ERR_NOMEM, "resize: out of memory for the filter tables");
    for (int xx = 0; xx < out_size; xx++) {
        int xmin, n = weights_at(in_size, out_size, f, xx, a->ksize, &xmin, a->k + (size_t)xx * a->ksize);
        if (n < 0) return mxl_error_set(err, MXL_ERR_NOMEM, "resize: out of memory for the filter tables");
        a->bounds[2 * xx] = xmin, a->bounds[2 * xx + 1] = n;
    }
    return MXL_OK;
}

static void axis_free(axis_coeffs *a) {
    mxl_free(a->bounds), mxl_free(a->k);
    a->bounds = NULL, a->k = NULL;
}

static inline uint8_t clip8(int32_t v) {
    v >>= PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static mxl_status check_args(const mxl_image *in, int32_t w, int32_t h, mxl_resample filter, mxl_error *err) {
    if (!in || !in->rgb || in->w <= 0 || in->h <= 0) return mxl_error_set(err, MXL_ERR_ARG, "resize: empty input image");
    if (w <= 0 || h <= 0) return mxl_error_set(err, MXL_ERR_ARG, "resize: target size %dx%d must be positive", w, h);
    uint64_t bytes;
    if (mxl_mul_u64((uint64_t)w, (uint64_t)h, &bytes) || mxl_mul_u64(bytes, 3, &bytes) || bytes > ((uint64_t)1 << 31))
        return mxl_error_set(err, MXL_ERR_ARG, "resize: target size %dx%d is too large", w, h);
    if (filter != MXL_RESAMPLE_NEAREST && !filter_of(filter)) return mxl_error_set(err, MXL_ERR_ARG, "resize: unknown resampling filter %d", (int)filter);
    return MXL_OK;
}

static mxl_status alloc_out(mxl_image *out, int32_t w, int32_t h, mxl_error *err) {
    out->w = w, out->h = h;
    out->rgb = mxl_malloc((size_t)w * (size_t)h * 3);
    if (!out->rgb) {
        out->w = out->h = 0;
        return mxl_error_set(err, MXL_ERR_NOMEM, "resize: out of memory for a %dx%d image", w, h);
    }
    return MXL_OK;
}

/* Geometry.c ImagingScaleAffine with a = [in_w / w, 0, 0, 0, in_h / h, 0]. */
static mxl_status resize_nearest(const mxl_image *in, int32_t w, int32_t h, mxl_image *out, mxl_error *err) {
    mxl_status st = alloc_out(out, w, h, err);
    if (st != MXL_OK) return st;
    int32_t *xin = mxl_malloc(sizeof(int32_t) * (size_t)w);
    if (!xin) {
        mxl_image_free(out);
        return mxl_error_set(err, MXL_ERR_NOMEM, "resize: out of memory");
    }
    const double a0 = (double)((float)in->w - 0.0f) / w, a4 = (double)((float)in->h - 0.0f) / h;
    double xo = 0.0 + a0 * 0.5, yo = 0.0 + a4 * 0.5;
    /* (COORD(v) is -1 for v < 0; positions here are never negative, and never reach in->w: the
     * out-of-range columns PIL would leave unwritten cannot occur for a box of the whole image) */
    for (int32_t x = 0; x < w; x++) {
        int32_t xi = (int32_t)xo;
        xin[x] = xi < in->w ? xi : in->w - 1;
        xo += a0;
    }
    for (int32_t y = 0; y < h; y++) {
        int32_t yi = (int32_t)yo;
        if (yi >= in->h) yi = in->h - 1;
        const uint8_t *src = in->rgb + (size_t)yi * in->w * 3;
        uint8_t *dst = out->rgb + (size_t)y * w * 3;
        for (int32_t x = 0; x < w; x++) memcpy(dst + 3 * x, src + 3 * (size_t)xin[x], 3);
        yo += a4;
    }
    mxl_free(xin);
    return MXL_OK;
}

/* Pillow 13's ImagingResampleInner: the vertical pass goes first when the height shrinks by more
 * than twice as many pixels as the width does ("to make the horizontal pass faster"); the order
 * changes the result (each pass rounds to uint8). */
static bool horizontal_first(const mxl_image *in, int32_t w, int32_t h) {
    const int64_t dy = (int64_t)in->h - h, dx = (int64_t)in->w - w;
    return !(dy > 0 && dy > dx * 2);
}

/* dst[rows, w, 3] = the horizontal pass over src rows row0.. of width src_w. */
static void h_pass(const uint8_t *src, int32_t src_w, int rows, int row0, const axis_coeffs *ax, int32_t w, uint8_t *dst) {
    for (int r = 0; r < rows; r++) {
        const uint8_t *line = src + (size_t)(r + row0) * src_w * 3;
        uint8_t *o = dst + (size_t)r * w * 3;
        for (int32_t xx = 0; xx < w; xx++) {
            const int xmin = ax->bounds[2 * xx], n = ax->bounds[2 * xx + 1];
            const int32_t *k = ax->k + (size_t)xx * ax->ksize;
            const uint8_t *p = line + (size_t)xmin * 3;
            int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
            for (int x = 0; x < n; x++) {
                s0 += p[3 * x] * k[x];
                s1 += p[3 * x + 1] * k[x];
                s2 += p[3 * x + 2] * k[x];
            }
            o[3 * xx] = clip8(s0), o[3 * xx + 1] = clip8(s1), o[3 * xx + 2] = clip8(s2);
        }
    }
}

/* dst[h, src_w, 3] = the vertical pass over src (whose first row is input row row0), a whole row at
 * a time into the int32 accumulators acc[src_w * 3]. */
static void v_pass(const uint8_t *src, int32_t src_w, int row0, const axis_coeffs *ay, int32_t h, int32_t *acc, uint8_t *dst) {
    const size_t rowlen = (size_t)src_w * 3;
    for (int32_t yy = 0; yy < h; yy++) {
        const int ymin = ay->bounds[2 * yy] - row0, n = ay->bounds[2 * yy + 1];
        const int32_t *k = ay->k + (size_t)yy * ay->ksize;
        for (size_t i = 0; i < rowlen; i++) acc[i] = 1 << (PRECISION_BITS - 1);
        for (int y = 0; y < n; y++) {
            const uint8_t *line = src + (size_t)(ymin + y) * rowlen;
            const int32_t ky = k[y];
            for (size_t i = 0; i < rowlen; i++) acc[i] += line[i] * ky;
        }
        uint8_t *o = dst + (size_t)yy * rowlen;
        for (size_t i = 0; i < rowlen; i++) o[i] = clip8(acc[i]);
    }
}

mxl_status mxl_image_resize(const mxl_image *in, int32_t w, int32_t h, mxl_resample filter, mxl_image *out, mxl_error *err) {
    out->w = out->h = 0, out->rgb = NULL;
    mxl_status st = check_args(in, w, h, filter, err);
    if (st != MXL_OK) return st;
    if (w == in->w && h == in->h) { /* Image.resize returns a copy */
        if ((st = alloc_out(out, w, h, err)) != MXL_OK) return st;
        memcpy(out->rgb, in->rgb, (size_t)w * h * 3);
        return MXL_OK;
    }
    if (filter == MXL_RESAMPLE_NEAREST) return resize_nearest(in, w, h, out, err);
    const filter_def *f = filter_of(filter);
    const bool need_h = w != in->w, need_v = h != in->h;
    axis_coeffs ax = {0}, ay = {0};
    uint8_t *tmp = NULL;
    int32_t *acc = NULL;
    if (need_v && (st = axis_init(&ay, in->h, h, f, err)) != MXL_OK) goto done;
    if (need_h && (st = axis_init(&ax, in->w, w, f, err)) != MXL_OK) goto done;
    if ((st = alloc_out(out, w, h, err)) != MXL_OK) goto done;
    acc = need_v ? mxl_malloc(sizeof(int32_t) * 3 * (size_t)(w > in->w ? w : in->w)) : NULL;
    if (need_v && !acc) goto oom;
    if (!need_v) {
        h_pass(in->rgb, in->w, in->h, 0, &ax, w, out->rgb);
    } else if (!need_h) {
        v_pass(in->rgb, in->w, 0, &ay, h, acc, out->rgb);
    } else if (horizontal_first(in, w, h)) {
        /* only the input rows the vertical pass reads */
        const int y_first = ay.bounds[0], y_last = ay.bounds[2 * h - 2] + ay.bounds[2 * h - 1];
        if (!(tmp = mxl_malloc((size_t)w * (size_t)(y_last - y_first) * 3))) goto oom;
        h_pass(in->rgb, in->w, y_last - y_first, y_first, &ax, w, tmp);
        v_pass(tmp, w, y_first, &ay, h, acc, out->rgb);
    } else {
        if (!(tmp = mxl_malloc((size_t)in->w * (size_t)h * 3))) goto oom;
        v_pass(in->rgb, in->w, 0, &ay, h, acc, tmp);
        h_pass(tmp, in->w, h, 0, &ax, w, out->rgb);
    }
    goto done;
oom:
    mxl_image_free(out);
    st = mxl_error_set(err, MXL_ERR_NOMEM, "resize: out of memory");
done:
    axis_free(&ax), axis_free(&ay);
    mxl_free(tmp), mxl_free(acc);
    return st;
}

/* The reference: each pass over the whole image into a full intermediate, every pixel's weights
 * recomputed, the passes in Pillow's order. */
static void ref_h(const uint8_t *src, int32_t src_w, int32_t rows, const filter_def *f, int32_t w, int kx, int32_t *k, uint8_t *dst) {
    for (int32_t y = 0; y < rows; y++)
        for (int32_t xx = 0; xx < w; xx++) {
            int xmin, n = weights_at(src_w, w, f, xx, kx, &xmin, k);
            for (int ch = 0; ch < 3; ch++) {
                int32_t s = 1 << (PRECISION_BITS - 1);
                for (int x = 0; x < n; x++) s += src[((size_t)y * src_w + xmin + x) * 3 + ch] * k[x];
                dst[((size_t)y * w + xx) * 3 + ch] = clip8(s);
            }
        }
}

static void ref_v(const uint8_t *src, int32_t src_w, int32_t src_h, const filter_def *f, int32_t h, int ky, int32_t *k, uint8_t *dst) {
    for (int32_t yy = 0; yy < h; yy++) {
        int ymin, n = weights_at(src_h, h, f, yy, ky, &ymin, k);
        for (int32_t x = 0; x < src_w; x++)
            for (int ch = 0; ch < 3; ch++) {
                int32_t s = 1 << (PRECISION_BITS - 1);
                for (int y = 0; y < n; y++) s += src[((size_t)(ymin + y) * src_w + x) * 3 + ch] * k[y];
                dst[((size_t)yy * src_w + x) * 3 + ch] = clip8(s);
            }
    }
}

mxl_status mxl_image_resize_reference(const mxl_image *in, int32_t w, int32_t h, mxl_resample filter, mxl_image *out,
                                      mxl_error *err) {
    out->w = out->h = 0, out->rgb = NULL;
    mxl_status st = check_args(in, w, h, filter, err);
    if (st != MXL_OK) return st;
    if (filter == MXL_RESAMPLE_NEAREST || (w == in->w && h == in->h)) return mxl_image_resize(in, w, h, filter, out, err);
    const filter_def *f = filter_of(filter);
    const int kx = ksize_of(in->w, w, f), ky = ksize_of(in->h, h, f);
    int32_t *k = mxl_malloc(sizeof(int32_t) * (size_t)(kx > ky ? kx : ky));
    const bool hfirst = horizontal_first(in, w, h);
    /* the intermediate: [in->h, w] after a horizontal first pass, [h, in->w] after a vertical one */
    uint8_t *mid = mxl_malloc(hfirst ? (size_t)w * in->h * 3 : (size_t)in->w * h * 3);
    if (!k || !mid || (st = alloc_out(out, w, h, err)) != MXL_OK) {
        mxl_free(k), mxl_free(mid);
        return st != MXL_OK ? st : mxl_error_set(err, MXL_ERR_NOMEM, "resize: out of memory");
    }
    if (h == in->h) ref_h(in->rgb, in->w, in->h, f, w, kx, k, out->rgb);
    else if (w == in->w) ref_v(in->rgb, in->w, in->h, f, h, ky, k, out->rgb);
    else if (hfirst) {
        ref_h(in->rgb, in->w, in->h, f, w, kx, k, mid);
        ref_v(mid, w, in->h, f, h, ky, k, out->rgb);
    } else {
        ref_v(in->rgb, in->w, in->h, f, h, ky, k, mid);
        ref_h(mid, in->w, h, f, w, kx, k, out->rgb);
    }
    mxl_free(k), mxl_free(mid);
    return MXL_OK;
}

void mxl_image_crop_to_pixels(const mxl_image *im, int32_t x0, int32_t y0, int32_t w, int32_t h, double rescale, const float mean[3],
                              const float std[3], float *out) {
    const size_t hw = (size_t)w * (size_t)h;
    for (int ch = 0; ch < 3; ch++) {
        const float m = mean[ch], s = std[ch];
        float *o = out + (size_t)ch * hw;
        for (int32_t y = 0; y < h; y++) {
            const uint8_t *src = im->rgb + ((size_t)(y0 + y) * (size_t)im->w + (size_t)x0) * 3 + ch;
            for (int32_t x = 0; x < w; x++) {
                float v = (float)((double)src[3 * x] * rescale);
                *o++ = (v - m) / s;
            }
        }
    }
}

void mxl_image_to_pixels(const mxl_image *im, double rescale, const float mean[3], const float std[3], float *out) {
    mxl_image_crop_to_pixels(im, 0, 0, im->w, im->h, rescale, mean, std, out);
}
