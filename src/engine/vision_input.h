/* vision_input.h - an image file made into the pixel values a VLM's vision tower reads: decoded
 * (image/image.h, with the request's limits), resized with PIL's arithmetic (image/resize.h) and
 * rescaled / normalised as the checkpoint's image processor does (models/vlm.h's preproc), then
 * encoded by the tower into the rows that take the image tokens' place in the prompt. */
#ifndef MXL_ENGINE_VISION_INPUT_H
#define MXL_ENGINE_VISION_INPUT_H

#include "core/status.h"
#include "core/threadpool.h"
#include "image/image.h"
#include "models/vlm.h"

/* *pixels [3, pre.height, pre.width] (mxl_free) for the decoded image im. */
mxl_status mxl_vision_pixels(const mxl_vlm *v, const mxl_image *im, float **pixels, mxl_error *err);
/* *rows [tokens_per_image, text_hidden] (mxl_free): the image file at path through the processor
 * and the tower. lim NULL: the default limits. */
mxl_status mxl_vision_encode_file(const mxl_vlm *v, const char *path, const mxl_image_limits *lim, mxl_threadpool *pool,
                                  float **rows, mxl_error *err);

#endif
