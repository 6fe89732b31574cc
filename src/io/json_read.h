/* json_read.h - checkpoint JSON files read the way Python's `json` module reads them.
 *
 * config.json, tokenizer_config.json, generation_config.json, the safetensors index and the other
 * side files of a checkpoint are written by Python (transformers, mlx-lm, sentence-transformers,
 * hand edits), and Python's json accepts more than RFC 8259 and jansson do:
 *   - integers of any size: transformers writes "model_max_length": 1000000000000000019884624838656
 *     (int(1e30), its "no limit") into Llama 2 / Llama 3 / gpt-oss tokenizer configs; jansson
 *     refuses anything past int64. Such an integer is read as a real (the nearest double, as
 *     Python's float() of it); one past the double range reads as +/-Infinity below;
 *   - the literals NaN, Infinity and -Infinity (json.dumps writes them for float('nan') / inf),
 *     and reals past the double range (Python reads 1e400 as inf; jansson refuses it). jansson
 *     cannot hold a non-finite real, so each becomes a tagged string: a NUL byte followed by the
 *     literal ("\0NaN", "\0Infinity", "\0-Infinity"), which no real string value holds and which
 *     json_string_value() shows as "". mxl_json_number() reads them back as numbers;
 *   - a UTF-8 byte-order mark before the text (Windows editors; Python's bytes decoding skips it);
 *   - duplicate keys: the last one wins (jansson does the same unless told to reject them);
 *   - lone UTF-16 surrogates in \u escapes (Python keeps them; jansson refuses): read as U+FFFD.
 * A value a field cannot use is refused by that field's reader, by name, not by the parser.
 *
 * HTTP request bodies do not come through here: the API's JSON is strict JSON. */
#ifndef MXL_IO_JSON_READ_H
#define MXL_IO_JSON_READ_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Parses `text` (len bytes, no terminator needed) as Python's json.loads does. NULL with je set
 * (line, column, text) on malformed JSON. Any top-level value is accepted; callers check its kind. */
json_t *mxl_json_loads_py(const char *text, size_t len, json_error_t *je);

/* json_loadb, whose error text is exactly "out of memory" whenever an allocation failed during
 * the parse (jansson itself may then report "invalid token" or nothing). */
json_t *mxl_json_loadb(const char *text, size_t len, size_t flags, json_error_t *je);
/* The parse failed for want of memory (mxl_json_loadb / mxl_json_loads_py). */
bool mxl_json_error_is_oom(const json_error_t *je);

/* The size limit for a checkpoint's side files (tokenizer_config.json, generation_config.json,
 * chat_template.json): a few KB, a Gemma tokenizer_config.json with its added tokens over 1 MB. */
#define MXL_JSON_SIDE_FILE_MAX (64u << 20)

/* Reads and parses the file at `path` (at most max_bytes). On failure *out is NULL and err says
 * "<path>: invalid JSON at line L column C: ..." or why the file could not be read. */
mxl_status mxl_json_load_file_py(const char *path, size_t max_bytes, json_t **out, mxl_error *err);

/* The numeric value of v: an integer, a real, or one of the tagged NaN / +-Infinity strings.
 * False (out untouched) for anything else. */
bool mxl_json_number(const json_t *v, double *out);

/* Reads v as an integer in [lo, hi]: 0 ok (integral reals such as 2.0 count, as Python's int()
 * of them would), 1 not an integral number, 2 outside [lo, hi] (huge integers included). */
int mxl_json_int(const json_t *v, int64_t lo, int64_t hi, int64_t *out);

#endif
