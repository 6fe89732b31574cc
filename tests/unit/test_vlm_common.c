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
