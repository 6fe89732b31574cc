/* decode_jpeg.c - JPEG through libjpeg(-turbo) with the settings PIL's JpegDecode.c leaves (ISLOW
 * DCT, fancy upsampling, libjpeg's own guess of the colour space), to what PIL gives:
 *   - 1 component: L, replicated to RGB;
 *   - 3 components: libjpeg's RGB output (out_color_space JCS_RGB, as PIL's rawmode "RGB");
 *   - 4 components: libjpeg's CMYK output (YCCK converted by libjpeg), inverted as PIL's rawmode
 *     "CMYK;I" does ("assume adobe conventions", always), then PIL's Convert.c cmyk2rgb:
 *     nk = 255 - K, R = CLIP8(nk - MULDIV255(C, nk)).
 * PIL refuses other component counts and bit depths other than 8; so do we. A stream that ends
 * early is an error, as in PIL ("image file is truncated"); libjpeg's other warnings (corrupt data
 * it recovers from) are not, as in PIL. The Exif (APP1 "Exif\0\0", several concatenated as PIL does)
 * and XMP (APP1 "http://ns.adobe.com/xap/1.0/\0") markers give the orientation.
 * Errors unwind with setjmp/longjmp from libjpeg's error_exit; every allocation of ours is reachable
 * from the decoder state and freed on that path. */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "core/alloc.h"
#include "image/decode_internal.h"

typedef struct jpeg_err {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    bool eof; /* libjpeg met the end of the data before the image was complete */
} jpeg_err;

static void on_error_exit(j_common_ptr cinfo) {
    jpeg_err *e = (jpeg_err *)cinfo->err;
    longjmp(e->jump, 1);
}

static void on_emit_message(j_common_ptr cinfo, int level) {
    jpeg_err *e = (jpeg_err *)cinfo->err;
    if (level < 0 && e->pub.msg_code == JWRN_JPEG_EOF) e->eof = true;
    if (level < 0) e->pub.num_warnings++;
}

static void on_output_message(j_common_ptr cinfo) { (void)cinfo; /* never print */ }

/* The Exif blocks PIL concatenates (first whole, the rest without their "Exif\0\0"), and the XMP. */
static int orientation_from_markers(struct jpeg_decompress_struct *ci) {
    size_t total = 0;
    for (jpeg_saved_marker_ptr m = ci->marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && memcmp(m->data, "Exif\0\0", 6) == 0) total += m->data_length;
    int o = 0;
    if (total) {
        uint8_t *buf = mxl_malloc(total);
        if (buf) {
            size_t at = 0;
            for (jpeg_saved_marker_ptr m = ci->marker_list; m; m = m->next)
                if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && memcmp(m->data, "Exif\0\0", 6) == 0) {
                    size_t skip = at ? 6 : 0;
                    memcpy(buf + at, m->data + skip, m->data_length - skip);
                    at += m->data_length - skip;
                }
            o = mxl_image_exif_orientation(buf, at);
            mxl_free(buf);
        }
    }
    if (o == 0) {
        static const char xmp_id[] = "http://ns.adobe.com/xap/1.0/";
        const uint8_t *xp = NULL;
        size_t xn = 0;
        for (jpeg_saved_marker_ptr m = ci->marker_list; m; m = m->next)
            if (m->marker == JPEG_APP0 + 1 && m->data_length >= sizeof xmp_id && memcmp(m->data, xmp_id, sizeof xmp_id) == 0)
                xp = m->data + sizeof xmp_id, xn = m->data_length - sizeof xmp_id; /* PIL keeps the last */
        if (xp) o = mxl_image_xmp_orientation(xp, xn);
    }
    return o >= 1 && o <= 8 ? o : 1;
}

typedef struct jpeg_state {
    struct jpeg_decompress_struct ci;
    jpeg_err jerr;
    uint8_t *row;
} jpeg_state;

mxl_status mxl_image_decode_jpeg(const uint8_t *data, size_t n, const mxl_image_ctx *c, mxl_image_raw *raw) {
    if (n > (size_t)0xFFFFFFFFu) return mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: JPEG data over 4 GiB", c->name);
    jpeg_state *s = mxl_calloc(1, sizeof *s);
    if (!s) return mxl_error_set(c->err, MXL_ERR_NOMEM, "%s: out of memory", c->name);
    volatile mxl_status st = MXL_OK;
    s->ci.err = jpeg_std_error(&s->jerr.pub);
    s->jerr.pub.error_exit = on_error_exit;
    s->jerr.pub.emit_message = on_emit_message;
    s->jerr.pub.output_message = on_output_message;
    if (setjmp(s->jerr.jump)) {
        char msg[JMSG_LENGTH_MAX];
        s->jerr.pub.format_message((j_common_ptr)&s->ci, msg);
        st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: corrupt JPEG: %s", c->name, msg);
        goto done;
    }
    jpeg_create_decompress(&s->ci);
    s->ci.mem->max_memory_to_use = (long)(c->lim->max_decode_bytes > 0x7FFFFFFFu ? 0x7FFFFFFF : c->lim->max_decode_bytes);
    jpeg_mem_src(&s->ci, data, (unsigned long)n);
    jpeg_save_markers(&s->ci, JPEG_APP0 + 1, 0xFFFF);
    if (jpeg_read_header(&s->ci, TRUE) != JPEG_HEADER_OK || s->jerr.eof) {
        st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: truncated JPEG (no complete header)", c->name);
        goto done;
    }
    const int comps = s->ci.num_components;
    if (s->ci.data_precision != 8) {
        st = mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: %d-bit JPEG samples are not supported (8 only, as in PIL)", c->name, s->ci.data_precision);
        goto done;
    }
    if (comps != 1 && comps != 3 && comps != 4) {
        st = mxl_error_set(c->err, MXL_ERR_UNSUPPORTED, "%s: JPEG with %d components is not supported (1, 3 or 4)", c->name, comps);
        goto done;
    }
    /* progressive images hold every coefficient (2 bytes a sample) while decoding */
    st = mxl_image_check_size(c, s->ci.image_width, s->ci.image_height, s->ci.progressive_mode ? comps * 2 : comps);
    if (st != MXL_OK) goto done;
    s->ci.out_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
    s->ci.dct_method = JDCT_ISLOW;
    s->ci.do_fancy_upsampling = TRUE;
    jpeg_start_decompress(&s->ci);
    const int32_t w = (int32_t)s->ci.output_width, h = (int32_t)s->ci.output_height;
    if (s->ci.output_components != comps) {
        st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: JPEG decoder gave %d components for %d", c->name, s->ci.output_components, comps);
        goto done;
    }
    s->row = mxl_malloc((size_t)w * (size_t)comps);
    if (!s->row) {
        st = mxl_error_set(c->err, MXL_ERR_NOMEM, "%s: out of memory", c->name);
        goto done;
    }
    st = mxl_image_raw_alloc(c, raw, w, h, false);
    if (st != MXL_OK) goto done;
    while (s->ci.output_scanline < s->ci.output_height) {
        const int32_t y = (int32_t)s->ci.output_scanline;
        JSAMPROW rp = s->row;
        if (jpeg_read_scanlines(&s->ci, &rp, 1) != 1) break;
        uint8_t *o = raw->rgb + (size_t)y * (size_t)w * 3;
        const uint8_t *r = s->row;
        if (comps == 1)
            for (int32_t x = 0; x < w; x++) o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = r[x];
        else if (comps == 3)
            memcpy(o, r, (size_t)w * 3);
        else
            for (int32_t x = 0; x < w; x++) {
                /* CMYK;I then cmyk2rgb (MULDIV255(a, b) = (t = a*b + 128, ((t >> 8) + t) >> 8)) */
                int nk = r[4 * x + 3]; /* 255 - (255 - k) */
                for (int ch = 0; ch < 3; ch++) {
                    int cc = 255 - r[4 * x + ch];
                    int t = cc * nk + 128;
                    int v = nk - (((t >> 8) + t) >> 8);
                    o[3 * x + ch] = (uint8_t)(v <= 0 ? 0 : v < 256 ? v : 255);
                }
            }
    }
    if (s->jerr.eof || s->ci.output_scanline < s->ci.output_height) {
        st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: truncated JPEG (data ends before the image is complete)", c->name);
        goto done;
    }
    raw->orientation = orientation_from_markers(&s->ci);
    /* jpeg_finish_decompress is skipped: trailing data after the image is no error (PIL ignores it) */
done:
    jpeg_destroy_decompress(&s->ci);
    mxl_free(s->row);
    if (st != MXL_OK) mxl_image_raw_free(raw);
    mxl_free(s);
    return st;
}
