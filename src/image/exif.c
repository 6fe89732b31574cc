/* exif.c - the EXIF orientation tag (0x0112) of an image, read the way PIL's Image.getexif does
 * for PIL.ImageOps.exif_transpose: a small bounds-checked TIFF reader over IFD0 of the Exif block
 * (JPEG APP1 "Exif\0\0", PNG eXIf, WebP EXIF), and PIL's fallback to an XMP packet's
 * tiff:Orientation when the EXIF has none. Malformed data never fails a decode: the orientation is
 * then 1 (PIL's IFD loader likewise keeps what it read before a truncation and warns). */
#include <string.h>

#include "image/decode_internal.h"

static uint32_t rd16(const uint8_t *p, bool le) { return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : (uint32_t)p[0] << 8 | p[1]; }
static uint32_t rd32(const uint8_t *p, bool le) {
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int mxl_image_exif_orientation(const uint8_t *p, size_t n) {
    /* PIL strips any number of leading "Exif\0\0" */
    while (n >= 6 && memcmp(p, "Exif\0\0", 6) == 0) p += 6, n -= 6;
    if (n < 8) return 0;
    bool le;
    if (p[0] == 'I' && p[1] == 'I') le = true;
    else if (p[0] == 'M' && p[1] == 'M') le = false;
    else return 0;
    if (rd16(p + 2, le) != 42) return 0; /* (BigTIFF, 43, never appears in an Exif block) */
    uint32_t ifd = rd32(p + 4, le);
    if (ifd > n || n - ifd < 2) return 0;
    uint32_t count = rd16(p + ifd, le);
    int orientation = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t off = (uint64_t)ifd + 2 + (uint64_t)i * 12;
        if (off + 12 > n) break; /* truncated directory: keep what was read */
        const uint8_t *e = p + off;
        if (rd16(e, le) != 0x0112) continue;
        uint32_t type = rd16(e + 2, le), cnt = rd32(e + 4, le);
        int64_t v;
        /* a tuple (count != 1) or a non-integer type maps to no transposition in exif_transpose */
        if (cnt != 1) { orientation = 1; continue; }
        switch (type) {
        case 1: v = e[8]; break;                        /* BYTE */
        case 6: v = (int8_t)e[8]; break;                /* SBYTE */
        case 3: v = rd16(e + 8, le); break;             /* SHORT */
        case 8: v = (int16_t)rd16(e + 8, le); break;    /* SSHORT */
        case 4: v = rd32(e + 8, le); break;             /* LONG */
        case 9: v = (int32_t)rd32(e + 8, le); break;    /* SLONG */
        default: v = 1; break;
        }
        orientation = (v >= 1 && v <= 8) ? (int)v : 1; /* a later duplicate overrides, as in PIL */
    }
    return orientation;
}

int mxl_image_xmp_orientation(const uint8_t *p, size_t n) {
    static const char pat[] = "tiff:Orientation";
    const size_t m = sizeof pat - 1;
    for (size_t i = 0; i + m < n; i++) {
        if (p[i] != 't' || memcmp(p + i, pat, m) != 0) continue;
        size_t j = i + m;
        /* regex tiff:Orientation(="|>)([0-9]) */
        if (j + 2 < n && p[j] == '=' && p[j + 1] == '"' && p[j + 2] >= '0' && p[j + 2] <= '9')
            return p[j + 2] - '0';
        if (j + 1 < n && p[j] == '>' && p[j + 1] >= '0' && p[j + 1] <= '9') return p[j + 1] - '0';
    }
    return 0;
}
