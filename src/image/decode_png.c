/* decode_png.c - PNG through libpng, to what PIL's PngImagePlugin + convert("RGB") give
 * (PIL's modes per bit depth / colour type, PngImagePlugin._MODES):
 *   - gray 1/2/4/8 bit: "1" / "L;2" / "L;4" / "L", scaled to 0..255 (libpng's expand_gray_1_2_4_to_8
 *     scales the same way: v * 255 / (2^bits - 1)), replicated to RGB;
 *   - gray 16 bit: PIL's "I;16", whose convert("RGB") clips the 16-bit value to 255 (Convert.c
 *     I16_RGB), not its high byte;
 *   - RGB / RGBA / gray+alpha 16 bit: PIL's "RGB;16B", "RGBA;16B", "LA;16B" keep the high byte
 *     (libpng's png_set_strip_16);
 *   - palette 1/2/4/8 bit: indices looked up in the PLTE, entries past its end black (PIL's palette
 *     starts zeroed, Palette.c);
 *   - tRNS: on a palette with exactly one fully transparent entry and the rest opaque PIL keeps the
 *     index, which convert("RGB") turns into that entry's colour (the key); any other palette tRNS
 *     PIL drops on convert("RGB") (alpha only with composite_alpha). On gray / RGB the tRNS value is
 *     the key, compared as PIL does: the raw tRNS sample against the 8-bit pixels (so a 2/4-bit
 *     gray key is not scaled, a 16-bit one only ever matches 0).
 * eXIf (before or after IDAT) or else the XMP iTXt "XML:com.adobe.xmp" gives the orientation.
 * A corrupt or truncated image is an error; a corrupt chunk after the pixels only loses what it held
 * (PIL reads those chunks leniently too). libpng's errors longjmp back here; everything we allocate
 * hangs off the decoder state and is freed on that path. */
#include <setjmp.h>
#include <string.h>

#include <png.h>

#include "core/alloc.h"
#include "image/decode_internal.h"

typedef struct png_src {
    const uint8_t *data;
    size_t n, pos;
} png_src;

typedef struct png_state {
    png_structp png;
    png_infop info;
    png_src src;
    const mxl_image_ctx *c;
    uint8_t *pix;       /* [h, rowbytes] as libpng delivers */
    png_bytep *rows;    /* [h] into pix */
    char msg[200];      /* libpng's error text */
    bool pixels_done;
} png_state;

static void on_read(png_structp png, png_bytep out, size_t len) {
    png_src *s = png_get_io_ptr(png);
    if (len > s->n - s->pos) png_error(png, "data ends early (truncated PNG)");
    memcpy(out, s->data + s->pos, len);
    s->pos += len;
}

static void on_error(png_structp png, png_const_charp msg) {
    png_state *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg ? msg : "error");
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; /* silent */ }

static int orientation_from(png_state *s) {
    png_uint_32 en = 0;
    png_bytep ex = NULL;
    int o = 0;
    if (png_get_eXIf_1(s->png, s->info, &en, &ex) && ex) o = mxl_image_exif_orientation(ex, en);
    if (o == 0) {
        png_textp text = NULL;
        int nt = 0;
        png_get_text(s->png, s->info, &text, &nt);
        for (int i = 0; i < nt; i++)
            if (text[i].key && strcmp(text[i].key, "XML:com.adobe.xmp") == 0) {
                size_t len = text[i].compression >= PNG_ITXT_COMPRESSION_NONE ? text[i].itxt_length : text[i].text_length;
                if (text[i].text) o = mxl_image_xmp_orientation((const uint8_t *)text[i].text, len);
                break;
            }
    }
    return o >= 1 && o <= 8 ? o : 1;
}

/* Pixels of the libpng rows -> raw (rgb, alpha when asked, key). */
static void convert_rows(png_state *s, mxl_image_raw *raw, int color, int depth, bool want_alpha) {
    const int32_t w = raw->w, h = raw->h;
    png_colorp pal = NULL;
    int npal = 0;
    uint8_t lut[256][3];
    memset(lut, 0, sizeof lut);
    if (color == PNG_COLOR_TYPE_PALETTE && png_get_PLTE(s->png, s->info, &pal, &npal) && pal)
        for (int i = 0; i < npal && i < 256; i++) lut[i][0] = pal[i].red, lut[i][1] = pal[i].green, lut[i][2] = pal[i].blue;
    png_bytep trns = NULL;
    int ntrns = 0;
    png_color_16p tc = NULL;
    const bool has_trns = png_get_tRNS(s->png, s->info, &trns, &ntrns, &tc) != 0;
    /* palette: PIL's _simple_palette (^\xff*\x00\xff*$) keeps one index */
    int key_index = -1;
    if (color == PNG_COLOR_TYPE_PALETTE && has_trns && trns) {
        int zeros = 0, others = 0, at = -1;
        for (int i = 0; i < ntrns; i++) {
            if (trns[i] == 0) zeros++, at = at < 0 ? i : at;
            else if (trns[i] != 255) others++;
        }
        if (zeros == 1 && others == 0) {
            key_index = at;
            raw->has_key = true;
            raw->key[0] = lut[at][0], raw->key[1] = lut[at][1], raw->key[2] = lut[at][2];
        }
    } else if (has_trns && tc && color == PNG_COLOR_TYPE_GRAY) {
        int32_t t = tc->gray;
        if (depth == 1) t = t ? 255 : 0;
        raw->has_key = true;
        if (depth == 16) raw->key[0] = raw->key[1] = raw->key[2] = t == 0 ? 0 : -1; /* only (t, 0, 0) = 0 matches */
        else raw->key[0] = raw->key[1] = raw->key[2] = t;
    } else if (has_trns && tc && color == PNG_COLOR_TYPE_RGB) {
        raw->has_key = true;
        raw->key[0] = tc->red, raw->key[1] = tc->green, raw->key[2] = tc->blue;
    }
    for (int32_t y = 0; y < h; y++) {
        const uint8_t *r = s->rows[y];
        uint8_t *o = raw->rgb + (size_t)y * (size_t)w * 3;
        uint8_t *a = want_alpha ? raw->alpha + (size_t)y * (size_t)w : NULL;
        for (int32_t x = 0; x < w; x++) {
            uint8_t *p = o + 3 * x;
            uint8_t av = 255;
            switch (color) {
            case PNG_COLOR_TYPE_GRAY:
                if (depth == 16) {
                    unsigned v = (unsigned)r[2 * x] << 8 | r[2 * x + 1];
                    p[0] = p[1] = p[2] = (uint8_t)(v > 255 ? 255 : v);
                } else {
                    p[0] = p[1] = p[2] = r[x];
                }
                break;
            case PNG_COLOR_TYPE_GRAY_ALPHA: p[0] = p[1] = p[2] = r[2 * x], av = r[2 * x + 1]; break;
            case PNG_COLOR_TYPE_RGB: memcpy(p, r + 3 * x, 3); break;
            case PNG_COLOR_TYPE_RGB_ALPHA: memcpy(p, r + 4 * x, 3), av = r[4 * x + 3]; break;
            default: { /* palette */
                int idx = r[x];
                memcpy(p, lut[idx], 3);
                if (key_index >= 0) av = idx == key_index ? 0 : 255;
                else if (has_trns && trns && idx < ntrns) av = trns[idx];
                break;
            }
            }
            if (a) {
                if (raw->has_key && color != PNG_COLOR_TYPE_PALETTE)
                    av = (p[0] == raw->key[0] && p[1] == raw->key[1] && p[2] == raw->key[2]) ? 0 : 255;
                a[x] = av;
            }
        }
    }
}

mxl_status mxl_image_decode_png(const uint8_t *data, size_t n, const mxl_image_ctx *c, mxl_image_raw *raw) {
    png_state *s = mxl_calloc(1, sizeof *s);
    if (!s) return mxl_error_set(c->err, MXL_ERR_NOMEM, "%s: out of memory", c->name);
    volatile mxl_status st = MXL_OK;
    s->c = c;
    s->src = (png_src){data, n, 0};
    s->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, s, on_error, on_warning);
    if (!s->png) {
        mxl_free(s);
        return mxl_error_set(c->err, MXL_ERR_NOMEM, "%s: out of memory", c->name);
    }
    s->info = png_create_info_struct(s->png);
    if (!s->info) {
        st = mxl_error_set(c->err, MXL_ERR_NOMEM, "%s: out of memory", c->name);
        goto done;
    }
    if (setjmp(png_jmpbuf(s->png))) {
        if (s->pixels_done) {
            /* a bad chunk after the image data: keep the pixels (PIL's load_end stops there) */
            raw->orientation = orientation_from(s);
            goto done;
        }
        st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: corrupt PNG: %s", c->name, s->msg);
        goto done;
    }
    png_set_read_fn(s->png, &s->src, on_read);
    /* our limits are checked below, with our message; libpng's defaults (1000000) would refuse first */
    png_set_user_limits(s->png, 0x7fffffffu, 0x7fffffffu);
    png_set_benign_errors(s->png, 1);
    png_read_info(s->png, s->info);
    png_uint_32 w32, h32;
    int depth, color, interlace;
    png_get_IHDR(s->png, s->info, &w32, &h32, &depth, &color, &interlace, NULL, NULL);
    st = mxl_image_check_size(c, w32, h32, 4);
    if (st != MXL_OK) goto done;
    if (depth < 8) {
        if (color == PNG_COLOR_TYPE_GRAY) png_set_expand_gray_1_2_4_to_8(s->png);
        else png_set_packing(s->png);
    }
    if (depth == 16 && color != PNG_COLOR_TYPE_GRAY) png_set_strip_16(s->png);
    png_set_interlace_handling(s->png);
    png_read_update_info(s->png, s->info);
    const size_t rowbytes = png_get_rowbytes(s->png, s->info);
    const size_t need = (color == PNG_COLOR_TYPE_GRAY && depth == 16) ? 2u * w32
                        : (size_t)w32 * (color == PNG_COLOR_TYPE_RGB_ALPHA ? 4 : color == PNG_COLOR_TYPE_RGB ? 3 : color == PNG_COLOR_TYPE_GRAY_ALPHA ? 2 : 1);
    if (rowbytes < need || rowbytes > 8 * (size_t)w32) {
        st = mxl_error_set(c->err, MXL_ERR_FORMAT, "%s: unexpected PNG row size %zu for width %u", c->name, rowbytes, (unsigned)w32);
        goto done;
    }
    s->pix = mxl_malloc(rowbytes * h32);
    s->rows = mxl_malloc(sizeof *s->rows * h32);
    if (!s->pix || !s->rows) {
        st = mxl_error_set(c->err, MXL_ERR_NOMEM, "%s: out of memory for a %ux%u PNG", c->name, (unsigned)w32, (unsigned)h32);
        goto done;
    }
    for (png_uint_32 y = 0; y < h32; y++) s->rows[y] = s->pix + (size_t)y * rowbytes;
    png_read_image(s->png, s->rows);
    st = mxl_image_raw_alloc(c, raw, (int32_t)w32, (int32_t)h32, c->lim->composite_alpha);
    if (st != MXL_OK) goto done;
    convert_rows(s, raw, color, depth, c->lim->composite_alpha);
    s->pixels_done = true;
    png_read_end(s->png, s->info); /* eXIf / iTXt after the image data */
    raw->orientation = orientation_from(s);
done:
    png_destroy_read_struct(&s->png, s->info ? &s->info : NULL, NULL);
    mxl_free(s->pix);
    mxl_free(s->rows);
    if (st != MXL_OK) mxl_image_raw_free(raw);
    mxl_free(s);
    return st;
}
