/* test_store.c - model store: root order, repo-id validation, resolution (local path, store, HF
 * cache with refs/, bare names), GGUF repo directories, disk usage, listing and the rm safety
 * check (traversal, symlink escapes). Everything happens in fresh temp directories; the
 * environment variables the store reads are saved, set per test and restored. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "io/store.h"
#include "test.h"

/* ---- fixture helpers ---------------------------------------------------------------------- */

/* snprintf for fixture paths: a truncated path would make the test meaningless, so stop. */
#define SNP(buf, cap, ...)                                                                        \
    do {                                                                                         \
        int n_ = snprintf(buf, cap, __VA_ARGS__);                                                \
        if (n_ < 0 || (size_t)n_ >= (size_t)(cap)) abort();                                      \
    } while (0)

static const char *k_env_names[] = {"MLXCEL_MODELS_DIR", "MLXCEL_CACHE_DIR", "MLXCEL_DEFAULT_ORG", "HF_HUB_CACHE",
                                    "HF_HOME",           "XDG_CACHE_HOME",   "HOME"};
#define N_ENV (sizeof k_env_names / sizeof k_env_names[0])

typedef struct env_saved {
    char *val[N_ENV];
} env_saved;

static void env_save(env_saved *s) {
    for (size_t i = 0; i < N_ENV; i++) {
        const char *v = getenv(k_env_names[i]);
        s->val[i] = v ? mxl_strdup(v) : NULL;
    }
}
static void env_restore(env_saved *s) {
    for (size_t i = 0; i < N_ENV; i++) {
        if (s->val[i]) setenv(k_env_names[i], s->val[i], 1);
        else unsetenv(k_env_names[i]);
        mxl_free(s->val[i]);
        s->val[i] = NULL;
    }
}
/* All store variables unset; HOME points into the temp dir so defaults land there too. */
static void env_clean(const char *home) {
    for (size_t i = 0; i < N_ENV; i++) unsetenv(k_env_names[i]);
    setenv("HOME", home, 1);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}
static void rm_tree(const char *p) { nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

static void mkdirs(const char *path) {
    char tmp[PATH_MAX];
    SNP(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
    mkdir(tmp, 0755);
}

/* Writes `size` bytes (pattern) to base/rel, creating directories; returns 0 on success. */
static int put_file(const char *base, const char *rel, size_t size) {
    char p[PATH_MAX];
    SNP(p, sizeof p, "%s/%s", base, rel);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    mkdirs(p);
    *slash = '/';
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    for (size_t i = 0; i < size; i++) fputc((int)('a' + i % 26), f);
    return fclose(f);
}

static int set_mtime(const char *base, const char *rel, time_t t) {
    char p[PATH_MAX];
    SNP(p, sizeof p, "%s/%s", base, rel);
    struct timespec ts[2] = {{t, 0}, {t, 0}};
    return utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW);
}

static int exists(const char *base, const char *rel) {
    char p[PATH_MAX];
    struct stat sb;
    SNP(p, sizeof p, "%s%s%s", base, rel ? "/" : "", rel ? rel : "");
    return lstat(p, &sb) == 0;
}

static char *make_tmp(char *buf, size_t cap) {
    SNP(buf, cap, "/tmp/mxl_store_XXXXXX");
    if (!mkdtemp(buf)) return NULL;
    /* realpath: /tmp may itself be a symlink, and the store compares resolved paths. */
    char r[PATH_MAX];
    if (realpath(buf, r)) snprintf(buf, cap, "%s", r);
    return buf;
}

/* ---- root and repo ids -------------------------------------------------------------------- */

static void root_cases(int *mxl_test_failed_, const char *tmp) {
    char out[MXL_STORE_PATH_MAX], want[PATH_MAX];
    mxl_error err = {0};
    env_clean(tmp);
    REQUIRE(mxl_store_root(NULL, out, sizeof out, &err) == MXL_OK);
    SNP(want, sizeof want, "%s/.cache/mlxcel/models", tmp);
    CHECK_EQ_STR(out, want);

    setenv("MLXCEL_CACHE_DIR", "/srv/cache", 1);
    REQUIRE(mxl_store_root(NULL, out, sizeof out, &err) == MXL_OK);
    CHECK_EQ_STR(out, "/srv/cache/models");

    /* MLXCEL_MODELS_DIR is the root itself: no extra models/ level, and it beats the cache dir. */
    setenv("MLXCEL_MODELS_DIR", "/data/m/", 1);
    REQUIRE(mxl_store_root(NULL, out, sizeof out, &err) == MXL_OK);
    CHECK_EQ_STR(out, "/data/m");

    /* The flag beats both; a relative flag is made absolute against the cwd. */
    REQUIRE(mxl_store_root("/flag/root", out, sizeof out, &err) == MXL_OK);
    CHECK_EQ_STR(out, "/flag/root");
    char cwd[PATH_MAX];
    REQUIRE(getcwd(cwd, sizeof cwd) != NULL);
    REQUIRE(mxl_store_root("rel/models", out, sizeof out, &err) == MXL_OK);
    SNP(want, sizeof want, "%s/rel/models", cwd);
    CHECK_EQ_STR(out, want);
    CHECK(mxl_store_root("", out, sizeof out, &err) == MXL_ERR_ARG);

    /* Empty variables count as unset. */
    setenv("MLXCEL_MODELS_DIR", "", 1);
    REQUIRE(mxl_store_root(NULL, out, sizeof out, &err) == MXL_OK);
    CHECK_EQ_STR(out, "/srv/cache/models");

    /* A too-small buffer is an error, not a truncated path. */
    char small[8];
    CHECK(mxl_store_root(NULL, small, sizeof small, &err) != MXL_OK);
}

TEST(store_root_order) {
    env_saved s;
    env_save(&s);
    char tmp[PATH_MAX];
    REQUIRE(make_tmp(tmp, sizeof tmp));
    root_cases(mxl_test_failed_, tmp);
    rm_tree(tmp);
    env_restore(&s);
}

TEST(store_repo_id_valid) {
    static const char *good[] = {"a/b", "mlx-community/Qwen3-4B-4bit", "A_b.c/d-e", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF",
                                 "o/n.gguf", "0/9"};
    static const char *bad[] = {"",      "a",     "a/b/c", "/a",     "a/",    "/",     "../x",   "a/..",    "a/../../b",
                                "./a",   ".a/b",  "-a/b",  "a/.b",   "a/-b",  "a/b c", "a\\b/c", "a/b\n",   "a/x..y",
                                "a//b",  "~/x",   "a/b/",  "/etc/passwd", "..", "a/b?c", "a/\xc3\xa9"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (!mxl_store_repo_id_valid(good[i])) fprintf(stderr, "  should be valid: '%s'\n", good[i]);
        CHECK(mxl_store_repo_id_valid(good[i]));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (mxl_store_repo_id_valid(bad[i])) fprintf(stderr, "  should be invalid: '%s'\n", bad[i]);
        CHECK(!mxl_store_repo_id_valid(bad[i]));
    }
    CHECK(!mxl_store_repo_id_valid(NULL));
    /* Length limit per part. */
    char longid[MXL_STORE_REPO_PART_MAX + 8];
    memset(longid, 'x', sizeof longid);
    longid[0] = 'o';
    longid[1] = '/';
    longid[2 + MXL_STORE_REPO_PART_MAX] = '\0';
    CHECK(mxl_store_repo_id_valid(longid));
    longid[2 + MXL_STORE_REPO_PART_MAX] = 'x';
    longid[3 + MXL_STORE_REPO_PART_MAX] = '\0';
    CHECK(!mxl_store_repo_id_valid(longid));
}

static void expand_cases(int *mxl_test_failed_, const char *tmp) {
    char out[MXL_STORE_REPO_ID_MAX];
    mxl_error err = {0};
    env_clean(tmp);
    REQUIRE(mxl_store_expand_repo_id("Qwen3-4B-4bit", out, sizeof out, &err) == MXL_OK);
    CHECK_EQ_STR(out, "mlx-community/Qwen3-4B-4bit");
    REQUIRE(mxl_store_expand_repo_id("owner/x", out, sizeof out, &err) == MXL_OK);
    CHECK_EQ_STR(out, "owner/x");
    setenv("MLXCEL_DEFAULT_ORG", "my-org", 1);
    REQUIRE(mxl_store_expand_repo_id("My-Model-4bit", out, sizeof out, &err) == MXL_OK);
    CHECK_EQ_STR(out, "my-org/My-Model-4bit");
    setenv("MLXCEL_DEFAULT_ORG", "../evil", 1);
    CHECK(mxl_store_expand_repo_id("x", out, sizeof out, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "MLXCEL_DEFAULT_ORG") != NULL);
    unsetenv("MLXCEL_DEFAULT_ORG");
    CHECK(mxl_store_expand_repo_id("..", out, sizeof out, &err) == MXL_ERR_ARG);
    CHECK(mxl_store_expand_repo_id("../etc", out, sizeof out, &err) == MXL_ERR_ARG);
    CHECK(mxl_store_expand_repo_id("a/../../b", out, sizeof out, &err) == MXL_ERR_ARG);
    CHECK(mxl_store_expand_repo_id("/abs/path", out, sizeof out, &err) == MXL_ERR_ARG);
    CHECK(mxl_store_expand_repo_id("", out, sizeof out, &err) == MXL_ERR_ARG);
}

TEST(store_expand_repo_id) {
    env_saved s;
    env_save(&s);
    char tmp[PATH_MAX];
    REQUIRE(make_tmp(tmp, sizeof tmp));
    expand_cases(mxl_test_failed_, tmp);
    rm_tree(tmp);
    env_restore(&s);
}

/* ---- resolution --------------------------------------------------------------------------- */

#define COMMIT_MAIN "0123456789abcdef0123456789abcdef01234567"
#define COMMIT_V1 "fedcba9876543210fedcba9876543210fedcba98"

/* HF cache at <hub>: models--o--n with refs/main -> COMMIT_MAIN, refs/v1 -> COMMIT_V1. */
static int make_hf_repo(const char *hub, const char *owner, const char *name) {
    char base[PATH_MAX], p[PATH_MAX];
    SNP(base, sizeof base, "%s/models--%s--%s", hub, owner, name);
    int rc = 0;
    rc |= put_file(base, "snapshots/" COMMIT_MAIN "/config.json", 2);
    rc |= put_file(base, "snapshots/" COMMIT_V1 "/config.json", 3);
    SNP(p, sizeof p, "%s/refs", base);
    mkdirs(p);
    SNP(p, sizeof p, "%s/refs/main", base);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    fputs(COMMIT_MAIN, f); /* huggingface_hub writes no trailing newline */
    fclose(f);
    SNP(p, sizeof p, "%s/refs/v1", base);
    f = fopen(p, "w");
    if (!f) return -1;
    fputs(COMMIT_V1 "\n", f);
    fclose(f);
    return rc;
}

static void resolve_cases(int *mxl_test_failed_, const char *tmp) {
    char store[PATH_MAX], hub[PATH_MAX], want[PATH_MAX], local[PATH_MAX];
    mxl_resolved r;
    mxl_error err = {0};
    env_clean(tmp);
    SNP(store, sizeof store, "%s/store", tmp);
    SNP(hub, sizeof hub, "%s/hub", tmp);
    setenv("MLXCEL_MODELS_DIR", store, 1);
    setenv("HF_HUB_CACHE", hub, 1);
    REQUIRE(put_file(store, "org/in-store/config.json", 10) == 0);
    REQUIRE(put_file(store, "org/both/config.json", 10) == 0);
    REQUIRE(put_file(store, "mlx-community/Bare-4bit/model.safetensors", 10) == 0);
    REQUIRE(put_file(store, "gg/quants/m.Q4_0.gguf", 10) == 0);
    REQUIRE(make_hf_repo(hub, "org", "in-hf") == 0);
    REQUIRE(make_hf_repo(hub, "org", "both") == 0);

    /* Store hit: path, repo id, source. */
    REQUIRE(mxl_store_resolve("org/in-store", NULL, NULL, &r, &err) == MXL_OK);
    SNP(want, sizeof want, "%s/org/in-store", store);
    CHECK_EQ_STR(r.path, want);
    CHECK_EQ_STR(r.repo_id, "org/in-store");
    CHECK(r.source == MXL_MODEL_SOURCE_STORE);
    CHECK_EQ_STR(mxl_model_source_name(r.source), "store");

    /* Store beats the HF cache. */
    REQUIRE(mxl_store_resolve("org/both", NULL, NULL, &r, &err) == MXL_OK);
    CHECK(r.source == MXL_MODEL_SOURCE_STORE);

    /* HF cache: refs/main names the snapshot. */
    REQUIRE(mxl_store_resolve("org/in-hf", NULL, NULL, &r, &err) == MXL_OK);
    SNP(want, sizeof want, "%s/models--org--in-hf/snapshots/" COMMIT_MAIN, hub);
    CHECK_EQ_STR(r.path, want);
    CHECK_EQ_STR(r.revision, COMMIT_MAIN);
    CHECK(r.source == MXL_MODEL_SOURCE_HF_CACHE);
    CHECK_EQ_STR(mxl_model_source_name(r.source), "hf-cache");
    /* A tag through refs/v1 (trailing newline trimmed), and a commit hash used directly. */
    REQUIRE(mxl_store_resolve("org/in-hf", NULL, "v1", &r, &err) == MXL_OK);
    SNP(want, sizeof want, "%s/models--org--in-hf/snapshots/" COMMIT_V1, hub);
    CHECK_EQ_STR(r.path, want);
    REQUIRE(mxl_store_resolve("org/in-hf", NULL, COMMIT_V1, &r, &err) == MXL_OK);
    CHECK_EQ_STR(r.path, want);
    CHECK(mxl_store_resolve("org/in-hf", NULL, "v2", &r, &err) == MXL_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "v2") != NULL);
    CHECK(mxl_store_resolve("org/in-hf", NULL, "../../etc", &r, &err) == MXL_ERR_ARG);

    /* HF_HUB_CACHE beats HF_HOME/hub, which beats ~/.cache/huggingface/hub. */
    char hfhome[PATH_MAX], hub2[PATH_MAX];
    SNP(hfhome, sizeof hfhome, "%s/hfhome", tmp);
    SNP(hub2, sizeof hub2, "%s/hub", hfhome);
    REQUIRE(make_hf_repo(hub2, "org", "in-hf-home") == 0);
    setenv("HF_HOME", hfhome, 1);
    CHECK(mxl_store_resolve("org/in-hf-home", NULL, NULL, &r, &err) == MXL_ERR_NOT_FOUND);
    unsetenv("HF_HUB_CACHE");
    REQUIRE(mxl_store_resolve("org/in-hf-home", NULL, NULL, &r, &err) == MXL_OK);
    CHECK(r.source == MXL_MODEL_SOURCE_HF_CACHE);
    unsetenv("HF_HOME");
    char hub3[PATH_MAX];
    SNP(hub3, sizeof hub3, "%s/.cache/huggingface/hub", tmp);
    REQUIRE(make_hf_repo(hub3, "org", "in-home") == 0);
    REQUIRE(mxl_store_resolve("org/in-home", NULL, NULL, &r, &err) == MXL_OK);
    SNP(want, sizeof want, "%s/models--org--in-home/snapshots/" COMMIT_MAIN, hub3);
    CHECK_EQ_STR(r.path, want);
    setenv("HF_HUB_CACHE", hub, 1);

    /* --revision: main is fine for a store copy, anything else is refused. */
    REQUIRE(mxl_store_resolve("org/in-store", NULL, "main", &r, &err) == MXL_OK);
    CHECK(mxl_store_resolve("org/in-store", NULL, "v1", &r, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "--models-dir") != NULL);

    /* Bare names take the default org (env override included). */
    REQUIRE(mxl_store_resolve("Bare-4bit", NULL, NULL, &r, &err) == MXL_OK);
    CHECK_EQ_STR(r.repo_id, "mlx-community/Bare-4bit");
    CHECK(r.source == MXL_MODEL_SOURCE_STORE);
    setenv("MLXCEL_DEFAULT_ORG", "org", 1);
    REQUIRE(mxl_store_resolve("in-store", NULL, NULL, &r, &err) == MXL_OK);
    CHECK_EQ_STR(r.repo_id, "org/in-store");
    unsetenv("MLXCEL_DEFAULT_ORG");

    /* owner/name/<file> names one file of a repo. */
    REQUIRE(mxl_store_resolve("gg/quants/m.Q4_0.gguf", NULL, NULL, &r, &err) == MXL_OK);
    SNP(want, sizeof want, "%s/gg/quants/m.Q4_0.gguf", store);
    CHECK_EQ_STR(r.path, want);
    CHECK_EQ_STR(r.repo_id, "gg/quants");
    CHECK(mxl_store_resolve("gg/quants/other.gguf", NULL, NULL, &r, &err) == MXL_ERR_NOT_FOUND);

    /* --models-dir beats MLXCEL_MODELS_DIR. */
    char store2[PATH_MAX];
    SNP(store2, sizeof store2, "%s/store2", tmp);
    REQUIRE(put_file(store2, "org/only-in-2/config.json", 1) == 0);
    CHECK(mxl_store_resolve("org/only-in-2", NULL, NULL, &r, &err) == MXL_ERR_NOT_FOUND);
    REQUIRE(mxl_store_resolve("org/only-in-2", store2, NULL, &r, &err) == MXL_OK);
    CHECK(r.source == MXL_MODEL_SOURCE_STORE);

    /* Not found anywhere: one line naming the store root and the download command. */
    CHECK(mxl_store_resolve("org/nowhere", NULL, NULL, &r, &err) == MXL_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "'org/nowhere'") != NULL);
    CHECK(strstr(err.msg, store) != NULL);
    CHECK(strstr(err.msg, "mlxcel download org/nowhere") != NULL);
    CHECK(strchr(err.msg, '\n') == NULL);
    CHECK(mxl_store_resolve("nowhere", NULL, NULL, &r, &err) == MXL_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "mlx-community/nowhere") != NULL);

    /* A local path wins over a same-named repo id, and refuses --revision. */
    SNP(local, sizeof local, "%s/org/in-store", tmp);
    REQUIRE(put_file(local, "config.json", 1) == 0);
    char cwd[PATH_MAX];
    REQUIRE(getcwd(cwd, sizeof cwd) != NULL);
    REQUIRE(chdir(tmp) == 0);
    mxl_status st = mxl_store_resolve("org/in-store", NULL, NULL, &r, &err);
    mxl_resolved r_rel = r;
    mxl_status st_rev = mxl_store_resolve("org/in-store", NULL, "main", &r, &err);
    REQUIRE(chdir(cwd) == 0);
    CHECK(st == MXL_OK);
    CHECK(r_rel.source == MXL_MODEL_SOURCE_LOCAL);
    CHECK_EQ_STR(r_rel.path, local);
    CHECK(st_rev == MXL_ERR_ARG);
    /* A symlinked file (as in an HF snapshot) keeps its own name, not its blob target's. */
    char blob[PATH_MAX], link[PATH_MAX];
    SNP(blob, sizeof blob, "%s/blobs/0a1b2c", tmp);
    SNP(link, sizeof link, "%s/snap/model.gguf", tmp);
    REQUIRE(put_file(tmp, "blobs/0a1b2c", 8) == 0);
    REQUIRE(put_file(tmp, "snap/README.md", 1) == 0);
    REQUIRE(symlink(blob, link) == 0);
    REQUIRE(mxl_store_resolve(link, NULL, NULL, &r, &err) == MXL_OK);
    CHECK_EQ_STR(r.path, link);
    REQUIRE(mxl_store_resolve(local, NULL, NULL, &r, &err) == MXL_OK);
    CHECK(r.source == MXL_MODEL_SOURCE_LOCAL);
    CHECK_EQ_STR(r.path, local);
    CHECK_EQ_STR(r.repo_id, "");
    CHECK(mxl_store_resolve(local, NULL, "v1", &r, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "--revision") != NULL);

    /* Missing paths and invalid ids. */
    CHECK(mxl_store_resolve("/no/such/model", NULL, NULL, &r, &err) == MXL_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "does not exist") != NULL);
    CHECK(mxl_store_resolve("../etc", NULL, NULL, &r, &err) == MXL_ERR_NOT_FOUND);
    CHECK(mxl_store_resolve("a/b/c/d", NULL, NULL, &r, &err) == MXL_ERR_NOT_FOUND);
    CHECK(mxl_store_resolve("a b/c", NULL, NULL, &r, &err) == MXL_ERR_ARG);
    CHECK(mxl_store_resolve("", NULL, NULL, &r, &err) == MXL_ERR_ARG);
}

TEST(store_resolve_order) {
    env_saved s;
    env_save(&s);
    char tmp[PATH_MAX];
    REQUIRE(make_tmp(tmp, sizeof tmp));
    resolve_cases(mxl_test_failed_, tmp);
    rm_tree(tmp);
    env_restore(&s);
}

TEST(store_hf_refs_malformed) {
    env_saved s;
    env_save(&s);
    char tmp[PATH_MAX], hub[PATH_MAX], p[PATH_MAX];
    REQUIRE(make_tmp(tmp, sizeof tmp));
    env_clean(tmp);
    SNP(hub, sizeof hub, "%s/hub", tmp);
    setenv("HF_HUB_CACHE", hub, 1);
    int ok = put_file(hub, "models--o--n/refs/main", 0) == 0;
    SNP(p, sizeof p, "%s/models--o--n/refs/main", hub);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs("../../../../etc\n", f);
        fclose(f);
    }
    char out[MXL_STORE_PATH_MAX];
    mxl_error err = {0};
    mxl_status st = mxl_store_hf_lookup("o/n", NULL, out, sizeof out, NULL, 0, &err);
    rm_tree(tmp);
    env_restore(&s);
    REQUIRE(ok && f);
    CHECK(st == MXL_ERR_FORMAT);
    CHECK(strstr(err.msg, "refs/main") != NULL);
}

TEST(store_gguf_in_dir) {
    char tmp[PATH_MAX], d[PATH_MAX], out[MXL_STORE_PATH_MAX], want[PATH_MAX];
    mxl_error err = {0};
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE(put_file(tmp, "one/model.Q4_1.gguf", 4) == 0);
    REQUIRE(put_file(tmp, "one/README.md", 4) == 0);
    REQUIRE(put_file(tmp, "hf/config.json", 4) == 0);
    REQUIRE(put_file(tmp, "hf/x.gguf", 4) == 0);
    REQUIRE(put_file(tmp, "two/b.gguf", 4) == 0);
    REQUIRE(put_file(tmp, "two/a.gguf", 4) == 0);
    REQUIRE(put_file(tmp, "none/model.safetensors", 4) == 0);

    SNP(d, sizeof d, "%s/one", tmp);
    CHECK(mxl_store_gguf_in_dir(d, out, sizeof out, &err) == MXL_OK);
    SNP(want, sizeof want, "%s/one/model.Q4_1.gguf", tmp);
    CHECK_EQ_STR(out, want);
    SNP(d, sizeof d, "%s/hf", tmp);
    CHECK(mxl_store_gguf_in_dir(d, out, sizeof out, &err) == MXL_OK);
    CHECK_EQ_STR(out, "");
    SNP(d, sizeof d, "%s/none", tmp);
    CHECK(mxl_store_gguf_in_dir(d, out, sizeof out, &err) == MXL_OK);
    CHECK_EQ_STR(out, "");
    SNP(d, sizeof d, "%s/two", tmp);
    CHECK(mxl_store_gguf_in_dir(d, out, sizeof out, &err) == MXL_ERR_ARG);
    CHECK_EQ_STR(out, "");
    CHECK(strstr(err.msg, "a.gguf, b.gguf") != NULL);
    SNP(d, sizeof d, "%s/missing", tmp);
    CHECK(mxl_store_gguf_in_dir(d, out, sizeof out, &err) == MXL_ERR_IO);
    rm_tree(tmp);
}

/* ---- usage and listing -------------------------------------------------------------------- */

TEST(store_usage_no_symlink_follow) {
    char tmp[PATH_MAX], d[PATH_MAX], p[PATH_MAX], t[PATH_MAX];
    mxl_error err = {0};
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE(put_file(tmp, "m/config.json", 100) == 0);
    REQUIRE(put_file(tmp, "m/sub/deeper/w.safetensors", 2000) == 0);
    REQUIRE(put_file(tmp, "outside/big.bin", 50000) == 0);
    SNP(p, sizeof p, "%s/m/link.bin", tmp);
    SNP(t, sizeof t, "%s/outside/big.bin", tmp);
    REQUIRE(symlink(t, p) == 0);
    SNP(p, sizeof p, "%s/m/linkdir", tmp);
    SNP(t, sizeof t, "%s/outside", tmp);
    REQUIRE(symlink(t, p) == 0);
    REQUIRE(set_mtime(tmp, "m/config.json", 1600000000) == 0);
    REQUIRE(set_mtime(tmp, "m/sub/deeper/w.safetensors", 1700000000) == 0);
    REQUIRE(set_mtime(tmp, "outside/big.bin", 1800000000) == 0);

    uint64_t bytes = 0;
    int64_t mt = 0;
    bool has = false;
    SNP(d, sizeof d, "%s/m", tmp);
    REQUIRE(mxl_store_usage(d, &bytes, &mt, &has, &err) == MXL_OK);
    CHECK_EQ_INT(bytes, 2100);
    CHECK(has);
    CHECK_EQ_INT(mt, 1700000000);

    /* A directory with no regular files has no known mtime. */
    SNP(d, sizeof d, "%s/empty", tmp);
    REQUIRE(mkdir(d, 0755) == 0);
    REQUIRE(mxl_store_usage(d, &bytes, &mt, &has, &err) == MXL_OK);
    CHECK_EQ_INT(bytes, 0);
    CHECK(!has);
    rm_tree(tmp);
}

static const mxl_store_entry *find_entry(const mxl_store_entry *v, size_t n, const char *id) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].repo_id, id) == 0) return &v[i];
    return NULL;
}

TEST(store_list_entries) {
    char tmp[PATH_MAX], root[PATH_MAX], p[PATH_MAX], t[PATH_MAX];
    mxl_error err = {0};
    REQUIRE(make_tmp(tmp, sizeof tmp));
    SNP(root, sizeof root, "%s/root", tmp);
    REQUIRE(put_file(root, "a/hf/config.json", 10) == 0);
    REQUIRE(put_file(root, "a/hf/model.safetensors", 1000) == 0);
    REQUIRE(put_file(root, "a/gguf/x.gguf", 300) == 0);
    REQUIRE(put_file(root, "b/st/w.safetensors", 7) == 0);
    REQUIRE(put_file(root, "b/not-a-model/README.md", 5) == 0);    /* no model files */
    REQUIRE(put_file(root, ".fetch-tmp.1/x/config.json", 5) == 0); /* hidden: skipped */
    REQUIRE(put_file(root, "b/.hidden/config.json", 5) == 0);
    REQUIRE(put_file(tmp, "elsewhere/config.json", 5) == 0);
    SNP(p, sizeof p, "%s/b/linked", root); /* a symlinked snapshot is not managed: skipped */
    SNP(t, sizeof t, "%s/elsewhere", tmp);
    REQUIRE(symlink(t, p) == 0);
    REQUIRE(set_mtime(root, "a/hf/config.json", 1500000000) == 0);
    REQUIRE(set_mtime(root, "a/hf/model.safetensors", 1500000500) == 0);

    mxl_store_entry *v = NULL;
    size_t n = 0;
    REQUIRE(mxl_store_list(root, &v, &n, &err) == MXL_OK);
    CHECK_EQ_INT(n, 3);
    const mxl_store_entry *e = find_entry(v, n, "a/hf");
    CHECK(e != NULL);
    if (e) {
        CHECK_EQ_INT(e->size_bytes, 1010);
        CHECK(e->has_modified);
        CHECK_EQ_INT(e->modified, 1500000500);
        SNP(p, sizeof p, "%s/a/hf", root);
        CHECK_EQ_STR(e->path, p);
    }
    e = find_entry(v, n, "a/gguf");
    CHECK(e && e->size_bytes == 300);
    e = find_entry(v, n, "b/st");
    CHECK(e && e->size_bytes == 7);
    CHECK(find_entry(v, n, "b/linked") == NULL);
    CHECK(find_entry(v, n, "b/not-a-model") == NULL);
    mxl_store_entries_free(v);

    /* A missing root is an empty store. */
    SNP(p, sizeof p, "%s/missing", tmp);
    REQUIRE(mxl_store_list(p, &v, &n, &err) == MXL_OK);
    CHECK_EQ_INT(n, 0);
    CHECK(v == NULL);
    rm_tree(tmp);
}

TEST(store_format_size) {
    char b[32];
    mxl_store_format_size(0, b, sizeof b);
    CHECK_EQ_STR(b, "0 B");
    mxl_store_format_size(999, b, sizeof b);
    CHECK_EQ_STR(b, "999 B");
    mxl_store_format_size(1000, b, sizeof b);
    CHECK_EQ_STR(b, "1.0 KB");
    mxl_store_format_size(98362432, b, sizeof b);
    CHECK_EQ_STR(b, "98.4 MB");
    mxl_store_format_size(999960, b, sizeof b);
    CHECK_EQ_STR(b, "1.0 MB");
    mxl_store_format_size(253113024, b, sizeof b);
    CHECK_EQ_STR(b, "253.1 MB");
    mxl_store_format_size(UINT64_MAX, b, sizeof b);
    CHECK_EQ_STR(b, "18.4 EB");
}

/* ---- rm safety ---------------------------------------------------------------------------- */

TEST(store_remove_safety) {
    char tmp[PATH_MAX], root[PATH_MAX], p[PATH_MAX], t[PATH_MAX], out[MXL_STORE_PATH_MAX];
    mxl_error err = {0};
    REQUIRE(make_tmp(tmp, sizeof tmp));
    SNP(root, sizeof root, "%s/root", tmp);
    REQUIRE(put_file(tmp, "victim/precious.txt", 10) == 0);
    REQUIRE(put_file(tmp, "victim2/inner/config.json", 10) == 0);
    REQUIRE(put_file(root, "own/model/config.json", 10) == 0);
    REQUIRE(put_file(root, "own/model/sub/w.safetensors", 10) == 0);
    REQUIRE(put_file(root, "own/keep/config.json", 10) == 0);
    REQUIRE(put_file(root, "solo/m/config.json", 10) == 0);
    /* Links inside the model dir pointing out of the store: only the links may go. */
    SNP(p, sizeof p, "%s/own/model/link-file", root);
    SNP(t, sizeof t, "%s/victim/precious.txt", tmp);
    REQUIRE(symlink(t, p) == 0);
    SNP(p, sizeof p, "%s/own/model/sub/link-dir", root);
    SNP(t, sizeof t, "%s/victim", tmp);
    REQUIRE(symlink(t, p) == 0);
    /* A snapshot that is itself a symlink out of the store, and a symlinked owner. */
    REQUIRE(mkdir(strcat(strcpy(p, root), "/esc"), 0755) == 0);
    SNP(p, sizeof p, "%s/esc/model", root);
    REQUIRE(symlink(t, p) == 0);
    SNP(p, sizeof p, "%s/evil", root);
    SNP(t, sizeof t, "%s/victim2", tmp);
    REQUIRE(symlink(t, p) == 0);
    /* A snapshot symlinked to another repo inside the store, and a dangling one. */
    REQUIRE(mkdir(strcat(strcpy(p, root), "/alias"), 0755) == 0);
    SNP(p, sizeof p, "%s/alias/m", root);
    SNP(t, sizeof t, "%s/own/keep", root);
    REQUIRE(symlink(t, p) == 0);
    SNP(p, sizeof p, "%s/alias/dangling", root);
    REQUIRE(symlink("/nonexistent/mxl", p) == 0);

    /* Invalid / traversal ids never get near the file system. */
    static const char *bad[] = {"../victim", "own/../../victim", "/etc/passwd", "own/model/..", "..", "own/..",
                                "own/model/sub"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(mxl_store_check_removable(root, bad[i], out, sizeof out, &err) == MXL_ERR_ARG);
        CHECK(mxl_store_remove(root, bad[i], &err) == MXL_ERR_ARG);
    }
    /* Symlink escapes are refused by the safety check, and remove leaves the targets alone. */
    CHECK(mxl_store_check_removable(root, "esc/model", out, sizeof out, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "symlink") != NULL);
    CHECK(mxl_store_remove(root, "esc/model", &err) == MXL_ERR_ARG);
    CHECK(mxl_store_check_removable(root, "evil/inner", out, sizeof out, &err) == MXL_ERR_ARG);
    CHECK(mxl_store_remove(root, "evil/inner", &err) == MXL_ERR_ARG);
    CHECK(exists(tmp, "victim/precious.txt"));
    CHECK(exists(tmp, "victim2/inner/config.json"));
    CHECK(exists(root, "esc/model"));
    CHECK(mxl_store_remove(root, "alias/m", &err) == MXL_ERR_ARG);
    CHECK(exists(root, "own/keep/config.json"));
    CHECK(mxl_store_remove(root, "alias/dangling", &err) == MXL_ERR_ARG);
    CHECK(exists(root, "alias/dangling"));

    /* Missing models and a missing root are NOT_FOUND. */
    CHECK(mxl_store_check_removable(root, "own/none", out, sizeof out, &err) == MXL_ERR_NOT_FOUND);
    CHECK(mxl_store_check_removable(root, "nobody/none", out, sizeof out, &err) == MXL_ERR_NOT_FOUND);
    SNP(p, sizeof p, "%s/no-root", tmp);
    CHECK(mxl_store_check_removable(p, "own/model", out, sizeof out, &err) == MXL_ERR_NOT_FOUND);

    /* The real thing: the tree goes, the links' targets stay, the owner stays while non-empty. */
    REQUIRE(mxl_store_check_removable(root, "own/model", out, sizeof out, &err) == MXL_OK);
    SNP(p, sizeof p, "%s/own/model", root);
    CHECK_EQ_STR(out, p);
    CHECK(mxl_store_remove(root, "own/model", &err) == MXL_OK);
    CHECK(!exists(root, "own/model"));
    CHECK(exists(root, "own/keep/config.json"));
    CHECK(exists(tmp, "victim/precious.txt"));
    /* The owner directory goes once its last model is removed. */
    CHECK(mxl_store_remove(root, "solo/m", &err) == MXL_OK);
    CHECK(!exists(root, "solo"));
    CHECK(exists(root, NULL));
    rm_tree(tmp);
}

/* The store root itself may be a symlink (e.g. ~/.cache on another disk): removal still works. */
TEST(store_remove_through_symlinked_root) {
    char tmp[PATH_MAX], real_root[PATH_MAX], link_root[PATH_MAX];
    mxl_error err = {0};
    REQUIRE(make_tmp(tmp, sizeof tmp));
    SNP(real_root, sizeof real_root, "%s/real", tmp);
    SNP(link_root, sizeof link_root, "%s/link", tmp);
    REQUIRE(put_file(real_root, "o/n/config.json", 3) == 0);
    REQUIRE(symlink(real_root, link_root) == 0);
    CHECK(mxl_store_remove(link_root, "o/n", &err) == MXL_OK);
    CHECK(!exists(real_root, "o/n"));
    CHECK(exists(link_root, NULL));
    rm_tree(tmp);
}
