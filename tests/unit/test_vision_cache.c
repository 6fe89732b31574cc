/* test_vision_cache.c - the server's cache of encoded images (server/vision_cache.h): keys tell
 * inputs apart by pixels and by shape facts, the least recently used entry leaves first, a size
 * that differs misses, and a cache of 0 entries keeps nothing. */
#include <string.h>

#include "server/vision_cache.h"
#include "test.h"

static void key_of(float *px, size_t n, int64_t tokens, int64_t g0, uint8_t key[32]) {
    mxl_vlm_input in = {.pixels = px, .n_pixels = n, .n_tokens = tokens, .grid = {g0, 0, 0, 0}};
    mxl_vision_cache_key(&in, key);
}

TEST(vision_cache_lru_and_keys) {
    float px[4][8], rows[3][6], got[6];
    uint8_t k[4][32], k_grid[32];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) px[i][j] = (float)(i * 8 + j);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 6; j++) rows[i][j] = (float)(100 * i + j);
    for (int i = 0; i < 4; i++) key_of(px[i], 8, 3, 0, k[i]);
    key_of(px[0], 8, 3, 1, k_grid); /* the same pixels under other shape facts */
    CHECK(memcmp(k[0], k[1], 32) != 0 && memcmp(k[0], k_grid, 32) != 0);
    uint8_t again[32];
    key_of(px[0], 8, 3, 0, again);
    CHECK(memcmp(k[0], again, 32) == 0);

    mxl_vision_cache *c = mxl_vision_cache_create(2);
    REQUIRE(c);
    CHECK(!mxl_vision_cache_get(c, k[0], got, 6));
    mxl_vision_cache_put(c, k[0], rows[0], 6);
    mxl_vision_cache_put(c, k[1], rows[1], 6);
    CHECK(mxl_vision_cache_get(c, k[0], got, 6) && memcmp(got, rows[0], sizeof got) == 0); /* k[0] now the most recent */
    CHECK(!mxl_vision_cache_get(c, k[0], got, 5));                                      /* another size: a miss */
    mxl_vision_cache_put(c, k[2], rows[2], 6);                                           /* k[1] leaves */
    CHECK(!mxl_vision_cache_get(c, k[1], got, 6));
    CHECK(mxl_vision_cache_get(c, k[2], got, 6) && memcmp(got, rows[2], sizeof got) == 0);
    CHECK(mxl_vision_cache_get(c, k[0], got, 6) && memcmp(got, rows[0], sizeof got) == 0);
    CHECK(!mxl_vision_cache_get(c, k_grid, got, 6));
    mxl_vision_cache_destroy(c);

    mxl_vision_cache *none = mxl_vision_cache_create(0);
    REQUIRE(none);
    mxl_vision_cache_put(none, k[3], rows[0], 6);
    CHECK(!mxl_vision_cache_get(none, k[3], got, 6));
    mxl_vision_cache_destroy(none);
}
