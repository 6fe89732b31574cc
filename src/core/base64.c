/* base64.c - base64 decoding (see base64.h). */
#include "core/base64.h"

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

bool mxl_base64_decode(const char *s, size_t len, uint8_t *out, size_t *out_len) {
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0, i = 0;
    for (; i < len && s[i] != '='; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    for (; i < len; i++)
        if (s[i] != '=') return false;
    *out_len = n;
    return true;
}
