/* utf8.h - UTF-8 encoding of one code point, shared by the tokenizer and the template engine. */
#ifndef MXL_CORE_UTF8_H
#define MXL_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Writes the UTF-8 bytes of cp to out and returns their count (1-4). Values that are not Unicode
 * scalar values (negative, above U+10FFFF) are written as U+FFFD. */
size_t mxl_utf8_encode(int64_t cp, char out[4]);

#endif
