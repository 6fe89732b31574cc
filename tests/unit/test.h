/* test.h - minimal unit-test harness: TEST(name) registers a test at load time; the runner in
 * test_main.c runs all (or those whose name contains argv[1]) and ends with "N passed, N failed". */
#ifndef MXL_TEST_H
#define MXL_TEST_H

#include <stddef.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*mxl_test_fn)(int *failed);
void mxl_test_register(const char *name, const char *file, mxl_test_fn fn);

#define TEST(name)                                                                               \
    static void test_##name(int *mxl_test_failed_);                                              \
    __attribute__((constructor)) static void register_##name(void) {                            \
        mxl_test_register(#name, __FILE__, test_##name);                                         \
    }                                                                                            \
    static void test_##name(int *mxl_test_failed_)

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);           \
            *mxl_test_failed_ = 1;                                                               \
        }                                                                                        \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                       \
    do {                                                                                         \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                    \
        if (va_ != vb_) {                                                                        \
            fprintf(stderr, "  %s:%d: CHECK_EQ_INT failed: %s == %lld, %s == %lld\n", __FILE__,  \
                    __LINE__, #a, va_, #b, vb_);                                                 \
            *mxl_test_failed_ = 1;                                                               \
        }                                                                                        \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                                       \
    do {                                                                                         \
        const char *sa_ = (a), *sb_ = (b);                                                       \
        if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0) {                                             \
            fprintf(stderr, "  %s:%d: CHECK_EQ_STR failed: %s == \"%s\", %s == \"%s\"\n",       \
                    __FILE__, __LINE__, #a, sa_ ? sa_ : "(null)", #b, sb_ ? sb_ : "(null)");      \
            *mxl_test_failed_ = 1;                                                               \
        }                                                                                        \
    } while (0)

/* Fails the test and returns from it. */
#define REQUIRE(cond)                                                                            \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "  %s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond);         \
            *mxl_test_failed_ = 1;                                                               \
            return;                                                                              \
        }                                                                                        \
    } while (0)

/* Path of the repository root (set by the runner from MXL_REPO_ROOT or the cwd). */
const char *mxl_test_repo_root(void);
/* Path of `rel` ("owner/name[/file]") in the model store where scripts/fetch-models.sh installs
 * the bundled models: $MLXCEL_MODELS_DIR/rel, else ${MLXCEL_CACHE_DIR:-~/.cache/mlxcel}/models/rel.
 * Static buffer, overwritten by the next call. */
const char *mxl_test_model_path(const char *rel);
/* The whole file at path, NUL-terminated (mxl_free it), its length in *len when len is not NULL;
 * NULL when it cannot be read. */
char *mxl_test_read_file(const char *path, size_t *len);
/* Parses the JSON file at `rel` under the repository root (a fixture); NULL after printing why. */
struct json_t *mxl_test_load_json(const char *rel);
/* A vector v[n] against a JSON array of n numbers: the largest |v - ref| into *max_diff, their
 * cosine into *cosine (either may be NULL). */
void mxl_test_vec_vs_json(const float *v, struct json_t *ref, int64_t n, double *max_diff, double *cosine);
/* Writes bytes to a fresh temp file and returns its path (static buffer per call index). */
const char *mxl_test_write_temp(const char *suffix, const void *data, size_t size);
/* Hex string -> malloc'd bytes (mxl_free them), their count in *len; NULL on a malformed string. */
uint8_t *mxl_test_unhex(const char *s, size_t *len);
/* Naive attention of query (t, h) over an f32 cache of n_kv rows of `stride` elements (at most
 * 256), in double: causal and sliding-window visibility as p says; out[head_dim]. */
struct mxl_attn_params;
void mxl_test_attn_naive(const struct mxl_attn_params *p, const float *q, int64_t t, int h, int64_t qpos, const float *k, const float *v,
                         int64_t n_kv, int64_t stride, double *out);
/* Removes dir and everything under it (a test's temporary output); errors are ignored. */
void mxl_test_rmtree(const char *dir);

#endif
