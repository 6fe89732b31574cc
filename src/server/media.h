/* media.h - the images of one request, from the URLs its messages give (OpenAI image_url parts,
 * Anthropic image blocks, llama-server's image_data): data: URLs with a base64 payload, and local
 * files (file:// URLs or paths) only under --media-path, resolved inside it (no escaping it by
 * "..", symlinks or absolute paths elsewhere); remote http(s) URLs are refused, nothing is
 * fetched. Each image is held to --max-image-payload-size encoded bytes, decoded within
 * --max-image-width / --max-image-height / --max-image-decode-alloc-bytes (image/image.h) and made
 * into the model's processor output (models/vlm.h) on the request's thread; the scheduler runs the
 * vision tower when it admits the job. */
#ifndef MXL_SERVER_MEDIA_H
#define MXL_SERVER_MEDIA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/generate.h"
#include "models/vlm.h"
#include "server/server_state.h"

typedef struct mxl_srv_images {
    int n;
    mxl_vlm_input in[MXL_GEN_MAX_IMAGES]; /* each image through the model's processor */
} mxl_srv_images;

/* urls: a JSON array of URL strings, in prompt order. false: msg says why (the request's fault). */
bool mxl_srv_images_load(const mxl_server *s, const json_t *urls, mxl_srv_images *out, char *msg, size_t ml);
void mxl_srv_images_free(mxl_srv_images *im);

#endif
