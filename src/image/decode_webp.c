/* decode_webp.c - WebP through libwebp's animation decoder (libwebpdemux), the path PIL's
 * WebPImagePlugin takes for every WebP, still or animated (Pillow's _webp.c: WebPAnimDecoderNew with
 * the default options, RGBA output, the first frame's canvas). PIL's mode is RGBA when
 * WebPGetFeatures reports alpha, else RGB; its convert("RGB") drops the alpha (kept for
 * composite_alpha). The EXIF chunk, else the "XMP " chunk, gives the orientation. */
#include <string.h>

#include <webp/decode.h>
#include <webp/demux.h>

#include "core/alloc.h"
#include "image/decode_internal.h"

static int orientation_from(const WebPDemuxer *dmx) {
    WebPChunkIterator it;
    int o = 0;
    if (WebPDemuxGetChunk(dmx, "EXIF", 1, &it)) {
        o = mxl_image_exif_orientation(it.chunk.bytes, it.chunk.size);
        WebPDemuxReleaseChunkIterator(&it);
    }
    if (o == 0 && WebPDemuxGetChunk(dmx, "XMP ", 1, &it)) {
        o = mxl_image_xmp_orientation(it.chunk.bytes, it.chunk.size);
        WebPDemuxReleaseChunkIterator(&it);
    }
    return o >= 1 && o <= 8 ? o : 1;
}

mxl_status mxl_image_decode_webp(const uint8_t *data, size_t n, const mxl_image_ctx *c, mxl_image_raw *raw) {
    WebPBitstreamFeatures f;
    VP8StatusCode vs = WebPGetFeatures(data, n, &f);
    if (vs == VP8_STATUS_NOT_ENOUGH_DATA) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: truncated WebP", c->name);
    if (vs != VP8_STATUS_OK) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: corrupt WebP header (libwebp status %d)", c->name, (int)vs);
    /* the animation decoder holds two RGBA canvases */
    mxl_status st = mxl_image_check_size(c, f.width, f.height, 8);
    if (st != MXL_OK) return st;
    WebPData wd = {data, n};
    WebPAnimDecoderOptions opt;
    if (!WebPAnimDecoderOptionsInit(&opt)) return mxl_error_set(c->err, MXL_ERR_INTERNAL, "%s: libwebp version mismatch", c->name);
    opt.color_mode = MODE_RGBA;
    opt.use_threads = 0;
    WebPAnimDecoder *dec = WebPAnimDecoderNew(&wd, &opt);
    if (!dec) return mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: corrupt or truncated WebP (the decoder refused it)", c->name);
    WebPAnimInfo info;
    uint8_t *canvas = NULL;
    int ts = 0;
    if (!WebPAnimDecoderGetInfo(dec, &info) || info.frame_count < 1) {
        st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: WebP without a frame", c->name);
        goto done;
    }
    if ((int64_t)info.canvas_width != f.width || (int64_t)info.canvas_height != f.height) {
        st = mxl_image_check_size(c, info.canvas_width, info.canvas_height, 8);
        if (st != MXL_OK) goto done;
    }
    if (!WebPAnimDecoderGetNext(dec, &canvas, &ts) || !canvas) {
        st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: corrupt or truncated WebP image data", c->name);
        goto done;
    }
    const int32_t w = (int32_t)info.canvas_width, h = (int32_t)info.canvas_height;
    const bool want_alpha = c->lim->composite_alpha && f.has_alpha;
    st = mxl_image_raw_alloc(c, raw, w, h, want_alpha);
    if (st != MXL_OK) goto done;
    const size_t npx = (size_t)w * (size_t)h;
    for (size_t i = 0; i < npx; i++) {
        memcpy(raw->rgb + 3 * i, canvas + 4 * i, 3);
        if (want_alpha) raw->alpha[i] = canvas[4 * i + 3];
    }
    raw->orientation = orientation_from(WebPAnimDecoderGetDemuxer(dec));
done:
    WebPAnimDecoderDelete(dec);
    return st;
}
