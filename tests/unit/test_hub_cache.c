/* test_hub_cache.c - the download side of the store (io/hub_cache.h): which repo file names and
 * ETags are safe to use as paths, the relative pointer links of a snapshot (the form
 * huggingface_hub writes: ../../blobs/<etag>, one more ../ per directory level), refs written
 * atomically, the store entry of links with its record, and dropping a snapshot with exactly the
 * blobs nothing else links to. The network side is covered by tests/cli/test_download.py against
 * the local Hub server. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "io/hub_cache.h"
#include "test.h"

#define SNP(buf, cap, ...)                                                                        \
    do {                                                                                         \
        int n_ = snprintf(buf, cap, __VA_ARGS__);                                                \
        if (n_ < 0 || (size_t)n_ >= (size_t)(cap)) abort();                                      \
    } while (0)

static void put(const char *path, const char *text) {
    char dir[PATH_MAX];
    SNP(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    mxl_hub_mkdirs(dir, NULL);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    fputs(text, f);
    fclose(f);
}

static bool exists(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0;
}

TEST(hub_path_valid) {
    CHECK(mxl_hub_path_valid("config.json"));
    CHECK(mxl_hub_path_valid("onnx/model.onnx"));
    CHECK(mxl_hub_path_valid("a/b/c d.txt"));
    CHECK(!mxl_hub_path_valid(""));
    CHECK(!mxl_hub_path_valid("/etc/passwd"));
    CHECK(!mxl_hub_path_valid("../x"));
    CHECK(!mxl_hub_path_valid("a/../../x"));
    CHECK(!mxl_hub_path_valid("a/./b"));
    CHECK(!mxl_hub_path_valid("a//b"));
    CHECK(!mxl_hub_path_valid("a/"));
    CHECK(!mxl_hub_path_valid("a\\b"));
    CHECK(!mxl_hub_path_valid("a\nb"));
}

TEST(hub_etag_normalize) {
    char out[MXL_HUB_ETAG_MAX];
    REQUIRE(mxl_hub_etag_normalize("\"0850650e34448ffc89181fcc1783f9eee1732a65\"", out, sizeof out));
    CHECK(strcmp(out, "0850650e34448ffc89181fcc1783f9eee1732a65") == 0);
    REQUIRE(mxl_hub_etag_normalize("W/\"abc-1\"", out, sizeof out));
    CHECK(strcmp(out, "abc-1") == 0);
    CHECK(!mxl_hub_etag_normalize("\"../../etc\"", out, sizeof out));
    CHECK(!mxl_hub_etag_normalize("\"a/b\"", out, sizeof out));
    CHECK(!mxl_hub_etag_normalize("\"\"", out, sizeof out));
    CHECK(!mxl_hub_etag_normalize("\".hidden\"", out, sizeof out));
    CHECK(mxl_hub_commit_valid("e775e2c3ca38f3462698668d67ba383e12bf9711"));
    CHECK(!mxl_hub_commit_valid("E775E2C3CA38F3462698668D67BA383E12BF9711"));
    CHECK(!mxl_hub_commit_valid("main"));
}

TEST(hub_pointer_links_refs_and_drop) {
    char tmp[] = "/tmp/mxl-hubcache-XXXXXX";
    REQUIRE(mkdtemp(tmp));
    const char *commit = "1111111111111111111111111111111111111111";
    const char *commit2 = "2222222222222222222222222222222222222222";
    char repo[PATH_MAX], p[PATH_MAX], t[PATH_MAX];
    mxl_error err = {0};
    REQUIRE(mxl_hub_repo_dir(tmp, "acme/tiny", repo, sizeof repo, &err) == MXL_OK);
    SNP(p, sizeof p, "%s/models--acme--tiny", tmp);
    CHECK(strcmp(repo, p) == 0);
    SNP(p, sizeof p, "%s/blobs/aaaa", repo);
    put(p, "A");
    SNP(p, sizeof p, "%s/blobs/bbbb", repo);
    put(p, "B");
    SNP(p, sizeof p, "%s/blobs/cccc", repo);
    put(p, "C");
    REQUIRE(mxl_hub_link_pointer(repo, commit, "config.json", "aaaa", &err) == MXL_OK);
    REQUIRE(mxl_hub_link_pointer(repo, commit, "x/y/w.bin", "bbbb", &err) == MXL_OK);
    REQUIRE(mxl_hub_link_pointer(repo, commit2, "config.json", "aaaa", &err) == MXL_OK);
    REQUIRE(mxl_hub_link_pointer(repo, commit2, "other.bin", "cccc", &err) == MXL_OK);
    CHECK(mxl_hub_link_pointer(repo, commit, "../escape", "aaaa", &err) == MXL_ERR_FORMAT);
    SNP(p, sizeof p, "%s/snapshots/%s/x/y/w.bin", repo, commit);
    ssize_t n = readlink(p, t, sizeof t - 1);
    REQUIRE(n > 0);
    t[n] = '\0';
    CHECK(strcmp(t, "../../../../blobs/bbbb") == 0);
    char *s = mxl_test_read_file(p, NULL);
    CHECK(s && strcmp(s, "B") == 0);
    mxl_free(s);
    SNP(p, sizeof p, "%s/snapshots/%s/config.json", repo, commit);
    n = readlink(p, t, sizeof t - 1);
    REQUIRE(n > 0);
    t[n] = '\0';
    CHECK(strcmp(t, "../../blobs/aaaa") == 0);

    REQUIRE(mxl_hub_write_ref(repo, "main", commit, &err) == MXL_OK);
    REQUIRE(mxl_hub_write_ref(repo, "v1", commit2, &err) == MXL_OK);
    REQUIRE(mxl_hub_write_ref(repo, commit, commit, &err) == MXL_OK); /* a commit needs no ref */
    SNP(p, sizeof p, "%s/refs/%s", repo, commit);
    CHECK(!exists(p));
    SNP(p, sizeof p, "%s/refs/main", repo);
    s = mxl_test_read_file(p, NULL);
    CHECK(s && strcmp(s, commit) == 0);
    mxl_free(s);

    /* dropping commit: its snapshot, refs/main and blob bbbb go; aaaa stays (commit2 links it) */
    REQUIRE(mxl_hub_drop_snapshot(tmp, "acme/tiny", commit, &err) == MXL_OK);
    SNP(p, sizeof p, "%s/snapshots/%s", repo, commit);
    CHECK(!exists(p));
    SNP(p, sizeof p, "%s/refs/main", repo);
    CHECK(!exists(p));
    SNP(p, sizeof p, "%s/refs/v1", repo);
    CHECK(exists(p));
    SNP(p, sizeof p, "%s/blobs/bbbb", repo);
    CHECK(!exists(p));
    SNP(p, sizeof p, "%s/blobs/aaaa", repo);
    CHECK(exists(p));
    SNP(p, sizeof p, "%s/blobs/cccc", repo);
    CHECK(exists(p));
    /* the last snapshot: the whole repo folder */
    REQUIRE(mxl_hub_drop_snapshot(tmp, "acme/tiny", commit2, &err) == MXL_OK);
    CHECK(!exists(repo));
    mxl_test_rmtree(tmp);
}

TEST(hub_store_publish_and_marker) {
    char tmp[] = "/tmp/mxl-hubstore-XXXXXX";
    REQUIRE(mkdtemp(tmp));
    char hub[PATH_MAX], root[PATH_MAX], repo[PATH_MAX], p[PATH_MAX], entry[PATH_MAX];
    mxl_error err = {0};
    SNP(hub, sizeof hub, "%s/hub", tmp);
    SNP(root, sizeof root, "%s/store", tmp);
    const char *commit = "3333333333333333333333333333333333333333";
    REQUIRE(mxl_hub_repo_dir(hub, "acme/tiny", repo, sizeof repo, &err) == MXL_OK);
    SNP(p, sizeof p, "%s/blobs/aaaa", repo);
    put(p, "{}");
    SNP(p, sizeof p, "%s/blobs/bbbb", repo);
    put(p, "weights");
    REQUIRE(mxl_hub_link_pointer(repo, commit, "config.json", "aaaa", &err) == MXL_OK);
    REQUIRE(mxl_hub_link_pointer(repo, commit, "sub/model.safetensors", "bbbb", &err) == MXL_OK);

    mxl_hub_marker m = {.snapshot_created = true};
    snprintf(m.repo_id, sizeof m.repo_id, "acme/tiny");
    snprintf(m.revision, sizeof m.revision, "main");
    snprintf(m.commit, sizeof m.commit, "%s", commit);
    snprintf(m.hub_dir, sizeof m.hub_dir, "%s", hub);
    const char *files[] = {"config.json", "sub/model.safetensors"};
    REQUIRE(mxl_hub_store_publish(root, &m, files, 2, false, &err) == MXL_OK);
    SNP(entry, sizeof entry, "%s/acme/tiny", root);
    SNP(p, sizeof p, "%s/sub/model.safetensors", entry);
    char *s = mxl_test_read_file(p, NULL);
    CHECK(s && strcmp(s, "weights") == 0);
    mxl_free(s);
    mxl_hub_marker back;
    REQUIRE(mxl_hub_marker_read(entry, &back, &err) == MXL_OK);
    CHECK(strcmp(back.commit, commit) == 0 && back.snapshot_created && strcmp(back.hub_dir, hub) == 0);
    CHECK(mxl_hub_store_entry_intact(entry));
    uint64_t bytes = 0;
    int64_t mt = 0;
    bool has = false;
    REQUIRE(mxl_store_usage_links(entry, &bytes, &mt, &has, &err) == MXL_OK);
    struct stat sb;
    SNP(p, sizeof p, "%s/%s", entry, MXL_STORE_DOWNLOAD_MARKER);
    REQUIRE(stat(p, &sb) == 0);
    CHECK_EQ_INT(bytes, 2 + 7 + (int64_t)sb.st_size);
    /* republishing swaps the entry in place */
    REQUIRE(mxl_hub_store_publish(root, &m, files, 1, false, &err) == MXL_OK);
    SNP(p, sizeof p, "%s/sub", entry);
    CHECK(!exists(p));
    /* the hub copy deleted behind our back: the entry is no longer intact */
    REQUIRE(mxl_hub_store_publish(root, &m, files, 2, false, &err) == MXL_OK);
    SNP(p, sizeof p, "%s/blobs/bbbb", repo);
    unlink(p);
    CHECK(!mxl_hub_store_entry_intact(entry));
    /* a plain copy (no record) is not replaced without the force flag */
    char plain[PATH_MAX];
    SNP(plain, sizeof plain, "%s/acme/plain/config.json", root);
    put(plain, "{}");
    snprintf(m.repo_id, sizeof m.repo_id, "acme/plain");
    CHECK(mxl_hub_store_publish(root, &m, files, 1, false, &err) == MXL_ERR_ARG);
    CHECK(strstr(err.msg, "--force") != NULL);
    SNP(p, sizeof p, "%s/acme/plain", root);
    CHECK(mxl_hub_marker_read(p, &back, &err) == MXL_ERR_NOT_FOUND);
    /* a malformed record is an error, not a crash */
    SNP(p, sizeof p, "%s/acme/bad/%s", root, MXL_STORE_DOWNLOAD_MARKER);
    put(p, "{\"repo_id\": 3}");
    SNP(p, sizeof p, "%s/acme/bad", root);
    CHECK(mxl_hub_marker_read(p, &back, &err) == MXL_ERR_FORMAT);
    mxl_test_rmtree(tmp);
}
