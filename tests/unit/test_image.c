/* test_image.c - src/image/ against PIL / transformers on the images of tests/fixtures/images
 * (gen_image_fixtures.py writes them and expected.json):
 *   - decoding: every fixture (PNG RGB / RGBA / LA / L / 1-bit / 16-bit / palette with and without
 *     tRNS / RGB and gray tRNS / eXIf; JPEG 4:2:0 / 4:2:2 / 4:4:4 / progressive / gray / CMYK /
 *     EXIF orientations 1..8; WebP lossless and lossy, with alpha and EXIF; GIF palette / gray /
 *     transparent) equals load_image + convert_to_rgb byte for byte, and with composite_alpha equals
 *     convert_to_rgb of the opened image;
 *   - resizing: NEAREST, BILINEAR, BICUBIC and LANCZOS to sizes that shrink, grow, change one axis
 *     or both, equal PIL's Image.resize byte for byte; the fast path equals the plain reference on
 *     random images and sizes;
 *   - pixels: decode + BILINEAR resize + mxl_image_to_pixels equals Gemma3ImageProcessorPil within
 *     1e-6;
 *   - bad input: truncated JPEG / PNG, garbage, a PNG declaring 100000x100000 (refused by the limits
 *     before allocating), empty input, every prefix of a few fixtures: a one-line error naming the
 *     input, never a crash. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "image/image.h"
#include "image/resize.h"
#include "test.h"

/* ---- small helpers: base64 and sha256 (FIPS 180-4) for the compact expectations ---------------- */

static uint8_t *b64_decode(const char *s, size_t *n) {
    size_t len = strlen(s);
    uint8_t *out = mxl_malloc(len / 4 * 3 + 3);
    if (!out) return NULL;
    uint32_t acc = 0;
    int bits = 0;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)s[i], v;
        if (c >= 'A' && c <= 'Z') v = c - 'A';
        else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
        else if (c >= '0' && c <= '9') v = c - '0' + 52;
        else if (c == '+') v = 62;
        else if (c == '/') v = 63;
        else continue;
        acc = acc << 6 | (uint32_t)v, bits += 6;
        if (bits >= 8) bits -= 8, out[k++] = (uint8_t)(acc >> bits);
    }
    *n = k;
    return out;
}

static uint32_t ror(uint32_t x, int r) { return x >> r | x << (32 - r); }

static void sha256_hex(const uint8_t *p, size_t n, char hex[65]) {
    static const uint32_t K[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be,
        0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa,
        0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85,
        0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
        0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f,
        0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t total = ((n + 9 + 63) / 64) * 64;
    for (size_t off = 0; off < total; off += 64) {
        uint8_t blk[64];
        for (int i = 0; i < 64; i++) {
            size_t j = off + (size_t)i;
            blk[i] = j < n ? p[j] : j == n ? 0x80 : 0;
        }
        if (off + 64 == total)
            for (int i = 0; i < 8; i++) blk[56 + i] = (uint8_t)(((uint64_t)n * 8) >> (56 - 8 * i));
        uint32_t w[64];
        for (int i = 0; i < 16; i++) w[i] = (uint32_t)blk[4 * i] << 24 | (uint32_t)blk[4 * i + 1] << 16 | (uint32_t)blk[4 * i + 2] << 8 | blk[4 * i + 3];
        for (int i = 16; i < 64; i++) {
            uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
            uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; i++) {
            uint32_t t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
            uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
        }
        h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
    }
    for (int i = 0; i < 8; i++) snprintf(hex + 8 * i, 9, "%08x", h[i]);
}

/* bytes[n] against {"b64": ...} or {"sha256": ...}; on a b64 mismatch the differing bytes and the
 * largest difference go to *ndiff / *maxdiff. */
static bool matches(const uint8_t *bytes, size_t n, json_t *want, size_t *ndiff, int *maxdiff) {
    *ndiff = 0, *maxdiff = 0;
    const char *b = json_string_value(json_object_get(want, "b64"));
    if (b) {
        size_t m = 0;
        uint8_t *ref = b64_decode(b, &m);
        if (!ref || m != n) {
            mxl_free(ref);
            *ndiff = n;
            return false;
        }
        for (size_t i = 0; i < n; i++)
            if (ref[i] != bytes[i]) {
                (*ndiff)++;
                int d = abs((int)ref[i] - (int)bytes[i]);
                if (d > *maxdiff) *maxdiff = d;
            }
        mxl_free(ref);
        return *ndiff == 0;
    }
    char hex[65];
    sha256_hex(bytes, n, hex);
    const char *s = json_string_value(json_object_get(want, "sha256"));
    bool ok = s && strcmp(s, hex) == 0;
    if (!ok) *ndiff = n, *maxdiff = -1;
    return ok;
}

static const char *fixture(const char *name) {
    static char path[4][2048];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/tests/fixtures/images/%s", mxl_test_repo_root(), name);
    return path[k];
}

static json_t *expected(void) { return mxl_test_load_json("tests/fixtures/images/expected.json"); }

/* ---- decoding ----------------------------------------------------------------------------------- */

static void check_decode(bool composite, int *mxl_test_failed_) {
    json_t *ref = expected();
    REQUIRE(ref);
    json_t *cases = json_object_get(ref, "decode");
    REQUIRE(json_array_size(cases) >= 30);
    size_t i, bad = 0;
    json_t *c;
    mxl_image_limits lim;
    mxl_image_limits_default(&lim);
    lim.composite_alpha = composite;
    json_array_foreach(cases, i, c) {
        const char *file = json_string_value(json_object_get(c, "file"));
        mxl_image im;
        mxl_error err = {0};
        const int64_t t0 = mxl_alloc_live_bytes();
        mxl_status st = mxl_image_load(fixture(file), &lim, &im, &err);
        if (st != MXL_OK) {
            fprintf(stderr, "  %s: %s\n", file, err.msg);
            CHECK(st == MXL_OK);
            bad++;
            continue;
        }
        CHECK_EQ_INT(im.w, json_integer_value(json_object_get(c, "w")));
        CHECK_EQ_INT(im.h, json_integer_value(json_object_get(c, "h")));
        size_t nd;
        int md;
        if (im.w == json_integer_value(json_object_get(c, "w")) && im.h == json_integer_value(json_object_get(c, "h")) &&
            !matches(im.rgb, (size_t)im.w * im.h * 3, json_object_get(c, composite ? "composite_rgb" : "rgb"), &nd, &md)) {
            fprintf(stderr, "  %s (%s)%s: %zu of %d bytes differ from PIL, max |diff| %d\n", file,
                    json_string_value(json_object_get(c, "pil_mode")), composite ? " composite" : "", nd, im.w * im.h * 3, md);
            bad++;
        }
        mxl_image_free(&im);
        CHECK_EQ_INT(mxl_alloc_live_bytes(), t0);
    }
    fprintf(stderr, "  %zu images%s: %zu differ from PIL\n", json_array_size(cases), composite ? " (composite_alpha)" : "", bad);
    CHECK_EQ_INT(bad, 0);
    json_decref(ref);
}

TEST(image_decode_matches_pil) { check_decode(false, mxl_test_failed_); }

TEST(image_decode_composite_alpha_matches_pil) { check_decode(true, mxl_test_failed_); }

/* ---- resizing ----------------------------------------------------------------------------------- */

static mxl_resample filter_named(const char *s) {
    if (strcmp(s, "bilinear") == 0) return MXL_RESAMPLE_BILINEAR;
    if (strcmp(s, "bicubic") == 0) return MXL_RESAMPLE_BICUBIC;
    if (strcmp(s, "lanczos") == 0) return MXL_RESAMPLE_LANCZOS;
    return MXL_RESAMPLE_NEAREST;
}

TEST(image_resize_matches_pil) {
    json_t *ref = expected();
    REQUIRE(ref);
    json_t *cases = json_object_get(ref, "resize");
    REQUIRE(json_array_size(cases) >= 20);
    size_t i, bad = 0;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *file = json_string_value(json_object_get(c, "file")), *fname = json_string_value(json_object_get(c, "filter"));
        const int32_t w = (int32_t)json_integer_value(json_object_get(c, "w")), h = (int32_t)json_integer_value(json_object_get(c, "h"));
        mxl_image im, out, out_ref;
        mxl_error err = {0};
        REQUIRE(mxl_image_load(fixture(file), NULL, &im, &err) == MXL_OK);
        REQUIRE(mxl_image_resize(&im, w, h, filter_named(fname), &out, &err) == MXL_OK);
        REQUIRE(mxl_image_resize_reference(&im, w, h, filter_named(fname), &out_ref, &err) == MXL_OK);
        CHECK(out.w == w && out.h == h);
        CHECK(memcmp(out.rgb, out_ref.rgb, (size_t)w * h * 3) == 0);
        size_t nd;
        int md;
        if (!matches(out.rgb, (size_t)w * h * 3, json_object_get(c, "rgb"), &nd, &md)) {
            fprintf(stderr, "  %s %dx%d -> %dx%d %s: %zu of %d bytes differ from PIL, max |diff| %d\n", file, im.w, im.h, w, h, fname, nd,
                    w * h * 3, md);
            bad++;
        }
        mxl_image_free(&im), mxl_image_free(&out), mxl_image_free(&out_ref);
    }
    fprintf(stderr, "  %zu resizes: %zu differ from PIL\n", json_array_size(cases), bad);
    CHECK_EQ_INT(bad, 0);
    json_decref(ref);
}

TEST(image_resize_fast_equals_reference) {
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    int bad = 0;
    for (int t = 0; t < 60; t++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        mxl_image im = {.w = 1 + (int32_t)((seed >> 33) % 90), .h = 1 + (int32_t)((seed >> 45) % 70)};
        im.rgb = mxl_malloc((size_t)im.w * im.h * 3);
        REQUIRE(im.rgb);
        for (size_t i = 0; i < (size_t)im.w * im.h * 3; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            im.rgb[i] = (uint8_t)(seed >> 56);
        }
        const int32_t w = 1 + (int32_t)((seed >> 20) % 120), h = 1 + (int32_t)((seed >> 40) % 100);
        const mxl_resample f = (mxl_resample)(t % 4);
        mxl_image a, b;
        mxl_error err;
        REQUIRE(mxl_image_resize(&im, w, h, f, &a, &err) == MXL_OK);
        REQUIRE(mxl_image_resize_reference(&im, w, h, f, &b, &err) == MXL_OK);
        if (memcmp(a.rgb, b.rgb, (size_t)w * h * 3) != 0) {
            fprintf(stderr, "  %dx%d -> %dx%d filter %d: fast and reference differ\n", im.w, im.h, w, h, (int)f);
            bad++;
        }
        mxl_image_free(&a), mxl_image_free(&b), mxl_image_free(&im);
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(image_resize_bad_args) {
    uint8_t px[12] = {0};
    mxl_image im = {.w = 2, .h = 2, .rgb = px}, out;
    mxl_error err = {0};
    CHECK(mxl_image_resize(&im, 0, 5, MXL_RESAMPLE_BILINEAR, &out, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "positive") != NULL);
    CHECK(mxl_image_resize(&im, 5, 5, (mxl_resample)7, &out, &err) == MXL_ERR_ARG);
    CHECK(mxl_image_resize(&im, 100000, 100000, MXL_RESAMPLE_BICUBIC, &out, &err) == MXL_ERR_ARG);
    mxl_image empty = {0};
    CHECK(mxl_image_resize(&empty, 5, 5, MXL_RESAMPLE_BICUBIC, &out, &err) == MXL_ERR_ARG);
}

/* One core, -O2: the whole resize a 12-megapixel photo takes on its way to Gemma 3's 896x896. */
TEST(image_resize_speed) {
    mxl_image im = {.w = 4000, .h = 3000};
    im.rgb = mxl_malloc((size_t)im.w * im.h * 3);
    REQUIRE(im.rgb);
    for (size_t i = 0; i < (size_t)im.w * im.h * 3; i++) im.rgb[i] = (uint8_t)(i * 2654435761u >> 24);
    mxl_image out;
    mxl_error err;
    double t0 = mxl_now_ms();
    REQUIRE(mxl_image_resize(&im, 896, 896, MXL_RESAMPLE_BILINEAR, &out, &err) == MXL_OK);
    double t1 = mxl_now_ms();
    mxl_image out2;
    REQUIRE(mxl_image_resize(&im, 896, 896, MXL_RESAMPLE_BICUBIC, &out2, &err) == MXL_OK);
    double t2 = mxl_now_ms();
    fprintf(stderr, "  4000x3000 -> 896x896: bilinear %.0f ms, bicubic %.0f ms\n", t1 - t0, t2 - t1);
    mxl_image_free(&out), mxl_image_free(&out2), mxl_image_free(&im);
}

/* ---- pixels ------------------------------------------------------------------------------------- */

TEST(image_pixels_match_gemma3_processor) {
    json_t *ref = expected();
    REQUIRE(ref);
    json_t *cases = json_object_get(ref, "pixels");
    REQUIRE(json_array_size(cases) >= 2);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *file = json_string_value(json_object_get(c, "file"));
        const int32_t w = (int32_t)json_integer_value(json_object_get(c, "w")), h = (int32_t)json_integer_value(json_object_get(c, "h"));
        float mean[3], std[3];
        for (int k = 0; k < 3; k++) {
            mean[k] = (float)json_number_value(json_array_get(json_object_get(c, "mean"), k));
            std[k] = (float)json_number_value(json_array_get(json_object_get(c, "std"), k));
        }
        mxl_image im, rs;
        mxl_error err = {0};
        REQUIRE(mxl_image_load(fixture(file), NULL, &im, &err) == MXL_OK);
        REQUIRE(mxl_image_resize(&im, w, h, MXL_RESAMPLE_BILINEAR, &rs, &err) == MXL_OK);
        float *px = mxl_malloc(sizeof(float) * 3 * (size_t)w * h);
        REQUIRE(px);
        mxl_image_to_pixels(&rs, json_number_value(json_object_get(c, "rescale")), mean, std, px);
        size_t n = 0;
        uint8_t *want = b64_decode(json_string_value(json_object_get(c, "values")), &n);
        REQUIRE(want && n == sizeof(float) * 3 * (size_t)w * h);
        double worst = 0;
        size_t exact = 0;
        for (size_t j = 0; j < 3 * (size_t)w * h; j++) {
            float v;
            memcpy(&v, want + 4 * j, 4);
            worst = fmax(worst, fabs((double)v - px[j]));
            exact += v == px[j];
        }
        fprintf(stderr, "  %s -> %dx%d pixels: max |diff| %.2e, %zu of %d bit-identical\n", file, w, h, worst, exact, 3 * w * h);
        CHECK(worst <= 1e-6);
        mxl_free(want), mxl_free(px);
        mxl_image_free(&im), mxl_image_free(&rs);
    }
    json_decref(ref);
}

/* ---- bad input ---------------------------------------------------------------------------------- */

TEST(image_bad_inputs_refused) {
    json_t *ref = expected();
    REQUIRE(ref);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(ref, "bad"), i, c) {
        const char *file = json_string_value(json_object_get(c, "file")), *why = json_string_value(json_object_get(c, "why"));
        mxl_image im = {0};
        mxl_error err = {0};
        const int64_t t0 = mxl_alloc_live_bytes();
        mxl_status st = mxl_image_load(fixture(file), NULL, &im, &err);
        fprintf(stderr, "  %s: %s\n", file, err.msg);
        CHECK(st != MXL_OK);
        CHECK(im.rgb == NULL);
        CHECK(strstr(err.msg, file) != NULL);
        CHECK(strchr(err.msg, '\n') == NULL);
        if (strcmp(why, "truncated") == 0) CHECK(strstr(err.msg, "truncated") != NULL || strstr(err.msg, "corrupt") != NULL);
        if (strcmp(why, "unknown") == 0) CHECK(strstr(err.msg, "unknown image format") != NULL);
        if (strcmp(why, "limit") == 0) CHECK(strstr(err.msg, "larger than the limit") != NULL);
        CHECK_EQ_INT(mxl_alloc_live_bytes(), t0);
    }
    json_decref(ref);
    mxl_image im;
    mxl_error err = {0};
    CHECK(mxl_image_decode((const uint8_t *)"", 0, "empty.png", NULL, &im, &err) == MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "empty.png") != NULL);
    CHECK(mxl_image_decode(NULL, 0, NULL, NULL, &im, &err) == MXL_ERR_FORMAT);
    CHECK(mxl_image_load("/nonexistent/x.png", NULL, &im, &err) == MXL_ERR_IO);
    CHECK(strstr(err.msg, "/nonexistent/x.png") != NULL);
}

TEST(image_limits_refuse_before_decoding) {
    mxl_image_limits lim;
    mxl_image_limits_default(&lim);
    CHECK_EQ_INT(lim.max_width, 16384);
    CHECK_EQ_INT(lim.max_height, 16384);
    CHECK_EQ_INT(lim.max_decode_bytes, 536870912);
    const char *files[] = {"rgb_120x80.jpg", "rgb_37x53.png", "lossy_rgb_48x36.webp", "pal_34x26.gif"};
    for (int i = 0; i < 4; i++) {
        mxl_image im;
        mxl_error err = {0};
        mxl_image_limits l = lim;
        l.max_width = 10;
        CHECK(mxl_image_load(fixture(files[i]), &l, &im, &err) == MXL_ERR_UNSUPPORTED);
        CHECK(strstr(err.msg, "larger than the limit") != NULL);
        l = lim;
        l.max_decode_bytes = 1000;
        CHECK(mxl_image_load(fixture(files[i]), &l, &im, &err) == MXL_ERR_UNSUPPORTED);
        CHECK(strstr(err.msg, "bytes allowed") != NULL);
    }
}

/* Every prefix and a few corrupted copies of small fixtures: an image or an error, never a crash
 * (ASan build), never a leak. */
TEST(image_prefixes_and_flips_never_crash) {
    const char *files[] = {"pal_trns1_40x30.png", "exif6_30x20.jpg", "progressive_45x33.jpg", "lossless_rgba_33x27.webp",
                           "trns_34x26.gif",      "cmyk_40x30.jpg",  "la16_15x7.png"};
    size_t ok = 0, refused = 0;
    for (int f = 0; f < 7; f++) {
        size_t n = 0;
        uint8_t *data = (uint8_t *)mxl_test_read_file(fixture(files[f]), &n);
        REQUIRE(data);
        const int64_t t0 = mxl_alloc_live_bytes();
        size_t step = n / 97 + 1;
        for (size_t len = 0; len < n; len += (len < 64 ? 1 : step)) {
            mxl_image im;
            mxl_error err = {0};
            if (mxl_image_decode(data, len, files[f], NULL, &im, &err) == MXL_OK) ok++, mxl_image_free(&im);
            else {
                refused++;
                CHECK(err.msg[0] != 0);
            }
        }
        uint64_t seed = 12345 + (uint64_t)f;
        for (int t = 0; t < 40; t++) {
            uint8_t *copy = mxl_malloc(n);
            REQUIRE(copy);
            memcpy(copy, data, n);
            for (int k = 0; k < 3; k++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                copy[(seed >> 33) % n] ^= (uint8_t)(1u << ((seed >> 20) & 7));
            }
            mxl_image im;
            mxl_error err = {0};
            if (mxl_image_decode(copy, n, files[f], NULL, &im, &err) == MXL_OK) ok++, mxl_image_free(&im);
            else refused++;
            mxl_free(copy);
        }
        CHECK_EQ_INT(mxl_alloc_live_bytes(), t0);
        mxl_free(data);
    }
    fprintf(stderr, "  prefixes and bit flips: %zu decoded, %zu refused\n", ok, refused);
}
