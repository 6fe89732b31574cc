/* test_vlm_common.c - the vision-language tests' shared decoder check (see test_vlm_common.h). */
#include "test_vlm_common.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "image/image.h"
#include "models/checkpoint.h"
#include "models/vlm.h"
#include "test.h"
#include "test_decoder_compare.h"

void mxl_test_vlm_check_prompt(const mxl_decoder *d, const int32_t *ids, int64_t n, const mxl_decoder_media *media, int n_media,
                               int32_t image_token, json_t *logits, json_t *greedy, bool reference, double tol, int64_t max_ctx,
                               mxl_threadpool *pool, const char *label, int *mxl_test_failed_) {
    mxl_error err;
    float *lg = mxl_malloc((size_t)d->hp.vocab * sizeof(float));
    REQUIRE(lg);
    double worst = 0;
    int compared = 0;
    /* each prefix that does not cut a media block: its last position's logits */
    for (int64_t c = 1; c <= n; c++) {
        bool cuts = false;
        for (int i = 0; i < n_media; i++) cuts |= media[i].row < c && media[i].row + media[i].n > c;
        if (cuts || ids[c - 1] == image_token) continue;
        int k = 0;
        while (k < n_media && media[k].row + media[k].n <= c) k++;
        mxl_decoder_state *s = NULL;
        REQUIRE(mxl_decoder_state_create(d, max_ctx, 8, pool, &s, &err) == MXL_OK);
        mxl_decoder_state_set_reference(s, reference);
        if (mxl_decoder_forward_media(d, s, ids, c, media, k, lg, &err)) {
            fprintf(stderr, "  %s\n", err.msg);
            CHECK(0);
        }
        double md;
        mxl_test_vec_vs_json(lg, json_array_get(logits, (size_t)(c - 1)), d->hp.vocab, &md, NULL);
        if (md > worst || isnan(md)) worst = md;
        compared++;
        mxl_decoder_state_destroy(s);
    }
    /* greedy: the whole prompt in one call, then one token at a time */
    mxl_decoder_state *s = NULL;
    REQUIRE(mxl_decoder_state_create(d, max_ctx + 16, 16, pool, &s, &err) == MXL_OK);
    mxl_decoder_state_set_reference(s, reference);
    CHECK(mxl_decoder_forward_media(d, s, ids, n, media, n_media, lg, &err) == MXL_OK);
    int same = 0;
    for (size_t g = 0; g < json_array_size(greedy); g++) {
        int32_t best = 0;
        for (int64_t t = 1; t < d->hp.vocab; t++)
            if (lg[t] > lg[best]) best = (int32_t)t;
        same += best == json_integer_value(json_array_get(greedy, g));
        CHECK(mxl_decoder_forward(d, s, &best, 1, lg, &err) == MXL_OK);
    }
    mxl_decoder_state_destroy(s);
    fprintf(stderr, "  %s %s: %d blocks, %d positions, max |diff| %.2e; greedy %d/%zu\n", label, reference ? "[reference]" : "[fast]", n_media,
            compared, worst, same, json_array_size(greedy));
    CHECK(compared >= 4);
    CHECK(worst <= tol);
    CHECK_EQ_INT(same, (int64_t)json_array_size(greedy));
    mxl_free(lg);
}

bool mxl_test_vlm_prepare_file(const mxl_vlm *v, const char *name, mxl_vlm_input *out) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tests/fixtures/vlm/%s", mxl_test_repo_root(), name);
    mxl_image im = {0, 0, NULL};
    mxl_error err;
    const bool ok = mxl_image_load(path, NULL, &im, &err) == MXL_OK && mxl_vlm_prepare(v, &im, out, &err) == MXL_OK;
    if (!ok) fprintf(stderr, "  %s\n", err.msg);
    mxl_image_free(&im);
    return ok;
}

/* patch merged into target (objects recursively, other values replaced) */
static void merge(json_t *target, json_t *patch) {
    const char *k;
    json_t *pv;
    json_object_foreach(patch, k, pv) {
        json_t *tv = json_object_get(target, k);
        if (json_is_object(tv) && json_is_object(pv)) merge(tv, pv);
        else json_object_set(target, k, pv);
    }
}

void mxl_test_vlm_expect_refused(const char *label, const char *dir, const char *const *links, const char *patch, bool decoder,
                                 mxl_status want, const char *needle, int *mxl_test_failed_) {
    char tmp[] = "/tmp/mxl_vlm_refused_XXXXXX", src[4200], dst[4200];
    REQUIRE(mkdtemp(tmp));
    for (int i = 0; links[i]; i++) {
        snprintf(src, sizeof src, "%s/%s", dir, links[i]);
        snprintf(dst, sizeof dst, "%s/%s", tmp, links[i]);
        REQUIRE(symlink(src, dst) == 0);
    }
    snprintf(src, sizeof src, "%s/config.json", dir);
    json_t *cfg = json_load_file(src, 0, NULL), *p = json_loads(patch, 0, NULL);
    REQUIRE(cfg && p);
    merge(cfg, p);
    snprintf(dst, sizeof dst, "%s/config.json", tmp);
    REQUIRE(json_dump_file(cfg, dst, 0) == 0);
    json_decref(cfg);
    json_decref(p);
    mxl_error err;
    mxl_error_clear(&err);
    mxl_checkpoint *ck = NULL;
    mxl_status st = mxl_checkpoint_open(tmp, &ck, &err);
    if (!st && decoder) {
        mxl_decoder d;
        st = mxl_decoder_load(ck, &d, &err);
        if (!st) mxl_decoder_free(&d);
    } else if (!st) {
        mxl_vlm *v = NULL;
        st = mxl_vlm_load(ck, &v, &err);
        mxl_vlm_free(v);
    }
    fprintf(stderr, "  %s + %s -> %s\n", label, patch, err.msg);
    CHECK_EQ_INT(st, want);
    CHECK(strstr(err.msg, needle) != NULL);
    mxl_checkpoint_close(ck);
    unlink(dst);
    for (int i = 0; links[i]; i++) {
        snprintf(dst, sizeof dst, "%s/%s", tmp, links[i]);
        unlink(dst);
    }
    rmdir(tmp);
}

const char *mxl_test_vlm_model_dir(const char *name) {
    static char p[4096];
    snprintf(p, sizeof p, "%s/tests/fixtures/vlm/%s/model", mxl_test_repo_root(), name);
    return p;
}

float *mxl_test_json_floats(json_t *a, int64_t *n) {
    *n = (int64_t)json_array_size(a);
    float *v = mxl_malloc((size_t)(*n > 0 ? *n : 1) * sizeof(float));
    for (int64_t i = 0; i < *n && v; i++) v[i] = (float)json_number_value(json_array_get(a, (size_t)i));
    return v;
}

#define MAX_IDS 256

void mxl_test_vlm_check_runs(const char *name, const char *model, const char *family, const char *marker, int64_t vocab,
                             void (*check_input)(const mxl_vlm_input *in, json_t *im_ref, int *mxl_test_failed_), int *mxl_test_failed_) {
    char rpath[256];
    snprintf(rpath, sizeof rpath, "tests/fixtures/vlm/%s/reference.json", name);
    json_t *ref = mxl_test_load_json(rpath);
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    mxl_threadpool *pool = NULL;
    REQUIRE(mxl_threadpool_create(2, &pool, &err) == MXL_OK);
    REQUIRE(mxl_checkpoint_open(model ? model : mxl_test_vlm_model_dir(name), &ck, &err) == MXL_OK);
    if (mxl_vlm_load(ck, &v, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(v);
    CHECK_EQ_STR(v->family, family);
    CHECK(v->prepare != NULL);
    CHECK(v->causal_images);
    CHECK_EQ_STR(v->marker, marker);
    const int32_t img = (int32_t)json_integer_value(json_object_get(ref, "image_token"));
    CHECK_EQ_INT(v->image_token, img);
    const int64_t Ht = v->text_hidden;

    /* the processor (each committed image) and the features (from the processor's pixels) */
    json_t *images = json_object_get(ref, "images");
    const size_t n_images = json_array_size(images);
    REQUIRE(n_images >= 1 && n_images <= 3);
    float *feat[3] = {NULL, NULL, NULL};
    int64_t n_tok[3] = {0, 0, 0};
    for (size_t i = 0; i < n_images; i++) {
        json_t *im_ref = json_array_get(images, i);
        char path[4200];
        snprintf(path, sizeof path, "%s/tests/fixtures/vlm/%s", mxl_test_repo_root(), json_string_value(json_object_get(im_ref, "file")));
        int64_t np;
        float *px = mxl_test_json_floats(json_object_get(im_ref, "pixel_values"), &np);
        json_t *tids = json_object_get(im_ref, "ids");
        n_tok[i] = 0;
        for (size_t k = 0; k < json_array_size(tids); k++) n_tok[i] += json_integer_value(json_array_get(tids, k)) == img;
        mxl_image im = {0, 0, NULL};
        mxl_vlm_input in = {0};
        REQUIRE(mxl_image_load(path, NULL, &im, &err) == MXL_OK);
        if (mxl_vlm_prepare(v, &im, &in, &err)) fprintf(stderr, "  %s\n", err.msg);
        REQUIRE(in.pixels);
        CHECK_EQ_INT(in.n_tokens, n_tok[i]);
        CHECK_EQ_INT((int64_t)in.n_pixels, np);
        CHECK_EQ_INT(in.grid[0], json_integer_value(json_object_get(im_ref, "n_tiles")));
        CHECK_EQ_INT(in.n_tokens, in.grid[0] * v->tokens_per_image);
        if (check_input) check_input(&in, im_ref, mxl_test_failed_);
        if ((int64_t)in.n_pixels == np) {
            double md;
            mxl_test_vec_vs_json(in.pixels, json_object_get(im_ref, "pixel_values"), np, &md, NULL);
            fprintf(stderr, "  processor %s (%dx%d): %lld tiles, %lld tokens, pixels max |diff| %.2e\n", json_string_value(json_object_get(im_ref, "file")),
                    im.w, im.h, (long long)in.grid[0], (long long)in.n_tokens, md);
            CHECK(md <= 1e-6); /* (the fixture's 6 decimals) */
        }
        /* the features from the processor's own pixels */
        mxl_free(in.pixels);
        in.pixels = px;
        in.n_pixels = (size_t)np;
        in.n_tokens = n_tok[i];
        feat[i] = mxl_malloc((size_t)(n_tok[i] * Ht) * sizeof(float));
        if (v->encode(v, &in, pool, feat[i], &err)) {
            fprintf(stderr, "  %s\n", err.msg);
            CHECK(0);
        }
        double md, cs;
        mxl_test_vec_vs_json(feat[i], json_object_get(im_ref, "features"), n_tok[i] * Ht, &md, &cs);
        fprintf(stderr, "  image %zu features [%lld, %lld]: max |diff| %.2e, cosine %.7f\n", i, (long long)n_tok[i], (long long)Ht, md, cs);
        CHECK(md < 1e-4);
        mxl_vlm_input_free(&in);
        mxl_image_free(&im);
    }

    mxl_decoder d;
    if (mxl_decoder_load(ck, &d, &err)) fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(d.hp.vocab == vocab);
    json_t *p;
    size_t pi;
    for (int path = 0; path < 2; path++) {
        const bool reference = path == 0;
        const double tol = reference ? MXL_TEST_DEC_REF_TOL : MXL_TEST_DEC_FAST_DENSE_TOL;
        json_array_foreach(json_object_get(ref, "prompts"), pi, p) {
            json_t *jids = json_object_get(p, "ids"), *logits = json_object_get(p, "logits"), *which = json_object_get(p, "images");
            const int64_t n = (int64_t)json_array_size(jids);
            int32_t ids[MAX_IDS];
            REQUIRE(n <= MAX_IDS);
            for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
            /* the media blocks: each run of the patch token (one per tile), the prompt's images'
             * rows in order */
            mxl_decoder_media media[32];
            int n_media = 0;
            size_t cur = 0;
            int64_t used = 0;
            for (int64_t i = 0; i < n; i++) {
                if (ids[i] != img || (i && ids[i - 1] == img)) continue;
                int64_t e = i;
                while (e < n && ids[e] == img) e++;
                REQUIRE(n_media < 32 && cur < json_array_size(which));
                const int64_t k = json_integer_value(json_array_get(which, cur));
                REQUIRE(used + (e - i) <= n_tok[k]);
                media[n_media++] = (mxl_decoder_media){.row = i, .n = e - i, .emb = feat[k] + used * Ht, .causal = true};
                used += e - i;
                if (used == n_tok[k]) cur++, used = 0;
            }
            CHECK_EQ_INT((int64_t)cur, (int64_t)json_array_size(which));
            char label[128];
            snprintf(label, sizeof label, "%-10s %-10s", name, json_string_value(json_object_get(p, "name")));
            mxl_test_vlm_check_prompt(&d, ids, n, media, n_media, img, logits, json_object_get(p, "greedy"), reference, tol, MAX_IDS, pool,
                                      label, mxl_test_failed_);
        }
    }
    mxl_decoder_free(&d);
    for (size_t i = 0; i < n_images; i++) mxl_free(feat[i]);
    mxl_vlm_free(v);
    mxl_checkpoint_close(ck);
    mxl_threadpool_destroy(pool);
    json_decref(ref);
}

void mxl_test_vlm_check_e2e_runs(const char *name, bool per_image, int *mxl_test_failed_) {
    char rpath[256];
    snprintf(rpath, sizeof rpath, "tests/fixtures/vlm/%s/reference.json", name);
    json_t *ref = mxl_test_load_json(rpath);
    REQUIRE(ref);
    mxl_error err;
    mxl_checkpoint *ck = NULL;
    mxl_vlm *v = NULL;
    REQUIRE(mxl_checkpoint_open(mxl_test_vlm_model_dir(name), &ck, &err) == MXL_OK);
    REQUIRE(mxl_vlm_load(ck, &v, &err) == MXL_OK && v);
    json_t *c;
    size_t ci;
    int mapped = 0;
    json_array_foreach(json_object_get(ref, "e2e"), ci, c) {
        json_t *files = json_object_get(c, "images");
        const int n_img = (int)json_array_size(files);
        mxl_vlm_input in[3];
        memset(in, 0, sizeof in);
        REQUIRE(n_img <= 3);
        bool ok = true;
        for (int i = 0; i < n_img; i++) {
            if (!mxl_test_vlm_prepare_file(v, json_string_value(json_array_get(files, (size_t)i)), &in[i])) {
                ok = false;
            }
        }
        CHECK(ok);
        if (ok) {
            json_t *jids = json_object_get(c, "ids");
            const size_t n = json_array_size(jids);
            int32_t *ids = mxl_malloc(n * sizeof *ids);
            for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
            mxl_decoder_media blocks[64];
            int bimg[64], nb = 0;
            int64_t off[64];
            CHECK(mxl_vlm_media_blocks(v, ids, n, in, n_img, blocks, bimg, off, 64, &nb, &err) == MXL_OK);
            /* one block per image, or per tile (tokens_per_image rows), each image's in order */
            int64_t want = 0;
            for (int i = 0; i < n_img; i++) want += per_image ? 1 : in[i].grid[0];
            CHECK_EQ_INT(nb, want);
            for (int b = 0, i = 0; b < nb && i < n_img; b++) {
                CHECK(blocks[b].causal);
                CHECK_EQ_INT(blocks[b].n, per_image ? in[i].n_tokens : v->tokens_per_image);
                CHECK_EQ_INT(bimg[b], i);
                if (off[b] + blocks[b].n == in[i].n_tokens) i++;
            }
            mapped++;
            mxl_free(ids);
        }
        for (int i = 0; i < n_img; i++) mxl_vlm_input_free(&in[i]);
    }
    CHECK_EQ_INT(mapped, (int)json_array_size(json_object_get(ref, "e2e")));
    mxl_vlm_free(v);
    mxl_checkpoint_close(ck);
    json_decref(ref);
}


