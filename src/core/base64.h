/* base64.h - standard base64 (RFC 4648 alphabet, optional '=' padding) decoding: tokenizer.json's
 * precompiled_charsmap and the server's data: URLs. */
#ifndef MXL_CORE_BASE64_H
#define MXL_CORE_BASE64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes s[0..len) decode to at most (the size out must hold). */
static inline size_t mxl_base64_max_decoded(size_t len) { return len / 4 * 3 + 3; }
/* Decodes s[0..len) into out; false on a character outside the alphabet or data after padding. */
bool mxl_base64_decode(const char *s, size_t len, uint8_t *out, size_t *out_len);

#endif
