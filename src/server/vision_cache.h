/* vision_cache.h - the server's cache of encoded images (--vision-cache-size, the spec's vision
 * feature cache): the rows the vision tower and projector made of an image, kept by a SHA-256 of
 * the model's preprocessed input (pixels, their count, the family's grid facts, the token count),
 * least recently used first out. A multi-turn conversation sends its images again with every
 * turn (OpenAI and Anthropic requests carry the whole history); a hit copies the rows instead of
 * running the tower again. The rows are exactly those a new encode would give (the tower is
 * deterministic for one input), so a hit changes no output. Thread-safe. */
#ifndef MXL_SERVER_VISION_CACHE_H
#define MXL_SERVER_VISION_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "models/vlm.h"

typedef struct mxl_vision_cache mxl_vision_cache;

/* At most `capacity` images (0: a cache that keeps nothing). NULL when out of memory. */
mxl_vision_cache *mxl_vision_cache_create(int capacity);
void mxl_vision_cache_destroy(mxl_vision_cache *c);

/* The key of one preprocessed image. */
void mxl_vision_cache_key(const mxl_vlm_input *in, uint8_t key[32]);
/* Copies the cached rows of `key` (n_floats of them) into rows: false when absent (or cached
 * with another size). */
bool mxl_vision_cache_get(mxl_vision_cache *c, const uint8_t key[32], float *rows, size_t n_floats);
/* Keeps a copy of rows under key (the least recently used entry leaves when full; out of memory:
 * nothing kept). */
void mxl_vision_cache_put(mxl_vision_cache *c, const uint8_t key[32], const float *rows, size_t n_floats);

#endif
